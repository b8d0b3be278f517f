/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for lib/packet.[ch].
 *
 * Every frame is written byte by byte here (big-endian writers, no use of
 * the parser or of system header structs), with the expected parse stated
 * by hand next to it.  The truncation test parses every prefix of every
 * frame from a malloc()'d buffer of exactly that size, so that valgrind
 * reports any read beyond 'caplen'.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "packet.h"
#include "test-util.h"
#include "util.h"

/* ---------------------------------------------------------------------- */
/* Frame writer. */

struct fb {
    uint8_t b[2048];
    uint32_t n;
};

static void
put8(struct fb *f, uint8_t v)
{
    ck_assert_uint_lt(f->n, sizeof f->b);
    f->b[f->n++] = v;
}

static void
put16(struct fb *f, uint16_t v)
{
    put8(f, (uint8_t) (v >> 8));
    put8(f, (uint8_t) v);
}

static void
put32(struct fb *f, uint32_t v)
{
    put16(f, (uint16_t) (v >> 16));
    put16(f, (uint16_t) v);
}

static void
putn(struct fb *f, const uint8_t *p, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        put8(f, p[i]);
    }
}

/* 'n' payload bytes (a recognisable pattern, never zero). */
static void
payload(struct fb *f, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        put8(f, (uint8_t) (0x41 + i % 26));
    }
}

/* Ethernet header with EtherType 'type'. */
static void
eth(struct fb *f, uint16_t type)
{
    static const uint8_t macs[12] = {
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02,
    };
    putn(f, macs, 12);
    put16(f, type);
}

static const uint8_t ip4_a[4] = { 10, 1, 2, 3 };
static const uint8_t ip4_b[4] = { 192, 168, 0, 77 };
/* 2001:db8::1 and fe80::abcd */
static const uint8_t ip6_a[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0,
                                   0, 0, 0, 0, 0, 0, 0, 1 };
static const uint8_t ip6_b[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0,
                                   0, 0, 0, 0, 0, 0, 0xab, 0xcd };

/* IPv4 header with 'optlen' bytes of options (NOPs, then end). */
static void
ipv4(struct fb *f, uint8_t tos, uint16_t tot, uint16_t frag, uint8_t ttl,
     uint8_t proto, uint32_t optlen)
{
    put8(f, (uint8_t) (0x40 | (5 + optlen / 4)));
    put8(f, tos);
    put16(f, tot);
    put16(f, 0x1234);           /* Identification. */
    put16(f, frag);
    put8(f, ttl);
    put8(f, proto);
    put16(f, 0xbeef);           /* Checksum: not verified. */
    putn(f, ip4_a, 4);
    putn(f, ip4_b, 4);
    for (uint32_t i = 0; i < optlen; i++) {
        put8(f, i == optlen - 1 ? 0 : 1);
    }
}

/* IPv6 header. */
static void
ipv6(struct fb *f, uint8_t tclass, uint16_t plen, uint8_t nh, uint8_t hlim)
{
    put32(f, 6u << 28 | (uint32_t) tclass << 20 | 0x12345);
    put16(f, plen);
    put8(f, nh);
    put8(f, hlim);
    putn(f, ip6_a, 16);
    putn(f, ip6_b, 16);
}

/* TCP header of 'doff' 32-bit words (options: NOPs and a timestamp). */
static void
tcp(struct fb *f, uint16_t sport, uint16_t dport, uint32_t seq, uint32_t ack,
    uint8_t doff, uint8_t flags, uint16_t win)
{
    put16(f, sport);
    put16(f, dport);
    put32(f, seq);
    put32(f, ack);
    put8(f, (uint8_t) (doff << 4));
    put8(f, flags);
    put16(f, win);
    put16(f, 0xcafe);           /* Checksum. */
    put16(f, 0);                /* Urgent pointer. */
    uint32_t optlen = doff * 4 - 20;
    for (uint32_t i = 0; i < optlen; i++) {
        /* NOP NOP, then timestamps (kind 8, length 10), padding NOPs. */
        static const uint8_t ts[12] = { 1, 1, 8, 10, 0, 0, 0, 1,
                                        0, 0, 0, 2 };
        put8(f, i < sizeof ts ? ts[i] : 1);
    }
}

/* TCP header followed by the 'optlen' option bytes 'opts' (a multiple of
 * four). */
static void
tcp_opts(struct fb *f, uint16_t sport, uint16_t dport, uint32_t seq,
         uint32_t ack, uint8_t flags, uint16_t win, const uint8_t *opts,
         uint32_t optlen)
{
    ck_assert_uint_eq(optlen % 4, 0);
    put16(f, sport);
    put16(f, dport);
    put32(f, seq);
    put32(f, ack);
    put8(f, (uint8_t) ((5 + optlen / 4) << 4));
    put8(f, flags);
    put16(f, win);
    put16(f, 0xcafe);
    put16(f, 0);
    putn(f, opts, optlen);
}

static void
udp(struct fb *f, uint16_t sport, uint16_t dport, uint16_t len)
{
    put16(f, sport);
    put16(f, dport);
    put16(f, len);
    put16(f, 0);
}

/* ---------------------------------------------------------------------- */
/* Expected parses. */

struct expect {
    const char *name;
    bool ip;
    uint8_t ipver, proto;
    uint16_t sport, dport;
    uint32_t volume, seq, ack;
    uint16_t rwnd;
    uint8_t ttl, ecn, flags;
    uint8_t wscale;             /* TPM_WSCALE_NONE unless set. */
    uint16_t mss;
    uint32_t wirelen;
    /* Offsets for the truncation test: the frame is IP from
     * 'l3off + l3len' captured bytes on; the L4 protocol is known from
     * 'l4off' on and the L4 fields from 'l4off + l4min' on (l4min 0: the
     * frame carries no parsed L4 header). */
    uint32_t l3off, l3len, l4off, l4min;
    /* SYN options: read only once wholly captured, which they are from
     * 'l4off + l4opt' on (0: no options to read). */
    uint32_t l4opt;
    /* Not parsed (!ip): the reason counted. */
    enum tpm_parse_reason reason;
    /* IPv4 total length 0: taken from the frame (counted). */
    bool len_from_frame;
};

/* Checks a parse against 'e', including addresses (from the frame's wire
 * bytes at 'l3off'). */
static void
check_pkt(const struct fb *f, const struct tpm_pkt *p, bool ret,
          const struct expect *e)
{
    struct tpm_key zero;

    memset(&zero, 0, sizeof zero);
    ck_assert_msg(ret == e->ip, "%s: returned %d", e->name, ret);
    ck_assert_msg(p->bytes == e->wirelen, "%s: bytes %u", e->name, p->bytes);
    ck_assert_msg(p->hash == 0, "%s: hash set", e->name);
    ck_assert_msg(p->key.tun == 0, "%s: tenant slot", e->name);
    ck_assert_msg(p->tunnel.type == TPM_TUN_NONE && p->tunnel.vni == 0
                  && p->tunnel.inner_off == 0, "%s: tunnel fields", e->name);
    if (!e->ip) {
        ck_assert_msg(!memcmp(&p->key, &zero, sizeof zero),
                      "%s: key of non-IP frame not zero", e->name);
        return;
    }
    ck_assert_msg(p->key.ipver == e->ipver, "%s: ipver %u", e->name,
                  p->key.ipver);
    ck_assert_msg(p->key.proto == e->proto, "%s: proto %u", e->name,
                  p->key.proto);
    ck_assert_msg(p->key.sport == e->sport, "%s: sport %u, expected %u",
                  e->name, p->key.sport, e->sport);
    ck_assert_msg(p->key.dport == e->dport, "%s: dport %u, expected %u",
                  e->name, p->key.dport, e->dport);
    ck_assert_msg(p->volume == e->volume, "%s: volume %u, expected %u",
                  e->name, p->volume, e->volume);
    ck_assert_msg(p->seq == e->seq, "%s: seq %#x", e->name, p->seq);
    ck_assert_msg(p->ack == e->ack, "%s: ack %#x", e->name, p->ack);
    ck_assert_msg(p->rwnd == e->rwnd, "%s: rwnd %u", e->name, p->rwnd);
    ck_assert_msg(p->ttl == e->ttl, "%s: ttl %u", e->name, p->ttl);
    ck_assert_msg(tpm_pkt_ce(p) == e->ecn, "%s: tos %#x", e->name, p->tos);
    ck_assert_msg(p->tcp_flags == e->flags, "%s: flags %#x", e->name,
                  p->tcp_flags);
    ck_assert_msg(p->wscale == e->wscale, "%s: wscale %u, expected %u",
                  e->name, p->wscale, e->wscale);
    ck_assert_msg(p->mss == e->mss, "%s: mss %u, expected %u", e->name,
                  p->mss, e->mss);
    if (e->ipver == 4) {
        ck_assert_msg(!memcmp(&p->key.src[0], f->b + e->l3off + 12, 4),
                      "%s: src", e->name);
        ck_assert_msg(!memcmp(&p->key.dst[0], f->b + e->l3off + 16, 4),
                      "%s: dst", e->name);
        for (int i = 1; i < 4; i++) {
            ck_assert_msg(p->key.src[i] == 0 && p->key.dst[i] == 0,
                          "%s: IPv4 address words 1-3 not zero", e->name);
        }
    } else {
        ck_assert_msg(!memcmp(p->key.src, f->b + e->l3off + 8, 16),
                      "%s: src", e->name);
        ck_assert_msg(!memcmp(p->key.dst, f->b + e->l3off + 24, 16),
                      "%s: dst", e->name);
    }
}

/* Parses 'f' (from an exact-size heap copy) and checks it. */
static void
parse_check(const struct fb *f, const struct expect *e)
{
    struct tpm_pkt p;
    uint8_t *buf = malloc(f->n);

    ck_assert_ptr_nonnull(buf);
    memcpy(buf, f->b, f->n);
    memset(&p, 0x5a, sizeof p);
    bool ret = tpm_packet_parse(buf, f->n, e->wirelen, &p);
    check_pkt(f, &p, ret, e);

    /* The same, counted: exactly the expected counters move. */
    struct tpm_parse_stats st, want;
    memset(&st, 0, sizeof st);
    memset(&want, 0, sizeof want);
    memset(&p, 0x5a, sizeof p);
    ret = tpm_packet_parse_counted(buf, f->n, e->wirelen, &p, &st);
    check_pkt(f, &p, ret, e);
    if (!e->ip) {
        want.not_parsed[e->reason] = 1;
    }
    want.ip_len_from_frame = e->len_from_frame;
    ck_assert_msg(!memcmp(&st, &want, sizeof st), "%s: counters",
                  e->name);
    free(buf);
}

/* ---------------------------------------------------------------------- */
/* Frame catalogue: builder 'i' writes frame 'i' and its expectation.
 * Returns false past the end. */

static bool
build_frame(int i, struct fb *f, struct expect *e)
{
    memset(f, 0, sizeof *f);
    memset(e, 0, sizeof *e);
    e->ip = true;
    e->l3off = 14;
    e->wscale = TPM_WSCALE_NONE;

    switch (i) {
    case 0:
        /* IPv4 TCP, data offset 8 (12 bytes of options), 100 bytes of
         * payload, CE. */
        e->name = "ipv4-tcp-options";
        eth(f, 0x0800);
        ipv4(f, 0x03, 20 + 32 + 100, 0x4000 /* DF */, 63, 6, 0);
        tcp(f, 43210, 443, 0x01020304, 0xa0b0c0d0, 8, 0x18, 0xfedc);
        payload(f, 100);
        e->ipver = 4; e->proto = 6; e->sport = 43210; e->dport = 443;
        e->volume = 100; e->seq = 0x01020304; e->ack = 0xa0b0c0d0;
        e->rwnd = 0xfedc; e->ttl = 63; e->ecn = 1;
        e->flags = TPM_TCP_PSH | TPM_TCP_ACK;
        e->l3len = 20; e->l4off = 34; e->l4min = 20;
        break;

    case 1:
        /* IPv4 with 8 bytes of IP options, TCP SYN, ECT(0). */
        e->name = "ipv4-ipopts-tcp";
        eth(f, 0x0800);
        ipv4(f, 0x02 | 0xb8, 28 + 20 + 10, 0, 5, 6, 8);
        tcp(f, 1, 65535, 0xffffffff, 0, 5, TPM_TCP_SYN, 512);
        payload(f, 10);
        e->ipver = 4; e->proto = 6; e->sport = 1; e->dport = 65535;
        e->volume = 10; e->seq = 0xffffffff; e->ack = 0;
        e->rwnd = 512; e->ttl = 5; e->ecn = 0; e->flags = TPM_TCP_SYN;
        e->l3len = 28; e->l4off = 42; e->l4min = 20;
        break;

    case 2:
        /* IPv4 UDP, 37 bytes of payload. */
        e->name = "ipv4-udp";
        eth(f, 0x0800);
        ipv4(f, 0x01 /* ECT(1) */, 20 + 8 + 37, 0, 128, 17, 0);
        udp(f, 53, 33333, 8 + 37);
        payload(f, 37);
        e->ipver = 4; e->proto = 17; e->sport = 53; e->dport = 33333;
        e->volume = 37; e->ttl = 128;
        e->l3len = 20; e->l4off = 34; e->l4min = 8;
        break;

    case 3:
        /* Minimum frame: IPv4 TCP without payload (54 bytes) padded to 60
         * with non-zero bytes; wire length includes the FCS. */
        e->name = "ipv4-tcp-padded";
        eth(f, 0x0800);
        ipv4(f, 0, 40, 0, 64, 6, 0);
        tcp(f, 2000, 80, 7, 8, 5, TPM_TCP_ACK, 100);
        while (f->n < 60) {
            put8(f, 0xee);
        }
        e->wirelen = 64;
        e->ipver = 4; e->proto = 6; e->sport = 2000; e->dport = 80;
        e->volume = 0; e->seq = 7; e->ack = 8; e->rwnd = 100; e->ttl = 64;
        e->flags = TPM_TCP_ACK;
        e->l3len = 20; e->l4off = 34; e->l4min = 20;
        break;

    case 4:
        /* IPv4 UDP with 2 bytes of payload, padded to 60. */
        e->name = "ipv4-udp-padded";
        eth(f, 0x0800);
        ipv4(f, 0, 30, 0, 64, 17, 0);
        udp(f, 1000, 2000, 10);
        payload(f, 2);
        while (f->n < 60) {
            put8(f, 0xff);
        }
        e->ipver = 4; e->proto = 17; e->sport = 1000; e->dport = 2000;
        e->volume = 2; e->ttl = 64;
        e->l3len = 20; e->l4off = 34; e->l4min = 8;
        break;

    case 5:
        /* 802.1Q-tagged IPv4 UDP. */
        e->name = "vlan-ipv4-udp";
        eth(f, 0x8100);
        put16(f, 0x2064);       /* PCP 1, VID 100. */
        put16(f, 0x0800);
        ipv4(f, 0, 20 + 8 + 5, 0, 9, 17, 0);
        udp(f, 5353, 5353, 13);
        payload(f, 5);
        e->l3off = 18;
        e->ipver = 4; e->proto = 17; e->sport = 5353; e->dport = 5353;
        e->volume = 5; e->ttl = 9;
        e->l3len = 20; e->l4off = 38; e->l4min = 8;
        break;

    case 6:
        /* QinQ (802.1ad outer, 802.1Q inner) IPv6 TCP. */
        e->name = "qinq-ipv6-tcp";
        eth(f, 0x88a8);
        put16(f, 0x000a);
        put16(f, 0x8100);
        put16(f, 0x0014);
        put16(f, 0x86dd);
        ipv6(f, 0x03, 20 + 7, 6, 250);
        tcp(f, 22, 50000, 100, 200, 5, TPM_TCP_FIN | TPM_TCP_ACK, 1);
        payload(f, 7);
        e->l3off = 22;
        e->ipver = 6; e->proto = 6; e->sport = 22; e->dport = 50000;
        e->volume = 7; e->seq = 100; e->ack = 200; e->rwnd = 1;
        e->ttl = 250; e->ecn = 1; e->flags = TPM_TCP_FIN | TPM_TCP_ACK;
        e->l3len = 40; e->l4off = 62; e->l4min = 20;
        break;

    case 7:
        /* Two 802.1Q tags, IPv4 ICMP echo request. */
        e->name = "vlan2-ipv4-icmp";
        eth(f, 0x8100);
        put16(f, 1);
        put16(f, 0x8100);
        put16(f, 2);
        put16(f, 0x0800);
        ipv4(f, 0, 20 + 8 + 56, 0, 64, 1, 0);
        put8(f, 8);             /* Echo request. */
        put8(f, 0);
        put16(f, 0);
        put32(f, 0x00010002);
        payload(f, 56);
        e->l3off = 22;
        e->ipver = 4; e->proto = 1; e->sport = 8; e->dport = 0;
        e->volume = 56; e->ttl = 64;
        e->l3len = 20; e->l4off = 42; e->l4min = 8;
        break;

    case 8:
        /* IPv4 non-first fragment of a UDP datagram: offset 185*8, the
         * payload happens to look like a UDP header. */
        e->name = "ipv4-fragment";
        eth(f, 0x0800);
        ipv4(f, 0, 20 + 200, 185, 33, 17, 0);
        udp(f, 0x1111, 0x2222, 0x3333);
        payload(f, 192);
        e->ipver = 4; e->proto = 17; e->volume = 200; e->ttl = 33;
        e->l3len = 20; e->l4off = 34; e->l4min = 0;
        break;

    case 9:
        /* IPv4 first fragment (MF) of a large UDP datagram: ports, and the
         * smaller of the UDP and IP lengths. */
        e->name = "ipv4-first-fragment";
        eth(f, 0x0800);
        ipv4(f, 0, 20 + 1480, 0x2000, 33, 17, 0);
        udp(f, 4000, 4001, 3008);
        payload(f, 1472);
        e->ipver = 4; e->proto = 17; e->sport = 4000; e->dport = 4001;
        e->volume = 1472; e->ttl = 33;
        e->l3len = 20; e->l4off = 34; e->l4min = 8;
        break;

    case 10:
        /* IPv6 TCP, 50 bytes of payload, 4 bytes of Ethernet padding. */
        e->name = "ipv6-tcp";
        eth(f, 0x86dd);
        ipv6(f, 0xb8 /* EF, not-ECT */, 20 + 50, 6, 64);
        tcp(f, 443, 61000, 0x80000000, 0x7fffffff, 5, TPM_TCP_RST, 0);
        payload(f, 50);
        put32(f, 0);
        e->ipver = 6; e->proto = 6; e->sport = 443; e->dport = 61000;
        e->volume = 50; e->seq = 0x80000000; e->ack = 0x7fffffff;
        e->ttl = 64; e->ecn = 0; e->flags = TPM_TCP_RST;
        e->l3len = 40; e->l4off = 54; e->l4min = 20;
        break;

    case 11:
        /* IPv6, hop-by-hop (8 bytes), fragment (first, more follow), UDP
         * with 20 bytes of payload. */
        e->name = "ipv6-hbh-frag-udp";
        eth(f, 0x86dd);
        ipv6(f, 0xff /* CE */, 8 + 8 + 8 + 20, 0, 1);
        put8(f, 44);            /* HBH: next header fragment. */
        put8(f, 0);             /* Length: 8 bytes. */
        put8(f, 1);             /* PadN option, 4 bytes of padding. */
        put8(f, 4);
        put32(f, 0);
        put8(f, 17);            /* Fragment: next header UDP. */
        put8(f, 0);
        put16(f, 0x0001);       /* Offset 0, M. */
        put32(f, 0xdeadbeef);   /* Identification. */
        udp(f, 123, 124, 28);
        payload(f, 20);
        e->ipver = 6; e->proto = 17; e->sport = 123; e->dport = 124;
        e->volume = 20; e->ttl = 1; e->ecn = 1;
        e->l3len = 40; e->l4off = 70; e->l4min = 8;
        break;

    case 12:
        /* IPv6, routing (24 bytes), destination options (16 bytes), TCP
         * with options. */
        e->name = "ipv6-rt-dst-tcp";
        eth(f, 0x86dd);
        ipv6(f, 0, 24 + 16 + 32 + 3, 43, 200);
        put8(f, 60);            /* Routing: next header dstopts. */
        put8(f, 2);             /* (2 + 1) * 8 = 24 bytes. */
        put8(f, 0);
        put8(f, 0);
        for (int j = 0; j < 20; j++) {
            put8(f, 0x99);
        }
        put8(f, 6);             /* Dstopts: next header TCP. */
        put8(f, 1);             /* 16 bytes. */
        put8(f, 1);             /* PadN, 12 bytes. */
        put8(f, 12);
        for (int j = 0; j < 12; j++) {
            put8(f, 0);
        }
        tcp(f, 8080, 8081, 5, 6, 8, TPM_TCP_ACK, 4096);
        payload(f, 3);
        e->ipver = 6; e->proto = 6; e->sport = 8080; e->dport = 8081;
        e->volume = 3; e->seq = 5; e->ack = 6; e->rwnd = 4096;
        e->ttl = 200; e->flags = TPM_TCP_ACK;
        e->l3len = 40; e->l4off = 94; e->l4min = 20;
        break;

    case 13:
        /* IPv6 non-first fragment (offset 100*8) of UDP. */
        e->name = "ipv6-fragment";
        eth(f, 0x86dd);
        ipv6(f, 0, 8 + 64, 44, 60);
        put8(f, 17);
        put8(f, 0);
        put16(f, 100 << 3);
        put32(f, 7);
        udp(f, 0x1111, 0x2222, 0x3333);
        payload(f, 56);
        e->ipver = 6; e->proto = 17; e->volume = 64; e->ttl = 60;
        e->l3len = 40; e->l4off = 62; e->l4min = 0;
        break;

    case 14:
        /* ICMPv6 echo request. */
        e->name = "ipv6-icmp";
        eth(f, 0x86dd);
        ipv6(f, 0, 8 + 32, 58, 255);
        put8(f, 128);
        put8(f, 0);
        put16(f, 0);
        put32(f, 0x12340001);
        payload(f, 32);
        e->ipver = 6; e->proto = 58; e->sport = 128; e->dport = 0;
        e->volume = 32; e->ttl = 255;
        e->l3len = 40; e->l4off = 54; e->l4min = 8;
        break;

    case 15:
        /* ICMP destination unreachable (port unreachable), carrying the
         * offending IP header and 8 bytes. */
        e->name = "ipv4-icmp-unreach";
        eth(f, 0x0800);
        ipv4(f, 0xc0, 20 + 8 + 28, 0, 255, 1, 0);
        put8(f, 3);
        put8(f, 3);
        put16(f, 0);
        put32(f, 0);
        payload(f, 28);
        e->ipver = 4; e->proto = 1; e->sport = 3; e->dport = 3;
        e->volume = 28; e->ttl = 255;
        e->l3len = 20; e->l4off = 34; e->l4min = 8;
        break;

    case 16:
        /* SCTP: common header (12 bytes) and a 16-byte chunk. */
        e->name = "ipv4-sctp";
        eth(f, 0x0800);
        ipv4(f, 0, 20 + 12 + 16, 0, 64, 132, 0);
        put16(f, 2905);
        put16(f, 36412);
        put32(f, 0x01020304);   /* Verification tag. */
        put32(f, 0);            /* Checksum. */
        payload(f, 16);
        e->ipver = 4; e->proto = 132; e->sport = 2905; e->dport = 36412;
        e->volume = 16; e->ttl = 64;
        e->l3len = 20; e->l4off = 34; e->l4min = 12;
        break;

    case 17:
        /* ARP request (padded). */
        e->name = "arp";
        eth(f, 0x0806);
        put16(f, 1);
        put16(f, 0x0800);
        put8(f, 6);
        put8(f, 4);
        put16(f, 1);
        for (int j = 0; j < 20; j++) {
            put8(f, (uint8_t) j);
        }
        while (f->n < 60) {
            put8(f, 0);
        }
        e->ip = false;
        break;

    case 18:
        /* Three 802.1Q VLAN tags. */
        e->name = "vlan3";
        eth(f, 0x8100);
        put16(f, 1);
        put16(f, 0x8100);
        put16(f, 2);
        put16(f, 0x8100);
        put16(f, 3);
        put16(f, 0x0800);
        ipv4(f, 0, 28, 0, 64, 17, 0);
        udp(f, 1, 2, 8);
        e->l3off = 26;
        e->ipver = 4; e->proto = 17; e->sport = 1; e->dport = 2;
        e->ttl = 64;
        e->l3len = 20; e->l4off = 46; e->l4min = 8;
        break;

    case 19:
        /* IPv4 EtherType with an IPv6 header. */
        e->name = "ipv4-type-v6-header";
        eth(f, 0x0800);
        ipv6(f, 0, 8, 17, 64);
        udp(f, 1, 2, 8);
        e->ip = false;
        e->reason = TPM_PARSE_BAD_IP_HEADER;
        break;

    case 20:
        /* IPv4 with IHL 4. */
        e->name = "ipv4-ihl4";
        eth(f, 0x0800);
        ipv4(f, 0, 40, 0, 64, 6, 0);
        f->b[14] = 0x44;
        tcp(f, 1, 2, 3, 4, 5, 0, 0);
        e->ip = false;
        e->reason = TPM_PARSE_BAD_IP_HEADER;
        break;

    case 21:
        /* IPv4 total length smaller than the header. */
        e->name = "ipv4-short-total";
        eth(f, 0x0800);
        ipv4(f, 0, 19, 0, 64, 6, 0);
        tcp(f, 1, 2, 3, 4, 5, 0, 0);
        e->ip = false;
        e->reason = TPM_PARSE_BAD_IP_HEADER;
        break;

    case 22:
        /* IPv6 EtherType with version 4. */
        e->name = "ipv6-type-v4-header";
        eth(f, 0x86dd);
        ipv4(f, 0, 28, 0, 64, 17, 0);
        udp(f, 1, 2, 8);
        for (int j = 0; j < 20; j++) {
            put8(f, 0);
        }
        e->ip = false;
        e->reason = TPM_PARSE_BAD_IP_HEADER;
        break;

    case 23:
        /* UDP length larger than the IP payload: trust IP. */
        e->name = "udp-len-too-big";
        eth(f, 0x0800);
        ipv4(f, 0, 20 + 8 + 10, 0, 64, 17, 0);
        udp(f, 7, 9, 1000);
        payload(f, 10);
        e->ipver = 4; e->proto = 17; e->sport = 7; e->dport = 9;
        e->volume = 10; e->ttl = 64;
        e->l3len = 20; e->l4off = 34; e->l4min = 8;
        break;

    case 24:
        /* UDP length smaller than its header. */
        e->name = "udp-len-too-small";
        eth(f, 0x0800);
        ipv4(f, 0, 20 + 8 + 10, 0, 64, 17, 0);
        udp(f, 7, 9, 4);
        payload(f, 10);
        e->ipver = 4; e->proto = 17; e->sport = 7; e->dport = 9;
        e->volume = 0; e->ttl = 64;
        e->l3len = 20; e->l4off = 34; e->l4min = 8;
        break;

    case 25:
        /* TCP data offset beyond the IP payload: no volume. */
        e->name = "tcp-doff-too-big";
        eth(f, 0x0800);
        ipv4(f, 0, 20 + 24, 0, 64, 6, 0);
        tcp(f, 10, 20, 30, 40, 5, TPM_TCP_SYN, 50);
        f->b[34 + 12] = 15 << 4;
        payload(f, 4);
        e->ipver = 4; e->proto = 6; e->sport = 10; e->dport = 20;
        e->volume = 0; e->seq = 30; e->ack = 40; e->rwnd = 50; e->ttl = 64;
        e->flags = TPM_TCP_SYN;
        e->l3len = 20; e->l4off = 34; e->l4min = 20;
        break;

    case 26:
        /* Other IPv4 protocol (GRE): key without ports, volume = IP
         * payload. */
        e->name = "ipv4-gre";
        eth(f, 0x0800);
        ipv4(f, 0, 20 + 24, 0, 64, 47, 0);
        payload(f, 24);
        e->ipver = 4; e->proto = 47; e->volume = 24; e->ttl = 64;
        e->l3len = 20; e->l4off = 34; e->l4min = 0;
        break;

    case 27: {
        /* IPv4 TCP SYN with MSS 1460, NOP, window scale 7, SACK permitted
         * and timestamps: the options a Linux SYN carries. */
        static const uint8_t opts[20] = {
            2, 4, 0x05, 0xb4, 1, 3, 3, 7, 4, 2,
            8, 10, 0, 0, 0, 1, 0, 0, 0, 0,
        };
        e->name = "ipv4-tcp-syn-options";
        eth(f, 0x0800);
        ipv4(f, 0, 20 + 40, 0x4000, 64, 6, 0);
        tcp_opts(f, 40000, 5001, 0x89abcdef, 0, TPM_TCP_SYN, 64240, opts,
                 sizeof opts);
        e->ipver = 4; e->proto = 6; e->sport = 40000; e->dport = 5001;
        e->seq = 0x89abcdef; e->rwnd = 64240; e->ttl = 64;
        e->flags = TPM_TCP_SYN; e->wscale = 7; e->mss = 1460;
        e->l3len = 20; e->l4off = 34; e->l4min = 20; e->l4opt = 40;
        break;
    }

    case 28: {
        /* IPv6 TCP SYN-ACK, MSS 8940, window scale 15 (taken as 14, RFC
         * 7323), end of options. */
        static const uint8_t opts[8] = { 2, 4, 0x22, 0xec, 3, 3, 15, 0 };
        e->name = "ipv6-tcp-synack-options";
        eth(f, 0x86dd);
        ipv6(f, 0, 28, 6, 64);
        tcp_opts(f, 5001, 40000, 7, 0x89abcdf0, TPM_TCP_SYN | TPM_TCP_ACK,
                 65535, opts, sizeof opts);
        e->ipver = 6; e->proto = 6; e->sport = 5001; e->dport = 40000;
        e->seq = 7; e->ack = 0x89abcdf0; e->rwnd = 65535; e->ttl = 64;
        e->flags = TPM_TCP_SYN | TPM_TCP_ACK; e->wscale = 14;
        e->mss = 8940;
        e->l3len = 40; e->l4off = 54; e->l4min = 20; e->l4opt = 28;
        break;
    }

    case 29: {
        /* IPv4 TCP SYN whose second option has length 0: the walk stops
         * there, so the window scale after it is not read. */
        static const uint8_t opts[12] = {
            2, 4, 0x02, 0x18, 30, 0, 3, 3, 3, 0, 0, 0,
        };
        e->name = "ipv4-tcp-syn-bad-option";
        eth(f, 0x0800);
        ipv4(f, 0, 20 + 32, 0, 64, 6, 0);
        tcp_opts(f, 1234, 80, 1, 0, TPM_TCP_SYN, 1024, opts, sizeof opts);
        e->ipver = 4; e->proto = 6; e->sport = 1234; e->dport = 80;
        e->seq = 1; e->rwnd = 1024; e->ttl = 64; e->flags = TPM_TCP_SYN;
        e->mss = 536;
        e->l3len = 20; e->l4off = 34; e->l4min = 20; e->l4opt = 32;
        break;
    }

    case 30:
        /* Three tags of the three kinds (802.1ad, 802.1Q, 0x9100), IPv4
         * TCP with options. */
        e->name = "vlan3-mixed-ipv4-tcp";
        eth(f, 0x88a8);
        put16(f, 0x0101);
        put16(f, 0x8100);
        put16(f, 0x0202);
        put16(f, 0x9100);
        put16(f, 0x0303);
        put16(f, 0x0800);
        ipv4(f, 0, 20 + 32 + 300, 0x4000, 61, 6, 0);
        tcp(f, 40000, 80, 0x10, 0x20, 8, TPM_TCP_ACK, 512);
        payload(f, 300);
        e->l3off = 26;
        e->ipver = 4; e->proto = 6; e->sport = 40000; e->dport = 80;
        e->volume = 300; e->seq = 0x10; e->ack = 0x20; e->rwnd = 512;
        e->ttl = 61; e->flags = TPM_TCP_ACK;
        e->l3len = 20; e->l4off = 46; e->l4min = 20;
        break;

    case 31:
        /* TPM_VLAN_MAX (4) tags, IPv6 UDP. */
        e->name = "vlan4-ipv6-udp";
        eth(f, 0x88a8);
        put16(f, 1);
        put16(f, 0x88a8);
        put16(f, 2);
        put16(f, 0x9100);
        put16(f, 3);
        put16(f, 0x8100);
        put16(f, 4);
        put16(f, 0x86dd);
        ipv6(f, 0, 8 + 20, 17, 33);
        udp(f, 53, 3333, 8 + 20);
        payload(f, 20);
        e->l3off = 30;
        e->ipver = 6; e->proto = 17; e->sport = 53; e->dport = 3333;
        e->volume = 20; e->ttl = 33;
        e->l3len = 40; e->l4off = 70; e->l4min = 8;
        break;

    case 32:
        /* One tag more than TPM_VLAN_MAX. */
        e->name = "vlan5";
        eth(f, 0x8100);
        for (int j = 0; j < 4; j++) {
            put16(f, (uint16_t) j);
            put16(f, 0x8100);
        }
        put16(f, 5);
        put16(f, 0x0800);
        ipv4(f, 0, 28, 0, 64, 17, 0);
        udp(f, 1, 2, 8);
        e->ip = false;
        e->reason = TPM_PARSE_TOO_MANY_TAGS;
        break;

    case 33:
        /* IPv4 total length 0 (segmentation offload): the length is the
         * frame's. */
        e->name = "ipv4-total-length-0";
        eth(f, 0x0800);
        ipv4(f, 0, 0, 0x4000, 64, 6, 0);
        tcp(f, 5001, 42000, 7, 8, 5, TPM_TCP_ACK | TPM_TCP_PSH, 9);
        payload(f, 1448);
        e->ipver = 4; e->proto = 6; e->sport = 5001; e->dport = 42000;
        e->volume = 1448; e->seq = 7; e->ack = 8; e->rwnd = 9; e->ttl = 64;
        e->flags = TPM_TCP_ACK | TPM_TCP_PSH;
        e->l3len = 20; e->l4off = 34; e->l4min = 20;
        e->len_from_frame = true;
        break;

    case 34:
        /* Single 802.1ad tag, IPv4 UDP. */
        e->name = "8021ad-ipv4-udp";
        eth(f, 0x88a8);
        put16(f, 0x0fff);
        put16(f, 0x0800);
        ipv4(f, 0, 20 + 8 + 40, 0, 7, 17, 0);
        udp(f, 123, 123, 8 + 40);
        payload(f, 40);
        e->l3off = 18;
        e->ipver = 4; e->proto = 17; e->sport = 123; e->dport = 123;
        e->volume = 40; e->ttl = 7;
        e->l3len = 20; e->l4off = 38; e->l4min = 8;
        break;

    default:
        return false;
    }
    if (!e->wirelen) {
        e->wirelen = f->n;
    }
    return true;
}

static void
check_frame(int i)
{
    struct fb f;
    struct expect e;

    ck_assert(build_frame(i, &f, &e));
    parse_check(&f, &e);
}

/* ---------------------------------------------------------------------- */
/* Tests of single frames. */

START_TEST(test_ipv4_tcp_options)
{
    check_frame(0);
}
END_TEST

/* Window scale and MSS on SYNs (IPv4, IPv6), a shift above 14, and a
 * malformed option that ends the walk. */
START_TEST(test_tcp_syn_options)
{
    check_frame(27);
    check_frame(28);
    check_frame(29);
}
END_TEST

START_TEST(test_ipv4_ip_options)
{
    check_frame(1);
}
END_TEST

START_TEST(test_ipv4_udp)
{
    check_frame(2);
    check_frame(23);
    check_frame(24);
}
END_TEST

START_TEST(test_eth_padding)
{
    check_frame(3);
    check_frame(4);
    check_frame(10);
}
END_TEST

START_TEST(test_vlan)
{
    check_frame(5);
    check_frame(6);
    check_frame(7);
    check_frame(18);
    check_frame(30);
    check_frame(31);
    check_frame(32);
    check_frame(34);
}
END_TEST

START_TEST(test_ipv4_fragments)
{
    check_frame(8);
    check_frame(9);
}
END_TEST

START_TEST(test_ipv6)
{
    check_frame(10);
    check_frame(11);
    check_frame(12);
    check_frame(13);
}
END_TEST

START_TEST(test_icmp_sctp_other)
{
    check_frame(7);
    check_frame(14);
    check_frame(15);
    check_frame(16);
    check_frame(25);
    check_frame(26);
}
END_TEST

START_TEST(test_non_ip)
{
    for (int i = 17; i <= 22; i++) {
        check_frame(i);
    }

    /* Frames shorter than an Ethernet header. */
    static const uint8_t tiny[13] = { 0 };
    struct tpm_pkt p;
    memset(&p, 0x77, sizeof p);
    ck_assert(!tpm_packet_parse(tiny, 13, 1234, &p));
    ck_assert_uint_eq(p.bytes, 1234);
    ck_assert_uint_eq(p.key.ipver, 0);
    ck_assert_uint_eq(p.volume, 0);
}
END_TEST

static bool pkt_equal(const struct tpm_pkt *, const struct tpm_pkt *);

/* Parses the first 'caplen' bytes of 'f' (an exact-size heap copy, for
 * valgrind) by the inline parser, counted in 'st', and checks that the
 * full parser agrees. */
static bool
parse_cut(const struct fb *f, uint32_t caplen, uint32_t wirelen,
          struct tpm_pkt *p, struct tpm_parse_stats *st)
{
    uint8_t *buf = malloc(caplen ? caplen : 1);
    struct tpm_parse_stats slow_st = *st;
    struct tpm_pkt slow;

    ck_assert_ptr_nonnull(buf);
    memcpy(buf, f->b, caplen);
    bool ret = tpm_packet_parse_counted(buf, caplen, wirelen, p, st);
    bool slow_ret = tpm_packet_parse_full(buf, caplen, wirelen, &slow,
                                          &slow_st);
    free(buf);
    ck_assert(ret == slow_ret && (!ret || pkt_equal(p, &slow)));
    ck_assert(!memcmp(st, &slow_st, sizeof *st));
    return ret;
}

/* An IPv6 TCP frame captured at 64 bytes (10 bytes of TCP header): real
 * ports, sequence number, payload from the IPv6 payload length. */
START_TEST(test_ipv6_tcp_cut_64)
{
    struct tpm_parse_stats st;
    struct tpm_pkt p;
    struct fb f;

    memset(&f, 0, sizeof f);
    memset(&st, 0, sizeof st);
    eth(&f, 0x86dd);
    ipv6(&f, 0, 20 + 1000, 6, 64);
    tcp(&f, 33000, 443, 0xdeadbeef, 0x01020304, 5, TPM_TCP_ACK, 300);
    payload(&f, 1000);

    ck_assert(parse_cut(&f, 64, f.n, &p, &st));
    ck_assert_uint_eq(p.key.ipver, 6);
    ck_assert_uint_eq(p.key.proto, 6);
    ck_assert_uint_eq(p.key.sport, 33000);
    ck_assert_uint_eq(p.key.dport, 443);
    ck_assert_uint_eq(p.volume, 1000);
    ck_assert_uint_eq(p.seq, 0xdeadbeef);
    ck_assert_uint_eq(p.ack, 0);          /* Not captured. */
    ck_assert_uint_eq(p.tcp_flags, 0);
    ck_assert_uint_eq(p.rwnd, 0);
    ck_assert_uint_eq(p.bytes, 14 + 40 + 20 + 1000);
    ck_assert_uint_eq(st.l4_truncated, 1);
    ck_assert_uint_eq(tpm_parse_stats_not_parsed(&st), 0);

    /* Cut before the ports: not parsed, counted. */
    ck_assert(!parse_cut(&f, 57, f.n, &p, &st));
    ck_assert_uint_eq(p.key.ipver, 0);
    ck_assert_uint_eq(st.not_parsed[TPM_PARSE_PORTS_NOT_CAPTURED], 1);
    ck_assert_uint_eq(st.l4_truncated, 1);
}
END_TEST

/* IPv4 TCP captured at 50 bytes (16 bytes of TCP header): 125 segments of
 * 1000 bytes of payload are 125000 bytes of volume, not 127500. */
START_TEST(test_ipv4_cut_50)
{
    struct tpm_parse_stats st;
    struct tpm_pkt p;
    struct fb f;
    uint64_t volume = 0;

    memset(&st, 0, sizeof st);
    for (int i = 0; i < 125; i++) {
        memset(&f, 0, sizeof f);
        eth(&f, 0x0800);
        ipv4(&f, 0, 20 + 20 + 1000, 0x4000, 64, 6, 0);
        tcp(&f, 50000, 5001, 1 + 1000 * i, 1, 5, TPM_TCP_ACK, 1000);
        payload(&f, 1000);
        ck_assert(parse_cut(&f, 50, f.n, &p, &st));
        ck_assert_uint_eq(p.key.sport, 50000);
        ck_assert_uint_eq(p.key.dport, 5001);
        ck_assert_uint_eq(p.seq, 1 + 1000 * i);
        ck_assert_uint_eq(p.ack, 1);
        ck_assert_uint_eq(p.tcp_flags, TPM_TCP_ACK);
        ck_assert_uint_eq(p.rwnd, 1000);
        volume += p.volume;
    }
    ck_assert_uint_eq(volume, 125000);
    ck_assert_uint_eq(st.l4_truncated, 125);

    /* TCP options and the data offset not captured (44 bytes): the
     * header is taken as 20 bytes, the volume is too large by the
     * options' 12 bytes. */
    memset(&f, 0, sizeof f);
    eth(&f, 0x0800);
    ipv4(&f, 0, 20 + 32 + 100, 0, 64, 6, 0);
    tcp(&f, 1, 2, 3, 4, 8, TPM_TCP_ACK, 5);
    payload(&f, 100);
    ck_assert(parse_cut(&f, 44, f.n, &p, &st));
    ck_assert_uint_eq(p.volume, 112);
    ck_assert(parse_cut(&f, 47, f.n, &p, &st));     /* Offset captured. */
    ck_assert_uint_eq(p.volume, 100);
    ck_assert_uint_eq(st.l4_truncated, 127);

    /* UDP cut after the ports: the IP length's payload. */
    memset(&f, 0, sizeof f);
    eth(&f, 0x0800);
    ipv4(&f, 0, 20 + 8 + 500, 0, 64, 17, 0);
    udp(&f, 7, 8, 8 + 500);
    payload(&f, 500);
    ck_assert(parse_cut(&f, 38, f.n, &p, &st));
    ck_assert_uint_eq(p.key.sport, 7);
    ck_assert_uint_eq(p.key.dport, 8);
    ck_assert_uint_eq(p.volume, 500);
    ck_assert_uint_eq(st.l4_truncated, 128);
    ck_assert_uint_eq(tpm_parse_stats_not_parsed(&st), 0);
}
END_TEST

/* IPv4 total length 0 (as captured under segmentation offload): the IP
 * length is the frame's, counted; also with the capture cut. */
START_TEST(test_ipv4_total_length_0)
{
    struct tpm_parse_stats st;
    struct tpm_pkt p;
    struct fb f;

    check_frame(33);

    memset(&st, 0, sizeof st);
    memset(&f, 0, sizeof f);
    eth(&f, 0x8100);                    /* Tagged: 18 bytes of L2. */
    put16(&f, 10);
    put16(&f, 0x0800);
    ipv4(&f, 0, 0, 0x4000, 64, 6, 0);
    tcp(&f, 80, 40000, 1, 2, 8, TPM_TCP_ACK, 3);
    ck_assert(parse_cut(&f, f.n, 18 + 20 + 32 + 65000, &p, &st));
    ck_assert_uint_eq(p.key.sport, 80);
    ck_assert_uint_eq(p.volume, 65000);
    ck_assert_uint_eq(st.ip_len_from_frame, 1);
    ck_assert_uint_eq(st.l4_truncated, 0);

    /* Frame shorter than the IP header it claims: bad header. */
    ck_assert(!parse_cut(&f, f.n, 18 + 19, &p, &st));
    ck_assert_uint_eq(st.not_parsed[TPM_PARSE_BAD_IP_HEADER], 1);
    ck_assert_uint_eq(st.ip_len_from_frame, 1);
}
END_TEST

/* Writes 'n' IPv6 destination-options headers of 8 bytes, the last one
 * followed by 'last_nh'. */
static void
dstopts(struct fb *f, int n, uint8_t last_nh)
{
    for (int i = 0; i < n; i++) {
        put8(f, i == n - 1 ? last_nh : 60);
        put8(f, 0);             /* 8 bytes. */
        put8(f, 1);             /* PadN, 4 bytes. */
        put8(f, 4);
        put32(f, 0);
    }
}

/* IPv6 extension headers that run past the payload length, or number
 * more than TPM_IPV6_EXT_MAX: the frame is not parsed (bad IP header),
 * rather than parsed with an extension header's number as its protocol
 * (a key that no frame of tpm_frame_build() gives back). */
START_TEST(test_ipv6_bad_extension_headers)
{
    struct tpm_parse_stats st;
    struct tpm_pkt p;
    struct fb f;

    /* Hop-by-hop of 16 bytes in a payload of 8. */
    memset(&st, 0, sizeof st);
    memset(&f, 0, sizeof f);
    eth(&f, 0x86dd);
    ipv6(&f, 0, 8, 0, 64);
    put8(&f, 6);
    put8(&f, 1);                /* (1 + 1) * 8 = 16 bytes. */
    for (int i = 0; i < 14; i++) {
        put8(&f, 0);
    }
    tcp(&f, 1, 2, 3, 4, 5, TPM_TCP_ACK, 5);
    ck_assert(!parse_cut(&f, f.n, f.n, &p, &st));
    ck_assert_uint_eq(p.key.ipver, 0);
    ck_assert_uint_eq(p.key.proto, 0);
    ck_assert_uint_eq(st.not_parsed[TPM_PARSE_BAD_IP_HEADER], 1);

    /* Payload length 0 with a hop-by-hop header. */
    memset(&f, 0, sizeof f);
    eth(&f, 0x86dd);
    ipv6(&f, 0, 0, 0, 64);
    dstopts(&f, 1, 17);
    udp(&f, 53, 53, 8);
    ck_assert(!parse_cut(&f, f.n, f.n, &p, &st));
    ck_assert_uint_eq(st.not_parsed[TPM_PARSE_BAD_IP_HEADER], 2);

    /* TPM_IPV6_EXT_MAX headers are skipped; one more is too many. */
    for (int n = TPM_IPV6_EXT_MAX; n <= TPM_IPV6_EXT_MAX + 1; n++) {
        memset(&f, 0, sizeof f);
        eth(&f, 0x86dd);
        ipv6(&f, 0, n * 8 + 8 + 10, 60, 64);
        dstopts(&f, n, 17);
        udp(&f, 53, 54, 18);
        payload(&f, 10);
        bool ok = parse_cut(&f, f.n, f.n, &p, &st);
        if (n == TPM_IPV6_EXT_MAX) {
            ck_assert(ok);
            ck_assert_uint_eq(p.key.proto, 17);
            ck_assert_uint_eq(p.key.dport, 54);
            ck_assert_uint_eq(p.volume, 10);
        } else {
            ck_assert(!ok);
            ck_assert_uint_eq(st.not_parsed[TPM_PARSE_BAD_IP_HEADER], 3);
        }
    }
}
END_TEST

/* Every reason a frame is not parsed, with its counter. */
START_TEST(test_not_parsed_reasons)
{
    struct tpm_parse_stats st, want;
    struct tpm_pkt p;
    struct fb f;

    memset(&st, 0, sizeof st);
    memset(&want, 0, sizeof want);

    /* non_ip: ARP. */
    struct expect e;
    ck_assert(build_frame(17, &f, &e));
    ck_assert(!parse_cut(&f, f.n, f.n, &p, &st));
    want.not_parsed[TPM_PARSE_NON_IP]++;

    /* l2_truncated: shorter than an Ethernet header; a VLAN tag cut. */
    ck_assert(!parse_cut(&f, 13, f.n, &p, &st));
    ck_assert(!parse_cut(&f, 0, f.n, &p, &st));
    want.not_parsed[TPM_PARSE_L2_TRUNCATED] += 2;
    ck_assert(build_frame(5, &f, &e));
    ck_assert(!parse_cut(&f, 17, f.n, &p, &st));
    want.not_parsed[TPM_PARSE_L2_TRUNCATED]++;

    /* too_many_tags: five tags. */
    ck_assert(build_frame(32, &f, &e));
    ck_assert(!parse_cut(&f, f.n, f.n, &p, &st));
    want.not_parsed[TPM_PARSE_TOO_MANY_TAGS]++;

    /* l3_truncated: IPv4 header cut, IPv4 options cut, IPv6 header cut,
     * IPv6 extension header cut. */
    ck_assert(build_frame(0, &f, &e));
    ck_assert(!parse_cut(&f, 33, f.n, &p, &st));
    ck_assert(build_frame(1, &f, &e));
    ck_assert(!parse_cut(&f, 40, f.n, &p, &st));
    ck_assert(build_frame(10, &f, &e));
    ck_assert(!parse_cut(&f, 53, f.n, &p, &st));
    ck_assert(build_frame(11, &f, &e));
    ck_assert(!parse_cut(&f, 60, f.n, &p, &st));
    want.not_parsed[TPM_PARSE_L3_TRUNCATED] += 4;

    /* bad_ip_header: each malformed frame of the catalogue. */
    for (int i = 19; i <= 22; i++) {
        ck_assert(build_frame(i, &f, &e));
        ck_assert(!parse_cut(&f, f.n, f.n, &p, &st));
        want.not_parsed[TPM_PARSE_BAD_IP_HEADER]++;
    }

    /* ports_not_captured: TCP, UDP, SCTP with less than 4 bytes of L4
     * header, ICMP with less than 2. */
    ck_assert(build_frame(0, &f, &e));
    ck_assert(!parse_cut(&f, 37, f.n, &p, &st));
    ck_assert(build_frame(2, &f, &e));
    ck_assert(!parse_cut(&f, 34, f.n, &p, &st));
    ck_assert(build_frame(16, &f, &e));
    ck_assert(!parse_cut(&f, 36, f.n, &p, &st));
    ck_assert(build_frame(15, &f, &e));
    ck_assert(!parse_cut(&f, 35, f.n, &p, &st));
    want.not_parsed[TPM_PARSE_PORTS_NOT_CAPTURED] += 4;
    /* ... but ICMP with its type and code is parsed. */
    ck_assert(parse_cut(&f, 36, f.n, &p, &st));
    want.l4_truncated++;

    ck_assert(!memcmp(&st, &want, sizeof st));
    ck_assert_uint_eq(tpm_parse_stats_not_parsed(&st), 17);

    static const char *const names[] = {
        "non_ip", "l2_truncated", "too_many_tags", "l3_truncated",
        "bad_ip_header", "ports_not_captured", "tun_truncated",
        "tun_bad_header", "tun_inner_non_ip", "tun_inner_malformed",
    };
    ck_assert_int_eq(ARRAY_SIZE(names), TPM_PARSE_N_REASONS);
    for (int i = 0; i < TPM_PARSE_N_REASONS; i++) {
        ck_assert_str_eq(tpm_parse_reason_name(i), names[i]);
    }
}
END_TEST

/* ECN: every codepoint, IPv4 and IPv6. */
START_TEST(test_ecn)
{
    for (uint32_t ecn = 0; ecn < 4; ecn++) {
        for (uint32_t dscp = 0; dscp < 64; dscp += 21) {
            uint8_t tos = (uint8_t) (dscp << 2 | ecn);
            struct tpm_pkt p;
            struct fb f;

            memset(&f, 0, sizeof f);
            eth(&f, 0x0800);
            ipv4(&f, tos, 28, 0, 64, 17, 0);
            udp(&f, 1, 2, 8);
            ck_assert(tpm_packet_parse(f.b, f.n, f.n, &p));
            ck_assert_uint_eq(p.tos, tos);
            ck_assert_uint_eq(tpm_pkt_ce(&p), ecn == 3);

            memset(&f, 0, sizeof f);
            eth(&f, 0x86dd);
            ipv6(&f, tos, 8, 17, 64);
            udp(&f, 1, 2, 8);
            ck_assert(tpm_packet_parse(f.b, f.n, f.n, &p));
            ck_assert_uint_eq(p.tos, tos);
            ck_assert_uint_eq(tpm_pkt_ce(&p), ecn == 3);
        }
    }
}
END_TEST

/* IPv4 addresses are the wire bytes; ports are host order. */
START_TEST(test_byte_order)
{
    struct fb f;
    struct expect e;
    struct tpm_pkt p;

    ck_assert(build_frame(0, &f, &e));
    ck_assert(tpm_packet_parse(f.b, f.n, f.n, &p));
    uint32_t w;
    memcpy(&w, ip4_a, 4);
    ck_assert_uint_eq(p.key.src[0], w);
    memcpy(&w, ip4_b, 4);
    ck_assert_uint_eq(p.key.dst[0], w);
    const uint8_t *s = (const uint8_t *) &p.key.src[0];
    ck_assert_uint_eq(s[0], 10);
    ck_assert_uint_eq(s[3], 3);
    ck_assert_uint_eq(p.key.sport, 43210);

    ck_assert(build_frame(10, &f, &e));
    ck_assert(tpm_packet_parse(f.b, f.n, f.n, &p));
    s = (const uint8_t *) p.key.src;
    ck_assert_uint_eq(s[0], 0x20);
    ck_assert_uint_eq(s[1], 0x01);
    ck_assert_uint_eq(s[15], 0x01);
    ck_assert_uint_eq(p.key.sport, 443);
}
END_TEST

/* Compares two parse results field by field (struct padding is not
 * written by the inline fast path). */
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

/* The L4 length of frame 'f' according to its IP header (IPv4 total
 * length 0: the frame's). */
static uint32_t
l4_len_of(const struct fb *f, const struct expect *e)
{
    const uint8_t *ip = f->b + e->l3off;
    if (e->ipver == 4) {
        uint32_t tot = (uint32_t) ip[2] << 8 | ip[3];
        if (!tot) {
            tot = e->wirelen - e->l3off;
        }
        return tot - (ip[0] & 0xf) * 4;
    }
    return ((uint32_t) ip[4] << 8 | ip[5]) - (e->l4off - e->l3off - 40);
}

/* The reason a prefix of 'len' bytes of frame 'f' is not parsed. */
static enum tpm_parse_reason
prefix_reason(const struct expect *e, uint32_t len)
{
    if (len < e->l3off) {
        return TPM_PARSE_L2_TRUNCATED;
    } else if (len < e->l4off) {
        return TPM_PARSE_L3_TRUNCATED;
    }
    return TPM_PARSE_PORTS_NOT_CAPTURED;
}

/* Every prefix of every frame: no read beyond 'caplen' (valgrind), bytes
 * always the wire length, no field taken from bytes not captured, the
 * volume from the IP lengths, the reason counted when not parsed, and the
 * full parse once everything needed is there. */
START_TEST(test_truncation)
{
    struct fb f;
    struct expect e;
    int n_frames = 0;

    for (int i = 0; build_frame(i, &f, &e); i++, n_frames++) {
        struct tpm_pkt full;
        ck_assert(tpm_packet_parse(f.b, f.n, e.wirelen, &full) == e.ip);

        for (uint32_t len = 0; len <= f.n; len++) {
            uint8_t *buf = malloc(len ? len : 1);
            struct tpm_parse_stats st, slow_st;
            struct tpm_pkt p;

            ck_assert_ptr_nonnull(buf);
            memcpy(buf, f.b, len);
            memset(&p, 0x5a, sizeof p);
            memset(&st, 0, sizeof st);
            bool ret = tpm_packet_parse_counted(buf, len, e.wirelen, &p,
                                                &st);

            /* The inline fast path and the full parser agree, counters
             * included. */
            struct tpm_pkt slow;
            memset(&slow_st, 0, sizeof slow_st);
            bool slow_ret = tpm_packet_parse_full(buf, len, e.wirelen, &slow,
                                                  &slow_st);

            /* The parse that hashes gives the same packet, and the hash
             * of its key. */
            struct tpm_pkt h;
            memset(&h, 0x5a, sizeof h);
            bool h_ret = tpm_packet_parse_hash(buf, len, e.wirelen, &h, NULL);
            free(buf);
            ck_assert_msg(h_ret == ret, "%s/%u: parse_hash returned %d",
                          e.name, len, h_ret);
            if (ret) {
                uint32_t hash = h.hash;
                h.hash = p.hash;
                ck_assert_msg(pkt_equal(&h, &p),
                              "%s/%u: parse_hash differs", e.name, len);
                ck_assert_msg(hash == tpm_key_hash(&p.key),
                              "%s/%u: parse_hash hash %#x, key hash %#x",
                              e.name, len, hash, tpm_key_hash(&p.key));
            }
            ck_assert_msg(ret == slow_ret && (!ret || pkt_equal(&p, &slow)),
                          "%s/%u: fast path differs from full parse",
                          e.name, len);
            ck_assert_msg(!memcmp(&st, &slow_st, sizeof st),
                          "%s/%u: fast path counted", e.name, len);

            ck_assert_msg(p.bytes == e.wirelen, "%s/%u: bytes", e.name, len);
            ck_assert_msg(p.key.tun == 0, "%s/%u: tenant slot", e.name,
                          len);
            ck_assert_msg(tpm_parse_stats_not_parsed(&st) == !ret,
                          "%s/%u: not-parsed counters", e.name, len);
            if (!ret) {
                struct tpm_key zero;
                memset(&zero, 0, sizeof zero);
                ck_assert_msg(!memcmp(&p.key, &zero, sizeof zero),
                              "%s/%u: non-IP key not zero", e.name, len);
                ck_assert_msg(!st.l4_truncated && !st.ip_len_from_frame,
                              "%s/%u: not parsed, yet noted", e.name, len);
            }
            if (!e.ip) {
                ck_assert_msg(!ret, "%s/%u: parsed", e.name, len);
                if (len == f.n) {
                    ck_assert_msg(st.not_parsed[e.reason] == 1,
                                  "%s: not counted as %s", e.name,
                                  tpm_parse_reason_name(e.reason));
                }
                continue;
            }
            uint32_t ports = e.proto == 1 || e.proto == 58 ? 2 : 4;
            if (len < e.l3off + e.l3len || len < e.l4off
                || (e.l4min && len < e.l4off + ports)) {
                enum tpm_parse_reason r = prefix_reason(&e, len);
                ck_assert_msg(!ret, "%s/%u: parsed", e.name, len);
                ck_assert_msg(st.not_parsed[r] == 1, "%s/%u: not counted "
                              "as %s", e.name, len,
                              tpm_parse_reason_name(r));
                continue;
            }
            ck_assert_msg(ret, "%s/%u: not parsed", e.name, len);
            ck_assert_msg(st.ip_len_from_frame == e.len_from_frame,
                          "%s/%u: ip_len_from_frame", e.name, len);
            ck_assert_msg(p.key.ipver == e.ipver && p.ttl == e.ttl
                          && tpm_pkt_ce(&p) == e.ecn && p.key.proto == e.proto
                          && !memcmp(p.key.src, full.key.src,
                                     sizeof p.key.src)
                          && !memcmp(p.key.dst, full.key.dst,
                                     sizeof p.key.dst),
                          "%s/%u: IP header fields", e.name, len);
            if (!e.l4min || len >= e.l4off + MAX(e.l4min, e.l4opt)) {
                ck_assert_msg(pkt_equal(&p, &full),
                              "%s/%u: differs from the full parse", e.name,
                              len);
                ck_assert_msg(!st.l4_truncated, "%s/%u: l4_truncated",
                              e.name, len);
            } else if (len >= e.l4off + e.l4min) {
                /* Options partly captured: each one read whole or not
                 * at all. */
                struct tpm_pkt q = p;
                ck_assert_msg(q.wscale == TPM_WSCALE_NONE
                              || q.wscale == full.wscale,
                              "%s/%u: wscale %u", e.name, len, q.wscale);
                ck_assert_msg(q.mss == 0 || q.mss == full.mss,
                              "%s/%u: mss %u", e.name, len, q.mss);
                q.wscale = full.wscale;
                q.mss = full.mss;
                ck_assert_msg(pkt_equal(&q, &full),
                              "%s/%u: differs from the full parse", e.name,
                              len);
                ck_assert_msg(!st.l4_truncated, "%s/%u: l4_truncated",
                              e.name, len);
            } else {
                /* L4 header cut after the ports: the ports, the fields
                 * captured, the volume from the IP lengths. */
                uint32_t avail = len - e.l4off;
                uint32_t l4len = l4_len_of(&f, &e);
                uint32_t volume = full.volume;
                if (e.proto == 6 && avail < 13) {
                    volume = l4len > 20 ? l4len - 20 : 0;
                } else if (e.proto == 17 && avail < 6) {
                    volume = l4len > 8 ? l4len - 8 : 0;
                }
                bool tcp = e.proto == 6;
                ck_assert_msg(st.l4_truncated == 1, "%s/%u: l4_truncated",
                              e.name, len);
                ck_assert_msg(p.key.sport == e.sport
                              && p.key.dport == e.dport,
                              "%s/%u: ports %u %u", e.name, len, p.key.sport,
                              p.key.dport);
                ck_assert_msg(p.volume == volume, "%s/%u: volume %u, "
                              "expected %u", e.name, len, p.volume, volume);
                ck_assert_msg(p.seq == (tcp && avail >= 8 ? e.seq : 0)
                              && p.ack == (tcp && avail >= 12 ? e.ack : 0)
                              && p.tcp_flags == (tcp && avail >= 14
                                                 ? e.flags : 0)
                              && p.rwnd == (tcp && avail >= 16 ? e.rwnd : 0)
                              && p.wscale == TPM_WSCALE_NONE && p.mss == 0,
                              "%s/%u: L4 fields from uncaptured bytes",
                              e.name, len);
            }
        }
    }
    ck_assert_int_ge(n_frames, 35);
}
END_TEST

/* Garbage frames: never crash nor read beyond the capture (valgrind). */
START_TEST(test_random_garbage)
{
    struct test_rng rng;
    static const uint16_t types[] = { 0x0800, 0x86dd, 0x8100, 0x88a8 };
    static const uint8_t nhs[] = { 0, 43, 44, 60, 6, 17, 132, 1, 58 };

    test_rng_seed(&rng, 0x9a6);
    for (int i = 0; i < 20000; i++) {
        uint32_t len = test_rng_range(&rng, 140);
        uint8_t *buf = malloc(len ? len : 1);
        for (uint32_t j = 0; j < len; j++) {
            buf[j] = (uint8_t) test_rng_u32(&rng);
        }
        /* Make the interesting paths likely. */
        if (len >= 14) {
            uint16_t t = types[test_rng_range(&rng, ARRAY_SIZE(types))];
            buf[12] = (uint8_t) (t >> 8);
            buf[13] = (uint8_t) t;
        }
        if (len >= 15) {
            buf[14] = (uint8_t) ((buf[12] == 0x86 ? 0x60 : 0x45)
                                 | (buf[14] & 0x0f
                                    & (test_rng_range(&rng, 4) ? 0 : 0xf)));
        }
        if (len > 20 && buf[12] == 0x86) {
            buf[18] = 0;
            buf[19] = (uint8_t) test_rng_range(&rng, 120);
            buf[20] = nhs[test_rng_range(&rng, ARRAY_SIZE(nhs))];
        }
        if (len >= 18 && buf[12] == 0x08) {
            buf[16] = 0;
            buf[17] = (uint8_t) test_rng_range(&rng, 140);
        }
        struct tpm_pkt p;
        bool ret = tpm_packet_parse(buf, len, len + 4, &p);
        TCHECK(p.bytes == len + 4, "bytes");
        TCHECK(ret || p.key.ipver == 0, "non-IP with ipver");
        TCHECK(!ret || p.key.ipver == 4 || p.key.ipver == 6, "ipver %u",
               p.key.ipver);
        TCHECK(p.volume <= 65535, "volume %u", p.volume);
        free(buf);
    }
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Tunnels. */

/* Outer addresses, unlike any of the catalogue's (inner) ones. */
static const uint8_t out4_a[4] = { 172, 16, 0, 1 };
static const uint8_t out4_b[4] = { 172, 16, 0, 2 };
static const uint8_t out6_a[16] = { 0xfd, 0, 0, 0, 0, 0, 0, 0,
                                    0, 0, 0, 0, 0, 0, 0, 0x0a };
static const uint8_t out6_b[16] = { 0xfd, 0, 0, 0, 0, 0, 0, 0,
                                    0, 0, 0, 0, 0, 0, 0, 0x0b };

/* The outer headers of a tunnelled frame. */
struct outer {
    int ipver;                  /* 4 or 6. */
    int vlans;                  /* VLAN tags before the IP header. */
    uint16_t dport;             /* UDP destination port. */
    int ulen_delta;             /* Added to the UDP length. */
};

/* A tunnel header. */
struct tunhdr {
    enum tpm_tun_type type;     /* How it is written. */
    uint32_t vni;
    uint8_t flags;              /* VXLAN flags (0x08: I). */
    uint8_t version;            /* Geneve. */
    uint8_t optwords;           /* Geneve option length, 4-byte words. */
    uint16_t proto;             /* Geneve protocol type. */
};

static uint32_t
tunhdr_len(const struct tunhdr *t)
{
    return t->type == TPM_TUN_VXLAN ? 8 : 8 + t->optwords * 4u;
}

/* Writes into 'f' the frame of 'inner' ('inner_len' bytes) in 'o' and
 * 't'.  Returns the offset of the inner frame. */
static uint32_t
tunnel_frame(struct fb *f, const struct outer *o, const struct tunhdr *t,
             const uint8_t *inner, uint32_t inner_len)
{
    uint32_t ulen = 8 + tunhdr_len(t) + inner_len;

    memset(f, 0, sizeof *f);
    eth(f, o->vlans ? 0x8100 : o->ipver == 4 ? 0x0800 : 0x86dd);
    for (int i = 0; i < o->vlans; i++) {
        put16(f, (uint16_t) (100 + i));
        put16(f, i + 1 < o->vlans ? 0x8100
                 : o->ipver == 4 ? 0x0800 : 0x86dd);
    }
    if (o->ipver == 4) {
        /* CE and TTL 255 outside: the inner ones must be reported. */
        put8(f, 0x45);
        put8(f, 0x03);
        put16(f, (uint16_t) (20 + ulen));
        put32(f, 0);
        put8(f, 255);
        put8(f, 17);
        put16(f, 0);
        putn(f, out4_a, 4);
        putn(f, out4_b, 4);
    } else {
        put32(f, 6u << 28 | 3u << 20);
        put16(f, (uint16_t) ulen);
        put8(f, 17);
        put8(f, 255);
        putn(f, out6_a, 16);
        putn(f, out6_b, 16);
    }
    udp(f, 49152, o->dport, (uint16_t) (ulen + o->ulen_delta));
    if (t->type == TPM_TUN_VXLAN) {
        put8(f, t->flags);
        put8(f, 0);
        put16(f, 0);
        put32(f, t->vni << 8);
    } else {
        put8(f, (uint8_t) (t->version << 6 | t->optwords));
        put8(f, 0);
        put16(f, t->proto);
        put32(f, t->vni << 8);
        /* Options: one of all the words but the last, then one with no
         * data (class, type, length in words after the first). */
        for (int w = 0; w < t->optwords;) {
            int len = w + 1 < t->optwords ? t->optwords - w - 1 : 0;
            put16(f, 0x0102);
            put8(f, 0x80);
            put8(f, (uint8_t) len);
            for (int i = 0; i < len; i++) {
                put32(f, 0x11223344u + i);
            }
            w += 1 + len;
        }
    }
    uint32_t off = f->n;
    putn(f, inner, inner_len);
    return off;
}

/* The tunnel ports of the tests: VXLAN 4789 and 8472, Geneve 6081. */
static void
test_ports(struct tpm_tunnel_ports *ports)
{
    tpm_tunnel_ports_init(ports);
    ck_assert(tpm_tunnel_ports_add(ports, 4789, TPM_TUN_VXLAN));
    ck_assert(tpm_tunnel_ports_add(ports, 6081, TPM_TUN_GENEVE));
    ck_assert(tpm_tunnel_ports_add(ports, 8472, TPM_TUN_VXLAN));
}

/* Parses the first 'caplen' bytes of 'f' (an exact-size heap copy, for
 * valgrind) with 'ports' by the inline, hashing and full parsers, checks
 * that they agree and count the same, adds the counts to 'st', and
 * returns the full parse in '*p'. */
static bool
parse_tun(const struct fb *f, uint32_t caplen, uint32_t wirelen,
          const struct tpm_tunnel_ports *ports, struct tpm_pkt *p,
          struct tpm_parse_stats *st)
{
    uint8_t *buf = malloc(caplen ? caplen : 1);
    struct tpm_parse_stats st2 = *st, st3 = *st;
    struct tpm_pkt fast, hashed;

    ck_assert_ptr_nonnull(buf);
    memcpy(buf, f->b, caplen);
    memset(p, 0x5a, sizeof *p);
    memset(&fast, 0x5a, sizeof fast);
    memset(&hashed, 0x5a, sizeof hashed);
    bool ret = tpm_packet_parse_full_tun(buf, caplen, wirelen, p, st,
                                         ports);
    bool ret2 = tpm_packet_parse_counted_tun(buf, caplen, wirelen, &fast,
                                             &st2, ports);
    bool ret3 = tpm_packet_parse_hash_tun(buf, caplen, wirelen, &hashed,
                                          &st3, ports);
    free(buf);
    ck_assert(ret == ret2 && ret == ret3);
    ck_assert(pkt_equal(p, &fast));
    ck_assert(!memcmp(st, &st2, sizeof *st));
    ck_assert(!memcmp(st, &st3, sizeof *st));
    if (ret) {
        /* A decapsulated frame's hash waits for its tenant. */
        ck_assert_uint_eq(hashed.hash,
                          p->tunnel.type ? 0 : tpm_key_hash(&p->key));
        hashed.hash = 0;
        ck_assert(pkt_equal(p, &hashed));
    }
    return ret;
}

/* Every frame of the catalogue, in every tunnel: the tunnelled parse is
 * the inner frame's own parse (the independent reference), with 'bytes'
 * the inner frame's length, and the tunnel given apart; an inner frame
 * that is not parsed makes the tunnelled frame not parsed, counted as
 * tun_inner_non_ip or tun_inner_malformed. */
START_TEST(test_tunnel_inner_catalogue)
{
    static const struct outer outers[] = {
        { 4, 0, 4789, 0 }, { 6, 0, 4789, 0 }, { 4, 1, 8472, 0 },
        { 6, 2, 6081, 0 }, { 4, 0, 6081, 0 }, { 4, 0, 6081, 0 },
        { 4, 0, 6081, 0 },
    };
    static const struct tunhdr tunhdrs[] = {
        { TPM_TUN_VXLAN, 0x123456, 0x08, 0, 0, 0 },
        { TPM_TUN_VXLAN, 0xffffff, 0x08 | 0x80, 0, 0, 0 },
        { TPM_TUN_VXLAN, 0, 0x08, 0, 0, 0 },
        { TPM_TUN_GENEVE, 0xabcdef, 0, 0, 3, 0x6558 },
        { TPM_TUN_GENEVE, 1, 0, 0, 0, 0x6558 },
        { TPM_TUN_GENEVE, 2, 0, 0, 1, 0x6558 },
        { TPM_TUN_GENEVE, 3, 0, 0, 63, 0x6558 },
    };
    struct tpm_tunnel_ports ports;
    struct fb inner, f;
    struct expect e;
    int n = 0;

    test_ports(&ports);
    for (int i = 0; build_frame(i, &inner, &e); i++) {
        struct tpm_parse_stats ref_st, st, want;
        struct tpm_pkt ref, p;

        memset(&ref_st, 0, sizeof ref_st);
        bool ref_ret = tpm_packet_parse_full(inner.b, inner.n, inner.n,
                                             &ref, &ref_st);
        for (size_t k = 0; k < ARRAY_SIZE(outers); k++) {
            const struct tunhdr *t = &tunhdrs[k];
            uint32_t off = tunnel_frame(&f, &outers[k], t, inner.b,
                                        inner.n);

            memset(&st, 0, sizeof st);
            bool ret = parse_tun(&f, f.n, f.n, &ports, &p, &st);
            ck_assert_msg(ret == ref_ret, "%s/%zu", e.name, k);
            want = ref_st;
            if (ref_ret) {
                ck_assert_msg(tpm_key_equal(&p.key, &ref.key), "%s/%zu: key",
                              e.name, k);
                ck_assert_uint_eq(p.bytes, inner.n);
                ck_assert_uint_eq(p.volume, ref.volume);
                ck_assert(p.seq == ref.seq && p.ack == ref.ack
                          && p.rwnd == ref.rwnd && p.ttl == ref.ttl
                          && p.tos == ref.tos
                          && p.tcp_flags == ref.tcp_flags
                          && p.wscale == ref.wscale && p.mss == ref.mss);
                ck_assert_uint_eq(p.tunnel.type, t->type);
                ck_assert_uint_eq(p.tunnel.vni, t->vni);
                ck_assert_uint_eq(p.tunnel.inner_off, off);
                ck_assert_uint_eq(p.key.tun, 0);
                want.tun_decapsulated++;
            } else {
                enum tpm_parse_reason r = TPM_PARSE_N_REASONS;
                for (int j = 0; j < TPM_PARSE_N_REASONS; j++) {
                    if (ref_st.not_parsed[j]) {
                        r = j;
                    }
                }
                ck_assert_int_lt(r, TPM_PARSE_N_REASONS);
                want.not_parsed[r] = 0;
                want.not_parsed[r == TPM_PARSE_NON_IP
                                ? TPM_PARSE_TUN_INNER_NON_IP
                                : TPM_PARSE_TUN_INNER_MALFORMED] = 1;
                ck_assert_uint_eq(p.bytes, f.n);
                ck_assert_uint_eq(p.key.ipver, 0);
                ck_assert(p.tunnel.type == TPM_TUN_NONE && !p.tunnel.vni
                          && !p.tunnel.inner_off);
            }
            ck_assert_msg(!memcmp(&st, &want, sizeof st), "%s/%zu: counters",
                          e.name, k);
            n++;
        }
    }
    ck_assert_int_ge(n, 35 * 7);
}
END_TEST

/* An inner TCP SYN frame (IPv4, two VLAN tags) or UDP frame (IPv6, one
 * tag) for the tests below. */
static void
inner_frame(struct fb *f, bool v6)
{
    static const uint8_t opts[8] = { 2, 4, 0x05, 0xb4, 1, 3, 3, 7 };

    memset(f, 0, sizeof *f);
    eth(f, 0x88a8);
    if (!v6) {
        put16(f, 10);
        put16(f, 0x8100);
        put16(f, 20);
        put16(f, 0x0800);
        ipv4(f, 0x01, 20 + 28 + 33, 0, 61, 6, 0);
        tcp_opts(f, 40000, 22, 7, 0, TPM_TCP_SYN, 1000, opts, 8);
        payload(f, 33);
    } else {
        put16(f, 10);
        put16(f, 0x86dd);
        ipv6(f, 0, 8 + 40, 17, 44);
        udp(f, 5353, 53, 8 + 40);
        payload(f, 40);
    }
}

/* Every prefix of tunnelled frames: never a read past the capture
 * (valgrind), each prefix not parsed for the reason of the header it
 * cuts, then the inner frame's parse. */
START_TEST(test_tunnel_truncation)
{
    struct tpm_tunnel_ports ports;
    struct fb inner, f;

    test_ports(&ports);
    for (int k = 0; k < 4; k++) {
        struct outer o = { k & 1 ? 6 : 4, k >> 1, k < 2 ? 4789 : 6081, 0 };
        struct tunhdr t = { k < 2 ? TPM_TUN_VXLAN : TPM_TUN_GENEVE, 77,
                            0x08, 0, (uint8_t) (k == 3 ? 2 : 0), 0x6558 };
        inner_frame(&inner, k & 1);
        uint32_t off = tunnel_frame(&f, &o, &t, inner.b, inner.n);
        uint32_t l4off = off - tunhdr_len(&t) - 8;
        struct tpm_pkt ref;
        ck_assert(tpm_packet_parse_full(inner.b, inner.n, inner.n, &ref,
                                        NULL));

        for (uint32_t len = 0; len <= f.n; len++) {
            struct tpm_parse_stats st, want;
            struct tpm_pkt p;

            memset(&st, 0, sizeof st);
            memset(&want, 0, sizeof want);
            bool ret = parse_tun(&f, len, f.n, &ports, &p, &st);
            ck_assert_uint_eq(p.bytes, ret ? inner.n : f.n);
            if (len < l4off + 4) {
                /* The outer frame's own reasons. */
                ck_assert(!ret && !st.not_parsed[TPM_PARSE_TUN_TRUNCATED]);
                continue;
            } else if (len < off) {
                want.not_parsed[TPM_PARSE_TUN_TRUNCATED] = 1;
            } else if (!ret) {
                want.not_parsed[TPM_PARSE_TUN_INNER_MALFORMED] = 1;
            } else {
                /* The inner parse, as of its own prefix. */
                struct tpm_parse_stats ist;
                struct tpm_pkt ip;
                memset(&ist, 0, sizeof ist);
                ck_assert(tpm_packet_parse_full(inner.b, len - off,
                                                inner.n, &ip, &ist));
                ck_assert(tpm_key_equal(&ip.key, &ref.key));
                ck_assert(tpm_key_equal(&p.key, &ref.key));
                ck_assert(p.volume == ip.volume && p.mss == ip.mss
                          && p.wscale == ip.wscale && p.ttl == ip.ttl);
                ck_assert_uint_eq(p.tunnel.vni, 77);
                want = ist;
                want.tun_decapsulated = 1;
            }
            ck_assert_msg(!memcmp(&st, &want, sizeof st),
                          "tunnel %d, prefix %u: counters", k, len);
        }
    }
}
END_TEST

/* Malformed tunnel headers: each counted under its reason, not parsed. */
START_TEST(test_tunnel_malformed)
{
    struct tpm_tunnel_ports ports;
    struct fb inner, f;
    struct tpm_pkt p;
    static const struct outer v4_vxlan = { 4, 0, 4789, 0 };
    static const struct outer v4_geneve = { 4, 0, 6081, 0 };
    static const struct tunhdr vxlan = { TPM_TUN_VXLAN, 5, 0x08, 0, 0, 0 };
    static const struct tunhdr geneve = { TPM_TUN_GENEVE, 5, 0, 0, 2,
                                          0x6558 };
    struct {
        const char *name;
        struct outer o;
        struct tunhdr t;
        int cut;                /* Bytes left off the capture. */
        enum tpm_parse_reason reason;
    } cases[] = {
        /* UDP payload (by the UDP length) shorter than the header. */
        { "vxlan-short-udp", v4_vxlan, vxlan, 0, TPM_PARSE_TUN_BAD_HEADER },
        { "vxlan-no-i-flag", v4_vxlan, vxlan, 0, TPM_PARSE_TUN_BAD_HEADER },
        { "vxlan-other-flags", v4_vxlan, vxlan, 0,
          TPM_PARSE_TUN_BAD_HEADER },
        { "geneve-version-1", v4_geneve, geneve, 0,
          TPM_PARSE_TUN_BAD_HEADER },
        { "geneve-version-3", v4_geneve, geneve, 0,
          TPM_PARSE_TUN_BAD_HEADER },
        /* Options past the UDP payload, and past the capture. */
        { "geneve-options-past-udp", v4_geneve, geneve, 0,
          TPM_PARSE_TUN_BAD_HEADER },
        { "geneve-options-cut", v4_geneve, geneve, 0,
          TPM_PARSE_TUN_TRUNCATED },
        { "vxlan-header-cut", v4_vxlan, vxlan, 0, TPM_PARSE_TUN_TRUNCATED },
        { "udp-header-cut", v4_vxlan, vxlan, 0, TPM_PARSE_TUN_TRUNCATED },
        /* The inner frame: ARP, cut IP header, bad IP version. */
        { "inner-arp", v4_vxlan, vxlan, 0, TPM_PARSE_TUN_INNER_NON_IP },
        { "inner-cut", v4_geneve, geneve, 0,
          TPM_PARSE_TUN_INNER_MALFORMED },
        { "inner-bad-ip", v4_vxlan, vxlan, 0,
          TPM_PARSE_TUN_INNER_MALFORMED },
        /* A Geneve frame (version 0, 2 words of options) to a VXLAN
         * port: no I flag. */
        { "geneve-to-vxlan-port", v4_vxlan, geneve, 0,
          TPM_PARSE_TUN_BAD_HEADER },
    };

    test_ports(&ports);
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct tpm_parse_stats st, want;
        const char *name = cases[i].name;
        struct outer *o = &cases[i].o;
        struct tunhdr *t = &cases[i].t;
        bool arp = !strcmp(name, "inner-arp");
        uint32_t inner_cut = 0;

        inner_frame(&inner, false);
        if (arp) {
            struct expect e;
            ck_assert(build_frame(17, &inner, &e));
        }
        if (!strcmp(name, "vxlan-short-udp")) {
            /* 4 bytes of UDP payload by the UDP length. */
            o->ulen_delta = -(int) (8 + inner.n) + 4;
        } else if (!strcmp(name, "vxlan-no-i-flag")) {
            t->flags = 0;
        } else if (!strcmp(name, "vxlan-other-flags")) {
            t->flags = 0xf7;
        } else if (!strcmp(name, "geneve-version-1")) {
            t->version = 1;
        } else if (!strcmp(name, "geneve-version-3")) {
            t->version = 3;
        } else if (!strcmp(name, "geneve-options-past-udp")) {
            /* The UDP length ends 4 bytes into the options. */
            o->ulen_delta = -(int) (inner.n + 4);
        } else if (!strcmp(name, "geneve-options-cut")) {
            inner_cut = inner.n + 4;
        } else if (!strcmp(name, "vxlan-header-cut")) {
            inner_cut = inner.n + 1;
        } else if (!strcmp(name, "udp-header-cut")) {
            inner_cut = inner.n + 8 + 3;
        } else if (!strcmp(name, "inner-cut")) {
            inner_cut = inner.n - 14 - 8 - 10;  /* 10 bytes of IP. */
        } else if (!strcmp(name, "inner-bad-ip")) {
            inner.b[22] = 0x65;                 /* IPv6 in an IPv4 type. */
        }
        tunnel_frame(&f, o, t, inner.b, inner.n);
        memset(&st, 0, sizeof st);
        memset(&want, 0, sizeof want);
        ck_assert_msg(!parse_tun(&f, f.n - inner_cut, f.n, &ports, &p, &st),
                      "%s: parsed", name);
        want.not_parsed[cases[i].reason] = 1;
        ck_assert_msg(!memcmp(&st, &want, sizeof st), "%s: counters",
                      name);
        ck_assert_uint_eq(p.key.ipver, 0);
        ck_assert_uint_eq(p.bytes, f.n);
        ck_assert(p.tunnel.type == TPM_TUN_NONE && !p.tunnel.vni
                  && !p.tunnel.inner_off);
    }
}
END_TEST

/* What is not decapsulated is parsed as without tunnel ports: UDP to
 * other ports (including one sharing a fast-path bit with a tunnel port),
 * any frame with the empty set, later fragments, Geneve carrying IPv4
 * rather than Ethernet (counted). */
START_TEST(test_tunnel_not_decapsulated)
{
    struct tpm_tunnel_ports ports, empty;
    struct fb inner, f;
    struct tpm_pkt p, ref;
    struct tpm_parse_stats st, ref_st;

    test_ports(&ports);
    tpm_tunnel_ports_init(&empty);
    inner_frame(&inner, false);

    static const uint16_t dports[] = { 4790, 4789 + 64, 6081 - 64, 53 };
    for (size_t i = 0; i < ARRAY_SIZE(dports) + 2; i++) {
        struct outer o = { i & 1 ? 6 : 4, 0, 4789, 0 };
        struct tunhdr t = { TPM_TUN_VXLAN, 9, 0x08, 0, 0, 0 };
        const struct tpm_tunnel_ports *set = &ports;
        if (i < ARRAY_SIZE(dports)) {
            o.dport = dports[i];
        } else {
            set = i == ARRAY_SIZE(dports) ? &empty : NULL;
        }
        tunnel_frame(&f, &o, &t, inner.b, inner.n);
        memset(&st, 0, sizeof st);
        memset(&ref_st, 0, sizeof ref_st);
        ck_assert(parse_tun(&f, f.n, f.n, set, &p, &st));
        ck_assert(tpm_packet_parse_full(f.b, f.n, f.n, &ref, &ref_st));
        ck_assert(pkt_equal(&p, &ref));
        ck_assert(!memcmp(&st, &ref_st, sizeof st));
        ck_assert_uint_eq(p.key.proto, 17);
        ck_assert_uint_eq(p.key.dport, o.dport);
        ck_assert_uint_eq(p.tunnel.type, TPM_TUN_NONE);
    }

    /* Geneve carrying IPv4 (protocol type 0x0800): the outer flow. */
    struct outer o = { 4, 0, 6081, 0 };
    struct tunhdr t = { TPM_TUN_GENEVE, 9, 0, 0, 1, 0x0800 };
    tunnel_frame(&f, &o, &t, inner.b + 22, inner.n - 22);
    memset(&st, 0, sizeof st);
    memset(&ref_st, 0, sizeof ref_st);
    ck_assert(parse_tun(&f, f.n, f.n, &ports, &p, &st));
    ck_assert(tpm_packet_parse_full(f.b, f.n, f.n, &ref, &ref_st));
    ck_assert(pkt_equal(&p, &ref));
    ck_assert_uint_eq(st.tun_not_decapsulated, 1);
    st.tun_not_decapsulated = 0;
    ck_assert(!memcmp(&st, &ref_st, sizeof st));

    /* A later fragment of a datagram to a VXLAN port: no UDP header. */
    o.dport = 4789;
    t.type = TPM_TUN_VXLAN;
    t.flags = 0x08;
    tunnel_frame(&f, &o, &t, inner.b, inner.n);
    f.b[14 + 6] = 0x00;
    f.b[14 + 7] = 0x10;                 /* Offset 128 bytes. */
    memset(&st, 0, sizeof st);
    ck_assert(parse_tun(&f, f.n, f.n, &ports, &p, &st));
    ck_assert_uint_eq(p.key.proto, 17);
    ck_assert_uint_eq(p.key.dport, 0);
    ck_assert_uint_eq(p.tunnel.type, TPM_TUN_NONE);
    ck_assert_uint_eq(st.tun_decapsulated, 0);
}
END_TEST

/* The inner frame's IPv4 total length 0 is taken from the inner frame's
 * length (the UDP payload's less the tunnel header), an outer one from
 * the frame's; both counted once. */
START_TEST(test_tunnel_total_length_0)
{
    struct tpm_tunnel_ports ports;
    struct fb inner, f;
    struct tpm_parse_stats st;
    struct tpm_pkt p, ref;

    test_ports(&ports);
    inner_frame(&inner, false);
    ck_assert(tpm_packet_parse_full(inner.b, inner.n, inner.n, &ref, NULL));
    inner.b[22 + 2] = inner.b[22 + 3] = 0;

    struct outer o = { 4, 0, 4789, 0 };
    struct tunhdr t = { TPM_TUN_VXLAN, 9, 0x08, 0, 0, 0 };
    for (int outer0 = 0; outer0 < 2; outer0++) {
        uint32_t off = tunnel_frame(&f, &o, &t, inner.b, inner.n);
        if (outer0) {
            f.b[14 + 2] = f.b[14 + 3] = 0;
        }
        memset(&st, 0, sizeof st);
        ck_assert(parse_tun(&f, f.n, f.n, &ports, &p, &st));
        ck_assert(tpm_key_equal(&p.key, &ref.key));
        ck_assert_uint_eq(p.volume, ref.volume);
        ck_assert_uint_eq(p.bytes, f.n - off);
        ck_assert_uint_eq(st.ip_len_from_frame, 1);
        ck_assert_uint_eq(st.tun_decapsulated, 1);
    }
}
END_TEST

/* Tunnel port sets: add, lookup, parse, format. */
START_TEST(test_tunnel_ports)
{
    struct tpm_tunnel_ports ports;
    char buf[TPM_TUNNEL_PORTS_STRLEN];
    char *error;

    tpm_tunnel_ports_init(&ports);
    ck_assert_uint_eq(tpm_tunnel_ports_lookup(&ports, 4789), TPM_TUN_NONE);
    ck_assert_uint_eq(tpm_tunnel_ports_lookup(NULL, 4789), TPM_TUN_NONE);
    ck_assert_str_eq(tpm_tunnel_ports_format(&ports, buf, sizeof buf),
                     "none");
    ck_assert(!tpm_tunnel_ports_add(&ports, 0, TPM_TUN_VXLAN));
    ck_assert(!tpm_tunnel_ports_add(&ports, 1, TPM_TUN_NONE));
    ck_assert(!tpm_tunnel_ports_add(&ports, 1, TPM_TUN_N_TYPES));
    ck_assert(tpm_tunnel_ports_add(&ports, 4789, TPM_TUN_VXLAN));
    ck_assert(tpm_tunnel_ports_add(&ports, 4789, TPM_TUN_VXLAN));
    ck_assert(!tpm_tunnel_ports_add(&ports, 4789, TPM_TUN_GENEVE));
    ck_assert_uint_eq(ports.n, 1);
    for (int i = 1; i < TPM_TUNNEL_PORTS_MAX; i++) {
        ck_assert(tpm_tunnel_ports_add(&ports, 65535 - i, TPM_TUN_GENEVE));
    }
    ck_assert(!tpm_tunnel_ports_add(&ports, 100, TPM_TUN_GENEVE));
    ck_assert_uint_eq(tpm_tunnel_ports_lookup(&ports, 65534),
                      TPM_TUN_GENEVE);
    ck_assert_uint_eq(tpm_tunnel_ports_lookup(&ports, 4789), TPM_TUN_VXLAN);
    ck_assert_uint_eq(tpm_tunnel_ports_lookup(&ports, 4789 + 64),
                      TPM_TUN_NONE);
    tpm_tunnel_ports_format(&ports, buf, sizeof buf);
    ck_assert_uint_lt(strlen(buf), sizeof buf);

    ck_assert_ptr_null(tpm_tunnel_ports_parse("vxlan,geneve:6082,"
                                              "vxlan:8472", &ports));
    ck_assert_uint_eq(ports.n, 3);
    ck_assert_str_eq(tpm_tunnel_ports_format(&ports, buf, sizeof buf),
                     "vxlan:4789,geneve:6082,vxlan:8472");
    struct tpm_tunnel_ports again;
    ck_assert_ptr_null(tpm_tunnel_ports_parse(buf, &again));
    ck_assert(!memcmp(&again, &ports, sizeof ports));
    ck_assert_ptr_null(tpm_tunnel_ports_parse("geneve", &ports));
    ck_assert_uint_eq(tpm_tunnel_ports_lookup(&ports, 6081),
                      TPM_TUN_GENEVE);
    ck_assert_ptr_null(tpm_tunnel_ports_parse("", &ports));
    ck_assert_uint_eq(ports.n, 0);
    ck_assert_ptr_null(tpm_tunnel_ports_parse("none", &ports));
    ck_assert_uint_eq(ports.n, 0);
    ck_assert_uint_eq(ports.bloom, 0);

    static const char *const bad[][2] = {
        { "gre", "column 1: 'gre' is not a tunnel type" },
        { "vxlan,", "column 7: '' is not a tunnel type" },
        { "vxlan:", "column 7: '' is not a UDP port" },
        { "vxlan:0", "column 7: '0' is not a UDP port" },
        { "geneve:65536", "column 8: '65536' is not a UDP port" },
        { "vxlan:47x", "column 7: '47x' is not a UDP port" },
        { "vxlan,geneve:4789", "column 7: 'geneve:4789': port already" },
        { "vxlan:1,vxlan:2,vxlan:3,vxlan:4,vxlan:5,vxlan:6,vxlan:7,"
          "vxlan:8,vxlan:9", "column 65: 'vxlan:9': too many tunnel ports" },
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        error = tpm_tunnel_ports_parse(bad[i][0], &ports);
        ck_assert_ptr_nonnull(error);
        ck_assert_msg(!strncmp(error, bad[i][1], strlen(bad[i][1])),
                      "'%s': %s", bad[i][0], error);
        ck_assert_uint_eq(ports.n, 0);
        free(error);
    }
    ck_assert_str_eq(tpm_tun_type_name(TPM_TUN_VXLAN), "vxlan");
    ck_assert_str_eq(tpm_tun_type_name(TPM_TUN_GENEVE), "geneve");
    ck_assert_str_eq(tpm_tun_type_name(TPM_TUN_NONE), "none");
    ck_assert_str_eq(tpm_tun_type_name(TPM_TUN_N_TYPES), "?");
}
END_TEST

/* Garbage after a tunnel header: never crash nor read beyond the
 * capture (valgrind); the three parsers agree. */
START_TEST(test_tunnel_garbage)
{
    struct tpm_tunnel_ports ports;
    struct test_rng rng;
    struct fb inner, f;

    test_ports(&ports);
    test_rng_seed(&rng, 0x7e1);
    for (int i = 0; i < 3000; i++) {
        inner.n = test_rng_range(&rng, 100);
        for (uint32_t j = 0; j < inner.n; j++) {
            inner.b[j] = (uint8_t) test_rng_u32(&rng);
        }
        if (inner.n >= 15 && test_rng_range(&rng, 2)) {
            inner.b[12] = 0x08;
            inner.b[13] = 0;
            inner.b[14] = 0x45;
        }
        struct outer o = { test_rng_range(&rng, 2) ? 4 : 6,
                           (int) test_rng_range(&rng, 2),
                           test_rng_range(&rng, 2) ? 4789 : 6081,
                           (int) test_rng_range(&rng, 40) - 20 };
        struct tunhdr t = { o.dport == 4789 ? TPM_TUN_VXLAN
                                            : TPM_TUN_GENEVE,
                            test_rng_u32(&rng) & 0xffffff,
                            (uint8_t) test_rng_u32(&rng),
                            (uint8_t) test_rng_range(&rng, 2),
                            (uint8_t) test_rng_range(&rng, 8),
                            test_rng_range(&rng, 4) ? 0x6558 : 0x0800 };
        tunnel_frame(&f, &o, &t, inner.b, inner.n);
        struct tpm_parse_stats st;
        struct tpm_pkt p;
        memset(&st, 0, sizeof st);
        uint32_t caplen = f.n - test_rng_range(&rng, f.n / 4 + 1);
        bool ret = parse_tun(&f, caplen, f.n, &ports, &p, &st);
        TCHECK(ret || p.key.ipver == 0, "not parsed with ipver");
        TCHECK(!p.tunnel.type || p.bytes <= f.n, "bytes %u", p.bytes);
    }
}
END_TEST

/* Fills 'f' with a random frame of up to 100 bytes near the inline
 * parser's common case (untagged IPv4 without options, TCP or UDP): each
 * field it checks is usually what it takes and sometimes not (EtherType,
 * version and header length, fragment bits, protocol, total length, TCP
 * flags), and the UDP ports are often tunnel ports or share their bits
 * in the tunnel-port bitmap. */
static void
near_fast_frame(struct test_rng *rng, struct fb *f)
{
    static const uint16_t ports[] = { 4789, 6081, 8472, 4789 + 64,
                                      6081 + 128, 53, 0 };
    static const uint8_t protos[] = { 6, 17, 17, 6, 1, 132, 47 };

    f->n = 14 + 20 + test_rng_range(rng, 66);
    for (uint32_t j = 0; j < f->n; j++) {
        f->b[j] = (uint8_t) test_rng_u32(rng);
    }
    if (test_rng_range(rng, 8)) {
        f->b[12] = 0x08;
        f->b[13] = test_rng_range(rng, 8) ? 0 : 0xdd;
    }
    if (test_rng_range(rng, 8)) {
        f->b[14] = 0x45;
    }
    if (test_rng_range(rng, 4)) {
        f->b[20] &= test_rng_range(rng, 2) ? 0x40 : 0xe0;
        f->b[21] = test_rng_range(rng, 4) ? 0 : f->b[21];
    }
    f->b[23] = protos[test_rng_range(rng, ARRAY_SIZE(protos))];
    uint32_t tot = test_rng_range(rng, 4) ? f->n - 14
                                          : test_rng_range(rng, 120);
    f->b[16] = (uint8_t) (tot >> 8);
    f->b[17] = (uint8_t) tot;
    if (f->n >= 14 + 20 + 4 && test_rng_range(rng, 2)) {
        uint16_t port = ports[test_rng_range(rng, ARRAY_SIZE(ports))];
        f->b[36] = (uint8_t) (port >> 8);
        f->b[37] = (uint8_t) port;
    }
    if (f->n >= 14 + 20 + 14 && f->b[23] == 6 && test_rng_range(rng, 4)) {
        f->b[47] &= (uint8_t) ~TPM_TCP_SYN;
    }
}

/* The inline parser (and its hash) against the full parser on random
 * frames near its common case, cut anywhere, plain and as the inner frame
 * of VXLAN and Geneve tunnels: the same packet, counters and hash. */
START_TEST(test_fast_path_random)
{
    struct tpm_tunnel_ports ports, none;
    struct test_rng rng;
    struct fb inner, f;
    int parsed = 0, decap = 0;

    test_ports(&ports);
    tpm_tunnel_ports_init(&none);
    test_rng_seed(&rng, 0xfa57);
    for (int i = 0; i < 40000; i++) {
        struct tpm_parse_stats st;
        struct tpm_pkt p;
        memset(&st, 0, sizeof st);
        near_fast_frame(&rng, &inner);
        if (test_rng_range(&rng, 2)) {
            struct outer o = { test_rng_range(&rng, 4) ? 4 : 6, 0,
                               test_rng_range(&rng, 2) ? 4789 : 6081, 0 };
            struct tunhdr t = { o.dport == 4789 ? TPM_TUN_VXLAN
                                                : TPM_TUN_GENEVE,
                                test_rng_u32(&rng) & 0xffffff,
                                test_rng_range(&rng, 8) ? 0x08 : 0,
                                0, (uint8_t) test_rng_range(&rng, 3),
                                test_rng_range(&rng, 8) ? 0x6558 : 0x0800 };
            tunnel_frame(&f, &o, &t, inner.b, inner.n);
        } else {
            f = inner;
        }
        uint32_t caplen = (test_rng_range(&rng, 4)
                           ? f.n : test_rng_range(&rng, f.n + 1));
        bool ret = parse_tun(&f, caplen, f.n + 4,
                             test_rng_range(&rng, 4) ? &ports : &none, &p,
                             &st);
        parsed += ret;
        decap += ret && p.tunnel.type;
    }
    /* The interesting paths were taken. */
    ck_assert_int_gt(parsed, 10000);
    ck_assert_int_gt(decap, 2000);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Hashing. */

static struct tpm_key
random_key(struct test_rng *rng)
{
    struct tpm_key k;

    memset(&k, 0, sizeof k);
    k.ipver = test_rng_range(rng, 4) ? 4 : 6;
    int words = k.ipver == 4 ? 1 : 4;
    for (int i = 0; i < words; i++) {
        k.src[i] = test_rng_u32(rng);
        k.dst[i] = test_rng_u32(rng);
    }
    k.sport = (uint16_t) test_rng_u32(rng);
    k.dport = (uint16_t) test_rng_u32(rng);
    k.proto = (uint8_t) test_rng_u32(rng);
    return k;
}

START_TEST(test_hash_equal_keys)
{
    struct test_rng rng;

    const char *impl = tpm_key_hash_impl();
    ck_assert_ptr_nonnull(impl);
    ck_assert(!strcmp(impl, "crc32c-sse4.2") || !strcmp(impl, "portable"));

    test_rng_seed(&rng, 0x4a54);
    uint32_t differ = 0;
    for (int i = 0; i < 10000; i++) {
        struct tpm_key a = random_key(&rng), b;
        /* An equal key built separately, through a byte copy. */
        uint8_t bytes[sizeof a];
        memcpy(bytes, &a, sizeof a);
        memcpy(&b, bytes, sizeof b);
        TCHECK(tpm_key_hash(&a) == tpm_key_hash(&b), "equal keys");
        TCHECK(tpm_key_hash(&a) == tpm_key_hash(&a), "deterministic");

        /* Flipping any single bit should change the hash (not required
         * by the spec for every bit, but a hash that ignores a field is
         * broken: count). */
        int bit = (int) test_rng_range(&rng, 8 * 38);
        bytes[bit / 8] ^= (uint8_t) (1 << (bit % 8));
        memcpy(&b, bytes, sizeof b);
        differ += tpm_key_hash(&a) != tpm_key_hash(&b);
    }
    ck_assert_uint_ge(differ, 9990);

    /* Parsing the same frame twice gives keys with equal hashes. */
    struct fb f;
    struct expect e;
    struct tpm_pkt p1, p2;
    ck_assert(build_frame(11, &f, &e));
    tpm_packet_parse(f.b, f.n, f.n, &p1);
    tpm_packet_parse(f.b, f.n, f.n + 100, &p2);
    ck_assert(tpm_key_equal(&p1.key, &p2.key));
    ck_assert_uint_eq(tpm_key_hash(&p1.key), tpm_key_hash(&p2.key));
}
END_TEST

/* Chi-square statistic of 'n' hashes' low 'bits' bits. */
static double
chi_square(const uint32_t *h, uint32_t n, int bits)
{
    uint32_t n_bins = 1u << bits;
    uint32_t *bins = calloc(n_bins, sizeof *bins);
    for (uint32_t i = 0; i < n; i++) {
        bins[h[i] & (n_bins - 1)]++;
    }
    double mean = (double) n / n_bins, chi = 0;
    for (uint32_t b = 0; b < n_bins; b++) {
        double d = bins[b] - mean;
        chi += d * d / mean;
    }
    free(bins);
    return chi;
}

/* Checks that the low 16 (and 8) bits are roughly uniform: the chi-square
 * statistic with k - 1 degrees of freedom has mean k - 1 and standard
 * deviation sqrt(2(k - 1)); allow 8 standard deviations. */
static void
check_uniform(const uint32_t *h, uint32_t n, const char *what)
{
    static const int bit_counts[] = { 16, 8, 4 };
    for (size_t i = 0; i < ARRAY_SIZE(bit_counts); i++) {
        int bits = bit_counts[i];
        double df = (double) (1u << bits) - 1;
        double chi = chi_square(h, n, bits);
        double bound = df + 8 * sqrt(2 * df);
        ck_assert_msg(chi < bound, "%s: chi-square of low %d bits %.1f "
                      "exceeds %.1f", what, bits, chi, bound);
    }
}

/* Inserts the 'n' hashes into a linear-probing table of 2**bits slots and
 * checks that the mean displacement is within 1.5 times Knuth's estimate
 * for random hashing, (1 + 1 / (1 - load)) / 2 - 1. */
static void
check_probe_cost(const uint32_t *h, uint32_t n, int bits, const char *what)
{
    uint32_t size = 1u << bits, mask = size - 1;
    uint8_t *used = calloc(size, 1);
    uint64_t total = 0;

    ck_assert_uint_lt(n, size);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t s = h[i] & mask;
        while (used[s]) {
            s = (s + 1) & mask;
            total++;
        }
        used[s] = 1;
    }
    free(used);
    double load = (double) n / size;
    double expect = (1 + 1 / (1 - load)) / 2 - 1;
    double mean = (double) total / n;
    ck_assert_msg(mean < 1.5 * expect, "%s: mean linear-probing displacement "
                  "%.3f in 2^%d slots, %.3f expected", what, mean, bits,
                  expect);
}

START_TEST(test_hash_uniform)
{
    enum { N = 100000 };
    struct test_rng rng;
    uint32_t *h = calloc(N, sizeof *h);

    test_rng_seed(&rng, 0x5eed5);
    for (uint32_t i = 0; i < N; i++) {
        struct tpm_key k = random_key(&rng);
        h[i] = tpm_key_hash(&k);
    }
    check_uniform(h, N, "random keys");
    check_probe_cost(h, N, 17, "random keys");
    check_probe_cost(h, N, 18, "random keys");
    free(h);
}
END_TEST

/* Checks that 'n' hashes hit at least 95% of the buckets that random
 * values would hit, in expectation, in 2**bits buckets. */
static void
check_bucket_spread(const uint32_t *h, uint32_t n, int bits, const char *what)
{
    uint32_t size = 1u << bits, mask = size - 1, distinct = 0;
    uint8_t *seen = calloc(size, 1);

    for (uint32_t i = 0; i < n; i++) {
        if (!seen[h[i] & mask]) {
            seen[h[i] & mask] = 1;
            distinct++;
        }
    }
    free(seen);
    double expect = size * (1 - exp(n * log1p(-1.0 / size)));
    ck_assert_msg(distinct >= 0.95 * expect, "%s: %u keys hit %u of 2^%d "
                  "buckets, random hashing hits %.0f", what, n, distinct,
                  bits, expect);
}

/* Key sets as found in real traffic: the table index (the hash's low
 * bits) must spread them about as well as random values would. */
START_TEST(test_hash_structured_keys)
{
    enum { N = 240000 };
    /* Static: a failing check must not leak it (CK_FORK=no). */
    static uint32_t h[N];
    uint32_t n;

    /* One client-server pair, every source port (a load generator, a NAT
     * gateway). */
    n = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        struct tpm_key k;
        uint8_t src[4] = { 10, 0, 0, 1 }, dst[4] = { 10, 0, 0, 2 };
        memset(&k, 0, sizeof k);
        k.ipver = 4;
        k.proto = 6;
        memcpy(&k.src[0], src, 4);
        memcpy(&k.dst[0], dst, 4);
        k.sport = (uint16_t) i;
        k.dport = 80;
        h[n++] = tpm_key_hash(&k);
    }
    check_bucket_spread(h, n, 16, "one pair, all source ports");
    check_bucket_spread(h, n, 17, "one pair, all source ports");
    check_bucket_spread(h, n, 18, "one pair, all source ports");
    check_probe_cost(h, n, 17, "one pair, all source ports");

    /* Clients 10.0.x.y to one server. */
    n = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        struct tpm_key k;
        uint8_t src[4] = { 10, 0, (uint8_t) (i >> 8), (uint8_t) i };
        uint8_t dst[4] = { 192, 168, 1, 1 };
        memset(&k, 0, sizeof k);
        k.ipver = 4;
        k.proto = 6;
        memcpy(&k.src[0], src, 4);
        memcpy(&k.dst[0], dst, 4);
        k.sport = 40000;
        k.dport = 80;
        h[n++] = tpm_key_hash(&k);
    }
    check_bucket_spread(h, n, 16, "clients 10.0.x.y");
    check_bucket_spread(h, n, 17, "clients 10.0.x.y");
    check_probe_cost(h, n, 17, "clients 10.0.x.y");

    /* Clients 10.0.x.y with sequential source ports. */
    n = 0;
    for (uint32_t i = 0; i < 100000; i++) {
        struct tpm_key k;
        uint8_t src[4] = { 10, 0, (uint8_t) (i >> 8), (uint8_t) i };
        uint8_t dst[4] = { 192, 168, 1, 1 };
        memset(&k, 0, sizeof k);
        k.ipver = 4;
        k.proto = 6;
        memcpy(&k.src[0], src, 4);
        memcpy(&k.dst[0], dst, 4);
        k.sport = (uint16_t) (1024 + i % 1000);
        k.dport = 80;
        h[n++] = tpm_key_hash(&k);
    }
    check_bucket_spread(h, n, 17, "clients and ports");
    check_probe_cost(h, n, 17, "clients and ports");
    check_probe_cost(h, n, 18, "clients and ports");

    /* Four clients, source ports 1024-59999, to one HTTPS server. */
    n = 0;
    for (uint32_t i = 0; i < 4 * (60000 - 1024); i++) {
        struct tpm_key k;
        uint8_t src[4] = { 10, 0, 0, (uint8_t) (1 + i % 4) };
        uint8_t dst[4] = { 10, 0, 0, 200 };
        memset(&k, 0, sizeof k);
        k.ipver = 4;
        k.proto = 6;
        memcpy(&k.src[0], src, 4);
        memcpy(&k.dst[0], dst, 4);
        k.sport = (uint16_t) (1024 + i / 4);
        k.dport = 443;
        h[n++] = tpm_key_hash(&k);
    }
    ck_assert_uint_le(n, N);
    check_bucket_spread(h, n, 18, "four clients");
    check_probe_cost(h, n, 19, "four clients");

    /* Sequential UDP ports between two hosts, both ports varying. */
    n = 0;
    for (uint32_t i = 0; i < 100000; i++) {
        struct tpm_key k;
        uint8_t src[4] = { 10, 0, 0, 1 }, dst[4] = { 10, 0, 0, 2 };
        memset(&k, 0, sizeof k);
        k.ipver = 4;
        k.proto = 17;
        memcpy(&k.src[0], src, 4);
        memcpy(&k.dst[0], dst, 4);
        k.sport = (uint16_t) i;
        k.dport = (uint16_t) (i >> 16 | 0x1000);
        h[n++] = tpm_key_hash(&k);
    }
    check_bucket_spread(h, n, 17, "sequential ports");
    check_probe_cost(h, n, 17, "sequential ports");
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Formatting. */

/* tpm_frame_build() writes frames that parse back into their key, for
 * every protocol shape, IPv4 and IPv6, at the requested length. */
START_TEST(test_frame_build)
{
    static const uint8_t protos[] = { 6, 17, 132, 1, 58, 47 };
    uint8_t buf[2048];
    uint64_t r = 12345;
    for (int i = 0; i < 600; i++) {
        struct tpm_key k;
        memset(&k, 0, sizeof k);
        k.ipver = i & 1 ? 6 : 4;
        k.proto = protos[i % ARRAY_SIZE(protos)];
        if (k.ipver == 4 && k.proto == 58) {
            k.proto = 1;
        } else if (k.ipver == 6 && k.proto == 1) {
            k.proto = 58;
        }
        for (int w = 0; w < (k.ipver == 4 ? 1 : 4); w++) {
            r = r * 6364136223846793005ULL + 1442695040888963407ULL;
            k.src[w] = r >> 32;
            k.dst[w] = (uint32_t) r;
        }
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        if (k.proto == 6 || k.proto == 17 || k.proto == 132) {
            k.sport = r >> 48;
            k.dport = r >> 32;
        } else if (k.proto == 1 || k.proto == 58) {
            k.sport = (r >> 48) & 0xff;
            k.dport = (r >> 32) & 0xff;
        }
        uint32_t want = 60 + (i * 7) % 1400;
        uint32_t len = tpm_frame_build(buf, sizeof buf, &k, want);
        ck_assert_uint_ge(len, want);
        ck_assert_uint_le(len, MAX(want, 14 + 40 + 20));

        struct tpm_pkt a, b;
        ck_assert(tpm_packet_parse_full(buf, len, len, &a, NULL));
        ck_assert(tpm_packet_parse(buf, len, len, &b));
        ck_assert_mem_eq(&a.key, &k, sizeof k);
        ck_assert_mem_eq(&b.key, &k, sizeof k);
        ck_assert_uint_eq(a.bytes, len);
    }
    struct tpm_key none;
    memset(&none, 0, sizeof none);
    ck_assert_uint_eq(tpm_frame_build(buf, sizeof buf, &none, 64), 0);
    struct tpm_key v6 = { .ipver = 6, .proto = 6 };
    ck_assert_uint_eq(tpm_frame_build(buf, 60, &v6, 60), 0);   /* 74. */
}
END_TEST

START_TEST(test_key_format)
{
    struct fb f;
    struct expect e;
    struct tpm_pkt p;
    char buf[TPM_KEY_STRLEN];

    ck_assert(build_frame(0, &f, &e));
    ck_assert(tpm_packet_parse(f.b, f.n, f.n, &p));
    ck_assert_ptr_eq(tpm_key_format(&p.key, buf, sizeof buf), buf);
    ck_assert_str_eq(buf, "6 10.1.2.3:43210 > 192.168.0.77:443");

    ck_assert(build_frame(11, &f, &e));
    ck_assert(tpm_packet_parse(f.b, f.n, f.n, &p));
    tpm_key_format(&p.key, buf, sizeof buf);
    ck_assert_str_eq(buf, "17 [2001:db8::1]:123 > [fe80::abcd]:124");

    ck_assert(build_frame(7, &f, &e));
    ck_assert(tpm_packet_parse(f.b, f.n, f.n, &p));
    tpm_key_format(&p.key, buf, sizeof buf);
    ck_assert_str_eq(buf, "1 10.1.2.3:8 > 192.168.0.77:0");

    ck_assert(build_frame(17, &f, &e));
    ck_assert(!tpm_packet_parse(f.b, f.n, f.n, &p));
    tpm_key_format(&p.key, buf, sizeof buf);
    ck_assert_str_eq(buf, "non-ip");

    /* A longest IPv6 key fits in TPM_KEY_STRLEN. */
    struct tpm_key k;
    memset(&k, 0xff, sizeof k);
    k.ipver = 6;
    k.tun = 0;
    tpm_key_format(&k, buf, sizeof buf);
    ck_assert_str_eq(buf, "255 [ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:"
                     "65535 > [ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:"
                     "65535");

    /* Truncation to a small buffer. */
    char small[8];
    memset(small, 'x', sizeof small);
    ck_assert(build_frame(0, &f, &e));
    ck_assert(tpm_packet_parse(f.b, f.n, f.n, &p));
    tpm_key_format(&p.key, small, sizeof small);
    ck_assert_str_eq(small, "6 10.1.");

    /* Addresses alone. */
    tpm_addr_format(p.key.src, 4, buf, sizeof buf);
    ck_assert_str_eq(buf, "10.1.2.3");
    uint32_t w6[4];
    memcpy(w6, ip6_b, 16);
    tpm_addr_format(w6, 6, buf, sizeof buf);
    ck_assert_str_eq(buf, "fe80::abcd");
}
END_TEST

/* IPv4 addresses are formatted by hand: against inet_ntop() for the
 * corner values and 100,000 random ones, alone and as key fields with
 * every prefix length (against snprintf()). */
START_TEST(test_addr_format_v4)
{
    static const uint32_t corners[] = {
        0, 0xffffffff, 0x0a000001, 0x7f000001, 0x01020304, 0x09090909,
        0x0a0a0a0a, 0x63636363, 0x64646464, 0xc0a80001, 0x000000ff,
    };
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    char got[INET6_ADDRSTRLEN], want[INET6_ADDRSTRLEN];

    for (size_t i = 0; i < 100000 + ARRAY_SIZE(corners); i++) {
        uint32_t w[4] = { 0, 0, 0, 0 };
        if (i < ARRAY_SIZE(corners)) {
            w[0] = htonl(corners[i]);
        } else {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            w[0] = seed >> 32;
        }
        ck_assert_ptr_eq(tpm_addr_format(w, 4, got, sizeof got), got);
        ck_assert_ptr_nonnull(inet_ntop(AF_INET, w, want, sizeof want));
        ck_assert_str_eq(got, want);

        int plen = i % 33;
        struct tpm_key mask = { .ipver = 4 }, key = { .ipver = 4 };
        mask.dst[0] = htonl(plen ? 0xffffffffu << (32 - plen) : 0);
        if (!plen) {
            mask.src[0] = htonl(0xffffffffu);   /* Some field to show. */
        }
        key.src[0] = key.dst[0] = w[0];
        struct tpm_key_field f[TPM_KEY_FIELDS_MAX];
        ck_assert_int_eq(tpm_key_fields(&mask, &key, 0, f), 1);
        char ref[64];
        if (plen == 0 || plen == 32) {
            snprintf(ref, sizeof ref, "%s", want);
        } else {
            snprintf(ref, sizeof ref, "%s/%d", want, plen);
        }
        ck_assert_str_eq(f[0].str_value, ref);
    }

    /* Too small a buffer: "?" as before (inet_ntop()'s ENOSPC). */
    uint32_t w[4] = { htonl(0xc0a80001), 0, 0, 0 };
    char small[8];
    tpm_addr_format(w, 4, small, sizeof small);
    ck_assert_str_eq(small, "?");
}
END_TEST

static Suite *
packet_suite(void)
{
    Suite *s = suite_create("packet");
    TCase *tc = tcase_create("parse");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_ipv4_tcp_options);
    tcase_add_test(tc, test_tcp_syn_options);
    tcase_add_test(tc, test_ipv4_ip_options);
    tcase_add_test(tc, test_ipv4_udp);
    tcase_add_test(tc, test_eth_padding);
    tcase_add_test(tc, test_vlan);
    tcase_add_test(tc, test_ipv4_fragments);
    tcase_add_test(tc, test_ipv6);
    tcase_add_test(tc, test_icmp_sctp_other);
    tcase_add_test(tc, test_non_ip);
    tcase_add_test(tc, test_ipv6_tcp_cut_64);
    tcase_add_test(tc, test_ipv4_cut_50);
    tcase_add_test(tc, test_ipv4_total_length_0);
    tcase_add_test(tc, test_ipv6_bad_extension_headers);
    tcase_add_test(tc, test_not_parsed_reasons);
    tcase_add_test(tc, test_ecn);
    tcase_add_test(tc, test_byte_order);
    tcase_add_test(tc, test_truncation);
    tcase_add_test(tc, test_random_garbage);
    suite_add_tcase(s, tc);

    TCase *tt = tcase_create("tunnel");
    tcase_set_timeout(tt, 120);
    tcase_add_test(tt, test_tunnel_inner_catalogue);
    tcase_add_test(tt, test_tunnel_truncation);
    tcase_add_test(tt, test_tunnel_malformed);
    tcase_add_test(tt, test_tunnel_not_decapsulated);
    tcase_add_test(tt, test_tunnel_total_length_0);
    tcase_add_test(tt, test_tunnel_ports);
    tcase_add_test(tt, test_tunnel_garbage);
    tcase_add_test(tt, test_fast_path_random);
    suite_add_tcase(s, tt);

    TCase *th = tcase_create("hash-format");
    tcase_set_timeout(th, 120);
    tcase_add_test(th, test_hash_equal_keys);
    tcase_add_test(th, test_hash_uniform);
    tcase_add_test(th, test_hash_structured_keys);
    tcase_add_test(th, test_key_format);
    tcase_add_test(th, test_addr_format_v4);
    tcase_add_test(th, test_frame_build);
    suite_add_tcase(s, th);
    return s;
}

int
main(void)
{
    return test_run_suite(packet_suite());
}
