# SPDX-License-Identifier: Apache-2.0
"""A classic pcap reader for the test helpers, standard library only.

Shared by tests/pcap-volume.py, tests/overlay-truth.py,
tests/vhost-check.py and tests/vm-tcp-check.py, the independent
measurements the monitor's counts are compared with: it
reads files without any libtpm code.  Each script imports it from its
own folder (Python puts a script's folder first on sys.path).

records(path, linktypes, bad_linktype) yields (link type, wire length,
captured bytes) of each record of a classic pcap file: microsecond or
nanosecond timestamps, either byte order; with with_time=True, (time in
ns since the epoch, link type, wire length, captured bytes).  A file that is not classic
pcap, has a link type not in 'linktypes' (the message is 'bad_linktype'
% the link type) or ends inside a record raises ValueError naming the
file.

ethernet_payload(data) skips an Ethernet header and its 802.1Q/802.1ad
tags: it returns (EtherType, offset of the payload).
"""
import struct

LINKTYPE_ETHERNET = 1
LINKTYPE_LINUX_SLL = 113


def records(path, linktypes, bad_linktype, with_time=False):
    with open(path, "rb") as f:
        head = f.read(24)
        if len(head) < 24:
            raise ValueError("%s: not a pcap file (too short)" % path)
        magic = head[:4]
        if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
            order = "<"
        elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
            order = ">"
        else:
            raise ValueError("%s: not a classic pcap file (magic %s)"
                             % (path, magic.hex()))
        frac_ns = 1 if magic in (b"\x4d\x3c\xb2\xa1",
                                 b"\xa1\xb2\x3c\x4d") else 1000
        linktype = struct.unpack(order + "I", head[20:24])[0] & 0xffff
        if linktype not in linktypes:
            raise ValueError("%s: %s" % (path, bad_linktype % linktype))
        while True:
            rec = f.read(16)
            if not rec:
                return
            if len(rec) < 16:
                raise ValueError("%s: truncated record header" % path)
            sec, frac, caplen, wirelen = struct.unpack(order + "IIII", rec)
            data = f.read(caplen)
            if len(data) < caplen:
                raise ValueError("%s: truncated record" % path)
            if with_time:
                yield (sec * 1000000000 + frac * frac_ns, linktype, wirelen,
                       data)
            else:
                yield linktype, wirelen, data


def ethernet_payload(data):
    off, ethertype = 14, data[12:14]
    while ethertype in (b"\x81\x00", b"\x88\xa8") and len(data) >= off + 4:
        ethertype, off = data[off + 2:off + 4], off + 4
    return ethertype, off
