# accountd for docker/compose.yaml.
#
# Built on debian:12 with the -dev packages by the project's Makefile (the
# flags of make build, -Werror included), run on debian:12-slim with the
# runtime libraries only, as the user accountd.  Its group, llmgw (gid
# LLMGW_GID), is the one nginx's www-data joins in nginx.Dockerfile: the
# socket (listen_mode 0660), the key snapshot and the key secret are the
# group's, as with systemd's Group=www-data (accountd/accountd.service).
# accountd serves no other peer on its socket than www-data (allow_users).
# accountd logs in to PostgreSQL as accountd and its CLI as llmgw_ops
# (accountd.conf), never as the superuser llmgw; their passwords are in
# the volume llmgw-roles, of the same group (postgres-entrypoint.sh), and
# the entrypoints copy them into PGPASSFILE, the container's own, mode
# 0600.
#
# Targets (the last is the default):
#   demo-init  the same with psql: make run's demo tenants, once
#   accountd   the daemon; also the CLI, which finds /etc/llmgw/accountd.conf
#              by default: docker compose exec accountd accountd tenant list
#
# Built from the repository root:
#   docker build -f docker/accountd.Dockerfile --target accountd .

FROM debian:12 AS build

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        gcc libc6-dev make libpq-dev libssl-dev \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src

# what the Makefile reads, and accountd's sources with the cores it links
COPY Makefile ./
COPY t/chaos.mk t/
COPY ngx_llm_gateway_module/core/ ngx_llm_gateway_module/core/
COPY accountd/ accountd/

RUN make build/accountd


FROM debian:12-slim AS runtime

ARG LLMGW_UID=10001
ARG LLMGW_GID=10001

# /run/llmgw and /var/lib/llmgw are volumes shared with nginx, whose image
# makes them alike, so that whichever container fills a new volume first
# gives it the same owner and mode
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libpq5 libssl3 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid "$LLMGW_GID" llmgw \
 && useradd --no-log-init --uid "$LLMGW_UID" --gid llmgw \
        --home-dir /var/lib/llmgw --no-create-home \
        --shell /usr/sbin/nologin accountd \
 && install -d -o "$LLMGW_UID" -g "$LLMGW_GID" -m 0750 /run/llmgw /var/lib/llmgw

COPY --from=build /src/build/accountd /usr/sbin/accountd
COPY docker/accountd.conf /etc/llmgw/accountd.conf

# written by the entrypoints; `docker compose exec` finds it too
ENV PGPASSFILE=/tmp/llmgw.pgpass

USER accountd

WORKDIR /var/lib/llmgw


FROM runtime AS demo-init

USER root

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        postgresql-client-15 \
 && rm -rf /var/lib/apt/lists/*

COPY docker/demo-init.sh /usr/local/bin/llmgw-demo-init

USER accountd

ENTRYPOINT ["llmgw-demo-init"]


FROM runtime AS accountd

COPY docker/accountd-entrypoint.sh /usr/local/bin/llmgw-accountd

USER accountd

# metrics_listen (docker/accountd.conf)
EXPOSE 8082

# accountd flushes what is queued (at most 2 s), removes its socket, exits
STOPSIGNAL SIGTERM

ENTRYPOINT ["llmgw-accountd"]
