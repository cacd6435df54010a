#!/usr/bin/perl

# Exactly once under faults: 200 concurrent streams for 20 s while accountd
# is killed (-9) and started again every 2 s, and PostgreSQL is restarted
# at once (immediate shutdown) in the middle.  Afterwards the invariants of
# t/lib/Chaos.pm: every request nginx logged as settled has exactly one
# row, no row is doubled, nothing is left held, no alert.  The tenant has
# no spend cap: a capped one is refused while accountd is away.
#
# LLMGW_CHAOS_LONG=1 (make chaos): 60 s, PostgreSQL restarted every 5 s.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Chaos;
use LLMGW;
use Test::More;
use Time::HiRes qw(sleep time);

my $s = stack();

my %run = chaos_long() ? (secs => 60, pg_every => 5)
                       : (secs => 20, pg_every => 10);

my $t = chaos_tenant(cap => undef, concurrency => 250);

my $ng = chaos_nginx(workers => 2, log_level => 'warn',
                     http => <<'EOF')->run();
    %%GATEWAY%%
    %%CHAOS%%
    llm_gateway_tier  chaos  unpriced=allow tpm=600000000 concurrency=250;

    server {
        listen  127.0.0.1:%%PORT%%;

        location = /v1/chat/completions {
            llm_gateway       zone=llm;
            proxy_pass        http://127.0.0.1:%%MOCK%%;
            proxy_set_header  x-mock-tenant $llm_tenant;
        }
    }
EOF

my $pgbin = (sort glob('/usr/lib/postgresql/*/bin'))[-1];

# kill -9, and wait until the pid is gone: a new accountd refuses to start
# while its pidfile names a live process, and a zombie not yet reaped is one
sub accountd_kill {
    open(my $fh, '<', "$s->{LLMGW_DIR}/accountd.pid") or return 0;
    chomp(my $pid = <$fh> // '');
    close($fh);
    return 0 unless $pid && kill('KILL', $pid);

    for (1 .. 100) {
        last unless kill(0, $pid);
        sleep(0.05);
    }

    return 1;
}

# pg_ctl's own output and what the server says before its logging
# collector runs go to pg_ctl.log: a restart that fails says why there
sub pg_restart {
    my $pg = "$s->{LLMGW_DIR}/pg";
    my $log = "$s->{LLMGW_DIR}/pg_ctl.log";
    my $ctl = "runuser -u postgres -- $pgbin/pg_ctl -D $pg";

    return 1 if system("$ctl -m immediate -w -l $pg/startup.log restart "
                       . ">>$log 2>&1") == 0;

    diag("pg_ctl restart failed: " . `tail -n 5 $log $pg/startup.log`);

    # the rest of the suite needs the stack's server
    system("$ctl status >/dev/null 2>&1") == 0
        or system("$ctl -w -l $pg/startup.log start >>$log 2>&1");
    return 0;
}

# 20 tokens 20 ms apart each (t/data/chaos.lua)
my $w = wrk_start($ng, $t, c => 200, secs => $run{secs});

my ($kills, $tries, $pg) = (0, 0, 0);

while (time() - $w->{started} < $run{secs} - 1) {
    sleep(2);

    $tries++;
    $kills++ if accountd_kill();
    accountd_start() or diag('accountd did not start');

    if ($pg < $run{secs} / $run{pg_every} - 1
        && time() - $w->{started} > ($pg + 1) * $run{pg_every} - 1)
    {
        $pg++ if pg_restart();
    }
}

my $r = wrk_wait($w);

# every 2 s, and as long as restarting it takes on a busy machine, or
# under valgrind (make test-sanitize: LLMGW_TIME_SCALE)
ok($kills == $tries && $kills >= $run{secs} / 6 / time_scale(),
   "accountd killed $kills times in $run{secs} s");
ok($pg >= $run{secs} / $run{pg_every} - 1,
   "PostgreSQL restarted (immediate) $pg times under the load");
ok($r->{requests} > 1000, "$r->{requests} streams");

chaos_check($ng, tenants => [ $t ]);

done_testing();
