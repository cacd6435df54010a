#!/bin/sh
#
# The PostgreSQL container's entrypoint (postgres.Dockerfile): what
# scripts/stack does for make run.  On the first start, a cluster whose
# superuser is llmgw and the database llmgw.  Every role logs in with its
# password (scram-sha-256) over TCP; on the Unix socket, the OS user
# postgres is llmgw without one (peer), so that the migrations and
# `docker compose exec postgres psql -U llmgw llmgw` need none.  llmgw is
# for the migrations and maintenance only: its password, made at random
# once, is in LLMGW_PG_PASSWORD_FILE, a volume no other container mounts.
# The containers log in as the roles scripts/stack makes (sql/013): accountd
# (a member of llmgw_writer) and llmgw_ops (llmgw_admin, the CLI's
# commands), neither a superuser nor CREATEROLE.  Their passwords, made at
# random once as llmgw's, are in LLMGW_PG_ROLES_DIR, a volume that accountd
# and demo-init mount read-only (mode 0640, group llmgw: their user's);
# each copies them into a libpq password file of its own, mode 0600.  On
# every start, sql/NNN_*.sql applied in order, each once, in one
# transaction with its row in public.llmgw_migrations (the version is the
# file's name without .sql), the table scripts/stack keeps; then the login
# roles made if missing, and given their files' passwords and their group
# only, whatever an older image's volume had.  The migrations and the roles
# are done with the server on a private socket only, so that nothing
# connects before the schema is current (the healthcheck's pg_isready on
# TCP neither); then the server runs in the foreground, as this process.
#
# Its environment (the image sets the first two; t/097 runs it against a
# temporary cluster with all of them):
#
#   PGDATA               the cluster, made if it has no PG_VERSION
#                        (/var/lib/postgresql/data, a volume)
#   LLMGW_SQL_DIR        the migrations (/usr/share/llmgw/sql)
#   LLMGW_PG_PORT        the server's port (5432)
#   LLMGW_PG_LISTEN      its listen_addresses ('*': the compose network)
#   LLMGW_PG_SOCKET_DIR  its socket directory (/var/run/postgresql)
#   LLMGW_PG_PASSWORD_FILE
#                        llmgw's password, made if missing
#                        (/run/llmgw-db/password)
#   LLMGW_PG_ROLES_DIR   the login roles' passwords, a file each named
#                        after the role (accountd, llmgw_ops), made if
#                        missing (/run/llmgw-roles)
#   LLMGW_PG_NO_SERVER   if set, exit after the migrations and the roles

set -eu

data=${PGDATA:-/var/lib/postgresql/data}
sql=${LLMGW_SQL_DIR:-/usr/share/llmgw/sql}
port=${LLMGW_PG_PORT:-5432}
listen=${LLMGW_PG_LISTEN-*}
sockdir=${LLMGW_PG_SOCKET_DIR:-/var/run/postgresql}
pwfile=${LLMGW_PG_PASSWORD_FILE:-/run/llmgw-db/password}
rolesdir=${LLMGW_PG_ROLES_DIR:-/run/llmgw-roles}

# the containers' login roles (their groups: below)
roles="accountd llmgw_ops"

say() {
    echo "llmgw-postgres: $*"
}

# --- the cluster, once --------------------------------------------------------

# a password: hex, so that no character needs quoting anywhere; mode 0640
make_password() {
    (
        umask 027
        od -An -tx1 -N24 /dev/urandom | tr -d ' \n' >"$1.tmp"
        echo >>"$1.tmp"
        # the directory's setgid gives it the group; the image's postgres
        # is in it too, should a volume have lost that bit
        if getent group llmgw >/dev/null; then
            chgrp llmgw "$1.tmp"
        fi
        mv -f "$1.tmp" "$1"
    )
}

new_password=
if [ ! -s "$pwfile" ]; then
    make_password "$pwfile"
    new_password=1
    say "made llmgw's password in $pwfile"
fi

for role in $roles; do
    if [ ! -s "$rolesdir/$role" ]; then
        if [ ! -w "$rolesdir" ]; then
            say "$rolesdir: not $(id -un)'s to write, no password for $role" >&2
            exit 1
        fi
        make_password "$rolesdir/$role"
        say "made $role's password in $rolesdir/$role"
    fi
done

if [ ! -s "$data/PG_VERSION" ]; then
    say "making the cluster in $data"
    initdb -D "$data" -U llmgw --auth-local=peer --auth-host=scram-sha-256 \
        --pwfile="$pwfile" -E UTF8 --locale=C.UTF-8 >/dev/null
    new_password=
fi

# on every start, so that a cluster of an older image (trust) is closed
# too: passwords over TCP, the compose network included; on the socket,
# the OS user postgres as llmgw
cat >"$data/pg_hba.conf" <<'HBA'
# written by docker/postgres-entrypoint.sh
# TYPE  DATABASE  USER  ADDRESS        METHOD
local   all       all                  peer map=owner
host    all       all   127.0.0.1/32   scram-sha-256
host    all       all   ::1/128        scram-sha-256
host    all       all   samenet        scram-sha-256
HBA

cat >"$data/pg_ident.conf" <<'IDENT'
# written by docker/postgres-entrypoint.sh
# MAPNAME  SYSTEM-USERNAME  PG-USERNAME
owner      postgres         llmgw
IDENT

# --- the schema: sql/NNN_*.sql in order, each once ----------------------------

private=$(mktemp -d)

stop_private() {
    pg_ctl -D "$data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$private"
}

trap stop_private EXIT
trap 'exit 1' INT TERM

if ! pg_ctl -D "$data" -w -t 120 -l "$private/postgres.log" \
        -o "-c listen_addresses='' -k $private -p $port" start >/dev/null
then
    cat "$private/postgres.log" >&2
    exit 1
fi

pg() {
    PGOPTIONS='-c client_min_messages=warning' \
        psql -X -q -v ON_ERROR_STOP=1 -h "$private" -p "$port" -U llmgw "$@"
}

if [ -z "$(pg -d postgres -Atc \
        "SELECT 1 FROM pg_database WHERE datname = 'llmgw'")" ]
then
    pg -d postgres -c 'CREATE DATABASE llmgw'
fi

# a password made for a cluster that had none (read from standard input,
# never on a command line)
if [ -n "$new_password" ]; then
    printf "ALTER ROLE llmgw PASSWORD '%s'\n" "$(cat "$pwfile")" \
        | pg -d postgres
fi

pg -d llmgw -c "CREATE TABLE IF NOT EXISTS public.llmgw_migrations (
        version text PRIMARY KEY,
        applied_at timestamptz NOT NULL DEFAULT now())"

applied=0

for f in "$sql"/[0-9]*.sql; do
    [ -f "$f" ] || continue
    v=$(basename "$f" .sql)

    case $v in
    *[!A-Za-z0-9_]*)
        say "$f: a migration's name is letters, digits and _ only" >&2
        exit 1;;
    esac

    if [ -z "$(pg -d llmgw -Atc \
            "SELECT 1 FROM public.llmgw_migrations WHERE version = '$v'")" ]
    then
        if ! pg -d llmgw -1 -f "$f" \
            -c "INSERT INTO public.llmgw_migrations (version) VALUES ('$v')" \
            >/dev/null
        then
            say "$v failed: none of it is applied" >&2
            exit 1
        fi
        say "applied $v"
        applied=$((applied + 1))
    fi
done

say "schema current: $(pg -d llmgw -Atc \
    'SELECT count(*) FROM public.llmgw_migrations') migrations, $applied new"

# --- the login roles: accountd's and the operators' ---------------------------

# Made once; on every start, the file's password (on standard input, never
# on a command line), no superuser, no CREATEROLE, and a member of its own
# group among llmgw_owner, llmgw_writer and llmgw_admin only: a volume of
# an older image may have had the role as something else.
for role in $roles; do
    case $role in
    accountd)  group=llmgw_writer; other=llmgw_admin;;
    llmgw_ops) group=llmgw_admin; other=llmgw_writer;;
    esac

    if [ -z "$(pg -d llmgw -Atc \
            "SELECT 1 FROM pg_roles WHERE rolname = '$role'")" ]
    then
        pg -d llmgw -c "CREATE ROLE $role LOGIN IN ROLE $group"
        say "made the role $role, a member of $group"
    fi

    printf "ALTER ROLE %s LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB
        NOREPLICATION NOBYPASSRLS PASSWORD '%s'\n" \
        "$role" "$(cat "$rolesdir/$role")" | pg -d llmgw
    pg -d llmgw -c "GRANT $group TO $role"

    for g in $(pg -d llmgw -Atc "SELECT g.rolname
              FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
             WHERE m.member = '$role'::regrole
               AND g.rolname IN ('llmgw_owner', '$other')"); do
        pg -d llmgw -c "REVOKE $g FROM $role"
        say "$role is no longer a member of $g"
    done
done

pg_ctl -D "$data" -m fast -w stop >/dev/null
trap - EXIT INT TERM
rm -rf "$private"

if [ -n "${LLMGW_PG_NO_SERVER:-}" ]; then
    exit 0
fi

# --- the server ---------------------------------------------------------------

exec postgres -D "$data" -p "$port" -k "$sockdir" \
    -c listen_addresses="$listen"
