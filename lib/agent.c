/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host agent (agent.h): one thread, one ZeroMQ context, one DEALER
 * socket at a time.
 *
 * The host and the agent thread share two bounded rings under one mutex:
 * 'cmds' (TEM -> host) and 'out' (host -> TEM).  An eventfd, 'cmd_fd', is
 * readable while 'cmds' is not empty (written when the ring turns
 * non-empty, read back when the host takes the last command).  Another,
 * 'wake_fd', wakes the agent thread (polled next to the socket with
 * zmq_poll()) when 'out' turns non-empty and at shutdown.
 *
 * The agent thread runs a small state machine per socket ("session"):
 *
 *   - no socket: waiting for the backoff to pass (BACKOFF or REFUSED);
 *   - socket open, Hello not yet sent: ZMQ_IMMEDIATE keeps the socket
 *     unwritable until the TCP (or IPC) connection is up, so Hello goes
 *     out as soon as there is a peer to take it (CONNECTING);
 *   - Hello sent: waiting for Welcome or Refuse, at most
 *     'hello_timeout_ns' (CONNECTING);
 *   - welcomed (CONNECTED): relaying, heartbeats every 'heartbeat_ms',
 *     and the session ends when nothing arrived for 3 heartbeats.
 *
 * Ending a session closes the socket (a short linger lets a parting Bye
 * out), drops and counts the acks, nacks and PollBatchReplies not sent,
 * and waits for the backoff (doubling from the minimum to the maximum,
 * back to the minimum on Welcome) before a new socket says Hello again.
 *
 * Outgoing messages.  The agent thread moves what the host queued in
 * 'out' into two queues of its own: 'ctl' (acks, nacks and
 * PollBatchReplies, for the current session only) and 'rtx', the outage
 * buffer (satisfactions and PollReplies, "reports"), and sends from
 * those.  A PollBatchReply (version 3's answer to a poll) is not kept
 * over an outage: it answers a PollBatch of its session, which the TEM
 * forgets when the session ends (the decision counts the host missing),
 * so that sent in a later session it would only be counted stale; like
 * an ack it is sent in its session or dropped and counted.
 *
 * A report gets its sequence number as it enters 'rtx', whose entries are
 * therefore consecutive; in a session of version 3 it stays there once
 * sent until the TEM's Heartbeat.received covers it, and a new session
 * sends again from the oldest.  So the reports of 'rtx' are, from the
 * oldest: sent in this session and awaiting confirmation ('n_sent' of
 * them), then not sent in this session (some perhaps in an earlier one).
 *
 * A full 'rtx' drops its oldest report to make room.  One awaiting
 * confirmation in this session is not lost yet: its sequence number joins
 * the range ['evict_lo', 'evict_hi'] (consecutive, since only the oldest
 * is dropped, and always older than every entry left), which the TEM's
 * next confirmations count as acked and the end of the session as
 * unconfirmed.  So every report is counted exactly once (agent.h).
 *
 * Tenants (protocol version 4).  A satisfaction of a tenant's group goes
 * only to a TEM of version TPROTO_VERSION_TENANT or later: an older one
 * would take it for the untunnelled group of the same 5-tuple.  Whether
 * the TEM takes them is known at Welcome ('tenant_ok', kept after the
 * session ends: the next TEM is most likely the same).  A tenant's report
 * given or drained while it is false never enters 'rtx'; and a Welcome of
 * an older version removes those 'rtx' holds from it (at that point none
 * is sent in the session and no sequence number awaits confirmation).
 * Their sequence numbers then leave holes in 'rtx', which the counting of
 * ['evict_lo', 'evict_hi'] skips ('holes': sorted, dropped once older
 * than every report left).  Each is counted 'dropped_tenant', or
 * 'unconfirmed' if an earlier session sent it.
 */
#include "agent.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>
#include <zmq.h>

#include "clock.h"
#include "curve.h"
#include "tpm-log.h"
#include "util.h"

/* Frames read, and frames sent from the outgoing ring, per wakeup of the
 * agent thread, so that neither direction starves the other. */
#define AGENT_RX_BURST 64
#define AGENT_TX_BURST 16

/* Encoded size above which a batch is cut short of TPROTO_MAX_BATCH so
 * that frames stay well below TPROTO_MAX_FRAME. */
#define AGENT_FRAME_BUDGET (TPROTO_MAX_FRAME / 2)

/* Misses before the TEM is considered gone. */
#define AGENT_HEARTBEAT_MISSES 3

/* Linger of closed sockets, so that a Bye sent just before closing gets
 * out (agent.h promises a 100 ms bound at shutdown).  A dead peer holds
 * nothing: ZMQ_IMMEDIATE queues only on live connections. */
#define AGENT_LINGER_MS 100

/* Rate limit of per-message log lines: at most this many per window. */
#define AGENT_LOG_BURST 5
#define AGENT_LOG_WINDOW_NS (5 * UINT64_C(1000000000))

#define MS UINT64_C(1000000)

/* Entries of the outage buffer allocated at first (it grows by
 * doubling, up to 'outage_buffer'). */
#define AGENT_RTX_MIN 256

/* A message for the TEM, as queued by the host. */
struct agent_out {
    Trumpet__Message__BodyCase type;    /* ACK, NACK, SATISFACTION,
                                         * POLL_REPLY or
                                         * POLL_BATCH_REPLY. */
    uint64_t cookie;
    uint32_t event_id;
    uint64_t epoch;
    double value;
    uint32_t flags, n_parts, n_missing;
    Trumpet__PollStatus status;
    char *reason;                       /* NACK (owned). */
    struct tpm_key group;               /* SATISFACTION. */
    uint32_t tun_id;                    /* SATISFACTION of a tenant's group
                                         * ('group.tun' not 0): its VNI. */
    double *values;                     /* POLL_BATCH_REPLY: 'n_values'
                                         * values, then as many status
                                         * bytes ('statuses'), one
                                         * allocation (owned). */
    uint8_t *statuses;
    size_t n_values;
    uint64_t session;                   /* Reports: the session open when
                                         * the host gave it (its number,
                                         * 'status.sessions'), 0: none. */
    bool late;                          /* Handed over by another agent:
                                         * always sent flagged late. */
    uint64_t seq;                       /* Reports, once in 'rtx'. */
    bool sent;                          /* Sent in some session. */
};

/* A queue of the agent thread: a ring that grows up to 'max' entries. */
struct agent_ring {
    struct agent_out *e;
    uint32_t cap, max;
    uint32_t head, n;
};

struct agent_ratelimit {
    uint64_t window_start;
    unsigned int n;
    uint64_t suppressed;
};

/* The agent thread's view of the current socket. */
struct agent_session {
    void *sock;                 /* NULL: none (backoff). */
    bool hello_sent;
    bool welcomed;
    bool unreachable_logged;
    uint64_t opened_ns;         /* CLOCK_MONOTONIC. */
    uint64_t hello_ns;
    uint64_t last_rx_ns;
    uint64_t next_hb_ns;
    uint64_t hb_ns;             /* From Welcome. */
    uint64_t hb_seq;
    uint32_t version;           /* Negotiated, 0 before Welcome. */
    uint64_t number;            /* 'status.sessions' once welcomed. */
};

struct tpm_agent {
    /* Configuration (immutable after creation, but 'pmd_ids', the agent
     * thread's: tpm_agent_set_pmds()). */
    char *endpoint;             /* ZeroMQ form. */
    char *host_id;
    struct tpm_prefix *prefixes;
    size_t n_prefixes;
    uint64_t epoch_ns;
    uint32_t *pmd_ids;
    size_t n_pmds;
    char *software;
    uint32_t queue_size;
    uint64_t backoff_min_ns, backoff_max_ns;
    uint64_t batch_ns;
    uint64_t hello_timeout_ns;
    char tem_key[TPM_CURVE_KEY_LEN + 1];    /* "": insecure plaintext. */
    char *key_file;
    uint64_t instance;          /* This run, for Hello.instance. */

    void *zctx;
    pthread_t thread;
    atomic_bool exiting;
    int cmd_fd;                 /* Readable while 'cmds' is not empty. */
    int wake_fd;                /* Wakes the agent thread. */

    /* Agent thread only. */
    struct agent_session s;
    struct tproto_batch batch;
    uint64_t backoff_ns;        /* Next backoff. */
    uint64_t retry_ns;          /* Open a new socket at this time. */
    uint64_t n_sockets;
    struct agent_ratelimit rl_thread;
    struct agent_ring ctl;      /* Acks and nacks of this session. */
    struct agent_ring rtx;      /* The outage buffer (see above). */
    uint32_t n_sent;            /* Oldest 'rtx' entries sent in this
                                 * session, awaiting confirmation. */
    uint64_t next_seq;          /* Of the next report entering 'rtx'. */
    uint64_t evict_lo, evict_hi;    /* Dropped from 'rtx' while awaiting
                                     * confirmation (none: lo > hi). */
    uint64_t *holes;            /* Sequence numbers of tenants' reports
                                 * removed from 'rtx' (ascending). */
    size_t n_holes, allocated_holes;
    uint64_t unsent_ns;         /* When 'ctl' or 'rtx' last got unsent
                                 * entries with none before. */

    /* Shared, under 'mutex'. */
    pthread_mutex_t mutex;
    struct tproto_host_counters counters;  /* For heartbeats... */
    bool has_counters;                  /* ...once the host gave them. */
    struct tpm_agent_cmd *cmds;         /* Ring of 'queue_size'. */
    uint32_t cmd_head, cmd_n;
    struct agent_out *out;              /* Ring of 'queue_size'. */
    uint32_t out_head, out_n;
    uint64_t out_first_ns;      /* When 'out' last turned non-empty. */
    bool connected;             /* Acks and nacks are accepted. */
    bool tenant_ok;             /* The last session welcomed takes
                                 * tenants' groups (version 4 on). */
    uint32_t *new_pmd_ids;      /* tpm_agent_set_pmds()'s, until the agent
                                 * thread takes them, or NULL. */
    size_t n_new_pmds;
    uint32_t *handover;         /* Events being handed over
                                 * (tpm_agent_hand_over()). */
    size_t n_handover, allocated_handover;
    struct agent_out *handed;   /* Satisfactions taken out of 'rtx' for
                                 * the host (tpm_agent_take_handed()),
                                 * oldest first. */
    size_t n_handed, allocated_handed;
    struct agent_ratelimit rl_host;
    struct tpm_agent_status status;
};

static void agent_session_end(struct tpm_agent *, enum tpm_agent_state,
                              const char *format, ...)
    __attribute__((format(printf, 3, 4)));

void
tpm_agent_config_init(struct tpm_agent_config *c)
{
    memset(c, 0, sizeof *c);
    c->queue_size = 4096;
    c->backoff_min_ns = 100 * MS;
    c->backoff_max_ns = 5000 * MS;
    c->batch_ns = 0;
    c->hello_timeout_ns = 3000 * MS;
    c->outage_buffer = 131072;
}

const char *
tpm_agent_state_name(enum tpm_agent_state state)
{
    switch (state) {
    case TPM_AGENT_CONNECTING: return "connecting";
    case TPM_AGENT_CONNECTED: return "connected";
    case TPM_AGENT_BACKOFF: return "backoff";
    case TPM_AGENT_REFUSED: return "refused";
    default: return "unknown";
    }
}

/* Returns true if 'rl' allows one more log line now.  Counts the lines it
 * suppresses; '*suppressedp' gets how many were suppressed before this
 * one (to mention them). */
static bool
agent_ratelimit_allow(struct agent_ratelimit *rl, uint64_t *suppressedp)
{
    uint64_t now = tpm_clock_mono_ns();
    if (now - rl->window_start >= AGENT_LOG_WINDOW_NS) {
        rl->window_start = now;
        rl->n = 0;
    }
    if (rl->n >= AGENT_LOG_BURST) {
        rl->suppressed++;
        return false;
    }
    rl->n++;
    *suppressedp = rl->suppressed;
    rl->suppressed = 0;
    return true;
}

/* Formats " (N similar messages suppressed)" into 'buf', or "" if 'n' is
 * 0. */
static const char *
agent_suppressed(uint64_t n, char *buf, size_t size)
{
    if (!n) {
        return "";
    }
    snprintf(buf, size, " (%"PRIu64" similar messages suppressed)", n);
    return buf;
}

static bool
agent_host_id_valid(const char *id)
{
    size_t len = strlen(id);
    if (!len || len > TPROTO_MAX_ID) {
        return false;
    }
    return strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                  "0123456789_.:-") == len;
}

char *
tpm_agent_parse_endpoint(const char *endpoint, char **zmq_endpointp)
{
    *zmq_endpointp = NULL;
    if (!endpoint || !*endpoint) {
        return xstrdup("no TEM endpoint given (expected tcp:HOST:PORT, "
                       "unix:PATH, tcp://HOST:PORT or ipc://PATH)");
    }
    if (!strncmp(endpoint, "tcp://", 6) || !strncmp(endpoint, "ipc://", 6)) {
        if (!endpoint[6]) {
            return xasprintf("TEM endpoint '%s': address missing after "
                             "'%.6s'", endpoint, endpoint);
        }
        *zmq_endpointp = xstrdup(endpoint);
        return NULL;
    }
    if (!strncmp(endpoint, "unix:", 5)) {
        if (!endpoint[5]) {
            return xasprintf("TEM endpoint '%s': path missing after "
                             "'unix:'", endpoint);
        }
        *zmq_endpointp = xasprintf("ipc://%s", endpoint + 5);
        return NULL;
    }
    if (!strncmp(endpoint, "tcp:", 4)) {
        const char *hostport = endpoint + 4;
        const char *colon = strrchr(hostport, ':');
        if (!colon || colon == hostport) {
            return xasprintf("TEM endpoint '%s': expected tcp:HOST:PORT",
                             endpoint);
        }
        if (hostport[0] == '[' && colon[-1] != ']') {
            return xasprintf("TEM endpoint '%s': IPv6 address must be "
                             "written [ADDRESS]:PORT", endpoint);
        }
        const char *port = colon + 1;
        char *end;
        errno = 0;
        unsigned long p = strtoul(port, &end, 10);
        if (!*port || *end || errno || p < 1 || p > 65535
            || port[0] == '+' || port[0] == '-') {
            return xasprintf("TEM endpoint '%s': port '%s' is not a number "
                             "in [1, 65535]", endpoint, port);
        }
        *zmq_endpointp = xasprintf("tcp://%s", hostport);
        return NULL;
    }
    return xasprintf("TEM endpoint '%s' not understood (expected "
                     "tcp:HOST:PORT, unix:PATH, tcp://HOST:PORT or "
                     "ipc://PATH)", endpoint);
}

/* Reads the keys of 'c' into 'tem_key' and 'pub'/'sec'.  Returns NULL
 * or an error. */
static char *
agent_read_keys(const char *tem_public_key, const char *key_file,
                char tem_key[TPM_CURVE_KEY_LEN + 1],
                char pub[TPM_CURVE_KEY_LEN + 1],
                char sec[TPM_CURVE_KEY_LEN + 1])
{
    if (!tem_public_key || !key_file) {
        return xstrdup("no CURVE keys: the TEM's public key and this "
                       "host's key file are needed (or, insecure, "
                       "plaintext asked for explicitly)");
    }
    if (!tpm_curve_available()) {
        return xstrdup("this libzmq has no CURVE support (it needs "
                       "libsodium)");
    }
    char *error = tpm_curve_public_arg(tem_public_key, tem_key);
    if (error) {
        char *e = xasprintf("the TEM's public key: %s", error);
        free(error);
        return e;
    }
    return tpm_curve_read_file(key_file, pub, sec);
}

/* Checks the parts of 'c' that agent.h constrains.  Returns NULL or an
 * error message. */
static char *
agent_config_check(const struct tpm_agent_config *c)
{
    if (!c->insecure_plaintext) {
        char tem[TPM_CURVE_KEY_LEN + 1], pub[TPM_CURVE_KEY_LEN + 1];
        char sec[TPM_CURVE_KEY_LEN + 1];
        char *error = agent_read_keys(c->tem_public_key, c->key_file, tem,
                                      pub, sec);
        memset(sec, 0, sizeof sec);
        if (error) {
            return error;
        }
    }
    if (!c->host_id || !agent_host_id_valid(c->host_id)) {
        return xasprintf("host id '%s' is not 1 to %d characters from "
                         "[A-Za-z0-9_.:-]", c->host_id ? c->host_id : "",
                         TPROTO_MAX_ID);
    }
    if (c->n_prefixes > TPROTO_MAX_PREFIXES) {
        return xasprintf("%zu prefixes, at most %d allowed",
                         c->n_prefixes, TPROTO_MAX_PREFIXES);
    }
    if (c->n_pmds > TPROTO_MAX_PMDS) {
        return xasprintf("%zu monitors, at most %d allowed", c->n_pmds,
                         TPROTO_MAX_PMDS);
    }
    if (c->queue_size < 1 || c->queue_size > (1u << 24)) {
        return xasprintf("queue_size=%"PRIu32" is out of range [1, %u]",
                         c->queue_size, 1u << 24);
    }
    if (c->backoff_min_ns < MS || c->backoff_min_ns > c->backoff_max_ns) {
        return xasprintf("backoff %"PRIu64" ns .. %"PRIu64" ns: the minimum "
                         "must be at least 1 ms and at most the maximum",
                         c->backoff_min_ns, c->backoff_max_ns);
    }
    if (c->backoff_max_ns > 3600000 * MS) {
        return xasprintf("backoff maximum %"PRIu64" ns exceeds one hour",
                         c->backoff_max_ns);
    }
    if (c->batch_ns > 1000 * MS) {
        return xasprintf("batch time %"PRIu64" ns exceeds one second",
                         c->batch_ns);
    }
    if (c->hello_timeout_ns < MS || c->hello_timeout_ns > 3600000 * MS) {
        return xasprintf("hello timeout %"PRIu64" ns is out of range "
                         "[1 ms, 1 h]", c->hello_timeout_ns);
    }
    if (c->outage_buffer < 1 || c->outage_buffer > (1u << 24)) {
        return xasprintf("outage_buffer=%"PRIu32" is out of range [1, %u]",
                         c->outage_buffer, 1u << 24);
    }

    /* The TEM validates Hello with the same code: check it here so that a
     * bad prefix or software string is an error now, not a refusal
     * later. */
    struct tproto_batch b;
    tproto_batch_init(&b);
    tproto_add_hello(&b, c->host_id, c->prefixes, c->n_prefixes,
                     c->epoch_ns, tpm_clock_real_ns(), c->pmd_ids, c->n_pmds,
                     c->software);
    const char *why = tproto_validate(b.msgs[0]);
    char *error = why ? xasprintf("invalid hello: %s", why) : NULL;
    tproto_batch_destroy(&b);
    return error;
}

/* Sets the status's last error (caller holds the mutex). */
static void
agent_set_error__(struct tpm_agent *a, const char *msg)
{
    snprintf(a->status.last_error, sizeof a->status.last_error, "%s", msg);
    a->status.last_error_ns = tpm_clock_real_ns();
}

/* Records a dropped invalid frame or message: counted, last_error set,
 * logged rate-limited. */
static void
agent_invalid(struct tpm_agent *a, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

static void
agent_invalid(struct tpm_agent *a, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *msg = xvasprintf(format, args);
    va_end(args);

    pthread_mutex_lock(&a->mutex);
    a->status.invalid_in++;
    agent_set_error__(a, msg);
    pthread_mutex_unlock(&a->mutex);

    uint64_t suppressed;
    char buf[64];
    if (agent_ratelimit_allow(&a->rl_thread, &suppressed)) {
        tpm_log(TPM_LOG_WARN, "agent %s: %s (dropped)%s", a->host_id, msg,
                agent_suppressed(suppressed, buf, sizeof buf));
    }
    free(msg);
}

/* Command ring (caller holds the mutex). */

static void
agent_cmd_push__(struct tpm_agent *a, const struct tpm_agent_cmd *cmd)
{
    uint32_t tail = (a->cmd_head + a->cmd_n) % a->queue_size;
    a->cmds[tail] = *cmd;
    if (!a->cmd_n++) {
        uint64_t one = 1;
        if (write(a->cmd_fd, &one, sizeof one) < 0 && errno != EAGAIN) {
            tpm_log(TPM_LOG_ERR, "agent: eventfd write: %s",
                    strerror(errno));
        }
    }
}

static void
agent_fd_drain(int fd)
{
    uint64_t count;
    if (read(fd, &count, sizeof count) < 0 && errno != EAGAIN) {
        tpm_log(TPM_LOG_ERR, "agent: eventfd read: %s", strerror(errno));
    }
}

/* Queues 'cmd' for the host (the queue takes its strings), or drops and
 * counts it if the queue is full. */
static void
agent_cmd_queue(struct tpm_agent *a, struct tpm_agent_cmd *cmd)
{
    bool full;

    pthread_mutex_lock(&a->mutex);
    full = a->cmd_n >= a->queue_size;
    if (full) {
        a->status.drops_in++;
        agent_set_error__(a, "command queue full: command from the TEM "
                          "dropped");
    } else {
        agent_cmd_push__(a, cmd);
    }
    pthread_mutex_unlock(&a->mutex);

    if (full) {
        uint64_t suppressed;
        char buf[64];
        if (agent_ratelimit_allow(&a->rl_thread, &suppressed)) {
            tpm_log(TPM_LOG_WARN, "agent %s: command queue full (%"PRIu32
                    " entries): command for event %"PRIu32" dropped%s",
                    a->host_id, a->queue_size, cmd->event_id,
                    agent_suppressed(suppressed, buf, sizeof buf));
        }
        tpm_agent_cmd_free(cmd);
    }
}

/* A new session was welcomed: commands still queued from an older one
 * are superseded (counted in drops_in) and RESYNC goes first. */
static void
agent_cmd_resync(struct tpm_agent *a)
{
    pthread_mutex_lock(&a->mutex);
    uint32_t n = a->cmd_n;
    for (uint32_t i = 0; i < n; i++) {
        tpm_agent_cmd_free(&a->cmds[(a->cmd_head + i) % a->queue_size]);
    }
    a->status.drops_in += n;
    a->cmd_head = 0;
    a->cmd_n = 0;
    if (n) {
        agent_fd_drain(a->cmd_fd);
    }
    struct tpm_agent_cmd cmd = { .type = TPM_AGENT_RESYNC };
    agent_cmd_push__(a, &cmd);
    pthread_mutex_unlock(&a->mutex);

    if (n) {
        tpm_log(TPM_LOG_WARN, "agent %s: %"PRIu32" commands of the previous "
                "session were never taken by the host; dropped", a->host_id,
                n);
    }
}

bool
tpm_agent_recv(struct tpm_agent *a, struct tpm_agent_cmd *cmd)
{
    bool got;

    pthread_mutex_lock(&a->mutex);
    got = a->cmd_n > 0;
    if (got) {
        *cmd = a->cmds[a->cmd_head];
        memset(&a->cmds[a->cmd_head], 0, sizeof a->cmds[a->cmd_head]);
        a->cmd_head = (a->cmd_head + 1) % a->queue_size;
        if (!--a->cmd_n) {
            agent_fd_drain(a->cmd_fd);
        }
    }
    pthread_mutex_unlock(&a->mutex);
    return got;
}

void
tpm_agent_cmd_free(struct tpm_agent_cmd *cmd)
{
    if (cmd) {
        free(cmd->name);
        free(cmd->definition);
        free(cmd->groups);
        cmd->name = NULL;
        cmd->definition = NULL;
        cmd->event_ids = NULL;
        cmd->tun_ids = NULL;
        cmd->groups = NULL;
        cmd->n_entries = 0;
    }
}

int
tpm_agent_fd(const struct tpm_agent *a)
{
    return a->cmd_fd;
}

/* Outgoing ring. */

/* Number of queued messages that make a batch go without waiting for
 * 'batch_ns'. */
static uint32_t
agent_batch_full(const struct tpm_agent *a)
{
    return MIN(TPROTO_MAX_BATCH, a->queue_size);
}

static bool
agent_is_report(Trumpet__Message__BodyCase type)
{
    return (type == TRUMPET__MESSAGE__BODY_SATISFACTION
            || type == TRUMPET__MESSAGE__BODY_POLL_REPLY);
}

/* True if 'm' is a satisfaction of a tenant's group. */
static bool
agent_out_is_tenant(const struct agent_out *m)
{
    return m->type == TRUMPET__MESSAGE__BODY_SATISFACTION && m->group.tun;
}

/* Host side: queues 'm' (taking its 'reason'), or drops and counts it. */
static bool
agent_out_push(struct tpm_agent *a, struct agent_out *m)
{
    bool report = agent_is_report(m->type);
    bool wake = false, full = false, ok;
    uint64_t suppressed = 0;
    bool log = false;

    pthread_mutex_lock(&a->mutex);
    if (report) {
        a->status.reports++;
        m->session = a->connected && !m->late ? a->status.sessions : 0;
    }
    if (!report && !a->connected) {
        a->status.drops_out++;
        ok = false;
    } else if (agent_out_is_tenant(m) && !a->tenant_ok) {
        a->status.dropped_tenant++;
        ok = false;
    } else if (a->out_n >= a->queue_size) {
        if (report) {
            a->status.dropped_outage++;
        } else {
            a->status.drops_out++;
        }
        full = true;
        ok = false;
        log = agent_ratelimit_allow(&a->rl_host, &suppressed);
    } else {
        uint32_t tail = (a->out_head + a->out_n) % a->queue_size;
        a->out[tail] = *m;
        a->status.pending += report;
        if (!a->out_n++) {
            a->out_first_ns = tpm_clock_mono_ns();
            wake = true;
        } else if ((a->out_n == agent_batch_full(a) && a->batch_ns)
                   || a->out_n == a->queue_size / 2) {
            /* Do not wait for the batch timer; without a session, let
             * the agent thread move them to the outage buffer before the
             * queue fills. */
            wake = true;
        }
        ok = true;
    }
    pthread_mutex_unlock(&a->mutex);

    if (!ok) {
        free(m->reason);
    }
    if (full && log) {
        char buf[64];
        tpm_log(TPM_LOG_WARN, "agent %s: outgoing queue full (%"PRIu32
                " entries): %s for event %"PRIu32" dropped%s", a->host_id,
                a->queue_size, tproto_body_name(m->type), m->event_id,
                agent_suppressed(suppressed, buf, sizeof buf));
    }
    if (wake) {
        uint64_t one = 1;
        if (write(a->wake_fd, &one, sizeof one) < 0 && errno != EAGAIN) {
            tpm_log(TPM_LOG_ERR, "agent: eventfd write: %s",
                    strerror(errno));
        }
    }
    return ok;
}

bool
tpm_agent_send_ack(struct tpm_agent *a, uint64_t cookie, uint32_t event_id)
{
    struct agent_out m = {
        .type = TRUMPET__MESSAGE__BODY_ACK,
        .cookie = cookie,
        .event_id = event_id,
    };
    return agent_out_push(a, &m);
}

bool
tpm_agent_send_nack(struct tpm_agent *a, uint64_t cookie, uint32_t event_id,
                    const char *reason)
{
    /* Keep the reason within what the TEM accepts, on a character
     * boundary of UTF-8. */
    if (!reason || !*reason) {
        reason = "refused by the host";
    }
    size_t len = strlen(reason);
    if (len > TPROTO_MAX_REASON) {
        len = TPROTO_MAX_REASON;
        while (len && (reason[len] & 0xc0) == 0x80) {
            len--;
        }
    }
    struct agent_out m = {
        .type = TRUMPET__MESSAGE__BODY_NACK,
        .cookie = cookie,
        .event_id = event_id,
        .reason = xstrndup(reason, len),
    };
    return agent_out_push(a, &m);
}

bool
tpm_agent_send_satisfaction(struct tpm_agent *a, uint32_t event_id,
                            uint64_t epoch, const struct tpm_key *group,
                            uint32_t tun_id, double value, uint32_t flags,
                            uint32_t n_parts, uint32_t n_missing)
{
    struct agent_out m = {
        .type = TRUMPET__MESSAGE__BODY_SATISFACTION,
        .event_id = event_id,
        .epoch = epoch,
        .group = *group,
        .tun_id = group->tun ? tun_id : 0,
        .value = value,
        .flags = flags,
        .n_parts = n_parts,
        .n_missing = n_missing,
    };
    return agent_out_push(a, &m);
}

bool
tpm_agent_send_handed(struct tpm_agent *a, const struct tpm_agent_report *r)
{
    struct agent_out m = {
        .type = TRUMPET__MESSAGE__BODY_SATISFACTION,
        .event_id = r->event_id,
        .epoch = r->epoch,
        .group = r->group,
        .tun_id = r->group.tun ? r->tun_id : 0,
        .value = r->value,
        .flags = r->flags,
        .n_parts = r->n_parts,
        .n_missing = r->n_missing,
        .late = true,
    };
    return agent_out_push(a, &m);
}

bool
tpm_agent_sends_tenants(struct tpm_agent *a)
{
    pthread_mutex_lock(&a->mutex);
    bool ok = a->tenant_ok;
    pthread_mutex_unlock(&a->mutex);
    return ok;
}

void
tpm_agent_set_counters(struct tpm_agent *a,
                       const struct tproto_host_counters *c)
{
    pthread_mutex_lock(&a->mutex);
    a->counters = *c;
    a->has_counters = true;
    pthread_mutex_unlock(&a->mutex);
}

bool
tpm_agent_send_poll_reply(struct tpm_agent *a, uint64_t cookie,
                          uint32_t event_id, uint64_t epoch,
                          Trumpet__PollStatus status, double value)
{
    struct agent_out m = {
        .type = TRUMPET__MESSAGE__BODY_POLL_REPLY,
        .cookie = cookie,
        .event_id = event_id,
        .epoch = epoch,
        .status = status,
        .value = value,
    };
    return agent_out_push(a, &m);
}

bool
tpm_agent_send_poll_batch_reply(struct tpm_agent *a, uint64_t cookie,
                                uint64_t epoch, const uint8_t *status,
                                const double *values, size_t n)
{
    size_t vbytes = n * sizeof *values;
    struct agent_out m = {
        .type = TRUMPET__MESSAGE__BODY_POLL_BATCH_REPLY,
        .cookie = cookie,
        .epoch = epoch,
        .values = xmalloc(vbytes + n),
        .n_values = n,
    };
    memcpy(m.values, values, vbytes);
    m.statuses = (uint8_t *) m.values + vbytes;
    memcpy(m.statuses, status, n);
    bool ok = agent_out_push(a, &m);
    if (!ok) {
        free(m.values);
    }
    return ok;
}

/* Appends 'm' to 'b'; a report with its sequence number and late flag if
 * 'seq' (sessions of version 3). */
static void
agent_out_add(struct tproto_batch *b, const struct agent_out *m, bool seq,
              bool late)
{
    switch (m->type) {
    case TRUMPET__MESSAGE__BODY_ACK:
        tproto_add_ack(b, m->cookie, m->event_id);
        break;
    case TRUMPET__MESSAGE__BODY_NACK:
        tproto_add_nack(b, m->cookie, m->event_id, m->reason);
        break;
    case TRUMPET__MESSAGE__BODY_SATISFACTION:
        tproto_add_satisfaction(b, m->event_id, m->epoch, &m->group,
                                m->value, m->flags, m->n_parts,
                                m->n_missing);
        if (m->group.tun) {
            tproto_set_tun_id(b, m->tun_id);
        }
        break;
    case TRUMPET__MESSAGE__BODY_POLL_REPLY:
        tproto_add_poll_reply(b, m->cookie, m->event_id, m->epoch,
                              m->status, m->value);
        break;
    case TRUMPET__MESSAGE__BODY_POLL_BATCH_REPLY:
        tproto_add_poll_batch_reply(b, m->cookie, m->epoch, m->statuses,
                                    m->values, m->n_values);
        break;
    case TRUMPET__MESSAGE__BODY__NOT_SET:
    case TRUMPET__MESSAGE__BODY_HELLO:
    case TRUMPET__MESSAGE__BODY_WELCOME:
    case TRUMPET__MESSAGE__BODY_REFUSE:
    case TRUMPET__MESSAGE__BODY_INSTALL:
    case TRUMPET__MESSAGE__BODY_REMOVE:
    case TRUMPET__MESSAGE__BODY_POLL:
    case TRUMPET__MESSAGE__BODY_HEARTBEAT:
    case TRUMPET__MESSAGE__BODY_BYE:
    case TRUMPET__MESSAGE__BODY_CONFIGURE:
    case TRUMPET__MESSAGE__BODY_POLL_BATCH:
    default:
        abort();
    }
    if (seq && agent_is_report(m->type)) {
        tproto_set_seq(b, m->seq, late);
    }
}

/* The agent thread's queues. */

static struct agent_out *
ring_at(struct agent_ring *r, uint32_t i)
{
    return &r->e[(r->head + i) % r->cap];
}

/* Grows 'r' to hold 'n' more entries, as far as 'max' allows. */
static void
ring_reserve(struct agent_ring *r, uint32_t n)
{
    uint64_t want = MIN((uint64_t) r->max, (uint64_t) r->n + n);
    if (want <= r->cap) {
        return;
    }
    uint32_t cap = MAX(r->cap, MIN(r->max, AGENT_RTX_MIN));
    while (cap < want) {
        cap = MIN(r->max, 2 * cap);
    }
    struct agent_out *e = xmalloc(cap * sizeof *e);
    for (uint32_t i = 0; i < r->n; i++) {
        e[i] = r->e[(r->head + i) % r->cap];
    }
    free(r->e);
    r->e = e;
    r->cap = cap;
    r->head = 0;
}

/* Makes room for one more entry if 'r' may still grow.  Returns false if
 * 'r' is full. */
static bool
ring_room(struct agent_ring *r)
{
    if (r->n < r->cap) {
        return true;
    }
    if (r->cap >= r->max) {
        return false;
    }
    ring_reserve(r, 1);
    return true;
}

/* Appends 'm' to 'r', which has room. */
static void
ring_push(struct agent_ring *r, const struct agent_out *m)
{
    r->e[(r->head + r->n++) % r->cap] = *m;
}

/* Removes the oldest entry of 'r', freeing what it owns. */
static void
ring_pop(struct agent_ring *r)
{
    struct agent_out *m = ring_at(r, 0);
    free(m->reason);
    free(m->values);
    m->reason = NULL;
    m->values = NULL;
    r->head = (r->head + 1) % r->cap;
    r->n--;
}

static void
ring_destroy(struct agent_ring *r)
{
    while (r->n) {
        ring_pop(r);
    }
    free(r->e);
    memset(r, 0, sizeof *r);
}

/* Messages not sent in this session. */
static uint32_t
agent_unsent(const struct tpm_agent *a)
{
    return a->ctl.n + (a->rtx.n - a->n_sent);
}

/* Drops the oldest report of the full outage buffer (caller holds the
 * mutex). */
static void
agent_rtx_evict__(struct tpm_agent *a)
{
    struct agent_out *m = ring_at(&a->rtx, 0);

    if (a->n_sent) {
        /* Sent in this session: the TEM may confirm it still. */
        if (a->evict_lo > a->evict_hi) {
            a->evict_lo = m->seq;
        }
        a->evict_hi = m->seq;
        a->n_sent--;
    } else if (m->sent) {
        a->status.unconfirmed++;
        a->status.pending--;
    } else {
        a->status.dropped_outage++;
        a->status.pending--;
    }

    uint64_t suppressed;
    char buf[64];
    if (agent_ratelimit_allow(&a->rl_thread, &suppressed)) {
        tpm_log(TPM_LOG_WARN, "agent %s: outage buffer full (%"PRIu32
                " entries): oldest %s (event %"PRIu32", epoch %"PRIu64") "
                "dropped%s%s", a->host_id, a->rtx.max,
                tproto_body_name(m->type), m->event_id, m->epoch,
                m->sent ? ", sent but not confirmed" : "",
                agent_suppressed(suppressed, buf, sizeof buf));
    }
    ring_pop(&a->rtx);
}

/* Moves what the host queued into 'ctl' and 'rtx'.  Acks and nacks that
 * do not fit are dropped and counted; reports make room by dropping the
 * oldest. */
static void
agent_out_drain(struct tpm_agent *a)
{
    /* Grow outside the mutex, so that the host is not held up (entries
     * queued meanwhile may still grow the rings under it). */
    pthread_mutex_lock(&a->mutex);
    uint32_t n = a->out_n;
    pthread_mutex_unlock(&a->mutex);
    ring_reserve(&a->rtx, n);
    ring_reserve(&a->ctl, n);

    pthread_mutex_lock(&a->mutex);
    bool had_unsent = agent_unsent(a) > 0;
    uint64_t first = a->out_first_ns;
    while (a->out_n) {
        struct agent_out *m = &a->out[a->out_head];
        if (agent_out_is_tenant(m) && !a->tenant_ok) {
            /* Given before a Welcome of an older version. */
            a->status.dropped_tenant++;
            a->status.pending--;
        } else if (agent_is_report(m->type)) {
            if (!ring_room(&a->rtx)) {
                agent_rtx_evict__(a);
            }
            m->seq = a->next_seq++;
            ring_push(&a->rtx, m);
        } else if (ring_room(&a->ctl)) {
            ring_push(&a->ctl, m);
        } else {
            a->status.drops_out++;
            free(m->reason);
            free(m->values);
        }
        memset(m, 0, sizeof *m);
        a->out_head = (a->out_head + 1) % a->queue_size;
        a->out_n--;
    }
    a->out_head = 0;
    pthread_mutex_unlock(&a->mutex);

    if (!had_unsent && agent_unsent(a)) {
        a->unsent_ns = first;
    }
}

/* Reports numbered 'lo' to 'hi' that were dropped from 'rtx' while
 * awaiting confirmation: every number of that range but the holes. */
static uint64_t
agent_evicted(const struct tpm_agent *a, uint64_t lo, uint64_t hi)
{
    uint64_t n = hi - lo + 1;
    for (size_t i = 0; i < a->n_holes; i++) {
        n -= a->holes[i] >= lo && a->holes[i] <= hi;
    }
    return n;
}

/* Forgets the holes older than every report left (in 'rtx' or in the
 * range of those dropped from it). */
static void
agent_holes_prune(struct tpm_agent *a)
{
    uint64_t oldest = a->rtx.n ? ring_at(&a->rtx, 0)->seq : a->next_seq;
    size_t i = 0;

    if (a->evict_lo <= a->evict_hi) {
        oldest = MIN(oldest, a->evict_lo);
    }
    while (i < a->n_holes && a->holes[i] < oldest) {
        i++;
    }
    memmove(a->holes, a->holes + i, (a->n_holes - i) * sizeof *a->holes);
    a->n_holes -= i;
}

/* Adds 'seq', a report's number removed from 'rtx', to the holes, which
 * stay ascending (caller holds the mutex). */
static void
agent_hole_add__(struct tpm_agent *a, uint64_t seq)
{
    if (a->n_holes >= a->allocated_holes) {
        a->allocated_holes = MAX(16, 2 * a->allocated_holes);
        a->holes = xrealloc(a->holes, a->allocated_holes * sizeof *a->holes);
    }
    size_t i = a->n_holes;
    while (i && a->holes[i - 1] > seq) {
        i--;
    }
    memmove(&a->holes[i + 1], &a->holes[i],
            (a->n_holes - i) * sizeof *a->holes);
    a->holes[i] = seq;
    a->n_holes++;
}

/* A Welcome of a version that does not take tenants' groups: removes
 * those 'rtx' holds (none is sent in this session yet).  The caller holds
 * the mutex. */
static void
agent_rtx_drop_tenants__(struct tpm_agent *a)
{
    struct agent_ring *r = &a->rtx;
    uint32_t kept = 0, n = r->n;

    for (uint32_t i = 0; i < n; i++) {
        struct agent_out *m = ring_at(r, i);
        if (!agent_out_is_tenant(m)) {
            if (kept != i) {
                *ring_at(r, kept) = *m;
            }
            kept++;
            continue;
        }
        if (m->sent) {
            a->status.unconfirmed++;
        } else {
            a->status.dropped_tenant++;
        }
        a->status.pending--;
        agent_hole_add__(a, m->seq);
    }
    r->n = kept;
}

/* Hand-over (tpm_agent_hand_over()). */

static bool
agent_handover_has__(const struct tpm_agent *a, uint32_t event_id)
{
    for (size_t i = 0; i < a->n_handover; i++) {
        if (a->handover[i] == event_id) {
            return true;
        }
    }
    return false;
}

/* Agent thread: moves the satisfactions of the events being handed over
 * that are not awaiting confirmation in this session from 'rtx' to
 * 'handed', and wakes the host.  Once none awaits confirmation, every
 * such satisfaction has been moved (the host gives this agent no more of
 * those events): the hand-overs are done. */
static void
agent_handover_run(struct tpm_agent *a)
{
    pthread_mutex_lock(&a->mutex);
    bool any = a->n_handover > 0;
    pthread_mutex_unlock(&a->mutex);
    if (!any) {
        return;
    }
    /* What the host gave before it handed over, too. */
    agent_out_drain(a);

    pthread_mutex_lock(&a->mutex);
    struct agent_ring *r = &a->rtx;
    uint32_t kept = a->n_sent, n = r->n;
    size_t moved = 0;
    for (uint32_t i = a->n_sent; i < n; i++) {
        struct agent_out *m = ring_at(r, i);
        if (m->type != TRUMPET__MESSAGE__BODY_SATISFACTION
            || !agent_handover_has__(a, m->event_id)) {
            if (kept != i) {
                *ring_at(r, kept) = *m;
            }
            kept++;
            continue;
        }
        if (a->n_handed >= a->allocated_handed) {
            a->allocated_handed = MAX(64, 2 * a->allocated_handed);
            a->handed = xrealloc(a->handed,
                                 a->allocated_handed * sizeof *a->handed);
        }
        a->handed[a->n_handed++] = *m;
        agent_hole_add__(a, m->seq);
        a->status.handed_over++;
        a->status.pending--;
        moved++;
    }
    r->n = kept;
    if (!a->n_sent) {
        a->n_handover = 0;
    }
    if (moved && !a->cmd_n) {
        uint64_t one = 1;
        if (write(a->cmd_fd, &one, sizeof one) < 0 && errno != EAGAIN) {
            tpm_log(TPM_LOG_ERR, "agent: eventfd write: %s",
                    strerror(errno));
        }
    }
    pthread_mutex_unlock(&a->mutex);
    if (moved) {
        tpm_log(TPM_LOG_INFO, "agent %s: %zu satisfactions handed over to "
                "another TEM", a->host_id, moved);
    }
}

void
tpm_agent_hand_over(struct tpm_agent *a, uint32_t event_id, bool on)
{
    uint64_t one = 1;

    pthread_mutex_lock(&a->mutex);
    bool has = agent_handover_has__(a, event_id);
    if (on && !has) {
        if (a->n_handover >= a->allocated_handover) {
            a->allocated_handover = MAX(16, 2 * a->allocated_handover);
            a->handover = xrealloc(a->handover, a->allocated_handover
                                                * sizeof *a->handover);
        }
        a->handover[a->n_handover++] = event_id;
    } else if (!on && has) {
        for (size_t i = 0; i < a->n_handover; i++) {
            if (a->handover[i] == event_id) {
                a->handover[i] = a->handover[--a->n_handover];
                break;
            }
        }
    }
    pthread_mutex_unlock(&a->mutex);
    if (on && write(a->wake_fd, &one, sizeof one) < 0 && errno != EAGAIN) {
        tpm_log(TPM_LOG_ERR, "agent: eventfd write: %s", strerror(errno));
    }
}

size_t
tpm_agent_take_handed(struct tpm_agent *a, struct tpm_agent_report *reports,
                      size_t max)
{
    pthread_mutex_lock(&a->mutex);
    size_t n = MIN(max, a->n_handed);
    for (size_t i = 0; i < n; i++) {
        const struct agent_out *m = &a->handed[i];
        reports[i] = (struct tpm_agent_report) {
            .event_id = m->event_id,
            .epoch = m->epoch,
            .group = m->group,
            .tun_id = m->tun_id,
            .value = m->value,
            .flags = m->flags,
            .n_parts = m->n_parts,
            .n_missing = m->n_missing,
        };
    }
    memmove(a->handed, a->handed + n, (a->n_handed - n) * sizeof *a->handed);
    a->n_handed -= n;
    if (!a->n_handed && !a->cmd_n) {
        agent_fd_drain(a->cmd_fd);
    }
    pthread_mutex_unlock(&a->mutex);
    return n;
}

/* The TEM received every report up to 'seq' (Heartbeat.received). */
static void
agent_on_received(struct tpm_agent *a, uint64_t seq)
{
    pthread_mutex_lock(&a->mutex);
    if (a->evict_lo <= a->evict_hi && seq >= a->evict_lo) {
        uint64_t hi = MIN(seq, a->evict_hi);
        uint64_t n = agent_evicted(a, a->evict_lo, hi);
        a->status.acked += n;
        a->status.pending -= n;
        a->evict_lo = hi + 1;
    }
    /* Only reports sent can have been received: a TEM saying more is
     * wrong, and believing it would hide a loss. */
    while (a->rtx.n && ring_at(&a->rtx, 0)->seq <= seq
           && ring_at(&a->rtx, 0)->sent) {
        if (a->n_sent) {
            a->n_sent--;
        }
        ring_pop(&a->rtx);
        a->status.acked++;
        a->status.pending--;
    }
    if (a->n_holes) {
        agent_holes_prune(a);
    }
    pthread_mutex_unlock(&a->mutex);
}

/* The session ended: acks and nacks not sent are dropped; reports
 * awaiting confirmation are to be sent again, except those already
 * dropped from the buffer, which will never be confirmed. */
static void
agent_out_flush(struct tpm_agent *a)
{
    agent_out_drain(a);
    pthread_mutex_lock(&a->mutex);
    a->connected = false;
    a->status.drops_out += a->ctl.n;
    if (a->evict_lo <= a->evict_hi) {
        uint64_t n = agent_evicted(a, a->evict_lo, a->evict_hi);
        a->status.unconfirmed += n;
        a->status.pending -= n;
    }
    if (a->n_holes) {
        agent_holes_prune(a);
    }
    pthread_mutex_unlock(&a->mutex);
    while (a->ctl.n) {
        ring_pop(&a->ctl);
    }
    a->evict_lo = 1;
    a->evict_hi = 0;
    a->n_sent = 0;
}

/* Sends the batch in 'a->batch' on the current socket.  Returns 0, or an
 * errno value (EAGAIN: the socket cannot take it now). */
static int
agent_send_batch(struct tpm_agent *a)
{
    uint8_t *data;
    size_t len = tproto_batch_encode(&a->batch, a->s.version, &data);
    size_t n = tproto_batch_count(&a->batch);
    int error = 0;

    if (zmq_send(a->s.sock, data, len, ZMQ_DONTWAIT) < 0) {
        error = errno;
    }
    free(data);
    tproto_batch_clear(&a->batch);

    if (!error) {
        pthread_mutex_lock(&a->mutex);
        a->status.frames_out++;
        a->status.msgs_out += n;
        pthread_mutex_unlock(&a->mutex);
    }
    return error;
}

/* Sends a frame with one message the agent itself makes (hello,
 * heartbeat, bye) added to 'a->batch' by the caller. */
static int
agent_send_control(struct tpm_agent *a)
{
    int error = agent_send_batch(a);
    if (error && error != EAGAIN) {
        tpm_log(TPM_LOG_WARN, "agent %s: send to %s: %s", a->host_id,
                a->endpoint, zmq_strerror(error));
    }
    return error;
}

/* Sends frames of the messages not sent in this session (acks and nacks
 * first, then reports, oldest first) while the socket takes them, at
 * most AGENT_TX_BURST.  Returns 0, or the errno value of a send that
 * failed (EAGAIN: the socket is full); what was not sent is kept. */
static int
agent_send_pending(struct tpm_agent *a)
{
    bool seq = a->s.version >= TPROTO_VERSION_CONFIRM;

    for (int f = 0; f < AGENT_TX_BURST && agent_unsent(a); f++) {
        uint32_t n_ctl = 0, n_rtx = 0, n_late = 0;
        size_t bytes = 0;

        while (n_ctl < a->ctl.n && n_ctl < TPROTO_MAX_BATCH
               && bytes < AGENT_FRAME_BUDGET) {
            const struct agent_out *m = ring_at(&a->ctl, n_ctl++);
            agent_out_add(&a->batch, m, false, false);
            bytes += (96 + (m->reason ? strlen(m->reason) : 0)
                      + m->n_values * (sizeof *m->values + 1));
        }
        while (a->n_sent + n_rtx < a->rtx.n
               && n_ctl + n_rtx < TPROTO_MAX_BATCH
               && bytes < AGENT_FRAME_BUDGET) {
            const struct agent_out *m = ring_at(&a->rtx, a->n_sent + n_rtx);
            bool late = m->session != a->s.number;
            agent_out_add(&a->batch, m, seq, late);
            n_late += late;
            bytes += 112;
            n_rtx++;
        }

        int error = agent_send_batch(a);
        if (error) {
            return error;
        }

        while (n_ctl--) {
            ring_pop(&a->ctl);
        }
        pthread_mutex_lock(&a->mutex);
        if (seq) {
            /* Kept until the TEM confirms them. */
            for (uint32_t i = 0; i < n_rtx; i++) {
                ring_at(&a->rtx, a->n_sent + i)->sent = true;
            }
            a->n_sent += n_rtx;
            a->status.late_sent += n_late;
        } else {
            /* An older TEM confirms nothing. */
            for (uint32_t i = 0; i < n_rtx; i++) {
                ring_pop(&a->rtx);
            }
            a->status.unconfirmed += n_rtx;
            a->status.pending -= n_rtx;
        }
        pthread_mutex_unlock(&a->mutex);
    }
    return 0;
}

/* Opens a new socket and starts a session (Hello goes out once the
 * connection is up). */
static void
agent_session_open(struct tpm_agent *a)
{
    void *sock = zmq_socket(a->zctx, ZMQ_DEALER);
    if (!sock) {
        agent_session_end(a, TPM_AGENT_BACKOFF, "cannot create socket: %s",
                          zmq_strerror(errno));
        return;
    }

    int linger = AGENT_LINGER_MS;
    int hwm = a->queue_size;
    int immediate = 1;
    int ivl = a->backoff_min_ns / MS;
    int ivl_max = a->backoff_max_ns / MS;
    int64_t max_size = TPROTO_MAX_FRAME;
    if (a->key_file) {
        /* Read again for every connection: a rotated key takes effect. */
        char tem[TPM_CURVE_KEY_LEN + 1], pub[TPM_CURVE_KEY_LEN + 1];
        char sec[TPM_CURVE_KEY_LEN + 1];
        char *error = agent_read_keys(a->tem_key, a->key_file, tem, pub,
                                      sec);
        if (!error) {
            error = tpm_curve_setup(sock, a->tem_key, pub, sec, NULL);
        }
        memset(sec, 0, sizeof sec);
        if (error) {
            zmq_close(sock);
            agent_session_end(a, TPM_AGENT_BACKOFF, "%s", error);
            free(error);
            return;
        }
    }
    if (zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger)
        || zmq_setsockopt(sock, ZMQ_SNDHWM, &hwm, sizeof hwm)
        || zmq_setsockopt(sock, ZMQ_RCVHWM, &hwm, sizeof hwm)
        || zmq_setsockopt(sock, ZMQ_IMMEDIATE, &immediate, sizeof immediate)
        || zmq_setsockopt(sock, ZMQ_RECONNECT_IVL, &ivl, sizeof ivl)
        || zmq_setsockopt(sock, ZMQ_RECONNECT_IVL_MAX, &ivl_max,
                          sizeof ivl_max)
        || zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &max_size, sizeof max_size)
        || zmq_connect(sock, a->endpoint)) {
        int error = errno;
        zmq_close(sock);
        agent_session_end(a, TPM_AGENT_BACKOFF, "cannot connect to %s: %s",
                          a->endpoint, zmq_strerror(error));
        return;
    }

    memset(&a->s, 0, sizeof a->s);
    a->s.sock = sock;
    a->s.opened_ns = tpm_clock_mono_ns();

    pthread_mutex_lock(&a->mutex);
    if (a->n_sockets++) {
        a->status.reconnects++;
    }
    a->status.state = TPM_AGENT_CONNECTING;
    a->status.version = 0;
    pthread_mutex_unlock(&a->mutex);
}

/* Closes the current socket, if any, and waits for the backoff before
 * the next; 'state' is BACKOFF or REFUSED.  The message, if not NULL,
 * becomes the last error and is logged. */
static void
agent_session_end(struct tpm_agent *a, enum tpm_agent_state state,
                  const char *format, ...)
{
    char *msg = NULL;
    if (format) {
        va_list args;
        va_start(args, format);
        msg = xvasprintf(format, args);
        va_end(args);
    }

    if (a->s.sock) {
        zmq_close(a->s.sock);
    }
    bool was_connected = a->s.welcomed;
    memset(&a->s, 0, sizeof a->s);
    tproto_batch_clear(&a->batch);
    agent_out_flush(a);

    uint64_t backoff = a->backoff_ns;
    a->retry_ns = tpm_clock_mono_ns() + backoff;
    a->backoff_ns = MIN(a->backoff_max_ns, backoff * 2);

    pthread_mutex_lock(&a->mutex);
    a->status.state = state;
    a->status.version = 0;
    if (msg) {
        agent_set_error__(a, msg);
    }
    pthread_mutex_unlock(&a->mutex);

    tpm_log(was_connected || state == TPM_AGENT_REFUSED
            ? TPM_LOG_WARN : TPM_LOG_INFO,
            "agent %s: %s%s%s; retrying in %"PRIu64" ms", a->host_id,
            was_connected ? "session with TEM ended" : "no session",
            msg ? ": " : "", msg ? msg : "", backoff / MS);
    free(msg);
}

static void
agent_on_welcome(struct tpm_agent *a, const Trumpet__Welcome *w)
{
    if (w->version < TPROTO_VERSION_MIN || w->version > TPROTO_VERSION_MAX) {
        /* Tell the TEM why we leave. */
        char *reason = xasprintf("protocol version %"PRIu32" not in "
                                 "%d..%d", w->version, TPROTO_VERSION_MIN,
                                 TPROTO_VERSION_MAX);
        tproto_add_bye(&a->batch, reason);
        agent_send_control(a);
        agent_session_end(a, TPM_AGENT_REFUSED, "TEM %s chose %s",
                          w->tem_id, reason);
        free(reason);
        return;
    }

    uint64_t now = tpm_clock_mono_ns();
    a->s.welcomed = true;
    a->s.version = w->version;
    a->s.hb_ns = MAX(1, (uint64_t) w->heartbeat_ms) * MS;
    a->s.next_hb_ns = now + a->s.hb_ns;
    a->backoff_ns = a->backoff_min_ns;

    pthread_mutex_lock(&a->mutex);
    a->connected = true;
    a->status.state = TPM_AGENT_CONNECTED;
    snprintf(a->status.tem_id, sizeof a->status.tem_id, "%s", w->tem_id);
    a->status.version = w->version;
    a->s.number = ++a->status.sessions;
    a->tenant_ok = w->version >= TPROTO_VERSION_TENANT;
    if (!a->tenant_ok) {
        agent_rtx_drop_tenants__(a);
    }
    pthread_mutex_unlock(&a->mutex);
    /* What the outage buffer holds goes at once (flagged late). */
    a->unsent_ns = 0;

    /* After the state, so that a host woken by RESYNC finds the session
     * open. */
    agent_cmd_resync(a);

    int64_t skew = (int64_t) (w->clock_ns - tpm_clock_real_ns());
    tpm_log(TPM_LOG_INFO, "agent %s: connected to TEM %s at %s (protocol "
            "version %"PRIu32", heartbeat %"PRIu32" ms, clock offset %+.3f "
            "ms)", a->host_id, w->tem_id, a->endpoint, w->version,
            w->heartbeat_ms, skew / 1e6);
}

static void
agent_on_refuse(struct tpm_agent *a, const Trumpet__Refuse *r)
{
    if (r->has_version_min && r->has_version_max) {
        agent_session_end(a, TPM_AGENT_REFUSED, "TEM refused: %s (TEM "
                          "speaks protocol versions %"PRIu32"..%"PRIu32", "
                          "this host %d..%d)", r->reason, r->version_min,
                          r->version_max, TPROTO_VERSION_MIN,
                          TPROTO_VERSION_MAX);
    } else {
        agent_session_end(a, TPM_AGENT_REFUSED, "TEM refused: %s",
                          r->reason);
    }
}

static char *
agent_strdup_or_empty(const char *s)
{
    return xstrdup(s ? s : "");
}

/* Handles one valid message.  May end the session (check a->s.sock). */
/* A validated PollBatch as one command: its entries' keys, then their
 * event ids and their tenants' VNIs, in one allocation ('groups', which
 * tpm_agent_cmd_free() frees).  An entry of a tenant (tun_ids[i] not 0:
 * its VNI + 1) gets 'tun' 1 and its VNI. */
static void
agent_poll_batch_cmd(const Trumpet__PollBatch *p, struct tpm_agent_cmd *cmd)
{
    size_t n = p->n_event_ids;
    size_t off = 0;

    cmd->type = TPM_AGENT_POLL_BATCH;
    cmd->cookie = p->cookie;
    cmd->epoch = p->epoch;
    cmd->n_entries = n;
    cmd->groups = xmalloc(n * (sizeof *cmd->groups + sizeof *cmd->event_ids
                               + sizeof *cmd->tun_ids));
    cmd->event_ids = (uint32_t *) (cmd->groups + n);
    cmd->tun_ids = cmd->event_ids + n;
    memcpy(cmd->event_ids, p->event_ids, n * sizeof *cmd->event_ids);
    for (size_t i = 0; i < n; i++) {
        off += tproto_key_record_get(p->keys.data + off, p->keys.len - off,
                                     &cmd->groups[i]);
        uint32_t t = p->n_tun_ids ? p->tun_ids[i] : 0;
        cmd->groups[i].tun = t != 0;
        cmd->tun_ids[i] = t ? t - 1 : 0;
    }
}

static void
agent_on_message(struct tpm_agent *a, const Trumpet__Message *m)
{
    struct tpm_agent_cmd cmd;

    switch (m->body_case) {
    case TRUMPET__MESSAGE__BODY_WELCOME:
        if (a->s.welcomed) {
            agent_invalid(a, "welcome from TEM in an open session");
        } else {
            agent_on_welcome(a, m->welcome);
        }
        return;

    case TRUMPET__MESSAGE__BODY_REFUSE:
        agent_on_refuse(a, m->refuse);
        return;

    case TRUMPET__MESSAGE__BODY_BYE:
        agent_session_end(a, TPM_AGENT_BACKOFF, "TEM said bye%s%s",
                          m->bye->reason ? ": " : "",
                          m->bye->reason ? m->bye->reason : "");
        return;

    case TRUMPET__MESSAGE__BODY_HEARTBEAT:
        if (a->s.welcomed && a->s.version >= TPROTO_VERSION_CONFIRM
            && m->heartbeat->has_received) {
            agent_on_received(a, m->heartbeat->received);
        }
        return;

    case TRUMPET__MESSAGE__BODY_INSTALL:
    case TRUMPET__MESSAGE__BODY_REMOVE:
    case TRUMPET__MESSAGE__BODY_POLL:
    case TRUMPET__MESSAGE__BODY_POLL_BATCH:
    case TRUMPET__MESSAGE__BODY_CONFIGURE:
        if (!a->s.welcomed) {
            agent_invalid(a, "%s from TEM before welcome",
                          tproto_body_name(m->body_case));
            return;
        }
        memset(&cmd, 0, sizeof cmd);
        if (m->body_case == TRUMPET__MESSAGE__BODY_INSTALL) {
            const Trumpet__Install *in = m->install;
            cmd.type = TPM_AGENT_INSTALL;
            cmd.cookie = in->cookie;
            cmd.event_id = in->event_id;
            cmd.name = agent_strdup_or_empty(in->name);
            cmd.definition = agent_strdup_or_empty(in->definition);
            cmd.has_threshold = in->has_threshold;
            cmd.threshold = in->threshold;
        } else if (m->body_case == TRUMPET__MESSAGE__BODY_REMOVE) {
            cmd.type = TPM_AGENT_REMOVE;
            cmd.cookie = m->remove->cookie;
            cmd.event_id = m->remove->event_id;
        } else if (m->body_case == TRUMPET__MESSAGE__BODY_CONFIGURE) {
            const Trumpet__Configure *c = m->configure;
            cmd.type = TPM_AGENT_CONFIGURE;
            cmd.cookie = c->cookie;
            cmd.has_dos_threshold = c->has_dos_threshold;
            cmd.dos_threshold = c->dos_threshold;
        } else if (m->body_case == TRUMPET__MESSAGE__BODY_POLL_BATCH) {
            agent_poll_batch_cmd(m->poll_batch, &cmd);
        } else {
            const Trumpet__Poll *p = m->poll;
            cmd.type = TPM_AGENT_POLL;
            cmd.cookie = p->cookie;
            cmd.event_id = p->event_id;
            cmd.epoch = p->epoch;
            tproto_key_from_msg(p->group, &cmd.group, &cmd.tun_id);
        }
        agent_cmd_queue(a, &cmd);
        return;

    case TRUMPET__MESSAGE__BODY_HELLO:
    case TRUMPET__MESSAGE__BODY_ACK:
    case TRUMPET__MESSAGE__BODY_NACK:
    case TRUMPET__MESSAGE__BODY_SATISFACTION:
    case TRUMPET__MESSAGE__BODY_POLL_REPLY:
    case TRUMPET__MESSAGE__BODY_POLL_BATCH_REPLY:
    case TRUMPET__MESSAGE__BODY__NOT_SET:
    default:
        agent_invalid(a, "unexpected %s from TEM",
                      tproto_body_name(m->body_case));
        return;
    }
}

static void
agent_on_frame(struct tpm_agent *a, const void *data, size_t len)
{
    const char *why;
    Trumpet__Frame *f = tproto_decode(data, len, &why);

    a->s.last_rx_ns = tpm_clock_mono_ns();
    pthread_mutex_lock(&a->mutex);
    a->status.frames_in++;
    a->status.last_rx_ns = tpm_clock_real_ns();
    if (f) {
        a->status.msgs_in += f->n_messages;
    }
    pthread_mutex_unlock(&a->mutex);

    if (!f) {
        agent_invalid(a, "invalid frame from TEM (%zu bytes): %s", len, why);
        return;
    }
    for (size_t i = 0; i < f->n_messages && a->s.sock; i++) {
        const Trumpet__Message *m = f->messages[i];
        const char *error = tproto_validate(m);
        if (error) {
            agent_invalid(a, "invalid message from TEM: %s", error);
        } else {
            agent_on_message(a, m);
        }
    }
    tproto_free(f);
}

/* Reads what the socket holds, at most AGENT_RX_BURST frames. */
static void
agent_receive(struct tpm_agent *a)
{
    for (int i = 0; i < AGENT_RX_BURST && a->s.sock; i++) {
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        int n = zmq_msg_recv(&msg, a->s.sock, ZMQ_DONTWAIT);
        if (n < 0) {
            int error = errno;
            zmq_msg_close(&msg);
            if (error != EAGAIN && error != EINTR) {
                agent_session_end(a, TPM_AGENT_BACKOFF, "receive from %s: "
                                  "%s", a->endpoint, zmq_strerror(error));
            }
            return;
        }
        /* An empty part followed by more is a REQ-style delimiter; every
         * other part is a frame. */
        if (n || !zmq_msg_more(&msg)) {
            agent_on_frame(a, zmq_msg_data(&msg), n);
        }
        zmq_msg_close(&msg);
    }
}

static void
agent_send_hello(struct tpm_agent *a)
{
    tproto_add_hello(&a->batch, a->host_id, a->prefixes, a->n_prefixes,
                     a->epoch_ns, tpm_clock_real_ns(), a->pmd_ids, a->n_pmds,
                     a->software);
    tproto_set_instance(&a->batch, a->instance);
    int error = agent_send_control(a);
    if (!error) {
        a->s.hello_sent = true;
        a->s.hello_ns = tpm_clock_mono_ns();
        a->s.last_rx_ns = a->s.hello_ns;
        tpm_log(TPM_LOG_DBG, "agent %s: hello sent to %s", a->host_id,
                a->endpoint);
    } else if (error != EAGAIN) {
        agent_session_end(a, TPM_AGENT_BACKOFF, "cannot send hello to %s: "
                          "%s", a->endpoint, zmq_strerror(error));
    }
}

/* Time-driven work: Hello timeout, heartbeats, liveness.  Returns the
 * next deadline (CLOCK_MONOTONIC ns). */
static uint64_t
agent_timers(struct tpm_agent *a, uint64_t now)
{
    if (!a->s.sock) {
        return a->retry_ns;
    }
    if (!a->s.welcomed) {
        if (!a->s.hello_sent) {
            /* Not connected yet: ZeroMQ keeps trying every backoff
             * interval; say so once a Hello timeout has passed. */
            uint64_t due = a->s.opened_ns + a->hello_timeout_ns;
            if (now < due) {
                return due;
            }
            uint64_t reopen = due + a->backoff_max_ns;
            if (a->key_file && now >= reopen) {
                /* A handshake the TEM refused (this host's key not, or
                 * not yet, in its allow-list) leaves ZeroMQ's socket dead
                 * for good: a new one, reading the key file again. */
                zmq_close(a->s.sock);
                a->s.sock = NULL;
                agent_session_open(a);
                a->s.unreachable_logged = true;
                return now + MS;
            }
            if (!a->s.unreachable_logged) {
                a->s.unreachable_logged = true;
                char *msg = xasprintf("cannot reach TEM at %s (still "
                                      "trying)%s", a->endpoint,
                                      a->key_file
                                      ? ": down, or it refuses this "
                                        "host's key (its allow-list), or "
                                        "its public key is not the one "
                                        "given" : "");
                pthread_mutex_lock(&a->mutex);
                agent_set_error__(a, msg);
                pthread_mutex_unlock(&a->mutex);
                tpm_log(TPM_LOG_WARN, "agent %s: %s", a->host_id, msg);
                free(msg);
            }
            return a->key_file ? reopen : UINT64_MAX;
        }
        uint64_t due = a->s.hello_ns + a->hello_timeout_ns;
        if (now >= due) {
            agent_session_end(a, TPM_AGENT_BACKOFF, "no answer to hello "
                              "from TEM at %s within %"PRIu64" ms",
                              a->endpoint, a->hello_timeout_ns / MS);
            return a->retry_ns;
        }
        return due;
    }

    uint64_t dead = a->s.last_rx_ns + AGENT_HEARTBEAT_MISSES * a->s.hb_ns;
    if (now >= dead) {
        agent_session_end(a, TPM_AGENT_BACKOFF, "nothing from TEM at %s "
                          "for %"PRIu64" ms (%d heartbeats)", a->endpoint,
                          (now - a->s.last_rx_ns) / MS,
                          AGENT_HEARTBEAT_MISSES);
        return a->retry_ns;
    }
    if (now >= a->s.next_hb_ns) {
        struct tproto_host_counters c;
        pthread_mutex_lock(&a->mutex);
        bool has = a->has_counters;
        c = a->counters;
        pthread_mutex_unlock(&a->mutex);
        tproto_add_heartbeat_counters(&a->batch, tpm_clock_real_ns(),
                                      a->s.hb_seq++, has ? &c : NULL);
        agent_send_control(a);
        a->s.next_hb_ns = now + a->s.hb_ns;
    }
    return MIN(dead, a->s.next_hb_ns);
}

static int
agent_poll_timeout_ms(uint64_t now, uint64_t deadline)
{
    if (deadline == UINT64_MAX) {
        return -1;
    }
    if (deadline <= now) {
        return 0;
    }
    uint64_t ms = (deadline - now + MS - 1) / MS;
    return ms > INT32_MAX ? INT32_MAX : (int) ms;
}

/* Shutdown: flush what the host queued, say Bye, linger briefly. */
static void
agent_shutdown(struct tpm_agent *a)
{
    if (a->s.sock && a->s.welcomed) {
        agent_out_drain(a);
        agent_send_pending(a);
        tproto_add_bye(&a->batch, "host agent shutting down");
        agent_send_control(a);
    }
    if (a->s.sock) {
        zmq_close(a->s.sock);
        a->s.sock = NULL;
    }
    agent_out_flush(a);
    tproto_batch_clear(&a->batch);
}

/* Takes the monitors tpm_agent_set_pmds() gave, if any: the current
 * session, if there is one, ends, and the next starts at once with a
 * Hello that names them.  The agent is the same run (Hello.instance):
 * its outage buffer goes to the next session, as after any outage. */
static void
agent_take_pmds(struct tpm_agent *a)
{
    pthread_mutex_lock(&a->mutex);
    uint32_t *ids = a->new_pmd_ids;
    size_t n = a->n_new_pmds;
    a->new_pmd_ids = NULL;
    pthread_mutex_unlock(&a->mutex);
    if (!ids) {
        return;
    }
    free(a->pmd_ids);
    a->pmd_ids = ids;
    a->n_pmds = n;
    if (a->s.sock) {
        agent_session_end(a, TPM_AGENT_BACKOFF, "the host's monitors "
                          "changed (%zu now): a new Hello", n);
    }
    a->retry_ns = 0;
    a->backoff_ns = a->backoff_min_ns;
}

void
tpm_agent_set_pmds(struct tpm_agent *a, const uint32_t *pmd_ids, size_t n)
{
    uint32_t *ids = xmalloc(MAX(n, 1) * sizeof *ids);
    uint64_t one = 1;

    memcpy(ids, pmd_ids, n * sizeof *ids);

    pthread_mutex_lock(&a->mutex);
    free(a->new_pmd_ids);
    a->new_pmd_ids = ids;
    a->n_new_pmds = n;
    pthread_mutex_unlock(&a->mutex);
    if (write(a->wake_fd, &one, sizeof one) < 0 && errno != EAGAIN) {
        tpm_log(TPM_LOG_ERR, "agent: eventfd write: %s", strerror(errno));
    }
}

static void *
agent_main(void *a_)
{
    struct tpm_agent *a = a_;

    a->backoff_ns = a->backoff_min_ns;
    a->retry_ns = 0;
    while (!atomic_load(&a->exiting)) {
        agent_take_pmds(a);
        uint64_t now = tpm_clock_mono_ns();
        if (!a->s.sock && now >= a->retry_ns) {
            agent_session_open(a);
        }
        if (a->s.sock && !a->s.hello_sent) {
            agent_send_hello(a);
        }

        uint64_t deadline = agent_timers(a, now);

        /* Outgoing messages: without a session, into the outage buffer
         * at once; in one, when a batch is due, and sent while the socket
         * takes them. */
        bool want_out = false;
        bool welcomed = a->s.sock && a->s.welcomed;
        uint32_t n;
        uint64_t first;
        pthread_mutex_lock(&a->mutex);
        n = a->out_n;
        first = a->out_first_ns;
        pthread_mutex_unlock(&a->mutex);
        if (n) {
            uint64_t due = first + a->batch_ns;
            if (!welcomed || agent_unsent(a) || now >= due
                || n >= agent_batch_full(a) || n >= a->queue_size / 2) {
                agent_out_drain(a);
            } else {
                deadline = MIN(deadline, due);
            }
        }
        agent_handover_run(a);
        if (welcomed && agent_unsent(a)) {
            uint64_t due = a->unsent_ns + a->batch_ns;
            if (now >= due || agent_unsent(a) >= agent_batch_full(a)) {
                /* What is left (the socket is full, or the burst ended)
                 * goes when the socket is writable; after any other
                 * error, in the next session. */
                int error = agent_send_pending(a);
                if (error && error != EAGAIN) {
                    agent_session_end(a, TPM_AGENT_BACKOFF, "send to %s: "
                                      "%s", a->endpoint,
                                      zmq_strerror(error));
                } else {
                    want_out = agent_unsent(a) > 0;
                }
            } else {
                deadline = MIN(deadline, due);
            }
        }

        zmq_pollitem_t items[2] = {
            { .fd = a->wake_fd, .events = ZMQ_POLLIN },
            { .socket = a->s.sock, .events = ZMQ_POLLIN },
        };
        int n_items = 1;
        if (a->s.sock) {
            n_items = 2;
            if (!a->s.hello_sent || want_out) {
                items[1].events |= ZMQ_POLLOUT;
            }
        }
        now = tpm_clock_mono_ns();
        int rc = zmq_poll(items, n_items, agent_poll_timeout_ms(now,
                                                                deadline));
        if (rc < 0) {
            if (errno == EINTR) {
                continue;
            }
            tpm_log(TPM_LOG_ERR, "agent %s: zmq_poll: %s", a->host_id,
                    zmq_strerror(errno));
            agent_session_end(a, TPM_AGENT_BACKOFF, "zmq_poll: %s",
                              zmq_strerror(errno));
            continue;
        }
        if (items[0].revents & ZMQ_POLLIN) {
            agent_fd_drain(a->wake_fd);
        }
        if (n_items > 1 && items[1].revents & ZMQ_POLLIN) {
            agent_receive(a);
        }
    }
    agent_shutdown(a);
    return NULL;
}

/* A number for Hello.instance that no earlier run of an agent of this
 * host id is likely to have used: random, else the clocks and pid. */
static uint64_t
agent_instance(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) != sizeof v) {
        v = (tpm_clock_real_ns() * UINT64_C(0x9e3779b97f4a7c15))
            ^ (tpm_clock_mono_ns() << 17) ^ (uint64_t) getpid();
    }
    return v ? v : 1;
}

struct tpm_agent *
tpm_agent_create(const struct tpm_agent_config *c, char **errp)
{
    char *endpoint;
    char *error;

    *errp = NULL;
    error = tpm_agent_parse_endpoint(c->endpoint, &endpoint);
    if (!error) {
        error = agent_config_check(c);
        if (error) {
            free(endpoint);
        }
    }
    if (error) {
        *errp = error;
        return NULL;
    }

    struct tpm_agent *a = xzalloc(sizeof *a);
    a->endpoint = endpoint;
    a->host_id = xstrdup(c->host_id);
    a->n_prefixes = c->n_prefixes;
    a->prefixes = xmalloc(MAX(1, c->n_prefixes) * sizeof *a->prefixes);
    if (c->n_prefixes) {
        memcpy(a->prefixes, c->prefixes,
               c->n_prefixes * sizeof *a->prefixes);
    }
    a->epoch_ns = c->epoch_ns;
    a->n_pmds = c->n_pmds;
    a->pmd_ids = xmalloc(MAX(1, c->n_pmds) * sizeof *a->pmd_ids);
    if (c->n_pmds) {
        memcpy(a->pmd_ids, c->pmd_ids, c->n_pmds * sizeof *a->pmd_ids);
    }
    a->software = c->software ? xstrdup(c->software) : NULL;
    a->queue_size = c->queue_size;
    a->backoff_min_ns = c->backoff_min_ns;
    a->backoff_max_ns = c->backoff_max_ns;
    a->batch_ns = c->batch_ns;
    a->hello_timeout_ns = c->hello_timeout_ns;
    if (!c->insecure_plaintext) {
        /* Checked by agent_config_check(). */
        free(tpm_curve_public_arg(c->tem_public_key, a->tem_key));
        a->key_file = xstrdup(c->key_file);
    }
    a->cmds = xcalloc(a->queue_size, sizeof *a->cmds);
    a->out = xcalloc(a->queue_size, sizeof *a->out);
    a->ctl.max = a->queue_size;
    a->rtx.max = c->outage_buffer;
    a->next_seq = 1;
    a->evict_lo = 1;
    a->evict_hi = 0;
    a->instance = agent_instance();
    tproto_batch_init(&a->batch);
    atomic_init(&a->exiting, false);
    pthread_mutex_init(&a->mutex, NULL);
    a->status.state = TPM_AGENT_CONNECTING;
    snprintf(a->status.endpoint, sizeof a->status.endpoint, "%s",
             a->endpoint);
    snprintf(a->status.host_id, sizeof a->status.host_id, "%s", a->host_id);
    a->cmd_fd = a->wake_fd = -1;

    a->cmd_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    a->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (a->cmd_fd < 0 || a->wake_fd < 0) {
        error = xasprintf("eventfd: %s", strerror(errno));
        goto error;
    }

    a->zctx = zmq_ctx_new();
    if (!a->zctx) {
        error = xasprintf("zmq_ctx_new: %s", zmq_strerror(errno));
        goto error;
    }

    /* Check the endpoint as ZeroMQ understands it now, so that a typo is
     * an error at creation rather than a silent retry loop. */
    void *probe = zmq_socket(a->zctx, ZMQ_DEALER);
    if (!probe) {
        error = xasprintf("zmq_socket: %s", zmq_strerror(errno));
        goto error;
    }
    int linger = 0;
    zmq_setsockopt(probe, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_connect(probe, a->endpoint)) {
        error = xasprintf("TEM endpoint '%s': %s", c->endpoint,
                          zmq_strerror(errno));
        zmq_close(probe);
        goto error;
    }
    zmq_close(probe);

    int rc = pthread_create(&a->thread, NULL, agent_main, a);
    if (rc) {
        error = xasprintf("cannot start the agent thread: %s",
                          strerror(rc));
        goto error;
    }
    if (a->key_file) {
        tpm_log(TPM_LOG_INFO, "agent %s: started, TEM at %s (CURVE, TEM "
                "key %s, host key file %s)", a->host_id, a->endpoint,
                a->tem_key, a->key_file);
    } else {
        tpm_log(TPM_LOG_WARN, "agent %s: started, TEM at %s: INSECURE "
                "plaintext, no keys: anyone can claim this host's id",
                a->host_id, a->endpoint);
    }
    return a;

error:
    *errp = error;
    if (a->zctx) {
        zmq_ctx_term(a->zctx);
    }
    a->zctx = NULL;
    tpm_agent_destroy(a);
    return NULL;
}

void
tpm_agent_destroy(struct tpm_agent *a)
{
    if (!a) {
        return;
    }
    if (a->zctx) {
        atomic_store(&a->exiting, true);
        uint64_t one = 1;
        if (write(a->wake_fd, &one, sizeof one) < 0) {
            tpm_log(TPM_LOG_ERR, "agent: eventfd write: %s",
                    strerror(errno));
        }
        pthread_join(a->thread, NULL);
        zmq_ctx_term(a->zctx);
        if (a->status.pending) {
            /* The outage buffer goes with the agent. */
            tpm_log(TPM_LOG_WARN, "agent %s: stopped with %"PRIu64" "
                    "satisfactions and poll replies the TEM did not "
                    "confirm", a->host_id, a->status.pending);
        }
    }

    for (uint32_t i = 0; i < a->cmd_n; i++) {
        tpm_agent_cmd_free(&a->cmds[(a->cmd_head + i) % a->queue_size]);
    }
    for (uint32_t i = 0; i < a->out_n; i++) {
        free(a->out[(a->out_head + i) % a->queue_size].reason);
        free(a->out[(a->out_head + i) % a->queue_size].values);
    }
    free(a->cmds);
    free(a->out);
    ring_destroy(&a->ctl);
    ring_destroy(&a->rtx);
    free(a->holes);
    free(a->handover);
    free(a->handed);
    tproto_batch_destroy(&a->batch);
    pthread_mutex_destroy(&a->mutex);
    if (a->cmd_fd >= 0) {
        close(a->cmd_fd);
    }
    if (a->wake_fd >= 0) {
        close(a->wake_fd);
    }
    free(a->endpoint);
    free(a->key_file);
    free(a->host_id);
    free(a->prefixes);
    free(a->pmd_ids);
    free(a->new_pmd_ids);
    free(a->software);
    free(a);
}

void
tpm_agent_get_status(struct tpm_agent *a, struct tpm_agent_status *s)
{
    pthread_mutex_lock(&a->mutex);
    *s = a->status;
    pthread_mutex_unlock(&a->mutex);
}
