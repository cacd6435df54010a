
/*
 * accountd's queue.c: records and lease requests on their way to the database.
 */

#ifndef _ACCOUNTD_QUEUE_H_INCLUDED_
#define _ACCOUNTD_QUEUE_H_INCLUDED_


#include "accountd.h"


#define QUEUE_LEASES_MAX          1024

typedef struct {
    llm_record_t    rec;
    acd_client_t   *client;
} acd_item_t;

typedef struct {
    llm_lease_t     req;
    acd_client_t   *client;
} acd_lease_item_t;

int queue_init(size_t max);
size_t queue_len(void);
int queue_full(void);
int queue_has_room(void);
acd_item_t *queue_push(void);
acd_item_t *queue_at(size_t i);
void queue_pop(size_t n);
acd_lease_item_t *queue_lease_push(void);
acd_lease_item_t *queue_lease_head(void);
void queue_lease_pop(void);


#endif /* _ACCOUNTD_QUEUE_H_INCLUDED_ */
