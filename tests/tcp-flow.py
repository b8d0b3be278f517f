#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""TCP traffic for tests/tcp-kernel.sh, with the kernel's own figures.

Run inside a test namespace (tests/ovs-vm-tcp.sh uses it too).
Standard library only.

    tcp-flow.py server --addr A --port P [--reply BYTES --request BYTES]
    tcp-flow.py client --dst A --port P [--conns N] MODE-OPTIONS

The server accepts connections until SIGTERM and reads everything; with
--reply it answers every --request bytes it reads with --reply bytes
(request/response).  It prints "listening" on stderr once it listens.

Client modes (one per run):

  --bytes B [--chunk C --gap-ms G]
        send B bytes on each connection: C bytes at a time with G ms
        between writes (default: all at once, as fast as TCP goes)
  --requests K --request Q --reply R [--gap-ms G]
        K requests of Q bytes, each waiting for its R-byte reply (the
        server must use the same --request and --reply), G ms apart
  --duration S --chunk C --gap-ms G
        as --bytes, for S seconds instead of a byte count

--nodelay sets TCP_NODELAY; --linger-ms M waits M ms before reading the
kernel's figures and closing (lets the last ACKs arrive).

Prints one JSON object on stdout:

    {"t_first": NS, "t_last": NS, "conns": [{"sport": P, "sent": B,
     "ss": {...}}, ...], "retrans_segs": N, "out_segs": N}

t_first/t_last are wall-clock (CLOCK_REALTIME, the monitor's clock)
nanoseconds before the first and after the last write; the client then
waits until everything written is acknowledged (SIOCOUTQ 0); "ss" holds what
`ss -tin` reports for the connection just before it closes ("rtt_ms",
"rttvar_ms", "retrans_total", "segs_out", "wscale_rcv", ...);
retrans_segs and out_segs are the namespace's /proc/net/snmp Tcp
RetransSegs and OutSegs counters over the run (the kernel's count of
retransmitted segments; the namespace has no other TCP traffic).
"""
import argparse
import fcntl
import json
import re
import signal
import socket
import struct
import subprocess
import sys
import termios
import threading
import time


def snmp_tcp():
    with open("/proc/net/snmp") as f:
        lines = [l.split() for l in f if l.startswith("Tcp:")]
    return dict(zip(lines[0][1:], (int(x) for x in lines[1][1:])))


def ss_info(dst, dport, sport):
    """Parses `ss -tin` for one connection into a dict."""
    out = subprocess.run(["ss", "-tinH", "dst", "%s:%d" % (dst, dport),
                          "sport", "= :%d" % sport],
                         capture_output=True, text=True, check=True).stdout
    info = {"raw": " ".join(out.split())}
    m = re.search(r"\brtt:([\d.]+)/([\d.]+)", out)
    if m:
        info["rtt_ms"], info["rttvar_ms"] = float(m[1]), float(m[2])
    m = re.search(r"\bretrans:\d+/(\d+)", out)
    info["retrans_total"] = int(m[1]) if m else 0
    m = re.search(r"\bwscale:(\d+),(\d+)", out)
    if m:
        info["wscale_snd"], info["wscale_rcv"] = int(m[1]), int(m[2])
    for key in ("segs_out", "segs_in", "data_segs_out", "bytes_acked"):
        m = re.search(r"\b%s:(\d+)" % key, out)
        if m:
            info[key] = int(m[1])
    return info


def outq(sock):
    """Bytes written but not yet acknowledged (SIOCOUTQ)."""
    return struct.unpack("i", fcntl.ioctl(sock, termios.TIOCOUTQ,
                                          b"\0" * 4))[0]


def recv_exact(sock, n):
    got = 0
    while got < n:
        data = sock.recv(n - got)
        if not data:
            return False
        got += len(data)
    return True


def serve(conn, args):
    with conn:
        if args.reply:
            reply = b"r" * args.reply
            while recv_exact(conn, args.request):
                conn.sendall(reply)
        else:
            while conn.recv(1 << 16):
                pass


def server(args):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((args.addr, args.port))
    ls.listen(64)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    sys.stderr.write("listening\n")
    sys.stderr.flush()
    while True:
        conn, _ = ls.accept()
        threading.Thread(target=serve, args=(conn, args),
                         daemon=True).start()


def run_conn(sock, args, result):
    gap = args.gap_ms / 1000.0
    if args.requests:
        req = b"q" * args.request
        for _ in range(args.requests):
            sock.sendall(req)
            if not recv_exact(sock, args.reply):
                raise OSError("server closed during a reply")
            result["sent"] += len(req)
            if gap:
                time.sleep(gap)
        return
    chunk = args.chunk or args.bytes
    buf = b"d" * chunk
    end = time.monotonic() + args.duration if args.duration else None
    left = args.bytes
    while (end is not None and time.monotonic() < end) \
            or (end is None and left > 0):
        n = chunk if end is not None else min(chunk, left)
        sock.sendall(buf[:n])
        result["sent"] += n
        left -= n
        if gap:
            time.sleep(gap)


def client(args):
    before = snmp_tcp()
    socks, results = [], []
    for _ in range(args.conns):
        s = socket.create_connection((args.dst, args.port), timeout=30)
        if args.nodelay:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        socks.append(s)
        results.append({"sport": s.getsockname()[1], "sent": 0})
    t_first = time.time_ns()
    threads = [threading.Thread(target=run_conn, args=(s, args, r))
               for s, r in zip(socks, results)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    t_last = time.time_ns()
    # Everything written acknowledged (else the kernel would go on sending
    # and retransmitting after close, into the next test's time).
    deadline = time.monotonic() + 60
    for s in socks:
        while outq(s) and time.monotonic() < deadline:
            time.sleep(0.001)
        if outq(s):
            raise OSError("data still unacknowledged after 60 s")
    time.sleep(args.linger_ms / 1000.0)
    for s, r in zip(socks, results):
        r["ss"] = ss_info(args.dst, args.port, r["sport"])
    for s in socks:
        s.close()
    after = snmp_tcp()
    json.dump({"t_first": t_first, "t_last": t_last, "conns": results,
               "retrans_segs": after["RetransSegs"] - before["RetransSegs"],
               "out_segs": after["OutSegs"] - before["OutSegs"]},
              sys.stdout, sort_keys=True)
    sys.stdout.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="role", required=True)
    sp = sub.add_parser("server")
    sp.add_argument("--addr", required=True)
    sp.add_argument("--port", type=int, required=True)
    sp.add_argument("--request", type=int, default=0)
    sp.add_argument("--reply", type=int, default=0)
    cp = sub.add_parser("client")
    cp.add_argument("--dst", required=True)
    cp.add_argument("--port", type=int, required=True)
    cp.add_argument("--conns", type=int, default=1)
    cp.add_argument("--bytes", type=int, default=0)
    cp.add_argument("--chunk", type=int, default=0)
    cp.add_argument("--gap-ms", type=float, default=0)
    cp.add_argument("--duration", type=float, default=0)
    cp.add_argument("--requests", type=int, default=0)
    cp.add_argument("--request", type=int, default=100)
    cp.add_argument("--reply", type=int, default=100)
    cp.add_argument("--nodelay", action="store_true")
    cp.add_argument("--linger-ms", type=float, default=200)
    args = ap.parse_args()
    if args.role == "server":
        if bool(args.reply) != bool(args.request):
            ap.error("--reply and --request go together")
        server(args)
    else:
        if not (args.bytes or args.requests or args.duration):
            ap.error("one of --bytes, --requests, --duration")
        client(args)


if __name__ == "__main__":
    try:
        main()
    except OSError as e:
        sys.stderr.write("tcp-flow.py: %s\n" % e)
        sys.exit(1)
