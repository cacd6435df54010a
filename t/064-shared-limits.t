#!/usr/bin/perl

# Rate limits shared by gateways: two nginx, each with its own accountd, on
# one PostgreSQL, under load for one tenant of TPM L admit about L
# together, not 2 L; a gateway that alone carries the load gets nearly all
# of L.  Measured from llm.usage, 60 s windows of completion times.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use LLMGW;
use Test::More;
use Time::HiRes qw(sleep time);

my $s = stack();
my $t = new_tenant(tier => 'shared');

# L = 60,000 tokens a minute, 1,000 a second; each request is 100
my ($L, $B) = (60000, 1000);

my $other = accountd_other('shared2');

sub gateway {
    my ($socket, $snapshot) = @_;

    return nginx(workers => 2, log_level => 'warn', http => <<"EOF")->run();
    llm_gateway_zone      zone=llm:1m;
    llm_gateway_keys      $snapshot secret=$s->{LLMGW_KEY_SECRET};
    llm_gateway_accountd  unix:$socket;

    llm_gateway_tier  shared  unpriced=allow tpm=$L burst=$B;

    server {
        listen      127.0.0.1:%%PORT%%;
        access_log  off;

        location = /v1/chat/completions {
            llm_gateway       zone=llm;
            proxy_pass        http://127.0.0.1:%%MOCK%%;
            proxy_set_header  x-mock-tokens  93;
        }
    }
EOF
}

my $g1 = gateway($s->{LLMGW_ACCOUNTD_SOCKET}, $s->{LLMGW_KEY_SNAPSHOT});
my $g2 = gateway($other->{socket}, $other->{snapshot});

local $ENV{LLMGW_KEY} = $t->{key};

sub load {
    my ($secs, @ng) = @_;
    my @fh;
    for my $ng (@ng) {
        open(my $fh, '-|', "wrk -t1 -c8 -d${secs}s -s "
                           . "$FindBin::Bin/data/load.lua "
                           . $ng->url('/v1/chat/completions') . ' 2>&1')
            or die "wrk: $!";
        push(@fh, $fh);
    }
    my @out = map { my $fh = $_; my @l = <$fh>; close($fh); @l } @fh;
    diag($_) for grep { /Requests\/sec|requests in/ } @out;
}

# admitted tokens by completion time, in ms
sub rows_since {
    my ($from) = @_;
    my $last = -1;
    my $rows;
    for (1 .. 50) {
        $rows = db()->selectall_arrayref(
            q{SELECT (extract(epoch FROM ts) * 1000)::bigint,
                     input_tokens + output_tokens
                FROM llm.usage WHERE tenant_id = ? AND status = 200
                 AND ts >= to_timestamp(?) ORDER BY ts},
            undef, $t->{id}, $from);
        last if @$rows == $last;
        $last = @$rows;
        sleep(0.3);
    }
    return $rows;
}

sub max_window {
    my ($rows) = @_;
    my ($max, $sum, $j) = (0, 0, 0);
    for my $i (0 .. $#$rows) {
        $sum += $rows->[$i][1];
        $sum -= $rows->[$j++][1] while $rows->[$i][0] - $rows->[$j][0] >= 60000;
        $max = $sum if $sum > $max;
    }
    return $max;
}

# --- both gateways carry the load --------------------------------------------

my $start = time();
load(65, $g1, $g2);

my $both = max_window(rows_since($start));
diag("two gateways, 65 s: the busiest 60 s admitted $both tokens (L $L)");
ok($both <= 1.1 * $L, 'two gateways together: at most 1.1 L a minute');
ok($both >= 0.8 * $L, 'and about L');

# --- one gateway alone -------------------------------------------------------

sleep(4);
$start = time();
load(65, $g1);

my $rows = rows_since($start + 5);
my $alone = 0;
$alone += $_->[1] for grep { $_->[0] <= ($start + 65) * 1000 } @$rows;
diag("one gateway alone, 60 s: $alone tokens");
ok($alone >= 0.9 * $L, 'a gateway alone gets nearly all of L');
ok(max_window(rows_since($start)) <= 1.1 * $L, '  and not more');

$g1->no_alerts();
$g2->no_alerts();

system("kill \$(cat $other->{pidfile}) 2>/dev/null");

done_testing();
