#!/usr/bin/perl

# Spend caps, continued: a key's own cap, held by the gateway apart from
# its tenant's; caps pushed with the key set, so that a tenant without one
# never waits for accountd; a tier that serves a cheaper model instead of
# refusing; and budget a gateway leased but left idle, given back for the
# other gateways to spend.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use HTTP::Tiny;
use JSON::PP;
use LLMGW;
use Test::More;
use Time::HiRes qw(sleep time);

my $s = stack();

# it stops accountd: an accountd of its own, the stack's runs on for the
# files beside it
own_accountd();

# $1 and $2 per million tokens; the cheaper model a tenth of that
db()->do(q{INSERT INTO llm.prices (model, effective_from, input_per_mtok,
                                   output_per_mtok)
           VALUES ('mock-capped', '2000-01-01', 1000000, 2000000),
                  ('mock-cheap', '2000-01-01', 100000, 200000)
           ON CONFLICT DO NOTHING});

# 9 tokens in and 5 out: 19,000,000 p$, or 1,900,000 on the cheaper model
my $cost = 19_000_000;

sub key_cap {
    my ($t, $usd) = @_;
    db()->do('UPDATE llm.api_keys SET daily_cap_pusd = llm.usd_to_pusd(?)'
             . ' WHERE key_id = ?', undef, $usd, $t->{key_id});
}

sub second_key {
    my ($t) = @_;
    my @lines = split(/\n/, accountd('key', 'create', '--tenant', $t->{name}));
    my ($id) = db()->selectrow_array(
        'SELECT max(key_id) FROM llm.api_keys WHERE tenant_id = ?', undef,
        $t->{id});
    return { %$t, key => $lines[-1], key_id => $id };
}

# A: no cap of its own; key a1 capped at $0.001 (about 52 requests), a2 not
my $a1 = new_tenant(tier => 'pro');
my $a2 = second_key($a1);
key_cap($a1, '0.001');

# B: $0.001 a day; key b1 capped at $0.0005, b2 only by the tenant's
my $b1 = new_tenant(tier => 'pro');
my $b2 = second_key($b1);
accountd('tenant', 'update', '--name', $b1->{name}, '--daily-cap-usd',
         '0.001');
key_cap($b1, '0.0005');

# C: no cap anywhere; D: capped, on the tier that downgrades
my $c = new_tenant(tier => 'pro');
my $d = new_tenant(tier => 'thrifty');
accountd('tenant', 'update', '--name', $d->{name}, '--daily-cap-usd',
         '0.001');

# Z: a cap of 0
my $z = new_tenant(tier => 'pro');
accountd('tenant', 'update', '--name', $z->{name}, '--daily-cap-usd', '0');

# E: capped, for two gateways
my $e = new_tenant(tier => 'pro');
accountd('tenant', 'update', '--name', $e->{name}, '--daily-cap-usd',
         '0.0019');

my $other = accountd_other('third');

my %want = (a1 => [ $a1, 'k' ], a2 => [ $a2, '-' ], b1 => [ $b1, 'tk' ],
            b2 => [ $b2, 't' ], c => [ $c, '-' ], d => [ $d, 't' ],
            e => [ $e, 't' ], z => [ $z, 't' ]);

for my $n (sort keys %want) {
    my ($t, $caps) = @{ $want{$n} };
    is(snapshot_caps($s->{LLMGW_KEY_SNAPSHOT}, $t->{key_id}, $caps), $caps,
       "the key set says which caps key $n answers to: $caps");
    snapshot_caps($other->{snapshot}, $t->{key_id}, $caps);
}

sub gateway {
    my ($socket, $snapshot) = @_;

    return nginx(http => <<"EOF")->run();
    llm_gateway_zone      zone=llm:1m;
    llm_gateway_keys      $snapshot secret=$s->{LLMGW_KEY_SECRET};
    llm_gateway_accountd  unix:$socket;

    llm_gateway_tier  pro      tpm=600000000;
    llm_gateway_tier  thrifty  tpm=600000000  downgrade=mock-cheap;

    server {
        listen  127.0.0.1:%%PORT%%;

        location = /v1/chat/completions {
            llm_gateway       zone=llm;
            proxy_pass        http://127.0.0.1:%%MOCK%%;
            proxy_set_header  x-mock-tokens  5;
        }
    }
EOF
}

my $g1 = gateway($s->{LLMGW_ACCOUNTD_SOCKET}, $s->{LLMGW_KEY_SNAPSHOT});

my $http = HTTP::Tiny->new(timeout => 10, keep_alive => 0);

sub ask {
    my ($ng, $t) = @_;
    return $http->request('POST', $ng->url('/v1/chat/completions'), {
        headers => { 'content-type' => 'application/json',
                     authorization => "Bearer $t->{key}" },
        content => encode_json({ model => 'mock-capped', max_tokens => 10,
                                 messages => [ { role => 'user',
                                                 content => 'Say hello.' } ]
                               }) });
}

# requests one at a time until one is not served, twice: how many were,
# and the refusal.  (The client has the response before nginx settles it:
# the next request may find the last one's reservation still out.)
sub until_refused {
    my ($ng, $t, $max) = @_;
    my ($ok, $r) = (0, undef);
    for (1 .. $max) {
        $r = ask($ng, $t);
        if ($r->{status} != 200) {
            sleep(0.2);
            $r = ask($ng, $t);
            last if $r->{status} != 200;
        }
        $ok++;
    }
    return ($ok, $r);
}

# the cost of a key's rows (or a tenant's), once n rows are there
sub spent {
    my ($col, $id, $n) = @_;
    my ($sum, $rows);
    for (1 .. 100) {
        ($sum, $rows) = db()->selectrow_array(
            "SELECT coalesce(sum(cost_pusd), 0), count(*) FROM llm.usage"
            . " WHERE $col = ?", undef, $id);
        last if $rows >= $n;
        sleep(0.05);
    }
    return $sum;
}

sub quota {
    my ($r) = @_;
    my $j = eval { decode_json($r->{content}) } // {};
    return $r->{status} == 429
           && ($j->{error}{code} // '') eq 'insufficient_quota';
}

# --- a key's own cap ---------------------------------------------------------

my ($ok, $r) = until_refused($g1, $a1, 200);
ok(quota($r), "key a1 stops at its cap: 429 insufficient_quota after $ok");
ok($ok >= 40 && $ok <= 52, "  about what \$0.001 pays for: $ok of 52");
my $sum = spent('key_id', $a1->{key_id}, $ok);
ok($sum <= 1_000_000_000_000 / 1000, "  spent $sum p\$ of 1,000,000,000");

my ($ok2) = until_refused($g1, $a2, 80);
is($ok2, 80, '  the other key of the tenant, without a cap, is served');

# --- a key's cap within its tenant's -----------------------------------------

my ($okb1, $rb1) = until_refused($g1, $b1, 200);
ok(quota($rb1), "key b1 stops at its own cap after $okb1");
ok($okb1 >= 18 && $okb1 <= 26, "  about what \$0.0005 pays for: $okb1 of 26");

# what b1 leased and did not spend goes back to the tenant once idle
sleep(4.5);

my ($okb2, $rb2) = until_refused($g1, $b2, 200);
ok(quota($rb2), "key b2 stops at the tenant's cap after $okb2");
my $tsum = spent('tenant_id', $b1->{id}, $okb1 + $okb2);
ok($tsum <= 1_000_000_000,
   "  the tenant spent $tsum p\$ of 1,000,000,000, both keys together");
ok($okb1 + $okb2 >= 42, '  and about all of it: '
   . ($okb1 + $okb2) . ' of 52 requests');
ok(spent('key_id', $b1->{key_id}, $okb1) <= 500_000_000,
   '  key b1 within its own cap');

# --- the key set says who has no cap: accountd is not asked ------------------

ok(accountd_stop(), 'accountd stopped');

$r = ask($g1, $c);
is($r->{status}, 200, 'a tenant without a cap is served while accountd is '
   . 'down');

$r = ask($g1, $z);
is($r->{status}, 503, '  a capped one this gateway holds no budget of is '
   . 'refused');
is(eval { decode_json($r->{content})->{error}{code} }, 'budget_unavailable',
   '  budget_unavailable');

ok(accountd_start(), 'accountd started again');

# the gateway reconnects within its backoff
for (1 .. 100) {
    last if ask($g1, $z)->{status} == 429;
    sleep(0.1);
}

# --- a spent cap downgrades to the cheaper model ----------------------------

my ($okd, $rd) = (0, undef);
my ($full, $cheap, $header) = (0, 0, 0);
for (1 .. 600) {
    $rd = ask($g1, $d);
    if ($rd->{status} != 200) {
        sleep(0.2);
        $rd = ask($g1, $d);
        last if $rd->{status} != 200;
    }
    $okd++;
    # (the last request's settlement may give back what lets the next
    # one have mock-capped again: they may alternate for a while)
    my $from = $rd->{headers}{'x-llm-downgraded-from'};
    if (defined $from) {
        $cheap++;
        $header++ if $from eq 'mock-capped';
    } else {
        $full++;
    }
}

ok($full >= 40, "tenant d: $full requests on mock-capped");
ok($cheap >= 10, "  and $cheap on mock-cheap, instead of a refusal");
is($header, $cheap, '  each saying x-llm-downgraded-from: mock-capped');
ok(quota($rd), '  and 429 insufficient_quota once neither fits');

my $rows = db()->selectall_hashref(
    'SELECT model, count(*) AS n FROM llm.usage WHERE tenant_id = ?'
    . ' GROUP BY model', 'model', undef, $d->{id});
for (1 .. 100) {
    last if ($rows->{'mock-cheap'}{n} // 0) >= $cheap;
    sleep(0.05);
    $rows = db()->selectall_hashref(
        'SELECT model, count(*) AS n FROM llm.usage WHERE tenant_id = ?'
        . ' GROUP BY model', 'model', undef, $d->{id});
}
is($rows->{'mock-cheap'}{n} // 0, $cheap,
   '  the ledger bills the downgraded requests as mock-cheap');
ok(spent('tenant_id', $d->{id}, $full + $cheap) <= 1_000_000_000,
   '  and the cap held');

# --- idle budget goes back ---------------------------------------------------

my $g2 = gateway($other->{socket}, $other->{snapshot});

$r = ask($g1, $e);
is($r->{status}, 200, 'tenant e: one request through the first gateway, '
   . 'which leases more than half the cap');

my $returned = 0;
for (1 .. 100) {
    ($returned) = db()->selectrow_array(
        'SELECT coalesce(sum(returned_pusd), 0) FROM llm.budget_leases'
        . ' WHERE tenant_id = ?', undef, $e->{id});
    last if $returned > 0;
    sleep(0.1);
}
ok($returned > 0, "  idle for 3 s, it gave back $returned p\$");

my ($oke, $re) = until_refused($g2, $e, 200);
ok(quota($re), "the second gateway then serves $oke");
ok($oke >= 90, "  nearly all the rest of the cap: $oke of 99");
ok(spent('tenant_id', $e->{id}, $oke + 1) <= 1_900_000_000,
   '  and the two never passed it');

$g1->no_alerts();
$g2->no_alerts();

system("kill \$(cat $other->{pidfile}) 2>/dev/null");

done_testing();
