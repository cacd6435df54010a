#!/usr/bin/perl

# accountd's sustained ingest rate: BENCH_RECORDS settle records (200,000)
# sent over its socket as fast as it takes them, as a gateway's workers
# would, and the time until the last is acknowledged, which accountd does
# once PostgreSQL has committed it (synchronous_commit on, fsync as the
# stack has it).  The records' model has a price, as a model in
# production has, unless BENCH_PRICED=0 (then every cost is NULL).
# Prints records/s committed, the CPU a record of accountd and of its
# PostgreSQL backend, the records a commit (from accountd's log) and the
# WAL a record, and writes them to build/bench/ingest-<time>.json.  Run by
# `make bench-ingest` through bench/with-stack.  No figure is a pass or a
# fail; the run fails if a record is not acknowledged or has no row.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../t/lib", "$FindBin::Bin/lib";

use Bench;
use IO::Select;
use IO::Socket::UNIX;
use LLMGW;
use Socket qw(SOCK_STREAM);
use Time::HiRes qw(time);

my $s = bench_stack();
my $n = $ENV{BENCH_RECORDS} // 200_000;
my $t = new_tenant(tier => 'bench');
my $log = "$s->{LLMGW_DIR}/accountd.log";

bench_price() if $ENV{BENCH_PRICED} // 1;
my $tck = clk_tck();

# frames of the settle record, version 2 (core/llm_record.h)
my $now = int(time() * 1000);
my @frames;
for my $i (1 .. $n) {
    my $p = pack('C C n N q> q> Q> Q> Q> Q> Q> Q> q> C',
                 2, 1, 200, 0, $t->{id}, 0, 20, 16, 0, 0, 0, 80, $now, 1)
          . pack('C/a* C/a* C/a*', "ingest-$$-$i", 'mock-bench', 'stop');
    push(@frames, pack('N', length $p) . $p);
}

my $c = IO::Socket::UNIX->new(Type => SOCK_STREAM,
                              Peer => $s->{LLMGW_ACCOUNTD_SOCKET})
    or die "connect to accountd: $!";
$c->blocking(0);

my $be = accountd_backend();
my $acd = pidfile("$s->{LLMGW_DIR}/accountd.pid");
my ($lsn0) = db()->selectrow_array('SELECT pg_current_wal_lsn()');
my $log0 = -s $log // 0;
my %cpu0 = (accountd => ticks($acd), backend => ticks($be));

my $sel = IO::Select->new($c);
my ($out, $in, $sent, $acked) = ('', '', 0, 0);
my $t0 = time();
my $deadline = $t0 + 300;

while ($acked < $n && time() < $deadline) {
    # a few hundred kilobytes in flight at most, as a worker's buffer
    while ($sent < $n && length($out) < 65536) {
        $out .= $frames[$sent++];
    }

    my ($r, $w) = IO::Select->select($sel, length $out ? $sel : undef,
                                     undef, 1);

    if ($w && @$w) {
        my $k = syswrite($c, $out);
        substr($out, 0, $k, '') if $k;
    }

    if ($r && @$r) {
        my $k = sysread($c, $in, 65536, length $in);
        die "accountd closed the connection after $acked acks\n"
            if defined $k && $k == 0;

        while (length($in) >= 4) {
            my $len = unpack('N', $in);
            last if length($in) < 4 + $len;
            my (undef, $type) = unpack('C C', substr($in, 4, 2));
            $acked++ if $type == 2;
            substr($in, 0, 4 + $len, '');
        }
    }
}

my $secs = time() - $t0;
my %cpu = (accountd => ticks($acd) - $cpu0{accountd},
           backend => ticks($be) - $cpu0{backend});

my ($wal) = db()->selectrow_array(
    'SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), ?)', undef, $lsn0);
my ($rows, $priced) = db()->selectrow_array(
    'SELECT count(*), count(cost_pusd) FROM llm.usage WHERE tenant_id = ?',
    undef, $t->{id});
my @batches = batches($log, $log0);

my %f = (
    records_per_s => $acked / $secs,
    accountd_us   => $cpu{accountd} / $tck * 1e6 / ($acked || 1),
    backend_us    => $cpu{backend} / $tck * 1e6 / ($acked || 1),
    per_commit    => $acked / (@batches || 1),
    wal_bytes     => $wal / ($acked || 1),
);

printf("ingest: %d records acknowledged in %.2f s: %.0f records/s "
       . "committed\n", $acked, $secs, $f{records_per_s});
printf("  CPU a record: accountd %.1f µs, its PostgreSQL backend %.1f µs\n",
       $f{accountd_us}, $f{backend_us});
printf("  %.0f records a commit (%d commits, the largest %d), WAL %.0f "
       . "bytes a record\n", $f{per_commit}, scalar @batches,
       (sort { $b <=> $a } @batches, 0)[0], $f{wal_bytes});
printf("  %d rows in llm.usage, %d with a cost\n", $rows, $priced);

# the target: records acknowledged after their commit, fsync on
my @t = ([ 'records a second committed', '>= 200000', $f{records_per_s},
           $f{records_per_s} >= 200_000 ]);
print_targets('%-40s %10s %10.0f', @t);

my ($json, $stamp) = json_file('ingest');
write_json($json, {
    when => $stamp, records => $n, acknowledged => $acked, secs => $secs,
    priced => $ENV{BENCH_PRICED} // 1, rows => $rows, rows_priced => $priced,
    commits => scalar @batches, figures => \%f,
    targets => targets_json(
        @t,
        [ 'accountd CPU a record (µs)', '', $f{accountd_us}, undef ],
        [ 'PostgreSQL backend CPU a record (µs)', '', $f{backend_us},
          undef ],
        [ 'records a commit', '', $f{per_commit}, undef ],
        [ 'WAL a record (bytes)', '', $f{wal_bytes}, undef ]) });

exit($acked == $n && $rows == $n ? 0 : 1);


# the sizes of the batches accountd committed since offset (verbose 1)
sub batches {
    my ($file, $offset) = @_;
    open(my $fh, '<', $file) or return;
    seek($fh, $offset, 0);
    my @n = map { /batch of (\d+) records committed/ ? $1 : () } <$fh>;
    close($fh);
    return @n;
}
