#!/usr/bin/perl

# Hard spend caps per API key (sql/007): set exactly from the command line,
# leased together with the tenant's caps so that neither is ever passed,
# however many lease at once, and unused leases given back.

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

sub connect_db {
    return DBI->connect("dbi:Pg:dbname=llmgw;host=127.0.0.1;"
                        . "port=$s->{LLMGW_PG_PORT}", 'llmgw', '',
                        { RaiseError => 1, AutoCommit => 1, PrintError => 0,
                          PrintWarn => 0 });
}

my $tag = "kcaps$$";
my $n = 0;

# a tenant of its own: its id
sub tenant {
    my $name = "$tag-" . ++$n;
    my ($out, $rc) = cli('tenant', 'create', '--name', $name, '--tier', 'pro',
                         @_);
    die "tenant create: $out" if $rc;
    return db()->selectrow_array(
        'SELECT tenant_id FROM llm.tenants WHERE name = ?', undef, $name);
}

# a key of a tenant (by id): its id and prefix
sub key {
    my ($tenant, @args) = @_;
    my $name = db()->selectrow_array(
        'SELECT name FROM llm.tenants WHERE tenant_id = ?', undef, $tenant);
    my ($out, $rc) = cli('key', 'create', '--tenant', $name, @args);
    die "key create: $out" if $rc;
    my ($id, $prefix) = $out =~ /^key_id (\d+), .* prefix (\S+),/m;
    return wantarray ? ($id, $prefix) : $id;
}

sub key_caps {
    return db()->selectrow_hashref(
        'SELECT daily_cap_pusd, monthly_cap_pusd FROM llm.api_keys'
        . ' WHERE key_id = ?', undef, $_[0]);
}

my $at = '2026-11-29 12:00+00';

# times in UTC, whatever the session's zone
sub lease {
    my ($tenant, $key, $gw, $want, $when) = @_;
    return db()->selectrow_hashref(q{
        SELECT granted_pusd, remaining_pusd,
               to_char(resets_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI')
                   AS resets_at,
               to_char(lease_until AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI')
                   AS lease_until
          FROM llm.take_lease(?::bigint, ?::bigint, ?::text, ?::bigint,
                              ?::timestamptz)},
        undef, $tenant, $key, $gw, $want, $when // $at);
}

sub give_back {
    my ($tenant, $key, $gw, $amount, $until, $when) = @_;
    return db()->selectrow_array(
        'SELECT llm.return_lease(?::bigint, ?::bigint, ?::text, ?::bigint,'
        . ' ?::timestamptz, ?::timestamptz)', undef, $tenant, $key, $gw,
        $amount, $until, $when // $at);
}

# what budget_periods says is leased: the day's (or month's) row
sub leased {
    my ($tenant, $key, $period, $start) = @_;
    return db()->selectrow_array(
        'SELECT leased_pusd FROM llm.budget_periods WHERE tenant_id = ?'
        . ' AND key_id = ? AND period = ? AND start = ?', undef, $tenant,
        $key, $period // 'day', $start // '2026-11-29');
}

# the SQLSTATE of a statement that fails, '' if it does not
sub fails {
    my ($sql, @bind) = @_;
    my $dbh = db();
    return eval { $dbh->do($sql, undef, @bind); 1 } ? '' : $dbh->state;
}

# --- the command line: dollars to pico-dollars, exactly --------------------

my $ta = tenant();
my ($ka, $pa) = key($ta, '--daily-cap-usd', '1.000000000001',
                    '--monthly-cap-usd', '30');
is_deeply(key_caps($ka), { daily_cap_pusd => 1_000_000_000_001,
                           monthly_cap_pusd => 30_000_000_000_000 },
          'key create --daily-cap-usd --monthly-cap-usd: pico-dollars');
is_deeply(key_caps(key($ta)), { daily_cap_pusd => undef,
                               monthly_cap_pusd => undef },
          'a key created without: no caps');

my $listen = connect_db();
$listen->do('LISTEN llmgw_keys');

for my $c ([ [ $ka, '--daily-cap-usd', '0.5' ],
             { daily_cap_pusd => 500_000_000_000,
               monthly_cap_pusd => 30_000_000_000_000 },
             'by id: a new daily cap, the monthly one kept' ],
           [ [ $pa, '--monthly-cap-usd', 'none' ],
             { daily_cap_pusd => 500_000_000_000, monthly_cap_pusd => undef },
             'by prefix: "none" removes a cap' ],
           [ [ $ka, '--daily-cap-usd', '0', '--monthly-cap-usd',
               '9223372.036854775807' ],
             { daily_cap_pusd => 0,
               monthly_cap_pusd => 9_223_372_036_854_775_807 },
             'both at once: 0 stops all spending; the most a bigint holds' ],
           [ [ $ka, '--daily-cap-usd', 'none', '--monthly-cap-usd', 'none' ],
             { daily_cap_pusd => undef, monthly_cap_pusd => undef },
             'no caps again' ])
{
    my ($args, $want, $name) = @$c;
    my ($out, $rc) = cli('key', 'update', @$args);
    is($rc, 0, "key update: $name") or diag($out);
    is_deeply(key_caps($ka), $want, '  stored');
}

sleep(0.2);
my @notes;
while (my $note = $listen->pg_notifies()) { push(@notes, $note) }
ok(scalar(@notes) >= 1, 'a cap changed notifies llmgw_keys');
$listen->disconnect();

my ($out, $rc) = cli('key', 'update', $ka, '--daily-cap-usd', '2.5');
like($out,
     qr/^key_id $ka, tenant \Q$tag\E-1, daily cap 2\.50*, monthly cap -$/m,
     'key update says what the caps are now');

for my $bad ('-1', '1e3', '12.', '.5', '0.0000000000001', '12345678',
             'twelve', '1,5', 'None')
{
    ($out, $rc) = cli('key', 'update', $ka, '--daily-cap-usd', $bad);
    isnt($rc, 0, "--daily-cap-usd $bad is refused");
}

like($out, qr/dollars, such as 12\.50/, '  saying what it takes');
is(key_caps($ka)->{daily_cap_pusd}, 2_500_000_000_000, '  and changes nothing');

($out, $rc) = cli('key', 'create', '--tenant', "$tag-1",
                  '--monthly-cap-usd', 'lots');
isnt($rc, 0, 'key create --monthly-cap-usd lots is refused');
unlike($out, qr/llmgw_/, '  and makes no key');

($out, $rc) = cli('key', 'update', $ka);
is($rc, 2, 'key update without a cap is a usage error');
like($out, qr/usage: accountd key update ID\|PREFIX/, '  saying so');

($out, $rc) = cli('key', 'update', '999999999', '--daily-cap-usd', '1');
is($rc, 1, 'key update of no key fails');
like($out, qr/no key with id 999999999/, '  saying so');

($out) = cli('key', 'list', '--tenant', "$tag-1");
like($out, qr/^\Q$ka\E\s+\Q$tag\E-1\s+pro\s+\Q$pa\E\s+2\.50*\s+-\s+\d{4}-/m,
     'key list shows the caps');
like($out, qr/^id\s+tenant\s+tier\s+prefix\s+daily_cap_usd\s+monthly_cap_usd\s/,
     '  under their heading');

# --- a key's cap, within its tenant's ------------------------------------

my $tb = tenant('--daily-cap-usd', '10');
my $kb = key($tb, '--daily-cap-usd', '1');

my @got = map { lease($tb, $kb, 'g1', 300_000_000_000)->{granted_pusd} } 1 .. 5;
is_deeply(\@got, [ 3e11, 3e11, 3e11, 1e11, 0 ],
          'leases of $0.30 from a key\'s $1 cap: 3 whole, the rest, nothing');

my $l = lease($tb, $kb, 'g2', 1);
is_deeply($l, { granted_pusd => 0, remaining_pusd => 0,
                resets_at => '2026-11-30 00:00',
                lease_until => '2026-11-30 00:00' },
          'another gateway gets nothing either, and learns when the day ends');

is(lease($tb, 0, 'g1', 5e11)->{granted_pusd}, 5e11,
   'the tenant, $9 left, still leases');
is(lease($tb, scalar(key($tb)), 'g1', 25e11)->{remaining_pusd}, 6e12,
   'and so does a key without a cap of its own, from the tenant\'s');
is_deeply([ leased($tb, 0), leased($tb, $kb) ], [ 4e12, 1e12 ],
          'the key\'s leases count against its tenant\'s cap');

is(lease($tb, $kb, 'g1', 5, '2026-11-30 00:00+00')->{granted_pusd}, 5,
   'the next day the key has its cap again');

# the tenant's cap binds when it is the lower
my $c = tenant('--daily-cap-usd', '2');
my $kc1 = key($c, '--daily-cap-usd', '5');
my $kc2 = key($c);

$l = lease($c, $kc1, 'g1', 15e11);
is_deeply([ @$l{qw(granted_pusd remaining_pusd)} ], [ 15e11, 5e11 ],
          'a key with $5 under a tenant with $2: $0.50 left after $1.50');
is(lease($c, $kc2, 'g1', 1e12)->{granted_pusd}, 5e11,
   'the tenant\'s other key gets what the tenant has left');
is_deeply([ @{ lease($c, $kc1, 'g1', 1) }{qw(granted_pusd remaining_pusd)} ],
          [ 0, 0 ], 'and then the first gets nothing, its own cap unspent');
is_deeply([ leased($c, 0), leased($c, $kc1), leased($c, $kc2) ],
          [ 2e12, 15e11, 5e11 ], '  the periods say so');

# a key of another tenant, or none, is refused
is(fails('SELECT llm.take_lease(?::bigint, ?::bigint, ?::text, ?::bigint)',
         $tb, $kc1, 'g1', 1), '23503',
   'a lease for a key of another tenant is refused (foreign_key_violation)');
is(fails('SELECT llm.take_lease(?::bigint, ?::bigint, ?::text, ?::bigint)',
         $tb, 999_999_999, 'g1', 1), '23503', '  and for no key');
is(fails('SELECT llm.take_lease(?::bigint, ?::bigint, ?::text, ?::bigint)',
         $tb, -1, 'g1', 1), '22023', '  and for key -1');
is(fails('SELECT llm.take_lease(?::bigint, ?::bigint, ?::text, ?::bigint)',
         $tb, $kb, 'g1', -1), '22023', 'a lease of less than nothing too');
is(fails('SELECT llm.return_lease(?::bigint, ?::bigint, ?::text, ?::bigint,'
         . ' ?::timestamptz)', $tb, $kc1, 'g1', 1, '2099-01-01'), '23503',
   'as is a return for a key of another tenant');
is(leased($c, $kc1), 15e11, '  which changes nothing');

# --- concurrency: clients at once on one key, and on two keys --------------

# Each child leases until it is refused; with $return, it also gives back
# part of every third grant.  It exits 1 on any error (a deadlock, say).
sub clients {
    my ($when, $return, @who) = @_;
    my @kids;

    for my $i (0 .. $#who) {
        my ($tenant, $key) = @{ $who[$i] };
        my $pid = fork();
        die "fork: $!" unless defined $pid;

        if ($pid == 0) {
            my $ok = eval {
                my $dbh = connect_db();
                for my $j (1 .. 10000) {
                    my ($g) = $dbh->selectrow_array(
                        'SELECT granted_pusd FROM llm.take_lease(?::bigint,'
                        . ' ?::bigint, ?::text, ?::bigint, ?::timestamptz)',
                        undef, $tenant, $key, "gw$i", 12_345_678_901, $when);
                    last if $g == 0;
                    next unless $return && $j % 3 == 0;
                    $dbh->selectrow_array(
                        'SELECT llm.return_lease(?::bigint, ?::bigint,'
                        . ' ?::text, ?::bigint, ?::timestamptz,'
                        . ' ?::timestamptz)', undef, $tenant, $key, "gw$i",
                        int($g / 2) + 1, '2099-01-01', $when);
                }
                $dbh->disconnect();
                1;
            };

            # not exit(): the parent's handles would be closed with it
            POSIX::_exit($ok ? 0 : 1);
        }

        push(@kids, $pid);
    }

    my $failed = 0;
    for (@kids) {
        waitpid($_, 0);
        $failed++ if $?;
    }

    return $failed;
}

# the leases held per key, from budget_leases
sub held {
    my ($tenant, $start) = @_;
    my %h = map { @$_ } @{ db()->selectall_arrayref(
        'SELECT key_id, sum(leased_pusd) FROM llm.budget_leases'
        . ' WHERE tenant_id = ? AND start = ? GROUP BY key_id', undef,
        $tenant, $start) };
    return \%h;
}

my $d = tenant();
my $kd = key($d, '--daily-cap-usd', '2');

is(clients($at, 0, map { [ $d, $kd ] } 1 .. 6), 0,
   '6 clients leasing on one key at once, no error');
is_deeply([ leased($d, $kd), held($d, '2026-11-29')->{$kd} ],
          [ 2e12, 2e12 ], '  $2, its cap, exactly: not a pico-dollar more');

my $e = tenant('--daily-cap-usd', '5');
my $ke1 = key($e, '--daily-cap-usd', '3');
my $ke2 = key($e, '--daily-cap-usd', '3');

is(clients($at, 0, (map { [ $e, $ke1 ] } 1 .. 4),
           (map { [ $e, $ke2 ] } 1 .. 4)), 0,
   '8 clients on two $3 keys of a $5 tenant, no error');
my ($e1, $e2) = (leased($e, $ke1), leased($e, $ke2));
ok($e1 <= 3e12 && $e2 <= 3e12, "  neither key past its cap ($e1, $e2)");
is($e1 + $e2, 5e12, '  and the tenant\'s $5 all leased, no more');
is(leased($e, 0), 5e12, '  the tenant\'s period says so');

# another day: leases and returns mixed, locks taken in one order
my $next = '2026-11-30 12:00+00';

is(clients($next, 1, (map { [ $e, $ke1 ] } 1 .. 3),
           (map { [ $e, $ke2 ] } 1 .. 3), (map { [ $e, 0 ] } 1 .. 2)), 0,
   'leases and returns at once, on two keys and the tenant: no deadlock');
my $h = held($e, '2026-11-30');
my ($t0, $t1, $t2) = map { leased($e, $_, 'day', '2026-11-30') } 0, $ke1, $ke2;
ok($t0 <= 5e12 && $t1 <= 3e12 && $t2 <= 3e12,
   "  no cap passed ($t0, $t1, $t2)");
is_deeply([ $t1, $t2, $t0 ],
          [ $h->{$ke1}, $h->{$ke2}, $h->{0} + $h->{$ke1} + $h->{$ke2} ],
          '  and the periods are the sums of what the gateways hold');

# --- lease_until: the day with a daily cap, the month with only a monthly --

my $f = tenant('--time-zone', 'America/New_York');
my $g = tenant('--time-zone', 'America/New_York', '--daily-cap-usd', '100');
my $g2 = tenant('--time-zone', 'America/New_York', '--monthly-cap-usd', '100');

# 2026-11-30 03:00 UTC is 2026-11-29 22:00 in New York (EST, -5)
my $ny = '2026-11-30 03:00+00';

for my $c ([ $f, [ '--daily-cap-usd', '1' ], '2026-11-30 05:00',
             '2026-11-30 05:00', 'a daily cap: its day\'s end, New York\'s' ],
           [ $f, [ '--monthly-cap-usd', '1' ], '2026-12-01 05:00',
             '2026-12-01 05:00', 'only a monthly cap: the month\'s end' ],
           [ $f, [], '2026-11-30 05:00', '2026-11-30 05:00',
             'no cap at all: the day\'s end' ],
           [ $g, [ '--monthly-cap-usd', '1' ], '2026-12-01 05:00',
             '2026-11-30 05:00', 'the tenant\'s daily cap, the key\'s monthly '
             . 'one binding: the day\'s end, the month resets' ],
           [ $g2, [ '--daily-cap-usd', '50' ], '2026-11-30 05:00',
             '2026-11-30 05:00', 'the key\'s daily cap, the tenant\'s monthly '
             . 'one: the day\'s end' ],
           [ $g2, undef, '2026-12-01 05:00', '2026-12-01 05:00',
             'the tenant alone, with a monthly cap: the month\'s end' ])
{
    my ($tenant, $args, $resets, $until, $name) = @$c;
    my $key = defined $args ? key($tenant, @$args) : 0;
    $l = lease($tenant, $key, 'g1', 1000, $ny);
    is_deeply([ @$l{qw(granted_pusd resets_at lease_until)} ],
              [ 1000, $resets, $until ], $name);
}

is(lease($f, 0, 'g1', 1000, $ny)->{remaining_pusd}, undef,
   'no cap: nothing "remains"');
is(db()->selectrow_array(
       q{SELECT start FROM llm.budget_periods WHERE tenant_id = ? AND key_id > 0
          AND period = 'day' LIMIT 1}, undef, $f),
   '2026-11-29', 'a key\'s day is its tenant\'s');

# --- giving back -----------------------------------------------------------

my $r = tenant('--daily-cap-usd', '1');
my $kr = key($r, '--daily-cap-usd', '0.5');
my $until = '2026-11-30 00:00+00';

lease($r, $kr, 'g1', 5e11);
is(lease($r, $kr, 'g1', 1)->{granted_pusd}, 0, 'a key\'s $0.50, all leased');
is(give_back($r, $kr, 'g1', 2e11, $until), 2e11, '$0.20 given back');
is_deeply([ leased($r, 0), leased($r, $kr) ], [ 3e11, 3e11 ],
          '  to the key\'s day and its tenant\'s');
is_deeply(db()->selectrow_arrayref(
              'SELECT leased_pusd, returned_pusd FROM llm.budget_leases'
              . ' WHERE tenant_id = ? AND key_id = ? AND gateway = ?', undef,
              $r, $kr, 'g1'),
          [ 3e11, 2e11 ], '  the gateway holds $0.30, gave back $0.20');
is(lease($r, $kr, 'g2', 5e11)->{granted_pusd}, 2e11,
   'another gateway leases it again');
is(give_back($r, $kr, 'g2', 1e12, $until), 2e11,
   'what a gateway gives back is at most what it leased today');
is(give_back($r, $kr, 'g1', 5e11, $until), 3e11, '  (the other\'s too)');
is(give_back($r, $kr, 'g1', 1, $until), 0, '  and then nothing');
is_deeply([ leased($r, 0), leased($r, $kr) ], [ 0, 0 ],
          'all given back: nothing leased, nothing below 0');

lease($r, $kr, 'g1', 1e11);
is(give_back($r, $kr, 'g1', 1e11, $until, $until), 0,
   'a return when its lease_until has come: 0');
is(give_back($r, $kr, 'g1', 1e11, $until, '2026-11-30 06:00+00'), 0,
   '  or has passed');
is(leased($r, $kr), 1e11, '  and the period it was of keeps it');
is(give_back($r, $kr, 'g1', 0, $until), 0, 'a return of 0: 0');
is(fails('SELECT llm.return_lease(?::bigint, ?::bigint, ?::text, ?::bigint,'
         . ' ?::timestamptz)', $r, $kr, 'g1', -1, $until), '22023',
   'a return of less than nothing is refused');

# an operator's reset of a period: a return never takes it below 0
lease($r, $kr, 'g1', 2e11);
db()->do(q{UPDATE llm.budget_periods SET leased_pusd = 1e11
            WHERE tenant_id = ? AND period = 'day'}, undef, $r);
is(give_back($r, $kr, 'g1', 3e11, $until), 1e11,
   'a period leased less than the gateway holds: only what it has');
is_deeply([ leased($r, 0), leased($r, $kr) ], [ 0, 0 ], '  and then 0');

# the tenant's own leases come back the same way
my $q = tenant('--daily-cap-usd', '1');
lease($q, 0, 'g1', 1e12);
is(give_back($q, 0, 'g1', 4e11, $until), 4e11, 'a tenant\'s lease given back');
is(lease($q, 0, 'g2', 1e12)->{granted_pusd}, 4e11, '  and leased again');

# only what was leased today: a month's lease from yesterday stays
my $m = tenant('--monthly-cap-usd', '1');
lease($m, 0, 'g1', 6e11, '2026-11-28 12:00+00');
is(give_back($m, 0, 'g1', 6e11, '2026-12-01 00:00+00'), 0,
   'a lease of yesterday, still spendable: not given back today');
is(leased($m, 0, 'month', '2026-11-01'), 6e11, '  the month keeps it');

# --- 005's call, and the soft threshold of a key --------------------------

# a day long past, apart from those of the calls at now()
my $o = tenant('--daily-cap-usd', '1');
my $old = db()->selectrow_hashref(
    'SELECT * FROM llm.take_lease(?, ?::text, ?, ?)', undef, $o, 'g1', 3e11,
    '2026-01-15 12:00+00');
is_deeply([ sort keys %$old ], [ qw(granted_pusd remaining_pusd resets_at) ],
          'the 4-argument take_lease returns its 3 columns');
is_deeply([ @$old{qw(granted_pusd remaining_pusd)} ], [ 3e11, 7e11 ],
          '  and leases the tenant\'s cap');
is(db()->selectrow_array(
       'SELECT granted_pusd FROM llm.take_lease(?::bigint, ?::text,'
       . ' ?::bigint)', undef, $o, 'g1', 1e11), 1e11,
   '  with three typed arguments too');
is(db()->selectrow_array(
       'SELECT granted_pusd FROM llm.take_lease(?, ?, ?)', undef, $o, 'g1',
       1e11), 1e11, '  and three untyped');
is(leased($o, 0, 'day', '2026-01-15'), 3e11, '  in key 0\'s rows');

my $w = tenant();
my $kw = key($w, '--daily-cap-usd', '1');
my $budget = connect_db();
$budget->do('LISTEN llmgw_budget');

lease($w, $kw, 'g1', 7e11);
lease($w, $kw, 'g1', 2e11);
lease($w, $kw, 'g2', 1e10);
# the channel is every tenant's, those of the files run beside this one
# too: this key's notification, when it comes (a busy machine: seconds),
# and a second one would come with it
@notes = ();
my $mine = sub { grep { ($_->[2] // '') =~ /"key_id" : $kw\b/ } @notes };
for (1 .. 100 * time_scale()) {
    while (my $note = $budget->pg_notifies()) { push(@notes, $note) }
    last if $mine->();
    sleep(0.05);
}
sleep(0.2);
while (my $note = $budget->pg_notifies()) { push(@notes, $note) }
@notes = $mine->();
is(scalar(@notes), 1, 'a key past 80 % of its daily cap: one notification');
like($notes[0][2] // '', qr/"key_id" : $kw\b.*"period" : "day"/,
     '  naming the key and the period');
$budget->disconnect();

# --- today, per key ---------------------------------------------------------

my $v = tenant('--daily-cap-usd', '10');
my $vname = db()->selectrow_array(
    'SELECT name FROM llm.tenants WHERE tenant_id = ?', undef, $v);
my ($kv, $pv) = key($v, '--daily-cap-usd', '1', '--monthly-cap-usd', '20');
my $kv2 = key($v);
my $model = "$tag-model";

db()->do(q{INSERT INTO llm.prices (model, effective_from, input_per_mtok,
               output_per_mtok, cached_input_per_mtok, cache_write_per_mtok)
           VALUES (?, '2000-01-01', 1000000, 1000000, 1000000, 1000000)},
         undef, $model);
for my $u ([ $kv, 1000 ], [ $kv, 500 ], [ $kv2, 7000 ]) {
    db()->do(q{INSERT INTO llm.usage (request_id, tenant_id, key_id, model,
                   api, input_tokens, output_tokens, ts)
               VALUES (?, ?, ?, ?, 'openai', ?, 0, now())}, undef,
             "$tag-" . ++$n, $v, $u->[0], $model, $u->[1]);
}

db()->selectrow_array(
    'SELECT granted_pusd FROM llm.take_lease(?::bigint, ?::bigint, ?::text,'
    . ' ?::bigint)', undef, $v, $kv, 'g1', 25e10);
db()->selectrow_array(
    'SELECT granted_pusd FROM llm.take_lease(?::bigint, ?::bigint, ?::text,'
    . ' ?::bigint)', undef, $v, 0, 'g1', 1e11);

my $today = db()->selectall_arrayref(q{
    SELECT key_id, prefix, tenant, daily_cap_usd::text,
           monthly_cap_usd::text, leased_usd::text, spent_usd::text
      FROM llm.key_budget_today WHERE tenant_id = ?}, undef, $v);
is_deeply($today, [ [ $kv, $pv, $vname, '1.000000000000',
                      '20.000000000000', '0.250000000000',
                      '0.001500000000' ] ],
          'key_budget_today: a capped key\'s caps, leases and spend today')
    or diag(explain($today));
is_deeply(db()->selectall_arrayref(q{
              SELECT daily_cap_usd::text, leased_usd::text
                FROM llm.budget_today WHERE tenant_id = ?}, undef, $v),
          [ [ '10.000000000000', '0.350000000000' ] ],
          'budget_today: one row for the tenant, its keys\' leases counted');


# --- the upgrade of a database of 006 ---------------------------------------

my $scratch = "llmgw_t061_$$";
my $url = "postgresql://llmgw\@127.0.0.1:$s->{LLMGW_PG_PORT}/$scratch";

db()->do("DROP DATABASE IF EXISTS $scratch");
db()->do("CREATE DATABASE $scratch");

is(migrate('001_schema', '002_key_lifecycle', '003_metering', '004_billing',
           '005_caps', '006_shares'), '', 'a scratch database at 006');

my $sdb = DBI->connect("dbi:Pg:dbname=$scratch;host=127.0.0.1;"
                       . "port=$s->{LLMGW_PG_PORT}", 'llmgw', '',
                       { RaiseError => 1, AutoCommit => 1, PrintError => 0,
                         PrintWarn => 0 });
$sdb->do(q{INSERT INTO llm.tenants (name, tier, daily_cap_pusd)
           VALUES ('acme', 'pro', 1000000000000)});
$sdb->do(q{INSERT INTO llm.api_keys (tenant_id, key_hash, display_prefix,
               tier) VALUES (1, decode(repeat('ab', 32), 'hex'),
                             'llmgw_live_Ab3x', 'pro')});
$sdb->selectrow_array(q{SELECT * FROM llm.take_lease(1, 'g1', 400000000000,
                                                     '2026-11-29 12:00+00')});
$sdb->disconnect();

is(migrate('007_key_caps'), '', '007 applies to it');

$sdb = DBI->connect("dbi:Pg:dbname=$scratch;host=127.0.0.1;"
                    . "port=$s->{LLMGW_PG_PORT}", 'llmgw', '',
                    { RaiseError => 1, AutoCommit => 1, PrintError => 0,
                      PrintWarn => 0 });
is_deeply($sdb->selectall_arrayref(q{
              SELECT key_id, period, leased_pusd FROM llm.budget_periods
               ORDER BY period}),
          [ [ 0, 'day', 4e11 ], [ 0, 'month', 4e11 ] ],
          'the tenant\'s periods are key 0\'s, their leases kept');
is_deeply($sdb->selectall_arrayref(q{
              SELECT key_id, leased_pusd, returned_pusd
                FROM llm.budget_leases}),
          [ [ 0, 4e11, 0 ] ], 'and so is its lease');
$sdb->do('UPDATE llm.api_keys SET daily_cap_pusd = 700000000000');
is($sdb->selectrow_array(q{
       SELECT granted_pusd FROM llm.take_lease(1::bigint, 1::bigint, 'g1',
                                               1000000000000::bigint,
                                               '2026-11-29 13:00+00')}),
   6e11, 'a key lease after it: what the tenant\'s cap has left');
$sdb->disconnect();

db()->do("DROP DATABASE $scratch");

done_testing();


# Applies sql/NAME.sql to the scratch database as scripts/stack does;
# returns what psql said on failure.
sub migrate {
    my $out = '';
    for my $m (@_) {
        my $f = "$FindBin::Bin/../sql/$m.sql";
        my $o = `psql '$url' -q -v ON_ERROR_STOP=1 -1 -f '$f' 2>&1`;
        $out .= $o if $?;
    }
    return $out;
}
