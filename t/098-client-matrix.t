#!/usr/bin/perl

# The client matrix: real client libraries, called as their users call
# them, through every endpoint of the gateway, each response checked
# against its ledger row.  The official SDKs (openai, @anthropic-ai/sdk),
# the Vercel AI SDK (ai with @ai-sdk/openai, chat and responses, and
# @ai-sdk/anthropic) and LangChain (@langchain/openai, chat and responses,
# and @langchain/anthropic), pinned in t/sdk/package.json; one node process
# (t/sdk/matrix.mjs) runs every case and prints what the library returned
# or threw and what went over the wire.
#
# For each library: a plain call and a stream (the text, and the usage as
# the library reports it equal to the ledger row's, found by the request
# id), a bad key and a rate limit (a tier of one request a minute: the
# second call, the library's retries off), each a single HTTP exchange;
# one ledger row per served call and none for a refused one.  Then the
# endpoints beyond chat: models, embeddings, count_tokens, an unknown
# path, the Anthropic dialect's errors as the AI SDK and the Anthropic SDK
# read them, and the libraries' default output limits.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use JSON::PP;
use LLMGW;
use Test::More;

my $s = stack();
my $matrix = "$s->{LLMGW_BUILD}/sdk/matrix.mjs";

plan(skip_all => 'node is not installed: the client matrix needs it')
    unless grep { -x "$_/node" } split(/:/, $ENV{PATH} // '');
die "$matrix is not there: make sdk installs the libraries and it\n"
    unless -f $matrix;

# LangChain reports to LangSmith only when told: never from here
delete @ENV{grep { /^(LANGSMITH|LANGCHAIN)_/ } keys %ENV};

my $gpt = 'mock-gpt-4o-mini';
my $claude = 'mock-claude-3-5-haiku';
# the names the libraries know their default output limits by: the AI
# SDK's 64000 for Sonnet 4.5 (a name that contains it), LangChain's 8192
# for Haiku 3.5 (a name that starts with it)
my $sonnet = 'mock-claude-sonnet-4-5';
my $haiku = 'claude-3-5-haiku-20241022';
# a model of this file's own, priced, for the embeddings' rows
my $embedding = "mock-text-embedding-3-small-$$";

db()->do(q{INSERT INTO llm.prices (model, effective_from, input_per_mtok,
                                   output_per_mtok, cached_input_per_mtok)
           VALUES (?, '2000-01-01', 20000, 0, 0)}, undef, $embedding);

# What each library is: the API its calls reach, the model it calls, what
# it raises for a 401 and a 429 (LangChain: the SDK's error, with its own
# code added), and whether it exposes the request id (x-request-id)
# itself.
my %lib = (
    'openai' => { api => 'openai', model => $gpt, id => 1,
                  401 => 'AuthenticationError', 429 => 'RateLimitError' },
    'openai-responses' => { api => 'responses', model => $gpt, id => 1,
                  401 => 'AuthenticationError', 429 => 'RateLimitError' },
    'anthropic' => { api => 'anthropic', model => $claude,
                  401 => 'AuthenticationError', 429 => 'RateLimitError' },
    'aisdk-openai-chat' => { api => 'openai', model => $gpt, id => 1,
                  401 => 'APICallError', 429 => 'APICallError' },
    'aisdk-openai-responses' => { api => 'responses', model => $gpt, id => 1,
                  401 => 'APICallError', 429 => 'APICallError' },
    'aisdk-anthropic' => { api => 'anthropic', model => $claude, id => 1,
                  401 => 'APICallError', 429 => 'APICallError' },
    'langchain-openai' => { api => 'openai', model => $gpt, lc => 1,
                  401 => 'AuthenticationError', 429 => 'RateLimitError' },
    'langchain-openai-responses' => { api => 'responses', model => $gpt,
                  lc => 1,
                  401 => 'AuthenticationError', 429 => 'RateLimitError' },
    'langchain-anthropic' => { api => 'anthropic', model => $claude, lc => 1,
                  401 => 'AuthenticationError', 429 => 'RateLimitError',
                  # its stream's usage_metadata adds message_start's
                  # output_tokens (1, as Anthropic sends it) to
                  # message_delta's, which already count all: one more
                  # than the ledger's, and than Anthropic bills
                  stream_extra => 1 },
);
my @libs = sort keys %lib;

# the tiers: plenty; one request a minute; a list of models; a maximum
# output limit that refuses what is above it, and one that lowers it
my $plenty = new_tenant(tier => 'mxplenty');
my %rpm = map { $_ => new_tenant(tier => 'mxonerpm') }
          @libs, 'count', 'aisdk', 'native';
my $listed = new_tenant(tier => 'mxlisted');
my $one = new_tenant(tier => 'mxlisted', args => [ '--models', $gpt ]);
my $capped = new_tenant(tier => 'mxplenty');
my $refuses = new_tenant(tier => 'mxrefuses');
my $lowers = new_tenant(tier => 'mxlowers');
my $forged = forge_key();

accountd('tenant', 'update', '--name', $capped->{name}, '--daily-cap-usd', '0');
snapshot_caps($s->{LLMGW_KEY_SNAPSHOT}, $capped->{key_id}, 't');

my @cases;

sub case {
    my (%c) = @_;
    push(@cases, \%c);
}

for my $l (@libs) {
    my %l = (lib => $l, model => $lib{$l}{model}, limit => 20,
             mock => { 'x-mock-tokens' => '5' });
    case(name => "$l-plain", op => 'chat', tenant => $plenty, %l);
    case(name => "$l-stream", op => 'stream', tenant => $plenty, %l);
    case(name => "$l-badkey", op => 'chat', key => $forged, %l);
    case(name => "$l-ratelimit", steps => [ 'chat', 'chat' ], retries => 0,
         tenant => $rpm{$l}, %l);
}

my %mock = (mock => { 'x-mock-tokens' => '5' });

# models: exactly what the key may call, in each SDK
for my $l (qw(openai anthropic)) {
    case(name => "$l-models-one", lib => $l, op => 'models', tenant => $one,
         want => [ $gpt ]);
    case(name => "$l-models-tier", lib => $l, op => 'models',
         tenant => $listed, want => [ sort $gpt, $claude ]);
    case(name => "$l-models-retrieve", lib => $l, op => 'retrieve',
         model => $gpt, tenant => $one, want => [ $gpt ]);
}
case(name => 'openai-models-retrieve-other', lib => 'openai', op => 'retrieve',
     model => $claude, tenant => $one);

# embeddings, in each library that has them
case(name => 'openai-embed', lib => 'openai', op => 'embed',
     model => $embedding, tenant => $plenty);
case(name => 'aisdk-embed', lib => 'aisdk-openai-chat', op => 'embed',
     model => $embedding, tenant => $plenty);
case(name => 'langchain-embed', lib => 'langchain-openai', op => 'embed',
     model => $embedding, tenant => $plenty);

# count_tokens: the count of the prompt, no row, one request of the RPM
case(name => 'anthropic-count', lib => 'anthropic', op => 'count',
     model => $claude, tenant => $plenty);
case(name => 'anthropic-count-rpm', lib => 'anthropic',
     steps => [ 'count', 'chat' ], retries => 0, model => $claude, limit => 20,
     tenant => $rpm{count}, %mock);

# a path no endpoint has: a JSON 404 in each dialect
case(name => 'openai-unknown', lib => 'openai', op => 'unknown',
     tenant => $plenty);
case(name => 'anthropic-unknown', lib => 'anthropic', op => 'unknown',
     tenant => $plenty);

# the AI SDK's Anthropic provider shows the gateway's own message
case(name => 'aisdk-anthropic-badkey-message', lib => 'aisdk-anthropic',
     op => 'chat', model => $claude, limit => 20, key => $forged);
case(name => 'aisdk-anthropic-ratelimit-message', lib => 'aisdk-anthropic',
     steps => [ 'chat', 'chat' ], retries => 0, model => $claude, limit => 20,
     tenant => $rpm{aisdk}, %mock);
case(name => 'aisdk-anthropic-cap-message', lib => 'aisdk-anthropic',
     op => 'chat', retries => 0, model => $claude, limit => 20,
     tenant => $capped);

# the Anthropic SDK reads the request id from request-id
case(name => 'anthropic-request-id', lib => 'anthropic', op => 'chat',
     model => $claude, limit => 20, tenant => $plenty, %mock);
case(name => 'anthropic-request-id-stream', lib => 'anthropic', op => 'stream',
     model => $claude, limit => 20, tenant => $plenty, %mock);
case(name => 'anthropic-badkey-native', lib => 'anthropic', op => 'chat',
     model => $claude, limit => 20, key => $forged);
case(name => 'anthropic-ratelimit-native', lib => 'anthropic',
     steps => [ 'chat', 'chat' ], retries => 0, model => $claude, limit => 20,
     tenant => $rpm{native}, %mock);

# the libraries' default output limits (no limit given): lowered to the
# tier's maximum on one tier, refused with it on the other
for my $d ([ 'aisdk-anthropic', $sonnet, 64000 ],
           [ 'langchain-anthropic', $haiku, 8192 ]) {
    my ($l, $model, $sent) = @$d;
    case(name => "$l-default-lowered", lib => $l, op => 'chat', model => $model,
         retries => 0, tenant => $lowers, sent => $sent, %mock);
    case(name => "$l-default-refused", lib => $l, op => 'chat', model => $model,
         retries => 0, tenant => $refuses, sent => $sent);
}

my %lower_tier = map { $_ => 1 } grep { /-default-lowered$/ } map { $_->{name} }
                 @cases;

# the tier that lowers: the output-limit part's option (and its response
# header, x-llm-max-tokens-lowered), only once its cases run (nginx -t
# refuses an option it does not know)
my $lowering = %lower_tier ? 'above_max=lower' : '';

my $ng = nginx(http => <<"EOF")->run();
    %%GATEWAY%%
    %%UPSTREAM%%
    llm_gateway_tier  mxplenty   unpriced=allow tpm=600000;
    llm_gateway_tier  mxonerpm   unpriced=allow tpm=600000 rpm=1;
    llm_gateway_tier  mxlisted   unpriced=allow tpm=600000 models=$gpt,$claude;
    llm_gateway_tier  mxrefuses  unpriced=allow tpm=600000 max_tokens=4096;
    llm_gateway_tier  mxlowers   unpriced=allow tpm=600000 max_tokens=4096 $lowering;

    server {
        listen  127.0.0.1:%%PORT%%;

        proxy_http_version  1.1;
        proxy_set_header    Connection "";

        %%APIS%%
    }
EOF

# the cases, with their keys, to node; its lines back, by name
$_->{key} //= $_->{tenant}{key} for @cases;

my $file = $ng->dir() . '/cases.json';
open(my $fh, '>', $file) or die "$file: $!";
print $fh encode_json({ base => $ng->url(),
                        cases => [ map { my %c = %$_; delete $c{tenant};
                                         \%c } @cases ] });
close($fh);

my $out = `node $matrix $file 2>&1`;
my %got;
for (split(/\n/, $out)) {
    my $j = eval { decode_json($_) } or next;
    $got{ $j->{name} } = $j;
}
diag($out) if $? || keys %got != @cases;
is($?, 0, 'the matrix ran') or diag("node $matrix $file");
is(scalar(keys %got), scalar(@cases), scalar(@cases) . ' cases, a line each');

# the served request ids of each tenant, and every refused one
my (%served, @refused);

# A served call: the text, the usage the library read and the ledger's,
# one exchange, the library's request id that of the wire.
sub served {
    my ($name, $r, $c, %o) = @_;
    my $w = $r->{wire} // [];
    my $api = $o{api} // $lib{ $c->{lib} }{api};

    ok(!$r->{error}, "$name: served")
        or diag(encode_json($r->{error}));
    is($r->{text}, 'tok1 tok2 tok3 tok4 tok5 ', "$name: the text");
    my $extra = $o{stream} ? $lib{ $c->{lib} }{stream_extra} // 0 : 0;
    ok(($r->{input} // 0) > 0 && ($r->{output} // 0) == 5 + $extra,
       "$name: the usage the library read: " . ($r->{input} // 'none')
       . ' in, ' . ($r->{output} // 'none') . ' out');
    is_deeply([ map { $_->{status} } @$w ], [ 200 ],
              "$name: one exchange, 200");

    my $id = $w->[0]{x_request_id} // '';
    is($r->{id}, $id, "$name: the library's request id is the gateway's")
        if $o{id} // $lib{ $c->{lib} }{id};

    my $u = usage_row($id) // {};
    is_deeply([ @$u{qw(tenant_id model api input_tokens output_tokens)} ],
              [ $c->{tenant}{id}, $c->{model}, $api, $r->{input},
                defined $r->{output} ? $r->{output} - $extra : undef ],
              "$name: the same in its ledger row");
    push(@{ $served{ $c->{tenant}{id} } }, $id) if $id;

    return ($w->[0] // {}, $u);
}

# A refused call: the library's error with the status, one exchange (no
# retry), an x-request-id, no row.
sub refused {
    my ($name, $r, $c, $status, $class) = @_;
    my $w = $r->{wire} // [];
    my $e = $r->{error} // {};

    is_deeply([ $e->{status}, $e->{class} ], [ $status, $class ],
              "$name: the library raises $class, $status");
    is_deeply([ map { $_->{status} } @$w ], [ $status ],
              "$name: one exchange, $status: no retry");
    ok($w->[0]{x_request_id}, "$name: with an x-request-id");
    my %lc = (401 => 'MODEL_AUTHENTICATION', 429 => 'MODEL_RATE_LIMIT',
              404 => 'MODEL_NOT_FOUND');
    is($e->{lc_error_code}, $lc{$status}, "$name: LangChain's $lc{$status}")
        if $lib{ $c->{lib} }{lc} && $lc{$status};
    push(@refused, $w->[0]{x_request_id}) if $w->[0]{x_request_id};

    return ($e, $w->[0] // {});
}

for my $c (@cases) {
    my $n = $c->{name};
    my $r = $got{$n} // {};
    my $l = $lib{ $c->{lib} };

    if ($n =~ /-(plain|stream)$/) {
        served($n, $r, $c, stream => $1 eq 'stream');

    } elsif ($n =~ /-badkey$/) {
        refused($n, $r, $c, 401, $l->{401});

    } elsif ($n =~ /-ratelimit$/) {
        my ($first, $second) = @{ $r->{steps} // [] };
        served("$n, the first", $first // {}, $c);
        refused("$n, the second", $second // {}, $c, 429, $l->{429});

    } elsif ($n =~ /-models-(one|tier|retrieve)$/) {
        is_deeply([ sort @{ $r->{ids} // [] } ], $c->{want},
                  "$n: what the key may call: @{ $c->{want} }")
            or diag(encode_json($r));
        is($r->{object}, 'model', "$n: a model object") if $1 eq 'retrieve';
        my $w = $r->{wire} // [];
        ok(@$w && !grep({ $_->{status} != 200 } @$w), "$n: 200");
        push(@refused, map { $_->{x_request_id} // () } @$w);

    } elsif ($n eq 'openai-models-retrieve-other') {
        refused($n, $r, $c, 404, 'NotFoundError');

    } elsif ($n =~ /-embed$/) {
        # LangChain's embedQuery hides the usage: the body's, then
        my $w = $r->{wire} // [];
        my $id = $w->[0]{x_request_id} // '';
        my $input = $r->{input} // $w->[0]{usage}{prompt_tokens};
        ok(!$r->{error} && ($r->{vector} // 0) > 0 && $r->{numbers},
           "$n: a vector of " . ($r->{vector} // 0) . ' numbers')
            or diag(encode_json($r));
        is_deeply([ map { $_->{status} } @$w ], [ 200 ],
                  "$n: one exchange, 200");
        my $u = usage_row($id) // {};
        is_deeply([ @$u{qw(tenant_id model api input_tokens)} ],
                  [ $plenty->{id}, $embedding, 'embeddings', $input ],
                  "$n: its ledger row, " . ($input // 'no') . ' tokens in');
        ok(($u->{cost_pusd} // 0) > 0, "$n: priced: "
           . ($u->{cost_pusd} // 'no') . ' p$');
        push(@{ $served{ $plenty->{id} } }, $id) if $id;

    } elsif ($n eq 'anthropic-count') {
        my $plain = $got{'anthropic-plain'} // {};
        is($r->{input}, $plain->{input},
           "$n: the prompt's count, as the messages call had it");
        my $w = $r->{wire} // [];
        is_deeply([ map { $_->{status} } @$w ], [ 200 ], "$n: 200");
        push(@refused, map { $_->{x_request_id} // () } @$w);

    } elsif ($n eq 'anthropic-count-rpm') {
        my ($count, $chat) = @{ $r->{steps} // [] };
        ok(!$count->{error} && $count->{input}, "$n: counted");
        push(@refused, map { $_->{x_request_id} // () } @{ $count->{wire} });
        refused("$n: the messages call after it", $chat // {}, $c, 429,
                'RateLimitError');

    } elsif ($n =~ /^(\w+)-unknown$/) {
        my ($e, $w) = refused($n, $r, $c, 404, 'NotFoundError');
        like($w->{content_type} // '', qr{^application/json}, "$n: JSON");
        if ($1 eq 'anthropic') {
            is_deeply([ $w->{type}, $e->{type} ],
                      [ 'error', 'not_found_error' ],
                      "$n: Anthropic's error, not_found_error");
            is($e->{request_id}, $w->{x_request_id},
               "$n: its request-id is the x-request-id");
        } else {
            ok(ref $w->{error} eq 'HASH' && length($w->{error}{message} // ''),
               "$n: OpenAI's error, with a message");
            is($e->{request_id}, $w->{x_request_id},
               "$n: the SDK's request id is the x-request-id");
        }

    } elsif ($n =~ /^aisdk-anthropic-(badkey|ratelimit|cap)-message$/) {
        my $what = $1;
        if ($what eq 'ratelimit') {
            my ($first, $second) = @{ $r->{steps} // [] };
            served("$n, the first", $first // {}, $c);
            $r = $second // {};
        }
        my ($e, $w) = refused($n, $r, $c, $what eq 'badkey' ? 401 : 429,
                              'APICallError');
        my $said = $w->{error}{message} // '';
        ok(length $said && $e->{message} eq $said,
           "$n: the library shows the gateway's message: $e->{message}");

    } elsif ($n =~ /^anthropic-request-id/) {
        my ($w, $u) = served($n, $r, $c, id => 1,
                             stream => scalar($n =~ /stream/));
        is($u->{request_id}, $r->{id}, "$n: _request_id is the ledger's");

    } elsif ($n =~ /^anthropic-(badkey|ratelimit)-native$/) {
        # the SDK reads Anthropic's error: its type, its message, request-id
        my ($status, $class, $type) = $1 eq 'badkey'
            ? (401, 'AuthenticationError', 'authentication_error')
            : (429, 'RateLimitError', 'rate_limit_error');
        if ($1 eq 'ratelimit') {
            my ($first, $second) = @{ $r->{steps} // [] };
            served("$n, the first", $first // {}, $c, id => 1);
            $r = $second // {};
        }
        my ($e, $w) = refused($n, $r, $c, $status, $class);
        is_deeply([ $e->{type}, $e->{request_id} ],
                  [ $type, $w->{x_request_id} ], "$n: $type, the request-id");
        ok(length($e->{api_message} // '')
           && $e->{api_message} eq ($w->{error}{message} // ''),
           "$n: the SDK's apiMessage, the gateway's: "
           . ($e->{api_message} // 'none'));

    } elsif ($n =~ /-default-lowered$/) {
        my ($w, $u) = served($n, $r, $c);
        is($w->{sent}{max_tokens}, $c->{sent},
           "$n: the library sent its default, $c->{sent}");
        like($w->{mock_read} // '', qr/ max=4096 /,
             "$n: the upstream got the tier's maximum");
        is($w->{lowered}, $c->{sent}, "$n: x-llm-max-tokens-lowered says "
           . 'what was asked');
        ok(($u->{reserved_tokens} // 1e9) < $c->{sent},
           "$n: reserved as lowered: " . ($u->{reserved_tokens} // 'none'));

    } elsif ($n =~ /-default-refused$/) {
        my ($e, $w) = refused($n, $r, $c, 400,
                              $c->{lib} =~ /^aisdk/ ? 'APICallError'
                                                    : 'BadRequestError');
        is($w->{sent}{max_tokens}, $c->{sent},
           "$n: the library sent its default, $c->{sent}");
        like($e->{message} // '',
             qr/\bmax_tokens\b.*\b4096\b|\b4096\b.*\bmax_tokens\b/,
             "$n: the message names max_tokens and the maximum, 4096");

    } else {
        fail("$n: a case without a check");
    }
}

# one row for each served call of a tenant, and none for a refused one
for my $t ($plenty, values %rpm, $listed, $one, $capped, $refuses, $lowers) {
    my $ids = db()->selectcol_arrayref(
        'SELECT request_id FROM llm.usage WHERE tenant_id = ?', undef,
        $t->{id});
    is_deeply([ sort @$ids ], [ sort @{ $served{ $t->{id} } // [] } ],
              "$t->{name}: a row for each served call, none other");
}

my $rows = db()->selectrow_array(
    'SELECT count(*) FROM llm.usage WHERE request_id = ANY(?)', undef,
    [ @refused ]);
is($rows, 0, scalar(@refused) . ' refused or unbilled calls, no row');


$ng->no_alerts();

done_testing();
