/* SPDX-License-Identifier: Apache-2.0 */
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
 *
 * The TEM.  With other_config:tpm-controller set, a host agent (lib/
 * agent.h: its own thread and socket) connects to the TEM, and the main
 * thread executes the TEM's commands in tpm_ovs_run().  An event the TEM
 * installs is a host event like the others (split over the PMDs, local
 * TEM), named "tem:NAME" (event names cannot contain ':', so the two
 * namespaces never meet) and carrying the TEM's id; its host-level
 * satisfactions go to the TEM.  The TEM's polls are answered
 * asynchronously: each is a pending entry whose PMD polls are matched to
 * their replies by cookie while tpm_ovs_run() drains the PMDs' reports.
 * The PMDs only ever see their rings, so a TEM that misbehaves or goes
 * away cannot stall them.
 */
#include <config.h>

#include "tpm-ovs.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coverage.h"
#include "dp-packet.h"
#include "hash.h"
#include "openvswitch/dynamic-string.h"
#include "openvswitch/hmap.h"
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
#include "agent.h"
#include "clock.h"
#include "dos-model.h"
#include "event.h"
#include "split.h"
#include "tpm-log.h"
#include "tpm.h"

VLOG_DEFINE_THIS_MODULE(tpm);

COVERAGE_DEFINE(tpm_satisfaction);
COVERAGE_DEFINE(tpm_poll_timeout);
COVERAGE_DEFINE(tpm_pmd_create_failed);
COVERAGE_DEFINE(tpm_agent_restart);
COVERAGE_DEFINE(tpm_agent_create_failed);
COVERAGE_DEFINE(tpm_agent_command);
COVERAGE_DEFINE(tpm_agent_nack);
COVERAGE_DEFINE(tpm_agent_send_dropped);
COVERAGE_DEFINE(tpm_tem_poll);
COVERAGE_DEFINE(tpm_tem_poll_incomplete);
COVERAGE_DEFINE(tpm_tem_poll_not_yet);
COVERAGE_DEFINE(tpm_tem_poll_cancelled);

/* Knobs (ovsdb Open_vSwitch other_config), with their current values. */
struct tpm_knobs {
    struct tpm_params params;
    uint32_t sweep_every;       /* Forced sweep step every N busy
                                 * iterations... */
    uint64_t sweep_gap_ns;      /* ...or when the last step is this old. */
    uint32_t sweep_catchup;     /* % of a saturated PMD a late sweep may
                                 * take in forced steps. */
    uint64_t command_timeout_ns;
    uint64_t poll_timeout_ns;
    uint32_t report_log;        /* Host satisfactions kept. */
};

/* One PMD thread's monitor. */
struct tpm_pmd {
    struct ovs_list node;       /* In 'pmds', under 'pmds_mutex'. */
    unsigned core_id;
    uint64_t serial;            /* Unique for the process' life. */
    struct tpm *tpm;

    /* PMD thread only. */
    bool full_batch;            /* A full rx batch in this iteration. */
    uint32_t busy_iterations;   /* Since the last sweep step. */
    uint64_t last_step_ns;      /* Time of the last sweep step. */
    uint32_t unwatched_iterations;  /* While no event is installed. */
    uint64_t now;               /* Clock read for the latest rx batch. */
    /* Cycle accounting, one iteration in CYCLE_SAMPLE_EVERY: the
     * iteration's cycles from the end of the previous one, and the
     * monitor's share of them. */
    bool sampling;
    uint32_t sample_countdown;
    uint64_t iter_tsc;
    uint64_t iter_monitor;
    uint64_t iter_bytes;

    /* Written by the PMD, read by others. */
    atomic_uint64_t steps_idle;     /* Sweep steps in drained slots. */
    atomic_uint64_t steps_catchup;  /* Forced steps lengthened because the
                                     * sweep was behind its pace. */
    atomic_uint64_t steps_forced;   /* Sweep steps forced while
                                     * saturated. */
    atomic_uint64_t last_iteration_ns;
    atomic_uint64_t busy_cycles;    /* Sampled iterations with packets: */
    atomic_uint64_t busy_monitor;   /* ... their monitor cycles, */
    atomic_uint64_t busy_packets;   /* ... and packets. */
    /* Sampled saturated iterations (a full rx batch), by their mean frame
     * size (size_bucket()): the switch's cycles (the monitor's taken
     * out), packets and bytes, for the DoS model's switch term. */
    struct {
        atomic_uint64_t cycles;
        atomic_uint64_t packets;
        atomic_uint64_t bytes;
    } sat[5];

    /* Main thread only: the loss counters (tpm_losses) last logged. */
    uint64_t losses_logged[TPM_N_LOSSES];
};

#define CYCLE_SAMPLE_EVERY 16

/* The 'sat' bucket of a mean frame size: < 128, < 256, < 512, < 1024,
 * and the rest. */
static int
size_bucket(uint64_t bytes)
{
    int b = 0;
    for (uint64_t edge = 128; b < 4 && bytes >= edge; edge *= 2) {
        b++;
    }
    return b;
}

static struct ovs_mutex pmds_mutex = OVS_MUTEX_INITIALIZER;
static struct ovs_list pmds OVS_GUARDED_BY(pmds_mutex)
    = OVS_LIST_INITIALIZER(&pmds);
static uint64_t pmds_gen OVS_GUARDED_BY(pmds_mutex);  /* Bumped on every
                                                        * change. */
static uint64_t pmds_serial OVS_GUARDED_BY(pmds_mutex);

/* Knobs the PMD threads read on every sweep step, so a change applies at
 * once (the others apply to PMD threads created later). */
static atomic_uint64_t live_sweep_budget_ns = 10 * 1000;
static atomic_uint32_t live_sweep_every = 64;
static atomic_uint32_t live_sweep_catchup = 25;
static atomic_uint64_t live_sweep_gap_ns = 500 * 1000;

/* The DoS threshold is live too: each PMD applies it at its next sweep
 * step.  The last writer wins: other_config:tpm-dos-threshold when its
 * value changes, tpm/dos-threshold, or the TEM. */
static atomic_uint32_t live_dos_threshold = 0;

/* Host events installed or being installed: with none, the PMDs skip the
 * monitor entirely (no clock read, no parsing). */
static atomic_uint32_t n_watch = 0;

/* Packets of non-PMD ports, not monitored. */
static atomic_uint64_t non_pmd_skipped = 0;

/* Main-thread state. */
static struct tpm_knobs knobs;
static bool knobs_set;

/* Who set the live DoS threshold, and the knob's value last seen. */
static const char *dos_threshold_by = "default";
static bool dos_knob_seen;
static uint32_t dos_knob_value;

/* The DoS model's latest profile (tpm/dos-profile). */
static struct tpm_dos_costs dos_costs;
static bool dos_costs_valid;
static uint64_t dos_costs_events;  /* Signature of the events profiled. */
static long long int dos_costs_when;
static uint64_t next_cookie = 1;
static uint32_t next_event_id = 1;

struct host_event {
    struct ovs_list node;       /* In 'host_events', in order of adding. */
    char *name;                 /* "tem:NAME" for a TEM event. */
    uint32_t id;                /* Ours, on the PMDs (host and TEM events
                                 * share this space). */
    struct tpm_event *def;      /* As parsed (full threshold; for a TEM
                                 * event, the host's share of the TEM's
                                 * split threshold). */
    bool split;                 /* Threshold split over the PMDs. */
    const char *no_split_why;
    uint64_t n_reports;         /* Host-level satisfactions. */
    bool has_last;              /* The latest satisfaction: */
    uint64_t last_epoch;
    struct tpm_key last_group;

    /* Installed by the TEM. */
    bool tem;
    uint32_t tem_id;            /* The TEM's id for it. */
    bool has_share;             /* Threshold replaced by the TEM. */
    double share;
    uint64_t n_sent;            /* Satisfactions handed to the agent. */
    uint64_t n_send_dropped;    /* ... that it refused (queue full, no
                                 * session). */
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

/* The host agent (other_config:tpm-controller).  'agent_cfg' is the
 * configuration in force (validated); the agent announced the PMDs
 * 'agent_pmd_ids' in its Hello. */
struct agent_cfg {
    char *endpoint;             /* NULL: no agent. */
    char *host_id;              /* NULL: the system's hostname. */
    char *prefixes;             /* As given; "" if unset. */
    uint32_t queue_size;
    uint64_t backoff_max_ns;
    uint64_t epoch_ns;
    char *tem_key;              /* tpm-controller-key. */
    char *key_file;             /* tpm-host-key-file. */
    uint32_t insecure;          /* tpm-controller-insecure. */
};
static struct agent_cfg agent_cfg;
static struct tpm_agent *agent;
static uint32_t *agent_pmd_ids;
static size_t agent_n_pmds;
static uint64_t agent_pmds_gen;     /* 'pmds_gen' last compared. */
static uint64_t agent_restarts;     /* Since ovs-vswitchd started. */
static uint64_t agent_started_ns;

/* What the main thread did for the agent since it (re)started. */
struct agent_counters {
    uint64_t installs, removes, polls, resyncs, configures;
    uint64_t nacks;
    uint64_t satisfactions, satisfactions_dropped;
    uint64_t replies, replies_dropped;  /* Acks, nacks, poll replies. */
    uint64_t polls_incomplete, polls_not_yet, polls_cancelled;
};
static struct agent_counters actr;
static bool agent_backlog;      /* tpm_ovs_run() left commands queued. */

/* Largest number of agent commands executed per tpm_ovs_run() call (the
 * rest wait for the next, which comes at once). */
#define TPM_AGENT_CMDS_PER_RUN 256

/* The TEM's polls being answered.  Each part is one PMD's poll; a part
 * whose poll is in a PMD's ring is in 'tem_poll_parts' under the cookie
 * of that poll. */
enum tem_part_state {
    TEM_PART_SUBMIT,            /* To (re)submit. */
    TEM_PART_WAITING,           /* Submitted, in 'tem_poll_parts'. */
    TEM_PART_DONE,              /* 'status' and 'value' final. */
    TEM_PART_MISSING,           /* Its PMD is gone. */
};

struct tem_poll_part {
    struct hmap_node node;      /* In 'tem_poll_parts', by 'cookie'. */
    uint64_t pmd_serial;
    uint64_t cookie;
    enum tem_part_state state;
    bool not_yet;               /* The PMD answered NOT_YET last. */
    enum tpm_poll_status status;
    double value;
};

struct tem_poll {
    struct ovs_list node;       /* In 'tem_polls', oldest first. */
    uint64_t cookie;            /* The TEM's. */
    uint32_t tem_id;
    uint32_t event_id;          /* Ours. */
    uint64_t epoch;
    struct tpm_key group;
    uint64_t deadline_ns;
    size_t n_parts;
    struct tem_poll_part *parts;
};

static struct ovs_list tem_polls = OVS_LIST_INITIALIZER(&tem_polls);
static size_t tem_polls_n;
static struct hmap tem_poll_parts = HMAP_INITIALIZER(&tem_poll_parts);

/* The monitor's clock.
 *
 * Epoch numbers follow the wall clock, so that hosts whose clocks are
 * synchronised agree on epoch boundaries (the TEM adds up their values per
 * epoch).  The PMDs do not read it: they take OVS's own monotonic time of
 * the batch, 'pmd->ctx.now' (microseconds, read once per received batch
 * for OVS's own use), and add 'mono_to_wall_ns', the wall clock's lead
 * over the monotonic clock.  So a packet costs no clock read, and the
 * length of an epoch never depends on the wall clock's steps.
 *
 * The main thread measures the lead again about once a second
 * (clock_check()).  It changes only when the wall clock is stepped
 * (settimeofday(), an NTP daemon's step); slewing moves both clocks
 * alike.  A forward step is followed (the epochs it skips are counted as
 * skipped by the monitors, their sweeps forced, nothing lost), so epoch
 * numbers stay those of the other hosts.  A backward step is not: epochs
 * never run backwards, and an epoch stretched until the wall clock caught
 * up would merge many epochs' packets into one.  The monitor's epochs then
 * stay ahead of the wall clock by the step, shown by tpm/stats and
 * logged.  Wall time of the start of epoch E in a report is E times the
 * epoch length, in nanoseconds since the Unix epoch, in either case
 * within the monotonic clock's rate error since the last step. */
static atomic_uint64_t mono_to_wall_ns = 0;
static uint64_t clock_steps;            /* Forward steps followed. */
static uint64_t clock_steps_back;       /* Backward steps not followed. */
static int64_t clock_ahead_ns;          /* Monitor's lead over the wall
                                         * clock after backward steps. */

/* The main thread's checks of the clock and of the loss counters run
 * this often. */
#define SECOND_CHECK_NS (1000 * 1000 * 1000)
#define CLOCK_STEP_NS (100 * 1000)      /* Smaller changes: rounding. */

static uint64_t
mono_to_wall__(void)
{
    uint64_t off;
    atomic_read_relaxed(&mono_to_wall_ns, &off);
    return off;
}

/* The monitor's time now, in wall-clock nanoseconds (see above). */
static uint64_t
now_ns(void)
{
    return tpm_clock_mono_ns() + mono_to_wall__();
}

/* The monitor's time of OVS's monotonic microseconds 'now_us'. */
static uint64_t
pmd_now_ns(long long int now_us)
{
    return (uint64_t) now_us * 1000 + mono_to_wall__();
}

/* Main thread: sets the wall clock's lead at start, follows forward steps
 * and counts backward ones (see above). */
static void
clock_check(void)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 5);
    uint64_t lead = tpm_clock_real_ns() - tpm_clock_mono_ns();
    uint64_t off = mono_to_wall__();
    int64_t d = (int64_t) (lead - off);
    if (!off) {
        atomic_store_relaxed(&mono_to_wall_ns, lead);
    } else if (d >= CLOCK_STEP_NS) {
        atomic_store_relaxed(&mono_to_wall_ns, lead);
        clock_steps++;
        clock_ahead_ns = 0;
        VLOG_WARN_RL(&rl, "wall clock stepped forward by %"PRId64" us: "
                     "epochs follow it (the skipped epochs are swept at "
                     "once)", d / 1000);
    } else if (d < 0) {
        if (-d > clock_ahead_ns + CLOCK_STEP_NS) {
            clock_steps_back++;
            VLOG_WARN_RL(&rl, "wall clock stepped back: the monitor's "
                         "epochs now run %"PRId64" us ahead of it (epochs "
                         "never go back)", -d / 1000);
        }
        clock_ahead_ns = -d;
    } else {
        clock_ahead_ns = 0;
    }
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
    atomic_init(&p->steps_catchup, 0);
    for (size_t i = 0; i < ARRAY_SIZE(p->sat); i++) {
        atomic_init(&p->sat[i].cycles, 0);
        atomic_init(&p->sat[i].packets, 0);
        atomic_init(&p->sat[i].bytes, 0);
    }
    atomic_init(&p->last_iteration_ns, 0);
    atomic_init(&p->busy_cycles, 0);
    atomic_init(&p->busy_monitor, 0);
    atomic_init(&p->busy_packets, 0);
    p->sample_countdown = CYCLE_SAMPLE_EVERY;
    ovs_mutex_lock(&pmds_mutex);
    p->serial = ++pmds_serial;
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
tpm_ovs_rx(struct tpm_pmd *p, const struct dp_packet_batch *batch,
           long long int now_us)
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

    uint64_t t0 = p->sampling ? tpm_rdtsc() : 0;
    struct tpm_frame frames[NETDEV_MAX_BURST];
    struct dp_packet *packet;
    DP_PACKET_BATCH_FOR_EACH (i, packet, batch) {
        frames[i].data = dp_packet_data(packet);
        frames[i].caplen = dp_packet_size(packet);
        frames[i].wirelen = dp_packet_size(packet);
    }
    if (p->sampling) {
        /* For the switch's cost per frame size (size_bucket()). */
        for (size_t i = 0; i < n; i++) {
            p->iter_bytes += frames[i].wirelen;
        }
    }
    p->now = pmd_now_ns(now_us);
    tpm_advance(p->tpm, p->now);
    tpm_process_batch(p->tpm, frames, n);
    if (n == NETDEV_MAX_BURST) {
        p->full_batch = true;
    }
    if (p->sampling) {
        p->iter_monitor += tpm_rdtsc() - t0;
    }
}

void
tpm_ovs_pmd_iteration(struct tpm_pmd *p, uint64_t rx_packets,
                      long long int now_us)
{
    if (!p) {
        return;
    }
    uint32_t watch;
    atomic_read_relaxed(&n_watch, &watch);
    if (!watch) {
        /* No event: only commands (the first add) need this PMD. */
        p->full_batch = false;
        p->sampling = false;
        tpm_run_control(p->tpm, 16);
        if (!(++p->unwatched_iterations & 1023)) {
            /* Alive, for pmd_parked(): a clock read every 1024 loops. */
            atomic_store_relaxed(&p->last_iteration_ns,
                                 pmd_now_ns(now_us));
        }
        return;
    }
    uint64_t t0 = p->sampling ? tpm_rdtsc() : 0;
    /* OVS read its clock for the last batch, or after an empty poll. */
    uint64_t now = pmd_now_ns(now_us);
    if (!rx_packets) {
        tpm_advance(p->tpm, now);
    }

    /* Queue-adaptive (paper algorithm 2): a step when every queue came
     * back short; when the PMD is saturated, still one bounded step every
     * 'sweep_every' iterations, or once the last step is 'sweep_gap_ns'
     * old (iterations that transmit to kernel devices can take
     * milliseconds), so each sweep completes within its epoch. */
    uint32_t every;
    uint64_t gap;
    atomic_read_relaxed(&live_sweep_every, &every);
    atomic_read_relaxed(&live_sweep_gap_ns, &gap);
    bool drained = !p->full_batch;
    p->full_batch = false;
    if (drained || ++p->busy_iterations >= every
        || now - p->last_step_ns >= gap) {
        uint64_t since = MIN(now - p->last_step_ns,
                             tpm_get_params(p->tpm)->epoch_ns);
        p->busy_iterations = 0;
        p->last_step_ns = now;
        uint64_t budget;
        atomic_read_relaxed(&live_sweep_budget_ns, &budget);
        if (tpm_sweep_pending(p->tpm)) {
            uint64_t orig;
            atomic_add_relaxed(drained ? &p->steps_idle : &p->steps_forced,
                               1, &orig);
            /* A saturated PMD's sweep behind its pace gets up to
             * 'catchup' % of the time since the last step (so of the
             * core), rather than the fixed budget, until back on pace. */
            uint32_t catchup;
            atomic_read_relaxed(&live_sweep_catchup, &catchup);
            if (!drained && budget && catchup
                && since * catchup / 100 > budget
                && tpm_sweep_lateness(p->tpm, now) > 0) {
                budget = since * catchup / 100;
                atomic_add_relaxed(&p->steps_catchup, 1, &orig);
            }
        }
        uint32_t dos;
        atomic_read_relaxed(&live_dos_threshold, &dos);
        if (dos != tpm_get_params(p->tpm)->dos_threshold) {
            tpm_set_dos_threshold(p->tpm, dos);
        }
        tpm_sweep_step(p->tpm, budget);
        tpm_run_control(p->tpm, 16);
    }
    atomic_store_relaxed(&p->last_iteration_ns, now);

    if (p->sampling) {
        uint64_t t1 = tpm_rdtsc();
        if (rx_packets && p->iter_tsc) {
            uint64_t orig;
            atomic_add_relaxed(&p->busy_cycles, t1 - p->iter_tsc, &orig);
            atomic_add_relaxed(&p->busy_monitor,
                               p->iter_monitor + (t1 - t0), &orig);
            atomic_add_relaxed(&p->busy_packets, rx_packets, &orig);
            uint64_t cycles = t1 - p->iter_tsc;
            uint64_t monitor = p->iter_monitor + (t1 - t0);
            if (!drained && p->iter_bytes && cycles > monitor) {
                int b = size_bucket(p->iter_bytes / rx_packets);
                atomic_add_relaxed(&p->sat[b].cycles, cycles - monitor,
                                   &orig);
                atomic_add_relaxed(&p->sat[b].packets, rx_packets, &orig);
                atomic_add_relaxed(&p->sat[b].bytes, p->iter_bytes, &orig);
            }
        }
        p->sampling = false;
    }
    if (!--p->sample_countdown) {
        p->sample_countdown = CYCLE_SAMPLE_EVERY;
        p->sampling = true;
        p->iter_monitor = 0;
        p->iter_bytes = 0;
        p->iter_tsc = tpm_rdtsc();
    }
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

/* Sends host-level satisfaction of TEM event 'he' to the TEM. */
static void
tem_send_satisfaction(struct host_event *he, uint64_t epoch,
                      const struct tpm_key *group, double value,
                      uint32_t flags, int n_pmds, int n_missing)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(5, 20);

    if (agent && tpm_agent_send_satisfaction(agent, he->tem_id, epoch,
                                             group, value, flags,
                                             n_pmds + n_missing,
                                             n_missing)) {
        he->n_sent++;
        actr.satisfactions++;
        return;
    }
    he->n_send_dropped++;
    actr.satisfactions_dropped++;
    COVERAGE_INC(tpm_agent_send_dropped);
    VLOG_WARN_RL(&rl, "%s: satisfaction for epoch %"PRIu64" not sent to "
                 "the TEM (%s)", he->name, epoch,
                 agent ? "agent queue full or no session" : "no agent");
}

/* Reports host event 'he' satisfied: logs it, keeps it in the report log
 * and, for a TEM event, sends it to the TEM.  'n_pmds' PMDs answered,
 * 'n_missing' did not (local TEM); 'flags' are TPM_REPORT_*. */
static void
host_report(struct host_event *he, uint64_t epoch,
            const struct tpm_key *group, double value, uint32_t flags,
            int n_pmds, int n_missing)
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
    if (he->tem) {
        json_object_put(o, "tem_id", json_integer_create(he->tem_id));
    }
    char *line = json_to_string(o, JSSF_SORT);
    json_destroy(o);

    he->n_reports++;
    he->has_last = true;
    he->last_epoch = epoch;
    he->last_group = *group;
    COVERAGE_INC(tpm_satisfaction);
    VLOG_INFO_RL(&rl, "satisfied: %s", line);
    if (he->tem) {
        tem_send_satisfaction(he, epoch, group, value, flags, n_pmds,
                              n_missing);
    }

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
        host_report(he, d->epoch, &d->group, total, 0,
                    d->n_parts - missing, missing);
    }
    d->decided = true;
    d->expires_ns = now + MAX(4 * knobs.poll_timeout_ns,
                              4 * he->def->interval_ns);
}

/* If 'r' answers a PMD poll of one of the TEM's polls, records it and
 * returns true. */
static bool
tem_poll_reply(const struct tpm_report *r)
{
    struct tem_poll_part *pp;
    HMAP_FOR_EACH_WITH_HASH (pp, node, hash_uint64(r->cookie),
                             &tem_poll_parts) {
        if (pp->cookie == r->cookie) {
            hmap_remove(&tem_poll_parts, &pp->node);
            if (r->status == TPM_POLL_NOT_YET) {
                /* Not swept yet: tem_polls_run() asks again. */
                pp->state = TEM_PART_SUBMIT;
                pp->not_yet = true;
            } else {
                pp->state = TEM_PART_DONE;
                pp->status = r->status;
                pp->value = r->value;
            }
            return true;
        }
    }
    return false;
}

/* Handles one report popped from PMD number 'part' of 'parts'. */
static void
handle_report(struct tpm_pmd **parts, size_t n_parts, size_t part,
              const struct tpm_report *r, struct reply *waiting,
              size_t n_waiting)
{
    if (r->type == TPM_REPORT_POLL_REPLY && tem_poll_reply(r)) {
        return;
    }
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
        host_report(he, r->epoch, &r->group, r->value, r->flags, 1, 0);
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

static void agent_check_pmds(struct tpm_pmd **, size_t n);
static void agent_run(struct tpm_pmd **, size_t n);

/* Main thread, about once a second: a warning naming every counter of
 * lost data (tpm_losses) that rose on one of the 'n' PMDs 'parts' since
 * the last one (the counters themselves are in tpm/stats). */
static void
losses_check(struct tpm_pmd **parts, size_t n)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 10);

    for (size_t i = 0; i < n; i++) {
        struct tpm_pmd *p = parts[i];
        struct tpm_stats st;
        struct ds s = DS_EMPTY_INITIALIZER;
        tpm_get_stats(p->tpm, &st);
        for (size_t j = 0; j < TPM_N_LOSSES; j++) {
            uint64_t v = tpm_loss_get(&st, &tpm_losses[j]);
            if (v > p->losses_logged[j]) {
                ds_put_format(&s, "%s%s +%"PRIu64, s.length ? ", " : "",
                              tpm_losses[j].what, v - p->losses_logged[j]);
            }
        }
        if (s.length && !VLOG_DROP_WARN(&rl)) {
            /* Only what a logged warning named counts as logged: what a
             * dropped one would have said comes in the next. */
            VLOG_WARN("pmd core %u lost data: %s (totals in tpm/stats)",
                      p->core_id, ds_cstr(&s));
            for (size_t j = 0; j < TPM_N_LOSSES; j++) {
                p->losses_logged[j] = tpm_loss_get(&st, &tpm_losses[j]);
            }
        }
        ds_destroy(&s);
    }
}

void
tpm_ovs_run(void)
{
    static uint64_t checked_ns;
    size_t n;
    struct tpm_pmd **parts = pmds_snapshot(&n);
    uint64_t mono = tpm_clock_mono_ns();
    if (mono - checked_ns >= SECOND_CHECK_NS) {
        checked_ns = mono;
        clock_check();
        losses_check(parts, n);
    }
    drain_all(parts, n, NULL, 0);
    reshare(parts, n);
    agent_check_pmds(parts, n);
    agent_run(parts, n);
    free(parts);
}

void
tpm_ovs_wait(void)
{
    if (!ovs_list_is_empty(&host_events)) {
        /* Pick up satisfactions at least once per epoch. */
        poll_timer_wait(MAX(1, knobs.params.epoch_ns / 1000000));
    }
    if (agent) {
        if (agent_backlog) {
            poll_immediate_wake();
        } else if (tem_polls_n < agent_cfg.queue_size) {
            /* A command from the TEM wakes us at once. */
            poll_fd_wait(tpm_agent_fd(agent), POLLIN);
        }
        if (tem_polls_n) {
            /* PMDs answer polls within an iteration. */
            poll_timer_wait(1);
        }
        ovs_mutex_lock(&pmds_mutex);
        bool pmds_changed = pmds_gen != agent_pmds_gen;
        ovs_mutex_unlock(&pmds_mutex);
        if (pmds_changed) {
            poll_immediate_wake();
        }
    }
}

/* Knobs. */

/* Reads knob 'key' of 'cfg' as a time in ['min', 'max'] into '*ns'.
 * Returns false (and logs) if it is set but invalid. */
static bool
knob_time(const struct smap *cfg, const char *key, uint64_t min,
          uint64_t max, uint64_t *ns)
{
    const char *s = smap_get(cfg, key);
    if (!s) {
        return true;
    }
    uint64_t v;
    char *error = tpm_parse_time(s, &v);
    if (!error && (v < min || v > max)) {
        char a[32], b[32];
        error = xasprintf("expected a time in [%s, %s]",
                          tpm_time_format(min, a, sizeof a),
                          tpm_time_format(max, b, sizeof b));
    }
    if (error) {
        VLOG_WARN("other_config:%s=\"%s\" rejected: %s; keeping the "
                  "previous value", key, s, error);
        free(error);
        return false;
    }
    *ns = v;
    return true;
}

/* Parses 's' as a decimal integer in ['min', 'max'] into '*v'.  Returns
 * false, leaving '*v' alone, on anything else. */
static bool
parse_uint_range(const char *s, uint64_t min, uint64_t max, uint64_t *v)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || x < min || x > max) {
        return false;
    }
    *v = x;
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
    uint64_t v;
    if (!parse_uint_range(s, min, max, &v)) {
        VLOG_WARN("other_config:%s=\"%s\" rejected: expected an integer "
                  "in [%"PRIu64", %"PRIu64"]; keeping the previous value",
                  key, s, min, max);
        return false;
    }
    *value = v;
    return true;
}

/* Reads knob 'key' as "true" or "false" into 'value' (1 or 0). */
static bool
knob_bool(const struct smap *cfg, const char *key, uint32_t *value)
{
    const char *s = smap_get(cfg, key);
    if (!s) {
        return true;
    }
    if (strcmp(s, "true") && strcmp(s, "false")) {
        VLOG_WARN("other_config:%s=\"%s\" rejected: expected true or "
                  "false; keeping the previous value", key, s);
        return false;
    }
    *value = !strcmp(s, "true");
    return true;
}

/* Sets the live DoS threshold to 'bytes' on behalf of 'by' (a static
 * string).  Main thread. */
static void
dos_threshold_set(uint32_t bytes, const char *by)
{
    uint32_t old = knobs.params.dos_threshold;
    knobs.params.dos_threshold = bytes;
    dos_threshold_by = by;
    atomic_store_relaxed(&live_dos_threshold, bytes);
    if (old != bytes) {
        VLOG_INFO("DoS threshold %"PRIu32" bytes (was %"PRIu32"), set by %s",
                  bytes, old, by);
    }
}

static void
knobs_default(struct tpm_knobs *k)
{
    tpm_params_init(&k->params);
    k->sweep_every = 64;
    k->sweep_catchup = 25;
    k->sweep_gap_ns = 500 * 1000;
    k->command_timeout_ns = 1000ULL * 1000 * 1000;
    k->poll_timeout_ns = 100ULL * 1000 * 1000;
    k->report_log = 1024;
}

/* Reads the monitor's knobs.  Monitor parameters apply to PMD threads
 * created from now on (running ones keep theirs; a restart of the PMDs,
 * e.g. changing pmd-cpu-mask, applies them). */
static void
monitor_set_config(const struct smap *cfg)
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
    ok &= knob_time(cfg, "tpm-epoch", 0, UINT64_MAX, &epoch);
    ok &= knob_time(cfg, "tpm-sweep-budget", 0, UINT64_MAX, &budget);
    ok &= knob_uint(cfg, "tpm-flow-table-size", 64, 1u << 28,
                    &k.params.flow_table_size);
    ok &= knob_uint(cfg, "tpm-max-events", 1, 1u << 20,
                    &k.params.max_events);
    ok &= knob_uint(cfg, "tpm-max-triggers", 1, 1u << 26,
                    &k.params.max_triggers);
    uint32_t dos = dos_knob_value;
    ok &= knob_uint(cfg, "tpm-dos-threshold", 0, UINT32_MAX, &dos);
    ok &= knob_uint(cfg, "tpm-dos-table-size", 64, 1u << 28,
                    &k.params.dos_table_size);
    ok &= knob_uint(cfg, "tpm-dos-window", 1, 1u << 30,
                    &k.params.dos_window);
    ok &= knob_bool(cfg, "tpm-dos-clear", &k.params.dos_clear_on_pass);
    ok &= knob_uint(cfg, "tpm-history", 1, 1024, &k.params.history_len);
    ok &= knob_uint(cfg, "tpm-retire-epochs", 1, 1u << 20,
                    &k.params.retire_epochs);
    ok &= knob_uint(cfg, "tpm-tcp-state-pool", 0, 1u << 24,
                    &k.params.tcp_state_pool);
    uint64_t burst_gap = k.params.burst_gap_ns;
    ok &= knob_time(cfg, "tpm-burst-gap", 0, UINT64_MAX, &burst_gap);
    ok &= knob_uint(cfg, "tpm-sweep-every", 1, 1u << 20, &k.sweep_every);
    ok &= knob_uint(cfg, "tpm-sweep-catchup", 0, 90, &k.sweep_catchup);
    uint64_t sweep_gap = k.sweep_gap_ns;
    ok &= knob_time(cfg, "tpm-sweep-gap", 1000, 1000ULL * 1000 * 1000,
                    &sweep_gap);
    ok &= knob_uint(cfg, "tpm-report-log", 0, 1u << 20, &k.report_log);
    uint64_t ct = k.command_timeout_ns, pt = k.poll_timeout_ns;
    ok &= knob_time(cfg, "tpm-command-timeout", 0, UINT64_MAX, &ct);
    ok &= knob_time(cfg, "tpm-poll-timeout", 0, UINT64_MAX, &pt);
    k.params.epoch_ns = epoch;
    k.params.sweep_budget_ns = budget;
    k.params.burst_gap_ns = burst_gap;
    k.sweep_gap_ns = sweep_gap;
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

    /* Live, not a PMD-creation parameter: applied below. */
    bool dos_changed = smap_get(cfg, "tpm-dos-threshold")
                       && (!dos_knob_seen || dos != dos_knob_value);
    k.params.dos_threshold = knobs.params.dos_threshold;
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
    if (dos_changed) {
        dos_knob_seen = true;
        dos_knob_value = dos;
        dos_threshold_set(dos, "other_config:tpm-dos-threshold");
    }
    atomic_store_relaxed(&live_sweep_budget_ns, k.params.sweep_budget_ns);
    atomic_store_relaxed(&live_sweep_every, k.sweep_every);
    atomic_store_relaxed(&live_sweep_catchup, k.sweep_catchup);
    atomic_store_relaxed(&live_sweep_gap_ns, k.sweep_gap_ns);
}

static void agent_set_config(const struct smap *);

void
tpm_ovs_set_config(const struct smap *cfg)
{
    monitor_set_config(cfg);
    agent_set_config(cfg);
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

/* Submits deletion of the 'n_ids' events 'ids' to 'parts' and waits for
 * the answers (once for all). */
static void
delete_many(struct tpm_pmd **parts, size_t n, const uint32_t *ids,
            size_t n_ids)
{
    size_t nw = n * n_ids;
    struct reply *w = xcalloc(MAX(nw, 1), sizeof *w);
    for (size_t j = 0; j < n_ids; j++) {
        for (size_t i = 0; i < n; i++) {
            struct reply *x = &w[j * n + i];
            x->cookie = next_cookie++;
            x->part = i;
            if (!submit_bounded(parts, n, i, TPM_REPORT_DEL_DONE, NULL,
                                ids[j], x->cookie)) {
                x->done = true;
            }
        }
    }
    wait_replies(parts, n, w, nw);
    free(w);
}

/* Submits deletion of event 'id' to 'parts' and waits. */
static void
delete_on(struct tpm_pmd **parts, size_t n, uint32_t id)
{
    delete_many(parts, n, &id, 1);
}

/* Checks what the PMDs' monitors would refuse about 'ev' beyond its
 * syntax.  Returns NULL or an error message (caller frees). */
static char *
event_check(const struct tpm_event *ev)
{
    if (tpm_event_needs_tcp_state(ev) && !knobs.params.tcp_state_pool) {
        return xstrdup("the predicate uses TCP-state variables (rwnd, "
                       "is_lost, is_burst, rtt, seq, ack, dup) and "
                       "other_config:tpm-tcp-state-pool is 0");
    }
    if (ev->interval_ns % knobs.params.epoch_ns) {
        char a[32], b[32];
        return xasprintf("interval %s is not a multiple of the epoch %s "
                         "(other_config:tpm-epoch)",
                         tpm_time_format(ev->interval_ns, a, sizeof a),
                         tpm_time_format(knobs.params.epoch_ns, b,
                                         sizeof b));
    }
    return NULL;
}

/* Creates host event 'name' (as shown) of definition 'ev' (taken). */
static struct host_event *
host_event_create(const char *name, struct tpm_event *ev)
{
    struct host_event *he = xzalloc(sizeof *he);
    he->name = xstrdup(name);
    he->id = next_event_id++;
    he->def = ev;
    he->split = tpm_split_supported(ev, &he->no_split_why);
    return he;
}

/* Adds 'he' on every PMD of 'parts' and to 'host_events'.  Returns NULL,
 * or an error (caller frees) after freeing 'he'. */
static char *
host_event_install(struct host_event *he, struct tpm_pmd **parts, size_t n)
{
    /* Wake the PMDs' monitors before the event reaches them. */
    atomic_store_relaxed(&n_watch, ovs_list_size(&host_events) + 1);
    char *error = add_on(parts, n, he);
    if (error) {
        host_event_free(he);
    } else {
        ovs_list_push_back(&host_events, &he->node);
    }
    atomic_store_relaxed(&n_watch, ovs_list_size(&host_events));
    return error;
}

/* Removes 'he' from the PMDs of 'parts' and frees it. */
static void
host_event_remove(struct host_event *he, struct tpm_pmd **parts, size_t n)
{
    delete_on(parts, n, he->id);
    ovs_list_remove(&he->node);
    host_event_free(he);
    atomic_store_relaxed(&n_watch, ovs_list_size(&host_events));
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
    error = event_check(ev);
    if (error) {
        unixctl_command_reply_error(conn, error);
        free(error);
        tpm_event_destroy(ev);
        return;
    }

    struct host_event *he = host_event_create(argv[1], ev);
    size_t n;
    struct tpm_pmd **parts = pmds_snapshot(&n);
    error = host_event_install(he, parts, n);
    if (error) {
        unixctl_command_reply_error(conn, error);
        free(error);
    } else {
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
    if (he->tem) {
        char *msg = xasprintf("event %s was installed by the TEM (its id "
                              "%"PRIu32"): remove it there", he->name,
                              he->tem_id);
        unixctl_command_reply_error(conn, msg);
        free(msg);
        return;
    }
    size_t n;
    struct tpm_pmd **parts = pmds_snapshot(&n);
    host_event_remove(he, parts, n);
    free(parts);
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
    if (he->tem) {
        ds_put_format(s, "  installed by the TEM: id %"PRIu32", ",
                      he->tem_id);
        if (he->has_share) {
            ds_put_format(s, "threshold share %.17g of its split, ",
                          he->share);
        }
        ds_put_format(s, "%"PRIu64" sent to it\n", he->n_sent);
    }
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

static void format_agent_summary(struct ds *);

/* Stores in '*sw' and '*mon' the cycles per packet that PMD 'p' spent in
 * the switch and in the monitor, over its sampled busy iterations.
 * Returns false if none was sampled yet. */
static bool
pmd_cycles_per_packet(struct tpm_pmd *p, double *sw, double *mon)
{
    uint64_t cycles, monitor, packets;
    atomic_read_relaxed(&p->busy_cycles, &cycles);
    atomic_read_relaxed(&p->busy_monitor, &monitor);
    atomic_read_relaxed(&p->busy_packets, &packets);
    if (!packets) {
        return false;
    }
    *mon = (double) monitor / packets;
    *sw = cycles > monitor ? (double) (cycles - monitor) / packets : 0;
    return true;
}

/* The switch's cycles per packet, over every PMD's samples (0 if none). */
static double
switch_cycles_per_packet(void)
{
    size_t n;
    struct tpm_pmd **parts = pmds_snapshot(&n);
    uint64_t cycles = 0, monitor = 0, packets = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t c, m, k;
        atomic_read_relaxed(&parts[i]->busy_cycles, &c);
        atomic_read_relaxed(&parts[i]->busy_monitor, &m);
        atomic_read_relaxed(&parts[i]->busy_packets, &k);
        cycles += c;
        monitor += m;
        packets += k;
    }
    free(parts);
    return packets && cycles > monitor
           ? (double) (cycles - monitor) / packets : 0;
}

/* How the switch term of the DoS model was obtained. */
static int dos_switch_sizes;    /* Frame-size buckets fitted (0: none). */
static bool dos_switch_given;   /* switch-pkt= or switch-byte= given. */
static char *dos_attack_event;  /* The profile's attacker's aim. */

/* Sets c->switch_pkt and c->switch_byte from the PMDs' samples: a line
 * cycles = a + b * bytes per packet, weighted least squares over the
 * saturated iterations' frame-size buckets that have enough samples (the
 * model is about a PMD at its limit, where rx batches are full and the
 * per-iteration costs are spread over them).  With one bucket, or sizes
 * too close to tell a slope, b = 0; with none, the figure of all busy
 * iterations.  Main thread. */
static void
switch_cost_fit(struct tpm_dos_costs *c)
{
    size_t n;
    struct tpm_pmd **parts = pmds_snapshot(&n);
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    int points = 0;
    for (size_t b = 0; b < ARRAY_SIZE(parts[0]->sat) && n; b++) {
        uint64_t cycles = 0, packets = 0, bytes = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t v;
            atomic_read_relaxed(&parts[i]->sat[b].cycles, &v);
            cycles += v;
            atomic_read_relaxed(&parts[i]->sat[b].packets, &v);
            packets += v;
            atomic_read_relaxed(&parts[i]->sat[b].bytes, &v);
            bytes += v;
        }
        if (packets < 1024) {
            continue;
        }
        double w = packets, x = (double) bytes / packets;
        double y = (double) cycles / packets;
        sw += w;
        sx += w * x;
        sy += w * y;
        sxx += w * x * x;
        sxy += w * x * y;
        points++;
    }
    free(parts);
    dos_switch_sizes = points;
    c->switch_byte = 0;
    if (!points) {
        c->switch_pkt = switch_cycles_per_packet();
        return;
    }
    double mx = sx / sw, my = sy / sw;
    double var = sxx / sw - mx * mx, cov = sxy / sw - mx * my;
    c->switch_pkt = my;
    if (points > 1 && var > 32 * 32 && cov > 0) {
        c->switch_byte = cov / var;
        c->switch_pkt = my - c->switch_byte * mx;
    }
}

static void
tpm_unixctl_dos_threshold(struct unixctl_conn *conn, int argc,
                          const char *argv[], void *aux OVS_UNUSED)
{
    uint32_t old = knobs.params.dos_threshold;
    uint64_t v;
    if (argc > 1) {
        if (!parse_uint_range(argv[1], 0, UINT32_MAX, &v)) {
            char *msg = xasprintf("\"%s\": expected bytes, an integer in "
                                  "[0, %"PRIu32"] (0: off)", argv[1],
                                  UINT32_MAX);
            unixctl_command_reply_error(conn, msg);
            free(msg);
            return;
        }
        dos_threshold_set(v, "tpm/dos-threshold");
    }
    char *msg = argc > 1
        ? xasprintf("DoS threshold: %"PRIu32" bytes (was %"PRIu32")",
                    knobs.params.dos_threshold, old)
        : xasprintf("DoS threshold: %"PRIu32" bytes (set by %s)",
                    knobs.params.dos_threshold, dos_threshold_by);
    unixctl_command_reply(conn, msg);
    free(msg);
}

/* A signature of the installed host events, to tell whether the DoS
 * profile is still theirs. */
static uint64_t
host_events_signature(void)
{
    uint64_t sig = ovs_list_size(&host_events);
    struct host_event *he;
    LIST_FOR_EACH (he, node, &host_events) {
        sig = sig * 0x100000001b3ULL ^ he->id;
    }
    return sig;
}

/* Profiles the DoS model's costs with the installed events.  Returns NULL
 * or an error (caller frees). */
static char *
dos_profile_run(uint32_t n_flows, int rounds)
{
    size_t n = ovs_list_size(&host_events), i = 0;
    struct tpm_event **evs = xcalloc(MAX(n, 1), sizeof *evs);
    struct host_event *he;
    LIST_FOR_EACH (he, node, &host_events) {
        evs[i++] = he->def;
    }
    struct tpm_dos_costs c;
    char *error = tpm_dos_profile(&knobs.params, evs, n, n_flows, rounds,
                                  &c);
    free(evs);
    if (!error) {
        i = 0;
        LIST_FOR_EACH (he, node, &host_events) {
            if (i++ == c.attack_event) {
                free(dos_attack_event);
                dos_attack_event = xstrdup(he->name);
            }
        }
        dos_switch_given = false;
        switch_cost_fit(&c);
        dos_costs = c;
        dos_costs_valid = true;
        dos_costs_events = host_events_signature();
        dos_costs_when = time_wall_msec();
    }
    return error;
}

static void
format_dos_costs(struct ds *s)
{
    const struct tpm_dos_costs *c = &dos_costs;
    ds_put_format(s, "profile: %"PRIu32" events, %"PRIu32" patterns, "
                  "%"PRIu32" flows per round, taken ", c->n_events,
                  c->n_patterns, c->n_flows);
    ds_put_strftime_msec(s, "%Y-%m-%d %H:%M:%S.###", dos_costs_when, true);
    ds_put_format(s, "\ntsc_hz: %.0f\n", c->hz);
    ds_put_format(s, "switch_cycles_per_packet: %.1f + %.4f per byte (%s)\n",
                  c->switch_pkt, c->switch_byte,
                  dos_switch_given ? "given"
                  : dos_switch_sizes > 1 ? "fitted over frame sizes"
                  : dos_switch_sizes ? "one frame size sampled"
                  : c->switch_pkt ? "no saturated iteration sampled"
                  : "no traffic sampled yet");
    ds_put_format(s, "pending_cycles_per_packet: %.1f\n", c->pkt_pending);
    ds_put_format(s, "matched_cycles_per_packet: %.1f\n", c->pkt_matched);
    ds_put_format(s, "match_cycles_per_flow: %.1f\n", c->match);
    ds_put_format(s, "sweep_cycles_per_item: %.1f\n", c->sweep_item);
    ds_put_format(s, "triggers_per_flow: %.2f\n", c->triggers_per_flow);
    ds_put_format(s, "attack_match_cycles_per_flow: %.1f\n", c->attack_match);
    ds_put_format(s, "attack_triggers_per_flow: %.2f (flows aimed at event "
                  "%s)\n", c->attack_triggers_per_flow,
                  dos_attack_event ? dos_attack_event : "?");
}

/* Parses 'arg' as an unsigned integer in [min, max] into '*v'; on error
 * replies on 'conn' and returns false. */
static bool
unixctl_uint_arg(struct unixctl_conn *conn, const char *what,
                 const char *arg, uint64_t min, uint64_t max, uint64_t *v)
{
    if (!parse_uint_range(arg, min, max, v)) {
        char *msg = xasprintf("%s \"%s\": expected an integer in "
                              "[%"PRIu64", %"PRIu64"]", what, arg, min, max);
        unixctl_command_reply_error(conn, msg);
        free(msg);
        return false;
    }
    return true;
}

static bool
unixctl_double_arg(struct unixctl_conn *conn, const char *what,
                   const char *arg, double min, double max, double *v)
{
    char *end;
    errno = 0;
    double x = strtod(arg, &end);
    if (errno || end == arg || *end || !(x >= min && x <= max)) {
        char *msg = xasprintf("%s \"%s\": expected a number in [%g, %g]",
                              what, arg, min, max);
        unixctl_command_reply_error(conn, msg);
        free(msg);
        return false;
    }
    *v = x;
    return true;
}

static void
tpm_unixctl_dos_profile(struct unixctl_conn *conn, int argc,
                        const char *argv[], void *aux OVS_UNUSED)
{
    uint64_t flows = 16384, rounds = 5;
    if ((argc > 1 && !unixctl_uint_arg(conn, "FLOWS", argv[1], 64,
                                       1u << 22, &flows))
        || (argc > 2 && !unixctl_uint_arg(conn, "ROUNDS", argv[2], 1, 15,
                                          &rounds))) {
        return;
    }
    char *error = dos_profile_run(flows, rounds);
    if (error) {
        unixctl_command_reply_error(conn, error);
        free(error);
        return;
    }
    struct ds s = DS_EMPTY_INITIALIZER;
    format_dos_costs(&s);
    unixctl_command_reply(conn, ds_cstr(&s));
    ds_destroy(&s);
}

static void
tpm_unixctl_dos_model(struct unixctl_conn *conn, int argc,
                      const char *argv[], void *aux OVS_UNUSED)
{
    struct tpm_dos_traffic t;
    tpm_dos_traffic_init(&t);
    double budget = 1.0, switch_pkt = -1, switch_byte = -1;
    uint64_t threshold = UINT64_MAX, v;

    if (!unixctl_double_arg(conn, "RATE_DOS", argv[1], 0, 1e12,
                            &t.rate_dos)
        || !unixctl_double_arg(conn, "RATE_GOOD", argv[2], 0, 1e12,
                               &t.rate_good)) {
        return;
    }
    for (int i = 3; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        char *key = eq ? xmemdup0(argv[i], eq - argv[i]) : xstrdup(argv[i]);
        const char *val = eq ? eq + 1 : "";
        bool ok = true;
        if (!strcmp(key, "attack")) {
            if (!strcmp(val, "syn") || !strcmp(val, "threshold")) {
                t.syn = !strcmp(val, "syn");
            } else {
                unixctl_command_reply_error(conn, "attack: expected syn or "
                                            "threshold");
                ok = false;
            }
        } else if (!strcmp(key, "dos-bytes")) {
            ok = unixctl_uint_arg(conn, key, val, 60, 65535, &v);
            t.dos_bytes = v;
        } else if (!strcmp(key, "good-bytes")) {
            ok = unixctl_uint_arg(conn, key, val, 60, 65535, &v);
            t.good_bytes = v;
        } else if (!strcmp(key, "pkts-per-flow")) {
            ok = unixctl_uint_arg(conn, key, val, 1, UINT32_MAX, &v);
            t.pkts_per_flow = v;
        } else if (!strcmp(key, "threshold")) {
            ok = unixctl_uint_arg(conn, key, val, 0, UINT32_MAX - 1,
                                  &threshold);
        } else if (!strcmp(key, "budget")) {
            ok = unixctl_double_arg(conn, key, val, 0.01, 1, &budget);
        } else if (!strcmp(key, "switch-pkt")) {
            ok = unixctl_double_arg(conn, key, val, 0, 1e7, &switch_pkt);
        } else if (!strcmp(key, "switch-byte")) {
            ok = unixctl_double_arg(conn, key, val, 0, 1e4, &switch_byte);
        } else {
            char *msg = xasprintf("unknown option \"%s\": expected attack=, "
                                  "dos-bytes=, good-bytes=, pkts-per-flow=, "
                                  "threshold=, budget=, switch-pkt= or "
                                  "switch-byte=", argv[i]);
            unixctl_command_reply_error(conn, msg);
            free(msg);
            ok = false;
        }
        free(key);
        if (!ok) {
            return;
        }
    }

    if (!dos_costs_valid || dos_costs_events != host_events_signature()) {
        char *error = dos_profile_run(16384, 5);
        if (error) {
            unixctl_command_reply_error(conn, error);
            free(error);
            return;
        }
    } else {
        /* The switch's term from the latest samples. */
        switch_cost_fit(&dos_costs);
    }
    dos_switch_given = switch_pkt >= 0 || switch_byte >= 0;
    if (switch_pkt >= 0) {
        dos_costs.switch_pkt = switch_pkt;
    }
    if (switch_byte >= 0) {
        dos_costs.switch_byte = switch_byte;
    }

    /* The filter table of the running PMDs (the knobs apply to PMDs
     * created from now on). */
    struct tpm_params mp = knobs.params;
    size_t n_pmds;
    struct tpm_pmd **parts = pmds_snapshot(&n_pmds);
    if (n_pmds) {
        const struct tpm_params *pp = tpm_get_params(parts[0]->tpm);
        mp.epoch_ns = pp->epoch_ns;
        mp.dos_table_size = pp->dos_table_size;
        mp.dos_window = pp->dos_window;
        mp.dos_clear_on_pass = pp->dos_clear_on_pass;
    }
    free(parts);

    struct tpm_dos_load l;
    uint32_t th;
    if (threshold != UINT64_MAX) {
        th = threshold;
        tpm_dos_predict(&dos_costs, &mp, &t, th, &l);
    } else {
        th = tpm_dos_min_threshold(&dos_costs, &mp, &t, budget,
                                   t.good_bytes * t.pkts_per_flow, &l);
    }
    struct ds s = DS_EMPTY_INITIALIZER;
    format_dos_costs(&s);
    ds_put_format(&s, "attack: %s, %.0f pps of %"PRIu32" bytes; good: %.0f "
                  "pps of %"PRIu32" bytes, %"PRIu32" packets per flow\n",
                  t.syn ? "syn" : "threshold", t.rate_dos, t.dos_bytes,
                  t.rate_good, t.good_bytes, t.pkts_per_flow);
    if (th == UINT32_MAX) {
        ds_put_format(&s, "threshold: none (over budget %.2f even at the "
                      "good flows' size)\n", budget);
    } else {
        ds_put_format(&s, "threshold: %"PRIu32"\n", th);
    }
    ds_put_format(&s, "load: %.3f\n", l.load);
    ds_put_format(&s, "load_parts: switch %.3f, below threshold %.3f, "
                  "matched packets %.3f, matching %.3f, sweep %.3f\n",
                  l.switch_share, l.pending_share, l.matched_share,
                  l.match_share, l.sweep_share);
    ds_put_format(&s, "flows_passing_per_second: attack %.0f, good %.0f%s\n",
                  l.dos_flows_passing, l.good_flows_passing,
                  l.good_unmonitored ? " (good flows below the threshold: "
                  "not monitored)" : "");
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
    ds_put_format(&s, "clock: OVS's monotonic time + %"PRIu64" ns "
                  "(wall clock steps followed %"PRIu64", backward steps "
                  "%"PRIu64", epochs ahead of the wall clock by %"PRId64
                  " us)\n", mono_to_wall__(), clock_steps, clock_steps_back,
                  clock_ahead_ns / 1000);
    format_agent_summary(&s);
    for (size_t i = 0; i < n; i++) {
        const struct tpm_params *pp = tpm_get_params(parts[i]->tpm);
        struct tpm_stats st;
        uint64_t idle, forced, catchup;
        tpm_get_stats(parts[i]->tpm, &st);
        atomic_read_relaxed(&parts[i]->steps_idle, &idle);
        atomic_read_relaxed(&parts[i]->steps_forced, &forced);
        atomic_read_relaxed(&parts[i]->steps_catchup, &catchup);

        ds_put_format(&s, "pmd core %u:\n", parts[i]->core_id);
        ds_put_cstr(&s, "  lost data:");
        bool lost = false;
        for (size_t j = 0; j < TPM_N_LOSSES; j++) {
            uint64_t v = tpm_loss_get(&st, &tpm_losses[j]);
            if (v) {
                ds_put_format(&s, "%s %s %"PRIu64, lost ? "," : "",
                              tpm_losses[j].name, v);
                lost = true;
            }
        }
        ds_put_cstr(&s, lost ? "\n" : " none\n");
        ds_put_format(&s, "  packets: %"PRIu64" (non-IP %"PRIu64"), "
                      "bytes: %"PRIu64"\n", st.packets, st.non_ip,
                      st.bytes);
        ds_put_format(&s, "  not parsed: %"PRIu64" (non-IP %"PRIu64", "
                      "L2 truncated %"PRIu64", too many VLAN tags %"PRIu64
                      ", L3 truncated %"PRIu64", bad IP header %"PRIu64
                      ", ports not captured %"PRIu64"); parsed with the L4 "
                      "header cut %"PRIu64", IPv4 length from the frame %"
                      PRIu64"\n", st.not_parsed,
                      st.parse.not_parsed[TPM_PARSE_NON_IP],
                      st.parse.not_parsed[TPM_PARSE_L2_TRUNCATED],
                      st.parse.not_parsed[TPM_PARSE_TOO_MANY_TAGS],
                      st.parse.not_parsed[TPM_PARSE_L3_TRUNCATED],
                      st.parse.not_parsed[TPM_PARSE_BAD_IP_HEADER],
                      st.parse.not_parsed[TPM_PARSE_PORTS_NOT_CAPTURED],
                      st.parse.l4_truncated, st.parse.ip_len_from_frame);
        ds_put_format(&s, "  flows: %"PRIu64" live, table load %.1f%%, "
                      "inserts %"PRIu64", reuses %"PRIu64", evictions "
                      "%"PRIu64", freed %"PRIu64", retired %"PRIu64"\n",
                      st.flows_live,
                      100.0 * st.flows_live / pp->flow_table_size,
                      st.flow_inserts, st.flow_reuses, st.flow_evictions,
                      st.flows_freed, st.flows_retired);
        ds_put_format(&s, "  matches: %"PRIu64", over max_matches %"PRIu64
                      ", out of summary slots %"PRIu64"\n", st.matches,
                      st.match_overflow, st.summary_overflow);
        ds_put_format(&s, "  dos: threshold %"PRIu32" bytes, skipped packets "
                      "%"PRIu64" (pre-check %"PRIu64"), flows passed "
                      "%"PRIu64", removed on collision %"PRIu64", removed "
                      "by sweep %"PRIu64"; filter table %"PRIu32
                      " counters, window %"PRIu32" epochs, clear on pass "
                      "%s\n", pp->dos_threshold,
                      st.dos_skipped_pkts, st.dos_precheck_pkts,
                      st.dos_passed, st.dos_removed_collision,
                      st.dos_removed_sweep, pp->dos_table_size,
                      pp->dos_window,
                      pp->dos_clear_on_pass ? "yes" : "no");
        double sw_pkt, mon_pkt;
        if (pmd_cycles_per_packet(parts[i], &sw_pkt, &mon_pkt)) {
            ds_put_format(&s, "  cycles per packet (sampled busy "
                          "iterations): switch %.1f, monitor %.1f\n",
                          sw_pkt, mon_pkt);
        }
        ds_put_format(&s, "  triggers: %"PRIu64" instances, created %"PRIu64
                      ", expired %"PRIu64", refused %"PRIu64", chunks "
                      "exhausted %"PRIu64"\n", st.triggers,
                      st.children_created, st.children_expired,
                      st.children_dropped, st.chunks_exhausted);
        ds_put_format(&s, "  sweeps: done %"PRIu64", unfinished %"PRIu64
                      ", forced %"PRIu64"; steps idle %"PRIu64", steps "
                      "while saturated %"PRIu64" (catch-up %"PRIu64")\n",
                      st.sweeps_done, st.sweeps_unfinished, st.sweeps_forced,
                      idle, forced, catchup);
        ds_put_format(&s, "  sweep time: p50 %"PRIu64" ns, p99 %"PRIu64
                      " ns, max %"PRIu64" ns\n", st.sweep_ns_p50,
                      st.sweep_ns_p99, st.sweep_ns_max);
        ds_put_format(&s, "  reports: %"PRIu64", dropped %"PRIu64
                      "; epochs %"PRIu64", skipped %"PRIu64"\n",
                      st.reports, st.reports_dropped, st.epochs,
                      st.epochs_skipped);
        ds_put_format(&s, "  tcp state: %"PRIu64" connections of %"PRIu32
                      ", pool exhausted %"PRIu64", freed %"PRIu64"\n",
                      st.tcp_states, pp->tcp_state_pool,
                      st.tcp_state_exhausted, st.tcp_state_freed);
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

/* The TEM. */

static struct host_event *
tem_event_find(uint32_t tem_id)
{
    struct host_event *he;
    LIST_FOR_EACH (he, node, &host_events) {
        if (he->tem && he->tem_id == tem_id) {
            return he;
        }
    }
    return NULL;
}

static const char *
agent_cmd_name(enum tpm_agent_cmd_type type)
{
    switch (type) {
    case TPM_AGENT_INSTALL:
        return "install";
    case TPM_AGENT_REMOVE:
        return "remove";
    case TPM_AGENT_POLL:
        return "poll";
    case TPM_AGENT_RESYNC:
        return "resync";
    case TPM_AGENT_CONFIGURE:
        return "configure";
    default:
        return "?";
    }
}

/* Counts a message the agent did not take. */
static void
agent_send_dropped(const char *what, uint32_t tem_id)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(5, 20);
    COVERAGE_INC(tpm_agent_send_dropped);
    VLOG_WARN_RL(&rl, "%s for TEM event id %"PRIu32" not sent: agent queue "
                 "full or no session", what, tem_id);
}

/* Acks 'cmd', or nacks it with 'error' (cut to what the protocol
 * carries). */
static void
tem_reply(const struct tpm_agent_cmd *cmd, const char *error)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(5, 20);
    bool sent;

    if (error) {
        char reason[TPROTO_MAX_REASON + 1];
        ovs_strlcpy(reason, error, sizeof reason);
        actr.nacks++;
        COVERAGE_INC(tpm_agent_nack);
        VLOG_WARN_RL(&rl, "TEM %s of event id %"PRIu32" (%s) refused: %s",
                     agent_cmd_name(cmd->type), cmd->event_id,
                     cmd->name ? cmd->name : "-", error);
        sent = tpm_agent_send_nack(agent, cmd->cookie, cmd->event_id,
                                   reason);
    } else {
        sent = tpm_agent_send_ack(agent, cmd->cookie, cmd->event_id);
    }
    if (sent) {
        actr.replies++;
    } else {
        actr.replies_dropped++;
        agent_send_dropped(error ? "nack" : "ack", cmd->event_id);
    }
}

/* Installs the TEM's event of 'cmd' on the PMDs 'parts'.  An install for
 * an id already installed with the same name, definition and threshold
 * share changes nothing; with anything different it replaces it.  Returns
 * NULL or an error (caller frees). */
static char *
tem_install(const struct tpm_agent_cmd *cmd, struct tpm_pmd **parts,
            size_t n)
{
    struct tpm_event *ev;
    char *error = tpm_event_parse(cmd->name, cmd->definition, &ev);
    if (error) {
        return error;
    }
    if (cmd->has_threshold && !tpm_event_set_threshold(ev, cmd->threshold)) {
        tpm_event_destroy(ev);
        return xstrdup("a threshold share was given but the predicate has "
                       "no constant threshold to replace");
    }
    error = event_check(ev);
    if (error) {
        tpm_event_destroy(ev);
        return error;
    }

    char *name = xasprintf("tem:%s", cmd->name);
    struct host_event *old = tem_event_find(cmd->event_id);
    struct host_event *other = host_event_find(name);
    if (other && other != old) {
        error = xasprintf("event name %s is already used by TEM event id "
                          "%"PRIu32, cmd->name, other->tem_id);
    } else if (old && old == other && !strcmp(old->def->text, ev->text)
               && old->has_share == cmd->has_threshold
               && (!cmd->has_threshold || old->share == cmd->threshold)) {
        /* Installed already, as asked (a retried install). */
        tpm_event_destroy(ev);
        free(name);
        return NULL;
    }
    if (error) {
        tpm_event_destroy(ev);
        free(name);
        return error;
    }
    if (old) {
        VLOG_INFO("TEM event id %"PRIu32" (%s) replaced by a new install",
                  old->tem_id, old->name);
        host_event_remove(old, parts, n);
    }

    struct host_event *he = host_event_create(name, ev);
    free(name);
    he->tem = true;
    he->tem_id = cmd->event_id;
    he->has_share = cmd->has_threshold;
    he->share = cmd->threshold;
    return host_event_install(he, parts, n);
}

/* Removes every event the TEM installed. */
static void
tem_events_remove_all(struct tpm_pmd **parts, size_t n)
{
    uint32_t *ids = NULL;
    size_t n_ids = 0, cap = 0;
    struct host_event *he;

    LIST_FOR_EACH (he, node, &host_events) {
        if (he->tem) {
            if (n_ids == cap) {
                ids = x2nrealloc(ids, &cap, sizeof *ids);
            }
            ids[n_ids++] = he->id;
        }
    }
    if (!n_ids) {
        return;
    }
    delete_many(parts, n, ids, n_ids);
    free(ids);
    LIST_FOR_EACH_SAFE (he, node, &host_events) {
        if (he->tem) {
            ovs_list_remove(&he->node);
            host_event_free(he);
        }
    }
    atomic_store_relaxed(&n_watch, ovs_list_size(&host_events));
}

static void
tem_poll_answer(uint64_t cookie, uint32_t tem_id, uint64_t epoch,
                Trumpet__PollStatus status, double value)
{
    if (agent && tpm_agent_send_poll_reply(agent, cookie, tem_id, epoch,
                                           status, value)) {
        actr.replies++;
    } else {
        actr.replies_dropped++;
        agent_send_dropped("poll reply", tem_id);
    }
}

static void
tem_poll_free(struct tem_poll *p)
{
    for (size_t i = 0; i < p->n_parts; i++) {
        if (p->parts[i].state == TEM_PART_WAITING) {
            hmap_remove(&tem_poll_parts, &p->parts[i].node);
        }
    }
    ovs_list_remove(&p->node);
    tem_polls_n--;
    free(p->parts);
    free(p);
}

/* Forgets every pending poll of the TEM without answering (the session
 * they belong to is over).  Late PMD replies to them are ignored. */
static void
tem_polls_cancel_all(void)
{
    struct tem_poll *p;
    LIST_FOR_EACH_SAFE (p, node, &tem_polls) {
        actr.polls_cancelled++;
        COVERAGE_INC(tpm_tem_poll_cancelled);
        tem_poll_free(p);
    }
}

static struct tpm_pmd *
pmd_by_serial(struct tpm_pmd **parts, size_t n, uint64_t serial)
{
    for (size_t i = 0; i < n; i++) {
        if (parts[i]->serial == serial) {
            return parts[i];
        }
    }
    return NULL;
}

/* Submits the PMD polls of 'p' that are due; a part whose PMD left is
 * missing.  A poll that finds a PMD's command ring full is tried again
 * on the next call. */
static void
tem_poll_submit(struct tem_poll *p, struct tpm_pmd **parts, size_t n)
{
    for (size_t i = 0; i < p->n_parts; i++) {
        struct tem_poll_part *pp = &p->parts[i];
        if (pp->state != TEM_PART_SUBMIT && pp->state != TEM_PART_WAITING) {
            continue;
        }
        struct tpm_pmd *pmd = pmd_by_serial(parts, n, pp->pmd_serial);
        if (!pmd) {
            if (pp->state == TEM_PART_WAITING) {
                hmap_remove(&tem_poll_parts, &pp->node);
            }
            pp->state = TEM_PART_MISSING;
        } else if (pp->state == TEM_PART_SUBMIT) {
            uint64_t cookie = next_cookie++;
            if (tpm_submit_poll(pmd->tpm, p->event_id, &p->group, p->epoch,
                                cookie)) {
                pp->cookie = cookie;
                pp->state = TEM_PART_WAITING;
                hmap_insert(&tem_poll_parts, &pp->node,
                            hash_uint64(cookie));
            }
        }
    }
}

/* Answers 'p' from what its parts got, and frees it. */
static void
tem_poll_finish(struct tem_poll *p)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(5, 20);
    size_t expired = 0, no_event = 0, not_yet = 0, missing = 0;
    double sum = 0;

    for (size_t i = 0; i < p->n_parts; i++) {
        const struct tem_poll_part *pp = &p->parts[i];
        if (pp->state == TEM_PART_DONE) {
            if (pp->status == TPM_POLL_OK) {
                sum += pp->value;
            } else if (pp->status == TPM_POLL_EXPIRED) {
                expired++;
            } else if (pp->status == TPM_POLL_NO_EVENT) {
                no_event++;
            }
        } else if (pp->state != TEM_PART_MISSING && pp->not_yet) {
            not_yet++;
        } else {
            missing++;
        }
    }

    Trumpet__PollStatus status;
    if (expired) {
        status = TRUMPET__POLL_STATUS__POLL_EXPIRED;
    } else if (p->n_parts && no_event == p->n_parts) {
        status = TRUMPET__POLL_STATUS__POLL_NO_EVENT;
    } else if (not_yet) {
        status = TRUMPET__POLL_STATUS__POLL_NOT_YET;
        actr.polls_not_yet++;
        COVERAGE_INC(tpm_tem_poll_not_yet);
        VLOG_DBG_RL(&rl, "TEM poll of event id %"PRIu32" epoch %"PRIu64": "
                    "%"PRIuSIZE" PMDs had not swept it by "
                    "tpm-poll-timeout", p->tem_id, p->epoch, not_yet);
    } else if (missing || no_event) {
        status = TRUMPET__POLL_STATUS__POLL_INCOMPLETE;
        actr.polls_incomplete++;
        COVERAGE_INC(tpm_tem_poll_incomplete);
        VLOG_WARN_RL(&rl, "TEM poll of event id %"PRIu32" epoch %"PRIu64": "
                     "%"PRIuSIZE" of %"PRIuSIZE" PMDs did not answer by "
                     "tpm-poll-timeout or lack the event; answering the sum "
                     "of the others", p->tem_id, p->epoch,
                     missing + no_event, p->n_parts);
    } else {
        status = TRUMPET__POLL_STATUS__POLL_OK;
    }
    tem_poll_answer(p->cookie, p->tem_id, p->epoch, status, sum);
    tem_poll_free(p);
}

/* Starts answering the TEM's poll 'cmd' over the PMDs 'parts'. */
static void
tem_poll_start(const struct tpm_agent_cmd *cmd, struct tpm_pmd **parts,
               size_t n)
{
    struct host_event *he = tem_event_find(cmd->event_id);
    COVERAGE_INC(tpm_tem_poll);
    if (!he) {
        tem_poll_answer(cmd->cookie, cmd->event_id, cmd->epoch,
                        TRUMPET__POLL_STATUS__POLL_NO_EVENT, 0);
        return;
    }

    uint64_t now = now_ns();
    struct tem_poll *p = xzalloc(sizeof *p);
    p->cookie = cmd->cookie;
    p->tem_id = cmd->event_id;
    p->event_id = he->id;
    p->epoch = cmd->epoch;
    p->group = cmd->group;
    p->deadline_ns = now + knobs.poll_timeout_ns;
    p->n_parts = n;
    p->parts = xcalloc(MAX(n, 1), sizeof *p->parts);
    for (size_t i = 0; i < n; i++) {
        struct tem_poll_part *pp = &p->parts[i];
        struct tpm_stats st;
        pp->pmd_serial = parts[i]->serial;
        tpm_get_stats(parts[i]->tpm, &st);
        if (!st.packets && pmd_parked(parts[i], now)) {
            /* No rx queue ever: its share is exactly zero. */
            pp->state = TEM_PART_DONE;
            pp->status = TPM_POLL_NO_GROUP;
        } else {
            pp->state = TEM_PART_SUBMIT;
        }
    }
    ovs_list_push_back(&tem_polls, &p->node);
    tem_polls_n++;
    tem_poll_submit(p, parts, n);
}

/* Submits what is due for the pending polls and answers those that are
 * complete or past their deadline. */
static void
tem_polls_run(struct tpm_pmd **parts, size_t n)
{
    uint64_t now = now_ns();
    struct tem_poll *p;

    LIST_FOR_EACH_SAFE (p, node, &tem_polls) {
        tem_poll_submit(p, parts, n);
        bool complete = true;
        for (size_t i = 0; i < p->n_parts; i++) {
            if (p->parts[i].state != TEM_PART_DONE
                && p->parts[i].state != TEM_PART_MISSING) {
                complete = false;
                break;
            }
        }
        if (complete || now >= p->deadline_ns) {
            tem_poll_finish(p);
        }
    }
}

/* Executes the TEM's commands queued by the agent (a bounded number),
 * then advances the pending polls. */
static void
agent_run(struct tpm_pmd **parts, size_t n)
{
    agent_backlog = false;
    if (!agent) {
        return;
    }
    for (int i = 0; tem_polls_n < agent_cfg.queue_size; i++) {
        struct tpm_agent_cmd cmd;
        char *error;

        if (i >= TPM_AGENT_CMDS_PER_RUN) {
            agent_backlog = true;
            break;
        }
        if (!tpm_agent_recv(agent, &cmd)) {
            break;
        }
        COVERAGE_INC(tpm_agent_command);
        switch (cmd.type) {
        case TPM_AGENT_INSTALL:
            actr.installs++;
            error = tem_install(&cmd, parts, n);
            tem_reply(&cmd, error);
            free(error);
            break;
        case TPM_AGENT_REMOVE: {
            struct host_event *he = tem_event_find(cmd.event_id);
            actr.removes++;
            if (he) {
                host_event_remove(he, parts, n);
                tem_reply(&cmd, NULL);
            } else {
                error = xasprintf("no event of TEM id %"PRIu32" installed",
                                  cmd.event_id);
                tem_reply(&cmd, error);
                free(error);
            }
            break;
        }
        case TPM_AGENT_POLL:
            actr.polls++;
            tem_poll_start(&cmd, parts, n);
            break;
        case TPM_AGENT_CONFIGURE:
            /* Every PMD applies it at its next sweep step.  The agent
             * passes on only a Configure that sets something. */
            actr.configures++;
            if (cmd.has_dos_threshold) {
                dos_threshold_set(cmd.dos_threshold, "TEM");
            }
            tem_reply(&cmd, NULL);
            break;
        case TPM_AGENT_RESYNC:
        default:
            /* A new session: the TEM installs its events again. */
            actr.resyncs++;
            tem_polls_cancel_all();
            tem_events_remove_all(parts, n);
            VLOG_INFO("TEM session started: its previous events were "
                      "removed, it installs them again");
            break;
        }
        tpm_agent_cmd_free(&cmd);
    }
    tem_polls_run(parts, n);
}

/* The agent's lifecycle. */

static void
agent_cfg_destroy(struct agent_cfg *c)
{
    free(c->endpoint);
    free(c->host_id);
    free(c->prefixes);
    free(c->tem_key);
    free(c->key_file);
    memset(c, 0, sizeof *c);
}

static bool
agent_cfg_equal(const struct agent_cfg *a, const struct agent_cfg *b)
{
    return nullable_string_is_equal(a->endpoint, b->endpoint)
           && nullable_string_is_equal(a->host_id, b->host_id)
           && nullable_string_is_equal(a->prefixes, b->prefixes)
           && a->queue_size == b->queue_size
           && a->backoff_max_ns == b->backoff_max_ns
           && a->epoch_ns == b->epoch_ns
           && nullable_string_is_equal(a->tem_key, b->tem_key)
           && nullable_string_is_equal(a->key_file, b->key_file)
           && a->insecure == b->insecure;
}

static int
compare_u32(const void *a_, const void *b_)
{
    uint32_t a = *(const uint32_t *) a_, b = *(const uint32_t *) b_;
    return a < b ? -1 : a > b;
}

/* Returns the core ids of 'parts', sorted (caller frees). */
static uint32_t *
pmd_core_ids(struct tpm_pmd **parts, size_t n)
{
    uint32_t *ids = xmalloc(MAX(n, 1) * sizeof *ids);
    for (size_t i = 0; i < n; i++) {
        ids[i] = parts[i]->core_id;
    }
    qsort(ids, n, sizeof *ids, compare_u32);
    return ids;
}

/* Stops the agent, if any, and forgets the TEM's events and polls: a TEM
 * event on a host that cannot report it would only cost. */
static void
agent_stop(struct tpm_pmd **parts, size_t n)
{
    if (!agent) {
        return;
    }
    tem_polls_cancel_all();
    tem_events_remove_all(parts, n);
    tpm_agent_destroy(agent);
    agent = NULL;
    free(agent_pmd_ids);
    agent_pmd_ids = NULL;
    agent_n_pmds = 0;
}

/* Starts an agent for 'c' that announces the PMDs 'parts'.  Returns NULL
 * or an error (caller frees). */
static char *
agent_start(const struct agent_cfg *c, struct tpm_pmd **parts, size_t n)
{
    struct tpm_agent_config ac;
    char host[256];

    tpm_agent_config_init(&ac);
    if (c->host_id) {
        ac.host_id = c->host_id;
    } else if (gethostname(host, sizeof host)) {
        return xasprintf("cannot read the hostname (%s): set "
                         "other_config:tpm-host-id", ovs_strerror(errno));
    } else {
        host[MIN(sizeof host - 1, TPROTO_MAX_ID)] = '\0';
        ac.host_id = host;
    }

    struct tpm_prefix *prefixes;
    size_t n_prefixes;
    char *error = tpm_prefix_parse_list(c->prefixes, &prefixes,
                                        &n_prefixes);
    if (error) {
        return error;
    }
    uint32_t *ids = pmd_core_ids(parts, n);
    ac.endpoint = c->endpoint;
    ac.prefixes = prefixes;
    ac.n_prefixes = n_prefixes;
    ac.epoch_ns = c->epoch_ns;
    ac.pmd_ids = ids;
    ac.n_pmds = n;
    ac.software = "ovs-vswitchd " VERSION;
    ac.queue_size = c->queue_size;
    ac.backoff_max_ns = c->backoff_max_ns;
    ac.tem_public_key = c->tem_key;
    ac.key_file = c->key_file;
    ac.insecure_plaintext = c->insecure;
    agent = tpm_agent_create(&ac, &error);
    free(prefixes);
    if (!agent) {
        free(ids);
        COVERAGE_INC(tpm_agent_create_failed);
        return error;
    }
    agent_pmd_ids = ids;
    agent_n_pmds = n;
    agent_pmds_gen = snapshot_gen;
    agent_started_ns = now_ns();
    memset(&actr, 0, sizeof actr);
    VLOG_INFO("TEM agent started: controller %s, host id %s, %"PRIuSIZE
              " prefixes, %"PRIuSIZE" PMD threads", c->endpoint, ac.host_id,
              n_prefixes, n);
    return NULL;
}

/* Restarts the agent with 'agent_cfg' (if one is configured): it says
 * Hello again with the current PMDs. */
static void
agent_restart(struct tpm_pmd **parts, size_t n, const char *why)
{
    agent_stop(parts, n);
    if (agent_cfg.endpoint) {
        VLOG_INFO("restarting the TEM agent: %s", why);
        agent_restarts++;
        COVERAGE_INC(tpm_agent_restart);
        char *error = agent_start(&agent_cfg, parts, n);
        if (error) {
            VLOG_ERR("TEM agent not restarted: %s", error);
            free(error);
        }
    }
}

/* Restarts the agent when the PMD threads changed since its Hello. */
static void
agent_check_pmds(struct tpm_pmd **parts, size_t n)
{
    if (!agent || agent_pmds_gen == snapshot_gen) {
        return;
    }
    agent_pmds_gen = snapshot_gen;
    uint32_t *ids = pmd_core_ids(parts, n);
    bool same = n == agent_n_pmds
                && !memcmp(ids, agent_pmd_ids, n * sizeof *ids);
    free(ids);
    if (!same) {
        agent_restart(parts, n, "the PMD threads changed");
    }
}

/* Returns true if 's' is a valid host id (lib/agent.h). */
static bool
host_id_valid(const char *s)
{
    size_t len = strlen(s);
    if (!len || len > TPROTO_MAX_ID) {
        return false;
    }
    for (; *s; s++) {
        if (!isalnum((unsigned char) *s) && !strchr("_.:-", *s)) {
            return false;
        }
    }
    return true;
}

/* Reads the agent's knobs.  Any change restarts the agent; an invalid
 * value is logged and the previous settings stay. */
static void
agent_set_config(const struct smap *cfg)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 5);
    struct tpm_agent_config defaults;
    struct agent_cfg c;
    bool ok = true;

    tpm_agent_config_init(&defaults);
    memset(&c, 0, sizeof c);
    c.queue_size = defaults.queue_size;
    c.backoff_max_ns = defaults.backoff_max_ns;
    c.epoch_ns = knobs.params.epoch_ns;

    const char *endpoint = smap_get(cfg, "tpm-controller");
    size_t max_endpoint = MEMBER_SIZEOF(struct tpm_agent_status,
                                        endpoint) - 1;
    if (endpoint && strlen(endpoint) > max_endpoint) {
        VLOG_WARN_RL(&rl, "other_config:tpm-controller rejected: longer "
                     "than %"PRIuSIZE" characters", max_endpoint);
        ok = false;
    } else if (endpoint && endpoint[0]) {
        c.endpoint = xstrdup(endpoint);
    }

    const char *host_id = smap_get(cfg, "tpm-host-id");
    if (host_id && !host_id_valid(host_id)) {
        VLOG_WARN_RL(&rl, "other_config:tpm-host-id=\"%s\" rejected: "
                     "expected 1 to %d characters from [A-Za-z0-9_.:-]",
                     host_id, TPROTO_MAX_ID);
        ok = false;
    } else if (host_id) {
        c.host_id = xstrdup(host_id);
    }

    const char *prefixes = smap_get_def(cfg, "tpm-prefixes", "");
    struct tpm_prefix *parsed;
    size_t n_parsed;
    char *error = tpm_prefix_parse_list(prefixes, &parsed, &n_parsed);
    if (error) {
        VLOG_WARN_RL(&rl, "other_config:tpm-prefixes=\"%s\" rejected: %s",
                     prefixes, error);
        free(error);
        ok = false;
    } else {
        free(parsed);
        if (n_parsed > TPROTO_MAX_PREFIXES) {
            VLOG_WARN_RL(&rl, "other_config:tpm-prefixes rejected: %"PRIuSIZE
                         " prefixes, at most %d", n_parsed,
                         TPROTO_MAX_PREFIXES);
            ok = false;
        }
        c.prefixes = xstrdup(prefixes);
    }

    /* CURVE keys (docs/operations.md, "Keys"); checked by the agent. */
    c.tem_key = nullable_xstrdup(smap_get(cfg, "tpm-controller-key"));
    c.key_file = nullable_xstrdup(smap_get(cfg, "tpm-host-key-file"));
    ok &= knob_bool(cfg, "tpm-controller-insecure", &c.insecure);

    ok &= knob_uint(cfg, "tpm-agent-queue", 16, 1u << 20, &c.queue_size);
    uint64_t backoff = c.backoff_max_ns;
    ok &= knob_time(cfg, "tpm-agent-backoff-max", defaults.backoff_min_ns,
                    3600ULL * 1000 * 1000 * 1000, &backoff);
    c.backoff_max_ns = backoff;

    if (!ok) {
        VLOG_WARN_RL(&rl, "keeping the previous TEM agent settings");
        agent_cfg_destroy(&c);
        return;
    }
    if (agent_cfg_equal(&c, &agent_cfg)) {
        agent_cfg_destroy(&c);
        return;
    }

    size_t n;
    struct tpm_pmd **parts = pmds_snapshot(&n);
    bool was_running = agent != NULL;
    agent_stop(parts, n);
    error = c.endpoint ? agent_start(&c, parts, n) : NULL;
    if (error) {
        VLOG_ERR("TEM agent for other_config:tpm-controller=\"%s\" not "
                 "started: %s; keeping the previous settings", c.endpoint,
                 error);
        free(error);
        agent_cfg_destroy(&c);
        if (was_running) {
            agent_restart(parts, n, "new settings rejected");
        }
    } else {
        if (was_running && c.endpoint) {
            agent_restarts++;
            COVERAGE_INC(tpm_agent_restart);
        } else if (was_running) {
            VLOG_INFO("TEM agent stopped (other_config:tpm-controller "
                      "unset)");
        }
        agent_cfg_destroy(&agent_cfg);
        agent_cfg = c;
    }
    free(parts);
}

/* Appends to 's' a line on the agent for tpm/stats. */
static void
format_agent_summary(struct ds *s)
{
    if (!agent) {
        ds_put_cstr(s, "controller: none\n");
        return;
    }
    struct tpm_agent_status st;
    size_t n_tem = 0;
    struct host_event *he;
    LIST_FOR_EACH (he, node, &host_events) {
        n_tem += he->tem;
    }
    tpm_agent_get_status(agent, &st);
    ds_put_format(s, "controller: %s, %s; messages in %"PRIu64", out "
                  "%"PRIu64", dropped in %"PRIu64", out %"PRIu64"; TEM "
                  "events %"PRIuSIZE", polls pending %"PRIuSIZE"\n",
                  st.endpoint, tpm_agent_state_name(st.state), st.msgs_in,
                  st.msgs_out, st.drops_in, st.drops_out, n_tem,
                  tem_polls_n);
}

/* Formats an age in seconds ("never" if 'then' is 0). */
static void
format_age(struct ds *s, uint64_t then, uint64_t now)
{
    if (!then) {
        ds_put_cstr(s, "never");
    } else {
        ds_put_format(s, "%.1f s ago",
                      now > then ? (now - then) / 1e9 : 0.0);
    }
}

static void
tpm_unixctl_controller_show(struct unixctl_conn *conn, int argc OVS_UNUSED,
                            const char *argv[] OVS_UNUSED,
                            void *aux OVS_UNUSED)
{
    struct ds s = DS_EMPTY_INITIALIZER;

    if (!agent) {
        ds_put_cstr(&s, "no controller (other_config:tpm-controller is not "
                    "set)\n");
        unixctl_command_reply(conn, ds_cstr(&s));
        ds_destroy(&s);
        return;
    }

    struct tpm_agent_status st;
    uint64_t now = now_ns();
    char t[32];
    tpm_agent_get_status(agent, &st);
    ds_put_format(&s, "controller: %s\n", st.endpoint);
    ds_put_format(&s, "state: %s\n", tpm_agent_state_name(st.state));
    ds_put_format(&s, "host id: %s\n", st.host_id);
    ds_put_format(&s, "tem id: %s, protocol version: %"PRIu32"\n",
                  st.tem_id[0] ? st.tem_id : "-", st.version);
    ds_put_format(&s, "prefixes: %s\n",
                  agent_cfg.prefixes[0] ? agent_cfg.prefixes : "-");
    ds_put_format(&s, "epoch: %s, PMD cores:",
                  tpm_time_format(agent_cfg.epoch_ns, t, sizeof t));
    for (size_t i = 0; i < agent_n_pmds; i++) {
        ds_put_format(&s, " %"PRIu32, agent_pmd_ids[i]);
    }
    ds_put_format(&s, "%s\n", agent_n_pmds ? "" : " none");
    ds_put_format(&s, "sessions: %"PRIu64", reconnects: %"PRIu64", agent "
                  "restarts: %"PRIu64" (started ", st.sessions,
                  st.reconnects, agent_restarts);
    format_age(&s, agent_started_ns, now);
    ds_put_cstr(&s, ")\n");
    ds_put_format(&s, "frames in: %"PRIu64", out: %"PRIu64"\n",
                  st.frames_in, st.frames_out);
    ds_put_format(&s, "messages in: %"PRIu64", out: %"PRIu64"\n",
                  st.msgs_in, st.msgs_out);
    ds_put_format(&s, "invalid in: %"PRIu64"\n", st.invalid_in);
    ds_put_format(&s, "drops in: %"PRIu64" (command queue full), out: "
                  "%"PRIu64" (queue full or no session)\n", st.drops_in,
                  st.drops_out);
    ds_put_cstr(&s, "last message in: ");
    format_age(&s, st.last_rx_ns, now);
    ds_put_cstr(&s, "\nlast error: ");
    if (st.last_error[0]) {
        ds_put_format(&s, "%s (", st.last_error);
        format_age(&s, st.last_error_ns, now);
        ds_put_cstr(&s, ")\n");
    } else {
        ds_put_cstr(&s, "none\n");
    }
    ds_put_format(&s, "commands: installs %"PRIu64", removes %"PRIu64
                  ", polls %"PRIu64", resyncs %"PRIu64", configures %"PRIu64
                  ", refused (nacks) %"PRIu64"\n", actr.installs,
                  actr.removes, actr.polls, actr.resyncs, actr.configures,
                  actr.nacks);
    ds_put_format(&s, "sent: satisfactions %"PRIu64" (dropped %"PRIu64
                  "), replies %"PRIu64" (dropped %"PRIu64")\n",
                  actr.satisfactions, actr.satisfactions_dropped,
                  actr.replies, actr.replies_dropped);
    ds_put_format(&s, "polls: pending %"PRIuSIZE", answered incomplete "
                  "%"PRIu64", not yet %"PRIu64", cancelled %"PRIu64"\n",
                  tem_polls_n, actr.polls_incomplete, actr.polls_not_yet,
                  actr.polls_cancelled);

    size_t n;
    struct tpm_pmd **parts = pmds_snapshot(&n);
    struct ds ev = DS_EMPTY_INITIALIZER;
    size_t n_tem = 0;
    struct host_event *he;
    LIST_FOR_EACH (he, node, &host_events) {
        if (!he->tem) {
            continue;
        }
        n_tem++;
        ds_put_format(&ev, "  %s (TEM id %"PRIu32"): ", he->name,
                      he->tem_id);
        if (he->has_share) {
            ds_put_format(&ev, "threshold share %.17g", he->share);
        } else {
            ds_put_cstr(&ev, "whole threshold");
        }
        if (he->split && n > 1) {
            ds_put_format(&ev, ", split over %"PRIuSIZE" PMDs", n);
        } else if (!he->split) {
            ds_put_format(&ev, ", not split (%s)",
                          he->no_split_why ? he->no_split_why : "-");
        }
        ds_put_format(&ev, ", satisfactions %"PRIu64", sent %"PRIu64
                      " (dropped %"PRIu64")\n", he->n_reports, he->n_sent,
                      he->n_send_dropped);
    }
    free(parts);
    ds_put_format(&s, "TEM events: %"PRIuSIZE"\n%s", n_tem, ds_cstr(&ev));
    ds_destroy(&ev);
    unixctl_command_reply(conn, ds_cstr(&s));
    ds_destroy(&s);
}

void
tpm_ovs_init(void)
{
    static struct ovsthread_once once = OVSTHREAD_ONCE_INITIALIZER;
    if (!ovsthread_once_start(&once)) {
        return;
    }
    clock_check();
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
    unixctl_command_register("tpm/dos-threshold", "[BYTES]", 0, 1,
                             tpm_unixctl_dos_threshold, NULL);
    unixctl_command_register("tpm/dos-profile", "[FLOWS [ROUNDS]]", 0, 2,
                             tpm_unixctl_dos_profile, NULL);
    unixctl_command_register("tpm/dos-model",
                             "RATE_DOS RATE_GOOD [attack=syn|threshold] "
                             "[dos-bytes=N] [good-bytes=N] "
                             "[pkts-per-flow=N] [threshold=N] [budget=X]",
                             2, 8, tpm_unixctl_dos_model, NULL);
    unixctl_command_register("tpm/controller-show", "", 0, 0,
                             tpm_unixctl_controller_show, NULL);
    ovsthread_once_done(&once);
}
