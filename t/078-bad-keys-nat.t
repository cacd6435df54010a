#!/usr/bin/perl

# The bad-key limit behind a NAT or a proxy.  With realip (set_real_ip_from,
# real_ip_header) it counts the forwarded address, not the proxy's; and an
# address locked by one client's bad keys still has a valid key of another
# served, its keys looked up a few a second (llm_gateway_bad_keys checks=),
# so that the lockout still bounds an attacker's HMAC work.  checks=0 is
# the strict lockout: no key looked up at all.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use LLMGW;
use Test::More;

my $s = stack();
my $ok = new_tenant(tier => 'pro');

my $ng = nginx(http => <<'EOF')->run();
    %%GATEWAY%%
    llm_gateway_tier  pro  unpriced=allow tpm=600000;

    llm_gateway_zone  zone=nat:1m;
    llm_gateway_zone  zone=strict:1m;

    server {
        listen  127.0.0.1:%%PORT%%;

        # the proxy in front: its X-Forwarded-For is the client's address
        set_real_ip_from  127.0.0.1;
        real_ip_header    X-Forwarded-For;

        location = /v1/chat/completions {
            llm_gateway           zone=nat;
            llm_gateway_bad_keys  3 window=60s;
            proxy_pass            http://127.0.0.1:%%MOCK%%;
        }

        location = /v1/strict {
            llm_gateway           zone=strict;
            llm_gateway_bad_keys  3 window=60s checks=0;
            proxy_pass            http://127.0.0.1:%%MOCK%%/v1/chat/completions;
        }
    }
EOF

sub ask {
    my ($path, $from, $key) = @_;
    return http_post($ng->url($path),
                     { model => 'mock-a', max_tokens => 5,
                       messages => [ { role => 'user', content => 'hi' } ] },
                     authorization => "Bearer $key",
                     'x-forwarded-for' => $from);
}

sub code {
    my ($r) = @_;
    return "$r->{status} " . ((json_body($r) // {})->{error}{code} // '-');
}

for my $path ('/v1/chat/completions', '/v1/strict') {
    for my $i (1 .. 3) {
        is(code(ask($path, '10.1.1.1', forge_key())), '401 invalid_api_key',
           "$path: bad key $i of 3 from 10.1.1.1: 401");
    }

    is(code(ask($path, '10.1.1.1', forge_key())), '429 too_many_bad_keys',
       "$path: the 4th from 10.1.1.1: 429");
    is(code(ask($path, '10.2.2.2', forge_key())), '401 invalid_api_key',
       "$path: a bad key from 10.2.2.2, behind the same proxy: 401, its "
       . 'own count');
}

# the locked address: a valid key is served, a bad one still refused
my $r = ask('/v1/chat/completions', '10.1.1.1', $ok->{key});
is($r->{status}, 200, 'a valid key from the locked 10.1.1.1: 200');
is(code(ask('/v1/chat/completions', '10.1.1.1', forge_key())),
   '429 too_many_bad_keys', '  a bad key from it: still 429');
is(code(ask('/v1/chat/completions', '10.1.1.1', $ok->{key})), '200 -',
   '  and the valid key again: 200');

# checks=0: no key of a locked address is looked up
is(code(ask('/v1/strict', '10.1.1.1', $ok->{key})), '429 too_many_bad_keys',
   'checks=0: the valid key from the locked address: 429');
is(code(ask('/v1/strict', '10.2.2.2', $ok->{key})), '200 -',
   'checks=0: the valid key from 10.2.2.2: 200');

my $bad = nginx(http => <<'EOF');
    %%GATEWAY%%
    llm_gateway_tier      pro  unpriced=allow tpm=600000;
    llm_gateway_bad_keys  3 checks=x;
EOF
my ($rc, $out) = $bad->test();
isnt($rc, 0, 'nginx -t refuses checks=x');
like($out, qr/invalid checks "checks=x"/, 'and says which');

$ng->no_alerts();

done_testing();
