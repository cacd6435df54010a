#!/usr/bin/perl

# Idempotency-Key under hostile load: a look-up finds its key whatever the
# hash (keys forged to collide, by the same tenant or another); a tenant
# filling the zone evicts only its own results; a result is scoped to its
# location and API; a replay is a request against the RPM limit; a joiner
# of a stream that ends short gets the terminal error event; a stream that
# ends in an error, or a result past retain, is no result; a first request
# whose worker is killed ends its joiners, and its key runs again.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Compress::Raw::Zlib ();
use HTTP::Tiny;
use IO::Select;
use IO::Socket::INET;
use JSON::PP;
use LLMGW;
use Test::More;
use Time::HiRes qw(sleep time);

stack();

my $t = new_tenant(tier => 'big');
my $u = new_tenant(tier => 'big');
my $slow = new_tenant(tier => 'rpm2');
my $tiny = new_tenant(tier => 'tiny');

# a quota no test reaches: only for its counters of what it was sent
my $mock = mockllm('-D', 1000000000);
my $late = mockllm();

my $port2 = LLMGW::Nginx::free_port();

my $tiers = <<"EOF";
    llm_gateway_tier  big   unpriced=allow tpm=100000000 burst=100000000;
    llm_gateway_tier  rpm2  unpriced=allow tpm=100000000 burst=100000000 rpm=2;
    llm_gateway_tier  tiny  unpriced=allow tpm=100 burst=100 rpm=1000;
EOF

my $ng = nginx(http => <<"EOF")->run();
    %%GATEWAY%%
$tiers
    llm_gateway_idempotency  zone=idem:1m retain=60s max_size=8k;

    server {
        listen  127.0.0.1:%%PORT%%;

        location = /v1/chat/completions {
            llm_gateway  zone=llm api=openai;
            proxy_pass   http://127.0.0.1:$mock->{port};
        }

        location = /v1/messages {
            llm_gateway  zone=llm api=anthropic;
            proxy_pass   http://127.0.0.1:$mock->{port};
        }

        location = /other/v1/chat/completions {
            llm_gateway  zone=llm api=openai;
            proxy_pass   http://127.0.0.1:$mock->{port}/v1/chat/completions;
        }

        # a request that lives on after its last byte: until its mirror,
        # 1.5 s at another mock, ends
        location = /late/v1/chat/completions {
            llm_gateway  zone=llm api=openai;
            mirror       /late-mirror;
            proxy_pass   http://127.0.0.1:$mock->{port}/v1/chat/completions;
        }

        location = /late-mirror {
            internal;
            proxy_set_header  x-mock-ttfb-ms  1500;
            proxy_pass   http://127.0.0.1:$late->{port}/v1/chat/completions;
        }
    }

    server {
        listen  127.0.0.1:$port2;

        location = /v1/chat/completions {
            llm_gateway  zone=llm api=openai;
            proxy_pass   http://127.0.0.1:$mock->{port};
        }
    }
EOF

my $http = HTTP::Tiny->new(timeout => 30);

sub sent { decode_json($http->get("$mock->{url}/limits")->{content})->{requests} }

my $body = { model => 'm', max_tokens => 20,
             messages => [ { role => 'user', content => 'hello' } ] };

sub ask {
    my ($key, %o) = @_;
    return http_post(($o{url} // $ng->url('/v1/chat/completions')),
                     $o{body} // $body,
                     authorization => "Bearer " . ($o{tenant} // $t)->{key},
                     'x-mock-tokens' => $o{tokens} // 5,
                     ($key ? ('idempotency-key' => $key) : ()));
}

sub replayed { ($_[0]->{headers}{'idempotent-replayed'} // '') eq 'true' }


###############################################################################
# Keys forged to collide.  The store's tree key is crc32(key) ^ tenant id.
# Over messages of one length crc32 is affine in their bits: the low four
# bits of 24 characters from '@' to 'O' span all 32-bit values, and an
# elimination over GF(2) gives a key of any crc32 (and, from $seed, one of
# 2^64 such keys).

sub crc { Compress::Raw::Zlib::crc32($_[0]) }

sub forge {
    my ($prefix, $want, $seed) = @_;
    my $n = 24;
    my $base = $prefix . ('@' x $n);
    my $c0 = crc($base);
    my @basis;

    for my $j (0 .. 4 * $n - 1) {
        my $m = $base;
        substr($m, length($prefix) + int($j / 4), 1) = chr(0x40 | 1 << $j % 4);

        my $v = crc($m) ^ $c0;
        my $s = "\0" x 12;
        vec($s, $j, 1) = 1;

        for my $bit (reverse 0 .. 31) {
            next unless ($v >> $bit) & 1;
            unless ($basis[$bit]) { $basis[$bit] = [$v, $s]; last }
            $v ^= $basis[$bit][0];
            $s ^= $basis[$bit][1];
        }
    }

    # a random start, then the bits that take its crc32 to $want
    srand($seed);
    my $x = "\0" x 12;
    vec($x, $_, 1) = int(rand(2)) for 0 .. 4 * $n - 1;

    my $m = $base;
    for my $j (0 .. 4 * $n - 1) {
        next unless vec($x, $j, 1);
        my $i = length($prefix) + int($j / 4);
        substr($m, $i, 1) = chr(ord(substr($m, $i, 1)) ^ 1 << $j % 4);
    }

    my $r = crc($m) ^ $want;
    my $s = "\0" x 12;

    for my $bit (reverse 0 .. 31) {
        next unless ($r >> $bit) & 1;
        die "forge: no basis for bit $bit" unless $basis[$bit];
        $r ^= $basis[$bit][0];
        $s ^= $basis[$bit][1];
    }

    for my $j (0 .. 4 * $n - 1) {
        next unless vec($s, $j, 1);
        my $i = length($prefix) + int($j / 4);
        substr($m, $i, 1) = chr(ord(substr($m, $i, 1)) ^ 1 << $j % 4);
    }

    die "forge: crc32 of $m is not $want" unless crc($m) == $want;
    return $m;
}

# eight keys of one tenant, one hash
my $target = crc('the same hash');
my @same = map { forge("s$_-", $target, 100 + $_) } 1 .. 8;
is(scalar(keys %{ { map { $_ => 1 } @same } }), 8, 'eight keys, distinct');
is(scalar(grep { crc($_) == $target } @same), 8, 'one crc32');

my $ran = 0;
for my $k (@same) {
    $ran++ if ask($k)->{status} == 200;
}
is($ran, 8, 'each of the eight ran once');

my $n = sent();
my $hit = 0;
for my $k (@same) {
    my $r = ask($k);
    $hit++ if $r->{status} == 200 && replayed($r);
}
is($hit, 8, 'their retries: 8 of 8 replayed');
is(sent(), $n, 'none sent upstream again');

# another tenant plants keys whose hash is that of each of five of ours
my @ours = map { "ours-$_-" . int(rand(1e9)) } 1 .. 5;
is(ask($_)->{status}, 200, "our key $_ ran") for @ours;

my $x = ($t->{id} ^ $u->{id}) & 0xffffffff;
my $planted = 0;

for my $i (0 .. $#ours) {
    for my $j (1 .. 6) {
        my $k = forge("p$i.$j-", crc($ours[$i]) ^ $x, 1000 * $i + $j);
        $planted++ if ask($k, tenant => $u)->{status} == 200;
    }
}
is($planted, 30, 'the other tenant planted 6 colliding keys for each');

$n = sent();
$hit = 0;
for my $k (@ours) {
    my $r = ask($k);
    $hit++ if $r->{status} == 200 && replayed($r);
}
is($hit, 5, 'our retries: 5 of 5 replayed');
is(sent(), $n, 'none sent upstream again');


###############################################################################
# A result belongs to its location and API

my $first = ask('scoped');
is($first->{status}, 200, 'a result at /v1/chat/completions');

my $r = ask('scoped', url => $ng->url('/v1/messages'));
is($r->{status}, 200, 'the same key and body at /v1/messages: 200');
ok(!replayed($r), 'not a replay of the Chat answer');
is(json_body($r)->{type} // '', 'message', 'an Anthropic message of its own');

$r = ask('scoped', url => $ng->url('/other/v1/chat/completions'));
is($r->{status}, 200, 'at another location of the same API: 200');
ok(!replayed($r), 'not a replay');

$r = ask('scoped', url => "http://127.0.0.1:$port2/v1/chat/completions");
is($r->{status}, 200, 'at the same location of another server: 200');
ok(!replayed($r), 'not a replay');

$r = ask('scoped');
ok(replayed($r), 'at its own location, still a replay');
is($r->{content}, $first->{content}, 'of its own answer');

$r = ask('scoped', url => $ng->url('/v1/messages'));
ok(replayed($r), '/v1/messages replays its own');
is(json_body($r)->{type} // '', 'message', 'the Anthropic one');


###############################################################################
# A replay is a request: it counts against the RPM limit, not the tokens

$r = ask('rpm', tenant => $slow);
is($r->{status}, 200, 'rpm=2: the first request');

$n = sent();
my @codes = map { ask('rpm', tenant => $slow) } 1 .. 4;
my @ok = grep { $_->{status} == 200 } @codes;
my @refused = grep { $_->{status} == 429 } @codes;

ok(@ok <= 2, 'at most 2 of 4 replays served (' . scalar(@ok) . ')');
ok(@refused >= 2, 'the others refused, 429 (' . scalar(@refused) . ')');
ok(replayed($ok[0]), 'the one served is a replay') if @ok;
is(sent(), $n, 'none went upstream');

if (@refused) {
    my $e = json_body($refused[0])->{error} // {};
    is($e->{code}, 'rate_limit_exceeded', 'rate_limit_exceeded');
    like($e->{message}, qr/requests per min \(RPM\): limit 2/,
         'the usual RPM refusal');
    ok(!replayed($refused[0]), 'not marked replayed');
}

# tokens spent: a new request is refused, a replay is not
my $b60 = encode_json({ %$body, max_tokens => 60 });
$r = ask('tiny1', tenant => $tiny, tokens => 60, body => $b60);
is($r->{status}, 200, 'tpm=100: a request of about 70 tokens');
$r = ask('tiny2', tenant => $tiny, tokens => 60, body => $b60);
is($r->{status}, 429, 'another: 429, the tokens are spent');
$r = ask('tiny1', tenant => $tiny, tokens => 60, body => $b60);
ok($r->{status} == 200 && replayed($r), 'the replay takes no tokens');


###############################################################################
# Joiners of a stream that ends short

# a POST written now, read later: the socket
sub start {
    my ($url, $key, $headers, $b) = @_;
    my ($port, $path) = $url =~ m{^http://[^:/]+:(\d+)(/.*)$};
    my $json = encode_json($b);
    my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port)
        or die "connect: $!";
    my $req = "POST $path HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        . "Content-Type: application/json\r\n"
        . "Content-Length: " . length($json) . "\r\n"
        . "Authorization: Bearer $t->{key}\r\nIdempotency-Key: $key\r\n";
    $req .= "$_: $headers->{$_}\r\n" for sort keys %$headers;
    $c->syswrite("$req\r\n$json");
    return { sock => $c, raw => '' };
}

# reads until the body matches $until (or the end, or 20 s)
sub read_until {
    my ($s, $until) = @_;
    my $sel = IO::Select->new($s->{sock});
    my $deadline = time() + 20;

    while ((my $left = $deadline - time()) > 0) {
        if ($until) {
            my $p = LLMGW::http_parse($s->{raw});
            return $p if $p->{body} =~ $until;
        }
        last unless $sel->can_read($left);
        last unless $s->{sock}->sysread($s->{raw}, 65536, length $s->{raw});
    }

    return LLMGW::http_parse($s->{raw});
}

# the end of a body, for what a failure shows
sub tail { substr($_[0]->{body}, -400) }

my $stream = { %$body, max_tokens => 400, stream => JSON::PP::true };

# the first client leaves
my $h = { 'x-mock-tokens' => 40, 'x-mock-delay-ms' => 100 };
my $own = start($ng->url('/v1/chat/completions'), 'left', $h, $stream);
read_until($own, qr/tok2 /);
my $join = start($ng->url('/v1/chat/completions'), 'left', $h, $stream);
my $p = read_until($join, qr/tok4 /);
is($p->{headers}{'idempotent-replayed'}, 'true', 'a joiner of a running stream');
close($own->{sock});

$p = read_until($join);
is($p->{status}, 200, 'its first client left: the joiner got 200');
ok($p->{complete}, 'and the last chunk');
unlike($p->{body}, qr/\[DONE\]/, 'no [DONE]');
like(tail($p), qr/\n\ndata: \{"error":\{"message":"[^"]*","type":"server_error","param":null,"code":"upstream_error"\}\}\n\n\z/,
     "the stream's terminal error event, the last event");

# past max_size (8k): a Chat stream, then an Anthropic one
for my $api (['/v1/chat/completions', qr/\n\ndata: \{"error":\{[^\n]*"code":"upstream_error"\}\}\n\n\z/],
             ['/v1/messages', qr/\n\nevent: error\ndata: \{"type":"error","error":\{"type":"api_error","message":"[^"]*"\}\}\n\n\z/])
{
    my ($path, $event) = @$api;
    my $key = "big$path";
    $h = { 'x-mock-tokens' => 300, 'x-mock-delay-ms' => 20 };

    $own = start($ng->url($path), $key, $h, $stream);
    read_until($own, qr/tok1 /);
    $join = start($ng->url($path), $key, $h, $stream);
    $p = read_until($join);

    is($p->{status}, 200, "$path past max_size: the joiner got 200");
    is($p->{headers}{'idempotent-replayed'}, 'true', 'as a joiner');
    ok($p->{complete}, 'and the last chunk');
    unlike($p->{body}, qr/tok300 /, 'not the whole stream');
    like(tail($p), $event, "the dialect's terminal error event, last");

    # a retry once the kept bytes stopped: told to come back
    $r = http_post($ng->url($path), $stream,
                   authorization => "Bearer $t->{key}", 'idempotency-key' => $key,
                   %$h);
    is($r->{status}, 409, 'a retry while it runs, past max_size: 409');
    my $e = json_body($r)->{error} // {};
    is($e->{code} // ($e->{details} // {})->{error_code} // '',
       'idempotency_key_in_use', 'idempotency_key_in_use, in either shape');
    like($e->{message} // '', qr/still runs/, 'while it still runs');

    $p = read_until($own);
    ok($p->{complete} && $p->{body} =~ /tok300 /, 'the first got all of it');
}

# past max_size in the middle of a line (a comment line of 20000 bytes):
# the line and its event are ended before the error event
$h = { 'x-mock-tokens' => 5, 'x-mock-ttfb-ms' => 1000,
       'x-mock-pad-bytes' => 20000 };
my $before = sent();
$own = start($ng->url('/v1/chat/completions'), 'pad', $h, $stream);
# its key is taken once it went upstream
for (1 .. 200 * time_scale()) {
    last if sent() > $before;
    sleep(0.05);
}
$join = start($ng->url('/v1/chat/completions'), 'pad', $h, $stream);
$p = read_until($join);
is($p->{headers}{'idempotent-replayed'}, 'true', 'a joiner of a padded stream');
like(tail($p), qr/x{50}\n\ndata: \{"error":\{[^\n]*"code":"upstream_error"\}\}\n\n\z/,
     'cut in its comment line: the line ended, then the error event');
ok($p->{complete}, 'and the last chunk');
$p = read_until($own);
ok($p->{complete} && $p->{body} =~ /\[DONE\]/, 'the first got all of it');

# a stream the upstream cut: the joiner gets its one error event, as the first
$h = { 'x-mock-tokens' => 40, 'x-mock-delay-ms' => 50, 'x-mock-die-after' => 10 };
$own = start($ng->url('/v1/chat/completions'), 'cut', $h, $stream);
read_until($own, qr/tok1 /);
$join = start($ng->url('/v1/chat/completions'), 'cut', $h, $stream);
$p = read_until($join);
my $q = read_until($own);
is($p->{body}, $q->{body}, 'a stream cut upstream: the joiner got what the first got');
is(scalar(() = $p->{body} =~ /upstream_error/g), 1, 'one error event');

# a 200 stream that ends in an error is no result: a retry runs
for my $c (['inband', { 'x-mock-error-after' => 2 }, 'the provider\'s error event'],
           ['died', { 'x-mock-die-after' => 2 }, 'cut by the upstream'])
{
    my ($key, $how, $what) = @$c;
    my %hh = ('x-mock-tokens' => 10, %$how);

    $r = http_post($ng->url('/v1/chat/completions'), $stream,
                   authorization => "Bearer $t->{key}", 'idempotency-key' => $key,
                   %hh);
    is($r->{status}, 200, "$what: 200");
    like($r->{content}, qr/"error"/, 'with an error event');

    $n = sent();
    $r = http_post($ng->url('/v1/chat/completions'), $stream,
                   authorization => "Bearer $t->{key}", 'idempotency-key' => $key,
                   %hh);
    ok(!replayed($r), "$what: its retry is not a replay");
    is(sent() - $n, 1, 'it ran again, upstream');

    # its key is free once its last byte is out, not once the request
    # ends: the client's retry comes first here
    $r = http_post($ng->url('/late/v1/chat/completions'), $stream,
                   authorization => "Bearer $t->{key}",
                   'idempotency-key' => "late-$key", %hh);
    like($r->{content}, qr/"error"/, "$what, a request that lives on: its error event");
    $n = sent();
    $r = http_post($ng->url('/late/v1/chat/completions'), $stream,
                   authorization => "Bearer $t->{key}",
                   'idempotency-key' => "late-$key", %hh);
    is($r->{status}, 200, 'its retry at once: 200')
        or diag($r->{content});
    ok(!replayed($r), 'not a replay, though the first has not ended');
    is(sent() - $n, 1, 'it ran again, upstream');
}


###############################################################################
# A first request whose worker dies: its joiners end, its key runs again

# the worker (of $ng's) whose descriptor is the socket's peer, or undef
sub worker_of {
    my ($ng, $c) = @_;
    my $cport = $c->sockport();

    for (1 .. 100) {
        my $inode;
        open(my $fh, '<', '/proc/net/tcp') or die "/proc/net/tcp: $!";
        while (<$fh>) {
            my @f = split;
            next unless @f > 9 && $f[1] =~ /:([0-9A-F]{4})$/
                        && hex($1) == $ng->{port};
            next unless $f[2] =~ /:([0-9A-F]{4})$/ && hex($1) == $cport;
            $inode = $f[9] if $f[9];
        }
        close($fh);

        if ($inode) {
            open(my $pf, '<', $ng->dir() . '/nginx.pid') or die "pid: $!";
            chomp(my $master = <$pf>);
            for my $pid (split(/\s+/, `pgrep -P $master`)) {
                for my $fd (glob("/proc/$pid/fd/*")) {
                    my $l = readlink($fd) // next;
                    return $pid if $l eq "socket:[$inode]";
                }
            }
        }

        sleep(0.05);
    }

    return undef;
}

# a connection accepted by the worker $w ($in) or by another (!$in)
sub connect_in {
    my ($ng, $w, $in) = @_;

    for (1 .. 64) {
        my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                      PeerPort => $ng->{port})
            or die "connect: $!";
        my $p = worker_of($ng, $c) // next;
        return $c if ($p == $w) == ($in ? 1 : 0);
        close($c);
    }

    die 'no connection in the worker wanted';
}

sub send_on {
    my ($c, $key, $headers, $b) = @_;
    my $json = encode_json($b);
    my $req = "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
        . "Connection: close\r\nContent-Type: application/json\r\n"
        . "Content-Length: " . length($json) . "\r\n"
        . "Authorization: Bearer $t->{key}\r\nIdempotency-Key: $key\r\n";
    $req .= "$_: $headers->{$_}\r\n" for sort keys %$headers;
    $c->syswrite("$req\r\n$json");
    return { sock => $c, raw => '' };
}

# reuseport: each worker its own socket, a connection to either by its port
my $ng3 = nginx(http => <<"EOF")->run();
    %%GATEWAY%%
$tiers
    llm_gateway_idempotency  zone=idem:4m retain=2s per_tenant=4m;

    server {
        listen  127.0.0.1:%%PORT%% reuseport;

        location = /v1/chat/completions {
            llm_gateway  zone=llm api=openai;
            proxy_pass   http://127.0.0.1:$mock->{port};
        }
    }
EOF

my $url3 = $ng3->url('/v1/chat/completions');

# a result past retain is none, though the sweep has not freed it yet (it
# frees two a request, oldest first: four are older)
is(ask("old$_", url => $url3)->{status}, 200, "result old$_") for 1 .. 5;
ok(replayed(ask('old5', url => $url3)), 'within retain: a replay');
sleep(2.5);
$n = sent();
$r = ask('old5', url => $url3);
is($r->{status}, 200, 'past retain: 200');
ok(!replayed($r), 'not a replay of a result past retain');
is(sent() - $n, 1, 'it ran');

# each request's sweep looks at a few entries, however many are kept (the
# debug log says how many)
my $log0 = length($ng3->error_log());
my $many = 0;
for my $i (1 .. 300) {
    $many++ if ask("many$i", url => $url3)->{status} == 200;
}
is($many, 300, '300 results');
my @looked = substr($ng3->error_log(), $log0) =~ /the sweep looked at (\d+)/g;
ok(@looked >= 300, 'a sweep for each (' . scalar(@looked) . ')');
my ($most) = sort { $b <=> $a } @looked, 0;
ok($most <= 8, "the most one looked at: $most");

my @killed;

# before its answer (the upstream waits 8 s), then in its stream
for my $c (['dead', { 'x-mock-tokens' => 5, 'x-mock-ttfb-ms' => 8000 }, undef],
           ['dead2', { 'x-mock-tokens' => 200, 'x-mock-delay-ms' => 100 },
            qr/tok2 /])
{
    my ($key, $hh, $until) = @$c;

    $n = sent();
    my $oc = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                   PeerPort => $ng3->{port}) or die "$!";
    my $w = worker_of($ng3, $oc);
    ok($w, "$key: the first request's worker, " . ($w // 'none'));
    $own = send_on($oc, $key, $hh, $stream);

    for (1 .. 200) { last if sent() > $n; sleep(0.05) }
    read_until($own, $until) if $until;

    # a joiner in another worker, one in the first's
    my $ja = send_on(connect_in($ng3, $w, 0), $key, $hh, $stream);
    my $jb = send_on(connect_in($ng3, $w, 1), $key, $hh, $stream);
    read_until($ja, $until) if $until;
    sleep(1);
    is(sent() - $n, 1, "$key: the joiners did not go upstream");

    push(@killed, $w) if kill('KILL', $w);

    $p = read_until($ja);
    if ($until) {
        is($p->{status}, 200, "$key: killed in its stream, the joiner had 200");
        ok($p->{complete}, 'it ended, with the last chunk');
        like(tail($p), qr/\n\ndata: \{"error":\{[^\n]*"code":"upstream_error"\}\}\n\n\z/,
             'after the terminal error event');
    } else {
        is($p->{status}, 502, "$key: killed before its answer, the joiner: 502");
        is(eval { decode_json($p->{body})->{error}{code} } // '',
           'upstream_error', 'upstream_error');
    }
    close($ja->{sock});
    close($jb->{sock});

    $n = sent();
    $r = http_post($ng3->url('/v1/chat/completions'), $stream,
                   authorization => "Bearer $t->{key}", 'idempotency-key' => $key,
                   'x-mock-tokens' => 5);
    is($r->{status}, 200, "$key: a retry after: 200, not 409");
    ok(!replayed($r), 'not a replay');
    is(sent() - $n, 1, 'it ran');
}

is(scalar(@killed), 2, 'two workers killed');


###############################################################################
# One tenant filling the zone evicts only its own results

my $ng2 = nginx(http => <<"EOF")->run();
    %%GATEWAY%%
$tiers
    llm_gateway_idempotency  zone=idem:64k retain=60s;

    server {
        listen  127.0.0.1:%%PORT%%;

        location = /v1/chat/completions {
            llm_gateway  zone=llm api=openai;
            proxy_pass   http://127.0.0.1:$mock->{port};
        }
    }
EOF

my $url2 = $ng2->url('/v1/chat/completions');

is(ask("victim$_", tenant => $u, url => $url2)->{status}, 200,
   "the victim's result $_") for 1 .. 3;

my $flood = 0;
for my $i (1 .. 150) {
    $flood++ if ask("flood$i", url => $url2)->{status} == 200;
}
is($flood, 150, 'another tenant stored 150 results in a 64k zone');

$n = sent();
$hit = 0;
for my $i (1 .. 3) {
    $r = ask("victim$i", tenant => $u, url => $url2);
    $hit++ if replayed($r);
}
is($hit, 3, "the victim's retries within retain: 3 of 3 replayed");
is(sent(), $n, 'none sent upstream again');

ok(replayed(ask('flood150', url => $url2)), "the flood's newest is kept");
ok(!replayed(ask('flood1', url => $url2)),
   'its oldest made room, within its share');

# a reload keeps the zone and what it holds
$ng2->reload();
ok(replayed(ask('victim1', tenant => $u, url => $url2)),
   'after a reload, still a replay');

# per_tenant= sets the share
for my $c (['per_tenant=16k', 0, qr/test is successful/],
           ['per_tenant=0', 1, qr/invalid parameter "per_tenant=0"/])
{
    my ($rc, $out) = nginx(http => <<"EOF")->test();
    %%GATEWAY%%
    llm_gateway_idempotency  zone=idem:64k $c->[0];
EOF
    is($rc ? 1 : 0, $c->[1],
       "$c->[0]: nginx -t " . ($c->[1] ? 'fails' : 'passes'));
    like($out, $c->[2], 'and says so');
}

$ng->no_alerts();
$ng2->no_alerts();
$ng3->no_alerts(alerts => [ killed_alerts(@killed) ]);

done_testing();
