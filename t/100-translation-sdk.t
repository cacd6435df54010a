#!/usr/bin/perl

# Tool calls through translating roles, with real clients: the official
# openai SDK streaming with a tool against a role served by a Messages
# backend, the Anthropic SDK against one served by a Chat Completions
# backend, and the AI SDK's streamText, which runs the tool and sends its
# result, with its OpenAI (Chat and Responses) and Anthropic providers.
# Each gets the tool call's name and arguments exactly as the mock made
# them (the mock's own answer to the same request in its own API says
# which), then the final answer after the tool's result; each exchange
# has its ledger row, whose tokens are the backend's usage.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use JSON::PP;
use LLMGW;
use Test::More;

my $s = stack();
my $tools = "$s->{LLMGW_BUILD}/sdk/tools.mjs";

plan(skip_all => 'node is not installed: the SDKs need it')
    unless grep { -x "$_/node" } split(/:/, $ENV{PATH} // '');

my $t = new_tenant(tier => 'big');
my $m = mockllm();

my $ng = nginx(http => <<"EOF")->run();
    %%GATEWAY%%
    llm_gateway_tier  big  unpriced=allow tpm=100000000 burst=100000000 max_tokens=100000;

    llm_gateway_backend  oai  upstream=mock api=openai;
    llm_gateway_backend  ant  upstream=mock api=anthropic;

    upstream mock { server 127.0.0.1:$m->{port}; }

    llm_gateway_role  claude  ant  model=mock-claude-sonnet-4;
    llm_gateway_role  gpt     oai  model=mock-gpt-4o-mini;

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
EOF

# name => [ library, the role, the backend's API, the client's ]
my %cases = (
    'openai-sdk'      => [ 'openai', 'claude', 'anthropic', 'openai' ],
    'anthropic-sdk'   => [ 'anthropic', 'gpt', 'openai', 'anthropic' ],
    'aisdk-chat'      => [ 'aisdk-openai-chat', 'claude', 'anthropic',
                           'openai' ],
    'aisdk-responses' => [ 'aisdk-openai-responses', 'claude', 'anthropic',
                           'responses' ],
    'aisdk-anthropic' => [ 'aisdk-anthropic', 'gpt', 'openai', 'anthropic' ],
);

my $file = $ng->dir() . '/tools.json';
open(my $fh, '>', $file) or die "$file: $!";
print $fh encode_json({ base => $ng->url(), cases => [
    map { { name => $_, lib => $cases{$_}[0], key => $t->{key},
            model => $cases{$_}[1], tokens => 4, calls => 2 } }
        sort keys %cases ] });
close($fh);

my $out = `node $tools $file 2>&1`;
my %got;
for (split(/\n/, $out)) {
    my $j = eval { decode_json($_) } or next;
    $got{ $j->{name} } = $j;
}
is($?, 0, 'the clients ran') or diag($out);

# what the mock itself calls the tool with, in each of its APIs
my $schema = { type => 'object',
               properties => { city => { type => 'string',
                                         description => 'A city' } },
               required => [ 'city' ] };
my $user = [ { role => 'user', content => 'What is the weather in Paris?' } ];
my %direct = (
    anthropic => http_post("$m->{url}/v1/messages",
        { model => 'mock-claude-sonnet-4', max_tokens => 100,
          messages => $user,
          tools => [ { name => 'get_weather', input_schema => $schema } ] },
        'x-mock-tokens' => 4, 'x-mock-tool-calls' => 2),
    openai => http_post("$m->{url}/v1/chat/completions",
        { model => 'mock-gpt-4o-mini', max_completion_tokens => 100,
          messages => $user,
          tools => [ { type => 'function',
                       function => { name => 'get_weather',
                                     parameters => $schema } } ] },
        'x-mock-tokens' => 4, 'x-mock-tool-calls' => 2),
);

my %mock_calls;
my $d = decode_json($direct{anthropic}{content});
$mock_calls{anthropic} = [ map { [ $_->{name}, $_->{input} ] }
                           grep { $_->{type} eq 'tool_use' }
                           @{ $d->{content} } ];
$d = decode_json($direct{openai}{content});
$mock_calls{openai} = [ map { [ $_->{function}{name},
                                decode_json($_->{function}{arguments}) ] }
                        @{ $d->{choices}[0]{message}{tool_calls} } ];
my %mock_out = (
    anthropic => decode_json($direct{anthropic}{content})->{usage}{output_tokens},
    openai => decode_json($direct{openai}{content})->{usage}{completion_tokens});

is(scalar(@{ $mock_calls{$_} }), 2, "the mock's $_ API calls the tool twice")
    for qw(anthropic openai);

for my $name (sort keys %cases) {
    my ($lib, $role, $up, $api) = @{ $cases{$name} };
    my $r = $got{$name} // {};

    ok($r->{ok}, "$name: served") or diag(encode_json($r));
    is(scalar(@{ $r->{calls} // [] }), 2, "$name: two tool calls");

    for my $i (0, 1) {
        my $c = $r->{calls}[$i] // {};
        is($c->{name}, $mock_calls{$up}[$i][0],
           "$name: call $i, the mock's tool name");
        is_deeply(eval { decode_json($c->{args}) }, $mock_calls{$up}[$i][1],
                  "$name: call $i, the mock's arguments");
    }

    is($r->{text}, 'tok1 tok2 tok3 tok4 ',
       "$name: the final answer, after the results");

    # each exchange: one row, the client's API and the backend's, the
    # backend's usage
    my @ids = grep { defined } @{ $r->{ids} // [] };
    cmp_ok(scalar(@ids), '>=', 2, "$name: two exchanges at least");

    for my $id (@ids) {
        my $row = usage_row($id) // {};
        is_deeply([ @$row{qw(api upstream_api backend status)} ],
                  [ $api, $up, $up eq 'openai' ? 'oai' : 'ant', 200 ],
                  "$name: $id, a row of a translated request");
    }

    # the first exchange called the tools: the backend's output for them
    my $first = usage_row($ids[0]) // {};
    is($first->{output_tokens}, $mock_out{$up},
       "$name: the calls' output tokens, as the backend counted them");
}

$ng->stop();
$ng->no_alerts();

done_testing();
