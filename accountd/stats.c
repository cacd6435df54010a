
/*
 * The counters the subsystems bump, which the metrics listener prints:
 * plain variables of one thread, and the histograms' bucketing.
 */


#include <time.h>

#include "accountd.h"
#include "stats.h"


acd_stats_t  acd_stats;


/* the buckets' upper bounds: powers of two, and seconds as printed */

const stats_le_t  stats_rtt_le[STATS_RTT_BUCKETS] = {
    { 500, "0.0005" }, { 1000, "0.001" }, { 2500, "0.0025" },
    { 5000, "0.005" }, { 10000, "0.01" }, { 25000, "0.025" },
    { 50000, "0.05" }, { 100000, "0.1" }, { 250000, "0.25" },
    { 500000, "0.5" }, { 1000000, "1" }, { 2500000, "2.5" }
};


/* the monotonic clock in microseconds: a batch's round trip */

int64_t
stats_usec(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);

    return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}


/*
 * A batch statement committed: n records, of which "rejected" went into
 * llm.usage_rejected rather than llm.usage.  Called only once the commit
 * returned, so that a batch failed, retried in halves or lost with its
 * connection counts once, when and as it commits.
 */

void
stats_batch(size_t n, size_t rejected, int64_t usec)
{
    size_t  i;

    if (rejected > n) {
        rejected = n;
    }

    acd_stats.batches++;
    acd_stats.records_committed += n - rejected;
    acd_stats.records_rejected += rejected;

    acd_stats.batch_sum += n;

    for (i = 0; i < STATS_BATCH_BUCKETS && ((size_t) 1 << i) < n; i++) {
        /* void */
    }

    if (i < STATS_BATCH_BUCKETS) {
        acd_stats.batch_bucket[i]++;
    }

    if (usec < 0) {
        usec = 0;
    }

    acd_stats.rtt_sum_us += (uint64_t) usec;

    for (i = 0; i < STATS_RTT_BUCKETS && stats_rtt_le[i].usec < usec;
         i++)
    {
        /* void */
    }

    if (i < STATS_RTT_BUCKETS) {
        acd_stats.rtt_bucket[i]++;
    }
}
