/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the packet parser (lib/packet.h).
 *
 * Input: 2 bytes that choose the length on the wire (bit 15 clear: the
 * captured length plus the low 15 bits; set: the low 15 bits as they
 * are, possibly less than the captured length), then the frame.
 *
 * Checks, on every input:
 *   - the inline parser (tpm_packet_parse_counted(), whose IPv4 fast path
 *     takes the common frames) and the full parser agree on the result,
 *     the whole key and every per-packet variable, and count the same;
 *   - tpm_packet_parse_hash() agrees too, and its hash is the key's;
 *   - when the fast path alone takes the frame, it writes what the full
 *     parser writes;
 *   - neither touches the monitor's variables ('pkt->v');
 *   - a frame that is not parsed has an all-zero key;
 *   - a parsed key comes back from tpm_frame_build() and a new parse;
 *   - the key formatting functions stay within their buffers;
 *   - with tunnel ports (VXLAN 4789, Geneve 6081), the three parsers
 *     agree and count the same, a frame not decapsulated parses as
 *     without them, a decapsulated one has a 24-bit VNI, tenant slot 0
 *     and an IP key, and a frame not parsed is counted once.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "fuzz-util.h"
#include "packet.h"

static bool
pkt_equal(const struct tpm_pkt *a, const struct tpm_pkt *b)
{
    return tpm_key_equal(&a->key, &b->key) && a->hash == b->hash
           && a->bytes == b->bytes && a->volume == b->volume
           && a->seq == b->seq && a->ack == b->ack && a->rwnd == b->rwnd
           && a->ttl == b->ttl && a->tos == b->tos
           && a->tcp_flags == b->tcp_flags && a->wscale == b->wscale
           && a->mss == b->mss && a->tunnel.type == b->tunnel.type
           && a->tunnel.vni == b->tunnel.vni
           && a->tunnel.inner_off == b->tunnel.inner_off;
}

static bool
vars_untouched(const struct tpm_pkt *p)
{
    const uint8_t *v = (const uint8_t *) &p->v;
    for (size_t i = 0; i < sizeof p->v; i++) {
        if (v[i] != 0x5a) {
            return false;
        }
    }
    return true;
}

static void
check_key_roundtrip(const struct tpm_pkt *p)
{
    static const struct tpm_key zero;
    uint8_t frame[256];
    struct tpm_pkt q;

    uint32_t len = tpm_frame_build(frame, sizeof frame, &p->key, 0);
    FUZZ_CHECK(len, "tpm_frame_build() refused a parsed key");
    FUZZ_CHECK(tpm_packet_parse(frame, len, len, &q),
               "a built frame does not parse");
    FUZZ_CHECK(tpm_key_equal(&q.key, &p->key),
               "tpm_frame_build() does not give the key back");

    /* Formatting, with the full mask and with none. */
    char buf[TPM_KEY_STRLEN];
    struct tpm_key_field fields[TPM_KEY_FIELDS_MAX];
    struct tpm_key mask;
    memset(&mask, 0xff, sizeof mask);
    mask.tun = 0;
    tpm_key_format(&p->key, buf, sizeof buf);
    FUZZ_CHECK(memchr(buf, '\0', sizeof buf), "key format not terminated");
    int n = tpm_key_fields(&mask, &p->key, p->tunnel.vni, fields);
    FUZZ_CHECK(n >= 0 && n <= 5, "%d key fields", n);
    n = tpm_key_fields(&zero, &p->key, 0, fields);
    FUZZ_CHECK(n >= 0 && n <= 5, "%d key fields", n);
}

/* The checks with tunnel ports, given the parse without them ('r_full',
 * 'full'). */
static void
check_tunnels(const uint8_t *data, uint32_t caplen, uint32_t wirelen,
              bool r_full, const struct tpm_pkt *full)
{
    static const struct tpm_key zero;
    static struct tpm_tunnel_ports tun;
    struct tpm_parse_stats st_full, st_fast, st_hash;
    struct tpm_pkt tfull, tfast, thash;

    if (!tun.n) {
        tpm_tunnel_ports_add(&tun, 4789, TPM_TUN_VXLAN);
        tpm_tunnel_ports_add(&tun, 6081, TPM_TUN_GENEVE);
    }
    memset(&st_full, 0, sizeof st_full);
    memset(&st_fast, 0, sizeof st_fast);
    memset(&st_hash, 0, sizeof st_hash);
    memset(&tfull, 0x5a, sizeof tfull);
    memset(&tfast, 0x5a, sizeof tfast);
    memset(&thash, 0x5a, sizeof thash);
    bool r = tpm_packet_parse_full_tun(data, caplen, wirelen, &tfull,
                                       &st_full, &tun);
    bool r_fast = tpm_packet_parse_counted_tun(data, caplen, wirelen, &tfast,
                                               &st_fast, &tun);
    bool r_hash = tpm_packet_parse_hash_tun(data, caplen, wirelen, &thash,
                                            &st_hash, &tun);
    FUZZ_CHECK(r == r_fast && r == r_hash, "tunnels: full %d, inline %d, "
               "hashing %d", r, r_fast, r_hash);
    FUZZ_CHECK(pkt_equal(&tfull, &tfast), "tunnels: inline and full parses "
               "differ");
    FUZZ_CHECK(!memcmp(&st_full, &st_fast, sizeof st_full)
               && !memcmp(&st_full, &st_hash, sizeof st_full),
               "tunnels: the parsers count differently");
    FUZZ_CHECK(vars_untouched(&tfull) && vars_untouched(&tfast)
               && vars_untouched(&thash), "tunnels: the parser wrote pkt->v");
    if (!r) {
        FUZZ_CHECK(tpm_key_equal(&tfull.key, &zero) && !tfull.tunnel.type
                   && !tfull.tunnel.vni && !tfull.tunnel.inner_off
                   && tfull.bytes == wirelen,
                   "tunnels: a frame not parsed has a key or a tunnel");
        FUZZ_CHECK(tpm_parse_stats_not_parsed(&st_full) == 1,
                   "tunnels: a frame not parsed counted %llu times",
                   (unsigned long long) tpm_parse_stats_not_parsed(
                       &st_full));
        return;
    }
    FUZZ_CHECK(thash.hash == (tfull.tunnel.type ? 0
                              : tpm_key_hash(&tfull.key)),
               "tunnels: hash (a decapsulated frame's waits for its "
               "tenant)");
    thash.hash = tfull.hash;
    FUZZ_CHECK(pkt_equal(&thash, &tfull), "tunnels: hashing parse differs");
    FUZZ_CHECK(!tfull.key.tun, "tunnels: tenant slot %u", tfull.key.tun);
    if (tfull.tunnel.type == TPM_TUN_NONE) {
        FUZZ_CHECK(r_full && pkt_equal(&tfull, full),
                   "tunnels: a frame not decapsulated parses otherwise");
        FUZZ_CHECK(st_full.tun_decapsulated == 0, "tunnels: counted as "
                   "decapsulated");
    } else {
        FUZZ_CHECK(tfull.tunnel.type == TPM_TUN_VXLAN
                   || tfull.tunnel.type == TPM_TUN_GENEVE, "tun_type %u",
                   tfull.tunnel.type);
        FUZZ_CHECK(tfull.tunnel.vni <= 0xffffff, "vni %#x",
                   tfull.tunnel.vni);
        FUZZ_CHECK(tfull.tunnel.inner_off < caplen, "inner_off %u past %u",
                   tfull.tunnel.inner_off, caplen);
        FUZZ_CHECK(r_full && full->key.proto == 17
                   && tpm_tunnel_ports_lookup(&tun, full->key.dport)
                      == tfull.tunnel.type, "tunnels: decapsulated a frame "
                   "that is not a datagram to its port");
        FUZZ_CHECK(st_full.tun_decapsulated == 1, "tunnels: decapsulated "
                   "frame not counted");
    }
}

/* tpm_packet_parse_v4__() without tunnel ports into 'pkt' (filled with
 * 0x5a first, so that a field left unwritten shows), the key's words 0, 2
 * and 4 into 'w'. */
static enum tpm_fast_parse
fast_v4(const uint8_t *data, uint32_t caplen, uint32_t wirelen,
        struct tpm_pkt *pkt, uint64_t w[3], bool all_fields, bool vars)
{
    memset(pkt, 0x5a, sizeof *pkt);
    return tpm_packet_parse_v4__(data, caplen, wirelen, NULL, pkt, &w[0],
                                 &w[1], &w[2], all_fields, vars);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct tpm_key zero;

    if (size < 2) {
        return 0;
    }
    uint16_t w = data[0] | data[1] << 8;
    data += 2;
    size -= 2;
    uint32_t caplen = size;
    uint32_t wirelen = w & 0x8000 ? w & 0x7fff : caplen + w;

    struct tpm_parse_stats st_fast, st_full;
    struct tpm_pkt fast, full, hashed;
    memset(&st_fast, 0, sizeof st_fast);
    memset(&st_full, 0, sizeof st_full);
    memset(&fast, 0x5a, sizeof fast);
    memset(&full, 0x5a, sizeof full);
    memset(&hashed, 0x5a, sizeof hashed);

    bool r_fast = tpm_packet_parse_counted(data, caplen, wirelen, &fast,
                                           &st_fast);
    bool r_full = tpm_packet_parse_full(data, caplen, wirelen, &full,
                                        &st_full);
    bool r_hash = tpm_packet_parse_hash(data, caplen, wirelen, &hashed,
                                        NULL);

    FUZZ_CHECK(r_fast == r_full, "inline %d, full %d", r_fast, r_full);
    FUZZ_CHECK(r_hash == r_full, "hashing %d, full %d", r_hash, r_full);
    FUZZ_CHECK(pkt_equal(&fast, &full), "inline and full parses differ");
    FUZZ_CHECK(!memcmp(&st_fast, &st_full, sizeof st_fast),
               "inline and full parses count differently");
    FUZZ_CHECK(vars_untouched(&fast) && vars_untouched(&full)
               && vars_untouched(&hashed), "the parser wrote pkt->v");
    FUZZ_CHECK(fast.bytes == wirelen, "bytes %u, wire length %u",
               fast.bytes, wirelen);

    /* The IPv4 fast path on its own: when it takes the frame, it writes
     * exactly what the full parser does. */
    struct tpm_pkt v4;
    uint64_t hw[3];
    enum tpm_fast_parse r_v4 = fast_v4(data, caplen, wirelen, &v4, hw, true,
                                       true);
    if (r_v4 == TPM_FAST_PLAIN) {
        v4.hash = 0;
        FUZZ_CHECK(r_full && pkt_equal(&v4, &full),
                   "the IPv4 fast path and the full parser differ");
        const tpm_key_word *k = (const tpm_key_word *) &full.key;
        FUZZ_CHECK(hw[0] == k[0] && hw[1] == k[2] && hw[2] == k[4],
                   "the fast path's hash words are not the key's");
    }

    /* The monitor's copy, which leaves the fields only TCP has unwritten
     * for UDP, and the tunnel for every frame: the same otherwise. */
    struct tpm_pkt v4u;
    uint64_t u[3];
    FUZZ_CHECK(fast_v4(data, caplen, wirelen, &v4u, u, false, true) == r_v4,
               "the IPv4 fast path without UDP's TCP fields differs");
    if (r_v4 == TPM_FAST_PLAIN) {
        v4u.hash = 0;
        if (v4u.key.proto != 6) {
            v4u.seq = full.seq;
            v4u.ack = full.ack;
            v4u.tcp_flags = full.tcp_flags;
            v4u.rwnd = full.rwnd;
            v4u.wscale = full.wscale;
            v4u.mss = full.mss;
        }
        v4u.tunnel = full.tunnel;
        FUZZ_CHECK(pkt_equal(&v4u, &full) && !memcmp(u, hw, sizeof hw),
                   "the IPv4 fast path without UDP's TCP fields differs");
    }

    /* The monitor's copy that reads no variable: the same key, hash words
     * and bytes, the variables from 'volume' to 'tos' zero. */
    struct tpm_pkt v4k;
    uint64_t x[3];
    FUZZ_CHECK(fast_v4(data, caplen, wirelen, &v4k, x, false, false) == r_v4,
               "the IPv4 fast path without variables takes other frames");
    if (r_v4 == TPM_FAST_PLAIN) {
        FUZZ_CHECK(tpm_key_equal(&v4k.key, &full.key)
                   && v4k.bytes == full.bytes && !memcmp(x, hw, sizeof hw)
                   && !v4k.volume && !v4k.seq && !v4k.ack && !v4k.rwnd
                   && !v4k.ttl && !v4k.tos,
                   "the IPv4 fast path without variables differs");
    }

    if (r_full) {
        uint32_t h = hashed.hash;
        hashed.hash = full.hash;
        FUZZ_CHECK(pkt_equal(&hashed, &full), "hashing parse differs");
        FUZZ_CHECK(h == tpm_key_hash(&full.key), "hash %#x, key hash %#x",
                   h, tpm_key_hash(&full.key));
        FUZZ_CHECK(h == tpm_key_hash(&full.key)
                   && (tpm_key_hash_hw
                       ? h == tpm_key_hash_crc32c(&full.key)
                       : h == tpm_key_hash_portable(&full.key)),
                   "inline and out-of-line hashes differ");
        FUZZ_CHECK(full.key.ipver == 4 || full.key.ipver == 6,
                   "parsed with IP version %u", full.key.ipver);
        FUZZ_CHECK(!full.key.tun, "tenant slot %u", full.key.tun);
        FUZZ_CHECK(full.wscale == TPM_WSCALE_NONE
                   || full.wscale <= TPM_WSCALE_MAX, "wscale %u",
                   full.wscale);
        check_key_roundtrip(&full);
    } else {
        FUZZ_CHECK(tpm_key_equal(&full.key, &zero),
                   "a frame not parsed has a key");
        FUZZ_CHECK(tpm_parse_stats_not_parsed(&st_full) == 1,
                   "a frame not parsed counted %llu times",
                   (unsigned long long) tpm_parse_stats_not_parsed(
                       &st_full));
    }
    check_tunnels(data, caplen, wirelen, r_full, &full);
    return 0;
}
