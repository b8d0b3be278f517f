/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Two-level evaluation of an event over several monitors (paper section 6):
 * threshold splitting, and the decision engine that combines the
 * monitors' answers.
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
 * The decision engine ('struct tpm_decisions') keeps one decision per
 * (event, epoch, group) that some part reported: each part of it waits,
 * has a value, or is missing (no answer possible: history expired, part
 * gone, deadline passed; never counted as zero).  The caller polls, feeds
 * the answers in, and decides when no part waits or the deadline passed;
 * a decided key is kept a while so that late reports for it are not
 * decided twice.  The same engine serves the host (ovs-vswitchd's local
 * TEM over its PMDs, ovs-patches/tpm-ovs-event.c) and the controller
 * (the TEM over hosts, tem/tem-decide.c).
 *
 * It is built for the controller's rate (millions of satisfactions a
 * second): decisions live in slots allocated in chunks and recycled
 * through a free list (no allocation per decision once warm), each with
 * room for a few parts inline (more in a buffer its slot keeps); the key
 * index is open addressing with linear probing over (hash, slot) pairs,
 * sized from a capacity hint and doubled at half load, with
 * backward-shift deletion (no tombstones).  A caller that keeps more per
 * part (the TEM: host slot and session) embeds 'struct tpm_part' first in
 * its own part structure and gives its size; per decision it has 'aux'.
 * Pending decisions are listed in the order they started, decided ones in
 * the order they were decided: with one deadline and one keep time for
 * all, both lists are in time order and the timers look only at their
 * heads.
 *
 * A slot number and generation name a decision in a poll's cookie: the
 * slot is stable while the decision exists, and the generation changes
 * whenever the slot is freed, so that an answer to a decision since
 * removed finds no decision, or one of another generation.
 *
 * Thread-safety: a 'struct tpm_decisions' is used by one thread.
 */
#ifndef TPM_DECISION_H
#define TPM_DECISION_H 1

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

/* Decisions. */

enum tpm_part_state {
    TPM_PART_WAITING,
    TPM_PART_VALUE,             /* 'value' is known. */
    TPM_PART_MISSING,           /* No answer possible (history expired,
                                 * part gone, deadline passed). */
};

/* One part of a decision.  A caller that keeps more per part puts this
 * first in its own structure and gives that structure's size as
 * 'part_size'. */
struct tpm_part {
    double value;               /* If 'state' is TPM_PART_VALUE. */
    uint8_t state;              /* enum tpm_part_state. */
    uint8_t flags;              /* For the caller. */
};

/* What a decision is about: (event, epoch, group), and its hash.  The
 * group is its key and, for an event that groups by interface, the
 * interface's number (tpm_set_rx_port()). */
struct tpm_decision_key {
    uint32_t event;
    uint32_t hash;              /* Set by tpm_decision_key_init(). */
    uint64_t epoch;
    struct tpm_key group;
    uint16_t port;              /* 0 if the event does not group by port. */
};

/* Two keys with the same (event, epoch, group, port) hash alike; a test
 * may set 'hash' by hand to make different keys collide.
 * tpm_decision_key_init() is for groups without a port. */
void tpm_decision_key_init_port(struct tpm_decision_key *, uint32_t event,
                                uint64_t epoch, const struct tpm_key *group,
                                uint16_t port);
void tpm_decision_key_init(struct tpm_decision_key *, uint32_t event,
                           uint64_t epoch, const struct tpm_key *group);

struct tpm_decision_node {
    struct tpm_decision_node *prev, *next;
};

struct tpm_decision {
    struct tpm_decision_key key;
    uint32_t n_parts;
    uint32_t n_waiting;         /* Parts in TPM_PART_WAITING. */
    void *parts;                /* 'n_parts' parts, 'part_size' bytes each:
                                 * use tpm_decision_part(), or index them
                                 * as the caller's own type. */
    bool decided;               /* Decided; kept until 'expires_ns' so
                                 * that late reports for the same key are
                                 * not decided twice. */
    uint32_t slot;              /* Stable while the decision exists. */
    uint32_t gen;               /* Changes whenever the slot is freed. */
    uint64_t started_ns, deadline_ns, expires_ns;
    uint64_t aux;               /* For the caller. */

    /* Private to the engine. */
    bool in_use;
    uint32_t part_size;
    uint32_t n_heap;            /* Parts 'heap' has room for. */
    void *heap;                 /* Parts beyond the inline ones. */
    struct tpm_decision_node node;  /* Pending, decided or free list. */
};

static inline struct tpm_part *
tpm_decision_part(const struct tpm_decision *d, size_t i)
{
    return (struct tpm_part *) (void *) ((char *) d->parts
                                         + i * d->part_size);
}

struct tpm_decisions_config {
    size_t capacity;            /* Decisions expected at once: sizes the
                                 * index, which grows past it (1024). */
    size_t max;                 /* At most this many decisions at once,
                                 * pending or kept (0: no limit). */
    size_t part_size;           /* Bytes per part, struct tpm_part first
                                 * (sizeof(struct tpm_part)). */
    size_t inline_parts;        /* Parts kept inside a decision; a decision
                                 * with more puts them in a buffer its
                                 * slot keeps for the next (8). */
};

/* Fills in the defaults noted above. */
void tpm_decisions_config_init(struct tpm_decisions_config *);

/* Creates an engine configured by 'cfg' (NULL: the defaults). */
struct tpm_decisions *tpm_decisions_create(
    const struct tpm_decisions_config *cfg);
void tpm_decisions_destroy(struct tpm_decisions *);

/* Returns the decision for 'key', or NULL. */
struct tpm_decision *tpm_decision_find(const struct tpm_decisions *,
                                       const struct tpm_decision_key *key);

/* Returns the decision in slot 'slot', or NULL if the slot holds none. */
struct tpm_decision *tpm_decision_by_slot(const struct tpm_decisions *,
                                          uint32_t slot);

/* Starts the decision for 'key' (which must not have one) over 'n_parts'
 * parts, all waiting (value 0, flags 0), at 'now_ns', to be decided at the
 * latest at 'deadline_ns'.  At the 'max' configured, the decided decision
 * kept the longest is dropped to make room; returns NULL if every one is
 * pending. */
struct tpm_decision *tpm_decision_start(struct tpm_decisions *,
                                        const struct tpm_decision_key *key,
                                        size_t n_parts, uint64_t now_ns,
                                        uint64_t deadline_ns);

/* Part 'part' has value 'value' (a part missing or known already takes it
 * too).  A part out of range is ignored. */
void tpm_decision_set(struct tpm_decision *, size_t part, double value);

/* Part 'part', if waiting, is missing.  A part out of range is ignored. */
void tpm_decision_missing(struct tpm_decision *, size_t part);

/* Every waiting part is missing (the deadline passed). */
void tpm_decision_missing_all(struct tpm_decision *);

/* Returns true if no part is waiting. */
static inline bool
tpm_decision_complete(const struct tpm_decision *d)
{
    return !d->n_waiting;
}

/* Sum of the known values; '*n_missing' (if nonnull) gets the number of
 * parts without a value. */
double tpm_decision_total(const struct tpm_decision *, size_t *n_missing);

/* Marks 'd' decided, to be kept until 'expires_ns' (so that later reports
 * for its key find it decided). */
void tpm_decision_decided(struct tpm_decisions *, struct tpm_decision *d,
                          uint64_t expires_ns);

/* Removes 'd' and frees its slot for another decision. */
void tpm_decision_remove(struct tpm_decisions *, struct tpm_decision *d);

/* Returns the pending decision started first if its deadline is at or
 * before 'now_ns', else NULL.  The caller decides or removes it before
 * asking again. */
struct tpm_decision *tpm_decisions_due(const struct tpm_decisions *,
                                       uint64_t now_ns);

/* Removes the decided decisions kept until 'now_ns' or before, in the
 * order they were decided (stopping at the first one kept longer). */
void tpm_decisions_expire(struct tpm_decisions *, uint64_t now_ns);

/* Returns the earliest of the first pending decision's deadline and the
 * first decided one's expiry, or UINT64_MAX if there is none. */
uint64_t tpm_decisions_next_ns(const struct tpm_decisions *);

/* Calls 'cb' for every decision, pending or decided, in slot order.  'cb'
 * may decide or remove the decision it is given, and no other; a decision
 * started meanwhile may or may not be visited. */
void tpm_decisions_for_each(struct tpm_decisions *,
                            void (*cb)(struct tpm_decision *, void *aux),
                            void *aux);

/* Calls 'cb' for every pending decision, in the order they started; 'cb'
 * may decide or remove the decision it is given, and no other. */
void tpm_decisions_for_each_pending(struct tpm_decisions *,
                                    void (*cb)(struct tpm_decision *,
                                               void *aux),
                                    void *aux);

/* Decisions in the engine: all, and those decided (kept). */
size_t tpm_decisions_count(const struct tpm_decisions *);
size_t tpm_decisions_count_decided(const struct tpm_decisions *);

#endif /* decision.h */
