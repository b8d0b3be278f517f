/* SPDX-License-Identifier: Apache-2.0 */
/* tpm-bench table: the flow table against a bucketized cuckoo table
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
#include "cuckoo.h"
#include "event.h"
#include "flow-table.h"
#include "packet.h"
#include "tpm.h"
#include "util.h"

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
        st->count.packets = 0;
        st->count.bytes = 0;
    }
    bool first = !st->count.packets;
    uint64_t ttl = 32 + (key->sport & 63);
    st->count.packets++;
    st->count.bytes += FRAME_WIRELEN;
    /* Integer slots, as the monitor keeps a variable's sum and max. */
    st->slot[0].u = first ? 18 : st->slot[0].u + 18;
    st->slot[1].u = first || ttl > st->slot[1].u ? ttl : st->slot[1].u;
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
    uint32_t size = MAX(MIN(pow2_ceil((uint64_t) o->factor * ws),
                            UINT32_C(1) << 31), 64);
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

void
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
            bench_json = true;
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

int
cmd_table(int argc, char *argv[])
{
    struct tbl_opts o;

    tbl_parse_options(argc, argv, &o);
    bench_tout = bench_json ? stderr : stdout;

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
