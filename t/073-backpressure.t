#!/usr/bin/perl

# Backpressure: an upstream that can take 4 requests at once and
# answers the fifth with its overloaded 503.  The gateway learns it from
# those answers: its zone's ceiling of requests in flight (16 configured)
# halves at once, and the gateway answers the excess itself, 503
# upstream_saturated with Retry-After, instead of passing it on.  When the
# upstream takes more, the ceiling recovers and so does the throughput.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use HTTP::Tiny;
use JSON::PP;
use Chaos qw(workers);
use LLMGW;
use POSIX ();
use Test::More;
use Time::HiRes qw(sleep time);

my $s = stack();

my $t = new_tenant(tier => 'big');

# 4 at once; each answer takes 250 ms
my $mock = mockllm('-c', 4);

my $ng = nginx(http => <<"EOF")->run();
    llm_gateway_zone      zone=llm:1m inflight=16;
    llm_gateway_zone      zone=control:1m;
    llm_gateway_keys      $s->{LLMGW_KEY_SNAPSHOT} secret=$s->{LLMGW_KEY_SECRET};
    llm_gateway_accountd  unix:$s->{LLMGW_ACCOUNTD_SOCKET};

    llm_gateway_tier  big  unpriced=allow tpm=100000000 burst=100000000;

    upstream mock { server 127.0.0.1:$mock->{port}; keepalive 16; }

    server {
        listen  127.0.0.1:%%PORT%%;

        proxy_http_version  1.1;
        proxy_set_header    Connection "";

        location = /v1/chat/completions {
            llm_gateway  zone=llm;
            proxy_pass   http://mock;
        }

        # the same upstream through a zone without a ceiling: no pushing back
        location = /control/v1/chat/completions {
            llm_gateway  zone=control;
            proxy_pass   http://mock/v1/chat/completions;
        }

        location = /metrics {
            llm_gateway_metrics;
        }
    }
EOF

my $http = HTTP::Tiny->new(timeout => 30);


sub mock_limits {
    my ($path) = @_;
    return decode_json($http->request($path ? 'POST' : 'GET',
                                      "$mock->{url}/limits" . ($path // ''))
                       ->{content});
}

my $body = encode_json({ model => 'm', max_tokens => 50,
                         messages => [ { role => 'user', content => 'x' } ] });

# 14 clients for secs, each a request as soon as the last is answered (50 ms
# after a refusal): every answer as { t (s since start), status, code,
# retry (Retry-After), retry_ms }
sub load {
    my ($path, $secs) = @_;
    my $t0 = time();
    my (@pids, @r);

    for my $k (1 .. 14) {
        pipe(my $rd, my $wr) or die;
        my $pid = fork() // die;

        if ($pid == 0) {
            close($rd);
            my $h = HTTP::Tiny->new(keep_alive => 1, timeout => 10);

            while (time() - $t0 < $secs) {
                my $r = $h->request('POST', $ng->url($path), {
                    headers => { 'content-type' => 'application/json',
                                 authorization => "Bearer $t->{key}",
                                 'x-mock-ttfb-ms' => 250,
                                 'x-mock-tokens' => 10 },
                    content => $body });
                my $code = eval { decode_json($r->{content})->{error}{code} };
                printf $wr "%.3f %d %s %s %s\n", time() - $t0, $r->{status},
                    $code // '-', $r->{headers}{'retry-after'} // '-',
                    $r->{headers}{'retry-after-ms'} // '-';
                sleep(0.05) if $r->{status} != 200;
            }

            close($wr);

            # not exit(): its destructors would stop this test's nginx
            POSIX::_exit(0);
        }

        close($wr);
        push @pids, [ $pid, $rd ];
    }

    for my $p (@pids) {
        my $fh = $p->[1];

        while (<$fh>) {
            my ($at, $status, $code, $retry, $retry_ms) = split;
            push @r, { t => $at, status => $status, code => $code,
                       retry => $retry, retry_ms => $retry_ms };
        }

        waitpid($p->[0], 0);
    }

    return \@r;
}

sub count { my ($r, $f) = @_; scalar grep { $f->($_) } @$r }

# the control: every request over 4 reaches the upstream and is refused
mock_limits('/reset');
my $r = load('/control/v1/chat/completions', 5);
my $control = mock_limits('/reset');

note(sprintf('control: %d answers, %d served, the upstream refused %d',
             scalar @$r, count($r, sub { $_[0]{status} == 200 }),
             $control->{refused_inflight}));

# saturated: the gateway holds back itself
$r = load('/v1/chat/completions', 8);
my $sat = mock_limits();

my $ours = count($r, sub { $_[0]{code} eq 'upstream_saturated' });
my $served = count($r, sub { $_[0]{status} == 200 });

note(sprintf('saturated: %d answers, %d served, %d upstream_saturated from '
             . 'the gateway, the upstream refused %d', scalar @$r, $served,
             $ours, $sat->{refused_inflight}));

ok($control->{refused_inflight} > 100,
   'without pushing back, the upstream refuses the excess itself');
ok($ours > 100, 'saturated: the gateway answers the excess itself');
is(count($r, sub { $_[0]{code} eq 'upstream_saturated'
                   && !($_[0]{status} == 503 && $_[0]{retry} =~ /^\d+$/
                        && $_[0]{retry} >= 1 && $_[0]{retry_ms} =~ /^\d+$/) }),
   0, 'with 503, Retry-After and retry-after-ms');
ok($sat->{refused_inflight} * 5 < $control->{refused_inflight},
   'the upstream refuses a fraction of what it did without');
ok($served > 0, 'and serves meanwhile');
ok($ng->metric('llmgw_capacity_reductions_total\{zone="llm"\}') >= 1,
   'the reductions are counted');
ok($ng->metric('llmgw_rejected_total\{zone="llm",tenant="[^"]*",tier="big",'
          . 'reason="saturation"\}') >= $ours,
   'and the refusals, reason "saturation"');

# the upstream recovers: 32 at once
mock_limits('/inflight/32');
mock_limits('/reset');

$r = load('/v1/chat/completions', 25);
my $rec = mock_limits();

my @last = grep { $_->{t} >= 21 } @$r;
my $early = count($r, sub { $_[0]{t} < 4 && $_[0]{status} == 200 });
my $late = count(\@last, sub { $_[0]{status} == 200 });

note(sprintf('recovering: served %d in the first 4 s, %d in the last 4 s; '
             . 'the upstream refused %d', $early, $late,
             $rec->{refused_inflight}));

is(count(\@last, sub { $_[0]{status} != 200 }), 0,
   'after 20 s: nothing refused');
ok($late > $early * 2, 'throughput back: more than twice as much served');
is($rec->{refused_inflight}, 0, 'the upstream refused none');
is($ng->metric('llmgw_capacity_inflight\{zone="llm",kind="ceiling"\}'), 16,
   'the ceiling is whole again');
is($ng->metric('llmgw_capacity_inflight\{zone="llm",kind="current"\}'), 0,
   'nothing left in flight');

# requests in flight in workers that are killed: the new workers settle
# them, and the ceiling counts them no more
my @slow;

for (1 .. 4) {
    my $pid = fork() // die;

    if ($pid == 0) {
        http_post($ng->url('/v1/chat/completions'), $body,
                  authorization => "Bearer $t->{key}",
                  'x-mock-ttfb-ms' => 5000);
        POSIX::_exit(0);
    }

    push @slow, $pid;
}

my $inflight;
for (1 .. 50 * time_scale()) {
    $inflight = $ng->metric('llmgw_capacity_inflight\{zone="llm",kind="current"\}');
    last if ($inflight // 0) >= 4;
    sleep(0.1);
}
is($inflight, 4, '4 slow ones in flight');

my @killed = workers($ng);
kill('KILL', @killed);
waitpid($_, 0) for @slow;

my $left;

for (1 .. 50) {
    sleep(0.1);
    $left = $ng->metric(
        'llmgw_capacity_inflight\{zone="llm",kind="current"\}');
    last if defined $left && $left == 0;
}

is($left, 0, 'their workers killed: settled by the others, none in flight');

# a reload with another ceiling: its workers apply it as they start
my $file = $ng->dir() . '/nginx.conf';
open(my $fh, '<', $file) or die;
my $conf = do { local $/; <$fh> };
close($fh);
$conf =~ s/inflight=16/inflight=8/ or die;
open($fh, '>', $file) or die;
print $fh $conf;
close($fh);

$ng->reload();

my $ceiling;

for (1 .. 50) {
    $ceiling = $ng->metric(
        'llmgw_capacity_inflight\{zone="llm",kind="ceiling"\}');
    last if defined $ceiling && $ceiling == 8;
    sleep(0.1);
}

is($ceiling, 8, 'reloaded with inflight=8: the ceiling is 8');

$ng->no_alerts(alerts => [ killed_alerts(@killed) ]);

done_testing();
