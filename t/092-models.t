#!/usr/bin/perl

# The endpoints clients call besides generation.  GET /v1/models and
# /v1/models/{id}, answered by the gateway, list exactly what the key may
# call (its tier's and its own models, aliases and roles under their own
# names), through the openai and @anthropic-ai/sdk packages, each in its
# provider's shape, Anthropic's a page at a time; an id the key may not
# call is the 404 of one that does not exist.  POST
# /v1/messages/count_tokens goes to the backend, is counted against the
# requests a minute and writes no ledger row.  Any other path is a JSON
# 404 with x-request-id in each dialect, whatever the key, the client's
# path quoted escaped and bounded.  And mockllm's own models and counts.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use HTTP::Tiny;
use JSON::PP;
use LLMGW;
use Test::More;
use Time::HiRes qw(sleep time);

my $s = stack();
my $sdk = "$s->{LLMGW_BUILD}/sdk/models.mjs";

# keys: one model; any; a tier of two; a role by name; an alias by name;
# one its tier does not allow
my $one = new_tenant(tier => 'open', args => [ '--models', 'mock-gpt-4o' ]);
my $any = new_tenant(tier => 'open');
my $two = new_tenant(tier => 'two');
my $role = new_tenant(tier => 'open', args => [ '--models', 'fast' ]);
my $alias = new_tenant(tier => 'open', args => [ '--models', 'cheap' ]);
my $none = new_tenant(tier => 'two',
                      args => [ '--models', 'mock-claude-3-5-haiku' ]);

# rpm=3: one for counts, one for lists
my $slow = new_tenant(tier => 'slow');
my $slower = new_tenant(tier => 'slow');

# to be revoked while nginx runs
my $revoked = new_tenant(tier => 'open');

# the keys are in the snapshot the gateway starts with
my $ng = nginx(http => <<'EOF')->run();
    %%GATEWAY%%
    %%UPSTREAM%%
    llm_gateway_tier  open  unpriced=allow tpm=100000000;
    llm_gateway_tier  two   unpriced=allow tpm=100000000
                            models=mock-gpt-4o-mini,mock-gpt-4o;
    llm_gateway_tier  slow  unpriced=allow tpm=100000000 rpm=3;

    llm_gateway_backend  m  upstream=mock;
    llm_gateway_role     fast  m  model=mock-claude-3-5-haiku;
    llm_gateway_alias    cheap  mock-gpt-4o-mini;
    llm_gateway_alias    small  mock-claude-3-5-haiku;

    server {
        listen  127.0.0.1:%%PORT%%;

        # a 10 kB path reaches the gateway, not nginx's 414
        large_client_header_buffers  4 16k;

        llm_gateway_max_body  4k;

        proxy_http_version  1.1;
        proxy_set_header    Connection "";

        %%APIS%%
    }
EOF

my $http = HTTP::Tiny->new(timeout => 30, keep_alive => 0);

sub get {
    my ($path, $key, %h) = @_;
    $h{authorization} = "Bearer $key" if defined $key;
    return $http->request('GET', $ng->url($path), { headers => \%h });
}

sub json { my $j = eval { decode_json($_[0]->{content}) }; return $j }

sub sdk {
    my ($scenario, $key, @args) = @_;
    local $ENV{LLMGW_URL} = $ng->url();
    local $ENV{LLMGW_KEY} = $key;
    my $out = `node $sdk $scenario @args 2>&1`;
    my $j = eval { decode_json((split(/\n/, $out))[-1]) };
    diag($out) unless $j;
    return $j // {};
}

# --- the list, by key ----------------------------------------------------

# [ key, what it may call ]
my @lists = (
    [ 'a key limited to one model', $one, [ 'mock-gpt-4o' ] ],
    [ 'a key for any model: the models the configuration names', $any,
      [ sort qw(cheap fast mock-claude-3-5-haiku mock-gpt-4o
                mock-gpt-4o-mini small) ] ],
    [ 'a tier of two models: and the alias of one', $two,
      [ sort qw(cheap mock-gpt-4o mock-gpt-4o-mini) ] ],
    [ 'a key allowed a role by name', $role, [ 'fast' ] ],
    [ 'a key allowed an alias by name', $alias, [ 'cheap' ] ],
    [ 'a key allowed a model its tier does not allow', $none, [] ],
);

SKIP: {
    skip 'the SDKs are not installed (make sdk)', 6 * 2 + 8 unless -f $sdk;

    for my $c (@lists) {
        my ($what, $t, $want) = @$c;

        my $o = sdk('openai-list', $t->{key});
        is_deeply([ sort @{ $o->{ids} // [] } ], $want,
                  "openai models.list(): $what");

        my $a = sdk('anthropic-list', $t->{key});
        is_deeply([ sort @{ $a->{ids} // [] } ], $want,
                  "anthropic models.list(), a page of one at a time: $what");
    }

    my $o = sdk('openai-list', $one->{key});
    is_deeply($o->{first}, { id => 'mock-gpt-4o', object => 'model',
                             created => $o->{first}{created},
                             owned_by => 'llm-gateway' },
              "OpenAI's model object");
    like($o->{first}{created} // '', qr/^\d{10}$/, '  created: unix seconds');

    my $a = sdk('anthropic-list', $one->{key});
    is_deeply($a->{first}, { type => 'model', id => 'mock-gpt-4o',
                             display_name => 'mock-gpt-4o',
                             created_at => $a->{first}{created_at} },
              "Anthropic's model object");
    like($a->{first}{created_at} // '',
         qr/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/, '  created_at: RFC 3339');
    is_deeply($a->{page}, { has_more => JSON::PP::false,
                            first_id => 'mock-gpt-4o',
                            last_id => 'mock-gpt-4o', n => 1 },
              '  a page: has_more, first_id, last_id');

    # retrieve: the key's model; one that exists but not for it; none
    $o = sdk('openai-retrieve', $one->{key}, 'mock-gpt-4o');
    is($o->{model}{id}, 'mock-gpt-4o', 'openai models.retrieve(): its model');

    $o = sdk('openai-retrieve', $one->{key}, 'mock-gpt-4o-mini');
    is_deeply([ $o->{status}, $o->{error}{code}, $o->{error}{param} ],
              [ 404, 'model_not_found', 'model' ],
              '  a model it may not call: 404 model_not_found, not 403');

    $a = sdk('anthropic-retrieve', $role->{key}, 'fast');
    is($a->{model}{id}, 'fast', 'anthropic models.retrieve(): its role');
}

# the same by hand: the shapes, and what is not revealed
my $r = get('/v1/models', $one->{key});
is($r->{status}, 200, 'GET /v1/models: 200');
like($r->{headers}{'x-request-id'} // '', qr/^[0-9a-f]{32}$/,
     '  with x-request-id');
is(json($r)->{object}, 'list', "  OpenAI's list");
is_deeply([ map { $_->{id} } @{ json($r)->{data} // [] } ], [ 'mock-gpt-4o' ],
          '  the one model');

$r = get('/v1/models', $none->{key}, 'anthropic-version' => '2023-06-01');
is_deeply(json($r), { data => [], has_more => JSON::PP::false,
                      first_id => undef, last_id => undef },
          "nothing to call: Anthropic's empty list");

$r = get('/v1/models?limit=2', $any->{key}, 'anthropic-version' => '2023-06-01');
my $page = json($r) // {};
is(scalar @{ $page->{data} // [] }, 2, 'limit=2: two');
ok($page->{has_more}, '  has_more');
my $next = get("/v1/models?limit=2&after_id=$page->{last_id}", $any->{key},
               'anthropic-version' => '2023-06-01');
my $back = get("/v1/models?limit=2&before_id="
               . json($next)->{first_id}, $any->{key},
               'anthropic-version' => '2023-06-01');
is_deeply([ map { $_->{id} } @{ json($back)->{data} } ],
          [ map { $_->{id} } @{ $page->{data} } ],
          '  before_id of the next page: the first page again');

$r = get('/v1/models?limit=0', $any->{key}, 'anthropic-version' => '2023-06-01');
is($r->{status}, 400, 'limit=0: 400');

my $exists = get('/v1/models/mock-gpt-4o-mini', $one->{key});
my $nothing = get('/v1/models/no-such-model', $one->{key});
is_deeply([ $exists->{status}, $nothing->{status} ], [ 404, 404 ],
          'a model the key may not call, and none at all: 404 both');
(my $said = json($exists)->{error}{message} // '') =~ s/mock-gpt-4o-mini/X/;
(my $none_said = json($nothing)->{error}{message} // '') =~ s/no-such-model/X/;
is($said, $none_said, '  told alike: existence is not revealed');
is(json($nothing)->{error}{message}, "The model 'no-such-model' does not exist",
   "  as OpenAI says it");

$r = get('/v1/models/fast', $any->{key});
is(json($r)->{id}, 'fast', 'a role under its own name');

$r = get('/v1/models', 'llmgw_live_not-a-key');
is($r->{status}, 401, 'a bad key: 401, as elsewhere');
is(json($r)->{error}{code}, 'invalid_api_key', '  invalid_api_key');
ok(!grep({ /mock-/ } $r->{content}), '  nothing listed');

$r = $http->request('POST', $ng->url('/v1/models'),
                    { headers => { authorization => "Bearer $any->{key}" } });
is($r->{status}, 405, 'POST /v1/models: 405');

is(get('/v1/models/', $any->{key})->{status}, 404, '/v1/models/: 404');
is(json(get('/v1/modelsx', $any->{key}))->{error}{code}, 'unknown_url',
   '/v1/modelsx: unknown_url');

# nothing billed: no row
my $listed = get('/v1/models', $any->{key})->{headers}{'x-request-id'};

# --- count_tokens ----------------------------------------------------------

my $msg = [ { role => 'user', content => 'Say hello.' } ];

sub count {
    my ($t, $body) = @_;
    return http_post($ng->url('/v1/messages/count_tokens'), $body,
                     'x-api-key' => $t->{key},
                     'anthropic-version' => '2023-06-01');
}

SKIP: {
    skip 'the SDKs are not installed (make sdk)', 2 unless -f $sdk;

    # 3 + (3 + ceil(10 / 4)) + ceil(9 / 4): the mock's count
    my $c = sdk('anthropic-count', $any->{key}, 'mock-claude-3-5-haiku');
    is($c->{input_tokens}, 12, 'messages.countTokens(): the backend\'s count');

    $c = sdk('anthropic-count', $any->{key}, 'fast');
    like($c->{read} // '', qr/^model=mock-claude-3-5-haiku /,
         '  a role: its backend\'s model in the body');
}

# an alias of an Anthropic model: an OpenAI one is not found there
$r = count($any, { model => 'small', messages => $msg });
is($r->{status}, 200, 'count_tokens: 200');
is(json($r)->{input_tokens}, 9, '  {"input_tokens": 9}');
like($r->{headers}{'x-mock-read'} // '', qr/^model=mock-claude-3-5-haiku /,
     '  an alias: resolved in the body');
my $counted = $r->{headers}{'x-request-id'};
like($counted // '', qr/^[0-9a-f]{32}$/, '  with x-request-id');

$r = count($one, { model => 'mock-gpt-4o-mini', messages => $msg });
is($r->{status}, 403, 'a model the key may not call: 403');

$r = count($any, { messages => $msg });
is($r->{status}, 400, 'no model: 400');

$r = count($any, { model => 'm', max_tokens => 5, messages => $msg });
is($r->{status}, 400, 'max_tokens: 400, as Anthropic refuses it');
like(json($r)->{error}{message} // '', qr/max_tokens: Extra inputs/,
     '  the backend\'s own refusal');

$r = http_post($ng->url('/v1/messages/count_tokens'),
               { model => 'm', messages => $msg },
               'x-api-key' => 'llmgw_live_not-a-key');
is($r->{status}, 401, 'a bad key: 401');

$r = count($any, { model => 'm', messages => [ { role => 'user',
                                                content => 'x' x 5000 } ] });
is($r->{status}, 413, 'a body above llm_gateway_max_body: 413');

# revoked: refused once accountd's key set says so, on every worker
is(count($revoked, { model => 'm', messages => $msg })->{status}, 200,
   'a key to revoke counts');
accountd('key', 'revoke', $revoked->{key_id});
my $deadline = time() + 10 * LLMGW::time_scale();
my $refused = 0;
while ($refused < 8 && time() < $deadline) {
    my $st = count($revoked, { model => 'm', messages => $msg })->{status};
    $refused = $st == 401 ? $refused + 1 : 0;
    sleep(0.1) unless $refused;
}
is($refused, 8, 'revoked: count_tokens refused 401, every time');

# rpm=3: three counts, then a 429; the models list takes its requests too
my @st = map { count($slow, { model => 'm', messages => $msg })->{status} }
    1 .. 3;
is_deeply(\@st, [ 200, 200, 200 ], 'rpm=3: three counts');
$r = count($slow, { model => 'm', messages => $msg });
is($r->{status}, 429, '  the fourth: 429');
# OpenAI's code, or Anthropic's type once refusals speak its dialect
like(json($r)->{error}{code} // json($r)->{error}{type} // '', qr/^rate_limit/,
     '  a rate limit');
is($r->{headers}{'x-ratelimit-limit-requests'}, 3,
   '  x-ratelimit-limit-requests: 3');

@st = map { get('/v1/models', $slower->{key})->{status} } 1 .. 4;
is_deeply(\@st, [ 200, 200, 200, 429 ], 'rpm=3: three lists, then 429');

# no row for the count nor the list, once a later request's row is in
$r = http_post($ng->url('/v1/messages'),
               { model => 'm', max_tokens => 10, messages => $msg },
               'x-api-key' => $any->{key}, 'x-mock-tokens' => 2);
my $later = $r->{headers}{'x-request-id'};
ok(usage_row($later), 'a message after them: its row');
is(scalar @{ usage_rows($counted, 0) }, 0, 'the count: no ledger row');
is(scalar @{ usage_rows($listed, 0) }, 0, 'the list: no ledger row');

# --- any other path --------------------------------------------------------

$r = http_post($ng->url('/v1/foo'), { model => 'm' });
is($r->{status}, 404, 'POST /v1/foo without a key: 404, not 401');
like($r->{headers}{'content-type'} // '', qr{^application/json},
     '  JSON');
like($r->{headers}{'x-request-id'} // '', qr/^[0-9a-f]{32}$/,
     '  with x-request-id');
is_deeply(json($r), { error => {
              message => 'Unknown request URL: POST /v1/foo. Please check '
                         . 'the URL for typos.',
              type => 'invalid_request_error', param => undef,
              code => 'unknown_url' } },
          "  OpenAI's unknown_url");

$r = http_post($ng->url('/v1/foo'), { model => 'm' },
               'anthropic-version' => '2023-06-01',
               'x-api-key' => $any->{key});
is($r->{status}, 404, 'with anthropic-version and a key: 404');
ok(json($r), '  JSON');
like($r->{headers}{'x-request-id'} // '', qr/^[0-9a-f]{32}$/,
     '  with x-request-id');

# Anthropic's shape
{

    is_deeply([ json($r)->{type}, json($r)->{error}{type} ],
              [ 'error', 'not_found_error' ], "  Anthropic's not_found_error");
    is($r->{headers}{'request-id'}, $r->{headers}{'x-request-id'},
       '  request-id, as x-request-id');

    my $m = get('/v1/models/no-such-model', $any->{key},
                'anthropic-version' => '2023-06-01');
    is_deeply([ $m->{status}, json($m)->{error}{type} ],
              [ 404, 'not_found_error' ],
              'an unknown model, Anthropic: not_found_error');

    my $c = count($slow, { model => 'm', messages => $msg });
    is_deeply([ $c->{status}, json($c)->{error}{type} ],
              [ 429, 'rate_limit_error' ],
              "count_tokens over rpm: Anthropic's rate_limit_error");
}

# quotes, a backslash, control bytes, bytes not UTF-8, 10 kB of it
my $hostile = '/v1/a%22b%5Cc%01d%1b[31m%0d%0aSet-Cookie:%20x=1%ff'
              . ('z' x 10000);
$r = get($hostile, $any->{key});
is($r->{status}, 404, 'a hostile 10 kB path: 404');
my $j = json($r);
ok($j, '  the body is JSON');
my $m = $j ? $j->{error}{message} : '';
like($m, qr{^Unknown request URL: GET /v1/a\\x22b\\x5cc\\x01d\\x1b\[31m\\x0d\\x0aSet-Cookie: x=1\\xffz+\.\.\.\. Please},
     '  the path escaped, then cut');
ok(length($r->{content}) < 1024, '  bounded: ' . length($r->{content})
                                 . ' bytes');
ok($m !~ /[\x00-\x1f\x7f-\xff"]/, '  no raw control byte, quote or non-ASCII');
ok(!exists $r->{headers}{'set-cookie'}, '  no header from the path');

SKIP: {
    skip 'the SDKs are not installed (make sdk)', 6 unless -f $sdk;

    my $o = sdk('openai-unknown', $any->{key});
    is_deeply([ $o->{status}, $o->{error}{code} ], [ 404, 'unknown_url' ],
              'openai SDK, an unknown path: NotFoundError, unknown_url');
    like($o->{request_id} // '', qr/^[0-9a-f]{32}$/, '  its request id');

    my $a = sdk('anthropic-unknown', $any->{key});
    is($a->{status}, 404, 'anthropic SDK, an unknown path: NotFoundError');
    ok(ref $a->{error} eq 'HASH', '  a JSON error');

    is_deeply([ $a->{error}{type}, $a->{error}{error}{type} ],
              [ 'error', 'not_found_error' ], "  Anthropic's not_found_error");
    is($a->{request_id}, $a->{x_request_id}, '  _request_id, as x-request-id');
}

# --- mockllm's own ---------------------------------------------------------

my $mock = "http://127.0.0.1:$s->{LLMGW_MOCK_PORT}";

$r = $http->get("$mock/v1/models");
is_deeply([ map { $_->{id} } @{ json($r)->{data} // [] } ],
          [ qw(mock-claude-sonnet-4 mock-claude-3-5-haiku mock-gpt-4o-mini
               mock-gpt-4o) ], "mockllm's models, OpenAI's list");
$r = $http->get("$mock/v1/models",
                { headers => { 'anthropic-version' => '2023-06-01' } });
is_deeply([ @{ json($r) }{qw(has_more first_id last_id)} ],
          [ JSON::PP::false, 'mock-claude-sonnet-4', 'mock-gpt-4o' ],
          "  Anthropic's");
$r = $http->get("$mock/v1/models/nope",
                { headers => { 'anthropic-version' => '2023-06-01' } });
is_deeply([ $r->{status}, json($r)->{error}{type} ], [ 404, 'not_found_error' ],
          '  an unknown id: not_found_error');
$r = http_post("$mock/v1/messages/count_tokens",
               { model => 'm', messages => $msg, stream => JSON::PP::true });
is($r->{status}, 400, 'mockllm count_tokens: stream refused');
$r = http_post("$mock/v1/messages/count_tokens",
               { model => 'm', system => 'Be brief.', messages => $msg },
               'x-mock-prompt-tokens' => 77);
is(json($r)->{input_tokens}, 77, '  x-mock-prompt-tokens counts');

$ng->no_alerts();

done_testing();
