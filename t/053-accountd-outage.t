#!/usr/bin/perl

# accountd away for long under load: stopped (not killed) while 200
# streams keep coming, and started again later.  Meanwhile the gateway
# serves on (the tenant has no cap, so no lease to ask for), every record
# waits in the journal in shared memory, and once accountd is back the
# journal drains.  Afterwards the invariants of t/lib/Chaos.pm.
#
# Short by default: 10 s away in 20 s of load.  LLMGW_CHAOS_LONG=1 (make
# chaos): 2 minutes away in 150 s.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Chaos;
use List::Util qw(max);
use LLMGW;
use Test::More;
use Time::HiRes qw(sleep time);

my $s = stack();

# it stops accountd: an accountd of its own, the stack's runs on for the
# files beside it
own_accountd();

# the journal holds the whole outage: a few hundred streams a second, a
# record of some 110 bytes each
my %run = chaos_long() ? (secs => 150, down => 120, buffer => '32m')
                       : (secs => 20, down => 10, buffer => '8m');

my $t = chaos_tenant(cap => undef, concurrency => 250);

my $ng = chaos_nginx(workers => 2, log_level => 'warn',
                     http => <<"EOF")->run();
    llm_gateway_zone      zone=llm:1m;
    llm_gateway_keys      $s->{LLMGW_KEY_SNAPSHOT} secret=$s->{LLMGW_KEY_SECRET};
    llm_gateway_accountd  unix:$s->{LLMGW_ACCOUNTD_SOCKET} buffer=$run{buffer};
    %%CHAOS%%
    llm_gateway_tier  chaos  tpm=600000000 concurrency=250;

    server {
        listen  127.0.0.1:%%PORT%%;

        location = /v1/chat/completions {
            llm_gateway       zone=llm;
            proxy_pass        http://127.0.0.1:%%MOCK%%;
            proxy_set_header  x-mock-tenant \$llm_tenant;
        }
    }
EOF

# 20 tokens 20 ms apart each (t/data/chaos.lua)
my $w = wrk_start($ng, $t, c => 200, secs => $run{secs});

sleep(($run{secs} - $run{down}) / 3);

my $acked = metrics($ng)->{llmgw_journal_acknowledged_total} // 0;
ok($acked > 0, "$acked records acknowledged before accountd stops");

ok(accountd_stop(), 'accountd stopped under the load');

my $stopped = time();
my ($peak, $m) = (0, {});

while (time() - $stopped < $run{down}) {
    sleep(1);
    $m = metrics($ng);
    $peak = max($peak, $m->{llmgw_journal_unacknowledged} // 0);
}

my $written = $m->{llmgw_journal_written_total} // 0;

ok(accountd_start(), "accountd started again after $run{down} s");

my $r = wrk_wait($w);

# on any machine, more than a stream a second comes through
ok($peak >= $run{down} * 10,
   "the journal held up to $peak records while accountd was away");
ok($r->{requests} > $run{secs} * 10, "$r->{requests} streams");

$m = metrics($ng);
is($m->{llmgw_journal_refused_total} // 0, 0,
   'no request refused: the journal held the whole outage');

chaos_check($ng, tenants => [ $t ]);

done_testing();
