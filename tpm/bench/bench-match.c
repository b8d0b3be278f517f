/* SPDX-License-Identifier: Apache-2.0 */
/* tpm-bench match: the cost of matching a new flow against the trigger
 * index (tpm-bench.c). */
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
#include "packet.h"
#include "tpm.h"
#include "trig-index.h"
#include "util.h"

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

void
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
            bench_json = true;
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

int
cmd_match(int argc, char *argv[])
{
    struct match_opts o;

    match_parse_options(argc, argv, &o);
    bench_tout = bench_json ? stderr : stdout;

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
