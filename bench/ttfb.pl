#!/usr/bin/perl

# Time to first byte of an SSE stream: the gateway against the upstream
# itself and against plain nginx proxy_pass.  Run by `make bench-ttfb`
# through bench/with-stack, which gives it a stack as `make test` has.
#
# One nginx (Debian's, the module loaded) serves two locations that go to
# the same mockllm over the same upstream keepalive pool:
#
#   /plain/v1/chat/completions   proxy_pass, proxy_buffering off
#   /v1/chat/completions         llm_gateway zone=llm api=openai
#
# and, on two servers of their own, the same location through a backend:
#
#   :native /v1/chat/completions      a backend of the client's API
#   :translated /v1/chat/completions  a Messages backend: the request and
#                                     the stream translated
#
# and build/bench/ttfb sends the same request to mockllm directly (to its
# Chat endpoint and, naming a model of its Anthropic family, to its
# Messages one: what the translated target's backend costs), to the one
# and to the other, in turn, and prints the table.  At the end the
# ledger is read back: every gateway request must have left its row; then
# the issue's targets, met or missed, are printed and added to the JSON
# file build/bench/ttfb-<time>.json.
#
# Knobs (environment): BENCH_N rounds (300), BENCH_WARMUP (20),
# BENCH_GAP_US pause between two requests (0), BENCH_STREAMS concurrent
# streams (32, 0: none), BENCH_SECS per window (2), BENCH_ROUNDS of windows
# (3), BENCH_WORKERS nginx workers (1).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../t/lib", "$FindBin::Bin/lib";

use Bench;
use LLMGW;

my $s = bench_stack();
my $client = bench_client('ttfb');

my %o = (
    n       => $ENV{BENCH_N}       // 300,
    warmup  => $ENV{BENCH_WARMUP}  // 20,
    gap     => $ENV{BENCH_GAP_US}  // 0,
    streams => $ENV{BENCH_STREAMS} // 32,
    secs    => $ENV{BENCH_SECS}    // 2,
    rounds  => $ENV{BENCH_ROUNDS}  // 3,
    workers => $ENV{BENCH_WORKERS} // 1,
);

# nginx reads the key snapshot when it starts: the tenant comes first.  Its
# tier could never run short during the run; the alias's model is priced.
my $t = new_tenant(tier => 'bench');
bench_price();

my @ports = map { LLMGW::Nginx::free_port() } 1 .. 3;
my $server = nginx_server(keepalive => 64, request_id => 1,
                          plain => '/plain/v1/chat/completions',
                          gateway => 1, backends => \@ports);

# log_level warn: Debian's nginx is built --with-debug, and a debug log
# would be what is measured
my $ng = nginx(workers => $o{workers}, log_level => 'warn',
               http => <<"EOF")->run();
    %%GATEWAY%%
    llm_gateway_tier  bench  tpm=100000000  burst=150000000  max_tokens=4096;

$server
EOF

my ($json) = json_file('ttfb');
my ($cpus, $nginx_v) = (cpus(), nginx_version());
printf("ttfb: nginx %s with %d worker(s) on :%d, mockllm on :%d, %d CPUs\n",
       $nginx_v // '?', $o{workers}, $ng->port(), $s->{LLMGW_MOCK_PORT},
       $cpus // 0);

my @cmd = ($client, '-n', $o{n}, '-w', $o{warmup}, '-g', $o{gap},
           '-c', $o{streams}, '-s', $o{secs}, '-r', $o{rounds}, '-o', $json,
           "direct=http://127.0.0.1:$s->{LLMGW_MOCK_PORT}/v1/chat/completions",
           "direct_messages:mock-claude-bench=http://127.0.0.1:"
           . "$s->{LLMGW_MOCK_PORT}/v1/messages",
           'proxy_pass=' . $ng->url('/plain/v1/chat/completions'),
           'gateway=' . $ng->url('/v1/chat/completions'),
           "native=http://127.0.0.1:$ports[0]/v1/chat/completions",
           "native_messages=http://127.0.0.1:$ports[2]/v1/messages",
           "translated=http://127.0.0.1:$ports[1]/v1/chat/completions");

# the key in the environment, not on a command line
local $ENV{LLMGW_KEY} = $t->{key};
system(@cmd);
my $rc = $? == 0 ? 0 : ($? >> 8 || 1);

if ($rc == 0) {
    ledger($json);
    targets($json);
}

nginx_stop($ng, 'warn');

exit $rc;

# Every request the gateway answered is one llm.usage row, written by
# accountd: accounting was really on.  Not a pass or fail of the bench.
sub ledger {
    my ($file) = @_;
    my $r = read_json($file);

    my $want = 0;
    for my $series (values %{ $r->{series} }) {
        $want += $series->{targets}{$_}{requests}
            for qw(gateway native native_messages translated);
    }

    my $rows = ledger_rows($t->{id}, $want, 10, 0.1);
    printf("ledger: %d llm.usage rows for the %d gateway requests%s\n",
           $rows, $want, $rows == $want ? '' : ' (WARNING: not equal)');
}

# The issue's targets in each series, printed and added to the file (with
# the commit measured): the gateway adds at most 10 µs to the first
# event's p50 over proxy_pass, on a new connection and kept alive, and a
# translating backend at most 10 µs over a native one.
sub targets {
    my ($file) = @_;
    my $r = read_json($file);
    my @t;

    for my $name (qw(fresh keepalive concurrent)) {
        my $p50 = $r->{series}{$name}{targets} or next;
        my %p = map { $_ => $p50->{$_}{first_event}{p50} } keys %$p50;
        my $added = $p{gateway} - $p{proxy_pass};
        my $diff = $p{translated} - $p{native};

        push(@t, [ "first event p50, gateway - proxy_pass, $name (µs)",
                   $name eq 'concurrent' ? '' : '<= 10', $added,
                   $name eq 'concurrent' ? undef : $added <= 10 ],
                 [ "first event p50, translated - native, $name (µs)",
                   '<= 10', $diff, $diff <= 10 ]);
    }

    print_targets('%-54s %8s %9.3f', @t);
    $r->{targets} = targets_json(@t);
    write_json($file, $r);
}
