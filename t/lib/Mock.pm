package Mock;

# mockllm on its own, for the tests of the mock itself (t/020, t/021): a
# mock of their own on a free port, a raw HTTP/1.1 client, and expectations
# matched as subsets.  What HTTP::Tiny hides (chunks, the terminating chunk,
# the close, a Content-Length or none) is what these tests look at.
#
# An expectation for match(): a hash or an array is matched key by key,
# element by element (a hash's keys not in it are not looked at), $ABSENT
# says a key must not be there, undef is JSON null, a regexp or a sub checks
# a value, anything else must be equal as a string.

use strict;
use warnings;

use Exporter qw(import);
use File::Temp qw(tempfile);
use IO::Select;
use IO::Socket::INET;
use JSON::PP;
use POSIX qw(WNOHANG);
use Test::More;
use Time::HiRes qw(sleep time);

our @EXPORT = qw($MOCKLLM $ABSENT start_mockllm connect_mockllm send_request
                 read_response fill match differ decode);

our $MOCKLLM = ($ENV{LLMGW_BUILD} // 'build') . '/mockllm';

# in an expectation: the key must not exist
our $ABSENT = \'absent';

my @mocks;                       # for END

# On the stack of make test, a port of this file's block (see LLMGW's
# free_port); alone, any the kernel gives.
sub free_port {
    if ($ENV{LLMGW_TEST_DIR} && -f "$ENV{LLMGW_TEST_DIR}/stack.env") {
        require LLMGW;
        return LLMGW::Nginx::free_port();
    }

    my $probe = IO::Socket::INET->new(LocalAddr => '127.0.0.1',
                                      LocalPort => 0, Proto => 'tcp',
                                      Listen => 1)
        or die "probe socket: $!";
    my $p = $probe->sockport;
    close $probe;

    return $p;
}

# A mockllm with these options, once it answers /health: { pid, port, log
# (its stderr) }.  Killed at the end if still running.
sub start_mockllm {
    my @args = @_;
    my (undef, $log) = tempfile('mockllm-XXXXXX', TMPDIR => 1, UNLINK => 1);

    for my $try (1 .. 5) {
        my $p = free_port();

        my $child = fork // die "fork: $!";

        if ($child == 0) {
            open(STDERR, '>', $log) or die "$log: $!";
            exec($MOCKLLM, '-l', "127.0.0.1:$p", @args)
                or die "exec $MOCKLLM: $!";
        }

        my $m = { pid => $child, port => $p, log => $log };
        my $deadline = time + 3;

        while (time < $deadline) {
            last if waitpid($child, WNOHANG) == $child;

            my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                          PeerPort => $p, Proto => 'tcp');
            if ($s) {
                send_request($s, 'GET', '/health');
                my $res = eval { read_response($s) };
                if ($res && $res->{status} == 200) {
                    push @mocks, $m;
                    return $m;
                }
            }

            sleep 0.05;
        }

        kill 'KILL', $child;
        waitpid($child, 0);
    }

    BAIL_OUT('mockllm did not start');
}


sub connect_mockllm {
    my ($m) = @_;
    my $s = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                  PeerPort => $m->{port}, Proto => 'tcp',
                                  Timeout => 3)
        or die "connect to mockllm: $!";
    return $s;
}


# A body goes with its Content-Type and Content-Length (none if the
# headers say Transfer-Encoding: the body is chunked already); without a
# body, neither.
sub send_request {
    my ($s, $method, $path, $headers, $body) = @_;
    my $req = "$method $path HTTP/1.1\r\nHost: 127.0.0.1\r\n";

    $headers //= {};

    for my $k (sort keys %$headers) {
        $req .= "$k: $headers->{$k}\r\n";
    }

    if (defined $body) {
        $req .= "Content-Type: application/json\r\n";
        $req .= "Content-Length: " . length($body) . "\r\n"
            unless $headers->{'Transfer-Encoding'};
    }

    $req .= "\r\n" . ($body // '');

    while (length $req) {
        my $n = syswrite($s, $req);
        die "write: $!" unless defined $n;
        substr($req, 0, $n, '');
    }
}


# { status, headers (lower case), body, chunks, terminated (the chunk of
# size 0 came) }; $buf: what was read of it already.  Dies after 5 s.
sub read_response {
    my ($s, $buf) = @_;
    my $deadline = time + 5;
    my %res = (status => 0, headers => {}, body => '', chunks => []);

    $buf //= '';

    while ($buf !~ /\r\n\r\n/) {
        fill($s, \$buf, $deadline) or return \%res;
    }

    my ($head, $rest) = split /\r\n\r\n/, $buf, 2;
    my ($line, @lines) = split /\r\n/, $head;

    ($res{status}) = $line =~ m{^HTTP/1\.1 (\d{3}) };
    $buf = $rest;

    for (@lines) {
        my ($k, $v) = /^([^:]+):\s*(.*)$/ or next;
        $res{headers}{lc $k} = $v;
    }

    my $h = $res{headers};

    if (($h->{'transfer-encoding'} // '') eq 'chunked') {
        CHUNK: for ( ;; ) {
            while ($buf !~ /\r\n/) {
                fill($s, \$buf, $deadline) or last CHUNK;
            }

            $buf =~ s/^([0-9a-f]+)\r\n//
                or die "bad chunk: " . substr($buf, 0, 40);
            my $n = hex $1;

            while (length $buf < $n + 2) {
                fill($s, \$buf, $deadline) or last CHUNK;
            }

            if ($n == 0) {
                $res{terminated} = 1;
                last;
            }

            push @{ $res{chunks} }, substr($buf, 0, $n);
            substr($buf, 0, $n + 2, '');
        }

        $res{body} = join '', @{ $res{chunks} };

    } elsif (defined $h->{'content-length'}) {
        while (length $buf < $h->{'content-length'}) {
            fill($s, \$buf, $deadline) or last;
        }

        $res{body} = $buf;

    } else {
        1 while fill($s, \$buf, $deadline);
        $res{body} = $buf;
    }

    return \%res;
}


# reads what came onto $$buf: 0 at the end of the stream
sub fill {
    my ($s, $buf, $deadline) = @_;
    my $left = $deadline - time;

    die "timed out reading a response\n"
        if $left <= 0 || !IO::Select->new($s)->can_read($left);

    my $n = sysread($s, $$buf, 65536, length $$buf);
    return $n ? 1 : 0;
}


# $want is a subset of $got; reports the first difference
sub match {
    my ($got, $want, $name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;
    my $diff = differ($got, $want, '');
    ok(!defined $diff, $name) or diag("$name: $diff");
}


sub differ {
    my ($got, $want, $at) = @_;

    if (!defined $want) {
        return defined $got ? "$at: expected null" : undef;
    }

    if (ref $want eq 'CODE') {
        return $want->($got) ? undef
               : "$at: " . ($got // 'undef') . " is not as expected";
    }

    if (ref $want eq 'Regexp') {
        return defined $got && !ref $got && $got =~ $want
               ? undef : "$at: " . ($got // 'undef') . " !~ $want";
    }

    if (ref $want eq 'HASH') {
        return "$at: not an object" unless ref $got eq 'HASH';

        for my $k (sort keys %$want) {
            if (ref $want->{$k} eq 'SCALAR' && $want->{$k} == $ABSENT) {
                return "$at.$k: present" if exists $got->{$k};
                next;
            }

            return "$at.$k: missing" unless exists $got->{$k};
            my $d = differ($got->{$k}, $want->{$k}, "$at.$k");
            return $d if defined $d;
        }

        return undef;
    }

    if (ref $want eq 'ARRAY') {
        return "$at: not an array" unless ref $got eq 'ARRAY';
        return "$at: " . @$got . " elements, want " . @$want
            unless @$got == @$want;

        for my $i (0 .. $#$want) {
            my $d = differ($got->[$i], $want->[$i], "$at\[$i]");
            return $d if defined $d;
        }

        return undef;
    }

    return "$at: got " . ($got // 'null') . ", want $want"
        unless defined $got && !ref $got && "$got" eq "$want";

    return undef;
}


# JSON, or { invalid_json => the text }: a mismatch that shows the text
sub decode {
    my ($text) = @_;
    my $v = eval { JSON::PP->new->decode($text // '') };
    return $v // { invalid_json => $text };
}


END {
    # waitpid sets $?, the test's exit status
    local $?;

    for my $m (@mocks) {
        if ($m->{pid} && kill 0, $m->{pid}) {
            kill 'KILL', $m->{pid};
            waitpid($m->{pid}, 0);
        }
    }
}

1;
