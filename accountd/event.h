
/*
 * accountd's event.c: epoll, the events, the clock.
 */

#ifndef _ACCOUNTD_EVENT_H_INCLUDED_
#define _ACCOUNTD_EVENT_H_INCLUDED_


#include "accountd.h"


typedef struct acd_event_s  acd_event_t;

typedef void (*acd_event_handler_pt)(acd_event_t *ev, uint32_t events);

struct acd_event_s {
    int                    fd;
    uint32_t               events;
    unsigned               active:1;
    acd_event_handler_pt   handler;
    void                  *data;
};

extern int  acd_shutting_down;

int event_init(void);
void event_done(void);
int event_set(acd_event_t *ev, uint32_t events);
void event_del(acd_event_t *ev);
int64_t event_now(void);
int event_process(int64_t at);


#endif /* _ACCOUNTD_EVENT_H_INCLUDED_ */
