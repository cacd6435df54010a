#!/usr/bin/perl

# OpenAI's POST /v1/embeddings through the gateway (api=embeddings):
# embeddings.create() of the official openai package with a string,
# strings, token arrays and base64, each leaving one row priced at the
# model's input price, api 'embeddings', no output; admitted by the
# input's estimate (TPM, RPM, concurrency, a spend cap, the tier's models)
# before the upstream is called; bodies OpenAI refuses refused 400 naming the member;
# and mockllm's vectors: deterministic, unit length, of the dimensions
# asked for, base64 the same float32s little-endian.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use HTTP::Tiny;
use JSON::PP;
use LLMGW;
use MIME::Base64 qw(decode_base64);
use POSIX qw(ceil);
use Test::More;

my $s = stack();
my $embed = "$s->{LLMGW_BUILD}/sdk/embed.mjs";

plan(skip_all => 'the SDKs are not installed (make sdk)') unless -f $embed;

# text-embedding-3-small's $0.02 and -large's $0.13 a million input tokens:
# 20,000 and 130,000 p$ a token; no output price
my %price = ('mock-embed' => 20_000, 'mock-embed-large' => 130_000);

db()->do(q{INSERT INTO llm.prices (model, effective_from, input_per_mtok,
                                   output_per_mtok)
           VALUES (?, '2000-01-01', ?, 0) ON CONFLICT DO NOTHING},
         undef, $_, $price{$_}) for sort keys %price;

my $pro = new_tenant(tier => 'pro');
my $bad = new_tenant(tier => 'pro');
my $small = new_tenant(tier => 'small');
my $rl = new_tenant(tier => 'rl');
my $only = new_tenant(tier => 'only');
my $one = new_tenant(tier => 'one');
my $capped = new_tenant(tier => 'pro');

# 10,000,000 p$: 500 tokens of mock-embed
accountd('tenant', 'update', '--name', $capped->{name}, '--daily-cap-usd',
         '0.00001');
snapshot_caps($s->{LLMGW_KEY_SNAPSHOT}, $capped->{key_id}, 't');

# /v1/embeddings from %%APIS%%, for the SDK; /t/v1/embeddings tells the
# mock which tenant it serves, so that its /stats say whether it was called
my $ng = nginx(http => <<'EOF')->run();
    %%GATEWAY%%
    %%UPSTREAM%%
    llm_gateway_tier  pro    tpm=6000000;
    llm_gateway_tier  small  tpm=100  burst=100;
    llm_gateway_tier  rl     tpm=6000000  rpm=2;
    llm_gateway_tier  only   tpm=6000000  models=mock-embed;
    llm_gateway_tier  one    tpm=6000000  concurrency=1;

    # the gateway reads bodies in memory: 8193 tokens are some 16 KB
    client_body_buffer_size  1m;

    server {
        listen  127.0.0.1:%%PORT%%;

        %%APIS%%

        location = /t/v1/embeddings {
            llm_gateway       zone=llm api=embeddings;
            proxy_pass        http://mock/v1/embeddings;
            proxy_set_header  x-mock-tenant $llm_tenant;
        }

        # a list larger than the buffer is read from its end
        location = /big/v1/embeddings {
            llm_gateway                  zone=llm api=embeddings;
            llm_gateway_response_buffer  64k;
            proxy_max_temp_file_size     0;
            proxy_pass                   http://mock/v1/embeddings;
        }
    }
EOF

my $mock = "http://127.0.0.1:$s->{LLMGW_MOCK_PORT}";
my $http = HTTP::Tiny->new(timeout => 30, keep_alive => 0);

sub sdk {
    my ($t, $body) = @_;
    local $ENV{LLMGW_URL} = $ng->url();
    local $ENV{LLMGW_KEY} = $t->{key};
    local $ENV{EMBED_BODY} = encode_json($body);
    my $out = `node $embed 2>&1`;
    my $j = eval { decode_json((split(/\n/, $out))[-1]) };
    diag($out) unless $j;
    return $j // {};
}

sub post {
    my ($t, $body, %h) = @_;
    my $r = http_post($ng->url('/t/v1/embeddings'), $body,
                      authorization => "Bearer $t->{key}", %h);
    return ($r, json_body($r) // {});
}

sub mock_post {
    my ($body, %h) = @_;
    my $r = http_post("$mock/v1/embeddings", $body, %h);
    return ($r, json_body($r) // {});
}

# the most requests of the tenant the mock ever had in flight: 0, never
# called
sub mock_calls {
    my ($t) = @_;
    my $r = $http->get("$mock/stats/$t->{name}");
    return (json_body($r) // {})->{max_inflight};
}

sub norm {
    my $n = 0;
    $n += $_ * $_ for @{ $_[0] };
    return sqrt($n);
}

# the most a prompt of strings can be: a token a byte
sub bound {
    my $n = 0;
    for (@_) {
        utf8::encode(my $b = $_);
        $n += length($b);
    }
    return $n;
}

sub f32 { [ unpack('f<*', pack('f<*', @{ $_[0] })) ] }

sub b64 { [ unpack('f<*', decode_base64($_[0])) ] }

# the mock's count, and the gateway's estimate: ceil(bytes / 4) a string
sub est {
    my $n = 0;
    for (@_) {
        utf8::encode(my $b = $_);
        $n += ceil(length($b) / 4);
    }
    return $n;
}

# --- embeddings.create(): one priced row each ---------------------------------

my $food = 'The food was delicious and the waiter was kind.';
my @words = ('alpha', 'beta gamma', "\x{3b4}\x{3b5}\x{3bb}\x{3c4}\x{3b1}");

my @calls = (
    # [ what, body, inputs, dimensions, tokens, encoding the SDK returns ]
    [ 'a string, the SDK choosing base64 and decoding it',
      { model => 'mock-embed', input => $food }, 1, 1536, est($food),
      'numbers' ],
    [ 'an array of strings, float',
      { model => 'mock-embed', input => \@words, encoding_format => 'float' },
      3, 1536, est(@words), 'numbers' ],
    [ 'token arrays, 256 dimensions',
      { model => 'mock-embed', input => [ [ 1, 2, 3 ], [ 4, 5 ] ],
        dimensions => 256 }, 2, 256, 5, 'numbers' ],
    [ 'tokens, base64 asked for',
      { model => 'mock-embed-large', input => [ 15339, 1917, 0 ],
        encoding_format => 'base64' }, 1, 3072, 3, 'base64' ],
);

my %vectors;

for my $c (@calls) {
    my ($what, $body, $n, $dims, $tokens, $enc) = @$c;
    my $got = sdk($pro, $body);

    is($got->{error}, undef, "$what: no error");
    is($got->{object}, 'list', "$what: a list");
    is(scalar(@{ $got->{data} // [] }), $n, "$what: $n embeddings");

    my @v = map { $enc eq 'base64' ? b64($_->{embedding}) : $_->{embedding} }
            @{ $got->{data} // [] };

    is_deeply([ map { scalar(@$_) } @v ], [ ($dims) x $n ],
              "$what: $dims dimensions each");
    is(scalar(grep { abs(norm($_) - 1) < 1e-5 } @v), $n,
       "$what: each of unit length");
    is_deeply([ map { $_->{index} } @{ $got->{data} // [] } ], [ 0 .. $n - 1 ],
              "$what: indexed in order");
    is_deeply($got->{usage}, { prompt_tokens => $tokens,
                               total_tokens => $tokens },
              "$what: usage $tokens tokens");

    my $rows = usage_rows($got->{id} // '');
    is(scalar(@$rows), 1, "$what: one row");
    my $u = $rows->[0] // {};
    is_deeply([ @$u{qw(tenant_id api model status input_tokens output_tokens
                       estimated partial)} ],
              [ $pro->{id}, 'embeddings', $body->{model}, 200, $tokens, 0, 0,
                0 ], "$what: api embeddings, $tokens in, 0 out");
    is($u->{cost_pusd}, $tokens * $price{ $body->{model} },
       "$what: cost $tokens x $price{ $body->{model} } p\$");

    $vectors{$what} = \@v;
}

# the SDK's floats are the mock's, whether sent as base64 or as numbers
my (undef, $direct) = mock_post({ model => 'mock-embed', input => $food });
is_deeply(f32($vectors{ $calls[0][0] }[0]),
          f32($direct->{data}[0]{embedding} // []),
          'base64 decoded by the SDK: the float32s the mock sends as numbers');

my $sdk_err = sdk($pro, { model => 'mock-embed', input => [] });
is_deeply([ @$sdk_err{qw(error status param)} ],
          [ 'BadRequestError', 400, 'input' ],
          'an empty input: the SDK raises BadRequestError, param input');

# --- what is metered: the upstream's count, or the estimate -------------------

my ($r, $j) = post($pro, { model => 'mock-embed', input => 'hello there' },
                   'x-mock-prompt-tokens' => 7);
is($r->{status}, 200, 'upstream reports 7 prompt tokens: 200');
my $u = usage_row($r->{headers}{'x-request-id'} // '') // {};
is_deeply([ @$u{qw(input_tokens output_tokens estimated cost_pusd)} ],
          [ 7, 0, 0, 7 * 20_000 ],
          '  metered by the upstream\'s 7, not the estimate of 3');

($r, $j) = post($pro, { model => 'mock-embed', input => 'hello there' },
                'x-mock-no-usage' => 1);
is($r->{status}, 200, 'no usage in the answer: 200');
ok(!exists $j->{usage}, '  and indeed none');
$u = usage_row($r->{headers}{'x-request-id'} // '') // {};
is_deeply([ @$u{qw(input_tokens output_tokens estimated cost_pusd)} ],
          [ 11, 0, 1, 11 * 20_000 ],
          '  the bound, a token a byte (11; the estimate is 3), flagged '
          . 'estimated: the upstream counted it all');

# a list of 10 vectors of 1536 floats, some 190 KB, past a buffer of 64 KB:
# its usage is read from its end
my @ten = map { "input number $_" } 1 .. 10;

for my $c ([ 'its usage', {}, est(@ten), 0 ],
           [ 'the upstream\'s 4321', { 'x-mock-prompt-tokens' => 4321 }, 4321,
             0 ],
           [ 'no usage: the bound', { 'x-mock-no-usage' => 1 }, bound(@ten),
             1 ],
           [ 'cut: the bound', { 'x-mock-die-after' => 1 }, bound(@ten), 1 ])
{
    my ($what, $h, $in, $estimated) = @$c;
    my $r = raw_post($ng->url('/big/v1/embeddings'),
                     { model => 'mock-embed', input => \@ten,
                       encoding_format => 'float' },
                     { authorization => "Bearer $pro->{key}", %$h });
    ok(length($r->{body}) > 64 * 1024,
       "a list larger than the buffer, $what: " . length($r->{body})
       . ' bytes' . ($r->{complete} ? '' : ', cut'));
    my $u = usage_row($r->{headers}{'x-request-id'} // '') // {};
    is_deeply([ @$u{qw(input_tokens output_tokens estimated)} ],
              [ $in, 0, $estimated ],
              "  metered $in" . ($estimated ? ', estimated' : ''));
}

# --- bodies OpenAI refuses: 400, the member named, never upstream -------------

my @bad = (
    [ 'no input', { model => 'mock-embed' }, 'input' ],
    [ 'an empty string', { model => 'mock-embed', input => '' }, 'input' ],
    [ 'an empty array', { model => 'mock-embed', input => [] }, 'input' ],
    [ 'an empty string in the array',
      { model => 'mock-embed', input => [ 'a', '' ] }, 'input' ],
    [ '2049 inputs', { model => 'mock-embed', input => [ ('a') x 2049 ] },
      'input' ],
    [ '8193 tokens in one input',
      { model => 'mock-embed', input => [ (7) x 8193 ] }, 'input' ],
    [ '300001 tokens in all',
      { model => 'mock-embed',
        input => [ ([ (7) x 8192 ]) x 36, [ (7) x 5089 ] ] }, 'input' ],
    [ 'a token not an integer',
      { model => 'mock-embed', input => [ 1, 2.5 ] }, 'input' ],
    [ 'a negative token', { model => 'mock-embed', input => [ [ -1 ] ] },
      'input' ],
    [ 'a token as a string', { model => 'mock-embed', input => [ [ '1' ] ] },
      'input' ],
    [ 'strings and tokens mixed',
      { model => 'mock-embed', input => [ 'a', [ 1 ] ] }, 'input' ],
    [ 'an object as input', { model => 'mock-embed', input => { a => 1 } },
      'input' ],
    [ 'a number as input', { model => 'mock-embed', input => 5 }, 'input' ],
    [ 'no model', { input => 'a' }, 'model' ],
    [ 'a model not a string', { model => 5, input => 'a' }, 'model' ],
    [ 'encoding_format int8',
      { model => 'mock-embed', input => 'a', encoding_format => 'int8' },
      'encoding_format' ],
    [ 'dimensions 0', { model => 'mock-embed', input => 'a', dimensions => 0 },
      'dimensions' ],
    [ 'dimensions "8"',
      { model => 'mock-embed', input => 'a', dimensions => '8' },
      'dimensions' ],
    [ 'user a number', { model => 'mock-embed', input => 'a', user => 5 },
      'user' ],
    [ 'an unknown member',
      { model => 'mock-embed', input => 'a', truncate => JSON::PP::true },
      'truncate' ],
    [ 'a chat member',
      { model => 'mock-embed', input => 'a', max_tokens => 5 }, 'max_tokens' ],
    # a name the client chose, in the JSON of the refusal: no quote, no
    # backslash that would end its string or add a member
    [ 'a member named with a quote and a backslash',
      { model => 'mock-embed', input => 'a',
        'a","code":"x\\' => 1 }, 'a?,?code?:?x?' ],
);

for my $c (@bad) {
    my ($what, $body, $param) = @$c;
    my ($r, $j) = post($bad, $body);

    is($r->{status}, 400, "$what: 400");
    is_deeply([ sort keys %{ $j->{error} // {} } ],
              [ qw(code message param type) ], "$what: OpenAI's error shape");
    is_deeply([ @{ $j->{error} // {} }{qw(type param)} ],
              [ 'invalid_request_error', $param ], "$what: param $param");
    ok($r->{headers}{'x-request-id'}, "$what: with x-request-id");
}

my ($repeated) = post($bad, '{"model":"mock-embed","input":"a","input":"b"}');
is($repeated->{status}, 400, 'input named twice: 400');

is(mock_calls($bad), 0, 'none of them reached the upstream');

# --- admission: TPM by the estimate, RPM, the cap, the tier's models ----------

# a bucket of 100: 101 tokens can never fit, by token array or by string
($r, $j) = post($small, { model => 'mock-embed', input => [ (7) x 101 ] });
is($r->{status}, 429, 'TPM: 101 tokens in a bucket of 100: 429');
is_deeply([ @{ $j->{error} // {} }{qw(type code param)} ],
          [ 'tokens', 'request_too_large', 'input' ],
          '  request_too_large, param input');
like($j->{error}{message} // '', qr/about 101 tokens.*capacity of 100 /,
     '  the message gives the estimate and the capacity');

($r, $j) = post($small, { model => 'mock-embed', input => 'x' x 401 });
is($r->{status}, 429, 'TPM: a string of 401 bytes, estimated 101: 429');

is(mock_calls($small), 0, '  refused before the upstream was called');

($r, $j) = post($small, { model => 'mock-embed', input => [ (7) x 100 ] });
is($r->{status}, 200, 'TPM: 100 tokens fit the bucket of 100');
is(mock_calls($small), 1, '  and reached the upstream');
is((usage_row($r->{headers}{'x-request-id'} // '') // {})->{input_tokens},
   100, '  metered 100');

# RPM: two a minute
my @st = map { (post($rl, { model => 'mock-embed', input => 'hi' }))[0]
               ->{status} } 1 .. 3;
is_deeply(\@st, [ 200, 200, 429 ], 'RPM 2: the third is refused');

# one in flight at a time: of 3 sent at once, held by the mock for 5 s
# (longer than a busy machine takes to read all three), one is served and the others refused; the mock saw one at most
my @one = burst($ng->url('/t/v1/embeddings'), 3,
                { model => 'mock-embed', input => 'hi' },
                { authorization => "Bearer $one->{key}",
                  'x-mock-ttfb-ms' => 5000 });
is_deeply([ sort map { $_->{status} } @one ], [ 200, 429, 429 ],
          'concurrency 1: of 3 at once, one served');
is(scalar(grep { ($_->{body} // '') =~ /concurrency_limit_exceeded/ } @one),
   2, '  the others concurrency_limit_exceeded');
is(mock_calls($one), 1, '  the upstream had one in flight at most');

# a cap of 500 tokens' worth: 1000 tokens cannot be paid for
($r, $j) = post($capped, { model => 'mock-embed', input => [ (7) x 1000 ] });
is($r->{status}, 429, 'a spend cap that cannot pay for the input: 429');
is(($j->{error} // {})->{code}, 'insufficient_quota', '  insufficient_quota');
is(mock_calls($capped), 0, '  refused before the upstream was called');

($r, $j) = post($capped, { model => 'mock-embed', input => [ (7) x 10 ] });
is($r->{status}, 200, 'the same cap pays for 10 tokens');
$u = usage_row($r->{headers}{'x-request-id'} // '') // {};
is_deeply([ @$u{qw(input_tokens cost_pusd)} ], [ 10, 10 * 20_000 ],
          '  10 tokens, 200,000 p$');

# the tier's models
($r, $j) = post($only, { model => 'mock-embed-large', input => 'a' });
is($r->{status}, 403, 'a model the tier does not serve: 403');
is(($j->{error} // {})->{code}, 'model_not_allowed', '  model_not_allowed');
($r, $j) = post($only, { model => 'mock-embed', input => 'a' });
is($r->{status}, 200, 'the one it serves: 200');

# --- mockllm's vectors --------------------------------------------------------

my ($m1, $e1) = mock_post({ model => 'mock-embed', input => [ 'one', 'two' ] });
my ($m2, $e2) = mock_post({ model => 'mock-embed', input => [ 'one', 'two' ] });
is($m1->{status}, 200, 'mock: 200');
is_deeply($e1->{data}, $e2->{data}, 'mock: the same input, the same vectors');
ok(!eq_array($e1->{data}[0]{embedding}, $e1->{data}[1]{embedding}),
   'mock: another input, another vector');
is_deeply([ @$e1{qw(object model)} ], [ 'list', 'mock-embed' ],
          'mock: a list, of the model asked for');
is_deeply($e1->{usage}, { prompt_tokens => 2, total_tokens => 2 },
          'mock: usage by its own count');

my (undef, $t1) = mock_post({ model => 'mock-embed', input => [ [ 1 ] ] });
my (undef, $s1) = mock_post({ model => 'mock-embed', input => [ '1' ] });
ok(!eq_array($t1->{data}[0]{embedding}, $s1->{data}[0]{embedding}),
   'mock: token 1 is not the string "1"');

my (undef, $f) = mock_post({ model => 'mock-embed', input => 'abc' });
my (undef, $b64) = mock_post({ model => 'mock-embed', input => 'abc',
                               encoding_format => 'base64' });
is_deeply(b64($b64->{data}[0]{embedding}), f32($f->{data}[0]{embedding}),
          'mock: base64 is the float32s little-endian');
is(length(decode_base64($b64->{data}[0]{embedding})), 1536 * 4,
   'mock: 1536 of them');

my (undef, $short) = mock_post({ model => 'mock-embed', input => 'abc',
                                 dimensions => 8 });
my @head = @{ $f->{data}[0]{embedding} }[0 .. 7];
my $n = norm(\@head);
ok(!grep({ abs($short->{data}[0]{embedding}[$_] - $head[$_] / $n) > 1e-6 }
         0 .. 7), 'mock: 8 dimensions are the first 8, scaled to unit');

my (undef, $large) = mock_post({ model => 'mock-embed-large', input => 'abc' });
is(scalar(@{ $large->{data}[0]{embedding} }), 3072,
   'mock: a -large model has 3072');

for my $c ([ 'dimensions above the model\'s',
             { model => 'mock-embed', input => 'a', dimensions => 1537 },
             'dimensions' ],
           [ 'dimensions for ada-002',
             { model => 'text-embedding-ada-002', input => 'a',
               dimensions => 8 }, 'dimensions' ],
           [ 'an unknown member',
             { model => 'mock-embed', input => 'a', foo => 1 }, 'foo' ],
           [ 'an empty string', { model => 'mock-embed', input => '' },
             'input' ],
           [ 'a string of 8193 tokens by its count',
             { model => 'mock-embed', input => 'x' x 32769 }, 'input' ])
{
    my ($what, $body, $param) = @$c;
    my ($r, $j) = mock_post($body);
    is_deeply([ $r->{status}, @{ $j->{error} // {} }{qw(type param)} ],
              [ 400, 'invalid_request_error', $param ],
              "mock refuses $what: 400, param $param");
}

# what the gateway cannot know, the upstream refuses: a 400 that costs
# nothing
($r, $j) = post($pro, { model => 'mock-embed', input => 'x' x 32769 });
is($r->{status}, 400, 'a string the upstream counts above 8192: its 400');
like($j->{error}{message} // '', qr/maximum context length is 8192/,
     '  the upstream\'s message');
$u = usage_row($r->{headers}{'x-request-id'} // '') // {};
is($u->{cost_pusd} // 0, 0, '  and it costs nothing');

$ng->no_alerts();

done_testing();
