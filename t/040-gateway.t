#!/usr/bin/perl

# One real request from API key to ledger row: through stock nginx with the
# module, to mockllm and back, settled into llm.usage by accountd.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use IO::Socket::INET;
use JSON::PP;
use LLMGW;
use POSIX qw(ceil);
use Test::More;
use Time::HiRes qw(time);

stack();

# nginx loads the key snapshot when it starts: the keys come first
my $pro = new_tenant(tier => 'pro');
my $tiny = new_tenant(tier => 'tiny');
my $gold = new_tenant(tier => 'gold');
my $free = new_tenant(tier => 'free');

my $ng = nginx(http => <<'EOF')->run();
    %%GATEWAY%%
    llm_gateway_tier  free  unpriced=allow tpm=6000    burst=9000  max_tokens=4096;
    llm_gateway_tier  pro   unpriced=allow tpm=600000;
    llm_gateway_tier  tiny  unpriced=allow tpm=1000    burst=1000  max_tokens=4096;

    %%UPSTREAM%%

    server {
        listen  127.0.0.1:%%PORT%%;

        client_max_body_size     1m;
        client_body_buffer_size  1m;

        proxy_http_version  1.1;
        proxy_set_header    Connection "";
        proxy_set_header    X-Request-Id $request_id;

        %%APIS%%

        # small limits on what a body may be
        location = /v1/small {
            llm_gateway             zone=llm api=openai;
            llm_gateway_max_body    2k;
            llm_gateway_max_depth   8;
            llm_gateway_max_string  100;
            proxy_pass              http://mock/v1/chat/completions;
        }

        # the mock without the gateway, to compare bytes
        location /direct/ {
            proxy_pass  http://mock/;
        }

        # a first upstream that is down, and a fallback: one admission
        location = /v1/fallback {
            llm_gateway  zone=llm api=openai;
            proxy_pass   http://127.0.0.1:1;
            error_page   502 = @mock;
        }

        location @mock {
            llm_gateway  zone=llm api=openai;
            rewrite      ^ /v1/chat/completions break;
            proxy_pass   http://mock;
        }
    }
EOF

my $auth = { authorization => "Bearer $pro->{key}" };

sub ask {
    my (%o) = @_;
    return { model => $o{model} // 'mock-gpt-4o-mini',
             messages => [ { role => 'user', content => 'Say hello.' } ],
             (defined $o{max_tokens} ? (max_tokens => $o{max_tokens}) : ()),
             (defined $o{stream} ? (stream => $o{stream}) : ()),
             ($o{usage} ? (stream_options => { include_usage => JSON::PP::true })
                        : ()) };
}

# ids and timestamps are the mock's per response; the rest must be equal
sub normal {
    my ($s) = @_;
    $s =~ s/"id":"[^"]*"/"id":"-"/g;
    $s =~ s/"created":\d+/"created":0/g;
    return $s;
}

# "Say hello." is 10 bytes: ceil(10/4) + 3 per message + 3, by the
# estimate and by the mock's own count alike.
my $n_in = 9;

# [ name, path, body, mock headers, the same request to the mock directly,
#   input, output, cached, finish_reason ]
my @ok = (
    [ 'openai json', '/v1/chat/completions',
      ask(max_tokens => 50), { 'x-mock-tokens' => 7 },
      ask(max_tokens => 50), $n_in, 7, 0, 'stop' ],
    [ 'openai json, output capped by max_tokens', '/v1/chat/completions',
      ask(max_tokens => 5), { 'x-mock-tokens' => 7 },
      ask(max_tokens => 5), $n_in, 5, 0, 'length' ],
    [ 'openai json, no max_tokens: the tier default', '/v1/chat/completions',
      ask(), { 'x-mock-tokens' => 12 },
      ask(max_tokens => 4096), $n_in, 12, 0, 'stop' ],
    [ 'openai stream, usage added by the gateway', '/v1/chat/completions',
      ask(max_tokens => 50, stream => JSON::PP::true),
      { 'x-mock-tokens' => 9, 'x-mock-cached-tokens' => 4 },
      ask(max_tokens => 50, stream => JSON::PP::true),
      $n_in, 9, 4, 'stop' ],
    [ 'openai stream, usage asked by the client', '/v1/chat/completions',
      ask(max_tokens => 50, stream => JSON::PP::true, usage => 1),
      { 'x-mock-tokens' => 3 },
      ask(max_tokens => 50, stream => JSON::PP::true, usage => 1),
      $n_in, 3, 0, 'stop' ],
    [ 'anthropic json', '/v1/messages',
      ask(model => 'mock-claude', max_tokens => 40), { 'x-mock-tokens' => 6 },
      ask(model => 'mock-claude', max_tokens => 40), $n_in, 6, 0,
      'end_turn' ],
    [ 'anthropic stream, cached tokens', '/v1/messages',
      ask(model => 'mock-claude', max_tokens => 8, stream => JSON::PP::true),
      { 'x-mock-tokens' => 20, 'x-mock-cached-tokens' => 2 },
      ask(model => 'mock-claude', max_tokens => 8, stream => JSON::PP::true),
      $n_in, 8, 2, 'max_tokens' ],
);

my @ids;

for my $c (@ok) {
    my ($name, $path, $body, $mock, $direct, $in, $out, $cached, $fin) = @$c;

    # nginx's clock is its event loop's, read after the request arrived;
    # the margin is for a clock read by two processes
    my $before = int(time() * 1000) - 1;
    my $r = http_post($ng->url($path), $body, %$auth, %$mock);
    push(@ids, [ $r->{headers}{'x-request-id'} // '', $before,
                 int(time() * 1000) ]);
    is($r->{status}, 200, "$name: 200") or diag($r->{content});

    my $d = http_post($ng->url("/direct$path"), $direct, %$mock);
    is(normal($r->{content}), normal($d->{content}),
       "$name: the mock's bytes");

    my $id = $r->{headers}{'x-request-id'};
    like($id // '', qr/^[0-9a-f]{32}$/, "$name: x-request-id");

    my $rows = usage_rows($id);
    is(scalar(@$rows), 1, "$name: one llm.usage row");
    my $u = $rows->[0] // {};

    is_deeply([ @$u{qw(tenant_id model input_tokens output_tokens
                        cached_input_tokens finish_reason status)} ],
              [ $pro->{id}, $body->{model}, $in, $out, $cached, $fin, 200 ],
              "$name: the mock's counts in the ledger");

    # these locations name no llm_gateway_backend: nothing to say of one
    is_deeply([ @$u{qw(upstream_api backend)} ], [ undef, undef ],
              "$name: no backend in the ledger");
}

# The gateway's ids: the wall clock's millisecond, then 80 random bits, so
# that the ledger's index of ids grows at one end
is_deeply([ grep { my $ms = hex(substr($_->[0], 0, 12));
                   $ms < $_->[1] || $ms > $_->[2] } @ids ], [],
          'each request id begins with the millisecond it was made');
my %tails = map { substr($_->[0], 12) => 1 } @ids;
is(scalar(keys %tails), scalar(@ids), '  and ends with bits of its own');

# a client's id made as the gateway's (this millisecond, then its own
# bits), once as it is and once twice over: never the request's
my $mine = sprintf('%012x', int(time() * 1000)) . 'c0ffee' x 3 . 'aa';
for my $h ([ 'x-request-id' => $mine ],
           [ 'x-request-id' => "$mine, $mine", 'request-id' => $mine ]) {
    my $r = http_post($ng->url('/v1/chat/completions'), ask(max_tokens => 5),
                      %$auth, @$h);
    my $id = $r->{headers}{'x-request-id'} // '';
    ok($id =~ /^[0-9a-f]{32}\z/ && $id ne $mine && @{ usage_rows($id) } == 1
       && !@{ usage_rows($mine, 0) },
       "a client's X-Request-Id in the gateway's shape is not the request's"
       . (@$h > 2 ? ' (repeated, and as Request-Id)' : ''));
}

# An upstream that fails: its status and body pass through; the row says so
# and charges nothing (no usage, nothing estimated: no flags).

for my $status (429, 500) {
    my $r = http_post($ng->url('/v1/chat/completions'), ask(max_tokens => 50),
                      %$auth, 'x-mock-status' => $status);
    is($r->{status}, $status, "upstream $status: passed through");
    like($r->{content}, qr/"error"/, "upstream $status: its body");

    my $u = usage_row($r->{headers}{'x-request-id'} // '') // {};
    is_deeply([ @$u{qw(status input_tokens output_tokens flags)} ],
              [ $status, 0, 0, 0 ], "upstream $status: a row that charges "
              . "nothing");
}

# An internal redirect to a fallback keeps the one admission and settles it
# once, with the fallback's usage.

{
    my $r = http_post($ng->url('/v1/fallback'), ask(max_tokens => 50),
                      %$auth, 'x-mock-tokens' => 4);
    is($r->{status}, 200, 'fallback after a 502: 200');

    my $rows = usage_rows($r->{headers}{'x-request-id'} // '');
    is(scalar(@$rows), 1, 'fallback: one row');
    is_deeply([ @{ $rows->[0] // {} }{qw(input_tokens output_tokens
                                          reserved_tokens)} ],
              [ $n_in, 4, $n_in + 50 ], 'fallback: one reservation, settled '
              . 'with the usage of the answer');
}

# Refusals: an OpenAI-format body, the right status, nothing in the ledger.

my $unknown = 'llmgw_live_' . ('A' x 32);

# [ name, headers, body, status, type, code, param ]
my @refused = (
    [ 'no key', {}, ask(max_tokens => 5),
      401, 'invalid_request_error', 'invalid_api_key', undef ],
    [ 'an unknown key', { authorization => "Bearer $unknown" },
      ask(max_tokens => 5), 401, 'invalid_request_error', 'invalid_api_key',
      undef ],
    [ 'a malformed key', { authorization => 'Bearer sk-nope' },
      ask(max_tokens => 5), 401, 'invalid_request_error', 'invalid_api_key',
      undef ],
    [ 'a basic credential', { authorization => 'Basic dXNlcjpwYXNz' },
      ask(max_tokens => 5), 401, 'invalid_request_error', 'invalid_api_key',
      undef ],
    [ 'a tier not served here', { authorization => "Bearer $gold->{key}" },
      ask(max_tokens => 5), 403, 'permission_error', 'tier_not_allowed',
      undef ],
    [ 'malformed JSON', $auth, '{"model":',
      400, 'invalid_request_error', 'invalid_json', undef ],
    [ 'max_tokens as a string', $auth, '{"model":"m","messages":[],'
      . '"max_tokens":"10"}',
      400, 'invalid_request_error', 'invalid_value', 'max_tokens' ],
    [ 'max_tokens of 1.5', $auth, '{"model":"m","messages":[],'
      . '"max_tokens":1.5}',
      400, 'invalid_request_error', 'invalid_value', 'max_tokens' ],
    [ 'no messages', $auth, '{"model":"m"}',
      400, 'invalid_request_error', 'invalid_value', 'messages' ],
    [ 'a repeated member', $auth, '{"model":"m","messages":[],'
      . '"max_tokens":5,"max_tokens":90000}',
      400, 'invalid_request_error', 'invalid_value', 'max_tokens' ],
    [ 'larger than the bucket can ever hold',
      { authorization => "Bearer $tiny->{key}" }, ask(max_tokens => 2000),
      429, 'tokens', 'request_too_large', 'max_tokens' ],
);

for my $c (@refused) {
    my ($name, $h, $body, $status, $type, $code, $param) = @$c;

    my $r = http_post($ng->url('/v1/chat/completions'), $body, %$h);
    is($r->{status}, $status, "$name: $status");

    my $j = json_body($r) // {};
    is_deeply([ @{ $j->{error} // {} }{qw(type code param)} ],
              [ $type, $code, $param ], "$name: type, code and param");
    ok(length($j->{error}{message} // ''), "$name: a message");
    like($r->{headers}{'content-type'} // '', qr{^application/json},
         "$name: JSON");

    my $id = $r->{headers}{'x-request-id'} // '';
    is(scalar(@{ usage_rows($id, 0) }), 0, "$name: no ledger row");
}

# Limits on the body, before any parse: [ name, body, status, message ]

my @limits = (
    [ 'within every limit', ask(max_tokens => 5), 200, undef ],
    [ 'a body over llm_gateway_max_body', '{"model":"m","messages":[],"x":"'
      . ('y' x 3000) . '"}', 413, qr/larger than this endpoint accepts/ ],
    [ 'nested deeper than llm_gateway_max_depth', '{"model":"m",'
      . '"messages":[],"x":' . ('[' x 9) . (']' x 9) . '}', 400,
      qr/nested too deeply/ ],
    [ 'a string over llm_gateway_max_string', '{"model":"m","messages":[],'
      . '"x":"' . ('y' x 101) . '"}', 400, qr/string .* too long/ ],
);

for my $c (@limits) {
    my ($name, $body, $status, $msg) = @$c;

    my $r = http_post($ng->url('/v1/small'), $body, %$auth);
    is($r->{status}, $status, "$name: $status");
    like((json_body($r) // {})->{error}{message} // '', $msg,
         "$name: says why") if $msg;
}

my $r = http_post($ng->url('/v1/chat/completions'), ask(max_tokens => 2000),
                  authorization => "Bearer $tiny->{key}");
is($r->{headers}{'x-should-retry'}, 'false', 'too large: x-should-retry false');
ok(!exists $r->{headers}{'retry-after'}, 'too large: no Retry-After');

# An exhausted bucket: free is 6,000 TPM (100 tokens/s) with a burst of
# 9,000.  Two requests that use 4,000 out each leave about 990.

my %free = (authorization => "Bearer $free->{key}",
            'x-mock-tokens' => 4000);
my $cost = $n_in + 4000;
my $spent_at = time();

for my $i (1, 2) {
    $r = http_post($ng->url('/v1/chat/completions'), ask(max_tokens => 4000),
                   %free);
    is($r->{status}, 200, "spending request $i: 200");
    # the bucket's capacity, of which remaining-tokens is a part
    is($r->{headers}{'x-ratelimit-limit-tokens'}, 9000,
       "spending request $i: x-ratelimit-limit-tokens");
}

$r = http_post($ng->url('/v1/chat/completions'), ask(max_tokens => 4000),
               %free);
is($r->{status}, 429, 'exhausted bucket: 429');

my $j = json_body($r) // {};
is($j->{error}{code}, 'rate_limit_exceeded', 'exhausted bucket: the code');

# what refilled meanwhile: 100 a second since the first was admitted
my $refill = 100 * (time() - $spent_at) + 1;
my $left = $r->{headers}{'x-ratelimit-remaining-tokens'} // -1;
my $left_at = time();
ok($left >= 9000 - 2 * $cost && $left < 9000 - 2 * $cost + $refill,
   "exhausted bucket: about 990 tokens left ($left)");

# Retry-After = ceil((c - b) / r); b lies between $left and $left + 1
my $ra = $r->{headers}{'retry-after'} // -1;
ok($ra == ceil(($cost - $left) / 100) || $ra == ceil(($cost - $left - 1) / 100),
   "exhausted bucket: Retry-After is ceil((c - b) / r) = $ra");
like($r->{headers}{'x-ratelimit-reset-tokens'} // '', qr/^\d+s$|^\d+m[\d.]+s$/,
     'exhausted bucket: x-ratelimit-reset-tokens');
my $ms = $r->{headers}{'retry-after-ms'} // -1;
ok($ms > 1000 * ($ra - 1) && $ms <= 1000 * $ra,
   "exhausted bucket: retry-after-ms is the exact wait ($ms)");

# A client that goes away mid-stream still leaves its row: the stream was
# cut (flag 2) before any usage came, so the prompt estimate and the output
# counted from the deltas it was sent are charged (flag 1); t/055 has more.

{
    my $body = JSON::PP::encode_json(ask(max_tokens => 100,
                                         stream => JSON::PP::true));
    my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                  PeerPort => $ng->port) or die;
    print $c "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
        . "Authorization: Bearer $pro->{key}\r\n"
        . "x-mock-tokens: 100\r\nx-mock-delay-ms: 50\r\n"
        . "Content-Type: application/json\r\n"
        . "Content-Length: " . length($body) . "\r\n\r\n$body";

    my $head = '';
    while ($head !~ /tok2 /) {
        $c->sysread($head, 4096, length $head) or last;
    }
    close($c);

    my ($id) = $head =~ /x-request-id: (\w+)/i;
    my $u = usage_row($id // '') // {};
    is_deeply([ @$u{qw(input_tokens flags finish_reason)} ],
              [ $n_in, 3, 'client_closed' ],
              'client gone mid-stream: a row, flagged partial and estimated');
    my $out = $u->{output_tokens} // -1;
    ok($out >= 3 && $out < 100, "client gone mid-stream: the output seen "
       . "($out), not the reservation");
}

# The buckets live in shared memory, which a reload keeps.
$ng->reload();
$r = http_post($ng->url('/v1/chat/completions'), ask(max_tokens => 4000),
               %free);
is($r->{status}, 429, 'after nginx -s reload: the bucket is still empty');
my $left2 = $r->{headers}{'x-ratelimit-remaining-tokens'} // -1;
ok($left2 >= $left && $left2 < $left + 100 * (time() - $left_at) + 2,
   'and refilled only by time');

$ng->no_alerts();

done_testing();
