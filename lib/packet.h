/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Packet parsing into a flow key and the per-packet variables.
 *
 * A frame is parsed exactly once, into a 'struct tpm_pkt': the 5-tuple key
 * (IPv4 or IPv6) and the few header fields the per-packet variables of the
 * event language need (paper Table 1).  The key is 40 bytes, laid out so
 * that it can be hashed as five 64-bit words and compared with memcmp; all
 * padding is zero.  Addresses are kept in network byte order (as 32-bit
 * words exactly as they appear on the wire), ports in host byte order.
 * IPv4 addresses occupy word 0, words 1-3 are zero.
 *
 * Frames that are not parsed (not IP, or cut or malformed headers) parse
 * into a key with ipver 0: they are counted by reason ('struct
 * tpm_parse_stats') and never matched against triggers.
 *
 * Tunnels.  Given a set of tunnel ports ('struct tpm_tunnel_ports': UDP
 * destination ports, each VXLAN or Geneve), the parser decapsulates: a
 * frame whose outer header is IPv4 or IPv6 (with or without VLAN tags)
 * and UDP to one of those ports is parsed as the tenant's inner Ethernet
 * frame, by the same code as any frame, and the tunnel is given apart
 * ('tunnel': its type, VNI and the inner frame's offset).  Everything a
 * packet's variables see is the inner frame's: the key, 'bytes' (the
 * inner frame's length: what the VM sent or receives, so that both
 * directions count the same bytes, the egress one being seen before OVS
 * pushes the outer header), 'volume', 'ttl', 'ecn' and the TCP fields.
 * The key's 'tun' is the monitor's tenant slot, which the parser leaves
 * 0: the monitor interns each VNI into a slot (tpm/tenants.h), so that
 * two tenants with the same inner 5-tuple are two flows.  The outer flow
 * of a tunnelled frame is what tpm_packet_parse_full() (which never
 * decapsulates) gives for the same frame; its length on the wire is
 * 'tunnel.inner_off' + 'bytes'.
 *
 * Only one level is decapsulated (an inner frame to a tunnel port is a
 * tenant's UDP flow), and only a first (or only) IP fragment of the outer
 * datagram: later fragments carry no UDP header and count under their
 * outer flow, as without tunnels.  A malformed tunnel (header longer than
 * the UDP payload or cut, VXLAN without its I flag, Geneve version other
 * than 0) or an inner frame that is not parsed is not parsed, with a
 * reason of its own (TPM_PARSE_TUN_*): its tenant's flow is unknown.  A
 * Geneve frame whose protocol type is not Transparent Ethernet Bridging
 * (0x6558), e.g. an IPv4 packet carried without an Ethernet header, is
 * not decapsulated: it is parsed as its outer UDP flow, as without
 * tunnels, and counted in 'tun_not_decapsulated'.  The port alone says
 * the tunnel type: a Geneve frame to a VXLAN port is read as VXLAN (it
 * usually lacks the I flag, bit 0x08 of Geneve's option length, and
 * counts as TPM_PARSE_TUN_BAD_HEADER).
 *
 * Thread-safety: all functions are thread-safe (no shared state).
 */
#ifndef TPM_PACKET_H
#define TPM_PACKET_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tpm_key {
    uint32_t src[4];            /* Source address, network byte order. */
    uint32_t dst[4];            /* Destination address. */
    uint16_t sport;             /* L4 source port (ICMP: type). */
    uint16_t dport;             /* L4 destination port (ICMP: code). */
    uint8_t proto;              /* IP protocol number. */
    uint8_t ipver;              /* 4, 6, or 0 for non-IP frames. */
    uint16_t tun;               /* Tenant slot of the monitor that owns
                                 * the key: 0 for a frame that is not
                                 * tunnelled, and as the parser leaves
                                 * it; the monitor sets its slot for
                                 * the packet's VNI ('tpm_pkt.tunnel'),
                                 * or TPM_TUN_UNDERLAY. */
} __attribute__((aligned(8)));  /* Read as 64-bit words. */

/* The 'tun' of a tunnelled frame's outer flow, which the monitor counts
 * apart when an event watches the underlay (lib/event.h): never a
 * tenant's slot. */
#define TPM_TUN_UNDERLAY 0xffff
_Static_assert(sizeof(struct tpm_key) == 40, "tpm_key is five words");
_Static_assert(__builtin_offsetof(struct tpm_key, sport) == 32,
               "ports, protocol and version are the last word");

#define TPM_KEY_WORDS (sizeof(struct tpm_key) / sizeof(uint64_t))

/* A 64-bit word of a key (or of a mask), read or written in place of its
 * fields: the type may alias them, so that a word written here is seen by
 * a read of a field and the other way round, wherever the compiler
 * inlines the code (strict aliasing would let it drop or reorder the
 * accesses otherwise). */
typedef uint64_t __attribute__((may_alias)) tpm_key_word;

/* TCP flag bits as on the wire. */
#define TPM_TCP_FIN 0x01
#define TPM_TCP_SYN 0x02
#define TPM_TCP_RST 0x04
#define TPM_TCP_PSH 0x08
#define TPM_TCP_ACK 0x10

/* 'wscale' of a packet without the TCP window-scale option. */
#define TPM_WSCALE_NONE 0xff
#define TPM_WSCALE_MAX 14       /* RFC 7323: larger shifts count as 14. */

/* Values of the variables that need per-flow state (lib/event.h: is_lost,
 * is_burst, rtt, seq, ack, dup, rwnd) for one packet.  The parser leaves
 * them alone; the monitor fills them in for the packets of flows that keep
 * state (tpm/tcp-state.c, docs/event-language.md for their exact meaning), and
 * only those packets are ever evaluated against terms that use them. */
struct tpm_pkt_vars {
    uint64_t seq;               /* Highest sequence number sent by this
                                 * direction (end of segment), unwrapped
                                 * to 64 bits. */
    uint64_t ack;               /* Highest acknowledgement received from
                                 * the other direction, unwrapped; 0 none. */
    uint64_t rtt;               /* Latest RTT sample, ns; 0 none yet. */
    uint32_t rwnd;              /* Window scaled by the negotiated shift. */
    uint32_t dup;               /* Duplicate-ACK byte estimate. */
    uint8_t is_lost;            /* Retransmission: 1, else 0. */
    uint8_t is_burst;           /* Within the burst gap of the previous
                                 * packet of the flow: 1, else 0. */
};

/* The tunnel a frame was decapsulated from (the top of this file): one
 * 64-bit word, which the parser's fast path clears with one store. */
struct tpm_pkt_tunnel {
    uint32_t vni;               /* VXLAN or Geneve VNI (24 bits). */
    uint16_t inner_off;         /* Offset of the inner Ethernet header in
                                 * the frame: the outer headers' length. */
    uint8_t type;               /* enum tpm_tun_type. */
    uint8_t pad;                /* Always zero. */
};

struct tpm_pkt {
    struct tpm_key key;
    uint32_t hash;              /* Left 0 by the parser: the monitor
                                 * hashes only when the flow differs from
                                 * the previous packet's. */
    uint32_t bytes;             /* Frame length on the wire. */
    uint32_t volume;            /* L4 payload bytes. */
    uint32_t seq;               /* TCP sequence number (host order). */
    uint32_t ack;               /* TCP acknowledgement number. */
    uint16_t rwnd;              /* TCP raw window, 0 if not TCP. */
    uint8_t ttl;                /* IPv4 TTL or IPv6 hop limit. */
    uint8_t tos;                /* IPv4 TOS or IPv6 traffic class: the
                                 * ECN field in its two low bits
                                 * (tpm_pkt_ce()). */
    uint8_t tcp_flags;          /* TCP flags, 0 if not TCP. */
    uint8_t wscale;             /* TCP window-scale option of a SYN
                                 * (shift, at most TPM_WSCALE_MAX), else
                                 * TPM_WSCALE_NONE. */
    uint16_t mss;               /* TCP MSS option of a SYN, else 0. */
    struct tpm_pkt_tunnel tunnel; /* All zero unless decapsulated. */
    struct tpm_pkt_vars v;      /* Filled in by the monitor, see above. */
};

/* The bytes from 'volume' to 'tos' of a 'struct tpm_pkt': the fields that
 * tpm_packet_parse_v4__() clears with one store when asked for the key
 * alone. */
#define TPM_PKT_VARS_LEN__ 16
_Static_assert(__builtin_offsetof(struct tpm_pkt, tos) + 1
               - __builtin_offsetof(struct tpm_pkt, volume)
               == TPM_PKT_VARS_LEN__, "volume .. tos are 16 bytes");

/* Returns 1 if 'pkt''s ECN field is CE (both bits set), else 0: the
 * variable "ecn".  The parsers store the whole byte and leave this to the
 * few summaries that read it. */
static inline uint32_t
tpm_pkt_ce(const struct tpm_pkt *pkt)
{
    return (pkt->tos & 3) == 3;
}

/* Most VLAN tags (802.1Q, 802.1ad, 0x9100) before the IP header: frames
 * with more are not parsed (counted as too_many_tags). */
#define TPM_VLAN_MAX 4

/* Most IPv6 extension headers before the upper-layer header: frames with
 * more are not parsed (counted as bad_ip_header). */
#define TPM_IPV6_EXT_MAX 8

/* Tunnel types, as in 'tpm_pkt.tunnel.type'. */
enum tpm_tun_type {
    TPM_TUN_NONE,               /* Not decapsulated. */
    TPM_TUN_VXLAN,              /* RFC 7348: 8-byte header, I flag, VNI. */
    TPM_TUN_GENEVE,             /* RFC 8926: version 0, options, protocol
                                 * type 0x6558 (Ethernet). */
    TPM_TUN_N_TYPES
};

/* Returns the name of 'type' ("none", "vxlan", "geneve"; "?" if out of
 * range). */
const char *tpm_tun_type_name(enum tpm_tun_type type);

/* Most tunnel ports in a 'struct tpm_tunnel_ports'. */
#define TPM_TUNNEL_PORTS_MAX 8

/* The IANA ports, for tpm_tunnel_ports_parse()'s "vxlan" and "geneve". */
#define TPM_VXLAN_PORT 4789
#define TPM_GENEVE_PORT 6081

/* The UDP destination ports whose datagrams the parser decapsulates, each
 * with its tunnel type.  All zero (or tpm_tunnel_ports_init()) is the
 * empty set: nothing is decapsulated, as the parsers without a set do.
 * Filled by the caller (tpm_tunnel_ports_add() or _parse()), then only
 * read: one set may serve any number of threads. */
struct tpm_tunnel_ports {
    uint64_t bloom;             /* Bit (port % 64) of every port: the
                                 * inline parser's one test of a UDP
                                 * frame (0 for the empty set). */
    uint32_t n;                 /* Ports in use. */
    uint16_t port[TPM_TUNNEL_PORTS_MAX];  /* Host byte order, never 0. */
    uint8_t type[TPM_TUNNEL_PORTS_MAX];   /* enum tpm_tun_type. */
};

/* Empties 'ports'. */
void tpm_tunnel_ports_init(struct tpm_tunnel_ports *ports);

/* Adds UDP destination port 'port' of tunnel type 'type' to 'ports'.
 * Returns false, leaving 'ports' unchanged, if 'port' is 0, 'type' is not
 * TPM_TUN_VXLAN or TPM_TUN_GENEVE, the set is full, or 'port' is already
 * in it with another type (with the same type: true, no change). */
bool tpm_tunnel_ports_add(struct tpm_tunnel_ports *ports, uint16_t port,
                          enum tpm_tun_type type);

/* Returns the tunnel type of UDP destination port 'port' in 'ports' (NULL:
 * the empty set), TPM_TUN_NONE if it is not a tunnel port. */
enum tpm_tun_type tpm_tunnel_ports_lookup(const struct tpm_tunnel_ports *,
                                          uint16_t port);

/* Parses 's', a comma-separated list of TYPE or TYPE:PORT (TYPE "vxlan"
 * or "geneve"; without a port, the IANA one: 4789, 6081), e.g.
 * "vxlan,geneve:6082"; "" or "none" is the empty set.  Returns NULL and
 * fills 'ports', or returns a malloc()'d error naming the item and its
 * 1-based column (then 'ports' is empty). */
char *tpm_tunnel_ports_parse(const char *s, struct tpm_tunnel_ports *ports)
    __attribute__((warn_unused_result));

/* Formats 'ports' as tpm_tunnel_ports_parse() reads it
 * ("vxlan:4789,geneve:6081", "none" if empty) into 'buf' of 'size' bytes
 * (TPM_TUNNEL_PORTS_STRLEN is always enough).  Returns 'buf'. */
char *tpm_tunnel_ports_format(const struct tpm_tunnel_ports *, char *buf,
                              int size);
#define TPM_TUNNEL_PORTS_STRLEN (TPM_TUNNEL_PORTS_MAX * 13 + 1)

/* Why a frame was not parsed. */
enum tpm_parse_reason {
    TPM_PARSE_NON_IP,           /* EtherType neither IPv4 nor IPv6 (after
                                 * the VLAN tags): ARP, LLDP, ... */
    TPM_PARSE_L2_TRUNCATED,     /* Ethernet header or a VLAN tag cut. */
    TPM_PARSE_TOO_MANY_TAGS,    /* More than TPM_VLAN_MAX VLAN tags. */
    TPM_PARSE_L3_TRUNCATED,     /* IP header (IPv6: an extension header)
                                 * cut. */
    TPM_PARSE_BAD_IP_HEADER,    /* IP version not that of the EtherType,
                                 * IPv4 header length below 20 or total
                                 * length (not 0) below the header, IPv6
                                 * extension header beyond the payload
                                 * length or more than TPM_IPV6_EXT_MAX
                                 * of them. */
    TPM_PARSE_PORTS_NOT_CAPTURED, /* TCP, UDP or SCTP ports (ICMP: type and
                                   * code) not captured. */
    /* A UDP datagram to a tunnel port (first fragment): */
    TPM_PARSE_TUN_TRUNCATED,    /* the tunnel header (Geneve: with its
                                 * options) within the UDP payload but not
                                 * wholly captured. */
    TPM_PARSE_TUN_BAD_HEADER,   /* UDP payload (by the smaller of the UDP
                                 * and IP lengths) shorter than the tunnel
                                 * header with its options, VXLAN without
                                 * the I flag, Geneve version not 0. */
    TPM_PARSE_TUN_INNER_NON_IP, /* inner frame not IP (after its VLAN
                                 * tags): ARP between VMs, ... */
    TPM_PARSE_TUN_INNER_MALFORMED, /* inner frame not parsed for any other
                                    * reason above (cut, too many tags,
                                    * bad IP header, ports not
                                    * captured). */
    TPM_PARSE_N_REASONS
};

/* Counters of the full parser.  One thread writes them (relaxed atomic
 * stores); any thread may read them with relaxed atomic loads. */
struct tpm_parse_stats {
    uint64_t not_parsed[TPM_PARSE_N_REASONS]; /* By enum tpm_parse_reason. */
    uint64_t l4_truncated;      /* Parsed frames whose L4 header was cut
                                 * after the ports: volume from the IP
                                 * lengths, fields not captured read 0. */
    uint64_t ip_len_from_frame; /* Parsed IPv4 frames with total length 0:
                                 * taken from the frame's length (outer or
                                 * inner header). */
    uint64_t tun_decapsulated;  /* Parsed tunnelled frames (inner flow). */
    uint64_t tun_not_decapsulated; /* Geneve frames not carrying Ethernet:
                                    * parsed as their outer UDP flow. */
};

/* Returns the counter name of 'reason' ("non_ip", "l2_truncated",
 * "too_many_tags", "l3_truncated", "bad_ip_header",
 * "ports_not_captured", "tun_truncated", "tun_bad_header",
 * "tun_inner_non_ip", "tun_inner_malformed"). */
const char *tpm_parse_reason_name(enum tpm_parse_reason reason);

/* Returns the sum of the not-parsed counters of 'stats'. */
uint64_t tpm_parse_stats_not_parsed(const struct tpm_parse_stats *stats);

/* Parses Ethernet frame 'data' of 'caplen' captured bytes whose length on
 * the wire was 'wirelen' into 'pkt' (except its hash).  Handles up to
 * TPM_VLAN_MAX VLAN tags (EtherTypes 0x8100, 0x88a8 and 0x9100), IPv4
 * (with options; fragments: only the first fragment carries ports; a
 * total length of 0, as segmentation offload leaves it, taken from
 * 'wirelen'), IPv6 (skipping hop-by-hop, routing, fragment and
 * destination-options extension headers), TCP, UDP, SCTP, ICMP and ICMPv6.
 *
 * Returns true if the frame is parsed, false otherwise (then 'pkt->key' is
 * all zero but 'bytes' is set, and the reason is counted in 'stats').  A
 * frame is parsed when its IP header (IPv6: with its extension headers)
 * and, for TCP, UDP and SCTP, its ports (ICMP: type and code) were
 * captured.  The other L4 fields are read only if captured (0 otherwise);
 * the volume comes from the IP header's lengths less the L4 header (TCP:
 * its data offset, 20 bytes if that was not captured; UDP: less than that
 * if its own length was captured and is smaller).  TCP options are read
 * only on SYN segments (window scale and MSS), and only as far as they
 * were captured.  'pkt->v' is not touched.
 *
 * tpm_packet_parse() is inline: it handles the common case (untagged
 * IPv4 without options, first or only fragment, TCP other than SYN or
 * UDP, headers captured) in a few dozen instructions and hands everything
 * else to tpm_packet_parse_full(), which gives identical results for the
 * common case too (tests/test-packet.c checks both).  Only the full
 * parser counts in 'stats' (which may be NULL): the common case has
 * nothing to count.
 *
 * These parsers never decapsulate ('tunnel' is always all zero):
 * the *_tun() ones below do, given the tunnel ports. */
bool tpm_packet_parse_full(const void *data, uint32_t caplen,
                           uint32_t wirelen, struct tpm_pkt *pkt,
                           struct tpm_parse_stats *stats);

/* tpm_packet_parse_full() that decapsulates the UDP datagrams to the
 * ports of 'tun' (NULL or empty: none, exactly tpm_packet_parse_full()).
 * A tunnelled frame is parsed as its inner frame (see the top of this
 * file): 'bytes' is the inner frame's length (the UDP payload less the
 * tunnel header); the inner frame's captured bytes are those of the
 * frame after the tunnel header, at most that length.  A frame that is
 * not parsed has 'bytes' 'wirelen' and the tunnel fields 0, as any. */
bool tpm_packet_parse_full_tun(const void *data, uint32_t caplen,
                               uint32_t wirelen, struct tpm_pkt *pkt,
                               struct tpm_parse_stats *stats,
                               const struct tpm_tunnel_ports *tun);

/* Writes into 'buf' ('cap' bytes) an Ethernet frame of 'len' bytes
 * (without FCS; raised to the smallest frame that holds the headers) whose
 * key parses back as 'key': IPv4 or IPv6 per key->ipver, then a TCP
 * (ACK only), UDP, SCTP or ICMP header carrying the ports (ICMP type and
 * code), zero payload.  Returns the frame's length, or 0 if 'key' is not
 * IP or 'cap' is too small.  For synthetic traffic (calibration,
 * benchmarks, tests). */
uint32_t tpm_frame_build(void *buf, uint32_t cap, const struct tpm_key *key,
                         uint32_t len);

/* The 64-bit word of a key holding the 32-bit value 'x' at its lowest
 * address (an IPv4 address in src[0] or dst[0], the rest zero). */
static inline uint64_t
tpm_key_word_lo__(uint32_t x)
{
    uint64_t w = 0;
    __builtin_memcpy(&w, &x, sizeof x);
    return w;
}

/* The last 64-bit word of a key: ports, protocol, IP version, padding,
 * composed in a register (built in memory from its fields, it would be
 * read back across narrower stores, the stall avoided above). */
static inline uint64_t
tpm_key_word4__(uint16_t sport, uint16_t dport, uint8_t proto,
                uint8_t ipver)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return (uint64_t) sport | (uint64_t) dport << 16
           | (uint64_t) proto << 32 | (uint64_t) ipver << 40;
#else
    return (uint64_t) sport << 48 | (uint64_t) dport << 32
           | (uint64_t) proto << 24 | (uint64_t) ipver << 16;
#endif
}

/* Loads of big-endian 16- and 32-bit fields at any alignment. */
static inline uint32_t
tpm_be16__(const uint8_t *p)
{
    uint16_t x;
    __builtin_memcpy(&x, p, sizeof x);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    x = __builtin_bswap16(x);
#endif
    return x;
}

static inline uint32_t
tpm_be32__(const uint8_t *p)
{
    uint32_t x;
    __builtin_memcpy(&x, p, sizeof x);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    x = __builtin_bswap32(x);
#endif
    return x;
}

/* Where the inline parsers' fast path leaves a frame. */
enum tpm_fast_parse {
    TPM_FAST_FULL = -1,         /* Not taken: the full parser's frame,
                                 * nothing written. */
    TPM_FAST_PLAIN = 0,         /* Parsed, not tunnelled: the key's words
                                 * 0, 2 and 4 in '*w0', '*w2', '*w4'. */
    TPM_FAST_DECAP = 1,         /* Parsed, decapsulated. */
    TPM_FAST_MAYBE_TUN = 2,     /* An untagged IPv4 UDP datagram without
                                 * options whose destination port may be
                                 * one of the tunnel ports: nothing
                                 * written. */
};

/* The common case of tpm_packet_parse(), if 'data' is one: 'pkt' except
 * its hash, and the key's words 0, 2 and 4 (1 and 3 are zero) also in
 * '*w0', '*w2' and '*w4' for the hash: TPM_FAST_PLAIN.  With
 * 'all_fields' false (a constant), a UDP datagram leaves the fields
 * only TCP has (seq, ack, tcp_flags, rwnd, wscale, mss) unwritten, and
 * every frame its 'tunnel', for a caller that reads the first only for
 * TCP packets and the second only with tunnel ports (the monitor's phase
 * 1).  With 'vars' false too (a constant), the frame's variables are not
 * read either: 'volume', 'seq', 'ack', 'rwnd', 'ttl' and 'tos' are zero,
 * written with one store, and the TCP flags and options unwritten, for a
 * caller that reads the key and 'bytes' alone (the monitor's phase 1
 * while no event keeps a summary and no flow a TCP state).
 * Returns TPM_FAST_MAYBE_TUN, with nothing written, for a UDP datagram
 * whose port has a bit in the bitmap of 'tun' (NULL: none; the fast
 * path's only test for tunnels, before anything is written: false
 * positives go to tpm_packet_decap_v4__(), which looks the port up
 * exactly), and TPM_FAST_FULL, with nothing written, for the other
 * frames. */
/* The byte at offset 'k' of a 64-bit word loaded from memory, as 'v' in
 * that word (host byte order). */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define TPM_BYTE64__(K, V) ((uint64_t) (V) << (8 * (K)))
#else
#define TPM_BYTE64__(K, V) ((uint64_t) (V) << (56 - 8 * (K)))
#endif

static inline uint64_t
tpm_load64__(const uint8_t *p)
{
    uint64_t x;
    __builtin_memcpy(&x, p, sizeof x);
    return x;
}

/* The end of tpm_packet_parse_v4__(), for a frame whose checks passed:
 * its IP total length 'tot' and protocol 'proto' (17 or 6, a constant:
 * each protocol gets code of its own). */
static inline __attribute__((always_inline)) enum tpm_fast_parse
tpm_packet_parse_v4_l4__(const uint8_t *p, uint32_t wirelen, uint32_t tot,
                         uint32_t proto, const struct tpm_tunnel_ports *tun,
                         struct tpm_pkt *pkt, uint64_t *w0, uint64_t *w2,
                         uint64_t *w4, bool all_fields, bool vars)
{
    const uint8_t *ip = p + 14;
    const uint8_t *l4 = ip + 20;
    uint32_t l4len = tot - 20;
    uint32_t ports = tpm_be32__(l4);        /* sport << 16 | dport. */
    if (tun && proto == 17 && (tun->bloom >> (ports & 63)) & 1) {
        return TPM_FAST_MAYBE_TUN;
    }

    uint32_t src, dst;
    __builtin_memcpy(&src, ip + 12, 4);
    __builtin_memcpy(&dst, ip + 16, 4);
    *w0 = tpm_key_word_lo__(src);
    *w2 = tpm_key_word_lo__(dst);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* sport | dport << 16, then the constant protocol and version. */
    *w4 = (uint32_t) (ports >> 16 | ports << 16)
          | tpm_key_word4__(0, 0, proto, 4);
#else
    *w4 = tpm_key_word4__(ports >> 16, ports & 0xffff, proto, 4);
#endif
    /* The key is written as five whole words: later 64-bit loads of it
     * (comparisons, the hash) are forwarded from these stores, where
     * narrower stores into the same words would stall each load until
     * the stores retire. */
    tpm_key_word *k = (tpm_key_word *) &pkt->key;
    k[0] = *w0;
    k[1] = 0;
    k[2] = *w2;
    k[3] = 0;
    k[4] = *w4;
    pkt->bytes = wirelen;
    if (!vars) {
        /* 'volume' up to 'tos' in one store (tpm_packet_parse_v4__()). */
        __builtin_memset(&pkt->volume, 0, TPM_PKT_VARS_LEN__);
        return TPM_FAST_PLAIN;
    }
    pkt->ttl = ip[8];
    pkt->tos = ip[1];
    if (all_fields) {
        __builtin_memset(&pkt->tunnel, 0, sizeof pkt->tunnel);
    }
    if (proto == 6 || all_fields) {
        pkt->wscale = TPM_WSCALE_NONE;
        pkt->mss = 0;
    }
    if (proto == 6) {
        uint32_t hlen = (l4[12] >> 4) * 4;
        pkt->seq = tpm_be32__(l4 + 4);
        pkt->ack = tpm_be32__(l4 + 8);
        pkt->tcp_flags = l4[13];
        pkt->rwnd = tpm_be16__(l4 + 14);
        pkt->volume = l4len > hlen ? l4len - hlen : 0;
    } else {
        uint32_t ulen = tpm_be16__(l4 + 4);
        ulen = ulen < l4len ? ulen : l4len;
        if (all_fields) {
            pkt->seq = pkt->ack = 0;
            pkt->tcp_flags = 0;
            pkt->rwnd = 0;
        }
        pkt->volume = ulen > 8 ? ulen - 8 : 0;
    }
    return TPM_FAST_PLAIN;
}

/* The common case of tpm_packet_parse() (see above, before
 * TPM_BYTE64__()). */
static inline __attribute__((always_inline)) enum tpm_fast_parse
tpm_packet_parse_v4__(const uint8_t *p, uint32_t caplen, uint32_t wirelen,
                      const struct tpm_tunnel_ports *tun,
                      struct tpm_pkt *pkt, uint64_t *w0, uint64_t *w2,
                      uint64_t *w4, bool all_fields, bool vars)
{
    const uint8_t *ip = p + 14;
    const uint8_t *l4 = ip + 20;

    if (caplen < 14 + 20 + 8) {
        return TPM_FAST_FULL;
    }
    /* Two words cover the checks: bytes 12-19 (EtherType, version and
     * header length, TOS, total length, ID) and 20-27 (fragment offset,
     * TTL, protocol, checksum, ...). */
    uint64_t eth_ip = tpm_load64__(p + 12);
    uint64_t frag_proto = tpm_load64__(p + 20);
    uint32_t tot = tpm_be16__(ip + 2);
    uint64_t fp = frag_proto & (TPM_BYTE64__(0, 0x1f) | TPM_BYTE64__(1, 0xff)
                                | TPM_BYTE64__(3, 0xff));
    if ((eth_ip & (TPM_BYTE64__(0, 0xff) | TPM_BYTE64__(1, 0xff)
                   | TPM_BYTE64__(2, 0xff)))
        != (TPM_BYTE64__(0, 0x08) | TPM_BYTE64__(2, 0x45)) || tot < 20) {
        /* Not untagged IPv4 without options, or a bad total length. */
        return TPM_FAST_FULL;
    } else if (fp == TPM_BYTE64__(3, 17)) {
        return tpm_packet_parse_v4_l4__(p, wirelen, tot, 17, tun, pkt, w0,
                                        w2, w4, all_fields, vars);
    } else if (fp == TPM_BYTE64__(3, 6) && caplen >= 14 + 20 + 20
               && !__builtin_expect(l4[13] & TPM_TCP_SYN, 0)) {
        return tpm_packet_parse_v4_l4__(p, wirelen, tot, 6, tun, pkt, w0,
                                        w2, w4, all_fields, vars);
    }
    /* A later fragment, neither TCP nor UDP, TCP header not captured, or
     * a SYN: options to read. */
    return TPM_FAST_FULL;
}

/* The decapsulating fast path (lib/packet.c), for a frame that
 * tpm_packet_parse_v4__() found TPM_FAST_MAYBE_TUN.  Returns
 * TPM_FAST_PLAIN if the port is not a tunnel port (the frame parsed as
 * tpm_packet_parse_v4__() without tunnels does), TPM_FAST_DECAP if the
 * frame was a VXLAN or Geneve tunnel whose inner frame the inline parser
 * takes too ('pkt' is the inner frame's, the tunnel set, tun_decapsulated
 * counted in 'stats' if nonnull, 'hash' not computed), and TPM_FAST_FULL
 * for every other frame, left to tpm_packet_parse_full_tun() ('pkt' to be
 * overwritten): a malformed tunnel, an inner frame that is not untagged
 * IPv4 TCP or UDP without options, Geneve not carrying Ethernet.  Out of
 * line, so that untunnelled frames keep the inline parser they had. */
enum tpm_fast_parse tpm_packet_decap_v4__(const uint8_t *frame,
                                          uint32_t caplen, uint32_t wirelen,
                                          struct tpm_pkt *pkt,
                                          struct tpm_parse_stats *stats,
                                          const struct tpm_tunnel_ports *,
                                          uint64_t *w0, uint64_t *w2,
                                          uint64_t *w4);

static inline enum tpm_fast_parse
tpm_packet_parse_fast__(const void *data, uint32_t caplen, uint32_t wirelen,
                        struct tpm_pkt *pkt, struct tpm_parse_stats *stats,
                        const struct tpm_tunnel_ports *tun, uint64_t *w0,
                        uint64_t *w2, uint64_t *w4)
{
    enum tpm_fast_parse r = tpm_packet_parse_v4__(data, caplen, wirelen, tun,
                                                  pkt, w0, w2, w4, true,
                                                  true);
    if (__builtin_expect(r == TPM_FAST_MAYBE_TUN, 0)) {
        /* The key's words from 'pkt', not through the call: the common
         * case keeps them in registers. */
        uint64_t x0, x2, x4;
        r = tpm_packet_decap_v4__(data, caplen, wirelen, pkt, stats, tun,
                                  &x0, &x2, &x4);
        const tpm_key_word *k = (const tpm_key_word *) &pkt->key;
        *w0 = k[0];
        *w2 = k[2];
        *w4 = k[4];
    }
    return r;
}

/* tpm_packet_parse_counted() that decapsulates the datagrams to the ports
 * of 'tun' (NULL or empty: none), as tpm_packet_parse_full_tun(). */
static inline bool
tpm_packet_parse_counted_tun(const void *data, uint32_t caplen,
                             uint32_t wirelen, struct tpm_pkt *pkt,
                             struct tpm_parse_stats *stats,
                             const struct tpm_tunnel_ports *tun)
{
    uint64_t w0, w2, w4;
    if (tpm_packet_parse_fast__(data, caplen, wirelen, pkt, stats, tun, &w0,
                                &w2, &w4) == TPM_FAST_FULL) {
        return tpm_packet_parse_full_tun(data, caplen, wirelen, pkt, stats,
                                         tun);
    }
    pkt->hash = 0;
    return true;
}

/* tpm_packet_parse() that counts in 'stats' (may be NULL) what the full
 * parser finds: the frames not parsed, by reason, and the parsed frames
 * with a cut L4 header or a length taken from the frame. */
static inline bool
tpm_packet_parse_counted(const void *data, uint32_t caplen,
                         uint32_t wirelen, struct tpm_pkt *pkt,
                         struct tpm_parse_stats *stats)
{
    return tpm_packet_parse_counted_tun(data, caplen, wirelen, pkt, stats,
                                        NULL);
}

static inline bool
tpm_packet_parse(const void *data, uint32_t caplen, uint32_t wirelen,
                 struct tpm_pkt *pkt)
{
    return tpm_packet_parse_counted(data, caplen, wirelen, pkt, NULL);
}

/* Hashes a key: CRC32-C over its five 64-bit words, with the SSE4.2
 * instruction where the CPU has it (checked once at run time), otherwise
 * a portable multiply-xorshift hash.  Both give well-spread 32-bit values;
 * they differ from each other, so a process uses only one of them. */
static inline uint32_t tpm_key_hash(const struct tpm_key *);

uint32_t tpm_key_hash_crc32c(const struct tpm_key *);
uint32_t tpm_key_hash_portable(const struct tpm_key *);
extern bool tpm_key_hash_hw;    /* CPU has SSE4.2 CRC32 (set at load). */

#if defined(__x86_64__)
/* One step of CRC32-C over a 64-bit word.  Inline assembly rather than
 * the SSE4.2 intrinsic: the intrinsic needs the whole calling function
 * compiled for SSE4.2, which the packet path cannot assume (the caller
 * checks 'tpm_key_hash_hw'), while the assembler takes the instruction in
 * any function. */
static inline uint64_t
tpm_crc32c_u64__(uint64_t crc, uint64_t word)
{
    __asm__("crc32q %1, %0" : "+r" (crc) : "rm" (word));
    return crc;
}

/* The two CRC chains' seeds, and their final mix (see below). */
#define TPM_KEY_HASH_A0 0x12345678
#define TPM_KEY_HASH_B0 0x9abcdef0
static inline uint32_t
tpm_key_hash_mix__(uint64_t a, uint64_t b)
{
    uint32_t h = (uint32_t) (a ^ (b << 17 | b >> 15)) * 0x9e3779b1u;
    return h ^ (h >> 16);
}

/* tpm_key_hash_crc32c(), inline: only where 'tpm_key_hash_hw' is true. */
static inline uint32_t
tpm_key_hash_crc32c_inline__(const struct tpm_key *key)
{
    const tpm_key_word *w = (const tpm_key_word *) key;
    uint64_t a = TPM_KEY_HASH_A0, b = TPM_KEY_HASH_B0;
    /* Two independent CRC chains halve the dependency chain latency.  CRC
     * is linear, and the multiply only carries bits upward, so the final
     * xor-shift folds the high bits into the low ones that index tables
     * (without it, keys differing only in a port fill half the buckets
     * twice: tests/test-packet.c, test_hash_structured_keys). */
    a = tpm_crc32c_u64__(a, w[0]);
    b = tpm_crc32c_u64__(b, w[1]);
    a = tpm_crc32c_u64__(a, w[2]);
    b = tpm_crc32c_u64__(b, w[3]);
    a = tpm_crc32c_u64__(a, w[4]);
    return tpm_key_hash_mix__(a, b);
}

/* The seed of the 'a' chain for an IPv4 key, whose words 1 and 3 are
 * zero, so that its 'b' chain is a constant: CRC steps are linear over
 * GF(2) in the running value and the word, so the constant that
 * tpm_key_hash_mix__() xors into the 'a' chain (the 'b' chain rotated)
 * can be folded into its seed.  Set at load time where 'tpm_key_hash_hw'
 * is true. */
extern uint64_t tpm_key_hash_v4_a0;
#endif

/* tpm_key_hash() of an IPv4 key 'key' whose words 0, 2 and 4 are 'w0', 'w2'
 * and 'w4' (1 and 3 are zero), computed from those: 'hw' is
 * 'tpm_key_hash_hw', which a caller that hashes many keys may read once
 * (and pass as a constant). */
static inline __attribute__((always_inline)) uint32_t
tpm_key_hash_v4__(const struct tpm_key *key, uint64_t w0, uint64_t w2,
                  uint64_t w4, bool hw)
{
#if defined(__x86_64__)
    if (__builtin_expect(hw, 1)) {
        uint64_t a = tpm_key_hash_v4_a0;
        a = tpm_crc32c_u64__(a, w0);
        a = tpm_crc32c_u64__(a, w2);
        a = tpm_crc32c_u64__(a, w4);
        uint32_t h = (uint32_t) a * 0x9e3779b1u;
        return h ^ (h >> 16);           /* tpm_key_hash_mix__(). */
    }
#endif
    return tpm_key_hash_portable(key);
}

static inline uint32_t
tpm_key_hash(const struct tpm_key *key)
{
#if defined(__x86_64__)
    if (__builtin_expect(tpm_key_hash_hw, 1)) {
        return tpm_key_hash_crc32c_inline__(key);
    }
#endif
    return tpm_key_hash_portable(key);
}

/* tpm_packet_parse_counted_tun(), and the key's hash in 'pkt->hash' (the
 * value of tpm_key_hash()): computed from registers for the common case,
 * without the zero words of an IPv4 key.  A decapsulated frame's hash is
 * left 0: its key is not complete until the caller puts its tenant in
 * ('key.tun') and hashes it.  'tun' may be NULL (no tunnel ports). */
static inline bool
tpm_packet_parse_hash_tun(const void *data, uint32_t caplen,
                          uint32_t wirelen, struct tpm_pkt *pkt,
                          struct tpm_parse_stats *stats,
                          const struct tpm_tunnel_ports *tun)
{
    uint64_t w0, w2, w4;
    enum tpm_fast_parse r = tpm_packet_parse_fast__(data, caplen, wirelen,
                                                    pkt, stats, tun, &w0,
                                                    &w2, &w4);
    if (r != TPM_FAST_PLAIN) {
        if (r == TPM_FAST_DECAP) {
            pkt->hash = 0;
            return true;
        } else if (!tpm_packet_parse_full_tun(data, caplen, wirelen, pkt,
                                              stats, tun)) {
            return false;
        }
        pkt->hash = pkt->tunnel.type ? 0 : tpm_key_hash(&pkt->key);
        return true;
    }
    pkt->hash = tpm_key_hash_v4__(&pkt->key, w0, w2, w4, tpm_key_hash_hw);
    return true;
}

/* tpm_packet_parse_hash_tun() without tunnel ports. */
static inline bool
tpm_packet_parse_hash(const void *data, uint32_t caplen, uint32_t wirelen,
                      struct tpm_pkt *pkt, struct tpm_parse_stats *stats)
{
    return tpm_packet_parse_hash_tun(data, caplen, wirelen, pkt, stats,
                                     NULL);
}

/* Returns the name of the hash implementation in use ("crc32c-sse4.2" or
 * "portable"). */
const char *tpm_key_hash_impl(void);

static inline bool
tpm_key_equal(const struct tpm_key *a, const struct tpm_key *b)
{
    const tpm_key_word *x = (const tpm_key_word *) a;
    const tpm_key_word *y = (const tpm_key_word *) b;
    return !((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2]) | (x[3] ^ y[3])
             | (x[4] ^ y[4]));
}

/* Stores in 'dst' the bitwise AND of 'key' and 'mask'. */
static inline void
tpm_key_and(struct tpm_key *dst, const struct tpm_key *key,
            const struct tpm_key *mask)
{
    const tpm_key_word *k = (const tpm_key_word *) key;
    const tpm_key_word *m = (const tpm_key_word *) mask;
    tpm_key_word *d = (tpm_key_word *) dst;
    for (int i = 0; i < (int) TPM_KEY_WORDS; i++) {
        d[i] = k[i] & m[i];
    }
}

/* Formats 'key' as "proto src:sport > dst:dport" into 'buf' of 'size'
 * bytes (IPv6 addresses in brackets).  Returns 'buf'. */
char *tpm_key_format(const struct tpm_key *, char *buf, int size);

/* Formats the address in 'words' of IP version 'ipver' into 'buf'. */
char *tpm_addr_format(const uint32_t words[4], int ipver, char *buf,
                      int size);

#define TPM_KEY_STRLEN 128

/* Returns the number of leading one bits of the address mask 'words' of
 * 'n_words' 32-bit words in network byte order (the prefix length). */
int tpm_mask_prefix_len(const uint32_t *words, int n_words);

/* One field of a (masked) key, for display: "nw_proto", "nw_src",
 * "nw_dst", "tp_src", "tp_dst" (IPv6: "ipv6_src", "ipv6_dst").  An
 * address masked shorter than its full length carries its prefix
 * ("10.0.0.0/24"). */
struct tpm_key_field {
    const char *name;
    bool is_int;
    unsigned int int_value;     /* is_int. */
    char str_value[64];         /* !is_int. */
};

/* Most fields tpm_key_fields() stores. */
#define TPM_KEY_FIELDS_MAX 6

/* Stores in 'fields' the fields of 'key' that 'mask' selects, in the order
 * nw_proto, nw_src, nw_dst, tp_src, tp_dst, tun_id, and returns how many
 * (at most TPM_KEY_FIELDS_MAX).  "tun_id" is 'tun_id', the VNI of a
 * tenant's group: present if the mask selects the tenant and the key is a
 * tenant's ('key->tun' not 0).  Every report format uses this, so groups
 * print the same everywhere. */
int tpm_key_fields(const struct tpm_key *mask, const struct tpm_key *key,
                   uint32_t tun_id,
                   struct tpm_key_field fields[TPM_KEY_FIELDS_MAX]);

#endif /* packet.h */
