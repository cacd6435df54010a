#!/usr/bin/perl

# Models without a price, for tenants without a spend cap, would be free.
# A tier refuses them unless it says unpriced=allow: it asks accountd for
# the model's price and refuses one it has none for (403
# model_not_priced); a priced model is served.  Requests on a model the
# gateway knows to be unpriced are counted, with their tokens, in
# llmgw_unpriced_total by tenant, whatever the tier.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use HTTP::Tiny;
use LLMGW;
use Test::More;
use Time::HiRes qw(sleep);

my $s = stack();

# it stops accountd: an accountd of its own, the stack's runs on for the
# files beside it
own_accountd();

my $priced = "mock-priced-$$";
my $free = "mock-unpriced-$$";

db()->do(q{INSERT INTO llm.prices (model, effective_from, input_per_mtok,
                                   output_per_mtok)
           VALUES (?, '2000-01-01', 1000000, 2000000)
           ON CONFLICT DO NOTHING}, undef, $priced);

my $strict = new_tenant(tier => 'strict');
my $said = new_tenant(tier => 'said');
my $open = new_tenant(tier => 'open');

my $ng = nginx(http => <<'EOF')->run();
    %%GATEWAY%%
    llm_gateway_tier  strict  tpm=600000;
    llm_gateway_tier  said    tpm=600000 unpriced=refuse;
    llm_gateway_tier  open    tpm=600000 unpriced=allow;

    server {
        listen  127.0.0.1:%%PORT%%;

        location = /v1/chat/completions {
            llm_gateway       zone=llm;
            proxy_pass        http://127.0.0.1:%%MOCK%%;
            proxy_set_header  x-mock-tokens 5;
        }

        location = /metrics {
            llm_gateway_metrics;
        }
    }
EOF

sub ask {
    my ($t, $model) = @_;
    return http_post($ng->url('/v1/chat/completions'),
                     { model => $model, max_tokens => 10,
                       messages => [ { role => 'user', content => 'hi' } ] },
                     authorization => "Bearer $t->{key}");
}

sub unpriced {
    my ($t, $kind) = @_;
    my $m = HTTP::Tiny->new->get($ng->url('/metrics'))->{content} // '';
    return $m =~ /^llmgw_unpriced_total\{zone="llm",tenant="\Q$t->{name}\E",
                  tier="\Q$t->{tier}\E",kind="$kind"\}\ (\d+)$/mx ? $1 : undef;
}

# the gateway reconnects to accountd within its backoff
my $r;
for (1 .. 50) {
    $r = ask($strict, $priced);
    last if $r->{status} == 200;
    sleep(0.1);
}
is($r->{status}, 200, 'a tier that says nothing: a priced model, 200');

$r = ask($strict, $free);
is($r->{status}, 403, '  a model without a price, 403');
my $j = json_body($r) // {};
is_deeply([ @{ $j->{error} // {} }{qw(type code param)} ],
          [ 'permission_error', 'model_not_priced', 'model' ],
          '  model_not_priced');
like($j->{error}{message} // '', qr/"\Q$free\E" has no price/,
     '  the message names the model');
is($r->{headers}{'x-should-retry'}, 'false', '  x-should-retry: false');

$r = ask($said, $free);
is($r->{status}, 403, 'unpriced=refuse: 403 as well');
is((json_body($r) // {})->{error}{code}, 'model_not_priced',
   '  model_not_priced');

# a tier that allows it serves it, and counts it
$r = ask($open, $free);
is($r->{status}, 200, 'unpriced=allow: 200');
my $row = usage_row($r->{headers}{'x-request-id'} // '');
ok($row && !defined $row->{cost_pusd}, '  its ledger row has no cost');

$r = ask($open, $priced);
is($r->{status}, 200, '  and a priced model: 200');

my $tokens = 0;
for (1 .. 50) {
    last if (unpriced($open, 'requests') // 0) >= 1;
    sleep(0.05);
}
is(unpriced($open, 'requests'), 1,
   'llmgw_unpriced_total{kind="requests"}: the one unpriced request');
is(unpriced($open, 'tokens'), 7 + 5,
   'llmgw_unpriced_total{kind="tokens"}: its 7 in and 5 out');
is(unpriced($strict, 'requests'), 0, '  none for the tier that refused');

# a hostile client's other names for an unpriced model, on the default
# tier: none is served free
sub served_free {
    my ($r) = @_;
    return 0 if $r->{status} != 200;
    my $row = usage_row($r->{headers}{'x-request-id'} // '') // {};
    return !defined $row->{cost_pusd};
}

my $raw = sub {
    my ($body) = @_;
    return http_post($ng->url('/v1/chat/completions'), $body,
                     authorization => "Bearer $strict->{key}",
                     'content-type' => 'application/json');
};
my $msgs = '"messages":[{"role":"user","content":"hi"}],"max_tokens":5';
for my $c ([ 'the priced name in capitals', uc $priced ],
           [ 'a trailing space', "$priced " ],
           [ 'a control character', "$priced\x01" ],
           [ 'a NUL', "$priced\x00x" ],
           [ 'the unpriced name', $free ]) {
    my $r = ask($strict, $c->[1]);
    ok(!served_free($r), "model: $c->[0]: not served free ($r->{status})");
}
for my $c ([ 'the model named twice, priced first',
             qq({"model":"$priced","model":"$free",$msgs}) ],
           [ 'the model named twice, unpriced first',
             qq({"model":"$free","model":"$priced",$msgs}) ],
           [ 'the name escaped', '{"model":"\\u006d' . substr($free, 1)
                                 . qq(",$msgs}) ],
           [ 'n of 4', qq({"model":"$free","n":4,$msgs}) ]) {
    my $r = $raw->($c->[1]);
    ok(!served_free($r), "$c->[0]: not served free ($r->{status})");
}

# a role whose first backend fails: the failover's model, another one,
# has its price known by then (asked about at admission), and is served
my $second = "mock-priced-b-$$";
db()->do(q{INSERT INTO llm.prices (model, effective_from, input_per_mtok,
                                   output_per_mtok)
           VALUES (?, '2000-01-01', 1000000, 2000000)
           ON CONFLICT DO NOTHING}, undef, $second);
my $failing = LLMGW::Nginx::free_port();
my $fo = nginx(http => <<"EOF")->run();
    %%GATEWAY%%
    llm_gateway_tier  strict  tpm=600000;
    llm_gateway_tier  said    tpm=600000 unpriced=refuse;
    llm_gateway_tier  open    tpm=600000 unpriced=allow;

    %%UPSTREAM%%
    upstream failing { server 127.0.0.1:$failing; }

    llm_gateway_backend  first   upstream=failing api=openai failures=0;
    llm_gateway_backend  second  upstream=mock api=openai;
    llm_gateway_role     fo-$$   first   model=$priced  priority=1;
    llm_gateway_role     fo-$$   second  model=$second  priority=2;

    server {
        listen  127.0.0.1:%%PORT%%;

        location = /v1/chat/completions {
            llm_gateway       zone=llm api=openai;
            proxy_pass        http://\$llm_upstream\$llm_upstream_uri;
            proxy_set_header  x-mock-tokens 5;
        }
    }

    server {
        listen  127.0.0.1:$failing;

        location / {
            proxy_set_header  x-mock-status 500;
            proxy_pass        http://mock;
        }
    }
EOF

my $fo_ask = sub {
    return http_post($fo->url('/v1/chat/completions'),
                     { model => "fo-$$", max_tokens => 10,
                       messages => [ { role => 'user', content => 'hi' } ] },
                     authorization => "Bearer $strict->{key}");
};
$fo_ask->();
sleep(0.2);
$r = $fo_ask->();
is($r->{status}, 200, 'a role\'s failover to another priced model, on the '
                      . 'default tier: 200') or diag($r->{content});
is((usage_row($r->{headers}{'x-request-id'} // '') // {})->{model}, $second,
   '  served and billed as the second backend\'s model');
$fo->no_alerts();
$fo->stop();

# made-up model names, each answered "no price", take at most half the
# places the zone keeps prices in (32): the priced model's stays, and with
# accountd gone a strict tenant is still served it from what the zone knows
for my $i (1 .. 40) {
    my $name = "made-up-$$-$i";
    for (1 .. 50) {
        last if ask($strict, $name)->{status} == 403;
        sleep(0.05);
    }
}
is(ask($strict, "made-up-$$-40")->{status}, 403,
   '40 made-up models: each refused once accountd said it has no price');

ok(accountd_stop(), 'accountd stopped');
$r = ask($strict, $priced);
is($r->{status}, 200, 'the priced model is still known: 200, without '
                      . 'accountd')
    or diag($r->{content});

# a model the zone has no word on is not served while accountd cannot say
$r = ask($strict, "never-asked-$$");
is($r->{status}, 503, 'a model never asked about, without accountd: 503');
is((json_body($r) // {})->{error}{code}, 'price_unavailable',
   '  price_unavailable: not served free meanwhile');
is(unpriced($strict, 'requests'), 0, '  and nothing counted unpriced');
ok(accountd_start(), 'accountd started again');

my $bad = nginx(http => <<'EOF');
    %%GATEWAY%%
    llm_gateway_tier  strict  tpm=600000 unpriced=maybe;
EOF
my ($rc, $out) = $bad->test();
isnt($rc, 0, 'nginx -t refuses unpriced=maybe');
like($out, qr/invalid parameter "unpriced=maybe"/, 'and says which');

$ng->no_alerts();

done_testing();
