#!/usr/bin/perl

# `make bench-micro`: build/bench/micro (bench/micro.c: the pure parts in
# nanoseconds an operation, the bytes of the zone's nodes), its output as
# it prints it, and its figures to build/bench/micro-<time>.json, each of
# its lines "what  value unit  about".  No stack: nothing but the C runs.
# No figure is a pass or a fail.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../t/lib", "$FindBin::Bin/lib";

use Bench;

my $micro = build_dir() . '/bench/micro';
-x $micro or die "$micro is not built: run make bench-micro\n";

open(my $out, '-|', $micro) or die "$micro: $!\n";
my @lines;
while (my $line = <$out>) {
    print $line;
    # "queue   2000        2279.1 ns  a waiter's poll (llm_pacer_go), ..."
    push(@lines, [ $1, $2, $3, $4 ])
        if $line =~ /^(\S.*?)\s+(\d+(?:\.\d+)?) (ns|B)\s+(.*?)\s*$/;
}
close($out);
my $rc = $? >> 8 || ($? ? 1 : 0);

# a name a figure: its "what", and where several lines share one, the
# first words of their "about"
my %seen;
$seen{ $_->[0] =~ s/\s+/ /gr }++ for @lines;

my @figures;
for my $l (@lines) {
    my ($what, $value, $unit, $about) = @$l;
    $what =~ s/\s+/ /g;
    $what .= ': ' . ($about =~ /^([^,;]*)/)[0] if $seen{$what} > 1;
    push(@figures, [ "$what ($unit)", '', $value, undef ]);
}

my ($json, $stamp) = json_file('micro');
write_json($json, {
    when => $stamp, cpus => cpus(),
    lines => [ map { { what => $_->[0], value => $_->[1] + 0,
                       unit => $_->[2], about => $_->[3] } } @lines ],
    targets => targets_json(@figures) });

exit $rc;
