/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TEM's events (paper section 6): definitions, placement on hosts,
 * threshold shares, and their persistence.
 *
 * Definitions.  An event is an event-language definition (lib/event.h,
 * docs/event-language.md) plus the network-wide clauses scope=, across=,
 * split=, then= and standby= (docs/tem.md), which lib/event.h hands over
 * as extension clauses; tem_event_parse_clauses() reads them.  Hosts get
 * the definition without them ('local_def').  An event id is never
 * reused: new ids count up from the largest ever given (next_id, kept in
 * the state file).
 *
 * Placement.  An event's members are the connected hosts in its scope
 * that serve a prefix intersecting the addresses its filter constrains,
 * of the tenant it names if it names one (tem_event_eligible() has the
 * rules), and, for a standby event, that have an active drill-down.
 * tem_event_reconcile() brings the members in line whenever that changes
 * (a host came or went, an event was added, a drill-down began or ended):
 * Install to the new members, Remove to those that left.  A member
 * records the host's session; a host back with a new session is a new
 * member.  e->member_of[slot] is the index of host slot 'slot''s member,
 * or -1.
 *
 * Shares.  A sum() or count() threshold is split over the members
 * (lib/decision.h), equally or, with split=weighted, by each host's history
 * (an EWMA of its values in decisions, updated by tem-decide.c) with a
 * floor.  The threshold is re-split when a host joins (one that leaves
 * leaves its share unused: the split stays safe) and, for weighted
 * splits, by the rebalance (below) when a share would move by more than
 * --rebalance-change.  A member whose share changes is removed and
 * installed again.
 *
 * Timers.  tem_event_run(), which tem_core_run() calls with the hosts'
 * timers, reconciles a standby event when a drill-down of it ends and
 * rebalances the split events every --rebalance-interval.
 *
 * Persistence.  tem_core_events_to_json() and tem_core_events_from_json()
 * are the state file's form (tem-state.c writes and reads the file).
 */
#include "tem-core-private.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "decision.h"

const char *const tem_event_across_names[] = {
    "sum", "count", "max", "atleast",
};

/* ---------------------------------------------------------------------- */
/* Events: lookup, eligibility, installation. */

struct tem_event *
tem_event_by_id(const struct tem_core *core, uint32_t id)
{
    for (struct tem_event *e = core->by_id[id & core->id_mask]; e;
         e = e->id_next) {
        if (e->id == id) {
            return e;
        }
    }
    return NULL;
}

struct tem_event *
tem_event_by_name(const struct tem_core *core, const char *name)
{
    for (size_t i = 0; i < core->n_events; i++) {
        if (!strcmp(core->events[i]->name, name)) {
            return core->events[i];
        }
    }
    return NULL;
}

/* Returns true if scope prefix 's' takes in host prefix 'h': they share
 * an address and, if 's' is a tenant's, 'h' is that tenant's too. */
static bool
tem_event_scope_takes__(const struct tpm_prefix *s, const struct tpm_prefix *h)
{
    return (tpm_prefix_overlap(s, h)
            && (!s->has_tun || (h->has_tun && h->tun_id == s->tun_id)));
}

/* Returns true if some prefix of 'h' overlaps one of the 'n_a' filter
 * addresses 'a' (or 'n_a' is 0) and, if 'tun' is on, is a prefix of a
 * tenant that 'tun' matches; for an underlay event (outer addresses: the
 * hosts' own), a prefix of no tenant. */
static bool
tem_event_host_serves__(const struct tem_host *h,
                        const struct tpm_tun_filter *tun,
                        const struct tpm_prefix *a, size_t n_a)
{
    if (!n_a && !tun->on) {
        return true;
    }
    for (size_t i = 0; i < h->n_prefixes; i++) {
        const struct tpm_prefix *hp = &h->prefixes[i];
        if (tun->on ? (!hp->has_tun
                       || (hp->tun_id & tun->mask) != tun->vni)
            : tun->underlay && hp->has_tun) {
            continue;
        }
        if (!n_a) {
            return true;
        }
        for (size_t j = 0; j < n_a; j++) {
            if (tpm_prefix_overlap(hp, &a[j])) {
                return true;
            }
        }
    }
    return false;
}

/* Returns true if event 'e''s trigger belongs on host 'h' (docs/tem.md,
 * "Placement"):
 *
 *   - the host is in the event's scope: scope=all, or some prefix of the
 *     host overlaps a scope prefix (of the same tenant, if the scope
 *     prefix is a tenant's);
 *
 *   - if the filter names a tenant (tun_id=V[/M]), the host serves a
 *     prefix of a tenant T with T & M == V that, if the filter constrains
 *     nw_src or nw_dst, intersects one of them: a host that serves no
 *     prefix of the tenant gets no trigger;
 *
 *   - otherwise (the filter matches every tenant's inner traffic and the
 *     untunnelled), if the filter constrains nw_src or nw_dst, the host
 *     serves a prefix, a tenant's or not, that intersects one of them. */
bool
tem_event_eligible(const struct tem_event *e, const struct tem_host *h)
{
    if (!e->scope_all) {
        bool in = false;
        for (size_t i = 0; i < h->n_prefixes && !in; i++) {
            for (size_t j = 0; j < e->n_scope && !in; j++) {
                in = tem_event_scope_takes__(&e->scope[j], &h->prefixes[i]);
            }
        }
        if (!in) {
            return false;
        }
    }
    return tem_event_host_serves__(h, &e->ev->filter_tun, e->addr,
                                   e->n_addr);
}

static bool
tem_event_wanted(const struct tem_event *e, const struct tem_host *h,
                 uint64_t now)
{
    return tem_out_host_connected(h) && tem_event_eligible(e, h)
           && (!e->standby || e->drill_until[h->slot] > now);
}

/* Computes the threshold shares of 'e''s members into 'shares'. */
static void
tem_event_shares(const struct tem_core *core, const struct tem_event *e,
                 double *shares)
{
    size_t n = e->n_members;
    double *w = NULL;

    if (e->weighted && n) {
        double sum = 0;
        for (size_t i = 0; i < n; i++) {
            sum += e->members[i].has_ewma ? MAX(e->members[i].ewma, 0) : 0;
        }
        if (sum > 0) {
            double floor = core->cfg.weight_floor * sum / n;
            w = xmalloc(n * sizeof *w);
            for (size_t i = 0; i < n; i++) {
                double v = e->members[i].has_ewma ? e->members[i].ewma : 0;
                w[i] = MAX(v, floor);
            }
        }
    }
    tpm_split_threshold(e->threshold, n, w, shares);
    free(w);
}

static void
tem_event_member_install(struct tem_core *core, struct tem_event *e,
                         struct tem_member *m)
{
    struct tem_host *h = core->hosts[m->host_slot];
    struct tproto_batch *b = tem_out_batch(core, h, strlen(e->local_def)
                                           + strlen(e->name) + 32);
    m->cookie = core->next_cookie++;
    m->state = TEM_INSTALL_PENDING;
    m->installed_ns = tem_core_real(core);
    free(m->reason);
    m->reason = NULL;
    tproto_add_install(b, m->cookie, e->id, e->name, e->local_def,
                       e->split, e->split ? m->share : 0);
    core->stats.installs++;
}

static void
tem_event_member_remove(struct tem_core *core, struct tem_event *e,
                        const struct tem_member *m)
{
    struct tem_host *h = tem_out_host_by_slot(core, m->host_slot);
    if (tem_out_host_connected(h) && h->session == m->session) {
        tproto_add_remove(tem_out_batch(core, h, 16), core->next_cookie++,
                          e->id);
        core->stats.removes++;
    }
}

static void
tem_event_index_members(struct tem_event *e)
{
    for (size_t i = 0; i < e->n_members; i++) {
        e->member_of[e->members[i].host_slot] = (int32_t) i;
    }
}

/* Applies shares 'shares' to 'e''s members: a member whose share changed
 * is removed and installed again (its history on the host restarts). */
static void
tem_event_apply_shares(struct tem_core *core, struct tem_event *e,
                       const double *shares)
{
    double eps = 1e-9 * MAX(fabs(e->threshold), 1);
    for (size_t i = 0; i < e->n_members; i++) {
        struct tem_member *m = &e->members[i];
        if (m->is_new) {
            m->share = shares[i];
            tem_event_member_install(core, e, m);
        } else if (fabs(m->share - shares[i]) > eps) {
            m->share = shares[i];
            tem_event_member_remove(core, e, m);
            tem_event_member_install(core, e, m);
            e->stats.reinstalls++;
        }
        m->is_new = false;
    }
}

/* Brings 'e''s installation in line with the hosts connected now: installs
 * the trigger on new hosts, removes it from hosts that no longer belong,
 * and for a split event re-splits the threshold when a host joined (a host
 * that leaves leaves its share unused: the split stays safe, and the next
 * rebalance redistributes it). */
void
tem_event_reconcile(struct tem_core *core, struct tem_event *e, uint64_t now)
{
    size_t n = 0;
    bool joined = false;

    for (size_t i = 0; i < e->n_members; i++) {
        struct tem_member *m = &e->members[i];
        struct tem_host *h = core->hosts[m->host_slot];
        if (h->session == m->session && tem_event_wanted(e, h, now)) {
            e->member_of[m->host_slot] = (int32_t) n;
            e->members[n++] = *m;
        } else {
            e->member_of[m->host_slot] = -1;
            tem_event_member_remove(core, e, m);
            free(m->reason);
        }
    }
    e->n_members = n;

    for (uint32_t s = 0; s < core->n_host_slots; s++) {
        struct tem_host *h = core->hosts[s];
        if (!h || e->member_of[s] >= 0 || !tem_event_wanted(e, h, now)) {
            continue;
        }
        if (e->n_members >= e->allocated) {
            e->allocated = MAX(8, 2 * e->allocated);
            e->members = xrealloc(e->members,
                                  e->allocated * sizeof *e->members);
        }
        e->members[e->n_members++] = (struct tem_member) {
            .host_slot = s,
            .session = h->session,
            .is_new = true,
        };
        joined = true;
    }
    tem_event_index_members(e);

    if (e->split) {
        if (joined) {
            double *shares = xcalloc(e->n_members, sizeof *shares);
            tem_event_shares(core, e, shares);
            tem_event_apply_shares(core, e, shares);
            free(shares);
        }
    } else {
        for (size_t i = 0; i < e->n_members; i++) {
            if (e->members[i].is_new) {
                tem_event_member_install(core, e, &e->members[i]);
                e->members[i].is_new = false;
            }
        }
    }
}

void
tem_event_reconcile_all(struct tem_core *core, uint64_t now)
{
    for (size_t i = 0; i < core->n_events; i++) {
        tem_event_reconcile(core, core->events[i], now);
    }
}

/* Re-splits 'e''s threshold if some member's share would move by more
 * than --rebalance-change. */
static void
tem_event_rebalance(struct tem_core *core, struct tem_event *e)
{
    if (!e->split || e->n_members < 1) {
        return;
    }
    double *shares = xcalloc(e->n_members, sizeof *shares);
    bool moved = false;
    tem_event_shares(core, e, shares);
    for (size_t i = 0; i < e->n_members; i++) {
        double old = e->members[i].share;
        if (fabs(shares[i] - old) > core->cfg.rebalance_change
                                    * MAX(fabs(old), 1e-9)) {
            moved = true;
        }
    }
    if (moved) {
        core->stats.rebalances++;
        tem_log_rl(core, &core->rl_install, TPM_LOG_INFO,
                   "event %s: re-splitting threshold %g over %zu hosts",
                   e->name, e->threshold, e->n_members);
        tem_event_apply_shares(core, e, shares);
    }
    free(shares);
}

/* ---------------------------------------------------------------------- */
/* Timers. */

/* The events' timers: a standby event's drill-downs that ended (its
 * members reconciled) and the rebalancing of split events.  Returns when
 * they next need to run (UINT64_MAX: nothing in view). */
uint64_t
tem_event_run(struct tem_core *core, uint64_t now)
{
    uint64_t next = UINT64_MAX;

    for (size_t i = 0; i < core->n_events; i++) {
        struct tem_event *e = core->events[i];
        if (e->standby && e->drill_next && e->drill_next <= now) {
            uint64_t earliest = 0;
            tem_event_reconcile(core, e, now);
            for (uint32_t s = 0; s < core->n_host_slots; s++) {
                uint64_t u = e->drill_until[s];
                if (u > now && (!earliest || u < earliest)) {
                    earliest = u;
                }
            }
            e->drill_next = earliest;
        }
        if (e->standby && e->drill_next) {
            next = MIN(next, e->drill_next);
        }
        if (e->split) {
            if (now >= e->next_rebalance_ns) {
                if (e->next_rebalance_ns) {
                    tem_event_rebalance(core, e);
                }
                e->next_rebalance_ns = now + core->cfg.rebalance_ns;
            }
            next = MIN(next, e->next_rebalance_ns);
        }
    }
    return next;
}

/* ---------------------------------------------------------------------- */
/* Event definitions. */

enum net_clause {
    NC_SCOPE,
    NC_ACROSS,
    NC_SPLIT,
    NC_THEN,
    NC_STANDBY,
    N_NET_CLAUSES
};

static const char *const net_clause_names[] = {
    "scope", "across", "split", "then", "standby",
};

/* Collapses white space runs of 's' into single spaces, trimmed. */
static char *
tem_event_collapse_space(const char *s)
{
    char *out = xmalloc(strlen(s) + 1);
    size_t n = 0;
    bool space = false;
    for (; *s; s++) {
        if (isspace((unsigned char) *s)) {
            space = n > 0;
        } else {
            if (space) {
                out[n++] = ' ';
                space = false;
            }
            out[n++] = *s;
        }
    }
    out[n] = '\0';
    return out;
}

/* Fills 'e''s network-wide settings from the extension clauses 'x'.
 * Returns NULL or an error. */
static char *
tem_event_parse_clauses(const struct tem_core *core, struct tem_event *e,
                        const struct tpm_event_ext *x)
{
    const char *v;
    const struct tpm_expr *p = e->ev->pred;

    e->has_threshold = e->ev->threshold && p->type == TPM_EXPR_BIN
                       && p->a == e->ev->value && p->b == e->ev->threshold;
    e->threshold = e->has_threshold ? e->ev->threshold->num : 0;

    /* scope= */
    v = x->values[NC_SCOPE];
    e->scope_all = !v || !strcmp(v, "all");
    if (!e->scope_all) {
        char *error = tpm_prefix_parse_list(v, &e->scope, &e->n_scope);
        if (error || !e->n_scope) {
            char *msg = xasprintf("scope: column %d: %s: expected 'all' or "
                                  "a list of prefixes such as "
                                  "10.99.1.0/24,10.99.2.0/24",
                                  x->cols[NC_SCOPE],
                                  error ? error : "empty scope");
            free(error);
            return msg;
        }
    }

    /* across= */
    const char *why = NULL;
    bool splittable = tpm_split_supported(e->ev, &why);
    v = x->values[NC_ACROSS];
    e->across_given = v != NULL;
    if (!v) {
        e->across = !splittable ? TEM_ACROSS_MAX
                    : e->ev->value->agg == TPM_AGG_COUNT ? TEM_ACROSS_COUNT
                    : TEM_ACROSS_SUM;
    } else if (!strcmp(v, "sum") || !strcmp(v, "count")) {
        if (!splittable) {
            return xasprintf("across: column %d: across=%s needs a "
                             "predicate 'sum(...) > T' or 'count(...) > T' "
                             "(or >=) with a constant T >= 0, but %s",
                             x->cols[NC_ACROSS], v, why);
        }
        e->across = !strcmp(v, "sum") ? TEM_ACROSS_SUM : TEM_ACROSS_COUNT;
    } else if (!strcmp(v, "max")) {
        e->across = TEM_ACROSS_MAX;
    } else if (!strncmp(v, "atleast:", 8)) {
        const char *k = v + 8;
        char *end;
        unsigned long n = isdigit((unsigned char) *k)
                          ? strtoul(k, &end, 10) : 0;
        bool pct = n && *end == '%';
        if (!n || (pct ? end[1] != '\0' || n > 100 : *end != '\0')
            || n > 65535) {
            return xasprintf("across: column %d: '%s' is not a host count: "
                             "expected atleast:K (K hosts, 1 to 65535) or "
                             "atleast:K%% (K%% of the event's hosts, 1 to "
                             "100)", x->cols[NC_ACROSS], v);
        }
        e->across = TEM_ACROSS_ATLEAST;
        e->atleast_k = n;
        e->atleast_pct = pct;
    } else {
        return xasprintf("across: column %d: unknown value '%s': expected "
                         "sum, count, max, atleast:K or atleast:K%%",
                         x->cols[NC_ACROSS], v);
    }
    e->split = e->across == TEM_ACROSS_SUM || e->across == TEM_ACROSS_COUNT;

    /* split= */
    v = x->values[NC_SPLIT];
    if (v) {
        if (!e->split) {
            return xasprintf("split: column %d: split= applies only to "
                             "across=sum or across=count (this event is "
                             "across=%s)", x->cols[NC_SPLIT],
                             tem_event_across_names[e->across]);
        }
        if (!strcmp(v, "weighted")) {
            e->weighted = true;
        } else if (strcmp(v, "equal")) {
            return xasprintf("split: column %d: unknown value '%s': "
                             "expected equal or weighted", x->cols[NC_SPLIT],
                             v);
        }
    }

    /* then= */
    v = x->values[NC_THEN];
    if (v) {
        const char *colon = strchr(v, ':');
        char *name = colon ? xstrndup(v, colon - v) : NULL;
        char *error = NULL;
        if (!tpm_event_name_valid(name)) {
            error = xasprintf("then: column %d: '%s' is not NAME:DURATION: "
                              "expected an event name (1 to 63 characters "
                              "from A-Z a-z 0-9 _ . -), ':' and a time such "
                              "as 500ms", x->cols[NC_THEN], v);
        } else if (!strcmp(name, e->name)) {
            error = xasprintf("then: column %d: an event cannot drill down "
                              "to itself", x->cols[NC_THEN]);
        } else {
            char *terr = tpm_parse_time(colon + 1, &e->then_ns);
            if (terr || !e->then_ns) {
                error = xasprintf("then: column %d: '%s' is not a duration: "
                                  "expected a positive time such as 500ms "
                                  "or 10s", x->cols[NC_THEN] + (int) (colon
                                  + 1 - v), colon + 1);
            }
            free(terr);
        }
        if (error) {
            free(name);
            return error;
        }
        e->then_name = name;
    }

    /* standby= */
    v = x->values[NC_STANDBY];
    if (v) {
        if (!strcmp(v, "yes") || !strcmp(v, "true")) {
            e->standby = true;
        } else if (strcmp(v, "no") && strcmp(v, "false")) {
            return xasprintf("standby: column %d: unknown value '%s': "
                             "expected yes or no", x->cols[NC_STANDBY], v);
        }
    }

    /* Checks the hosts would make. */
    if (e->ev->interval_ns % core->cfg.epoch_ns) {
        char a[32], b[32];
        tpm_time_format(e->ev->interval_ns, a, sizeof a);
        tpm_time_format(core->cfg.epoch_ns, b, sizeof b);
        return xasprintf("interval: %s is not a multiple of the epoch (%s): "
                         "the monitors check aggregates at epoch "
                         "boundaries", a, b);
    }
    return NULL;
}

/* Stores in 'e->addr' the prefixes of the addresses 'e''s filter
 * constrains (a non-contiguous mask counts by its leading ones, which
 * covers every matching address). */
static void
tem_event_filter_prefixes(struct tem_event *e)
{
    const struct tpm_match *f = &e->ev->filter;
    int ipver = f->key.ipver == 6 ? 6 : 4;
    int n_words = ipver == 6 ? 4 : 1;
    const uint32_t *masks[2] = { f->mask.src, f->mask.dst };
    const uint32_t *keys[2] = { f->key.src, f->key.dst };

    e->n_addr = 0;
    for (int k = 0; k < 2; k++) {
        int len = tpm_mask_prefix_len(masks[k], n_words);
        if (!len) {
            continue;
        }
        struct tpm_prefix *p = &e->addr[e->n_addr++];
        memset(p, 0, sizeof *p);
        p->ipver = ipver;
        p->len = len;
        for (int w = 0; w < n_words; w++) {
            int bits = MIN(MAX(len - 32 * w, 0), 32);
            uint32_t m = bits ? htonl(bits == 32 ? UINT32_MAX
                                      : ~(UINT32_MAX >> bits)) : 0;
            p->addr[w] = keys[k][w] & m;
        }
    }
}

void
tem_event_free(struct tem_event *e)
{
    if (!e) {
        return;
    }
    for (size_t i = 0; i < e->n_members; i++) {
        free(e->members[i].reason);
    }
    for (size_t i = 0; e->recent && i < e->n_recent; i++) {
        sbuf_destroy(&e->recent[i]);
    }
    free(e->recent);
    free(e->members);
    free(e->member_of);
    free(e->drill_until);
    free(e->then_name);
    free(e->scope);
    tpm_event_destroy(e->ev);
    free(e->local_def);
    free(e->definition);
    free(e->name);
    free(e);
}

/* Parses event 'name' 'definition' into a new event (not yet added). */
static char *
tem_event_parse(const struct tem_core *core, const char *name,
                const char *definition, struct tem_event **ep)
{
    struct tpm_event_ext x = { .n = N_NET_CLAUSES,
                               .names = net_clause_names };
    struct tem_event *e = xzalloc(sizeof *e);

    *ep = NULL;
    e->name = xstrdup(name);
    e->definition = tem_event_collapse_space(definition);
    char *error = tpm_event_parse_ext(name, definition, &x, &e->ev);
    if (!error) {
        error = tpm_event_refuse_ports(e->ev, TEM_NO_PORTS);
    }
    if (!error) {
        error = tem_event_parse_clauses(core, e, &x);
    }
    if (!error) {
        e->local_def = tem_event_collapse_space(x.local);
        if (strlen(e->local_def) > TPROTO_MAX_DEFINITION) {
            error = xasprintf("definition: longer than %d characters",
                              TPROTO_MAX_DEFINITION);
        }
    }
    tpm_event_ext_clear(&x);
    if (error) {
        tem_event_free(e);
        return error;
    }
    tem_event_filter_prefixes(e);
    e->member_of = xmalloc(core->cfg.max_hosts * sizeof *e->member_of);
    for (uint32_t i = 0; i < core->cfg.max_hosts; i++) {
        e->member_of[i] = -1;
    }
    if (e->standby) {
        e->drill_until = xcalloc(core->cfg.max_hosts,
                                 sizeof *e->drill_until);
    }
    e->recent = xcalloc(core->cfg.recent_alerts, sizeof *e->recent);
    *ep = e;
    return NULL;
}

char *
tem_core_event_add(struct tem_core *core, const char *name,
                   const char *definition, uint32_t id)
{
    struct tem_event *e;
    char *error;

    if (!tpm_event_name_valid(name)) {
        /* Not echoed: it may be long. */
        return xstrdup("name: not a valid event name: expected 1 to 63 "
                       "characters from [A-Za-z0-9_.-]");
    }
    size_t def_len = strnlen(definition, TEM_MAX_DEFINITION + 1);
    if (def_len > TEM_MAX_DEFINITION) {
        return xasprintf("definition: longer than %d characters",
                         TEM_MAX_DEFINITION);
    }
    if (tem_event_by_name(core, name)) {
        return xasprintf("event '%s' already exists (event-del it first)",
                         name);
    }
    if (core->n_events >= core->cfg.max_events) {
        return xasprintf("too many events: %zu defined (the TEM's "
                         "--max-events)", core->n_events);
    }
    if (id && tem_event_by_id(core, id)) {
        return xasprintf("event id %"PRIu32" is used twice", id);
    }
    if (!id && core->next_id > TEM_MAX_EVENT_ID) {
        return xasprintf("no event id left: ids are never reused and %"
                         PRIu32" was given (renumber the events in the "
                         "state file with the TEM stopped: docs/tem.md)",
                         (uint32_t) TEM_MAX_EVENT_ID);
    }
    error = tem_event_parse(core, name, definition, &e);
    if (error) {
        return error;
    }
    e->id = id ? id : (uint32_t) core->next_id;
    if (e->id >= core->next_id) {
        core->next_id = (uint64_t) e->id + 1;
    }
    struct tem_event **b = &core->by_id[e->id & core->id_mask];
    e->id_next = *b;
    *b = e;
    core->events[core->n_events++] = e;
    tem_log_rl(core, &core->rl_misc, TPM_LOG_INFO, "event %s (id %"PRIu32") "
               "defined: %s", e->name, e->id, e->definition);
    tem_event_reconcile(core, e, tem_core_now(core));
    core->next_timers_ns = 0;   /* Its timers start at the next run. */
    return NULL;
}

char *
tem_core_event_check(const struct tem_core *core, const char *name,
                     const char *definition)
{
    struct tem_event *e;

    if (!tpm_event_name_valid(name)) {
        return xstrdup("name: not a valid event name: expected 1 to 63 "
                       "characters from [A-Za-z0-9_.-]");
    }
    if (strnlen(definition, TEM_MAX_DEFINITION + 1) > TEM_MAX_DEFINITION) {
        return xasprintf("definition: longer than %d characters",
                         TEM_MAX_DEFINITION);
    }
    char *error = tem_event_parse(core, name, definition, &e);
    tem_event_free(e);
    return error;
}

static void
tem_event_delete(struct tem_core *core, struct tem_event *e)
{
    for (size_t i = 0; i < e->n_members; i++) {
        tem_event_member_remove(core, e, &e->members[i]);
    }
    struct tem_event **pp = &core->by_id[e->id & core->id_mask];
    while (*pp != e) {
        pp = &(*pp)->id_next;
    }
    *pp = e->id_next;
    for (size_t i = 0; i < core->n_events; i++) {
        if (core->events[i] == e) {
            memmove(&core->events[i], &core->events[i + 1],
                    (core->n_events - i - 1) * sizeof *core->events);
            core->n_events--;
            break;
        }
    }
    tem_event_free(e);
}

char *
tem_core_event_del(struct tem_core *core, const char *name)
{
    struct tem_event *e = tem_event_by_name(core, name);
    if (!e) {
        return xasprintf("no event '%s'", name);
    }
    tem_log_rl(core, &core->rl_misc, TPM_LOG_INFO, "event %s (id %"PRIu32") "
               "deleted", e->name, e->id);
    tem_event_delete(core, e);
    return NULL;
}

void
tem_core_event_clear(struct tem_core *core)
{
    while (core->n_events) {
        tem_event_delete(core, core->events[core->n_events - 1]);
    }
}

size_t
tem_core_n_events(const struct tem_core *core)
{
    return core->n_events;
}

struct json_object *
tem_core_events_to_json(const struct tem_core *core)
{
    struct json_object *obj = json_object_new_object();
    struct json_object *events = json_object_new_array();

    json_object_object_add(obj, "format", json_object_new_int(1));
    json_object_object_add(obj, "next_id",
                           json_object_new_int64(core->next_id));
    for (size_t i = 0; i < core->n_events; i++) {
        const struct tem_event *e = core->events[i];
        struct json_object *o = json_object_new_object();
        json_object_object_add(o, "id", json_object_new_int64(e->id));
        json_object_object_add(o, "name", json_object_new_string(e->name));
        json_object_object_add(o, "definition",
                               json_object_new_string(e->definition));
        json_object_object_add(o, "standby",
                               json_object_new_boolean(e->standby));
        json_object_array_add(events, o);
    }
    json_object_object_add(obj, "events", events);
    return obj;
}

char *
tem_core_events_from_json(struct tem_core *core,
                          const struct json_object *obj_)
{
    struct json_object *obj = (struct json_object *) obj_;
    struct json_object *events, *v;
    char *error = NULL;

    tem_core_event_clear(core);
    if (!json_object_is_type(obj, json_type_object)
        || !json_object_object_get_ex(obj, "events", &events)
        || !json_object_is_type(events, json_type_array)) {
        return xstrdup("expected an object with an \"events\" array");
    }
    if (json_object_object_get_ex(obj, "format", &v)
        && json_object_get_int(v) != 1) {
        return xasprintf("unknown format %d (expected 1)",
                         json_object_get_int(v));
    }
    size_t n = json_object_array_length(events);
    for (size_t i = 0; i < n && !error; i++) {
        struct json_object *o = json_object_array_get_idx(events, i);
        struct json_object *id, *name, *def;
        if (!json_object_is_type(o, json_type_object)
            || !json_object_object_get_ex(o, "id", &id)
            || !json_object_is_type(id, json_type_int)
            || !json_object_object_get_ex(o, "name", &name)
            || !json_object_is_type(name, json_type_string)
            || !json_object_object_get_ex(o, "definition", &def)
            || !json_object_is_type(def, json_type_string)) {
            error = xasprintf("events[%zu]: expected an object with \"id\" "
                              "(integer), \"name\" and \"definition\" "
                              "(strings)", i);
            break;
        }
        int64_t idv = json_object_get_int64(id);
        const char *nm = json_object_get_string(name);
        if (idv < 1 || idv > UINT32_MAX) {
            error = xasprintf("events[%zu] ('%s'): id %"PRId64" out of "
                              "range (1 to 4294967295)", i, nm, idv);
            break;
        }
        char *e = tem_core_event_add(core, nm, json_object_get_string(def),
                                     (uint32_t) idv);
        if (e) {
            error = xasprintf("events[%zu] ('%s', id %"PRId64"): %s", i, nm,
                              idv, e);
            free(e);
        }
    }
    if (!error && json_object_object_get_ex(obj, "next_id", &v)) {
        int64_t next = json_object_get_int64(v);
        if (next > (int64_t) core->next_id
            && next <= (int64_t) TEM_MAX_EVENT_ID + 1) {
            core->next_id = next;
        }
    }
    if (error) {
        tem_core_event_clear(core);
    }
    return error;
}
