package Chaos;

# The fault and bad-input suite's shared part (make chaos): the
# scenario tenants, an nginx that logs what it settled and serves its
# metrics, wrk streams, and the invariants every scenario ends with.
#
#   (a) every request nginx logged as settled has exactly one llm.usage row
#   (b) no row doubled, none without its logged request, none refused into
#       llm.usage_rejected
#   (c) each tenant's day costs no more than its cap, the gateways leased
#       no more than it, and every row has its price
#   (d) nothing outstanding once drained: the journal's unacknowledged
#       records and the places held for requests at 0, every upstream
#       request ended, the concurrency limit never passed at the mock; a
#       tenant with concurrency=N opens N streams again and the N+1th is
#       refused, and a request of its whole burst passes
#   (e) no [alert], [crit] or [emerg] in error.log but those a scenario
#       causes on purpose (it names them), no sanitizer report
#
# A scenario is short by default (seconds); LLMGW_CHAOS_LONG=1, which make
# chaos sets, gives it its long durations.

use strict;
use warnings;

use Exporter qw(import);
use FindBin;
use HTTP::Tiny;
use IO::Select;
use IO::Socket::INET;
use JSON::PP;
use Socket qw(SOL_SOCKET SO_LINGER);
use LLMGW;
use Test::More;
use Time::HiRes qw(sleep time);

our @EXPORT = qw(chaos_long chaos_tenant chaos_nginx chaos_check wrk_start
                 wrk_wait workers metrics stream_open stream_drain swarm
                 settled by_seq mock_stats);

# what every chaos request is: the model, its price ($1 in, $2 out per
# million tokens) and the prompt "hi", 7 tokens by the estimate and the mock
our $MODEL = 'mock-chaos';
our $PROMPT = 7;

# the journal place a request holds from admission to its record
our $PLACE = 336;

my $priced = 0;

sub chaos_long { return $ENV{LLMGW_CHAOS_LONG} ? 1 : 0 }

# A tenant of the scenario: its tier, a daily cap generous enough never to
# refuse ($100 unless cap => ...; cap => undef: none), and the limits its
# tier has in the scenario's config (concurrency, tpm, burst), which the
# checks use.  The gateway must learn the cap from the key snapshot: call
# before nginx().
sub chaos_tenant {
    my (%o) = @_;
    my $s = stack();

    db()->do(q{INSERT INTO llm.prices (model, effective_from, input_per_mtok,
                                       output_per_mtok)
               VALUES (?, '2000-01-01', 1000000, 2000000)
               ON CONFLICT DO NOTHING}, undef, $MODEL)
        unless $priced++;

    my $t = new_tenant(tier => $o{tier} // 'chaos');
    my $cap = exists $o{cap} ? $o{cap} : '100';

    if (defined $cap) {
        accountd('tenant', 'update', '--name', $t->{name}, '--daily-cap-usd',
                 $cap);
        snapshot_caps($s->{LLMGW_KEY_SNAPSHOT}, $t->{key_id}, 't') eq 't'
            or die "the key snapshot does not say $t->{name} has a cap";
    }

    return { %$t, cap => $cap, concurrency => $o{concurrency},
             tpm => $o{tpm}, burst => $o{burst} };
}

# nginx(%o), with %%CHAOS%% in the http block standing for the access log
# of what the gateway settled ($llm_input_tokens is set once it has) and a
# listener of its own for llm_gateway_metrics.
sub chaos_nginx {
    my (%o) = @_;
    my $mport = LLMGW::Nginx::free_port();

    my $chaos = <<"EOF";
    log_format  chaos  '\$request_id \$status \$llm_tenant \$llm_input_tokens '
                       '\$http_x_chaos_seq \$bytes_sent';
    access_log  %%NGINX%%/settled.log chaos;

    server {
        listen      127.0.0.1:$mport;
        access_log  off;

        location = /metrics {
            llm_gateway_metrics;
        }
    }
EOF

    $o{http} =~ s/%%CHAOS%%/$chaos/g;

    my $ng = nginx(%o);
    $ng->{chaos_metrics} = $mport;
    return $ng;
}

# The gateway's metrics, as "name{labels}" => value.
sub metrics {
    my ($ng) = @_;
    my $r = HTTP::Tiny->new(timeout => 5)
        ->get("http://127.0.0.1:$ng->{chaos_metrics}/metrics");
    my %m;
    for (split(/\n/, $r->{content} // '')) {
        $m{$1} = $2 if /^([^#\s]\S*) (\d+)$/;
    }
    return \%m;
}

# The master's worker processes.
sub workers {
    my ($ng) = @_;
    open(my $fh, '<', $ng->dir() . '/nginx.pid') or return ();
    chomp(my $master = <$fh> // '');
    close($fh);
    return () unless $master;
    return grep { /^\d+$/ } split(/\s+/, `pgrep -P $master`);
}

# What the mock says of a tenant's upstream requests (the location sets
# x-mock-tenant $llm_tenant): { inflight, max_inflight }.
sub mock_stats {
    my ($t) = @_;
    my $s = stack();
    my $r = HTTP::Tiny->new(timeout => 5)
        ->get("http://127.0.0.1:$s->{LLMGW_MOCK_PORT}/stats/$t->{name}");
    return eval { decode_json($r->{content}) } // {};
}

# wrk streams on a tenant's key in the background (t/data/chaos.lua):
# c => connections, secs, path, tokens and delay_ms for the mock.
sub wrk_start {
    my ($ng, $t, %o) = @_;
    my $c = $o{c} // 32;
    my $secs = $o{secs} // 5;
    my $lua = "$FindBin::Bin/data/chaos.lua";

    my $cmd = "LLMGW_KEY=$t->{key} LLMGW_TOKENS=" . ($o{tokens} // 20)
        . ' LLMGW_DELAY_MS=' . ($o{delay_ms} // 20)
        . " wrk -t2 -c$c -d${secs}s --timeout 10s -s $lua "
        . $ng->url($o{path} // '/v1/chat/completions') . ' 2>&1';

    open(my $out, '-|', $cmd) or die "wrk: $!";
    return { out => $out, started => time() };
}

# Waits for wrk; its summary as diagnostics, and { requests, errors }.
sub wrk_wait {
    my ($w) = @_;
    my $fh = $w->{out};
    my @lines = <$fh>;
    close($fh);

    my %r = (requests => 0, errors => 0);
    for (@lines) {
        diag("wrk: $_") if /requests in|Socket errors|Non-2xx/;
        $r{requests} = $1 if /(\d+) requests in/;
        $r{errors} += $_ for /(?:connect|read|write|timeout) (\d+)/g;
    }
    return \%r;
}

# A stream on a tenant's key over its own connection, once its response
# headers came: { sock, head, status }.  Extra headers for the mock.
sub stream_open {
    my ($ng, $t, %h) = @_;
    my $path = delete $h{path} // '/v1/chat/completions';
    my $body = encode_json({ model => $MODEL, max_tokens => 50,
                             stream => JSON::PP::true,
                             messages => [ { role => 'user',
                                             content => 'hi' } ] });

    my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                  PeerPort => $ng->port) or die "$!";
    $c->syswrite("POST $path HTTP/1.1\r\nHost: x\r\n"
        . "Authorization: Bearer $t->{key}\r\n"
        . join('', map { "$_: $h{$_}\r\n" } sort keys %h)
        . "Content-Type: application/json\r\nConnection: close\r\n"
        . 'Content-Length: ' . length($body) . "\r\n\r\n$body");

    my $sel = IO::Select->new($c);
    my $head = '';
    my $deadline = time() + 10;

    while ($head !~ /\r\n\r\n/ && time() < $deadline) {
        last unless $sel->can_read($deadline - time());
        last unless $c->sysread($head, 4096, length $head);
    }

    my ($status) = $head =~ m{^HTTP/1\.1 (\d+)};
    return { sock => $c, head => $head, status => $status // 0 };
}

# Reads a stream to its end; all that came.
sub stream_drain {
    my ($st) = @_;
    my $got = $st->{head};
    my $sel = IO::Select->new($st->{sock});
    while ($sel->can_read(10)) {
        last unless $st->{sock}->sysread($got, 65536, length $got);
    }
    close($st->{sock});
    return $got;
}

my $swarmed = 0;

# Many clients at once, each over its own connection, a batch at a time
# (batch => 40): each { path, body, headers, leave_at, reset, send } sends
# its request with x-chaos-seq: a number of its own (only its first send
# bytes, if given; -1: all but the last), and reads the response to its
# end, or only its first leave_at bytes and leaves (closes; with reset, by
# RST).  Each gets raw (what it read) and seq.
sub swarm {
    my ($ng, $clients, %o) = @_;
    my $batch = $o{batch} // 40;
    $_->{seq} = ++$swarmed for @$clients;
    my @rest = @$clients;

    while (my @b = splice(@rest, 0, $batch)) {
        my $sel = IO::Select->new();
        my %by;

        for my $c (@b) {
            my $body = ref $c->{body} ? encode_json($c->{body}) : $c->{body};
            my %h = (%{ $c->{headers} // {} }, 'x-chaos-seq' => $c->{seq});
            my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                          PeerPort => $ng->port) or die "$!";
            my $req = "POST $c->{path} HTTP/1.1\r\nHost: x\r\n"
                . join('', map { "$_: $h{$_}\r\n" } sort keys %h)
                . "Content-Type: application/json\r\nConnection: close\r\n"
                . 'Content-Length: ' . length($body) . "\r\n\r\n$body";
            $s->syswrite(defined $c->{send} ? substr($req, 0, $c->{send})
                                            : $req);
            $c->{raw} = '';

            if (defined $c->{leave_at} && $c->{leave_at} == 0) {
                leave($c, $s);
                next;
            }

            $sel->add($s);
            $by{fileno $s} = $c;
        }

        my $deadline = time() + 30;

        while ($sel->count() && time() < $deadline) {
            for my $s ($sel->can_read(1)) {
                my $c = $by{fileno $s};
                my $want = defined $c->{leave_at}
                           ? $c->{leave_at} - length($c->{raw}) : 65536;

                unless ($s->sysread($c->{raw}, $want, length $c->{raw})) {
                    $sel->remove($s);
                    close($s);
                    next;
                }

                if (defined $c->{leave_at}
                    && length($c->{raw}) >= $c->{leave_at})
                {
                    $sel->remove($s);
                    leave($c, $s);
                }
            }
        }

        close($_) for $sel->handles();
    }

    return $clients;
}

sub leave {
    my ($c, $s) = @_;
    setsockopt($s, SOL_SOCKET, SO_LINGER, pack('ii', 1, 0)) if $c->{reset};
    close($s);
}

# What nginx logged as settled: request_id => { status, tenant, seq };
# with all => 1, every request it logged.
sub settled {
    my ($ng, %o) = @_;
    my %logged;
    open(my $fh, '<', $ng->dir() . '/settled.log') or return {};
    while (<$fh>) {
        my ($id, $status, $tenant, $in, $seq, $sent) = split;
        next unless defined $in && ($in ne '-' || $o{all});
        $logged{$id} = { status => $status, tenant => $tenant,
                         seq => $seq, sent => $sent };
    }
    close($fh);
    return \%logged;
}

# The same by x-chaos-seq (swarm): seq => request_id.
sub by_seq {
    my ($logged) = @_;
    return { map { $logged->{$_}{seq} => $_ }
             grep { $logged->{$_}{seq} ne '-' } keys %$logged };
}

# Each tenant's rows once nothing is on its way: request_id => [ rows ].
sub rows_of {
    my ($t) = @_;
    my %rows;
    my $r = db()->selectall_arrayref(
        'SELECT request_id, status, flags, finish_reason, input_tokens,'
        . ' output_tokens, cost_pusd FROM llm.usage WHERE tenant_id = ?',
        { Slice => {} }, $t->{id});
    push(@{ $rows{$_->{request_id}} }, $_) for @$r;
    return \%rows;
}

# the first ten, for a diagnostic
sub first { return grep { defined } @_[0 .. 9] }

# a check that fails for a known gap, as a TODO test (todo => { ... })
sub known_gap {
    my ($o, $what, $test) = @_;
    my $why = $o->{todo}{$what};
    my $tb = Test::More->builder;
    $tb->todo_start($why) if $why;
    my $ok = $test->();
    $tb->todo_end() if $why;
    return $ok;
}

# The invariants (a) to (e), for the tenants of a scenario, after its
# faults; nginx is stopped at the end.
#
#   tenants => [ ... ]        from chaos_tenant()
#   alerts  => [ qr/.../ ]    the error.log alerts the scenario caused
#   todo    => { slots => why, held => why }   known gaps, as TODO tests
#   killed  => N              N workers were killed: the rows of the
#                             requests they had in flight (worker_exited)
#                             were never in their log, nor that of one
#                             killed between its record and its log line
#   no_mock_max => 1          clients leave mid-stream: the mock counts such
#                             a request until its next token finds the
#                             connection closed, after nginx gave the slot
#                             back, so its count overshoots the limit
#
# Returns what it found: { held, places (journal places held), and per
# tenant name: rows => n, finish => { finish_reason => n } (before the
# slot check's streams), slots => free, exited => rows of requests settled
# for a killed worker }.
sub chaos_check {
    my ($ng, %o) = @_;
    my @tenants = @{ $o{tenants} };
    my %found;
    local $Test::Builder::Level = $Test::Builder::Level + 1;

    # (d) the journal drains: every record acknowledged, so committed
    if ($ng->{running}) {
        my ($m, $stable, $last) = ({}, 0, -1);
        my $deadline = time() + 30;

        while (time() < $deadline) {
            $m = metrics($ng);
            my $held = $m->{'llmgw_journal_bytes{kind="held"}'} // -1;
            last if ($m->{llmgw_journal_unacknowledged} // -1) == 0
                    && ($held == 0 || ($held == $last && ++$stable >= 10));
            $stable = 0 if $held != $last;
            $last = $held;
            sleep(0.2);
        }

        is($m->{llmgw_journal_unacknowledged}, 0,
           'drained: every record acknowledged by accountd');
        $found{held} = $m->{'llmgw_journal_bytes{kind="held"}'} // -1;
        $found{places} = int($found{held} / $PLACE);
        diag("$found{held} journal bytes still held: $found{places} "
             . 'requests admitted and never settled') if $found{held};
        known_gap(\%o, 'held', sub {
            is($found{held}, 0, 'drained: no journal place held for a '
               . 'request') });
        is($m->{llmgw_journal_lost_total} // 0, 0, 'no record lost');
    }

    my $logged = settled($ng);

    for my $t (@tenants) {
        my $name = $t->{name};
        my @ids = grep { $logged->{$_}{tenant} eq $name } keys %$logged;

        # without metrics (nginx gone): the rows stop coming
        my $rows = rows_of($t);
        for (1 .. 100) {
            last if $ng->{running} || keys(%$rows) >= @ids;
            sleep(0.1);
            $rows = rows_of($t);
        }

        my @missing = grep { !$rows->{$_} } @ids;
        my @doubled = grep { @{ $rows->{$_} } > 1 } keys %$rows;
        my %is = map { $_ => 1 } @ids;
        my @extra = grep { !$is{$_} } keys %$rows;

        # a killed worker logs nothing of what it had in flight: another
        # settles it, and its row says so
        my @exited = grep { $rows->{$_}[0]{finish_reason} eq 'worker_exited' }
                     @extra;
        $found{exited}{$name} = scalar(@exited);

        if ($o{killed}) {
            @extra = grep { $rows->{$_}[0]{finish_reason} ne 'worker_exited' }
                     @extra;

            # one killed after writing a record, before its log line: at
            # most the requests it was ending at that moment, one a kill
            # in practice
            if (@extra && @extra <= $o{killed}) {
                diag("$name: " . scalar(@extra) . ' requests recorded but '
                     . 'not logged: their worker was killed in between');
                @extra = ();
            }
        }
        my ($rejected) = db()->selectrow_array(
            'SELECT count(*) FROM llm.usage_rejected WHERE tenant_id = ?',
            undef, $t->{id});

        ok(@ids > 0, "$name: " . scalar(@ids) . ' requests settled');
        is(scalar(@missing), 0, "$name: (a) every settled request has its "
           . 'row') or diag('missing: ' . join(' ', first(@missing)));
        is(scalar(@doubled), 0, "$name: (b) no row doubled");
        is(scalar(@extra), 0, "$name: (b) no row without its request")
            or diag('extra: ' . join(' ', first(@extra)));
        is($rejected, 0, "$name: (b) none refused into usage_rejected");
        $found{rows}{$name} = scalar(keys %$rows);
        $found{finish}{$name}{ $_->{finish_reason} // '' }++
            for map { @$_ } values %$rows;

        # (c) the cap and the cost, for a tenant of chaos_tenant()
        if (defined $t->{cap}) {
            my $b = db()->selectrow_hashref(
                'SELECT daily_cap_usd, leased_usd, spent_usd,'
                . ' (SELECT count(*) FROM llm.usage WHERE tenant_id = ?'
                . '   AND cost_pusd IS NULL) AS unpriced'
                . ' FROM llm.budget_today WHERE tenant_id = ?', undef,
                $t->{id}, $t->{id}) // {};
            ok(defined $b->{spent_usd} && $b->{spent_usd} > 0
               && $b->{spent_usd} <= $b->{daily_cap_usd},
               "$name: (c) spent \$" . ($b->{spent_usd} // '?')
               . ' of its $' . ($b->{daily_cap_usd} // '?') . ' cap');
            ok(($b->{leased_usd} // 0) <= ($b->{daily_cap_usd} // -1),
               "$name: (c) leased \$" . ($b->{leased_usd} // '?')
               . ', within the cap');
            is($b->{unpriced}, 0, "$name: (c) every row priced");
        }

        # (d) every upstream request ended, none beyond the limit
        my $ms = mock_stats($t);
        for (1 .. 100) {
            last if ($ms->{inflight} // -1) == 0;
            sleep(0.1);
            $ms = mock_stats($t);
        }
        is($ms->{inflight}, 0, "$name: (d) no upstream request left");
        ok(($ms->{max_inflight} // 0) <= $t->{concurrency},
           "$name: (d) at most $t->{concurrency} at once at the mock "
           . "($ms->{max_inflight})")
            if $t->{concurrency} && !$o{no_mock_max};

        next unless $ng->{running} && $t->{concurrency};

        # (d) every concurrency slot free: N streams, the N+1th refused.
        # Each lives 50 s, a token a second: longer than a busy
        # machine takes to open them all
        my $n = $t->{concurrency};
        my (@open, $refused);
        my $free = 0;
        for (1 .. $n + 1) {
            my $st = stream_open($ng, $t, 'x-mock-tokens' => 50,
                                 'x-mock-delay-ms' => 1000);
            push(@open, $st);
            if ($st->{status} != 200) {
                $refused = stream_drain($st) =~ /concurrency_limit_exceeded/;
                last;
            }
            $free++;
        }
        close($_->{sock}) for @open;
        $found{slots}{$name} = $free;

        known_gap(\%o, 'slots', sub {
            is($free, $n, "$name: (d) all $n concurrency slots free again")
        });
        ok($refused, "$name: (d) and the next stream refused") if $free == $n;

        # (d) a request of the whole burst passes once the bucket refilled
        # (it needs a slot)
        diag("$name: no slot free for a request of the whole burst")
            if $t->{burst} && !$free;

        if ($t->{burst} && $free) {
            my $wait = $t->{burst} * 60 / $t->{tpm} + 3;
            my $deadline = time() + $wait;
            my $r;
            sleep(0.3);
            while (1) {
                $r = http_post($ng->url('/v1/chat/completions'),
                               { model => $MODEL,
                                 max_tokens => $t->{burst} - $PROMPT,
                                 messages => [ { role => 'user',
                                                 content => 'hi' } ] },
                               authorization => "Bearer $t->{key}",
                               'x-mock-tokens' => 1);
                last if $r->{status} == 200 || time() > $deadline;
                sleep(0.25);
            }
            is($r->{status}, 200, "$name: (d) a request of its whole burst "
               . "($t->{burst} tokens) passes")
                or diag($r->{content});
        }
    }

    # (e) nothing alarming but what the scenario did on purpose
    $ng->no_alerts(alerts => $o{alerts},
                   name => '(e) no other alerts in error.log');

    return \%found;
}

1;
