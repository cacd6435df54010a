# PostgreSQL 15 for docker/compose.yaml, from Debian's own packages.
#
# The entrypoint (postgres-entrypoint.sh) does what scripts/stack does for
# make run: a cluster on the first start (superuser llmgw), the database
# llmgw, and sql/NNN_*.sql applied in order, each once, tracked in
# public.llmgw_migrations; on every start, so that a new image brings its
# new migrations.  Then the server, on the compose network's port 5432,
# where every role gives its password (scram-sha-256).  llmgw's (the
# superuser, for the migrations), made at random on the first start, is in
# the volume llmgw-db (/run/llmgw-db), which only this container mounts;
# those of accountd and llmgw_ops, the roles the daemon and the operators'
# commands log in as, are in the volume llmgw-roles (/run/llmgw-roles),
# which accountd and demo-init mount read-only: the directory is setgid
# and of the group llmgw (LLMGW_GID, accountd's group in
# accountd.Dockerfile), so the files, mode 0640, are theirs to read.  A new
# volume takes its owner and mode from these directories.
#
# Built from the repository root: docker build -f docker/postgres.Dockerfile .

FROM debian:12-slim

ARG LLMGW_GID=10001

# Debian's packaging makes a cluster "main" when the server is installed:
# not here, the entrypoint makes its own in the volume
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        postgresql-common \
 && sed -ri 's/^#?[[:space:]]*create_main_cluster[[:space:]]*=.*/create_main_cluster = false/' \
        /etc/postgresql-common/createcluster.conf \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        postgresql-15 \
 && rm -rf /var/lib/apt/lists/* \
 && install -d -o postgres -g postgres -m 0700 /var/lib/postgresql/data \
 && install -d -o postgres -g postgres -m 2775 /var/run/postgresql \
 && groupadd --gid "$LLMGW_GID" llmgw \
 && usermod --append --groups llmgw postgres \
 && install -d -o postgres -g "$LLMGW_GID" -m 2750 /run/llmgw-db \
 && install -d -o postgres -g "$LLMGW_GID" -m 2750 /run/llmgw-roles

ENV PATH=/usr/lib/postgresql/15/bin:$PATH \
    PGDATA=/var/lib/postgresql/data \
    LLMGW_SQL_DIR=/usr/share/llmgw/sql

COPY sql/ /usr/share/llmgw/sql/
COPY docker/postgres-entrypoint.sh /usr/local/bin/llmgw-postgres

USER postgres

EXPOSE 5432

# fast shutdown: a smart one waits for accountd, which stays connected
STOPSIGNAL SIGINT

ENTRYPOINT ["llmgw-postgres"]
