package LLMGW;

# The test harness: the stack `make test` started (PostgreSQL, accountd,
# mockllm), an nginx per test built from a config block, tenants and keys
# through accountd's CLI, plain HTTP, and the ledger.  Core Perl and DBD::Pg.

use strict;
use warnings;

use Exporter qw(import);
use File::Path qw(make_path);
use File::Temp qw(tempdir);
use HTTP::Tiny;
use IO::Select;
use IO::Socket::INET;
use JSON::PP;
use List::Util qw(max);
use POSIX qw(ceil);
use Test::More;
use Time::HiRes qw(sleep time);

our @EXPORT = qw(stack accountd accountd_stop accountd_start accountd_other
                 accountd_conf own_accountd new_tenant nginx http_post
                 raw_post json_body
                 usage_row usage_rows est_out db forge_key snapshot_caps
                 time_scale mockllm burst killed_alerts);

my %stack;
my $tenants = 0;

# How many times longer than usual a daemon may take: LLMGW_TIME_SCALE,
# which make test-sanitize sets (accountd under valgrind starts and stops
# seconds slower).  The harness's waits are multiplied by it.
sub time_scale {
    my $k = $ENV{LLMGW_TIME_SCALE} // 1;
    return $k =~ /^\d+(?:\.\d+)?$/ && $k >= 1 ? $k : 1;
}

# What nginx's master logs of workers a test killed with SIGKILL: their
# exit, and the lock of a zone one of them died holding, which the master
# takes back (ngx_shmtx_force_unlock).  For no_alerts(alerts => [...]).
sub killed_alerts {
    my $pids = join('|', grep { /^\d+$/ } @_) || 'none';
    return (qr/worker process ($pids) exited on signal 9/,
            qr/shared memory zone "[^"]+" was locked by ($pids)\b/);
}

sub stack {
    return \%stack if %stack;

    my $dir = $ENV{LLMGW_TEST_DIR};
    plan(skip_all => 'LLMGW_TEST_DIR is not set: run me with make test')
        unless $dir && -f "$dir/stack.env";

    open(my $fh, '<', "$dir/stack.env") or die "$dir/stack.env: $!";
    while (<$fh>) {
        chomp;
        $stack{$1} = $2 if /^(\w+)=(.*)$/;
    }
    close($fh);

    $stack{LLMGW_ACCOUNTD_PIDFILE} //= "$stack{LLMGW_DIR}/accountd.pid";

    # PostgreSQL asks every role for its password: libpq (DBD::Pg, psql,
    # accountd) finds it in the stack's password file, which only root
    # reads
    $ENV{PGPASSFILE} = $stack{LLMGW_PGPASSFILE} if $stack{LLMGW_PGPASSFILE};

    return \%stack;
}

# Runs the accountd CLI; returns its standard output, dies on failure.
sub accountd {
    return cli(stack()->{LLMGW_BUILD}, @_);
}

# The CLI of the accountd in $build.  The valgrind pass of make
# test-sanitize names the usual build in LLMGW_SETUP_BUILD, for the
# tenants and keys new_tenant() makes: the same two commands hundreds of
# times, seconds each under valgrind, which t/030 and t/031 run there.
sub cli {
    my ($build, @args) = @_;
    my $s = stack();
    my $cmd = join(' ', "$build/accountd",
                   '-c', $s->{LLMGW_ACCOUNTD_CONF}, map { "'$_'" } @args);
    my $out = `$cmd 2>&1`;
    die "accountd @args failed: $out" if $?;
    return $out;
}

# The stack's accountd daemon, stopped (TERM, waited for) and started
# again; true on success.
sub accountd_stop {
    my $s = stack();
    my $pidfile = $s->{LLMGW_ACCOUNTD_PIDFILE};

    open(my $fh, '<', $pidfile) or return 0;
    chomp(my $pid = <$fh> // '');
    close($fh);

    return 0 unless $pid && kill('TERM', $pid);

    for (1 .. 200 * time_scale()) {
        return 1 unless kill(0, $pid);
        sleep(0.05);
    }

    return 0;
}

sub accountd_start {
    my $s = stack();
    return system("$s->{LLMGW_BUILD}/accountd -c $s->{LLMGW_ACCOUNTD_CONF} -d")
           == 0;
}

# Another accountd on the same database, as a second gateway host runs:
# its socket, key snapshot and pidfile, under its name.  Stopped by the
# caller (kill of its pidfile).
sub accountd_other {
    my ($name) = @_;
    my $s = stack();
    my $dir = "$s->{LLMGW_DIR}/accountd-$name";
    my $conf = accountd_conf($dir, "gateway_name = $name");

    system("$s->{LLMGW_BUILD}/accountd -c $conf -d") == 0
        or die "accountd $name did not start";

    for (1 .. 50 * time_scale()) {
        last if -f "$dir/keys.snapshot";
        sleep(0.1);
    }

    return { dir => $dir, socket => "$dir/accountd.sock",
             snapshot => "$dir/keys.snapshot",
             pidfile => "$dir/accountd.pid" };
}

# An accountd of this file's own, on the stack's database and key secret,
# configured as the stack's (its metrics on a port of this file's), which
# from then on this file's nginx (%%GATEWAY%%), the CLI, accountd_stop()
# and accountd_start() use in place of the stack's: a file that stops
# accountd stops its own, and the files run beside it keep theirs.
# Stopped when the file ends.
my $own;

sub own_accountd {
    my $s = stack();
    my $dir = "$s->{LLMGW_DIR}/accountd-own-$$";
    my $metrics = LLMGW::Nginx::free_port();
    my $conf = accountd_conf($dir, 'verbose = 1',
                             "metrics_listen = 127.0.0.1:$metrics");

    $s->{LLMGW_ACCOUNTD_CONF} = $conf;
    $s->{LLMGW_ACCOUNTD_SOCKET} = "$dir/accountd.sock";
    $s->{LLMGW_ACCOUNTD_PIDFILE} = "$dir/accountd.pid";
    $s->{LLMGW_KEY_SNAPSHOT} = "$dir/keys.snapshot";
    $s->{LLMGW_ACCOUNTD_METRICS_PORT} = $metrics;

    accountd_start() or die "accountd of $$ did not start";
    $own = $s->{LLMGW_ACCOUNTD_PIDFILE};

    for (1 .. 100 * time_scale()) {
        last if -f $s->{LLMGW_KEY_SNAPSHOT} && -S $s->{LLMGW_ACCOUNTD_SOCKET};
        sleep(0.05);
    }

    return $s;
}

END {
    local $?;
    accountd_stop() if $own;
}

# The configuration of an accountd of its own in $dir, on the stack's
# database and key secret, with its socket (accountd.sock), key snapshot,
# pidfile and log in $dir, and the settings given ("name = value"), which
# replace those of the same name; returns its path.
sub accountd_conf {
    my ($dir, @settings) = @_;
    my $s = stack();

    my @conf = (
        "database_url = $s->{LLMGW_DATABASE_URL}",
        "admin_database_url = $s->{LLMGW_ADMIN_DATABASE_URL}",
        "listen = $dir/accountd.sock",
        # as the stack's: nginx's workers (www-data) and root only
        'listen_mode = 0660',
        'listen_group = www-data',
        'allow_users = www-data',
        "key_secret_file = $s->{LLMGW_KEY_SECRET}",
        "key_snapshot = $dir/keys.snapshot",
        "pidfile = $dir/accountd.pid",
        "logfile = $dir/accountd.log");

    for my $set (@settings) {
        my ($name) = $set =~ /^\s*(\w+)/;
        my @same = grep { $conf[$_] =~ /^\Q$name\E\s*=/ } 0 .. $#conf;
        if (@same) {
            $conf[$same[0]] = $set;
        } else {
            push(@conf, $set);
        }
    }

    make_path($dir);
    open(my $fh, '>', "$dir/accountd.conf") or die "$dir: $!";
    print $fh join("\n", @conf, '');
    close($fh);

    return "$dir/accountd.conf";
}

# A tenant of its own for each caller, with one key.
sub new_tenant {
    my (%o) = @_;
    my $tier = $o{tier} // 'free';
    my $name = sprintf('t%d-%d-%s', $$, ++$tenants, $tier);

    my $build = $ENV{LLMGW_SETUP_BUILD} || stack()->{LLMGW_BUILD};

    cli($build, 'tenant', 'create', '--name', $name, '--tier', $tier);
    my @lines = split(/\n/, cli($build, 'key', 'create', '--tenant', $name,
                                 @{ $o{args} // [] }));

    my ($id, $key_id) = db()->selectrow_array(
        'SELECT tenant_id, max(key_id) FROM llm.tenants'
        . ' LEFT JOIN llm.api_keys USING (tenant_id)'
        . ' WHERE name = ? GROUP BY tenant_id', undef, $name);

    return { name => $name, key => $lines[-1], id => $id, key_id => $key_id,
             tier => $tier };
}

# The caps field of a key in a key snapshot ("-", "t", "k", "tk"), once
# it is $want (up to 5 s), else what it is.  A gateway started from the
# file, or reached by accountd's push, knows the caps from then on.
sub snapshot_caps {
    my ($file, $key_id, $want) = @_;
    my $caps = '';

    for (1 .. 100 * time_scale()) {
        if (open(my $fh, '<', $file)) {
            while (<$fh>) {
                my @f = split(/ /);
                chomp($caps = $f[7] // '') if @f >= 8 && $f[1] eq $key_id;
            }
            close($fh);
        }
        last if defined $want && $caps eq $want;
        sleep(0.05);
    }

    return $caps;
}

# A well-formed key that accountd never issued: the checksum is the first
# four bytes of SHA-256 over the rest, as six base62 digits.
sub forge_key {
    require Digest::SHA;
    my @b62 = ('0' .. '9', 'A' .. 'Z', 'a' .. 'z');
    my $body = 'llmgw_live_' . join('', map { $b62[rand 62] } 1 .. 32);
    my $n = unpack('N', substr(Digest::SHA::sha256($body), 0, 4));
    my $sum = '';
    for (1 .. 6) { $sum = $b62[$n % 62] . $sum; $n = int($n / 62); }
    return $body . $sum;
}

my $dbh;

sub db {
    # a restart of PostgreSQL (t/048) breaks the connection: a new one
    return $dbh if $dbh && $dbh->ping;

    require DBI;
    my $s = stack();
    $dbh = DBI->connect("dbi:Pg:dbname=llmgw;host=127.0.0.1;"
                        . "port=$s->{LLMGW_PG_PORT}", 'llmgw', '',
                        { RaiseError => 1, AutoCommit => 1, PrintError => 0,
                          PrintWarn => 0 });
    return $dbh;
}

# The llm.usage rows of a request, waiting up to 5 s for the first.
sub usage_rows {
    my ($request_id, $wait) = @_;
    my $deadline = time() + ($wait // 5) * time_scale();

    while (1) {
        my $rows = db()->selectall_arrayref(
            'SELECT * FROM llm.usage WHERE request_id = ?', { Slice => {} },
            $request_id);
        return $rows if @$rows || time() > $deadline;
        sleep(0.05);
    }
}

sub usage_row {
    my $rows = usage_rows(@_);
    return @$rows == 1 ? $rows->[0] : undef;
}

# The gateway's count of the output of a stream cut after the mock's first
# $k tokens, "tok1 tok2 ... ", as the README says: the larger of the delta
# events and ceil(bytes / 4) of their text.
sub est_out {
    my ($k) = @_;
    my $bytes = 0;
    $bytes += length("tok$_ ") for 1 .. $k;
    return max($k, ceil($bytes / 4));
}

# Another mockllm, with its own options (provider limits: -r, -T, -D,
# -P): { port, pid, url }, stopped when the test ends.
my @mocks;

sub mockllm {
    my @args = @_;
    my $s = stack();
    my $port = LLMGW::Nginx::free_port();

    my $pid = fork() // die "fork: $!";

    if ($pid == 0) {
        open(STDOUT, '>', '/dev/null');
        exec("$s->{LLMGW_BUILD}/mockllm", '-l', "127.0.0.1:$port", @args)
            or die "mockllm: $!";
    }

    for (1 .. 100 * time_scale()) {
        last if IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                      PeerPort => $port);
        sleep(0.05);
    }

    my $m = { port => $port, pid => $pid, url => "http://127.0.0.1:$port" };
    push @mocks, $m;

    return $m;
}

END {
    for my $m (@mocks) {
        kill('TERM', $m->{pid});
        waitpid($m->{pid}, 0);
    }
}

sub nginx {
    return LLMGW::Nginx->new(@_);
}

my $http = HTTP::Tiny->new(timeout => 30, keep_alive => 0);

# POST a body (a hash is sent as JSON); returns HTTP::Tiny's response.
sub http_post {
    my ($url, $body, %headers) = @_;
    $body = encode_json($body) if ref $body;
    return $http->request('POST', $url, {
        headers => { 'content-type' => 'application/json', %headers },
        content => $body,
    });
}

# A POST over a plain socket, for what HTTP::Tiny hides: whether a chunked
# body ended with its last chunk, and a client that leaves early.  With
# until => qr//, the socket is closed as soon as the body read so far
# matches.  Returns { status, headers, body (de-chunked), complete,
# aborted }.
sub raw_post {
    my ($url, $body, $headers, %o) = @_;
    my ($host, $port, $path) = $url =~ m{^http://([^:/]+):(\d+)(/.*)$}
        or die "raw_post: $url";
    $body = encode_json($body) if ref $body;

    my $c = IO::Socket::INET->new(PeerAddr => $host, PeerPort => $port)
        or die "raw_post: $!";
    my $req = "POST $path HTTP/1.1\r\nHost: $host\r\nConnection: close\r\n"
        . "Content-Type: application/json\r\n"
        . "Content-Length: " . length($body) . "\r\n";
    $req .= "$_: $headers->{$_}\r\n" for sort keys %{ $headers // {} };
    $c->syswrite("$req\r\n$body");

    my $sel = IO::Select->new($c);
    my $deadline = time() + ($o{timeout} // 30);
    my $raw = '';

    while ((my $left = $deadline - time()) > 0) {
        last unless $sel->can_read($left);
        last unless $c->sysread($raw, 65536, length $raw);

        if ($o{until}) {
            my $r = http_parse($raw);
            if ($r->{body} =~ $o{until}) {
                close($c);
                return { %$r, aborted => 1 };
            }
        }
    }

    close($c);
    return http_parse($raw);
}

# n POSTs at once, each on its own connection, all written before any is
# read: the responses (as http_parse(), with closed: the time the server
# closed the connection), in the order sent.
sub burst {
    my ($url, $n, $body, $headers, %o) = @_;
    my ($host, $port, $path) = $url =~ m{^http://([^:/]+):(\d+)(/.*)$}
        or die "burst: $url";
    $body = encode_json($body) if ref $body;

    my $req = "POST $path HTTP/1.1\r\nHost: $host\r\nConnection: close\r\n"
        . "Content-Type: application/json\r\n"
        . "Content-Length: " . length($body) . "\r\n";
    $req .= "$_: $headers->{$_}\r\n" for sort keys %{ $headers // {} };
    $req .= "\r\n$body";

    my (@c, %raw, %i, %closed);
    my $sel = IO::Select->new();

    for my $k (0 .. $n - 1) {
        my $c = IO::Socket::INET->new(PeerAddr => $host, PeerPort => $port)
            or die "burst: $!";
        $c->syswrite($req);
        push @c, $c;
        $i{fileno $c} = $k;
        $raw{$k} = '';
        $sel->add($c);
    }

    my $deadline = time() + ($o{timeout} // 60) * time_scale();

    while ($sel->count && (my $left = $deadline - time()) > 0) {
        for my $c ($sel->can_read($left)) {
            my $k = $i{fileno $c};
            next if $c->sysread($raw{$k}, 65536, length $raw{$k});
            $closed{$k} = time();
            $sel->remove($c);
            close($c);
        }
    }

    close($_) for $sel->handles;

    # closed: when the server closed it, undef if it did not in time
    return map { { %{ http_parse($raw{$_}) }, closed => $closed{$_} } }
               0 .. $n - 1;
}

# A response as far as it came: a chunked body is complete with its last
# chunk, one with a Content-Length when that much came, another when the
# connection closed.
sub http_parse {
    my ($raw) = @_;
    my ($head, $rest) = split(/\r\n\r\n/, $raw, 2);
    my %h;
    my ($status) = ($head // '') =~ m{^HTTP/1\.[01] (\d+)};
    for (split(/\r\n/, $head // '')) {
        $h{lc $1} = $2 if /^([^:]+):\s*(.*)$/;
    }
    $rest //= '';

    my ($body, $complete) = ('', 0);

    if (($h{'transfer-encoding'} // '') =~ /chunked/i) {
        while ($rest =~ s/^([0-9a-fA-F]+)\r\n//) {
            my $n = hex $1;
            if ($n == 0) {
                $complete = ($rest =~ /^\r\n/) ? 1 : 0;
                last;
            }
            last if length($rest) < $n + 2;
            $body .= substr($rest, 0, $n);
            substr($rest, 0, $n + 2) = '';
        }

    } elsif (defined $h{'content-length'}) {
        $body = $rest;
        $complete = length($rest) >= $h{'content-length'} ? 1 : 0;

    } else {
        ($body, $complete) = ($rest, 1);
    }

    return { status => $status // 0, headers => \%h, body => $body,
             complete => $complete };
}

sub json_body {
    my ($res) = @_;
    my $j = eval { decode_json($res->{content}) };
    return $j;
}


package LLMGW::Nginx;

use strict;
use warnings;

use FindBin;
use File::Path qw(make_path);
use File::Temp qw(tempdir);
use IO::Socket::INET;
use Test::More;
use Time::HiRes qw(sleep);

my $instances = 0;

# nginx->new(http => '...') with %%PORT%%, %%MOCK%%, %%DIR%% (the stack's
# directory) and %%NGINX%% (this nginx's) in the block replaced, and these
# for what most tests configure alike:
#
#   %%GATEWAY%%   the usual http-level directives: the zone, the keys and
#                 accountd
#   %%UPSTREAM%%  upstream mock, the mock with keepalive => N connections
#                 kept (8 unless said); a server keeps them with
#                 proxy_http_version 1.1 and an empty Connection header
#   %%APIS%%      in a server: a location to it for each API, with
#                 llm_gateway zone=llm api=...: /v1/chat/completions
#                 (openai), /v1/messages (anthropic), /v1/responses
#                 (responses), /v1/embeddings (embeddings),
#                 /v1/messages/count_tokens (count_tokens),
#                 /v1/models (models, the list and /v1/models/ID) and
#                 /v1/ (none: a 404 for any other path)
#
# pass_mock => 0 leaves out the llm_gateway_pass_headers x-mock-* that
# every other test has; diagnostics => 0 the llm_gateway_diagnostics on
# (x-llmgw-backend and the others, off by default) that they read.
#
# modules_enabled => 1 loads the modules Debian's packages enabled, as
# Debian's nginx.conf does (include /etc/nginx/modules-enabled/*.conf),
# instead of the build's: their "load_module modules/..." is relative to
# the prefix, which has the link modules -> /usr/lib/nginx/modules of
# Debian's own, /usr/share/nginx.
sub new {
    my ($class, %o) = @_;
    my $s = LLMGW::stack();

    my $dir = "$s->{LLMGW_DIR}/nginx-$$-" . ++$instances;
    make_path("$dir/tmp");
    chmod(0777, "$dir/tmp");

    my $self = bless { dir => $dir, port => free_port() }, $class;

    my $gateway = <<"EOF";
    llm_gateway_zone      zone=llm:1m;
    llm_gateway_keys      $s->{LLMGW_KEY_SNAPSHOT} secret=$s->{LLMGW_KEY_SECRET};
    llm_gateway_accountd  unix:$s->{LLMGW_ACCOUNTD_SOCKET};
EOF

    my $keepalive = $o{keepalive} // 8;

    my $upstream = <<"EOF";
    upstream mock {
        server     127.0.0.1:%%MOCK%%;
        keepalive  $keepalive;
    }
EOF

    my $apis = <<"EOF";
        location = /v1/chat/completions {
            llm_gateway  zone=llm api=openai;
            proxy_pass   http://mock;
        }

        location = /v1/messages {
            llm_gateway  zone=llm api=anthropic;
            proxy_pass   http://mock;
        }

        location = /v1/responses {
            llm_gateway  zone=llm api=responses;
            proxy_pass   http://mock;
        }

        location = /v1/embeddings {
            llm_gateway  zone=llm api=embeddings;
            proxy_pass   http://mock;
        }

        location = /v1/messages/count_tokens {
            llm_gateway  zone=llm api=count_tokens;
            proxy_pass   http://mock;
        }

        location /v1/models {
            llm_gateway  zone=llm api=models;
        }

        location /v1/ {
            llm_gateway  zone=llm api=none;
        }
EOF

    my $http = $o{http} // '';
    $http =~ s/^[ \t]*%%UPSTREAM%%[ \t]*\n/$upstream/mg;
    $http =~ s/^[ \t]*%%APIS%%[ \t]*\n/$apis/mg;
    $http =~ s/%%GATEWAY%%/$gateway/g;
    $http =~ s/%%PORT%%/$self->{port}/g;
    $http =~ s/%%MOCK%%/$s->{LLMGW_MOCK_PORT}/g;
    $http =~ s/%%DIR%%/$s->{LLMGW_DIR}/g;
    $http =~ s/%%NGINX%%/$dir/g;

    my $module = "$s->{LLMGW_BUILD}/ngx_http_llm_gateway_module.so";
    my $load = "load_module $module;";

    if ($o{modules_enabled}) {
        symlink('/usr/lib/nginx/modules', "$dir/modules")
            or die "$dir/modules: $!";
        $load = 'include /etc/nginx/modules-enabled/*.conf;';
    }

    # the tests drive mockllm with x-mock-* headers through the gateway,
    # which passes no such header unless told (pass_mock => 0: as shipped)
    my $pass = ($o{pass_mock} // 1) ? '    llm_gateway_pass_headers  x-mock-*;'
                                    : '';

    $pass .= "\n    llm_gateway_diagnostics  on;" if $o{diagnostics} // 1;

    my $workers = $o{workers} // 2;
    my $level = $o{log_level} // 'debug';

    my $conf = <<"EOF";
$load

worker_processes  $workers;
user              www-data www-data;
pid               $dir/nginx.pid;
error_log         $dir/error.log $level;

events {
    worker_connections  1024;
}

http {
    access_log  $dir/access.log;

    client_body_temp_path  $dir/tmp/body;
    proxy_temp_path        $dir/tmp/proxy;
    fastcgi_temp_path      $dir/tmp/fastcgi;
    uwsgi_temp_path        $dir/tmp/uwsgi;
    scgi_temp_path         $dir/tmp/scgi;

$pass
$http
}
EOF

    open(my $fh, '>', "$dir/nginx.conf") or die "$dir/nginx.conf: $!";
    print $fh $conf;
    close($fh);

    return $self;
}

# The gateway make run starts, scripts/nginx.conf.in, as shipped: its
# @NAMES@ filled in for this stack, the upstream mockllm at mock => PORT
# (the stack's unless said).  admin_port() is its admin listener's.
sub demo {
    my ($class, %o) = @_;
    my $s = LLMGW::stack();
    my $self = $class->new(http => '');
    my $dir = $self->{dir};
    my $top = "$FindBin::Bin/..";

    open(my $in, '<', "$top/scripts/nginx.conf.in") or die "$top: $!";
    my $conf = do { local $/; <$in> };
    close($in);

    $self->{admin} = free_port();

    my %names = (
        MODULE => "$s->{LLMGW_BUILD}/ngx_http_llm_gateway_module.so",
        HTTP_PORT => $self->{port}, ADMIN_PORT => $self->{admin},
        MOCK_PORT => $o{mock} // $s->{LLMGW_MOCK_PORT});

    $conf =~ s{\@DIR\@/nginx/}{$dir/}g;
    $conf =~ s{\@DIR\@/keys\.snapshot}{$s->{LLMGW_KEY_SNAPSHOT}}g;
    $conf =~ s{\@DIR\@/keys\.secret}{$s->{LLMGW_KEY_SECRET}}g;
    $conf =~ s{\@DIR\@/accountd\.sock}{$s->{LLMGW_ACCOUNTD_SOCKET}}g;
    $conf =~ s{\@(MODULE|HTTP_PORT|ADMIN_PORT|MOCK_PORT)\@}{$names{$1}}g;
    die "nginx.conf.in: a name not filled in: \@$1\@"
        if $conf =~ /^[^#]*\@(\w+)\@/m;

    open(my $fh, '>', "$dir/nginx.conf") or die "$dir/nginx.conf: $!";
    print $fh $conf;
    close($fh);

    return $self;
}

sub admin_port { $_[0]->{admin} }
sub port { $_[0]->{port} }
sub dir { $_[0]->{dir} }
sub url { "http://127.0.0.1:$_[0]->{port}" . ($_[1] // '') }

sub cmd {
    my ($self, @args) = @_;
    my $d = $self->{dir};
    # make test-sanitize: the ASan runtime nginx preloads, and its options
    my $env = $ENV{LLMGW_NGINX_ENV} ? "env $ENV{LLMGW_NGINX_ENV} " : '';
    return "${env}nginx -p $d -c $d/nginx.conf -e $d/error.log @args";
}

# nginx -t: (exit status, what it printed)
sub test {
    my ($self) = @_;
    my $out = `${\ $self->cmd('-t')} 2>&1`;
    return ($? >> 8, $out);
}

sub run {
    my ($self) = @_;
    my $out = `${\ $self->cmd()} 2>&1`;
    die "nginx did not start: $out" if $?;

    for (1 .. 100 * LLMGW::time_scale()) {
        my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                      PeerPort => $self->{port});
        if ($s) {
            $self->{running} = 1;
            return $self;
        }
        sleep(0.05);
    }
    die "nginx did not listen on $self->{port}";
}

sub reload {
    my ($self) = @_;
    system($self->cmd('-s reload'));
    sleep(0.5);
}

sub stop {
    my ($self) = @_;
    return unless $self->{running};
    system($self->cmd('-s quit') . ' 2>/dev/null');
    for (1 .. 100 * LLMGW::time_scale()) {
        last unless -f "$self->{dir}/nginx.pid";
        sleep(0.05);
    }
    $self->{running} = 0;
}

# The value of the first line of its /metrics (llm_gateway_metrics at
# /metrics) that is $re and a number, undef if none
sub metric {
    my ($self, $re) = @_;
    my $text = HTTP::Tiny->new(timeout => 30)->get($self->url('/metrics'))
        ->{content};
    return $text =~ /^$re (\d+)$/m ? $1 : undef;
}

sub error_log {
    my ($self) = @_;
    open(my $fh, '<', "$self->{dir}/error.log") or return '';
    local $/;
    return <$fh>;
}

# What nginx-tests asserts at the end of every file: stops nginx, and no
# [alert], [crit], [emerg] or sanitizer report in its error.log but those
# matching alerts => [ qr/.../, ... ], which a test causes on purpose.
sub no_alerts {
    my ($self, %o) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;

    $self->stop();
    my @bad = grep { /\[(alert|emerg|crit)\]|Sanitizer|runtime error/ }
              split(/\n/, $self->error_log());

    my @expected;
    for my $re (@{ $o{alerts} // [] }) {
        push(@expected, grep { $_ =~ $re } @bad);
        @bad = grep { $_ !~ $re } @bad;
    }
    diag(scalar(@expected) . ' alerts caused on purpose: '
         . join("\n", @expected)) if @expected;

    # a flood of one report says no more than its first lines
    is(scalar(@bad), 0, $o{name} // 'no alerts in error.log')
        or diag(join("\n", grep { defined } @bad[0 .. 19]));
}

sub DESTROY {
    my ($self) = @_;
    $self->stop() if $self->{running};
}

# A port for this file: from a block of its own (PORT_BLOCK ports) below
# the kernel's ephemeral range (32768 and up), so that neither a file run
# beside it nor an outgoing connection (while t/048 restarts PostgreSQL)
# takes it between this check and the listen.  The blocks are handed out
# in turn, under a lock in the stack's directory, from just above the
# stack's own ports; one another stack holds is passed over.
use Fcntl qw(:flock);

use constant { PORT_LO => 10000, PORT_HI => 32768, PORT_BLOCK => 32 };

my @ports;

sub free_port {
    my $s = LLMGW::stack();
    # PostgreSQL's is free while t/048 restarts it
    my %taken = map { ($s->{$_} // 0) => 1 }
                qw(LLMGW_PG_PORT LLMGW_MOCK_PORT LLMGW_ACCOUNTD_METRICS_PORT);

    while (1) {
        @ports = port_block() unless @ports;
        my $port = shift @ports;
        next if $taken{$port};
        my $l = IO::Socket::INET->new(Listen => 1, LocalAddr => '127.0.0.1',
                                      LocalPort => $port, ReuseAddr => 1)
            or next;
        close($l);
        return $port;
    }
}

sub port_block {
    my $s = LLMGW::stack();
    my $file = "$s->{LLMGW_DIR}/ports";

    open(my $fh, '+>>', $file) or die "$file: $!";
    flock($fh, LOCK_EX) or die "$file: $!";
    seek($fh, 0, 0);
    my $n = <$fh> // 0;
    chomp($n);
    $n = 0 unless $n =~ /^\d+$/;
    truncate($fh, 0);
    print $fh $n + 1, "\n";
    close($fh);

    my $blocks = int((PORT_HI - PORT_LO) / PORT_BLOCK);
    my $first = int((($s->{LLMGW_PG_PORT} // PORT_LO) - PORT_LO)
                    / PORT_BLOCK) + 1;
    my $lo = PORT_LO + (($first + $n) % $blocks) * PORT_BLOCK;

    return ($lo .. $lo + PORT_BLOCK - 1);
}

1;
