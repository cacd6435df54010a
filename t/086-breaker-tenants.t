#!/usr/bin/perl

# One tenant cannot take a shared backend from the others.  Tenant A
# fails on purpose (the provider's 500 for its requests, or upstream
# timeouts), in bursts timed to every Retry-After it is told, while B
# sends ordinary requests at a steady pace: B is served as many times as
# without A (within 5 %), and A is the one limited, with its own answer.
# Timeouts of a non-streamed request whose output bound makes a long
# generation legitimate are the tenant's, never the backend's: two
# tenants sending them do not open the breaker, fast ones do.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use JSON::PP;
use LLMGW;
use POSIX qw(_exit);
use Test::More;
use Time::HiRes qw(sleep time);

stack();

my $m = mockllm();

my $ng = nginx(log_level => 'info', http => <<"EOF")->run();
    %%GATEWAY%%
    llm_gateway_tier  big  unpriced=allow tpm=100000000 burst=100000000 max_tokens=100000;

    upstream shared { server 127.0.0.1:$m->{port}; }

    llm_gateway_backend  d500  upstream=shared failures=5 fail_timeout=2s;
    llm_gateway_backend  dtime upstream=shared failures=5 fail_timeout=2s;
    llm_gateway_backend  r500  upstream=shared failures=5 fail_timeout=2s;
    llm_gateway_backend  slow  upstream=shared failures=2 fail_timeout=30s;
    llm_gateway_backend  trial upstream=shared failures=2 fail_timeout=3s;
    llm_gateway_tier     rpm1  unpriced=allow tpm=100000000 rpm=1;

    llm_gateway_role  chat500  r500;
    llm_gateway_role  chatslow slow;
    llm_gateway_role  chattrial trial;

    server {
        listen  127.0.0.1:%%PORT%%;

        location = /v1/chat/completions {
            llm_gateway         zone=llm api=openai;
            proxy_pass          http://\$llm_upstream;
            proxy_read_timeout  1s;
        }

        location = /v1/messages {
            llm_gateway         zone=llm api=anthropic;
            proxy_pass          http://\$llm_upstream;
            proxy_read_timeout  1s;
        }

        # a backend of the location's own, not a role
        location = /d500/v1/chat/completions {
            llm_gateway         zone=llm backend=d500;
            proxy_pass          http://\$llm_upstream/v1/chat/completions;
        }

        location = /dtime/v1/chat/completions {
            llm_gateway         zone=llm backend=dtime;
            proxy_pass          http://\$llm_upstream/v1/chat/completions;
            proxy_read_timeout  1s;
        }

        location = /metrics {
            llm_gateway_metrics;
        }
    }
EOF

my $chat = $ng->url('/v1/chat/completions');
my $url = $chat;

sub body {
    my ($model, $max) = @_;
    return { model => $model, max_tokens => $max // 8,
             messages => [ { role => 'user', content => 'x' } ] };
}

sub ask {
    my ($t, $model, %h) = @_;
    my $max = delete $h{max};
    return http_post($url, body($model, $max),
                     authorization => "Bearer $t->{key}",
                     'x-mock-tokens' => 4, %h);
}

# B: $n requests, one every 100 ms (the next leaves on time whatever the
# answer): how many were served
sub victim {
    my ($t, $model, $n) = @_;
    my $served = 0;
    my $next = time();

    for (1 .. $n) {
        $served++ if ask($t, $model)->{status} == 200;
        $next += 0.1;
        my $left = $next - time();
        sleep($left) if $left > 0;
    }

    return $served;
}

# A, in a process of its own: bursts of 5 failing requests; after each,
# it waits what the shortest retry-after-ms told, to the millisecond, as
# a client timing the breaker's reopening would.  What it got goes to a
# file: sent, refused by the gateway with their codes, failed upstream.
sub attacker {
    my ($t, $model, $file, %h) = @_;
    my $pid = fork() // die "fork: $!";
    return $pid if $pid;

    my %got;
    my $stop = 0;
    local $SIG{TERM} = sub { $stop = 1 };
    my $raw = encode_json(body($model, 8));

    while (!$stop) {
        my @r = burst($url, 5, $raw,
                      { authorization => "Bearer $t->{key}",
                        'x-mock-tokens' => 4, %h }, timeout => 10);
        my $wait;
        for my $r (@r) {
            $got{sent}++;
            my $j = eval { decode_json($r->{body}) };
            my $code = $j && ref $j->{error} ? $j->{error}{code} // '' : '';
            if ($code =~ /^(too_many_failures|backend_unavailable)$/) {
                $got{$code}++;
            } else {
                $got{upstream}++;
            }
            my $ms = $r->{headers}{'retry-after-ms'};
            $wait = $ms if defined $ms && (!defined $wait || $ms < $wait);
        }
        sleep($wait / 1000) if defined $wait && !$stop;
    }

    open(my $fh, '>', $file) or _exit(1);
    print $fh encode_json(\%got);
    close($fh);
    _exit(0);
}

sub stop_attacker {
    my ($pid, $file) = @_;
    kill('TERM', $pid);
    waitpid($pid, 0);
    open(my $fh, '<', $file) or die "$file: $!";
    local $/;
    return decode_json(<$fh>);
}

# a new tenant's key reaches the gateway within a moment: served once
sub known {
    my ($t, $model) = @_;
    for (1 .. 50 * time_scale()) {
        return 1 if ask($t, $model)->{status} == 200;
        sleep(0.1);
    }
    return 0;
}

sub metric {
    my ($name, $backend) = @_;
    my $r = HTTP::Tiny->new(timeout => 10)->get($ng->url('/metrics'));
    return $r->{content} =~ /^\Q$name\E\{backend="$backend"\} (\d+)$/m
           ? $1 : undef;
}

my $dir = $ng->{dir};
my $n = 50;

for my $case ([ 'provider 500s', '/d500', 'm', 'd500',
                'x-mock-status' => 500 ],
              [ 'upstream timeouts', '/dtime', 'm', 'dtime',
                'x-mock-ttfb-ms' => 3000 ],
              [ 'a role, provider 500s', '', 'chat500', 'r500',
                'x-mock-status' => 500 ])
{
    my ($what, $prefix, $model, $backend, @fail) = @$case;
    $url = $ng->url("$prefix/v1/chat/completions");

    my $ta = new_tenant(tier => 'big');
    my $tb = new_tenant(tier => 'big');

    # a second key of A's, to try the limit with
    my $ta2 = { key => (split(/\n/, accountd('key', 'create', '--tenant',
                                               $ta->{name})))[-1] };
    ok(known($ta, $model) && known($tb, $model) && known($ta2, $model),
       "$what: A (two keys) and B are known");

    # B alone: what it is served without A
    my $alone = victim($tb, $model, $n);
    cmp_ok($alone, '>=', $n - 2, "$what: B alone: $alone of $n served");

    my $file = "$dir/attacker-$backend.json";
    my $pid = attacker($ta, $model, $file, @fail);

    # A's first bursts have failed by now, its timing is under way
    sleep(1.5);

    my $with = victim($tb, $model, $n);
    my $got = stop_attacker($pid, $file);

    my $ratio = $alone ? $with / $alone : 0;
    cmp_ok($ratio, '>=', 0.95,
           sprintf("$what: with A, B served %d of %d, %.2f of its %d "
                   . "without A", $with, $n, $ratio, $alone));

    diag("$what: A sent $got->{sent}: "
         . join(', ', map { "$_ " . ($got->{$_} // 0) }
                      qw(upstream too_many_failures backend_unavailable)));

    ok($got->{too_many_failures}, "$what: A is limited for its own failures");
    cmp_ok(metric('llmgw_backend_tenant_limited_total', $backend), '>=', 1,
           "$what: the metrics count it");
    ok(!$got->{backend_unavailable},
       "$what: A never found the backend itself out");
    cmp_ok($got->{upstream} // 0, '<', $got->{sent} / 2,
           "$what: most of A's requests never reached the backend");

    # A, still limited, told so in each API's error shape; its limit may
    # just have ended, the next request its own trial, which fails
    my $r = ask($ta, $model, @fail);
    $r = ask($ta, $model, @fail) if $r->{status} != 429;
    is($r->{status}, 429, "$what: A's next request: 429");
    my $e = json_body($r)->{error} // {};
    is($e->{code}, 'too_many_failures', 'too_many_failures');
    like($e->{message}, qr/Your requests to "\Q${\ ($prefix ? $backend : $model)}\E" failed/,
         "it says whose failures: $e->{message}");
    ok($r->{headers}{'retry-after'}, 'with a Retry-After');

    if (!$prefix) {
        $r = http_post($ng->url('/v1/messages'),
                       { model => $model, max_tokens => 8,
                         messages => [ { role => 'user', content => 'x' } ] },
                       'x-api-key' => $ta->{key},
                       'anthropic-version' => '2023-06-01', @fail);
        is($r->{status}, 429, "$what: and on the Messages API: 429");
        my $ae = (json_body($r) // {})->{error} // {};
        is_deeply([ $ae->{type}, ($ae->{details} // {})->{error_code} ],
                  [ 'rate_limit_error', 'too_many_failures' ],
                  'in Anthropic\'s shape: rate_limit_error, too_many_failures');
    }

    # as above: the limit may have ended meanwhile (a busy machine), the
    # next request the trial, which fails
    $r = ask($ta2, $model, @fail);
    $r = ask($ta2, $model, @fail) if $r->{status} != 429;
    is((json_body($r) // {})->{error}{code}, 'too_many_failures',
       "$what: A's other key is limited too");

    is(ask($tb, $model)->{status}, 200, "$what: B meanwhile: 200");
    is(metric('llmgw_backend_breaker_opened_total', $backend), 0,
       "$what: the backend's breaker never opened");
}


###############################################################################
# timeouts judged by what the request asked for: 4000 output tokens take
# longer than the 1 s proxy_read_timeout; 8 do not

$url = $chat;

sub timeouts {
    my ($t, $max) = @_;
    return burst($url, 2, encode_json(body('chatslow', $max)),
                 { authorization => "Bearer $t->{key}",
                   'x-mock-ttfb-ms' => 3000 }, timeout => 10);
}

my ($tc, $td, $te, $tf, $tg) = map { new_tenant(tier => 'big') } 1 .. 5;
ok((grep { known($_, 'chatslow') } $tc, $td, $te, $tf, $tg) == 5,
   'five more tenants known');

timeouts($_, 4000) for $tc, $td;

is(ask($te, 'chatslow')->{status}, 200,
   'long generations timed out for two tenants: the backend still serves');
is(metric('llmgw_backend_breaker_opened_total', 'slow'), 0,
   'its breaker did not open');
is(ask($tc, 'chatslow')->{status}, 429,
   'the tenant whose timeouts they were is limited');

timeouts($_, 8) for $tf, $tg;

my $r = ask($te, 'chatslow');
is($r->{status}, 503, 'short ones timed out for two tenants: 503');
is((json_body($r) // {})->{error}{code}, 'backend_unavailable',
   'backend_unavailable');
is(metric('llmgw_backend_breaker_opened_total', 'slow'), 1,
   'its breaker opened');


###############################################################################
# the half-open trial of a role's backend, taken when it was chosen, is
# given back by a request refused before admission: a tenant whose rate
# limit is spent cannot hold it for fail_timeout with a 429 that costs it
# nothing

my ($tx, $ty, $tz) = map { new_tenant(tier => 'big') } 1 .. 3;
my $spent = new_tenant(tier => 'rpm1');
ok((grep { known($_, 'chattrial') } $tx, $ty, $tz, $spent) == 4,
   'four more tenants known (the rpm1 one has spent its minute)');
is(ask($spent, 'chattrial')->{status}, 429, 'rpm1: its minute is spent');

ask($_, 'chattrial', 'x-mock-status' => 500) for $tx, $ty;
is(ask($tz, 'chattrial')->{status}, 503,
   'two tenants failed: the breaker of trial is open');

# fail_timeout and its jitter (a quarter more at most) pass: half-open
sleep(3 * 1.25 + 0.3);

$r = ask($spent, 'chattrial');
is($r->{status}, 429, 'half-open: the rpm1 tenant is refused by its rate '
                      . 'limit');
$r = ask($tz, 'chattrial');
is($r->{status}, 200, 'and the trial is the next tenant\'s: served')
    or diag($r->{content});

$ng->no_alerts();

done_testing();
