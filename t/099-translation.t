#!/usr/bin/perl

# Translation between dialects: a role served by a backend of another
# dialect gets the request in the backend's dialect and sends the answer
# back in the client's, whole or streamed, text or tool calls, and errors
# too; what cannot be mapped is a 400 naming the field, before anything
# goes upstream; a role that mixes dialects fails over across them.  The
# mock serves each model family on its own endpoints only, so that an
# untranslated request fails.  Each answer is compared with the mock's own
# answer to the same request in its own dialect, sent to it directly.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use HTTP::Tiny;
use JSON::PP;
use LLMGW;
use Test::More;
use Time::HiRes qw(sleep);

stack();

my $t = new_tenant(tier => 'big');
my $m = mockllm();
my $echo = LLMGW::Nginx::free_port();
my $busy = LLMGW::Nginx::free_port();
my $bad = LLMGW::Nginx::free_port();

# the echo backends answer with the headers they got, in their dialect
my $ant_echo = '{"id":"msg_echo","type":"message","role":"assistant",'
    . '"model":"mock-claude-echo","content":[{"type":"text","text":'
    . '"v=$http_anthropic_version b=$http_anthropic_beta k=$http_x_api_key"}],'
    . '"stop_reason":"end_turn","stop_sequence":null,'
    . '"usage":{"input_tokens":5,"output_tokens":3}}';
my $oai_echo = '{"id":"chatcmpl-echo","object":"chat.completion",'
    . '"created":1,"model":"mock-gpt-echo","choices":[{"index":0,'
    . '"message":{"role":"assistant","content":'
    . '"v=$http_anthropic_version b=$http_anthropic_beta"},'
    . '"finish_reason":"stop"}],'
    . '"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}';

my $ng = nginx(pass_mock => 0, http => <<"EOF")->run();
    %%GATEWAY%%
    llm_gateway_tier  big  unpriced=allow tpm=100000000 burst=100000000 max_tokens=100000;
    llm_gateway_pass_headers  x-mock-* anthropic-beta;

    llm_gateway_backend  oai       upstream=mock api=openai;
    llm_gateway_backend  ant       upstream=mock api=anthropic;
    llm_gateway_backend  ant-busy  upstream=busy api=anthropic;
    llm_gateway_backend  ant-echo  upstream=echo api=anthropic;
    llm_gateway_backend  oai-echo  upstream=echo api=openai;
    llm_gateway_backend  oai-busy  upstream=busy api=openai;
    llm_gateway_backend  ant-bad   upstream=bad api=anthropic;

    upstream mock { server 127.0.0.1:$m->{port}; }
    upstream echo { server 127.0.0.1:$echo; }
    upstream busy { server 127.0.0.1:$busy; }
    upstream bad { server 127.0.0.1:$bad; }

    llm_gateway_role  claude     ant  model=mock-claude-sonnet-4;
    llm_gateway_role  gpt        oai  model=mock-gpt-4o-mini;
    llm_gateway_role  mixed      ant-busy  model=mock-claude-sonnet-4
                                 priority=1;
    llm_gateway_role  mixed      oai  model=mock-gpt-4o-mini  priority=2;
    llm_gateway_role  claude-e   ant-echo  model=mock-claude-echo;
    llm_gateway_role  gpt-e      oai-echo  model=mock-gpt-echo;
    llm_gateway_role  mixed2     oai-busy  model=mock-gpt-4o-mini
                                 priority=1;
    llm_gateway_role  mixed2     ant  model=mock-claude-sonnet-4  priority=2;
    llm_gateway_role  claude-bad ant-bad  model=mock-claude-bad;

    server {
        listen  127.0.0.1:%%PORT%%;

        location = /v1/chat/completions {
            llm_gateway  zone=llm api=openai;
            proxy_pass   http://\$llm_upstream\$llm_upstream_uri;
        }

        location = /v1/messages {
            llm_gateway  zone=llm api=anthropic;
            proxy_pass   http://\$llm_upstream\$llm_upstream_uri;
        }

        location = /v1/responses {
            llm_gateway  zone=llm api=responses;
            proxy_pass   http://\$llm_upstream\$llm_upstream_uri;
        }
    }

    # the busy backend: the mock answering Anthropic's 529 overloaded_error
    server {
        listen  127.0.0.1:$busy;

        location / {
            proxy_set_header  x-mock-status  529;
            proxy_pass        http://mock;
        }
    }

    server {
        listen       127.0.0.1:$echo;
        default_type application/json;

        location = /v1/messages {
            return 200 '$ant_echo';
        }

        location = /v1/chat/completions {
            return 200 '$oai_echo';
        }
    }

    # a 200 that is not a Message
    server {
        listen       127.0.0.1:$bad;
        default_type application/json;

        location = /v1/messages {
            return 200 '{"object":"chat.completion","choices":[]}';
        }
    }
EOF

my $auth = { authorization => "Bearer $t->{key}" };
my $http = HTTP::Tiny->new(timeout => 30);

sub post {
    my ($path, $body, %h) = @_;
    return http_post($ng->url($path), $body, %$auth, %h);
}

# the mock itself, in its own dialect
sub direct {
    my ($path, $body, %h) = @_;
    return http_post("$m->{url}$path", $body, %h);
}

# an SSE body as [ [event, data], ... ]; data decoded unless [DONE]
sub events {
    my ($body) = @_;
    my @ev;

    for my $block (split /\r?\n\r?\n/, $body) {
        my ($type, @data) = ('');

        for my $line (split /\r?\n/, $block) {
            $type = $1 if $line =~ /^event: ?(.*)$/;
            push @data, $1 if $line =~ /^data: ?(.*)$/;
        }

        next unless @data;
        my $d = join("\n", @data);
        push @ev, [ $type, $d eq '[DONE]' ? $d : decode_json($d) ];
    }

    return @ev;
}

# what a Chat stream says: its text, its tool calls, finish, usage
sub chat_stream {
    my (@ev) = @_;
    my %s = (text => '', calls => [], done => 0);

    for my $e (@ev) {
        my $d = $e->[1];
        if (!ref $d) { $s{done}++; next; }
        $s{usage} = $d->{usage} if $d->{usage};
        $s{error} = $d->{error} if $d->{error};

        for my $c (@{ $d->{choices} // [] }) {
            my $delta = $c->{delta} // {};
            $s{text} .= $delta->{content} // '';
            $s{role} //= $delta->{role};
            $s{finish} = $c->{finish_reason} if $c->{finish_reason};

            for my $tc (@{ $delta->{tool_calls} // [] }) {
                my $k = $s{calls}[ $tc->{index} ] //= { args => '' };
                $k->{id} //= $tc->{id};
                $k->{name} //= $tc->{function}{name};
                $k->{args} .= $tc->{function}{arguments} // '';
            }
        }
    }

    return \%s;
}

# what a Messages stream says
sub msg_stream {
    my (@ev) = @_;
    my %s = (text => '', calls => [], types => []);
    my %block;

    for my $e (@ev) {
        my ($type, $d) = @$e;
        push @{ $s{types} }, $type;
        $s{mistyped}++ if ($d->{type} // '') ne $type;

        if ($type eq 'message_start') {
            $s{start} = $d->{message};
        } elsif ($type eq 'content_block_start') {
            $block{ $d->{index} } = $d->{content_block};
            push @{ $s{calls} }, { id => $d->{content_block}{id},
                                   name => $d->{content_block}{name},
                                   args => '' }
                if $d->{content_block}{type} eq 'tool_use';
        } elsif ($type eq 'content_block_delta') {
            my $dl = $d->{delta};
            $s{text} .= $dl->{text} if $dl->{type} eq 'text_delta';
            $s{calls}[-1]{args} .= $dl->{partial_json}
                if $dl->{type} eq 'input_json_delta';
        } elsif ($type eq 'message_delta') {
            $s{stop} = $d->{delta}{stop_reason};
            $s{usage} = $d->{usage};
        } elsif ($type eq 'error') {
            $s{error} = $d->{error};
        }
    }

    return \%s;
}

sub row_of {
    my ($r) = @_;
    my $rows = usage_rows($r->{headers}{'x-request-id'});
    return @$rows == 1 ? $rows->[0] : undef;
}

my $user = [ { role => 'user', content => 'Say something, please.' } ];


###############################################################################
# the mock serves each family on its own endpoints: untranslated fails

my $r = direct('/v1/chat/completions',
               { model => 'mock-claude-sonnet-4', messages => $user });
is($r->{status}, 404, 'the mock: a Claude model on Chat Completions is 404');
like($r->{content}, qr/model_not_found/, 'model_not_found');

$r = direct('/v1/messages', { model => 'mock-gpt-4o-mini', max_tokens => 50,
                              messages => $user });
is($r->{status}, 404, 'the mock: a GPT model on Messages is 404');


###############################################################################
# Chat client, Anthropic backend: whole

$r = post('/v1/chat/completions', { model => 'claude', messages => $user,
                                     max_tokens => 50 },
          'x-mock-tokens' => 5);
is($r->{status}, 200, 'chat -> messages: 200');
my $b = decode_json($r->{content});
is($b->{object}, 'chat.completion', 'a Chat completion');
is($b->{choices}[0]{message}{role}, 'assistant', 'the assistant speaks');
is($b->{choices}[0]{message}{content}, 'tok1 tok2 tok3 tok4 tok5 ',
   "the mock's text");
is($b->{choices}[0]{finish_reason}, 'stop', 'end_turn is stop');
like($r->{headers}{'x-mock-read'} // '', qr/model=mock-claude-sonnet-4 max=50 /,
     "the backend read the role's model and the limit, as max_tokens");
is($r->{headers}{'x-llmgw-backend'}, 'ant', 'served by ant');

my $d = direct('/v1/messages', { model => 'mock-claude-sonnet-4',
                                 max_tokens => 50, messages => $user },
               'x-mock-tokens' => 5);
my $du = decode_json($d->{content})->{usage};
is($b->{usage}{prompt_tokens}, $du->{input_tokens},
   "prompt_tokens: the backend's input_tokens");
is($b->{usage}{completion_tokens}, 5, 'completion_tokens: 5');
is($b->{usage}{total_tokens}, $du->{input_tokens} + 5, 'total_tokens');

my $row = row_of($r);
ok($row, 'one ledger row');
is($row->{input_tokens}, $du->{input_tokens}, "the row: the backend's input");
is($row->{output_tokens}, 5, "the row: the backend's output");
is($row->{api}, 'openai', "the row: the client's dialect");
is($row->{upstream_api}, 'anthropic', 'the row: what served it, Messages');
is($row->{backend}, 'ant', 'the row: the backend');
is($row->{model}, 'mock-claude-sonnet-4', "the row: the backend's model");

# cached and cache-write tokens: Chat counts them in the prompt
$r = post('/v1/chat/completions', { model => 'claude', messages => $user,
                                     max_tokens => 50 },
          'x-mock-tokens' => 2, 'x-mock-cached-tokens' => 3,
          'x-mock-cache-creation-tokens' => 2);
$b = decode_json($r->{content});
is($b->{usage}{prompt_tokens_details}{cached_tokens}, 3,
   'cache reads: cached_tokens');
is($b->{usage}{prompt_tokens}, $du->{input_tokens},
   'the prompt includes the cached and written tokens');
$row = row_of($r);
is($row->{cached_input_tokens}, 3, 'the row: 3 cached');
is($row->{cache_write_tokens}, 2, 'the row: 2 written');


###############################################################################
# Chat client, Anthropic backend: streamed

$r = post('/v1/chat/completions', { model => 'claude', messages => $user,
                                     max_tokens => 50, stream => JSON::PP::true },
          'x-mock-tokens' => 4);
is($r->{status}, 200, 'chat -> messages, streamed: 200');
like($r->{headers}{'content-type'}, qr{^text/event-stream}, 'a stream');
my $s = chat_stream(events($r->{content}));
is($s->{role}, 'assistant', 'the first chunk: the role');
is($s->{text}, 'tok1 tok2 tok3 tok4 ', "the mock's text, joined");
is($s->{finish}, 'stop', 'finish: stop');
is($s->{done}, 1, 'one [DONE], last');
ok(!$s->{usage}, 'no usage chunk: the client did not ask');
unlike($r->{content}, qr/message_start|content_block/,
       "nothing of Anthropic's reaches the client");
$row = row_of($r);
is($row->{output_tokens}, 4, "the row: the backend's 4 tokens");

$r = post('/v1/chat/completions',
          { model => 'claude', messages => $user, max_tokens => 50,
            stream => JSON::PP::true,
            stream_options => { include_usage => JSON::PP::true } },
          'x-mock-tokens' => 4);
$s = chat_stream(events($r->{content}));
is($s->{usage}{completion_tokens}, 4, 'asked for: the usage chunk');
is($s->{usage}{prompt_tokens}, $du->{input_tokens}, 'its prompt tokens');

# a length stop
$r = post('/v1/chat/completions', { model => 'claude', messages => $user,
                                     max_tokens => 3, stream => JSON::PP::true },
          'x-mock-tokens' => 10);
$s = chat_stream(events($r->{content}));
is($s->{finish}, 'length', 'max_tokens is length');
is($s->{text}, 'tok1 tok2 tok3 ', 'three tokens');


###############################################################################
# Messages client, OpenAI backend

$r = post('/v1/messages', { model => 'gpt', messages => $user,
                            max_tokens => 40, system => 'Be brief.' },
          'x-mock-tokens' => 3, 'anthropic-version' => '2023-06-01');
is($r->{status}, 200, 'messages -> chat: 200');
$b = decode_json($r->{content});
is($b->{type}, 'message', 'a Message');
is($b->{content}[0]{type}, 'text', 'a text block');
is($b->{content}[0]{text}, 'tok1 tok2 tok3 ', "the mock's text");
is($b->{stop_reason}, 'end_turn', 'stop is end_turn');
like($r->{headers}{'x-mock-read'} // '', qr/model=mock-gpt-4o-mini max=40 .*m=2 /,
     'the backend read the model, the limit, the system prompt as a message');
$d = direct('/v1/chat/completions',
            { model => 'mock-gpt-4o-mini', max_completion_tokens => 40,
              messages => [ { role => 'system', content => 'Be brief.' },
                            @$user ] },
            'x-mock-tokens' => 3);
$du = decode_json($d->{content})->{usage};
is($b->{usage}{input_tokens}, $du->{prompt_tokens},
   "input_tokens: the backend's prompt");
is($b->{usage}{output_tokens}, 3, 'output_tokens: 3');
$row = row_of($r);
is($row->{api}, 'anthropic', "the row: the client's Messages");
is($row->{upstream_api}, 'openai', 'served by Chat Completions');
is($row->{input_tokens}, $du->{prompt_tokens}, 'the row: the prompt');

$r = post('/v1/messages', { model => 'gpt', messages => $user,
                            max_tokens => 40, stream => JSON::PP::true },
          'x-mock-tokens' => 3, 'anthropic-version' => '2023-06-01');
is($r->{status}, 200, 'messages -> chat, streamed: 200');
$s = msg_stream(events($r->{content}));
is($s->{types}[0], 'message_start', 'message_start first');
is($s->{types}[-1], 'message_stop', 'message_stop last');
is($s->{text}, 'tok1 tok2 tok3 ', "the mock's text");
is($s->{stop}, 'end_turn', 'end_turn');
is($s->{usage}{output_tokens}, 3, 'message_delta: 3 output tokens');
unlike($r->{content}, qr/chat\.completion|\[DONE\]/,
       "nothing of OpenAI's reaches the client");


###############################################################################
# Responses client, either backend

for my $case ([ 'claude', 'anthropic' ], [ 'gpt', 'openai' ]) {
    my ($model, $up) = @$case;

    $r = post('/v1/responses', { model => $model, input => 'Hello there.',
                                 instructions => 'Be brief.',
                                 max_output_tokens => 30 },
              'x-mock-tokens' => 2);
    is($r->{status}, 200, "responses -> $up: 200");
    $b = decode_json($r->{content});
    is($b->{object}, 'response', 'a response');
    is($b->{status}, 'completed', 'completed');
    is($b->{output}[0]{content}[0]{text}, 'tok1 tok2 ', "the mock's text");
    is($b->{usage}{output_tokens}, 2, 'its output tokens');
    is(row_of($r)->{upstream_api}, $up, "the row: served by $up");

    $r = post('/v1/responses', { model => $model, input => 'Hello there.',
                                 max_output_tokens => 30,
                                 stream => JSON::PP::true },
              'x-mock-tokens' => 2);
    my @ev = events($r->{content});
    is($ev[0][0], 'response.created', "responses -> $up streamed: created");
    is($ev[-1][0], 'response.completed', 'completed last');
    is(join('', map { $_->[1]{delta} }
                grep { $_->[0] eq 'response.output_text.delta' } @ev),
       'tok1 tok2 ', 'the deltas: the text');
    is($ev[-1][1]{response}{usage}{output_tokens}, 2, 'the final usage');
    my @seq = map { $_->[1]{sequence_number} } @ev;
    is_deeply(\@seq, [ 0 .. $#ev ], 'sequence numbers from 0, in order');
}


###############################################################################
# tool calls: Chat client, Anthropic backend, streamed, then the result

my $tools = [ { type => 'function',
                function => { name => 'get_weather',
                              description => 'The weather of a city',
                              parameters => {
                                  type => 'object',
                                  properties => { city => { type => 'string' } },
                                  required => [ 'city' ] } } } ];
my $ant_tools = [ { name => 'get_weather',
                    description => 'The weather of a city',
                    input_schema => $tools->[0]{function}{parameters} } ];

$r = post('/v1/chat/completions',
          { model => 'claude', messages => $user, max_tokens => 50,
            tools => $tools, stream => JSON::PP::true },
          'x-mock-tokens' => 6, 'x-mock-tool-calls' => 2);
is($r->{status}, 200, 'chat -> messages, tools, streamed: 200');
$s = chat_stream(events($r->{content}));
is($s->{finish}, 'tool_calls', 'finish: tool_calls');
is(scalar(@{ $s->{calls} }), 2, 'two tool calls');

$d = direct('/v1/messages', { model => 'mock-claude-sonnet-4',
                              max_tokens => 50, messages => $user,
                              tools => $ant_tools, stream => JSON::PP::true },
            'x-mock-tokens' => 6, 'x-mock-tool-calls' => 2);
my $ds = msg_stream(events($d->{content}));
is(scalar(@{ $ds->{calls} }), 2, 'the mock itself: two tool_use blocks');

for my $i (0, 1) {
    is($s->{calls}[$i]{name}, $ds->{calls}[$i]{name},
       "call $i: the mock's tool name");
    is($s->{calls}[$i]{args}, $ds->{calls}[$i]{args},
       "call $i: the mock's arguments, byte for byte");
    like($s->{calls}[$i]{id}, qr/^toolu_/, "call $i: the backend's id");
}

ok(eval { decode_json($s->{calls}[0]{args}) }, 'the arguments are JSON');
$row = row_of($r);
is($row->{output_tokens}, $ds->{usage}{output_tokens},
   "the row: the backend's output tokens");

# the results go back: the final answer is text
my $history = [ @$user,
    { role => 'assistant', content => undef,
      tool_calls => [ map { { id => $_->{id}, type => 'function',
                              function => { name => $_->{name},
                                            arguments => $_->{args} } } }
                          @{ $s->{calls} } ] },
    map { { role => 'tool', tool_call_id => $_->{id},
            content => 'Sunny, 21 C.' } } @{ $s->{calls} } ];

$r = post('/v1/chat/completions',
          { model => 'claude', messages => $history, max_tokens => 50,
            tools => $tools, stream => JSON::PP::true },
          'x-mock-tokens' => 3, 'x-mock-tool-calls' => 2);
is($r->{status}, 200, 'the tool results: 200 (the mock takes the history)')
    or diag($r->{content});
$s = chat_stream(events($r->{content}));
is($s->{text}, 'tok1 tok2 tok3 ', 'the final answer: text');
is($s->{finish}, 'stop', 'finish: stop');


###############################################################################
# tool calls: Messages client, OpenAI backend, whole and streamed

$r = post('/v1/messages', { model => 'gpt', messages => $user,
                            max_tokens => 50, tools => $ant_tools },
          'x-mock-tokens' => 4, 'x-mock-tool-calls' => 1,
          'anthropic-version' => '2023-06-01');
is($r->{status}, 200, 'messages -> chat, tools: 200');
$b = decode_json($r->{content});
is($b->{stop_reason}, 'tool_use', 'stop_reason: tool_use');
my ($tu) = grep { $_->{type} eq 'tool_use' } @{ $b->{content} };
ok($tu, 'a tool_use block');

$d = direct('/v1/chat/completions',
            { model => 'mock-gpt-4o-mini', messages => $user,
              max_completion_tokens => 50, tools => $tools },
            'x-mock-tokens' => 4, 'x-mock-tool-calls' => 1);
my $dc = decode_json($d->{content})->{choices}[0]{message}{tool_calls}[0];
is($tu->{name}, $dc->{function}{name}, "the mock's tool name");
is_deeply($tu->{input}, decode_json($dc->{function}{arguments}),
          "the input: the mock's arguments");
like($tu->{id}, qr/^call_/, "the backend's id");

$r = post('/v1/messages', { model => 'gpt', messages => $user,
                            max_tokens => 50, tools => $ant_tools,
                            stream => JSON::PP::true },
          'x-mock-tokens' => 4, 'x-mock-tool-calls' => 1,
          'anthropic-version' => '2023-06-01');
$s = msg_stream(events($r->{content}));
is($s->{stop}, 'tool_use', 'streamed: tool_use');
is($s->{calls}[0]{args}, $dc->{function}{arguments},
   "streamed: the mock's arguments, joined");

$r = post('/v1/messages',
          { model => 'gpt', max_tokens => 50, tools => $ant_tools,
            messages => [ @$user,
                { role => 'assistant', content => [
                    { type => 'tool_use', id => $tu->{id},
                      name => $tu->{name}, input => $tu->{input} } ] },
                { role => 'user', content => [
                    { type => 'tool_result', tool_use_id => $tu->{id},
                      content => 'Sunny.' } ] } ] },
          'x-mock-tokens' => 2, 'x-mock-tool-calls' => 1,
          'anthropic-version' => '2023-06-01');
is($r->{status}, 200, 'the tool result: 200') or diag($r->{content});
is(decode_json($r->{content})->{content}[0]{text}, 'tok1 tok2 ',
   'the final answer: text');


###############################################################################
# what cannot be mapped: a 400 naming it, in the client's dialect, nothing
# sent upstream, no row

my $before = decode_json($http->get("$m->{url}/limits")->{content})->{requests};

$r = post('/v1/chat/completions', { model => 'claude', messages => $user,
                                     max_tokens => 50,
                                     logprobs => JSON::PP::true });
is($r->{status}, 400, 'logprobs to Messages: 400');
$b = decode_json($r->{content});
is($b->{error}{param}, 'logprobs', 'param: logprobs');
like($b->{error}{message}, qr/logprobs/, 'the message names it');
is($b->{error}{type}, 'invalid_request_error', "OpenAI's error shape");

$r = post('/v1/messages', { model => 'gpt', messages => $user,
                            max_tokens => 50, top_k => 5 },
          'anthropic-version' => '2023-06-01');
is($r->{status}, 400, 'top_k to Chat: 400');
$b = decode_json($r->{content});
is($b->{type}, 'error', "Anthropic's error shape");
like($b->{error}{message}, qr/top_k/, 'the message names top_k');

# what a hostile client tries: more choices than Messages has, a
# tool-call id Anthropic would refuse after admission, the model twice
$r = post('/v1/chat/completions', { model => 'claude', messages => $user,
                                     max_tokens => 50, n => 2 });
is($r->{status}, 400, 'n=2 to Messages: 400');
is(decode_json($r->{content})->{error}{param}, 'n', 'param: n');

$r = post('/v1/chat/completions', { model => 'claude', max_tokens => 50,
    messages => [ @$user,
        { role => 'assistant', content => undef, tool_calls => [
            { id => "call 1\r\nx", type => 'function',
              function => { name => 'f', arguments => '{}' } } ] },
        { role => 'tool', tool_call_id => "call 1\r\nx",
          content => 'ok' } ] });
is($r->{status}, 400, 'a tool-call id with a space and CR LF: 400');
like(decode_json($r->{content})->{error}{param} // '',
     qr/^messages\[\d\]\.tool_call/, 'naming the id');

$r = http_post($ng->url('/v1/chat/completions'),
               '{"model":"gpt","model":"claude","max_tokens":50,'
               . '"messages":[{"role":"user","content":"x"}]}', %$auth);
is($r->{status}, 400, 'the model twice: 400, whichever a parser keeps');

is(decode_json($http->get("$m->{url}/limits")->{content})->{requests},
   $before, 'nothing reached the backend');
is(scalar(@{ usage_rows($r->{headers}{'x-request-id'}, 1) }), 0, 'no row');


###############################################################################
# the backend's errors, in the client's dialect, with their status

$r = post('/v1/chat/completions', { model => 'claude', messages => $user,
                                     max_tokens => 50 },
          'x-mock-status' => 400);
is($r->{status}, 400, "the backend's 400 stays a 400");
$b = decode_json($r->{content});
ok($b->{error} && !$b->{type}, "in OpenAI's shape");
is($b->{error}{type}, 'invalid_request_error', 'invalid_request_error');

$r = post('/v1/messages', { model => 'gpt', messages => $user,
                            max_tokens => 50 },
          'x-mock-status' => 400, 'anthropic-version' => '2023-06-01');
is($r->{status}, 400, "OpenAI's 400 stays a 400");
$b = decode_json($r->{content});
is($b->{type}, 'error', "in Anthropic's shape");
is($b->{error}{type}, 'invalid_request_error', 'invalid_request_error');

# a stream the backend cuts: the gateway's error event, in the client's
$r = post('/v1/chat/completions', { model => 'claude', messages => $user,
                                     max_tokens => 50, stream => JSON::PP::true },
          'x-mock-tokens' => 8, 'x-mock-die-after' => 3);
$s = chat_stream(events($r->{content}));
is($s->{text}, 'tok1 tok2 tok3 ', 'cut: what came before');
ok($s->{error}, "then OpenAI's error chunk");

$r = post('/v1/messages', { model => 'gpt', messages => $user,
                            max_tokens => 50, stream => JSON::PP::true },
          'x-mock-tokens' => 8, 'x-mock-error-after' => 2,
          'anthropic-version' => '2023-06-01');
$s = msg_stream(events($r->{content}));
is($s->{text}, 'tok1 tok2 ', "OpenAI's in-band error: what came before");
is($s->{types}[-1], 'error', "then Anthropic's error event, last");


###############################################################################
# a role that mixes dialects: the Anthropic backend is overloaded, the
# OpenAI one serves, one clean stream in the client's dialect, one row

for my $c ([ '/v1/messages', 'anthropic' ], [ '/v1/chat/completions', 'openai' ])
{
    my ($path, $api) = @$c;

    # past the wait the busy backend asked for (Retry-After: 1)
    sleep(2.5 * time_scale());

    my $body = { model => 'mixed', messages => $user, max_tokens => 50,
                 stream => JSON::PP::true };

    $r = post($path, $body, 'x-mock-tokens' => 3,
              'anthropic-version' => '2023-06-01');
    is($r->{status}, 200, "mixed, $api client: 200");
    like($r->{headers}{'x-llmgw-failover'} // '', qr/^ant-busy=provider_/,
         'ant-busy was tried first, and said it was busy')
        or diag(explain($r->{headers}));
    is($r->{headers}{'x-llmgw-backend'}, 'oai', 'oai served');

    if ($api eq 'anthropic') {
        $s = msg_stream(events($r->{content}));
        is($s->{types}[0], 'message_start', 'one stream: message_start');
        is($s->{types}[-1], 'message_stop', 'message_stop');
        is(scalar(grep { $_ eq 'message_start' } @{ $s->{types} }), 1,
           'one message_start');
        ok(!$s->{mistyped}, "each event's data says its type");
    } else {
        $s = chat_stream(events($r->{content}));
        is($s->{done}, 1, 'one [DONE]');
        ok(!$s->{error}, 'no error');
    }

    is($s->{text}, 'tok1 tok2 tok3 ', "oai's text");
    $row = row_of($r);
    is($row->{backend}, 'oai', 'one row, oai');
    is($row->{upstream_api}, 'openai', 'served by Chat Completions');
    is($row->{api}, $api, "the client's dialect");
    is($row->{model}, 'mock-gpt-4o-mini', "oai's model");
}


# a whole answer, then the native backend: the client's own body goes to it
# (a Chat request with its limit, unstreamed, needs no rewrite of its own)
sleep(2.5 * time_scale());
$r = post('/v1/chat/completions', { model => 'mixed', messages => $user,
                                     max_tokens => 50 },
          'x-mock-tokens' => 2);
is($r->{status}, 200, 'mixed, whole, to the native backend: 200')
    or diag($r->{content});
like($r->{headers}{'x-mock-read'} // '', qr/model=mock-gpt-4o-mini max=50 /,
     'the native backend read the client\'s body, with its model');
is(decode_json($r->{content})->{choices}[0]{message}{content}, 'tok1 tok2 ',
   "and answered in the client's own API");

# the other way: OpenAI busy, the Messages client's own body to Anthropic
$r = post('/v1/messages', { model => 'mixed2', messages => $user,
                            max_tokens => 50 },
          'x-mock-tokens' => 2, 'anthropic-version' => '2023-06-01');
is($r->{status}, 200, 'mixed2: OpenAI busy, Anthropic serves: 200')
    or diag($r->{content});
like($r->{headers}{'x-llmgw-failover'} // '', qr/^oai-busy=/,
     'oai-busy was tried first');
is(decode_json($r->{content})->{content}[0]{text}, 'tok1 tok2 ',
   "the Messages client's own request, answered");


###############################################################################
# what cannot be an answer: a 502 in the client's API

$r = post('/v1/chat/completions', { model => 'claude-bad', messages => $user,
                                     max_tokens => 10 });
is($r->{status}, 502, 'a 200 that is not a Message: 502');
is(decode_json($r->{content})->{error}{type}, 'server_error',
   "in OpenAI's shape");

# a whole answer the backend cuts: the client gets a 502 of its own API
$r = post('/v1/messages', { model => 'gpt', messages => $user,
                            max_tokens => 50 },
          'x-mock-tokens' => 8, 'x-mock-die-after' => 3,
          'anthropic-version' => '2023-06-01');
is($r->{status}, 502, 'a whole answer cut short: 502');
is(eval { decode_json($r->{content})->{type} }, 'error',
   "in Anthropic's shape") or diag($r->{content});


###############################################################################
# headers: Anthropic's go to Anthropic alone, which gets its version

$r = post('/v1/chat/completions', { model => 'claude-e', messages => $user,
                                     max_tokens => 10 },
          'anthropic-beta' => 'x-1');
is($r->{status}, 200, 'echo through Messages: 200');
is(decode_json($r->{content})->{choices}[0]{message}{content},
   'v=2023-06-01 b=x-1 k=',
   'an OpenAI client: anthropic-version added, its beta passed');

$r = post('/v1/messages', { model => 'gpt-e', messages => $user,
                            max_tokens => 10 },
          'anthropic-version' => '2023-06-01', 'anthropic-beta' => 'x-2');
is($r->{status}, 200, 'echo through Chat: 200');
is(decode_json($r->{content})->{content}[0]{text}, 'v= b=',
   "an Anthropic client's headers do not reach OpenAI");

$ng->stop();
$ng->no_alerts();

done_testing();
