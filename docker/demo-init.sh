#!/bin/sh
#
# make run's demo in the containers (the demo-init service of compose.yaml,
# after accountd is up), as scripts/stack makes it, as the operators' role
# llmgw_ops (admin_database_url), never the superuser: prices for the
# mock's models (a price already there stays), the tenants demo-free (tier
# free) and demo-pro (tier pro) with one key each, and demo.env next to the
# key snapshot with LLMGW_BASE_URL, the keys, LLMGW_ADMIN_DATABASE_URL and
# the models.  Running it again keeps the keys; demo.env lost (or of an
# older key format) means new keys.  The keys are never printed:
#
#   docker compose -f docker/compose.yaml exec accountd cat /var/lib/llmgw/demo.env

set -eu

conf=${LLMGW_ACCOUNTD_CONF:-/etc/llmgw/accountd.conf}
dir=${LLMGW_DEMO_DIR:-/var/lib/llmgw}
base_url=${LLMGW_BASE_URL:-http://127.0.0.1:8080/v1}
# as accountd's CLI reads it, the environment first
ops_url=${LLMGW_ADMIN_DATABASE_URL:-$(sed -n \
    's/^[[:space:]]*admin_database_url[[:space:]]*=[[:space:]]*//p' "$conf")}

if [ -z "$ops_url" ]; then
    echo "llmgw-demo: no admin_database_url in $conf" >&2
    exit 1
fi

acd() {
    accountd -c "$conf" "$@"
}

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

# µ$ per million tokens, as for the models the mock's names stand for
psql "$ops_url" -X -q -v ON_ERROR_STOP=1 -c "INSERT INTO llm.prices (model,
        effective_from, input_per_mtok, output_per_mtok, cached_input_per_mtok)
    VALUES ('mock-gpt-4o-mini', '2000-01-01', 150000, 600000, 75000),
           ('mock-claude-3-5-haiku', '2000-01-01', 800000, 4000000, 80000),
           ('mock-text-embedding-3-small', '2000-01-01', 20000, 0, 20000)
    ON CONFLICT DO NOTHING"

# keys of an older format (before the checksum) no longer pass: new ones
if [ -f "$dir/demo.env" ] && ! grep -Eq \
        '^LLMGW_FREE_KEY=llmgw_(live|test)_[A-Za-z0-9]{38}$' "$dir/demo.env"
then
    rm -f "$dir/demo.env"
fi

# one written when demo-init ran as the superuser named the superuser's
# URL: the operators' instead, the keys stay
if [ -f "$dir/demo.env" ] \
        && ! grep -q '^LLMGW_ADMIN_DATABASE_URL=' "$dir/demo.env"
then
    (
        umask 077
        grep -v '^LLMGW_DATABASE_URL=' "$dir/demo.env" >"$dir/demo.env.tmp"
        echo "LLMGW_ADMIN_DATABASE_URL=$ops_url" >>"$dir/demo.env.tmp"
        mv -f "$dir/demo.env.tmp" "$dir/demo.env"
    )
fi

if [ ! -f "$dir/demo.env" ]; then
    for t in free pro; do
        acd tenant list | grep -qw "demo-$t" \
            || acd tenant create --name "demo-$t" --tier "$t" >/dev/null
    done
    free_key=$(acd key create --tenant demo-free | tail -n 1)
    pro_key=$(acd key create --tenant demo-pro | tail -n 1)

    (
        umask 077
        cat >"$dir/demo.env.tmp" <<ENV
LLMGW_BASE_URL=$base_url
LLMGW_FREE_KEY=$free_key
LLMGW_PRO_KEY=$pro_key
LLMGW_ADMIN_DATABASE_URL=$ops_url
LLMGW_MODEL=mock-gpt-4o-mini
LLMGW_ANTHROPIC_MODEL=mock-claude-3-5-haiku
ENV
        mv -f "$dir/demo.env.tmp" "$dir/demo.env"
    )
    echo "llmgw-demo: tenants demo-free and demo-pro, a key each"
fi

echo "llmgw-demo: keys and URLs in $dir/demo.env, in the accountd service"
