#!/usr/bin/perl

# nginx's own refusals on the gateway's server, as shipped
# (scripts/nginx.conf.in: error_page ... /.llm-gateway-error, a location
# with llm_gateway_error):
# the OpenAI error object in JSON with the right status and an
# x-request-id, never nginx's HTML page.  Each status is provoked as a
# client would: a bad header, a URI or a header too long, a body over
# client_max_body_size, an unknown transfer encoding.  A header too large
# (494) is sent as 400, as error_page makes it; 411 is nginx's answer to
# HTTP/2 and WebDAV requests only, and is not sent here.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";

use IO::Socket::INET;
use IO::Select;
use JSON::PP;
use LLMGW;
use Test::More;
use Time::HiRes qw(time);

my $s = stack();
my $t = new_tenant(tier => 'free');

my $ng = LLMGW::Nginx->demo()->run();

sub raw {
    my ($req) = @_;
    my $c = IO::Socket::INET->new(PeerAddr => '127.0.0.1',
                                  PeerPort => $ng->port)
        or die "connect: $!";
    $c->syswrite($req);
    my $sel = IO::Select->new($c);
    my $raw = '';
    my $deadline = time() + 10;
    while ((my $left = $deadline - time()) > 0) {
        last unless $sel->can_read($left);
        last unless $c->sysread($raw, 65536, length $raw);
    }
    close($c);
    return LLMGW::http_parse($raw);
}

my $body = '{"model":"mock-gpt-4o-mini","max_tokens":5,'
           . '"messages":[{"role":"user","content":"hi"}]}';
my $auth = "Authorization: Bearer $t->{key}\r\n";
my $post = "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n"
           . "Connection: close\r\nContent-Type: application/json\r\n";

# [ what, request, status, code ]
my @cases = (
    [ 'a duplicate Host',
      "$post${auth}Host: other\r\nContent-Length: " . length($body)
      . "\r\n\r\n$body", 400, 'bad_request' ],
    [ 'a header line without a colon',
      "$post${auth}Bad header line\r\nContent-Length: " . length($body)
      . "\r\n\r\n$body", 400, 'bad_request' ],
    [ 'a URI of 20 kB',
      'POST /v1/chat/completions?' . ('a' x 20000) . " HTTP/1.1\r\n"
      . "Host: gw\r\nConnection: close\r\n\r\n", 414, 'uri_too_long' ],
    [ 'a header of 20 kB',
      "$post${auth}X-Big: " . ('b' x 20000) . "\r\nContent-Length: "
      . length($body) . "\r\n\r\n$body", 400, 'bad_request' ],
    [ 'a body above client_max_body_size',
      "$post${auth}Content-Length: 2000000\r\n\r\n", 413,
      'request_too_large' ],
    [ 'Transfer-Encoding: gzip',
      "$post${auth}Transfer-Encoding: gzip\r\n\r\n", 501, 'not_implemented' ],
);

for my $c (@cases) {
    my ($what, $req, $status, $code) = @$c;
    my $r = raw($req);

    is($r->{status}, $status, "$what: $status");
    like($r->{headers}{'content-type'} // '', qr{^application/json},
         '  application/json');
    my $j = eval { decode_json($r->{body}) } // {};
    is($j->{error}{code}, $code, "  the OpenAI error object, code $code")
        or diag($r->{body});
    ok(defined $j->{error}{message} && defined $j->{error}{type},
       '  with a message and a type');
    like($r->{headers}{'x-request-id'} // '', qr/^[0-9a-f]{32}$/,
         '  and an x-request-id');
    unlike($r->{body}, qr/<html/i, '  no HTML');
}

# the gateway's own answers are not touched
my $r = http_post($ng->url('/v1/chat/completions'), $body,
                  authorization => "Bearer $t->{key}");
is($r->{status}, 200, 'a valid request: 200');
$r = http_post($ng->url('/v1/chat/completions'), $body);
is($r->{status}, 401, 'no key: 401');
is((json_body($r) // {})->{error}{code}, 'invalid_api_key',
   '  the gateway\'s invalid_api_key');

$ng->no_alerts();

done_testing();
