#!/usr/bin/perl

# How good is the prompt estimate the gateway reserves before admission?
# A fixed corpus goes through the gateway; the estimate is read back from
# the ledger (reserved_tokens - max_tokens) and compared with a real
# tokenizer's count (o200k, npm gpt-tokenizer, framed as OpenAI counts chat
# messages).  The table of errors is reported; gross errors fail.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use JSON::PP;
use LLMGW;
use Test::More;

my $s = stack();
my $script = "$s->{LLMGW_BUILD}/sdk/estimate.mjs";
my $file = "$FindBin::Bin/data/estimate-corpus.json";

plan(skip_all => 'the tokenizer is not installed (make sdk)')
    unless -f $script;

my $corpus = do {
    open(my $fh, '<', $file) or die "$file: $!";
    local $/;
    decode_json(<$fh>);
};

my %real = map { $_->{name} => $_->{tokens} }
           @{ decode_json(`node $script $file`) };

my $t = new_tenant(tier => 'pro');

my $ng = nginx(http => <<'EOF')->run();
    %%GATEWAY%%
    llm_gateway_tier  pro  unpriced=allow tpm=6000000;

    server {
        listen  127.0.0.1:%%PORT%%;

        location = /v1/chat/completions {
            llm_gateway  zone=llm;
            proxy_pass   http://127.0.0.1:%%MOCK%%;
        }
    }
EOF

my (@report, %sum);

for my $e (@$corpus) {
    my $r = http_post($ng->url('/v1/chat/completions'),
                      { model => 'gpt-4o', max_tokens => 10,
                        messages => $e->{messages} },
                      authorization => "Bearer $t->{key}",
                      'x-mock-tokens' => 1);

    my $u = usage_row($r->{headers}{'x-request-id'} // '') // {};
    my $est = ($u->{reserved_tokens} // 0) - 10;
    my $real = $real{ $e->{name} } // 0;
    my $err = $real ? ($est - $real) / $real : 0;

    push(@report, sprintf('%-16s %-5s estimate %4d  o200k %4d  %+6.1f%%',
                          $e->{name}, $e->{lang}, $est, $real, 100 * $err));

    $sum{ $e->{lang} }{n}++;
    $sum{ $e->{lang} }{abs} += abs($err);

    # a gross error would make the reservation meaningless
    ok($real > 0 && $est >= $real / 4 && $est <= $real * 4,
       "$e->{name}: within a factor of 4 of the tokenizer");
}

diag("prompt estimate against o200k, per request:");
diag("  $_") for @report;
diag(sprintf('  mean |error|, %s: %.1f%% over %d', $_,
             100 * $sum{$_}{abs} / $sum{$_}{n}, $sum{$_}{n}))
    for sort keys %sum;

# English prose is what the bytes / 4 rule is made for
ok($sum{en}{abs} / $sum{en}{n} < 0.35,
   'English: the mean error is under 35 %');

$ng->no_alerts();

done_testing();
