#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Talks to a TEM's host socket at the wire level, as a misbehaving host.

    tem-wire.py ENDPOINT CASE [--server-key KEY --key-file FILE]
                [--host-id ID] [--mb N] [--count N]

Encodes protobuf by hand (tests/pbwire.py: varints and length-delimited
fields, following proto/trumpet.proto), independently of the protobuf-c
code the TEM and the agent use, and checks what the TEM answers:

    garbage         random bytes and a truncated Hello: no answer is
                    expected; the TEM counts them (checked by the caller)
    version         Hello for versions 99..99: a Refuse whose reason
                    names both version ranges
    epoch           Hello with 20 ms epochs: a Refuse naming the epoch
    hello           a valid Hello: a Welcome with version 1 and a
                    heartbeat; then a Satisfaction with an unknown event
                    id and one with a 5-byte address (invalid): the session
                    survives (a Heartbeat is still answered by the TEM's
                    own heartbeats / no Bye)
    seq             a Hello of versions 1..3 with an agent instance: a
                    Welcome with version 3; then Satisfactions (unknown
                    event id) numbered 1 (late), 1 again (a duplicate), 3
                    (2 skipped), and two invalid ones (seq 0, late without
                    seq): a Heartbeat whose 'received' is 3

Attacks (tests/tem-security.sh):

    claim           Hello as --host-id, which the key is not bound to,
                    then a Satisfaction of value 9.99e12 for event id 1:
                    a Refuse naming the key's host id is expected
    silent          Hello as --host-id and the same Satisfaction, from a
                    peer the TEM must not even answer (no key, or a key
                    not in its allow-list): no answer within 2 s
    oversized       --count frames of --mb MB sent at once

With --server-key (the TEM's public key, Z85 or a key file) and
--key-file (a key pair from tem-ctl keygen) the socket is a CURVE client.

Prints one line "ok: ..." and exits 0, or prints the problem and exits 1.
Uses python3-zmq.
"""
import argparse
import struct
import sys
import time

import zmq

from pbwire import field_bytes, field_varint, frame, parse, varint


def hello(vmin, vmax, host, epoch_ns, instance=None):
    body = (field_varint(1, vmin) + field_varint(2, vmax)
            + field_bytes(3, host)
            + field_bytes(4, field_varint(1, 4) + field_bytes(2, bytes([10, 99, 0, 0]))
                          + field_varint(3, 24))
            + field_varint(5, epoch_ns) + field_varint(6, time.time_ns()))
    if instance is not None:
        body += field_varint(9, instance)       # Hello.instance
    return field_bytes(1, body)         # Message.hello = 1


def satisfaction(event_id, addr, value=0.0, seq=None, late=None,
                 epoch=1000):
    key = (field_varint(1, 4) + field_bytes(2, addr) + field_bytes(3, addr)
           + field_varint(4, 1) + field_varint(5, 2) + field_varint(6, 17))
    body = (field_varint(1, event_id) + field_varint(2, epoch)
            + field_bytes(3, key) + varint(4 << 3 | 1)
            + struct.pack("<d", value))
    if seq is not None:
        body += field_varint(8, seq)            # Satisfaction.seq
    if late is not None:
        body += field_varint(9, int(late))      # Satisfaction.late
    return field_bytes(8, body)         # Message.satisfaction = 8


def read_key(arg, name):
    """A Z85 key given as is, or the NAME line of a key file."""
    if len(arg) == 40 and not arg.startswith("/"):
        return arg.encode()
    for line in open(arg):
        k, _, v = line.partition("=")
        if k.strip() == name:
            return v.strip().strip('"').encode()
    fail("no %s in %s" % (name, arg))


def answers(sock, timeout_ms=2000):
    """Returns the messages of the next frame as (body field, fields)."""
    if not sock.poll(timeout_ms):
        return None
    f = parse(sock.recv())
    out = []
    for m in f.get(2, []):
        body = parse(m)
        (num, vals), = body.items()
        out.append((num, parse(vals[0])))
    return out


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("endpoint")
    ap.add_argument("case")
    ap.add_argument("--server-key")
    ap.add_argument("--key-file")
    ap.add_argument("--host-id", default="h1")
    ap.add_argument("--mb", type=int, default=1)
    ap.add_argument("--count", type=int, default=1)
    args = ap.parse_args()
    endpoint, case = args.endpoint, args.case
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 2000)
    if args.server_key:
        sock.curve_serverkey = read_key(args.server_key, "public-key")
        sock.curve_publickey = read_key(args.key_file, "public-key")
        sock.curve_secretkey = read_key(args.key_file, "secret-key")
    sock.connect(endpoint)
    forged = satisfaction(1, bytes([10, 99, 0, 2]), 9.99e12)
    if case == "claim":
        sock.send(frame(1, hello(1, 1, args.host_id, 10_000_000)))
        got = answers(sock, 5000)
        if not got or got[0][0] != 3:   # Message.refuse = 3
            fail("expected Refuse, got %r" % (got,))
        reason = got[0][1][1][0].decode()
        if "bound to this connection's key" not in reason:
            fail("Refuse reason %r" % reason)
        sock.send(frame(1, forged))
        answers(sock, 500)
        print("ok: refused: " + reason)
    elif case == "silent":
        sock.send(frame(1, hello(1, 1, args.host_id, 10_000_000), forged))
        got = answers(sock, 2000)
        if got is not None:
            fail("the TEM answered: %r" % (got,))
        print("ok: no answer")
    elif case == "oversized":
        big = bytes(args.mb << 20)
        for _ in range(args.count):
            sock.send(big, copy=False)
        time.sleep(1)
        print("ok: sent %d frames of %d MB" % (args.count, args.mb))
    elif case == "garbage":
        sock.send(b"\xff\x00garbage\x13\x37" * 3)
        sock.send(frame(1, hello(1, 1, "g1", 10_000_000))[:-5])
        print("ok: sent 2 invalid frames")
    elif case in ("version", "epoch"):
        v, ep = (99, 10_000_000) if case == "version" else (1, 20_000_000)
        sock.send(frame(v, hello(v, v, "bad-" + case, ep)))
        got = answers(sock)
        if not got:
            fail("no answer to the Hello")
        num, f = got[0]
        if num != 3:                    # Message.refuse = 3
            fail("expected Refuse, got body field %d" % num)
        reason = f[1][0].decode()
        want = (["99..99", "1..4"] if case == "version"
                else ["20ms", "10ms"])
        for w in want:
            if w not in reason:
                fail("Refuse reason %r does not name %r" % (reason, w))
        print("ok: refused: " + reason)
    elif case == "hello":
        sock.send(frame(1, hello(1, 1, "wire1", 10_000_000)))
        got = answers(sock)
        if not got or got[0][0] != 2:   # Message.welcome = 2
            fail("expected Welcome, got %r" % (got,))
        f = got[0][1]
        if f[1][0] != 1 or f[4][0] <= 0:
            fail("Welcome version %r heartbeat %r" % (f[1], f[4]))
        sock.send(frame(1, satisfaction(4242, bytes([10, 99, 0, 2])),
                        satisfaction(1, bytes([10, 99, 0, 2, 9]))))
        # The session survives: the TEM's next heartbeat (or any message)
        # comes, and no Bye.
        deadline = time.time() + 5
        while time.time() < deadline:
            got = answers(sock, 500)
            for num, _ in got or []:
                if num == 12:           # Message.bye
                    fail("the TEM said Bye after the invalid messages")
                if num == 11:           # Message.heartbeat
                    sock.send(frame(1, field_bytes(12, b"")))   # Bye
                    print("ok: welcomed, session alive after invalid "
                          "messages")
                    return
        fail("no heartbeat from the TEM within 5 s")
    elif case == "seq":
        sock.send(frame(3, hello(1, 3, "wire2", 10_000_000, instance=77)))
        got = answers(sock)
        if not got or got[0][0] != 2:   # Message.welcome = 2
            fail("expected Welcome, got %r" % (got,))
        if got[0][1][1][0] != 3:
            fail("Welcome version %r, expected 3" % got[0][1][1])
        a = bytes([10, 99, 0, 2])
        sock.send(frame(3, satisfaction(4242, a, seq=1, late=True),
                        satisfaction(4242, a, seq=1, late=True),
                        satisfaction(4242, a, seq=3, late=False),
                        satisfaction(4242, a, seq=0),
                        satisfaction(4242, a, late=True)))
        deadline = time.time() + 5
        while time.time() < deadline:
            for num, f in answers(sock, 500) or []:
                if num == 12:           # Message.bye
                    fail("the TEM said Bye")
                if num == 11 and 4 in f:        # Heartbeat.received
                    if f[4][0] != 3:
                        fail("received %d, expected 3" % f[4][0])
                    sock.send(frame(3, field_bytes(12, b"")))   # Bye
                    print("ok: version 3, received 3 confirmed")
                    return
        fail("no Heartbeat with 'received' from the TEM within 5 s")
    else:
        fail("unknown case " + case)


if __name__ == "__main__":
    main()
