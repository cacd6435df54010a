
/*
 * mockllm_tenant.c: the tenants' table, shared by the threads.
 */

#ifndef _MOCKLLM_TENANT_H_INCLUDED_
#define _MOCKLLM_TENANT_H_INCLUDED_


#include "mockllm.h"


mockllm_tenant_t *mockllm_tenant(const char *name, size_t len);
void mockllm_tenant_end(mockllm_conn_t *c);


#endif /* _MOCKLLM_TENANT_H_INCLUDED_ */
