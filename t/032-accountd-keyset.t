#!/usr/bin/perl

# The key set that accountd pushes to every connection over the records
# socket (llm_key.h): a whole set at once on connecting, a new one with a
# higher generation on every key change (command line or plain SQL) on
# every connection, ACKs that still come and never split a
# frame while a set is being sent, an older set finished before a newer
# one, and a client that does not read holding up nobody else.  Every
# stream is parsed strictly, frame by frame.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use LLMGW ();
use LLMGW::Accountd;
use Test::More;
use IO::Select;
use IO::Socket::UNIX;
use Socket qw(SOCK_STREAM);
use Digest::SHA qw(hmac_sha256 hmac_sha256_hex);
use Time::HiRes qw(time sleep);

my $st = accountd_stack();

my $accountd = $st->{accountd};
my $conf = $st->{LLMGW_ACCOUNTD_CONF};
my $socket = $st->{LLMGW_ACCOUNTD_SOCKET};
my $secret = $st->{secret};
my $log = $st->{log};
my $dbh = $st->{dbh};

# unique across runs and across tests sharing the database
my $tag = sprintf 't032-%d-%d', $$, time % 1000000;
my $tenant = "$tag-a";

my $log_start = -s $log // 0;

# record types, llm_record.h
use constant { T_ACK => 2, T_BEGIN => 3, T_KEY => 4, T_END => 5 };

my $clients = 0;


my ($out, $rc) = run('tenant', 'create', '--name', $tenant, '--tier', 'pro');
is $rc, 0, 'tenant create';
chomp(my $tenant_id = $out);

my $k1 = create_key('--tenant', $tenant);
my $k2 = create_key('--tenant', $tenant, '--tier', 'gold', '--models',
                    'gpt-4o,claude-sonnet-4', '--expires-in', '2h');
ok $k1 && $k2, 'two keys created';


# on connecting, a whole set at once

my $c1 = client();
my $set = wait_set($c1, sub { 1 }, 1);
ok $set, 'a client gets a whole set on connecting';
is $c1->{first}, T_BEGIN, 'the first frame is BEGIN';
ok $set && $set->{count} == @{$set->{keys}},
    'END has the count of BEGIN and of the KEY frames between them';
ok $set && $set->{generation} > 1_600_000_000_000,
    'the generation starts from the time in milliseconds';
ok $set && sorted($set), 'KEY frames are in ascending order of their hash';

# the keys were created just now: the set may still be the one before
$set = has_key($set, $k2) ? $set
       : wait_set($c1, sub { has_key($_[0], $k1) && has_key($_[0], $k2) }, 1);
ok $set, 'the keys just created are in the newest set';
is_deeply $set && own_keys($set), db_keys(),
    'the set holds every usable key of the tenant, with the fields of '
    . 'llm.api_keys';
is_deeply $set && [ grep { !exists $set->{keys_by_hash}{$_} }
                    usable_hashes() ],
    [], 'and every other usable key in the database';
no_errors($c1, 'the first client');


# a key created: every connected client gets a new set

my $c2 = client();
my $c3 = client();
my %gen;

for my $c ($c2, $c3) {
    my $s = wait_set($c, sub { 1 }, 1);
    $gen{$c} = $s ? $s->{generation} : 0;
}

ok $gen{$c2} && $gen{$c3}, 'two more clients get their set';

my $k3 = create_key('--tenant', $tenant);

for my $c ($c2, $c3) {
    my $s = wait_set($c, sub { has_key($_[0], $k3) }, 1);
    ok $s, "client $c->{n} gets a set with the new key";
    ok $s && $s->{generation} > $gen{$c}, 'with a higher generation';
    $gen{$c} = $s ? $s->{generation} : 0;
}

my $k3_id = key_id($k3);


# revoked with plain SQL: gone

$dbh->do('UPDATE llm.api_keys SET revoked_at = now() WHERE key_id = ?',
         undef, $k3_id);

for my $c ($c2, $c3) {
    my $s = wait_set($c, sub { !has_key($_[0], $k3) }, 1);
    ok $s, "client $c->{n}: a set without the revoked key";
    ok $s && $s->{generation} > $gen{$c}, 'with a higher generation';
    ok $s && has_key($s, $k1), 'the other keys stay';
    $gen{$c} = $s ? $s->{generation} : 0;
}

no_errors($_, "client $_->{n}") for $c2, $c3;


# a set larger than a socket buffer: many keys with long model lists

my $bulk = 2000;
my $models = join ',', map { "m$_-" . ('x' x 110) } 1 .. 8;

$dbh->do(
    "INSERT INTO llm.api_keys (tenant_id, key_hash, display_prefix, tier,"
    . " models)"
    . " SELECT ?, sha256(convert_to(? || '-' || i, 'UTF8')),"
    . " 'llmgw_live_bulk', 'pro', string_to_array(?, ',')"
    . " FROM generate_series(1, ?) AS i", undef, $tenant_id, $tag, $models,
    $bulk);

for my $c ($c2, $c3) {
    my $s = wait_set($c, sub { @{$_[0]{keys}} >= $bulk }, 3);
    ok $s, "client $c->{n} gets the large set";
    $gen{$c} = $s ? $s->{generation} : 0;
}

my $big = $c2->{sets}[-1];
ok length($big->{bytes}) > 1_000_000, 'the set is over a megabyte';


# ACKs while a set is being sent: they come, between frames

my %rec = (
    tenant_id => $tenant_id, key_id => key_id($k1), status => 200,
    input => 10, output => 20, ts_ms => int(time * 1000), api => 1,
    model => 'gpt-4o', finish => 'stop',
);

my $c4 = client();
sleep 0.2;                          # accountd is now stuck in the set
syswrite $c4->{s}, frame(%rec, request_id => "$tag-r1");
pump($c4, 0.01);
syswrite $c4->{s}, frame(%rec, request_id => "$tag-r2");

ok wait_for(sub { usage_count("$tag-r1") + usage_count("$tag-r2") == 2 }),
    'records sent while a set is being sent are written';

# a newer set while this one is half-sent
$dbh->do('UPDATE llm.api_keys SET tier = ? WHERE key_id = ?', undef,
         'gold', key_id($k1));
sleep 0.5;
syswrite $c4->{s}, frame(%rec, request_id => "$tag-r3");
sleep 0.2;

my $s4 = wait_set($c4, sub { tier_of($_[0], $k1) eq 'gold' }, 5);
ok $s4, 'the client gets the newer set';
ok $c4->{sets}[0] && $c4->{sets}[0]{count} >= $bulk,
    'after the whole set it was sent first';
ok wait_for(sub { pump($c4, 0.05); @{$c4->{acks}} == 3 }),
    'every ACK comes back';
is_deeply [ sort map { $_->{request_id} } @{$c4->{acks}} ],
    [ "$tag-r1", "$tag-r2", "$tag-r3" ], 'for each record';
ok !grep({ $_->{sets_before} == 0 } @{$c4->{acks}}),
    'the ACKs waited for the end of the set that was being sent';
# a connection also asks for a fresh set: two or three, never one cut short
ok @{$c4->{sets}} >= 2 && @{$c4->{sets}} <= 3,
    'the first set whole, then the newer ones';
no_errors($c4, 'the client that sent records');


# a client that does not read holds up nobody

my $slow = client();
sleep 0.2;

my @changes;

for my $i (1 .. 4) {
    my $k = create_key('--tenant', $tenant);
    my $s = wait_set($c2, sub { has_key($_[0], $k) }, 1);
    push @changes, $s;
    pump($c3, 0);
}

is scalar(grep { $_ } @changes), 4,
    'four changes, each reaching a reading client, while '
    . 'another client does not read';

my $newest = $changes[-1] ? $changes[-1]{generation} : -1;

ok wait_for(sub { pump($slow, 0.05);
                  @{$slow->{sets}} && $slow->{sets}[-1]{generation}
                  >= $newest }),
    'the client that did not read gets the newest set once it reads';
is scalar @{$slow->{sets}}, 2,
    'its first set whole, then the newest; the sets between are skipped';
no_errors($slow, 'the slow client');

ok wait_for(sub { pump($c3, 0.05); @{$c3->{sets}}
                  && $c3->{sets}[-1]{generation} >= $newest }),
    'the other reading client has the newest set too';
no_errors($_, "client $_->{n}") for $c1, $c2, $c3;


# a client gone in the middle of a set, and new ones still served

my $gone = client();
sleep 0.1;
sysread $gone->{s}, my $part, 1000;
close $gone->{s};

my $c5 = client();
ok wait_set($c5, sub { 1 }, 3), 'a new client still gets a whole set';

# its set cannot be sent: what it sent is still read and written
my $hangup = client();
syswrite $hangup->{s}, frame(%rec, request_id => "$tag-r4");
close $hangup->{s};
ok wait_for(sub { usage_count("$tag-r4") == 1 }),
    'a record sent just before closing, with the set unread, is written';


# clean up: the bulk keys go, and every client sees it

$dbh->do('UPDATE llm.api_keys SET revoked_at = now()'
         . ' WHERE tenant_id = ? AND revoked_at IS NULL', undef, $tenant_id);

ok wait_set($c5, sub { !grep { $_->{tenant} eq $tenant } @{$_[0]{keys}} },
            3), 'revoking every key of the tenant empties it from the set';


# accountd's log

SKIP: {
    skip 'accountd logs to stderr, not to a file', 4 unless -f $log;

    my $text = log_since($log, $log_start);

    like $text, qr/ LOG key set \d+ built, \d+ keys$/m,
        'each set built is logged with its generation and count';
    like $text,
        qr/ DEBUG client #\d+ \(pid \d+\): key set \d+ sent, \d+ keys$/m,
        'a set sent is logged per connection';
    ok $text !~ / (?:FATAL|ERROR) /, 'no errors in the log'
        or diag join "\n", grep { / (?:FATAL|ERROR) / } split /\n/, $text;

    my $all = log_since($log, 0);
    ok index($all, $k1) < 0 && index($all, $k3) < 0,
        'no key in the log';
}

done_testing();


# --- the stream -------------------------------------------------------------

sub client {
    my $s = IO::Socket::UNIX->new(Type => SOCK_STREAM, Peer => $socket)
        or die "connect to $socket: $!";
    binmode $s;
    $s->blocking(0);

    return { s => $s, n => ++$clients, buf => '', sets => [], acks => [],
             errors => [], cur => undef, first => undef };
}


# reads what is there for up to $wait seconds and parses it

sub pump {
    my ($c, $wait) = @_;
    my $sel = IO::Select->new($c->{s});
    my $deadline = time + $wait;

    for ( ;; ) {
        my $left = $deadline - time;
        last unless $sel->can_read($left > 0 ? $left : 0);
        my $r = sysread $c->{s}, $c->{buf}, 1 << 20, length $c->{buf};
        if (!defined $r || $r == 0) {
            $c->{eof} = 1;
            last;
        }
        parse($c);
    }

    parse($c);
}


sub parse {
    my ($c) = @_;

    while (length $c->{buf} >= 4 && !@{$c->{errors}}) {
        my $len = unpack 'N', $c->{buf};

        if ($len < 2 || $len > 4096) {
            return error($c, "frame length $len");
        }

        last if length $c->{buf} < 4 + $len;

        my $f = substr $c->{buf}, 0, 4 + $len, '';
        my ($version, $type) = unpack 'x4 C C', $f;
        my $p = substr $f, 6;

        return error($c, "version $version") if $version != 2;

        $c->{first} //= $type;

        if ($type == T_ACK) {
            return error($c, 'ACK length') if length $p < 79;
            my ($id, $model, $finish) = unpack 'C/a C/a C/a', substr($p, 79);
            return error($c, 'ACK length')
                if 79 + 3 + length($id) + length($model) + length($finish)
                   != length $p;
            push @{$c->{acks}}, { request_id => $id,
                                  sets_before => scalar @{$c->{sets}} };

        } elsif ($type == T_BEGIN || $type == T_END) {
            return error($c, 'BEGIN/END length') if length $p != 12;
            my ($gen, $count) = unpack 'Q> N', $p;

            if ($type == T_BEGIN) {
                return error($c, 'BEGIN inside a set') if $c->{cur};
                $c->{cur} = { generation => $gen, count => $count,
                              keys => [], keys_by_hash => {}, bytes => $f };
                next;
            }

            my $s = $c->{cur} or return error($c, 'END outside a set');
            $s->{bytes} .= $f;
            return error($c, 'END generation') if $gen != $s->{generation};
            return error($c, 'END count') if $count != $s->{count};
            return error($c, 'KEY frames counted')
                if $count != @{$s->{keys}};
            return error($c, 'generation not higher')
                if @{$c->{sets}} && $gen <= $c->{sets}[-1]{generation};
            push @{$c->{sets}}, $s;
            $c->{cur} = undef;

        } elsif ($type == T_KEY) {
            my $s = $c->{cur} or return error($c, 'KEY outside a set');
            $s->{bytes} .= $f;
            return error($c, 'KEY length') if length $p < 32 + 24 + 4;
            my ($hash, $kid, $tid, $exp) = unpack 'a32 q> q> q>', $p;
            my $rest = substr $p, 56;
            my ($tier, $tname) = unpack 'C/a C/a', $rest;
            $rest = substr $rest, 2 + length($tier) + length($tname);
            return error($c, 'KEY length') if length $rest < 2;
            my ($models) = unpack 'n/a', $rest;
            return error($c, 'KEY length')
                if length($models) != length($rest) - 3;
            my $caps = unpack 'C', substr($rest, -1);
            return error($c, 'KEY caps') if $caps > 3;
            return error($c, 'KEY names')
                if $tier !~ /^[A-Za-z0-9_.-]{1,31}\z/
                   || $tname !~ /^[A-Za-z0-9_.-]{1,63}\z/
                   || $models !~ m{^(?:\*|[A-Za-z0-9_.:/\@+-]{1,127}
                                    (?:,[A-Za-z0-9_.:/\@+-]{1,127})*)\z}x;
            my $k = { hash => unpack('H*', $hash), key_id => $kid,
                      tenant_id => $tid, expires => $exp, tier => $tier,
                      tenant => $tname, models => $models, caps => $caps };
            push @{$s->{keys}}, $k;
            $s->{keys_by_hash}{$k->{hash}} = $k;

        } else {
            return error($c, "frame type $type");
        }
    }
}


sub error {
    my ($c, $what) = @_;
    push @{$c->{errors}}, $what;
    return;
}


sub no_errors {
    my ($c, $who) = @_;
    pump($c, 0);
    is_deeply $c->{errors}, [], "$who: the stream parses strictly";
}


# the first set received from now on that satisfies $cond

sub wait_set {
    my ($c, $cond, $wait) = @_;
    # the time accountd takes is measured elsewhere, not asserted here
    my $deadline = time + $wait * 5 * LLMGW::time_scale();
    my $seen = $c->{seen} // 0;

    for ( ;; ) {
        my $sets = $c->{sets};

        while ($seen < @$sets) {
            my $s = $sets->[$seen++];
            if ($cond->($s)) {
                $c->{seen} = $seen;
                return $s;
            }
        }

        $c->{seen} = $seen;

        my $left = $deadline - time;
        return undef if $left <= 0 || $c->{eof} || @{$c->{errors}};
        pump($c, $left > 0.05 ? 0.05 : $left);
    }
}


sub sorted {
    my ($s) = @_;
    my @h = map { $_->{hash} } @{$s->{keys}};

    for my $i (1 .. $#h) {
        return 0 if $h[$i - 1] ge $h[$i];
    }

    return 1;
}


sub has_key {
    my ($s, $key) = @_;
    return exists $s->{keys_by_hash}{hmac_sha256_hex($key, $secret)};
}


sub tier_of {
    my ($s, $key) = @_;
    my $k = $s->{keys_by_hash}{hmac_sha256_hex($key, $secret)};
    return $k ? $k->{tier} : '';
}


sub own_keys {
    my ($s) = @_;
    return [ sort { $a->{key_id} <=> $b->{key_id} }
             grep { $_->{tenant} eq $tenant } @{$s->{keys}} ];
}


# the tenant's usable keys, as the set should have them

sub db_keys {
    return [ map { { %$_ } } @{$dbh->selectall_arrayref(
        "SELECT encode(k.key_hash, 'hex') AS hash, k.key_id, k.tenant_id,"
        . " CASE WHEN k.expires_at IS NULL THEN 0"
        . " ELSE floor(extract(epoch FROM k.expires_at))::bigint END"
        . " AS expires, k.tier, t.name AS tenant,"
        . " coalesce(array_to_string(k.models, ','), '*') AS models,"
        . " (t.daily_cap_pusd IS NOT NULL OR t.monthly_cap_pusd IS NOT NULL)"
        . "::int + 2 * (k.daily_cap_pusd IS NOT NULL"
        . " OR k.monthly_cap_pusd IS NOT NULL)::int AS caps"
        . " FROM llm.api_keys k JOIN llm.tenants t USING (tenant_id)"
        . " WHERE t.name = ? AND k.revoked_at IS NULL"
        . " AND (k.expires_at IS NULL OR k.expires_at > now())"
        . " ORDER BY k.key_id", { Slice => {} }, $tenant)} ];
}


sub usable_hashes {
    return @{$dbh->selectcol_arrayref(
        "SELECT encode(key_hash, 'hex') FROM llm.api_keys"
        . " WHERE revoked_at IS NULL"
        . " AND (expires_at IS NULL OR expires_at > now())")};
}


sub key_id {
    my ($key) = @_;
    return $dbh->selectrow_array(
        "SELECT key_id FROM llm.api_keys WHERE key_hash = decode(?, 'hex')",
        undef, hmac_sha256_hex($key, $secret));
}


sub create_key {
    my ($out, $rc) = run('key', 'create', @_);
    my $key = (split /\n/, $out)[-1] // '';
    return $rc == 0 && $key =~ /^llmgw_(?:live|test)_\w{38}\z/ ? $key : undef;
}


sub frame {
    my (%r) = @_;

    my $p = pack('C C n N q> q> Q> Q> Q> Q> Q> Q> q> C',
                 2, 1, $r{status}, 0, $r{tenant_id}, $r{key_id},
                 $r{input}, $r{output}, 0, 0, 0, 0, $r{ts_ms}, $r{api})
          . pack('C/a* C/a* C/a*', $r{request_id}, $r{model}, $r{finish});

    return pack('N', length $p) . $p;
}


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
