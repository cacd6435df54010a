#!/usr/bin/perl

# Output limits as the libraries send them.  The AI SDK asks 64000 for
# Sonnet 4.5, LangChain 8192 for Haiku, each under the member its API has
# (max_tokens, max_completion_tokens, max_output_tokens).  A tier that
# refuses them says the maximum and names the member as sent; a tier with
# above_max=lower serves them with the limit lowered to its maximum: the
# reservation is the maximum, the upstream reads the maximum under the
# member the client sent, and x-llm-max-tokens-lowered says what was
# asked, streamed or not.  What is not a positive integer, or is sent
# twice, stays refused when the tier lowers.
#
# The default the gateway writes into a Chat request without a limit is
# max_completion_tokens, which OpenAI's reasoning models (mockllm's
# mock-o3-mini, as strict) require; a backend with limit_param=max_tokens
# writes max_tokens, which such a model refuses.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use JSON::PP;
use LLMGW;
use Test::More;

stack();

# both tiers allow at most 4096: the libraries' 64000 and 8192 are above
my $MAX = 4096;
my $DEFAULT = 300;

my $low = new_tenant(tier => 'lowers');
my $ref = new_tenant(tier => 'refuses');

my $ng = nginx(http => <<"EOF")->run();
    %%GATEWAY%%
    %%UPSTREAM%%
    llm_gateway_tier  lowers   unpriced=allow tpm=600000 max_tokens=$MAX
                               default_max_tokens=$DEFAULT above_max=lower;
    llm_gateway_tier  refuses  unpriced=allow tpm=600000 max_tokens=$MAX
                               default_max_tokens=$DEFAULT;

    llm_gateway_backend  legacy  upstream=mock limit_param=max_tokens;
    llm_gateway_backend  modern  upstream=mock
                                 limit_param=max_completion_tokens;

    server {
        listen  127.0.0.1:%%PORT%%;

        %%APIS%%

        # a server that knows only max_tokens: the default goes so
        location = /legacy/v1/chat/completions {
            llm_gateway  zone=llm api=openai backend=legacy;
            proxy_pass   http://mock/v1/chat/completions;
        }

        location = /modern/v1/chat/completions {
            llm_gateway  zone=llm api=openai backend=modern;
            proxy_pass   http://mock/v1/chat/completions;
        }
    }
EOF

my %PATH = (openai => '/v1/chat/completions', anthropic => '/v1/messages',
            responses => '/v1/responses');

# the prompt of each, as the gateway estimates it: ceil(2 / 4) + 3 + 3
my $PROMPT = 7;

sub body {
    my ($api, %m) = @_;
    my %b = (model => $m{model} // 'm');
    delete $m{model};

    if ($api eq 'responses') {
        $b{input} = 'hi';
    } else {
        $b{messages} = [ { role => 'user', content => 'hi' } ];
    }

    return { %b, %m };
}

sub ask {
    my ($api, $t, $body, %h) = @_;
    my $r = http_post($ng->url($h{path} // $PATH{$api}), $body,
                      authorization => "Bearer $t->{key}",
                      'x-mock-tokens' => 3);
    $r->{json} = eval { decode_json($r->{content}) };
    return $r;
}

sub read_max {
    my ($r) = @_;
    my ($max) = ($r->{headers}{'x-mock-read'} // '') =~ /\bmax=(\S+)/;
    return $max // 'no x-mock-read';
}

sub rows {
    my ($r, $wait) = @_;
    return usage_rows($r->{headers}{'x-request-id'} // '', $wait);
}

# --- the libraries' defaults --------------------------------------------------

# [ api, member, value, who sends it ]
my @defaults = (
    [ 'openai',    'max_tokens',            64000, 'AI SDK, Chat' ],
    [ 'openai',    'max_completion_tokens', 8192,  'LangChain, Chat' ],
    [ 'anthropic', 'max_tokens',            64000, 'AI SDK, Sonnet 4.5' ],
    [ 'anthropic', 'max_tokens',            8192,  'LangChain, Haiku' ],
    [ 'responses', 'max_output_tokens',     64000, 'AI SDK, Responses' ],
    [ 'responses', 'max_output_tokens',     8192,  'LangChain, Responses' ],
);

for my $d (@defaults) {
    my ($api, $m, $v, $who) = @$d;

    for my $stream (0, 1) {
        my $what = "$who: $m $v" . ($stream ? ', streamed' : '');
        my $r = ask($api, $low, body($api, $m => $v,
                                     $stream ? (stream => JSON::PP::true)
                                             : ()));

        subtest "lowered: $what" => sub {
            is($r->{status}, 200, 'served') or diag($r->{content});
            is($r->{headers}{'x-llm-max-tokens-lowered'}, $v,
               'x-llm-max-tokens-lowered: what was asked');
            is(read_max($r), $MAX, "the upstream obeys $MAX");
            like($r->{content}, $stream ? qr/tok3/ : qr/tok1 tok2 tok3/,
                 'the answer came');

            my $rows = rows($r);
            is(scalar(@$rows), 1, 'one row');
            is($rows->[0]{reserved_tokens}, $PROMPT + $MAX,
               "reserved: the prompt and the $MAX lowered to");
        };
    }

    my $r = ask($api, $ref, body($api, $m => $v));

    subtest "refused: $who: $m $v" => sub {
        is($r->{status}, 400, 'status 400');
        my $e = $r->{json}{error} // {};
        is($e->{message}, "$m is $v; this tier allows at most $MAX.",
           'the message has the member as sent, its value and the maximum');

        # OpenAI's shape has param; Anthropic's has none
        is($e->{param}, $m, "param: $m") if $api ne 'anthropic'
                                            || exists $e->{param};
        ok(!exists $r->{headers}{'x-llm-max-tokens-lowered'},
           'nothing was lowered');
        is(scalar(@{ rows($r, 0) }), 0, 'no row');
    };
}

# at the maximum, and below: passed as sent, nothing said
for my $v ($MAX, 100) {
    my $r = ask('openai', $low, body('openai', max_completion_tokens => $v));
    is($r->{status}, 200, "max_completion_tokens $v on the lowering tier");
    ok(!exists $r->{headers}{'x-llm-max-tokens-lowered'}, '... not lowered');
    is(read_max($r), $v, "... the upstream obeys $v");
}

# --- what lowering must not let through ---------------------------------------

# the members of Chat as raw JSON, so that repeats and number forms stay
my $MSGS = '"messages":[{"role":"user","content":"hi"}]';

my @tricks = (
    [ 'max_tokens twice, the last large',
      qq({"model":"m",$MSGS,"max_tokens":5,"max_tokens":64000}),
      'max_tokens' ],
    [ 'max_tokens twice, the first large',
      qq({"model":"m",$MSGS,"max_tokens":64000,"max_tokens":5}),
      'max_tokens' ],
    [ 'the second name escaped',
      qq({"model":"m",$MSGS,"max_tokens":64000,"max\\u005ftokens":5}),
      'max_tokens' ],
    [ 'both names',
      qq({"model":"m",$MSGS,"max_tokens":64000,"max_completion_tokens":8192}),
      'max_tokens',
      "Setting 'max_tokens' and 'max_completion_tokens' at the same time is "
      . "not supported." ],
    (map { [ "max_completion_tokens $_",
             qq({"model":"m",$MSGS,"max_completion_tokens":$_}),
             'max_completion_tokens' ] }
         '"64000"', '64000.5', '-64000', '0', '1e400', '9007199254740993',
         'true', '[64000]', '{}'),
);

for my $c (@tricks) {
    my ($what, $body, $param, $message) = @$c;
    my $r = ask('openai', $low, $body);

    subtest "lowering tier, $what: refused" => sub {
        is($r->{status}, 400, 'status 400');
        is($r->{json}{error}{param}, $param, "param: $param");
        is($r->{json}{error}{message}, $message, 'OpenAI\'s message')
            if defined $message;
        ok(!exists $r->{headers}{'x-llm-max-tokens-lowered'},
           'nothing was lowered');
        is(scalar(@{ rows($r, 0) }), 0, 'no row');
    };
}

# A name that differs from the limit's only in case: an upstream that
# matches names without case (Go's encoding/json) would read it as the
# limit the gateway did not see
for my $c ([ 'openai', 'MAX_TOKENS' ], [ 'openai', 'Max_Completion_Tokens' ],
           [ 'anthropic', 'Max_Tokens' ], [ 'responses', 'MAX_OUTPUT_TOKENS' ],
           [ 'openai', 'Model' ], [ 'anthropic', 'STREAM' ])
{
    my ($api, $name) = @$c;
    my $r = ask($api, $low, body($api, $name => 64000));

    subtest "$api, a member $name: refused" => sub {
        is($r->{status}, 400, 'status 400');
        my $e = $r->{json}{error} // {};
        is($e->{param} // ($e->{details} // {})->{param}, $name,
           "param: $name");
        like($e->{message} // '', qr/only in case/, 'the message says why');
        is(scalar(@{ rows($r, 0) }), 0, 'no row');
    };
}

# a huge integer that is exact is lowered like any other
{
    my $r = ask('responses', $low,
                '{"model":"m","input":"hi","max_output_tokens":1e15}');
    is($r->{status}, 200, 'max_output_tokens 1e15: served');
    is($r->{headers}{'x-llm-max-tokens-lowered'}, '1000000000000000',
       '... x-llm-max-tokens-lowered: 1000000000000000');
    is(read_max($r), $MAX, "... the upstream obeys $MAX");
}

# n choices of the lowered limit are reserved
{
    my $r = ask('openai', $low, body('openai', max_tokens => 64000, n => 3));
    is($r->{status}, 200, 'n 3, max_tokens 64000: served');
    is(rows($r)->[0]{reserved_tokens}, $PROMPT + 3 * $MAX,
       '... reserved: n x the lowered limit');
}

# the lowered limit goes under the client's member: max_tokens stays
# max_tokens, which a reasoning model refuses as OpenAI's do
{
    my $r = ask('openai', $low, body('openai', model => 'mock-o3-mini',
                                     max_tokens => 64000));
    is($r->{status}, 400, 'mock-o3-mini, max_tokens 64000 lowered: the '
       . 'upstream refuses max_tokens');
    is($r->{json}{error}{code}, 'unsupported_parameter',
       '... unsupported_parameter: the member was not renamed');

    $r = ask('openai', $low, body('openai', model => 'mock-o3-mini',
                                  max_completion_tokens => 64000));
    is($r->{status}, 200, 'mock-o3-mini, max_completion_tokens 64000: served');
    is(read_max($r), $MAX, "... the upstream obeys $MAX");
}

# --- the default's name -------------------------------------------------------

# [ location, model, status, what the upstream reads ]
my @names = (
    [ '/v1/chat/completions', 'mock-o3-mini', 200, $DEFAULT ],
    [ '/v1/chat/completions', 'm', 200, $DEFAULT ],
    [ '/modern/v1/chat/completions', 'mock-o3-mini', 200, $DEFAULT ],
    [ '/legacy/v1/chat/completions', 'm', 200, $DEFAULT ],
    [ '/legacy/v1/chat/completions', 'mock-o3-mini', 400, '?' ],
);

for my $c (@names) {
    my ($path, $model, $status, $max) = @$c;

    for my $stream (0, 1) {
        my $r = ask('openai', $ref, body('openai', model => $model,
                                         $stream ? (stream => JSON::PP::true)
                                                 : ()),
                    path => $path);
        my $what = "$path, $model, no limit" . ($stream ? ', streamed' : '');

        is($r->{status}, $status, "$what: $status") or diag($r->{content});
        is(read_max($r), $max, "... the upstream read max=$max");

        if ($status == 400) {
            is($r->{json}{error}{code}, 'unsupported_parameter',
               '... the gateway wrote max_tokens, as limit_param says');
            is($r->{json}{error}{message}, "Unsupported parameter: "
               . "'max_tokens' is not supported with this model. Use "
               . "'max_completion_tokens' instead.", '... OpenAI\'s message');
        }
    }
}

# a null limit is replaced by the default, under one name only
{
    my $r = ask('openai', $ref,
                qq({"model":"mock-o3-mini",$MSGS,"max_tokens":null}));
    is($r->{status}, 200, 'mock-o3-mini, max_tokens null: served');
    is(read_max($r), $DEFAULT, "... the upstream read the default $DEFAULT");

    $r = ask('openai', $ref,
             qq({"model":"m",$MSGS,"max_tokens":null,)
             . qq("max_completion_tokens":null}), path =>
             '/legacy/v1/chat/completions');
    is($r->{status}, 200, 'legacy, both limits null: served');
    is(read_max($r), $DEFAULT, "... the upstream read the default $DEFAULT");
}

# Anthropic's default is max_tokens, the Responses API's max_output_tokens
for my $api ('anthropic', 'responses') {
    my $r = ask($api, $ref, body($api));
    is($r->{status}, 200, "$api, no limit: served");
    is(read_max($r), $DEFAULT, "... the upstream read the default $DEFAULT");
}

# --- mockllm on its own, as strict as OpenAI ---------------------------------

{
    my $mock = 'http://127.0.0.1:' . stack()->{LLMGW_MOCK_PORT}
               . '/v1/chat/completions';

    # [ model, members, status, code, message ]
    my @strict = (
        [ 'mock-o3-mini', '"max_tokens":100', 400, 'unsupported_parameter',
          "Unsupported parameter: 'max_tokens' is not supported with this "
          . "model. Use 'max_completion_tokens' instead." ],
        [ 'mock-o1', '"max_tokens":100', 400, 'unsupported_parameter' ],
        [ 'mock-o3-mini', '"max_completion_tokens":100', 200 ],
        [ 'mock-o3-mini', '"max_tokens":null', 200 ],
        [ 'mock-omni', '"max_tokens":100', 200 ],
        [ 'm', '"max_tokens":100', 200 ],
        [ 'm', '"max_completion_tokens":100', 200 ],
        [ 'm', '"max_completion_tokens":100,"max_tokens":100', 400,
          'invalid_parameter_combination',
          "Setting 'max_tokens' and 'max_completion_tokens' at the same time "
          . "is not supported." ],
    );

    for my $c (@strict) {
        my ($model, $members, $status, $code, $message) = @$c;
        my $r = http_post($mock, qq({"model":"$model",$MSGS,$members}),
                          'x-mock-tokens' => 1);
        my $e = (eval { decode_json($r->{content}) } // {})->{error} // {};

        subtest "mockllm: $model, $members: $status" => sub {
            is($r->{status}, $status, 'status');
            return if $status == 200;
            is($e->{param}, 'max_tokens', 'param max_tokens');
            is($e->{code}, $code, "code $code");
            is($e->{type}, 'invalid_request_error', 'invalid_request_error');
            is($e->{message}, $message, 'OpenAI\'s message')
                if defined $message;
        };
    }
}

# --- the configuration --------------------------------------------------------

for my $c ([ 'above_max=maybe', 'llm_gateway_tier x tpm=1 above_max=maybe;',
             qr/invalid parameter "above_max=maybe" of tier "x"/ ],
           [ 'limit_param=max_output_tokens',
             'llm_gateway_backend b limit_param=max_output_tokens;',
             qr/invalid parameter "limit_param=max_output_tokens"/ ])
{
    my ($what, $line, $want) = @$c;
    my ($rc, $out) = nginx(http => <<"EOF")->test();
    %%GATEWAY%%
    $line
    llm_gateway_tier  free  unpriced=allow tpm=1000;

    server {
        listen  127.0.0.1:%%PORT%%;

        location / {
            llm_gateway  zone=llm;
            proxy_pass   http://127.0.0.1:%%MOCK%%;
        }
    }
EOF
    isnt($rc, 0, "$what: nginx -t fails");
    like($out, qr/\[emerg\].*$want/, "$what: says which") or diag($out);
}

$ng->no_alerts();

done_testing();
