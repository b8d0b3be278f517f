/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TEM's logic: sessions, events and their installation, decisions,
 * alerts and drill-down.  See tem-core.h for the design and docs/tem.md
 * for the operator's view.
 *
 * Hot path: a satisfaction costs an event lookup by id (hash chain), a
 * member lookup by host slot (array), a decision lookup (open addressing,
 * linear probing) and, for a new key, a decision taken from a free list
 * and one Poll per other host appended to that host's outgoing batch.
 * Nothing is logged per message; every drop is a counter.
 */
#include "tem-core.h"
#include "tem-metrics.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "event.h"
#include "json-number.h"
#include "sbuf.h"
#include "report-json.h"
#include "split.h"
#include "util.h"

#define NS_PER_MS 1000000ULL
#define NS_PER_S 1000000000ULL

/* A host that sends nothing for this many heartbeat periods is gone. */
#define TEM_HEARTBEAT_MISSES 3

/* Log lines per rate limiter and second. */
#define TEM_LOG_BURST 10

/* Poll cookies: decision slot (24 bits), part (16 bits), generation. */
#define COOKIE_SLOT_BITS 24
#define COOKIE_PART_BITS 16
#define COOKIE_GEN_BITS 24

/* Doubly linked list with a sentinel. */
struct tem_list {
    struct tem_list *prev, *next;
};

static void
list_init(struct tem_list *l)
{
    l->prev = l->next = l;
}

static bool
list_empty(const struct tem_list *l)
{
    return l->next == l;
}

static void
list_push_back(struct tem_list *l, struct tem_list *e)
{
    e->prev = l->prev;
    e->next = l;
    l->prev->next = e;
    l->prev = e;
}

static void
list_remove(struct tem_list *e)
{
    e->prev->next = e->next;
    e->next->prev = e->prev;
    e->prev = e->next = e;
}

/* Rate-limited logging: at most TEM_LOG_BURST lines a second per
 * limiter; the number suppressed is told with the next line. */
struct tem_rl {
    uint64_t window;
    unsigned int n;
    uint64_t suppressed;
};

enum tem_host_state {
    TEM_HOST_FREE,
    TEM_HOST_CONNECTED,
    TEM_HOST_GONE,
};

struct tem_host_stats {
    uint64_t frames_in, msgs_in, invalid_frames, invalid_msgs;
    uint64_t satisfactions, poll_replies, acks, nacks, heartbeats;
    uint64_t frames_out, msgs_out, send_drops;
    uint64_t sessions;
    /* The host's monitor counters, as its latest heartbeat gave them. */
    uint64_t mon_packets, mon_bytes, mon_sweeps, mon_sweeps_unfinished;
    uint64_t mon_reports, mon_reports_dropped, mon_dos_skipped;
    uint64_t mon_dos_passed;
};

/* Where a host stands with the DoS threshold the TEM sets on it
 * (tem_core_set_dos_threshold()). */
enum tem_dos_state {
    TEM_DOS_NONE,               /* The TEM sets none on this host. */
    TEM_DOS_PENDING,            /* Configure sent, no answer yet. */
    TEM_DOS_ACKED,
    TEM_DOS_NACKED,             /* 'dos_reason' says why. */
    TEM_DOS_UNSUPPORTED,        /* Session of a protocol version without
                                 * Configure: not sent. */
    TEM_DOS_WAITING,            /* Not connected: sent when it is. */
};

static const char *const dos_state_names[] = {
    "none", "pending", "acked", "nacked", "unsupported", "waiting",
};

struct tem_host {
    uint32_t slot;
    enum tem_host_state state;
    uint32_t session;           /* Unique per Welcome. */
    char id[TPROTO_MAX_ID + 1];
    uint8_t peer[256];
    size_t peer_len;
    struct tem_host *peer_next; /* Chain of 'peers' hash. */
    struct tpm_prefix *prefixes;
    size_t n_prefixes;
    uint32_t version;
    uint32_t n_pmds;
    char *software;
    uint64_t connected_ns, last_rx_ns, last_hb_tx_ns, gone_ns;
    uint64_t hb_seq;
    char gone_reason[160];

    /* DoS threshold: this host's own value (tem-ctl dos-threshold HOST),
     * else the TEM's value for all hosts if there is one. */
    bool dos_own;
    uint32_t dos_own_bytes;
    enum tem_dos_state dos_state;
    uint32_t dos_sent;          /* Value of the last Configure. */
    uint64_t dos_cookie;        /* ... its cookie ... */
    uint32_t dos_session;       /* ... and session. */
    char dos_reason[256];       /* Nack reason. */

    struct tproto_batch out;    /* Queued for the next flush. */
    size_t out_bytes;           /* Estimated size of 'out'. */
    bool dirty;                 /* On 'dirty' list. */
    struct tem_host_stats stats;
};

enum tem_across {
    TEM_ACROSS_SUM,
    TEM_ACROSS_COUNT,
    TEM_ACROSS_MAX,
    TEM_ACROSS_ATLEAST,
};

static const char *const across_names[] = { "sum", "count", "max",
                                            "atleast" };

enum tem_install_state {
    TEM_INSTALL_PENDING,
    TEM_INSTALL_ACKED,
    TEM_INSTALL_NACKED,
};

static const char *const install_names[] = { "pending", "acked",
                                             "nacked" };

struct tem_member {
    uint32_t host_slot;
    uint32_t session;
    enum tem_install_state state;
    bool is_new;                /* Added by the current reconcile. */
    uint64_t cookie;            /* Of the last Install. */
    uint64_t installed_ns;
    char *reason;               /* Nack reason (owned) or NULL. */
    double share;               /* Threshold share (split events). */
    double ewma;                /* History of the host's values. */
    bool has_ewma;
};

struct tem_event_stats {
    uint64_t satisfactions, decisions, alerts, decided_deadline;
    uint64_t late, dropped, nacks, drilldowns, reinstalls;
};

struct tem_event {
    uint32_t id;
    char *name;
    char *definition;           /* As given, network clauses included. */
    char *local_def;            /* Sent to hosts. */
    struct tpm_event *ev;

    bool scope_all;
    struct tpm_prefix *scope;
    size_t n_scope;
    struct tpm_prefix addr[2];  /* Filter's nw_src / nw_dst prefixes. */
    size_t n_addr;

    enum tem_across across;
    bool across_given;
    uint32_t atleast_k;
    bool atleast_pct;
    bool weighted;
    bool split;                 /* Threshold split over the hosts. */
    bool has_threshold;         /* Simple "V cmp constant" predicate. */
    double threshold;
    char *then_name;
    uint64_t then_ns;
    bool standby;

    struct tem_member *members;
    size_t n_members, allocated;
    int32_t *member_of;         /* [max_hosts]: index or -1. */
    uint64_t *drill_until;      /* [max_hosts], standby events. */
    uint64_t drill_next;        /* Earliest active 'drill_until'. */
    uint64_t next_rebalance_ns;

    char **recent;              /* Ring of 'recent_alerts' JSON lines. */
    size_t n_recent, recent_next;

    struct tem_event_stats stats;
    struct tem_event *id_next;  /* Chain of 'by_id' hash. */
};

enum tem_part_state {
    TEM_PART_WAITING,
    TEM_PART_VALUE,
    TEM_PART_MISSING,
};

#define PART_SATISFIED 1        /* The host reported a satisfaction. */
#define PART_INCOMPLETE 2       /* Value from some of its PMDs only. */

struct tem_part {
    uint32_t host_slot;
    uint32_t session;
    double value;
    uint8_t state;
    uint8_t flags;
};

struct tem_decision {
    struct tem_list node;       /* In 'pending' or 'decided'. */
    uint32_t event_id;
    uint32_t hash;
    uint64_t epoch;
    struct tpm_key group;
    uint32_t slot, gen;
    bool in_use, decided;
    uint64_t started_ns, deadline_ns, expires_ns;
    uint32_t n_parts, n_waiting, cap;
    struct tem_part *parts;
};

struct dh_entry {
    uint32_t hash;
    uint32_t slot1;             /* Decision slot + 1; 0: empty. */
};

struct repoll {
    uint64_t due_ns;
    uint32_t slot, gen, part;
};

/* A growable string for alerts, reused from one alert to the next: the
 * alert path builds its JSON by hand (json-c objects cost about 10 us an
 * alert).  Every string written is an event name, host id or group field,
 * whose characters need no JSON escaping. */
struct tem_core {
    struct tem_config cfg;
    uint64_t start_ns;

    /* Hosts. */
    struct tem_host **hosts;    /* [max_hosts], NULL until used. */
    uint32_t n_host_slots;      /* Slots ever used. */
    struct tem_host **peers;    /* Hash by peer identity. */
    size_t peer_mask;
    uint32_t session_seq;
    struct tem_host **dirty;
    size_t n_dirty;

    /* Events. */
    struct tem_event **events;  /* Dense, in creation order. */
    size_t n_events;
    struct tem_event **by_id;
    size_t id_mask;
    uint64_t next_id;           /* Up to TEM_MAX_EVENT_ID + 1. */
    uint64_t events_version;
    uint64_t next_cookie;

    /* Decisions. */
    struct tem_decision **dslots;
    uint32_t n_dslots;          /* Slots ever used. */
    uint32_t *dfree;
    uint32_t n_dfree;
    struct dh_entry *dh;
    size_t dh_mask, dh_count;
    struct tem_list pending;    /* By deadline. */
    struct tem_list decided;    /* By expiry (roughly). */
    struct repoll *repolls;     /* Ring. */
    size_t rp_head, rp_count, rp_cap;

    /* Alerts. */
    char **history;             /* Ring of 'alert_history' JSON lines. */
    char (*history_event)[TPROTO_MAX_ID + 1];   /* Event names. */
    struct sbuf alert_buf;
    char time_cache[32];        /* Formatted second of 'time_cache_secs'. */
    time_t time_cache_secs;
    size_t n_history, history_next;

    /* DoS threshold for every host without its own (tem-ctl
     * dos-threshold BYTES). */
    bool dos_all;
    uint32_t dos_all_bytes;

    uint64_t next_hk_ns;        /* Housekeeping. */
    struct tproto_batch tmp;    /* For peers without a session. */
    struct tem_stats stats;
    /* Detection latency (first satisfaction to alert), for
     * tem_core_metrics(): counts per bucket of latency_bounds[], the
     * last one above them all, and their sum. */
    uint64_t latency_counts[TEM_LATENCY_BUCKETS + 1];
    double latency_sum_s;
    struct tem_rl rl_session, rl_install, rl_drill, rl_misc, rl_input;
    struct tem_rl rl_security;
};

static uint64_t
now__(const struct tem_core *core)
{
    return core->cfg.clock(core->cfg.aux);
}

static void tem_log_rl(struct tem_core *, struct tem_rl *,
                       enum tpm_log_level, const char *format, ...)
    __attribute__((format(printf, 4, 5)));

static void tem_log_rlv(struct tem_core *, struct tem_rl *,
                        enum tpm_log_level, const char *format, va_list)
    __attribute__((format(printf, 4, 0)));

static void
tem_log_rlv(struct tem_core *core, struct tem_rl *rl,
            enum tpm_log_level level, const char *format, va_list args)
{
    uint64_t window = now__(core) / NS_PER_S;
    if (window != rl->window) {
        rl->window = window;
        rl->n = 0;
    }
    if (rl->n >= TEM_LOG_BURST) {
        rl->suppressed++;
        return;
    }
    rl->n++;

    char *msg = xvasprintf(format, args);
    if (rl->suppressed) {
        tpm_log(level, "%s (%"PRIu64" similar messages suppressed)", msg,
                rl->suppressed);
        rl->suppressed = 0;
    } else {
        tpm_log(level, "%s", msg);
    }
    free(msg);
}

static void
tem_log_rl(struct tem_core *core, struct tem_rl *rl, enum tpm_log_level level,
           const char *format, ...)
{
    va_list args;
    va_start(args, format);
    tem_log_rlv(core, rl, level, format, args);
    va_end(args);
}

void
tem_core_log_security(struct tem_core *core, enum tpm_log_level level,
                      const char *format, ...)
{
    va_list args;
    va_start(args, format);
    tem_log_rlv(core, &core->rl_security, level, format, args);
    va_end(args);
}

void
tem_config_init(struct tem_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->tem_id = "tem";
    cfg->epoch_ns = 10 * NS_PER_MS;
    cfg->heartbeat_ms = 1000;
    cfg->max_hosts = 1024;
    cfg->max_events = 1024;
    cfg->max_decisions = 1 << 20;
    cfg->poll_deadline_ns = 100 * NS_PER_MS;
    cfg->repoll_ns = NS_PER_MS;
    cfg->decided_keep_ns = 0;
    cfg->rebalance_ns = 10 * NS_PER_S;
    cfg->rebalance_change = 0.2;
    cfg->ewma_alpha = 0.25;
    cfg->weight_floor = 0.1;
    cfg->recent_alerts = 10;
    cfg->alert_history = 100;
    cfg->max_batch_bytes = 256 * 1024;
}

static size_t
pow2_at_least(size_t n)
{
    size_t p = 16;
    while (p < n) {
        p *= 2;
    }
    return p;
}

struct tem_core *
tem_core_create(const struct tem_config *cfg)
{
    struct tem_core *core = xzalloc(sizeof *core);

    core->cfg = *cfg;
    core->cfg.max_hosts = MAX(1, MIN(cfg->max_hosts, 65535));
    core->cfg.max_events = MAX(1, cfg->max_events);
    core->cfg.max_decisions = MAX(16, MIN(cfg->max_decisions, 1u << 24));
    core->cfg.recent_alerts = MAX(1, cfg->recent_alerts);
    core->cfg.alert_history = MAX(1, cfg->alert_history);
    core->cfg.max_batch_bytes = MAX(4096, MIN(cfg->max_batch_bytes,
                                              TPROTO_MAX_FRAME / 2));
    core->start_ns = now__(core);

    core->hosts = xcalloc(core->cfg.max_hosts, sizeof *core->hosts);
    core->peer_mask = pow2_at_least(2 * core->cfg.max_hosts) - 1;
    core->peers = xcalloc(core->peer_mask + 1, sizeof *core->peers);
    core->dirty = xcalloc(core->cfg.max_hosts, sizeof *core->dirty);

    core->events = xcalloc(core->cfg.max_events, sizeof *core->events);
    core->id_mask = pow2_at_least(2 * core->cfg.max_events) - 1;
    core->by_id = xcalloc(core->id_mask + 1, sizeof *core->by_id);
    core->next_id = 1;
    core->next_cookie = 1;

    core->dslots = xcalloc(core->cfg.max_decisions, sizeof *core->dslots);
    core->dfree = xcalloc(core->cfg.max_decisions, sizeof *core->dfree);
    core->dh_mask = 1023;
    core->dh = xcalloc(core->dh_mask + 1, sizeof *core->dh);
    list_init(&core->pending);
    list_init(&core->decided);

    core->history = xcalloc(core->cfg.alert_history, sizeof *core->history);
    core->history_event = xcalloc(core->cfg.alert_history,
                                  sizeof *core->history_event);
    tproto_batch_init(&core->tmp);
    return core;
}

static void event_free(struct tem_event *);

void
tem_core_destroy(struct tem_core *core)
{
    if (!core) {
        return;
    }
    for (size_t i = 0; i < core->n_events; i++) {
        event_free(core->events[i]);
    }
    for (uint32_t i = 0; i < core->n_host_slots; i++) {
        struct tem_host *h = core->hosts[i];
        if (h) {
            tproto_batch_destroy(&h->out);
            free(h->prefixes);
            free(h->software);
            free(h);
        }
    }
    for (uint32_t i = 0; i < core->n_dslots; i++) {
        if (core->dslots[i]) {
            free(core->dslots[i]->parts);
            free(core->dslots[i]);
        }
    }
    for (size_t i = 0; i < core->cfg.alert_history; i++) {
        free(core->history[i]);
    }
    free(core->alert_buf.s);
    free(core->history);
    free(core->history_event);
    free(core->repolls);
    free(core->dh);
    free(core->dfree);
    free(core->dslots);
    free(core->by_id);
    free(core->events);
    free(core->dirty);
    free(core->peers);
    free(core->hosts);
    tproto_batch_destroy(&core->tmp);
    free(core);
}

/* ---------------------------------------------------------------------- */
/* Hosts and outgoing messages. */

static uint32_t
peer_hash(const void *peer, size_t len)
{
    const uint8_t *p = peer;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) {
        h = (h ^ p[i]) * 16777619u;
    }
    return h;
}

static struct tem_host *
host_by_peer(const struct tem_core *core, const void *peer, size_t len)
{
    for (struct tem_host *h = core->peers[peer_hash(peer, len)
                                          & core->peer_mask];
         h; h = h->peer_next) {
        if (h->peer_len == len && !memcmp(h->peer, peer, len)) {
            return h;
        }
    }
    return NULL;
}

static void
peer_insert(struct tem_core *core, struct tem_host *h)
{
    struct tem_host **b = &core->peers[peer_hash(h->peer, h->peer_len)
                                       & core->peer_mask];
    h->peer_next = *b;
    *b = h;
}

static void
peer_remove(struct tem_core *core, struct tem_host *h)
{
    struct tem_host **pp = &core->peers[peer_hash(h->peer, h->peer_len)
                                        & core->peer_mask];
    while (*pp && *pp != h) {
        pp = &(*pp)->peer_next;
    }
    if (*pp) {
        *pp = h->peer_next;
    }
    h->peer_next = NULL;
}

static struct tem_host *
host_by_id(const struct tem_core *core, const char *id)
{
    for (uint32_t i = 0; i < core->n_host_slots; i++) {
        struct tem_host *h = core->hosts[i];
        if (h && h->state != TEM_HOST_FREE && !strcmp(h->id, id)) {
            return h;
        }
    }
    return NULL;
}

static struct tem_host *
host_by_slot(const struct tem_core *core, uint32_t slot)
{
    return slot < core->n_host_slots ? core->hosts[slot] : NULL;
}

static bool
host_connected(const struct tem_host *h)
{
    return h && h->state == TEM_HOST_CONNECTED;
}

static void
send_batch(struct tem_core *core, const void *peer, size_t peer_len,
           uint32_t version, struct tproto_batch *b,
           struct tem_host_stats *hs)
{
    size_t n = tproto_batch_count(b);
    if (!n) {
        return;
    }
    bool ok = core->cfg.send(core->cfg.aux, peer, peer_len, version, b);
    core->stats.frames_out++;
    core->stats.msgs_out += n;
    if (hs) {
        hs->frames_out++;
        hs->msgs_out += n;
    }
    if (!ok) {
        core->stats.send_drops += n;
        if (hs) {
            hs->send_drops += n;
        }
    }
    tproto_batch_clear(b);
}

static void
host_flush(struct tem_core *core, struct tem_host *h)
{
    if (host_connected(h)) {
        send_batch(core, h->peer, h->peer_len, h->version, &h->out,
                   &h->stats);
    }
    tproto_batch_clear(&h->out);
    h->out_bytes = 0;
}

/* Returns 'h''s outgoing batch for one more message of about 'bytes'
 * bytes, sending what is queued first if the frame would grow too
 * large. */
static struct tproto_batch *
host_out(struct tem_core *core, struct tem_host *h, size_t bytes)
{
    if (tproto_batch_count(&h->out) >= TPROTO_MAX_BATCH
        || h->out_bytes + bytes > core->cfg.max_batch_bytes) {
        host_flush(core, h);
    }
    if (!h->dirty) {
        h->dirty = true;
        core->dirty[core->n_dirty++] = h;
    }
    h->out_bytes += bytes + 16;
    return &h->out;
}

void
tem_core_flush(struct tem_core *core)
{
    for (size_t i = 0; i < core->n_dirty; i++) {
        struct tem_host *h = core->dirty[i];
        host_flush(core, h);
        h->dirty = false;
    }
    core->n_dirty = 0;
}

/* Sends one message to a peer without a session, at once. */
static void
send_refuse(struct tem_core *core, const void *peer, size_t peer_len,
            const char *reason)
{
    tproto_add_refuse(&core->tmp, reason);
    send_batch(core, peer, peer_len, 0, &core->tmp, NULL);
}

static void
send_bye(struct tem_core *core, const void *peer, size_t peer_len,
         const char *reason)
{
    tproto_add_bye(&core->tmp, reason);
    send_batch(core, peer, peer_len, 0, &core->tmp, NULL);
}

/* ---------------------------------------------------------------------- */
/* Events: lookup, eligibility, installation. */

static struct tem_event *
event_by_id(const struct tem_core *core, uint32_t id)
{
    for (struct tem_event *e = core->by_id[id & core->id_mask]; e;
         e = e->id_next) {
        if (e->id == id) {
            return e;
        }
    }
    return NULL;
}

static struct tem_event *
event_by_name(const struct tem_core *core, const char *name)
{
    for (size_t i = 0; i < core->n_events; i++) {
        if (!strcmp(core->events[i]->name, name)) {
            return core->events[i];
        }
    }
    return NULL;
}

static bool
prefixes_overlap(const struct tpm_prefix *a, size_t n_a,
                 const struct tpm_prefix *b, size_t n_b)
{
    for (size_t i = 0; i < n_a; i++) {
        for (size_t j = 0; j < n_b; j++) {
            if (tpm_prefix_overlap(&a[i], &b[j])) {
                return true;
            }
        }
    }
    return false;
}

/* Returns true if event 'e''s trigger belongs on host 'h': the host is in
 * the event's scope and, if the filter constrains nw_src or nw_dst, serves
 * a prefix that intersects one of them. */
static bool
event_eligible(const struct tem_event *e, const struct tem_host *h)
{
    if (!e->scope_all
        && !prefixes_overlap(h->prefixes, h->n_prefixes, e->scope,
                             e->n_scope)) {
        return false;
    }
    return !e->n_addr || prefixes_overlap(h->prefixes, h->n_prefixes,
                                          e->addr, e->n_addr);
}

static bool
event_wanted(const struct tem_event *e, const struct tem_host *h,
             uint64_t now)
{
    return host_connected(h) && event_eligible(e, h)
           && (!e->standby || e->drill_until[h->slot] > now);
}

/* Computes the threshold shares of 'e''s members into 'shares'. */
static void
event_shares(const struct tem_core *core, const struct tem_event *e,
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
member_install(struct tem_core *core, struct tem_event *e,
               struct tem_member *m, uint64_t now)
{
    struct tem_host *h = core->hosts[m->host_slot];
    struct tproto_batch *b = host_out(core, h, strlen(e->local_def)
                                      + strlen(e->name) + 32);
    m->cookie = core->next_cookie++;
    m->state = TEM_INSTALL_PENDING;
    m->installed_ns = now;
    free(m->reason);
    m->reason = NULL;
    tproto_add_install(b, m->cookie, e->id, e->name, e->local_def,
                       e->split, e->split ? m->share : 0);
    core->stats.installs++;
}

static void
member_remove(struct tem_core *core, struct tem_event *e,
              const struct tem_member *m)
{
    struct tem_host *h = host_by_slot(core, m->host_slot);
    if (host_connected(h) && h->session == m->session) {
        tproto_add_remove(host_out(core, h, 16), core->next_cookie++, e->id);
        core->stats.removes++;
    }
}

static void
event_index_members(struct tem_event *e)
{
    for (size_t i = 0; i < e->n_members; i++) {
        e->member_of[e->members[i].host_slot] = (int32_t) i;
    }
}

/* Applies shares 'shares' to 'e''s members: a member whose share changed
 * is removed and installed again (its history on the host restarts). */
static void
event_apply_shares(struct tem_core *core, struct tem_event *e,
                   const double *shares, uint64_t now)
{
    double eps = 1e-9 * MAX(fabs(e->threshold), 1);
    for (size_t i = 0; i < e->n_members; i++) {
        struct tem_member *m = &e->members[i];
        if (m->is_new) {
            m->share = shares[i];
            member_install(core, e, m, now);
        } else if (fabs(m->share - shares[i]) > eps) {
            m->share = shares[i];
            member_remove(core, e, m);
            member_install(core, e, m, now);
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
static void
event_reconcile(struct tem_core *core, struct tem_event *e, uint64_t now)
{
    size_t n = 0;
    bool joined = false;

    for (size_t i = 0; i < e->n_members; i++) {
        struct tem_member *m = &e->members[i];
        struct tem_host *h = core->hosts[m->host_slot];
        if (h->session == m->session && event_wanted(e, h, now)) {
            e->member_of[m->host_slot] = (int32_t) n;
            e->members[n++] = *m;
        } else {
            e->member_of[m->host_slot] = -1;
            member_remove(core, e, m);
            free(m->reason);
        }
    }
    e->n_members = n;

    for (uint32_t s = 0; s < core->n_host_slots; s++) {
        struct tem_host *h = core->hosts[s];
        if (!h || e->member_of[s] >= 0 || !event_wanted(e, h, now)) {
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
    event_index_members(e);

    if (e->split) {
        if (joined) {
            double *shares = xcalloc(e->n_members, sizeof *shares);
            event_shares(core, e, shares);
            event_apply_shares(core, e, shares, now);
            free(shares);
        }
    } else {
        for (size_t i = 0; i < e->n_members; i++) {
            if (e->members[i].is_new) {
                member_install(core, e, &e->members[i], now);
                e->members[i].is_new = false;
            }
        }
    }
}

static void
reconcile_all(struct tem_core *core, uint64_t now)
{
    for (size_t i = 0; i < core->n_events; i++) {
        event_reconcile(core, core->events[i], now);
    }
}

/* Re-splits 'e''s threshold if some member's share would move by more
 * than --rebalance-change. */
static void
event_rebalance(struct tem_core *core, struct tem_event *e, uint64_t now)
{
    if (!e->split || e->n_members < 1) {
        return;
    }
    double *shares = xcalloc(e->n_members, sizeof *shares);
    bool moved = false;
    event_shares(core, e, shares);
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
        event_apply_shares(core, e, shares, now);
    }
    free(shares);
}

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

static void
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

static void
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

static void decide(struct tem_core *, struct tem_decision *, bool deadline);

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
static void
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

/* ---------------------------------------------------------------------- */
/* Alerts and drill-down. */

static bool
compare_holds(const struct tem_event *e, double v)
{
    const struct tpm_expr *p = e->ev->pred;
    return tpm_compare(p->op, v, e->threshold);
}

/* Returns true if part 'p' holds on its own against the full predicate:
 * it reported a satisfaction, or the predicate is "V cmp constant" and
 * its value satisfies the comparison. */
static bool
part_holds(const struct tem_event *e, const struct tem_part *p)
{
    return p->state == TEM_PART_VALUE
           && ((p->flags & PART_SATISFIED)
               || (e->has_threshold && compare_holds(e, p->value)));
}

/* Upper bounds of the detection latency histogram's buckets, seconds:
 * around the poll deadline (100 ms by default) and epochs (10 ms). */
static const double latency_bounds[TEM_LATENCY_BUCKETS] = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
};

static void
latency_observe(struct tem_core *core, double secs)
{
    size_t i = 0;
    while (i < TEM_LATENCY_BUCKETS && secs > latency_bounds[i]) {
        i++;
    }
    core->latency_counts[i]++;
    core->latency_sum_s += secs;
}

/* Appends '"s"'. */
static void
sbuf_quoted(struct sbuf *b, const char *s)
{
    sbuf_put(b, "\"", 1);
    sbuf_str(b, s);
    sbuf_put(b, "\"", 1);
}

static void
sbuf_int(struct sbuf *b, int64_t v)
{
    char buf[24], *p = buf + sizeof buf;
    uint64_t u = v < 0 ? -(uint64_t) v : (uint64_t) v;
    do {
        *--p = '0' + u % 10;
        u /= 10;
    } while (u);
    if (v < 0) {
        *--p = '-';
    }
    sbuf_put(b, p, buf + sizeof buf - p);
}

/* Appends 'v' by the one JSON number rule (tpm_json_number()). */
static void
sbuf_number(struct sbuf *b, double v)
{
    char buf[TPM_JSON_NUMBER_LEN];
    sbuf_str(b, tpm_json_number(v, buf));
}

/* Appends '"key":'. */
static void
sbuf_key(struct sbuf *b, const char *key)
{
    sbuf_quoted(b, key);
    sbuf_put(b, ":", 1);
}

/* Appends time 'ns' as "2026-11-22T05:21:15.496845Z" (the formatted
 * second is cached). */
static void
sbuf_time(struct tem_core *core, struct sbuf *b, uint64_t ns)
{
    time_t secs = ns / NS_PER_S;
    if (secs != core->time_cache_secs || !core->time_cache[0]) {
        struct tm tm;
        gmtime_r(&secs, &tm);
        strftime(core->time_cache, sizeof core->time_cache,
                 "%Y-%m-%dT%H:%M:%S", &tm);
        core->time_cache_secs = secs;
    }
    char frac[16];
    snprintf(frac, sizeof frac, ".%06uZ",
             (unsigned int) (ns % NS_PER_S / 1000));
    sbuf_put(b, "\"", 1);
    sbuf_str(b, core->time_cache);
    sbuf_str(b, frac);
    sbuf_put(b, "\"", 1);
}

/* Appends the ids of the parts of 'd' for which 'pred' is true as a JSON
 * array. */
static void
sbuf_hosts(const struct tem_core *core, struct sbuf *b,
           const struct tem_event *e, const struct tem_decision *d,
           bool (*pred)(const struct tem_event *, const struct tem_part *))
{
    bool first = true;
    sbuf_put(b, "[", 1);
    for (uint32_t i = 0; i < d->n_parts; i++) {
        if (pred(e, &d->parts[i])) {
            if (!first) {
                sbuf_put(b, ",", 1);
            }
            first = false;
            sbuf_quoted(b, core->hosts[d->parts[i].host_slot]->id);
        }
    }
    sbuf_put(b, "]", 1);
}

static bool
part_missing(const struct tem_event *e, const struct tem_part *p)
{
    return p->state != TEM_PART_VALUE;
}

static bool
part_incomplete(const struct tem_event *e, const struct tem_part *p)
{
    return p->state == TEM_PART_VALUE && (p->flags & PART_INCOMPLETE);
}

/* Copies 'len' bytes of 's' into ring slot '*slot' (reusing its
 * memory). */
static void
ring_put(char **slot, const char *s, size_t len)
{
    *slot = xrealloc(*slot, len + 1);
    memcpy(*slot, s, len + 1);
}

static void
ring_advance(size_t cap, size_t *n, size_t *next)
{
    *next = (*next + 1) % cap;
    if (*n < cap) {
        (*n)++;
    }
}

static void drilldown(struct tem_core *, struct tem_event *,
                      const struct tem_decision *, uint64_t now);

static void
raise_alert(struct tem_core *core, struct tem_event *e,
            const struct tem_decision *d, double value, double threshold,
            bool has_threshold, bool deadline, uint64_t now)
{
    struct sbuf *b = &core->alert_buf;
    struct tpm_key_field fields[5];
    int n_fields = tpm_key_fields(&e->ev->group, &d->group, fields);
    bool first;

    b->len = 0;
    sbuf_put(b, "{", 1);
    sbuf_key(b, "event");
    sbuf_quoted(b, e->name);
    sbuf_str(b, ",\"id\":");
    sbuf_int(b, e->id);
    sbuf_str(b, ",\"epoch\":");
    sbuf_int(b, d->epoch);
    sbuf_str(b, ",\"interval_ns\":");
    sbuf_int(b, e->ev->interval_ns);
    sbuf_str(b, ",\"group\":{");
    for (int i = 0; i < n_fields; i++) {
        if (i) {
            sbuf_put(b, ",", 1);
        }
        sbuf_key(b, fields[i].name);
        if (fields[i].is_int) {
            sbuf_int(b, fields[i].int_value);
        } else {
            sbuf_quoted(b, fields[i].str_value);
        }
    }
    sbuf_str(b, "},\"value\":");
    sbuf_number(b, value);
    sbuf_str(b, ",\"threshold\":");
    if (has_threshold) {
        sbuf_number(b, threshold);
    } else {
        sbuf_str(b, "null");
    }
    sbuf_str(b, ",\"across\":");
    sbuf_quoted(b, across_names[e->across]);

    sbuf_str(b, ",\"hosts\":{");
    first = true;
    for (uint32_t i = 0; i < d->n_parts; i++) {
        const struct tem_part *p = &d->parts[i];
        if (p->state == TEM_PART_VALUE) {
            if (!first) {
                sbuf_put(b, ",", 1);
            }
            first = false;
            sbuf_key(b, core->hosts[p->host_slot]->id);
            sbuf_number(b, p->value);
        }
    }
    sbuf_str(b, "},\"missing\":");
    sbuf_hosts(core, b, e, d, part_missing);
    sbuf_str(b, ",\"incomplete\":");
    sbuf_hosts(core, b, e, d, part_incomplete);
    if (e->across == TEM_ACROSS_ATLEAST || e->across == TEM_ACROSS_MAX) {
        sbuf_str(b, ",\"holding\":");
        sbuf_hosts(core, b, e, d, part_holds);
    }
    if (e->across == TEM_ACROSS_ATLEAST) {
        sbuf_str(b, ",\"host_threshold\":");
        if (e->has_threshold) {
            sbuf_number(b, e->threshold);
        } else {
            sbuf_str(b, "null");
        }
    }
    sbuf_str(b, deadline ? ",\"deadline\":true" : ",\"deadline\":false");
    sbuf_str(b, ",\"latency_us\":");
    sbuf_int(b, (now - d->started_ns) / 1000);
    sbuf_str(b, ",\"time\":");
    sbuf_time(core, b, now);
    sbuf_str(b, ",\"time_ns\":");
    sbuf_int(b, now);
    sbuf_put(b, "}", 1);

    core->stats.alerts++;
    e->stats.alerts++;
    latency_observe(core, (now - d->started_ns) / 1e9);
    ring_put(&e->recent[e->recent_next], b->s, b->len);
    ring_advance(core->cfg.recent_alerts, &e->n_recent, &e->recent_next);
    ring_put(&core->history[core->history_next], b->s, b->len);
    snprintf(core->history_event[core->history_next],
             sizeof core->history_event[0], "%s", e->name);
    ring_advance(core->cfg.alert_history, &core->n_history,
                 &core->history_next);
    if (core->cfg.alert) {
        core->cfg.alert(core->cfg.aux, e->name, b->s);
    }

    if (e->then_name) {
        drilldown(core, e, d, now);
    }
}

/* Installs 'e''s then= event on the hosts that contributed to decision
 * 'd' (value > 0), for the then= duration. */
static void
drilldown(struct tem_core *core, struct tem_event *e,
          const struct tem_decision *d, uint64_t now)
{
    struct tem_event *t = event_by_name(core, e->then_name);
    if (!t || !t->standby) {
        core->stats.drilldown_errors++;
        tem_log_rl(core, &core->rl_drill, TPM_LOG_WARN,
                   "event %s: drill-down to '%s' impossible: %s", e->name,
                   e->then_name, t ? "it is not a standby event"
                                   : "no such event");
        return;
    }

    uint64_t until = now + e->then_ns;
    size_t n_new = 0, n = 0;
    for (uint32_t i = 0; i < d->n_parts; i++) {
        const struct tem_part *p = &d->parts[i];
        struct tem_host *h = core->hosts[p->host_slot];
        if (p->state != TEM_PART_VALUE || p->value <= 0
            || !host_connected(h) || h->session != p->session
            || !event_eligible(t, h)) {
            continue;
        }
        n++;
        if (t->drill_until[h->slot] <= now) {
            n_new++;
        }
        if (t->drill_until[h->slot] < until) {
            t->drill_until[h->slot] = until;
        }
    }
    if (!n) {
        return;
    }
    t->drill_next = t->drill_next && t->drill_next <= until
                    ? t->drill_next : until;
    t->stats.drilldowns++;
    core->stats.drilldowns++;
    if (n_new) {
        char dur[32];
        tpm_time_format(e->then_ns, dur, sizeof dur);
        tem_log_rl(core, &core->rl_drill, TPM_LOG_INFO,
                   "event %s alerted: drill-down installs %s on %zu more "
                   "host(s) for %s", e->name, t->name, n_new, dur);
        event_reconcile(core, t, now);
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

static void
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

static void
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

static void
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

/* ---------------------------------------------------------------------- */
/* DoS threshold. */

/* Returns true if the TEM sets a DoS threshold on 'h', in '*bytes'. */
static bool
host_dos_wanted(const struct tem_core *core, const struct tem_host *h,
                uint32_t *bytes)
{
    if (h->dos_own) {
        *bytes = h->dos_own_bytes;
        return true;
    } else if (core->dos_all) {
        *bytes = core->dos_all_bytes;
        return true;
    }
    return false;
}

/* Sends 'h' the DoS threshold the TEM wants on it, if any and if its
 * session speaks Configure; updates its state either way. */
static void
host_dos_send(struct tem_core *core, struct tem_host *h)
{
    uint32_t bytes;

    h->dos_reason[0] = '\0';
    if (!host_dos_wanted(core, h, &bytes)) {
        h->dos_state = TEM_DOS_NONE;
    } else if (!host_connected(h)) {
        h->dos_state = TEM_DOS_WAITING;
    } else if (h->version < TPROTO_VERSION_CONFIGURE) {
        h->dos_state = TEM_DOS_UNSUPPORTED;
        tem_log_rl(core, &core->rl_install, TPM_LOG_WARN, "host %s speaks "
                   "protocol version %"PRIu32": cannot set its DoS "
                   "threshold (Configure needs version %d)", h->id,
                   h->version, TPROTO_VERSION_CONFIGURE);
    } else {
        h->dos_state = TEM_DOS_PENDING;
        h->dos_sent = bytes;
        h->dos_cookie = core->next_cookie++;
        h->dos_session = h->session;
        tproto_add_configure(host_out(core, h, 24), h->dos_cookie, true,
                             bytes);
        core->stats.configures++;
    }
}

/* The answer of 'h' to Configure 'cookie': 'reason' NULL for an ack.
 * Returns false if it answers no Configure of this session. */
static bool
host_dos_answer(struct tem_core *core, struct tem_host *h, uint64_t cookie,
                const char *reason)
{
    if (h->dos_state != TEM_DOS_PENDING || h->dos_cookie != cookie
        || h->dos_session != h->session) {
        return false;
    }
    if (reason) {
        h->dos_state = TEM_DOS_NACKED;
        snprintf(h->dos_reason, sizeof h->dos_reason, "%s", reason);
        tem_log_rl(core, &core->rl_install, TPM_LOG_WARN, "host %s refused "
                   "DoS threshold %"PRIu32": %s", h->id, h->dos_sent,
                   reason);
    } else {
        h->dos_state = TEM_DOS_ACKED;
    }
    return true;
}

char *
tem_core_set_dos_threshold(struct tem_core *core, const char *host,
                           uint32_t bytes, struct json_object **resultp)
{
    struct tem_host *only = NULL;

    *resultp = NULL;
    if (host) {
        only = host_by_id(core, host);
        if (!only) {
            return xasprintf("no host '%s' (tem-ctl hosts lists them)",
                             host);
        }
        if (host_connected(only)
            && only->version < TPROTO_VERSION_CONFIGURE) {
            return xasprintf("host %s speaks protocol version %"PRIu32": "
                             "it cannot take a DoS threshold from the TEM "
                             "(Configure needs version %d); set it on the "
                             "host", host, only->version,
                             TPROTO_VERSION_CONFIGURE);
        }
        only->dos_own = true;
        only->dos_own_bytes = bytes;
    } else {
        /* Every host, those to come too; the last word wins over values
         * set for single hosts. */
        core->dos_all = true;
        core->dos_all_bytes = bytes;
    }

    struct json_object *a = json_object_new_array();
    for (uint32_t i = 0; i < core->n_host_slots; i++) {
        struct tem_host *h = core->hosts[i];
        if (!h || h->state == TEM_HOST_FREE || (only && h != only)) {
            continue;
        }
        h->dos_own = only != NULL;
        host_dos_send(core, h);

        struct json_object *o = json_object_new_object();
        json_object_object_add(o, "host", json_object_new_string(h->id));
        json_object_object_add(o, "state", json_object_new_string(
                                   dos_state_names[h->dos_state]));
        json_object_object_add(o, "version",
                               json_object_new_int64(h->version));
        json_object_array_add(a, o);
    }
    tem_log_rl(core, &core->rl_misc, TPM_LOG_INFO, "DoS threshold %"PRIu32
               " bytes for %s%s", bytes, only ? "host " : "all hosts",
               only ? only->id : "");

    struct json_object *r = json_object_new_object();
    json_object_object_add(r, "host", only ? json_object_new_string(host)
                                           : NULL);
    json_object_object_add(r, "dos_threshold", json_object_new_int64(bytes));
    json_object_object_add(r, "hosts", a);
    *resultp = r;
    return NULL;
}

/* ---------------------------------------------------------------------- */
/* Sessions. */

/* Ends 'h''s session; the caller reconciles the events. */
static void
host_gone__(struct tem_core *core, struct tem_host *h, const char *reason,
            uint64_t now)
{
    tem_log_rl(core, &core->rl_session, TPM_LOG_INFO, "host %s gone: %s",
               h->id, reason);
    decisions_host_gone(core, h);
    peer_remove(core, h);
    tproto_batch_clear(&h->out);
    h->out_bytes = 0;
    h->state = TEM_HOST_GONE;
    h->gone_ns = now;
    if (h->dos_state != TEM_DOS_NONE) {
        /* Sent again when it is back. */
        h->dos_state = TEM_DOS_WAITING;
    }
    snprintf(h->gone_reason, sizeof h->gone_reason, "%s", reason);
    core->stats.hosts_gone++;
}

static void
host_gone(struct tem_core *core, struct tem_host *h, const char *reason)
{
    if (h->state == TEM_HOST_CONNECTED) {
        uint64_t now = now__(core);
        host_gone__(core, h, reason, now);
        reconcile_all(core, now);
    }
}

void
tem_core_bye_all(struct tem_core *core, const char *reason)
{
    for (uint32_t i = 0; i < core->n_host_slots; i++) {
        struct tem_host *h = core->hosts[i];
        if (host_connected(h)) {
            tproto_batch_clear(&h->out);
            tproto_add_bye(&h->out, reason);
            send_batch(core, h->peer, h->peer_len, h->version, &h->out,
                       &h->stats);
            host_gone__(core, h, reason, now__(core));
        }
    }
    reconcile_all(core, now__(core));
}

void
tem_core_peer_revoke(struct tem_core *core, const void *peer,
                     size_t peer_len, const char *reason)
{
    struct tem_host *h = host_by_peer(core, peer, peer_len);

    if (host_connected(h)) {
        core->stats.revoked++;
        send_bye(core, h->peer, h->peer_len, reason);
        host_gone(core, h, reason);
    }
}

/* Returns a slot for a new host: a never used one, else the one gone the
 * longest ago; NULL if every host is connected. */
static struct tem_host *
host_alloc(struct tem_core *core)
{
    struct tem_host *h = NULL;

    if (core->n_host_slots < core->cfg.max_hosts) {
        h = xzalloc(sizeof *h);
        h->slot = core->n_host_slots;
        tproto_batch_init(&h->out);
        core->hosts[core->n_host_slots++] = h;
        return h;
    }
    for (uint32_t i = 0; i < core->n_host_slots; i++) {
        struct tem_host *g = core->hosts[i];
        if (g->state != TEM_HOST_CONNECTED
            && (!h || g->gone_ns < h->gone_ns)) {
            h = g;
        }
    }
    if (h) {
        /* Forget the old host's drill-downs and counters. */
        for (size_t i = 0; i < core->n_events; i++) {
            if (core->events[i]->drill_until) {
                core->events[i]->drill_until[h->slot] = 0;
            }
        }
        free(h->prefixes);
        free(h->software);
        uint32_t slot = h->slot;
        struct tproto_batch out = h->out;
        memset(h, 0, sizeof *h);
        h->slot = slot;
        h->out = out;
    }
    return h;
}

static void
handle_hello(struct tem_core *core, const void *peer, size_t peer_len,
             const char *auth_id, struct tem_host *cur,
             const Trumpet__Hello *hello)
{
    uint32_t version = tproto_version_choose(hello->version_min,
                                             hello->version_max);
    char reason[256];

    core->stats.hellos++;
    if (auth_id && strcmp(auth_id, hello->host_id)) {
        /* Checked first: a host never disturbs another's session. */
        core->stats.auth_mismatch++;
        snprintf(reason, sizeof reason, "host id '%s' is not the one "
                 "bound to this connection's key ('%s', the TEM's "
                 "allow-list)", hello->host_id, auth_id);
        goto refuse;
    }
    if (!version) {
        snprintf(reason, sizeof reason, "no common protocol version: host "
                 "%s speaks versions %"PRIu32"..%"PRIu32", the TEM speaks "
                 "%d..%d", hello->host_id, hello->version_min,
                 hello->version_max, TPROTO_VERSION_MIN, TPROTO_VERSION_MAX);
        goto refuse;
    }
    if (hello->epoch_ns != core->cfg.epoch_ns) {
        char a[32], b[32];
        tpm_time_format(hello->epoch_ns, a, sizeof a);
        tpm_time_format(core->cfg.epoch_ns, b, sizeof b);
        snprintf(reason, sizeof reason, "epoch mismatch: host %s uses "
                 "epochs of %s, the TEM of %s (its --epoch)",
                 hello->host_id, a, b);
        goto refuse;
    }

    /* A new Hello on a live session restarts it. */
    if (cur) {
        host_gone(core, cur, "new Hello on the same connection");
    }
    struct tem_host *h = host_by_id(core, hello->host_id);
    if (h && h->state == TEM_HOST_CONNECTED) {
        core->stats.replaced++;
        send_bye(core, h->peer, h->peer_len, "replaced by a new session of "
                 "the same host id");
        host_gone(core, h, "replaced by a new session from another peer");
    }
    if (!h) {
        h = host_alloc(core);
        if (!h) {
            snprintf(reason, sizeof reason, "too many hosts: %"PRIu32" "
                     "connected (the TEM's --max-hosts)",
                     core->cfg.max_hosts);
            goto refuse;
        }
    }

    uint64_t now = now__(core);
    snprintf(h->id, sizeof h->id, "%s", hello->host_id);
    memcpy(h->peer, peer, peer_len);
    h->peer_len = peer_len;
    free(h->prefixes);
    h->n_prefixes = hello->n_prefixes;
    h->prefixes = xcalloc(h->n_prefixes, sizeof *h->prefixes);
    for (size_t i = 0; i < h->n_prefixes; i++) {
        tproto_prefix_from_msg(hello->prefixes[i], &h->prefixes[i]);
    }
    free(h->software);
    h->software = hello->software ? xstrdup(hello->software) : NULL;
    h->n_pmds = hello->n_pmd_ids;
    h->version = version;
    h->state = TEM_HOST_CONNECTED;
    h->session = ++core->session_seq;
    h->connected_ns = h->last_rx_ns = h->last_hb_tx_ns = now;
    h->gone_reason[0] = '\0';
    h->stats.sessions++;
    peer_insert(core, h);
    core->stats.sessions++;

    tproto_add_welcome(host_out(core, h, 64 + strlen(core->cfg.tem_id)),
                       version, core->cfg.tem_id, now,
                       core->cfg.heartbeat_ms);
    tem_log_rl(core, &core->rl_session, TPM_LOG_INFO,
               "host %s connected (protocol version %"PRIu32", %zu "
               "prefixes, %"PRIu32" monitors%s%s)", h->id, version,
               h->n_prefixes, h->n_pmds, h->software ? ", " : "",
               h->software ? h->software : "");
    /* The host may have restarted: its DoS threshold again, before its
     * triggers. */
    host_dos_send(core, h);
    reconcile_all(core, now);
    return;

refuse:
    core->stats.refused++;
    tem_log_rl(core, &core->rl_session, TPM_LOG_WARN, "refusing host: %s",
               reason);
    send_refuse(core, peer, peer_len, reason);
}

static void
handle_ack(struct tem_core *core, struct tem_host *h, uint64_t cookie,
           uint32_t event_id, const char *reason)
{
    struct tem_event *e = event_by_id(core, event_id);
    int32_t idx = e ? e->member_of[h->slot] : -1;

    if (reason) {
        core->stats.nacks++;
        h->stats.nacks++;
    } else {
        core->stats.acks++;
        h->stats.acks++;
    }
    if (!event_id) {
        /* The answer to a Configure. */
        if (!host_dos_answer(core, h, cookie, reason) && reason) {
            tem_log_rl(core, &core->rl_install, TPM_LOG_WARN,
                       "host %s refused configure %"PRIu64" (since "
                       "superseded): %s", h->id, cookie, reason);
        }
        return;
    }
    if (idx < 0 || e->members[idx].cookie != cookie
        || e->members[idx].session != h->session) {
        /* The ack of a Remove, or of an Install since replaced. */
        if (reason) {
            tem_log_rl(core, &core->rl_install, TPM_LOG_WARN,
                       "host %s refused command %"PRIu64" for event id "
                       "%"PRIu32": %s", h->id, cookie, event_id, reason);
        }
        return;
    }
    struct tem_member *m = &e->members[idx];
    if (reason) {
        m->state = TEM_INSTALL_NACKED;
        free(m->reason);
        m->reason = xstrdup(reason);
        e->stats.nacks++;
        tem_log_rl(core, &core->rl_install, TPM_LOG_WARN,
                   "host %s refused to install event %s: %s", h->id,
                   e->name, reason);
    } else {
        m->state = TEM_INSTALL_ACKED;
    }
}

static void
handle_message(struct tem_core *core, struct tem_host *h,
               const Trumpet__Message *msg)
{
    switch (msg->body_case) {
    case TRUMPET__MESSAGE__BODY_SATISFACTION:
        handle_satisfaction(core, h, msg->satisfaction);
        break;
    case TRUMPET__MESSAGE__BODY_POLL_REPLY:
        handle_poll_reply(core, h, msg->poll_reply);
        break;
    case TRUMPET__MESSAGE__BODY_HEARTBEAT: {
        const Trumpet__HostCounters *c = msg->heartbeat->counters;
        h->stats.heartbeats++;
        if (c) {
#define MON(FIELD) if (c->has_##FIELD) { h->stats.mon_##FIELD = c->FIELD; }
            MON(packets) MON(bytes) MON(sweeps) MON(sweeps_unfinished)
            MON(reports) MON(reports_dropped) MON(dos_skipped)
            MON(dos_passed)
#undef MON
        }
        break;
    }
    case TRUMPET__MESSAGE__BODY_ACK:
        handle_ack(core, h, msg->ack->cookie, msg->ack->event_id, NULL);
        break;
    case TRUMPET__MESSAGE__BODY_NACK:
        handle_ack(core, h, msg->nack->cookie, msg->nack->event_id,
                   msg->nack->reason);
        break;
    case TRUMPET__MESSAGE__BODY_BYE: {
        char reason[160];
        snprintf(reason, sizeof reason, "said Bye (%s)",
                 msg->bye->reason ? msg->bye->reason : "no reason");
        host_gone(core, h, reason);
        break;
    }
    case TRUMPET__MESSAGE__BODY_HELLO:
    case TRUMPET__MESSAGE__BODY_WELCOME:
    case TRUMPET__MESSAGE__BODY_REFUSE:
    case TRUMPET__MESSAGE__BODY_INSTALL:
    case TRUMPET__MESSAGE__BODY_REMOVE:
    case TRUMPET__MESSAGE__BODY_POLL:
    case TRUMPET__MESSAGE__BODY_CONFIGURE:
    case TRUMPET__MESSAGE__BODY__NOT_SET:
    case _TRUMPET__MESSAGE__BODY__CASE_IS_INT_SIZE:
    default:
        /* TEM -> host messages coming back: invalid here. */
        core->stats.invalid_msgs++;
        h->stats.invalid_msgs++;
        break;
    }
}

/* Formats who sent a frame, for logs: the session's host id, the id its
 * key is bound to, and the ZeroMQ peer id in hex. */
static void
peer_name(const struct tem_host *h, const char *auth_id, const void *peer,
          size_t peer_len, char *buf, size_t size)
{
    const uint8_t *p = peer;
    size_t n = snprintf(buf, size, "peer 0x");

    for (size_t i = 0; i < peer_len && i < 16 && n + 3 < size; i++) {
        n += snprintf(buf + n, size - n, "%02x", p[i]);
    }
    if (h && n < size) {
        n += snprintf(buf + n, size - n, " (host %s)", h->id);
    }
    if (auth_id && n < size) {
        snprintf(buf + n, size - n, " (key of %s)", auth_id);
    }
}

void
tem_core_input(struct tem_core *core, const void *peer, size_t peer_len,
               const void *data, size_t len)
{
    tem_core_input_auth(core, peer, peer_len, NULL, data, len);
}

void
tem_core_input_auth(struct tem_core *core, const void *peer, size_t peer_len,
                    const char *auth_id, const void *data, size_t len)
{
    struct tem_host *h = host_by_peer(core, peer, peer_len);
    const char *why;
    Trumpet__Frame *frame;
    char who[160];

    core->stats.frames_in++;
    if (h) {
        h->stats.frames_in++;
    }
    if (!peer_len || peer_len > sizeof h->peer) {
        core->stats.invalid_frames++;
        return;
    }
    if (h && auth_id && strcmp(h->id, auth_id)) {
        /* The session's host id is not the key's: never act on it. */
        core->stats.auth_mismatch++;
        h->stats.invalid_frames++;
        peer_name(h, auth_id, peer, peer_len, who, sizeof who);
        tem_log_rl(core, &core->rl_input, TPM_LOG_WARN, "frame from %s "
                   "dropped: its key is bound to host id %s", who, auth_id);
        return;
    }
    frame = tproto_decode(data, len, &why);
    if (!frame) {
        core->stats.invalid_frames++;
        if (h) {
            h->stats.invalid_frames++;
        } else {
            core->stats.unknown_peer++;
        }
        peer_name(h, auth_id, peer, peer_len, who, sizeof who);
        tem_log_rl(core, &core->rl_input, TPM_LOG_WARN, "invalid frame "
                   "(%zu bytes) from %s: %s", len, who, why);
        return;
    }

    bool session_only = !tproto_version_supported(frame->version);
    bool said_bye = false;
    for (size_t i = 0; i < frame->n_messages; i++) {
        const Trumpet__Message *msg = frame->messages[i];
        const char *invalid = tproto_validate(msg);

        core->stats.msgs_in++;
        if (h) {
            h->stats.msgs_in++;
        }
        if (invalid) {
            core->stats.invalid_msgs++;
            if (h) {
                h->stats.invalid_msgs++;
            }
            peer_name(h, auth_id, peer, peer_len, who, sizeof who);
            tem_log_rl(core, &core->rl_input, TPM_LOG_WARN, "invalid "
                       "message from %s: %s", who, invalid);
            continue;
        }
        if (msg->body_case == TRUMPET__MESSAGE__BODY_HELLO) {
            handle_hello(core, peer, peer_len, auth_id, h, msg->hello);
            h = host_by_peer(core, peer, peer_len);
            said_bye = true;    /* Refused: the Refuse says it all. */
        } else if (!h) {
            /* Not in session: ask for Hello (but never answer a Bye or
             * Refuse). */
            core->stats.unknown_peer++;
            if (!said_bye && msg->body_case != TRUMPET__MESSAGE__BODY_BYE
                && msg->body_case != TRUMPET__MESSAGE__BODY_REFUSE) {
                send_bye(core, peer, peer_len, "unknown session");
                said_bye = true;
            }
        } else if (session_only) {
            if (msg->body_case == TRUMPET__MESSAGE__BODY_BYE) {
                handle_message(core, h, msg);
            }
        } else {
            h->last_rx_ns = now__(core);
            handle_message(core, h, msg);
        }
        if (h && h->state != TEM_HOST_CONNECTED) {
            h = NULL;
        }
    }
    tproto_free(frame);
}

/* ---------------------------------------------------------------------- */
/* Timers. */

static void
housekeeping(struct tem_core *core, uint64_t now)
{
    uint64_t hb_ns = core->cfg.heartbeat_ms * NS_PER_MS;
    uint64_t next = now + MAX(hb_ns / 2, NS_PER_MS);

    for (uint32_t i = 0; i < core->n_host_slots; i++) {
        struct tem_host *h = core->hosts[i];
        if (!host_connected(h)) {
            continue;
        }
        if (now - h->last_rx_ns >= TEM_HEARTBEAT_MISSES * hb_ns) {
            host_gone(core, h, "no message for 3 heartbeat periods");
            continue;
        }
        if (now - h->last_hb_tx_ns >= hb_ns) {
            tproto_add_heartbeat(host_out(core, h, 24), now, ++h->hb_seq);
            h->last_hb_tx_ns = now;
        }
        next = MIN(next, h->last_hb_tx_ns + hb_ns);
        next = MIN(next, h->last_rx_ns + TEM_HEARTBEAT_MISSES * hb_ns);
    }

    for (size_t i = 0; i < core->n_events; i++) {
        struct tem_event *e = core->events[i];
        if (e->standby && e->drill_next && e->drill_next <= now) {
            uint64_t earliest = 0;
            event_reconcile(core, e, now);
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
                    event_rebalance(core, e, now);
                }
                e->next_rebalance_ns = now + core->cfg.rebalance_ns;
            }
            next = MIN(next, e->next_rebalance_ns);
        }
    }
    core->next_hk_ns = next;
}

uint64_t
tem_core_run(struct tem_core *core)
{
    uint64_t now = now__(core);

    while (core->rp_count) {
        struct repoll *r = &core->repolls[core->rp_head];
        if (r->due_ns > now) {
            break;
        }
        struct tem_decision *d = core->dslots[r->slot];
        if (d->in_use && !d->decided && d->gen == r->gen
            && r->part < d->n_parts
            && d->parts[r->part].state == TEM_PART_WAITING
            && host_connected(core->hosts[d->parts[r->part].host_slot])) {
            send_poll(core, d, r->part);
            core->stats.repolls++;
        }
        core->rp_head = (core->rp_head + 1) % core->rp_cap;
        core->rp_count--;
    }

    while (!list_empty(&core->pending)) {
        struct tem_decision *d = CONTAINER_OF(core->pending.next,
                                              struct tem_decision, node);
        if (d->deadline_ns > now) {
            break;
        }
        for (uint32_t i = 0; i < d->n_parts; i++) {
            if (d->parts[i].state == TEM_PART_WAITING) {
                d->parts[i].state = TEM_PART_MISSING;
            }
        }
        d->n_waiting = 0;
        decide(core, d, true);
    }

    while (!list_empty(&core->decided)) {
        struct tem_decision *d = CONTAINER_OF(core->decided.next,
                                              struct tem_decision, node);
        if (d->expires_ns > now) {
            break;
        }
        decision_free(core, d);
    }

    if (now >= core->next_hk_ns) {
        housekeeping(core, now);
    }

    uint64_t next = core->next_hk_ns;
    if (core->rp_count) {
        next = MIN(next, core->repolls[core->rp_head].due_ns);
    }
    if (!list_empty(&core->pending)) {
        next = MIN(next, CONTAINER_OF(core->pending.next,
                                      struct tem_decision,
                                      node)->deadline_ns);
    }
    if (!list_empty(&core->decided)) {
        next = MIN(next, CONTAINER_OF(core->decided.next,
                                      struct tem_decision,
                                      node)->expires_ns);
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
collapse_space(const char *s)
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
parse_net_clauses(const struct tem_core *core, struct tem_event *e,
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
                             across_names[e->across]);
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
event_filter_prefixes(struct tem_event *e)
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

static void
event_free(struct tem_event *e)
{
    if (!e) {
        return;
    }
    for (size_t i = 0; i < e->n_members; i++) {
        free(e->members[i].reason);
    }
    for (size_t i = 0; e->recent && i < e->n_recent; i++) {
        free(e->recent[i]);
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
event_parse(const struct tem_core *core, const char *name,
            const char *definition, struct tem_event **ep)
{
    struct tpm_event_ext x = { .n = N_NET_CLAUSES,
                               .names = net_clause_names };
    struct tem_event *e = xzalloc(sizeof *e);

    *ep = NULL;
    e->name = xstrdup(name);
    e->definition = collapse_space(definition);
    char *error = tpm_event_parse_ext(name, definition, &x, &e->ev);
    if (!error) {
        error = parse_net_clauses(core, e, &x);
    }
    if (!error) {
        e->local_def = collapse_space(x.local);
        if (strlen(e->local_def) > TPROTO_MAX_DEFINITION) {
            error = xasprintf("definition: longer than %d characters",
                              TPROTO_MAX_DEFINITION);
        }
    }
    tpm_event_ext_clear(&x);
    if (error) {
        event_free(e);
        return error;
    }
    event_filter_prefixes(e);
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
    if (event_by_name(core, name)) {
        return xasprintf("event '%s' already exists (event-del it first)",
                         name);
    }
    if (core->n_events >= core->cfg.max_events) {
        return xasprintf("too many events: %zu defined (the TEM's "
                         "--max-events)", core->n_events);
    }
    if (id && event_by_id(core, id)) {
        return xasprintf("event id %"PRIu32" is used twice", id);
    }
    if (!id && core->next_id > TEM_MAX_EVENT_ID) {
        return xasprintf("no event id left: ids are never reused and %"
                         PRIu32" was given (renumber the events in the "
                         "state file with the TEM stopped: docs/tem.md)",
                         (uint32_t) TEM_MAX_EVENT_ID);
    }
    error = event_parse(core, name, definition, &e);
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
    core->events_version++;
    tem_log_rl(core, &core->rl_misc, TPM_LOG_INFO, "event %s (id %"PRIu32") "
               "defined: %s", e->name, e->id, e->definition);
    event_reconcile(core, e, now__(core));
    core->next_hk_ns = 0;
    return NULL;
}

static void
event_delete(struct tem_core *core, struct tem_event *e)
{
    for (size_t i = 0; i < e->n_members; i++) {
        member_remove(core, e, &e->members[i]);
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
    core->events_version++;
    event_free(e);
}

char *
tem_core_event_del(struct tem_core *core, const char *name)
{
    struct tem_event *e = event_by_name(core, name);
    if (!e) {
        return xasprintf("no event '%s'", name);
    }
    tem_log_rl(core, &core->rl_misc, TPM_LOG_INFO, "event %s (id %"PRIu32") "
               "deleted", e->name, e->id);
    event_delete(core, e);
    return NULL;
}

void
tem_core_event_clear(struct tem_core *core)
{
    while (core->n_events) {
        event_delete(core, core->events[core->n_events - 1]);
    }
}

size_t
tem_core_n_events(const struct tem_core *core)
{
    return core->n_events;
}

uint64_t
tem_core_events_version(const struct tem_core *core)
{
    return core->events_version;
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

/* ---------------------------------------------------------------------- */
/* Views. */

static struct json_object *
prefixes_json(const struct tpm_prefix *p, size_t n)
{
    struct json_object *a = json_object_new_array();
    for (size_t i = 0; i < n; i++) {
        char buf[64];
        json_object_array_add(a, json_object_new_string(
                                  tpm_prefix_format(&p[i], buf, sizeof buf)));
    }
    return a;
}

static const char *
across_text(const struct tem_event *e, char *buf, size_t size)
{
    if (e->across == TEM_ACROSS_ATLEAST) {
        snprintf(buf, size, "atleast:%"PRIu32"%s", e->atleast_k,
                 e->atleast_pct ? "%" : "");
        return buf;
    }
    return across_names[e->across];
}

static size_t
count_state(const struct tem_event *e, enum tem_install_state s)
{
    size_t n = 0;
    for (size_t i = 0; i < e->n_members; i++) {
        n += e->members[i].state == s;
    }
    return n;
}

struct json_object *
tem_core_event_list_json(const struct tem_core *core)
{
    struct json_object *a = json_object_new_array();
    for (size_t i = 0; i < core->n_events; i++) {
        const struct tem_event *e = core->events[i];
        struct json_object *o = json_object_new_object();
        char buf[32];
        json_object_object_add(o, "id", json_object_new_int64(e->id));
        json_object_object_add(o, "name", json_object_new_string(e->name));
        json_object_object_add(o, "definition",
                               json_object_new_string(e->definition));
        json_object_object_add(o, "across", json_object_new_string(
                                   across_text(e, buf, sizeof buf)));
        json_object_object_add(o, "standby",
                               json_object_new_boolean(e->standby));
        json_object_object_add(o, "hosts",
                               json_object_new_int64(e->n_members));
        json_object_object_add(o, "acked", json_object_new_int64(
                                   count_state(e, TEM_INSTALL_ACKED)));
        json_object_object_add(o, "pending", json_object_new_int64(
                                   count_state(e, TEM_INSTALL_PENDING)));
        json_object_object_add(o, "nacked", json_object_new_int64(
                                   count_state(e, TEM_INSTALL_NACKED)));
        json_object_object_add(o, "alerts",
                               json_object_new_int64(e->stats.alerts));
        json_object_array_add(a, o);
    }
    struct json_object *r = json_object_new_object();
    json_object_object_add(r, "events", a);
    return r;
}

struct json_object *
tem_core_event_show_json(const struct tem_core *core, const char *name,
                         char **errp)
{
    const struct tem_event *e = event_by_name(core, name);
    uint64_t now = now__(core);
    char buf[64];

    if (!e) {
        *errp = xasprintf("no event '%s'", name);
        return NULL;
    }
    *errp = NULL;

    struct json_object *o = json_object_new_object();
    json_object_object_add(o, "id", json_object_new_int64(e->id));
    json_object_object_add(o, "name", json_object_new_string(e->name));
    json_object_object_add(o, "definition",
                           json_object_new_string(e->definition));
    json_object_object_add(o, "local_definition",
                           json_object_new_string(e->local_def));
    json_object_object_add(o, "scope", e->scope_all
                           ? json_object_new_string("all")
                           : prefixes_json(e->scope, e->n_scope));
    json_object_object_add(o, "filter_prefixes",
                           prefixes_json(e->addr, e->n_addr));
    json_object_object_add(o, "across", json_object_new_string(
                               across_text(e, buf, sizeof buf)));
    json_object_object_add(o, "split", e->split
                           ? json_object_new_string(e->weighted ? "weighted"
                                                    : "equal")
                           : NULL);
    json_object_object_add(o, "threshold", e->has_threshold
                           ? tpm_number_to_json(e->threshold) : NULL);
    json_object_object_add(o, "interval_ns",
                           json_object_new_int64(e->ev->interval_ns));
    json_object_object_add(o, "standby", json_object_new_boolean(e->standby));
    if (e->then_name) {
        struct json_object *t = json_object_new_object();
        json_object_object_add(t, "event",
                               json_object_new_string(e->then_name));
        json_object_object_add(t, "duration_ns",
                               json_object_new_int64(e->then_ns));
        json_object_object_add(o, "then", t);
    } else {
        json_object_object_add(o, "then", NULL);
    }

    struct json_object *hosts = json_object_new_array();
    for (size_t i = 0; i < e->n_members; i++) {
        const struct tem_member *m = &e->members[i];
        struct json_object *h = json_object_new_object();
        json_object_object_add(h, "host", json_object_new_string(
                                   core->hosts[m->host_slot]->id));
        json_object_object_add(h, "state",
                               json_object_new_string(
                                   install_names[m->state]));
        if (m->reason) {
            json_object_object_add(h, "reason",
                                   json_object_new_string(m->reason));
        }
        if (e->split) {
            json_object_object_add(h, "share", tpm_number_to_json(m->share));
        }
        json_object_object_add(h, "history", m->has_ewma
                               ? json_object_new_double(m->ewma) : NULL);
        if (e->standby) {
            uint64_t u = e->drill_until[m->host_slot];
            json_object_object_add(h, "drilldown_remaining_ms",
                                   json_object_new_int64(
                                       u > now ? (u - now) / NS_PER_MS : 0));
        }
        json_object_array_add(hosts, h);
    }
    json_object_object_add(o, "hosts", hosts);

    struct json_object *st = json_object_new_object();
#define STAT(NAME) \
    json_object_object_add(st, #NAME, json_object_new_int64(e->stats.NAME))
    STAT(satisfactions);
    STAT(decisions);
    STAT(alerts);
    STAT(decided_deadline);
    STAT(late);
    STAT(dropped);
    STAT(nacks);
    STAT(drilldowns);
    STAT(reinstalls);
#undef STAT
    json_object_object_add(o, "stats", st);

    struct json_object *recent = json_object_new_array();
    size_t cap = core->cfg.recent_alerts;
    for (size_t i = 0; i < e->n_recent; i++) {
        size_t k = (e->recent_next + cap - e->n_recent + i) % cap;
        json_object_array_add(recent, json_tokener_parse(e->recent[k]));
    }
    json_object_object_add(o, "recent_alerts", recent);
    return o;
}

static void
host_stats_json(struct json_object *o, const struct tem_host_stats *s)
{
#define STAT(NAME) \
    json_object_object_add(o, #NAME, json_object_new_int64(s->NAME))
    STAT(sessions);
    STAT(frames_in);
    STAT(msgs_in);
    STAT(invalid_frames);
    STAT(invalid_msgs);
    STAT(satisfactions);
    STAT(poll_replies);
    STAT(acks);
    STAT(nacks);
    STAT(heartbeats);
    STAT(frames_out);
    STAT(msgs_out);
    STAT(send_drops);
#undef STAT
}

struct json_object *
tem_core_hosts_json(const struct tem_core *core)
{
    struct json_object *a = json_object_new_array();
    uint64_t now = now__(core);

    for (uint32_t i = 0; i < core->n_host_slots; i++) {
        const struct tem_host *h = core->hosts[i];
        if (!h || h->state == TEM_HOST_FREE) {
            continue;
        }
        struct json_object *o = json_object_new_object();
        size_t n_events = 0;
        for (size_t k = 0; k < core->n_events; k++) {
            n_events += core->events[k]->member_of[h->slot] >= 0;
        }
        json_object_object_add(o, "host", json_object_new_string(h->id));
        json_object_object_add(o, "state", json_object_new_string(
                                   host_connected(h) ? "connected"
                                                     : "gone"));
        json_object_object_add(o, "prefixes",
                               prefixes_json(h->prefixes, h->n_prefixes));
        json_object_object_add(o, "version",
                               json_object_new_int64(h->version));
        json_object_object_add(o, "monitors",
                               json_object_new_int64(h->n_pmds));
        json_object_object_add(o, "software", h->software
                               ? json_object_new_string(h->software) : NULL);
        json_object_object_add(o, "last_rx_ms", json_object_new_int64(
                                   (now - h->last_rx_ns) / NS_PER_MS));
        json_object_object_add(o, "connected_s", json_object_new_int64(
                                   (now - h->connected_ns) / NS_PER_S));
        json_object_object_add(o, "events",
                               json_object_new_int64(n_events));
        if (!host_connected(h)) {
            json_object_object_add(o, "gone_reason",
                                   json_object_new_string(h->gone_reason));
            json_object_object_add(o, "gone_s", json_object_new_int64(
                                       (now - h->gone_ns) / NS_PER_S));
        }
        uint32_t dos;
        bool has_dos = host_dos_wanted(core, h, &dos);
        json_object_object_add(o, "dos_threshold", has_dos
                               ? json_object_new_int64(dos) : NULL);
        json_object_object_add(o, "dos_scope", !has_dos ? NULL
                               : json_object_new_string(h->dos_own ? "host"
                                                        : "all"));
        json_object_object_add(o, "dos_state", json_object_new_string(
                                   dos_state_names[h->dos_state]));
        if (h->dos_state == TEM_DOS_NACKED) {
            json_object_object_add(o, "dos_reason",
                                   json_object_new_string(h->dos_reason));
        }
        host_stats_json(o, &h->stats);
        json_object_array_add(a, o);
    }
    struct json_object *r = json_object_new_object();
    json_object_object_add(r, "hosts", a);
    return r;
}

void
tem_core_get_stats(const struct tem_core *core, struct tem_stats *s)
{
    *s = core->stats;
}

struct json_object *
tem_core_status_json(const struct tem_core *core)
{
    struct json_object *o = json_object_new_object();
    const struct tem_stats *s = &core->stats;
    uint64_t now = now__(core);
    size_t connected = 0, known = 0;

    for (uint32_t i = 0; i < core->n_host_slots; i++) {
        const struct tem_host *h = core->hosts[i];
        known += h && h->state != TEM_HOST_FREE;
        connected += host_connected(h);
    }
    json_object_object_add(o, "tem_id",
                           json_object_new_string(core->cfg.tem_id));
    json_object_object_add(o, "epoch_ns",
                           json_object_new_int64(core->cfg.epoch_ns));
    json_object_object_add(o, "heartbeat_ms",
                           json_object_new_int64(core->cfg.heartbeat_ms));
    json_object_object_add(o, "poll_deadline_ns",
                           json_object_new_int64(core->cfg.poll_deadline_ns));
    json_object_object_add(o, "uptime_s", json_object_new_int64(
                               (now - core->start_ns) / NS_PER_S));
    json_object_object_add(o, "hosts_connected",
                           json_object_new_int64(connected));
    json_object_object_add(o, "hosts_known", json_object_new_int64(known));
    json_object_object_add(o, "events",
                           json_object_new_int64(core->n_events));
    size_t n_decided = 0;
    for (const struct tem_list *l = core->decided.next; l != &core->decided;
         l = l->next) {
        n_decided++;
    }
    json_object_object_add(o, "decisions_pending", json_object_new_int64(
                               core->dh_count - n_decided));
    json_object_object_add(o, "decisions_kept",
                           json_object_new_int64(n_decided));
    json_object_object_add(o, "dos_threshold_all", core->dos_all
                           ? json_object_new_int64(core->dos_all_bytes)
                           : NULL);

    struct json_object *c = json_object_new_object();
#define STAT(NAME) \
    json_object_object_add(c, #NAME, json_object_new_int64(s->NAME))
    STAT(frames_in);
    STAT(msgs_in);
    STAT(invalid_frames);
    STAT(invalid_msgs);
    STAT(unknown_peer);
    STAT(auth_mismatch);
    STAT(revoked);
    STAT(hellos);
    STAT(sessions);
    STAT(refused);
    STAT(replaced);
    STAT(hosts_gone);
    STAT(satisfactions);
    STAT(sat_unknown);
    STAT(sat_late);
    STAT(polls_sent);
    STAT(poll_replies);
    STAT(repolls);
    STAT(replies_stale);
    STAT(decisions);
    STAT(decided_complete);
    STAT(decided_deadline);
    STAT(decisions_full);
    STAT(missing_parts);
    STAT(alerts);
    STAT(installs);
    STAT(removes);
    STAT(configures);
    STAT(acks);
    STAT(nacks);
    STAT(drilldowns);
    STAT(drilldown_errors);
    STAT(rebalances);
    STAT(frames_out);
    STAT(msgs_out);
    STAT(send_drops);
#undef STAT
    json_object_object_add(o, "counters", c);
    return o;
}

struct json_object *
tem_core_alerts_json(const struct tem_core *core, const char *event,
                     size_t n)
{
    struct json_object *a = json_object_new_array();
    size_t cap = core->cfg.alert_history;
    size_t *picked = xcalloc(core->n_history, sizeof *picked);
    size_t n_picked = 0;

    /* Newest first, then added oldest first. */
    for (size_t i = 0; i < core->n_history && n_picked < n; i++) {
        size_t k = (core->history_next + cap - 1 - i) % cap;
        if (!event || !strcmp(core->history_event[k], event)) {
            picked[n_picked++] = k;
        }
    }
    while (n_picked) {
        json_object_array_add(a, json_tokener_parse(
                                  core->history[picked[--n_picked]]));
    }
    free(picked);

    struct json_object *r = json_object_new_object();
    json_object_object_add(r, "alerts", a);
    return r;
}

/* ---------------------------------------------------------------------- */
/* Prometheus metrics. */

/* A counter of tem_stats or tem_host_stats: its offset there, its metric
 * name (without the prefix) and help. */
struct stat_metric {
    size_t offset;
    const char *name;
    const char *help;
};

#define SM(FIELD, NAME, HELP) \
    { offsetof(struct tem_stats, FIELD), NAME, HELP }
static const struct stat_metric stat_metrics[] = {
    SM(frames_in, "frames_received_total", "Frames received from hosts."),
    SM(msgs_in, "messages_received_total",
       "Protocol messages in the frames received from hosts."),
    SM(invalid_frames, "invalid_frames_total",
       "Frames from hosts that could not be decoded (or of a wrong "
       "protocol version)."),
    SM(invalid_msgs, "invalid_messages_total",
       "Messages from hosts that were invalid or not valid in their "
       "session's state."),
    SM(unknown_peer, "unknown_peer_frames_total",
       "Frames from a peer without a session."),
    SM(auth_mismatch, "auth_mismatches_total",
       "Hellos or frames for another host id than the one the peer's key "
       "is bound to (refused)."),
    SM(revoked, "sessions_revoked_total",
       "Sessions ended because their key is no longer allowed."),
    SM(hellos, "hellos_total", "Hello messages received."),
    SM(sessions, "sessions_total", "Host sessions opened (Welcome sent)."),
    SM(refused, "sessions_refused_total", "Hellos refused."),
    SM(replaced, "sessions_replaced_total",
       "Sessions replaced by a new Hello of the same host."),
    SM(hosts_gone, "hosts_gone_total",
       "Hosts that said Bye or stayed silent for 3 heartbeat periods."),
    SM(satisfactions, "satisfactions_total",
       "Satisfactions received from hosts."),
    SM(sat_unknown, "satisfactions_unknown_total",
       "Satisfactions for an event not defined or not installed on that "
       "host (dropped)."),
    SM(sat_late, "satisfactions_late_total",
       "Satisfactions for a key decided already."),
    SM(decisions_full, "satisfactions_dropped_total",
       "Satisfactions dropped: no room for a decision (--max-decisions)."),
    SM(polls_sent, "polls_sent_total", "Polls sent to hosts."),
    SM(poll_replies, "poll_replies_total", "Poll replies received."),
    SM(repolls, "repolls_total",
       "Polls sent again after a NOT_YET reply."),
    SM(replies_stale, "poll_replies_stale_total",
       "Poll replies for a decided or unknown decision."),
    SM(decisions, "decisions_total", "Decisions made."),
    SM(decided_complete, "decisions_complete_total",
       "Decisions made with every host's answer."),
    SM(decided_deadline, "decisions_deadline_total",
       "Decisions made at the poll deadline: some poll timed out."),
    SM(missing_parts, "poll_timeouts_total",
       "Hosts listed as missing in decisions (their poll timed out or "
       "they were gone)."),
    SM(alerts, "alerts_total", "Alerts raised."),
    SM(installs, "installs_total", "Install messages sent to hosts."),
    SM(removes, "removes_total", "Remove messages sent to hosts."),
    SM(acks, "acks_total", "Acks received from hosts."),
    SM(nacks, "nacks_total", "Nacks received from hosts."),
    SM(configures, "configures_total", "Configure messages sent to hosts."),
    SM(drilldowns, "drilldowns_total",
       "Standby events installed because of an alert (then=)."),
    SM(drilldown_errors, "drilldown_errors_total",
       "then= targets missing or not standby."),
    SM(rebalances, "rebalances_total", "Threshold re-splits."),
    SM(frames_out, "frames_sent_total", "Frames sent to hosts."),
    SM(msgs_out, "messages_sent_total", "Messages sent to hosts."),
    SM(send_drops, "send_drops_total",
       "Frames to hosts dropped (high-water mark reached)."),
};
#undef SM

/* The per-host counters (tem_host_stats). */
#define HM(FIELD, NAME, HELP) \
    { offsetof(struct tem_host_stats, FIELD), NAME, HELP }
static const struct stat_metric host_metrics[] = {
    HM(sessions, "host_sessions_total", "Sessions this host opened."),
    HM(frames_in, "host_frames_received_total",
       "Frames received from this host."),
    HM(invalid_frames, "host_invalid_frames_total",
       "Frames from this host that could not be decoded."),
    HM(invalid_msgs, "host_invalid_messages_total",
       "Invalid messages from this host."),
    HM(satisfactions, "host_satisfactions_total",
       "Satisfactions received from this host."),
    HM(poll_replies, "host_poll_replies_total",
       "Poll replies received from this host."),
    HM(nacks, "host_nacks_total", "Nacks received from this host."),
    HM(heartbeats, "host_heartbeats_total",
       "Heartbeats received from this host."),
    HM(frames_out, "host_frames_sent_total", "Frames sent to this host."),
    HM(send_drops, "host_send_drops_total",
       "Frames to this host dropped (high-water mark reached)."),
    /* The host's own counters, from its heartbeats (restart at 0 when the
     * host restarts). */
    HM(mon_packets, "host_monitor_packets_total",
       "Frames the host's monitors saw."),
    HM(mon_bytes, "host_monitor_bytes_total",
       "Bytes of the frames the host's monitors saw."),
    HM(mon_sweeps, "host_monitor_sweeps_total",
       "Sweeps the host's monitors completed."),
    HM(mon_sweeps_unfinished, "host_monitor_sweeps_unfinished_total",
       "Sweeps the host's monitors abandoned (values flagged partial)."),
    HM(mon_reports, "host_monitor_reports_total",
       "Satisfactions the host's monitors reported."),
    HM(mon_reports_dropped, "host_monitor_reports_dropped_total",
       "Satisfactions the host's monitors dropped (report ring full)."),
    HM(mon_dos_skipped, "host_monitor_dos_skipped_packets_total",
       "Packets of flows below the host's DoS threshold."),
    HM(mon_dos_passed, "host_monitor_dos_passed_flows_total",
       "Flows matched on passing the host's DoS threshold."),
};
#undef HM

static bool
host_known(const struct tem_host *h)
{
    return h && h->state != TEM_HOST_FREE;
}

void
tem_core_metrics(const struct tem_core *core, struct tem_metrics *m)
{
    uint64_t now = now__(core);
    size_t connected = 0, gone = 0;

    for (uint32_t i = 0; i < core->n_host_slots; i++) {
        const struct tem_host *h = core->hosts[i];
        connected += host_connected(h);
        gone += host_known(h) && !host_connected(h);
    }
    tem_metrics_gauge(m, "trumpet_tem_start_time_seconds",
                      "When the TEM started, seconds since the epoch.",
                      core->start_ns / 1e9);
    tem_metrics_family(m, "trumpet_tem_hosts", "gauge",
                       "Hosts known, by state: connected, or gone "
                       "(remembered after Bye or silence).");
    tem_metrics_sample(m, "trumpet_tem_hosts", "state", "connected",
                       connected);
    tem_metrics_sample(m, "trumpet_tem_hosts", "state", "gone", gone);
    tem_metrics_gauge(m, "trumpet_tem_events", "Events defined.",
                      core->n_events);
    size_t n_decided = 0;
    for (const struct tem_list *l = core->decided.next; l != &core->decided;
         l = l->next) {
        n_decided++;
    }
    tem_metrics_gauge(m, "trumpet_tem_decisions_pending",
                      "Decisions waiting for polls.",
                      core->dh_count - n_decided);

    for (size_t i = 0; i < ARRAY_SIZE(stat_metrics); i++) {
        const struct stat_metric *sm = &stat_metrics[i];
        char *name = xasprintf("trumpet_tem_%s", sm->name);
        const uint64_t *v = (const uint64_t *) (const void *)
                            ((const char *) &core->stats + sm->offset);
        tem_metrics_counter(m, name, sm->help, *v);
        free(name);
    }

    tem_metrics_family(m, "trumpet_tem_detection_latency_seconds",
                       "histogram", "Time from the first satisfaction of "
                       "a decision to its alert (an alert's latency_us).");
    tem_metrics_histogram(m, "trumpet_tem_detection_latency_seconds",
                          latency_bounds, core->latency_counts,
                          TEM_LATENCY_BUCKETS, core->latency_sum_s);

    /* Per event. */
    tem_metrics_family(m, "trumpet_tem_event_satisfactions_total",
                       "counter", "Satisfactions received, by event.");
    for (size_t i = 0; i < core->n_events; i++) {
        const struct tem_event *e = core->events[i];
        tem_metrics_sample(m, "trumpet_tem_event_satisfactions_total",
                           "event", e->name, e->stats.satisfactions);
    }
    tem_metrics_family(m, "trumpet_tem_event_alerts_total", "counter",
                       "Alerts raised, by event.");
    for (size_t i = 0; i < core->n_events; i++) {
        const struct tem_event *e = core->events[i];
        tem_metrics_sample(m, "trumpet_tem_event_alerts_total", "event",
                           e->name, e->stats.alerts);
    }

    /* Per host (those known: connected or gone). */
    tem_metrics_family(m, "trumpet_tem_host_connected", "gauge",
                       "1 if the host has a session, 0 if it is gone.");
    for (uint32_t i = 0; i < core->n_host_slots; i++) {
        const struct tem_host *h = core->hosts[i];
        if (host_known(h)) {
            tem_metrics_sample(m, "trumpet_tem_host_connected", "host",
                               h->id, host_connected(h));
        }
    }
    tem_metrics_family(m, "trumpet_tem_host_last_receive_age_seconds",
                       "gauge", "Time since the last frame from the "
                       "host.");
    for (uint32_t i = 0; i < core->n_host_slots; i++) {
        const struct tem_host *h = core->hosts[i];
        if (host_known(h)) {
            tem_metrics_sample(m,
                               "trumpet_tem_host_last_receive_age_seconds",
                               "host", h->id,
                               now > h->last_rx_ns
                               ? (now - h->last_rx_ns) / 1e9 : 0);
        }
    }
    tem_metrics_family(m, "trumpet_tem_host_monitors", "gauge",
                       "Packet monitors (PMD threads) the host said it "
                       "has in Hello.");
    for (uint32_t i = 0; i < core->n_host_slots; i++) {
        const struct tem_host *h = core->hosts[i];
        if (host_known(h)) {
            tem_metrics_sample(m, "trumpet_tem_host_monitors", "host",
                               h->id, h->n_pmds);
        }
    }
    for (size_t k = 0; k < ARRAY_SIZE(host_metrics); k++) {
        const struct stat_metric *hm = &host_metrics[k];
        char *name = xasprintf("trumpet_tem_%s", hm->name);
        tem_metrics_family(m, name, "counter", hm->help);
        for (uint32_t i = 0; i < core->n_host_slots; i++) {
            const struct tem_host *h = core->hosts[i];
            if (host_known(h)) {
                const uint64_t *v = (const uint64_t *) (const void *)
                    ((const char *) &h->stats + hm->offset);
                tem_metrics_sample(m, name, "host", h->id, *v);
            }
        }
        free(name);
    }
}
