package Bench;

# What the benchmarks' drivers share (load.pl, peers.pl, streams.pl,
# ttfb.pl, ingest.pl, micro.pl): the start under bench/with-stack, the
# nginx server they compare, a wrk run of bench-load's request, the CPU
# time of the stack's processes from /proc, accountd's records into the
# ledger, and the end of a run: the issue's targets, the JSON file (with
# the commit it measured), what nginx logged.  Core Perl, on top of
# t/lib/LLMGW.pm.

use strict;
use warnings;

use Cwd qw(abs_path);
use Exporter qw(import);
use File::Basename qw(dirname);
use HTTP::Tiny;
use JSON::PP;
use LLMGW;
use POSIX qw(strftime);
use Time::HiRes qw(sleep time);

our @EXPORT = qw(bench_stack bench_client nginx_version cpus clk_tck
                 nginx_server nginx_stop pidfile children ticks stack_pids
                 bench_price load_nginx proc_ticks wrk_load merge_runs ratio
                 accountd_backend drained ledger_rows ledger_check
                 print_targets targets_json build_dir json_file read_json
                 write_json git_commit);

# the top of the checkout: bench/lib/..
my $top = dirname(dirname(dirname(abs_path(__FILE__))));

# The stack bench/with-stack started.  A signal becomes a die, so that
# nginx is still stopped (LLMGW::Nginx's DESTROY) on the way out.
sub bench_stack {
    $SIG{INT} = $SIG{TERM} = $SIG{HUP} = sub { die "interrupted\n" };
    return stack();
}

# build/bench/NAME, the C client of `make bench-NAME`
sub bench_client {
    my ($name) = @_;
    my $client = build_dir() . "/bench/$name";
    -x $client or die "$client is not built: run make bench-$name\n";
    return $client;
}

sub nginx_version {
    my ($v) = `nginx -v 2>&1` =~ m{nginx/(\S+)};
    return $v;
}

sub cpus {
    my ($n) = `nproc` =~ /(\d+)/;
    return $n;
}

# clock ticks a second, the unit of the times in /proc/PID/stat
sub clk_tck { return POSIX::sysconf(POSIX::_SC_CLK_TCK()) || 100 }

# The upstream "mock" (mockllm) and the server in front of it that the
# benchmarks compare, one location each: plain => the path of (b) plain
# nginx proxy_pass, gateway => (c) the gateway at /v1/chat/completions
# (and the body buffers it reads a request into), metrics => its
# /metrics.  keepalive => the upstream's idle connections, backlog =>
# listen's, request_id => X-Request-Id to the upstream.
sub nginx_server {
    my (%o) = @_;
    my @l;

    if (my $path = $o{plain}) {
        # elsewhere than the upstream's path, proxy_pass replaces it
        my $uri = $path eq '/v1/chat/completions' ? ''
                                                  : '/v1/chat/completions';
        push(@l, <<"EOF");
        # (b) plain nginx, unbuffered as the gateway makes SSE responses
        location = $path {
            proxy_buffering  off;
            proxy_pass       http://mock$uri;
        }
EOF
    }

    push(@l, <<'EOF') if $o{gateway};
        # (c) the gateway
        location = /v1/chat/completions {
            llm_gateway  zone=llm api=openai;
            proxy_pass   http://mock;
        }
EOF

    push(@l, <<'EOF') if $o{metrics};
        location = /metrics {
            llm_gateway_metrics;
        }
EOF

    my $locations = join("\n", @l);
    my $backlog = $o{backlog} ? " backlog=$o{backlog}" : '';
    my $body = !$o{gateway} ? '' : <<'EOF';
        client_max_body_size     1m;
        client_body_buffer_size  1m;

EOF
    my $request_id = !$o{request_id} ? '' : <<'EOF';
        proxy_set_header    X-Request-Id $request_id;
EOF

    # (d) through a backend of the client's API and (e) one of another,
    # translated: each the same location on a server of its own, which the
    # path the upstream gets is; the alias names a model of the mock's
    # Anthropic family.  A third port, if given: (f) a Messages location
    # to the Messages backend, the same untranslated.
    my ($backend, $servers) = ('', '');

    if (my $ports = $o{backends}) {
        $backend = <<'EOF';
    llm_gateway_backend  bench-chat      upstream=mock api=openai;
    llm_gateway_backend  bench-messages  upstream=mock api=anthropic;

EOF
        my $alias = "\n            llm_gateway_alias  mock-gpt-4o-mini"
                    . " mock-claude-bench;";
        my @servers = ([ $ports->[0], 'bench-chat', '', 'openai',
                         '/v1/chat/completions' ],
                       [ $ports->[1], 'bench-messages', $alias, 'openai',
                         '/v1/chat/completions' ]);
        push(@servers, [ $ports->[2], 'bench-messages', $alias, 'anthropic',
                         '/v1/messages' ])
            if defined $ports->[2];

        for my $b (@servers) {
            $servers .= <<"EOF";

    server {
        listen      127.0.0.1:$b->[0];
        access_log  off;

        client_max_body_size     1m;
        client_body_buffer_size  1m;

        proxy_http_version  1.1;
        proxy_set_header    Connection "";
$request_id
        location = $b->[4] {
            llm_gateway        zone=llm api=$b->[3] backend=$b->[1];$b->[2]
            proxy_pass         http://\$llm_upstream\$llm_upstream_uri;
        }
    }
EOF
        }
    }

    return <<"EOF";
${backend}    upstream mock {
        server     127.0.0.1:%%MOCK%%;
        keepalive  $o{keepalive};
    }

    server {
        listen      127.0.0.1:%%PORT%%$backlog;

        # the same for every location; a file write a request is noise
        access_log  off;

${body}        proxy_http_version  1.1;
        proxy_set_header    Connection "";
$request_id
$locations    }
$servers
EOF
}

# A price for the benches' own models, as a model in production has one:
# the tiers refuse a model without.  µ$ per million tokens, those the
# stack gives mock-gpt-4o-mini (mock-bench, the request of bench-load) and
# mock-claude-3-5-haiku (mock-claude-bench, bench-ttfb's alias).
sub bench_price {
    db()->do(q{INSERT INTO llm.prices (model, effective_from, input_per_mtok,
                                       output_per_mtok, cached_input_per_mtok)
               VALUES ('mock-bench', '2000-01-01', 150000, 600000, 75000),
                      ('mock-claude-bench', '2000-01-01', 800000, 4000000,
                       80000)
               ON CONFLICT DO NOTHING});
}

# The nginx of bench-load and bench-peers, running, with its workers: (b)
# plain proxy_pass at /plain/v1/chat/completions, (c) the gateway at
# /v1/chat/completions and its /metrics, a tier "bench" that never runs
# short, mock-bench priced.  A journal (buffer) that holds a whole run:
# wrk's rate may be above what PostgreSQL commits (see bench-ingest); with
# the default 4m the gateway would refuse with 503 once it is full, which
# measures PostgreSQL, not the gateway.  Each run's records are committed
# before the next (drained()), and their CPU counts for the run.
sub load_nginx {
    my ($workers, $journal) = @_;
    my $s = stack();
    bench_price();
    my $server = nginx_server(keepalive => 256, backlog => 4096,
                              plain => '/plain/v1/chat/completions',
                              gateway => 1, metrics => 1);

    return nginx(workers => $workers, log_level => 'warn',
                 http => <<"EOF")->run();
    llm_gateway_zone      zone=llm:1m;
    llm_gateway_keys      $s->{LLMGW_KEY_SNAPSHOT}
                          secret=$s->{LLMGW_KEY_SECRET};
    llm_gateway_accountd  unix:$s->{LLMGW_ACCOUNTD_SOCKET} buffer=$journal;

    llm_gateway_tier  bench  tpm=10000000000  max_tokens=4096;

$server
EOF
}

# Stops nginx, then prints the first lines it logged at the level lowest
# (warn, error) and above, if any: they are worth seeing.  who: a name for
# the nginx, when there are several.
sub nginx_stop {
    my ($ng, $lowest, $who) = @_;
    my @levels = qw(warn error crit alert emerg);
    shift(@levels) while @levels && $levels[0] ne $lowest;
    my $levels = join('|', @levels);

    $ng->stop();
    my @log = grep { /\[(?:$levels)\]/ } split(/\n/, $ng->error_log());
    return unless @log;

    printf("\n%snginx error.log (%d lines), the first:\n",
           defined $who ? "$who: " : '', scalar(@log));
    print "  $_\n" for @log[0 .. ($#log < 4 ? $#log : 4)];
}

sub pidfile {
    open(my $fh, '<', $_[0]) or return 0;
    my ($pid) = <$fh> =~ /(\d+)/;
    close($fh);
    return $pid // 0;
}

sub children {
    my ($ppid) = @_;
    return () unless $ppid;
    my @kids;
    for my $stat (glob('/proc/[0-9]*/stat')) {
        open(my $fh, '<', $stat) or next;
        my $line = <$fh> // '';
        close($fh);
        my @f = split(' ', substr($line, rindex($line, ')') + 2));
        push(@kids, $stat =~ m{/proc/(\d+)/}) if ($f[1] // 0) == $ppid;
    }
    return @kids;
}

# Clock ticks a process has spent so far (utime + stime), 0 when it is gone
sub ticks {
    my ($pid) = @_;
    return 0 unless $pid;
    open(my $fh, '<', "/proc/$pid/stat") or return 0;
    my $stat = <$fh> // '';
    close($fh);
    # gone between the look-up and the read
    return 0 unless $stat =~ /\)/;
    # the fields after the command, which may hold spaces
    my @f = split(' ', substr($stat, rindex($stat, ')') + 2));
    return $f[11] + $f[12];
}

# Clock ticks so far of each group of processes: { name => [ pids ] } in,
# { name => ticks } out.
sub proc_ticks {
    my ($pids) = @_;
    my %ticks;
    for my $p (keys %$pids) {
        $ticks{$p} = 0;
        $ticks{$p} += ticks($_) for @{ $pids->{$p} };
    }
    return \%ticks;
}

# The processes of the stack, by name: the workers of an nginx (none
# without one), accountd, mockllm, and PostgreSQL: the whole cluster (the
# backends, the WAL writer, autovacuum, the checkpointer...).
sub stack_pids {
    my ($ng) = @_;
    my $s = stack();
    my $pm = pidfile("$s->{LLMGW_DIR}/pg/postmaster.pid");

    return (
        nginx    => [ $ng ? children(pidfile($ng->dir() . '/nginx.pid'))
                          : () ],
        accountd => [ pidfile("$s->{LLMGW_DIR}/accountd.pid") ],
        mockllm  => [ pidfile("$s->{LLMGW_DIR}/mockllm.pid") ],
        postgres => [ $pm, children($pm) ],
    );
}

# One run of wrk, one thread, c connections for secs seconds, with
# bench/load.lua: the request of bench-load, the same to every target.
# env: load.lua's environment (BENCH_MODE json or sse, BENCH_HEADERS).
# Returns the figures load.lua wrote (requests, duration_us, errors,
# p50_us, p90_us, p99_us, mean_us), or undef, and what wrk printed.
sub wrk_load {
    my ($url, $c, $secs, %env) = @_;
    local @ENV{keys %env} = values %env;
    my $cmd = "wrk -t1 -c$c -d${secs}s --timeout 10s"
              . " -s $top/bench/load.lua $url 2>&1";
    my $out = `$cmd`;
    my ($line) = $out =~ /^BENCH (\{.*\})$/m;
    return ($line ? decode_json($line) : undef, $out);
}

# The runs of a cell together: requests/s over all of them, the median
# run's latencies, CPU a request of each group of processes in procs (µs,
# from each run's cpu_ticks) and of those in all together (all), the
# spread of requests/s (max / min - 1) as a measure of noise, and the
# requests a commit when the runs counted commits.
sub merge_runs {
    my ($runs, $procs, $all) = @_;
    my ($req, $dur, $commits, %ticks, @rps) = (0, 0, 0);
    my $tck = clk_tck();

    for my $r (@$runs) {
        $commits += $r->{commits} // 0;
        $req += $r->{requests};
        $dur += $r->{duration_us};
        $ticks{$_} += $r->{cpu_ticks}{$_} for keys %{ $r->{cpu_ticks} };
        push(@rps, $r->{requests} / ($r->{duration_us} / 1e6));
    }

    my @by = sort { $a->{p99_us} <=> $b->{p99_us} } @$runs;
    my $mid = $by[$#by / 2] // { p50_us => 0, p99_us => 0 };
    @rps = sort { $a <=> $b } @rps;

    my %us = (all => 0);
    for my $p (@$procs) {
        $us{$p} = $req ? ($ticks{$p} // 0) / $tck * 1e6 / $req : 0;
    }
    $us{all} += $us{$_} for @$all;

    return { requests => $req, rps => $dur ? $req / ($dur / 1e6) : 0,
             per_commit => $commits ? $req / $commits : 0,
             p50_us => $mid->{p50_us}, p99_us => $mid->{p99_us},
             cpu_us => \%us,
             spread => @rps > 1 && $rps[0] ? $rps[-1] / $rps[0] - 1 : 0 };
}

sub ratio { return $_[1] ? $_[0] / $_[1] : 0 }

# the PostgreSQL backend that serves accountd, or undef
sub accountd_backend {
    my ($be) = db()->selectrow_array(
        "SELECT pid FROM pg_stat_activity WHERE application_name = 'accountd'"
        . " AND backend_type = 'client backend' LIMIT 1");
    return $be;
}

# Once accountd has acknowledged every record of an nginx (up to 30 s),
# asked every poll seconds: nginx's metrics, not the ledger, so that
# PostgreSQL does not count rows meanwhile.
sub drained {
    my ($ng, $poll) = @_;
    my $http = HTTP::Tiny->new(timeout => 5);
    my $deadline = time() + 30;
    while (time() < $deadline) {
        my $r = $http->get($ng->url('/metrics'));
        return if ($r->{content} // '') =~ /^llmgw_journal_unacknowledged 0$/m;
        sleep($poll);
    }
    print "  the journal did not drain in 30 s\n";
}

# A tenant's llm.usage rows, once there are at least n (up to secs,
# counted every poll seconds).
sub ledger_rows {
    my ($tenant, $n, $secs, $poll) = @_;
    my ($rows, $deadline) = (0, time() + $secs);
    while (1) {
        $rows = db()->selectrow_array(
            'SELECT count(*) FROM llm.usage WHERE tenant_id = ?', undef,
            $tenant);
        return $rows if $rows >= $n || time() > $deadline;
        sleep($poll);
    }
}

# Accounting was really on: a tenant's llm.usage rows (up to 30 s) for the
# requests wrk completed through the gateway, and at most cut more: those
# its end cut short are rows too (partial), at most one a connection.
# Prints them; returns the rows and whether they are as expected.
sub ledger_check {
    my ($tenant, $requests, $cut) = @_;
    my $rows = ledger_rows($tenant, $requests, 30, 0.02);
    my $ok = $rows >= $requests && $rows <= $requests + $cut;

    printf("\nledger: %d llm.usage rows for %d gateway requests wrk "
           . "completed and at most %d it cut%s\n", $rows, $requests, $cut,
           $ok ? '' : ' (NOT AS EXPECTED)');
    return ($rows, $ok);
}

# The issue's targets, [ what, target, value, met (undef: only shown) ]
# each; fmt is that of the first three columns.
sub print_targets {
    my ($fmt, @targets) = @_;
    print "\ntargets:\n";
    printf("  $fmt  %s\n", @$_[0 .. 2],
           !defined $_->[3] ? '' : $_->[3] ? 'met' : 'MISSED')
        for @targets;
}

sub targets_json {
    return [ map { { name => $_->[0], target => $_->[1], value => $_->[2],
                     met => !defined $_->[3] ? undef
                            : $_->[3] ? \1 : \0 } } @_ ];
}

# The build directory: the stack's under bench/with-stack, else build/
sub build_dir {
    return stack()->{LLMGW_BUILD}
        if $ENV{LLMGW_TEST_DIR} && -f "$ENV{LLMGW_TEST_DIR}/stack.env";
    return "$top/build";
}

# The commit measured, its short hash, and "+" after it when tracked files
# differ from it (but bench/README.md, whose results table bench/results.pl
# rewrites); undef outside a checkout.
sub git_commit {
    my $head = `git -C '$top' rev-parse --short=12 HEAD 2>/dev/null`;
    return undef if $? || !$head;
    chomp($head);
    my $cmd = "git -C '$top' status --porcelain --untracked-files=no"
              . " -- . ':!bench/README.md'";
    my $dirty = `$cmd`;
    return $head . ($dirty ? '+' : '');
}

# build/bench/NAME-TIME.json (the directory made), and the time
sub json_file {
    my ($name) = @_;
    my $dir = build_dir() . '/bench';
    my $stamp = strftime('%Y%m%dT%H%M%SZ', gmtime());
    mkdir($dir);
    return ("$dir/$name-$stamp.json", $stamp);
}

sub read_json {
    my ($file) = @_;
    open(my $fh, '<', $file) or die "$file: $!\n";
    my $data = decode_json(do { local $/; <$fh> });
    close($fh);
    return $data;
}

# The figures of a run to file, with the commit it measured
sub write_json {
    my ($file, $data) = @_;
    $data->{commit} //= git_commit();
    open(my $fh, '>', $file) or die "$file: $!";
    print $fh JSON::PP->new->canonical->pretty->encode($data);
    close($fh);
    print "written to $file\n";
}

1;
