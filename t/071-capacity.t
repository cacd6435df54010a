#!/usr/bin/perl

# How far a plan can be oversold: accountd
# capacity reads each plan's mean utilisation from llm.usage and says how
# many tenants of it the capacity supports by the mean and with 3 sigma.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use LLMGW;
use Test::More;

stack();

my $dbh = db();

# tiers of this test alone: five tenants of "cap8" and two of "cap50"
my $tag = "c$$";
my @eight = map { new_tenant(tier => "${tag}8") } 1 .. 5;
my @fifty = map { new_tenant(tier => "${tag}50") } 1 .. 2;

# each existed for the whole day looked at
$dbh->do('UPDATE llm.tenants SET created_at = now() - interval \'2 days\''
         . ' WHERE tenant_id = ANY(?)', undef,
         [ map { $_->{id} } @eight, @fifty ]);

my $n = 0;

sub used {
    my ($t, $tokens) = @_;
    $dbh->do(q{INSERT INTO llm.usage (request_id, tenant_id, model, api,
                   input_tokens, output_tokens, ts)
               VALUES (?, ?, 'm', 'openai', ?, ?, now() - interval '1 hour')},
             undef, "cap-$$-" . ++$n, $t->{id}, $tokens - 1000, 1000);
}

# cap8: 60,000 TPM plans used 8 % on average over the day (1,440 min):
# 0.08 x 60,000 x 1,440 = 6,912,000 tokens a tenant; one uses nothing,
# which the others make up for: 5 x 6,912,000 in all
used($eight[0], 6912000 * 2);
used($eight[1], 6912000);
used($eight[2], 6912000);
used($eight[3], 6912000);

# cap50: 10,000 TPM plans at 50 %
used($_, 5000 * 1440) for @fifty;

my $out = accountd('capacity', '--capacity', 1200000, '--days', 1,
                   '--plans', "${tag}8=60000,${tag}50=10000");
note($out);

my %row;
for (split /\n/, $out) {
    my @f = split ' ';
    $row{ $f[0] } = \@f if @f >= 8 && $f[0] =~ /^\Q$tag\E/;
}

# plan tpm tenants utilisation by_mean x headroom x
my $r = $row{"${tag}8"};
is($r->[2], 5, 'cap8: its five tenants');
is($r->[3], '8.00%', 'utilisation 8 %, the idle one counted');
is($r->[4], 250, '250 tenants by the mean (source 7.2.9)');
is($r->[5], '12.5x', 'oversold 12.5 times');
is($r->[6], 132, '132 with 3 sigma of headroom');
is($r->[7], '6.6x', 'oversold 6.6 times');

$r = $row{"${tag}50"};
is($r->[3], '50.00%', 'cap50: 50 %');
is($r->[4], 240, 'by the mean: 1,200,000 / 5,000');

like($out, qr/a mean load of 34000 tokens a minute.*within the capacity/,
     'the plans sold now: 5 x 4,800 + 2 x 5,000, within it');

# --sigma 0 is the mean
$out = accountd('capacity', '--capacity', 1200000, '--days', 1,
                '--sigma', 0, '--plans', "${tag}8=60000");
like($out, qr/^\Q${tag}8\E\s+60000\s+5\s+8\.00%\s+250\s+12\.5x\s+250\s/m,
     '--sigma 0: the headroom is the mean');

# a plan nobody has: no tenants, no limit
$out = accountd('capacity', '--capacity', 1000, '--plans', 'nobody=10');
like($out, qr/^nobody\s+10\s+0\s+0\.00%\s+-/m, 'a plan without tenants');

# bad input is refused with a reason
for my $bad ([ '--plans', 'x=1' ], [ '--capacity', '0', '--plans', 'x=1' ],
             [ '--capacity', '10', '--plans', 'x' ],
             [ '--capacity', '10', '--plans', 'x=-5' ],
             [ '--capacity', '10', '--plans', 'x=5', '--sigma', 'lots' ])
{
    my $cmd = join(' ', map { "'$_'" } @$bad);
    my $s = stack();
    my $err = `$s->{LLMGW_BUILD}/accountd -c $s->{LLMGW_ACCOUNTD_CONF} capacity $cmd 2>&1`;
    isnt($? >> 8, 0, "capacity @$bad: refused");
    like($err, qr/accountd: |usage: /, 'with a reason');
}

done_testing();
