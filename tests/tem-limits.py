#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Peers that try to stall a TEM (tests/tem-limits.sh), on loopback only.

    tem-limits.py idle HOST:PORT N SECONDS
        keeps N TCP connections open for SECONDS, sending nothing, opening
        a new one as soon as the TEM closes one (refused at accept, or
        past its handshake time); prints "opened O closed C" (C: those
        the TEM closed)
    tem-limits.py trickle HOST:PORT N SECONDS --src IP
        N connections from address IP (127.0.0.0/8), each sending the
        start of a GET /metrics and then one byte of header every 200 ms,
        never ending the headers, for SECONDS; prints "opened O closed C
        first-close-after S" (connections the server closed)
    tem-limits.py scrape URL TIMEOUT
        one GET with a TIMEOUT (seconds); prints "ok MS" and exits 0, or
        "FAIL: ..." and exits 1
    tem-limits.py host ENDPOINT COUNT COUNT2
        a host "flood" (no keys: the TEM runs --insecure-plaintext) that
        says Hello for 10.99.0.0/24, acknowledges its Installs, then sends
        one satisfaction above any threshold for each of COUNT keys of the
        first event installed (recent epochs x addresses of the prefix) in
        frames of 100, prints "sent COUNT", and heartbeats until it is
        stopped; on SIGUSR1 it sends COUNT2 more (once)
    tem-limits.py sub ENDPOINT SLEEP QUIET
        subscribes to every alert with a queue of 10 messages and small
        socket buffers, prints "ready", reads nothing for SLEEP seconds,
        then reads until QUIET seconds pass without an alert, prints
        "drained", and reads again until QUIET seconds pass without an
        alert; prints "delivered N gaps G" (G: alerts missing between the
        seq numbers received)

Uses python3-zmq for the ZeroMQ peers.
"""
import importlib
import json
import signal
import socket
import sys
import time

import zmq

from pbwire import field_bytes, field_varint, frame, parse

# tests/tem-wire.py's Hello and Satisfaction.
wire = importlib.import_module("tem-wire")

EPOCH_NS = 10_000_000


def host_port(arg):
    host, port = arg.rsplit(":", 1)
    return host, int(port)


def idle(addr, n, secs):
    socks, opened, closed = [], 0, 0
    end = time.time() + secs
    while time.time() < end:
        while len(socks) < n:
            s = socket.socket()
            s.settimeout(1)
            try:
                s.connect(addr)
            except OSError:
                s.close()
                continue
            s.setblocking(False)
            socks.append(s)
            opened += 1
        for s in list(socks):
            try:
                if s.recv(1) == b"":
                    raise ConnectionResetError
            except BlockingIOError:
                continue
            except OSError:
                pass
            closed += 1
            socks.remove(s)
            s.close()
        # Not faster: the machine runs other tests.
        time.sleep(0.25)
    print("opened %d closed %d" % (opened, closed), flush=True)


def trickle(addr, n, secs, src):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind((src, 0))
        s.settimeout(1)
        try:
            s.connect(addr)
            s.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        except OSError:
            s.close()
            continue
        socks.append(s)
    opened, closed, first = len(socks), 0, None
    start = time.time()
    end = start + secs
    while socks and time.time() < end:
        for s in list(socks):
            try:
                s.send(b"X")
                s.setblocking(False)
                try:
                    if s.recv(4096) == b"":
                        raise ConnectionResetError
                except BlockingIOError:
                    continue
                finally:
                    s.setblocking(True)
            except OSError:
                pass
            closed += 1
            first = first or time.time() - start
            socks.remove(s)
            s.close()
        time.sleep(0.2)
    print("opened %d closed %d first-close-after %.1f"
          % (opened, closed, first or -1), flush=True)


def scrape(url, timeout):
    import urllib.request
    t0 = time.time()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            body = r.read()
    except OSError as e:
        print("FAIL: scrape %s: %s after %.2f s" % (url, e, time.time() - t0))
        sys.exit(1)
    if b"trumpet_tem_alerts_total" not in body:
        print("FAIL: scrape %s: no trumpet_tem_alerts_total" % url)
        sys.exit(1)
    print("ok %d" % ((time.time() - t0) * 1000))


def heartbeat(seq):
    return field_bytes(11, field_varint(1, time.time_ns())
                       + field_varint(2, seq))


def messages(sock, timeout_ms):
    """The messages of the next frame as (body field, fields), or []."""
    if not sock.poll(timeout_ms):
        return []
    out = []
    for m in parse(sock.recv()).get(2, []):
        (num, vals), = parse(m).items()
        out.append((num, parse(vals[0])))
    return out


def send_satisfactions(sock, event_id, count):
    """'count' satisfactions of distinct recent keys, in frames of 100."""
    epoch = time.time_ns() // EPOCH_NS - 1
    batch = []
    for i in range(count):
        addr = bytes([10, 99, 0, i % 256])
        batch.append(wire.satisfaction(event_id, addr, 1e12,
                                       epoch=epoch - i // 256))
        if len(batch) == 100 or i == count - 1:
            sock.send(frame(1, *batch))
            batch = []


def host(endpoint, count, count2):
    sock = zmq.Context().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(endpoint)
    sock.send(frame(1, wire.hello(1, 1, "flood", EPOCH_NS)))
    event_id, hb, deadline = None, 0, time.time() + 10
    while event_id is None:
        if time.time() > deadline:
            print("FAIL: no Welcome and Install within 10 s")
            sys.exit(1)
        for num, f in messages(sock, 200):
            if num == 3:                # Refuse
                print("FAIL: refused: %r" % f)
                sys.exit(1)
            if num == 4:                # Install: Ack it.
                event_id = f[2][0]
                sock.send(frame(1, field_bytes(6, field_varint(1, f[1][0])
                                               + field_varint(2, event_id))))
    again = []
    signal.signal(signal.SIGUSR1, lambda *_: again.append(True))
    send_satisfactions(sock, event_id, count)
    print("sent %d" % count, flush=True)
    while True:
        if again and count2:
            send_satisfactions(sock, event_id, count2)
            print("sent %d" % count2, flush=True)
            count2 = 0
        hb += 1
        sock.send(frame(1, heartbeat(hb)))
        for num, f in messages(sock, 300):
            if num == 4:
                sock.send(frame(1, field_bytes(6, field_varint(1, f[1][0])
                                               + field_varint(2, f[2][0]))))


def sub(endpoint, sleep, quiet):
    sock = zmq.Context().socket(zmq.SUB)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVHWM, 10)
    sock.setsockopt(zmq.RCVBUF, 4096)
    sock.setsockopt(zmq.SUBSCRIBE, b"")
    sock.connect(endpoint)
    time.sleep(0.5)
    print("ready", flush=True)
    time.sleep(sleep)
    n, gaps, last = 0, 0, 0
    for phase in ("drained", None):
        while sock.poll(int(quiet * 1000)):
            sock.recv()                 # Topic.
            seq = json.loads(sock.recv()).get("seq", 0)
            n += 1
            if last and seq > last + 1:
                gaps += seq - last - 1
            last = seq
        if phase:
            print(phase, flush=True)
    print("delivered %d gaps %d" % (n, gaps), flush=True)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "idle":
        idle(host_port(args[0]), int(args[1]), float(args[2]))
    elif cmd == "trickle":
        trickle(host_port(args[0]), int(args[1]), float(args[2]), args[4])
    elif cmd == "scrape":
        scrape(args[0], float(args[1]))
    elif cmd == "host":
        host(args[0], int(args[1]), int(args[2]))
    elif cmd == "sub":
        sub(args[0], float(args[1]), float(args[2]))
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
