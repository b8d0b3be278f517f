/* SPDX-License-Identifier: Apache-2.0 */
#include "packet.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define ETH_HLEN 14
#define IPV4_HLEN 20            /* Without options. */
#define ETH_TYPE_IP 0x0800
#define ETH_TYPE_IPV6 0x86dd
#define ETH_TYPE_VLAN 0x8100
#define ETH_TYPE_QINQ 0x88a8
#define ETH_TYPE_QINQ_OLD 0x9100

#define IPPROTO_HOPOPTS_ 0
#define IPPROTO_ROUTING_ 43
#define IPPROTO_FRAGMENT_ 44
#define IPPROTO_DSTOPTS_ 60

#define UDP_HLEN 8
#define VXLAN_HLEN 8
#define VXLAN_FLAG_I 0x08
#define GENEVE_HLEN 8           /* Without its options. */
#define GENEVE_PROTO_ETH 0x6558 /* Transparent Ethernet Bridging. */

static inline uint16_t
get_be16(const uint8_t *p)
{
    return (uint16_t) (p[0] << 8 | p[1]);
}

static inline uint32_t
get_be32(const uint8_t *p)
{
    return (uint32_t) p[0] << 24 | (uint32_t) p[1] << 16
           | (uint32_t) p[2] << 8 | p[3];
}

/* Reads the window-scale and MSS options of the TCP header at 'l4' of
 * 'hlen' bytes, of which 'avail' were captured, into 'pkt'.  An option
 * that is not wholly captured, or malformed, ends the walk. */
static void
parse_tcp_options__(const uint8_t *l4, uint32_t hlen, int avail,
                    struct tpm_pkt *pkt)
{
    uint32_t end = MIN(hlen, (uint32_t) avail);

    for (uint32_t i = 20; i < end;) {
        uint8_t kind = l4[i];
        if (kind == 0) {
            break;              /* End of option list. */
        } else if (kind == 1) {
            i++;                /* No-operation. */
            continue;
        }
        if (i + 1 >= end || l4[i + 1] < 2 || i + l4[i + 1] > end) {
            break;
        }
        uint8_t len = l4[i + 1];
        if (kind == 2 && len == 4) {
            pkt->mss = get_be16(l4 + i + 2);
        } else if (kind == 3 && len == 3) {
            pkt->wscale = MIN(l4[i + 2], TPM_WSCALE_MAX);
        }
        i += len;
    }
}

/* Parses the L4 header at 'l4' ('avail' captured bytes, 'l4len' bytes
 * according to the IP header) into 'pkt'.  'first_frag' is false for
 * non-first fragments, which carry no L4 header.  Each field is read only
 * if captured; the volume is 'l4len' less the L4 header.  Sets '*cut' if
 * the L4 header was not wholly captured.  Returns false if the ports
 * (ICMP: type and code) were not captured.  Inline, as parse_frame__(). */
static inline __attribute__((always_inline)) bool
parse_l4__(const uint8_t *l4, uint32_t avail, uint32_t l4len,
           bool first_frag, struct tpm_pkt *pkt, bool *cut)
{
    uint8_t proto = pkt->key.proto;

    pkt->volume = l4len;
    if (!first_frag) {
        return true;
    }
    if (proto == IPPROTO_TCP) {
        if (avail < 4) {
            return false;
        }
        /* Without the data offset, the header is taken as its minimum:
         * the volume is then too large by the options' length. */
        uint32_t hlen = avail >= 13 ? (l4[12] >> 4) * 4 : 20;
        pkt->key.sport = get_be16(l4);
        pkt->key.dport = get_be16(l4 + 2);
        pkt->volume = l4len > hlen ? l4len - hlen : 0;
        if (avail < 20) {
            *cut = true;
            pkt->seq = avail >= 8 ? get_be32(l4 + 4) : 0;
            pkt->ack = avail >= 12 ? get_be32(l4 + 8) : 0;
            pkt->tcp_flags = avail >= 14 ? l4[13] : 0;
            pkt->rwnd = avail >= 16 ? get_be16(l4 + 14) : 0;
            return true;
        }
        pkt->seq = get_be32(l4 + 4);
        pkt->ack = get_be32(l4 + 8);
        pkt->tcp_flags = l4[13];
        pkt->rwnd = get_be16(l4 + 14);
        if (pkt->tcp_flags & TPM_TCP_SYN) {
            parse_tcp_options__(l4, hlen, avail, pkt);
        }
    } else if (proto == IPPROTO_UDP) {
        if (avail < 4) {
            return false;
        }
        pkt->key.sport = get_be16(l4);
        pkt->key.dport = get_be16(l4 + 2);
        /* Trust the smaller of the UDP and IP lengths. */
        uint32_t ulen = avail >= 6 ? MIN(get_be16(l4 + 4), l4len) : l4len;
        pkt->volume = ulen > 8 ? ulen - 8 : 0;
        *cut = avail < 8;
    } else if (proto == IPPROTO_SCTP) {
        if (avail < 4) {
            return false;
        }
        pkt->key.sport = get_be16(l4);
        pkt->key.dport = get_be16(l4 + 2);
        pkt->volume = l4len > 12 ? l4len - 12 : 0;
        *cut = avail < 12;
    } else if (proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6) {
        if (avail < 2) {
            return false;
        }
        pkt->key.sport = l4[0];
        pkt->key.dport = l4[1];
        pkt->volume = l4len > 8 ? l4len - 8 : 0;
        *cut = avail < 8;
    }
    return true;
}

static void
put_be16__(uint8_t *p, uint16_t v)
{
    p[0] = v >> 8;
    p[1] = v;
}

uint32_t
tpm_frame_build(void *buf, uint32_t cap, const struct tpm_key *key,
                uint32_t len)
{
    uint32_t l3 = key->ipver == 4 ? 20 : key->ipver == 6 ? 40 : 0;
    uint32_t l4;
    switch (key->proto) {
    case IPPROTO_TCP: l4 = 20; break;
    case IPPROTO_SCTP: l4 = 12; break;
    default: l4 = 8; break;
    }
    len = MAX(len, MAX(60, 14 + l3 + l4));
    if (!l3 || cap < len) {
        return 0;
    }

    uint8_t *f = buf;
    memset(f, 0, len);
    f[5] = 1;                           /* Locally administered MACs. */
    f[11] = 2;
    f[0] = f[6] = 0x02;
    uint8_t *ip = f + 14, *p4 = ip + l3;
    if (key->ipver == 4) {
        put_be16__(f + 12, ETH_TYPE_IP);
        ip[0] = 0x45;
        put_be16__(ip + 2, len - 14);
        ip[8] = 64;
        ip[9] = key->proto;
        memcpy(ip + 12, &key->src[0], 4);
        memcpy(ip + 16, &key->dst[0], 4);
    } else {
        put_be16__(f + 12, ETH_TYPE_IPV6);
        ip[0] = 0x60;
        put_be16__(ip + 4, len - 14 - 40);
        ip[6] = key->proto;
        ip[7] = 64;
        memcpy(ip + 8, key->src, 16);
        memcpy(ip + 24, key->dst, 16);
    }
    switch (key->proto) {
    case IPPROTO_TCP:
        put_be16__(p4, key->sport);
        put_be16__(p4 + 2, key->dport);
        p4[12] = 5 << 4;
        p4[13] = TPM_TCP_ACK;
        put_be16__(p4 + 14, 65535);
        break;
    case IPPROTO_UDP:
        put_be16__(p4, key->sport);
        put_be16__(p4 + 2, key->dport);
        put_be16__(p4 + 4, len - 14 - l3);
        break;
    case IPPROTO_SCTP:
        put_be16__(p4, key->sport);
        put_be16__(p4 + 2, key->dport);
        break;
    case IPPROTO_ICMP:
    case IPPROTO_ICMPV6:
        p4[0] = key->sport;
        p4[1] = key->dport;
        break;
    }
    return len;
}

static const char *const reason_names[TPM_PARSE_N_REASONS] = {
    [TPM_PARSE_NON_IP] = "non_ip",
    [TPM_PARSE_L2_TRUNCATED] = "l2_truncated",
    [TPM_PARSE_TOO_MANY_TAGS] = "too_many_tags",
    [TPM_PARSE_L3_TRUNCATED] = "l3_truncated",
    [TPM_PARSE_BAD_IP_HEADER] = "bad_ip_header",
    [TPM_PARSE_PORTS_NOT_CAPTURED] = "ports_not_captured",
    [TPM_PARSE_TUN_TRUNCATED] = "tun_truncated",
    [TPM_PARSE_TUN_BAD_HEADER] = "tun_bad_header",
    [TPM_PARSE_TUN_INNER_NON_IP] = "tun_inner_non_ip",
    [TPM_PARSE_TUN_INNER_MALFORMED] = "tun_inner_malformed",
};

const char *
tpm_parse_reason_name(enum tpm_parse_reason reason)
{
    return (unsigned int) reason < TPM_PARSE_N_REASONS
           ? reason_names[reason] : "?";
}

uint64_t
tpm_parse_stats_not_parsed(const struct tpm_parse_stats *stats)
{
    uint64_t n = 0;
    for (int i = 0; i < TPM_PARSE_N_REASONS; i++) {
        n += __atomic_load_n(&stats->not_parsed[i], __ATOMIC_RELAXED);
    }
    return n;
}

/* Adds one to counter 'c' of a 'struct tpm_parse_stats' (one writer,
 * readers on other threads). */
static void
count__(uint64_t *c)
{
    __atomic_store_n(c, *c + 1, __ATOMIC_RELAXED);
}

/* Leaves 'pkt' as a frame that is not parsed, counts it for 'reason' in
 * 'stats' (if not NULL) and returns false. */
static bool
not_parsed__(struct tpm_pkt *pkt, uint32_t wirelen,
             enum tpm_parse_reason reason, struct tpm_parse_stats *stats)
{
    memset(pkt, 0, offsetof(struct tpm_pkt, v));
    pkt->bytes = wirelen;
    pkt->wscale = TPM_WSCALE_NONE;
    if (stats) {
        count__(&stats->not_parsed[reason]);
    }
    return false;
}

static bool
is_vlan_type__(uint16_t type)
{
    return type == ETH_TYPE_VLAN || type == ETH_TYPE_QINQ
           || type == ETH_TYPE_QINQ_OLD;
}

/* Where the parse of one Ethernet frame (parse_frame__()) ended, for the
 * caller's counters and for a tunnel header after the L4 header. */
struct frame_parse {
    uint32_t l4off;             /* Offset of the L4 header in the frame. */
    uint32_t l4len;             /* L4 length according to the IP header. */
    bool first_frag;            /* First or only fragment: the L4 header
                                 * is there. */
    bool cut;                   /* L4 header cut after the ports. */
    bool len_from_frame;        /* IPv4 total length 0, taken from the
                                 * frame's length. */
};

/* Returned by parse_frame__() for a parsed frame. */
#define PARSED TPM_PARSE_N_REASONS

/* Parses the Ethernet frame at 'frame' of 'caplen' captured bytes, whose
 * length on the wire is 'wirelen', into 'pkt': its key, TTL, ECN and L4
 * fields, which the caller has zeroed ('wscale' TPM_WSCALE_NONE).  The
 * one parse of the Ethernet, VLAN, IP and L4 headers, for a frame as it
 * is captured and for the inner frame of a tunnel alike.  Stores in 'fp'
 * where the L4 header is.  Returns PARSED, or the reason the frame is not
 * parsed (then 'pkt' holds what was read so far).  Inline in both its
 * callers (parse_tunnel__() being out of line): called out of line, it
 * made the frames that the fast path does not take a quarter slower
 * (callgrind). */
static inline __attribute__((always_inline)) enum tpm_parse_reason
parse_frame__(const uint8_t *frame, uint32_t caplen, uint32_t wirelen,
              struct tpm_pkt *pkt, struct frame_parse *fp)
{
    const uint8_t *p = frame;
    const uint8_t *end = p + caplen;

    fp->cut = fp->len_from_frame = false;
    if (caplen < ETH_HLEN) {
        return TPM_PARSE_L2_TRUNCATED;
    }
    uint16_t type = get_be16(p + 12);
    p += ETH_HLEN;
    for (int tags = 0; is_vlan_type__(type); tags++) {
        if (tags == TPM_VLAN_MAX) {
            return TPM_PARSE_TOO_MANY_TAGS;
        } else if (end - p < 4) {
            return TPM_PARSE_L2_TRUNCATED;
        }
        type = get_be16(p + 2);
        p += 4;
    }

    if (type == ETH_TYPE_IP) {
        if (end - p < 20) {
            return TPM_PARSE_L3_TRUNCATED;
        }
        uint32_t ihl = (p[0] & 0xf) * 4;
        uint32_t tot = get_be16(p + 2);
        if (!tot) {
            /* Segmentation offload: the frame's length says it. */
            uint32_t l2len = p - frame;
            tot = wirelen > l2len ? wirelen - l2len : 0;
            fp->len_from_frame = true;
        }
        if ((p[0] >> 4) != 4 || ihl < 20 || tot < ihl) {
            return TPM_PARSE_BAD_IP_HEADER;
        } else if (end - p < (long) ihl) {
            return TPM_PARSE_L3_TRUNCATED;
        }
        uint16_t frag = get_be16(p + 6);
        pkt->key.ipver = 4;
        pkt->key.proto = p[9];
        pkt->ttl = p[8];
        pkt->tos = p[1];
        memcpy(&pkt->key.src[0], p + 12, 4);
        memcpy(&pkt->key.dst[0], p + 16, 4);
        fp->l4off = p + ihl - frame;
        fp->l4len = tot - ihl;
        fp->first_frag = (frag & 0x1fff) == 0;
    } else if (type == ETH_TYPE_IPV6) {
        if (end - p < 40) {
            return TPM_PARSE_L3_TRUNCATED;
        } else if ((p[0] >> 4) != 6) {
            return TPM_PARSE_BAD_IP_HEADER;
        }
        uint32_t plen = get_be16(p + 4);
        uint8_t nh = p[6];
        bool first_frag = true;

        pkt->key.ipver = 6;
        pkt->ttl = p[7];
        pkt->tos = (uint8_t) (get_be16(p) >> 4);
        memcpy(pkt->key.src, p + 8, 16);
        memcpy(pkt->key.dst, p + 24, 16);
        p += 40;
        /* Skip extension headers: the key's protocol is never one of
         * theirs (a frame whose headers do not end within the payload
         * length, or that has more than TPM_IPV6_EXT_MAX of them, is
         * malformed). */
        for (int i = 0; ; i++) {
            uint32_t elen;
            if (nh != IPPROTO_HOPOPTS_ && nh != IPPROTO_ROUTING_
                && nh != IPPROTO_DSTOPTS_ && nh != IPPROTO_FRAGMENT_) {
                break;
            } else if (i == TPM_IPV6_EXT_MAX) {
                return TPM_PARSE_BAD_IP_HEADER;
            } else if (end - p < 8) {
                return TPM_PARSE_L3_TRUNCATED;
            } else if (nh == IPPROTO_FRAGMENT_) {
                elen = 8;
                first_frag = (get_be16(p + 2) & 0xfff8) == 0;
            } else {
                elen = (p[1] + 1) * 8;
            }
            if (elen > plen) {
                return TPM_PARSE_BAD_IP_HEADER;
            } else if (end - p < (long) elen) {
                return TPM_PARSE_L3_TRUNCATED;
            }
            nh = p[0];
            plen -= elen;
            p += elen;
        }
        pkt->key.proto = nh;
        fp->l4off = p - frame;
        fp->l4len = plen;
        fp->first_frag = first_frag;
    } else {
        return TPM_PARSE_NON_IP;
    }
    if (!parse_l4__(frame + fp->l4off, caplen - fp->l4off, fp->l4len,
                    fp->first_frag, pkt, &fp->cut)) {
        return TPM_PARSE_PORTS_NOT_CAPTURED;
    }
    return PARSED;
}

/* Tunnels. */

static const char *const tun_type_names[TPM_TUN_N_TYPES] = {
    [TPM_TUN_NONE] = "none",
    [TPM_TUN_VXLAN] = "vxlan",
    [TPM_TUN_GENEVE] = "geneve",
};

const char *
tpm_tun_type_name(enum tpm_tun_type type)
{
    return (unsigned int) type < TPM_TUN_N_TYPES ? tun_type_names[type]
                                                 : "?";
}

void
tpm_tunnel_ports_init(struct tpm_tunnel_ports *ports)
{
    memset(ports, 0, sizeof *ports);
}

enum tpm_tun_type
tpm_tunnel_ports_lookup(const struct tpm_tunnel_ports *ports, uint16_t port)
{
    for (uint32_t i = 0; ports && i < ports->n; i++) {
        if (ports->port[i] == port) {
            return ports->type[i];
        }
    }
    return TPM_TUN_NONE;
}

bool
tpm_tunnel_ports_add(struct tpm_tunnel_ports *ports, uint16_t port,
                     enum tpm_tun_type type)
{
    enum tpm_tun_type old = tpm_tunnel_ports_lookup(ports, port);
    if (old != TPM_TUN_NONE) {
        return old == type;
    } else if (!port || (type != TPM_TUN_VXLAN && type != TPM_TUN_GENEVE)
               || ports->n >= TPM_TUNNEL_PORTS_MAX) {
        return false;
    }
    ports->port[ports->n] = port;
    ports->type[ports->n] = type;
    ports->n++;
    ports->bloom |= UINT64_C(1) << (port & 63);
    return true;
}

char *
tpm_tunnel_ports_parse(const char *s, struct tpm_tunnel_ports *ports)
{
    const char *p = s;

    tpm_tunnel_ports_init(ports);
    while (isspace((unsigned char) *p)) {
        p++;
    }
    if (!*p || !strcmp(p, "none")) {
        return NULL;
    }
    for (;;) {
        const char *item = p;
        size_t len = strcspn(p, ",");
        size_t tlen = strcspn(p, ":,");
        enum tpm_tun_type type = TPM_TUN_NONE;
        unsigned long port = 0;

        if (tlen == 5 && !strncmp(p, "vxlan", 5)) {
            type = TPM_TUN_VXLAN;
            port = TPM_VXLAN_PORT;
        } else if (tlen == 6 && !strncmp(p, "geneve", 6)) {
            type = TPM_TUN_GENEVE;
            port = TPM_GENEVE_PORT;
        } else {
            tpm_tunnel_ports_init(ports);
            return xasprintf("column %d: '%.*s' is not a tunnel type: "
                             "expected vxlan or geneve, optionally "
                             "followed by :PORT", (int) (item - s) + 1,
                             (int) tlen, item);
        }
        if (tlen < len) {
            const char *num = p + tlen + 1;
            char *end;
            port = isdigit((unsigned char) *num) ? strtoul(num, &end, 10)
                                                 : 0;
            if (!isdigit((unsigned char) *num) || end != p + len
                || !port || port > 65535) {
                tpm_tunnel_ports_init(ports);
                return xasprintf("column %d: '%.*s' is not a UDP port: "
                                 "expected 1 to 65535",
                                 (int) (num - s) + 1,
                                 (int) (p + len - num), num);
            }
        }
        if (!tpm_tunnel_ports_add(ports, port, type)) {
            bool full = ports->n >= TPM_TUNNEL_PORTS_MAX;

            tpm_tunnel_ports_init(ports);
            if (full) {
                return xasprintf("column %d: '%.*s': too many tunnel "
                                 "ports: expected at most %d",
                                 (int) (item - s) + 1, (int) len, item,
                                 TPM_TUNNEL_PORTS_MAX);
            }
            return xasprintf("column %d: '%.*s': port already given with "
                             "another type", (int) (item - s) + 1,
                             (int) len, item);
        }
        if (!p[len]) {
            return NULL;
        }
        p += len + 1;
    }
}

char *
tpm_tunnel_ports_format(const struct tpm_tunnel_ports *ports, char *buf,
                        int size)
{
    int n = 0;

    if (size > 0) {
        buf[0] = '\0';
    }
    if (!ports || !ports->n) {
        snprintf(buf, size, "none");
        return buf;
    }
    for (uint32_t i = 0; i < ports->n && n < size; i++) {
        n += snprintf(buf + n, size - n, "%s%s:%u", i ? "," : "",
                      tpm_tun_type_name(ports->type[i]), ports->port[i]);
    }
    return buf;
}

/* Returned by tun_header__() for a Geneve header whose protocol type is
 * not Ethernet. */
#define NOT_ETHERNET (TPM_PARSE_N_REASONS + 1)

/* Reads the header of tunnel type 'type' at 't', the payload of a UDP
 * datagram of 'plen' bytes of which 'tavail' are captured.  Returns
 * PARSED with the header's length in '*hlen', NOT_ETHERNET, or the reason
 * the frame is not parsed. */
static inline enum tpm_parse_reason
tun_header__(const uint8_t *t, uint32_t tavail, uint32_t plen,
             enum tpm_tun_type type, uint32_t *hlen)
{
    if (plen < 8) {
        return TPM_PARSE_TUN_BAD_HEADER;
    } else if (tavail < 8) {
        return TPM_PARSE_TUN_TRUNCATED;
    }
    if (type == TPM_TUN_VXLAN) {
        if (!(t[0] & VXLAN_FLAG_I)) {
            return TPM_PARSE_TUN_BAD_HEADER;
        }
        *hlen = VXLAN_HLEN;
    } else {
        if (t[0] >> 6) {
            return TPM_PARSE_TUN_BAD_HEADER;    /* Version not 0. */
        }
        *hlen = GENEVE_HLEN + (t[0] & 0x3f) * 4;
        if (plen < *hlen) {
            return TPM_PARSE_TUN_BAD_HEADER;
        } else if (tavail < *hlen) {
            return TPM_PARSE_TUN_TRUNCATED;
        } else if (get_be16(t + 2) != GENEVE_PROTO_ETH) {
            return NOT_ETHERNET;
        }
    }
    return PARSED;
}

/* Decapsulates the UDP datagram to a port of tunnel type 'type' that
 * parse_frame__() found in 'frame' ('caplen' captured bytes) as described
 * by 'fp', and parses the inner frame into 'pkt'.  Returns PARSED with
 * the tunnel fields of 'pkt' set, PARSED with 'pkt' untouched and
 * '*decap' false if the tunnel does not carry Ethernet (Geneve only), or
 * the reason the frame is not parsed.  Out of line: tunnels only, which
 * leaves tpm_packet_parse_full_tun() the size it had without them. */
static enum tpm_parse_reason __attribute__((noinline))
parse_tunnel__(const uint8_t *frame, uint32_t caplen, enum tpm_tun_type type,
               struct frame_parse *fp, struct tpm_pkt *pkt, bool *decap)
{
    const uint8_t *udp = frame + fp->l4off;
    uint32_t avail = caplen - fp->l4off;

    *decap = false;
    if (avail < UDP_HLEN) {
        return TPM_PARSE_TUN_TRUNCATED;
    }
    /* The UDP payload: the smaller of the UDP and IP lengths, as for the
     * volume. */
    uint32_t ulen = MIN(get_be16(udp + 4), fp->l4len);
    uint32_t plen = ulen > UDP_HLEN ? ulen - UDP_HLEN : 0;
    const uint8_t *t = udp + UDP_HLEN;
    uint32_t tavail = avail - UDP_HLEN;
    uint32_t hlen;
    enum tpm_parse_reason why;

    why = tun_header__(t, tavail, plen, type, &hlen);
    if (why == NOT_ETHERNET) {
        return PARSED;
    } else if (why != PARSED) {
        return why;
    }

    uint32_t vni = get_be32(t + 4) >> 8;
    uint32_t inner_off = fp->l4off + UDP_HLEN + hlen;
    uint32_t inner_len = plen - hlen;

    memset(pkt, 0, offsetof(struct tpm_pkt, v));
    pkt->wscale = TPM_WSCALE_NONE;
    why = parse_frame__(frame + inner_off,
                        MIN(caplen - inner_off, inner_len), inner_len, pkt,
                        fp);
    if (why != PARSED) {
        return (why == TPM_PARSE_NON_IP ? TPM_PARSE_TUN_INNER_NON_IP
                : TPM_PARSE_TUN_INNER_MALFORMED);
    }
    pkt->bytes = inner_len;
    pkt->tunnel.type = type;
    pkt->tunnel.inner_off = inner_off;
    pkt->tunnel.vni = vni;
    *decap = true;
    return PARSED;
}

bool
tpm_packet_parse_full_tun(const void *data, uint32_t caplen,
                          uint32_t wirelen, struct tpm_pkt *pkt,
                          struct tpm_parse_stats *stats,
                          const struct tpm_tunnel_ports *tun)
{
    struct frame_parse fp;

    memset(pkt, 0, offsetof(struct tpm_pkt, v));
    pkt->bytes = wirelen;
    pkt->wscale = TPM_WSCALE_NONE;

    enum tpm_parse_reason why = parse_frame__(data, caplen, wirelen, pkt,
                                              &fp);
    if (why != PARSED) {
        return not_parsed__(pkt, wirelen, why, stats);
    }
    bool len_from_frame = fp.len_from_frame;
    if (tun && tun->n && pkt->key.proto == IPPROTO_UDP && fp.first_frag) {
        enum tpm_tun_type type = tpm_tunnel_ports_lookup(tun,
                                                         pkt->key.dport);
        bool decap;
        if (type != TPM_TUN_NONE) {
            why = parse_tunnel__(data, caplen, type, &fp, pkt, &decap);
            if (why != PARSED) {
                return not_parsed__(pkt, wirelen, why, stats);
            } else if (stats) {
                count__(decap ? &stats->tun_decapsulated
                        : &stats->tun_not_decapsulated);
            }
            len_from_frame |= fp.len_from_frame;
        }
    }
    if (stats && (fp.cut || len_from_frame)) {
        if (fp.cut) {
            count__(&stats->l4_truncated);
        }
        if (len_from_frame) {
            count__(&stats->ip_len_from_frame);
        }
    }
    return true;
}

enum tpm_fast_parse
tpm_packet_decap_v4__(const uint8_t *frame, uint32_t caplen,
                      uint32_t wirelen, struct tpm_pkt *pkt,
                      struct tpm_parse_stats *stats,
                      const struct tpm_tunnel_ports *tun, uint64_t *w0,
                      uint64_t *w2, uint64_t *w4)
{
    const uint32_t l4off = ETH_HLEN + IPV4_HLEN;
    enum tpm_tun_type type = tpm_tunnel_ports_lookup(
        tun, get_be16(frame + l4off + 2));
    if (type == TPM_TUN_NONE) {
        /* Another port with the same bit. */
        return tpm_packet_parse_v4__(frame, caplen, wirelen, NULL, pkt, w0,
                                     w2, w4, true, true);
    }

    /* The fast path took an untagged IPv4 header without options, a
     * first fragment, and the whole UDP header (so 'caplen' >= 42) with
     * the IP total length at least 20. */
    const uint8_t *ip = frame + ETH_HLEN;
    const uint8_t *t = frame + l4off + UDP_HLEN;
    uint32_t ulen = MIN(get_be16(frame + l4off + 4),
                        get_be16(ip + 2) - IPV4_HLEN);
    uint32_t plen = ulen > UDP_HLEN ? ulen - UDP_HLEN : 0;
    uint32_t hlen;

    if (tun_header__(t, caplen - l4off - UDP_HLEN, plen, type, &hlen)
        != PARSED) {
        return TPM_FAST_FULL;
    }

    uint32_t vni = get_be32(t + 4) >> 8;
    uint32_t inner_off = l4off + UDP_HLEN + hlen;
    uint32_t inner_len = plen - hlen;
    if (tpm_packet_parse_v4__(frame + inner_off,
                              MIN(caplen - inner_off, inner_len), inner_len,
                              NULL, pkt, w0, w2, w4, true, true)
        != TPM_FAST_PLAIN) {
        return TPM_FAST_FULL;
    }
    pkt->tunnel.type = type;
    pkt->tunnel.inner_off = inner_off;
    pkt->tunnel.vni = vni;
    if (stats) {
        count__(&stats->tun_decapsulated);
    }
    return TPM_FAST_DECAP;
}

bool
tpm_packet_parse_full(const void *data, uint32_t caplen, uint32_t wirelen,
                      struct tpm_pkt *pkt, struct tpm_parse_stats *stats)
{
    return tpm_packet_parse_full_tun(data, caplen, wirelen, pkt, stats,
                                     NULL);
}

/* Hashing. */

static inline uint32_t
hash_finish__(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return (uint32_t) h;
}

uint32_t
tpm_key_hash_portable(const struct tpm_key *key)
{
    const tpm_key_word *w = (const tpm_key_word *) key;
    uint64_t h = 0x9e3779b97f4a7c15ULL;
    for (int i = 0; i < (int) TPM_KEY_WORDS; i++) {
        h = (h ^ w[i]) * 0x100000001b3ULL;
        h ^= h >> 29;
    }
    return hash_finish__(h);
}

#if defined(__x86_64__)
uint32_t
tpm_key_hash_crc32c(const struct tpm_key *key)
{
    return tpm_key_hash_crc32c_inline__(key);
}
#else
uint32_t
tpm_key_hash_crc32c(const struct tpm_key *key)
{
    return tpm_key_hash_portable(key);
}
#endif

bool tpm_key_hash_hw;
#if defined(__x86_64__)
uint64_t tpm_key_hash_v4_a0;

/* Three CRC steps of zero words from 'c': the linear map by which a CRC
 * chain's seed reaches its value after an IPv4 key's words (a step of
 * word 'w' from 'c' is this map's step of 'c' xor one of 'w'). */
static uint32_t
crc32c_zero3__(uint32_t c)
{
    return tpm_crc32c_u64__(tpm_crc32c_u64__(tpm_crc32c_u64__(c, 0), 0), 0);
}

/* Returns the 's' with crc32c_zero3__(s) == 't'.  The map is invertible
 * (multiplication by a power of x modulo the CRC polynomial, whose
 * constant term is 1): Gauss-Jordan elimination over GF(2) on the images
 * of the 32 unit vectors, tracking which inputs make each row. */
static uint32_t
crc32c_zero3_inverse__(uint32_t t)
{
    uint32_t v[32], in[32];
    int row = 0;

    for (int j = 0; j < 32; j++) {
        in[j] = UINT32_C(1) << j;
        v[j] = crc32c_zero3__(in[j]);
    }
    for (int bit = 0; bit < 32; bit++) {
        int k = row;
        while (k < 32 && !(v[k] >> bit & 1)) {
            k++;
        }
        if (k == 32) {
            continue;
        }
        uint32_t tv = v[row], ti = in[row];
        v[row] = v[k];
        in[row] = in[k];
        v[k] = tv;
        in[k] = ti;
        for (int r = 0; r < 32; r++) {
            if (r != row && v[r] >> bit & 1) {
                v[r] ^= v[row];
                in[r] ^= in[row];
            }
        }
        row++;
    }
    /* Full rank: each row's image is one bit, 't' their sum. */
    uint32_t s = 0;
    for (int r = 0; r < row; r++) {
        if (t & v[r]) {
            s ^= in[r];
        }
    }
    return s;
}
#endif

__attribute__((constructor))
static void
hash_init__(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    tpm_key_hash_hw = __builtin_cpu_supports("sse4.2");
    if (tpm_key_hash_hw) {
        /* The 'b' chain of an IPv4 key and its rotation in the mix,
         * folded into the 'a' chain's seed: the seed whose three steps
         * end 'brot' away from those of TPM_KEY_HASH_A0. */
        uint32_t b = tpm_crc32c_u64__(tpm_crc32c_u64__(TPM_KEY_HASH_B0, 0),
                                      0);
        uint32_t brot = b << 17 | b >> 15;
        tpm_key_hash_v4_a0 = TPM_KEY_HASH_A0 ^ crc32c_zero3_inverse__(brot);
        if (crc32c_zero3__(tpm_key_hash_v4_a0)
            != (crc32c_zero3__(TPM_KEY_HASH_A0) ^ brot)) {
            /* Cannot happen (the map is invertible); the portable hash
             * is right everywhere. */
            tpm_key_hash_hw = false;
        }
    }
#endif
}

const char *
tpm_key_hash_impl(void)
{
    return tpm_key_hash_hw ? "crc32c-sse4.2" : "portable";
}

/* Writes 'v' in decimal at 'p' (no NUL); returns the end. */
static char *
put_uint__(char *p, unsigned int v)
{
    char tmp[10], *t = tmp + sizeof tmp;
    do {
        *--t = '0' + v % 10;
        v /= 10;
    } while (v);
    size_t n = tmp + sizeof tmp - t;
    memcpy(p, t, n);
    return p + n;
}

char *
tpm_addr_format(const uint32_t words[4], int ipver, char *buf, int size)
{
    if (ipver != 6 && size >= INET_ADDRSTRLEN) {
        /* IPv4 by hand: inet_ntop() formats it with sprintf(), and the TEM
         * writes an address into every alert. */
        const uint8_t *b = (const uint8_t *) words;
        char *p = buf;
        for (int i = 0; i < 4; i++) {
            if (i) {
                *p++ = '.';
            }
            p = put_uint__(p, b[i]);
        }
        *p = '\0';
        return buf;
    }
    if (!inet_ntop(ipver == 6 ? AF_INET6 : AF_INET, words, buf, size)) {
        snprintf(buf, size, "?");
    }
    return buf;
}

char *
tpm_key_format(const struct tpm_key *key, char *buf, int size)
{
    char s[INET6_ADDRSTRLEN], d[INET6_ADDRSTRLEN];

    if (!key->ipver) {
        snprintf(buf, size, "non-ip");
        return buf;
    }
    tpm_addr_format(key->src, key->ipver, s, sizeof s);
    tpm_addr_format(key->dst, key->ipver, d, sizeof d);
    if (key->ipver == 6) {
        snprintf(buf, size, "%u [%s]:%u > [%s]:%u", key->proto, s,
                 key->sport, d, key->dport);
    } else {
        snprintf(buf, size, "%u %s:%u > %s:%u", key->proto, s, key->sport,
                 d, key->dport);
    }
    return buf;
}

int
tpm_mask_prefix_len(const uint32_t *words, int n_words)
{
    int len = 0;
    for (int i = 0; i < n_words; i++) {
        uint32_t w = ntohl(words[i]);
        if (w == UINT32_MAX) {
            len += 32;
            continue;
        }
        while (w & 0x80000000u) {
            len++;
            w <<= 1;
        }
        break;
    }
    return len;
}

static void
addr_field__(struct tpm_key_field *f, const char *name, const uint32_t *mask,
             const uint32_t *addr, int ipver)
{
    int full = ipver == 6 ? 128 : 32;
    int len = tpm_mask_prefix_len(mask, ipver == 6 ? 4 : 1);

    f->name = name;
    f->is_int = false;
    /* "addr" or "addr/len" (at most 45 + 4 bytes: 'str_value' has 64). */
    tpm_addr_format(addr, ipver, f->str_value, sizeof f->str_value);
    if (len != full) {
        char *p = f->str_value + strlen(f->str_value);
        *p++ = '/';
        *put_uint__(p, len) = '\0';
    }
}

static void
int_field__(struct tpm_key_field *f, const char *name, unsigned int v)
{
    f->name = name;
    f->is_int = true;
    f->int_value = v;
}

int
tpm_key_fields(const struct tpm_key *mask, const struct tpm_key *key,
               uint32_t tun_id,
               struct tpm_key_field fields[TPM_KEY_FIELDS_MAX])
{
    bool v6 = key->ipver == 6;
    int n = 0;

    if (mask->proto) {
        int_field__(&fields[n++], "nw_proto", key->proto);
    }
    if (mask->src[0] || mask->src[1] || mask->src[2] || mask->src[3]) {
        addr_field__(&fields[n++], v6 ? "ipv6_src" : "nw_src", mask->src,
                     key->src, key->ipver);
    }
    if (mask->dst[0] || mask->dst[1] || mask->dst[2] || mask->dst[3]) {
        addr_field__(&fields[n++], v6 ? "ipv6_dst" : "nw_dst", mask->dst,
                     key->dst, key->ipver);
    }
    if (mask->sport) {
        int_field__(&fields[n++], "tp_src", key->sport);
    }
    if (mask->dport) {
        int_field__(&fields[n++], "tp_dst", key->dport);
    }
    if (mask->tun && key->tun) {
        int_field__(&fields[n++], "tun_id", tun_id);
    }
    return n;
}
