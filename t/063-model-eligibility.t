#!/usr/bin/perl

# Every model a request may end up on is one its key and tier may call and
# pay for: a role's backends (the first chosen and any failover), and a
# tier's downgrade.  A key limited to a cheap model is never served (nor
# billed) a pricey one by a failover; a role whose first backend's model
# the key may not call is served by one it may; a downgrade to a model the
# key may not call, or that has no price, is no downgrade, and the refusal
# does not say it was downgraded; when a spend cap or a price rules out
# the other backends, the refusal says so.  And the gateway's diagnostic
# headers, which name backends, are off unless llm_gateway_diagnostics
# turns them on, for everyone or for an admin network.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use HTTP::Tiny;
use JSON::PP;
use LLMGW;
use Test::More;
use Time::HiRes qw(sleep);

my $s = stack();

my $cheap = "cheap-$$";
my $pricey = "pricey-$$";
my $free = "unpriced-$$";

# cheap: $1 and $2 a million tokens; pricey: $1,000: 10 tokens of it cost
# more than the capped tenants' whole cap of 1 cent
db()->do(q{INSERT INTO llm.prices (model, effective_from, input_per_mtok,
                                   output_per_mtok)
           VALUES (?, '2000-01-01', 1000000, 2000000),
                  (?, '2000-01-01', 1000000000, 1000000000)
           ON CONFLICT DO NOTHING}, undef, $cheap, $pricey);

my $b = mockllm();

# providers whose daily quota (1 token) is spent at once, until a reset an
# hour away: a role's first request to one fails over, the next skip it
my @spent = qw(mixed tiered capped unpriced strict admin refused later);
my %spent = map { $_ => mockllm('-D', 1, '-P', 3600) } @spent;

# soon: a quota of 1 token a "day" of 10 s, spent by its first request
my $soon = mockllm('-D', 1, '-P', 10);

my $backends = "    llm_gateway_backend  soon;\n"
    . "    upstream soon { server 127.0.0.1:$soon->{port}; }\n"
    . join('', map {
    "    llm_gateway_backend  spent-$_;\n"
    . "    upstream spent-$_ { server 127.0.0.1:$spent{$_}{port}; }\n"
} @spent);

# keys: limited to cheap; allowed the role by name; any model; another
my $narrow = new_tenant(tier => 'open', args => [ '--models', $cheap ]);
my $byrole = new_tenant(tier => 'open', args => [ '--models', 'mixed' ]);
my $any = new_tenant(tier => 'open');
my $other = new_tenant(tier => 'open', args => [ '--models', "x-$$" ]);

# a tier that lets its keys call cheap only
my $tiered = new_tenant(tier => 'onlycheap');

# a tier that serves priced models only
my $strict = new_tenant(tier => 'strict');

# spend caps of 1 cent: they pay for cheap, never for pricey
my $capped = new_tenant(tier => 'open');
my $dg_narrow = new_tenant(tier => 'dg', args => [ '--models', $pricey ]);
my $dg_any = new_tenant(tier => 'dg');
my $dg_free = new_tenant(tier => 'dgfree');

for my $t ($capped, $dg_narrow, $dg_any, $dg_free) {
    accountd('tenant', 'update', '--name', $t->{name},
             '--daily-cap-usd', '0.01');
    snapshot_caps($s->{LLMGW_KEY_SNAPSHOT}, $t->{key_id}, 't');
}

my $role = sub {
    my ($name, $first, $second) = @_;
    return "    llm_gateway_role  $name  spent-$name  model=$first"
        . "  priority=1;\n"
        . "    llm_gateway_role  $name  $second->[0]  model=$second->[1]"
        . "  priority=2;\n";
};

# each: the cheap model first, on a backend whose quota is spent; the
# pricey one, or one without a price, when it refuses
my $roles = join('',
    $role->('mixed', $cheap, [ 'b-prod-key2', $pricey ]),
    $role->('tiered', $cheap, [ 'b-prod-key2', $pricey ]),
    $role->('capped', $cheap, [ 'b-prod-key2', $pricey ]),
    $role->('unpriced', $cheap, [ 'c', $free ]),
    $role->('strict', $cheap, [ 'c', $free ]),
    $role->('admin', $cheap, [ 'b-prod-key2', $pricey ]),
    $role->('refused', $cheap, [ 'b-prod-key2', $pricey ]),
    $role->('later', $cheap, [ 'soon', $pricey ]),
    "    llm_gateway_role  prime  soon  model=$pricey;\n");

my $loc = sub {
    my ($path, $diag) = @_;
    my $proxy = $path eq '' ? 'http://$llm_upstream'
                            : 'http://$llm_upstream/v1/chat/completions';
    $diag = $diag ? "\n            llm_gateway_diagnostics  $diag;" : '';
    return <<"EOF";
        location = $path/v1/chat/completions {
            llm_gateway       zone=llm api=openai backend=c;$diag
            proxy_pass        $proxy;
            proxy_set_header  x-mock-tokens 5;
        }
EOF
};

my $locations = join("\n", $loc->(''), $loc->('/admin', '127.0.0.0/8 ::1'),
                     $loc->('/other', '10.0.0.0/8'), $loc->('/on', 'on'));

my $ng = nginx(diagnostics => 0, http => <<"EOF")->run();
    %%GATEWAY%%
    llm_gateway_tier  open       tpm=100000000;
    llm_gateway_tier  onlycheap  tpm=100000000 models=$cheap;
    llm_gateway_tier  strict     tpm=100000000 unpriced=refuse;
    llm_gateway_tier  dg         tpm=100000000 downgrade=$cheap;
    llm_gateway_tier  dgfree     tpm=100000000 downgrade=$free;

$backends
    llm_gateway_backend  b-prod-key2  upstream=b;
    llm_gateway_backend  c            upstream=b;
    llm_gateway_backend  q-secret-1   upstream=b rpm=1 queue=0;
    llm_gateway_role     paced        q-secret-1 model=$cheap;

    upstream b { server 127.0.0.1:$b->{port}; }

$roles
    # reversed: the pricey model first, the cheap one second
    llm_gateway_role  reversed  b-prod-key2  model=$pricey  priority=1;
    llm_gateway_role  reversed  c            model=$cheap   priority=2;

    server {
        listen  127.0.0.1:%%PORT%%;

$locations
    }
EOF

sub ask {
    my ($t, $model, $path) = @_;
    return http_post($ng->url(($path // '') . '/v1/chat/completions'),
                     { model => $model, max_tokens => 10,
                       messages => [ { role => 'user', content => 'hi' } ] },
                     authorization => "Bearer $t->{key}");
}

sub err { (json_body($_[0]) // {})->{error} // {} }

sub billed {
    my ($r) = @_;
    my $id = $r->{headers}{'x-request-id'} // return [];
    return [ map { $_->{model} } @{ usage_rows($id) } ];
}

sub billed_as {
    my ($r, $model) = @_;
    return scalar(grep { $_ eq $model } @{ billed($r) });
}

sub requests {
    my ($m) = @_;
    my $r = HTTP::Tiny->new->get("$m->{url}/limits");
    return $r->{success} ? decode_json($r->{content})->{requests} : -1;
}

# the gateway reconnects to accountd within its backoff: a capped
# tenant's first request waits for its lease
my $r;
for (1 .. 50) {
    $r = ask($capped, $cheap);
    last if $r->{status} == 200;
    sleep(0.1);
}
is($r->{status}, 200, 'a capped tenant: cheap is served');


###############################################################################
# failover: never to a model the key or tier may not call

my $sent = requests($b);

$r = ask($narrow, 'mixed');
isnt($r->{status}, 200, "a key limited to $cheap: the failover to $pricey "
                        . "is not served");
is(err($r)->{code}, 'insufficient_quota',
   'the reason: the one backend it may use is spent');
like(err($r)->{message}, qr/ Left out: 1 backend whose model this API key or its tier may not call\.$/,
     'and the other may not serve it: ' . (err($r)->{message} // ''));
unlike($r->{content}, qr/spent-mixed|b-prod-key2/,
       'naming no backend (diagnostics are off)');
ok(!billed_as($r, $pricey), "nothing billed as $pricey")
    or diag explain billed($r);
is(requests($b), $sent, "nothing sent to the backend of $pricey");

$r = ask($byrole, 'mixed');
is($r->{status}, 200, 'a key allowed the role by name: served by the other');
is_deeply(billed($r), [ $pricey ], "billed as $pricey");

$r = ask($any, 'mixed');
is($r->{status}, 200, 'a key allowed any model: served');

$r = ask($tiered, 'tiered');
isnt($r->{status}, 200, "a tier that allows $cheap only: not served $pricey");
ok(!billed_as($r, $pricey), "nothing billed as $pricey");


# a backend that is down and that the key could not use anyway does not
# set the time to come back: soon (pricey) is back in 10 s, the cheap one
# the key may use in an hour
is(ask($any, 'prime')->{status}, 429, 'soon: spent by its first request');
$r = ask($narrow, 'later');
is(err($r)->{code}, 'insufficient_quota', 'later: refused');
cmp_ok($r->{headers}{'retry-after'} // 0, '>', 60,
       'Retry-After: when the backend the key may use is back, not the '
       . 'other (' . ($r->{headers}{'retry-after'} // '-') . ' s)');
like(err($r)->{message}, qr/ Left out: 1 backend whose model this API key/,
     'the other is left out, and why');


###############################################################################
# the first backend: one the key may call, if the role has one

$r = ask($narrow, 'reversed');
is($r->{status}, 200, 'a role whose first model the key may not call: '
                      . 'served by the one it may');
is((json_body($r) // {})->{model}, $cheap, "the upstream got $cheap");
is_deeply(billed($r), [ $cheap ], "billed as $cheap");

$r = ask($other, 'reversed');
is($r->{status}, 403, 'a role none of whose models the key may call: 403');
is(err($r)->{code}, 'model_not_allowed', 'model_not_allowed');
like(err($r)->{message}, qr/^No backend of "reversed" can serve this request\. Left out: 2 backends whose model this API key or its tier may not call\.$/,
     'saying why: ' . (err($r)->{message} // ''));
ok(!defined $r->{headers}{'retry-after'}, 'with no time to retry at');


###############################################################################
# prices: a failover is held to the cap and to unpriced=refuse

$sent = requests($b);

$r = ask($capped, 'capped');
isnt($r->{status}, 200, 'a cap of 1 cent: no failover to pricey');
like(err($r)->{message}, qr/ Left out: 1 backend whose model costs more than the spend cap held for the request\.$/,
     'the real reason: ' . (err($r)->{message} // ''));
ok(!billed_as($r, $pricey), 'nothing billed as pricey');

$r = ask($capped, 'unpriced');
isnt($r->{status}, 200, 'a cap: no failover to a model without a price');
ok(!billed_as($r, $free), 'nothing served on the unpriced model');
is(requests($b), $sent, 'nothing sent to the other backends');

$r = ask($strict, 'strict');
isnt($r->{status}, 200, 'unpriced=refuse: no failover to a model without '
                        . 'a price');
like(err($r)->{message}, qr/ Left out: 1 backend whose model has no price/,
     'saying so: ' . (err($r)->{message} // ''));
is(requests($b), $sent, 'nothing sent');


###############################################################################
# downgrade: to a model the key may call and the cap pays for, or none

$r = ask($dg_any, $pricey);
is($r->{status}, 200, 'a cap that cannot pay for pricey: downgraded');
is($r->{headers}{'x-llm-downgraded-from'}, $pricey, 'and says so');
is_deeply(billed($r), [ $cheap ], "billed as $cheap");

$r = ask($dg_narrow, $pricey);
is($r->{status}, 429, "a key that may call $pricey only: no downgrade to "
                      . "$cheap, 429");
is(err($r)->{code}, 'insufficient_quota', 'insufficient_quota');
ok(!defined $r->{headers}{'x-llm-downgraded-from'},
   'no x-llm-downgraded-from');
ok(!billed_as($r, $cheap), "nothing served as $cheap");

$r = ask($dg_free, $pricey);
is($r->{status}, 429, 'a downgrade model without a price: 429');
is(err($r)->{code}, 'insufficient_quota', 'insufficient_quota');
ok(!defined $r->{headers}{'x-llm-downgraded-from'},
   'without a downgrade header that is not true');


###############################################################################
# diagnostics: backend names only where turned on

$r = ask($any, 'reversed');
is($r->{status}, 200, 'served');
ok(!defined $r->{headers}{'x-llmgw-backend'},
   'by default no x-llmgw-backend');

$r = ask($any, 'admin');
is($r->{status}, 200, 'served after a failover');
ok(!defined $r->{headers}{'x-llmgw-failover'}, 'no x-llmgw-failover');
ok(!defined $r->{headers}{'x-llmgw-backend'}, 'nor x-llmgw-backend');

$r = ask($any, 'refused', '/admin');
is($r->{headers}{'x-llmgw-backend'}, 'b-prod-key2',
   'for an admin network: x-llmgw-backend');
is($r->{headers}{'x-llmgw-failover'}, 'spent-refused=insufficient_quota',
   'and x-llmgw-failover');

$r = ask($any, 'reversed', '/other');
ok(!defined $r->{headers}{'x-llmgw-backend'},
   'a client outside the admin network: none');

$r = ask($any, 'reversed', '/on');
is($r->{headers}{'x-llmgw-backend'}, 'b-prod-key2', 'on: for everyone');

# the pacer's refusal: one start a minute, no queue
is(ask($any, 'paced')->{status}, 200, 'paced: the first starts');
$r = ask($any, 'paced');
is(err($r)->{code}, 'provider_rate_limited', 'the second is refused');
unlike($r->{content}, qr/q-secret-1/, 'naming no backend: '
                                      . (err($r)->{message} // ''));
$r = ask($any, 'paced', '/on');
like(err($r)->{message}, qr/"q-secret-1"/,
     'where diagnostics are on, it does');

$ng->no_alerts();

done_testing();
