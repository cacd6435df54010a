#!/usr/bin/perl

# The README's quick start works as written: its shell blocks, taken from
# the README itself, run one after the other in one shell, as a new user
# types them after `make run`, against the stack of the suite and an nginx
# configured as make run's.  The tenant exists with its daily cap, its key
# is served, and the request has its row in the ledger.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use File::Temp qw(tempdir);
use IPC::Open2;
use LLMGW;
use Test::More;
use Time::HiRes qw(sleep time);

my $s = stack();
my $top = "$FindBin::Bin/..";

# --- the quick start's shell blocks ----------------------------------------

open(my $fh, '<', "$top/README.md") or die "README.md: $!";
my $readme = do { local $/; <$fh> };
close($fh);

my ($section) = $readme =~ /^## Quick start\n(.*?)^## /ms;
ok($section, 'the README has a quick start') or BAIL_OUT('no quick start');

my @blocks = $section =~ /^```sh\n(.*?)^```\n/msg;

my ($create) = grep {
    $blocks[$_] =~ /accountd tenant create .*--daily-cap-usd/
} 0 .. $#blocks;
my ($request) = grep { $blocks[$_] =~ /curl .*\n(?:.*\n)*.*Bearer \$KEY/ }
                0 .. $#blocks;
my ($row) = grep { $blocks[$_] =~ /psql .*\n(?:.*\n)*.*llm\.usage/ }
            0 .. $#blocks;
my ($lines) = grep { $blocks[$_] =~ /llm\.period_lines/ } 0 .. $#blocks;

ok(defined $create && $blocks[$create] =~ /accountd key create/,
   'it creates a tenant with a daily cap and a key');
ok(defined $request, 'it calls the gateway with the key');
ok(defined $row, 'it reads the row in the ledger');
ok(defined $create && defined $request && defined $row
   && $create < $request && $request < $row, 'in that order')
    or BAIL_OUT('the quick start is not what this test runs');

# The tenant of the quick start, made this test's own: the stack's
# database is shared by every test file.
my ($daily) = $blocks[$create] =~ /--daily-cap-usd\s+([0-9.]+)/;
my ($name) = $blocks[$create] =~ /tenant create --name\s+(\S+)/;
my $tenant = "$name-$$";
s/\b\Q$name\E\b/$tenant/g for @blocks;

# --- what make run leaves: .run/demo.env and build/ --------------------------

# the names scripts/stack writes into demo.env
open($fh, '<', "$top/scripts/stack") or die "scripts/stack: $!";
my $stack = do { local $/; <$fh> };
close($fh);
my ($heredoc) = $stack =~ /cat >"\$dir\/demo\.env" <<EOF\n(.*?)^EOF/ms;
my @names = ($heredoc // '') =~ /^(\w+)=/mg;

# make run prices the mock's models; a model of this test's own, priced
# the same, leaves the stack's models as the other tests know them
my $model = "mock-gpt-4o-mini-$$";
db()->do(q{INSERT INTO llm.prices (model, effective_from, input_per_mtok,
                                   output_per_mtok, cached_input_per_mtok)
           VALUES (?, '2000-01-01', 150000, 600000, 75000)}, undef, $model);

my $free = new_tenant(tier => 'free');
my $pro = new_tenant(tier => 'pro');

# make run's nginx, scripts/nginx.conf.in, as shipped
my $ng = LLMGW::Nginx->demo()->run();

my %env = (
    LLMGW_BASE_URL => $ng->url('/v1'),
    LLMGW_FREE_KEY => $free->{key},
    LLMGW_PRO_KEY => $pro->{key},
    LLMGW_ADMIN_DATABASE_URL => $s->{LLMGW_ADMIN_DATABASE_URL},
    LLMGW_ACCOUNTD_CONF => $s->{LLMGW_ACCOUNTD_CONF},
    LLMGW_MODEL => $model,
    LLMGW_ANTHROPIC_MODEL => 'mock-claude-3-5-haiku',
    LLMGW_TRANSLATED_CHAT_MODEL => 'mock-claude-3-5-haiku',
    LLMGW_TRANSLATED_MESSAGES_MODEL => 'mock-gpt-4o-mini');

is_deeply([ sort @names ], [ sort keys %env ],
          'demo.env has the variables make run writes');

my $home = tempdir("$s->{LLMGW_DIR}/quickstart-XXXXXX", CLEANUP => 1);
mkdir("$home/.run") or die "$home/.run: $!";
open($fh, '>', "$home/.run/demo.env") or die "demo.env: $!";
print $fh "$_=$env{$_}\n" for @names;
close($fh);
symlink($s->{LLMGW_BUILD}, "$home/build") or die "$home/build: $!";

# curl as at a terminal: it draws its progress meter on stderr only when
# its output is not one, and here the meter would cut into the stream
open($fh, '>', "$home/.curlrc") or die ".curlrc: $!";
print $fh "no-progress-meter\n";
close($fh);

# --- one shell, a block at a time --------------------------------------------

# nothing of the harness's environment reaches it (LLMGW_*, PGPASSFILE):
# what it has is what the quick start gives it
my $pid = open2(my $out, my $in, 'env', '-i', "PATH=$ENV{PATH}",
                "HOME=$home", 'LANG=C.UTF-8', 'bash', '--noprofile',
                '--norc');
print $in "cd '$home' || exit 1\nexec 2>&1\nset -o pipefail -E\n"
          . "trap 'echo \"__QS_FAILED__ \$BASH_COMMAND\"' ERR\n";

my $n = 0;

sub run_block {
    my ($block) = @_;
    my $end = '__QS_END_' . ++$n . '__';
    print $in "$block\necho $end\n";
    $in->flush();

    my $text = '';
    local $SIG{ALRM} = sub { die "the block did not end: $text\n" };
    alarm(60 * time_scale());
    while (my $l = <$out>) {
        last if $l eq "$end\n";
        $text .= $l;
    }
    alarm(0);
    return $text;
}

# a block that depends on what accountd does by itself (the key pushed to
# nginx, the record committed) runs again until it says what is expected
sub run_until {
    my ($block, $want) = @_;
    my $deadline = time() + 10 * time_scale();
    my $text;
    while (1) {
        $text = run_block($block);
        return $text if $want->($text) || time() > $deadline;
        sleep(0.6);
    }
}

for my $i (0 .. $#blocks) {
    my $b = $blocks[$i];

    if ($i == $request) {
        my $text = run_until($b, sub { $_[0] =~ /\n200\n\z/ });
        like($text, qr/\n200\n\z/, 'the new key is served: 200')
            or diag($text);
        like($text, qr/"choices"/, 'with the completion');
        unlike($text, qr/__QS_FAILED__/, 'and no command failed');
        next;
    }

    if ($i == $row) {
        my $text = run_until($b, sub { $_[0] =~ /\Q$tenant\E/ });
        my $ids = db()->selectcol_arrayref(
            'SELECT request_id FROM llm.usage JOIN llm.tenants USING'
            . ' (tenant_id) WHERE name = ?', undef, $tenant);
        is(scalar(@$ids), 1, 'the tenant has one row in the ledger');
        like($text, qr/\Q$ids->[0]\E\s*\|\s*\Q$tenant\E\s*\|\s*\Q$model\E/,
             'which the quick start shows') or diag($text);
        like($text, qr/\(1 row\)/, 'and only it');
        unlike($text, qr/__QS_FAILED__/, 'and no command failed');
        next;
    }

    if (defined $lines && $i == $lines) {
        my $text = run_block($b);
        like($text, qr/^\s*usage\s*\|\s*\Q$model\E\s*\|\s*input\s*\|/m,
             'the month so far: the input line of its model') or diag($text);
        like($text, qr/^\s*usage\s*\|\s*\Q$model\E\s*\|\s*output\s*\|/m,
             'and its output line');
        unlike($text, qr/__QS_FAILED__/, 'and no command failed');
        next;
    }

    my $text = run_block($b);
    unlike($text, qr/__QS_FAILED__/, "block " . ($i + 1) . ": no command"
           . " failed") or diag($text);

    if ($b =~ /\$LLMGW_FREE_KEY/) {
        like($text, qr/^data: \[DONE\]/m, 'the demo key streams');
    }

    # the translated pair: each client's own stream, from the other API
    if ($b =~ /\$LLMGW_TRANSLATED_CHAT_MODEL/) {
        like($text, qr/^data: \{.*"chat\.completion\.chunk".*"content":"tok1 /m,
             'an OpenAI client streams the Anthropic model');
        like($text, qr/^event: message_stop$/m,
             'an Anthropic client streams the OpenAI model')
            or diag($text);
    }

    if ($i == $create) {
        like($text, qr/^\d+\s+\Q$tenant\E\s+pro\s+\Q$daily\E\.?0*\s/m,
             'tenant list shows the tenant with its daily cap')
            or diag($text);
    }
}

close($in);
waitpid($pid, 0);

# --- what the quick start did, from the database ----------------------------

my $t = db()->selectrow_hashref(
    'SELECT tenant_id, tier, daily_cap_pusd, monthly_cap_pusd'
    . ' FROM llm.tenants WHERE name = ?', undef, $tenant);
ok($t, 'the tenant exists');
is($t->{tier}, 'pro', 'on tier pro');
cmp_ok($t->{daily_cap_pusd}, '==', $daily * 1e12,
       "with a daily cap of \$$daily");
is($t->{monthly_cap_pusd}, undef, 'and no monthly cap');

my $keys = db()->selectall_arrayref(
    'SELECT key_id FROM llm.api_keys WHERE tenant_id = ?'
    . ' AND revoked_at IS NULL', undef, $t->{tenant_id});
is(scalar(@$keys), 1, 'it has one key');

my $u = db()->selectrow_hashref(
    'SELECT * FROM llm.usage WHERE tenant_id = ?', undef, $t->{tenant_id});
is($u->{key_id}, $keys->[0][0], 'its row is the key\'s');
is($u->{model}, $model, 'of the model of demo.env');
is($u->{status}, 200, 'served');
cmp_ok($u->{output_tokens}, '>', 0, 'with its output');
ok(defined $u->{cost_pusd} && $u->{cost_pusd} > 0, 'and its cost');

$ng->no_alerts();

done_testing();
