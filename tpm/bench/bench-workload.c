/* SPDX-License-Identifier: Apache-2.0 */
/* tpm-bench workload: the Trumpet paper's section 7.2 workload in memory
 * (tpm-bench.c). */
#include <arpa/inet.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench-common.h"
#include "cli.h"
#include "clock.h"
#include "event.h"
#include "flow-table.h"
#include "hugealloc.h"
#include "packet.h"
#include "tpm.h"
#include "util.h"

/* The flows of a workload: 5-tuples and their frames. */

static void
put_be16(uint8_t *p, uint16_t x)
{
    p[0] = x >> 8;
    p[1] = x & 0xff;
}

static void
put_be32(uint8_t *p, uint32_t x)
{
    put_be16(p, x >> 16);
    put_be16(p + 2, x & 0xffff);
}

/* Writes into 'f' a minimal UDP/IPv4 Ethernet frame (60 bytes captured, 64
 * on the wire with the FCS) from 'src':'sport' to 'dst':'dport' (host byte
 * order). */
static void
frame_build(uint8_t f[FRAME_CAPLEN], uint32_t src, uint32_t dst,
            uint16_t sport, uint16_t dport, uint8_t ttl)
{
    static const uint8_t macs[12] = {
        0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02,
    };
    memset(f, 0, FRAME_CAPLEN);
    memcpy(f, macs, sizeof macs);
    put_be16(f + 12, 0x0800);

    uint8_t *ip = f + 14;
    ip[0] = 0x45;
    put_be16(ip + 2, FRAME_CAPLEN - 14);        /* 46 */
    ip[8] = ttl;
    ip[9] = 17;
    put_be32(ip + 12, src);
    put_be32(ip + 16, dst);

    uint8_t *udp = ip + 20;
    put_be16(udp, sport);
    put_be16(udp + 2, dport);
    put_be16(udp + 4, FRAME_CAPLEN - 14 - 20);  /* 26: 18 bytes payload. */
}

/* --vxlan: the outer headers in front of each inner frame (Ethernet,
 * IPv4, UDP, VXLAN), and the first VNI. */
#define WL_VXLAN_HLEN (14 + 20 + 8 + 8)
#define WL_VXLAN_VNI0 5001

/* Writes into 'f' the outer headers of a VXLAN frame (WL_VXLAN_HLEN
 * bytes) carrying the inner frame of FRAME_CAPLEN bytes that follows
 * them: from one hypervisor to another, UDP source port 'sport' (as a
 * switch derives it from the inner flow's hash), destination port 4789,
 * VNI 'vni'.  The inner frame has no FCS; the outer one's is on the
 * wire. */
static void
vxlan_wrap(uint8_t f[WL_VXLAN_HLEN], uint16_t sport, uint32_t vni)
{
    static const uint8_t macs[12] = {
        0x02, 0, 0, 0, 0, 0x11, 0x02, 0, 0, 0, 0, 0x12,
    };
    memset(f, 0, WL_VXLAN_HLEN);
    memcpy(f, macs, sizeof macs);
    put_be16(f + 12, 0x0800);

    uint8_t *ip = f + 14;
    ip[0] = 0x45;
    put_be16(ip + 2, WL_VXLAN_HLEN - 14 + FRAME_CAPLEN);        /* 96 */
    ip[8] = 64;
    ip[9] = 17;
    put_be32(ip + 12, 0xc6336401);          /* 198.51.100.1 */
    put_be32(ip + 16, 0xc6336402);          /* 198.51.100.2 */

    uint8_t *udp = ip + 20;
    put_be16(udp, sport);
    put_be16(udp + 2, TPM_VXLAN_PORT);
    put_be16(udp + 4, 8 + 8 + FRAME_CAPLEN);                    /* 76 */

    uint8_t *vx = udp + 8;
    vx[0] = 0x08;                           /* I flag: the VNI is valid. */
    put_be32(vx + 4, vni << 8);
}

struct wl_opts {
    uint64_t packets;           /* Measured packets per run. */
    uint64_t warmup_ns;         /* Simulated warm-up. */
    int runs;
    uint64_t seed;
    uint32_t n_events;
    uint32_t per_prefix;        /* Events per /24 prefix. */
    uint32_t flows;             /* Active flows. */
    double arrival_ns;          /* Mean new-flow inter-arrival. */
    double rate_mpps;
    uint64_t epoch_ns;
    int batch;
    uint32_t burst;             /* Consecutive packets per flow. */
    uint64_t budget_ns;         /* Sweep step budget. */
    uint32_t table_size;
    uint32_t idle_epochs;
    uint32_t scrub_per_step;
    bool phase1_only;
    bool tcp;                   /* TCP frames (sequence advancing) instead
                                 * of UDP. */
    bool state_vars;            /* One event of each prefix uses every
                                 * variable that needs per-flow state. */
    bool plain_vars;            /* The same event shape over variables
                                 * that need no state (the control). */
    uint32_t vxlan;             /* --vxlan: VNIs the flows spread over,
                                 * every frame wrapped (0: plain
                                 * frames). */
    bool vxlan_port;            /* The monitor decapsulates UDP port 4789
                                 * (--vxlan or --vxlan-port-only). */
    bool underlay;              /* One more event, on the tunnels' outer
                                 * flows (--underlay). */
    uint32_t switch_lines;      /* --switch-lines: lines read per frame
                                 * from the switch's ring (0: none). */
    uint64_t switch_ring;       /* --switch-ring: its size in bytes. */
    bool instr;
};

/* The 8 events of a prefix: three statistics (packets, volume, max TTL),
 * four at 5-tuple and four at /24 granularity, thresholds spread around
 * the per-interval values of this traffic (about 500 packets and 9 KB per
 * flow).  Their interval is one epoch. */
static const struct wl_template {
    const char *agg;
    const char *group;
    unsigned int lo, span;      /* Threshold in [lo, lo + span). */
} wl_templates[] = {
    { "count()", "5tuple", 200, 600 },
    { "sum(volume)", "5tuple", 4000, 12000 },
    { "max(ttl)", "5tuple", 32, 64 },
    { "count()", "nw_dst/24", 200, 1200 },
    { "sum(volume)", "nw_dst/24", 4000, 24000 },
    { "max(ttl)", "nw_dst/24", 32, 64 },
    { "count()", "nw_dst/24", 400, 1600 },
    { "sum(volume)", "5tuple", 6000, 8000 },
};

/* --switch-lines: the switch's own memory traffic, which takes the caches
 * from the monitor's tables inside Open vSwitch.  Before each batch,
 * outside the measured time, 'switch_lines' lines are read for each frame
 * from the next buffer of a ring of 'switch_ring' bytes in 2 KiB buffers,
 * as DPDK's pcap port (bench-ovs.sh's traffic source) copies each frame
 * out of an mbuf of its own, its header line and its data line: 2 lines.
 * The ring is in huge pages, as DPDK's mbufs are.  The sum of the bytes
 * read goes to a sink the compiler must keep. */
#define WL_SWITCH_BUF 2048
static volatile uint64_t wl_switch_sink;

struct wl_switch {
    struct tpm_huge_region region;
    uint8_t *ring;
    size_t n_bufs, next;
};

static void
wl_switch_init(struct wl_switch *sw, const struct wl_opts *o)
{
    memset(sw, 0, sizeof *sw);
    if (o->switch_lines) {
        sw->n_bufs = o->switch_ring / WL_SWITCH_BUF;
        if (tpm_huge_alloc(&sw->region, sw->n_bufs * WL_SWITCH_BUF,
                           "the switch's ring")) {
            cli_die("--switch-ring: out of memory");
        }
        sw->ring = sw->region.base;     /* Zeroed and faulted in. */
    }
}

static void
wl_switch_reads(struct wl_switch *sw, int n, uint32_t lines)
{
    uint64_t sum = 0;
    for (int k = 0; k < n; k++) {
        const uint8_t *buf = sw->ring + sw->next * WL_SWITCH_BUF;
        for (uint32_t l = 0; l < lines; l++) {
            sum += buf[l * CACHE_LINE_SIZE];
        }
        sw->next = sw->next + 1 < sw->n_bufs ? sw->next + 1 : 0;
    }
    wl_switch_sink += sum;
}

struct wl_flow {
    uint8_t frame[WL_VXLAN_HLEN + FRAME_CAPLEN]; /* --vxlan: the outer
                                 * headers, then the inner frame; else the
                                 * frame alone. */
    uint32_t seq;               /* --tcp: next sequence number. */
};

struct wl_result {
    double p1_cycles;           /* Phase 1, per packet, whole run. */
    double p1_cycles_clean;     /* The same over epochs not preempted. */
    double p1_ns_clean;
    double adv_cycles;          /* tpm_advance(), per packet. */
    double sweep_us_p50;        /* Sweep time per epoch, over epochs not
                                 * preempted. */
    double sweep_us_p99;
    double sweep_us_p99_all;    /* Over all epochs. */
    double sweep_us_max_all;
    double epochs;              /* Whole epochs measured. */
    double preempted;           /* Of which preempted. */
    double util;
    double unfinished;
    double forced;
    double sweeps;
    double triggers;            /* Trigger instances at the end. */
    double flows_live;
    double new_flows;
    double matches_per_flow;
    double sweep_items;         /* Flow-list items visited per sweep. */
    double sweep_skipped;       /* Quiet instances skipped per sweep. */
    double reports;
    double evictions;
    double inserts;             /* Flow-table insertions: new flows, and
                                 * flows that lost their entry. */
    double reuses;              /* Of which into a stale or dead entry. */
    uint64_t tun_decapsulated;  /* Frames parsed as their inner flow. */
    uint64_t not_parsed;        /* Frames not parsed (not monitored). */
    uint64_t tenants;           /* Tenant slots taken at the end. */
    uint64_t batch_packets;     /* Through tpm_process_batch(), all. */
    uint64_t measured_packets;
};

static uint32_t
wl_prefix_addr(uint32_t p)
{
    return 10u << 24 | (p & 0xffff) << 8;     /* 10.x.y.0/24 */
}

/* TCP frames: 20-byte header, ACK, 6 bytes of payload (60 bytes). */
#define WL_TCP_PAYLOAD (FRAME_CAPLEN - 14 - 20 - 20)

/* The offset of the inner frame in a flow's 'frame' (--vxlan: after the
 * outer headers), and the bytes of every frame before it. */
static size_t
wl_outer_len(const struct wl_opts *o)
{
    return o->vxlan ? WL_VXLAN_HLEN : 0;
}

/* The VNI of the flow in slot 'slot' of 'o->flows' with --vxlan: the
 * slots in o->vxlan blocks of consecutive ones, one VNI each, so that the
 * round robin over the slots meets a new VNI o->vxlan times per round
 * (every packet if there are as many VNIs as flows). */
static uint32_t
wl_flow_vni(const struct wl_opts *o, uint32_t slot)
{
    return WL_VXLAN_VNI0 + (uint32_t) ((uint64_t) slot * o->vxlan / o->flows);
}

/* Puts a new flow into slot 'slot' of 'flows': its frame, inside its
 * VXLAN headers with --vxlan (which draw nothing from 'r', so that the
 * inner flows are those of plain frames). */
static void
wl_new_flow(struct wl_flow *flows, uint32_t slot, struct rng *r,
            uint32_t n_prefixes, const struct wl_opts *o)
{
    struct wl_flow *f = &flows[slot];
    uint8_t *frame = f->frame + wl_outer_len(o);

    uint32_t dst = wl_prefix_addr(rng_below(r, n_prefixes))
                   | (1 + rng_below(r, 254));
    uint32_t src = 0xac100000u | rng_below(r, 1u << 20);   /* 172.16/12 */
    uint16_t sport = 1024 + rng_below(r, 64512);
    uint16_t dport = 1 + rng_below(r, 65535);
    uint8_t ttl = 32 + rng_below(r, 64);
    frame_build(frame, src, dst, sport, dport, ttl);
    if (o->tcp) {
        uint8_t *ip = frame + 14, *th = ip + 20;
        ip[9] = 6;
        f->seq = (uint32_t) rng_below(r, UINT32_MAX);
        memset(th, 0, 20);
        put_be16(th, sport);
        put_be16(th + 2, dport);
        put_be32(th + 8, (uint32_t) rng_below(r, UINT32_MAX));
        th[12] = 5 << 4;
        th[13] = 0x10;          /* ACK. */
        put_be16(th + 14, 1024);
    }
    if (o->vxlan) {
        vxlan_wrap(f->frame, 0xc000 | (sport & 0x3fff),
                   wl_flow_vni(o, slot));
    }
}

/* --tcp: stamps the next sequence number into flow 'f''s frame, whose
 * inner frame starts at 'off'. */
static void
wl_tcp_next(struct wl_flow *f, size_t off)
{
    put_be32(f->frame + off + 14 + 20 + 4, f->seq);
    f->seq += WL_TCP_PAYLOAD;
}

static void
wl_install(struct tpm *tpm, const struct wl_opts *o, uint32_t n_prefixes,
           struct rng *r)
{
    char text[320], pred[128], name[32], iv[32];

    tpm_time_format(o->epoch_ns, iv, sizeof iv);
    for (uint32_t p = 0; p < n_prefixes; p++) {
        uint32_t a = wl_prefix_addr(p);
        for (uint32_t j = 0; j < o->per_prefix; j++) {
            const struct wl_template *t
                = &wl_templates[j % ARRAY_SIZE(wl_templates)];
            uint32_t id = p * o->per_prefix + j;
            const char *group = t->group;
            if ((o->state_vars || o->plain_vars) && j == o->per_prefix - 1) {
                /* Five per-flow summaries of variables that need
                 * per-flow state (with volume and TTL, 7: a flow's
                 * maximum; the monitor computes all seven such variables
                 * for every packet of a flow with state, whichever are
                 * summarised), or the same five summaries of variables
                 * that need none; a threshold no flow reaches. */
                snprintf(pred, sizeof pred, o->state_vars
                         ? "sum(is_lost) + max(rtt) + seq - ack + dup "
                           "> 1e15"
                         : "sum(ecn) + max(bytes) + ttl - volume + "
                           "packets > 1e15");
                group = "5tuple";
            } else {
                snprintf(pred, sizeof pred, "%s > %u", t->agg,
                         t->lo + rng_below(r, t->span));
            }
            snprintf(name, sizeof name, "e%u", id);
            snprintf(text, sizeof text,
                     "filter=%s,nw_dst=%u.%u.%u.0/24 predicate=%s "
                     "group=%s interval=%s", o->tcp ? "tcp" : "udp",
                     a >> 24, (a >> 16) & 0xff, (a >> 8) & 0xff, pred,
                     group, iv);

            struct tpm_event *ev;
            char *error = tpm_event_parse(name, text, &ev);
            if (error) {
                cli_die("%s: %s", text, error);
            }
            error = tpm_event_add(tpm, ev, id);
            if (error) {
                cli_die("%s: %s", text, error);
            }
        }
    }
}

struct wl_epoch {
    uint64_t sweep;             /* Cycles in sweep steps and in the
                                 * tpm_advance() that entered the
                                 * epoch. */
    uint64_t p1;                /* Cycles in tpm_process_batch(). */
    uint64_t packets;
    bool preempted;             /* The process was descheduled. */
};

/* Returns the number of times the process was preempted so far. */
static long
involuntary_switches(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) ? 0 : ru.ru_nivcsw;
}

static void
wl_drain_reports(struct tpm *tpm, uint64_t *n)
{
    struct tpm_report rep;
    while (tpm_pop_report(tpm, &rep)) {
        free(rep.error);
        (*n)++;
    }
}

static void
wl_run(const struct wl_opts *o, uint64_t seed, struct wl_result *res)
{
    uint32_t n_prefixes = o->n_events / o->per_prefix;
    struct rng r = { seed };
    struct tpm_params p;
    char *error;

    tpm_params_init(&p);
    p.epoch_ns = o->epoch_ns;
    p.flow_table_size = o->table_size;
    p.sweep_budget_ns = o->budget_ns;
    p.idle_epochs = o->idle_epochs;
    p.scrub_per_step = o->scrub_per_step;
    p.max_events = MAX(p.max_events, o->n_events + o->underlay);
    struct tpm *tpm = tpm_create(&p, &error);
    if (!tpm) {
        cli_die("tpm_create: %s", error);
    }
    if (o->vxlan_port) {
        struct tpm_tunnel_ports tun;
        tpm_tunnel_ports_init(&tun);
        tpm_tunnel_ports_add(&tun, TPM_VXLAN_PORT, TPM_TUN_VXLAN);
        tpm_set_tunnel_ports(tpm, &tun);
    }
    if (o->underlay) {
        struct tpm_event *ev;
        char *perr = tpm_event_parse("underlay", "filter=udp,tp_dst=4789,"
                                     "underlay predicate=sum(bytes) > 1 "
                                     "group=5tuple", &ev);
        if (perr || (perr = tpm_event_add(tpm, ev, o->n_events))) {
            cli_die("underlay event: %s", perr);
        }
    }
    if (!o->phase1_only) {
        wl_install(tpm, o, n_prefixes, &r);
    } else {
        /* One event that no flow matches: the monitor does the whole
         * per-packet work of the flow table (with no event at all it only
         * counts packets). */
        struct tpm_event *ev;
        char *perr = tpm_event_parse("none", "filter=ip,nw_dst=192.0.2.0/24 "
                                     "predicate=count() > 1", &ev);
        if (perr || (perr = tpm_event_add(tpm, ev, 0))) {
            cli_die("phase-1-only event: %s", perr);
        }
    }

    struct wl_flow *flows = aligned_alloc(CACHE_LINE_SIZE,
                                          o->flows * sizeof *flows);
    if (!flows) {
        cli_die("out of memory for %u flows", o->flows);
    }
    for (uint32_t i = 0; i < o->flows; i++) {
        wl_new_flow(flows, i, &r, n_prefixes, o);
    }
    const size_t outer = wl_outer_len(o);

    const double pkt_ns = 1000.0 / o->rate_mpps;
    const uint64_t t0 = 1000ULL * 1000 * 1000 * 1000;   /* 1000 s. */
    const uint64_t warm = (uint64_t) (o->warmup_ns / pkt_ns) / o->batch
                          * o->batch;
    const uint64_t total = warm + o->packets;
    const uint64_t n_epochs = (uint64_t) (o->packets * pkt_ns / o->epoch_ns)
                              + 2;
    struct wl_epoch *ep = xcalloc(n_epochs, sizeof *ep);
    uint64_t first_epoch = 0, cur_epoch = UINT64_MAX;
    long nivcsw = 0;
    double next_arrival = rng_exp(&r, o->arrival_ns);
    uint64_t p1 = 0, adv = 0, sweep = 0, new_flows = 0, n_reports = 0;
    uint32_t rr = 0, in_burst = 0;
    struct tpm_stats st0;
    struct tpm_frame frames[TPM_BATCH_MAX];

    memset(&st0, 0, sizeof st0);
    struct wl_switch sw;
    wl_switch_init(&sw, o);
    for (uint64_t i = 0; i < total; i += o->batch) {
        bool measuring = i >= warm;
        double t = i * pkt_ns;
        uint64_t now = t0 + (uint64_t) t;

        if (i == warm) {
            tpm_get_stats(tpm, &st0);
            first_epoch = now / o->epoch_ns;
            new_flows = 0;
        }
        bool new_epoch = now / o->epoch_ns != cur_epoch;
        if (measuring && !o->instr && new_epoch) {
            /* A new epoch: was the one that ended preempted? */
            long csw = involuntary_switches();
            if (cur_epoch != UINT64_MAX && csw != nivcsw
                && cur_epoch - first_epoch < n_epochs) {
                ep[cur_epoch - first_epoch].preempted = true;
            }
            nivcsw = csw;
            cur_epoch = now / o->epoch_ns;
        }

        /* New flows replace random active ones. */
        while (next_arrival <= t) {
            uint32_t slot = rng_below(&r, o->flows);
            wl_new_flow(flows, slot, &r, n_prefixes, o);
            next_arrival += rng_exp(&r, o->arrival_ns);
            new_flows++;
        }

        /* Round robin over the active flows, 'burst' packets each. */
        int n = (int) MIN((uint64_t) o->batch, total - i);
        for (int k = 0; k < n; k++) {
            if (o->tcp) {
                wl_tcp_next(&flows[rr], outer);
            }
            frames[k].data = flows[rr].frame;
            frames[k].caplen = FRAME_CAPLEN + outer;
            frames[k].wirelen = FRAME_WIRELEN + outer;
            if (++in_burst >= o->burst) {
                in_burst = 0;
                rr = rr + 1 < o->flows ? rr + 1 : 0;
            }
        }

        if (sw.ring) {
            wl_switch_reads(&sw, n, o->switch_lines);
        }
        if (o->instr) {
            tpm_advance(tpm, now);
            tpm_process_batch(tpm, frames, n);
            if (tpm_sweep_pending(tpm)) {
                tpm_sweep_step(tpm, o->budget_ns);
            }
        } else {
            uint64_t c0 = tpm_rdtsc();
            tpm_advance(tpm, now);
            uint64_t c1 = tpm_rdtsc();
            tpm_process_batch(tpm, frames, n);
            uint64_t c2 = tpm_rdtsc();
            uint64_t c3 = c2;
            if (tpm_sweep_pending(tpm)) {
                tpm_sweep_step(tpm, o->budget_ns);
                c3 = tpm_rdtsc();
            }
            if (measuring) {
                adv += c1 - c0;
                p1 += c2 - c1;
                sweep += c3 - c2;
                uint64_t e = now / o->epoch_ns - first_epoch;
                if (e < n_epochs) {
                    /* The tpm_advance() call that enters an epoch counts
                     * as sweep time: it starts, abandons or completes
                     * sweeps.  The others only compare the epoch. */
                    ep[e].sweep += c3 - c2;
                    if (new_epoch) {
                        ep[e].sweep += c1 - c0;
                    }
                    ep[e].p1 += c2 - c1;
                    ep[e].packets += n;
                }
            }
        }
        wl_drain_reports(tpm, &n_reports);
    }

    struct tpm_stats st;
    tpm_get_stats(tpm, &st);

    memset(res, 0, sizeof *res);
    res->batch_packets = total;
    res->measured_packets = o->packets;
    res->p1_cycles = (double) p1 / o->packets;
    res->adv_cycles = (double) adv / o->packets;

    /* Whole epochs only: the last one is cut short by the end of the
     * run. */
    uint64_t whole = (uint64_t) (o->packets * pkt_ns / o->epoch_ns);
    whole = MIN(whole, n_epochs);
    double *all = xmalloc((whole + 1) * sizeof *all);
    double *clean = xmalloc((whole + 1) * sizeof *clean);
    uint64_t clean_p1 = 0, clean_pkts = 0;
    int n_clean = 0;
    for (uint64_t e = 0; e < whole; e++) {
        all[e] = tsc_to_ns(ep[e].sweep) / 1000.0;
        if (!ep[e].preempted) {
            clean[n_clean++] = all[e];
            clean_p1 += ep[e].p1;
            clean_pkts += ep[e].packets;
        }
    }
    res->epochs = whole;
    res->preempted = whole - n_clean;
    res->sweep_us_p50 = median(clean, n_clean);
    res->sweep_us_p99 = quantile(clean, n_clean, 0.99);
    res->sweep_us_p99_all = quantile(all, (int) whole, 0.99);
    res->sweep_us_max_all = quantile(all, (int) whole, 1.0);
    res->p1_cycles_clean = clean_pkts ? (double) clean_p1 / clean_pkts : NAN;
    res->p1_ns_clean = tsc_to_ns(res->p1_cycles_clean);
    free(all);
    free(clean);

    double busy = tsc_to_ns((double) (p1 + adv + sweep));
    res->util = busy / (o->packets * pkt_ns);
    res->unfinished = st.sweeps_unfinished - st0.sweeps_unfinished;
    res->forced = st.sweeps_forced - st0.sweeps_forced;
    res->sweeps = st.sweeps_done - st0.sweeps_done;
    res->triggers = st.triggers;
    res->flows_live = st.flows_live;
    res->new_flows = new_flows;
    uint64_t inserted = st.flow_inserts - st0.flow_inserts;
    res->matches_per_flow = inserted
                            ? (double) (st.matches - st0.matches) / inserted
                            : 0;
    res->sweep_items = res->sweeps
                       ? (st.sweep_flows - st0.sweep_flows) / res->sweeps
                       : 0;
    res->sweep_skipped = res->sweeps
                         ? (st.sweep_skipped - st0.sweep_skipped)
                           / res->sweeps
                         : 0;
    res->reports = st.reports - st0.reports;
    res->evictions = st.flow_evictions - st0.flow_evictions;
    res->inserts = (double) inserted;
    res->reuses = st.flow_reuses - st0.flow_reuses;
    res->tun_decapsulated = st.parse.tun_decapsulated;
    res->not_parsed = st.not_parsed;
    res->tenants = st.tenants;
    if (o->vxlan && res->tun_decapsulated != total) {
        tprintf("warning: %"PRIu64" of %"PRIu64" frames decapsulated\n",
                res->tun_decapsulated, total);
    }
    if (st.reports_dropped || st.match_overflow || st.summary_overflow
        || st.children_dropped || st.chunks_exhausted) {
        tprintf("warning: losses: reports_dropped=%"PRIu64" "
                "match_overflow=%"PRIu64" summary_overflow=%"PRIu64" "
                "children_dropped=%"PRIu64" chunks_exhausted=%"PRIu64"\n",
                st.reports_dropped, st.match_overflow, st.summary_overflow,
                st.children_dropped, st.chunks_exhausted);
    }

    free(ep);
    free(flows);
    tpm_huge_free(&sw.region);
    tpm_destroy(tpm);
}

void
wl_usage(void)
{
    printf("tpm-bench workload [OPTIONS]\n"
           "  The Trumpet section 7.2 workload in memory.\n"
           "  --packets N        measured packets per run (20M)\n"
           "  --warmup TIME      simulated warm-up before measuring (1s)\n"
           "  --runs N           runs, each with its own seed (5)\n"
           "  --seed N           seed of the first run (1)\n"
           "  --events N         installed events (4096)\n"
           "  --per-prefix N     events per nw_dst/24 prefix, i.e. events "
           "per packet (8)\n"
           "  --flows N          active flows (300)\n"
           "  --arrival TIME     mean new-flow inter-arrival, simulated "
           "(1ms)\n"
           "  --rate MPPS        simulated packet rate (14.88)\n"
           "  --epoch TIME       epoch length (10ms)\n"
           "  --batch N          frames per tpm_process_batch() (32)\n"
           "  --burst N          consecutive packets of each flow, as TCP\n"
           "                     segmentation offload sends them (1)\n"
           "  --budget TIME      sweep step budget (10us; 0: unbounded)\n"
           "  --flow-table-size N  flow table entries (65536)\n"
           "  --idle-epochs N    epochs before an idle flow is freed "
           "(500, libtpm's default)\n"
           "  --scrub-per-step N flow slots scrubbed per sweep step (256, "
           "libtpm's default)\n"
           "  --phase1-only      one event that no flow matches: the flow\n"
           "                     table alone\n"
           "  --tcp              TCP frames (sequence numbers advancing, "
           "ACK set)\n"
           "                     instead of UDP\n"
           "  --state-vars       with --tcp: the last event of each prefix "
           "uses every\n"
           "                     variable that needs per-flow state (rwnd "
           "is_lost\n"
           "                     is_burst rtt seq ack dup), so every flow "
           "keeps it\n"
           "  --plain-vars       the control for --state-vars: the same "
           "summaries\n"
           "                     over variables that need no state\n"
           "  --vxlan N          every frame inside outer Ethernet, IPv4, "
           "UDP (port 4789)\n"
           "                     and VXLAN headers (+50 bytes), the "
           "monitor decapsulating\n"
           "                     port 4789: the same inner flows, spread "
           "over N VNIs\n"
           "                     (5001...) in blocks of consecutive flows "
           "(N = --flows:\n"
           "                     one VNI per flow)\n"
           "  --vxlan-port-only  the monitor decapsulates port 4789, the "
           "frames stay\n"
           "                     plain (the cost of the port test)\n"
           "  --underlay         one more event, on the tunnels' outer "
           "flows (filter\n"
           "                     udp,tp_dst=4789,underlay): each "
           "tunnelled frame counted\n"
           "                     in both views\n"
           "  --switch-lines N   the switch's own memory traffic, as inside "
           "Open vSwitch:\n"
           "                     before each batch (not timed), N cache "
           "lines read for\n"
           "                     each frame from the next 2 KiB buffer of "
           "a ring, as\n"
           "                     DPDK's pcap port copies a frame out of its "
           "mbuf (2)\n"
           "                     (0: none, the default)\n"
           "  --switch-ring SIZE that ring's size (256MiB)\n"
           "  --instr            fixed seed and packet count (1M), no "
           "timing: for\n"
           "                     valgrind --tool=callgrind "
           "--toggle-collect=tpm_process_batch\n"
           "  --json             JSON lines on stdout, table on stderr\n");
}

static void
wl_print_header(const struct wl_opts *o)
{
    char a[32], e[32], b[32], w[32];
    uint32_t n_prefixes = o->n_events / o->per_prefix;

    tprintf("workload: %u events (%u nw_dst/24 prefixes x %u), %u active "
            "flows, new flow every %s (mean, exponential), burst %u\n",
            o->phase1_only ? 0 : o->n_events, n_prefixes, o->per_prefix,
            o->flows,
            tpm_time_format((uint64_t) o->arrival_ns, a, sizeof a),
            o->burst);
    tprintf("          64-byte %s frames at %.2f Mpps simulated (%.1f "
            "ns/packet), epoch %s, batch %d, sweep budget %s\n",
            o->tcp ? "TCP" : "UDP", o->rate_mpps, 1000.0 / o->rate_mpps,
            tpm_time_format(o->epoch_ns, e, sizeof e), o->batch,
            tpm_time_format(o->budget_ns, b, sizeof b));
    if (o->vxlan) {
        tprintf("          each inside VXLAN (UDP port 4789, %d-byte frames "
                "on the wire), %u VNI(s) from %u, monitor decapsulating "
                "port 4789\n", FRAME_WIRELEN + WL_VXLAN_HLEN, o->vxlan,
                WL_VXLAN_VNI0);
    } else if (o->vxlan_port) {
        tprintf("          plain frames, monitor decapsulating UDP port "
                "4789\n");
    }
    if (o->underlay) {
        tprintf("          and an event on the tunnels' outer flows\n");
    }
    if (o->switch_lines) {
        char r[32];
        tprintf("          the switch's traffic: %u line(s) a frame read "
                "from a ring of %s\n", o->switch_lines,
                cli_format_bytes(o->switch_ring, r, sizeof r));
    }
    tprintf("          warm-up %s simulated, then %"PRIu64" packets, "
            "%d run(s)%s%s\n",
            tpm_time_format(o->warmup_ns, w, sizeof w), o->packets, o->runs,
            o->phase1_only ? "; PHASE 1 ONLY (no events)" : "",
            o->state_vars ? "; per-flow state variables on every flow"
            : o->plain_vars ? "; the same summaries without state" : "");
}

static void
wl_json(const char *run, uint64_t seed, const struct wl_result *r,
        const struct wl_opts *o)
{
    struct jline j;
    jl_begin(&j, "workload");
    jl_str(&j, "run", run);
    jl_num(&j, "seed", seed);
    jl_num(&j, "events", o->phase1_only ? 0 : o->n_events);
    jl_num(&j, "flows", o->flows);
    jl_str(&j, "frames", o->tcp ? "tcp" : "udp");
    jl_num(&j, "state_vars", o->state_vars);
    jl_num(&j, "plain_vars", o->plain_vars);
    jl_num(&j, "vxlan", o->vxlan);
    jl_num(&j, "vxlan_port", o->vxlan_port);
    jl_num(&j, "underlay", o->underlay);
    jl_num(&j, "switch_lines", o->switch_lines);
    jl_num(&j, "packets", o->packets);
    jl_num(&j, "rate_mpps", o->rate_mpps);
    jl_num(&j, "p1_cycles_per_pkt", r->p1_cycles_clean);
    jl_num(&j, "p1_ns_per_pkt", r->p1_ns_clean);
    jl_num(&j, "p1_cycles_per_pkt_all_epochs", r->p1_cycles);
    jl_num(&j, "advance_cycles_per_pkt", r->adv_cycles);
    jl_num(&j, "sweep_us_per_epoch_p50", r->sweep_us_p50);
    jl_num(&j, "sweep_us_per_epoch_p99", r->sweep_us_p99);
    jl_num(&j, "sweep_us_per_epoch_p99_all_epochs", r->sweep_us_p99_all);
    jl_num(&j, "sweep_us_per_epoch_max_all_epochs", r->sweep_us_max_all);
    jl_num(&j, "epochs", r->epochs);
    jl_num(&j, "epochs_preempted", r->preempted);
    jl_num(&j, "sweeps_unfinished", r->unfinished);
    jl_num(&j, "sweeps_forced", r->forced);
    jl_num(&j, "utilisation", r->util);
    jl_num(&j, "triggers", r->triggers);
    jl_num(&j, "flows_live", r->flows_live);
    jl_num(&j, "matches_per_new_flow", r->matches_per_flow);
    jl_num(&j, "flow_inserts", r->inserts);
    jl_num(&j, "flow_reuses", r->reuses);
    jl_num(&j, "sweep_items_per_sweep", r->sweep_items);
    jl_num(&j, "sweep_skipped_per_sweep", r->sweep_skipped);
    jl_num(&j, "reports", r->reports);
    jl_num(&j, "tsc_mhz", tpm_tsc_per_us());
    jl_end(&j);
}

static void
wl_row(const char *label, const struct wl_result *r)
{
    tprintf("%-7s %7.1f %7.1f %6.1f %7.1f %7.1f %7.1f %7.0f %5.0f %5.0f "
            "%6.3f %4.0f/%-4.0f %7.0f %6.0f %7.0f\n",
            label, r->p1_cycles_clean, r->p1_cycles, r->p1_ns_clean,
            r->sweep_us_p50, r->sweep_us_p99, r->sweep_us_p99_all,
            r->sweep_us_max_all, r->unfinished, r->forced, r->util,
            r->preempted, r->epochs, r->triggers, r->flows_live,
            r->sweep_items);
}

static void
wl_table_header(void)
{
    tprintf("\n%-7s %7s %7s %6s %7s %7s %7s %7s %5s %5s %6s %9s %7s %6s "
            "%7s\n",
            "run", "p1", "p1 all", "p1", "sweep", "sweep", "p99 all",
            "max all", "unfin", "forcd", "util", "preempted", "trigger",
            "flows", "items/");
    tprintf("%-7s %7s %7s %6s %7s %7s %7s %7s %5s %5s %6s %9s %7s %6s "
            "%7s\n",
            "", "cyc/pkt", "cyc/pkt", "ns/pkt", "p50 us", "p99 us",
            "us", "us", "", "", "", "epochs", "insts", "live", "sweep");
}

enum {
    WL_OPT_PACKETS = 256, WL_OPT_WARMUP, WL_OPT_RUNS, WL_OPT_SEED,
    WL_OPT_EVENTS, WL_OPT_PER_PREFIX, WL_OPT_FLOWS, WL_OPT_ARRIVAL,
    WL_OPT_RATE, WL_OPT_EPOCH, WL_OPT_BATCH, WL_OPT_BURST, WL_OPT_BUDGET,
    WL_OPT_TABLE, WL_OPT_IDLE, WL_OPT_SCRUB, WL_OPT_P1, WL_OPT_TCP,
    WL_OPT_STATE_VARS, WL_OPT_PLAIN_VARS, WL_OPT_VXLAN, WL_OPT_VXLAN_PORT,
    WL_OPT_UNDERLAY, WL_OPT_SWITCH_LINES, WL_OPT_SWITCH_RING,
    WL_OPT_INSTR, WL_OPT_JSON,
};

static const struct option wl_long_options[] = {
    { "packets", required_argument, NULL, WL_OPT_PACKETS },
    { "warmup", required_argument, NULL, WL_OPT_WARMUP },
    { "runs", required_argument, NULL, WL_OPT_RUNS },
    { "seed", required_argument, NULL, WL_OPT_SEED },
    { "events", required_argument, NULL, WL_OPT_EVENTS },
    { "per-prefix", required_argument, NULL, WL_OPT_PER_PREFIX },
    { "flows", required_argument, NULL, WL_OPT_FLOWS },
    { "arrival", required_argument, NULL, WL_OPT_ARRIVAL },
    { "rate", required_argument, NULL, WL_OPT_RATE },
    { "epoch", required_argument, NULL, WL_OPT_EPOCH },
    { "batch", required_argument, NULL, WL_OPT_BATCH },
    { "burst", required_argument, NULL, WL_OPT_BURST },
    { "budget", required_argument, NULL, WL_OPT_BUDGET },
    { "flow-table-size", required_argument, NULL, WL_OPT_TABLE },
    { "idle-epochs", required_argument, NULL, WL_OPT_IDLE },
    { "scrub-per-step", required_argument, NULL, WL_OPT_SCRUB },
    { "phase1-only", no_argument, NULL, WL_OPT_P1 },
    { "tcp", no_argument, NULL, WL_OPT_TCP },
    { "state-vars", no_argument, NULL, WL_OPT_STATE_VARS },
    { "plain-vars", no_argument, NULL, WL_OPT_PLAIN_VARS },
    { "vxlan", required_argument, NULL, WL_OPT_VXLAN },
    { "vxlan-port-only", no_argument, NULL, WL_OPT_VXLAN_PORT },
    { "underlay", no_argument, NULL, WL_OPT_UNDERLAY },
    { "switch-lines", required_argument, NULL, WL_OPT_SWITCH_LINES },
    { "switch-ring", required_argument, NULL, WL_OPT_SWITCH_RING },
    { "instr", no_argument, NULL, WL_OPT_INSTR },
    { "json", no_argument, NULL, WL_OPT_JSON },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

/* Checks the options 'o' of tpm-bench workload against each other and
 * applies the defaults that depend on others ('packets_set': --packets
 * given). */
static void
wl_check_options__(struct wl_opts *o, bool packets_set)
{
    if (o->n_events % o->per_prefix || o->n_events / o->per_prefix > 65536) {
        cli_die("--events must be a multiple of --per-prefix, with at most "
            "65536 prefixes");
    }
    if ((o->state_vars || o->plain_vars)
        && (!o->tcp || o->phase1_only || (o->state_vars && o->plain_vars))) {
        cli_die("--state-vars or --plain-vars (one of them) needs --tcp and "
            "events (not --phase1-only)");
    }
    if (o->vxlan > o->flows) {
        cli_die("--vxlan: at most --flows VNIs (%u)", o->flows);
    }
    if (o->vxlan) {
        o->vxlan_port = true;
    }
    if (o->instr) {
        o->runs = 1;
        if (!packets_set) {
            o->packets = 1000 * 1000;
        }
    }
    o->packets = ROUND_UP(o->packets, (uint64_t) o->batch);
}

/* Reads the command line of tpm-bench workload, 'argc' and 'argv' from the
 * subcommand's name on, into 'o'; exits on an error or after --help. */
static void
wl_parse_options(int argc, char *argv[], struct wl_opts *o)
{
    *o = (struct wl_opts) {
        .packets = 20 * 1000 * 1000,
        .warmup_ns = 1000ULL * 1000 * 1000,
        .runs = 5,
        .seed = 1,
        .n_events = 4096,
        .per_prefix = 8,
        .flows = 300,
        .arrival_ns = 1000 * 1000,
        .rate_mpps = 14.88,
        .epoch_ns = 10 * 1000 * 1000,
        .batch = 32,
        .burst = 1,
        .budget_ns = 10 * 1000,
        .table_size = 65536,
        .idle_epochs = 500,
        .scrub_per_step = 256,
        .switch_ring = 256 << 20,
    };
    bool packets_set = false;

    struct cli_parser parser;
    cli_parser_init(&parser, argc, argv, "h", wl_long_options);
    for (;;) {
        int c = cli_parser_next(&parser);
        if (c == -1) {
            break;
        }
        switch (c) {
        case WL_OPT_PACKETS:
            o->packets = parse_count("packets", optarg, 1, 1ULL << 40);
            packets_set = true;
            break;
        case WL_OPT_WARMUP:
            o->warmup_ns = cli_time(parser.name, optarg, true);
            break;
        case WL_OPT_RUNS:
            o->runs = parse_count("runs", optarg, 1, 1000);
            break;
        case WL_OPT_SEED:
            o->seed = parse_count("seed", optarg, 0, UINT64_MAX >> 12);
            break;
        case WL_OPT_EVENTS:
            o->n_events = parse_count("events", optarg, 1, 1u << 20);
            break;
        case WL_OPT_PER_PREFIX:
            o->per_prefix = parse_count("per-prefix", optarg, 1, 64);
            break;
        case WL_OPT_FLOWS:
            o->flows = parse_count("flows", optarg, 1, 1u << 24);
            break;
        case WL_OPT_ARRIVAL:
            o->arrival_ns = cli_time(parser.name, optarg, true);
            if (!o->arrival_ns) {
                cli_die("--arrival must be positive");
            }
            break;
        case WL_OPT_RATE:
            o->rate_mpps = parse_double("rate", optarg, 0.001, 1000);
            break;
        case WL_OPT_EPOCH:
            o->epoch_ns = cli_time(parser.name, optarg, true);
            break;
        case WL_OPT_BATCH:
            o->batch = parse_count("batch", optarg, 1, TPM_BATCH_MAX);
            break;
        case WL_OPT_BURST:
            o->burst = parse_count("burst", optarg, 1, 1 << 20);
            break;
        case WL_OPT_BUDGET:
            o->budget_ns = cli_time(parser.name, optarg, true);
            break;
        case WL_OPT_TABLE:
            o->table_size = parse_count("flow-table-size", optarg, 64,
                                       1u << 28);
            break;
        case WL_OPT_IDLE:
            o->idle_epochs = parse_count("idle-epochs", optarg, 2, 1u << 30);
            break;
        case WL_OPT_SCRUB:
            o->scrub_per_step = parse_count("scrub-per-step", optarg, 1,
                                           1u << 20);
            break;
        case WL_OPT_P1:
            o->phase1_only = true;
            break;
        case WL_OPT_TCP:
            o->tcp = true;
            break;
        case WL_OPT_STATE_VARS:
            o->state_vars = true;
            break;
        case WL_OPT_PLAIN_VARS:
            o->plain_vars = true;
            break;
        case WL_OPT_VXLAN:
            /* At most libtpm's default tenant slots. */
            o->vxlan = parse_count("vxlan", optarg, 1, 4096);
            break;
        case WL_OPT_VXLAN_PORT:
            o->vxlan_port = true;
            break;
        case WL_OPT_UNDERLAY:
            o->underlay = true;
            break;
        case WL_OPT_SWITCH_LINES:
            o->switch_lines = parse_count("switch-lines", optarg, 0,
                                          WL_SWITCH_BUF / CACHE_LINE_SIZE);
            break;
        case WL_OPT_SWITCH_RING:
            o->switch_ring = cli_bytes(parser.name, optarg, WL_SWITCH_BUF);
            break;
        case WL_OPT_INSTR:
            o->instr = true;
            break;
        case WL_OPT_JSON:
            bench_json = true;
            break;
        case 'h':
            wl_usage();
            exit(EXIT_SUCCESS);
        default:
            cli_die("workload: try --help");
        }
    }
    if (optind < argc) {
        cli_die("workload: unexpected argument '%s'", argv[optind]);
    }
    wl_check_options__(o, packets_set);
}

int
cmd_workload(int argc, char *argv[])
{
    struct wl_opts o;

    wl_parse_options(argc, argv, &o);
    bench_tout = bench_json ? stderr : stdout;

    print_machine();
    wl_print_header(&o);

    if (o.instr) {
        struct wl_result r;
        wl_run(&o, o.seed, &r);
        tprintf("instr: %"PRIu64" packets passed through "
                "tpm_process_batch() (warm-up %"PRIu64" + measured "
                "%"PRIu64"): instructions/packet = Ir / %"PRIu64"\n",
                r.batch_packets, r.batch_packets - r.measured_packets,
                r.measured_packets, r.batch_packets);
        tprintf("       %.0f trigger instances; %"PRIu64" frames "
                "decapsulated, %"PRIu64" not parsed, %"PRIu64" tenant(s)\n",
                r.triggers, r.tun_decapsulated, r.not_parsed, r.tenants);
        struct jline j;
        jl_begin(&j, "workload-instr");
        jl_num(&j, "seed", o.seed);
        jl_num(&j, "batch_packets", r.batch_packets);
        jl_num(&j, "measured_packets", r.measured_packets);
        jl_num(&j, "triggers", r.triggers);
        jl_num(&j, "vxlan", o.vxlan);
        jl_num(&j, "vxlan_port", o.vxlan_port);
        jl_num(&j, "tun_decapsulated", r.tun_decapsulated);
        jl_num(&j, "not_parsed", r.not_parsed);
        jl_num(&j, "tenants", r.tenants);
        jl_end(&j);
        print_hugepage_note();
        return 0;
    }

    struct wl_result *res = xcalloc(o.runs, sizeof *res);
    wl_table_header();
    for (int i = 0; i < o.runs; i++) {
        char label[16];
        wl_run(&o, o.seed + i, &res[i]);
        snprintf(label, sizeof label, "%d", i + 1);
        wl_row(label, &res[i]);
        wl_json(label, o.seed + i, &res[i], &o);
    }

    /* Median of each metric separately. */
    struct wl_result med;
    double *v = xmalloc(o.runs * sizeof *v);
    memset(&med, 0, sizeof med);
#define WL_MEDIAN(FIELD)                                \
    for (int i = 0; i < o.runs; i++) {                  \
        v[i] = res[i].FIELD;                            \
    }                                                   \
    med.FIELD = median(v, o.runs);
    WL_MEDIAN(p1_cycles);
    WL_MEDIAN(p1_cycles_clean);
    WL_MEDIAN(p1_ns_clean);
    WL_MEDIAN(adv_cycles);
    WL_MEDIAN(sweep_us_p50);
    WL_MEDIAN(sweep_us_p99);
    WL_MEDIAN(sweep_us_p99_all);
    WL_MEDIAN(sweep_us_max_all);
    WL_MEDIAN(epochs);
    WL_MEDIAN(preempted);
    WL_MEDIAN(util);
    WL_MEDIAN(unfinished);
    WL_MEDIAN(forced);
    WL_MEDIAN(sweeps);
    WL_MEDIAN(triggers);
    WL_MEDIAN(flows_live);
    WL_MEDIAN(new_flows);
    WL_MEDIAN(matches_per_flow);
    WL_MEDIAN(sweep_items);
    WL_MEDIAN(sweep_skipped);
    WL_MEDIAN(reports);
    WL_MEDIAN(evictions);
    WL_MEDIAN(inserts);
    WL_MEDIAN(reuses);
#undef WL_MEDIAN
    free(v);

    wl_row("median", &med);
    tprintf("%-7s %7s %7s %6s %7s %7s %7s %7s %5s %5s %6s\n", "target",
            "<=60", "", "", "", "<=100", "", "", "0", "", "<1");
    tprintf("\n(p1 and sweep columns: epochs in which the process was not "
            "preempted, per getrusage();\n 'all' columns: every epoch.  "
            "Sweep time per epoch: tpm_sweep_step() calls and the\n "
            "tpm_advance() call that enters the epoch.)\n");
    tprintf("\nmedian: phase 1 %.1f cycles/packet (%.1f ns; tpm_advance "
            "%.2f more), sweep %.1f us/epoch (p99 %.1f), util %.3f of a "
            "core at %.2f Mpps\n",
            med.p1_cycles_clean, med.p1_ns_clean, med.adv_cycles,
            med.sweep_us_p50, med.sweep_us_p99, med.util, o.rate_mpps);
    tprintf("        %.0f new flows, %.0f flow-table inserts (%.0f into a "
            "stale or dead entry), %.2f matches per insert, %.0f "
            "reports, %.0f flow evictions, %.0f sweeps per run\n",
            med.new_flows, med.inserts, med.reuses, med.matches_per_flow,
            med.reports, med.evictions, med.sweeps);
    tprintf("verdict: phase 1 %s (<= 60 cycles/packet), sweep %s (<= 100 "
            "us/epoch p99), unfinished %s (0), utilisation %s (< 1)\n",
            med.p1_cycles_clean <= 60 ? "MET" : "MISSED",
            o.phase1_only ? "n/a" : med.sweep_us_p99 <= 100 ? "MET"
                                                             : "MISSED",
            med.unfinished == 0 ? "MET" : "MISSED",
            med.util < 1 ? "MET" : "MISSED");
    wl_json("median", o.seed, &med, &o);
    free(res);
    print_hugepage_note();
    return 0;
}
