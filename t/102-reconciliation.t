#!/usr/bin/perl

# What sets the ledger beside a provider's bill: each row names the
# provider key its backend uses, the upstream's id for the response and
# the model the upstream said it ran (a provider answers an alias with its
# dated model), in every dialect, streamed or not, translated too; names
# that are not clean are not kept.  llm.provider_usage() gives the figures
# per backend, provider key, UTC day and upstream model, the estimated rows
# apart, to the operators only.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use DBI;
use LLMGW;
use Test::More;

my $s = stack();
my $t = new_tenant(tier => 'pro');
my $m = mockllm();
my $odd = LLMGW::Nginx::free_port();

# unique to this file: the shared ledger has other files' rows
my $pa = "proj-a-$$";
my $pb = "console-b-$$";
my $dated = "mock-gpt-4o-mini-2024-07-18";

# an upstream whose answer names itself in what is no clean name
my $odd_body = '{"id":"chatcmpl x\"1","object":"chat.completion",'
    . '"created":1,"model":"mock-gpt<b>","choices":[{"index":0,'
    . '"message":{"role":"assistant","content":"x"},'
    . '"finish_reason":"stop"}],'
    . '"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}';

my $ng = nginx(pass_mock => 0, http => <<"EOF")->run();
    %%GATEWAY%%
    llm_gateway_tier  pro  tpm=100000000 burst=100000000;
    llm_gateway_pass_headers  x-mock-*;

    llm_gateway_backend  oai   upstream=mock api=openai provider_key=$pa;
    llm_gateway_backend  ant   upstream=mock api=anthropic provider_key=$pb;
    llm_gateway_backend  resp  upstream=mock api=responses;
    llm_gateway_backend  odd   upstream=odd api=openai provider_key=$pa;

    upstream mock { server 127.0.0.1:$m->{port}; }
    upstream odd { server 127.0.0.1:$odd; }

    llm_gateway_role  mock-gpt-4o-mini       oai   model=mock-gpt-4o-mini;
    llm_gateway_role  mock-claude-3-5-haiku  ant   model=mock-claude-3-5-haiku;
    llm_gateway_role  mock-gpt-4o-mini-r     resp  model=mock-gpt-4o-mini;
    llm_gateway_role  mock-gpt-4o-mini-odd   odd   model=mock-gpt-4o-mini;

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

    server {
        listen       127.0.0.1:$odd;
        default_type application/json;

        location = /v1/chat/completions {
            return 200 '$odd_body';
        }
    }
EOF

sub ask {
    my ($path, $model, $stream, %h) = @_;
    my $body = { model => $model, max_tokens => 20, stream => $stream
                 ? JSON::PP::true : JSON::PP::false };

    if ($path eq '/v1/responses') {
        $body->{input} = 'hi';
        $body->{max_output_tokens} = delete $body->{max_tokens};
    } else {
        $body->{messages} = [ { role => 'user', content => 'hi' } ];
    }

    return http_post($ng->url($path), $body,
                     authorization => "Bearer $t->{key}",
                     'x-mock-tokens' => 4, %h);
}

sub row_of {
    my ($r) = @_;
    return usage_row($r->{headers}{'x-request-id'} // '') // {};
}

sub said {
    my ($row) = @_;
    return [ map { $row->{$_} }
             qw(backend provider_key response_id upstream_model) ];
}

# --- each dialect, whole and streamed ------------------------------------------

my $r = ask('/v1/chat/completions', 'mock-gpt-4o-mini', 0,
            'x-mock-model' => $dated);
is($r->{status}, 200, 'Chat, a body: 200') or diag($r->{content});
my $j = json_body($r) // {};
is($j->{model}, $dated, '  the upstream named its dated model');
my $row = row_of($r);
is_deeply(said($row), [ 'oai', $pa, $j->{id}, $dated ],
          '  its row: the backend, the provider key, the response id the '
          . 'client got, the dated model');
is($row->{model}, 'mock-gpt-4o-mini', '  and the model the client called');
like($row->{response_id} // '', qr/^chatcmpl-mock-\d+$/, '  chatcmpl-...');

$r = ask('/v1/chat/completions', 'mock-gpt-4o-mini', 1,
         'x-mock-model' => $dated);
is($r->{status}, 200, 'Chat, a stream: 200');
my ($chunk_id) = $r->{content} =~ /"id":"(chatcmpl-[^"]+)"/;
is_deeply(said(row_of($r)), [ 'oai', $pa, $chunk_id, $dated ],
          '  its row: the id of its chunks, the dated model');

$r = ask('/v1/messages', 'mock-claude-3-5-haiku', 1);
is($r->{status}, 200, 'Messages, a stream: 200');
my ($msg_id) = $r->{content} =~ /"message":\{"id":"(msg_[^"]+)"/;
is_deeply(said(row_of($r)),
          [ 'ant', $pb, $msg_id, 'mock-claude-3-5-haiku' ],
          '  its row: the id of message_start, its model');

$r = ask('/v1/messages', 'mock-claude-3-5-haiku', 0);
$j = json_body($r) // {};
is_deeply(said(row_of($r)), [ 'ant', $pb, $j->{id}, 'mock-claude-3-5-haiku' ],
          'Messages, a body: the same');

$r = ask('/v1/responses', 'mock-gpt-4o-mini-r', 1, 'x-mock-model' => $dated);
is($r->{status}, 200, 'Responses, a stream: 200') or diag($r->{content});
$row = row_of($r);
like($row->{response_id} // '', qr/^resp_mock_/, '  its row: resp_...');
is_deeply([ @{ said($row) }[0, 1, 3] ], [ 'resp', undef, $dated ],
          '  a backend without provider_key: none');

# translated: the provider's id and model, not what the client was shown
$r = ask('/v1/chat/completions', 'mock-claude-3-5-haiku', 1);
is($r->{status}, 200, 'Chat to an Anthropic backend, a stream: 200');
$row = row_of($r);
like($row->{response_id} // '', qr/^msg_mock_/,
     '  its row: the Anthropic upstream\'s own id');
is_deeply([ @{ said($row) }[0, 1, 3] ], [ 'ant', $pb, 'mock-claude-3-5-haiku' ],
          '  its backend, key and model');

# a stream without its usage: estimated, its id all the same
$r = ask('/v1/chat/completions', 'mock-gpt-4o-mini', 1,
         'x-mock-model' => $dated, 'x-mock-no-usage' => 1);
$row = row_of($r);
ok(($row->{flags} // 0) & 1, 'no usage: the row is estimated');
is($row->{upstream_model}, $dated, '  and names the dated model');

# --- what is not a clean name is not kept --------------------------------------

$r = ask('/v1/chat/completions', 'mock-gpt-4o-mini-odd', 0);
is($r->{status}, 200, 'an upstream with an odd id and model: 200');
is_deeply(said(row_of($r)), [ 'odd', $pa, undef, undef ],
          '  neither is kept: NULL, not a client-visible string in the '
          . 'ledger');

# --- beside the provider's report ----------------------------------------------

my $today = db()->selectrow_array(
    q{SELECT (now() AT TIME ZONE 'UTC')::date::text});

sub connect_as {
    my ($user) = @_;
    return DBI->connect("dbi:Pg:dbname=llmgw;host=127.0.0.1;"
                        . "port=$s->{LLMGW_PG_PORT}", $user, '',
                        { RaiseError => 1, AutoCommit => 1, PrintError => 0,
                          PrintWarn => 0 });
}

my $ops = connect_as('llmgw_ops');
my $rows = $ops->selectall_hashref(q{
    SELECT backend || ' ' || coalesce(provider_key, '-') || ' ' || model
           AS k, *
      FROM llm.provider_usage(?::date, ?::date + 1)
     WHERE provider_key IN (?, ?)}, 'k', undef, $today, $today, $pa, $pb);

my $g = $rows->{"oai $pa $dated"} // {};
is_deeply([ @$g{qw(day requests exact_requests estimated_requests)} ],
          [ $today, 3, 2, 1 ],
          "provider_usage: oai, $pa, $dated: 3 requests, 2 exact, 1 "
          . 'estimated');
is($g->{output_tokens}, $g->{exact_output_tokens}
                        + $g->{estimated_output_tokens},
   '  the output: exact + estimated');
is($g->{exact_output_tokens}, 8, '  the exact part: the upstream\'s 4 + 4');
is_deeply([ @{ $rows->{"ant $pb mock-claude-3-5-haiku"} // {} }
            {qw(requests exact_requests without_id)} ], [ 3, 3, 0 ],
          '  ant: the two Messages and the translated one, each with its id');
is(($rows->{"odd $pa mock-gpt-4o-mini"} // {})->{without_id}, 1,
   '  odd: under the model asked for, counted without an id');
ok(($g->{cost_usd} // 0) > 0, '  and what it cost');

# the day after: nothing, and only that day's partition is read
is_deeply($ops->selectall_arrayref(q{
    SELECT * FROM llm.provider_usage(?::date + 1, ?::date + 2)
     WHERE provider_key IN (?, ?)}, undef, $today, $today, $pa, $pb), [],
    '  the next day: nothing');

for my $who ('accountd') {
    my $h = connect_as($who);
    ok(!eval { $h->do(q{SELECT * FROM llm.provider_usage(now()::date,
                                                          now()::date + 1)}) }
       && $h->state eq '42501', "as $who: refused (42501)");
}

# the columns' checks bind new rows
my $db = db();
ok(!eval { $db->do(q{INSERT INTO llm.usage (request_id, tenant_id, model,
                         api, input_tokens, output_tokens, ts, response_id)
                     VALUES (?, ?, 'm', 'openai', 1, 1, now(), ?)}, undef,
                   "t102-long-$$", $t->{id}, 'x' x 65) }
   && $db->state eq '23514', 'a response_id of 65 bytes: refused (23514)');

# --- the directive -------------------------------------------------------------

for my $c ([ 'provider_key=', 'empty' ],
           [ 'provider_key=' . ('k' x 65), '65 bytes' ],
           [ 'provider_key=a"b', 'a quote' ]) {
    my $bad = nginx(http => <<"EOF");
    %%GATEWAY%%
    llm_gateway_tier     pro  tpm=1000;
    llm_gateway_backend  b    $c->[0];
EOF
    my ($rc, $out) = $bad->test();
    ok($rc != 0 && $out =~ /invalid parameter/,
       "nginx -t refuses provider_key: $c->[1]");
}

$ng->no_alerts();

done_testing();
