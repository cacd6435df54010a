
/*
 * accountd's snapshot.c: writing the key snapshot file.
 */

#ifndef _ACCOUNTD_SNAPSHOT_H_INCLUDED_
#define _ACCOUNTD_SNAPSHOT_H_INCLUDED_


#include "accountd.h"


/*
 * An expiry is written rounded down: nginx may refuse a key up to a second
 * early, never accept it late; 'infinity', which SQL allows, is never.
 * Column 7 is the same on every row: the milliseconds until the next key
 * expires, NULL if none will.  Column 8 says which caps the key answers to
 * (1: its tenant's, 2: its own; sql/007).
 */
#define SNAPSHOT_QUERY                                                        \
    "SELECT encode(k.key_hash, 'hex'), k.key_id, k.tenant_id, k.tier,"        \
    " t.name,"                                                                \
    " CASE WHEN isfinite(k.expires_at)"                                       \
    " THEN floor(extract(epoch FROM k.expires_at))::bigint ELSE 0 END,"       \
    " coalesce(array_to_string(k.models, ','), '*'),"                         \
    " (extract(epoch FROM min(k.expires_at)"                                  \
    " FILTER (WHERE isfinite(k.expires_at)) OVER () - now()) * 1000)::bigint,"\
    " (t.daily_cap_pusd IS NOT NULL OR t.monthly_cap_pusd IS NOT NULL)::int"  \
    " + 2 * (k.daily_cap_pusd IS NOT NULL"                                    \
    " OR k.monthly_cap_pusd IS NOT NULL)::int"                                \
    " FROM llm.api_keys k JOIN llm.tenants t USING (tenant_id)"               \
    " WHERE k.revoked_at IS NULL"                                             \
    " AND (k.expires_at IS NULL OR k.expires_at > now())"                     \
    " ORDER BY k.key_id"

int snapshot_lock(const char *path, int wait);
void snapshot_unlock(int fd);
int snapshot_write(const char *path, PGresult *res, uint64_t generation,
    int64_t *next_expiry);
uint64_t snapshot_generation(void);
int snapshot_blocking(PGconn *conn, const char *path,
    int (*publish)(PGresult *res, uint64_t generation));
int snapshot_entry(PGresult *res, int row, llm_key_entry_t *e);


#endif /* _ACCOUNTD_SNAPSHOT_H_INCLUDED_ */
