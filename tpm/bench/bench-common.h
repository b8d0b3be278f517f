/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the benchmarks of tpm-bench share (tpm-bench.c says what each
 * measures): the output (a table on 'bench_tout', JSON lines on stdout
 * with --json), libtpm's log, random numbers, statistics over runs and
 * the parsing of option values.  bench-common.c defines them; each
 * benchmark is a file of its own (bench-workload.c, bench-match.c,
 * bench-table.c) whose cmd_*() tpm-bench.c's main calls with the command
 * line from the subcommand's name on.
 *
 * Thread-safety: none; the benchmarks run on one thread.
 */
#ifndef TPM_BENCH_COMMON_H
#define TPM_BENCH_COMMON_H 1

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util.h"

/* For functions that callgrind's --toggle-collect must find by name: not
 * inlined, and not cloned into "name.isra.0" by GCC. */
#if defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noinline, noclone))
#endif

/* The subcommands: each runs with the command line from its name on and
 * returns the exit status; each usage prints its part of --help. */
int cmd_workload(int argc, char *argv[]);
int cmd_match(int argc, char *argv[]);
int cmd_table(int argc, char *argv[]);
void wl_usage(void);
void match_usage(void);
void table_usage(void);

/* Output.  The table goes to 'bench_tout': stdout, or stderr with --json
 * ('bench_json'). */
extern FILE *bench_tout;
extern bool bench_json;

void tprintf(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* One JSON object on one line of stdout. */
struct jline {
    char buf[4096];
    size_t len;
};

void jl_begin(struct jline *, const char *bench);
void jl_str(struct jline *, const char *key, const char *value);
void jl_num(struct jline *, const char *key, double value);
void jl_end(struct jline *);

/* libtpm's log: its huge-page warnings counted, said once by
 * print_hugepage_note(); the rest on stderr. */
void bench_log_hook(enum tpm_log_level, const char *message);
void print_machine(void);
void print_hugepage_note(void);

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
double quantile(double *v, int n, double q);
double median(const double *v, int n);
double tsc_to_ns(double cycles);

/* Option values: a count with an optional suffix (k M G, Ki Mi Gi), a
 * number, a comma-separated list of at most MATCH_MAX_LIST counts ('none':
 * empty; returns its length).  'opt' is the option's name without its
 * dashes.  A bad value is fatal. */
#define MATCH_MAX_LIST 16
uint64_t parse_count(const char *opt, const char *s, uint64_t min,
                     uint64_t max);
double parse_double(const char *opt, const char *s, double min, double max);
int parse_list(const char *opt, const char *s, uint32_t *out, uint64_t min,
               uint64_t max);

/* The frames of the workload and the table benchmark. */
#define FRAME_CAPLEN 60         /* 64-byte frame without its FCS. */
#define FRAME_WIRELEN 64

#endif /* bench-common.h */
