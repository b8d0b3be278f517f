/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host agent: the host's side of the TPM <-> TEM protocol
 * (lib/tproto.h).  One thread owns one ZeroMQ DEALER socket connected to
 * the TEM; it opens the session with Hello, keeps it alive with
 * heartbeats, reconnects with exponential backoff when the TEM goes away
 * (and says Hello again, so the TEM re-installs this host's triggers),
 * and moves messages between the socket and two bounded queues:
 *
 *   - commands from the TEM (install, remove, poll, configure, and
 *     "resync" when a new session starts) that the host takes with
 *     tpm_agent_recv();
 *   - messages to the TEM (acks, satisfactions, poll replies) that the
 *     host queues with tpm_agent_send_*(), sent in batches.
 *
 * Satisfactions and PollReplies ("reports") outlive a session: the agent
 * keeps each one, in order, in a bounded outage buffer until the TEM
 * confirms it (sessions of protocol version 3, TPROTO_VERSION_CONFIRM),
 * and a new session sends again, flagged late, every one not confirmed.
 * When the buffer is full the oldest report is dropped.  Each report the
 * host gives is, at any time, in exactly one of the status counters
 * 'acked', 'unconfirmed', 'dropped_outage', 'dropped_tenant',
 * 'handed_over' and 'pending' (struct tpm_agent_status).  Acks, nacks and
 * PollBatchReplies (the poll replies of version 3 sessions, which answer
 * a poll of their session only: the TEM would not use them in another)
 * belong to their session: those not sent when it ends are dropped and
 * counted ('drops_out').
 *
 * A satisfaction of a tenant's group (tpm/tenants.h) carries its VNI,
 * and goes only to a TEM of protocol version 4 (TPROTO_VERSION_TENANT) or
 * later; an older TEM would merge it with the untunnelled group of the
 * same 5-tuple, so there it is dropped and counted ('dropped_tenant').
 * Polls of a tenant's group come with its VNI.
 *
 * A host of a cluster of TEMs runs one agent per TEM.  When one TEM's
 * event is taken over by another (the host gets its install from the
 * other's agent), the satisfactions of that event the first agent holds
 * unconfirmed are handed over to the new owner: tpm_agent_hand_over().
 *
 * The host side never blocks: a full queue drops the message and counts
 * it.  The host is whatever owns the monitors: ovs-vswitchd's main thread
 * (ovs-patches/tpm-ovs.c, which relays to the PMDs' rings) or the
 * tpm-replay loop.
 *
 * Thread-safety: tpm_agent_create()/destroy() and the host-side
 * functions are called by one host thread; tpm_agent_get_status() by
 * any thread.
 */
#ifndef TPM_AGENT_H
#define TPM_AGENT_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "packet.h"
#include "tproto.h"

struct tpm_agent_config {
    const char *endpoint;       /* TEM address: "tcp:HOST:PORT",
                                 * "unix:PATH" (OVS style) or ZeroMQ
                                 * "tcp://HOST:PORT", "ipc://PATH". */
    const char *host_id;        /* 1..63 chars [A-Za-z0-9_.:-]. */
    const struct tpm_prefix *prefixes;  /* Served addresses (copied). */
    size_t n_prefixes;
    uint64_t epoch_ns;          /* The monitors' epoch. */
    const uint32_t *pmd_ids;    /* Monitors (copied). */
    size_t n_pmds;
    const char *software;       /* e.g. "ovs-vswitchd 3.1.0" (or NULL). */
    uint32_t queue_size;        /* Entries of each queue, and ZeroMQ
                                 * high-water mark in frames (4096). */
    uint64_t backoff_min_ns;    /* Reconnect backoff (100 ms) ... */
    uint64_t backoff_max_ns;    /* ... doubling up to (5 s). */
    uint64_t batch_ns;          /* Longest wait to fill a batch (0: send
                                 * as soon as the thread wakes); a full
                                 * batch (TPROTO_MAX_BATCH, or the whole
                                 * queue) goes at once. */
    uint64_t hello_timeout_ns;  /* No Welcome or Refuse this long after
                                 * Hello was sent: start over (3 s). */
    uint32_t outage_buffer;     /* Reports kept until the TEM confirms
                                 * them (131072, 1 .. 2^24): over 5 s at
                                 * the 25,600 a second of the TEM
                                 * benchmark's hosts (docs/operations.md,
                                 * "Short TEM outages").  Memory grows
                                 * with use, up to about 128 bytes an
                                 * entry. */

    /* CURVE (lib/curve.h, docs/operations.md "Keys"): the TEM's public
     * key, pinned (40 Z85 characters, or a key file holding it), and this
     * host's key pair file (tem-ctl keygen), whose public key the TEM's
     * allow-list binds to 'host_id'.  The key file is read again for
     * every new connection, so that a rotated key takes effect at the
     * next reconnection.  Both are required unless 'insecure_plaintext'
     * (no authentication, no encryption: anyone can claim this host's id;
     * logged as a warning). */
    const char *tem_public_key;
    const char *key_file;
    bool insecure_plaintext;
};

/* Fills in the defaults noted above ('endpoint', 'host_id' NULL). */
void tpm_agent_config_init(struct tpm_agent_config *);

/* Converts 'endpoint' as accepted in 'struct tpm_agent_config' (also
 * "unix:PATH", OVS style for "ipc://PATH") into ZeroMQ's form, stored
 * in '*zmq_endpointp' (caller frees).  Returns NULL or an error message
 * (caller frees) saying what is wrong with it. */
char *tpm_agent_parse_endpoint(const char *endpoint, char **zmq_endpointp)
    __attribute__((warn_unused_result));

/* Starts the agent thread.  Returns NULL and an error in '*errp' (caller
 * frees) for a bad endpoint, host id, knob out of range, missing or
 * unreadable keys, or a Hello the TEM would reject (tproto_validate():
 * e.g. epoch_ns 0, a prefix with host bits set, duplicate monitor ids). */
struct tpm_agent *tpm_agent_create(const struct tpm_agent_config *,
                                   char **errp);

/* Sends Bye (best effort, bounded by 100 ms), stops the thread, frees
 * everything.  NULL is a no-op. */
void tpm_agent_destroy(struct tpm_agent *);

/* Commands from the TEM. */
enum tpm_agent_cmd_type {
    TPM_AGENT_INSTALL,
    TPM_AGENT_REMOVE,
    TPM_AGENT_POLL,
    TPM_AGENT_POLL_BATCH,       /* Protocol version 3 on: 'n_entries'
                                 * polls of one epoch; answer them all
                                 * with one
                                 * tpm_agent_send_poll_batch_reply(). */
    TPM_AGENT_RESYNC,           /* A new session was welcomed: forget
                                 * every trigger the TEM installed; it
                                 * installs them again. */
    TPM_AGENT_CONFIGURE,        /* Host settings: apply those present,
                                 * then ack (event_id 0) or nack. */
};

struct tpm_agent_cmd {
    enum tpm_agent_cmd_type type;
    uint64_t cookie;            /* Echo it in the ack/nack/poll reply. */
    uint32_t event_id;
    char *name;                 /* INSTALL (owned, see below). */
    char *definition;           /* INSTALL (owned). */
    bool has_threshold;         /* INSTALL: share of a split threshold. */
    double threshold;
    uint64_t epoch;             /* POLL, POLL_BATCH. */
    struct tpm_key group;       /* POLL.  A tenant's group has 'tun' 1 (not
                                 * a slot of any table: the host finds its
                                 * own from the VNI) ... */
    uint32_t tun_id;            /* ... and its VNI here (else 0). */
    size_t n_entries;           /* POLL_BATCH: entry i is ('event_ids[i]', */
    uint32_t *event_ids;        /* 'groups[i]', 'tun_ids[i]': the VNI of a */
    uint32_t *tun_ids;          /* tenant's group, as for POLL) (owned: one
                                 * allocation, 'groups'). */
    struct tpm_key *groups;
    bool has_dos_threshold;     /* CONFIGURE: set the DoS threshold... */
    uint32_t dos_threshold;     /* ...to this many bytes (0: off). */
};

/* Takes the oldest command, if any (never blocks).  Free it with
 * tpm_agent_cmd_free(). */
bool tpm_agent_recv(struct tpm_agent *, struct tpm_agent_cmd *);
void tpm_agent_cmd_free(struct tpm_agent_cmd *);

/* A file descriptor that is readable while commands are queued (for the
 * host's poll loop). */
int tpm_agent_fd(const struct tpm_agent *);

/* Messages to the TEM.  An ack or nack echoes the command's cookie and
 * event id (0 for CONFIGURE).  Each returns false if the message was
 * dropped (and counted): the outgoing queue is full, or, for an ack, nack
 * or PollBatchReply, no session is open (the TEM re-installs and re-polls
 * in the next one).  A satisfaction or PollReply is taken with or without
 * a session (the outage buffer keeps it for the next one); taking it may
 * drop the oldest one kept (see above). */
bool tpm_agent_send_ack(struct tpm_agent *, uint64_t cookie,
                        uint32_t event_id);
bool tpm_agent_send_nack(struct tpm_agent *, uint64_t cookie,
                         uint32_t event_id, const char *reason);
/* A tenant's group has 'group->tun' not 0 (any value) and its VNI in
 * 'tun_id' (ignored otherwise).  It is dropped and counted
 * ('dropped_tenant') unless the last session welcomed was of version
 * TPROTO_VERSION_TENANT or later (tpm_agent_sends_tenants()), and also if
 * kept over an outage for a session that turns out older. */
bool tpm_agent_send_satisfaction(struct tpm_agent *, uint32_t event_id,
                                 uint64_t epoch, const struct tpm_key *group,
                                 uint32_t tun_id, double value,
                                 uint32_t flags, uint32_t n_parts,
                                 uint32_t n_missing);

/* True if the TEM takes tenants' groups: the session open, or else the
 * last one, is of version TPROTO_VERSION_TENANT or later (false before
 * the first Welcome).  Hosts check it to count their own drops. */
bool tpm_agent_sends_tenants(struct tpm_agent *);
bool tpm_agent_send_poll_reply(struct tpm_agent *, uint64_t cookie,
                               uint32_t event_id, uint64_t epoch,
                               Trumpet__PollStatus status, double value);

/* The answers to a POLL_BATCH: 'status[i]' (a Trumpet__PollStatus) and
 * 'values[i]' (0 where the status has none) answer its entry i. */
bool tpm_agent_send_poll_batch_reply(struct tpm_agent *, uint64_t cookie,
                                     uint64_t epoch, const uint8_t *status,
                                     const double *values, size_t n);

/* Handing over to another TEM (a cluster's takeover).  With 'on', the
 * satisfactions of event 'event_id' this agent holds unconfirmed leave
 * its outage buffer (counted 'handed_over') for the host to send to the
 * event's new owner: those not sent in the current session at once, and
 * those awaiting its TEM's confirmation once it has none left to
 * confirm (its TEM, if alive, confirmed them) or the session ends.  The
 * host takes them with tpm_agent_take_handed() and gives each to the new
 * owner's agent with tpm_agent_send_handed().  Without 'on' (the event
 * came back to this agent's TEM), a hand-over not yet done is called
 * off.  Host thread. */
void tpm_agent_hand_over(struct tpm_agent *, uint32_t event_id, bool on);

/* A satisfaction handed over. */
struct tpm_agent_report {
    uint32_t event_id;
    uint64_t epoch;
    struct tpm_key group;
    uint32_t tun_id;
    double value;
    uint32_t flags, n_parts, n_missing;
};

/* Takes up to 'max' satisfactions handed over, oldest first, into
 * 'reports'; returns how many.  tpm_agent_fd() becomes readable when
 * there are some: a host that hands over calls this whenever it is
 * readable (after tpm_agent_recv()). */
size_t tpm_agent_take_handed(struct tpm_agent *,
                             struct tpm_agent_report *reports, size_t max);

/* Gives a satisfaction handed over by another agent to this one's TEM:
 * as tpm_agent_send_satisfaction(), and always flagged late. */
bool tpm_agent_send_handed(struct tpm_agent *,
                           const struct tpm_agent_report *);

/* The host's monitors changed: the agent says Hello again, naming
 * 'pmd_ids' (the TEM starts a new session and installs its events
 * again), as the same run: what the current session leaves unconfirmed
 * is sent again in the next, as after an outage (the outage buffer is
 * kept, where a new agent would start empty).  Host thread. */
void tpm_agent_set_pmds(struct tpm_agent *, const uint32_t *pmd_ids,
                        size_t n);

/* The host's monitor counters (all its monitors summed) that the next
 * heartbeats carry to the TEM, for its metrics.  Cheap: call it about
 * once a heartbeat period. */
void tpm_agent_set_counters(struct tpm_agent *,
                            const struct tproto_host_counters *);

enum tpm_agent_state {
    TPM_AGENT_CONNECTING,       /* Hello sent, no answer yet. */
    TPM_AGENT_CONNECTED,        /* Welcomed. */
    TPM_AGENT_BACKOFF,          /* Waiting before reconnecting. */
    TPM_AGENT_REFUSED,          /* The TEM refused us (see last_error);
                                 * retrying with backoff. */
};

const char *tpm_agent_state_name(enum tpm_agent_state);

struct tpm_agent_status {
    enum tpm_agent_state state;
    char endpoint[256];         /* As ZeroMQ sees it. */
    char host_id[TPROTO_MAX_ID + 1];
    char tem_id[TPROTO_MAX_ID + 1];
    uint32_t version;           /* Negotiated (0 before Welcome). */
    uint64_t sessions;          /* Welcomes received. */
    uint64_t reconnects;
    uint64_t frames_in, frames_out;
    uint64_t msgs_in, msgs_out;
    uint64_t invalid_in;        /* Frames or messages dropped as invalid. */
    uint64_t drops_in;          /* Commands dropped: host queue full, or
                                 * still queued from a session that
                                 * ended when a new one began (RESYNC
                                 * supersedes them). */
    uint64_t drops_out;         /* Acks, nacks and PollBatchReplies
                                 * dropped: queue full, or no session
                                 * (given without one, or not sent when
                                 * it ended). */

    /* Reports (satisfactions and PollReplies).  reports = acked +
     * unconfirmed + dropped_outage + dropped_tenant + handed_over +
     * pending at all times. */
    uint64_t reports;           /* Given by the host. */
    uint64_t acked;             /* Confirmed by the TEM (received). */
    uint64_t unconfirmed;       /* Sent, but the TEM cannot confirm: a
                                 * session older than version 3, or the
                                 * session ended before the TEM confirmed
                                 * and the buffer dropped it before the
                                 * next (the TEM may have it or not). */
    uint64_t dropped_outage;    /* Never sent: dropped, oldest first, from
                                 * the full outage buffer, or refused by
                                 * a full outgoing queue. */
    uint64_t dropped_tenant;    /* Never sent: a tenant's satisfaction
                                 * given, or kept, for a TEM of a version
                                 * older than 4. */
    uint64_t handed_over;       /* Satisfactions handed over to another
                                 * TEM's agent (tpm_agent_hand_over()). */
    uint64_t pending;           /* Not sent yet, or sent and not yet
                                 * confirmed. */
    uint64_t late_sent;         /* Sends flagged late: in a later session
                                 * than the report was made in (a report
                                 * sent again twice counts twice). */
    uint64_t last_rx_ns;        /* Wall clock of the last message in. */
    char last_error[256];       /* Empty if none. */
    uint64_t last_error_ns;
};

void tpm_agent_get_status(struct tpm_agent *, struct tpm_agent_status *);

#endif /* agent.h */
