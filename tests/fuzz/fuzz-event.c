/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the event language (lib/event.h).
 *
 * Input: one line of an event file, "NAME definition...".
 *
 * Checks, on every input: the parse returns an event or an error, never
 * both and never neither (except for blank and comment lines).  On an
 * event:
 *   - the predicate, the group and the interval format back into text
 *     that parses into the same predicate, group and interval;
 *   - a clone is equal to the event;
 *   - the predicate and its per-packet terms evaluate (no undefined
 *     behaviour on any value, division by zero included);
 *   - a monitor (tpm/tpm.h) installs it or says why not, and removes it.
 */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event.h"
#include "fuzz-util.h"
#include "tpm.h"
#include "util.h"

static struct tpm *monitor;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    struct tpm_params params;
    char *error;

    tpm_log_set_hook(fuzz_log_quiet);
    tpm_params_init(&params);
    params.epoch_ns = 1000 * 1000;
    params.flow_table_size = 1024;
    params.max_events = 16;
    params.max_triggers = 1024;
    params.max_children = 256;
    params.max_chunks = 256;
    params.dos_table_size = 1024;
    params.ring_size = 64;
    params.tcp_state_pool = 64;
    monitor = tpm_create(&params, &error);
    FUZZ_CHECK(monitor, "tpm_create: %s", error);
    return 0;
}

/* Values of the aggregates, for the evaluation of a predicate. */
static double
leaf_value(const struct tpm_expr *agg, bool prev, void *aux)
{
    static const double values[] = {
        0, 1, -1, 0.5, 1e300, -1e300, DBL_MAX, DBL_MIN, 125000, 1e-300,
    };
    unsigned int *i = aux;
    return values[(*i)++ % ARRAY_SIZE(values)] * (prev ? 2 : 1);
}

/* Evaluates the per-packet term of each aggregate on two packets: all
 * zero, and every variable at its largest. */
static void
eval_term(const struct tpm_expr *agg, bool prev, void *aux)
{
    struct tpm_pkt pkt;

    if (!agg->a) {
        return;
    }
    memset(&pkt, 0, sizeof pkt);
    double v = tpm_expr_eval_pkt(agg->a, &pkt);
    memset(&pkt, 0xff, sizeof pkt);
    v += tpm_expr_eval_pkt(agg->a, &pkt);
    *(double *) aux += v;
}

/* Parses "filter=any predicate=P group=G interval=I" from the event's
 * own formatted parts and checks that it gives the same parts back. */
static void
check_roundtrip(const struct tpm_event *ev)
{
    char *pred = tpm_expr_to_string(ev->pred);
    char *group = tpm_group_to_string(&ev->group);
    char interval[64];
    tpm_time_format(ev->interval_ns, interval, sizeof interval);

    char *text = xasprintf("filter=any predicate=%s group=%s interval=%s",
                           pred, group, interval);
    struct tpm_event *again;
    char *error = tpm_event_parse("again", text, &again);
    FUZZ_CHECK(!error, "'%s' (from '%s') does not parse back: %s", text,
               ev->text, error);
    FUZZ_CHECK(tpm_expr_equal(again->pred, ev->pred),
               "predicate '%s' parses into another", pred);
    FUZZ_CHECK(tpm_key_equal(&again->group, &ev->group),
               "group '%s' parses into another", group);
    FUZZ_CHECK(again->group_5tuple == ev->group_5tuple, "group '%s'", group);
    FUZZ_CHECK(again->interval_ns == ev->interval_ns,
               "interval '%s' parses into another", interval);
    FUZZ_CHECK(!again->threshold == !ev->threshold,
               "'%s': threshold found once", pred);
    char *pred2 = tpm_expr_to_string(again->pred);
    FUZZ_CHECK(!strcmp(pred, pred2), "'%s' formats again as '%s'", pred,
               pred2);
    free(pred2);
    tpm_event_destroy(again);
    free(text);
    free(group);
    free(pred);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct tpm_event *ev;
    char *line = fuzz_strndup(data, size);
    char *error = tpm_event_parse_line(line, &ev);

    FUZZ_CHECK(!error || !ev, "both an error and an event");
    if (!ev) {
        free(error);
        free(line);
        return 0;
    }

    FUZZ_CHECK(ev->pred && ev->value && ev->interval_ns,
               "event without predicate, value or interval");
    FUZZ_CHECK(tpm_event_name_valid(ev->name), "name '%s'", ev->name);
    check_roundtrip(ev);

    /* A clone is the same event. */
    struct tpm_event *c = tpm_event_clone(ev);
    FUZZ_CHECK(tpm_expr_equal(c->pred, ev->pred), "clone differs");
    FUZZ_CHECK(!memcmp(&c->filter, &ev->filter, sizeof c->filter)
               && tpm_key_equal(&c->group, &ev->group),
               "clone's filter or group differs");
    FUZZ_CHECK(tpm_expr_equal(c->value, ev->value)
               && tpm_expr_equal(c->threshold, ev->threshold),
               "clone's value or threshold differs");
    FUZZ_CHECK(tpm_event_needs_tcp_state(c) == tpm_event_needs_tcp_state(ev),
               "clone needs TCP state differently");

    /* Evaluation. */
    unsigned int i = 0;
    double sum = tpm_expr_eval(ev->pred, leaf_value, &i);
    sum += tpm_expr_eval(ev->value, leaf_value, &i);
    tpm_expr_for_each_agg(ev->pred, eval_term, &sum);
    (void) sum;

    /* The threshold can be set, and the event installed and removed. */
    if (ev->threshold) {
        FUZZ_CHECK(tpm_event_set_threshold(c, 42.5), "threshold not set");
        FUZZ_CHECK(c->threshold->num == 42.5, "threshold not stored");
    } else {
        FUZZ_CHECK(!tpm_event_set_threshold(c, 42.5), "threshold set");
    }
    char *add_error = tpm_event_add(monitor, c, 7);
    if (add_error) {
        free(add_error);
        tpm_event_destroy(c);
    } else {
        FUZZ_CHECK(tpm_event_get(monitor, 7), "installed event not found");
        FUZZ_CHECK(!tpm_event_del(monitor, 7), "installed event not removed");
    }
    FUZZ_CHECK(!tpm_event_get(monitor, 7), "removed event still there");

    tpm_event_destroy(ev);
    free(line);
    return 0;
}
