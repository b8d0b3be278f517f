/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Threshold splitting and the decision engine (decision.h, which says what
 * they are for).
 *
 * The engine's memory: decisions live in slots, 'DECISION_CHUNK' to a
 * chunk, each slot 'stride' bytes: the decision, then room for
 * 'inline_parts' parts, rounded up to whole cache lines so that a
 * decision's key and counts share one.  Chunks are allocated as slots are
 * first needed and kept until the engine is destroyed; a freed slot goes
 * on a free list (last freed, first reused: its lines are likely still in
 * the cache) and keeps its part buffer, if it had to have one, for the
 * next decision.
 *
 * The index maps a key's hash to a slot: an open-addressing table of
 * (hash, slot + 1) pairs, 0 for empty, probed linearly from hash & mask.
 * A probe compares whole 32-bit hashes before it reads a decision, so a
 * lookup usually reads one entry and one decision.  The table doubles when
 * it would be more than half full and never shrinks; deletion shifts the
 * following entries of the cluster back instead of leaving tombstones, so
 * lookups never slow down with churn.
 *
 * Invariants: a slot is in the index iff 'in_use'; a decision in use is on
 * the pending list iff not 'decided', else on the decided list; a free
 * slot is on the free list; 'n_waiting' counts the parts in
 * TPM_PART_WAITING.
 */
#include "decision.h"

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

/* Decisions per chunk of slots (a power of 2). */
#define DECISION_CHUNK 64

/* A part zeroed is waiting. */
BUILD_ASSERT_DECL(TPM_PART_WAITING == 0);

struct decision_entry {
    uint32_t hash;
    uint32_t slot1;             /* Slot + 1; 0: empty. */
};

struct tpm_decisions {
    struct tpm_decisions_config cfg;
    size_t stride;              /* Bytes per slot, inline parts included. */

    char **chunks;              /* Each DECISION_CHUNK slots. */
    size_t n_chunks, allocated_chunks;
    uint32_t n_slots;           /* Slots ever used. */
    uint32_t max_slots;

    struct decision_entry *index;
    size_t mask;                /* Index entries - 1. */
    size_t n;                   /* Decisions in use (entries). */
    size_t n_decided;

    struct tpm_decision_node pending;   /* In the order they started. */
    struct tpm_decision_node decided;   /* In the order decided. */
    struct tpm_decision *free;  /* Free slots, through 'node.next'. */
};

static void
node_init(struct tpm_decision_node *l)
{
    l->prev = l->next = l;
}

static void
node_push_back(struct tpm_decision_node *l, struct tpm_decision_node *e)
{
    e->prev = l->prev;
    e->next = l;
    l->prev->next = e;
    l->prev = e;
}

static void
node_remove(struct tpm_decision_node *e)
{
    e->prev->next = e->next;
    e->next->prev = e->prev;
    e->prev = e->next = e;
}

static struct tpm_decision *
node_decision(const struct tpm_decision_node *node)
{
    return CONTAINER_OF(node, struct tpm_decision, node);
}

static struct tpm_decision *
slot_decision(const struct tpm_decisions *ds, uint32_t slot)
{
    return (struct tpm_decision *) (void *)
           (ds->chunks[slot / DECISION_CHUNK]
            + (size_t) (slot % DECISION_CHUNK) * ds->stride);
}

void
tpm_decision_key_init_port(struct tpm_decision_key *k, uint32_t event,
                           uint64_t epoch, const struct tpm_key *group,
                           uint16_t port)
{
    uint64_t h = tpm_key_hash(group)
                 ^ (((uint64_t) port << 32 | event) * 0x9e3779b97f4a7c15ULL)
                 ^ (epoch * 0xc2b2ae3d27d4eb4fULL);
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 32;

    k->event = event;
    k->hash = (uint32_t) h;
    k->epoch = epoch;
    k->group = *group;
    k->port = port;
}

void
tpm_decision_key_init(struct tpm_decision_key *k, uint32_t event,
                      uint64_t epoch, const struct tpm_key *group)
{
    tpm_decision_key_init_port(k, event, epoch, group, 0);
}

static bool
key_equal(const struct tpm_decision_key *a, const struct tpm_decision_key *b)
{
    return a->event == b->event && a->epoch == b->epoch
           && a->port == b->port && tpm_key_equal(&a->group, &b->group);
}

void
tpm_decisions_config_init(struct tpm_decisions_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->capacity = 1024;
    cfg->max = 0;
    cfg->part_size = sizeof(struct tpm_part);
    cfg->inline_parts = 8;
}

struct tpm_decisions *
tpm_decisions_create(const struct tpm_decisions_config *cfg)
{
    struct tpm_decisions *ds = xzalloc(sizeof *ds);

    if (cfg) {
        ds->cfg = *cfg;
    } else {
        tpm_decisions_config_init(&ds->cfg);
    }
    /* Parts are read as struct tpm_part, and their doubles aligned. */
    ds->cfg.part_size = ROUND_UP(MAX(ds->cfg.part_size,
                                     sizeof(struct tpm_part)),
                                 sizeof(double));
    ds->stride = ROUND_UP(sizeof(struct tpm_decision)
                          + ds->cfg.inline_parts * ds->cfg.part_size,
                          CACHE_LINE_SIZE);
    ds->max_slots = ds->cfg.max && ds->cfg.max < UINT32_MAX
                    ? ds->cfg.max : UINT32_MAX - 1;
    ds->mask = pow2_at_least(2 * MAX(ds->cfg.capacity, 1)) - 1;
    ds->index = xcalloc(ds->mask + 1, sizeof *ds->index);
    node_init(&ds->pending);
    node_init(&ds->decided);
    return ds;
}

void
tpm_decisions_destroy(struct tpm_decisions *ds)
{
    if (!ds) {
        return;
    }
    for (uint32_t i = 0; i < ds->n_slots; i++) {
        free(slot_decision(ds, i)->heap);
    }
    for (size_t i = 0; i < ds->n_chunks; i++) {
        free(ds->chunks[i]);
    }
    free(ds->chunks);
    free(ds->index);
    free(ds);
}

struct tpm_decision *
tpm_decision_find(const struct tpm_decisions *ds,
                  const struct tpm_decision_key *key)
{
    for (size_t i = key->hash & ds->mask; ds->index[i].slot1;
         i = (i + 1) & ds->mask) {
        if (ds->index[i].hash == key->hash) {
            struct tpm_decision *d = slot_decision(ds,
                                                   ds->index[i].slot1 - 1);
            if (key_equal(&d->key, key)) {
                return d;
            }
        }
    }
    return NULL;
}

struct tpm_decision *
tpm_decision_by_slot(const struct tpm_decisions *ds, uint32_t slot)
{
    if (slot < ds->n_slots) {
        struct tpm_decision *d = slot_decision(ds, slot);
        return d->in_use ? d : NULL;
    }
    return NULL;
}

static void
index_insert__(struct decision_entry *index, size_t mask, uint32_t hash,
               uint32_t slot1)
{
    size_t i = hash & mask;
    while (index[i].slot1) {
        i = (i + 1) & mask;
    }
    index[i].hash = hash;
    index[i].slot1 = slot1;
}

static void
index_insert(struct tpm_decisions *ds, const struct tpm_decision *d)
{
    if (2 * (ds->n + 1) > ds->mask + 1) {
        size_t mask = 2 * (ds->mask + 1) - 1;
        struct decision_entry *index = xcalloc(mask + 1, sizeof *index);
        for (size_t i = 0; i <= ds->mask; i++) {
            if (ds->index[i].slot1) {
                index_insert__(index, mask, ds->index[i].hash,
                               ds->index[i].slot1);
            }
        }
        free(ds->index);
        ds->index = index;
        ds->mask = mask;
    }
    index_insert__(ds->index, ds->mask, d->key.hash, d->slot + 1);
    ds->n++;
}

/* Deletes 'd''s entry with backward-shift deletion (no tombstones). */
static void
index_delete(struct tpm_decisions *ds, const struct tpm_decision *d)
{
    size_t mask = ds->mask;
    size_t i = d->key.hash & mask;
    while (ds->index[i].slot1 != d->slot + 1) {
        if (!ds->index[i].slot1) {
            return;
        }
        i = (i + 1) & mask;
    }
    for (;;) {
        size_t j = i;
        ds->index[i].slot1 = 0;
        for (;;) {
            j = (j + 1) & mask;
            if (!ds->index[j].slot1) {
                ds->n--;
                return;
            }
            size_t home = ds->index[j].hash & mask;
            /* Move entry j to i unless its home lies cyclically in
             * (i, j]. */
            if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) {
                break;
            }
        }
        ds->index[i] = ds->index[j];
        i = j;
    }
}

/* Returns a free slot's decision, or NULL if every slot up to the maximum
 * holds a pending decision. */
static struct tpm_decision *
slot_alloc(struct tpm_decisions *ds)
{
    struct tpm_decision *d;

    if (!ds->free && ds->n_slots >= ds->max_slots) {
        if (ds->decided.next == &ds->decided) {
            return NULL;
        }
        tpm_decision_remove(ds, node_decision(ds->decided.next));
    }
    if (ds->free) {
        d = ds->free;
        ds->free = d->node.next ? node_decision(d->node.next) : NULL;
        return d;
    }
    if (ds->n_slots / DECISION_CHUNK >= ds->n_chunks) {
        if (ds->n_chunks >= ds->allocated_chunks) {
            ds->allocated_chunks = MAX(16, 2 * ds->allocated_chunks);
            ds->chunks = xrealloc(ds->chunks, ds->allocated_chunks
                                              * sizeof *ds->chunks);
        }
        ds->chunks[ds->n_chunks++] = xzalloc_aligned(
            DECISION_CHUNK * ds->stride, CACHE_LINE_SIZE);
    }
    d = slot_decision(ds, ds->n_slots);
    d->slot = ds->n_slots++;
    d->part_size = ds->cfg.part_size;
    return d;
}

struct tpm_decision *
tpm_decision_start(struct tpm_decisions *ds,
                   const struct tpm_decision_key *key, size_t n_parts,
                   uint64_t now_ns, uint64_t deadline_ns)
{
    struct tpm_decision *d = slot_alloc(ds);
    if (!d) {
        return NULL;
    }

    if (n_parts <= ds->cfg.inline_parts) {
        d->parts = d + 1;
    } else {
        if (d->n_heap < n_parts) {
            free(d->heap);
            d->n_heap = n_parts;
            d->heap = xmalloc(n_parts * ds->cfg.part_size);
        }
        d->parts = d->heap;
    }
    memset(d->parts, 0, n_parts * ds->cfg.part_size);

    d->key = *key;
    d->n_parts = n_parts;
    d->n_waiting = n_parts;
    d->decided = false;
    d->in_use = true;
    d->started_ns = now_ns;
    d->deadline_ns = deadline_ns;
    d->expires_ns = 0;
    d->aux = 0;
    index_insert(ds, d);
    node_push_back(&ds->pending, &d->node);
    return d;
}

void
tpm_decision_set(struct tpm_decision *d, size_t part, double value)
{
    if (part < d->n_parts) {
        struct tpm_part *p = tpm_decision_part(d, part);
        if (p->state == TPM_PART_WAITING) {
            d->n_waiting--;
        }
        p->state = TPM_PART_VALUE;
        p->value = value;
    }
}

void
tpm_decision_missing(struct tpm_decision *d, size_t part)
{
    if (part < d->n_parts) {
        struct tpm_part *p = tpm_decision_part(d, part);
        if (p->state == TPM_PART_WAITING) {
            p->state = TPM_PART_MISSING;
            d->n_waiting--;
        }
    }
}

void
tpm_decision_missing_all(struct tpm_decision *d)
{
    for (size_t i = 0; d->n_waiting && i < d->n_parts; i++) {
        tpm_decision_missing(d, i);
    }
}

double
tpm_decision_total(const struct tpm_decision *d, size_t *n_missing)
{
    double total = 0;
    size_t missing = 0;
    for (size_t i = 0; i < d->n_parts; i++) {
        const struct tpm_part *p = tpm_decision_part(d, i);
        if (p->state == TPM_PART_VALUE) {
            total += p->value;
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
tpm_decision_decided(struct tpm_decisions *ds, struct tpm_decision *d,
                     uint64_t expires_ns)
{
    if (!d->decided) {
        d->decided = true;
        ds->n_decided++;
        node_remove(&d->node);
        node_push_back(&ds->decided, &d->node);
    }
    d->expires_ns = expires_ns;
}

void
tpm_decision_remove(struct tpm_decisions *ds, struct tpm_decision *d)
{
    if (!d->in_use) {
        return;
    }
    index_delete(ds, d);
    node_remove(&d->node);
    if (d->decided) {
        ds->n_decided--;
    }
    d->in_use = false;
    d->decided = false;
    d->gen++;
    d->node.next = ds->free ? &ds->free->node : NULL;
    ds->free = d;
}

struct tpm_decision *
tpm_decisions_due(const struct tpm_decisions *ds, uint64_t now_ns)
{
    if (ds->pending.next != &ds->pending) {
        struct tpm_decision *d = node_decision(ds->pending.next);
        if (d->deadline_ns <= now_ns) {
            return d;
        }
    }
    return NULL;
}

void
tpm_decisions_expire(struct tpm_decisions *ds, uint64_t now_ns)
{
    while (ds->decided.next != &ds->decided) {
        struct tpm_decision *d = node_decision(ds->decided.next);
        if (d->expires_ns > now_ns) {
            break;
        }
        tpm_decision_remove(ds, d);
    }
}

uint64_t
tpm_decisions_next_ns(const struct tpm_decisions *ds)
{
    uint64_t next = UINT64_MAX;
    if (ds->pending.next != &ds->pending) {
        next = node_decision(ds->pending.next)->deadline_ns;
    }
    if (ds->decided.next != &ds->decided) {
        next = MIN(next, node_decision(ds->decided.next)->expires_ns);
    }
    return next;
}

void
tpm_decisions_for_each(struct tpm_decisions *ds,
                       void (*cb)(struct tpm_decision *, void *), void *aux)
{
    for (uint32_t i = 0; i < ds->n_slots; i++) {
        struct tpm_decision *d = slot_decision(ds, i);
        if (d->in_use) {
            cb(d, aux);
        }
    }
}

void
tpm_decisions_for_each_pending(struct tpm_decisions *ds,
                               void (*cb)(struct tpm_decision *, void *),
                               void *aux)
{
    struct tpm_decision_node *node = ds->pending.next;
    while (node != &ds->pending) {
        struct tpm_decision_node *next = node->next;
        cb(node_decision(node), aux);
        node = next;
    }
}

size_t
tpm_decisions_count(const struct tpm_decisions *ds)
{
    return ds->n;
}

size_t
tpm_decisions_count_decided(const struct tpm_decisions *ds)
{
    return ds->n_decided;
}
