/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libtpm phase 2: gather, test and report (Trumpet section 5.5,
 * algorithm 3).
 *
 * During epoch i the sweep walks the trigger repository in order and, for
 * each trigger instance ("child"):
 *
 *   1. closes the intervals that ended before epoch i-1's interval (after
 *      a gap in which no sweep ran: at most K of them are evaluated);
 *   2. adds the epoch-(i-1) statistics of each of its flows into the
 *      interval's accumulators, dropping list items whose flow entry was
 *      reused or freed (generation mismatch) and freeing emptied chunks;
 *   3. when epoch i-1 ends the event's interval, evaluates the predicate,
 *      records the value in the instance's history and reports if it holds
 *      and the interval saw packets;
 *   4. removes the instance when it has no flows and saw no packets in the
 *      last two intervals (its group is idle).
 *
 * Work is bounded by a time budget.  Reading the TSC costs ~25 cycles, so
 * as in the paper the sweep keeps a running estimate of its cost per list
 * item, decrements a tenth of the budget by that estimate after each chunk
 * (64 items at most) or instance, and reads the clock only when that
 * tenth is used up.  The cursor (instance, chunk) survives between steps.
 * Chunks are processed whole, so compaction never straddles a step, and
 * packets that add flows to an instance between steps (new chunks go to
 * the head of the list) never disturb the cursor.
 */
#include "tpm-private.h"

#include <math.h>
#include <string.h>

#include "clock.h"

/* For the few helpers of the per-instance path that GCC would otherwise
 * call out of line (their other callers are cold): the direct path is
 * ~200 instructions per instance, and a call costs ~10 with its register
 * saves.  The lookahead's helpers must be inlined for another reason: a
 * function that only loads and prefetches is "pure" to GCC, and a call of
 * a pure function whose result is unused is deleted, prefetches and all
 * (so the planned run went without its lookahead until 2026-11-29;
 * tests/prefetch-kept.sh checks the objects). */
#define SWEEP_INLINE inline __attribute__((always_inline))

struct value_ctx {
    const struct tpm_ev *ev;
    const double *acc;          /* This interval's accumulators. */
    const double *prev;         /* The previous interval's. */
};

/* Returns the value of aggregate 'a' over accumulators 'acc'. */
static inline double
agg_compute__(const struct tpm_agg_calc *a, const double *acc)
{
    double n = acc[0];
    switch ((enum tpm_agg) a->agg) {
    case TPM_AGG_SUM:
        return acc[a->sum];
    case TPM_AGG_COUNT:
        return a->has_term ? acc[a->sum] : n;
    case TPM_AGG_AVG:
        return n ? acc[a->sum] / n : 0;
    case TPM_AGG_MIN:
    case TPM_AGG_MAX:
    case TPM_AGG_LAST:
        return n ? acc[a->ext] : 0;
    case TPM_AGG_STDDEV: {
        if (!n) {
            return 0;
        }
        double mean = acc[a->sum] / n;
        double var = acc[a->sumsq] / n - mean * mean;
        return var > 0 ? sqrt(var) : 0;
    }
    case TPM_N_AGGS:
    default:
        return 0;
    }
}

static double
agg_value__(const struct tpm_expr *node, bool prev, void *ctx_)
{
    const struct value_ctx *ctx = ctx_;
    for (int i = 0; i < ctx->ev->n_aggs; i++) {
        if (ctx->ev->aggs[i].node == node) {
            return agg_compute__(&ctx->ev->aggs[i].calc,
                                 prev ? ctx->prev : ctx->acc);
        }
    }
    return 0;
}

/* Returns the value of event 'ev' over accumulators 'acc' (and 'prev' for
 * the previous interval) and stores in '*satisfied' whether the predicate
 * holds. */
static inline double
ev_value__(const struct tpm_ev *ev, const double *acc, const double *prev,
           bool *satisfied)
{
    if (ev->fast_agg >= 0) {
        /* "AGG op CONSTANT": one aggregate, one comparison. */
        double v = agg_compute__(&ev->fast, acc);
        *satisfied = tpm_compare(ev->fast_op, v, ev->fast_threshold);
        return v;
    }

    struct value_ctx ctx = { .ev = ev, .acc = acc, .prev = prev };
    *satisfied = tpm_expr_eval(ev->def->pred, agg_value__, &ctx) != 0;
    return tpm_expr_eval(ev->def->value, agg_value__, &ctx);
}

/* Returns the flags for child 'c''s interval starting at absolute epoch
 * 'start', as tpm_interval_flags__() does, from the copy of the event's
 * 'first_full' in the child's line 0 once it is known. */
static inline uint32_t
child_flags__(const struct tpm *tpm, struct tpm_child *c,
              const struct tpm_ev *ev, uint64_t start)
{
    if (OVS_UNLIKELY(c->full_from == UINT64_MAX)) {
        if (ev->first_full == UINT64_MAX) {
            return TPM_CHILD_PARTIAL;
        }
        c->full_from = ev->first_full ? tpm_abs_epoch(tpm, ev->first_full)
                                      : 0;
    }
    return start < c->full_from ? TPM_CHILD_PARTIAL : 0;
}

/* Child 'c' entered the interval of epochs 'start'..'end' with lost
 * epochs pending (TPM_CHILD_LOST): flags the interval partial if it holds
 * one, and forgets those that are behind it. */
static void
child_lost__(struct tpm_child *c, uint64_t start, uint64_t end)
{
    if (c->lost_lo <= end && c->lost_hi >= start) {
        c->flags |= TPM_CHILD_PARTIAL;
    }
    if (c->lost_hi > end) {
        c->flags |= TPM_CHILD_LOST;
    }
}

/* Queues the satisfaction of instance 'c' (of the event with id
 * 'event_id') in the interval ending at absolute epoch 'end', with value
 * 'value': written straight into the report ring's slot, or counted
 * dropped if the ring is full. */
static SWEEP_INLINE void
report_satisfied__(struct tpm *tpm, const struct tpm_child *c,
                   uint32_t event_id, uint64_t end, double value)
{
    struct tpm_report *r = spsc_reserve(tpm->report_ring);

    if (OVS_UNLIKELY(!r)) {
        TPM_STAT_ADD(tpm, reports_dropped, 1);
        return;
    }
    /* Field by field: a compound literal would clear the whole slot
     * first (a string store of 12 words, a fifth of the report's
     * instructions); the padding is never read.
     * A field added to the report must be written here too (the
     * assertion below the function). */
    r->type = TPM_REPORT_SATISFIED;
    r->event_id = event_id;
    r->epoch = end;
    r->value = value;
    r->cookie = 0;
    r->status = 0;
    r->flags = c->flags & TPM_CHILD_PARTIAL ? TPM_REPORT_PARTIAL : 0;
    r->error = NULL;
    r->group = c->gkey;
    r->tun_id = c->gkey.tun ? tpm_tenants_vni(tpm->tenants, c->gkey.tun) : 0;
    r->port = c->port;
    spsc_publish(tpm->report_ring);
    TPM_STAT_ADD(tpm, reports, 1);
}
BUILD_ASSERT_DECL(sizeof(struct tpm_report) == 96);

/* Ends child 'ci''s current interval, whose accumulators are 'acc' (the
 * child's own, or a direct instance's on the stack): evaluates, records
 * and reports it, and moves the child to its next interval.  The caller
 * moves 'acc' to 'prev' and clears it.  If 'planned', reads nothing from
 * event 'ev' unless the child's 'full_from' is unknown. */
static SWEEP_INLINE void
interval_end__(struct tpm *tpm, uint32_t ci, const struct tpm_ev *ev,
               const double *acc, bool planned)
{
    struct tpm_child *c = &tpm->children[ci];

    /* An interval in which the group saw no packet is neither evaluated,
     * recorded nor reported: polls for it answer TPM_POLL_NO_GROUP. */
    if (acc[0] > 0) {
        bool sat;
        uint64_t end;
        double value;
        if (planned) {
            /* From the copy of the event in line 0 (one-epoch
             * interval, "AGG op CONSTANT"). */
            end = c->iv;
            value = agg_compute__(&c->calc, acc);
            sat = tpm_compare(c->op, value, c->threshold);
        } else {
            end = (c->iv + 1) * ev->interval - 1;
            value = ev_value__(ev, acc, c->prev, &sat);
        }
        struct tpm_hist *h = tpm_hist_at(tpm_child_hist(tpm, ci),
                                         c->hist_seq, 0, tpm->hist_ring);
        h->epoch = end;
        h->value = value;
        tpm_hist_push(c, tpm->hist_ring);
        c->sat_last = sat;
        if (sat) {
            report_satisfied__(tpm, c, planned ? c->ev_id : ev->id, end,
                               value);
        }
    }
    c->prev_pkts = acc[0] > 0;
    c->iv++;
    uint8_t lost = c->flags & TPM_CHILD_LOST;
    uint64_t start = planned ? c->iv : c->iv * ev->interval;
    c->flags = child_flags__(tpm, c, ev, start);
    if (OVS_UNLIKELY(lost)) {
        child_lost__(c, start, planned ? start : start + ev->interval - 1);
    }
}

/* Closes child 'ci''s current interval: evaluates, records, reports. */
static inline void
child_close__(struct tpm *tpm, uint32_t ci)
{
    struct tpm_child *c = &tpm->children[ci];
    const struct tpm_ev *ev = &tpm->evs[c->ev];

    interval_end__(tpm, ci, ev, c->acc, false);
    if (ev->uses_prev) {
        memcpy(c->prev, c->acc, sizeof c->prev);
    }
    memset(c->acc, 0, sizeof c->acc);
}

/* Brings child 'ci' to the interval containing the swept epoch, closing
 * the ones before it. */
static void
child_roll__(struct tpm *tpm, uint32_t ci, uint64_t iv)
{
    struct tpm_child *c = &tpm->children[ci];
    uint32_t k = tpm->p.history_len;

    if (c->iv >= iv) {
        return;
    }
    child_close__(tpm, ci);
    if (iv - c->iv > k) {
        /* A long gap: only the last K intervals can be in the history. */
        c->iv = iv - k;
        memset(c->prev, 0, sizeof c->prev);
        c->prev_pkts = false;
    }
    while (c->iv < iv) {
        child_close__(tpm, ci);
    }
}

/* Retires flow 'f', which had no packet in the swept epoch, if it has had
 * none for more than 'retire' epochs: its generation changes, which drops
 * it from every list lazily, and it is matched again if it sends again.
 * Returns true if it did. */
static SWEEP_INLINE bool
flow_retire__(struct tpm *tpm, struct tpm_flow *f, uint32_t retire)
{
    if (tpm->tag - tpm_flow_last_tag(f) <= retire) {
        return false;
    }
    f->gen++;
    f->state = TPM_FLOW_PENDING;
    f->sum_mask = 0;
    f->n_matched = 0;
    TPM_STAT_ADD(tpm, flows_retired, 1);
    return true;
}

/* Looks up flow item ('idx', 'gen') for the sweep of epoch tag 'tag'.
 * Returns false if the item is to be dropped (see item_gather__()),
 * retiring the flow if it went idle.  Otherwise stores the flow in '*fp'
 * and in '*stp' its statistics of the swept epoch, or NULL if it had no
 * packets then. */
static SWEEP_INLINE bool
item_stats__(struct tpm *tpm, uint32_t idx, uint32_t gen, uint32_t tag,
             struct tpm_flow **fp, const struct tpm_flow_stats **stp)
{
    struct tpm_flow *f = &tpm->ft.flows[idx];
    if (f->gen != gen || f->state != TPM_FLOW_LIVE) {
        return false;
    }
    if (f->tag[tag & 1] != tag) {
        /* No packets in the swept epoch. */
        if (flow_retire__(tpm, f, tpm->p.retire_epochs)) {
            return false;
        }
        *stp = NULL;
        return true;
    }
    *fp = f;
    *stp = &f->stats[tag & 1];
    return true;
}

/* Returns true if flow item 'idx' of instance 'c', whose history is 'hc'
 * and whose event's interval is 'interval' epochs, had no packet in the
 * swept epoch (the touched bitmap 'touched', tpm/flow-table.h) and cannot
 * be due for retirement ('retire' epochs) in the current absolute epoch
 * 'now': the instance's newest history entry (a ring of 'ring'), an interval
 * with packets, bounds the flow's last packet from below by that
 * interval's first epoch ("Quiet instances", below).  Then the sweep need
 * not read the flow entry. */
static SWEEP_INLINE bool
item_quiet__(const uint64_t *touched, uint32_t idx,
             const struct tpm_child *c, struct tpm_hist *hc,
             uint32_t ring, uint32_t interval, uint64_t now, uint32_t retire)
{
    if (tpm_flow_touched(touched, idx) || !c->hist_seq) {
        return false;
    }
    uint64_t newest = tpm_hist_at(hc, c->hist_seq, 1, ring)->epoch;
    return now - (newest + 1 - interval) <= retire;
}

/* item_quiet__() for the inline item of instance 'ci' of event 'ev'. */
static inline bool
inline_quiet__(const struct tpm *tpm, uint32_t ci, const struct tpm_ev *ev,
               uint32_t tag)
{
    const struct tpm_child *c = &tpm->children[ci];
    return item_quiet__(tpm->ft.touched[tag & 1], c->in_idx, c,
                        tpm_child_hist(tpm, ci), tpm->hist_ring,
                        ev->interval, tpm_abs_epoch(tpm, tpm->cur),
                        tpm->p.retire_epochs);
}

/* Returns the offset from a flow entry of the second line the sweep of
 * epoch tag 'tag' prefetches: that epoch's statistics line if a flow may
 * be read there (an event keeps summaries, or the table has held a flow
 * that is not IPv4: tpm_flow_count()), else line 0 again, so that
 * flow_prefetch__() tests nothing.  An IPv4 flow without summaries is
 * read in its line 0 alone. */
static inline size_t
stats_off__(const struct tpm *tpm, uint32_t tag)
{
    return (tpm->kind_refs || tpm->ft.has_v6
            ? offsetof(struct tpm_flow, stats[tag & 1]) : 0);
}

/* Prefetches the lines of flow entry 'f' that the sweep reads: its first
 * line (generation, state, epoch tags, the counts of an IPv4 flow without
 * summaries) and the line at offset 'off' (stats_off__()). */
static SWEEP_INLINE void
flow_prefetch__(const struct tpm_flow *f, size_t off)
{
    tpm_prefetch(f);
    tpm_prefetch((const char *) f + off);
}

/* Combines one flow's summary value 'v' into accumulator '*a' by the
 * summary's operator 'op' (enum tpm_sum_op, with TPM_SUM_INT); 'first':
 * no flow was combined into it before in this interval. */
static SWEEP_INLINE void
acc_combine__(double *a, double v, uint8_t op, bool first)
{
    switch ((enum tpm_sum_op) (op & ~TPM_SUM_INT)) {
    case TPM_SUM_SUM:
    case TPM_SUM_SUMSQ:
    case TPM_SUM_NONZERO:
        /* The first flow's value stored, not added to the zero there: a
         * constant 'first' leaves no addition (0.0 + v is not v for the
         * compiler, whose -0.0 would become +0.0). */
        *a = first ? v : *a + v;
        break;
    case TPM_SUM_MIN:
        *a = first || v < *a ? v : *a;
        break;
    case TPM_SUM_MAX:
        *a = first || v > *a ? v : *a;
        break;
    case TPM_SUM_LAST:
    default:
        *a = v;
        break;
    }
}

/* Adds flow item ('idx', 'gen') of an instance to its accumulators 'acc'.
 * Returns false if the item is to be dropped: its flow entry was reused
 * or freed, or the flow has gone idle (no packet for more than
 * 'retire_epochs' epochs).  An idle flow is retired: its generation
 * changes, which drops it from every list lazily, and it is matched again
 * if it sends again.  This keeps the sweep proportional to the recently
 * active flows, not to every flow seen in the last 'idle_epochs'. */
static SWEEP_INLINE bool
item_gather__(struct tpm *tpm, double *acc, const struct tpm_ev *ev,
              uint32_t idx, uint32_t gen, uint32_t tag)
{
    struct tpm_flow *f;
    const struct tpm_flow_stats *st;
    if (!item_stats__(tpm, idx, gen, tag, &f, &st)) {
        return false;
    }
    if (!st) {
        return true;
    }

    bool first = acc[0] == 0;
    acc[0] += tpm_flow_count(f, tag & 1)->packets;
    int i = 0;
    for (uint32_t bits = f->sum_mask; bits; bits &= bits - 1, i++) {
        int j = ev->kind_acc[__builtin_ctz(bits)];
        if (j < 0) {
            continue;
        }
        acc_combine__(&acc[1 + j], tpm_slot_value(st->slot[i], ev->ops[j]),
                      ev->ops[j], first);
    }
    return true;
}

/* Adds summary 'j' (0 or 1) of planned instance 'c' from flow 'f''s
 * statistics 'st' to accumulator 'acc[1 + j]'. */
static SWEEP_INLINE void
planned_kind__(const struct tpm_child *c, const struct tpm_flow *f,
               const struct tpm_flow_stats *st, double *acc, int j,
               bool first)
{
    uint32_t bit = 1u << c->kind[j];
    if (!(f->sum_mask & bit)) {
        return;
    }
    /* The slot of kind 'kind[j]' follows those of the flow's lower kinds
     * (counted without popcount, which the baseline x86-64 target makes a
     * call). */
    int i = 0;
    for (uint32_t b = f->sum_mask & (bit - 1); b; b &= b - 1) {
        i++;
    }
    acc_combine__(&acc[1 + j], tpm_slot_value(st->slot[i], c->kind_op[j]),
                  c->kind_op[j], first);
}

/* Adds the summaries of flow 'f' in the swept epoch, of parity 'p', to
 * the accumulators 'acc' (1 and 2) of planned instance 'c' and returns
 * its packets then: what item_gather__() does from the event, from the
 * instance's copy of it.  The packets are counted by the caller in an
 * integer ('acc[0]' is written only for an aggregate computed from it,
 * agg_compute__()).  'first': no flow added yet in this interval, which
 * zeroes the summaries' accumulators; given as a constant for an
 * instance's only flow so that the compiler keeps its path short.  The
 * two summaries unrolled: constant accumulator addresses, no counter.
 * An instance with a summary reads the flow's statistics line, which
 * holds its counts too: the flow keeps the event's summaries from its
 * attachment on (flow_attach__()), so it keeps its counts there
 * (tpm_flow_count()). */
static SWEEP_INLINE uint32_t
planned_add__(const struct tpm_child *c, const struct tpm_flow *f, int p,
              double *acc, bool first)
{
    if (c->kind[0] == TPM_NO_KIND) {
        return tpm_flow_count_const(f, p)->packets;
    }
    const struct tpm_flow_stats *st = &f->stats[p];
    if (first) {
        acc[1] = acc[2] = 0;
    }
    planned_kind__(c, f, st, acc, 0, first);
    if (c->kind[1] != TPM_NO_KIND) {
        planned_kind__(c, f, st, acc, 1, first);
    }
    return st->count.packets;
}

/* item_gather__() for planned instance 'c': adds the item's packets in
 * the swept epoch to '*pk' and its summaries to 'acc' (1 and 2; 'first':
 * '*pk' is 0), with the flow table's entries 'flows' and the retirement
 * age 'retire' given (the planned run keeps them in registers). */
static SWEEP_INLINE bool
planned_item__(struct tpm *tpm, struct tpm_flow *flows, uint32_t retire,
               const struct tpm_child *c, uint32_t idx, uint32_t gen,
               uint32_t tag, double *acc, uint64_t *pk, bool first)
{
    struct tpm_flow *f = &flows[idx];

    if (f->gen != gen || f->state != TPM_FLOW_LIVE) {
        return false;
    }
    if (f->tag[tag & 1] != tag) {
        return !flow_retire__(tpm, f, retire);
    }
    *pk += planned_add__(c, f, tag & 1, acc, first);
    return true;
}

/* Processes chunk 'ch' of child 'c': gathers it into 'acc' and compacts
 * it in place.  Gathers as item_gather__() does from event 'ev', or, if
 * 'planned', as planned_item__() does from the instance's copy of it ('ev'
 * unused), the packets into '*pk'.  Returns the number of items
 * visited. */
static SWEEP_INLINE uint32_t
chunk_gather__(struct tpm *tpm, struct tpm_child *c, const struct tpm_ev *ev,
               uint32_t ch, uint32_t tag, double *acc, uint64_t *pk,
               bool planned)
{
    struct tpm_chunk *k = &tpm->chunks[ch];
    uint32_t n = tpm->chunk_n[ch], w = 0;
    size_t off = stats_off__(tpm, tag);

    /* The flow entries' lines 4 items ahead; the first 4 at once, so that
     * short lists (the usual) overlap their misses. */
    for (uint32_t i = 0; i < MIN(n, 4); i++) {
        flow_prefetch__(&tpm->ft.flows[k->idx[i]], off);
    }
    for (uint32_t i = 0; i < n; i++) {
        if (i + 4 < n) {
            flow_prefetch__(&tpm->ft.flows[k->idx[i + 4]], off);
        }
        if (planned
            ? planned_item__(tpm, tpm->ft.flows, tpm->p.retire_epochs, c,
                             k->idx[i], k->gen[i], tag, acc, pk, *pk == 0)
            : item_gather__(tpm, acc, ev, k->idx[i], k->gen[i], tag)) {
            k->idx[w] = k->idx[i];
            k->gen[w] = k->gen[i];
            w++;
        }
    }
    if (w != n) {
        TPM_STAT_ADD(tpm, sweep_stale_items, n - w);
        c->n_items -= n - w;
        tpm->chunk_n[ch] = w;
    }
    return n;
}

/* Unlinks empty chunk 'ch' (preceded by 'prev', or TPM_NONE if it was the
 * head when the sweep reached it) from child 'c' and frees it. */
static void
chunk_unlink__(struct tpm *tpm, struct tpm_child *c, uint32_t prev,
               uint32_t ch)
{
    uint32_t next = tpm->chunk_next[ch];
    if (prev == TPM_NONE) {
        if (c->head == ch) {
            c->head = next;
        } else {
            /* Packets pushed new chunks at the head since. */
            for (prev = c->head; tpm->chunk_next[prev] != ch;
                 prev = tpm->chunk_next[prev]) {
                continue;
            }
            tpm->chunk_next[prev] = next;
        }
    } else {
        tpm->chunk_next[prev] = next;
    }
    tpm->chunk_next[ch] = tpm->chunk_free;
    tpm->chunk_free = ch;
    TPM_STAT_ADD(tpm, chunks_used, -1);
}

/* Returns true if instance 'c' can go: it has no flows, saw no packets in
 * its current and previous interval, and its history holds nothing from
 * the last K intervals before absolute epoch 'abs' (so a poll for any of
 * them is still answered from the history).  'acc_clear' says that the
 * caller knows the current interval saw no packets yet (it has just
 * begun), which spares reading the accumulators' line; 'interval' is
 * the event's (a planned instance's is 1, and its event is not read). */
static inline bool
child_idle__(const struct tpm *tpm, const struct tpm_child *c,
             uint32_t interval, uint64_t abs, bool acc_clear)
{
    if (c->in_idx != TPM_NONE || c->head != TPM_NONE || c->prev_pkts
        || (!acc_clear && c->acc[0] != 0)) {
        return false;
    }
    if (!c->hist_seq) {
        return true;
    }
    struct tpm_hist *h = tpm_child_hist(tpm, (uint32_t) (c - tpm->children));
    uint64_t newest = tpm_hist_at(h, c->hist_seq, 1, tpm->hist_ring)->epoch;
    return newest + (uint64_t) tpm->p.history_len * interval <= abs;
}

void
tpm_sweep_start__(struct tpm *tpm, uint64_t epoch)
{
    memset(&tpm->sw, 0, sizeof tpm->sw);
    tpm->sw.active = true;
    tpm->sw.epoch = epoch;
    tpm->sw.rc = TPM_NONE;
    tpm->sw.prev_wc = TPM_NONE;
    /* The lines of the table's flows that the sweep reads (one, or two
     * with a statistics line: stats_off__()), against the L2 cache. */
    uint64_t lines = stats_off__(tpm, 0) ? 2 : 1;
    tpm->sw.fetch_all = ((uint64_t) tpm->ft.n_live * lines * CACHE_LINE_SIZE
                         <= tpm->sweep_cache_bytes);
    TPM_STAT_ADD(tpm, sweeps_started, 1);
}

void
tpm_sweep_abandon__(struct tpm *tpm)
{
    /* Instances not reached lost that epoch's statistics; so did the one
     * in progress (partly gathered).  The epoch may lie beyond an
     * instance's current interval (its previous sweep was abandoned too,
     * before reaching it): then the interval that holds it is flagged when
     * the instance gets there. */
    uint64_t abs = tpm_abs_epoch(tpm, tpm->sw.epoch);
    for (uint32_t ci = tpm->sw.child; ci < tpm->n_children; ci++) {
        struct tpm_child *c = &tpm->children[ci];
        uint64_t interval = c->planned ? 1 : tpm->evs[c->ev].interval;
        tpm->skip[ci].idx = TPM_NONE;
        if (abs / interval <= c->iv) {
            c->flags |= TPM_CHILD_PARTIAL;
        } else if (!(c->flags & TPM_CHILD_LOST)) {
            c->flags |= TPM_CHILD_LOST;
            c->lost_lo = c->lost_hi = abs;
        } else {
            c->lost_lo = MIN(c->lost_lo, abs);
            c->lost_hi = MAX(c->lost_hi, abs);
        }
    }
    tpm->sw.active = false;
    TPM_STAT_ADD(tpm, sweeps_unfinished, 1);
}

/* The share of instances found quiet in a sweep from which the next one
 * skips them (below it the window's tests and the entries' upkeep cost
 * the visits more than the skips save: docs/benchmarks.md, "Sweep with
 * many instances"), and the share below which a skipping sweep's next
 * one stops, in quarters. */
#define TPM_SWEEP_SKIP_ENTER 2
#define TPM_SWEEP_SKIP_LEAVE 1

static void
sweep_finish__(struct tpm *tpm)
{
    /* Skip entries are kept only while skipping: the sweep that starts
     * skipping clears them all first, and writes each as it visits. */
    uint64_t quarters = (tpm->n_children
                         ? (uint64_t) tpm->sw.quiet * 4 / tpm->n_children
                         : 0);
    bool skipping = (tpm->sweep_skipping
                     ? quarters >= TPM_SWEEP_SKIP_LEAVE
                     : quarters >= TPM_SWEEP_SKIP_ENTER);
    if (skipping && !tpm->sweep_skipping) {
        tpm_skip_clear(tpm, 0, tpm->n_children);
    }
    tpm->sweep_skipping = skipping;
    tpm->sw.active = false;
    uint64_t ns = MAX(tpm->sw.ns, 1);
    TPM_STAT_SET(tpm, sweep_ns_last, ns);
    __atomic_store_n(&tpm->sweep_ns[tpm->sweep_ns_pos], ns,
                     __ATOMIC_RELAXED);
    tpm->sweep_ns_pos = (tpm->sweep_ns_pos + 1) % TPM_SWEEP_RING;
    TPM_STAT_ADD(tpm, sweeps_done, 1);
}

/* How far ahead of the instance being swept the sweep prefetches: the
 * instance's line 0 TPM_SWEEP_AHEAD_CHILD instances ahead, and the flow
 * entry of its inline item and its history slot TPM_SWEEP_AHEAD_FLOW
 * ahead (reading 'in_idx' and 'hist_seq' there, from the line fetched
 * earlier).  An active one-flow instance takes ~20-25 ns, and a flow
 * entry is a random access to a table larger than the caches (~100 ns
 * from DRAM): a lead of four instances left part of each miss exposed.
 * Measured with 65536 active instances (docs/benchmarks.md, "Sweep with
 * many instances"): leads of 8 to 12 flows and 16 to 32 lines swept in
 * 0.80 of the time of 4 and 8, and 16 flows or more were slower again
 * (more misses in flight than the core tracks) while a flow took two
 * lines; an IPv4 flow without summaries takes one (tpm/flow-table.h),
 * and a lead of 16 flows (the instance's line 32 ahead, so that its
 * flow index is read from a line fetched earlier) sweeps in 0.91 of
 * the time of 8 and 16. */
#define TPM_SWEEP_AHEAD_CHILD 32
#define TPM_SWEEP_AHEAD_FLOW 16
BUILD_ASSERT_DECL(TPM_SWEEP_AHEAD_CHILD <= TPM_CHILD_PAD);
BUILD_ASSERT_DECL(TPM_SWEEP_AHEAD_FLOW <= TPM_CHILD_PAD);

/* Planned instances swept by one call of sweep_planned_run__() at most. */
#define TPM_SWEEP_RUN 32

static SWEEP_INLINE void
sweep_prefetch_flow__(const struct tpm *tpm, uint32_t ci, uint32_t tag)
{
    const struct tpm_child *c = &tpm->children[ci];
    uint32_t nf = c->in_idx;
    /* A one-flow instance whose flow had no packet in the swept epoch
     * reads its newest history entry instead of the flow entry
     * ("Quiet instances"). */
    bool quiet = false;

    if (nf != TPM_NONE) {
        if (c->head == TPM_NONE
            && !tpm_flow_touched(tpm->ft.touched[tag & 1], nf)) {
            quiet = true;
        } else {
            flow_prefetch__(&tpm->ft.flows[nf], stats_off__(tpm, tag));
        }
    }
    /* The event's first line: with thousands of events it is seldom in
     * cache, and every test of the instance depends on it. */
    if (!c->planned) {
        tpm_prefetch(&tpm->evs[c->ev]);
    }
    if (c->head != TPM_NONE) {
        /* Not direct: its accumulators will be read and written, and its
         * first chunk's items (both lines) read. */
        const struct tpm_chunk *k = &tpm->chunks[c->head];
        tpm_prefetch_write(c->acc);
        tpm_prefetch(k->idx);
        tpm_prefetch(k->gen);
    }
    if (c->sat_last) {
        tpm_prefetch(&c->gkey);
    }
    struct tpm_hist *h = tpm_child_hist(tpm, ci);
    if ((nf == TPM_NONE && c->head == TPM_NONE) || quiet) {
        /* No flows left: the idle test will read the newest entry. */
        tpm_prefetch(tpm_hist_at(h, c->hist_seq, 1, tpm->hist_ring));
    } else {
        tpm_prefetch_write(tpm_hist_at(h, c->hist_seq, 0, tpm->hist_ring));
    }
}

static SWEEP_INLINE void
sweep_prefetch__(const struct tpm *tpm, uint32_t ci, uint32_t tag)
{
    if (ci + TPM_SWEEP_AHEAD_CHILD < tpm->n_children) {
        tpm_prefetch(&tpm->children[ci + TPM_SWEEP_AHEAD_CHILD]);
    }
    if (ci + TPM_SWEEP_AHEAD_FLOW < tpm->n_children) {
        sweep_prefetch_flow__(tpm, ci + TPM_SWEEP_AHEAD_FLOW, tag);
    }
}

/* The planned run's lookahead, with the flow table's base in a register:
 * the line 0 of the instance TPM_SWEEP_AHEAD_CHILD past instance 'c', and
 * for the one TPM_SWEEP_AHEAD_FLOW past it its flow entry's lines (line 0
 * and the one at 'off', stats_off__()) and its group key if it will
 * likely report; neither for an instance that will be skipped, which
 * 'skip' says (bit k: the instance k past 'c', skip_window__()).  Its
 * history is read and written in instance order, a stream the hardware
 * prefetcher follows.  The addresses from 'c' itself, not from its
 * index: a constant displacement each.
 *
 * Fetching the flow entry only if its flow sent in the swept epoch (its
 * touched bit) saves a DRAM read per quiet instance where the flows the
 * sweep reads are far more than the caches hold: with 65536 flows of
 * which ~9% were quiet, fetching them all took the sweep 1.11-1.16
 * times as long.  Where they fit in the L2 cache ('fetch_all': the
 * table's live flows' lines, tpm_sweep_start__()), a quiet flow's line
 * costs nothing, while the branch on the bit, which follows the data,
 * was mispredicted for about one instance in four of tpm-bench's default
 * workload: there the entry is fetched whether its flow sent or not,
 * and the group key (for a report) whether the instance held last time
 * or not, with no branch, and the default workload's sweep takes 0.80
 * of the time.  What is not needed is replaced by a line in cache: the
 * flow table's first entry (no flow), the instance's own line 0 (no
 * report likely).  Elsewhere the instructions count more than the
 * mispredictions (the sweep waits on memory), and the branches stay. */
static SWEEP_INLINE void
planned_prefetch__(const struct tpm_child *c, uint64_t skip,
                   const struct tpm_flow *flows, const uint64_t *touched,
                   size_t off, const struct tpm_child *children,
                   const struct tpm_hist *hist, uint32_t ring, bool skipping,
                   bool fetch_all)
{
    /* No test against 'n_children': the array's padding
     * (TPM_CHILD_PAD) holds what an instance past the last one reads. */
    if (!(skip >> TPM_SWEEP_AHEAD_CHILD & 1)) {
        tpm_prefetch(c + TPM_SWEEP_AHEAD_CHILD);
    }
    if (skip >> TPM_SWEEP_AHEAD_FLOW & 1) {
        return;
    }
    c += TPM_SWEEP_AHEAD_FLOW;
    if (skipping) {
        /* The instances visited are no longer a stream the hardware
         * prefetcher follows: their history slot too. */
        size_t ci = (size_t) (c - children);
        tpm_prefetch_write(tpm_hist_at((struct tpm_hist *) hist + ci * ring,
                                       c->hist_seq, 0, ring));
    }
    uint32_t nf = c->in_idx;
    if (fetch_all) {
        flow_prefetch__(&flows[nf & -(uint32_t) (nf != TPM_NONE)], off);
        tpm_prefetch((const char *) c
                     + (offsetof(struct tpm_child, gkey)
                        & -(size_t) c->sat_last));
        return;
    }
    if (nf != TPM_NONE
        && (tpm_flow_touched(touched, nf) || c->head != TPM_NONE)) {
        flow_prefetch__(&flows[nf], off);
    }
    if (c->sat_last) {
        tpm_prefetch(&c->gkey);
    }
}

/* Fills the prefetch pipeline at the start of a step that begins with
 * child 'ci': what sweep_prefetch__() would have fetched for it and the
 * instances up to its lead. */
static SWEEP_INLINE void
sweep_prefetch_start__(const struct tpm *tpm, uint32_t ci, uint32_t tag)
{
    uint32_t end = MIN(ci + TPM_SWEEP_AHEAD_CHILD, tpm->n_children);
    for (uint32_t j = ci; j < end; j++) {
        tpm_prefetch(&tpm->children[j]);
    }
    end = MIN(ci + TPM_SWEEP_AHEAD_FLOW, tpm->n_children);
    for (uint32_t j = ci; j < end; j++) {
        sweep_prefetch_flow__(tpm, j, tag);
    }
}

/* The interval containing the swept epoch, for the interval length of the
 * last event asked about: one division per run of instances with the same
 * interval length rather than one per instance (GCC turns "interval == 1
 * ? abs : abs / interval" into a division, ~20 cycles). */
struct sweep_div {
    uint64_t abs;               /* Swept epoch. */
    uint32_t interval;
    uint64_t iv;                /* abs / interval. */
};

static inline uint64_t
sweep_iv__(struct sweep_div *d, const struct tpm_ev *ev)
{
    if (OVS_UNLIKELY(ev->interval != d->interval)) {
        d->interval = ev->interval;
        d->iv = d->abs / d->interval;
    }
    return d->iv;
}

/* Ends the sweep of child 'ci' (all its flows gathered): closes the
 * interval if the swept epoch ends it, then removes the child if idle
 * or moves the cursor past it. */
static inline void
child_finish__(struct tpm *tpm, uint32_t ci, const struct tpm_ev *ev,
               struct sweep_div *d)
{
    struct tpm_child *c = &tpm->children[ci];
    uint64_t abs = d->abs;
    bool closed = (sweep_iv__(d, ev) + 1) * ev->interval == abs + 1;

    if (closed) {
        child_close__(tpm, ci);
    }
    tpm->sw.child_begun = false;
    if (child_idle__(tpm, c, ev->interval, abs, closed)) {
        tpm_child_remove__(tpm, ci);
    } else {
        tpm->sw.child++;
    }
}

/* Direct instances.
 *
 * Most instances are of events with a one-epoch interval and no prev(),
 * and hold at most their inline flow item (5-tuple groups always, and
 * coarser groups with one active flow).  Each sweep closes their interval,
 * so their accumulators never need to outlive the sweep of that one
 * instance: child_direct__() gathers into accumulators on the stack,
 * evaluates, records and reports, and touches only the instance's line 0,
 * its flow entry and its history slot.  The instance's own 'acc' stays
 * all zero (it is cleared at every close, and an instance is begun, after
 * its roll-over, with nothing gathered), and 'prev' is not kept for
 * events without prev() ('prev_pkts' says what the idle test needs).
 * Returns the number of list items visited. */
static inline uint32_t
child_direct__(struct tpm *tpm, uint32_t ci, const struct tpm_ev *ev,
               uint64_t abs, uint32_t tag)
{
    struct tpm_child *c = &tpm->children[ci];
    double acc[TPM_ACC] = { 0 };
    uint32_t n = 0;

    if (c->in_idx != TPM_NONE) {
        n = 1;
        if (!inline_quiet__(tpm, ci, ev, tag)
            && !item_gather__(tpm, acc, ev, c->in_idx, c->in_gen, tag)) {
            c->in_idx = TPM_NONE;
            TPM_STAT_ADD(tpm, sweep_stale_items, 1);
        }
    }
    interval_end__(tpm, ci, ev, acc, false);
    if (child_idle__(tpm, c, ev->interval, abs, true)) {
        tpm_child_remove__(tpm, ci);
    } else {
        tpm->sw.child++;
    }
    return n;
}

/* Planned instances.
 *
 * Instances of events "AGG op CONSTANT" over at most two per-flow
 * summaries, with a one-epoch interval and no prev() (most events), carry
 * in line 0 a copy of all that the sweep
 * needs from their event (tpm_instance_get__()), so they are swept
 * without reading the event: one random access fewer per instance, since
 * instances follow flow arrival order, not event order.  While no event
 * is dying (tpm->n_dying), the sweep need not read the event to know that
 * its instances are to be removed either.
 *
 * They are the bulk of a busy host's instances (one per 5-tuple of each
 * 5-tuple event), so sweep_planned_run__() sweeps a run of consecutive
 * ones in a loop of its own: the arrays' bases and the history length in
 * registers (the general loop reloads them after every store, which may
 * alias them), no dispatch, budget or report-ring test per instance (one
 * per run, sized to both), and the accumulators computed as
 * item_gather__() computes them, from the instance's copy.  A run takes
 * the instances with at most one chunk besides the inline item (coarser
 * groups with up to TPM_CHUNK_ITEMS + 1 active flows: a /24 of a web
 * tier), gathered on the stack in one visit as a direct instance is; one
 * with more chunks is swept chunk by chunk by the general loop, so that a
 * step's budget bounds it.  The run does what the general path does for
 * an instance, in the same order: the inline item, the chunk's items
 * (compacted, the chunk freed once empty), interval_end__(), the idle
 * test.
 *
 * Quiet instances.  On a busy host most flows send nothing in a given
 * 10 ms epoch, and reading a quiet instance's flow entry only to find an
 * old epoch tag is a random access to a table far larger than the caches.
 * So for an instance with one flow (planned or not: its inline item and
 * no chunk) the sweep first tests the flow table's touched bitmap of the
 * swept epoch (tpm/flow-table.h: phase 1 sets an entry's bit with its
 * first packet of an epoch), item_quiet__(): a clear bit means no packet,
 * and the entry is not read, provided the entry cannot be due for
 * retirement, which the instance's newest history entry bounds (an
 * interval with packets: the flow's last packet is no earlier than that
 * interval's first epoch, and retirement needs more than
 * 'retire_epochs' epochs since).  Otherwise (bit set, no history, or
 * history too old) the entry is read and tested as before.  A stale or
 * freed entry is thus noticed when its bit is set (a new flow sends) or
 * when retirement is due, not earlier: the item is dropped a little
 * later, never counted wrongly.  The general loop's lookahead prefetches
 * such an instance's newest history entry instead of its flow entry; the
 * planned run's fetches the flow entry all the same where the flows fit
 * in the L2 cache (planned_prefetch__()) and leaves the history, read
 * and written in instance order, to the hardware prefetcher.
 *
 * Quiet instances skipped.  Testing the bit still reads the instance's
 * line (and its newest history entry): with 65536 one-flow instances of
 * which a sixth send in an epoch, the sweep took as long as with all of
 * them sending.  So each instance has a skip entry ('struct tpm_skip',
 * eight bytes in an array beside the instances) that the skipping run
 * reads first: the instance's flow and the last epoch in which it cannot
 * be due for retirement, written when a visit leaves the instance with
 * that one flow, no chunk and no flag after an interval with packets (so
 * the newest history entry is that interval: the bound of
 * item_quiet__()), left as it is by a quiet visit, and cleared whenever
 * anything else could make the visit necessary: a visit that leaves it
 * otherwise, a chunk added (tpm_list_append__()), a visit by the general
 * loop, a sweep abandoned before it, a clock jump; a new instance starts
 * cleared, a moved one takes its entry along.  The entries are tested and
 * written only while the sweep skips ('sweep_skipping', decided at the
 * end of each sweep from the share of instances it found quiet,
 * sweep_finish__()): the tests cost every visit, so a sweep that finds
 * few quiet instances runs the plain loop, compiled apart, and the sweep
 * that starts skipping clears every entry first.  An instance whose entry
 * names a flow without its touched bit, before that epoch, would be visited
 * to find exactly what item_quiet__() finds, a quiet interval: nothing
 * recorded, nothing reported, the next interval begun, not idle (it has a
 * flow).  The run skips it without reading its line; its 'iv' stays behind,
 * and the next visit takes it from there, since the intervals it skipped
 * saw no packets and changed nothing (a planned instance behind with no
 * flag was skipped, or a clock jump's gap, without packets either, lies
 * behind it; one behind for any other reason, a sweep that never reached
 * it, has a flag and goes to the general loop, whose child_roll__() closes
 * the intervals in between).  The skip decisions of the instances up to the
 * lookahead's lead are kept as bits (skip_window__()), so the lookahead
 * prefetches only instances that will be visited, and each entry is tested
 * once per sweep. */
static SWEEP_INLINE bool
child_is_planned__(const struct tpm *tpm, const struct tpm_child *c,
                   uint64_t abs)
{
    return c->planned && (c->iv == abs || (c->iv < abs && !c->flags))
           && (c->head == TPM_NONE
               || tpm->chunk_next[c->head] == TPM_NONE);
}

/* Returns true if the instance of skip entry 'e' may be skipped by the
 * sweep whose touched bitmap is 'touched', in the current relative epoch
 * 'now' (32 bits; its entry's 'until' is at most 'retire_epochs' ahead
 * when written, and entries are cleared on a clock jump). */
static SWEEP_INLINE bool
skip_quiet__(const struct tpm_skip *e, const uint64_t *touched, uint32_t now)
{
    return e->idx != TPM_NONE && !tpm_flow_touched(touched, e->idx)
           && (int32_t) (e->until - now) >= 0;
}

/* The skip decisions of the planned run's lookahead window, kept from one
 * run to the next of a step: bit k for the instance k past instance
 * 'pos' (TPM_NONE: not computed), k <= TPM_SWEEP_AHEAD_CHILD. */
struct skip_window {
    uint64_t bits;
    uint32_t pos;
};
BUILD_ASSERT_DECL(TPM_SWEEP_AHEAD_CHILD < 64);

/* Returns the decisions of the window starting at the instance whose skip
 * entry is 'sk'. */
static SWEEP_INLINE uint64_t
skip_window__(const struct tpm_skip *sk, const uint64_t *touched,
              uint32_t now)
{
    uint64_t bits = 0;
    for (int k = 0; k <= TPM_SWEEP_AHEAD_CHILD; k++) {
        bits |= (uint64_t) skip_quiet__(&sk[k], touched, now) << k;
    }
    return bits;
}

/* Gathers planned instance 'c', which has one chunk, into '*pk' (its
 * packets, 0 on entry) and 'acc' (its summaries, 1 and 2): its inline item
 * (if any), then its chunk's items, compacting the chunk and freeing it
 * once empty.  Returns the items visited.  Out of line: it is rare, and
 * the planned run's loop stays small. */
static uint32_t __attribute__((noinline))
planned_chunked__(struct tpm *tpm, struct tpm_child *c, uint32_t tag,
                  double *acc, uint64_t *pk)
{
    uint32_t ch = c->head, n = 0;

    if (c->in_idx != TPM_NONE) {
        n++;
        /* No quiet test: the history records the other flows too. */
        if (!planned_item__(tpm, tpm->ft.flows, tpm->p.retire_epochs, c,
                            c->in_idx, c->in_gen, tag, acc, pk, true)) {
            c->in_idx = TPM_NONE;
            TPM_STAT_ADD(tpm, sweep_stale_items, 1);
        }
    }
    n += chunk_gather__(tpm, c, NULL, ch, tag, acc, pk, true);
    if (!tpm->chunk_n[ch]) {
        chunk_unlink__(tpm, c, TPM_NONE, ch);
    }
    return n;
}

/* Instances a run may pass per instance it may visit: the skipped ones
 * cost a test each. */
#define TPM_SWEEP_SKIP_SPAN 8

/* Sweeps at most 'max' planned instances from the cursor, fewer if they
 * have chunks (about twice 'max' instances and flow items together),
 * stopping at the first instance that is not one ('child_is_planned__()').
 * If 'skipping' (a constant: the loop is compiled apart), skips quiet
 * instances too (at most TPM_SWEEP_SKIP_SPAN times 'max' instances in
 * all) and keeps their skip entries, with the skip decisions in 'w' (kept
 * from the previous run of the step if it ended at the cursor).  The
 * lookahead fetches every flow entry if 'fetch_all' (a constant too,
 * false while skipping: planned_prefetch__()).  Requires no dying event
 * and no instance begun.  Returns the instances visited or skipped and
 * adds the flow items visited to '*items'. */
static SWEEP_INLINE uint32_t
planned_run__(struct tpm *tpm, uint32_t max, uint64_t abs, uint32_t tag,
              uint32_t *items, struct skip_window *w, const bool skipping,
              const bool fetch_all)
{
    struct tpm_child *const children = tpm->children;
    struct tpm_flow *const flows = tpm->ft.flows;
    const uint32_t ring = tpm->hist_ring;
    const uint32_t retire = tpm->p.retire_epochs;
    const uint64_t *touched = tpm->ft.touched[tag & 1];
    const size_t off = stats_off__(tpm, tag);
    const uint64_t now = tpm_abs_epoch(tpm, tpm->cur);
    const uint32_t ci0 = tpm->sw.child;
    uint32_t removed = 0, stale = 0, quiet = 0;
    /* The items visited, less the instances: an instance with one item
     * adds nothing, so the common case counts nothing. */
    int32_t item_adj = 0;
    /* The instance swept, its history, and the end of the run ('max' <=
     * TPM_SWEEP_RUN instances; TPM_SWEEP_SKIP_SPAN times that while
     * skipping, 'left' counting the visits): pointers, no index. */
    struct tpm_child *c = &children[ci0];
    struct tpm_hist *hc = tpm_child_hist(tpm, ci0);
    struct tpm_child *end = &children[MIN(tpm->n_children, ci0 + max)];
    /* Skipping only. */
    struct tpm_skip *sk = &tpm->skip[ci0];
    int32_t left = (int32_t) max;
    if (skipping) {
        end = &children[MIN(tpm->n_children,
                            ci0 + TPM_SWEEP_SKIP_SPAN * max)];
    }
    const uint32_t now32 = (uint32_t) tpm->cur;
    const uint32_t until = (uint32_t) tpm->sw.epoch + retire;
    uint32_t skipped = 0;
    uint64_t skip = 0;
    if (skipping) {
        skip = w->bits;
        if (w->pos != ci0) {
            skip = skip_window__(sk, touched, now32);
            planned_prefetch__(c, skip, flows, touched, off, children,
                               tpm->hist, ring, true, fetch_all);
        }
    }

    while (c < end) {
        if (skipping && skip & 1) {
            skipped++;
            goto next;
        }
        if (skipping && left-- <= 0) {
            break;
        }
        if (!child_is_planned__(tpm, c, abs)) {
            break;
        }
        if (skipping) {
            /* Its history, from its place (the skipped ones move none). */
            hc = tpm_child_hist(tpm, (uint32_t) (c - children));
        } else {
            planned_prefetch__(c, 0, flows, touched, off, children, NULL,
                               ring, false, fetch_all);
        }

        /* Gather: the packets into 'pk', the summaries (if any) into
         * accumulators 1 and 2 (all that a plan covers). */
        uint64_t pk = 0;
        double acc[3];
        uint32_t idx = c->in_idx;
        bool quiet_visit = false;
        if (OVS_UNLIKELY(c->head != TPM_NONE)) {
            /* Its own variable: 'pk' stays in a register. */
            uint64_t chunk_pk = 0;
            uint32_t n = planned_chunked__(tpm, c, tag, acc, &chunk_pk);
            pk = chunk_pk;
            item_adj += (int32_t) n - 1;
            /* Its items beyond the one counted take the place of
             * instances, two items each. */
            if (skipping) {
                left -= (int32_t) (n / 2);
            } else {
                end -= MIN((size_t) (n / 2), (size_t) (end - c - 1));
            }
        } else if (idx != TPM_NONE) {
            if (item_quiet__(touched, idx, c, hc, ring, 1, now, retire)) {
                /* Quiet: no packet, and too recent to retire. */
                quiet++;
                quiet_visit = true;
            } else if (!planned_item__(tpm, flows, retire, c, idx,
                                       c->in_gen, tag, acc, &pk, true)) {
                c->in_idx = TPM_NONE;
                stale++;
            }
        } else {
            item_adj--;
        }

        /* interval_end__() for a planned instance. */
        if (pk) {
            /* agg_compute__() and tpm_compare(), from the instance's
             * precomputed 'value_acc' and 'op_classes'.  The packets
             * (32-bit counts of at most TPM_CHUNK_ITEMS + 1 flows) are
             * far below 2^63: a signed conversion, one instruction. */
            double value = (double) (int64_t) pk;
            if (OVS_UNLIKELY(c->value_acc != 0)) {
                acc[0] = value;
                value = (c->value_acc > 0 ? acc[c->value_acc]
                         : agg_compute__(&c->calc, acc));
            }
            bool sat = (c->op_classes
                        & tpm_cmp_class(value, c->threshold)) != 0;
            struct tpm_hist *h = tpm_hist_at(hc, c->hist_seq, 0, ring);
            h->epoch = abs;
            h->value = value;
            tpm_hist_push(c, ring);
            c->sat_last = sat;
            if (sat) {
                report_satisfied__(tpm, c, c->ev_id, abs, value);
            }
        }
        c->prev_pkts = pk != 0;
        c->iv = abs + 1;
        /* No flag: none for the next interval either, which starts
         * later (the event's first whole interval, once known, stays). */
        if (OVS_UNLIKELY(c->flags)) {
            uint8_t lost = c->flags & TPM_CHILD_LOST;
            c->flags = child_flags__(tpm, c, &tpm->evs[c->ev], abs + 1);
            if (lost) {
                child_lost__(c, abs + 1, abs + 1);
            }
        }
        /* Skipped while its flow is quiet, if it has that flow alone and
         * its newest history entry is this interval; a quiet visit
         * leaves the entry as it was (the same flow, the same bound). */
        if (skipping && !quiet_visit) {
            sk->idx = (pk && c->head == TPM_NONE && !c->flags
                       ? c->in_idx : TPM_NONE);
            sk->until = until;
        }

        if (child_idle__(tpm, c, 1, abs, true)) {
            /* The last instance moves here, with its skip entry: sweep
             * it next. */
            tpm_child_remove__(tpm, (uint32_t) (c - children));
            removed++;
            end = MIN(end, &children[tpm->n_children]);
            if (skipping) {
                skip = ((skip & ~(uint64_t) 1)
                        | skip_quiet__(sk, touched, now32));
            }
            continue;
        }
    next:
        c++;
        if (!skipping) {
            hc += ring;
        } else {
            sk++;
            skip = (skip >> 1
                    | ((uint64_t) skip_quiet__(&sk[TPM_SWEEP_AHEAD_CHILD],
                                               touched, now32)
                       << TPM_SWEEP_AHEAD_CHILD));
            planned_prefetch__(c, skip, flows, touched, off, children,
                               tpm->hist, ring, true, fetch_all);
        }
    }
    uint32_t ci = (uint32_t) (c - children);
    uint32_t done = ci - ci0 + removed;
    tpm->sw.child = ci;
    tpm->sw.quiet += quiet + skipped;
    if (skipping) {
        w->bits = skip;
        w->pos = ci;
    }
    if (stale) {
        TPM_STAT_ADD(tpm, sweep_stale_items, stale);
    }
    if (skipped) {
        TPM_STAT_ADD(tpm, sweep_skipped, skipped);
        item_adj -= (int32_t) skipped;
    }
    *items += (uint32_t) ((int32_t) done + item_adj);
    return done;
}

static uint32_t __attribute__((noinline))
sweep_planned_run__(struct tpm *tpm, uint32_t max, uint64_t abs, uint32_t tag,
                    uint32_t *items, struct skip_window *w)
{
    return planned_run__(tpm, max, abs, tag, items, w, false, false);
}

static uint32_t __attribute__((noinline))
sweep_fetching_run__(struct tpm *tpm, uint32_t max, uint64_t abs,
                     uint32_t tag, uint32_t *items, struct skip_window *w)
{
    return planned_run__(tpm, max, abs, tag, items, w, false, true);
}

static uint32_t __attribute__((noinline))
sweep_skipping_run__(struct tpm *tpm, uint32_t max, uint64_t abs,
                     uint32_t tag, uint32_t *items, struct skip_window *w)
{
    return planned_run__(tpm, max, abs, tag, items, w, true, false);
}

bool
tpm_sweep_run__(struct tpm *tpm, uint64_t budget_ns, bool may_wait)
{
    struct tpm_sweep *sw = &tpm->sw;
    uint64_t t0 = tpm_rdtsc(), last_check = t0;
    /* All in TSC cycles: the clock is read only when the estimate says a
     * tenth of the budget is spent. */
    uint64_t budget = tpm_ns_to_tsc(budget_ns);
    double tenth = budget / 10.0, b = tenth;
    uint32_t units = 0, visited = 0;
    uint64_t abs = tpm_abs_epoch(tpm, sw->epoch);
    uint32_t tag = (uint32_t) sw->epoch + 2;
    struct sweep_div div = { .abs = abs, .interval = 1, .iv = abs };
    struct skip_window win = { .pos = TPM_NONE };

    if (!sw->active) {
        return false;
    }
    if (!sw->child_begun) {
        sweep_prefetch_start__(tpm, sw->child, tag);
    }
    /* An instance reports at most once per interval it closes, and closes
     * at most 'history_len' + 1 in one visit. */
    uint32_t room = tpm->p.history_len + 1;
    while (sw->child < tpm->n_children) {
        uint32_t ci = sw->child;
        if (OVS_UNLIKELY(may_wait)
            && spsc_free_space(tpm->report_ring) < room) {
            /* The reader drains the ring before the next step. */
            sw->ns += (uint64_t) tpm_tsc_to_ns(tpm_rdtsc() - t0);
            TPM_STAT_ADD(tpm, sweep_flows, visited);
            TPM_STAT_ADD(tpm, sweep_waits, 1);
            return true;
        }
        struct tpm_child *c = &tpm->children[ci];
        const struct tpm_ev *ev = &tpm->evs[c->ev];
        /* Units of work (instances and flow items) and instances. */
        uint32_t n = 1, inst = 1;

        if (!sw->child_begun && !tpm->n_dying
            && child_is_planned__(tpm, c, abs)) {
            /* A run of planned instances, no longer than the budget's
             * tenth left (at two units each, the instance and its flow)
             * or the room for their reports (one each at most). */
            uint32_t max = TPM_SWEEP_RUN, items = 0;
            if (budget_ns) {
                max = MIN(max, (uint32_t) (b / tpm->cycles_per_item / 2)
                               + 1);
            }
            if (may_wait) {
                max = MIN(max, spsc_free_space(tpm->report_ring));
            }
            inst = (tpm->sweep_skipping
                    ? sweep_skipping_run__(tpm, max, abs, tag, &items, &win)
                    : sw->fetch_all
                    ? sweep_fetching_run__(tpm, max, abs, tag, &items, &win)
                    : sweep_planned_run__(tpm, max, abs, tag, &items, &win));
            n = inst + items;
        } else if (!sw->child_begun) {
            sweep_prefetch__(tpm, ci, tag);
            /* Visited here, it may change in ways its skip entry does
             * not follow, and the window may lose its place. */
            tpm->skip[ci].idx = TPM_NONE;
            win.pos = TPM_NONE;
            if (ev->dying) {
                tpm_child_remove__(tpm, ci);
                continue;
            }
            uint64_t iv = sweep_iv__(&div, ev);
            if (OVS_UNLIKELY(c->iv < iv)) {
                child_roll__(tpm, ci, iv);
            }
            if (c->head == TPM_NONE && ev->interval == 1
                && !ev->uses_prev) {
                n += child_direct__(tpm, ci, ev, abs, tag);
            } else {
                if (c->in_idx != TPM_NONE) {
                    n++;
                    /* An instance with chunks has other flows, whose
                     * packets its history records too: no bound. */
                    if ((c->head != TPM_NONE
                         || !inline_quiet__(tpm, ci, ev, tag))
                        && !item_gather__(tpm, c->acc, ev, c->in_idx,
                                          c->in_gen, tag)) {
                        c->in_idx = TPM_NONE;
                        TPM_STAT_ADD(tpm, sweep_stale_items, 1);
                    }
                }
                if (c->head == TPM_NONE) {
                    child_finish__(tpm, ci, ev, &div);
                } else {
                    sw->child_begun = true;
                    sw->rc = c->head;
                    sw->prev_wc = TPM_NONE;
                }
            }
        } else if (sw->rc != TPM_NONE) {
            uint32_t ch = sw->rc;
            n += chunk_gather__(tpm, c, ev, ch, tag, c->acc, NULL, false);
            sw->rc = tpm->chunk_next[ch];
            if (!tpm->chunk_n[ch]) {
                chunk_unlink__(tpm, c, sw->prev_wc, ch);
            } else {
                sw->prev_wc = ch;
            }
        } else {
            /* All flows gathered. */
            child_finish__(tpm, ci, ev, &div);
        }

        visited += n - inst;
        if (budget_ns) {
            units += n;
            b -= n * tpm->cycles_per_item;
            if (b <= 0) {
                uint64_t now = tpm_rdtsc();
                uint64_t passed = now - t0;
                double per = (double) (now - last_check) / units;
                tpm->cycles_per_item = 0.75 * tpm->cycles_per_item
                                       + 0.25 * per;
                last_check = now;
                units = 0;
                if (passed >= budget) {
                    sw->ns += (uint64_t) tpm_tsc_to_ns(passed);
                    TPM_STAT_ADD(tpm, sweep_flows, visited);
                    return true;
                }
                b = tenth;
            }
        }
    }
    sw->ns += (uint64_t) tpm_tsc_to_ns(tpm_rdtsc() - t0);
    TPM_STAT_ADD(tpm, sweep_flows, visited);
    sweep_finish__(tpm);
    return false;
}
