#!/usr/bin/perl

# A zone too small for every tenant: the least recently used idle tenants
# are evicted and every request is still admitted; an evicted tenant comes
# back with a full bucket.  Keys made by plain SQL reach the workers by
# themselves (accountd pushes them).

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Digest::SHA qw(hmac_sha256);
use LLMGW;
use Test::More;
use Time::HiRes qw(sleep);

my $s = stack();

my $first = new_tenant(tier => 'evict');

my $ng = nginx(log_level => 'warn', http => <<'EOF')->run();
    %%GATEWAY%%
    llm_gateway_zone  zone=small:32k;
    llm_gateway_tier  evict  unpriced=allow tpm=6000 burst=9000;
    llm_gateway_reject_log_level  info;

    server {
        listen      127.0.0.1:%%PORT%%;
        access_log  off;

        location = /v1/chat/completions {
            llm_gateway  zone=small;
            proxy_pass   http://127.0.0.1:%%MOCK%%;
        }
    }
EOF

sub ask {
    my ($key, $max) = @_;
    return http_post($ng->url('/v1/chat/completions'),
                     { model => 'm', max_tokens => $max,
                       messages => [ { role => 'user', content => 'hi' } ] },
                     authorization => "Bearer $key", 'x-mock-tokens' => $max);
}

# the first tenant spends 4,007 of its 9,000
my $r = ask($first->{key}, 4000);
my $left = $r->{headers}{'x-ratelimit-remaining-tokens'};
is($left, 9000 - 4007, 'the first tenant spent 4,007');

# 400 more tenants, made by plain SQL in one transaction
my $secret = do {
    open(my $fh, '<', $s->{LLMGW_KEY_SECRET}) or die;
    local $/;
    my $hex = <$fh>;
    $hex =~ s/\s+//g;
    pack('H*', $hex);
};

my @keys;
db()->begin_work();
for my $i (1 .. 400) {
    my $key = forge_key();
    my ($tid) = db()->selectrow_array(
        'INSERT INTO llm.tenants (name, tier) VALUES (?, ?) RETURNING tenant_id',
        undef, "z$$-$i", 'evict');
    db()->do('INSERT INTO llm.api_keys (tenant_id, key_hash, display_prefix,'
             . " tier) VALUES (?, decode(?, 'hex'), ?, ?)", undef, $tid,
             unpack('H*', hmac_sha256($key, $secret)), substr($key, 0, 15),
             'evict');
    push(@keys, $key);
}
db()->commit();

# the keys reach the gateway in one set, as accountd pushes it
for (1 .. 100 * time_scale()) {
    last if ask($keys[-1], 10)->{status} != 401;
    sleep(0.1);
}

my %status;
$status{ ask($_, 10)->{status} }++ for @keys;

is_deeply(\%status, { 200 => 400 },
          '400 tenants in a zone for far fewer: every one admitted');

# evicted while idle, the first tenant comes back full
$r = ask($first->{key}, 10);
is($r->{headers}{'x-ratelimit-remaining-tokens'}, 9000 - 17,
   'the first tenant was evicted LRU-first and comes back with a full bucket');

db()->do('DELETE FROM llm.api_keys WHERE tenant_id IN'
         . ' (SELECT tenant_id FROM llm.tenants WHERE name LIKE ?)',
         undef, "z$$-%");

$ng->no_alerts();

done_testing();
