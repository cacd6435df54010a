#!/usr/bin/perl

# What the gateway says of itself: llm_gateway_metrics in the Prometheus
# text format, parsed line by line, and llm_gateway_status as JSON and as
# a live page, drawn by headless Chromium twice under load.  Each figure is
# checked against what the requests did and what the ledger holds.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use File::Path qw(make_path);
use IO::Socket::INET;
use JSON::PP;
use LLMGW;
use Test::More;
use Time::HiRes qw(sleep time);

my $stack = stack();

my $few = new_tenant(tier => 'few');
my $one = new_tenant(tier => 'one');

my $ng = nginx(http => <<"EOF")->run();
    llm_gateway_zone      zone=llm:1m capacity=600000 inflight=64;
    llm_gateway_keys      $stack->{LLMGW_KEY_SNAPSHOT} secret=$stack->{LLMGW_KEY_SECRET};
    llm_gateway_accountd  unix:$stack->{LLMGW_ACCOUNTD_SOCKET};

    llm_gateway_tier  few  unpriced=allow tpm=600000 rpm=3;
    llm_gateway_tier  one  unpriced=allow tpm=6000 concurrency=1;

    llm_gateway_backend  mock  rpm=60000;

    server {
        listen  127.0.0.1:%%PORT%%;

        location = /v1/chat/completions {
            llm_gateway  zone=llm backend=mock;
            proxy_pass   http://127.0.0.1:%%MOCK%%;
        }

        location = /metrics {
            llm_gateway_metrics;
        }

        location /status {
            llm_gateway_status;
        }
    }
EOF

my $body = { model => 'm', max_tokens => 10,
             messages => [ { role => 'user', content => 'x' } ] };

sub ask {
    my ($t, %o) = @_;
    return http_post($ng->url('/v1/chat/completions'),
                     { %$body, %{ $o{body} // {} } },
                     authorization => "Bearer $t->{key}",
                     'x-mock-tokens' => 2);
}

sub get {
    my ($path) = @_;
    return HTTP::Tiny->new(timeout => 10)->get($ng->url($path));
}

# The exposition format, strictly: a family's HELP and TYPE before its
# samples, names and labels as the format has them, numbers as values.
# name{labels} => value, or undef and why.
sub scrape {
    my $r = get('/metrics');
    return (undef, "status $r->{status}") unless $r->{status} == 200;
    return (undef, "content type $r->{headers}{'content-type'}")
        unless $r->{headers}{'content-type'} =~ m{^text/plain; version=0\.0\.4};

    my (%m, %type, %help);
    my $name = qr/[a-zA-Z_:][a-zA-Z0-9_:]*/;
    my $label = qr/[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\["\\n])*"/;

    for my $line (split(/\n/, $r->{content})) {
        if ($line =~ /^# HELP ($name) \S/) {
            return (undef, "second HELP of $1") if $help{$1}++;
        } elsif ($line =~ /^# TYPE ($name) (counter|gauge)$/) {
            return (undef, "TYPE of $1 after its HELP only")
                unless $help{$1} && !$type{$1};
            $type{$1} = $2;
        } elsif ($line =~ /^($name)(\{$label(?:,$label)*\})? (-?\d+(?:\.\d+)?)$/) {
            return (undef, "a sample of $1 before its TYPE") unless $type{$1};
            return (undef, "a counter below 0: $line")
                if $type{$1} eq 'counter' && $3 < 0;
            return (undef, "twice: $1" . ($2 // '')) if exists $m{$1 . ($2 // '')};
            $m{$1 . ($2 // '')} = $3;
        } else {
            return (undef, "not the format: '$line'");
        }
    }

    return (\%m);
}

sub labels {
    my ($t, %more) = @_;
    my %l = (zone => 'llm', tenant => $t->{name}, tier => $t->{tier}, %more);
    return '{' . join(',', map { "$_=\"$l{$_}\"" }
                           grep { exists $l{$_} }
                           qw(zone tenant tier status reason kind)) . '}';
}

sub status_json {
    my $r = get('/status.json');
    return undef unless $r->{status} == 200;
    return eval { decode_json($r->{content}) };
}

sub tenant_of {
    my ($s, $t) = @_;
    return (grep { $_->{id} == $t->{id} } @{ $s->{tenants} // [] })[0];
}

# --- counters, against what the requests did ----------------------------------

is(ask($few)->{status}, 200, "request $_ of 3") for 1 .. 3;
is(ask($few)->{status}, 429, 'the fourth in the minute: 429, by requests');

is(ask($one, body => { max_tokens => 9000 })->{status}, 429,
   'a request larger than the bucket: 429, by tokens');

# concurrency=1: a slow stream holds the one slot

my $json = encode_json({ %$body, stream => JSON::PP::true });
my $slow = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                 PeerPort => $ng->port) or die;
print $slow "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
    . "Authorization: Bearer $one->{key}\r\n"
    . "x-mock-tokens: 10\r\nx-mock-delay-ms: 500\r\n"
    . "Content-Type: application/json\r\nConnection: close\r\n"
    . "Content-Length: " . length($json) . "\r\n\r\n$json";

# admitted once its headers come; it then lives 5 s, longer than what is
# read meanwhile takes on a busy machine
my $head = '';
sysread($slow, $head, 4096, length $head) or last while $head !~ /\r\n\r\n/;

is(ask($one)->{status}, 429, 'a second in flight: 429, by concurrency');

my ($m, $why) = scrape();
ok($m, 'the metrics are in the exposition format') or diag($why);
$m //= {};

is($m->{'llmgw_concurrency' . labels($one)}, 1,
   'llmgw_concurrency: the stream in flight');
ok(($m->{'llmgw_reserved_tokens' . labels($one)} // 0) >= 10,
   'llmgw_reserved_tokens: what it reserved ('
   . ($m->{'llmgw_reserved_tokens' . labels($one)} // 'none') . ')');

# the zone's capacity, shared by the two active tenants, weight 1 each,
# counted by their demand: a few tokens each, a small part of a weight
for my $check (
    [ '{zone="llm",kind="configured"}', 'llmgw_capacity_tokens_per_minute',
      600000 ],
    [ '{zone="llm",kind="now"}', 'llmgw_capacity_tokens_per_minute', 600000 ],
    [ '{zone="llm",kind="current"}', 'llmgw_capacity_inflight', 1 ],
    [ '{zone="llm",kind="configured"}', 'llmgw_capacity_inflight', 64 ],
    [ '{zone="llm",kind="ceiling"}', 'llmgw_capacity_inflight', 64 ],
    [ '{zone="llm",kind="tenants"}', 'llmgw_capacity_active_tenants', 2 ],
    [ '{zone="llm"}', 'llmgw_capacity_reductions_total', 0 ],
)
{
    my ($l, $name, $want) = @$check;
    is($m->{"$name$l"}, $want, "$name$l");
}

my $w = $m->{'llmgw_capacity_active_tenants{zone="llm",kind="weights"}'};
ok(defined $w && $w > 0 && $w < 0.1,
   'llmgw_capacity_active_tenants weights: parts of two weights of 1 ('
   . ($w // 'none') . ')');

# a share as if its own part were whole: all but the other's small part
my $share = $m->{'llmgw_capacity_share_tokens_per_minute' . labels($few)};
ok(defined $share && $share > 540000 && $share <= 600000,
   'llmgw_capacity_share_tokens_per_minute: ' . ($share // 'none'));

my $st = status_json();
ok($st, '/status.json is JSON');
is_deeply([ @{ ($st->{zones} // [])->[0] // {} }{qw(name capacity capacity_now
                                                  inflight_limit inflight
                                                  active_tenants)} ],
          [ 'llm', 600000, 600000, 64, 1, 2 ],
          'status.json: the zone, its capacity and ceiling, 1 in flight');
is(tenant_of($st, $few)->{share_tpm}, $share, 'status.json: a share');
my $t1 = tenant_of($st, $one) // {};
is($t1->{inflight}, 1, 'status.json: one in flight');
is($t1->{concurrency_limit}, 1, 'status.json: of a limit of 1');
ok(($t1->{reserved_tokens} // 0) >= 10, 'status.json: its tokens reserved');
is_deeply([ @{ $t1->{tpm} // {} }{qw(rate burst)} ], [ 6000, 9000 ],
          "status.json: the tier's bucket (burst 1.5 x tpm)");

local $/;
my $rest = <$slow>;
close($slow);

my $tf = tenant_of(status_json(), $few);
($m) = scrape();

for my $check (
    [ labels($few, status => '2xx'),      'llmgw_requests_total', 3 ],
    [ labels($few, status => '4xx'),      'llmgw_requests_total', 1 ],
    [ labels($few, reason => 'requests'), 'llmgw_rejected_total', 1 ],
    [ labels($few, reason => 'tokens'),   'llmgw_rejected_total', 0 ],
    [ labels($one, reason => 'tokens'),   'llmgw_rejected_total', 1 ],
    [ labels($one, reason => 'concurrency'), 'llmgw_rejected_total', 1 ],
    [ labels($one, reason => 'quota'),    'llmgw_rejected_total', 0 ],
    [ labels($one, status => '2xx'),      'llmgw_requests_total', 1 ],
    [ labels($one, status => '4xx'),      'llmgw_requests_total', 2 ],
    [ labels($one),                       'llmgw_concurrency',    0 ],
    [ labels($one),                       'llmgw_reserved_tokens', 0 ],
    [ labels($one),                       'llmgw_cost_picodollars_total', 0 ],
)
{
    my ($l, $name, $want) = @$check;
    is($m->{"$name$l"}, $want, "$name$l");
}

# the tokens, as the ledger has them

my ($in, $out) = db()->selectrow_array(
    'SELECT sum(input_tokens), sum(output_tokens) FROM llm.usage'
    . ' WHERE tenant_id = ?', undef, $few->{id});

is($m->{'llmgw_tokens_total' . labels($few, kind => 'input')}, $in,
   "llmgw_tokens_total input: the ledger's ($in)");
is($m->{'llmgw_tokens_total' . labels($few, kind => 'output')}, $out,
   "llmgw_tokens_total output: the ledger's ($out)");

# the backend: every admitted request went to it (6 of them served)
my ($b) = @{ status_json()->{backends} // [] };
is($b->{name}, 'mock', 'status.json: the backend');
is($b->{rpm}, 60000, 'with its limit');
is($b->{requests}, $m->{'llmgw_backend_requests_total{backend="mock"}'},
   "its requests, as the metrics say ($b->{requests})");
is($b->{queue}, 0, 'nobody waits');

is_deeply([ @{ $tf->{requests} }{qw(2xx 4xx)}, $tf->{rejected}{requests},
            @{ $tf->{tokens} }{qw(input output)} ],
          [ 3, 1, 1, $in, $out ], 'status.json: the same figures');

is($m->{'llmgw_journal_records{state="pending"}'}
   + $m->{'llmgw_journal_records{state="sent"}'},
   $m->{llmgw_journal_unacknowledged},
   'the records kept: pending and sent, as unacknowledged');

my @workers = grep { /^llmgw_accountd_connected\{pid="\d+"\}$/ } keys %$m;
ok(@workers >= 1, scalar(@workers) . ' workers say how they are connected');

# --- the page -------------------------------------------------------------------

my $page = get('/status');
is($page->{status}, 200, '/status: the page');
like($page->{headers}{'content-type'}, qr{^text/html}, 'as HTML');
is($page->{headers}{'cache-control'}, 'no-store', 'never from a cache');
unlike($page->{content}, qr/\b(?:src|href)\s*=|url\(|\@import|https?:/i,
       'no external assets');

is(HTTP::Tiny->new->request('POST', $ng->url('/status.json'))->{status},
   405, 'POST: 405');

# Chromium draws the page twice under load; the figures it shows change.

SKIP: {
    my ($chromium) = grep { -x } qw(/usr/bin/chromium /usr/bin/chromium-browser);
    skip('no chromium (make deps installs it)', 10) unless $chromium;

    my $dir = $ng->dir() . '/chromium';
    my $shots = "$FindBin::Bin/../build/screenshots";
    make_path("$dir/home", $shots);

    my $load = fork();
    if ($load == 0) {
        ask($few) for 1 .. 3;   # refused by rpm: counted all the same
        while (1) {
            ask($one);
            sleep(0.05);
        }
    }

    my @figures;

    for my $n (1, 2) {
        sleep(1.5);
        my $png = "$shots/status-$n.png";
        unlink($png);

        my $cmd = "HOME=$dir/home $chromium --headless=new --no-sandbox"
            . ' --disable-gpu --hide-scrollbars --no-first-run'
            . " --user-data-dir=$dir/profile --window-size=1600,900"
            . ' --virtual-time-budget=3000';
        my $dom = `$cmd --dump-dom ${\ $ng->url('/status')} 2>/dev/null`;
        system("$cmd --screenshot=$png ${\ $ng->url('/status')} "
               . '>/dev/null 2>&1');

        ok(-s $png && -s $png > 10000, "screenshot $n: $png ("
           . (-s $png // 0) . ' bytes)');

        # the row of the tenant under load: its requests, as drawn
        my ($row) = $dom =~ m{<tr><td class="l">\Q$one->{name}\E</td>(.*?)</tr>};
        my @cells = ($row // '') =~ m{<td>([^<]*)</td>}g;
        (my $requests = $cells[2] // '') =~ s/,//g;
        push(@figures, $requests);
        like($requests, qr/^\d+$/, "capture $n: the page drew $requests "
             . "requests of $one->{name}");

        # and the backend they went to
        my ($brow) = $dom =~ m{<tr><td class="l">mock</td>(.*?)</tr>};
        my @bcells = ($brow // '') =~ m{<td>(?:<[^>]*>)?([^<]*)}g;
        (my $sent = $bcells[2] // '') =~ s/,//g;
        ok($sent =~ /^\d+$/ && $sent > 0,
           "capture $n: the page drew the backend's $sent requests");

        # and the zone's capacity
        my ($zrow) = $dom =~ m{<tr><td class="l">llm</td>(.*?)</tr>};
        my @zcells = ($zrow // '') =~ m{<td>(?:<[^>]*>)*([^<]*)}g;
        is($zcells[0], '600,000', "capture $n: the page drew the zone's "
           . 'capacity');
    }

    kill('KILL', $load);
    waitpid($load, 0);

    ok($figures[1] > $figures[0],
       "the page's figures are live: $figures[0], then $figures[1]");
    isnt(`md5sum < $shots/status-1.png`, `md5sum < $shots/status-2.png`,
         'and the two screenshots differ');
}

$ng->no_alerts();

done_testing();
