#!/usr/bin/perl

# The upstream side, one backend: the gateway paces its own requests to a
# provider with RPM and TPM limits of its own (mockllm -r -s -T), so that
# the provider never refuses; and when a provider does refuse, its 429 is
# read: busy for seconds, or its quota spent until the reset.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use HTTP::Tiny;
use JSON::PP;
use Chaos qw(workers);
use LLMGW;
use List::Util qw(max min sum);
use POSIX qw(ceil);
use Test::More;
use Time::HiRes qw(sleep time);

stack();

my $t = new_tenant(tier => 'big');

# the providers: limits per minute, the first also per second as real
# ones enforce them (20 a second); a daily quota of 4 s periods
my $rpm = mockllm('-r', 1200, '-s', 1000);
my $tpm = mockllm('-T', 2000);
my $one = mockllm('-r', 1);
my $day = mockllm('-D', 150, '-P', 3);

# a location for each backend, /NAME/v1/chat/completions
my $paced = join('', map { <<"EOF" } qw(rpm tpm slow one day));
        location = /$_/v1/chat/completions {
            llm_gateway  zone=llm backend=$_;
            proxy_pass   http://\$llm_upstream/v1/chat/completions;
        }

EOF

my $ng = nginx(http => <<"EOF")->run();
    %%GATEWAY%%
    llm_gateway_tier  big  unpriced=allow tpm=100000000 burst=100000000 max_tokens=100000;

    # under the provider's 1,200: 60 ms apart, 16.7 a second of its 20,
    # so that requests a busy machine bunches on their way still fit
    llm_gateway_backend  rpm  rpm=1000 queue=300 max_wait=60s;
    llm_gateway_backend  tpm  tpm=2000 queue=100 max_wait=60s;
    llm_gateway_backend  slow  upstream=rpm  rpm=20 queue=1 max_wait=5s;
    llm_gateway_backend  one  max_wait=2s;
    llm_gateway_backend  day;

    upstream rpm { server 127.0.0.1:$rpm->{port}; keepalive 32; }
    upstream tpm { server 127.0.0.1:$tpm->{port}; keepalive 32; }
    upstream one { server 127.0.0.1:$one->{port}; }
    upstream day { server 127.0.0.1:$day->{port}; }

    log_format  paced  '\$llm_backend \$llm_queue_ms \$status';

    server {
        listen  127.0.0.1:%%PORT%%;

        access_log  %%NGINX%%/paced.log paced;

$paced
        # the same providers, unpaced: what the pacing saves
        location ~ ^/raw/(rpm|tpm)/ {
            llm_gateway  zone=llm;
            proxy_pass   http://\$1/v1/chat/completions;
        }

        location = /metrics {
            llm_gateway_metrics;
        }
    }
EOF

my $http = HTTP::Tiny->new(timeout => 30);

sub body {
    my ($max) = @_;
    return { model => 'gpt-mock', max_tokens => $max,
             messages => [ { role => 'user', content => 'x' } ] };
}

sub limits {
    my ($m) = @_;
    return decode_json($http->get("$m->{url}/limits")->{content});
}

sub reset_limits {
    my ($m) = @_;
    $http->post("$m->{url}/limits/reset");
}


sub codes {
    my %n;
    $n{ $_->{status} }++ for @_;
    return join(' ', map { "$_ x$n{$_}" } sort keys %n);
}

my @refused;

my %auth = (authorization => "Bearer $t->{key}", 'x-mock-tokens' => 4);


###############################################################################
# RPM: a burst of 200 leaves 60 ms apart; the provider refuses none

my @r = burst($ng->url('/rpm/v1/chat/completions'), 200, body(16), \%auth);

is(codes(@r), '200 x200', 'a burst of 200, paced: every one 200');

my $l = limits($rpm);
is($l->{refused_rpm}, 0, 'the provider refused none (RPM, per second)');
is($l->{admitted}, 200, 'the provider served all 200');

my $span = $l->{last_ms} - $l->{first_ms};
my $least = 199 * 60;

# the limit: 199 spacings after the first; the clock of a busy machine
# may add a few ms to each, never take any away
cmp_ok($span, '>=', $least - 199 * 2,
       "the last started no earlier than the spacing allows ($span ms)");
cmp_ok($span, '<=', $least + 2000 * time_scale(),
       "the last started no later than the limit allows ($span ms, "
       . "limit $least)");

note("paced burst of 200: the provider saw them over $span ms "
     . "(199 spacings of 60 ms: $least)");

# less the time the burst took to arrive, which a busy machine stretches
my @q = map { $_->{headers}{'x-llmgw-queue-ms'} // 0 } @r;
cmp_ok(max(@q), '>=', $least - 2000 * time_scale(),
       'the last waited about 12 s: ' . max(@q));
is(scalar(grep { $_->{headers}{'x-llmgw-backend'} eq 'rpm' } @r), 200,
   'each says its backend');

is($ng->metric('llmgw_backend_requests_total\{backend="rpm"\}'), 200,
   'metrics: 200 sent to it');
cmp_ok($ng->metric('llmgw_backend_waited_total\{backend="rpm"\}'), '>=', 190,
       'metrics: most of them waited');
is($ng->metric('llmgw_backend_queue\{backend="rpm"\}'), 0,
   'metrics: queue empty');
is($ng->metric('llmgw_backend_window\{backend="rpm",kind="requests"\}'), 200,
   "metrics: the minute's 200 requests");

like($ng->error_log, qr/waited \d+ ms for backend "rpm"/,
     'the error log says how long one waited');

# the same burst unpaced: the provider refuses, which the pacing saved
reset_limits($rpm);
sleep(1.1);

@r = burst($ng->url('/raw/rpm/v1/chat/completions'), 200, body(16), \%auth);
$l = limits($rpm);
cmp_ok($l->{refused_rpm}, '>', 100,
       "unpaced, the provider refuses: $l->{refused_rpm} of 200");
note("unpaced: " . codes(@r) . ", the provider refused $l->{refused_rpm}");


###############################################################################
# TPM: 587 tokens reserved each against 2,000 a minute: at most 3 at once
# (each held 300 ms before its answer), corrected to the 11 each used (7 of
# prompt, 4 out) as each ends

@r = burst($ng->url('/tpm/v1/chat/completions'), 30, body(580),
           { %auth, 'x-mock-ttfb-ms' => 300 });

is(codes(@r), '200 x30', '30 requests of 587 tokens, paced by tokens: 200')
    or diag(join("\n", map { $_->{body} } grep { $_->{status} != 200 } @r));

$l = limits($tpm);
is($l->{refused_tpm}, 0, 'the provider refused none (TPM)');
cmp_ok($l->{max_tpm_window}, '<=', 2000,
       "its minute never held more than 2,000 ($l->{max_tpm_window})");
cmp_ok(max(map { $_->{headers}{'x-llmgw-queue-ms'} // 0 } @r), '>', 500,
       'the last ones waited for tokens, requests being free');

reset_limits($tpm);

@r = burst($ng->url('/raw/tpm/v1/chat/completions'), 30, body(580),
           { %auth, 'x-mock-ttfb-ms' => 300 });
cmp_ok(limits($tpm)->{refused_tpm}, '>', 0,
       'unpaced, the provider refuses by tokens')
    or diag(explain([limits($tpm), limits($rpm), $r[0]]));

# alone more than the provider's minute: refused at once, never sent
my $r = http_post($ng->url('/tpm/v1/chat/completions'), body(5000), %auth);
is($r->{status}, 429, 'a request of 5,007 tokens against TPM 2,000: 429');
is(decode_json($r->{content})->{error}{code}, 'request_too_large',
   'request_too_large');
is($r->{headers}{'x-should-retry'}, 'false', 'x-should-retry: false');


###############################################################################
# a waiter that goes leaves no trace; a full queue refuses

# rpm=20: one every 3 s (seconds to spare for a busy machine); queue=1
my $first = http_post($ng->url('/slow/v1/chat/completions'), body(16), %auth);
is($first->{status}, 200, 'slow: the first goes at once')
    or diag($first->{content});

my $t0 = time();
my $gone = raw_post($ng->url('/slow/v1/chat/completions'), body(16), \%auth,
                    timeout => 0.3);
is($gone->{status}, 0, 'slow: the second waits; its client leaves at 0.3 s');

# the worker that holds it sees the close as the event comes, the third
# may reach the other worker first: it comes once the place is given back
for (1 .. 50) {
    last if ($ng->metric('llmgw_backend_queue\{backend="slow"\}') // 1) == 0;
    sleep(0.02);
}

$r = http_post($ng->url('/slow/v1/chat/completions'), body(16), %auth);
my $waited = time() - $t0;
is($r->{status}, 200, 'slow: the third is served');
# the next slot after it would be 6 s after the first
cmp_ok($waited, '<', 4.5,
       sprintf('in the slot the second left (%.2f s after it came)',
               $waited));

sleep(3.1);
@r = burst($ng->url('/slow/v1/chat/completions'), 3, body(16), \%auth);
my @full = grep { $_->{status} == 429 } @r;
is(scalar(@full), 1, 'slow: of 3 at once, one goes, one waits, one is refused');
my $e = decode_json($full[0]{body})->{error};
is($e->{code}, 'provider_rate_limited', 'the refused one: provider_rate_limited');
like($e->{message}, qr/queue is full/, 'its queue is full');
ok($full[0]{headers}{'retry-after'}, 'with Retry-After');
ok($full[0]{headers}{'retry-after-ms'}, 'and retry-after-ms');
is($ng->metric('llmgw_backend_queue\{backend="slow"\}'), 0,
   'metrics: nobody left waiting');


###############################################################################
# a provider's refusals, read: busy for seconds; spent until the reset

$r = http_post($ng->url('/one/v1/chat/completions'), body(16), %auth);
is($r->{status}, 200, 'one: the provider serves one a minute');

$r = http_post($ng->url('/one/v1/chat/completions'), body(16), %auth);
is($r->{status}, 429, 'one: its second request is refused');
push @refused, $r;
$e = decode_json($r->{content})->{error};
is($e->{code}, 'provider_rate_limited', 'busy: provider_rate_limited');
cmp_ok($r->{headers}{'retry-after'}, '>=', 50, 'Retry-After as it said');
ok($r->{headers}{'retry-after-ms'}, 'retry-after-ms too');
is($r->{headers}{'x-llmgw-backend'}, 'one', 'the backend is named');

my $sent = limits($one)->{requests};
$r = http_post($ng->url('/one/v1/chat/completions'), body(16), %auth);
is($r->{status}, 429, 'one: while it is busy, the next is refused');
push @refused, $r;
is(limits($one)->{requests}, $sent, 'without being sent to it');
cmp_ok($r->{headers}{'retry-after'}, '>=', 50, 'with the wait it said');

$r = http_post($ng->url('/day/v1/chat/completions'), body(140), %auth);
is($r->{status}, 200, 'day: the first, 150 of its quota of 150');

$r = http_post($ng->url('/day/v1/chat/completions'), body(140), %auth);
is($r->{status}, 429, 'day: the quota is spent');
push @refused, $r;
$e = decode_json($r->{content})->{error};
is($e->{code}, 'insufficient_quota', 'spent: insufficient_quota');
cmp_ok($r->{headers}{'retry-after'}, '<=', 3, 'Retry-After: the reset');

$sent = limits($day)->{requests};
$r = http_post($ng->url('/day/v1/chat/completions'), body(140), %auth);
is($r->{status}, 429, 'day: spent, the next is refused');
push @refused, $r;
is(decode_json($r->{content})->{error}{code}, 'insufficient_quota',
   'insufficient_quota');
is(limits($day)->{requests}, $sent, 'without being sent to it');

sleep(4);

$r = http_post($ng->url('/day/v1/chat/completions'), body(140), %auth);
is($r->{status}, 200, 'day: after the reset, served again');

# the refusals: each settled once, charged nothing
my $charged = 0;
for my $x (@refused) {
    my $rows = usage_rows($x->{headers}{'x-request-id'}, 2);
    $charged += $_->{input_tokens} + $_->{output_tokens} for @$rows;
}
is($charged, 0, 'the ' . scalar(@refused) . ' refused requests are charged '
   . 'nothing');

$ng->no_alerts();


###############################################################################
# a waiter whose worker is killed: the queue does not wait for it forever

my $lone = nginx(workers => 1, http => <<"EOF")->run();
    %%GATEWAY%%
    llm_gateway_tier  big  unpriced=allow tpm=100000000 burst=100000000;

    llm_gateway_backend  lone  upstream=rpm  rpm=60 queue=5 max_wait=8s;

    upstream rpm { server 127.0.0.1:$rpm->{port}; }

    server {
        listen  127.0.0.1:%%PORT%%;

        location = /v1/chat/completions {
            llm_gateway  zone=llm backend=lone;
            proxy_pass   http://\$llm_upstream/v1/chat/completions;
        }
    }
EOF

$r = http_post($lone->url('/v1/chat/completions'), body(16), %auth);
is($r->{status}, 200, 'lone: the first goes');

# the second waits for its second; its worker is killed meanwhile
my $orphan = raw_post($lone->url('/v1/chat/completions'), body(16), \%auth,
                      timeout => 0.3);
my @w = workers($lone);
kill('KILL', @w);
sleep(0.5);

$t0 = time();
$r = http_post($lone->url('/v1/chat/completions'), body(16), %auth);
my $took = time() - $t0;
is($r->{status}, 200, 'lone: the third is served by the new worker');
cmp_ok($took, '<', 6,
       sprintf('once the dead waiter was dropped (%.1f s; 8 s would be '
               . 'the wait limit)', $took));

$lone->no_alerts(alerts => [ killed_alerts(@w) ]);

done_testing();
