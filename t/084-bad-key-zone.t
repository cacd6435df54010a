#!/usr/bin/perl

# Bad-key counters cannot take the memory admission needs.  Behind realip
# (or on IPv6) every client address that sends a bad key gets a counter;
# they live in a store of their own (llm_gateway_bad_keys zone=, by
# default one per llm_gateway_zone), the least recently seen evicted when
# it is full, so that a flood from many addresses counts less precisely
# but never refuses a valid key.  The floods come through a trusted proxy
# (X-Forwarded-For), as wrk sends them (t/data/bad-keys.lua).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use HTTP::Tiny;
use LLMGW;
use Test::More;
use Time::HiRes qw(sleep time);

my $s = stack();
my $first = new_tenant(tier => 'pro');
my $during = new_tenant(tier => 'pro');
my $after = new_tenant(tier => 'pro');

my $ng = nginx(log_level => 'warn', http => <<'EOF')->run();
    %%GATEWAY%%
    llm_gateway_tier  pro  unpriced=allow tpm=100000000;
    llm_gateway_reject_log_level  info;

    llm_gateway_zone  zone=v6:1m;

    server {
        listen      127.0.0.1:%%PORT%%;
        access_log  off;

        set_real_ip_from  127.0.0.1;
        real_ip_header    X-Forwarded-For;

        location = /v1/chat/completions {
            llm_gateway           zone=llm;
            llm_gateway_bad_keys  3 window=60s;
            proxy_pass            http://127.0.0.1:%%MOCK%%;
        }

        location = /v1/v6 {
            llm_gateway           zone=v6;
            llm_gateway_bad_keys  3 window=60s zone=v6bad:64k;
            proxy_pass            http://127.0.0.1:%%MOCK%%/v1/chat/completions;
        }

        location = /v1/v48 {
            llm_gateway           zone=v6;
            llm_gateway_bad_keys  3 window=60s zone=v48bad:64k
                                  ipv6_prefix=48;
            proxy_pass            http://127.0.0.1:%%MOCK%%/v1/chat/completions;
        }

        location = /metrics {
            llm_gateway_metrics;
        }
    }
EOF

my $http = HTTP::Tiny->new(timeout => 30, keep_alive => 0);

sub ask {
    my ($key, $from, $path) = @_;
    return http_post($ng->url($path // '/v1/chat/completions'),
                     { model => 'mock-a', max_tokens => 5,
                       messages => [ { role => 'user', content => 'hi' } ] },
                     authorization => "Bearer $key",
                     $from ? ('x-forwarded-for' => $from) : ());
}

sub code {
    my ($r) = @_;
    return "$r->{status} " . ((json_body($r) // {})->{error}{code} // '-');
}

sub tally {
    my ($by) = @_;
    return join(', ', map { "$_ x $by->{$_}" } sort keys %$by);
}

# n valid requests of a tenant: how many of each status
sub valid {
    my ($t, $n, $from) = @_;
    my %by;
    $by{ ask($t->{key}, $from)->{status} }++ for 1 .. $n;
    return tally(\%by);
}

sub metric {
    my ($name, $zone) = @_;
    my $m = $http->get($ng->url('/metrics'))->{content} // '';
    return $m =~ /^\Q$name\E\{zone="\Q$zone\E"\} (\d+)$/m ? $1 : undef;
}

# wrk's flood for $secs s over $addrs addresses (from $v6 on, IPv6),
# address $from first: its output, to be read by flood_end()
sub flood {
    my ($secs, $addrs, $v6, $from) = @_;
    my $url = $ng->url('/v1/chat/completions');
    $from //= 0;
    open(my $w, '-|', "wrk -t2 -c40 -d${secs}s -s "
         . "$FindBin::Bin/data/bad-keys.lua $url -- 2 $addrs $v6 $from 2>&1")
        or die "wrk: $!";
    return $w;
}

# the requests sent, and how many addresses from the first on got one
sub flood_end {
    my ($w) = @_;
    my $out = do { local $/; <$w> };
    close($w);
    my ($sent, $covered) = $out =~ /flood: sent (\d+);.* covered (\d+)/
        or diag($out);
    diag($_) for grep { /flood:|Requests\/sec/ } split(/\n/, $out);
    return ($sent // 0, $covered // 0);
}

my $store = 'llm_gateway_bad_keys:llm';

# 1. the finding: a flood from 30,000 addresses, in floods of 5 s (one,
# but on a busy machine), then a tenant whose node the zone has yet to make
my ($sent, $covered, $floods) = (0, 0, 0);
while ($covered < 30000 && $floods++ < 6) {
    my ($s, $c) = flood_end(flood(5, 30000, 30000, $covered));
    $sent += $s;
    $covered += $c;
}
cmp_ok($covered, '>=', 30000, "$floods floods of 5 s sent $sent bad keys, "
       . 'each of the 30,000 addresses at least once');
is(valid($first, 20, '192.0.2.1'), '200 x 20',
   'then 20 valid requests of a tenant new to the zone: all 200');

my $ev = metric('llmgw_bad_key_evictions_total', $store);
ok(defined $ev && $ev > 0, 'the store of counters was full and evicted '
   . 'the least recently seen (llmgw_bad_key_evictions_total '
   . ($ev // 'absent') . ')');

# the limit still holds for an address that keeps at it
is(code(ask(forge_key(), '10.250.0.1')), '401 invalid_api_key',
   "a bad key $_ of 3 from 10.250.0.1: 401") for 1 .. 3;
is(code(ask(forge_key(), '10.250.0.1')), '429 too_many_bad_keys',
   '  the 4th: 429');

# 2. 60 s of bad keys from 100,000 addresses (90,000 IPv4, 10,000 IPv6
# /64s) while a tenant asks about 20 times a second
my $w = flood(60, 100000, 90000);
my (%by, $n);
my $end = time() + 60;
while (time() < $end) {
    $by{ ask($during->{key}, $n++ % 2 ? '192.0.2.2' : undef)->{status} }++;
    sleep(0.05);
}
($sent, $covered) = flood_end($w);
cmp_ok($covered, '>=', 100000, "the 60 s flood sent $sent bad keys, each of "
       . 'the 100,000 addresses at least once');
is(tally(\%by), "200 x $n", "meanwhile, $n valid requests: all 200");

my $size = metric('llmgw_bad_key_addresses', $store);
ok(defined $size && $size > 0 && $size < 100000,
   'the store holds what its zone holds: ' . ($size // 'absent')
   . ' addresses counted');

# 3. the state survives a reload: an address locked before it is still
# locked, the limit still counts, valid keys are still served
is(code(ask(forge_key(), '10.250.0.3')), '401 invalid_api_key',
   "after the flood, a bad key $_ of 3 from 10.250.0.3: 401") for 1 .. 3;
is(code(ask(forge_key(), '10.250.0.3')), '429 too_many_bad_keys',
   '  the 4th: 429');

$ng->reload();
is(code(ask(forge_key(), '10.250.0.3')), '429 too_many_bad_keys',
   'after a reload, 10.250.0.3 is still locked: 429');
is(code(ask(forge_key(), '10.250.0.2')), '401 invalid_api_key',
   "after a reload, a bad key $_ of 3 from 10.250.0.2: 401") for 1 .. 3;
is(code(ask(forge_key(), '10.250.0.2')), '429 too_many_bad_keys',
   '  the 4th: 429');
is(valid($after, 20, '192.0.2.3'), '200 x 20',
   'after the reload, 20 valid requests of a tenant new to the zone: '
   . 'all 200');

# 4. IPv6 counts by /64 (ipv6_prefix=, here /48 too): one host owns it
is(code(ask(forge_key(), "2001:db8:1:1::$_", '/v1/v6')),
   '401 invalid_api_key', "a bad key from 2001:db8:1:1::$_: 401") for 1 .. 3;
is(code(ask(forge_key(), '2001:db8:1:1::99', '/v1/v6')),
   '429 too_many_bad_keys', '  a 4th from another host of the /64: 429');
is(code(ask(forge_key(), '2001:db8:1:2::1', '/v1/v6')), '401 invalid_api_key',
   '  one from the next /64: 401, its own count');
is(code(ask(forge_key(), "2001:db8:2:$_\::1", '/v1/v48')),
   '401 invalid_api_key', "ipv6_prefix=48: from 2001:db8:2:$_\::1: 401")
    for 1 .. 3;
is(code(ask(forge_key(), '2001:db8:2:ff::1', '/v1/v48')),
   '429 too_many_bad_keys', '  a 4th from another /64 of the /48: 429');
is(code(ask(forge_key(), '::ffff:10.9.9.9', '/v1/v6')), '401 invalid_api_key',
   'an IPv4-mapped address is its IPv4 address: 401');
is(code(ask($first->{key}, '2001:db8:1:1::7', '/v1/v6')), '200 -',
   'a valid key from the locked /64: still served (checks=)');

# bad configuration
for my $case (['zone=x', qr/invalid zone size "zone=x"/],
              ['zone=x:1k', qr/zone "zone=x:1k" is too small/],
              ['ipv6_prefix=0', qr/invalid ipv6_prefix "ipv6_prefix=0"/],
              ['ipv6_prefix=129', qr/invalid ipv6_prefix "ipv6_prefix=129"/])
{
    my $bad = nginx(http => <<"EOF");
    %%GATEWAY%%
    llm_gateway_tier      pro  unpriced=allow tpm=600000;
    llm_gateway_bad_keys  3 $case->[0];
EOF
    my ($rc, $out) = $bad->test();
    isnt($rc, 0, "nginx -t refuses $case->[0]");
    like($out, $case->[1], '  and says why');
}

$ng->no_alerts();

done_testing();
