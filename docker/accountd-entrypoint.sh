#!/bin/sh
#
# The accountd container's entrypoint (accountd.Dockerfile): the key
# secret made once in the shared volume, as scripts/stack makes it (32
# bytes of /dev/urandom as hex; mode 0640, the group llmgw's, for nginx),
# then llmgw's PostgreSQL password into accountd's own password file, and
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

# llmgw's PostgreSQL password, which postgres-entrypoint.sh made, into a
# libpq password file of this container's own (PGPASSFILE, the image's):
# libpq reads only one that no other user may, mode 0600
pgpw=${LLMGW_PG_PASSWORD_FILE:-/run/llmgw-db/password}
if [ -n "${PGPASSFILE:-}" ] && [ -r "$pgpw" ]; then
    (
        umask 077
        printf '*:*:*:llmgw:%s\n' "$(cat "$pgpw")" >"$PGPASSFILE.tmp"
        mv -f "$PGPASSFILE.tmp" "$PGPASSFILE"
    )
fi

exec accountd -c "$conf" "$@"
