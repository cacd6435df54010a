# ngx_llm_gateway: the nginx module, accountd, mockllm and their tests.
#
#   make run     install what is missing, build, start the whole stack in .run/
#   make stop    stop what `make run` started
#   make check   the same set-up from scratch in a temporary directory,
#                then the unit tests, the fuzz corpora and the functional
#                t/ files, side by side (prove -j), and the layer check
#   make test    make check and the slow tier: load, chaos, packages,
#                docker, Chromium, the SDKs
#   make test-run TESTS="t/040-gateway.t ..."
#                those tests on what is built, on a stack of their own
#   make bench   benchmarks on the same set-up; numbers, never a failure
#   make test-sanitize
#                the whole t/ suite twice more: with the module, accountd
#                and mockllm built with ASan and UBSan, then with accountd
#                under valgrind; any report fails it
#   make deb     the Debian packages of the module and accountd, in
#                build/deb
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
# cJSON's headers: where its pkg-config file says, else Debian's place
CJSON_CFLAGS := $(shell pkg-config --cflags libcjson 2>/dev/null \
                  || echo -I/usr/include/cjson)
CFLAGS      := -std=gnu11 -O2 -g -Wall -Wextra -Wno-unused-parameter -Werror \
               -D_FORTIFY_SOURCE=2 -fstack-protector-strong \
               -I$(CORE) $(CJSON_CFLAGS) -I/usr/include/postgresql
# every object's dependencies on the headers it includes, in a .d file
# next to it
DEPFLAGS    := -MMD -MP
OBJ         := $(BUILD)/obj
# what a packager adds to accountd's (debian/rules: dpkg-buildflags)
PKG_CFLAGS  :=
PKG_LDFLAGS :=

DEB_PACKAGES := nginx nginx-dev libcjson-dev libpq-dev libssl-dev \
                postgresql libdbd-pg-perl wrk clang-14 libfuzzer-14-dev \
                make gcc perl valgrind chromium docker-compose \
                build-essential debhelper dpkg-dev

CORE_SRC    := $(wildcard $(CORE)/llm_*.c)
CORE_HDR    := $(wildcard $(CORE)/llm_*.h)
UNIT_SRC    := $(wildcard $(CORE)/t/test_*.c)
UNIT_BIN    := $(patsubst $(CORE)/t/%.c,$(BUILD)/unit/%,$(UNIT_SRC)) \
               $(BUILD)/unit/sim_protocol
MODULE_SRC  := $(wildcard ngx_llm_gateway_module/*.c ngx_llm_gateway_module/*.h)
ACCOUNTD_SRC := $(wildcard accountd/*.c)
MOCKLLM_SRC := $(wildcard mockllm/*.c)

RUN_DIR     := $(CURDIR)/.run

.PHONY: all deps build module accountd mockllm units sdk run stop check test \
        test-run layers deb clean

all: build

# apt-get only when a package is missing, so that a warm machine does not
# wait for the archive.  One that dpkg is installing or configuring
# meanwhile (t/096 of another run reinstalls the module's) is there.
deps:
	@missing=""; \
	for p in $(DEB_PACKAGES); do \
	    dpkg-query -W -f='$${Status}' $$p 2>/dev/null \
	        | grep -q '^install ok ' || missing="$$missing $$p"; \
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
# $(1): the tree, $(2): cc options, $(3): ld options, $(4): more options
define ngx-configure
	rm -rf $(1)
	mkdir -p $(dir $(1))
	cp -a $(NGX_SRC) $(1)
	cd $(1) && . ./conf_flags && \
	    ./configure "$${NGX_CONF_FLAGS[@]}" \
	        --with-cc-opt='$(2)' --with-ld-opt='$(3)' $(4) \
	        --add-dynamic-module=$(CURDIR) >configure.log 2>&1 \
	    || { tail -30 configure.log; exit 1; }
endef

# $(1): the tree the module is built in
define ngx-module
	$(MAKE) -C $(1) -f objs/Makefile modules >$(dir $@)module.log 2>&1 \
	    || { grep -E 'error|warning' -A3 $(dir $@)module.log | head -60; \
	         exit 1; }
	@# a new inode: a running nginx keeps the file it mapped
	cp $(1)/objs/ngx_http_llm_gateway_module.so $@.tmp
	mv -f $@.tmp $@
endef

$(NGX_BUILD)/objs/Makefile: config $(NGX_SRC)/configure
	$(call ngx-configure,$(NGX_BUILD),$(NGX_CC_OPT),$(NGX_LD_OPT))

# nginx's objs/Makefile knows what each of the module's objects depends on
$(MODULE_SO): $(NGX_BUILD)/objs/Makefile $(MODULE_SRC) $(CORE_SRC) $(CORE_HDR)
	$(call ngx-module,$(NGX_BUILD))

# --- accountd, mockllm and the unit tests: objects ---------------------------
#
# Each source is compiled once into an object of the tree it is built for
# ($(OBJ), the sanitizers' $(SAN)/obj), as $(1)/<its directory>/<name>.o;
# a program links the core objects it uses and no others, so that a change
# of one core file rebuilds what links it alone.

# $(1): C sources; the core's sources they use: llm_X.c for each "X.h"
# they include, found next to them or in the core, and those that llm_X.c
# and its headers include in turn
uses-core = $(shell set -- $(1); seen=; \
    while [ -n "$$1" ]; do \
        f=$$1; shift; \
        for i in $$(sed -n 's/^\#include *"\([^"]*\)\.h".*/\1/p' $$f); do \
            case " $$seen " in (*" $$i "*) continue;; esac; \
            seen="$$seen $$i"; \
            for h in $$(dirname $$f)/$$i.h $(CORE)/$$i.h; do \
                if [ -f $$h ]; then set -- "$$@" $$h; break; fi; \
            done; \
            if [ -f $(CORE)/$$i.c ]; then set -- "$$@" $(CORE)/$$i.c; fi; \
        done; \
    done; \
    for i in $$seen; do \
        if [ -f $(CORE)/$$i.c ]; then echo $(CORE)/$$i.c; fi; \
    done)

# $(1): the object tree, $(2): sources; their objects in it
objs-of = $(patsubst $(CORE)/%.c,$(1)/core/%.o,$(patsubst $(CORE)/t/%.c,$(1)/unit/%.o,\
          $(patsubst accountd/%.c,$(1)/accountd/%.o,$(patsubst mockllm/%.c,$(1)/mockllm/%.o,$(2)))))

# $(1): the object tree, $(2): the compiler and its options
define obj-rules
$(1)/core/%.o: $(CORE)/%.c
	@mkdir -p $$(@D)
	$(2) $$(PKG_CFLAGS) $$(DEPFLAGS) -c -o $$@ $$<

$(1)/accountd/%.o: accountd/%.c
	@mkdir -p $$(@D)
	$(2) $$(PKG_CFLAGS) $$(DEPFLAGS) -c -o $$@ $$<

$(1)/mockllm/%.o: mockllm/%.c
	@mkdir -p $$(@D)
	$(2) $$(DEPFLAGS) -c -o $$@ $$<

$(1)/unit/%.o: $(CORE)/t/%.c
	@mkdir -p $$(@D)
	$(2) -Iaccountd $$(DEPFLAGS) -c -o $$@ $$<
endef

# $(1): the program, $(2): the object tree, $(3): the compiler and its
# options, $(4): its own sources, $(5): libraries
define program
$(1): $(call objs-of,$(2),$(4) $(call uses-core,$(4)))
	@mkdir -p $$(@D)
	$(3) $$(PKG_LDFLAGS) -o $$@ $$^ $(5)
endef

# $(1): the object tree, $(2): the directory of the programs, $(3): the
# compiler and its options
define programs
$(eval $(call obj-rules,$(1),$(3)))
$(eval $(call program,$(2)/accountd,$(1),$(3),$(ACCOUNTD_SRC),-lpq -lcrypto -lm))
$(eval $(call program,$(2)/mockllm,$(1),$(3),$(MOCKLLM_SRC),-lcjson))
$(foreach u,$(UNIT_SRC),$(eval $(call program,$(2)/unit/$(basename $(notdir $(u))),$(1),$(3),$(u),-lcjson -lcrypto -lm)))
$(eval $(call program,$(2)/unit/sim_protocol,$(1),$(3),$(CORE)/t/sim_protocol.c accountd/queue.c,-lcrypto))
endef

$(eval $(call programs,$(OBJ),$(BUILD),$$(CC) $$(CFLAGS)))

-include $(wildcard $(BUILD)/obj/*/*.d $(BUILD)/san/obj/*/*.d \
                    $(BUILD)/fuzz/obj/*/*.d)

# The official SDKs, pinned, for t/050-sdk.t: real clients of the gateway.
sdk: $(BUILD)/sdk/clients.mjs $(BUILD)/sdk/matrix.mjs $(BUILD)/sdk/models.mjs \
     $(BUILD)/sdk/tools.mjs

$(BUILD)/sdk/clients.mjs: t/sdk/clients.mjs t/sdk/estimate.mjs t/sdk/embed.mjs \
                          t/sdk/package.json t/sdk/package-lock.json
	@mkdir -p $(BUILD)/sdk
	cp t/sdk/package.json t/sdk/package-lock.json $(BUILD)/sdk/
	cd $(BUILD)/sdk && npm ci --no-audit --no-fund --loglevel=error >npm.log 2>&1 \
	    || { cat npm.log; exit 1; }
	cp t/sdk/estimate.mjs $(BUILD)/sdk/
	cp t/sdk/embed.mjs $(BUILD)/sdk/
	cp t/sdk/clients.mjs $@

# the client matrix (t/098): the same packages, copied without npm ci
$(BUILD)/sdk/matrix.mjs: t/sdk/matrix.mjs $(BUILD)/sdk/clients.mjs
	cp t/sdk/matrix.mjs $@

# t/100's tool calls through translating roles, the same way
$(BUILD)/sdk/tools.mjs: t/sdk/tools.mjs $(BUILD)/sdk/clients.mjs
	cp t/sdk/tools.mjs $@

# t/092-models.t's clients, beside the installed SDKs
$(BUILD)/sdk/models.mjs: t/sdk/models.mjs $(BUILD)/sdk/clients.mjs
	cp t/sdk/models.mjs $@

run: deps build
	scripts/stack start $(RUN_DIR)

stop:
	scripts/stack stop $(RUN_DIR)

# --- the tests ----------------------------------------------------------------
#
#   make check   the unit tests, the protocol simulation's seeds, the fuzz
#                corpora (t/015) and the functional t/ files, side by side
#                (prove -j), then the layer check of each program
#   make test    make check and the slow tier: load, chaos, packages,
#                docker, Chromium, the SDKs and the files of a minute
#
# Each file takes ports and tenants of its own (t/lib/LLMGW.pm), so files
# run side by side on one stack.  Those in SERIAL_TESTS change what every
# other user of the stack sees (they restart its accountd or PostgreSQL,
# lock llm.usage, read its global counters, or load the machine): they run
# after the others, one at a time, on the same stack.  A file that stops
# accountd stops one of its own (own_accountd in t/lib/LLMGW.pm).

# the slow tier: load, chaos, the SDKs, Chromium, packages, docker, and
# the files of a minute or more (fairness, shared limits, the bad-key
# zone, capacity under demand)
SLOW_TESTS  := t/048-chaos.t t/049-chaos-nginx.t t/050-sdk.t \
               t/051-chaos-clients.t t/056-status.t t/064-shared-limits.t \
               t/072-fairness.t t/084-bad-key-zone.t \
               t/089-capacity-demand.t t/090-load.t t/096-packages.t \
               t/097-docker.t
SERIAL_TESTS := t/032-accountd-keyset.t t/033-accountd-metrics.t \
               t/048-chaos.t t/090-load.t t/097-docker.t
# the longest first, so that the last to start does not end alone
LONG_TESTS  := t/072-fairness.t t/064-shared-limits.t t/101-books.t \
               t/089-capacity-demand.t t/084-bad-key-zone.t t/096-packages.t \
               t/086-breaker-tenants.t t/073-backpressure.t t/082-tricks.t \
               t/088-idem-isolation.t t/067-pacing.t t/087-pacer-shares.t \
               t/050-sdk.t t/055-metering.t t/049-chaos-nginx.t \
               t/051-chaos-clients.t t/066-caps-keys-gateway.t \
               t/062-caps-gateway.t t/056-status.t
ALL_TESTS   := $(wildcard t/*.t)
CHECK_TESTS := $(UNIT_BIN) $(filter-out $(SLOW_TESTS),$(ALL_TESTS))
# files at once: they wait on timers and daemons more than they compute
JOBS        ?= 6

# TESTS picks some: make test-run TESTS="t/040-gateway.t t/060-keys.t";
# given to make check or make test, it replaces their tier
TESTS ?= $(UNIT_BIN) $(ALL_TESTS)
tier = $(if $(filter command line,$(origin TESTS)),$(TESTS),$(1))

# the layer check runs whatever the tests say, and the tests whatever it
# says
check: deps build sdk
	@rc=0; \
	$(MAKE) --no-print-directory layers || rc=1; \
	$(MAKE) --no-print-directory test-run \
	    TESTS="$(call tier,$(CHECK_TESTS))" || rc=1; \
	exit $$rc

test: deps build sdk
	@rc=0; \
	$(MAKE) --no-print-directory layers || rc=1; \
	$(MAKE) --no-print-directory test-run \
	    TESTS="$(call tier,$(UNIT_BIN) $(ALL_TESTS))" || rc=1; \
	exit $$rc

# Each program's files call each other only downward (scripts/layers),
# for each program whose spec, its LAYERS file, there is.
LAYERS_ngx_llm_gateway_module = $(wildcard $(NGX_BUILD)/objs/addon/*/*.o)
# the objects of today's sources, not those a removed source left
LAYERS_accountd = $(call objs-of,$(OBJ),$(ACCOUNTD_SRC) \
                                         $(call uses-core,$(ACCOUNTD_SRC)))
LAYERS_mockllm  = $(call objs-of,$(OBJ),$(MOCKLLM_SRC))

layers: build
	@rc=0; \
	for p in ngx_llm_gateway_module accountd mockllm; do \
	    if [ ! -f $$p/LAYERS ]; then \
	        echo "layers: $$p: no $$p/LAYERS, not checked"; continue; \
	    fi; \
	    case $$p in \
	    ngx_llm_gateway_module) o="$(LAYERS_ngx_llm_gateway_module)";; \
	    accountd) o="$(LAYERS_accountd)";; \
	    mockllm) o="$(LAYERS_mockllm)";; \
	    esac; \
	    if scripts/layers $$p/LAYERS $$o; then \
	        echo "layers: $$p: every call goes down"; \
	    else \
	        rc=1; \
	    fi; \
	done; \
	exit $$rc

# The suite on what is built: the stack and the tests take LLMGW_BUILD
# (the binaries, the module and sdk/; build) and the other LLMGW_*
# variables from the environment.  The stack is set up from scratch in a
# temporary directory; every t/*.t starts its own nginx against it, the
# unit binaries print TAP themselves.  TESTS are run JOBS at a time, those
# of them in SERIAL_TESTS after the others, one at a time; a failure
# ends with the failed assertions, for a log's tail.  The stack's
# ports are below the kernel's ephemeral range (32768 and up): while t/048
# restarts PostgreSQL, an outgoing connection could otherwise take its
# port.
test-run:
	@start=$$(date +%s); \
	for try in 1 2 3; do \
	    dir=$$(mktemp -d /tmp/llmgw-test.XXXXXX); \
	    base=$$((10000 + RANDOM % 20000)); \
	    export LLMGW_STACK_QUIET=1 LLMGW_NO_NGINX=1 LLMGW_PG_FAST=1 \
	        LLMGW_MOCK_DELAY_MS=0 \
	        LLMGW_PG_PORT=$$base LLMGW_MOCK_PORT=$$((base + 1)) \
	        LLMGW_ACCOUNTD_METRICS_PORT=$$((base + 2)); \
	    scripts/stack start $$dir >$$dir/stack.log 2>&1 && break; \
	    scripts/stack stop $$dir >/dev/null 2>&1; \
	    if [ $$try = 3 ]; then cat $$dir/stack.log; rm -rf $$dir; exit 1; fi; \
	    echo "the stack did not start (a port taken?), again"; \
	    rm -rf $$dir; \
	done; \
	tests=$$(for t in $(TESTS); do \
	    if [ -d $$t ]; then ls $${t%/}/*.t; else echo $$t; fi; \
	done); \
	order=$$(for t in $(LONG_TESTS); do \
	    echo "$$tests" | grep -xF $$t; \
	done; echo "$$tests" | grep -vxF $(patsubst %,-e %,$(LONG_TESTS))); \
	par=$$(echo "$$order" | grep -vxF $(patsubst %,-e %,$(SERIAL_TESTS))); \
	seq=$$(echo "$$tests" | grep -xF $(patsubst %,-e %,$(SERIAL_TESTS))); \
	rc=0; \
	if [ -n "$$par" ]; then \
	    { LLMGW_TEST_DIR=$$dir prove -j$(JOBS) $$par || touch $$dir/failed; } \
	        2>&1 | tee $$dir/prove.log; \
	fi; \
	if [ -n "$$seq" ]; then \
	    echo "--- one at a time:" $$seq; \
	    { LLMGW_TEST_DIR=$$dir prove $$seq || touch $$dir/failed; } \
	        2>&1 | tee -a $$dir/prove.log; \
	fi; \
	if [ -f $$dir/failed ]; then \
	    rc=1; \
	    echo "--- what failed (all of it in $$dir/prove.log):"; \
	    grep -E '^#   Failed test|^#   at |^#\s+(got|expected)|^\S+\.t +\(Wstat|^  (Failed tests|Non-zero|Parse)' \
	        $$dir/prove.log | head -n 80; \
	fi; \
	scripts/stack stop $$dir >/dev/null 2>&1; \
	if [ $$rc -eq 0 ]; then rm -rf $$dir; else echo "kept $$dir"; fi; \
	echo "--- $$(echo $$tests | wc -w) files in $$(( $$(date +%s) - start )) s:" \
	    "$$([ $$rc -eq 0 ] && echo PASS || echo FAIL)"; \
	exit $$rc

# --- make test-sanitize -------------------------------------------------------
#
# The suite twice (SAN_TESTS: every file but t/096 and t/097), on the
# stack of make test, SAN_JOBS files at a time:
#
#   asan      the module, accountd, mockllm and the unit tests built with
#             ASan and UBSan in build/san; Debian's nginx loads the module
#             with the ASan runtime preloaded (it must come first) and
#             without leak detection (nginx's exit leaves its pools to the
#             OS); accountd and mockllm keep it.  Built with clang, whose
#             ASan runtime holds UBSan's: GCC's UBSan, a runtime apart,
#             writes to stderr whatever log_path says when ASan's is there,
#             and reads its options only at its first report, when nginx's
#             process title has overwritten the environment
#   valgrind  the usual build, every accountd (daemon and CLI) under
#             valgrind through the wrapper build/vg/accountd, but for the
#             tenant and key the harness makes a file (new_tenant, by
#             the plain CLI: the same two commands hundreds of times,
#             seconds each under valgrind, which t/030 and t/031 run
#             there themselves)
#
# Sanitizers and valgrind write to files in a temporary directory, which
# every process can write, nginx's workers (www-data) included; the target
# counts the reports at the end and fails on one, or on a failed test.
# SAN_PASSES picks the passes, SAN_TESTS the tests.

SAN         := $(BUILD)/san
VG          := $(BUILD)/vg
SAN_CC      ?= clang-14
SAN_FLAGS   := -fsanitize=address,undefined -fno-omit-frame-pointer -g
SAN_NGX     := $(SAN)/nginx
SAN_NGX_CC_OPT := $(NGX_CC_OPT) $(SAN_FLAGS) \
                  -fsanitize-ignorelist=$(CURDIR)/$(SAN)/asan.ignore
SAN_NGX_LD_OPT := $(NGX_LD_OPT) $(SAN_FLAGS)
SAN_UNIT    := $(patsubst $(BUILD)/unit/%,$(SAN)/unit/%,$(UNIT_BIN))
SAN_PASSES  ?= asan valgrind
# the packages (t/096) and the containers (t/097) are built from the
# sources, not from what is sanitized here
SAN_TESTS   ?= $(filter-out t/096-packages.t t/097-docker.t,$(ALL_TESTS))
# fewer at once than make test: each sanitized daemon costs more CPU
SAN_JOBS    ?= 4
# t/090 is 60 s of 200 clients: at valgrind's pace accountd cannot take
# their records as they come, which is what the test measures
VG_SKIP     ?= t/090-load.t
VG_OPTS     ?= --error-exitcode=99 --leak-check=full \
               --errors-for-leak-kinds=definite --show-leak-kinds=definite \
               --num-callers=30
SAN_RT      = $(shell $(SAN_CC) -print-file-name=libclang_rt.asan-x86_64.so)

.PHONY: test-sanitize san-build vg-build

san-build: $(SAN)/ngx_http_llm_gateway_module.so $(SAN)/accountd \
           $(SAN)/mockllm $(SAN_UNIT) $(SAN)/sdk

# configured as the usual tree, the sanitizers added; configure's own
# test programs must not fail on a leak of theirs
$(SAN_NGX)/objs/Makefile: export ASAN_OPTIONS = detect_leaks=0
$(SAN_NGX)/objs/Makefile: config $(NGX_SRC)/configure $(SAN)/asan.ignore
	$(call ngx-configure,$(SAN_NGX),$(SAN_NGX_CC_OPT),$(SAN_NGX_LD_OPT),--with-cc=$(SAN_CC))

# nginx and the module's file that configure writes both define
# ngx_modules; nginx's wins, and ASan would poison what follows it by the
# size of the module's: a reload copying nginx's would be a false report
$(SAN)/asan.ignore: Makefile
	@mkdir -p $(SAN)
	echo 'src:*/ngx_http_llm_gateway_module_modules.c' >$@

$(SAN)/ngx_http_llm_gateway_module.so: $(SAN_NGX)/objs/Makefile $(MODULE_SRC) \
                                       $(CORE_SRC) $(CORE_HDR)
	$(call ngx-module,$(SAN_NGX))

# accountd, mockllm and the unit tests: objects of their own in $(SAN)/obj
$(eval $(call programs,$(SAN)/obj,$(SAN),$$(SAN_CC) $$(CFLAGS) $$(SAN_FLAGS)))

# the tests find the SDKs next to the binaries
$(SAN)/sdk $(VG)/sdk:
	@mkdir -p $(dir $@)
	ln -sfn ../sdk $@

# build/vg: the usual module and mockllm, accountd wrapped
vg-build: $(VG)/accountd $(VG)/sdk
	@for f in ngx_http_llm_gateway_module.so mockllm; do \
	    ln -sfn ../$$f $(VG)/$$f; \
	done

$(VG)/accountd: $(BUILD)/accountd Makefile
	@mkdir -p $(VG)
	@printf '%s\n' '#!/bin/sh' \
	    '# accountd under valgrind, for make test-sanitize' \
	    'exec valgrind $(VG_OPTS) \' \
	    '    --log-file="$${LLMGW_VALGRIND_LOG:-/tmp}/accountd.%p" \' \
	    '    $(CURDIR)/$(BUILD)/accountd "$$@"' >$@.tmp
	@chmod 755 $@.tmp
	mv -f $@.tmp $@

test-sanitize: deps build sdk san-build vg-build
	@rep=$$(mktemp -d /tmp/llmgw-san.XXXXXX); chmod 755 $$rep; \
	fail=0; \
	for pass in $(SAN_PASSES); do \
	    mkdir -m 1777 $$rep/$$pass; \
	    start=$$(date +%s); \
	    echo "--- $$pass pass"; \
	    case $$pass in \
	    asan) \
	        log=log_path=$$rep/asan/san; \
	        ASAN_OPTIONS=$$log:detect_leaks=1 \
	        UBSAN_OPTIONS=$$log:print_stacktrace=1 \
	        LLMGW_NGINX_ENV="LD_PRELOAD=$(SAN_RT) \
	            ASAN_OPTIONS=$$log:detect_leaks=0 \
	            UBSAN_OPTIONS=$$log:print_stacktrace=1" \
	        LLMGW_BUILD=$(CURDIR)/$(SAN) LLMGW_TIME_SCALE=2 \
	            $(MAKE) --no-print-directory test-run JOBS=$(SAN_JOBS) \
	                TESTS="$(SAN_UNIT) $(SAN_TESTS)" || fail=1;; \
	    valgrind) \
	        tests=$$(for t in $(SAN_TESTS); do \
	            if [ -d $$t ]; then ls $${t%/}/*.t; else echo $$t; fi; \
	        done); \
	        for t in $(VG_SKIP); do \
	            if echo "$$tests" | grep -qxF $$t; then \
	                echo "$$t: skipped under valgrind: a load test"; \
	                tests=$$(echo "$$tests" | grep -vxF $$t); \
	            fi; \
	        done; \
	        LLMGW_VALGRIND_LOG=$$rep/valgrind \
	        LLMGW_SETUP_BUILD=$(CURDIR)/$(BUILD) \
	        LLMGW_BUILD=$(CURDIR)/$(VG) LLMGW_TIME_SCALE=4 \
	            $(MAKE) --no-print-directory test-run JOBS=$(SAN_JOBS) \
	                TESTS="$$(echo $$tests)" || fail=1;; \
	    *) \
	        echo "unknown pass $$pass"; fail=1; continue;; \
	    esac; \
	    echo "--- $$pass pass: $$(( $$(date +%s) - start )) s"; \
	done; \
	echo "--- reports in $$rep"; \
	reports=0; \
	for f in $$(find $$rep -type f | sort); do \
	    case $$f in \
	    */valgrind/*) \
	        n=$$(sed -n 's/^==[0-9]*== ERROR SUMMARY: \([0-9]*\) errors.*/\1/p' \
	            $$f | tail -n 1); \
	        if [ -z "$$n" ]; then \
	            n=$$(grep -cE '^==[0-9]+== (Invalid |Conditional jump|Use of uninit|Syscall param|Mismatched |Source and destination|Argument .* of function|[0-9,]+ bytes in [0-9,]+ blocks are definitely)' $$f); \
	        fi;; \
	    *) \
	        n=$$(grep -cE '^==[0-9]+==ERROR: |runtime error: ' $$f);; \
	    esac; \
	    if [ "$$n" -gt 0 ]; then \
	        echo "  $$f: $$n"; reports=$$((reports + n)); \
	    fi; \
	done; \
	echo "--- $$(find $$rep -type f | wc -l) files, $$reports reports"; \
	if [ $$reports -eq 0 ] && [ $$fail -eq 0 ]; then \
	    rm -rf $$rep; \
	else \
	    echo "kept $$rep"; exit 1; \
	fi

# --- make deb -----------------------------------------------------------------
#
# The Debian packages (debian/): libnginx-mod-http-llm-gateway, the module
# as Debian packages its own, and llmgw-accountd.  dpkg-buildpackage
# builds them from a copy of the tree in build/deb/src (the files git
# knows and the new ones it does not ignore), so that the working tree
# stays as it is; the .deb files are left in build/deb, the log in
# build/deb/build.log.  The version is debian/changelog's, which must be
# accountd's.

DEB_DIR     := $(BUILD)/deb
DEB_INPUTS  := $(wildcard debian/* debian/source/*) config Makefile \
               README.md $(wildcard doc/*.md) $(MODULE_SRC) \
               $(CORE_SRC) $(CORE_HDR) \
               $(wildcard accountd/*) $(wildcard sql/*.sql)

deb: deps $(DEB_DIR)/stamp

$(DEB_DIR)/stamp: $(DEB_INPUTS)
	@v=$$(dpkg-parsechangelog -l debian/changelog -S Version); \
	a=$$(sed -n 's/^#define ACCOUNTD_VERSION *"\(.*\)"$$/\1/p' \
	    accountd/accountd.h); \
	if [ "$$v" != "$$a" ]; then \
	    echo "debian/changelog is at $$v, accountd at $$a"; exit 1; \
	fi
	rm -rf $(DEB_DIR)
	mkdir -p $(DEB_DIR)/src
	if git rev-parse --git-dir >/dev/null 2>&1; then \
	    git ls-files -z -co --exclude-standard \
	        | tar --null -T - --ignore-failed-read -cf -; \
	else \
	    tar --exclude=./build --exclude=./.run -cf - .; \
	fi | tar -C $(DEB_DIR)/src -xf -
	cd $(DEB_DIR)/src && dpkg-buildpackage -b -us -uc -Jauto \
	    >../build.log 2>&1 || { tail -40 ../build.log; exit 1; }
	rm -rf $(DEB_DIR)/src
	@cd $(DEB_DIR) && ls -1 *.deb
	@touch $@

# Benchmarks: the stack of `make test` in a temporary directory, one nginx,
# numbers printed and kept in build/bench/*.json; no timing is a failure.
# bench/with-stack stops everything it started, even when interrupted.
.PHONY: bench bench-ttfb bench-load bench-micro bench-ingest bench-streams \
        bench-peers bench-profile

# all of them, then the table of their latest figures in bench/README.md
bench: bench-micro bench-ingest bench-load bench-ttfb bench-streams \
       bench-peers
	perl bench/results.pl

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

# Portkey and its dependencies as bench/peers/package-lock.json pins them,
# installed once (npm's clock on the file is the package's: touched)
PORTKEY     := $(BUILD)/peers/node_modules/@portkey-ai/gateway/package.json

# the gateway, nginx proxy_pass and the Portkey gateway (Node.js, pinned in
# bench/peers), JSON and SSE at 32 connections: requests/s, latency, CPU a
# request, gateway / Portkey (see bench/peers.pl)
bench-peers: build $(PORTKEY)
	BENCH_TIMEOUT=$${BENCH_TIMEOUT:-300} bench/with-stack perl bench/peers.pl

$(PORTKEY): bench/peers/package.json bench/peers/package-lock.json
	@mkdir -p $(BUILD)/peers
	cp bench/peers/package.json bench/peers/package-lock.json $(BUILD)/peers/
	cd $(BUILD)/peers && npm ci --ignore-scripts --no-audit --no-fund
	@touch $@

# where nginx's worker spends its time: perf of proxy_pass and of the
# gateway under bench-load's request (see bench/profile.pl); not in bench
bench-profile: build
	bench/with-stack perl bench/profile.pl

# accountd's sustained ingest rate into PostgreSQL (see bench/ingest.pl)
bench-ingest: build
	bench/with-stack perl bench/ingest.pl

# admission ns/op, the keyed HMAC, bytes a tenant in the zone (printed and
# in build/bench/micro-<time>.json: see bench/micro.pl)
bench-micro: $(BUILD)/bench/micro
	perl bench/micro.pl

NGX_INCS    := $(addprefix -I$(NGX_BUILD)/, src/core src/event \
               src/event/modules src/os/unix src/http src/http/modules \
               src/http/v2 objs)

$(BUILD)/bench/micro: bench/micro.c $(CORE_SRC) $(CORE_HDR) \
                      ngx_llm_gateway_module/ngx_http_llm_gateway_module.h \
                      $(MODULE_SO)
	@mkdir -p $(BUILD)/bench
	$(CC) -std=gnu11 -O2 -g -I$(CORE) -Ingx_llm_gateway_module \
	    $(CJSON_CFLAGS) $(NGX_INCS) -o $@ bench/micro.c $(CORE_SRC) \
	    -lcjson -lcrypto -lm

# the two share bench/client.c, their HTTP client
$(BUILD)/bench/ttfb: bench/ttfb.c bench/client.c bench/client.h
	@mkdir -p $(BUILD)/bench
	$(CC) $(CFLAGS) -o $@ bench/ttfb.c bench/client.c -lm

$(BUILD)/bench/streams: bench/streams.c bench/client.c bench/client.h
	@mkdir -p $(BUILD)/bench
	$(CC) $(CFLAGS) -o $@ bench/streams.c bench/client.c -lm

clean:
	rm -rf $(BUILD)

include $(CORE)/fuzz/fuzz.mk
include t/chaos.mk
