/* SPDX-License-Identifier: Apache-2.0 */
/* What tpm-bench's benchmarks share: see bench-common.h. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench-common.h"
#include "cli.h"
#include "clock.h"
#include "packet.h"
#include "util.h"

/* Output (bench-common.h). */
FILE *bench_tout;
bool bench_json;

void
tprintf(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vfprintf(bench_tout, format, args);
    va_end(args);
}

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

void
jl_begin(struct jline *j, const char *bench)
{
    j->len = 0;
    jl_add(j, "{\"bench\":\"%s\"", bench);
}

void
jl_str(struct jline *j, const char *key, const char *value)
{
    jl_add(j, ",\"%s\":\"%s\"", key, value);
}

void
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

void
jl_end(struct jline *j)
{
    if (bench_json) {
        printf("%s}\n", j->buf);
        fflush(stdout);
    }
}

/* Huge pages: libtpm warns once per region when it falls back to normal
 * pages.  Collect those warnings and say it once. */
static int n_hugepage_warnings;

void
bench_log_hook(enum tpm_log_level level, const char *message)
{
    if (level == TPM_LOG_WARN && strstr(message, "huge pages")) {
        n_hugepage_warnings++;
    } else {
        fprintf(stderr, "libtpm: %s\n", message);
    }
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
double
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
double
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

double
tsc_to_ns(double cycles)
{
    return cycles * 1000.0 / tpm_tsc_per_us();
}

/* Option parsing helpers. */

/* Parses a count with an optional suffix: k M G (10^3...) or Ki Mi Gi
 * (2^10...). */
uint64_t
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

double
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

void
print_machine(void)
{
    tprintf("TSC: %.1f MHz (%.3f cycles/ns); key hash: %s\n",
            tpm_tsc_per_us(), tpm_tsc_per_us() / 1000.0,
            tpm_key_hash_impl());
}

void
print_hugepage_note(void)
{
    if (n_hugepage_warnings) {
        tprintf("\nnote: no 2 MB huge pages were available: libtpm put %d "
                "region(s) on normal pages\n      (its fallback, with "
                "MADV_HUGEPAGE advice)\n", n_hugepage_warnings);
        n_hugepage_warnings = 0;
    }
}

int
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
