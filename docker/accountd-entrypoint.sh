#!/bin/sh
#
# The accountd container's entrypoint (accountd.Dockerfile): the key
# secret made once in the shared volume, as scripts/stack makes it (32
# bytes of /dev/urandom as hex; mode 0640, the group llmgw's, for nginx),
# then the PostgreSQL passwords of accountd and llmgw_ops (the daemon's
# role and the CLI's) into a password file of the container's own, and
# accountd in the foreground as this process, logging to stderr.
# Arguments go to accountd: docker compose run --rm accountd tenant list.

set -eu

conf=${LLMGW_ACCOUNTD_CONF:-/etc/llmgw/accountd.conf}
secret=$(sed -n 's/^[[:space:]]*key_secret_file[[:space:]]*=[[:space:]]*//p' \
         "$conf")

if [ -n "$secret" ] && [ ! -s "$secret" ]; then
    (
        umask 027
        od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$secret.tmp"
        mv -f "$secret.tmp" "$secret"
    )
    echo "llmgw-accountd: made the key secret $secret"
fi

# the PostgreSQL passwords of accountd and llmgw_ops, which
# postgres-entrypoint.sh made in the volume llmgw-roles, into a libpq
# password file of this container's own (PGPASSFILE, the image's): libpq
# reads only one that no other user may, mode 0600.  The superuser's
# password is in no volume of this container's
pgroles=${LLMGW_PG_ROLES_DIR:-/run/llmgw-roles}
if [ -n "${PGPASSFILE:-}" ]; then
    (
        umask 077
        for role in accountd llmgw_ops; do
            if [ -r "$pgroles/$role" ]; then
                printf '*:*:*:%s:%s\n' "$role" "$(cat "$pgroles/$role")"
            fi
        done >"$PGPASSFILE.tmp"
        mv -f "$PGPASSFILE.tmp" "$PGPASSFILE"
    )
fi

exec accountd -c "$conf" "$@"
