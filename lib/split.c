/* SPDX-License-Identifier: Apache-2.0 */
#include "split.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

bool
tpm_split_supported(const struct tpm_event *event, const char **why)
{
    const struct tpm_expr *p = event->pred;
    const char *reason = NULL;

    if (p->type != TPM_EXPR_BIN
        || (p->op != TPM_OP_GT && p->op != TPM_OP_GE)) {
        reason = "the predicate is not a single '>' or '>=' comparison";
    } else if (p->a->type != TPM_EXPR_AGG
               || (p->a->agg != TPM_AGG_SUM && p->a->agg != TPM_AGG_COUNT)) {
        reason = "the compared value is not a sum() or count()";
    } else if (p->b->type != TPM_EXPR_NUM || p->b->num < 0) {
        reason = "the threshold is not a non-negative constant";
    }
    if (why) {
        *why = reason;
    }
    return !reason;
}

void
tpm_split_threshold(double total, size_t n, const double *weights,
                    double *shares)
{
    double sum = 0;
    for (size_t i = 0; weights && i < n; i++) {
        sum += weights[i] > 0 ? weights[i] : 0;
    }
    for (size_t i = 0; i < n; i++) {
        shares[i] = sum > 0
                    ? total * (weights[i] > 0 ? weights[i] : 0) / sum
                    : total / n;
    }
}

bool
tpm_split_holds(const struct tpm_event *event, double v, double total)
{
    return event->pred->op == TPM_OP_GE ? v >= total : v > total;
}

#define TPM_DECISION_BUCKETS 1024

struct tpm_decisions {
    struct tpm_decision *buckets[TPM_DECISION_BUCKETS];
    size_t n;
};

static size_t
bucket__(uint32_t event, uint64_t epoch, const struct tpm_key *group)
{
    uint32_t h = tpm_key_hash(group) ^ (event * 0x9e3779b1u)
                 ^ (uint32_t) (epoch * 0x85ebca6bu);
    return h % TPM_DECISION_BUCKETS;
}

struct tpm_decisions *
tpm_decisions_create(void)
{
    return xzalloc(sizeof(struct tpm_decisions));
}

static void
decision_free__(struct tpm_decision *d)
{
    free(d->state);
    free(d->values);
    free(d);
}

void
tpm_decisions_destroy(struct tpm_decisions *ds)
{
    if (!ds) {
        return;
    }
    for (size_t b = 0; b < TPM_DECISION_BUCKETS; b++) {
        struct tpm_decision *d = ds->buckets[b];
        while (d) {
            struct tpm_decision *next = d->next;
            decision_free__(d);
            d = next;
        }
    }
    free(ds);
}

struct tpm_decision *
tpm_decision_find(const struct tpm_decisions *ds, uint32_t event,
                  uint64_t epoch, const struct tpm_key *group)
{
    for (struct tpm_decision *d = ds->buckets[bucket__(event, epoch, group)];
         d; d = d->next) {
        if (d->event == event && d->epoch == epoch
            && tpm_key_equal(&d->group, group)) {
            return d;
        }
    }
    return NULL;
}

struct tpm_decision *
tpm_decision_start(struct tpm_decisions *ds, uint32_t event, uint64_t epoch,
                   const struct tpm_key *group, size_t n_parts,
                   uint64_t now_ns, uint64_t deadline_ns)
{
    struct tpm_decision *d = xzalloc(sizeof *d);
    size_t b = bucket__(event, epoch, group);

    d->event = event;
    d->epoch = epoch;
    d->group = *group;
    d->started_ns = now_ns;
    d->deadline_ns = deadline_ns;
    d->n_parts = n_parts;
    d->state = xcalloc(n_parts, sizeof *d->state);
    d->values = xcalloc(n_parts, sizeof *d->values);
    d->next = ds->buckets[b];
    ds->buckets[b] = d;
    ds->n++;
    return d;
}

void
tpm_decision_set(struct tpm_decision *d, size_t part, double value)
{
    if (part < d->n_parts) {
        d->state[part] = TPM_PART_VALUE;
        d->values[part] = value;
    }
}

void
tpm_decision_missing(struct tpm_decision *d, size_t part)
{
    if (part < d->n_parts && d->state[part] == TPM_PART_WAITING) {
        d->state[part] = TPM_PART_MISSING;
    }
}

bool
tpm_decision_complete(const struct tpm_decision *d)
{
    for (size_t i = 0; i < d->n_parts; i++) {
        if (d->state[i] == TPM_PART_WAITING) {
            return false;
        }
    }
    return true;
}

double
tpm_decision_total(const struct tpm_decision *d, size_t *n_missing)
{
    double total = 0;
    size_t missing = 0;
    for (size_t i = 0; i < d->n_parts; i++) {
        if (d->state[i] == TPM_PART_VALUE) {
            total += d->values[i];
        } else {
            missing++;
        }
    }
    if (n_missing) {
        *n_missing = missing;
    }
    return total;
}

void
tpm_decision_remove(struct tpm_decisions *ds, struct tpm_decision *d)
{
    struct tpm_decision **pp = &ds->buckets[bucket__(d->event, d->epoch,
                                                     &d->group)];
    while (*pp && *pp != d) {
        pp = &(*pp)->next;
    }
    if (*pp) {
        *pp = d->next;
        ds->n--;
        decision_free__(d);
    }
}

void
tpm_decisions_for_each(struct tpm_decisions *ds,
                       void (*cb)(struct tpm_decision *, void *), void *aux)
{
    for (size_t b = 0; b < TPM_DECISION_BUCKETS; b++) {
        struct tpm_decision *d = ds->buckets[b];
        while (d) {
            struct tpm_decision *next = d->next;
            cb(d, aux);
            d = next;
        }
    }
}

size_t
tpm_decisions_count(const struct tpm_decisions *ds)
{
    return ds->n;
}
