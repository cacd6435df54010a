#!/usr/bin/perl

# Every refusal in its endpoint's dialect.  On /v1/messages each refusal
# the gateway makes (bad, revoked and expired keys, a model not allowed,
# malformed JSON and bad values, a body too large, each rate limit, the
# spend cap, a method) is Anthropic's error, {"type":"error","error":
# {"type","message","details"},"request_id"}, with Anthropic's type for
# its status, the gateway's code in error.details.error_code, and a
# request-id header equal to x-request-id and to the body's request_id;
# the same refusals on /v1/chat/completions and /v1/responses stay
# OpenAI's, without request-id.  nginx's own refusals (error_page to
# llm_gateway_error) follow the anthropic-version header.  Served
# answers carry request-id on Anthropic endpoints only, the gateway's:
# an upstream's own request-id and x-request-id become
# x-upstream-request-id.  A stream cut short ends in the dialect's
# in-band error event.  The Anthropic SDK reads the type, the code and
# requestID, and a message's _request_id is its ledger row's request_id.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use HTTP::Tiny;
use IO::Select;
use IO::Socket::INET;
use JSON::PP;
use LLMGW;
use Test::More;
use Time::HiRes qw(sleep time);

my $s = stack();

# nginx reads the snapshot when it starts: every key is made first
my $ok = new_tenant(tier => 'pro');
my $gone = new_tenant(tier => 'pro');
my $brief = new_tenant(tier => 'pro', args => [ '--expires-in', '2s' ]);
my $narrow = new_tenant(tier => 'pro', args => [ '--models', 'mock-a' ]);
my $tiny = new_tenant(tier => 'tiny');
my $slow = new_tenant(tier => 'slow');
my $one = new_tenant(tier => 'one');
my %rpm = map { $_ => new_tenant(tier => 'onerpm') } qw(openai anthropic
                                                         responses);
my $capped = new_tenant(tier => 'pro');

accountd('tenant', 'update', '--name', $capped->{name}, '--daily-cap-usd', '0');
snapshot_caps($s->{LLMGW_KEY_SNAPSHOT}, $capped->{key_id}, 't');
accountd('key', 'revoke', $gone->{key_id});

my $ng = nginx(http => <<'EOF')->run();
    %%GATEWAY%%
    llm_gateway_tier  pro     unpriced=allow tpm=600000;
    llm_gateway_tier  tiny    unpriced=allow tpm=1000 burst=1000 max_tokens=4096;
    llm_gateway_tier  slow    unpriced=allow tpm=6 burst=100;
    llm_gateway_tier  one     unpriced=allow tpm=600000 concurrency=1;
    llm_gateway_tier  onerpm  unpriced=allow tpm=600000 rpm=1;

    %%UPSTREAM%%

    server {
        listen  127.0.0.1:%%PORT%%;

        client_max_body_size     8m;
        client_body_buffer_size  2m;

        proxy_http_version  1.1;
        proxy_set_header    Connection "";

        # as the shipped configuration (scripts/nginx.conf.in)
        error_page  400 411 413 414 494 501 /.llm-gateway-error;

        location = /.llm-gateway-error {
            internal;
            llm_gateway_error;
        }

        %%APIS%%

        # nginx's own 413, before any phase of the gateway
        location = /small/v1/messages {
            client_max_body_size  1k;
            llm_gateway           zone=llm api=anthropic;
            proxy_pass            http://mock/v1/messages;
        }

        # an upstream that sends ids of its own, as the providers do
        location = /ids/v1/messages {
            llm_gateway  zone=llm api=anthropic;
            proxy_pass   http://127.0.0.1:%%PORT%%/up/v1/messages;
        }

        location = /ids/v1/chat/completions {
            llm_gateway  zone=llm api=openai;
            proxy_pass   http://127.0.0.1:%%PORT%%/up/v1/chat/completions;
        }

        location /up/ {
            proxy_pass  http://mock/;
            add_header  request-id    req_upstream_id;
            add_header  x-request-id  upstream-x-id;
        }
    }
EOF

# [ API, path, model, the request's body with its output limit ]
my @api = (
    [ 'openai', '/v1/chat/completions', 'mock-gpt-4o-mini',
      sub { { model => $_[0], max_tokens => $_[1],
              messages => [ { role => 'user', content => 'hi' } ] } } ],
    [ 'anthropic', '/v1/messages', 'mock-claude-3-5-haiku',
      sub { { model => $_[0], max_tokens => $_[1],
              messages => [ { role => 'user', content => 'hi' } ] } } ],
    [ 'responses', '/v1/responses', 'mock-gpt-4o-mini',
      sub { { model => $_[0], max_output_tokens => $_[1],
              input => 'hi' } } ],
);

my $http = HTTP::Tiny->new(timeout => 30, keep_alive => 0);

sub request {
    my ($method, $path, $body, %h) = @_;
    $body = encode_json($body) if ref $body;
    return $http->request($method, $ng->url($path), {
        headers => { 'content-type' => 'application/json',
                     'x-mock-tokens' => 5, %h },
        (defined $body ? (content => $body) : ()) });
}

sub bearer { (authorization => "Bearer $_[0]->{key}") }

# A raw request; the response as http_parse() has it, with the raw head.
sub raw {
    my ($req) = @_;
    my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                  PeerPort => $ng->port) or die "$!";
    local $SIG{PIPE} = 'IGNORE';
    $c->syswrite($req);
    my $sel = IO::Select->new($c);
    my $raw = '';
    my $deadline = time() + 10;
    while ((my $left = $deadline - time()) > 0) {
        last unless $sel->can_read($left);
        last unless $c->sysread($raw, 65536, length $raw);
    }
    close($c);
    my $r = LLMGW::http_parse($raw);
    ($r->{head}) = split(/\r\n\r\n/, $raw, 2);
    return $r;
}

# The response's headers of a name, as a list (HTTP::Tiny makes an array
# of a repeated one).
sub all {
    my ($r, $name) = @_;
    my $v = $r->{headers}{$name};
    return defined $v ? (ref $v ? @$v : ($v)) : ();
}

# Checks a refusal: Anthropic's error with its type, or OpenAI's with
# its; both with the gateway's code and param.
sub refusal {
    my ($what, $dialect, $r, $status, $otype, $code, $param, $limit) = @_;
    my $body = $r->{content} // $r->{body} // '';
    my $j = eval { decode_json($body) } // {};
    my $id = $r->{headers}{'x-request-id'} // '';

    is($r->{status}, $status, "$what: $status");
    like($r->{headers}{'content-type'} // '', qr{^application/json},
         "$what: JSON");
    like($id, qr/^[0-9a-f]{32}$/, "$what: x-request-id");

    if ($dialect eq 'anthropic') {
        my $e = $j->{error} // {};
        is_deeply([ sort keys %$j ], [qw(error request_id type)],
                  "$what: Anthropic's members") or diag($body);
        is($j->{type}, 'error', "$what: type error");
        is($e->{type}, atype($status), "$what: error.type " . atype($status));
        ok(length($e->{message} // ''), "$what: a message");
        my %d = %{ $e->{details} // {} };
        delete $d{param} if ($param // '') eq '*';
        is_deeply([ @d{qw(error_code param limit)} ],
                  [ $code, ($param // '') eq '*' ? undef : $param, $limit ],
                  "$what: details.error_code $code");
        is($j->{request_id}, $id, "$what: request_id is x-request-id");
        is_deeply([ all($r, 'request-id') ], [ $id ],
                  "$what: request-id is x-request-id");

    } else {
        my $e = $j->{error} // {};
        is_deeply([ keys %$j ], [ 'error' ], "$what: OpenAI's members")
            or diag($body);
        my %e = %$e;
        delete $e{param} if ($param // '') eq '*';
        is_deeply([ @e{qw(type code param)} ],
                  [ $otype, $code, ($param // '') eq '*' ? undef : $param ],
                  "$what: type $otype, code $code");
        ok(length($e->{message} // ''), "$what: a message");
        is_deeply([ all($r, 'request-id') ], [], "$what: no request-id");
    }
}

# Anthropic's type for a status, as its API documents them
sub atype {
    my %t = (400 => 'invalid_request_error', 401 => 'authentication_error',
             403 => 'permission_error', 404 => 'not_found_error',
             413 => 'request_too_large', 429 => 'rate_limit_error',
             500 => 'api_error', 503 => 'overloaded_error',
             529 => 'overloaded_error');
    return $t{$_[0]} // ($_[0] < 500 ? 'invalid_request_error'
                                     : 'api_error');
}

# --- what spends the limits before the refusals ------------------------------

sleep(2.1);    # $brief has expired by now

my $r = request('POST', '/v1/chat/completions',
                $api[0][3]->('mock-gpt-4o-mini', 80), bearer($slow),
                'x-mock-tokens' => 80);
is($r->{status}, 200, 'the slow tier: a request takes most of its bucket');

for my $a (@api) {
    my ($f, $path, $model, $body) = @$a;
    $r = request('POST', $path, $body->($model, 5), bearer($rpm{$f}));
    is($r->{status}, 200, "$f: the one request a minute of its tenant");
}

# the one slot of $one, held by a stream the upstream stalls
my $hold = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                 PeerPort => $ng->port) or die;
{
    my $json = encode_json({ %{ $api[0][3]->('mock-gpt-4o-mini', 10) },
                             stream => JSON::PP::true });
    $hold->syswrite("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
        . "Authorization: Bearer $one->{key}\r\n"
        . "x-mock-die-after: 1\r\nx-mock-die-how: stall\r\n"
        . "Content-Type: application/json\r\nConnection: close\r\n"
        . "Content-Length: " . length($json) . "\r\n\r\n$json");
    my $head = '';
    while ($head !~ /tok1 /) {
        $hold->sysread($head, 4096, length $head) or last;
    }
    like($head, qr/tok1 /, 'the slot of the one-request tier is held');
}

# --- the gateway's refusals, on each endpoint --------------------------------

# [ what, headers, the output limit or a raw body, status, OpenAI's type,
#   code, param (LIMIT: the API's output limit; *: not looked at), limit ]
my @cases = (
    [ 'no key', [], 5, 401, 'invalid_request_error', 'invalid_api_key' ],
    [ 'a key never issued', [ authorization => 'Bearer ' . forge_key() ], 5,
      401, 'invalid_request_error', 'invalid_api_key' ],
    [ 'a revoked key', [ bearer($gone) ], 5,
      401, 'invalid_request_error', 'invalid_api_key' ],
    [ 'an expired key', [ 'x-api-key' => $brief->{key} ], 5,
      401, 'invalid_request_error', 'invalid_api_key' ],
    [ 'a model the key may not call', [ bearer($narrow) ], 5,
      403, 'permission_error', 'model_not_allowed', 'model' ],
    [ 'malformed JSON', [ bearer($ok) ], \'{"model":',
      400, 'invalid_request_error', 'invalid_json' ],
    [ 'an output limit of "10"', [ bearer($ok) ], '"10"',
      400, 'invalid_request_error', 'invalid_value', 'LIMIT' ],
    [ 'a body above llm_gateway_max_body', [ bearer($ok) ],
      \('{"model":"m","x":"' . ('y' x 1100000) . '"}'),
      413, 'invalid_request_error', 'request_too_large' ],
    [ 'more than the bucket can ever hold', [ bearer($tiny) ], 2000,
      429, 'tokens', 'request_too_large', '*', 'tokens' ],
    [ 'the tokens a minute spent', [ bearer($slow) ], 50,
      429, 'tokens', 'rate_limit_exceeded', undef, 'tokens' ],
    [ 'the requests a minute spent', [ 'RPM' ], 5,
      429, 'requests', 'rate_limit_exceeded', undef, 'requests' ],
    [ 'the one request in flight', [ bearer($one) ], 5,
      429, 'requests', 'concurrency_limit_exceeded', undef, 'requests' ],
    [ 'a spent cap', [ bearer($capped) ], 5,
      429, 'insufficient_quota', 'insufficient_quota' ],
);

# the output limit's member as each API names it
my %limit = (openai => 'max_tokens', anthropic => 'max_tokens',
             responses => 'max_output_tokens');

for my $a (@api) {
    my ($f, $path, $model, $body) = @$a;

    for my $c (@cases) {
        my ($what, $h, $b, $status, $otype, $code, $param, $lim) = @$c;
        my @h = @$h;
        @h = bearer($rpm{$f}) if @h && $h[0] eq 'RPM';
        $param = $limit{$f} if ($param // '') eq 'LIMIT';

        # a raw body, or the API's with this output limit
        my $content = ref $b ? $$b : encode_json($body->($model, 1));
        $content =~ s/"\Q$limit{$f}\E":1\b/"$limit{$f}":$b/ unless ref $b;

        $r = request('POST', $path, $content, @h);
        refusal("$f, $what", $f, $r, $status, $otype, $code, $param,
                $f eq 'anthropic' ? $lim : undef);

        if ($status == 429 || $status == 503) {
            ok(defined $r->{headers}{'retry-after'}
               || $code =~ /request_too_large|insufficient_quota/,
               "$f, $what: Retry-After where the wait is known");
        }
    }

    $r = request('GET', $path, undef, bearer($ok));
    refusal("$f, GET", $f, $r, 405, 'invalid_request_error',
            'method_not_allowed');
}

close($hold);

# where the location says the dialect, a client's header does not change it
for my $a (@api[0, 2]) {
    my ($f, $path, $model, $body) = @$a;
    $r = request('POST', $path, $body->($model, 5),
                 'anthropic-version' => '2023-06-01');
    refusal("$f, no key, with anthropic-version", $f, $r, 401,
            'invalid_request_error', 'invalid_api_key');
}

# The retry_after_ms the body says is Retry-After's, in details
$r = request('POST', '/v1/messages', $api[1][3]->('mock-claude-3-5-haiku', 50),
             bearer($slow));
my $d = (eval { decode_json($r->{content}) } // {})->{error}{details} // {};
is($d->{retry_after_ms}, $r->{headers}{'retry-after-ms'},
   'details.retry_after_ms is retry-after-ms');

# --- nginx's own refusals, through error_page --------------------------------

my $msg = '{"model":"mock-claude-3-5-haiku","max_tokens":5,'
          . '"messages":[{"role":"user","content":"hi"}]}';

sub post_head {
    my ($path, $version) = @_;
    return "POST $path HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n"
           . "Content-Type: application/json\r\n"
           . ($version ? "anthropic-version: 2023-06-01\r\n" : '')
           . "Authorization: Bearer $ok->{key}\r\n";
}

# [ what, path, the rest of the request, status, code ]
my @nginx = (
    [ 'a duplicate Host', '/v1/messages',
      "Host: other\r\nContent-Length: " . length($msg) . "\r\n\r\n$msg",
      400, 'bad_request' ],
    [ 'a header of 20 kB', '/v1/messages',
      'X-Big: ' . ('b' x 20000) . "\r\nContent-Length: " . length($msg)
      . "\r\n\r\n$msg", 400, 'bad_request' ],
    [ 'a body above client_max_body_size', '/small/v1/messages',
      "Content-Length: 2000\r\n\r\n", 413, 'request_too_large' ],
    [ 'Transfer-Encoding: gzip', '/v1/messages',
      "Transfer-Encoding: gzip\r\n\r\n", 501, 'not_implemented' ],
);

for my $c (@nginx) {
    my ($what, $path, $rest, $status, $code) = @$c;

    $r = raw(post_head($path, 1) . $rest);
    refusal("nginx's own, $what, with anthropic-version", 'anthropic', $r,
            $status, undef, $code);
    unlike($r->{body}, qr/<html/i, "nginx's own, $what: no HTML");
}

# without the header nothing says the dialect: OpenAI's
$r = raw(post_head('/v1/messages', 0) . $nginx[0][2]);
refusal("nginx's own, a duplicate Host, no anthropic-version", 'openai', $r,
        400, 'invalid_request_error', 'bad_request');

# nor in a request line too long for nginx to read its headers
$r = raw('POST /v1/messages?' . ('a' x 20000) . " HTTP/1.1\r\nHost: gw\r\n"
         . "anthropic-version: 2023-06-01\r\nConnection: close\r\n\r\n");
refusal("nginx's own, a URI of 20 kB", 'openai', $r, 414,
        'invalid_request_error', 'uri_too_long');

# --- served answers: one id, the gateway's -----------------------------------

for my $a (@api) {
    my ($f, $path, $model, $body) = @$a;

    for my $stream (0, 1) {
        my $b = $body->($model, 5);
        $b->{stream} = JSON::PP::true if $stream;
        $r = request('POST', $path, $b, bearer($ok));
        my $what = "$f, a served " . ($stream ? 'stream' : 'answer');
        my $id = $r->{headers}{'x-request-id'} // '';

        is($r->{status}, 200, "$what: 200");
        is_deeply([ all($r, 'request-id') ], $f eq 'anthropic' ? [ $id ] : [],
                  $f eq 'anthropic' ? "$what: request-id is x-request-id"
                                    : "$what: no request-id");
        is((usage_row($id) // {})->{request_id}, $id,
           "$what: the ledger row's request_id");
    }
}

for my $c ([ 'anthropic', '/ids/v1/messages', $api[1] ],
           [ 'openai', '/ids/v1/chat/completions', $api[0] ])
{
    my ($f, $path, $a) = @$c;
    $r = request('POST', $path, $a->[3]->($a->[2], 5), bearer($ok));
    my $id = $r->{headers}{'x-request-id'} // '';

    is($r->{status}, 200, "$f, an upstream with its own ids: 200");
    is_deeply([ all($r, 'x-request-id') ], [ $id ],
              "$f, an upstream with its own ids: one x-request-id");
    like($id, qr/^[0-9a-f]{32}$/, "$f: the gateway's");
    is_deeply([ all($r, 'request-id') ], $f eq 'anthropic' ? [ $id ] : [],
              "$f: request-id " . ($f eq 'anthropic' ? 'the gateway\'s'
                                                     : 'none'));
    is_deeply([ sort(all($r, 'x-upstream-request-id')) ],
              [ 'req_upstream_id', 'upstream-x-id' ],
              "$f: the upstream's ids in x-upstream-request-id");
}

# --- a stream cut short: the dialect's in-band error event --------------------

my $ant_event = qr/\n\nevent:[ ]error\ndata:[ ]\{"type":"error","error":
                  \{"type":"api_error","message":"[^"]*"\}\}\n\n\z/x;
my $oai_event = qr/\n\ndata:[ ]\{"error":\{[^\n]*"code":"upstream_error"\}\}
                  \n\n\z/x;

for my $c ([ $api[1], $ant_event ], [ $api[0], $oai_event ])
{
    my ($a, $want) = @$c;
    my ($f, $path, $model, $body) = @$a;
    my $b = $body->($model, 10);
    $b->{stream} = JSON::PP::true;
    my $p = raw_post($ng->url($path), $b,
                     { bearer($ok), 'x-mock-tokens' => 10,
                       'x-mock-die-after' => 2 });
    like($p->{body}, $want, "$f, a stream cut short: the dialect's event");
    is_deeply([ all($p, 'request-id') ],
              $f eq 'anthropic' ? [ $p->{headers}{'x-request-id'} ] : [],
              "$f, a stream cut short: request-id");
}

# --- the Anthropic SDK --------------------------------------------------------

my $clients = "$s->{LLMGW_BUILD}/sdk/clients.mjs";

SKIP: {
    skip('the SDKs are not installed (make sdk)', 1) unless -f $clients;

    my $client = sub {
        my ($scenario, %env) = @_;
        local $ENV{LLMGW_URL} = $ng->url();
        local @ENV{keys %env} = values %env;
        my $out = `node $clients $scenario 2>&1`;
        my $j = eval { decode_json((split(/\n/, $out))[-1]) };
        diag($out) unless $j;
        return $j // {};
    };

    my $e = $client->('anthropic-error', LLMGW_KEY => forge_key());
    is_deeply([ @$e{qw(status name type error_code)} ],
              [ 401, 'AuthenticationError', 'authentication_error',
                'invalid_api_key' ],
              'the SDK, a bad key: AuthenticationError, authentication_error');
    ok($e->{request_id} && $e->{request_id} eq ($e->{id} // ''),
       'the SDK, a bad key: requestID is x-request-id');

    $e = $client->('anthropic-error', LLMGW_KEY => $tiny->{key},
                   MAX_TOKENS => 2000);
    is_deeply([ @$e{qw(status name type error_code)} ],
              [ 429, 'RateLimitError', 'rate_limit_error',
                'request_too_large' ],
              'the SDK, a rate limit: RateLimitError, rate_limit_error');
    like($e->{message} // '',
         qr/^429[ ]\{"type":"error","error":\{"type":"rate_limit_error",
             "message":"[^"]+"/x,
         'the SDK, a rate limit: with the gateway\'s message');

    $e = $client->('anthropic-error', LLMGW_KEY => $capped->{key});
    is_deeply([ @$e{qw(status type error_code)} ],
              [ 429, 'rate_limit_error', 'insufficient_quota' ],
              'the SDK, a spent cap: rate_limit_error, insufficient_quota');

    my $got = $client->('anthropic-json', LLMGW_KEY => $ok->{key},
                        MOCK_TOKENS => 5);
    is($got->{text}, 'tok1 tok2 tok3 tok4 tok5 ', 'the SDK, a message');
    ok($got->{request_id} && $got->{request_id} eq ($got->{id} // ''),
       'the SDK: _request_id is x-request-id');
    is((usage_row($got->{request_id} // '') // {})->{request_id},
       $got->{request_id}, 'the SDK: _request_id is the ledger\'s request_id');
}

$ng->no_alerts();

done_testing();
