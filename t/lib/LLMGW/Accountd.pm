package LLMGW::Accountd;

# Helpers of the accountd tests (t/03x): the stack's environment file, the
# key secret, accountd's log, and a DBI data source from a libpq URL.

use strict;
use warnings;

use Exporter qw(import);
use Test::More;

our @EXPORT = qw(accountd_stack read_env read_secret accountd_log dbi_dsn
                 log_since wait_for usage_count);

my $dbh;                        # accountd_stack's


# The running stack the tests share: its settings (stack.env), what they
# name (accountd, its configuration, the secret, the log) and a DBI handle.
# Skips the whole test when make test did not start one.
sub accountd_stack {
    my $dir = $ENV{LLMGW_TEST_DIR}
        or plan skip_all => 'LLMGW_TEST_DIR is not set: no running stack';

    require DBI;

    my %env = read_env("$dir/stack.env");

    for my $k (qw(LLMGW_DATABASE_URL LLMGW_ACCOUNTD_CONF LLMGW_ACCOUNTD_SOCKET
                  LLMGW_KEY_SNAPSHOT LLMGW_KEY_SECRET LLMGW_BUILD))
    {
        defined $env{$k} or die "$k is missing from $dir/stack.env\n";
    }

    $ENV{LLMGW_DATABASE_URL} = $env{LLMGW_DATABASE_URL};
    # every role logs in with its password: the stack's password file
    $ENV{PGPASSFILE} = $env{LLMGW_PGPASSFILE} if $env{LLMGW_PGPASSFILE};

    # the tests look and set up as the superuser; accountd runs as its role
    $dbh = DBI->connect(dbi_dsn($env{LLMGW_SUPERUSER_URL}
                                // $env{LLMGW_DATABASE_URL}), undef, undef,
                        { RaiseError => 1, PrintError => 0, AutoCommit => 1 });

    return {
        %env,
        accountd => "$env{LLMGW_BUILD}/accountd",
        secret => read_secret($env{LLMGW_KEY_SECRET}),
        log => accountd_log($env{LLMGW_ACCOUNTD_CONF}),
        dbh => $dbh,
    };
}


sub read_env {
    my ($file) = @_;
    my %e;

    open my $fh, '<', $file or die "$file: $!\n";

    while (<$fh>) {
        chomp;
        next if /^\s*(#|$)/;
        my ($k, $v) = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$/
            or next;
        $v =~ s/^'(.*)'$/$1/ or $v =~ s/^"(.*)"$/$1/;
        $e{$k} = $v;
    }

    return %e;
}


# LLMGW_KEY_SECRET is the secret file, or the secret itself, as hex

sub read_secret {
    my ($v) = @_;

    if (-f $v) {
        open my $fh, '<', $v or die "$v: $!";
        local $/;
        $v = <$fh>;
    }

    $v =~ s/\s+//g;

    return pack 'H*', $v;
}


sub accountd_log {
    my ($file) = @_;

    open my $fh, '<', $file or die "$file: $!";

    while (<$fh>) {
        next unless /^\s*logfile\s*=\s*(\S.*?)\s*$/;
        my $path = $1;
        (my $cdir = $file) =~ s{/[^/]*$}{};
        return $path =~ m{^/} ? $path : "$cdir/$path";
    }

    return '';
}


# postgresql://user:pass@host:port/db?host=/socket/dir

sub dbi_dsn {
    my ($url) = @_;

    return "dbi:Pg:$url" unless $url =~ m{^postgres(?:ql)?://};

    my ($auth, $hostport, $db, $query) = $url =~ m{
        ^postgres(?:ql)?://
        (?:([^@/]*)@)?          # user and password
        ([^/?]*)                # host and port
        (?:/([^?]*))?           # database
        (?:\?(.*))?$            # parameters
    }x;

    my %p;
    if (defined $auth) {
        my ($u, $pw) = split /:/, $auth, 2;
        $p{user} = uri_unescape($u);
        $p{password} = uri_unescape($pw) if defined $pw;
    }

    my ($h, $port) = $hostport =~ /^(\[.*\]|[^:]*)(?::(\d+))?$/;
    $p{host} = uri_unescape($h) if defined $h && length $h;
    $p{port} = $port if defined $port;
    $p{dbname} = uri_unescape($db) if defined $db && length $db;

    for (split /&/, $query // '') {
        my ($k, $v) = split /=/, $_, 2;
        $p{$k} = uri_unescape($v // '');
    }

    return 'dbi:Pg:' . join ';', map { "$_=$p{$_}" } sort keys %p;
}


sub uri_unescape {
    my ($s) = @_;
    $s =~ s/%([0-9A-Fa-f]{2})/chr hex $1/ge;
    return $s;
}


sub log_since {
    my ($file, $off) = @_;

    open my $fh, '<', $file or return '';
    seek $fh, $off, 0;
    local $/;
    my $text = <$fh> // '';
    close $fh;

    return $text;
}


# true once $cond->() is, within 5 s; false if not by then

sub wait_for {
    my ($cond) = @_;

    for (1 .. 50) {
        return 1 if $cond->();
        select undef, undef, undef, 0.1;
    }

    return 0;
}


# the llm.usage rows of a request, through accountd_stack's connection

sub usage_count {
    return $dbh->selectrow_array(
        'SELECT count(*) FROM llm.usage WHERE request_id = ?', undef, $_[0]);
}


1;
