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

struct value_ctx {
    const struct tpm_ev *ev;
    const struct tpm_child *c;
};

static double
agg_value__(const struct tpm_expr *node, bool prev, void *ctx_)
{
    const struct value_ctx *ctx = ctx_;
    const struct tpm_ev_agg *a = NULL;
    for (int i = 0; i < ctx->ev->n_aggs; i++) {
        if (ctx->ev->aggs[i].node == node) {
            a = &ctx->ev->aggs[i];
            break;
        }
    }
    if (!a) {
        return 0;
    }

    const double *acc = prev ? ctx->c->prev : ctx->c->acc;
    double n = acc[0];
    switch (node->agg) {
    case TPM_AGG_SUM:
        return acc[a->sum];
    case TPM_AGG_COUNT:
        return node->a ? acc[a->sum] : n;
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

/* Returns the value of child 'c''s event over its current accumulators and
 * stores in '*satisfied' whether the predicate holds. */
double
tpm_child_value__(const struct tpm *tpm, const struct tpm_child *c,
                  bool *satisfied)
{
    const struct tpm_ev *ev = &tpm->evs[c->ev];
    struct value_ctx ctx = { .ev = ev, .c = c };

    *satisfied = tpm_expr_eval(ev->def->pred, agg_value__, &ctx) != 0;
    return tpm_expr_eval(ev->def->value, agg_value__, &ctx);
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

/* Closes child 'ci''s current interval: evaluates, records, reports. */
static void
child_close__(struct tpm *tpm, uint32_t ci)
{
    struct tpm_child *c = &tpm->children[ci];
    const struct tpm_ev *ev = &tpm->evs[c->ev];
    uint64_t end = (c->iv + 1) * ev->interval - 1;
    bool sat;
    double value = tpm_child_value__(tpm, c, &sat);

    /* An interval in which the group saw no packet is neither recorded
     * nor reported: polls for it answer TPM_POLL_NO_GROUP. */
    if (c->acc[0] > 0) {
        struct tpm_hist *h = &tpm_child_hist(tpm, ci)[c->hist_pos];
        h->epoch = end;
        h->value = value;
        h->flags = c->flags;
        h->satisfied = sat;
        c->hist_pos = (c->hist_pos + 1) % tpm->p.history_len;
        c->hist_n = MIN(c->hist_n + 1, tpm->p.history_len);
    } else {
        sat = false;
    }

    if (sat) {
        struct tpm_report r = {
            .type = TPM_REPORT_SATISFIED,
            .event_id = ev->id,
            .epoch = end,
            .value = value,
            .flags = c->flags & TPM_CHILD_PARTIAL ? TPM_REPORT_PARTIAL : 0,
            .group = c->gkey,
        };
        tpm_report__(tpm, &r);
    }

    memcpy(c->prev, c->acc, sizeof c->prev);
    memset(c->acc, 0, sizeof c->acc);
    c->iv++;
    c->flags = tpm_interval_flags__(tpm, ev, c->iv * ev->interval);
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
    }
    while (c->iv < iv) {
        child_close__(tpm, ci);
    }
}

/* Adds flow item ('idx', 'gen') of child 'c' to its accumulators.  Returns
 * false if the item is stale (its flow entry was reused or freed). */
static inline bool
item_gather__(struct tpm *tpm, struct tpm_child *c, const struct tpm_ev *ev,
              uint32_t idx, uint32_t gen, uint32_t tag)
{
    const struct tpm_flow *f = &tpm->ft.flows[idx];
    if (f->gen != gen || f->state != TPM_FLOW_LIVE) {
        return false;
    }
    if (f->tag[tag & 1] != tag) {
        return true;            /* No packets in the swept epoch. */
    }

    const struct tpm_flow_stats *st = &f->stats[tag & 1];
    bool first = c->acc[0] == 0;
    c->acc[0] += st->packets;
    for (int j = 0; j < ev->n_kinds; j++) {
        uint32_t bit = 1u << ev->kinds[j];
        if (!(f->sum_mask & bit)) {
            continue;
        }
        double v = st->slot[__builtin_popcount(f->sum_mask & (bit - 1))];
        double *a = &c->acc[1 + j];
        switch ((enum tpm_sum_op) ev->ops[j]) {
        case TPM_SUM_SUM:
        case TPM_SUM_SUMSQ:
        case TPM_SUM_NONZERO:
            *a += v;
            break;
        case TPM_SUM_MIN:
            *a = first || v < *a ? v : *a;
            break;
        case TPM_SUM_MAX:
            *a = first || v > *a ? v : *a;
            break;
        case TPM_SUM_LAST:
            *a = v;
            break;
        }
    }
    return true;
}

/* Processes chunk 'ch' of child 'c': gathers and compacts it in place.
 * Returns the number of items visited. */
static uint32_t
chunk_gather__(struct tpm *tpm, struct tpm_child *c, const struct tpm_ev *ev,
               uint32_t ch, uint32_t tag)
{
    struct tpm_chunk *k = &tpm->chunks[ch];
    uint32_t n = tpm->chunk_n[ch], w = 0;

    for (uint32_t i = 0; i < n; i++) {
        if (i + 4 < n) {
            tpm_prefetch(&tpm->ft.flows[k->idx[i + 4]]);
        }
        if (item_gather__(tpm, c, ev, k->idx[i], k->gen[i], tag)) {
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

void
tpm_sweep_start__(struct tpm *tpm, uint64_t epoch)
{
    memset(&tpm->sw, 0, sizeof tpm->sw);
    tpm->sw.active = true;
    tpm->sw.epoch = epoch;
    tpm->sw.rc = TPM_NONE;
    tpm->sw.prev_wc = TPM_NONE;
    TPM_STAT_ADD(tpm, sweeps_started, 1);
}

void
tpm_sweep_abandon__(struct tpm *tpm)
{
    /* Instances not reached lost that epoch's statistics; so did the one
     * in progress (partly gathered). */
    for (uint32_t ci = tpm->sw.child; ci < tpm->n_children; ci++) {
        tpm->children[ci].flags |= TPM_CHILD_PARTIAL;
    }
    tpm->sw.active = false;
    TPM_STAT_ADD(tpm, sweeps_unfinished, 1);
}

static void
sweep_finish__(struct tpm *tpm)
{
    tpm->sw.active = false;
    uint64_t ns = MAX(tpm->sw.ns, 1);
    TPM_STAT_SET(tpm, sweep_ns_last, ns);
    __atomic_store_n(&tpm->sweep_ns[tpm->sweep_ns_pos], ns,
                     __ATOMIC_RELAXED);
    tpm->sweep_ns_pos = (tpm->sweep_ns_pos + 1) % TPM_SWEEP_RING;
    TPM_STAT_ADD(tpm, sweeps_done, 1);
}

bool
tpm_sweep_run__(struct tpm *tpm, uint64_t budget_ns)
{
    struct tpm_sweep *sw = &tpm->sw;
    uint64_t t0 = tpm_rdtsc(), last_check = t0;
    double tenth = budget_ns / 10.0, b = tenth;
    uint32_t units = 0, visited = 0;
    uint64_t abs = tpm_abs_epoch(tpm, sw->epoch);
    uint32_t tag = (uint32_t) sw->epoch + 2;

    if (!sw->active) {
        return false;
    }
    while (sw->child < tpm->n_children) {
        uint32_t ci = sw->child;
        struct tpm_child *c = &tpm->children[ci];
        const struct tpm_ev *ev = &tpm->evs[c->ev];
        uint32_t n = 1;

        if (!sw->child_begun) {
            if (ev->dying) {
                tpm_child_remove__(tpm, ci);
                continue;
            }
            child_roll__(tpm, ci, abs / ev->interval);
            if (c->in_idx != TPM_NONE) {
                n++;
                if (!item_gather__(tpm, c, ev, c->in_idx, c->in_gen, tag)) {
                    c->in_idx = TPM_NONE;
                    TPM_STAT_ADD(tpm, sweep_stale_items, 1);
                }
            }
            sw->child_begun = true;
            sw->rc = c->head;
            sw->prev_wc = TPM_NONE;
        } else if (sw->rc != TPM_NONE) {
            uint32_t ch = sw->rc;
            n += chunk_gather__(tpm, c, ev, ch, tag);
            sw->rc = tpm->chunk_next[ch];
            if (!tpm->chunk_n[ch]) {
                chunk_unlink__(tpm, c, sw->prev_wc, ch);
            } else {
                sw->prev_wc = ch;
            }
        } else {
            /* All flows gathered. */
            if ((abs + 1) % ev->interval == 0) {
                child_close__(tpm, ci);
            }
            sw->child_begun = false;
            if (c->in_idx == TPM_NONE && c->head == TPM_NONE
                && c->acc[0] == 0 && c->prev[0] == 0) {
                tpm_child_remove__(tpm, ci);
            } else {
                sw->child++;
            }
        }

        visited += n - 1;
        if (budget_ns) {
            units += n;
            b -= n * tpm->ns_per_item;
            if (b <= 0) {
                uint64_t now = tpm_rdtsc();
                double passed = tpm_tsc_to_ns(now - t0);
                double per = tpm_tsc_to_ns(now - last_check) / units;
                tpm->ns_per_item = 0.75 * tpm->ns_per_item + 0.25 * per;
                last_check = now;
                units = 0;
                if (passed >= budget_ns) {
                    sw->ns += (uint64_t) passed;
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
