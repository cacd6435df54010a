
/*
 * accountd's stats.c: the counters.
 */

#ifndef _ACCOUNTD_STATS_H_INCLUDED_
#define _ACCOUNTD_STATS_H_INCLUDED_


#include "accountd.h"


/* records a batch: 1, 2, 4 ... 4096 (batch_max's largest) */
#define STATS_BATCH_BUCKETS       13
/* seconds from a batch's statement sent to its commit's result */
#define STATS_RTT_BUCKETS         12

typedef struct {
    uint64_t   records_received;
    uint64_t   records_committed;
    uint64_t   records_rejected;
    uint64_t   records_dropped;
    uint64_t   batches;
    uint64_t   batch_bucket[STATS_BATCH_BUCKETS];
    uint64_t   batch_sum;
    uint64_t   rtt_bucket[STATS_RTT_BUCKETS];
    uint64_t   rtt_sum_us;
    uint64_t   db_reconnects;
    uint64_t   leases_granted;
    uint64_t   leases_refused;
    uint64_t   lease_pusd;
    uint64_t   keysets_pushed;
    uint64_t   peers_refused;
} acd_stats_t;

/* a bucket's upper bound, and as printed */
typedef struct {
    int64_t      usec;
    const char  *le;
} stats_le_t;

extern acd_stats_t       acd_stats;
extern const stats_le_t  stats_rtt_le[STATS_RTT_BUCKETS];

int64_t stats_usec(void);
void stats_batch(size_t n, size_t rejected, int64_t usec);


#endif /* _ACCOUNTD_STATS_H_INCLUDED_ */
