# The libFuzzer targets of the pure cores, included from the top Makefile:
# fuzz_sse (the usage extractor), fuzz_inspect (request bodies),
# fuzz_inspect_diff (the inspector against its reference, t/inspect_diff.h),
# fuzz_record (settle records and lease frames), fuzz_key (snapshot lines
# and key-set frames), fuzz_provider (providers' refusals), fuzz_pacer
# (the upstream pacer, against its own books), fuzz_fair (the fairness
# core, against its books and bounds), fuzz_breaker (the breaker, against
# its books), fuzz_tx_request (the request translator, against what each
# backend requires), fuzz_tx_stream (the stream translator: what it writes
# must be a stream of the client's dialect), fuzz_tx_body (whole answers
# and errors between dialects).  Each has its seed corpus in
# fuzz/corpus/<name>.
#
#   make fuzz-build    build $(BUILD)/fuzz/fuzz_*
#   make fuzz-replay   run each once over its seed corpus (t/015 does the
#                      same on every make check)
#   make fuzz          a bounded session of each, FUZZ_TIME seconds apiece;
#                      new inputs and crashes go to $(BUILD)/fuzz, never
#                      into the source tree; prints executions, coverage
#                      and finds, and fails if anything was found
#   make fuzz-run      the same as make fuzz
#   make fuzz-seeds    rewrite the seeds fuzz/seeds.c generates (by hand,
#                      after a change of a format; commit what changed)
#
# FUZZ_TARGETS=pacer (or any list) on the command line: those alone.

CORE            ?= ngx_llm_gateway_module/core
BUILD           ?= build

FUZZ_CC         ?= clang-14
FUZZ_CFLAGS     ?= -g -O1 -fsanitize=fuzzer,address,undefined \
                   -fno-sanitize-recover=undefined \
                   -I$(CORE) $(or $(CJSON_CFLAGS),-I/usr/include/cjson)
FUZZ_TIME       ?= 60

FUZZ_TARGETS    ?= sse inspect inspect_diff record key provider pacer fair \
                   breaker tx_request tx_stream tx_body
FUZZ_BIN        := $(patsubst %,$(BUILD)/fuzz/fuzz_%,$(FUZZ_TARGETS))
FUZZ_SEEDS      := $(CORE)/fuzz/corpus

FUZZ_OBJ        := $(BUILD)/fuzz/obj

.PHONY: fuzz-build fuzz-replay fuzz fuzz-run fuzz-seeds

fuzz-build: $(FUZZ_BIN)

# Objects in $(FUZZ_OBJ), instrumented; each target links its own and the
# core objects it uses (the top Makefile's uses-core: by what it includes)
$(FUZZ_OBJ)/core/%.o: $(CORE)/%.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(DEPFLAGS) -c -o $@ $<

$(FUZZ_OBJ)/fuzz/%.o: $(CORE)/fuzz/%.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(DEPFLAGS) -c -o $@ $<

define fuzz-target
$(BUILD)/fuzz/fuzz_$(1): $(FUZZ_OBJ)/fuzz/fuzz_$(1).o \
        $(patsubst $(CORE)/%.c,$(FUZZ_OBJ)/core/%.o,\
                   $(call uses-core,$(CORE)/fuzz/fuzz_$(1).c))
	$$(FUZZ_CC) $$(FUZZ_CFLAGS) -o $$@ $$^ -lcjson -lcrypto -lm
endef

$(foreach t,$(FUZZ_TARGETS),$(eval $(call fuzz-target,$(t))))

# Given files, libFuzzer runs each once and exits non-zero on a failure.
fuzz-replay: $(FUZZ_BIN)
	@for t in $(FUZZ_TARGETS); do \
	    $(BUILD)/fuzz/fuzz_$$t $(FUZZ_SEEDS)/$$t/* \
	        2>$(BUILD)/fuzz/replay-$$t.log \
	        || { tail -40 $(BUILD)/fuzz/replay-$$t.log; exit 1; }; \
	    echo "fuzz_$$t: $$(ls $(FUZZ_SEEDS)/$$t | wc -l) seeds replayed"; \
	done

# libFuzzer writes what it finds new into the first directory only; the
# seeds are read.  Every target runs even when one finds something.
fuzz fuzz-run: $(FUZZ_BIN)
	@found=0; \
	for t in $(FUZZ_TARGETS); do \
	    new=$(BUILD)/fuzz/corpus/$$t; art=$(BUILD)/fuzz/artifacts/$$t; \
	    log=$(BUILD)/fuzz/run-$$t.log; \
	    dict=; \
	    if [ -f $(CORE)/fuzz/$$t.dict ]; then \
	        dict=-dict=$(CORE)/fuzz/$$t.dict; \
	    fi; \
	    mkdir -p $$new $$art; \
	    echo "fuzz_$$t: $(FUZZ_TIME) s"; \
	    $(BUILD)/fuzz/fuzz_$$t -max_total_time=$(FUZZ_TIME) \
	        -print_final_stats=1 -timeout=10 -artifact_prefix=$$art/ \
	        $$dict $$new $(FUZZ_SEEDS)/$$t >$$log 2>&1; \
	    rc=$$?; \
	    runs=$$(sed -n 's/^stat::number_of_executed_units: *//p' $$log); \
	    cov=$$(grep -o 'cov: [0-9]* ft: [0-9]*' $$log | tail -1); \
	    units=$$(sed -n 's/^stat::new_units_added: *//p' $$log); \
	    unit=$$(sed -n 's/.*Test unit written to //p' $$log); \
	    printf '  %s executions, %s, %s new inputs in %s\n' \
	        "$${runs:-?}" "$${cov:-cov: ?}" "$${units:-?}" $$new; \
	    if [ $$rc -ne 0 ] || [ -n "$$unit" ]; then \
	        found=1; \
	        printf '  FOUND: %s (exit %s); see %s\n' \
	            "$${unit:-nothing written}" $$rc $$log; \
	        grep -m1 -E '^(==[0-9]+==ERROR|fuzz_[a-z]+: |.*runtime error)' \
	            $$log | sed 's/^/    /'; \
	    else \
	        echo "  nothing found"; \
	    fi; \
	done; \
	exit $$found

fuzz-seeds: $(BUILD)/fuzz/seeds
	$(BUILD)/fuzz/seeds $(FUZZ_SEEDS)

$(BUILD)/fuzz/seeds: $(CORE)/fuzz/seeds.c $(CORE)/llm_record.c \
                     $(CORE)/llm_key.c $(CORE)/llm_record.h $(CORE)/llm_key.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I$(CORE) -o $@ $< $(CORE)/llm_record.c \
	    $(CORE)/llm_key.c -lcrypto
