#!/usr/bin/perl

# The module loads into Debian's stock nginx; bad configuration makes
# `nginx -t` fail with a message that names the problem.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use LLMGW;
use Test::More;

my $s = stack();

my $good = <<'EOF';
    %%GATEWAY%%
    llm_gateway_tier  free  tpm=10000;

    server {
        listen  127.0.0.1:%%PORT%%;

        location /v1/chat/completions {
            llm_gateway  zone=llm;
            proxy_pass   http://127.0.0.1:%%MOCK%%;
        }
    }
EOF

# [ what, replace this, with that, expected message (undef: passes) ]
my @cases = (
    [ 'a valid configuration', '', '', undef ],
    [ 'unknown api', 'zone=llm;', 'zone=llm api=grpc;',
      qr/invalid parameter "api=grpc"/ ],
    [ 'llm_gateway without zone', 'zone=llm;', 'api=openai;',
      qr/"llm_gateway" must have "zone" parameter/ ],
    [ 'an undefined zone', 'zone=llm;', 'zone=other;',
      qr/zero size shared memory zone "other"/ ],
    [ 'a tier without tpm', 'tpm=10000', 'burst=10',
      qr/tier "free" must have "tpm" parameter/ ],
    [ 'a tier with a bad number', 'tpm=10000', 'tpm=ten',
      qr/invalid parameter "tpm=ten" of tier "free"/ ],
    [ 'a default above the maximum', 'tpm=10000',
      'tpm=10000 max_tokens=100 default_max_tokens=200',
      qr/"default_max_tokens" is above "max_tokens"/ ],
    [ 'a bad tier name', 'free  tpm', 'fr\$ee  tpm',
      qr/invalid tier name/ ],
    [ 'a duplicate tier', "tpm=10000;\n",
      "tpm=10000;\n    llm_gateway_tier free tpm=5;\n",
      qr/duplicate tier "free"/ ],
    [ 'the gateway on with no tier', 'llm_gateway_tier  free  tpm=10000;', '',
      qr/"llm_gateway" is on but no "llm_gateway_tier" is defined for it/ ],
    [ 'the gateway on without keys', '%%GATEWAY%%',
      "llm_gateway_zone zone=llm:1m;\n",
      qr/"llm_gateway" is on but "llm_gateway_keys" is not set/ ],
    [ 'a tiny zone', '%%GATEWAY%%',
      "llm_gateway_zone zone=llm:8k;\n"
      . "llm_gateway_keys $s->{LLMGW_KEY_SNAPSHOT}"
      . " secret=$s->{LLMGW_KEY_SECRET};\n",
      qr/zone "zone=llm:8k" is too small/ ],
    [ 'a zone with a capacity and a ceiling', '%%GATEWAY%%',
      "llm_gateway_zone zone=llm:1m capacity=600000 inflight=64;\n"
      . "llm_gateway_keys $s->{LLMGW_KEY_SNAPSHOT}"
      . " secret=$s->{LLMGW_KEY_SECRET};\n", undef ],
    [ 'a ceiling of 0', '%%GATEWAY%%',
      "llm_gateway_zone zone=llm:1m inflight=0;\n"
      . "llm_gateway_keys $s->{LLMGW_KEY_SNAPSHOT}"
      . " secret=$s->{LLMGW_KEY_SECRET};\n",
      qr/invalid parameter "inflight=0"/ ],
    [ 'a duplicate capacity', '%%GATEWAY%%',
      "llm_gateway_zone zone=llm:1m capacity=600000 capacity=1;\n"
      . "llm_gateway_keys $s->{LLMGW_KEY_SNAPSHOT}"
      . " secret=$s->{LLMGW_KEY_SECRET};\n",
      qr/"llm_gateway_zone" directive has duplicate "capacity"/ ],
    [ 'a missing key snapshot', '%%GATEWAY%%',
      "llm_gateway_zone zone=llm:1m;\n"
      . "llm_gateway_keys /nonexistent/keys secret=$s->{LLMGW_KEY_SECRET};\n",
      qr{open\(\) "/nonexistent/keys" failed} ],
    [ 'a short secret', '%%GATEWAY%%',
      "llm_gateway_zone zone=llm:1m;\n"
      . "llm_gateway_keys $s->{LLMGW_KEY_SNAPSHOT} secret=%%DIR%%/short;\n",
      qr/must hold at least 32 bytes as hex/ ],
    [ 'a file that is not a snapshot', '%%GATEWAY%%',
      "llm_gateway_zone zone=llm:1m;\n"
      . "llm_gateway_keys %%DIR%%/accountd.conf"
      . " secret=$s->{LLMGW_KEY_SECRET};\n",
      qr/is not a key snapshot/ ],
    [ 'accountd over TCP', '%%GATEWAY%%',
      "llm_gateway_zone zone=llm:1m;\n"
      . "llm_gateway_keys $s->{LLMGW_KEY_SNAPSHOT}"
      . " secret=$s->{LLMGW_KEY_SECRET};\n"
      . "llm_gateway_accountd 127.0.0.1:9;\n",
      qr/accountd address "127.0.0.1:9" must be "unix:path"/ ],

    # the upstream side: backends and roles
    [ 'backends and a role', 'zone=llm;', 'zone=llm backend=a;',
      undef, "llm_gateway_backend a rpm=60 tpm=1000 queue=5 max_wait=2s;
"
      . "llm_gateway_backend b upstream=x failures=0 fail_timeout=1m;
"
      . "llm_gateway_role r a model=m1 priority=1 weight=3;
"
      . "llm_gateway_role r b;
" ],
    [ 'an unknown backend in llm_gateway', 'zone=llm;', 'zone=llm backend=z;',
      qr/unknown backend "z" in "llm_gateway"/ ],
    [ 'a role of an unknown backend', '', '',
      qr/unknown backend "z": "llm_gateway_backend" must define it first/,
      "llm_gateway_role r z;
" ],
    [ 'a duplicate backend', '', '', qr/duplicate backend "a"/,
      "llm_gateway_backend a;
llm_gateway_backend a rpm=1;
" ],
    [ 'a backend with a bad number', '', '', qr/invalid parameter "rpm=x"/,
      "llm_gateway_backend a rpm=x;
" ],
    [ 'a backend with an unknown parameter', '', '',
      qr/invalid parameter "rps=1"/, "llm_gateway_backend a rps=1;
" ],
    [ 'backends of each API', '', '', undef,
      "llm_gateway_backend a api=openai;\nllm_gateway_backend b api=anthropic;\n"
      . "llm_gateway_backend c api=responses limit_param=max_tokens;\n" ],
    [ 'a backend of an unknown API', '', '', qr/invalid parameter "api=gemini"/,
      "llm_gateway_backend a api=gemini;\n" ],
    [ 'a backend name the ledger cannot hold', '', '',
      qr/backend name "x{65}" is longer than 64 bytes/,
      "llm_gateway_backend " . ('x' x 65) . ";\n" ],
    [ 'a role with weight 0', '', '', qr/invalid parameter "weight=0"/,
      "llm_gateway_backend a;
llm_gateway_role r a weight=0;
" ],
    [ 'a bad diagnostics network', 'llm_gateway  zone=llm;',
      "llm_gateway  zone=llm;\n llm_gateway_diagnostics 10.0.0.300/8;",
      qr/invalid network "10.0.0.300\/8"/ ],
    [ 'diagnostics for networks', 'llm_gateway  zone=llm;',
      "llm_gateway  zone=llm;\n llm_gateway_diagnostics 10.0.0.0/8 ::1;",
      undef ],
    [ 'a role with a bad name', '', '', qr/invalid role name "r\$"/,
      "llm_gateway_backend a;
llm_gateway_role r\$ a;
" ],
);

open(my $fh, '>', "$s->{LLMGW_DIR}/short") or die;
print $fh "abcdef\n";
close($fh);

for my $c (@cases) {
    my ($what, $from, $to, $want, $http) = @$c;

    my $conf = $good;
    $conf =~ s/\Q$from\E/$to/ if length $from;
    $conf =~ s/^(    %%GATEWAY%%\n)/$1$http/m if $http;

    my ($rc, $out) = nginx(http => $conf)->test();

    if (!defined $want) {
        is($rc, 0, "$what: nginx -t passes") or diag($out);
        like($out, qr/test is successful/, "$what: and says so");
        next;
    }

    isnt($rc, 0, "$what: nginx -t fails");
    like($out, qr/\[emerg\].*$want/, "$what: with a clear message")
        or diag($out);
}

# Without accountd the gateway still works, and says what is missing.
{
    my $conf = $good;
    $conf =~ s/%%GATEWAY%%/llm_gateway_zone zone=llm:1m;\n    llm_gateway_keys $s->{LLMGW_KEY_SNAPSHOT} secret=$s->{LLMGW_KEY_SECRET};/;
    my ($rc, $out) = nginx(http => $conf)->test();
    is($rc, 0, 'no accountd: nginx -t passes');
    like($out, qr/\[warn\].*"llm_gateway_accountd" is not set: usage is metered but not recorded/,
         'no accountd: with a warning');
}

# The documents: the README, the reference in doc/, the benchmarks' and
# mockllm's.
my $top = "$FindBin::Bin/..";
my @docs = ('README.md', (map { s{^\Q$top\E/}{}r } glob("$top/doc/*.md")),
            'bench/README.md', 'mockllm/README.md');
my %text;
for my $d (@docs) {
    open(my $fh, '<', "$top/$d") or die "$d: $!";
    $text{$d} = do { local $/; <$fh> };
}
ok(-f "$top/doc/directives.md", 'doc/directives.md exists')
    or BAIL_OUT('no doc/directives.md');

# Every directive the module registers has its reference: a heading of
# its own (or shared) in doc/directives.md, with its Syntax, Default,
# Context and Phase; no other document has one.
{
    my %registered;
    for my $c (glob("$top/ngx_llm_gateway_module/*.c")) {
        open(my $fh, '<', $c) or die "$c: $!";
        my $src = do { local $/; <$fh> };
        $registered{$1} = 1
            while $src =~ /\{\s*ngx_string\("(llm_gateway\w*)"\)/g;
    }
    my %documented;
    my @elsewhere;
    for my $d (@docs) {
        while ($text{$d}
               =~ /^#{2,3} (llm_gateway[\w, ]*)\n\n((?:    .*\n)+)/mg)
        {
            my ($names, $block) = ($1, $2);
            next unless $block =~ /Syntax:/;
            if ($d ne 'doc/directives.md') {
                push(@elsewhere, "$d: $names");
                next;
            }
            next unless $block =~ /Default:/ && $block =~ /Context:/
                        && $block =~ /Phase:/;
            $documented{$_} = 1 for split(/,\s*/, $names);
        }
        push(@elsewhere, "$d: a Syntax line")
            if $d ne 'doc/directives.md'
               && $text{$d} =~ /^\s+Syntax:\s+llm_gateway/m;
    }
    cmp_ok(scalar(keys %registered), '>=', 20,
           scalar(keys %registered) . ' directives registered');
    is_deeply([ grep { !$documented{$_} } sort keys %registered ], [],
              'each has its reference in doc/directives.md (Syntax, '
              . 'Default, Context, Phase)');
    is_deeply([ grep { !$registered{$_} } sort keys %documented ], [],
              'and doc/directives.md documents none the module does not have');
    is_deeply(\@elsewhere, [], 'and no other document has a reference');
}

# Every make target the documents name exists: make's database of rules,
# printed without running any (-p, of the target ":"), has it.  Named is
# `make X` in the text, or a line "make X" of a code block.
{
    my %named;
    for my $d (@docs) {
        $named{$_}{$d} = 1 for $text{$d} =~ /`make ([a-z][a-z0-9-]*)/g;
        $named{$_}{$d} = 1
            for $text{$d} =~ /^(?:    |\t)\s*(?:\$ )?make ([a-z][a-z0-9-]*)/mg;
        my @fenced = $text{$d} =~ /^```\w*\n(.*?)^```/msg;
        for my $f (@fenced) {
            $named{$_}{$d} = 1 for $f =~ /^\s*(?:\$ )?make ([a-z][a-z0-9-]*)/mg;
        }
    }
    my %rules = map { $_ => 1 }
        `make -C '$top' -pRrq : 2>/dev/null` =~ /^([a-zA-Z0-9][\w-]*):/mg;
    my @missing = map { "$_ (" . join(', ', sort keys %{ $named{$_} }) . ')' }
                  grep { !$rules{$_} } sort keys %named;
    cmp_ok(scalar(keys %named), '>=', 10,
           scalar(keys %named) . ' make targets named in the documents');
    is_deeply(\@missing, [], 'each has a rule in the Makefile');
}

# The relative links between the documents resolve: to a file or a
# directory of the tree, and to a heading of the document where they name
# one (its anchor as GitHub makes it).
{
    my %anchors;
    my $anchors_of = sub {
        my ($file) = @_;
        return $anchors{$file} if $anchors{$file};
        my %a;
        if (open(my $fh, '<', $file)) {
            my $fence = 0;
            while (my $l = <$fh>) {
                $fence = !$fence, next if $l =~ /^```/;
                next if $fence || $l !~ /^#{1,6} (.*)/;
                (my $s = lc $1) =~ s/[^\w\- ]//g;
                $s =~ s/ /-/g;
                $a{$s} = 1;
            }
        }
        return $anchors{$file} = \%a;
    };
    my (@bad, $links);
    for my $d (@docs) {
        (my $dir = "$top/$d") =~ s{/[^/]*$}{};
        (my $prose = $text{$d}) =~ s/^```.*?^```//msg;
        while ($prose =~ /\]\(([^)\s]+)\)/g) {
            my $link = $1;
            next if $link =~ /^[a-z]+:/;
            $links++;
            my ($path, $anchor) = $link =~ /^([^#]*)(?:#(.*))?$/;
            my $file = length $path ? "$dir/$path" : "$top/$d";
            if (!-e $file) {
                push(@bad, "$d: $link (no such file)");
                next;
            }
            push(@bad, "$d: $link (no such heading)")
                if defined $anchor && $file =~ /\.md$/
                   && !$anchors_of->($file)->{$anchor};
        }
    }
    cmp_ok($links // 0, '>=', 20, ($links // 0) . ' relative links');
    is_deeply(\@bad, [], 'each resolves');
}

# The same module file loads into a running nginx that serves requests.
my $ng = nginx(http => $good)->run();
ok($ng->port, 'nginx with the module runs');
$ng->no_alerts();

done_testing();
