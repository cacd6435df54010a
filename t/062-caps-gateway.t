#!/usr/bin/perl

# Spend caps enforced: each gateway spends only what it leased from the
# tenant's cap, so two gateways, each with its own accountd, on one
# PostgreSQL, never spend more than the cap together; a spent cap is 429
# insufficient_quota, told apart from a rate limit.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use HTTP::Tiny;
use JSON::PP;
use LLMGW;
use POSIX ();
use Test::More;
use Time::HiRes qw(sleep time);

my $s = stack();

# $1 and $2 per million tokens: 10^6 and 2 * 10^6 pico-dollars a token
db()->do(q{INSERT INTO llm.prices (model, effective_from, input_per_mtok,
                                   output_per_mtok)
           VALUES ('mock-capped', '2000-01-01', 1000000, 2000000)
           ON CONFLICT DO NOTHING});

# a request: 9 prompt tokens and 5 out, 19,000,000 p$; reserved at its
# worst, the prompt's bound (the body's bytes, 4 a message and 16) at the
# input price and max_tokens at the output: the last worst case the cap
# cannot pay for is refused, a few requests short of the cap
my $cost = 9 * 1_000_000 + 5 * 2_000_000;

# a cap that pays for about 100 of them
my $cap = '0.0019';
my $cap_pusd = 1_900_000_000;

my @rounds = map { new_tenant(tier => 'pro') } 1 .. 10;
my $single = new_tenant(tier => 'pro');
my $free = new_tenant(tier => 'pro');
my $zero = new_tenant(tier => 'pro');

accountd('tenant', 'update', '--name', $_->{name}, '--daily-cap-usd', $cap)
    for @rounds, $single;
accountd('tenant', 'update', '--name', $zero->{name}, '--daily-cap-usd', '0');

# a second accountd, as a second host would run, on the same database
my $other = accountd_other('second');

# the gateways learn which keys have a cap from the key set
for my $t (@rounds, $single, $zero) {
    snapshot_caps($_, $t->{key_id}, 't')
        for $s->{LLMGW_KEY_SNAPSHOT}, $other->{snapshot};
}

sub gateway {
    my ($socket, $snapshot) = @_;

    return nginx(http => <<"EOF")->run();
    llm_gateway_zone      zone=llm:1m;
    llm_gateway_keys      $snapshot secret=$s->{LLMGW_KEY_SECRET};
    llm_gateway_accountd  unix:$socket;

    llm_gateway_tier  pro  tpm=600000000;

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
my $g2 = gateway($other->{socket}, $other->{snapshot});

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

sub spent {
    my ($t) = @_;
    return db()->selectrow_array(
        'SELECT coalesce(sum(cost_pusd), 0), count(*) FROM llm.usage '
        . 'WHERE tenant_id = ?', undef, $t->{id});
}

sub settled {
    my ($t, $n) = @_;
    my ($sum, $rows);
    for (1 .. 100) {
        ($sum, $rows) = spent($t);
        last if $rows >= $n;
        sleep(0.05);
    }
    return $sum;
}

# --- one gateway, one request at a time -------------------------------------

my ($ok, $r) = (0, undef);
for (1 .. 200) {
    $r = ask($g1, $single);
    last if $r->{status} != 200;
    $ok++;
}

is($r->{status}, 429, "after $ok requests: 429");
my $j = eval { decode_json($r->{content}) } // {};
is_deeply([ $j->{error}{type}, $j->{error}{code} ],
          [ 'insufficient_quota', 'insufficient_quota' ],
          '  insufficient_quota, not a rate limit');
is($r->{headers}{'x-should-retry'}, 'false', '  x-should-retry: false');
ok(($r->{headers}{'retry-after'} // 0) > 0,
   "  Retry-After until the day ends ($r->{headers}{'retry-after'} s)");

my $sum = settled($single, $ok);
ok($sum <= $cap_pusd, "spent $sum p\$ of $cap_pusd");
ok($ok >= 85 && $ok <= 100, "about what the cap pays for: $ok of 100");

$r = ask($g1, $free);
is($r->{status}, 200, 'a tenant without a cap is served');
$r = ask($g1, $zero);
is($r->{status}, 429, 'a cap of 0: refused at once');

# --- two gateways, 300 requests at once, 10 times ----------------------------

my (@over, @total, %served);
for my $t (@rounds) {
    my @kids;
    pipe(my $rd, my $wr) or die;

    for my $k (0 .. 29) {
        my $pid = fork();
        die "fork: $!" unless defined $pid;

        if ($pid == 0) {
            close($rd);
            my $n = 0;
            for my $i (1 .. 10) {
                $n++ if ask(($k + $i) % 2 ? $g1 : $g2, $t)->{status} == 200;
            }
            print $wr "$n\n";
            close($wr);

            # not exit(): the parent's nginx objects would stop them
            POSIX::_exit(0);
        }

        push(@kids, $pid);
    }

    close($wr);
    my $served = 0;
    $served += $_ for <$rd>;
    close($rd);
    waitpid($_, 0) for @kids;

    my $sum = settled($t, $served);
    push(@over, "$t->{name}: $served served at once, $sum p\$")
        if $sum > $cap_pusd || $served > 100;

    $served{$t} = $served;

    diag("two gateways, 300 requests: $served served, $sum of $cap_pusd p\$")
        if $t == $rounds[0];
}

# How much of a cap a burst spends depends on timing: a request refused
# while others' worst cases are still reserved is not asked again, and what
# one gateway holds the other cannot spend.  Once all is settled and the
# idle budget has gone back, one request at a time, alternately, spends
# what is left until both gateways refuse: only then is "nearly all of it"
# a fact.
sleep(4);

for my $t (@rounds) {
    my ($tail, $no) = (0, 0);
    for my $i (1 .. 200) {
        last if $no >= 4;
        if (ask($i % 2 ? $g1 : $g2, $t)->{status} == 200) {
            ($tail, $no) = ($tail + 1, 0);
        } else {
            $no++;
        }
    }

    my $n = $served{$t} + $tail;
    my $sum = settled($t, $n);
    push(@total, "$t->{name}: $served{$t} served at once and $tail after, "
                 . "$sum p\$")
        if $sum > $cap_pusd || $n > 100 || $n < 90;

    diag("  then one at a time: $tail more, $sum p\$") if $t == $rounds[0];
}

is(scalar(@over), 0, 'two gateways, 300 requests at once, 10 times: the '
   . 'cap never passed')
    or diag(join("\n", @over));
is(scalar(@total), 0, '  and one request at a time after: nearly all of '
   . 'the cap served, never more')
    or diag(join("\n", @total));

my ($leased) = db()->selectrow_array(
    'SELECT count(DISTINCT gateway) FROM llm.budget_leases WHERE tenant_id = ?',
    undef, $rounds[0]{id});
is($leased, 2, 'both gateways leased from the cap');

# --- a higher cap takes effect within a second or two -----------------------

accountd('tenant', 'update', '--name', $single->{name}, '--daily-cap-usd',
         '0.01');

my $back;
for (1 .. 40) {
    $back = ask($g1, $single)->{status};
    last if $back == 200;
    sleep(0.1);
}
is($back, 200, 'a raised cap serves again');

$g1->no_alerts();
$g2->no_alerts();

system("kill \$(cat $other->{pidfile}) 2>/dev/null");

done_testing();
