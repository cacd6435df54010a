# mockllm, the mock LLM upstream, for docker/compose.yaml: built on
# debian:12 by the project's Makefile, run on debian:12-slim as the user
# mockllm, on the compose network's port 8090 (make run's 127.0.0.1:8090).
#
# Built from the repository root: docker build -f docker/mockllm.Dockerfile .

FROM debian:12 AS build

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        gcc libc6-dev make libcjson-dev \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src

# what the Makefile reads (it includes fuzz.mk), and mockllm's sources
COPY Makefile ./
COPY t/chaos.mk t/
COPY ngx_llm_gateway_module/core/fuzz/fuzz.mk ngx_llm_gateway_module/core/fuzz/
COPY mockllm/ mockllm/

RUN make build/mockllm


FROM debian:12-slim AS mockllm

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libcjson1 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --no-log-init --system --no-create-home \
        --shell /usr/sbin/nologin mockllm

COPY --from=build /src/build/mockllm /usr/local/bin/mockllm

USER mockllm

EXPOSE 8090

# SIGTERM ends it (sigwait), PID 1 or not; a token every 25 ms, as a
# model streams
CMD ["mockllm", "-l", "0.0.0.0:8090", "-d", "25"]
