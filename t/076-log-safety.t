#!/usr/bin/perl

# What reaches the error log, and what a client can put there.  Every
# shipped configuration logs at notice or above (at info nginx itself
# writes a rejected header line with its value: a key), and a duplicate
# Authorization stays out of the shipped log; a client's string (the
# model) is escaped and bounded in the module's log lines and in the
# header it writes (x-llm-downgraded-from); refusal lines are bounded a
# second per client address and per tenant, the rest counted.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use IO::Socket::INET;
use LLMGW;
use Test::More;
use Time::HiRes qw(time sleep);

my $top = "$FindBin::Bin/..";

sub slurp {
    my ($f) = @_;
    open(my $fh, '<', $f) or die "$f: $!";
    local $/;
    return <$fh>;
}

# --- every shipped configuration at notice or above -----------------------------

my %below = map { $_ => 1 } qw(debug info);

my %confs = (
    'scripts/nginx.conf.in' => slurp("$top/scripts/nginx.conf.in"),
    'docker/nginx.conf'     => slurp("$top/docker/nginx.conf"),
);

# the README's nginx blocks, and any example the packages ship
my $i = 0;
my $readme = slurp("$top/README.md");
$confs{'README.md block ' . ++$i} = $1
    while $readme =~ /^```nginx\n(.*?)^```/msg;
$confs{'README.md, every line'} = $readme;
for my $f (glob("$top/debian/*.conf $top/debian/examples/* $top/bench/*.conf"))
{
    $confs{$f =~ s{^\Q$top\E/}{}r} = slurp($f);
}

cmp_ok(scalar(keys %confs), '>=', 3, 'configurations found: '
       . join(', ', sort keys %confs));

for my $name (sort keys %confs) {
    my @low;
    for (split(/\n/, $confs{$name})) {
        next if /^\s*#/;
        push(@low, $_) if /\berror_log\s+\S+\s+(\w+)/ && $below{$1};
    }
    is_deeply(\@low, [], "$name: no error_log below notice");
}

# the benchmarks run the gateway at warn
for my $f (glob("$top/bench/*.pl")) {
    my @levels = slurp($f) =~ /log_level\s*=>\s*'(\w+)'/g;
    is_deeply([ grep { $below{$_} } @levels ], [],
              ($f =~ s{^\Q$top\E/}{}r) . ': no log_level below notice');
}

my $s = stack();

# --- the shipped level: a duplicate Authorization is not logged -----------------

my $t = new_tenant(tier => 'free');
my $other = new_tenant(tier => 'free');

sub raw {
    my ($port, $head) = @_;
    my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port)
        or die "connect: $!";
    my $body = '{"model":"mock-a","max_tokens":5,"messages":[]}';
    $c->syswrite("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                 . "Connection: close\r\nContent-Type: application/json\r\n"
                 . "Content-Length: " . length($body) . "\r\n$head\r\n$body");
    my $raw = '';
    while ($c->sysread($raw, 65536, length $raw)) { }
    close($c);
    return LLMGW::http_parse($raw);
}

{
    my $ng = LLMGW::Nginx->demo()->run();

    my $r = raw($ng->port, "Authorization: Bearer $t->{key}\r\n"
                           . "Authorization: Bearer $other->{key}\r\n");
    is($r->{status}, 400, 'a duplicate Authorization: 400');

    $r = raw($ng->port, "Authorization: Bearer $t->{key}\r\n"
                        . "X-Bad\x01Name: $other->{key}\r\n");
    ok($r->{status}, "a header line with a bad byte: $r->{status}");

    $ng->stop();
    my $log = $ng->error_log();

    for my $k ($t, $other) {
        my $part = substr($k->{key}, 11, 16);
        unlike($log, qr/\Q$part\E/, 'nginx.conf.in: no part of a key in '
               . 'the error log');
    }

    $ng->no_alerts();
}

# --- a client's string, escaped and bounded --------------------------------------

my $narrow = new_tenant(tier => 'pro', args => [ '--models', 'mock-a' ]);
# the model below costs $1,000 a million tokens, more than a cent's cap
# pays for; the tier's cheaper one, $1 and $2
my $model = 'mock-"q\\' . ('b' x 80);
db()->do(q{INSERT INTO llm.prices (model, effective_from, input_per_mtok,
                                   output_per_mtok)
           VALUES (?, '2000-01-01', 1000000000, 1000000000),
                  (?, '2000-01-01', 1000000, 2000000)
           ON CONFLICT DO NOTHING}, undef, $model, "mock-cheap-076");

my $thrifty = new_tenant(tier => 'thrifty');
accountd('tenant', 'update', '--name', $thrifty->{name}, '--daily-cap-usd',
         '0.01');
snapshot_caps($s->{LLMGW_KEY_SNAPSHOT}, $thrifty->{key_id}, 't');

my $flooder = new_tenant(tier => 'pro', args => [ '--models', 'mock-a' ]);

my $ng = nginx(http => <<'EOF')->run();
    %%GATEWAY%%
    llm_gateway_tier  pro      tpm=600000000;
    llm_gateway_tier  thrifty  tpm=600000000  downgrade=mock-cheap-076;

    llm_gateway_zone  zone=flood:1m;

    server {
        listen  127.0.0.1:%%PORT%%;

        # the server's: realip runs before the gateway's handler
        set_real_ip_from  127.0.0.1;
        real_ip_header    X-Forwarded-For;

        location = /v1/chat/completions {
            llm_gateway  zone=llm;
            proxy_pass   http://127.0.0.1:%%MOCK%%;
        }

        location = /v1/flood {
            llm_gateway                   zone=flood;
            llm_gateway_bad_keys          3 checks=0;
            llm_gateway_reject_log_rate   2;
            llm_gateway_reject_log_level  warn;
            proxy_pass  http://127.0.0.1:%%MOCK%%/v1/chat/completions;
        }

        # every request from an address of its own: the tenant's bound
        location = /v1/tenant {
            llm_gateway                   zone=flood;
            llm_gateway_reject_log_rate   2;
            llm_gateway_reject_log_level  warn;
            proxy_pass  http://127.0.0.1:%%MOCK%%/v1/chat/completions;
        }

        location = /metrics {
            llm_gateway_metrics;
        }
    }
EOF

sub ask {
    my ($path, $key, $model, %h) = @_;
    return http_post($ng->url($path),
                     { model => $model, max_tokens => 5,
                       messages => [ { role => 'user', content => 'hi' } ] },
                     authorization => "Bearer $key", %h);
}

my @models = (
    "x\r\n2026/12/01 00:00:00 [alert] 1#1: forged line",
    "y\e[31mred\e[0m",
    "z\r\nSet-Cookie: session=stolen",
    "m\x{e9}\x{2603}",
    'a' x 120,
    'a' x 300,
);

for my $m (@models) {
    my $r = ask('/v1/chat/completions', $narrow->{key}, $m);
    ok($r->{status} == 403 || $r->{status} == 400,
       'a model with control bytes, non-ASCII or 120 and 300 bytes: '
       . 'refused, '
       . $r->{status});
    ok(!exists $r->{headers}{'set-cookie'}, '  and no Set-Cookie');
}

my $log = $ng->error_log();
my @lines = grep { /llm gateway refused/ } split(/\n/, $log);
cmp_ok(scalar(@lines), '>=', 1, 'refusals logged: ' . scalar(@lines));
unlike($log, qr/^2026\/12\/01 00:00:00 \[alert\]/m, 'no forged log line');
unlike($log, qr/^Set-Cookie/m, 'no line begins with what the client wrote');
unlike($log, qr/\e/, 'no escape byte in the log');
unlike($log, qr/[\x80-\xff]/, 'no byte beyond ASCII in the log');
unlike($log, qr/a{65}/, 'a model of 120 bytes is cut at 64 bytes');
like($log, qr/"a{64}\.\.\."/, '  and "..." says so');
# inspection refuses a model with CR LF (400) before it could be logged; the
# escaping is what would hold if it did not
ok(!grep({ /\r/ } grep { /llm gateway/ } split(/\n/, $log)),
   "no CR in any of the gateway's lines");

# the header written with a client's string: escaped, bounded
my $want = substr($model, 0, 64);
$want =~ s/(["\\])/sprintf('\\x%02x', ord $1)/ge;
$want .= '...';

my $r;
for (1 .. 100) {
    $r = ask('/v1/chat/completions', $thrifty->{key}, $model);
    last if $r->{status} == 200;
    sleep(0.1);
}
is($r->{status}, 200, 'a cap that cannot pay for the model: downgraded, 200');
is($r->{headers}{'x-llm-downgraded-from'}, $want,
   "x-llm-downgraded-from: the model escaped, 64 bytes and '...'");

# --- a flood of refusals, a few lines ---------------------------------------------

sub flood_lines {
    return scalar(grep { /llm gateway refused/ && /\Q$_[0]\E/ }
                  split(/\n/, $ng->error_log()));
}

sub suppressed {
    my ($by) = @_;
    my $m = HTTP::Tiny->new->get($ng->url('/metrics'))->{content} // '';
    return $m =~ /^llmgw_log_suppressed_total\{zone="flood",by="$by"\} (\d+)$/m
           ? $1 : undef;
}

my $n = 200;
my $t0 = time();
my %status;
for (1 .. $n) {
    $status{ ask('/v1/flood', forge_key(), 'mock-a')->{status} }++;
}
my $secs = time() - $t0;

is($status{429}, $n - 3, "$n bad keys: 3 refused with 401, the rest 429");
my $lines = flood_lines('too_many_bad_keys') + flood_lines('invalid API keys');
my $most = 2 * (int($secs) + 2);
cmp_ok($lines, '<=', $most, "their log lines: $lines in ${\ sprintf('%.1f', $secs)} s, "
       . "at most 2 a second");
cmp_ok($lines, '>=', 1, '  but some');
like($ng->error_log(), qr/\[warn\][^\n]*too many requests with invalid/i,
     '  at llm_gateway_reject_log_level warn');
my $sup = suppressed('address') // -1;
is($sup, $n - 3 - $lines, "llmgw_log_suppressed_total{by=\"address\"}: $sup, "
   . 'the lines left out');

# one tenant from many addresses: its own bound
$t0 = time();
for my $k (1 .. 100) {
    ask('/v1/tenant', $flooder->{key}, 'mock-z',
        'x-forwarded-for' => "10.9." . int($k / 250) . '.' . ($k % 250 + 1));
}
$secs = time() - $t0;
$lines = flood_lines('mock-z');
$most = 2 * (int($secs) + 2);
cmp_ok($lines, '<=', $most, "a tenant's 100 refusals from 100 addresses: "
       . "$lines lines, at most 2 a second");
$sup = suppressed('tenant') // -1;
is($sup, 100 - $lines, "llmgw_log_suppressed_total{by=\"tenant\"}: $sup");

# the model's text, escaped within the refusal's own line
$ng->no_alerts(alerts => [ qr/refused with \d+: .*forged line/ ]);

done_testing();
