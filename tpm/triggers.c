/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libtpm's trigger repository (Trumpet section 5): the installed events'
 * slots and the map from their ids, their trigger instances (one per
 * event and group, "children" in the code: contiguous, with their history
 * of interval values), the instance map from (event, group) to instance,
 * and each instance's flow list (chunks of flow-table references).
 *
 * Phase 1 (match-scatter.c) finds or creates an instance when a flow
 * first matches an event and appends the flow to its list; the sweep
 * (sweep.c) walks the instances in order, reads their lists and removes
 * idle instances.
 * Both call in here; this file calls neither.
 *
 * The id map and the instance map are open-addressing tables with
 * backward-shift deletion, sized at tpm_create() to twice their bounds,
 * so neither ever fills and a lookup stays short.
 */
#include "tpm-private.h"

#include <string.h>

#include "util.h"

/* Event ids (chosen by the caller) map to slots through 'idmap', an open
 * addressing table with backward-shift deletion holding the installed
 * (not dying) events. */
uint32_t
tpm_idmap_pos__(const struct tpm *tpm, uint32_t id)
{
    for (uint32_t i = id * 0x9e3779b1u;; i++) {
        const struct tpm_idmap_entry *e = &tpm->idmap[i & tpm->idmap_mask];
        if (e->slot == TPM_NONE || e->id == id) {
            return i & tpm->idmap_mask;
        }
    }
}

void
tpm_idmap_delete__(struct tpm *tpm, uint32_t hole)
{
    uint32_t mask = tpm->idmap_mask;
    tpm->idmap[hole].slot = TPM_NONE;
    for (uint32_t i = (hole + 1) & mask;; i = (i + 1) & mask) {
        struct tpm_idmap_entry *e = &tpm->idmap[i];
        if (e->slot == TPM_NONE) {
            return;
        }
        uint32_t home = (e->id * 0x9e3779b1u) & mask;
        if (((i - home) & mask) >= ((i - hole) & mask)) {
            tpm->idmap[hole] = *e;
            e->slot = TPM_NONE;
            hole = i;
        }
    }
}

struct tpm_ev *
tpm_ev_find__(const struct tpm *tpm, uint32_t id)
{
    const struct tpm_idmap_entry *e = &tpm->idmap[tpm_idmap_pos__(tpm, id)];
    return e->slot != TPM_NONE ? &tpm->evs[e->slot] : NULL;
}

/* Destroys the definition of event 'ev' and makes its slot free. */
void
tpm_ev_slot_free__(struct tpm *tpm, struct tpm_ev *ev)
{
    tpm_event_destroy(ev->def);
    ev->def = NULL;
    if (ev->dying) {
        ev->dying = false;
        tpm->n_dying--;
    }
    tpm->free_evs[tpm->n_free_evs++] = (uint32_t) (ev - tpm->evs);
}

/* Returns the flags for a new interval of an instance of 'ev' starting at
 * absolute epoch 'start': partial if the event was added after it began
 * or its backfill has not completed. */
uint32_t
tpm_interval_flags__(const struct tpm *tpm, const struct tpm_ev *ev,
                     uint64_t start)
{
    if (ev->first_full == UINT64_MAX
        || (ev->first_full && tpm_abs_epoch(tpm, ev->first_full) > start)) {
        return TPM_CHILD_PARTIAL;
    }
    return 0;
}

/* The instance map: (event slot, group key, port) -> instance index. */

static uint32_t
imap_hash__(uint32_t ev, const struct tpm_key *gkey, uint16_t port)
{
    return tpm_key_hash(gkey) ^ ((ev ^ (uint32_t) port << 16)
                                 * 0x9e3779b1u);
}

static uint32_t
imap_find__(const struct tpm *tpm, uint32_t ev, const struct tpm_key *gkey,
            uint16_t port, uint32_t hash)
{
    for (uint32_t i = hash;; i++) {
        const struct tpm_imap_entry *e = &tpm->imap[i & tpm->imap_mask];
        if (e->child == TPM_NONE) {
            return TPM_NONE;
        }
        const struct tpm_child *c = &tpm->children[e->child];
        if (e->hash == hash && c->ev == ev && c->port == port
            && tpm_key_equal(&c->gkey, gkey)) {
            return i & tpm->imap_mask;
        }
    }
}

static void
imap_insert__(struct tpm *tpm, uint32_t hash, uint32_t child)
{
    for (uint32_t i = hash;; i++) {
        struct tpm_imap_entry *e = &tpm->imap[i & tpm->imap_mask];
        if (e->child == TPM_NONE) {
            e->hash = hash;
            e->child = child;
            return;
        }
    }
}

static void
imap_delete__(struct tpm *tpm, uint32_t hole)
{
    uint32_t mask = tpm->imap_mask;
    tpm->imap[hole].child = TPM_NONE;
    for (uint32_t i = (hole + 1) & mask;; i = (i + 1) & mask) {
        struct tpm_imap_entry *e = &tpm->imap[i];
        if (e->child == TPM_NONE) {
            return;
        }
        uint32_t home = e->hash & mask;
        if (((i - home) & mask) >= ((i - hole) & mask)) {
            tpm->imap[hole] = *e;
            e->child = TPM_NONE;
            hole = i;
        }
    }
}

/* Returns the instance of event slot 'evi' for group key 'gkey', creating
 * it if needed, or NULL if over a bound (counted). */
struct tpm_child *
tpm_instance_get__(struct tpm *tpm, uint32_t evi, const struct tpm_key *gkey,
                   uint16_t port)
{
    uint32_t hash = imap_hash__(evi, gkey, port);
    uint32_t pos = imap_find__(tpm, evi, gkey, port, hash);
    if (pos != TPM_NONE) {
        return &tpm->children[tpm->imap[pos].child];
    }

    struct tpm_ev *ev = &tpm->evs[evi];
    if (tpm->n_children >= tpm->p.max_triggers
        || ev->n_children >= tpm->p.max_children) {
        TPM_STAT_ADD(tpm, children_dropped, 1);
        return NULL;
    }
    uint32_t ci = tpm->n_children++;
    struct tpm_child *c = &tpm->children[ci];
    memset(c, 0, sizeof *c);
    c->ev = evi;
    c->head = TPM_NONE;
    c->in_idx = TPM_NONE;
    c->full_from = UINT64_MAX;
    c->gkey = *gkey;
    c->port = port;
    tpm->skip[ci].idx = TPM_NONE;
    if (ev->interval == 1 && !ev->uses_prev && ev->fast_agg >= 0
        && ev->n_kinds <= 2) {
        /* A planned instance (sweep.c): copy what the sweep needs. */
        c->planned = true;
        c->threshold = ev->fast_threshold;
        c->ev_id = ev->id;
        c->op = ev->fast_op;
        c->calc = ev->fast;
        c->op_classes = tpm_cmp_classes(ev->fast_op);
        switch ((enum tpm_agg) ev->fast.agg) {
        case TPM_AGG_SUM:
            c->value_acc = ev->fast.sum;
            break;
        case TPM_AGG_COUNT:
            c->value_acc = ev->fast.has_term ? ev->fast.sum : 0;
            break;
        case TPM_AGG_MIN:
        case TPM_AGG_MAX:
        case TPM_AGG_LAST:
            c->value_acc = ev->fast.ext;
            break;
        case TPM_AGG_AVG:
        case TPM_AGG_STDDEV:
        case TPM_N_AGGS:
        default:
            c->value_acc = -1;
            break;
        }
        for (int j = 0; j < 2; j++) {
            c->kind[j] = j < ev->n_kinds ? ev->kinds[j] : TPM_NO_KIND;
            c->kind_op[j] = j < ev->n_kinds ? ev->ops[j] : 0;
        }
    }
    /* Start with the interval of the epoch that the next sweep gathers
     * (the previous one), so a sweep in progress does not file that
     * epoch's statistics under the next interval. */
    uint64_t e = tpm_abs_epoch(tpm, tpm->cur);
    c->iv = (e ? e - 1 : 0) / ev->interval;
    c->flags = tpm_interval_flags__(tpm, ev, c->iv * ev->interval);
    imap_insert__(tpm, hash, ci);
    ev->n_children++;
    TPM_STAT_ADD(tpm, children_created, 1);
    TPM_STAT_SET(tpm, triggers, tpm->n_children);
    return c;
}

/* Returns child 'c''s flow-list chunks to the pool. */
void
tpm_list_free__(struct tpm *tpm, struct tpm_child *c)
{
    uint32_t ch = c->head;
    while (ch != TPM_NONE) {
        uint32_t next = tpm->chunk_next[ch];
        tpm->chunk_next[ch] = tpm->chunk_free;
        tpm->chunk_free = ch;
        TPM_STAT_ADD(tpm, chunks_used, -1);
        ch = next;
    }
    c->head = TPM_NONE;
    c->n_items = 0;
    c->in_idx = TPM_NONE;
}

/* Removes child 'ci' by moving the last child into its place. */
void
tpm_child_remove__(struct tpm *tpm, uint32_t ci)
{
    struct tpm_child *c = &tpm->children[ci];
    struct tpm_ev *ev = &tpm->evs[c->ev];

    tpm_list_free__(tpm, c);
    imap_delete__(tpm, imap_find__(tpm, c->ev, &c->gkey, c->port,
                                   imap_hash__(c->ev, &c->gkey, c->port)));
    if (!--ev->n_children && ev->dying) {
        tpm_ev_slot_free__(tpm, ev);
    }

    uint32_t last = --tpm->n_children;
    if (ci != last) {
        struct tpm_child *l = &tpm->children[last];
        uint32_t pos = imap_find__(tpm, l->ev, &l->gkey, l->port,
                                   imap_hash__(l->ev, &l->gkey, l->port));
        tpm->imap[pos].child = ci;
        *c = *l;
        memcpy(tpm_child_hist(tpm, ci), tpm_child_hist(tpm, last),
               tpm->hist_ring * sizeof *tpm->hist);
        tpm->skip[ci] = tpm->skip[last];
    }
    tpm->skip[last].idx = TPM_NONE;
    TPM_STAT_ADD(tpm, children_expired, 1);
    TPM_STAT_SET(tpm, triggers, tpm->n_children);
}

/* Appends flow item ('idx', 'gen') to 'c''s list.  Returns false if the
 * chunk pool is exhausted. */
bool
tpm_list_append__(struct tpm *tpm, struct tpm_child *c, uint32_t idx,
              uint32_t gen)
{
    if (c->in_idx == TPM_NONE) {
        c->in_idx = idx;
        c->in_gen = gen;
        return true;
    }
    /* A second flow: the sweep cannot skip the instance for the first
     * flow's quiet. */
    tpm->skip[c - tpm->children].idx = TPM_NONE;
    uint32_t ch = c->head;
    if (ch == TPM_NONE || tpm->chunk_n[ch] == TPM_CHUNK_ITEMS) {
        /* New chunks go at the head, so appending is O(1). */
        uint32_t nc = tpm->chunk_free;
        if (nc == TPM_NONE) {
            TPM_STAT_ADD(tpm, chunks_exhausted, 1);
            return false;
        }
        tpm->chunk_free = tpm->chunk_next[nc];
        tpm->chunk_next[nc] = ch;
        tpm->chunk_n[nc] = 0;
        c->head = ch = nc;
        TPM_STAT_ADD(tpm, chunks_used, 1);
    }
    struct tpm_chunk *k = &tpm->chunks[ch];
    k->idx[tpm->chunk_n[ch]] = idx;
    k->gen[tpm->chunk_n[ch]] = gen;
    tpm->chunk_n[ch]++;
    c->n_items++;
    return true;
}

/* Returns the index of the instance of event slot 'evi' for group key
 * 'gkey' and port 'port', or TPM_NONE. */
uint32_t
tpm_instance_find__(const struct tpm *tpm, uint32_t evi,
                    const struct tpm_key *gkey, uint16_t port)
{
    uint32_t pos = imap_find__(tpm, evi, gkey, port,
                               imap_hash__(evi, gkey, port));
    return pos == TPM_NONE ? TPM_NONE : tpm->imap[pos].child;
}
