#!/usr/bin/perl

# The shape of the code, as a newcomer finds it: no function of the
# module, the core or accountd longer than 150 lines; every function the
# module exports named after its file; no comment that cites an issue or a
# source document (that belongs in a commit message).  The calls between
# files are checked by scripts/layers, from the objects (make check).

use strict;
use warnings;

use File::Basename qw(basename);
use FindBin;
use Test::More;

my $root = "$FindBin::Bin/..";
my $mod = "$root/ngx_llm_gateway_module";
my $max = 150;

sub lines {
    my ($f) = @_;
    open(my $fh, '<', $f) or die "$f: $!";
    my @l = <$fh>;
    close($fh);
    return @l;
}

# nginx's style: the name at the start of a line, "{" and "}" alone at the
# start of theirs
my @c = (glob("$mod/*.c"), glob("$mod/core/*.c"), glob("$root/accountd/*.c"));
ok(@c > 40, scalar(@c) . ' C files of the module, core and accountd');

my ($funcs, @long) = (0);

for my $f (@c) {
    my @l = lines($f);
    my ($name, $start);

    for my $i (0 .. $#l) {
        $name = $1 if $l[$i] =~ /^(\w+)\(/;
        $start = $i if $l[$i] =~ /^\{/;

        if ($l[$i] =~ /^\}/ && defined $start) {
            $funcs++;
            my $len = $i - $start + 1;
            push(@long, basename($f) . ": $name, $len lines")
                if $len > $max && defined $name;
            undef $start;
        }
    }
}

ok($funcs > 500, "$funcs functions read");
is(join("\n", @long), '', "none longer than $max lines");

# a definition without "static" on the line before its name is exported
my @unnamed;
my $exported = 0;

for my $f (glob("$mod/ngx_http_llm_gateway_*.c")) {
    my ($file) = basename($f) =~ /^(ngx_http_llm_gateway_\w+)\.c$/;
    my @l = lines($f);

    for my $i (1 .. $#l) {
        next unless $l[$i] =~ /^(ngx_\w+)\(/;
        next if $l[$i - 1] =~ /\bstatic\b/ || $l[$i - 1] =~ /^\s*$/
                || $l[$i - 1] =~ /[;,]\s*$/;
        my $name = $1;
        $exported++;
        push(@unnamed, basename($f) . ": $name")
            unless $name eq $file || index($name, "${file}_") == 0;
    }
}

ok($exported > 80, "$exported functions the module exports");
is(join("\n", @unnamed), '', 'each named after its file');

# comments that cite an issue or a source document's section
my @cites;
my @code = (glob("$mod/*.[ch]"), glob("$mod/core/*.[ch]"),
            glob("$mod/core/t/*.[ch]"), glob("$mod/core/fuzz/*.[ch]"),
            glob("$mod/core/fuzz/*.mk"), glob("$root/accountd/*.[ch]"),
            glob("$root/mockllm/*.[ch]"), glob("$root/t/*.t"),
            glob("$root/t/lib/*.pm"), glob("$root/t/lib/LLMGW/*.pm"),
            glob("$root/t/*.mk"), glob("$root/bench/*.[ch]"),
            glob("$root/bench/*.pl"), "$root/Makefile", "$root/config",
            glob("$root/scripts/*"), glob("$root/sql/*.sql"));

for my $f (@code) {
    next if basename($f) eq '012-code-shape.t';
    my @l = lines($f);
    for my $i (0 .. $#l) {
        push(@cites, basename($f) . ':' . ($i + 1) . ": $l[$i]")
            if $l[$i] =~ /\bissues? #?\d+\b|\bsource doc(?:ument)?s? \d+/i;
    }
}

ok(@code > 100, scalar(@code) . ' files of code read');
is(join('', @cites), '', 'no comment cites an issue or a source document');

done_testing();
