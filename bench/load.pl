#!/usr/bin/perl

# Throughput: the same load, in one run, against (a) mockllm directly,
# (b) plain nginx proxy_pass to it and (c) the gateway with accounting on
# (accountd and PostgreSQL receive every record).  Run by `make bench-load`
# through bench/with-stack, which gives it a stack as `make test` has.
#
# One nginx (Debian's, the module loaded) serves (b) and (c) from two
# locations over one upstream keepalive pool.  For each mode (JSON, SSE)
# and number of connections (1, 32, 128), wrk runs BENCH_SECS against each
# target in turn, the order rotated, BENCH_ROUNDS times.  Printed per cell:
# requests/s, p50 and p99 latency, and CPU per request of nginx, accountd
# and PostgreSQL (from /proc, the processes' own time); then the ratios of
# (c) to (b) and the issue's targets, met or missed.  Everything also goes
# to build/bench/load-<time>.json.  No figure is ever a failure: the run
# fails only if a request does, or if a gateway request has no ledger row.
#
# Knobs (environment): BENCH_SECS per run (3), BENCH_ROUNDS (3),
# BENCH_CONNS ("1 32 128"), BENCH_MODES ("json sse"), BENCH_WORKERS nginx
# workers (1: the other CPU runs wrk, mockllm, accountd and PostgreSQL),
# BENCH_JOURNAL the llm_gateway_accountd buffer (64m).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../t/lib", "$FindBin::Bin/lib";

use Bench;
use LLMGW;

my $s = bench_stack();

my %o = (
    secs    => $ENV{BENCH_SECS}    // 3,
    rounds  => $ENV{BENCH_ROUNDS}  // 3,
    conns   => [ split(' ', $ENV{BENCH_CONNS} // '1 32 128') ],
    modes   => [ split(' ', $ENV{BENCH_MODES} // 'json sse') ],
    workers => $ENV{BENCH_WORKERS} // 1,
    journal => $ENV{BENCH_JOURNAL} // '64m',
);

my @targets = qw(direct proxy_pass gateway);

# a tier that never runs short, a price so that caps could apply
my $t = new_tenant(tier => 'bench');

my $ng = load_nginx($o{workers}, $o{journal});

my %url = (
    direct     => "http://127.0.0.1:$s->{LLMGW_MOCK_PORT}/v1/chat/completions",
    proxy_pass => $ng->url('/plain/v1/chat/completions'),
    gateway    => $ng->url('/v1/chat/completions'),
);

my ($cpus, $nginx_v) = (cpus(), nginx_version());

printf("load: nginx %s, %d worker(s); wrk %s s a run, %d rounds; %d CPUs\n",
       $nginx_v // '?', $o{workers}, $o{secs}, $o{rounds}, $cpus // 0);

local $ENV{LLMGW_KEY} = $t->{key};

# --- the runs ----------------------------------------------------------------

my (%runs, %gateway_cut, $failed);
my $gateway_requests = 0;
my $n = 0;

for my $round (1 .. $o{rounds}) {
    for my $mode (@{ $o{modes} }) {
        for my $c (@{ $o{conns} }) {
            # a different target first each round and cell
            my @order = @targets;
            push(@order, shift(@order)) for 1 .. ($n++ % @targets);

            for my $target (@order) {
                my $r = run_wrk($mode, $c, $target) or next;
                push(@{ $runs{$mode}{$c}{$target} }, $r);
            }
        }
    }
    printf("  round %d of %d done\n", $round, $o{rounds});
}

# --- the table ---------------------------------------------------------------

my %cell;

print "\n";
printf("%-4s %4s  %-10s %9s %8s %8s %9s %9s %9s %9s %9s\n", 'mode',
       'conn', 'target', 'req/s', 'p50 ms', 'p99 ms', 'nginx µs',
       'acctd µs', 'pg µs', '(backend)', 'all µs');

for my $mode (@{ $o{modes} }) {
    for my $c (@{ $o{conns} }) {
        for my $target (@targets) {
            my $m = merge($runs{$mode}{$c}{$target} // []);
            $cell{$mode}{$c}{$target} = $m;
            printf("%-4s %4d  %-10s %9.0f %8.3f %8.3f %9.1f %9.1f %9.1f "
                   . "%9.1f %9.1f\n", $mode, $c, $target, $m->{rps},
                   $m->{p50_us} / 1000, $m->{p99_us} / 1000,
                   $m->{cpu_us}{nginx}, $m->{cpu_us}{accountd},
                   $m->{cpu_us}{postgres}, $m->{cpu_us}{pg_accountd},
                   $m->{cpu_us}{all});
        }
    }
}

print "\ngateway / proxy_pass:\n";
printf("%-4s %4s  %8s %10s %14s %10s %12s\n", 'mode', 'conn', 'req/s',
       'CPU all', 'added p99 ms', 'spread', 'rows/commit');

for my $mode (@{ $o{modes} }) {
    for my $c (@{ $o{conns} }) {
        my ($b, $g) = @{ $cell{$mode}{$c} }{qw(proxy_pass gateway)};
        my $ratio = {
            rps     => ratio($g->{rps}, $b->{rps}),
            cpu     => ratio($g->{cpu_us}{all}, $b->{cpu_us}{all}),
            p99_add => ($g->{p99_us} - $b->{p99_us}) / 1000,
        };
        $cell{$mode}{$c}{ratio} = $ratio;
        printf("%-4s %4d  %8.3f %10.2f %14.3f %9.0f%% %12.1f\n", $mode, $c,
               $ratio->{rps}, $ratio->{cpu}, $ratio->{p99_add},
               100 * ($b->{spread} > $g->{spread} ? $b->{spread}
                                                  : $g->{spread}),
               $g->{per_commit});
    }
}

# the targets, at 32 connections: requests/s, nginx's CPU a request and
# the whole stack's against proxy_pass's, and what the ledger (accountd and
# PostgreSQL) costs a request
my @targets_met;

for my $m ([ 'JSON', 'json', 0.70, 1.25, 1.8 ], [ 'SSE', 'sse', 0.65, 1.40, 2.0 ]) {
    my ($name, $mode, $rps, $ngx, $all) = @$m;
    my $r = $cell{$mode}{32}{ratio} or next;
    my ($b, $g) = @{ $cell{$mode}{32} }{qw(proxy_pass gateway)};
    my $nginx = ratio($g->{cpu_us}{nginx}, $b->{cpu_us}{nginx});
    my $ledger = $g->{cpu_us}{accountd} + $g->{cpu_us}{postgres};

    push(@targets_met,
         [ "$name req/s, gateway / proxy_pass at 32", ">= $rps", $r->{rps},
           $r->{rps} >= $rps ],
         [ "$name nginx CPU a request, gateway / proxy_pass at 32",
           "<= $ngx", $nginx, $nginx <= $ngx ],
         [ "$name all-in CPU a request, gateway / proxy_pass at 32",
           "<= $all", $r->{cpu}, $r->{cpu} <= $all ],
         [ "$name accountd + PostgreSQL CPU a request at 32 (µs)", '<= 6',
           $ledger, $ledger <= 6 ],
         [ "  ($name added p99 at 32, ms)", '', $r->{p99_add}, undef ]);
}

print_targets('%-55s %8s %9.3f', @targets_met);

# --- the ledger: accounting was really on ------------------------------------

my $cut = 0;
$cut += $_ for map { @$_ } values %gateway_cut;
my ($rows, $ledger_ok) = ledger_check($t->{id}, $gateway_requests, $cut);
$failed++ unless $ledger_ok;

my ($json, $stamp) = json_file('load');
write_json($json, {
    when => $stamp, nginx => $nginx_v, cpus => $cpus, options => \%o,
    cells => \%cell, runs => \%runs, targets => targets_json(@targets_met),
    ledger => { rows => $rows, gateway_requests => $gateway_requests } });

nginx_stop($ng, 'error');

exit($failed ? 1 : 0);


# One wrk run, and the CPU the stack's processes spent meanwhile.
sub run_wrk {
    my ($mode, $c, $target) = @_;

    my $commits = commits();
    my $before = cpu();
    my ($r, $out) = wrk_load($url{$target}, $c, $o{secs}, BENCH_MODE => $mode);

    # the gateway's records are committed after: their CPU is its too
    if ($r && $target eq 'gateway') {
        $gateway_requests += $r->{requests};
        push(@{ $gateway_cut{$mode} }, $c);
        drained($ng, 0.01);
    }

    my $after = cpu();
    $commits = commits() - $commits;

    unless ($r) {
        print "wrk failed ($mode, $c, $target):\n$out";
        $failed++;
        return undef;
    }

    if ($r->{errors} || !$r->{requests}) {
        printf("  %s %d %s: %d errors in %d requests\n", $mode, $c, $target,
               $r->{errors}, $r->{requests});
        $failed++;
    }

    for my $p (keys %$after) {
        $r->{cpu_ticks}{$p} = $after->{$p} - ($before->{$p} // 0);
    }

    $r->{commits} = $commits;

    return $r;
}

# Transactions committed in the database so far (PostgreSQL's statistics,
# flushed about once a second: a rough count).
sub commits {
    db()->do('SELECT pg_stat_clear_snapshot()');
    return db()->selectrow_array(
        'SELECT xact_commit FROM pg_stat_database'
        . ' WHERE datname = current_database()');
}

# Clock ticks spent so far by nginx's workers, accountd, PostgreSQL (the
# whole cluster, and accountd's backend apart) and mockllm.
sub cpu {
    my %pids = stack_pids($ng);
    $pids{pg_accountd} = [ accountd_backend() // 0 ];
    return proc_ticks(\%pids);
}

# The runs of a cell together (Bench.pm's merge_runs): all-in is nginx,
# accountd and PostgreSQL.
sub merge {
    return merge_runs($_[0], [qw(nginx accountd postgres pg_accountd mockllm)],
                      [qw(nginx accountd postgres)]);
}
