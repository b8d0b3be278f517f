/* SPDX-License-Identifier: Apache-2.0 */
/* A TEM as a member of a cluster on etcd: see tem-cluster.h. */
#include "tem-cluster.h"

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "tem-auth.h"
#include "tem-core.h"
#include "tem-etcd.h"
#include "tem-metrics.h"
#include "tem-probe.h"
#include "tem-warn.h"
#include "tproto.h"
#include "tpm-log.h"
#include "util.h"

/* Result tokens: the kind in the high 32 bits, a sequence number (a
 * view's index and generation, a control request's number) below. */
enum tem_cluster_tok {
    TOK_LEASE,                  /* The lease's own results (token 0). */
    TOK_GET,                    /* A view's read. */
    TOK_WATCH,                  /* A view's watch. */
    TOK_MEMBER,                 /* /trumpet/members/ID put. */
    TOK_CAMPAIGN,               /* /trumpet/leader put if absent. */
    TOK_ASSIGN,                 /* The leader's writes. */
    TOK_CTL_ID,                 /* event-add: the id... */
    TOK_CTL_PUT,                /* ... and the definition. */
    TOK_CTL_DEL,                /* event-del. */
    TOK_REVOKE,                 /* The lease given back at exit. */
};

#define TOK(KIND, SEQ) (((uint64_t) (KIND) << 32) | (uint32_t) (SEQ))
#define TOK_KIND(T) ((uint32_t) ((T) >> 32))
#define TOK_SEQ(T) ((uint32_t) (T))

/* The views: what a member reads and watches. */
enum tem_cluster_view_id {
    VIEW_MEMBERS, VIEW_EVENTS, VIEW_ASSIGN, VIEW_LEADER, VIEW_HOSTS, N_VIEWS
};

enum tem_cluster_view_state {
    VIEW_READ_DUE,              /* To read at 'due_ns'. */
    VIEW_READING,               /* Read submitted. */
    VIEW_WATCHING,              /* Read, and watched from after it. */
};

struct tem_cluster_view {
    const char *key;
    bool prefix;
    enum tem_cluster_view_state state;
    uint32_t gen;               /* Results of older generations are
                                 * ignored (a resync started since). */
    uint64_t due_ns;
    bool read;                  /* Read once at least: usable. */
};

/* A retry's delay after a failure, and the control requests' deadline
 * (below tem-ctl's default timeout of 5 s). */
#define TEM_CLUSTER_RETRY_NS (500 * 1000000ULL)
#define TEM_CLUSTER_CTL_DEADLINE_NS (4000 * 1000000ULL)
/* Longest wait before tem_cluster_run() runs again. */
#define TEM_CLUSTER_IDLE_NS (1000 * 1000000ULL)

/* A member's check (tem-probe.h): its key listed, then held. */
enum tem_cluster_check {
    CHECK_DUE,                  /* To probe at 'check_due'. */
    CHECK_PROBING,              /* 'probe' under way. */
    CHECK_VERIFIED,             /* Takes part. */
    CHECK_REFUSED,              /* Key not listed (until the list
                                 * changes), or a probe failed (probed
                                 * again at 'check_due'). */
};

/* A failed probe's retry. */
#define TEM_CLUSTER_PROBE_RETRY_NS (2000 * 1000000ULL)

struct tem_cluster_member {
    char *id;
    bool standby;
    char *value;                /* As read: a new value is checked anew. */
    char *listen;               /* Its hosts' endpoint, or NULL. */
    char key[TPM_CURVE_KEY_LEN + 1];    /* Its public key, or "". */
    enum tem_cluster_check check;
    const char *why;            /* Why it is refused (static), kept
                                 * while a failed check is retried; NULL
                                 * if it never failed. */
    struct tem_probe *probe;
    uint64_t check_due;
};

/* A host's keys in /trumpet/hosts/ID: blank-separated Z85 keys. */
struct tem_cluster_host {
    char *id;
    char *keys;
};

struct tem_cluster_event {
    uint32_t id;
    char *name;
    char *definition;
    char *error;                /* This member's core refused it (logged
                                 * once), or NULL. */
};

struct tem_cluster_assign {
    uint32_t id;
    char *member;               /* The member that decides it... */
    char *stands_in;            /* ...standing in for this lost member
                                 * (a standby's), or NULL.  In etcd the
                                 * value is "MEMBER" or "MEMBER LOST". */
};

struct tem_cluster_owned {
    uint32_t id;
    char *name;
};

struct tem_cluster_ctl {
    bool pending;
    uint32_t seq;
    tem_cluster_reply_cb *reply;
    void *aux;
    char *name, *definition;
    uint32_t id;
    uint64_t deadline_ns;
};

struct tem_cluster {
    struct tem_core *core;
    struct tem_etcd *etcd;
    void *zctx;                 /* For the probes. */
    char *public_key, *secret_key;  /* This TEM's (NULL: no checks). */
    const struct tem_allow *member_keys;    /* Keys that may take part. */
    void (*hosts_changed)(void *aux);
    void *aux;
    char *id;                   /* This member's. */
    char *member_value;         /* Its /trumpet/members/ID value. */
    bool standby;
    char *endpoints;

    struct tem_cluster_view views[N_VIEWS];

    /* The cluster as this member last read it. */
    struct tem_cluster_member *members;
    size_t n_members;
    struct tem_cluster_event *events;
    size_t n_events;
    struct tem_cluster_assign *assigns;
    size_t n_assigns;
    char *leader;               /* The leader's id, NULL: none known. */
    struct tem_cluster_host *hosts;     /* /trumpet/hosts/. */
    size_t n_hosts;
    struct tem_allow *hosts_allow;      /* ... as an allow-list, or NULL
                                         * (not read). */
    bool dirty_hosts;

    /* This member. */
    bool lease_held;
    bool registered;            /* Member key put on the current lease. */
    bool member_put_pending;
    uint64_t member_put_due;    /* Retry (0: none). */
    bool is_leader;
    bool campaigning;
    uint64_t campaign_due;      /* Retry (0: none). */

    /* The events it decides: defined in its core. */
    struct tem_cluster_owned *owned;
    size_t n_owned;

    bool dirty_local;           /* Reconcile the core with the views. */
    bool dirty_assign;          /* The leader recomputes. */
    uint64_t assign_due;        /* ... not before. */
    uint32_t assign_inflight;

    struct tem_cluster_ctl ctl;

    /* Counters (tem-ctl status "cluster", metrics). */
    uint64_t takeovers;         /* Leader: members lost whose events it
                                 * reassigned. */
    uint64_t events_moved;      /* Leader: assignments changed from one
                                 * member to another. */
    uint64_t assign_writes;     /* Leader: assignments written, deleted. */
    uint64_t leaderships;       /* Times it became the leader. */
    uint64_t gained, released;  /* Events defined in, removed from, its
                                 * core by assignment. */
    uint64_t refused;           /* Events its core refused. */
    uint64_t resyncs;           /* Views read again (compaction, error). */
    uint64_t watch_down;
    uint64_t etcd_errors;       /* Requests answered with an error. */
    uint64_t bad_values;        /* Keys whose value is not understood. */
    uint64_t leases;            /* Leases granted. */
    uint64_t leases_lost;
    uint64_t probes, probes_failed;     /* Members' checks. */
    uint64_t leader_refused;    /* Times the leader's assignments were
                                 * not followed: the leader not verified. */
    uint64_t hosts_bad;         /* Host keys in etcd not understood. */

    struct tem_warn warn_etcd, warn_value, warn_member;
};

static void tem_cluster_campaign__(struct tem_cluster *);

static uint64_t
tem_cluster_now__(void)
{
    return tpm_clock_mono_ns();
}

/* ---------------------------------------------------------------------- */
/* The rendezvous hash. */

static uint64_t
tem_cluster_mix__(uint64_t x)
{
    /* splitmix64's finalizer. */
    x ^= x >> 30;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x *= UINT64_C(0x94d049bb133111eb);
    x ^= x >> 31;
    return x;
}

uint64_t
tem_cluster_hash(uint32_t event_id, const char *member_id)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);     /* FNV-1a. */
    for (const char *p = member_id; *p; p++) {
        h = (h ^ (uint8_t) *p) * UINT64_C(0x100000001b3);
    }
    return tem_cluster_mix__(h ^ tem_cluster_mix__(event_id + 1));
}

/* ---------------------------------------------------------------------- */
/* Tables. */

static struct tem_cluster_member *
tem_cluster_member_find__(const struct tem_cluster *cl, const char *id)
{
    for (size_t i = 0; i < cl->n_members; i++) {
        if (!strcmp(cl->members[i].id, id)) {
            return &cl->members[i];
        }
    }
    return NULL;
}

static struct tem_cluster_event *
tem_cluster_event_find__(const struct tem_cluster *cl, uint32_t id)
{
    for (size_t i = 0; i < cl->n_events; i++) {
        if (cl->events[i].id == id) {
            return &cl->events[i];
        }
    }
    return NULL;
}

/* The event named 'name' that counts: the lowest id of that name (two
 * TEMs may add the same name at once; the later one is ignored). */
static struct tem_cluster_event *
tem_cluster_event_by_name__(const struct tem_cluster *cl, const char *name)
{
    struct tem_cluster_event *best = NULL;
    for (size_t i = 0; i < cl->n_events; i++) {
        if (!strcmp(cl->events[i].name, name)
            && (!best || cl->events[i].id < best->id)) {
            best = &cl->events[i];
        }
    }
    return best;
}

static struct tem_cluster_assign *
tem_cluster_assign_find__(const struct tem_cluster *cl, uint32_t id)
{
    for (size_t i = 0; i < cl->n_assigns; i++) {
        if (cl->assigns[i].id == id) {
            return &cl->assigns[i];
        }
    }
    return NULL;
}

static void
tem_cluster_member_free__(struct tem_cluster_member *m)
{
    free(m->id);
    free(m->value);
    free(m->listen);
    tem_probe_destroy(m->probe);
}

static void
tem_cluster_members_clear__(struct tem_cluster *cl)
{
    for (size_t i = 0; i < cl->n_members; i++) {
        tem_cluster_member_free__(&cl->members[i]);
    }
    cl->n_members = 0;
}

static void
tem_cluster_hosts_clear__(struct tem_cluster *cl)
{
    for (size_t i = 0; i < cl->n_hosts; i++) {
        free(cl->hosts[i].id);
        free(cl->hosts[i].keys);
    }
    cl->n_hosts = 0;
}

static void
tem_cluster_event_free__(struct tem_cluster_event *e)
{
    free(e->name);
    free(e->definition);
    free(e->error);
}

static void
tem_cluster_events_clear__(struct tem_cluster *cl)
{
    for (size_t i = 0; i < cl->n_events; i++) {
        tem_cluster_event_free__(&cl->events[i]);
    }
    cl->n_events = 0;
}

static void
tem_cluster_assigns_clear__(struct tem_cluster *cl)
{
    for (size_t i = 0; i < cl->n_assigns; i++) {
        free(cl->assigns[i].member);
        free(cl->assigns[i].stands_in);
    }
    cl->n_assigns = 0;
}

/* Parses the decimal event id that ends 'key' after 'prefix'.  Returns 0
 * if it is not one. */
static uint32_t
tem_cluster_key_id__(const char *key, const char *prefix)
{
    size_t n = strlen(prefix);
    if (strncmp(key, prefix, n) || !key[n]) {
        return 0;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(key + n, &end, 10);
    if (errno || *end || v == 0 || v > UINT32_MAX || key[n] == '0') {
        return 0;
    }
    return v;
}

static void
tem_cluster_bad_value__(struct tem_cluster *cl, const char *key,
                        const char *why)
{
    cl->bad_values++;
    tem_warn(&cl->warn_value, "cluster: etcd key %.200s ignored: %s", key,
             why);
}

/* Whether member 'm' takes part: always without keys (--insecure-
 * plaintext); else once its check succeeded. */
static bool
tem_cluster_member_ok__(const struct tem_cluster *cl,
                        const struct tem_cluster_member *m)
{
    return !cl->public_key || m->check == CHECK_VERIFIED;
}

/* Member 'm' to be checked again from the start. */
static void
tem_cluster_member_recheck__(struct tem_cluster_member *m)
{
    tem_probe_destroy(m->probe);
    m->probe = NULL;
    m->check = CHECK_DUE;
    m->check_due = 0;
    m->why = NULL;
}

/* Applies a put ('kv->deleted' false) or a delete of a member key. */
static void
tem_cluster_apply_member__(struct tem_cluster *cl,
                           const struct tem_etcd_kv *kv)
{
    const char *id = kv->key + strlen(TEM_ETCD_MEMBERS);
    struct tem_cluster_member *m = tem_cluster_member_find__(cl, id);

    if (!*id) {
        return;
    }
    if (kv->deleted) {
        if (m) {
            tpm_log(TPM_LOG_INFO, "cluster: member %s left", id);
            tem_cluster_member_free__(m);
            *m = cl->members[--cl->n_members];
        }
        return;
    }
    if (m && !strcmp(m->value, kv->value)) {
        return;                 /* Put again on a new lease. */
    }
    bool standby = false;
    const char *listen = NULL, *key = NULL;
    struct json_object *v = json_tokener_parse(kv->value);
    struct json_object *s;
    if (v && json_object_object_get_ex(v, "standby", &s)) {
        standby = json_object_get_boolean(s);
    }
    if (v && json_object_object_get_ex(v, "listen", &s)
        && json_object_is_type(s, json_type_string)) {
        listen = json_object_get_string(s);
    }
    if (v && json_object_object_get_ex(v, "public_key", &s)
        && json_object_is_type(s, json_type_string)
        && tpm_curve_key_valid(json_object_get_string(s))) {
        key = json_object_get_string(s);
    }
    if (!m) {
        cl->members = xrealloc(cl->members,
                               (cl->n_members + 1) * sizeof *cl->members);
        m = &cl->members[cl->n_members++];
        memset(m, 0, sizeof *m);
        m->id = xstrdup(id);
        tpm_log(TPM_LOG_INFO, "cluster: member %s joined%s", id,
                standby ? " (standby)" : "");
    } else {
        free(m->value);
        free(m->listen);
    }
    m->standby = standby;
    m->value = xstrdup(kv->value);
    m->listen = listen ? xstrdup(listen) : NULL;
    memcpy(m->key, key ? key : "", key ? TPM_CURVE_KEY_LEN + 1 : 1);
    tem_cluster_member_recheck__(m);
    json_object_put(v);
}

/* Applies a put or a delete of /trumpet/hosts/ID: its value is the
 * host's keys, blank-separated.  A value not understood leaves the host
 * out, counted. */
static void
tem_cluster_apply_host__(struct tem_cluster *cl,
                         const struct tem_etcd_kv *kv)
{
    const char *id = kv->key + strlen(TEM_ETCD_HOSTS);
    struct tem_cluster_host *h = NULL;

    for (size_t i = 0; i < cl->n_hosts; i++) {
        if (!strcmp(cl->hosts[i].id, id)) {
            h = &cl->hosts[i];
        }
    }
    if (h) {
        free(h->id);
        free(h->keys);
        *h = cl->hosts[--cl->n_hosts];
    }
    cl->dirty_hosts = true;
    if (kv->deleted) {
        return;
    }
    if (!tproto_id_valid(id)) {
        cl->hosts_bad++;
        tem_cluster_bad_value__(cl, kv->key, "not a host id");
        return;
    }
    char *keys = xstrdup(kv->value);
    size_t n = 0;
    bool ok = true;
    for (char *save = NULL, *w = strtok_r(keys, " \t\r\n", &save); w;
         w = strtok_r(NULL, " \t\r\n", &save)) {
        ok &= tpm_curve_key_valid(w);
        n++;
    }
    free(keys);
    if (!ok || !n) {
        cl->hosts_bad++;
        tem_cluster_bad_value__(cl, kv->key, "not one or more public keys "
                                "(40 Z85 characters each, blank-separated)");
        return;
    }
    cl->hosts = xrealloc(cl->hosts, (cl->n_hosts + 1) * sizeof *cl->hosts);
    cl->hosts[cl->n_hosts].id = xstrdup(id);
    cl->hosts[cl->n_hosts].keys = xstrdup(kv->value);
    cl->n_hosts++;
}

static void
tem_cluster_apply_event__(struct tem_cluster *cl,
                          const struct tem_etcd_kv *kv)
{
    uint32_t id = tem_cluster_key_id__(kv->key, TEM_ETCD_EVENTS);
    struct tem_cluster_event *e;

    if (!id) {
        if (!kv->deleted) {
            tem_cluster_bad_value__(cl, kv->key, "not an event id");
        }
        return;
    }
    e = tem_cluster_event_find__(cl, id);
    if (kv->deleted) {
        if (e) {
            tem_cluster_event_free__(e);
            *e = cl->events[--cl->n_events];
        }
        return;
    }
    struct json_object *v = json_tokener_parse(kv->value);
    struct json_object *name, *def;
    if (!v || !json_object_object_get_ex(v, "name", &name)
        || !json_object_is_type(name, json_type_string)
        || !json_object_object_get_ex(v, "definition", &def)
        || !json_object_is_type(def, json_type_string)) {
        tem_cluster_bad_value__(cl, kv->key, "not {\"name\": STRING, "
                                "\"definition\": STRING}");
        json_object_put(v);
        return;
    }
    if (e) {
        /* Ids are never reused: a definition rewritten in etcd by hand
         * is taken as it is, the event defined again if this member
         * decides it. */
        tem_cluster_event_free__(e);
    } else {
        cl->events = xrealloc(cl->events,
                              (cl->n_events + 1) * sizeof *cl->events);
        e = &cl->events[cl->n_events++];
    }
    e->id = id;
    e->name = xstrdup(json_object_get_string(name));
    e->definition = xstrdup(json_object_get_string(def));
    e->error = NULL;
    json_object_put(v);
}

static void
tem_cluster_apply_assign__(struct tem_cluster *cl,
                           const struct tem_etcd_kv *kv)
{
    uint32_t id = tem_cluster_key_id__(kv->key, TEM_ETCD_ASSIGN);
    struct tem_cluster_assign *a;

    if (!id) {
        if (!kv->deleted) {
            tem_cluster_bad_value__(cl, kv->key, "not an event id");
        }
        return;
    }
    a = tem_cluster_assign_find__(cl, id);
    if (kv->deleted) {
        if (a) {
            free(a->member);
            free(a->stands_in);
            *a = cl->assigns[--cl->n_assigns];
        }
        return;
    }
    if (!a) {
        cl->assigns = xrealloc(cl->assigns,
                               (cl->n_assigns + 1) * sizeof *cl->assigns);
        a = &cl->assigns[cl->n_assigns++];
        a->id = id;
    } else {
        free(a->member);
        free(a->stands_in);
    }
    const char *sp = strchr(kv->value, ' ');
    a->member = sp ? xasprintf("%.*s", (int) (sp - kv->value), kv->value)
                   : xstrdup(kv->value);
    a->stands_in = sp && sp[1] ? xstrdup(sp + 1) : NULL;
}

static void
tem_cluster_apply_leader__(struct tem_cluster *cl,
                           const struct tem_etcd_kv *kv)
{
    bool was = cl->is_leader;
    char *old = cl->leader;

    cl->leader = NULL;
    cl->is_leader = false;
    if (!kv || kv->deleted) {
        if (old) {
            tpm_log(TPM_LOG_INFO, "cluster: no leader (the lease of %s "
                    "ended)", old);
        }
        free(old);
        tem_cluster_campaign__(cl);
        return;
    }
    cl->leader = xstrdup(kv->value);
    cl->dirty_local = true;
    cl->is_leader = (!strcmp(cl->leader, cl->id)
                     && kv->lease == tem_etcd_lease_id(cl->etcd)
                     && cl->lease_held);
    if (cl->is_leader && !was) {
        cl->leaderships++;
        cl->dirty_assign = true;
        tpm_log(TPM_LOG_INFO, "cluster: %s is the leader", cl->id);
    } else if (!cl->is_leader && (!old || strcmp(old, cl->leader))) {
        tpm_log(TPM_LOG_INFO, "cluster: the leader is %s", cl->leader);
    }
    free(old);
}

/* Applies 'kv' to view 'v'. */
static void
tem_cluster_apply__(struct tem_cluster *cl, enum tem_cluster_view_id v,
                    const struct tem_etcd_kv *kv)
{
    switch (v) {
    case VIEW_MEMBERS:
        tem_cluster_apply_member__(cl, kv);
        cl->dirty_assign = cl->dirty_local = true;
        break;
    case VIEW_EVENTS:
        tem_cluster_apply_event__(cl, kv);
        cl->dirty_assign = cl->dirty_local = true;
        break;
    case VIEW_ASSIGN:
        tem_cluster_apply_assign__(cl, kv);
        cl->dirty_assign = cl->dirty_local = true;
        break;
    case VIEW_LEADER:
        tem_cluster_apply_leader__(cl, kv);
        break;
    case VIEW_HOSTS:
        tem_cluster_apply_host__(cl, kv);
        break;
    case N_VIEWS:
    default:
        break;
    }
}

/* ---------------------------------------------------------------------- */
/* Reading and watching. */

static void
tem_cluster_etcd_error__(struct tem_cluster *cl, const char *what,
                         const struct tem_etcd_result *r)
{
    cl->etcd_errors++;
    tem_warn(&cl->warn_etcd, "cluster: etcd: %s failed: %s", what,
             r->message ? r->message : strerror(r->error));
}

/* Reads view 'v' again from scratch after 'delay_ns' (its watch, if any,
 * canceled). */
static void
tem_cluster_resync__(struct tem_cluster *cl, enum tem_cluster_view_id v,
                     uint64_t delay_ns)
{
    struct tem_cluster_view *view = &cl->views[v];

    if (view->state == VIEW_WATCHING) {
        tem_etcd_watch_cancel(cl->etcd,
                              TOK(TOK_WATCH, v << 16 | view->gen));
    }
    view->gen = (view->gen + 1) & 0xffff;
    view->state = VIEW_READ_DUE;
    view->due_ns = tem_cluster_now__() + delay_ns;
    cl->resyncs++;
}

static void
tem_cluster_view_read__(struct tem_cluster *cl, enum tem_cluster_view_id v)
{
    struct tem_cluster_view *view = &cl->views[v];
    int error = tem_etcd_get(cl->etcd, view->key, view->prefix,
                             TOK(TOK_GET, v << 16 | view->gen));
    if (error) {
        view->due_ns = tem_cluster_now__() + TEM_CLUSTER_RETRY_NS;
    } else {
        view->state = VIEW_READING;
    }
}

static void
tem_cluster_view_result__(struct tem_cluster *cl, uint32_t kind,
                          struct tem_etcd_result *r)
{
    enum tem_cluster_view_id v = TOK_SEQ(r->token) >> 16;
    uint32_t gen = TOK_SEQ(r->token) & 0xffff;
    struct tem_cluster_view *view;

    if (v >= N_VIEWS) {
        return;
    }
    view = &cl->views[v];
    if (gen != view->gen) {
        return;                 /* Of a generation resynced since. */
    }
    if (kind == TOK_GET) {
        if (view->state != VIEW_READING) {
            return;
        }
        if (r->type != TEM_ETCD_DONE) {
            tem_cluster_etcd_error__(cl, view->key, r);
            view->state = VIEW_READ_DUE;
            view->due_ns = tem_cluster_now__() + TEM_CLUSTER_RETRY_NS;
            return;
        }
        /* The snapshot replaces what the view held (read first: a
         * campaign needs the leader's view read). */
        view->read = true;
        switch (v) {
        case VIEW_MEMBERS: tem_cluster_members_clear__(cl); break;
        case VIEW_EVENTS: tem_cluster_events_clear__(cl); break;
        case VIEW_ASSIGN: tem_cluster_assigns_clear__(cl); break;
        case VIEW_HOSTS:
            tem_cluster_hosts_clear__(cl);
            cl->dirty_hosts = true;
            break;
        case VIEW_LEADER:
        case N_VIEWS:
        default:
            break;
        }
        if (v == VIEW_LEADER) {
            tem_cluster_apply_leader__(cl, r->n_kvs ? &r->kvs[0] : NULL);
        } else {
            for (size_t i = 0; i < r->n_kvs; i++) {
                tem_cluster_apply__(cl, v, &r->kvs[i]);
            }
        }
        cl->dirty_local = cl->dirty_assign = true;
        int error = tem_etcd_watch(cl->etcd, view->key, view->prefix,
                                   r->revision + 1,
                                   TOK(TOK_WATCH, v << 16 | view->gen));
        if (error) {
            /* No watch left or a full queue: read again later. */
            view->state = VIEW_READ_DUE;
            view->due_ns = tem_cluster_now__() + TEM_CLUSTER_RETRY_NS;
        } else {
            view->state = VIEW_WATCHING;
        }
        return;
    }

    switch (r->type) {
    case TEM_ETCD_WATCH_EVENTS:
        for (size_t i = 0; i < r->n_kvs; i++) {
            tem_cluster_apply__(cl, v, &r->kvs[i]);
        }
        break;
    case TEM_ETCD_WATCH_DOWN:
        cl->watch_down++;
        break;
    case TEM_ETCD_WATCH_COMPACTED:
        tpm_log(TPM_LOG_WARN, "cluster: the watch of %s was compacted "
                "(revision %"PRId64"): reading it again", view->key,
                r->compact_revision);
        /* Ended: nothing to cancel. */
        view->gen = (view->gen + 1) & 0xffff;
        view->state = VIEW_READ_DUE;
        view->due_ns = 0;
        cl->resyncs++;
        break;
    case TEM_ETCD_ERROR:
        tem_cluster_etcd_error__(cl, view->key, r);
        tem_cluster_resync__(cl, v, TEM_CLUSTER_RETRY_NS);
        break;
    case TEM_ETCD_DONE:             /* Established. */
    case TEM_ETCD_LEASE_GRANTED:
    case TEM_ETCD_LEASE_LOST:
    default:
        break;
    }
}

/* ---------------------------------------------------------------------- */
/* Membership and leadership. */

static void
tem_cluster_member_put__(struct tem_cluster *cl)
{
    if (!cl->lease_held || cl->member_put_pending) {
        return;
    }
    char *key = xasprintf("%s%s", TEM_ETCD_MEMBERS, cl->id);
    int error = tem_etcd_put(cl->etcd, key, cl->member_value,
                             strlen(cl->member_value), TEM_ETCD_WITH_LEASE,
                             TOK(TOK_MEMBER, 0));
    free(key);
    if (error) {
        cl->member_put_due = tem_cluster_now__() + TEM_CLUSTER_RETRY_NS;
    } else {
        cl->member_put_pending = true;
        cl->member_put_due = 0;
    }
}

static void
tem_cluster_campaign__(struct tem_cluster *cl)
{
    if (!cl->registered || cl->campaigning || cl->is_leader
        || !cl->views[VIEW_LEADER].read) {
        return;
    }
    int error = tem_etcd_put_if_absent(cl->etcd, TEM_ETCD_LEADER, cl->id,
                                       strlen(cl->id), TEM_ETCD_WITH_LEASE,
                                       TOK(TOK_CAMPAIGN, 0));
    if (error) {
        cl->campaign_due = tem_cluster_now__() + TEM_CLUSTER_RETRY_NS;
    } else {
        cl->campaigning = true;
        cl->campaign_due = 0;
    }
}

static void
tem_cluster_lease_result__(struct tem_cluster *cl, struct tem_etcd_result *r)
{
    switch (r->type) {
    case TEM_ETCD_LEASE_GRANTED:
        cl->lease_held = true;
        cl->leases++;
        cl->registered = false;
        tpm_log(TPM_LOG_INFO, "cluster: lease %"PRIx64" granted (TTL %"
                PRId64" s): registering as member %s", (uint64_t) r->lease,
                r->ttl, cl->id);
        tem_cluster_member_put__(cl);
        break;
    case TEM_ETCD_LEASE_LOST:
        cl->leases_lost++;
        cl->lease_held = cl->registered = false;
        if (cl->is_leader) {
            tpm_log(TPM_LOG_WARN, "cluster: lease lost (%s): no longer "
                    "the leader; keeping this member's %zu events until "
                    "they are reassigned", r->message ? r->message : "-",
                    cl->n_owned);
        } else {
            tpm_log(TPM_LOG_WARN, "cluster: lease lost (%s): keeping this "
                    "member's %zu events until they are reassigned",
                    r->message ? r->message : "-", cl->n_owned);
        }
        cl->is_leader = false;
        break;
    case TEM_ETCD_ERROR:
        tem_cluster_etcd_error__(cl, "lease", r);
        break;
    case TEM_ETCD_DONE:
    case TEM_ETCD_WATCH_EVENTS:
    case TEM_ETCD_WATCH_DOWN:
    case TEM_ETCD_WATCH_COMPACTED:
    default:
        break;
    }
}

/* ---------------------------------------------------------------------- */
/* Control requests. */

/* Answers the control request under way with 'reply'. */
static void
tem_cluster_ctl_done__(struct tem_cluster *cl, struct json_object *reply)
{
    struct tem_cluster_ctl *c = &cl->ctl;

    c->pending = false;
    free(c->name);
    free(c->definition);
    c->name = c->definition = NULL;
    c->reply(c->aux, reply);
}

static const char *
tem_cluster_get_string__(struct json_object *req, const char *key)
{
    struct json_object *v;
    return json_object_object_get_ex(req, key, &v)
           && json_object_is_type(v, json_type_string)
           ? json_object_get_string(v) : NULL;
}

struct json_object *
tem_cluster_ctl(struct tem_cluster *cl, const char *cmd,
                struct json_object *req, tem_cluster_reply_cb *reply,
                void *aux)
{
    struct tem_cluster_ctl *c = &cl->ctl;
    const char *name = tem_cluster_get_string__(req, "name");
    const char *def = tem_cluster_get_string__(req, "definition");
    bool add = !strcmp(cmd, "event-add");
    int error;

    if (c->pending) {
        return tem_reply_error("another request is under way");
    }
    if (!name || (add && !def)) {
        return tem_reply_error(add ? "event-add needs \"name\" "
                                     "and \"definition\""
                                   : "event-del needs \"name\"");
    }
    if (!cl->views[VIEW_EVENTS].read) {
        return tem_reply_error("the cluster's events are not read "
                               "from etcd yet (%s unreachable?)",
                               cl->endpoints);
    }
    const struct tem_cluster_event *e = tem_cluster_event_by_name__(cl,
                                                                    name);
    c->seq++;
    if (add) {
        if (e) {
            return tem_reply_error("event '%s' already exists "
                                   "(event-del it first)", name);
        }
        char *err = tem_core_event_check(cl->core, name, def);
        if (err) {
            struct json_object *r = tem_reply_error("%s", err);
            free(err);
            return r;
        }
        error = tem_etcd_next_id(cl->etcd, TEM_ETCD_NEXT_ID,
                                 TOK(TOK_CTL_ID, c->seq));
    } else {
        if (!e) {
            return tem_reply_error("no event '%s'", name);
        }
        char *key = xasprintf("%s%"PRIu32, TEM_ETCD_EVENTS, e->id);
        error = tem_etcd_delete(cl->etcd, key, false,
                                TOK(TOK_CTL_DEL, c->seq));
        free(key);
        c->id = e->id;
    }
    if (error) {
        return tem_reply_error("etcd client: %s (try again)",
                               strerror(error));
    }
    c->pending = true;
    c->reply = reply;
    c->aux = aux;
    c->name = xstrdup(name);
    c->definition = def ? xstrdup(def) : NULL;
    c->deadline_ns = tem_cluster_now__() + TEM_CLUSTER_CTL_DEADLINE_NS;
    return NULL;
}

bool
tem_cluster_ctl_pending(const struct tem_cluster *cl)
{
    return cl->ctl.pending;
}

static void
tem_cluster_ctl_result__(struct tem_cluster *cl, uint32_t kind,
                         struct tem_etcd_result *r)
{
    struct tem_cluster_ctl *c = &cl->ctl;

    if (!c->pending || TOK_SEQ(r->token) != c->seq) {
        return;                 /* Answered at its deadline already. */
    }
    if (r->type != TEM_ETCD_DONE) {
        cl->etcd_errors++;
        tem_cluster_ctl_done__(cl, tem_reply_error(
                                   "etcd: %s", r->message ? r->message
                                   : strerror(r->error)));
        return;
    }
    if (kind == TOK_CTL_ID) {
        if (r->id < 1 || r->id > UINT32_MAX) {
            tem_cluster_ctl_done__(cl, tem_reply_error(
                                       "no event id left: %s is %"PRId64,
                                       TEM_ETCD_NEXT_ID, r->id));
            return;
        }
        c->id = r->id;
        struct json_object *v = json_object_new_object();
        json_object_object_add(v, "name", json_object_new_string(c->name));
        json_object_object_add(v, "definition",
                               json_object_new_string(c->definition));
        const char *text = json_object_to_json_string_ext(
            v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        char *key = xasprintf("%s%"PRIu32, TEM_ETCD_EVENTS, c->id);
        int error = tem_etcd_put(cl->etcd, key, text, strlen(text), 0,
                                 TOK(TOK_CTL_PUT, c->seq));
        free(key);
        json_object_put(v);
        if (error) {
            tem_cluster_ctl_done__(cl, tem_reply_error(
                                       "etcd client: %s (try again)",
                                       strerror(error)));
        }
        return;
    }
    struct json_object *reply = tem_reply_ok(NULL);
    if (kind == TOK_CTL_PUT) {
        json_object_object_add(reply, "name",
                               json_object_new_string(c->name));
        json_object_object_add(reply, "id", json_object_new_int64(c->id));
        tpm_log(TPM_LOG_INFO, "cluster: event %s defined in etcd (id %"
                PRIu32")", c->name, c->id);
    } else {
        tpm_log(TPM_LOG_INFO, "cluster: event %s (id %"PRIu32") deleted "
                "from etcd", c->name, c->id);
    }
    tem_cluster_ctl_done__(cl, reply);
}

/* ---------------------------------------------------------------------- */
/* Results. */

static void
tem_cluster_result__(struct tem_cluster *cl, struct tem_etcd_result *r)
{
    uint32_t kind = TOK_KIND(r->token);

    switch (kind) {
    case TOK_LEASE:
        tem_cluster_lease_result__(cl, r);
        break;
    case TOK_GET:
    case TOK_WATCH:
        tem_cluster_view_result__(cl, kind, r);
        break;
    case TOK_MEMBER:
        cl->member_put_pending = false;
        if (r->type == TEM_ETCD_DONE) {
            cl->registered = cl->lease_held;
            tpm_log(TPM_LOG_INFO, "cluster: member %s registered", cl->id);
            tem_cluster_campaign__(cl);
        } else {
            tem_cluster_etcd_error__(cl, "member key", r);
            cl->member_put_due = tem_cluster_now__() + TEM_CLUSTER_RETRY_NS;
        }
        break;
    case TOK_CAMPAIGN:
        cl->campaigning = false;
        if (r->type != TEM_ETCD_DONE) {
            tem_cluster_etcd_error__(cl, "campaign", r);
            cl->campaign_due = tem_cluster_now__() + TEM_CLUSTER_RETRY_NS;
        } else if (r->succeeded && cl->lease_held && !cl->is_leader) {
            free(cl->leader);
            cl->leader = xstrdup(cl->id);
            cl->is_leader = true;
            cl->leaderships++;
            cl->dirty_assign = true;
            tpm_log(TPM_LOG_INFO, "cluster: %s is the leader", cl->id);
        }
        /* Lost: the watch of the key tells who leads, and when it is
         * deleted. */
        break;
    case TOK_ASSIGN:
        cl->assign_inflight -= cl->assign_inflight > 0;
        if (r->type != TEM_ETCD_DONE) {
            tem_cluster_etcd_error__(cl, "assignment", r);
            /* What the leader assumed may be wrong: read it again. */
            tem_cluster_resync__(cl, VIEW_ASSIGN, TEM_CLUSTER_RETRY_NS);
        }
        break;
    case TOK_CTL_ID:
    case TOK_CTL_PUT:
    case TOK_CTL_DEL:
        tem_cluster_ctl_result__(cl, kind, r);
        break;
    case TOK_REVOKE:
    default:
        break;
    }
}

void
tem_cluster_input(struct tem_cluster *cl, uint32_t max)
{
    for (uint32_t i = 0; i < max; i++) {
        struct tem_etcd_result *r = tem_etcd_recv(cl->etcd);
        if (!r) {
            return;
        }
        tem_cluster_result__(cl, r);
        tem_etcd_result_free(r);
    }
}

/* ---------------------------------------------------------------------- */
/* Acting on the views. */

/* A pass's placement (tem_cluster_assign__()).  Events go by rendezvous
 * hashing over the live active members (checked, not on standby) and the
 * lost members that a standby stands in for: an event whose highest hash
 * is a lost member's goes to its stand-in.  A lost member is one that an
 * assignment names (as the member, or as the one stood in for) and that
 * is no live member now; each is paired with a live standby that stands
 * in for no one else (the pairs already written first, then the
 * standbys in etcd's order), and one left without is not hashed to: its
 * events go to the others.  So a standby takes exactly a lost member's
 * events, and gives them back when that member returns (its id hashes as
 * before).  With no live active member, every checked member takes part,
 * standbys included, as itself. */
struct tem_cluster_plan {
    char **ids;                 /* Hashed: live actives, then lost ones. */
    char **to;                  /* Who decides for 'ids[i]'. */
    size_t n;
};

static void
tem_cluster_plan_add__(struct tem_cluster_plan *p, const char *id,
                       const char *to)
{
    p->ids[p->n] = xstrdup(id);
    p->to[p->n] = xstrdup(to);
    p->n++;
}

static bool
tem_cluster_plan_has__(const struct tem_cluster_plan *p, const char *id,
                       bool as_to)
{
    for (size_t i = 0; i < p->n; i++) {
        if (!strcmp(as_to ? p->to[i] : p->ids[i], id)) {
            return true;
        }
    }
    return false;
}

/* True if 'id' is a live member that may decide events ('standby': one
 * started with --standby; else one without). */
static bool
tem_cluster_live__(const struct tem_cluster *cl, const char *id,
                   bool standby)
{
    const struct tem_cluster_member *m = tem_cluster_member_find__(cl, id);
    return m && m->standby == standby && tem_cluster_member_ok__(cl, m);
}

static void
tem_cluster_plan_build__(const struct tem_cluster *cl,
                         struct tem_cluster_plan *p)
{
    size_t max = cl->n_members + cl->n_assigns + 1;
    p->ids = xmalloc(max * sizeof *p->ids);
    p->to = xmalloc(max * sizeof *p->to);
    p->n = 0;
    for (size_t i = 0; i < cl->n_members; i++) {
        const struct tem_cluster_member *m = &cl->members[i];
        if (!m->standby && tem_cluster_member_ok__(cl, m)) {
            tem_cluster_plan_add__(p, m->id, m->id);
        }
    }
    if (!p->n) {
        for (size_t i = 0; i < cl->n_members; i++) {
            const struct tem_cluster_member *m = &cl->members[i];
            if (tem_cluster_member_ok__(cl, m)) {
                tem_cluster_plan_add__(p, m->id, m->id);
            }
        }
        return;
    }
    /* The lost members, with their stand-ins: those written first. */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < cl->n_assigns; i++) {
            const struct tem_cluster_assign *a = &cl->assigns[i];
            const char *lost = a->stands_in ? a->stands_in : a->member;
            if (tem_cluster_member_find__(cl, lost)
                || tem_cluster_plan_has__(p, lost, false)) {
                continue;
            }
            if (!pass) {
                if (a->stands_in && tem_cluster_live__(cl, a->member, true)
                    && !tem_cluster_plan_has__(p, a->member, true)) {
                    tem_cluster_plan_add__(p, lost, a->member);
                }
                continue;
            }
            for (size_t j = 0; j < cl->n_members; j++) {
                const struct tem_cluster_member *m = &cl->members[j];
                if (m->standby && tem_cluster_member_ok__(cl, m)
                    && !tem_cluster_plan_has__(p, m->id, true)) {
                    tem_cluster_plan_add__(p, lost, m->id);
                    break;
                }
            }
        }
    }
}

static void
tem_cluster_plan_destroy__(struct tem_cluster_plan *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free(p->ids[i]);
        free(p->to[i]);
    }
    free(p->ids);
    free(p->to);
}

/* The plan's choice for event 'id': the index in 'p' of the highest
 * rendezvous hash, or SIZE_MAX if the plan is empty. */
static size_t
tem_cluster_choose__(const struct tem_cluster_plan *p, uint32_t id)
{
    size_t best = SIZE_MAX;
    uint64_t best_h = 0;
    for (size_t i = 0; i < p->n; i++) {
        uint64_t h = tem_cluster_hash(id, p->ids[i]);
        if (best == SIZE_MAX || h > best_h
            || (h == best_h && strcmp(p->ids[i], p->ids[best]) < 0)) {
            best = i;
            best_h = h;
        }
    }
    return best;
}

/* The leader: writes the assignments that differ from rendezvous
 * hashing, deletes those of deleted events. */
static void
tem_cluster_assign__(struct tem_cluster *cl)
{
    /* The members whose events this pass moves away: lost ones are
     * takeovers. */
    char **lost = NULL;
    size_t n_lost = 0;
    uint32_t moved = 0, written = 0;
    struct tem_cluster_plan plan;

    tem_cluster_plan_build__(cl, &plan);
    for (size_t i = 0; i < cl->n_events; i++) {
        const struct tem_cluster_event *e = &cl->events[i];
        size_t k = tem_cluster_choose__(&plan, e->id);
        if (k == SIZE_MAX) {
            continue;
        }
        const char *want = plan.to[k];
        const char *stands_in = strcmp(plan.ids[k], want) ? plan.ids[k]
                                                         : NULL;
        struct tem_cluster_assign *a = tem_cluster_assign_find__(cl, e->id);
        if (a && !strcmp(a->member, want)
            && !a->stands_in == !stands_in
            && (!stands_in || !strcmp(a->stands_in, stands_in))) {
            continue;
        }
        char *key = xasprintf("%s%"PRIu32, TEM_ETCD_ASSIGN, e->id);
        char *value = stands_in ? xasprintf("%s %s", want, stands_in)
                                : xstrdup(want);
        int error = tem_etcd_put(cl->etcd, key, value, strlen(value), 0,
                                 TOK(TOK_ASSIGN, e->id));
        free(value);
        free(key);
        if (error) {
            cl->dirty_assign = true;
            cl->assign_due = tem_cluster_now__() + TEM_CLUSTER_RETRY_NS;
            break;
        }
        cl->assign_inflight++;
        written++;
        if (a) {
            moved++;
            if (!tem_cluster_member_find__(cl, a->member)) {
                bool seen = false;
                for (size_t j = 0; j < n_lost; j++) {
                    seen |= !strcmp(lost[j], a->member);
                }
                if (!seen) {
                    lost = xrealloc(lost, (n_lost + 1) * sizeof *lost);
                    lost[n_lost++] = xstrdup(a->member);
                }
            }
            free(a->member);
            free(a->stands_in);
        } else {
            cl->assigns = xrealloc(cl->assigns, (cl->n_assigns + 1)
                                                * sizeof *cl->assigns);
            a = &cl->assigns[cl->n_assigns++];
            a->id = e->id;
        }
        /* Assumed written; a failure reads the assignments again. */
        a->member = xstrdup(want);
        a->stands_in = stands_in ? xstrdup(stands_in) : NULL;
    }
    tem_cluster_plan_destroy__(&plan);
    for (size_t i = 0; i < cl->n_assigns && !cl->dirty_assign; ) {
        struct tem_cluster_assign *a = &cl->assigns[i];
        if (tem_cluster_event_find__(cl, a->id)) {
            i++;
            continue;
        }
        char *key = xasprintf("%s%"PRIu32, TEM_ETCD_ASSIGN, a->id);
        int error = tem_etcd_delete(cl->etcd, key, false,
                                    TOK(TOK_ASSIGN, a->id));
        free(key);
        if (error) {
            cl->dirty_assign = true;
            cl->assign_due = tem_cluster_now__() + TEM_CLUSTER_RETRY_NS;
            break;
        }
        cl->assign_inflight++;
        written++;
        free(a->member);
        free(a->stands_in);
        *a = cl->assigns[--cl->n_assigns];
    }
    cl->assign_writes += written;
    cl->events_moved += moved;
    cl->takeovers += n_lost;
    for (size_t j = 0; j < n_lost; j++) {
        tpm_log(TPM_LOG_WARN, "cluster: member %s is gone: its events "
                "reassigned (takeover)", lost[j]);
        free(lost[j]);
    }
    free(lost);
    if (written) {
        tpm_log(TPM_LOG_INFO, "cluster: leader %s wrote %"PRIu32
                " assignments (%"PRIu32" moved) over %zu members", cl->id,
                written, moved, cl->n_members);
    }
    if (!cl->dirty_local) {
        cl->dirty_local = written > 0;
    }
}

static struct tem_cluster_owned *
tem_cluster_owned_find__(const struct tem_cluster *cl, uint32_t id)
{
    for (size_t i = 0; i < cl->n_owned; i++) {
        if (cl->owned[i].id == id) {
            return &cl->owned[i];
        }
    }
    return NULL;
}

/* Defines in the core the events assigned to this member, and removes
 * those no longer assigned to it. */
static void
tem_cluster_reconcile__(struct tem_cluster *cl)
{
    /* Assignments count only from a leader whose check succeeded: under
     * another (a stray TEM that won the election), this member keeps
     * what it holds and takes nothing new. */
    const struct tem_cluster_member *lm
        = cl->leader ? tem_cluster_member_find__(cl, cl->leader) : NULL;
    if (cl->leader && !cl->is_leader && (!lm || !tem_cluster_member_ok__(cl,
                                                                       lm))) {
        if (lm && lm->why) {
            cl->leader_refused++;
            tem_warn(&cl->warn_member, "cluster: the leader %s is refused "
                     "(%s): its assignments are not followed; this member "
                     "keeps its %zu events", cl->leader, lm->why,
                     cl->n_owned);
        }
        return;                 /* Again when a check or the leader
                                 * changes. */
    }
    for (size_t i = 0; i < cl->n_owned; ) {
        struct tem_cluster_owned *o = &cl->owned[i];
        const struct tem_cluster_event *e = tem_cluster_event_find__(cl,
                                                                     o->id);
        const struct tem_cluster_assign *a = tem_cluster_assign_find__(cl,
                                                                       o->id);
        if (e && a && !strcmp(a->member, cl->id) && !strcmp(e->name, o->name)
            && tem_cluster_event_by_name__(cl, e->name) == e) {
            i++;
            continue;
        }
        char *error = tem_core_event_del(cl->core, o->name);
        free(error);
        tpm_log(TPM_LOG_INFO, "cluster: event %s (id %"PRIu32") %s", o->name,
                o->id, !e ? "deleted" : a ? "assigned to another member"
                                          : "no longer assigned");
        cl->released++;
        free(o->name);
        *o = cl->owned[--cl->n_owned];
    }
    for (size_t i = 0; i < cl->n_events; i++) {
        struct tem_cluster_event *e = &cl->events[i];
        const struct tem_cluster_assign *a = tem_cluster_assign_find__(cl,
                                                                       e->id);
        if (!a || strcmp(a->member, cl->id) || e->error
            || tem_cluster_owned_find__(cl, e->id)) {
            continue;
        }
        if (tem_cluster_event_by_name__(cl, e->name) != e) {
            e->error = xasprintf("name taken by a lower id");
            tpm_log(TPM_LOG_WARN, "cluster: event %s (id %"PRIu32") "
                    "ignored: another event of that name has a lower id",
                    e->name, e->id);
            continue;
        }
        char *error = tem_core_event_add(cl->core, e->name, e->definition,
                                         e->id);
        if (error) {
            cl->refused++;
            tpm_log(TPM_LOG_ERR, "cluster: event %s (id %"PRIu32") "
                    "assigned to this member is refused: %s", e->name,
                    e->id, error);
            e->error = error;
            continue;
        }
        cl->owned = xrealloc(cl->owned, (cl->n_owned + 1) * sizeof *cl->owned);
        cl->owned[cl->n_owned].id = e->id;
        cl->owned[cl->n_owned].name = xstrdup(e->name);
        cl->n_owned++;
        cl->gained++;
        tpm_log(TPM_LOG_INFO, "cluster: event %s (id %"PRIu32") assigned to "
                "this member: installing it on its hosts", e->name, e->id);
    }
}

/* Member 'm' is refused: 'why', logged rate-limited. */
static void
tem_cluster_member_refuse__(struct tem_cluster *cl,
                            struct tem_cluster_member *m, const char *why,
                            uint64_t retry_ns)
{
    tem_probe_destroy(m->probe);
    m->probe = NULL;
    m->check = CHECK_REFUSED;
    m->why = why;
    m->check_due = retry_ns;
    tem_warn(&cl->warn_member, "cluster: member %s (key %s, %s) refused: "
             "%s; it is assigned no event", m->id, *m->key ? m->key : "none",
             m->listen ? m->listen : "no endpoint", why);
}

/* Checks the members (tem-probe.h): starts the probes due, reads those
 * under way.  Returns when it must run again, at the latest. */
static uint64_t
tem_cluster_check_members__(struct tem_cluster *cl, uint64_t now)
{
    uint64_t next = UINT64_MAX;

    if (!cl->public_key) {
        return next;
    }
    for (size_t i = 0; i < cl->n_members; i++) {
        struct tem_cluster_member *m = &cl->members[i];
        enum tem_cluster_check was = m->check;
        if (m->check == CHECK_REFUSED && m->check_due
            && m->check_due <= now) {
            m->check = CHECK_DUE;
        }
        if (m->check == CHECK_DUE) {
            if (!*m->key || !tem_allow_find(cl->member_keys, m->key)) {
                tem_cluster_member_refuse__(cl, m, *m->key
                                            ? "its public key is not in "
                                              "--cluster-keys"
                                            : "it has no public key", 0);
            } else if (!strcmp(m->id, cl->id)
                       && !strcmp(m->value, cl->member_value)) {
                m->check = CHECK_VERIFIED;      /* This TEM. */
            } else if (!m->listen) {
                tem_cluster_member_refuse__(cl, m, "it has no endpoint", 0);
            } else {
                char *error;
                cl->probes++;
                m->probe = tem_probe_start(cl->zctx, m->listen, m->key,
                                           cl->public_key, cl->secret_key,
                                           now + TEM_PROBE_DEADLINE_NS,
                                           &error);
                if (m->probe) {
                    m->check = CHECK_PROBING;
                } else {
                    cl->probes_failed++;
                    tem_warn(&cl->warn_member, "cluster: member %s: %s",
                             m->id, error);
                    free(error);
                    tem_cluster_member_refuse__(
                        cl, m, "its endpoint cannot be reached",
                        now + TEM_CLUSTER_PROBE_RETRY_NS);
                }
            }
        }
        if (m->check == CHECK_PROBING) {
            const char *id;
            switch (tem_probe_poll(m->probe, now, &id)) {
            case TEM_PROBE_PENDING:
                next = MIN(next, now + TEM_PROBE_POLL_NS);
                break;
            case TEM_PROBE_ANSWERED:
                if (!strcmp(id, m->id)) {
                    tem_probe_destroy(m->probe);
                    m->probe = NULL;
                    m->check = CHECK_VERIFIED;
                    m->why = NULL;
                    tpm_log(TPM_LOG_INFO, "cluster: member %s holds the "
                            "key it advertises (%s)", m->id, m->key);
                } else {
                    cl->probes_failed++;
                    tem_cluster_member_refuse__(
                        cl, m, "its endpoint answers as another member",
                        now + TEM_CLUSTER_PROBE_RETRY_NS);
                }
                break;
            case TEM_PROBE_FAILED:
            default:
                cl->probes_failed++;
                tem_cluster_member_refuse__(
                    cl, m, "no answer over CURVE with that key within the "
                    "deadline (not holding its secret key, or down)",
                    now + TEM_CLUSTER_PROBE_RETRY_NS);
                break;
            }
        }
        if (m->check == CHECK_REFUSED && m->check_due) {
            next = MIN(next, m->check_due);
        }
        if ((was == CHECK_VERIFIED) != (m->check == CHECK_VERIFIED)) {
            cl->dirty_assign = cl->dirty_local = true;
        }
    }
    return next;
}

/* /trumpet/hosts/ as an allow-list, for the daemon to merge. */
static void
tem_cluster_hosts_rebuild__(struct tem_cluster *cl)
{
    struct tem_allow *allow = xzalloc(sizeof *allow);

    for (size_t i = 0; i < cl->n_hosts; i++) {
        char *keys = xstrdup(cl->hosts[i].keys);
        for (char *save = NULL, *w = strtok_r(keys, " \t\r\n", &save); w;
             w = strtok_r(NULL, " \t\r\n", &save)) {
            tem_allow_add(allow, TEM_ALLOW_HOST, cl->hosts[i].id, w);
        }
        free(keys);
    }
    tem_allow_sort(allow);
    tem_allow_free(cl->hosts_allow);
    cl->hosts_allow = allow;
    if (cl->hosts_changed) {
        cl->hosts_changed(cl->aux);
    }
}

uint64_t
tem_cluster_run(struct tem_cluster *cl)
{
    uint64_t now = tem_cluster_now__();
    uint64_t next = now + TEM_CLUSTER_IDLE_NS;

    next = MIN(next, tem_cluster_check_members__(cl, now));
    if (cl->dirty_hosts && cl->views[VIEW_HOSTS].read) {
        cl->dirty_hosts = false;
        tem_cluster_hosts_rebuild__(cl);
    }

    for (enum tem_cluster_view_id v = 0; v < N_VIEWS; v++) {
        struct tem_cluster_view *view = &cl->views[v];
        if (view->state == VIEW_READ_DUE) {
            if (view->due_ns <= now) {
                tem_cluster_view_read__(cl, v);
            }
            if (view->state == VIEW_READ_DUE) {
                next = MIN(next, view->due_ns);
            }
        }
    }
    if (cl->member_put_due) {
        if (cl->member_put_due <= now) {
            cl->member_put_due = 0;
            tem_cluster_member_put__(cl);
        }
        if (cl->member_put_due) {
            next = MIN(next, cl->member_put_due);
        }
    }
    if (cl->campaign_due) {
        if (cl->campaign_due <= now) {
            cl->campaign_due = 0;
            tem_cluster_campaign__(cl);
        }
        if (cl->campaign_due) {
            next = MIN(next, cl->campaign_due);
        }
    }
    if (cl->is_leader && cl->dirty_assign && cl->views[VIEW_MEMBERS].read
        && cl->views[VIEW_EVENTS].read && cl->views[VIEW_ASSIGN].read
        && cl->views[VIEW_ASSIGN].state == VIEW_WATCHING) {
        if (cl->assign_due <= now) {
            cl->dirty_assign = false;
            cl->assign_due = 0;
            tem_cluster_assign__(cl);
        }
        if (cl->dirty_assign) {
            next = MIN(next, cl->assign_due);
        }
    }
    if (cl->dirty_local && cl->views[VIEW_EVENTS].read
        && cl->views[VIEW_ASSIGN].read) {
        cl->dirty_local = false;
        tem_cluster_reconcile__(cl);
    }
    if (cl->ctl.pending) {
        if (cl->ctl.deadline_ns <= now) {
            tem_cluster_ctl_done__(cl, tem_reply_error(
                                       "etcd did not answer within %"PRIu64
                                       " ms (%s): the change may still be "
                                       "made", (uint64_t)
                                       (TEM_CLUSTER_CTL_DEADLINE_NS
                                        / 1000000), cl->endpoints));
        } else {
            next = MIN(next, cl->ctl.deadline_ns);
        }
    }
    return next;
}

/* ---------------------------------------------------------------------- */
/* Life. */

struct tem_cluster *
tem_cluster_create(const struct tem_cluster_config *cfg,
                   struct tem_core *core, char **errp)
{
    struct tem_etcd_config ec;
    struct tem_etcd *etcd;

    tem_etcd_config_init(&ec);
    ec.endpoints = cfg->opt->etcd;
    ec.lease_ttl_s = cfg->opt->ttl_s;
    /* Within a lease's TTL: a member must hear of a loss in time. */
    ec.request_timeout_ms = MIN(ec.request_timeout_ms,
                                cfg->opt->ttl_s * 1000 / 2);
    etcd = tem_etcd_create(&ec, errp);
    if (!etcd) {
        return NULL;
    }

    struct tem_cluster *cl = xzalloc(sizeof *cl);
    cl->core = core;
    cl->etcd = etcd;
    cl->zctx = cfg->zctx;
    cl->public_key = cfg->public_key ? xstrdup(cfg->public_key) : NULL;
    cl->secret_key = cfg->secret_key ? xstrdup(cfg->secret_key) : NULL;
    cl->member_keys = cfg->member_keys;
    cl->hosts_changed = cfg->hosts_changed;
    cl->aux = cfg->aux;
    cl->id = xstrdup(cfg->member_id);
    cl->standby = cfg->opt->standby;
    cl->endpoints = xstrdup(cfg->opt->etcd);
    cl->warn_etcd = (struct tem_warn) TEM_WARN_INITIALIZER;
    cl->warn_value = (struct tem_warn) TEM_WARN_INITIALIZER;
    cl->warn_member = (struct tem_warn) TEM_WARN_INITIALIZER;

    struct json_object *v = json_object_new_object();
    json_object_object_add(v, "id", json_object_new_string(cl->id));
    json_object_object_add(v, "listen", json_object_new_string(cfg->listen));
    json_object_object_add(v, "pub", json_object_new_string(cfg->pub));
    json_object_object_add(v, "public_key", cfg->public_key
                           ? json_object_new_string(cfg->public_key)
                           : NULL);
    json_object_object_add(v, "standby",
                           json_object_new_boolean(cl->standby));
    cl->member_value = xstrdup(json_object_to_json_string_ext(
        v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(v);

    static const struct {
        const char *key;
        bool prefix;
    } keys[N_VIEWS] = {
        [VIEW_MEMBERS] = { TEM_ETCD_MEMBERS, true },
        [VIEW_EVENTS] = { TEM_ETCD_EVENTS, true },
        [VIEW_ASSIGN] = { TEM_ETCD_ASSIGN, true },
        [VIEW_LEADER] = { TEM_ETCD_LEADER, false },
        [VIEW_HOSTS] = { TEM_ETCD_HOSTS, true },
    };
    for (enum tem_cluster_view_id i = 0; i < N_VIEWS; i++) {
        cl->views[i].key = keys[i].key;
        cl->views[i].prefix = keys[i].prefix;
        cl->views[i].state = VIEW_READ_DUE;
    }
    int error = tem_etcd_lease_start(cl->etcd);
    if (error) {
        *errp = xasprintf("etcd lease: %s", strerror(error));
        tem_cluster_destroy(cl, 0);
        return NULL;
    }
    tpm_log(TPM_LOG_INFO, "cluster: member %s%s on etcd %s (lease TTL %"
            PRIu32" s)", cl->id, cl->standby ? " (standby)" : "",
            cl->endpoints, cfg->opt->ttl_s);
    return cl;
}

void
tem_cluster_destroy(struct tem_cluster *cl, uint32_t wait_ms)
{
    if (!cl) {
        return;
    }
    if (wait_ms && cl->lease_held
        && !tem_etcd_lease_stop(cl->etcd, true, TOK(TOK_REVOKE, 0))) {
        uint64_t end = tem_cluster_now__() + wait_ms * 1000000ULL;
        bool done = false;
        while (!done) {
            uint64_t now = tem_cluster_now__();
            if (now >= end) {
                break;
            }
            struct pollfd pfd = { .fd = tem_etcd_fd(cl->etcd),
                                  .events = POLLIN };
            poll(&pfd, 1, (int) ((end - now + 999999) / 1000000));
            struct tem_etcd_result *r;
            while ((r = tem_etcd_recv(cl->etcd))) {
                done |= r->token == TOK(TOK_REVOKE, 0);
                tem_etcd_result_free(r);
            }
        }
        tpm_log(TPM_LOG_INFO, "cluster: lease %s", done ? "given back"
                : "not given back in time: it expires after its TTL");
    }
    tem_etcd_destroy(cl->etcd);
    tem_cluster_members_clear__(cl);
    tem_cluster_events_clear__(cl);
    tem_cluster_assigns_clear__(cl);
    tem_cluster_hosts_clear__(cl);
    free(cl->hosts);
    tem_allow_free(cl->hosts_allow);
    if (cl->secret_key) {
        memset(cl->secret_key, 0, strlen(cl->secret_key));
    }
    free(cl->secret_key);
    free(cl->public_key);
    for (size_t i = 0; i < cl->n_owned; i++) {
        free(cl->owned[i].name);
    }
    free(cl->owned);
    free(cl->members);
    free(cl->events);
    free(cl->assigns);
    free(cl->leader);
    free(cl->ctl.name);
    free(cl->ctl.definition);
    free(cl->member_value);
    free(cl->endpoints);
    free(cl->id);
    free(cl);
}

int
tem_cluster_fd(const struct tem_cluster *cl)
{
    return tem_etcd_fd(cl->etcd);
}

/* ---------------------------------------------------------------------- */
/* Views. */

static void
tem_cluster_add_int__(struct json_object *o, const char *key, int64_t v)
{
    json_object_object_add(o, key, json_object_new_int64(v));
}

static int
tem_cluster_cmp_u32__(const void *a_, const void *b_)
{
    uint32_t a = *(const uint32_t *) a_, b = *(const uint32_t *) b_;
    return a < b ? -1 : a > b;
}

struct json_object *
tem_cluster_status_json(const struct tem_cluster *cl)
{
    struct json_object *o = json_object_new_object();

    json_object_object_add(o, "member_id", json_object_new_string(cl->id));
    json_object_object_add(o, "etcd", json_object_new_string(cl->endpoints));
    json_object_object_add(o, "standby",
                           json_object_new_boolean(cl->standby));
    tem_cluster_add_int__(o, "lease", tem_etcd_lease_id(cl->etcd));
    json_object_object_add(o, "registered",
                           json_object_new_boolean(cl->registered));
    json_object_object_add(o, "leader", cl->leader
                           ? json_object_new_string(cl->leader) : NULL);
    json_object_object_add(o, "is_leader",
                           json_object_new_boolean(cl->is_leader));
    bool synced = true;
    for (size_t i = 0; i < N_VIEWS; i++) {
        synced &= cl->views[i].state == VIEW_WATCHING;
    }
    json_object_object_add(o, "synced", json_object_new_boolean(synced));

    struct json_object *m = json_object_new_array();
    struct json_object *refused = json_object_new_object();
    size_t n_refused = 0;
    for (size_t i = 0; i < cl->n_members; i++) {
        const struct tem_cluster_member *mb = &cl->members[i];
        json_object_array_add(m, json_object_new_string(mb->id));
        if (!tem_cluster_member_ok__(cl, mb) && mb->why) {
            json_object_object_add(refused, mb->id,
                                   json_object_new_string(mb->why));
            n_refused++;
        }
    }
    json_object_object_add(o, "members", m);
    tem_cluster_add_int__(o, "members_refused", n_refused);
    json_object_object_add(o, "refused", refused);
    json_object_object_add(o, "member_checks",
                           json_object_new_boolean(cl->public_key != NULL));
    tem_cluster_add_int__(o, "member_keys", cl->member_keys
                          ? cl->member_keys->n : 0);
    tem_cluster_add_int__(o, "hosts_in_etcd", cl->hosts_allow
                          ? cl->hosts_allow->n_hosts : 0);
    tem_cluster_add_int__(o, "events_defined", cl->n_events);

    uint32_t *ids = xmalloc((cl->n_owned + 1) * sizeof *ids);
    for (size_t i = 0; i < cl->n_owned; i++) {
        ids[i] = cl->owned[i].id;
    }
    qsort(ids, cl->n_owned, sizeof *ids, tem_cluster_cmp_u32__);
    struct json_object *own = json_object_new_array();
    for (size_t i = 0; i < cl->n_owned; i++) {
        json_object_array_add(own, json_object_new_int64(ids[i]));
    }
    free(ids);
    json_object_object_add(o, "events_owned", own);
    /* The lost members this one stands in for (a standby's). */
    struct json_object *for_ = json_object_new_array();
    for (size_t i = 0; i < cl->n_assigns; i++) {
        const struct tem_cluster_assign *a = &cl->assigns[i];
        bool seen = false;
        for (size_t j = 0; j < i && a->stands_in; j++) {
            seen |= (cl->assigns[j].stands_in
                     && !strcmp(cl->assigns[j].member, a->member)
                     && !strcmp(cl->assigns[j].stands_in, a->stands_in));
        }
        if (a->stands_in && !seen && !strcmp(a->member, cl->id)) {
            json_object_array_add(for_,
                                  json_object_new_string(a->stands_in));
        }
    }
    json_object_object_add(o, "standing_in_for", for_);

    tem_cluster_add_int__(o, "takeovers", cl->takeovers);
    tem_cluster_add_int__(o, "events_moved", cl->events_moved);
    tem_cluster_add_int__(o, "assign_writes", cl->assign_writes);
    tem_cluster_add_int__(o, "leaderships", cl->leaderships);
    tem_cluster_add_int__(o, "events_gained", cl->gained);
    tem_cluster_add_int__(o, "events_released", cl->released);
    tem_cluster_add_int__(o, "events_refused", cl->refused);
    tem_cluster_add_int__(o, "resyncs", cl->resyncs);
    tem_cluster_add_int__(o, "watch_down", cl->watch_down);
    tem_cluster_add_int__(o, "etcd_errors", cl->etcd_errors);
    tem_cluster_add_int__(o, "bad_values", cl->bad_values);
    tem_cluster_add_int__(o, "leases", cl->leases);
    tem_cluster_add_int__(o, "leases_lost", cl->leases_lost);
    tem_cluster_add_int__(o, "probes", cl->probes);
    tem_cluster_add_int__(o, "probes_failed", cl->probes_failed);
    tem_cluster_add_int__(o, "leader_refused", cl->leader_refused);
    tem_cluster_add_int__(o, "hosts_bad", cl->hosts_bad);

    struct tem_etcd_stats s;
    tem_etcd_stats(cl->etcd, &s);
    struct json_object *e = json_object_new_object();
#define TEM_CLUSTER_STAT(F) tem_cluster_add_int__(e, #F, s.F)
    TEM_CLUSTER_STAT(requests);
    TEM_CLUSTER_STAT(transport_errors);
    TEM_CLUSTER_STAT(bad_responses);
    TEM_CLUSTER_STAT(etcd_errors);
    TEM_CLUSTER_STAT(retries);
    TEM_CLUSTER_STAT(failed);
    TEM_CLUSTER_STAT(endpoint_switches);
    TEM_CLUSTER_STAT(refused);
    TEM_CLUSTER_STAT(results_dropped);
    TEM_CLUSTER_STAT(keepalives);
    TEM_CLUSTER_STAT(leases_granted);
    TEM_CLUSTER_STAT(leases_lost);
    TEM_CLUSTER_STAT(watch_reconnects);
    TEM_CLUSTER_STAT(watch_duplicates);
    TEM_CLUSTER_STAT(watch_compacted);
#undef TEM_CLUSTER_STAT
    json_object_object_add(o, "client", e);
    return o;
}

void
tem_cluster_metrics(const struct tem_cluster *cl, struct tem_metrics *m)
{
    struct tem_etcd_stats s;

    tem_etcd_stats(cl->etcd, &s);
    tem_metrics_gauge(m, "trumpet_tem_cluster_leader", "1 if this TEM is "
                      "the cluster's leader (it assigns the events).",
                      cl->is_leader);
    tem_metrics_gauge(m, "trumpet_tem_cluster_registered", "1 while this "
                      "TEM's member key is on a live lease.",
                      cl->registered);
    tem_metrics_gauge(m, "trumpet_tem_cluster_members", "Members of the "
                      "cluster, as this TEM last read them.",
                      cl->n_members);
    size_t n_refused = 0;
    for (size_t i = 0; i < cl->n_members; i++) {
        n_refused += (cl->members[i].why
                      && !tem_cluster_member_ok__(cl, &cl->members[i]));
    }
    tem_metrics_gauge(m, "trumpet_tem_cluster_members_refused", "Members "
                      "refused: key not in --cluster-keys, or not held.",
                      n_refused);
    tem_metrics_counter(m, "trumpet_tem_cluster_probes_failed_total",
                        "Checks of a member's key that failed.",
                        cl->probes_failed);
    tem_metrics_counter(m, "trumpet_tem_cluster_leader_refused_total",
                        "Times the leader's assignments were not followed "
                        "(the leader refused).", cl->leader_refused);
    tem_metrics_gauge(m, "trumpet_tem_cluster_hosts_in_etcd", "Host keys "
                      "read from /trumpet/hosts/.", cl->hosts_allow
                      ? cl->hosts_allow->n_hosts : 0);
    tem_metrics_counter(m, "trumpet_tem_cluster_hosts_bad_total",
                        "Keys of /trumpet/hosts/ not understood (ignored).",
                        cl->hosts_bad);
    tem_metrics_gauge(m, "trumpet_tem_cluster_events_defined", "Events "
                      "defined in the cluster.", cl->n_events);
    tem_metrics_gauge(m, "trumpet_tem_cluster_events_owned", "Events "
                      "assigned to this TEM and defined in it.",
                      cl->n_owned);
    tem_metrics_counter(m, "trumpet_tem_cluster_takeovers_total",
                        "Members lost whose events this TEM, as leader, "
                        "reassigned.", cl->takeovers);
    tem_metrics_counter(m, "trumpet_tem_cluster_events_moved_total",
                        "Assignments this TEM, as leader, moved from one "
                        "member to another.", cl->events_moved);
    tem_metrics_counter(m, "trumpet_tem_cluster_events_gained_total",
                        "Events assigned to this TEM and installed.",
                        cl->gained);
    tem_metrics_counter(m, "trumpet_tem_cluster_events_released_total",
                        "Events removed from this TEM: reassigned or "
                        "deleted.", cl->released);
    tem_metrics_counter(m, "trumpet_tem_cluster_resyncs_total",
                        "Views of etcd read again: a compacted watch or a "
                        "failure.", cl->resyncs);
    tem_metrics_counter(m, "trumpet_tem_cluster_etcd_errors_total",
                        "Requests to etcd answered with an error (after "
                        "the client's retries).", cl->etcd_errors);
    tem_metrics_counter(m, "trumpet_tem_cluster_leases_lost_total",
                        "Leases of this TEM that expired.", cl->leases_lost);
    tem_metrics_counter(m, "trumpet_tem_cluster_etcd_transport_errors_total",
                        "Transfers to etcd that failed at the transport.",
                        s.transport_errors);
}

/* ---------------------------------------------------------------------- */
/* Keys. */

void
tem_cluster_set_member_keys(struct tem_cluster *cl,
                            const struct tem_allow *keys)
{
    cl->member_keys = keys;
    for (size_t i = 0; i < cl->n_members; i++) {
        tem_cluster_member_recheck__(&cl->members[i]);
    }
    cl->dirty_assign = cl->dirty_local = true;
}

const struct tem_allow *
tem_cluster_hosts(const struct tem_cluster *cl)
{
    return cl->hosts_allow;
}

char *
tem_cluster_probe_answer(const struct tem_cluster *cl, const void *body,
                         size_t len)
{
    return tem_probe_answer(body, len, cl->id);
}
