/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Two-level evaluation of an event over several monitors (paper section 6):
 * threshold splitting and poll bookkeeping.
 *
 * An event over traffic that several monitors see (the PMD threads of one
 * host, or the hosts of a network) is installed on each of them with a
 * share of its threshold.  For "sum(x) > T" (or count, or >=), if the
 * total over n parts exceeds T then at least one part exceeds its share,
 * so no satisfaction is missed.  When one part reports, the others are
 * polled for the same epoch and group, and the event holds if the total
 * does.  Events whose value is not additive (avg, min, max, stddev,
 * compound predicates) cannot be split: each part evaluates the whole
 * predicate on what it sees, and its satisfaction stands on its own.
 *
 * The same code serves the host (ovs-vswitchd's local TEM over its PMDs)
 * and the controller (over hosts).
 *
 * Thread-safety: a 'struct tpm_decisions' is used by one thread.
 */
#ifndef TPM_SPLIT_H
#define TPM_SPLIT_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "event.h"

/* Returns true if 'event' can be split: its predicate is "V > T" or
 * "V >= T" with V a sum() or count() (not prev()) and T a constant >= 0.
 * Otherwise stores in '*why' (if nonnull) a static string saying why
 * not. */
bool tpm_split_supported(const struct tpm_event *event, const char **why);

/* Splits threshold 'total' over 'n' parts into 'shares'.  With 'weights'
 * null, equal shares; otherwise shares proportional to the weights (each
 * >= 0; all zero means equal).  The shares sum to 'total'. */
void tpm_split_threshold(double total, size_t n, const double *weights,
                         double *shares);

/* Returns true if value 'v' satisfies 'event''s top comparison against
 * the (unsplit) threshold 'total'. */
bool tpm_split_holds(const struct tpm_event *event, double v, double total);

/* Pending decisions: one per (event, epoch, group) with a report from
 * some part and polls outstanding to the others. */
enum tpm_part_state {
    TPM_PART_WAITING,
    TPM_PART_VALUE,             /* 'values[part]' is known. */
    TPM_PART_MISSING,           /* No answer possible (history expired,
                                 * part gone, deadline passed). */
};

struct tpm_decision {
    uint32_t event;
    uint64_t epoch;
    struct tpm_key group;
    uint64_t started_ns;
    uint64_t deadline_ns;
    size_t n_parts;
    uint8_t *state;             /* enum tpm_part_state, per part. */
    double *values;
    bool decided;               /* Decided; kept until 'expires_ns' so that
                                 * late reports for the same key are not
                                 * decided twice. */
    uint64_t expires_ns;
    uint64_t aux;               /* For the caller. */
    struct tpm_decision *next;  /* Hash chain. */
};

struct tpm_decisions;

struct tpm_decisions *tpm_decisions_create(void);
void tpm_decisions_destroy(struct tpm_decisions *);

/* Returns the decision for ('event', 'epoch', 'group'), or NULL. */
struct tpm_decision *tpm_decision_find(const struct tpm_decisions *,
                                       uint32_t event, uint64_t epoch,
                                       const struct tpm_key *group);

/* Creates the decision for ('event', 'epoch', 'group') over 'n_parts'
 * parts, all waiting.  It must not exist yet. */
struct tpm_decision *tpm_decision_start(struct tpm_decisions *,
                                        uint32_t event, uint64_t epoch,
                                        const struct tpm_key *group,
                                        size_t n_parts, uint64_t now_ns,
                                        uint64_t deadline_ns);

void tpm_decision_set(struct tpm_decision *, size_t part, double value);
void tpm_decision_missing(struct tpm_decision *, size_t part);

/* Returns true if no part is waiting. */
bool tpm_decision_complete(const struct tpm_decision *);

/* Sum of the known values; '*n_missing' gets the number of missing
 * parts. */
double tpm_decision_total(const struct tpm_decision *, size_t *n_missing);

/* Removes and frees 'd'. */
void tpm_decision_remove(struct tpm_decisions *, struct tpm_decision *d);

/* Calls 'cb' for every pending decision; 'cb' may remove the one it is
 * given. */
void tpm_decisions_for_each(struct tpm_decisions *,
                            void (*cb)(struct tpm_decision *, void *aux),
                            void *aux);

size_t tpm_decisions_count(const struct tpm_decisions *);

#endif /* split.h */
