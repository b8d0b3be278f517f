/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TEM core's insides: the structures and functions that the files
 * implementing tem-core.h share.  Nothing here is for the core's callers.
 *
 * The core is split by job, one file each, each with an essay of its own.
 * The files stand in a fixed order, top to bottom, and each calls only
 * the files below it:
 *
 *   tem-core.c     the core's life: configuration, creation, destruction,
 *                  tem_core_run() (the timers: the decisions', then the
 *                  hosts' and the events')
 *   tem-host.c     hosts and their input: sessions (Hello, Welcome,
 *                  Refuse, Bye, silence), frames in and their dispatch,
 *                  acks, the sequence numbers of their reports, the DoS
 *                  threshold the TEM sets on hosts; the hosts' timers
 *                  (heartbeats, timeouts)
 *   tem-decide.c   decisions: satisfactions (held from confirmation
 *                  until decided), polls, re-polls, poll replies,
 *                  deadlines, deciding, late reports
 *   tem-alert.c    alerts, their history, drill-down, late epochs that
 *                  could not be decided
 *   tem-event.c    events: definitions with their network-wide clauses,
 *                  placement on hosts, threshold shares, reconcile and
 *                  rebalance, the events' JSON persistence; the events'
 *                  timers (drill-down expiry, rebalancing)
 *   tem-out.c      the host table's lookups and what goes to hosts: their
 *                  batches, PollBatches and confirmations, the flush
 *   tem-log.c      the rate-limited log
 *
 * and beside them tem-view.c, the JSON views of the control socket and
 * the metrics, which only read and which no file of the core calls.
 *
 * So a satisfaction flows down: the hosts' input (tem-host.c) hands it to
 * the decisions (tem-decide.c), a decision raises its alert (tem-alert.c),
 * an alert's drill-down reconciles an event's placement (tem-event.c),
 * and every message to a host leaves through tem-out.c (tem_out_batch(),
 * then the flush); every file logs through tem-log.c.  What a lower file
 * must have an upper one do is data it leaves in struct tem_core (a
 * held satisfaction for tem-out.c's confirmations, 'next_timers_ns' = 0
 * for tem-core.c's timers), never a call.  The calls out of the core are
 * the caller's callbacks in struct tem_config: the clocks 'clock.mono'
 * (tem_core_now(), every timer and duration) and 'clock.real'
 * (tem_core_real(), the moments told to others), 'send' (tem-out.c) and
 * 'alert' (tem-alert.c).  A call that one day must go up is to be a
 * function pointer that the upper file sets, named and documented here
 * as a call back.
 *
 * Host slots, sessions and event ids tie the parts together: an event's
 * member and a decision's part name a host by its slot in core->hosts and
 * the session it was made for, so that nothing of a host's old session is
 * taken for its new one's.
 *
 * Tenants (protocol version 4): a host names a tenant's group by its VNI
 * (GroupKey.tun_id); the core interns the VNIs into a tenant table of its
 * own ('tenants', tpm/tenants.h), whose slot is the 'tun' of the group
 * keys it keeps, so that a decision, its polls and its alert are one
 * tenant's and two tenants with the same 5-tuple never merge.  What
 * leaves the core names the tenant by its VNI again: polls (Poll's
 * GroupKey.tun_id, PollBatch.tun_ids) and alerts ("tun_id" in the group).
 * A host whose session is older than version 4 cannot be asked for a
 * tenant's value: its part of a tenant's decision is missing.
 */
#ifndef TEM_CORE_PRIVATE_H
#define TEM_CORE_PRIVATE_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "event.h"
#include "sbuf.h"
#include "decision.h"
#include "tem-core.h"
#include "tenants.h"
#include "tproto.h"
#include "util.h"

struct json_object;

#define NS_PER_MS 1000000ULL
#define NS_PER_S 1000000000ULL

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
    /* As in struct tem_stats. */
    uint64_t reports_late, reports_dup, reports_skipped;
    uint64_t epoch_refused;
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

/* A poll inside a PollBatch: the decision's slot and generation and the
 * part polled, so that the reply's entry i finds its decision without a
 * lookup by key. */
struct tem_poll_ref {
    uint32_t slot, gen, part;
};

/* Batches a host has been sent and not answered, by cookie modulo this
 * (older ones are forgotten: their answers count as stale and their
 * parts wait for the deadline). */
#define TEM_POLL_BATCHES_OUT 32

/* A host's polls for protocol version 3 on: those of the current loop
 * turn gather in 'ids', 'keys' and 'refs' (for one epoch; another epoch,
 * or TPROTO_MAX_POLL_ENTRIES, starts another batch) and leave as one
 * PollBatch when the host's messages are flushed.  The buffers of the
 * batches out are swapped in and out, never allocated per message. */
struct tem_pollq {
    uint64_t epoch;
    size_t n, cap;              /* Entries gathered, room. */
    uint32_t *ids;
    uint8_t *keys;              /* Key records (tproto_key_record_put()). */
    size_t keys_len;
    uint32_t *tuns;             /* PollBatch.tun_ids: 0 or VNI + 1... */
    bool any_tun;               /* ... sent if any entry is a tenant's. */
    struct tem_poll_ref *refs;
    uint64_t next_cookie;       /* Cookies: 1, 2, ... */
    struct tem_poll_out {
        uint64_t cookie;        /* 0: none. */
        uint64_t epoch;
        size_t n, cap;
        struct tem_poll_ref *refs;
    } out[TEM_POLL_BATCHES_OUT];
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
    uint64_t silent_from_ns;    /* Its silence counts from here:
                                 * 'last_rx_ns', moved on when the loop
                                 * overran (tem_host_delay()). */
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
    struct tem_pollq *pollq;    /* Version 3 on, once polled. */
    size_t out_bytes;           /* Estimated size of 'out'. */
    bool dirty;                 /* On 'dirty' list. */
    struct tem_host_stats stats;

    /* Sequence numbers of the host's reports (tem-host.c, "Delivery of
     * hosts' reports"): kept across its sessions while its agent is the
     * same run. */
    uint64_t seq_instance;      /* Hello.instance (0: none). */
    uint64_t seq_recv;          /* Highest taken (0: none yet). */
    uint64_t seq_told;          /* Last Heartbeat.received sent. */
    uint64_t *held;             /* Ring of the satisfactions taken whose
                                 * decision is pending, increasing; ORed
                                 * with HELD_DONE once decided
                                 * (tem-decide.c). */
    size_t held_head, held_n, held_cap;

    /* Decisions it started in loop turn 'turn' (tem-decide.c, at most
     * --host-decisions). */
    uint64_t turn;
    uint32_t turn_decisions;
};

#define HELD_DONE (1ULL << 63)

enum tem_across {
    TEM_ACROSS_SUM,
    TEM_ACROSS_COUNT,
    TEM_ACROSS_MAX,
    TEM_ACROSS_ATLEAST,
};

enum tem_install_state {
    TEM_INSTALL_PENDING,
    TEM_INSTALL_ACKED,
    TEM_INSTALL_NACKED,
};

struct tem_member {
    uint32_t host_slot;
    uint32_t session;
    enum tem_install_state state;
    bool is_new;                /* Added by the current reconcile. */
    uint64_t cookie;            /* Of the last Install. */
    uint64_t installed_ns;      /* Wall clock: compared with the end of
                                 * an epoch. */
    char *reason;               /* Nack reason (owned) or NULL. */
    double share;               /* Threshold share (split events). */
    double ewma;                /* History of the host's values. */
    bool has_ewma;
};

struct tem_event_stats {
    uint64_t satisfactions, decisions, alerts, decided_deadline;
    uint64_t late, dropped, nacks, drilldowns, reinstalls;
    uint64_t undecidable;       /* As tem_stats.late_undecidable. */
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

    struct sbuf *recent;        /* Ring of 'recent_alerts' JSON lines. */
    size_t n_recent, recent_next;

    struct tem_event_stats stats;
    struct tem_event *id_next;  /* Chain of 'by_id' hash. */
};

#define PART_SATISFIED 1        /* The host reported a satisfaction. */
#define PART_INCOMPLETE 2       /* Value from some of its PMDs only. */
#define PART_EXPIRED 4          /* Missing: its history does not reach
                                 * the epoch (POLL_EXPIRED, NO_EVENT). */

/* A decision's part (lib/decision.h): the host that answers for it, by slot
 * and session. */
struct tem_part {
    struct tpm_part up;         /* Its 'flags' are PART_*. */
    uint32_t host_slot;
    uint32_t session;
    uint64_t seq;               /* Its satisfaction, held until decided
                                 * (0: none)... */
    uint64_t seq_instance;      /* ... of this run of the host's agent. */
};

/* Bits of a decision's 'aux' (struct tpm_decision). */
#define DECISION_LATE 1         /* A late satisfaction started or joined
                                 * it. */

static inline struct tem_part *
tem_parts(const struct tpm_decision *d)
{
    return d->parts;
}

/* A host to poll again (it answered POLL_NOT_YET), by decision slot and
 * generation. */
struct tem_repoll {
    uint64_t due_ns;
    uint32_t slot, gen, part;
};

/* A late satisfaction waiting for its loop turn (tem-decide.c, "Late
 * reports"): what the host sent, parsed, and the host's session and
 * agent run it came in. */
struct tem_late {
    uint32_t host_slot, session;
    uint32_t event_id;
    uint32_t vni;               /* The group's tenant, if 'group.tun'. */
    uint64_t epoch;
    struct tpm_key group;       /* 'tun' not interned yet: 0 or 1. */
    double value;
    uint8_t flags;              /* PART_*. */
    uint64_t seq, seq_instance; /* Held since it came (0: none). */
};

/* The core: what its files share. */
struct tem_core {
    struct tem_config cfg;
    uint64_t start_ns;          /* Monotonic, for the uptime... */
    uint64_t start_real_ns;     /* ... and on the wall clock. */

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
    uint64_t next_cookie;

    /* Decisions. */
    struct tpm_decisions *decisions;    /* Parts are struct tem_part. */
    struct tpm_tenants *tenants;        /* The VNIs of the tenants'
                                         * groups, by the 'tun' of the
                                         * keys (see above). */
    struct tem_repoll *repolls;  /* Ring. */
    size_t rp_head, rp_count, rp_cap;
    struct tem_late *late;      /* Ring of late satisfactions waiting,
                                 * at most --late-queue. */
    size_t late_head, late_n, late_cap;
    uint64_t turn;              /* Loop turns: tem_core_flush() calls. */

    /* Alerts. */
    struct sbuf *history;       /* Ring of 'alert_history' JSON lines. */
    char (*history_event)[TPROTO_MAX_ID + 1];   /* Event names. */
    uint32_t *history_tun;      /* Their groups' tenants: VNI + 1, or 0
                                 * for a group of no tenant. */
    struct sbuf alert_buf;      /* The alert being built, reused from one
                                 * alert to the next (tem-alert.c). */
    char time_cache[32];        /* Formatted second of 'time_cache_secs'. */
    time_t time_cache_secs;
    size_t n_history, history_next;

    /* DoS threshold for every host without its own (tem-ctl
     * dos-threshold BYTES). */
    bool dos_all;
    uint32_t dos_all_bytes;
    /* DoS thresholds of single hosts read from the state file that have
     * no slot yet: a host of that id gets its value at its Hello. */
    struct tem_dos_saved {
        char id[TPROTO_MAX_ID + 1];
        uint32_t bytes;
    } *dos_saved;
    size_t n_dos_saved;

    uint64_t next_timers_ns;    /* When tem_core_run() next runs the
                                 * hosts' and events' timers (0: at its
                                 * next call). */
    struct tproto_batch tmp;    /* For peers without a session. */
    struct tem_stats stats;
    /* Detection latency (first satisfaction to alert), for
     * tem_core_metrics(): counts per bucket of
     * tem_alert_latency_bounds[], the last one above them all, and their
     * sum. */
    uint64_t latency_counts[TEM_LATENCY_BUCKETS + 1];
    double latency_sum_s;
    struct tem_rl rl_session, rl_install, rl_drill, rl_misc, rl_input;
    struct tem_rl rl_security, rl_late, rl_overrun;
};

/* The monotonic clock: every timer and duration of the core. */
static inline uint64_t
tem_core_now(const struct tem_core *core)
{
    return core->cfg.clock.mono(core->cfg.clock.aux);
}

/* The wall clock: only the moments the core tells others (alerts' time,
 * the clock of Welcome and Heartbeat, the start time). */
static inline uint64_t
tem_core_real(const struct tem_core *core)
{
    return core->cfg.clock.real(core->cfg.clock.aux);
}

/* The epoch the TEM's wall clock is in: hosts number epochs by real time
 * (ns since the Unix epoch / --epoch), so this stays on the wall clock
 * whatever clock the timers use. */
static inline uint64_t
tem_core_epoch_now(const struct tem_core *core)
{
    return tem_core_real(core) / core->cfg.epoch_ns;
}

/* The files' functions, from the bottom up. */

/* The VNI of 'group''s tenant, 0 if it is no tenant's ('group->tun' 0). */
static inline uint32_t
tem_core_group_vni(const struct tem_core *core, const struct tpm_key *group)
{
    return group->tun ? tpm_tenants_vni(core->tenants, group->tun) : 0;
}

/* tem-log.c. */
void tem_log_rl(struct tem_core *, struct tem_rl *, enum tpm_log_level,
                const char *format, ...)
    __attribute__((format(printf, 4, 5)));

/* tem-out.c. */
struct tem_host *tem_out_host_by_slot(const struct tem_core *, uint32_t slot);
bool tem_out_host_connected(const struct tem_host *);
struct tproto_batch *tem_out_batch(struct tem_core *, struct tem_host *,
                                   size_t bytes);
void tem_out_dirty(struct tem_core *, struct tem_host *);
void tem_out_send(struct tem_core *, const void *peer, size_t peer_len,
                  uint32_t version, struct tproto_batch *,
                  struct tem_host_stats *);
void tem_out_refuse(struct tem_core *, const void *peer, size_t peer_len,
                    const char *reason);
void tem_out_bye(struct tem_core *, const void *peer, size_t peer_len,
                 const char *reason);
uint64_t tem_out_received(const struct tem_host *);
void tem_out_tell_received(struct tem_core *, struct tem_host *);

/* A decision's group as its polls carry it in PollBatches: the key
 * record and the tenant's VNI + 1 (0: none), made once per decision by
 * tem_out_poll_key_init() and copied into each polled host's batch. */
struct tem_poll_key {
    uint8_t rec[TPROTO_KEY_RECORD_V6];
    uint32_t len;
    uint32_t tun;
};
void tem_out_poll_key_init(const struct tem_core *, struct tem_poll_key *,
                           const struct tpm_decision *);
void tem_out_pollq_add(struct tem_core *, struct tem_host *,
                       const struct tpm_decision *, uint32_t part,
                       const struct tem_poll_key *);
void tem_out_pollq_free(struct tem_pollq *);
void tem_out_pollq_reset(struct tem_pollq *);

/* tem-event.c. */
extern const char *const tem_event_across_names[];     /* enum tem_across */
struct tem_event *tem_event_by_id(const struct tem_core *, uint32_t id);
struct tem_event *tem_event_by_name(const struct tem_core *, const char *name);
bool tem_event_eligible(const struct tem_event *, const struct tem_host *);
void tem_event_reconcile(struct tem_core *, struct tem_event *, uint64_t now);
void tem_event_reconcile_all(struct tem_core *, uint64_t now);
uint64_t tem_event_run(struct tem_core *, uint64_t now);
void tem_event_free(struct tem_event *);

/* tem-alert.c. */
extern const double tem_alert_latency_bounds[TEM_LATENCY_BUCKETS];
bool tem_alert_part_holds(const struct tem_event *, const struct tem_part *);
void tem_alert_raise(struct tem_core *, struct tem_event *,
                     const struct tpm_decision *, double value,
                     double threshold, bool has_threshold, bool deadline,
                     uint64_t now);
void tem_alert_late_undecidable(struct tem_core *, struct tem_event *,
                                const struct tpm_decision *);

/* tem-decide.c. */
bool tem_decide_epoch_ok(struct tem_core *, struct tem_host *,
                         uint64_t epoch);
void tem_decide_satisfaction(struct tem_core *, struct tem_host *,
                             const Trumpet__Satisfaction *);
void tem_decide_poll_batch_reply(struct tem_core *, struct tem_host *,
                                 const Trumpet__PollBatchReply *);
void tem_decide_poll_reply(struct tem_core *, struct tem_host *,
                           const Trumpet__PollReply *);
void tem_decide_host_gone(struct tem_core *, const struct tem_host *);
void tem_decide_run(struct tem_core *, uint64_t now);
uint64_t tem_decide_next_ns(const struct tem_core *);
void tem_decide_delay(struct tem_core *, uint64_t ns);

/* tem-host.c. */
extern const char *const tem_host_dos_state_names[];   /* enum tem_dos_state */
bool tem_host_dos_wanted(const struct tem_core *, const struct tem_host *,
                         uint32_t *bytes);
uint64_t tem_host_run(struct tem_core *, uint64_t now);
void tem_host_delay(struct tem_core *, uint64_t ns);

#endif /* tem-core-private.h */
