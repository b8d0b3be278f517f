/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tpm-bench: in-memory benchmarks of libtpm (no NIC, no OVS).
 *
 *   tpm-bench workload   The Trumpet paper's section 7.2 workload: 4096
 *                        events, each packet matching 8 of them, 300 active
 *                        flows with exponential arrivals, burst size 1,
 *                        64-byte frames at 14.88 Mpps of simulated time, 10
 *                        ms epochs.  Measures phase 1 (tpm_process_batch())
 *                        in cycles per packet, the sweep per epoch, and the
 *                        share of a core both need to keep up.
 *   tpm-bench match      Cost of matching a new flow against the trigger
 *                        index (tpm/trig-index.h), which should not depend
 *                        on the number of triggers and should grow
 *                        linearly with the number of patterns.
 *   tpm-bench table      The SOSR'18 comparison: find-or-insert a 5-tuple
 *                        and update a 64-byte counter block in the flow
 *                        table (linear probing) and in a bucketized cuckoo
 *                        table (tpm/bench/cuckoo.h).
 *
 * Every subcommand prints a human-readable table; with --json it prints
 * one JSON object per result line on stdout and the table on stderr.
 * Timings use the TSC (lib/clock.h) and report the median over --runs runs
 * with different seeds.  --instr runs a fixed amount of work with no
 * timing, for instruction counts under callgrind (docs/benchmarks.md).
 *
 * The benchmark runs on one thread.  It is meant to be run on an otherwise
 * idle core; on a shared machine, compare medians of side-by-side runs.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cli.h"
#include "clock.h"
#include "cuckoo.h"
#include "event.h"
#include "flow-table.h"
#include "packet.h"
#include "tpm.h"
#include "trig-index.h"
#include "util.h"

/* For functions that callgrind's --toggle-collect must find by name: not
 * inlined, and not cloned into "name.isra.0" by GCC. */
#if defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noinline, noclone))
#endif

/* Output.  The table goes to 'tout': stdout, or stderr with --json. */
static FILE *tout;
static bool json;

static void tprintf(const char *format, ...)
    __attribute__((format(printf, 1, 2)));

static void
tprintf(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vfprintf(tout, format, args);
    va_end(args);
}

/* One JSON object on one line of stdout. */
struct jline {
    char buf[4096];
    size_t len;
};

static void jl_add(struct jline *, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

static void
jl_add(struct jline *j, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    if (j->len < sizeof j->buf) {
        int n = vsnprintf(j->buf + j->len, sizeof j->buf - j->len, format,
                          args);
        j->len += n > 0 ? (size_t) n : 0;
    }
    va_end(args);
}

static void
jl_begin(struct jline *j, const char *bench)
{
    j->len = 0;
    jl_add(j, "{\"bench\":\"%s\"", bench);
}

static void
jl_str(struct jline *j, const char *key, const char *value)
{
    jl_add(j, ",\"%s\":\"%s\"", key, value);
}

static void
jl_num(struct jline *j, const char *key, double value)
{
    if (!isfinite(value)) {
        jl_add(j, ",\"%s\":null", key);
    } else if (value == floor(value) && fabs(value) < 1e15) {
        jl_add(j, ",\"%s\":%.0f", key, value);
    } else {
        jl_add(j, ",\"%s\":%.4g", key, value);
    }
}

static void
jl_end(struct jline *j)
{
    if (json) {
        printf("%s}\n", j->buf);
        fflush(stdout);
    }
}

/* Huge pages: libtpm warns once per region when it falls back to normal
 * pages.  Collect those warnings and say it once. */
static int n_hugepage_warnings;

static void
log_hook(enum tpm_log_level level, const char *message)
{
    if (level == TPM_LOG_WARN && strstr(message, "huge pages")) {
        n_hugepage_warnings++;
    } else {
        fprintf(stderr, "libtpm: %s\n", message);
    }
}

/* Random numbers: splitmix64, fast and good enough for traffic. */
struct rng {
    uint64_t s;
};

static inline uint64_t
rng_next(struct rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, n). */
static inline uint32_t
rng_below(struct rng *r, uint32_t n)
{
    return (uint32_t) (((rng_next(r) >> 32) * (uint64_t) n) >> 32);
}

/* Uniform in (0, 1]. */
static inline double
rng_unit(struct rng *r)
{
    return ((rng_next(r) >> 11) + 1) * (1.0 / 9007199254740992.0);
}

static inline double
rng_exp(struct rng *r, double mean)
{
    return -log(rng_unit(r)) * mean;
}

/* Statistics over runs or epochs. */
static int
cmp_double(const void *a_, const void *b_)
{
    double a = *(const double *) a_, b = *(const double *) b_;
    return a < b ? -1 : a > b;
}

/* Returns the 'q' quantile (nearest rank) of the 'n' values in 'v', which
 * it sorts.  NAN if 'n' is 0. */
static double
quantile(double *v, int n, double q)
{
    if (n <= 0) {
        return NAN;
    }
    qsort(v, n, sizeof *v, cmp_double);
    int rank = (int) ceil(q * n);
    return v[MIN(MAX(rank, 1), n) - 1];
}

/* Median: for an even count, the mean of the two middle values. */
static double
median(const double *v_, int n)
{
    if (n <= 0) {
        return NAN;
    }
    double *v = xmalloc(n * sizeof *v);
    memcpy(v, v_, n * sizeof *v);
    qsort(v, n, sizeof *v, cmp_double);
    double m = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    free(v);
    return m;
}

static double
tsc_to_ns(double cycles)
{
    return cycles * 1000.0 / tpm_tsc_per_us();
}

/* Option parsing helpers. */

/* Parses a count with an optional suffix: k M G (10^3...) or Ki Mi Gi
 * (2^10...). */
static uint64_t
parse_count(const char *opt, const char *s, uint64_t min, uint64_t max)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0) {
        cli_die("--%s: '%s' is not a count", opt, s);
    }
    static const struct {
        const char *suffix;
        double mult;
    } suffixes[] = {
        { "", 1 }, { "k", 1e3 }, { "K", 1e3 }, { "M", 1e6 }, { "G", 1e9 },
        { "Ki", 1024.0 }, { "Mi", 1048576.0 }, { "Gi", 1073741824.0 },
    };
    for (size_t i = 0; i < ARRAY_SIZE(suffixes); i++) {
        if (!strcmp(end, suffixes[i].suffix)) {
            double x = v * suffixes[i].mult;
            if (x != floor(x) || x < min || x > max) {
                cli_die("--%s: %s is out of range [%"PRIu64", %"PRIu64"]", opt,
                    s, min, max);
            }
            return (uint64_t) x;
        }
    }
    cli_die("--%s: '%s': unknown suffix (k M G Ki Mi Gi)", opt, s);
}

static double
parse_double(const char *opt, const char *s, double min, double max)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= min && v <= max)) {
        cli_die("--%s: '%s' is not a number in [%g, %g]", opt, s, min, max);
    }
    return v;
}

static uint32_t
pow2_ceil(uint64_t x)
{
    uint32_t p = 1;
    while (p < x && p < (1u << 31)) {
        p *= 2;
    }
    return p;
}

static void
print_machine(void)
{
    tprintf("TSC: %.1f MHz (%.3f cycles/ns); key hash: %s\n",
            tpm_tsc_per_us(), tpm_tsc_per_us() / 1000.0,
            tpm_key_hash_impl());
}

static void
print_hugepage_note(void)
{
    if (n_hugepage_warnings) {
        tprintf("\nnote: no 2 MB huge pages were available: libtpm put %d "
                "region(s) on normal pages\n      (its fallback, with "
                "MADV_HUGEPAGE advice)\n", n_hugepage_warnings);
        n_hugepage_warnings = 0;
    }
}

/* The flows of a workload: 5-tuples and their frames. */

#define FRAME_CAPLEN 60         /* 64-byte frame without its FCS. */
#define FRAME_WIRELEN 64

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

/* ======================================================================
 * tpm-bench workload
 * ====================================================================== */

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

struct wl_flow {
    uint8_t frame[64];
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
    double reports;
    double evictions;
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

static void
wl_new_flow(struct wl_flow *f, struct rng *r, uint32_t n_prefixes,
            bool tcp)
{
    uint32_t dst = wl_prefix_addr(rng_below(r, n_prefixes))
                   | (1 + rng_below(r, 254));
    uint32_t src = 0xac100000u | rng_below(r, 1u << 20);   /* 172.16/12 */
    uint16_t sport = 1024 + rng_below(r, 64512);
    uint16_t dport = 1 + rng_below(r, 65535);
    uint8_t ttl = 32 + rng_below(r, 64);
    frame_build(f->frame, src, dst, sport, dport, ttl);
    if (tcp) {
        uint8_t *ip = f->frame + 14, *th = ip + 20;
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
}

/* --tcp: stamps the next sequence number into flow 'f''s frame. */
static void
wl_tcp_next(struct wl_flow *f)
{
    put_be32(f->frame + 14 + 20 + 4, f->seq);
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
    p.max_events = MAX(p.max_events, o->n_events);
    struct tpm *tpm = tpm_create(&p, &error);
    if (!tpm) {
        cli_die("tpm_create: %s", error);
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
        wl_new_flow(&flows[i], &r, n_prefixes, o->tcp);
    }

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
            wl_new_flow(&flows[rng_below(&r, o->flows)], &r, n_prefixes,
                        o->tcp);
            next_arrival += rng_exp(&r, o->arrival_ns);
            new_flows++;
        }

        /* Round robin over the active flows, 'burst' packets each. */
        int n = (int) MIN((uint64_t) o->batch, total - i);
        for (int k = 0; k < n; k++) {
            if (o->tcp) {
                wl_tcp_next(&flows[rr]);
            }
            frames[k].data = flows[rr].frame;
            frames[k].caplen = FRAME_CAPLEN;
            frames[k].wirelen = FRAME_WIRELEN;
            if (++in_burst >= o->burst) {
                in_burst = 0;
                rr = rr + 1 < o->flows ? rr + 1 : 0;
            }
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
    res->reports = st.reports - st0.reports;
    res->evictions = st.flow_evictions - st0.flow_evictions;
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
    tpm_destroy(tpm);
}

static void
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
    jl_num(&j, "sweep_items_per_sweep", r->sweep_items);
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
    WL_OPT_STATE_VARS, WL_OPT_PLAIN_VARS, WL_OPT_INSTR, WL_OPT_JSON,
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
        case WL_OPT_INSTR:
            o->instr = true;
            break;
        case WL_OPT_JSON:
            json = true;
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

static int
cmd_workload(int argc, char *argv[])
{
    struct wl_opts o;

    wl_parse_options(argc, argv, &o);
    tout = json ? stderr : stdout;

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
        struct jline j;
        jl_begin(&j, "workload-instr");
        jl_num(&j, "seed", o.seed);
        jl_num(&j, "batch_packets", r.batch_packets);
        jl_num(&j, "measured_packets", r.measured_packets);
        jl_num(&j, "triggers", r.triggers);
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
    WL_MEDIAN(reports);
    WL_MEDIAN(evictions);
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
    tprintf("        %.0f new flows, %.2f matches per new flow, %.0f "
            "reports, %.0f flow evictions, %.0f sweeps per run\n",
            med.new_flows, med.matches_per_flow, med.reports,
            med.evictions, med.sweeps);
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

/* ======================================================================
 * tpm-bench match
 * ====================================================================== */

#define MATCH_MAX_LIST 16

struct match_opts {
    uint32_t n_keys;            /* Random keys per measurement. */
    int runs;
    uint64_t seed;
    uint32_t triggers[MATCH_MAX_LIST];  /* Series 1: one pattern. */
    int n_triggers;
    uint32_t patterns[MATCH_MAX_LIST];  /* Series 2: 'pattern_triggers'
                                         * triggers over N patterns. */
    int n_patterns;
    uint32_t pattern_triggers;
    uint32_t tries[MATCH_MAX_LIST];     /* Series 3: linear vs tries over
                                         * 'pattern_triggers' triggers. */
    int n_tries;
    uint32_t same_addr[MATCH_MAX_LIST]; /* Series 4: as 3, patterns that
                                         * differ only in ports. */
    int n_same_addr;
    bool run_linear;            /* Series 3 and 4 run linear search, */
    bool run_tries;             /* ...and the tries. */
    bool instr;
};

/* A trigger's filter: udp, nw_dst=addr/plen, tp_dst=port/port_mask if
 * port >= 0, tp_src=sport/sport_mask if sport >= 0.  Host byte order. */
struct match_spec {
    uint32_t addr;
    int plen;
    int port;
    int sport;
    uint16_t port_mask;
    uint16_t sport_mask;
};

static uint32_t
plen_mask(int plen)
{
    return plen ? ~0u << (32 - plen) : 0;
}

/* Series 1: 'n' triggers with one pattern, udp,nw_dst=10.x.y.0/24,tp_dst. */
static struct match_spec *
match_specs_one_pattern(uint32_t n)
{
    struct match_spec *s = xcalloc(n, sizeof *s);
    for (uint32_t t = 0; t < n; t++) {
        s[t].addr = 10u << 24 | t << 8;
        s[t].plen = 24;
        s[t].port = 1024 + (t & 15);
        s[t].port_mask = 0xffff;
        s[t].sport = -1;
    }
    return s;
}

/* Series 2: 'n' triggers spread over 'n_pat' patterns.  Pattern j masks
 * nw_dst with prefix length 16 + j % 16, and tp_dst too if j >= 16.  Its
 * triggers sit in their own /5 (j << 27), so that a key matches one
 * pattern's triggers at most. */
static struct match_spec *
match_specs_patterns(uint32_t n, uint32_t n_pat)
{
    struct match_spec *s = xcalloc(n, sizeof *s);
    uint32_t i = 0;
    for (uint32_t j = 0; j < n_pat; j++) {
        uint32_t count = n / n_pat + (j < n % n_pat);
        int plen = 16 + j % 16;
        uint64_t room = n_pat > 1 ? 1ull << (plen - 5) : 1ull << plen;
        if (count > room) {
            cli_die("%u triggers over %u patterns: too many for a /%d pattern",
                n, n_pat, plen);
        }
        for (uint32_t t = 0; t < count; t++, i++) {
            s[i].addr = j << 27 | t << (32 - plen);
            s[i].plen = plen;
            s[i].port = j >= 16 ? (int) (1024 + (t & 15)) : -1;
            s[i].port_mask = 0xffff;
            s[i].sport = -1;
        }
    }
    return s;
}

/* Bits that number 'n' regions. */
static int
region_bits(uint32_t n)
{
    return n > 1 ? 32 - __builtin_clz(n - 1) : 0;
}

/* Series 3: 'n' triggers spread over 'n_pat' (up to 64) patterns.
 * Pattern j masks nw_dst with prefix length 16 + j % 16 and, by j / 16,
 * nothing else, tp_dst, tp_src, or both.  Pattern j's triggers sit in
 * region j of the address space (as many regions as patterns, rounded up
 * to a power of two), so that a key matches one pattern's triggers at
 * most and the nw_dst trie tells the patterns apart. */
static struct match_spec *
match_specs_tries(uint32_t n, uint32_t n_pat)
{
    struct match_spec *s = xcalloc(n, sizeof *s);
    int bits = region_bits(n_pat);
    uint32_t i = 0;

    for (uint32_t j = 0; j < n_pat; j++) {
        uint32_t count = n / n_pat + (j < n % n_pat);
        int plen = 16 + j % 16;
        if (count > 1ull << (plen - bits)) {
            cli_die("%u triggers over %u patterns: too many for a /%d pattern",
                n, n_pat, plen);
        }
        for (uint32_t t = 0; t < count; t++, i++) {
            s[i].addr = (bits ? j << (32 - bits) : 0) | t << (32 - plen);
            s[i].plen = plen;
            s[i].port = j / 16 & 1 ? (int) (1024 + (t & 15)) : -1;
            s[i].port_mask = 0xffff;
            s[i].sport = j / 16 & 2 ? (int) (2048 + (t & 7)) : -1;
            s[i].sport_mask = 0xffff;
        }
    }
    return s;
}

/* Series 4, where the tries cannot help: 'n' triggers over 'n_pat' (up to
 * 64) patterns that all mask nw_dst with /24 and differ only in ports:
 * pattern j masks tp_dst with the top 16 - j % 16 bits and, by j / 16,
 * tp_src not at all, exactly, with the top 8 bits or with the top 12.
 * Every pattern has triggers on the same /24s (as many as each pattern
 * has triggers), so that every pattern is a candidate for every key
 * whose address is in one of them: with match_keys()' 'on_rules', all. */
static struct match_spec *
match_specs_same_addr(uint32_t n, uint32_t n_pat)
{
    static const uint16_t sport_masks[] = { 0, 0xffff, 0xff00, 0xfff0 };
    struct match_spec *s = xcalloc(n, sizeof *s);
    uint32_t i = 0;

    for (uint32_t j = 0; j < n_pat; j++) {
        uint32_t count = n / n_pat + (j < n % n_pat);
        uint16_t sport_mask = sport_masks[j / 16 % 4];
        for (uint32_t t = 0; t < count; t++, i++) {
            s[i].addr = 10u << 24 | t << 8;
            s[i].plen = 24;
            s[i].port = 1024 + (t & 15);
            s[i].port_mask = 0xffff << (j % 16);
            s[i].sport = sport_mask ? (int) (2048 + (t & 7)) : -1;
            s[i].sport_mask = sport_mask;
        }
    }
    return s;
}

/* Builds 'ti' from 'specs' through the event parser, as tpm_event_add()
 * would. */
static void
match_build(struct trig_index *ti, const struct match_spec *specs, uint32_t n)
{
    trig_index_init(ti);
    for (uint32_t i = 0; i < n; i++) {
        const struct match_spec *s = &specs[i];
        char text[200], port[32] = "", sport[32] = "";
        struct tpm_event *ev;

        if (s->port >= 0) {
            snprintf(port, sizeof port, ",tp_dst=%d/0x%x", s->port,
                     s->port_mask);
        }
        if (s->sport >= 0) {
            snprintf(sport, sizeof sport, ",tp_src=%d/0x%x", s->sport,
                     s->sport_mask);
        }
        snprintf(text, sizeof text,
                 "filter=udp,nw_dst=%u.%u.%u.%u/%d%s%s "
                 "predicate=count() > 0",
                 s->addr >> 24, (s->addr >> 16) & 0xff,
                 (s->addr >> 8) & 0xff, s->addr & 0xff, s->plen, port,
                 sport);
        char *error = tpm_event_parse("m", text, &ev);
        if (error) {
            cli_die("%s: %s", text, error);
        }
        if (i == 0 && (ev->filter.key.dst[0] != htonl(s->addr)
                       || ev->filter.mask.dst[0]
                          != htonl(plen_mask(s->plen)))) {
            cli_die("%s: parsed nw_dst is not %08x/%08x in network byte order",
                text, s->addr, plen_mask(s->plen));
        }
        trig_index_insert(ti, &ev->filter, i);
        tpm_event_destroy(ev);
    }
}

/* Fills 'keys' with random UDP/IPv4 keys, each matching a random trigger
 * of 'specs' with probability 1/2; the others are TCP and match none.
 * Their nw_dst is random, or with 'on_rules' in a random trigger's
 * prefix. */
static void
match_keys(struct tpm_key *keys, uint32_t n, const struct match_spec *specs,
           uint32_t n_specs, bool on_rules, struct rng *r)
{
    for (uint32_t i = 0; i < n; i++) {
        struct tpm_key *k = &keys[i];
        memset(k, 0, sizeof *k);
        k->ipver = 4;
        k->src[0] = htonl(0xac100000u | rng_below(r, 1u << 20));
        k->sport = 1024 + rng_below(r, 64512);
        if (rng_next(r) & 1) {
            const struct match_spec *s = &specs[rng_below(r, n_specs)];
            uint32_t host = (uint32_t) rng_next(r) & ~plen_mask(s->plen);
            k->proto = 17;
            k->dst[0] = htonl(s->addr | host);
            k->dport = s->port >= 0 ? (uint16_t) s->port
                                    : 1 + rng_below(r, 65535);
            if (s->sport >= 0) {
                k->sport = s->sport;
            }
        } else {
            k->proto = 6;
            k->dst[0] = htonl((uint32_t) rng_next(r));
            if (on_rules) {
                const struct match_spec *s = &specs[rng_below(r, n_specs)];
                uint32_t host = ntohl(k->dst[0]) & ~plen_mask(s->plen);
                k->dst[0] = htonl(s->addr | host);
            }
            k->dport = 1 + rng_below(r, 65535);
        }
    }
}

/* Matches every key.  Returns the number that matched something and adds
 * the number of trigger ids found to '*n_ids'. */
static NOINLINE uint64_t
match_run(const struct trig_index *ti, const struct tpm_key *keys,
          uint32_t n, uint64_t *n_ids)
{
    uint32_t ids[64];
    uint64_t hits = 0, total = 0;

    for (uint32_t i = 0; i < n; i++) {
        uint32_t m = trig_index_match(ti, &keys[i], ids, ARRAY_SIZE(ids));
        hits += m != 0;
        total += m;
    }
    *n_ids += total;
    return hits;
}

/* One configuration: an index, the specs it was built from, and the
 * search to measure.  Series 3 and 4 measure linear search and the tries
 * as two configurations on one index, one after the other in every run. */
struct match_cfg {
    const char *series;
    uint32_t triggers;
    uint32_t patterns;
    struct match_spec *specs;   /* Owned unless 'shared'. */
    struct trig_index *ti;      /* Owned unless 'shared'. */
    bool shared;                /* 'specs' and 'ti' belong to the previous
                                 * configuration. */
    bool linear;                /* trig_index_set_linear() argument. */
    bool on_rules;              /* match_keys() argument. */
    double *cycles;             /* Per run. */
    uint64_t hits;              /* Over all runs. */
    uint64_t n_ids;
    uint64_t n_keys;
};

struct match_result {
    double ns;                  /* Per match, median over runs. */
    double cycles;
    double hit_rate;
    double ids_per_key;
};

#define MATCH_CHUNK 65536       /* Keys per timed chunk. */

/* Runs every configuration once per run, side by side, each on fresh keys
 * from the run's seed.  A run's cost is the median over chunks of
 * MATCH_CHUNK keys, so that a preemption (this machine is shared) spoils
 * one chunk, not the run. */
static void
match_measure_all(const struct match_opts *o, struct match_cfg *cfgs,
                  int n_cfgs)
{
    struct tpm_key *keys = xmalloc((size_t) o->n_keys * sizeof *keys);
    int n_chunks = (o->n_keys + MATCH_CHUNK - 1) / MATCH_CHUNK;
    double *chunk = xcalloc(n_chunks, sizeof *chunk);

    for (int run = 0; run < o->runs; run++) {
        for (int i = 0; i < n_cfgs; i++) {
            struct match_cfg *cfg = &cfgs[i];
            struct rng r = { o->seed + run };
            uint64_t n_ids = 0, hits = 0;

            match_keys(keys, o->n_keys, cfg->specs, cfg->triggers,
                       cfg->on_rules, &r);
            trig_index_set_linear(cfg->ti, cfg->linear);
            if (o->instr) {
                cfg->hits += match_run(cfg->ti, keys, o->n_keys,
                                       &cfg->n_ids);
                cfg->n_keys += o->n_keys;
                continue;
            }
            match_run(cfg->ti, keys, o->n_keys, &n_ids);  /* Warm up. */
            for (int c = 0; c < n_chunks; c++) {
                uint32_t start = c * MATCH_CHUNK;
                uint32_t n = MIN(MATCH_CHUNK, o->n_keys - start);
                uint64_t c0 = tpm_rdtsc();
                hits += match_run(cfg->ti, keys + start, n, &cfg->n_ids);
                uint64_t c1 = tpm_rdtsc();
                chunk[c] = (double) (c1 - c0) / n;
            }
            cfg->cycles[run] = median(chunk, n_chunks);
            cfg->hits += hits;
            cfg->n_keys += o->n_keys;
        }
    }
    free(chunk);
    free(keys);
}

static void
match_result(const struct match_opts *o, const struct match_cfg *cfg,
             struct match_result *res)
{
    res->cycles = o->instr ? 0 : median(cfg->cycles, o->runs);
    res->ns = tsc_to_ns(res->cycles);
    res->hit_rate = (double) cfg->hits / cfg->n_keys;
    res->ids_per_key = (double) cfg->n_ids / cfg->n_keys;
}

static void
match_report(const struct match_opts *o, const char *series,
             uint32_t triggers, uint32_t patterns,
             const struct match_result *r, double ratio)
{
    struct jline j;
    tprintf("%-9s %9u %8u %9.1f %9.1f %6.1f %7.2f %7.2f\n", series,
            triggers, patterns, r->ns, r->cycles, 100 * r->hit_rate,
            r->ids_per_key, ratio);
    jl_begin(&j, "match");
    jl_str(&j, "series", series);
    jl_num(&j, "triggers", triggers);
    jl_num(&j, "patterns", patterns);
    jl_num(&j, "keys", o->n_keys);
    jl_num(&j, "runs", o->runs);
    jl_num(&j, "ns_per_match", r->ns);
    jl_num(&j, "cycles_per_match", r->cycles);
    jl_num(&j, "hit_rate", r->hit_rate);
    jl_num(&j, "ids_per_key", r->ids_per_key);
    jl_num(&j, "ratio_to_first", ratio);
    jl_end(&j);
}

static int
parse_list(const char *opt, const char *s, uint32_t *out, uint64_t min,
           uint64_t max)
{
    int n = 0;
    if (!strcmp(s, "none")) {
        return 0;
    }
    char *copy = xstrdup(s), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        if (n >= MATCH_MAX_LIST) {
            cli_die("--%s: at most %d values", opt, MATCH_MAX_LIST);
        }
        out[n++] = parse_count(opt, t, min, max);
    }
    free(copy);
    return n;
}

/* Prints and emits series 3 or 4's row for 'patterns': linear search
 * ('lin', NULL if not run) against the tries ('trie', NULL if not run),
 * same index, same keys. */
static void
match_compare_report(const struct match_opts *o, const char *series,
                     uint32_t triggers, uint32_t patterns,
                     const struct match_result *lin,
                     const struct match_result *trie)
{
    const struct match_result *any = lin ? lin : trie;
    double ratio = lin && trie ? trie->cycles / lin->cycles : NAN;
    struct jline j;

    tprintf("%-9s %9u %8u %8.1f %8.1f %8.1f %8.1f %6.2f %6.1f %7.2f\n",
            series, triggers, patterns, lin ? lin->ns : NAN,
            lin ? lin->cycles : NAN, trie ? trie->ns : NAN,
            trie ? trie->cycles : NAN, ratio, 100 * any->hit_rate,
            any->ids_per_key);
    jl_begin(&j, "match_compare");
    jl_str(&j, "series", series);
    jl_num(&j, "triggers", triggers);
    jl_num(&j, "patterns", patterns);
    jl_num(&j, "keys", o->n_keys);
    jl_num(&j, "runs", o->runs);
    if (lin) {
        jl_num(&j, "linear_ns_per_match", lin->ns);
        jl_num(&j, "linear_cycles_per_match", lin->cycles);
    }
    if (trie) {
        jl_num(&j, "tries_ns_per_match", trie->ns);
        jl_num(&j, "tries_cycles_per_match", trie->cycles);
    }
    jl_num(&j, "tries_to_linear", ratio);
    jl_num(&j, "hit_rate", any->hit_rate);
    jl_num(&j, "ids_per_key", any->ids_per_key);
    jl_end(&j);
}

static void
match_usage(void)
{
    printf("tpm-bench match [OPTIONS]\n"
           "  Trigger-index matching cost per new flow "
           "(trig_index_match()).\n"
           "  --triggers LIST    trigger counts with one pattern "
           "(16,256,4096,65536)\n"
           "  --patterns LIST    pattern counts (1,4,8,16,32; 'none' "
           "skips a series)\n"
           "  --tries LIST       pattern counts, linear search vs the "
           "tries\n"
           "                     (1,2,4,8,16,32,48,64; at most 64)\n"
           "  --same-addr LIST   the same where the tries cannot help: "
           "patterns\n"
           "                     differing only in ports "
           "(1,2,4,8,16,32,48,64)\n"
           "  --search WHICH     linear, tries or both (default) in "
           "--tries and\n"
           "                     --same-addr; the other series use the "
           "default (tries)\n"
           "  --pattern-triggers N  triggers spread over the patterns "
           "(4096)\n"
           "  --keys N           random keys per run, half matching "
           "(1Mi)\n"
           "  --runs N           runs, each with new keys (5)\n"
           "  --seed N           seed of the first run (1)\n"
           "  --instr            one pass, no timing: for valgrind "
           "--tool=callgrind\n"
           "                     --toggle-collect=match_run (give one "
           "configuration)\n"
           "  --json             JSON lines on stdout, table on stderr\n");
}

enum {
    MATCH_OPT_TRIGGERS = 256, MATCH_OPT_PATTERNS, MATCH_OPT_TRIES,
    MATCH_OPT_SAME_ADDR, MATCH_OPT_SEARCH, MATCH_OPT_PTRIG, MATCH_OPT_KEYS,
    MATCH_OPT_RUNS, MATCH_OPT_SEED, MATCH_OPT_INSTR, MATCH_OPT_JSON,
};

static const struct option match_long_options[] = {
    { "triggers", required_argument, NULL, MATCH_OPT_TRIGGERS },
    { "patterns", required_argument, NULL, MATCH_OPT_PATTERNS },
    { "tries", required_argument, NULL, MATCH_OPT_TRIES },
    { "same-addr", required_argument, NULL, MATCH_OPT_SAME_ADDR },
    { "search", required_argument, NULL, MATCH_OPT_SEARCH },
    { "pattern-triggers", required_argument, NULL, MATCH_OPT_PTRIG },
    { "keys", required_argument, NULL, MATCH_OPT_KEYS },
    { "runs", required_argument, NULL, MATCH_OPT_RUNS },
    { "seed", required_argument, NULL, MATCH_OPT_SEED },
    { "instr", no_argument, NULL, MATCH_OPT_INSTR },
    { "json", no_argument, NULL, MATCH_OPT_JSON },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

/* Checks the options 'o' of tpm-bench match against each other and
 * applies the defaults that depend on others. */
static void
match_check_options__(struct match_opts *o)
{
    if (o->instr) {
        o->runs = 1;
    }
}

/* Reads the command line of tpm-bench match, 'argc' and 'argv' from the
 * subcommand's name on, into 'o'; exits on an error or after --help. */
static void
match_parse_options(int argc, char *argv[], struct match_opts *o)
{
    *o = (struct match_opts) {
        .n_keys = 1u << 20,
        .runs = 5,
        .seed = 1,
        .triggers = { 16, 256, 4096, 65536 },
        .n_triggers = 4,
        .patterns = { 1, 4, 8, 16, 32 },
        .n_patterns = 5,
        .pattern_triggers = 4096,
        .tries = { 1, 2, 4, 8, 16, 32, 48, 64 },
        .n_tries = 8,
        .same_addr = { 1, 2, 4, 8, 16, 32, 48, 64 },
        .n_same_addr = 8,
        .run_linear = true,
        .run_tries = true,
    };

    struct cli_parser parser;
    cli_parser_init(&parser, argc, argv, "h", match_long_options);
    for (;;) {
        int c = cli_parser_next(&parser);
        if (c == -1) {
            break;
        }
        switch (c) {
        case MATCH_OPT_TRIGGERS:
            o->n_triggers = parse_list("triggers", optarg, o->triggers, 1,
                                      65536);
            break;
        case MATCH_OPT_PATTERNS:
            o->n_patterns = parse_list("patterns", optarg, o->patterns, 1,
                                      32);
            break;
        case MATCH_OPT_TRIES:
            o->n_tries = parse_list("tries", optarg, o->tries, 1, 64);
            break;
        case MATCH_OPT_SAME_ADDR:
            o->n_same_addr = parse_list("same-addr", optarg, o->same_addr, 1,
                                       64);
            break;
        case MATCH_OPT_SEARCH:
            if (!strcmp(optarg, "linear") || !strcmp(optarg, "tries")
                || !strcmp(optarg, "both")) {
                o->run_linear = strcmp(optarg, "tries") != 0;
                o->run_tries = strcmp(optarg, "linear") != 0;
            } else {
                cli_die("--search: '%s' is not linear, tries or both", optarg);
            }
            break;
        case MATCH_OPT_PTRIG:
            o->pattern_triggers = parse_count("pattern-triggers", optarg, 1,
                                             1u << 20);
            break;
        case MATCH_OPT_KEYS:
            o->n_keys = parse_count("keys", optarg, 1, 1u << 28);
            break;
        case MATCH_OPT_RUNS:
            o->runs = parse_count("runs", optarg, 1, 1000);
            break;
        case MATCH_OPT_SEED:
            o->seed = parse_count("seed", optarg, 0, UINT64_MAX >> 12);
            break;
        case MATCH_OPT_INSTR:
            o->instr = true;
            break;
        case MATCH_OPT_JSON:
            json = true;
            break;
        case 'h':
            match_usage();
            exit(EXIT_SUCCESS);
        default:
            cli_die("match: try --help");
        }
    }
    if (optind < argc) {
        cli_die("match: unexpected argument '%s'", argv[optind]);
    }
    match_check_options__(o);
}

/* Builds the 'n_cfgs' configurations of 'o': series 1 and 2 ('n_old' in
 * all) one per count, series 3 and 4 'per_cmp' per count. */
static struct match_cfg *
match_cfgs_create(const struct match_opts *o, int n_old, int per_cmp,
                  int n_cfgs)
{
    struct match_cfg *cfgs = xcalloc(n_cfgs, sizeof *cfgs);
    for (int i = 0; i < n_cfgs; i++) {
        struct match_cfg *cfg = &cfgs[i];
        if (i < o->n_triggers) {
            cfg->series = "triggers";
            cfg->triggers = o->triggers[i];
            cfg->patterns = 1;
            cfg->specs = match_specs_one_pattern(cfg->triggers);
        } else if (i < n_old) {
            cfg->series = "patterns";
            cfg->triggers = o->pattern_triggers;
            cfg->patterns = o->patterns[i - o->n_triggers];
            cfg->specs = match_specs_patterns(cfg->triggers, cfg->patterns);
        } else {
            int k = (i - n_old) / per_cmp;
            bool same = k >= o->n_tries;
            cfg->series = same ? "same-addr" : "tries";
            cfg->triggers = o->pattern_triggers;
            cfg->patterns = same ? o->same_addr[k - o->n_tries] : o->tries[k];
            cfg->on_rules = same;
            cfg->linear = o->run_linear && (i - n_old) % per_cmp == 0;
            if ((i - n_old) % per_cmp) {
                cfg->shared = true;
                cfg->specs = cfg[-1].specs;
                cfg->ti = cfg[-1].ti;
            } else {
                cfg->specs = (same ? match_specs_same_addr
                                   : match_specs_tries)(cfg->triggers,
                                                        cfg->patterns);
            }
        }
        if (!cfg->shared) {
            cfg->ti = xmalloc(sizeof *cfg->ti);
            match_build(cfg->ti, cfg->specs, cfg->triggers);
            if (cfg->ti->n_patterns != cfg->patterns) {
                cli_die("%s: %u patterns built, %u intended", cfg->series,
                    cfg->ti->n_patterns, cfg->patterns);
            }
        }
        cfg->cycles = xcalloc(o->runs, sizeof *cfg->cycles);
    }
    return cfgs;
}

static void
match_cfgs_destroy(struct match_cfg *cfgs, int n_cfgs)
{
    for (int i = 0; i < n_cfgs; i++) {
        if (!cfgs[i].shared) {
            trig_index_destroy(cfgs[i].ti);
            free(cfgs[i].ti);
            free(cfgs[i].specs);
        }
        free(cfgs[i].cycles);
    }
    free(cfgs);
}

static int
cmd_match(int argc, char *argv[])
{
    struct match_opts o;

    match_parse_options(argc, argv, &o);
    tout = json ? stderr : stdout;

    print_machine();
    tprintf("match: trig_index_match() on %u random keys per run (half "
            "match one trigger), median of %d run(s)\n"
            "       configurations side by side in each run; a run's cost "
            "is its median over chunks of %d keys\n",
            o.n_keys, o.runs, MATCH_CHUNK);

    /* Series 1 and 2 one configuration per count; 3 and 4 one or two. */
    int per_cmp = o.run_linear + o.run_tries;
    int n_old = o.n_triggers + o.n_patterns;
    int n_cfgs = n_old + per_cmp * (o.n_tries + o.n_same_addr);
    struct match_cfg *cfgs = match_cfgs_create(&o, n_old, per_cmp,
                                               n_cfgs);
    match_measure_all(&o, cfgs, n_cfgs);

    if (n_old) {
        tprintf("\n%-9s %9s %8s %9s %9s %6s %7s %7s\n", "series",
                "triggers", "patterns", "ns/match", "cyc/match", "hit%",
                "ids/key", "ratio");
    }
    double first = 0, last = 0;
    for (int i = 0; i < n_old; i++) {
        const struct match_cfg *cfg = &cfgs[i];
        struct match_result r;

        if (i == o.n_triggers) {
            tprintf("\n");
        }
        match_result(&o, cfg, &r);
        if (i == 0 || i == o.n_triggers) {
            first = r.cycles;
        }
        last = r.cycles;
        match_report(&o, cfg->series, cfg->triggers, cfg->patterns, &r,
                     first ? r.cycles / first : NAN);
        if (o.instr) {
            tprintf("instr: %"PRIu64" calls of trig_index_match() in "
                    "match_run()\n", cfg->n_keys);
        }
        if (i == o.n_triggers - 1 && o.n_triggers > 1 && !o.instr) {
            double ratio = last / first;
            tprintf("target: %u triggers within 1.2x of %u: %.2fx, %s\n",
                    o.triggers[o.n_triggers - 1], o.triggers[0], ratio,
                    ratio <= 1.2 ? "MET" : "MISSED");
        }
        if (i == n_old - 1 && o.n_patterns > 1 && !o.instr) {
            uint32_t p0 = o.patterns[0], p1 = o.patterns[o.n_patterns - 1];
            if (p1 > p0) {
                double slope = (last - first) / (p1 - p0);
                tprintf("cost per additional pattern: %.1f cycles (%.1f "
                        "ns), from %u to %u patterns\n", slope,
                        tsc_to_ns(slope), p0, p1);
            }
        }
    }

    if (n_cfgs > n_old) {
        tprintf("\nlinear: every pattern probed; tries: only the "
                "candidates of the nw_src and nw_dst tries\n"
                "%-9s %9s %8s %8s %8s %8s %8s %6s %6s %7s\n", "series",
                "triggers", "patterns", "lin ns", "lin cyc", "trie ns",
                "trie cyc", "t/l", "hit%", "ids/key");
    }
    struct match_result lin0 = { 0 }, trie0 = { 0 }, lin1, trie1;
    for (int i = n_old; i < n_cfgs; i += per_cmp) {
        const struct match_cfg *cfg = &cfgs[i];
        bool same = !strcmp(cfg->series, "same-addr");
        struct match_result lin = { 0 }, trie = { 0 };

        if (same && i > n_old && strcmp(cfg[-1].series, "same-addr")) {
            tprintf("\n");
        }
        match_result(&o, cfg, o.run_linear ? &lin : &trie);
        if (per_cmp == 2) {
            match_result(&o, &cfg[1], &trie);
        }
        match_compare_report(&o, cfg->series, cfg->triggers, cfg->patterns,
                             o.run_linear ? &lin : NULL,
                             o.run_tries ? &trie : NULL);
        if (o.instr) {
            tprintf("instr: %"PRIu64" calls of trig_index_match() in "
                    "match_run() per search\n", cfg->n_keys);
        }
        bool first_of = i == n_old || (same && strcmp(cfg[-1].series,
                                                      "same-addr"));
        bool last_of = i + per_cmp == n_cfgs
                       || (!same && !strcmp(cfg[per_cmp].series,
                                            "same-addr"));
        if (first_of) {
            lin0 = lin;
            trie0 = trie;
        }
        lin1 = lin;
        trie1 = trie;
        int n_series = same ? o.n_same_addr : o.n_tries;
        const uint32_t *counts = same ? o.same_addr : o.tries;
        if (last_of && !o.instr && n_series > 1
            && counts[n_series - 1] > counts[0]) {
            uint32_t dp = counts[n_series - 1] - counts[0];
            tprintf("cost per additional pattern, %u to %u:", counts[0],
                    counts[n_series - 1]);
            if (o.run_linear) {
                tprintf(" linear %.1f cycles", (lin1.cycles - lin0.cycles)
                                               / dp);
            }
            if (o.run_tries) {
                tprintf(" tries %.1f cycles", (trie1.cycles - trie0.cycles)
                                              / dp);
            }
            tprintf("\n");
        }
    }
    if (o.instr && n_cfgs > 1) {
        tprintf("instr: %d configurations ran: callgrind's count for "
                "match_run() is their sum (give one with --triggers N "
                "--patterns none --tries none --same-addr none, or "
                "--tries N --search linear|tries and the others none)\n",
                n_cfgs);
    }
    match_cfgs_destroy(cfgs, n_cfgs);
    return 0;
}

/* ======================================================================
 * tpm-bench table
 * ====================================================================== */

#define TBL_MAX_WS 8
#define TBL_BATCH_MAX 32
#define TBL_CHUNKS 10           /* Timed chunks per run. */

enum {
    TBL_BASELINE = 1 << 0,
    TBL_LINEAR = 1 << 1,
    TBL_CUCKOO = 1 << 2,
};

struct tbl_opts {
    uint64_t packets;           /* Measured per run and structure. */
    int runs;
    uint64_t seed;
    uint32_t ws[TBL_MAX_WS];    /* Working sets (active flows). */
    int n_ws;
    bool round_robin;           /* Else uniform random. */
    uint32_t probe_limit;
    uint32_t factor;            /* Table entries per active flow. */
    int batch;
    unsigned int which;         /* TBL_*. */
    bool instr;
};

/* The packet stream: flow 'idx[i]' of 'keys' for packet i, cycling. */
struct tbl_ctx {
    const struct tpm_key *keys;
    const uint32_t *idx;
    uint64_t n_idx;             /* A multiple of 'batch'. */
    int batch;
    uint64_t pos;               /* Next packet in 'idx'. */
    uint32_t tag;               /* Epoch tag (constant: one epoch). */
    uint64_t inserts;
    uint64_t failures;
};

/* The per-packet update, identical for both tables: the statistics line of
 * the epoch (lazily reset), packets, bytes and two summaries, sum(volume)
 * and max(ttl), as the workload's events keep. */
static inline void
tbl_update(uint32_t tags[2], struct tpm_flow_stats stats[2], uint32_t tag,
           const struct tpm_key *key)
{
    struct tpm_flow_stats *st = &stats[tag & 1];
    if (tags[tag & 1] != tag) {
        tags[tag & 1] = tag;
        st->packets = 0;
        st->bytes = 0;
    }
    bool first = !st->packets;
    double ttl = 32 + (key->sport & 63);
    st->packets++;
    st->bytes += FRAME_WIRELEN;
    st->slot[0] = first ? 18 : st->slot[0] + 18;
    st->slot[1] = first || ttl > st->slot[1] ? ttl : st->slot[1];
}

/* Gathers the keys of packets [pos, pos + n) and prefetches them, as
 * tpm_process_batch() prefetches frames. */
static inline void
tbl_gather(const struct tbl_ctx *ctx, uint64_t pos, int n,
           const struct tpm_key *keys[])
{
    for (int k = 0; k < n; k++) {
        keys[k] = &ctx->keys[ctx->idx[pos + k]];
        tpm_prefetch(keys[k]);
    }
}

/* Find-or-insert and update for a batch, in the flow table, with
 * tpm_process_batch()'s passes: hash and prefetch the home bucket and its
 * statistics line, then probe. */
static inline void
tbl_linear_batch(struct tbl_ctx *ctx, struct tpm_flow_table *ft,
                 const struct tpm_key *keys[], int n)
{
    uint32_t hash[TBL_BATCH_MAX];
    uint32_t tag = ctx->tag;

    for (int k = 0; k < n; k++) {
        hash[k] = tpm_key_hash(keys[k]);
        struct tpm_flow *b = tpm_flow_table_bucket(ft, hash[k]);
        tpm_prefetch(b);
        tpm_prefetch_write(&b->stats[tag & 1]);
    }
    for (int k = 0; k < n; k++) {
        struct tpm_flow *f = tpm_flow_table_find(ft, keys[k], hash[k]);
        if (OVS_UNLIKELY(!f)) {
            bool replaced;
            f = tpm_flow_table_insert(ft, keys[k], hash[k], tag, &replaced,
                                      NULL);
            ctx->inserts++;
        }
        tbl_update(f->tag, f->stats, tag, keys[k]);
    }
}

/* The same with the cuckoo table and its batched lookup. */
static inline void
tbl_cuckoo_batch(struct tbl_ctx *ctx, struct cuckoo *c,
                 const struct tpm_key *keys[], int n)
{
    struct cuckoo_hashes h[TBL_BATCH_MAX];
    struct cuckoo_entry *e[TBL_BATCH_MAX];
    uint32_t tag = ctx->tag;

    cuckoo_find_batch(c, keys, n, tag & 1, h, e);
    for (int k = 0; k < n; k++) {
        struct cuckoo_entry *f = e[k];
        if (OVS_UNLIKELY(!f)) {
            /* The same new flow may appear twice in a batch. */
            f = cuckoo_find(c, keys[k], h[k]);
            if (!f) {
                f = cuckoo_insert(c, keys[k], h[k]);
                if (!f) {
                    ctx->failures++;
                    continue;
                }
                ctx->inserts++;
            }
        }
        tbl_update(f->tag, f->stats, tag, keys[k]);
    }
}

/* The measured loops.  Not inlined, so that callgrind's --toggle-collect
 * can name each one. */
static NOINLINE uint64_t
table_run_baseline(struct tbl_ctx *ctx, uint64_t packets)
{
    const struct tpm_key *keys[TBL_BATCH_MAX];
    uint64_t sum = 0, pos = ctx->pos;

    for (uint64_t i = 0; i < packets; i += ctx->batch) {
        tbl_gather(ctx, pos, ctx->batch, keys);
        for (int k = 0; k < ctx->batch; k++) {
            sum += tpm_key_hash(keys[k]);
        }
        pos = pos + ctx->batch < ctx->n_idx ? pos + ctx->batch : 0;
    }
    ctx->pos = pos;
    return sum;
}

static NOINLINE uint64_t
table_run_linear(struct tbl_ctx *ctx, struct tpm_flow_table *ft,
                 uint64_t packets)
{
    const struct tpm_key *keys[TBL_BATCH_MAX];
    uint64_t pos = ctx->pos;

    for (uint64_t i = 0; i < packets; i += ctx->batch) {
        tbl_gather(ctx, pos, ctx->batch, keys);
        tbl_linear_batch(ctx, ft, keys, ctx->batch);
        pos = pos + ctx->batch < ctx->n_idx ? pos + ctx->batch : 0;
    }
    ctx->pos = pos;
    return pos;
}

static NOINLINE uint64_t
table_run_cuckoo(struct tbl_ctx *ctx, struct cuckoo *c, uint64_t packets)
{
    const struct tpm_key *keys[TBL_BATCH_MAX];
    uint64_t pos = ctx->pos;

    for (uint64_t i = 0; i < packets; i += ctx->batch) {
        tbl_gather(ctx, pos, ctx->batch, keys);
        tbl_cuckoo_batch(ctx, c, keys, ctx->batch);
        pos = pos + ctx->batch < ctx->n_idx ? pos + ctx->batch : 0;
    }
    ctx->pos = pos;
    return pos;
}

/* Inserts every flow once, in the order of 'perm' (a batch at a time
 * through the same find-or-insert path).  A random order keeps the cuckoo
 * table's entry array, allocated in insertion order, from matching the
 * round-robin packet order by accident. */
static NOINLINE void
table_fill_linear(struct tbl_ctx *ctx, struct tpm_flow_table *ft,
                  const uint32_t *perm, uint32_t n_keys)
{
    const struct tpm_key *keys[TBL_BATCH_MAX];
    for (uint32_t i = 0; i < n_keys; i += ctx->batch) {
        int n = (int) MIN((uint32_t) ctx->batch, n_keys - i);
        for (int k = 0; k < n; k++) {
            keys[k] = &ctx->keys[perm[i + k]];
        }
        tbl_linear_batch(ctx, ft, keys, n);
    }
}

static NOINLINE void
table_fill_cuckoo(struct tbl_ctx *ctx, struct cuckoo *c,
                  const uint32_t *perm, uint32_t n_keys)
{
    const struct tpm_key *keys[TBL_BATCH_MAX];
    for (uint32_t i = 0; i < n_keys; i += ctx->batch) {
        int n = (int) MIN((uint32_t) ctx->batch, n_keys - i);
        for (int k = 0; k < n; k++) {
            keys[k] = &ctx->keys[perm[i + k]];
        }
        tbl_cuckoo_batch(ctx, c, keys, n);
    }
}

/* Mean probe distance of the live entries of 'ft' from their home
 * slot. */
static double
linear_mean_displacement(const struct tpm_flow_table *ft)
{
    uint64_t sum = 0, n = 0;
    for (uint32_t i = 0; i <= ft->mask; i++) {
        const struct tpm_flow *f = &ft->flows[i];
        if (f->state == TPM_FLOW_LIVE || f->state == TPM_FLOW_PENDING) {
            sum += (i - f->hash) & ft->mask;
            n++;
        }
    }
    return n ? (double) sum / n : 0;
}

static void
tbl_keys(struct tpm_key *keys, uint32_t n, struct rng *r)
{
    for (uint32_t i = 0; i < n; i++) {
        struct tpm_key *k = &keys[i];
        memset(k, 0, sizeof *k);
        k->ipver = 4;
        k->proto = 17;
        k->src[0] = htonl(0x0a000000u | rng_below(r, 1u << 24));
        k->dst[0] = htonl(0xac100000u | rng_below(r, 1u << 20));
        k->sport = 1024 + rng_below(r, 64512);
        k->dport = 1 + rng_below(r, 65535);
    }
}

/* Per run and structure. */
struct tbl_sample {
    double cycles;              /* Per packet. */
    double insert_cycles;       /* Per insertion while filling. */
};

enum { TS_BASELINE, TS_LINEAR, TS_CUCKOO, TS_N };
static const char *const ts_names[TS_N] = { "baseline", "linear",
                                            "cuckoo" };

static void
tbl_json(const struct tbl_opts *o, uint32_t ws, uint32_t size,
         const char *run, int s, double cycles, double insert_cycles,
         double ratio)
{
    struct jline j;
    jl_begin(&j, "table");
    jl_str(&j, "run", run);
    jl_str(&j, "table", ts_names[s]);
    jl_num(&j, "flows", ws);
    jl_num(&j, "table_entries", size);
    jl_num(&j, "table_factor", o->factor);
    jl_str(&j, "order", o->round_robin ? "round-robin" : "random");
    jl_num(&j, "packets", o->packets);
    jl_num(&j, "cycles_per_pkt", cycles);
    jl_num(&j, "ns_per_pkt", tsc_to_ns(cycles));
    if (s != TS_BASELINE) {
        jl_num(&j, "insert_cycles", insert_cycles);
    }
    if (s == TS_CUCKOO) {
        jl_num(&j, "ratio_cuckoo_linear", ratio);
    }
    jl_end(&j);
}

static void
tbl_measure(const struct tbl_opts *o, uint32_t ws)
{
    uint32_t size = MAX(pow2_ceil((uint64_t) o->factor * ws), 64);
    struct tbl_sample (*samples)[TS_N] = xcalloc(o->runs, sizeof *samples);
    struct tpm_key *keys = xmalloc((size_t) ws * sizeof *keys);
    uint64_t n_idx = o->round_robin
                     ? (uint64_t) ws * MAX(1, (1u << 22) / ws)
                     : 1u << 22;
    n_idx = MIN(n_idx, ROUND_UP(o->packets, (uint64_t) o->batch));
    n_idx = ROUND_UP(n_idx, (uint64_t) o->batch);
    uint32_t *idx = xmalloc(n_idx * sizeof *idx);
    uint32_t *perm = xmalloc((size_t) ws * sizeof *perm);
    double disp = 0, kicks = 0, bfs = 0;
    uint64_t fill_evictions = 0, evictions = 0, failures = 0;

    /* A run's cost is its median over TBL_CHUNKS chunks, so that a
     * preemption (this machine is shared) spoils one chunk, not the run. */
    int n_chunks = o->instr ? 1 : TBL_CHUNKS;
    uint64_t chunk = ROUND_UP(o->packets / n_chunks, (uint64_t) o->batch);
    double chunk_cycles[TBL_CHUNKS];

    tprintf("\nflows %u, table %u entries (load %.2f), %s order, %"PRIu64
            " packets per run\n", ws, size, (double) ws / size,
            o->round_robin ? "round-robin" : "uniform random", o->packets);

    for (int run = 0; run < o->runs; run++) {
        struct rng r = { o->seed + run };
        tbl_keys(keys, ws, &r);
        for (uint64_t i = 0; i < n_idx; i++) {
            idx[i] = o->round_robin ? i % ws : rng_below(&r, ws);
        }
        for (uint32_t i = 0; i < ws; i++) {
            uint32_t j = rng_below(&r, i + 1);
            perm[i] = perm[j];
            perm[j] = i;
        }

        /* Alternate the order of the structures from run to run, so that
         * neither always runs first. */
        int order[TS_N] = { TS_BASELINE, TS_LINEAR, TS_CUCKOO };
        if (run % 2) {
            order[0] = TS_CUCKOO;
            order[2] = TS_BASELINE;
        }
        for (int oi = 0; oi < TS_N; oi++) {
            int s = order[oi];
            struct tbl_ctx ctx = {
                .keys = keys, .idx = idx, .n_idx = n_idx,
                .batch = o->batch, .tag = 2,
            };
            struct tbl_sample *smp = &samples[run][s];
            uint64_t c0, c1, c2;

            if (!(o->which & (1u << s))) {
                continue;
            }
            if (s == TS_BASELINE) {
                uint64_t sum = 0;
                for (int k = 0; k < n_chunks; k++) {
                    c0 = tpm_rdtsc();
                    sum += table_run_baseline(&ctx, chunk);
                    c1 = tpm_rdtsc();
                    chunk_cycles[k] = (double) (c1 - c0) / chunk;
                }
                smp->cycles = median(chunk_cycles, n_chunks);
                if (sum == 42) {
                    tprintf(" ");     /* Keep 'sum' alive. */
                }
            } else if (s == TS_LINEAR) {
                struct tpm_flow_table ft;
                int error = tpm_flow_table_init(&ft, size, o->probe_limit);
                if (error) {
                    cli_die("flow table of %u entries: %s", size,
                        strerror(error));
                }
                c0 = tpm_rdtsc();
                table_fill_linear(&ctx, &ft, perm, ws);
                c1 = tpm_rdtsc();
                uint64_t ins = ctx.inserts;
                smp->insert_cycles = ins ? (double) (c1 - c0) / ins : 0;
                fill_evictions += ft.stats.evictions;
                evictions -= ft.stats.evictions;
                for (int k = 0; k < n_chunks; k++) {
                    c1 = tpm_rdtsc();
                    table_run_linear(&ctx, &ft, chunk);
                    c2 = tpm_rdtsc();
                    chunk_cycles[k] = (double) (c2 - c1) / chunk;
                }
                smp->cycles = median(chunk_cycles, n_chunks);
                disp = linear_mean_displacement(&ft);
                evictions += ft.stats.evictions;
                tpm_flow_table_destroy(&ft);
            } else {
                struct cuckoo c;
                int error = cuckoo_init(&c, size);
                if (error) {
                    cli_die("cuckoo table of %u entries: %s", size,
                        strerror(error));
                }
                c0 = tpm_rdtsc();
                table_fill_cuckoo(&ctx, &c, perm, ws);
                c1 = tpm_rdtsc();
                uint64_t ins = ctx.inserts;
                smp->insert_cycles = ins ? (double) (c1 - c0) / ins : 0;
                for (int k = 0; k < n_chunks; k++) {
                    c1 = tpm_rdtsc();
                    table_run_cuckoo(&ctx, &c, chunk);
                    c2 = tpm_rdtsc();
                    chunk_cycles[k] = (double) (c2 - c1) / chunk;
                }
                smp->cycles = median(chunk_cycles, n_chunks);
                kicks = c.stats.inserts
                        ? (double) c.stats.kicks / c.stats.inserts : 0;
                bfs = c.stats.inserts
                      ? (double) c.stats.bfs_buckets / c.stats.inserts : 0;
                failures += ctx.failures;
                cuckoo_destroy(&c);
            }
            if (o->instr && s == TS_BASELINE) {
                tprintf("instr: baseline: %"PRIu64" packets in "
                        "table_run_baseline()\n", o->packets);
            } else if (o->instr) {
                tprintf("instr: %s: %"PRIu64" packets in table_run_%s() "
                        "(after %u insertions in table_fill_%s())\n",
                        ts_names[s], o->packets, ts_names[s], ws,
                        ts_names[s]);
            }
        }
    }
    if (o->instr) {
        goto out;
    }

    tprintf("%-8s %-9s %9s %8s %10s %8s\n", "run", "table", "cyc/pkt",
            "ns/pkt", "insert cyc", "cuck/lin");
    double med[TS_N], med_ins[TS_N];
    double *v = xmalloc(o->runs * sizeof *v);
    double *w = xmalloc(o->runs * sizeof *w);
    for (int s = 0; s < TS_N; s++) {
        if (!(o->which & (1u << s))) {
            continue;
        }
        for (int run = 0; run < o->runs; run++) {
            char label[16];
            double ratio = samples[run][TS_CUCKOO].cycles
                           / samples[run][TS_LINEAR].cycles;
            v[run] = samples[run][s].cycles;
            w[run] = samples[run][s].insert_cycles;
            snprintf(label, sizeof label, "%d", run + 1);
            tbl_json(o, ws, size, label, s, v[run], w[run], ratio);
            if (s == TS_CUCKOO && (o->which & TBL_LINEAR)) {
                tprintf("%-8s %-9s %9.1f %8.2f %10.0f %8.2f\n", label,
                        ts_names[s], v[run], tsc_to_ns(v[run]), w[run],
                        ratio);
            } else {
                tprintf("%-8s %-9s %9.1f %8.2f %10.0f\n", label,
                        ts_names[s], v[run], tsc_to_ns(v[run]), w[run]);
            }
        }
        med[s] = median(v, o->runs);
        med_ins[s] = median(w, o->runs);
    }
    for (int s = 0; s < TS_N; s++) {
        if (!(o->which & (1u << s))) {
            continue;
        }
        double ratio = med[TS_CUCKOO] / med[TS_LINEAR];
        tbl_json(o, ws, size, "median", s, med[s], med_ins[s], ratio);
        if (s == TS_CUCKOO && (o->which & TBL_LINEAR)) {
            tprintf("%-8s %-9s %9.1f %8.2f %10.0f %8.2f\n", "median",
                    ts_names[s], med[s], tsc_to_ns(med[s]), med_ins[s],
                    ratio);
        } else {
            tprintf("%-8s %-9s %9.1f %8.2f %10.0f\n", "median", ts_names[s],
                    med[s], tsc_to_ns(med[s]), med_ins[s]);
        }
    }
    if (o->which & TBL_LINEAR) {
        tprintf("linear: mean displacement from home slot %.3f; "
                "evictions (all runs): %"PRIu64" while filling, %"PRIu64
                " while measuring\n", disp, fill_evictions, evictions);
    }
    if (o->which & TBL_CUCKOO) {
        tprintf("cuckoo: %.3f kicks and %.2f buckets searched per insert, "
                "%"PRIu64" failed inserts\n", kicks, bfs, failures);
    }
    if ((o->which & (TBL_LINEAR | TBL_CUCKOO)) == (TBL_LINEAR | TBL_CUCKOO)) {
        tprintf("verdict: cuckoo/linear = %.2f (%s is faster by %.0f%%)\n",
                med[TS_CUCKOO] / med[TS_LINEAR],
                med[TS_CUCKOO] > med[TS_LINEAR] ? "linear" : "cuckoo",
                100 * fabs(med[TS_CUCKOO] / med[TS_LINEAR] - 1)
                / (med[TS_CUCKOO] > med[TS_LINEAR] ? 1
                   : med[TS_CUCKOO] / med[TS_LINEAR]));
    }
    free(v);
    free(w);
out:
    free(perm);
    free(idx);
    free(keys);
    free(samples);
}

static void
table_usage(void)
{
    printf("tpm-bench table [OPTIONS]\n"
           "  Find-or-insert a 5-tuple and update its 64-byte counters: "
           "flow table\n"
           "  (linear probing) vs bucketized cuckoo hash\n"
           "  (tpm/bench/cuckoo.h).\n"
           "  --flows LIST       working sets, active flows "
           "(300,64Ki,1Mi)\n"
           "  --table-factor N   table entries per active flow, rounded "
           "up to a power\n"
           "                     of two (2)\n"
           "  --packets N        measured packets per run and table (10M)\n"
           "  --runs N           runs, each with its own flows (5)\n"
           "  --seed N           seed of the first run (1)\n"
           "  --order ORDER      'random' (uniform, default) or 'rr' "
           "(round robin)\n"
           "  --probe-limit N    flow table probing window (32)\n"
           "  --batch N          packets per batch (32)\n"
           "  --which LIST       baseline,linear,cuckoo (all); baseline is "
           "the harness\n"
           "                     alone: fetch the key and hash it\n"
           "  --instr            one run (default 1M packets), no timing: "
           "for valgrind\n"
           "                     --tool=callgrind "
           "--toggle-collect=table_run_linear (or _cuckoo,\n"
           "                     _baseline; callgrind honours one "
           "--toggle-collect)\n"
           "  --json             JSON lines on stdout, table on stderr\n");
}

enum {
    TBL_OPT_FLOWS = 256, TBL_OPT_PACKETS, TBL_OPT_RUNS, TBL_OPT_SEED,
    TBL_OPT_ORDER, TBL_OPT_PROBE, TBL_OPT_FACTOR, TBL_OPT_BATCH, TBL_OPT_WHICH,
    TBL_OPT_INSTR, TBL_OPT_JSON,
};

static const struct option tbl_long_options[] = {
    { "flows", required_argument, NULL, TBL_OPT_FLOWS },
    { "packets", required_argument, NULL, TBL_OPT_PACKETS },
    { "runs", required_argument, NULL, TBL_OPT_RUNS },
    { "seed", required_argument, NULL, TBL_OPT_SEED },
    { "order", required_argument, NULL, TBL_OPT_ORDER },
    { "probe-limit", required_argument, NULL, TBL_OPT_PROBE },
    { "table-factor", required_argument, NULL, TBL_OPT_FACTOR },
    { "batch", required_argument, NULL, TBL_OPT_BATCH },
    { "which", required_argument, NULL, TBL_OPT_WHICH },
    { "instr", no_argument, NULL, TBL_OPT_INSTR },
    { "json", no_argument, NULL, TBL_OPT_JSON },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

/* Checks the options 'o' of tpm-bench table against each other and
 * applies the defaults that depend on others ('packets_set': --packets
 * given). */
static void
tbl_check_options__(struct tbl_opts *o, bool packets_set)
{
    if (o->instr) {
        o->runs = 1;
        if (!packets_set) {
            o->packets = 1000 * 1000;
        }
    }
    o->packets = ROUND_UP(o->packets, (uint64_t) o->batch);
}

/* Reads the command line of tpm-bench table, 'argc' and 'argv' from the
 * subcommand's name on, into 'o'; exits on an error or after --help. */
static void
tbl_parse_options(int argc, char *argv[], struct tbl_opts *o)
{
    *o = (struct tbl_opts) {
        .packets = 10 * 1000 * 1000,
        .runs = 5,
        .seed = 1,
        .ws = { 300, 65536, 1048576 },
        .n_ws = 3,
        .probe_limit = 32,
        .factor = 2,
        .batch = 32,
        .which = TBL_BASELINE | TBL_LINEAR | TBL_CUCKOO,
    };
    bool packets_set = false;

    struct cli_parser parser;
    cli_parser_init(&parser, argc, argv, "h", tbl_long_options);
    for (;;) {
        int c = cli_parser_next(&parser);
        if (c == -1) {
            break;
        }
        switch (c) {
        case TBL_OPT_FLOWS: {
            uint32_t list[MATCH_MAX_LIST];
            int n = parse_list("flows", optarg, list, 1, 1u << 26);
            if (n > TBL_MAX_WS) {
                cli_die("--flows: at most %d working sets", TBL_MAX_WS);
            }
            memcpy(o->ws, list, n * sizeof *list);
            o->n_ws = n;
            break;
        }
        case TBL_OPT_PACKETS:
            o->packets = parse_count("packets", optarg, 1, 1ULL << 40);
            packets_set = true;
            break;
        case TBL_OPT_RUNS:
            o->runs = parse_count("runs", optarg, 1, 1000);
            break;
        case TBL_OPT_SEED:
            o->seed = parse_count("seed", optarg, 0, UINT64_MAX >> 12);
            break;
        case TBL_OPT_ORDER:
            if (!strcmp(optarg, "rr") || !strcmp(optarg, "round-robin")) {
                o->round_robin = true;
            } else if (!strcmp(optarg, "random")) {
                o->round_robin = false;
            } else {
                cli_die("--order: 'random' or 'rr'");
            }
            break;
        case TBL_OPT_PROBE:
            o->probe_limit = parse_count("probe-limit", optarg, 1, 4096);
            break;
        case TBL_OPT_FACTOR:
            o->factor = parse_count("table-factor", optarg, 1, 64);
            break;
        case TBL_OPT_BATCH:
            o->batch = parse_count("batch", optarg, 1, TBL_BATCH_MAX);
            break;
        case TBL_OPT_WHICH: {
            char *copy = xstrdup(optarg), *save = NULL;
            o->which = 0;
            for (char *t = strtok_r(copy, ",", &save); t;
                 t = strtok_r(NULL, ",", &save)) {
                int s;
                for (s = 0; s < TS_N && strcmp(t, ts_names[s]); s++) {
                    continue;
                }
                if (s == TS_N) {
                    cli_die("--which: unknown table '%s'", t);
                }
                o->which |= 1u << s;
            }
            free(copy);
            break;
        }
        case TBL_OPT_INSTR:
            o->instr = true;
            break;
        case TBL_OPT_JSON:
            json = true;
            break;
        case 'h':
            table_usage();
            exit(EXIT_SUCCESS);
        default:
            cli_die("table: try --help");
        }
    }
    if (optind < argc) {
        cli_die("table: unexpected argument '%s'", argv[optind]);
    }
    tbl_check_options__(o, packets_set);
}

static int
cmd_table(int argc, char *argv[])
{
    struct tbl_opts o;

    tbl_parse_options(argc, argv, &o);
    tout = json ? stderr : stdout;

    print_machine();
    tprintf("table: find-or-insert + 64-byte counter update, burst 1, "
            "batch %d, probe limit %u, tables %ux the flows,\n"
            "       median of %d run(s), structures side by side in each "
            "run; a run's cost is\n       its median over %d chunks\n"
            "       baseline = harness alone (fetch key, tpm_key_hash); "
            "cuck/lin = cuckoo/linear cycles\n",
            o.batch, o.probe_limit, o.factor, o.runs, TBL_CHUNKS);
    for (int i = 0; i < o.n_ws; i++) {
        tbl_measure(&o, o.ws[i]);
    }
    print_hugepage_note();
    return 0;
}

/* ======================================================================
 * main
 * ====================================================================== */

static void
usage(void)
{
    printf("usage: tpm-bench COMMAND [OPTIONS]\n"
           "In-memory benchmarks of libtpm (docs/benchmarks.md).\n\n"
           "Commands:\n"
           "  workload   the Trumpet section 7.2 workload: phase-1 "
           "cycles/packet,\n"
           "             sweep time per epoch, utilisation at 14.88 Mpps\n"
           "  match      trigger-index matching cost vs triggers and "
           "patterns\n"
           "  table      flow table (linear probing) vs cuckoo hash, "
           "SOSR'18 style\n\n"
           "Common options: --runs N (5), --seed N (1), --json, --instr, "
           "--help.\n"
           "Timings are TSC cycles (rate printed) and medians over runs; "
           "with --json,\n"
           "one JSON object per result line goes to stdout and the table "
           "to stderr.\n\n");
    wl_usage();
    printf("\n");
    match_usage();
    printf("\n");
    table_usage();
}

int
main(int argc, char *argv[])
{
    tout = stdout;
    cli_init("tpm-bench", EXIT_FAILURE);
    tpm_log_set_hook(log_hook);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")
        || !strcmp(argv[1], "help")) {
        usage();
        return argc < 2 ? EXIT_FAILURE : 0;
    }

    const char *cmd = argv[1];
    if (!strcmp(cmd, "workload")) {
        return cmd_workload(argc - 1, argv + 1);
    } else if (!strcmp(cmd, "match")) {
        return cmd_match(argc - 1, argv + 1);
    } else if (!strcmp(cmd, "table")) {
        return cmd_table(argc - 1, argv + 1);
    }
    cli_die("unknown command '%s' (workload, match, table; try --help)", cmd);
}
