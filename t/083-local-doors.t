#!/usr/bin/perl

# The local doors of the stack make test starts, tried by a hostile local
# user, nobody (runuser), who must get nowhere:
#
#   accountd's socket  mode 0660, group www-data (nginx's workers): nobody's
#                      connect() fails with EACCES.  With the socket made
#                      0666 for a moment, accountd still refuses nobody by
#                      its uid (SO_PEERCRED): the connection is closed before
#                      a byte of the key set goes out, the record nobody
#                      sent never lands, one warning is logged however much
#                      nobody sent, and accountd_peers_refused_total counts it
#   the files          the key snapshot, the key secret and the stack's
#                      PostgreSQL password file: nobody reads none
#   PostgreSQL         every role asks for its password (scram-sha-256):
#                      nobody's psql fails on authentication as llmgw, as
#                      itself, over TCP and the Unix socket, with the
#                      stack's PGPASSFILE named or not; a wrong password
#                      fails, a reporting role's right one passes
#   allow_users        read again on SIGHUP: an accountd of its own refuses
#                      www-data by its uid, then serves it once it is listed
#
# and the side that must be served is: www-data (nginx's workers) gets
# the key set and its record's ACK, and a request through an nginx of the
# harness (workers as www-data) lands in the ledger; root's psql and
# accountd's CLI work with the password file.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use File::Temp qw(tempdir);
use HTTP::Tiny;
use LLMGW;
use LLMGW::Accountd qw(accountd_log log_since);
use Test::More;
use Time::HiRes qw(sleep time);

plan(skip_all => 'not root: the test runs commands as other users') if $>;

my $s = stack();
my $sock = $s->{LLMGW_ACCOUNTD_SOCKET};
my $log = accountd_log($s->{LLMGW_ACCOUNTD_CONF});
my $pg_port = $s->{LLMGW_PG_PORT};
my $pg_sock = "$s->{LLMGW_DIR}/pg";
my $tag = sprintf('t083-%d-%d', $$, time() % 1000000);
my $t = new_tenant();

my @nobody = getpwnam('nobody') or BAIL_OUT('no user nobody');
my @www = getpwnam('www-data') or BAIL_OUT('no user www-data');

# the client the other users run: connects to the socket, sends a frame
# (hex) n times, and reads until the ACK of its record and a key set with
# keys, the end of the connection or 10 s; says what it got
my $dir = tempdir("$s->{LLMGW_DIR}/t083.XXXXXX", CLEANUP => 1);
chmod(0755, $dir);
open(my $fh, '>', "$dir/client.pl") or die "$dir: $!";
print $fh <<'EOF';
use strict;
use warnings;
use IO::Select;
use IO::Socket::UNIX;
use Socket qw(SOCK_STREAM);
use Time::HiRes qw(time);

my ($path, $hex, $times, $wait) = @ARGV;
$SIG{PIPE} = 'IGNORE';

my $s = IO::Socket::UNIX->new(Type => SOCK_STREAM, Peer => $path);
unless ($s) {
    print 'connect=', ($!{EACCES} ? 'EACCES' : "error $!"), "\n";
    exit 0;
}

my $sent = syswrite($s, pack('H*', $hex) x $times) // 0;
my ($in, $keys, $ack, $eof, $types) = ('', 0, '', 0, '');
my $sel = IO::Select->new($s);
my $deadline = time() + $wait;

for ( ;; ) {
    my $left = $deadline - time();
    last if $left <= 0 || !$sel->can_read($left);
    my $n = sysread($s, $in, 65536, length $in);
    if (!$n) {
        $eof = 1;
        last;
    }
    # keys: those of the last whole set (a newer one follows the first)
    my $cur = 0;
    ($keys, $types) = (0, '');
    for (my $p = 0; $p + 4 <= length $in; ) {
        my $len = unpack('N', substr($in, $p, 4));
        last if $p + 4 + $len > length $in;
        my $type = unpack('C', substr($in, $p + 5, 1));
        $types .= ($types eq '' ? '' : ',') . $type;
        $cur = 0 if $type == 3;
        $cur++ if $type == 4;
        $keys = $cur if $type == 5;
        $ack = unpack('C/a', substr($in, $p + 4 + 81))
            if $type < 3 || $type > 5;
        $p += 4 + $len;
    }
    last if $ack ne '' && $keys;
}

print "connect=ok sent=$sent bytes=", length($in), " keys=$keys",
      " ack=", ($ack eq '' ? '-' : $ack), " eof=$eof types=",
      ($types eq '' ? '-' : $types), "\n";
EOF
close($fh);
chmod(0644, "$dir/client.pl");

sub as {
    my ($user, @cmd) = @_;
    # from /: the checkout may be a directory only root can enter
    my $cmd = join(' ', 'cd / && runuser -u', $user, '--', @cmd);
    my $out = `$cmd 2>&1`;
    return ($out, $? >> 8);
}

sub client {
    my ($user, $hex, $times, $path) = @_;
    my ($out) = as($user, 'perl', "$dir/client.pl", $path // $sock, $hex,
                   $times // 1, 10 * time_scale());
    chomp($out);
    return $out;
}

sub frame {
    my (%r) = @_;

    my $p = pack('C C n N q> q> Q> Q> Q> Q> Q> Q> q> C',
                 2, 1, 200, 0, $t->{id}, $t->{key_id}, 10, 20, 0, 0, 0, 0,
                 int(time() * 1000), 1)
          . pack('C/a* C/a* C/a*', $r{request_id}, 'mock-gpt-4o-mini',
                 'stop');

    return pack('N', length $p) . $p;
}

sub refused_total {
    my $r = HTTP::Tiny->new(timeout => 10)->get(
        "http://127.0.0.1:$s->{LLMGW_ACCOUNTD_METRICS_PORT}/metrics");
    my ($v) = ($r->{content} // '')
        =~ /^llmgw_accountd_peers_refused_total (\d+)$/m;
    return $v;
}

sub rows {
    return db()->selectrow_array(
        'SELECT count(*) FROM llm.usage WHERE request_id = ?', undef, $_[0]);
}

# --- accountd's socket --------------------------------------------------------

my @st = stat($sock);
is(sprintf('%04o', $st[2] & 07777), '0660', 'the socket is mode 0660');
is(scalar(getgrgid($st[5])), 'www-data',
   'of group www-data, nginx\'s workers\'');

my $log_start = -s $log // 0;
my $refused0 = refused_total();
ok(defined $refused0, "accountd_peers_refused_total is exported: "
   . ($refused0 // 'no'));

is(client('nobody', unpack('H*', frame(request_id => "$tag-n1"))),
   'connect=EACCES', 'nobody cannot connect to it: EACCES');

# the mode aside for a moment, the peer check alone: nobody sends a record
# and a burst after it (64 KB), gets nothing, and its record never lands
my $out;
{
    chmod(0666, $sock) or die "chmod $sock: $!";
    $out = eval { client('nobody', unpack('H*', frame(request_id => "$tag-n2")),
                         600) } // "died: $@";
    chmod($st[2] & 07777, $sock);
}
like($out, qr/^connect=ok /,
     "the socket 0666: nobody's connect() passes ($out)");
like($out, qr/ bytes=0 keys=0 ack=- eof=1 types=-$/,
     'but accountd closes the connection at once: not a byte of the key set,'
     . ' no ACK');

# www-data, served on the socket as it is, on a connection after nobody's:
# once its record is written, nobody's would have been.  The key set it
# gets holds the tenant's key once the snapshot does (the same rewrite).
is(snapshot_caps($s->{LLMGW_KEY_SNAPSHOT}, $t->{key_id}, '-'), '-',
   'the tenant\'s key is in the key set');
$out = client('www-data', unpack('H*', frame(request_id => "$tag-w1")));
like($out, qr/^connect=ok .* keys=[1-9]\d* ack=\Q$tag-w1\E /,
     "www-data is served: the key set and its ACK ($out)");
is(rows("$tag-w1"), 1, 'its record is in the ledger');
is(rows("$tag-n2"), 0, 'nobody\'s is not, nor any of its burst');
is(rows("$tag-n1"), 0, 'nor the one sent to the closed door');

my $refused1 = refused_total() // 0;
is($refused1 - ($refused0 // 0), 1,
   "accountd_peers_refused_total counts the one refusal ($refused1)");

my @warn = grep { /refused: uid \Q$nobody[2]\E \(pid \d+\)/ }
           split(/\n/, log_since($log, $log_start));
is(scalar(@warn), 1, 'one warning for it, whatever nobody sent')
    or diag(join("\n", @warn[0 .. 4]));
like($warn[0] // '', qr/WARNING/, 'at warning: ' . ($warn[0] // 'none'));

# --- the files ----------------------------------------------------------------

for my $f ($s->{LLMGW_KEY_SNAPSHOT}, $s->{LLMGW_KEY_SECRET},
           $s->{LLMGW_PGPASSFILE} // "$s->{LLMGW_DIR}/pgpass")
{
    my ($o, $rc) = as('nobody', 'cat', $f);
    ok($rc != 0 && $o =~ /Permission denied/, "nobody cannot read $f");
}

my $pgpass = $s->{LLMGW_PGPASSFILE} // '';
@st = stat($pgpass);
ok(@st && ($st[2] & 07777) == 0600 && $st[4] == 0,
   "the PostgreSQL password file $pgpass: root's, mode 0600");

# --- PostgreSQL ---------------------------------------------------------------

my $auth = qr/password authentication failed|no password supplied/;
my $psql = 'psql -X -w -At -c "SELECT 1"';

# the Unix socket is in the cluster's directory, postgres's alone: nobody
# does not even reach it; over TCP, the server refuses
for my $host ('127.0.0.1', $pg_sock) {
    my $want = $host =~ m{^/} ? qr/$auth|Permission denied/ : $auth;
    for my $user ('-U llmgw', '') {
        for my $pass ("PGPASSFILE=$pgpass", '-u PGPASSFILE') {
            my ($o, $rc) = as('nobody', "env $pass $psql -h $host -p $pg_port"
                              . " $user -d llmgw");
            ok($rc != 0 && $o =~ $want, "nobody: psql -h $host $user env "
               . "$pass: refused") or diag($o);
        }
    }
}

# not even root without the password, on either way in
for my $host ('127.0.0.1', $pg_sock) {
    my $cmd = "env -u PGPASSFILE $psql -h $host -p $pg_port -U llmgw -d llmgw";
    my $o = `$cmd 2>&1`;
    ok($? != 0 && $o =~ $auth, "root without the password: psql -h $host"
       . ' refused on authentication') or diag($o);
}

my ($o, $rc) = as('nobody', "env PGPASSWORD=wrong-$$ $psql -h 127.0.0.1"
                  . " -p $pg_port -U llmgw -d llmgw");
ok($rc != 0 && $o =~ /password authentication failed for user "llmgw"/,
   'a wrong password for llmgw fails') or diag($o);

# a reporting role's password now guards it
my $role = "t083_reader_$$";
my $pw = "pw-$$-" . int(rand(1e9));
db()->do("CREATE ROLE $role LOGIN PASSWORD '$pw' IN ROLE llmgw_reporting");
($o, $rc) = as('nobody', "env PGPASSWORD=wrong-$$ $psql -h 127.0.0.1"
               . " -p $pg_port -U $role -d llmgw");
ok($rc != 0 && $o =~ /password authentication failed/,
   'a reporting role with a wrong password fails') or diag($o);
($o, $rc) = as('nobody', "env PGPASSWORD=$pw $psql -h 127.0.0.1"
               . " -p $pg_port -U $role -d llmgw");
is("$rc $o", "0 1\n", 'with its own, it logs in');
db()->do("DROP ROLE $role");

# root, with the password file
is(`psql -X -w -At -c 'SELECT 1' '$s->{LLMGW_DATABASE_URL}' 2>&1`, "1\n",
   'root: psql with the stack\'s URL (its password file) logs in');
like(accountd('tenant', 'list'), qr/\Q$t->{name}\E/,
     'root: accountd\'s CLI reaches the database');

# --- the positive side: nginx's workers ---------------------------------------

my $ngx = nginx(http => <<'EOF')->run();
%%GATEWAY%%
    llm_gateway_tier  free  unpriced=allow tpm=100000 burst=100000 max_tokens=4096;

%%UPSTREAM%%
    server {
        listen  127.0.0.1:%%PORT%%;

        proxy_http_version  1.1;
        proxy_set_header    Connection "";

%%APIS%%
    }
EOF

my $master = master_pid($ngx);
# the master listens before it forks: its workers may not be there yet
my @workers;
for (1 .. 100 * time_scale()) {
    @workers = grep { ((slurp_status("/proc/$_/status") =~ /^PPid:\s+(\d+)$/m)[0]
                       // -1) == $master }
               map { m{^/proc/(\d+)$} ? $1 : () } glob('/proc/[0-9]*');
    last if @workers;
    sleep(0.05);
}
ok(@workers, 'the nginx of the harness has workers: ' . scalar(@workers));
# a worker just forked may not have changed its user yet
for (1 .. 100 * time_scale()) {
    last unless grep { slurp_status("/proc/$_/status") =~ /^Uid:\s+0\s/m }
                     @workers;
    sleep(0.05);
}
my %uids;
for (@workers) {
    my ($uid) = slurp_status("/proc/$_/status") =~ /^Uid:\s+(\d+)/m;
    $uids{$uid // -1} = 1;
}
is_deeply([sort { $a <=> $b } keys %uids], [$www[2]],
          'all of them www-data\'s')
    or diag(`ps -o pid,ppid,user,args --ppid $master`);

my $r = http_post($ngx->url('/v1/chat/completions'),
                  { model => 'mock-gpt-4o-mini', max_tokens => 20,
                    messages => [ { role => 'user', content => 'Hello' } ] },
                  authorization => "Bearer $t->{key}");
is($r->{status}, 200, 'a request through it') or diag($r->{content});
my $row = usage_row($r->{headers}{'x-request-id'} // '');
is($row && $row->{tenant_id}, $t->{id},
   'its record reached accountd from a worker: the row is in the ledger');

# --- the settings -------------------------------------------------------------

my $bad = accountd_conf("$dir/bad", 'allow_users = www-data no-such-user-083');
my $b = `$s->{LLMGW_BUILD}/accountd -c $bad tenant list 2>&1`;
ok($? != 0 && $b =~ /unknown user "no-such-user-083" in "allow_users"/,
   'an unknown user in allow_users is an error') or diag($b);

$bad = accountd_conf("$dir/bad", 'listen_group = no-such-group-083');
system("$s->{LLMGW_BUILD}/accountd -c $bad >/dev/null 2>&1");
isnt($? >> 8, 0, 'an unknown listen_group keeps the daemon from starting');
like(log_since("$dir/bad/accountd.log", 0),
     qr/unknown group "no-such-group-083" in "listen_group"/, 'and says why');
ok(!-e "$dir/bad/accountd.sock", 'no socket left behind');

# an accountd of its own that serves no one but its own user (allow_users
# empty): www-data, whom the socket's mode and group let connect, is
# refused by its uid; after a SIGHUP with www-data in the list, served
my $own = "$dir/own";
my $oconf = accountd_conf($own, 'allow_users =');
system("$s->{LLMGW_BUILD}/accountd -c $oconf -d") == 0
    or BAIL_OUT('accountd did not start');
for (1 .. 100 * time_scale()) {
    last if -S "$own/accountd.sock" && -f "$own/keys.snapshot";
    sleep(0.05);
}

$out = client('www-data', unpack('H*', frame(request_id => "$tag-o1")), 1,
              "$own/accountd.sock");
like($out, qr/^connect=ok .* bytes=0 keys=0 ack=- eof=1 /,
     "allow_users empty: www-data connects, and is closed unserved ($out)");
like(log_since("$own/accountd.log", 0),
     qr/refused: uid \Q$www[2]\E \(pid \d+\) is not in "allow_users"/,
     'refused by its uid');

accountd_conf($own, 'allow_users = www-data');
my $opid = slurp_status("$own/accountd.pid") =~ s/\s+//gr;
kill('HUP', $opid);
for (1 .. 100 * time_scale()) {
    last if log_since("$own/accountd.log", 0) =~ /configuration reloaded/;
    sleep(0.05);
}

$out = client('www-data', unpack('H*', frame(request_id => "$tag-o2")), 1,
              "$own/accountd.sock");
like($out, qr/^connect=ok .* keys=[1-9]\d* ack=\Q$tag-o2\E /,
     "SIGHUP, allow_users = www-data: served ($out)");
is(rows("$tag-o2"), 1, 'its record is in the ledger');
is(rows("$tag-o1"), 0, 'the refused one\'s is not');

# a connection made while www-data was allowed does not outlive its
# removal: the SIGHUP that takes www-data out of allow_users closes it
open(my $bg, '-|', "runuser -u www-data -- perl $dir/client.pl "
                   . "$own/accountd.sock 00 0 " . 30 * time_scale())
    or die "client: $!";
my $reloads = () = log_since("$own/accountd.log", 0) =~ /configuration reloaded/g;
for (1 .. 100 * time_scale()) {
    last if log_since("$own/accountd.log", 0) =~ /client #\d+ connected/
            || $_ > 20;
    sleep(0.05);
}
accountd_conf($own, 'allow_users =');
kill('HUP', $opid);
for (1 .. 100 * time_scale()) {
    my $n = () = log_since("$own/accountd.log", 0)
                 =~ /configuration reloaded/g;
    last if $n > $reloads;
    sleep(0.05);
}
chomp($out = <$bg> // '');
close($bg);
like($out, qr/^connect=ok .* keys=[1-9]\d* ack=- eof=1 /,
     "www-data taken out of allow_users: its open connection, served the "
     . "key set, is closed ($out)");
like(log_since("$own/accountd.log", 0),
     qr/closed: uid \Q$www[2]\E \(pid \d+\) is no longer in "allow_users"/,
     'and the log says why');

kill('TERM', $opid);
for (1 .. 100 * time_scale()) {
    last unless kill(0, $opid);
    sleep(0.05);
}

$ngx->no_alerts();

sub slurp_status {
    open(my $f, '<', $_[0]) or return '';
    local $/;
    return <$f> // '';
}

sub master_pid {
    open(my $f, '<', "$_[0]->{dir}/nginx.pid") or return -1;
    chomp(my $pid = <$f> // '');
    return $pid;
}

done_testing();
