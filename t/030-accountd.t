#!/usr/bin/perl

# accountd against the running stack: tenants and keys from the command
# line (only the key's HMAC reaches the database, the snapshot follows
# creation and revocation), and settle records over the Unix socket
# (one row and an ACK each, a replay is acknowledged and not counted
# twice, a malformed frame closes only its own connection; a record of
# version 2, from an older nginx, is written with no backend).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use LLMGW::Accountd;
use Test::More;
use IO::Select;
use IO::Socket::UNIX;
use Socket qw(SOCK_STREAM);
use Digest::SHA qw(hmac_sha256_hex);
use Time::HiRes qw(time);

my $st = accountd_stack();

my $accountd = $st->{accountd};
my $conf = $st->{LLMGW_ACCOUNTD_CONF};
my $socket = $st->{LLMGW_ACCOUNTD_SOCKET};
my $snapshot = $st->{LLMGW_KEY_SNAPSHOT};
my $secret = $st->{secret};
my $log = $st->{log};
my $dbh = $st->{dbh};

# unique across runs and across tests sharing the database
my $tag = sprintf 't030-%d-%d', $$, time % 1000000;
my $tenant = "$tag-acme";

my $log_start = -s $log // 0;


# tenants

my ($out, $rc) = run('tenant', 'create', '--name', $tenant, '--tier', 'pro');
is $rc, 0, 'tenant create succeeds';
like $out, qr/^\d+\n\z/, 'tenant create prints the id';
chomp(my $tenant_id = $out);

($out, $rc) = run('tenant', 'create', '--name', $tenant, '--tier', 'pro');
isnt $rc, 0, 'a second tenant of the same name is refused';

($out, $rc) = run('tenant', 'create', '--name', "$tag bad", '--tier', 'pro');
isnt $rc, 0, 'a tenant name with a space is refused';

($out, $rc) = run('tenant', 'list');
like $out, qr/^\Q$tenant_id\E\s+\Q$tenant\E\s+pro\s+-\s+-\s+UTC$/m,
    'tenant list shows it';


# keys

($out, $rc) = run('key', 'create', '--tenant', $tenant);
is $rc, 0, 'key create succeeds';

my @lines = split /\n/, $out;
my $key = $lines[-1] // '';
like $key, qr/^llmgw_live_[0-9A-Za-z]{38}\z/,
    'the last line is a well-formed live key, alone';

my ($key_id, $prefix) =
    $out =~ /^key_id\ (\d+),\ tenant\ \Q$tenant\E,\ tier\ pro,
              \ prefix\ (\S+),\ models\ \*,\ expires\ -$/mx;
ok defined $key_id,
    'key create prints key_id, tenant, tier, prefix, models and expiry';
is $prefix, substr($key, 0, 15), 'the prefix is the first 15 characters';

my $row = $dbh->selectrow_hashref(
    "SELECT encode(key_hash, 'hex') AS hash, display_prefix, tier,"
    . " tenant_id, revoked_at FROM llm.api_keys WHERE key_id = ?",
    undef, $key_id);

is $row->{hash}, hmac_sha256_hex($key, $secret),
    'the database holds HMAC-SHA256(secret, key)';
is $row->{display_prefix}, $prefix, 'and the display prefix';
is $row->{tier}, 'pro', 'the tier defaults to the tenant\'s';
is $row->{tenant_id}, $tenant_id, 'the key belongs to the tenant';

is db_mentions($key), 0, 'the plain key is nowhere in the database';
is db_mentions(substr($key, 11)), 0,
    'nor is its random part';

my $line = "$row->{hash} $key_id $tenant_id pro $tenant 0 * -";
ok snapshot_has($line), 'the snapshot has the new key';

($out, $rc) = run('key', 'create', '--tenant', $tenant, '--tier', 'gold',
                  '--test');
my $test_key = (split /\n/, $out)[-1] // '';
like $test_key, qr/^llmgw_test_[0-9A-Za-z]{38}\z/, '--test makes a test key';
like $out, qr/, tier gold, /, '--tier overrides the tenant\'s';

($out, $rc) = run('key', 'create', '--tenant', "$tag-nobody");
isnt $rc, 0, 'key create for an unknown tenant fails';
unlike $out, qr/llmgw_/, 'and prints no key';

($out, $rc) = run('key', 'list', '--tenant', $tenant);
like $out, qr/^\Q$key_id\E\s+\Q$tenant\E\s+pro\s+\Q$prefix\E\s/m,
    'key list shows the key with its prefix';
unlike $out, qr/\Q$key\E/, 'key list does not show the key';

($out, $rc) = run('key', 'revoke', $key_id);
is $rc, 0, 'key revoke succeeds';
ok !snapshot_has($line), 'the revoked key is gone from the snapshot';
ok defined $dbh->selectrow_array(
    'SELECT revoked_at FROM llm.api_keys WHERE key_id = ?', undef, $key_id),
    'revoked_at is set';

($out, $rc) = run('snapshot');
is $rc, 0, 'snapshot succeeds';
open my $fh, '<', $snapshot or die "$snapshot: $!";
my $first = <$fh>;
close $fh;
is $first, "llmgw-keys 3\n", 'the snapshot starts with its header';
is((stat $snapshot)[2] & 07777, 0640, 'the snapshot is mode 0640');


# settle records

my $ts_ms = 1795954800123;
my %rec = (
    tenant_id => $tenant_id, key_id => $key_id, status => 200, flags => 2,
    input => 2000, output => 1500, cached => 128, cache_write => 64,
    reasoning => 300, reserved => 8000,
    ts_ms => $ts_ms, api => 2, request_id => "$tag-r1",
    model => 'claude-sonnet-4', finish => 'stop', up_api => 1,
    backend => 'gpt-a',
);

my $ca = connect_accountd();
my $cb = connect_accountd();

syswrite $ca, frame(%rec);
my $ack = read_frame($ca);
ok $ack, 'an ACK comes back';
is $ack->{type}, 2, 'of type ACK';
is $ack->{version}, 2, 'of version 2, which an older nginx reads';
is $ack->{request_id}, "$tag-r1", 'for the request';

$row = $dbh->selectrow_hashref(
    "SELECT tenant_id, key_id, model, api, input_tokens, output_tokens,"
    . " cached_input_tokens, cache_write_tokens, reasoning_tokens,"
    . " reserved_tokens, finish_reason, status, flags,"
    . " estimated::int, partial::int,"
    . " (extract(epoch FROM ts) * 1000)::bigint AS ts_ms,"
    . " upstream_api, backend"
    . " FROM llm.usage WHERE request_id = ?", undef, "$tag-r1");

my %want = (
    tenant_id => $tenant_id, key_id => $key_id, model => 'claude-sonnet-4',
    api => 'anthropic', input_tokens => 2000, output_tokens => 1500,
    cached_input_tokens => 128, cache_write_tokens => 64,
    reasoning_tokens => 300, reserved_tokens => 8000,
    finish_reason => 'stop', status => 200, flags => 2, estimated => 0,
    partial => 1, ts_ms => $ts_ms, upstream_api => 'openai',
    backend => 'gpt-a',
);

is_deeply $row, \%want, 'the usage row has every field of the record';

# what served: a record of version 2 (an older nginx) says nothing of it,
# nor one that reached no backend; a backend's name is stored as any text

syswrite $ca, frame(%rec, version => 2, request_id => "$tag-v2");
$ack = read_frame($ca);
is $ack && $ack->{request_id}, "$tag-v2", 'a record of version 2 is acked';
is $ack && $ack->{version}, 2, 'at version 2';
is_deeply usage_row("$tag-v2"),
    { %want, upstream_api => undef, backend => undef },
    'and written with upstream_api and backend NULL, the rest as sent';

syswrite $ca, frame(%rec, request_id => "$tag-nob", up_api => 0,
                    backend => '');
read_frame($ca);
is_deeply usage_row("$tag-nob"),
    { %want, upstream_api => undef, backend => undef },
    'a record of version 3 without a backend: NULL too';

for my $b ([ 'b64', 'b' x 64, 'b' x 64, 3, 'responses' ],
           [ 'bq', "q'\"\\,\t\n{}\xff\\N", q{q'"\,??{}?\N}, 2, 'anthropic' ],
           [ 'b8', "claude-\xc3\xa9", "claude-\x{e9}", 4, 'embeddings' ]) {
    my ($id, $sent, $name, $up, $up_name) = @$b;
    syswrite $ca, frame(%rec, request_id => "$tag-$id", backend => $sent,
                        up_api => $up);
    read_frame($ca);
    my $got = usage_row("$tag-$id");
    utf8::decode($got->{backend}) if defined $got->{backend};
    is_deeply $got, { %want, backend => $name, upstream_api => $up_name },
        "backend $id: stored as valid UTF-8, the rest ?, up_api $up";
}

my $cf = connect_accountd();
syswrite $cf, frame(%rec, request_id => "$tag-b65", backend => 'b' x 65);
ok connection_closed($cf), 'a backend of 65 bytes closes the connection';
is usage_count("$tag-b65"), 0, 'and is not written';

my $cg = connect_accountd();
syswrite $cg, frame(%rec, request_id => "$tag-up5", up_api => 5);
ok connection_closed($cg), 'an up_api not recorded closes the connection';
is usage_count("$tag-up5"), 0, 'and is not written';

# the same figures from another backend are another record
syswrite $ca, frame(%rec, request_id => "$tag-v2", backend => 'gpt-b');
$ack = read_frame($ca);
is $ack && $ack->{request_id}, "$tag-v2",
    'a replay naming another backend is acknowledged';
is $dbh->selectrow_array(
    'SELECT backend FROM llm.usage_rejected WHERE request_id = ?', undef,
    "$tag-v2"), 'gpt-b', 'and kept in llm.usage_rejected with its backend';
is usage_row("$tag-v2")->{backend}, undef, 'the row keeps its own';

# the ledger's own bounds, for a row written by hand
for my $c ([ 'upstream_api', 'count_tokens' ], [ 'backend', 'b' x 65 ],
           [ 'backend', '' ]) {
    my ($col, $v) = @$c;
    my $ok = eval {
        local $dbh->{PrintError} = 0;
        local $dbh->{RaiseError} = 1;
        $dbh->do("INSERT INTO llm.usage (request_id, tenant_id, model, api,"
                 . " input_tokens, ts, $col)"
                 . " VALUES (?, ?, 'm', 'openai', 1, now(), ?)", undef,
                 "$tag-chk", $tenant_id, $v);
    };
    ok !$ok && $dbh->state eq '23514',
        "llm.usage refuses $col '" . substr($v, 0, 12) . "' (length "
        . length($v) . ')';
}

syswrite $ca, frame(%rec);
$ack = read_frame($ca);
is $ack && $ack->{request_id}, "$tag-r1", 'a replayed record is acknowledged';
is usage_count("$tag-r1"), 1, 'and still counted once';

# a model named in UTF-8 is stored as it is (it must match its price);
# bytes that are not UTF-8, and control characters, as '?'
for my $m ([ "u8", "mod\xc3\xa8le-\xe6\x97\xa5\xe6\x9c\xac-\xf0\x9f\x99\x82",
             "mod\x{e8}le-\x{65e5}\x{672c}-\x{1f642}" ],
           [ "u8bad", "a\xffb\xc3(c\x01d\xed\xa0\x80e", 'a?b?(c?d???e' ]) {
    my ($id, $sent, $want) = @$m;
    syswrite $ca, frame(%rec, request_id => "$tag-$id", model => $sent);
    read_frame($ca);
    my $got = $dbh->selectrow_array(
        'SELECT model FROM llm.usage WHERE request_id = ?', undef,
        "$tag-$id");
    utf8::decode($got) if defined $got;
    is $got, $want, "model bytes $id: stored as " . ($id eq 'u8'
        ? 'sent' : 'valid UTF-8, the rest ?');
}

# the same request_id with other figures (or another time) is refused:
# acknowledged, not counted, kept aside and logged

syswrite $ca, frame(%rec, output => 1501)
             . frame(%rec, ts_ms => $ts_ms + 1);
my %got;
$got{$_->{request_id}}++ for grep { $_ } read_frame($ca), read_frame($ca);
is $got{"$tag-r1"}, 2, 'a record with other figures is acknowledged';
is $dbh->selectrow_array(
    'SELECT output_tokens FROM llm.usage WHERE request_id = ?', undef,
    "$tag-r1"), 1500, 'the row keeps its first figures';
is usage_count("$tag-r1"), 1, 'and is not doubled, not even at another ts';
like $dbh->selectrow_array(
    'SELECT error FROM llm.usage_rejected WHERE request_id = ?', undef,
    "$tag-r1") // '', qr/this request_id already, with other figures/,
    'the different one is in llm.usage_rejected';

# the same request_id under another tenant, with the same figures: not
# the first one's replay
($out, $rc) = run('tenant', 'create', '--name', "$tag-other", '--tier',
                  'pro');
chomp(my $other_id = $out);
$dbh->do('DELETE FROM llm.usage_rejected WHERE request_id = ?', undef,
         "$tag-r1");
syswrite $ca, frame(%rec, tenant_id => $other_id, key_id => 0);
$ack = read_frame($ca);
is $ack && $ack->{request_id}, "$tag-r1",
    'a record of another tenant with a request_id taken is acknowledged';
is_deeply $dbh->selectrow_arrayref(
    'SELECT count(*), min(tenant_id) FROM llm.usage WHERE request_id = ?',
    undef, "$tag-r1"), [ 1, $tenant_id ],
    'not counted: the row is the first tenant\'s';
is $dbh->selectrow_array(
    'SELECT tenant_id FROM llm.usage_rejected WHERE request_id = ?', undef,
    "$tag-r1"), $other_id, 'it is in llm.usage_rejected';

# a batch costs in bigint up to 2e8 tokens a figure, in numeric above:
# the same p$ as llm.cost_at() works out, NULL where it does not fit
$dbh->do(q{INSERT INTO llm.prices (model, effective_from, input_per_mtok,
               output_per_mtok, cached_input_per_mtok, cache_write_per_mtok)
           VALUES ($1, '2000-01-01', 10000000000, 9999999999, 9999999998,
                   9999999997)}, undef, "$tag-dear");
my $now_ms = int(time() * 1000);
my @big = ([ 'big1', 200000000, 100000000, 100000000, 200000000 ],
           [ 'big2', 200000000, 0, 0, 200000001 ],
           [ 'big3', 300000000, 1, 2, 3 ],
           [ 'big4', 1, 0, 0, 1000000000 ]);
syswrite $ca, join('', map {
    my ($id, $in, $cached, $cw, $outp) = @$_;
    frame(%rec, request_id => "$tag-$id", model => "$tag-dear",
          input => $in, cached => $cached, cache_write => $cw,
          output => $outp, reasoning => 0, ts_ms => $now_ms)
} @big);
read_frame($ca) for @big;
is_deeply $dbh->selectall_arrayref(q{
    SELECT u.request_id, u.cost_pusd::text,
           llm.cost_at(u.price_id, u.input_tokens, u.cached_input_tokens,
                       u.cache_write_tokens, u.output_tokens)::text
      FROM llm.usage u WHERE u.model = $1 ORDER BY 1}, undef, "$tag-dear"),
    [
      [ "$tag-big1", '3999999999300000000', '3999999999300000000' ],
      [ "$tag-big2", '4000000009799999999', '4000000009799999999' ],
      [ "$tag-big3", '3000000029999999989', '3000000029999999989' ],
      [ "$tag-big4", undef, undef ], ],
    'costs at the edges of bigint: those llm.cost_at() gives';

# a batch across a change of price: each record at the price of its ts
$dbh->do(q{INSERT INTO llm.prices (model, effective_from, input_per_mtok,
               output_per_mtok, cached_input_per_mtok)
           VALUES ($1, '2000-01-01', 1000000, 2000000, 500000),
                  ($1, to_timestamp($2 / 1000.0), 3000000, 4000000, 0)},
         undef, "$tag-move", $now_ms - 60_000);
syswrite $ca, join('', map {
    frame(%rec, request_id => "$tag-move$_->[0]", model => "$tag-move",
          input => 1000, cached => 100, cache_write => 0, output => 10,
          reasoning => 0, ts_ms => $_->[1])
} [ 1, $now_ms - 120_000 ], [ 2, $now_ms ], [ 3, $now_ms - 60_001 ]);
read_frame($ca) for 1 .. 3;
is_deeply $dbh->selectall_arrayref(q{
    SELECT u.request_id, u.cost_pusd::text
      FROM llm.usage u WHERE u.model = $1 ORDER BY 1}, undef, "$tag-move"),
    [ [ "$tag-move1", '970000000' ], [ "$tag-move2", '2740000000' ],
      [ "$tag-move3", '970000000' ] ],
    'a batch across a change of price: each record at its own price';

# two frames in one write, and one frame in two writes

syswrite $ca, frame(%rec, request_id => "$tag-r2", api => 1, finish => '')
             . frame(%rec, request_id => "$tag-r3", api => 3);
%got = map { $_->{request_id} => 1 } grep { $_ } read_frame($ca),
    read_frame($ca);
is_deeply \%got, { "$tag-r2" => 1, "$tag-r3" => 1 },
    'two frames in one write get two ACKs';

my $f = frame(%rec, request_id => "$tag-r4");
syswrite $ca, substr($f, 0, 7);
select undef, undef, undef, 0.2;
syswrite $ca, substr($f, 7);
$ack = read_frame($ca);
is $ack && $ack->{request_id}, "$tag-r4", 'a frame split in two writes';

$row = $dbh->selectrow_hashref(
    'SELECT api, finish_reason FROM llm.usage WHERE request_id = ?', undef,
    "$tag-r2");
is_deeply $row, { api => 'openai', finish_reason => undef },
    'api 1 is openai, an empty finish_reason is NULL';
is $dbh->selectrow_array('SELECT api FROM llm.usage WHERE request_id = ?',
                         undef, "$tag-r3"), 'responses', 'api 3 is responses';

# a malformed frame closes its connection and nothing else

syswrite $cb, "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
ok connection_closed($cb), 'garbage closes the connection';

my $cc = connect_accountd();
syswrite $cc, frame(%rec, request_id => "$tag-r5") . "\0\0\0\x10" . 'x' x 16;
ok connection_closed($cc), 'a bad length closes the connection';
ok wait_for(sub { usage_count("$tag-r5") == 1 }),
    'a good frame before the bad one is still written';

syswrite $ca, frame(%rec, request_id => "$tag-r6");
$ack = read_frame($ca);
is $ack && $ack->{request_id}, "$tag-r6", 'the other connection still works';

my $cd = connect_accountd();
syswrite $cd, frame(%rec, request_id => "$tag-r7", type => 2, api => 0,
                    version => 2);
ok connection_closed($cd), 'an ACK sent to accountd closes the connection';
is usage_count("$tag-r7"), 0, 'and is not written';

# a record PostgreSQL refuses is kept aside, acknowledged, and does not
# hold up the records around it

syswrite $ca, frame(%rec, request_id => "$tag-r8")
             . frame(%rec, request_id => "$tag-bad", tenant_id => 2**62)
             . frame(%rec, request_id => "$tag-r9");
%got = map { $_->{request_id} => 1 } grep { $_ } read_frame($ca),
    read_frame($ca), read_frame($ca);
is_deeply \%got, { "$tag-r8" => 1, "$tag-bad" => 1, "$tag-r9" => 1 },
    'a batch with a refused record: every record is acknowledged';
is usage_count("$tag-r8") + usage_count("$tag-r9"), 2,
    'its neighbours are written';
is usage_count("$tag-bad"), 0, 'the refused record is not in llm.usage';
like $dbh->selectrow_array(
    'SELECT error FROM llm.usage_rejected WHERE request_id = ?', undef,
    "$tag-bad") // '', qr/^23503 /, 'it is in llm.usage_rejected';
is_deeply $dbh->selectrow_arrayref(
    'SELECT upstream_api, backend FROM llm.usage_rejected'
    . ' WHERE request_id = ?', undef, "$tag-bad"), [ 'openai', 'gpt-a' ],
    'with the backend that served it';

# a client that sends and hangs up at once still gets its record written

my $ce = connect_accountd();
syswrite $ce, frame(%rec, request_id => "$tag-r10");
close $ce;
ok wait_for(sub { usage_count("$tag-r10") == 1 }),
    'a record sent just before closing is written';

close $ca;


# accountd's log

SKIP: {
    skip 'accountd logs to stderr, not to a file', 4 unless -f $log;

    ok wait_for(sub { log_since($log, $log_start) =~ /malformed frame/ }),
        'the malformed frame is logged';
    like log_since($log, $log_start),
        qr/record "\Q$tag\E-r1" refused: llm.usage has this request_id/,
        'so is the record refused as a different duplicate';

    # whole-log matches, so a failure must not print the log
    my $text = log_since($log, 0);
    ok index($text, $key) < 0, 'the key is not in the log';
    ok index($text, $test_key) < 0, 'nor the test key';
    ok log_since($log, $log_start) !~ / FATAL /, 'no fatal errors';
}

done_testing();


sub run {
    my @args = @_;

    my $pid = open my $fh, '-|';
    die "fork: $!" unless defined $pid;

    if ($pid == 0) {
        open STDERR, '>', '/dev/null';
        exec $accountd, '-c', $conf, @args or exit 127;
    }

    local $/;
    my $out = <$fh> // '';
    close $fh;

    return ($out, $? >> 8);
}


# in how many rows of the llm schema's tables the string appears

sub db_mentions {
    my ($s) = @_;
    my $n = 0;

    my $tables = $dbh->selectcol_arrayref(
        "SELECT quote_ident(table_name) FROM information_schema.tables"
        . " WHERE table_schema = 'llm' AND table_type = 'BASE TABLE'");

    for my $t (@$tables) {
        $n += $dbh->selectrow_array(
            "SELECT count(*) FROM llm.$t r WHERE strpos(r::text, ?) > 0",
            undef, $s);
    }

    return $n;
}


sub snapshot_has {
    my ($line) = @_;

    open my $fh, '<', $snapshot or die "$snapshot: $!";
    my $found = grep { $_ eq "$line\n" } <$fh>;
    close $fh;

    return $found;
}


sub usage_row {
    my ($id) = @_;

    return $dbh->selectrow_hashref(
        "SELECT tenant_id, key_id, model, api, input_tokens, output_tokens,"
        . " cached_input_tokens, cache_write_tokens, reasoning_tokens,"
        . " reserved_tokens, finish_reason, status, flags,"
        . " estimated::int, partial::int,"
        . " (extract(epoch FROM ts) * 1000)::bigint AS ts_ms,"
        . " upstream_api, backend"
        . " FROM llm.usage WHERE request_id = ?", undef, $id);
}


sub connect_accountd {
    my $s = IO::Socket::UNIX->new(Type => SOCK_STREAM, Peer => $socket)
        or die "connect to $socket: $!";
    binmode $s;
    return $s;
}


# a settle record of version 3, or of version 2 as an older nginx sends

sub frame {
    my (%r) = @_;
    my $v = $r{version} // 3;

    my $p = pack('C C n N q> q> Q> Q> Q> Q> Q> Q> q> C',
                 $v, $r{type} // 1, $r{status} // 200, $r{flags} // 0,
                 $r{tenant_id}, $r{key_id} // 0, $r{input} // 0,
                 $r{output} // 0, $r{cached} // 0, $r{cache_write} // 0,
                 $r{reasoning} // 0, $r{reserved} // 0, $r{ts_ms},
                 $r{api} // 1)
          . pack('C/a* C/a* C/a*', $r{request_id}, $r{model} // '',
                 $r{finish} // '');

    $p .= pack('C C/a*', $r{up_api} // 0, $r{backend} // '') if $v == 3;

    return pack('N', length $p) . $p;
}


sub read_exactly {
    my ($s, $n, $deadline) = @_;
    my $buf = '';
    my $sel = IO::Select->new($s);

    while (length $buf < $n) {
        my $left = $deadline - time;
        return undef if $left <= 0 || !$sel->can_read($left);
        my $r = sysread $s, $buf, $n - length $buf, length $buf;
        return undef unless $r;
    }

    return $buf;
}


sub read_frame {
    my ($s) = @_;
    my $deadline = time + 5;

    for ( ;; ) {
        my $len = read_exactly($s, 4, $deadline) // return undef;
        my $p = read_exactly($s, unpack('N', $len), $deadline)
            // return undef;

        my ($version, $type) = unpack 'C C', $p;

        # the key set (llm_key.h) comes on every connection: not tested here
        next if $type >= 3 && $type <= 5;

        my ($id) = unpack 'C/a', substr($p, 81);

        return { version => $version, type => $type, request_id => $id };
    }
}


sub connection_closed {
    my ($s) = @_;
    my $sel = IO::Select->new($s);
    my $deadline = time + 5;

    while ($sel->can_read($deadline - time)) {
        my $r = sysread $s, my $buf, 4096;
        return 1 if !$r;
        last if time > $deadline;
    }

    return 0;
}
