#!/usr/bin/perl

# Clients and upstreams that fail, many at once: clients that go away at
# every 37th byte offset of a streamed response, its headers included, by
# a close or a reset, and clients that go away while still sending their
# request; upstreams that close, reset or stall (proxy_read_timeout 1s)
# mid-stream, cut a whole body, err, or send no usage.  Each request nginx
# settled has its one row, with what the client's leaving or the fault
# makes it; then the invariants of t/lib/Chaos.pm.
#
# LLMGW_CHAOS_LONG=1 (make chaos): every 3rd byte offset, each fault 20
# times.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Chaos;
use JSON::PP;
use List::Util qw(min);
use LLMGW;
use Test::More;
use Time::HiRes qw(sleep);

stack();

my %run = chaos_long() ? (step => 3, repeat => 20) : (step => 37, repeat => 2);

my $t = chaos_tenant(concurrency => 64, tpm => 6000000, burst => 60000);

my $ng = chaos_nginx(workers => 2, log_level => 'notice', keepalive => 16,
                     http => <<'EOF')->run();
    %%GATEWAY%%
    %%CHAOS%%
    llm_gateway_tier  chaos  unpriced=allow tpm=6000000 burst=60000 concurrency=64;

    %%UPSTREAM%%

    server {
        listen  127.0.0.1:%%PORT%%;

        # the stalls end after this
        proxy_read_timeout  1s;

        proxy_http_version  1.1;
        proxy_set_header    Connection "";
        proxy_set_header    x-mock-tenant $llm_tenant;

        %%APIS%%
    }
EOF

# [ format, path, body, finish reason ]
my @api = (
    [ 'openai', '/v1/chat/completions',
      sub { { model => $Chaos::MODEL, max_tokens => 50,
              messages => [ { role => 'user', content => 'hi' } ],
              ($_[0] ? (stream => JSON::PP::true) : ()) } }, 'stop' ],
    [ 'anthropic', '/v1/messages',
      sub { { model => $Chaos::MODEL, max_tokens => 50,
              messages => [ { role => 'user', content => 'hi' } ],
              ($_[0] ? (stream => JSON::PP::true) : ()) } }, 'end_turn' ],
    [ 'responses', '/v1/responses',
      sub { { model => $Chaos::MODEL, max_output_tokens => 50, input => 'hi',
              ($_[0] ? (stream => JSON::PP::true) : ()) } }, 'completed' ],
);

my %auth = (authorization => "Bearer $t->{key}");

# each client's rows, by its x-chaos-seq in the access log (nginx logs a
# request a moment after its client left: up to 5 s for all but those
# that never sent their whole request)
sub rows_by_client {
    my ($clients) = @_;
    for (1 .. 50) {
        my $logged = by_seq(settled($ng, all => 1));
        last unless grep { !defined $_->{send} && !$logged->{ $_->{seq} } }
                    @$clients;
        sleep(0.1);
    }
    my $logged = settled($ng);
    my $seq = by_seq($logged);
    for my $c (@$clients) {
        my $id = $seq->{ $c->{seq} };
        $c->{rows} = defined $id ? usage_rows($id, 10) : [];
        $c->{sent} = defined $id ? $logged->{$id}{sent} : 0;
    }
}

# --- clients that leave at every step-th byte of a 40-token stream ---------

my %slow = (%auth, 'x-mock-tokens' => 40, 'x-mock-delay-ms' => 10);

# How a client's one row says it ended, and whether that is right for
# where it left (it read $at bytes, $seen tokens among them):
#
#   left    client_closed, partial and estimated: the tokens it was sent,
#           held to max_tokens (50); at any byte, the response headers too
#   whole   the upstream's own figures (40 out): the gateway had read the
#           final usage before it saw the client go.  Not partial: it had
#           sent all of it, as nginx's \$bytes_sent says: the whole stream
#           less what its chunk framing can differ by (one chunk an event
#           when they come 10 ms apart, fewer when a busy worker reads
#           several at once; 8 bytes a chunk at most), and the few digits
#           of headers that vary.  Partial: a busy worker read the rest of
#           the stream, its final usage with it, in one go, and only its
#           write to the client then failed: sent is at least what the
#           client read
#   before  499, nothing charged: it left before the prompt went up, so
#           before it could read a byte
#   none    no row, nothing settled: it left before its admission (a
#           request of a capped tenant may wait for a lease), so before it
#           could read a byte
my %ended = (
    left => sub { my ($u, $at, $seen) = @_;
                  $u->{flags} == 3 && $u->{input_tokens} == $Chaos::PROMPT
                  && $u->{output_tokens} >= min(est_out($seen), 50)
                  && $u->{output_tokens} <= 50 },
    whole => sub { my ($u, $at, $seen, $sent, $len) = @_;
                   $u->{output_tokens} == 40
                   && ($u->{flags} == 0 ? $sent >= $len - 8 * 40 - 16
                       : $u->{flags} == 2 && $sent >= $at) },
    before => sub { my ($u, $at, $seen) = @_;
                    $at == 0 && $u->{status} == 499 && $u->{flags} == 0
                    && $u->{output_tokens} == 0 },
    none => sub { my ($u, $at, $seen) = @_; $at == 0 },
);

for my $a (@api) {
    my ($f, $path, $body, $fin) = @$a;

    # the whole response once, to know its length
    my ($whole) = @{ swarm($ng, [ { path => $path, body => $body->(1),
                                    headers => \%slow } ]) };
    my $len = length($whole->{raw});
    ok($len > 1000 && $whole->{raw} =~ /tok40 /,
       "$f: a whole stream is $len bytes");

    my @clients;
    for (my $at = 0; $at < $len; $at += $run{step}) {
        push(@clients, { path => $path, body => $body->(1),
                         headers => \%slow, leave_at => $at,
                         reset => @clients % 2 });
    }

    swarm($ng, \@clients);
    rows_by_client(\@clients);

    my (%how, @wrong);

    for my $c (@clients) {
        my $at = $c->{leave_at};
        my @rows = @{ $c->{rows} };
        my $u = $rows[0] // {};
        my $seen = () = $c->{raw} =~ /tok\d+ /g;

        my $how = !@rows ? 'none'
            : @rows > 1 ? 'rows: ' . scalar(@rows)
            : ($u->{finish_reason} // '') eq 'client_closed' ? 'left'
            : ($u->{finish_reason} // '') eq $fin ? 'whole'
            : $u->{status} == 499 ? 'before'
            : 'finish_reason ' . ($u->{finish_reason} // 'NULL');

        $how{$how}++;
        push(@wrong, "$at ($how, $seen tokens seen, $c->{sent} bytes sent): "
                     . encode_json({ map { $_ => $u->{$_} }
                                     qw(status flags output_tokens) }))
            unless $ended{$how}
                   && $ended{$how}->($u, $at, $seen, $c->{sent}, $len);
    }

    my $n = scalar(@clients);
    is(scalar(@wrong), 0, "$f: $n clients left at byte 0, $run{step}, ... "
       . "$len: each has one row, as where it left says ("
       . join(', ', map { "$how{$_} $_" } sort keys %how) . ')')
        or diag(join("\n", @wrong));
}

# --- clients that leave while still sending their request ------------------

{
    my @clients;
    my ($f, $path, $body) = @{ $api[0] };

    # in the request line, its headers, its body, all but its last byte
    for my $send (1, 20, 60, 120, 200, 300, -1) {
        push(@clients, { path => $path, body => $body->(1),
                         headers => \%slow, send => $send, leave_at => 0,
                         reset => $send % 2 });
    }

    swarm($ng, \@clients);
    rows_by_client(\@clients);
    is(scalar(grep { @{ $_->{rows} } } @clients), 0, 'clients that left '
       . 'mid-request at 7 offsets: never admitted, no row');
}

# --- upstreams that fail, all at once ---------------------------------------

# [ what the upstream does, mock headers,
#   stream: [ finish reason, flags, output ], whole body: [ the same ] ]
# FIN is the format's own finish reason; undef: not compared.
my @faults = (
    [ 'answers cleanly', {},
      [ 'FIN', 0, 10 ], [ 'FIN', 0, 10 ] ],
    [ 'closes after 5 tokens', { 'x-mock-die-after' => 5 },
      [ 'upstream_error', 3, est_out(5) ], [ 'upstream_error', 3, 50 ] ],
    [ 'resets after 5 tokens', { 'x-mock-die-after' => 5,
                                 'x-mock-die-how' => 'reset' },
      [ 'upstream_error', 3, est_out(5) ], [ 'upstream_error', 3, 50 ] ],
    [ 'stalls after 5 tokens', { 'x-mock-die-after' => 5,
                                 'x-mock-die-how' => 'stall' },
      [ 'upstream_error', 3, est_out(5) ], [ 'upstream_error', 3, 50 ] ],
    [ 'closes before its first token', { 'x-mock-die-after' => 0 },
      [ 'upstream_error', 3, undef ], [ 'upstream_error', 3, 50 ] ],
    [ 'stalls before its first token', { 'x-mock-die-after' => 0,
                                         'x-mock-die-how' => 'stall' },
      [ 'upstream_error', 3, undef ], [ 'upstream_error', 3, 50 ] ],
    [ 'sends its own error event after 3 tokens',
      { 'x-mock-error-after' => 3 },
      [ 'upstream_error', 3, est_out(3) ], [ 'FIN', 0, 10 ] ],
    [ 'sends a malformed event, or half a body', { 'x-mock-malformed' => 1 },
      [ 'FIN', 0, 10 ], [ undef, 1, 50 ] ],
    [ 'sends no usage', { 'x-mock-no-usage' => 1 },
      [ 'FIN', 1, 13 ], [ 'FIN', 1, 13 ] ],
);

# and those that answer an error: charged nothing
# [ what, mock headers, the status the client and the row get ]
my @errors = (
    [ 'answers 500', { 'x-mock-status' => 500 }, 500 ],
    [ 'answers 429', { 'x-mock-status' => 429 }, 429 ],
    [ 'stalls before its header', { 'x-mock-ttfb-ms' => 3000 }, 504 ],
);

my @clients;

for (1 .. $run{repeat}) {
    for my $a (@api) {
        my ($f, $path, $body, $fin) = @$a;

        for my $stream (1, 0) {
            for my $x (@faults) {
                my ($what, $mock, @want) = @$x;
                my $want = [ @{ $want[$stream ? 0 : 1] } ];
                $want->[0] = $fin if ($want->[0] // '') eq 'FIN';

                push(@clients, { path => $path, body => $body->($stream),
                                 headers => { %auth, 'x-mock-tokens' => 10,
                                              %$mock },
                                 name => "$f " . ($stream ? 'stream' : 'json')
                                         . ", the upstream $what",
                                 stream => $stream, want => $want });
            }

            for my $x (@errors) {
                my ($what, $mock, $status) = @$x;
                push(@clients, { path => $path, body => $body->($stream),
                                 headers => { %auth, %$mock },
                                 name => "$f " . ($stream ? 'stream' : 'json')
                                         . ", the upstream $what",
                                 status => $status,
                                 want => [ undef, 0, 0, 0 ] });
            }
        }
    }
}

swarm($ng, \@clients);
rows_by_client(\@clients);

my (%ok, %n);

for my $c (@clients) {
    my ($fin, $flags, $out, $in) = @{ $c->{want} };
    my $u = $c->{rows}[0] // {};
    my $status = $c->{status} // 200;
    my ($got) = $c->{raw} =~ m{^HTTP/1\.1 (\d+)};

    my $good = @{ $c->{rows} } == 1
        && ($got // 0) == $status && $u->{status} == $status
        && ($u->{finish_reason} // '') eq ($fin // '')
        && $u->{flags} == $flags
        && (!defined $out || $u->{output_tokens} == $out)
        && (!defined $in || $u->{input_tokens} == $in)
        # the gateway ends a stream the upstream cut with its last chunk
        && (!$c->{stream} || $status != 200 || $c->{raw} =~ /\r\n0\r\n\r\n$/);

    $n{ $c->{name} }++;
    $ok{ $c->{name} }++ if $good;
    diag("$c->{name}: " . encode_json({ status => $got, rows => scalar(
         @{ $c->{rows} }), map { $_ => $u->{$_} } qw(status finish_reason
         flags output_tokens input_tokens) })) unless $good;
}

for my $name (sort keys %n) {
    is($ok{$name} // 0, $n{$name}, "$name: one row, as the rule says "
       . "($n{$name} at once with the others)");
}

chaos_check($ng, tenants => [ $t ], no_mock_max => 1);

done_testing();
