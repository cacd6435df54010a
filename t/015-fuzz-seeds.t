#!/usr/bin/perl

# The libFuzzer targets replay their seed corpora: every input that ever
# found a bug stays a regression test.

use strict;
use warnings;

use FindBin;
use Test::More;

my $top = "$FindBin::Bin/..";
my $core = "$top/ngx_llm_gateway_module/core";

# [ target, seed corpus ]
my @targets = (
    [ 'fuzz_sse', "$core/fuzz/corpus/sse" ],
    [ 'fuzz_inspect', "$core/fuzz/corpus/inspect" ],
    [ 'fuzz_inspect_diff', "$core/fuzz/corpus/inspect_diff" ],
    [ 'fuzz_record', "$core/fuzz/corpus/record" ],
    [ 'fuzz_key', "$core/fuzz/corpus/key" ],
    [ 'fuzz_provider', "$core/fuzz/corpus/provider" ],
    [ 'fuzz_pacer', "$core/fuzz/corpus/pacer" ],
    [ 'fuzz_fair', "$core/fuzz/corpus/fair" ],
    [ 'fuzz_breaker', "$core/fuzz/corpus/breaker" ],
    [ 'fuzz_tx_request', "$core/fuzz/corpus/tx_request" ],
    [ 'fuzz_tx_stream', "$core/fuzz/corpus/tx_stream" ],
    [ 'fuzz_tx_body', "$core/fuzz/corpus/tx_body" ],
);

for my $t (@targets) {
    my ($name, $seeds) = @$t;
    my $bin = "$top/build/fuzz/$name";

    ok(-x $bin, "$name is built") or next;

    my @files = glob("$seeds/*");
    ok(@files > 0, "$name has seeds");

    my $out = `$bin @files 2>&1`;
    is($? >> 8, 0, "$name replays " . scalar(@files) . " seeds cleanly")
        or diag(substr($out, -3000));
    unlike($out, qr/ERROR: |runtime error/, "$name: no sanitizer report");
}

done_testing();
