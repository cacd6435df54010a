#!/usr/bin/perl

# Roles: a name clients call, served by an ordered list of backends.  A
# backend whose daily quota is spent leaves the candidates until its
# reset, and the next takes the request, the refused one included, before
# the client saw a byte; after the reset the first serves again.  A
# breaker takes out a backend that keeps failing.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use HTTP::Tiny;
use JSON::PP;
use LLMGW;
use Test::More;
use Time::HiRes qw(sleep time);

stack();

my $t = new_tenant(tier => 'big');

# a: 300 tokens a period of 10 s, its "day"; b: no quota; c: 300 tokens
# a period of 10 min, whose reset this file never sees
my $a = mockllm('-D', 300, '-P', 10);
my $b = mockllm();
my $c = mockllm('-D', 300, '-P', 600);
my $dead = LLMGW::Nginx::free_port();

my $ng = nginx(http => <<"EOF")->run();
    %%GATEWAY%%
    llm_gateway_tier  big  unpriced=allow tpm=100000000 burst=100000000 max_tokens=100000;

    llm_gateway_backend  a;
    llm_gateway_backend  b;
    llm_gateway_backend  c;
    llm_gateway_backend  dead  failures=2 fail_timeout=30s;
    llm_gateway_backend  q1  upstream=b  rpm=60 queue=0;

    upstream a { server 127.0.0.1:$a->{port}; }
    upstream b { server 127.0.0.1:$b->{port}; }
    upstream c { server 127.0.0.1:$c->{port}; }
    upstream dead { server 127.0.0.1:$dead; }

    # fast-chat: a first; b when a cannot
    llm_gateway_role  fast-chat  a  model=gpt-a  priority=1;
    llm_gateway_role  fast-chat  b  model=gpt-b  priority=2;

    # spent-chat: both with a quota, c's reset is later
    llm_gateway_role  spent-chat  a  model=gpt-a;
    llm_gateway_role  spent-chat  c  model=gpt-c;

    # queue-chat: q1 starts one request a second and lets none wait
    llm_gateway_role  queue-chat  q1  priority=1;
    llm_gateway_role  queue-chat  b   priority=2;

    # safe-chat: a dead backend first, its breaker opens
    llm_gateway_role  safe-chat  dead  priority=1;
    llm_gateway_role  safe-chat  b  priority=2;

    server {
        listen  127.0.0.1:%%PORT%%;

        location = /v1/chat/completions {
            llm_gateway  zone=llm;
            proxy_pass   http://\$llm_upstream;
            proxy_connect_timeout  1s;
        }

        location = /metrics {
            llm_gateway_metrics;
        }
    }
EOF

my $http = HTTP::Tiny->new(timeout => 30);

sub ask {
    my ($model, $max) = @_;
    return http_post($ng->url('/v1/chat/completions'),
                     { model => $model, max_tokens => $max // 100,
                       messages => [ { role => 'user', content => 'x' } ] },
                     authorization => "Bearer $t->{key}",
                     'x-mock-tokens' => 4);
}

sub served { $_[0]->{headers}{'x-llmgw-backend'} // '' }

# a second into a's next period, by its own clock (periods are aligned to
# its start; a reset it announces is in whole seconds): the mock's time
# comes with its answer to a body it refuses, which it does not count
sub next_period {
    my $r = $http->request('POST', "$a->{url}/v1/chat/completions",
                           { headers => { 'content-type' => 'application/json' },
                             content => '[' });
    my $ms = $r->{headers}{'x-mock-arrival-ms'} // die 'no arrival time';
    sleep((10000 - $ms % 10000 + 1100) / 1000);
}

sub limits {
    my ($m) = @_;
    return decode_json($http->get("$m->{url}/limits")->{content});
}


###############################################################################
# fast-chat: a until its quota is spent, then b, then a again

# each request: prompt 7 + max_tokens 280 charged by the provider as it
# comes, corrected to the 11 it used as it ends: a takes two of them.  The
# block runs in one period of a's, which a busy machine needs
next_period();
my $r = ask('fast-chat', 280);
is($r->{status}, 200, 'fast-chat: 200');
is(served($r), 'a', 'served by a, the first');
is(decode_json($r->{content})->{model}, 'gpt-a',
   "the upstream got a's model");
ok(!$r->{headers}{'x-llmgw-failover'}, 'no failover');

my $id = $r->{headers}{'x-request-id'};
my $row = usage_rows($id)->[0];
is($row->{model}, 'gpt-a', "the ledger has a's model");

is_deeply([ @{ $row // {} }{qw(api upstream_api backend)} ],
          [ 'openai', 'openai', 'a' ], 'and the backend that served');

$r = ask('fast-chat', 280);
is(served($r), 'a', 'a again: 11 + 287 of its 300');

# a's quota cannot take another 287: it says so, and b takes the request
$r = ask('fast-chat', 280);
is($r->{status}, 200, 'the third: 200, a client never sees the refusal');
is(served($r), 'b', 'served by b');
is($r->{headers}{'x-llmgw-failover'}, 'a=insufficient_quota',
   'it says a refused it and why');
my $failed_over = $r->{headers}{'x-request-id'};
my $rows = usage_rows($failed_over);
is(scalar(@$rows), 1, 'the request that failed over: one row');
is($rows->[0]{model}, 'gpt-b', "with b's model");
is($rows->[0]{output_tokens}, 4, 'and what b served');

is($rows->[0]{backend}, 'b', 'b is the backend that served it');
is(limits($a)->{refused_quota}, 1, 'a refused once');

my $sent = limits($a)->{requests};

for (1 .. 3) {
    $r = ask('fast-chat', 280);
    is(served($r), 'b', "while a is spent, b serves ($_)");
    ok(!$r->{headers}{'x-llmgw-failover'}, 'without trying a');
}

is(limits($a)->{requests}, $sent, 'nothing more was sent to a');

# what the gateway learned of a lives in shared memory: a reload keeps it
$ng->reload();
$r = ask('fast-chat', 280);
is(served($r), 'b', 'after nginx -s reload, a is still out');
is(limits($a)->{requests}, $sent, 'and still not sent anything');

like($ng->error_log, qr/backend "a" answered 429: insufficient_quota/,
     'the error log says what a answered');
like($ng->error_log, qr/"fast-chat" goes from backend "a" to "b"/,
     'and where the request went');

# a's period ends; the gateway learned when
next_period();

$r = ask('fast-chat');
is($r->{status}, 200, 'after the reset: 200');
is(served($r), 'a', 'served by a again');


###############################################################################
# spent-chat: both spent, the client is told the earliest reset

next_period();    # a's quota new again

# each takes one of 297 tokens, then no other: the first two are served,
# one of them maybe after the other refused it
is(ask('spent-chat', 290)->{status}, 200, 'spent-chat: 200') for 1 .. 2;

$r = ask('spent-chat', 290);
is($r->{status}, 429, 'spent-chat: both spent: 429');
my $e = decode_json($r->{content})->{error};
is($e->{code}, 'insufficient_quota', 'insufficient_quota');
like($e->{message}, qr/Tried: [ac]=insufficient_quota(, [ac]=insufficient_quota)?\.$/,
     'naming what was tried: ' . $e->{message});
cmp_ok($r->{headers}{'retry-after'}, '<=', 10,
       "Retry-After: a's reset, the earliest ($r->{headers}{'retry-after'})");


###############################################################################
# queue-chat: a backend whose pacer cannot take a request passes it on

# two at once: whichever comes second
my @two = burst($ng->url('/v1/chat/completions'), 2,
                { model => 'queue-chat', max_tokens => 100,
                  messages => [ { role => 'user', content => 'x' } ] },
                { authorization => "Bearer $t->{key}", 'x-mock-tokens' => 4 });
my @q1 = grep { served($_) eq 'q1' } @two;
my @other = grep { served($_) ne 'q1' } @two;
is(scalar(@q1), 1, 'queue-chat, two at once: q1 takes one');
is($other[0]{status}, 200, 'the other: 200');
is(served($other[0]), 'b', 'served by b');
is($other[0]{headers}{'x-llmgw-failover'}, 'q1=provider_rate_limited',
   'q1 could not start it this second');


###############################################################################
# safe-chat: dead refuses connections; after 2 failures its breaker opens

$r = ask('safe-chat');
ok($r->{status} == 502 || served($r) eq 'b', 'safe-chat: dead fails');
$r = ask('safe-chat');

$r = ask('safe-chat');
is($r->{status}, 200, 'with the breaker open: 200');
is(served($r), 'b', 'b serves, dead is not tried');

my $m = $http->get($ng->url('/metrics'))->{content};
like($m, qr/^llmgw_backend_breaker_opened_total\{backend="dead"\} 1$/m,
     'metrics: its breaker opened');
like($m, qr/^llmgw_backend_open\{backend="dead"\} 1$/m, 'and is open');
like($m, qr/^llmgw_backend_failovers_total\{backend="a"\} [12]$/m,
     'metrics: a passed a request on');
like($m, qr/^llmgw_backend_answers_total\{backend="a",kind="spent"\} \d+$/m,
     'and its quota answers are counted');

$ng->no_alerts();

done_testing();
