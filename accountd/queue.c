
/*
 * What the workers' connections received for the database, oldest first.
 * Records received and not yet committed: a ring of queue_max items
 * allocated once.  The database writes from the head; the connections add
 * at the tail and stop reading when the ring is full, so that the
 * backpressure reaches the nginx workers.
 *
 * Lease requests wait in a ring of their own, QUEUE_LEASES_MAX long: a
 * worker waits for its answer, so they go to the database before any
 * batch, and a full ring of records must not hold them up.
 */


#include <stdlib.h>

#include "accountd.h"
#include "queue.h"


static acd_item_t  *queue_items;
static size_t       queue_cap;
static size_t       queue_head;
static size_t       queue_count;

static acd_lease_item_t  queue_leases[QUEUE_LEASES_MAX];
static size_t            queue_leases_head;
static size_t            queue_leases_n;


int
queue_init(size_t max)
{
    queue_items = calloc(max, sizeof(acd_item_t));
    if (queue_items == NULL) {
        return -1;
    }

    queue_cap = max;
    queue_head = 0;
    queue_count = 0;

    return 0;
}


size_t
queue_len(void)
{
    return queue_count;
}


int
queue_full(void)
{
    return queue_count == queue_cap;
}


/*
 * Reading resumes only when a quarter of the ring is free again, so that
 * clients are not switched on and off for every batch.
 */

int
queue_has_room(void)
{
    return queue_count <= queue_cap - queue_cap / 4;
}


acd_item_t *
queue_push(void)
{
    acd_item_t  *item;

    if (queue_count == queue_cap) {
        return NULL;
    }

    item = &queue_items[(queue_head + queue_count) % queue_cap];
    queue_count++;

    return item;
}


acd_item_t *
queue_at(size_t i)
{
    if (i >= queue_count) {
        return NULL;
    }

    return &queue_items[(queue_head + i) % queue_cap];
}


void
queue_pop(size_t n)
{
    if (n > queue_count) {
        n = queue_count;
    }

    queue_head = (queue_head + n) % queue_cap;
    queue_count -= n;
}


/* NULL if QUEUE_LEASES_MAX requests wait already */

acd_lease_item_t *
queue_lease_push(void)
{
    acd_lease_item_t  *l;

    if (queue_leases_n == QUEUE_LEASES_MAX) {
        return NULL;
    }

    l = &queue_leases[(queue_leases_head + queue_leases_n)
                      % QUEUE_LEASES_MAX];
    queue_leases_n++;

    return l;
}


/* the oldest request, or NULL */

acd_lease_item_t *
queue_lease_head(void)
{
    return queue_leases_n ? &queue_leases[queue_leases_head] : NULL;
}


void
queue_lease_pop(void)
{
    if (queue_leases_n) {
        queue_leases_head = (queue_leases_head + 1) % QUEUE_LEASES_MAX;
        queue_leases_n--;
    }
}
