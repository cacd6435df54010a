#!/usr/bin/perl

# The gateway against a peer: the same load as bench-load's (wrk with
# bench/load.lua, its request byte for byte), in one run, through (a) the
# gateway with accounting on, (b) plain nginx proxy_pass and (c) the
# Portkey gateway (Node.js, the version bench/peers/package.json pins,
# installed in build/peers by `make bench-peers`), each to the stack's
# mockllm.  Run by `make bench-peers` through bench/with-stack.
#
# One nginx serves (a) and (b), as bench-load's does; Portkey is one node
# process, started here on 127.0.0.1 (bench/peers/loopback.mjs) and
# stopped whatever happens.  It is told its upstream by three more headers
# on the same request, as its documentation says of a self-hosted model:
# x-portkey-provider openai, x-portkey-custom-host the mock's /v1, and
# x-portkey-forward-headers x-mock-tokens, so that the mock answers it the
# same 16 tokens.  Before and after each of its runs a request straight to
# the mock reads the mock's request counter: every request Portkey
# answered has reached the mock.
#
# For each mode (JSON, SSE) and number of connections (32), wrk runs
# BENCH_SECS against each target in turn, the order rotated, BENCH_ROUNDS
# times.  Printed per cell: requests/s, p50 and p99 latency, CPU a request
# (from /proc: nginx's worker; for the gateway also accountd and
# PostgreSQL; for Portkey its node process); then gateway / Portkey and
# the target, met or missed.  Everything also goes to
# build/bench/peers-<time>.json.  No figure is ever a failure: the run
# fails if a request does, if Portkey's requests did not all reach the
# mock, or if a gateway request has no ledger row.
#
# Knobs (environment): BENCH_SECS per run (3), BENCH_ROUNDS (3),
# BENCH_CONNS ("32"), BENCH_MODES ("json sse"), BENCH_WORKERS nginx
# workers (1, as Portkey is one process), BENCH_JOURNAL the
# llm_gateway_accountd buffer (64m).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../t/lib", "$FindBin::Bin/lib";

use Bench;
use HTTP::Tiny;
use JSON::PP;
use LLMGW;
use POSIX qw(WNOHANG);
use Time::HiRes qw(sleep time);

my $s = bench_stack();

my %o = (
    secs    => $ENV{BENCH_SECS}    // 3,
    rounds  => $ENV{BENCH_ROUNDS}  // 3,
    conns   => [ split(' ', $ENV{BENCH_CONNS} // '32') ],
    modes   => [ split(' ', $ENV{BENCH_MODES} // 'json sse') ],
    workers => $ENV{BENCH_WORKERS} // 1,
    journal => $ENV{BENCH_JOURNAL} // '64m',
);

my @targets = qw(gateway proxy_pass portkey);

# what each target's CPU a request is: its own processes'
my %all = (gateway    => [qw(nginx accountd postgres)],
           proxy_pass => [qw(nginx)],
           portkey    => [qw(node)]);

my $t = new_tenant(tier => 'bench');
my $ng = load_nginx($o{workers}, $o{journal});
my $mock = "http://127.0.0.1:$s->{LLMGW_MOCK_PORT}";

# Portkey's process, stopped on every way out (a signal is a die)
my $portkey;
END {
    # the exit status stays the script's, not the reaped node's
    local $?;
    portkey_stop();
}

$portkey = portkey_start();

my %url = (
    gateway    => $ng->url('/v1/chat/completions'),
    proxy_pass => $ng->url('/plain/v1/chat/completions'),
    portkey    => "http://127.0.0.1:$portkey->{port}/v1/chat/completions",
);

my %headers = (
    portkey => "x-portkey-provider: openai\n"
               . "x-portkey-custom-host: $mock/v1\n"
               . "x-portkey-forward-headers: x-mock-tokens\n",
);

my ($cpus, $nginx_v, $node_v) = (cpus(), nginx_version(), node_version());

printf("peers: nginx %s, %d worker(s); Portkey %s on node %s; wrk %s s a "
       . "run, %d rounds; %d CPUs\n", $nginx_v // '?', $o{workers},
       $portkey->{version}, $node_v, $o{secs}, $o{rounds}, $cpus // 0);

local $ENV{LLMGW_KEY} = $t->{key};

my $failed = 0;
$failed += !same_answers();

# --- the runs ----------------------------------------------------------------

my (%runs, %cut, %reached);
my %completed = (gateway => 0, portkey => 0);
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

my %cell = cells();
my @targets_met = targets_met();

print_targets('%-52s %8s %10.2f', @targets_met);

# --- Portkey reached the mock; the gateway's ledger --------------------------

$reached{portkey} //= 0;
$cut{portkey} //= 0;
my $reached_ok = $reached{portkey} >= $completed{portkey}
                 && $reached{portkey} <= $completed{portkey} + $cut{portkey};
printf("\nmockllm: %d requests from Portkey for %d it answered wrk and at "
       . "most %d wrk cut%s\n", $reached{portkey}, $completed{portkey},
       $cut{portkey}, $reached_ok ? '' : ' (NOT AS EXPECTED)');
$failed++ unless $reached_ok;

my ($rows, $ledger_ok) = ledger_check($t->{id}, $completed{gateway},
                                      $cut{gateway} // 0);
$failed++ unless $ledger_ok;

my ($json, $stamp) = json_file('peers');
write_json($json, {
    when => $stamp, nginx => $nginx_v, node => $node_v,
    portkey => $portkey->{version}, cpus => $cpus, options => \%o,
    portkey_headers => $headers{portkey}, cells => \%cell, runs => \%runs,
    targets => targets_json(@targets_met),
    mockllm => { portkey_requests => $reached{portkey},
                 portkey_completed => $completed{portkey} },
    ledger => { rows => $rows, gateway_requests => $completed{gateway} } });

nginx_stop($ng, 'error');

exit($failed ? 1 : 0);


# Portkey as `npx @portkey-ai/gateway` runs it, headless, NODE_ENV
# production, on a port of the stack's, once it answers: { pid, port,
# version }.  Its output goes to portkey.log in the stack's directory, its
# pid to bench-portkey.pid there, for bench/with-stack to stop it if this
# script could not.
sub portkey_start {
    my $gw = build_dir() . '/peers/node_modules/@portkey-ai/gateway';
    my $version = eval { package_version("$gw/package.json") }
        or die "Portkey is not installed in $gw: run make bench-peers\n";
    my $port = LLMGW::Nginx::free_port();
    my $log = "$s->{LLMGW_DIR}/portkey.log";

    my $pid = fork() // die "fork: $!\n";
    if ($pid == 0) {
        open(STDIN, '<', '/dev/null');
        open(STDOUT, '>', $log) or POSIX::_exit(127);
        open(STDERR, '>&', \*STDOUT);
        $ENV{NODE_ENV} = 'production';
        exec('node', '--import', "$FindBin::Bin/peers/loopback.mjs",
             "$gw/build/start-server.js", "--port=$port", '--headless')
            or POSIX::_exit(127);
    }

    $portkey = { pid => $pid, port => $port, version => $version };
    open(my $fh, '>', "$s->{LLMGW_DIR}/bench-portkey.pid") or die "$!\n";
    print $fh "$pid\n";
    close($fh);

    portkey_wait($pid, $port, $log);
    return $portkey;
}

# Until Portkey answers GET / (30 s at most), then that it listens on
# 127.0.0.1 and nowhere else
sub portkey_wait {
    my ($pid, $port, $log) = @_;
    my $http = HTTP::Tiny->new(timeout => 2);
    my $deadline = time() + 30;

    until (($http->get("http://127.0.0.1:$port/")->{status} // 0) == 200) {
        my $gone = waitpid($pid, WNOHANG) == $pid;
        if ($gone || time() > $deadline) {
            undef $portkey->{pid} if $gone;
            die "Portkey did not start; $log:\n" . `tail -n 20 '$log'`;
        }
        sleep(0.1);
    }

    my @l = listening($port);
    die "Portkey listens on @l, not only on 127.0.0.1\n"
        unless @l && !grep { $_ ne '0100007F' } @l;
}

# the local addresses (as /proc/net writes them) listening on a TCP port
sub listening {
    my ($port) = @_;
    my $hex = sprintf('%04X', $port);
    my @addr;
    for my $f ('/proc/net/tcp', '/proc/net/tcp6') {
        open(my $fh, '<', $f) or next;
        while (<$fh>) {
            push(@addr, $1) if /^\s*\d+: ([0-9A-F]+):$hex [0-9A-F]+:0000 0A /;
        }
        close($fh);
    }
    return @addr;
}

sub portkey_stop {
    my $pid = $portkey && $portkey->{pid} or return;
    undef $portkey->{pid};

    kill('TERM', $pid);
    for (1 .. 50) {
        last if waitpid($pid, WNOHANG) == $pid;
        sleep(0.1);
    }
    if (kill(0, $pid)) {
        kill('KILL', $pid);
        waitpid($pid, 0);
    }
    unlink("$s->{LLMGW_DIR}/bench-portkey.pid");
}

sub package_version {
    my ($file) = @_;
    open(my $fh, '<', $file) or die "$file: $!\n";
    my $p = decode_json(do { local $/; <$fh> });
    close($fh);
    return $p->{version};
}

sub node_version {
    my ($v) = `node --version 2>/dev/null` =~ /v?(\S+)/;
    return $v // '?';
}

# The request of bench/load.lua, once, with the target's headers: the
# tokens of its answer (the deltas of a stream), or a message.
sub answer {
    my ($target, $mode) = @_;
    my %h = ('Content-Type' => 'application/json',
             'Authorization' => "Bearer $t->{key}", 'x-mock-tokens' => 16,
             map { /^([^:]+):\s*(.*)$/ } split(/\n/, $headers{$target} // ''));
    my $body = '{"model":"mock-bench","max_tokens":64,'
               . ($mode eq 'sse' ? '"stream":true,' : '')
               . '"messages":[{"role":"user","content":"Say hello to the '
               . 'gateway."}]}';

    my $r = HTTP::Tiny->new(timeout => 10)->post($url{$target},
                                                 { headers => \%h,
                                                   content => $body });
    return "status $r->{status}" unless $r->{status} == 200;
    return scalar(() = $r->{content} =~ /"content":"tok\d+ "/g)
        if $mode eq 'sse';
    my ($k) = $r->{content} =~ /"completion_tokens":(\d+)/;
    return $k // 'no usage';
}

# Each target answers the request the same, 16 tokens, before the runs
sub same_answers {
    my $ok = 1;
    for my $mode (@{ $o{modes} }) {
        my %a = map { $_ => answer($_, $mode) } @targets;
        printf("  %s answer, tokens: %s\n", $mode,
               join(', ', map { "$_ $a{$_}" } @targets));
        $ok &&= !grep { $a{$_} ne '16' } @targets;
    }
    return $ok;
}

# mockllm's count of the LLM requests it has had: the id of one more, sent
# to it directly
sub mock_count {
    my $r = HTTP::Tiny->new(timeout => 5)->post(
        "$mock/v1/chat/completions",
        { headers => { 'Content-Type' => 'application/json' },
          content => '{"model":"mock-bench","max_tokens":1,'
                     . '"messages":[{"role":"user","content":"count"}]}' });
    return $r->{headers}{'x-mock-request-id'}
        // die "mockllm did not answer the count: $r->{status}\n";
}

# One wrk run, the CPU the processes spent meanwhile, and for Portkey the
# requests that reached the mock.
sub run_wrk {
    my ($mode, $c, $target) = @_;

    my $count = $target eq 'portkey' ? mock_count() : 0;
    my $before = cpu();
    my ($r, $out) = wrk_load($url{$target}, $c, $o{secs}, BENCH_MODE => $mode,
                             BENCH_HEADERS => $headers{$target} // '');

    # the gateway's records are committed after: their CPU is its too
    drained($ng, 0.01) if $r && $target eq 'gateway';
    my $after = cpu();

    unless ($r) {
        print "wrk failed ($mode, $c, $target):\n$out";
        $failed++;
        return undef;
    }

    $completed{$target} += $r->{requests};
    $cut{$target} += $c;
    $reached{$target} += mock_count() - $count - 1 if $count;

    if ($r->{errors} || !$r->{requests}) {
        printf("  %s %d %s: %d errors in %d requests\n", $mode, $c, $target,
               $r->{errors}, $r->{requests});
        $failed++;
    }

    $r->{cpu_ticks}{$_} = $after->{$_} - $before->{$_} for keys %$after;
    return $r;
}

# Clock ticks spent so far by nginx's workers, accountd, PostgreSQL (the
# whole cluster) and Portkey's node (and any process it started)
sub cpu {
    my %pids = stack_pids($ng);
    my $pid = $portkey->{pid};
    $pids{node} = [ $pid, children($pid) ];
    return proc_ticks(\%pids);
}

# The table of the runs, and their cells merged: { mode => { conns =>
# { target => merged, ratio => gateway / Portkey } } }
sub cells {
    my %cells;

    print "\n";
    printf("%-4s %4s  %-10s %9s %8s %8s %9s %9s %9s %9s %9s\n", 'mode',
           'conn', 'target', 'req/s', 'p50 ms', 'p99 ms', 'nginx µs',
           'acctd µs', 'pg µs', 'node µs', 'all µs');

    for my $mode (@{ $o{modes} }) {
        for my $c (@{ $o{conns} }) {
            for my $target (@targets) {
                my $m = merge_runs($runs{$mode}{$c}{$target} // [],
                                   [qw(nginx accountd postgres node)],
                                   $all{$target});
                $cells{$mode}{$c}{$target} = $m;
                printf("%-4s %4d  %-10s %9.0f %8.3f %8.3f %9.1f %9.1f "
                       . "%9.1f %9.1f %9.1f\n", $mode, $c, $target,
                       $m->{rps}, $m->{p50_us} / 1000, $m->{p99_us} / 1000,
                       @{ $m->{cpu_us} }{qw(nginx accountd postgres node
                                            all)});
            }
        }
    }

    return ratios(%cells);
}

# gateway / Portkey and proxy_pass / Portkey, printed, in each cell
sub ratios {
    my (%cell) = @_;

    print "\nagainst Portkey (its figure / ours for CPU and p99):\n";
    printf("%-4s %4s  %-10s %10s %16s %10s %10s\n", 'mode', 'conn', 'ours',
           'req/s', 'CPU a request', 'p99', 'spread');

    for my $mode (@{ $o{modes} }) {
        for my $c (@{ $o{conns} }) {
            my $p = $cell{$mode}{$c}{portkey};
            for my $us (qw(gateway proxy_pass)) {
                my $g = $cell{$mode}{$c}{$us};
                my $ratio = {
                    rps => ratio($g->{rps}, $p->{rps}),
                    cpu => ratio($p->{cpu_us}{all}, $g->{cpu_us}{all}),
                    p99 => ratio($p->{p99_us}, $g->{p99_us}),
                };
                $cell{$mode}{$c}{"$us/portkey"} = $ratio;
                printf("%-4s %4d  %-10s %10.1f %16.1f %10.1f %9.0f%%\n",
                       $mode, $c, $us, @$ratio{qw(rps cpu p99)},
                       100 * ($g->{spread} > $p->{spread} ? $g->{spread}
                                                          : $p->{spread}));
            }
        }
    }

    return %cell;
}

# The issue's target, at each number of connections: the gateway's
# requests/s at least 50 times Portkey's, JSON and SSE; and, shown, each
# one's requests/s and CPU a request
sub targets_met {
    my @t;
    for my $c (@{ $o{conns} }) {
        for my $mode (@{ $o{modes} }) {
            my $m = uc($mode);
            my $cell = $cell{$mode}{$c};
            my $r = $cell->{'gateway/portkey'};
            push(@t,
                 [ "$m req/s, gateway / Portkey at $c", '>= 50', $r->{rps},
                   $r->{rps} >= 50 ],
                 [ "$m req/s, gateway at $c", '', $cell->{gateway}{rps},
                   undef ],
                 [ "$m req/s, Portkey at $c", '', $cell->{portkey}{rps},
                   undef ],
                 [ "$m CPU a request, Portkey / gateway (all-in) at $c", '',
                   $r->{cpu}, undef ]);
        }
    }
    return @t;
}
