#!/usr/bin/perl

# Hard spend caps: set exactly from the command line, and leased to the
# gateways by llm.take_lease() so that all their leases together, however
# many take them at once, never pass the cap.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use DBI;
use LLMGW;
use POSIX ();
use Test::More;
use Time::HiRes qw(sleep);

my $s = stack();

sub cli {
    my @args = @_;
    my $cmd = join(' ', "$s->{LLMGW_BUILD}/accountd", '-c',
                   $s->{LLMGW_ACCOUNTD_CONF}, map { "'$_'" } @args);
    my $out = `$cmd 2>&1`;
    return ($out, $? >> 8);
}

sub tenant_row {
    return db()->selectrow_hashref(
        'SELECT daily_cap_pusd, monthly_cap_pusd, time_zone FROM llm.tenants'
        . ' WHERE name = ?', undef, $_[0]) // {};
}

my $tag = "caps$$";

# --- the command line: dollars to pico-dollars, exactly --------------------

my ($out, $rc) = cli('tenant', 'create', '--name', "$tag-a", '--tier', 'pro',
                     '--daily-cap-usd', '12.345678901234');
is($rc, 0, 'tenant create --daily-cap-usd');
is_deeply(tenant_row("$tag-a"), { daily_cap_pusd => 12345678901234,
                                  monthly_cap_pusd => undef,
                                  time_zone => 'UTC' },
          '12.345678901234 dollars are 12,345,678,901,234 pico-dollars');

for my $c ([ [ '--daily-cap-usd', '0.5' ],
             { daily_cap_pusd => 500000000000 }, 'a new daily cap' ],
           [ [ '--monthly-cap-usd', '100', '--time-zone', 'Pacific/Auckland' ],
             { monthly_cap_pusd => 100000000000000,
               time_zone => 'Pacific/Auckland' }, 'a monthly cap, a zone' ],
           [ [ '--daily-cap-usd', 'none' ],
             { daily_cap_pusd => undef }, '"none" removes a cap' ],
           [ [ '--daily-cap-usd', '0' ],
             { daily_cap_pusd => 0 }, 'a cap of 0 stops all spending' ])
{
    my ($args, $want, $name) = @$c;
    ($out, $rc) = cli('tenant', 'update', '--name', "$tag-a", @$args);
    is($rc, 0, "tenant update: $name");
    my $row = tenant_row("$tag-a");
    is_deeply({ map { $_ => $row->{$_} } keys %$want }, $want, "  stored");
}

for my $bad ('-1', '1e3', '12.', '.5', '0.0000000000001', '12345678',
             'twelve', '1,5')
{
    ($out, $rc) = cli('tenant', 'update', '--name', "$tag-a",
                      '--daily-cap-usd', $bad);
    isnt($rc, 0, "--daily-cap-usd $bad is refused");
}

like($out, qr/dollars, such as 12\.50/, '  saying what it takes');

($out, $rc) = cli('tenant', 'update', '--name', "$tag-a", '--time-zone',
                  'Mars/Olympus');
isnt($rc, 0, 'an unknown time zone is refused');

($out) = cli('tenant', 'list');
like($out, qr/\Q$tag-a\E\s+pro\s+0\.0+\s+100\.0+\s+Pacific\/Auckland$/m,
     'tenant list shows the caps and the zone');

# --- leases ----------------------------------------------------------------

cli('tenant', 'create', '--name', "$tag-b", '--tier', 'pro',
    '--daily-cap-usd', '1');
my ($b) = db()->selectrow_array('SELECT tenant_id FROM llm.tenants '
                                . 'WHERE name = ?', undef, "$tag-b");

my $at = '2026-11-29 12:00+00';

# the gateway typed: four untyped parameters would fit sql/007's
# take_lease(tenant, key, gateway, want) as well
sub lease {
    my ($tenant, $gw, $want, $when) = @_;
    return db()->selectrow_hashref(
        'SELECT * FROM llm.take_lease(?, ?::text, ?, ?)', undef, $tenant, $gw,
        $want, $when // $at);
}

my @got = map { lease($b, 'g1', 300_000_000_000)->{granted_pusd} } 1 .. 5;
is_deeply(\@got, [ 3e11, 3e11, 3e11, 1e11, 0 ],
          'leases of $0.30 from a $1 cap: 3 whole, the rest, then nothing');

my $l = lease($b, 'g2', 1);
is_deeply([ @$l{qw(granted_pusd remaining_pusd)} ], [ 0, 0 ],
          'another gateway gets nothing either');
like($l->{resets_at}, qr/^2026-11-30 00:00:00\+00/,
     'and learns when the day begins again (UTC)');

is(lease($b, 'g1', 5, '2026-11-30 00:00+00')->{granted_pusd}, 5,
   'the next day has its whole cap again');

# --- concurrency: 8 clients, one cap, no more -----------------------------

cli('tenant', 'create', '--name', "$tag-c", '--tier', 'pro',
    '--daily-cap-usd', '10');
my ($c) = db()->selectrow_array('SELECT tenant_id FROM llm.tenants '
                                . 'WHERE name = ?', undef, "$tag-c");

my @kids;
for my $k (1 .. 8) {
    my $pid = fork();
    die "fork: $!" unless defined $pid;

    if ($pid == 0) {
        my $dbh = DBI->connect("dbi:Pg:dbname=llmgw;host=127.0.0.1;"
                               . "port=$s->{LLMGW_PG_PORT}", 'llmgw', '',
                               { RaiseError => 1, AutoCommit => 1,
                                 PrintWarn => 0 });
        my $n = 0;
        for (1 .. 10000) {
            my ($g) = $dbh->selectrow_array(
                'SELECT granted_pusd FROM llm.take_lease(?, ?::text, ?, ?)',
                undef, $c, "gw$k", 12_345_678_901, $at);
            last if $g == 0;
            $n++;
        }
        $dbh->disconnect();

        # not exit(): the parent's handles would be closed with it
        POSIX::_exit(0);
    }

    push(@kids, $pid);
}

waitpid($_, 0) for @kids;

my ($sum, $gws) = db()->selectrow_array(
    'SELECT sum(leased_pusd), count(*) FROM llm.budget_leases '
    . 'WHERE tenant_id = ?', undef, $c);
is($sum, 10_000_000_000_000, '8 gateways leasing at once: $10 exactly, '
   . 'not a pico-dollar more');
is($gws, 8, '  in 8 leases');
is(db()->selectrow_array(
       "SELECT leased_pusd FROM llm.budget_periods WHERE tenant_id = ? "
       . "AND period = 'day'", undef, $c),
   10_000_000_000_000, '  and the period says so');

# --- time zones and months --------------------------------------------------

cli('tenant', 'create', '--name', "$tag-d", '--tier', 'pro',
    '--daily-cap-usd', '5', '--monthly-cap-usd', '7',
    '--time-zone', 'Pacific/Auckland');
my ($d) = db()->selectrow_array('SELECT tenant_id FROM llm.tenants '
                                . 'WHERE name = ?', undef, "$tag-d");

# 2026-11-28 12:00 UTC is 2026-11-29 01:00 in Auckland (NZDT, +13)
$l = lease($d, 'g1', 4e12, '2026-11-28 12:00+00');
is($l->{granted_pusd}, 4e12, 'Auckland: $4 of the day');
like($l->{resets_at}, qr/^2026-11-29 11:00:00\+00/,
     '  whose day ends at 11:00 UTC');
is(db()->selectrow_array(
       "SELECT start FROM llm.budget_periods WHERE tenant_id = ? "
       . "AND period = 'day'", undef, $d),
   '2026-11-29', '  the day is Auckland\'s');

$l = lease($d, 'g1', 4e12, '2026-11-29 12:00+00');
is($l->{granted_pusd}, 3e12, 'the next day: what the $7 month leaves');
like($l->{resets_at}, qr/^2026-11-30 11:00:00\+00/,
     '  and the month binds: Auckland\'s December begins at 11:00 UTC');

# --- the soft threshold: a notification, once ------------------------------

cli('tenant', 'create', '--name', "$tag-e", '--tier', 'pro',
    '--daily-cap-usd', '1');
my ($e) = db()->selectrow_array('SELECT tenant_id FROM llm.tenants '
                                . 'WHERE name = ?', undef, "$tag-e");

my $listen = DBI->connect("dbi:Pg:dbname=llmgw;host=127.0.0.1;"
                          . "port=$s->{LLMGW_PG_PORT}", 'llmgw', '',
                          { RaiseError => 1, AutoCommit => 1 });
$listen->do('LISTEN llmgw_budget');

# the channel is every tenant's, those of the files run beside this one
# too: this tenant's notifications
my @n;
my $mine = sub { grep { ($_->[2] // '') =~ /"tenant" : "\Q$tag-e\E"/ } @n };

lease($e, 'g1', 7e11);
while (my $n = $listen->pg_notifies()) { push(@n, $n) }
is(scalar($mine->()), 0, '70 % leased: no notification');

lease($e, 'g1', 2e11);
lease($e, 'g2', 1e10);
# this tenant's notification, when it comes (a busy machine: seconds),
# and a second one would come with it
for (1 .. 100 * time_scale()) {
    while (my $n = $listen->pg_notifies()) { push(@n, $n) }
    last if $mine->();
    sleep(0.05);
}
sleep(0.2);
while (my $n = $listen->pg_notifies()) { push(@n, $n) }
@n = $mine->();
is(scalar(@n), 1, 'past 80 %: one notification');
like($n[0][2] // '', qr/"tenant" : "\Q$tag-e\E".*"period" : "day"/,
     '  naming the tenant and the period');

done_testing();
