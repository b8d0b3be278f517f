/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libtpm: the monitor's life (parameters, create, destroy), events, the
 * clock and control.  Phase 1 (match and scatter) is in match-scatter.c,
 * phase 2 (the sweep) in sweep.c, the per-flow TCP state in tcp-state.c.
 * See tpm.h and tpm-private.h.
 */
#include "tpm-private.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"

void
tpm_params_init(struct tpm_params *p)
{
    memset(p, 0, sizeof *p);
    p->epoch_ns = 10 * 1000 * 1000;
    p->flow_table_size = 65536;
    p->flow_probe_limit = 32;
    p->max_events = 8192;
    p->max_triggers = 131072;
    p->max_children = 16384;
    p->max_chunks = 16384;
    p->max_matches = 64;
    p->history_len = 8;
    p->dos_threshold = 0;
    p->dos_table_size = 65536;
    p->dos_window = 10;
    p->dos_clear_on_pass = 1;
    p->dos_precheck = 1;
    p->idle_epochs = 500;
    p->retire_epochs = 16;
    p->sweep_budget_ns = 10 * 1000;
    p->sweep_waits_for_reports = false;
    p->scrub_per_step = 256;
    p->ring_size = 4096;
    p->tcp_state_pool = 16384;
    p->burst_gap_ns = 20 * 1000;
    p->tenant_slots = 4096;
}

static char *
check_range__(const char *name, uint64_t value, uint64_t lo, uint64_t hi)
{
    if (value < lo || value > hi) {
        return xasprintf("%s=%llu is out of range [%llu, %llu]", name,
                         (unsigned long long) value,
                         (unsigned long long) lo, (unsigned long long) hi);
    }
    return NULL;
}

#define CHECK_RANGE(FIELD, LO, HI)                                      \
    do {                                                                \
        char *error_ = check_range__(#FIELD, p->FIELD, LO, HI);        \
        if (error_) {                                                   \
            return error_;                                              \
        }                                                               \
    } while (0)
#define CHECK_POW2(FIELD)                                               \
    if (!is_pow2(p->FIELD)) {                                           \
        return xasprintf("%s=%llu is not a power of two", #FIELD,       \
                         (unsigned long long) p->FIELD);                \
    }

char *
tpm_params_check(const struct tpm_params *p)
{
    CHECK_RANGE(epoch_ns, 100 * 1000, 3600ULL * 1000 * 1000 * 1000);
    CHECK_RANGE(flow_table_size, 64, 1u << 28);
    CHECK_POW2(flow_table_size);
    CHECK_RANGE(flow_probe_limit, 1, MIN(p->flow_table_size, 4096));
    CHECK_RANGE(max_events, 1, 1u << 20);
    CHECK_RANGE(max_triggers, 1, 1u << 26);
    CHECK_RANGE(max_children, 1, p->max_triggers);
    CHECK_RANGE(max_chunks, 1, 1u << 26);
    CHECK_RANGE(max_matches, 1, 64);
    CHECK_RANGE(history_len, 1, 1024);
    CHECK_RANGE(dos_threshold, 0, UINT32_MAX);
    CHECK_RANGE(dos_table_size, 64, 1u << 28);
    CHECK_POW2(dos_table_size);
    CHECK_RANGE(dos_window, 1, 1u << 30);
    CHECK_RANGE(dos_clear_on_pass, 0, 1);
    CHECK_RANGE(dos_precheck, 0, 1);
    CHECK_RANGE(idle_epochs, 2, 1u << 30);
    CHECK_RANGE(retire_epochs, 1, 1u << 20);
    CHECK_RANGE(sweep_budget_ns, 0, 1000ULL * 1000 * 1000);
    CHECK_RANGE(scrub_per_step, 1, 1u << 20);
    CHECK_RANGE(ring_size, 2, 1u << 24);
    CHECK_RANGE(tcp_state_pool, 0, 1u << 24);
    CHECK_RANGE(tenant_slots, 1, TPM_TENANT_SLOTS_MAX);
    CHECK_RANGE(burst_gap_ns, 0, 1000ULL * 1000 * 1000);
    if (p->sweep_waits_for_reports && p->ring_size < p->history_len + 1) {
        /* Room for one instance's reports, or the sweep never moves. */
        return xasprintf("ring_size=%"PRIu32" is below history_len + 1 = "
                         "%"PRIu32" (sweep_waits_for_reports)",
                         p->ring_size, p->history_len + 1);
    }
    return NULL;
}

/* Returns the power of two that tpm_create() gives a map of at least
 * twice 'n' entries. */
static uint64_t
map_size__(uint64_t n)
{
    uint64_t size = 4;
    while (size < 2 * n) {
        size *= 2;
    }
    return size;
}

uint64_t
tpm_params_memory(const struct tpm_params *p)
{
    const uint64_t page = TPM_HUGE_PAGE_SIZE;
    uint64_t m = 0;

    m += ROUND_UP((uint64_t) p->flow_table_size * sizeof(struct tpm_flow),
                  page);
    m += (uint64_t) p->flow_table_size / 4;    /* Touched bitmaps. */
    m += ROUND_UP(((uint64_t) p->max_triggers + TPM_CHILD_PAD)
                  * sizeof(struct tpm_child), page);
    m += ROUND_UP((uint64_t) p->max_triggers * pow2_ceil(p->history_len)
                  * sizeof(struct tpm_hist), page);
    m += map_size__(p->max_triggers) * sizeof(struct tpm_imap_entry);
    m += ROUND_UP((uint64_t) p->max_chunks * sizeof(struct tpm_chunk), page);
    m += (uint64_t) p->max_chunks * 2 * sizeof(uint32_t);
    if (p->tcp_state_pool) {
        m += ROUND_UP((uint64_t) p->tcp_state_pool * sizeof(struct tpm_conn),
                      page);
        m += (uint64_t) p->tcp_state_pool * sizeof(uint32_t);
        m += (uint64_t) p->flow_table_size * sizeof(uint32_t);
    }
    m += (uint64_t) p->flow_table_size * sizeof(uint16_t);   /* flow_port */
    m += (uint64_t) p->max_events * (sizeof(struct tpm_ev)
                                     + 2 * sizeof(uint32_t));
    m += map_size__(p->max_events) * sizeof(struct tpm_idmap_entry);
    m += (uint64_t) p->dos_table_size * sizeof(uint64_t);
    m += 2 * map_size__((p->ring_size + 1) / 2) * sizeof(struct tpm_report);
    return m;
}

struct tpm *
tpm_create(const struct tpm_params *params, char **errp)
{
    char *error = tpm_params_check(params);
    if (error) {
        *errp = error;
        return NULL;
    }

    struct tpm *tpm = xzalloc(sizeof *tpm);
    const struct tpm_params *p = &tpm->p;
    tpm->p = *params;
    trig_index_init(&tpm->index);

    int err = tpm_flow_table_init(&tpm->ft, p->flow_table_size,
                                  p->flow_probe_limit);
    if (err) {
        *errp = xasprintf("flow table of %u entries: %s",
                          p->flow_table_size, strerror(err));
        goto fail;
    }
    tpm->ft.dos_mode = p->dos_threshold > 0;

    /* Trigger repository (children) and chunk pool in huge pages. */
    size_t child_bytes = ((size_t) p->max_triggers + TPM_CHILD_PAD)
                         * sizeof *tpm->children;
    if (tpm_huge_alloc(&tpm->child_region, child_bytes,
                       "trigger repository")) {
        *errp = xasprintf("trigger repository of %u instances: out of "
                          "memory", p->max_triggers);
        goto fail;
    }
    tpm->children = tpm->child_region.base;
    if (tpm_huge_alloc(&tpm->chunk_region,
                       (size_t) p->max_chunks * sizeof *tpm->chunks,
                       "flow-list chunks")) {
        *errp = xasprintf("flow-list pool of %u chunks: out of memory",
                          p->max_chunks);
        goto fail;
    }
    tpm->chunks = tpm->chunk_region.base;
    tpm->chunk_next = xmalloc(p->max_chunks * sizeof *tpm->chunk_next);
    tpm->chunk_n = tpm_calloc_resident(p->max_chunks, sizeof *tpm->chunk_n);
    for (uint32_t i = 0; i < p->max_chunks; i++) {
        tpm->chunk_next[i] = i + 1 < p->max_chunks ? i + 1 : TPM_NONE;
    }
    tpm->chunk_free = 0;

    tpm->skip = xmalloc(((size_t) p->max_triggers + TPM_CHILD_PAD)
                        * sizeof *tpm->skip);
    tpm_skip_clear(tpm, 0, p->max_triggers + TPM_CHILD_PAD);
    tpm->hist_ring = pow2_ceil(p->history_len);
    tpm->sweep_cache_bytes = tpm_l2_cache_bytes();
    /* The history too: the sweep writes an instance's first entry as its
     * first interval closes, 'hist_ring' entries an instance (16 MB for
     * the default 131072 instances of 8). */
    if (tpm_huge_alloc(&tpm->hist_region, ((size_t) p->max_triggers
                                           * tpm->hist_ring
                                           * sizeof *tpm->hist),
                       "trigger history")) {
        *errp = xasprintf("history of %u trigger instances: out of memory",
                          p->max_triggers);
        goto fail;
    }
    tpm->hist = tpm->hist_region.base;
    uint32_t imap_size = map_size__(p->max_triggers);
    tpm->imap = xmalloc(imap_size * sizeof *tpm->imap);
    for (uint32_t i = 0; i < imap_size; i++) {
        tpm->imap[i].child = TPM_NONE;
    }
    tpm->imap_mask = imap_size - 1;

    tpm->evs = xzalloc_aligned(p->max_events * sizeof *tpm->evs,
                               CACHE_LINE_SIZE);
    tpm->free_evs = xcalloc(p->max_events, sizeof *tpm->free_evs);
    uint32_t idmap_size = map_size__(p->max_events);
    tpm->idmap = xmalloc(idmap_size * sizeof *tpm->idmap);
    for (uint32_t i = 0; i < idmap_size; i++) {
        tpm->idmap[i].slot = TPM_NONE;
    }
    tpm->idmap_mask = idmap_size - 1;
    tpm->backfill = xcalloc(p->max_events, sizeof *tpm->backfill);
    tpm->dos = tpm_calloc_resident(p->dos_table_size, sizeof *tpm->dos);
    if (p->tcp_state_pool) {
        if (tpm_huge_alloc(&tpm->conn_region,
                           (size_t) p->tcp_state_pool * sizeof *tpm->conns,
                           "per-flow state")) {
            *errp = xasprintf("per-flow state pool of %u connections: out "
                              "of memory", p->tcp_state_pool);
            goto fail;
        }
        tpm->conns = tpm->conn_region.base;
        tpm->conn_free = xmalloc(p->tcp_state_pool
                                 * sizeof *tpm->conn_free);
        for (uint32_t i = 0; i < p->tcp_state_pool; i++) {
            tpm->conns[i].h[0].flow = tpm->conns[i].h[1].flow = TPM_NONE;
            tpm->conn_free[i] = p->tcp_state_pool - 1 - i;
        }
        tpm->n_conn_free = p->tcp_state_pool;
        tpm->flow_conn = tpm_calloc_resident(p->flow_table_size,
                                             sizeof *tpm->flow_conn);
    }
    tpm->flow_port = tpm_calloc_resident(p->flow_table_size,
                                         sizeof *tpm->flow_port);
    tpm->own_tenants = tpm_tenants_create(p->tenant_slots);
    tpm->tenants = tpm->own_tenants;
    tpm_tunnel_ports_init(&tpm->tunnels);
    tpm->cmd_ring = spsc_create(p->ring_size, sizeof(struct tpm_report));
    tpm->report_ring = spsc_create(p->ring_size, sizeof(struct tpm_report));
    tpm->cycles_per_item = 20.0;
    tpm_tsc_per_us();           /* Calibrate now, not in the PMD loop. */
    return tpm;

fail:
    tpm_destroy(tpm);
    return NULL;
}

void
tpm_destroy(struct tpm *tpm)
{
    if (!tpm) {
        return;
    }
    if (tpm->evs) {
        for (uint32_t i = 0; i < tpm->p.max_events; i++) {
            tpm_event_destroy(tpm->evs[i].def);
        }
    }
    for (int k = 0; k < TPM_MAX_KINDS; k++) {
        tpm_expr_destroy(tpm->kinds[k].term);
    }
    /* Free what is still queued in the rings. */
    struct tpm_report r;
    while (tpm->cmd_ring && spsc_pop(tpm->cmd_ring, &r)) {
        if (r.type == TPM_REPORT_ADD_DONE) {
            tpm_event_destroy((struct tpm_event *) r.error);
        }
    }
    while (tpm->report_ring && spsc_pop(tpm->report_ring, &r)) {
        free(r.error);
    }
    spsc_destroy(tpm->cmd_ring);
    spsc_destroy(tpm->report_ring);
    trig_index_destroy(&tpm->index);
    tpm_tenants_destroy(tpm->own_tenants);
    tpm_flow_table_destroy(&tpm->ft);
    tpm_huge_free(&tpm->child_region);
    tpm_huge_free(&tpm->chunk_region);
    tpm_huge_free(&tpm->hist_region);
    tpm_huge_free(&tpm->conn_region);
    free(tpm->conn_free);
    free(tpm->flow_conn);
    free(tpm->flow_port);
    free(tpm->chunk_next);
    free(tpm->chunk_n);
    free(tpm->skip);
    free(tpm->imap);
    free(tpm->evs);
    free(tpm->free_evs);
    free(tpm->idmap);
    free(tpm->backfill);
    free(tpm->dos);
    free(tpm);
}

void
tpm_set_tunnel_ports(struct tpm *tpm, const struct tpm_tunnel_ports *ports)
{
    tpm->tunnels = *ports;
}

void
tpm_set_rx_tunnel(struct tpm *tpm, bool tunnelled, uint32_t vni)
{
    tpm->rx_tunnelled = tunnelled;
    tpm->rx_tun_vni = vni;
}

void
tpm_set_rx_port(struct tpm *tpm, uint16_t port)
{
    tpm->rx_port = port;
}

void
tpm_set_tenants(struct tpm *tpm, struct tpm_tenants *shared)
{
    tpm->tenants = shared ? shared : tpm->own_tenants;
    tpm->tun_last_slot = 0;
}

const struct tpm_tenants *
tpm_get_tenants(const struct tpm *tpm)
{
    return tpm->tenants;
}

const struct tpm_params *
tpm_get_params(const struct tpm *tpm)
{
    return &tpm->p;
}

void
tpm_set_dos_threshold(struct tpm *tpm, uint32_t bytes)
{
    tpm->p.dos_threshold = bytes;
    tpm->ft.dos_mode = bytes > 0;
}

/* Summary kinds. */

static bool
kind_usable__(const struct tpm *tpm, const struct tpm_kind *k)
{
    /* A retired kind's id may be reused once a full scrub pass has
     * removed it from every flow's mask. */
    return !k->term || (k->retired && tpm->scrub_pass >= k->retire_pass + 2);
}

/* Returns the id of kind ('term', 'op'), creating it if needed, or -1 if
 * all ids are taken. */
static int
kind_get__(struct tpm *tpm, const struct tpm_expr *term, enum tpm_sum_op op)
{
    int free_id = -1;
    for (int k = 0; k < TPM_MAX_KINDS; k++) {
        struct tpm_kind *kind = &tpm->kinds[k];
        if (kind->term && kind->op == op && !kind_usable__(tpm, kind)
            && tpm_expr_equal(kind->term, term)) {
            kind->refs++;
            kind->retired = false;
            tpm->kind_refs++;
            return k;
        }
        if (free_id < 0 && kind_usable__(tpm, kind)) {
            free_id = k;
        }
    }
    if (free_id >= 0) {
        struct tpm_kind *kind = &tpm->kinds[free_id];
        tpm_expr_destroy(kind->term);
        kind->term = tpm_expr_clone(term);
        kind->var = term->type == TPM_EXPR_VAR ? (int) term->var : -1;
        kind->op = op;
        kind->refs = 1;
        kind->retired = false;
        tpm->kind_refs++;
        /* A plan may name the id's old definition. */
        memset(tpm->plans, 0, sizeof tpm->plans);
    }
    return free_id;
}

static void
kind_put__(struct tpm *tpm, int k)
{
    struct tpm_kind *kind = &tpm->kinds[k];
    tpm->kind_refs--;
    if (!--kind->refs) {
        kind->retired = true;
        kind->retire_pass = tpm->scrub_pass;
    }
}

/* Events. */

static void backfill_cancel__(struct tpm *, uint32_t e);

const struct tpm_event *
tpm_event_get(const struct tpm *tpm, uint32_t id)
{
    struct tpm_ev *ev = tpm_ev_find__(tpm, id);
    return ev ? ev->def : NULL;
}

struct compile_ctx {
    struct tpm *tpm;
    struct tpm_ev *ev;
    char *error;
};

/* Returns the accumulator index of kind ('term', 'op') in the event being
 * compiled, adding the kind if needed, or -1 (error set). */
static int
ev_acc__(struct compile_ctx *ctx, const struct tpm_expr *term,
         enum tpm_sum_op op)
{
    struct tpm_ev *ev = ctx->ev;
    for (int i = 0; i < ev->n_kinds; i++) {
        const struct tpm_kind *k = &ctx->tpm->kinds[ev->kinds[i]];
        if (k->op == op && tpm_expr_equal(k->term, term)) {
            return 1 + i;
        }
    }
    if (ev->n_kinds >= TPM_EV_MAX_KINDS) {
        ctx->error = xasprintf("predicate needs more than %d per-flow "
                               "summaries", TPM_EV_MAX_KINDS);
        return -1;
    }
    int k = kind_get__(ctx->tpm, term, op);
    if (k < 0) {
        ctx->error = xasprintf("the monitor already tracks %d distinct "
                               "per-flow summaries, its maximum",
                               TPM_MAX_KINDS);
        return -1;
    }
    ev->kinds[ev->n_kinds] = k;
    ev->ops[ev->n_kinds] = op | (tpm_kind_int(ctx->tpm->kinds[k].var, op)
                                 ? TPM_SUM_INT : 0);
    ev->kind_acc[k] = ev->n_kinds;
    ev->kind_mask |= 1u << k;
    return 1 + ev->n_kinds++;
}

static void
compile_agg__(const struct tpm_expr *node, bool prev, void *ctx_)
{
    struct compile_ctx *ctx = ctx_;
    struct tpm_ev *ev = ctx->ev;
    if (ctx->error) {
        return;
    }
    if (prev) {
        /* The sweep keeps instances' previous-interval accumulators only
         * for such events (sweep.c). */
        ev->uses_prev = true;
    }
    for (int i = 0; i < ev->n_aggs; i++) {
        if (ev->aggs[i].node == node) {
            return;
        }
    }
    if (ev->n_aggs >= TPM_EV_MAX_AGGS) {
        ctx->error = xasprintf("predicate has more than %d aggregates",
                               TPM_EV_MAX_AGGS);
        return;
    }
    struct tpm_ev_agg *ea = &ev->aggs[ev->n_aggs];
    struct tpm_agg_calc *a = &ea->calc;
    ea->node = node;
    a->agg = node->agg;
    a->has_term = node->a != NULL;
    a->sum = a->sumsq = a->ext = -1;
    switch (node->agg) {
    case TPM_AGG_SUM:
    case TPM_AGG_AVG:
        a->sum = ev_acc__(ctx, node->a, TPM_SUM_SUM);
        break;
    case TPM_AGG_COUNT:
        if (node->a) {
            a->sum = ev_acc__(ctx, node->a, TPM_SUM_NONZERO);
        }
        break;
    case TPM_AGG_MIN:
        a->ext = ev_acc__(ctx, node->a, TPM_SUM_MIN);
        break;
    case TPM_AGG_MAX:
        a->ext = ev_acc__(ctx, node->a, TPM_SUM_MAX);
        break;
    case TPM_AGG_STDDEV:
        a->sum = ev_acc__(ctx, node->a, TPM_SUM_SUM);
        if (a->sum >= 0) {
            a->sumsq = ev_acc__(ctx, node->a, TPM_SUM_SUMSQ);
        }
        break;
    case TPM_AGG_LAST:
        a->ext = ev_acc__(ctx, node->a, TPM_SUM_LAST);
        break;
    case TPM_N_AGGS:
    default:
        ctx->error = xasprintf("unknown aggregate");
        break;
    }
    ev->n_aggs++;
}

static void
ev_release__(struct tpm *tpm, struct tpm_ev *ev)
{
    for (int i = 0; i < ev->n_kinds; i++) {
        kind_put__(tpm, ev->kinds[i]);
    }
    ev->n_kinds = 0;
    ev->kind_mask = 0;
}

char *
tpm_event_add(struct tpm *tpm, struct tpm_event *event, uint32_t id)
{
    const struct tpm_params *p = &tpm->p;

    bool needs_state = tpm_event_needs_tcp_state(event);
    if (needs_state && !p->tcp_state_pool) {
        return xasprintf("event %s: its predicate uses variables that need "
                         "per-flow state (rwnd, is_lost, is_burst, rtt, "
                         "seq, ack, dup), and this monitor keeps none "
                         "(tcp_state_pool=0)", event->name);
    }
    if (!event->interval_ns || event->interval_ns % p->epoch_ns) {
        char a[32], b[32];
        return xasprintf("event %s: interval %s is not a multiple of the "
                         "epoch %s", event->name,
                         tpm_time_format(event->interval_ns, a, sizeof a),
                         tpm_time_format(p->epoch_ns, b, sizeof b));
    }
    if (event->interval_ns / p->epoch_ns > UINT32_MAX) {
        return xasprintf("event %s: interval too long", event->name);
    }
    if (tpm_ev_find__(tpm, id)) {
        return xasprintf("event %s: id %u is already installed",
                         event->name, id);
    }

    struct tpm_ev *ev = NULL;
    if (tpm->n_free_evs) {
        ev = &tpm->evs[tpm->free_evs[tpm->n_free_evs - 1]];
    } else if (tpm->evs_hwm < p->max_events) {
        ev = &tpm->evs[tpm->evs_hwm];
    }
    if (!ev) {
        return xasprintf("event %s: the monitor holds %u events, its "
                         "maximum (max_events)", event->name,
                         p->max_events);
    }

    memset(ev, 0, sizeof *ev);
    memset(ev->kind_acc, -1, sizeof ev->kind_acc);
    struct compile_ctx ctx = { .tpm = tpm, .ev = ev };
    tpm_expr_for_each_agg(event->pred, compile_agg__, &ctx);
    if (ctx.error) {
        ev_release__(tpm, ev);
        char *msg = xasprintf("event %s: %s", event->name, ctx.error);
        free(ctx.error);
        return msg;
    }

    ev->fast_agg = -1;
    const struct tpm_expr *pred = event->pred;
    if (pred->type == TPM_EXPR_BIN && pred->op >= TPM_OP_LT
        && pred->op <= TPM_OP_NE && pred->a == event->value
        && pred->a->type == TPM_EXPR_AGG && pred->b->type == TPM_EXPR_NUM) {
        for (int i = 0; i < ev->n_aggs; i++) {
            if (ev->aggs[i].node == pred->a) {
                ev->fast_agg = i;
                ev->fast_op = pred->op;
                ev->fast_threshold = pred->b->num;
                ev->fast = ev->aggs[i].calc;
            }
        }
    }
    if (tpm->n_free_evs && ev == &tpm->evs[tpm->free_evs[tpm->n_free_evs
                                                          - 1]]) {
        tpm->n_free_evs--;
    } else {
        tpm->evs_hwm++;
    }
    struct tpm_idmap_entry *ie = &tpm->idmap[tpm_idmap_pos__(tpm, id)];
    ie->id = id;
    ie->slot = (uint32_t) (ev - tpm->evs);
    ev->def = event;
    ev->id = id;
    ev->seq = ++tpm->ev_seq;
    ev->interval = event->interval_ns / p->epoch_ns;
    ev->added = tpm->cur;
    ev->needs_state = needs_state;
    tpm->n_state_evs += needs_state;
    tpm->n_underlay_evs += event->filter_tun.underlay;
    if (tpm->clock_started && tpm->ft.n_live) {
        /* Flows already in the table are matched by the backfill walk;
         * until it completes, intervals are only partly observed. */
        ev->backfill_left = p->flow_table_size;
        ev->first_full = UINT64_MAX;
        tpm->backfill[tpm->n_backfill++] = (uint32_t) (ev - tpm->evs);
    } else if (tpm->clock_started) {
        ev->first_full = tpm->cur;
    }
    trig_index_insert(&tpm->index, &event->filter,
                      (uint32_t) (ev - tpm->evs));
    tpm->n_evs++;
    TPM_STAT_SET(tpm, events, tpm->n_evs);
    return NULL;
}

int
tpm_event_del(struct tpm *tpm, uint32_t id)
{
    struct tpm_ev *ev = tpm_ev_find__(tpm, id);
    if (!ev) {
        return ENOENT;
    }
    tpm_idmap_delete__(tpm, tpm_idmap_pos__(tpm, id));
    trig_index_remove(&tpm->index, &ev->def->filter,
                      (uint32_t) (ev - tpm->evs));
    ev_release__(tpm, ev);
    tpm->n_state_evs -= ev->needs_state;
    tpm->n_underlay_evs -= ev->def->filter_tun.underlay;
    if (ev->backfill_left) {
        ev->backfill_left = 0;
        backfill_cancel__(tpm, (uint32_t) (ev - tpm->evs));
    }
    tpm->n_evs--;
    TPM_STAT_SET(tpm, events, tpm->n_evs);
    if (ev->n_children) {
        /* The sweep removes its instances as it meets them. */
        ev->dying = true;
        tpm->n_dying++;
    } else {
        tpm_ev_slot_free__(tpm, ev);
    }
    return 0;
}

static void
backfill_cancel__(struct tpm *tpm, uint32_t e)
{
    for (uint32_t i = 0; i < tpm->n_backfill; i++) {
        if (tpm->backfill[i] == e) {
            tpm->backfill[i] = tpm->backfill[--tpm->n_backfill];
            return;
        }
    }
}

/* Clock. */

/* Scrubber callback: drops retired summary kinds from a live flow. */
static void
scrub_flow__(struct tpm_flow *f, void *tpm_)
{
    struct tpm *tpm = tpm_;
    uint32_t drop = 0;
    for (uint32_t bits = f->sum_mask; bits; bits &= bits - 1) {
        int k = __builtin_ctz(bits);
        if (tpm->kinds[k].retired) {
            drop |= 1u << k;
        }
    }
    if (drop) {
        tpm_flow_relayout__(f, f->sum_mask & ~drop);
    }
}

static void
scrub_step__(struct tpm *tpm, uint32_t n)
{
    struct tpm_flow_table *ft = &tpm->ft;
    uint32_t before = ft->scrub_pos;

    tpm_flow_table_scrub(ft, n, tpm->tag, tpm->p.idle_epochs,
                         scrub_flow__, tpm);
    if (tpm->p.tcp_state_pool) {
        tpm_conn_scrub__(tpm, n);
    }
    if (ft->scrub_pos <= before) {
        tpm->scrub_pass++;
    }
    TPM_STAT_SET(tpm, flows_freed, ft->stats.freed);
    TPM_STAT_SET(tpm, dos_removed_sweep, ft->stats.pending_freed);
    TPM_STAT_SET(tpm, flows_live, ft->n_live);
}

/* Runs the sweep for at most 'budget_ns' (0: to the end); once a sweep
 * completes, frees long-idle flow entries (a bounded step per sweep). */
static void
sweep_run__(struct tpm *tpm, uint64_t budget_ns, bool may_wait)
{
    uint64_t done = tpm->st.sweeps_done;
    tpm_sweep_run__(tpm, budget_ns, may_wait);
    if (tpm->st.sweeps_done != done) {
        scrub_step__(tpm, tpm->p.scrub_per_step);
    }
}

void
tpm_advance(struct tpm *tpm, uint64_t now_ns)
{
    uint64_t abs = now_ns / tpm->p.epoch_ns;

    tpm->now_ns = MAX(tpm->now_ns, now_ns);
    if (OVS_UNLIKELY(!tpm->clock_started)) {
        tpm->clock_started = true;
        tpm->base = abs;
        tpm->cur = 0;
        tpm->tag = 2;
        TPM_STAT_ADD(tpm, epochs, 1);
        return;
    }
    if (OVS_LIKELY(abs <= tpm_abs_epoch(tpm, tpm->cur))) {
        return;                 /* Same epoch (or clock went back). */
    }

    uint64_t next = abs - tpm->base;
    if (tpm->sw.active) {
        if (next == tpm->cur + 1) {
            /* The sweep of cur - 1 did not finish within epoch cur; its
             * statistics are about to be overwritten. */
            tpm_sweep_abandon__(tpm);
        } else {
            sweep_run__(tpm, 0, false);
            TPM_STAT_ADD(tpm, sweeps_forced, 1);
        }
    }
    if (next >= tpm->cur + 2) {
        /* A jump: sweep the last epoch with packets now, then the epoch
         * before 'next' (which closes intervals that ended in the gap). */
        tpm_sweep_start__(tpm, tpm->cur);
        sweep_run__(tpm, 0, false);
        TPM_STAT_ADD(tpm, sweeps_forced, 1);
        TPM_STAT_ADD(tpm, epochs_skipped, next - tpm->cur - 1);
        /* The skip entries' epochs are 32 bits (sweep.c): a gap could
         * wrap them. */
        tpm_skip_clear(tpm, 0, tpm->n_children);
        tpm->cur = next - 1;
        tpm->tag = (uint32_t) tpm->cur + 2;
    }
    tpm_sweep_start__(tpm, tpm->cur);
    tpm->cur = next;
    tpm->tag = (uint32_t) next + 2;
    /* No sweep reads this parity's bitmap any more: the sweep of the
     * epoch before the previous one finished or was abandoned above. */
    tpm_flow_table_untouch(&tpm->ft, tpm->tag);
    TPM_STAT_ADD(tpm, epochs, 1);
}

bool
tpm_sweep_step(struct tpm *tpm, uint64_t budget_ns)
{
    if (budget_ns == UINT64_MAX) {
        budget_ns = tpm->p.sweep_budget_ns;
    }
    tpm_backfill_step__(tpm, tpm->p.scrub_per_step);
    if (tpm->sw.active) {
        TPM_STAT_ADD(tpm, sweep_steps, 1);
        sweep_run__(tpm, budget_ns, tpm->p.sweep_waits_for_reports);
    }
    return tpm->sw.active || tpm->n_backfill;
}

bool
tpm_sweep_pending(const struct tpm *tpm)
{
    return tpm->sw.active;
}

double
tpm_sweep_lateness(const struct tpm *tpm, uint64_t now_ns, uint32_t pace)
{
    if (!tpm->sw.active || !tpm->n_children) {
        return 0;
    }
    uint64_t start = tpm_abs_epoch(tpm, tpm->cur) * tpm->p.epoch_ns;
    double span = (double) tpm->p.epoch_ns * MAX(MIN(pace, 100), 1) / 100;
    double elapsed = now_ns > start ? (double) (now_ns - start) / span : 0;
    double done = (double) tpm->sw.child / tpm->n_children;
    return MAX(0, MIN(elapsed, 1) - done);
}

/* Reports and control. */

bool
tpm_pop_report(struct tpm *tpm, struct tpm_report *r)
{
    return spsc_pop(tpm->report_ring, r);
}

double
tpm_report_fill(const struct tpm *tpm)
{
    return (double) spsc_count(tpm->report_ring)
           / spsc_capacity(tpm->report_ring);
}

/* Commands travel in 'struct tpm_report' slots: 'type' says which, and an
 * ADD carries the event pointer in 'error'. */
bool
tpm_submit_add(struct tpm *tpm, struct tpm_event *event, uint32_t id,
               uint64_t cookie)
{
    struct tpm_report c = {
        .type = TPM_REPORT_ADD_DONE, .event_id = id, .cookie = cookie,
        .error = (char *) event,
    };
    return spsc_push(tpm->cmd_ring, &c);
}

bool
tpm_submit_del(struct tpm *tpm, uint32_t id, uint64_t cookie)
{
    struct tpm_report c = {
        .type = TPM_REPORT_DEL_DONE, .event_id = id, .cookie = cookie,
    };
    return spsc_push(tpm->cmd_ring, &c);
}

bool
tpm_submit_poll(struct tpm *tpm, uint32_t id, const struct tpm_key *group,
                uint32_t tun_id, uint16_t port, uint64_t epoch,
                uint64_t cookie)
{
    struct tpm_report c = {
        .type = TPM_REPORT_POLL_REPLY, .event_id = id, .cookie = cookie,
        .epoch = epoch, .group = *group, .tun_id = tun_id, .port = port,
    };
    return spsc_push(tpm->cmd_ring, &c);
}

bool
tpm_submit_info(struct tpm *tpm, uint32_t id, uint64_t cookie)
{
    struct tpm_report c = {
        .type = TPM_REPORT_INFO_REPLY, .event_id = id, .cookie = cookie,
    };
    return spsc_push(tpm->cmd_ring, &c);
}

int
tpm_event_info(const struct tpm *tpm, uint32_t id, uint64_t *instances,
               uint64_t *flows)
{
    const struct tpm_ev *ev = tpm_ev_find__(tpm, id);
    *instances = *flows = 0;
    if (!ev) {
        return ENOENT;
    }
    uint32_t evi = (uint32_t) (ev - tpm->evs);
    for (uint32_t ci = 0; ci < tpm->n_children; ci++) {
        const struct tpm_child *c = &tpm->children[ci];
        if (c->ev == evi) {
            ++*instances;
            *flows += c->n_items + (c->in_idx != TPM_NONE);
        }
    }
    return 0;
}

/* tpm_run_control() with at least one command queued. */
static int __attribute__((noinline))
run_control__(struct tpm *tpm, int max)
{
    struct tpm_report c;
    int n = 0;

    /* A command is taken only when its reply has room: replies are never
     * dropped (satisfactions may be, and are counted). */
    while (n < max && spsc_free_space(tpm->report_ring)
           && spsc_pop(tpm->cmd_ring, &c)) {
        struct tpm_report r = c;
        r.error = NULL;
        switch ((enum tpm_report_type) c.type) {
        case TPM_REPORT_ADD_DONE: {
            struct tpm_event *event = (struct tpm_event *) c.error;
            r.error = tpm_event_add(tpm, event, c.event_id);
            if (r.error) {
                tpm_event_destroy(event);
            }
            break;
        }
        case TPM_REPORT_DEL_DONE:
            r.status = tpm_event_del(tpm, c.event_id);
            break;
        case TPM_REPORT_POLL_REPLY:
            r.status = tpm_poll(tpm, c.event_id, &c.group, c.tun_id,
                                c.port, c.epoch, &r.value);
            break;
        case TPM_REPORT_INFO_REPLY: {
            uint64_t instances, flows;
            r.status = tpm_event_info(tpm, c.event_id, &instances, &flows);
            r.epoch = instances;
            r.value = flows;
            break;
        }
        case TPM_REPORT_SATISFIED:
        default:
            continue;
        }
        tpm_report__(tpm, &r);
        n++;
    }
    TPM_STAT_ADD(tpm, commands, n);
    return n;
}

int
tpm_run_control(struct tpm *tpm, int max)
{
    /* Called every polling iteration of a switch's thread, which has
     * nothing queued nearly always: the test costs a few instructions,
     * not the loop's frame. */
    if (spsc_empty(tpm->cmd_ring)) {
        return 0;
    }
    return run_control__(tpm, max);
}

enum tpm_poll_status
tpm_poll(const struct tpm *tpm, uint32_t id, const struct tpm_key *group,
         uint32_t tun_id, uint16_t port, uint64_t epoch, double *value)
{
    const struct tpm_ev *ev = tpm_ev_find__(tpm, id);
    *value = 0;
    if (!ev) {
        return TPM_POLL_NO_EVENT;
    }
    if (!tpm->clock_started) {
        return TPM_POLL_NOT_YET;
    }

    /* The interval containing 'epoch', and whether it is swept: the sweep
     * of epoch E closes intervals ending at E. */
    uint64_t end = (epoch / ev->interval + 1) * ev->interval - 1;
    uint64_t swept_through = tpm_abs_epoch(tpm, tpm->cur) - 1
                             - (tpm->sw.active ? 1 : 0);
    if (end > swept_through || tpm_abs_epoch(tpm, tpm->cur) == 0) {
        return TPM_POLL_NOT_YET;
    }
    if (end < tpm_abs_epoch(tpm, ev->added)) {
        /* Over before the trigger existed (e.g. the TEM installed it
         * again after a resync, and polls an epoch of before): it knows
         * nothing of it, which is not "no traffic". */
        return TPM_POLL_EXPIRED;
    }

    struct tpm_key gkey;
    tpm_key_and(&gkey, group, &ev->def->group);
    if (gkey.tun) {
        /* A tenant's group: this monitor's slot of its VNI (none: no
         * frame of that tenant ever, so no instance either). */
        gkey.tun = tpm_tenants_find(tpm->tenants, tun_id);
    }
    uint32_t evi = (uint32_t) (ev - tpm->evs);
    uint32_t ci = gkey.tun || !group->tun
                  ? tpm_instance_find__(tpm, evi, &gkey,
                                        ev->def->group_port ? port : 0)
                  : TPM_NONE;
    if (ci == TPM_NONE) {
        /* Instances live while their history covers the last K
         * intervals, so no instance means no packets in that window;
         * older intervals are beyond what is kept. */
        uint64_t window = (uint64_t) tpm->p.history_len * ev->interval;
        return end + window <= swept_through ? TPM_POLL_EXPIRED
                                             : TPM_POLL_NO_GROUP;
    }
    struct tpm_hist *h = tpm_child_hist(tpm, ci);
    const struct tpm_child *c = &tpm->children[ci];
    uint32_t n = tpm_hist_n(tpm, c);
    uint64_t oldest = UINT64_MAX;
    for (uint32_t i = 1; i <= n; i++) {
        const struct tpm_hist *e = tpm_hist_at(h, c->hist_seq, i,
                                               tpm->hist_ring);
        if (e->epoch == end) {
            *value = e->value;
            return TPM_POLL_OK;
        }
        oldest = MIN(oldest, e->epoch);
    }
    if (n == tpm->p.history_len && end < oldest) {
        return TPM_POLL_EXPIRED;
    }
    /* The group existed but saw no packets in that interval (or was
     * created after it). */
    return TPM_POLL_NO_GROUP;
}

static int
cmp_u64__(const void *a_, const void *b_)
{
    uint64_t a = *(const uint64_t *) a_, b = *(const uint64_t *) b_;
    return a < b ? -1 : a > b;
}

#define TPM_LOSS(FIELD, WHAT) \
    { #FIELD, WHAT, offsetof(struct tpm_stats, FIELD) }
const struct tpm_loss tpm_losses[TPM_N_LOSSES] = {
    TPM_LOSS(reports_dropped, "reports dropped (report ring full)"),
    TPM_LOSS(sweeps_unfinished,
             "sweeps unfinished (an epoch's statistics not gathered)"),
    TPM_LOSS(flow_evictions, "flow evictions (flow table full)"),
    TPM_LOSS(match_overflow, "matches over the per-flow limit"),
    TPM_LOSS(summary_overflow, "matches without a summary slot"),
    TPM_LOSS(children_dropped,
             "trigger instances refused (max triggers)"),
    TPM_LOSS(chunks_exhausted, "flows not listed (chunk pool empty)"),
    TPM_LOSS(tcp_state_exhausted,
             "matches without TCP state (TCP state pool empty)"),
    TPM_LOSS(tun_slots_full,
             "tunnelled frames not monitored (tenant slots full)"),
};

void
tpm_get_stats(const struct tpm *tpm, struct tpm_stats *out)
{
    const uint64_t *src = (const uint64_t *) &tpm->st;
    uint64_t *dst = (uint64_t *) out;
    for (size_t i = 0; i < sizeof *out / sizeof(uint64_t); i++) {
        dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
    }

    out->non_ip = out->parse.not_parsed[TPM_PARSE_NON_IP];
    out->not_parsed = tpm_parse_stats_not_parsed(&out->parse);

    uint64_t v[TPM_SWEEP_RING];
    int n = 0;
    for (int i = 0; i < TPM_SWEEP_RING; i++) {
        uint64_t ns = __atomic_load_n(&tpm->sweep_ns[i], __ATOMIC_RELAXED);
        if (ns) {
            v[n++] = ns;
        }
    }
    if (n) {
        qsort(v, n, sizeof *v, cmp_u64__);
        out->sweep_ns_p50 = v[(n - 1) / 2];
        out->sweep_ns_p99 = v[(n * 99 + 99) / 100 - 1];
        out->sweep_ns_max = v[n - 1];
    }
}

void
tpm_flows_for_each(const struct tpm *tpm,
                   void (*cb)(const struct tpm_key *, uint64_t, uint64_t,
                              uint32_t, void *),
                   void *aux)
{
    const struct tpm_flow_table *ft = &tpm->ft;
    for (uint32_t i = 0; i <= ft->mask; i++) {
        const struct tpm_flow *f = &ft->flows[i];
        if (f->state != TPM_FLOW_LIVE && f->state != TPM_FLOW_PENDING) {
            continue;
        }
        uint64_t packets = 0, bytes = 0;
        for (int p = 0; p < 2; p++) {
            if (f->tag[p] == tpm->tag || f->tag[p] == tpm->tag - 1) {
                const struct tpm_flow_count *cnt = tpm_flow_count_const(f, p);
                packets += cnt->packets;
                bytes += cnt->bytes;
            }
        }
        struct tpm_key key;
        tpm_flow_key(f, &key);
        cb(&key, packets, bytes, f->n_matched, aux);
    }
}
