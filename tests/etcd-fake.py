#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A fake etcd for tests/tem-etcd.sh, on 127.0.0.1, a free port printed
on stdout.  Mode "garbage": every POST answered 200 with a body that is
not what etcd's gateway sends (not JSON, wrong types, bad base64, a
truncated object, a watch line of garbage), in turn.  Mode "hang":
connections accepted and read, never answered.  Exits after 60 s at
the latest (the test kills it by PID before)."""
import http.server
import socket
import sys
import threading
import time

BODIES = [
    b"this is not JSON",
    b'{"header":{"revision":"x"}}',
    b'{"header":{},"kvs":[{"key":"!!!!"}]}',
    b'{"header":{"revision":"1"},"kvs":[{"key":"Zm9v"',
    b'{"result":{"header":{},"events":[{"kv":{"key":"Zm9"}}]}}\n',
    b"\x00\xff\xfe garbage \x01",
    b'{"error":{"grpc_code":"x"}}',
    b"[]",
]


class Garbage(http.server.BaseHTTPRequestHandler):
    n = 0
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = BODIES[Garbage.n % len(BODIES)]
        Garbage.n += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def hang():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(128)
    print(s.getsockname()[1], flush=True)
    held = []
    s.settimeout(1)
    end = time.time() + 60
    while time.time() < end:
        try:
            c, _ = s.accept()
            held.append(c)
        except socket.timeout:
            pass


def main():
    if sys.argv[1] == "hang":
        hang()
        return
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Garbage)
    srv.daemon_threads = True
    srv.handle_error = lambda request, address: None   # Resets: expected.
    print(srv.server_address[1], flush=True)
    threading.Timer(60, srv.shutdown).start()
    srv.serve_forever()


main()
