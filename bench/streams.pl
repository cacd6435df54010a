#!/usr/bin/perl

# Long-lived streams, the load an LLM gateway really carries: BENCH_STREAMS
# (2,000) concurrent SSE streams, paced by mockllm at 20 tokens a second
# for 30 s, sent by build/bench/streams to (a) mockllm directly, (b) plain
# nginx proxy_pass and (c) the gateway with accounting on, one after the
# other.  Run by `make bench-streams` through bench/with-stack, which gives
# it a stack as `make test` has.
#
# (b) and (c) are two nginx instances (Debian's, the module loaded, one
# worker each, worker_connections for two connections a stream), so that
# each one's memory is measured from its own idle baseline.  Both have
# multi_accept on: without it a worker accepts one connection per pass of
# its event loop, and once 2,000 streams keep it busy a pass takes
# milliseconds, so that the ramp of 1,000 new streams a second took 15 to
# 20 s through the gateway and the streams were never all open at once.
#
#   memory an open stream   Pss of master and workers (smaps_rollup) with
#                           all streams open, less the same just before
#                           the run (after a few warm-up streams), over
#                           the open streams; sampled every second while
#                           they are, the last sample counts (the most a
#                           stream has cost in its life)
#   CPU an event            utime + stime of nginx's workers over the run,
#                           over the events the client received; also
#                           accountd, PostgreSQL (the whole cluster) and
#                           mockllm.  A gateway run ends when accountd has
#                           acknowledged every record: their CPU counts
#   gap stretch             a percentile of the gaps between tokens as
#                           the client saw them, through the gateway, less
#                           the same directly from mockllm
#
# Every gap includes the time the client, mockllm and nginx were runnable
# but had no CPU: each run prints how busy the machine was and how long
# each of them waited (/proc/PID/schedstat), which says whether a stretch
# is the gateway's or the machine's.
#
# Then the issue's targets, met or missed, and everything in
# build/bench/streams-<time>.json.  No figure is ever a failure: the run
# fails only if a stream does, or a gateway stream has no ledger row.
#
# Knobs (environment): BENCH_STREAMS (2000), BENCH_TOKENS a stream (600),
# BENCH_DELAY_MS between tokens (50), BENCH_RAMP_MS to open them all
# (2000), BENCH_TARGETS ("direct proxy_pass gateway"), BENCH_WORKERS nginx
# workers (1).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../t/lib", "$FindBin::Bin/lib";

use Bench;
use JSON::PP;
use LLMGW;
use Time::HiRes qw(sleep time);

my $s = bench_stack();
my $client = bench_client('streams');

my %o = (
    streams => $ENV{BENCH_STREAMS}  // 2000,
    tokens  => $ENV{BENCH_TOKENS}   // 600,
    delay   => $ENV{BENCH_DELAY_MS} // 50,
    ramp    => $ENV{BENCH_RAMP_MS}  // 2000,
    targets => [ split(' ', $ENV{BENCH_TARGETS}
                            // 'direct proxy_pass gateway') ],
    workers => $ENV{BENCH_WORKERS}  // 1,
);

my %target_of = (direct => 1, proxy_pass => 1, gateway => 1);
$target_of{$_} or die "unknown target \"$_\"\n" for @{ $o{targets} };

# two connections a stream in nginx, client and upstream, and some spare
my $conns = 2 * $o{streams} + 512;
my $max_tokens = $o{tokens} > 4096 ? $o{tokens} : 4096;

# nginx reads the key snapshot when it starts: the tenant comes first
my $t = new_tenant(tier => 'bench');

my %ng;
my %url = (
    direct => "http://127.0.0.1:$s->{LLMGW_MOCK_PORT}/v1/chat/completions",
);

# log_level warn: Debian's nginx is built --with-debug, and a debug log
# would be what is measured
if (grep { $_ eq 'proxy_pass' } @{ $o{targets} }) {
    $ng{proxy_pass} = start_nginx(nginx_server(
        keepalive => 64, backlog => 4096, plain => '/v1/chat/completions'));
    $url{proxy_pass} = $ng{proxy_pass}->url('/v1/chat/completions');
}

if (grep { $_ eq 'gateway' } @{ $o{targets} }) {
    my $server = nginx_server(keepalive => 64, backlog => 4096,
                              request_id => 1, gateway => 1, metrics => 1);
    # a request in flight takes a 1 KB slab chunk of the zone (make
    # bench-micro): 2,000 streams need more than the tests' 1m
    $ng{gateway} = start_nginx(<<"EOF");
    llm_gateway_zone      zone=llm:4m;
    llm_gateway_keys      $s->{LLMGW_KEY_SNAPSHOT}
                          secret=$s->{LLMGW_KEY_SECRET};
    llm_gateway_accountd  unix:$s->{LLMGW_ACCOUNTD_SOCKET};
    llm_gateway_tier  bench  tpm=1000000000  burst=1500000000
                      max_tokens=$max_tokens;

$server
EOF
    $url{gateway} = $ng{gateway}->url('/v1/chat/completions');
}

my $tck = clk_tck();
my ($cpus, $nginx_v) = (cpus(), nginx_version());

printf("streams: %d streams, %d tokens %d ms apart (%.0f s), ramp %d ms; "
       . "nginx %s, %d worker(s); %d CPUs, load %s\n", $o{streams},
       $o{tokens}, $o{delay}, $o{tokens} * $o{delay} / 1000, $o{ramp},
       $nginx_v // '?', $o{workers}, $cpus // 0, loadavg());

local $ENV{LLMGW_KEY} = $t->{key};

my (%r, $failed);

for my $target (@{ $o{targets} }) {
    $r{$target} = run($target);
}

# --- the tables ----------------------------------------------------------

print "\n";
printf("%-10s %6s %9s %8s %8s %8s %8s %8s  %s\n", 'target', 'done',
       'events', 'gap p50', 'p99', 'p99.9', 'max', 'mean', '(ms)');
for my $target (@{ $o{targets} }) {
    my $x = $r{$target} or next;
    my $g = $x->{client}{gap_us};
    printf("%-10s %6d %9d %8.2f %8.2f %8.2f %8.2f %8.2f\n", $target,
           $x->{client}{completed}, $x->{client}{events},
           map { $g->{$_} / 1000 } qw(p50 p99 p999 max mean));
}

print "\n";
printf("%-10s %9s %9s %9s %9s %9s %10s %10s\n", 'target', 'nginx',
       'accountd', 'postgres', 'mockllm', 'client', 'servers',
       '(µs/event)');
for my $target (@{ $o{targets} }) {
    my $x = $r{$target} or next;
    my $c = $x->{cpu_us_event};
    printf("%-10s %9.2f %9.2f %9.2f %9.2f %9.2f %10.2f\n", $target,
           map { $c->{$_} } qw(nginx accountd postgres mockllm client
                               servers));
}

for my $target (grep { $ng{$_} } @{ $o{targets} }) {
    my $m = $r{$target}{memory} or next;
    printf("\n%s: nginx memory (Pss of master and workers) %.1f MB idle; "
           . "with %d streams open %.1f MB at %.1f s, %.1f MB at %.1f s: "
           . "%.1f KB, then %.1f KB a stream (RSS %.1f KB, Private_Dirty "
           . "%.1f KB); %.1f MB after the run.  Kernel TCP buffers, all "
           . "sockets of the machine: %.1f KB a stream\n", $target,
           $m->{idle}{pss} / 1024, $m->{open}, $m->{first}{pss} / 1024,
           $m->{first}{t} / 1000, $m->{last}{pss} / 1024,
           $m->{last}{t} / 1000, $m->{first_kb_stream},
           $m->{kb_stream}{pss}, $m->{kb_stream}{rss},
           $m->{kb_stream}{private_dirty}, $m->{after}{pss} / 1024,
           $m->{kb_stream}{tcp});
}

my @targets_met;
my ($d, $g, $b) = map { $r{$_} } qw(direct gateway proxy_pass);

if ($d && $g) {
    my %st = stretch($g, $d);
    $r{stretch_ms}{gateway} = \%st;

    push(@targets_met,
         [ 'token gap stretch, gateway - direct, p99.9 (ms)', '<= 5',
           $st{p999}, $st{p999} <= 5 ]);
    push(@targets_met,
         map { [ "  (the same at $_, ms)", '', $st{$_}, undef ] }
         qw(p50 p99 max));
}

if ($d && $b) {
    my %st = stretch($b, $d);
    $r{stretch_ms}{proxy_pass} = \%st;

    push(@targets_met,
         [ '  (proxy_pass - direct, p99, ms)', '', $st{p99}, undef ]);

    push(@targets_met,
         [ '  (gateway - proxy_pass, p99, ms)', '',
           ($g->{client}{gap_us}{p99} - $b->{client}{gap_us}{p99}) / 1000,
           undef ]) if $g;
}

if ($g && $b) {
    my $e = ratio($g->{cpu_us_event}{nginx}, $b->{cpu_us_event}{nginx});
    push(@targets_met,
         [ 'nginx CPU an event, gateway / proxy_pass', '<= 1.05', $e,
           $e <= 1.05 ]);
}

if ($g && $g->{memory}) {
    my $kb = $g->{memory}{kb_stream}{pss};
    push(@targets_met,
         [ 'nginx memory an open stream, gateway (KB)', '<= 32', $kb,
           $kb <= 32 ]);
}

if ($b && $b->{memory}) {
    push(@targets_met,
         [ '  (proxy_pass, KB)', '', $b->{memory}{kb_stream}{pss}, undef ]);
}

if ($g) {
    push(@targets_met,
         [ 'nginx CPU an event, gateway (µs)', '', $g->{cpu_us_event}{nginx},
           undef ]);
}

if ($b) {
    push(@targets_met,
         [ '  (proxy_pass, µs)', '', $b->{cpu_us_event}{nginx}, undef ]);
}

print_targets('%-48s %6s %10.2f', @targets_met);

my ($json, $stamp) = json_file('streams');
write_json($json, {
    when => $stamp, nginx => $nginx_v, cpus => $cpus, options => \%o,
    results => \%r, targets => targets_json(@targets_met) });

nginx_stop($ng{$_}, 'warn', $_) for sort keys %ng;

exit($failed ? 1 : 0);


# An nginx with descriptors for every stream twice.  The harness writes
# worker_connections 1024: the file is edited before it starts.
sub start_nginx {
    my ($http) = @_;

    my $ng = nginx(workers => $o{workers}, log_level => 'warn',
                   http => $http);
    my $conf = $ng->dir() . '/nginx.conf';

    open(my $in, '<', $conf) or die "$conf: $!";
    my $text = do { local $/; <$in> };
    close($in);

    # multi_accept: see the top of this file
    my $events = "worker_connections  $conns;\n    multi_accept        on;";
    $text =~ s/worker_connections\s+\d+;/$events/
        or die "no worker_connections in $conf";
    $text =~ s/^(worker_processes .*)$/$1\nworker_rlimit_nofile  $conns;/m
        or die "no worker_processes in $conf";

    open(my $out, '>', $conf) or die "$conf: $!";
    print $out $text;
    close($out);

    return $ng->run();
}

# One run at one target: warm-up, the idle sample, the streams with a
# sample of nginx's memory every second while all are open, then the CPU.
sub run {
    my ($target) = @_;
    my $ng = $ng{$target};
    my $url = $url{$target};

    # what a worker allocates once (its accountd connection, the first
    # request's look-ups) is not a stream's
    system("$client -c 8 -k 4 -d 1 -r 0 -p 100000 $url >/dev/null") == 0
        or print "  $target: the warm-up failed\n";
    drained($ng, 0.05) if $target eq 'gateway';
    sleep(1);

    my $rows0 = $target eq 'gateway' ? ledger_rows($t->{id}, 0, 30, 0.1) : 0;
    my $idle = $ng ? memory($ng) : undef;
    my $cpu0 = cpu($ng);
    my $t0 = time();

    printf("\n%s: %s\n", $target, $url);

    my @cmd = ($client, '-c', $o{streams}, '-k', $o{tokens}, '-d', $o{delay},
               '-r', $o{ramp});
    open(my $fh, '-|', @cmd, $url) or die "$client: $!";

    my ($line, @samples);
    while (my $l = <$fh>) {
        if ($l =~ /^(?:progress (\d+) (\d+) (\d+)|all-open (\d+))/) {
            my ($ms, $open, $events) = defined $4 ? ($4, $o{streams}, undef)
                                                  : ($1, $2, $3);

            if ($ng && $open > 0) {
                my $m = memory($ng);
                $m->{t} = $ms;
                $m->{open} = $open;
                push(@samples, $m);
            }

            printf("  %3.0f s: %d streams open, %d events\n", $ms / 1000,
                   $open, $events) if defined $events && $ms % 5000 < 1000;
            next;
        }

        if ($l =~ /^STREAMS (\{.*\})$/) {
            $line = $1;
            next;
        }

        print "  $l";
    }

    close($fh);
    my $rc = $? >> 8;

    unless ($line) {
        print "  $target: the client failed (exit $rc)\n";
        $failed++;
        return undef;
    }

    my $c = decode_json($line);
    $failed++ if $c->{failed};

    # the records of the run are the run's
    my $rows;
    if ($target eq 'gateway') {
        drained($ng, 0.05);
        $rows = ledger_rows($t->{id}, $rows0 + $c->{completed}, 30, 0.1)
                - $rows0;
        printf("  ledger: %d llm.usage rows for %d streams completed "
               . "(and %d failed)%s\n", $rows, $c->{completed}, $c->{failed},
               $rows >= $c->{completed}
               && $rows <= $c->{completed} + $c->{failed}
               ? '' : ' (NOT AS EXPECTED)');
        $failed++ unless $rows >= $c->{completed};
    }

    my $cpu1 = cpu($ng);
    my $secs = time() - $t0;
    my (%us, %wait);
    for my $p (keys %{ $cpu1->{ticks} }) {
        $us{$p} = $c->{events}
                  ? ($cpu1->{ticks}{$p} - ($cpu0->{ticks}{$p} // 0)) / $tck
                    * 1e6 / $c->{events}
                  : 0;
        # waiting for a CPU, in % of the run's time
        $wait{$p} = ($cpu1->{wait_ns}{$p} - ($cpu0->{wait_ns}{$p} // 0))
                    / 1e9 / $secs * 100;
    }
    $wait{client} = $c->{client_wait_us} / 1e6 / $secs * 100;

    my ($m0, $m1) = ($cpu0->{machine}, $cpu1->{machine});
    my $dt = ($m1->{total} // 0) - ($m0->{total} // 0);
    my $machine = $dt > 0 ? {
        busy => 100 * (1 - ($m1->{idle} - $m0->{idle}) / $dt),
        steal => 100 * ($m1->{steal} - $m0->{steal}) / $dt,
    } : {};
    $us{client} = $c->{events} ? $c->{client_cpu_us} / $c->{events} : 0;
    $us{servers} = $us{nginx} + $us{accountd} + $us{postgres}
                   + $us{mockllm};

    printf("  machine %.0f %% busy (%.0f %% stolen); waiting for a CPU: "
           . "nginx %.0f %%, mockllm %.0f %%, client %.0f %% of the run's "
           . "%.0f s\n", $machine->{busy} // -1, $machine->{steal} // -1,
           $wait{nginx}, $wait{mockllm}, $wait{client}, $secs);

    my $r = { url => $url, client => $c, cpu_us_event => \%us,
              runqueue_wait_pct => \%wait, machine_pct => $machine,
              seconds => $secs, ledger_rows => $rows, load => loadavg() };

    # the samples with the most streams open (all, unless the ramp was
    # slower than the first streams), the first and the last of them
    my $peak = 0;
    $peak = $_->{open} > $peak ? $_->{open} : $peak for @samples;
    @samples = grep { $_->{open} == $peak } @samples;

    if ($ng && @samples && $idle) {
        my ($first, $last) = @samples[0, -1];
        my $n = $peak;
        my %kb;
        for my $k (qw(pss rss private_dirty tcp)) {
            $kb{$k} = ($last->{$k} - $idle->{$k}) / $n;
        }
        $r->{memory} = {
            idle => $idle, first => $first, last => $last, open => $n,
            after => memory($ng), kb_stream => \%kb,
            first_kb_stream => ($first->{pss} - $idle->{pss}) / $n,
            samples => [ map { [ $_->{t}, $_->{pss} ] } @samples ],
        };
        print "  $target: at most $peak streams open at once, of "
              . "$o{streams}\n" if $peak < $o{streams};
    }

    return $r;
}

# Pss, Rss and Private_Dirty of nginx's master and workers (KB), and the
# kernel's TCP buffers (KB, every socket of the machine).
sub memory {
    my ($ng) = @_;
    my $master = pidfile($ng->dir() . '/nginx.pid');
    my %m = (pss => 0, rss => 0, private_dirty => 0, tcp => 0);

    for my $pid (grep { $_ } $master, children($master)) {
        open(my $fh, '<', "/proc/$pid/smaps_rollup") or next;
        while (<$fh>) {
            $m{pss} += $1 if /^Pss:\s+(\d+) kB/;
            $m{rss} += $1 if /^Rss:\s+(\d+) kB/;
            $m{private_dirty} += $1 if /^Private_Dirty:\s+(\d+) kB/;
        }
        close($fh);
    }

    if (open(my $fh, '<', '/proc/net/sockstat')) {
        while (<$fh>) {
            $m{tcp} = $1 * 4 if /^TCP:.* mem (\d+)/;
        }
        close($fh);
    }

    return \%m;
}

# Clock ticks spent so far, and nanoseconds waited for a CPU, by the
# workers of the nginx under test, accountd, PostgreSQL (the whole
# cluster) and mockllm; and the machine's CPU time.
sub cpu {
    my ($ng) = @_;
    my %pids = stack_pids($ng);

    my (%ticks, %wait);
    for my $p (keys %pids) {
        $ticks{$p} = 0;
        $wait{$p} = 0;
        for my $pid (grep { $_ } @{ $pids{$p} }) {
            $ticks{$p} += ticks($pid);

            # ns runnable but not running, every thread (mockllm has two)
            for my $ss (glob("/proc/$pid/task/*/schedstat")) {
                open(my $sh, '<', $ss) or next;
                my @w = split(' ', <$sh> // '');
                close($sh);
                $wait{$p} += $w[1] // 0;
            }
        }
    }

    return { ticks => \%ticks, wait_ns => \%wait, machine => machine() };
}

# The whole machine's CPU time (ticks), from /proc/stat: busy, and stolen
# by the hypervisor
sub machine {
    open(my $fh, '<', '/proc/stat') or return {};
    my @v = split(' ', <$fh> // '');
    close($fh);
    shift(@v);
    my $total = 0;
    $total += $_ for @v[0 .. 7];
    return { total => $total, idle => $v[3] + $v[4], steal => $v[7] };
}

sub loadavg {
    open(my $fh, '<', '/proc/loadavg') or return '?';
    my @l = split(' ', <$fh> // '');
    close($fh);
    return join(' ', @l[0 .. 2]);
}

# The gaps between tokens through one target less those directly from
# mockllm, at a few percentiles (ms)
sub stretch {
    my ($x, $direct) = @_;
    return map { $_ => ($x->{client}{gap_us}{$_}
                        - $direct->{client}{gap_us}{$_}) / 1000 }
           qw(p50 p99 p999 max);
}
