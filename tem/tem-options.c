/* SPDX-License-Identifier: Apache-2.0 */
/* trumpet-tem's command line: see tem-options.h. */
#include "tem-options.h"

#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "tem-http.h"
#include "tproto.h"
#include "util.h"


enum {
    OPT_LISTEN = 256, OPT_PUB, OPT_CTL, OPT_STATE_FILE, OPT_ALERT_FILE,
    OPT_NO_ALERTS_STDOUT, OPT_TEM_ID, OPT_EPOCH, OPT_HEARTBEAT,
    OPT_MAX_HOSTS, OPT_MAX_EVENTS, OPT_MAX_DECISIONS, OPT_POLL_DEADLINE,
    OPT_REPOLL_DELAY, OPT_DECIDED_KEEP, OPT_REBALANCE_INTERVAL,
    OPT_REBALANCE_CHANGE, OPT_HISTORY_ALPHA, OPT_WEIGHT_FLOOR,
    OPT_RECENT_ALERTS, OPT_ALERT_HISTORY, OPT_BATCH, OPT_MAX_BATCH_BYTES,
    OPT_SNDHWM, OPT_RCVHWM, OPT_KEY_FILE, OPT_ALLOW_FILE, OPT_INSECURE,
    OPT_MAX_FRAME_BYTES, OPT_MAX_REQUEST_BYTES, OPT_METRICS,
    OPT_PEER_MEMORY, OPT_EPOCH_PAST, OPT_HOST_DECISIONS, OPT_LATE_PER_TURN,
    OPT_LATE_QUEUE, OPT_MAX_SEQ_GAP,
    OPT_HANDSHAKE_TIMEOUT, OPT_FD_RESERVE, OPT_ALERT_BUFFER,
    OPT_METRICS_CONNECTIONS, OPT_METRICS_PER_IP, OPT_METRICS_TIMEOUT,
    OPT_METRICS_CACHE,
    OPT_OVERRUN_MIN, OPT_ALERTMANAGER, OPT_AM_QUEUE, OPT_AM_BATCH,
    OPT_AM_TIMEOUT, OPT_AM_BACKOFF, OPT_AM_FLUSH, OPT_AM_RESOLVE,
    OPT_AM_SEVERITY, OPT_AM_GENERATOR_URL,
    /* A cluster of TEMs on etcd (tem-cluster.h). */
    OPT_ETCD, OPT_ETCD_TTL, OPT_STANDBY, OPT_CLUSTER_KEYS,
};

static void
tem_options_usage__(void)
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
  --alert-buffer=N        bytes of alerts waiting for standard output, and\n\
                          for the alert file, each; past that, alerts\n\
                          are dropped (counted), never waited for\n\
                          (1048576)\n\
  --tem-id=ID             name sent to hosts in Welcome (tem)\n\
  --metrics=ADDR          serve Prometheus metrics over HTTP on ADDR:\n\
                          off, PORT (on 127.0.0.1), IPV4:PORT or\n\
                          [IPV6]:PORT, at /metrics (off)\n\
  --metrics-connections=N  connections to the metrics server (16)\n\
  --metrics-per-ip=N      ... from one address (4, below the total)\n\
  --metrics-timeout=TIME  a request's deadline, from its connection or\n\
                          the previous answer (5s)\n\
  --metrics-cache=TIME    a scrape within TIME of the last gets its\n\
                          text again (1s; 0: never)\n\
Prometheus Alertmanager (every alert to each URL's API v2):\n\
  --alertmanager=URL      http(s)://HOST:PORT[/PATH] of an Alertmanager\n\
                          (repeatable, at most 16; none)\n\
  --alertmanager-queue=N  alerts waiting per URL; past that the oldest\n\
                          is dropped, counted (10000)\n\
  --alertmanager-batch=N  alerts per request, at most half of the\n\
                          queue (64, or half of a smaller queue)\n\
  --alertmanager-timeout=TIME  a request's deadline (5s)\n\
  --alertmanager-backoff=TIME  longest wait between retries, which start\n\
                          at 100ms and double (30s)\n\
  --alertmanager-resolve=TIME  endsAt - startsAt: Alertmanager resolves\n\
                          an alert not renewed within TIME (300s)\n\
  --alertmanager-flush=TIME  at exit, delivery goes on for at most TIME,\n\
                          then what is left is dropped (2s)\n\
  --alertmanager-severity=S  the alerts' severity label (warning)\n\
  --alertmanager-generator-url=URL  the alerts' generatorURL (none)\n\
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
  --batch=N               frames read from each socket per turn of the\n\
                          loop, before its timers (256)\n\
  --overrun-min=TIME      the loop running its timers TIME late or more\n\
                          overran: host timeouts and poll deadlines are\n\
                          extended by the overrun plus TIME (20ms)\n\
  --max-batch-bytes=N     a host's frame is cut at about N bytes (262144)\n\
  --peer-memory=N         bytes queued per host connection and way\n\
                          (8388608): sets the high-water marks\n\
  --sndhwm=N --rcvhwm=N   ZeroMQ high-water marks, frames (default: from\n\
                          --peer-memory, at least 4)\n\
Limits:\n\
  --max-frame-bytes=N     largest frame from a host (1048576); larger\n\
                          closes the connection unread\n\
  --max-request-bytes=N   largest control request (65536); larger\n\
                          closes the connection unread\n\
  --handshake-timeout=TIME  a connection that has not completed its\n\
                          ZeroMQ handshake in TIME is closed (5s)\n\
  --fd-reserve=N          descriptors kept for the control socket and\n\
                          files: TCP connections that would take one\n\
                          are closed at once (64)\n\
  --max-hosts=N           hosts known at once (1024, at most 65535)\n\
  --max-events=N          events defined (1024)\n\
  --max-decisions=N       pending and remembered decisions (1048576)\n\
Hostile hosts:\n\
  --epoch-past=TIME       refuse reports of epochs older than TIME (300s)\n\
                          or more than 2 epochs ahead\n\
  --host-decisions=N      decisions a host may start per loop turn (4096)\n\
  --late-per-turn=N       late satisfactions decided per turn (256)\n\
  --late-queue=N          late satisfactions waiting, at most (65536)\n\
  --max-seq-gap=N         larger report number jumps end the session\n\
                          (4294967296)\n\
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
A cluster of TEMs (docs/tem.md, \"Past one TEM\"):\n\
  --etcd=URL[,URL...]     be a member of the cluster on this etcd: events\n\
                          in etcd, partitioned over the members (off);\n\
                          the member id is --tem-id, else the host name\n\
  --etcd-ttl=TIME         the member's lease: lost TIME after its last\n\
                          renewal, its events move to the others (3s)\n\
  --standby               a spare: no event of its own while a member\n\
                          without it lives; stands in for a lost member\n\
  --cluster-keys=PATH     public keys of the TEMs that may be members, one\n\
                          a line (default: this TEM's own); a member is\n\
                          assigned events once it proves it holds its key\n\
\n\
TIME is a number with a unit ns, us, ms or s.  See docs/tem.md.\n");
}

/* Parses "20%" or "0.2" into 0.2 (a fraction within [min, max]). */
static double
tem_options_fraction__(const char *name, const char *arg, double min,
                       double max)
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

static const struct option tem_long_options[] = {
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
    { "peer-memory", required_argument, NULL, OPT_PEER_MEMORY },
    { "epoch-past", required_argument, NULL, OPT_EPOCH_PAST },
    { "host-decisions", required_argument, NULL, OPT_HOST_DECISIONS },
    { "late-per-turn", required_argument, NULL, OPT_LATE_PER_TURN },
    { "late-queue", required_argument, NULL, OPT_LATE_QUEUE },
    { "max-seq-gap", required_argument, NULL, OPT_MAX_SEQ_GAP },
    { "metrics-connections", required_argument, NULL,
      OPT_METRICS_CONNECTIONS },
    { "metrics-per-ip", required_argument, NULL, OPT_METRICS_PER_IP },
    { "metrics-timeout", required_argument, NULL, OPT_METRICS_TIMEOUT },
    { "metrics-cache", required_argument, NULL, OPT_METRICS_CACHE },
    { "handshake-timeout", required_argument, NULL,
      OPT_HANDSHAKE_TIMEOUT },
    { "fd-reserve", required_argument, NULL, OPT_FD_RESERVE },
    { "alert-buffer", required_argument, NULL, OPT_ALERT_BUFFER },
    { "overrun-min", required_argument, NULL, OPT_OVERRUN_MIN },
    { "alertmanager", required_argument, NULL, OPT_ALERTMANAGER },
    { "alertmanager-queue", required_argument, NULL, OPT_AM_QUEUE },
    { "alertmanager-batch", required_argument, NULL, OPT_AM_BATCH },
    { "alertmanager-timeout", required_argument, NULL, OPT_AM_TIMEOUT },
    { "alertmanager-backoff", required_argument, NULL, OPT_AM_BACKOFF },
    { "alertmanager-flush", required_argument, NULL, OPT_AM_FLUSH },
    { "alertmanager-resolve", required_argument, NULL, OPT_AM_RESOLVE },
    { "alertmanager-severity", required_argument, NULL, OPT_AM_SEVERITY },
    { "alertmanager-generator-url", required_argument, NULL,
      OPT_AM_GENERATOR_URL },
    { "etcd", required_argument, NULL, OPT_ETCD },
    { "etcd-ttl", required_argument, NULL, OPT_ETCD_TTL },
    { "standby", no_argument, NULL, OPT_STANDBY },
    { "cluster-keys", required_argument, NULL, OPT_CLUSTER_KEYS },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

/* Parses option 'ch' (written 'name') with argument 'arg' into 'c' if it
 * is one of the core's configuration.  Returns false if it is not one. */
static bool
tem_options_core__(struct tem_config *c, int ch, const char *name,
                   const char *arg)
{
    switch (ch) {
    case OPT_TEM_ID: {
        size_t len = strlen(arg);
        if (!len || len > TPROTO_MAX_ID
            || strspn(arg, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                      "abcdefghijklmnopqrstuvwxyz0123456789_.:-") != len) {
            cli_usage_error("--tem-id: '%s' is not 1 to %d characters "
                            "from A-Z a-z 0-9 _ . : -", arg, TPROTO_MAX_ID);
        }
        c->tem_id = arg;
        break;
    }
    case OPT_EPOCH:
        c->epoch_ns = cli_time(name, arg, false);
        if (c->epoch_ns > TPROTO_MAX_EPOCH_NS) {
            cli_usage_error("--epoch: at most 1 hour");
        }
        break;
    case OPT_HEARTBEAT: {
        uint64_t ns = cli_time(name, arg, false);
        if (ns < 1000000 || ns > TPROTO_MAX_HEARTBEAT_MS * 1000000ULL) {
            cli_usage_error("--heartbeat: '%s' is not from 1ms to 60s", arg);
        }
        c->heartbeat_ms = ns / 1000000;
        break;
    }
    case OPT_MAX_HOSTS:
        c->max_hosts = cli_uint(name, arg, 1, 65535);
        break;
    case OPT_MAX_EVENTS:
        c->max_events = cli_uint(name, arg, 1, 1 << 20);
        break;
    case OPT_MAX_DECISIONS:
        c->max_decisions = cli_uint(name, arg, 16, 1 << 24);
        break;
    case OPT_POLL_DEADLINE:
        c->poll_deadline_ns = cli_time(name, arg, false);
        break;
    case OPT_REPOLL_DELAY:
        c->repoll_ns = cli_time(name, arg, false);
        break;
    case OPT_DECIDED_KEEP:
        c->decided_keep_ns = cli_time(name, arg, true);
        break;
    case OPT_REBALANCE_INTERVAL:
        c->rebalance_ns = cli_time(name, arg, false);
        break;
    case OPT_REBALANCE_CHANGE:
        c->rebalance_change = tem_options_fraction__(name, arg, 0, 100);
        break;
    case OPT_HISTORY_ALPHA:
        c->ewma_alpha = tem_options_fraction__(name, arg, 0.0001, 1);
        break;
    case OPT_WEIGHT_FLOOR:
        c->weight_floor = tem_options_fraction__(name, arg, 0.0001, 1);
        break;
    case OPT_RECENT_ALERTS:
        c->recent_alerts = cli_uint(name, arg, 1, 100000);
        break;
    case OPT_ALERT_HISTORY:
        c->alert_history = cli_uint(name, arg, 1, 10000000);
        break;
    case OPT_MAX_BATCH_BYTES:
        c->max_batch_bytes = cli_uint(name, arg, 4096,
                                      TPROTO_MAX_FRAME / 2);
        break;
    case OPT_EPOCH_PAST:
        c->epoch_past_ns = cli_time(name, arg, true);
        break;
    case OPT_HOST_DECISIONS:
        c->host_decisions = cli_uint(name, arg, 1, UINT32_MAX);
        break;
    case OPT_LATE_PER_TURN:
        c->late_per_turn = cli_uint(name, arg, 1, UINT32_MAX);
        break;
    case OPT_LATE_QUEUE:
        c->late_queue = cli_uint(name, arg, 0, 1 << 24);
        break;
    case OPT_MAX_SEQ_GAP:
        c->max_seq_gap = cli_uint(name, arg, 1, UINT64_C(1) << 62);
        break;
    default:
        return false;
    }
    return true;
}

/* Parses option 'ch' (written 'name') with argument 'arg' into 'o' if it
 * is one of the daemon's limits on descriptors, connections and alert
 * output.  Returns false if it is not one. */
static bool
tem_options_limits__(struct tem_options *o, int ch, const char *name,
                     const char *arg)
{
    switch (ch) {
    case OPT_HANDSHAKE_TIMEOUT: {
        uint64_t ns = cli_time(name, arg, false);
        if (ns < 1000000 || ns > 3600 * 1000000000ULL) {
            cli_usage_error("--handshake-timeout: '%s' is not from 1ms to "
                            "1h", arg);
        }
        o->handshake_ms = ns / 1000000;
        break;
    }
    case OPT_FD_RESERVE:
        o->fd_reserve = cli_uint(name, arg, 16, 1 << 20);
        break;
    case OPT_ALERT_BUFFER:
        o->alert_buffer = cli_uint(name, arg, 65536, 1ULL << 32);
        break;
    case OPT_METRICS_CONNECTIONS:
        o->http.max_connections = cli_uint(name, arg, 1, 1024);
        break;
    case OPT_METRICS_PER_IP:
        o->http.per_ip = cli_uint(name, arg, 1, 1024);
        break;
    case OPT_METRICS_TIMEOUT:
        o->http.timeout_ns = cli_time(name, arg, false);
        if (o->http.timeout_ns < 100000000
            || o->http.timeout_ns > 3600 * 1000000000ULL) {
            cli_usage_error("--metrics-timeout: '%s' is not from 100ms to "
                            "1h", arg);
        }
        break;
    case OPT_METRICS_CACHE:
        o->http.cache_ns = cli_time(name, arg, true);
        break;
    default:
        return false;
    }
    return true;
}

/* Returns 'arg' if it is an http:// or https:// URL of at most 1024
 * printable characters (trailing slashes aside, tem-am.h drops them);
 * exits with a usage error naming option 'name' if it is not. */
static const char *
tem_options_url__(const char *name, const char *arg)
{
    size_t len = strlen(arg);
    bool ok = len <= 1024 && (!strncmp(arg, "http://", 7)
                              || !strncmp(arg, "https://", 8));
    for (size_t i = 0; ok && i < len; i++) {
        ok = arg[i] > ' ' && arg[i] < 0x7f;
    }
    while (ok && len && arg[len - 1] == '/') {
        len--;
    }
    if (!ok || len <= strlen("https://")) {
        cli_usage_error("%s: '%s' is not an http:// or https:// URL",
                        name, arg);
    }
    return arg;
}

/* Parses time 'arg' of option 'name', from 'min' to 'max' ns. */
static uint64_t
tem_options_time_range__(const char *name, const char *arg, uint64_t min,
                         uint64_t max, const char *range)
{
    uint64_t ns = cli_time(name, arg, min == 0);
    if (ns < min || ns > max) {
        cli_usage_error("%s: '%s' is not from %s", name, arg, range);
    }
    return ns;
}

/* Parses option 'ch' (written 'name') with argument 'arg' into 'a' if it
 * is one of the Alertmanager sender's.  Returns false if it is not
 * one. */
static bool
tem_options_am__(struct tem_am_config *a, int ch, const char *name,
                 const char *arg)
{
    const uint64_t s = 1000000000ULL;

    switch (ch) {
    case OPT_ALERTMANAGER:
        if (a->n_urls >= TEM_AM_MAX_URLS) {
            cli_usage_error("%s: at most %d URLs", name, TEM_AM_MAX_URLS);
        }
        a->urls[a->n_urls++] = tem_options_url__(name, arg);
        break;
    case OPT_AM_QUEUE:
        a->queue = cli_uint(name, arg, 2, 1 << 24);
        break;
    case OPT_AM_BATCH:
        a->batch = cli_uint(name, arg, 1, 1 << 16);
        break;
    case OPT_AM_TIMEOUT:
        a->timeout_ns = tem_options_time_range__(name, arg, s / 100,
                                                 3600 * s, "10ms to 1h");
        break;
    case OPT_AM_BACKOFF:
        a->backoff_max_ns = tem_options_time_range__(name, arg, s / 1000,
                                                     3600 * s, "1ms to 1h");
        break;
    case OPT_AM_FLUSH:
        a->flush_ns = tem_options_time_range__(name, arg, 0, 3600 * s,
                                               "0 to 1h");
        break;
    case OPT_AM_RESOLVE:
        a->format.resolve_ns = tem_options_time_range__(
            name, arg, s, 7 * 86400 * s, "1s to 7 days (604800s)");
        break;
    case OPT_AM_SEVERITY: {
        size_t len = strlen(arg);
        if (!len || len > 63
            || strspn(arg, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                      "abcdefghijklmnopqrstuvwxyz0123456789_.:-") != len) {
            cli_usage_error("%s: '%s' is not 1 to 63 characters from A-Z "
                            "a-z 0-9 _ . : -", name, arg);
        }
        a->format.severity = arg;
        break;
    }
    case OPT_AM_GENERATOR_URL:
        a->format.generator_url = tem_options_url__(name, arg);
        break;
    default:
        return false;
    }
    return true;
}

/* Parses option 'ch' (written 'name') with argument 'arg' into 'o' if it
 * is one of the daemon's own.  Returns false if it is not one. */
static bool
tem_options_daemon__(struct tem_options *o, int ch, const char *name,
                     const char *arg)
{
    switch (ch) {
    case OPT_LISTEN: o->listen = arg; break;
    case OPT_PUB: o->pub = arg; break;
    case OPT_CTL: o->ctl = arg; break;
    case OPT_STATE_FILE: o->state_file = arg; break;
    case OPT_ALERT_FILE: o->alert_file = arg; break;
    case OPT_NO_ALERTS_STDOUT: o->alerts_stdout = false; break;
    case OPT_BATCH:
        o->batch = cli_uint(name, arg, 1, 1 << 20);
        break;
    case OPT_OVERRUN_MIN:
        o->overrun_min_ns = cli_time(name, arg, false);
        if (o->overrun_min_ns < 1000000 || o->overrun_min_ns > 10000000000) {
            cli_usage_error("--overrun-min: '%s' is not from 1ms to 10s",
                            arg);
        }
        break;
    case OPT_SNDHWM:
        o->sndhwm = cli_uint(name, arg, 1, INT_MAX);
        break;
    case OPT_RCVHWM:
        o->rcvhwm = cli_uint(name, arg, 1, INT_MAX);
        break;
    case OPT_PEER_MEMORY:
        o->peer_memory = cli_uint(name, arg, 65536, UINT64_C(1) << 40);
        break;
    case OPT_METRICS: {
        bool off;
        char *error = tem_http_parse(arg, &off);
        if (error) {
            cli_usage_error("--metrics: %s", error);
        }
        o->metrics = arg;
        break;
    }
    case OPT_KEY_FILE: o->key_file = arg; break;
    case OPT_ALLOW_FILE: o->allow_file = arg; break;
    case OPT_INSECURE: o->insecure = true; break;
    case OPT_MAX_FRAME_BYTES:
        o->max_frame = cli_uint(name, arg, 4096, TPROTO_MAX_FRAME);
        break;
    case OPT_MAX_REQUEST_BYTES:
        o->max_request = cli_uint(name, arg, 1024, 64 * 1024 * 1024);
        break;
    default:
        return (tem_options_limits__(o, ch, name, arg)
                || tem_options_am__(&o->am, ch, name, arg));
    }
    return true;
}

/* Parses option 'ch' (written 'name') with argument 'arg' into 'o' if it
 * is one of the cluster's (tem-cluster.h).  Returns false if it is not one
 * (--tem-id is noted, and left to the core's options). */
static bool
tem_options_cluster__(struct tem_cluster_options *o, int ch,
                      const char *name, const char *arg)
{
    switch (ch) {
    case OPT_TEM_ID:
        o->tem_id_given = true;
        return false;
    case OPT_ETCD:
        if (!*arg) {
            cli_usage_error("--etcd: expected URL[,URL...], e.g. "
                            "http://127.0.0.1:2379");
        }
        o->etcd = arg;
        return true;
    case OPT_ETCD_TTL: {
        uint64_t ns = cli_time(name, arg, false);
        if (ns < 1000000000ULL || ns > 600 * 1000000000ULL
            || ns % 1000000000ULL) {
            cli_usage_error("--etcd-ttl: '%s' is not a whole number of "
                            "seconds from 1s to 600s", arg);
        }
        o->ttl_s = ns / 1000000000ULL;
        return true;
    }
    case OPT_STANDBY:
        o->standby = true;
        return true;
    case OPT_CLUSTER_KEYS:
        o->keys_file = arg;
        return true;
    default:
        return false;
    }
}

/* With --etcd and no --tem-id, the member id is the host name (its
 * characters outside an id's made '-'). */
static void
tem_options_cluster_id__(struct tem_options *o)
{
    static char name[TPROTO_MAX_ID + 1];
    char host[256];

    if (!o->cluster.etcd) {
        if (o->cluster.standby || o->cluster.keys_file) {
            cli_usage_error("--%s needs --etcd", o->cluster.standby
                            ? "standby" : "cluster-keys");
        }
        return;
    }
    if (o->cluster.tem_id_given) {
        return;
    }
    if (gethostname(host, sizeof host) || !host[0]) {
        cli_usage_error("--etcd: no --tem-id and no host name to take the "
                        "member id from");
    }
    host[sizeof host - 1] = '\0';
    host[TPROTO_MAX_ID] = '\0';
    memcpy(name, host, strlen(host) + 1);
    for (char *p = name; *p; p++) {
        if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                    "0123456789_.:-", *p)) {
            *p = '-';
        }
    }
    o->cfg.tem_id = name;
}

/* Reads trumpet-tem's command line 'argc', 'argv' into 'o' (see
 * tem-options.h); exits on an error or after --help. */
void
tem_options_parse(int argc, char *argv[], struct tem_options *o)
{
    struct tem_config *c = &o->cfg;
    struct cli_parser parser;

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
    o->overrun_min_ns = 20000000;
    o->max_frame = TPROTO_MAX_FRAME;
    o->max_request = 65536;
    o->sndhwm = o->rcvhwm = 0;
    o->peer_memory = TEM_PEER_MEMORY;
    o->handshake_ms = 5000;
    o->fd_reserve = 64;
    o->alert_buffer = 1 << 20;
    o->http = (struct tem_http_limits) TEM_HTTP_LIMITS_DEFAULT;
    o->am = (struct tem_am_config) TEM_AM_CONFIG_DEFAULT;
    o->am.batch = 0;            /* Not given: from the queue, below. */
    o->cluster = (struct tem_cluster_options) { .ttl_s = 3 };
    tem_config_init(c);

    cli_parser_init(&parser, argc, argv, "h", tem_long_options);
    for (;;) {
        int ch = cli_parser_next(&parser);
        if (ch == -1) {
            break;
        }
        if (tem_options_cluster__(&o->cluster, ch, parser.name, optarg)
            || tem_options_daemon__(o, ch, parser.name, optarg)
            || tem_options_core__(c, ch, parser.name, optarg)) {
            continue;
        }
        if (ch == 'h') {
            tem_options_usage__();
            exit(EXIT_SUCCESS);
        }
        exit(2);
    }
    if (optind < argc) {
        cli_usage_error("unexpected argument '%s'", argv[optind]);
    }
    if (o->http.per_ip >= o->http.max_connections
        && o->http.max_connections > 1) {
        cli_usage_error("--metrics-per-ip=%"PRIu32" is not below "
                        "--metrics-connections=%"PRIu32": one address "
                        "could hold every connection", o->http.per_ip,
                        o->http.max_connections);
    }
    /* The member id before anything takes the TEM's id. */
    tem_options_cluster_id__(o);
    if (!o->am.batch) {
        o->am.batch = MIN(TEM_AM_BATCH_DEFAULT, o->am.queue / 2);
    } else if (o->am.batch > o->am.queue / 2) {
        cli_usage_error("--alertmanager-batch=%zu is more than half of "
                        "--alertmanager-queue=%zu: a full queue would have "
                        "no alert to drop but those being sent",
                        o->am.batch, o->am.queue);
    }
    o->am.format.tem_id = c->tem_id;
    o->am.format.epoch_ns = c->epoch_ns;
    if (c->max_batch_bytes > o->max_frame / 2) {
        c->max_batch_bytes = MAX(4096, o->max_frame / 2);
    }
    /* A connection's queues hold at most --peer-memory bytes each way,
     * counting every frame at the largest it can be. */
    if (!o->rcvhwm) {
        o->rcvhwm = MIN(MAX(TEM_HWM_FLOOR, o->peer_memory / o->max_frame),
                        INT_MAX);
    }
    if (!o->sndhwm) {
        o->sndhwm = MIN(MAX(TEM_HWM_FLOOR,
                            o->peer_memory / c->max_batch_bytes), INT_MAX);
    }
    o->pub_hwm = MIN(MAX(TEM_HWM_FLOOR, o->peer_memory / TEM_ALERT_BYTES),
                     INT_MAX);
}
