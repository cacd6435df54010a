#!/usr/bin/perl

# nginx itself under faults, with streams in flight: reloaded every second,
# a worker killed (-9) mid-stream, stopped (quit) with streams open.  Each
# scenario ends with the invariants of t/lib/Chaos.pm: one row for every
# request nginx settled, none doubled, the cap kept, nothing left held,
# no alerts but those the scenario caused.
#
# Short by default; LLMGW_CHAOS_LONG=1 (make chaos): a reload every second
# for 60 s, a worker killed every 5 s for 60 s, 64 streams across the quit.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Chaos;
use LLMGW;
use Test::More;
use Time::HiRes qw(sleep time);

stack();

my %run = chaos_long()
    ? (reload_secs => 60, kill_secs => 60, kill_every => 5, quit => 64)
    : (reload_secs => 8, kill_secs => 6, kill_every => 2, quit => 16);

# the limits of tier chaos below, for the checks
my %chaos = (concurrency => 64, tpm => 6000000, burst => 60000);

sub gateway {
    return chaos_nginx(workers => 2, log_level => 'notice', keepalive => 16,
                       http => <<'EOF')->run();
    %%GATEWAY%%
    %%CHAOS%%
    llm_gateway_tier  chaos  unpriced=allow tpm=6000000 burst=60000 concurrency=64;

    %%UPSTREAM%%

    server {
        listen  127.0.0.1:%%PORT%%;

        proxy_http_version  1.1;
        proxy_set_header    Connection "";
        proxy_set_header    x-mock-tenant $llm_tenant;

        location = /v1/chat/completions {
            llm_gateway  zone=llm;
            proxy_pass   http://mock;
        }
    }
EOF
}

# --- nginx -s reload every second under 32 streams -------------------------

{
    my $t = chaos_tenant(%chaos);
    my $ng = gateway();
    my %pids = map { $_ => 1 } workers($ng);

    my $w = wrk_start($ng, $t, c => 32, secs => $run{reload_secs});
    my $reloads = 0;

    # on every second of the load but its last
    for my $at (1 .. $run{reload_secs} - 1) {
        my $wait = $w->{started} + $at - time();
        sleep($wait) if $wait > 0;
        $reloads++ if system($ng->cmd('-s reload')) == 0;
        $pids{$_} = 1 for workers($ng);
    }

    my $r = wrk_wait($w);
    ok($reloads == $run{reload_secs} - 1, "reload: $reloads reloads, "
       . scalar(keys %pids) . " workers in turn, $r->{requests} streams");

    # the old workers finish their streams, then go
    my @left;
    for (1 .. 100) {
        @left = workers($ng);
        last if @left == 2;
        sleep(0.1);
    }
    is(scalar(@left), 2, 'reload: every old worker has exited');

    my $found = chaos_check($ng, tenants => [ $t ]);

    # only wrk's own streams, open when it stopped, may have been cut
    my $end = $found->{finish}{ $t->{name} };
    ok(!$end->{upstream_error} && ($end->{client_closed} // 0) <= 32,
       'reload: no stream cut by a reload ('
       . ($end->{client_closed} // 0) . ' left open by wrk)');
}

# --- kill -9 of a worker mid-stream ------------------------------------------

# What a killed worker leaves: the records it wrote and sent are taken back
# by the others within a second (t/047), and the journal drains.  The
# requests it had in flight are settled by another worker within a second
# of its death: their concurrency slots, tokens, budget and journal places
# go back, and each has its row, estimated and partial, finish_reason
# worker_exited (nginx never logged them: the worker died first).

{
    my $t = chaos_tenant(%chaos);
    my $ng = gateway();

    my $w = wrk_start($ng, $t, c => 8, secs => $run{kill_secs});
    my @killed;

    while (time() - $w->{started} < $run{kill_secs} - $run{kill_every}) {
        sleep($run{kill_every});
        my ($victim) = workers($ng);
        push(@killed, $victim) if $victim && kill('KILL', $victim);
    }

    my $r = wrk_wait($w);
    ok(@killed >= 1, 'kill: ' . scalar(@killed) . " workers killed under "
       . "$r->{requests} streams");

    my $found = chaos_check($ng, tenants => [ $t ],
        killed => scalar(@killed),
        alerts => [ killed_alerts(@killed) ]);

    my $exited = db()->selectall_arrayref(
        q{SELECT flags, cost_pusd, input_tokens FROM llm.usage
           WHERE tenant_id = ? AND finish_reason = 'worker_exited'},
        { Slice => {} }, $t->{id});
    is(scalar(grep { ($_->{flags} & 2) && defined $_->{cost_pusd}
                     && $_->{input_tokens} > 0 } @$exited),
       scalar(@$exited), 'kill: ' . scalar(@$exited) . ' requests of the '
       . 'killed workers settled for them: partial, priced');

    like($ng->error_log(), qr/requests in flight in exited worker/,
         'kill: and the settling worker said so')
        if @$exited;
}

# --- nginx -s quit with streams open ------------------------------------------

{
    my $t = chaos_tenant(%chaos, concurrency => undef);
    my $ng = gateway();

    my @open = map { stream_open($ng, $t, 'x-mock-tokens' => 30,
                                 'x-mock-delay-ms' => 50) } 1 .. $run{quit};
    is(scalar(grep { $_->{status} == 200 } @open), $run{quit},
       "quit: $run{quit} streams open");

    system($ng->cmd('-s quit'));

    my @got = map { stream_drain($_) } @open;
    is(scalar(grep { /data: \[DONE\]\n\n\r\n0\r\n\r\n$/ } @got), $run{quit},
       'quit: every stream ran to its end');

    $ng->stop();
    ok(!-f $ng->dir() . '/nginx.pid', 'quit: then nginx exited');

    my @ids = map { /x-request-id: (\w+)/i } @got;
    is(scalar(grep { @{ usage_rows($_, 10) } == 1 } @ids), $run{quit},
       'quit: each has its row, though the journal is gone with nginx');

    chaos_check($ng, tenants => [ $t ]);
}

done_testing();
