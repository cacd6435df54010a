#!/usr/bin/perl

# A key change reaches every running nginx worker within a second, with no
# reload: accountd hears it from PostgreSQL (LISTEN/NOTIFY) and pushes the
# new key set to each worker's connection.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use IO::Socket::INET;
use LLMGW;
use Test::More;
use Time::HiRes qw(sleep time);

stack();

my $early = new_tenant(tier => 'pro');

my $ng = nginx(workers => 2, http => <<'EOF')->run();
    %%GATEWAY%%
    llm_gateway_tier  pro  unpriced=allow tpm=6000000;

    # this test sends many bad keys on purpose
    llm_gateway_bad_keys  off;

    server {
        # the kernel spreads the connections over both workers
        listen  127.0.0.1:%%PORT%% reuseport;

        location = /v1/chat/completions {
            llm_gateway  zone=llm;
            proxy_pass   http://127.0.0.1:%%MOCK%%;
            add_header   x-worker $pid always;
        }
    }
EOF

# 24 requests, each on a new connection: how each worker answered
sub by_worker {
    my ($key) = @_;
    my %seen;

    for (1 .. 24) {
        my $r = http_post($ng->url('/v1/chat/completions'),
                          { model => 'm', max_tokens => 5,
                            messages => [ { role => 'user', content => 'x' } ] },
                          authorization => "Bearer $key",
                          'x-mock-tokens' => 1);
        $seen{ $r->{headers}{'x-worker'} // '?' }{ $r->{status} }++;
    }

    return \%seen;
}

# every worker answered, and every answer was $status
sub everywhere {
    my ($seen, $status, $name) = @_;

    my @workers = grep { $_ ne '?' } keys %$seen;
    my @other = grep { $_ != $status } map { keys %$_ } values %$seen;

    ok(@workers == 2 && !@other, $name)
        or diag(explain($seen));
}

# wait for the workers' connections to accountd and the first set
sleep(1);

everywhere(by_worker($early->{key}), 200, 'a key from the snapshot works');

# created while nginx runs
my $late = new_tenant(tier => 'pro');
sleep(1);
everywhere(by_worker($late->{key}), 200,
           'a key created after start works on every worker after 1 s');

# revoked by plain SQL, as an operator might
db()->do('UPDATE llm.api_keys SET revoked_at = now() WHERE tenant_id = ?',
         undef, $late->{id});
sleep(1);
everywhere(by_worker($late->{key}), 401,
           'revoked: rejected on every worker after 1 s');

# rotation: the new key at once, the old one until its grace ends (8 s:
# the 48 requests before it ends take well under that on a busy machine)
my @out = split(/\n/, accountd('key', 'rotate',
                               key_id($early), '--grace', '8s'));
my $new = $out[-1];
my ($grace_end) = db()->selectrow_array(
    'SELECT extract(epoch FROM expires_at) FROM llm.api_keys'
    . ' WHERE key_id = ?', undef, key_id($early));

sleep(1);
everywhere(by_worker($new), 200, 'rotated: the new key works after 1 s');
everywhere(by_worker($early->{key}), 200, 'the old key works in its grace');

sleep(0.1) while time() < $grace_end + 1.5;
everywhere(by_worker($early->{key}), 401, 'and stops when the grace ends');
everywhere(by_worker($new), 200, 'while the new key goes on');

# the request ids of both workers: each worker draws its own, none twice,
# and each is its row's in the ledger
my (%ids, %workers);
for (1 .. 200) {
    # a client's own id, the same every time, is not the request's
    my $r = http_post($ng->url('/v1/chat/completions'),
                      { model => 'm', max_tokens => 5,
                        messages => [ { role => 'user', content => 'x' } ] },
                      authorization => "Bearer $new", 'x-mock-tokens' => 1,
                      'x-request-id' => 'c0ffee' x 5 . 'aa');
    $ids{ $r->{headers}{'x-request-id'} // '' }++;
    $workers{ $r->{headers}{'x-worker'} // '?' }++;
}
is(scalar(keys %workers), 2, 'both workers served the ids\' requests');
is(scalar(grep { /^[0-9a-f]{32}\z/ && $ids{$_} == 1 } keys %ids), 200,
   '200 request ids, 32 hex digits each, none twice, none the client\'s');
is(scalar(grep { @{ usage_rows($_, 10) } == 1 } keys %ids), 200,
   'each the id of one row of the ledger');

$ng->no_alerts();

done_testing();

sub key_id {
    my ($t) = @_;
    return db()->selectrow_array(
        'SELECT key_id FROM llm.api_keys WHERE tenant_id = ? ORDER BY key_id',
        undef, $t->{id});
}
