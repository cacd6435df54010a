#!/usr/bin/perl

# Where nginx's worker spends its time: bench-load's request (JSON and SSE,
# 32 connections of wrk) through plain proxy_pass and through the gateway,
# each BENCH_SECS (10) under `perf record` of the worker alone (call
# graphs), then the top of each profile by symbol, self time, and the
# module's share (the symbols of ngx_http_llm_gateway_module.so).  The
# profiles stay in build/bench/profile-<time>/ for `perf report -i`.  Run
# by `make bench-profile` through bench/with-stack; never a pass or fail
# on a figure.  BENCH_MODES ("json sse"), BENCH_CONNS (32), BENCH_TOP (25),
# BENCH_CALL_GRAPH (fp; dwarf to see callers through libc).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../t/lib", "$FindBin::Bin/lib";

use Bench;
use File::Path qw(make_path);
use LLMGW;

my $s = bench_stack();

my %o = (
    secs  => $ENV{BENCH_SECS}  // 10,
    conns => $ENV{BENCH_CONNS} // 32,
    modes => [ split(' ', $ENV{BENCH_MODES} // 'json sse') ],
    top   => $ENV{BENCH_TOP}   // 25,
    # dwarf: callers through libraries built without frame pointers
    graph => $ENV{BENCH_CALL_GRAPH} // 'fp',
);

`perf --version 2>&1` =~ /perf version/ or die "perf is not installed\n";

my $t = new_tenant(tier => 'bench');
my $ng = load_nginx(1, '64m');

my %url = (proxy_pass => $ng->url('/plain/v1/chat/completions'),
           gateway    => $ng->url('/v1/chat/completions'));
my ($worker) = children(pidfile($ng->dir() . '/nginx.pid'));
my (undef, $stamp) = json_file('profile');
my $dir = "$s->{LLMGW_BUILD}/bench/profile-$stamp";
make_path($dir);

local $ENV{LLMGW_KEY} = $t->{key};

for my $mode (@{ $o{modes} }) {
    local $ENV{BENCH_MODE} = $mode;

    for my $target (qw(proxy_pass gateway)) {
        my $data = "$dir/$mode-$target.data";
        # warm the upstream pool and the caches first
        `wrk -t1 -c$o{conns} -d1s -s $FindBin::Bin/load.lua $url{$target}`;

        my $perf = open(my $ph, '-|', 'perf', 'record', '-q',
                        '--call-graph', $o{graph}, '-p',
                        $worker, '-o', $data, '--', 'sleep',
                        $o{secs} + 1) or die "perf: $!";
        my $out = `wrk -t1 -c$o{conns} -d$o{secs}s --timeout 10s -s $FindBin::Bin/load.lua $url{$target} 2>&1`;
        close($ph);
        drained($ng, 0.01) if $target eq 'gateway';

        my ($req) = $out =~ /"requests":(\d+)/;
        printf("\n%s %s: %d requests in %d s; top of %s\n", $mode, $target,
               $req // 0, $o{secs}, $data);
        report($data);
    }
}

nginx_stop($ng, 'error');


# The top symbols by self time, then the module's share of the samples.
sub report {
    my ($data) = @_;
    my @lines = `perf report -i $data --no-children --sort dso,sym --stdio -g none --percent-limit 0.5 2>/dev/null`;
    my ($n, $module) = (0, 0);

    for (@lines) {
        next unless /^\s+([\d.]+)%\s+(\S+)\s+\[.\]\s+(.+?)\s*$/
                 || /^\s+([\d.]+)%\s+(\S+)\s+\[k\]\s+(.+?)\s*$/;
        my ($pct, $dso, $sym) = ($1, $2, $3);
        printf("  %6.2f%%  %-32s %s\n", $pct, substr($sym, 0, 32), $dso)
            if $n++ < $o{top};
    }

    for (`perf report -i $data --no-children --sort dso --stdio -g none 2>/dev/null`) {
        $module += $1 if /^\s+([\d.]+)%\s+ngx_http_llm_gateway_module/;
    }
    printf("  the module's own code: %.1f%% of the worker\n", $module);
}
