#!/usr/bin/perl

# mockllm, the mock upstream, on its own: the wire shapes of both APIs, the
# usage arithmetic, every x-mock- header, and the HTTP edges (keep-alive,
# chunked bodies, bad input, concurrent paced streams).

use strict;
use warnings;

use Test::More;
use IO::Select;
use HTTP::Tiny;
use JSON::PP;
use POSIX qw(WNOHANG);
use Time::HiRes qw(time sleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use Mock;

-x $MOCKLLM or BAIL_OUT("$MOCKLLM is not built: run make mockllm");

my $JSON = JSON::PP->new->canonical;
my $T = JSON::PP::true;
my $F = JSON::PP::false;

my $m = start_mockllm();
my ($pid, $port, $errlog) = @$m{qw(pid port log)};


###############################################################################
# The table.  Each case is one request on a fresh connection; json, sse and
# headers are matched as subsets (a key missing from the expectation is not
# checked, $ABSENT says a key must not be there, undef is JSON null).

my $OAI = '/v1/chat/completions';
my $ANT = '/v1/messages';

my $hello = [ { role => 'user', content => 'hello world' } ];    # P = 9

sub tokens { join '', map { "tok$_ " } 1 .. $_[0] }

sub oai_deltas { map { { data => { choices => [ { index => 0,
    delta => { content => "tok$_ " }, finish_reason => undef } ] } } } @_ }

sub ant_deltas { map { { event => 'content_block_delta',
    data => { type => 'content_block_delta', index => 0,
              delta => { type => 'text_delta', text => "tok$_ " } } } } @_ }

my @oai_head = (
    { data => { object => 'chat.completion.chunk', model => 'gpt-mock',
                id => qr/^chatcmpl-mock-\d+$/, created => qr/^\d+$/,
                choices => [ { index => 0,
                               delta => { role => 'assistant', content => '' },
                               finish_reason => undef } ] } },
);

# without an argument the usage of message_start is not looked at
sub ant_head {
    my @usage = @_ ? (usage => $_[0]) : ();
    return (
        { event => 'message_start',
          data => { type => 'message_start',
                    message => { id => qr/^msg_mock_\d+$/, type => 'message',
                                 role => 'assistant', model => 'claude-mock',
                                 content => [], stop_reason => undef,
                                 @usage } } },
        { event => 'content_block_start',
          data => { type => 'content_block_start', index => 0,
                    content_block => { type => 'text', text => '' } } },
        { event => 'ping', data => { type => 'ping' } },
    );
}

sub ant_tail {
    my ($reason, $usage) = @_;
    return (
        { event => 'content_block_stop',
          data => { type => 'content_block_stop', index => 0 } },
        { event => 'message_delta',
          data => { type => 'message_delta',
                    delta => { stop_reason => $reason, stop_sequence => undef },
                    usage => $usage } },
        { event => 'message_stop', data => { type => 'message_stop' } },
    );
}

my @cases = (

    {
        name => 'openai: whole response, default 16 tokens',
        path => $OAI,
        headers => { 'x-request-id' => 'req-42' },
        body => { model => 'gpt-mock', messages => $hello },
        status => 200,
        resp_headers => { 'content-type' => 'application/json',
                          'x-mock-request-id' => qr/^\d+$/,
                          'x-mock-saw-request-id' => 'req-42' },
        json => {
            id => qr/^chatcmpl-mock-\d+$/, object => 'chat.completion',
            created => qr/^\d+$/, model => 'gpt-mock',
            choices => [ { index => 0,
                           message => { role => 'assistant',
                                        content => tokens(16) },
                           finish_reason => 'stop' } ],
            usage => { prompt_tokens => 9, completion_tokens => 16,
                       total_tokens => 25,
                       prompt_tokens_details => { cached_tokens => 0 } },
        },
    },

    {
        name => 'openai: prompt formula over array parts, x-mock-tokens',
        path => $OAI,
        headers => { 'x-mock-tokens' => 3, 'x-mock-cached-tokens' => 5 },
        body => { model => 'gpt-mock', messages => [
            { role => 'system', content => 'abcde' },                # 2
            { role => 'user', content => [
                { type => 'text', text => 'abcd' },                   # 1
                { type => 'image_url', image_url => { url => 'x' } },
                { type => 'text', text => 'abcdefghi' } ] } ] },      # 3
        status => 200,
        json => {
            choices => [ { message => { content => tokens(3) },
                           finish_reason => 'stop' } ],
            usage => { prompt_tokens => 3 + 6 + 2 + 1 + 3,
                       completion_tokens => 3, total_tokens => 18,
                       prompt_tokens_details => { cached_tokens => 5 } },
        },
    },

    {
        name => 'openai: capped by max_completion_tokens -> length',
        path => $OAI,
        headers => { 'x-mock-tokens' => 50, 'x-mock-prompt-tokens' => 1000 },
        body => { model => 'gpt-mock', max_tokens => undef,
                  max_completion_tokens => 7, messages => $hello },
        status => 200,
        json => {
            choices => [ { message => { content => tokens(7) },
                           finish_reason => 'length' } ],
            usage => { prompt_tokens => 1000, completion_tokens => 7,
                       total_tokens => 1007 },
        },
    },

    {
        name => 'openai: default max_tokens is 64',
        path => $OAI,
        headers => { 'x-mock-tokens' => 100 },
        body => { model => 'gpt-mock', messages => $hello },
        status => 200,
        json => { choices => [ { finish_reason => 'length' } ],
                  usage => { completion_tokens => 64 } },
    },

    {
        name => 'openai: x-mock-no-usage',
        path => $OAI,
        headers => { 'x-mock-no-usage' => 1 },
        body => { model => 'gpt-mock', messages => $hello },
        status => 200,
        json => { object => 'chat.completion', usage => $ABSENT },
    },

    {
        name => 'anthropic: whole response with system and cache reads',
        path => $ANT,
        headers => { 'x-mock-tokens' => 4, 'x-mock-cached-tokens' => 100 },
        # more cached tokens than the prompt has are cut to the prompt
        body => { model => 'claude-mock', max_tokens => 1024,
                  system => 'be brief',                               # 2
                  messages => [ { role => 'user', content => [
                      { type => 'text', text => 'hello world' } ] } ] },  # 3
        status => 200,
        json => {
            id => qr/^msg_mock_\d+$/, type => 'message', role => 'assistant',
            model => 'claude-mock',
            content => [ { type => 'text', text => tokens(4) } ],
            stop_reason => 'end_turn', stop_sequence => undef,
            usage => { input_tokens => 0, output_tokens => 4,
                       cache_read_input_tokens => 3 + 3 + 3 + 2,
                       cache_creation_input_tokens => 0 },
        },
    },

    {
        name => 'anthropic: system as blocks, capped -> max_tokens',
        path => $ANT,
        body => { model => 'claude-mock', max_tokens => 2,
                  system => [ { type => 'text', text => 'x' x 9 } ],    # 3
                  messages => [] },
        status => 200,
        json => { content => [ { text => tokens(2) } ],
                  stop_reason => 'max_tokens',
                  usage => { input_tokens => 6, output_tokens => 2 } },
    },

    {
        name => 'openai: stream without include_usage',
        path => $OAI,
        headers => { 'x-mock-tokens' => 3 },
        body => { model => 'gpt-mock', stream => $T, messages => $hello },
        status => 200,
        sse => [
            @oai_head,
            oai_deltas(1 .. 3),
            { data => { choices => [ { index => 0, delta => {},
                                       finish_reason => 'stop' } ],
                        usage => $ABSENT } },
            { data => '[DONE]' },
        ],
    },

    {
        name => 'openai: stream with include_usage, capped',
        path => $OAI,
        headers => { 'x-mock-tokens' => 9, 'x-mock-cached-tokens' => 2 },
        body => { model => 'gpt-mock', stream => $T, max_tokens => 2,
                  stream_options => { include_usage => $T },
                  messages => $hello },
        status => 200,
        sse => [
            @oai_head,
            oai_deltas(1 .. 2),
            { data => { choices => [ { delta => {},
                                       finish_reason => 'length' } ] } },
            { data => { object => 'chat.completion.chunk', choices => [],
                        usage => { prompt_tokens => 9,
                                   completion_tokens => 2,
                                   total_tokens => 11,
                                   prompt_tokens_details =>
                                       { cached_tokens => 2 } } } },
            { data => '[DONE]' },
        ],
    },

    {
        name => 'openai: stream, x-mock-no-usage beats include_usage',
        path => $OAI,
        headers => { 'x-mock-tokens' => 1, 'x-mock-no-usage' => 1 },
        body => { model => 'gpt-mock', stream => $T,
                  stream_options => { include_usage => $T },
                  messages => $hello },
        status => 200,
        sse => [
            @oai_head,
            oai_deltas(1),
            { data => { choices => [ { finish_reason => 'stop' } ] } },
            { data => '[DONE]' },
        ],
    },

    {
        name => 'anthropic: stream event order and usage',
        path => $ANT,
        headers => { 'x-mock-tokens' => 3, 'x-mock-cached-tokens' => 4 },
        body => { model => 'claude-mock', stream => $T, max_tokens => 100,
                  messages => $hello },
        status => 200,
        sse => [
            # Anthropic's input_tokens leaves the cache reads out
            ant_head({ input_tokens => 9 - 4, output_tokens => 1,
                       cache_read_input_tokens => 4,
                       cache_creation_input_tokens => 0 }),
            ant_deltas(1 .. 3),
            ant_tail('end_turn', { output_tokens => 3 }),
        ],
    },

    {
        name => 'anthropic: stream capped, x-mock-no-usage',
        path => $ANT,
        headers => { 'x-mock-no-usage' => 1 },
        body => { model => 'claude-mock', stream => $T, max_tokens => 2,
                  messages => $hello },
        status => 200,
        sse => [
            ant_head($ABSENT),
            ant_deltas(1 .. 2),
            ant_tail('max_tokens', $ABSENT),
        ],
    },

    {
        name => 'openai: x-mock-malformed puts one bad frame before the end',
        path => $OAI,
        headers => { 'x-mock-tokens' => 2, 'x-mock-malformed' => 1 },
        body => { model => 'gpt-mock', stream => $T, messages => $hello },
        status => 200,
        sse => [
            @oai_head,
            oai_deltas(1 .. 2),
            { malformed => 1 },
            { data => { choices => [ { finish_reason => 'stop' } ] } },
            { data => '[DONE]' },
        ],
    },

    {
        name => 'anthropic: x-mock-malformed',
        path => $ANT,
        headers => { 'x-mock-tokens' => 1, 'x-mock-malformed' => 1 },
        body => { model => 'claude-mock', stream => $T, max_tokens => 64,
                  messages => $hello },
        status => 200,
        sse => [
            ant_head(),
            ant_deltas(1),
            { event => 'content_block_delta', malformed => 1 },
            ant_tail('end_turn', { output_tokens => 1 }),
        ],
    },

    {
        name => 'openai: x-mock-die-after in a stream: no last chunk',
        path => $OAI,
        headers => { 'x-mock-tokens' => 10, 'x-mock-die-after' => 2 },
        body => { model => 'gpt-mock', stream => $T,
                  stream_options => { include_usage => $T },
                  messages => $hello },
        status => 200,
        terminated => 0,
        closed => 1,
        sse => [ @oai_head, oai_deltas(1 .. 2) ],
    },

    {
        name => 'anthropic: x-mock-die-after 0: only the preamble',
        path => $ANT,
        headers => { 'x-mock-die-after' => 0 },
        body => { model => 'claude-mock', stream => $T, max_tokens => 64,
                  messages => $hello },
        status => 200,
        terminated => 0,
        closed => 1,
        sse => [ ant_head() ],
    },

    {
        name => 'openai: x-mock-die-after, whole response: body cut short',
        path => $OAI,
        headers => { 'x-mock-tokens' => 10, 'x-mock-die-after' => 3 },
        body => { model => 'gpt-mock', messages => $hello },
        status => 200,
        truncated => 1,
        closed => 1,
        body_like => qr/"content":"tok1 tok2 tok3 $/,
    },

    {
        name => 'openai: x-mock-status 429',
        path => $OAI,
        headers => { 'x-mock-status' => 429 },
        body => { model => 'gpt-mock', messages => $hello },
        status => 429,
        resp_headers => { 'retry-after' => 1 },
        json => { error => { message => 'Rate limit reached',
                             type => 'requests',
                             code => 'rate_limit_exceeded' } },
    },

    {
        name => 'anthropic: x-mock-status 429',
        path => $ANT,
        headers => { 'x-mock-status' => 429 },
        body => { model => 'claude-mock', messages => $hello },
        status => 429,
        resp_headers => { 'retry-after' => 1 },
        json => { type => 'error',
                  error => { type => 'rate_limit_error', message => qr/./ } },
    },

    {
        name => 'anthropic: x-mock-status 529',
        path => $ANT,
        headers => { 'x-mock-status' => 529 },
        body => { model => 'claude-mock', messages => $hello },
        status => 529,
        json => { type => 'error', error => { type => 'overloaded_error' } },
    },

    {
        name => 'openai: x-mock-status 500',
        path => $OAI,
        headers => { 'x-mock-status' => 500 },
        body => { model => 'gpt-mock', messages => $hello },
        status => 500,
        json => { error => { type => 'server_error', code => undef } },
    },

    {
        name => 'bad JSON -> 400',
        path => $OAI,
        raw_body => '{"model": "gpt-mock", "messages": [',
        status => 400,
        json => { error => { message => qr/./,
                             type => 'invalid_request_error',
                             code => undef } },
    },

    {
        name => 'no model -> 400',
        path => $OAI,
        body => { messages => $hello },
        status => 400,
        json => { error => { type => 'invalid_request_error' } },
    },

    {
        name => 'anthropic: bad JSON -> 400 in the Anthropic shape',
        path => $ANT,
        raw_body => '[1, 2',
        status => 400,
        json => { type => 'error',
                  error => { type => 'invalid_request_error' } },
    },

    {
        name => 'bad x-mock- header -> 400',
        path => $OAI,
        headers => { 'x-mock-tokens' => 'many' },
        body => { model => 'gpt-mock', messages => $hello },
        status => 400,
        json => { error => { message => qr/x-mock/ } },
    },

    {
        name => 'unknown endpoint -> 404',
        method => 'GET',
        path => '/v1/files',
        status => 404,
        json => { error => { type => 'invalid_request_error' } },
    },

    {
        name => 'chunked request body',
        path => $OAI,
        chunked => 1,
        headers => { 'x-mock-tokens' => 1 },
        body => { model => 'gpt-mock', messages => $hello },
        status => 200,
        json => { usage => { prompt_tokens => 9, completion_tokens => 1 } },
    },

    {
        name => '8 MiB body',
        path => $OAI,
        headers => { 'x-mock-tokens' => 1 },
        body => { model => 'gpt-mock', messages => [
            { role => 'user', content => 'x' x (8 * 1024 * 1024) } ] },
        status => 200,
        json => { usage => { prompt_tokens => 3 + 3 + 2 * 1024 * 1024 } },
    },

    {
        name => 'Connection: close is honoured',
        method => 'GET',
        path => '/health',
        headers => { 'Connection' => 'close' },
        status => 200,
        resp_headers => { 'connection' => 'close' },
        body_like => qr/^ok$/,
        closed => 1,
    },
);


for my $case (@cases) {
    run_case($case);
}


###############################################################################
# The rest does not fit one request on one connection.

{
    my $res = HTTP::Tiny->new(timeout => 3)
        ->get("http://127.0.0.1:$port/health");
    is($res->{status}, 200, 'health through HTTP::Tiny');
    is($res->{content}, 'ok', 'health body');
}

{
    my $s = connect_mockllm($m);
    my (@ids, $ok);

    for my $n (1 .. 2) {
        send_request($s, 'POST', $OAI, { 'x-mock-tokens' => $n },
                     $JSON->encode({ model => 'gpt-mock',
                                     messages => $hello }));
        my $res = read_response($s);
        $ok += $res->{status} == 200
               && decode($res->{body})->{usage}{completion_tokens} == $n;
        push @ids, $res->{headers}{'x-mock-request-id'};
    }

    is($ok, 2, 'keep-alive: two requests on one connection');
    cmp_ok($ids[1], '>', $ids[0], 'keep-alive: request ids count up');
    ok(!closed($s, 0.2), 'keep-alive: the connection stays open');
}

{
    my $s = connect_mockllm($m);
    print $s "GARBAGE\r\n\r\n";
    my $res = read_response($s);
    is($res->{status}, 400, 'bad HTTP -> 400');
    ok(closed($s, 1), 'bad HTTP -> closed');
}

{
    # a paced stream takes about its delay and blocks nobody meanwhile
    my $body = $JSON->encode({ model => 'gpt-mock', stream => $T,
                               messages => $hello });
    my $t0 = time;

    my $slow = connect_mockllm($m);
    send_request($slow, 'POST', $OAI,
                 { 'x-mock-tokens' => 5, 'x-mock-delay-ms' => 100 }, $body);

    my $fast = connect_mockllm($m);
    send_request($fast, 'POST', $OAI, { 'x-mock-tokens' => 5 }, $body);
    my $res = read_response($fast);
    my $t_fast = time - $t0;

    my $res_slow = read_response($slow);
    my $t_slow = time - $t0;

    ok($res->{terminated} && $res_slow->{terminated}, 'both streams end');
    cmp_ok($t_fast, '<', 0.3, 'the second request is not held up');
    cmp_ok($t_slow, '>=', 0.45, '5 tokens at 100 ms take 0.5 s');
    cmp_ok($t_slow, '<', 3, '... and not much longer');

    $t0 = time;
    my $ttfb = connect_mockllm($m);
    send_request($ttfb, 'GET', '/health', { 'x-mock-ttfb-ms' => 300 });
    $res = read_response($ttfb);
    my $t = time - $t0;
    ok($res->{status} == 200 && $t >= 0.29 && $t < 3,
       sprintf('x-mock-ttfb-ms: 300 took %.3f s', $t));
}

###############################################################################
# The reading: each body is read as its provider reads it, what the
# provider refuses is a 400 in its own format, and x-mock-read says what was
# read, refused or not.  [ path, body, status, x-mock-read, and the error:
# OpenAI's param (undef: null), Anthropic's message ].

my $RSP = '/v1/responses';
my $msgs = '"messages":[{"role":"user","content":"hi"}]';

sub rd {
    my %r = (model => 'm', max => 64, n => 1, stream => 0, m => 1, i => 0,
             f => 0, a => 0, t => 0, r => 0, @_);
    return join ' ', "model=$r{model}",
           map { "$_=$r{$_}" } qw(max n stream m i f a t r);
}

my @reads = (
    # the limit: one name, integral values, the older name
    [ $OAI, qq({"model":"m",$msgs}), 200, rd() ],
    [ $OAI, qq({"model":"m",$msgs,"max_tokens":9}), 200, rd(max => 9) ],
    [ $OAI, qq({"model":"m",$msgs,"max_completion_tokens":8.0}), 200,
      rd(max => 8) ],
    [ $OAI, qq({"model":"m",$msgs,"max\\u005ftokens":8e0}), 200,
      rd(max => 8) ],
    [ $OAI, qq({"model":"m",$msgs,"max_completion_tokens":1,
                "max_tokens":9000}), 400, rd(max => '?'), 'max_tokens',
      'invalid_parameter_combination' ],
    [ $OAI, qq({"model":"m",$msgs,"max_completion_tokens":null,
                "max_tokens":9000}), 200, rd(max => 9000) ],
    [ $OAI, qq({"model":"m",$msgs,"max_completion_tokens":1,
                "max\\u005ftokens":9000}), 400, rd(max => '?'),
      'max_tokens', 'invalid_parameter_combination' ],
    # a reasoning model takes max_completion_tokens only, as OpenAI's
    [ $OAI, qq({"model":"mock-o3-mini",$msgs,"max_tokens":9}), 400,
      rd(model => 'mock-o3-mini', max => '?'), 'max_tokens',
      'unsupported_parameter' ],
    [ $OAI, qq({"model":"mock-o3-mini",$msgs,"max_completion_tokens":9}),
      200, rd(model => 'mock-o3-mini', max => 9) ],
    (map { [ $OAI, qq({"model":"m",$msgs,"max_tokens":$_}), 400,
             rd(max => '?'), 'max_tokens' ] }
         '"8"', '2.5', '0', '-1', '1e20', 'true', '[8]'),
    [ $OAI, qq({"model":"m",$msgs,"max_tokens":5,"max_tokens":7}), 200,
      rd(max => 7) ],
    [ $OAI, qq({"model":"m",$msgs,"max_tokens":2147483647}), 200,
      rd(max => 2147483647) ],
    [ $OAI, qq({"model":"m",$msgs,"max_tokens":2147483648}), 400,
      rd(max => '?'), 'max_tokens' ],

    # n, stream
    [ $OAI, qq({"model":"m",$msgs,"n":2.0}), 200, rd(n => 2) ],
    [ $OAI, qq({"model":"m",$msgs,"n":128}), 200, rd(n => 128) ],
    [ $OAI, qq({"model":"m",$msgs,"n":null}), 200, rd() ],
    (map { [ $OAI, qq({"model":"m",$msgs,"n":$_}), 400, rd(n => '?'), 'n' ] }
         '0', '129', '"2"', '2.5', '-1'),
    [ $OAI, qq({"model":"m",$msgs,"stream":null}), 200, rd() ],
    (map { [ $OAI, qq({"model":"m",$msgs,"stream":$_}), 400,
             rd(stream => '?'), 'stream' ] } '"true"', '1', '{}'),

    # members of the other dialects
    (map { [ $OAI, qq({"model":"m",$msgs,"$_":1}), 400, rd(), $_ ] }
         qw(max_output_tokens max_tokens_to_sample system stop_sequences
            top_k thinking input instructions previous_response_id)),
    [ $OAI, qq({"model":"m",$msgs,"system":null,"top_k":null}), 200, rd() ],

    # the model
    [ $OAI, qq({$msgs}), 400, rd(model => ''), 'model' ],
    [ $OAI, qq({"model":"",$msgs}), 400, rd(model => ''), 'model' ],
    [ $OAI, qq({"model":5,$msgs}), 400, rd(model => ''), 'model' ],
    [ $OAI, qq({"model":"a\\u0001b",$msgs}), 400, rd(model => 'a%01b'),
      'model' ],
    [ $OAI, qq({"model":"a\\u0000b",$msgs}), 400, rd(model => 'a'),
      'model' ],
    [ $OAI, qq({"model":"a\\tb c%",$msgs}), 200, rd(model => 'a%09b%20c%') ],
    [ $OAI, qq({"model":"\xc3\xa9",$msgs}), 200, rd(model => '%C3%A9') ],

    # the prompt's parts, tools
    [ $OAI, qq({"model":"m"}), 400, rd(m => 0), 'messages' ],
    [ $OAI, qq({"model":"m","messages":{}}), 400, rd(m => 0), 'messages' ],
    [ $OAI, qq({"model":"m","messages":[1]}), 400, rd(), 'messages[0]' ],
    [ $OAI, qq({"model":"m","messages":[{"role":"user","content":[
                {"type":"text","text":"a"},
                {"type":"image_url","image_url":{"url":"http://x/a.png"}},
                {"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},
                {"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}},
                {"type":"file","file":{"file_id":"f1"}}]},
                {"role":"assistant","content":null,"tool_calls":[{"id":"c1",
                 "type":"function","function":{"name":"f","arguments":"{}"}}]},
                {"role":"tool","tool_call_id":"c1","content":"ok"}],
                "tools":[{"type":"function","function":{"name":"f"}},
                         {"type":"function","function":{"name":"g"}}],
                "functions":[{"name":"h"}]}), 200,
      rd(m => 3, i => 2, a => 1, f => 1, t => 3) ],
    [ $OAI, qq({"model":"m","messages":[{"role":"user","content":[
                {"type":"video","video":{}}]}]}), 400, rd(),
      'messages[0].content[0].type' ],
    [ $OAI, qq({"model":"m","messages":[{"role":"user","content":[
                {"text":"no type"}]}]}), 400, rd(),
      'messages[0].content[0].type' ],
    [ $OAI, qq({"model":"m",$msgs,"tools":{}}), 400, rd(), 'tools' ],

    # JSON, strictly
    # 1000 levels, the body's own object included
    [ $OAI, qq({"model":"m",$msgs,"metadata":) . ('[' x 999) . (']' x 999)
      . '}', 200, rd() ],
    [ $OAI, qq({"model":"m",$msgs,"metadata":) . ('[' x 1000) . (']' x 1000)
      . '}', 400, undef, undef ],

    # what cJSON reads of it, which is laxer, is reported
    [ $OAI, qq({"model":"m",$msgs,"max_tokens":01}), 400, rd(max => 1),
      undef ],
    (map { [ $OAI, $_, 400, rd(), undef ] }
         qq({"model":"m",$msgs} x),
         qq({"model":"m",$msgs,"user":"a\x01b"}),
         qq({"model":"m",$msgs,"user":"\xff"}),
         qq({"model":"m",$msgs,"max_tokens\\u0000x":9})),

    # Anthropic
    [ $ANT, qq({"model":"m",$msgs}), 400, rd(max => '?'),
      qr/^max_tokens: Field required$/ ],
    [ $ANT, qq({"model":"m",$msgs,"max_tokens":null}), 400, rd(max => '?'),
      qr/^max_tokens: Field required$/ ],
    [ $ANT, qq({"model":"m",$msgs,"max_tokens":"8"}), 400, rd(max => '?'),
      qr/^max_tokens: Input should be/ ],
    [ $ANT, qq({"model":"m",$msgs,"max_tokens":8,"max_completion_tokens":1}),
      400, rd(max => 8), qr/^max_completion_tokens: Extra inputs/ ],
    (map { [ $ANT, qq({"model":"m",$msgs,"max_tokens":8,"$_":1}), 400,
             rd(max => 8), qr/^\Q$_\E: Extra inputs are not permitted$/ ] }
         qw(n max_output_tokens max_tokens_to_sample stream_options input
            instructions previous_response_id functions)),
    [ $ANT, qq({"model":"m",$msgs,"max_tokens":8,"stream":"yes"}), 400,
      rd(max => 8, stream => '?'), qr/^stream: / ],
    [ $ANT, qq({"model":"m",$msgs,"max_tokens":100,
                "thinking":{"type":"enabled","budget_tokens":100}}), 400,
      rd(max => 100), qr/budget_tokens/ ],
    [ $ANT, qq({"model":"m",$msgs,"max_tokens":100,
                "thinking":{"type":"enabled","budget_tokens":99}}), 200,
      rd(max => 100) ],
    [ $ANT, qq({"model":"m","max_tokens":8,"system":"be brief",
                "messages":[{"role":"user","content":[
                {"type":"text","text":"a"},
                {"type":"image","source":{"type":"url","url":"http://x/a.png"}},
                {"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}},
                {"type":"document","source":{"type":"text","data":"x"}}]},
                {"role":"assistant","content":[{"type":"tool_use","id":"t1",
                 "name":"f","input":{"q":1}}]},
                {"role":"user","content":[{"type":"tool_result",
                 "tool_use_id":"t1","content":[{"type":"text","text":"r"},
                 {"type":"image","source":{"type":"base64","data":"AA"}},
                 {"type":"document","source":{"type":"text","data":"y"}}]}]}],
                "tools":[{"name":"f","input_schema":{}},
                         {"type":"web_search_20250305","name":"web_search"}],
                "mcp_servers":[{"type":"url","url":"https://x","name":"a"},
                               {"type":"url","url":"https://y","name":"b"}],
                "container":"c1"}), 200,
      rd(max => 8, m => 3, i => 3, f => 2, t => 2, r => 3) ],
    [ $ANT, qq({"model":"m","max_tokens":8,"messages":[{"role":"user",
                "content":[{"type":"video"}]}]}), 400, rd(max => 8),
      qr/^messages\.0\.content\.0\.type: / ],
    [ $ANT, qq({"model":"m","max_tokens":8,"system":[{"type":"image"}],
                $msgs}), 400, rd(max => 8), qr/^system\.0\.type: / ],
    [ $ANT, qq({"model":"m","max_tokens":8,"system":[{"type":"text",
                "text":"a"}],$msgs}), 200, rd(max => 8) ],
    [ $ANT, qq({"model":"m","max_tokens":8}), 400, rd(max => 8, m => 0),
      qr/^messages: Field required$/ ],

    # Responses
    [ $RSP, qq({"model":"m","input":"hi"}), 200, rd() ],
    [ $RSP, qq({"model":"m"}), 400, rd(m => 0), 'input' ],
    [ $RSP, qq({"model":"m","input":null}), 400, rd(m => 0), 'input' ],
    [ $RSP, qq({"model":"m","input":5}), 400, rd(m => 0), 'input' ],
    (map { [ $RSP, qq({"model":"m","$_":"x"}), 200, rd(m => 0, r => 1) ] }
         qw(previous_response_id conversation prompt)),
    (map { [ $RSP, qq({"model":"m","input":"hi","$_":1}), 400, rd(), $_ ] }
         qw(max_tokens max_completion_tokens max_tokens_to_sample n messages
            system stop_sequences top_k functions)),
    [ $RSP, qq({"model":"m","input":"hi","max_output_tokens":2.0,
                "stream":false}), 200, rd(max => 2) ],
    [ $RSP, qq({"model":"m","input":"hi","max_output_tokens":2.5}), 400,
      rd(max => '?'), 'max_output_tokens' ],
    [ $RSP, qq({"model":"m","instructions":"be brief","input":[
                {"role":"user","content":[{"type":"input_text","text":"a"},
                 {"type":"input_image","image_url":"http://x/a.png"},
                 {"type":"input_file","file_id":"f1"},
                 {"type":"input_audio","input_audio":{"data":"AA"}}]},
                {"type":"message","role":"assistant","content":[
                 {"type":"output_text","text":"b"}]},
                {"type":"function_call","call_id":"c","name":"f",
                 "arguments":"{}"},
                {"type":"function_call_output","call_id":"c","output":[
                 {"type":"input_image","image_url":"data:image/png;base64,AA"}]},
                {"type":"item_reference","id":"msg_1"},
                {"type":"reasoning","id":"rs_1","encrypted_content":"xx"}],
                "tools":[{"type":"web_search"}],
                "previous_response_id":"resp_1"}), 200,
      rd(m => 6, i => 2, f => 1, a => 1, t => 1, r => 2) ],
    [ $RSP, qq({"model":"m","input":[{"type":"computer_call"}]}), 400, rd(),
      'input[0]' ],
    [ $RSP, qq({"model":"m","input":[{"role":"user","content":[
                {"type":"text","text":"a"}]}]}), 400, rd(),
      'input[0].content[0].type' ],
);

for my $c (@reads) {
    my ($path, $body, $status, $read, $err, $code) = @$c;
    my $s = connect_mockllm($m);

    send_request($s, 'POST', $path, { 'x-mock-tokens' => 1 }, $body);
    my $res = read_response($s);
    close $s;

    my $name = "$path $body";
    $name =~ s/\s+/ /g;
    $name = substr($name, 0, 150);

    subtest "read: $name" => sub {
        is($res->{status}, $status, 'status');
        is($res->{headers}{'x-mock-read'}, $read, 'x-mock-read')
            if defined $read;

        return if $status == 200;

        if ($path eq $ANT) {
            match(decode($res->{body}),
                  { type => 'error',
                    error => { type => 'invalid_request_error',
                               message => $err } }, 'Anthropic error');
        } else {
            match(decode($res->{body}),
                  { error => { type => 'invalid_request_error',
                               message => qr/./, param => $err,
                               code => $code } }, 'OpenAI error');
        }
    };
}

{
    # what a request asks of the mock comes before its body's refusal,
    # and the body is read all the same
    my $s = connect_mockllm($m);
    send_request($s, 'POST', $ANT, { 'x-mock-status' => 429 },
                 qq({"model":"m",$msgs}));
    my $res = read_response($s);
    is($res->{status}, 429, 'x-mock-status before the body: 429');
    is($res->{headers}{'x-mock-read'}, rd(max => '?'),
       '... and x-mock-read is sent with it');

    send_request($s, 'POST', $OAI, {}, '[1,2]');
    $res = read_response($s);
    is($res->{status}, 400, 'a body that is not an object: 400');
    ok(!exists $res->{headers}{'x-mock-read'}, '... without x-mock-read');

    send_request($s, 'GET', '/health');
    $res = read_response($s);
    ok(!exists $res->{headers}{'x-mock-read'}, '/health: no x-mock-read');
}


###############################################################################
# n choices: each its own text, C tokens each, usage n x C; a stream
# carries each choice's index.

{
    my $s = connect_mockllm($m);
    send_request($s, 'POST', $OAI, { 'x-mock-tokens' => 50 },
                 qq({"model":"gpt-mock",$msgs,"n":3,"max_tokens":4}));
    my $res = read_response($s);
    is($res->{headers}{'x-mock-read'}, rd(model => 'gpt-mock', max => 4,
                                          n => 3), 'n=3: x-mock-read');
    match(decode($res->{body}), {
        choices => [ map { { index => $_,
                             message => { role => 'assistant',
                                          content => tokens(4) },
                             finish_reason => 'length' } } 0 .. 2 ],
        usage => { prompt_tokens => 7, completion_tokens => 12,
                   total_tokens => 19 } }, 'n=3: three choices of 4 tokens');

    send_request($s, 'POST', $OAI, { 'x-mock-tokens' => 2 },
                 qq({"model":"gpt-mock",$msgs,"n":2,"stream":true,
                     "stream_options":{"include_usage":true}}));
    $res = read_response($s);

    my @events = map { /^data: (.*)$/m ? $1 : '' } @{ $res->{chunks} };
    my $done = pop @events;
    my $usage = decode(pop @events);
    my %text;
    my @order;

    for my $e (map { decode($_) } @events) {
        my $ch = $e->{choices}[0];
        push @order, $ch->{index};
        $text{ $ch->{index} } .= $ch->{delta}{content} // '';
        $text{"finish$ch->{index}"} = $ch->{finish_reason}
            if $ch->{finish_reason};
    }

    is("@order", '0 1 0 1 0 1 0 1',
       'n=2 stream: role, 2 tokens, finish, each choice in turn');
    is_deeply(\%text, { 0 => tokens(2), 1 => tokens(2), finish0 => 'stop',
                        finish1 => 'stop' }, 'n=2 stream: each its text');
    is($usage->{usage}{completion_tokens}, 4, 'n=2 stream: usage 2 x 2');
    is($done, '[DONE]', 'n=2 stream: [DONE]');
}

{
    # the provider's limit charges n x the limit: -T 1000 takes one
    # request of 7 + 2 x 400 and not one of 7 + 3 x 400
    my $lm = start_mockllm('-T', 1000);
    my $s = connect_mockllm($lm);
    send_request($s, 'POST', $OAI, {},
                 qq({"model":"m",$msgs,"n":3,"max_tokens":400}));
    is(read_response($s)->{status}, 429, '-T: n=3 x 400 is more than TPM');
    send_request($s, 'POST', $OAI, {},
                 qq({"model":"m",$msgs,"n":2,"max_tokens":400}));
    is(read_response($s)->{status}, 200, '-T: n=2 x 400 is not');
}


###############################################################################
# Tool calls: x-mock-tool-calls N calls of the tools the client runs, call i
# of tool i mod tools (or the one tool_choice names), arguments
# {"PROP":"tok1 ... tokK"}, K the text's tokens, output tokens N x K; a
# stream sends the arguments a token a delta, to be joined.

my $weather = { type => 'object', properties => { city => { type => 'string' },
                                                  days => { type => 'integer' } } };
my %tools = (
    $OAI => [ { type => 'function',
                function => { name => 'get_weather', parameters => $weather } },
              { type => 'function', function => { name => 'get_time' } } ],
    # strict exists; a server tool is the model's own, never the client's
    $ANT => [ { name => 'get_weather', input_schema => $weather, strict => $T },
              { type => 'web_search_20250305', name => 'web_search' },
              { name => 'get_time', input_schema => { type => 'object' } } ],
    $RSP => [ { type => 'function', name => 'get_weather',
                parameters => $weather },
              { type => 'web_search' },
              { type => 'function', name => 'get_time',
                parameters => { type => 'object', properties => {} } } ],
);

my %finish = ($OAI => 'tool_calls', $ANT => 'tool_use', $RSP => 'completed');
my %idre = ($OAI => qr/^call_mock_\d+_/, $ANT => qr/^toolu_mock_\d+_/,
            $RSP => qr/^call_mock_\d+_/);

sub tool_body {
    my ($path, %o) = @_;
    my %b = (model => 'm', tools => $tools{$path}, %o);

    if ($path eq $RSP) {
        $b{input} //= 'hello world';
    } else {
        $b{messages} //= $hello;
        $b{max_tokens} //= 100 if $path eq $ANT;
    }

    $b{stream_options} = { include_usage => $T }
        if $path eq $OAI && $b{stream};

    return \%b;
}

sub post {
    my ($path, $headers, $body) = @_;
    my $s = connect_mockllm($m);
    send_request($s, 'POST', $path, $headers,
                 ref $body ? $JSON->encode($body) : $body);
    my $res = read_response($s);
    close $s;
    return $res;
}

sub events {
    my ($res) = @_;
    my @ev;

    for my $chunk (@{ $res->{chunks} }) {
        my %ev;
        for (split /\n/, $chunk) {
            $ev{$1} = $2 if /^(event|data): (.*)$/;
        }
        $ev{data} = decode($ev{data})
            if defined $ev{data} && $ev{data} ne '[DONE]';
        push @ev, \%ev;
    }

    return @ev;
}

# what a client makes of the answer: { calls => [ { id, name, args (the
# joined text), deltas, item } ], finish, output (tokens), text }
sub calls_of {
    my ($path, $res) = @_;
    my (%r, @calls);

    if ($res->{headers}{'content-type'} eq 'application/json') {
        my $j = decode($res->{body});

        if ($path eq $OAI) {
            my $c = $j->{choices}[0];
            @calls = map { { id => $_->{id}, type => $_->{type},
                             name => $_->{function}{name},
                             args => $_->{function}{arguments} } }
                     @{ $c->{message}{tool_calls} // [] };
            @r{qw(finish output text)} = ($c->{finish_reason},
                $j->{usage}{completion_tokens}, $c->{message}{content});

        } elsif ($path eq $ANT) {
            @calls = map { { id => $_->{id}, name => $_->{name},
                             args => $JSON->encode($_->{input}) } }
                     grep { $_->{type} eq 'tool_use' } @{ $j->{content} };
            @r{qw(finish output)} = ($j->{stop_reason},
                                     $j->{usage}{output_tokens});
            ($r{text}) = map { $_->{text} }
                         grep { $_->{type} eq 'text' } @{ $j->{content} };

        } else {
            @calls = map { { id => $_->{call_id}, item => $_->{id},
                             name => $_->{name}, args => $_->{arguments},
                             status => $_->{status} } }
                     grep { $_->{type} eq 'function_call' } @{ $j->{output} };
            @r{qw(finish output)} = ($j->{status},
                                     $j->{usage}{output_tokens});
            ($r{text}) = map { $_->{content}[0]{text} }
                         grep { $_->{type} eq 'message' } @{ $j->{output} };
        }

        $r{calls} = \@calls;
        return \%r;
    }

    for my $ev (events($res)) {
        my $d = $ev->{data};
        next unless ref $d;

        if ($path eq $OAI) {
            my $c = $d->{choices}[0] or do {
                $r{output} = $d->{usage}{completion_tokens};
                next;
            };
            for my $tc (@{ $c->{delta}{tool_calls} // [] }) {
                my $call = $calls[$tc->{index}] //= { args => '', deltas => 0 };
                $call->{id} = $tc->{id} if defined $tc->{id};
                $call->{type} = $tc->{type} if defined $tc->{type};
                $call->{name} = $tc->{function}{name}
                    if defined $tc->{function}{name};
                my $a = $tc->{function}{arguments};
                if (defined $a && length $a) {
                    $call->{args} .= $a;
                    $call->{deltas}++;
                }
            }
            $r{text} .= $c->{delta}{content} // '';
            $r{finish} = $c->{finish_reason} if $c->{finish_reason};

        } elsif ($path eq $ANT) {
            my $t = $d->{type};
            if ($t eq 'content_block_start'
                && $d->{content_block}{type} eq 'tool_use')
            {
                $calls[$d->{index}] = { id => $d->{content_block}{id},
                                        name => $d->{content_block}{name},
                                        args => '', deltas => 0 };
            } elsif ($t eq 'content_block_delta'
                     && $d->{delta}{type} eq 'input_json_delta')
            {
                $calls[$d->{index}]{args} .= $d->{delta}{partial_json};
                $calls[$d->{index}]{deltas}++;
            } elsif ($t eq 'content_block_delta') {
                $r{text} .= $d->{delta}{text};
            } elsif ($t eq 'content_block_stop') {
                $calls[$d->{index}]{stopped} = 1 if $calls[$d->{index}];
            } elsif ($t eq 'message_delta') {
                $r{finish} = $d->{delta}{stop_reason};
                $r{output} = $d->{usage}{output_tokens};
            }

        } else {
            my $t = $d->{type};
            if ($t eq 'response.output_item.added'
                && $d->{item}{type} eq 'function_call')
            {
                $calls[$d->{output_index}] = { id => $d->{item}{call_id},
                    item => $d->{item}{id}, name => $d->{item}{name},
                    args => '', deltas => 0 };
            } elsif ($t eq 'response.function_call_arguments.delta') {
                my $call = $calls[$d->{output_index}];
                $call->{args} .= $d->{delta};
                $call->{deltas}++;
                $call->{bad_item} = 1 if $d->{item_id} ne $call->{item};
            } elsif ($t eq 'response.function_call_arguments.done') {
                $calls[$d->{output_index}]{done} = $d->{arguments};
            } elsif ($t eq 'response.output_item.done') {
                $calls[$d->{output_index}]{status} = $d->{item}{status};
                $calls[$d->{output_index}]{final} = $d->{item}{arguments};
            } elsif ($t eq 'response.output_text.delta') {
                $r{text} .= $d->{delta};
            } elsif ($t eq 'response.completed') {
                $r{finish} = $d->{response}{status};
                $r{output} = $d->{response}{usage}{output_tokens};
                $r{completed} = [ map { $_->{arguments} }
                                  @{ $d->{response}{output} } ];
            }
        }
    }

    $r{calls} = \@calls;
    return \%r;
}

# what a Chat chunk is: role, openI, argsI, its finish, usage, [DONE]
sub chat_kind {
    my ($d) = @_;
    return $d unless ref $d;
    my $c = $d->{choices}[0] or return 'usage';
    my $tc = $c->{delta}{tool_calls};
    return $c->{finish_reason} if $c->{finish_reason};
    return 'role' if $c->{delta}{role};
    return ($tc->[0]{id} ? 'open' : 'args') . $tc->[0]{index} if $tc;
    return 'other';
}

sub args { $JSON->encode({ $_[0] => join ' ', map { "tok$_" } 1 .. $_[1] }) }

for my $path ($OAI, $ANT, $RSP) {
    for my $stream (0, 1) {
        my $what = "$path " . ($stream ? 'stream' : 'whole');
        my $res = post($path, { 'x-mock-tool-calls' => 3,
                                'x-mock-tokens' => 4 },
                       tool_body($path, stream => $stream ? $T : $F));
        my $got = calls_of($path, $res);
        my @calls = @{ $got->{calls} };

        subtest "tool calls: $what, 3 calls of 2 tools" => sub {
            is($res->{status}, 200, 'status');
            is(scalar @calls, 3, 'three calls');
            is($got->{finish}, $finish{$path}, 'finish');
            is($got->{output}, 12, 'output tokens: 3 x 4');
            ok(!defined $got->{text} || $got->{text} eq '', 'no text');

            my @names = qw(get_weather get_time get_weather);
            my @props = qw(city arg city);

            for my $i (0 .. 2) {
                my $c = $calls[$i] // {};
                like($c->{id} // '', qr/$idre{$path}$i$/, "call $i: id");
                like($c->{id} // '', qr/^[a-zA-Z0-9_-]+$/,
                     "call $i: an id Anthropic takes too");
                is($c->{name}, $names[$i], "call $i: tool i mod tools");
                is_deeply(decode($c->{args}),
                          decode(args($props[$i], 4)),
                          "call $i: arguments, first property");
                is($c->{type}, 'function', "call $i: type") if $path eq $OAI;
                like($c->{item} // '', qr/^fc_mock_\d+_$i$/,
                     "call $i: item id") if $path eq $RSP;
                is($c->{status}, 'completed', "call $i: item completed")
                    if $path eq $RSP;

                next unless $stream;

                is($c->{deltas}, 5, "call $i: a delta a token, and the end");
                ok($c->{stopped}, "call $i: content_block_stop")
                    if $path eq $ANT;

                if ($path eq $RSP) {
                    ok(!$c->{bad_item}, "call $i: deltas name the item");
                    is($c->{done}, $c->{args},
                       "call $i: arguments.done has them joined");
                    is($c->{final}, $c->{args}, "call $i: output_item.done");
                    is($got->{completed}[$i], $c->{args},
                       "call $i: response.completed's output");
                }
            }
        };
    }
}

{
    # what chooses the calls: tool_choice, parallel calls, the last message
    my $tr_oai = [ @$hello,
        { role => 'assistant', content => undef, tool_calls => [
            { id => 'call_a', type => 'function',
              function => { name => 'get_weather', arguments => '{}' } },
            { id => 'call_b', type => 'function',
              function => { name => 'get_time', arguments => '{}' } } ] },
        { role => 'tool', tool_call_id => 'call_b', content => 'noon' },
        { role => 'tool', tool_call_id => 'call_a', content => 'sunny' } ];
    my $tr_ant = [ @$hello,
        { role => 'assistant', content => [
            { type => 'text', text => 'let me see' },
            { type => 'tool_use', id => 'toolu_a', name => 'get_weather',
              input => { city => 'x' } },
            { type => 'tool_use', id => 'call_b', name => 'get_time',
              input => {} } ] },
        { role => 'user', content => [
            { type => 'tool_result', tool_use_id => 'toolu_a',
              content => 'sunny' },
            { type => 'tool_result', tool_use_id => 'call_b',
              content => [ { type => 'text', text => 'noon' } ] } ] } ];
    my $tr_rsp = [
        { role => 'user', content => 'hello world' },
        { type => 'function_call', call_id => 'call_a', name => 'get_weather',
          arguments => '{}' },
        { type => 'function_call_output', call_id => 'call_a',
          output => 'sunny' } ];

    my @choose = (
        # [ path, headers, body members, calls expected, name of each ]
        [ $OAI, 2, { messages => $tr_oai }, 0 ],
        [ $ANT, 2, { messages => $tr_ant }, 0 ],
        [ $RSP, 2, { input => $tr_rsp }, 0 ],
        [ $OAI, 2, { tool_choice => 'none' }, 0 ],
        [ $ANT, 2, { tool_choice => { type => 'none' } }, 0 ],
        [ $RSP, 2, { tool_choice => 'none' }, 0 ],
        [ $OAI, 0, {}, 0 ],
        [ $OAI, undef, { tool_choice => 'auto' }, 0 ],
        [ $OAI, undef, { tool_choice => 'required' }, 1, 'get_weather' ],
        [ $ANT, 0, { tool_choice => { type => 'any' } }, 1, 'get_weather' ],
        [ $RSP, undef, { tool_choice => 'required' }, 1, 'get_weather' ],
        [ $OAI, 3, { tool_choice => { type => 'function',
                                      function => { name => 'get_time' } } },
          3, 'get_time' ],
        [ $ANT, 2, { tool_choice => { type => 'tool', name => 'get_time' } },
          2, 'get_time' ],
        [ $RSP, 2, { tool_choice => { type => 'function',
                                      name => 'get_time' } }, 2, 'get_time' ],
        [ $OAI, 3, { parallel_tool_calls => $F }, 1, 'get_weather' ],
        [ $RSP, 3, { parallel_tool_calls => $F }, 1, 'get_weather' ],
        [ $ANT, 3, { tool_choice => { type => 'auto',
                                      disable_parallel_tool_use => $T } },
          1, 'get_weather' ],
        [ $ANT, 3, { tools => [ $tools{$ANT}[1] ] }, 0 ],
        [ $RSP, 3, { tools => [ $tools{$RSP}[1] ] }, 0 ],
        [ $OAI, 3, { tools => undef }, 0 ],
        [ $OAI, 16, {}, 16, undef ],
    );

    for my $c (@choose) {
        my ($path, $n, $members, $want, $name) = @$c;
        my %h = ('x-mock-tokens' => 2);
        $h{'x-mock-tool-calls'} = $n if defined $n;
        my $res = post($path, \%h, tool_body($path, %$members));
        my $got = calls_of($path, $res);
        my $label = $JSON->encode($members);
        $label = substr($label, 0, 100);

        subtest "tool calls: $path, x-mock-tool-calls "
                . ($n // 'absent') . ", $label" => sub {
            is($res->{status}, 200, 'status');
            is(scalar @{ $got->{calls} }, $want, "$want calls");

            if ($want == 0) {
                is($got->{text}, tokens(2), 'the text answer');
                is($got->{finish}, { $OAI => 'stop', $ANT => 'end_turn',
                                     $RSP => 'completed' }->{$path},
                   'its finish');
                return;
            }

            is($got->{output}, 2 * $want, 'output tokens');
            is($_->{name}, $name, 'the tool') for grep { defined $name }
                                                   @{ $got->{calls} };
        };
    }
}

{
    # each dialect's events in their order, two calls of one token
    my %order = (
        $OAI => [ qw(role open0 args0 args0 open1 args1 args1 tool_calls
                     usage [DONE]) ],
        $ANT => [ qw(message_start content_block_start ping
                     content_block_delta content_block_delta
                     content_block_stop content_block_start
                     content_block_delta content_block_delta
                     content_block_stop message_delta message_stop) ],
        $RSP => [ qw(response.created response.in_progress),
                  (qw(response.output_item.added
                      response.function_call_arguments.delta
                      response.function_call_arguments.delta
                      response.function_call_arguments.done
                      response.output_item.done)) x 2,
                  'response.completed' ],
    );

    for my $path ($OAI, $ANT, $RSP) {
        my $res = post($path, { 'x-mock-tool-calls' => 2,
                                'x-mock-tokens' => 1 },
                       tool_body($path, stream => $T));
        my @ev = map { $_->{event} // chat_kind($_->{data}) } events($res);
        is_deeply(\@ev, $order{$path},
                  "tool calls, $path stream: the events in their order");
    }
}

{
    # the other headers count the tokens of the calls
    my $res = post($OAI, { 'x-mock-tool-calls' => 2, 'x-mock-tokens' => 3,
                           'x-mock-die-after' => 4 },
                   tool_body($OAI, stream => $T));
    my $got = calls_of($OAI, $res);
    ok(!$res->{terminated}, 'tool calls, x-mock-die-after 4: cut');
    is_deeply([ map { $_->{args} } @{ $got->{calls} } ],
              [ '{"city":"tok1 tok2 tok3"}', '{"arg":"tok1' ],
              '... after the first token of the second call');
    ok(!defined $got->{finish}, '... without a finish');

    $res = post($ANT, { 'x-mock-tool-calls' => 2, 'x-mock-tokens' => 3,
                        'x-mock-error-after' => 2 },
                tool_body($ANT, stream => $T));
    my @ev = events($res);
    is($ev[-1]{event}, 'error', 'tool calls, x-mock-error-after: the error');
    is(calls_of($ANT, $res)->{calls}[0]{args}, '{"city":"tok1 tok2',
       '... after two tokens');

    $res = post($RSP, { 'x-mock-tool-calls' => 1, 'x-mock-tokens' => 3,
                        'x-mock-die-after' => 2 }, tool_body($RSP));
    like($res->{body}, qr/"arguments":"\{\\"city\\":\\"tok1 tok2$/,
         'tool calls, whole body: x-mock-die-after cuts the arguments');

    $res = post($ANT, { 'x-mock-tool-calls' => 1, 'x-mock-tokens' => 100 },
                tool_body($ANT, max_tokens => 5));
    $got = calls_of($ANT, $res);
    is_deeply([ $got->{finish}, $got->{output}, $got->{calls}[0]{args} ],
              [ 'tool_use', 5, args('city', 5) ],
              'tool calls: K is the capped text, the arguments whole');

    $res = post($OAI, { 'x-mock-tool-calls' => 1, 'x-mock-tokens' => 0 },
                tool_body($OAI, stream => $T));
    $got = calls_of($OAI, $res);
    is_deeply([ $got->{calls}[0]{args}, $got->{output} ],
              [ '{"city":""}', 0 ], 'tool calls: 0 tokens, empty argument');

    $res = post($OAI, { 'x-mock-tool-calls' => 2, 'x-mock-tokens' => 1,
                        'x-mock-no-usage' => 1,
                        'x-mock-cached-tokens' => 2 }, tool_body($OAI));
    ok(!exists decode($res->{body})->{usage},
       'tool calls: x-mock-no-usage');

    for my $bad (17, 170, -1, 'x') {
        $res = post($OAI, { 'x-mock-tool-calls' => $bad }, tool_body($OAI));
        is($res->{status}, 400, "x-mock-tool-calls $bad: 400");
    }

    $res = post($OAI, { 'x-mock-tool-calls' => 16, 'x-mock-tokens' => 1 },
                tool_body($OAI, tools => [ $tools{$OAI}[1] ]));
    is(scalar @{ calls_of($OAI, $res)->{calls} }, 16,
       'x-mock-tool-calls 16: 16 calls');
}

{
    # each numeric header's bound: one more is refused, not cut to it
    my %bound = ('x-mock-tokens' => 1000000, 'x-mock-reasoning-tokens'
                 => 1000000, 'x-mock-die-after' => 1000000,
                 'x-mock-error-after' => 1000000,
                 'x-mock-prompt-tokens' => 2147483647,
                 'x-mock-cached-tokens' => 2147483647,
                 'x-mock-cache-creation-tokens' => 2147483647,
                 'x-mock-ttfb-ms' => 3600000, 'x-mock-delay-ms' => 3600000,
                 'x-mock-usage-repeat' => 1000,
                 'x-mock-pad-bytes' => 16 * 1024 * 1024,
                 'x-mock-tool-calls' => 16);

    for my $h (sort keys %bound) {
        for my $v ($bound{$h} + 1, $bound{$h} . '0', '9' x 30) {
            my $res = post($OAI, { $h => $v }, tool_body($OAI));
            is($res->{status}, 400, "$h: $v is above its bound: 400");
        }
    }

    my $res = post($OAI, { 'x-mock-prompt-tokens' => 2147483647,
                           'x-mock-usage-repeat' => 1000 },
                   tool_body($OAI, tools => undef));
    is(decode($res->{body})->{usage}{prompt_tokens}, 2147483647,
       'x-mock-prompt-tokens 2147483647: its bound is taken');
}

{
    # a tool conversation as the providers hold it
    my $call = sub { { id => $_[0], type => 'function',
                       function => { name => 'get_time',
                                     arguments => '{}' } } };
    my $asst = sub { { role => 'assistant', content => undef,
                       tool_calls => [ map { $call->($_) } @_ ] } };
    my $tool = sub { { role => 'tool', content => 'x',
                       defined $_[0] ? (tool_call_id => $_[0]) : () } };
    my $use = sub { { role => 'assistant', content => [ map {
        { type => 'tool_use', id => $_, name => 'get_time', input => {} } }
        @_ ] } };
    my $result = sub { { role => 'user', content => [ map {
        { type => 'tool_result', tool_use_id => $_, content => 'x' } }
        @_ ] } };

    my @hist = (
        # [ path, messages or input, status, OpenAI param / Anthropic message ]
        [ $OAI, [ @$hello, $asst->('c1'), $tool->(undef) ], 400,
          'messages[2].tool_call_id', 'missing_required_parameter' ],
        [ $OAI, [ @$hello, $asst->('c1'), $tool->('c2') ], 400,
          'messages.[2].role' ],
        [ $OAI, [ @$hello, $tool->('c1') ], 400, 'messages.[1].role' ],
        [ $OAI, [ @$hello, $asst->('c1'), { role => 'user', content => 'x' },
                  $tool->('c1') ], 400, 'messages.[1].role' ],
        [ $OAI, [ @$hello, $asst->('c1', 'c2'), $tool->('c1') ], 400,
          'messages.[1].role' ],
        [ $OAI, [ @$hello, $asst->('c1', 'c2'), $tool->('c1'),
                  { role => 'user', content => 'x' } ], 400,
          'messages.[1].role' ],
        [ $OAI, [ @$hello, $asst->('c1', 'c2'), $tool->('c2'), $tool->('c1'),
                  { role => 'user', content => 'more' } ], 200 ],
        [ $ANT, [ @$hello, $use->('t1'), $result->('t2') ], 400,
          qr/^messages\.2\.content\.0:\ unexpected\ `tool_use_id`\ found\ in
             \ `tool_result`\ blocks:\ t2\.\ Each\ /x ],
        [ $ANT, [ $result->('t1') ], 400,
          qr/unexpected `tool_use_id` found in `tool_result` blocks: t1/ ],
        [ $ANT, [ @$hello, $use->('t1', 't2'), $result->('t1') ], 400,
          qr/^messages\.1:\ `tool_use`\ ids\ were\ found\ without
             \ `tool_result`\ blocks\ immediately\ after:\ t2\.\ /x ],
        [ $ANT, [ @$hello, $use->('t1'), { role => 'user', content => 'x' } ],
          400, qr/^messages\.1: `tool_use` ids were found without/ ],
        [ $ANT, [ @$hello, $use->('t1', 't2'), $result->('t2', 't1') ], 200 ],
        # a prefill: the last assistant message's calls wait for no answer
        [ $ANT, [ @$hello, $use->('t1') ], 200 ],
        [ $RSP, [ { type => 'function_call_output', call_id => 'c1',
                    output => 'x' } ], 400, 'input' ],
        [ $RSP, [ { type => 'function_call_output', output => 'x' } ], 400,
          'input[0].call_id' ],
        # the calls typed as the providers type them
        [ $OAI, [ @$hello, { role => 'assistant', tool_calls => [
              { id => 'c1', type => 'function', function => {
                  name => 'f', arguments => { q => 1 } } } ] },
                  $tool->('c1') ], 400,
          'messages[1].tool_calls[0].function.arguments', 'invalid_type' ],
        [ $OAI, [ @$hello, { role => 'assistant', tool_calls => [
              { id => 'c1',
                function => { name => 'f', arguments => '{}' } } ] },
                  $tool->('c1') ], 400, 'messages[1].tool_calls[0].type' ],
        [ $OAI, [ @$hello, { role => 'assistant', tool_calls => [
              { type => 'function', function => { name => 'f',
                                                  arguments => '{}' } } ] } ],
          400, 'messages[1].tool_calls[0].id' ],
        [ $ANT, [ @$hello, $use->('call 1'), $result->('call 1') ], 400,
          qr/^messages\.1\.content\.0\.tool_use\.id: String should match/ ],
        [ $ANT, [ @$hello, { role => 'assistant', content => [
              { type => 'tool_use', id => 't1', name => 'f',
                input => '{}' } ] }, $result->('t1') ], 400,
          qr/^messages\.1\.content\.0\.tool_use\.input:
             \ Input\ should\ be\ a\ valid\ dictionary$/x ],
        [ $RSP, [ { type => 'function_call', name => 'f',
                    arguments => '{}' } ], 400, 'input[0].call_id' ],
        [ $RSP, [ { type => 'function_call', call_id => 'c', name => 'f',
                    arguments => {} } ], 400, 'input[0].arguments' ],
    );

    for my $c (@hist) {
        my ($path, $list, $status, $err, $code) = @$c;
        my $body = tool_body($path, $path eq $RSP ? (input => $list)
                                                  : (messages => $list));
        my $res = post($path, {}, $body);
        my $j = decode($res->{body});
        my $label = substr($JSON->encode($list), 0, 110);

        subtest "tool history: $path $label" => sub {
            is($res->{status}, $status, 'status');
            return if $status == 200;

            if ($path eq $ANT) {
                match($j, { type => 'error',
                            error => { type => 'invalid_request_error',
                                       message => $err } }, 'error');
            } else {
                match($j, { error => { type => 'invalid_request_error',
                                       message => qr/./, param => $err,
                                       code => $code } }, 'error');
            }
        };
    }

    # stored context may hold the call that an output answers
    my $res = post($RSP, {}, tool_body($RSP,
        previous_response_id => 'resp_1',
        input => [ { type => 'function_call_output', call_id => 'c1',
                     output => 'x' } ]));
    is($res->{status}, 200, 'function_call_output after previous_response_id');

    # an Anthropic tool the client runs has its input_schema
    $res = post($ANT, {}, tool_body($ANT, tools => [ { name => 'f' } ]));
    is(decode($res->{body})->{error}{message},
       'tools.0.custom.input_schema: Field required',
       'an Anthropic tool without input_schema: 400');
}

{
    # the model families: each provider's models on its own endpoints
    my @fam = (
        [ $OAI, 'mock-claude-sonnet-4', 404 ], [ $RSP, 'claude-3-opus', 404 ],
        [ '/v1/embeddings', 'claude-embed', 404 ],
        [ $ANT, 'gpt-4o', 404 ], [ $ANT, 'text-embedding-3-small', 404 ],
        [ $ANT, 'o3-mini', 404 ], [ $ANT, 'mock-o4-mini', 404 ],
        [ $ANT, 'davinci-002', 404 ],
        [ '/v1/messages/count_tokens', 'mock-gpt-4o', 404 ],
        [ $OAI, 'gpt-4o', 200 ], [ $ANT, 'claude-sonnet-4', 200 ],
        [ $OAI, 'mock-tricks', 200 ], [ $ANT, 'mock-a', 200 ],
        [ $ANT, 'omni', 200 ], [ $ANT, 'mock-open', 200 ],
        [ $RSP, 'm', 200 ], [ '/v1/embeddings', 'mock-a', 200 ],
    );

    for my $c (@fam) {
        my ($path, $model, $status) = @$c;
        my $body = $path eq '/v1/embeddings' ? { model => $model, input => 'x' }
                 : $path eq '/v1/messages/count_tokens'
                     ? { model => $model, messages => $hello }
                 : tool_body($path, model => $model, tools => undef);
        my $res = post($path, {}, $body);
        my $j = decode($res->{body});

        subtest "family: $model on $path: $status" => sub {
            is($res->{status}, $status, 'status');
            like($res->{headers}{'x-mock-read'} // '', qr/^model=\Q$model\E /,
                 'x-mock-read');
            return if $status == 200;

            if ($path =~ m{^/v1/messages}) {
                is_deeply($j, { type => 'error', error => {
                    type => 'not_found_error', message => "model: $model" } },
                    "Anthropic's 404");
            } else {
                is_deeply($j, { error => {
                    message => "The model '$model' does not exist or you do "
                               . "not have access to it.",
                    type => 'invalid_request_error', param => 'model',
                    code => 'model_not_found' } }, "OpenAI's 404");
            }
        };
    }

    my $res = post($OAI, {}, qq({"model":"claude \\"q\\" \\u00e9",$msgs}));
    is(decode($res->{body})->{error}{message},
       qq(The model 'claude "q" \xc3\xa9' does not exist or you do not have )
       . 'access to it.', 'family: the name escaped in the message');

    $res = post($OAI, {}, qq({"model":"claude-) . ('x' x 300) . qq(",$msgs}));
    like(decode($res->{body})->{error}{message},
         qr/^The model 'claude-x{121}' does not exist/,
         'family: a long name cut at 128 bytes');

    $res = post($OAI, { 'x-mock-status' => 429 },
                qq({"model":"claude-x",$msgs}));
    is($res->{status}, 429, 'family: x-mock-status comes first');
}


###############################################################################
# -d MS: the default delay of each streamed token; x-mock-delay-ms wins.

{
    my $dm = start_mockllm('-d', 300);
    my $body = qq({"model":"m",$msgs,"stream":true});

    my $slow = connect_mockllm($dm);
    my $t0 = time;
    send_request($slow, 'POST', $OAI, { 'x-mock-tokens' => 3 }, $body);

    my $fast = connect_mockllm($dm);
    send_request($fast, 'POST', $OAI,
                 { 'x-mock-tokens' => 3, 'x-mock-delay-ms' => 0 }, $body);
    my $res = read_response($fast);

    # the paced stream has not sent its last token yet
    my $early = '';
    $early .= $_ while IO::Select->new($slow)->can_read(0)
                       && sysread($slow, $_, 65536);
    my $res_slow = read_response($slow, $early);

    ok($res->{terminated}, '-d 300, x-mock-delay-ms 0: a stream at once');
    unlike($early, qr/tok3 /, '... while the paced one has not sent tok3');
    ok($res_slow->{terminated}, '-d 300: the paced stream ends');
    cmp_ok(time - $t0, '>=', 0.9, '-d 300: 3 tokens take 0.9 s at least');

    for my $bad ('x', '-1', '3600001', '') {
        my $rc = system("$MOCKLLM -l 127.0.0.1:1 -d '$bad' 2>/dev/null");
        is($rc >> 8, 2, "-d '$bad' is refused");
    }
}

{
    kill 'TERM', $pid;
    my $deadline = time + 3;
    my $gone = 0;

    while (time < $deadline) {
        if (waitpid($pid, WNOHANG) == $pid) {
            $gone = 1;
            last;
        }

        sleep 0.02;
    }

    ok($gone, 'SIGTERM stops mockllm');
    is($? >> 8, 0, '... with status 0') if $gone;
    kill 'KILL', $pid unless $gone;

    open(my $fh, '<', $errlog) or die "$errlog: $!";
    my $err = do { local $/; <$fh> };
    is($err, '', 'nothing on stderr');
}

done_testing();


###############################################################################

sub run_case {
    my ($c) = @_;
    my $name = $c->{name};

    my $s = connect_mockllm($m);
    my %h = %{ $c->{headers} // {} };
    my $body = exists $c->{raw_body} ? $c->{raw_body}
             : $c->{body} ? $JSON->encode($c->{body}) : undef;

    if ($c->{chunked}) {
        $h{'Transfer-Encoding'} = 'chunked';
        my $raw = '';
        while (length $body) {
            my $piece = substr($body, 0, 7, '');
            $raw .= sprintf("%x;ext=1\r\n%s\r\n", length $piece, $piece);
        }
        $body = $raw . "0\r\nX-Trailer: yes\r\n\r\n";
    }

    send_request($s, $c->{method} // 'POST', $c->{path}, \%h, $body);
    my $res = read_response($s);

    subtest $name => sub {
        is($res->{status}, $c->{status}, 'status');

        while (my ($k, $v) = each %{ $c->{resp_headers} // {} }) {
            match($res->{headers}{$k}, $v, "header $k");
        }

        if ($c->{json}) {
            is($res->{headers}{'content-type'}, 'application/json',
               'content type');
            match(decode($res->{body}), $c->{json}, 'json');
        }

        if ($c->{body_like}) {
            like($res->{body}, $c->{body_like}, 'body');
        }

        if (exists $c->{truncated}) {
            cmp_ok(length $res->{body}, '<', $res->{headers}{'content-length'},
                   'body shorter than Content-Length');
        }

        if ($c->{sse}) {
            check_sse($res, $c);
        }

        if (exists $c->{closed}) {
            is(closed($s, 1) ? 1 : 0, $c->{closed}, 'connection closed');
        }
    };

    close $s;
}


sub check_sse {
    my ($res, $c) = @_;
    my $h = $res->{headers};

    is($h->{'content-type'}, 'text/event-stream', 'content type');
    is($h->{'cache-control'}, 'no-cache', 'cache-control');
    is($h->{'transfer-encoding'}, 'chunked', 'chunked');
    is($res->{terminated} ? 1 : 0, $c->{terminated} // 1,
       'terminating chunk');

    my @chunks = @{ $res->{chunks} };
    my @want = @{ $c->{sse} };

    is(scalar @chunks, scalar @want, 'one chunk per event')
        or diag(explain \@chunks);

    for my $i (0 .. $#want) {
        my ($chunk, $w) = ($chunks[$i] // '', $want[$i]);
        my %ev;

        like($chunk, qr/\n\n\z/, "event $i ends with an empty line");

        for my $line (split /\n/, $chunk) {
            my ($k, $v) = $line =~ /^(event|data): (.*)$/ or next;
            $ev{$k} = $v;
        }

        is($ev{event}, $w->{event}, "event $i type") if exists $w->{event};

        if ($w->{malformed}) {
            ok(defined $ev{data}
               && !defined eval { JSON::PP->new->decode($ev{data}) },
               "event $i data is not JSON");

        } elsif (!ref $w->{data}) {
            is($ev{data}, $w->{data}, "event $i data");

        } else {
            match(decode($ev{data}), $w->{data}, "event $i data");
        }
    }
}


# whether the mock closed the connection within $wait s
sub closed {
    my ($s, $wait) = @_;
    my $buf = '';

    return 0 unless IO::Select->new($s)->can_read($wait);

    my $n = sysread($s, $buf, 65536);
    return !$n;
}
