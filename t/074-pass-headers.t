#!/usr/bin/perl

# What crosses the gateway besides the body.  Client request headers: only
# the built-in set and those of llm_gateway_pass_headers reach the
# upstream, the operator's proxy_set_header lines still go; the shipped
# configuration (scripts/nginx.conf.in) drops a client's
# OpenAI-Organization and x-mock-usage, and sends the upstream the
# canonical path of a URI a client wrote otherwise.  Upstream response
# headers: its rate limits and its account stay with the gateway, whose
# own x-ratelimit-* go out alone.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use LLMGW;
use Test::More;

my $s = stack();

my $t = new_tenant(tier => 'free');

# an upstream that says what it got, with headers a provider sends
my $echo = nginx(pass_mock => 0, http => <<'EOF')->run();
    server {
        listen  127.0.0.1:%%PORT%%;

        location / {
            default_type  application/json;
            add_header    x-ratelimit-limit-tokens 999 always;
            add_header    anthropic-ratelimit-tokens-limit 999 always;
            add_header    openai-organization org-of-the-operator always;
            add_header    openai-project proj-of-the-operator always;
            add_header    anthropic-organization-id org-id always;
            return  200 '{"seen":"org=[$http_openai_organization] proj=[$http_openai_project] mock=[$http_x_mock_usage] team=[$http_x_team_a] other=[$http_x_other] ua=[$http_user_agent] ver=[$http_anthropic_version] beta=[$http_openai_beta] cookie=[$http_cookie] uri=[$request_uri]"}';
        }
    }
EOF

my %evil = (
    'OpenAI-Organization' => 'org-of-the-client',
    'OpenAI-Project'      => 'proj-of-the-client',
    'x-mock-usage'        => '{"prompt_tokens":0,"completion_tokens":0}',
    'x-team-a'            => 'a',
    'x-other'             => 'b',
    'User-Agent'          => 't074',
    'anthropic-version'   => '2023-06-01',
    'OpenAI-Beta'         => 'assistants=v2',
    'Cookie'              => 'session=1',
);

sub seen {
    my ($r) = @_;
    my $j = json_body($r) // {};
    return $j->{seen} // "status $r->{status}: $r->{content}";
}

sub body {
    return { model => 'mock-gpt-4o-mini', max_tokens => 10,
             messages => [ { role => 'user', content => 'hi' } ] };
}

# --- the shipped configuration ---------------------------------------------------

{
    my $ng = LLMGW::Nginx->demo(mock => $echo->port)->run();

    my $r = http_post($ng->url('/v1/chat/completions'), body(),
                      authorization => "Bearer $t->{key}", %evil);
    is($r->{status}, 200, 'nginx.conf.in: 200 through the echo');
    is(seen($r), 'org=[] proj=[] mock=[] team=[] other=[] ua=[t074] '
       . 'ver=[2023-06-01] beta=[] cookie=[] '
       . 'uri=[/v1/chat/completions]',
       'nginx.conf.in: no OpenAI-Organization, OpenAI-Project, x-mock-usage, '
       . 'a beta (it may change the price), cookie or other header of the '
       . 'client; user-agent, anthropic-version go');

    my $h = $r->{headers};
    is($h->{'x-ratelimit-limit-tokens'}, 10000,
       "nginx.conf.in: one x-ratelimit-limit-tokens, the gateway's (the tier)");
    ok(!exists $h->{$_}, "nginx.conf.in: no $_ of the upstream")
        for qw(anthropic-ratelimit-tokens-limit openai-organization
               openai-project anthropic-organization-id);

    # the path the location matched, whatever the client wrote
    for my $uri ('//v1/chat/completions', '/v1/%63hat/completions',
                 '/v1/./chat/completions', '/v1/x/../chat/completions')
    {
        $r = http_post($ng->url($uri), body(),
                       authorization => "Bearer $t->{key}");
        like(seen($r), qr{uri=\[/v1/chat/completions\]$},
             "nginx.conf.in: $uri reaches the upstream as "
             . '/v1/chat/completions');
    }

    $ng->no_alerts();
}

# the same, with the real mock: a client cannot set its own bill
{
    my $ng = LLMGW::Nginx->demo()->run();

    my $r = http_post($ng->url('/v1/chat/completions'), body(),
                      authorization => "Bearer $t->{key}",
                      'x-mock-usage' => '{"prompt_tokens":0,'
                                        . '"completion_tokens":0,'
                                        . '"total_tokens":0}',
                      'x-mock-tokens' => 3);
    is($r->{status}, 200, 'nginx.conf.in: 200 from mockllm');
    my $row = usage_row($r->{headers}{'x-request-id'} // '');
    is_deeply([ map { $row && $row->{$_} } qw(input_tokens output_tokens) ],
              [ 3 + 3 + 1, 10 ],
              'nginx.conf.in: the ledger has the real usage (7 in, 10 out: '
              . 'x-mock-tokens and x-mock-usage not passed, max_tokens '
              . 'caps the default 16)');

    $ng->no_alerts();
}

# --- llm_gateway_pass_headers, proxy_set_header ---------------------------------

# mockllm with limits on sends its rate limit headers on every answer
my $lim = mockllm('-r', '100000', '-T', '100000000');

my $http = <<'EOF';
    %%GATEWAY%%
    llm_gateway_tier  free  unpriced=allow tpm=600000;

    upstream echo {
        server  127.0.0.1:ECHO;
    }

    log_format  seen  'other=[$http_x_other] mock=[$http_x_mock_usage]';

    server {
        listen  127.0.0.1:%%PORT%%;

        access_log  %%NGINX%%/seen.log seen;

        location = /v1/chat/completions {
            llm_gateway  zone=llm;
            proxy_pass   http://echo;
        }

        location = /v1/team {
            llm_gateway               zone=llm;
            llm_gateway_pass_headers  x-team-* OpenAI-Project;
            proxy_set_header          OpenAI-Organization org-set-here;
            proxy_pass                http://echo/v1/chat/completions;
        }

        location = /v1/limits {
            llm_gateway  zone=llm;
            proxy_pass   http://127.0.0.1:LIMITED/v1/chat/completions;
        }

        location = /v1/messages {
            llm_gateway  zone=llm api=anthropic;
            proxy_pass   http://127.0.0.1:LIMITED/v1/messages;
        }
    }
EOF
my $echo_port = $echo->port;
$http =~ s/ECHO/$echo_port/g;
$http =~ s/LIMITED/$lim->{port}/g;

my $ng = nginx(pass_mock => 0, http => $http)->run();

my $r = http_post($ng->url('/v1/chat/completions'), body(),
                  authorization => "Bearer $t->{key}", %evil);
is(seen($r), 'org=[] proj=[] mock=[] team=[] other=[] ua=[t074] '
   . 'ver=[2023-06-01] beta=[] cookie=[] '
   . 'uri=[/v1/chat/completions]', 'the built-in set only');

# the access log still has them, once the upstream had the request
{
    my @lines;
    for (1 .. 100) {    # the log phase may end after the client has it all
        open(my $fh, '<', $ng->dir() . '/seen.log') or die "seen.log: $!";
        @lines = <$fh>;
        close($fh);
        last if @lines;
        select(undef, undef, undef, 0.05);
    }
    (my $mock = $evil{'x-mock-usage'}) =~ s/"/\\x22/g;    # as nginx logs it
    is($lines[0] // '', "other=[b] mock=[$mock]\n",
       'the access log sees the headers the upstream did not get');
}

$r = http_post($ng->url('/v1/team'), body(),
               authorization => "Bearer $t->{key}", %evil);
is(seen($r), 'org=[org-set-here] proj=[proj-of-the-client] mock=[] team=[a] '
   . 'other=[] ua=[t074] ver=[2023-06-01] beta=[] cookie=[] '
   . 'uri=[/v1/chat/completions]',
   'llm_gateway_pass_headers x-team-* OpenAI-Project: those pass too; '
   . "proxy_set_header's OpenAI-Organization replaces the client's");

# the upstream's limits are not the client's: the gateway's go alone
$r = http_post($ng->url('/v1/limits'), body(),
               authorization => "Bearer $t->{key}");
is($r->{status}, 200, 'mockllm -r -T: 200');
is($r->{headers}{'x-ratelimit-limit-tokens'}, 900000,
   "one x-ratelimit-limit-tokens, the gateway's (the tier's burst)");
ok(!exists $r->{headers}{'x-ratelimit-limit-requests'},
   "no x-ratelimit-limit-requests: the tier has no rpm, the mock's is "
   . 'hidden');

$r = http_post($ng->url('/v1/messages'),
               { model => 'mock-a', max_tokens => 10,
                 messages => [ { role => 'user', content => 'hi' } ] },
               'x-api-key' => $t->{key}, 'anthropic-version' => '2023-06-01');
is($r->{status}, 200, 'Anthropic, mockllm -r -T: 200');
is_deeply([ grep { /^anthropic-ratelimit-/ } sort keys %{ $r->{headers} } ],
          [], 'no anthropic-ratelimit-* of the upstream');

# a bad name is a configuration error
my $bad = nginx(http => <<'EOF');
    %%GATEWAY%%
    llm_gateway_tier          free  unpriced=allow tpm=600000;
    llm_gateway_pass_headers  x-ok x*y;
EOF
my ($rc, $out) = $bad->test();
isnt($rc, 0, 'nginx -t refuses a header name with a "*" inside');
like($out, qr/invalid header name "x\*y"/, 'and says which');

$ng->no_alerts();
$echo->no_alerts();

done_testing();
