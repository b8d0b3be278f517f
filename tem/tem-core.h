/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Trumpet Event Manager's logic (paper section 6), without sockets.
 *
 * The TEM turns network-wide events into triggers on hosts, collects the
 * hosts' satisfactions, polls the other hosts of an event for the same
 * epoch and group, decides, and raises alerts:
 *
 *   - Hosts open a session with Hello (lib/agent.h); the core answers
 *     Welcome or Refuse, exchanges heartbeats, and forgets a host that
 *     says Bye or stays silent for 3 heartbeat periods.  Every host is
 *     named by its host id; its session by its ZeroMQ peer identity.
 *
 *   - An event is an event-language definition (docs/event-language.md)
 *     plus network-wide clauses (scope=, across=, split=, then=,
 *     standby=; see docs/tem.md).  Its trigger goes to the connected
 *     hosts in its scope whose served prefixes intersect the addresses
 *     its filter constrains.  A sum()/count() threshold is split over
 *     them (equal or weighted shares); other events run with the full
 *     predicate on every host.
 *
 *   - The first satisfaction for (event, epoch, group) starts a decision
 *     over the event's hosts; the others are polled, and the event is
 *     decided when every host answered or at the poll deadline, hosts that
 *     did not answer being listed as missing (never counted as zero).
 *
 *   - An alert is one JSON object (docs/tem.md) handed to the 'alert'
 *     callback.  An event with then=NAME:DURATION installs the standby
 *     event NAME on the hosts that contributed to its alert, for DURATION.
 *
 * The caller owns the sockets: it feeds every frame received with
 * tem_core_input(), calls tem_core_run() for timers and tem_core_flush()
 * once per loop iteration, which hands every host's queued messages to
 * the 'send' callback as one batch (one frame).  A caller should feed
 * what its sockets hold before it runs the timers, so that an answer that
 * came in time is never counted missing because it waited in a queue.
 *
 * Time comes from two clocks (struct tem_clock; tests give fake ones):
 * the monotonic clock for every timer and every duration (heartbeats,
 * silence, poll deadlines, re-polls, decided keys, drill-downs,
 * rebalancing, detection latency, ages and uptime), the wall clock only
 * for what names a moment to the outside (the time of alerts, the clock
 * of Welcome and Heartbeat, the start time in the metrics).  A step of
 * the wall clock, forward or back, moves no timer.  When the caller's
 * loop did not run for a while (the process was stopped, starved or held
 * by slow work), tem_core_overrun() extends the timers that wait for
 * hosts by that time.
 *
 * Thread-safety: a core is used by one thread.
 */
#ifndef TEM_CORE_H
#define TEM_CORE_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpm-log.h"
#include "tproto.h"

struct json_object;

/* The core's clocks, in nanoseconds.  'mono' never steps (CLOCK_MONOTONIC
 * in the daemon): every timer and duration.  'real' is the wall clock
 * (CLOCK_REALTIME), which an operator or NTP may step: only the moments
 * the core tells others. */
struct tem_clock {
    uint64_t (*mono)(void *aux);
    uint64_t (*real)(void *aux);
    void *aux;
};

/* The system's clocks (lib/clock.h): CLOCK_MONOTONIC and CLOCK_REALTIME. */
extern const struct tem_clock tem_clock_system;

struct tem_config {
    const char *tem_id;         /* Sent in Welcome ("tem"). */
    uint64_t epoch_ns;          /* Epoch every host must use (10 ms). */
    uint32_t heartbeat_ms;      /* Welcome.heartbeat_ms (1000). */
    uint32_t max_hosts;         /* Hosts known at once, connected or
                                 * recently gone (1024, at most 65535). */
    uint32_t max_events;        /* Events defined (1024). */
    uint32_t max_decisions;     /* Pending and recently decided keys
                                 * (1048576, at most 2^24). */
    uint64_t poll_deadline_ns;  /* A decision waits at most this (100 ms). */
    uint64_t repoll_ns;         /* Delay before re-polling a host that
                                 * answered POLL_NOT_YET (1 ms). */
    uint64_t decided_keep_ns;   /* How long a decided key is remembered
                                 * (0: max(4 x deadline, 4 x interval)). */
    uint64_t rebalance_ns;      /* Weighted split: re-split at most this
                                 * often (10 s). */
    double rebalance_change;    /* ... when a share moves by more than this
                                 * fraction of itself (0.2). */
    double ewma_alpha;          /* Weight of a new value in a host's
                                 * history (0.25). */
    double weight_floor;        /* Least weight, as a fraction of the
                                 * mean (0.1). */
    uint32_t recent_alerts;     /* Alerts kept per event for event-show
                                 * (10). */
    uint32_t alert_history;     /* Alerts kept for "alerts" (100). */
    size_t max_batch_bytes;     /* A host's frame is sent once its
                                 * messages reach about this (256 KiB). */

    /* What one host may make the TEM do (docs/tem.md, "Hostile hosts"). */
    uint64_t epoch_past_ns;     /* Satisfactions and poll replies of an
                                 * epoch that ended longer ago than this
                                 * are refused (5 min); those of an epoch
                                 * more than TEM_EPOCH_AHEAD epochs ahead
                                 * of the wall clock too. */
    uint32_t host_decisions;    /* Decisions one host may start per loop
                                 * turn (4096); its satisfactions past
                                 * that are dropped. */
    uint32_t late_per_turn;     /* Late satisfactions decided per loop
                                 * turn, after the live ones (256)... */
    uint32_t late_queue;        /* ... the others waiting, at most this
                                 * many (65536; when full, decided at
                                 * once). */
    uint64_t max_seq_gap;       /* A jump of a host's report numbers by
                                 * more than this is a protocol error
                                 * (2^32). */

    /* The clocks (tem_clock_system). */
    struct tem_clock clock;

    /* Callbacks. */
    /* Sends 'batch' as one frame of protocol 'version' (0: the highest
     * this build speaks) to ZeroMQ peer 'peer'; returns false if it was
     * dropped (counted). */
    bool (*send)(void *aux, const void *peer, size_t peer_len,
                 uint32_t version, const struct tproto_batch *batch);
    /* An alert: 'json' is one line of JSON (no newline). */
    void (*alert)(void *aux, const char *event, const char *json);
    void *aux;
};

/* A satisfaction's epoch may be this many epochs ahead of the TEM's wall
 * clock (the hosts' clocks differ a little). */
#define TEM_EPOCH_AHEAD 2

/* Fills in the defaults noted above; the system's clocks, callbacks
 * NULL. */
void tem_config_init(struct tem_config *);

struct tem_core *tem_core_create(const struct tem_config *);
void tem_core_destroy(struct tem_core *);

/* Processes one frame 'data'/'len' received from peer 'peer'/'peer_len'
 * (1 to 255 bytes), over a connection that is not authenticated. */
void tem_core_input(struct tem_core *, const void *peer, size_t peer_len,
                    const void *data, size_t len);

/* The same for a frame of a connection authenticated by a CURVE key bound
 * to host id 'auth_id' (tem-auth.h; NULL: not authenticated): a Hello
 * for another host id is refused (counted in auth_mismatch) before it
 * can touch that host's session, and a frame of a session whose host id
 * is not 'auth_id' is dropped. */
void tem_core_input_auth(struct tem_core *, const void *peer,
                         size_t peer_len, const char *auth_id,
                         const void *data, size_t len);

/* Ends the session of peer 'peer' if it has one, with Bye 'reason' (its
 * key was revoked); counted in 'revoked'.  The caller flushes. */
void tem_core_peer_revoke(struct tem_core *, const void *peer,
                          size_t peer_len, const char *reason);

/* Runs the timers that are due (deadlines, re-polls, heartbeats, host
 * timeouts, drill-down expiry, rebalancing).  Returns the time of the
 * monotonic clock at which it next needs to run. */
uint64_t tem_core_run(struct tem_core *);

/* Tells the core that its caller's loop ran its timers 'late_ns' later
 * than it expected to (it was stopped, starved, or held by slow work):
 * what the hosts sent meanwhile is still queued.  The timers that wait
 * for hosts are extended by 'late_ns' + 'grace_ns' (each pending
 * decision's poll deadline, each decided key's keep time and each
 * connected host's silence timeout), so that none expires before that
 * input is read; 'grace_ns' is the time the caller gives what is still
 * on its way in (in the kernel's buffers, in ZeroMQ's I/O thread).
 * Re-polls, heartbeats to send, drill-downs and rebalancing keep their
 * times.  Counted (tem_stats's 'overruns', 'overrun_ns',
 * 'overrun_max_ns': 'late_ns') and logged, rate-limited. */
void tem_core_overrun(struct tem_core *, uint64_t late_ns, uint64_t grace_ns);

/* Hands every host's queued messages to the 'send' callback. */
void tem_core_flush(struct tem_core *);

/* Says Bye with 'reason' to every connected host and ends their sessions
 * (at shutdown); the caller flushes. */
void tem_core_bye_all(struct tem_core *, const char *reason);

/* Longest definition accepted, network-wide clauses included (bytes); the
 * part sent to hosts is at most TPROTO_MAX_DEFINITION. */
#define TEM_MAX_DEFINITION (2 * TPROTO_MAX_DEFINITION)

/* Largest event id.  Ids are never reused: a new event gets one more than
 * the largest id ever given (kept in the state file's "next_id"), and
 * once TEM_MAX_EVENT_ID is given event-add refuses new events: an id
 * never wraps onto one in use.  With the TEM stopped, the state file's
 * events can be renumbered (hosts forget every id when the TEM restarts;
 * docs/tem.md). */
#define TEM_MAX_EVENT_ID UINT32_MAX

/* Defines event 'name' with 'definition' (network-wide clauses included).
 * 'id' is the event id to use (from a state file), or 0 for a new one.
 * Returns NULL or an error message (caller frees): a name that is not an
 * event name, a definition longer than TEM_MAX_DEFINITION, no event id
 * left, the network-wide clauses' errors, or lib/event.h's parse error
 * verbatim. */
char *tem_core_event_add(struct tem_core *, const char *name,
                         const char *definition, uint32_t id)
    __attribute__((warn_unused_result));

/* Checks that tem_core_event_add() would take 'name' and 'definition'
 * (its name, length, clauses and parse errors), without adding anything:
 * for a cluster of TEMs, which defines events in etcd (tem-cluster.h).
 * Returns NULL or the error (caller frees). */
char *tem_core_event_check(const struct tem_core *, const char *name,
                           const char *definition)
    __attribute__((warn_unused_result));

/* Removes event 'name' from every host.  Returns NULL or an error. */
char *tem_core_event_del(struct tem_core *, const char *name)
    __attribute__((warn_unused_result));

/* Removes every event (for tests and reloading). */
void tem_core_event_clear(struct tem_core *);

size_t tem_core_n_events(const struct tem_core *);

/* Persistence form of the event definitions:
 *   {"format":1,"next_id":N,"events":[{"id":1,"name":"heavy",
 *    "definition":"...","standby":false},...]} */
struct json_object *tem_core_events_to_json(const struct tem_core *);

/* Replaces every event with those of 'obj' (as above).  Returns NULL or
 * an error naming the entry and event at fault; on error the events are
 * left empty. */
char *tem_core_events_from_json(struct tem_core *,
                                const struct json_object *obj)
    __attribute__((warn_unused_result));

/* Sets the DoS threshold of host 'host' (NULL: of every host, those that
 * connect later too, replacing the values set for single hosts) to
 * 'bytes' (0: off), sends it to the connected hosts whose protocol
 * version has Configure, and remembers it: a host gets it again whenever
 * it opens a session.  Answers are tracked per host (tem_core_hosts_json():
 * "dos_threshold", "dos_state": pending, acked, nacked, unsupported,
 * waiting).  Returns NULL and in '*resultp' {"host", "dos_threshold",
 * "hosts": [{"host", "state", "version"}]}, or an error (caller frees)
 * and changes nothing: no host 'host', or it is connected with a protocol
 * version without Configure. */
char *tem_core_set_dos_threshold(struct tem_core *, const char *host,
                                 uint32_t bytes, struct json_object **resultp)
    __attribute__((warn_unused_result));

/* Persistence form of the DoS thresholds (tem-state.c keeps it in the
 * state file beside the events, key "dos_threshold"):
 *   {"all": BYTES or null, "hosts": {"h1": BYTES, ...}}
 * with the values set for single hosts, known or not (a host not known
 * gets its value when it opens a session). */
struct json_object *tem_core_dos_to_json(const struct tem_core *);

/* Sets the DoS thresholds of 'obj' (as above; NULL: none).  Returns NULL
 * or an error (caller frees), and then sets none. */
char *tem_core_dos_from_json(struct tem_core *, const struct json_object *)
    __attribute__((warn_unused_result));

/* Views for the control socket, as JSON (docs/tem.md, "tem-ctl").  A
 * tenant 'tun_id' (a VNI; NULL: no filter) narrows the lists: the events
 * whose filter's tun_id= matches it, the hosts that serve a prefix of
 * it, the alerts of its groups. */
struct json_object *tem_core_event_list_json(const struct tem_core *,
                                             const uint32_t *tun_id);
/* Returns NULL and an error in '*errp' if there is no event 'name'. */
struct json_object *tem_core_event_show_json(const struct tem_core *,
                                             const char *name, char **errp);
struct json_object *tem_core_hosts_json(const struct tem_core *,
                                        const uint32_t *tun_id);
struct json_object *tem_core_status_json(const struct tem_core *);
/* A control reply: "ok": false and the formatted "error"; or "ok": true
 * added to 'r' (NULL: a new object), which it returns. */
struct json_object *tem_reply_error(const char *format, ...)
    __attribute__((format(printf, 1, 2)));
struct json_object *tem_reply_ok(struct json_object *r);
/* The last 'n' alerts (at most --alert-history), oldest first, as an
 * array of alert objects; 'event' NULL for every event. */
struct json_object *tem_core_alerts_json(const struct tem_core *,
                                         const char *event,
                                         const uint32_t *tun_id, size_t n);

/* Global counters (also in tem_core_status_json()). */
struct tem_stats {
    uint64_t frames_in;         /* Frames received. */
    uint64_t msgs_in;           /* Messages in those frames. */
    uint64_t invalid_frames;    /* Not decodable (or wrong version). */
    uint64_t invalid_msgs;      /* Failed tproto_validate(), or not valid
                                 * in the session's state. */
    uint64_t unknown_peer;      /* Frames from a peer with no session. */
    uint64_t auth_mismatch;     /* Hellos claiming a host id other than
                                 * the key's, and frames of a session of
                                 * another host id than the key's. */
    uint64_t revoked;           /* Sessions ended: key no longer allowed. */
    uint64_t hellos, sessions, refused, replaced, hosts_gone;
    uint64_t satisfactions;
    uint64_t sat_unknown;       /* For an event that is not defined or
                                 * not installed on that host. */
    uint64_t sat_late;          /* For a key decided already. */
    uint64_t polls_sent, poll_replies, repolls;
    uint64_t poll_batches;      /* PollBatches sent (their entries count
                                 * in 'polls_sent', their answers in
                                 * 'poll_replies'). */
    uint64_t poll_batches_forgotten;    /* Unanswered when
                                         * TEM_POLL_BATCHES_OUT newer ones
                                         * had been sent to the host. */
    uint64_t replies_stale;     /* For a decided or unknown decision. */
    uint64_t decisions, decided_complete, decided_deadline;
    uint64_t decisions_full;    /* Satisfactions dropped: no room for a
                                 * decision (--max-decisions). */
    uint64_t missing_parts;     /* Hosts listed as missing in decisions. */
    uint64_t tenant_old_hosts;  /* ... of those, hosts of a protocol
                                 * version before 4 in a tenant's
                                 * decision: they cannot be polled for a
                                 * tenant. */
    uint64_t sat_tenants_full;  /* Satisfactions dropped: a tenant not
                                 * seen before, and the TEM's table of
                                 * tenants (65535) is full. */
    uint64_t alerts;
    uint64_t installs, removes, acks, nacks;
    uint64_t configures;        /* Configure messages sent. */
    uint64_t drilldowns;        /* Standby installs caused by alerts. */
    uint64_t drilldown_errors;  /* then= target missing or not standby. */
    uint64_t rebalances;
    uint64_t frames_out, msgs_out, send_drops;
    /* Delivery of satisfactions and poll replies (protocol version 3,
     * docs/tem.md "Late reports"). */
    uint64_t reports_late;      /* Flagged late: sent again, or sent after
                                 * an outage, by the host. */
    uint64_t reports_dup;       /* Dropped: taken already (its sequence
                                 * number was received). */
    uint64_t reports_skipped;   /* Sequence numbers never received: the
                                 * host dropped them (outage buffer full). */
    uint64_t alerts_late;       /* Alerts of decisions with a late
                                 * satisfaction ("late":true). */
    uint64_t late_undecidable;  /* Decisions started or joined by a late
                                 * satisfaction that raised no alert: the
                                 * hosts of that epoch and their history
                                 * are not all known any more, so only an
                                 * alert decides (logged). */
    /* Hostile or broken hosts (docs/tem.md, "Hostile hosts"). */
    uint64_t epoch_refused;     /* Satisfactions and poll replies refused:
                                 * their epoch is outside [now -
                                 * --epoch-past, now + TEM_EPOCH_AHEAD
                                 * epochs]. */
    uint64_t expired_unpolled;  /* Hosts counted expired in a decision
                                 * without a poll: their trigger was
                                 * installed after the epoch. */
    uint64_t host_decisions_full;   /* Satisfactions dropped: their host
                                     * started --host-decisions decisions
                                     * in that loop turn. */
    uint64_t late_queued;       /* Late satisfactions paced: decided in a
                                 * later loop turn than they came. */
    uint64_t late_unpaced;      /* ... decided at once: the queue of
                                 * --late-queue was full. */
    uint64_t seq_errors;        /* Sessions ended: a report number jumped
                                 * by more than --max-seq-gap. */
    /* The caller's loop (tem_core_overrun()). */
    uint64_t overruns;          /* Times it ran its timers late. */
    uint64_t overrun_ns;        /* How late in all... */
    uint64_t overrun_max_ns;    /* ... and at most. */
};

void tem_core_get_stats(const struct tem_core *, struct tem_stats *);

/* Buckets of the detection latency histogram (docs/tem.md, "Metrics"). */
#define TEM_LATENCY_BUCKETS 12

/* Appends the core's metrics in Prometheus text format (docs/tem.md,
 * "Metrics": hosts, events, the counters of tem_stats, the detection
 * latency histogram, per-host and per-event counters) to 'm'. */
struct tem_metrics;
void tem_core_metrics(const struct tem_core *, struct tem_metrics *m);

/* Logs 'format' at 'level' through the core's rate limiter of security
 * events (at most 10 lines a second; the number suppressed is told with
 * the next line), for the caller's refusals of keys and requests. */
void tem_core_log_security(struct tem_core *, enum tpm_log_level,
                           const char *format, ...)
    __attribute__((format(printf, 3, 4)));

#endif /* tem-core.h */
