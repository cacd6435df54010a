# nginx with the gateway module for docker/compose.yaml.
#
# The module is built in a debian:12 builder against Debian's nginx-dev
# tree by the project's Makefile (make module: cp -a /usr/share/nginx/src,
# ./configure with Debian's own flags, --with-compat among them, and
# --add-dynamic-module=/src, then make modules), as make build does.  The
# runtime is debian:12-slim with Debian's own nginx package, which loads
# it with load_module (docker/nginx.conf).  A module built against another
# nginx than the one installed fails the build here, not at start-up.
#
# nginx runs as www-data, master included (its ports are above 1024): it
# reads the key snapshot and the key secret, and its workers connect to
# accountd's socket, through the group llmgw (LLMGW_GID, as in
# accountd.Dockerfile).
#
# Built from the repository root: docker build -f docker/nginx.Dockerfile .

FROM debian:12 AS build

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        nginx-dev gcc libc6-dev make libcjson-dev libssl-dev \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src

# the addon script (config), what the Makefile reads, the module
COPY Makefile config ./
COPY t/chaos.mk t/
COPY ngx_llm_gateway_module/ ngx_llm_gateway_module/

RUN make module


FROM debian:12-slim AS nginx

ARG LLMGW_UID=10001
ARG LLMGW_GID=10001

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        nginx libcjson1 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid "$LLMGW_GID" llmgw \
 && usermod --append --groups llmgw www-data \
 && install -d -o "$LLMGW_UID" -g "$LLMGW_GID" -m 0750 /run/llmgw /var/lib/llmgw \
 && install -d -o www-data -g www-data -m 0755 /run/nginx \
 && chown -R www-data:www-data /var/lib/nginx /var/log/nginx

COPY --from=build /src/build/ngx_http_llm_gateway_module.so /usr/lib/nginx/modules/

# the module loads into this nginx (same version, binary compatible)
RUN printf 'load_module %s;\nevents {}\n' \
        /usr/lib/nginx/modules/ngx_http_llm_gateway_module.so >/tmp/load.conf \
 && nginx -t -q -c /tmp/load.conf \
 && rm /tmp/load.conf

COPY docker/nginx.conf /etc/nginx/nginx.conf

USER www-data

EXPOSE 8080 8081

# graceful: requests in flight end, their records reach accountd
STOPSIGNAL SIGQUIT

CMD ["nginx"]
