#!/usr/bin/perl

# Tools in the prompt estimate, consistent rate-limit headers, and the
# demo's free tier limiting requests as well as tokens.
#
# 1. Tool-heavy prompts in the three dialects (t/data/estimate-tools.json:
#    20 tool definitions, descriptive or schema-heavy, legacy functions,
#    one small tool, a 5 kB JSON tool result) go through the gateway; the
#    estimate is read back from the ledger (reserved_tokens - max_tokens)
#    and compared with a real tokenizer's count (o200k), tools framed as
#    each provider puts them before the model (t/sdk/estimate.mjs).  The
#    reservation must not be below it: a tool-heavy prompt under-reserved
#    lets a tenant past its limit until it settles.
# 2. The x-ratelimit-* headers, over tiers (burst above tpm, burst = tpm,
#    rpm or not, a zone with a capacity) and bucket states (full, spent,
#    exhausted, refused for requests, too large, beyond tpm in a soft
#    quota, refused for a spend cap): remaining never above limit, limit the
#    bucket's capacity, the reset 0ms exactly when full and the time the
#    refill takes from what remains.
# 3. The demo's configuration (scripts/nginx.conf.in): a free-tier answer
#    carries the -requests headers, and a flood of small requests is
#    limited.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use JSON::PP;
use LLMGW;
use POSIX qw(ceil floor);
use Test::More;
use Time::HiRes qw(time);

my $s = stack();

# --- 1. the estimate of tools ------------------------------------------------

my $script = "$s->{LLMGW_BUILD}/sdk/estimate.mjs";
my $file = "$FindBin::Bin/data/estimate-tools.json";

SKIP: {
    skip('the tokenizer is not installed (make sdk)', 1) unless -f $script;

    my $cases = do {
        open(my $fh, '<', $file) or die "$file: $!";
        local $/;
        decode_json(<$fh>);
    };

    my %real = map { ("$_->{api} $_->{name}" => $_->{tokens}) }
               @{ decode_json(`node $script $file`) };

    my $t = new_tenant(tier => 'wide');

    my $ng = nginx(http => <<'EOF')->run();
    %%GATEWAY%%
    %%UPSTREAM%%
    llm_gateway_tier  wide  unpriced=allow tpm=6000000  max_tokens=100;

    server {
        listen  127.0.0.1:%%PORT%%;

        client_body_buffer_size  64k;

        %%APIS%%
    }
EOF

    my %path = (openai => '/v1/chat/completions', anthropic => '/v1/messages',
                responses => '/v1/responses');
    my @report;

    for my $e (@$cases) {
        my %body = (%{ $e->{body} }, model => 'mock-a');
        $body{ $e->{api} eq 'responses' ? 'max_output_tokens'
                                         : 'max_tokens' } = 10;

        my $r = http_post($ng->url($path{ $e->{api} }), \%body,
                          authorization => "Bearer $t->{key}",
                          'x-mock-tokens' => 1);
        is($r->{status}, 200, "$e->{api} $e->{name}: 200")
            or diag($r->{content});

        my $u = usage_row($r->{headers}{'x-request-id'} // '') // {};
        my $est = ($u->{reserved_tokens} // 0) - 10;
        my $real = $real{"$e->{api} $e->{name}"} // 0;

        push(@report, sprintf('%-10s %-17s estimate %5d  o200k %5d  %+6.1f%%',
                              $e->{api}, $e->{name}, $est, $real,
                              $real ? 100 * ($est - $real) / $real : 0));

        ok($real > 0 && $est >= $real,
           "$e->{api} $e->{name}: the estimate ($est) is not below the "
           . "tokenizer's count ($real)");
        ok($est <= 4 * $real,
           "$e->{api} $e->{name}: nor above four times it");
    }

    diag('prompt estimate of tool-heavy prompts against o200k:');
    diag("  $_") for @report;

    $ng->no_alerts();
}

# --- 2. the rate-limit headers -----------------------------------------------

# a duration as the gateway writes it ("250ms", "6s", "1m30.5s"), in
# whole ms (30.17 * 1000 is a hair above 30170 in floating point)
sub ms {
    my ($d) = @_;
    return undef unless defined $d;
    return $1 if $d =~ /^(\d+)ms$/;
    return sprintf('%.0f', (($1 // 0) * 60 + $2) * 1000)
        if $d =~ /^(?:(\d+)m)?(\d+(?:\.\d+)?)s$/;
    return undef;
}

# The headers of one answer, against the tier: [ burst, tpm, rpm ].
sub consistent {
    my ($what, $r, $tier) = @_;
    my ($burst, $tpm, $rpm) = @$tier;
    my $h = $r->{headers};

    for my $l ([ 'tokens', $burst, $tpm ], [ 'requests', $rpm, $rpm ]) {
        my ($k, $cap, $rate) = @$l;
        my ($limit, $left, $reset) = map { $h->{"x-ratelimit-$_-$k"} }
                                     qw(limit remaining reset);

        if (!$cap) {
            ok(!defined $limit && !defined $left && !defined $reset,
               "$what: no -$k headers, no $k limit");
            next;
        }

        my $ms = ms($reset);

        is($limit, $cap, "$what: limit-$k is the bucket's capacity");
        ok(defined $left && $left =~ /^\d+$/ && $left <= $limit,
           "$what: remaining-$k " . ($left // 'none') . " <= limit-$k "
           . ($limit // 'none'));
        ok(defined $ms, "$what: reset-$k " . ($reset // 'none')
           . ' is a duration');

        next unless defined $ms && defined $left && $left =~ /^\d+$/;

        # full when it resets now; else the refill of what is missing,
        # whose whole tokens are remaining and a fraction of one more
        if ($left == $cap) {
            is($ms, 0, "$what: full, reset-$k 0ms");
        } else {
            my $lo = floor(($cap - $left - 1) * 60000 / $rate);
            my $hi = ceil(($cap - $left) * 60000 / $rate);
            ok($ms > $lo && $ms <= $hi, "$what: reset-$k ${ms}ms is the "
               . "refill of ${\($cap - $left)} tokens ($lo, $hi]");
        }
    }
}

{
    my %tier = (
        burst  => [ 9000, 6000, 0 ],
        flat   => [ 6000, 6000, 3 ],
        shared => [ 24000, 6000, 100 ],
    );

    # the keys first: nginx loads the snapshot when it starts
    my %key = map { $_ => new_tenant(tier => $_)->{key} } keys %tier;

    # a tenant whose cap of a cent cannot pay for a request of a dear model
    my $capped = new_tenant(tier => 'burst');
    db()->do(q{INSERT INTO llm.prices (model, effective_from, input_per_mtok,
                                       output_per_mtok)
               VALUES ('mock-dear-095', '2000-01-01', 1000000000, 1000000000)
               ON CONFLICT DO NOTHING});
    accountd('tenant', 'update', '--name', $capped->{name}, '--daily-cap-usd',
             '0.01');
    snapshot_caps($s->{LLMGW_KEY_SNAPSHOT}, $capped->{key_id}, 't');

    my $ng = nginx(http => <<'EOF')->run();
    %%GATEWAY%%
    %%UPSTREAM%%
    llm_gateway_tier  burst   unpriced=allow tpm=6000  burst=9000;
    llm_gateway_tier  flat    unpriced=allow tpm=6000  burst=6000  rpm=3;
    llm_gateway_tier  shared  unpriced=allow tpm=6000  burst=24000  rpm=100;

    llm_gateway_zone  zone=roomy:1m  capacity=60000000;

    server {
        listen  127.0.0.1:%%PORT%%;

        %%APIS%%

        location = /v1/roomy {
            llm_gateway  zone=roomy api=openai;
            proxy_pass   http://mock/v1/chat/completions;
        }
    }
EOF

    my $ask = sub {
        my ($tier, $max, $path) = @_;
        return http_post($ng->url($path // '/v1/chat/completions'),
                         { model => 'mock-a', max_tokens => $max,
                           messages => [ { role => 'user',
                                           content => 'hi' } ] },
                         authorization => "Bearer $key{$tier}",
                         'x-mock-tokens' => $max);
    };

    # burst above tpm: full, spent, exhausted (429), too large (429)
    my $r = $ask->('burst', 10);
    is($r->{status}, 200, 'burst: a first request');
    consistent('burst, first', $r, $tier{burst});
    cmp_ok($r->{headers}{'x-ratelimit-remaining-tokens'} // 0, '>', 6000,
           'burst: more than tpm remains, within the capacity');

    for my $i (1, 2) {
        $r = $ask->('burst', 4000);
        is($r->{status}, 200, "burst: spending $i");
        consistent("burst, spending $i", $r, $tier{burst});
    }

    $r = $ask->('burst', 4000);
    is($r->{status}, 429, 'burst: exhausted, 429');
    consistent('burst, exhausted', $r, $tier{burst});

    # 8,999 and the prompt's 7: above the capacity, within max_tokens
    $r = $ask->('burst', 8999);
    is($r->{status}, 429, 'burst: larger than the capacity, 429')
        or diag(substr($r->{content} // '', 0, 300));
    consistent('burst, too large', $r, $tier{burst});

    # burst = tpm, rpm: the requests run out before the tokens
    for my $i (1 .. 3) {
        $r = $ask->('flat', 10);
        is($r->{status}, 200, "flat: request $i");
        consistent("flat, request $i", $r, $tier{flat});
        is($r->{headers}{'x-ratelimit-remaining-requests'}, 3 - $i,
           "flat: request $i leaves " . (3 - $i));
    }

    $r = $ask->('flat', 10);
    is($r->{status}, 429, 'flat: the fourth request, 429');
    is((json_body($r) // {})->{error}{code}, 'rate_limit_exceeded',
       'flat: rate_limit_exceeded');
    consistent('flat, out of requests', $r, $tier{flat});

    # a zone with a capacity: beyond tpm from the soft quota
    for my $i (1 .. 4) {
        $r = $ask->('shared', 7000, '/v1/roomy');
        is($r->{status}, 200, "shared: request $i of 7,000")
            or diag(substr($r->{content} // '', 0, 300));
        consistent("shared, request $i", $r, $tier{shared});
    }

    # refused for a spend cap, before the buckets: they as they are
    for (1 .. 50 * time_scale()) {
        $r = http_post($ng->url('/v1/chat/completions'),
                       { model => 'mock-dear-095', max_tokens => 100,
                         messages => [ { role => 'user', content => 'hi' } ] },
                       authorization => "Bearer $capped->{key}");
        last if $r->{status} == 429;
        sleep(0.1);
    }
    is($r->{status}, 429, 'capped: a request its cap cannot pay for, 429')
        or diag(substr($r->{content} // '', 0, 300));
    is((json_body($r) // {})->{error}{code}, 'insufficient_quota',
       'capped: insufficient_quota');
    consistent('capped, refused for its cap', $r, $tier{burst});
    is($r->{headers}{'x-ratelimit-remaining-tokens'}, 9000,
       'capped: its bucket is full, nothing taken');

    $ng->no_alerts();
}

# --- 3. the demo's free tier -------------------------------------------------

{
    my $conf = do {
        open(my $fh, '<', "$FindBin::Bin/../scripts/nginx.conf.in") or die;
        local $/;
        <$fh>;
    };
    my ($line) = $conf =~ /^\s*llm_gateway_tier\s+free\s+([^;]*);/m;
    my %p = ($line // '') =~ /(\w+)=(\d+)/g;

    ok($p{rpm} && $p{tpm}, 'the demo\'s free tier has rpm and tpm: '
       . ($line // 'none'));

    my $free = [ $p{burst} // int(($p{tpm} // 0) * 3 / 2), $p{tpm} // 0,
                 $p{rpm} // 0 ];

    my $t = new_tenant(tier => 'free');
    my $ng = LLMGW::Nginx->demo()->run();

    my $ask = sub {
        return http_post($ng->url('/v1/chat/completions'),
                         { model => 'mock-gpt-4o-mini', max_tokens => 5,
                           messages => [ { role => 'user',
                                           content => 'hi' } ] },
                         authorization => "Bearer $t->{key}");
    };

    my $r = $ask->();
    is($r->{status}, 200, 'demo free tier: 200');

    my $limit = $r->{headers}{'x-ratelimit-limit-requests'};
    ok(defined $limit && $limit > 0,
       'demo free tier: x-ratelimit-limit-requests ' . ($limit // 'none'));
    is($r->{headers}{'x-ratelimit-remaining-requests'}, ($limit // 0) - 1,
       'demo free tier: x-ratelimit-remaining-requests');
    consistent('demo free tier', $r, $free);

    # a flood of small requests: far below the tokens, limited by requests
    my $start = time();
    my %status;
    my $refused;

    for (1 .. 3 * ($limit // 10)) {
        $r = $ask->();
        $status{ $r->{status} }++;
        $refused //= $r if $r->{status} == 429;
    }

    my $elapsed = time() - $start;

    ok($status{429}, 'demo free tier: a flood of small requests is limited '
       . '(' . join(', ', map { "$_: $status{$_}" } sort keys %status) . ')');

    # what a minute's requests allow, and what refilled meanwhile
    cmp_ok($status{200} // 0, '<=',
           ($limit // 0) - 1 + ceil($elapsed * ($limit // 0) / 60) + 1,
           'demo free tier: no more served than its rpm allows');

    if ($refused) {
        like((json_body($refused) // {})->{error}{message} // '',
             qr/requests per min/, 'demo free tier: refused for requests');
        consistent('demo free tier, refused', $refused, $free);
        ok(($refused->{headers}{'retry-after'} // 0) >= 1,
           'demo free tier: with a Retry-After');
    }

    $ng->no_alerts();
}

done_testing();
