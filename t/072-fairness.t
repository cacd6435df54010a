#!/usr/bin/perl

# Shared capacity by weight: three tenants of weights 1, 1 and 2
# asking far more than a zone's capacity get a quarter, a quarter and a
# half of it; the excess is refused with 429 capacity_exceeded.  Below the
# capacity each gets what it asks, beyond its tier's tpm up to its burst
# (a soft quota), where a zone without a capacity holds it to its tpm.

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

my $tag = "f$$";
my @t = (new_tenant(tier => "${tag}a"), new_tenant(tier => "${tag}b"),
         new_tenant(tier => "${tag}c"));
my @soft = (new_tenant(tier => "${tag}s"), new_tenant(tier => "${tag}s"),
            new_tenant(tier => "${tag}s"));

my $ng = nginx(http => <<"EOF")->run();
    llm_gateway_zone      zone=llm:1m capacity=60000;
    llm_gateway_zone      zone=soft:1m capacity=1000000;
    llm_gateway_zone      zone=hard:1m;
    llm_gateway_keys      $s->{LLMGW_KEY_SNAPSHOT} secret=$s->{LLMGW_KEY_SECRET};
    llm_gateway_accountd  unix:$s->{LLMGW_ACCOUNTD_SOCKET};

    llm_gateway_tier  ${tag}a  unpriced=allow tpm=10000000 weight=1;
    llm_gateway_tier  ${tag}b  unpriced=allow tpm=10000000 weight=1;
    llm_gateway_tier  ${tag}c  unpriced=allow tpm=10000000 weight=2;
    llm_gateway_tier  ${tag}s  unpriced=allow tpm=6000 burst=18000;

    server {
        listen  127.0.0.1:%%PORT%%;

        llm_gateway_reject_log_level  info;

        location = /v1/chat/completions {
            llm_gateway  zone=llm;
            proxy_pass   http://127.0.0.1:%%MOCK%%;
        }

        location = /soft/v1/chat/completions {
            llm_gateway  zone=soft;
            proxy_pass   http://127.0.0.1:%%MOCK%%/v1/chat/completions;
        }

        location = /hard/v1/chat/completions {
            llm_gateway  zone=hard;
            proxy_pass   http://127.0.0.1:%%MOCK%%/v1/chat/completions;
        }
    }
EOF

my $body = encode_json({ model => 'm', max_tokens => 100,
                         messages => [ { role => 'user', content => 'x' } ] });

# Each tenant asks for secs, a request every gap s at most (0: as fast as
# it can; or its own gap), at its path (or /v1/chat/completions); what the
# last secs - warm admitted, in tokens a minute, and the refusals in all.
sub load {
    my ($who, $secs, $warm, $gap) = @_;
    my $t0 = time();
    my (@pids, %refused);

    for my $t (@$who) {
        pipe(my $rd, my $wr) or die;
        my $pid = fork() // die;

        if ($pid == 0) {
            close($rd);
            my $n = 0;
            my $http = HTTP::Tiny->new(keep_alive => 1, timeout => 10);

            while (time() - $t0 < $secs) {
                my $r = $http->request('POST',
                    $ng->url($t->{path} // '/v1/chat/completions'), {
                    headers => { 'content-type' => 'application/json',
                                 authorization => "Bearer $t->{key}",
                                 'x-mock-tokens' => 100 },
                    content => $body });
                $n++ if $r->{status} == 429;
                sleep($t->{gap} // $gap // 0 || 0.005);
            }

            print $wr "$n\n";
            close($wr);

            # not exit(): its destructors would stop this test's nginx
            POSIX::_exit(0);
        }

        close($wr);
        push @pids, [ $pid, $rd, $t ];
    }

    for my $p (@pids) {
        my $fh = $p->[1];
        chomp($refused{ $p->[2]{id} } = <$fh> // 0);
        waitpid($p->[0], 0);
    }

    sleep(1);

    my $span = ($secs - $warm) / 60;

    my @rate = map {
        db()->selectrow_array(
            'SELECT coalesce(sum(input_tokens + output_tokens), 0)'
            . ' FROM llm.usage WHERE tenant_id = ? AND status = 200'
            . ' AND ts >= to_timestamp(?) AND ts < to_timestamp(?)', undef,
            $_->{id}, $t0 + $warm, $t0 + $secs) / $span
    } @$who;

    note(sprintf('tokens a minute: %s; refused: %s',
                 join(', ', map { sprintf('%.0f', $_) } @rate),
                 join(', ', map { $refused{ $_->{id} } } @$who)));

    return (\@rate, [ map { $refused{ $_->{id} } } @$who ]);
}

sub near { my ($got, $want) = @_; $got >= $want * 0.9 && $got <= $want * 1.1 }

# weights 1, 1 and 2, all asking far more than 60,000 a minute
my ($rate, $refused) = load(\@t, 40, 10);

ok(near($rate->[0], 15000), 'weight 1: 25 % of the capacity');
ok(near($rate->[1], 15000), 'weight 1: 25 %');
ok(near($rate->[2], 30000), 'weight 2: 50 %');
ok(near($rate->[0] + $rate->[1] + $rate->[2], 60000),
   'the capacity is used');
ok($refused->[0] > 0, 'the excess is refused');

# the first idle (10 s to be so): the two others split its share, 1:2
($rate) = load([ @t[1, 2] ], 35, 15);

ok(near($rate->[0], 20000), 'the first idle: weight 1 has a third');
ok(near($rate->[1], 40000), 'weight 2 two thirds');

# below the capacity: 20 requests of 107 tokens a minute each, all served
($rate, $refused) = load(\@t, 25, 10, 3);

is(join(' ', @$refused), '0 0 0', 'below the capacity: nothing refused');
ok(near($rate->[0], 2140) && near($rate->[2], 2140),
   'each gets what it asks (about 2,140 a minute)');

# a soft quota: tpm 6,000, burst 18,000, in a zone of a capacity far
# above: one asks about 12,000 a minute, one as much as it can (its first
# 30,000, both buckets full, go in the first 20 s); one as much in a zone
# without a capacity
$soft[0]{gap} = 0.5;
$soft[$_]{path} = '/soft/v1/chat/completions' for 0, 1;
$soft[2]{path} = '/hard/v1/chat/completions';

($rate, $refused) = load(\@soft, 50, 20);

ok($refused->[0] == 0 && $rate->[0] > 9000,
   'beyond its tpm, below its burst: all it asks');
ok(near($rate->[1], 18000), 'asking more: its burst');
ok(near($rate->[2], 6000), 'without a capacity: its tpm');

$ng->no_alerts();

done_testing();
