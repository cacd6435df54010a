#!/usr/bin/perl

# Two independent readings of the same bodies: the gateway's (what it
# reserves for: the model, the output limit, n, stream and the prompt's
# parts, in X-Gw-Read from its variables) and the upstream's (mockllm reads
# as the providers do, after the dialect spec, and says what in
# x-mock-read).  A corpus of tricky bodies across the three dialects is
# generated from ingredients: both limit names, nulls, limits as 8.0, 8e0,
# "8", -1, 0, 1e20, 2.5, n of 0 1 2 5 129 "2" 2.0, escaped member names,
# stream as true, 1, "true", null, members of the other dialects, images by
# URL and base64, files, audio, tools, tool calls and results, references,
# system as a string and as blocks, strings near the gateway's limits,
# unicode, and honest bodies.
#
# First each body goes to mockllm directly: where the corpus knows the
# reading, x-mock-read must say it (or the provider's 400 must come); a
# 2xx answer must obey its own reading (n choices of min(20, limit) tokens,
# a stream when stream=1); a 400 is in the provider's format.  Then each
# goes through the gateway: what it admits and the upstream answers 2xx
# must have been read alike; what the upstream refuses after the gateway
# admitted it is reported, and fails when the readings differ in what
# costs (the limit, n, stream, the parts).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use JSON::PP;
use LLMGW;
use Test::More;

my $s = stack();

my %PATH = (openai => '/v1/chat/completions', anthropic => '/v1/messages',
            responses => '/v1/responses');
my %MODEL = (openai => 'gpt-4o', anthropic => 'claude-sonnet-4-5',
             responses => 'gpt-4o');

# the tier's default limit, which the gateway writes into a body without
my $DEFAULT = 300;

# what mockllm is asked to answer: min(this, the limit) tokens a choice
my $TOKENS = 20;

my $HI = '[{"role":"user","content":"hi"}]';


###############################################################################
# The corpus.  Each body is raw JSON text, built member by member, so that
# escapes, number forms and repeated names stay as written.  want, where
# the corpus knows it: the status mockllm answers directly, and for a 2xx
# or a refusal of a known reading, its x-mock-read.

my @corpus;

sub obj { '{' . join(',', map { "\"$_->[0]\":$_->[1]" } @_) . '}' }

# the honest members of each dialect, which a case adds to or replaces
sub base {
    my ($api) = @_;
    return ([ model => "\"$MODEL{$api}\"" ], [ messages => $HI ])
        if $api eq 'openai';
    return ([ model => "\"$MODEL{$api}\"" ], [ max_tokens => 100 ],
            [ messages => $HI ])
        if $api eq 'anthropic';
    return ([ model => "\"$MODEL{$api}\"" ], [ input => '"hi"' ]);
}

# base() with members replaced (undef value: removed) or added, in order
sub with {
    my ($api, @set) = @_;
    my @m = base($api);

    while (my ($k, $v) = splice(@set, 0, 2)) {
        my @same = grep { $m[$_][0] eq $k } 0 .. $#m;
        if (@same) {
            $m[$same[0]][1] = $v;
        } else {
            push @m, [ $k, $v ];
        }
    }

    return obj(grep { defined $_->[1] } @m);
}

# the x-mock-read of a body of the dialect, from base() on
sub rd {
    my ($api, %o) = @_;
    my %r = (model => $MODEL{$api},
             max => $api eq 'anthropic' ? 100 : 64,
             n => 1, stream => 0, m => 1, i => 0, f => 0, a => 0, t => 0,
             r => 0, %o);
    return join ' ', "model=$r{model}",
           map { "$_=$r{$_}" } qw(max n stream m i f a t r);
}

sub add {
    my ($api, $name, $body, $status, $read) = @_;
    push @corpus, { api => $api, name => "$api: $name", body => $body,
                    status => $status, read => $read };
}

# an integer the providers take as a limit: its value, or undef
sub limit_of {
    my ($v) = @_;
    return undef unless $v =~ /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;
    return undef unless $v == int($v) && $v >= 1 && $v <= 2147483647;
    return int($v);
}

my @limits = qw(8 8.0 8e0 "8" -1 0 1e20 2.5 null 9000 1 80e-1 [8] true);

# --- the output limit, under each of its names, escaped or not --------------

for my $name ('max_tokens', 'max_completion_tokens', 'max\\u005ftokens',
              'max_completion\\u005ftokens')
{
    for my $v (@limits) {
        my $l = limit_of($v);
        add('openai', "$name $v", with('openai', $name => $v),
            $v eq 'null' || $l ? 200 : 400,
            rd('openai', max => $v eq 'null' ? 64 : $l // '?'));
    }
}

for my $name ('max_tokens', 'max\\u005ftokens') {
    for my $v (@limits) {
        my $l = limit_of($v);
        add('anthropic', "$name $v",
            obj([ model => "\"$MODEL{anthropic}\"" ], [ $name => $v ],
                [ messages => $HI ]),
            $l ? 200 : 400, rd('anthropic', max => $l // '?'));
    }
}

for my $name ('max_output_tokens', 'max_output\\u005ftokens') {
    for my $v (@limits) {
        my $l = limit_of($v);
        add('responses', "$name $v", with('responses', $name => $v),
            $v eq 'null' || $l ? 200 : 400,
            rd('responses', max => $v eq 'null' ? 64 : $l // '?'));
    }
}

# --- both names, the older one, repeated names --------------------------------

for my $mct (qw(1 9000 null "8")) {
    for my $mt (qw(1 9000 null "8")) {
        my ($a, $b) = (limit_of($mct), limit_of($mt));
        my ($status, $max);

        if ($mct ne 'null' && $mt ne 'null') {
            ($status, $max) = (400, '?');
        } elsif ($mct ne 'null') {
            ($status, $max) = $a ? (200, $a) : (400, '?');
        } elsif ($mt ne 'null') {
            ($status, $max) = $b ? (200, $b) : (400, '?');
        } else {
            ($status, $max) = (200, 64);
        }

        add('openai', "max_completion_tokens $mct, max_tokens $mt",
            with('openai', max_completion_tokens => $mct, max_tokens => $mt),
            $status, rd('openai', max => $max));
    }
}

add('openai', 'both names, one escaped',
    with('openai', max_completion_tokens => 1, 'max\\u005ftokens' => 9000),
    400, rd('openai', max => '?'));
add('openai', 'max_tokens twice',
    obj(base('openai'), [ max_tokens => 5 ], [ max_tokens => 9000 ]),
    200, rd('openai', max => 9000));
add('openai', 'max_tokens, then the escaped name',
    obj(base('openai'), [ max_tokens => 9000 ], [ 'max\\u005ftokens' => 5 ]),
    200, rd('openai', max => 5));
add('anthropic', 'max_tokens twice, the last null',
    obj(base('anthropic'), [ max_tokens => 'null' ]),
    400, rd('anthropic', max => '?'));
add('anthropic', 'max_completion_tokens 1, max_tokens 9000',
    with('anthropic', max_completion_tokens => 1, max_tokens => 9000),
    400, rd('anthropic', max => 9000));
add('responses', 'max_tokens 9000, max_output_tokens 1',
    with('responses', max_tokens => 9000, max_output_tokens => 1),
    400, rd('responses', max => 1));
add('anthropic', 'no max_tokens', with('anthropic', max_tokens => undef),
    400, rd('anthropic', max => '?'));
add('openai', 'a name with U+0000',
    with('openai', 'max_tokens\\u0000x' => 9000), 400, rd('openai'));

# --- n -------------------------------------------------------------------------

for my $n (qw(0 1 2 5 129 "2" 2.0 null 128 -1 2.5)) {
    my $k = limit_of($n);
    $k = undef if defined $k && $k > 128;
    add('openai', "n $n", with('openai', n => $n, max_tokens => 8),
        $n eq 'null' || $k ? 200 : 400,
        rd('openai', max => 8, n => $n eq 'null' ? 1 : $k // '?'));
}

for my $n (qw(2 5)) {
    add('openai', "n $n, a stream",
        with('openai', n => $n, max_tokens => 3, stream => 'true'),
        200, rd('openai', max => 3, n => $n, stream => 1));
}

for my $api (qw(anthropic responses)) {
    for my $n (qw(1 2 null)) {
        add($api, "n $n", with($api, n => $n),
            $n eq 'null' ? 200 : 400, rd($api));
    }
}

# --- stream --------------------------------------------------------------------

for my $api (qw(openai anthropic responses)) {
    for my $v (qw(true 1 "true" null false)) {
        my $ok = $v eq 'true' || $v eq 'false' || $v eq 'null';
        add($api, "stream $v", with($api, stream => $v), $ok ? 200 : 400,
            rd($api, stream => $ok ? ($v eq 'true' ? 1 : 0) : '?'));
    }
}

add('openai', 'stream with include_usage',
    with('openai', stream => 'true',
         stream_options => '{"include_usage":true}'),
    200, rd('openai', stream => 1));

# --- the other dialects' members ------------------------------------------------

my %foreign = (
    openai => [ [ max_output_tokens => 9000 ], [ max_tokens_to_sample => 9000 ],
                [ system => '"be brief"' ], [ stop_sequences => '["x"]' ],
                [ top_k => 5 ],
                [ thinking => '{"type":"enabled","budget_tokens":2000}' ],
                [ input => '"hi"' ], [ instructions => '"be brief"' ],
                [ previous_response_id => '"resp_1"' ],
                [ '\\u0073ystem' => '"be brief"' ] ],
    anthropic => [ [ n => 2 ], [ max_completion_tokens => 9000 ],
                   [ max_output_tokens => 9000 ],
                   [ max_tokens_to_sample => 9000 ],
                   [ stream_options => '{"include_usage":true}' ],
                   [ input => '"hi"' ], [ instructions => '"x"' ],
                   [ previous_response_id => '"resp_1"' ],
                   [ functions => '[{"name":"f"}]' ] ],
    responses => [ [ max_tokens => 9000 ], [ max_completion_tokens => 9000 ],
                   [ max_tokens_to_sample => 9000 ], [ n => 2 ],
                   [ messages => $HI ], [ system => '"be brief"' ],
                   [ stop_sequences => '["x"]' ], [ top_k => 5 ],
                   [ functions => '[{"name":"f"}]' ] ],
);

for my $api (sort keys %foreign) {
    for my $f (@{ $foreign{$api} }) {
        my ($k, $v) = @$f;
        add($api, "foreign $k", with($api, $k => $v), 400, rd($api));
    }

    for my $f (@{ $foreign{$api} }[0, 1]) {
        add($api, "foreign $f->[0] null", with($api, $f->[0] => 'null'),
            200, rd($api));
    }
}

# --- models ----------------------------------------------------------------------

for my $api (qw(openai anthropic responses)) {
    add($api, 'model with a space', with($api, model => '"mock 4o"'), 200,
        rd($api, model => 'mock%204o'));
    add($api, 'model with \\u0001', with($api, model => '"gpt\\u00014o"'),
        400, rd($api, model => 'gpt%014o'));
    add($api, 'model unicode', with($api, model => "\"mod\xc3\xa8le\""), 200,
        rd($api, model => 'mod%C3%A8le'));
    add($api, 'model escaped', with($api, model => '"mock\\u002d4o"'), 200,
        rd($api, model => 'mock-4o'));
    add($api, 'model empty', with($api, model => '""'), 400,
        rd($api, model => ''));
}

# --- the prompt's parts -------------------------------------------------------------

my $IMG_URL = '{"type":"image_url","image_url":{"url":"https://x/a.png"}}';
my $IMG_B64 = '{"type":"image_url","image_url":{"url":"data:image/png;'
              . 'base64,iVBORw0KGgo="}}';
my $AUDIO = '{"type":"input_audio","input_audio":{"data":"UklGRg==",'
            . '"format":"wav"}}';
my $FILE = '{"type":"file","file":{"file_id":"file-1"}}';
my $TOOL = '{"type":"function","function":{"name":"f","parameters":{}}}';

sub chat_parts { '[{"role":"user","content":[{"type":"text","text":"a"},'
                 . join(',', @_) . ']}]' }

add('openai', 'image by URL', with('openai', messages => chat_parts($IMG_URL)),
    200, rd('openai', i => 1));
add('openai', 'image by base64',
    with('openai', messages => chat_parts($IMG_B64, $IMG_URL)),
    200, rd('openai', i => 2));
add('openai', 'audio', with('openai', messages => chat_parts($AUDIO)), 200,
    rd('openai', a => 1));
add('openai', 'file', with('openai', messages => chat_parts($FILE)), 200,
    rd('openai', f => 1));
add('openai', 'all parts',
    with('openai', messages => chat_parts($IMG_URL, $AUDIO, $FILE, $IMG_B64,
                                          $FILE)),
    200, rd('openai', i => 2, a => 1, f => 2));
add('openai', 'tools and functions',
    with('openai', tools => "[$TOOL,$TOOL]", functions => '[{"name":"g"}]'),
    200, rd('openai', t => 3));
add('openai', 'tool calls and results',
    with('openai', messages => '[{"role":"user","content":"hi"},'
         . '{"role":"assistant","content":null,"tool_calls":[{"id":"c1",'
         . '"type":"function","function":{"name":"f","arguments":'
         . '"{\\"q\\":\\"' . ('x' x 500) . '\\"}"}}]},'
         . '{"role":"tool","tool_call_id":"c1","content":"result"}]',
         tools => "[$TOOL]"),
    200, rd('openai', m => 3, t => 1));
add('openai', 'system message, unicode',
    with('openai', messages => '[{"role":"system","content":"\\u00e9t\\u00e9"},'
         . "{\"role\":\"user\",\"content\":\"\xe6\x97\xa5\xe6\x9c\xac "
         . "\xf0\x9f\x98\x80\"}]"),
    200, rd('openai', m => 2));
add('openai', 'an unknown part', with('openai',
    messages => chat_parts('{"type":"video","video":{}}')), 400, rd('openai'));
add('openai', 'a part without a type', with('openai',
    messages => chat_parts('{"image_url":{"url":"x"}}')), 400, rd('openai'));
add('openai', 'content an object', with('openai',
    messages => '[{"role":"user","content":{"type":"text"}}]'), 400,
    rd('openai'));
add('openai', 'no messages', with('openai', messages => undef), 400,
    rd('openai', m => 0));
add('openai', 'tools an object', with('openai', tools => '{}'), 400,
    rd('openai'));

my $A_IMG_URL = '{"type":"image","source":{"type":"url","url":"https://x/a.png"}}';
my $A_IMG_B64 = '{"type":"image","source":{"type":"base64","media_type":'
                . '"image/png","data":"iVBORw0KGgo="}}';
my $A_DOC = '{"type":"document","source":{"type":"text","media_type":'
            . '"text/plain","data":"doc"}}';

sub ant_parts { '[{"role":"user","content":[{"type":"text","text":"a"},'
                . join(',', @_) . ']}]' }

add('anthropic', 'system string', with('anthropic', system => '"be brief"'),
    200, rd('anthropic'));
add('anthropic', 'system blocks', with('anthropic',
    system => '[{"type":"text","text":"a"},{"type":"text","text":"b"}]'),
    200, rd('anthropic'));
add('anthropic', 'system with an image', with('anthropic',
    system => "[$A_IMG_URL]"), 400, rd('anthropic'));
add('anthropic', 'images', with('anthropic',
    messages => ant_parts($A_IMG_URL, $A_IMG_B64)), 200,
    rd('anthropic', i => 2));
add('anthropic', 'document', with('anthropic', messages => ant_parts($A_DOC)),
    200, rd('anthropic', f => 1));
add('anthropic', 'tool use and result with an image', with('anthropic',
    messages => '[{"role":"user","content":"hi"},{"role":"assistant",'
    . '"content":[{"type":"tool_use","id":"t1","name":"f","input":'
    . '{"q":"' . ('y' x 300) . '"}}]},{"role":"user","content":'
    . '[{"type":"tool_result","tool_use_id":"t1","content":'
    . "[{\"type\":\"text\",\"text\":\"r\"},$A_IMG_B64,$A_DOC]}]}]",
    tools => '[{"name":"f","input_schema":{"type":"object"}},'
    . '{"type":"web_search_20250305","name":"web_search"}]'),
    200, rd('anthropic', m => 3, i => 1, f => 1, t => 2));
add('anthropic', 'tool result as a string', with('anthropic',
    messages => '[{"role":"user","content":"hi"},{"role":"assistant",'
    . '"content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},'
    . '{"role":"user","content":[{"type":"tool_result",'
    . '"tool_use_id":"t1","content":"ok"}]}]'), 200,
    rd('anthropic', m => 3));
add('anthropic', 'mcp servers and a container', with('anthropic',
    mcp_servers => '[{"type":"url","url":"https://a","name":"a"},'
    . '{"type":"url","url":"https://b","name":"b"}]',
    container => '"container_1"'), 200, rd('anthropic', r => 3));
add('anthropic', 'thinking below max_tokens', with('anthropic',
    max_tokens => 3000,
    thinking => '{"type":"enabled","budget_tokens":2000}'), 200,
    rd('anthropic', max => 3000));
add('anthropic', 'thinking at max_tokens', with('anthropic',
    max_tokens => 2000,
    thinking => '{"type":"enabled","budget_tokens":2000}'), 400,
    rd('anthropic', max => 2000));
add('anthropic', 'thinking above max_tokens', with('anthropic',
    thinking => '{"type":"enabled","budget_tokens":1024}'), 400,
    rd('anthropic'));
add('anthropic', 'an unknown block', with('anthropic',
    messages => ant_parts('{"type":"video"}')), 400, rd('anthropic'));
add('anthropic', 'unicode', with('anthropic',
    messages => "[{\"role\":\"user\",\"content\":\"\xd0\xbf\xd1\x80\xd0\xb8"
    . "\xd0\xb2\xd0\xb5\xd1\x82 \\ud83d\\ude00\"}]"), 200, rd('anthropic'));

add('responses', 'input items with parts', with('responses',
    input => '[{"role":"user","content":[{"type":"input_text","text":"a"},'
    . '{"type":"input_image","image_url":"https://x/a.png"},'
    . '{"type":"input_image","image_url":"data:image/png;base64,iVBO"},'
    . '{"type":"input_file","file_id":"file-1"},'
    . '{"type":"input_audio","input_audio":{"data":"UklG","format":"wav"}}]},'
    . '{"type":"message","role":"assistant","content":[{"type":"output_text",'
    . '"text":"b"}]}]'),
    200, rd('responses', m => 2, i => 2, f => 1, a => 1));
add('responses', 'function call and output', with('responses',
    input => '[{"role":"user","content":"hi"},{"type":"function_call",'
    . '"call_id":"c1","name":"f","arguments":"{\\"q\\":1}"},'
    . '{"type":"function_call_output","call_id":"c1","output":"ok"},'
    . '{"type":"function_call","call_id":"c2","name":"f",'
    . '"arguments":"{}"},'
    . '{"type":"function_call_output","call_id":"c2","output":'
    . '[{"type":"input_image","image_url":"https://x/b.png"}]}]',
    tools => '[{"type":"function","name":"f","parameters":{}},'
    . '{"type":"web_search"}]'),
    200, rd('responses', m => 5, i => 1, t => 2));
add('responses', 'references', with('responses',
    input => '[{"type":"item_reference","id":"msg_1"},{"type":"reasoning",'
    . '"id":"rs_1","encrypted_content":"' . ('z' x 200) . '"}]',
    previous_response_id => '"resp_1"', conversation => '"conv_1"',
    prompt => '{"id":"pmpt_1"}'),
    200, rd('responses', m => 2, r => 4));
for my $ref ([ previous_response_id => '"resp_1"' ],
             [ conversation => '"conv_1"' ], [ prompt => '{"id":"pmpt_1"}' ])
{
    add('responses', "no input, $ref->[0]",
        with('responses', input => undef, @$ref), 200,
        rd('responses', m => 0, r => 1));
}
add('responses', 'no input, no reference', with('responses', input => undef),
    400, rd('responses', m => 0));
add('responses', 'input null', with('responses', input => 'null'), 400,
    rd('responses', m => 0));
add('responses', 'in the background', with('responses',
    background => 'true'), 200, rd('responses'));
add('responses', 'instructions', with('responses',
    instructions => '"be brief"'), 200, rd('responses'));
add('responses', 'an unknown item', with('responses',
    input => '[{"type":"computer_call","id":"x"}]'), 400, rd('responses'));
add('responses', 'an unknown part', with('responses',
    input => '[{"role":"user","content":[{"type":"text","text":"a"}]}]'),
    400, rd('responses'));

# --- honest bodies, escaped names in the parts ----------------------------------------

add('openai', 'honest', with('openai', max_completion_tokens => 50,
    messages => '[{"role":"system","content":"You are terse."},'
    . '{"role":"user","content":"Name three rivers."}]', temperature => 0.2),
    200, rd('openai', max => 50, m => 2));
add('openai', 'honest stream', with('openai', max_tokens => 10,
    stream => 'true', stream_options => '{"include_usage":true}'),
    200, rd('openai', max => 10, stream => 1));
add('anthropic', 'honest', with('anthropic', max_tokens => 1024,
    system => '"You are terse."', temperature => 0.2,
    messages => '[{"role":"user","content":"Name three rivers."},'
    . '{"role":"assistant","content":"Nile,"}]'),
    200, rd('anthropic', max => 1024, m => 2));
add('anthropic', 'honest stream', with('anthropic', stream => 'true'),
    200, rd('anthropic', stream => 1));
add('responses', 'honest', with('responses', max_output_tokens => 64,
    instructions => '"You are terse."', input => '"Name three rivers."'),
    200, rd('responses'));
add('responses', 'honest stream', with('responses', stream => 'true',
    store => 'false'), 200, rd('responses', stream => 1));

add('openai', 'an image part, its type escaped', with('openai',
    messages => chat_parts('{"typ\\u0065":"image_\\u0075rl",'
                           . '"image_url":{"url":"https://x/a.png"}}')),
    200, rd('openai', i => 1));
add('anthropic', 'an image block, its type escaped', with('anthropic',
    messages => ant_parts('{"\\u0074ype":"\\u0069mage","source":{}}')),
    200, rd('anthropic', i => 1));
add('responses', 'an image part, its type escaped', with('responses',
    input => '[{"role":"user","content":[{"type":"input\\u005fimage",'
    . '"image_url":"u"}]}]'), 200, rd('responses', i => 1));
add('openai', 'a part with its type twice', with('openai',
    messages => chat_parts('{"type":"text","type":"image_url",'
                           . '"image_url":{"url":"u"}}')),
    200, rd('openai', i => 1));

# --- nesting near the gateway's limit (64 deep, the body included) ------------------

for my $d (62, 63, 64, 65, 200) {
    add('openai', "nested $d deep", with('openai',
        metadata => ('[' x ($d - 1)) . (']' x ($d - 1))), 200, rd('openai'));
}

# --- sizes near the gateway's limits (1m a body) ------------------------------------

for my $api (qw(openai anthropic responses)) {
    my $n = 1024 * 1024 - 600;
    my $msg = '[{"role":"user","content":"' . ('w ' x ($n / 2)) . '"}]';

    add($api, 'a body just under 1m', $api eq 'responses'
        ? with($api, input => $msg) : with($api, messages => $msg),
        200, rd($api));

    $msg = '[{"role":"user","content":"' . ('w ' x (1024 * 1024 / 2)) . '"}]';
    add($api, 'a body just over 1m', $api eq 'responses'
        ? with($api, input => $msg) : with($api, messages => $msg),
        200, rd($api));
}

# --- combinations, at random but the same each run ----------------------------------

srand(81);

sub pick { $_[ int(rand(@_)) ] }

for my $k (1 .. 60) {
    my $api = pick(qw(openai anthropic responses));
    my @set;

    my $name = pick($api eq 'openai'
                    ? ('max_tokens', 'max_completion_tokens',
                       'max\\u005ftokens')
                    : $api eq 'anthropic' ? ('max_tokens', 'max\\u005ftokens')
                    : ('max_output_tokens', 'max_output\\u005ftokens'));
    push @set, $name => pick(@limits) if rand() < 0.8;
    push @set, max_completion_tokens => pick(qw(1 50 null))
        if $api eq 'openai' && rand() < 0.3;
    push @set, n => pick(qw(1 2 3 "2" 2.0 null))
        if $api eq 'openai' ? rand() < 0.5 : rand() < 0.1;
    push @set, stream => pick(qw(true false null 1))
        if rand() < 0.5;

    if ($api eq 'openai') {
        push @set, messages => chat_parts(map { pick($IMG_URL, $IMG_B64,
                                                     $AUDIO, $FILE) }
                                          1 .. int(rand(4)));
        push @set, tools => '[' . join(',', ($TOOL) x int(rand(3))) . ']'
            if rand() < 0.4;
    } elsif ($api eq 'anthropic') {
        push @set, messages => ant_parts(map { pick($A_IMG_URL, $A_IMG_B64,
                                                    $A_DOC) }
                                         1 .. int(rand(4)));
        push @set, system => pick('"s"', '[{"type":"text","text":"s"}]')
            if rand() < 0.5;
        push @set, mcp_servers => '[{"type":"url","url":"u","name":"n"}]'
            if rand() < 0.2;
    } else {
        push @set, input => pick('"hi"', '[{"role":"user","content":'
                                 . '[{"type":"input_image","image_url":"u"},'
                                 . '{"type":"input_text","text":"t"}]}]',
                                 '[{"type":"item_reference","id":"i"}]');
        push @set, previous_response_id => '"resp_1"' if rand() < 0.3;
    }

    my @others = map { @{ $foreign{$_} } } grep { $_ ne $api } sort keys %foreign;
    push @set, @{ pick(@others) } if rand() < 0.2;

    add($api, "random $k", with($api, @set));
}

diag(scalar(@corpus) . ' bodies: ' . join(', ', map {
    my $api = $_;
    "$api " . grep { $_->{api} eq $api } @corpus } sort keys %PATH));
cmp_ok(scalar(@corpus), '>=', 200, 'at least 200 bodies');


###############################################################################
# mockllm directly.

my %n = (bodies => scalar(@corpus));

for my $c (@corpus) {
    my $r = raw_post("http://127.0.0.1:$s->{LLMGW_MOCK_PORT}$PATH{ $c->{api} }",
                     $c->{body}, { 'x-mock-tokens' => $TOKENS });
    my $read = $r->{headers}{'x-mock-read'};
    my $ok = 1;

    $c->{direct} = $r;

    if (defined $c->{status}) {
        $ok &&= is($r->{status}, $c->{status}, "direct, $c->{name}: status");
        $ok &&= is($read, $c->{read}, "direct, $c->{name}: x-mock-read")
            if defined $c->{read};
    }

    if ($r->{status} == 200) {
        $n{mock_ok}++;
        $ok &&= obeys($c, $r);
    } else {
        $n{mock_refused}++;
        $ok &&= provider_error($c, $r);
    }
}

diag("directly: $n{mock_ok} answered, $n{mock_refused} refused");


###############################################################################
# Through the gateway.

my $t = new_tenant(tier => 'diff');

my $ng = nginx(http => <<EOF);
    %%GATEWAY%%
    llm_gateway_tier  diff  unpriced=allow tpm=100000000 max_tokens=1000000
                            default_max_tokens=$DEFAULT;

    %%UPSTREAM%%

    server {
        listen  127.0.0.1:%%PORT%%;

        client_max_body_size     8m;
        client_body_buffer_size  2m;

        # x-mock-read echoes the model
        proxy_buffer_size   64k;
        proxy_buffers       8 64k;

        proxy_http_version  1.1;
        proxy_set_header    Connection "";

        location = /v1/chat/completions {
            llm_gateway  zone=llm api=openai;
            add_header   X-Gw-Read "model=\$llm_model max=\$llm_max_tokens n=\$llm_n stream=\$llm_stream \$llm_parts" always;
            proxy_pass   http://mock;
        }

        location = /v1/messages {
            llm_gateway  zone=llm api=anthropic;
            add_header   X-Gw-Read "model=\$llm_model max=\$llm_max_tokens n=\$llm_n stream=\$llm_stream \$llm_parts" always;
            proxy_pass   http://mock;
        }

        location = /v1/responses {
            llm_gateway  zone=llm api=responses;
            add_header   X-Gw-Read "model=\$llm_model max=\$llm_max_tokens n=\$llm_n stream=\$llm_stream \$llm_parts" always;
            proxy_pass   http://mock;
        }
    }
EOF

my ($rc, $out) = $ng->test();

SKIP: {
    skip("the gateway has no \$llm_max_tokens, \$llm_n, \$llm_stream, "
         . "\$llm_parts yet: $out", 1) if $rc;

    $ng->run();

    my (@agree_refused, @differ);

    for my $c (@corpus) {
        my $r = raw_post($ng->url($PATH{ $c->{api} }), $c->{body},
                         { authorization => "Bearer $t->{key}",
                           'x-mock-tokens' => $TOKENS });
        my $gw = gw_read($r->{headers}{'x-gw-read'});
        my $mock = $r->{headers}{'x-mock-read'};

        if (!defined $r->{headers}{'x-mock-request-id'}) {
            # the gateway refused it: the upstream never saw it
            $n{"gateway_$r->{status}"}++;
            next;
        }

        $n{admitted}++;

        if ($r->{status} >= 200 && $r->{status} < 300) {
            if (defined $mock && defined $gw && $gw eq $mock) {
                $n{agree}++;
                next;
            }

            push @differ, $c->{name};
            fail("$c->{name}: admitted, read alike");
            diag("  body: " . shorten($c->{body}));
            diag("  gateway:  " . ($gw // 'no X-Gw-Read'));
            diag("  mockllm:  " . ($mock // 'no x-mock-read'));
            next;
        }

        $n{mock_refused_admitted}++;

        my $cost = cost($gw) // '';
        my $same = defined $mock && $cost eq (cost($mock) // '');

        diag("admitted by the gateway, refused by the upstream "
             . "($r->{status}): $c->{name}: " . shorten($r->{body}));
        diag("  gateway:  " . ($gw // 'no X-Gw-Read'));
        diag("  mockllm:  " . ($mock // 'no x-mock-read'));

        if ($same) {
            push @agree_refused, $c->{name};
        } else {
            push @differ, $c->{name};
        }

        ok($same, "$c->{name}: what costs was read alike, though the "
                  . "upstream refused it");
    }

    diag(sprintf('bodies %d, admitted %d, refused by the gateway %s, '
                 . 'refused by mockllm after admission %d, agreements %d',
                 $n{bodies}, $n{admitted} // 0,
                 join(' ', map { /^gateway_(\d+)$/ ? "$1: $n{$_}" : () }
                           sort grep { /^gateway_/ } keys %n) || 0,
                 $n{mock_refused_admitted} // 0, $n{agree} // 0));
    diag("readings that differ in what costs: @differ") if @differ;

    ok($n{admitted}, 'the gateway admitted some of the corpus');

    $ng->no_alerts();
}

done_testing();


###############################################################################

# A 2xx of mockllm obeys its own reading: a stream when stream=1, and
# min(TOKENS, the limit) tokens in each of n choices.
sub obeys {
    my ($c, $r) = @_;
    my %rd = ($r->{headers}{'x-mock-read'} // '') =~ /(\w+)=(\S*)/g;
    my $want = $rd{max} =~ /^\d+$/ && $rd{max} < $TOKENS ? $rd{max} : $TOKENS;
    my $sse = ($r->{headers}{'content-type'} // '') eq 'text/event-stream';
    my (%text, $usage);

    return fail("direct, $c->{name}: no x-mock-read on a 2xx")
        unless defined $rd{n};

    return fail("direct, $c->{name}: stream=$rd{stream} but "
                . ($sse ? 'a stream' : 'a whole body'))
        unless $sse == ($rd{stream} eq '1');

    my @events = $sse ? map { /^data: (\{.*\})$/mg } split(/\n\n/, $r->{body})
                      : ($r->{body});

    for my $e (map { eval { decode_json($_) } // {} } @events) {
        if ($c->{api} eq 'openai') {
            for my $ch (@{ $e->{choices} // [] }) {
                $text{ $ch->{index} } .= $sse ? $ch->{delta}{content} // ''
                                              : $ch->{message}{content};
            }
            $usage = $e->{usage}{completion_tokens} if $e->{usage};

        } elsif ($c->{api} eq 'anthropic') {
            $text{0} .= $_->{text} for @{ $e->{content} // [] };
            $text{0} .= $e->{delta}{text} // ''
                if ($e->{type} // '') eq 'content_block_delta';
            $usage = $e->{usage}{output_tokens}
                if $e->{usage} && ($e->{type} // 'message') ne 'message_start';

        } else {
            $text{0} .= $e->{delta}
                if ($e->{type} // '') eq 'response.output_text.delta';
            my $resp = $e->{object} ? $e : $e->{response};
            if ($resp && $resp->{usage}) {
                $usage = $resp->{usage}{output_tokens};
                $text{0} = join '', map { $_->{text} }
                           map { @{ $_->{content} } } @{ $resp->{output} }
                    unless $sse;
            }
        }
    }

    my $tokens = join '', map { "tok$_ " } 1 .. $want;
    my $got = join '|', map { $text{$_} } sort { $a <=> $b } keys %text;
    my $expect = join '|', ($tokens) x $rd{n};

    return fail("direct, $c->{name}: $rd{n} choices of $want tokens, "
                . "got $got")
        unless $got eq $expect;

    return fail("direct, $c->{name}: usage $usage, not $rd{n} x $want")
        if defined $usage && $usage != $rd{n} * $want;

    return 1;
}

# A 400 in the provider's own format
sub provider_error {
    my ($c, $r) = @_;
    my $j = eval { decode_json($r->{body}) } // {};

    if ($c->{api} eq 'anthropic') {
        return 1 if ($j->{type} // '') eq 'error'
                    && ($j->{error}{type} // '') eq 'invalid_request_error'
                    && length($j->{error}{message} // '');
    } else {
        my $e = $j->{error} // {};
        return 1 if ($e->{type} // '') eq 'invalid_request_error'
                    && length($e->{message} // '')
                    && exists $e->{param} && exists $e->{code};
    }

    return fail("direct, $c->{name}: $r->{status} in the provider's format: "
                . shorten($r->{body}));
}

# X-Gw-Read with its model written as x-mock-read writes it
sub gw_read {
    my ($h) = @_;
    return undef unless defined $h;
    my $fields = join ' ', map { "$_=\\S*" } qw(max n stream m i f a t r);
    my ($model, $rest) = $h =~ /^model=(.*) ($fields)$/s
        or return $h;
    $model =~ s/([^\x21-\x7e])/sprintf('%%%02X', ord $1)/ge;
    return "model=$model $rest";
}

# what costs: all but the model
sub cost {
    my ($read) = @_;
    return undef unless defined $read;
    my ($rest) = $read =~ / (max=.*)$/ or return undef;
    return $rest;
}

sub shorten {
    my ($b) = @_;
    $b //= '';
    return length($b) > 300 ? substr($b, 0, 300) . '...' : $b;
}
