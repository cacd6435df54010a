
/*
 * The gateway's two clocks: a monotonic one for buckets, windows and
 * timers, the same in every worker sharing a zone, and the wall clock for
 * what leaves the process (records, headers, leases).
 */


#include "ngx_http_llm_gateway_module.h"
#include "ngx_http_llm_gateway_clock.h"


int64_t
ngx_http_llm_gateway_clock_now_ms(void)
{
    /* monotonic, and the same clock in every worker sharing the zone */
    return (int64_t) ngx_current_msec;
}


int64_t
ngx_http_llm_gateway_clock_wall_ms(void)
{
    ngx_time_t  *tp;

    tp = ngx_timeofday();

    return (int64_t) tp->sec * 1000 + tp->msec;
}
