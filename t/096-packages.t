#!/usr/bin/perl

# The Debian packages of `make deb`, installed, used and purged.  The
# module where Debian puts its own nginx modules (the .so, its load_module
# snippet, the modules-enabled link, the nginx ABI it was built for);
# accountd's program, conffile, unit, user, key secret and migrations.
# Then one request end to end through what they installed: an nginx that
# loads the module by the packaged snippet, the packaged accountd on a
# database made from the packaged migrations, a key made by its CLI, and
# the request's row in llm.usage.  A reinstall keeps what the admin
# changed, a removed module comes back enabled, and the purge leaves the
# machine as it was (the user accountd, which the package keeps, is
# removed here when this test made it).

use strict;
use warnings;

use Cwd qw(realpath);
use FindBin;
use lib "$FindBin::Bin/lib";

use DBI;
use LLMGW;
use Test::More;
use Time::HiRes qw(sleep time);

plan(skip_all => 'installs packages: root only') if $> != 0;
plan(skip_all => 'not Debian')
    unless -f '/etc/debian_version' && -x '/usr/bin/dpkg';

my $s = stack();
my $top = realpath("$FindBin::Bin/..");

# the packages are built from the sources, without sanitizers: the
# passes of make test-sanitize have nothing to add
plan(skip_all => "the packages are tested on $top/build only")
    if (realpath($s->{LLMGW_BUILD}) // "") ne realpath("$top/build");

my $mod = 'libnginx-mod-http-llm-gateway';
my $acd = 'llmgw-accountd';
my $so = '/usr/lib/nginx/modules/ngx_http_llm_gateway_module.so';
my $avail = '/usr/share/nginx/modules-available/mod-http-llm-gateway.conf';
my $link = '/etc/nginx/modules-enabled/50-mod-http-llm-gateway.conf';
my $unit = '/lib/systemd/system/accountd.service';
my $conf = '/etc/llmgw/accountd.conf';
my $secret = '/etc/llmgw/key_secret';
my $sql = '/usr/share/llmgw-accountd/sql';

# installed, or its configuration files left
sub known {
    my ($p) = @_;
    my $st = `dpkg-query -W -f='\${db:Status-Status}' $p 2>/dev/null`;
    return $st ne '' && $st ne 'not-installed';
}

for my $p ($mod, $acd) {
    plan(skip_all => "$p is on this machine already: not ours to purge")
        if known($p);
}

sub slurp {
    my ($f) = @_;
    open(my $fh, '<', $f) or return undef;
    local $/;
    return <$fh>;
}

# apt-get, waiting for the lock of another job's apt or dpkg; a test
# unless $what is undef; true on success, else its output is shown
sub apt {
    my ($what, @args) = @_;
    my $out = `DEBIAN_FRONTEND=noninteractive apt-get -y -q \\
               -o DPkg::Lock::Timeout=300 --no-install-recommends @args 2>&1`;
    my $ok = $? == 0;
    if (defined $what) {
        ok($ok, $what) or diag($out);
    } elsif (!$ok) {
        diag($out);
    }
    return $ok;
}

# --- the packages -------------------------------------------------------------

# make deb builds them when they are older than their sources (when
# build/deb is empty, say), and does nothing otherwise

my $t0 = time();
my $out = `make -C $top --no-print-directory deb 2>&1`;
ok($? == 0, 'make deb') or BAIL_OUT("make deb failed: $out");
note(sprintf('make deb: %.0f s', time() - $t0));

my %deb;
for my $p ($mod, $acd) {
    my @f = glob("$top/build/deb/${p}_*.deb");
    is(scalar(@f), 1, "build/deb has one $p") or BAIL_OUT('no package');
    $deb{$p} = $f[0];
}

my $version = `dpkg-deb -f $deb{$acd} Version`;
chomp($version);

# what the purge must bring back
my $had_user = defined getpwnam('accountd');
my $had_group = defined getgrnam('accountd');
my $had_modules = -d '/usr/lib/nginx/modules';

my ($pkg_db, $dbh, $acd_pid, $ng);
my ($ours, $done) = (1, 0);

# --- install ------------------------------------------------------------------

apt('apt-get installs both', 'install', $deb{$mod}, $deb{$acd})
    or BAIL_OUT('not installed');

# the module, as Debian's libnginx-mod-http-geoip is
ok(-f $so, "$so");
is(slurp($avail), "load_module modules/ngx_http_llm_gateway_module.so;\n",
   "$avail loads it");
is(readlink($link), $avail, "$link enables it");
like(slurp("/var/lib/dpkg/info/$mod.postinst") // '',
     qr/Automatically added by dh_nginx/, 'its maintainer scripts: dh_nginx');

my ($abi) = `dpkg-query -W -f='\${Provides}' nginx` =~ /(nginx-abi-[^\s,]+)/;
ok($abi, "nginx provides $abi");
my $depends = `dpkg-query -W -f='\${Depends}' $mod`;
like($depends, qr/(^|, )\Q$abi\E(,|$)/, "$mod depends on $abi");

# accountd
ok(-x '/usr/sbin/accountd', '/usr/sbin/accountd');
is(`/usr/sbin/accountd -V`, "accountd $version\n", "accountd $version");
like(`dpkg-query -W -f='\${Conffiles}' $acd`, qr{^ \Q$conf\E }m,
     "$conf is a conffile");
like(slurp($conf) // '', qr{^database_url = .*/llmgw\?host=/run/postgresql$}m,
     'it names the local PostgreSQL');
ok(-f '/usr/share/man/man8/accountd.8.gz', 'man page');
# dh_compress gzips it once it is over 4 kB
ok(-f "/usr/share/doc/$acd/README.Debian"
   || -f "/usr/share/doc/$acd/README.Debian.gz", 'README.Debian');

# the commands find the conffile by default, and it parses
my $list = `env -u LLMGW_ACCOUNTD_CONF \\
    LLMGW_DATABASE_URL='$s->{LLMGW_DATABASE_URL}' \\
    LLMGW_ADMIN_DATABASE_URL='$s->{LLMGW_ADMIN_DATABASE_URL}' \\
    /usr/sbin/accountd tenant list 2>&1`;
ok($? == 0, "accountd tenant list reads $conf") or diag($list);

ok(-f $unit, $unit);
ok(!-e '/etc/systemd/system/multi-user.target.wants/accountd.service',
   'the unit is not enabled');
SKIP: {
    skip('no systemd-analyze', 1) unless -x '/usr/bin/systemd-analyze';
    my $v = `systemd-analyze verify --man=no $unit 2>&1`;
    ok($? == 0, 'systemd-analyze verify') or diag($v);
}

my @pw = getpwnam('accountd');
ok(@pw, 'the user accountd');
ok(@pw && $pw[2] < 1000, 'a system user');
is($pw[7], '/var/lib/llmgw', 'its home');
like($pw[8] // '', qr/nologin$/, 'no login');
my @st = stat('/var/lib/llmgw');
ok(@st && $st[4] == $pw[2], '/var/lib/llmgw is accountd\'s');

@st = stat($secret);
like(slurp($secret) // '', qr/^[0-9a-f]{64}\n\z/, "$secret: 32 bytes, hex");
is(sprintf('%04o', $st[2] & 07777), '0640', 'mode 0640');
is(scalar(getgrgid($st[5])), 'accountd', 'group accountd');

my @migrations = map { s{.*/}{}r } glob("$top/sql/*.sql");
is_deeply([ map { s{.*/}{}r } glob("$sql/*.sql") ], \@migrations,
          "the migrations in $sql");
is(scalar(grep { slurp("$sql/$_") ne slurp("$top/sql/$_") } @migrations), 0,
   'as they are in sql/');

# --- the packaged stack -------------------------------------------------------

# a database made from the packaged migrations, in order, each in one
# transaction, by a superuser, as README.Debian does; then accountd on it
# as its writer role and the commands as the operators' (the stack's
# login roles: roles are the cluster's)
$pkg_db = "llmgw_pkg_$$";
db()->do("CREATE DATABASE $pkg_db");
my $url = "postgresql://llmgw\@127.0.0.1:$s->{LLMGW_PG_PORT}/$pkg_db";
my $as = sprintf 'postgresql://%%s@127.0.0.1:%d/%s?passfile=%s',
                 $s->{LLMGW_PG_PORT}, $pkg_db, $s->{LLMGW_PGPASSFILE};

my $failed = '';
for my $f (glob("$sql/*.sql")) {
    my $o = `PGOPTIONS='-c client_min_messages=warning' psql -X -q \\
             -v ON_ERROR_STOP=1 -1 -f $f '$url' 2>&1`;
    if ($?) { $failed = "$f: $o"; last; }
}
is($failed, '', 'the packaged migrations apply');

$dbh = DBI->connect("dbi:Pg:dbname=$pkg_db;host=127.0.0.1;"
                    . "port=$s->{LLMGW_PG_PORT}", 'llmgw', '',
                    { RaiseError => 1, AutoCommit => 1, PrintError => 0 });

# the packaged accountd, on that database and the packaged key secret
my $dir = "$s->{LLMGW_DIR}/pkg-accountd-$$";
my $aconf = accountd_conf($dir,
                          'database_url = ' . sprintf($as, 'accountd'),
                          'admin_database_url = ' . sprintf($as, 'llmgw_ops'),
                          "key_secret_file = $secret");

sub cli {
    my $o = `/usr/sbin/accountd -c $aconf @_ 2>&1`;
    die "accountd @_: $o" if $?;
    return $o;
}

ok(system("/usr/sbin/accountd -c $aconf -d") == 0,
   'the packaged accountd starts');
for (1 .. 100 * time_scale()) {
    last if -S "$dir/accountd.sock" && -f "$dir/keys.snapshot";
    sleep(0.1);
}
$acd_pid = slurp("$dir/accountd.pid");
chomp($acd_pid) if $acd_pid;
ok(-S "$dir/accountd.sock", 'it listens');

my $tenant = "pkg-$$";
cli('tenant', 'create', '--name', $tenant, '--tier', 'free');

# the tiers refuse a model without a price: the operators enter it, as
# README.Debian says
my $price_sql = q{INSERT INTO llm.prices (model, effective_from,
                   input_per_mtok, output_per_mtok, cached_input_per_mtok)
                 VALUES ('mock-gpt-4o-mini', now(), 150000, 600000, 75000)};
my $ops_url = sprintf($as, 'llmgw_ops');
my $priced = `psql -X -q -v ON_ERROR_STOP=1 '$ops_url' -c "$price_sql" 2>&1`;
is($?, 0, 'a price, entered as llmgw_ops') or diag($priced);
my $key = (split(/\n/, cli('key', 'create', '--tenant', $tenant)))[-1];
like($key, qr/^llmgw_live_[0-9A-Za-z]{38}$/, 'a key from the packaged CLI');
my ($tenant_id) = $dbh->selectrow_array(
    'SELECT tenant_id FROM llm.tenants WHERE name = ?', undef, $tenant);

# nginx with the module the packaged snippet loads; nginx reads the key
# secret the package made, as it would read it from /etc
$ng = nginx(modules_enabled => 1, http => <<"EOF")->run();
    llm_gateway_zone      zone=llm:1m;
    llm_gateway_keys      $dir/keys.snapshot secret=$secret;
    llm_gateway_accountd  unix:$dir/accountd.sock;
    llm_gateway_tier      free  tpm=10000;

    %%UPSTREAM%%

    server {
        listen  127.0.0.1:%%PORT%%;

        proxy_http_version  1.1;
        proxy_set_header    Connection "";

        %%APIS%%
    }
EOF

my $maps = slurp('/proc/' . slurp($ng->dir() . '/nginx.pid') =~ s/\s//gr
                 . '/maps') // '';
ok(index($maps, $so) >= 0, "nginx runs $so");
ok(index($maps, "$s->{LLMGW_BUILD}/ngx_http_llm_gateway_module.so") < 0,
   'not the build\'s');

my $r = http_post($ng->url('/v1/chat/completions'),
                  { model => 'mock-gpt-4o-mini', max_tokens => 20,
                    messages => [ { role => 'user',
                                    content => 'Say hello.' } ] },
                  authorization => "Bearer $key", 'x-mock-tokens' => 5);
is($r->{status}, 200, 'a chat completion through the gateway');
my $rid = $r->{headers}{'x-request-id'} // '';

my $row;
my $deadline = time() + 5 * time_scale();
while (!$row && time() < $deadline) {
    $row = $dbh->selectrow_hashref(
        'SELECT * FROM llm.usage WHERE request_id = ?', undef, $rid);
    sleep(0.05) unless $row;
}
ok($row, 'its row in llm.usage');
is($row->{tenant_id}, $tenant_id, 'of the tenant');
is($row->{input_tokens}, 9, 'its input');
is($row->{output_tokens}, 5, 'its output');
is($row->{flags}, 0, 'as the upstream reported');

$ng->no_alerts();

stop_accountd();

# --- reinstall, remove, install -----------------------------------------------

my $secret_before = slurp($secret);
open(my $fh, '>>', $conf) or die "$conf: $!";
print $fh "# the admin's\n";
close($fh);

apt('reinstalled', 'install', '--reinstall', $deb{$mod}, $deb{$acd});
like(slurp($conf), qr/^# the admin's$/m,
     'the conffile keeps the admin\'s line');
is(slurp($secret), $secret_before, 'the key secret stays');
is(readlink($link), $avail, 'the module stays enabled');

apt('the module removed', 'remove', $mod);
ok(!-e $so && !-l $link, 'neither the module nor its link');
ok(-l "$link.removed", 'the link kept aside, as dh_nginx does');
apt('installed again', 'install', $deb{$mod});
is(readlink($link), $avail, 'enabled again');

# --- purge --------------------------------------------------------------------

purge(1);

ok(!known($mod) && !known($acd), 'both purged');
ok(!-e $_ && !-l $_, "no $_")
    for ($so, $avail, $link, "$link.removed", '/usr/sbin/accountd', $unit,
         '/etc/llmgw', '/var/lib/llmgw', $sql);
is(-d '/usr/lib/nginx/modules' ? 1 : 0, $had_modules ? 1 : 0,
   '/usr/lib/nginx/modules as it was');
is(defined getpwnam('accountd') ? 1 : 0, $had_user ? 1 : 0,
   'the user accountd as it was');
is(defined getgrnam('accountd') ? 1 : 0, $had_group ? 1 : 0,
   'the group accountd as it was');

$done = 1;

done_testing();


sub stop_accountd {
    return unless $acd_pid;
    kill('TERM', $acd_pid);
    for (1 .. 100 * time_scale()) {
        last unless kill(0, $acd_pid);
        sleep(0.05);
    }
    $acd_pid = undef;
}

# the packages, the user this test made, the database; a test when
# $report
sub purge {
    my ($report) = @_;
    my @p = grep { known($_) } ($mod, $acd);

    apt($report ? 'apt-get purges them' : undef, 'purge', @p) if @p;

    # deluser says it has no crontab to remove without cron
    if (!$had_user && defined getpwnam('accountd')) {
        my $o = `deluser --system --quiet accountd 2>&1`;
        diag($o) if $?;
    }
    if (!$had_group && defined getgrnam('accountd')) {
        my $o = `delgroup --system --quiet accountd 2>&1`;
        diag($o) if $?;
    }

    if ($pkg_db) {
        $dbh->disconnect() if $dbh;
        db()->do("DROP DATABASE IF EXISTS $pkg_db WITH (FORCE)");
        $pkg_db = undef;
    }
}

# a test that died on the way leaves nothing either; one that skipped
# never touched anything
END {
    if ($ours && !$done) {
        $ng->stop() if $ng;
        stop_accountd();
        purge();
    }
}
