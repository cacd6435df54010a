#!/usr/bin/perl

# accountd goes away and comes back: the workers keep the records they could
# not send, reconnect by themselves and deliver them, each exactly once.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use LLMGW;
use Test::More;
use Time::HiRes qw(sleep);

my $s = stack();

# it stops accountd: an accountd of its own, the stack's runs on for the
# files beside it
own_accountd();

my $pro = new_tenant(tier => 'pro');

my $ng = nginx(http => <<'EOF')->run();
    %%GATEWAY%%
    llm_gateway_tier  pro  unpriced=allow tpm=600000;

    server {
        listen  127.0.0.1:%%PORT%%;

        location = /v1/chat/completions {
            llm_gateway  zone=llm;
            proxy_pass   http://127.0.0.1:%%MOCK%%;
        }
    }
EOF

sub ask {
    my $r = http_post($ng->url('/v1/chat/completions'),
                      { model => 'mock-gpt-4o-mini', max_tokens => 10,
                        messages => [ { role => 'user', content => 'hi' } ] },
                      authorization => "Bearer $pro->{key}",
                      'x-mock-tokens' => 3);
    return $r->{headers}{'x-request-id'} // '';
}

my $before = ask();
ok(usage_row($before), 'a row while accountd runs');

ok(accountd_stop(), 'accountd stopped');

# both workers get requests while accountd is away
my @away = map { ask() } 1 .. 6;
is(scalar(grep { length } @away), 6, 'the gateway serves on without it');

sleep(1.5);

accountd_start() or die 'accountd did not start again';

for my $id (@away) {
    my $rows = usage_rows($id, 10);
    is(scalar(@$rows), 1, "request $id: exactly one row once accountd is back");
}

is(scalar(@{ usage_rows($before, 0) }), 1, 'and the earlier row is not doubled');

$ng->no_alerts();

done_testing();
