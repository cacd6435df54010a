# The libFuzzer targets of the pure cores, included from the top Makefile.
#
#   make fuzz-build    build $(BUILD)/fuzz/fuzz_sse
#   make fuzz-replay   run it once over the seed corpus (part of make test)
#   make fuzz-run      a bounded fuzzing session; new inputs and crashes go
#                      to $(BUILD)/fuzz, never into the source tree

CORE            ?= ngx_llm_gateway_module/core
BUILD           ?= build

FUZZ_CC         ?= clang-14
FUZZ_CFLAGS     ?= -g -O1 -fsanitize=fuzzer,address,undefined \
                   -fno-sanitize-recover=undefined \
                   -I$(CORE) -I/usr/include/cjson
FUZZ_TIME       ?= 60

FUZZ_SSE        := $(BUILD)/fuzz/fuzz_sse
FUZZ_SSE_SEEDS  := $(CORE)/fuzz/corpus/sse

.PHONY: fuzz-build fuzz-replay fuzz-run

fuzz-build: $(FUZZ_SSE)

$(FUZZ_SSE): $(CORE)/fuzz/fuzz_sse.c $(CORE)/llm_sse.c $(CORE)/llm_sse.h \
             $(CORE)/llm_record.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $(CORE)/fuzz/fuzz_sse.c \
	    $(CORE)/llm_sse.c -lcjson

# Given files, libFuzzer runs each once and exits non-zero on a failure.
fuzz-replay: $(FUZZ_SSE)
	$(FUZZ_SSE) $(FUZZ_SSE_SEEDS)/* 2>$(BUILD)/fuzz/replay-sse.log \
	    || { tail -40 $(BUILD)/fuzz/replay-sse.log; exit 1; }
	@echo "fuzz_sse: $$(ls $(FUZZ_SSE_SEEDS) | wc -l) seeds replayed"

fuzz-run: $(FUZZ_SSE)
	@mkdir -p $(BUILD)/fuzz/corpus/sse
	$(FUZZ_SSE) -max_total_time=$(FUZZ_TIME) \
	    -artifact_prefix=$(BUILD)/fuzz/ -dict=$(CORE)/fuzz/sse.dict \
	    $(BUILD)/fuzz/corpus/sse $(FUZZ_SSE_SEEDS)
