/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Prometheus text exposition format (tem-metrics.h).
 *
 * Integral values up to 2^53 (counters) are written exactly, others with
 * 15 significant digits, and +Inf, -Inf and NaN as the format spells
 * them.
 */
#include "tem-metrics.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

void
tem_metrics_init(struct tem_metrics *m)
{
    m->b = (struct sbuf) SBUF_INITIALIZER;
}

void
tem_metrics_clear(struct tem_metrics *m)
{
    sbuf_clear(&m->b);
}

void
tem_metrics_destroy(struct tem_metrics *m)
{
    sbuf_destroy(&m->b);
}

static void
put(struct tem_metrics *m, const char *s, size_t n)
{
    sbuf_put(&m->b, s, n);
}

static void
puts__(struct tem_metrics *m, const char *s)
{
    sbuf_str(&m->b, s);
}

static void
put_value(struct tem_metrics *m, double v)
{
    char buf[32];

    if (isnan(v)) {
        puts__(m, "NaN");
    } else if (isinf(v)) {
        puts__(m, v > 0 ? "+Inf" : "-Inf");
    } else if (v == floor(v) && fabs(v) <= 9007199254740992.0) {
        snprintf(buf, sizeof buf, "%.0f", v);
        puts__(m, buf);
    } else {
        snprintf(buf, sizeof buf, "%.15g", v);
        puts__(m, buf);
    }
}

/* Appends 's' escaped as a label value (without the quotes). */
static void
put_label_value(struct tem_metrics *m, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\') {
            puts__(m, "\\\\");
        } else if (*s == '"') {
            puts__(m, "\\\"");
        } else if (*s == '\n') {
            puts__(m, "\\n");
        } else {
            put(m, s, 1);
        }
    }
}

void
tem_metrics_family(struct tem_metrics *m, const char *name,
                   const char *type, const char *help)
{
    puts__(m, "# HELP ");
    puts__(m, name);
    put(m, " ", 1);
    /* HELP escapes backslash and newline only. */
    for (const char *p = help; *p; p++) {
        if (*p == '\\') {
            puts__(m, "\\\\");
        } else if (*p == '\n') {
            puts__(m, "\\n");
        } else {
            put(m, p, 1);
        }
    }
    puts__(m, "\n# TYPE ");
    puts__(m, name);
    put(m, " ", 1);
    puts__(m, type);
    put(m, "\n", 1);
}

void
tem_metrics_sample(struct tem_metrics *m, const char *name,
                   const char *label, const char *label_value, double value)
{
    puts__(m, name);
    if (label) {
        put(m, "{", 1);
        puts__(m, label);
        puts__(m, "=\"");
        put_label_value(m, label_value);
        puts__(m, "\"}");
    }
    put(m, " ", 1);
    put_value(m, value);
    put(m, "\n", 1);
}

void
tem_metrics_counter(struct tem_metrics *m, const char *name,
                    const char *help, uint64_t value)
{
    tem_metrics_family(m, name, "counter", help);
    tem_metrics_sample(m, name, NULL, NULL, value);
}

void
tem_metrics_gauge(struct tem_metrics *m, const char *name,
                  const char *help, double value)
{
    tem_metrics_family(m, name, "gauge", help);
    tem_metrics_sample(m, name, NULL, NULL, value);
}

void
tem_metrics_histogram(struct tem_metrics *m, const char *name,
                      const double *bounds, const uint64_t *counts,
                      size_t n, double sum)
{
    char *bucket = xasprintf("%s_bucket", name);
    uint64_t total = 0;
    char le[32];

    for (size_t i = 0; i <= n; i++) {
        total += counts[i];
        if (i < n) {
            snprintf(le, sizeof le, "%.15g", bounds[i]);
        } else {
            snprintf(le, sizeof le, "+Inf");
        }
        tem_metrics_sample(m, bucket, "le", le, total);
    }
    free(bucket);

    char *s = xasprintf("%s_sum", name);
    tem_metrics_sample(m, s, NULL, NULL, sum);
    free(s);
    s = xasprintf("%s_count", name);
    tem_metrics_sample(m, s, NULL, NULL, total);
    free(s);
}
