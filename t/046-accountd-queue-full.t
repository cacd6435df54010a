#!/usr/bin/perl

# accountd's queue full: it stops reading from the clients, and reads
# again once a batch is committed.  The frames it had read and not queued
# are queued then, and go into the next batch at once: a burst just over
# the queue, from a client that then only waits, is all acknowledged.  It
# was not, until some other event woke accountd up (found by
# core/t/sim_protocol.c).  An accountd of its own: the smallest queue,
# batches that take all of it.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use IO::Select;
use IO::Socket::UNIX;
use LLMGW;
use Socket qw(SOCK_STREAM);
use Test::More;
use Time::HiRes qw(sleep time);

my $s = stack();
my $t = new_tenant();
my $dir = "$s->{LLMGW_DIR}/accountd-queue";
my $socket = "$dir/accountd.sock";
my $conf = accountd_conf($dir, 'verbose = 1', 'queue_max = 1000',
                         'batch_max = 4096');

system("$s->{LLMGW_BUILD}/accountd -c $conf -d") == 0
    or BAIL_OUT('accountd did not start');

for (1 .. 50) {
    last if -S $socket;
    sleep(0.1);
}

my $total = 0;

for my $n (1005, 1020, 1040) {
    my $c = IO::Socket::UNIX->new(Type => SOCK_STREAM, Peer => $socket)
        or die "connect to $socket: $!";
    binmode($c);

    my $burst = join('', map {
        frame(request_id => "t046-$$-$n-$_", tenant_id => $t->{id},
              key_id => $t->{key_id}, input => 10, output => 5,
              ts_ms => int(time() * 1000), model => 'gpt-4o-mini')
    } 1 .. $n);

    for (my $off = 0; $off < length($burst); ) {
        my $w = syswrite($c, $burst, length($burst) - $off, $off);
        die "write: $!" unless $w;
        $off += $w;
    }

    is(acks($c, $n), $n, "$n records at once: each acknowledged");
    $total += $n;
    close($c);
}

my ($rows) = db()->selectrow_array(
    'SELECT count(*) FROM llm.usage WHERE request_id LIKE ?', undef,
    "t046-$$-%");
is($rows, $total, "$total rows");

open(my $fh, '<', "$dir/accountd.log") or die "$dir/accountd.log: $!";
my $log = do { local $/; <$fh> };
close($fh);

like($log, qr/queue full \(1000 records\)/, 'the queue was full');
unlike($log, qr/ (FATAL|ERROR) /, 'no error');

if (open($fh, '<', "$dir/accountd.pid")) {
    chomp(my $pid = <$fh> // '');
    close($fh);
    kill('TERM', $pid) if $pid;
    for (1 .. 50) {
        last unless $pid && kill(0, $pid);
        sleep(0.1);
    }
}

done_testing();


# a settle record's frame (core/llm_record.h)
sub frame {
    my (%r) = @_;

    my $p = pack('C C n N q> q> Q> Q> Q> Q> Q> Q> q> C',
                 2, 1, 200, 0, $r{tenant_id}, $r{key_id}, $r{input},
                 $r{output}, 0, 0, 0, 0, $r{ts_ms}, 1)
          . pack('C/a* C/a* C/a*', $r{request_id}, $r{model}, 'stop');

    return pack('N', length($p)) . $p;
}


# the ACKs that come within 5 s, up to $n; the key set's frames skipped
sub acks {
    my ($c, $n) = @_;
    my ($buf, $acks) = ('', 0);
    my $sel = IO::Select->new($c);
    my $deadline = time() + 5;

    while ($acks < $n) {
        my $left = $deadline - time();
        last if $left <= 0 || !$sel->can_read($left);
        last unless sysread($c, $buf, 65536, length($buf));

        while (length($buf) >= 4) {
            my $len = 4 + unpack('N', $buf);
            last if length($buf) < $len;
            $acks++ if unpack('x5 C', $buf) == 2;
            substr($buf, 0, $len, '');
        }
    }

    return $acks;
}
