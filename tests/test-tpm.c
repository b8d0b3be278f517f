/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the monitor as a whole (tpm.h): match and scatter, sweeps,
 * epochs, granularity, run-time changes, DoS threshold, polls, the control
 * rings.  Expected values are computed here from the packets the test
 * sends, independently of libtpm.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "dos-model.h"
#include "event.h"
#include "packet.h"
#include "tpm.h"
#include "tpm-private.h"
#include "util.h"

#define MS 1000000ULL
/* A wall-clock time aligned to 30 ms (and so to 10 ms epochs). */
#define T0 (56666666667ULL * 30 * MS)

/* A frame built by hand: Ethernet + IPv4 + UDP. */
struct frame {
    uint8_t data[128];
    uint32_t len;
};

static void
put16(uint8_t *p, uint16_t v)
{
    p[0] = v >> 8;
    p[1] = v;
}

/* Clears 'f' and writes its Ethernet type 'ethertype'.  Returns where its
 * IP header starts. */
static uint8_t *
eth_start(struct frame *f, uint16_t ethertype)
{
    memset(f, 0, sizeof *f);
    put16(f->data + 12, ethertype);
    return f->data + 14;
}

/* Writes at 'udp' a UDP header for 'payload' bytes of payload. */
static void
udp_header(uint8_t *udp, uint16_t sport, uint16_t dport, int payload)
{
    put16(udp, sport);
    put16(udp + 2, dport);
    put16(udp + 4, 8 + payload);
}

/* Builds a UDP frame from 10.99.'s'.'s2' to 10.'d1'.'d2'.'d3' with
 * 'payload' bytes of UDP payload (at most 60) and TTL 'ttl'. */
static void
udp_frame(struct frame *f, uint32_t src, uint32_t dst, uint16_t sport,
          uint16_t dport, int payload, uint8_t ttl)
{
    uint8_t *ip = eth_start(f, 0x0800);
    ip[0] = 0x45;
    put16(ip + 2, 20 + 8 + payload);
    ip[8] = ttl;
    ip[9] = 17;
    uint32_t s = htonl(src), d = htonl(dst);
    memcpy(ip + 12, &s, 4);
    memcpy(ip + 16, &d, 4);
    udp_header(ip + 20, sport, dport, payload);
    f->len = MAX(60, 14 + 20 + 8 + payload);
}

/* A UDP/IPv6 frame from 'src' to 'dst' (each address this word, then
 * zeros and a last byte of 1). */
static void
udp6_frame(struct frame *f, uint32_t src, uint32_t dst, uint16_t sport,
           uint16_t dport, int payload, uint8_t hops)
{
    uint8_t *ip = eth_start(f, 0x86dd);
    ip[0] = 0x60;
    put16(ip + 4, 8 + payload);
    ip[6] = 17;
    ip[7] = hops;
    uint32_t s = htonl(src), d = htonl(dst);
    memcpy(ip + 8, &s, 4);
    ip[23] = 1;
    memcpy(ip + 24, &d, 4);
    ip[39] = 1;
    udp_header(ip + 40, sport, dport, payload);
    f->len = 14 + 40 + 8 + payload;
}

static uint32_t
ip4(int a, int b, int c, int d)
{
    return (uint32_t) a << 24 | b << 16 | c << 8 | d;
}

static void
quiet_log(enum tpm_log_level level, const char *msg)
{
    (void) level;
    (void) msg;
}

/* The tests' default parameters: small tables, unbounded sweep steps. */
static void
test_params(struct tpm_params *p)
{
    tpm_params_init(p);
    p->flow_table_size = 4096;
    p->max_triggers = 16384;
    p->max_events = 64;
    p->max_chunks = 1024;
    p->dos_table_size = 1024;
    p->sweep_budget_ns = 0;
}

static struct tpm *
new_tpm(struct tpm_params *p)
{
    struct tpm_params def;
    char *error = NULL;
    if (!p) {
        test_params(&def);
        p = &def;
    }
    tpm_log_set_hook(quiet_log);
    struct tpm *tpm = tpm_create(p, &error);
    ck_assert_msg(tpm, "tpm_create: %s", error ? error : "?");
    return tpm;
}

static void
add(struct tpm *tpm, uint32_t id, const char *line)
{
    struct tpm_event *ev;
    char *error = tpm_event_parse_line(line, &ev);
    ck_assert_msg(!error, "%s: %s", line, error);
    error = tpm_event_add(tpm, ev, id);
    ck_assert_msg(!error, "%s: %s", line, error);
}

static void
send1(struct tpm *tpm, uint64_t now, const struct frame *f)
{
    struct tpm_frame fr = { f->data, f->len, f->len };
    tpm_advance(tpm, now);
    tpm_process_batch(tpm, &fr, 1);
}

static void
sweep_all(struct tpm *tpm)
{
    while (tpm_sweep_step(tpm, 0)) {
        continue;
    }
}

/* Collected satisfaction reports. */
struct reports {
    struct tpm_report r[16384];
    int n;
};

static void
collect(struct tpm *tpm, struct reports *out)
{
    struct tpm_report r;
    while (tpm_pop_report(tpm, &r)) {
        if (r.type == TPM_REPORT_SATISFIED) {
            ck_assert_int_lt(out->n, (int) ARRAY_SIZE(out->r));
            out->r[out->n++] = r;
        } else {
            free(r.error);
        }
    }
}

static const struct tpm_report *
find_report(const struct reports *rs, uint32_t id, uint64_t epoch,
            uint32_t dst)
{
    for (int i = 0; i < rs->n; i++) {
        if (rs->r[i].event_id == id && rs->r[i].epoch == epoch
            && rs->r[i].group.dst[0] == htonl(dst)) {
            return &rs->r[i];
        }
    }
    return NULL;
}

static void
stats(const struct tpm *tpm, struct tpm_stats *s)
{
    tpm_get_stats(tpm, s);
}

/* Frames the parser cannot parse, or parses with a header cut or a length
 * taken from the frame, are counted by reason in the monitor's statistics;
 * the volume of cut frames comes from the IP lengths. */
START_TEST(test_parse_counters)
{
    struct tpm *tpm = new_tpm(NULL);
    struct reports rs = { .n = 0 };
    struct frame f;

    add(tpm, 1, "vol filter=udp predicate=sum(volume) > 0 group=5tuple "
        "interval=10ms");

    /* Three VLAN tags (802.1ad, 802.1Q, 0x9100) before IPv4 UDP. */
    udp_frame(&f, ip4(10, 99, 0, 1), ip4(10, 0, 0, 1), 1, 2, 30, 64);
    memmove(f.data + 12 + 12, f.data + 12, 14 + 20 + 8 + 30 - 12);
    static const uint8_t tags[12] = { 0x88, 0xa8, 0, 1, 0x81, 0x00, 0, 2,
                                      0x91, 0x00, 0, 3 };
    memcpy(f.data + 12, tags, sizeof tags);
    f.len += 12;
    send1(tpm, T0, &f);

    /* The same flow, captured at 38 bytes of 1000: ports, volume from the
     * IP length. */
    udp_frame(&f, ip4(10, 99, 0, 1), ip4(10, 0, 0, 1), 1, 2, 0, 64);
    put16(f.data + 14 + 2, 20 + 8 + 958);
    struct tpm_frame cut = { f.data, 38, 14 + 20 + 8 + 958 };
    tpm_advance(tpm, T0 + 1);
    tpm_process_batch(tpm, &cut, 1);

    /* IPv4 total length 0, and frames not parsed: ARP, cut before the
     * ports, cut in the IP header, five VLAN tags. */
    udp_frame(&f, ip4(10, 99, 0, 1), ip4(10, 0, 0, 1), 1, 2, 12, 64);
    put16(f.data + 14 + 2, 0);
    f.len = 14 + 20 + 8 + 12;
    send1(tpm, T0 + 2, &f);
    udp_frame(&f, ip4(10, 99, 0, 1), ip4(10, 0, 0, 1), 1, 2, 12, 64);
    struct tpm_frame bad[4] = {
        { f.data, 36, 60 }, { f.data, 30, 60 },
    };
    struct frame arp, tagged;
    memset(&arp, 0, sizeof arp);
    put16(arp.data + 12, 0x0806);
    bad[2] = (struct tpm_frame) { arp.data, 60, 60 };
    memset(&tagged, 0, sizeof tagged);
    for (int i = 0; i < 5; i++) {
        put16(tagged.data + 12 + 4 * i, 0x8100);
    }
    put16(tagged.data + 32, 0x0800);
    bad[3] = (struct tpm_frame) { tagged.data, 80, 80 };
    tpm_advance(tpm, T0 + 3);
    tpm_process_batch(tpm, bad, 4);

    tpm_advance(tpm, T0 + 10 * MS);
    sweep_all(tpm);
    collect(tpm, &rs);
    ck_assert_int_eq(rs.n, 1);
    ck_assert_double_eq(rs.r[0].value, 30 + 958 + 12);
    ck_assert_uint_eq(rs.r[0].group.sport, 1);
    ck_assert_uint_eq(rs.r[0].group.dport, 2);

    struct tpm_stats s;
    stats(tpm, &s);
    ck_assert_uint_eq(s.packets, 7);
    ck_assert_uint_eq(s.non_ip, 1);
    ck_assert_uint_eq(s.not_parsed, 4);
    ck_assert_uint_eq(s.parse.not_parsed[TPM_PARSE_NON_IP], 1);
    ck_assert_uint_eq(s.parse.not_parsed[TPM_PARSE_PORTS_NOT_CAPTURED], 1);
    ck_assert_uint_eq(s.parse.not_parsed[TPM_PARSE_L3_TRUNCATED], 1);
    ck_assert_uint_eq(s.parse.not_parsed[TPM_PARSE_TOO_MANY_TAGS], 1);
    ck_assert_uint_eq(s.parse.not_parsed[TPM_PARSE_L2_TRUNCATED], 0);
    ck_assert_uint_eq(s.parse.not_parsed[TPM_PARSE_BAD_IP_HEADER], 0);
    ck_assert_uint_eq(s.parse.l4_truncated, 1);
    ck_assert_uint_eq(s.parse.ip_len_from_frame, 1);
    ck_assert_uint_eq(s.flow_inserts, 1);
    tpm_destroy(tpm);
}
END_TEST

/* Phase 1 reads a frame's variables only while an event keeps a summary
 * (or a flow a TCP state): with count() events alone it takes the copy of
 * pass 2 that leaves them zero.  Summaries added, deleted (their flows
 * keep the retired slots, updated with zeros) and added again at run time
 * are exact in every epoch after their flows are matched, against the
 * frames' own payloads and TTLs, and the counts in every epoch. */
START_TEST(test_vars_when_needed)
{
    enum { N = 6, EPOCHS = 9 };
    struct tpm *tpm = new_tpm(NULL);
    static struct reports rs;
    static struct frame f[2 * N];
    struct tpm_frame fr[2 * N];
    const uint64_t e0 = T0 / (10 * MS);

    rs.n = 0;
    add(tpm, 1, "cnt filter=udp predicate=count() >= 0 group=5tuple "
        "interval=10ms");
    for (int e = 0; e < EPOCHS; e++) {
        if (e == 2) {
            add(tpm, 2, "vol filter=udp predicate=sum(volume) >= 0 "
                "group=5tuple interval=10ms");
            add(tpm, 3, "ttl filter=udp predicate=max(ttl) >= 0 "
                "group=5tuple interval=10ms");
        } else if (e == 5) {
            ck_assert_int_eq(tpm_event_del(tpm, 2), 0);
            ck_assert_int_eq(tpm_event_del(tpm, 3), 0);
        } else if (e == 7) {
            add(tpm, 4, "vol2 filter=udp predicate=sum(volume) >= 0 "
                "group=5tuple interval=10ms");
        }
        /* Flow i: two frames, payloads 3i + e and 3i + e + 1, TTLs
         * 20 + i + e and 19 + i + e. */
        for (int i = 0; i < N; i++) {
            for (int k = 0; k < 2; k++) {
                struct frame *x = &f[2 * i + k];
                udp_frame(x, ip4(10, 99, 0, 1), ip4(10, 0, 0, 1 + i),
                          1000, 2000, 3 * i + e + k, 20 + i + e - k);
                fr[2 * i + k] = (struct tpm_frame) { x->data, x->len,
                                                     x->len };
            }
        }
        tpm_advance(tpm, T0 + e * 10 * MS + 1);
        tpm_process_batch(tpm, fr, 2 * N);
        tpm_advance(tpm, T0 + (e + 1) * 10 * MS);
        sweep_all(tpm);
        collect(tpm, &rs);

        for (int i = 0; i < N; i++) {
            uint32_t dst = ip4(10, 0, 0, 1 + i);
            const struct tpm_report *r = find_report(&rs, 1, e0 + e, dst);
            ck_assert_msg(r && r->value == 2, "epoch %d flow %d", e, i);
            /* Matched by the backfill in the sweep after their addition:
             * exact from the next epoch on. */
            if (e >= 3 && e <= 4) {
                r = find_report(&rs, 2, e0 + e, dst);
                ck_assert_msg(r && r->value == 2 * (3 * i + e) + 1,
                              "volume, epoch %d flow %d", e, i);
                r = find_report(&rs, 3, e0 + e, dst);
                ck_assert_msg(r && r->value == 20 + i + e,
                              "ttl, epoch %d flow %d", e, i);
            } else if (e == 8) {
                r = find_report(&rs, 4, e0 + e, dst);
                ck_assert_msg(r && r->value == 2 * (3 * i + e) + 1,
                              "volume again, epoch %d flow %d", e, i);
            }
        }
    }
    tpm_destroy(tpm);
}
END_TEST

START_TEST(test_heavy_5tuple)
{
    struct tpm *tpm = new_tpm(NULL);
    struct reports rs = { .n = 0 };
    struct frame a, b;

    add(tpm, 7, "heavy filter=udp,nw_dst=10.0.128.0/24 "
        "predicate=sum(volume) > 500 group=5tuple interval=10ms");
    udp_frame(&a, ip4(10, 99, 0, 1), ip4(10, 0, 128, 5), 1000, 80, 50, 64);
    udp_frame(&b, ip4(10, 99, 0, 2), ip4(10, 0, 128, 6), 1000, 80, 10, 64);

    /* Epoch E: 11 packets of 50 B (550 > 500) and 11 of 10 B. */
    for (int i = 0; i < 11; i++) {
        send1(tpm, T0 + i * 100, &a);
        send1(tpm, T0 + i * 100 + 50, &b);
    }
    tpm_advance(tpm, T0 + 10 * MS);
    sweep_all(tpm);
    collect(tpm, &rs);

    uint64_t e = T0 / (10 * MS);
    ck_assert_int_eq(rs.n, 1);
    ck_assert_int_eq(rs.r[0].event_id, 7);
    ck_assert_uint_eq(rs.r[0].epoch, e);
    ck_assert_double_eq(rs.r[0].value, 550);
    ck_assert_uint_eq(rs.r[0].group.src[0], htonl(ip4(10, 99, 0, 1)));
    ck_assert_uint_eq(rs.r[0].group.dst[0], htonl(ip4(10, 0, 128, 5)));
    ck_assert_uint_eq(rs.r[0].group.sport, 1000);
    ck_assert_uint_eq(rs.r[0].group.dport, 80);
    ck_assert_uint_eq(rs.r[0].group.proto, 17);
    ck_assert_uint_eq(rs.r[0].flags, 0);

    struct tpm_stats s;
    stats(tpm, &s);
    ck_assert_uint_eq(s.packets, 22);
    ck_assert_uint_eq(s.flow_inserts, 2);
    ck_assert_uint_eq(s.sweeps_done, 1);
    ck_assert_uint_eq(s.sweeps_unfinished, 0);
    tpm_destroy(tpm);
}
END_TEST

/* Wraps the frame 'in' into 'out': Ethernet, IPv4 (172.16.0.2 ->
 * 172.16.0.1), UDP to 'dport' and a VXLAN header with 'vni'. */
static void
vxlan_frame(struct frame *out, const struct frame *in, uint16_t dport,
            uint32_t vni)
{
    uint32_t ulen = 8 + 8 + in->len;

    uint8_t *ip = eth_start(out, 0x0800);
    ck_assert_uint_le(14 + 20 + ulen, sizeof out->data);
    ip[0] = 0x45;
    put16(ip + 2, 20 + ulen);
    ip[8] = 64;
    ip[9] = 17;
    uint32_t sa = htonl(ip4(172, 16, 0, 2)), da = htonl(ip4(172, 16, 0, 1));
    memcpy(ip + 12, &sa, 4);
    memcpy(ip + 16, &da, 4);
    udp_header(ip + 20, 50000, dport, ulen - 8);
    uint8_t *vx = ip + 20 + 8;
    vx[0] = 0x08;
    vx[4] = vni >> 16;
    vx[5] = vni >> 8;
    vx[6] = vni;
    memcpy(vx + 8, in->data, in->len);
    out->len = 14 + 20 + ulen;
}

/* Sums the values of event 'id''s reports whose group is tenant 'vni'
 * ('tenant' false: no tenant) and destination 'dst'; '*n' reports. */
static double
tenant_sum(const struct reports *rs, uint32_t id, bool tenant, uint32_t vni,
           uint32_t dst, int *n)
{
    double v = 0;
    *n = 0;
    for (int i = 0; i < rs->n; i++) {
        const struct tpm_report *r = &rs->r[i];
        if (r->event_id == id && (r->group.tun != 0) == tenant
            && (!tenant || r->tun_id == vni)
            && (!dst || r->group.dst[0] == htonl(dst))) {
            v += r->value;
            (*n)++;
        }
    }
    return v;
}

/* The underlay: an event with the 'underlay' item counts tunnelled
 * frames as their outer flow (wire bytes, no tenant), malformed tunnels
 * included, beside events that count the same frames as their tenants'
 * inner flows; each frame once per view.  Untunnelled frames are seen by
 * both.  The outer view costs nothing without an underlay event. */
START_TEST(test_underlay)
{
    struct tpm *tpm = new_tpm(NULL);
    struct reports rs = { .n = 0 };
    struct tpm_tunnel_ports ports;
    struct frame in, plain, a, b, bad;
    struct tpm_stats s;
    int n;

    tpm_tunnel_ports_init(&ports);
    ck_assert(tpm_tunnel_ports_add(&ports, 4789, TPM_TUN_VXLAN));
    tpm_set_tunnel_ports(tpm, &ports);

    /* Before any underlay event: no outer flow. */
    add(tpm, 2, "inner filter=udp predicate=sum(packets) > 0 group=5tuple");
    udp_frame(&in, ip4(10, 0, 0, 2), ip4(10, 0, 0, 1), 7001, 8001, 20, 64);
    vxlan_frame(&a, &in, 4789, 5001);
    send1(tpm, T0, &a);
    stats(tpm, &s);
    ck_assert_uint_eq(s.tun_underlay, 0);

    add(tpm, 1, "under filter=udp,underlay predicate=sum(bytes) > 0 "
        "group=5tuple");
    add(tpm, 3, "tunnels filter=udp,tp_dst=4789,underlay "
        "predicate=sum(packets) > 0 group=nw_dst");
    tpm_advance(tpm, T0 + 10 * MS);
    sweep_all(tpm);
    collect(tpm, &rs);
    rs.n = 0;

    /* 3 frames of tenant 5001, 5 of 5002, one VXLAN header without its I
     * flag (not parsed: no tenant), 2 untunnelled frames. */
    uint64_t t = T0 + 10 * MS;
    vxlan_frame(&b, &in, 4789, 5002);
    vxlan_frame(&bad, &in, 4789, 5003);
    bad.data[14 + 20 + 8] = 0;
    udp_frame(&plain, ip4(10, 0, 0, 3), ip4(10, 0, 0, 4), 7002, 8002, 20,
              64);
    for (int i = 0; i < 3; i++) {
        send1(tpm, t + 100 + i * 100, &a);
    }
    for (int i = 0; i < 5; i++) {
        send1(tpm, t + 1000 + i * 100, &b);
    }
    send1(tpm, t + 2000, &bad);
    send1(tpm, t + 2100, &plain);
    send1(tpm, t + 2200, &plain);
    tpm_advance(tpm, t + 10 * MS);
    sweep_all(tpm);
    collect(tpm, &rs);

    uint32_t hv = ip4(172, 16, 0, 1), vm = ip4(10, 0, 0, 1);
    ck_assert_uint_eq(a.len, 112);
    /* The tunnel's outer flow: 9 frames of 112 bytes, of no tenant. */
    ck_assert_double_eq(tenant_sum(&rs, 1, false, 0, hv, &n), 9 * 112);
    ck_assert_int_eq(n, 1);
    ck_assert_double_eq(tenant_sum(&rs, 1, true, 0, 0, &n), 0);
    ck_assert_int_eq(n, 0);
    ck_assert_double_eq(tenant_sum(&rs, 1, false, 0, vm, &n), 0);
    ck_assert_double_eq(tenant_sum(&rs, 1, false, 0, ip4(10, 0, 0, 4), &n),
                        2 * 62);
    ck_assert_int_eq(n, 1);
    ck_assert_double_eq(tenant_sum(&rs, 3, false, 0, hv, &n), 9);
    ck_assert_int_eq(n, 1);
    ck_assert_double_eq(tenant_sum(&rs, 3, false, 0, ip4(10, 0, 0, 4), &n),
                        0);
    /* The inner view as without the underlay event. */
    ck_assert_double_eq(tenant_sum(&rs, 2, true, 5001, vm, &n), 3);
    ck_assert_double_eq(tenant_sum(&rs, 2, true, 5002, vm, &n), 5);
    ck_assert_double_eq(tenant_sum(&rs, 2, false, 0, ip4(10, 0, 0, 4), &n),
                        2);
    ck_assert_double_eq(tenant_sum(&rs, 2, false, 0, hv, &n), 0);
    ck_assert_int_eq(n, 0);

    stats(tpm, &s);
    ck_assert_uint_eq(s.tun_underlay, 9);
    ck_assert_uint_eq(s.parse.tun_decapsulated, 9);
    ck_assert_uint_eq(s.parse.not_parsed[TPM_PARSE_TUN_BAD_HEADER], 1);

    /* The last underlay event gone: the outer view stops. */
    ck_assert_int_eq(tpm_event_del(tpm, 1), 0);
    ck_assert_int_eq(tpm_event_del(tpm, 3), 0);
    send1(tpm, t + 10 * MS + 100, &a);
    stats(tpm, &s);
    ck_assert_uint_eq(s.tun_underlay, 9);
    tpm_destroy(tpm);
}
END_TEST

/* Tenants: VXLAN frames to a tunnel port are counted under their inner
 * 5-tuple and VNI; two tenants' identical 5-tuples stay apart (group
 * 5tuple and tun_id), tun_id= selects one tenant, a port's tenant applies
 * to its untunnelled frames, and without tunnel ports nothing is
 * decapsulated (the outer flow is counted). */
START_TEST(test_tenants)
{
    struct tpm *tpm = new_tpm(NULL);
    struct reports rs = { .n = 0 };
    struct tpm_tunnel_ports ports;
    struct frame in, back, a, b;

    tpm_tunnel_ports_init(&ports);
    ck_assert(tpm_tunnel_ports_add(&ports, 4789, TPM_TUN_VXLAN));
    tpm_set_tunnel_ports(tpm, &ports);

    add(tpm, 1, "all filter=udp predicate=sum(packets) > 0 group=5tuple");
    add(tpm, 2, "a filter=udp,tun_id=5001 predicate=sum(bytes) > 0 "
        "group=5tuple");
    add(tpm, 3, "ten filter=udp predicate=sum(packets) > 0 group=tun_id");
    add(tpm, 4, "masked filter=udp,tun_id=0x1300/0xff00 "
        "predicate=sum(packets) > 0 group=tun_id");

    /* The same inner flow in both tenants: 3 frames of 5001, 5 of 5002. */
    udp_frame(&in, ip4(10, 0, 0, 2), ip4(10, 0, 0, 1), 7001, 8001, 20, 64);
    vxlan_frame(&a, &in, 4789, 5001);
    vxlan_frame(&b, &in, 4789, 5002);
    for (int i = 0; i < 3; i++) {
        send1(tpm, T0 + i * 100, &a);
    }
    for (int i = 0; i < 5; i++) {
        send1(tpm, T0 + 1000 + i * 100, &b);
    }
    /* The VM of tenant 5002 answers from its port: 2 untunnelled frames
     * counted as that tenant's; then 1 frame of a port of no tenant. */
    udp_frame(&back, ip4(10, 0, 0, 1), ip4(10, 0, 0, 2), 8001, 7001, 30, 64);
    tpm_set_rx_tunnel(tpm, true, 5002);
    send1(tpm, T0 + 2000, &back);
    send1(tpm, T0 + 2100, &back);
    tpm_set_rx_tunnel(tpm, false, 0);
    send1(tpm, T0 + 2200, &back);
    tpm_advance(tpm, T0 + 10 * MS);
    sweep_all(tpm);
    collect(tpm, &rs);

    int n;
    uint32_t vm = ip4(10, 0, 0, 1), remote = ip4(10, 0, 0, 2);
    ck_assert_double_eq(tenant_sum(&rs, 1, true, 5001, vm, &n), 3);
    ck_assert_int_eq(n, 1);
    ck_assert_double_eq(tenant_sum(&rs, 1, true, 5002, vm, &n), 5);
    ck_assert_int_eq(n, 1);
    ck_assert_double_eq(tenant_sum(&rs, 1, true, 5002, remote, &n), 2);
    ck_assert_int_eq(n, 1);
    ck_assert_double_eq(tenant_sum(&rs, 1, false, 0, remote, &n), 1);
    ck_assert_int_eq(n, 1);
    ck_assert_double_eq(tenant_sum(&rs, 1, false, 0, vm, &n), 0);
    ck_assert_int_eq(n, 0);
    /* Bytes of the inner frame (60, the minimum), tenant 5001 only. */
    ck_assert_double_eq(tenant_sum(&rs, 2, true, 5001, 0, &n), 3 * 62);
    ck_assert_int_eq(n, 1);
    ck_assert_double_eq(tenant_sum(&rs, 2, true, 5002, 0, &n), 0);
    ck_assert_int_eq(n, 0);
    ck_assert_double_eq(tenant_sum(&rs, 3, true, 5001, 0, &n), 3);
    ck_assert_double_eq(tenant_sum(&rs, 3, true, 5002, 0, &n), 7);
    ck_assert_double_eq(tenant_sum(&rs, 3, false, 0, 0, &n), 1);
    /* 5001 = 0x1389 and 5002 = 0x138a are both in 0x1300/0xff00. */
    ck_assert_double_eq(tenant_sum(&rs, 4, true, 5001, 0, &n), 3);
    ck_assert_double_eq(tenant_sum(&rs, 4, true, 5002, 0, &n), 7);
    ck_assert_double_eq(tenant_sum(&rs, 4, false, 0, 0, &n), 0);

    /* A poll names the tenant by its VNI. */
    const struct tpm_report *r = NULL;
    for (int i = 0; i < rs.n; i++) {
        if (rs.r[i].event_id == 3 && rs.r[i].tun_id == 5002) {
            r = &rs.r[i];
        }
    }
    ck_assert_ptr_nonnull(r);
    double v;
    ck_assert_int_eq(tpm_poll(tpm, 3, &r->group, 5002, 0, r->epoch, &v),
                     TPM_POLL_OK);
    ck_assert_double_eq(v, 7);
    ck_assert_int_eq(tpm_poll(tpm, 3, &r->group, 5003, 0, r->epoch, &v),
                     TPM_POLL_NO_GROUP);

    struct tpm_stats s;
    stats(tpm, &s);
    ck_assert_uint_eq(s.parse.tun_decapsulated, 8);
    ck_assert_uint_eq(s.tenants, 2);
    ck_assert_uint_eq(s.tun_slots_full, 0);
    tpm_destroy(tpm);

    /* No tunnel ports: the outer flow, of no tenant. */
    rs.n = 0;
    tpm = new_tpm(NULL);
    add(tpm, 1, "all filter=udp predicate=sum(packets) > 0 group=5tuple");
    send1(tpm, T0, &a);
    send1(tpm, T0 + 100, &b);
    tpm_advance(tpm, T0 + 10 * MS);
    sweep_all(tpm);
    collect(tpm, &rs);
    ck_assert_double_eq(tenant_sum(&rs, 1, false, 0, ip4(172, 16, 0, 1),
                                   &n), 2);
    ck_assert_int_eq(n, 1);
    tpm_destroy(tpm);
}
END_TEST

/* Adds event 'line' as 'id', its in_port= interface numbered 'slot'. */
static void
add_port(struct tpm *tpm, uint32_t id, const char *line, uint16_t slot)
{
    struct tpm_event *ev;
    char *error = tpm_event_parse_line(line, &ev);
    ck_assert_msg(!error, "%s: %s", line, error);
    ev->in_port_slot = slot;
    error = tpm_event_add(tpm, ev, id);
    ck_assert_msg(!error, "%s: %s", line, error);
}

/* Sums the reports of event 'id' whose port is 'port' (and, with 'dst'
 * not 0, whose group's destination is 'dst'); '*n' gets their number. */
static double
port_sum(const struct reports *rs, uint32_t id, uint16_t port, uint32_t dst,
         int *n)
{
    double sum = 0;
    *n = 0;
    for (int i = 0; i < rs->n; i++) {
        const struct tpm_report *r = &rs->r[i];
        if (r->event_id == id && r->port == port
            && (!dst || r->group.dst[0] == htonl(dst))) {
            sum += r->value;
            (*n)++;
        }
    }
    return sum;
}

/* Per-port events: a flow belongs to the interface it is first seen on;
 * in_port= sees that interface's flows only (none while its number is 0:
 * no such interface); group=in_port has one group per interface, and
 * in_port,5tuple one per (interface, 5-tuple); polls name the port. */
START_TEST(test_ports)
{
    struct tpm *tpm = new_tpm(NULL);
    struct reports rs = { .n = 0 };
    struct frame a1, a2, b1;

    add_port(tpm, 1, "vma filter=udp,in_port=vma predicate=sum(packets) > 0 "
             "group=5tuple", 7);
    add_port(tpm, 2, "gone filter=udp,in_port=none predicate=sum(packets) "
             "> 0 group=5tuple", 0);
    add(tpm, 3, "byport filter=udp predicate=sum(packets) > 0 "
        "group=in_port");
    add(tpm, 4, "byport5 filter=udp predicate=sum(bytes) > 0 "
        "group=in_port,5tuple");
    add(tpm, 5, "all filter=udp predicate=sum(packets) > 0 group=nw_dst");

    /* Port 7 (vma): 3 frames of flow a1 and 2 of a2; port 9: 4 of b1 and
     * 1 of a1, which keeps the port it was first seen on (7). */
    udp_frame(&a1, ip4(10, 0, 0, 1), ip4(10, 0, 0, 2), 7001, 8001, 20, 64);
    udp_frame(&a2, ip4(10, 0, 0, 1), ip4(10, 0, 0, 3), 7002, 8002, 20, 64);
    udp_frame(&b1, ip4(10, 0, 0, 9), ip4(10, 0, 0, 4), 7003, 8003, 40, 64);
    tpm_set_rx_port(tpm, 7);
    for (int i = 0; i < 3; i++) {
        send1(tpm, T0 + i * 100, &a1);
    }
    send1(tpm, T0 + 300, &a2);
    send1(tpm, T0 + 400, &a2);
    tpm_set_rx_port(tpm, 9);
    for (int i = 0; i < 4; i++) {
        send1(tpm, T0 + 500 + i * 100, &b1);
    }
    send1(tpm, T0 + 900, &a1);
    tpm_advance(tpm, T0 + 10 * MS);
    sweep_all(tpm);
    collect(tpm, &rs);

    int n;
    ck_assert_double_eq(port_sum(&rs, 1, 0, ip4(10, 0, 0, 2), &n), 4);
    ck_assert_double_eq(port_sum(&rs, 1, 0, ip4(10, 0, 0, 3), &n), 2);
    ck_assert_double_eq(port_sum(&rs, 1, 0, ip4(10, 0, 0, 4), &n), 0);
    ck_assert_int_eq(n, 0);
    ck_assert_double_eq(port_sum(&rs, 2, 0, 0, &n), 0);
    ck_assert_int_eq(n, 0);
    ck_assert_double_eq(port_sum(&rs, 3, 7, 0, &n), 6);
    ck_assert_int_eq(n, 1);
    ck_assert_double_eq(port_sum(&rs, 3, 9, 0, &n), 4);
    ck_assert_int_eq(n, 1);
    /* Bytes: a1 and a2 frames are 62 bytes (the minimum), b1's 82. */
    ck_assert_double_eq(port_sum(&rs, 4, 7, ip4(10, 0, 0, 2), &n), 4 * 62);
    ck_assert_double_eq(port_sum(&rs, 4, 7, ip4(10, 0, 0, 3), &n), 2 * 62);
    ck_assert_double_eq(port_sum(&rs, 4, 9, ip4(10, 0, 0, 4), &n), 4 * 82);
    ck_assert_double_eq(port_sum(&rs, 4, 9, ip4(10, 0, 0, 2), &n), 0);
    ck_assert_int_eq(n, 0);
    /* An event that does not group by port reports port 0. */
    ck_assert_double_eq(port_sum(&rs, 5, 0, 0, &n), 10);

    /* Polls: the port is part of the group of event 3, ignored for 5. */
    const struct tpm_report *r = NULL;
    for (int i = 0; i < rs.n; i++) {
        if (rs.r[i].event_id == 3 && rs.r[i].port == 9) {
            r = &rs.r[i];
        }
    }
    ck_assert_ptr_nonnull(r);
    double v;
    ck_assert_int_eq(tpm_poll(tpm, 3, &r->group, 0, 9, r->epoch, &v),
                     TPM_POLL_OK);
    ck_assert_double_eq(v, 4);
    ck_assert_int_eq(tpm_poll(tpm, 3, &r->group, 0, 7, r->epoch, &v),
                     TPM_POLL_OK);
    ck_assert_double_eq(v, 6);
    ck_assert_int_eq(tpm_poll(tpm, 3, &r->group, 0, 8, r->epoch, &v),
                     TPM_POLL_NO_GROUP);

    /* An event added later backfills by port too. */
    add_port(tpm, 6, "late filter=udp,in_port=p9 predicate=sum(packets) > 0 "
             "group=5tuple", 9);
    rs.n = 0;
    for (int e = 1; e < 5; e++) {
        tpm_set_rx_port(tpm, 9);
        send1(tpm, T0 + e * 10 * MS + 100, &b1);
        tpm_set_rx_port(tpm, 7);
        send1(tpm, T0 + e * 10 * MS + 200, &a2);
        tpm_advance(tpm, T0 + (e + 1) * 10 * MS);
        sweep_all(tpm);
    }
    collect(tpm, &rs);
    /* Once the backfill is through (test_runtime_add_backfill), one b1
     * frame in each epoch, never a2. */
    uint64_t e0 = T0 / (10 * MS);
    for (uint64_t e = e0 + 3; e <= e0 + 4; e++) {
        const struct tpm_report *late = find_report(&rs, 6, e,
                                                    ip4(10, 0, 0, 4));
        ck_assert_ptr_nonnull(late);
        ck_assert_double_eq(late->value, 1);
    }
    ck_assert_double_eq(port_sum(&rs, 6, 0, ip4(10, 0, 0, 3), &n), 0);
    ck_assert_int_eq(n, 0);
    tpm_destroy(tpm);
}
END_TEST

/* Tenant slots are finite: a VNI beyond them is not counted (never
 * merged with another tenant), and counted as such. */
START_TEST(test_tenant_slots_full)
{
    struct tpm_params p;
    test_params(&p);
    p.tenant_slots = 2;
    struct tpm *tpm = new_tpm(&p);
    struct reports rs = { .n = 0 };
    struct tpm_tunnel_ports ports;
    struct frame in, t;

    tpm_tunnel_ports_init(&ports);
    ck_assert(tpm_tunnel_ports_add(&ports, 4789, TPM_TUN_VXLAN));
    tpm_set_tunnel_ports(tpm, &ports);
    add(tpm, 1, "ten filter=udp predicate=sum(packets) > 0 group=tun_id");
    udp_frame(&in, ip4(10, 0, 0, 2), ip4(10, 0, 0, 1), 7001, 8001, 20, 64);
    for (uint32_t vni = 1; vni <= 4; vni++) {
        vxlan_frame(&t, &in, 4789, vni);
        send1(tpm, T0 + vni * 100, &t);
        send1(tpm, T0 + vni * 100 + 50, &t);
    }
    tpm_advance(tpm, T0 + 10 * MS);
    sweep_all(tpm);
    collect(tpm, &rs);
    int n;
    ck_assert_double_eq(tenant_sum(&rs, 1, true, 1, 0, &n), 2);
    ck_assert_double_eq(tenant_sum(&rs, 1, true, 2, 0, &n), 2);
    ck_assert_double_eq(tenant_sum(&rs, 1, true, 3, 0, &n), 0);
    ck_assert_int_eq(rs.n, 2);
    struct tpm_stats s;
    stats(tpm, &s);
    ck_assert_uint_eq(s.tun_slots_full, 4);
    ck_assert_uint_eq(s.tenants, 2);
    tpm_destroy(tpm);
}
END_TEST

START_TEST(test_group_aggregation)
{
    struct tpm *tpm = new_tpm(NULL);
    struct reports rs = { .n = 0 };
    struct frame f[6];

    add(tpm, 1, "spike filter=udp,nw_dst=10.0.0.0/8 "
        "predicate=sum(volume) > 1000 group=nw_dst/24 interval=10ms");
    /* Three flows to 10.1.1.0/24, 400 B each (none above 1000 alone);
     * three to 10.1.2.0/24, 300 B each (900 in all: below). */
    for (int i = 0; i < 3; i++) {
        udp_frame(&f[i], ip4(10, 99, 0, 1), ip4(10, 1, 1, i + 1), 1 + i, 9,
                  40, 64);
        udp_frame(&f[3 + i], ip4(10, 99, 0, 1), ip4(10, 1, 2, i + 1), 1 + i,
                  9, 30, 64);
    }
    for (int k = 0; k < 10; k++) {
        for (int i = 0; i < 6; i++) {
            send1(tpm, T0 + k * 1000 + i, &f[i]);
        }
    }
    tpm_advance(tpm, T0 + 10 * MS);
    sweep_all(tpm);
    collect(tpm, &rs);

    ck_assert_int_eq(rs.n, 1);
    ck_assert_double_eq(rs.r[0].value, 1200);
    ck_assert_uint_eq(rs.r[0].group.dst[0], htonl(ip4(10, 1, 1, 0)));
    ck_assert_uint_eq(rs.r[0].group.src[0], 0);
    ck_assert_uint_eq(rs.r[0].group.sport, 0);

    struct tpm_stats s;
    stats(tpm, &s);
    ck_assert_uint_eq(s.triggers, 2);       /* Two /24 children. */
    ck_assert_uint_eq(s.children_created, 2);
    ck_assert_uint_eq(s.matches, 6);
    uint64_t instances, flows;
    ck_assert_int_eq(tpm_event_info(tpm, 1, &instances, &flows), 0);
    ck_assert_uint_eq(instances, 2);
    ck_assert_uint_eq(flows, 6);
    ck_assert_int_eq(tpm_event_info(tpm, 2, &instances, &flows), ENOENT);
    tpm_destroy(tpm);
}
END_TEST

/* Reference model for the randomized aggregate test: per (group, interval)
 * the packets' values. */
struct ref_cell {
    uint64_t iv;
    int group;
    double n, sum, sumsq, min, max, last, nz;
};

static struct ref_cell *
ref_cell(struct ref_cell *cells, int *n_cells, uint64_t iv, int group)
{
    for (int i = 0; i < *n_cells; i++) {
        if (cells[i].iv == iv && cells[i].group == group) {
            return &cells[i];
        }
    }
    struct ref_cell *c = &cells[(*n_cells)++];
    memset(c, 0, sizeof *c);
    c->iv = iv;
    c->group = group;
    return c;
}

/* Sends 3000 packets in runs of 1 to 'max_run' packets of one flow (one
 * batch per run, one packet per batch with 'max_run' 1) and checks every
 * aggregate against a reference computed from the packets sent. */
static void
check_aggregates__(int max_run)
{
    /* Events that always hold, so that every (group, interval) with
     * packets is reported with its value; compared with a reference
     * computed from the packets sent.  Intervals of 30 ms over 10 ms
     * epochs, groups of nw_dst/24, randomized flows, sizes and TTLs,
     * with epochs skipped. */
    static const char *const defs[] = {
        "filter=udp predicate=sum(volume) >= 0",
        "filter=udp predicate=count() >= 0",
        "filter=udp predicate=avg(bytes) >= 0",
        "filter=udp predicate=min(ttl) >= 0",
        "filter=udp predicate=max(ttl) >= 0",
        "filter=udp predicate=stddev(volume) >= 0",
        "filter=udp predicate=count(volume > 20) >= 0",
        "filter=udp predicate=sum(volume * 2 + 1) >= 0",
    };
    enum { N_DEFS = ARRAY_SIZE(defs) };
    struct tpm *tpm = new_tpm(NULL);
    static struct reports rs;
    static struct ref_cell cells[4096];
    int n_cells = 0;
    uint32_t seed = 12345;

    rs.n = 0;
    for (int i = 0; i < N_DEFS; i++) {
        char line[256];
        snprintf(line, sizeof line, "e%d %s group=nw_dst/24 interval=30ms",
                 i, defs[i]);
        add(tpm, i, line);
    }

    uint64_t now = T0 + 3 * MS;
    for (int k = 0; k < 3000;) {
        seed = seed * 1103515245 + 12345;
        int group = (seed >> 8) % 5;
        int host = (seed >> 12) % 7;
        int run = 1 + (seed >> 4) % max_run;
        static struct frame f[TPM_BATCH_MAX];
        struct tpm_frame fr[TPM_BATCH_MAX];
        now += (seed >> 24) % 64 == 0 ? 47 * MS : 37000;
        struct ref_cell *c = ref_cell(cells, &n_cells,
                                      now / (30 * MS), group);
        for (int j = 0; j < run; j++, k++) {
            /* One flow; payloads and TTLs vary within the run. */
            if (j) {
                seed = seed * 1103515245 + 12345;
            }
            int payload = (seed >> 16) % 60;
            int ttl = 1 + (seed >> 20) % 200;
            udp_frame(&f[j], ip4(10, 99, 0, host), ip4(10, 2, group, host),
                      5 + host, 53, payload, ttl);
            fr[j] = (struct tpm_frame) { f[j].data, f[j].len, f[j].len };

            double bytes = f[j].len;
            c->min = c->n ? MIN(c->min, ttl) : ttl;
            c->max = c->n ? MAX(c->max, ttl) : ttl;
            c->n++;
            c->sum += payload;
            c->sumsq += (double) payload * payload;
            c->last += bytes;          /* Sum of bytes, for avg(bytes). */
            c->nz += payload > 20;
        }
        tpm_advance(tpm, now);
        tpm_process_batch(tpm, fr, run);
        sweep_all(tpm);
        collect(tpm, &rs);
    }
    tpm_advance(tpm, (now / (30 * MS) + 1) * 30 * MS);
    sweep_all(tpm);
    collect(tpm, &rs);

    ck_assert_int_eq(rs.n, n_cells * N_DEFS);
    for (int i = 0; i < n_cells; i++) {
        const struct ref_cell *c = &cells[i];
        uint64_t end = (c->iv + 1) * 3 - 1;
        double mean = c->sum / c->n;
        double expect[N_DEFS] = {
            c->sum, c->n, c->last / c->n, c->min, c->max,
            sqrt(MAX(0, c->sumsq / c->n - mean * mean)), c->nz,
            2 * c->sum + c->n,
        };
        for (int d = 0; d < N_DEFS; d++) {
            const struct tpm_report *r
                = find_report(&rs, d, end, ip4(10, 2, c->group, 0));
            ck_assert_msg(r, "no report for event %d epoch %llu group %d",
                          d, (unsigned long long) end, c->group);
            ck_assert_msg(fabs(r->value - expect[d])
                          <= 1e-9 * MAX(1, fabs(expect[d])),
                          "event %d group %d: %.17g != %.17g", d, c->group,
                          r->value, expect[d]);
        }
    }
    struct tpm_stats s;
    stats(tpm, &s);
    ck_assert_uint_eq(s.sweeps_unfinished, 0);
    ck_assert_uint_gt(s.epochs_skipped, 0);
    if (max_run > 1) {
        /* Runs were updated as runs. */
        ck_assert_uint_gt(s.lastflow_hits, 1000);
    }
    tpm_destroy(tpm);
}

START_TEST(test_aggregates_random)
{
    check_aggregates__(1);
}
END_TEST

/* The same with runs of packets of one flow, updated once per run. */
START_TEST(test_aggregates_runs)
{
    check_aggregates__(8);
}
END_TEST

/* Batches that mix flows of four summary masks (one per destination
 * port, each port with events of its own), frames that do not parse, new
 * flows and runs of one flow's packets: phase 1 looks every packet's flow
 * up first and then updates the flows a stretch of one mask at a time
 * (one plan function per stretch), so every aggregate must still be what
 * the packets give one by one.  The masks take each kind of plan: two
 * slots of their own function (sum of the volume and max of the TTL; sum
 * of the bytes and min of the volume), the general one (expressions, a
 * sum of squares beside integer slots), and none (count() alone). */
struct mix_cell {
    uint64_t iv;
    int group, port;
    double n, vol, volsq, ttl_min, ttl_max, nz, bytes, vol_min;
};

START_TEST(test_aggregates_mixed_batches)
{
    static const struct {
        int port;               /* Index of the destination port. */
        const char *pred;
    } defs[] = {
        { 0, "sum(volume) >= 0" },
        { 0, "max(ttl) >= 0" },
        { 1, "min(ttl) >= 0" },
        { 1, "count(volume > 20) >= 0" },
        { 1, "sum(volume * 2 + 1) >= 0" },
        { 1, "stddev(volume) >= 0" },
        { 1, "avg(bytes) >= 0" },
        { 2, "count() >= 0" },
        { 3, "sum(bytes) >= 0" },
        { 3, "min(volume) >= 0" },
    };
    enum { N_DEFS = ARRAY_SIZE(defs), N_PORTS = 4 };
    struct tpm *tpm = new_tpm(NULL);
    static struct reports rs;
    static struct mix_cell cells[4096];
    int n_cells = 0;
    uint32_t seed = 777;

    rs.n = 0;
    for (int i = 0; i < N_DEFS; i++) {
        char line[256];
        snprintf(line, sizeof line, "m%d filter=udp,tp_dst=%d predicate=%s "
                 "group=nw_dst/24 interval=30ms", i, 53 + defs[i].port,
                 defs[i].pred);
        add(tpm, i, line);
    }

    uint64_t now = T0 + 3 * MS;
    int sent = 0, unparsed = 0;
    int group = 0, host = 0, port = 0;
    while (sent < 4000) {
        static struct frame f[TPM_BATCH_MAX];
        struct tpm_frame fr[TPM_BATCH_MAX];
        seed = seed * 1103515245 + 12345;
        int n = 1 + (seed >> 8) % TPM_BATCH_MAX;
        now += (seed >> 24) % 64 == 0 ? 47 * MS : 37000;
        for (int j = 0; j < n; j++) {
            seed = seed * 1103515245 + 12345;
            if ((seed >> 4) % 16 == 0) {
                /* ARP: not parsed, between the others. */
                memset(&f[j], 0, sizeof f[j]);
                put16(f[j].data + 12, 0x0806);
                f[j].len = 60;
                fr[j] = (struct tpm_frame) { f[j].data, 60, 60 };
                unparsed++;
                continue;
            }
            if ((seed >> 8) % 3) {
                /* Another flow (else the last one again: a run). */
                group = (seed >> 12) % 5;
                host = (seed >> 16) % 7;
                port = (seed >> 20) % N_PORTS;
            }
            seed = seed * 1103515245 + 12345;
            int payload = (seed >> 16) % 60;
            int ttl = 1 + (seed >> 8) % 200;
            udp_frame(&f[j], ip4(10, 99, 0, host), ip4(10, 2, group, host),
                      5 + host, 53 + port, payload, ttl);
            fr[j] = (struct tpm_frame) { f[j].data, f[j].len, f[j].len };

            struct mix_cell *c = NULL;
            uint64_t iv = now / (30 * MS);
            for (int i = 0; i < n_cells && !c; i++) {
                if (cells[i].iv == iv && cells[i].group == group
                    && cells[i].port == port) {
                    c = &cells[i];
                }
            }
            if (!c) {
                ck_assert_int_lt(n_cells, (int) ARRAY_SIZE(cells));
                c = &cells[n_cells++];
                memset(c, 0, sizeof *c);
                c->iv = iv;
                c->group = group;
                c->port = port;
            }
            c->ttl_min = c->n ? MIN(c->ttl_min, ttl) : ttl;
            c->ttl_max = c->n ? MAX(c->ttl_max, ttl) : ttl;
            c->vol_min = c->n ? MIN(c->vol_min, payload) : payload;
            c->n++;
            c->vol += payload;
            c->volsq += (double) payload * payload;
            c->nz += payload > 20;
            c->bytes += f[j].len;
            sent++;
        }
        tpm_advance(tpm, now);
        tpm_process_batch(tpm, fr, n);
        sweep_all(tpm);
        collect(tpm, &rs);
    }
    tpm_advance(tpm, (now / (30 * MS) + 1) * 30 * MS);
    sweep_all(tpm);
    collect(tpm, &rs);

    int expected = 0;
    for (int i = 0; i < n_cells; i++) {
        const struct mix_cell *c = &cells[i];
        uint64_t end = (c->iv + 1) * 3 - 1;
        double mean = c->vol / c->n;
        double expect[N_DEFS] = {
            c->vol, c->ttl_max,
            c->ttl_min, c->nz, 2 * c->vol + c->n,
            sqrt(MAX(0, c->volsq / c->n - mean * mean)), c->bytes / c->n,
            c->n,
            c->bytes, c->vol_min,
        };
        for (int d = 0; d < N_DEFS; d++) {
            if (defs[d].port != c->port) {
                continue;
            }
            expected++;
            const struct tpm_report *r
                = find_report(&rs, d, end, ip4(10, 2, c->group, 0));
            ck_assert_msg(r, "no report for event %d epoch %llu group %d",
                          d, (unsigned long long) end, c->group);
            ck_assert_msg(fabs(r->value - expect[d])
                          <= 1e-9 * MAX(1, fabs(expect[d])),
                          "event %d (%s) group %d: %.17g != %.17g", d,
                          defs[d].pred, c->group, r->value, expect[d]);
        }
    }
    ck_assert_int_eq(rs.n, expected);

    struct tpm_stats s;
    stats(tpm, &s);
    ck_assert_uint_eq(s.packets, (uint64_t) sent + unparsed);
    ck_assert_uint_gt(unparsed, 100);
    ck_assert_uint_eq(s.sweeps_unfinished, 0);
    ck_assert_uint_gt(s.epochs_skipped, 0);
    /* Runs were updated as runs, and new flows came mid-batch. */
    ck_assert_uint_gt(s.lastflow_hits, 500);
    ck_assert_uint_eq(s.flow_inserts, 5 * 7 * N_PORTS);
    tpm_destroy(tpm);
}
END_TEST

/* Reference model for test_sweep_paths: per (epoch, /24 group, host) the
 * packets' values; host -1 for the whole /24. */
struct path_cell {
    uint64_t epoch;
    int group, host;
    double n, sum, sumsq, min, max, nz;
};

static struct path_cell *
path_cell(struct path_cell *cells, int *n_cells, uint64_t epoch, int group,
          int host)
{
    for (int i = 0; i < *n_cells; i++) {
        if (cells[i].epoch == epoch && cells[i].group == group
            && cells[i].host == host) {
            return &cells[i];
        }
    }
    struct path_cell *c = &cells[(*n_cells)++];
    memset(c, 0, sizeof *c);
    c->epoch = epoch;
    c->group = group;
    c->host = host;
    return c;
}

static void
path_cell_add(struct path_cell *c, int payload, int ttl)
{
    c->min = c->n ? MIN(c->min, ttl) : ttl;
    c->max = c->n ? MAX(c->max, ttl) : ttl;
    c->n++;
    c->sum += payload;
    c->sumsq += (double) payload * payload;
    c->nz += payload > 20;
}

/* The planned run's lookahead takes one of two forms (sweep.c,
 * planned_prefetch__()): every flow entry fetched without a branch, where
 * the table's live flows fit in the L2 cache, or by the flow's touched
 * bit.  Loop tests run over both ('form' 0: the first, whatever the
 * table's size; 1: the second): prefetches change no result, so the same
 * reports are expected from each. */
static void
set_lookahead(struct tpm *tpm, int form)
{
    tpm->sweep_cache_bytes = form ? 0 : UINT64_MAX;
}

/* Checks that the last sweep started took lookahead 'form'. */
static void
check_lookahead(const struct tpm *tpm, int form)
{
    ck_assert_int_eq(tpm->sw.fetch_all, !form);
}

START_TEST(test_sweep_paths)
{
    /* One-epoch events that always hold, so that every (group, epoch)
     * with packets is reported with its value, compared with a reference
     * computed from the packets sent.  The sweep takes a different path
     * for each kind of instance: 5-tuple instances of "AGG op CONSTANT"
     * events are swept from a copy of their event (planned), those of
     * other one-epoch predicates without prev() gather on the stack, and
     * instances with prev() keep their accumulators.  The /24 groups
     * have one flow (groups 0 and 1), up to 7 (2 and 3), up to 40 (4:
     * the inline item and one chunk, swept with the planned ones) and up
     * to 150 (5: several chunks, swept chunk by chunk, the accumulators
     * kept); an event deleted halfway makes the sweep look at every
     * instance's event again for a while. */
    static const struct {
        const char *def;
        bool coarse;            /* Grouped by /24. */
    } defs[] = {
        { "predicate=sum(volume) >= 0 group=5tuple", false },
        { "predicate=count() >= 0 group=5tuple", false },
        { "predicate=max(ttl) >= 0 group=5tuple", false },
        { "predicate=min(ttl) >= 0 group=5tuple", false },
        { "predicate=stddev(volume) >= 0 group=5tuple", false },
        { "predicate=count(volume > 20) >= 0 group=5tuple", false },
        { "predicate=sum(volume) + count() >= 0 group=5tuple", false },
        { "predicate=count() + 0 * prev(count()) >= 0 group=5tuple", false },
        { "predicate=avg(volume) >= 0 group=nw_dst/24", true },
        { "predicate=sum(volume) >= 0 group=nw_dst/24", true },
        { "predicate=count() >= 0 group=nw_dst/24", true },
        { "predicate=max(ttl) >= 0 group=nw_dst/24", true },
        { "predicate=min(ttl) >= 0 group=nw_dst/24", true },
        { "predicate=stddev(volume) >= 0 group=nw_dst/24", true },
    };
    static const int hosts[] = { 1, 1, 7, 7, 40, 150 };
    enum { N_DEFS = ARRAY_SIZE(defs), DOOMED = 99 };
    struct tpm *tpm = new_tpm(NULL);
    set_lookahead(tpm, _i);
    static struct reports rs;
    static struct path_cell cells[8192];
    int n_cells = 0;
    uint32_t seed = 777;

    rs.n = 0;
    for (int i = 0; i < N_DEFS; i++) {
        char line[256];
        snprintf(line, sizeof line, "e%d filter=udp,nw_dst=10.3.0.0/16 %s "
                 "interval=10ms", i, defs[i].def);
        add(tpm, i, line);
    }
    add(tpm, DOOMED, "doomed filter=udp,nw_dst=10.3.0.0/16 "
        "predicate=count() >= 0 group=5tuple interval=10ms");

    uint64_t now = T0 + 3 * MS;
    for (int k = 0; k < 3000; k++) {
        seed = seed * 1103515245 + 12345;
        int group = (seed >> 8) % ARRAY_SIZE(hosts);
        int host = hosts[group] == 1 ? 1 : (int) ((seed >> 12)
                                                  % hosts[group]);
        int payload = (seed >> 16) % 60;
        int ttl = 1 + (seed >> 20) % 200;
        struct frame f;
        udp_frame(&f, ip4(10, 99, 0, host), ip4(10, 3, group, host), 5 + host,
                  53, payload, ttl);
        now += (seed >> 24) % 64 == 0 ? 27 * MS : 37000;
        send1(tpm, now, &f);
        sweep_all(tpm);
        collect(tpm, &rs);
        if (k == 1500) {
            ck_assert_int_eq(tpm_event_del(tpm, DOOMED), 0);
        }

        uint64_t e = now / (10 * MS);
        path_cell_add(path_cell(cells, &n_cells, e, group, host), payload,
                      ttl);
        path_cell_add(path_cell(cells, &n_cells, e, group, -1), payload,
                      ttl);
    }
    tpm_advance(tpm, (now / (10 * MS) + 1) * 10 * MS);
    sweep_all(tpm);
    collect(tpm, &rs);

    int expected = 0;
    for (int i = 0; i < n_cells; i++) {
        const struct path_cell *c = &cells[i];
        double mean = c->sum / c->n;
        double sd = sqrt(MAX(0, c->sumsq / c->n - mean * mean));
        double expect[N_DEFS] = {
            c->sum, c->n, c->max, c->min, sd, c->nz, c->sum + c->n, c->n,
            c->sum / c->n, c->sum, c->n, c->max, c->min, sd,
        };
        for (int d = 0; d < N_DEFS; d++) {
            if (defs[d].coarse != (c->host < 0)) {
                continue;
            }
            uint32_t dst = ip4(10, 3, c->group, MAX(c->host, 0));
            const struct tpm_report *r = find_report(&rs, d, c->epoch, dst);
            ck_assert_msg(r, "no report for event %d epoch %llu group %d "
                          "host %d", d, (unsigned long long) c->epoch,
                          c->group, c->host);
            ck_assert_msg(fabs(r->value - expect[d])
                          <= 1e-9 * MAX(1, fabs(expect[d])),
                          "event %d group %d host %d: %.17g != %.17g", d,
                          c->group, c->host, r->value, expect[d]);
            ck_assert_uint_eq(r->flags, 0);
            expected++;
        }
    }
    int got = 0;
    for (int i = 0; i < rs.n; i++) {
        got += rs.r[i].event_id != DOOMED;
    }
    ck_assert_int_eq(got, expected);

    struct tpm_stats s;
    stats(tpm, &s);
    ck_assert_uint_eq(s.sweeps_unfinished, 0);
    ck_assert_uint_gt(s.epochs_skipped, 0);
    check_lookahead(tpm, _i);
    tpm_destroy(tpm);
}
END_TEST

/* Planned instances test their predicate from the operator's outcome
 * bits and the aggregate's accumulator copied into the instance
 * (value_acc, op_classes): each operator and several aggregates, with a
 * threshold below, at and above the value, against C's own comparison.
 * One flow, 1 to 6 packets an epoch. */
START_TEST(test_planned_operators)
{
    static const char *const ops[] = { "<", "<=", ">", ">=", "==", "!=" };
    static const char *const aggs[] = {
        "count()", "sum(volume)", "max(ttl)", "min(ttl)", "avg(volume)",
    };
    enum { N_OPS = ARRAY_SIZE(ops), N_AGGS = ARRAY_SIZE(aggs), N_TH = 3 };
    static const double th[N_TH] = { 3, 40, 64 };
    struct tpm_params p;
    tpm_params_init(&p);
    p.max_events = 256;
    struct tpm *tpm = new_tpm(&p);
    set_lookahead(tpm, _i);
    static struct reports rs;
    struct frame f;

    rs.n = 0;
    for (int o = 0; o < N_OPS; o++) {
        for (int a = 0; a < N_AGGS; a++) {
            for (int t = 0; t < N_TH; t++) {
                char line[256];
                int id = (o * N_AGGS + a) * N_TH + t;
                snprintf(line, sizeof line, "e%d filter=udp,nw_dst="
                         "10.99.%d.1/32 predicate=%s %s %g group=5tuple "
                         "interval=10ms", id, o + 1, aggs[a], ops[o],
                         th[t]);
                add(tpm, id, line);
            }
        }
    }
    /* Epoch e: to each operator's flow (10.99.O.1, a flow may feed at
     * most 64 events), 1 + e % 6 packets of payload 40 (volume 40), ttl
     * 64 and then 3: count 1..6, sum 40..240, max 64, min 64 or 3, avg
     * 40. */
    enum { EPOCHS = 12 };
    for (int e = 0; e < EPOCHS; e++) {
        int n = 1 + e % 6;
        for (int o = 0; o < N_OPS; o++) {
            for (int i = 0; i < n; i++) {
                udp_frame(&f, ip4(10, 99, 0, 1), ip4(10, 99, o + 1, 1), 1,
                          2, 40, i ? 3 : 64);
                send1(tpm, T0 + e * 10 * MS + o * 10 + i, &f);
            }
        }
        tpm_advance(tpm, T0 + (e + 1) * 10 * MS);
        sweep_all(tpm);
        collect(tpm, &rs);
    }
    tpm_advance(tpm, T0 + (EPOCHS + 1) * 10 * MS);
    sweep_all(tpm);
    collect(tpm, &rs);

    int expected = 0;
    for (int e = 0; e < EPOCHS; e++) {
        int n = 1 + e % 6;
        double value[N_AGGS] = { n, 40.0 * n, 64, n > 1 ? 3 : 64, 40 };
        for (int o = 0; o < N_OPS; o++) {
            for (int a = 0; a < N_AGGS; a++) {
                for (int t = 0; t < N_TH; t++) {
                    double v = value[a], c = th[t];
                    bool holds[N_OPS] = { v < c, v <= c, v > c, v >= c,
                                          v == c, v != c };
                    int id = (o * N_AGGS + a) * N_TH + t;
                    const struct tpm_report *r
                        = find_report(&rs, id, T0 / (10 * MS) + e,
                                      ip4(10, 99, o + 1, 1));
                    ck_assert_msg(!r == !holds[o], "%s %s %g, value %g, "
                                  "epoch %d: %s", aggs[a], ops[o], c, v, e,
                                  r ? "reported" : "not reported");
                    if (r) {
                        ck_assert_double_eq(r->value, v);
                        expected++;
                    }
                }
            }
        }
    }
    ck_assert_int_eq(rs.n, expected);
    ck_assert_int_gt(expected, 0);
    struct tpm_stats s;
    stats(tpm, &s);
    ck_assert_uint_eq(s.sweeps_unfinished, 0);
    check_lookahead(tpm, _i);
    tpm_destroy(tpm);
}
END_TEST

START_TEST(test_interval_and_lazy_reset)
{
    struct tpm *tpm = new_tpm(NULL);
    struct reports rs = { .n = 0 };
    struct frame f;

    add(tpm, 1, "a filter=udp predicate=count() > 0 interval=10ms");
    add(tpm, 2, "b filter=udp predicate=count() > 0 interval=30ms");
    udp_frame(&f, ip4(10, 99, 0, 1), ip4(10, 99, 1, 1), 1, 2, 10, 64);

    /* Epoch 0 of T0: 3 packets; epoch 1: none; epoch 2: 2 packets;
     * epoch 3: 4 packets.  T0 is a multiple of 30 ms. */
    ck_assert_uint_eq(T0 % (30 * MS), 0);
    int counts[4] = { 3, 0, 2, 4 };
    for (int e = 0; e < 4; e++) {
        for (int i = 0; i < counts[e]; i++) {
            send1(tpm, T0 + e * 10 * MS + i, &f);
        }
        tpm_advance(tpm, T0 + (e + 1) * 10 * MS);
        sweep_all(tpm);
    }
    tpm_advance(tpm, T0 + 60 * MS);
    sweep_all(tpm);
    collect(tpm, &rs);

    uint64_t e0 = T0 / (10 * MS);
    /* Event a: epochs e0 (3), e0+2 (2), e0+3 (4); nothing for e0+1 even
     * though the flow entry still holds epoch e0's data in that parity. */
    ck_assert_int_eq(rs.n, 5);
    const struct tpm_report *r;
    ck_assert_ptr_nonnull(r = find_report(&rs, 1, e0, ip4(10, 99, 1, 1)));
    ck_assert_double_eq(r->value, 3);
    ck_assert_ptr_null(find_report(&rs, 1, e0 + 1, ip4(10, 99, 1, 1)));
    ck_assert_ptr_nonnull(r = find_report(&rs, 1, e0 + 2,
                                          ip4(10, 99, 1, 1)));
    ck_assert_double_eq(r->value, 2);
    ck_assert_ptr_nonnull(r = find_report(&rs, 1, e0 + 3,
                                          ip4(10, 99, 1, 1)));
    ck_assert_double_eq(r->value, 4);
    /* Event b: intervals [e0, e0+2] = 5 and [e0+3, e0+5] = 4, reported
     * at their last epochs only. */
    ck_assert_ptr_nonnull(r = find_report(&rs, 2, e0 + 2,
                                          ip4(10, 99, 1, 1)));
    ck_assert_double_eq(r->value, 5);
    ck_assert_ptr_nonnull(r = find_report(&rs, 2, e0 + 5,
                                          ip4(10, 99, 1, 1)));
    ck_assert_double_eq(r->value, 4);
    tpm_destroy(tpm);
}
END_TEST

/* Feeds the same traffic to two monitors, one sweeping in tiny steps, and
 * checks they report the same. */
START_TEST(test_sweep_budget_resume)
{
    struct tpm_params p;
    tpm_params_init(&p);
    p.flow_table_size = 16384;
    p.max_chunks = 2048;
    p.dos_table_size = 1024;
    struct tpm *whole = new_tpm(&p);
    struct tpm *steps = new_tpm(&p);
    static struct reports ra, rb;
    ra.n = rb.n = 0;

    const char *ev1 = "five filter=udp predicate=sum(volume) > 40";
    const char *ev2 = "agg filter=udp predicate=sum(volume) > 2000 "
                      "group=nw_dst/24";
    add(whole, 1, ev1);
    add(whole, 2, ev2);
    add(steps, 1, ev1);
    add(steps, 2, ev2);

    int n_steps = 0;
    for (int e = 0; e < 3; e++) {
        for (int i = 0; i < 3000; i++) {
            struct frame f;
            udp_frame(&f, ip4(10, 99, 0, 1), ip4(10, 3, i % 20, i / 20),
                      i, 7, 10 + (i + e) % 50, 64);
            uint64_t now = T0 + e * 10 * MS + i;
            send1(whole, now, &f);
            send1(steps, now, &f);
        }
        tpm_advance(whole, T0 + (e + 1) * 10 * MS);
        tpm_advance(steps, T0 + (e + 1) * 10 * MS);
        sweep_all(whole);
        /* A 1 ns budget: every step stops at its first clock check. */
        while (tpm_sweep_step(steps, 1)) {
            n_steps++;
        }
        collect(whole, &ra);
        collect(steps, &rb);
    }
    ck_assert_int_gt(n_steps, 10);
    ck_assert_int_gt(ra.n, 3000);
    ck_assert_int_eq(ra.n, rb.n);
    for (int i = 0; i < ra.n; i++) {
        const struct tpm_report *x = &ra.r[i];
        bool found = false;
        for (int j = 0; j < rb.n && !found; j++) {
            const struct tpm_report *y = &rb.r[j];
            found = x->event_id == y->event_id && x->epoch == y->epoch
                    && !memcmp(&x->group, &y->group, sizeof x->group)
                    && x->value == y->value;
        }
        ck_assert_msg(found, "report %d missing from stepped sweep", i);
    }
    struct tpm_stats s;
    stats(steps, &s);
    ck_assert_uint_eq(s.sweeps_unfinished, 0);
    ck_assert_uint_gt(s.sweep_steps, 10);
    tpm_destroy(whole);
    tpm_destroy(steps);
}
END_TEST

/* A monitor whose sweep of the epoch with 2000 flows has made one tiny
 * step when the next epoch is 10 ms away. */
static struct tpm *
sweep_partly_done(void)
{
    struct tpm_params p;
    tpm_params_init(&p);
    p.flow_table_size = 8192;
    p.max_chunks = 256;
    p.dos_table_size = 1024;
    struct tpm *tpm = new_tpm(&p);

    add(tpm, 1, "five filter=udp predicate=count() > 0");
    for (int i = 0; i < 2000; i++) {
        struct frame f;
        udp_frame(&f, ip4(10, 99, 0, 1), ip4(10, 4, i / 256, i % 256), i, 7,
                  10, 64);
        send1(tpm, T0 + i, &f);
    }
    tpm_advance(tpm, T0 + 10 * MS);
    ck_assert(tpm_sweep_step(tpm, 1));      /* Partly done. */
    return tpm;
}

START_TEST(test_unfinished_sweep)
{
    struct tpm *tpm = sweep_partly_done();
    struct reports rs = { .n = 0 };

    for (int ms = 11; ms < 20; ms++) {      /* A busy caller... */
        tpm_advance(tpm, T0 + ms * MS);
    }
    tpm_advance(tpm, T0 + 20 * MS);         /* ...when the next epoch came. */
    sweep_all(tpm);
    tpm_advance(tpm, T0 + 30 * MS);
    sweep_all(tpm);
    collect(tpm, &rs);

    struct tpm_stats s;
    stats(tpm, &s);
    ck_assert_uint_eq(s.sweeps_unfinished, 1);
    /* Only the flows swept before the epoch ended were reported, and the
     * instances the sweep did not reach are marked partial in their
     * history (they saw no packets after, so they report nothing). */
    ck_assert_int_lt(rs.n, 2000);
    tpm_destroy(tpm);
}
END_TEST

/* Two sweeps in a row abandoned before reaching an instance whose
 * intervals are two epochs long: the epochs they lost fall in two
 * intervals, and both intervals' values carry the partial flag (the
 * second one was flagged nowhere when the abandon marked the instance's
 * current interval, which was stale). */
START_TEST(test_abandoned_twice)
{
    struct tpm *tpm = new_tpm(NULL);
    struct reports rs = { .n = 0 };
    struct frame f;
    /* T0 is epoch 170000000001: start on an even epoch, so that epochs
     * 0-1, 2-3 and 4-5 below are the intervals I0, I1 and I2. */
    const uint64_t start = T0 + 10 * MS;

    add(tpm, 1, "two filter=udp predicate=count() >= 0 group=5tuple "
        "interval=20ms");
    udp_frame(&f, ip4(10, 99, 0, 1), ip4(10, 5, 0, 1), 1, 2, 10, 64);
    for (int e = 0; e < 6; e++) {
        for (int i = 0; i < 5; i++) {
            send1(tpm, start + e * 10 * MS + i, &f);
        }
        /* The sweeps of epochs 1 and 2 (run in epochs 2 and 3) never
         * run: abandoned when epochs 3 and 4 begin. */
        if (e != 2 && e != 3) {
            sweep_all(tpm);
        }
    }
    tpm_advance(tpm, start + 60 * MS);
    sweep_all(tpm);
    tpm_advance(tpm, start + 70 * MS);
    sweep_all(tpm);
    collect(tpm, &rs);

    struct tpm_stats s;
    stats(tpm, &s);
    ck_assert_uint_eq(s.sweeps_unfinished, 2);
    ck_assert_int_eq(rs.n, 3);
    uint64_t first = start / (10 * MS);
    for (int i = 0; i < 3; i++) {
        const struct tpm_report *r = &rs.r[i];
        ck_assert_uint_eq(r->epoch, first + 2 * i + 1);
        /* I0 lost epoch 1, I1 epoch 2; I2 saw both of its epochs. */
        ck_assert_double_eq(r->value, i < 2 ? 5 : 10);
        ck_assert_msg(!(r->flags & TPM_REPORT_PARTIAL) == (i == 2),
                      "interval %d (value %g): flags %#x", i, r->value,
                      r->flags);
    }
    tpm_destroy(tpm);
}
END_TEST

/* A flow that sends every third epoch stays in its trigger instance
 * (matched once) under the default retire_epochs, and is matched again at
 * each return with retire_epochs 1; its values are the same either way. */
START_TEST(test_retire_epochs)
{
    for (int retire = 1; retire <= 16; retire += 15) {
        struct tpm_params p;
        tpm_params_init(&p);
        p.flow_table_size = 1024;
        p.max_chunks = 64;
        p.retire_epochs = retire;
        p.sweep_budget_ns = 0;
        struct tpm *tpm = new_tpm(&p);
        struct reports rs = { .n = 0 };
        struct frame f;

        add(tpm, 1, "c filter=udp predicate=count() >= 0 group=5tuple");
        udp_frame(&f, ip4(10, 99, 0, 1), ip4(10, 5, 0, 1), 1, 2, 10, 64);
        for (int e = 0; e < 30; e++) {
            if (e % 3 == 0) {
                send1(tpm, T0 + e * 10 * MS, &f);
                send1(tpm, T0 + e * 10 * MS + 1, &f);
            } else {
                tpm_advance(tpm, T0 + e * 10 * MS);
            }
            sweep_all(tpm);
        }
        tpm_advance(tpm, T0 + 30 * 10 * MS);
        sweep_all(tpm);
        collect(tpm, &rs);

        struct tpm_stats s;
        stats(tpm, &s);
        ck_assert_int_eq(rs.n, 10);
        for (int i = 0; i < rs.n; i++) {
            ck_assert_double_eq(rs.r[i].value, 2);
        }
        if (retire == 1) {
            ck_assert_uint_eq(s.matches, 10);
            ck_assert_uint_eq(s.flows_retired, 10);  /* And after. */
        } else {
            ck_assert_uint_eq(s.matches, 1);
            ck_assert_uint_eq(s.flows_retired, 0);
        }
        tpm_destroy(tpm);
    }
}
END_TEST

/* Quiet one-flow instances skip their flow entry (sweep.c, "Quiet
 * instances") yet retire flows exactly when reading it would: many
 * one-flow instances, each flow sending in random epochs with gaps short
 * and long, against a model of retirement, for a planned event, one with
 * a three-epoch interval and one with prev() (both swept by the general
 * path).  In each epoch the packets come before the sweep of the epoch
 * before, so a flow whose last packet was in epoch L and next in N is
 * retired in between iff N - L > retire_epochs + 1, and is matched again
 * at N; every interval with packets is reported with its count. */
START_TEST(test_quiet_retire)
{
    enum { FLOWS = 200, EPOCHS = 80, RETIRE = 4 };
    static const struct {
        const char *def;
        int interval;           /* Epochs. */
    } evs[] = {
        { "c filter=udp predicate=count() >= 0 group=5tuple", 1 },
        { "c filter=udp predicate=count() >= 0 group=5tuple "
          "interval=30ms", 3 },
        { "c filter=udp predicate=count() + 0 * prev(count()) >= 0 "
          "group=5tuple", 1 },
    };
    static struct reports rs;
    static uint8_t sent[FLOWS][EPOCHS];

    for (size_t v = 0; v < ARRAY_SIZE(evs); v++) {
        struct tpm_params p;
        tpm_params_init(&p);
        p.flow_table_size = 1024;
        p.retire_epochs = RETIRE;
        p.sweep_budget_ns = 0;
        struct tpm *tpm = new_tpm(&p);
        uint32_t seed = 4242;
        int m = evs[v].interval;

        rs.n = 0;
        add(tpm, 1, evs[v].def);
        for (int e = 0; e < EPOCHS; e++) {
            for (int i = 0; i < FLOWS; i++) {
                seed = seed * 1103515245 + 12345;
                /* Flow i sends in a given epoch with probability 1 / (1
                 * + i % 9): gaps from 0 to tens of epochs.  Every flow
                 * sends in epoch 0, so that all are inserted into an
                 * empty table: a flow inserted later could take the
                 * entry of a quiet one (stale, tpm/flow-table.h), which
                 * would then be matched again when it sends, beside the
                 * model. */
                int n = (seed >> 16) % (1 + i % 9) == 0 || !e
                        ? 1 + (seed >> 8) % 3 : 0;
                sent[i][e] = n;
                struct frame f;
                udp_frame(&f, ip4(10, 99, 0, 1),
                          ip4(10, 5, i / 250, i % 250), 1, 2, 10, 64);
                for (int k = 0; k < n; k++) {
                    send1(tpm, T0 + e * 10 * MS + i * 100 + k, &f);
                }
            }
            tpm_advance(tpm, T0 + e * 10 * MS + 5 * MS);
            sweep_all(tpm);
            collect(tpm, &rs);
        }
        /* Three epochs without packets, enough to close the last
         * interval. */
        for (int e = EPOCHS; e < EPOCHS + 3; e++) {
            tpm_advance(tpm, T0 + e * 10 * MS);
            sweep_all(tpm);
            collect(tpm, &rs);
        }

        uint64_t matches = 0, retired = 0;
        int expected = 0;
        for (int i = 0; i < FLOWS; i++) {
            int last = -1;
            for (int e = 0; e < EPOCHS; e++) {
                if (!sent[i][e]) {
                    continue;
                }
                if (last < 0) {
                    matches++;
                } else if (e - last > RETIRE + 1) {
                    matches++;
                    retired++;
                }
                last = e;
            }
            /* The sweeps after the last packets, the last one of epoch
             * EPOCHS + 1, retire the flows quiet since L if EPOCHS + 1 -
             * L >= retire_epochs. */
            if (EPOCHS + 2 - last > RETIRE) {
                retired++;
            }
            /* Intervals of m epochs aligned to absolute epoch numbers
             * (T0 is a multiple of 30 ms). */
            for (int e0 = 0; e0 < EPOCHS; e0 += m) {
                int n = 0;
                for (int e = e0; e < e0 + m && e < EPOCHS; e++) {
                    n += sent[i][e];
                }
                if (!n) {
                    continue;
                }
                expected++;
                const struct tpm_report *r
                    = find_report(&rs, 1, T0 / (10 * MS) + e0 + m - 1,
                                  ip4(10, 5, i / 250, i % 250));
                ck_assert_msg(r, "%s: flow %d epoch %d: no report",
                              evs[v].def, i, e0);
                ck_assert_double_eq(r->value, n);
            }
        }
        struct tpm_stats st;
        stats(tpm, &st);
        ck_assert_int_eq(rs.n, expected);
        ck_assert_uint_eq(st.matches, matches);
        ck_assert_uint_eq(st.flows_retired, retired);
        ck_assert_uint_gt(retired, FLOWS / 4);
        ck_assert_uint_eq(st.sweeps_unfinished, 0);
        /* Most flows are quiet in most epochs: the planned event's
         * sweep skips them; the general path never does. */
        if (v == 0) {
            ck_assert_uint_gt(st.sweep_skipped, FLOWS);
        } else {
            ck_assert_uint_eq(st.sweep_skipped, 0);
        }
        tpm_destroy(tpm);
    }
}
END_TEST

/* The sweep skips one-flow instances whose flow sent nothing (sweep.c,
 * "Quiet instances skipped") yet visits one again as soon as a second
 * flow joins it while the first is quiet: 100 /24 groups whose first flow
 * sends in epoch 0 and, for a quarter of them, in epoch 3 (the sweep
 * skips from epoch 2 on, most instances being quiet; the entries of that
 * quarter written by the visits of epoch 3), and a second flow joining
 * that quarter in epoch 6 and sending again in epoch 9 (a chunk: the
 * instance's skip entry must be cleared, or the second flow's packets
 * would go uncounted).  Every interval with packets is reported with its
 * count, no other, and instances were skipped. */
START_TEST(test_skip_second_flow)
{
    enum { GROUPS = 100, EPOCHS = 12, JOIN = 6 };
    static struct reports rs;
    struct tpm_params p;
    tpm_params_init(&p);
    p.flow_table_size = 1024;
    p.sweep_budget_ns = 0;
    struct tpm *tpm = new_tpm(&p);
    int sent[EPOCHS][GROUPS];

    rs.n = 0;
    add(tpm, 1, "c filter=udp predicate=count() >= 0 group=nw_dst/24");
    for (int e = 0; e < EPOCHS + 2; e++) {
        for (int i = 0; i < GROUPS && e < EPOCHS; i++) {
            struct frame a, b;
            int na = e == 0 ? 2 : e == 3 && i % 4 == 0 ? 1 : 0;
            int nb = i % 4 ? 0 : e == JOIN ? 3 : e == JOIN + 3 ? 1 : 0;
            udp_frame(&a, ip4(10, 99, 0, 1), ip4(10, 6, i, 1), 1, 2, 10, 64);
            udp_frame(&b, ip4(10, 99, 0, 2), ip4(10, 6, i, 2), 1, 2, 10, 64);
            for (int k = 0; k < na + nb; k++) {
                send1(tpm, T0 + e * 10 * MS + i * 100 + k, k < na ? &a : &b);
            }
            sent[e][i] = na + nb;
        }
        tpm_advance(tpm, T0 + e * 10 * MS + 5 * MS);
        sweep_all(tpm);
        collect(tpm, &rs);
    }

    int expected = 0;
    for (int e = 0; e < EPOCHS; e++) {
        for (int i = 0; i < GROUPS; i++) {
            const struct tpm_report *r
                = find_report(&rs, 1, T0 / (10 * MS) + e, ip4(10, 6, i, 0));
            if (!sent[e][i]) {
                ck_assert_msg(!r, "group %d epoch %d: reported", i, e);
                continue;
            }
            expected++;
            ck_assert_msg(r, "group %d epoch %d: no report", i, e);
            ck_assert_double_eq(r->value, sent[e][i]);
        }
    }
    struct tpm_stats st;
    stats(tpm, &st);
    ck_assert_int_eq(rs.n, expected);
    /* The quarter's instances in the sweep of epoch 4 (the second
     * flows' first packets, in epoch 6, come before the sweep of epoch
     * 5). */
    ck_assert_uint_ge(st.sweep_skipped, GROUPS / 4);
    ck_assert_uint_eq(st.sweeps_unfinished, 0);
    tpm_destroy(tpm);
}
END_TEST

/* Quiet instances skipped, at random, against a model: 300 flows in 40
 * /24 groups, each sending in a given epoch with probability 1/8 or
 * 1/64 (so most instances are quiet and the sweep skips), flows joining
 * groups that had one (chunks), flows retired after 6 quiet epochs and
 * matched again, groups idle long enough to be removed (instances moved
 * with their skip entries), runs of the planned loop ended anywhere (the
 * skip decisions kept from one to the next), and an event added and
 * deleted every 10 epochs (a sweep through the general loop while its
 * instances die).  A /24 event and a 5-tuple one ("count() >= 0": every
 * interval with packets is reported) must report exactly the packets of
 * each group and flow in each epoch. */
START_TEST(test_skip_random)
{
    enum { FLOWS = 300, GROUPS = 40, EPOCHS = 160 };
    static struct reports rs;
    static int sent[EPOCHS][FLOWS];
    struct tpm_params p;
    tpm_params_init(&p);
    p.flow_table_size = 2048;
    p.retire_epochs = 6;
    p.history_len = 4;
    p.sweep_budget_ns = 0;
    struct tpm *tpm = new_tpm(&p);
    uint32_t seed = 777;

    rs.n = 0;
    add(tpm, 1, "g filter=udp predicate=count() >= 0 group=nw_dst/24");
    add(tpm, 2, "f filter=udp predicate=count() >= 0 group=5tuple");
    for (int e = 0; e < EPOCHS + 3; e++) {
        if (e % 10 == 5 && e < EPOCHS) {
            add(tpm, 3, "h filter=udp predicate=count() > 1000 "
                "group=5tuple");
        } else if (e % 10 == 8) {
            /* Its instances dying, the next sweep takes every instance
             * through the general loop, which must clear their skip
             * entries. */
            ck_assert_int_eq(tpm_event_del(tpm, 3), 0);
        }
        for (int i = 0; i < FLOWS && e < EPOCHS; i++) {
            seed = seed * 1103515245 + 12345;
            /* Flow i exists from epoch i / 4 on (later ones join groups
             * that had one flow), a third of them rarely active, and
             * every group falls silent for 20 epochs from epoch 80. */
            uint32_t r = seed >> 16;
            bool on = (e >= i / 4 && !(e >= 80 && e < 100)
                       && r % (i % 3 ? 8 : 64) == 0);
            int n = on ? 1 + (seed >> 8) % 3 : 0;
            sent[e][i] = n;
            struct frame f;
            udp_frame(&f, ip4(10, 99, 0, 1 + i / GROUPS),
                      ip4(10, 7, i % GROUPS, 1), 1, 2, 10, 64);
            for (int k = 0; k < n; k++) {
                send1(tpm, T0 + e * 10 * MS + i * 100 + k, &f);
            }
        }
        tpm_advance(tpm, T0 + e * 10 * MS + 5 * MS);
        sweep_all(tpm);
        collect(tpm, &rs);
    }

    int expected = 0;
    for (int e = 0; e < EPOCHS; e++) {
        uint64_t epoch = T0 / (10 * MS) + e;
        for (int g = 0; g < GROUPS; g++) {
            int n = 0;
            for (int i = g; i < FLOWS; i += GROUPS) {
                n += sent[e][i];
                if (!sent[e][i]) {
                    continue;
                }
                /* The 5-tuple event's report of flow i. */
                int found = 0;
                for (int j = 0; j < rs.n; j++) {
                    const struct tpm_report *r = &rs.r[j];
                    if (r->event_id == 2 && r->epoch == epoch
                        && r->group.src[0] == htonl(ip4(10, 99, 0,
                                                        1 + i / GROUPS))
                        && r->group.dst[0] == htonl(ip4(10, 7, g, 1))) {
                        found++;
                        ck_assert_double_eq(r->value, sent[e][i]);
                    }
                }
                ck_assert_msg(found == 1, "flow %d epoch %d: %d reports",
                              i, e, found);
                expected++;
            }
            const struct tpm_report *r = find_report(&rs, 1, epoch,
                                                     ip4(10, 7, g, 0));
            if (!n) {
                ck_assert_msg(!r, "group %d epoch %d: reported", g, e);
                continue;
            }
            ck_assert_msg(r, "group %d epoch %d: no report", g, e);
            ck_assert_double_eq(r->value, n);
            expected++;
        }
    }
    struct tpm_stats st;
    stats(tpm, &st);
    ck_assert_int_eq(rs.n, expected);
    ck_assert_uint_gt(st.sweep_skipped, FLOWS * EPOCHS / 16);
    ck_assert_uint_gt(st.flows_retired, FLOWS);
    ck_assert_uint_gt(st.children_expired, GROUPS);
    ck_assert_uint_eq(st.sweeps_unfinished, 0);
    tpm_destroy(tpm);
}
END_TEST

/* Lateness: the share of the epoch gone minus the share of instances
 * swept. */
/* The switch's cost fit: a line through synthetic samples drawn from a
 * known cost per packet and per byte. */
static struct tpm_dos_switch_sample
switch_sample(double pkt, double byte, uint64_t packets, uint64_t size,
              double noise)
{
    struct tpm_dos_switch_sample s = {
        .packets = packets, .bytes = packets * size,
    };
    s.cycles = llround(packets * (pkt + byte * size) * (1 + noise));
    return s;
}

START_TEST(test_dos_switch_fit)
{
    /* Size buckets: < 128, < 256, < 512, < 1024, the rest. */
    static const struct { uint64_t bytes; int bucket; } edges[] = {
        { 0, 0 }, { 64, 0 }, { 127, 0 }, { 128, 1 }, { 255, 1 },
        { 256, 2 }, { 511, 2 }, { 512, 3 }, { 1023, 3 }, { 1024, 4 },
        { 1500, 4 }, { 9000, 4 }, { UINT64_MAX, 4 },
    };
    for (size_t i = 0; i < ARRAY_SIZE(edges); i++) {
        ck_assert_int_eq(tpm_dos_size_bucket(edges[i].bytes),
                         edges[i].bucket);
    }

    /* Noiseless: the costs come back exactly (to rounding). */
    static const uint64_t sizes[TPM_DOS_SIZE_BUCKETS] = {
        64, 192, 384, 768, 1500,
    };
    struct tpm_dos_switch_sample s[TPM_DOS_SIZE_BUCKETS];
    for (size_t b = 0; b < TPM_DOS_SIZE_BUCKETS; b++) {
        s[b] = switch_sample(250, 0.5, 100000 * (b + 1), sizes[b], 0);
    }
    double pkt, byte;
    ck_assert_int_eq(tpm_dos_switch_fit(s, TPM_DOS_SIZE_BUCKETS, &pkt,
                                        &byte), 5);
    ck_assert_double_eq_tol(pkt, 250, 1e-6);
    ck_assert_double_eq_tol(byte, 0.5, 1e-9);

    /* Two buckets are enough for a line. */
    ck_assert_int_eq(tpm_dos_switch_fit(&s[1], 2, &pkt, &byte), 2);
    ck_assert_double_eq_tol(pkt, 250, 1e-6);
    ck_assert_double_eq_tol(byte, 0.5, 1e-9);

    /* Noise of up to 2% in every bucket: within tolerance. */
    static const double noise[TPM_DOS_SIZE_BUCKETS] = {
        0.02, -0.015, 0.01, -0.02, 0.005,
    };
    for (size_t b = 0; b < TPM_DOS_SIZE_BUCKETS; b++) {
        s[b] = switch_sample(400, 1.25, 50000, sizes[b], noise[b]);
    }
    ck_assert_int_eq(tpm_dos_switch_fit(s, TPM_DOS_SIZE_BUCKETS, &pkt,
                                        &byte), 5);
    ck_assert_double_eq_tol(pkt, 400, 20);
    ck_assert_double_eq_tol(byte, 1.25, 0.05);

    /* Buckets of fewer than TPM_DOS_SWITCH_MIN_PACKETS are left out. */
    s[0] = switch_sample(400, 1.25, TPM_DOS_SWITCH_MIN_PACKETS - 1, 64,
                         5.0);
    s[1] = switch_sample(400, 1.25, TPM_DOS_SWITCH_MIN_PACKETS, 192, 0);
    s[2] = switch_sample(400, 1.25, TPM_DOS_SWITCH_MIN_PACKETS, 1500, 0);
    ck_assert_int_eq(tpm_dos_switch_fit(s, 3, &pkt, &byte), 2);
    ck_assert_double_eq_tol(pkt, 400, 1e-6);
    ck_assert_double_eq_tol(byte, 1.25, 1e-9);

    /* One bucket: its mean per packet, no slope. */
    s[0] = switch_sample(300, 2, 4096, 1500, 0);
    ck_assert_int_eq(tpm_dos_switch_fit(s, 1, &pkt, &byte), 1);
    ck_assert_double_eq_tol(pkt, 300 + 2 * 1500, 1e-9);
    ck_assert_double_eq(byte, 0);

    /* Sizes too close to tell a slope (a spread of at most 32 bytes):
     * the weighted mean, no slope. */
    s[0] = switch_sample(300, 2, 4096, 100, 0);
    s[1] = switch_sample(300, 2, 4096, 140, 0);
    ck_assert_int_eq(tpm_dos_switch_fit(s, 2, &pkt, &byte), 2);
    ck_assert_double_eq_tol(pkt, 300 + 2 * 120, 1e-9);
    ck_assert_double_eq(byte, 0);

    /* A slope that is not positive: the mean, no slope. */
    s[0] = switch_sample(900, -0.25, 4096, 64, 0);
    s[1] = switch_sample(900, -0.25, 4096 * 3, 1500, 0);
    ck_assert_int_eq(tpm_dos_switch_fit(s, 2, &pkt, &byte), 2);
    ck_assert_double_eq_tol(pkt,
                            900 - 0.25 * (64 + 3 * 1500) / 4.0, 1e-9);
    ck_assert_double_eq(byte, 0);

    /* No samples, or none with enough packets: 0, both 0. */
    pkt = byte = 7;
    ck_assert_int_eq(tpm_dos_switch_fit(s, 0, &pkt, &byte), 0);
    ck_assert_double_eq(pkt, 0);
    ck_assert_double_eq(byte, 0);
    memset(s, 0, sizeof s);
    s[3].packets = 1000;
    s[3].bytes = 1000 * 700;
    s[3].cycles = 1000 * 900;
    pkt = byte = 7;
    ck_assert_int_eq(tpm_dos_switch_fit(s, TPM_DOS_SIZE_BUCKETS, &pkt,
                                        &byte), 0);
    ck_assert_double_eq(pkt, 0);
    ck_assert_double_eq(byte, 0);
}
END_TEST

START_TEST(test_sweep_lateness)
{
    struct tpm *tpm = sweep_partly_done();
    double at_start = tpm_sweep_lateness(tpm, T0 + 10 * MS, 100);
    double half = tpm_sweep_lateness(tpm, T0 + 15 * MS, 100);
    double late = tpm_sweep_lateness(tpm, T0 + 19 * MS, 100);
    ck_assert_double_eq(at_start, 0);
    /* One 1 ns step swept a chunk at most: 2000 instances, 1 each. */
    ck_assert_double_le(half, 0.5);
    ck_assert_double_ge(half, 0.5 - 64.0 / 2000);
    ck_assert_double_eq_tol(late - half, 0.4, 1e-9);
    /* At a pace of 50 the sweep is due to end halfway: a quarter of the
     * epoch gone is half of the pace's span, and from halfway on the
     * share gone is 1. */
    double quarter50 = tpm_sweep_lateness(tpm, T0 + 25 * MS / 2, 50);
    ck_assert_double_eq_tol(quarter50, half, 1e-9);
    ck_assert_double_eq_tol(tpm_sweep_lateness(tpm, T0 + 15 * MS, 50)
                            - half, 0.5, 1e-9);
    ck_assert_double_eq_tol(tpm_sweep_lateness(tpm, T0 + 19 * MS, 50)
                            - half, 0.5, 1e-9);
    sweep_all(tpm);
    ck_assert_double_eq(tpm_sweep_lateness(tpm, T0 + 19 * MS, 100), 0);
    ck_assert_double_eq(tpm_sweep_lateness(tpm, T0 + 19 * MS, 50), 0);
    tpm_destroy(tpm);
}
END_TEST

/* Checks report 'r', of epoch 'e' of the flow named 'flow', against the
 * first whole epoch seen so far ('*full', -1 until the first report
 * without a flag sets it): reports before it carry the partial flag,
 * none from it on. */
static void
check_partial_until_whole(const struct tpm_report *r, int e, int *full,
                          const char *flow)
{
    if (*full < 0 && !r->flags) {
        *full = e;
    }
    ck_assert_msg(r->flags == (*full < 0 || e < *full
                               ? TPM_REPORT_PARTIAL : 0),
                  "flow %s, epoch %d: flags %#x (first whole epoch %d)",
                  flow, e, r->flags, *full);
}

/* The flags of planned instances (one flow, a one-epoch interval).  An
 * event added while a flow A is live observes the epochs before its
 * backfill walk completes in part: their reports are flagged partial, the
 * later epochs' are not, for A (attached by the walk) and for a new flow
 * B that starts meanwhile, whose instance is planned from its second
 * sweep on and so loses the flag on the planned path.  One step an epoch,
 * so that the walk (256 slots a step over 4096) spans 16 epochs.  An
 * epoch whose sweep was abandoned is not reported, and the epochs after
 * it are whole. */
START_TEST(test_planned_flags)
{
    enum { EPOCHS = 24, LOST = 20 };
    struct tpm *tpm = new_tpm(NULL);
    set_lookahead(tpm, _i);
    struct reports rs = { .n = 0 };
    struct frame fa, fb;
    const uint64_t e0 = T0 / (10 * MS);
    const uint32_t dst[2] = { ip4(10, 5, 0, 1), ip4(10, 5, 0, 2) };

    add(tpm, 1, "other filter=tcp predicate=count() > 0");
    udp_frame(&fa, ip4(10, 99, 0, 1), dst[0], 1, 2, 10, 64);
    udp_frame(&fb, ip4(10, 99, 0, 1), dst[1], 1, 2, 10, 64);
    send1(tpm, T0, &fa);                /* A is live. */
    add(tpm, 2, "c filter=udp predicate=count() >= 0 group=5tuple "
        "interval=10ms");
    for (int e = 0; e < EPOCHS; e++) {
        for (int i = 0; i < 5; i++) {
            send1(tpm, T0 + e * 10 * MS + 1 + 2 * i, &fa);
            send1(tpm, T0 + e * 10 * MS + 2 + 2 * i, &fb);
        }
        /* The sweep of epoch LOST (run in the next) never runs: abandoned
         * when the one after begins. */
        if (e != LOST + 1) {
            tpm_sweep_step(tpm, 0);
        }
    }
    tpm_advance(tpm, T0 + EPOCHS * 10 * MS);
    sweep_all(tpm);
    collect(tpm, &rs);

    struct tpm_stats s;
    stats(tpm, &s);
    ck_assert_uint_eq(s.backfilled, 1);
    ck_assert_uint_eq(s.sweeps_unfinished, 1);
    /* Reports before the first fully observed epoch 'full' are flagged,
     * none from it on. */
    int full = -1;
    for (int e = 0; e < EPOCHS; e++) {
        for (int k = 0; k < 2; k++) {
            const struct tpm_report *r = find_report(&rs, 2, e0 + e,
                                                     dst[k]);
            /* A is counted from its attachment by the walk on. */
            ck_assert_msg(!r == (e == LOST) || (k == 0 && !r && full < 0),
                          "flow %c, epoch %d: %s", 'A' + k, e,
                          r ? "reported" : "no report");
            if (!r) {
                continue;
            }
            char name[2] = { (char) ('A' + k), 0 };
            check_partial_until_whole(r, e, &full, name);
            if (k == 1 || !r->flags) {
                ck_assert_double_eq(r->value, 5);
            }
        }
    }
    ck_assert_msg(full >= 8 && full < LOST, "first whole epoch %d", full);
    check_lookahead(tpm, _i);
    tpm_destroy(tpm);
}
END_TEST

/* Planned instances behind abandoned sweeps: the sweeps of epochs CUT,
 * CUT + 3 and CUT + 4 get one step of the smallest budget each and are
 * abandoned when the next epoch begins, so that instances miss one swept
 * epoch (flagged partial), or two in a row (their epochs lost too); the
 * sweeps after bring them up (child_roll__()).  Every epoch a sweep
 * reached is reported with the frames' own count, whole from the event's
 * first whole epoch on; an epoch whose sweep did not reach an instance is
 * not reported; every other epoch is reported whole, for every flow. */
static bool
cut_epoch(int e, int cut)
{
    return e == cut || e == cut + 3 || e == cut + 4;
}

START_TEST(test_planned_behind_abandoned)
{
    enum { FLOWS = 64, EPOCHS = 14, CUT = 5 };
    struct tpm *tpm = new_tpm(NULL);
    set_lookahead(tpm, _i);
    struct reports rs = { .n = 0 };
    struct frame f[FLOWS];
    const uint64_t e0 = T0 / (10 * MS);

    add(tpm, 1, "c filter=udp predicate=count() >= 0 group=5tuple "
        "interval=10ms");
    for (int k = 0; k < FLOWS; k++) {
        udp_frame(&f[k], ip4(10, 99, 0, 1), ip4(10, 5, 0, k + 1), 1, 2, 10,
                  64);
    }
    for (int e = 0; e < EPOCHS; e++) {
        /* Flow k sends 1 + (e + k) % 3 frames in epoch e. */
        for (int k = 0; k < FLOWS; k++) {
            for (int i = 0; i <= (e + k) % 3; i++) {
                send1(tpm, T0 + e * 10 * MS + 1 + k * 3 + i, &f[k]);
            }
        }
        /* Here the sweep of epoch e - 1 runs. */
        if (cut_epoch(e - 1, CUT)) {
            ck_assert(tpm_sweep_step(tpm, 1));
        } else {
            sweep_all(tpm);
        }
        collect(tpm, &rs);
    }
    tpm_advance(tpm, T0 + EPOCHS * 10 * MS);
    sweep_all(tpm);
    collect(tpm, &rs);

    struct tpm_stats s;
    stats(tpm, &s);
    ck_assert_uint_eq(s.sweeps_unfinished, 3);
    int full = -1, missed[EPOCHS] = { 0 };
    for (int e = 0; e < EPOCHS; e++) {
        for (int k = 0; k < FLOWS; k++) {
            const struct tpm_report *r = find_report(&rs, 1, e0 + e,
                                                     ip4(10, 5, 0, k + 1));
            if (!r) {
                ck_assert_msg(cut_epoch(e, CUT), "flow %d, epoch %d: no "
                              "report", k, e);
                missed[e]++;
                continue;
            }
            ck_assert_double_eq(r->value, 1 + (e + k) % 3);
            char name[12];
            snprintf(name, sizeof name, "%d", k);
            check_partial_until_whole(r, e, &full, name);
        }
    }
    ck_assert_msg(full >= 0 && full < CUT, "first whole epoch %d", full);
    /* Each cut sweep reached some instances, not all. */
    for (int e = CUT; e < EPOCHS; e++) {
        ck_assert_int_eq(missed[e] > 0 && missed[e] < FLOWS,
                         cut_epoch(e, CUT));
    }
    check_lookahead(tpm, _i);
    tpm_destroy(tpm);
}
END_TEST

START_TEST(test_runtime_add_backfill)
{
    struct tpm *tpm = new_tpm(NULL);
    struct reports rs = { .n = 0 };
    struct frame f;

    add(tpm, 1, "other filter=tcp predicate=count() > 0");
    udp_frame(&f, ip4(10, 99, 0, 1), ip4(10, 5, 0, 1), 1, 2, 10, 64);
    send1(tpm, T0, &f);                     /* Flow known before the add. */
    add(tpm, 2, "late filter=udp predicate=count() > 0");
    for (int e = 0; e < 4; e++) {
        for (int i = 0; i < 5; i++) {
            send1(tpm, T0 + e * 10 * MS + 1 + i, &f);
        }
        tpm_advance(tpm, T0 + (e + 1) * 10 * MS);
        sweep_all(tpm);
    }
    collect(tpm, &rs);

    struct tpm_stats s;
    stats(tpm, &s);
    ck_assert_uint_eq(s.backfilled, 1);
    ck_assert_uint_eq(s.flow_inserts, 1);
    /* The backfill walk (256 slots per step over a 4096-slot table)
     * completes during the sweep steps of epoch e0+1, so e0+2 is the first
     * fully observed epoch: from there every epoch is reported with all 5
     * packets and no flag; earlier reports, if any, are flagged partial. */
    uint64_t e0 = T0 / (10 * MS);
    for (int i = 0; i < rs.n; i++) {
        ck_assert_uint_eq(rs.r[i].event_id, 2);
        ck_assert_uint_eq(rs.r[i].flags,
                          rs.r[i].epoch < e0 + 2 ? TPM_REPORT_PARTIAL : 0);
    }
    for (uint64_t e = e0 + 2; e <= e0 + 3; e++) {
        const struct tpm_report *r = find_report(&rs, 2, e,
                                                 ip4(10, 5, 0, 1));
        ck_assert_ptr_nonnull(r);
        ck_assert_double_eq(r->value, 5);
    }
    tpm_destroy(tpm);
}
END_TEST

/* The flow dump's sums (tpm_flows_for_each()). */
struct dump_sum {
    uint64_t packets, bytes;
    int n;
};

static void
dump_sum_cb(const struct tpm_key *key, uint64_t packets,
            uint64_t bytes, uint32_t n_matched, void *aux)
{
    struct dump_sum *d = aux;
    (void) key;
    (void) n_matched;
    d->packets += packets;
    d->bytes += bytes;
    d->n++;
}

/* An IPv4 flow's counts move from its line 0 to its statistics lines when
 * an event added at run time gives it its first summary, and back when
 * that event is deleted and the scrubber drops the summary (flow-table.h):
 * across both moves, made in the middle of an epoch with the previous
 * epoch not yet swept, the count() event reports every packet of every
 * epoch, the sum(bytes) event every byte of the epochs it observed whole,
 * and the flow dump every packet and byte of the current and previous
 * epochs after each packet.  An IPv6 flow keeps its counts in its
 * statistics lines throughout, with and without summaries: the same
 * checks. */
static void
counts_move__(bool v6)
{
    enum { EPOCHS = 64, ADD_AT = 3, DEL_AT = 12 };
    struct tpm *tpm = new_tpm(NULL);
    struct reports rs = { .n = 0 };
    uint64_t sent[EPOCHS];
    bool gained = false, lost = false;
    uint32_t dst = v6 ? 0xfd000005 : ip4(10, 5, 0, 1);
    const char *proto = v6 ? "udp6" : "udp";
    char line[128];
    struct frame f;

    if (v6) {
        udp6_frame(&f, 0xfd000099, dst, 1, 2, 10, 64);
    } else {
        udp_frame(&f, ip4(10, 99, 0, 1), dst, 1, 2, 10, 64);
    }
    snprintf(line, sizeof line, "c filter=%s predicate=count() > 0", proto);
    add(tpm, 1, line);
    for (int e = 0; e < EPOCHS; e++) {
        int n = 1 + e % 5;
        sent[e] = 0;
        for (int i = 0; i < n; i++) {
            send1(tpm, T0 + e * 10 * MS + 1 + i, &f);
            sent[e]++;
            if (e == ADD_AT && !i) {
                snprintf(line, sizeof line,
                         "v filter=%s predicate=sum(bytes) > 0", proto);
                add(tpm, 2, line);
            } else if (e == DEL_AT && !i) {
                ck_assert_int_eq(tpm_event_del(tpm, 2), 0);
            }
            struct dump_sum d = { 0, 0, 0 };
            tpm_flows_for_each(tpm, dump_sum_cb, &d);
            ck_assert_int_eq(d.n, 1);
            ck_assert_uint_eq(d.packets, (e ? sent[e - 1] : 0) + sent[e]);
            ck_assert_uint_eq(d.bytes, d.packets * f.len);
        }
        const struct tpm_flow *fl = tpm->last_flow;
        ck_assert_ptr_nonnull(fl);
        ck_assert_uint_eq(fl->key.ipver, v6 ? 6 : 4);
        gained |= fl->sum_mask != 0;
        lost |= gained && !fl->sum_mask;
        /* The sweep of the previous epoch and the backfill, in this
         * epoch's steps. */
        sweep_all(tpm);
    }
    tpm_advance(tpm, T0 + EPOCHS * 10 * MS);
    sweep_all(tpm);
    collect(tpm, &rs);
    ck_assert(gained && lost);

    uint64_t e0 = T0 / (10 * MS);
    int whole = 0;
    for (int e = 0; e < EPOCHS; e++) {
        const struct tpm_report *r = find_report(&rs, 1, e0 + e, dst);
        ck_assert_msg(r, "epoch %d: no count() report", e);
        ck_assert_msg(r->value == sent[e], "epoch %d: count() %g, sent %"
                      PRIu64, e, r->value, sent[e]);
        ck_assert_uint_eq(r->flags, 0);
        r = find_report(&rs, 2, e0 + e, dst);
        if (r && !r->flags) {
            ck_assert_msg(r->value == sent[e] * f.len,
                          "epoch %d: sum(bytes) %g, sent %" PRIu64, e,
                          r->value, sent[e] * f.len);
            whole++;
        }
        ck_assert(!r || (e >= ADD_AT && e <= DEL_AT));
    }
    ck_assert_int_ge(whole, DEL_AT - ADD_AT - 3);
    tpm_destroy(tpm);
}

START_TEST(test_counts_move)
{
    counts_move__(false);
}
END_TEST

START_TEST(test_counts_v6)
{
    counts_move__(true);
}
END_TEST

START_TEST(test_dos_threshold)
{
    struct tpm_params p;
    tpm_params_init(&p);
    p.flow_table_size = 1024;
    p.dos_table_size = 1024;
    p.max_chunks = 64;
    p.dos_threshold = 1000;                 /* Bytes. */
    p.sweep_budget_ns = 0;
    struct tpm *tpm = new_tpm(&p);
    struct reports rs = { .n = 0 };
    struct frame big, small;

    add(tpm, 1, "any filter=udp predicate=count() > 0");
    udp_frame(&big, ip4(10, 99, 0, 1), ip4(10, 6, 0, 1), 1, 2, 58, 64);
    udp_frame(&small, ip4(10, 99, 0, 2), ip4(10, 6, 0, 2), 1, 2, 10, 64);
    /* 100-byte frames: the 10th passes 1000 bytes.  Small: 60-byte
     * frames, 5 of them = 300 bytes, never matched. */
    ck_assert_uint_eq(big.len, 100);
    for (int i = 0; i < 30; i++) {
        send1(tpm, T0 + 2 * i, &big);
        if (i < 5) {
            send1(tpm, T0 + 2 * i + 1, &small);
        }
    }
    tpm_advance(tpm, T0 + 10 * MS);
    sweep_all(tpm);
    collect(tpm, &rs);

    struct tpm_stats s;
    stats(tpm, &s);
    ck_assert_uint_eq(s.dos_skipped_pkts, 9 + 5);
    ck_assert_uint_eq(s.matches, 1);
    ck_assert_int_eq(rs.n, 1);
    /* Counted from the packet that passed the threshold: 21 packets. */
    ck_assert_double_eq(rs.r[0].value, 21);
    ck_assert_uint_eq(rs.r[0].group.dst[0], htonl(ip4(10, 6, 0, 1)));
    tpm_destroy(tpm);
}
END_TEST

/* A flow whose packets below the DoS threshold straddle an epoch boundary:
 * it passes in epoch 1, before the sweep of epoch 0 has run, and the sweep
 * must not gather its epoch-0 packets (they were below the threshold). */
START_TEST(test_dos_pass_after_epoch)
{
    struct tpm_params p;
    tpm_params_init(&p);
    p.flow_table_size = 1024;
    p.dos_table_size = 1024;
    p.max_chunks = 64;
    p.dos_threshold = 1000;                 /* Bytes. */
    p.sweep_budget_ns = 0;
    struct tpm *tpm = new_tpm(&p);
    struct reports rs = { .n = 0 };
    struct frame big;

    add(tpm, 1, "any filter=udp predicate=count() > 0");
    udp_frame(&big, ip4(10, 99, 0, 1), ip4(10, 6, 0, 1), 1, 2, 58, 64);
    ck_assert_uint_eq(big.len, 100);
    /* Epoch 0: 5 frames, 500 bytes.  Epoch 1: the 5th frame reaches 1000
     * bytes (the filter table's window spans both epochs), so 6 of its 10
     * are counted; the sweep of epoch 0 runs only after them. */
    for (int i = 0; i < 5; i++) {
        send1(tpm, T0 + i, &big);
    }
    for (int i = 0; i < 10; i++) {
        send1(tpm, T0 + 10 * MS + i, &big);
    }
    sweep_all(tpm);
    tpm_advance(tpm, T0 + 20 * MS);
    sweep_all(tpm);
    collect(tpm, &rs);

    ck_assert_int_eq(rs.n, 1);
    ck_assert_double_eq(rs.r[0].value, 6);
    tpm_destroy(tpm);
}
END_TEST

/* Returns the flow hash of frame 'f'. */
static uint32_t
frame_hash(const struct frame *f)
{
    struct tpm_pkt pkt;
    ck_assert(tpm_packet_parse(f->data, f->len, f->len, &pkt));
    return tpm_key_hash(&pkt.key);
}

/* Finds a UDP frame to 10.6.1.x whose flow hash, masked with 'mask', is
 * (or, if 'equal' is false, is not) that of 'like'; with 'dos_mask', also
 * a filter-table counter other than like's. */
static void
frame_colliding(struct frame *out, const struct frame *like, uint32_t mask,
                bool equal, uint32_t dos_mask)
{
    uint32_t h = frame_hash(like);
    for (int x = 1; x < 65536; x++) {
        udp_frame(out, ip4(10, 99, 0, 9), ip4(10, 6, 1 + x / 256, x % 256),
                  1, 2, 58, 64);
        uint32_t g = frame_hash(out);
        if (((g & mask) == (h & mask)) == equal
            && (g & dos_mask) != (h & dos_mask)) {
            return;
        }
    }
    ck_abort_msg("no frame found");
}

/* Flows below the DoS threshold are removed when a new flow collides with
 * them and when the sweep finds them without a packet; their bytes live on
 * in the filter table, so a flow removed on the way still passes. */
START_TEST(test_dos_removals)
{
    struct tpm_params p;
    tpm_params_init(&p);
    p.flow_table_size = 64;
    p.flow_probe_limit = 8;
    p.dos_table_size = 1024;
    p.max_chunks = 64;
    p.dos_threshold = 1000;
    p.sweep_budget_ns = 0;
    struct tpm *tpm = new_tpm(&p);
    struct reports rs = { .n = 0 };
    struct tpm_stats s;
    struct frame a, b, c, d;

    add(tpm, 1, "any filter=udp predicate=count() > 0");
    udp_frame(&a, ip4(10, 99, 0, 1), ip4(10, 6, 0, 1), 1, 2, 58, 64);
    frame_colliding(&b, &a, 63, true, 1023);     /* A's home slot. */
    frame_colliding(&c, &a, 63, false, 1023);
    frame_colliding(&d, &c, 63, false, 1023);
    ck_assert_uint_eq(a.len, 100);

    /* A: 500 bytes, pending; B takes its slot; A comes back, takes B's,
     * and passes 1000 bytes with its 10th packet. */
    uint64_t t = T0;
    for (int i = 0; i < 5; i++) {
        send1(tpm, t++, &a);
    }
    send1(tpm, t++, &b);
    stats(tpm, &s);
    ck_assert_uint_eq(s.dos_removed_collision, 1);
    for (int i = 0; i < 5; i++) {
        send1(tpm, t++, &a);
    }
    stats(tpm, &s);
    ck_assert_uint_eq(s.dos_removed_collision, 2);
    ck_assert_uint_eq(s.dos_passed, 1);
    ck_assert_uint_eq(s.dos_skipped_pkts, 9 + 1);
    ck_assert_uint_eq(s.matches, 1);
    for (int i = 0; i < 10; i++) {
        send1(tpm, t++, &a);
    }
    send1(tpm, t++, &c);                /* Pending, not colliding. */

    /* Next epoch: the sweep reports A (from its 10th packet: 11) and its
     * scrubber frees C, which sent nothing since. */
    t = T0 + 10 * MS;
    tpm_advance(tpm, t);
    sweep_all(tpm);
    collect(tpm, &rs);
    stats(tpm, &s);
    ck_assert_uint_eq(s.dos_removed_sweep, 1);
    ck_assert_uint_eq(s.flows_live, 1);
    ck_assert_int_eq(rs.n, 1);
    ck_assert_double_eq(rs.r[0].value, 11);

    /* Lowered to 0 at run time: D, pending, is matched at its next
     * packet, with this epoch's packets. */
    send1(tpm, t++, &d);
    tpm_set_dos_threshold(tpm, 0);
    send1(tpm, t++, &d);
    stats(tpm, &s);
    ck_assert_uint_eq(s.matches, 2);
    ck_assert_uint_eq(s.dos_skipped_pkts, 9 + 1 + 1 + 1);
    tpm_advance(tpm, T0 + 20 * MS);
    sweep_all(tpm);
    rs.n = 0;
    collect(tpm, &rs);
    ck_assert_int_eq(rs.n, 1);
    ck_assert_double_eq(rs.r[0].value, 2);
    tpm_destroy(tpm);
}
END_TEST

/* The pre-check: a flow below the threshold that no trigger can match
 * is not counted in the filter table, so it never passes; without the
 * pre-check it passes and is matched to nothing. */
START_TEST(test_dos_precheck)
{
    for (int precheck = 0; precheck <= 1; precheck++) {
        struct tpm_params p;
        tpm_params_init(&p);
        p.flow_table_size = 1024;
        p.dos_table_size = 1024;
        p.max_chunks = 64;
        p.dos_threshold = 1000;
        p.dos_precheck = precheck;
        struct tpm *tpm = new_tpm(&p);
        struct frame in, out;
        struct tpm_stats s;

        add(tpm, 1, "in filter=udp,nw_dst=10.6.0.0/16 predicate=count() > 0");
        udp_frame(&in, ip4(10, 99, 0, 1), ip4(10, 6, 0, 1), 1, 2, 58, 64);
        udp_frame(&out, ip4(10, 99, 0, 1), ip4(10, 7, 0, 1), 1, 2, 58, 64);
        for (int i = 0; i < 20; i++) {
            send1(tpm, T0 + 2 * i, &in);
            send1(tpm, T0 + 2 * i + 1, &out);
        }
        stats(tpm, &s);
        ck_assert_uint_eq(s.matches, 1);
        ck_assert_uint_eq(s.dos_passed, precheck ? 1 : 2);
        ck_assert_uint_eq(s.dos_precheck_pkts, precheck ? 20 : 0);
        ck_assert_uint_eq(s.dos_skipped_pkts, precheck ? 9 + 20 : 9 + 9);
        tpm_destroy(tpm);
    }
}
END_TEST

/* The SYN-flood false positives of the filter table, in a monitor,
 * against the model's prediction (its Poisson sum): one 64-byte packet per
 * flow, lambda = 3 packets per counter per window, threshold 256 bytes (4
 * packets), with and without clearing a counter on pass. */
START_TEST(test_dos_syn_model)
{
    double measured[2];
    for (int clear = 0; clear <= 1; clear++) {
        struct tpm_params p;
        test_params(&p);
        p.flow_table_size = 65536;
        p.dos_table_size = 1024;
        p.dos_window = 1;
        p.dos_threshold = 256;
        p.dos_clear_on_pass = clear;
        struct tpm *tpm = new_tpm(&p);
        add(tpm, 1, "syn filter=udp,nw_dst=10.50.0.0/16 "
            "predicate=count() > 1000000000");

        enum { EPOCHS = 40, PER_EPOCH = 3 * 1024 };
        uint32_t n = 0;
        for (int e = 0; e < EPOCHS; e++) {
            for (int i = 0; i < PER_EPOCH; i++, n++) {
                struct frame f;
                udp_frame(&f, ip4(10, 64 + (n >> 16), n >> 8 & 255,
                                  n & 255), ip4(10, 50, 0, 1), 1000, 9,
                          22, 64);
                send1(tpm, T0 + e * 10 * MS + i, &f);
            }
            sweep_all(tpm);
        }
        struct tpm_stats s;
        stats(tpm, &s);
        measured[clear] = (double) s.dos_passed / n;

        struct tpm_dos_costs c = { .hz = 1e9 };
        struct tpm_dos_traffic t;
        tpm_dos_traffic_init(&t);
        t.rate_dos = PER_EPOCH / 0.01;
        struct tpm_dos_load l;
        tpm_dos_predict(&c, &p, &t, p.dos_threshold, &l);
        double predicted = l.dos_flows_passing / t.rate_dos;
        ck_assert_msg(fabs(measured[clear] - predicted) < 0.1 * predicted,
                      "clear=%d: %.4f of the flows passed, the model "
                      "predicts %.4f", clear, measured[clear], predicted);
        tpm_destroy(tpm);
    }
    ck_assert_double_lt(measured[1], measured[0]);
}
END_TEST

/* The cost model: the arithmetic of its equations on fixed costs, the
 * threshold search, and a profile whose triggers per flow is known. */
START_TEST(test_dos_model)
{
    struct tpm_params p;
    tpm_params_init(&p);
    p.epoch_ns = 10 * MS;
    p.dos_window = 100;                     /* 1 s. */
    p.dos_table_size = 65536;

    struct tpm_dos_costs c = {
        .hz = 1e9, .pkt_pending = 100, .pkt_matched = 50, .match = 400,
        .sweep_item = 20, .triggers_per_flow = 8, .switch_pkt = 60,
    };
    struct tpm_dos_traffic t;
    tpm_dos_traffic_init(&t);
    t.rate_dos = 4e6;
    t.rate_good = 2e5;
    t.syn = false;
    struct tpm_dos_load l;

    /* Threshold attack at 640 bytes: 10 packets of 64 per flow, 4e5
     * flows/s passing; good flows pass at their first packet (2e4/s). */
    tpm_dos_predict(&c, &p, &t, 640, &l);
    double pass = 4e5 + 2e4;
    double want = (4.2e6 * 60 + (4e6 - 4e5) * 100 + (2e5 + 4e5) * 50
                   + pass * 400 + 1.5 * pass * 8 * 20) / 1e9;
    ck_assert_double_eq_tol(l.load, want, 1e-12);
    ck_assert_double_eq_tol(l.dos_flows_passing, 4e5, 1e-6);
    ck_assert(!l.good_unmonitored);
    /* The switch's cost per packet grows with the frame. */
    c.switch_byte = 0.1;
    tpm_dos_predict(&c, &p, &t, 640, &l);
    ck_assert_double_eq_tol(l.switch_share, (4e6 * (60 + 6.4)
                                             + 2e5 * (60 + 150)) / 1e9,
                            1e-12);
    c.switch_byte = 0;

    /* Above 15000 bytes the good flows are not monitored any more, and
     * their packets all cost the pending path. */
    tpm_dos_predict(&c, &p, &t, 20000, &l);
    ck_assert(l.good_unmonitored);
    ck_assert_double_eq_tol(l.pending_share,
                            (2e5 + 4e6 - 4e6 * 64 / 20000.0) * 100 / 1e9,
                            1e-12);

    /* SYN attack, counters never cleared: 4e6 attack packets/s over a
     * 1 s window and 65536 counters is lambda = 61 packets per counter;
     * good flows leave 3 packets of 1500 B each (they pass at the third,
     * 4000 bytes), 2e4 flows/s: B = (4e6 x 64 + 2e4 x 4500) / 65536 =
     * 5279.5 bytes per counter and window.  Far above the threshold's
     * k = 63 packets the Poisson sum is close to the mean-field
     * 1 - 4000 / B; far below it, nothing passes. */
    t.syn = true;
    p.dos_clear_on_pass = 0;
    tpm_dos_predict(&c, &p, &t, 4000, &l);
    double b = (4e6 * 64 + 2e4 * 4500) / 65536;
    double frac = (l.dos_flows_passing / 4e6);
    ck_assert_double_eq_tol(frac, 1 - 4000 / b, 0.1 * (1 - 4000 / b));
    tpm_dos_predict(&c, &p, &t, 9000, &l);
    ck_assert_double_lt(l.dos_flows_passing, 4e6 * 1e-6);
    /* Clearing on pass: the good flows' bytes leave with them. */
    p.dos_clear_on_pass = 1;
    tpm_dos_predict(&c, &p, &t, 4000, &l);
    ck_assert_double_lt(l.dos_flows_passing / 4e6, frac / 2);

    /* The smallest threshold within budget: within at it, over below. */
    t.syn = false;
    uint32_t th = tpm_dos_min_threshold(&c, &p, &t, 1.0, 15000, &l);
    ck_assert_uint_gt(th, 0);
    ck_assert_uint_lt(th, 15000);
    ck_assert_double_le(l.load, 1.0);
    struct tpm_dos_load below;
    tpm_dos_predict(&c, &p, &t, th - 1, &below);
    ck_assert_double_gt(below.load, 1.0);
    t.rate_dos = 1e3;
    ck_assert_uint_eq(tpm_dos_min_threshold(&c, &p, &t, 1.0, 15000, &l), 0);
    t.rate_dos = 1e9;
    ck_assert_uint_eq(tpm_dos_min_threshold(&c, &p, &t, 1.0, 15000, &l),
                      UINT32_MAX);

    /* Attack flows are costed apart from good ones. */
    c.attack_match = 4000;
    c.attack_triggers_per_flow = 16;
    t.syn = false;
    t.rate_dos = 4e6;
    tpm_dos_predict(&c, &p, &t, 640, &l);
    ck_assert_double_eq_tol(l.match_share, (4e5 * 4000 + 2e4 * 400) / 1e9,
                            1e-12);
    ck_assert_double_eq_tol(l.sweep_share,
                            1.5 * (4e5 * 16 + 2e4 * 8) * 20 / 1e9, 1e-12);

    /* Profile: three events on one filter and one on another, so the
     * calibration flows, drawn from the four in turn, feed 2.5 triggers on
     * average, and an attacker's (from the first filter) three. */
    struct tpm_event *evs[4];
    for (int i = 0; i < 4; i++) {
        char name[8], def[80];
        snprintf(name, sizeof name, "e%d", i);
        snprintf(def, sizeof def, "filter=udp,nw_dst=10.%d.0.0/16 "
                 "predicate=count() > 100", i < 3 ? 9 : 8);
        char *error = tpm_event_parse(name, def, &evs[i]);
        ck_assert_msg(!error, "%s", error);
    }
    struct tpm_params q;
    tpm_params_init(&q);
    q.flow_table_size = 16384;
    q.max_chunks = 4096;
    q.max_children = 65536;         /* A full table of 5-tuple instances. */
    ck_assert(!tpm_dos_profile(&q, evs, 4, 2048, 3, &c));
    ck_assert_double_eq(c.triggers_per_flow, 2.5);
    ck_assert_double_eq(c.attack_triggers_per_flow, 3);
    ck_assert_uint_lt(c.attack_event, 3);
    ck_assert_double_gt(c.attack_match, 0);
    ck_assert_uint_eq(c.n_patterns, 1);
    ck_assert_uint_eq(c.n_flows, 2048);
    ck_assert_double_gt(c.pkt_pending, 0);
    ck_assert_double_gt(c.pkt_matched, 0);
    ck_assert_double_gt(c.match, 0);
    ck_assert_double_gt(c.sweep_item, 0);
    ck_assert_double_gt(c.hz, 1e8);
    char *error = tpm_dos_profile(&q, evs, 0, 2048, 3, &c);
    ck_assert_ptr_nonnull(strstr(error, "no event installed"));
    free(error);
    for (int i = 0; i < 4; i++) {
        tpm_event_destroy(evs[i]);
    }

    /* With ovs-vswitchd's knobs (a sweep waits for room in the report
     * ring) and an event that reports every flow, far more reports than
     * the ring holds: the profile's monitors, whose reports nobody reads,
     * must not wait (they did, forever, in the main thread). */
    struct tpm_event *rep;
    error = tpm_event_parse("rep", "filter=udp,nw_dst=10.9.0.0/16 "
                            "predicate=count() >= 1 group=5tuple", &rep);
    ck_assert_msg(!error, "%s", error);
    q.sweep_waits_for_reports = true;
    q.ring_size = 64;
    ck_assert(!tpm_dos_profile(&q, &rep, 1, 2048, 3, &c));
    ck_assert_double_gt(c.sweep_item, 0);
    tpm_event_destroy(rep);
}
END_TEST

/* A monitor with a history of 'k' entries and event 3 (sum of volume per
 * nw_dst/16) that saw eight intervals with packets: 10, 20, ..., 80 in
 * epochs e0 to e0 + 7 (e0 = T0's epoch), all swept. */
static struct tpm *
poll_history_tpm(uint32_t k)
{
    struct tpm_params p;
    tpm_params_init(&p);
    p.flow_table_size = 1024;
    p.dos_table_size = 1024;
    p.max_chunks = 64;
    p.history_len = k;
    struct tpm *tpm = new_tpm(&p);
    struct frame f;

    add(tpm, 3, "vol filter=udp predicate=sum(volume) > 1000000 "
        "group=nw_dst/16");
    udp_frame(&f, ip4(10, 99, 0, 1), ip4(10, 7, 1, 1), 1, 2, 10, 64);
    for (int e = 0; e < 8; e++) {
        for (int i = 0; i <= e; i++) {
            send1(tpm, T0 + e * 10 * MS + i, &f);
        }
        tpm_advance(tpm, T0 + (e + 1) * 10 * MS);
        sweep_all(tpm);
    }
    return tpm;
}

/* poll_history_tpm(k): the polls answer the last 'k' intervals and call
 * the ones before them expired, whether or not 'k' is the size of the
 * history's ring (a power of two). */
static void
check_poll_window(uint32_t k)
{
    struct tpm *tpm = poll_history_tpm(k);
    uint64_t e0 = T0 / (10 * MS);
    double v;

    struct tpm_key g = { .ipver = 4 };
    g.dst[0] = htonl(ip4(10, 7, 0, 0));
    for (uint32_t e = 0; e < 8; e++) {
        enum tpm_poll_status st = tpm_poll(tpm, 3, &g, 0, 0, e0 + e, &v);
        if (e + k >= 8) {
            ck_assert_msg(st == TPM_POLL_OK && v == 10.0 * (e + 1),
                          "k %u epoch +%u: status %d value %g", k, e, st,
                          v);
        } else {
            ck_assert_msg(st == TPM_POLL_EXPIRED,
                          "k %u epoch +%u: status %d", k, e, st);
        }
    }
    tpm_destroy(tpm);
}

/* An instance's history counter past 2^32 intervals: the slots go on
 * around the ring and the history stays full. */
START_TEST(test_hist_ring_wrap)
{
    struct tpm_hist h[8];
    struct tpm_child c;
    memset(&c, 0, sizeof c);
    c.hist_seq = UINT32_MAX - 1;
    ck_assert_ptr_eq(tpm_hist_at(h, c.hist_seq, 0, 8), &h[6]);
    tpm_hist_push(&c, 8);
    ck_assert_ptr_eq(tpm_hist_at(h, c.hist_seq, 0, 8), &h[7]);
    tpm_hist_push(&c, 8);
    ck_assert_uint_eq(c.hist_seq, 8);
    ck_assert_ptr_eq(tpm_hist_at(h, c.hist_seq, 0, 8), &h[0]);
    ck_assert_ptr_eq(tpm_hist_at(h, c.hist_seq, 1, 8), &h[7]);
    ck_assert_ptr_eq(tpm_hist_at(h, c.hist_seq, 8, 8), &h[0]);
    tpm_hist_push(&c, 8);
    ck_assert_ptr_eq(tpm_hist_at(h, c.hist_seq, 1, 8), &h[0]);
}
END_TEST

START_TEST(test_poll_history)
{
    for (uint32_t k = 1; k <= 9; k++) {
        check_poll_window(k);
    }

    struct tpm *tpm = poll_history_tpm(4);
    uint64_t e0 = T0 / (10 * MS);
    double v;

    struct tpm_key g = { .ipver = 4 };
    g.dst[0] = htonl(ip4(10, 7, 200, 200));   /* Masked to 10.7/16. */
    ck_assert_int_eq(tpm_poll(tpm, 3, &g, 0, 0, e0 + 7, &v), TPM_POLL_OK);
    ck_assert_double_eq(v, 80);
    ck_assert_int_eq(tpm_poll(tpm, 3, &g, 0, 0, e0 + 4, &v), TPM_POLL_OK);
    ck_assert_double_eq(v, 50);
    ck_assert_int_eq(tpm_poll(tpm, 3, &g, 0, 0, e0 + 3, &v),
                     TPM_POLL_EXPIRED);
    ck_assert_int_eq(tpm_poll(tpm, 3, &g, 0, 0, e0 + 8, &v),
                     TPM_POLL_NOT_YET);
    g.dst[0] = htonl(ip4(10, 8, 0, 0));
    ck_assert_int_eq(tpm_poll(tpm, 3, &g, 0, 0, e0 + 7, &v),
                     TPM_POLL_NO_GROUP);
    ck_assert_int_eq(tpm_poll(tpm, 4, &g, 0, 0, e0 + 7, &v),
                     TPM_POLL_NO_EVENT);

    /* An event added later (as the TEM installs its events again after a
     * resync) knows nothing of the intervals over before it: expired,
     * not "no traffic"; it answers for those after. */
    add(tpm, 4, "vol2 filter=udp predicate=sum(volume) > 1000000 "
        "group=nw_dst/16");
    struct frame f2;
    udp_frame(&f2, ip4(10, 99, 0, 1), ip4(10, 7, 1, 1), 3, 4, 10, 64);
    send1(tpm, T0 + 80 * MS + 1, &f2);
    tpm_advance(tpm, T0 + 90 * MS);
    sweep_all(tpm);
    g.dst[0] = htonl(ip4(10, 7, 0, 0));
    ck_assert_int_eq(tpm_poll(tpm, 4, &g, 0, 0, e0 + 7, &v),
                     TPM_POLL_EXPIRED);
    ck_assert_int_eq(tpm_poll(tpm, 4, &g, 0, 0, e0 + 8, &v), TPM_POLL_OK);
    ck_assert_double_eq(v, 10);
    g.dst[0] = htonl(ip4(10, 8, 0, 0));
    ck_assert_int_eq(tpm_poll(tpm, 4, &g, 0, 0, e0 + 7, &v),
                     TPM_POLL_EXPIRED);
    ck_assert_int_eq(tpm_poll(tpm, 4, &g, 0, 0, e0 + 8, &v),
                     TPM_POLL_NO_GROUP);
    tpm_destroy(tpm);
}
END_TEST

/* A group that goes quiet keeps answering polls for the intervals its
 * history covers, and answers "expired" beyond them (never a silent 0). */
START_TEST(test_poll_quiet_group)
{
    struct tpm_params p;
    tpm_params_init(&p);
    p.flow_table_size = 1024;
    p.dos_table_size = 1024;
    p.max_chunks = 64;
    p.history_len = 4;
    /* The flow leaves its instance after one idle epoch, and the idle
     * instance goes with it: its history goes too. */
    p.retire_epochs = 1;
    struct tpm *tpm = new_tpm(&p);
    struct frame f;
    double v;

    add(tpm, 5, "burst filter=udp predicate=sum(volume) > 1000000 "
        "group=nw_dst/24");
    udp_frame(&f, ip4(10, 99, 0, 1), ip4(10, 12, 0, 1), 1, 2, 50, 64);
    uint64_t e0 = T0 / (10 * MS);
    for (int i = 0; i < 3; i++) {
        send1(tpm, T0 + i, &f);
    }
    struct tpm_key g = { .ipver = 4 };
    g.dst[0] = htonl(ip4(10, 12, 0, 0));
    for (int e = 1; e <= 8; e++) {
        tpm_advance(tpm, T0 + e * 10 * MS);
        sweep_all(tpm);
        enum tpm_poll_status st = tpm_poll(tpm, 5, &g, 0, 0, e0, &v);
        if (e <= 4) {
            ck_assert_msg(st == TPM_POLL_OK && v == 150,
                          "epoch +%d: status %d value %g", e, st, v);
        } else {
            ck_assert_msg(st == TPM_POLL_EXPIRED, "epoch +%d: status %d",
                          e, st);
        }
    }
    tpm_destroy(tpm);
}
END_TEST

START_TEST(test_control_rings)
{
    struct tpm_params p;
    test_params(&p);
    p.tcp_state_pool = 0;       /* Events needing per-flow state: refused. */
    struct tpm *tpm = new_tpm(&p);
    struct tpm_event *ev;
    struct tpm_report r;
    struct frame f;

    ck_assert_ptr_null(tpm_event_parse_line(
        "x filter=udp predicate=count() > 2", &ev));
    ck_assert(tpm_submit_add(tpm, ev, 9, 100));
    ck_assert_ptr_null(tpm_event_parse_line(
        "tcpvars filter=tcp predicate=sum(is_lost) > 2", &ev));
    ck_assert(tpm_submit_add(tpm, ev, 10, 101));
    ck_assert_ptr_null(tpm_event_parse_line(
        "odd filter=udp predicate=count() > 2 interval=15ms", &ev));
    ck_assert(tpm_submit_add(tpm, ev, 11, 102));
    ck_assert(tpm_submit_del(tpm, 12, 103));
    ck_assert_int_eq(tpm_run_control(tpm, 100), 4);

    ck_assert(tpm_pop_report(tpm, &r));
    ck_assert_int_eq(r.type, TPM_REPORT_ADD_DONE);
    ck_assert_uint_eq(r.cookie, 100);
    ck_assert_ptr_null(r.error);
    ck_assert(tpm_pop_report(tpm, &r));
    ck_assert_uint_eq(r.cookie, 101);
    ck_assert_ptr_nonnull(strstr(r.error, "tcp_state_pool=0"));
    free(r.error);
    ck_assert(tpm_pop_report(tpm, &r));
    ck_assert_uint_eq(r.cookie, 102);
    ck_assert_ptr_nonnull(strstr(r.error, "not a multiple of the epoch"));
    free(r.error);
    ck_assert(tpm_pop_report(tpm, &r));
    ck_assert_int_eq(r.type, TPM_REPORT_DEL_DONE);
    ck_assert_int_eq(r.status, ENOENT);
    ck_assert(!tpm_pop_report(tpm, &r));

    /* Traffic, then a poll and a delete through the ring. */
    udp_frame(&f, ip4(10, 99, 0, 1), ip4(10, 9, 0, 1), 1, 2, 10, 64);
    for (int i = 0; i < 3; i++) {
        send1(tpm, T0 + i, &f);
    }
    tpm_advance(tpm, T0 + 10 * MS);
    sweep_all(tpm);
    ck_assert(tpm_pop_report(tpm, &r));
    ck_assert_int_eq(r.type, TPM_REPORT_SATISFIED);
    ck_assert_double_eq(r.value, 3);

    ck_assert(tpm_submit_poll(tpm, 9, &r.group, r.tun_id, 0, r.epoch, 104));
    ck_assert(tpm_submit_del(tpm, 9, 105));
    ck_assert_int_eq(tpm_run_control(tpm, 100), 2);
    ck_assert(tpm_pop_report(tpm, &r));
    ck_assert_int_eq(r.type, TPM_REPORT_POLL_REPLY);
    ck_assert_int_eq(r.status, TPM_POLL_OK);
    ck_assert_double_eq(r.value, 3);
    ck_assert(tpm_pop_report(tpm, &r));
    ck_assert_int_eq(r.type, TPM_REPORT_DEL_DONE);
    ck_assert_int_eq(r.status, 0);

    /* After the delete: no reports, and the sweep removes the instance. */
    for (int i = 0; i < 3; i++) {
        send1(tpm, T0 + 10 * MS + i, &f);
    }
    tpm_advance(tpm, T0 + 20 * MS);
    sweep_all(tpm);
    ck_assert(!tpm_pop_report(tpm, &r));
    struct tpm_stats s;
    stats(tpm, &s);
    ck_assert_uint_eq(s.triggers, 0);
    ck_assert_uint_eq(s.events, 0);
    tpm_destroy(tpm);
}
END_TEST

/* The control rings across two threads: a controller thread installs
 * events, polls and deletes while the owner thread forwards packets; every
 * command gets exactly one reply with its cookie, and satisfactions for
 * the installed events arrive. */
struct ctl_ctx {
    struct tpm *tpm;
    _Atomic bool done;
    int acks, dels, polls_ok, sats;
    char error[256];
};

static bool
ctl_wait__(struct ctl_ctx *ctx, uint32_t type, uint64_t cookie,
           struct tpm_report *out)
{
    for (long spins = 0; spins < 2000000000L; spins++) {
        struct tpm_report r;
        if (!tpm_pop_report(ctx->tpm, &r)) {
            sched_yield();
            continue;
        }
        if (r.type == TPM_REPORT_SATISFIED) {
            ctx->sats++;
            continue;
        }
        if (r.type != type || r.cookie != cookie) {
            snprintf(ctx->error, sizeof ctx->error,
                     "reply type %u cookie %llu, expected %u %llu", r.type,
                     (unsigned long long) r.cookie, type,
                     (unsigned long long) cookie);
            free(r.error);
            return false;
        }
        *out = r;
        return true;
    }
    snprintf(ctx->error, sizeof ctx->error, "no reply for %llu",
             (unsigned long long) cookie);
    return false;
}

static void *
ctl_thread__(void *ctx_)
{
    struct ctl_ctx *ctx = ctx_;
    uint64_t cookie = 1;
    struct tpm_report r;

    for (int round = 0; round < 50 && !ctx->error[0]; round++) {
        struct tpm_event *ev;
        char line[128];
        snprintf(line, sizeof line, "r%d filter=udp,nw_dst=10.11.%d.0/24 "
                 "predicate=count() > 0 group=nw_dst/24", round, round % 4);
        if (tpm_event_parse_line(line, &ev)) {
            snprintf(ctx->error, sizeof ctx->error, "parse %s", line);
            break;
        }
        while (!tpm_submit_add(ctx->tpm, ev, round, cookie)) {
            sched_yield();
        }
        if (!ctl_wait__(ctx, TPM_REPORT_ADD_DONE, cookie++, &r)) {
            break;
        }
        if (r.error) {
            snprintf(ctx->error, sizeof ctx->error, "add: %s", r.error);
            free(r.error);
            break;
        }
        ctx->acks++;

        /* Let some traffic be counted, then poll and delete. */
        struct timespec ts = { 0, 2 * 1000 * 1000 };
        nanosleep(&ts, NULL);
        struct tpm_key g = { .ipver = 4 };
        g.dst[0] = htonl(ip4(10, 11, round % 4, 0));
        tpm_submit_poll(ctx->tpm, round, &g, 0, 0, 0, cookie);
        if (!ctl_wait__(ctx, TPM_REPORT_POLL_REPLY, cookie++, &r)) {
            break;
        }
        ctx->polls_ok += r.status != TPM_POLL_NO_EVENT;
        if (round % 2) {
            tpm_submit_del(ctx->tpm, round, cookie);
            if (!ctl_wait__(ctx, TPM_REPORT_DEL_DONE, cookie++, &r)) {
                break;
            }
            ctx->dels += r.status == 0;
        }
    }
    atomic_store(&ctx->done, true);
    return NULL;
}

START_TEST(test_control_two_threads)
{
    struct tpm_params p;
    tpm_params_init(&p);
    p.flow_table_size = 4096;
    p.dos_table_size = 1024;
    p.max_chunks = 256;
    p.ring_size = 8;            /* Small, so both sides meet full rings. */
    struct tpm *tpm = new_tpm(&p);
    struct ctl_ctx ctx = { .tpm = tpm };
    pthread_t thread;

    ck_assert_int_eq(pthread_create(&thread, NULL, ctl_thread__, &ctx), 0);
    uint64_t now = T0;
    int i = 0;
    while (!atomic_load(&ctx.done)) {
        struct frame f;
        udp_frame(&f, ip4(10, 99, 0, 1), ip4(10, 11, i % 4, i % 50), i % 50,
                  7, 10, 64);
        send1(tpm, now, &f);
        now += 100 * 1000;      /* 100 us of virtual time per packet. */
        i++;
        tpm_sweep_step(tpm, UINT64_MAX);
        tpm_run_control(tpm, 4);
    }
    pthread_join(thread, NULL);
    ck_assert_msg(!ctx.error[0], "%s", ctx.error);
    ck_assert_int_eq(ctx.acks, 50);
    ck_assert_int_eq(ctx.polls_ok, 50);
    ck_assert_int_eq(ctx.dels, 25);
    ck_assert_int_gt(ctx.sats, 0);

    struct tpm_stats s;
    stats(tpm, &s);
    ck_assert_uint_eq(s.events, 25);
    ck_assert_uint_eq(s.commands, 50 + 50 + 25);
    tpm_destroy(tpm);
}
END_TEST

START_TEST(test_params_check)
{
    struct tpm_params p;
    char *error;

    tpm_params_init(&p);
    ck_assert_ptr_null(tpm_params_check(&p));
    p.flow_table_size = 1000;
    error = tpm_params_check(&p);
    ck_assert_str_eq(error, "flow_table_size=1000 is not a power of two");
    free(error);
    tpm_params_init(&p);
    p.history_len = 0;
    error = tpm_params_check(&p);
    ck_assert_str_eq(error, "history_len=0 is out of range [1, 1024]");
    free(error);
    ck_assert_ptr_null(tpm_create(&p, &error));
    ck_assert_ptr_nonnull(strstr(error, "history_len"));
    free(error);
}
END_TEST

/* tpm_params_memory() against the per-entry costs that docs/operations.md
 * gives the operator (192-byte flow entries, 512-byte chunks, 128-byte
 * connections), and against what a monitor really maps: no table is
 * left out of the sum. */
START_TEST(test_params_memory)
{
    struct tpm_params p, q;
    tpm_params_init(&p);
    uint64_t base = tpm_params_memory(&p);

    q = p;
    q.flow_table_size *= 2;
    /* The entry, its connection reference (the pool is on), its port
     * and its two bits of the touched bitmaps. */
    ck_assert_uint_eq(tpm_params_memory(&q) - base,
                      (uint64_t) p.flow_table_size * (192 + 4 + 2)
                      + p.flow_table_size / 4);
    q = p;
    q.max_chunks *= 2;
    ck_assert_uint_eq(tpm_params_memory(&q) - base,
                      (uint64_t) p.max_chunks * (512 + 8));
    q = p;
    q.tcp_state_pool *= 2;
    ck_assert_uint_eq(tpm_params_memory(&q) - base,
                      (uint64_t) p.tcp_state_pool * (128 + 4));
    q = p;
    q.max_triggers *= 2;
    /* An instance (four lines), its history, two instance-map slots. */
    ck_assert_uint_eq(tpm_params_memory(&q) - base,
                      (uint64_t) p.max_triggers
                      * (256 + p.history_len * 16 + 2 * 8));

    /* A monitor's mappings add up to no more than the estimate (and to
     * most of it: the rest is malloc's own rounding). */
    FILE *maps_before = fopen("/proc/self/statm", "r");
    ck_assert_ptr_nonnull(maps_before);
    unsigned long vm0, vm1;
    ck_assert_int_eq(fscanf(maps_before, "%lu", &vm0), 1);
    fclose(maps_before);
    struct tpm *tpm = new_tpm(&p);
    FILE *maps_after = fopen("/proc/self/statm", "r");
    ck_assert_ptr_nonnull(maps_after);
    ck_assert_int_eq(fscanf(maps_after, "%lu", &vm1), 1);
    fclose(maps_after);
    uint64_t mapped = (uint64_t) (vm1 - vm0) * sysconf(_SC_PAGESIZE);
    ck_assert_msg(mapped <= base + (4u << 20),
                  "tpm_create() mapped %"PRIu64" bytes, estimate %"PRIu64,
                  mapped, base);
    ck_assert_msg(mapped >= base / 2,
                  "tpm_create() mapped %"PRIu64" bytes, estimate %"PRIu64,
                  mapped, base);
    tpm_destroy(tpm);
}
END_TEST

/* The process's minor page faults so far (the kernel's count). */
static long
minor_faults(void)
{
    struct rusage ru;
    ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru), 0);
    return ru.ru_minflt;
}

/* Once created, the monitor takes no page fault on the packet path or in
 * the sweep, however many flows and trigger instances are new: every
 * array they write was faulted in by tpm_create() (a fault costs
 * microseconds in a virtual machine; the history, written first by the
 * sweep, once cost 22 ms in the sweep after 65536 new flows).  The
 * kernel's count of the process's minor faults is the truth; it is first
 * shown to count fresh memory as it is touched.
 *
 * The code runs once first, on a monitor of its own: the test runs in a
 * forked child, and fork() copies no page-table entry of a file mapping,
 * so the first call of a function whose code page the child has not run
 * yet (plan_0__(), say) faults that page in; so do the first calls that
 * reach deeper into the stack than the child has been.  Neither is the
 * monitor's memory, and which of them a run meets depends on where
 * address-space randomisation put the stack (0 or 1 fault from one run
 * to the next without the warm-up). */
static void
no_fault_path(struct tpm *tpm, const struct tpm_frame *fr, int n)
{
    tpm_advance(tpm, T0);
    for (int i = 0; i < n; i += 32) {
        tpm_process_batch(tpm, &fr[i], MIN(32, n - i));
    }
    tpm_advance(tpm, T0 + 10 * MS);
    sweep_all(tpm);
}

START_TEST(test_no_page_faults)
{
    enum { N_FLOWS = 12000 };
    long f0 = minor_faults();
    size_t fresh = 4u << 20;
    char *mem = xmalloc(fresh);     /* Above malloc's mmap threshold. */
    tpm_prefault(mem, fresh);
    ck_assert_int_ge(minor_faults() - f0, (long) (fresh / 4096 / 2));
    free(mem);

    static const char many[] = "many filter=udp,nw_dst=10.0.0.0/8 "
        "predicate=count() > 100 group=5tuple interval=10ms";
    struct tpm_params p;
    test_params(&p);
    struct tpm *warm = new_tpm(&p);
    add(warm, 1, many);
    p.flow_table_size = 65536;
    struct tpm *tpm = new_tpm(&p);
    add(tpm, 1, many);
    struct frame *frames = xmalloc(N_FLOWS * sizeof *frames);
    struct tpm_frame *fr = xmalloc(N_FLOWS * sizeof *fr);
    for (int i = 0; i < N_FLOWS; i++) {
        udp_frame(&frames[i], ip4(10, 99, i >> 8, i & 255),
                  ip4(10, 1, i >> 8, i & 255), 1000, 80, 10, 64);
        fr[i] = (struct tpm_frame) { frames[i].data, frames[i].len,
                                     frames[i].len };
    }

    no_fault_path(warm, fr, 256);
    tpm_destroy(warm);

    long before = minor_faults();
    no_fault_path(tpm, fr, N_FLOWS);
    long faults = minor_faults() - before;

    struct tpm_stats s;
    stats(tpm, &s);
    ck_assert_uint_eq(s.flow_inserts, N_FLOWS);
    ck_assert_uint_eq(s.triggers, N_FLOWS);
    ck_assert_uint_eq(s.sweeps_done, 1);
    /* The history alone took one per 32 instances (375 here, 342
     * counted) before it was faulted in at creation. */
    ck_assert_msg(faults == 0, "%ld page faults for %d new flows and "
                  "instances", faults, N_FLOWS);
    tpm_destroy(tpm);
    free(fr);
    free(frames);
}
END_TEST

START_TEST(test_full_table_never_fails)
{
    struct tpm_params p;
    tpm_params_init(&p);
    p.flow_table_size = 64;
    p.flow_probe_limit = 8;
    p.dos_table_size = 64;
    p.max_chunks = 16;
    p.max_triggers = 32;
    p.max_children = 32;
    struct tpm *tpm = new_tpm(&p);
    add(tpm, 1, "any filter=udp predicate=count() > 0");
    for (int i = 0; i < 5000; i++) {
        struct frame f;
        udp_frame(&f, ip4(10, 99, 0, 1), ip4(10, 10, i / 256, i % 256), i, 7,
                  10, 64);
        send1(tpm, T0 + i, &f);
    }
    struct tpm_stats s;
    stats(tpm, &s);
    ck_assert_uint_eq(s.packets, 5000);
    ck_assert_uint_gt(s.flow_evictions, 0);
    ck_assert_uint_gt(s.children_dropped, 0);
    ck_assert_uint_le(s.flows_live, 64);
    ck_assert_uint_le(s.triggers, 32);
    tpm_advance(tpm, T0 + 10 * MS);
    sweep_all(tpm);
    stats(tpm, &s);
    ck_assert_uint_eq(s.sweeps_done, 1);
    tpm_destroy(tpm);
}
END_TEST

/* Per-flow state variables (docs/event-language.md).  A TCP connection
 * from C = 10.0.0.1:40000 to S = 10.0.0.2:5001, built by hand. */

#define C_ADDR ip4(10, 0, 0, 1)
#define S_ADDR ip4(10, 0, 0, 2)
#define US 1000ULL

/* Builds an IPv4 TCP frame; a SYN carries MSS 'mss' and window scale
 * 'wscale' options. */
static void
tcp_frame(struct frame *f, bool from_c, uint32_t seq, uint32_t ack,
          uint8_t flags, uint16_t win, int payload, uint16_t mss,
          uint8_t wscale, uint8_t tos)
{
    int optlen = flags & TPM_TCP_SYN ? 8 : 0;
    uint8_t *ip = eth_start(f, 0x0800);
    ip[0] = 0x45;
    ip[1] = tos;
    put16(ip + 2, 20 + 20 + optlen + payload);
    ip[8] = 64;
    ip[9] = 6;
    uint32_t s = htonl(from_c ? C_ADDR : S_ADDR);
    uint32_t d = htonl(from_c ? S_ADDR : C_ADDR);
    memcpy(ip + 12, &s, 4);
    memcpy(ip + 16, &d, 4);
    uint8_t *tcp = ip + 20;
    put16(tcp, from_c ? 40000 : 5001);
    put16(tcp + 2, from_c ? 5001 : 40000);
    put16(tcp + 4, seq >> 16);
    put16(tcp + 6, seq);
    put16(tcp + 8, ack >> 16);
    put16(tcp + 10, ack);
    tcp[12] = (uint8_t) ((5 + optlen / 4) << 4);
    tcp[13] = flags;
    put16(tcp + 14, win);
    if (optlen) {
        uint8_t *o = tcp + 20;
        o[0] = 2;
        o[1] = 4;
        put16(o + 2, mss);
        o[4] = 1;
        o[5] = 3;
        o[6] = 3;
        o[7] = wscale;
    }
    f->len = MAX(60, 14 + 20 + 20 + optlen + payload);
    ck_assert_uint_le(f->len, sizeof f->data);
}

/* Sends 'f' at time 'now' through tpm_process_batch_at(). */
static void
send_at(struct tpm *tpm, uint64_t now, const struct frame *f)
{
    struct tpm_frame fr = { f->data, f->len, f->len };
    tpm_advance(tpm, now);
    tpm_process_batch_at(tpm, &fr, &now, 1);
}

#define A TPM_TCP_ACK

/* The connection's first epoch: handshake, data, a retransmission, a
 * burst, two duplicate ACKs, an RTT sample spoilt by the retransmission
 * (Karn) and a good one.  Payloads of at most 60 bytes fit 'struct
 * frame'. */
static void
tcp_scenario(struct tpm *tpm)
{
    struct frame f;
    const uint16_t syn = TPM_TCP_SYN, fin = TPM_TCP_FIN;
    (void) fin;

    tcp_frame(&f, true, 1000, 0, syn, 64240, 0, 1460, 7, 0);
    send_at(tpm, T0, &f);                                   /* 1 */
    tcp_frame(&f, false, 5000, 1001, syn | A, 65160, 0, 1400, 9, 0);
    send_at(tpm, T0 + 100 * US, &f);                        /* 2 */
    tcp_frame(&f, true, 1001, 5001, A, 501, 0, 0, 0, 0);
    send_at(tpm, T0 + 200 * US, &f);                        /* 3 */
    tcp_frame(&f, true, 1001, 5001, A, 501, 50, 0, 0, 0);
    send_at(tpm, T0 + 300 * US, &f);                        /* 4 */
    tcp_frame(&f, true, 1051, 5001, A, 501, 50, 0, 0, 0);
    send_at(tpm, T0 + 305 * US, &f);                        /* 5 burst */
    tcp_frame(&f, true, 1001, 5001, A, 501, 50, 0, 0, 3);
    send_at(tpm, T0 + 400 * US, &f);                        /* 6 lost, CE */
    tcp_frame(&f, false, 5001, 1051, A, 300, 0, 0, 0, 0);
    send_at(tpm, T0 + 500 * US, &f);                        /* 7 */
    tcp_frame(&f, false, 5001, 1051, A, 300, 0, 0, 0, 0);
    send_at(tpm, T0 + 510 * US, &f);                        /* 8 dup */
    tcp_frame(&f, false, 5001, 1051, A, 300, 0, 0, 0, 0);
    send_at(tpm, T0 + 520 * US, &f);                        /* 9 dup */
    tcp_frame(&f, true, 1101, 5001, A, 501, 50, 0, 0, 0);
    send_at(tpm, T0 + 600 * US, &f);                        /* 10 */
    tcp_frame(&f, false, 5001, 1151, A, 300, 0, 0, 0, 0);
    send_at(tpm, T0 + 900 * US, &f);                        /* 11 */
    tcp_frame(&f, true, 1151, 5001, A, 501, 0, 0, 0, 0);
    send_at(tpm, T0 + 950 * US, &f);                        /* 12 */
}

/* C's events: value = the left operand, always satisfied. */
static const char *const c_events[] = {
    "lost filter=tcp,nw_src=10.0.0.1 predicate=sum(is_lost) >= 0",
    "burst filter=tcp,nw_src=10.0.0.1 predicate=sum(is_burst) >= 0",
    "seq filter=tcp,nw_src=10.0.0.1 predicate=seq >= 0",
    "ack filter=tcp,nw_src=10.0.0.1 predicate=ack >= 0",
    "dup filter=tcp,nw_src=10.0.0.1 predicate=dup >= 0",
    "rtt filter=tcp,nw_src=10.0.0.1 predicate=rtt >= 0",
    "rwnd filter=tcp,nw_src=10.0.0.1 predicate=rwnd >= 0",
    "maxrwnd filter=tcp,nw_src=10.0.0.1 predicate=max(rwnd) >= 0",
    "ndup filter=tcp,nw_src=10.0.0.1 predicate=count(dup) >= 0",
    "lostce filter=tcp,nw_src=10.0.0.1 predicate=count(is_lost && ecn) >= 0",
};
/* Their values in the first epoch, worked out by hand from the packets:
 * one retransmission (6, which is CE-marked), one burst (5: 5 us after
 * 4), highest sequence end 1151, S acknowledged up to 1151, two
 * duplicate ACKs of S's MSS (1400) each less the 100 bytes acknowledged
 * after them, RTT 300 us (sent at 600 us, acknowledged at 900 us: the
 * sample of 300 us was dropped by the retransmission), window 501 << 7,
 * the SYN's window unscaled, two packets with dup != 0. */
static const double c_values[] = {
    1, 1, 1151, 1151, 2700, 300000, 501 << 7, 64240, 2, 1,
};

/* A flow keeps at most 7 summaries (tpm/flow-table.h): the events are
 * checked in two halves, on two monitors. */
#define C_HALF 5

/* Adds the events of half 'half' of 'c_events' with ids 100 + index. */
static void
add_c_events(struct tpm *tpm, int half)
{
    size_t lo = half ? C_HALF : 0;
    size_t hi = half ? ARRAY_SIZE(c_events) : C_HALF;
    for (size_t i = lo; i < hi; i++) {
        add(tpm, 100 + i, c_events[i]);
    }
}

static void
check_c_values(struct tpm *tpm, int half)
{
    struct reports *rs = xzalloc(sizeof *rs);
    tpm_advance(tpm, T0 + 10 * MS);
    sweep_all(tpm);
    collect(tpm, rs);
    size_t lo = half ? C_HALF : 0;
    size_t hi = half ? ARRAY_SIZE(c_events) : C_HALF;
    uint32_t base = 100;
    for (size_t i = lo; i < hi; i++) {
        const struct tpm_report *r = NULL;
        for (int j = 0; j < rs->n; j++) {
            if (rs->r[j].event_id == base + i
                && rs->r[j].group.src[0] == htonl(C_ADDR)) {
                ck_assert_msg(!r, "%s: two reports", c_events[i]);
                r = &rs->r[j];
            }
        }
        ck_assert_msg(r, "%s: no report", c_events[i]);
        ck_assert_msg(r->value == c_values[i], "%s: %.17g, expected %.17g",
                      c_events[i], r->value, c_values[i]);
    }
    free(rs);
}

START_TEST(test_tcp_vars)
{
    struct tpm *tpm = new_tpm(NULL);
    add_c_events(tpm, 1);
    tcp_scenario(tpm);
    check_c_values(tpm, 1);
    tpm_destroy(tpm);

    tpm = new_tpm(NULL);
    add_c_events(tpm, 0);
    /* S's direction, matched too. */
    add(tpm, 200, "srtt filter=tcp,nw_src=10.0.0.2 predicate=rtt >= 0");
    add(tpm, 201, "sburst filter=tcp,nw_src=10.0.0.2 "
        "predicate=sum(is_burst) >= 0");
    add(tpm, 202, "srwnd filter=tcp,nw_src=10.0.0.2 "
        "predicate=max(rwnd) >= 0");
    tcp_scenario(tpm);
    check_c_values(tpm, 0);

    /* S: RTT of its SYN-ACK (sent at 100 us, acknowledged at 200 us),
     * two bursts (8 and 9, 10 us apart), window 300 << 9. */
    const struct tpm_event *ev = tpm_event_get(tpm, 200);
    ck_assert_ptr_nonnull(ev);
    struct tpm_key g;
    memset(&g, 0, sizeof g);
    g.ipver = 4;
    g.proto = 6;
    g.src[0] = htonl(S_ADDR);
    g.dst[0] = htonl(C_ADDR);
    g.sport = 5001;
    g.dport = 40000;
    double v;
    uint64_t e0 = T0 / (10 * MS);
    ck_assert_int_eq(tpm_poll(tpm, 200, &g, 0, 0, e0, &v), TPM_POLL_OK);
    ck_assert_double_eq(v, 100000);
    ck_assert_int_eq(tpm_poll(tpm, 201, &g, 0, 0, e0, &v), TPM_POLL_OK);
    ck_assert_double_eq(v, 2);
    ck_assert_int_eq(tpm_poll(tpm, 202, &g, 0, 0, e0, &v), TPM_POLL_OK);
    ck_assert_double_eq(v, 300 << 9);

    struct tpm_stats s;
    stats(tpm, &s);
    ck_assert_uint_eq(s.tcp_states, 1);     /* One connection, shared. */
    ck_assert_uint_eq(s.tcp_state_exhausted, 0);
    tpm_destroy(tpm);
}
END_TEST

/* Only C's direction is matched: S's packets still feed C's ack, dup and
 * rtt (S's flow joins C's connection when it appears). */
START_TEST(test_tcp_vars_reverse_unmatched)
{
    for (int half = 0; half < 2; half++) {
        struct tpm *tpm = new_tpm(NULL);
        add_c_events(tpm, half);
        tcp_scenario(tpm);
        check_c_values(tpm, half);
        tpm_destroy(tpm);
    }
}
END_TEST

/* Only S's direction is matched when the handshake passes: the state
 * starts at S's SYN-ACK, whose window-scale option says C's SYN had one
 * too (RFC 7323 2.2), so S's windows are scaled; C's own shift was not
 * seen, so C's windows (its event added later) stay raw. */
START_TEST(test_tcp_rwnd_from_synack)
{
    struct tpm *tpm = new_tpm(NULL);
    struct reports *rs = xzalloc(sizeof *rs);
    struct frame f;

    add(tpm, 1, "srwnd filter=tcp,nw_src=10.0.0.2 predicate=max(rwnd) >= 0");
    tcp_frame(&f, true, 1000, 0, TPM_TCP_SYN, 64240, 0, 1460, 7, 0);
    send_at(tpm, T0, &f);
    tcp_frame(&f, false, 5000, 1001, TPM_TCP_SYN | A, 65160, 0, 1400, 9, 0);
    send_at(tpm, T0 + 100 * US, &f);
    tcp_frame(&f, true, 1001, 5001, A, 501, 0, 0, 0, 0);
    send_at(tpm, T0 + 300 * US, &f);
    add(tpm, 2, "crwnd filter=tcp,nw_src=10.0.0.1 predicate=max(rwnd) >= 0");
    sweep_all(tpm);             /* The backfill. */
    tcp_frame(&f, false, 5001, 1001, A, 300, 0, 0, 0, 0);
    send_at(tpm, T0 + 500 * US, &f);
    tcp_frame(&f, true, 1001, 5001, A, 501, 0, 0, 0, 0);
    send_at(tpm, T0 + 600 * US, &f);
    tpm_advance(tpm, T0 + 10 * MS);
    sweep_all(tpm);
    collect(tpm, rs);

    int seen = 0;
    for (int i = 0; i < rs->n; i++) {
        const struct tpm_report *r = &rs->r[i];
        double want = r->event_id == 1 ? 300 << 9 : 501;
        ck_assert_msg(r->value == want, "event %u: %.17g, expected %.17g",
                      r->event_id, r->value, want);
        seen |= 1 << r->event_id;
    }
    ck_assert_int_eq(seen, 6);
    free(rs);
    tpm_destroy(tpm);
}
END_TEST

/* Values of the previous interval: the congestion event of paper Table 2
 * runs as written, and prev() of a state variable's aggregate. */
START_TEST(test_tcp_vars_lastepoch)
{
    struct tpm *tpm = new_tpm(NULL);
    struct frame f;
    struct reports *rs = xzalloc(sizeof *rs);

    add(tpm, 1, "cong filter=tcp,nw_src=10.0.0.1 predicate=1 - (ack - "
        "ack_lastepoch + dup) / (seq_lastepoch - ack_lastepoch) > 0.5");
    add(tpm, 2, "prevlost filter=tcp,nw_src=10.0.0.1 "
        "predicate=prev(sum(is_lost)) + seq_lastepoch >= 0");
    tcp_scenario(tpm);
    /* Epoch 0 ends with seq 1151, ack 1151, dup 2700.  Epoch 1: C sends
     * 50 bytes (seq 1201), S acknowledges 1161 (dup 2690): nothing was
     * outstanding at the end of epoch 0, the denominator is 0 and the
     * predicate 1 - x / 0 = 1 holds (as in epoch 0, with no previous
     * epoch).  Epoch 2: C sends 50 more (1251), S acknowledges 1211 (dup
     * 2640): 1 - (50 + 2640) / 40 < 0.5, silent. */
    for (int e = 1; e <= 2; e++) {
        uint64_t t = T0 + e * 10 * MS;
        uint32_t seq = 1151 + (e - 1) * 50;
        tpm_advance(tpm, t);
        sweep_all(tpm);
        tcp_frame(&f, true, seq, 5001, A, 501, 50, 0, 0, 0);
        send_at(tpm, t + 100 * US, &f);
        tcp_frame(&f, false, 5001, seq + 10, A, 300, 0, 0, 0, 0);
        send_at(tpm, t + 200 * US, &f);
        tcp_frame(&f, true, seq + 50, 5001, A, 501, 0, 0, 0, 0);
        send_at(tpm, t + 300 * US, &f);
    }
    tpm_advance(tpm, T0 + 30 * MS);
    sweep_all(tpm);
    collect(tpm, rs);

    uint64_t e0 = T0 / (10 * MS);
    int n_cong = 0, n_prev = 0;
    for (int i = 0; i < rs->n; i++) {
        const struct tpm_report *r = &rs->r[i];
        if (r->event_id == 1) {
            n_cong++;
            ck_assert(r->epoch == e0 || r->epoch == e0 + 1);
            ck_assert_double_eq(r->value, 1);
        } else if (r->event_id == 2) {
            n_prev++;
            if (r->epoch == e0 + 1) {
                ck_assert_double_eq(r->value, 1 + 1151);
            } else if (r->epoch == e0 + 2) {
                ck_assert_double_eq(r->value, 0 + 1201);
            } else {
                ck_assert_uint_eq(r->epoch, e0);
                ck_assert_double_eq(r->value, 0);
            }
        }
    }
    ck_assert_int_eq(n_cong, 2);
    ck_assert_int_eq(n_prev, 3);
    free(rs);
    tpm_destroy(tpm);
}
END_TEST

/* An event added while the connection runs: the backfill attaches C's
 * flow and links S's existing one; the state starts then (the packets
 * before are not known to it). */
START_TEST(test_tcp_vars_backfill)
{
    struct tpm *tpm = new_tpm(NULL);
    struct reports *rs = xzalloc(sizeof *rs);
    struct frame f;

    add(tpm, 1, "other filter=udp predicate=count() > 0");
    tcp_frame(&f, true, 1000, 0, TPM_TCP_SYN, 64240, 0, 1460, 7, 0);
    send_at(tpm, T0, &f);
    tcp_frame(&f, false, 5000, 1001, TPM_TCP_SYN | A, 65160, 0, 1400, 9, 0);
    send_at(tpm, T0 + 100 * US, &f);
    tcp_frame(&f, true, 1001, 5001, A, 501, 50, 0, 0, 0);
    send_at(tpm, T0 + 300 * US, &f);

    add(tpm, 2, "rtt filter=tcp,nw_src=10.0.0.1 predicate=rtt >= 0");
    add(tpm, 3, "ack filter=tcp,nw_src=10.0.0.1 predicate=ack + seq >= 0");
    add(tpm, 4, "rwnd filter=tcp,nw_src=10.0.0.1 predicate=rwnd >= 0");
    sweep_all(tpm);             /* The backfill. */

    /* S acknowledges C's first segment (state: C's ack 1051), C sends
     * 50 bytes (new data: sample to 1101 at 600 us), S acknowledges them
     * at 900 us (RTT 300 us), C's pure ACK carries the values.  Neither
     * SYN was seen by the state: the window is not scaled. */
    tcp_frame(&f, false, 5001, 1051, A, 300, 0, 0, 0, 0);
    send_at(tpm, T0 + 500 * US, &f);
    tcp_frame(&f, true, 1051, 5001, A, 501, 50, 0, 0, 0);
    send_at(tpm, T0 + 600 * US, &f);
    tcp_frame(&f, false, 5001, 1101, A, 300, 0, 0, 0, 0);
    send_at(tpm, T0 + 900 * US, &f);
    tcp_frame(&f, true, 1101, 5001, A, 501, 0, 0, 0, 0);
    send_at(tpm, T0 + 950 * US, &f);
    tpm_advance(tpm, T0 + 10 * MS);
    sweep_all(tpm);
    collect(tpm, rs);

    static const double want[] = { 300000, 1101 + 1101, 501 };
    int seen = 0;
    for (int i = 0; i < rs->n; i++) {
        const struct tpm_report *r = &rs->r[i];
        if (r->event_id >= 2 && r->event_id <= 4) {
            ck_assert_msg(r->value == want[r->event_id - 2],
                          "event %u: %.17g", r->event_id, r->value);
            ck_assert_uint_eq(r->flags, TPM_REPORT_PARTIAL);
            seen++;
        }
    }
    ck_assert_int_eq(seen, 3);
    struct tpm_stats st;
    stats(tpm, &st);
    ck_assert_uint_eq(st.tcp_states, 1);
    free(rs);
    tpm_destroy(tpm);
}
END_TEST

/* A pool of one connection: the second connection's matches are dropped
 * and counted; once the first one's flow entries are freed, its entry
 * returns to the pool and a new connection gets it. */
START_TEST(test_tcp_state_pool)
{
    struct tpm_params p;
    test_params(&p);
    p.tcp_state_pool = 1;
    p.idle_epochs = 2;
    p.scrub_per_step = 4096;
    struct tpm *tpm = new_tpm(&p);
    struct frame f, g;
    struct tpm_stats s;

    add(tpm, 1, "lost filter=tcp predicate=sum(is_lost) >= 0");
    tcp_frame(&f, true, 1000, 0, TPM_TCP_SYN, 100, 0, 1460, 0, 0);
    send_at(tpm, T0, &f);
    tcp_frame(&f, false, 1, 1001, TPM_TCP_SYN | A, 100, 0, 1460, 0, 0);
    send_at(tpm, T0 + 1, &f);
    /* Another connection (S's port 5002). */
    tcp_frame(&g, true, 7, 0, TPM_TCP_SYN, 100, 0, 1460, 0, 0);
    put16(g.data + 14 + 20 + 2, 5002);
    send_at(tpm, T0 + 2, &g);
    stats(tpm, &s);
    ck_assert_uint_eq(s.tcp_states, 1);
    ck_assert_uint_eq(s.tcp_state_exhausted, 1);
    ck_assert_uint_eq(s.matches, 2);

    /* Idle: the flow entries are freed, then the connection. */
    for (int e = 1; e <= 8; e++) {
        tpm_advance(tpm, T0 + e * 10 * MS);
        sweep_all(tpm);
    }
    stats(tpm, &s);
    ck_assert_uint_eq(s.tcp_states, 0);
    ck_assert_uint_eq(s.tcp_state_freed, 1);
    send_at(tpm, T0 + 80 * MS + 1, &g);
    stats(tpm, &s);
    ck_assert_uint_eq(s.tcp_states, 1);
    ck_assert_uint_eq(s.tcp_state_exhausted, 1);
    tpm_destroy(tpm);
}
END_TEST

/* UDP flows keep state too, for is_burst (the TCP variables are 0); the
 * gap is a knob: 'burst_gap_ns' 0 counts only packets of the same
 * time. */
START_TEST(test_burst_udp_gap)
{
    for (int k = 0; k < 2; k++) {
        struct tpm_params p;
        test_params(&p);
        p.burst_gap_ns = k ? 0 : 20 * US;
        struct tpm *tpm = new_tpm(&p);
        struct reports rs = { .n = 0 };
        struct frame f;

        add(tpm, 1, "b filter=udp predicate=sum(is_burst) + sum(seq + rtt "
            "+ is_lost + dup) >= 0");
        udp_frame(&f, ip4(10, 99, 0, 1), ip4(10, 9, 0, 1), 1, 2, 10, 64);
        /* Gaps: -, 20 us (burst unless the gap is 0), 0 (burst), 21 us
         * (not), 5 us (burst unless 0). */
        static const uint64_t t[] = { 0, 20, 20, 41, 46 };
        for (int i = 0; i < 5; i++) {
            send_at(tpm, T0 + t[i] * US, &f);
        }
        tpm_advance(tpm, T0 + 10 * MS);
        sweep_all(tpm);
        collect(tpm, &rs);
        ck_assert_int_eq(rs.n, 1);
        ck_assert_double_eq(rs.r[0].value, k ? 1 : 3);
        tpm_destroy(tpm);
    }
}
END_TEST

static Suite *
tpm_suite(void)
{
    Suite *s = suite_create("tpm");
    TCase *tc = tcase_create("monitor");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_heavy_5tuple);
    tcase_add_test(tc, test_parse_counters);
    tcase_add_test(tc, test_vars_when_needed);
    tcase_add_test(tc, test_group_aggregation);
    tcase_add_test(tc, test_tenants);
    tcase_add_test(tc, test_underlay);
    tcase_add_test(tc, test_ports);
    tcase_add_test(tc, test_tenant_slots_full);
    tcase_add_test(tc, test_aggregates_random);
    tcase_add_test(tc, test_aggregates_runs);
    tcase_add_test(tc, test_aggregates_mixed_batches);
    tcase_add_loop_test(tc, test_sweep_paths, 0, 2);
    tcase_add_loop_test(tc, test_planned_operators, 0, 2);
    tcase_add_test(tc, test_interval_and_lazy_reset);
    tcase_add_test(tc, test_sweep_budget_resume);
    tcase_add_test(tc, test_unfinished_sweep);
    tcase_add_test(tc, test_abandoned_twice);
    tcase_add_loop_test(tc, test_planned_behind_abandoned, 0, 2);
    tcase_add_test(tc, test_retire_epochs);
    tcase_add_test(tc, test_quiet_retire);
    tcase_add_test(tc, test_skip_second_flow);
    tcase_add_test(tc, test_skip_random);
    tcase_add_loop_test(tc, test_planned_flags, 0, 2);
    tcase_add_test(tc, test_runtime_add_backfill);
    tcase_add_test(tc, test_counts_move);
    tcase_add_test(tc, test_counts_v6);
    tcase_add_test(tc, test_dos_threshold);
    tcase_add_test(tc, test_dos_pass_after_epoch);
    tcase_add_test(tc, test_dos_removals);
    tcase_add_test(tc, test_dos_model);
    tcase_add_test(tc, test_dos_switch_fit);
    tcase_add_test(tc, test_sweep_lateness);
    tcase_add_test(tc, test_dos_syn_model);
    tcase_add_test(tc, test_dos_precheck);
    tcase_add_test(tc, test_poll_history);
    tcase_add_test(tc, test_hist_ring_wrap);
    tcase_add_test(tc, test_poll_quiet_group);
    tcase_add_test(tc, test_control_rings);
    tcase_add_test(tc, test_control_two_threads);
    tcase_add_test(tc, test_params_check);
    tcase_add_test(tc, test_params_memory);
    tcase_add_test(tc, test_no_page_faults);
    tcase_add_test(tc, test_full_table_never_fails);
    tcase_add_test(tc, test_tcp_vars);
    tcase_add_test(tc, test_tcp_vars_reverse_unmatched);
    tcase_add_test(tc, test_tcp_rwnd_from_synack);
    tcase_add_test(tc, test_tcp_vars_lastepoch);
    tcase_add_test(tc, test_tcp_vars_backfill);
    tcase_add_test(tc, test_tcp_state_pool);
    tcase_add_test(tc, test_burst_udp_gap);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(tpm_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
