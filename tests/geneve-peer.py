#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A user-space Geneve tunnel endpoint: TAP devices <-> Geneve over UDP.

Used by tests/ovs-overlay.sh as the remote hypervisor's end of Geneve
tunnels where the kernel has no Geneve device (CONFIG_GENEVE unset).
Standard library only.

    geneve-peer.py --local ADDR --remote ADDR --tap NAME:VNI [--tap ...]
                   [--port 6081]

Creates one TAP device per --tap in the current network namespace (no
offloads, no virtio header: every frame whole, checksums as the kernel
computed them), prints "ready" on stdout, then relays until SIGTERM or
SIGINT: an Ethernet frame read from TAP NAME goes out as one Geneve
packet (RFC 8926: version 0, no options, protocol 0x6558, the VNI of
NAME) in a UDP datagram from LOCAL:PORT to REMOTE:PORT; a Geneve packet
received on LOCAL:PORT from REMOTE with a known VNI and protocol 0x6558
has its options skipped and its inner frame written to that VNI's TAP.
The UDP socket is the kernel's: the outer checksum is real (also over
IPv6).  The caller may move the TAP devices to other namespaces after
"ready" (the file descriptors stay attached): the UDP socket stays here.

On exit prints one JSON object: per VNI, frames encapsulated ("tx") and
decapsulated ("rx"), and the datagrams dropped ("bad": unknown VNI or
protocol, short, from another address, TAP down).
"""
import argparse
import fcntl
import ipaddress
import json
import os
import select
import signal
import socket
import struct
import sys

TUNSETIFF = 0x400454ca
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000
ETH_P_TEB = 0x6558


def tap_open(name):
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF,
                struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
    return fd


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--local", required=True)
    ap.add_argument("--remote", required=True)
    ap.add_argument("--port", type=int, default=6081)
    ap.add_argument("--tap", action="append", required=True)
    args = ap.parse_args()

    local = ipaddress.ip_address(args.local)
    remote = ipaddress.ip_address(args.remote)
    family = socket.AF_INET if local.version == 4 else socket.AF_INET6
    sock = socket.socket(family, socket.SOCK_DGRAM)
    sock.bind((str(local), args.port))
    sock.setblocking(False)

    taps = {}                   # fd -> VNI
    by_vni = {}                 # VNI -> fd
    stats = {}
    for spec in args.tap:
        name, vni = spec.rsplit(":", 1)
        vni = int(vni)
        fd = tap_open(name)
        os.set_blocking(fd, False)
        taps[fd] = vni
        by_vni[vni] = fd
        stats[vni] = {"tap": name, "tx": 0, "rx": 0}
    bad = 0

    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(True))
    print("ready", flush=True)

    dest = (str(remote), args.port)
    while not stop:
        try:
            ready, _, _ = select.select([sock.fileno()] + list(taps), [], [],
                                        0.2)
        except InterruptedError:
            continue
        for fd in ready:
            if fd == sock.fileno():
                while True:
                    try:
                        data, peer = sock.recvfrom(65535)
                    except BlockingIOError:
                        break
                    if ipaddress.ip_address(peer[0].split("%")[0]) \
                            != remote or len(data) < 8:
                        bad += 1
                        continue
                    opt_len = (data[0] & 0x3f) * 4
                    proto = struct.unpack("!H", data[2:4])[0]
                    vni = int.from_bytes(data[4:7], "big")
                    if data[0] >> 6 != 0 or proto != ETH_P_TEB \
                            or vni not in by_vni or len(data) < 8 + opt_len:
                        bad += 1
                        continue
                    try:
                        os.write(by_vni[vni], data[8 + opt_len:])
                    except OSError:         # The TAP is down.
                        bad += 1
                        continue
                    stats[vni]["rx"] += 1
            else:
                while True:
                    try:
                        frame = os.read(fd, 65535)
                    except BlockingIOError:
                        break
                    except OSError:         # The TAP was deleted.
                        del taps[fd]
                        break
                    vni = taps[fd]
                    head = struct.pack("!BBH", 0, 0, ETH_P_TEB) \
                        + vni.to_bytes(3, "big") + b"\0"
                    sock.sendto(head + frame, dest)
                    stats[vni]["tx"] += 1

    json.dump({"vnis": {str(v): s for v, s in stats.items()}, "bad": bad},
              sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
