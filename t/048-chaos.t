#!/usr/bin/perl

# Exactly once under faults: 200 concurrent streams for 20 s while accountd
# is killed (-9) and started again every 2 s, and PostgreSQL is restarted
# at once (immediate shutdown) in the middle.  Afterwards every request
# nginx logged as settled has exactly one row, and no row is doubled.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use LLMGW;
use Test::More;
use Time::HiRes qw(sleep time);

my $s = stack();
my $t = new_tenant(tier => 'chaos');

my $ng = nginx(workers => 2, log_level => 'warn', http => <<'EOF')->run();
    %%GATEWAY%%
    llm_gateway_tier  chaos  tpm=600000000;

    log_format  settled  '$request_id $status $llm_input_tokens';

    server {
        listen      127.0.0.1:%%PORT%%;
        access_log  %%NGINX%%/settled.log settled;

        location = /v1/chat/completions {
            llm_gateway       zone=llm;
            proxy_pass        http://127.0.0.1:%%MOCK%%;
            proxy_set_header  x-mock-tokens    20;
            proxy_set_header  x-mock-delay-ms  20;
        }
    }
EOF

my $pgbin = (sort glob('/usr/lib/postgresql/*/bin'))[-1];

sub accountd_kill {
    open(my $fh, '<', "$s->{LLMGW_DIR}/accountd.pid") or return 0;
    chomp(my $pid = <$fh> // '');
    close($fh);
    return $pid && kill('KILL', $pid);
}

local $ENV{LLMGW_KEY} = $t->{key};

open(my $out, '-|', "wrk -t2 -c200 -d20s -s $FindBin::Bin/data/stream.lua "
                    . $ng->url('/v1/chat/completions') . ' 2>&1')
    or die "wrk: $!";

my ($kills, $pg) = (0, 0);
my $start = time();

while (time() - $start < 19) {
    sleep(2);

    $kills++ if accountd_kill();
    accountd_start() or diag('accountd did not start');

    if (!$pg && time() - $start > 9) {
        $pg = system("runuser -u postgres -- $pgbin/pg_ctl -D "
                     . "$s->{LLMGW_DIR}/pg -m immediate -w restart "
                     . '>/dev/null 2>&1') == 0;
    }
}

my @wrk = <$out>;
close($out);
diag($_) for grep { /Requests\/sec|requests in|Non-2xx|Socket errors/ } @wrk;

ok($kills >= 8, "accountd killed $kills times");
ok($pg, 'PostgreSQL restarted (immediate) under the load');

# what nginx settled, by its access log
open(my $fh, '<', $ng->dir() . '/settled.log') or die;
my %logged;
while (<$fh>) {
    my ($id, $status, $in) = split;
    $logged{$id} = $status if defined $in && $in ne '-';
}
close($fh);

ok(keys(%logged) > 1000, scalar(keys %logged) . ' requests settled');

# the journal drains once accountd stays up
my ($rows, $distinct);
for (1 .. 300) {
    ($rows, $distinct) = db()->selectrow_array(
        'SELECT count(*), count(DISTINCT request_id) FROM llm.usage '
        . 'WHERE tenant_id = ?', undef, $t->{id});
    last if $rows >= keys %logged;
    sleep(0.1);
}

my $ids = db()->selectcol_arrayref(
    'SELECT request_id FROM llm.usage WHERE tenant_id = ?', undef, $t->{id});
my %row = map { $_ => 1 } @$ids;

my @missing = grep { !$row{$_} } keys %logged;
my @extra = grep { !exists $logged{$_} } keys %row;

is(scalar(@missing), 0, 'every settled request has its row')
    or diag('missing: ' . join(' ', @missing[0 .. 9]));
is(scalar(@extra), 0, 'and no row is without its request');
is($rows, $distinct, "no row doubled ($rows rows)");

done_testing();
