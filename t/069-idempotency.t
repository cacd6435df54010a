#!/usr/bin/perl

# Idempotency-Key: the same request again, by a client that got no answer,
# is served the first one's response (or joins it while it runs) and is
# billed once; the same key with another body is refused; a failure is
# not a result, and runs again.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use HTTP::Tiny;
use IO::Socket::INET;
use JSON::PP;
use LLMGW;
use Test::More;
use Time::HiRes qw(sleep time);

stack();

my $t = new_tenant(tier => 'big');
my $other = new_tenant(tier => 'big');

# a quota no test reaches: only for its counters of what it was sent
my $mock = mockllm('-D', 1000000000);

my $ng = nginx(http => <<"EOF")->run();
    %%GATEWAY%%
    llm_gateway_tier  big  unpriced=allow tpm=100000000 burst=100000000;

    llm_gateway_idempotency  zone=idem:1m retain=10s max_size=64k;

    server {
        listen  127.0.0.1:%%PORT%%;

        location = /v1/chat/completions {
            llm_gateway  zone=llm;
            proxy_pass   http://127.0.0.1:$mock->{port};
        }

        # the request is freed only once the client has closed
        location = /linger/v1/chat/completions {
            lingering_close    always;
            keepalive_timeout  0;
            llm_gateway        zone=llm;
            proxy_pass         http://127.0.0.1:$mock->{port}/v1/chat/completions;
        }
    }
EOF

my $http = HTTP::Tiny->new(timeout => 30);

sub sent { decode_json($http->get("$mock->{url}/limits")->{content})->{requests} }

sub ask {
    my ($key, $body, %h) = @_;
    return http_post($ng->url('/v1/chat/completions'), $body,
                     authorization => "Bearer " . ($h{tenant} // $t)->{key},
                     'x-mock-tokens' => 5,
                     ($key ? ('idempotency-key' => $key) : ()),
                     %{ $h{headers} // {} });
}

my $body = { model => 'm', max_tokens => 20,
             messages => [ { role => 'user', content => 'hello' } ] };

sub rows { scalar(@{ usage_rows($_[0]->{headers}{'x-request-id'}, $_[1] // 2) }) }


###############################################################################
# a whole answer, again

my $first = ask('k1', $body);
is($first->{status}, 200, 'the first request with a key: 200');
is(rows($first), 1, 'recorded once');
my $n = sent();

my $again = ask('k1', $body);
is($again->{status}, 200, 'the same key and body again: 200');
is($again->{content}, $first->{content}, 'the first response, byte for byte');
is($again->{headers}{'idempotent-replayed'}, 'true', 'Idempotent-Replayed');
is(sent(), $n, 'not sent upstream again');
is(rows($again, 0.5), 0, 'not recorded: billed once');
my $k1_kept = time();

my $r = ask('k1', { %$body, max_tokens => 21 });
is($r->{status}, 422, 'the same key with another body: 422');
is(decode_json($r->{content})->{error}{code}, 'idempotency_key_reused',
   'idempotency_key_reused');

$r = ask('k1', $body, tenant => $other);
is($r->{status}, 200, "another tenant's same key: its own request");
ok(!$r->{headers}{'idempotent-replayed'}, 'not a replay');
isnt($r->{content}, $first->{content}, 'its own answer');

$r = ask('x' x 256, $body);
is($r->{status}, 400, 'a key of 256 characters: 400');
is(decode_json($r->{content})->{error}{code}, 'invalid_idempotency_key',
   'invalid_idempotency_key');


###############################################################################
# a stream, joined while it runs

my $stream = { %$body, stream => JSON::PP::true };
$n = sent();

my @r = burst($ng->url('/v1/chat/completions'), 3, $stream,
              { authorization => "Bearer $t->{key}", 'idempotency-key' => 'k2',
                'x-mock-tokens' => 10, 'x-mock-delay-ms' => 50 },
              timeout => 10);

is(join(' ', map { $_->{status} } @r), '200 200 200', 'three at once: 200');
is(sent(), $n + 1, 'one request went upstream');
is(scalar(grep { $_->{headers}{'idempotent-replayed'} } @r), 2,
   'two joined it');
is(scalar(grep { $_->{body} eq $r[0]{body} } @r), 3,
   'all three got the same stream');
like($r[0]{body}, qr/tok10 .*\[DONE\]/s, 'a whole stream');
is(scalar(grep { defined $_->{closed} } @r), 3, 'each ended with it');

sleep(0.2);
is(ask('k2', $stream)->{headers}{'idempotent-replayed'}, 'true',
   'and once it ended, a replay of it');


###############################################################################
# a failure is not a result; a result expires

$r = ask('k3', $body, headers => { 'x-mock-status' => 500 });
is($r->{status}, 500, 'a request that failed: 500');

$n = sent();
$r = ask('k3', $body);
is($r->{status}, 200, 'its key again: it runs');
ok(!$r->{headers}{'idempotent-replayed'}, 'not a replay of the failure');
is(sent(), $n + 1, 'sent upstream');

# The failure's client has all of it while its request lives on (here
# nginx lingers until the client closes; elsewhere another worker takes
# the retry first): the key is free from the failure's last byte.
{
    my $json = encode_json($body);
    my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                  PeerPort => $ng->port, Timeout => 5)
        or die "connect: $!";
    print $c "POST /linger/v1/chat/completions HTTP/1.1\r\n"
             . "Host: 127.0.0.1\r\nContent-Type: application/json\r\n"
             . "Authorization: Bearer $t->{key}\r\n"
             . "Idempotency-Key: k4\r\nx-mock-status: 500\r\n"
             . 'Content-Length: ' . length($json) . "\r\n\r\n$json";

    my ($got, $buf) = ('');
    while (sysread($c, $buf, 65536)) {
        $got .= $buf;
    }
    like($got, qr{^HTTP/1.1 500 }, 'a failure, read to its end');

    $n = sent();
    $r = http_post($ng->url('/linger/v1/chat/completions'), $body,
                   authorization => "Bearer $t->{key}", 'x-mock-tokens' => 5,
                   'idempotency-key' => 'k4');
    is($r->{status}, 200, 'its key again while its request lingers: it runs');
    ok(!$r->{headers}{'idempotent-replayed'}, 'not a replay of the failure');
    is(sent(), $n + 1, 'sent upstream');

    close($c);
}

# retain is long enough for what comes before, on a busy machine too
sleep(0.1) while time() < $k1_kept + 10.2;

$n = sent();
$r = ask('k1', $body);
ok(!$r->{headers}{'idempotent-replayed'}, 'after retain=10s, a key is new');
is(sent(), $n + 1, 'and its request runs');

$ng->no_alerts();

done_testing();
