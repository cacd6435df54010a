#!/usr/bin/perl

# Every path releases its reservation exactly once: after client aborts,
# upstream failures, streams cut by the upstream, and a reload with streams
# in flight, a tenant with two concurrency slots has exactly two again.

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

my $two = new_tenant(tier => 'two');

my $ng = nginx(http => <<'EOF')->run();
    %%GATEWAY%%
    llm_gateway_tier  two  unpriced=allow tpm=6000000 concurrency=2;

    server {
        listen  127.0.0.1:%%PORT%%;

        location = /v1/chat/completions {
            llm_gateway  zone=llm;
            proxy_pass   http://127.0.0.1:%%MOCK%%;
        }
    }
EOF

my $json = encode_json({ model => 'm', max_tokens => 50, stream => JSON::PP::true,
                         messages => [ { role => 'user', content => 'x' } ] });

# a raw streaming request; returns the socket once the first token came
sub stream {
    my (%h) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                  PeerPort => $ng->port) or die;
    print $s "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
        . "Authorization: Bearer $two->{key}\r\n"
        . join('', map { "$_: $h{$_}\r\n" } sort keys %h)
        . "Content-Type: application/json\r\nConnection: close\r\n"
        . "Content-Length: " . length($json) . "\r\n\r\n$json";
    return $s;
}

sub wait_for {
    my ($s, $re) = @_;
    my $got = '';
    while ($got !~ $re) {
        $s->sysread($got, 4096, length $got) or last;
    }
    return $got;
}

sub drain {
    my ($s) = @_;
    my $got = '';
    1 while $s->sysread($got, 4096, length $got);
    close($s);
    return $got;
}

# [ what happens, headers for the mock, how the client behaves ]
my @paths = (
    [ 'the client goes away mid-stream',
      { 'x-mock-tokens' => 40, 'x-mock-delay-ms' => 20 }, 'abort' ],
    [ 'the upstream answers 500', { 'x-mock-status' => 500 }, 'read' ],
    [ 'the upstream answers 429', { 'x-mock-status' => 429 }, 'read' ],
    [ 'the upstream dies mid-stream', { 'x-mock-tokens' => 40,
      'x-mock-die-after' => 3 }, 'read' ],
    [ 'a malformed frame', { 'x-mock-tokens' => 5, 'x-mock-malformed' => 1 },
      'read' ],
    [ 'no usage at all', { 'x-mock-tokens' => 5, 'x-mock-no-usage' => 1 },
      'read' ],
    [ 'a stream that ends well', { 'x-mock-tokens' => 5 }, 'read' ],
);

for my $round (1 .. 3) {
    for my $p (@paths) {
        my ($name, $h, $how) = @$p;
        my $s = stream(%$h);

        if ($how eq 'abort') {
            wait_for($s, qr/tok1 /);
            close($s);

        } else {
            drain($s);
        }
    }
}

pass('21 requests over every way a request ends');

# two streams in flight across a reload: the old workers settle them
# (after the last slots are given back: nginx settles a request after its
# client has all of it)
sleep(0.3);

my @held = map { stream('x-mock-tokens' => 20, 'x-mock-delay-ms' => 50) }
           1 .. 2;
wait_for($_, qr/tok1 /) for @held;

$ng->reload();

like(drain($_), qr/\[DONE\]/, 'a stream across the reload ends well')
    for @held;

sleep(0.3);

# exactly two slots: two slow streams in, a third refused
my @slow = map { stream('x-mock-tokens' => 10, 'x-mock-delay-ms' => 50) }
           1 .. 2;
my @first = map { wait_for($_, qr/\r\n\r\n/) } @slow;
like($_, qr/^HTTP\/1.1 200/, 'a slot is free') for @first;

my $third = drain(stream('x-mock-tokens' => 1));
like($third, qr/^HTTP\/1.1 429.*concurrency_limit_exceeded/s,
     'a third request while both slots are held: 429');

drain($_) for @slow;
sleep(0.2);

like(drain(stream('x-mock-tokens' => 1)), qr/^HTTP\/1.1 200/,
     'and both slots came back');

$ng->no_alerts();

done_testing();
