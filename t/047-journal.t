#!/usr/bin/perl

# The journal of settle records lives in shared memory: what accountd has
# not acknowledged survives a reload and a killed worker, and a journal
# that cannot take one more record refuses new requests with 503
# (full=refuse, the default) or serves them and counts the loss
# (full=admit).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use HTTP::Tiny;
use LLMGW;
use Test::More;
use Time::HiRes qw(sleep);

my $s = stack();

# it stops accountd: an accountd of its own, the stack's runs on for the
# files beside it
own_accountd();

my $pro = new_tenant(tier => 'pro');
my $tight = new_tenant(tier => 'pro');
my $loose = new_tenant(tier => 'pro');

sub gateway {
    my ($accountd) = @_;

    return nginx(http => <<"EOF")->run();
    llm_gateway_zone      zone=llm:1m;
    llm_gateway_keys      $s->{LLMGW_KEY_SNAPSHOT} secret=$s->{LLMGW_KEY_SECRET};
    llm_gateway_accountd  unix:$s->{LLMGW_ACCOUNTD_SOCKET} $accountd;

    llm_gateway_tier  pro  unpriced=allow tpm=60000000;

    server {
        listen  127.0.0.1:%%PORT%%;

        location = /v1/chat/completions {
            llm_gateway  zone=llm;
            proxy_pass   http://127.0.0.1:%%MOCK%%;
        }

        location = /metrics {
            llm_gateway_metrics;
        }
    }
EOF
}

# the gateway's metrics, as name{labels} => value
sub metrics {
    my ($ng) = @_;
    my $r = HTTP::Tiny->new(timeout => 5)->get($ng->url('/metrics'));
    my %m;
    for (split(/\n/, $r->{content} // '')) {
        next if /^#/;
        $m{$1} = $2 if /^(\S+) (\d+)$/;
    }
    return \%m;
}

sub ask {
    my ($ng, $t) = @_;
    return http_post($ng->url('/v1/chat/completions'),
                     { model => 'mock-gpt-4o-mini', max_tokens => 10,
                       messages => [ { role => 'user', content => 'hi' } ] },
                     authorization => "Bearer $t->{key}",
                     'x-mock-tokens' => 3);
}

sub rows_of {
    my ($t) = @_;
    return db()->selectrow_array(
        'SELECT count(*) FROM llm.usage WHERE tenant_id = ?', undef, $t->{id});
}

# waits until the tenant's rows stop growing
sub settled_rows {
    my ($t, $want) = @_;
    my $n = -1;
    for (1 .. 100) {
        $n = rows_of($t);
        last if defined $want && $n >= $want;
        sleep(0.1);
    }
    return $n;
}

sub workers {
    my ($ng) = @_;
    open(my $fh, '<', $ng->dir() . '/nginx.pid') or return ();
    chomp(my $master = <$fh>);
    close($fh);
    return grep { /^\d+$/ } split(/\s+/, `pgrep -P $master`);
}

# --- a reload while accountd is away ---------------------------------------

# A tenant is served while accountd is away once the gateway knows its
# spend cap (none here): each block asks once first.

{
    my $ng = gateway('');

    is(ask($ng, $pro)->{status}, 200, 'a first request, accountd there');
    ok(accountd_stop(), 'accountd stopped');

    my @ids = map { ask($ng, $pro)->{headers}{'x-request-id'} // '' } 1 .. 20;
    is(scalar(grep { length } @ids), 20, '20 answers while accountd is away');

    my @old = workers($ng);
    $ng->reload();

    my $gone = 0;
    for (1 .. 100) {
        $gone = !grep { kill(0, $_) } @old;
        last if $gone;
        sleep(0.1);
    }
    ok($gone, 'the workers that served them have exited');

    ok(accountd_start(), 'accountd is back');

    for my $id (@ids) {
        is(scalar(@{ usage_rows($id, 10) }), 1,
           "request $id: one row, sent by the next workers");
    }

    # Killed workers: accountd, stopped, acknowledges nothing, so what they
    # sent is still theirs when they die; the next workers take it back.
    open(my $fh, '<', $s->{LLMGW_ACCOUNTD_PIDFILE}) or die;
    chomp(my $apid = <$fh>);
    close($fh);

    kill('STOP', $apid);

    my @more = map { ask($ng, $pro)->{headers}{'x-request-id'} // '' } 1 .. 10;
    my @killed = workers($ng);
    kill('KILL', @killed);
    sleep(2);

    kill('CONT', $apid);

    is(scalar(grep { @{ usage_rows($_, 10) } == 1 } @more), 10,
       'the records sent by killed workers arrive, each once');
    like($ng->error_log(), qr/records of exited worker \d+ to send again/,
         'the next workers sent them again');

    $ng->no_alerts(alerts => [ killed_alerts(@killed) ]);
}

# --- full=refuse: 503 rather than a request without its record -------------

{
    my $ng = gateway('buffer=64k');

    is(ask($ng, $tight)->{status}, 200, 'a first request, accountd there');
    my $before = settled_rows($tight, 1);
    ok(accountd_stop(), 'accountd stopped');

    my %status;
    for (1 .. 500) {
        my $r = ask($ng, $tight);
        $status{$r->{status}}++;

        if ($r->{status} == 503) {
            like($r->{content}, qr/"code":"accounting_unavailable"/,
                 '503 says the usage cannot be recorded')
                if $status{503} == 1;
            is($r->{headers}{'retry-after'}, 5, 'with Retry-After')
                if $status{503} == 1;
        }
    }

    my $served = $status{200} // 0;
    diag("64k journal, accountd away: $served served, "
         . ($status{503} // 0) . ' refused');

    ok($served > 100 && $status{503}, 'served while there was room, then '
       . 'refused');

    my $mx = metrics($ng);
    is($mx->{llmgw_journal_refused_total}, $status{503},
       'llmgw_journal_refused_total counts the refusals');
    is($mx->{llmgw_journal_unacknowledged}, $served,
       'llmgw_journal_unacknowledged the records waiting for accountd');
    ok(!grep({ /^llmgw_accountd_connected/ && $mx->{$_} } keys %$mx),
       'llmgw_accountd_connected 0');

    ok(accountd_start(), 'accountd is back');

    is(settled_rows($tight, $before + $served) - $before, $served,
       "every one of the $served served requests has its row");

    # the acknowledged records made room
    my $r;
    for (1 .. 50) {
        $r = ask($ng, $tight);
        last if $r->{status} == 200;
        sleep(0.1);
    }
    is($r->{status}, 200, 'and requests are served again');

    $ng->no_alerts();
}

# --- full=admit: served, and the loss counted ------------------------------

{
    my $ng = gateway('buffer=64k full=admit');

    is(ask($ng, $loose)->{status}, 200, 'a first request, accountd there');
    my $before = settled_rows($loose, 1);
    ok(accountd_stop(), 'accountd stopped');

    my $ok = grep { ask($ng, $loose)->{status} == 200 } 1 .. 500;
    is($ok, 500, 'full=admit: every request served');

    ok(accountd_start(), 'accountd is back');

    my $rows = settled_rows($loose) - $before;
    ok($rows > 100 && $rows < 500, "$rows recorded");

    my @lost = grep { /accountd journal full, record of request .* lost/ }
               split(/\n/, $ng->error_log());
    is(scalar(@lost), 500 - $rows, 'the others logged as lost, each');
    is(metrics($ng)->{llmgw_journal_lost_total}, 500 - $rows,
       'and counted in llmgw_journal_lost_total');

    $ng->no_alerts();
}

done_testing();
