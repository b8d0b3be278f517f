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
 * weighted splits (tem-event.c).  A decided key is kept for decided_keep()
 * so that later satisfactions for it are counted as late, not decided
 * again.  Pending decisions are listed by deadline (every decision waits
 * the same --poll-deadline) and decided ones by expiry, so the timers
 * (tem_core_run()) look only at the head of each list.
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

#include "split.h"

/* ---------------------------------------------------------------------- */
/* Decisions. */

static uint32_t
decision_hash(uint32_t event, uint64_t epoch, const struct tpm_key *group)
{
    uint64_t h = tpm_key_hash(group)
                 ^ ((uint64_t) event * 0x9e3779b97f4a7c15ULL)
                 ^ (epoch * 0xc2b2ae3d27d4eb4fULL);
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 32;
    return (uint32_t) h;
}

static struct tem_decision *
decision_find(const struct tem_core *core, uint32_t event, uint64_t epoch,
              const struct tpm_key *group)
{
    uint32_t hash = decision_hash(event, epoch, group);
    for (size_t i = hash & core->dh_mask; core->dh[i].slot1;
         i = (i + 1) & core->dh_mask) {
        if (core->dh[i].hash == hash) {
            struct tem_decision *d = core->dslots[core->dh[i].slot1 - 1];
            if (d->event_id == event && d->epoch == epoch
                && tpm_key_equal(&d->group, group)) {
                return d;
            }
        }
    }
    return NULL;
}

static void
dh_insert__(struct dh_entry *dh, size_t mask, uint32_t hash, uint32_t slot1)
{
    size_t i = hash & mask;
    while (dh[i].slot1) {
        i = (i + 1) & mask;
    }
    dh[i].hash = hash;
    dh[i].slot1 = slot1;
}

static void
dh_insert(struct tem_core *core, const struct tem_decision *d)
{
    if (2 * (core->dh_count + 1) > core->dh_mask + 1) {
        size_t mask = 2 * (core->dh_mask + 1) - 1;
        struct dh_entry *dh = xcalloc(mask + 1, sizeof *dh);
        for (size_t i = 0; i <= core->dh_mask; i++) {
            if (core->dh[i].slot1) {
                dh_insert__(dh, mask, core->dh[i].hash, core->dh[i].slot1);
            }
        }
        free(core->dh);
        core->dh = dh;
        core->dh_mask = mask;
    }
    dh_insert__(core->dh, core->dh_mask, d->hash, d->slot + 1);
    core->dh_count++;
}

/* Deletes 'd''s entry with backward-shift deletion (no tombstones). */
static void
dh_delete(struct tem_core *core, const struct tem_decision *d)
{
    size_t mask = core->dh_mask;
    size_t i = d->hash & mask;
    while (core->dh[i].slot1 != d->slot + 1) {
        if (!core->dh[i].slot1) {
            return;
        }
        i = (i + 1) & mask;
    }
    for (;;) {
        size_t j = i;
        core->dh[i].slot1 = 0;
        for (;;) {
            j = (j + 1) & mask;
            if (!core->dh[j].slot1) {
                core->dh_count--;
                return;
            }
            size_t home = core->dh[j].hash & mask;
            /* Move entry j to i unless its home lies cyclically in
             * (i, j]. */
            if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) {
                break;
            }
        }
        core->dh[i] = core->dh[j];
        i = j;
    }
}

void
decision_free(struct tem_core *core, struct tem_decision *d)
{
    dh_delete(core, d);
    list_remove(&d->node);
    d->in_use = false;
    d->gen = (d->gen + 1) & ((1u << COOKIE_GEN_BITS) - 1);
    core->dfree[core->n_dfree++] = d->slot;
}

/* Returns a free decision with room for 'n_parts' parts, or NULL if every
 * slot holds a pending decision. */
static struct tem_decision *
decision_alloc(struct tem_core *core, uint32_t n_parts)
{
    struct tem_decision *d;

    if (!core->n_dfree && core->n_dslots >= core->cfg.max_decisions) {
        if (list_empty(&core->decided)) {
            return NULL;
        }
        decision_free(core, CONTAINER_OF(core->decided.next,
                                         struct tem_decision, node));
    }
    if (core->n_dfree) {
        d = core->dslots[core->dfree[--core->n_dfree]];
    } else {
        d = xzalloc(sizeof *d);
        d->slot = core->n_dslots;
        core->dslots[core->n_dslots++] = d;
        list_init(&d->node);
    }
    if (d->cap < n_parts) {
        d->cap = MAX(n_parts, 4);
        free(d->parts);
        d->parts = xmalloc(d->cap * sizeof *d->parts);
    }
    return d;
}

static uint64_t
poll_cookie(const struct tem_decision *d, uint32_t part)
{
    return ((uint64_t) d->gen << (COOKIE_SLOT_BITS + COOKIE_PART_BITS))
           | ((uint64_t) part << COOKIE_SLOT_BITS) | d->slot;
}

void
send_poll(struct tem_core *core, struct tem_decision *d, uint32_t part)
{
    struct tem_host *h = core->hosts[d->parts[part].host_slot];
    tproto_add_poll(host_out(core, h, 64), poll_cookie(d, part), d->event_id,
                    d->epoch, &d->group);
    core->stats.polls_sent++;
}

static uint64_t
decided_keep(const struct tem_core *core, const struct tem_event *e)
{
    if (core->cfg.decided_keep_ns) {
        return core->cfg.decided_keep_ns;
    }
    return MAX(4 * core->cfg.poll_deadline_ns,
               e ? 4 * e->ev->interval_ns : 0);
}

static void
part_done(struct tem_core *core, struct tem_decision *d, struct tem_part *p,
          enum tem_part_state state, double value)
{
    if (p->state == TEM_PART_WAITING) {
        d->n_waiting--;
    }
    p->state = state;
    if (state == TEM_PART_VALUE) {
        p->value = value;
    }
    if (!d->n_waiting && !d->decided) {
        decide(core, d, false);
    }
}

/* Marks every part of pending decisions that waits for 'h''s current
 * session as missing. */
void
decisions_host_gone(struct tem_core *core, const struct tem_host *h)
{
    struct tem_list *node = core->pending.next;
    while (node != &core->pending) {
        struct tem_decision *d = CONTAINER_OF(node, struct tem_decision,
                                              node);
        node = node->next;
        for (uint32_t i = 0; i < d->n_parts && !d->decided; i++) {
            struct tem_part *p = &d->parts[i];
            if (p->host_slot == h->slot && p->session == h->session
                && p->state == TEM_PART_WAITING) {
                part_done(core, d, p, TEM_PART_MISSING, 0);
            }
        }
    }
}

/* Updates the history of every host of 'd' (for weighted splits). */
static void
update_history(struct tem_core *core, struct tem_event *e,
               const struct tem_decision *d)
{
    double alpha = core->cfg.ewma_alpha;
    for (uint32_t i = 0; i < d->n_parts; i++) {
        const struct tem_part *p = &d->parts[i];
        int32_t idx = e->member_of[p->host_slot];
        if (p->state != TEM_PART_VALUE || idx < 0) {
            continue;
        }
        struct tem_member *m = &e->members[idx];
        if (m->session == p->session) {
            m->ewma = m->has_ewma ? alpha * p->value + (1 - alpha) * m->ewma
                                  : p->value;
            m->has_ewma = true;
        }
    }
}

void
decide(struct tem_core *core, struct tem_decision *d, bool deadline)
{
    struct tem_event *e = event_by_id(core, d->event_id);
    uint64_t now = now__(core);

    list_remove(&d->node);
    d->decided = true;
    d->expires_ns = now + decided_keep(core, e);
    list_push_back(&core->decided, &d->node);
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
    for (uint32_t i = 0; i < d->n_parts; i++) {
        const struct tem_part *p = &d->parts[i];
        if (p->state == TEM_PART_VALUE) {
            total += p->value;
            max = MAX(max, p->value);
            n_holding += part_holds(e, p);
        } else {
            n_missing++;
        }
    }
    core->stats.missing_parts += n_missing;
    update_history(core, e, d);

    switch (e->across) {
    case TEM_ACROSS_SUM:
    case TEM_ACROSS_COUNT:
        if (tpm_split_holds(e->ev, total, e->threshold)) {
            raise_alert(core, e, d, total, e->threshold, true, deadline,
                        now);
        }
        break;
    case TEM_ACROSS_MAX:
        if (n_holding) {
            raise_alert(core, e, d, max, e->threshold, e->has_threshold,
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
            raise_alert(core, e, d, n_holding, k, true, deadline, now);
        }
        break;
    }
    default:
        break;
    }
}

/* Starts a decision for event 'e' on the satisfaction 'value' of member
 * 'idx'.  Returns NULL if there is no room. */
static struct tem_decision *
decision_start(struct tem_core *core, struct tem_event *e, uint64_t epoch,
               const struct tpm_key *group, uint32_t hash, size_t idx,
               uint64_t now)
{
    struct tem_decision *d = decision_alloc(core, e->n_members);
    if (!d) {
        return NULL;
    }
    d->event_id = e->id;
    d->hash = hash;
    d->epoch = epoch;
    d->group = *group;
    d->in_use = true;
    d->decided = false;
    d->started_ns = now;
    d->deadline_ns = now + core->cfg.poll_deadline_ns;
    d->n_parts = e->n_members;
    d->n_waiting = 0;
    dh_insert(core, d);
    list_push_back(&core->pending, &d->node);
    core->stats.decisions++;
    e->stats.decisions++;

    for (uint32_t i = 0; i < d->n_parts; i++) {
        const struct tem_member *m = &e->members[i];
        struct tem_part *p = &d->parts[i];
        struct tem_host *h = core->hosts[m->host_slot];
        p->host_slot = m->host_slot;
        p->session = m->session;
        p->value = 0;
        p->flags = 0;
        if (i == idx) {
            p->state = TEM_PART_VALUE;
        } else if (m->state == TEM_INSTALL_NACKED || !host_connected(h)
                   || h->session != m->session) {
            p->state = TEM_PART_MISSING;
        } else {
            p->state = TEM_PART_WAITING;
            d->n_waiting++;
            send_poll(core, d, i);
        }
    }
    return d;
}

void
handle_satisfaction(struct tem_core *core, struct tem_host *h,
                    const Trumpet__Satisfaction *s)
{
    struct tem_event *e = event_by_id(core, s->event_id);
    int32_t idx;

    core->stats.satisfactions++;
    h->stats.satisfactions++;
    if (!e || (idx = e->member_of[h->slot]) < 0
        || e->members[idx].session != h->session) {
        core->stats.sat_unknown++;
        return;
    }
    e->stats.satisfactions++;

    struct tpm_key group;
    tproto_key_from_msg(s->group, &group);
    uint32_t hash = decision_hash(e->id, s->epoch, &group);
    struct tem_decision *d = decision_find(core, e->id, s->epoch, &group);
    uint8_t flags = PART_SATISFIED;
    if ((s->has_flags && (s->flags & 1))
        || (s->has_n_missing && s->n_missing)) {
        flags |= PART_INCOMPLETE;
    }

    if (!d) {
        d = decision_start(core, e, s->epoch, &group, hash, idx,
                           now__(core));
        if (!d) {
            core->stats.decisions_full++;
            e->stats.dropped++;
            return;
        }
        d->parts[idx].value = s->value;
        d->parts[idx].flags = flags;
        if (!d->n_waiting) {
            decide(core, d, false);
        }
        return;
    }
    if (d->decided) {
        core->stats.sat_late++;
        e->stats.late++;
        return;
    }

    /* Another host's satisfaction for a pending key: find its part (at
     * the member's index unless membership changed since). */
    struct tem_part *p = NULL;
    if ((uint32_t) idx < d->n_parts
        && d->parts[idx].host_slot == h->slot) {
        p = &d->parts[idx];
    } else {
        for (uint32_t i = 0; i < d->n_parts; i++) {
            if (d->parts[i].host_slot == h->slot) {
                p = &d->parts[i];
                break;
            }
        }
    }
    if (!p || p->session != h->session) {
        core->stats.sat_unknown++;
        return;
    }
    p->flags |= flags;
    part_done(core, d, p, TEM_PART_VALUE, s->value);
}

static void
repoll_push(struct tem_core *core, const struct tem_decision *d,
            uint32_t part, uint64_t due)
{
    if (core->rp_count == core->rp_cap) {
        size_t cap = MAX(64, 2 * core->rp_cap);
        struct repoll *r = xmalloc(cap * sizeof *r);
        for (size_t i = 0; i < core->rp_count; i++) {
            r[i] = core->repolls[(core->rp_head + i) % core->rp_cap];
        }
        free(core->repolls);
        core->repolls = r;
        core->rp_cap = cap;
        core->rp_head = 0;
    }
    core->repolls[(core->rp_head + core->rp_count++) % core->rp_cap]
        = (struct repoll) { .due_ns = due, .slot = d->slot, .gen = d->gen,
                            .part = part };
}

void
handle_poll_reply(struct tem_core *core, struct tem_host *h,
                  const Trumpet__PollReply *r)
{
    uint32_t slot = r->cookie & ((1u << COOKIE_SLOT_BITS) - 1);
    uint32_t part = (r->cookie >> COOKIE_SLOT_BITS)
                    & ((1u << COOKIE_PART_BITS) - 1);
    uint64_t gen = r->cookie >> (COOKIE_SLOT_BITS + COOKIE_PART_BITS);
    struct tem_decision *d = slot < core->n_dslots ? core->dslots[slot]
                                                   : NULL;

    core->stats.poll_replies++;
    h->stats.poll_replies++;
    if (!d || !d->in_use || d->decided || d->gen != gen
        || d->event_id != r->event_id || d->epoch != r->epoch
        || part >= d->n_parts || d->parts[part].host_slot != h->slot
        || d->parts[part].session != h->session
        || d->parts[part].state != TEM_PART_WAITING) {
        core->stats.replies_stale++;
        return;
    }

    struct tem_part *p = &d->parts[part];
    switch (r->status) {
    case TRUMPET__POLL_STATUS__POLL_OK:
        part_done(core, d, p, TEM_PART_VALUE, r->value);
        break;
    case TRUMPET__POLL_STATUS__POLL_NO_GROUP:
        part_done(core, d, p, TEM_PART_VALUE, 0);
        break;
    case TRUMPET__POLL_STATUS__POLL_INCOMPLETE:
        p->flags |= PART_INCOMPLETE;
        part_done(core, d, p, TEM_PART_VALUE, r->has_value ? r->value : 0);
        break;
    case TRUMPET__POLL_STATUS__POLL_NOT_YET: {
        uint64_t due = now__(core) + core->cfg.repoll_ns;
        if (due < d->deadline_ns) {
            repoll_push(core, d, part, due);
        }
        break;
    }
    case TRUMPET__POLL_STATUS__POLL_EXPIRED:
    case TRUMPET__POLL_STATUS__POLL_NO_EVENT:
    case _TRUMPET__POLL_STATUS_IS_INT_SIZE:
    default:
        part_done(core, d, p, TEM_PART_MISSING, 0);
        break;
    }
}
