#!/usr/bin/perl

# Limits no client can talk its way around.  A tenant under a daily spend
# cap floods the gateway with every trick of a hostile client at once: one
# limit under two names (Chat's max_completion_tokens and max_tokens, and
# Anthropic's max_tokens beside a max_completion_tokens it does not have),
# n choices, images by URL (a few bytes, thousands of tokens), long tool
# definitions, and an upstream that reports far more than was produced
# (mockllm's x-mock-usage, x-mock-prompt-tokens, as a hostile or broken
# provider would).  The day ends at or under its cap.  Then two tenants of
# the same free tier flood for the same seconds through a gateway as
# shipped (a client's x-mock-* headers reach nobody), one honestly, one with
# the tricks, forged usage headers included: the trickster gets no more
# tokens than its tier allows, nor than the honest one.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use HTTP::Tiny;
use JSON::PP;
use LLMGW;
use POSIX ();
use Test::More;
use Time::HiRes qw(sleep time);

my $s = stack();

# $1 and $2 per million tokens: 10^6 and 2 * 10^6 pico-dollars a token
db()->do(q{INSERT INTO llm.prices (model, effective_from, input_per_mtok,
                                   output_per_mtok)
           VALUES ('mock-tricks', '2000-01-01', 1000000, 2000000)
           ON CONFLICT DO NOTHING});

# $0.05: about 2,000 requests of 10 tokens, a handful of the tricks' worst
my $cap_usd = '0.05';
my $cap_pusd = 50_000_000_000;

my $capped = new_tenant(tier => 'pro');
accountd('tenant', 'update', '--name', $capped->{name},
         '--daily-cap-usd', $cap_usd);
snapshot_caps($s->{LLMGW_KEY_SNAPSHOT}, $capped->{key_id}, 't');

my $strict = new_tenant(tier => 'strict');
accountd('tenant', 'update', '--name', $strict->{name},
         '--daily-cap-usd', $cap_usd);
snapshot_caps($s->{LLMGW_KEY_SNAPSHOT}, $strict->{key_id}, 't');
my $uncapped = new_tenant(tier => 'strict');

my $honest = new_tenant(tier => 'free');
my $trick = new_tenant(tier => 'free');

my $ng = nginx(http => <<'EOF')->run();
    %%GATEWAY%%
    llm_gateway_tier  pro   tpm=600000000 max_tokens=4096 image_tokens=1000;
    llm_gateway_tier  free  tpm=10000 burst=15000 max_tokens=4096;
    llm_gateway_tier  strict  tpm=100000 max_tokens=4096 context=120000
                              unbounded=refuse;

    %%UPSTREAM%%

    server {
        listen  127.0.0.1:%%PORT%%;

        proxy_http_version  1.1;
        proxy_set_header    Connection "";

        %%APIS%%
    }
EOF

# as shipped: no client's x-mock-* header reaches the mock; the operator
# has every answer take the whole limit, up to 1,000 tokens
my $shipped = nginx(pass_mock => 0, http => <<'EOF')->run();
    %%GATEWAY%%
    llm_gateway_tier  free  tpm=10000 burst=15000 max_tokens=4096;

    %%UPSTREAM%%

    server {
        listen  127.0.0.1:%%PORT%%;

        proxy_http_version  1.1;
        proxy_set_header    Connection "";
        proxy_set_header    x-mock-tokens 1000;

        %%APIS%%
    }
EOF

my $http = HTTP::Tiny->new(timeout => 30, keep_alive => 1);

# what the upstream says it did, whatever it did
my $huge = encode_json({ prompt_tokens => 100_000_000,
                         completion_tokens => 100_000_000,
                         input_tokens => 100_000_000,
                         output_tokens => 100_000_000 });

my $tools = [ map { { type => 'function',
                      function => { name => "tool$_",
                                    description => 'x' x 2000,
                                    parameters => { type => 'object' } } } }
              1 .. 4 ];

my $image = { type => 'image_url',
              image_url => { url => 'https://example.invalid/a.png' } };

# [ path, body, mock headers ]: each a way around a limit; the upstream's
# word on usage is forged only where $forged says.  The first four are
# refused: one limit under two names, or another dialect's.
sub tricks {
    my ($max, $forged) = @_;
    my $msg = [ { role => 'user', content => 'Say hello.' } ];
    my $images = [ { role => 'user', content => [ ($image) x 4 ] } ];

    my @t = (
        [ '/v1/chat/completions',
          { model => 'mock-tricks', messages => $msg,
            max_completion_tokens => 1, max_tokens => $max },
          { 'x-mock-tokens' => $max } ],
        [ '/v1/messages',
          { model => 'mock-tricks', messages => $msg,
            max_completion_tokens => 1, max_tokens => $max },
          { 'x-mock-tokens' => $max } ],
        [ '/v1/responses',
          { model => 'mock-tricks', input => 'Say hello.',
            max_output_tokens => 16, max_tokens => $max },
          { 'x-mock-tokens' => $max } ],
        [ '/v1/chat/completions',
          { model => 'mock-tricks', messages => $msg, max_tokens => $max,
            n => 8 },
          { 'x-mock-tokens' => $max } ],
    );

    return (@t,
        [ '/v1/chat/completions',
          { model => 'mock-tricks', max_tokens => 1000, messages => $images },
          { 'x-mock-tokens' => 1000 } ],
        [ '/v1/chat/completions',
          { model => 'mock-tricks', messages => $msg, max_tokens => 1000,
            tools => $tools },
          { 'x-mock-tokens' => 1000 } ],
    ) unless $forged;

    return (@t,
        [ '/v1/chat/completions',
          { model => 'mock-tricks', max_tokens => 1, messages => $images },
          { 'x-mock-prompt-tokens' => 500000 } ],
        (map { my $stream = $_;
               [ '/v1/chat/completions',
                 { model => 'mock-tricks', messages => $msg, max_tokens => 1,
                   tools => $tools, stream => $stream },
                 { 'x-mock-usage' => $huge } ],
               [ '/v1/messages',
                 { model => 'mock-tricks', messages => $msg, max_tokens => 1,
                   stream => $stream },
                 { 'x-mock-usage' =>
                       encode_json({ output_tokens => 100_000_000 }) } ],
               [ '/v1/responses',
                 { model => 'mock-tricks', input => 'Say hello.',
                   max_output_tokens => 16, stream => $stream },
                 { 'x-mock-usage' => $huge } ] }
             JSON::PP::false, JSON::PP::true),
    );
}


sub send_one {
    my ($t, $path, $body, $mock, $via) = @_;
    return $http->request('POST', ($via // $ng)->url($path), {
        headers => { 'content-type' => 'application/json',
                     authorization => "Bearer $t->{key}",
                     'anthropic-version' => '2023-06-01', %$mock },
        content => encode_json($body) });
}

# $clients processes, each sending the tricks (or an honest request) in
# turn until $until; returns the statuses seen, counted
sub flood {
    my ($t, $clients, $until, $honest_max, $forged, $via) = @_;
    my @kids;

    for my $c (1 .. $clients) {
        pipe(my $rd, my $wr) or die "pipe: $!";
        my $pid = fork() // die "fork: $!";

        if ($pid == 0) {
            close($rd);
            my %seen;
            my @t = defined $honest_max
                ? ([ '/v1/chat/completions',
                     { model => 'mock-tricks', max_tokens => $honest_max,
                       messages => [ { role => 'user',
                                       content => 'Say hello.' } ] },
                     { 'x-mock-tokens' => $honest_max } ])
                : tricks(4096, $forged);
            my $i = $c;
            while (time() < $until) {
                my $r = send_one($t, @{ $t[$i++ % @t] }, $via);
                my $e = eval { decode_json($r->{content})->{error} };
                my $code = ref $e eq 'HASH'
                           && ($e->{code} // $e->{details}{error_code});
                $seen{ $r->{status} . ($code ? " $code" : '') }++;
                sleep(0.05) if $r->{status} == 429;
            }
            print $wr encode_json(\%seen);
            close($wr);
            POSIX::_exit(0);
        }

        close($wr);
        push @kids, [ $pid, $rd ];
    }

    my %all;
    for my $k (@kids) {
        my ($pid, $rd) = @$k;
        local $/;
        my $j = <$rd>;
        waitpid($pid, 0);
        my $seen = eval { decode_json($j // '{}') } // {};
        $all{$_} += $seen->{$_} for keys %$seen;
    }
    return \%all;
}

# every request admitted has its row once the gateway's journal is empty
sub ledger {
    my ($t) = @_;
    my ($before, $now) = (-1, 0);
    my $row;
    for (1 .. 60) {
        $row = db()->selectrow_hashref(
            'SELECT count(*) AS n, coalesce(sum(cost_pusd), 0) AS cost,'
            . ' coalesce(sum(input_tokens + output_tokens), 0) AS tokens,'
            . ' coalesce(sum(output_tokens), 0) AS output,'
            . ' count(*) FILTER (WHERE flags & 32 <> 0) AS bound'
            . ' FROM llm.usage WHERE tenant_id = ?', undef, $t->{id});
        $now = $row->{n};
        last if $now == $before && $now > 0;
        $before = $now;
        sleep(0.5);
    }
    return $row;
}

sub summary { join(', ', map { "$_: $_[0]{$_}" } sort keys %{ $_[0] }) }

# --- a capped tenant: every trick at once -----------------------------------

my $seen = flood($capped, 8, time() + 12 * LLMGW::time_scale(), undef, 1);
diag('capped flood: ' . summary($seen));

my $u = ledger($capped);
diag("capped: $u->{n} rows, $u->{tokens} tokens, cost $u->{cost} p\$ of "
     . "$cap_pusd, $u->{bound} held to their bound");

ok($u->{n} > 0, 'the capped tenant was served');
ok(($seen->{'429 insufficient_quota'} // 0) > 0,
   'and its cap refused it in the end');
ok($u->{cost} <= $cap_pusd, "the day ends at or under its cap "
   . "($u->{cost} <= $cap_pusd p\$)");
ok($u->{bound} > 0, 'figures above what a request could cost were held '
   . 'to its bound');

# each refused trick says what it was refused for
for my $tr ((tricks(4096, 1))[0 .. 2]) {
    my ($path, $body, $mock) = @$tr;
    my $r = send_one($capped, @$tr);
    my $e = eval { decode_json($r->{content}) } // {};
    my $err = $e->{error} // {};
    is($r->{status}, 400, "$path, " . join(' and ', grep { /max/ }
                                           sort keys %$body) . ': 400');
}

# --- what a body does not tell: files, audio, stored context ----------------

my @unbounded = (
    [ '/v1/chat/completions', 'file',
      { model => 'mock-tricks', max_tokens => 10,
        messages => [ { role => 'user', content => [
            { type => 'file', file => { file_id => 'file-abc' } } ] } ] } ],
    [ '/v1/chat/completions', 'input_audio',
      { model => 'mock-tricks', max_tokens => 10,
        messages => [ { role => 'user', content => [
            { type => 'input_audio',
              input_audio => { data => 'AAAA', format => 'wav' } } ] } ] } ],
    [ '/v1/responses', 'previous_response_id',
      { model => 'mock-tricks', max_output_tokens => 10, input => 'more',
        previous_response_id => 'resp_123' } ],
    [ '/v1/messages', 'document',
      { model => 'mock-tricks', max_tokens => 10,
        messages => [ { role => 'user', content => [
            { type => 'document',
              source => { type => 'url', url => 'https://e.invalid/a.pdf' } }
        ] } ] } ],
);

for my $c (@unbounded) {
    my ($path, $part, $body) = @$c;

    # under a cap, the tier refuses what it cannot bound
    my $r = send_one($strict, $path, $body, {});
    my $e = eval { decode_json($r->{content})->{error} } // {};
    $e = $e->{details} ? { code => $e->{details}{error_code},
                           param => $e->{details}{param} } : $e;
    is_deeply([ $r->{status}, $e->{code}, $e->{param} ],
              [ 400, 'unbounded_prompt', $part ],
              "$part under a cap, unbounded=refuse: 400 naming it");

    # without one, it is reserved as the tier's context: more than a burst
    # of 150,000 holds twice
    $r = send_one($uncapped, $path, $body, {});
    is($r->{status}, 200, "$part without a cap: served");
    my $id = $r->{headers}{'x-request-id'} // '';
    my $row = usage_row($id) // {};
    ok(defined $row->{input_tokens}, "  one row");
}

# the reservation was the context: a second one at once cannot be had
{
    my $body = $unbounded[0][2];
    my @r = burst($ng->url('/v1/chat/completions'), 2, $body,
                  { authorization => "Bearer $uncapped->{key}",
                    'x-mock-ttfb-ms' => 5000 });
    is_deeply([ sort map { $_->{status} } @r ], [ 200, 429 ],
              'two files at once: the second is refused, the context '
              . 'reserved twice exceeds the burst');
}

# --- one free tier, an honest tenant and a trickster ------------------------

my $t0 = time();
my $until = $t0 + 15 * LLMGW::time_scale();
my $pid = fork() // die "fork: $!";
if ($pid == 0) {
    flood($honest, 4, $until, 1000, 0, $shipped);
    POSIX::_exit(0);
}
my $tseen = flood($trick, 4, $until, undef, 1, $shipped);
waitpid($pid, 0);
my $elapsed = time() - $t0;

diag('trickster: ' . summary($tseen));

my $h = ledger($honest);
my $k = ledger($trick);

# a bucket holds its burst and refills tpm a minute: nobody gets more
my $allowed = 15000 + POSIX::ceil(10000 * $elapsed / 60);

diag("over $elapsed s the tier allows $allowed tokens: the honest tenant "
     . "used $h->{tokens} ($h->{n} requests), the trickster $k->{tokens} "
     . "($k->{n} requests, $k->{bound} held to their bound)");

ok($h->{tokens} > 15000, 'the honest tenant used its burst and more');
ok($k->{tokens} <= $allowed, "the trickster got no more than its tier "
   . "allows ($k->{tokens} <= $allowed)");
ok($k->{tokens} <= $h->{tokens} + 8 * 4096,
   'nor more than the honest tenant, but for one request in flight');

$ng->no_alerts();
$shipped->no_alerts(name => 'no alerts in the shipped gateway\'s error.log');

done_testing();
