#!/usr/bin/perl

# The key lifecycle from accountd's command line, against the running
# stack: tenant update, keys limited to models and with an expiry, revoke
# by id or by prefix, rotation with a grace period, the snapshot following
# plain SQL through LISTEN/NOTIFY, and no key anywhere but on the
# command's stdout.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use LLMGW ();
use LLMGW::Accountd;
use Test::More;
use Digest::SHA qw(hmac_sha256_hex);
use File::Temp qw(tempfile);
use Time::HiRes qw(time sleep);

my $st = accountd_stack();

my $accountd = $st->{accountd};
my $conf = $st->{LLMGW_ACCOUNTD_CONF};
my $snapshot = $st->{LLMGW_KEY_SNAPSHOT};
my $secret = $st->{secret};
my $log = $st->{log};
my $dbh = $st->{dbh};

# unique across runs and across tests sharing the database
my $tag = sprintf 't031-%d-%d', $$, time % 1000000;

# every key this test sees, to look for it everywhere at the end
my @keys;


# tenant update

my $tenant = "$tag-a";

my ($out, $err, $rc) = run('tenant', 'create', '--name', $tenant,
                           '--tier', 'free');
is $rc, 0, 'tenant create';
chomp(my $tenant_id = $out);

($out, $err, $rc) = run('tenant', 'update', '--name', $tenant,
                        '--tier', 'pro');
is $rc, 0, 'tenant update --tier succeeds';
is $out, "$tenant_id\n", 'and prints the tenant id';
is tenant_tier($tenant_id), 'pro', 'the tenant has the new tier';

my %k1 = create_key('--tenant', $tenant);
is $k1{tier}, 'pro', 'a new key gets the new default tier';
is $k1{models}, '*', 'any model by default';
is $k1{expires}, '-', 'no expiry by default';

my $renamed = "$tag-b";

($out, $err, $rc) = run('tenant', 'update', '--name', $tenant,
                        '--rename', $renamed);
is $rc, 0, 'tenant update --rename succeeds';
is $out, "$tenant_id\n", 'and prints the same tenant id';

($out) = run('tenant', 'list');
like $out, qr/^\Q$tenant_id\E\s+\Q$renamed\E\s+pro\s+-\s+-\s+UTC$/m,
    'tenant list shows the new name';
ok snapshot_has(snapshot_line(%k1, tenant => $renamed)),
    'the snapshot names the key\'s tenant by its new name';

($out, $err, $rc) = run('tenant', 'update', '--name', $renamed,
                        '--tier', 'gold', '--rename', $tenant);
is $rc, 0, 'tier and name at once';
is tenant_tier($tenant_id), 'gold', 'the tier changed';
is key_row($k1{id})->{tier}, 'pro', 'the key keeps its own tier';

run('tenant', 'create', '--name', "$tag-other", '--tier', 'free');

($out, $err, $rc) = run('tenant', 'update', '--name', $tenant,
                        '--rename', "$tag-other");
is $rc, 1, 'renaming onto an existing tenant fails';
like $err, qr/exists/, 'and says so';

($out, $err, $rc) = run('tenant', 'update', '--name', "$tag-nobody",
                        '--tier', 'pro');
is $rc, 1, 'updating an unknown tenant fails';
like $err, qr/no tenant named/, 'and says so';

($out, $err, $rc) = run('tenant', 'update', '--name', $tenant);
is $rc, 2, 'tenant update with nothing to change is a usage error';

($out, $err, $rc) = run('tenant', 'update', '--name', $tenant,
                        '--tier', 'no/slash');
is $rc, 1, 'an invalid tier is refused';
like $err, qr/invalid tier/, 'with a message';

($out, $err, $rc) = run('tenant', 'update', '--name', $tenant,
                        '--rename', 'with space');
is $rc, 1, 'an invalid new name is refused';


# key create --models --expires-in

my %k2 = create_key('--tenant', $tenant, '--models',
                    'gpt-4o,claude-3-5-haiku@20241022', '--expires-in',
                    '2h');
is $k2{models}, 'gpt-4o,claude-3-5-haiku@20241022',
    'key create prints the models';
like $k2{expires}, qr/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/,
    'and the expiry';
is_deeply $dbh->selectrow_array(
    'SELECT models FROM llm.api_keys WHERE key_id = ?', undef, $k2{id}),
    ['gpt-4o', 'claude-3-5-haiku@20241022'],
    'the database holds the models as an array';

my $line = snapshot_find($k2{id});
like $line // '', qr/ gpt-4o,claude-3-5-haiku\@20241022 -$/,
    'the snapshot line ends with the models, and "-": no cap';
near(snapshot_expires($k2{id}), time + 2 * 3600,
     'the snapshot expiry is now + 2h');

for my $case (['30s', 30], ['15m', 900], ['12h', 43200], ['30d', 2592000]) {
    my ($dur, $s) = @$case;
    my %k = create_key('--tenant', $tenant, '--expires-in', $dur);
    near(snapshot_expires($k{id}), time + $s, "--expires-in $dur");
}

my %k3 = create_key('--tenant', $tenant, '--models', '*', '--test');
like $k3{key}, qr/^llmgw_test_[0-9A-Za-z]{38}\z/, 'a test key';
is $dbh->selectrow_array(
    'SELECT models IS NULL FROM llm.api_keys WHERE key_id = ?', undef,
    $k3{id}), 1, '--models "*" is NULL in the database';
ok snapshot_has(snapshot_line(%k3, tenant => $tenant)),
    'and "*" in the snapshot';

($out) = run('key', 'list', '--tenant', $tenant);
like $out, qr/^\Q$k2{id}\E\s.*\s\Q$k2{expires}\E\s+-\s+
              gpt-4o,claude-3-5-haiku\@20241022$/mx,
    'key list shows the expiry and the models';
like $out, qr/^\Q$k3{id}\E\s.*\s-\s+-\s+\*$/m,
    'and "-" and "*" for a key without';

my $long = 'm' x 128;
my $list = join ',', ('model-name') x 94;

for my $bad ('', 'a,,b', 'a,', ',a', ',', '*,a', 'a,*', 'a b', 'gpt;4',
             "caf\xc3\xa9", $long, $list)
{
    ($out, $err, $rc) = run('key', 'create', '--tenant', $tenant,
                            '--models', $bad);
    my $name = length $bad > 20 ? length($bad) . ' characters' : "'$bad'";
    ok $rc == 2 && $err =~ /invalid --models/ && $out !~ /llmgw_/,
        "--models $name is refused with a message and no key";
}

for my $bad ('', '0s', '0d', '10', 's', '10x', '5M', '-5m', '+5m', '1.5h',
             '05m', ' 5m', '5m ', '5 m', '1e3s', '36501d', '99999999999d')
{
    ($out, $err, $rc) = run('key', 'create', '--tenant', $tenant,
                            '--expires-in', $bad);
    ok $rc == 2 && $err =~ /invalid --expires-in/ && $out !~ /llmgw_/,
        "--expires-in '$bad' is refused with a message and no key";
}

($out, $err, $rc) = run('key', 'create', '--tenant', $tenant,
                        '--expires-in', '36500d');
is $rc, 0, '--expires-in 36500d, a hundred years, is the longest';
push @keys, (split /\n/, $out)[-1];


# revoke by id, by prefix

my %k4 = create_key('--tenant', $tenant);

($out, $err, $rc) = run('key', 'revoke', $k4{id});
is $rc, 0, 'revoke by id';
is $out, "key $k4{id} revoked\n", 'says which key';
ok !snapshot_find($k4{id}), 'the key is gone from the snapshot';

my %k5 = create_key('--tenant', $tenant);

($out, $err, $rc) = run('key', 'revoke', $k5{prefix});
is $rc, 0, 'revoke by prefix';
is $out, "key $k5{id} revoked\n", 'says which key';
ok defined key_row($k5{id})->{revoked_at}, 'revoked_at is set';
ok !snapshot_find($k5{id}), 'the key is gone from the snapshot';

($out, $err, $rc) = run('key', 'revoke', $k5{prefix});
is $rc, 1, 'a prefix of revoked keys only matches nothing';
like $err, qr/no key/, 'and says so';

# two live keys with one prefix: the odds are 1 in 62^4 per pair, so the
# second is made by hand

my %k6 = create_key('--tenant', $tenant);
my ($twin) = $dbh->selectrow_array(
    'INSERT INTO llm.api_keys (tenant_id, key_hash, display_prefix, tier)'
    . " VALUES (?, decode(?, 'hex'), ?, ?) RETURNING key_id", undef,
    $tenant_id, hmac_sha256_hex("$tag-twin", $secret), $k6{prefix}, 'pro');

($out, $err, $rc) = run('key', 'revoke', $k6{prefix});
is $rc, 1, 'an ambiguous prefix is refused';
like $err, qr/^\Q$k6{id}\E\s/m, 'the first key is listed';
like $err, qr/^\Q$twin\E\s/m, 'and the second';
ok !defined key_row($k6{id})->{revoked_at}
   && !defined key_row($twin)->{revoked_at}, 'neither is revoked';

($out, $err, $rc) = run('key', 'revoke', $twin);
is $rc, 0, 'revoke one of them by id';
($out, $err, $rc) = run('key', 'revoke', $k6{prefix});
is $rc, 0, 'then the prefix names one key';
is $out, "key $k6{id} revoked\n", 'the other one';

($out, $err, $rc) = run('key', 'revoke', 'llmgw_live_' . '-' x 4);
is $rc, 1, 'an unknown prefix fails';

($out, $err, $rc) = run('key', 'revoke', substr($k6{prefix}, 0, 14));
is $rc, 2, 'a prefix of the wrong length is a usage error';

($out, $err, $rc) = run('key', 'revoke', $k6{key});
is $rc, 2, 'so is a whole key';
ok index($err, $k6{key}) < 0 && index($err, substr($k6{key}, 15)) < 0,
    'which the message does not repeat';

($out, $err, $rc) = run('key', 'revoke', '999999999999');
is $rc, 1, 'an unknown id fails';

($out, $err, $rc) = run('key', 'revoke', '0');
is $rc, 2, 'id 0 is a usage error';


# rotate

my %k7 = create_key('--tenant', $tenant, '--tier', 'silver', '--models',
                    'gpt-4o,o1');

($out, $err, $rc) = run('key', 'rotate', $k7{prefix}, '--grace', '1h');
is $rc, 0, 'rotate by prefix with a grace of 1h';

my %r7 = parse_created($out);
push @keys, $r7{key};
like $r7{key}, qr/^llmgw_live_[0-9A-Za-z]{38}\z/,
    'the new key is alone on the last line';
like $out, qr/^key \Q$k7{id}\E \(\Q$k7{prefix}\E\) expires /m,
    'the old key\'s expiry is shown';

my $new = key_row($r7{id});
is_deeply [ @$new{qw(tenant_id tier rotated_from)}, $new->{models} ],
    [ $tenant_id, 'silver', $k7{id}, ['gpt-4o', 'o1'] ],
    'the new key has the tenant, tier and models, and rotated_from';
is $new->{hash}, hmac_sha256_hex($r7{key}, $secret),
    'and the HMAC of the key printed';
ok snapshot_has(snapshot_line(%r7, tenant => $tenant)),
    'the new key is in the snapshot';
near(snapshot_expires($k7{id}), time + 3600,
     'the old key stays in the snapshot until now + 1h');

($out, $err, $rc) = run('key', 'rotate', $r7{id}, '--grace', '0s');
is $rc, 0, 'rotate by id with a grace of 0s';
my %r7b = parse_created($out);
push @keys, $r7b{key};
ok !snapshot_find($r7{id}), 'the old key is gone from the snapshot at once';
ok snapshot_find($r7b{id}), 'the new one is there';
is $dbh->selectrow_array(
    'SELECT expires_at <= now() FROM llm.api_keys WHERE key_id = ?', undef,
    $r7{id}), 1, 'the old key has expired';

my %k8 = create_key('--tenant', $tenant, '--expires-in', '15m', '--test');
($out, $err, $rc) = run('key', 'rotate', '--grace', '1h', $k8{id});
is $rc, 0, 'rotate a test key, the id after the option';
my %r8 = parse_created($out);
push @keys, $r8{key};
like $r8{key}, qr/^llmgw_test_/, 'its successor is a test key';
near(snapshot_expires($k8{id}), time + 900,
     'a grace longer than the key\'s life does not extend it');
ok snapshot_find($r8{id}) =~ / 0 \* -$/, 'the new key never expires';

($out, $err, $rc) = run('key', 'rotate', $k4{id}, '--grace', '1h');
is $rc, 1, 'a revoked key cannot be rotated';
like $err, qr/revoked/, 'and says so';

($out, $err, $rc) = run('key', 'rotate', $r8{id});
is $rc, 2, '--grace is required';

($out, $err, $rc) = run('key', 'rotate', $r8{id}, '--grace', '1 h');
is $rc, 2, 'a bad --grace is refused';
like $err, qr/invalid --grace/, 'with a message';
ok !$dbh->selectrow_array(
    'SELECT count(*) FROM llm.api_keys WHERE rotated_from = ?', undef,
    $r8{id}), 'and nothing is rotated';


# plain SQL: accountd LISTENs, the snapshot follows (within a second)

my %k9 = create_key('--tenant', $tenant);
ok snapshot_find($k9{id}), 'a key in the snapshot';

my $log_start = -s $log // 0;
my $t0 = time;
$dbh->do('UPDATE llm.api_keys SET revoked_at = now() WHERE key_id = ?',
         undef, $k9{id});
ok poll(sub { !snapshot_find($k9{id}) }),
    'revoked by plain SQL, it leaves the snapshot';
note sprintf 'after %.3f s', time - $t0;

my %k10 = create_key('--tenant', $tenant);
$dbh->do("UPDATE llm.api_keys SET models = '{mock-gpt-4o-mini}'"
         . ' WHERE key_id = ?', undef, $k10{id});
ok poll(sub { (snapshot_find($k10{id}) // '') =~ / mock-gpt-4o-mini -$/ }),
    'models set by plain SQL reach the snapshot';

$dbh->do('UPDATE llm.tenants SET name = ? WHERE tenant_id = ?', undef,
         "$tag-c", $tenant_id);
ok poll(sub { (snapshot_find($k10{id}) // '') =~ / \Q$tag-c\E 0 / }),
    'a tenant renamed by plain SQL too';
$tenant = "$tag-c";

$dbh->do("UPDATE llm.api_keys SET expires_at = now() + interval '1 hour'"
         . ' WHERE key_id = ?', undef, $k10{id});
ok poll(sub { abs((snapshot_expires($k10{id}) // 0) - (time + 3600)) < 5 }),
    'an expiry set by plain SQL too';

ok poll(sub { log_since($log, $log_start)
              =~ /key snapshot "\Q$snapshot\E" written, \d+ keys/ }),
    'each rewrite is logged with the number of keys';

# a stream of changes for a second: rewritten at most once per 200 ms,
# and the last change is not lost

$log_start = -s $log // 0;
my $from = time;

for my $i (1 .. 50) {
    $dbh->do('UPDATE llm.api_keys SET models = ? WHERE key_id = ?', undef,
             ["burst-$i"], $k10{id});
    sleep 0.02;
}

my $span = time - $from;

ok poll(sub { (snapshot_find($k10{id}) // '') =~ / burst-50 -$/ }),
    'after 50 changes the snapshot has the last one';

my @at = map { /^\S+ (\d\d):(\d\d):(\d\d\.\d+) LOG key snapshot .* written/
               ? $1 * 3600 + $2 * 60 + $3 : () }
         split /\n/, log_since($log, $log_start);
# a day later is the same clock time, past midnight
my @gaps = map { my $g = $at[$_] - $at[$_ - 1]; $g < 0 ? $g + 86400 : $g }
           1 .. $#at;

# timings do not decide a test: only that changes were merged, not each
# written (50 changes 20 ms apart, about a second in all but on a busy
# machine: a rewrite at most every 200 ms of the time they took, and one
# after the last)
my $most = 2 + int($span / 0.2);
ok @at >= 1 && @at <= $most, scalar(@at) . ' rewrites for 50 changes in '
   . sprintf('%.2f s (at most %d)', $span, $most)
    or diag "gaps: @gaps";

# the constraint on models

for my $bad ("'{}'", "'{\"a b\"}'", "'{NULL}'", "'{a,NULL}'", "'{\"*\"}'",
             "'{{a},{b}}'", "ARRAY['" . ('m' x 128) . "']",
             "array_fill('model-name'::text, ARRAY[94])")
{
    eval {
        $dbh->do("UPDATE llm.api_keys SET models = $bad WHERE key_id = ?",
                 undef, $k10{id});
    };
    like $@, qr/api_keys_models_valid/, "models $bad is refused by SQL";
}

eval {
    $dbh->do("UPDATE llm.api_keys SET models ="
             . " array_fill('model-name'::text, ARRAY[93])"
             . ' WHERE key_id = ?', undef, $k10{id});
};
is $@, '', 'the longest list, 1022 characters, is taken';


# the commands as a new user runs them after make run (set -a; . demo.env,
# which names the configuration in LLMGW_ACCOUNTD_CONF): no -c; and with
# LLMGW_DATABASE_URL alone, no configuration file at all

$out = `cd /tmp && env LLMGW_ACCOUNTD_CONF='$conf' sh -c '"$accountd" tenant create --name "$tag-demo" --tier pro && "$accountd" key create --tenant "$tag-demo"' 2>&1`;
is $?, 0, 'LLMGW_ACCOUNTD_CONF, no -c: tenant create and key create'
    or diag $out;
my ($demo_key) = $out =~ /^(llmgw_(?:live|test)_\w+)$/m;
ok $demo_key, 'and the key is printed';
push @keys, $demo_key if $demo_key;

SKIP: {
    skip '/etc/llmgw/accountd.conf exists here', 5
        if -e '/etc/llmgw/accountd.conf';

    $out = `cd /tmp && env -u LLMGW_ACCOUNTD_CONF LLMGW_DATABASE_URL='$st->{LLMGW_DATABASE_URL}' "$accountd" tenant list 2>&1`;
    is $?, 0, 'LLMGW_DATABASE_URL alone, no configuration file: tenant list'
        or diag $out;
    like $out, qr/\Q$tag-demo\E/, 'which lists the tenant made above';

    $out = `cd /tmp && env -u LLMGW_ACCOUNTD_CONF "$accountd" -d 2>&1`;
    like $out, qr/could not open configuration file "\/etc\/llmgw\/accountd\.conf"/,
        'the daemon still wants its configuration file';

    # a key needs the key secret, which only a configuration names: the
    # error says how to name one, not that a file it never read lacks it
    $out = `cd /tmp && env -u LLMGW_ACCOUNTD_CONF LLMGW_DATABASE_URL='$st->{LLMGW_DATABASE_URL}' "$accountd" key create --tenant "$tag-demo" 2>&1`;
    isnt $?, 0, 'LLMGW_DATABASE_URL alone: key create fails';
    like $out, qr/"key_secret_file" is not set: there is no configuration file "\/etc\/llmgw\/accountd\.conf" \(name one with -c or LLMGW_ACCOUNTD_CONF\)/,
        'and says where a configuration is named';
}


# no key anywhere

SKIP: {
    skip 'accountd logs to stderr, not to a file', 1 unless -f $log;

    my $text = log_since($log, 0);
    my @in = grep { index($text, $_) >= 0 || index($text, substr $_, 11) >= 0 }
             @keys;
    is scalar @in, 0, 'no key, nor its random part, in accountd\'s log';
}

my $dump = pg_dump();
ok $dump =~ /llm\.api_keys/ && index($dump, $k2{prefix}) >= 0,
    'pg_dump has the keys\' rows';
my @lines = split /\n/, $dump;
my $found = 0;
for my $k (@keys) {
    $found += grep { index($_, $k) >= 0 || index($_, substr $k, 11) >= 0 }
              @lines;
}
is $found, 0, 'pg_dump | grep -c KEY is 0 for each of ' . @keys . ' keys';

my $text = do { local (@ARGV, $/) = ($snapshot); <> };
is scalar(grep { index($text, $_) >= 0 } @keys), 0,
    'no key in the snapshot';

done_testing();


# key create with the given options; returns what it printed

sub create_key {
    my (@args) = @_;

    my ($out, $err, $rc) = run('key', 'create', @args);
    is $rc, 0, "key create @args" or diag $err;

    my %k = parse_created($out);
    push @keys, $k{key} if defined $k{key};

    return %k;
}


sub parse_created {
    my ($out) = @_;
    my %k;

    my @lines = split /\n/, $out;
    $k{key} = $lines[-1];

    my $re = '^key_id (\d+), tenant (\S+), tier (\S+), prefix (\S+),'
             . ' models (\S+), expires (.+)$';

    @k{qw(id tenant tier prefix models expires)} = ($lines[-2] // '') =~ $re;

    $k{hash} = hmac_sha256_hex($k{key} // '', $secret);

    return %k;
}


sub snapshot_line {
    my (%k) = @_;
    my $models = $k{models} // '*';
    my $row = key_row($k{id});

    return "$k{hash} $k{id} $row->{tenant_id} $row->{tier} $k{tenant} 0"
           . " $models -";
}


sub key_row {
    my ($id) = @_;

    return $dbh->selectrow_hashref(
        "SELECT encode(key_hash, 'hex') AS hash, tenant_id, tier, models,"
        . " rotated_from, revoked_at, expires_at"
        . ' FROM llm.api_keys WHERE key_id = ?', undef, $id);
}


sub tenant_tier {
    return $dbh->selectrow_array(
        'SELECT tier FROM llm.tenants WHERE tenant_id = ?', undef, $_[0]);
}


sub snapshot_lines {
    open my $fh, '<', $snapshot or die "$snapshot: $!";
    my @l = <$fh>;
    close $fh;
    chomp @l;
    return @l;
}


sub snapshot_has {
    my ($line) = @_;
    return grep { $_ eq $line } snapshot_lines();
}


# the line of a key id, or undef

sub snapshot_find {
    my ($id) = @_;
    my ($l) = grep { (split / /)[1] eq $id } grep { !/^(#|llmgw-keys |$)/ }
              snapshot_lines();
    return $l;
}


sub snapshot_expires {
    my $l = snapshot_find($_[0]) // return undef;
    return (split / /, $l)[5];
}


# within 5 s, LLMGW_TIME_SCALE times more where the CLI runs slower
# (under valgrind each run takes seconds)
sub near {
    my ($got, $want, $name) = @_;
    my $k = $ENV{LLMGW_TIME_SCALE} // 1;
    my $scale = $k =~ /^\d+(?:\.\d+)?$/ && $k >= 1 ? $k : 1;

    ok defined $got && abs($got - $want) < 5 * $scale, $name
        or diag 'got ' . ($got // 'undef') . ', want about ' . int $want;
}


sub poll {
    my ($cond) = @_;
    # how soon is printed, not asserted
    my $deadline = time + 10 * LLMGW::time_scale();

    while (time < $deadline) {
        return 1 if $cond->();
        sleep 0.02;
    }

    return $cond->();
}


sub pg_dump {
    open my $fh, '-|', 'pg_dump', '--no-password', '-d',
        $st->{LLMGW_SUPERUSER_URL}
        or die "pg_dump: $!";
    local $/;
    my $dump = <$fh> // '';
    close $fh;
    is $?, 0, 'pg_dump succeeds';
    return $dump;
}


sub run {
    my @args = @_;

    my ($efh, $efile) = tempfile(UNLINK => 1);

    my $pid = open my $fh, '-|';
    die "fork: $!" unless defined $pid;

    if ($pid == 0) {
        open STDERR, '>&', $efh or exit 127;
        exec $accountd, '-c', $conf, @args or exit 127;
    }

    local $/;
    my $out = <$fh> // '';
    close $fh;
    my $rc = $? >> 8;

    open my $e, '<', $efile or die "$efile: $!";
    my $err = <$e> // '';
    close $e;

    return ($out, $err, $rc);
}
