
/*
 * The tenants' table, shared by the threads: found under a lock, counted
 * with atomics.  GET /stats/NAME reads it.
 */


#include <pthread.h>

#include "mockllm.h"
#include "mockllm_tenant.h"


#define MOCKLLM_TENANTS      256


static mockllm_tenant_t  mockllm_tenants[MOCKLLM_TENANTS];
static size_t            mockllm_ntenants;
static pthread_mutex_t   mockllm_tenants_lock = PTHREAD_MUTEX_INITIALIZER;


mockllm_tenant_t *
mockllm_tenant(const char *name, size_t len)
{
    size_t             i;
    mockllm_tenant_t  *t;

    t = NULL;

    pthread_mutex_lock(&mockllm_tenants_lock);

    for (i = 0; i < mockllm_ntenants; i++) {
        if (mockllm_tenants[i].len == len
            && memcmp(mockllm_tenants[i].name, name, len) == 0)
        {
            t = &mockllm_tenants[i];
            break;
        }
    }

    /* a full table counts nothing more: the tests use a few tenants */
    if (t == NULL && mockllm_ntenants < MOCKLLM_TENANTS) {
        t = &mockllm_tenants[mockllm_ntenants++];
        memcpy(t->name, name, len);
        t->len = len;
    }

    pthread_mutex_unlock(&mockllm_tenants_lock);

    return t;
}


/* the request of c is over, one way or another */

void
mockllm_tenant_end(mockllm_conn_t *c)
{
    if (c->tenant != NULL) {
        __atomic_sub_fetch(&c->tenant->inflight, 1, __ATOMIC_RELAXED);
        c->tenant = NULL;
    }
}
