
/*
 * The journal of settle records; see llm_journal.h.  Every function runs
 * under the caller's lock and does no I/O.
 */


#include <string.h>

#include "llm_journal.h"


static llm_journal_entry_t *llm_journal_entry(const llm_journal_t *j,
    uint64_t pos);
static uint64_t llm_journal_next(const llm_journal_t *j, uint64_t pos);
static void llm_journal_reclaim(llm_journal_t *j);


static llm_journal_entry_t *
llm_journal_entry(const llm_journal_t *j, uint64_t pos)
{
    return (llm_journal_entry_t *) (j->ring + pos % j->size);
}


/* the position after the entry at pos; padding runs to the ring's end */

static uint64_t
llm_journal_next(const llm_journal_t *j, uint64_t pos)
{
    llm_journal_entry_t  *e;

    e = llm_journal_entry(j, pos);

    if (e->len == 0) {
        return pos + j->size - pos % j->size;
    }

    return pos + llm_journal_entry_size(e->len);
}


int
llm_journal_init(llm_journal_t *j, uint8_t *ring, size_t size)
{
    if (size < 2 * LLM_JOURNAL_PLACE || size % 16) {
        return -1;
    }

    memset(j, 0, sizeof(llm_journal_t));

    j->version = LLM_JOURNAL_VERSION;
    j->size = size;
    j->ring = ring;

    return 0;
}


/* one place's worth more is always left for the padding at the ring's end */

int
llm_journal_hold(llm_journal_t *j)
{
    if ((j->tail - j->head) + j->held + 2 * LLM_JOURNAL_PLACE > j->size) {
        return 0;
    }

    j->held += LLM_JOURNAL_PLACE;

    return 1;
}


void
llm_journal_unhold(llm_journal_t *j)
{
    j->held -= LLM_JOURNAL_PLACE;
}


int
llm_journal_write(llm_journal_t *j, const uint8_t *frame, size_t len,
    int held)
{
    size_t                need, room, rest;
    llm_journal_entry_t  *e;

    if (held) {
        j->held -= LLM_JOURNAL_PLACE;
    }

    need = llm_journal_entry_size(len);

    /* what is free, less the places requests hold */
    room = j->size - (j->tail - j->head);
    room = (room > j->held) ? room - j->held : 0;

    /*
     * A record without a place (full=admit) leaves the one place's worth
     * that hold() keeps for the padding a held record may need: taken, a
     * held record that must wrap would be lost.
     */
    if (!held && j->held) {
        room = (room > LLM_JOURNAL_PLACE) ? room - LLM_JOURNAL_PLACE : 0;
    }

    rest = j->size - j->tail % j->size;

    if (rest < need) {
        /* the rest of the ring is padding: the entry goes at its start */
        if (room < rest + need) {
            goto full;
        }

        e = llm_journal_entry(j, j->tail);
        e->len = 0;
        e->state = LLM_JOURNAL_ACKED;

        room -= rest;
        j->tail += rest;
    }

    if (len == 0 || len > LLM_RECORD_MAX_FRAME || room < need) {
        goto full;
    }

    e = llm_journal_entry(j, j->tail);
    e->len = (uint32_t) len;
    e->state = LLM_JOURNAL_PENDING;
    e->owner = 0;
    memcpy((uint8_t *) e + sizeof(llm_journal_entry_t), frame, len);

    j->tail += need;
    j->written++;

    return 0;

full:

    j->lost++;

    return -1;
}


/* acknowledged entries at the head, and padding, make room again */

static void
llm_journal_reclaim(llm_journal_t *j)
{
    llm_journal_entry_t  *e;

    while (j->head < j->tail) {
        e = llm_journal_entry(j, j->head);

        if (e->len != 0 && e->state != LLM_JOURNAL_ACKED) {
            break;
        }

        j->head = llm_journal_next(j, j->head);
    }

    if (j->unsent < j->head) {
        j->unsent = j->head;
    }
}


size_t
llm_journal_claim(llm_journal_t *j, int32_t owner, llm_journal_window_t *w,
    uint8_t *out, size_t cap)
{
    size_t                n;
    uint64_t              pos;
    llm_journal_entry_t  *e;

    n = 0;
    pos = (j->unsent > j->head) ? j->unsent : j->head;

    while (pos < j->tail) {
        e = llm_journal_entry(j, pos);

        if (e->len != 0 && e->state == LLM_JOURNAL_PENDING) {

            if (cap - n < e->len || w->n == w->cap) {
                break;
            }

            memcpy(out + n, (uint8_t *) e + sizeof(llm_journal_entry_t),
                   e->len);
            n += e->len;

            e->state = LLM_JOURNAL_SENT;
            e->owner = owner;

            w->pos[(w->head + w->n) % w->cap] = pos;
            w->n++;
        }

        pos = llm_journal_next(j, pos);
    }

    /* all before pos is claimed; a full window stops at a pending one */
    j->unsent = pos;

    return n;
}


int
llm_journal_ack(llm_journal_t *j, int32_t owner, llm_journal_window_t *w,
    const uint8_t *request_id, size_t len)
{
    size_t                used;
    llm_record_t          rec;
    llm_journal_entry_t  *e;

    if (w->n == 0) {
        return -1;
    }

    e = llm_journal_entry(j, w->pos[w->head]);

    if (e->state != LLM_JOURNAL_SENT || e->owner != owner
        || llm_record_decode((uint8_t *) e + sizeof(llm_journal_entry_t),
                             e->len, &rec, &used)
           != 1
        || rec.request_id_len != len
        || memcmp(rec.request_id, request_id, len) != 0)
    {
        return -1;
    }

    e->state = LLM_JOURNAL_ACKED;
    j->acked++;

    w->head = (w->head + 1) % w->cap;
    w->n--;

    llm_journal_reclaim(j);

    return 0;
}


void
llm_journal_release(llm_journal_t *j, int32_t owner, llm_journal_window_t *w)
{
    size_t                i;
    uint64_t              pos;
    llm_journal_entry_t  *e;

    for (i = 0; i < w->n; i++) {
        pos = w->pos[(w->head + i) % w->cap];
        e = llm_journal_entry(j, pos);

        if (e->state == LLM_JOURNAL_SENT && e->owner == owner) {
            e->state = LLM_JOURNAL_PENDING;

            if (pos < j->unsent) {
                j->unsent = pos;
            }
        }
    }

    w->head = 0;
    w->n = 0;
}


/*
 * Owners come and go one at a time: the last one found alive and the last
 * one found dead are remembered, so that a pass asks about each rarely.
 */

size_t
llm_journal_reap(llm_journal_t *j, int32_t self, llm_journal_alive_pt alive,
    void *data, int32_t *dead)
{
    size_t                n;
    int32_t               live, gone;
    uint64_t              pos;
    llm_journal_entry_t  *e;

    n = 0;
    live = 0;
    gone = 0;

    for (pos = j->head; pos < j->tail; pos = llm_journal_next(j, pos)) {
        e = llm_journal_entry(j, pos);

        if (e->len == 0 || e->state != LLM_JOURNAL_SENT || e->owner == self
            || e->owner == live)
        {
            continue;
        }

        if (e->owner == gone || !alive(e->owner, data)) {
            gone = e->owner;
            e->state = LLM_JOURNAL_PENDING;
            n++;

            if (pos < j->unsent) {
                j->unsent = pos;
            }

        } else {
            live = e->owner;
        }
    }

    *dead = gone;

    return n;
}


size_t
llm_journal_adopt(llm_journal_t *j, int32_t owner)
{
    size_t                n;
    uint64_t              pos;
    llm_journal_entry_t  *e;

    n = 0;

    for (pos = j->head; pos < j->tail; pos = llm_journal_next(j, pos)) {
        e = llm_journal_entry(j, pos);

        if (e->len != 0 && e->state == LLM_JOURNAL_SENT
            && e->owner == owner)
        {
            e->state = LLM_JOURNAL_PENDING;
            n++;

            if (pos < j->unsent) {
                j->unsent = pos;
            }
        }
    }

    return n;
}


void
llm_journal_stats(const llm_journal_t *j, llm_journal_stats_t *st)
{
    st->written = j->written;
    st->acked = j->acked;
    st->lost = j->lost;
    st->refused = j->refused;
    st->size = j->size;
    st->used = (size_t) (j->tail - j->head);
    st->held = j->held;
}

