# SPDX-License-Identifier: Apache-2.0
"""Protobuf encoded by hand, for tests that must not use the protobuf-c
code under test (tests/tem-wire.py, tests/fuzz/make-corpus.py): varints
and length-delimited fields, and the Frame of proto/trumpet.proto."""


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
