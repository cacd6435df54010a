#!/usr/bin/perl

# docker/: the containers of make run.  No Docker engine runs here, so no
# image is built; what can be checked is:
#
#   compose.yaml   as Debian's docker-compose reads it (config, which needs
#                  no daemon): the services, their ports (127.0.0.1 only),
#                  volumes, healthchecks, dependencies and restart policies
#   Dockerfiles    read as text: bases from Debian's official images only,
#                  nothing fetched but Debian packages, every COPY source in
#                  the repository and in the build context, a non-root USER
#                  in every runtime stage, EXPOSE as compose has it
#   scripts        sh -n and bash -n (and shellcheck, when installed); the
#                  PostgreSQL entrypoint run against a temporary cluster:
#                  sql/ applied in order, each once, the login roles
#                  accountd and llmgw_ops made and put right; accountd's and
#                  demo-init's entrypoints logging in as them, never llmgw
#   accountd.conf  read by the accountd make build built; its URLs as
#                  accountd and llmgw_ops
#   nginx.conf     the tiers and locations of scripts/nginx.conf.in; with
#                  the stack of make test, nginx -t and one request through
#                  it, its paths and ports replaced
#   the dashboard  docker/grafana/llmgw-dashboard.json: importable, every
#                  query on the metrics below only, every metric shown
#
# Seconds; without the stack (LLMGW_TEST_DIR) the nginx part is skipped.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use Cwd qw(abs_path);
use File::Temp qw(tempdir);
use HTTP::Tiny;
use IO::Socket::INET;
use JSON::PP;
use LLMGW;
use POSIX qw(WNOHANG);
use Test::More;
use Time::HiRes qw(sleep time);


my $top = "$FindBin::Bin/..";
my $docker = "$top/docker";
my $build = $ENV{LLMGW_BUILD} // "$top/build";

sub which {
    my ($prog) = @_;
    my ($path) = grep { -x "$_/$prog" } split(/:/, $ENV{PATH} // '');
    return $path ? "$path/$prog" : undef;
}

sub slurp {
    my ($file) = @_;
    open(my $fh, '<', $file) or die "$file: $!";
    local $/;
    return <$fh>;
}

# a port on 127.0.0.1: of the stack's block with make test, else any
sub tcp_port {
    return LLMGW::Nginx::free_port()
        if $ENV{LLMGW_TEST_DIR} && -f "$ENV{LLMGW_TEST_DIR}/stack.env";
    my $l = IO::Socket::INET->new(Listen => 1, LocalAddr => '127.0.0.1',
                                  LocalPort => 0) or die "no port: $!";
    return $l->sockport;
}

# --- the metrics a dashboard may show -----------------------------------------

# name => kind (histograms are read through _bucket, _sum, _count)
my %metrics = (
    # the nginx module
    llmgw_journal_written_total         => 'counter',
    llmgw_journal_acknowledged_total    => 'counter',
    llmgw_journal_lost_total            => 'counter',
    llmgw_journal_unacknowledged        => 'gauge',
    llmgw_journal_refused_total         => 'counter',
    llmgw_journal_bytes                 => 'gauge',
    llmgw_journal_sent_total            => 'counter',
    llmgw_accountd_connected            => 'gauge',
    llmgw_requests_total                => 'counter',
    llmgw_rejected_total                => 'counter',
    llmgw_tokens_total                  => 'counter',
    llmgw_cost_picodollars_total        => 'counter',
    llmgw_reserved_tokens               => 'gauge',
    llmgw_concurrency                   => 'gauge',
    # accountd
    llmgw_accountd_records_received_total  => 'counter',
    llmgw_accountd_records_committed_total => 'counter',
    llmgw_accountd_records_rejected_total  => 'counter',
    llmgw_accountd_batches_total           => 'counter',
    llmgw_accountd_batch_records           => 'histogram',
    llmgw_accountd_queue_records           => 'gauge',
    llmgw_accountd_db_roundtrip_seconds    => 'histogram',
    llmgw_accountd_db_connected            => 'gauge',
    llmgw_accountd_db_reconnects_total     => 'counter',
    llmgw_accountd_clients                 => 'gauge',
    llmgw_accountd_leases_granted_total    => 'counter',
    llmgw_accountd_leases_refused_total    => 'counter',
    llmgw_accountd_lease_picodollars_total => 'counter',
);

# the metrics with tenant and tier labels: the dashboard's variables
# filter every query on them
my @per_tenant = qw(llmgw_requests_total llmgw_rejected_total
                    llmgw_tokens_total llmgw_cost_picodollars_total
                    llmgw_reserved_tokens llmgw_concurrency);

# --- compose.yaml --------------------------------------------------------------

# service => what docker-compose config must say of it; ports are
# published ones, host address included; expose, the others
my %services = (
    postgres => {
        dockerfile => 'docker/postgres.Dockerfile',
        expose     => [5432],
        volumes    => ['pgdata:/var/lib/postgresql/data:rw',
                       'llmgw-db:/run/llmgw-db:rw',
                       'llmgw-roles:/run/llmgw-roles:rw'],
        networks   => ['backend'],
        restart    => 'unless-stopped',
        health     => 1,
    },
    accountd => {
        dockerfile => 'docker/accountd.Dockerfile', target => 'accountd',
        ports      => ['127.0.0.1:8082:8082'],
        volumes    => ['llmgw-run:/run/llmgw:rw',
                       'llmgw-lib:/var/lib/llmgw:rw',
                       'llmgw-roles:/run/llmgw-roles:ro'],
        depends    => { postgres => 'service_healthy' },
        networks   => ['backend', 'frontend'],
        restart    => 'unless-stopped',
        health     => 1,
    },
    'demo-init' => {
        dockerfile => 'docker/accountd.Dockerfile', target => 'demo-init',
        volumes    => ['llmgw-lib:/var/lib/llmgw:rw',
                       'llmgw-roles:/run/llmgw-roles:ro'],
        depends    => { accountd => 'service_healthy' },
        networks   => ['backend'],
        restart    => 'no',
    },
    mockllm => {
        dockerfile => 'docker/mockllm.Dockerfile',
        expose     => [8090],
        networks   => ['frontend'],
        restart    => 'unless-stopped',
        health     => 1,
    },
    nginx => {
        dockerfile => 'docker/nginx.Dockerfile',
        ports      => ['127.0.0.1:8080:8080', '127.0.0.1:8081:8081'],
        volumes    => ['llmgw-run:/run/llmgw:ro',
                       'llmgw-lib:/var/lib/llmgw:ro'],
        depends    => { accountd => 'service_healthy',
                        mockllm => 'service_healthy',
                        'demo-init' => 'service_completed_successfully' },
        networks   => ['frontend'],
        restart    => 'unless-stopped',
        health     => 1,
    },
    prometheus => {
        dockerfile => 'docker/prometheus.Dockerfile',
        profiles   => ['monitoring'],
        ports      => ['127.0.0.1:9090:9090'],
        volumes    => ['prometheus:/var/lib/prometheus:rw'],
        depends    => { nginx => 'service_healthy',
                        accountd => 'service_healthy' },
        networks   => ['frontend'],
        restart    => 'unless-stopped',
        health     => 1,
    },
);

my %compose;

SKIP: {
    skip 'docker-compose is not installed (make deps)', 1
        unless which('docker-compose');

    # no daemon is asked: none runs here
    local $ENV{DOCKER_HOST} = 'unix:///nonexistent/docker.sock';
    my $cmd = "docker-compose -f $docker/compose.yaml --profile monitoring";

    my $out = `$cmd config -q 2>&1`;
    is($?, 0, 'docker-compose config -q: compose.yaml is valid');
    is($out, '', 'and has nothing to say') or diag($out);

    # the normalized file, as JSON (docker-compose's own python3-yaml)
    my $json = `$cmd config 2>/dev/null | python3 -c 'import json, sys, yaml; json.dump(yaml.safe_load(sys.stdin), sys.stdout)'`;
    my $c = eval { decode_json($json) };
    %compose = %{ $c // {} };
    ok($compose{services}, 'its normalized form reads') or last SKIP;
}

sub port_text {
    my ($p) = @_;
    return $p unless ref $p;
    # compose v2's long form
    return join(':', grep { defined && length } $p->{host_ip},
                $p->{published}, $p->{target})
           . '/' . ($p->{protocol} // 'tcp');
}

sub volume_text {
    my ($v) = @_;
    return $v unless ref $v;
    return "$v->{source}:$v->{target}:" . ($v->{read_only} ? 'ro' : 'rw');
}

if (my $got = $compose{services}) {
    is_deeply([sort keys %$got], [sort keys %services],
              'compose: the services of make run, demo-init and prometheus');

    for my $name (sort keys %services) {
        my $want = $services{$name};
        my $s = $got->{$name} or next;

        is($s->{build}{dockerfile}, $want->{dockerfile}, "$name: its Dockerfile");
        is($s->{build}{context} =~ s{/+$}{}r,
           abs_path($top), "$name: built from the repository root");
        is($s->{build}{target}, $want->{target}, "$name: the stage built");
        ok(!exists $s->{image}, "$name: no image to pull, built here");

        my @ports = map { port_text($_) } @{ $s->{ports} // [] };
        is_deeply([sort @ports],
                  [sort map { "$_/tcp" } @{ $want->{ports} // [] }],
                  "$name: ports published: " . (join(', ', @ports) || 'none'));
        is_deeply([grep { !m{^127\.0\.0\.1:} } @ports], [],
                  "$name: on the host's 127.0.0.1 only");
        is_deeply([sort { $a <=> $b } @{ $s->{expose} // [] }],
                  $want->{expose} // [], "$name: ports exposed to the network");

        is_deeply([sort map { volume_text($_) } @{ $s->{volumes} // [] }],
                  [sort @{ $want->{volumes} // [] }], "$name: volumes");

        my %dep = map { $_ => $s->{depends_on}{$_}{condition} }
                  keys %{ $s->{depends_on} // {} };
        is_deeply(\%dep, $want->{depends} // {}, "$name: depends on");

        my $nets = $s->{networks} // {};
        is_deeply([sort(ref $nets eq 'HASH' ? keys %$nets : @$nets)],
                  $want->{networks}, "$name: networks");

        is($s->{restart}, $want->{restart}, "$name: restart $want->{restart}");

        if ($want->{health}) {
            my $test = $s->{healthcheck}{test} // [];
            like($test->[0] // '', qr/^CMD(-SHELL)?$/,
                 "$name: a healthcheck ($test->[-1])");
            unlike("@$test", qr/8082/,
                   "$name: which does not need accountd's metrics");
        } else {
            ok(!$s->{healthcheck}, "$name: one-shot, no healthcheck");
        }

        is_deeply($s->{profiles} // [], $want->{profiles} // [],
                  "$name: profiles");
    }

    is_deeply([sort keys %{ $compose{volumes} // {} }],
              [qw(llmgw-db llmgw-lib llmgw-roles llmgw-run pgdata prometheus)],
              'compose: volumes');

    # the superuser's password, and who may change the roles'
    my %mounts;
    for my $name (sort keys %$got) {
        for (map { volume_text($_) } @{ $got->{$name}{volumes} // [] }) {
            my ($vol, undef, $mode) = split(/:/);
            push(@{ $mounts{$vol}{$mode} }, $name);
        }
    }
    is_deeply([map { @{ $mounts{'llmgw-db'}{$_} // [] } } qw(ro rw)], ['postgres'],
              'compose: no service but postgres mounts llmgw-db, llmgw\'s password');
    is_deeply($mounts{'llmgw-roles'}{rw}, ['postgres'],
              'compose: llmgw-roles written by postgres only');
    is_deeply($mounts{'llmgw-roles'}{ro}, ['accountd', 'demo-init'],
              'compose: read by accountd and demo-init, the roles\' clients');
    ok($compose{networks}{backend}{internal},
       'compose: PostgreSQL\'s network is internal');
}

# --- the Dockerfiles ------------------------------------------------------------

# the build context: every path the root .dockerignore lets in
my @ignore;
for (split(/\n/, slurp("$top/.dockerignore"))) {
    next if /^\s*(#|$)/;
    my $neg = s/^!//;
    s{/+$}{};
    push(@ignore, [$neg, $_]);
}

sub in_context {
    my ($path) = @_;
    $path =~ s{/+$}{};
    my $in = 1;
    for (@ignore) {
        my ($neg, $pat) = @$_;
        my $match = $pat eq '*' || $path eq $pat || index($path, "$pat/") == 0;
        $in = $neg if $match;
    }
    return $in;
}

# [ instruction, arguments ] of a Dockerfile, continuation lines joined
sub instructions {
    my ($file) = @_;
    my $text = slurp($file);
    $text =~ s/\\\n(?:[ \t]*#[^\n]*\n)*/ /g;
    return map { /^\s*(\w+)\s+(.*?)\s*$/ ? [uc $1, $2] : () }
           grep { !/^\s*(#|$)/ } split(/\n/, $text);
}

my (%exposed, %ids, %targets);

# the stages compose builds, by Dockerfile
for (values %services) {
    push(@{ $targets{ $_->{dockerfile} =~ s{.*/}{}r } }, $_->{target} // ());
}

for my $file (sort glob("$docker/*.Dockerfile")) {
    my $name = $file =~ s{.*/}{}r;
    my @ins = instructions($file);

    unlike(slurp($file), qr/^#\s*syntax\s*=/m,
           "$name: no syntax directive (a frontend image from the network)");

    my (%stages, @order, $stage);

    for (@ins) {
        my ($op, $arg) = @$_;

        if ($op eq 'FROM') {
            my ($base, $as) = $arg =~ /^(\S+)(?:\s+AS\s+(\S+))?$/i;
            unless ($stages{$base}) {
                like($base, qr/^debian:12(\.\d+)?(-slim)?(\@sha256:[0-9a-f]{64})?$/,
                     "$name: FROM $base: Debian 12's official image");
            }
            $stage = { name => $as // '(' . (@order + 1) . ')',
                       from => $base, parent => $stages{$base} };
            $stages{ $stage->{name} } = $stage;
            push(@order, $stage);
            next;
        }

        if ($op eq 'ADD') {
            unlike($arg, qr{(^|\s)(https?|ftp|git)(://|@)},
                   "$name: no ADD from the network");
        }

        if ($op eq 'RUN') {
            unlike($arg, qr{\b(curl|wget|pip3?|npm|gem|go\s+get|git\s+clone)\b|://},
                   "$name: RUN fetches nothing but Debian packages")
                or diag($arg);
            if ($arg =~ /apt-get\s.*\binstall\b/) {
                like($arg, qr/--no-install-recommends/,
                     "$name: apt-get install --no-install-recommends");
            }
        }

        if ($op eq 'COPY' || $op eq 'ADD') {
            my @w = split(' ', $arg);
            my %o;
            while (@w && $w[0] =~ /^--(\w+)=(\S+)$/) {
                $o{$1} = $2;
                shift @w;
            }
            pop @w;    # the destination
            if (my $from = $o{from}) {
                ok($stages{$from}, "$name: COPY --from=$from: an earlier stage");
                next;
            }
            for my $src (@w) {
                ok(-e "$top/$src", "$name: COPY $src: in the repository");
                ok(in_context($src), "$name: COPY $src: in the build context"
                   . ' (.dockerignore)');
                if ($src =~ /\.sh$/) {
                    ok(-x "$top/$src", "$name: $src is executable (COPY keeps"
                       . ' the mode)');
                }
            }
        }

        if ($op eq 'USER') {
            $stage->{user} = $arg;
        }

        if ($op eq 'EXPOSE') {
            push(@{ $stage->{expose} }, map { s{/tcp$}{}r } split(' ', $arg));
        }

        if ($op eq 'ARG' && $arg =~ /^(LLMGW_[UG]ID)=(\d+)$/) {
            push(@{ $ids{$1} }, "$name=$2");
        }

        if ($op eq 'CMD' || $op eq 'ENTRYPOINT') {
            like($arg, qr/^\[/, "$name: $op in exec form (signals reach it)");
        }
    }

    next unless @order;

    # the runtime stages: those compose builds (the last when it names
    # none) and the stages they are built on; the others are builders,
    # whose files only COPY --from takes
    my @built = ($order[-1], map { $stages{$_} // () } @{ $targets{$name} // [] });
    my %runtime;
    for my $s (@built) {
        for (my $p = $s; $p; $p = $p->{parent}) {
            $runtime{ $p->{name} } = $p;
        }
    }

    for my $s (sort { $a->{name} cmp $b->{name} } values %runtime) {
        like($s->{from}, qr/^debian:12[^-]*-slim/,
             "$name: stage $s->{name} runs on debian:12-slim") unless $s->{parent};
        ok(defined $s->{user} && $s->{user} !~ /^(root|0)(:.*)?$/,
           "$name: stage $s->{name} runs as " . ($s->{user} // 'root'));
        $exposed{"$name:$s->{name}"} = [sort { $a <=> $b } @{ $s->{expose} // [] }];
    }
    $exposed{"$name:"} = $exposed{"$name:$order[-1]{name}"};
}

for my $id (sort keys %ids) {
    my %v = map { (split(/=/))[1] => 1 } @{ $ids{$id} };
    is(scalar(keys %v), 1, "$id is the same in every Dockerfile: @{ $ids{$id} }");
}

# a new named volume takes its owner and mode from the image's directory:
# postgres (not root) writes its volumes, so its image makes each of them
{
    my $pg = join("\n", map { "$_->[0] $_->[1]" }
                  instructions("$docker/postgres.Dockerfile"));
    for my $v (@{ $services{postgres}{volumes} }) {
        my (undef, $dir) = split(/:/, $v);
        like($pg, qr{install -d -o postgres\b[^&]*\s\Q$dir\E(?:\s|$)},
             "postgres.Dockerfile makes $dir, postgres's");
    }
}

# EXPOSE: what compose publishes or exposes of the stage it builds
for my $name (sort keys %services) {
    my $want = $services{$name};
    my $key = ($want->{dockerfile} =~ s{.*/}{}r) . ':' . ($want->{target} // '');
    my @ports = sort { $a <=> $b } (@{ $want->{expose} // [] },
                                    map { (split(/:/))[-1] } @{ $want->{ports} // [] });
    is_deeply($exposed{$key}, \@ports,
              "$name: EXPOSE @{ $exposed{$key} // [] } as compose has it");
}

# --- the scripts ---------------------------------------------------------------

my $shellcheck = which('shellcheck');

for my $script (sort glob("$docker/*.sh")) {
    my $name = $script =~ s{.*/}{}r;
    for my $sh (qw(sh bash)) {
        my $out = `$sh -n $script 2>&1`;
        is($?, 0, "$name: $sh -n") or diag($out);
    }
    SKIP: {
        skip 'shellcheck is not installed', 1 unless $shellcheck;
        my $out = `shellcheck $script 2>&1`;
        is($?, 0, "$name: shellcheck") or diag($out);
    }
}

# The PostgreSQL entrypoint on a cluster of its own in a temporary
# directory, as the user postgres: sql/ applied in order on a Unix socket
# only (no TCP port at all); started again with one migration more, only
# that one, and the server it becomes answers, on 127.0.0.1 too.  No role
# is trusted: llmgw's password is made (mode 0640), the socket lets in the
# OS user postgres as llmgw (peer) and no other, and TCP wants the
# password.  The containers' login roles, accountd and llmgw_ops, are made
# with passwords of their own in files of their own; between the two
# starts, they are made what a volume of an older image might have (a
# superuser, CREATEROLE, in llmgw_owner, another password), which the
# second start undoes.  Then accountd-entrypoint.sh and demo-init.sh, with
# the accountd make build built, log in over TCP with the files: as the
# roles, never as llmgw.
SKIP: {
    my ($pgbin) = sort { $b cmp $a } glob('/usr/lib/postgresql/*/bin');
    skip 'no PostgreSQL server installed', 50 unless $pgbin && -x "$pgbin/initdb";
    skip 'not root: the cluster is made as the user postgres', 50 if $>;

    my $dir = tempdir('/tmp/llmgw-097.XXXXXX', CLEANUP => 1);
    mkdir("$dir/$_") for qw(sql sock roles lib);
    # the entrypoint too: the checkout may be a directory only root can enter
    system("cp $top/sql/*.sql $dir/sql/ && cp $docker/postgres-entrypoint.sh $dir/"
           . " && chmod 755 $dir && chmod 2750 $dir/roles && chown -R postgres $dir")
        == 0 or die "$dir: could not set it up";

    my @versions = map { s{.*/}{}r =~ s/\.sql$//r } sort glob("$top/sql/[0-9]*.sql");
    my @roles = qw(accountd llmgw_ops);
    my $port = tcp_port();
    my $entry = "cd $dir && exec runuser -u postgres -- env PATH=$pgbin:/usr/bin:/bin"
              . " TMPDIR=$dir PGDATA=$dir/data LLMGW_SQL_DIR=$dir/sql"
              . " LLMGW_PG_PORT=$port LLMGW_PG_SOCKET_DIR=$dir/sock"
              . " LLMGW_PG_PASSWORD_FILE=$dir/password LLMGW_PG_ROLES_DIR=$dir/roles"
              . " LLMGW_PG_LISTEN=%s sh $dir/postgres-entrypoint.sh";
    my $psql = "cd $dir && runuser -u postgres -- psql -X -h $dir/sock -p $port -U llmgw"
             . " -d llmgw -Atc";
    my $pg_ctl = "cd $dir && runuser -u postgres -- $pgbin/pg_ctl -D $dir/data";

    my $out = do { local $ENV{LLMGW_PG_NO_SERVER} = 1;
                   `${\ sprintf($entry, '')} 2>&1` };
    is($?, 0, 'postgres entrypoint: a new cluster, the schema') or diag($out);
    is_deeply([$out =~ /applied (\S+)/g], \@versions,
              'every migration applied, in order') or diag($out);

    my @pw = stat("$dir/password");
    like(-f "$dir/password" ? slurp("$dir/password") : '',
         qr/^[0-9a-f]{48}\n\z/, "llmgw's password made at random");
    is(@pw ? sprintf('%04o', $pw[2] & 07777) : '', '0640', 'mode 0640');
    my $hba = slurp("$dir/data/pg_hba.conf");
    unlike($hba, qr/^[^#]*\btrust\b/m, 'pg_hba.conf trusts no one');
    like($hba, qr/^host\s+all\s+all\s+samenet\s+scram-sha-256$/m,
         'the compose network: passwords');

    my %pw;
    for my $role (@roles) {
        my $file = "$dir/roles/$role";
        $pw{$role} = -f $file ? slurp($file) : '';
        like($pw{$role}, qr/^[0-9a-f]{48}\n\z/,
             "$role: its password made at random in the roles' directory");
        my @st = stat($file);
        is(@st ? sprintf('%04o', $st[2] & 07777) : '', '0640', "$role: mode 0640");
        chomp($pw{$role});
    }
    my %distinct = map { $_ => 1 } values %pw,
                   (-f "$dir/password" ? slurp("$dir/password") =~ s/\n//r : '');
    is(scalar(keys %distinct), 3, 'three passwords, each its own');

    # a volume of an older image: the roles as they must not be
    my $tamper = system("$pg_ctl -w -l $dir/tamper.log"
                        . " -o \"-c listen_addresses='' -k $dir/sock -p $port\""
                        . " start >/dev/null") == 0;
    $out = `$psql "ALTER ROLE accountd SUPERUSER CREATEROLE PASSWORD 'older';
                   GRANT llmgw_owner TO accountd;
                   REVOKE llmgw_writer FROM accountd;
                   ALTER ROLE llmgw_ops CREATEROLE NOLOGIN;
                   GRANT llmgw_writer TO llmgw_ops" 2>&1`;
    $tamper &&= $? == 0;
    system("$pg_ctl -m fast -w stop >/dev/null 2>&1");
    ok($tamper, 'between the starts, accountd a superuser in llmgw_owner, '
       . 'llmgw_ops CREATEROLE in llmgw_writer') or diag($out);

    open(my $fh, '>', "$dir/sql/999_probe.sql") or die;
    print $fh "CREATE TABLE public.probe (x int);\n";
    close($fh);

    # started again, the server in the foreground, on 127.0.0.1 as well
    my $pid = fork() // die;
    if ($pid == 0) {
        open(STDOUT, '>', "$dir/second.log");
        open(STDERR, '>&', \*STDOUT);
        exec(sprintf($entry, '127.0.0.1')) or exit(127);
    }

    # whatever fails, the server stops before its directory goes
    eval {
        my $up;
        for (1 .. 200 * time_scale()) {
            last if waitpid($pid, WNOHANG) > 0;
            $up = `$psql 'SELECT 1' 2>/dev/null` eq "1\n" and last;
            sleep(0.05);
        }
        ok($up, 'started again, it serves') or diag(slurp("$dir/second.log"));

        my $second = slurp("$dir/second.log");
        is_deeply([$second =~ /applied (\S+)/g], ['999_probe'],
                  'only the new migration applied: each once');
        is(`$psql 'SELECT version FROM public.llmgw_migrations ORDER BY applied_at'`,
           join('', map { "$_\n" } @versions, '999_probe'),
           'public.llmgw_migrations holds them in order, as scripts/stack keeps them');
        is(`$psql 'SELECT count(*) FROM llm.usage'`, "0\n", 'the ledger is there');
        is(`$psql 'SHOW listen_addresses'`, "127.0.0.1\n",
           'and on TCP, as LLMGW_PG_LISTEN says');

        my $root = "psql -X -w -h $dir/sock -p $port -U llmgw -d llmgw"
                 . " -Atc 'SELECT 1'";
        my $o = `$root 2>&1`;
        like($o, qr/Peer authentication failed/,
             'root on the socket as llmgw: refused (peer, postgres only)');
        is(`$psql "SELECT rolpassword LIKE 'SCRAM-SHA-256\$%'
                   FROM pg_authid WHERE rolname = 'llmgw'"`,
           "t\n", 'llmgw has a password, SCRAM');

        # the login roles, made once and put right on every start
        like($second, qr/^llmgw-postgres: accountd is no longer a member of llmgw_owner$/m,
             'the second start says what it undid');
        is(`$psql "SELECT rolname, rolcanlogin, rolsuper, rolcreaterole,
                          rolcreatedb, rolreplication, rolbypassrls
                     FROM pg_roles WHERE rolname IN ('accountd', 'llmgw_ops')
                    ORDER BY 1"`,
           "accountd|t|f|f|f|f|f\nllmgw_ops|t|f|f|f|f|f\n",
           'accountd and llmgw_ops: LOGIN, NOSUPERUSER, NOCREATEROLE, nothing more');
        for (['accountd', 'llmgw_writer'], ['llmgw_ops', 'llmgw_admin']) {
            my ($role, $group) = @$_;
            is(`$psql "SELECT g FROM unnest(ARRAY['llmgw_owner', 'llmgw_writer',
                                                  'llmgw_admin']) g
                        WHERE pg_has_role('$role', g, 'MEMBER') ORDER BY 1"`,
               "$group\n", "$role: a member of $group, not of the other groups");
        }
        is(`$psql "SELECT rolname FROM pg_authid
                    WHERE rolname IN ('accountd', 'llmgw_ops')
                      AND rolpassword LIKE 'SCRAM-SHA-256\$%' ORDER BY 1"`,
           "accountd\nllmgw_ops\n", 'both have a password, SCRAM');
        for my $role (@roles) {
            is(slurp("$dir/roles/$role") =~ s/\n\z//r, $pw{$role},
               "$role: the second start keeps its password file");
        }

        # accountd's container: the roles' passwords into its PGPASSFILE,
        # and the CLI (tenant list) as llmgw_ops with it
        my $conf = slurp("$docker/accountd.conf");
        $conf =~ s{\@postgres:5432/}{\@127.0.0.1:$port/}g;
        $conf =~ s{/var/lib/llmgw/}{$dir/lib/}g;
        open(my $cf, '>', "$dir/accountd.conf") or die;
        print $cf $conf;
        close($cf);
        my ($url) = $conf =~ /^database_url\s*=\s*(\S+)$/m;
        my ($ops_url) = $conf =~ /^admin_database_url\s*=\s*(\S+)$/m;

        my $env = "env -i PATH=$build:/usr/bin:/bin LLMGW_ACCOUNTD_CONF=$dir/accountd.conf"
                . " LLMGW_PG_ROLES_DIR=$dir/roles";
        $o = `$env PGPASSFILE=$dir/accountd.pgpass sh $docker/accountd-entrypoint.sh tenant list 2>&1`;
        is($?, 0, 'accountd-entrypoint.sh: the CLI runs, as llmgw_ops over TCP')
            or diag($o);
        my $pgpass = -f "$dir/accountd.pgpass" ? slurp("$dir/accountd.pgpass") : '';
        is($pgpass, "*:*:*:accountd:$pw{accountd}\n*:*:*:llmgw_ops:$pw{llmgw_ops}\n",
           "its PGPASSFILE: accountd's and llmgw_ops's passwords, not llmgw's");
        my @st = stat("$dir/accountd.pgpass");
        is(@st ? sprintf('%04o', $st[2] & 07777) : '', '0600', 'mode 0600');

        my $as = sub {
            my ($url, $sql, %o) = @_;
            my $pass = $o{password} ? "PGPASSWORD=$o{password}"
                                    : "PGPASSFILE=$dir/accountd.pgpass";
            return `env -i PATH=/usr/bin:/bin $pass psql -X -w -v VERBOSITY=verbose '$url' -Atc '$sql' 2>&1`;
        };
        is($as->($url, 'SELECT current_user'), "accountd\n",
           "database_url: accountd logs in over TCP with its file's password");
        is($as->($ops_url, 'SELECT current_user'), "llmgw_ops\n",
           "admin_database_url: llmgw_ops logs in likewise");
        like($as->($url, 'SELECT 1', password => 'older'),
             qr/password authentication failed for user "accountd"/,
             "accountd: the older volume's password no longer works");
        like($as->($url =~ s{//accountd\@}{//llmgw\@}r, 'SELECT 1'),
             qr/no password supplied/,
             'llmgw over TCP: its password is not there, and TCP asks for it');
        is($as->($url, 'SELECT count(*) FROM llm.tenants'), "0\n",
           'accountd reads the tenants');
        like($as->($url, 'UPDATE llm.usage SET cost_pusd = 0'),
             qr/^ERROR:\s+42501:/m, 'accountd may not UPDATE llm.usage: 42501');
        like($as->($url, "INSERT INTO llm.prices (model, effective_from,"
                         . " input_per_mtok, output_per_mtok, cached_input_per_mtok)"
                         . " VALUES (\$\$m\$\$, current_date, 0, 0, 0)"),
             qr/^ERROR:\s+42501:/m, 'nor INSERT a price: 42501');
        like($as->($ops_url, 'UPDATE llm.usage SET cost_pusd = 0'),
             qr/^ERROR:\s+42501:/m, 'llmgw_ops may not UPDATE llm.usage either');
        like($as->($ops_url, 'CREATE ROLE probe'),
             qr/^ERROR:\s+42501:/m, 'nor make a role: 42501');

        # demo-init's container: prices, tenants and keys as llmgw_ops
        $o = `$env PGPASSFILE=$dir/demo.pgpass LLMGW_DEMO_DIR=$dir/lib sh $docker/demo-init.sh 2>&1`;
        is($?, 0, 'demo-init.sh: the demo made, as llmgw_ops') or diag($o);
        is(-f "$dir/demo.pgpass" ? slurp("$dir/demo.pgpass") : '', $pgpass,
           'its PGPASSFILE: the same two passwords');
        is(`$psql "SELECT string_agg(model, ' ' ORDER BY model) FROM llm.prices"`,
           "mock-claude-3-5-haiku mock-gpt-4o-mini mock-text-embedding-3-small\n",
           'the mock\'s prices');
        is(`$psql "SELECT string_agg(name || ':' || tier, ' ' ORDER BY name)
                     FROM llm.tenants"`,
           "demo-free:free demo-pro:pro\n", 'the demo tenants');
        my $demo = -f "$dir/lib/demo.env" ? slurp("$dir/lib/demo.env") : '';
        like($demo, qr/^LLMGW_FREE_KEY=llmgw_(live|test)_[A-Za-z0-9]{38}$/m,
             'demo.env: the keys');
        like($demo, qr/^LLMGW_ADMIN_DATABASE_URL=\Q$ops_url\E$/m,
             "demo.env: LLMGW_ADMIN_DATABASE_URL, llmgw_ops's, as make run's");
        unlike($demo, qr{//llmgw\@|^LLMGW_DATABASE_URL=}m,
               'and no superuser\'s URL, no accountd\'s');

        # one an older demo-init wrote: the superuser's URL goes, the keys stay
        my ($key) = $demo =~ /^LLMGW_FREE_KEY=(\S+)$/m;
        open(my $df, '>', "$dir/lib/demo.env") or die;
        print $df $demo =~ s{^LLMGW_ADMIN_DATABASE_URL=.*$}
                            {LLMGW_DATABASE_URL=postgresql://llmgw\@postgres:5432/llmgw}mr;
        close($df);
        $o = `$env PGPASSFILE=$dir/demo.pgpass LLMGW_DEMO_DIR=$dir/lib sh $docker/demo-init.sh 2>&1`;
        is($?, 0, 'demo-init.sh again, on an older demo.env') or diag($o);
        $demo = slurp("$dir/lib/demo.env");
        like($demo, qr/^LLMGW_FREE_KEY=\Q$key\E$/m, 'the keys kept');
        like($demo, qr/^LLMGW_ADMIN_DATABASE_URL=\Q$ops_url\E$/m,
             "llmgw_ops's URL in it");
        unlike($demo, qr{//llmgw\@|^LLMGW_DATABASE_URL=}m, "the superuser's gone");
        1;
    } or diag("the entrypoint's test died: $@");

    system("$pg_ctl -m fast -w stop >/dev/null 2>&1");
    waitpid($pid, 0);
    is($? >> 8, 0, 'it stops cleanly, as the server');
}

# --- accountd.conf ---------------------------------------------------------------

# accountd reads its configuration before it looks at the command
{
    my $out = `$build/accountd -c $docker/accountd.conf no-such-command 2>&1`;

    like($out, qr/unknown command "no-such-command"/,
         'accountd.conf: accountd reads it') or diag($out);
}

like(slurp("$docker/accountd.conf"), qr/^metrics_listen\s*=\s*0\.0\.0\.0:8082$/m,
     'accountd.conf: the metrics on 8082, which compose publishes');

# the daemon as accountd, the CLI as llmgw_ops: never the superuser
{
    my $conf = slurp("$docker/accountd.conf");
    my %url = $conf =~ /^\s*((?:admin_)?database_url)\s*=\s*(\S+)\s*$/mg;
    is($url{database_url}, 'postgresql://accountd@postgres:5432/llmgw',
       'accountd.conf: database_url as accountd');
    is($url{admin_database_url}, 'postgresql://llmgw_ops@postgres:5432/llmgw',
       'accountd.conf: admin_database_url as llmgw_ops');
    unlike($conf, qr{^[^#]*//llmgw\@}m, 'accountd.conf: no URL as llmgw');
}

# --- nginx.conf -------------------------------------------------------------------

my $ngx_conf = slurp("$docker/nginx.conf");
my $run_conf = slurp("$top/scripts/nginx.conf.in");

# what make run's defines, the container's must define alike
for my $re (qr/^\s*(llm_gateway_tier\s.*;)$/m, qr/^\s*(llm_gateway_zone\s.*;)$/m,
            qr/^\s*(client_\w+_size\s.*;)$/m, qr/^\s*(proxy_(?!temp)\w+\s.*;)$/m,
            qr/^\s*(worker_\w+\s.*;)$/m, qr/^\s*(keepalive\s.*;)$/m)
{
    my @want = $run_conf =~ /$re/g;
    is_deeply([$ngx_conf =~ /$re/g], \@want, "nginx.conf: as make run's: "
              . join(' / ', @want));
}

my $locations = qr/location\s+(=?\s*\S+)\s*\{\s*([^}]*?)\s*\}/s;
my %run_loc = $run_conf =~ /$locations/g;
my %ngx_loc = $ngx_conf =~ /$locations/g;
for (values %run_loc, values %ngx_loc) {
    s/\s+/ /g;
    s/ ?allow [^;]*;| ?deny [^;]*;//g;
    s/^ //;
}
is_deeply(\%ngx_loc, \%run_loc, 'nginx.conf: the locations of make run: '
          . join(', ', sort keys %run_loc));

like($ngx_conf, qr{^load_module\s+/usr/lib/nginx/modules/ngx_http_llm_gateway_module\.so;}m,
     'nginx.conf: the module where nginx.Dockerfile puts it');
unlike($ngx_conf, qr/^\s*user\s/m, 'nginx.conf: no user, the master is www-data');

# the container's paths and ports, and what runs nginx in the background
# here; each must be in the file
SKIP: {
    skip 'LLMGW_TEST_DIR is not set: nginx.conf is run with make test', 1
        unless $ENV{LLMGW_TEST_DIR} && -f "$ENV{LLMGW_TEST_DIR}/stack.env";

    my $s = stack();
    my $dir = tempdir("$s->{LLMGW_DIR}/docker-nginx.XXXXXX");
    mkdir("$dir/tmp");
    chmod(0777, "$dir/tmp");
    my ($http, $admin) = (LLMGW::Nginx::free_port(), LLMGW::Nginx::free_port());

    my @replace = (
        [ '/usr/lib/nginx/modules/ngx_http_llm_gateway_module.so'
                                      => "$s->{LLMGW_BUILD}/ngx_http_llm_gateway_module.so" ],
        [ '/run/nginx/nginx.pid'       => "$dir/nginx.pid" ],
        [ '/var/lib/llmgw/keys.snapshot' => $s->{LLMGW_KEY_SNAPSHOT} ],
        [ '/var/lib/llmgw/keys.secret' => $s->{LLMGW_KEY_SECRET} ],
        [ '/run/llmgw/accountd.sock'   => $s->{LLMGW_ACCOUNTD_SOCKET} ],
        [ 'mockllm:8090'               => "127.0.0.1:$s->{LLMGW_MOCK_PORT}" ],
        [ 'listen  8080;'              => "listen  127.0.0.1:$http;" ],
        [ 'listen  8081;'              => "listen  127.0.0.1:$admin;" ],
        # here the master is root, whose workers would be nobody's; in
        # the container it is www-data, and so are they
        [ 'daemon            off;'     => "daemon on;
user www-data;" ],
        [ 'error_log         stderr notice;' => "error_log $dir/error.log notice;" ],
        [ 'access_log  /dev/stdout;'   => "access_log $dir/access.log;\n"
              . join('', map { "    ${_}_temp_path $dir/tmp/$_;\n" }
                     qw(client_body proxy fastcgi uwsgi scgi)) ],
    );

    my $conf = $ngx_conf;
    for (@replace) {
        my ($from, $to) = @$_;
        ok($conf =~ s/\Q$from\E/$to/g, "nginx.conf: $from replaced");
    }

    open(my $fh, '>', "$dir/nginx.conf") or die;
    print $fh $conf;
    close($fh);

    my $env = $ENV{LLMGW_NGINX_ENV} ? "env $ENV{LLMGW_NGINX_ENV} " : '';
    my $nginx = "${env}nginx -p $dir -c $dir/nginx.conf -e $dir/error.log";

    # the key comes first: nginx loads the snapshot when it starts
    my $t = new_tenant(tier => 'free');

    my $out = `$nginx -t 2>&1`;
    is($?, 0, 'nginx.conf: nginx -t passes with the module make build built')
        or diag($out);

    $out = `$nginx 2>&1`;
    is($?, 0, 'nginx.conf: nginx starts') or diag($out);

    my $r = http_post("http://127.0.0.1:$http/v1/chat/completions",
                      { model => 'mock-gpt-4o-mini', max_tokens => 20,
                        messages => [ { role => 'user', content => 'Hello' } ] },
                      authorization => "Bearer $t->{key}");
    is($r->{status}, 200, 'a request through it, to mockllm') or diag($r->{content});
    my $row = usage_row($r->{headers}{'x-request-id'} // '');
    is($row && $row->{tenant_id}, $t->{id}, 'and its row in the ledger');

    my $m = HTTP::Tiny->new(timeout => 10)->get("http://127.0.0.1:$admin/metrics");
    is($m->{status}, 200, 'the admin listener answers from 127.0.0.1');
    like($m->{content}, qr/^llmgw_journal_written_total \d+$/m,
         'with the metrics (the healthcheck\'s line)');

    system("$nginx -s quit 2>/dev/null");
    for (1 .. 100 * time_scale()) {
        last unless -f "$dir/nginx.pid";
        sleep(0.05);
    }
    ok(!-f "$dir/nginx.pid", 'nginx.conf: nginx quits');

    my @bad = grep { /\[(alert|emerg|crit)\]|Sanitizer|runtime error/ }
              split(/\n/, -f "$dir/error.log" ? slurp("$dir/error.log") : '');
    is(scalar(@bad), 0, 'no alerts in error.log') or diag(join("\n", @bad));
}

# --- the Grafana dashboard --------------------------------------------------------

my $dash = eval { decode_json(slurp("$docker/grafana/llmgw-dashboard.json")) };
ok($dash, 'dashboard: the JSON parses') or diag($@);
$dash //= {};

cmp_ok($dash->{schemaVersion} // 0, '>=', 36, "dashboard: schemaVersion "
       . ($dash->{schemaVersion} // 'none'));
ok(!defined $dash->{id}, 'dashboard: no id, as an export for import has none');

my ($input) = grep { $_->{name} eq 'DS_PROMETHEUS' } @{ $dash->{__inputs} // [] };
is_deeply($input && { map { $_ => $input->{$_} } qw(type pluginId) },
          { type => 'datasource', pluginId => 'prometheus' },
          'dashboard: the input DS_PROMETHEUS, a Prometheus datasource');

my $ds = { type => 'prometheus', uid => '${DS_PROMETHEUS}' };

# every panel, those of collapsed rows too
my @panels = map { ($_, @{ $_->{panels} // [] }) } @{ $dash->{panels} // [] };
my @ids = map { $_->{id} } @panels;
my %seen;
is_deeply([grep { !defined $_ || $seen{$_}++ } @ids], [],
          'dashboard: ' . scalar(@panels) . ' panels, their ids unique');

# the names a query uses that are neither functions, keywords, label
# names nor durations: metrics
sub metric_names {
    my ($expr) = @_;
    $expr =~ s/"(?:[^"\\]|\\.)*"//g;                # strings
    $expr =~ s/\{[^}]*\}//g;                         # label matchers
    $expr =~ s/\[[^\]]*\]//g;                        # ranges
    $expr =~ s/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)//g;
    $expr =~ s/\b[a-z_]+\s*\(//g;                    # functions
    $expr =~ s/\b(and|or|unless|offset|bool)\b//g;
    $expr =~ s/\b\d[\w.]*//g;                        # numbers, 1e12
    return $expr =~ /([a-zA-Z_:][a-zA-Z0-9_:]*)/g;
}

sub known_metric {
    my ($n) = @_;
    return 1 if $metrics{$n};
    my ($base) = $n =~ /^(.*)_(bucket|sum|count)$/;
    return $base && ($metrics{$base} // '') eq 'histogram';
}

my (%used, @exprs);

for my $p (grep { $_->{type} ne 'row' } @panels) {
    my $what = "panel $p->{id} \"$p->{title}\"";
    is_deeply($p->{datasource}, $ds, "$what: datasource \${DS_PROMETHEUS}");

    my @t = @{ $p->{targets} // [] };
    ok(@t, "$what: has queries");

    for my $t (@t) {
        is_deeply($t->{datasource} // $ds, $ds, "$what: $t->{refId}: its datasource");
        push(@exprs, [ $what, $t->{expr} // '' ]);
    }

    my $g = $p->{gridPos} // {};
    ok($g->{w} && $g->{x} + $g->{w} <= 24, "$what: within the grid's 24 columns");
}

my @vars = @{ $dash->{templating}{list} // [] };
is_deeply([map { $_->{name} } @vars], [qw(tenant tier)],
          'dashboard: variables tenant and tier');

for my $v (@vars) {
    is_deeply($v->{datasource}, $ds, "variable $v->{name}: datasource \${DS_PROMETHEUS}");
    my $q = ref $v->{query} ? $v->{query}{query} : $v->{query};
    like($q, qr/^label_values\(.*\b\Q$v->{name}\E\)$/,
         "variable $v->{name}: the label's values");
    push(@exprs, [ "variable $v->{name}", $q =~ s/^label_values\((.*),\s*\w+\)$/$1/r ]);
}

for (@exprs) {
    my ($what, $expr) = @$_;
    my @names = metric_names($expr);
    ok(@names, "$what: $expr");
    is_deeply([grep { !known_metric($_) } @names], [],
              "$what: names the gateway's metrics only") or diag($expr);
    $used{ s/_(bucket|sum|count)$//r }++ for @names;

    for my $m (grep { my $n = $_; grep { $_ eq $n } @names } @per_tenant) {
        like($expr, qr/\Q$m\E\{[^}]*tenant=~"\$tenant"[^}]*tier=~"\$tier"/,
             "$what: $m filtered by \$tenant and \$tier")
            unless $what =~ /^variable/;
    }
    if ($expr =~ /picodollars/) {
        like($expr, qr{/ 1e12$}, "$what: pico-dollars shown as \$");
    }
}

is_deeply([grep { !$used{$_} } sort keys %metrics], [],
          'dashboard: every metric is on a panel');

done_testing();
