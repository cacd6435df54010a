# The fault and bad-input suite, included by the top Makefile.
#
#   make chaos   the stack of `make test`, then the chaos tests in their
#                long form (LLMGW_CHAOS_LONG=1): accountd killed every 2 s
#                and PostgreSQL restarted every 5 s for 60 s, accountd
#                stopped for 2 minutes, a reload every second and a worker
#                killed every 5 s for 60 s, clients leaving at every 3rd
#                byte, each upstream fault 20 times, 200,000 seeds of the
#                protocol simulation; about 8 minutes.
#
# `make test` runs the same files in their short form, seconds each.
# CHAOS_TESTS picks some: make chaos CHAOS_TESTS=t/049-chaos-nginx.t

# Included before the first rule, this file must not give make its default
# goal: the top Makefile's first rule keeps it.
.DEFAULT_GOAL := $(or $(.DEFAULT_GOAL),all)

CHAOS_TESTS ?= $(BUILD)/unit/sim_protocol t/048-chaos.t \
               t/049-chaos-nginx.t t/051-chaos-clients.t t/052-bad-input.t \
               t/053-accountd-outage.t

.PHONY: chaos

chaos:
	LLMGW_CHAOS_LONG=1 $(MAKE) --no-print-directory test \
	    TESTS="$(CHAOS_TESTS)"
