/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Trumpet packet monitor inside Open vSwitch's userspace datapath: see
 * tpm-ovs.h for where each function is called, docs/operations.md for the
 * commands and knobs.
 *
 * Host-level events.  An event added with tpm/event-add is one event,
 * whatever the number of PMD threads.  It is installed on every PMD (and
 * on PMDs created later).  If its threshold can be split (lib/decision.h:
 * "sum(x) > T" and the like) and there are n > 1 PMDs, each gets T/n;
 * when one reports, the main thread polls the others for the same epoch
 * and group and reports the event if the total holds (the paper's local
 * TEM).  Otherwise each PMD's satisfaction is the host's.
 *
 * A command replies once every PMD answered (or tpm-command-timeout
 * passed), so a reply says what really happened; an add that some PMD
 * refuses is rolled back everywhere.  The main thread never waits for a
 * PMD meanwhile: see "Requests to the PMDs" in tpm-ovs-private.h.
 *
 * The TEM.  With other_config:tpm-controller set, a host agent (lib/
 * agent.h: its own thread and socket) connects to the TEM, and the main
 * thread executes the TEM's commands in tpm_ovs_run().  An event the TEM
 * installs is a host event like the others (split over the PMDs, local
 * TEM), named "tem:NAME" (event names cannot contain ':', so the two
 * namespaces never meet) and carrying the TEM's id; its host-level
 * satisfactions go to the TEM.  The TEM's installs, removes and polls are
 * operations on the PMDs like the unixctl commands', answered when they
 * finish.  The PMDs only ever see their rings, so a TEM that misbehaves
 * or goes away cannot stall them.
 *
 * This file, at the top of the glue, holds the PMD hooks (tpm-ovs.h) and
 * the queue-adaptive scheduling of sweep steps (tpm/sweep-sched.h decides
 * when and with what budget; this file reads the knobs and counts the
 * steps), the main loop's hooks, the reading of the monitor's knobs and
 * the registration of the tpm/ commands; tpm-ovs-private.h lists the
 * others, in order.
 */
#include <config.h>

#include "tpm-ovs.h"
#include "tpm-ovs-private.h"

#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coverage.h"
#include "dp-packet.h"
#include "openvswitch/poll-loop.h"
#include "openvswitch/vlog.h"
#include "seq.h"
#include "smap.h"
#include "timeval.h"
#include "unixctl.h"

#include "clock.h"
#include "tpm-log.h"

/* This file logs in module "tpm", which tpm-ovs-base.c defines (a module
 * is defined once, and the VLOG macros log in 'this_module'). */
extern struct vlog_module *VLM_tpm;
#define this_module (*VLM_tpm)

COVERAGE_DEFINE(tpm_pmd_create_failed);

/* Knobs the PMD threads read on every sweep step, so a change applies at
 * once (the others apply to PMD threads created later). */
static atomic_uint64_t live_sweep_budget_ns = 10 * 1000;
static atomic_uint32_t live_sweep_every = 64;
static atomic_uint32_t live_sweep_catchup = 50;
static atomic_uint32_t live_sweep_pace = 50;
static atomic_uint64_t live_sweep_gap_ns = 500 * 1000;

/* Main-thread state. */
static bool knobs_set;

/* The DoS threshold knob's value last seen. */
static bool dos_knob_seen;
static uint32_t dos_knob_value;

/* The main thread's checks of the clock and of the loss counters run
 * this often. */
#define SECOND_CHECK_NS (1000 * 1000 * 1000)

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

struct tpm_pmd *
tpm_ovs_pmd_create(unsigned core_id, unsigned non_pmd_id)
{
    if (core_id == non_pmd_id) {
        return NULL;
    }
    if (!knobs_set) {
        tpm_params_init(&tpm_ovs_knobs.params);
    }

    char *error;
    struct tpm *tpm = tpm_create(&tpm_ovs_knobs.params, &error);
    if (!tpm) {
        COVERAGE_INC(tpm_pmd_create_failed);
        VLOG_ERR("core %u: cannot create the packet monitor (%s); this PMD "
                 "runs unmonitored", core_id, error);
        free(error);
        return NULL;
    }

    /* Host events apply to new PMDs too.  No thread runs this monitor
     * yet, so it is set up directly; split shares are evened out over
     * all PMDs by tpm_ovs_run() (tpm_ovs_event_reshare). */
    size_t n_now;
    free(tpm_ovs_pmds_snapshot(&n_now));
    struct host_event *he;
    LIST_FOR_EACH (he, node, &tpm_ovs_host_events) {
        error = tpm_ovs_event_install(tpm, he,
                                      he->split ? he->def->threshold->num
                                          / (n_now + 1) : 0);
        if (error) {
            VLOG_WARN("core %u: event %s not installed: %s", core_id,
                      he->name, error);
            free(error);
        }
    }

    /* Every PMD's monitor names a tenant by the same slot, so that the
     * main thread combines their groups (split events) and reads a slot
     * back as a VNI. */
    tpm_set_tenants(tpm, tpm_ovs_tenants_get());

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
    atomic_init(&p->busy_rx, 0);
    atomic_init(&p->busy_packets, 0);
    p->sample_countdown = CYCLE_SAMPLE_EVERY;
    p->ports_gen = UINT64_MAX;  /* Never a snapshot's: the first batch
                                 * applies the ports. */
    p->rx_port = UINT32_MAX;
    tpm_ovs_pmds_add(p);
    return p;
}

void
tpm_ovs_pmd_destroy(struct tpm_pmd *p)
{
    if (!p) {
        return;
    }
    tpm_ovs_pmds_remove(p);
    /* The PMD thread has exited; the main thread may still be in the
     * middle of talking to it only within one unixctl handler or run()
     * call, which the RCU grace period before this call outlasts. */
    tpm_destroy(p->tpm);
    free(p);
}

/* PMD thread.
 *
 * tpm_ovs_rx() and tpm_ovs_pmd_iteration() run for every batch and every
 * polling iteration, with or without events: each tests first and leaves
 * the work to a function of its own, out of line, so that a switch with
 * no event pays a few instructions per batch, not the work's frame (the
 * registers it saves, its frames[] array). */

/* tpm_ovs_rx() with at least one event installed. */
static void __attribute__((noinline))
rx__(struct tpm_pmd *p, const struct dp_packet_batch *batch, size_t n,
     uint32_t port_no, long long int now_us)
{
    uint64_t t0 = p->sampling ? tpm_rdtsc() : 0;
    struct tpm_frame frames[NETDEV_MAX_BURST];
    struct dp_packet *packet;
    DP_PACKET_BATCH_FOR_EACH (i, packet, batch) {
        frames[i].data = dp_packet_data(packet);
        frames[i].caplen = dp_packet_size(packet);
        frames[i].wirelen = dp_packet_size(packet);
    }
    if (p->sampling) {
        /* For the switch's cost per frame size
         * (tpm_dos_size_bucket()). */
        for (size_t i = 0; i < n; i++) {
            p->iter_bytes += frames[i].wirelen;
        }
    }
    p->now = tpm_ovs_pmd_now_ns(now_us);
    tpm_advance(p->tpm, p->now);

    /* The tunnel ports to decapsulate, the tenant of the port's
     * untunnelled frames and the number of its name (tpm-ovs-ports.c). */
    const struct tpm_ovs_ports *ports = tpm_ovs_ports_get();
    if (OVS_UNLIKELY(ports->gen != p->ports_gen)) {
        p->ports_gen = ports->gen;
        tpm_set_tunnel_ports(p->tpm, &ports->tunnels);
        p->rx_port = UINT32_MAX;
    }
    if (OVS_UNLIKELY(port_no != p->rx_port)) {
        const struct tpm_ovs_port_snap *s = tpm_ovs_ports_find(ports,
                                                               port_no);
        tpm_set_rx_tunnel(p->tpm, s && s->has_tun, s ? s->tun_id : 0);
        tpm_set_rx_port(p->tpm, s ? s->name_slot : 0);
        p->rx_port = port_no;
    }
    tpm_process_batch(p->tpm, frames, n);
    if (n == NETDEV_MAX_BURST) {
        p->full_batch = true;
    }
    if (p->sampling) {
        p->iter_monitor += tpm_rdtsc() - t0;
    }
}

void
tpm_ovs_rx(struct tpm_pmd *p, const struct dp_packet_batch *batch,
           uint32_t port_no, long long int now_us)
{
    size_t n = dp_packet_batch_size(batch);

    if (!p) {
        uint64_t orig;
        atomic_add_relaxed(&tpm_ovs_non_pmd_skipped, n, &orig);
        return;
    }
    uint32_t watch;
    atomic_read_relaxed(&tpm_ovs_n_watch, &watch);
    if (!watch) {
        p->full_batch |= n == NETDEV_MAX_BURST;
        return;
    }
    rx__(p, batch, n, port_no, now_us);
}

/* tpm_ovs_pmd_iteration() with at least one event installed. */
static void __attribute__((noinline))
iteration__(struct tpm_pmd *p, uint64_t rx_packets, long long int now_us)
{
    uint64_t t0 = p->sampling ? tpm_rdtsc() : 0;
    /* OVS read its clock for the last batch, or after an empty poll. */
    uint64_t now = tpm_ovs_pmd_now_ns(now_us);
    if (!rx_packets) {
        tpm_advance(p->tpm, now);
    }

    /* Queue-adaptive (paper algorithm 2, tpm/sweep-sched.h): a step when
     * every queue came back short; when the PMD is saturated, still one
     * bounded step every 'sweep_every' iterations, or once the last step
     * is 'sweep_gap_ns' old, so each sweep completes within its epoch. */
    uint32_t every;
    uint64_t gap;
    atomic_read_relaxed(&live_sweep_every, &every);
    atomic_read_relaxed(&live_sweep_gap_ns, &gap);
    bool drained = !p->full_batch;
    p->full_batch = false;
    if (tpm_sched_due(&p->sched, drained, now, every, gap)) {
        uint64_t fixed, budget, orig;
        uint32_t catchup, pace;
        atomic_read_relaxed(&live_sweep_budget_ns, &fixed);
        atomic_read_relaxed(&live_sweep_catchup, &catchup);
        atomic_read_relaxed(&live_sweep_pace, &pace);
        switch (tpm_sched_step(&p->sched, drained, now,
                               tpm_get_params(p->tpm)->epoch_ns, fixed,
                               catchup, pace, tpm_sweep_pending(p->tpm),
                               tpm_sweep_lateness, p->tpm, &budget)) {
        case TPM_SCHED_NO_SWEEP:
            break;
        case TPM_SCHED_IDLE:
            atomic_add_relaxed(&p->steps_idle, 1, &orig);
            break;
        case TPM_SCHED_CATCHUP:     /* A forced step too. */
            atomic_add_relaxed(&p->steps_catchup, 1, &orig);
            atomic_add_relaxed(&p->steps_forced, 1, &orig);
            break;
        case TPM_SCHED_FORCED:
            atomic_add_relaxed(&p->steps_forced, 1, &orig);
            break;
        }
        uint32_t dos;
        atomic_read_relaxed(&tpm_ovs_live_dos_threshold, &dos);
        if (dos != tpm_get_params(p->tpm)->dos_threshold) {
            tpm_set_dos_threshold(p->tpm, dos);
        }
        tpm_sweep_step(p->tpm, budget);
        /* The sweep waits for room in the report ring rather than drop a
         * report (tpm-report-ring): the main thread, which drains it once
         * an epoch, is woken once it is half full. */
        double fill = tpm_report_fill(p->tpm);
        if (fill >= 0.5 && !p->report_woken) {
            p->report_woken = true;
            seq_change(tpm_ovs_report_seq);
        } else if (fill < 0.25) {
            p->report_woken = false;
        }
        if (tpm_run_control(p->tpm, 16)) {
            seq_change(tpm_ovs_reply_seq);  /* Replies for the main thread. */
        }
    }
    atomic_store_relaxed(&p->last_iteration_ns, now);

    if (p->sampling) {
        uint64_t t1 = tpm_rdtsc();
        if (rx_packets && p->iter_tsc) {
            uint64_t orig;
            atomic_add_relaxed(&p->busy_cycles, t1 - p->iter_tsc, &orig);
            atomic_add_relaxed(&p->busy_monitor,
                               p->iter_monitor + (t1 - t0), &orig);
            atomic_add_relaxed(&p->busy_rx, p->iter_monitor, &orig);
            atomic_add_relaxed(&p->busy_packets, rx_packets, &orig);
            uint64_t cycles = t1 - p->iter_tsc;
            uint64_t monitor = p->iter_monitor + (t1 - t0);
            if (!drained && p->iter_bytes && cycles > monitor) {
                int b = tpm_dos_size_bucket(p->iter_bytes / rx_packets);
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

void
tpm_ovs_pmd_iteration(struct tpm_pmd *p, uint64_t rx_packets,
                      long long int now_us)
{
    if (!p) {
        return;
    }
    uint32_t watch;
    atomic_read_relaxed(&tpm_ovs_n_watch, &watch);
    if (watch) {
        iteration__(p, rx_packets, now_us);
        return;
    }
    /* No event: only commands (the first add) need this PMD. */
    p->full_batch = false;
    p->sampling = false;
    if (tpm_run_control(p->tpm, 16)) {
        seq_change(tpm_ovs_reply_seq);  /* Replies for the main thread. */
    }
    if (!(++p->unwatched_iterations & 1023)) {
        /* Alive, for tpm_ovs_pmd_parked(): a clock read every 1024
         * loops. */
        atomic_store_relaxed(&p->last_iteration_ns,
                             tpm_ovs_pmd_now_ns(now_us));
    }
}


static uint64_t
thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* Accounts a tpm_ovs_run() call that began at 't0' (tpm_clock_mono_ns())
 * and 'cpu0' (thread_cpu_ns()). */
static void
main_time_account(uint64_t t0, uint64_t cpu0)
{
    struct tpm_ovs_main_time *m = &tpm_ovs_main_time;
    uint64_t d = tpm_clock_mono_ns() - t0;
    m->calls++;
    m->total_ns += d;
    m->max_ns = MAX(m->max_ns, d);
    m->cpu_max_ns = MAX(m->cpu_max_ns, thread_cpu_ns() - cpu0);
}

/* Main thread, about once a second: a warning naming every counter of
 * lost data (tpm_losses) that rose on one of the 'n' PMDs 'parts' (their
 * counters 'stats') since the last one (the counters themselves are in
 * tpm/stats). */
static void
losses_check(struct tpm_pmd **parts, const struct tpm_stats *stats,
             size_t n)
{
    static struct vlog_rate_limit rl = VLOG_RATE_LIMIT_INIT(1, 10);

    for (size_t i = 0; i < n; i++) {
        struct tpm_pmd *p = parts[i];
        const struct tpm_stats *st = &stats[i];
        struct ds s = DS_EMPTY_INITIALIZER;
        for (size_t j = 0; j < TPM_N_LOSSES; j++) {
            uint64_t v = tpm_loss_get(st, &tpm_losses[j]);
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
                p->losses_logged[j] = tpm_loss_get(st, &tpm_losses[j]);
            }
        }
        ds_destroy(&s);
    }
}

void
tpm_ovs_run(void)
{
    static uint64_t checked_ns;
    uint64_t t0 = tpm_clock_mono_ns(), cpu0 = thread_cpu_ns();
    size_t n;
    struct tpm_pmd **parts = tpm_ovs_pmds_snapshot(&n);
    if (t0 - checked_ns >= SECOND_CHECK_NS) {
        checked_ns = t0;
        /* Each PMD's counters read once for both. */
        struct tpm_stats *st = xcalloc(MAX(n, 1), sizeof *st);
        for (size_t i = 0; i < n; i++) {
            tpm_get_stats(parts[i]->tpm, &st[i]);
        }
        tpm_ovs_clock_check();
        losses_check(parts, st, n);
        tpm_ovs_agent_counters(st, n);
        free(st);
    }
    tpm_ovs_ops_begin();
    tpm_ovs_event_drain(parts, n);
    tpm_ovs_event_reshare(parts, n);
    tpm_ovs_agent_check_pmds(parts, n);
    tpm_ovs_agent_run(parts, n);
    tpm_ovs_ops_run(parts, n);
    free(parts);
    main_time_account(t0, cpu0);
}

void
tpm_ovs_wait(void)
{
    if (!ovs_list_is_empty(&tpm_ovs_host_events)) {
        /* Pick up satisfactions at least once per epoch. */
        poll_timer_wait(MAX(1, tpm_ovs_knobs.params.epoch_ns / 1000000));
        tpm_ovs_event_wait();
    }
    tpm_ovs_agent_wait();
    tpm_ovs_ops_wait();
}

static void
knobs_default(struct tpm_knobs *k)
{
    tpm_params_init(&k->params);
    /* A full report ring pauses the sweep until the main thread drained
     * it, rather than drop reports. */
    k->params.sweep_waits_for_reports = true;
    k->sweep_every = 64;
    k->sweep_catchup = 50;
    k->sweep_pace = 50;
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
        knobs_default(&tpm_ovs_knobs);
        knobs_set = true;
        tpm_ovs_event_init(tpm_ovs_knobs.report_log);
    }
    k = tpm_ovs_knobs;
    uint64_t epoch = k.params.epoch_ns, budget = k.params.sweep_budget_ns;
    ok &= tpm_ovs_knob_time(cfg, "tpm-epoch", 0, UINT64_MAX, &epoch);
    ok &= tpm_ovs_knob_time(cfg, "tpm-sweep-budget", 0, UINT64_MAX, &budget);
    ok &= tpm_ovs_knob_uint(cfg, "tpm-flow-table-size", 64, 1u << 28,
                            &k.params.flow_table_size);
    ok &= tpm_ovs_knob_uint(cfg, "tpm-max-events", 1, 1u << 20,
                            &k.params.max_events);
    ok &= tpm_ovs_knob_uint(cfg, "tpm-max-triggers", 1, 1u << 26,
                            &k.params.max_triggers);
    ok &= tpm_ovs_knob_uint(cfg, "tpm-max-event-instances", 1, 1u << 26,
                            &k.params.max_children);
    ok &= tpm_ovs_knob_uint(cfg, "tpm-max-chunks", 1, 1u << 26,
                            &k.params.max_chunks);
    ok &= tpm_ovs_knob_uint(cfg, "tpm-report-ring", 64, 1u << 24,
                            &k.params.ring_size);
    uint32_t dos = dos_knob_value;
    ok &= tpm_ovs_knob_uint(cfg, "tpm-dos-threshold", 0, UINT32_MAX, &dos);
    ok &= tpm_ovs_knob_uint(cfg, "tpm-dos-table-size", 64, 1u << 28,
                            &k.params.dos_table_size);
    ok &= tpm_ovs_knob_uint(cfg, "tpm-dos-window", 1, 1u << 30,
                            &k.params.dos_window);
    ok &= tpm_ovs_knob_bool(cfg, "tpm-dos-clear", &k.params.dos_clear_on_pass);
    ok &= tpm_ovs_knob_uint(cfg, "tpm-history", 1, 1024,
                            &k.params.history_len);
    ok &= tpm_ovs_knob_uint(cfg, "tpm-retire-epochs", 1, 1u << 20,
                            &k.params.retire_epochs);
    ok &= tpm_ovs_knob_uint(cfg, "tpm-tcp-state-pool", 0, 1u << 24,
                            &k.params.tcp_state_pool);
    ok &= tpm_ovs_knob_uint(cfg, "tpm-tenant-slots", 1, TPM_TENANT_SLOTS_MAX,
                            &k.params.tenant_slots);
    uint64_t burst_gap = k.params.burst_gap_ns;
    ok &= tpm_ovs_knob_time(cfg, "tpm-burst-gap", 0, UINT64_MAX, &burst_gap);
    ok &= tpm_ovs_knob_uint(cfg, "tpm-sweep-every", 1, 1u << 20,
                            &k.sweep_every);
    ok &= tpm_ovs_knob_uint(cfg, "tpm-sweep-catchup", 0, 90, &k.sweep_catchup);
    ok &= tpm_ovs_knob_uint(cfg, "tpm-sweep-pace", 10, 100, &k.sweep_pace);
    uint64_t sweep_gap = k.sweep_gap_ns;
    ok &= tpm_ovs_knob_time(cfg, "tpm-sweep-gap", 1000, 1000ULL * 1000 * 1000,
                            &sweep_gap);
    ok &= tpm_ovs_knob_uint(cfg, "tpm-report-log", 0, 1u << 20, &k.report_log);
    uint64_t ct = k.command_timeout_ns, pt = k.poll_timeout_ns;
    ok &= tpm_ovs_knob_time(cfg, "tpm-command-timeout", 0, UINT64_MAX, &ct);
    ok &= tpm_ovs_knob_time(cfg, "tpm-poll-timeout", 0, UINT64_MAX, &pt);
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
    LIST_FOR_EACH (he, node, &tpm_ovs_host_events) {
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
    k.params.dos_threshold = tpm_ovs_knobs.params.dos_threshold;
    if (memcmp(&k.params, &tpm_ovs_knobs.params, sizeof k.params)) {
        size_t n;
        struct tpm_pmd **parts = tpm_ovs_pmds_snapshot(&n);
        free(parts);
        if (n) {
            VLOG_INFO("tpm monitor knobs changed; they apply to PMD threads "
                      "created from now on (running ones keep theirs)");
        }
    }
    tpm_ovs_event_report_log_resize(k.report_log);
    tpm_ovs_knobs = k;
    if (dos_changed) {
        dos_knob_seen = true;
        dos_knob_value = dos;
        tpm_ovs_dos_threshold_set(dos, "other_config:tpm-dos-threshold");
    }
    atomic_store_relaxed(&live_sweep_budget_ns, k.params.sweep_budget_ns);
    atomic_store_relaxed(&live_sweep_every, k.sweep_every);
    atomic_store_relaxed(&live_sweep_catchup, k.sweep_catchup);
    atomic_store_relaxed(&live_sweep_pace, k.sweep_pace);
    atomic_store_relaxed(&live_sweep_gap_ns, k.sweep_gap_ns);
}


void
tpm_ovs_set_config(const struct smap *cfg)
{
    monitor_set_config(cfg);
    tpm_ovs_agent_set_config(cfg);
}

void
tpm_ovs_init(void)
{
    static struct ovsthread_once once = OVSTHREAD_ONCE_INITIALIZER;
    if (!ovsthread_once_start(&once)) {
        return;
    }
    tpm_ovs_clock_check();
    tpm_ovs_reply_seq = seq_create();
    if (!knobs_set) {
        knobs_default(&tpm_ovs_knobs);
        knobs_set = true;
        tpm_ovs_event_init(tpm_ovs_knobs.report_log);
    }
    tpm_ovs_agent_init();
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
    unixctl_command_register("tpm/ports", "", 0, 0,
                             tpm_unixctl_ports, NULL);
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
