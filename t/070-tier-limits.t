#!/usr/bin/perl

# A tier's other limits: requests per minute and requests in flight, taken
# with the tokens under one lock, all or nothing.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use IO::Socket::INET;
use JSON::PP;
use LLMGW;
use Test::More;
use Time::HiRes qw(sleep);

stack();

my $few = new_tenant(tier => 'few');
my $one = new_tenant(tier => 'one');

my $ng = nginx(http => <<'EOF')->run();
    %%GATEWAY%%
    llm_gateway_tier  few  unpriced=allow tpm=600000 rpm=3;
    llm_gateway_tier  one  unpriced=allow tpm=600000 concurrency=1;

    server {
        listen  127.0.0.1:%%PORT%%;

        location = /v1/chat/completions {
            llm_gateway  zone=llm;
            proxy_pass   http://127.0.0.1:%%MOCK%%;
        }
    }
EOF

my $body = { model => 'm', max_tokens => 10,
             messages => [ { role => 'user', content => 'x' } ] };

sub ask {
    my ($t) = @_;
    return http_post($ng->url('/v1/chat/completions'), $body,
                     authorization => "Bearer $t->{key}",
                     'x-mock-tokens' => 2);
}

# rpm=3: three requests, then one every 20 s

for my $i (1 .. 3) {
    my $r = ask($few);
    is($r->{status}, 200, "request $i of 3: 200");
    is($r->{headers}{'x-ratelimit-remaining-requests'}, 3 - $i,
       "request $i: x-ratelimit-remaining-requests");
}

my $r = ask($few);
is($r->{status}, 429, 'the fourth request in the minute: 429');

my $j = decode_json($r->{content});
is_deeply([ @{ $j->{error} }{qw(type code)} ],
          [ 'requests', 'rate_limit_exceeded' ], 'the requests limit');
is($r->{headers}{'x-ratelimit-limit-requests'}, 3,
   'x-ratelimit-limit-requests');
my $ra = $r->{headers}{'retry-after'} // 0;
ok($ra == 20 || $ra == 19, "Retry-After is the 20 s a request takes ($ra)");

is(scalar(@{ usage_rows($r->{headers}{'x-request-id'}, 0) }), 0,
   'a refused request leaves no row');

# concurrency=1: a slow stream holds the one slot

my $json = encode_json({ %$body, stream => JSON::PP::true });
my $slow = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                 PeerPort => $ng->port) or die;
print $slow "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
    . "Authorization: Bearer $one->{key}\r\n"
    . "x-mock-tokens: 10\r\nx-mock-delay-ms: 100\r\n"
    . "Content-Type: application/json\r\nConnection: close\r\n"
    . "Content-Length: " . length($json) . "\r\n\r\n$json";

my $head = '';
while ($head !~ /tok1 /) {
    $slow->sysread($head, 4096, length $head) or last;
}

$r = ask($one);
is($r->{status}, 429, 'a second request while one streams: 429');
is(decode_json($r->{content})->{error}{code}, 'concurrency_limit_exceeded',
   'concurrency_limit_exceeded');
is($r->{headers}{'retry-after'}, 1, 'Retry-After 1: retry shortly');

1 while $slow->sysread($head, 4096, length $head);
close($slow);

like($head, qr/\[DONE\]/, 'the stream ran to its end');

# the slot is given back as the request ends, a moment after its last byte
my $again;
for (1 .. 50 * time_scale()) {
    $again = ask($one)->{status};
    last if $again == 200;
    sleep(0.1);
}
is($again, 200, 'once it ended, the slot is free again');

$ng->no_alerts();

done_testing();
