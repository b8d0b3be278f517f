/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libtpm phase 1: match and scatter (Trumpet section 5.4, algorithm 1).
 *
 * Every packet goes through here, on the monitor's thread, in batches of
 * up to TPM_BATCH_MAX frames (tpm_process_batch()).  Each packet is
 * counted once in its 5-tuple flow's statistics of the current epoch
 * (the flow table, flow-table.h); the triggers that watch the flow are
 * found once, when the flow is new, so the per-packet work does not grow
 * with the number of triggers.  Phase 2 (sweep.c) later gathers the
 * flows' statistics into their triggers.
 *
 * process_batch__() runs algorithm 1 in three passes over the batch:
 *
 *   1. prefetch each frame's first cache line (lines 2-3);
 *   2. parse each frame into a 'struct tpm_pkt' (5-tuple key, the
 *      per-packet variables) and hash its key (lib/packet.h: CRC32-C
 *      where the CPU has it, fused with the IPv4 fast path; parse__(),
 *      compiled three times: a batch of a port without tunnels, with the
 *      CPU's hash, takes a copy without the tests for tunnels and
 *      tenants, which leaves the fields only TCP has unwritten for
 *      UDP, and while no event keeps a summary and no flow a TCP state,
 *      one that reads the key and the length alone); a packet
 *      whose hash differs from the previous IP packet's (or, for the
 *      first, from the last flow's) gets its flow's home bucket
 *      prefetched and, if an event keeps summaries or the packet is not
 *      IPv4, the statistics line of the current epoch prefetched for
 *      writing (lines 4-7).  The paper hashes only
 *      packets of another flow than the last; here the hash is how a
 *      packet is told from the last one, and a packet with the same
 *      hash sets a bit of 'same_hash' instead of prefetching again;
 *   3. scatter__(): find each parsed packet's flow (lines 8-14), noted
 *      per packet, then update the flows' statistics (lines 15-17), a
 *      stretch of packets whose flows share a summary mask by one call
 *      of that mask's plan function (update__()).
 *
 * Lookup.  A last-flow cache ('last_flow', valid while the entry keeps
 * its generation, across batches) answers the packet of the same flow
 * as the one before it with one comparison of the hash and, if equal,
 * of the key, since datacenter traffic comes in bursts of one flow
 * (without a last flow, an entry no parsed key matches stands in for it,
 * 'no_flow__', so the test needs no test for NULL).
 * Otherwise the flow table is searched (linear probing, one line in
 * the common case, already prefetched by pass 2): the flow's home slot
 * inline, the rest of the probe sequence out of line
 * (tpm_flow_table_probe()).  A miss inserts the
 * flow (reusing a stale or dead slot, evicting at worst), joins it to
 * its reverse direction's TCP state if that direction keeps some
 * (tcp-state.c), and matches it.
 *
 * Matching (lines 11-14) happens once per flow.  flow_match__() asks
 * the trigger index (trig-index.h: tuple space search, one hash table
 * per filter pattern) for the events whose filter the 5-tuple matches,
 * up to 'max_matches' (the rest counted as 'match_overflow'), and
 * flow_attach__() ties the flow to each: the flow keeps the union of the
 * events' summary kinds (its 'sum_mask', the paper's summary bit array;
 * at most TPM_FLOW_SLOTS, else 'summary_overflow'), takes a connection
 * from the pool if the event reads TCP state (tcp-state.c), and is
 * appended, as (flow index, generation), to the list of the event's
 * trigger instance for its group (the flow key masked by the event's
 * group), which the trigger repository creates on first use
 * (triggers.c).  With a DoS threshold set (section 5.6) a new flow is
 * not matched at once but left PENDING: flow_pending__() counts its
 * bytes in the filter table, one counter per flow-hash bucket and
 * 'dos_window' epochs, and matches it once they pass the threshold
 * (with 'dos_precheck', a flow no trigger can match leaves the table
 * alone); the statistics gathered before are voided.  The backfill
 * (tpm_backfill_step__(), below) matches the flows already in the table
 * against an event added at run time, a bounded number of flow slots
 * per sweep step.
 *
 * Scatter (lines 15-17).  A flow entry holds two statistics lines, for
 * even and odd epochs (the sweep reads the previous epoch's while this
 * writes the current one's), each reset lazily: the first packet of an
 * epoch finds an old epoch tag and overwrites instead of adding
 * (epoch_start__(), flow_stats__()).  An IPv4 flow without summaries
 * keeps its packets and bytes in its line 0 instead (tpm_flow_count(),
 * flow-table.h), and the plan without slots (plan_0__()) touches no
 * statistics line for it.  The update adds the packet and its bytes
 * and, for each summary kind the flow keeps, in kind order, the
 * value of the kind's variable or expression combined by its operation:
 * sum, sum of squares, min, max, last, or count of non-zero values.  It
 * follows the update plan of the flow's summary mask (plan__(), cached
 * per mask; the plan of the last mask looked up is kept for the rest of
 * the batch, so flows of one mask look it up once per batch).  A plan's
 * function loops over the packets while their flows have its mask
 * (tpm-private.h), so that the common batch, whose flows share a mask,
 * is one lookup loop and one update loop, with the epoch tag, the mask
 * and the variables' offsets in registers and no call per packet.  A
 * plan of one or two slots of bytes, volume or ttl has a function of its
 * own (plan_1_OPW__(), plan_2_OPW_OPW__(), W the variable's width in
 * bits, chosen by plan_build__()), whose slots start the epoch at their
 * operation's identity; the others share plan_general__(), one case of
 * one switch on (variable, operation) per slot of a plain variable.  The
 * lookup leaves its loop for anything but a live flow without state
 * found in the last flow or its home slot; what it then does that may
 * change a flow an earlier packet of the batch still has to update
 * (inserting, a pending flow's match, a run) first has those packets
 * updated.  A flow with TCP state first has it updated, which fills in
 * the packet's state variables (tpm_conn_update__()).  Packets of one
 * flow without state that follow each other in the batch (a run, seen
 * in 'same_hash' and confirmed by key) update the flow once
 * (flow_update_run__()), each summary's variable and operation chosen
 * once for the run and its values combined in packet order, so the sums
 * round as packet by packet.  Pass 3 is compiled twice, with and without
 * that test, and a batch without runs takes the copy without it.
 *
 * Counted per batch ('struct tpm_stats', single writer): packets, bytes,
 * batches, the packets that needed no lookup ('lastflow_hits'), parse
 * failures by cause; per flow: 'matches', 'match_overflow',
 * 'summary_overflow', the DoS filter's 'dos_passed', 'dos_skipped_pkts'
 * and 'dos_precheck_pkts', 'backfilled'; and the flow table's own
 * counters copied at the end of the batch (inserts, reuses, evictions,
 * pending flows reused, live flows).  The trigger repository and the
 * connection pool count what they refuse.  With no event installed a
 * batch is only counted: the flow table is not touched.
 *
 * Hot helpers are always_inline (parse__(), epoch_start__(),
 * update__(), scatter__()); what they call only for frames the
 * inline parser does not take, new flows, flows not in their home slot,
 * pending flows, runs or flows with TCP state stays out of line.
 *
 * Thread-safety: the monitor's thread only (like all of libtpm's
 * direct calls); counters are single-writer (TPM_STAT_ADD()).
 */
#include "tpm-private.h"

#include <math.h>
#include <netinet/in.h>
#include <stddef.h>
#include <string.h>

#include "util.h"

/* Match. */

/* Changes flow 'f''s summary mask to 'mask', moving kept slots to their new
 * positions in both epoch buffers; new slots start at zero (all bits
 * clear: 0 and 0.0 alike).  An IPv4 flow's counts move between its line 0
 * and its statistics lines when it gains its first summary or loses its
 * last (tpm_flow_count()). */
void
tpm_flow_relayout__(struct tpm_flow *f, uint32_t mask)
{
    if (f->key.ipver == 4 && !f->sum_mask != !mask) {
        struct tpm_flow_count *line0[2] = { &f->v4.count0, &f->v4.count1 };
        for (int p = 0; p < 2; p++) {
            if (mask) {
                f->stats[p].count = *line0[p];
                memset(line0[p], 0, sizeof *line0[p]);
            } else {
                *line0[p] = f->stats[p].count;
            }
        }
    }
    for (int p = 0; p < 2; p++) {
        union tpm_flow_slot old[TPM_FLOW_SLOTS], *slot = f->stats[p].slot;
        memcpy(old, slot, sizeof old);
        int o = 0, n = 0;
        for (uint32_t bits = f->sum_mask | mask; bits; bits &= bits - 1) {
            uint32_t bit = bits & -bits;
            union tpm_flow_slot v = { .u = 0 };
            if (f->sum_mask & bit) {
                v = old[o++];
            }
            if (mask & bit) {
                slot[n++] = v;
            }
        }
        for (; n < TPM_FLOW_SLOTS; n++) {
            slot[n].u = 0;
        }
    }
    f->sum_mask = mask;
}

/* Makes flow 'f' feed event slot 'evi'.  Returns true on success. */
static bool
flow_attach__(struct tpm *tpm, struct tpm_flow *f, uint32_t evi)
{
    struct tpm_ev *ev = &tpm->evs[evi];
    uint32_t mask = f->sum_mask | ev->kind_mask;

    if (__builtin_popcount(mask) > TPM_FLOW_SLOTS) {
        TPM_STAT_ADD(tpm, summary_overflow, 1);
        return false;
    }
    if (ev->needs_state && !tpm_conn_attach__(tpm, f)) {
        return false;
    }
    struct tpm_key key, gkey;
    tpm_flow_key(f, &key);
    tpm_key_and(&gkey, &key, &ev->def->group);
    uint16_t port = (ev->def->group_port
                     ? tpm->flow_port[tpm_flow_index(&tpm->ft, f)] : 0);
    struct tpm_child *c = tpm_instance_get__(tpm, evi, &gkey, port);
    if (!c || !tpm_list_append__(tpm, c, tpm_flow_index(&tpm->ft, f),
                                 f->gen)) {
        return false;
    }
    if (mask != f->sum_mask) {
        tpm_flow_relayout__(f, mask);
    }
    if (f->n_matched < TPM_FLOW_MATCHED_MAX) {
        f->n_matched++;
    }
    TPM_STAT_ADD(tpm, matches, 1);
    return true;
}

static uint32_t
flow_vni__(const void *tenants, uint16_t tun)
{
    return tpm_tenants_vni(tenants, tun);
}

/* Returns true if flow 'f' passes event 'ev''s tun_id=, underlay and
 * in_port= items, which the trigger index does not see.  Its key's
 * tenant is a slot (or TPM_TUN_UNDERLAY): the VNI is tested here, once
 * per new flow and event that has the item; a tenant's flow, decapsulated
 * or from a tenant's port, has its VNI either way.  The interface is the
 * one the flow was first seen on ('flow_port'). */
static inline bool
flow_filter_ok__(const struct tpm *tpm, const struct tpm_ev *ev,
                 const struct tpm_flow *f)
{
    const struct tpm_event *def = ev->def;
    const struct tpm_tun_filter *tf = &def->filter_tun;

    if (OVS_UNLIKELY(def->in_port)
        && (!def->in_port_slot
            || (tpm->flow_port[tpm_flow_index(&tpm->ft, f)]
                != def->in_port_slot))) {
        return false;
    }
    if (OVS_LIKELY(!tf->on && !tf->underlay)) {
        return f->key.tun != TPM_TUN_UNDERLAY;
    }
    return tpm_tun_filter_match_slot(tf, f->key.tun, flow_vni__,
                                     tpm->tenants);
}

/* Matches flow 'f' against every event's filter and attaches it. */
static void
flow_match__(struct tpm *tpm, struct tpm_flow *f)
{
    uint32_t ids[64];           /* tpm_params_check() caps max_matches. */
    uint32_t max = tpm->p.max_matches;
    struct tpm_key key;
    tpm_flow_key(f, &key);
    uint32_t n = trig_index_match(&tpm->index, &key, ids, max);

    f->state = TPM_FLOW_LIVE;
    f->birth = tpm->ev_seq;
    if (n > max) {
        TPM_STAT_ADD(tpm, match_overflow, n - max);
        n = max;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (flow_filter_ok__(tpm, &tpm->evs[ids[i]], f)) {
            flow_attach__(tpm, f, ids[i]);
        }
    }
}

/* Backfill: walks up to 'n' flow slots for each event added while flows
 * were already in the table, attaching those matched before the event was
 * added (a trigger added at run time also covers existing flows). */
void
tpm_backfill_step__(struct tpm *tpm, uint32_t n)
{
    struct tpm_flow_table *ft = &tpm->ft;
    uint32_t size = ft->mask + 1;

    for (uint32_t i = 0; i < tpm->n_backfill;) {
        uint32_t e = tpm->backfill[i];
        struct tpm_ev *ev = &tpm->evs[e];
        for (uint32_t j = 0; j < n && ev->backfill_left; j++) {
            struct tpm_flow *f = &ft->flows[size - ev->backfill_left--];
            if (f->state != TPM_FLOW_LIVE
                || (int16_t) (f->birth - ev->seq) >= 0) {
                continue;
            }
            struct tpm_key key;
            tpm_flow_key(f, &key);
            if (tpm_match_key(&ev->def->filter, &key)
                && flow_filter_ok__(tpm, ev, f)
                && flow_attach__(tpm, f, e)) {
                TPM_STAT_ADD(tpm, backfilled, 1);
            }
        }
        if (!ev->backfill_left) {
            ev->first_full = tpm->cur + 1;
            tpm->backfill[i] = tpm->backfill[--tpm->n_backfill];
        } else {
            i++;
        }
    }
}

/* Scatter. */

/* Returns flow 'f''s statistics line of the current epoch and stores its
 * counts of that epoch (tpm_flow_count()) in '*cntp', both reset if they
 * are another epoch's (lazy reset: the first packet of the epoch
 * overwrites the counts) and the entry marked touched (flow-table.h).
 * epoch_start__() does the same in a plan's function, with the slots set
 * to its plan's identities (tpm-private.h). */
static inline __attribute__((always_inline)) struct tpm_flow_stats *
flow_stats__(const struct tpm *tpm, struct tpm_flow *f,
             struct tpm_flow_count **cntp)
{
    uint32_t tag = tpm->tag;
    struct tpm_flow_count *cnt = tpm_flow_count(f, tag & 1);

    if (f->tag[tag & 1] != tag) {
        f->tag[tag & 1] = tag;
        tpm_flow_touch(tpm->ft.touched[tag & 1],
                       (uint32_t) (f - tpm->ft.flows));
        cnt->packets = 0;
        cnt->bytes = 0;
    }
    *cntp = cnt;
    return &f->stats[tag & 1];
}

/* The epoch's first packet of flow 'f', whose counts and statistics line
 * of the current epoch (tag 'tag') are 'cnt' and 'st', for the update
 * plan 'pl' of its summary mask: resets the counts, the line's slots to
 * the plan's identities (tpm-private.h) if it has any ('slots', a
 * constant), and marks the entry touched (flow_stats__()).  A plan
 * without slots leaves the line alone: an IPv4 flow without summaries
 * keeps its counts in line 0. */
static inline __attribute__((always_inline)) void
epoch_start__(const struct tpm *tpm, struct tpm_flow *f,
              struct tpm_flow_count *cnt, struct tpm_flow_stats *st,
              const struct tpm_plan *pl, uint32_t tag, bool slots)
{
    f->tag[tag & 1] = tag;
    tpm_flow_touch(tpm->ft.touched[tag & 1], (uint32_t) (f - tpm->ft.flows));
    cnt->packets = 0;
    cnt->bytes = 0;
    if (slots) {
        memcpy(st->slot, pl->init, sizeof st->slot);
    }
}

/* Stores in '*off' where plain variable 'var' is in a 'struct tpm_pkt' for
 * a plan's function of its own (tpm-private.h) and in '*wide' whether it
 * is 32 bits wide (else 8), and returns true, or returns false if 'var'
 * has no such place. */
static bool
plan_var__(int var, uint8_t *off, bool *wide)
{
    switch (var) {
    case TPM_VAR_BYTES:
        *off = offsetof(struct tpm_pkt, bytes);
        *wide = true;
        return true;
    case TPM_VAR_VOLUME:
        *off = offsetof(struct tpm_pkt, volume);
        *wide = true;
        return true;
    case TPM_VAR_TTL:
        *off = offsetof(struct tpm_pkt, ttl);
        *wide = false;
        return true;
    default:                    /* ecn: the CE test of the byte stored. */
        return false;
    }
}
BUILD_ASSERT_DECL(sizeof ((struct tpm_pkt *) 0)->bytes == 4
                  && sizeof ((struct tpm_pkt *) 0)->volume == 4
                  && sizeof ((struct tpm_pkt *) 0)->ttl == 1);

/* The value for 'pkt' of a plan's slot (one with a function of its own)
 * whose variable is at byte 'off' of the packet, 'W' (8 or 32) bits
 * wide. */
#define PLAN_VALUE__(PKT, OFF, W)                                       \
    ((uint64_t) *(const uint##W##_t *) ((const char *) (PKT) + (OFF)))

/* The loop of an update plan's function (tpm_plan_fn, tpm-private.h):
 * for the batch's packets from 'P' to 'END' whose flows have the plan's
 * summary mask, the counts 'CNT' of the current epoch, found by 'CNT_AT'
 * (an expression of the flow 'f_' and its statistics line 'ST' of the
 * current epoch: tpm_flow_count()), count packet 'PKT' and its bytes,
 * then 'BODY' combines its summaries into the slots of 'ST'.  The epoch's
 * first packet resets the counts and, if the plan has any ('SLOTS', a
 * constant), the slots to the plan's identities, and marks the entry
 * touched (flow-table.h).  The offsets of the plan's first two variables
 * are read once, as 'off0' and 'off1'.  Returns the first packet not
 * updated: 'END', or one whose flow has another mask. */
#define PLAN_LOOP__(TPM, P, END, PL, SLOTS, ST, CNT, CNT_AT, PKT, BODY) \
    const uint32_t mask_ = (PL)->mask;                                  \
    const uint32_t tag_ = (TPM)->tag;                                   \
    const int p_ = tag_ & 1;                                            \
    const size_t off0 = (PL)->off[0], off1 = (PL)->off[1];              \
    (void) off0;                                                        \
    (void) off1;                                                        \
    for (; (P) < (END); (P)++) {                                        \
        struct tpm_flow *f_ = (P)->flow;                                \
        if (OVS_UNLIKELY(f_->sum_mask != mask_)) {                      \
            break;                                                      \
        }                                                               \
        struct tpm_flow_stats *ST = &f_->stats[p_];                     \
        struct tpm_flow_count *CNT = (CNT_AT);                          \
        if (OVS_UNLIKELY(f_->tag[p_] != tag_)) {                        \
            epoch_start__(TPM, f_, CNT, ST, PL, tag_, SLOTS);           \
        }                                                               \
        const struct tpm_pkt *PKT = &(P)->pkt;                          \
        /* The variables at their offsets from the packet: else the     \
         * compiler walks each by a pointer of its own. */              \
        __asm__("" : "+r" (PKT));                                       \
        uint32_t bytes_ = PKT->bytes;                                   \
        /* Both through 'CNT' in a register, and two scalar additions: \
         * as one vector addition the compiler builds the vector {1,    \
         * bytes} first, in more instructions. */                       \
        __asm__("" : "+r" (CNT));                                       \
        CNT->packets++;                                                 \
        __asm__("" : "+r" (CNT));                                       \
        CNT->bytes += bytes_;                                           \
        if (SLOTS) {                                                    \
            /* The slots from the same register ('CNT' is the head of   \
             * 'ST'), not from a second pointer to the line. */         \
            ST = CONTAINER_OF(CNT, struct tpm_flow_stats, count);       \
        }                                                               \
        BODY;                                                           \
    }                                                                   \
    return (P)

/* Combines value 'v' of a variable into slot '*s', which holds at least
 * the identity of operation 'op' (the slot_update__() of a slot past the
 * first packet): an integer slot for all but a sum of squares
 * (tpm_kind_int()). */
static inline __attribute__((always_inline)) void
plan_slot__(union tpm_flow_slot *s, enum tpm_sum_op op, uint64_t v)
{
    switch (op) {
    case TPM_SUM_SUM:
        s->u += v;
        break;
    case TPM_SUM_SUMSQ:
        s->d += (double) v * (double) v;
        break;
    case TPM_SUM_MIN:
        s->u = v < s->u ? v : s->u;
        break;
    case TPM_SUM_MAX:
        s->u = v > s->u ? v : s->u;
        break;
    case TPM_SUM_LAST:
        s->u = v;
        break;
    case TPM_SUM_NONZERO:
        s->u += v != 0;
        break;
    }
}

/* The function of the plan without slots (summary mask 0: counts only,
 * in line 0 for an IPv4 flow, which is then all of the flow it touches;
 * the offsets of this epoch's counts of either IP version read once). */
static const struct tpm_batch_pkt *
plan_0__(const struct tpm *tpm, const struct tpm_batch_pkt *p,
         const struct tpm_batch_pkt *end, const struct tpm_plan *pl)
{
    const size_t line0 = tpm_flow_count_off(tpm->tag & 1, false);
    const size_t stats = tpm_flow_count_off(tpm->tag & 1, true);
    PLAN_LOOP__(tpm, p, end, pl, false, st, cnt,
                (struct tpm_flow_count *) ((char *) f_
                                           + (f_->key.ipver == 4
                                              ? line0 : stats)),
                pkt, {});
}

/* The functions of plans of one and two slots, one per operation and
 * width of the variable (and pair of those): plan_1_OPW__() and
 * plan_2_OPW_OPW__() (W: 8 or 32). */
#define PLAN_OP_sum TPM_SUM_SUM
#define PLAN_OP_sumsq TPM_SUM_SUMSQ
#define PLAN_OP_min TPM_SUM_MIN
#define PLAN_OP_max TPM_SUM_MAX
#define PLAN_OP_last TPM_SUM_LAST
#define PLAN_OP_nonzero TPM_SUM_NONZERO
#define PLAN_FN1__(A, W)                                                \
    static const struct tpm_batch_pkt *                                 \
    plan_1_##A##W##__(const struct tpm *tpm,                            \
                      const struct tpm_batch_pkt *p,                    \
                      const struct tpm_batch_pkt *end,                  \
                      const struct tpm_plan *pl)                        \
    {                                                                   \
        PLAN_LOOP__(tpm, p, end, pl, true, st, cnt, &st->count, pkt,   \
                    plan_slot__(&st->slot[0], PLAN_OP_##A,              \
                                PLAN_VALUE__(pkt, off0, W)));           \
    }
#define PLAN_FN2__(A, WA, B, WB)                                        \
    static const struct tpm_batch_pkt *                                 \
    plan_2_##A##WA##_##B##WB##__(const struct tpm *tpm,                 \
                                 const struct tpm_batch_pkt *p,         \
                                 const struct tpm_batch_pkt *end,       \
                                 const struct tpm_plan *pl)             \
    {                                                                   \
        PLAN_LOOP__(tpm, p, end, pl, true, st, cnt, &st->count, pkt,   \
                    plan_slot__(&st->slot[0], PLAN_OP_##A,              \
                                PLAN_VALUE__(pkt, off0, WA));           \
                    plan_slot__(&st->slot[1], PLAN_OP_##B,              \
                                PLAN_VALUE__(pkt, off1, WB)));          \
    }
#define PLAN_OPS__(M)                                                   \
    M(sum) M(sumsq) M(min) M(max) M(last) M(nonzero)
#define PLAN_ROW__(M, A)                                                \
    M(A, sum) M(A, sumsq) M(A, min) M(A, max) M(A, last) M(A, nonzero)
#define PLAN_FN1_W__(A) PLAN_FN1__(A, 8) PLAN_FN1__(A, 32)
#define PLAN_FN2_W__(A, B)                                              \
    PLAN_FN2__(A, 8, B, 8) PLAN_FN2__(A, 8, B, 32)                      \
    PLAN_FN2__(A, 32, B, 8) PLAN_FN2__(A, 32, B, 32)
#define PLAN_FN2_ROW__(A) PLAN_ROW__(PLAN_FN2_W__, A)
PLAN_OPS__(PLAN_FN1_W__)
PLAN_OPS__(PLAN_FN2_ROW__)

/* The tables of those functions: [op][wide] and [op][wide][op][wide]. */
#define PLAN_REF1__(A) { plan_1_##A##8__, plan_1_##A##32__ },
#define PLAN_REF2__(A, B)                                               \
    { { plan_2_##A##8_##B##8__, plan_2_##A##8_##B##32__ },              \
      { plan_2_##A##32_##B##8__, plan_2_##A##32_##B##32__ } },
#define PLAN_REF2_ROW__(A) { PLAN_ROW__(PLAN_REF2__, A) },
static tpm_plan_fn *const plan_fns1__[TPM_N_SUM_OPS][2] = {
    PLAN_OPS__(PLAN_REF1__)
};
static tpm_plan_fn *const plan_fns2__[TPM_N_SUM_OPS][TPM_N_SUM_OPS][2][2] = {
    PLAN_OPS__(PLAN_REF2_ROW__)
};
BUILD_ASSERT_DECL(TPM_SUM_SUM == 0 && TPM_SUM_SUMSQ == 1
                  && TPM_SUM_MIN == 2 && TPM_SUM_MAX == 3
                  && TPM_SUM_LAST == 4 && TPM_SUM_NONZERO == 5);

/* slot_update_u__() and slot_update_d__(): combine value 'v' into slot
 * '*s', integer ('u', never a sum of squares) or double ('d'), by
 * operation 'op' ('first': the slot holds nothing of this epoch yet). */
#define SLOT_UPDATE_FN__(FIELD, T)                                      \
    static inline __attribute__((always_inline)) void                   \
    slot_update_##FIELD##__(union tpm_flow_slot *s, enum tpm_sum_op op, \
                            T v, bool first)                            \
    {                                                                   \
        switch (op) {                                                   \
        case TPM_SUM_SUM:                                               \
            s->FIELD = first ? v : s->FIELD + v;                        \
            break;                                                      \
        case TPM_SUM_SUMSQ:                                             \
            s->FIELD = first ? v * v : s->FIELD + v * v;                \
            break;                                                      \
        case TPM_SUM_MIN:                                               \
            s->FIELD = first || v < s->FIELD ? v : s->FIELD;            \
            break;                                                      \
        case TPM_SUM_MAX:                                               \
            s->FIELD = first || v > s->FIELD ? v : s->FIELD;            \
            break;                                                      \
        case TPM_SUM_LAST:                                              \
            s->FIELD = v;                                               \
            break;                                                      \
        case TPM_SUM_NONZERO:                                           \
            s->FIELD = (first ? 0 : s->FIELD) + (v != 0);               \
            break;                                                      \
        }                                                               \
    }
SLOT_UPDATE_FN__(u, uint64_t)
SLOT_UPDATE_FN__(d, double)

/* Combines value 'v' of a variable into slot '*s' of a kind of operation
 * 'op': a double slot for a sum of squares, else an integer one. */
static inline __attribute__((always_inline)) void
slot_update__(union tpm_flow_slot *s, enum tpm_sum_op op, uint64_t v,
              bool first)
{
    if (op == TPM_SUM_SUMSQ) {
        slot_update_d__(s, op, (double) v, first);
    } else {
        slot_update_u__(s, op, v, first);
    }
}

/* The cases of plan_general__()'s switch for plain variable VAR, whose
 * value for the packet is EXPR: one per operation. */
#define PLAN_CASES(VAR, EXPR)                                           \
    case TPM_PLAN_CODE(VAR, TPM_SUM_SUM):                               \
        slot_update__(s, TPM_SUM_SUM, (EXPR), first);                   \
        break;                                                          \
    case TPM_PLAN_CODE(VAR, TPM_SUM_SUMSQ):                             \
        slot_update__(s, TPM_SUM_SUMSQ, (EXPR), first);                 \
        break;                                                          \
    case TPM_PLAN_CODE(VAR, TPM_SUM_MIN):                               \
        slot_update__(s, TPM_SUM_MIN, (EXPR), first);                   \
        break;                                                          \
    case TPM_PLAN_CODE(VAR, TPM_SUM_MAX):                               \
        slot_update__(s, TPM_SUM_MAX, (EXPR), first);                   \
        break;                                                          \
    case TPM_PLAN_CODE(VAR, TPM_SUM_LAST):                              \
        slot_update__(s, TPM_SUM_LAST, (EXPR), first);                  \
        break;                                                          \
    case TPM_PLAN_CODE(VAR, TPM_SUM_NONZERO):                           \
        slot_update__(s, TPM_SUM_NONZERO, (EXPR), first);               \
        break;

/* The function of the plans without one of their own (tpm_plan_fn): one
 * dispatch per slot for a plain variable. */
static const struct tpm_batch_pkt *
plan_general__(const struct tpm *tpm, const struct tpm_batch_pkt *p,
               const struct tpm_batch_pkt *end, const struct tpm_plan *pl)
{
    PLAN_LOOP__(tpm, p, end, pl, true, st, cnt, &st->count, pkt, {
        bool first = cnt->packets == 1;
        for (int j = 0; j < pl->n; j++) {
            union tpm_flow_slot *s = &st->slot[j];
            switch (pl->code[j]) {
            PLAN_CASES(TPM_VAR_PACKETS, 1)
            PLAN_CASES(TPM_VAR_BYTES, pkt->bytes)
            PLAN_CASES(TPM_VAR_VOLUME, pkt->volume)
            PLAN_CASES(TPM_VAR_TTL, pkt->ttl)
            PLAN_CASES(TPM_VAR_ECN, tpm_pkt_ce(pkt))
            default: {
                const struct tpm_kind *k = &tpm->kinds[pl->kind[j]];
                if (k->var >= 0) {
                    slot_update__(s, k->op, tpm_var_value(k->var, pkt),
                                  first);
                } else {
                    slot_update_d__(s, k->op,
                                    tpm_expr_eval_pkt(k->term, pkt), first);
                }
                break;
            }
            }
        }
    });
}

/* Builds in 'pl' the update plan of summary mask 'mask'
 * (tpm-private.h). */
static void __attribute__((noinline))
plan_build__(const struct tpm *tpm, struct tpm_plan *pl, uint32_t mask)
{
    bool fast = true;
    bool wide[TPM_FLOW_SLOTS];
    int i = 0;

    memset(pl->init, 0, sizeof pl->init);
    for (uint32_t bits = mask; bits; bits &= bits - 1, i++) {
        int id = __builtin_ctz(bits);
        const struct tpm_kind *k = &tpm->kinds[id];
        pl->kind[i] = id;
        pl->code[i] = (k->var >= 0 && k->var < TPM_PLAN_VARS
                       ? TPM_PLAN_CODE(k->var, k->op) : TPM_PLAN_KIND);
        if (tpm_kind_int(k->var, k->op)) {
            pl->init[i].u = k->op == TPM_SUM_MIN ? UINT64_MAX : 0;
        } else {
            pl->init[i].d = (k->op == TPM_SUM_MIN ? INFINITY
                             : k->op == TPM_SUM_MAX ? -INFINITY : 0);
        }
        fast &= plan_var__(k->var, &pl->off[i], &wide[i]);
    }
    pl->n = i;
    pl->mask = mask;
    pl->update = plan_general__;
    if (!i) {
        pl->update = plan_0__;
    } else if (fast && i == 1) {
        pl->update = plan_fns1__[tpm->kinds[pl->kind[0]].op][wide[0]];
    } else if (fast && i == 2) {
        pl->update = plan_fns2__[tpm->kinds[pl->kind[0]].op]
                                [tpm->kinds[pl->kind[1]].op]
                                [wide[0]][wide[1]];
    }
}

/* Returns the update plan of summary mask 'mask'. */
static inline __attribute__((always_inline)) const struct tpm_plan *
plan__(struct tpm *tpm, uint32_t mask)
{
    struct tpm_plan *pl = &tpm->plans[(mask * 0x9e3779b1u) >> 26];

    if (OVS_UNLIKELY(pl->mask != mask || !pl->update)) {
        /* Not built, or built for another mask (a zeroed entry is
         * neither). */
        plan_build__(tpm, pl, mask);
    }
    return pl;
}

/* The plan of the last flow updated, looked up once per batch and again
 * only when a flow has another summary mask. */
struct plan_cache__ {
    uint32_t mask;              /* UINT32_MAX (no flow has so many
                                 * summaries): none yet. */
    const struct tpm_plan *plan;
};

/* Pass 3's update: updates the statistics of the flows of the batch's
 * packets from 'p' to 'end' with those packets, in packet order, each
 * stretch of flows of one summary mask by one call of its plan's function
 * ('pc' caches the plan). */
static inline __attribute__((always_inline)) void
update__(struct tpm *tpm, const struct tpm_batch_pkt *p,
         const struct tpm_batch_pkt *end, struct plan_cache__ *pc)
{
    while (p < end) {
        uint32_t mask = p->flow->sum_mask;
        if (OVS_UNLIKELY(mask != pc->mask)) {
            pc->plan = plan__(tpm, mask);
            pc->mask = mask;
        }
        p = pc->plan->update(tpm, p, end, pc->plan);
    }
}
BUILD_ASSERT_DECL(TPM_PLAN_CODE(TPM_PLAN_VARS - 1, TPM_SUM_NONZERO)
                  < TPM_PLAN_KIND);
BUILD_ASSERT_DECL(TPM_VAR_ECN == TPM_PLAN_VARS - 1);
BUILD_ASSERT_DECL(TPM_PLANS == 64);     /* plan__() takes 6 bits. */
BUILD_ASSERT_DECL(TPM_SUM_NONZERO == TPM_N_SUM_OPS - 1);

/* Stores in 'v' the values of summary kind 'k', whose term is a variable,
 * for the 'n' packets of 'bp' (the switch on the variable taken once, not
 * per packet). */
static void
kind_values__(const struct tpm_kind *k, const struct tpm_batch_pkt *bp,
              int n, uint64_t *v)
{
    switch (k->var) {
    case TPM_VAR_BYTES:
        for (int j = 0; j < n; j++) {
            v[j] = bp[j].pkt.bytes;
        }
        break;
    case TPM_VAR_VOLUME:
        for (int j = 0; j < n; j++) {
            v[j] = bp[j].pkt.volume;
        }
        break;
    case TPM_VAR_TTL:
        for (int j = 0; j < n; j++) {
            v[j] = bp[j].pkt.ttl;
        }
        break;
    default:
        for (int j = 0; j < n; j++) {
            v[j] = tpm_var_value(k->var, &bp[j].pkt);
        }
        break;
    }
}

/* run_u__() and run_d__(): combine the 'n' values 'v' into slot '*s',
 * integer ('u', never a sum of squares) or double ('d'), by operation
 * 'op', in order, so that double sums round as packet by packet
 * ('first': the slot holds nothing of this epoch yet). */
#define RUN_FN__(FIELD, T)                                              \
    static void                                                         \
    run_##FIELD##__(union tpm_flow_slot *s, enum tpm_sum_op op,         \
                    const T *v, int n, bool first)                      \
    {                                                                   \
        int j = 0;                                                      \
        T x = s->FIELD;                                                 \
        if (first) {                                                    \
            x = (op == TPM_SUM_SUMSQ ? v[0] * v[0]                      \
                 : op == TPM_SUM_NONZERO ? v[0] != 0 : v[0]);           \
            j = 1;                                                      \
        }                                                               \
        switch (op) {                                                   \
        case TPM_SUM_SUM:                                               \
            for (; j < n; j++) {                                        \
                x += v[j];                                              \
            }                                                           \
            break;                                                      \
        case TPM_SUM_SUMSQ:                                             \
            for (; j < n; j++) {                                        \
                x += v[j] * v[j];                                       \
            }                                                           \
            break;                                                      \
        case TPM_SUM_MIN:                                               \
            for (; j < n; j++) {                                        \
                x = v[j] < x ? v[j] : x;                                \
            }                                                           \
            break;                                                      \
        case TPM_SUM_MAX:                                               \
            for (; j < n; j++) {                                        \
                x = v[j] > x ? v[j] : x;                                \
            }                                                           \
            break;                                                      \
        case TPM_SUM_LAST:                                              \
            x = v[n - 1];                                               \
            break;                                                      \
        case TPM_SUM_NONZERO:                                           \
            for (; j < n; j++) {                                        \
                x += v[j] != 0;                                         \
            }                                                           \
            break;                                                      \
        }                                                               \
        s->FIELD = x;                                                   \
    }
RUN_FN__(u, uint64_t)
RUN_FN__(d, double)

/* A plan's update for the run of packets of flow 'f', which keeps no
 * per-flow state, that starts with the batch's packet 'bp[0]': the
 * packets among the 'n' of 'bp' that follow it with the same key
 * ('same_hash' bit j set: packet j has the hash of packet j - 1).  The
 * same result as packet by packet, with each summary's operation and
 * variable chosen once for the run; the values are combined in packet
 * order, so sums round alike.  Returns the number of packets of the run
 * (at least 1). */
static int __attribute__((noinline))
flow_update_run__(struct tpm *tpm, struct tpm_flow *f,
                  const struct tpm_batch_pkt *bp, int n, uint64_t same_hash)
{
    int run = 1;
    while (run < n && (same_hash >> run & 1)
           && tpm_key_equal(&bp[run].pkt.key, &bp[0].pkt.key)) {
        run++;
    }
    n = run;

    struct tpm_flow_count *cnt;
    struct tpm_flow_stats *st = flow_stats__(tpm, f, &cnt);
    bool first = !cnt->packets;
    uint32_t bytes = 0;
    for (int j = 0; j < n; j++) {
        bytes += bp[j].pkt.bytes;
    }
    cnt->packets += n;
    cnt->bytes += bytes;

    int i = 0;
    for (uint32_t bits = f->sum_mask; bits; bits &= bits - 1, i++) {
        const struct tpm_kind *k = &tpm->kinds[__builtin_ctz(bits)];
        enum tpm_sum_op op = k->op;
        if (k->var >= 0) {
            uint64_t v[TPM_BATCH_MAX];
            kind_values__(k, bp, n, v);
            if (tpm_kind_int(k->var, op)) {
                run_u__(&st->slot[i], op, v, n, first);
            } else {
                double d[TPM_BATCH_MAX];
                for (int j = 0; j < n; j++) {
                    d[j] = v[j];
                }
                run_d__(&st->slot[i], op, d, n, first);
            }
        } else {
            double d[TPM_BATCH_MAX];
            for (int j = 0; j < n; j++) {
                d[j] = tpm_expr_eval_pkt(k->term, &bp[j].pkt);
            }
            run_d__(&st->slot[i], op, d, n, first);
        }
    }
    return run;
}

/* Handles a packet of a flow not yet matched: counts its bytes in the
 * filter table and matches the flow once it passes the DoS threshold. */
static void
flow_pending__(struct tpm *tpm, struct tpm_flow *f, const struct tpm_pkt *pkt)
{
    if (tpm->p.dos_threshold) {
        if (tpm->p.dos_precheck
            && !trig_index_may_match(&tpm->index, &pkt->key)) {
            /* No trigger can match it: leave the filter table alone (no
             * memory touched, no false positive for the others). */
            TPM_STAT_ADD(tpm, dos_precheck_pkts, 1);
            TPM_STAT_ADD(tpm, dos_skipped_pkts, 1);
            return;
        }
        uint64_t *d = &tpm->dos[pkt->hash & (tpm->p.dos_table_size - 1)];
        uint64_t window = tpm_abs_epoch(tpm, tpm->cur) / tpm->p.dos_window;
        uint64_t bytes = (*d >> 32) == (window & 0xffffffff)
                         ? (*d & 0xffffffff) : 0;
        bytes = MIN(bytes + pkt->bytes, UINT32_MAX);
        *d = (window & 0xffffffff) << 32 | bytes;
        if (bytes < tpm->p.dos_threshold) {
            TPM_STAT_ADD(tpm, dos_skipped_pkts, 1);
            return;
        }
        if (tpm->p.dos_clear_on_pass) {
            /* The bytes were mostly this flow's: keep them from carrying
             * the next flow hashed here past the threshold. */
            *d = (window & 0xffffffff) << 32;
        }
        /* Statistics gathered below the threshold are not the triggers'
         * (paper 5.6): start the epoch afresh, and void the previous
         * epoch's too, which the sweep may not have reached yet (the
         * flow joins trigger lists now, before it). */
        f->tag[0] = f->tag[1] = 0;
        TPM_STAT_ADD(tpm, dos_passed, 1);
    }
    flow_match__(tpm, f);
}

BUILD_ASSERT_DECL(TPM_BATCH_MAX <= 64);   /* Bits of 'same_hash'. */

/* scatter__()'s last flow when there is none: its key (all zero, IP
 * version 0) is no parsed packet's, so the last-flow test needs no test
 * for NULL.  Never written. */
static struct tpm_flow no_flow__;

/* Phase 1, pass 3, for the 'n' parsed packets of 'bp' with arrival times
 * 'ts' (NULL: the monitor's clock): finds or inserts each packet's flow,
 * starting at its home bucket (with 'home', a constant, the one pass 2
 * left in its 'flow'; else from the hash), and leaves it in the packet's
 * 'flow'; then update__() scatters the packets into their flows, a
 * stretch of flows of one summary mask at a time.  Whatever may change a
 * flow that an earlier packet of the batch is still to update (inserting
 * a flow, which may reuse or evict an entry; a pending flow's match,
 * which may lay out its slots anew or void its statistics; a run's
 * update) first has those packets updated, so that every flow sees its
 * packets as it would one by one.  Bit i of 'same_hash' says that packet
 * i has the hash of the IP packet before it; with 'runs' (a constant, so
 * that batches without runs get code without their test), the packets
 * of one flow that follow each other (a run) update it once.  A packet of
 * the previous packet's flow needs no lookup: its bit of 'same_hash'
 * (with 'home'; else a comparison of the hash) tells the other flows
 * apart without touching their keys.  Returns the number of packets that
 * needed no lookup. */
static inline __attribute__((always_inline)) int
scatter__(struct tpm *tpm, struct tpm_batch_pkt *bp, const uint64_t *ts,
          int n, bool home, uint64_t same_hash, bool runs)
{
    struct tpm_batch_pkt *p = bp, *const end = bp + n;
    struct tpm_batch_pkt *start = bp;   /* First packet not updated. */
    int hits = 0;
    /* Read once: the compiler cannot tell that the stores to flows leave
     * them alone. */
    struct tpm_flow *const flows = tpm->ft.flows;
    const uint32_t flows_mask = tpm->ft.mask;
    struct plan_cache__ pc = { .mask = UINT32_MAX, .plan = NULL };
    struct tpm_flow *f = tpm->last_flow;
    if (!f || f->gen != tpm->last_gen) {
        /* None, or reused since: the cache is void. */
        f = &no_flow__;
    }
    while (p < end) {
        /* The common packet: a flow in the last flow or its home slot,
         * live, without state, not followed by a run.  Anything else
         * leaves this loop before it changes anything.  The packet's
         * index only where 'same_hash' is read: the copy without runs
         * walks the batch by pointer alone. */
        for (; p < end; p++) {
            const struct tpm_pkt *pkt = &p->pkt;
            /* A packet not parsed (IP version 0) equals no entry
             * (tpm_flow_key_equal()): it leaves at the second test. */
            int i = p - bp;
            /* With pass 2's home buckets, its 'same_hash' says whether
             * the last flow's hash is the packet's (pass 2 skips the
             * packets not parsed as this loop does): the copy without
             * runs tests nothing. */
            struct tpm_flow *g = f;
            bool hit = ((home ? same_hash >> i & 1 : g->hash == pkt->hash)
                        && tpm_flow_key_equal(g, &pkt->key));
            if (!hit) {
                g = home ? p->flow : &flows[pkt->hash & flows_mask];
                /* The key alone (tpm_flow_holds() without the hash,
                 * which the key decides). */
                if (OVS_UNLIKELY(!tpm_flow_key_equal(g, &pkt->key))) {
                    break;
                }
            }
            if (OVS_UNLIKELY(g->state != TPM_FLOW_LIVE || g->has_conn)
                || (runs && same_hash >> (i + 1) & 1)) {
                break;
            }
            hits += hit;
            f = g;
            p->flow = f;
        }
        if (p == end) {
            break;
        }

        /* Any other packet. */
        struct tpm_pkt *pkt = &p->pkt;
        int i = p - bp;
        if (!pkt->key.ipver) {
            update__(tpm, start, p, &pc);
            start = ++p;
            continue;
        }
        if ((home ? same_hash >> i & 1 : f->hash == pkt->hash)
            && tpm_flow_key_equal(f, &pkt->key)) {
            hits++;
        } else {
            f = tpm_flow_table_find(&tpm->ft, &pkt->key, pkt->hash);
            if (!f) {
                bool replaced;
                update__(tpm, start, p, &pc);
                start = p;
                f = tpm_flow_table_insert(&tpm->ft, &pkt->key, pkt->hash,
                                          tpm->tag, &replaced, NULL);
                tpm->flow_port[tpm_flow_index(&tpm->ft, f)] = tpm->rx_port;
                if (tpm->n_state_evs) {
                    tpm_conn_join__(tpm, f);
                }
                if (tpm->p.dos_threshold || !tpm->n_evs) {
                    /* Unmatched until it passes the threshold, or until
                     * an event is added (backfill). */
                    f->state = tpm->n_evs ? TPM_FLOW_PENDING
                                          : TPM_FLOW_LIVE;
                    f->birth = tpm->ev_seq;
                } else {
                    flow_match__(tpm, f);
                }
            }
        }
        if (f->state == TPM_FLOW_PENDING) {
            update__(tpm, start, p, &pc);
            start = p;
            flow_pending__(tpm, f, pkt);
        }
        if (f->has_conn) {
            /* The connection's state, not the flow's statistics: the
             * packets before this one need not be updated first. */
            tpm_conn_update__(tpm, f, pkt, ts ? ts[i] : tpm->now_ns);
        } else if (runs && (same_hash >> (i + 1) & 1)
                   && f->state == TPM_FLOW_LIVE) {
            /* The packets of this flow that follow this one make a run:
             * one update for all of them. */
            update__(tpm, start, p, &pc);
            int run = flow_update_run__(tpm, f, p, end - p, same_hash >> i);
            hits += run - 1;
            p += run;
            start = p;
            continue;
        }
        p->flow = f;
        p++;
    }
    update__(tpm, start, end, &pc);
    if (f != &no_flow__) {
        tpm->last_flow = f;
        tpm->last_gen = f->gen;
    }
    return hits;
}

/* Puts the tenant of 'pkt' into its key: the slot of the VNI it was
 * decapsulated from, or of its port's (tpm_set_rx_tunnel()), and hashes
 * the key again.  Returns false, leaving the packet unparsed (not
 * monitored, counted), if the tenant has no slot: every one is taken. */
static bool
tenant_key__(struct tpm *tpm, struct tpm_pkt *pkt)
{
    uint32_t vni = pkt->tunnel.type ? pkt->tunnel.vni : tpm->rx_tun_vni;
    uint16_t slot = tpm->tun_last_slot;

    if (!slot || tpm->tun_last_vni != vni) {
        slot = tpm_tenants_intern(tpm->tenants, vni);
        if (OVS_UNLIKELY(!slot)) {
            TPM_STAT_ADD(tpm, tun_slots_full, 1);
            pkt->key.ipver = 0;
            return false;
        }
        tpm->tun_last_vni = vni;
        tpm->tun_last_slot = slot;
    }
    pkt->key.tun = slot;
    pkt->hash = tpm_key_hash(&pkt->key);
    return true;
}

/* The underlay view of the frames among 'frames' that were tunnelled
 * (their packets in 'bp' decapsulated, or not parsed): each is counted again as
 * its outer flow, as the monitor without tunnel ports parses it, under
 * the key's tenant TPM_TUN_UNDERLAY, which only underlay events match
 * (flow_filter_ok__()).  A frame that is not a datagram to a tunnel port is
 * left alone: it is its own outer flow already, or not IP.  Runs only
 * while an underlay event is installed.  Returns the packets that needed
 * no flow lookup. */
static int __attribute__((noinline))
underlay__(struct tpm *tpm, const struct tpm_frame *frames,
           const uint64_t *ts, const struct tpm_batch_pkt *bp, int n)
{
    struct tpm_batch_pkt outer[TPM_BATCH_MAX];
    uint64_t outer_ts[TPM_BATCH_MAX];
    int m = 0;

    for (int i = 0; i < n; i++) {
        if (!bp[i].pkt.tunnel.type && bp[i].pkt.key.ipver) {
            continue;
        }
        struct tpm_pkt *o = &outer[m].pkt;
        if (!tpm_packet_parse_full(frames[i].data, frames[i].caplen,
                                   frames[i].wirelen, o, NULL)
            || o->key.proto != IPPROTO_UDP
            || tpm_tunnel_ports_lookup(&tpm->tunnels, o->key.dport)
               == TPM_TUN_NONE) {
            continue;
        }
        o->key.tun = TPM_TUN_UNDERLAY;
        o->hash = tpm_key_hash(&o->key);
        if (ts) {
            outer_ts[m] = ts[i];
        }
        m++;
    }
    TPM_STAT_ADD(tpm, tun_underlay, m);
    return m ? scatter__(tpm, outer, ts ? outer_ts : NULL, m, false, 0, false)
             : 0;
}

/* The frames that phase 1's pass 2 leaves to the full parser
 * (tpm_packet_parse_hash_tun()) when it takes the inline parser without
 * tunnels: 'pkt' as pass 2 makes it.  Returns false if not parsed. */
static bool __attribute__((noinline))
parse_full__(struct tpm *tpm, const struct tpm_frame *frame,
             struct tpm_pkt *pkt)
{
    return tpm_packet_parse_hash_tun(frame->data, frame->caplen,
                                     frame->wirelen, pkt, &tpm->st.parse,
                                     &tpm->tunnels);
}

/* Phase 1, pass 2, for the 'n' frames 'frames': parses each into the
 * batch's packets 'bp', hashes its key, stores its flow's home bucket in
 * the packet's 'flow' and prefetches it, and its statistics line too if
 * an event keeps summaries or the packet is not IPv4 (once for a run of
 * packets of one flow; a packet not parsed, whose key's IP version is 0,
 * gets the bucket before it, an entry that pass 3 may read and that its
 * key never equals); adds the frames' bytes to '*bytesp'.  Returns the
 * bits of 'same_hash' (bit i: packet i has the hash of the IP packet
 * before it).  With 'plain' (a constant: the
 * monitor has no tunnel ports, the port is not a tunnel's, and
 * 'tpm_key_hash_hw' is true) the common frame is parsed and hashed
 * inline, without the tests for tunnels and tenants, and leaves the
 * fields only TCP has unwritten for UDP and the tunnel unwritten
 * (tpm_packet_parse_v4__()): nothing reads the first for a flow that is
 * not TCP (tcp-state.c), nor the second without tunnel ports.  With
 * 'vars' false as well (a constant: no event keeps a summary, no flow a
 * TCP state), the common frame's variables are left zero: only its key
 * and bytes are read (the count of a flow without summaries), and a flow
 * that still keeps a retired summary's slot updates it with zeros that
 * nothing reads. */
static inline __attribute__((always_inline)) uint64_t
parse__(struct tpm *tpm, const struct tpm_frame *frames,
        struct tpm_batch_pkt *bp, int n, uint64_t *bytesp, bool plain,
        bool vars)
{
    uint32_t prev_hash = tpm->last_flow ? tpm->last_flow->hash : 0;
    uint64_t same_hash = 0;
    uint64_t bytes = 0;
    /* Read once: the compiler cannot tell that the packets' stores leave
     * them alone. */
    struct tpm_flow *const flows = tpm->ft.flows;
    const uint32_t flows_mask = tpm->ft.mask;
    const bool rx_tunnelled = tpm->rx_tunnelled;
    /* Where the line to write is, from the bucket: the statistics line of
     * this epoch if an event keeps summaries (else line 0 again, which
     * the packet path writes too: no test per packet); a packet that is
     * not IPv4 has its counts in the statistics line either way. */
    const size_t stats_line = offsetof(struct tpm_flow, stats[tpm->tag & 1]);
    const size_t write_v4 = tpm->kind_refs ? stats_line : 0;
    struct tpm_flow *b = &flows[prev_hash & flows_mask];
    const struct tpm_frame *fr = frames;
    for (struct tpm_batch_pkt *p = bp; p < bp + n; p++, fr++) {
        struct tpm_pkt *pkt = &p->pkt;
        size_t write = write_v4;
        bytes += fr->wirelen;
        if (plain) {
            uint64_t w0, w2, w4;
            if (OVS_LIKELY(tpm_packet_parse_v4__(fr->data, fr->caplen,
                                                 fr->wirelen, NULL, pkt,
                                                 &w0, &w2, &w4, false, vars)
                           == TPM_FAST_PLAIN)) {
                pkt->hash = tpm_key_hash_v4__(&pkt->key, w0, w2, w4, true);
            } else if (!parse_full__(tpm, fr, pkt)) {
                p->flow = b;
                continue;
            } else if (pkt->key.ipver != 4) {
                write = stats_line;
            }
        } else {
            if (!tpm_packet_parse_hash_tun(fr->data, fr->caplen,
                                           fr->wirelen, pkt, &tpm->st.parse,
                                           &tpm->tunnels)) {
                p->flow = b;
                continue;
            }
            if (OVS_UNLIKELY(pkt->tunnel.type | rx_tunnelled)
                && !tenant_key__(tpm, pkt)) {
                p->flow = b;
                continue;
            }
            if (pkt->key.ipver != 4) {
                write = stats_line;
            }
        }
        if (pkt->hash == prev_hash) {
            same_hash |= 1ull << (p - bp);
        } else {
            b = &flows[pkt->hash & flows_mask];
            tpm_prefetch(b);
            tpm_prefetch_write((const char *) b + write);
            prev_hash = pkt->hash;
        }
        p->flow = b;
    }
    *bytesp += bytes;
    return same_hash;
}

/* Phase 1 for 'n' frames, with arrival times 'ts' (NULL: the monitor's
 * clock). */
static inline void
process_batch__(struct tpm *tpm, const struct tpm_frame *frames,
                const uint64_t *ts, int n)
{
    struct tpm_batch_pkt bp[TPM_BATCH_MAX];
    uint64_t bytes = 0;
    int hits;

    n = MIN(n, TPM_BATCH_MAX);

    if (OVS_UNLIKELY(!tpm->n_evs)) {
        /* Nothing to watch: count and leave (the flow table fills again
         * from the next packets once an event is added). */
        for (int i = 0; i < n; i++) {
            bytes += frames[i].wirelen;
        }
        TPM_STAT_ADD(tpm, packets, n);
        TPM_STAT_ADD(tpm, bytes, bytes);
        TPM_STAT_ADD(tpm, batches, 1);
        return;
    }

    /* Pass 1: bring the headers in (unrolled: the loop's own
     * instructions were most of it). */
#pragma GCC unroll 4
    for (int i = 0; i < n; i++) {
        tpm_prefetch(frames[i].data);
    }

    /* Pass 2, compiled three times: batches of a port without tunnels
     * (no tunnel ports, not a tunnel's port) and with the CPU's hash take
     * a copy without their tests, and of that copy the one that reads no
     * variable while nothing needs one (no summary kept, no TCP state). */
    uint64_t same_hash;
    if (OVS_LIKELY(!(tpm->rx_tunnelled | tpm->tunnels.n)
                   && tpm_key_hash_hw)) {
        if (tpm->kind_refs
            || tpm->n_conn_free != tpm->p.tcp_state_pool) {
            same_hash = parse__(tpm, frames, bp, n, &bytes, true, true);
        } else {
            same_hash = parse__(tpm, frames, bp, n, &bytes, true, false);
        }
    } else {
        same_hash = parse__(tpm, frames, bp, n, &bytes, false, true);
    }

    /* Pass 3, compiled twice: batches without runs of one flow (every
     * packet of another flow than the one before it) never test for
     * runs. */
    hits = same_hash ? scatter__(tpm, bp, ts, n, true, same_hash, true)
                     : scatter__(tpm, bp, ts, n, true, 0, false);
    if (OVS_UNLIKELY(tpm->n_underlay_evs) && tpm->tunnels.n) {
        /* Without tunnel ports no frame is tunnelled (and the plain copy
         * of pass 2 leaves the packets' 'tunnel' unwritten). */
        hits += underlay__(tpm, frames, ts, bp, n);
    }

    TPM_STAT_ADD(tpm, packets, n);
    TPM_STAT_ADD(tpm, bytes, bytes);
    TPM_STAT_ADD(tpm, batches, 1);
    TPM_STAT_ADD(tpm, lastflow_hits, hits);
    const struct tpm_flow_table_stats *fs = &tpm->ft.stats;
    TPM_STAT_SET(tpm, flow_inserts, fs->inserts);
    TPM_STAT_SET(tpm, flow_reuses, fs->reuses);
    TPM_STAT_SET(tpm, flow_evictions, fs->evictions);
    TPM_STAT_SET(tpm, dos_removed_collision, fs->pending_reused);
    TPM_STAT_SET(tpm, flows_live, tpm->ft.n_live);
    if (OVS_UNLIKELY(tpm->tun_last_slot)) {
        TPM_STAT_SET(tpm, tenants, tpm_tenants_count(tpm->tenants));
    }
}

void
tpm_process_batch(struct tpm *tpm, const struct tpm_frame *frames, int n)
{
    process_batch__(tpm, frames, NULL, n);
}

void
tpm_process_batch_at(struct tpm *tpm, const struct tpm_frame *frames,
                     const uint64_t *ts_ns, int n)
{
    process_batch__(tpm, frames, ts_ns, n);
}
