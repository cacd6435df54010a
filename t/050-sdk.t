#!/usr/bin/perl

# The official OpenAI and Anthropic SDKs (npm "openai", "@anthropic-ai/sdk")
# talk to the gateway as they would to the providers.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use JSON::PP;
use LLMGW;
use Test::More;

my $s = stack();
my $clients = "$s->{LLMGW_BUILD}/sdk/clients.mjs";

plan(skip_all => 'the SDKs are not installed (make sdk)') unless -f $clients;

my $pro = new_tenant(tier => 'pro');
my $capped = new_tenant(tier => 'pro');
accountd('tenant', 'update', '--name', $capped->{name}, '--daily-cap-usd', '0');
snapshot_caps($s->{LLMGW_KEY_SNAPSHOT}, $capped->{key_id}, 't');
my $tiny = new_tenant(tier => 'tiny');
my $tight = new_tenant(tier => 'tight');

my $ng = nginx(http => <<'EOF')->run();
    %%GATEWAY%%
    llm_gateway_tier  pro   unpriced=allow tpm=600000;
    llm_gateway_tier  tiny  unpriced=allow tpm=1000  burst=1000  max_tokens=4096;
    llm_gateway_tier  tight unpriced=allow tpm=600   burst=100;

    log_format  retry  '$status $llm_tenant $msec $sent_http_retry_after_ms';

    server {
        listen  127.0.0.1:%%PORT%%;

        access_log  %%NGINX%%/retry.log retry;

        location = /v1/chat/completions {
            llm_gateway  zone=llm api=openai;
            proxy_pass   http://127.0.0.1:%%MOCK%%;
        }

        location = /v1/messages {
            llm_gateway  zone=llm api=anthropic;
            proxy_pass   http://127.0.0.1:%%MOCK%%;
        }

        location = /v1/responses {
            llm_gateway  zone=llm api=responses;
            proxy_pass   http://127.0.0.1:%%MOCK%%;
        }
    }
EOF

sub client {
    my ($scenario, %env) = @_;
    local $ENV{LLMGW_URL} = $ng->url();
    local @ENV{keys %env} = values %env;
    my $out = `node $clients $scenario 2>&1`;
    my $j = eval { decode_json((split(/\n/, $out))[-1]) };
    diag($out) unless $j;
    return $j // {};
}

# [ scenario, the model the row names ]
my @ok = (
    [ 'openai-json', 'mock-gpt-4o-mini' ],
    [ 'openai-stream', 'mock-gpt-4o-mini' ],
    [ 'anthropic-stream', 'mock-claude-3-5-haiku' ],
    [ 'responses-json', 'mock-gpt-4o-mini' ],
    [ 'responses-stream', 'mock-gpt-4o-mini' ],
);

for my $c (@ok) {
    my ($scenario, $model) = @$c;

    my $got = client($scenario, LLMGW_KEY => $pro->{key}, MOCK_TOKENS => 5);

    is($got->{text}, 'tok1 tok2 tok3 tok4 tok5 ', "$scenario: the text");
    is_deeply([ $got->{input}, $got->{output} ], [ 9, 5 ],
              "$scenario: the usage the SDK read");

    my $u = usage_row($got->{id} // '') // {};
    is_deeply([ @$u{qw(tenant_id model input_tokens output_tokens)} ],
              [ $pro->{id}, $model, 9, 5 ], "$scenario: the same in the ledger");
}

# An upstream that dies mid-stream: the SDK sees the text so far, then
# raises the gateway's error event as an API error.
for my $api (qw(openai anthropic responses)) {
    for my $how (qw(close reset)) {
        my $got = client('stream-dies', LLMGW_KEY => $pro->{key},
                         API => $api, MOCK_DIE_HOW => $how);
        is($got->{text}, 'tok1 tok2 ', "$api stream, upstream ${how}s: the "
           . 'text before');
        like($got->{error} // '', qr/Error$/,
             "$api stream, upstream ${how}s: the SDK raises "
             . ($got->{error} // 'nothing'));
        like($got->{message} // '', qr/upstream failed before the response/,
             "$api stream, upstream ${how}s: with the gateway's message");
    }
}

my $e = client('openai-error', LLMGW_KEY => 'llmgw_live_' . ('x' x 32));
is_deeply([ @$e{qw(status code name)} ],
          [ 401, 'invalid_api_key', 'AuthenticationError' ],
          'an unknown key: the SDK raises AuthenticationError');

$e = client('openai-error', LLMGW_KEY => $tiny->{key}, MAX_TOKENS => 2000);
is_deeply([ @$e{qw(status code name)} ],
          [ 429, 'request_too_large', 'RateLimitError' ],
          'a request that can never fit: RateLimitError');

$e = client('openai-error', LLMGW_KEY => $capped->{key});
is_deeply([ @$e{qw(status code name)} ],
          [ 429, 'insufficient_quota', 'RateLimitError' ],
          'a spent cap: RateLimitError, code insufficient_quota');

open(my $fh, '<', $ng->dir() . '/retry.log') or die;
my @log = <$fh>;
close($fh);
my @tries = grep { /^429 \Q$tiny->{name}\E / } @log;
is(scalar(@tries), 1, 'and the SDK did not retry it (x-should-retry: false)');
is(scalar(grep { /^429 \Q$capped->{name}\E / } @log), 1,
   'nor the spent cap');

# The SDK's own retry: a bucket of 100 tokens refilled at 10 a second;
# each request takes 59 (9 in, 50 out).  The second finds 41 and is told
# to come back when 59 are there; the client waits as told and succeeds.
# (Slowly refilled, so that the second finds too few even when the
# machine is busy: at 100 a second it found 59 once 0.18 s had passed.)

my $got = client('openai-retry', LLMGW_KEY => $tight->{key},
                 MOCK_TOKENS => 50);
is($got->{output}, 50, 'after a 429 the SDK retried and got its answer');
ok(usage_row($got->{id} // ''), 'one ledger row for the retried request');

open($fh, '<', $ng->dir() . '/retry.log') or die;
my @lines = grep { / \Q$tight->{name}\E / } <$fh>;
close($fh);

is_deeply([ map { (split)[0] } @lines ], [ 200, 429, 200 ],
          'the access log: 200, then 429, then the retry\'s 200');

# the client never retries sooner than it was told ($msec is to the ms)
my @t = map { (split)[2] } @lines;
my $told = (split(' ', $lines[1] // ''))[3] // 0;
ok($told > 0 && ($t[2] - $t[1]) * 1000 >= $told - 1,
   "the retry came after the advertised wait ($told ms)");

$ng->no_alerts();

done_testing();
