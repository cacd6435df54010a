# ngx_llm_gateway: the nginx module, accountd, mockllm and their tests.
#
#   make run     install what is missing, build, start the whole stack in .run/
#   make stop    stop what `make run` started
#   make test    the same set-up from scratch in a temporary directory, then
#                every test (prove), with a TAP summary
#   make bench   benchmarks on the same set-up; numbers, never a failure
#
# Everything here runs as root on Debian 12.

SHELL       := /bin/bash
BUILD       := build
CORE        := ngx_llm_gateway_module/core
NGX_SRC     := /usr/share/nginx/src
NGX_BUILD   := $(BUILD)/nginx
MODULE_SO   := $(BUILD)/ngx_http_llm_gateway_module.so
# what Debian's own nginx build passes (nginx -V)
NGX_CC_OPT  := -g -O2 -fstack-protector-strong -Wformat \
               -Werror=format-security -fPIC -D_FORTIFY_SOURCE=2
NGX_LD_OPT  := -Wl,-z,relro -Wl,-z,now -fPIC

CC          := gcc
CFLAGS      := -std=gnu11 -O2 -g -Wall -Wextra -Wno-unused-parameter -Werror \
               -D_FORTIFY_SOURCE=2 -fstack-protector-strong \
               -I$(CORE) -I/usr/include/cjson -I/usr/include/postgresql

DEB_PACKAGES := nginx nginx-dev libcjson-dev libpq-dev libssl-dev \
                postgresql libdbd-pg-perl wrk clang-14 libfuzzer-14-dev \
                make gcc perl

CORE_SRC    := $(wildcard $(CORE)/llm_*.c)
CORE_HDR    := $(wildcard $(CORE)/llm_*.h)
UNIT_SRC    := $(wildcard $(CORE)/t/test_*.c)
UNIT_BIN    := $(patsubst $(CORE)/t/%.c,$(BUILD)/unit/%,$(UNIT_SRC)) \
               $(BUILD)/unit/sim_protocol
MODULE_SRC  := $(wildcard ngx_llm_gateway_module/*.c ngx_llm_gateway_module/*.h)
ACCOUNTD_SRC := $(wildcard accountd/*.c)
MOCKLLM_SRC := $(wildcard mockllm/*.c)

RUN_DIR     := $(CURDIR)/.run

.PHONY: all deps build module accountd mockllm units sdk run stop test clean

all: build

# apt-get only when a package is missing, so that a warm machine does not
# wait for the archive.
deps:
	@missing=""; \
	for p in $(DEB_PACKAGES); do \
	    dpkg-query -W -f='$${Status}' $$p 2>/dev/null \
	        | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	    echo "installing:$$missing"; \
	    apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	        --no-install-recommends $$missing >/dev/null; \
	fi

build: module accountd mockllm units fuzz-build

module: $(MODULE_SO)

accountd: $(BUILD)/accountd

mockllm: $(BUILD)/mockllm

units: $(UNIT_BIN)

# The module is built --with-compat against Debian's nginx-dev tree, with
# Debian's own configure flags, so that the stock nginx binary loads it.
$(NGX_BUILD)/objs/Makefile: config $(NGX_SRC)/configure
	rm -rf $(NGX_BUILD)
	mkdir -p $(BUILD)
	cp -a $(NGX_SRC) $(NGX_BUILD)
	cd $(NGX_BUILD) && . ./conf_flags && \
	    ./configure "$${NGX_CONF_FLAGS[@]}" \
	        --with-cc-opt='$(NGX_CC_OPT)' --with-ld-opt='$(NGX_LD_OPT)' \
	        --add-dynamic-module=$(CURDIR) >configure.log 2>&1 \
	    || { tail -30 configure.log; exit 1; }

$(MODULE_SO): $(NGX_BUILD)/objs/Makefile $(MODULE_SRC) $(CORE_SRC) $(CORE_HDR)
	$(MAKE) -C $(NGX_BUILD) -f objs/Makefile modules >$(BUILD)/module.log 2>&1 \
	    || { grep -E 'error|warning' -A3 $(BUILD)/module.log | head -60; exit 1; }
	@# a new inode: a running nginx keeps the file it mapped
	cp $(NGX_BUILD)/objs/ngx_http_llm_gateway_module.so $@.tmp
	mv -f $@.tmp $@

$(BUILD)/accountd: $(ACCOUNTD_SRC) $(wildcard accountd/*.h) $(CORE_SRC) $(CORE_HDR)
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS) -o $@ $(ACCOUNTD_SRC) \
	    $(CORE)/llm_record.c $(CORE)/llm_key.c -lpq -lcrypto

$(BUILD)/mockllm: $(MOCKLLM_SRC) $(wildcard mockllm/*.h)
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS) -o $@ $(MOCKLLM_SRC) -lcjson

$(BUILD)/unit/%: $(CORE)/t/%.c $(CORE_SRC) $(CORE_HDR) $(CORE)/t/tap.h
	@mkdir -p $(BUILD)/unit
	$(CC) $(CFLAGS) -o $@ $< $(CORE_SRC) -lcjson -lcrypto -lm

# The protocol simulation runs the journal, the codec and accountd's queue
# as they are (see its head comment).
$(BUILD)/unit/sim_protocol: $(CORE)/t/sim_protocol.c $(CORE_SRC) $(CORE_HDR) \
                            $(CORE)/t/tap.h accountd/queue.c accountd/accountd.h
	@mkdir -p $(BUILD)/unit
	$(CC) $(CFLAGS) -Iaccountd -o $@ $< $(CORE)/llm_journal.c \
	    $(CORE)/llm_record.c $(CORE)/llm_key.c accountd/queue.c -lcrypto

# The official SDKs, pinned, for t/050-sdk.t: real clients of the gateway.
sdk: $(BUILD)/sdk/clients.mjs

$(BUILD)/sdk/clients.mjs: t/sdk/clients.mjs t/sdk/estimate.mjs \
                          t/sdk/package.json t/sdk/package-lock.json
	@mkdir -p $(BUILD)/sdk
	cp t/sdk/package.json t/sdk/package-lock.json $(BUILD)/sdk/
	cd $(BUILD)/sdk && npm ci --no-audit --no-fund --loglevel=error >npm.log 2>&1 \
	    || { cat npm.log; exit 1; }
	cp t/sdk/estimate.mjs $(BUILD)/sdk/
	cp t/sdk/clients.mjs $@

run: deps build
	scripts/stack start $(RUN_DIR)

stop:
	scripts/stack stop $(RUN_DIR)

# The stack is set up from scratch in a temporary directory; every t/*.t
# starts its own nginx against it.  The unit binaries print TAP themselves.
# TESTS picks some: make test TESTS=t/040-gateway.t
TESTS ?= $(UNIT_BIN) t/

test: deps build sdk
	@for try in 1 2 3; do \
	    dir=$$(mktemp -d /tmp/llmgw-test.XXXXXX); \
	    base=$$((20000 + RANDOM % 20000)); \
	    export LLMGW_STACK_QUIET=1 LLMGW_NO_NGINX=1 LLMGW_PG_FAST=1 \
	        LLMGW_PG_PORT=$$base LLMGW_MOCK_PORT=$$((base + 1)); \
	    scripts/stack start $$dir >$$dir/stack.log 2>&1 && break; \
	    scripts/stack stop $$dir >/dev/null 2>&1; \
	    if [ $$try = 3 ]; then cat $$dir/stack.log; rm -rf $$dir; exit 1; fi; \
	    echo "the stack did not start (a port taken?), again"; \
	    rm -rf $$dir; \
	done; \
	LLMGW_TEST_DIR=$$dir prove $(TESTS); rc=$$?; \
	scripts/stack stop $$dir >/dev/null 2>&1; \
	if [ $$rc -eq 0 ]; then rm -rf $$dir; else echo "kept $$dir"; fi; \
	exit $$rc

# Benchmarks: the stack of `make test` in a temporary directory, one nginx,
# numbers printed and kept in build/bench/*.json; no timing is a failure.
# bench/with-stack stops everything it started, even when interrupted.
.PHONY: bench bench-ttfb bench-load bench-micro bench-ingest bench-streams

bench: bench-micro bench-ingest bench-load bench-ttfb bench-streams

# requests/s, latency and CPU a request: mockllm, nginx proxy_pass and the
# gateway, JSON and SSE, 1, 32 and 128 connections (see bench/load.pl)
bench-load: build
	BENCH_TIMEOUT=$${BENCH_TIMEOUT:-900} bench/with-stack perl bench/load.pl

# time to first byte of an SSE stream: mockllm direct, nginx proxy_pass,
# the gateway (BENCH_N rounds, 300; see bench/ttfb.pl for the others)
bench-ttfb: build $(BUILD)/bench/ttfb
	bench/with-stack perl bench/ttfb.pl

# 2,000 SSE streams at 20 tokens/s for 30 s: direct, proxy_pass, the
# gateway; nginx memory an open stream, CPU an event, the gaps between
# tokens (BENCH_STREAMS, ...; see bench/streams.pl).  A descriptor a
# stream, twice in nginx: the soft limit up to the hard one.
bench-streams: build $(BUILD)/bench/streams
	ulimit -n $$(ulimit -Hn) && \
	    BENCH_TIMEOUT=$${BENCH_TIMEOUT:-300} \
	    bench/with-stack perl bench/streams.pl

# accountd's sustained ingest rate into PostgreSQL (see bench/ingest.pl)
bench-ingest: build
	bench/with-stack perl bench/ingest.pl

# admission ns/op, the keyed HMAC, bytes a tenant in the zone
bench-micro: $(BUILD)/bench/micro
	$(BUILD)/bench/micro

NGX_INCS    := $(addprefix -I$(NGX_BUILD)/, src/core src/event \
               src/event/modules src/os/unix src/http src/http/modules \
               src/http/v2 objs)

$(BUILD)/bench/micro: bench/micro.c $(CORE_SRC) $(CORE_HDR) \
                      ngx_llm_gateway_module/ngx_http_llm_gateway_module.h \
                      $(MODULE_SO)
	@mkdir -p $(BUILD)/bench
	$(CC) -std=gnu11 -O2 -g -I$(CORE) -Ingx_llm_gateway_module \
	    -I/usr/include/cjson $(NGX_INCS) -o $@ bench/micro.c $(CORE_SRC) \
	    -lcjson -lcrypto -lm

$(BUILD)/bench/ttfb: bench/ttfb.c
	@mkdir -p $(BUILD)/bench
	$(CC) $(CFLAGS) -o $@ $< -lm

$(BUILD)/bench/streams: bench/streams.c
	@mkdir -p $(BUILD)/bench
	$(CC) $(CFLAGS) -o $@ $< -lm

clean:
	rm -rf $(BUILD)

include $(CORE)/fuzz/fuzz.mk
include t/chaos.mk
