#!/usr/bin/perl

# The latest figures of the benchmarks, from the newest
# build/bench/NAME-<time>.json of each (micro, ingest, load, ttfb, streams,
# peers), as one markdown table: printed, and written between the marks of
# bench/README.md's "Latest results" (the rest of the file untouched).
# `make bench` runs it at the end; after one benchmark, run it by hand.
# A row a figure: its value, the target (none: only shown), met or missed,
# and on a benchmark's first row its run: the UTC time and the commit it
# measured ("+": with changes to tracked files).

use strict;
use utf8;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../t/lib", "$FindBin::Bin/lib";

use Bench;

my @benches = qw(micro ingest load ttfb streams peers);
my $readme = "$FindBin::Bin/README.md";
my $begin = '<!-- results: written by bench/results.pl -->';
my $end = '<!-- end of results -->';

binmode(STDOUT, ':encoding(UTF-8)');

my $table = join('', "| benchmark | figure | value | target | met | run |\n",
                     "| --- | --- | ---: | --- | --- | --- |\n",
                     map { rows($_) } @benches);
print $table;
rewrite($readme, $table);


# the newest file of a benchmark, or undef
sub newest {
    my ($name) = @_;
    my @f = sort glob(build_dir() . "/bench/$name-*.json");
    return $f[-1];
}

# A benchmark's rows: each of its figures, the run on the first
sub rows {
    my ($name) = @_;
    my $file = newest($name);
    my $bench = "`make bench-$name`";

    return "| $bench | no run yet | | | | |\n" unless $file;

    my $r = read_json($file);
    my @t = grep { ref $_ eq 'HASH' && exists $_->{target} }
            @{ ref $r->{targets} eq 'ARRAY' ? $r->{targets} : [] };
    my $run = run($r, $file);

    return "| $bench | no figures in this file: an older run | | | | $run |\n"
        unless @t;

    my $rows = '';
    for my $t (@t) {
        $rows .= sprintf("| %s | %s | %s | %s | %s | %s |\n", $bench,
                         cell($t->{name}), value($t->{value}),
                         target($t->{target}), met($t->{met}), $run);
        ($bench, $run) = ('', '');
    }
    return $rows;
}

# "2026-12-03 14:41Z, `1ed55c2f618d`": when the run was, what it measured
sub run {
    my ($r, $file) = @_;
    my $when = $r->{when} // $r->{time} // ($file =~ /-(\w+)\.json$/)[0];
    my ($y, $m, $d, $h, $min)
        = $when =~ /^(\d{4})-?(\d\d)-?(\d\d)T(\d\d):?(\d\d)/;
    my $at = defined $min ? "$y-$m-$d $h:${min}Z" : $when;
    return $at . ($r->{commit} ? ", `$r->{commit}`" : '');
}

sub cell { return ($_[0] // '') =~ s/^\s+|\s+$//gr =~ s/\|/\\|/gr }

# three significant figures or so, thousands apart
sub value {
    my ($v) = @_;
    return '' unless defined $v;
    my $abs = abs($v);
    my $s = $abs >= 100 ? sprintf('%.0f', $v)
          : $abs >= 10  ? sprintf('%.1f', $v)
          : $abs >= 1   ? sprintf('%.2f', $v)
          :               sprintf('%.3f', $v);
    1 while $s =~ s/^(-?\d+)(\d{3})/$1,$2/;
    return $s;
}

sub target { return ($_[0] // '') =~ s/^>=/≥/r =~ s/^<=/≤/r }

sub met {
    my ($met) = @_;
    return '' unless defined $met;
    return $met ? 'met' : '**missed**';
}

# The table between the marks of the file, if it changed
sub rewrite {
    my ($file, $table) = @_;
    open(my $fh, '<:encoding(UTF-8)', $file) or die "$file: $!\n";
    my $text = do { local $/; <$fh> };
    close($fh);

    my $new = $text;
    $new =~ s/(\Q$begin\E\n).*?(\Q$end\E)/$1\n$table\n$2/s
        or die "$file: no \"$begin\" ... \"$end\" in it\n";

    if ($new eq $text) {
        print "\n$file: the results unchanged\n";
        return;
    }

    open($fh, '>:encoding(UTF-8)', "$file.new") or die "$file.new: $!\n";
    print $fh $new;
    close($fh) or die "$file.new: $!\n";
    rename("$file.new", $file) or die "$file: $!\n";
    print "\n$file: the results rewritten\n";
}
