#!/usr/bin/perl

# Capacity shares count tenants by their demand, measured on the request
# path: tenants of weights 1 and 3 asking far more than a zone's capacity
# get a quarter and three quarters of it (within 10 %) with stale tenants
# in the zone, each of which asked once more than the window ago, and with
# tenants asking a trickle of tiny requests all the while; nothing scrapes
# the metrics or the status page.

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

my $tag = "d$$";
my $lo = new_tenant(tier => "${tag}1");
my $hi = new_tenant(tier => "${tag}3");
my @stale = map { new_tenant(tier => "${tag}1") } 1 .. 40;
my @trickle = map { new_tenant(tier => "${tag}1") } 1 .. 20;

my $ng = nginx(http => <<"EOF")->run();
    llm_gateway_zone      zone=stale:1m capacity=60000;
    llm_gateway_zone      zone=trickle:1m capacity=60000;
    llm_gateway_keys      $s->{LLMGW_KEY_SNAPSHOT} secret=$s->{LLMGW_KEY_SECRET};
    llm_gateway_accountd  unix:$s->{LLMGW_ACCOUNTD_SOCKET};

    llm_gateway_tier  ${tag}1  unpriced=allow tpm=10000000 weight=1;
    llm_gateway_tier  ${tag}3  unpriced=allow tpm=10000000 weight=3;

    server {
        listen  127.0.0.1:%%PORT%%;

        llm_gateway_reject_log_level  info;

        location = /stale/v1/chat/completions {
            llm_gateway  zone=stale;
            proxy_pass   http://127.0.0.1:%%MOCK%%/v1/chat/completions;
        }

        location = /trickle/v1/chat/completions {
            llm_gateway  zone=trickle;
            proxy_pass   http://127.0.0.1:%%MOCK%%/v1/chat/completions;
        }
    }
EOF

sub body {
    my ($max) = @_;
    return encode_json({ model => 'm', max_tokens => $max,
                         messages => [ { role => 'user', content => 'x' } ] });
}

my $big = body(100);
my $tiny = body(8);

sub ask {
    my ($http, $t, $path, $body, $tokens) = @_;
    return $http->request('POST', $ng->url("/$path/v1/chat/completions"), {
        headers => { 'content-type' => 'application/json',
                     authorization => "Bearer $t->{key}",
                     'x-mock-tokens' => $tokens },
        content => $body });
}

# Forks a client a tenant: each asks until secs from t0 are over, a
# request every gap s (0: as fast as it can), and says how often it was
# refused.  Returns the children to reap().
sub clients {
    my ($who, $path, $t0, $secs, $gap, $body, $tokens) = @_;
    my @kids;

    for my $t (@$who) {
        pipe(my $rd, my $wr) or die;
        my $pid = fork() // die;

        if ($pid == 0) {
            close($rd);
            my $n = 0;
            my $http = HTTP::Tiny->new(keep_alive => 1, timeout => 10);

            while (time() - $t0 < $secs) {
                my $r = ask($http, $t, $path, $body, $tokens);
                $n++ if $r->{status} == 429;
                sleep($gap || 0.005);
            }

            print $wr "$n\n";
            close($wr);

            # not exit(): its destructors would stop this test's nginx
            POSIX::_exit(0);
        }

        close($wr);
        push @kids, [ $pid, $rd ];
    }

    return \@kids;
}

sub reap {
    my ($kids) = @_;
    my @refused;

    for my $k (@$kids) {
        my $fh = $k->[1];
        my $n = <$fh> // 0;
        chomp($n);
        push @refused, $n;
        waitpid($k->[0], 0);
    }

    return \@refused;
}

# tokens a minute served to each of who from t0 + warm to t0 + secs
sub rates {
    my ($who, $t0, $warm, $secs) = @_;
    my $span = ($secs - $warm) / 60;

    sleep(1);

    return [ map {
        db()->selectrow_array(
            'SELECT coalesce(sum(input_tokens + output_tokens), 0)'
            . ' FROM llm.usage WHERE tenant_id = ? AND status = 200'
            . ' AND ts >= to_timestamp(?) AND ts < to_timestamp(?)', undef,
            $_->{id}, $t0 + $warm, $t0 + $secs) / $span
    } @$who ];
}

sub ratio {
    my ($what, $rate) = @_;
    my $r = $rate->[0] ? $rate->[1] / $rate->[0] : 0;

    note(sprintf('%s: weight 1 %.0f, weight 3 %.0f tokens a minute, '
                 . 'ratio %.2f', $what, @$rate, $r));

    return $r;
}

# 40 tenants of weight 1 ask once each, then nothing: stale after 10 s
my $http = HTTP::Tiny->new(keep_alive => 1, timeout => 10);

for my $t (@stale) {
    is(ask($http, $t, 'stale', $tiny, 8)->{status}, 200, 'a stale one asks')
        or last;
}

sleep(11);

# weights 1 and 3, both asking far more than 60,000 tokens a minute
my $t0 = time();
reap(clients([ $lo, $hi ], 'stale', $t0, 28, 0, $big, 100));

my $r = ratio('40 stale tenants', rates([ $lo, $hi ], $t0, 8, 28));

ok($r >= 2.7 && $r <= 3.3, 'stale tenants: shares of 1:3 within 10 %')
    or diag("ratio $r");

# 20 tenants asking 8 tokens every 5 s while the two ask all they can
$t0 = time();
my $small = clients(\@trickle, 'trickle', $t0, 30, 5, $tiny, 8);

sleep(2);

my $t1 = time();
my $refused = reap(clients([ $lo, $hi ], 'trickle', $t1, 28, 0, $big, 100));
my $trickled = reap($small);

$r = ratio('20 trickles', rates([ $lo, $hi ], $t1, 8, 28));

ok($r >= 2.7 && $r <= 3.3, 'a trickle holds no weight: 1:3 within 10 %')
    or diag("ratio $r");
ok($refused->[0] > 0 && $refused->[1] > 0, 'the excess is refused');
is(join(' ', @$trickled), join(' ', (0) x @trickle),
   'every trickle is served');

$ng->no_alerts();

done_testing();
