#!/usr/bin/perl

# Keys at the gate: three header styles, one identical 401 for every bad
# key, expiry enforced by nginx itself, models a key may call, the key kept
# from the upstream, and the $llm_* variables in the access log.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use LLMGW;
use Test::More;
use Time::HiRes qw(sleep);
use Time::Local qw(timegm);

my $s = stack();

# nginx loads the snapshot when it starts: every key is made first
my $ok = new_tenant(tier => 'pro');
my $gone = new_tenant(tier => 'pro');
my $brief = new_tenant(tier => 'pro', args => [ '--expires-in', '2s' ]);
my $narrow = new_tenant(tier => 'pro', args => [ '--models', 'mock-a,mock-b' ]);
my $basic = new_tenant(tier => 'basic');

accountd('key', 'revoke', key_id($gone));

my $ng = nginx(http => <<'EOF')->run();
    %%GATEWAY%%
    llm_gateway_tier  pro    unpriced=allow tpm=600000;
    llm_gateway_tier  basic  unpriced=allow tpm=600000 models=mock-b,mock-a-2024;

    llm_gateway_zone    zone=strict:1m;

    llm_gateway_alias   chat-default  mock-a-2024;
    llm_gateway_sunset  mock-a-2024   2027-01-31 deprecated=2026-10-01;

    log_format  llm  'tenant=$llm_tenant key=$llm_key_id tier=$llm_tier '
                     'model=$llm_model id=$llm_request_id '
                     'in=$llm_input_tokens out=$llm_output_tokens '
                     'finish=$llm_finish_reason';

    server {
        listen  127.0.0.1:%%PORT%%;

        access_log  %%NGINX%%/llm.log llm;

        location = /v1/chat/completions {
            llm_gateway  zone=llm;
            proxy_pass   http://127.0.0.1:%%MOCK%%;
        }

        # few bad keys allowed, counted in a zone of its own
        location = /v1/strict {
            llm_gateway           zone=strict;
            llm_gateway_bad_keys  3 window=60s;
            proxy_pass            http://127.0.0.1:%%MOCK%%/v1/chat/completions;
        }

        # what an upstream would see of the client's credentials
        location = /v1/echo {
            llm_gateway  zone=llm;
            proxy_pass   http://127.0.0.1:%%PORT%%/seen;
        }

        location = /seen {
            return  200 "[$http_authorization][$http_x_api_key][$http_api_key]";
        }
    }
EOF

sub key_id {
    my ($t) = @_;
    return db()->selectrow_array(
        'SELECT key_id FROM llm.api_keys WHERE tenant_id = ?', undef, $t->{id});
}

sub ask {
    my ($path, $model, %h) = @_;
    return http_post($ng->url($path),
                     { model => $model // 'mock-a', max_tokens => 10,
                       messages => [ { role => 'user', content => 'hi' } ] },
                     'x-mock-tokens' => 3, %h);
}

# [ header style ]
for my $h ([ authorization => "Bearer $ok->{key}" ],
           [ 'x-api-key' => $ok->{key} ],
           [ 'api-key' => $ok->{key} ])
{
    my $r = ask('/v1/chat/completions', undef, @$h);
    is($r->{status}, 200, "the key in $h->[0]: 200");
}

my $malformed = $ok->{key};
substr($malformed, -1, 1) = substr($malformed, -1) eq 'A' ? 'B' : 'A';

sleep(2.1);    # $brief has expired by now, with no reload

# [ case, headers ]
my @bad = (
    [ 'no key', [] ],
    [ 'not a Bearer credential', [ authorization => 'Basic dXNlcjpwYXNz' ] ],
    [ 'a wrong checksum', [ authorization => "Bearer $malformed" ] ],
    [ 'a key never issued', [ authorization => 'Bearer ' . forge_key() ] ],
    [ 'a revoked key', [ authorization => "Bearer $gone->{key}" ] ],
    [ 'an expired key', [ 'x-api-key' => $brief->{key} ] ],
);

my (%bodies, $r);

for my $c (@bad) {
    my ($name, $h) = @$c;
    my $r = ask('/v1/chat/completions', undef, @$h);
    is($r->{status}, 401, "$name: 401");
    $bodies{$r->{content}}++;
}

is(scalar(keys %bodies), 1, 'every 401 has the byte-identical body');
like((keys %bodies)[0], qr/"code":"invalid_api_key"/, 'invalid_api_key');

# Bad keys from one address: past the limit, 429 until the window ends;
# a valid key behind the same address is still served (t/078).

for my $i (1 .. 3) {
    $r = ask('/v1/strict', undef, authorization => 'Bearer ' . forge_key());
    is($r->{status}, 401, "bad key $i of 3: 401");
}

for my $key (forge_key(), forge_key()) {
    $r = ask('/v1/strict', undef, authorization => "Bearer $key");
    is($r->{status}, 429, 'past the limit: 429');
    is((json_body($r) // {})->{error}{code}, 'too_many_bad_keys',
       'too_many_bad_keys');
    my $ra = $r->{headers}{'retry-after'} // 0;
    ok($ra >= 1 && $ra <= 60, "Retry-After within the window ($ra)");
}

$r = ask('/v1/strict', undef, authorization => "Bearer $ok->{key}");
is($r->{status}, 200, 'a valid key from the locked address: 200');

# Models a key may call.

$r = ask('/v1/chat/completions', 'mock-b',
         authorization => "Bearer $narrow->{key}");
is($r->{status}, 200, 'an allowed model: 200');

$r = ask('/v1/chat/completions', 'mock-c',
         authorization => "Bearer $narrow->{key}");
is($r->{status}, 403, 'a model the key may not call: 403');

my $j = json_body($r) // {};
is_deeply([ @{ $j->{error} // {} }{qw(type code param)} ],
          [ 'permission_error', 'model_not_allowed', 'model' ],
          'model_not_allowed');
like($j->{error}{message} // '', qr/"mock-c"/, 'the message names the model');

# A tier may limit its models too: the key and the tier must both allow.

$r = ask('/v1/chat/completions', 'mock-b',
         authorization => "Bearer $basic->{key}");
is($r->{status}, 200, 'a model the tier allows: 200');

$r = ask('/v1/chat/completions', 'mock-c',
         authorization => "Bearer $basic->{key}");
is($r->{status}, 403, 'a model the tier does not allow: 403');

$r = ask('/v1/chat/completions', 'chat-default',
         authorization => "Bearer $basic->{key}");
is($r->{status}, 200, 'an alias whose model the tier allows: 200');

# An alias: the upstream and the ledger see the pinned model, and the answer
# says when that model goes away.

$r = ask('/v1/chat/completions', 'chat-default',
         authorization => "Bearer $ok->{key}");
is($r->{status}, 200, 'an alias: 200');
is((json_body($r) // {})->{model}, 'mock-a-2024',
   'the upstream was asked for the pinned model');
is((usage_row($r->{headers}{'x-request-id'} // '') // {})->{model},
   'mock-a-2024', 'the ledger names the pinned model');
is($r->{headers}{deprecation}, '@' . timegm(0, 0, 0, 1, 9, 2026),
   'Deprecation: @<unix time> (RFC 9745)');
is($r->{headers}{sunset}, 'Sun, 31 Jan 2027 00:00:00 GMT',
   'Sunset: <HTTP-date> (RFC 8594)');

$r = ask('/v1/chat/completions', 'chat-default',
         authorization => "Bearer $narrow->{key}");
is($r->{status}, 403, 'an alias of a model the key may not call: 403');

# The upstream never sees the client's key, whichever header carried it.

for my $h ([ authorization => "Bearer $ok->{key}" ],
           [ 'x-api-key' => $ok->{key} ],
           [ 'api-key' => $ok->{key} ])
{
    $r = ask('/v1/echo', undef, @$h);
    is($r->{content}, '[][][]', "the key in $h->[0] does not reach upstream");
}

# The variables, as the access log writes them.

$r = ask('/v1/chat/completions', 'mock-a',
         authorization => "Bearer $ok->{key}");
my $id = $r->{headers}{'x-request-id'};
my $kid = key_id($ok);

$ng->stop();

my ($line) = grep { /id=$id / } split(/\n/, slurp($ng->dir() . '/llm.log'));
is($line, "tenant=$ok->{name} key=$kid tier=pro model=mock-a id=$id "
          . 'in=7 out=3 finish=stop', 'the $llm_* variables');

# No issued key in any log, at any level, but for nginx's own debug dump of
# the request headers as they arrived ("http header:"), which no module can
# silence: debug logging is not for production traffic.

my $logs = join('', grep { !/\[debug\] .* http header: "/ }
                    map { split(/^/m, slurp($_)) }
                    glob($ng->dir() . '/*.log'),
                    "$s->{LLMGW_DIR}/accountd.log");
for my $t ($ok, $gone, $brief, $narrow, $basic) {
    unlike($logs, qr/\Q$t->{key}\E/, "$t->{name}'s key is in no log");
}

$ng->no_alerts();

done_testing();

sub slurp {
    open(my $fh, '<', $_[0]) or return '';
    local $/;
    return <$fh>;
}
