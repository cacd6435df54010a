#!/bin/sh
#
# The accountd container's entrypoint (accountd.Dockerfile): the key
# secret made once in the shared volume, as scripts/stack makes it (32
# bytes of /dev/urandom as hex; mode 0640, the group llmgw's, for nginx),
# then accountd in the foreground as this process, logging to stderr.
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

exec accountd -c "$conf" "$@"
