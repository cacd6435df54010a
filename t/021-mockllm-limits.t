#!/usr/bin/perl

# mockllm's provider-side limits (-r RPM, -T TPM, -D TOKENS -P SECONDS):
# each provider's 429 and headers, the charge at arrival and its correction
# at the end, the quota period, the order of the checks, /limits and
# /limits/reset, the shared state of several threads, and nothing of it
# without an option.

use strict;
use warnings;

use Test::More;
use JSON::PP;
use POSIX qw(WNOHANG ceil);
use File::Temp qw(tempfile);
use Time::HiRes qw(time sleep);
use Time::Local qw(timegm);
use FindBin;
use lib "$FindBin::Bin/lib";
use Mock;

-x $MOCKLLM or BAIL_OUT("$MOCKLLM is not built: run make mockllm");

my $JSON = JSON::PP->new->canonical;
my $T = JSON::PP::true;

my $OAI = '/v1/chat/completions';
my $RSP = '/v1/responses';
my $ANT = '/v1/messages';

my $hello = [ { role => 'user', content => 'hello world' } ];    # P = 9

my %seen;                        # the responses of the steps named by 'as'


# Expectations that depend on other steps' responses: the mock's own clock
# is in x-mock-arrival-ms, so every wait it announces is exact.

sub arrival { $seen{ $_[0] }{headers}{'x-mock-arrival-ms'} }

# ms from step $b's arrival until step $a's request leaves the window
sub left { arrival($_[0]) + 60000 - arrival($_[1]) }

sub is_ms { my @a = @_; sub { $_[0] eq left(@a) } }
sub is_s { my @a = @_; sub { $_[0] eq ceil(left(@a) / 1000) } }
sub is_dur { my @a = @_; sub { $_[0] eq go_duration(left(@a)) } }

# Anthropic's reset: an RFC 3339 time, about that many seconds away
sub rfc3339_in {
    my ($s) = @_;
    return sub {
        my @t = $_[0] =~ /^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)Z$/
            or return 0;
        my $at = timegm($t[5], $t[4], $t[3], $t[2], $t[1] - 1, $t[0]);
        return abs($at - (time + $s)) <= 2;
    };
}

sub oai_rpm_msg {
    my ($limit, $used, $a, $b) = @_;
    return sub { $_[0] eq "Rate limit reached for requests per min (RPM): "
                          . "Limit $limit, Used $used, Requested 1. Please "
                          . "try again in " . go_duration(left($a, $b))
                          . '.' };
}

sub oai_tpm_msg {
    my ($limit, $used, $req, $a, $b) = @_;
    return sub { $_[0] eq "Rate limit reached for tokens per min (TPM): "
                          . "Limit $limit, Used $used, Requested $req. "
                          . "Please try again in "
                          . go_duration(left($a, $b)) . '.' };
}

my $OAI_BODY = qr/^\{"error":\{"message":"[^"]+","type":"(requests|tokens)",
                  "param":null,"code":"rate_limit_exceeded"\}\}$/x;

my $OAI_QUOTA = '{"error":{"message":"You exceeded your current quota, '
              . 'please check your plan and billing details.","type":'
              . '"insufficient_quota","param":null,'
              . '"code":"insufficient_quota"}}';

my $ANT_QUOTA = '{"type":"error","error":{"type":"rate_limit_error",'
              . '"message":"This request would exceed your organization\'s '
              . 'daily token quota."}}';

# a request costing $p prompt tokens, at most $max, answering $n
sub ask {
    my ($path, $p, $max, $n, %more) = @_;
    my %h = ('x-mock-prompt-tokens' => $p, 'x-mock-tokens' => $n,
             %{ delete $more{headers} // {} });
    my $model = $path eq $ANT ? 'claude-mock' : 'gpt-mock';
    my $body = { model => $model, %{ delete $more{body} // {} } };

    if ($path eq $RSP) {
        $body->{input} = 'hello world';
        $body->{max_output_tokens} = $max;

    } else {
        $body->{messages} = $hello;
        $body->{max_tokens} = $max;
    }

    return (path => $path, headers => \%h, body => $body, %more);
}

my %no_limit_headers = map { $_ => $ABSENT } qw(
    x-mock-arrival-ms x-ratelimit-limit-requests x-ratelimit-limit-tokens
    anthropic-ratelimit-requests-limit anthropic-ratelimit-tokens-limit
    retry-after-ms);

my %zero = map { $_ => 0 } qw(requests admitted refused_rpm refused_tpm
    refused_quota max_rpm_window max_tpm_window first_ms last_ms period_used);


###############################################################################
# The scenarios: a mock with its options, then its steps in order.  A step
# is a request (json and headers are matched as subsets, $ABSENT says a key
# must not be there, undef is JSON null, a sub checks a value), or
# 'limits' / 'reset' (GET /limits, POST /limits/reset, compared whole),
# 'start' / 'finish' (a request left in flight, read later), or
# 'next_period' (wait for the next quota period, 100 ms into it).

my @scenarios = (

    {
        name => 'requests per minute',
        args => [ '-r', 3, '-t', 2 ],
        steps => [
            {
                name => 'openai: admitted, the rate limit headers',
                as => 'a1',
                ask($OAI, 9, 64, 16),
                status => 200,
                resp_headers => {
                    'x-mock-arrival-ms' => qr/^\d+$/,
                    'x-ratelimit-limit-requests' => 3,
                    'x-ratelimit-remaining-requests' => 2,
                    'x-ratelimit-reset-requests' => '1m0s',
                    'x-ratelimit-limit-tokens' => $ABSENT,
                    'retry-after' => $ABSENT,
                },
                json => { usage => { prompt_tokens => 9,
                                     completion_tokens => 16 } },
            },
            {
                name => 'responses: admitted',
                ask($RSP, 9, 64, 16),
                status => 200,
                resp_headers => { 'x-ratelimit-remaining-requests' => 1 },
            },
            {
                name => 'anthropic: admitted, its own headers',
                as => 'a3',
                ask($ANT, 9, 64, 16),
                status => 200,
                resp_headers => {
                    'anthropic-ratelimit-requests-limit' => 3,
                    'anthropic-ratelimit-requests-remaining' => 0,
                    'anthropic-ratelimit-requests-reset' => rfc3339_in(60),
                    'x-ratelimit-limit-requests' => $ABSENT,
                },
            },
            {
                name => 'openai: the 4th in the minute is refused',
                as => 'r1',
                ask($OAI, 9, 64, 16),
                status => 429,
                resp_body => $OAI_BODY,
                json => { error => {
                    message => oai_rpm_msg(3, 3, 'a1', 'r1'),
                    type => 'requests', param => undef,
                    code => 'rate_limit_exceeded' } },
                resp_headers => {
                    'retry-after' => is_s('a1', 'r1'),
                    'retry-after-ms' => is_ms('a1', 'r1'),
                    'x-ratelimit-limit-requests' => 3,
                    'x-ratelimit-remaining-requests' => 0,
                    'x-ratelimit-reset-requests' => is_dur('a3', 'r1'),
                },
            },
            {
                name => 'responses: refused in the OpenAI shape',
                as => 'r2',
                ask($RSP, 9, 64, 16),
                status => 429,
                resp_body => $OAI_BODY,
                json => { error => {
                    message => oai_rpm_msg(3, 3, 'a1', 'r2'),
                    type => 'requests' } },
                resp_headers => { 'retry-after-ms' => is_ms('a1', 'r2') },
            },
            {
                name => 'anthropic: refused in the Anthropic shape',
                as => 'r3',
                ask($ANT, 9, 64, 16),
                status => 429,
                json => { type => 'error', error => {
                    type => 'rate_limit_error',
                    message => 'This request would exceed the rate limit '
                             . 'for your organization of 3 requests per '
                             . 'minute.' } },
                resp_headers => {
                    'retry-after' => is_s('a1', 'r3'),
                    'retry-after-ms' => $ABSENT,
                    'anthropic-ratelimit-requests-remaining' => 0,
                    'anthropic-ratelimit-requests-reset' => rfc3339_in(60),
                    'x-ratelimit-remaining-requests' => $ABSENT,
                },
            },
            {
                name => 'a refusal does not wait for x-mock-ttfb-ms',
                ask($OAI, 9, 64, 16, headers => { 'x-mock-ttfb-ms' => 3000 }),
                status => 429,
                within => 1,
            },
            {
                name => 'a bad request is not counted, has its arrival',
                path => $OAI,
                raw_body => '{"model": "gpt-mock", "messages": [',
                status => 400,
                resp_headers => {
                    'x-mock-arrival-ms' => qr/^\d+$/,
                    'x-ratelimit-limit-requests' => $ABSENT,
                },
            },
            {
                name => 'x-mock-status 429 is not counted, as before',
                ask($OAI, 9, 64, 16, headers => { 'x-mock-status' => 429 }),
                status => 429,
                json => { error => { message => 'Rate limit reached',
                                     code => 'rate_limit_exceeded',
                                     param => $ABSENT } },
                resp_headers => { 'retry-after' => 1,
                                  'retry-after-ms' => $ABSENT },
            },
            {
                # the third arrival saw two corrected to 9 + 16 and itself
                name => 'the counters',
                limits => { requests => 7, admitted => 3, refused_rpm => 4,
                            refused_tpm => 0, refused_quota => 0,
                            max_rpm_window => 3,
                            max_tpm_window => 25 + 25 + 9 + 64,
                            first_ms => sub { $_[0] == arrival('a1') },
                            last_ms => sub { $_[0] == arrival('a3') },
                            period_used => 0 },
            },
            {
                name => 'reset answers what it zeroes',
                reset => { requests => 7, admitted => 3, refused_rpm => 4,
                           max_rpm_window => 3 },
            },
            {
                name => 'the counters after the reset',
                limits => \%zero,
            },
            {
                name => 'the window is empty after the reset',
                ask($OAI, 9, 64, 16),
                status => 200,
                resp_headers => { 'x-ratelimit-remaining-requests' => 2 },
            },
        ],
    },

    {
        name => 'tokens per minute',
        args => [ '-T', 200 ],
        steps => [
            {
                name => 'a slow stream: charged 20 + 100 while it runs',
                start => 'slow',
                ask($OAI, 20, 100, 10, body => { stream => $T },
                    headers => { 'x-mock-delay-ms' => 100 }),
            },
            {
                name => 'openai: 120 more do not fit',
                as => 't1',
                ask($OAI, 20, 100, 10),
                status => 429,
                resp_body => $OAI_BODY,
                json => { error => {
                    message => oai_tpm_msg(200, 120, 120, 'slow', 't1'),
                    type => 'tokens', param => undef,
                    code => 'rate_limit_exceeded' } },
                resp_headers => {
                    'retry-after' => is_s('slow', 't1'),
                    'retry-after-ms' => is_ms('slow', 't1'),
                    'x-ratelimit-limit-tokens' => 200,
                    'x-ratelimit-remaining-tokens' => 80,
                    'x-ratelimit-reset-tokens' => is_dur('slow', 't1'),
                    'x-ratelimit-limit-requests' => $ABSENT,
                },
            },
            {
                name => 'anthropic: refused for tokens',
                as => 't2',
                ask($ANT, 20, 100, 10),
                status => 429,
                json => { type => 'error', error => {
                    type => 'rate_limit_error',
                    message => 'This request would exceed the rate limit '
                             . 'for your organization of 200 tokens per '
                             . 'minute.' } },
                resp_headers => {
                    'retry-after' => is_s('slow', 't2'),
                    'anthropic-ratelimit-tokens-limit' => 200,
                    'anthropic-ratelimit-tokens-remaining' => 80,
                    'anthropic-ratelimit-tokens-reset' => rfc3339_in(60),
                },
            },
            {
                name => 'the slow stream ends: corrected to 20 + 10',
                finish => 'slow',
                status => 200,
                sse_tokens => 10,
            },
            {
                name => 'now 120 fit: 200 - 30 - 120 left',
                ask($OAI, 20, 100, 10),
                status => 200,
                resp_headers => { 'x-ratelimit-remaining-tokens' => 50 },
            },
            {
                name => 'a stream cut after 5 tokens: charged 20 + 100',
                ask($OAI, 20, 100, 50, body => { stream => $T },
                    headers => { 'x-mock-die-after' => 5 }),
                status => 200,
                resp_headers => { 'x-ratelimit-remaining-tokens' => 20 },
                sse_tokens => 5,
            },
            {
                name => '... corrected to 20 + 5: 110 fit',
                ask($OAI, 10, 100, 10),
                status => 200,
                resp_headers => { 'x-ratelimit-remaining-tokens' =>
                                  200 - 30 - 30 - 25 - 110 },
            },
            {
                name => 'more than TPM alone: never fits, no retry',
                ask($OAI, 10, 500, 10),
                status => 429,
                json => { error => {
                    message => 'Request too large for tokens per min (TPM): '
                             . 'Limit 200, Requested 510. The input or '
                             . 'output tokens must be reduced in order to '
                             . 'run successfully.',
                    type => 'tokens', code => 'rate_limit_exceeded' } },
                resp_headers => { 'retry-after' => $ABSENT,
                                  'retry-after-ms' => $ABSENT },
            },
            {
                name => 'the counters',
                limits => { requests => 7, admitted => 4, refused_rpm => 0,
                            refused_tpm => 3, refused_quota => 0,
                            max_rpm_window => 4,
                            max_tpm_window => 30 + 30 + 25 + 110,
                            first_ms => sub { $_[0] == arrival('slow') },
                            last_ms => qr/^\d+$/, period_used => 0 },
            },
        ],
    },

    {
        name => 'token quota',
        args => [ '-D', 300, '-P', 2 ],
        steps => [
            { next_period => 1 },
            # each is charged 10 + 100 and corrected to 10 + 40
            map({ {
                name => "request $_ of 4",
                ask($_ == 2 ? $ANT : $OAI, 10, 100, 40),
                status => 200,
                resp_headers => { 'x-ratelimit-limit-tokens' => $ABSENT,
                                  'retry-after' => $ABSENT },
            } } 1 .. 4),
            {
                name => 'openai: 200 used, 110 more would pass 300',
                as => 'q1',
                ask($OAI, 10, 100, 40),
                status => 429,
                resp_body => $OAI_QUOTA,
                resp_headers => {
                    'retry-after' => sub {
                        $_[0] == ceil((2000 - arrival('q1') % 2000) / 1000) },
                    'retry-after-ms' => $ABSENT },
            },
            {
                name => 'anthropic: its quota error',
                ask($ANT, 10, 100, 40),
                status => 429,
                resp_body => $ANT_QUOTA,
                resp_headers => { 'retry-after' => qr/^[12]$/ },
            },
            {
                name => 'what is left still takes a smaller one',
                ask($OAI, 10, 40, 40),
                status => 200,
            },
            {
                name => 'the counters',
                limits => { requests => 7, admitted => 5, refused_rpm => 0,
                            refused_tpm => 0, refused_quota => 2,
                            max_rpm_window => 5,
                            max_tpm_window => 3 * 50 + 110,
                            first_ms => qr/^\d+$/, last_ms => qr/^\d+$/,
                            period_used => 250 },
            },
            { next_period => 1 },
            {
                name => 'the next period has the whole quota',
                ask($OAI, 10, 100, 40),
                status => 200,
            },
            {
                name => 'the counters in the next period',
                limits => { requests => 8, admitted => 6, refused_quota => 2,
                            period_used => 50 },
            },
        ],
    },

    {
        name => 'the order: RPM, TPM, quota',
        args => [ '-r', 2, '-T', 100, '-D', 50, '-P', 3600 ],
        steps => [
            {
                name => 'charged 10 + 30, corrected to 10 + 10',
                ask($OAI, 10, 30, 10),
                status => 200,
            },
            {
                name => '90 pass TPM (and the quota): TPM refuses',
                ask($OAI, 10, 80, 10),
                status => 429,
                json => { error => { type => 'tokens' } },
            },
            {
                name => '40 fit TPM, not the quota: the quota refuses',
                ask($OAI, 10, 30, 10),
                status => 429,
                resp_body => $OAI_QUOTA,
            },
            {
                name => '30 fit both',
                ask($OAI, 10, 20, 10),
                status => 200,
                resp_headers => { 'x-ratelimit-remaining-requests' => 0,
                                  'x-ratelimit-remaining-tokens' => 50 },
            },
            {
                name => 'past all three: RPM refuses',
                ask($OAI, 10, 200, 10),
                status => 429,
                json => { error => { type => 'requests' } },
            },
            {
                name => 'each refusal counted by its reason',
                limits => { requests => 5, admitted => 2, refused_rpm => 1,
                            refused_tpm => 1, refused_quota => 1,
                            max_rpm_window => 2, max_tpm_window => 50,
                            first_ms => qr/^\d+$/, last_ms => qr/^\d+$/,
                            period_used => 40 },
            },
        ],
    },

    {
        name => 'two threads, one key',
        args => [ '-r', 50, '-t', 2 ],
        steps => [
            {
                name => '8 connections, 10 requests each: 50 pass',
                burst => [ 8, 10 ],
                statuses => { 200 => 50, 429 => 30 },
            },
            {
                name => 'the counters',
                limits => { requests => 80, admitted => 50, refused_rpm => 30,
                            max_rpm_window => 50 },
            },
        ],
    },

    {
        name => 'no limit',
        args => [],
        steps => [
            {
                name => 'openai: no limit headers',
                ask($OAI, 10, 100, 40),
                status => 200,
                resp_headers => \%no_limit_headers,
            },
            {
                name => 'anthropic: no limit headers',
                ask($ANT, 10, 100, 40),
                status => 200,
                resp_headers => \%no_limit_headers,
            },
            {
                name => 'x-mock-status 429 as before',
                ask($OAI, 9, 64, 16, headers => { 'x-mock-status' => 429 }),
                status => 429,
                resp_body => '{"error":{"message":"Rate limit reached","type":'
                      . '"requests","code":"rate_limit_exceeded"}}',
                resp_headers => { 'retry-after' => 1, %no_limit_headers },
            },
            {
                name => 'no GET /limits',
                method => 'GET',
                path => '/limits',
                status => 404,
            },
            {
                name => 'no POST /limits/reset',
                path => '/limits/reset',
                status => 404,
            },
            {
                name => 'nothing is refused',
                burst => [ 4, 25 ],
                statuses => { 200 => 100 },
            },
        ],
    },
);


# bad options: exit status 2 and why
# -c: requests in flight at most; one more is the provider overloaded
push(@scenarios, {
    name => 'requests in flight',
    args => [ '-c', 2 ],
    steps => [
        {
            name => 'a slow stream in flight',
            start => 's1',
            ask($OAI, 9, 64, 10, body => { stream => $T },
                headers => { 'x-mock-delay-ms' => 100 }),
        },
        {
            name => 'a second',
            start => 's2',
            ask($OAI, 9, 64, 10, body => { stream => $T },
                headers => { 'x-mock-delay-ms' => 100 }),
        },
        {
            name => 'openai: a third is overloaded, 503',
            ask($OAI, 9, 64, 16),
            status => 503,
            json => { error => { type => 'server_error' } },
            resp_headers => { 'retry-after' => 1,
                              'retry-after-ms' => $ABSENT },
        },
        {
            name => 'anthropic: 529 overloaded_error',
            ask($ANT, 9, 64, 16),
            status => 529,
            json => { type => 'error',
                      error => { type => 'overloaded_error' } },
            resp_headers => { 'retry-after' => 1 },
        },
        {
            name => 'the first ends',
            finish => 's1',
            status => 200,
            sse_tokens => 10,
        },
        {
            name => 'one fits again',
            ask($OAI, 9, 64, 16),
            status => 200,
        },
        {
            name => 'the second ends',
            finish => 's2',
            status => 200,
            sse_tokens => 10,
        },
        {
            name => 'counted: two refused, never more than two at once',
            limits => { requests => 5, admitted => 3, refused_inflight => 2,
                        max_inflight => 2 },
        },
    ],
});

my @bad_options = (
    [ [ '-r', 0 ], qr/invalid requests per minute "0"/ ],
    [ [ '-r', 1000001 ], qr/invalid requests per minute/ ],
    [ [ '-T', 'x' ], qr/invalid tokens per minute "x"/ ],
    [ [ '-D', -5 ], qr/invalid token quota "-5"/ ],
    [ [ '-D', 10, '-P', 0 ], qr/invalid quota period "0"/ ],
    [ [ '-c', 0 ], qr/invalid requests in flight "0"/ ],
);


###############################################################################

for my $sc (@scenarios) {
    subtest $sc->{name} => sub {
        my $m = start_mockllm(@{ $sc->{args} });
        %seen = ();

        run_step($m, $_) for @{ $sc->{steps} };

        stop_mockllm($m);
    };
}

for my $b (@bad_options) {
    my ($args, $why) = @$b;
    my (undef, $log) = tempfile('mockllm-XXXXXX', TMPDIR => 1, UNLINK => 1);

    my $rc = system("$MOCKLLM -l 127.0.0.1:1 @$args 2>$log") >> 8;
    my $err = do { local (@ARGV, $/) = ($log); <> };

    is($rc, 2, "mockllm @$args: exit status 2");
    like($err, $why, "mockllm @$args: says why");
}

done_testing();


###############################################################################

sub run_step {
    my ($m, $st) = @_;

    if ($st->{next_period}) {
        wait_next_period($m);
        return;
    }

    if ($st->{start}) {
        my $s = connect_mockllm($m);
        send_request($s, $st->{method} // 'POST', $st->{path},
                     $st->{headers}, $JSON->encode($st->{body}));

        # the headers are out as soon as the stream starts
        my $head = '';
        fill($s, \$head, time + 5) while $head !~ /\r\n\r\n/;
        my ($a) = $head =~ /\r\nx-mock-arrival-ms: (\d+)\r\n/i;
        $seen{ $st->{start} } = { socket => $s, head => $head,
                                  headers => { 'x-mock-arrival-ms' => $a } };
        ok(defined $a, "$st->{name}: started");
        return;
    }

    subtest $st->{name} => sub {
        my ($res, $t);

        if ($st->{limits} || $st->{reset}) {
            $res = request($m, $st->{limits} ? 'GET' : 'POST',
                           $st->{limits} ? '/limits' : '/limits/reset');
            is($res->{status}, 200, 'status');
            match(decode($res->{body}), $st->{limits} // $st->{reset},
                  'counters');

            return;
        }

        if ($st->{burst}) {
            my %got;
            $got{$_}++ for burst($m, @{ $st->{burst} });
            is_deeply(\%got, $st->{statuses}, 'statuses');
            return;
        }

        if ($st->{finish}) {
            my $s = $seen{ $st->{finish} }{socket};
            $res = read_response($s, $seen{ $st->{finish} }{head});
            close $s;

        } else {
            my $body = exists $st->{raw_body} ? $st->{raw_body}
                     : $st->{body} ? $JSON->encode($st->{body}) : undef;
            my $t0 = time;
            $res = request($m, $st->{method} // 'POST', $st->{path},
                           $st->{headers}, $body);
            $t = time - $t0;
        }

        $seen{ $st->{as} } = $res if $st->{as};

        is($res->{status}, $st->{status}, 'status');

        for my $k (sort keys %{ $st->{resp_headers} // {} }) {
            my $v = $st->{resp_headers}{$k};

            if (ref $v eq 'SCALAR' && $v == $ABSENT) {
                ok(!exists $res->{headers}{$k}, "no header $k");

            } else {
                match($res->{headers}{$k}, $v, "header $k");
            }
        }

        if (ref $st->{resp_body} eq 'Regexp') {
            like($res->{body}, $st->{resp_body}, 'body');

        } elsif (defined $st->{resp_body}) {
            is($res->{body}, $st->{resp_body}, 'body');
        }

        match(decode($res->{body}), $st->{json}, 'json') if $st->{json};

        if (defined $st->{sse_tokens}) {
            my @toks = $res->{body} =~ /"content":"tok\d+ "/g;
            is(scalar @toks, $st->{sse_tokens}, 'tokens streamed');
        }

        cmp_ok($t, '<', $st->{within}, "answered within $st->{within} s")
            if $st->{within};
    };
}


# the quota period is aligned to the mock's start, which only its clock
# knows: a bad request tells it without being charged
sub wait_next_period {
    my ($m) = @_;
    my $res = request($m, 'POST', $OAI, {}, '[');
    my $a = $res->{headers}{'x-mock-arrival-ms'};
    my $p = 2000;

    sleep(($p - $a % $p + 100) / 1000);
    pass("waited for the next period (arrival $a ms)");
}


# $conns connections, each sending $n requests one after the other, all
# in flight together: the statuses
sub burst {
    my ($m, $conns, $n) = @_;
    my @socks = map { connect_mockllm($m) } 1 .. $conns;
    my $body = $JSON->encode({ model => 'gpt-mock', messages => $hello,
                               max_tokens => 10 });
    my @status;

    for (1 .. $n) {
        send_request($_, 'POST', $OAI, { 'x-mock-tokens' => 1 }, $body)
            for @socks;
        push @status, read_response($_)->{status} for @socks;
    }

    close $_ for @socks;

    return @status;
}


# Go's time.Duration.String(), to the millisecond: OpenAI's reset headers
sub go_duration {
    my ($ms) = @_;

    return '0s' if $ms == 0;
    return "${ms}ms" if $ms < 1000;

    my ($h, $m, $s, $f) = (int($ms / 3600000), int($ms / 60000) % 60,
                           int($ms / 1000) % 60, $ms % 1000);
    my $d = ($h ? "${h}h" : '') . ($h || $m ? "${m}m" : '') . $s;

    $d .= '.' . (sprintf('%03d', $f) =~ s/0+$//r) if $f;

    return "${d}s";
}


###############################################################################
# One request on a fresh connection.  Without a body it still says
# Content-Length: 0 (and Content-Type), as this test always sent.

sub request {
    my ($m, $method, $path, $headers, $body) = @_;
    my $s = connect_mockllm($m);

    send_request($s, $method, $path, $headers, $body // '');
    my $res = read_response($s);
    close $s;

    return $res;
}


###############################################################################

# SIGTERM: a clean exit, and nothing on stderr
sub stop_mockllm {
    my ($m) = @_;
    my $deadline = time + 3;
    my $gone = 0;

    kill 'TERM', $m->{pid};

    while (time < $deadline) {
        if (waitpid($m->{pid}, WNOHANG) == $m->{pid}) {
            $gone = 1;
            last;
        }

        sleep 0.02;
    }

    ok($gone && $? >> 8 == 0, 'SIGTERM stops mockllm with status 0');
    kill 'KILL', $m->{pid} unless $gone;

    my $err = do { local (@ARGV, $/) = ($m->{log}); <> } // '';
    is($err, '', 'nothing on stderr');
}

