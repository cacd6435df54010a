#!/usr/bin/perl

# Billing (sql/004): llm.prices and the exact cost of every llm.usage row,
# the ledger partitioned by month, the views finance reads against figures
# worked out by hand, and a reporting role per tenant that row-level
# security confines to its own rows, N x N.  The rows of 2024 are history
# brought in by the maintenance path, a superuser's INSERT, received when
# they happened; one row of today comes through accountd itself.  Last,
# 001..003 are applied to a scratch database with rows, then 004 and the
# later ones: the upgrade, up to the append-only ledger (sql/013..015).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use IO::Select;
use IO::Socket::UNIX;
use LLMGW;
use Socket qw(SOCK_STREAM);
use Test::More;
use Time::HiRes qw(time);

my $s = stack();
my $dbh = db();

$dbh->do(q{SET TIME ZONE 'UTC'});

# unique across runs and across tests sharing the database
my $tag = sprintf 't058-%d-%d', $$, time % 1000000;

my %tenant = map { $_ => new_tenant(tier => 'pro') } qw(A B C);
my @ids = map { $tenant{$_}{id} } qw(A B C);

sub model { "$tag-$_[0]" }


# --- the migration -----------------------------------------------------------

is($dbh->selectrow_array(q{SELECT count(*) FROM public.llmgw_migrations
                            WHERE version = '004_billing'}), 1,
   '004_billing is applied');

is_deeply($dbh->selectrow_arrayref(q{
    SELECT c.relkind::text, pg_get_partkeydef(c.oid),
           p.partdefid::regclass::text,
           (SELECT count(*) FROM pg_constraint k
             WHERE k.conrelid = c.oid AND k.contype IN ('p', 'u', 'f')),
           (SELECT pg_get_constraintdef(k.oid) FROM pg_constraint k
             WHERE k.conrelid = 'llm.usage_request_ids'::regclass
               AND k.contype = 'p')
      FROM pg_class c
      JOIN pg_partitioned_table p ON p.partrelid = c.oid
     WHERE c.oid = 'llm.usage'::regclass}),
    [ 'p', 'RANGE (ts)', 'llm.usage_default', 0, 'PRIMARY KEY (request_id)' ],
    'llm.usage is partitioned by range of ts, has a default partition, '
    . 'no key of its own: llm.usage_request_ids has each request_id once');

is($dbh->selectrow_array(q{
    SELECT count(*) FROM generate_series(0, 3) AS i
     WHERE to_regclass('llm.usage_' || to_char(now() AT TIME ZONE 'UTC'
                                               + i * interval '1 month',
                                               'YYYY_MM')) IS NOT NULL}),
   4, 'the partitions of this month and the next three exist');

# the months of this test's rows
$dbh->selectrow_array(q{SELECT llm.create_usage_partition('2024-02-01'),
                               llm.create_usage_partition('2024-03-17')});
is_deeply($dbh->selectcol_arrayref(q{
    SELECT pg_get_expr(relpartbound, oid) FROM pg_class
     WHERE oid IN ('llm.usage_2024_02'::regclass, 'llm.usage_2024_03'::regclass)
     ORDER BY relname}),
    [ q{FOR VALUES FROM ('2024-02-01 00:00:00+00') TO ('2024-03-01 00:00:00+00')},
      q{FOR VALUES FROM ('2024-03-01 00:00:00+00') TO ('2024-04-01 00:00:00+00')} ],
    'llm.create_usage_partition makes a month of UTC');
is($dbh->selectrow_array(q{SELECT llm.create_usage_partition('2024-03-01')}),
   undef, 'and nothing when it exists');


# --- prices ------------------------------------------------------------------

# micro-dollars per million tokens; undef: the input price
my @prices = (
    # model    effective_from            input      output   cached  write
    [ 'alpha', '2024-01-01 00:00:00+00', 2_500_000, 10_000_000, 1_250_000,
                                                                3_125_000 ],
    [ 'alpha', '2024-03-01 00:00:00+00', 3_000_000, 12_000_000, undef, undef ],
    [ 'beta',  '2024-01-01 00:00:00+00',   150_000,    600_000, 75_000, undef ],
    [ 'gamma', '2024-06-01 00:00:00+00', 1_000_000,  1_000_000, undef, undef ],
);

for my $p (@prices) {
    $dbh->do(q{INSERT INTO llm.prices (model, effective_from, input_per_mtok,
                   output_per_mtok, cached_input_per_mtok, cache_write_per_mtok)
               VALUES (?, ?, ?, ?, ?, ?)}, undef, model($p->[0]), @$p[1 .. 5]);
}

is_deeply($dbh->selectall_arrayref(q{
    SELECT substr(model, length(?) + 2), to_char(effective_from
               AT TIME ZONE 'UTC', 'YYYY-MM-DD'), input_per_mtok,
           output_per_mtok, cached_input_per_mtok, cache_write_per_mtok
      FROM llm.prices WHERE model LIKE ? || '-%'
     ORDER BY 1, 2}, undef, $tag, $tag),
    [ [ 'alpha', '2024-01-01', 2500000, 10000000, 1250000, 3125000 ],
      [ 'alpha', '2024-03-01', 3000000, 12000000, 3000000, 3000000 ],
      [ 'beta',  '2024-01-01',  150000,   600000,   75000,  150000 ],
      [ 'gamma', '2024-06-01', 1000000,  1000000, 1000000, 1000000 ] ],
    'a cache price left out is the input price, stored');

for my $bad ([ 'a negative price', -1 ],
             [ 'a price above 1e10', 10_000_000_001 ])
{
    ok(!eval {
        $dbh->do(q{INSERT INTO llm.prices (model, effective_from,
                       input_per_mtok, output_per_mtok)
                   VALUES (?, now(), 1, ?)}, undef, model('bad'), $bad->[1]);
    }, "$bad->[0] is refused");
}


# --- usage rows and their cost -----------------------------------------------

# The cost in pico-dollars, by hand: uncached input (input - cached -
# write, never below 0) x input price + cached x cached price + write x
# write price + output x output price.  Row a6 comes through accountd.
my @rows = (
  # id    tenant model    ts (UTC)                   input  output cached write reasoning flags  cost_pusd
  [ 'a1', 'A', 'alpha', '2024-02-10 12:00:00',        1,       1,     0,   0,    0,  0,            12_500_000 ],
  [ 'a2', 'A', 'alpha', '2024-02-29 23:59:59.999', 2000,    1500,   128,  64,  300,  0,        19_880_000_000 ],
  [ 'a3', 'A', 'alpha', '2024-03-01 00:00:00',     1000,      50,   200,   0,    0,  1,         3_600_000_000 ],
  [ 'a4', 'A', 'beta',  '2024-03-01 08:00:00',       10,       1,     8,   2,    0,  3,             1_500_000 ],
  [ 'a5', 'A', 'none',  '2024-03-01 09:00:00',      100,     100,     0,   0,    0,  0,                 undef ],
  [ 'a6', 'A', 'beta',  '2024-03-15 10:00:00.123', 1_000_000, 2000, 400_000, 0, 0,  0,       121_200_000_000 ],
  [ 'b1', 'B', 'beta',  '2024-02-15 00:00:00', 100_000_000, 100_000_000, 0, 0, 0,  0,    75_000_000_000_000 ],
  [ 'b2', 'B', 'gamma', '2024-03-02 00:00:00',       50,       5,     0,   0,    0,  0,                 undef ],
  [ 'b3', 'B', 'alpha', '2024-03-31 23:59:59.999',    7,   undef, undef,   0,    0,  2,            21_000_000 ],
  [ 'c1', 'C', 'alpha', '2024-02-01 00:00:00',        3,       0,     0,   0,    0,  0,             7_500_000 ],
  [ 'c2', 'C', 'alpha', '2999-05-05 00:00:00',        1,       1,     0,   0,    0,  0,            15_000_000 ],
);

my %count;
$count{ $_->[1] }++ for @rows;

# history, received when it happened (usage_ts_sane); the database costs
# it, as it does accountd's rows
my $insert = q{
    INSERT INTO llm.usage (request_id, tenant_id, key_id, model, api,
        input_tokens, output_tokens, cached_input_tokens, cache_write_tokens,
        reasoning_tokens, reserved_tokens, finish_reason, status, flags, ts,
        received_at)
    VALUES (?, ?, NULL, ?, 'openai', ?, ?, ?, ?, ?, 100000000, 'stop', 200, ?,
            (? || '+00')::timestamptz, (? || '+00')::timestamptz)};

sub insert_row {
    my ($r) = @_;
    my ($id, $t, $m, $ts, @n) = @$r;
    return $dbh->do($insert, undef, "$tag-$id", $tenant{$t}{id}, model($m),
                    @n[0 .. 5], $ts, $ts);
}

for my $r (@rows) {
    insert_row($r);
}

# what a row may not be (sql/014)
for my $bad ([ 'cached and cache-write tokens beyond the input', 10, 1, 8, 3, 0,
               'usage_cache_within_input' ],
             [ 'reasoning beyond the output', 10, 5, 0, 0, 6,
               'usage_reasoning_within_output' ])
{
    my ($what, @n) = @$bad;
    my $check = pop @n;
    ok(!eval { insert_row([ "bad-$check", 'A', 'alpha', '2024-03-01 00:00:00',
                            @n, 0 ]) }
       && $dbh->state eq '23514' && $dbh->errstr =~ /\Q$check\E/,
       "$what: refused ($check)");
}

# a6's tokens again, today, through accountd (llm.ingest_batch): tenant D
# has no other row
my $d = new_tenant(tier => 'pro');
my ($a6) = grep { $_->[0] eq 'a6' } @rows;
my $d6_ms = (int(time()) - 60) * 1000 + 123;
my $ack = accountd_send(
    request_id => "$tag-d6", tenant_id => $d->{id}, model => model('beta'),
    input => $a6->[4], output => $a6->[5], cached => $a6->[6],
    cache_write => $a6->[7], reasoning => $a6->[8], flags => $a6->[9],
    ts_ms => $d6_ms);
is($ack, "$tag-d6 $tag-d6", 'accountd acknowledges a record and its replay');
is_deeply($dbh->selectrow_arrayref(q{
    SELECT cost_pusd, price_id = (SELECT price_id FROM llm.price_at(model, ts)),
           (extract(epoch FROM ts) * 1000)::bigint
      FROM llm.usage WHERE request_id = ?}, undef, "$tag-d6"),
    [ $a6->[10], 1, $d6_ms ],
    'the row accountd wrote costs the same, by the price it names, at its '
    . 'record\'s time');

my $got = $dbh->selectall_hashref(q{
    SELECT request_id, cost_pusd, tableoid::regclass::text AS part,
           to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.MS') AS ts
      FROM llm.usage WHERE tenant_id IN (?, ?, ?)}, 'request_id', undef, @ids);

is_deeply({ map { $_ => $got->{$_}{cost_pusd} } keys %$got },
          { map { ("$tag-$_->[0]" => $_->[10]) } @rows },
          'every row costs what was worked out by hand; unpriced ones NULL');

is($got->{"$tag-a6"}{ts}, '2024-03-15 10:00:00.123', 'to the millisecond');

is_deeply([ map { $got->{"$tag-$_"}{part} } qw(a1 a2 a3 b3 c2) ],
          [ qw(llm.usage_2024_02 llm.usage_2024_02 llm.usage_2024_03
               llm.usage_2024_03 llm.usage_default) ],
          'rows land in the partition of their UTC month, a month without '
          . 'one in the default partition');

# the issue's check: the price table applied to the tokens of every row,
# recomputed here without llm.usage_cost
my $recompute = q{
    SELECT count(*),
           count(*) FILTER (WHERE u.cost_pusd IS DISTINCT FROM
               greatest(u.input_tokens - coalesce(u.cached_input_tokens, 0)
                        - u.cache_write_tokens, 0)::numeric * p.input_per_mtok
               + coalesce(u.cached_input_tokens, 0)::numeric
                 * p.cached_input_per_mtok
               + u.cache_write_tokens::numeric * p.cache_write_per_mtok
               + coalesce(u.output_tokens, 0)::numeric * p.output_per_mtok),
           count(*) FILTER (WHERE u.cost_pusd IS NULL)
      FROM llm.usage u
      LEFT JOIN LATERAL (
           SELECT * FROM llm.prices p
            WHERE p.model IN (u.model, '*') AND p.effective_from <= u.ts
            ORDER BY p.model = u.model DESC, p.effective_from DESC
            LIMIT 1) p ON true
     WHERE };

is_deeply($dbh->selectrow_arrayref("$recompute u.tenant_id IN (?, ?, ?)",
                                   undef, @ids),
          [ scalar(@rows), 0, 2 ],
          'SQL check: the cost of every row is the price table applied to '
          . 'its tokens (rows, wrong, unpriced)');

# a replay: the same request_id and ts, written by hand (accountd's batch
# ignores it, t/030): refused by llm.usage_request_ids
ok(!eval { insert_row($rows[1]) } && $dbh->state eq '23505',
   'a replayed insert is refused (23505)');
is($dbh->selectrow_array('SELECT count(*) FROM llm.usage WHERE request_id = ?',
                         undef, "$tag-a2"), 1, 'the row is there once');

# sql/014: a row never changes, even for a superuser; a cost given with
# a row is not the database's, and is replaced by it
$dbh->begin_work();
$dbh->do('SAVEPOINT s');
ok(!eval { $dbh->do('UPDATE llm.usage SET output_tokens = output_tokens + 1'
                    . ' WHERE request_id = ?', undef, "$tag-a1") }
   && $dbh->errstr =~ /append-only/, 'an update of a row is refused');
$dbh->do('ROLLBACK TO SAVEPOINT s');
$dbh->do(q{INSERT INTO llm.usage (request_id, tenant_id, model, api,
               input_tokens, output_tokens, reserved_tokens, status, flags,
               ts, received_at, cost_pusd, price_id)
           VALUES (?, ?, ?, 'openai', 1, 1, 2, 200, 0, '2024-02-10',
                   '2024-02-10', 7, NULL)},
         undef, "$tag-given", $tenant{A}{id}, model('alpha'));
is_deeply($dbh->selectrow_arrayref(q{
    SELECT cost_pusd, price_id IS NOT NULL FROM llm.usage
     WHERE request_id = ?}, undef, "$tag-given"), [ 12_500_000, 1 ],
   'a cost given with the row is replaced by its price\'s');
$dbh->rollback();

# the far-future row moves when its month gets a partition
$dbh->begin_work();
is($dbh->selectrow_array(q{SELECT llm.create_usage_partition('2999-05-01')}),
   'llm.usage_2999_05', 'a partition for the far-future month');
is_deeply($dbh->selectrow_arrayref(q{
    SELECT tableoid::regclass::text, cost_pusd FROM llm.usage
     WHERE request_id = ?}, undef, "$tag-c2"),
    [ 'llm.usage_2999_05', 15000000 ],
    'the row moved there from the default partition, cost unchanged');
$dbh->rollback();

# the default price, a cost too large, prices entered late: in
# transactions thrown away
$dbh->begin_work();
$dbh->do(q{INSERT INTO llm.prices (model, effective_from, input_per_mtok,
               output_per_mtok) VALUES ('*', '2024-01-01', 1, 2)});
insert_row([ 'star', 'C', 'none', '2024-03-05 00:00:00', 10, 10, 0, 0, 0, 0 ]);
insert_row([ 'own',  'C', 'beta', '2024-03-05 00:00:00', 10, 10, 0, 0, 0, 0 ]);
is_deeply($dbh->selectcol_arrayref(q{
    SELECT cost_pusd FROM llm.usage WHERE request_id IN (?, ?)
     ORDER BY request_id DESC}, undef, "$tag-star", "$tag-own"),
    [ 30, 7_500_000 ],
    'a model without a price of its own costs the * price; one with its own');

$dbh->do('SAVEPOINT s');
ok(!eval { $dbh->do(q{UPDATE llm.prices SET input_per_mtok = 1
                       WHERE model = '*'}) }
   && $dbh->errstr =~ /append-only/, 'a price is never edited');
$dbh->do('ROLLBACK TO SAVEPOINT s');
ok(!eval { $dbh->do(q{DELETE FROM llm.prices WHERE model = '*'}) }
   && $dbh->errstr =~ /append-only/, 'nor deleted');
$dbh->do('ROLLBACK TO SAVEPOINT s');

my @warnings;
{
    local $SIG{__WARN__} = sub { push @warnings, @_ };
    local $dbh->{PrintWarn} = 1;
    $dbh->do(q{INSERT INTO llm.prices (model, effective_from, input_per_mtok,
                   output_per_mtok)
               VALUES ('*', '2024-03-04', 10000000000, 10000000000)});
    insert_row([ 'huge', 'C', 'none', '2024-03-05 00:00:00',
                 '900000000000000000', '9000000000', 0, 0, 0, 0 ]);
}
is_deeply($dbh->selectrow_arrayref(q{
    SELECT count(*), count(cost_pusd) FROM llm.usage WHERE request_id = ?},
    undef, "$tag-huge"), [ 1, 0 ],
    'a cost beyond a bigint: the row is written, its cost NULL');
like("@warnings", qr/does not fit a bigint/, 'with a warning');
$dbh->rollback();

# a price entered late: the rows keep their cost, an adjustment each
# bills the difference, and the proof still holds
$dbh->begin_work();
$dbh->do(q{INSERT INTO llm.prices (model, effective_from, input_per_mtok,
               output_per_mtok) VALUES (?, '2024-01-01', 1000, 3000)},
         undef, model('none'));
is($dbh->selectrow_array(
       q{SELECT llm.reprice_usage('2024-02-01', '2024-04-01', 'late')}), 1,
   'llm.reprice_usage: an adjustment for the row whose price changed');
is_deeply($dbh->selectall_arrayref(q{
    SELECT a.kind, a.request_id, a.period_start::text, a.amount_pusd,
           a.previous_price_id IS NULL, a.reason, u.cost_pusd
      FROM llm.adjustments a JOIN llm.usage u USING (request_id, ts)
     WHERE a.tenant_id IN (?, ?, ?)}, undef, @ids),
    [ [ 'reprice', "$tag-a5", '2024-03-01', 100 * 1000 + 100 * 3000, 1,
        'late', undef ] ],
    'a5: 400,000 p$ on its own open period; its row as it was, unpriced');
is($dbh->selectrow_array(q{SELECT llm.reprice_usage('2024-02-01',
                                                    '2024-04-01')}), 0,
   'again: nothing more');
is_deeply($dbh->selectall_arrayref(q{
    SELECT * FROM llm.cost_errors('2024-01-01', '2024-05-01')}), [],
    'llm.cost_errors(): every stored cost and adjustment holds');
$dbh->rollback();


# --- the views ---------------------------------------------------------------

# a session far from UTC: days and months are still UTC's
$dbh->do(q{SET TIME ZONE 'Pacific/Auckland'});

my $view_cols = q{model, requests, input_tokens, output_tokens,
    cached_input_tokens, cache_write_tokens, reasoning_tokens, cost_usd,
    unpriced, estimated, partial};

sub view {
    my ($view, $when, $t) = @_;
    my $sql = "SELECT tenant, ${when}::text, $view_cols FROM llm.$view"
              . " WHERE tenant_id = ? ORDER BY 2, 3";
    $sql =~ s/model, // if $view eq 'monthly_invoice_total';
    return [ map { $_->[0] = $_->[0] eq $tenant{$t}{name} ? $t : $_->[0];
                   $_->[2] =~ s/^\Q$tag\E-// if $view ne 'monthly_invoice_total';
                   $_ }
             @{ $dbh->selectall_arrayref($sql, undef, $tenant{$t}{id}) } ];
}

is_deeply(view('daily_usage', 'day', 'A'), [
  # tenant day         model  requests input  output cached write reasoning cost_usd          unpriced estimated partial
  [ 'A', '2024-02-10', 'alpha', 1,        1,     1,     0,   0,    0, '0.000012500000', 0, 0, 0 ],
  [ 'A', '2024-02-29', 'alpha', 1,     2000,  1500,   128,  64,  300, '0.019880000000', 0, 0, 0 ],
  [ 'A', '2024-03-01', 'alpha', 1,     1000,    50,   200,   0,    0, '0.003600000000', 0, 1, 0 ],
  [ 'A', '2024-03-01', 'beta',  1,       10,     1,     8,   2,    0, '0.000001500000', 0, 1, 1 ],
  [ 'A', '2024-03-01', 'none',  1,      100,   100,     0,   0,    0,  undef,           1, 0, 0 ],
  [ 'A', '2024-03-15', 'beta',  1,  1000000,  2000, 400000,  0,    0, '0.121200000000', 0, 0, 0 ],
], 'llm.daily_usage of tenant A, by UTC day');

is_deeply(view('monthly_invoice', 'month', 'A'), [
  [ 'A', '2024-02-01', 'alpha', 2,     2001,  1501,   128,  64,  300, '0.019892500000', 0, 0, 0 ],
  [ 'A', '2024-03-01', 'alpha', 1,     1000,    50,   200,   0,    0, '0.003600000000', 0, 1, 0 ],
  [ 'A', '2024-03-01', 'beta',  2,  1000010,  2001, 400008,  2,    0, '0.121201500000', 0, 1, 1 ],
  [ 'A', '2024-03-01', 'none',  1,      100,   100,     0,   0,    0,  undef,           1, 0, 0 ],
], 'llm.monthly_invoice of tenant A: a line per month and model');

is_deeply([ map { @{ view('monthly_invoice_total', 'month', $_) } } qw(A B C) ], [
  # tenant month       requests input      output     cached  write reasoning cost_usd           unpriced estimated partial
  [ 'A', '2024-02-01', 2,          2001,       1501,    128,   64,  300, '0.019892500000',  0, 0, 0 ],
  [ 'A', '2024-03-01', 4,       1001110,       2151, 400208,    2,    0, '0.124801500000',  1, 2, 1 ],
  [ 'B', '2024-02-01', 1,     100000000,  100000000,      0,    0,    0, '75.000000000000', 0, 0, 0 ],
  [ 'B', '2024-03-01', 2,            57,          5,      0,    0,    0, '0.000021000000',  1, 0, 1 ],
  [ 'C', '2024-02-01', 1,             3,          0,      0,    0,    0, '0.000007500000',  0, 0, 0 ],
  [ 'C', '2999-05-01', 1,             1,          1,      0,    0,    0, '0.000015000000',  0, 0, 0 ],
], 'llm.monthly_invoice_total: a month\'s total per tenant');

is_deeply($dbh->selectall_arrayref(q{
    SELECT i.month::text, sum(i.cost_usd) = t.cost_usd,
           sum(i.requests) = t.requests
      FROM llm.monthly_invoice i
      JOIN llm.monthly_invoice_total t USING (tenant_id, month)
     WHERE tenant_id = ?
     GROUP BY i.month, t.cost_usd, t.requests ORDER BY 1}, undef,
    $tenant{A}{id}),
    [ [ '2024-02-01', 1, 1 ], [ '2024-03-01', 1, 1 ] ],
    'the total is the sum of the lines');

$dbh->do(q{SET TIME ZONE 'UTC'});


# --- row-level security, N x N -----------------------------------------------

is_deeply($dbh->selectall_arrayref(q{
    SELECT relname::text, relrowsecurity, relforcerowsecurity FROM pg_class
     WHERE oid IN ('llm.usage'::regclass, 'llm.tenants'::regclass,
                   'llm.reporting_roles'::regclass)
     ORDER BY 1}),
    [ [ 'reporting_roles', 1, 1 ], [ 'tenants', 1, 1 ], [ 'usage', 1, 1 ] ],
    'row-level security is enabled and forced');

# what the current role sees of a tenant: rows of llm.usage, then
# requests in each view
my $seen = q{
    SELECT (SELECT count(*) FROM llm.usage WHERE tenant_id = $1)
           || ' ' || (SELECT coalesce(sum(requests), 0) FROM llm.daily_usage
                       WHERE tenant_id = $1)
           || ' ' || (SELECT coalesce(sum(requests), 0)
                        FROM llm.monthly_invoice WHERE tenant_id = $1)
           || ' ' || (SELECT coalesce(sum(requests), 0)
                        FROM llm.monthly_invoice_total WHERE tenant_id = $1)};

$dbh->begin_work();

my %role;
for my $t (qw(A B C)) {
    $role{$t} = $dbh->selectrow_array(
        'SELECT llm.create_reporting_role(?)', undef, $tenant{$t}{name});
}
is($role{A}, "llmgw_report_$tenant{A}{name}",
   'a reporting role is named llmgw_report_<tenant>');
is($dbh->selectrow_array('SELECT llm.create_reporting_role(?)', undef,
                         $tenant{A}{name}), $role{A},
   'made again: the same role');

for my $r (qw(A B C)) {
    $dbh->do('SET ROLE ' . $dbh->quote_identifier($role{$r}));

    for my $t (qw(A B C)) {
        my $n = $r eq $t ? $count{$t} : 0;
        is($dbh->selectrow_array($seen, undef, $tenant{$t}{id}), "$n $n $n $n",
           "role of $r sees $n rows of $t (llm.usage, daily_usage, "
           . 'monthly_invoice, monthly_invoice_total)');
    }

    is_deeply($dbh->selectrow_arrayref(q{
        SELECT (SELECT count(*) FROM llm.usage),
               (SELECT sum(requests) FROM llm.daily_usage),
               (SELECT string_agg(name, ',') FROM llm.tenants),
               (SELECT string_agg(role, ',') FROM llm.reporting_roles)}),
        [ $count{$r}, $count{$r}, $tenant{$r}{name}, $role{$r} ],
        "role of $r sees nothing of any other tenant");

    $dbh->do('RESET ROLE');
}

sub refused {
    my ($role, $sql, @bind) = @_;
    $dbh->do('SAVEPOINT refused');
    $dbh->do('SET ROLE ' . $dbh->quote_identifier($role));
    my $ok = eval { $dbh->do($sql, undef, @bind); 1 };
    my $err = $dbh->errstr // '';
    $dbh->do('ROLLBACK TO SAVEPOINT refused');
    $dbh->do('RESET ROLE');
    return !$ok && $err =~ /permission denied/;
}

ok(refused($role{A}, $insert, "$tag-x", $tenant{A}{id}, model('alpha'),
           1, 1, 0, 0, 0, 0, ('2024-03-01 00:00:00') x 2),
   'a reporting role cannot write');
ok(refused($role{A}, 'SELECT * FROM llm.usage_2024_03'),
   'nor read a partition directly');
ok(refused($role{A}, 'SELECT * FROM llm.api_keys'), 'nor the keys');

# a non-superuser in the owner's role (the maintenance path) is subject
# to the policies, being forced: it sees and writes everything
my $owner = $dbh->selectrow_array(
    q{SELECT pg_get_userbyid(relowner) FROM pg_class
       WHERE oid = 'llm.usage'::regclass});
$dbh->do(sprintf 'CREATE ROLE %s NOLOGIN IN ROLE %s',
         $dbh->quote_identifier("$tag-owner"), $dbh->quote_identifier($owner));
$dbh->do('SET ROLE ' . $dbh->quote_identifier("$tag-owner"));
is_deeply($dbh->selectrow_arrayref(q{
    SELECT rolsuper, (SELECT count(*) FROM llm.usage
                       WHERE tenant_id IN ($1, $2, $3))
      FROM pg_roles WHERE rolname = current_user}, undef, @ids),
    [ 0, scalar(@rows) ], 'a non-superuser owner sees every row');
is($owner, 'llmgw_owner', 'the owner is llmgw_owner');
is(insert_row([ 'o1', 'B', 'alpha', '2024-03-03 00:00:00',
                1, 1, 0, 0, 0, 0 ]) + 0, 1, 'and writes');
$dbh->do('RESET ROLE');

# a reporting role that lost its tenant sees nothing
$dbh->do('DELETE FROM llm.reporting_roles WHERE role = ?', undef, $role{C});
$dbh->do('SET ROLE ' . $dbh->quote_identifier($role{C}));
is($dbh->selectrow_array('SELECT count(*) FROM llm.usage'), 0,
   'a reporting role without a tenant sees no row');
$dbh->do('RESET ROLE');

$dbh->rollback();


# --- the upgrade of a database of 003 ----------------------------------------

my $scratch = "llmgw_t058_$$";
my $url = "postgresql://llmgw\@127.0.0.1:$s->{LLMGW_PG_PORT}/$scratch";
my $analyst = "$tag-analyst";

$dbh->do("DROP DATABASE IF EXISTS $scratch");
$dbh->do("CREATE DATABASE $scratch");

is(migrate('001_schema', '002_key_lifecycle', '003_metering'), '',
   'a scratch database at 003');

my $old = DBI->connect("dbi:Pg:dbname=$scratch;host=127.0.0.1;"
                       . "port=$s->{LLMGW_PG_PORT}", 'llmgw', '',
                       { RaiseError => 1, AutoCommit => 1, PrintError => 0 });

$old->do(q{INSERT INTO llm.tenants (name, tier) VALUES ('acme', 'pro'),
                                                       ('zeta', 'free')});
$old->do(q{
    INSERT INTO llm.usage (request_id, tenant_id, model, api, input_tokens,
        output_tokens, cached_input_tokens, cache_write_tokens,
        reasoning_tokens, reserved_tokens, finish_reason, status, flags, ts)
    VALUES ('r1', 1, 'm-a', 'openai', 1000, 100, 10, 0, 5, 2000, 'stop', 200,
            0, '2026-10-31 23:59:59.999+00'),
           ('r2', 1, 'm-a', 'anthropic', 1000, 100, 10, 20, 0, 2000, 'stop',
            200, 3, '2026-11-01 00:00:00+00'),
           ('r3', 2, 'm-b', 'responses', 5, NULL, NULL, 0, 0, 2000, NULL, 499,
            3, '2020-02-29 12:00:00+00'),
           ('r4', 2, 'm-a', 'openai', 7, 7, 0, 0, 0, 2000, NULL, 200, 1,
            '2031-01-01 00:00:00+00')});
$old->do(sprintf 'CREATE ROLE %s NOLOGIN', $old->quote_identifier($analyst));
$old->do(sprintf 'GRANT SELECT ON llm.usage TO %s',
         $old->quote_identifier($analyst));

# everything a row had, generated columns included
my $fingerprint = q{
    SELECT count(*), md5(string_agg((request_id, tenant_id, key_id, model,
               api, input_tokens, output_tokens, cached_input_tokens,
               reserved_tokens, finish_reason, status, flags, ts,
               received_at, cache_write_tokens, reasoning_tokens, estimated,
               partial)::text, '|' ORDER BY request_id))
      FROM llm.usage};
my $schema = q{
    SELECT string_agg(x, E'\n' ORDER BY x) FROM (
        SELECT 'column ' || attname || ' ' || format_type(atttypid, atttypmod)
               || CASE WHEN attnotnull THEN ' not null' ELSE '' END
               || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '')
               || ' generated=' || attgenerated::text
               || coalesce(' -- ' || col_description(attrelid, attnum), '')
          FROM pg_attribute a
          LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid
                                AND d.adnum = a.attnum
         WHERE attrelid = 'llm.usage'::regclass AND attnum > 0
           AND NOT attisdropped AND attname NOT IN ('request_id', 'cost_pusd')
        UNION ALL
        SELECT 'constraint ' || conname || ' ' || pg_get_constraintdef(oid)
          FROM pg_constraint
         WHERE conrelid = 'llm.usage'::regclass
           AND conname NOT IN ('usage_pkey', 'usage_cost_pusd_nonneg')
        UNION ALL
        SELECT 'index ' || indexrelid::regclass || ' '
               || replace(pg_get_indexdef(indexrelid), ' ON ONLY ', ' ON ')
          FROM pg_index
         WHERE indrelid = 'llm.usage'::regclass
           AND indexrelid <> 'llm.usage_pkey'::regclass) AS s (x)};

my @before = $old->selectrow_array($fingerprint);
my $schema_before = $old->selectrow_array($schema);
$old->disconnect();

my $t0 = time();
is(migrate('004_billing'), '', '004 applies to it');
my $took = time() - $t0;

my $new = DBI->connect("dbi:Pg:dbname=$scratch;host=127.0.0.1;"
                       . "port=$s->{LLMGW_PG_PORT}", 'llmgw', '',
                       { RaiseError => 1, AutoCommit => 1, PrintError => 0 });

is_deeply([ $new->selectrow_array($fingerprint) ], \@before,
          'every row moved, every column the same (generated ones too)');
is($new->selectrow_array($schema), $schema_before,
   'columns, defaults, generated columns, comments, constraints, the '
   . 'foreign key and the index are kept');
is_deeply($new->selectall_arrayref(q{
    SELECT request_id, tableoid::regclass::text FROM llm.usage
     ORDER BY request_id}),
    [ [ 'r1', 'llm.usage_2026_10' ], [ 'r2', 'llm.usage_2026_11' ],
      [ 'r3', 'llm.usage_2020_02' ], [ 'r4', 'llm.usage_2031_01' ] ],
    'each row is in the partition of its month');
is_deeply($new->selectrow_arrayref(q{
    SELECT to_regclass('llm.usage_unpartitioned')::text,
           has_table_privilege($1, 'llm.usage', 'SELECT'),
           (SELECT count(cost_pusd) FROM llm.usage)}, undef, $analyst),
    [ undef, 1, 0 ],
    'the old table is gone, its grants kept; no price yet, no cost');

$new->do(q{INSERT INTO llm.prices (model, effective_from, input_per_mtok,
               output_per_mtok, cached_input_per_mtok)
           VALUES ('m-a', '2026-01-01', 2500000, 10000000, 1250000),
                  ('m-a', '2026-11-01', 3000000, 12000000, NULL)});
is($new->selectrow_array(
       q{SELECT llm.reprice_usage('-infinity', 'infinity')}), 3,
   'prices entered after the upgrade cost the old rows');
is_deeply($new->selectall_arrayref(q{
    SELECT request_id, cost_pusd FROM llm.usage ORDER BY request_id}),
    # r1: 990 x 2.5 + 10 x 1.25 + 100 x 10 (µ$); r2: 970 x 3 + 10 x 3 +
    # 20 x 3 + 100 x 12; r4: 7 x 3 + 7 x 12
    [ [ 'r1', 3_487_500_000 ], [ 'r2', 4_200_000_000 ], [ 'r3', undef ],
      [ 'r4', 105_000_000 ] ], 'exactly');

is($new->do(q{
    INSERT INTO llm.usage (request_id, tenant_id, model, api, input_tokens,
                           output_tokens, ts)
    VALUES ('r2', 1, 'm-a', 'openai', 1, 1, '2026-11-01 00:00:00+00'),
           ('r5', 1, 'm-a', 'openai', 1, 1, '2026-11-02 00:00:00+00')
    ON CONFLICT (request_id, ts) DO NOTHING}) + 0, 1,
   'after it, accountd\'s insert writes the new row and skips the replay');

# the later migrations, then 012 on rows that predate it: they keep every
# figure and name no backend; a row that names one keeps it as it moves
# into its month's partition
is(migrate('005_caps', '006_shares', '007_key_caps', '008_ingest',
           '009_worker_exited', '010_ingest_rate', '011_embeddings'), '',
   'the scratch database at 011');
@before = $new->selectrow_array($fingerprint);
is(migrate('012_translation'), '', '012 applies to it');
is_deeply([ $new->selectrow_array($fingerprint) ], \@before,
          '012: every row as it was');
is_deeply($new->selectall_arrayref(q{
    SELECT request_id, upstream_api, backend
      FROM llm.usage_of_requests('{r1,r2,r3,r4,r5}') ORDER BY 1}),
    [ map { [ "r$_", undef, undef ] } 1 .. 5 ],
    'the rows from before it name no backend, in the batch look-up too');
$new->do(q{
    INSERT INTO llm.usage (request_id, tenant_id, model, api, input_tokens,
                           output_tokens, ts, upstream_api, backend)
    VALUES ('r6', 1, 'm-a', 'openai', 1, 1, '2033-03-03 00:00:00+00',
            'anthropic', 'claude-a')});
$new->do(q{SELECT llm.create_usage_partition('2033-03-01')});
is_deeply($new->selectrow_arrayref(q{
    SELECT tableoid::regclass::text, api, upstream_api, backend
      FROM llm.usage WHERE request_id = 'r6'}),
    [ 'llm.usage_2033_03', 'openai', 'anthropic', 'claude-a' ],
    'a row that names its backend keeps it, moved into its partition');

# then the append-only ledger (013..015) on what an old ledger may hold: a
# price edited in place after rows were costed by it, and a request_id
# billed in two months
$new->do(q{
    INSERT INTO llm.usage (request_id, tenant_id, model, api, input_tokens,
                           output_tokens, ts)
    VALUES ('r7', 1, 'm-a', 'openai', 1, 1, '2026-10-15 00:00:00+00'),
           ('r7', 1, 'm-a', 'openai', 1, 1, '2026-11-15 00:00:00+00')});
$new->do(q{UPDATE llm.prices SET output_per_mtok = 13000000
            WHERE model = 'm-a' AND effective_from = '2026-11-01'});
my $billed = q{
    SELECT u.request_id, u.ts::text, coalesce(u.cost_pusd, 0)
           + coalesce((SELECT sum(a.amount_pusd) FROM llm.adjustments a
                        WHERE a.request_id = u.request_id AND a.ts = u.ts), 0)
      FROM llm.usage u ORDER BY 1, 2};
my $billed_before = $new->selectall_arrayref(
    q{SELECT request_id, ts::text, coalesce(cost_pusd, 0) FROM llm.usage
       ORDER BY 1, 2});
@before = $new->selectrow_array($fingerprint);
is(migrate('013_least_privilege', '014_append_only', '015_periods'), '',
   '013, 014 and 015 apply to it');
is_deeply([ $new->selectrow_array($fingerprint) ], \@before,
          '013..015: every row as it was');
is_deeply($new->selectall_arrayref(q{
    SELECT request_id, kind, amount_pusd FROM llm.adjustments
     ORDER BY request_id, ts, kind}),
    # the costs by the edited price (µ$): 4,300 (r2), 112 (r4), 16 (r5,
    # r6, r7's second)
    [ [ 'r2', 'migration', 4_200_000_000 - 4_300_000_000 ],
      [ 'r4', 'migration', 105_000_000 - 112_000_000 ],
      [ 'r5', 'migration', 15_000_000 - 16_000_000 ],
      [ 'r6', 'migration', 15_000_000 - 16_000_000 ],
      [ 'r7', 'duplicate', -15_000_000 ],
      [ 'r7', 'migration', 15_000_000 - 16_000_000 ] ],
    'a cost no price explains is kept as billed by a migration adjustment; '
    . 'the second r7 is credited what it was billed');
my $billed_after = $new->selectall_arrayref($billed);
$billed_before->[-1][2] = 0;
is_deeply($billed_after, $billed_before,
          'every row bills what it did, the repeated one nothing');
is_deeply($new->selectall_arrayref(q{SELECT * FROM llm.cost_errors()}), [],
          'and llm.cost_errors() proves every stored cost');
is_deeply($new->selectrow_arrayref(q{
    SELECT (SELECT count(*) FROM llm.usage_request_ids),
           (SELECT ts::text FROM llm.usage_request_ids
             WHERE request_id = 'r7'),
           (SELECT string_agg(conname || '=' || convalidated, ',' ORDER BY 1)
              FROM pg_constraint
             WHERE conrelid = 'llm.usage'::regclass
               AND conname IN ('usage_cache_within_input',
                               'usage_reasoning_within_output',
                               'usage_ts_sane')),
           pg_get_userbyid(relowner)
      FROM pg_class WHERE oid = 'llm.usage'::regclass}),
    [ 7, '2026-10-15 00:00:00+00',
      'usage_cache_within_input=true,usage_reasoning_within_output=true,'
      . 'usage_ts_sane=false', 'llmgw_owner' ],
    'each request_id once, the first; the rules its rows keep are valid, '
    . 'the window of ts binds new rows only (rows written years ahead); '
    . 'llmgw_owner owns it');
ok(!eval { $new->do(q{
    INSERT INTO llm.usage (request_id, tenant_id, model, api, input_tokens,
                           output_tokens, ts)
    VALUES ('r1', 1, 'm-a', 'openai', 1, 1, now())}) }
   && $new->state eq '23505', 'a request_id of another month is refused');

# 016: what reconciles with the provider's bill, on the same rows
@before = $new->selectrow_array($fingerprint);
is(migrate('016_reconciliation', '017_append_only_guards'), '',
   '016 and 017 apply to it');
is_deeply([ $new->selectrow_array($fingerprint) ], \@before,
          '016, 017: every row as it was');
is($new->selectrow_array(q{
    SELECT count(*) FROM llm.usage
     WHERE provider_key IS NOT NULL OR response_id IS NOT NULL
        OR upstream_model IS NOT NULL}), 0,
   '  nothing the upstream said on the rows before');
is_deeply($new->selectall_arrayref(q{
    SELECT * FROM llm.ingest_batch(ARRAY['r8'], ARRAY[1::bigint],
        ARRAY[NULL::bigint], ARRAY['m-a'], ARRAY['openai'], ARRAY[3::bigint],
        ARRAY[2::bigint], ARRAY[0::bigint], ARRAY[0::bigint],
        ARRAY[0::bigint], ARRAY[10::bigint], ARRAY['stop'], ARRAY[200],
        ARRAY[0], ARRAY[(extract(epoch FROM now()) * 1000)::bigint],
        ARRAY['openai'], ARRAY['gpt-a'])}), [],
   '  an accountd of before (17 arrays) still writes');
is_deeply($new->selectrow_arrayref(q{
    SELECT backend, provider_key, response_id, upstream_model
      FROM llm.usage WHERE request_id = 'r8'}), [ 'gpt-a', undef, undef, undef ],
   '  its row, the backend and nothing of the upstream\'s');
is_deeply($new->selectall_arrayref(q{SELECT * FROM llm.cost_errors()}), [],
          '  and every cost is still proved');

# 018: the keys of llm.usage go, their checks stay; the same rows
@before = $new->selectrow_array($fingerprint);
is(migrate('018_ingest_path'), '', '018 applies to it');
is_deeply([ $new->selectrow_array($fingerprint) ], \@before,
          '018: every row as it was');
my @batch = (q{SELECT * FROM llm.ingest_batch(ARRAY[$1], ARRAY[1::bigint],
        ARRAY[NULL::bigint], ARRAY['m-a'], ARRAY['openai'], ARRAY[$2::bigint],
        ARRAY[2::bigint], ARRAY[0::bigint], ARRAY[0::bigint],
        ARRAY[0::bigint], ARRAY[10::bigint], ARRAY['stop'], ARRAY[200],
        ARRAY[0], ARRAY[$3::bigint], ARRAY['openai'], ARRAY['gpt-a'],
        ARRAY[NULL::text], ARRAY[NULL::text], ARRAY[NULL::text])});
my $r8_ms = $new->selectrow_array(q{
    SELECT (extract(epoch FROM ts) * 1000)::bigint FROM llm.usage
     WHERE request_id = 'r8'});
is_deeply($new->selectall_arrayref($batch[0], undef, 'r9', 3,
                                   $r8_ms + 1), [],
          '  accountd writes a new record');
is_deeply($new->selectall_arrayref($batch[0], undef, 'r8', 3, $r8_ms), [],
          '  ignores a replay of an older row');
is_deeply($new->selectall_arrayref($batch[0], undef, 'r8', 4, $r8_ms),
          [ [ 'r8' ] ], '  refuses one with other figures');
is_deeply($new->selectall_arrayref($batch[0], undef, 'r1', 1,
                                   $r8_ms + 2), [ [ 'r1' ] ],
          '  and a request_id of another month, of the rows before');
is_deeply($new->selectrow_arrayref(q{
    SELECT count(*), count(DISTINCT request_id) FROM llm.usage
     WHERE request_id IN ('r1', 'r8', 'r9')}), [ 3, 3 ],
   '  each there once');
is_deeply($new->selectrow_arrayref(q{
    SELECT u.request_id FROM llm.usage_request_ids i
      JOIN llm.usage u ON u.ts = i.ts AND u.request_id = i.request_id
     WHERE i.request_id = 'r9'}), [ 'r9' ],
   '  a request\'s row found by its id and ts');
is_deeply($new->selectall_arrayref(q{SELECT * FROM llm.cost_errors()}), [],
          '  and every cost is still proved');

# 019: the write path's plans without sequential scans; the same results
is(migrate('019_stable_plans'), '', '019 applies to it');
is_deeply($new->selectcol_arrayref(q{
    SELECT p.proname || ':' || (p.proconfig @> '{enable_seqscan=off}')
           || ':' || coalesce((SELECT c FROM unnest(p.proconfig) c
                                WHERE c LIKE 'plan_cache_mode=%'), '-')
      FROM pg_proc p
     WHERE p.pronamespace = 'llm'::regnamespace
       AND p.proname IN ('ingest_batch', 'usage_tenants_check',
                         'usage_late_check') AND p.prolang <> (
           SELECT oid FROM pg_language WHERE lanname = 'sql')
     ORDER BY 1}),
    [ 'ingest_batch:true:plan_cache_mode=force_generic_plan',
      'usage_late_check:true:-',
      'usage_tenants_check:true:plan_cache_mode=force_generic_plan' ],
    '019: the batch and its triggers plan without sequential scans, the '
    . 'batch once a connection');
is_deeply([ map { @{ $new->selectall_arrayref($batch[0], undef, @$_) } }
                ([ 'r9', 3, $r8_ms + 1 ], [ 'r9', 5, $r8_ms + 1 ],
                 [ 'r10', 3, $r8_ms + 3 ]) ], [ [ 'r9' ] ],
          '  a replay ignored, one with other figures refused, a new '
          . 'record written');
is($new->selectrow_array(q{
    SELECT count(*) FROM llm.usage WHERE request_id IN ('r8', 'r9', 'r10')}),
   3, '  each there once');
$new->disconnect();

diag(sprintf '004 upgraded the scratch database in %.2f s', $took);

$dbh->do("DROP DATABASE $scratch");
$dbh->do(sprintf 'DROP ROLE %s', $dbh->quote_identifier($analyst));

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


# A settle record to accountd, as t/030 frames it, sent twice: the request
# ids of the ACKs.
sub accountd_send {
    my (%r) = @_;

    my $p = pack('C C n N q> q> Q> Q> Q> Q> Q> Q> q> C',
                 2, 1, 200, $r{flags}, $r{tenant_id}, 0, $r{input},
                 $r{output}, $r{cached}, $r{cache_write}, $r{reasoning},
                 100_000_000, $r{ts_ms}, 1)
          . pack('C/a* C/a* C/a*', $r{request_id}, $r{model}, 'stop');
    my $frame = pack('N', length $p) . $p;

    my $c = IO::Socket::UNIX->new(Type => SOCK_STREAM,
                                  Peer => $s->{LLMGW_ACCOUNTD_SOCKET})
        or die "connect to accountd: $!";
    binmode $c;

    my @acks;
    for (1, 2) {
        syswrite $c, $frame;
        push @acks, read_ack($c) // 'none';
    }
    close $c;

    return "@acks";
}

sub read_ack {
    my ($c) = @_;
    my $deadline = time() + 5;
    my $sel = IO::Select->new($c);

    my $read = sub {
        my ($n) = @_;
        my $buf = '';
        while (length $buf < $n) {
            my $left = $deadline - time();
            return undef if $left <= 0 || !$sel->can_read($left);
            sysread($c, $buf, $n - length $buf, length $buf) or return undef;
        }
        return $buf;
    };

    for (;;) {
        my $len = $read->(4) // return undef;
        my $p = $read->(unpack 'N', $len) // return undef;
        my (undef, $type) = unpack 'C C', $p;
        next if $type >= 3 && $type <= 5;       # the key set
        return unpack 'C/a', substr($p, 81);
    }
}
