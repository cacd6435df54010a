#!/usr/bin/perl

# Under load the limits hold exactly: 2 workers, 200 concurrent clients for
# 60 s against one tenant.  The tokens admitted in any 60 s window, read
# from llm.usage, never exceed B + r * 60, and the requests in flight, as
# the mock counts them, never exceed the concurrency limit.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use HTTP::Tiny;
use JSON::PP;
use LLMGW;
use Test::More;
use Time::HiRes qw(sleep);

my $s = stack();
my $t = new_tenant(tier => 'load');

# B = 90,000 tokens, r = 1,000 tokens a second, 8 in flight
my ($B, $r, $slots, $cost) = (90000, 1000, 8, 100);

my $ng = nginx(workers => 2, log_level => 'warn', http => <<'EOF')->run();
    %%GATEWAY%%
    llm_gateway_tier  load  unpriced=allow tpm=60000 burst=90000 concurrency=8;
    llm_gateway_reject_log_level  info;

    server {
        listen      127.0.0.1:%%PORT%%;
        access_log  off;

        location = /v1/chat/completions {
            llm_gateway       zone=llm;
            proxy_pass        http://127.0.0.1:%%MOCK%%;
            proxy_set_header  x-mock-tenant   $llm_tenant;
            proxy_set_header  x-mock-tokens   93;
            proxy_set_header  x-mock-ttfb-ms  20;
        }
    }
EOF

local $ENV{LLMGW_KEY} = $t->{key};
my $out = `wrk -t2 -c200 -d60s -s $FindBin::Bin/data/load.lua ${\ $ng->url('/v1/chat/completions')} 2>&1`;
diag($_) for grep { /Requests\/sec|requests in|Non-2xx/ } split(/\n/, $out);

sleep(1);

# every admitted request left its row: wait until the count stops growing
my ($rows, $last) = (0, -1);
while ($rows != $last) {
    $last = $rows;
    sleep(0.5);
    $rows = db()->selectrow_array(
        'SELECT count(*) FROM llm.usage WHERE tenant_id = ?', undef, $t->{id});
}

my $ts = db()->selectall_arrayref(
    q{SELECT (extract(epoch FROM ts) * 1000)::bigint,
             input_tokens + output_tokens, status
        FROM llm.usage WHERE tenant_id = ? ORDER BY ts}, undef, $t->{id});

# the largest sum over any 60 s window of completion times
my ($max, $sum, $j) = (0, 0, 0);
for my $i (0 .. $#$ts) {
    $sum += $ts->[$i][1];
    $sum -= $ts->[$j++][1] while $ts->[$i][0] - $ts->[$j][0] >= 60000;
    $max = $sum if $sum > $max;
}

my $total = 0;
$total += $_->[1] for @$ts;

diag("admitted $rows requests, $total tokens; the busiest 60 s: $max tokens");

ok($total > $B, 'the load spent more than the burst: the limit was reached');
is(scalar(grep { $_->[2] == 200 && $_->[1] != $cost } @$ts), 0,
   "every answered request used exactly its reservation of $cost tokens");

# wrk closes its connections when its time is up: a request the upstream
# had not yet answered is recorded as 499 and charged its prompt, 7 tokens,
# if it had reached the upstream, else nothing
my @left = grep { $_->[2] != 200 } @$ts;
ok(@left <= 200 && !grep({ $_->[2] != 499 || $_->[1] > 7 } @left),
   scalar(@left) . ' requests cut by the end of the run: 499, charged at '
   . 'most their prompt');

# completion follows admission by the mock's 20 ms and a little: a window
# of completions may hold admissions of up to 1 s more
ok($max <= $B + $r * 61,
   "no 60 s window above B + r * 60 (with 1 s of completion lag): $max");

my $st = decode_json(HTTP::Tiny->new->get(
    "http://127.0.0.1:$s->{LLMGW_MOCK_PORT}/stats/$t->{name}")->{content});

diag("most requests in flight at the mock: $st->{max_inflight}");
ok($st->{max_inflight} >= 2, 'requests did overlap');
ok($st->{max_inflight} <= $slots,
   "never more than $slots in flight at once");
is($st->{inflight}, 0, 'and none once the load is over');

$ng->no_alerts();

done_testing();
