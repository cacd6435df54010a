#!/usr/bin/perl

# accountd's own metrics (metrics_listen): every line of a scrape parsed
# strictly as the Prometheus text format 0.0.4; the record counters move
# by exactly what was sent through the real socket, and only once the
# commit returned (llm.usage locked meanwhile: the records are received
# and queued, none committed); the queue drains to 0; leases move the
# lease counters; other paths are 404 and other methods 405; and clients
# of the metrics port that send nothing, up to its limit of connections,
# hold up no record and are closed after 5 s.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use DBI;
use IO::Select;
use IO::Socket::INET;
use IO::Socket::UNIX;
use LLMGW;
use Socket qw(SOCK_STREAM);
use Test::More;
use Time::HiRes qw(sleep time);

my $s = stack();
my $port = $s->{LLMGW_ACCOUNTD_METRICS_PORT}
    or plan(skip_all => 'the stack has no LLMGW_ACCOUNTD_METRICS_PORT');
my $scale = time_scale();
my $tag = "t033-$$";
my $t = new_tenant();

# what accountd says it exports: name => type
my %want = (
    records_received_total  => 'counter',
    records_committed_total => 'counter',
    records_rejected_total  => 'counter',
    records_dropped_total   => 'counter',
    queue_records           => 'gauge',
    batches_total           => 'counter',
    batch_records           => 'histogram',
    db_roundtrip_seconds    => 'histogram',
    db_connected            => 'gauge',
    db_reconnects_total     => 'counter',
    clients                 => 'gauge',
    leases_granted_total    => 'counter',
    leases_refused_total    => 'counter',
    lease_picodollars_total => 'counter',
    keysets_pushed_total    => 'counter',
    peers_refused_total     => 'counter',
    start_time_seconds      => 'gauge',
    info                    => 'gauge',
);

# the limits of the metrics listener (accountd/metrics.c)
my $conn_max = 8;
my $timeout = 5;


# --- a scrape ----------------------------------------------------------------

my $m0 = scrape('the first scrape');

is_deeply({ map { $_ => $m0->{type}{"llmgw_accountd_$_"} } keys %want },
          \%want, 'every metric, with its type');
is(scalar(keys %{ $m0->{type} }), scalar(keys %want), 'and no other');

my ($version) = `$s->{LLMGW_BUILD}/accountd -V` =~ /accountd (\S+)/;
is(v($m0, 'info', version => $version), 1, "info{version=\"$version\"} 1");
is(v($m0, 'db_connected'), 1, 'connected to PostgreSQL');
is(v($m0, 'queue_records'), 0, 'nothing queued');
ok(v($m0, 'start_time_seconds') > 1.7e9
   && v($m0, 'start_time_seconds') <= time(), 'a start time, in the past');
is(v($m0, 'records_received_total'),
   v($m0, 'records_committed_total') + v($m0, 'records_rejected_total')
   + v($m0, 'records_dropped_total') + v($m0, 'queue_records'),
   'received = committed + rejected + dropped + queued');

my $head = http("HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
is($head->{status}, 200, 'HEAD /metrics: 200');
is($head->{body}, '', '  without a body');
ok($head->{headers}{'content-length'} > 1000, '  with its length');

is(http("GET /metrics?x=1 HTTP/1.0\r\n\r\n")->{status}, 200,
   'a query string is ignored');


# --- what is not /metrics, or not GET ----------------------------------------

for my $c (
    [ "GET / HTTP/1.1\r\n\r\n",             404, qr/^not found/,   '/' ],
    [ "GET /metricsx HTTP/1.1\r\n\r\n",     404, qr/^not found/,   '/metricsx' ],
    [ "GET /metrics/ HTTP/1.1\r\n\r\n",     404, qr/^not found/,   '/metrics/' ],
    [ "POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
                                            405, qr/^method not/,  'POST' ],
    [ "DELETE /metrics HTTP/1.1\r\n\r\n",   405, qr/^method not/,  'DELETE' ],
    [ "get /metrics HTTP/1.1\r\n\r\n",      405, qr/^method not/,  'get' ],
    [ "HELLO\r\n\r\n",                      400, qr/^bad request/, 'no target' ],
    [ "GET /metrics\r\n\r\n",               400, qr/^bad request/, 'HTTP/0.9' ],
    [ "GET /metrics SPDY/3\r\n\r\n",        400, qr/^bad request/, 'SPDY/3' ],
    [ "GET /metrics HTTP/1.1\r\nX: " . 'a' x 5000 . "\r\n\r\n",
                                            431, qr/^request too/, '5 KB' ],
) {
    my ($req, $status, $body, $name) = @$c;
    my $r = http($req);
    is($r->{status}, $status, "$name: $status");
    like($r->{body}, $body, '  said in plain text');
    like($r->{headers}{'content-type'} // '', qr{^text/plain;},
         '  text/plain');
    is($r->{headers}{allow}, 'GET, HEAD', '  Allow: GET, HEAD')
        if $status == 405;
}


# --- records: counted received, then committed, once the commit returned ----

my $c = records_client();
my $m = wait_scrape(sub { v($_[0], 'clients') == v($m0, 'clients') + 1 });
is(v($m, 'clients'), v($m0, 'clients') + 1, 'a worker connected: clients + 1');
$m = wait_scrape(sub { pump($c); v($_[0], 'keysets_pushed_total')
                                   > v($m0, 'keysets_pushed_total') });
ok(v($m, 'keysets_pushed_total') > v($m0, 'keysets_pushed_total'),
   'it was pushed a key set');

my $silent = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                   PeerPort => $port)
    or die "connect to $port: $!";
my $silent_at = time();

my $n = 200;
my $lock = DBI->connect("dbi:Pg:dbname=llmgw;host=127.0.0.1;"
                        . "port=$s->{LLMGW_PG_PORT}", 'llmgw', '',
                        { RaiseError => 1, AutoCommit => 0, PrintError => 0 });
$lock->do('LOCK TABLE llm.usage IN EXCLUSIVE MODE');

my $m1 = scrape('before the records');
send_all($c, join('', map { settle("$tag-$_") } 1 .. $n));

$m = wait_scrape(sub { d($_[0], $m1, 'records_received_total') == $n });
is(d($m, $m1, 'records_received_total'), $n,
   "$n records sent: records_received_total + $n");
is(v($m, 'queue_records'), $n, "queue_records $n while llm.usage is locked");
is(d($m, $m1, 'records_committed_total'), 0, 'none committed');
is(d($m, $m1, 'batches_total'), 0, 'no batch committed');

my $held = time();
sleep(0.5);
$lock->rollback();
$held = time() - $held;

is(scalar(grep { $_->{type} == 2 } frames($c, 2, $n)), $n,
   "$n ACKs once llm.usage is free");

my $m2 = wait_scrape(sub { v($_[0], 'queue_records') == 0 });
is(v($m2, 'queue_records'), 0, 'queue_records back to 0');
is(d($m2, $m1, 'records_received_total'), $n, "received + $n");
is(d($m2, $m1, 'records_committed_total'), $n, "committed + $n");
is(d($m2, $m1, 'records_rejected_total'), 0, 'rejected + 0');
my $batches = d($m2, $m1, 'batches_total');
ok($batches >= 1 && $batches <= $n, "$batches batches committed");
is(d($m2, $m1, 'batch_records_count'), $batches, '  batch_records_count');
is(d($m2, $m1, 'batch_records_sum'), $n, "  batch_records_sum + $n");
is(d($m2, $m1, 'db_roundtrip_seconds_count'), $batches,
   '  db_roundtrip_seconds_count');
ok(d($m2, $m1, 'db_roundtrip_seconds_sum') >= $held - 0.1,
   sprintf('  db_roundtrip_seconds_sum + %.3f: the %.3f s locked too',
           d($m2, $m1, 'db_roundtrip_seconds_sum'), $held));
ok(d($m2, $m1, 'db_roundtrip_seconds_bucket', le => '0.25')
   < d($m2, $m1, 'db_roundtrip_seconds_bucket', le => '+Inf'),
   '  one above 0.25 s');
is(usage_count("$tag-%"), $n, "$n rows in llm.usage");

SKIP: {
    skip('slower than the metrics timeout', 1)
        if time() - $silent_at > $timeout - 1;
    ok(!IO::Select->new($silent)->can_read(0),
       'meanwhile a client of the metrics port sent nothing, and stays');
}


# --- replays and refusals ----------------------------------------------------

$m1 = $m2;
send_all($c, settle("$tag-1")                         # the same: a replay
             . settle("$tag-2", output => 6)          # other figures
             . settle("$tag-bad", tenant_id => 2**62)); # no such tenant
is(scalar(grep { $_->{type} == 2 } frames($c, 2, 3)), 3, '3 more ACKs');

$m2 = wait_scrape(sub { v($_[0], 'queue_records') == 0 });
is(d($m2, $m1, 'records_received_total'), 3, 'received + 3');
is(d($m2, $m1, 'records_committed_total'), 1, 'committed + 1: the replay');
is(d($m2, $m1, 'records_rejected_total'), 2,
   'rejected + 2: other figures, and a tenant that is not');
is(d($m2, $m1, 'records_dropped_total'), 0, 'dropped + 0');
is(db()->selectrow_array(
       'SELECT count(*) FROM llm.usage_rejected WHERE request_id IN (?, ?)',
       undef, "$tag-2", "$tag-bad"), 2, '  both in llm.usage_rejected');


# --- leases ------------------------------------------------------------------

my $capped = "$tag-capped";
accountd('tenant', 'create', '--name', $capped, '--tier', 'pro',
         '--daily-cap-usd', '0.000001');
my ($capped_id) = db()->selectrow_array(
    'SELECT tenant_id FROM llm.tenants WHERE name = ?', undef, $capped);

$m1 = $m2;
send_all($c, join('', map { lease_req($capped_id, 400_000) } 1 .. 4));
my @leases = grep { $_->{type} == 7 } frames($c, 7, 4);
is_deeply([ map { $_->{granted} } @leases ], [ 400_000, 400_000, 200_000, 0 ],
          'leases of 400,000 from a cap of 1,000,000 pico-dollars: '
          . '2 whole, the rest, nothing');

$m2 = scrape('after the leases');
is(d($m2, $m1, 'leases_granted_total'), 3, 'leases_granted_total + 3');
is(d($m2, $m1, 'leases_refused_total'), 1, 'leases_refused_total + 1');
is(d($m2, $m1, 'lease_picodollars_total'), 1_000_000,
   'lease_picodollars_total + 1,000,000');
is(d($m2, $m1, 'records_received_total'), 0, 'a lease is not a record');


# --- silent clients: closed after the timeout; the limit; no record waits ---

my $closed = wait_closed($silent, $timeout + 3 * $scale);
ok($closed, 'the silent client is closed');
ok(time() - $silent_at >= $timeout - 0.5,
   sprintf('  after %.1f s, the %d s allowed', time() - $silent_at,
           $timeout));

# the scrapes' connections end as soon as their client has read
sleep(0.2 * $scale);

my @silent = map {
    IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port)
        or die "connect to $port: $!"
} 1 .. $conn_max;
my $opened = time();

my $busy = http('');
is($busy->{status}, 503, "a client more than $conn_max: 503");
like($busy->{body}, qr/^too many connections/, '  said in plain text');

$m1 = $m2;
send_all($c, settle("$tag-busy"));
is(scalar(grep { $_->{type} == 2 } frames($c, 2, 1)), 1,
   "a record is acknowledged while $conn_max silent clients hold the port");
is(usage_count("$tag-busy"), 1, '  and in llm.usage');

SKIP: {
    skip('slower than the metrics timeout', 1)
        if time() - $opened > $timeout - 1;
    ok(!grep({ IO::Select->new($_)->can_read(0) } @silent),
       '  all of them still connected');
}

close($_) for @silent;

$m2 = wait_scrape(sub { 1 });
is(d($m2, $m1, 'records_committed_total'), 1,
   'scrapes again once they left; committed + 1');

close($c->{h});
$m2 = wait_scrape(sub { v($_[0], 'clients') == v($m0, 'clients') });
is(v($m2, 'clients'), v($m0, 'clients'), 'the worker left: clients - 1');
is(v($m2, 'records_received_total'),
   v($m2, 'records_committed_total') + v($m2, 'records_rejected_total')
   + v($m2, 'records_dropped_total') + v($m2, 'queue_records'),
   'received = committed + rejected + dropped + queued');

open(my $fh, '<', "$s->{LLMGW_DIR}/accountd.log") or die "accountd.log: $!";
my $log = do { local $/; <$fh> };
close($fh);
like($log, qr/metrics on http:\/\/127\.0\.0\.1:$port\/metrics/,
     'accountd logged where its metrics are');

done_testing();


# --- the metrics port --------------------------------------------------------

# a raw request (nothing sent if empty); the response read to the
# connection's end, parsed
sub http {
    my ($req) = @_;
    my $h = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port)
        or die "connect to $port: $!";
    syswrite($h, $req) if length $req;

    my $sel = IO::Select->new($h);
    my $deadline = time() + 5 * $scale;
    my $raw = '';

    while ((my $left = $deadline - time()) > 0) {
        last unless $sel->can_read($left);
        last unless sysread($h, $raw, 65536, length $raw);
    }

    close($h);
    return LLMGW::http_parse($raw);
}


sub scrape {
    my ($name) = @_;
    local $Test::Builder::Level = $Test::Builder::Level + 1;

    my $r = http("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    my ($m, $errors) = parse($r->{body});

    if (defined $name) {
        is($r->{status}, 200, "$name: 200");
        is($r->{headers}{'content-type'},
           'text/plain; version=0.0.4; charset=utf-8',
           '  the text format 0.0.4');
        ok($r->{complete}, '  its Content-Length');
        is_deeply($errors, [], '  every line valid');

    } elsif (@$errors) {
        die "a bad scrape: @$errors";

    } elsif ($r->{status} != 200) {
        return undef;
    }

    return $m;
}


# scrapes until one answers and $cond holds of it (5 s): the last
sub wait_scrape {
    my ($cond) = @_;
    my ($m, $last);

    for (1 .. 100 * $scale) {
        $m = scrape();
        $last = $m if $m;
        return $m if $m && $cond->($m);
        sleep(0.05);
    }

    return $last // die 'no scrape answered';
}


# the value of a sample: name without its prefix, then its labels
sub v {
    my ($m, $name, %labels) = @_;
    my $key = series("llmgw_accountd_$name", \%labels);
    return $m->{value}{$key} // die "no sample $key";
}

sub d {
    my ($new, $old, @what) = @_;
    return v($new, @what) - v($old, @what);
}

sub series {
    my ($name, $labels) = @_;
    return $name . '{' . join(',', map { "$_=\"$labels->{$_}\"" }
                                   sort keys %$labels) . '}';
}


# The text format 0.0.4, strictly: lines end in \n; HELP and TYPE once a
# metric and before its samples, whose lines are together; names and
# label names valid, label values quoted with their escapes, values
# numbers, no timestamp (accountd writes none), no series twice; a
# histogram's buckets with increasing le, cumulative, the last +Inf and
# equal to _count, and a _sum.  Returns the samples by series and the
# errors.
sub parse {
    my ($text) = @_;
    my (%type, %help, %value, %done, @errors, $cur);
    my $name_re = qr/[a-zA-Z_:][a-zA-Z0-9_:]*/;
    my $num_re = qr/[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?
                   |[+-]Inf|NaN/x;
    my (%buckets, %parts);

    push(@errors, 'empty') unless length $text;
    push(@errors, 'no newline at the end') unless $text =~ /\n\z/;

    my $ln = 0;

    for my $line (split(/\n/, $text)) {
        $ln++;
        my $err = sub { push(@errors, "line $ln: $_[0]: $line") };

        if ($line =~ /^# (HELP|TYPE) ($name_re) (.*)$/) {
            my ($what, $name, $rest) = ($1, $2, $3);

            if ($cur && $cur ne $name) {
                $done{$cur} = 1;
            }
            $err->("$name after its samples") if $done{$name};
            $cur = $name;

            if ($what eq 'HELP') {
                $err->('HELP twice') if exists $help{$name};
                $err->('bad escape in HELP')
                    if $rest =~ /\\(?![\\n])/;
                $help{$name} = $rest;

            } else {
                $err->('TYPE twice') if exists $type{$name};
                $err->("type $rest")
                    unless $rest =~ /^(counter|gauge|histogram|summary|untyped)$/;
                $type{$name} = $rest;
            }

            next;
        }

        if ($line =~ /^#/ || $line eq '') {
            $err->('a line accountd does not write');
            next;
        }

        my ($name, $labels, $val, $ts) = $line =~
            /^($name_re)(?:\{(.*)\})? ($num_re)(?: (-?\d+))?$/
            or do { $err->('not a sample'); next };

        $err->('a timestamp') if defined $ts;

        my %l;
        if (defined $labels) {
            my $rest = $labels;
            while ($rest =~ s/^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"//) {
                $err->("label $1 twice") if exists $l{$1};
                $l{$1} = $2;
                last if $rest eq '';
                $rest =~ s/^,// or last;
            }
            $err->("labels {$labels}") if $rest ne '';
        }

        (my $family = $name) =~ s/_(bucket|sum|count)$//;
        $family = $name if exists $type{$name} || !exists $type{$family};

        $err->('no TYPE before it') unless exists $type{$family};
        $err->('no HELP before it') unless exists $help{$family};
        $err->("a sample of $family after other metrics")
            if $done{$family} || ($cur // '') ne $family;

        my $hist = ($type{$family} // '') eq 'histogram';

        if ($hist) {
            my ($part) = $name =~ /_(bucket|sum|count)$/;
            if ($name eq $family || !$part) {
                $err->('a histogram sample not _bucket, _sum or _count');

            } elsif ($part eq 'bucket') {
                $err->('a bucket without le') unless defined $l{le};
                push(@{ $buckets{$family} }, [ $l{le}, $val ]);

            } else {
                $err->("a $part with labels") if %l;
                $parts{$family}{$part} = $val;
            }

        } elsif ($name ne $family) {
            $err->("$name is not $family");
        }

        if (($type{$family} // '') eq 'counter' || $hist) {
            $err->('a negative count') if $val =~ /^-|NaN/;
        }

        my $key = series($name, \%l);
        $err->('a series twice') if exists $value{$key};
        $value{$key} = $val;
    }

    for my $f (sort grep { $type{$_} eq 'histogram' } keys %type) {
        my @b = @{ $buckets{$f} // [] };
        my $last = $b[-1] // [ '', 0 ];

        push(@errors, "$f: no buckets") unless @b;
        push(@errors, "$f: the last bucket is not +Inf")
            unless $last->[0] eq '+Inf';
        push(@errors, "$f: no _sum") unless defined $parts{$f}{sum};
        push(@errors, "$f: +Inf is not _count")
            unless ($parts{$f}{count} // -1) == $last->[1];

        for my $i (1 .. $#b) {
            my ($le0, $n0) = @{ $b[$i - 1] };
            my ($le1, $n1) = @{ $b[$i] };
            push(@errors, "$f: le $le1 after $le0")
                unless $le1 eq '+Inf' ? $le0 ne '+Inf' : $le1 > $le0;
            push(@errors, "$f: le $le1 counts $n1, less than $n0")
                if $n1 < $n0;
        }
    }

    return ({ type => \%type, help => \%help, value => \%value }, \@errors);
}


# waits for the peer to close (EOF or reset), up to $wait seconds
sub wait_closed {
    my ($h, $wait) = @_;
    my $sel = IO::Select->new($h);
    my $deadline = time() + $wait;

    while ((my $left = $deadline - time()) > 0) {
        last unless $sel->can_read($left);
        my $r = sysread($h, my $buf, 4096);
        return 1 unless $r;
    }

    return 0;
}


# --- the records socket: frames as core/llm_record.h has them --------------

sub records_client {
    my $h = IO::Socket::UNIX->new(Type => SOCK_STREAM,
                                  Peer => $s->{LLMGW_ACCOUNTD_SOCKET})
        or die "connect to $s->{LLMGW_ACCOUNTD_SOCKET}: $!";
    binmode($h);
    return { h => $h, buf => '' };
}

sub send_all {
    my ($c, $bytes) = @_;

    for (my $off = 0; $off < length($bytes); ) {
        my $w = syswrite($c->{h}, $bytes, length($bytes) - $off, $off);
        die "write: $!" unless $w;
        $off += $w;
    }
}

# a settle record: the tenant's, 10 tokens in and 5 out, unless said
sub settle {
    my ($id, %r) = @_;

    my $p = pack('C C n N q> q> Q> Q> Q> Q> Q> Q> q> C',
                 2, 1, 200, 0, $r{tenant_id} // $t->{id}, $t->{key_id},
                 10, $r{output} // 5, 0, 0, 0, 0, 1795954800123, 1)
          . pack('C/a* C/a* C/a*', $id, 'gpt-4o-mini', 'stop');

    return pack('N', length($p)) . $p;
}

# a lease of a tenant's caps, until the end of the day
sub lease_req {
    my ($tenant, $want) = @_;

    my $p = pack('C C q> q> q> q> C/a*', 2, 6, $tenant, 0, $want, 0,
                 'gpt-4o-mini');

    return pack('N', length($p)) . $p;
}

# reads what has come, without waiting
sub pump {
    my ($c) = @_;
    my $sel = IO::Select->new($c->{h});

    while ($sel->can_read(0)) {
        last unless sysread($c->{h}, $c->{buf}, 65536, length($c->{buf}));
    }
}

# the frames that come within 5 s, until $n of type $type came: ACKs
# (2) as { type, request_id }, lease answers (7) as { type, granted };
# the key sets' (3 to 5) skipped
sub frames {
    my ($c, $type, $n) = @_;
    my $sel = IO::Select->new($c->{h});
    my $deadline = time() + 5 * $scale;
    my (@got, $k);

    for ( ;; ) {
        while (length($c->{buf}) >= 4) {
            my $len = 4 + unpack('N', $c->{buf});
            last if length($c->{buf}) < $len;

            my $f = substr($c->{buf}, 0, $len, '');
            my $ft = unpack('x5 C', $f);

            if ($ft == 2) {
                push(@got, { type => 2,
                             request_id => unpack('C/a', substr($f, 85)) });
            } elsif ($ft == 7) {
                push(@got, { type => 7, granted => unpack('x22 q>', $f) });
            }
        }

        $k = grep { $_->{type} == $type } @got;
        last if $k >= $n;

        my $left = $deadline - time();
        last if $left <= 0 || !$sel->can_read($left);
        last unless sysread($c->{h}, $c->{buf}, 65536, length($c->{buf}));
    }

    return @got;
}

sub usage_count {
    return db()->selectrow_array(
        'SELECT count(*) FROM llm.usage WHERE request_id LIKE ?', undef,
        $_[0]);
}
