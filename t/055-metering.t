#!/usr/bin/perl

# Metering: every format (OpenAI Chat Completions, Anthropic Messages,
# OpenAI Responses) streamed and whole, ending cleanly or not: a client that
# leaves at several points, an upstream that closes, resets, stalls or sends
# its own error, a missing usage frame, hostile usage.  Each case checks
# what the client received and the one llm.usage row.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use JSON::PP;
use LLMGW;
use POSIX qw(ceil);
use Test::More;
use Time::HiRes qw(sleep time);

my $s = stack();
my $pro = new_tenant(tier => 'pro');
my $auth = { authorization => "Bearer $pro->{key}" };
my @rogue = map { new_tenant(tier => 'pro') } 1 .. 6;


my $ng = nginx(http => <<'EOF')->run();
    %%GATEWAY%%
    llm_gateway_tier  pro  unpriced=allow tpm=60000000 max_tokens=100000;

    %%UPSTREAM%%

    server {
        listen  127.0.0.1:%%PORT%%;

        # the stall cases wait for this
        proxy_read_timeout  1s;

        proxy_http_version  1.1;
        proxy_set_header    Connection "";

        %%APIS%%

        # HTTP/1.0 to the upstream: a stream ends when its connection does,
        # so a cut one looks finished to nginx
        location /h10/ {
            proxy_http_version  1.0;
            proxy_pass          http://127.0.0.1:%%MOCK%%/;

            location = /h10/v1/chat/completions {
                llm_gateway         zone=llm api=openai;
                proxy_http_version  1.0;
                proxy_pass          http://127.0.0.1:%%MOCK%%/v1/chat/completions;
            }

            location = /h10/v1/messages {
                llm_gateway         zone=llm api=anthropic;
                proxy_http_version  1.0;
                proxy_pass          http://127.0.0.1:%%MOCK%%/v1/messages;
            }

            location = /h10/v1/responses {
                llm_gateway         zone=llm api=responses;
                proxy_http_version  1.0;
                proxy_pass          http://127.0.0.1:%%MOCK%%/v1/responses;
            }
        }

        # the same requests past the gateway, to compare bytes with
        location /direct/ {
            proxy_pass  http://127.0.0.1:%%MOCK%%/;
        }
    }
EOF

# "Say hello." is 10 bytes: 3 + (3 + ceil(10 / 4)) by the gateway's
# estimate and the mock's count alike, in all three formats.
my $n_in = 9;

# [ format, path, body, finish reason when whole, when capped ]
my %api = (
    openai => [ '/v1/chat/completions',
                sub { my ($max, $stream) = @_;
                      { model => 'mock-gpt-4o-mini', max_tokens => $max,
                        messages => [ { role => 'user',
                                        content => 'Say hello.' } ],
                        ($stream ? (stream => JSON::PP::true) : ()) } },
                'stop', 'length' ],
    anthropic => [ '/v1/messages',
                sub { my ($max, $stream) = @_;
                      { model => 'mock-claude', max_tokens => $max,
                        messages => [ { role => 'user',
                                        content => 'Say hello.' } ],
                        ($stream ? (stream => JSON::PP::true) : ()) } },
                'end_turn', 'max_tokens' ],
    responses => [ '/v1/responses',
                sub { my ($max, $stream) = @_;
                      { model => 'mock-gpt-4o-mini', input => 'Say hello.',
                        max_output_tokens => $max,
                        ($stream ? (stream => JSON::PP::true) : ()) } },
                'completed', 'max_output_tokens' ],
);

my @formats = qw(openai anthropic responses);

# ids and timestamps are the mock's per response; the rest must be equal
sub normal {
    my ($s) = @_;
    $s =~ s/"id":"[^"]*"/"id":"-"/g;
    $s =~ s/"(item_id|created|created_at)":("[^"]*"|\d+)/"$1":0/g;
    return $s;
}

# the one row of a request
sub row_of {
    my ($r, $name) = @_;
    my $id = $r->{headers}{'x-request-id'} // '';
    my $rows = usage_rows($id);
    is(scalar(@$rows), 1, "$name: one llm.usage row");
    return $rows->[0] // {};
}

sub row_is {
    my ($u, $want, $name) = @_;
    my @k = sort keys %$want;
    is_deeply([ @$u{@k} ], [ @$want{@k} ], "$name: the row")
        or diag(explain({ map { $_ => $u->{$_} } @k }));
}

# The last SSE event of a body, as (event name, decoded data).
sub last_event {
    my ($body) = @_;
    my @ev = grep { /\S/ } split(/\r?\n\r?\n/, $body);
    my $e = $ev[-1] // '';
    my ($name) = $e =~ /^event: ?(.*)$/m;
    my $data = join("\n", $e =~ /^data: ?(.*)$/mg);
    return ($name, eval { decode_json($data) });
}

sub post { raw_post($ng->url($_[0]), $_[1], { %$auth, %{ $_[2] // {} } },
                    @_[3 .. $#_]) }

# hostile figures may run up a debt in the bucket: each has a tenant of its
# own, which must have the one row
my @rogues;

sub rogue_post {
    my $t = $rogue[@rogues] or die 'not enough rogue tenants';
    push(@rogues, $t->{id});
    return raw_post($ng->url($_[0]), $_[1],
                    { authorization => "Bearer $t->{key}", %{ $_[2] } });
}
sub direct { raw_post($ng->url("/direct$_[0]"), $_[1], $_[2]) }

my $requests = 0;

# --- a clean end: the mock's bytes, the mock's figures --------------------

for my $f (@formats) {
    my ($path, $body, $fin) = @{ $api{$f} };

    for my $stream (0, 1) {
        my $name = "$f " . ($stream ? 'stream' : 'json') . ', clean';
        my %mock = ('x-mock-tokens' => 7, 'x-mock-cached-tokens' => 2,
                    ($f eq 'anthropic' ? ('x-mock-cache-creation-tokens' => 3)
                                       : ('x-mock-reasoning-tokens' => 4)));

        my $r = post($path, $body->(50, $stream), \%mock);
        my $d = direct($path, $body->(50, $stream), \%mock);
        $requests++;

        is($r->{status}, 200, "$name: 200");
        ok($r->{complete}, "$name: a complete response");
        is(normal($r->{body}), normal($d->{body}), "$name: the mock's bytes");

        row_is(row_of($r, $name),
               { input_tokens => $n_in,
                 output_tokens => 7,
                 cached_input_tokens => 2,
                 cache_write_tokens => ($f eq 'anthropic' ? 3 : 0),
                 reasoning_tokens => ($f eq 'anthropic' ? 0 : 4),
                 finish_reason => $fin, flags => 0, status => 200,
                 api => $f }, $name);
    }
}

# A long Responses stream: its last event repeats all the output, far more
# than the 16 kB event buffer, which grows for it (to at most
# llm_gateway_response_buffer).

{
    my ($path, $body) = @{ $api{responses} };
    my $name = 'responses stream, 6000 tokens';

    my $r = post($path, $body->(6000, 1), { 'x-mock-tokens' => 6000 });
    $requests++;

    ok(length($r->{body}) > 100000, "$name: a long stream");
    row_is(row_of($r, $name), { input_tokens => $n_in, output_tokens => 6000,
                                flags => 0, finish_reason => 'completed' },
           $name);
}

# --- no usage from the upstream: the prompt estimate and the text counted -

for my $f (@formats) {
    my ($path, $body, $fin) = @{ $api{$f} };

    for my $stream (0, 1) {
        my $name = "$f " . ($stream ? 'stream' : 'json') . ', no usage';
        my %mock = ('x-mock-tokens' => 11, 'x-mock-no-usage' => 1);

        my $r = post($path, $body->(50, $stream), \%mock);
        my $d = direct($path, $body->(50, $stream), \%mock);
        $requests++;

        is(normal($r->{body}), normal($d->{body}), "$name: the mock's bytes");

        # a whole body's text is one delta
        my $bytes = 0;
        $bytes += length("tok$_ ") for 1 .. 11;

        row_is(row_of($r, $name),
               { input_tokens => $n_in,
                 output_tokens => $stream ? est_out(11) : ceil($bytes / 4),
                 finish_reason => $fin, flags => 1 }, $name);
    }
}

# --- the usage chunk: cut when the gateway asked for it, kept when the
#     client did (the bytes of both are compared in t/040) ---------------

{
    my ($path, $body) = @{ $api{openai} };

    my $r = post($path, $body->(50, 1), { 'x-mock-tokens' => 3 });
    unlike($r->{body}, qr/"usage"/, 'usage added by the gateway: not sent');

    my $b = $body->(50, 1);
    $b->{stream_options} = { include_usage => JSON::PP::true };
    $r = post($path, $b, { 'x-mock-tokens' => 3 });
    like($r->{body}, qr/"choices":\[\],"usage":\{"prompt_tokens":9,/,
         'usage asked by the client: sent');
    $requests += 2;
}

# --- the upstream closes or resets mid-stream -----------------------------

my %error_event = (
    openai => sub { my ($n, $d) = @_;
                    !defined $n && $d->{error}{code} eq 'upstream_error' },
    anthropic => sub { my ($n, $d) = @_;
                       $n eq 'error' && $d->{type} eq 'error'
                       && $d->{error}{type} eq 'api_error' },
    responses => sub { my ($n, $d) = @_;
                       $n eq 'error' && $d->{type} eq 'error'
                       && $d->{code} eq 'upstream_error' },
);

for my $f (@formats) {
    my ($path, $body) = @{ $api{$f} };

    for my $how (qw(close reset stall)) {
        for my $h10 ('', '/h10') {
            # over HTTP/1.0 a reset or a stall looks the same
            next if $h10 && $how ne 'close';

            my $name = "$f stream, upstream ${how}s after 3 tokens"
                       . ($h10 ? ' (HTTP/1.0)' : '');
            my %mock = ('x-mock-tokens' => 10, 'x-mock-die-after' => 3,
                        'x-mock-die-how' => $how);

            my $r = post("$h10$path", $body->(50, 1), \%mock);
            $requests++;

            is($r->{status}, 200, "$name: 200");
            ok($r->{complete}, "$name: a complete response, its last chunk "
               . "sent");

            # what came before the cut is the upstream's, as it came
            my $d = direct($path, $body->(50, 1),
                           { %mock, 'x-mock-die-how' => 'close' });
            my $sent = normal($r->{body});
            my $cut = normal($d->{body});
            is(substr($sent, 0, length $cut), $cut,
               "$name: the upstream's bytes first");

            my ($ev, $data) = last_event($r->{body});
            ok($error_event{$f}->($ev, $data // {}),
               "$name: then a terminal error event")
                or diag(substr($r->{body}, -400));
            like($data->{error}{message} // $data->{message} // '',
                 $how eq 'stall' ? qr/timed out/ : qr/upstream/,
                 "$name: which says what failed");

            row_is(row_of($r, $name),
                   { input_tokens => $n_in, output_tokens => est_out(3),
                     finish_reason => 'upstream_error', flags => 3,
                     status => 200 }, $name);
        }
    }
}

# A whole body cut short: generated in full before it was sent, so the
# reservation stands.

for my $f (@formats) {
    my ($path, $body) = @{ $api{$f} };
    my $name = "$f json, upstream closes mid-body";

    my $r = post($path, $body->(50, 0), { 'x-mock-tokens' => 10,
                                          'x-mock-die-after' => 3 });
    $requests++;

    ok(!$r->{complete}, "$name: the client sees a cut body");
    row_is(row_of($r, $name),
           { input_tokens => $n_in, output_tokens => 50,
             finish_reason => 'upstream_error', flags => 3 }, $name);
}

# --- the upstream's own in-band error: passed as it is --------------------

for my $f (@formats) {
    my ($path, $body) = @{ $api{$f} };
    my $name = "$f stream, the upstream's error event after 2 tokens";
    my %mock = ('x-mock-tokens' => 10, 'x-mock-error-after' => 2);

    my $r = post($path, $body->(50, 1), \%mock);
    my $d = direct($path, $body->(50, 1), \%mock);
    $requests++;

    ok($r->{complete}, "$name: a complete response");
    is(normal($r->{body}), normal($d->{body}), "$name: the mock's bytes only");
    row_is(row_of($r, $name),
           { input_tokens => $n_in, output_tokens => est_out(2),
             finish_reason => 'upstream_error', flags => 3 }, $name);
}

# --- the client leaves -----------------------------------------------------

# in flight at the mock for one x-mock-tenant
sub in_flight {
    my ($tag) = @_;
    my $r = HTTP::Tiny->new(timeout => 5)
        ->get("http://127.0.0.1:$s->{LLMGW_MOCK_PORT}/stats/$tag");
    my $j = eval { decode_json($r->{content}) } // {};
    return $j->{inflight} // -1;
}

sub wait_idle {
    my ($tag) = @_;
    my $deadline = time() + 5;
    sleep(0.05) while in_flight($tag) != 0 && time() < $deadline;
    return in_flight($tag);
}

for my $f (@formats) {
    my ($path, $body) = @{ $api{$f} };

    for my $k (1, 4, 9) {
        my $name = "$f stream, the client leaves after token $k";
        my $tag = "leave-$f-$k";

        # 100 tokens 50 ms apart: 5 s unless the gateway stops it
        my $r = post($path, $body->(200, 1),
                     { 'x-mock-tokens' => 100, 'x-mock-delay-ms' => 50,
                       'x-mock-tenant' => $tag },
                     until => qr/tok$k /);
        $requests++;

        ok($r->{aborted}, "$name: left");
        is(wait_idle($tag), 0, "$name: the upstream request ended at once");

        my $u = row_of($r, $name);
        row_is($u, { input_tokens => $n_in, finish_reason => 'client_closed',
                     flags => 3 }, $name);

        # the gateway may have passed a token or two more than were read
        my $out = $u->{output_tokens} // -1;
        ok($out >= est_out($k) && $out <= est_out($k + 3),
           "$name: charged the text sent ($out tokens)");
    }

    my $name = "$f json, the client leaves before the answer";
    my $tag = "leave-$f-json";
    my $r = post($path, $body->(50, 0),
                 { 'x-mock-ttfb-ms' => 3000, 'x-mock-tenant' => $tag },
                 timeout => 0.5);
    $requests++;

    is($r->{status}, 0, "$name: no answer yet");
    is(wait_idle($tag), 0, "$name: the upstream request ended at once");

    # no x-request-id came: find the row by its tenant and time
    my $u = db()->selectrow_hashref(
        q{SELECT * FROM llm.usage WHERE tenant_id = ? AND status = 499
           AND finish_reason = 'client_closed' AND api = ?
           ORDER BY ts DESC LIMIT 1}, undef, $pro->{id}, $f) // {};
    row_is($u, { input_tokens => $n_in, output_tokens => 0, flags => 3 },
           $name);
}

# --- hostile usage: clamped and flagged, never a refund beyond the
#     reservation, never a charge beyond what the request could cost; a
#     figure that is not a number (or below 0) is no usage: the gateway's
#     own count stands (flags 1 + 4) ---------------------------------------

my %hostile = (
    openai => [ '{"prompt_tokens":-5,"completion_tokens":12.5,'
                . '"prompt_tokens_details":{"cached_tokens":"x"}}',
                { input_tokens => $n_in, output_tokens => 12, flags => 5 } ],
    anthropic => [ '{"output_tokens":1e30}',
                   { input_tokens => $n_in, output_tokens => 50,
                     flags => 4 + 32 } ],
    responses => [ '{"input_tokens":-1,"output_tokens":"many"}',
                   { input_tokens => $n_in, output_tokens => 7,
                     flags => 5 } ],
);

for my $f (@formats) {
    my ($path, $body, $fin) = @{ $api{$f} };
    my ($usage, $want) = @{ $hostile{$f} };

    for my $stream (0, 1) {
        my $name = "$f " . ($stream ? 'stream' : 'json') . ', hostile usage';
        my %mock = ('x-mock-tokens' => 5, 'x-mock-usage' => $usage);

        my $r = rogue_post($path, $body->(50, $stream), \%mock);
        my $d = direct($path, $body->(50, $stream), \%mock);

        is(normal($r->{body}), normal($d->{body}), "$name: the mock's bytes");
        row_is(row_of($r, $name), { %$want, finish_reason => $fin }, $name);
    }

    my $name = "$f stream, the final usage twice";
    my $r = post($path, $body->(50, 1), { 'x-mock-tokens' => 5,
                                          'x-mock-usage-repeat' => 2 });
    $requests++;
    row_is(row_of($r, $name),
           { input_tokens => $n_in, output_tokens => 5, flags => 8 }, $name);

    $name = "$f stream, a 100 kB comment line first";
    my %mock = ('x-mock-tokens' => 5, 'x-mock-pad-bytes' => 100000);
    $r = post($path, $body->(50, 1), \%mock);
    my $d = direct($path, $body->(50, 1), \%mock);
    $requests++;
    is(normal($r->{body}), normal($d->{body}), "$name: the mock's bytes");
    row_is(row_of($r, $name),
           { input_tokens => $n_in, output_tokens => 5, flags => 0 }, $name);
}

# --- the upstream refuses: nothing charged --------------------------------

for my $f (@formats) {
    my ($path, $body) = @{ $api{$f} };

    for my $stream (0, 1) {
        my $name = "$f " . ($stream ? 'stream' : 'json') . ', upstream 500';
        my $r = post($path, $body->(50, $stream), { 'x-mock-status' => 500 });
        $requests++;

        is($r->{status}, 500, "$name: passed through");
        row_is(row_of($r, $name),
               { input_tokens => 0, output_tokens => 0, flags => 0,
                 status => 500 }, $name);
    }
}

# Every request left exactly one row (request_id is the key: one at most).
my ($rows) = db()->selectrow_array(
    'SELECT count(*) FROM llm.usage WHERE tenant_id = ?', undef, $pro->{id});
is($rows, $requests, "one row for each of the $requests requests");
($rows) = db()->selectrow_array(
    'SELECT count(DISTINCT tenant_id) = ? AND count(*) = ? FROM llm.usage '
    . 'WHERE tenant_id = ANY (?)', undef, scalar(@rogues), scalar(@rogues),
    \@rogues);
ok($rows, 'one row for each hostile one');

$ng->no_alerts();

done_testing();
