/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TEM's decisions: the second level of the two-level evaluation
 * (paper section 6).
 *
 * The first satisfaction of (event, epoch, group) starts a decision over
 * the event's members: that host's part holds its value; every other
 * member is polled for the same epoch and group, except those that
 * refused the event or whose session ended, which are missing.  A Poll's
 * cookie names the decision's slot, the part and the slot's generation,
 * so that a reply to a decision since freed and reused is told apart.  A
 * host that answers POLL_NOT_YET (it has not swept that epoch yet) is
 * polled again --repoll later, while the deadline allows.
 *
 * A decision is decided when no part waits, or at the poll deadline, its
 * waiting parts then missing: a missing host is listed as such, never
 * counted as zero.  Deciding applies the event's across= rule (the sum or
 * count against the threshold, the max, or how many hosts hold) and
 * raises the alert (tem-alert.c); it also feeds each host's history for
 * weighted splits (tem-event.c).  A decided key is kept for
 * tem_decide_keep_ns() so that later satisfactions for it are counted as
 * late, not decided again.
 *
 * Late reports (protocol version 3; docs/tem.md "Late reports").  A host
 * sends again, flagged late, the satisfactions a session ended without
 * confirming (tem-host.c takes each once).  A satisfaction whose decision
 * is pending is "held": its host is not told it arrived until the
 * decision is made (tem_decide_hold(), tem_decide_release()), so that a TEM
 * stopping before it decides gets it again.  A late satisfaction is
 * decided like any other, its alert marked "late":true, but only an alert
 * is a decision: without one, the epoch could not be decided, and is
 * counted and logged as undecidable (tem-alert.c).  The hosts that had
 * the event's trigger then are not known any more (after an outage some
 * are not back yet, or gone; a restarted TEM never knew them), and those
 * polled may have no history of the epoch left (PART_EXPIRED): what is
 * known is a lower bound, enough to say yes, never to say no.  A late
 * PollReply answers a poll of an ended session, whose decision counted
 * that host missing then (and, after a TEM restart, its cookie means
 * nothing): it is counted and not used.
 *
 * The bookkeeping is lib/decision.h's decision engine, which the host's local
 * TEM uses too: the table of decisions by key, their parts (here struct
 * tem_part: the engine's part, then the host's slot and session), slots
 * and generations, deadlines (every decision waits the same
 * --poll-deadline, so the engine's pending list is in deadline order) and
 * the decided keys kept; --max-decisions is its maximum.  This file adds
 * the protocol: polls and their cookies, re-polls, and what a decision
 * means for an event.
 *
 * Hot path: a satisfaction costs an event lookup by id (hash chain), a
 * member lookup by host slot (array), a decision lookup (open addressing,
 * linear probing) and, for a new key, a decision taken from a free list
 * and one Poll per other host appended to that host's outgoing batch.
 * Nothing is logged per message; every drop is a counter.
 */
#include "tem-core-private.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "decision.h"

/* Poll cookies: decision slot (24 bits: --max-decisions is at most 2^24),
 * part (16 bits: --max-hosts is at most 65535), generation. */
#define COOKIE_SLOT_BITS 24
#define COOKIE_PART_BITS 16
#define COOKIE_GEN_BITS 24

/* ---------------------------------------------------------------------- */
/* Decisions. */

/* The generation of 'd''s slot, as poll cookies carry it. */
static uint32_t
tem_decide_cookie_gen(const struct tpm_decision *d)
{
    return d->gen & ((1u << COOKIE_GEN_BITS) - 1);
}

static uint64_t
tem_decide_poll_cookie(const struct tpm_decision *d, uint32_t part)
{
    uint64_t gen = tem_decide_cookie_gen(d);
    return (gen << (COOKIE_SLOT_BITS + COOKIE_PART_BITS))
           | ((uint64_t) part << COOKIE_SLOT_BITS) | d->slot;
}

/* True if a part's host can be polled for 'd''s group: any group of no
 * tenant, a tenant's from protocol version 4 on. */
static bool
tem_decide_pollable(const struct tem_core *core, const struct tpm_decision *d,
                    uint32_t part)
{
    const struct tem_host *h = core->hosts[tem_parts(d)[part].host_slot];
    return !d->key.group.tun || h->version >= TPROTO_VERSION_TENANT;
}

/* Polls a part's host: in its next PollBatch from protocol version 3
 * on (tem-out.c), else in a Poll of its own.  The host can be polled for
 * the group (tem_decide_pollable()).  '*pk' is the group's poll key,
 * made here at the first PollBatch poll of 'd' ('*pk_ready' false) and
 * kept by the caller for the next polls of 'd'. */
static void
tem_decide_poll(struct tem_core *core, struct tpm_decision *d, uint32_t part,
                struct tem_poll_key *pk, bool *pk_ready)
{
    struct tem_host *h = core->hosts[tem_parts(d)[part].host_slot];
    if (h->version >= TPROTO_VERSION_POLL_BATCH) {
        if (!*pk_ready) {
            tem_out_poll_key_init(core, pk, d);
            *pk_ready = true;
        }
        tem_out_pollq_add(core, h, d, part, pk);
    } else {
        struct tproto_batch *b = tem_out_batch(core, h, 64);
        tproto_add_poll(b, tem_decide_poll_cookie(d, part), d->key.event,
                        d->key.epoch, &d->key.group);
        if (d->key.group.tun) {
            tproto_set_tun_id(b, tem_core_group_vni(core, &d->key.group));
        }
    }
    core->stats.polls_sent++;
}

static uint64_t
tem_decide_keep_ns(const struct tem_core *core, const struct tem_event *e)
{
    if (core->cfg.decided_keep_ns) {
        return core->cfg.decided_keep_ns;
    }
    return MAX(4 * core->cfg.poll_deadline_ns,
               e ? 4 * e->ev->interval_ns : 0);
}

static void tem_decide_make(struct tem_core *, struct tpm_decision *,
                            bool deadline);

/* Appends satisfaction 'seq' of 'h' to its held ring (numbers are taken
 * in increasing order: the ring stays sorted). */
static void
tem_decide_held_push(struct tem_host *h, uint64_t seq)
{
    if (h->held_n == h->held_cap) {
        size_t cap = MAX(16, 2 * h->held_cap);
        uint64_t *held = xmalloc(cap * sizeof *held);
        for (size_t i = 0; i < h->held_n; i++) {
            held[i] = h->held[(h->held_head + i) % h->held_cap];
        }
        free(h->held);
        h->held = held;
        h->held_cap = cap;
        h->held_head = 0;
    }
    h->held[(h->held_head + h->held_n++) % h->held_cap] = seq;
}

/* Holds satisfaction 'seq' (0: none) of 'h' in part 'p' of a pending
 * decision: not confirmed until the decision is made.  'queued': 'seq'
 * is in the ring already (it waited in the late queue).  Returns true if
 * 'p' holds it. */
static bool
tem_decide_hold(struct tem_host *h, struct tem_part *p, uint64_t seq,
                bool queued)
{
    if (!seq || p->seq) {
        return false;
    }
    if (!queued) {
        tem_decide_held_push(h, seq);
    }
    p->seq = seq;
    p->seq_instance = h->seq_instance;
    return true;
}

/* Satisfaction 'seq' of 'h''s agent run 'instance', held, is decided (or
 * dropped): it may be confirmed. */
static void
tem_decide_unhold(struct tem_core *core, struct tem_host *h, uint64_t seq,
                  uint64_t instance)
{
    if (!h || h->seq_instance != instance || !h->held_n) {
        return;
    }
    /* Binary search in the sorted ring. */
    size_t lo = 0, hi = h->held_n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        uint64_t v = h->held[(h->held_head + mid) % h->held_cap];
        if ((v & ~HELD_DONE) < seq) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    uint64_t *v = &h->held[(h->held_head + lo) % h->held_cap];
    if (lo < h->held_n && (*v & ~HELD_DONE) == seq) {
        *v |= HELD_DONE;
    }
    while (h->held_n && h->held[h->held_head] & HELD_DONE) {
        h->held_head = (h->held_head + 1) % h->held_cap;
        h->held_n--;
    }
    if (tem_out_host_connected(h)) {
        tem_out_dirty(core, h);
    }
}

/* Decision 'd' is made: its satisfactions may be confirmed. */
static void
tem_decide_release(struct tem_core *core, struct tpm_decision *d)
{
    struct tem_part *parts = tem_parts(d);
    for (uint32_t i = 0; i < d->n_parts; i++) {
        struct tem_part *p = &parts[i];
        if (p->seq) {
            tem_decide_unhold(core, core->hosts[p->host_slot], p->seq,
                              p->seq_instance);
            p->seq = 0;
        }
    }
}

/* Part 'p' of 'd' answered 'value' (state TPM_PART_VALUE), or will not
 * answer (TPM_PART_MISSING, for a part that waits); 'd' is decided once no
 * part waits. */
static void
tem_decide_part_done(struct tem_core *core, struct tpm_decision *d,
                     struct tem_part *p, enum tpm_part_state state,
                     double value)
{
    size_t i = p - tem_parts(d);
    if (state == TPM_PART_VALUE) {
        tpm_decision_set(d, i, value);
    } else {
        tpm_decision_missing(d, i);
    }
    if (tpm_decision_complete(d) && !d->decided) {
        tem_decide_make(core, d, false);
    }
}

/* Parts of the session of 'h' that can no longer answer. */
struct tem_decide_gone_ctx {
    struct tem_core *core;
    const struct tem_host *h;
};

static void
tem_decide_host_gone__(struct tpm_decision *d, void *ctx_)
{
    const struct tem_decide_gone_ctx *ctx = ctx_;
    struct tem_part *parts = tem_parts(d);
    for (uint32_t i = 0; i < d->n_parts && !d->decided; i++) {
        struct tem_part *p = &parts[i];
        if (p->host_slot == ctx->h->slot && p->session == ctx->h->session
            && p->up.state == TPM_PART_WAITING) {
            tem_decide_part_done(ctx->core, d, p, TPM_PART_MISSING, 0);
        }
    }
}

/* Marks every part of pending decisions that waits for 'h''s current
 * session as missing. */
void
tem_decide_host_gone(struct tem_core *core, const struct tem_host *h)
{
    struct tem_decide_gone_ctx ctx = { core, h };
    tpm_decisions_for_each_pending(core->decisions, tem_decide_host_gone__,
                                   &ctx);
}

/* Updates the history of every host of 'd' (for weighted splits). */
static void
tem_decide_update_history(struct tem_core *core, struct tem_event *e,
                          const struct tpm_decision *d)
{
    double alpha = core->cfg.ewma_alpha;
    const struct tem_part *parts = tem_parts(d);
    for (uint32_t i = 0; i < d->n_parts; i++) {
        const struct tem_part *p = &parts[i];
        int32_t idx = e->member_of[p->host_slot];
        if (p->up.state != TPM_PART_VALUE || idx < 0) {
            continue;
        }
        struct tem_member *m = &e->members[idx];
        if (m->session == p->session) {
            m->ewma = m->has_ewma
                      ? alpha * p->up.value + (1 - alpha) * m->ewma
                      : p->up.value;
            m->has_ewma = true;
        }
    }
}

static void
tem_decide_make(struct tem_core *core, struct tpm_decision *d, bool deadline)
{
    struct tem_event *e = tem_event_by_id(core, d->key.event);
    uint64_t now = tem_core_now(core);

    tem_decide_release(core, d);
    tpm_decision_decided(core->decisions, d,
                         now + tem_decide_keep_ns(core, e));
    if (deadline) {
        core->stats.decided_deadline++;
    } else {
        core->stats.decided_complete++;
    }
    if (!e) {
        return;
    }
    if (deadline) {
        e->stats.decided_deadline++;
    }

    double total = 0, max = -INFINITY;
    uint32_t n_holding = 0, n_missing = 0;
    uint64_t alerts = core->stats.alerts;
    const struct tem_part *parts = tem_parts(d);
    for (uint32_t i = 0; i < d->n_parts; i++) {
        const struct tem_part *p = &parts[i];
        if (p->up.state == TPM_PART_VALUE) {
            total += p->up.value;
            max = MAX(max, p->up.value);
            n_holding += tem_alert_part_holds(e, p);
        } else {
            n_missing++;
        }
    }
    core->stats.missing_parts += n_missing;
    tem_decide_update_history(core, e, d);

    switch (e->across) {
    case TEM_ACROSS_SUM:
    case TEM_ACROSS_COUNT:
        if (tpm_split_holds(e->ev, total, e->threshold)) {
            tem_alert_raise(core, e, d, total, e->threshold, true, deadline,
                            now);
        }
        break;
    case TEM_ACROSS_MAX:
        if (n_holding) {
            tem_alert_raise(core, e, d, max, e->threshold, e->has_threshold,
                            deadline, now);
        }
        break;
    case TEM_ACROSS_ATLEAST: {
        uint32_t k = e->atleast_k;
        if (e->atleast_pct) {
            k = (uint32_t) ceil(e->atleast_k * (double) d->n_parts / 100.0);
            k = MAX(k, 1);
        }
        if (n_holding >= k) {
            tem_alert_raise(core, e, d, n_holding, k, true, deadline, now);
        }
        break;
    }
    default:
        break;
    }
    if ((d->aux & DECISION_LATE) && core->stats.alerts == alerts) {
        tem_alert_late_undecidable(core, e, d);
    }
}

/* Starts the decision of 'key' for event 'e' on the satisfaction of
 * member 'idx' (its part has a value, 0 until the caller sets it).
 * A late one ('late') polls members installed after its epoch too.
 * Returns NULL if there is no room. */
static struct tpm_decision *
tem_decide_start(struct tem_core *core, struct tem_event *e,
                 const struct tpm_decision_key *key, size_t idx, bool late,
                 uint64_t now)
{
    struct tpm_decision *d = tpm_decision_start(
        core->decisions, key, e->n_members, now,
        now + core->cfg.poll_deadline_ns);
    if (!d) {
        return NULL;
    }
    core->stats.decisions++;
    e->stats.decisions++;

    /* The epoch is in the window (tem_decide_epoch_ok()): no overflow. */
    uint64_t epoch_end_ns = (key->epoch + 1) * core->cfg.epoch_ns;
    struct tem_part *parts = tem_parts(d);
    struct tem_poll_key pk;
    bool pk_ready = false;
    for (uint32_t i = 0; i < d->n_parts; i++) {
        const struct tem_member *m = &e->members[i];
        struct tem_part *p = &parts[i];
        struct tem_host *h = core->hosts[m->host_slot];
        p->host_slot = m->host_slot;
        p->session = m->session;
        if (i == idx) {
            tpm_decision_set(d, i, 0);
        } else if (m->installed_ns >= epoch_end_ns && !late) {
            /* Its trigger came after the epoch: it has no history of
             * it, and a poll would only bring POLL_EXPIRED back.  But for
             * a late satisfaction it may: a host whose event a cluster's
             * TEM took over keeps the event, and its history, when the
             * new owner installs it as the old one did. */
            core->stats.expired_unpolled++;
            p->up.flags |= PART_EXPIRED;
            tpm_decision_missing(d, i);
        } else if (m->state == TEM_INSTALL_NACKED
                   || !tem_out_host_connected(h)
                   || h->session != m->session) {
            tpm_decision_missing(d, i);
        } else if (!tem_decide_pollable(core, d, i)) {
            /* Of a version that names no tenant: it would answer for
             * the other tenants' traffic too. */
            core->stats.tenant_old_hosts++;
            tpm_decision_missing(d, i);
        } else {
            tem_decide_poll(core, d, i, &pk, &pk_ready);
        }
    }
    return d;
}

/* Returns true if 'epoch' is in the window of epochs the TEM takes
 * reports of, [now - --epoch-past, now + TEM_EPOCH_AHEAD epochs] by its
 * wall clock; otherwise counts it (for 'h' too) and returns false. */
bool
tem_decide_epoch_ok(struct tem_core *core, struct tem_host *h,
                    uint64_t epoch)
{
    uint64_t now = tem_core_epoch_now(core);
    uint64_t past = core->cfg.epoch_past_ns / core->cfg.epoch_ns;

    if (epoch <= now + TEM_EPOCH_AHEAD && epoch + past >= now
        && epoch < UINT64_MAX / core->cfg.epoch_ns - 1) {
        return true;
    }
    core->stats.epoch_refused++;
    h->stats.epoch_refused++;
    return false;
}

/* Returns true if 'h' may start one more decision in this loop turn
 * (--host-decisions), and counts it. */
static bool
tem_decide_budget(struct tem_core *core, struct tem_host *h)
{
    if (h->turn != core->turn) {
        h->turn = core->turn;
        h->turn_decisions = 0;
    }
    if (h->turn_decisions >= core->cfg.host_decisions) {
        core->stats.host_decisions_full++;
        return false;
    }
    h->turn_decisions++;
    return true;
}

/* Takes satisfaction 'sat' of 'h' ('late': flagged so; 'seq' its number,
 * 0 if none; 'queued': it waited in the late queue, its number held
 * since).  Returns true if a pending decision holds its number. */
static bool
tem_decide_take(struct tem_core *core, struct tem_host *h,
                const struct tem_late *sat, bool late, uint64_t seq,
                bool queued)
{
    struct tem_event *e = tem_event_by_id(core, sat->event_id);
    int32_t idx;

    if (!e || (idx = e->member_of[h->slot]) < 0
        || e->members[idx].session != h->session) {
        core->stats.sat_unknown++;
        return false;
    }
    e->stats.satisfactions++;

    struct tpm_key group = sat->group;
    struct tpm_decision_key key;
    if (group.tun) {
        /* A tenant's group: its VNI as a slot of the core's own. */
        group.tun = tpm_tenants_intern(core->tenants, sat->vni);
        if (!group.tun) {
            core->stats.sat_tenants_full++;
            e->stats.dropped++;
            tem_log_rl(core, &core->rl_misc, TPM_LOG_WARN,
                       "event %s: satisfaction of tenant tun_id=%"PRIu32
                       " from host %s dropped: the TEM's table of %d "
                       "tenants is full", e->name, sat->vni, h->id,
                       TPM_TENANT_SLOTS_MAX);
            return false;
        }
    }
    tpm_decision_key_init(&key, e->id, sat->epoch, &group);
    struct tpm_decision *d = tpm_decision_find(core->decisions, &key);
    uint8_t flags = sat->flags;

    if (!d) {
        if (!tem_decide_budget(core, h)) {
            e->stats.dropped++;
            return false;
        }
        d = tem_decide_start(core, e, &key, idx, late, tem_core_now(core));
        if (!d) {
            core->stats.decisions_full++;
            e->stats.dropped++;
            return false;
        }
        tem_parts(d)[idx].up.value = sat->value;
        tem_parts(d)[idx].up.flags = flags;
        if (late) {
            d->aux |= DECISION_LATE;
        }
        if (tpm_decision_complete(d)) {
            tem_decide_make(core, d, false);
            return false;
        }
        return tem_decide_hold(h, &tem_parts(d)[idx], seq, queued);
    }
    if (d->decided) {
        core->stats.sat_late++;
        e->stats.late++;
        return false;
    }

    /* Another host's satisfaction for a pending key: find its part (at
     * the member's index unless membership changed since). */
    struct tem_part *parts = tem_parts(d);
    struct tem_part *p = NULL;
    if ((uint32_t) idx < d->n_parts && parts[idx].host_slot == h->slot) {
        p = &parts[idx];
    } else {
        for (uint32_t i = 0; i < d->n_parts; i++) {
            if (parts[i].host_slot == h->slot) {
                p = &parts[i];
                break;
            }
        }
    }
    if (!p || p->session != h->session) {
        core->stats.sat_unknown++;
        return false;
    }
    p->up.flags |= flags;
    if (late) {
        d->aux |= DECISION_LATE;
    }
    bool held = tem_decide_hold(h, p, seq, queued);
    tem_decide_part_done(core, d, p, TPM_PART_VALUE, sat->value);
    return held && !d->decided;
}

/* Queues late satisfaction 'sat' for a later loop turn, holding its
 * number.  Returns false if the queue is full. */
static bool
tem_decide_late_push(struct tem_core *core, struct tem_host *h,
                     struct tem_late *sat)
{
    if (core->late_n >= core->cfg.late_queue) {
        return false;
    }
    if (core->late_n == core->late_cap) {
        size_t cap = MIN(MAX(64, 2 * core->late_cap),
                         MAX(core->cfg.late_queue, 1));
        struct tem_late *l = xmalloc(cap * sizeof *l);
        for (size_t i = 0; i < core->late_n; i++) {
            l[i] = core->late[(core->late_head + i) % core->late_cap];
        }
        free(core->late);
        core->late = l;
        core->late_cap = cap;
        core->late_head = 0;
    }
    if (sat->seq) {
        tem_decide_held_push(h, sat->seq);
    }
    core->late[(core->late_head + core->late_n++) % core->late_cap] = *sat;
    return true;
}

/* Decides at most --late-per-turn of the late satisfactions waiting,
 * oldest first. */
static void
tem_decide_late_run(struct tem_core *core)
{
    for (uint32_t i = 0; i < core->cfg.late_per_turn && core->late_n; i++) {
        struct tem_late sat = core->late[core->late_head];
        core->late_head = (core->late_head + 1) % core->late_cap;
        core->late_n--;

        struct tem_host *h = tem_out_host_by_slot(core, sat.host_slot);
        bool held = false;
        if (tem_out_host_connected(h) && h->session == sat.session) {
            held = tem_decide_take(core, h, &sat, true,
                                   (h->seq_instance == sat.seq_instance
                                    ? sat.seq : 0), true);
        } else {
            /* Its session ended while it waited. */
            core->stats.sat_unknown++;
        }
        if (!held && sat.seq) {
            tem_decide_unhold(core, h, sat.seq, sat.seq_instance);
        }
    }
}

void
tem_decide_satisfaction(struct tem_core *core, struct tem_host *h,
                        const Trumpet__Satisfaction *s)
{
    bool late = s->has_late && s->late;
    uint64_t seq = (s->has_seq && h->version >= TPROTO_VERSION_CONFIRM
                    ? s->seq : 0);

    struct tem_event *e = tem_event_by_id(core, s->event_id);
    int32_t idx;

    core->stats.satisfactions++;
    h->stats.satisfactions++;
    if (!e || (idx = e->member_of[h->slot]) < 0
        || e->members[idx].session != h->session) {
        core->stats.sat_unknown++;
        return;
    }
    if (!tem_decide_epoch_ok(core, h, s->epoch)) {
        return;
    }

    struct tem_late sat = {
        .host_slot = h->slot,
        .session = h->session,
        .event_id = s->event_id,
        .epoch = s->epoch,
        .value = s->value,
        .flags = PART_SATISFIED,
        .seq = seq,
        .seq_instance = h->seq_instance,
    };
    tproto_key_from_msg(s->group, &sat.group, &sat.vni);
    if ((s->has_flags && (s->flags & 1))
        || (s->has_n_missing && s->n_missing)) {
        sat.flags |= PART_INCOMPLETE;
    }

    if (late) {
        /* A host's backlog waits behind the live reports. */
        if (tem_decide_late_push(core, h, &sat)) {
            core->stats.late_queued++;
            return;
        }
        core->stats.late_unpaced++;
    }
    tem_decide_take(core, h, &sat, late, seq, false);
}

static void
tem_decide_repoll_push(struct tem_core *core, const struct tpm_decision *d,
                       uint32_t part, uint64_t due)
{
    if (core->rp_count == core->rp_cap) {
        size_t cap = MAX(64, 2 * core->rp_cap);
        struct tem_repoll *r = xmalloc(cap * sizeof *r);
        for (size_t i = 0; i < core->rp_count; i++) {
            r[i] = core->repolls[(core->rp_head + i) % core->rp_cap];
        }
        free(core->repolls);
        core->repolls = r;
        core->rp_cap = cap;
        core->rp_head = 0;
    }
    core->repolls[(core->rp_head + core->rp_count++) % core->rp_cap]
        = (struct tem_repoll) { .due_ns = due, .slot = d->slot,
                                .gen = d->gen, .part = part };
}

/* Part 'part' of 'd', waiting, answered 'status' and 'value'. */
static void
tem_decide_poll_answer(struct tem_core *core, struct tpm_decision *d,
                       uint32_t part, unsigned int status, double value)
{
    struct tem_part *p = &tem_parts(d)[part];
    switch (status) {
    case TRUMPET__POLL_STATUS__POLL_OK:
        tem_decide_part_done(core, d, p, TPM_PART_VALUE, value);
        break;
    case TRUMPET__POLL_STATUS__POLL_NO_GROUP:
        tem_decide_part_done(core, d, p, TPM_PART_VALUE, 0);
        break;
    case TRUMPET__POLL_STATUS__POLL_INCOMPLETE:
        p->up.flags |= PART_INCOMPLETE;
        tem_decide_part_done(core, d, p, TPM_PART_VALUE, value);
        break;
    case TRUMPET__POLL_STATUS__POLL_NOT_YET: {
        uint64_t due = tem_core_now(core) + core->cfg.repoll_ns;
        if (due < d->deadline_ns) {
            tem_decide_repoll_push(core, d, part, due);
        }
        break;
    }
    case TRUMPET__POLL_STATUS__POLL_EXPIRED:
    case TRUMPET__POLL_STATUS__POLL_NO_EVENT:
        p->up.flags |= PART_EXPIRED;
        tem_decide_part_done(core, d, p, TPM_PART_MISSING, 0);
        break;
    default:
        tem_decide_part_done(core, d, p, TPM_PART_MISSING, 0);
        break;
    }
}

void
tem_decide_poll_reply(struct tem_core *core, struct tem_host *h,
                      const Trumpet__PollReply *r)
{
    uint32_t slot = r->cookie & ((1u << COOKIE_SLOT_BITS) - 1);
    uint32_t part = (r->cookie >> COOKIE_SLOT_BITS)
                    & ((1u << COOKIE_PART_BITS) - 1);
    uint64_t gen = r->cookie >> (COOKIE_SLOT_BITS + COOKIE_PART_BITS);
    struct tpm_decision *d = tpm_decision_by_slot(core->decisions, slot);
    struct tem_part *parts = d ? tem_parts(d) : NULL;

    core->stats.poll_replies++;
    h->stats.poll_replies++;
    if (!tem_decide_epoch_ok(core, h, r->epoch)) {
        return;
    }
    if ((r->has_late && r->late) || !d || d->decided
        || tem_decide_cookie_gen(d) != gen || d->key.event != r->event_id
        || d->key.epoch != r->epoch
        || part >= d->n_parts || parts[part].host_slot != h->slot
        || parts[part].session != h->session
        || parts[part].up.state != TPM_PART_WAITING) {
        core->stats.replies_stale++;
        return;
    }

    tem_decide_poll_answer(core, d, part, r->status,
                           r->has_value ? r->value : 0);
}

/* The answers of a PollBatch: entry i answers the batch's entry i. */
void
tem_decide_poll_batch_reply(struct tem_core *core, struct tem_host *h,
                            const Trumpet__PollBatchReply *r)
{
    struct tem_pollq *q = h->pollq;
    struct tem_poll_out *o = (q ? &q->out[r->cookie % TEM_POLL_BATCHES_OUT]
                              : NULL);
    size_t n = r->n_values;

    core->stats.poll_replies += n;
    h->stats.poll_replies += n;
    if (!tem_decide_epoch_ok(core, h, r->epoch)) {
        return;
    }
    if (!o || !r->cookie || o->cookie != r->cookie || o->n != n
        || o->epoch != r->epoch) {
        core->stats.replies_stale += n;
        return;
    }
    o->cookie = 0;
    for (size_t i = 0; i < n; i++) {
        const struct tem_poll_ref *ref = &o->refs[i];
        struct tpm_decision *d = tpm_decision_by_slot(core->decisions,
                                                      ref->slot);
        struct tem_part *parts = d ? tem_parts(d) : NULL;
        if (!d || d->decided || d->gen != ref->gen
            || ref->part >= d->n_parts
            || parts[ref->part].host_slot != h->slot
            || parts[ref->part].session != h->session
            || parts[ref->part].up.state != TPM_PART_WAITING) {
            core->stats.replies_stale++;
            continue;
        }
        tem_decide_poll_answer(core, d, ref->part, r->status.data[i],
                               r->values[i]);
    }
}

/* ---------------------------------------------------------------------- */
/* Timers. */

/* Sends the re-polls that are due, decides the decisions whose deadline
 * passed (their waiting parts missing), and forgets the decided keys kept
 * long enough. */
void
tem_decide_run(struct tem_core *core, uint64_t now)
{
    tem_decide_late_run(core);
    while (core->rp_count) {
        struct tem_repoll *r = &core->repolls[core->rp_head];
        if (r->due_ns > now) {
            break;
        }
        struct tpm_decision *d = tpm_decision_by_slot(core->decisions,
                                                      r->slot);
        if (d && !d->decided && d->gen == r->gen && r->part < d->n_parts
            && tem_parts(d)[r->part].up.state == TPM_PART_WAITING
            && tem_out_host_connected(
                   core->hosts[tem_parts(d)[r->part].host_slot])) {
            struct tem_poll_key pk;
            bool pk_ready = false;
            tem_decide_poll(core, d, r->part, &pk, &pk_ready);
            core->stats.repolls++;
        }
        core->rp_head = (core->rp_head + 1) % core->rp_cap;
        core->rp_count--;
    }

    struct tpm_decision *d;
    while ((d = tpm_decisions_due(core->decisions, now))) {
        tpm_decision_missing_all(d);
        tem_decide_make(core, d, true);
    }

    tpm_decisions_expire(core->decisions, now);
}

/* Returns when tem_decide_run() next has something to do (UINT64_MAX:
 * nothing in view). */
uint64_t
tem_decide_next_ns(const struct tem_core *core)
{
    uint64_t next = tpm_decisions_next_ns(core->decisions);
    if (core->late_n) {
        return 0;               /* Late satisfactions wait: next turn. */
    }
    if (core->rp_count) {
        next = MIN(next, core->repolls[core->rp_head].due_ns);
    }
    return next;
}

static void
tem_decide_delay__(struct tpm_decision *d, void *ns_)
{
    const uint64_t *ns = ns_;
    if (d->decided) {
        d->expires_ns += *ns;
    } else {
        d->deadline_ns += *ns;
    }
}

/* Extends every pending decision's deadline and every decided key's keep
 * time by 'ns' (tem_core_overrun()).  The same delay for all keeps the
 * engine's lists in time order. */
void
tem_decide_delay(struct tem_core *core, uint64_t ns)
{
    tpm_decisions_for_each(core->decisions, tem_decide_delay__, &ns);
}
