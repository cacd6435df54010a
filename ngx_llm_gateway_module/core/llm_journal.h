
/*
 * The journal of settle records: a ring that nginx keeps in shared memory
 * and that every worker writes to and sends from, until accountd has
 * acknowledged each record.  Plain C, no nginx types: the caller gives the
 * memory, holds the lock around every call, and says which owners (worker
 * processes) are alive.
 *
 * An entry is a 16-byte header and one record frame, 16-byte aligned; an
 * entry never wraps, the end of the ring is padded instead.  Positions
 * are logical and only grow; an entry is at pos % size.
 *
 *     PENDING  written, to be sent by any owner
 *     SENT     claimed by one owner, who sent it and waits for its ACK
 *     ACKED    committed by accountd; reclaimed once it reaches the head
 *
 * Every admitted request holds a place (LLM_JOURNAL_PLACE bytes) from
 * admission to its record, so that its record always fits.
 */

#ifndef _LLM_JOURNAL_H_INCLUDED_
#define _LLM_JOURNAL_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>

#include "llm_record.h"


#define LLM_JOURNAL_VERSION       1

#define LLM_JOURNAL_PENDING       0
#define LLM_JOURNAL_SENT          1
#define LLM_JOURNAL_ACKED         2


typedef struct {
    uint32_t   len;              /* of the frame; 0: padding */
    uint32_t   state;
    int32_t    owner;            /* who sent it (a pid in nginx) */
    uint32_t   reserved;
} llm_journal_entry_t;


#define llm_journal_entry_size(len)                                           \
    ((sizeof(llm_journal_entry_t) + (size_t) (len) + 15) & ~(size_t) 15)

/* what a request holds: the largest entry */
#define LLM_JOURNAL_PLACE         llm_journal_entry_size(LLM_RECORD_MAX_FRAME)


/* in shared memory; the layout of version 1, which a reload keeps */
typedef struct {
    uintptr_t  version;
    size_t     size;
    uint64_t   head;             /* the oldest entry kept */
    uint64_t   tail;             /* where the next one goes */
    uint64_t   unsent;           /* nothing pending before it */
    size_t     held;             /* bytes held for requests' records */
    uint64_t   written;
    uint64_t   acked;
    uint64_t   lost;
    uint64_t   refused;
    uint8_t   *ring;
} llm_journal_t;


/* one owner's sent and unacknowledged positions, oldest first: a ring */
typedef struct {
    uint64_t  *pos;
    size_t     cap;
    size_t     head;
    size_t     n;
} llm_journal_window_t;


typedef struct {
    uint64_t   written;
    uint64_t   acked;
    uint64_t   lost;
    uint64_t   refused;
    size_t     size;
    size_t     used;
    size_t     held;
} llm_journal_stats_t;


/* 1 if owner is alive; asked by the reaper at most once an owner a pass */
typedef int (*llm_journal_alive_pt)(int32_t owner, void *data);


/*
 * An empty journal on size bytes of ring, a multiple of 16.  -1 when the
 * ring cannot take two places.
 */
int llm_journal_init(llm_journal_t *j, uint8_t *ring, size_t size);

/* a place for a request's record: 1, or 0 when none is left */
int llm_journal_hold(llm_journal_t *j);

/* a request that will not be recorded gives its place back */
void llm_journal_unhold(llm_journal_t *j);

/*
 * A record's frame into the journal, PENDING; held says that the request
 * holds a place, which this gives back.  0, or -1 when it did not fit
 * (counted in lost).
 */
int llm_journal_write(llm_journal_t *j, const uint8_t *frame, size_t len,
    int held);

/*
 * Pending entries, oldest first, copied into out (cap bytes) and SENT by
 * owner, their positions appended to w, as long as both have room.
 * Returns the bytes copied: whole frames, back to back.
 */
size_t llm_journal_claim(llm_journal_t *j, int32_t owner,
    llm_journal_window_t *w, uint8_t *out, size_t cap);

/*
 * An ACK: it must name the oldest entry of w, still SENT by owner.  0 and
 * the entry ACKED (and the head moved past what is acknowledged), or -1:
 * the peer is confused and the caller closes the connection.
 */
int llm_journal_ack(llm_journal_t *j, int32_t owner, llm_journal_window_t *w,
    const uint8_t *request_id, size_t len);

/* the connection is gone: what w holds is PENDING again; w is empty */
void llm_journal_release(llm_journal_t *j, int32_t owner,
    llm_journal_window_t *w);

/*
 * SENT entries of owners other than self that alive() says are gone are
 * PENDING again.  Returns how many; *dead is one such owner.
 */
size_t llm_journal_reap(llm_journal_t *j, int32_t self,
    llm_journal_alive_pt alive, void *data, int32_t *dead);

/*
 * A new owner has sent nothing: SENT entries in its name are those of a
 * dead process that had the same id (a pid used again), and PENDING.
 */
size_t llm_journal_adopt(llm_journal_t *j, int32_t owner);

void llm_journal_stats(const llm_journal_t *j, llm_journal_stats_t *st);


#endif /* _LLM_JOURNAL_H_INCLUDED_ */
