/* SPDX-License-Identifier: Apache-2.0 */
/*
 * trumpet-tem: the Trumpet Event Manager daemon (docs/tem.md).
 *
 * One thread, one zmq_poll() loop over four sockets:
 *
 *   - ROUTER (--listen) for the hosts' DEALER sockets (lib/agent.h): up to
 *     --batch frames are read per wake-up and handed to tem-core; every
 *     host's outgoing messages of one iteration leave as one frame;
 *   - PUB (--pub) on which every alert is published (topic: event name);
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
 * Security (docs/operations.md, "Keys"): the TEM has a CURVE key pair
 * (--key-file).  The hosts' socket is always a CURVE server: a host needs
 * a key of the allow-list (--allow-file), and may only say Hello as the
 * host id its key is bound to; every frame is checked against the current
 * list, so a reload (SIGHUP or tem-ctl allow-reload) revokes at once.
 * The control and alerts sockets are CURVE servers for client keys when
 * they are TCP; as ipc:// sockets they are files of mode 0660 (owner and
 * group).  --insecure-plaintext turns CURVE off everywhere (and says so
 * in the log and in status).  Every socket has ZMQ_MAXMSGSIZE, so an
 * oversized frame closes its connection before it is read.
 *
 * One TEM per state file and per ipc:// socket: each is guarded by a
 * lock (flock on PATH.lock) taken before anything is written or bound.
 *
 * Each loop turn does bounded work, hosts first: ZAP answers, at most
 * --batch frames from hosts, timers (heartbeats, deadlines), then at most
 * one control request (at most --max-request-bytes), then the metrics
 * server's pending work (at most TEM_HTTP_MAX_CONNECTIONS connections),
 * so no client can delay hosts by more than one bounded request.
 * status reports the longest turn and the longest request seen.
 *
 * The logic lives in tem-core.h; this file owns options, sockets,
 * persistence of the event definitions (tem-state.c) and the control
 * commands.
 */
#include <errno.h>
#include <getopt.h>
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
#include "tem-auth.h"
#include "tem-core.h"
#include "tem-http.h"
#include "tem-metrics.h"
#include "tem-state.h"
#include "tproto.h"
#include "util.h"

/* ZAP requests have 6 frames and a credential (CURVE: one); more is
 * malformed. */
#define ZAP_MAX_FRAMES 8

/* Largest subscription a PUB socket takes (a topic is an event name). */
#define PUB_MAX_MSG 256

struct tem_options {
    const char *listen;
    const char *pub;
    const char *ctl;
    const char *state_file;
    const char *alert_file;
    const char *key_file;       /* The TEM's key pair. */
    const char *allow_file;     /* Keys allowed in. */
    const char *metrics;        /* --metrics (tem_http_parse()). */
    bool insecure;              /* --insecure-plaintext. */
    bool alerts_stdout;
    uint32_t batch;             /* Frames read per wake-up. */
    uint32_t max_frame;         /* ZMQ_MAXMSGSIZE of the hosts' socket. */
    uint32_t max_request;       /* ... of the control socket. */
    int sndhwm, rcvhwm;
    struct tem_config cfg;
};

struct tem_daemon {
    struct tem_options opt;
    void *zctx;
    void *router, *pub, *rep, *zap;
    char listen_ep[256], pub_ep[256], ctl_ep[256];
    FILE *alert_file;
    struct tem_core *core;
    uint64_t pub_drops;
    uint64_t ctl_requests, ctl_errors;

    /* Security. */
    char pub_key[TPM_CURVE_KEY_LEN + 1], sec_key[TPM_CURVE_KEY_LEN + 1];
    struct tem_allow *allow;
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

    /* Metrics server (NULL: --metrics=off). */
    struct tem_http *http;
    uint64_t http_last_run_ns;  /* Monotonic. */
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

static uint64_t
clock_cb(void *aux)
{
    return tpm_clock_real_ns();
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

    if (d->opt.alerts_stdout) {
        fputs(json, stdout);
        fputc('\n', stdout);
    }
    if (d->alert_file) {
        fputs(json, d->alert_file);
        fputc('\n', d->alert_file);
    }
    if (zmq_send(d->pub, event, strlen(event), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0
        || zmq_send(d->pub, json, strlen(json), ZMQ_DONTWAIT) < 0) {
        d->pub_drops++;
    }
}

/* ---------------------------------------------------------------------- */
/* Control requests. */

static struct json_object *
reply_error(const char *format, ...) __attribute__((format(printf, 1, 2)));

static struct json_object *
reply_error(const char *format, ...)
{
    struct json_object *r = json_object_new_object();
    va_list args;
    va_start(args, format);
    char *msg = xvasprintf(format, args);
    va_end(args);
    json_object_object_add(r, "ok", json_object_new_boolean(false));
    json_object_object_add(r, "error", json_object_new_string(msg));
    free(msg);
    return r;
}

/* Adds "ok": true to 'r' (or a new object). */
static struct json_object *
reply_ok(struct json_object *r)
{
    if (!r) {
        r = json_object_new_object();
    }
    json_object_object_add(r, "ok", json_object_new_boolean(true));
    return r;
}

static const char *
get_string(struct json_object *req, const char *key)
{
    struct json_object *v;
    return json_object_object_get_ex(req, key, &v)
           && json_object_is_type(v, json_type_string)
           ? json_object_get_string(v) : NULL;
}

static struct json_object *
ctl_event_add(struct tem_daemon *d, struct json_object *req)
{
    const char *name = get_string(req, "name");
    const char *def = get_string(req, "definition");
    char *error;

    if (!name || !def) {
        return reply_error("event-add needs \"name\" and \"definition\"");
    }
    error = tem_core_event_add(d->core, name, def, 0);
    if (error) {
        struct json_object *r = reply_error("%s", error);
        free(error);
        return r;
    }
    error = tem_state_save(d->core, d->opt.state_file);
    if (error) {
        char *e2 = tem_core_event_del(d->core, name);
        struct json_object *r = reply_error("%s (event not added)", error);
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
    return reply_ok(r);
}

static struct json_object *
ctl_event_del(struct tem_daemon *d, struct json_object *req)
{
    const char *name = get_string(req, "name");
    char *error;

    if (!name) {
        return reply_error("event-del needs \"name\"");
    }

    /* Keep the definition to restore it if the file cannot be saved. */
    struct json_object *show = tem_core_event_show_json(d->core, name,
                                                        &error);
    if (!show) {
        struct json_object *r = reply_error("%s", error);
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
        struct json_object *r = reply_error("%s", error);
        free(error);
        return r;
    }
    return reply_ok(NULL);
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
        return reply_error("dos-threshold needs \"bytes\", an integer in "
                           "[0, %"PRIu32"] (0: off)", UINT32_MAX);
    }
    /* Past INT64_MAX, json-c gives INT64_MAX: out of range too. */
    int64_t bytes = json_object_get_int64(v);
    if (bytes < 0 || bytes > UINT32_MAX) {
        return reply_error("dos-threshold: bytes %s out of range [0, "
                           "%"PRIu32"] (0: off)", json_object_get_string(v),
                           UINT32_MAX);
    }
    if (json_object_object_get_ex(req, "host", &v) && !host) {
        return reply_error("dos-threshold: \"host\" is not a string");
    }
    char *error = tem_core_set_dos_threshold(d->core, host, bytes, &result);
    if (error) {
        struct json_object *r = reply_error("%s", error);
        free(error);
        return r;
    }
    return reply_ok(result);
}

static void
add_int(struct json_object *o, const char *key, int64_t value)
{
    json_object_object_add(o, key, json_object_new_int64(value));
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
    json_object_object_add(r, "limits", lim);

    struct json_object *loop = json_object_new_object();
    add_int(loop, "turn_max_ns", d->turn_max_ns);
    add_int(loop, "ctl_max_ns", d->ctl_max_ns);
    add_int(loop, "ctl_last_ns", d->ctl_last_ns);
    json_object_object_add(r, "loop", loop);

    if (d->http) {
        struct tem_http_stats hs;
        struct json_object *mo = json_object_new_object();
        tem_http_get_stats(d->http, &hs);
        add_int(mo, "requests", hs.requests);
        add_int(mo, "scrapes", hs.scrapes);
        add_int(mo, "errors", hs.errors);
        json_object_object_add(r, "metrics", mo);
    } else {
        json_object_object_add(r, "metrics", NULL);
    }
    return reply_ok(r);
}

/* Loads --allow-file in place of the list in force, which stays if the
 * file is bad.  Returns NULL or an error. */
static char *
allow_reload(struct tem_daemon *d)
{
    struct tem_allow *allow;

    if (d->opt.insecure) {
        return xstrdup("no allow-list: the TEM runs with "
                       "--insecure-plaintext");
    }
    char *error = tem_allow_load(d->opt.allow_file, &allow);
    if (error) {
        d->allow_reload_errors++;
        tpm_log(TPM_LOG_ERR, "allow-list not reloaded, the previous one "
                "stays: %s", error);
        return error;
    }
    tem_allow_free(d->allow);
    d->allow = allow;
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
        struct json_object *r = reply_error("%s", error);
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
    return reply_ok(r);
}

static struct json_object *
ctl_dispatch(struct tem_daemon *d, const char *text, size_t len)
{
    struct json_tokener *tok = json_tokener_new();
    struct json_object *req = json_tokener_parse_ex(tok, text, len);
    struct json_object *r = NULL;
    const char *cmd;
    char *error = NULL;

    if (!req || json_tokener_get_error(tok) != json_tokener_success
        || !json_object_is_type(req, json_type_object)) {
        r = reply_error("request is not a JSON object");
        goto out;
    }
    cmd = get_string(req, "command");
    if (!cmd) {
        r = reply_error("request has no \"command\"");
    } else if (!strcmp(cmd, "event-add")) {
        r = ctl_event_add(d, req);
    } else if (!strcmp(cmd, "event-del")) {
        r = ctl_event_del(d, req);
    } else if (!strcmp(cmd, "event-list")) {
        r = reply_ok(tem_core_event_list_json(d->core));
    } else if (!strcmp(cmd, "event-show")) {
        const char *name = get_string(req, "name");
        struct json_object *o = name ? tem_core_event_show_json(d->core,
                                                                name, &error)
                                     : NULL;
        r = o ? reply_ok(o)
              : reply_error("%s", name ? error : "event-show needs \"name\"");
    } else if (!strcmp(cmd, "hosts")) {
        r = reply_ok(tem_core_hosts_json(d->core));
    } else if (!strcmp(cmd, "alerts")) {
        struct json_object *v;
        int64_t n = 100;
        if (json_object_object_get_ex(req, "count", &v)) {
            n = json_object_get_int64(v);
        }
        r = reply_ok(tem_core_alerts_json(d->core, get_string(req, "event"),
                                          n > 0 ? n : 0));
        json_object_object_add(r, "pub", json_object_new_string(d->pub_ep));
    } else if (!strcmp(cmd, "status")) {
        r = ctl_status(d);
    } else if (!strcmp(cmd, "dos-threshold")) {
        r = ctl_dos_threshold(d, req);
    } else if (!strcmp(cmd, "allow-reload")) {
        r = ctl_allow_reload(d);
    } else {
        r = reply_error("unknown command '%.64s': expected event-add, "
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
        r = reply_error("your key is no longer in the TEM's allow-list");
    } else {
        r = ctl_dispatch(d, zmq_msg_data(&msg), zmq_msg_size(&msg));
    }
    struct json_object *ok;
    if (json_object_object_get_ex(r, "ok", &ok)
        && !json_object_get_boolean(ok)) {
        d->ctl_errors++;
    }
    const char *text = json_object_to_json_string_ext(
        r, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    zmq_send(d->rep, text, strlen(text), 0);
    json_object_put(r);
    zmq_msg_close(&msg);
    tem_core_flush(d->core);
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
    if (type == ZMQ_ROUTER) {
        zmq_setsockopt(s, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
        zmq_setsockopt(s, ZMQ_SNDHWM, &d->opt.sndhwm, sizeof d->opt.sndhwm);
        zmq_setsockopt(s, ZMQ_RCVHWM, &d->opt.rcvhwm, sizeof d->opt.rcvhwm);
    } else if (type == ZMQ_PUB) {
        zmq_setsockopt(s, ZMQ_SNDHWM, &d->opt.sndhwm, sizeof d->opt.sndhwm);
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

/* ---------------------------------------------------------------------- */
/* Options. */

enum {
    OPT_LISTEN = 256, OPT_PUB, OPT_CTL, OPT_STATE_FILE, OPT_ALERT_FILE,
    OPT_NO_ALERTS_STDOUT, OPT_TEM_ID, OPT_EPOCH, OPT_HEARTBEAT,
    OPT_MAX_HOSTS, OPT_MAX_EVENTS, OPT_MAX_DECISIONS, OPT_POLL_DEADLINE,
    OPT_REPOLL_DELAY, OPT_DECIDED_KEEP, OPT_REBALANCE_INTERVAL,
    OPT_REBALANCE_CHANGE, OPT_HISTORY_ALPHA, OPT_WEIGHT_FLOOR,
    OPT_RECENT_ALERTS, OPT_ALERT_HISTORY, OPT_BATCH, OPT_MAX_BATCH_BYTES,
    OPT_SNDHWM, OPT_RCVHWM, OPT_KEY_FILE, OPT_ALLOW_FILE, OPT_INSECURE,
    OPT_MAX_FRAME_BYTES, OPT_MAX_REQUEST_BYTES, OPT_METRICS,
};

static void
usage(void)
{
    printf("\
trumpet-tem: the Trumpet Event Manager (network-wide events over hosts)\n\
usage: trumpet-tem [OPTIONS]\n\
\n\
Sockets and files:\n\
  --listen=EP             hosts' ROUTER socket (tcp://127.0.0.1:5555)\n\
  --pub=EP                alerts PUB socket (tcp://127.0.0.1:5556)\n\
  --ctl=EP                tem-ctl REP socket (ipc:///run/trumpet/tem.ctl)\n\
  --state-file=PATH       event definitions\n\
                          (/var/lib/trumpet/tem-events.json)\n\
  --alert-file=PATH       append alerts (JSON lines) to PATH (none)\n\
  --no-alerts-stdout      do not print alerts on standard output\n\
  --tem-id=ID             name sent to hosts in Welcome (tem)\n\
  --metrics=ADDR          serve Prometheus metrics over HTTP on ADDR:\n\
                          off, PORT (on 127.0.0.1), IPV4:PORT or\n\
                          [IPV6]:PORT, at /metrics (off)\n\
Keys (CURVE, see docs/operations.md):\n\
  --key-file=PATH         the TEM's key pair, from tem-ctl keygen\n\
                          (/etc/trumpet/tem.key)\n\
  --allow-file=PATH       hosts' and clients' public keys allowed in\n\
                          (/etc/trumpet/tem-allow); reloaded on SIGHUP\n\
                          and by tem-ctl allow-reload\n\
  --insecure-plaintext    no keys, no encryption: anyone who reaches the\n\
                          sockets can claim any host id (tests only)\n\
Protocol:\n\
  --epoch=TIME            epoch every host must use (10ms)\n\
  --heartbeat=TIME        heartbeat period, 3 missed = gone (1s)\n\
  --batch=N               frames read per wake-up (256)\n\
  --max-batch-bytes=N     a host's frame is cut at about N bytes (262144)\n\
  --sndhwm=N --rcvhwm=N   ZeroMQ high-water marks, frames (100000)\n\
Limits:\n\
  --max-frame-bytes=N     largest frame from a host (1048576); larger\n\
                          closes the connection unread\n\
  --max-request-bytes=N   largest control request (65536); larger\n\
                          closes the connection unread\n\
  --max-hosts=N           hosts known at once (1024, at most 65535)\n\
  --max-events=N          events defined (1024)\n\
  --max-decisions=N       pending and remembered decisions (1048576)\n\
Decisions:\n\
  --poll-deadline=TIME    decide at the latest after TIME (100ms)\n\
  --repoll-delay=TIME     re-poll a host that answered NOT_YET (1ms)\n\
  --decided-keep=TIME     remember decided keys (default:\n\
                          max(4 x poll deadline, 4 x event interval))\n\
Threshold split:\n\
  --rebalance-interval=TIME  re-split at most this often (10s)\n\
  --rebalance-change=PCT  ... when a share moves by more than PCT (20%%)\n\
  --history-alpha=X       weight of a new value in a host's history (0.25)\n\
  --weight-floor=PCT      least weight, percent of the mean (10%%)\n\
Alerts kept:\n\
  --recent-alerts=N       per event, for event-show (10)\n\
  --alert-history=N       for tem-ctl alerts (100)\n\
\n\
TIME is a number with a unit ns, us, ms or s.  See docs/tem.md.\n");
}

/* Parses "20%" or "0.2" into 0.2 (a fraction within [min, max]). */
static double
parse_fraction_opt(const char *name, const char *arg, double min, double max)
{
    char *end;
    double v = strtod(arg, &end);
    if (end != arg && *end == '%' && !end[1]) {
        v /= 100;
    } else if (end == arg || *end) {
        v = -1;
    }
    if (!(v >= min && v <= max)) {
        cli_usage_error("%s: '%s' is not a fraction from %g to %g (or a "
                        "percentage such as 20%%)", name, arg, min, max);
    }
    return v;
}

static void
parse_options(int argc, char *argv[], struct tem_options *o)
{
    static const struct option options[] = {
        { "listen", required_argument, NULL, OPT_LISTEN },
        { "pub", required_argument, NULL, OPT_PUB },
        { "ctl", required_argument, NULL, OPT_CTL },
        { "state-file", required_argument, NULL, OPT_STATE_FILE },
        { "alert-file", required_argument, NULL, OPT_ALERT_FILE },
        { "no-alerts-stdout", no_argument, NULL, OPT_NO_ALERTS_STDOUT },
        { "tem-id", required_argument, NULL, OPT_TEM_ID },
        { "epoch", required_argument, NULL, OPT_EPOCH },
        { "heartbeat", required_argument, NULL, OPT_HEARTBEAT },
        { "max-hosts", required_argument, NULL, OPT_MAX_HOSTS },
        { "max-events", required_argument, NULL, OPT_MAX_EVENTS },
        { "max-decisions", required_argument, NULL, OPT_MAX_DECISIONS },
        { "poll-deadline", required_argument, NULL, OPT_POLL_DEADLINE },
        { "repoll-delay", required_argument, NULL, OPT_REPOLL_DELAY },
        { "decided-keep", required_argument, NULL, OPT_DECIDED_KEEP },
        { "rebalance-interval", required_argument, NULL,
          OPT_REBALANCE_INTERVAL },
        { "rebalance-change", required_argument, NULL,
          OPT_REBALANCE_CHANGE },
        { "history-alpha", required_argument, NULL, OPT_HISTORY_ALPHA },
        { "weight-floor", required_argument, NULL, OPT_WEIGHT_FLOOR },
        { "recent-alerts", required_argument, NULL, OPT_RECENT_ALERTS },
        { "alert-history", required_argument, NULL, OPT_ALERT_HISTORY },
        { "batch", required_argument, NULL, OPT_BATCH },
        { "max-batch-bytes", required_argument, NULL, OPT_MAX_BATCH_BYTES },
        { "sndhwm", required_argument, NULL, OPT_SNDHWM },
        { "rcvhwm", required_argument, NULL, OPT_RCVHWM },
        { "key-file", required_argument, NULL, OPT_KEY_FILE },
        { "allow-file", required_argument, NULL, OPT_ALLOW_FILE },
        { "insecure-plaintext", no_argument, NULL, OPT_INSECURE },
        { "max-frame-bytes", required_argument, NULL, OPT_MAX_FRAME_BYTES },
        { "max-request-bytes", required_argument, NULL,
          OPT_MAX_REQUEST_BYTES },
        { "metrics", required_argument, NULL, OPT_METRICS },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct tem_config *c = &o->cfg;

    o->listen = "tcp://127.0.0.1:5555";
    o->pub = "tcp://127.0.0.1:5556";
    o->ctl = "ipc:///run/trumpet/tem.ctl";
    o->state_file = "/var/lib/trumpet/tem-events.json";
    o->alert_file = NULL;
    o->alerts_stdout = true;
    o->key_file = "/etc/trumpet/tem.key";
    o->allow_file = "/etc/trumpet/tem-allow";
    o->metrics = "off";
    o->batch = 256;
    o->max_frame = TPROTO_MAX_FRAME;
    o->max_request = 65536;
    o->sndhwm = o->rcvhwm = 100000;
    tem_config_init(c);

    struct cli_parser parser;
    cli_parser_init(&parser, argc, argv, "h", options);
    for (;;) {
        int ch = cli_parser_next(&parser);
        if (ch == -1) {
            break;
        }
        const char *name = parser.name;
        switch (ch) {
        case OPT_LISTEN: o->listen = optarg; break;
        case OPT_PUB: o->pub = optarg; break;
        case OPT_CTL: o->ctl = optarg; break;
        case OPT_STATE_FILE: o->state_file = optarg; break;
        case OPT_ALERT_FILE: o->alert_file = optarg; break;
        case OPT_NO_ALERTS_STDOUT: o->alerts_stdout = false; break;
        case OPT_TEM_ID: {
            size_t len = strlen(optarg);
            if (!len || len > TPROTO_MAX_ID
                || strspn(optarg, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                          "abcdefghijklmnopqrstuvwxyz0123456789_.:-")
                   != len) {
                cli_usage_error("--tem-id: '%s' is not 1 to %d characters "
                                "from A-Z a-z 0-9 _ . : -", optarg,
                                TPROTO_MAX_ID);
            }
            c->tem_id = optarg;
            break;
        }
        case OPT_EPOCH:
            c->epoch_ns = cli_time(name, optarg, false);
            if (c->epoch_ns > TPROTO_MAX_EPOCH_NS) {
                cli_usage_error("--epoch: at most 1 hour");
            }
            break;
        case OPT_HEARTBEAT: {
            uint64_t ns = cli_time(name, optarg, false);
            if (ns < 1000000 || ns > TPROTO_MAX_HEARTBEAT_MS * 1000000ULL) {
                cli_usage_error("--heartbeat: '%s' is not from 1ms to 60s",
                          optarg);
            }
            c->heartbeat_ms = ns / 1000000;
            break;
        }
        case OPT_MAX_HOSTS:
            c->max_hosts = cli_uint(name, optarg, 1, 65535);
            break;
        case OPT_MAX_EVENTS:
            c->max_events = cli_uint(name, optarg, 1, 1 << 20);
            break;
        case OPT_MAX_DECISIONS:
            c->max_decisions = cli_uint(name, optarg, 16, 1 << 24);
            break;
        case OPT_POLL_DEADLINE:
            c->poll_deadline_ns = cli_time(name, optarg, false);
            break;
        case OPT_REPOLL_DELAY:
            c->repoll_ns = cli_time(name, optarg, false);
            break;
        case OPT_DECIDED_KEEP:
            c->decided_keep_ns = cli_time(name, optarg, true);
            break;
        case OPT_REBALANCE_INTERVAL:
            c->rebalance_ns = cli_time(name, optarg, false);
            break;
        case OPT_REBALANCE_CHANGE:
            c->rebalance_change = parse_fraction_opt(name, optarg, 0, 100);
            break;
        case OPT_HISTORY_ALPHA:
            c->ewma_alpha = parse_fraction_opt(name, optarg, 0.0001, 1);
            break;
        case OPT_WEIGHT_FLOOR:
            c->weight_floor = parse_fraction_opt(name, optarg, 0.0001, 1);
            break;
        case OPT_RECENT_ALERTS:
            c->recent_alerts = cli_uint(name, optarg, 1, 100000);
            break;
        case OPT_ALERT_HISTORY:
            c->alert_history = cli_uint(name, optarg, 1, 10000000);
            break;
        case OPT_BATCH:
            o->batch = cli_uint(name, optarg, 1, 1 << 20);
            break;
        case OPT_MAX_BATCH_BYTES:
            c->max_batch_bytes = cli_uint(name, optarg, 4096,
                                                TPROTO_MAX_FRAME / 2);
            break;
        case OPT_SNDHWM:
            o->sndhwm = cli_uint(name, optarg, 0, INT_MAX);
            break;
        case OPT_RCVHWM:
            o->rcvhwm = cli_uint(name, optarg, 0, INT_MAX);
            break;
        case OPT_METRICS: {
            bool off;
            char *error = tem_http_parse(optarg, &off);
            if (error) {
                cli_usage_error("--metrics: %s", error);
            }
            o->metrics = optarg;
            break;
        }
        case OPT_KEY_FILE: o->key_file = optarg; break;
        case OPT_ALLOW_FILE: o->allow_file = optarg; break;
        case OPT_INSECURE: o->insecure = true; break;
        case OPT_MAX_FRAME_BYTES:
            o->max_frame = cli_uint(name, optarg, 4096,
                                          TPROTO_MAX_FRAME);
            break;
        case OPT_MAX_REQUEST_BYTES:
            o->max_request = cli_uint(name, optarg, 1024,
                                            64 * 1024 * 1024);
            break;
        case 'h':
            usage();
            exit(EXIT_SUCCESS);
        default:
            exit(2);
        }
    }
    if (optind < argc) {
        cli_usage_error("unexpected argument '%s'", argv[optind]);
    }
    if (c->max_batch_bytes > o->max_frame / 2) {
        c->max_batch_bytes = MAX(4096, o->max_frame / 2);
    }
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

    tem_metrics_counter(m, "trumpet_tem_alert_publish_drops_total",
                        "Alerts not published on --pub (high-water mark).",
                        d->pub_drops);
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
                        "included).", hs.scrapes);
    tem_metrics_counter(m, "trumpet_tem_metrics_errors_total",
                        "Faults of the metrics server (logged at most "
                        "once every 10 s).", hs.errors);
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
        error = tem_allow_load(d->opt.allow_file, &d->allow);
    }
    if (error) {
        fprintf(stderr, "trumpet-tem: refusing to start: %s (make keys with "
                "tem-ctl keygen, see --key-file, --allow-file and "
                "docs/operations.md)\n", error);
        exit(EXIT_FAILURE);
    }
    d->ctl_curve = strncmp(d->opt.ctl, "ipc://", 6) != 0;
    d->pub_curve = strncmp(d->opt.pub, "ipc://", 6) != 0;
}

int
main(int argc, char *argv[])
{
    struct tem_daemon d;
    char *error;

    memset(&d, 0, sizeof d);
    cli_init("trumpet-tem", 2);
    parse_options(argc, argv, &d.opt);
    tpm_log_set_hook(log_hook);
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_sighup);

    d.opt.cfg.clock = clock_cb;
    d.opt.cfg.send = send_cb;
    d.opt.cfg.alert = alert_cb;
    d.opt.cfg.aux = &d;
    d.core = tem_core_create(&d.opt.cfg);
    load_keys(&d);

    /* One TEM per state file: locked before it is read or written. */
    char *lock = tem_state_lock_path(d.opt.state_file);
    char *what = xasprintf("state file %s", d.opt.state_file);
    int lock_fd;
    error = tem_lock(lock, what, &lock_fd);
    free(what);
    free(lock);
    if (error) {
        fprintf(stderr, "trumpet-tem: refusing to start: %s\n", error);
        free(error);
        return EXIT_FAILURE;
    }
    size_t n_stale = tem_state_clean(d.opt.state_file);
    if (n_stale) {
        tpm_log(TPM_LOG_WARN, "removed %zu temporary files of %s left by a "
                "TEM that died while saving", n_stale, d.opt.state_file);
    }

    error = tem_state_load(d.core, d.opt.state_file);
    if (error) {
        fprintf(stderr, "trumpet-tem: refusing to start: %s\n", error);
        free(error);
        return EXIT_FAILURE;
    }
    error = tem_state_save(d.core, d.opt.state_file);
    if (error) {
        fprintf(stderr, "trumpet-tem: refusing to start: %s (see "
                "--state-file)\n", error);
        free(error);
        return EXIT_FAILURE;
    }
    if (d.opt.alert_file) {
        d.alert_file = fopen(d.opt.alert_file, "a");
        if (!d.alert_file) {
            fprintf(stderr, "trumpet-tem: cannot open alert file %s: %s\n",
                    d.opt.alert_file, strerror(errno));
            return EXIT_FAILURE;
        }
        setvbuf(d.alert_file, NULL, _IOLBF, 0);
    }

    /* Before the sockets: an address in use stops the TEM before it
     * binds anything. */
    if (strcmp(d.opt.metrics, "off")) {
        d.http = tem_http_start(d.opt.metrics, metrics_fill, &d, &error);
        if (!d.http) {
            fprintf(stderr, "trumpet-tem: refusing to start: --metrics: "
                    "%s\n", error);
            free(error);
            return EXIT_FAILURE;
        }
        tpm_log(TPM_LOG_INFO, "metrics on http://%s/metrics",
                tem_http_address(d.http));
    }

    d.zctx = zmq_ctx_new();
    if (!d.opt.insecure) {
        /* Before any CURVE socket: without a handler, ZeroMQ lets every
         * key in. */
        d.zap = zmq_socket(d.zctx, ZMQ_REP);
        int zero = 0;
        zmq_setsockopt(d.zap, ZMQ_LINGER, &zero, sizeof zero);
        tpm_zmq_max_msg(d.zap, 4096);
        if (zmq_bind(d.zap, "inproc://zeromq.zap.01")) {
            fprintf(stderr, "trumpet-tem: cannot bind the ZAP handler: "
                    "%s\n", zmq_strerror(errno));
            return EXIT_FAILURE;
        }
    }
    const char *hosts_zap = d.opt.insecure ? NULL : TEM_ZAP_HOSTS;
    d.router = open_socket(&d, ZMQ_ROUTER, d.opt.listen, "hosts' (--listen)",
                           hosts_zap, d.opt.max_frame, d.listen_ep,
                           sizeof d.listen_ep);
    d.pub = open_socket(&d, ZMQ_PUB, d.opt.pub, "alerts' (--pub)",
                        d.pub_curve ? TEM_ZAP_CLIENTS : NULL, PUB_MAX_MSG,
                        d.pub_ep, sizeof d.pub_ep);
    d.rep = open_socket(&d, ZMQ_REP, d.opt.ctl, "control (--ctl)",
                        d.ctl_curve ? TEM_ZAP_CLIENTS : NULL,
                        d.opt.max_request, d.ctl_ep, sizeof d.ctl_ep);
    monitor_start(&d, d.router, &d.mon[0], "hosts");
    monitor_start(&d, d.rep, &d.mon[1], "ctl");
    monitor_start(&d, d.pub, &d.mon[2], "pub");
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

    while (!stop_signal) {
        if (reload_signal) {
            reload_signal = 0;
            free(allow_reload(&d));
        }
        uint64_t next = tem_core_run(d.core);
        tem_core_flush(d.core);

        uint64_t now = tpm_clock_real_ns();
        long timeout = next <= now ? 0
                       : (long) MIN((next - now + 999999) / 1000000, 1000);
        zmq_pollitem_t items[] = {
            { .socket = d.router, .events = ZMQ_POLLIN },
            { .socket = d.rep, .events = ZMQ_POLLIN },
            { .socket = d.zap, .events = ZMQ_POLLIN },
            { .socket = NULL, .fd = d.http ? tem_http_fd(d.http) : -1,
              .events = ZMQ_POLLIN },
        };
        /* Without ZAP, the metrics item moves into its place. */
        size_t n_items = d.zap ? 3 : 2;
        size_t http_item = n_items;
        if (d.http) {
            items[http_item] = items[3];
            n_items++;
        }
        for (size_t i = 0; i < ARRAY_SIZE(d.mon); i++) {
            if (d.mon[i].monitor) {
                monitor_read(&d.mon[i], d.opt.batch);
            }
        }
        if (zmq_poll(items, n_items, timeout) < 0) {
            if (errno == EINTR) {
                continue;
            }
            tpm_log(TPM_LOG_ERR, "zmq_poll: %s", zmq_strerror(errno));
            break;
        }

        /* Bounded work, hosts first: handshakes, host frames, timers,
         * then one control request. */
        uint64_t start = tpm_clock_mono_ns();
        if (d.zap && items[2].revents & ZMQ_POLLIN) {
            for (uint32_t i = 0; i < d.opt.batch && zap_serve(&d); i++) {
                continue;
            }
        }
        if (items[0].revents & ZMQ_POLLIN) {
            for (uint32_t i = 0; i < d.opt.batch && router_recv(&d); i++) {
                continue;
            }
            tem_core_run(d.core);
            tem_core_flush(d.core);
        }
        if (items[1].revents & ZMQ_POLLIN) {
            uint64_t ctl_start = tpm_clock_mono_ns();
            ctl_handle(&d);
            d.ctl_last_ns = tpm_clock_mono_ns() - ctl_start;
            d.ctl_max_ns = MAX(d.ctl_max_ns, d.ctl_last_ns);
        }
        /* The metrics server last: when it has input, and once a
         * second for its timeouts. */
        if (d.http) {
            uint64_t mono = tpm_clock_mono_ns();
            if (items[http_item].revents & ZMQ_POLLIN
                || mono - d.http_last_run_ns >= 1000000000ULL) {
                d.http_last_run_ns = mono;
                tem_http_run(d.http);
            }
        }
        d.turn_max_ns = MAX(d.turn_max_ns, tpm_clock_mono_ns() - start);
    }

    tpm_log(TPM_LOG_INFO, "stopping on signal %d", (int) stop_signal);
    tem_http_stop(d.http);
    tem_core_bye_all(d.core, "TEM shutting down");
    tem_core_flush(d.core);
    tem_core_destroy(d.core);
    int linger = 100;           /* ms, for the Byes. */
    zmq_setsockopt(d.router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(d.router);
    zmq_close(d.pub);
    zmq_close(d.rep);
    if (d.zap) {
        zmq_close(d.zap);
    }
    for (size_t i = 0; i < ARRAY_SIZE(d.mon); i++) {
        if (d.mon[i].monitor) {
            zmq_close(d.mon[i].monitor);
        }
    }
    zmq_ctx_term(d.zctx);
    tem_allow_free(d.allow);
    memset(d.sec_key, 0, sizeof d.sec_key);
    if (!strncmp(d.opt.ctl, "ipc://", 6)) {
        unlink(d.opt.ctl + 6);
    }
    if (d.alert_file) {
        fclose(d.alert_file);
    }
    return EXIT_SUCCESS;
}
