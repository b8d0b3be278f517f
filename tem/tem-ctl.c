/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tem-ctl: the Trumpet Event Manager's command-line client (docs/tem.md).
 *
 * Sends one JSON request to the TEM's control socket (ZeroMQ REQ/REP) and
 * prints the reply, as text or (--json) as the reply itself.  "alerts
 * --follow" then subscribes to the TEM's alert PUB socket.
 *
 * Keys: a control endpoint other than ipc:// (a TCP one) is a CURVE
 * server: tem-ctl pins the TEM's public key (--server-key) and proves
 * its own with a client key pair (--key-file) listed in the TEM's
 * allow-list; the same goes for the alerts socket of "alerts --follow".
 * "tem-ctl keygen FILE" makes key pairs (docs/operations.md, "Keys").
 * Every socket bounds what it takes (ZMQ_MAXMSGSIZE: --max-reply-bytes),
 * and a request larger than --max-request-bytes is refused here, since
 * the TEM would close the connection without an answer.
 *
 * Exit status: 0 success, 1 the TEM answered with an error, 2 usage
 * error, 3 the TEM did not answer within --timeout.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "cli.h"
#include "curve.h"
#include "event.h"
#include "util.h"

#define JSON_PLAIN (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
#define JSON_PRETTY (JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE)

enum {
    EXIT_ERROR_REPLY = 1,
    EXIT_USAGE = 2,
    EXIT_UNREACHABLE = 3,
};

static const char *ctl_ep = "ipc:///run/trumpet/tem.ctl";
static uint64_t timeout_ns = 5000000000ULL;
static bool json_output;
static const char *server_key_arg;      /* --server-key. */
static const char *key_file;            /* --key-file. */
static bool insecure;                   /* --insecure-plaintext. */
static uint64_t max_request = 65536;    /* --max-request-bytes. */
static uint64_t max_reply = 64 << 20;   /* --max-reply-bytes. */
static volatile sig_atomic_t stop_signal;

static void
on_signal(int sig)
{
    stop_signal = sig;
}

static void
usage(void)
{
    printf("\
tem-ctl: control the Trumpet Event Manager\n\
usage: tem-ctl [--ctl=EP] [--timeout=TIME] [--json] COMMAND [ARGS...]\n\
\n\
Commands:\n\
  event-add NAME DEFINITION...   define a network-wide event\n\
  event-del NAME                 remove it from every host\n\
  event-list [--tun-id=VNI]      every event, with install counts (those\n\
                                 of tenant VNI: its tun_id= matches VNI)\n\
  event-show NAME                definition, hosts, shares, recent alerts\n\
  hosts [--tun-id=VNI]           hosts with state, prefixes, counters\n\
                                 (those serving a prefix of tenant VNI)\n\
  dos-threshold [HOST] BYTES     set the DoS threshold of HOST, or of every\n\
                                 host (0: off)\n\
  alerts [--follow] [--count=N] [--tun-id=VNI] [EVENT]\n\
                                 the last N alerts (100) as JSON lines;\n\
                                 --follow then prints new ones as they come\n\
                                 (alerts missed, from gaps in their seq,\n\
                                 on standard error); --tun-id: of tenant\n\
                                 VNI's groups only\n\
  status                         TEM settings, endpoints and counters\n\
  allow-reload                   re-read the TEM's allow-list of keys\n\
  keygen [--force] FILE          write a new CURVE key pair to FILE (mode\n\
                                 0600) and its public key to FILE.pub\n\
                                 (no TEM needed)\n\
\n\
Options:\n\
  --ctl=EP       the TEM's control socket (ipc:///run/trumpet/tem.ctl)\n\
  --timeout=TIME wait at most TIME for the TEM (5s)\n\
  --json         print the TEM's JSON reply as is\n\
  --server-key=KEY|FILE  the TEM's public key (Z85 or a key file), for a\n\
                 TCP --ctl and for alerts --follow over TCP\n\
  --key-file=FILE        this client's key pair (in the TEM's allow-list\n\
                 as \"client NAME KEY\")\n\
  --insecure-plaintext   no keys over TCP (the TEM must run so too)\n\
  --max-request-bytes=N  refuse to send larger requests (65536, as the\n\
                 TEM's default)\n\
  --max-reply-bytes=N    largest reply or alert taken (67108864)\n\
\n\
Exit status: 0 ok, 1 error reply, 2 usage, 3 TEM unreachable.\n");
}

/* Sets up socket 's' to reach TEM endpoint 'ep': bounded messages, and
 * CURVE unless 'ep' is ipc:// or --insecure-plaintext (exits on
 * failure). */
static void
secure_socket(void *s, const char *ep)
{
    int zero = 0;

    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    if (tpm_zmq_max_msg(s, max_reply)) {
        cli_die_status(EXIT_USAGE, "ZMQ_MAXMSGSIZE: %s", zmq_strerror(errno));
    }
    if (!strncmp(ep, "ipc://", 6) || insecure) {
        return;
    }
    if (!server_key_arg || !key_file) {
        cli_die_status(EXIT_USAGE,
            "%s is not a local ipc:// socket: it needs the "
            "TEM's public key (--server-key) and this client's key pair "
            "(--key-file), or --insecure-plaintext", ep);
    }
    char server[TPM_CURVE_KEY_LEN + 1], pub[TPM_CURVE_KEY_LEN + 1];
    char sec[TPM_CURVE_KEY_LEN + 1];
    char *error = tpm_curve_public_arg(server_key_arg, server);
    if (!error) {
        error = tpm_curve_read_file(key_file, pub, sec);
    }
    if (!error) {
        error = tpm_curve_setup(s, server, pub, sec, NULL);
    }
    memset(sec, 0, sizeof sec);
    if (error) {
        cli_die_status(EXIT_USAGE, "%s", error);
    }
}

/* Sends 'req' and returns the reply (exits on failure). */
static struct json_object *
request(struct json_object *req)
{
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_REQ);
    const char *text = json_object_to_json_string_ext(req, JSON_PLAIN);

    if (strlen(text) > max_request) {
        cli_die_status(EXIT_USAGE,
            "the request is %zu bytes, more than the %"PRIu64
            " the TEM takes (--max-request-bytes; the TEM would close the "
            "connection unanswered)", strlen(text), max_request);
    }
    secure_socket(s, ctl_ep);
    if (zmq_connect(s, ctl_ep)) {
        cli_die_status(EXIT_USAGE, "bad control endpoint '%s': %s", ctl_ep,
            zmq_strerror(errno));
    }

    zmq_pollitem_t item = { .socket = s, .events = ZMQ_POLLOUT };
    long ms = (long) ((timeout_ns + 999999) / 1000000);
    if (zmq_poll(&item, 1, ms) <= 0
        || zmq_send(s, text, strlen(text), ZMQ_DONTWAIT) < 0) {
        cli_die_status(EXIT_UNREACHABLE,
            "TEM unreachable at %s (no answer within "
            "the timeout; is trumpet-tem running with this --ctl?)",
            ctl_ep);
    }
    item.events = ZMQ_POLLIN;
    if (zmq_poll(&item, 1, ms) <= 0) {
        cli_die_status(EXIT_UNREACHABLE,
            "TEM at %s did not answer within the timeout%s",
            ctl_ep, server_key_arg && strncmp(ctl_ep, "ipc://", 6)
            ? " (or it refused this client's key, or its public key "
            "is not --server-key)" : "");
    }

    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, s, 0) < 0) {
        cli_die_status(EXIT_UNREACHABLE, "reading the TEM's reply: %s",
            zmq_strerror(errno));
    }
    struct json_tokener *tok = json_tokener_new();
    struct json_object *reply = json_tokener_parse_ex(tok, zmq_msg_data(&msg),
                                                      zmq_msg_size(&msg));
    if (!reply || !json_object_is_type(reply, json_type_object)) {
        cli_die_status(EXIT_ERROR_REPLY,
            "the TEM's reply is not a JSON object");
    }
    json_tokener_free(tok);
    zmq_msg_close(&msg);
    zmq_close(s);
    zmq_ctx_term(ctx);
    return reply;
}

static struct json_object *
get(struct json_object *o, const char *key)
{
    struct json_object *v = NULL;
    json_object_object_get_ex(o, key, &v);
    return v;
}

static const char *
str(struct json_object *o, const char *key)
{
    struct json_object *v = get(o, key);
    return v ? json_object_get_string(v) : "-";
}

static int64_t
num(struct json_object *o, const char *key)
{
    return json_object_get_int64(get(o, key));
}

/* Joins the strings of array 'a' with commas (caller frees). */
static char *
join(struct json_object *a)
{
    size_t n = a && json_object_is_type(a, json_type_array)
               ? json_object_array_length(a) : 0;
    char *s = xstrdup(n ? "" : "-");
    for (size_t i = 0; i < n; i++) {
        char *t = xasprintf("%s%s%s", s, i ? "," : "",
                            json_object_get_string(
                                json_object_array_get_idx(a, i)));
        free(s);
        s = t;
    }
    return s;
}

/* An event's tenant filter without its "tun_id=" ("5001",
 * "0x1388/0xfffffc"), or 'none' if it has none. */
static const char *
tenant(struct json_object *o, const char *none)
{
    const char *t = get(o, "tun_id") ? str(o, "tun_id") : NULL;
    return !t ? none : !strncmp(t, "tun_id=", 7) ? t + 7 : t;
}

static void
print_json_line(struct json_object *o)
{
    puts(json_object_to_json_string_ext(o, JSON_PLAIN));
}

static void
print_counters(struct json_object *o)
{
    json_object_object_foreach(o, key, val) {
        printf("  %-18s %s\n", key, json_object_get_string(val));
    }
}

static void
print_event_list(struct json_object *r)
{
    struct json_object *events = get(r, "events");
    size_t n = json_object_array_length(events);

    printf("%-5s %-20s %-11s %5s %5s %7s %6s %6s %-7s %-16s %s\n", "ID",
           "NAME", "ACROSS", "HOSTS", "ACKED", "PENDING", "NACKED", "ALERTS",
           "STANDBY", "TENANT", "DEFINITION");
    for (size_t i = 0; i < n; i++) {
        struct json_object *e = json_object_array_get_idx(events, i);
        printf("%-5"PRId64" %-20s %-11s %5"PRId64" %5"PRId64" %7"PRId64
               " %6"PRId64" %6"PRId64" %-7s %-16s %s\n", num(e, "id"),
               str(e, "name"), str(e, "across"), num(e, "hosts"),
               num(e, "acked"), num(e, "pending"), num(e, "nacked"),
               num(e, "alerts"),
               json_object_get_boolean(get(e, "standby")) ? "yes" : "no",
               tenant(e, "-"), str(e, "definition"));
    }
}

static void
print_event_show(struct json_object *r)
{
    struct json_object *scope = get(r, "scope");
    struct json_object *then = get(r, "then");
    char *fp = join(get(r, "filter_prefixes"));

    printf("event %s (id %"PRId64")\n", str(r, "name"), num(r, "id"));
    printf("  definition:       %s\n", str(r, "definition"));
    printf("  on hosts:         %s\n", str(r, "local_definition"));
    if (json_object_is_type(scope, json_type_array)) {
        char *s = join(scope);
        printf("  scope:            %s\n", s);
        free(s);
    } else {
        printf("  scope:            all\n");
    }
    printf("  filter prefixes:  %s\n", fp);
    printf("  tenant:           %s\n", tenant(r, "any (tunnelled or not)"));
    printf("  across:           %s\n", str(r, "across"));
    printf("  split:            %s\n", get(r, "split") ? str(r, "split")
                                                       : "none");
    printf("  threshold:        %s\n", get(r, "threshold")
                                       ? str(r, "threshold") : "none");
    printf("  standby:          %s\n",
           json_object_get_boolean(get(r, "standby")) ? "yes" : "no");
    if (then) {
        char buf[32];
        tpm_time_format(num(then, "duration_ns"), buf, sizeof buf);
        printf("  then:             %s for %s\n", str(then, "event"), buf);
    }
    free(fp);

    struct json_object *hosts = get(r, "hosts");
    size_t n = json_object_array_length(hosts);
    printf("hosts (%zu):\n", n);
    if (n) {
        printf("  %-20s %-8s %-14s %-14s %s\n", "HOST", "STATE", "SHARE",
               "HISTORY", "NOTE");
    }
    for (size_t i = 0; i < n; i++) {
        struct json_object *h = json_object_array_get_idx(hosts, i);
        char note[256] = "";
        if (get(h, "reason")) {
            snprintf(note, sizeof note, "refused: %s", str(h, "reason"));
        } else if (get(h, "drilldown_remaining_ms")) {
            snprintf(note, sizeof note, "drill-down, %"PRId64" ms left",
                     num(h, "drilldown_remaining_ms"));
        }
        printf("  %-20s %-8s %-14s %-14s %s\n", str(h, "host"),
               str(h, "state"), get(h, "share") ? str(h, "share") : "full",
               get(h, "history") ? str(h, "history") : "-", note);
    }
    printf("stats:\n");
    print_counters(get(r, "stats"));

    struct json_object *recent = get(r, "recent_alerts");
    n = json_object_array_length(recent);
    printf("recent alerts (%zu):\n", n);
    for (size_t i = 0; i < n; i++) {
        print_json_line(json_object_array_get_idx(recent, i));
    }
}

static void
print_hosts(struct json_object *r)
{
    struct json_object *hosts = get(r, "hosts");
    size_t n = json_object_array_length(hosts);

    printf("%-20s %-9s %-24s %9s %6s %10s %10s %8s %-22s %s\n", "HOST",
           "STATE", "PREFIXES", "LAST-RX", "EVENTS", "SATISFIED", "REPLIES",
           "INVALID", "DOS-THRESHOLD", "NOTE");
    for (size_t i = 0; i < n; i++) {
        struct json_object *h = json_object_array_get_idx(hosts, i);
        char *prefixes = join(get(h, "prefixes"));
        char rx[32], dos[64], note[512];
        snprintf(rx, sizeof rx, "%"PRId64"ms", num(h, "last_rx_ms"));
        if (get(h, "dos_threshold")) {
            snprintf(dos, sizeof dos, "%"PRId64" (%s)",
                     num(h, "dos_threshold"), str(h, "dos_state"));
        } else {
            snprintf(dos, sizeof dos, "-");
        }
        snprintf(note, sizeof note, "%s%s%s",
                 get(h, "gone_reason") ? str(h, "gone_reason") : "",
                 get(h, "gone_reason") && get(h, "dos_reason") ? "; " : "",
                 get(h, "dos_reason") ? str(h, "dos_reason") : "");
        printf("%-20s %-9s %-24s %9s %6"PRId64" %10"PRId64" %10"PRId64
               " %8"PRId64" %-22s %s\n", str(h, "host"), str(h, "state"),
               prefixes, rx, num(h, "events"), num(h, "satisfactions"),
               num(h, "poll_replies"),
               num(h, "invalid_frames") + num(h, "invalid_msgs"), dos,
               note);
        free(prefixes);
    }
}

static void
print_dos_threshold(struct json_object *r)
{
    struct json_object *hosts = get(r, "hosts");
    size_t n = json_object_array_length(hosts);

    if (get(r, "host")) {
        printf("DoS threshold %"PRId64" bytes for host %s\n",
               num(r, "dos_threshold"), str(r, "host"));
    } else {
        printf("DoS threshold %"PRId64" bytes for all hosts (and hosts "
               "that connect later)\n", num(r, "dos_threshold"));
    }
    for (size_t i = 0; i < n; i++) {
        struct json_object *h = json_object_array_get_idx(hosts, i);
        const char *state = str(h, "state");
        if (!strcmp(state, "pending")) {
            printf("  %-20s sent\n", str(h, "host"));
        } else if (!strcmp(state, "unsupported")) {
            printf("  %-20s not sent: protocol version %"PRId64" has no "
                   "Configure\n", str(h, "host"), num(h, "version"));
        } else {
            printf("  %-20s not connected: sent when it connects\n",
                   str(h, "host"));
        }
    }
}

static void
print_status(struct json_object *r)
{
    struct json_object *ep = get(r, "endpoints");
    printf("TEM %s, up %"PRId64" s\n", str(r, "tem_id"), num(r, "uptime_s"));
    printf("  listen:             %s\n", str(ep, "listen"));
    printf("  pub:                %s\n", str(ep, "pub"));
    printf("  ctl:                %s\n", str(ep, "ctl"));
    printf("  state file:         %s\n", str(r, "state_file"));
    printf("  epoch:              %"PRId64" ns\n", num(r, "epoch_ns"));
    printf("  heartbeat:          %"PRId64" ms\n", num(r, "heartbeat_ms"));
    printf("  poll deadline:      %"PRId64" ns\n",
           num(r, "poll_deadline_ns"));
    printf("  hosts:              %"PRId64" connected, %"PRId64" known\n",
           num(r, "hosts_connected"), num(r, "hosts_known"));
    printf("  events:             %"PRId64"\n", num(r, "events"));
    if (get(r, "dos_threshold_all")) {
        printf("  DoS threshold:      %"PRId64" bytes (all hosts)\n",
               num(r, "dos_threshold_all"));
    } else {
        printf("  DoS threshold:      not set by the TEM\n");
    }
    printf("  decisions:          %"PRId64" pending, %"PRId64" kept\n",
           num(r, "decisions_pending"), num(r, "decisions_kept"));
    printf("counters:\n");
    print_counters(get(r, "counters"));
    printf("  %-18s %"PRId64"\n", "pub_drops", num(r, "pub_drops"));
    printf("security:\n");
    print_counters(get(r, "security"));
    printf("alert output:\n");
    print_counters(get(r, "alert_output"));
    struct json_object *am = get(r, "alertmanager");
    if (am) {
        struct json_object *urls = get(am, "urls");
        printf("alertmanager (queue %"PRId64", batch %"PRId64"):\n",
               num(am, "queue"), num(am, "batch"));
        for (size_t i = 0; i < json_object_array_length(urls); i++) {
            print_counters(json_object_array_get_idx(urls, i));
        }
    }
    printf("limits:\n");
    print_counters(get(r, "limits"));
    printf("descriptors:\n");
    print_counters(get(r, "descriptors"));
    printf("loop:\n");
    print_counters(get(r, "loop"));
}

/* Returns true if alert 'text' ('len' bytes) is of a group of tenant
 * '*tun_id' (always true if 'tun_id' is NULL). */
static bool
alert_of_tenant(const char *text, size_t len, const uint32_t *tun_id)
{
    if (!tun_id) {
        return true;
    }
    struct json_tokener *tok = json_tokener_new();
    struct json_object *a = json_tokener_parse_ex(tok, text, len);
    struct json_object *t = get(get(a, "group"), "tun_id");
    bool of = (t && json_object_is_type(t, json_type_int)
               && json_object_get_int64(t) == *tun_id);
    json_object_put(a);
    json_tokener_free(tok);
    return of;
}

/* Returns the "seq" of alert 'text' ('len' bytes), or 0 if it has
 * none. */
static uint64_t
alert_seq(const char *text, size_t len)
{
    struct json_tokener *tok = json_tokener_new();
    struct json_object *a = json_tokener_parse_ex(tok, text, len);
    struct json_object *v = get(a, "seq");
    int64_t seq = v && json_object_is_type(v, json_type_int)
                  ? json_object_get_int64(v) : 0;
    json_object_put(a);
    json_tokener_free(tok);
    return seq > 0 ? seq : 0;
}

/* Prints alerts from the TEM's PUB socket until interrupted: those of
 * 'event' (NULL: every event) and of tenant '*tun_id' (NULL: any).
 * Following every alert, it tells on standard error of each gap in their
 * sequence numbers (alerts the TEM could not deliver, or sent before a
 * reconnection), and of their total at the end. */
static int
follow(const char *pub, const char *event, const uint32_t *tun_id)
{
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_SUB);
    bool check_seq = !event && !tun_id;
    uint64_t last_seq = 0, missed = 0;

    secure_socket(s, pub);
    if (zmq_connect(s, pub)) {
        cli_die_status(EXIT_UNREACHABLE,
            "cannot connect to the TEM's alerts at '%s': "
            "%s", pub, zmq_strerror(errno));
    }
    /* The topic frame is the event name: match it whole. */
    zmq_setsockopt(s, ZMQ_SUBSCRIBE, event ? event : "",
                   event ? strlen(event) : 0);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    setvbuf(stdout, NULL, _IOLBF, 0);
    while (!stop_signal) {
        zmq_msg_t topic, body;
        zmq_msg_init(&topic);
        zmq_msg_init(&body);
        if (zmq_msg_recv(&topic, s, 0) >= 0 && zmq_msg_more(&topic)
            && zmq_msg_recv(&body, s, 0) >= 0
            && (!event || (zmq_msg_size(&topic) == strlen(event)
                           && !memcmp(zmq_msg_data(&topic), event,
                                      strlen(event))))
            && alert_of_tenant(zmq_msg_data(&body), zmq_msg_size(&body),
                               tun_id)) {
            printf("%.*s\n", (int) zmq_msg_size(&body),
                   (const char *) zmq_msg_data(&body));
            uint64_t seq = check_seq ? alert_seq(zmq_msg_data(&body),
                                                 zmq_msg_size(&body)) : 0;
            if (seq > last_seq + 1 && last_seq) {
                missed += seq - last_seq - 1;
                fprintf(stderr, "tem-ctl: %"PRIu64" alerts missed (seq "
                        "%"PRIu64" to %"PRIu64")\n", seq - last_seq - 1,
                        last_seq + 1, seq - 1);
            }
            /* Lower: the TEM restarted. */
            last_seq = seq ? seq : last_seq;
        }
        zmq_msg_close(&topic);
        zmq_msg_close(&body);
    }
    if (check_seq) {
        fprintf(stderr, "tem-ctl: %"PRIu64" alerts missed in all\n",
                missed);
    }
    zmq_close(s);
    zmq_ctx_term(ctx);
    return 0;
}

/* If 'arg' is "--tun-id=VNI", stores the VNI in '*tun_id', points
 * '*tunp' to it and returns true (exits on a bad VNI). */
static bool
tun_id_arg(const char *arg, uint32_t *tun_id, const uint32_t **tunp)
{
    uint64_t v;

    if (strncmp(arg, "--tun-id=", 9)) {
        return false;
    }
    if (!tpm_parse_uint_hex(arg + 9, 0xffffff, &v)) {
        cli_die_status(EXIT_USAGE, "--tun-id: '%s' is not a VNI: expected "
            "0 to 16777215 (or 0x0 to 0xffffff)", arg + 9);
    }
    *tun_id = v;
    *tunp = tun_id;
    return true;
}

static void
need_args(const char *cmd, int n, int min, int max, const char *args)
{
    if (n < min || n > max) {
        cli_die_status(EXIT_USAGE,
            "usage: tem-ctl %s%s%s", cmd, *args ? " " : "",
            args);
    }
}

int
main(int argc, char *argv[])
{
    static const struct option options[] = {
        { "ctl", required_argument, NULL, 'c' },
        { "timeout", required_argument, NULL, 't' },
        { "json", no_argument, NULL, 'j' },
        { "server-key", required_argument, NULL, 's' },
        { "key-file", required_argument, NULL, 'k' },
        { "insecure-plaintext", no_argument, NULL, 'I' },
        { "max-request-bytes", required_argument, NULL, 'R' },
        { "max-reply-bytes", required_argument, NULL, 'P' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };

    cli_init("tem-ctl", EXIT_USAGE);
    for (;;) {
        int ch = getopt_long(argc, argv, "+h", options, NULL);
        if (ch == -1) {
            break;
        }
        switch (ch) {
        case 'c':
            ctl_ep = optarg;
            break;
        case 't':
            timeout_ns = cli_time("--timeout", optarg, false);
            break;
        case 'j':
            json_output = true;
            break;
        case 's':
            server_key_arg = optarg;
            break;
        case 'k':
            key_file = optarg;
            break;
        case 'I':
            insecure = true;
            break;
        case 'R':
            max_request = cli_uint("--max-request-bytes", optarg, 1024,
                                   INT64_MAX);
            break;
        case 'P':
            max_reply = cli_uint("--max-reply-bytes", optarg, 1024,
                                 INT64_MAX);
            break;
        case 'h':
            usage();
            return 0;
        default:
            return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        cli_die_status(EXIT_USAGE, "missing command (try --help)");
    }

    const char *cmd = argv[optind];
    char **args = &argv[optind + 1];
    int n = argc - optind - 1;
    struct json_object *req = json_object_new_object();
    bool follow_alerts = false;
    const char *follow_event = NULL;
    uint32_t tun_id;
    const uint32_t *tun = NULL;

    if (!strcmp(cmd, "keygen")) {
        bool force = n && !strcmp(args[0], "--force");
        need_args(cmd, n - force, 1, 1, "[--force] FILE");
        char pub[TPM_CURVE_KEY_LEN + 1];
        char *error = tpm_curve_keygen(args[force], force, pub);
        if (error) {
            cli_die_status(EXIT_ERROR_REPLY, "keygen: %s", error);
        }
        printf("%s\n", pub);
        fprintf(stderr, "tem-ctl: key pair in %s (secret, mode 0600), "
                "public key in %s.pub\n", args[force], args[force]);
        json_object_put(req);
        return 0;
    }

    json_object_object_add(req, "command", json_object_new_string(cmd));
    if (!strcmp(cmd, "event-add")) {
        need_args(cmd, n, 2, INT32_MAX, "NAME DEFINITION...");
        char *def = xstrdup(args[1]);
        for (int i = 2; i < n; i++) {
            char *t = xasprintf("%s %s", def, args[i]);
            free(def);
            def = t;
        }
        json_object_object_add(req, "name", json_object_new_string(args[0]));
        json_object_object_add(req, "definition",
                               json_object_new_string(def));
        free(def);
    } else if (!strcmp(cmd, "event-del") || !strcmp(cmd, "event-show")) {
        need_args(cmd, n, 1, 1, "NAME");
        json_object_object_add(req, "name", json_object_new_string(args[0]));
    } else if (!strcmp(cmd, "event-list") || !strcmp(cmd, "hosts")) {
        if (n > 1 || (n && !tun_id_arg(args[0], &tun_id, &tun))) {
            cli_die_status(EXIT_USAGE, "usage: tem-ctl %s [--tun-id=VNI]",
                           cmd);
        }
    } else if (!strcmp(cmd, "status") || !strcmp(cmd, "allow-reload")) {
        need_args(cmd, n, 0, 0, "");
    } else if (!strcmp(cmd, "dos-threshold")) {
        need_args(cmd, n, 1, 2, "[HOST] BYTES");
        const char *b = args[n - 1];
        char *end;
        errno = 0;
        unsigned long long bytes = strtoull(b, &end, 10);
        if (!*b || *end || errno || b[strspn(b, "0123456789")]
            || bytes > UINT32_MAX) {
            cli_die_status(EXIT_USAGE,
                "dos-threshold: '%s' is not a number of bytes: "
                "expected an integer in [0, %"PRIu32"] (0: off)", b,
                UINT32_MAX);
        }
        if (n == 2) {
            json_object_object_add(req, "host",
                                   json_object_new_string(args[0]));
        }
        json_object_object_add(req, "bytes", json_object_new_int64(bytes));
    } else if (!strcmp(cmd, "alerts")) {
        int64_t count = 100;
        for (int i = 0; i < n; i++) {
            if (!strcmp(args[i], "--follow") || !strcmp(args[i], "-f")) {
                follow_alerts = true;
            } else if (!strncmp(args[i], "--count=", 8)) {
                char *end;
                count = strtoll(args[i] + 8, &end, 10);
                if (*end || end == args[i] + 8 || count < 0) {
                    cli_die_status(EXIT_USAGE,
                        "--count: '%s' is not a number >= 0",
                        args[i] + 8);
                }
            } else if (tun_id_arg(args[i], &tun_id, &tun)) {
                continue;
            } else if (args[i][0] == '-' || follow_event) {
                cli_die_status(EXIT_USAGE, "usage: tem-ctl alerts [--follow] "
                    "[--count=N] [--tun-id=VNI] [EVENT]");
            } else {
                follow_event = args[i];
            }
        }
        json_object_object_add(req, "count", json_object_new_int64(count));
        if (follow_event) {
            json_object_object_add(req, "event",
                                   json_object_new_string(follow_event));
        }
    } else {
        cli_die_status(EXIT_USAGE, "unknown command '%s': expected event-add, "
            "event-del, event-list, event-show, hosts, dos-threshold, "
            "alerts, status, allow-reload or keygen (try --help)", cmd);
    }
    if (tun) {
        json_object_object_add(req, "tun_id", json_object_new_int64(*tun));
    }

    struct json_object *reply = request(req);
    json_object_put(req);
    struct json_object *ok = get(reply, "ok");
    if (!ok || !json_object_get_boolean(ok)) {
        if (json_output) {
            puts(json_object_to_json_string_ext(reply, JSON_PRETTY));
        }
        fprintf(stderr, "tem-ctl: %s: %s\n", cmd, str(reply, "error"));
        return EXIT_ERROR_REPLY;
    }

    if (!strcmp(cmd, "alerts")) {
        struct json_object *alerts = get(reply, "alerts");
        size_t k = json_object_array_length(alerts);
        for (size_t i = 0; i < k; i++) {
            print_json_line(json_object_array_get_idx(alerts, i));
        }
        fflush(stdout);
        if (follow_alerts) {
            return follow(str(reply, "pub"), follow_event, tun);
        }
    } else if (json_output) {
        puts(json_object_to_json_string_ext(reply, JSON_PRETTY));
    } else if (!strcmp(cmd, "event-add")) {
        printf("event %s added (id %"PRId64")\n", str(reply, "name"),
               num(reply, "id"));
    } else if (!strcmp(cmd, "event-del")) {
        printf("event %s deleted\n", args[0]);
    } else if (!strcmp(cmd, "event-list")) {
        print_event_list(reply);
    } else if (!strcmp(cmd, "event-show")) {
        print_event_show(reply);
    } else if (!strcmp(cmd, "hosts")) {
        print_hosts(reply);
    } else if (!strcmp(cmd, "dos-threshold")) {
        print_dos_threshold(reply);
    } else if (!strcmp(cmd, "status")) {
        print_status(reply);
    } else if (!strcmp(cmd, "allow-reload")) {
        printf("allow-list %s reloaded: %"PRId64" host keys, %"PRId64
               " client keys\n", str(reply, "allow_file"),
               num(reply, "hosts_allowed"), num(reply, "clients_allowed"));
    }
    json_object_put(reply);
    return 0;
}
