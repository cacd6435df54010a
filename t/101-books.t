#!/usr/bin/perl

# The books finance closes (sql/013..015).  Who may change the ledger:
# accountd's role, the operators' and a tenant's reporting role each try
# to rewrite, delete, truncate, cost for themselves, bill another
# tenant's key and bill one request twice, and are refused.  A period
# closes into an invoice whose total is the sum of its rounded lines,
# exported as CSV, closed twice to no effect; a price entered late for
# a closed month changes no invoice and bills the difference on the next
# open one, with the proof of every cost still holding.  A Los Angeles
# tenant's monthly cap and its invoice cut the same local month, at the
# DST change and at 23:59:59.999 on its last day.  Last, at 1M rows over
# six months in a database of its own, an invoice and a month's revenue
# read the partitions of their period only.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use DBI;
use JSON::PP;
use LLMGW;
use Math::BigInt;
use Test::More;
use Time::HiRes qw(time);

my $s = stack();
my $dbh = db();
$dbh->do(q{SET TIME ZONE 'UTC'});

my $tag = sprintf 't101-%d-%d', $$, time % 1000000;

sub connect_as {
    my ($user, $db) = @_;
    my $h = DBI->connect("dbi:Pg:dbname=" . ($db // 'llmgw')
                         . ";host=127.0.0.1;port=$s->{LLMGW_PG_PORT}",
                         $user, '', { RaiseError => 1, AutoCommit => 1,
                                      PrintError => 0, PrintWarn => 0 });
    $h->do(q{SET TIME ZONE 'UTC'});
    return $h;
}

# the CLI: its output and exit code
sub cli {
    my @args = @_;
    my $cmd = join(' ', "$s->{LLMGW_BUILD}/accountd", '-c',
                   $s->{LLMGW_ACCOUNTD_CONF}, map { "'$_'" } @args);
    my $out = `$cmd 2>&1`;
    return ($out, $? >> 8);
}

# the SQLSTATE of a statement that must fail, run in a savepoint
sub refused {
    my ($h, $sql, @bind) = @_;
    my $tx = !$h->{AutoCommit};
    $h->do('SAVEPOINT r') if $tx;
    my $ok = eval { $h->do($sql, undef, @bind); 1 };
    my $state = $ok ? 'done' : $h->state;
    $h->do('ROLLBACK TO SAVEPOINT r') if $tx;
    return $state;
}

# a line's amount in cents: p$ / 1e10, half away from zero
sub cents {
    my ($pusd) = @_;
    my $a = Math::BigInt->new($pusd);
    my $neg = $a->is_neg;
    my $c = $a->copy->babs->badd(5_000_000_000)->bdiv(10_000_000_000);
    return ($neg ? $c->bneg : $c)->bstr;
}

# the cost of a row at a price (µ$ a million tokens = p$ a token), by hand
sub cost {
    my ($p, $in, $out, $cached, $write) = @_;
    my $unc = $in - $cached - $write;
    $unc = 0 if $unc < 0;
    return Math::BigInt->new($unc)->bmul($p->{in})
        ->badd(Math::BigInt->new($cached)->bmul($p->{cached}))
        ->badd(Math::BigInt->new($write)->bmul($p->{write}))
        ->badd(Math::BigInt->new($out)->bmul($p->{out}));
}

sub add_price {
    my ($model, $from, $p) = @_;
    $dbh->do(q{INSERT INTO llm.prices (model, effective_from, input_per_mtok,
                   output_per_mtok, cached_input_per_mtok,
                   cache_write_per_mtok) VALUES (?, ?, ?, ?, ?, ?)}, undef,
             $model, $from, @$p{qw(in out cached write)});
}

# history, as the maintenance path brings it in: received when it happened
# (or at $received), costed by the database
sub history {
    my ($t, $id, $model, $ts, $in, $out, $cached, $write, $flags, $received)
        = @_;
    $dbh->do(q{INSERT INTO llm.usage (request_id, tenant_id, key_id, model,
                   api, input_tokens, output_tokens, cached_input_tokens,
                   cache_write_tokens, reasoning_tokens, reserved_tokens,
                   finish_reason, status, flags, ts, received_at)
               VALUES (?, ?, ?, ?, 'openai', ?, ?, ?, ?, 0, 100000, 'stop',
                       200, ?, ?, ?)}, undef,
             "$tag-$id", $t->{id}, $t->{key_id}, $model, $in, $out, $cached,
             $write, $flags // 0, $ts, $received // $ts);
}

# accountd's own statement, sql/013: the rejected request ids
sub ingest {
    my ($h, @rows) = @_;
    my @cols = map { my $i = $_; [ map { $_->[$i] } @rows ] } 0 .. 16;
    my $arr = sub { '{' . join(',', map { defined $_ ? qq{"$_"} : 'NULL' }
                                    @{ $_[0] }) . '}' };
    return $h->selectcol_arrayref(
        'SELECT r FROM llm.ingest_batch(' . join(', ', map { '?' } 1 .. 17)
        . ') r', undef, map { $arr->($_) } @cols);
}

sub record {
    my (%r) = @_;
    return [ $r{id}, $r{tenant}, $r{key}, $r{model}, 'openai', $r{in} // 10,
             $r{out} // 5, 0, 0, 0, 100, 'stop', 200, 0, $r{ts_ms}, undef,
             undef ];
}

# the relations a plan reads
sub relations {
    my ($node, $acc) = @_;
    $acc //= {};
    if (ref $node eq 'HASH') {
        $acc->{ $node->{'Relation Name'} }++ if $node->{'Relation Name'};
        relations($_, $acc) for values %$node;
    } elsif (ref $node eq 'ARRAY') {
        relations($_, $acc) for @$node;
    }
    return $acc;
}

sub plan_of {
    my ($h, $sql, @bind) = @_;
    my $json = $h->selectrow_array("EXPLAIN (FORMAT JSON) $sql", undef,
                                   @bind);
    return decode_json($json)->[0]{Plan};
}

sub usage_parts {
    my ($plan) = @_;
    return join ',', sort grep { /^usage/ && !/request_ids/ }
                          keys %{ relations($plan) };
}


# --- who may change the ledger ---------------------------------------------------

my $a = new_tenant(tier => 'pro');
my $b = new_tenant(tier => 'pro');
my $model = "$tag-m";
my %p1 = (in => 2_000_000, out => 5_000_000, cached => 500_000,
          write => 2_500_000);
add_price($model, '2000-01-01', \%p1);

my $writer = connect_as('accountd');
my $ops = connect_as('llmgw_ops');

is_deeply($dbh->selectrow_arrayref(q{
    SELECT r.rolsuper, r.rolcreaterole, r.rolcreatedb, r.rolbypassrls,
           pg_has_role('accountd', 'llmgw_writer', 'MEMBER'),
           pg_has_role('accountd', 'llmgw_owner', 'MEMBER'),
           pg_has_role('accountd', 'llmgw_admin', 'MEMBER'),
           pg_get_userbyid(n.nspowner),
           (SELECT rolcanlogin FROM pg_roles WHERE rolname = 'llmgw_owner')
      FROM pg_roles r, pg_namespace n
     WHERE r.rolname = 'accountd' AND n.nspname = 'llm'}),
    [ 0, 0, 0, 0, 1, 0, 0, 'llmgw_owner', 0 ],
    'accountd logs in as a plain member of llmgw_writer; llm belongs to '
    . 'llmgw_owner, which no one logs in as');

my $now_ms = int(time() * 1000) - 1000;
my $month_ago_ms = $now_ms - 33 * 86400 * 1000;

is_deeply(ingest($writer, record(id => "$tag-w1", tenant => $a->{id},
                                 key => $a->{key_id}, model => $model,
                                 in => 1000, out => 100, ts_ms => $now_ms)),
          [], 'accountd\'s role writes a row through llm.ingest_batch()');
is($dbh->selectrow_array(
       'SELECT cost_pusd FROM llm.usage WHERE request_id = ?', undef,
       "$tag-w1"), cost(\%p1, 1000, 100, 0, 0)->bstr, 'costed by its price');

my $part = $dbh->selectrow_array(
    'SELECT tableoid::regclass::text FROM llm.usage WHERE request_id = ?',
    undef, "$tag-w1");

my @attempts = (
    [ 'an UPDATE of usage', 'UPDATE llm.usage SET cost_pusd = 1'
      . " WHERE request_id = '$tag-w1'" ],
    [ 'an UPDATE of its partition', "UPDATE $part SET cost_pusd = 1"
      . " WHERE request_id = '$tag-w1'" ],
    [ 'a DELETE', "DELETE FROM llm.usage WHERE request_id = '$tag-w1'" ],
    [ 'a TRUNCATE', 'TRUNCATE llm.usage' ],
    [ 'a TRUNCATE of a partition', "TRUNCATE $part" ],
    [ 'an INSERT with its own cost', q{INSERT INTO llm.usage (request_id,
          tenant_id, model, api, input_tokens, output_tokens, ts, cost_pusd)
          VALUES ('x', } . $a->{id} . q{, 'm', 'openai', 1000000, 0, now(),
          1)} ],
    [ 'an UPDATE of a price', 'UPDATE llm.prices SET input_per_mtok = 0' ],
    [ 'a DELETE of a price', 'DELETE FROM llm.prices' ],
    [ 'a DELETE of the request ids', 'DELETE FROM llm.usage_request_ids' ],
    [ 'an adjustment of its own', q{INSERT INTO llm.adjustments (tenant_id,
          period_start, kind, amount_pusd, reason) VALUES (} . $a->{id}
      . q{, '2026-01-01', 'credit', -1, 'x')} ],
    [ 'disabling the triggers', 'ALTER TABLE llm.usage DISABLE TRIGGER ALL' ],
    [ 'dropping a partition', "DROP TABLE $part" ],
    [ 'a role of its own', "CREATE ROLE \"$tag-r\"" ],
    [ 'running programs', 'GRANT pg_execute_server_program TO current_user' ],
);

for my $t (@attempts) {
    is(refused($writer, $t->[1]), '42501',
       "as accountd's role: $t->[0] is refused");
}

for my $t (@attempts[0 .. 4, 6, 7, 10 .. 13],
            [ 'making itself the owner', 'GRANT llmgw_owner TO current_user' ],
            [ 'another role\'s password',
              q{ALTER ROLE accountd PASSWORD 'x'} ])
{
    is(refused($ops, $t->[1]), '42501',
       "as the operators' role: $t->[0] is refused");
}
is_deeply($dbh->selectrow_arrayref(q{
    SELECT rolcreaterole FROM pg_roles WHERE rolname = 'llmgw_ops'}), [ 0 ],
    'the operators\' login role has no CREATEROLE');

is(refused($writer, 'SELECT llm.ingest_batch(' . join(', ', map {
           my $v = $_; "'{$v}'" } ("$tag-w2", $a->{id}, $b->{key_id}, $model,
           'openai', 10, 5, 0, 0, 0, 100, 'stop', 200, 0, $now_ms, 'NULL',
           'NULL')) . ')'), '23503',
   'a row under another tenant\'s key: refused (23503), as accountd puts '
   . 'in llm.usage_rejected');

is_deeply(ingest($writer, record(id => "$tag-w1", tenant => $a->{id},
                                 key => $a->{key_id}, model => $model,
                                 in => 1000, out => 100,
                                 ts_ms => $month_ago_ms)),
          [ "$tag-w1" ],
          'the same request_id in another month: refused into '
          . 'llm.usage_rejected');
is_deeply($dbh->selectrow_arrayref(q{
    SELECT (SELECT count(*) FROM llm.usage WHERE request_id = $1),
           (SELECT count(*) FROM llm.usage_rejected WHERE request_id = $1)},
    undef, "$tag-w1"), [ 1, 1 ], 'one row billed, the other kept aside');
is(refused($dbh, q{INSERT INTO llm.usage (request_id, tenant_id, model, api,
                       input_tokens, output_tokens, ts, received_at)
                   VALUES (?, ?, ?, 'openai', 1, 1, now() - interval '33 days',
                           now())}, "$tag-w1", $a->{id}, $model), '23505',
   'even a superuser\'s INSERT of it: refused (23505, usage_request_ids)');
is(refused($dbh, q{UPDATE llm.usage SET cost_pusd = 1 WHERE request_id = ?},
           "$tag-w1"), '42501',
   'and a superuser\'s UPDATE: append-only');

# a tenant's reporting role, the same attempts
{
    my $role = $ops->selectrow_array('SELECT llm.create_reporting_role(?)',
                                     undef, $a->{name});
    is($role, "llmgw_report_$a->{name}",
       'the operators\' role makes a reporting role');
    is(refused($writer, 'SELECT llm.create_reporting_role(?)', $b->{name}),
       '42501', 'accountd\'s role cannot');
    $ops->do('SELECT llm.reporting_role_login(?, ?)', undef, $role,
             "pw-$tag");
    is($dbh->selectrow_array(
           'SELECT rolcanlogin FROM pg_roles WHERE rolname = ?', undef,
           $role), 1, 'and gives it a login');
    is(refused($ops, 'SELECT llm.reporting_role_login(?, ?)', 'accountd',
               'x'), '42501', 'but to no other role');
    $ops->do('SELECT llm.reporting_role_login(?, NULL)', undef, $role);

    $dbh->begin_work();
    $dbh->do('SET LOCAL ROLE ' . $dbh->quote_identifier($role));
    for my $t (@attempts[0 .. 9]) {
        is(refused($dbh, $t->[1]), '42501',
           "as a reporting role: $t->[0] is refused");
    }
    is(refused($dbh, 'SELECT * FROM llm.ingest_batch(NULL, NULL, NULL, NULL,'
               . ' NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,'
               . ' NULL, NULL, NULL, NULL)'), '42501',
       'as a reporting role: accountd\'s statement is refused');
    is($dbh->selectrow_array('SELECT count(*) FROM llm.usage'), 1,
       'and it reads its tenant\'s row');
    $dbh->rollback();
}


# --- a period closes into an invoice ----------------------------------------------

my $r = new_tenant(tier => 'pro');
my $free = "=1+$tag-free";          # no price, and a formula to a spreadsheet

my @jan = (
    # id    model   ts                          in     out   cached write flags
    [ 'r1', $model, '2025-01-05 10:00:00+00',   1000,  600,  100,   0,    0 ],
    [ 'r2', $model, '2025-01-20 12:00:00+00',    345,  400,    0,  45,    3 ],
    [ 'r3', $model, '2025-01-31 23:59:59.999+00', 12,    0,    0,   0,    4 ],
    [ 'r4', $free,  '2025-01-10 00:00:00+00',     50,    5,    0,   0,    0 ],
);
history($r, @$_) for @jan;
$dbh->do(q{SELECT llm.adjust(?, '-0.005', 'goodwill', NULL, '2025-01-15')},
         undef, $r->{name});

# the lines by hand: a line a token class of the priced model, rounded
my %q = (input => 0, cached_input => 0, cache_write => 0, output => 0);
for my $row (grep { $_->[1] eq $model } @jan) {
    my (undef, undef, undef, $in, $out, $cached, $write) = @$row;
    $q{input} += ($in - $cached - $write > 0 ? $in - $cached - $write : 0);
    $q{cached_input} += $cached;
    $q{cache_write} += $write;
    $q{output} += $out;
}
my %unit = (input => $p1{in}, cached_input => $p1{cached},
            cache_write => $p1{write}, output => $p1{out});
my @want_lines = (
    (map { [ 'usage', $model, $_, undef, $q{$_},
             Math::BigInt->new($q{$_})->bmul($unit{$_})->bstr ] }
     grep { $q{$_} } qw(input cached_input cache_write output)),
    [ 'unpriced', $free, undef, undef, 55, 0 ],
    [ 'adjustment', undef, undef, 'credit', 1, -5_000_000_000 ],
);
$_->[6] = cents($_->[5]) for @want_lines;

my ($out, $rc) = cli('period', 'close', '--tenant', $r->{name},
                     '--month', '2025-01');
is($rc, 0, 'accountd period close --tenant --month 2025-01') or diag($out);
my $inv = "INV-$r->{id}-202501";
like($out, qr/^\Q$inv\E\s+\Q$r->{name}\E\s+2025-01\s+UTC\s+USD\s/m,
     'prints the invoice written');

my $lines_sql = q{
    SELECT kind, model, token_class, adjustment_kind, quantity::text,
           amount_pusd::text, amount_minor::text
      FROM llm.invoice_lines WHERE invoice_id = ? ORDER BY line_no};
my $lines = $dbh->selectall_arrayref($lines_sql, undef, $inv);
is_deeply($lines, [ map { [ @$_[0 .. 3], "$_->[4]", "$_->[5]", "$_->[6]" ] }
                    @want_lines ],
          'its lines: by token class, unpriced apart, the credit; each '
          . 'rounded once, half a cent away from zero')
    or diag(explain($lines));
ok((grep { $_->[5] eq '5000000000' && $_->[6] eq '1' } @$lines)
   && (grep { $_->[5] eq '-5000000000' && $_->[6] eq '-1' } @$lines),
   'half a cent: a charge rounds up, a credit down');

my $invoice_sql = q{
    SELECT invoice_id, tenant, period_start::text, time_zone, currency,
           starts_at::text, ends_at::text, total_minor, total_pusd::text,
           requests, unpriced_requests, closed_at::text
      FROM llm.invoices WHERE invoice_id = ?};
my $invoice = $dbh->selectrow_arrayref($invoice_sql, undef, $inv);
my $sum_minor = 0;
$sum_minor += $_->[6] for @$lines;
my $sum_pusd = Math::BigInt->new(0);
$sum_pusd->badd($_->[5]) for @$lines;
is_deeply([ @$invoice[0 .. 10] ],
          [ $inv, $r->{name}, '2025-01-01', 'UTC', 'USD',
            '2025-01-01 00:00:00+00', '2025-02-01 00:00:00+00', $sum_minor,
            $sum_pusd->bstr, 4, 1 ],
          'the invoice: its period, the total the sum of its rounded lines');

# the CSV, as finance takes it
($out, $rc) = cli('invoice', 'export', $inv);
is($rc, 0, 'accountd invoice export') or diag($out);
my @csv = map { [ csv_fields($_) ] } split /\r\n/, $out;
is(scalar(@csv), @$lines + 2, 'a header, a line each, the total');
is_deeply([ map { [ @$_[4, 5, 6, 7, 10, 15] ] } @csv[1 .. $#csv - 1] ],
          [ map { [ $_->[0],
                    ($_->[1] // '') =~ /^=/ ? "'$_->[1]" : $_->[1] // '',
                    $_->[2] // '', $_->[3] // '', $_->[4] // '', $_->[5] ] }
            @$lines ],
          'its lines are the invoice\'s (a formula made text)');
is_deeply([ map { sprintf '%.2f', $_->[16] } @csv[1 .. $#csv - 1] ],
          [ map { sprintf '%.2f', $_->[6] / 100 } @$lines ],
          'in dollars and cents');
is_deeply([ @{ $csv[-1] }[4, 11, 15, 16] ],
          [ 'total', 4, $sum_pusd->bstr, sprintf('%.2f', $sum_minor / 100) ],
          'and the total is the invoice\'s');

# twice: the same invoice, nothing written
($out, $rc) = cli('period', 'close', '--tenant', $r->{name},
                  '--month', '2025-01');
is($rc, 0, 'closing it again succeeds');
like($out, qr/^\Q$inv\E /m, 'and names the same invoice');
is_deeply($dbh->selectrow_arrayref($invoice_sql, undef, $inv), $invoice,
          'which is as it was');
is_deeply($dbh->selectall_arrayref($lines_sql, undef, $inv), $lines,
          'line for line');
is($dbh->selectrow_array(
       'SELECT count(*) FROM llm.invoices WHERE tenant_id = ?', undef,
       $r->{id}), 1, 'one invoice');
is(refused($dbh, 'UPDATE llm.invoice_lines SET amount_minor = 0'
           . ' WHERE invoice_id = ?', $inv), '42501',
   'an invoice line never changes');
is(refused($ops, q{SELECT llm.close_period(?, '2099-01-01')}, $r->{id}),
   '55000', 'a period not over is not closed');


# --- a price entered late for the closed month --------------------------------------

my %p2 = (in => 3_000_000, out => 7_000_000, cached => 600_000,
          write => 3_300_000);
add_price($model, '2025-01-15', \%p2);
is($ops->selectrow_array(q{SELECT llm.reprice_usage('2025-01-01',
                                                    '2025-02-01',
                                                    'price correction')}),
   2, 'llm.reprice_usage: the two rows after the new price');

my $diff = Math::BigInt->new(0);
for my $row (grep { $_->[1] eq $model && $_->[2] ge '2025-01-15' } @jan) {
    my (undef, undef, undef, $in, $out, $cached, $write) = @$row;
    $diff->badd(cost(\%p2, $in, $out, $cached, $write))
         ->bsub(cost(\%p1, $in, $out, $cached, $write));
}

is_deeply($dbh->selectrow_arrayref($invoice_sql, undef, $inv), $invoice,
          'the closed invoice is as it was');
is_deeply($dbh->selectall_arrayref($lines_sql, undef, $inv), $lines,
          'line for line');
is_deeply($dbh->selectall_arrayref(q{
    SELECT period_start::text, kind, count(*), sum(amount_pusd)::text
      FROM llm.adjustments WHERE tenant_id = ? AND kind = 'reprice'
     GROUP BY 1, 2}, undef, $r->{id}),
    [ [ '2025-02-01', 'reprice', 2, $diff->bstr ] ],
    'the difference, by hand, bills on the next open period');
is_deeply($dbh->selectall_arrayref(q{
    SELECT * FROM llm.cost_errors('2025-01-01', '2025-03-01')}), [],
    'llm.cost_errors(): every cost and adjustment holds');
is($ops->selectrow_array(q{SELECT llm.reprice_usage('2025-01-01',
                                                    '2025-02-01')}),
   0, 'repriced again: nothing more');

# a late record for January: on February, visibly
history($r, 'r5', $model, '2025-01-25 00:00:00+00', 100, 10, 0, 0, 0,
        '2025-02-02 00:00:00+00');
my $late = cost(\%p2, 100, 10, 0, 0);
is_deeply($dbh->selectall_arrayref(q{
    SELECT period_start::text, amount_pusd::text, reason
      FROM llm.adjustments WHERE request_id = ? AND kind = 'late_usage'},
    undef, "$tag-r5"),
    [ [ '2025-02-01', $late->bstr,
        'usage received 2025-02-02T00:00:00Z for a closed period' ] ],
    'a late record of a closed period: a late_usage adjustment on the next');

($out, $rc) = cli('period', 'close', '--tenant', $r->{name}, '--month',
                  '2025-02');
is($rc, 0, 'February closes') or diag($out);
my $feb = $dbh->selectall_arrayref(q{
    SELECT kind, adjustment_kind, amount_pusd::text, amount_minor
      FROM llm.invoice_lines WHERE invoice_id = ? ORDER BY line_no}, undef,
    "INV-$r->{id}-202502");
is_deeply($feb, [
    [ 'adjustment', 'late_usage', $late->bstr, cents($late->bstr) ],
    [ 'adjustment', 'reprice', $diff->bstr, cents($diff->bstr) ] ],
    'its invoice bills them')
    or diag(explain($feb));

($out, $rc) = cli('invoice', 'list', '--tenant', $r->{name});
is(scalar(() = $out =~ /^INV-/mg), 2, 'accountd invoice list: both');
($out, $rc) = cli('invoice', 'export', 'INV-0-000000');
isnt($rc, 0, 'an invoice that does not exist: an error');
like($out, qr/no invoice "INV-0-000000"/, 'which says so');
($out, $rc) = cli('period', 'close', '--tenant', $r->{name}, '--month',
                  '2025-13');
is($rc, 2, 'a month that is none: a usage error');


# --- a Los Angeles tenant: one month for its cap and its invoice -------------------

my $la = new_tenant(tier => 'pro');
cli('tenant', 'update', '--name', $la->{name}, '--time-zone',
    'America/Los_Angeles', '--monthly-cap-usd', '100');

my $cap = 100 * 10**12;
my @la = (
    # UTC                          local                            month
    [ '2026-11-01 06:59:59.999+00', 'Oct 31 23:59:59.999 PDT', $cap, 'oct' ],
    [ '2026-11-01 07:00:00+00',     'Nov  1 00:00 PDT',         $cap, 'nov' ],
    [ '2026-11-01 09:30:00+00',     'Nov  1 01:30 PST, after the change',
      0, 'nov' ],
    [ '2026-11-02 07:59:59.999+00', 'Nov  1 23:59:59.999 PST (a 25-hour day)',
      0, 'nov' ],
    [ '2026-12-01 07:59:59.999+00', 'Nov 30 23:59:59.999 PST', 0, 'nov' ],
    [ '2026-12-01 08:00:00+00',     'Dec  1 00:00 PST',         $cap, 'dec' ],
);

my $i = 0;
for my $l (@la) {
    my ($granted, $resets) = $writer->selectrow_array(q{
        SELECT granted_pusd, resets_at::text
          FROM llm.take_lease(?::bigint, 0, ?, ?::bigint, ?::timestamptz)},
        undef, $la->{id}, "$tag-gw", $cap, $l->[0]);
    is($granted, $l->[2], "the monthly cap at $l->[1]: "
       . ($l->[2] ? 'a new month, $100 leased' : 'spent'));
    is($resets, '2026-12-01 08:00:00+00',
       '  until the first instant of December, local') if !$l->[2];
    history($la, 'la' . ++$i, $model, $l->[0], 1000, 100, 0, 0, 0);
}

is(refused($ops, q{SELECT llm.close_period(?, '2026-11-01', '3 days',
                                           '2026-12-03 12:00+00')},
           $la->{id}), '55000', 'November closes only 3 days after it ends');
is($ops->selectrow_array(q{SELECT llm.close_period(?, '2026-11-01', '3 days',
                                                   '2026-12-10 00:00+00')},
                         undef, $la->{id}),
   "INV-$la->{id}-202611", 'then October and November close');
is_deeply($dbh->selectall_arrayref(q{
    SELECT period_start::text, time_zone, starts_at::text, ends_at::text,
           requests
      FROM llm.invoices WHERE tenant_id = ? ORDER BY 1}, undef, $la->{id}),
    [ [ '2026-10-01', 'America/Los_Angeles', '2026-10-01 07:00:00+00',
        '2026-11-01 07:00:00+00', 1 ],
      [ '2026-11-01', 'America/Los_Angeles', '2026-11-01 07:00:00+00',
        '2026-12-01 08:00:00+00', 4 ] ],
    'its November invoice is the local month the cap counted: from 00:00 '
    . 'PDT to 00:00 PST, the rows of 23:59:59.999 on either side where '
    . 'the cap put them');
is_deeply($dbh->selectall_arrayref(q{
    SELECT day::text, requests FROM llm.daily_usage
     WHERE tenant_id = ? ORDER BY 1}, undef, $la->{id}),
    [ [ '2026-10-31', 1 ], [ '2026-11-01', 3 ], [ '2026-11-30', 1 ],
      [ '2026-12-01', 1 ] ],
    'its days are local too: the 25 hours of November 1 are one day');
is(refused($ops, q{UPDATE llm.tenants SET time_zone = 'UTC'
                    WHERE tenant_id = ?}, $la->{id}), '55000',
   'a tenant with closed periods keeps its time zone');


# --- the owner's exceptions are the owner's -----------------------------------------

# a role given the owner's privileges by mistake: the settings the owner's
# functions set unlock nothing for it
my $oops = "t101_oops_$$";
$dbh->do(qq{CREATE ROLE $oops NOLOGIN});
$dbh->do(qq{GRANT USAGE ON SCHEMA llm TO $oops});
$dbh->do(qq{GRANT SELECT, INSERT, UPDATE, DELETE ON llm.usage,
            llm.usage_request_ids TO $oops});
$dbh->do(qq{GRANT SELECT ON llm.tenants, llm.api_keys, llm.prices,
            llm.invoices TO $oops});
$dbh->begin_work();
$dbh->do(qq{SET LOCAL ROLE $oops});
$dbh->do(q{SET LOCAL llmgw.moving_rows = 'on'});
$dbh->do(q{SET LOCAL llmgw.cost_computed = 'on'});
is(refused($dbh, 'DELETE FROM llm.usage WHERE tenant_id = ?', $r->{id}),
   '42501', 'granted DELETE by mistake, llmgw.moving_rows on: refused');
is(refused($dbh, 'UPDATE llm.usage SET cost_pusd = 1 WHERE tenant_id = ?',
           $r->{id}), '42501', '  UPDATE too');
is(refused($dbh, 'DELETE FROM llm.usage_request_ids WHERE request_id = ?',
           "$tag-r1"), '42501', '  and a request id\'s row');
# the move's table, made by another role than the owner, is no move
$dbh->do(q{CREATE TEMP TABLE llmgw_usage_moving (x int) ON COMMIT DROP});
is(refused($dbh, q{INSERT INTO llm.usage (request_id, tenant_id, key_id,
                       model, api, input_tokens, output_tokens, ts)
                   VALUES (?, ?, ?, ?, 'openai', 1, 1, now())},
           "$tag-r1", $r->{id}, $r->{key_id}, $model), '23505',
   '  a request_id again, "moving rows" with a table of its own: refused');
$dbh->do(q{INSERT INTO llm.usage (request_id, tenant_id, key_id, model, api,
               input_tokens, output_tokens, ts, price_id, cost_pusd)
           VALUES (?, ?, ?, ?, 'openai', 1000000, 0, now(), NULL, 1)}, undef,
         "$tag-oops", $r->{id}, $r->{key_id}, $model);
$dbh->commit();
is($dbh->selectrow_array('SELECT cost_pusd FROM llm.usage'
                         . ' WHERE request_id = ?', undef, "$tag-oops"),
   Math::BigInt->new($p2{in})->bmul(1_000_000)->bstr,
   '  llmgw.cost_computed on: the row costs what the database says, not '
   . 'the 1 p$ it supplied');

# the owner's own insert with its cost computed keeps its price_id, which
# must be a price's, as a foreign key would have it (checked a statement)
$dbh->begin_work();
$dbh->do(q{SET LOCAL ROLE llmgw_owner});
$dbh->do(q{SET LOCAL llmgw.cost_computed = 'on'});
is(refused($dbh, q{INSERT INTO llm.usage (request_id, tenant_id, key_id,
                       model, api, input_tokens, output_tokens, ts,
                       price_id, cost_pusd)
                   VALUES (?, ?, ?, ?, 'openai', 1, 1, now(),
                           (SELECT max(price_id) + 1 FROM llm.prices), 1)},
           "$tag-noprice", $r->{id}, $r->{key_id}, $model), '23503',
   'the owner\'s row with a price_id of no price: refused (23503)');
$dbh->rollback();
$dbh->do(qq{REVOKE ALL ON ALL TABLES IN SCHEMA llm FROM $oops});
$dbh->do(qq{REVOKE ALL ON SCHEMA llm FROM $oops});
$dbh->do(qq{DROP ROLE $oops});

# no function of the owner's that runs as the owner is anyone's to call
# unless granted: not a reporting role's, nor PUBLIC's
is_deeply($dbh->selectcol_arrayref(q{
    SELECT p.oid::regprocedure::text FROM pg_proc p
     WHERE p.pronamespace = 'llm'::regnamespace AND p.prosecdef
       AND (has_function_privilege('llmgw_reporting', p.oid, 'EXECUTE')
            OR has_function_privilege('public', p.oid, 'EXECUTE'))
     ORDER BY 1}), [],
    'no definer function of llm is PUBLIC\'s or a reporting role\'s');
is_deeply($dbh->selectcol_arrayref(q{
    SELECT p.proname::text FROM pg_proc p
     WHERE p.pronamespace = 'llm'::regnamespace AND p.prosecdef
       AND has_function_privilege('accountd', p.oid, 'EXECUTE')
     GROUP BY 1 ORDER BY 1}),
    [ qw(create_usage_partition ensure_usage_partitions ingest_batch
         return_lease take_lease take_share) ],
    'accountd\'s: the batch, the partitions and the leases, nothing else')
    or diag(explain($dbh->selectcol_arrayref(q{
        SELECT p.oid::regprocedure::text FROM pg_proc p
         WHERE p.pronamespace = 'llm'::regnamespace AND p.prosecdef
           AND has_function_privilege('accountd', p.oid, 'EXECUTE')})));

# the owner (a superuser's SET ROLE, the maintenance path) may not empty a
# partition, nor the request ids, either
my ($upart) = $dbh->selectrow_array(
    'SELECT tableoid::regclass::text FROM llm.usage WHERE request_id = ?',
    undef, "$tag-r1");
$dbh->begin_work();
$dbh->do('SET LOCAL ROLE llmgw_owner');
is(refused($dbh, "TRUNCATE $upart"), '42501',
   "as the owner: TRUNCATE $upart refused");
is(refused($dbh, 'TRUNCATE llm.usage_default'), '42501',
   '  TRUNCATE llm.usage_default too');
is(refused($dbh, 'TRUNCATE llm.usage_request_ids'), '42501',
   '  and TRUNCATE llm.usage_request_ids');
is(refused($dbh, 'DELETE FROM llm.usage_request_ids WHERE request_id = ?',
           "$tag-r1"), '42501', '  and DELETE of a request id');
$dbh->rollback();
is_deeply($dbh->selectall_arrayref(q{SELECT * FROM llm.cost_errors()}), [],
          'every cost still proved');

# --- a month closes the periods before it, and says so ---------------------------------

my $q = new_tenant(tier => 'pro');
history($q, 'q1', $model, '2025-02-10 00:00:00+00', 100, 10, 0, 0);
history($q, 'q2', $model, '2025-03-10 00:00:00+00', 100, 10, 0, 0);
($out, $rc) = cli('period', 'close', '--tenant', $q->{name}, '--month',
                  '2025-03');
is($rc, 0, 'period close --month 2025-03 of a tenant with February too');
is_deeply([ $out =~ /^(INV-\S+)/mg ],
          [ "INV-$q->{id}-202502", "INV-$q->{id}-202503" ],
          '  prints both invoices it wrote') or diag($out);
($out, $rc) = cli('period', 'close', '--tenant', $q->{name}, '--month',
                  '2025-03');
is_deeply([ $out =~ /^(INV-\S+)/mg ], [ "INV-$q->{id}-202503" ],
          '  again: the month\'s, found; nothing else');

# --- a correction of a correction ---------------------------------------------------

my ($charge) = $ops->selectrow_array(
    q{SELECT llm.adjust(?, '2.00', 'setup fee')}, undef, $q->{name});
my ($undo) = $ops->selectrow_array(
    q{SELECT llm.adjust(?, '-2.00', 'setup fee waived', NULL, now(), ?)},
    undef, $q->{name}, $charge);
is_deeply($dbh->selectrow_arrayref(q{
    SELECT kind, refers_to, amount_pusd::text, reason, created_by
      FROM llm.adjustments WHERE adjustment_id = ?}, undef, $undo),
    [ 'credit', $charge, '-2000000000000', 'setup fee waived', 'llmgw_ops' ],
    'llm.adjust(..., refers_to): the credit says which charge it undoes, '
    . 'why and who');
is(refused($ops, q{SELECT llm.adjust(?, '-1.00', 'x', NULL, now(), ?)},
           $r->{name}, $charge), 'P0002',
   '  another tenant\'s adjustment: refused');

# --- 1M rows over six months: the plans read their period's partitions ---------------

my $scratch = "llmgw_t101_$$";
$dbh->do("DROP DATABASE IF EXISTS $scratch");
$dbh->do("CREATE DATABASE $scratch");
my $url = "postgresql://llmgw\@127.0.0.1:$s->{LLMGW_PG_PORT}/$scratch";
my $failed = '';
for my $f (sort glob("$FindBin::Bin/../sql/[0-9]*.sql")) {
    my $o = `psql '$url' -X -q -v ON_ERROR_STOP=1 -1 -f '$f' 2>&1`;
    $failed .= $o if $?;
}
is($failed, '', 'every migration applies to a new database');

my $big = connect_as('llmgw', $scratch);
my $t0 = time();
$big->do(q{
    INSERT INTO llm.tenants (name, tier, time_zone)
    VALUES ('utc', 'pro', 'UTC'), ('la', 'pro', 'America/Los_Angeles'),
           ('akl', 'pro', 'Pacific/Auckland'), ('four', 'pro', 'UTC')});
$big->do(q{
    INSERT INTO llm.prices (model, effective_from, input_per_mtok,
                            output_per_mtok)
    SELECT 'model-' || i, '2025-01-01', 1000000 * i, 4000000 * i
      FROM generate_series(1, 4) i});
$big->do(q{SELECT llm.create_usage_partition(m::date)
             FROM generate_series(timestamp '2026-01-01', '2026-06-01',
                                  '1 month') m});

# The plans a batch keeps: PL/pgSQL makes a statement's generic plan once
# a connection and keeps it, from the sizes its tables have then and with
# ten records a batch for its estimates.  accountd connects to a ledger
# that may be empty (a new stack, a new month) and sends batches of a
# thousand, replays after a reconnection: no plan may scan what will grow
# (a scan of every request_id so far, on every batch, made the ledger
# quadratic), nor join the batch's lists in nested loops (a batch of
# replays was quadratic in its size).  Forced generic here, on an almost
# empty ledger, every plan of the batch and its triggers, as auto_explain
# prints them with their rows, reads each table with an index through one
# and handles at most two rows a record in any step.
{
    my $p = connect_as('llmgw', $scratch);
    my @notices;
    local $SIG{__WARN__} = sub { push(@notices, $_[0]) };
    $p->{PrintWarn} = 1;
    $p->do(q{LOAD 'auto_explain'});
    $p->do("SET $_") for ('auto_explain.log_min_duration = 0',
                          'auto_explain.log_nested_statements = on',
                          'auto_explain.log_analyze = on',
                          'auto_explain.log_timing = off',
                          'auto_explain.log_format = json',
                          'auto_explain.log_level = notice');
    my ($tenant) = $p->selectrow_array(
        q{SELECT tenant_id FROM llm.tenants WHERE name = 'utc'});
    my $now_ms = int(time() * 1000);
    my $records = sub {
        my ($out, @ids) = @_;
        return map { record(id => "plan-$_", tenant => $tenant,
                            model => 'model-1', out => $out,
                            ts_ms => $now_ms + $_) } @ids;
    };
    # the plans auto_explain printed since the last call: their seq scans,
    # their largest step (rows times loops), their insertions
    my $plans = sub {
        my %f = (plans => 0, max => 0, scans => {}, inserts => {});
        my $walk;
        $walk = sub {
            my ($n) = @_;
            if (ref $n eq 'HASH') {
                my $type = $n->{'Node Type'} // '';
                $f{scans}{ $n->{'Relation Name'} }++ if $type eq 'Seq Scan';
                $f{inserts}{ $n->{'Relation Name'} }++
                    if $type eq 'ModifyTable';
                my $rows = ($n->{'Actual Rows'} // 0)
                           * ($n->{'Actual Loops'} // 0);
                $f{max} = $rows if $rows > $f{max};
                $walk->($_) for values %$n;
            } elsif (ref $n eq 'ARRAY') {
                $walk->($_) for @$n;
            }
        };
        for (splice(@notices)) {
            my ($json) = /plan:\s*(\{.*\})/s or next;
            $f{plans}++;
            $walk->(decode_json($json));
        }
        return \%f;
    };

    $p->begin_work();
    $p->do(q{SELECT llm.create_usage_partition(
                 date_trunc('month', now() AT TIME ZONE 'UTC')::date)});
    # a ledger's first minutes: a few hundred rows, as autovacuum sees them
    $p->do('SET plan_cache_mode = force_custom_plan');
    my $rejected = ingest($p, $records->(5, 1 .. 300));
    $p->do('ANALYZE llm.usage_request_ids, llm.usage');
    $plans->();
    # then the plans kept for the connection's life: new records, and the
    # journal sent again (two of them with other figures)
    $p->do('SET plan_cache_mode = force_generic_plan');
    push(@$rejected, @{ ingest($p, $records->(5, 301 .. 303)) });
    my $new = $plans->();
    my $replayed = ingest($p, $records->(5, 1 .. 298),
                          $records->(6, 299, 300));
    my $replays = $plans->();
    # the relations read by a sequential scan that have an index
    my @indexed = grep {
        $p->selectrow_array(q{
            SELECT count(*) FROM pg_index i JOIN pg_class c
                ON c.oid = i.indrelid
             WHERE c.relname = ? AND c.relnamespace = 'llm'::regnamespace},
            undef, $_)
    } sort keys %{ { %{ $new->{scans} }, %{ $replays->{scans} } } };
    $p->rollback();
    $p->disconnect();

    is_deeply([ $rejected, \@indexed ], [ [], [] ],
              'a batch\'s plans made on an almost empty ledger scan no '
              . "indexed table ($new->{plans} and $replays->{plans} plans)")
        or diag(explain([ $new->{scans}, $replays->{scans} ]));
    ok($new->{inserts}{usage} && $new->{inserts}{usage_request_ids},
       '  auto_explain showed the batch and its triggers');
    is_deeply([ sort @$replayed ], [ 'plan-299', 'plan-300' ],
              'a batch of replays: those with other figures refused');
    cmp_ok($replays->{max}, '<=', 2 * 300 + 10,
           '  no step of its plans handles more than two rows a record');
}
# the rows as a restore brings them: the triggers' work done here
$big->begin_work();
$big->do(q{SET LOCAL session_replication_role = replica});
$big->do(q{
    INSERT INTO llm.usage (request_id, tenant_id, model, api, input_tokens,
                           output_tokens, reserved_tokens, status, flags, ts,
                           received_at, price_id, cost_pusd)
    SELECT 'big-' || i, t.tenant_id, p.model, 'openai', 100 + i % 900,
           i % 300, 2000, 200, 0, x.ts, x.ts, p.price_id,
           (100 + i % 900)::bigint * p.input_per_mtok
           + (i % 300)::bigint * p.output_per_mtok
      FROM generate_series(1, 1000000) i
     CROSS JOIN LATERAL (SELECT timestamptz '2026-01-01 00:00+00'
                                + (i * 15.6) * interval '1 second' AS ts) x
      JOIN llm.tenants t ON t.tenant_id = 1 + i % 4
      JOIN llm.prices p ON p.model = 'model-' || (1 + i % 7 % 4)});
$big->do(q{INSERT INTO llm.usage_request_ids (request_id, ts)
           SELECT request_id, ts FROM llm.usage});
$big->commit();
$big->do('VACUUM ANALYZE llm.usage');
diag(sprintf '1M rows written and vacuumed in %.1f s', time() - $t0);

is_deeply($big->selectrow_arrayref(q{
    SELECT count(*), count(DISTINCT tableoid), min(ts)::date::text,
           max(ts)::date::text FROM llm.usage}),
    [ 1_000_000, 6, '2026-01-01', '2026-06-30' ],
    '1M rows over six months');
is_deeply($big->selectall_arrayref(q{SELECT * FROM llm.cost_errors()}), [],
          'costed as the database would');

my %tid = map { @$_ } @{ $big->selectall_arrayref(
    'SELECT name, tenant_id FROM llm.tenants') };

my @plans = (
    [ 'one UTC tenant\'s invoice of March',
      'SELECT * FROM llm.period_lines($1, $2)', [ $tid{utc}, '2026-03-01' ],
      'usage_2026_03' ],
    [ 'a Los Angeles tenant\'s (into April, UTC)',
      'SELECT * FROM llm.period_lines($1, $2)', [ $tid{la}, '2026-03-01' ],
      'usage_2026_03,usage_2026_04' ],
    [ 'an Auckland tenant\'s (from February, UTC)',
      'SELECT * FROM llm.period_lines($1, $2)', [ $tid{akl}, '2026-03-01' ],
      'usage_2026_02,usage_2026_03' ],
    [ 'March\'s revenue by model and day',
      'SELECT * FROM llm.revenue_by_model_day($1)', [ '2026-03-01' ],
      'usage_2026_03' ],
);

for my $p (@plans) {
    my ($what, $sql, $bind, $want) = @$p;
    my $plan = plan_of($big, $sql, @$bind);
    is(usage_parts($plan), $want, "$what reads only $want");

    my $t = time();
    my $n = scalar(@{ $big->selectall_arrayref($sql, undef, @$bind) });
    diag(sprintf '%s: %d lines in %.1f ms', $what, $n, 1000 * (time() - $t));
}

# as a dashboard asks it, the values in the statement.  Whether the
# planner takes the index alone or with a bitmap depends on how much of
# the partition VACUUM could mark all-visible meanwhile (other tests'
# snapshots): what is the ledger's is that the index covers the query,
# which an Index Only Scan, once the heap is ruled out, shows (a plain
# Index Scan otherwise)
$big->do('SET enable_bitmapscan = off');
$big->do('SET enable_seqscan = off');
my $mtd = plan_of($big, qq{
    SELECT count(*), sum(cost_pusd) FROM llm.usage
     WHERE tenant_id = $tid{utc} AND ts >= '2026-06-01 00:00+00'
       AND ts < '2026-06-15 00:00+00'});
my %types;
my $walk;
$walk = sub {
    my ($n) = @_;
    $types{ $n->{'Node Type'} }++;
    $walk->($_) for @{ $n->{Plans} // [] };
};
$walk->($mtd);
ok($types{'Index Only Scan'}, 'month to date of a tenant: an index-only scan')
    or diag(explain(\%types));
$big->do('RESET enable_bitmapscan');
$big->do('RESET enable_seqscan');

$big->disconnect();
$dbh->do("DROP DATABASE $scratch");

done_testing();


# A line of CSV as RFC 4180 quotes it: its fields.
sub csv_fields {
    my ($line) = @_;
    my @f;
    while ($line =~ /\G(?:"((?:[^"]|"")*)"|([^,]*))(,|$)/gc) {
        my $v = defined $1 ? $1 =~ s/""/"/gr : $2;
        push @f, $v;
        last if $3 eq '';
    }
    return @f;
}
