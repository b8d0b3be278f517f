/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TEM's hosts (paper section 6; the host's side is lib/agent.h):
 * their sessions, the frames they send, the batches sent to them, and the
 * DoS threshold the TEM sets on them.
 *
 * Sessions.  A host opens a session with Hello and gets Welcome, or
 * Refuse with a reason it can read whatever its protocol version (no
 * common version, another epoch, another host id than its key's, too many
 * hosts).  A new Hello on a live session restarts it; a Hello for a host
 * id in session elsewhere replaces that session.  A session ends with
 * Bye, with a revoked key, or after TEM_HEARTBEAT_MISSES heartbeat
 * periods of silence; the host is then "gone" and its events' members and
 * decisions' parts for that session are dropped or missing.
 *
 * Slots.  A host has a slot in core->hosts for the core's life: a gone
 * host keeps its id and counters for the views until a new host needs its
 * slot (the longest gone first, once --max-hosts slots are used).  Each
 * Welcome numbers a new session (core->session_seq); members and parts
 * record the session they were made for.  'peers' hashes exactly the
 * connected hosts by ZeroMQ peer identity.
 *
 * Input.  tem_core_input_auth() decodes a frame, validates every message
 * (tproto_validate()) and dispatches: Hello here, satisfactions and poll
 * replies to tem-decide.c, acks of installs to the events' members, acks
 * of Configure to the DoS threshold, heartbeats' host counters to the
 * host's stats.  A frame of a connection authenticated for another host
 * id is dropped before anything reads it.
 *
 * Output.  Every message to a host is queued in its batch, and peers
 * without a session get Refuse or Bye at once, through tem-out.c.
 *
 * Delivery.  In sessions of protocol version 3 the TEM takes each of a
 * host's numbered reports once and tells the host, with every batch that
 * follows and in its heartbeats, what it has (see "Delivery of hosts'
 * reports" below); tem-decide.c holds back the satisfactions whose
 * decision is pending.
 *
 * Timers: tem_host_run(), run by tem_core_run() about twice a heartbeat
 * period, sends heartbeats and ends the sessions of silent hosts;
 * tem_host_delay() extends the silence timeouts after the caller's loop
 * overran (tem_core_overrun()).
 */
#include "tem-core-private.h"

#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

/* A host that sends nothing for this many heartbeat periods is gone. */
#define TEM_HEARTBEAT_MISSES 3

const char *const tem_host_dos_state_names[] = {
    "none", "pending", "acked", "nacked", "unsupported", "waiting",
};

/* ---------------------------------------------------------------------- */
/* Hosts by peer and by id. */

static uint32_t
tem_host_peer_hash(const void *peer, size_t len)
{
    const uint8_t *p = peer;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) {
        h = (h ^ p[i]) * 16777619u;
    }
    return h;
}

/* Returns the chain of 'peers' where peer 'peer' belongs. */
static struct tem_host **
tem_host_peer_bucket(const struct tem_core *core, const void *peer,
                     size_t len)
{
    return &core->peers[tem_host_peer_hash(peer, len) & core->peer_mask];
}

static struct tem_host *
tem_host_by_peer(const struct tem_core *core, const void *peer, size_t len)
{
    for (struct tem_host *h = *tem_host_peer_bucket(core, peer, len); h;
         h = h->peer_next) {
        if (h->peer_len == len && !memcmp(h->peer, peer, len)) {
            return h;
        }
    }
    return NULL;
}

static void
tem_host_peer_insert(struct tem_core *core, struct tem_host *h)
{
    struct tem_host **b = tem_host_peer_bucket(core, h->peer, h->peer_len);
    h->peer_next = *b;
    *b = h;
}

static void
tem_host_peer_remove(struct tem_core *core, struct tem_host *h)
{
    struct tem_host **pp = tem_host_peer_bucket(core, h->peer, h->peer_len);
    while (*pp && *pp != h) {
        pp = &(*pp)->peer_next;
    }
    if (*pp) {
        *pp = h->peer_next;
    }
    h->peer_next = NULL;
}

static struct tem_host *
tem_host_by_id(const struct tem_core *core, const char *id)
{
    for (uint32_t i = 0; i < core->n_host_slots; i++) {
        struct tem_host *h = core->hosts[i];
        if (h && h->state != TEM_HOST_FREE && !strcmp(h->id, id)) {
            return h;
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------------- */
/* Delivery of hosts' reports (protocol version 3).
 *
 * A host's agent numbers its satisfactions (and PollReplies, "reports")
 * 1, 2, ... in each of its runs (Hello.instance names the run), keeps
 * them until the TEM confirms them, and sends again, flagged late, those
 * a session ended without confirming (lib/agent.h; a PollBatchReply
 * answers a poll of its session only, and is neither numbered nor sent
 * again).  The TEM takes each number once: 'seq_recv' is the highest
 * taken, kept across the host's sessions while its agent is the same run;
 * a report at or below it was taken already and is dropped (counted), one
 * above it is taken, a jump counting the numbers skipped (reports the
 * host dropped before sending: it resends from its oldest unconfirmed,
 * and one connection delivers in order).
 *
 * After each frame, and in every heartbeat, the TEM tells the host
 * (Heartbeat.received) what it has, tem_out_received() (tem-out.c):
 * everything taken, but that a satisfaction whose decision is pending is
 * "held" until the decision is made (tem-decide.c), so that a TEM
 * stopping or crashing before it decides gets it again (with what the
 * host sent after it: the confirmation is cumulative).  What a late
 * report means for a decision is tem-decide.c's. */

/* A new session of 'h', whose Hello is 'hello'. */
static void
tem_host_seq_hello(struct tem_host *h, const Trumpet__Hello *hello)
{
    uint64_t instance = hello->has_instance ? hello->instance : 0;
    if (!instance || instance != h->seq_instance) {
        /* Another run of its agent: numbers start again (the decisions
         * holding the old run's numbers release nothing, see
         * tem-decide.c). */
        h->seq_recv = 0;
        h->held_n = 0;
    }
    h->seq_instance = instance;
    /* Tell it at once what it need not send again. */
    h->seq_told = 0;
}

static void tem_host_gone(struct tem_core *, struct tem_host *,
                          const char *reason);

/* Takes report 'seq' ('has_seq') of 'h', flagged 'late'.  Returns false
 * if it was taken already (counted; the caller drops it) or if its number
 * jumps by more than --max-seq-gap: no outage buffer holds that many, so
 * the host is broken or hostile, and its session ends (a protocol error,
 * counted in 'seq_errors'). */
static bool
tem_host_report_take(struct tem_core *core, struct tem_host *h, bool has_seq,
                     uint64_t seq, bool late)
{
    if (has_seq && h->version >= TPROTO_VERSION_CONFIRM) {
        /* Told at the flush, tem_out_tell_received(). */
        tem_out_dirty(core, h);
        if (h->seq_recv && seq <= h->seq_recv) {
            core->stats.reports_dup++;
            h->stats.reports_dup++;
            h->seq_told = 0;    /* It did not hear: tell it again. */
            return false;
        }
        if (h->seq_recv && seq - h->seq_recv - 1 > core->cfg.max_seq_gap) {
            char reason[160];
            snprintf(reason, sizeof reason, "protocol error: report number "
                     "%"PRIu64" after %"PRIu64" skips more than %"PRIu64
                     " (the TEM's --max-seq-gap)", seq, h->seq_recv,
                     core->cfg.max_seq_gap);
            core->stats.seq_errors++;
            tem_out_bye(core, h->peer, h->peer_len, reason);
            tem_host_gone(core, h, reason);
            return false;
        }
        if (h->seq_recv && seq > h->seq_recv + 1) {
            core->stats.reports_skipped += seq - h->seq_recv - 1;
            h->stats.reports_skipped += seq - h->seq_recv - 1;
        }
        h->seq_recv = seq;
    }
    if (late) {
        core->stats.reports_late++;
        h->stats.reports_late++;
    }
    return true;
}

/* Appends a heartbeat to 'h''s batch, with what it delivered; 'now' is
 * the monotonic clock (the heartbeat carries the wall clock). */
static void
tem_host_heartbeat(struct tem_core *core, struct tem_host *h, uint64_t now)
{
    struct tproto_batch *b = tem_out_batch(core, h, 32);
    tproto_add_heartbeat(b, tem_core_real(core), ++h->hb_seq);
    if (h->version >= TPROTO_VERSION_CONFIRM && tem_out_received(h)) {
        h->seq_told = tem_out_received(h);
        tproto_set_received(b, h->seq_told);
    }
    h->last_hb_tx_ns = now;
}

/* ---------------------------------------------------------------------- */
/* DoS threshold. */

/* Returns true if the TEM sets a DoS threshold on 'h', in '*bytes'. */
bool
tem_host_dos_wanted(const struct tem_core *core, const struct tem_host *h,
                    uint32_t *bytes)
{
    if (h->dos_own) {
        *bytes = h->dos_own_bytes;
        return true;
    } else if (core->dos_all) {
        *bytes = core->dos_all_bytes;
        return true;
    }
    return false;
}

/* Sends 'h' the DoS threshold the TEM wants on it, if any and if its
 * session speaks Configure; updates its state either way. */
static void
tem_host_dos_send(struct tem_core *core, struct tem_host *h)
{
    uint32_t bytes;

    h->dos_reason[0] = '\0';
    if (!tem_host_dos_wanted(core, h, &bytes)) {
        h->dos_state = TEM_DOS_NONE;
    } else if (!tem_out_host_connected(h)) {
        h->dos_state = TEM_DOS_WAITING;
    } else if (h->version < TPROTO_VERSION_CONFIGURE) {
        h->dos_state = TEM_DOS_UNSUPPORTED;
        tem_log_rl(core, &core->rl_install, TPM_LOG_WARN, "host %s speaks "
                   "protocol version %"PRIu32": cannot set its DoS "
                   "threshold (Configure needs version %d)", h->id,
                   h->version, TPROTO_VERSION_CONFIGURE);
    } else {
        h->dos_state = TEM_DOS_PENDING;
        h->dos_sent = bytes;
        h->dos_cookie = core->next_cookie++;
        h->dos_session = h->session;
        tproto_add_configure(tem_out_batch(core, h, 24), h->dos_cookie, true,
                             bytes);
        core->stats.configures++;
    }
}

/* The answer of 'h' to Configure 'cookie': 'reason' NULL for an ack.
 * Returns false if it answers no Configure of this session. */
static bool
tem_host_dos_answer(struct tem_core *core, struct tem_host *h, uint64_t cookie,
                    const char *reason)
{
    if (h->dos_state != TEM_DOS_PENDING || h->dos_cookie != cookie
        || h->dos_session != h->session) {
        return false;
    }
    if (reason) {
        h->dos_state = TEM_DOS_NACKED;
        snprintf(h->dos_reason, sizeof h->dos_reason, "%s", reason);
        tem_log_rl(core, &core->rl_install, TPM_LOG_WARN, "host %s refused "
                   "DoS threshold %"PRIu32": %s", h->id, h->dos_sent,
                   reason);
    } else {
        h->dos_state = TEM_DOS_ACKED;
    }
    return true;
}

char *
tem_core_set_dos_threshold(struct tem_core *core, const char *host,
                           uint32_t bytes, struct json_object **resultp)
{
    struct tem_host *only = NULL;

    *resultp = NULL;
    if (host) {
        only = tem_host_by_id(core, host);
        if (!only) {
            return xasprintf("no host '%s' (tem-ctl hosts lists them)",
                             host);
        }
        if (tem_out_host_connected(only)
            && only->version < TPROTO_VERSION_CONFIGURE) {
            return xasprintf("host %s speaks protocol version %"PRIu32": "
                             "it cannot take a DoS threshold from the TEM "
                             "(Configure needs version %d); set it on the "
                             "host", host, only->version,
                             TPROTO_VERSION_CONFIGURE);
        }
        only->dos_own = true;
        only->dos_own_bytes = bytes;
    } else {
        /* Every host, those to come too; the last word wins over values
         * set for single hosts. */
        core->dos_all = true;
        core->dos_all_bytes = bytes;
        core->n_dos_saved = 0;
    }

    struct json_object *a = json_object_new_array();
    for (uint32_t i = 0; i < core->n_host_slots; i++) {
        struct tem_host *h = core->hosts[i];
        if (!h || h->state == TEM_HOST_FREE || (only && h != only)) {
            continue;
        }
        h->dos_own = only != NULL;
        tem_host_dos_send(core, h);

        struct json_object *o = json_object_new_object();
        json_object_object_add(o, "host", json_object_new_string(h->id));
        json_object_object_add(o, "state", json_object_new_string(
                                   tem_host_dos_state_names[h->dos_state]));
        json_object_object_add(o, "version",
                               json_object_new_int64(h->version));
        json_object_array_add(a, o);
    }
    tem_log_rl(core, &core->rl_misc, TPM_LOG_INFO, "DoS threshold %"PRIu32
               " bytes for %s%s", bytes, only ? "host " : "all hosts",
               only ? only->id : "");

    struct json_object *r = json_object_new_object();
    json_object_object_add(r, "host", only ? json_object_new_string(host)
                                           : NULL);
    json_object_object_add(r, "dos_threshold", json_object_new_int64(bytes));
    json_object_object_add(r, "hosts", a);
    *resultp = r;
    return NULL;
}

/* Gives 'h', new in its slot, the DoS threshold the state file had for
 * its id, if any. */
static void
tem_host_dos_restore(struct tem_core *core, struct tem_host *h)
{
    for (size_t i = 0; i < core->n_dos_saved; i++) {
        if (!strcmp(core->dos_saved[i].id, h->id)) {
            h->dos_own = true;
            h->dos_own_bytes = core->dos_saved[i].bytes;
            core->dos_saved[i] = core->dos_saved[--core->n_dos_saved];
            return;
        }
    }
}

struct json_object *
tem_core_dos_to_json(const struct tem_core *core)
{
    struct json_object *o = json_object_new_object();
    struct json_object *hosts = json_object_new_object();

    json_object_object_add(o, "all", (core->dos_all
                                      ? json_object_new_int64(
                                            core->dos_all_bytes)
                                      : NULL));
    for (uint32_t i = 0; i < core->n_host_slots; i++) {
        const struct tem_host *h = core->hosts[i];
        if (h && h->state != TEM_HOST_FREE && h->dos_own) {
            json_object_object_add(hosts, h->id,
                                   json_object_new_int64(h->dos_own_bytes));
        }
    }
    for (size_t i = 0; i < core->n_dos_saved; i++) {
        json_object_object_add(hosts, core->dos_saved[i].id,
                               json_object_new_int64(
                                   core->dos_saved[i].bytes));
    }
    json_object_object_add(o, "hosts", hosts);
    return o;
}

/* Returns NULL and the value of 'v' in '*bytes' if it is an integer in
 * [0, 2^32 - 1], else an error about 'what'. */
static char *
tem_host_dos_value__(struct json_object *v, const char *what,
                     uint32_t *bytes)
{
    int64_t x = json_object_get_int64(v);
    if (!json_object_is_type(v, json_type_int) || x < 0 || x > UINT32_MAX) {
        return xasprintf("dos_threshold: %s: expected an integer from 0 to "
                         "4294967295", what);
    }
    *bytes = x;
    return NULL;
}

char *
tem_core_dos_from_json(struct tem_core *core, const struct json_object *obj_)
{
    struct json_object *obj = (struct json_object *) obj_, *v, *hosts;
    uint32_t bytes = 0;
    char *error;

    core->dos_all = false;
    core->n_dos_saved = 0;
    if (!obj) {
        return NULL;
    }
    if (!json_object_is_type(obj, json_type_object)) {
        return xstrdup("dos_threshold: expected an object");
    }
    if (json_object_object_get_ex(obj, "all", &v) && v) {
        if ((error = tem_host_dos_value__(v, "all", &bytes))) {
            return error;
        }
        core->dos_all = true;
        core->dos_all_bytes = bytes;
    }
    if (json_object_object_get_ex(obj, "hosts", &hosts)) {
        if (!json_object_is_type(hosts, json_type_object)) {
            core->dos_all = false;
            return xstrdup("dos_threshold: hosts: expected an object");
        }
        size_t n = json_object_object_length(hosts);
        core->dos_saved = xrealloc(core->dos_saved,
                                   MAX(n, 1) * sizeof *core->dos_saved);
        json_object_object_foreach(hosts, id, value) {
            if (!tproto_id_valid(id)) {
                error = xasprintf("dos_threshold: hosts: '%s' is not a "
                                  "host id", id);
            } else {
                error = tem_host_dos_value__(value, id, &bytes);
            }
            if (error) {
                core->dos_all = false;
                core->n_dos_saved = 0;
                return error;
            }
            struct tem_host *h = tem_host_by_id(core, id);
            if (h) {
                h->dos_own = true;
                h->dos_own_bytes = bytes;
            } else {
                struct tem_dos_saved *s
                    = &core->dos_saved[core->n_dos_saved++];
                snprintf(s->id, sizeof s->id, "%s", id);
                s->bytes = bytes;
            }
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------------- */
/* Sessions. */

/* Ends 'h''s session; the caller reconciles the events. */
static void
tem_host_gone__(struct tem_core *core, struct tem_host *h, const char *reason,
                uint64_t now)
{
    tem_log_rl(core, &core->rl_session, TPM_LOG_INFO, "host %s gone: %s",
               h->id, reason);
    tem_decide_host_gone(core, h);
    tem_host_peer_remove(core, h);
    tproto_batch_clear(&h->out);
    tem_out_pollq_reset(h->pollq);
    h->out_bytes = 0;
    h->state = TEM_HOST_GONE;
    h->gone_ns = now;
    if (h->dos_state != TEM_DOS_NONE) {
        /* Sent again when it is back. */
        h->dos_state = TEM_DOS_WAITING;
    }
    snprintf(h->gone_reason, sizeof h->gone_reason, "%s", reason);
    core->stats.hosts_gone++;
}

static void
tem_host_gone(struct tem_core *core, struct tem_host *h, const char *reason)
{
    if (h->state == TEM_HOST_CONNECTED) {
        uint64_t now = tem_core_now(core);
        tem_host_gone__(core, h, reason, now);
        tem_event_reconcile_all(core, now);
    }
}

void
tem_core_bye_all(struct tem_core *core, const char *reason)
{
    for (uint32_t i = 0; i < core->n_host_slots; i++) {
        struct tem_host *h = core->hosts[i];
        if (tem_out_host_connected(h)) {
            tproto_batch_clear(&h->out);
            /* What it delivered, so that it does not send it again. */
            tem_out_tell_received(core, h);
            tproto_add_bye(&h->out, reason);
            tem_out_send(core, h->peer, h->peer_len, h->version, &h->out,
                         &h->stats);
            tem_host_gone__(core, h, reason, tem_core_now(core));
        }
    }
    tem_event_reconcile_all(core, tem_core_now(core));
}

void
tem_core_peer_revoke(struct tem_core *core, const void *peer,
                     size_t peer_len, const char *reason)
{
    struct tem_host *h = tem_host_by_peer(core, peer, peer_len);

    if (tem_out_host_connected(h)) {
        core->stats.revoked++;
        tem_out_bye(core, h->peer, h->peer_len, reason);
        tem_host_gone(core, h, reason);
    }
}

/* Returns a slot for a new host: a never used one, else the one gone the
 * longest ago; NULL if every host is connected. */
static struct tem_host *
tem_host_alloc(struct tem_core *core)
{
    struct tem_host *h = NULL;

    if (core->n_host_slots < core->cfg.max_hosts) {
        h = xzalloc(sizeof *h);
        h->slot = core->n_host_slots;
        tproto_batch_init(&h->out);
        core->hosts[core->n_host_slots++] = h;
        return h;
    }
    for (uint32_t i = 0; i < core->n_host_slots; i++) {
        struct tem_host *g = core->hosts[i];
        if (g->state != TEM_HOST_CONNECTED
            && (!h || g->gone_ns < h->gone_ns)) {
            h = g;
        }
    }
    if (h) {
        /* Forget the old host's drill-downs and counters. */
        for (size_t i = 0; i < core->n_events; i++) {
            if (core->events[i]->drill_until) {
                core->events[i]->drill_until[h->slot] = 0;
            }
        }
        free(h->prefixes);
        free(h->software);
        free(h->held);
        tem_out_pollq_free(h->pollq);
        uint32_t slot = h->slot;
        struct tproto_batch out = h->out;
        memset(h, 0, sizeof *h);
        h->slot = slot;
        h->out = out;
    }
    return h;
}

static void
tem_host_hello(struct tem_core *core, const void *peer, size_t peer_len,
               const char *auth_id, struct tem_host *cur,
               const Trumpet__Hello *hello)
{
    uint32_t version = tproto_version_choose(hello->version_min,
                                             hello->version_max);
    char reason[256];

    core->stats.hellos++;
    if (auth_id && strcmp(auth_id, hello->host_id)) {
        /* Checked first: a host never disturbs another's session. */
        core->stats.auth_mismatch++;
        snprintf(reason, sizeof reason, "host id '%s' is not the one "
                 "bound to this connection's key ('%s', the TEM's "
                 "allow-list)", hello->host_id, auth_id);
        goto refuse;
    }
    if (!version) {
        snprintf(reason, sizeof reason, "no common protocol version: host "
                 "%s speaks versions %"PRIu32"..%"PRIu32", the TEM speaks "
                 "%d..%d", hello->host_id, hello->version_min,
                 hello->version_max, TPROTO_VERSION_MIN, TPROTO_VERSION_MAX);
        goto refuse;
    }
    if (hello->epoch_ns != core->cfg.epoch_ns) {
        char a[32], b[32];
        tpm_time_format(hello->epoch_ns, a, sizeof a);
        tpm_time_format(core->cfg.epoch_ns, b, sizeof b);
        snprintf(reason, sizeof reason, "epoch mismatch: host %s uses "
                 "epochs of %s, the TEM of %s (its --epoch)",
                 hello->host_id, a, b);
        goto refuse;
    }

    /* A new Hello on a live session restarts it. */
    if (cur) {
        tem_host_gone(core, cur, "new Hello on the same connection");
    }
    struct tem_host *h = tem_host_by_id(core, hello->host_id);
    if (h && h->state == TEM_HOST_CONNECTED) {
        core->stats.replaced++;
        tem_out_bye(core, h->peer, h->peer_len, "replaced by a new session of "
                    "the same host id");
        tem_host_gone(core, h, "replaced by a new session from another peer");
    }
    bool new_slot = !h;
    if (!h) {
        h = tem_host_alloc(core);
        if (!h) {
            snprintf(reason, sizeof reason, "too many hosts: %"PRIu32" "
                     "connected (the TEM's --max-hosts)",
                     core->cfg.max_hosts);
            goto refuse;
        }
    }

    uint64_t now = tem_core_now(core);
    snprintf(h->id, sizeof h->id, "%s", hello->host_id);
    if (new_slot) {
        tem_host_dos_restore(core, h);
    }
    memcpy(h->peer, peer, peer_len);
    h->peer_len = peer_len;
    free(h->prefixes);
    h->n_prefixes = hello->n_prefixes;
    h->prefixes = xcalloc(h->n_prefixes, sizeof *h->prefixes);
    for (size_t i = 0; i < h->n_prefixes; i++) {
        tproto_prefix_from_msg(hello->prefixes[i], &h->prefixes[i]);
    }
    free(h->software);
    h->software = hello->software ? xstrdup(hello->software) : NULL;
    h->n_pmds = hello->n_pmd_ids;
    h->version = version;
    tem_host_seq_hello(h, hello);
    h->state = TEM_HOST_CONNECTED;
    h->session = ++core->session_seq;
    h->connected_ns = h->last_rx_ns = h->last_hb_tx_ns = now;
    h->silent_from_ns = now;
    h->gone_reason[0] = '\0';
    h->stats.sessions++;
    tem_host_peer_insert(core, h);
    core->stats.sessions++;

    tproto_add_welcome(tem_out_batch(core, h, 64 + strlen(core->cfg.tem_id)),
                       version, core->cfg.tem_id, tem_core_real(core),
                       core->cfg.heartbeat_ms);
    tem_log_rl(core, &core->rl_session, TPM_LOG_INFO,
               "host %s connected (protocol version %"PRIu32", %zu "
               "prefixes, %"PRIu32" monitors%s%s)", h->id, version,
               h->n_prefixes, h->n_pmds, h->software ? ", " : "",
               h->software ? h->software : "");
    /* The host may have restarted: its DoS threshold again, before its
     * triggers. */
    tem_host_dos_send(core, h);
    tem_event_reconcile_all(core, now);
    return;

refuse:
    core->stats.refused++;
    tem_log_rl(core, &core->rl_session, TPM_LOG_WARN, "refusing host: %s",
               reason);
    tem_out_refuse(core, peer, peer_len, reason);
}

static void
tem_host_ack(struct tem_core *core, struct tem_host *h, uint64_t cookie,
             uint32_t event_id, const char *reason)
{
    struct tem_event *e = tem_event_by_id(core, event_id);
    int32_t idx = e ? e->member_of[h->slot] : -1;

    if (reason) {
        core->stats.nacks++;
        h->stats.nacks++;
    } else {
        core->stats.acks++;
        h->stats.acks++;
    }
    if (!event_id) {
        /* The answer to a Configure. */
        if (!tem_host_dos_answer(core, h, cookie, reason) && reason) {
            tem_log_rl(core, &core->rl_install, TPM_LOG_WARN,
                       "host %s refused configure %"PRIu64" (since "
                       "superseded): %s", h->id, cookie, reason);
        }
        return;
    }
    if (idx < 0 || e->members[idx].cookie != cookie
        || e->members[idx].session != h->session) {
        /* The ack of a Remove, or of an Install since replaced. */
        if (reason) {
            tem_log_rl(core, &core->rl_install, TPM_LOG_WARN,
                       "host %s refused command %"PRIu64" for event id "
                       "%"PRIu32": %s", h->id, cookie, event_id, reason);
        }
        return;
    }
    struct tem_member *m = &e->members[idx];
    if (reason) {
        m->state = TEM_INSTALL_NACKED;
        free(m->reason);
        m->reason = xstrdup(reason);
        e->stats.nacks++;
        tem_log_rl(core, &core->rl_install, TPM_LOG_WARN,
                   "host %s refused to install event %s: %s", h->id,
                   e->name, reason);
    } else {
        m->state = TEM_INSTALL_ACKED;
    }
}

static void
tem_host_message(struct tem_core *core, struct tem_host *h,
                 const Trumpet__Message *msg)
{
    switch (msg->body_case) {
    case TRUMPET__MESSAGE__BODY_SATISFACTION: {
        const Trumpet__Satisfaction *s = msg->satisfaction;
        if (tem_host_report_take(core, h, s->has_seq, s->seq,
                                 s->has_late && s->late)) {
            tem_decide_satisfaction(core, h, s);
        }
        break;
    }
    case TRUMPET__MESSAGE__BODY_POLL_REPLY: {
        const Trumpet__PollReply *r = msg->poll_reply;
        if (tem_host_report_take(core, h, r->has_seq, r->seq,
                                 r->has_late && r->late)) {
            tem_decide_poll_reply(core, h, r);
        }
        break;
    }
    case TRUMPET__MESSAGE__BODY_POLL_BATCH_REPLY:
        tem_decide_poll_batch_reply(core, h, msg->poll_batch_reply);
        break;
    case TRUMPET__MESSAGE__BODY_HEARTBEAT: {
        const Trumpet__HostCounters *c = msg->heartbeat->counters;
        h->stats.heartbeats++;
        if (c) {
#define MON(FIELD) if (c->has_##FIELD) { h->stats.mon_##FIELD = c->FIELD; }
            MON(packets) MON(bytes) MON(sweeps) MON(sweeps_unfinished)
            MON(reports) MON(reports_dropped) MON(dos_skipped)
            MON(dos_passed)
#undef MON
        }
        break;
    }
    case TRUMPET__MESSAGE__BODY_ACK:
        tem_host_ack(core, h, msg->ack->cookie, msg->ack->event_id, NULL);
        break;
    case TRUMPET__MESSAGE__BODY_NACK:
        tem_host_ack(core, h, msg->nack->cookie, msg->nack->event_id,
                     msg->nack->reason);
        break;
    case TRUMPET__MESSAGE__BODY_BYE: {
        char reason[160];
        snprintf(reason, sizeof reason, "said Bye (%s)",
                 msg->bye->reason ? msg->bye->reason : "no reason");
        tem_host_gone(core, h, reason);
        break;
    }
    case TRUMPET__MESSAGE__BODY_HELLO:
    case TRUMPET__MESSAGE__BODY_WELCOME:
    case TRUMPET__MESSAGE__BODY_REFUSE:
    case TRUMPET__MESSAGE__BODY_INSTALL:
    case TRUMPET__MESSAGE__BODY_REMOVE:
    case TRUMPET__MESSAGE__BODY_POLL:
    case TRUMPET__MESSAGE__BODY_POLL_BATCH:
    case TRUMPET__MESSAGE__BODY_CONFIGURE:
    case TRUMPET__MESSAGE__BODY__NOT_SET:
    case _TRUMPET__MESSAGE__BODY__CASE_IS_INT_SIZE:
    default:
        /* TEM -> host messages coming back: invalid here. */
        core->stats.invalid_msgs++;
        h->stats.invalid_msgs++;
        break;
    }
}

/* Formats who sent a frame, for logs: the session's host id, the id its
 * key is bound to, and the ZeroMQ peer id in hex. */
static void
tem_host_peer_name(const struct tem_host *h, const char *auth_id,
                   const void *peer, size_t peer_len, char *buf, size_t size)
{
    const uint8_t *p = peer;
    size_t n = snprintf(buf, size, "peer 0x");

    for (size_t i = 0; i < peer_len && i < 16 && n + 3 < size; i++) {
        n += snprintf(buf + n, size - n, "%02x", p[i]);
    }
    if (h && n < size) {
        n += snprintf(buf + n, size - n, " (host %s)", h->id);
    }
    if (auth_id && n < size) {
        snprintf(buf + n, size - n, " (key of %s)", auth_id);
    }
}

void
tem_core_input(struct tem_core *core, const void *peer, size_t peer_len,
               const void *data, size_t len)
{
    tem_core_input_auth(core, peer, peer_len, NULL, data, len);
}

void
tem_core_input_auth(struct tem_core *core, const void *peer, size_t peer_len,
                    const char *auth_id, const void *data, size_t len)
{
    struct tem_host *h = tem_host_by_peer(core, peer, peer_len);
    const char *why;
    Trumpet__Frame *frame;
    char who[160];

    core->stats.frames_in++;
    if (h) {
        h->stats.frames_in++;
    }
    if (!peer_len || peer_len > sizeof h->peer) {
        core->stats.invalid_frames++;
        return;
    }
    if (h && auth_id && strcmp(h->id, auth_id)) {
        /* The session's host id is not the key's: never act on it. */
        core->stats.auth_mismatch++;
        h->stats.invalid_frames++;
        tem_host_peer_name(h, auth_id, peer, peer_len, who, sizeof who);
        tem_log_rl(core, &core->rl_input, TPM_LOG_WARN, "frame from %s "
                   "dropped: its key is bound to host id %s", who, auth_id);
        return;
    }
    frame = tproto_decode(data, len, &why);
    if (!frame) {
        core->stats.invalid_frames++;
        if (h) {
            h->stats.invalid_frames++;
        } else {
            core->stats.unknown_peer++;
        }
        tem_host_peer_name(h, auth_id, peer, peer_len, who, sizeof who);
        tem_log_rl(core, &core->rl_input, TPM_LOG_WARN, "invalid frame "
                   "(%zu bytes) from %s: %s", len, who, why);
        return;
    }

    bool session_only = !tproto_version_supported(frame->version);
    bool said_bye = false;
    uint64_t rx_ns = 0;         /* The clock, read once a frame. */
    for (size_t i = 0; i < frame->n_messages; i++) {
        const Trumpet__Message *msg = frame->messages[i];
        const char *invalid = tproto_validate(msg);

        core->stats.msgs_in++;
        if (h) {
            h->stats.msgs_in++;
        }
        if (invalid) {
            core->stats.invalid_msgs++;
            if (h) {
                h->stats.invalid_msgs++;
            }
            tem_host_peer_name(h, auth_id, peer, peer_len, who, sizeof who);
            tem_log_rl(core, &core->rl_input, TPM_LOG_WARN, "invalid "
                       "message from %s: %s", who, invalid);
            continue;
        }
        if (msg->body_case == TRUMPET__MESSAGE__BODY_HELLO) {
            tem_host_hello(core, peer, peer_len, auth_id, h, msg->hello);
            h = tem_host_by_peer(core, peer, peer_len);
            said_bye = true;    /* Refused: the Refuse says it all. */
        } else if (!h) {
            /* Not in session: ask for Hello (but never answer a Bye or
             * Refuse). */
            core->stats.unknown_peer++;
            if (!said_bye && msg->body_case != TRUMPET__MESSAGE__BODY_BYE
                && msg->body_case != TRUMPET__MESSAGE__BODY_REFUSE) {
                tem_out_bye(core, peer, peer_len, "unknown session");
                said_bye = true;
            }
        } else if (session_only) {
            if (msg->body_case == TRUMPET__MESSAGE__BODY_BYE) {
                tem_host_message(core, h, msg);
            }
        } else {
            if (!rx_ns) {
                rx_ns = tem_core_now(core);
            }
            h->last_rx_ns = h->silent_from_ns = rx_ns;
            tem_host_message(core, h, msg);
        }
        if (h && h->state != TEM_HOST_CONNECTED) {
            h = NULL;
        }
    }
    tproto_free(frame);
}

/* ---------------------------------------------------------------------- */
/* Timers. */

/* The hosts' timers: heartbeats out, silent hosts gone.  Returns when
 * they next need to run (at the latest half a heartbeat period on). */
uint64_t
tem_host_run(struct tem_core *core, uint64_t now)
{
    uint64_t hb_ns = core->cfg.heartbeat_ms * NS_PER_MS;
    uint64_t next = now + MAX(hb_ns / 2, NS_PER_MS);

    for (uint32_t i = 0; i < core->n_host_slots; i++) {
        struct tem_host *h = core->hosts[i];
        if (!tem_out_host_connected(h)) {
            continue;
        }
        uint64_t silent_until = (h->silent_from_ns
                                 + TEM_HEARTBEAT_MISSES * hb_ns);
        if (now >= silent_until) {
            tem_host_gone(core, h, "no message for 3 heartbeat periods");
            continue;
        }
        if (now - h->last_hb_tx_ns >= hb_ns) {
            tem_host_heartbeat(core, h, now);
        }
        next = MIN(next, h->last_hb_tx_ns + hb_ns);
        next = MIN(next, silent_until);
    }
    return next;
}

/* Extends every connected host's silence timeout by 'ns': what it sent
 * while the loop was not running is still queued (tem_core_overrun()).
 * Heartbeats out keep their time, so that the hosts hear from the TEM as
 * soon as it runs again. */
void
tem_host_delay(struct tem_core *core, uint64_t ns)
{
    for (uint32_t i = 0; i < core->n_host_slots; i++) {
        struct tem_host *h = core->hosts[i];
        if (tem_out_host_connected(h)) {
            h->silent_from_ns += ns;
        }
    }
}
