# SPDX-License-Identifier: Apache-2.0
"""Protobuf encoded and decoded by hand, for tests that must not use the
protobuf-c code under test (tests/tem-wire.py, tests/tem-limits.py,
tests/fuzz/make-corpus.py): varints and length-delimited fields, and the
Frame of proto/trumpet.proto."""


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_varint(num, value):
    return varint(num << 3) + varint(value)


def field_bytes(num, data):
    if isinstance(data, str):
        data = data.encode()
    return varint(num << 3 | 2) + varint(len(data)) + data


def frame(version, *messages):
    """A Frame: its version and its messages (each an encoded Message)."""
    out = field_varint(1, version)
    for m in messages:
        out += field_bytes(2, m)
    return out


def read_varint(data, i):
    """The varint at data[i:] and the index past it."""
    n = shift = 0
    while True:
        b = data[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def parse(data):
    """Decodes one protobuf message into {field: [values]}."""
    fields, i = {}, 0
    while i < len(data):
        key, i = read_varint(data, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = read_varint(data, i)
        elif wt == 2:
            n, i = read_varint(data, i)
            v, i = data[i:i + n], i + n
        elif wt == 1:
            v, i = data[i:i + 8], i + 8
        elif wt == 5:
            v, i = data[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wt)
        fields.setdefault(num, []).append(v)
    return fields
