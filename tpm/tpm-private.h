/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of libtpm shared by its files.  Not for users of the library.
 * Which file does what:
 *
 *   tpm.c            the monitor's life (parameters, create, destroy),
 *                    events (add, delete, their summary kinds), the clock
 *                    (epochs, sweep steps, scrubbing) and control
 *                    (commands, polls, statistics).
 *   match-scatter.c  phase 1: match and scatter (algorithm 1), and the
 *                    backfill that matches existing flows to new events.
 *   sweep.c          phase 2: gather, test and report (algorithm 3).
 *   triggers.c       the trigger repository.
 *   tcp-state.c      the connection pool: per-flow TCP state.
 *
 * Calls go one way: tpm.c calls match-scatter.c, sweep.c, triggers.c and
 * tcp-state.c; match-scatter.c calls triggers.c and tcp-state.c; sweep.c
 * calls triggers.c; triggers.c and tcp-state.c call no other file of
 * libtpm.  The packet path's hot helpers are all in match-scatter.c
 * (always_inline there); only what new flows, pending flows and flows
 * with TCP state need crosses a file.
 *
 * Data layout (paper section 5.3, figure 3):
 *
 *   flow table       tpm/flow-table.h: per-5-tuple statistics.
 *   summary kinds    what a flow may keep besides packets and bytes: a
 *                    per-packet term and an operation (sum, sum of squares,
 *                    min, max, last, count of non-zero).  Triggers share
 *                    kinds; a flow's 'sum_mask' says which it keeps, and
 *                    its slots hold them in increasing kind order.
 *   events           installed definitions, compiled: the kinds they need,
 *                    interval in epochs, granularity.
 *   trigger repository (triggers.c)
 *                    'struct tpm_child' instances, one per (event, group
 *                    key), stored contiguously and swept in order; each has
 *                    accumulators for the current and previous interval, a
 *                    history of its last K values (separate array), and the
 *                    list of its flows: one inline item (enough for 5-tuple
 *                    granularity, no chunk needed) and then chunks of 64
 *                    (flow index, generation) items from a huge-page pool;
 *                    beside them, one eight-byte skip entry each
 *                    ('struct tpm_skip'), with which the sweep passes a
 *                    quiet one-flow instance without reading its lines.
 *   instance map     (event, group key) -> instance, for new flows.
 *   trigger index    tpm/trig-index.h: tuple space search over filters.
 *   filter table     DoS resilience (section 5.6): bytes per flow hash
 *                    bucket; flows are matched only past the threshold.
 *   connection pool  (tcp-state.c) per-flow state for the variables
 *                    that need it (rwnd, is_lost, is_burst, rtt, seq, ack,
 *                    dup), outside the flow table's hot lines: one 'struct
 *                    tpm_conn' per connection, one half per direction,
 *                    taken from a pre-allocated pool only for flows matched
 *                    by an event that needs it (and for the reverse
 *                    direction of such TCP flows, whose ACKs feed rtt, ack
 *                    and dup).  A flow entry with 'has_conn' names its
 *                    connection and half in 'flow_conn'; a half belongs to
 *                    the flow entry that names it, so a reused or freed
 *                    entry loses its half without any bookkeeping, and the
 *                    scrubber returns connections whose two halves are
 *                    orphaned to the pool.
 */
#ifndef TPM_PRIVATE_H
#define TPM_PRIVATE_H 1

#include "flow-table.h"
#include "hugealloc.h"
#include "spsc.h"
#include "tenants.h"
#include "tpm.h"
#include "trig-index.h"

#define TPM_MAX_KINDS 32        /* Bits in 'sum_mask'. */
#define TPM_EV_MAX_KINDS TPM_FLOW_SLOTS
#define TPM_ACC (1 + TPM_EV_MAX_KINDS)  /* packets + kinds. */
#define TPM_CHUNK_ITEMS 64
#define TPM_NONE UINT32_MAX
#define TPM_SWEEP_RING 256      /* Sweep durations kept for percentiles. */

enum tpm_sum_op {
    TPM_SUM_SUM,
    TPM_SUM_SUMSQ,
    TPM_SUM_MIN,
    TPM_SUM_MAX,
    TPM_SUM_LAST,
    TPM_SUM_NONZERO,            /* Number of packets with term != 0. */
};

/* Or'ed into an operation where the sweep reads it (an event's 'ops', a
 * trigger instance's 'kind_op'): the kind's slots hold integers. */
#define TPM_SUM_INT 0x80

/* Returns true if the slots of the kind of variable 'var' (-1: an
 * expression) and operation 'op' hold integers ('union tpm_flow_slot'):
 * every variable is an integer, and all but a sum of squares stay one
 * (a sum of squares of 32-bit values could overflow 64 bits). */
static inline bool
tpm_kind_int(int var, enum tpm_sum_op op)
{
    return var >= 0 && op != TPM_SUM_SUMSQ;
}

/* The value of slot 's' for the sweep, whose operation in an event's
 * 'ops' or an instance's 'kind_op' is 'op' (TPM_SUM_INT set: an
 * integer). */
static inline double
tpm_slot_value(union tpm_flow_slot s, uint8_t op)
{
    return op & TPM_SUM_INT ? (double) s.u : s.d;
}

struct tpm_kind {
    struct tpm_expr *term;      /* Owned copy; NULL if slot unused. */
    int var;                    /* Plain variable, or -1. */
    uint8_t op;                 /* enum tpm_sum_op. */
    bool retired;               /* Unused, flows may still keep it. */
    uint32_t refs;
    uint64_t retire_pass;       /* Scrub pass when retired. */
};

/* A packet of phase 1's batch (match-scatter.c): the parsed packet and
 * its flow entry, the home bucket after pass 2, the flow itself after pass
 * 3's lookup.  Two cache lines (on LP64), so that the passes walk the
 * batch by pointer. */
struct tpm_batch_pkt {
    struct tpm_pkt pkt;
    struct tpm_flow *flow;
} __attribute__((aligned(CACHE_LINE_SIZE)));
BUILD_ASSERT_DECL(sizeof(void *) != 8
                  || sizeof(struct tpm_batch_pkt) == 2 * CACHE_LINE_SIZE);

/* An update plan: how pass 3 of phase 1 (match-scatter.c) updates the
 * statistics slots of the flows whose summary mask is 'mask', in slot
 * order.  A slot whose kind is a plain variable of every packet (packets,
 * bytes, volume, ttl, ecn) has the code TPM_PLAN_CODE(var, op), one case
 * of one switch; any other (a TCP-state variable, an expression) has
 * TPM_PLAN_KIND and is computed from its kind 'kind[i]'.  Plans are
 * cached by mask (a few masks cover every flow), built on first use and
 * dropped whenever a kind id gets a new definition.
 *
 * A plan's function ('update') updates the flows of the batch's packets
 * 'p', 'p + 1', ... up to 'end' with those packets while their flows have
 * the plan's mask, and returns the first packet it left ('end', or one
 * whose flow has another mask): a loop per plan, so that the packets of a
 * batch, whose flows mostly share a mask, cost no call each. */
#define TPM_N_SUM_OPS 6
#define TPM_PLAN_VARS 5         /* TPM_VAR_PACKETS .. TPM_VAR_ECN. */
#define TPM_PLAN_CODE(VAR, OP) ((VAR) * TPM_N_SUM_OPS + (OP))
#define TPM_PLAN_KIND 0xff
#define TPM_PLANS 64            /* Direct-mapped cache entries. */
struct tpm_plan;
typedef const struct tpm_batch_pkt *tpm_plan_fn(
    const struct tpm *, const struct tpm_batch_pkt *p,
    const struct tpm_batch_pkt *end, const struct tpm_plan *);
struct tpm_plan {
    uint32_t mask;              /* Summary mask; 0 (nothing to do) for an
                                 * empty entry. */
    uint8_t n;                  /* Slots. */
    uint8_t code[TPM_FLOW_SLOTS];
    uint8_t kind[TPM_FLOW_SLOTS];
    /* The plan's function: a plan of one or two slots of bytes, volume or
     * ttl has one of its own, for its operations and its variables'
     * widths; each slot's value is the 8- or 32-bit variable at byte
     * 'off[i]' of the packet, combined into the slot without a test of
     * the epoch's first packet, since the slots start the epoch at their
     * operation's identity ('init': 0; for min UINT64_MAX, or +inf in a
     * double slot; for max 0, or -inf), which a value of an integer
     * variable always replaces exactly as the first packet's value
     * would.  The others share one that switches on 'code[i]' per slot.
     * NULL: not built. */
    tpm_plan_fn *update;
    uint8_t off[TPM_FLOW_SLOTS];
    union tpm_flow_slot init[TPM_FLOW_SLOTS];
};

/* How to compute one aggregate from an instance's accumulators. */
struct tpm_agg_calc {
    uint8_t agg;                /* enum tpm_agg. */
    bool has_term;              /* count(t) rather than count(). */
    int8_t sum, sumsq, ext;     /* Accumulator indexes, or -1. */
};

/* One aggregate node of an event's predicate, resolved to accumulators. */
struct tpm_ev_agg {
    const struct tpm_expr *node;
    struct tpm_agg_calc calc;
};

#define TPM_EV_MAX_AGGS 16

struct tpm_ev {
    /* Line 0: what the sweep reads for every instance. */
    uint32_t interval;          /* In epochs. */
    uint32_t id;                /* Caller's identifier. */
    /* Fast path for the common predicate "AGG op CONSTANT": the aggregate
     * compared ('fast_agg' >= 0), the comparison and the constant. */
    double fast_threshold;
    bool dying : 1;             /* Deleted; children being removed. */
    bool uses_prev : 1;         /* The predicate uses prev(). */
    uint8_t n_kinds;
    int8_t fast_agg;
    uint8_t fast_op;            /* enum tpm_binop. */
    struct tpm_agg_calc fast;
    uint8_t ops[TPM_EV_MAX_KINDS];      /* enum tpm_sum_op, per kind,
                                         * and TPM_SUM_INT. */
    int8_t kind_acc[TPM_MAX_KINDS]; /* Kind id -> index in 'kinds', or
                                     * -1: lets the sweep walk a flow's
                                     * slots in order, without popcount. */

    /* Colder. */
    struct tpm_event *def;      /* NULL: slot free. */
    uint16_t seq;               /* Event-add sequence (see flow 'birth'). */
    uint32_t kind_mask;
    uint8_t kinds[TPM_EV_MAX_KINDS];
    uint8_t n_aggs;
    struct tpm_ev_agg aggs[TPM_EV_MAX_AGGS];
    uint32_t n_children;
    bool needs_state;           /* Uses per-flow state variables. */
    uint32_t backfill_left;     /* Flow slots still to backfill. */
    uint64_t first_full;        /* First fully observed epoch (rel). */
    uint64_t added;             /* Epoch it was added in (rel): polls of
                                 * intervals that ended before are
                                 * answered EXPIRED, never from a history
                                 * that did not exist. */
} __attribute__((aligned(CACHE_LINE_SIZE)));
BUILD_ASSERT_DECL(offsetof(struct tpm_ev, def) <= CACHE_LINE_SIZE);

#define TPM_CHILD_PARTIAL 0x1    /* The current interval lost data. */
#define TPM_CHILD_LOST 0x2       /* Epochs 'lost_lo'..'lost_hi', after the
                                  * current interval, lost data: their
                                  * intervals are partial when they come. */

/* A trigger instance: four cache lines.  The sweep reads line 0 for every
 * instance; lines 1 and 2 only for instances that keep accumulators
 * across the sweep of one epoch; line 3 only to report.  For instances of
 * events that can be swept without their event (see sweep.c, "Planned
 * instances"), line 0 also holds a copy of what the sweep needs from the
 * event, so that it reads no event line either: with thousands of events
 * those are random accesses, one per instance. */
struct tpm_child {
    /* Line 0: what the sweep reads for every instance. */
    uint32_t ev;                /* Event slot. */
    uint32_t head;              /* First chunk, or TPM_NONE. */
    uint32_t in_idx, in_gen;    /* Inline item; in_idx TPM_NONE if none. */
    uint64_t iv;                /* Interval being accumulated (absolute
                                 * interval number). */
    uint64_t full_from;         /* Absolute epoch from which the event
                                 * observes whole intervals (its
                                 * 'first_full', which never changes once
                                 * known), or UINT64_MAX if not yet
                                 * copied: spares the sweep a read of the
                                 * event. */
    double threshold;           /* Planned: the event's 'fast_threshold'. */
    uint32_t ev_id;             /* Planned: the event's 'id'. */
    uint32_t hist_seq;          /* Intervals recorded in the history
                                 * (tpm_hist_push()): the next goes to
                                 * slot 'hist_seq' mod the ring's size,
                                 * and the newest min(hist_seq,
                                 * history_len) are valid. */
    uint8_t flags;              /* TPM_CHILD_*. */
    bool prev_pkts;             /* The previous interval saw packets
                                 * ('prev[0] != 0', which is not kept up
                                 * to date for events without prev()). */
    bool planned;               /* The event can be swept from this line
                                 * alone (the fields marked "Planned"). */
    uint8_t op;                 /* Planned: the event's 'fast_op'. */
    struct tpm_agg_calc calc;   /* Planned: the event's 'fast'. */
    uint8_t kind[2];            /* Planned: summary kind of accumulators 1
                                 * and 2, or TPM_NO_KIND. */
    uint8_t kind_op[2];         /* Planned: their enum tpm_sum_op and
                                 * TPM_SUM_INT. */
    bool sat_last;              /* The last interval closed held: it
                                 * will likely report again, so the sweep
                                 * prefetches line 3 (the group key). */
    int8_t value_acc;           /* Planned: the accumulator that is the
                                 * aggregate's value in an interval with
                                 * packets (sum, count, min, max, last),
                                 * or -1 (avg, stddev: computed). */
    uint8_t op_classes;         /* Planned: 'op' as the TPM_CMP_* outcomes
                                 * of comparing the value with
                                 * 'threshold' for which it holds. */
    /* Lines 1 and 2. */
    double acc[TPM_ACC] __attribute__((aligned(CACHE_LINE_SIZE)));
                                /* This interval: [0] packets. */
    double prev[TPM_ACC];       /* Previous interval (events that use
                                 * prev() only). */
    /* Line 3. */
    struct tpm_key gkey;
    uint32_t n_items;           /* Items in chunks. */
    uint16_t port;              /* The group's interface, if the event
                                 * groups by in_port (else 0): with
                                 * 'gkey', the instance's identity. */
    uint64_t lost_lo, lost_hi;  /* TPM_CHILD_LOST: absolute epochs. */
} __attribute__((aligned(CACHE_LINE_SIZE)));
BUILD_ASSERT_DECL(offsetof(struct tpm_child, op_classes) < CACHE_LINE_SIZE);
BUILD_ASSERT_DECL(offsetof(struct tpm_child, acc) == CACHE_LINE_SIZE);
BUILD_ASSERT_DECL(offsetof(struct tpm_child, gkey) == 3 * CACHE_LINE_SIZE);
BUILD_ASSERT_DECL(sizeof(struct tpm_child) == 4 * CACHE_LINE_SIZE);

#define TPM_NO_KIND 0xff

/* A trigger instance's skip entry (sweep.c, "Quiet instances skipped"),
 * in an array of its own beside the instances, eight bytes each, so that
 * the sweep finds the one-flow instances whose flow sent nothing in the
 * swept epoch without reading their lines: 'idx' is the instance's only
 * flow, or TPM_NONE (visit it: it has no such flow, a chunk, a flag, or
 * is not planned); the instance may be skipped while that flow's touched
 * bit is clear and the current relative epoch, as 32 bits, is at most
 * 'until' (the epoch after which its flow may be due for retirement). */
struct tpm_skip {
    uint32_t idx;
    uint32_t until;
};

/* Instances allocated past 'p.max_triggers' and never used, so that the
 * sweep's lookahead may read the line of an instance up to this many
 * past the last one without a test (sweep.c): zero at first, then
 * whatever instance last lived there (tpm_child_remove__()); either way
 * a flow index it only prefetches. */
#define TPM_CHILD_PAD 32

/* The outcomes of comparing two doubles, one bit each: a comparison
 * operator is the set of outcomes for which it holds (LT: TPM_CMP_LT;
 * NE: TPM_CMP_LT | TPM_CMP_GT | TPM_CMP_UNORDERED, as 'a != b' holds for
 * a NaN), so that the sweep tests a planned instance's predicate with one
 * AND instead of a switch on its operator. */
#define TPM_CMP_LT 0x1
#define TPM_CMP_EQ 0x2
#define TPM_CMP_GT 0x4
#define TPM_CMP_UNORDERED 0x8

static inline uint8_t
tpm_cmp_classes(enum tpm_binop op)
{
    switch (op) {
    case TPM_OP_LT: return TPM_CMP_LT;
    case TPM_OP_LE: return TPM_CMP_LT | TPM_CMP_EQ;
    case TPM_OP_GT: return TPM_CMP_GT;
    case TPM_OP_GE: return TPM_CMP_GT | TPM_CMP_EQ;
    case TPM_OP_EQ: return TPM_CMP_EQ;
    case TPM_OP_NE: return TPM_CMP_LT | TPM_CMP_GT | TPM_CMP_UNORDERED;
    case TPM_OP_ADD: case TPM_OP_SUB: case TPM_OP_MUL: case TPM_OP_DIV:
    case TPM_OP_AND: case TPM_OP_OR:
    default:
        return 0;
    }
}

/* Returns the TPM_CMP_* outcome of comparing 'a' with 'b'. */
static inline uint8_t
tpm_cmp_class(double a, double b)
{
    uint8_t c = (a < b) | (a == b) << 1 | (a > b) << 2;
    return c ? c : TPM_CMP_UNORDERED;
}

/* An entry of an instance's history: what a poll asks for (tpm_poll())
 * and the idle test reads.  Sixteen bytes, so that no entry straddles
 * two cache lines and a ring of eight takes two lines. */
struct tpm_hist {
    uint64_t epoch;             /* Last epoch of the interval (abs). */
    double value;
};
BUILD_ASSERT_DECL(CACHE_LINE_SIZE % sizeof(struct tpm_hist) == 0);

struct tpm_chunk {
    uint32_t idx[TPM_CHUNK_ITEMS];
    uint32_t gen[TPM_CHUNK_ITEMS];
};
BUILD_ASSERT_DECL(sizeof(struct tpm_chunk) == 8 * CACHE_LINE_SIZE);

/* Per-flow state of one direction of a connection ("this" direction; the
 * other half is the reverse direction).  Sequence numbers are unwrapped
 * to 64 bits.  See docs/event-language.md for the variables. */
struct tpm_half {
    uint64_t snd_max;           /* Highest sequence end sent. */
    uint64_t ack;               /* Highest ack received for this
                                 * direction's data. */
    uint64_t last_ns;           /* Time of the previous packet. */
    uint64_t sample_ns;         /* RTT sample in flight: when sent. */
    uint64_t sample_end;        /* Its sequence end: an ack at or beyond
                                 * it completes the sample. */
    uint64_t rtt;               /* Latest RTT sample, ns. */
    uint32_t dup;               /* Duplicate-ACK byte estimate. */
    uint32_t flow;              /* Owner flow entry, or TPM_NONE. */
    uint16_t mss;               /* MSS option of this direction's SYN. */
    uint16_t win;               /* Raw window of the previous packet. */
    uint8_t wscale;             /* Window-scale option of this direction's
                                 * SYN (0..TPM_WSCALE_MAX), TPM_WSCALE_NONE,
                                 * or TPM_WSCALE_UNSEEN: the SYN carried it
                                 * (the SYN-ACK did) but came before the
                                 * state. */
    uint8_t flags;              /* TPM_HALF_*. */
};

#define TPM_WSCALE_UNSEEN 0xfe  /* Beside lib/packet.h's TPM_WSCALE_*. */

#define TPM_HALF_PKT 0x01       /* A packet was seen (last_ns, win). */
#define TPM_HALF_SEQ 0x02       /* 'snd_max' is set. */
#define TPM_HALF_ACK 0x04       /* 'ack' is set. */
#define TPM_HALF_SAMPLING 0x08  /* An RTT sample is in flight. */
#define TPM_HALF_SYN 0x10       /* This direction's SYN was seen. */

struct tpm_conn {
    struct tpm_half h[2];
} __attribute__((aligned(CACHE_LINE_SIZE)));
BUILD_ASSERT_DECL(sizeof(struct tpm_half) <= CACHE_LINE_SIZE);
BUILD_ASSERT_DECL(sizeof(struct tpm_conn) == 2 * CACHE_LINE_SIZE);

/* 'flow_conn' entries: connection index << 1 | half. */
#define TPM_CONN_REF(CONN, HALF) ((CONN) << 1 | (HALF))

struct tpm_idmap_entry {
    uint32_t id;
    uint32_t slot;              /* TPM_NONE: empty. */
};

struct tpm_imap_entry {
    uint32_t hash;
    uint32_t child;             /* TPM_NONE: empty. */
};

/* Sweep cursor: where the current sweep resumes. */
struct tpm_sweep {
    bool active;
    uint64_t epoch;             /* Relative epoch being swept. */
    uint32_t child;             /* Next child. */
    bool child_begun;           /* Interval roll-over done for 'child'. */
    bool inline_done;
    uint32_t rc, ri;            /* Reader chunk and item. */
    uint32_t wc, wi;            /* Writer chunk and item. */
    uint32_t prev_wc;           /* Chunk before 'wc', or TPM_NONE. */
    uint64_t ns;                /* Time spent so far. */
    uint32_t quiet;             /* Planned one-flow instances found quiet
                                 * (skipped, or visited and quiet). */
    bool fetch_all;             /* The planned run's lookahead fetches
                                 * every flow entry, sent or quiet
                                 * (sweep.c, planned_prefetch__()). */
};

struct tpm {
    struct tpm_params p;

    /* Clock. */
    bool clock_started;
    uint64_t base;              /* Absolute epoch of relative epoch 0. */
    uint64_t cur;               /* Current relative epoch. */
    uint32_t tag;               /* cur + 2. */

    struct tpm_flow_table ft;
    struct trig_index index;

    struct tpm_kind kinds[TPM_MAX_KINDS];
    uint32_t kind_refs;         /* Sum of the kinds' 'refs': nonzero if an
                                 * event keeps summaries, so that phase 1
                                 * prefetches a flow's statistics line
                                 * with its line 0 (an IPv4 flow without
                                 * summaries needs line 0 alone). */
    struct tpm_plan plans[TPM_PLANS];   /* Update plans by summary mask. */
    uint64_t scrub_pass;

    struct tpm_ev *evs;         /* p.max_events slots. */
    uint32_t n_evs;             /* Installed (not dying). */
    uint32_t evs_hwm;           /* Slots ever used. */
    uint32_t n_dying;           /* Events deleted whose instances the
                                 * sweep has yet to remove: while 0, it
                                 * need not look at an instance's event
                                 * to know. */
    uint32_t *free_evs;         /* Freed slots below 'evs_hwm' (stack). */
    uint32_t n_free_evs;
    struct tpm_idmap_entry *idmap;  /* Event id -> slot, so commands run by
                                     * the PMD cost O(1), not a scan. */
    uint32_t idmap_mask;
    uint16_t ev_seq;
    uint32_t *backfill;         /* Event slots with backfill_left > 0. */
    uint32_t n_backfill;

    struct tpm_child *children; /* p.max_triggers, contiguous, and
                                 * TPM_CHILD_PAD more that are never
                                 * used (below). */
    uint32_t n_children;
    struct tpm_skip *skip;      /* Per child, and TPM_CHILD_PAD more
                                 * (idx TPM_NONE). */
    struct tpm_hist *hist;      /* 'hist_ring' per child, in
                                 * 'hist_region'. */
    uint32_t hist_ring;         /* history_len rounded up to a power of
                                 * two: a slot is a mask away from the
                                 * instance's 'hist_seq'. */
    struct tpm_imap_entry *imap; /* (event, group) -> instance. */
    uint32_t imap_mask;
    struct tpm_huge_region child_region;
    struct tpm_huge_region hist_region;

    struct tpm_chunk *chunks;
    uint32_t *chunk_next;       /* Next chunk in list or free list. */
    uint32_t *chunk_n;          /* Items used. */
    uint32_t chunk_free;
    struct tpm_huge_region chunk_region;

    uint64_t *dos;              /* Filter table: window << 32 | bytes. */

    /* Connection pool (per-flow state). */
    struct tpm_conn *conns;     /* p.tcp_state_pool entries. */
    uint32_t *flow_conn;        /* Per flow entry with 'has_conn':
                                 * TPM_CONN_REF(). */
    uint32_t *conn_free;        /* Free entries (stack). */
    uint32_t n_conn_free;
    uint32_t conn_scrub_pos;    /* Reclaim cursor. */
    uint32_t n_state_evs;       /* Installed events that need state. */
    uint32_t n_underlay_evs;    /* Installed events that watch the
                                 * underlay: while there are any, phase
                                 * 1 counts tunnelled frames' outer flows
                                 * too (match-scatter.c). */
    uint64_t now_ns;            /* Latest tpm_advance() time. */
    struct tpm_huge_region conn_region;

    /* Last-flow cache. */
    struct tpm_flow *last_flow;
    uint32_t last_gen;

    /* Tunnels: the UDP ports decapsulated; the tenant slots (the keys'
     * 'tun': the monitor's own table, or one it shares) with a one-entry
     * cache; the tenant of the current port's untunnelled frames
     * (tpm_set_rx_tunnel()). */
    struct tpm_tunnel_ports tunnels;
    struct tpm_tenants *tenants;
    struct tpm_tenants *own_tenants;    /* Freed with the monitor. */
    uint32_t tun_last_vni;
    uint16_t tun_last_slot;     /* 0: the cache is empty. */
    bool rx_tunnelled;
    uint32_t rx_tun_vni;

    /* Ports (tpm_set_rx_port()): the current batches' interface, and the
     * one each flow entry was first seen on (written when the entry is
     * filled, read when the flow is matched). */
    uint16_t rx_port;
    uint16_t *flow_port;        /* Per flow entry. */

    struct tpm_sweep sw;
    bool sweep_skipping;        /* The sweep skips quiet instances and
                                 * keeps their skip entries (sweep.c). */
    uint64_t sweep_cache_bytes; /* The core's L2 cache, in which the
                                 * flow entries a sweep reads may be
                                 * found again (tpm_sweep_start__()). */
    double cycles_per_item;     /* Running sweep cost estimate (TSC). */
    uint64_t sweep_ns[TPM_SWEEP_RING];
    uint32_t sweep_ns_pos;

    struct spsc_ring *cmd_ring;
    struct spsc_ring *report_ring;

    struct tpm_stats st;
};

/* Single-writer counter update, readable by other threads. */
#define TPM_STAT_ADD(TPM, FIELD, N)                                     \
    __atomic_store_n(&(TPM)->st.FIELD, (TPM)->st.FIELD + (N),          \
                     __ATOMIC_RELAXED)
#define TPM_STAT_SET(TPM, FIELD, V)                                     \
    __atomic_store_n(&(TPM)->st.FIELD, (V), __ATOMIC_RELAXED)

/* triggers.c: the trigger repository. */
uint32_t tpm_idmap_pos__(const struct tpm *, uint32_t id);
void tpm_idmap_delete__(struct tpm *, uint32_t hole);
struct tpm_ev *tpm_ev_find__(const struct tpm *, uint32_t id);
void tpm_ev_slot_free__(struct tpm *, struct tpm_ev *);
uint32_t tpm_interval_flags__(const struct tpm *, const struct tpm_ev *,
                              uint64_t start);
struct tpm_child *tpm_instance_get__(struct tpm *, uint32_t evi,
                                     const struct tpm_key *gkey,
                                     uint16_t port);
uint32_t tpm_instance_find__(const struct tpm *, uint32_t evi,
                             const struct tpm_key *gkey, uint16_t port);
void tpm_child_remove__(struct tpm *, uint32_t c);
void tpm_list_free__(struct tpm *, struct tpm_child *);
bool tpm_list_append__(struct tpm *, struct tpm_child *, uint32_t idx,
                       uint32_t gen);

/* tcp-state.c: the connection pool. */
void tpm_conn_join__(struct tpm *, struct tpm_flow *);
bool tpm_conn_attach__(struct tpm *, struct tpm_flow *);
void tpm_conn_scrub__(struct tpm *, uint32_t n);
void tpm_conn_update__(struct tpm *, const struct tpm_flow *,
                       struct tpm_pkt *, uint64_t now);

/* match-scatter.c: phase 1. */
void tpm_flow_relayout__(struct tpm_flow *, uint32_t mask);
void tpm_backfill_step__(struct tpm *, uint32_t n);

/* sweep.c */
void tpm_sweep_start__(struct tpm *, uint64_t epoch);
void tpm_sweep_abandon__(struct tpm *);
bool tpm_sweep_run__(struct tpm *, uint64_t budget_ns, bool may_wait);

/* Queues report 'r' for the controller, or counts it dropped. */
static inline void
tpm_report__(struct tpm *tpm, const struct tpm_report *r)
{
    if (spsc_push(tpm->report_ring, r)) {
        if (r->type == TPM_REPORT_SATISFIED) {
            TPM_STAT_ADD(tpm, reports, 1);
        }
    } else {
        TPM_STAT_ADD(tpm, reports_dropped, 1);
        free(r->error);
    }
}

static inline uint64_t
tpm_abs_epoch(const struct tpm *tpm, uint64_t rel)
{
    return tpm->base + rel;
}

static inline struct tpm_hist *
tpm_child_hist(const struct tpm *tpm, uint32_t c)
{
    return &tpm->hist[(size_t) c * tpm->hist_ring];
}

/* Returns the number of valid entries of 'c''s history. */
static inline uint32_t
tpm_hist_n(const struct tpm *tpm, const struct tpm_child *c)
{
    return MIN(c->hist_seq, tpm->p.history_len);
}

/* Returns the slot in its instance's history 'h' of the entry 'back'
 * intervals before the next one of an instance whose 'hist_seq' is
 * 'seq' (1: the newest, which requires 'seq' > 0), with 'ring' the
 * tpm's 'hist_ring'. */
static inline struct tpm_hist *
tpm_hist_at(struct tpm_hist *h, uint32_t seq, uint32_t back, uint32_t ring)
{
    return &h[(seq - back) & (ring - 1)];
}

/* Clears the skip entries of instances 'lo' up to 'hi' (excluded): the
 * sweep visits them. */
static inline void
tpm_skip_clear(struct tpm *tpm, uint32_t lo, uint32_t hi)
{
    for (uint32_t i = lo; i < hi; i++) {
        tpm->skip[i].idx = TPM_NONE;
    }
}

/* Counts the entry just written at slot 'hist_seq' of 'c''s history
 * (ring size 'ring').  Past 2^32 intervals the count restarts at 'ring',
 * which keeps the slot (a multiple of the ring) and the history full. */
static inline void
tpm_hist_push(struct tpm_child *c, uint32_t ring)
{
    if (OVS_UNLIKELY(!++c->hist_seq)) {
        c->hist_seq = ring;
    }
}

#endif /* tpm-private.h */
