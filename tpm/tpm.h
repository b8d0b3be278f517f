/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libtpm: the Trumpet packet monitor, with no OVS or DPDK dependency.
 *
 * A 'struct tpm' watches the packets of one thread (an OVS PMD thread, or
 * a replay loop) and reports when an event's predicate holds.  It follows
 * the paper's two phases (section 5):
 *
 *   Phase 1, match and scatter (tpm_process_batch(), every packet): parse
 *   the frame once, find its 5-tuple entry in the flow table (one hash,
 *   linear probing, huge pages, batch prefetch, last-flow cache); on a new
 *   flow, match it against the events' filters by tuple space search and
 *   record which summaries the flow must keep; update only those, in the
 *   epoch's half of the double buffer.
 *
 *   Phase 2, gather, test and report (tpm_sweep_step(), when the caller is
 *   idle): during epoch i, walk the trigger repository (one trigger
 *   instance per event and group key, stored contiguously), add the
 *   epoch-(i-1) statistics of each instance's flows, and at the end of the
 *   event's interval evaluate the predicate, keep the value in a short
 *   history, and queue a report when it holds.  Steps are bounded by a
 *   time budget; the sweep keeps a cursor and a running estimate of its
 *   cost per flow so it reads the clock only now and then.
 *
 * Events are parsed with lib/event.h.  An event whose granularity is
 * coarser than the 5-tuple gets one trigger instance (a "child", paper
 * section 5.5) per group key, created when the first flow of that group
 * matches; a 5-tuple event gets one per flow.
 *
 * Thread-safety
 * =============
 *
 * A 'struct tpm' is owned by one thread, which alone calls
 * tpm_process_batch(), tpm_advance(), tpm_sweep_step(), tpm_run_control()
 * and the direct control functions (tpm_event_add(), ...).  One other
 * thread, the controller, may talk to it concurrently through two
 * lock-free single-producer/single-consumer rings: it submits commands
 * with tpm_submit_*() and receives reports, acknowledgements and poll
 * replies with tpm_pop_report().  The owner drains commands in
 * tpm_run_control() (call it from the idle slot).  tpm_get_stats() may be
 * called from any thread: counters have a single writer and are read with
 * relaxed atomic loads.
 */
#ifndef TPM_TPM_H
#define TPM_TPM_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "event.h"
#include "packet.h"

/* Creation parameters.  tpm_params_init() sets the defaults noted here;
 * every one is a knob (docs/operations.md). */
struct tpm_params {
    uint64_t epoch_ns;          /* Epoch length (10 ms). */
    uint32_t flow_table_size;   /* Flow entries, power of two (65536). */
    uint32_t flow_probe_limit;  /* Linear-probing window (32). */
    uint32_t max_events;        /* Installed events (8192). */
    uint32_t max_triggers;      /* Trigger instances in all (131072). */
    uint32_t max_children;      /* Instances per event (16384). */
    uint32_t max_chunks;        /* 64-flow list chunks (16384). */
    uint32_t max_matches;       /* Events one flow may feed (64, the
                                 * maximum). */
    uint32_t history_len;       /* Values kept per instance, K (8). */
    uint32_t dos_threshold;     /* Bytes before a flow is matched (0:
                                 * off). */
    uint32_t dos_table_size;    /* Filter-table counters, power of two
                                 * (65536). */
    uint32_t dos_window;        /* Epochs after which the filter table's
                                 * counts restart (10). */
    uint32_t dos_clear_on_pass; /* 1: a flow that passes the threshold
                                 * takes its counter's bytes with it (the
                                 * counter restarts at 0), so its bytes do
                                 * not carry the flows hashed to the same
                                 * counter past the threshold (1). */
    uint32_t dos_precheck;      /* 1: a flow below the threshold that no
                                 * trigger can match (the trigger index's
                                 * coarse pre-check) is not counted in the
                                 * filter table, so it can never pass
                                 * (1). */
    uint32_t idle_epochs;       /* Idle epochs before a flow entry is
                                 * freed (500). */
    uint32_t retire_epochs;     /* Epochs without a packet after which
                                 * the sweep drops a flow from its trigger
                                 * instances; it is matched again if it
                                 * sends again (16).  Matching costs
                                 * microseconds and keeping an idle item
                                 * tens of nanoseconds per sweep: a flow
                                 * that sends every few epochs must not be
                                 * matched again each time (under a load
                                 * that slows the switch, every flow would
                                 * be, and the switch would slow down
                                 * further). */
    uint64_t sweep_budget_ns;   /* Time bound of one sweep step (10 us;
                                 * 0: unbounded). */
    uint32_t scrub_per_step;    /* Flow slots scrubbed per sweep, and
                                 * backfilled per step (256). */
    uint32_t ring_size;         /* Command and report ring entries
                                 * (4096). */
    bool sweep_waits_for_reports; /* A sweep step stops, to be resumed by
                                 * the next, when the report ring has no
                                 * room for an instance's reports, rather
                                 * than drop them (false: a switch's
                                 * sweep keeps its pace and counts the
                                 * drops; an offline reader that drains
                                 * between steps sets it, and loses
                                 * nothing). */
    uint32_t tcp_state_pool;    /* Connections whose per-flow state
                                 * (rwnd is_lost is_burst rtt seq ack dup)
                                 * the monitor can keep at once, both
                                 * directions in one 128-byte entry
                                 * (16384; 0: events that need it are
                                 * refused). */
    uint64_t burst_gap_ns;      /* is_burst: largest gap to the flow's
                                 * previous packet (20 us). */
    uint32_t tenant_slots;      /* Tunnel ids (tenants) the monitor tells
                                 * apart in its life (4096, at most
                                 * 65535; tpm/tenants.h). */
};

void tpm_params_init(struct tpm_params *);

/* Checks 'params'.  Returns NULL or a malloc()'d message naming the bad
 * parameter, its value and the accepted range. */
char *tpm_params_check(const struct tpm_params *)
    __attribute__((warn_unused_result));

/* Returns the bytes tpm_create() allocates for the tables of 'params' (the
 * flow table, the trigger repository with its history and instance map,
 * the flow-list chunks, the connection pool, the event slots, the filter
 * table and the rings), huge-page regions rounded up to whole pages: what
 * a front end that sizes the tables itself weighs against its memory
 * limit. */
uint64_t tpm_params_memory(const struct tpm_params *);

/* Creates a monitor.  Returns NULL and stores an error message in '*errp'
 * (caller frees) on failure. */
struct tpm *tpm_create(const struct tpm_params *, char **errp);
void tpm_destroy(struct tpm *);

const struct tpm_params *tpm_get_params(const struct tpm *);

/* Owner thread: sets the DoS threshold (bytes a flow must send before it is
 * matched; 0: off) from now on.  Flows already matched stay matched; flows
 * below a lowered threshold are matched at their next packet. */
void tpm_set_dos_threshold(struct tpm *, uint32_t bytes);

/* A received frame. */
struct tpm_frame {
    const void *data;
    uint32_t caplen;            /* Bytes available at 'data'. */
    uint32_t wirelen;           /* Length on the wire. */
};

#define TPM_BATCH_MAX 32

/* Phase 1 for up to TPM_BATCH_MAX frames, all of the current epoch (call
 * tpm_advance() first).  With no event installed it only counts packets
 * and bytes: a switch with the monitor idle pays (almost) nothing. */
void tpm_process_batch(struct tpm *, const struct tpm_frame *frames,
                       int n);

/* Tunnels (lib/packet.h, "Tunnels").  Frames to one of 'ports' (UDP
 * destination ports, VXLAN or Geneve) are counted under their inner flow
 * and their VNI (the tenant); an empty set (the default) decapsulates
 * nothing.  The monitor keeps its own copy.  Monitor's thread. */
void tpm_set_tunnel_ports(struct tpm *, const struct tpm_tunnel_ports *ports);

/* The tenant of the untunnelled frames of the following batches: if
 * 'tunnelled', they are counted under VNI 'vni' as if they had arrived in
 * its tunnel (a VM's port: its frames are received before the switch
 * pushes the tunnel header), else as untunnelled (the default).
 * Monitor's thread. */
void tpm_set_rx_tunnel(struct tpm *, bool tunnelled, uint32_t vni);

/* The interface the frames of the following batches were received on:
 * the front end's number for it, 1 to 65535, or 0 for none (the
 * default).  A flow takes the number of the port it is first seen on, and
 * keeps it while it stays in the table; an event's in_port= item matches
 * the flows whose number is its 'in_port_slot', and an event that groups
 * by in_port has one trigger instance per (number, group key).  The
 * numbers are the front end's: it must not give one to another
 * interface while flows may still carry it.  Monitor's thread. */
void tpm_set_rx_port(struct tpm *, uint16_t port);

/* Makes the monitor intern its tunnel ids into 'shared' (tpm/tenants.h),
 * a table that outlives it, instead of its own (NULL: its own again), so
 * that the groups of every monitor that shares it name a tenant by the
 * same slot.  Only before the first frame. */
struct tpm_tenants;
void tpm_set_tenants(struct tpm *, struct tpm_tenants *shared);

/* The table of the monitor's tenant slots: a report's group.tun reads
 * back as a VNI with tpm_tenants_vni(). */
const struct tpm_tenants *tpm_get_tenants(const struct tpm *);

/* Same, with the arrival time of each frame in 'ts_ns' (the same clock as
 * tpm_advance(), non-decreasing, all within the current epoch).  Only
 * is_burst and rtt read packet times: tpm_process_batch() gives every
 * frame the time of the last tpm_advance() call (in a PMD, the batch's
 * receive time), a capture replay passes each packet's own. */
void tpm_process_batch_at(struct tpm *, const struct tpm_frame *frames,
                          const uint64_t *ts_ns, int n);

/* Moves the monitor's clock to 'now_ns' (wall clock, or virtual time in
 * replay).  When this enters a new epoch, the sweep of the previous epoch
 * starts; a sweep still running for an older epoch is abandoned and
 * counted as unfinished.  When time jumps by two epochs or more (no call
 * in between), pending sweeps are completed at once so no statistics are
 * overwritten (counted as 'sweeps_forced'). */
void tpm_advance(struct tpm *, uint64_t now_ns);

/* Runs one step of background work: scrubs and backfills a bounded number
 * of flow slots, then runs the current sweep for at most the configured
 * budget (or, if 'budget_ns' is not UINT64_MAX, that budget; 0 =
 * unbounded).  Returns true if work is left (sweep or backfill). */
bool tpm_sweep_step(struct tpm *, uint64_t budget_ns);

/* Returns true if a sweep is in progress. */
bool tpm_sweep_pending(const struct tpm *);

/* Returns how far the sweep in progress is behind the pace that ends it
 * when 'pace' % of the epoch is gone (1 .. 100), at time 'now_ns': the
 * share of that part of the epoch gone (at most 1) minus the share of
 * trigger instances swept, in [0, 1] (0 on pace, or no sweep).  A caller
 * that gives the sweep time only when it must (a saturated PMD) gives it
 * more while this is above 0 (sweep-sched.h decides when and how much);
 * a pace below 100 leaves the rest of the epoch as a margin for the
 * steps that come late. */
double tpm_sweep_lateness(const struct tpm *, uint64_t now_ns,
                          uint32_t pace);

/* Direct control, owner thread only.  */

/* Installs 'event' (ownership passes to the monitor on success) with
 * identifier 'id' chosen by the caller (unique among installed events;
 * reports carry it).  Returns NULL or an error message (then 'event' stays
 * the caller's): a variable that needs per-flow state while
 * tcp_state_pool is 0, an interval that is not a multiple of the epoch, a
 * full event table, too many summaries, a duplicate id. */
char *tpm_event_add(struct tpm *, struct tpm_event *event, uint32_t id)
    __attribute__((warn_unused_result));

/* Removes event 'id'.  Returns 0 or ENOENT. */
int tpm_event_del(struct tpm *, uint32_t id);

/* Polls event 'id' for the value of 'group' (masked by the event's
 * granularity) in the interval ending at absolute epoch 'epoch'.  A
 * tenant's group has 'group->tun' not 0 (any value: the monitor's own
 * slot is found from the VNI) and its VNI in 'tun_id'; 'port' is the
 * group's interface if the event groups by in_port (else ignored). */
enum tpm_poll_status {
    TPM_POLL_OK,                /* '*value' set. */
    TPM_POLL_NOT_YET,           /* That interval has not been swept yet. */
    TPM_POLL_EXPIRED,           /* Older than the history kept, or
                                 * over before the event was added. */
    TPM_POLL_NO_GROUP,          /* No traffic seen for that group (its
                                 * value is 0 for sums and counts). */
    TPM_POLL_NO_EVENT,          /* Unknown event. */
};
enum tpm_poll_status tpm_poll(const struct tpm *, uint32_t id,
                              const struct tpm_key *group, uint32_t tun_id,
                              uint16_t port, uint64_t epoch, double *value);

/* Reports: satisfactions, and replies to submitted commands. */
enum tpm_report_type {
    TPM_REPORT_SATISFIED,
    TPM_REPORT_ADD_DONE,        /* 'error' NULL on success. */
    TPM_REPORT_DEL_DONE,        /* 'status' 0 or ENOENT. */
    TPM_REPORT_POLL_REPLY,      /* 'status' is an enum tpm_poll_status. */
    TPM_REPORT_INFO_REPLY,      /* 'status': 0 or ENOENT; 'value': flows
                                 * attached; 'epoch': trigger instances. */
};

#define TPM_REPORT_PARTIAL 0x1  /* Interval not fully observed: the event
                                 * was added, or a sweep was unfinished,
                                 * within it. */

struct tpm_report {
    uint32_t type;              /* enum tpm_report_type. */
    uint32_t event_id;
    uint64_t epoch;             /* Last epoch of the interval (absolute). */
    double value;
    uint64_t cookie;            /* Copied from the command. */
    uint32_t status;
    uint32_t flags;             /* TPM_REPORT_*. */
    char *error;                /* ADD_DONE failure: caller frees. */
    struct tpm_key group;       /* Group key (masked).  'group.tun' is the
                                 * monitor's tenant slot: not 0 if the
                                 * group is a tenant's, whose VNI is
                                 * 'tun_id'. */
    uint32_t tun_id;            /* VNI of the group's tenant. */
    uint16_t port;              /* The group's interface
                                 * (tpm_set_rx_port()) if the event groups
                                 * by in_port, else 0. */
};

/* Controller side (one thread): submit commands.  Each returns false if
 * the command ring is full (nothing was queued; 'event' stays the
 * caller's).  Replies arrive as reports with the same 'cookie'. */
bool tpm_submit_add(struct tpm *, struct tpm_event *event, uint32_t id,
                    uint64_t cookie);
bool tpm_submit_del(struct tpm *, uint32_t id, uint64_t cookie);
bool tpm_submit_poll(struct tpm *, uint32_t id, const struct tpm_key *group,
                     uint32_t tun_id, uint16_t port, uint64_t epoch,
                     uint64_t cookie);

/* Controller side: asks for event 'id''s trigger instances and attached
 * flows (see tpm_event_info()); the reply is a TPM_REPORT_INFO_REPLY. */
bool tpm_submit_info(struct tpm *, uint32_t id, uint64_t cookie);

/* Owner: stores in '*instances' the trigger instances of event 'id' and in
 * '*flows' the flow-list items they hold.  Returns 0 or ENOENT. */
int tpm_event_info(const struct tpm *, uint32_t id, uint64_t *instances,
                   uint64_t *flows);

/* Owner: executes queued commands (at most 'max').  A command is taken
 * only when the report ring has room for its reply, so replies are never
 * lost; satisfactions that find the report ring full are dropped and
 * counted.  Returns the number executed. */
int tpm_run_control(struct tpm *, int max);

/* Controller side (or owner, when there is no controller thread): takes
 * the oldest report.  Returns false if none. */
bool tpm_pop_report(struct tpm *, struct tpm_report *);

/* Monitor side: the share of the report ring in use, in [0, 1] (a
 * snapshot: the reader may be draining it).  A caller whose reader drains
 * the ring only when woken wakes it past some fill. */
double tpm_report_fill(const struct tpm *);

/* Counters.  Every loss is counted (docs/architecture.md). */
struct tpm_stats {
    uint64_t packets;           /* Frames seen. */
    uint64_t bytes;
    uint64_t non_ip;            /* Frames that are not IP (not monitored):
                                 * parse.not_parsed[TPM_PARSE_NON_IP]. */
    uint64_t batches;
    uint64_t lastflow_hits;     /* Lookups skipped: same flow as before. */
    uint64_t flow_inserts;
    uint64_t flow_reuses;       /* Insertions into dead or stale slots. */
    uint64_t flow_evictions;    /* Recent entries evicted (stats lost). */
    uint64_t flows_freed;       /* Idle entries freed by the scrubber. */
    uint64_t flows_retired;     /* Idle flows dropped from trigger lists
                                 * (matched again if they resume). */
    uint64_t flows_live;        /* Gauge. */
    uint64_t matches;           /* Flow-trigger matches made. */
    uint64_t match_overflow;    /* Matches beyond max_matches dropped. */
    uint64_t summary_overflow;  /* Matches dropped: flow out of slots. */
    uint64_t dos_skipped_pkts;  /* Packets of flows below the DoS
                                 * threshold (not matched). */
    uint64_t dos_passed;        /* Flows matched on passing it. */
    uint64_t dos_precheck_pkts; /* Packets below it that the pre-check
                                 * found could match no trigger. */
    uint64_t dos_removed_collision; /* Flow entries below it taken by a
                                 * colliding new flow. */
    uint64_t dos_removed_sweep; /* Flow entries below it freed by the
                                 * sweep's scrubber (no packet in the
                                 * epoch). */
    uint64_t children_created;
    uint64_t children_dropped;  /* Over max_children or max_triggers. */
    uint64_t children_expired;
    uint64_t chunks_exhausted;  /* Flows not listed: chunk pool empty. */
    uint64_t backfilled;        /* Flows matched to events added later. */
    uint64_t sweeps_started;
    uint64_t sweeps_done;
    uint64_t sweeps_unfinished; /* Abandoned at the next epoch. */
    uint64_t sweeps_forced;     /* Completed at once after a time jump. */
    uint64_t sweep_steps;
    uint64_t sweep_flows;       /* Flow-list items visited. */
    uint64_t sweep_stale_items; /* List items dropped: flow gone. */
    uint64_t sweep_skipped;     /* Instances passed without a visit: one
                                 * flow, which sent nothing in the swept
                                 * epoch. */
    uint64_t epochs;            /* Epochs entered. */
    uint64_t epochs_skipped;    /* Epochs with no tpm_advance() call. */
    uint64_t reports;           /* Satisfactions queued. */
    uint64_t reports_dropped;   /* Report ring full. */
    uint64_t sweep_waits;       /* Steps stopped for a full report ring
                                 * ('sweep_waits_for_reports'). */
    uint64_t commands;          /* Commands executed. */
    uint64_t triggers;          /* Gauge: trigger instances. */
    uint64_t events;            /* Gauge: installed events. */
    uint64_t chunks_used;       /* Gauge. */
    uint64_t sweep_ns_last;     /* Duration of the last complete sweep
                                 * (sum of its steps). */
    uint64_t sweep_ns_p50;      /* Over the last 256 complete sweeps. */
    uint64_t sweep_ns_p99;
    uint64_t sweep_ns_max;
    uint64_t tcp_states;        /* Gauge: connections with per-flow state
                                 * (of tcp_state_pool). */
    uint64_t tcp_state_exhausted; /* Matches dropped: an event needs
                                   * per-flow state and the pool is
                                   * empty. */
    uint64_t tcp_state_freed;   /* Entries returned to the pool: both
                                 * directions' flow entries gone. */
    uint64_t not_parsed;        /* Frames not parsed, so not monitored (the
                                 * sum of parse.not_parsed). */
    uint64_t tun_slots_full;    /* Frames not monitored: their tunnel id
                                 * found every tenant slot taken. */
    uint64_t tenants;           /* Gauge: tenant slots taken. */
    uint64_t tun_underlay;      /* Tunnelled frames also counted as their
                                 * outer flow, for underlay events. */
    struct tpm_parse_stats parse; /* The parser's counters, by reason
                                 * (lib/packet.h).  Frames are parsed only
                                 * while an event is installed. */
};

void tpm_get_stats(const struct tpm *, struct tpm_stats *);

/* The counters of 'struct tpm_stats' that count data lost to the reports
 * (each non-zero one means some value is missing, too small or partial),
 * for the front ends that must say so: 'name' is the field, 'what' says
 * what was lost and which limit to raise. */
struct tpm_loss {
    const char *name;
    const char *what;
    size_t offset;              /* Of the uint64_t in struct tpm_stats. */
};
#define TPM_N_LOSSES 9
extern const struct tpm_loss tpm_losses[TPM_N_LOSSES];

static inline uint64_t
tpm_loss_get(const struct tpm_stats *s, const struct tpm_loss *l)
{
    uint64_t v;
    memcpy(&v, (const char *) s + l->offset, sizeof v);
    return v;
}

/* Calls 'cb' for every live flow entry (for tpm/flows-like listings;
 * owner thread only). */
void tpm_flows_for_each(const struct tpm *,
                        void (*cb)(const struct tpm_key *key,
                                   uint64_t packets, uint64_t bytes,
                                   uint32_t n_matched, void *aux),
                        void *aux);

/* Returns the installed event 'id', or NULL.  Owner thread only. */
const struct tpm_event *tpm_event_get(const struct tpm *, uint32_t id);

#endif /* tpm.h */
