/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Prometheus text exposition format (version 0.0.4), written into a
 * growing buffer.
 *
 * A family is announced once with its HELP and TYPE lines, then its
 * samples follow, each with at most one label (a label value is escaped:
 * backslash, double quote and newline).  Names are the caller's constant
 * strings and are not checked here: tests/test-tem.c checks every line
 * of a whole scrape against the format's grammar.
 *
 * The TEM's core (tem_core_metrics()) and daemon (tem.c) both write into
 * one buffer, which the metrics server (tem-http.h) sends as one response.
 *
 * Thread-safety: a buffer is used by one thread.
 */
#ifndef TEM_METRICS_H
#define TEM_METRICS_H 1

#include "sbuf.h"

#include <stddef.h>
#include <stdint.h>

struct tem_metrics {
    struct sbuf b;              /* The text ('b.s', NUL-terminated). */
};

void tem_metrics_init(struct tem_metrics *);
void tem_metrics_clear(struct tem_metrics *);   /* Empties, keeps memory. */
void tem_metrics_destroy(struct tem_metrics *);

/* "# HELP name help" and "# TYPE name type" ('type': counter, gauge,
 * histogram). */
void tem_metrics_family(struct tem_metrics *, const char *name,
                        const char *type, const char *help);

/* "name value" or "name{label="value"} value"; 'label' NULL for none. */
void tem_metrics_sample(struct tem_metrics *, const char *name,
                        const char *label, const char *label_value,
                        double value);

/* A family with one unlabelled sample. */
void tem_metrics_counter(struct tem_metrics *, const char *name,
                         const char *help, uint64_t value);
void tem_metrics_gauge(struct tem_metrics *, const char *name,
                       const char *help, double value);

/* Histogram samples of family 'name' (announced by the caller):
 * 'bounds' are the 'n' finite upper bounds (seconds, increasing),
 * 'counts' the 'n' + 1 non-cumulative counts (the last one: above every
 * bound), 'sum' the sum of observations. */
void tem_metrics_histogram(struct tem_metrics *, const char *name,
                           const double *bounds, const uint64_t *counts,
                           size_t n, double sum);

#endif /* tem-metrics.h */
