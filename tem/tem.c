/* SPDX-License-Identifier: Apache-2.0 */
/*
 * trumpet-tem: the Trumpet Event Manager daemon (docs/tem.md).
 *
 * One thread, one zmq_poll() loop over four sockets:
 *
 *   - ROUTER (--listen) for the hosts' DEALER sockets (lib/agent.h): up to
 *     --batch frames are read per wake-up and handed to tem-core; every
 *     host's outgoing messages of one iteration leave as one frame;
 *   - XPUB (--pub) on which every alert is published (topic: event name),
 *     with ZMQ_XPUB_NODROP: an alert that a subscriber's queue
 *     (--peer-memory / 16384 alerts) cannot take is refused with EAGAIN
 *     and counted (pub_drops), and the subscriptions it reads are
 *     discarded;
 *   - REP (--ctl) for tem-ctl: one JSON request, one JSON reply;
 *   - REP on inproc://zeromq.zap.01, the ZAP handler: ZeroMQ asks it about
 *     every CURVE handshake, and it answers from the allow-list
 *     (tem-auth.h) without ever blocking;
 *
 * and, with --metrics, the metrics server's descriptor (tem-http.h:
 * libmicrohttpd without a thread, Prometheus text on GET /metrics): its
 * requests are served in this thread, so they read the core's state
 * without locks, after everything else of the turn.
 *
 * With --etcd the TEM is a member of a cluster of TEMs (tem-cluster.h):
 * the etcd client's result queue (an eventfd) is one more item; its
 * results are read after the hosts' frames and acted on (the events
 * assigned to this member defined in the core, the leader's
 * assignments) before the core's timers.  event-add and event-del then
 * go to etcd: the control socket waits for etcd's answer (no other
 * request is read meanwhile) and answers from a later turn.
 *
 * Security (docs/operations.md, "Keys"): the TEM has a CURVE key pair
 * (--key-file).  The hosts' socket is always a CURVE server: a host needs
 * a key of the allow-list (--allow-file; with --etcd also the hosts' keys
 * of /trumpet/hosts/, applied as they change), and may only say Hello as
 * the host id its key is bound to; every frame is checked against the
 * current list, so a reload (SIGHUP or tem-ctl allow-reload) or a key
 * deleted from etcd revokes at once.  With --etcd the keys of the
 * cluster's members (--cluster-keys) complete handshakes on the hosts'
 * socket too, and their only frame is another member's check that this
 * TEM holds its key (tem-probe.h), answered here.
 * The control and alerts sockets are CURVE servers for client keys when
 * they are TCP; as ipc:// sockets they are files of mode 0660 (owner and
 * group).  --insecure-plaintext turns CURVE off everywhere (and says so
 * in the log and in status).  Every socket has ZMQ_MAXMSGSIZE, so an
 * oversized frame closes its connection before it is read, and
 * ZMQ_HANDSHAKE_IVL (--handshake-timeout), so a connection that never
 * completes its handshake is closed within seconds.
 *
 * Descriptors and output (docs/operations.md, "Descriptors and
 * connections"): the soft descriptor limit is raised to the hard one and
 * a reserve is kept for the control socket and files (tem-fd.h), so a
 * flood of idle TCP connections cannot stop tem-ctl or the TEM.  Alerts
 * go to standard output and --alert-file through rings written without
 * blocking (tem-sink.h): a reader that does not read loses alerts
 * (counted), the TEM goes on.  With --alertmanager, every alert is also
 * queued for Prometheus Alertmanager (tem-am.h): threads of the sender's
 * own POST it, the loop never waits for them.
 *
 * One TEM per state file and per ipc:// socket: each is guarded by a
 * lock (flock on PATH.lock) taken before anything is written or bound.
 *
 * Each loop turn does bounded work, input first: after zmq_poll() it
 * reads what the sockets hold, each up to --batch (ZAP requests, the
 * monitors' events, the hosts' frames), then runs the timers
 * (heartbeats, deadlines, host timeouts), flushes, and serves at most
 * one control request (at most --max-request-bytes), then the metrics
 * server's pending work (at most --metrics-connections connections).
 * So an answer that came in time is read before its deadline is
 * checked, however long the loop was away; a flood of frames cannot
 * starve the timers (--batch a turn); and no client can delay hosts by
 * more than one bounded request.  The alert outputs with bytes waiting
 * are polled for POLLOUT and written first, and the subscriptions of the
 * alerts' XPUB read and discarded.  status reports the longest turn and
 * the longest request seen.
 *
 * Overruns.  Every timer is on CLOCK_MONOTONIC (the core's clocks,
 * tem-core.h).  After running the timers, the loop knows when it must
 * run them again (the core's next timer, at most TEM_POLL_MAX_MS on);
 * if it runs them --overrun-min or more later than that (the process
 * was stopped, starved, or held by a slow write or scrape), what the
 * hosts sent meanwhile is still queued, partly in the kernel: the loop
 * tells the core (tem_core_overrun()), which extends the timers that wait
 * for hosts by the overrun plus --overrun-min before they run.  Counted
 * in status and the metrics, logged rate-limited.
 *
 * The logic lives in tem-core.h and the command line in tem-options.h;
 * this file owns sockets, persistence of the event definitions
 * (tem-state.c) and the control commands.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "cli.h"
#include "clock.h"
#include "curve.h"
#include "event.h"
#include "tem-am.h"
#include "tem-auth.h"
#include "tem-cluster.h"
#include "tem-core.h"
#include "tem-fd.h"
#include "tem-http.h"
#include "tem-metrics.h"
#include "tem-options.h"
#include "tem-sink.h"
#include "tem-state.h"
#include "tproto.h"
#include "util.h"

/* ZAP requests have 6 frames and a credential (CURVE: one); more is
 * malformed. */
#define ZAP_MAX_FRAMES 8

/* Largest subscription a PUB socket takes (a topic is an event name). */
#define PUB_MAX_MSG 256

/* Longest wait in zmq_poll(), ms: the loop turns at least this often. */
#define TEM_POLL_MAX_MS 1000

struct tem_daemon {
    struct tem_options opt;
    void *zctx;
    void *router, *pub, *rep, *zap;
    char listen_ep[256], pub_ep[256], ctl_ep[256];
    struct tem_sink *out_stdout, *out_file;    /* NULL: not written. */
    struct tem_am *am;          /* NULL: no --alertmanager. */
    struct tem_core *core;
    uint64_t pub_sent, pub_drops;
    uint64_t ctl_requests, ctl_errors;

    /* Security. */
    char pub_key[TPM_CURVE_KEY_LEN + 1], sec_key[TPM_CURVE_KEY_LEN + 1];
    struct tem_allow *allow;    /* In force: the three below merged. */
    struct tem_allow *allow_file;   /* --allow-file. */
    struct tem_allow *member_keys;  /* --etcd: --cluster-keys, or NULL. */
    size_t allow_conflicts;     /* Keys of etcd or --cluster-keys left out
                                 * (tem_allow_merge()). */
    bool ctl_curve, pub_curve;  /* Client keys on those sockets. */
    uint64_t allow_reloads, allow_reload_errors;
    uint64_t zap_allowed, zap_refused, zap_malformed;
    uint64_t frames_unauthorized;   /* Key not (or no longer) allowed. */
    uint64_t ctl_unauthorized;

    /* Connections of the hosts', control and alerts sockets, from their
     * ZeroMQ monitors. */
    struct sock_counters {
        void *monitor;          /* PAIR reading the socket's events. */
        uint64_t accepted, closed;
        uint64_t failed_auth;   /* Refused by the ZAP handler. */
        uint64_t failed_protocol;   /* e.g. plaintext against CURVE. */
        uint64_t failed_other;
    } mon[3];

    /* Loop: longest turn and control request, ns. */
    uint64_t turn_max_ns, ctl_max_ns, ctl_last_ns;
    /* The core's next timer, and when the loop expects to run the timers
     * again at the latest (UINT64_MAX: before they first ran), on
     * CLOCK_MONOTONIC. */
    uint64_t next_timer_ns, timers_due_ns;

    /* Metrics server (NULL: --metrics=off). */
    struct tem_http *http;

    /* Member of a cluster of TEMs (NULL: no --etcd), its next run, and a
     * control request waiting for etcd (no other is read meanwhile). */
    struct tem_cluster *cluster;
    uint64_t cluster_next_ns;
    bool ctl_waiting;
};

static volatile sig_atomic_t stop_signal;
static volatile sig_atomic_t reload_signal;

static void
on_signal(int sig)
{
    stop_signal = sig;
}

static void
on_sighup(int sig)
{
    reload_signal = sig;
}

static void
log_hook(enum tpm_log_level level, const char *message)
{
    static const char *const names[] = { "ERR", "WARN", "INFO", "DBG" };
    char buf[64];
    uint64_t now = tpm_clock_real_ns();
    time_t secs = now / 1000000000;
    struct tm tm;

    gmtime_r(&secs, &tm);
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(stderr, "%s.%03uZ|tem|%s|%s\n", buf,
            (unsigned int) (now / 1000000 % 1000), names[level], message);
}

static void
free_msg_data(void *data, void *hint)
{
    free(data);
}

static bool
send_cb(void *aux, const void *peer, size_t peer_len, uint32_t version,
        const struct tproto_batch *batch)
{
    struct tem_daemon *d = aux;
    uint8_t *data;
    size_t len = tproto_batch_encode(batch, version, &data);
    zmq_msg_t msg;

    if (zmq_send(d->router, peer, peer_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        free(data);
        return false;
    }
    zmq_msg_init_data(&msg, data, len, free_msg_data, NULL);
    if (zmq_msg_send(&msg, d->router, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&msg);
        return false;
    }
    return true;
}

static void
alert_cb(void *aux, const char *event, const char *json)
{
    struct tem_daemon *d = aux;

    size_t len = strlen(json);

    if (d->out_stdout) {
        tem_sink_put(d->out_stdout, json, len);
    }
    if (d->out_file) {
        tem_sink_put(d->out_file, json, len);
    }
    if (d->am) {
        tem_am_put(d->am, json, len);
    }
    /* ZMQ_XPUB_NODROP: EAGAIN if a subscriber of 'event' has no room (no
     * subscriber: sent to nobody, not a drop).  The second part follows
     * the first. */
    if (zmq_send(d->pub, event, strlen(event), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0
        || zmq_send(d->pub, json, len, ZMQ_DONTWAIT) < 0) {
        d->pub_drops++;
    } else {
        d->pub_sent++;
    }
}

/* ---------------------------------------------------------------------- */
/* Control requests. */

static void cluster_ctl_reply(void *aux, struct json_object *r);

static const char *
get_string(struct json_object *req, const char *key)
{
    struct json_object *v;
    return json_object_object_get_ex(req, key, &v)
           && json_object_is_type(v, json_type_string)
           ? json_object_get_string(v) : NULL;
}

/* Reads the request's tenant filter "tun_id" (a VNI) into '*tun_id' and
 * sets '*tunp' to it, or to NULL if the request has none.  Returns NULL or
 * an error reply. */
static struct json_object *
ctl_tun_id(struct json_object *req, uint32_t *tun_id, const uint32_t **tunp)
{
    struct json_object *v;

    *tunp = NULL;
    if (!json_object_object_get_ex(req, "tun_id", &v)
        || json_object_is_type(v, json_type_null)) {
        return NULL;
    }
    int64_t n = json_object_get_int64(v);
    if (!json_object_is_type(v, json_type_int) || n < 0
        || n > TPROTO_MAX_TUN_ID) {
        return tem_reply_error("\"tun_id\" is not a VNI: expected an integer "
                               "from 0 to 16777215");
    }
    *tun_id = n;
    *tunp = tun_id;
    return NULL;
}

static struct json_object *
ctl_event_add(struct tem_daemon *d, struct json_object *req)
{
    const char *name = get_string(req, "name");
    const char *def = get_string(req, "definition");
    char *error;

    if (!name || !def) {
        return tem_reply_error("event-add needs \"name\" and \"definition\"");
    }
    error = tem_core_event_add(d->core, name, def, 0);
    if (error) {
        struct json_object *r = tem_reply_error("%s", error);
        free(error);
        return r;
    }
    error = tem_state_save(d->core, d->opt.state_file);
    if (error) {
        char *e2 = tem_core_event_del(d->core, name);
        struct json_object *r = tem_reply_error("%s (event not added)", error);
        free(e2);
        free(error);
        return r;
    }

    char *show_err;
    struct json_object *show = tem_core_event_show_json(d->core, name,
                                                        &show_err);
    struct json_object *r = json_object_new_object();
    struct json_object *id;
    json_object_object_get_ex(show, "id", &id);
    json_object_object_add(r, "name", json_object_new_string(name));
    json_object_object_add(r, "id", json_object_get(id));
    json_object_put(show);
    free(show_err);
    return tem_reply_ok(r);
}

static struct json_object *
ctl_event_del(struct tem_daemon *d, struct json_object *req)
{
    const char *name = get_string(req, "name");
    char *error;

    if (!name) {
        return tem_reply_error("event-del needs \"name\"");
    }

    /* Keep the definition to restore it if the file cannot be saved. */
    struct json_object *show = tem_core_event_show_json(d->core, name,
                                                        &error);
    if (!show) {
        struct json_object *r = tem_reply_error("%s", error);
        free(error);
        return r;
    }
    struct json_object *id, *def;
    json_object_object_get_ex(show, "id", &id);
    json_object_object_get_ex(show, "definition", &def);

    error = tem_core_event_del(d->core, name);
    if (!error) {
        error = tem_state_save(d->core, d->opt.state_file);
        if (error) {
            char *e2 = tem_core_event_add(d->core, name,
                                          json_object_get_string(def),
                                          json_object_get_int64(id));
            free(e2);
            char *msg = xasprintf("%s (event not deleted)", error);
            free(error);
            error = msg;
        }
    }
    json_object_put(show);
    if (error) {
        struct json_object *r = tem_reply_error("%s", error);
        free(error);
        return r;
    }
    return tem_reply_ok(NULL);
}

/* {"command":"dos-threshold","bytes":N[,"host":"ID"]}: 'bytes' an integer
 * in [0, 2^32-1]; without "host", every host. */
static struct json_object *
ctl_dos_threshold(struct tem_daemon *d, struct json_object *req)
{
    struct json_object *v, *result;
    const char *host = get_string(req, "host");

    if (!json_object_object_get_ex(req, "bytes", &v)
        || !json_object_is_type(v, json_type_int)) {
        return tem_reply_error("dos-threshold needs \"bytes\", an integer in "
                               "[0, %"PRIu32"] (0: off)", UINT32_MAX);
    }
    /* Past INT64_MAX, json-c gives INT64_MAX: out of range too. */
    int64_t bytes = json_object_get_int64(v);
    if (bytes < 0 || bytes > UINT32_MAX) {
        return tem_reply_error("dos-threshold: bytes %s out of range [0, "
                               "%"PRIu32"] (0: off)",
                               json_object_get_string(v), UINT32_MAX);
    }
    if (json_object_object_get_ex(req, "host", &v) && !host) {
        return tem_reply_error("dos-threshold: \"host\" is not a string");
    }
    char *error = tem_core_set_dos_threshold(d->core, host, bytes, &result);
    if (!error && (error = tem_state_save(d->core, d->opt.state_file))) {
        /* In force on the hosts already: say it is not kept. */
        char *e2 = xasprintf("%s (the threshold is set, but the TEM will "
                             "not have it after a restart)", error);
        free(error);
        error = e2;
        json_object_put(result);
    }
    if (error) {
        struct json_object *r = tem_reply_error("%s", error);
        free(error);
        return r;
    }
    return tem_reply_ok(result);
}

static void
add_int(struct json_object *o, const char *key, int64_t value)
{
    json_object_object_add(o, key, json_object_new_int64(value));
}

/* Adds "PREFIX_KEY": 'value' to 'o'. */
static void
add_int_prefixed(struct json_object *o, const char *prefix, const char *key,
                 int64_t value)
{
    char *name = xasprintf("%s_%s", prefix, key);
    add_int(o, name, value);
    free(name);
}

/* The alert outputs' counters: "stdout_*" and "file_*" for the outputs in
 * use, "pub_*" always. */
static struct json_object *
alert_output_json(const struct tem_daemon *d)
{
    struct json_object *o = json_object_new_object();
    const struct {
        const char *name;
        const struct tem_sink *sink;
    } outs[] = { { "stdout", d->out_stdout }, { "file", d->out_file } };

    for (size_t i = 0; i < ARRAY_SIZE(outs); i++) {
        struct tem_sink_stats st;
        if (!outs[i].sink) {
            continue;
        }
        tem_sink_get_stats(outs[i].sink, &st);
        add_int_prefixed(o, outs[i].name, "lines", st.lines);
        add_int_prefixed(o, outs[i].name, "dropped", st.dropped);
        add_int_prefixed(o, outs[i].name, "errors", st.errors);
        add_int_prefixed(o, outs[i].name, "pending_bytes", st.pending);
    }
    add_int(o, "pub_sent", d->pub_sent);
    add_int(o, "pub_dropped", d->pub_drops);
    return o;
}

static struct json_object *
ctl_status(struct tem_daemon *d)
{
    struct json_object *r = tem_core_status_json(d->core);
    struct json_object *ep = json_object_new_object();
    json_object_object_add(ep, "listen",
                           json_object_new_string(d->listen_ep));
    json_object_object_add(ep, "pub", json_object_new_string(d->pub_ep));
    json_object_object_add(ep, "ctl", json_object_new_string(d->ctl_ep));
    json_object_object_add(ep, "metrics", d->http
                           ? json_object_new_string(tem_http_address(d->http))
                           : NULL);
    json_object_object_add(r, "endpoints", ep);
    json_object_object_add(r, "state_file",
                           json_object_new_string(d->opt.state_file));
    json_object_object_add(r, "alert_file", d->opt.alert_file
                           ? json_object_new_string(d->opt.alert_file)
                           : NULL);
    add_int(r, "pub_drops", d->pub_drops);
    add_int(r, "ctl_requests", d->ctl_requests);
    add_int(r, "ctl_errors", d->ctl_errors);
    json_object_object_add(r, "alert_output", alert_output_json(d));
    json_object_object_add(r, "alertmanager",
                           d->am ? tem_am_status_json(d->am) : NULL);
    json_object_object_add(r, "cluster", d->cluster
                           ? tem_cluster_status_json(d->cluster) : NULL);

    struct json_object *sec = json_object_new_object();
    json_object_object_add(sec, "mode", json_object_new_string(
                               d->opt.insecure ? "insecure-plaintext"
                                               : "curve"));
    if (!d->opt.insecure) {
        json_object_object_add(sec, "public_key",
                               json_object_new_string(d->pub_key));
        json_object_object_add(sec, "allow_file",
                               json_object_new_string(d->opt.allow_file));
        add_int(sec, "hosts_allowed", d->allow->n_hosts);
        add_int(sec, "clients_allowed", d->allow->n_clients);
        add_int(sec, "member_keys", d->allow->n_members);
        add_int(sec, "keys_left_out", d->allow_conflicts);
    }
    json_object_object_add(sec, "ctl_curve",
                           json_object_new_boolean(d->ctl_curve));
    json_object_object_add(sec, "pub_curve",
                           json_object_new_boolean(d->pub_curve));
    add_int(sec, "allow_reloads", d->allow_reloads);
    add_int(sec, "allow_reload_errors", d->allow_reload_errors);
    add_int(sec, "zap_allowed", d->zap_allowed);
    add_int(sec, "zap_refused", d->zap_refused);
    add_int(sec, "zap_malformed", d->zap_malformed);
    add_int(sec, "frames_unauthorized", d->frames_unauthorized);
    add_int(sec, "ctl_unauthorized", d->ctl_unauthorized);
    static const char *const mon_names[] = { "hosts", "ctl", "pub" };
    for (size_t i = 0; i < ARRAY_SIZE(d->mon); i++) {
        const struct sock_counters *m = &d->mon[i];
        struct json_object *o = json_object_new_object();
        add_int(o, "accepted", m->accepted);
        add_int(o, "closed", m->closed);
        add_int(o, "failed_auth", m->failed_auth);
        add_int(o, "failed_protocol", m->failed_protocol);
        add_int(o, "failed_other", m->failed_other);
        char *key = xasprintf("%s_connections", mon_names[i]);
        json_object_object_add(sec, key, o);
        free(key);
    }
    json_object_object_add(r, "security", sec);

    struct json_object *lim = json_object_new_object();
    add_int(lim, "max_frame_bytes", d->opt.max_frame);
    add_int(lim, "max_request_bytes", d->opt.max_request);
    add_int(lim, "max_definition_bytes", TEM_MAX_DEFINITION);
    add_int(lim, "batch", d->opt.batch);
    add_int(lim, "handshake_timeout_ms", d->opt.handshake_ms);
    add_int(lim, "alert_buffer_bytes", d->opt.alert_buffer);
    json_object_object_add(r, "limits", lim);

    struct tem_fd_stats fs;
    tem_fd_get_stats(&fs);
    struct json_object *fo = json_object_new_object();
    add_int(fo, "limit", fs.soft);
    add_int(fo, "limit_hard", fs.hard);
    add_int(fo, "limit_at_start", fs.soft_at_start);
    add_int(fo, "reserve", fs.reserve);
    add_int(fo, "refused_reserve", fs.shed);
    add_int(fo, "refused_no_fd", fs.no_fd);
    json_object_object_add(r, "descriptors", fo);

    struct json_object *loop = json_object_new_object();
    add_int(loop, "turn_max_ns", d->turn_max_ns);
    add_int(loop, "ctl_max_ns", d->ctl_max_ns);
    add_int(loop, "ctl_last_ns", d->ctl_last_ns);
    add_int(loop, "overrun_min_ns", d->opt.overrun_min_ns);
    json_object_object_add(r, "loop", loop);

    if (d->http) {
        struct tem_http_stats hs;
        struct json_object *mo = json_object_new_object();
        tem_http_get_stats(d->http, &hs);
        add_int(mo, "requests", hs.requests);
        add_int(mo, "scrapes", hs.scrapes);
        add_int(mo, "cached", hs.cached);
        add_int(mo, "errors", hs.errors);
        add_int(mo, "timeouts", hs.timeouts);
        add_int(mo, "connections", hs.connections);
        add_int(mo, "max_connections", d->opt.http.max_connections);
        add_int(mo, "per_ip", d->opt.http.per_ip);
        add_int(mo, "timeout_ns", d->opt.http.timeout_ns);
        add_int(mo, "cache_ns", d->opt.http.cache_ns);
        json_object_object_add(r, "metrics", mo);
    } else {
        json_object_object_add(r, "metrics", NULL);
    }
    return tem_reply_ok(r);
}

/* The list in force: --allow-file's, then the cluster's member keys, then
 * the hosts' keys of etcd (/trumpet/hosts/), each without the keys
 * already listed (counted and logged). */
static void
allow_rebuild(struct tem_daemon *d)
{
    size_t dup1, dup2;
    struct tem_allow *a = tem_allow_merge(d->allow_file, d->member_keys,
                                          &dup1);
    struct tem_allow *b = tem_allow_merge(a, d->cluster
                                          ? tem_cluster_hosts(d->cluster)
                                          : NULL, &dup2);
    tem_allow_free(a);
    tem_allow_free(d->allow);
    d->allow = b;
    if (dup1 + dup2 && dup1 + dup2 != d->allow_conflicts) {
        tpm_log(TPM_LOG_WARN, "allow-list: %zu keys of --cluster-keys or "
                "etcd left out: listed already, or twice in etcd",
                dup1 + dup2);
    }
    d->allow_conflicts = dup1 + dup2;
}

/* /trumpet/hosts/ changed (tem-cluster.h). */
static void
cluster_hosts_changed(void *aux)
{
    struct tem_daemon *d = aux;

    if (!d->opt.insecure) {
        allow_rebuild(d);
        tpm_log(TPM_LOG_INFO, "allow-list: %zu host keys in etcd; %zu host "
                "keys in force", tem_cluster_hosts(d->cluster)->n_hosts,
                d->allow->n_hosts);
    }
}

/* Reads --cluster-keys, or makes the list of this TEM's own key. */
static char *
member_keys_load(struct tem_daemon *d, struct tem_allow **keysp)
{
    if (d->opt.cluster.keys_file) {
        return tem_allow_load_members(d->opt.cluster.keys_file, keysp);
    }
    *keysp = xzalloc(sizeof **keysp);
    tem_allow_add(*keysp, TEM_ALLOW_MEMBER, "member", d->pub_key);
    return NULL;
}

/* Loads --allow-file (and --cluster-keys) in place of the lists in force,
 * which stay if a file is bad.  Returns NULL or an error. */
static char *
allow_reload(struct tem_daemon *d)
{
    struct tem_allow *allow, *keys = NULL;

    if (d->opt.insecure) {
        return xstrdup("no allow-list: the TEM runs with "
                       "--insecure-plaintext");
    }
    char *error = tem_allow_load(d->opt.allow_file, &allow);
    if (!error && d->opt.cluster.etcd) {
        error = member_keys_load(d, &keys);
        if (error) {
            tem_allow_free(allow);
        }
    }
    if (error) {
        d->allow_reload_errors++;
        tpm_log(TPM_LOG_ERR, "allow-list not reloaded, the previous one "
                "stays: %s", error);
        return error;
    }
    tem_allow_free(d->allow_file);
    d->allow_file = allow;
    if (keys) {
        if (d->cluster) {
            tem_cluster_set_member_keys(d->cluster, keys);
        }
        tem_allow_free(d->member_keys);
        d->member_keys = keys;
    }
    allow_rebuild(d);
    d->allow_reloads++;
    tpm_log(TPM_LOG_INFO, "allow-list %s loaded: %zu host keys, %zu client "
            "keys", d->opt.allow_file, allow->n_hosts, allow->n_clients);
    return NULL;
}

static struct json_object *
ctl_allow_reload(struct tem_daemon *d)
{
    char *error = allow_reload(d);
    if (error) {
        struct json_object *r = tem_reply_error("%s", error);
        free(error);
        return r;
    }
    struct json_object *r = json_object_new_object();
    json_object_object_add(r, "allow_file",
                           json_object_new_string(d->opt.allow_file));
    json_object_object_add(r, "hosts_allowed",
                           json_object_new_int64(d->allow->n_hosts));
    json_object_object_add(r, "clients_allowed",
                           json_object_new_int64(d->allow->n_clients));
    return tem_reply_ok(r);
}

static struct json_object *
ctl_dispatch(struct tem_daemon *d, const char *text, size_t len)
{
    struct json_tokener *tok = json_tokener_new();
    struct json_object *req = json_tokener_parse_ex(tok, text, len);
    struct json_object *r = NULL;
    const char *cmd;
    char *error = NULL;
    const uint32_t *tun = NULL;
    uint32_t tun_id;

    if (!req || json_tokener_get_error(tok) != json_tokener_success
        || !json_object_is_type(req, json_type_object)) {
        r = tem_reply_error("request is not a JSON object");
        goto out;
    }
    cmd = get_string(req, "command");
    if (!cmd) {
        r = tem_reply_error("request has no \"command\"");
    } else if ((r = ctl_tun_id(req, &tun_id, &tun))) {
        /* A bad tenant filter. */
    } else if (d->cluster && (!strcmp(cmd, "event-add")
                              || !strcmp(cmd, "event-del"))) {
        /* NULL: answered later (cluster_ctl_reply()). */
        r = tem_cluster_ctl(d->cluster, cmd, req, cluster_ctl_reply, d);
    } else if (!strcmp(cmd, "event-add")) {
        r = ctl_event_add(d, req);
    } else if (!strcmp(cmd, "event-del")) {
        r = ctl_event_del(d, req);
    } else if (!strcmp(cmd, "event-list")) {
        r = tem_reply_ok(tem_core_event_list_json(d->core, tun));
    } else if (!strcmp(cmd, "event-show")) {
        const char *name = get_string(req, "name");
        struct json_object *o = name ? tem_core_event_show_json(d->core,
                                                                name, &error)
                                     : NULL;
        r = o ? tem_reply_ok(o)
              : tem_reply_error("%s", (name ? error
                                       : "event-show needs \"name\""));
    } else if (!strcmp(cmd, "hosts")) {
        r = tem_reply_ok(tem_core_hosts_json(d->core, tun));
    } else if (!strcmp(cmd, "alerts")) {
        struct json_object *v;
        int64_t n = 100;
        if (json_object_object_get_ex(req, "count", &v)) {
            n = json_object_get_int64(v);
        }
        r = tem_reply_ok(tem_core_alerts_json(d->core,
                                              get_string(req, "event"),
                                              tun, n > 0 ? n : 0));
        json_object_object_add(r, "pub", json_object_new_string(d->pub_ep));
    } else if (!strcmp(cmd, "status")) {
        r = ctl_status(d);
    } else if (!strcmp(cmd, "dos-threshold")) {
        r = ctl_dos_threshold(d, req);
    } else if (!strcmp(cmd, "allow-reload")) {
        r = ctl_allow_reload(d);
    } else {
        r = tem_reply_error("unknown command '%.64s': expected event-add, "
                            "event-del, event-list, event-show, hosts, "
                            "dos-threshold, alerts, allow-reload or status",
                            cmd);
    }

out:
    free(error);
    json_object_put(req);
    json_tokener_free(tok);
    return r;
}

/* Sends 'r' (and frees it) as the answer to the request read last. */
static void
ctl_reply_send(struct tem_daemon *d, struct json_object *r)
{
    struct json_object *ok;
    if (json_object_object_get_ex(r, "ok", &ok)
        && !json_object_get_boolean(ok)) {
        d->ctl_errors++;
    }
    const char *text = json_object_to_json_string_ext(
        r, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    zmq_send(d->rep, text, strlen(text), 0);
    json_object_put(r);
    tem_core_flush(d->core);
}

/* The answer of a cluster's control request that waited for etcd. */
static void
cluster_ctl_reply(void *aux, struct json_object *r)
{
    struct tem_daemon *d = aux;

    d->ctl_waiting = false;
    ctl_reply_send(d, r);
}

static void
ctl_handle(struct tem_daemon *d)
{
    zmq_msg_t msg;

    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, d->rep, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&msg);
        return;
    }
    /* A REP socket must answer once: drop extra parts, answer the
     * first. */
    int more = zmq_msg_more(&msg);
    while (more) {
        zmq_msg_t extra;
        zmq_msg_init(&extra);
        zmq_msg_recv(&extra, d->rep, 0);
        more = zmq_msg_more(&extra);
        zmq_msg_close(&extra);
    }

    d->ctl_requests++;
    struct json_object *r;
    const char *key = d->ctl_curve ? zmq_msg_gets(&msg, "User-Id") : NULL;
    const struct tem_allow_entry *e = key ? tem_allow_find(d->allow, key)
                                          : NULL;
    if (d->ctl_curve && (!key || strlen(key) != TPM_CURVE_KEY_LEN || !e
                         || e->kind != TEM_ALLOW_CLIENT)) {
        d->ctl_unauthorized++;
        tem_core_log_security(d->core, TPM_LOG_WARN, "control request "
                              "refused: key %s is no longer allowed",
                              key ? key : "?");
        r = tem_reply_error("your key is no longer in the TEM's allow-list");
    } else {
        r = ctl_dispatch(d, zmq_msg_data(&msg), zmq_msg_size(&msg));
    }
    zmq_msg_close(&msg);
    if (!r) {
        d->ctl_waiting = true;  /* A cluster's request, waiting for etcd. */
        return;
    }
    ctl_reply_send(d, r);
}

/* ---------------------------------------------------------------------- */
/* Sockets. */

/* Receives one frame from the ROUTER socket into tem-core.  Returns false
 * if there was none. */
static bool
router_recv(struct tem_daemon *d)
{
    zmq_msg_t id, body;
    bool got = false;

    zmq_msg_init(&id);
    zmq_msg_init(&body);
    if (zmq_msg_recv(&id, d->router, ZMQ_DONTWAIT) < 0) {
        goto out;
    }
    got = true;
    if (!zmq_msg_more(&id) || zmq_msg_recv(&body, d->router, 0) < 0) {
        goto out;
    }
    /* REQ-style peers put an empty delimiter first. */
    if (!zmq_msg_size(&body) && zmq_msg_more(&body)) {
        zmq_msg_close(&body);
        zmq_msg_init(&body);
        if (zmq_msg_recv(&body, d->router, 0) < 0) {
            goto out;
        }
    }
    bool extra = zmq_msg_more(&body);
    while (extra) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        zmq_msg_recv(&part, d->router, 0);
        extra = zmq_msg_more(&part);
        zmq_msg_close(&part);
    }

    const char *auth_id = NULL;
    if (!d->opt.insecure) {
        const char *key = zmq_msg_gets(&body, "User-Id");
        const struct tem_allow_entry *e
            = key && strlen(key) == TPM_CURVE_KEY_LEN
              ? tem_allow_find(d->allow, key) : NULL;
        char *answer = (e && e->kind == TEM_ALLOW_MEMBER && d->cluster
                        ? tem_cluster_probe_answer(d->cluster,
                                                   zmq_msg_data(&body),
                                                   zmq_msg_size(&body))
                        : NULL);
        if (answer) {
            /* Another member checks that this TEM holds its key. */
            if (zmq_send(d->router, zmq_msg_data(&id), zmq_msg_size(&id),
                         ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0) {
                zmq_send(d->router, answer, strlen(answer), ZMQ_DONTWAIT);
            }
            free(answer);
            goto out;
        }
        if (!e || e->kind != TEM_ALLOW_HOST) {
            /* Removed from the allow-list since it connected. */
            d->frames_unauthorized++;
            tem_core_peer_revoke(d->core, zmq_msg_data(&id),
                                 zmq_msg_size(&id), "this host's key was "
                                 "removed from the TEM's allow-list");
            tem_core_log_security(d->core, TPM_LOG_WARN, "frame from key "
                                  "%s dropped: no longer allowed",
                                  key ? key : "?");
            goto out;
        }
        auth_id = e->name;
    }
    tem_core_input_auth(d->core, zmq_msg_data(&id), zmq_msg_size(&id),
                        auth_id, zmq_msg_data(&body), zmq_msg_size(&body));
out:
    zmq_msg_close(&id);
    zmq_msg_close(&body);
    return got;
}

/* Copies frame 'm' as a string of at most 'size' - 1 bytes. */
static void
frame_str(zmq_msg_t *m, char *buf, size_t size)
{
    size_t n = MIN(zmq_msg_size(m), size - 1);
    memcpy(buf, zmq_msg_data(m), n);
    buf[n] = '\0';
}

/* Answers one ZAP request, if there is one.  Returns false if there was
 * none. */
static bool
zap_serve(struct tem_daemon *d)
{
    zmq_msg_t parts[ZAP_MAX_FRAMES];
    size_t n = 0;
    bool more = true;

    zmq_msg_init(&parts[0]);
    if (zmq_msg_recv(&parts[0], d->zap, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&parts[0]);
        return false;
    }
    more = zmq_msg_more(&parts[n++]);
    while (more) {
        zmq_msg_t extra, *m = n < ZAP_MAX_FRAMES ? &parts[n] : &extra;
        zmq_msg_init(m);
        zmq_msg_recv(m, d->zap, 0);
        more = zmq_msg_more(m);
        if (m == &extra) {
            zmq_msg_close(m);
        } else {
            n++;
        }
    }

    /* 0 version, 1 request id, 2 domain, 3 address, 4 routing id,
     * 5 mechanism, 6 credential (CURVE: the client's public key). */
    char version[8], domain[64], address[64], mechanism[16];
    char user_id[TPM_CURVE_KEY_LEN + 1] = "";
    const char *why = "malformed request";
    int status = 500;
    if (n >= 6) {
        frame_str(&parts[0], version, sizeof version);
        frame_str(&parts[2], domain, sizeof domain);
        frame_str(&parts[3], address, sizeof address);
        frame_str(&parts[5], mechanism, sizeof mechanism);
        if (!strcmp(version, "1.0")) {
            status = tem_zap_decide(d->allow, domain, mechanism,
                                    n > 6 ? zmq_msg_data(&parts[6]) : NULL,
                                    n > 6 ? zmq_msg_size(&parts[6]) : 0,
                                    user_id, &why);
        }
    }
    if (status == 200) {
        d->zap_allowed++;
    } else if (status == 400) {
        char key[TPM_CURVE_KEY_LEN + 1] = "?";
        if (n > 6 && zmq_msg_size(&parts[6]) == 32) {
            zmq_z85_encode(key, zmq_msg_data(&parts[6]), 32);
        }
        d->zap_refused++;
        tem_core_log_security(d->core, TPM_LOG_WARN, "refused a connection "
                              "from %s on %s: %s (key %s)", address, domain,
                              why, key);
    } else {
        d->zap_malformed++;
    }

    char code[8];
    snprintf(code, sizeof code, "%d", status);
    const char *reply[] = { "1.0", NULL, code, why, user_id, "" };
    for (size_t i = 0; i < ARRAY_SIZE(reply); i++) {
        int flags = i + 1 < ARRAY_SIZE(reply) ? ZMQ_SNDMORE : 0;
        if (i == 1) {
            zmq_send(d->zap, n > 1 ? zmq_msg_data(&parts[1]) : "",
                     n > 1 ? zmq_msg_size(&parts[1]) : 0, flags);
        } else {
            zmq_send(d->zap, reply[i], strlen(reply[i]), flags);
        }
    }
    for (size_t i = 0; i < n; i++) {
        zmq_msg_close(&parts[i]);
    }
    return true;
}

/* Reads and discards the subscriptions waiting on the alerts' XPUB socket
 * (at most --batch): unread, they would pile up in it. */
static void
pub_read(struct tem_daemon *d)
{
    for (uint32_t i = 0; i < d->opt.batch; i++) {
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        int rc = zmq_msg_recv(&msg, d->pub, ZMQ_DONTWAIT);
        zmq_msg_close(&msg);
        if (rc < 0) {
            return;
        }
    }
}

/* Starts counting the connections of socket 's' in 'm'. */
static void
monitor_start(struct tem_daemon *d, void *s, struct sock_counters *m,
              const char *name)
{
    char *ep = xasprintf("inproc://tem-monitor-%s", name);
    int zero = 0;

    if (zmq_socket_monitor(s, ep, ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED
                           | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL
                           | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
                           | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)) {
        tpm_log(TPM_LOG_WARN, "no connection counters for the %s socket: "
                "%s", name, zmq_strerror(errno));
    } else {
        m->monitor = zmq_socket(d->zctx, ZMQ_PAIR);
        zmq_setsockopt(m->monitor, ZMQ_LINGER, &zero, sizeof zero);
        zmq_connect(m->monitor, ep);
    }
    free(ep);
}

/* Reads the events waiting on monitor 'm' (at most 'max'). */
static void
monitor_read(struct sock_counters *m, uint32_t max)
{
    for (uint32_t i = 0; i < max; i++) {
        zmq_msg_t ev, addr;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, m->monitor, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&ev);
            return;
        }
        uint16_t event = 0;
        if (zmq_msg_size(&ev) >= 2) {
            memcpy(&event, zmq_msg_data(&ev), 2);
        }
        bool more = zmq_msg_more(&ev);
        zmq_msg_close(&ev);
        while (more) {
            zmq_msg_init(&addr);
            zmq_msg_recv(&addr, m->monitor, 0);
            more = zmq_msg_more(&addr);
            zmq_msg_close(&addr);
        }
        switch (event) {
        case ZMQ_EVENT_ACCEPTED: m->accepted++; break;
        case ZMQ_EVENT_DISCONNECTED: m->closed++; break;
        case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH: m->failed_auth++; break;
        case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
            m->failed_protocol++;
            break;
        default: m->failed_other++; break;
        }
    }
}

/* Stores in 'buf' the address to give to clients for the socket bound at
 * 'sock': its last endpoint, with a wildcard address replaced by
 * 127.0.0.1. */
static void
connect_endpoint(void *sock, char *buf, size_t size)
{
    char ep[256];
    size_t len = sizeof ep;

    if (zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, ep, &len)) {
        snprintf(buf, size, "?");
        return;
    }
    ep[sizeof ep - 1] = '\0';
    char *wild = strstr(ep, "://0.0.0.0:");
    if (!wild) {
        wild = strstr(ep, "://*:");
    }
    if (wild) {
        snprintf(buf, size, "%.*s://127.0.0.1%s", (int) (wild - ep), ep,
                 strchr(wild + 3, ':'));
    } else {
        snprintf(buf, size, "%s", ep);
    }
}

/* Takes the lock of ipc:// endpoint 'ep' (PATH.lock beside the socket
 * file, creating its directories): ZeroMQ's bind would unlink the socket
 * of a TEM already running and take its place.  Exits if another TEM
 * holds it.  Does nothing for other transports. */
static void
ipc_lock(const char *ep, const char *what)
{
    if (strncmp(ep, "ipc://", 6)) {
        return;
    }
    char *lock = xasprintf("%s.lock", ep + 6);
    char *what_ep = xasprintf("the %s socket %s", what, ep);
    int fd;
    char *error = tem_lock(lock, what_ep, &fd);
    if (error) {
        fprintf(stderr, "trumpet-tem: refusing to start: %s\n", error);
        exit(EXIT_FAILURE);
    }
    /* 'fd' stays open, and the lock held, until the process exits. */
    free(what_ep);
    free(lock);
}

/* Opens and binds a socket of 'type' at 'ep'.  'curve' makes it a CURVE
 * server of ZAP domain 'curve'; 'max_msg' bounds the messages it
 * takes. */
static void *
open_socket(struct tem_daemon *d, int type, const char *ep, const char *what,
            const char *curve, size_t max_msg, char *actual, size_t size)
{
    void *s = zmq_socket(d->zctx, type);
    int zero = 0, one = 1;
    char *error = NULL;

    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_HANDSHAKE_IVL, &d->opt.handshake_ms,
                   sizeof d->opt.handshake_ms);
    if (type == ZMQ_ROUTER) {
        zmq_setsockopt(s, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
        zmq_setsockopt(s, ZMQ_SNDHWM, &d->opt.sndhwm, sizeof d->opt.sndhwm);
        zmq_setsockopt(s, ZMQ_RCVHWM, &d->opt.rcvhwm, sizeof d->opt.rcvhwm);
    } else if (type == ZMQ_XPUB) {
        zmq_setsockopt(s, ZMQ_SNDHWM, &d->opt.pub_hwm, sizeof d->opt.pub_hwm);
        zmq_setsockopt(s, ZMQ_XPUB_NODROP, &one, sizeof one);
    }
    if (tpm_zmq_max_msg(s, max_msg)) {
        error = xasprintf("ZMQ_MAXMSGSIZE: %s", zmq_strerror(errno));
    } else if (curve) {
        error = tpm_curve_setup(s, NULL, NULL, d->sec_key, curve);
    }
    if (error) {
        fprintf(stderr, "trumpet-tem: %s socket: %s\n", what, error);
        exit(EXIT_FAILURE);
    }

    bool ipc = !strncmp(ep, "ipc://", 6);
    ipc_lock(ep, what);
    /* An ipc:// socket is a file: owner and group only. */
    mode_t old_mask = ipc ? umask(0117) : 0;
    int rc = zmq_bind(s, ep);
    int bind_errno = errno;
    if (ipc) {
        umask(old_mask);
    }
    if (rc) {
        fprintf(stderr, "trumpet-tem: cannot bind the %s socket to '%s': "
                "%s\n", what, ep, zmq_strerror(bind_errno));
        exit(EXIT_FAILURE);
    }
    if (ipc && chmod(ep + 6, 0660)) {
        fprintf(stderr, "trumpet-tem: chmod %s: %s\n", ep + 6,
                strerror(errno));
        exit(EXIT_FAILURE);
    }
    connect_endpoint(s, actual, size);
    return s;
}

/* The metrics of a scrape: the core's, then the daemon's (docs/tem.md,
 * "Metrics"). */
static void
metrics_fill(void *aux, struct tem_metrics *m)
{
    struct tem_daemon *d = aux;
    static const char *const mon_names[] = { "hosts", "ctl", "pub" };
    const char *name;

    tem_core_metrics(d->core, m);
    if (d->am) {
        tem_am_metrics(d->am, m);
    }
    if (d->cluster) {
        tem_cluster_metrics(d->cluster, m);
    }

    tem_metrics_counter(m, "trumpet_tem_alert_publish_drops_total",
                        "Alerts not published on --pub: a subscriber's "
                        "queue (--sndhwm) was full.", d->pub_drops);
    name = "trumpet_tem_alert_output_drops_total";
    tem_metrics_family(m, name, "counter", "Alerts dropped by an alert "
                       "output (stdout, file): no room in --alert-buffer, "
                       "or a write error.");
    const char *gauge = "trumpet_tem_alert_output_pending_bytes";
    const struct tem_sink *outs[] = { d->out_stdout, d->out_file };
    static const char *const out_names[] = { "stdout", "file" };
    struct tem_sink_stats st[2];
    for (size_t i = 0; i < ARRAY_SIZE(outs); i++) {
        if (outs[i]) {
            tem_sink_get_stats(outs[i], &st[i]);
            tem_metrics_sample(m, name, "output", out_names[i],
                               st[i].dropped);
        }
    }
    tem_metrics_family(m, gauge, "gauge", "Bytes of alerts waiting for "
                       "their output to take them.");
    for (size_t i = 0; i < ARRAY_SIZE(outs); i++) {
        if (outs[i]) {
            tem_metrics_sample(m, gauge, "output", out_names[i],
                               st[i].pending);
        }
    }

    struct tem_fd_stats fs;
    tem_fd_get_stats(&fs);
    name = "trumpet_tem_connections_refused_total";
    tem_metrics_family(m, name, "counter", "Connections closed at accept: "
                       "TCP ones that would take a descriptor of "
                       "--fd-reserve (reserve), any with no descriptor "
                       "left (no_fd).");
    tem_metrics_sample(m, name, "reason", "reserve", fs.shed);
    tem_metrics_sample(m, name, "reason", "no_fd", fs.no_fd);
    tem_metrics_gauge(m, "trumpet_tem_descriptor_limit", "The soft limit "
                      "of descriptors (RLIMIT_NOFILE) in force.", fs.soft);
    tem_metrics_counter(m, "trumpet_tem_ctl_requests_total",
                        "Control requests (tem-ctl) answered.",
                        d->ctl_requests);
    tem_metrics_counter(m, "trumpet_tem_ctl_errors_total",
                        "Control requests answered with an error.",
                        d->ctl_errors);

    name = "trumpet_tem_auth_refusals_total";
    tem_metrics_family(m, name, "counter", "Refusals by key: CURVE "
                       "handshakes refused (handshake), host frames whose "
                       "key is no longer allowed (frame), control requests "
                       "of a key not allowed (ctl).");
    tem_metrics_sample(m, name, "kind", "handshake", d->zap_refused);
    tem_metrics_sample(m, name, "kind", "frame", d->frames_unauthorized);
    tem_metrics_sample(m, name, "kind", "ctl", d->ctl_unauthorized);
    tem_metrics_counter(m, "trumpet_tem_handshakes_allowed_total",
                        "CURVE handshakes allowed by the allow-list.",
                        d->zap_allowed);
    tem_metrics_counter(m, "trumpet_tem_allow_reloads_total",
                        "Reloads of the allow-list.", d->allow_reloads);
    tem_metrics_counter(m, "trumpet_tem_allow_reload_errors_total",
                        "Reloads of the allow-list that failed (the list "
                        "in use was kept).", d->allow_reload_errors);

    name = "trumpet_tem_connections_accepted_total";
    tem_metrics_family(m, name, "counter",
                       "Connections accepted, by socket.");
    for (size_t i = 0; i < ARRAY_SIZE(d->mon); i++) {
        tem_metrics_sample(m, name, "socket", mon_names[i],
                           d->mon[i].accepted);
    }
    name = "trumpet_tem_connections_failed_total";
    tem_metrics_family(m, name, "counter", "Connections that failed their "
                       "handshake (authentication, protocol or other), by "
                       "socket.");
    for (size_t i = 0; i < ARRAY_SIZE(d->mon); i++) {
        const struct sock_counters *c = &d->mon[i];
        tem_metrics_sample(m, name, "socket", mon_names[i],
                           c->failed_auth + c->failed_protocol
                           + c->failed_other);
    }

    tem_metrics_gauge(m, "trumpet_tem_loop_turn_max_seconds",
                      "Longest turn of the main loop so far.",
                      d->turn_max_ns / 1e9);

    struct tem_http_stats hs;
    tem_http_get_stats(d->http, &hs);
    tem_metrics_counter(m, "trumpet_tem_metrics_scrapes_total",
                        "Scrapes of /metrics answered (this one "
                        "included, unless this text is a cached one).",
                        hs.scrapes);
    tem_metrics_counter(m, "trumpet_tem_metrics_errors_total",
                        "Faults of the metrics server (logged at most "
                        "once every 10 s).", hs.errors);
    tem_metrics_counter(m, "trumpet_tem_metrics_timeouts_total",
                        "Connections to the metrics server shut down at "
                        "their deadline (--metrics-timeout).", hs.timeouts);
}

/* Reads the key pair and the allow-list, or says that there are none. */
static void
load_keys(struct tem_daemon *d)
{
    if (d->opt.insecure) {
        tpm_log(TPM_LOG_WARN, "INSECURE: --insecure-plaintext: no keys, no "
                "encryption; anyone who reaches the sockets can claim any "
                "host id, forge alerts and read them");
        return;
    }
    if (!tpm_curve_available()) {
        fprintf(stderr, "trumpet-tem: refusing to start: this libzmq has "
                "no CURVE support (it needs libsodium)\n");
        exit(EXIT_FAILURE);
    }
    char *error = tpm_curve_read_file(d->opt.key_file, d->pub_key,
                                      d->sec_key);
    if (!error) {
        error = tem_allow_load(d->opt.allow_file, &d->allow_file);
    }
    if (!error && d->opt.cluster.etcd) {
        error = member_keys_load(d, &d->member_keys);
    }
    if (error) {
        fprintf(stderr, "trumpet-tem: refusing to start: %s (make keys with "
                "tem-ctl keygen, see --key-file, --allow-file and "
                "docs/operations.md)\n", error);
        exit(EXIT_FAILURE);
    }
    allow_rebuild(d);
    d->ctl_curve = strncmp(d->opt.ctl, "ipc://", 6) != 0;
    d->pub_curve = strncmp(d->opt.pub, "ipc://", 6) != 0;
}

/* Takes the state file's lock, loads the events of 'd' from it (and
 * saves them back, to check that it can), opens the alert file and starts
 * the metrics server.  Exits on a failure. */
static void
tem_daemon_start(struct tem_daemon *d)
{
    char *error;

    /* One TEM per state file: locked before it is read or written. */
    char *lock = tem_state_lock_path(d->opt.state_file);
    char *what = xasprintf("state file %s", d->opt.state_file);
    int lock_fd;
    error = tem_lock(lock, what, &lock_fd);
    free(what);
    free(lock);
    if (error) {
        fprintf(stderr, "trumpet-tem: refusing to start: %s\n", error);
        free(error);
        exit(EXIT_FAILURE);
    }
    size_t n_stale = tem_state_clean(d->opt.state_file);
    if (n_stale) {
        tpm_log(TPM_LOG_WARN, "removed %zu temporary files of %s left by a "
                "TEM that died while saving", n_stale, d->opt.state_file);
    }

    error = tem_state_load(d->core, d->opt.state_file);
    if (error) {
        fprintf(stderr, "trumpet-tem: refusing to start: %s\n", error);
        free(error);
        exit(EXIT_FAILURE);
    }
    error = tem_state_save(d->core, d->opt.state_file);
    if (error) {
        fprintf(stderr, "trumpet-tem: refusing to start: %s (see "
                "--state-file)\n", error);
        free(error);
        exit(EXIT_FAILURE);
    }
    if (d->opt.alert_file) {
        int fd = open(d->opt.alert_file, O_WRONLY | O_APPEND | O_CREAT
                      | O_CLOEXEC, 0666);
        if (fd < 0) {
            fprintf(stderr, "trumpet-tem: cannot open alert file %s: %s\n",
                    d->opt.alert_file, strerror(errno));
            exit(EXIT_FAILURE);
        }
        d->out_file = tem_sink_create(fd, true, d->opt.alert_buffer,
                                      d->opt.alert_file);
    }
    if (d->opt.alerts_stdout) {
        d->out_stdout = tem_sink_create(STDOUT_FILENO, false,
                                        d->opt.alert_buffer,
                                        "standard output");
    }
    if (d->opt.am.n_urls) {
        d->am = tem_am_create(&d->opt.am, &error);
        if (!d->am) {
            fprintf(stderr, "trumpet-tem: refusing to start: %s\n", error);
            free(error);
            exit(EXIT_FAILURE);
        }
        for (size_t i = 0; i < tem_am_n_urls(d->am); i++) {
            tpm_log(TPM_LOG_INFO, "alerts to Alertmanager %s/api/v2/alerts",
                    tem_am_url(d->am, i));
        }
    }

    /* Before the sockets: an address in use stops the TEM before it
     * binds anything. */
    if (strcmp(d->opt.metrics, "off")) {
        d->http = tem_http_start(d->opt.metrics, &d->opt.http, metrics_fill,
                                 d, &error);
        if (!d->http) {
            fprintf(stderr, "trumpet-tem: refusing to start: --metrics: "
                    "%s\n", error);
            free(error);
            exit(EXIT_FAILURE);
        }
        tpm_log(TPM_LOG_INFO, "metrics on http://%s/metrics",
                tem_http_address(d->http));
    }
}

/* Opens the sockets of 'd' (the ZAP handler first) and their monitors.
 * Exits on a failure. */
static void
tem_daemon_open(struct tem_daemon *d)
{
    d->zctx = zmq_ctx_new();
    if (!d->opt.insecure) {
        /* Before any CURVE socket: without a handler, ZeroMQ lets every
         * key in. */
        d->zap = zmq_socket(d->zctx, ZMQ_REP);
        int zero = 0;
        zmq_setsockopt(d->zap, ZMQ_LINGER, &zero, sizeof zero);
        tpm_zmq_max_msg(d->zap, 4096);
        if (zmq_bind(d->zap, "inproc://zeromq.zap.01")) {
            fprintf(stderr, "trumpet-tem: cannot bind the ZAP handler: "
                    "%s\n", zmq_strerror(errno));
            exit(EXIT_FAILURE);
        }
    }
    const char *hosts_zap = d->opt.insecure ? NULL : TEM_ZAP_HOSTS;
    d->router = open_socket(d, ZMQ_ROUTER, d->opt.listen,
                            "hosts' (--listen)", hosts_zap,
                            d->opt.max_frame, d->listen_ep,
                            sizeof d->listen_ep);
    d->pub = open_socket(d, ZMQ_XPUB, d->opt.pub, "alerts' (--pub)",
                         d->pub_curve ? TEM_ZAP_SUBSCRIBERS : NULL,
                         PUB_MAX_MSG,
                         d->pub_ep, sizeof d->pub_ep);
    d->rep = open_socket(d, ZMQ_REP, d->opt.ctl, "control (--ctl)",
                         d->ctl_curve ? TEM_ZAP_CLIENTS : NULL,
                         d->opt.max_request, d->ctl_ep, sizeof d->ctl_ep);
    monitor_start(d, d->router, &d->mon[0], "hosts");
    monitor_start(d, d->rep, &d->mon[1], "ctl");
    monitor_start(d, d->pub, &d->mon[2], "pub");
}

/* Reads what the sockets of 'd' hold, at most --batch of each: ZAP
 * requests, the monitors' events, the hosts' frames. */
static void
tem_daemon_input(struct tem_daemon *d)
{
    for (uint32_t i = 0; d->zap && i < d->opt.batch && zap_serve(d); i++) {
        continue;
    }
    for (size_t i = 0; i < ARRAY_SIZE(d->mon); i++) {
        if (d->mon[i].monitor) {
            monitor_read(&d->mon[i], d->opt.batch);
        }
    }
    for (uint32_t i = 0; i < d->opt.batch && router_recv(d); i++) {
        continue;
    }
}

/* Runs the core's timers and sends what they and the input queued.  If
 * the loop comes to them --overrun-min or more later than it expected,
 * the core first extends the timers that wait for hosts (see "Overruns"
 * above). */
static void
tem_daemon_timers(struct tem_daemon *d)
{
    uint64_t now = tpm_clock_mono_ns();

    if (now > d->timers_due_ns
        && now - d->timers_due_ns >= d->opt.overrun_min_ns) {
        tem_core_overrun(d->core, now - d->timers_due_ns,
                         d->opt.overrun_min_ns);
    }
    d->next_timer_ns = tem_core_run(d->core);
    tem_core_flush(d->core);
    /* A timer due already (the core has work left for the next turn) is
     * expected at once, not in the past. */
    now = tpm_clock_mono_ns();
    d->timers_due_ns = MIN(MAX(d->next_timer_ns, now),
                           now + TEM_POLL_MAX_MS * 1000000ULL);
}

/* ---------------------------------------------------------------------- */
/* A cluster of TEMs (--etcd, tem-cluster.h): its own functions, called
 * from the loop. */

/* Makes 'd' a member of the cluster of --etcd, if given: the events of
 * the state file are not used (a member decides the cluster's events
 * assigned to it).  Exits if the etcd client cannot start. */
static void
cluster_start(struct tem_daemon *d)
{
    char *error;

    if (!d->opt.cluster.etcd) {
        return;
    }
    size_t n = tem_core_n_events(d->core);
    if (n) {
        tpm_log(TPM_LOG_WARN, "--etcd: the %zu events of %s are not used: "
                "a member of a cluster decides the events that etcd "
                "assigns to it", n, d->opt.state_file);
        tem_core_event_clear(d->core);
    }
    struct tem_cluster_config cc = {
        .opt = &d->opt.cluster,
        .member_id = d->opt.cfg.tem_id,
        .listen = d->listen_ep,
        .pub = d->pub_ep,
        .public_key = d->opt.insecure ? NULL : d->pub_key,
        .secret_key = d->opt.insecure ? NULL : d->sec_key,
        .zctx = d->zctx,
        .member_keys = d->member_keys,
        .hosts_changed = cluster_hosts_changed,
        .aux = d,
    };
    d->cluster = tem_cluster_create(&cc, d->core, &error);
    if (!d->cluster) {
        fprintf(stderr, "trumpet-tem: refusing to start: --etcd: %s\n",
                error);
        free(error);
        exit(EXIT_FAILURE);
    }
}

/* Takes etcd's results (input, at most --batch) and acts on them: the
 * core's events follow the assignments, before the core's timers. */
static void
cluster_turn(struct tem_daemon *d)
{
    if (d->cluster) {
        tem_cluster_input(d->cluster, d->opt.batch);
        d->cluster_next_ns = tem_cluster_run(d->cluster);
    }
}

/* Gives the lease back, so that the other members take over at once. */
static void
cluster_stop(struct tem_daemon *d)
{
    tem_cluster_destroy(d->cluster, 500);
    d->cluster = NULL;
}

/* One turn of the loop of 'd': waits for the sockets or the core's next
 * timer, reads what the sockets hold, runs the timers, then serves one
 * control request and the metrics server.  Returns false if the loop
 * cannot go on. */
static bool
tem_daemon_turn(struct tem_daemon *d)
{
    if (reload_signal) {
        reload_signal = 0;
        free(allow_reload(d));
    }

    uint64_t now = tpm_clock_mono_ns();
    long timeout = (d->next_timer_ns <= now ? 0
                    : (long) MIN((d->next_timer_ns - now + 999999) / 1000000,
                                 TEM_POLL_MAX_MS));
    if (d->cluster) {
        long ms = d->cluster_next_ns <= now ? 0
                  : (long) MIN((d->cluster_next_ns - now + 999999) / 1000000,
                               TEM_POLL_MAX_MS);
        timeout = MIN(timeout, ms);
    }
    uint64_t http_next = d->http ? tem_http_next_run(d->http) : UINT64_MAX;
    if (http_next != UINT64_MAX) {
        long ms = http_next <= now ? 0
                  : (long) MIN((http_next - now + 999999) / 1000000,
                               TEM_POLL_MAX_MS);
        timeout = MIN(timeout, ms);
    }

    /* The hosts' and control sockets, then those present: ZAP, the
     * subscriptions of the alerts' XPUB, the metrics server, the alert
     * outputs with bytes waiting. */
    zmq_pollitem_t items[8] = {
        { .socket = d->router, .events = ZMQ_POLLIN },
        /* Not while a request waits for etcd (a cluster's). */
        { .socket = d->rep, .events = d->ctl_waiting ? 0 : ZMQ_POLLIN },
        { .socket = d->pub, .events = ZMQ_POLLIN },
    };
    size_t n_items = 3;
    size_t http_item = SIZE_MAX;
    if (d->zap) {
        items[n_items++] = (zmq_pollitem_t) { .socket = d->zap,
                                              .events = ZMQ_POLLIN };
    }
    if (d->cluster) {
        items[n_items++] = (zmq_pollitem_t) {
            .fd = tem_cluster_fd(d->cluster), .events = ZMQ_POLLIN };
    }
    if (d->http) {
        http_item = n_items;
        items[n_items++] = (zmq_pollitem_t) { .fd = tem_http_fd(d->http),
                                              .events = ZMQ_POLLIN };
    }
    struct tem_sink *sinks[] = { d->out_stdout, d->out_file };
    for (size_t i = 0; i < ARRAY_SIZE(sinks); i++) {
        if (sinks[i] && tem_sink_pending(sinks[i])) {
            items[n_items++] = (zmq_pollitem_t) {
                .fd = tem_sink_fd(sinks[i]), .events = ZMQ_POLLOUT };
        }
    }
    if (zmq_poll(items, n_items, timeout) < 0) {
        if (errno == EINTR) {
            return true;
        }
        tpm_log(TPM_LOG_ERR, "zmq_poll: %s", zmq_strerror(errno));
        return false;
    }

    /* Bounded work, input first: the alert outputs' bytes waiting, what
     * the sockets hold (whatever the poll said: more may have come
     * since), the timers, then one control request. */
    uint64_t start = tpm_clock_mono_ns();
    for (size_t i = 0; i < ARRAY_SIZE(sinks); i++) {
        if (sinks[i]) {
            tem_sink_flush(sinks[i]);
        }
    }
    if (items[2].revents & ZMQ_POLLIN) {
        pub_read(d);
    }
    tem_fd_warn();
    tem_daemon_input(d);
    cluster_turn(d);
    tem_daemon_timers(d);
    if (items[1].revents & ZMQ_POLLIN) {
        uint64_t ctl_start = tpm_clock_mono_ns();
        ctl_handle(d);
        d->ctl_last_ns = tpm_clock_mono_ns() - ctl_start;
        d->ctl_max_ns = MAX(d->ctl_max_ns, d->ctl_last_ns);
    }
    /* The metrics server last: when it has input, and when its timeouts
     * say. */
    if (d->http && (items[http_item].revents & ZMQ_POLLIN
                    || tpm_clock_mono_ns() >= http_next)) {
        tem_http_run(d->http);
    }
    d->turn_max_ns = MAX(d->turn_max_ns, tpm_clock_mono_ns() - start);
    return true;
}

/* Says goodbye to the hosts and closes everything 'd' opened. */
static void
tem_daemon_stop(struct tem_daemon *d)
{
    tpm_log(TPM_LOG_INFO, "stopping on signal %d", (int) stop_signal);
    tem_http_stop(d->http);
    cluster_stop(d);
    tem_core_bye_all(d->core, "TEM shutting down");
    tem_core_flush(d->core);
    tem_core_destroy(d->core);
    int linger = 100;           /* ms, for the Byes. */
    zmq_setsockopt(d->router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(d->router);
    zmq_close(d->pub);
    zmq_close(d->rep);
    if (d->zap) {
        zmq_close(d->zap);
    }
    for (size_t i = 0; i < ARRAY_SIZE(d->mon); i++) {
        if (d->mon[i].monitor) {
            zmq_close(d->mon[i].monitor);
        }
    }
    zmq_ctx_term(d->zctx);
    tem_allow_free(d->allow);
    tem_allow_free(d->allow_file);
    tem_allow_free(d->member_keys);
    memset(d->sec_key, 0, sizeof d->sec_key);
    if (!strncmp(d->opt.ctl, "ipc://", 6)) {
        unlink(d->opt.ctl + 6);
    }
    tem_am_destroy(d->am);
    tem_sink_destroy(d->out_stdout);
    tem_sink_destroy(d->out_file);
}

int
main(int argc, char *argv[])
{
    struct tem_daemon d;

    memset(&d, 0, sizeof d);
    cli_init("trumpet-tem", 2);
    tem_options_parse(argc, argv, &d.opt);
    tpm_log_set_hook(log_hook);
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_sighup);

    d.opt.cfg.send = send_cb;
    d.opt.cfg.alert = alert_cb;
    d.opt.cfg.aux = &d;
    d.core = tem_core_create(&d.opt.cfg);
    load_keys(&d);
    char *error = tem_fd_init(d.opt.fd_reserve);
    if (error) {
        fprintf(stderr, "trumpet-tem: refusing to start: %s\n", error);
        free(error);
        exit(EXIT_FAILURE);
    }
    tem_daemon_start(&d);
    tem_daemon_open(&d);
    cluster_start(&d);
    tpm_log(TPM_LOG_INFO, "TEM %s up: hosts on %s, alerts on %s, control on "
            "%s, %zu events from %s; %s", d.opt.cfg.tem_id, d.listen_ep,
            d.pub_ep, d.ctl_ep, tem_core_n_events(d.core),
            d.opt.state_file, d.opt.insecure ? "INSECURE plaintext"
                                             : "CURVE keys");
    if (!d.opt.insecure) {
        tpm_log(TPM_LOG_INFO, "public key %s; allow-list %s: %zu host keys, "
                "%zu client keys", d.pub_key, d.opt.allow_file,
                d.allow->n_hosts, d.allow->n_clients);
    }

    d.timers_due_ns = UINT64_MAX;
    while (!stop_signal && tem_daemon_turn(&d)) {
        continue;
    }
    tem_daemon_stop(&d);
    return EXIT_SUCCESS;
}
