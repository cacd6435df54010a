#!/usr/bin/perl

# The request side's bad input, for each API (OpenAI Chat Completions,
# Anthropic Messages, OpenAI Responses): every bad output limit, bodies
# that are not one JSON object, models and prompts of the wrong type,
# repeated members, nesting, encodings, sizes by Content-Length and
# chunked, methods.  Each refusal has its status and the API's error,
# OpenAI's {"error":{"message","type","param","code"}} or Anthropic's
# (its code and param in error.details, t/091), and no ledger row;
# what passes has one row.  Then the invariants of t/lib/Chaos.pm: no slot
# left held by any of it, no alert.  t/040 has the first cases of each
# kind (a cut body, max_tokens "10" and 1.5, no messages, a repeated
# max_tokens, small limits on depth, strings and size).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Chaos;
use HTTP::Tiny;
use IO::Socket::INET;
use JSON::PP;
use LLMGW;
use Test::More;

stack();

my $t = chaos_tenant(concurrency => 2);
my $odd = new_tenant(tier => 'chaos');

my $ng = chaos_nginx(workers => 2, log_level => 'notice',
                     http => <<'EOF')->run();
    %%GATEWAY%%
    %%CHAOS%%
    llm_gateway_tier  chaos  unpriced=allow tpm=600000 max_tokens=1000 concurrency=2;

    %%UPSTREAM%%

    server {
        listen  127.0.0.1:%%PORT%%;

        # above llm_gateway_max_body (1m, the default), so that the
        # gateway, not nginx, refuses a larger body: in JSON
        client_max_body_size     8m;
        client_body_buffer_size  2m;

        proxy_http_version  1.1;
        proxy_set_header    Connection "";
        proxy_set_header    x-mock-tenant $llm_tenant;
        proxy_set_header    x-mock-tokens 1;

        %%APIS%%

        # nginx's own limit no larger than the gateway's, as in the
        # README's synopsis
        location = /synopsis/v1/chat/completions {
            client_max_body_size  1m;
            llm_gateway           zone=llm api=openai;
            proxy_pass            http://mock/v1/chat/completions;
        }

        # bodies in memory up to 16k: a larger one is spooled, and refused
        location = /small-buffer/v1/chat/completions {
            client_body_buffer_size  16k;
            llm_gateway              zone=llm api=openai;
            proxy_pass               http://mock/v1/chat/completions;
        }
    }
EOF

# [ API, path, the prompt member, its output limit members ]
my @api = (
    [ 'openai', '/v1/chat/completions',
      '"messages":[{"role":"user","content":"hi"}]',
      'max_tokens', 'max_completion_tokens' ],
    [ 'anthropic', '/v1/messages',
      '"messages":[{"role":"user","content":"hi"}]', 'max_tokens' ],
    [ 'responses', '/v1/responses', '"input":"hi"', 'max_output_tokens' ],
);

# A body from a template: MODEL is the priced model, PROMPT the API's
# prompt member, MAX its output limit (the first).
sub body {
    my ($tpl, $a) = @_;
    my ($f, $path, $prompt, $max) = @$a;
    (my $b = $tpl) =~ s/MODEL/"model":"$Chaos::MODEL"/g;
    $b =~ s/PROMPT/$prompt/g;
    $b =~ s/MAX/$max/g;
    return $b;
}

# What a response was, as one list to compare: status, then for a refusal
# the error's type, code and param, whether it has a message, is JSON and
# has an x-request-id, and its rows; for what passed, its rows and the
# tokens the row reserved.
sub outcome {
    my ($r, %o) = @_;
    my $id = $r->{headers}{'x-request-id'} // '';

    if ($r->{status} == 200) {
        my $rows = usage_rows($id);
        return [ 200, scalar(@$rows), $rows->[0]{reserved_tokens} ];
    }

    my $j = eval { decode_json($r->{body}) } // {};
    my $e = $j->{error} // {};
    # Anthropic's has the gateway's code and param in its details
    my $d = $e->{details};
    $e = { %$e, code => $d->{error_code}, param => $d->{param} } if $d;
    return [ $r->{status}, @$e{qw(type code param)},
             (length($e->{message} // '') ? 'message' : 'no message'),
             (($r->{headers}{'content-type'} // '') =~ m{^application/json}
              ? 'json' : 'not json'),
             ($id =~ /^[0-9a-f]{32}$/ ? 'x-request-id' : 'no x-request-id'),
             # the upstream's refusal has its row, which comes after it
             scalar(@{ usage_rows($id, $r->{headers}{'x-mock-request-id'}
                                       ? 5 : 0) }) ];
}

sub refused {
    my ($status, $code, $param, $type) = @_;
    return [ $status, $type // 'invalid_request_error', $code, $param,
             'message', 'json', 'x-request-id', 0 ];
}

sub post {
    my ($path, $body, $key) = @_;
    return raw_post($ng->url($path), $body,
                    { authorization => 'Bearer ' . ($key // $t)->{key} });
}

# --- every bad output limit, for each member of each API --------------------

# [ the value, status, what the row reserves beyond the prompt (7) ]
my @limits = (
    [ '-1',               400 ],
    [ '0',                400 ],
    [ '-0',               400 ],
    [ '2.5',              400 ],
    [ '1e400',            400 ],         # infinite as a double
    [ '9007199254740993', 400 ],         # above 2^53, not exact
    [ '1001',             400 ],         # above the tier's max_tokens
    [ '"10"',             400 ],
    [ 'true',             400 ],
    [ '[5]',              400 ],
    [ '{}',               400 ],
    [ '1000',             200, 1000 ],   # the tier's max_tokens
    [ '1e2',              200, 100 ],
    [ '5.0',              200, 5 ],
    [ 'null',             200, 1000 ],   # the tier's default
);

for my $a (@api) {
    my ($f, $path, $prompt, @max) = @$a;

    for my $m (@max) {
        for my $l (@limits) {
            my ($v, $status, $reserved) = @$l;
            my $r = post($path, body("{MODEL,PROMPT,\"$m\":$v}", $a));

            is_deeply(outcome($r), $status == 200
                      ? [ 200, 1, $Chaos::PROMPT + $reserved ]
                      : refused(400, 'invalid_value', $m),
                      "$f, $m $v: $status");
        }
    }
}

# --- bodies, models, prompts, streams ---------------------------------------

# [ what, template, the APIs (all if none), expected ]; passes(n): one
# row, which reserves the prompt's n tokens and the tier's default 1000
sub passes { [ 200, 1, $_[0] + 1000 ] }
my $PASS = passes($Chaos::PROMPT);
my $JSON = refused(400, 'invalid_json', undef);

sub value { refused(400, 'invalid_value', $_[0]) }

# passed on, and refused by the upstream (mockllm reads as the providers
# do): its 400, with the member in param (OpenAI), and the gateway's row
sub upstream { [ 400, 'invalid_request_error', undef, $_[0], 'message',
                 'json', 'x-request-id', 1 ] }

my @shapes = (
    # not JSON, or more than one value
    [ 'an empty body', '', [], $JSON ],
    [ 'an object cut short', '{MODEL,', [], $JSON ],
    [ 'a trailing comma', '{MODEL,PROMPT,}', [], $JSON ],
    [ 'single quotes', "{'model':'x'}", [], $JSON ],
    [ 'a second object after the first', '{MODEL,PROMPT}{"model":"x"}', [],
      $JSON ],
    [ 'garbage after the object', '{MODEL,PROMPT} x', [], $JSON ],
    [ 'blanks after the object', "{MODEL,PROMPT} \r\n\t", [], $PASS ],
    [ 'a lone surrogate escape', '{MODEL,PROMPT,"user":"\ud800"}', [],
      $JSON ],

    # JSON, not an object
    [ 'an array', '[{MODEL,PROMPT}]', [], $JSON ],
    [ 'a string', '"hi"', [], $JSON ],
    [ 'a number', '5', [], $JSON ],
    [ 'null', 'null', [], $JSON ],

    # the model
    [ 'no model', '{PROMPT}', [], value('model') ],
    [ 'an empty model', '{"model":"",PROMPT}', [], value('model') ],
    [ 'a model that is a number', '{"model":5,PROMPT}', [], value('model') ],
    [ 'a null model', '{"model":null,PROMPT}', [], value('model') ],
    [ 'a model in an array', '{"model":["x"],PROMPT}', [], value('model') ],
    [ 'a model of 128 bytes', '{"model":"' . ('m' x 128) . '",PROMPT}', [],
      value('model') ],

    # the prompt: messages must be an array, input a string or an array
    (map { my $v = $_;
           [ "messages $v", "{MODEL,\"messages\":$v}", [qw(openai anthropic)],
             value('messages') ] } '"hi"', '{}', '5', 'null', 'true'),
    [ 'no messages', '{MODEL}', [qw(anthropic)], value('messages') ],
    (map { my $v = $_;
           [ "input $v", "{MODEL,\"input\":$v}", [qw(responses)],
             value('input') ] } '{}', '5', 'null', 'true'),
    [ 'no input', '{MODEL}', [qw(responses)], value('input') ],
    [ 'input as an array', '{MODEL,"input":[]}', [qw(responses)],
      passes(3) ],

    # a message is an object, as the upstream reads it
    [ 'messages of the wrong types', '{MODEL,"messages":[1,"x",null]}',
      [qw(openai anthropic)], value('messages') ],
    [ 'content that is a number',
      '{MODEL,"messages":[{"role":"user","content":5}]}',
      [qw(openai)], upstream('messages[0].content') ],
    [ 'content that is a number',
      '{MODEL,"messages":[{"role":"user","content":5}]}',
      [qw(anthropic)], upstream(undef) ],

    # stream, and stream_options (the gateway reads it for OpenAI streams)
    [ 'stream "yes"', '{MODEL,PROMPT,"stream":"yes"}', [], value('stream') ],
    [ 'stream 1', '{MODEL,PROMPT,"stream":1}', [], value('stream') ],
    [ 'stream null', '{MODEL,PROMPT,"stream":null}', [], $PASS ],
    [ 'stream_options 5', '{MODEL,PROMPT,"stream":true,"stream_options":5}',
      [qw(openai)], value('stream_options') ],
    [ 'stream_options "x"',
      '{MODEL,PROMPT,"stream":true,"stream_options":"x"}',
      [qw(openai)], value('stream_options') ],

    # a member the gateway reads, twice
    [ 'the model twice', '{MODEL,PROMPT,"model":"x"}', [], value('model') ],
    [ 'the prompt twice', '{MODEL,PROMPT,PROMPT}', [],
      undef ],   # its own member: below
    [ 'stream twice', '{MODEL,PROMPT,"stream":false,"stream":true}', [],
      value('stream') ],
    [ 'the output limit twice', '{MODEL,PROMPT,"MAX":5,"MAX":900}', [],
      undef ],

    # nesting: llm_gateway_max_depth 64, the body's own object included
    [ 'nested 64 deep', '{MODEL,PROMPT,"metadata":' . ('[' x 63) . (']' x 63)
      . '}', [], $PASS ],
    [ 'nested 65 deep', '{MODEL,PROMPT,"metadata":' . ('[' x 64) . (']' x 64)
      . '}', [], $JSON ],
    [ 'nested 100,000 deep', '{MODEL,PROMPT,"metadata":' . ('[' x 100000)
      . (']' x 100000) . '}', [], $JSON ],
    [ 'nested 100,000 deep, never closed', '{MODEL,PROMPT,"metadata":'
      . ('{"a":' x 100000), [], $JSON ],

    # the text's encoding is the upstream's to judge
    [ 'invalid UTF-8 in a message', "{MODEL,\"messages\":[{\"role\":\"user\","
      . "\"content\":\"a\xff\xfe\xc3\"}]}", [qw(openai anthropic)],
      upstream(undef) ],
    [ 'invalid UTF-8 in the input', "{MODEL,\"input\":\"\xff\"}",
      [qw(responses)], upstream(undef) ],
);

for my $a (@api) {
    my ($f, $path, $prompt, $max) = @$a;
    my ($pname) = $prompt =~ /^"(\w+)"/;

    for my $s (@shapes) {
        my ($what, $tpl, $only, $want) = @$s;
        next if @$only && !grep { $_ eq $f } @$only;

        $want //= $what =~ /prompt/ ? value($pname) : value($max);

        my $r = post($path, body($tpl, $a));
        is_deeply(outcome($r), $want, "$f, $what: $want->[0]");
    }
}

# A NUL in the model: cJSON ends the string there, so the gateway (its
# allowed models, its price) and the ledger would see "mock-chaos" while the
# upstream is asked for "mock-chaos\u0000x".  Refused before any parse,
# escaped or raw; so is any control character in the model, which the
# gateway writes into headers and log lines.
for my $m ('mock-chaos\u0000x', "mock-chaos\0x", "mock-chaos\rx") {
    my $r = post('/v1/chat/completions',
                 body("{\"model\":\"$m\",PROMPT}", $api[0]));
    (my $name = $m) =~ s/([\0\r])/sprintf('\\x%02x', ord($1))/ge;
    is_deeply(outcome($r), $JSON, "a model with $name: 400");
}

for my $m ('mock-chaos\r\nSet-Cookie: a=1', 'mock\u001b[31mchaos',
           'mock\u0007') {
    my $r = post('/v1/chat/completions',
                 body("{\"model\":\"$m\",PROMPT}", $api[0]));
    is_deeply(outcome($r), value('model'), "a model with $m: 400");
    ok(!defined $r->{headers}{'set-cookie'}, '  and no header of it');
}

# Invalid UTF-8 in the model passes to the upstream (which refuses the
# body); accountd writes each byte that is not printable ASCII as "?" (on
# a tenant of its own: that model has no price).
{
    my $r = post('/v1/chat/completions', body("{\"model\":\"mock\xffchaos\","
                 . 'PROMPT}', $api[0]), $odd);
    my $u = usage_row($r->{headers}{'x-request-id'} // '') // {};
    is_deeply([ $r->{status}, $u->{model} ], [ 400, 'mock?chaos' ],
              'invalid UTF-8 in the model: passed on, "?" in the ledger');
}

# --- methods -----------------------------------------------------------------

for my $a (@api) {
    my ($f, $path) = @$a;

    for my $method (qw(GET PUT DELETE)) {
        my $r = HTTP::Tiny->new(timeout => 10)->request($method,
            $ng->url($path),
            { headers => { authorization => "Bearer $t->{key}",
                           'content-type' => 'application/json' },
              ($method eq 'GET' ? () : (content => '{}')) });
        $r->{body} = $r->{content};
        is_deeply(outcome($r), refused(405, 'method_not_allowed', undef),
                  "$f, $method: 405");
    }
}

# --- sizes, by Content-Length and chunked ------------------------------------

# A body of exactly $n bytes.
sub sized {
    my ($n) = @_;
    my $b = body('{MODEL,PROMPT,"metadata":{"pad":""}}', $api[0]);
    substr($b, -3, 0) = 'x' x ($n - length $b);
    return $b;
}

# The request with its body whole or chunked (in 64k chunks); with
# announce_only, only its header, a Content-Length announcing the body.
sub sized_post {
    my ($path, $n, $how) = @_;
    my $b = sized($n);
    my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                  PeerPort => $ng->port) or die "$!";
    my $req = "POST $path HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        . "Authorization: Bearer $t->{key}\r\n"
        . "Content-Type: application/json\r\n";

    if ($how eq 'chunked') {
        $req .= "Transfer-Encoding: chunked\r\n\r\n";
        for (my $i = 0; $i < length $b; $i += 65536) {
            my $part = substr($b, $i, 65536);
            $req .= sprintf("%x\r\n%s\r\n", length $part, $part);
        }
        $req .= "0\r\n\r\n";

    } else {
        $req .= 'Content-Length: ' . length($b) . "\r\n\r\n";
        $req .= $b unless $how eq 'announce_only';
    }

    # nginx may answer and close before it has all: write what it takes
    local $SIG{PIPE} = 'IGNORE';
    for (my $i = 0; $i < length $req; ) {
        my $w = $c->syswrite($req, 65536, $i);
        last unless $w;
        $i += $w;
    }

    # until the response is whole: a refusal leaves nginx lingering
    my ($raw, $r) = ('', {});
    while ($c->sysread($raw, 65536, length $raw)) {
        $r = LLMGW::http_parse($raw);
        last if $r->{complete} && $raw =~ /\r\n\r\n/;
    }
    close($c);

    return LLMGW::http_parse($raw);
}

my $MB = 1048576;

# [ what, path, bytes, how, expected ]
my @sizes = (
    [ 'a body of llm_gateway_max_body', '/v1/chat/completions', $MB,
      'length', $PASS ],
    [ 'a chunked body of llm_gateway_max_body', '/v1/chat/completions', $MB,
      'chunked', $PASS ],
    [ 'a Content-Length above llm_gateway_max_body, nothing sent',
      '/v1/chat/completions', $MB + 1, 'announce_only',
      refused(413, 'request_too_large', undef) ],
    [ 'a body above llm_gateway_max_body', '/v1/chat/completions', $MB + 1,
      'length', refused(413, 'request_too_large', undef) ],
    [ 'a chunked body above llm_gateway_max_body', '/v1/chat/completions',
      $MB + 65536, 'chunked', refused(413, 'request_too_large', undef) ],
    [ 'a body above client_body_buffer_size (spooled)',
      '/small-buffer/v1/chat/completions', 40000, 'length',
      refused(413, 'request_too_large', undef) ],
    [ 'a chunked body above client_body_buffer_size (spooled)',
      '/small-buffer/v1/chat/completions', 40000, 'chunked',
      refused(413, 'request_too_large', undef) ],
);

for my $s (@sizes) {
    my ($what, $path, $n, $how, $want) = @$s;
    is_deeply(outcome(sized_post($path, $n, $how)), $want,
              "$what: $want->[0]");
}

# Above client_max_body_size, nginx refuses before any phase of the
# gateway (a Content-Length) or as the gateway reads the body (chunked):
# its own 413 page, which the gateway's filter turns into the same JSON
# error as its own 413.  With client_max_body_size no larger than
# llm_gateway_max_body, as in the README's synopsis, that is every body
# too large.
for my $how (qw(announce_only chunked)) {
    is_deeply(outcome(sized_post('/synopsis/v1/chat/completions',
                                 $MB + 65536, $how)),
              refused(413, 'request_too_large', undef),
              "above client_max_body_size ($how): 413 in JSON");
}

chaos_check($ng, tenants => [ $t ]);

done_testing();
