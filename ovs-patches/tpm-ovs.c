/*
 * Trumpet packet monitor inside Open vSwitch's userspace datapath: see
 * tpm-ovs.h for where each function is called, docs/operations.md for the
 * commands and knobs.
 *
 * Host-level events.  An event added with tpm/event-add is one event,
 * whatever the number of PMD threads.  It is installed on every PMD (and
 * on PMDs created later).  If its threshold can be split (lib/split.h:
 * "sum(x) > T" and the like) and there are n > 1 PMDs, each gets T/n;
 * when one reports, the main thread polls the others for the same epoch
 * and group and reports the event if the total holds (the paper's local
 * TEM).  Otherwise each PMD's satisfaction is the host's.
 *
 * Commands wait (bounded by tpm-command-timeout) for every PMD's answer
 * before replying, so a reply says what really happened; an add that some
 * PMD refuses is rolled back everywhere.
 */
#include <config.h>

#include "tpm-ovs.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coverage.h"
#include "dp-packet.h"
#include "openvswitch/dynamic-string.h"
#include "openvswitch/json.h"
#include "openvswitch/list.h"
#include "openvswitch/vlog.h"
#include "ovs-atomic.h"
#include "ovs-thread.h"
#include "openvswitch/poll-loop.h"
#include "smap.h"
#include "timeval.h"
#include "unixctl.h"
#include "util.h"

/* libtpm. */
#include "clock.h"
#include "event.h"
#include "split.h"
#include "tpm-log.h"
#include "tpm.h"

VLOG_DEFINE_THIS_MODULE(tpm);

COVERAGE_DEFINE(tpm_satisfaction);
COVERAGE_DEFINE(tpm_poll_timeout);
COVERAGE_DEFINE(tpm_pmd_create_failed);

/* Knobs (ovsdb Open_vSwitch other_config), with their current values. */
struct tpm_knobs {
    struct tpm_params params;
    uint32_t sweep_every;       /* Forced sweep step every N busy
                                 * iterations. */
    uint64_t command_timeout_ns;
    uint64_t poll_timeout_ns;
    uint32_t report_log;        /* Host satisfactions kept. */
};

/* One PMD thread's monitor. */
struct tpm_pmd {
    struct ovs_list node;       /* In 'pmds', under 'pmds_mutex'. */
    unsigned core_id;
    struct tpm *tpm;

    /* PMD thread only. */
    bool full_batch;            /* A full rx batch in this iteration. */
    uint32_t busy_iterations;   /* Since the last sweep step. */
    uint32_t unwatched_iterations;  /* While no event is installed. */
    uint64_t now;               /* Clock read for the latest rx batch. */

    /* Written by the PMD, read by others. */
    atomic_uint64_t steps_idle;     /* Sweep steps in drained slots. */
    atomic_uint64_t steps_forced;   /* Sweep steps forced while
                                     * saturated. */
    atomic_uint64_t last_iteration_ns;
};

static struct ovs_mutex pmds_mutex = OVS_MUTEX_INITIALIZER;
static struct ovs_list pmds OVS_GUARDED_BY(pmds_mutex)
    = OVS_LIST_INITIALIZER(&pmds);
static uint64_t pmds_gen OVS_GUARDED_BY(pmds_mutex);  /* Bumped on every
                                                        * change. */

/* Knobs the PMD threads read on every sweep step, so a change applies at
 * once (the others apply to PMD threads created later). */
static atomic_uint64_t live_sweep_budget_ns = 10 * 1000;
static atomic_uint32_t live_sweep_every = 64;

/* Host events installed or being installed: with none, the PMDs skip the
 * monitor entirely (no clock read, no parsing). */
static atomic_uint32_t n_watch = 0;

/* Packets of non-PMD ports, not monitored. */
static atomic_uint64_t non_pmd_skipped = 0;

/* Main-thread state. */
static struct tpm_knobs knobs;
static bool knobs_set;
static uint64_t next_cookie = 1;
static uint32_t next_event_id = 1;

struct host_event {
    struct ovs_list node;       /* In 'host_events', in order of adding. */
    char *name;
    uint32_t id;
    struct tpm_event *def;      /* As parsed (full threshold). */
    bool split;                 /* Threshold split over the PMDs. */
    const char *no_split_why;
    uint64_t n_reports;         /* Host-level satisfactions. */
    bool has_last;              /* The latest satisfaction: */
    uint64_t last_epoch;
    struct tpm_key last_group;
};

static struct ovs_list host_events = OVS_LIST_INITIALIZER(&host_events);

/* Host satisfactions, newest last (a ring of knobs.report_log), each
 * kept as its JSON line (the format of tpm/report-json.h, with keys
 * sorted, plus "pmds" and "missing" when the local TEM combined several
 * PMDs). */
struct host_report {
    char *event;
    char *json;
};
static struct host_report *report_log;
static size_t report_log_size, report_log_n, report_log_next;

/* Local TEM: pending decisions for split events.  Part numbers index the
 * PMD list snapshot taken when the decision started ('parts'). */
static struct tpm_decisions *decisions;
struct decision_ctx {
    struct tpm_pmd **parts;
    uint64_t *poll_cookies;
};

static uint64_t
now_ns(void)
{
    return tpm_clock_real_ns();
}

static void
tpm_log_to_vlog(enum tpm_log_level level, const char *msg)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(5, 20);
    switch (level) {
    case TPM_LOG_ERR:
        VLOG_ERR_RL(&rl, "%s", msg);
        break;
    case TPM_LOG_WARN:
        VLOG_WARN_RL(&rl, "%s", msg);
        break;
    case TPM_LOG_INFO:
        VLOG_INFO_RL(&rl, "%s", msg);
        break;
    case TPM_LOG_DBG:
    default:
        VLOG_DBG_RL(&rl, "%s", msg);
        break;
    }
}

/* PMD registry. */

/* Returns the registered PMDs (caller frees the array).  The pointers stay
 * valid while the main thread runs: PMDs are destroyed only after they
 * leave the registry, and the main thread ignores a PMD that left. */
static uint64_t snapshot_gen;

static struct tpm_pmd **
pmds_snapshot(size_t *n)
{
    struct tpm_pmd **v = NULL, *p;
    size_t cap = 0;

    *n = 0;
    ovs_mutex_lock(&pmds_mutex);
    snapshot_gen = pmds_gen;
    LIST_FOR_EACH (p, node, &pmds) {
        if (*n == cap) {
            v = x2nrealloc(v, &cap, sizeof *v);
        }
        v[(*n)++] = p;
    }
    ovs_mutex_unlock(&pmds_mutex);
    return v;
}

static char *install_event(struct tpm *, const struct host_event *,
                           double threshold);

struct tpm_pmd *
tpm_ovs_pmd_create(unsigned core_id, unsigned non_pmd_id)
{
    if (core_id == non_pmd_id) {
        return NULL;
    }
    if (!knobs_set) {
        tpm_params_init(&knobs.params);
    }

    char *error;
    struct tpm *tpm = tpm_create(&knobs.params, &error);
    if (!tpm) {
        COVERAGE_INC(tpm_pmd_create_failed);
        VLOG_ERR("core %u: cannot create the packet monitor (%s); this PMD "
                 "runs unmonitored", core_id, error);
        free(error);
        return NULL;
    }

    /* Host events apply to new PMDs too.  No thread runs this monitor
     * yet, so it is set up directly; split shares are evened out over
     * all PMDs by tpm_ovs_run() (reshare). */
    size_t n_now;
    free(pmds_snapshot(&n_now));
    struct host_event *he;
    LIST_FOR_EACH (he, node, &host_events) {
        error = install_event(tpm, he,
                              he->split ? he->def->threshold->num
                                          / (n_now + 1) : 0);
        if (error) {
            VLOG_WARN("core %u: event %s not installed: %s", core_id,
                      he->name, error);
            free(error);
        }
    }

    struct tpm_pmd *p = xzalloc(sizeof *p);
    p->core_id = core_id;
    p->tpm = tpm;
    atomic_init(&p->steps_idle, 0);
    atomic_init(&p->steps_forced, 0);
    atomic_init(&p->last_iteration_ns, 0);
    ovs_mutex_lock(&pmds_mutex);
    ovs_list_push_back(&pmds, &p->node);
    pmds_gen++;
    ovs_mutex_unlock(&pmds_mutex);
    return p;
}

void
tpm_ovs_pmd_destroy(struct tpm_pmd *p)
{
    if (!p) {
        return;
    }
    ovs_mutex_lock(&pmds_mutex);
    ovs_list_remove(&p->node);
    pmds_gen++;
    ovs_mutex_unlock(&pmds_mutex);
    /* The PMD thread has exited; the main thread may still be in the
     * middle of talking to it only within one unixctl handler or run()
     * call, which the RCU grace period before this call outlasts. */
    tpm_destroy(p->tpm);
    free(p);
}

/* PMD thread. */

void
tpm_ovs_rx(struct tpm_pmd *p, const struct dp_packet_batch *batch)
{
    size_t n = dp_packet_batch_size(batch);

    if (!p) {
        uint64_t orig;
        atomic_add_relaxed(&non_pmd_skipped, n, &orig);
        return;
    }
    uint32_t watch;
    atomic_read_relaxed(&n_watch, &watch);
    if (!watch) {
        p->full_batch |= n == NETDEV_MAX_BURST;
        return;
    }

    struct tpm_frame frames[NETDEV_MAX_BURST];
    struct dp_packet *packet;
    DP_PACKET_BATCH_FOR_EACH (i, packet, batch) {
        frames[i].data = dp_packet_data(packet);
        frames[i].caplen = dp_packet_size(packet);
        frames[i].wirelen = dp_packet_size(packet);
    }
    p->now = now_ns();
    tpm_advance(p->tpm, p->now);
    tpm_process_batch(p->tpm, frames, n);
    if (n == NETDEV_MAX_BURST) {
        p->full_batch = true;
    }
}

void
tpm_ovs_pmd_iteration(struct tpm_pmd *p, uint64_t rx_packets)
{
    if (!p) {
        return;
    }
    uint32_t watch;
    atomic_read_relaxed(&n_watch, &watch);
    if (!watch) {
        /* No event: only commands (the first add) need this PMD. */
        p->full_batch = false;
        tpm_run_control(p->tpm, 16);
        if (!(++p->unwatched_iterations & 1023)) {
            /* Alive, for pmd_parked(): a clock read every 1024 loops. */
            atomic_store_relaxed(&p->last_iteration_ns, now_ns());
        }
        return;
    }
    /* The clock was read for the last batch; read it only if none came. */
    uint64_t now = rx_packets ? p->now : now_ns();
    if (!rx_packets) {
        tpm_advance(p->tpm, now);
    }

    /* Queue-adaptive (paper algorithm 2): a step when every queue came
     * back short; when the PMD is saturated, still one bounded step every
     * 'sweep_every' iterations so each sweep completes within its
     * epoch. */
    uint32_t every;
    atomic_read_relaxed(&live_sweep_every, &every);
    bool drained = !p->full_batch;
    p->full_batch = false;
    if (drained || ++p->busy_iterations >= every) {
        p->busy_iterations = 0;
        if (tpm_sweep_pending(p->tpm)) {
            uint64_t orig;
            atomic_add_relaxed(drained ? &p->steps_idle : &p->steps_forced,
                               1, &orig);
        }
        uint64_t budget;
        atomic_read_relaxed(&live_sweep_budget_ns, &budget);
        tpm_sweep_step(p->tpm, budget);
        tpm_run_control(p->tpm, 16);
    }
    atomic_store_relaxed(&p->last_iteration_ns, now);
}

/* Main thread: reports from the PMDs. */

static struct host_event *
host_event_find_id(uint32_t id)
{
    struct host_event *he;
    LIST_FOR_EACH (he, node, &host_events) {
        if (he->id == id) {
            return he;
        }
    }
    return NULL;
}

static struct host_event *
host_event_find(const char *name)
{
    struct host_event *he;
    LIST_FOR_EACH (he, node, &host_events) {
        if (!strcmp(he->name, name)) {
            return he;
        }
    }
    return NULL;
}

/* Returns the host event named 'name', or replies an error on 'conn' and
 * returns NULL. */
static struct host_event *
host_event_find_or_reply(struct unixctl_conn *conn, const char *name)
{
    struct host_event *he = host_event_find(name);
    if (!he) {
        char *msg = xasprintf("no event named %s", name);
        unixctl_command_reply_error(conn, msg);
        free(msg);
    }
    return he;
}

static struct json *
number_json(double v)
{
    return v == (double) (long long int) v && v > -9e15 && v < 9e15
           ? json_integer_create((long long int) v)
           : json_real_create(v);
}

static void
host_report(struct host_event *he, uint64_t epoch,
            const struct tpm_key *group, double value, int n_pmds,
            int n_missing)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(10, 50);
    struct tpm_key_field f[5];
    int n = tpm_key_fields(&he->def->group, group, f);

    struct json *g = json_object_create();
    for (int i = 0; i < n; i++) {
        json_object_put(g, f[i].name,
                        f[i].is_int ? json_integer_create(f[i].int_value)
                                    : json_string_create(f[i].str_value));
    }
    struct json *o = json_object_create();
    json_object_put_string(o, "event", he->name);
    json_object_put(o, "epoch", json_integer_create(epoch));
    json_object_put(o, "group", g);
    json_object_put(o, "value", number_json(value));
    if (n_pmds > 1 || n_missing) {
        json_object_put(o, "pmds", json_integer_create(n_pmds));
    }
    if (n_missing) {
        json_object_put(o, "missing", json_integer_create(n_missing));
    }
    char *line = json_to_string(o, JSSF_SORT);
    json_destroy(o);

    he->n_reports++;
    he->has_last = true;
    he->last_epoch = epoch;
    he->last_group = *group;
    COVERAGE_INC(tpm_satisfaction);
    VLOG_INFO_RL(&rl, "satisfied: %s", line);

    if (!report_log_size) {
        free(line);
        return;
    }
    struct host_report *r = &report_log[report_log_next];
    free(r->event);
    free(r->json);
    r->event = xstrdup(he->name);
    r->json = line;
    report_log_next = (report_log_next + 1) % report_log_size;
    report_log_n = MIN(report_log_n + 1, report_log_size);
}

/* Pending command replies, keyed by cookie. */
struct reply {
    uint64_t cookie;
    struct tpm_report r;
    bool done;
    bool parked;                /* Its PMD is parked: not waited for. */
    size_t part;                /* Index of its PMD in the snapshot. */
};

/* A PMD that has not run an iteration for this long is "parked": OVS
 * blocks PMD threads that have no rx queue (pmd_thread_main() waits for a
 * reload), and a PMD may also be descheduled.  Commands still go to its
 * ring, which it drains when it runs again (before it can see a packet of
 * a new rx queue, at most one batch later); the main thread does not wait
 * for its answer. */
#define TPM_PMD_PARKED_NS (50ULL * 1000 * 1000)

static bool
pmd_parked(const struct tpm_pmd *p, uint64_t now)
{
    uint64_t last;
    atomic_read_relaxed(&CONST_CAST(struct tpm_pmd *, p)->last_iteration_ns,
                        &last);
    return now - last > TPM_PMD_PARKED_NS;
}

/* Decides 'd' once every PMD answered or its deadline passed: reports
 * the event if the total holds.  A decided entry stays a while so that
 * late satisfactions for the same key are not decided twice. */
static void
decision_finish(struct tpm_decision *d, void *aux OVS_UNUSED)
{
    struct host_event *he = host_event_find_id(d->event);
    uint64_t now = now_ns();

    if (!he || (d->decided && now > d->expires_ns)) {
        tpm_decision_remove(decisions, d);
        return;
    }
    if (d->decided
        || (!tpm_decision_complete(d) && now < d->deadline_ns)) {
        return;
    }
    size_t missing;
    double total = tpm_decision_total(d, &missing);
    if (missing) {
        COVERAGE_INC(tpm_poll_timeout);
    }
    if (tpm_split_holds(he->def, total, he->def->threshold->num)) {
        host_report(he, d->epoch, &d->group, total, d->n_parts - missing,
                    missing);
    }
    d->decided = true;
    d->expires_ns = now + MAX(4 * knobs.poll_timeout_ns,
                              4 * he->def->interval_ns);
}

/* Handles one report popped from PMD number 'part' of 'parts'. */
static void
handle_report(struct tpm_pmd **parts, size_t n_parts, size_t part,
              const struct tpm_report *r, struct reply *waiting,
              size_t n_waiting)
{
    if (r->type != TPM_REPORT_SATISFIED) {
        for (size_t i = 0; i < n_waiting; i++) {
            if (waiting[i].cookie == r->cookie && !waiting[i].done) {
                waiting[i].r = *r;
                waiting[i].done = true;
                return;
            }
        }
        if (r->type == TPM_REPORT_ADD_DONE && r->error) {
            /* A parked PMD refused an event it was not waited for. */
            VLOG_WARN("pmd core %u: event id %"PRIu32" not installed: %s",
                      parts[part]->core_id, r->event_id, r->error);
        }
        /* A poll reply for a decision, or a late reply. */
        if (r->type == TPM_REPORT_POLL_REPLY) {
            struct host_event *he = host_event_find_id(r->event_id);
            struct tpm_key g = r->group;
            struct tpm_decision *d
                = he ? tpm_decision_find(decisions, r->event_id, r->epoch,
                                         &g) : NULL;
            if (d && d->aux != snapshot_gen) {
                tpm_decision_missing(d, part);
            } else if (d && !d->decided) {
                if (r->status == TPM_POLL_OK) {
                    tpm_decision_set(d, part, r->value);
                } else if (r->status == TPM_POLL_NO_GROUP) {
                    tpm_decision_set(d, part, 0);   /* No such traffic. */
                } else if (r->status == TPM_POLL_NOT_YET) {
                    /* Not swept yet: ask again. */
                    if (!tpm_submit_poll(parts[part]->tpm, r->event_id, &g,
                                         r->epoch, next_cookie++)) {
                        tpm_decision_missing(d, part);
                    }
                } else {
                    tpm_decision_missing(d, part);
                }
            }
        }
        free(r->error);
        return;
    }

    struct host_event *he = host_event_find_id(r->event_id);
    if (!he) {
        return;
    }
    if (!he->split || n_parts < 2) {
        host_report(he, r->epoch, &r->group, r->value, 1, 0);
        return;
    }
    struct tpm_decision *d = tpm_decision_find(decisions, r->event_id,
                                               r->epoch, &r->group);
    if (!d) {
        uint64_t now = now_ns();
        d = tpm_decision_start(decisions, r->event_id, r->epoch, &r->group,
                               n_parts, now, now + knobs.poll_timeout_ns);
        d->aux = snapshot_gen;
        for (size_t i = 0; i < n_parts; i++) {
            struct tpm_stats st;
            if (i == part) {
                continue;
            }
            tpm_get_stats(parts[i]->tpm, &st);
            if (!st.packets && pmd_parked(parts[i], now)) {
                /* A parked PMD that never saw a packet (no rx queue):
                 * its share of the total is exactly zero. */
                tpm_decision_set(d, i, 0);
            } else if (!tpm_submit_poll(parts[i]->tpm, r->event_id,
                                        &r->group, r->epoch,
                                        next_cookie++)) {
                tpm_decision_missing(d, i);
            }
        }
    } else if (d->aux != snapshot_gen) {
        /* PMDs came or went since: part numbers no longer match. */
        for (size_t i = 0; i < d->n_parts; i++) {
            tpm_decision_missing(d, i);
        }
    }
    if (!d->decided && d->aux == snapshot_gen) {
        tpm_decision_set(d, part, r->value);
    }
}

/* Drains every PMD's reports; command replies matching 'waiting' are
 * stored there. */
static void
drain_all(struct tpm_pmd **parts, size_t n_parts, struct reply *waiting,
          size_t n_waiting)
{
    for (size_t i = 0; i < n_parts; i++) {
        struct tpm_report r;
        while (tpm_pop_report(parts[i]->tpm, &r)) {
            handle_report(parts, n_parts, i, &r, waiting, n_waiting);
        }
    }
    tpm_decisions_for_each(decisions, decision_finish, NULL);
}

/* Waits until every entry of 'waiting' is done, or its PMD is parked, or
 * the command timeout passes.  Returns true if
 * all are done. */
static bool
wait_replies(struct tpm_pmd **parts, size_t n_parts, struct reply *waiting,
             size_t n_waiting)
{
    uint64_t deadline = now_ns() + knobs.command_timeout_ns;
    for (;;) {
        drain_all(parts, n_parts, waiting, n_waiting);
        uint64_t now = now_ns();
        size_t done = 0;
        for (size_t i = 0; i < n_waiting; i++) {
            if (!waiting[i].done && waiting[i].part < n_parts
                && pmd_parked(parts[waiting[i].part], now)) {
                waiting[i].done = waiting[i].parked = true;
            }
            done += waiting[i].done;
        }
        if (done == n_waiting) {
            return true;
        }
        if (now_ns() > deadline) {
            return false;
        }
        struct timespec ts = { 0, 20 * 1000 };
        nanosleep(&ts, NULL);
    }
}

/* Submits an add ('event', which the ring takes) or a delete of 'id' to
 * parts[i], retrying while its command ring is full, for at most the
 * command timeout.  Returns false if it could not be queued. */
static bool
submit_bounded(struct tpm_pmd **parts, size_t n, size_t i,
               enum tpm_report_type type, struct tpm_event *event,
               uint32_t id, uint64_t cookie)
{
    uint64_t deadline = now_ns() + knobs.command_timeout_ns;
    for (;;) {
        bool ok = type == TPM_REPORT_ADD_DONE
                  ? tpm_submit_add(parts[i]->tpm, event, id, cookie)
                  : tpm_submit_del(parts[i]->tpm, id, cookie);
        if (ok) {
            return true;
        }
        if (now_ns() > deadline) {
            return false;
        }
        drain_all(parts, n, NULL, 0);
        struct timespec ts = { 0, 50 * 1000 };
        nanosleep(&ts, NULL);
    }
}

static void delete_on(struct tpm_pmd **, size_t n, uint32_t id);
static char *add_on(struct tpm_pmd **, size_t n, const struct host_event *);

/* After PMDs came or went, gives every PMD an equal share of each split
 * event's threshold again (delete and re-add: the events' history on the
 * PMDs restarts). */
static void
reshare(struct tpm_pmd **parts, size_t n)
{
    static uint64_t shared_gen;
    if (shared_gen == snapshot_gen) {
        return;
    }
    shared_gen = snapshot_gen;
    struct host_event *he;
    LIST_FOR_EACH (he, node, &host_events) {
        if (he->split) {
            delete_on(parts, n, he->id);
            char *error = add_on(parts, n, he);
            if (error) {
                VLOG_WARN("event %s: re-sharing its threshold over %"PRIuSIZE
                          " PMDs failed: %s", he->name, n, error);
                free(error);
            }
        }
    }
}

void
tpm_ovs_run(void)
{
    size_t n;
    struct tpm_pmd **parts = pmds_snapshot(&n);
    drain_all(parts, n, NULL, 0);
    reshare(parts, n);
    free(parts);
}

void
tpm_ovs_wait(void)
{
    if (!ovs_list_is_empty(&host_events)) {
        /* Pick up satisfactions at least once per epoch. */
        poll_timer_wait(MAX(1, knobs.params.epoch_ns / 1000000));
    }
}

/* Knobs. */

/* Reads knob 'key' of 'cfg' as a time into '*ns'.  Returns false (and
 * logs) if it is set but invalid. */
static bool
knob_time(const struct smap *cfg, const char *key, uint64_t *ns)
{
    const char *s = smap_get(cfg, key);
    if (!s) {
        return true;
    }
    char *error = tpm_parse_time(s, ns);
    if (error) {
        VLOG_WARN("other_config:%s=\"%s\" rejected: %s; keeping the "
                  "previous value", key, s, error);
        free(error);
        return false;
    }
    return true;
}

/* Reads knob 'key' as an unsigned integer in ['min', 'max']. */
static bool
knob_uint(const struct smap *cfg, const char *key, uint64_t min,
          uint64_t max, uint32_t *value)
{
    const char *s = smap_get(cfg, key);
    if (!s) {
        return true;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < min || v > max) {
        VLOG_WARN("other_config:%s=\"%s\" rejected: expected an integer "
                  "in [%"PRIu64", %"PRIu64"]; keeping the previous value",
                  key, s, min, max);
        return false;
    }
    *value = v;
    return true;
}

static void
knobs_default(struct tpm_knobs *k)
{
    tpm_params_init(&k->params);
    k->sweep_every = 64;
    k->command_timeout_ns = 1000ULL * 1000 * 1000;
    k->poll_timeout_ns = 100ULL * 1000 * 1000;
    k->report_log = 1024;
}

/* Recreates every PMD's monitor with 'params'.  Runs only while no PMD
 * thread exists (at start, before PMDs are created) or logs that a
 * restart of the PMDs (e.g. changing pmd-cpu-mask) applies it. */
void
tpm_ovs_set_config(const struct smap *cfg)
{
    struct tpm_knobs k;
    bool ok = true;

    if (!knobs_set) {
        knobs_default(&knobs);
        knobs_set = true;
        decisions = tpm_decisions_create();
    }
    k = knobs;
    uint64_t epoch = k.params.epoch_ns, budget = k.params.sweep_budget_ns;
    ok &= knob_time(cfg, "tpm-epoch", &epoch);
    ok &= knob_time(cfg, "tpm-sweep-budget", &budget);
    ok &= knob_uint(cfg, "tpm-flow-table-size", 64, 1u << 28,
                    &k.params.flow_table_size);
    ok &= knob_uint(cfg, "tpm-max-events", 1, 1u << 20,
                    &k.params.max_events);
    ok &= knob_uint(cfg, "tpm-max-triggers", 1, 1u << 26,
                    &k.params.max_triggers);
    ok &= knob_uint(cfg, "tpm-dos-threshold", 0, UINT32_MAX,
                    &k.params.dos_threshold);
    ok &= knob_uint(cfg, "tpm-history", 1, 1024, &k.params.history_len);
    ok &= knob_uint(cfg, "tpm-sweep-every", 1, 1u << 20, &k.sweep_every);
    ok &= knob_uint(cfg, "tpm-report-log", 0, 1u << 20, &k.report_log);
    uint64_t ct = k.command_timeout_ns, pt = k.poll_timeout_ns;
    ok &= knob_time(cfg, "tpm-command-timeout", &ct);
    ok &= knob_time(cfg, "tpm-poll-timeout", &pt);
    k.params.epoch_ns = epoch;
    k.params.sweep_budget_ns = budget;
    k.params.max_children = MIN(k.params.max_children,
                                k.params.max_triggers);
    k.command_timeout_ns = ct;
    k.poll_timeout_ns = pt;
    if (!ok) {
        return;
    }

    char *error = tpm_params_check(&k.params);
    if (error) {
        VLOG_WARN("tpm knobs rejected: %s; keeping the previous values",
                  error);
        free(error);
        return;
    }
    struct host_event *he;
    LIST_FOR_EACH (he, node, &host_events) {
        if (he->def->interval_ns % k.params.epoch_ns) {
            VLOG_WARN("other_config:tpm-epoch rejected: event %s has an "
                      "interval that is not a multiple of it; keeping the "
                      "previous value", he->name);
            return;
        }
    }

    if (memcmp(&k.params, &knobs.params, sizeof k.params)) {
        size_t n;
        struct tpm_pmd **parts = pmds_snapshot(&n);
        free(parts);
        if (n) {
            VLOG_INFO("tpm monitor knobs changed; they apply to PMD threads "
                      "created from now on (running ones keep theirs)");
        }
    }
    if (k.report_log != report_log_size || !report_log) {
        /* Keep the newest reports that fit. */
        size_t size = k.report_log;
        struct host_report *log = xcalloc(MAX(size, 1), sizeof *log);
        size_t keep = MIN(report_log_n, size);
        for (size_t i = 0; i < report_log_n; i++) {
            size_t k_old = (report_log_next + report_log_size - report_log_n
                            + i) % report_log_size;
            if (i >= report_log_n - keep) {
                log[i - (report_log_n - keep)] = report_log[k_old];
            } else {
                free(report_log[k_old].event);
                free(report_log[k_old].json);
            }
        }
        free(report_log);
        report_log = log;
        report_log_size = size;
        report_log_n = keep;
        report_log_next = size ? keep % size : 0;
    }
    knobs = k;
    atomic_store_relaxed(&live_sweep_budget_ns, k.params.sweep_budget_ns);
    atomic_store_relaxed(&live_sweep_every, k.sweep_every);
}

/* Commands. */

/* Installs host event 'he' on monitor 'tpm' with 'threshold' (the share
 * of this monitor, if split), directly (owner-thread API): only for a
 * monitor no thread runs yet.  Returns an error or NULL. */
static char *
install_event(struct tpm *tpm, const struct host_event *he,
              double threshold)
{
    struct tpm_event *copy = tpm_event_clone(he->def);
    if (he->split) {
        tpm_event_set_threshold(copy, threshold);
    }
    char *error = tpm_event_add(tpm, copy, he->id);
    if (error) {
        tpm_event_destroy(copy);
    }
    return error;
}

static void
host_event_free(struct host_event *he)
{
    if (he) {
        free(he->name);
        tpm_event_destroy(he->def);
        free(he);
    }
}

/* Submits deletion of event 'id' to 'parts' and waits. */
static void
delete_on(struct tpm_pmd **parts, size_t n, uint32_t id)
{
    struct reply *w = xcalloc(MAX(n, 1), sizeof *w);
    for (size_t i = 0; i < n; i++) {
        w[i].cookie = next_cookie++;
        w[i].part = i;
        if (!submit_bounded(parts, n, i, TPM_REPORT_DEL_DONE, NULL, id,
                            w[i].cookie)) {
            w[i].done = true;
        }
    }
    wait_replies(parts, n, w, n);
    free(w);
}

static void
tpm_unixctl_event_add(struct unixctl_conn *conn, int argc,
                      const char *argv[], void *aux OVS_UNUSED)
{
    struct ds def = DS_EMPTY_INITIALIZER;
    for (int i = 2; i < argc; i++) {
        ds_put_format(&def, "%s%s", i > 2 ? " " : "", argv[i]);
    }

    struct tpm_event *ev;
    char *error = tpm_event_parse(argv[1], ds_cstr(&def), &ev);
    ds_destroy(&def);
    if (error) {
        unixctl_command_reply_error(conn, error);
        free(error);
        return;
    }
    if (host_event_find(argv[1])) {
        char *msg = xasprintf("event %s already exists (tpm/event-del it "
                              "first)", argv[1]);
        unixctl_command_reply_error(conn, msg);
        free(msg);
        tpm_event_destroy(ev);
        return;
    }
    if (tpm_event_needs_tcp_state(ev)) {
        unixctl_command_reply_error(conn, "the predicate uses TCP-state "
                                    "variables (is_lost, is_burst, rtt, "
                                    "seq, ack, dup), which the monitor "
                                    "does not track yet");
        tpm_event_destroy(ev);
        return;
    }
    if (ev->interval_ns % knobs.params.epoch_ns) {
        char a[32], b[32];
        char *msg = xasprintf("interval %s is not a multiple of the epoch "
                              "%s (other_config:tpm-epoch)",
                              tpm_time_format(ev->interval_ns, a, sizeof a),
                              tpm_time_format(knobs.params.epoch_ns, b,
                                              sizeof b));
        unixctl_command_reply_error(conn, msg);
        free(msg);
        tpm_event_destroy(ev);
        return;
    }

    struct host_event *he = xzalloc(sizeof *he);
    he->name = xstrdup(argv[1]);
    he->id = next_event_id++;
    he->def = ev;
    he->split = tpm_split_supported(ev, &he->no_split_why);

    size_t n;
    struct tpm_pmd **parts = pmds_snapshot(&n);
    /* Wake the PMDs' monitors before the event reaches them. */
    atomic_store_relaxed(&n_watch, ovs_list_size(&host_events) + 1);
    error = add_on(parts, n, he);
    if (error) {
        unixctl_command_reply_error(conn, error);
        free(error);
        host_event_free(he);
        atomic_store_relaxed(&n_watch, ovs_list_size(&host_events));
    } else {
        ovs_list_push_back(&host_events, &he->node);
        struct ds reply = DS_EMPTY_INITIALIZER;
        ds_put_format(&reply, "event %s added on %"PRIuSIZE" PMD thread%s",
                      he->name, n, n == 1 ? "" : "s");
        if (n > 1 && he->split) {
            ds_put_format(&reply, ", threshold %.17g split %.17g each",
                          ev->threshold->num, ev->threshold->num / n);
        } else if (n > 1) {
            ds_put_format(&reply, " (threshold not split: %s)",
                          he->no_split_why);
        }
        unixctl_command_reply(conn, ds_cstr(&reply));
        ds_destroy(&reply);
    }
    free(parts);
}

/* Adds host event 'he' on 'parts' (each with its share of a split
 * threshold) and waits for every answer.  Returns NULL, or an error that
 * names each PMD that refused or did not answer; then the event has been
 * removed again where it was added (nothing half-applied). */
static char *
add_on(struct tpm_pmd **parts, size_t n, const struct host_event *he)
{
    double *shares = xcalloc(MAX(n, 1), sizeof *shares);
    if (he->split) {
        tpm_split_threshold(he->def->threshold->num, n, NULL, shares);
    }
    struct reply *w = xcalloc(MAX(n, 1), sizeof *w);
    for (size_t i = 0; i < n; i++) {
        struct tpm_event *copy = tpm_event_clone(he->def);
        if (he->split) {
            tpm_event_set_threshold(copy, shares[i]);
        }
        w[i].cookie = next_cookie++;
        w[i].part = i;
        if (!submit_bounded(parts, n, i, TPM_REPORT_ADD_DONE, copy, he->id,
                            w[i].cookie)) {
            tpm_event_destroy(copy);
            w[i].done = true;
            w[i].r.error = xasprintf("command queue full (PMD parked or "
                                     "stalled)");
        }
    }
    bool all = wait_replies(parts, n, w, n);

    struct ds err = DS_EMPTY_INITIALIZER;
    for (size_t i = 0; i < n; i++) {
        if (!w[i].done) {
            ds_put_format(&err, "%score %u did not answer within "
                          "tpm-command-timeout", err.length ? "; " : "",
                          parts[i]->core_id);
        } else if (w[i].r.error) {
            ds_put_format(&err, "%score %u: %s", err.length ? "; " : "",
                          parts[i]->core_id, w[i].r.error);
            free(w[i].r.error);
        }
    }
    if (!all || err.length) {
        delete_on(parts, n, he->id);
    }
    free(w);
    free(shares);
    return err.length ? ds_steal_cstr(&err) : (ds_destroy(&err), NULL);
}

static void
tpm_unixctl_event_del(struct unixctl_conn *conn, int argc OVS_UNUSED,
                      const char *argv[], void *aux OVS_UNUSED)
{
    struct host_event *he = host_event_find_or_reply(conn, argv[1]);
    if (!he) {
        return;
    }
    size_t n;
    struct tpm_pmd **parts = pmds_snapshot(&n);
    delete_on(parts, n, he->id);
    free(parts);
    ovs_list_remove(&he->node);
    host_event_free(he);
    atomic_store_relaxed(&n_watch, ovs_list_size(&host_events));
    unixctl_command_reply(conn, NULL);
}

static void
format_event(struct ds *s, const struct host_event *he)
{
    char *group = tpm_group_to_string(&he->def->group);
    char iv[32];
    ds_put_format(s, "%s: %s\n", he->name, he->def->text);
    ds_put_format(s, "  group %s, interval %s, threshold %s", group,
                  tpm_time_format(he->def->interval_ns, iv, sizeof iv),
                  he->split ? "split over the PMD threads (when several)"
                            : "not split");
    if (!he->split && he->no_split_why) {
        ds_put_format(s, " (%s)", he->no_split_why);
    }
    ds_put_format(s, ", %"PRIu64" satisfactions\n", he->n_reports);
    free(group);
}

static void
tpm_unixctl_event_list(struct unixctl_conn *conn, int argc OVS_UNUSED,
                       const char *argv[] OVS_UNUSED, void *aux OVS_UNUSED)
{
    struct ds s = DS_EMPTY_INITIALIZER;
    struct host_event *he;
    LIST_FOR_EACH (he, node, &host_events) {
        format_event(&s, he);
    }
    unixctl_command_reply(conn, ds_cstr(&s));
    ds_destroy(&s);
}

/* Appends to 's' the newest 'max' host reports of event 'name' (all
 * events if NULL), oldest first, one JSON line each. */
static void
format_reports(struct ds *s, const char *name, size_t max)
{
    size_t *idx = xcalloc(MAX(report_log_n, 1), sizeof *idx);
    size_t n = 0;

    for (size_t i = 0; i < report_log_n && n < max; i++) {
        size_t k = (report_log_next + report_log_size - 1 - i)
                   % report_log_size;
        if (!name || !strcmp(report_log[k].event, name)) {
            idx[n++] = k;
        }
    }
    while (n--) {
        ds_put_format(s, "%s\n", report_log[idx[n]].json);
    }
    free(idx);
}

static void
tpm_unixctl_event_show(struct unixctl_conn *conn, int argc OVS_UNUSED,
                       const char *argv[], void *aux OVS_UNUSED)
{
    struct host_event *he = host_event_find_or_reply(conn, argv[1]);
    if (!he) {
        return;
    }

    struct ds s = DS_EMPTY_INITIALIZER;
    format_event(&s, he);

    size_t n;
    struct tpm_pmd **parts = pmds_snapshot(&n);
    double *shares = xcalloc(MAX(n, 1), sizeof *shares);
    if (he->split) {
        tpm_split_threshold(he->def->threshold->num, n, NULL, shares);
    }

    /* Per PMD: its trigger instances and flows for this event, asked
     * through its command ring (the monitor is the PMD's). */
    struct reply *w = xcalloc(MAX(n, 1), sizeof *w);
    for (size_t i = 0; i < n; i++) {
        w[i].cookie = next_cookie++;
        w[i].part = i;
        if (!tpm_submit_info(parts[i]->tpm, he->id, w[i].cookie)) {
            w[i].done = w[i].parked = true;
        }
    }
    wait_replies(parts, n, w, n);
    for (size_t i = 0; i < n; i++) {
        ds_put_format(&s, "  pmd core %u: ", parts[i]->core_id);
        if (he->split && n > 1) {
            ds_put_format(&s, "threshold share %.17g, ", shares[i]);
        }
        if (w[i].parked || !w[i].done) {
            ds_put_cstr(&s, "parked (no answer)\n");
        } else {
            ds_put_format(&s, "%"PRIu64" trigger instances, %.0f flows "
                          "matched\n", w[i].r.epoch, w[i].r.value);
        }
    }
    free(w);

    /* The group of the latest satisfaction: its value in the last K
     * intervals, summed over the PMDs (polled from their history). */
    if (he->has_last) {
        uint32_t k = knobs.params.history_len;
        uint64_t m = he->def->interval_ns / knobs.params.epoch_ns;
        size_t nw = n * k;
        w = xcalloc(MAX(nw, 1), sizeof *w);
        for (size_t j = 0; j < k; j++) {
            uint64_t epoch = he->last_epoch - (k - 1 - j) * m;
            for (size_t i = 0; i < n; i++) {
                struct reply *x = &w[j * n + i];
                x->cookie = next_cookie++;
                x->part = i;
                if (epoch > he->last_epoch
                    || !tpm_submit_poll(parts[i]->tpm, he->id,
                                        &he->last_group, epoch, x->cookie)) {
                    x->done = x->parked = true;
                }
            }
        }
        wait_replies(parts, n, w, nw);

        struct tpm_key_field f[5];
        int nf = tpm_key_fields(&he->def->group, &he->last_group, f);
        ds_put_cstr(&s, "  values of group");
        for (int i = 0; i < nf; i++) {
            if (f[i].is_int) {
                ds_put_format(&s, " %s=%u", f[i].name, f[i].int_value);
            } else {
                ds_put_format(&s, " %s=%s", f[i].name, f[i].str_value);
            }
        }
        ds_put_format(&s, " (interval ending at epoch, summed over the "
                      "PMDs):\n");
        for (size_t j = 0; j < k; j++) {
            uint64_t epoch = he->last_epoch - (k - 1 - j) * m;
            double total = 0;
            size_t unknown = 0;
            for (size_t i = 0; i < n; i++) {
                const struct reply *x = &w[j * n + i];
                if (x->parked || !x->done) {
                    unknown++;
                } else if (x->r.status == TPM_POLL_OK) {
                    total += x->r.value;
                } else if (x->r.status != TPM_POLL_NO_GROUP) {
                    unknown++;
                }
            }
            ds_put_format(&s, "    %"PRIu64": %.17g", epoch, total);
            if (unknown) {
                ds_put_format(&s, " (%"PRIuSIZE" PMDs: expired or no "
                              "answer)", unknown);
            }
            ds_put_cstr(&s, "\n");
        }
        free(w);
    }

    ds_put_cstr(&s, "  latest satisfactions (oldest first):\n");
    struct ds r = DS_EMPTY_INITIALIZER;
    format_reports(&r, he->name, knobs.params.history_len);
    if (!r.length) {
        ds_put_cstr(&s, "    none\n");
    } else {
        char *save = NULL;
        for (char *line = strtok_r(ds_cstr(&r), "\n", &save); line;
             line = strtok_r(NULL, "\n", &save)) {
            ds_put_format(&s, "    %s\n", line);
        }
    }
    ds_destroy(&r);
    unixctl_command_reply(conn, ds_cstr(&s));
    ds_destroy(&s);
    free(shares);
    free(parts);
}

static void
tpm_unixctl_reports(struct unixctl_conn *conn, int argc, const char *argv[],
                    void *aux OVS_UNUSED)
{
    size_t max = SIZE_MAX;
    if (argc > 1) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(argv[1], &end, 10);
        if (errno || end == argv[1] || *end || argv[1][0] == '-') {
            unixctl_command_reply_error(conn, "usage: tpm/reports [N]: N "
                                        "must be a non-negative integer");
            return;
        }
        max = v;
    }
    size_t n;                   /* Pick up what is queued now. */
    struct tpm_pmd **parts = pmds_snapshot(&n);
    drain_all(parts, n, NULL, 0);
    free(parts);
    struct ds s = DS_EMPTY_INITIALIZER;
    format_reports(&s, NULL, max);
    unixctl_command_reply(conn, ds_cstr(&s));
    ds_destroy(&s);
}

static void
tpm_unixctl_stats(struct unixctl_conn *conn, int argc OVS_UNUSED,
                  const char *argv[] OVS_UNUSED, void *aux OVS_UNUSED)
{
    struct ds s = DS_EMPTY_INITIALIZER;
    size_t n;
    struct tpm_pmd **parts = pmds_snapshot(&n);
    uint64_t skipped;
    atomic_read_relaxed(&non_pmd_skipped, &skipped);

    ds_put_format(&s, "non-PMD packets skipped (not monitored): %"PRIu64
                  "\n", skipped);
    ds_put_format(&s, "events: %"PRIuSIZE", local-TEM decisions pending: "
                  "%"PRIuSIZE"\n", ovs_list_size(&host_events),
                  decisions ? tpm_decisions_count(decisions) : 0);
    for (size_t i = 0; i < n; i++) {
        const struct tpm_params *pp = tpm_get_params(parts[i]->tpm);
        struct tpm_stats st;
        uint64_t idle, forced;
        tpm_get_stats(parts[i]->tpm, &st);
        atomic_read_relaxed(&parts[i]->steps_idle, &idle);
        atomic_read_relaxed(&parts[i]->steps_forced, &forced);

        ds_put_format(&s, "pmd core %u:\n", parts[i]->core_id);
        ds_put_format(&s, "  packets: %"PRIu64" (non-IP %"PRIu64"), "
                      "bytes: %"PRIu64"\n", st.packets, st.non_ip,
                      st.bytes);
        ds_put_format(&s, "  flows: %"PRIu64" live, table load %.1f%%, "
                      "inserts %"PRIu64", reuses %"PRIu64", evictions "
                      "%"PRIu64", freed %"PRIu64", retired %"PRIu64"\n",
                      st.flows_live,
                      100.0 * st.flows_live / pp->flow_table_size,
                      st.flow_inserts, st.flow_reuses, st.flow_evictions,
                      st.flows_freed, st.flows_retired);
        ds_put_format(&s, "  matches: %"PRIu64", over max_matches %"PRIu64
                      ", out of summary slots %"PRIu64", below DoS "
                      "threshold (packets) %"PRIu64"\n", st.matches,
                      st.match_overflow, st.summary_overflow,
                      st.dos_skipped_pkts);
        ds_put_format(&s, "  triggers: %"PRIu64" instances, created %"PRIu64
                      ", expired %"PRIu64", refused %"PRIu64", chunks "
                      "exhausted %"PRIu64"\n", st.triggers,
                      st.children_created, st.children_expired,
                      st.children_dropped, st.chunks_exhausted);
        ds_put_format(&s, "  sweeps: done %"PRIu64", unfinished %"PRIu64
                      ", forced %"PRIu64"; steps idle %"PRIu64", steps "
                      "while saturated %"PRIu64"\n", st.sweeps_done,
                      st.sweeps_unfinished, st.sweeps_forced, idle, forced);
        ds_put_format(&s, "  sweep time: p50 %"PRIu64" ns, p99 %"PRIu64
                      " ns, max %"PRIu64" ns\n", st.sweep_ns_p50,
                      st.sweep_ns_p99, st.sweep_ns_max);
        ds_put_format(&s, "  reports: %"PRIu64", dropped %"PRIu64
                      "; epochs %"PRIu64", skipped %"PRIu64"\n",
                      st.reports, st.reports_dropped, st.epochs,
                      st.epochs_skipped);
    }
    unixctl_command_reply(conn, ds_cstr(&s));
    ds_destroy(&s);
    free(parts);
}

struct flows_ctx {
    struct ds *s;
    struct tpm_match filter;
    bool has_filter;
    size_t n, max;
};

static void
flows_cb(const struct tpm_key *key, uint64_t packets, uint64_t bytes,
         uint32_t n_matched, void *ctx_)
{
    struct flows_ctx *ctx = ctx_;
    if (ctx->has_filter) {
        struct tpm_key m;
        tpm_key_and(&m, key, &ctx->filter.mask);
        if (!tpm_key_equal(&m, &ctx->filter.key)) {
            return;
        }
    }
    if (ctx->n++ < ctx->max) {
        char k[TPM_KEY_STRLEN];
        ds_put_format(ctx->s, "  %s packets:%"PRIu64" bytes:%"PRIu64
                      " triggers:%"PRIu32"\n",
                      tpm_key_format(key, k, sizeof k), packets, bytes,
                      n_matched);
    }
}

static void
tpm_unixctl_flows(struct unixctl_conn *conn, int argc, const char *argv[],
                  void *aux OVS_UNUSED)
{
    struct flows_ctx ctx = { .max = 10000 };
    struct ds s = DS_EMPTY_INITIALIZER;

    if (argc > 1) {
        /* Reuse the event parser for the filter. */
        char *def = xasprintf("filter=%s predicate=count() > 0", argv[1]);
        struct tpm_event *ev;
        char *error = tpm_event_parse("flows", def, &ev);
        free(def);
        if (error) {
            unixctl_command_reply_error(conn, error);
            free(error);
            return;
        }
        ctx.filter = ev->filter;
        ctx.has_filter = true;
        tpm_event_destroy(ev);
    }

    size_t n;
    struct tpm_pmd **parts = pmds_snapshot(&n);
    ctx.s = &s;
    for (size_t i = 0; i < n; i++) {
        /* Read while the PMD writes: packet and byte counts of the
         * current and previous epochs, possibly a packet behind. */
        ds_put_format(&s, "pmd core %u:\n", parts[i]->core_id);
        tpm_flows_for_each(parts[i]->tpm, flows_cb, &ctx);
    }
    if (ctx.n > ctx.max) {
        ds_put_format(&s, "(%"PRIuSIZE" more not shown)\n",
                      ctx.n - ctx.max);
    }
    unixctl_command_reply(conn, ds_cstr(&s));
    ds_destroy(&s);
    free(parts);
}

void
tpm_ovs_init(void)
{
    static struct ovsthread_once once = OVSTHREAD_ONCE_INITIALIZER;
    if (!ovsthread_once_start(&once)) {
        return;
    }
    if (!knobs_set) {
        knobs_default(&knobs);
        knobs_set = true;
        decisions = tpm_decisions_create();
        report_log_size = knobs.report_log;
        report_log = xcalloc(report_log_size, sizeof *report_log);
    }
    tpm_log_set_hook(tpm_log_to_vlog);
    unixctl_command_register("tpm/event-add",
                             "NAME filter=... predicate=... [group=...] "
                             "[interval=...]", 2, INT_MAX,
                             tpm_unixctl_event_add, NULL);
    unixctl_command_register("tpm/event-del", "NAME", 1, 1,
                             tpm_unixctl_event_del, NULL);
    unixctl_command_register("tpm/event-list", "", 0, 0,
                             tpm_unixctl_event_list, NULL);
    unixctl_command_register("tpm/event-show", "NAME", 1, 1,
                             tpm_unixctl_event_show, NULL);
    unixctl_command_register("tpm/reports", "[N]", 0, 1,
                             tpm_unixctl_reports, NULL);
    unixctl_command_register("tpm/stats", "", 0, 0,
                             tpm_unixctl_stats, NULL);
    unixctl_command_register("tpm/flows", "[FILTER]", 0, 1,
                             tpm_unixctl_flows, NULL);
    ovsthread_once_done(&once);
}
