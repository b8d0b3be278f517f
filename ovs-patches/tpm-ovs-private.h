/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The glue between Open vSwitch and libtpm, inside: what its files share.
 * They read in one direction, from the top down: each calls only the
 * files below it (or beside it, for tpm-ovs-dos.c and
 * tpm-ovs-agent.c, which do not call each other).
 *
 *   tpm-ovs.c          the PMD hooks (tpm-ovs.h) and the queue-adaptive
 *                      scheduling of sweep steps (tpm/sweep-sched.h
 *                      decides), the main loop's hooks, the monitor's
 *                      knobs read from other_config, the tpm/ commands
 *                      registered
 *   tpm-ovs-stats.c    tpm/stats and tpm/flows
 *   tpm-ovs-dos.c      the DoS threshold, profile and model commands
 *   tpm-ovs-agent.c    the TEM agent glue, one agent per TEM
 *                      (tpm/controller-show)
 *   tpm-ovs-event.c    host events, their satisfactions and the local TEM
 *                      (tpm/event-*, tpm/reports)
 *   tpm-ovs-request.c  requests to the PMDs and the operations made of
 *                      them (below): the main thread never waits
 *   tpm-ovs-ports.c    the datapath's ports as the monitor sees them
 *                      (tunnel UDP ports, each port's tenant), published
 *                      to the PMDs by RCU (tpm/ports)
 *   tpm-ovs-base.c     the PMD registry, the monitor's clock, the knobs'
 *                      values and readers, the settings the PMDs read
 *                      live, the hooks' counters
 *
 * Everything here runs in ovs-vswitchd's main thread, except what
 * struct tpm_pmd marks as the PMD's, what tpm-ovs.c's PMD hooks do and
 * the registry (tpm_ovs_pmds_add(), tpm_ovs_pmds_remove(): any thread).
 */
#ifndef TPM_OVS_PRIVATE_H
#define TPM_OVS_PRIVATE_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "openvswitch/dynamic-string.h"
#include "openvswitch/hmap.h"
#include "openvswitch/list.h"
#include "ovs-atomic.h"
#include "util.h"

/* libtpm. */
#include "agent.h"
#include "dos-model.h"
#include "event.h"
#include "decision.h"
#include "sweep-sched.h"
#include "tenants.h"
#include "tpm.h"

struct smap;
struct tem_link;
struct unixctl_conn;

/* Knobs (ovsdb Open_vSwitch other_config), with their current values. */
struct tpm_knobs {
    struct tpm_params params;
    uint32_t sweep_every;       /* Forced sweep step every N busy
                                 * iterations... */
    uint64_t sweep_gap_ns;      /* ...or when the last step is this old. */
    uint32_t sweep_catchup;     /* % of a saturated PMD a late sweep may
                                 * take in forced steps. */
    uint32_t sweep_pace;        /* % of the epoch by which a saturated
                                 * PMD's sweep aims to be done. */
    uint64_t command_timeout_ns;
    uint64_t poll_timeout_ns;
    uint32_t report_log;        /* Host satisfactions kept. */
};

/* The datapath's ports, as published to the PMDs (tpm-ovs-ports.c): an
 * immutable snapshot, valid until the reading thread quiesces. */
struct tpm_ovs_port_snap {
    uint32_t port_no;           /* odp_port_t. */
    uint16_t name_slot;         /* The monitor's number for the port's
                                 * name (tpm_set_rx_port()), 0 if none. */
    bool has_tun;               /* other_config:tpm-tun-id given: */
    uint32_t tun_id;            /* the VNI of the port's frames. */
};
struct tpm_ovs_ports {
    uint64_t gen;               /* Changes with every snapshot. */
    struct tpm_tunnel_ports tunnels;    /* The UDP ports decapsulated. */
    size_t n;
    struct tpm_ovs_port_snap port[];    /* By increasing 'port_no'. */
};

/* One PMD thread's monitor. */
struct tpm_pmd {
    struct ovs_list node;       /* In the registry (tpm-ovs-base.c). */
    unsigned core_id;
    uint64_t serial;            /* Unique for the process' life. */
    struct tpm *tpm;

    /* PMD thread only. */
    bool full_batch;            /* A full rx batch in this iteration. */
    struct tpm_sched sched;     /* Sweep steps (tpm/sweep-sched.h). */
    uint32_t unwatched_iterations;  /* While no event is installed. */
    uint64_t now;               /* Clock read for the latest rx batch. */
    uint64_t ports_gen;         /* Snapshot of the ports last applied. */
    uint32_t rx_port;           /* Port of the previous rx batch. */
    bool report_woken;          /* 'tpm_ovs_report_seq' changed since the
                                 * report ring was last below a quarter
                                 * full. */
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
    atomic_uint64_t busy_rx;        /* ... of which in the packets' own
                                     * work (tpm_ovs_rx(): phase 1), the
                                     * rest in the sweep's steps and
                                     * commands, */
    atomic_uint64_t busy_packets;   /* ... and packets. */
    /* Sampled saturated iterations (a full rx batch), by their mean frame
     * size (tpm_dos_size_bucket()): the switch's cycles (the monitor's
     * taken out), packets and bytes, for the DoS model's switch term
     * (tpm_dos_switch_fit()). */
    struct {
        atomic_uint64_t cycles;
        atomic_uint64_t packets;
        atomic_uint64_t bytes;
    } sat[TPM_DOS_SIZE_BUCKETS];

    /* Main thread only: the loss counters (tpm_losses) last logged. */
    uint64_t losses_logged[TPM_N_LOSSES];
};

#define CYCLE_SAMPLE_EVERY 16

/* A PMD that has not run an iteration for this long is "parked": OVS
 * blocks PMD threads that have no rx queue (pmd_thread_main() waits for a
 * reload), and a PMD may also be descheduled.  Commands still go to its
 * ring, which it drains when it runs again (before it can see a packet of
 * a new rx queue, at most one batch later); the main thread does not wait
 * for its answer. */
#define TPM_PMD_PARKED_NS (50ULL * 1000 * 1000)

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
    uint16_t last_port;

    /* Installed by the TEM. */
    bool tem;
    uint32_t tem_id;            /* The TEM's id for it (a cluster's ids
                                 * are the cluster's: one id, one event,
                                 * whichever TEM installs it). */
    struct tem_link *tem_link;  /* The agent whose TEM owns it: the one
                                 * that installed it last
                                 * (tpm-ovs-agent.c). */
    bool has_share;             /* Threshold replaced by the TEM. */
    double share;
    uint64_t n_sent;            /* Satisfactions handed to the agent. */
    uint64_t n_send_dropped;    /* ... that it refused (queue full, no
                                 * session). */
};

/* Requests to the PMDs.
 *
 * The main thread talks to a PMD only through its command ring, and it
 * never waits for one.  Each command (add, delete, info, poll) is a
 * request to one PMD, and each operation a set of requests with a
 * deadline and a function that finishes it: an event added on every PMD
 * or deleted from every PMD, an event shown (tpm/event-show asks every
 * PMD), a poll of the TEM.  A queued request waits for its reply in
 * 'reqs', under its cookie.  tpm_ovs_run() matches the replies it drains
 * to their requests, queues the requests that are due and finishes every
 * operation whose requests are all answered or whose deadline passed.
 * Finishing answers whoever asked: the unixctl reply (deferred: sent long
 * after the command's handler returned), the TEM's ack, nack or poll
 * reply.
 *
 * A PMD that executed commands changes 'reply_seq', which wakes the main
 * thread.  A PMD that stopped iterating (pmd_parked()) is not waited for;
 * its requests stay queued and run when it runs again.
 *
 * Order: a PMD executes its commands in the order they were queued, and
 * requests are queued in the order of their operations (a request that
 * finds a command ring full holds back the later operations' requests to
 * the same PMD), so on every PMD an event is deleted after it was added,
 * and added again after that.
 *
 * The local TEM's polls are not requests: they are matched to their
 * decision by event, epoch and group (decision_finish()). */
enum req_state {
    REQ_SUBMIT,                 /* To be queued. */
    REQ_WAITING,                /* Queued, in 'reqs' under 'cookie'. */
    REQ_DONE,                   /* Answered: 'r'. */
    REQ_GONE,                   /* Its PMD left, or is parked ('parked'). */
};

struct op;

struct pmd_req {
    struct hmap_node node;      /* In 'reqs' by 'cookie', while WAITING. */
    struct op *op;
    uint64_t pmd_serial;
    unsigned core_id;
    uint64_t cookie;
    enum req_state state;
    bool parked;                /* GONE because its PMD is parked. */
    bool not_yet;               /* A poll answered "not swept yet" last. */
    enum tpm_report_type type;  /* Of its reply: says what to queue. */
    uint32_t event_id;
    struct tpm_event *event;    /* An add: the definition, until queued. */
    uint64_t epoch;             /* A poll: epoch and group... */
    struct tpm_key group;
    uint16_t port;              /* ...and its port (group=in_port). */
    struct tpm_report r;        /* DONE: the reply ('r.error' owned). */
};

/* Who waits for an operation: a unixctl command, a TEM, or nobody.
 * A TEM is answered through 'reply', which tpm-ovs-agent.c sets, on its
 * agent 'tem_link' (tpm-ovs-request.c and tpm-ovs-event.c know nothing
 * of the agents). */
struct op_client {
    struct unixctl_conn *conn;
    /* Answers the TEM's command (ack, or nack with 'error'), or NULL: */
    void (*reply)(const struct op_client *, const char *error);
    struct tem_link *tem_link;          /* ...the agent it came from, */
    enum tpm_agent_cmd_type tem_type;   /* ...the command's. */
    uint64_t tem_cookie;
    uint32_t tem_event_id;
};

struct op {
    struct ovs_list node;       /* In 'ops', oldest first. */
    /* Answers 'client' from the requests, then frees the operation (with
     * op_destroy()).  'parts' are the PMDs now. */
    void (*finish)(struct op *, struct tpm_pmd **parts, size_t n);
    struct op_client client;
    uint64_t deadline_ns;
    bool repoll;                /* Ask a poll again after "not yet". */
    size_t n_reqs;
    struct pmd_req *reqs;
};

/* The handlers of the tpm/ commands, registered by tpm_ovs_init(). */
#define TPM_OVS_UNIXCTL(NAME) \
    void NAME(struct unixctl_conn *, int argc, const char *argv[], void *aux)

/* tpm-ovs-base.c */
extern struct tpm_knobs tpm_ovs_knobs;
extern uint64_t tpm_ovs_snapshot_gen;
extern atomic_uint32_t tpm_ovs_n_watch;
extern atomic_uint32_t tpm_ovs_live_dos_threshold;
extern atomic_uint64_t tpm_ovs_mono_to_wall_ns;
extern atomic_uint64_t tpm_ovs_non_pmd_skipped;

/* The main thread's time in tpm_ovs_run() (tpm/stats): wall clock, and
 * on the CPU (the difference is time the thread was preempted). */
struct tpm_ovs_main_time {
    uint64_t calls, total_ns, max_ns, cpu_max_ns;
};
extern struct tpm_ovs_main_time tpm_ovs_main_time;

/* The tenant slots every PMD's monitor shares (tpm/tenants.h), made with
 * the tpm-tenant-slots of the first PMD's creation; and the VNI of a
 * group key's tenant (0 if the key has none). */
struct tpm_tenants *tpm_ovs_tenants_get(void);
uint32_t tpm_ovs_group_vni(const struct tpm_key *group);

uint64_t tpm_ovs_now_ns(void);
void tpm_ovs_clock_check(void);
void tpm_ovs_clock_format(struct ds *);
bool tpm_ovs_pmd_parked(const struct tpm_pmd *, uint64_t now);
struct tpm_pmd **tpm_ovs_pmds_snapshot(size_t *n);
void tpm_ovs_pmds_add(struct tpm_pmd *);
void tpm_ovs_pmds_remove(struct tpm_pmd *);
uint64_t tpm_ovs_pmds_gen(void);
void tpm_ovs_watch(size_t n_events);
bool tpm_ovs_knob_time(const struct smap *, const char *key, uint64_t min,
                       uint64_t max, uint64_t *ns);
bool tpm_ovs_knob_uint(const struct smap *, const char *key, uint64_t min,
                       uint64_t max, uint32_t *value);
bool tpm_ovs_knob_bool(const struct smap *, const char *key,
                       uint32_t *value);
void tpm_ovs_dos_threshold_set(uint32_t bytes, const char *by);
uint32_t tpm_ovs_dos_threshold(const char **by);

/* The monitor's time of OVS's monotonic microseconds 'now_us' (the PMD
 * hooks: no clock read). */
static inline uint64_t
tpm_ovs_pmd_now_ns(long long int now_us)
{
    uint64_t off;
    atomic_read_relaxed(&tpm_ovs_mono_to_wall_ns, &off);
    return (uint64_t) now_us * 1000 + off;
}

/* tpm-ovs-ports.c */
const struct tpm_ovs_ports *tpm_ovs_ports_get(void);
uint16_t tpm_ovs_port_name_ref(const char *name);
void tpm_ovs_port_name_unref(uint16_t slot);
const char *tpm_ovs_port_name(uint16_t slot, uint32_t *port_nop);
const struct tpm_ovs_port_snap *tpm_ovs_ports_find(
    const struct tpm_ovs_ports *, uint32_t port_no);
void tpm_unixctl_ports(struct unixctl_conn *, int argc, const char *argv[],
                       void *aux);

/* tpm-ovs-request.c */
extern struct seq *tpm_ovs_reply_seq;
uint64_t tpm_ovs_cookie(void);
void tpm_ovs_op_init(struct op *, void (*finish)(struct op *,
                                                 struct tpm_pmd **, size_t),
                     const struct op_client *, size_t n_reqs,
                     uint64_t timeout_ns);
struct pmd_req *tpm_ovs_op_req(struct op *, size_t i, const struct tpm_pmd *,
                               enum tpm_report_type, uint32_t event_id);
void tpm_ovs_op_start(struct op *);
void tpm_ovs_op_destroy(struct op *);
void tpm_ovs_op_answer(const struct op_client *, const char *error,
                       const char *text);
bool tpm_ovs_req_reply(const struct tpm_report *);
void tpm_ovs_ops_begin(void);
void tpm_ovs_ops_run(struct tpm_pmd **, size_t n);
void tpm_ovs_ops_wait(void);
void tpm_ovs_ops_forget_tem(const struct tem_link *);
void tpm_ovs_ops_count(size_t *n_ops, size_t *n_reqs);

/* tpm-ovs-event.c */
extern struct ovs_list tpm_ovs_host_events;
void tpm_ovs_event_init(size_t report_log);
void tpm_ovs_event_report_log_resize(size_t);
char *tpm_ovs_event_install(struct tpm *, const struct host_event *,
                            double threshold);
char *tpm_ovs_event_check(const struct tpm_event *);
struct host_event *tpm_ovs_host_event_create(const char *name,
                                             struct tpm_event *);
struct host_event *tpm_ovs_host_event_find(const char *name);
void tpm_ovs_host_event_free(struct host_event *);
void tpm_ovs_host_event_add(struct host_event *, struct tpm_pmd **,
                            size_t n, const struct op_client *);
void tpm_ovs_host_event_remove(struct host_event *, struct tpm_pmd **,
                               size_t n, const struct op_client *);
void tpm_ovs_event_del_start(const uint32_t *ids, size_t n_ids,
                             struct tpm_pmd **, size_t n,
                             const struct op_client *);
void tpm_ovs_event_drain(struct tpm_pmd **, size_t n);
extern struct seq *tpm_ovs_report_seq;
void tpm_ovs_event_wait(void);
void tpm_ovs_event_reshare(struct tpm_pmd **, size_t n);
void tpm_ovs_event_format_summary(struct ds *);

/* Where the host-level satisfactions of TEM events go (the agent sets it,
 * with 'aux'); none until set. */
typedef void tpm_ovs_tem_sink(void *aux, struct host_event *,
                              uint64_t epoch, const struct tpm_key *group,
                              double value, uint32_t flags, int n_pmds,
                              int n_missing);
void tpm_ovs_event_set_tem_sink(tpm_ovs_tem_sink *, void *aux);
TPM_OVS_UNIXCTL(tpm_unixctl_event_add);
TPM_OVS_UNIXCTL(tpm_unixctl_event_del);
TPM_OVS_UNIXCTL(tpm_unixctl_event_list);
TPM_OVS_UNIXCTL(tpm_unixctl_event_show);
TPM_OVS_UNIXCTL(tpm_unixctl_reports);

/* tpm-ovs-agent.c */
void tpm_ovs_agent_init(void);
void tpm_ovs_agent_set_config(const struct smap *);
void tpm_ovs_agent_check_pmds(struct tpm_pmd **, size_t n);
void tpm_ovs_agent_run(struct tpm_pmd **, size_t n);
void tpm_ovs_agent_wait(void);
void tpm_ovs_agent_counters(const struct tpm_stats *, size_t n);
void tpm_ovs_agent_format_summary(struct ds *);
TPM_OVS_UNIXCTL(tpm_unixctl_controller_show);

/* tpm-ovs-dos.c */
bool tpm_ovs_pmd_cycles_per_packet(struct tpm_pmd *, double *sw,
                                   double *mon, double *rx);
TPM_OVS_UNIXCTL(tpm_unixctl_dos_threshold);
TPM_OVS_UNIXCTL(tpm_unixctl_dos_profile);
TPM_OVS_UNIXCTL(tpm_unixctl_dos_model);

/* tpm-ovs-stats.c */
TPM_OVS_UNIXCTL(tpm_unixctl_stats);
TPM_OVS_UNIXCTL(tpm_unixctl_flows);

#endif /* tpm-ovs-private.h */
