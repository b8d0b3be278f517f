/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tem-bench: load and latency benchmark of a running trumpet-tem
 * (docs/benchmarks.md, section "TEM").
 *
 * One process, one thread simulates N hosts: each is a ZeroMQ DEALER
 * socket connected to the TEM's --listen endpoint, speaking the real
 * protocol through lib/tproto.h: Hello (host id "bhI", prefix
 * 10.I/256.I%256.0/24, the TEM's epoch), Welcome, an Ack for every
 * Install and Remove, a POLL_OK for every Poll, heartbeats when idle.
 * The bench defines its events through the TEM's control socket (the
 * same JSON requests as tem-ctl), subscribes to the alert PUB socket and
 * reads the TEM's counters ("status") before and after the measurement.
 *
 * Every event is "filter=ip predicate=sum(volume) > T group=nw_dst
 * interval=EPOCH across=sum" (T = --threshold), split equally: each host's
 * share is T/N.  A key is (event, epoch, group): events round-robin,
 * epoch the one that just ended, group a distinct nw_dst per key.
 *
 * Modes:
 *
 *   throughput  Satisfactions in frames of --batch keys ("rounds") for
 *               --seconds after --warmup.  In flight: as many rounds as
 *               make at most --window messages (satisfactions, polls and
 *               replies) for the undecided keys, at least two rounds
 *               (so that the TEM has the next round while the bench
 *               takes the alerts of the last one).
 *               Scenarios:
 *                 all        every host satisfies every key with T+1
 *                            (the same frame from each host): N
 *                            satisfactions per decision; the TEM polls
 *                            the hosts whose satisfaction it has not read
 *                            yet, so polls and satisfactions cross, as
 *                            when hosts report at the end of the same
 *                            epoch.  Every decision alerts.
 *                 one        one host per round (rotating) satisfies with
 *                            T+1, the N-1 others are polled and answer
 *                            T: 1 satisfaction, N-1 polls and N-1
 *                            replies per decision.  Every decision alerts.
 *                 one-quiet  the same with T/N+1 (just over the share)
 *                            and poll answers of 0: the total stays
 *                            below T, no alert (the common case:
 *                            one host over its share, not the network).
 *                            Needs N >= 2.
 *               Credit: alerts received on the PUB socket (all, one) or
 *               polls received (one-quiet: a round is done when its keys'
 *               polls reached every other host).  Rates are over the
 *               TEM's own counters and its CPU time (the sum over its
 *               threads of /proc/PID/task/TID/schedstat), so they do not
 *               depend on how busy the bench or the machine is.
 *
 *   latency     --events (256) events; in each of --epochs epochs (after
 *               2 unmeasured ones), right after the epoch ends, host bh0
 *               sends one satisfaction per event in one frame and the
 *               other hosts answer the polls at once (value T: every key
 *               alerts).  Reports the alerts' latency_us (the TEM's time
 *               from reading the first satisfaction of a key to its
 *               decision) and the bench's time from sending the frame to
 *               receiving each alert.
 *
 *   rtt         ZeroMQ round trip on loopback TCP without the TEM: a
 *               DEALER in this thread, a ROUTER echoing in another thread
 *               (each with its own context and I/O thread, as two
 *               processes would), --rtt-count messages of 64 bytes.
 *
 * Output: a few lines of text, or with --json one JSON object.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "cli.h"
#include "clock.h"
#include "curve.h"
#include "event.h"
#include "packet.h"
#include "tproto.h"
#include "util.h"

#define NS_PER_MS 1000000ULL
#define NS_PER_S 1000000000ULL

/* Frames read from one host socket per pass, so that no host starves the
 * others. */
#define HOST_RX_BURST 64

/* A host's answers leave as one frame once they reach this many messages
 * (well below TPROTO_MAX_BATCH and TPROTO_MAX_FRAME, which the TEM
 * enforces). */
#define HOST_TX_BATCH 1024

/* Unmeasured epochs before the latency measurement (warms the caches and
 * lets the alert subscription settle). */
#define LATENCY_WARMUP_EPOCHS 2

enum bench_mode { MODE_THROUGHPUT, MODE_LATENCY, MODE_RTT };
enum scenario { SC_ALL, SC_ONE, SC_ONE_QUIET };

static const char *const scenario_names[] = { "all", "one", "one-quiet" };

struct options {
    const char *ctl;
    int tem_pid;                /* 0: no CPU figures. */
    enum bench_mode mode;
    enum scenario scenario;
    uint32_t n_hosts;
    uint32_t n_old_hosts;       /* Of those, speaking protocol version 2
                                 * (no PollBatch). */
    uint32_t n_events;          /* 0: 16 (throughput) or 256 (latency). */
    uint32_t event_hosts;       /* Hosts each event covers (a power of
                                 * two); 0: all. */
    uint32_t batch;             /* Keys per round (frame). */
    uint32_t window;            /* Messages in flight at most. */
    uint64_t warmup_ns, seconds_ns;
    uint32_t epochs;            /* Latency: epochs measured. */
    uint32_t rtt_count;
    double threshold;
    uint64_t timeout_ns;        /* Longest wait for any answer. */
    bool json;
};

struct host {
    uint32_t idx;
    char id[16];
    void *sock;
    bool welcomed;
    uint64_t installs, removes, polls;
    uint64_t last_tx_ns;        /* Monotonic. */
    uint64_t hb_seq;
    struct tproto_batch out;    /* Acks, poll replies, heartbeats. */
};

struct tem_sample {
    uint64_t mono_ns;
    double busy_s, steal_s;             /* Whole machine (/proc/stat). */
    uint64_t cpu_ns, main_cpu_ns;       /* TEM process, its main thread. */
    struct json_object *counters;       /* Owned. */
    uint64_t pub_drops, ctl_requests;
};

struct bench {
    struct options opt;
    void *zctx;
    void *ctl, *sub;
    char listen_ep[256], pub_ep[256];
    uint64_t epoch_ns;
    uint32_t heartbeat_ms;
    struct host *hosts;
    uint32_t *event_ids;        /* TEM ids of our events. */
    char (*event_names)[32];
    zmq_pollitem_t *items;      /* Hosts, then the SUB socket. */

    /* Throughput. */
    uint32_t window_keys;       /* Keys undecided at most. */
    uint64_t keys_sent, keys_done, rounds_sent;
    uint32_t *round_left;       /* one-quiet: polls awaited per round in
                                 * flight, indexed by round % window. */
    uint32_t n_round_slots;
    uint64_t next_round_done;   /* one-quiet: oldest round in flight. */
    uint64_t alerts_rx;
    uint64_t polls_rx;          /* Polls and PollBatch entries. */
    uint64_t poll_batches_rx;
    uint64_t last_progress_ns;

    /* Latency. */
    bool collect;               /* Parse alerts into 'lat'/'e2e'. */
    uint64_t round_epoch;
    uint64_t sent_ns;
    double *lat, *e2e;
    size_t n_lat, cap_lat;
    size_t lat_expected;        /* 'n_lat' once this round's alerts are
                                 * in. */
    uint64_t lat_deadline, lat_missing, lat_other;
    /* Phases of the current round, monotonic ns (0: not yet). */
    uint64_t first_poll_ns, last_poll_ns, last_reply_ns;
    uint64_t first_alert_ns, last_alert_ns;
    bool replied;               /* Poll replies went out in this pass. */
    /* Sums over the measured rounds, ns: send -> first poll received,
     * first -> last poll received, last poll -> last reply sent, last
     * reply sent -> last alert received, send -> last alert. */
    uint64_t ph_poll, ph_polls, ph_reply, ph_decide, ph_total;
    uint32_t ph_rounds;
};

static uint64_t
mono_ns(void)
{
    return tpm_clock_mono_ns();
}

/* ---------------------------------------------------------------------- */
/* CPU time of the TEM. */

/* Reads the first field of 'path' (schedstat: ns on a CPU).  Returns
 * false if it cannot. */
static bool
read_schedstat(const char *path, uint64_t *ns)
{
    FILE *f = fopen(path, "r");
    unsigned long long v;
    bool ok = f && fscanf(f, "%llu", &v) == 1;
    if (f) {
        fclose(f);
    }
    if (ok) {
        *ns = v;
    }
    return ok;
}

/* Stores the CPU time of every thread of process 'pid' in '*total' and of
 * its main thread in '*main_ns'. */
static void
tem_cpu(int pid, uint64_t *total, uint64_t *main_ns)
{
    char path[64];
    DIR *dir;
    struct dirent *de;

    *total = *main_ns = 0;
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    dir = opendir(path);
    if (!dir) {
        cli_die("cannot read %s (is --tem-pid=%d the TEM?): %s", path, pid,
            strerror(errno));
    }
    while ((de = readdir(dir))) {
        if (de->d_name[0] == '.') {
            continue;
        }
        char p[300];
        uint64_t ns;
        snprintf(p, sizeof p, "/proc/%d/task/%s/schedstat", pid, de->d_name);
        if (read_schedstat(p, &ns)) {
            *total += ns;
            if (atoi(de->d_name) == pid) {
                *main_ns = ns;
            }
        }
    }
    closedir(dir);
}

/* Stores the CPU time the whole machine spent busy (neither idle nor
 * waiting for I/O) and stolen by the hypervisor, in seconds. */
static void
machine_cpu(double *busy_s, double *steal_s)
{
    unsigned long long v[8] = { 0 };
    FILE *f = fopen("/proc/stat", "r");
    double hz = sysconf(_SC_CLK_TCK);

    if (!f || fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu",
                     &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                     &v[7]) != 8) {
        cli_die("cannot read the CPU times in /proc/stat");
    }
    fclose(f);
    /* user nice system idle iowait irq softirq steal */
    *busy_s = (v[0] + v[1] + v[2] + v[5] + v[6]) / hz;
    *steal_s = v[7] / hz;
}

static double
self_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec
           + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* ---------------------------------------------------------------------- */
/* Control socket. */

/* Sends 'req' (consumed) to the TEM's control socket and returns its
 * reply.  Dies if the TEM does not answer or answers an error. */
static struct json_object *
ctl_call(struct bench *b, struct json_object *req)
{
    const char *text = json_object_to_json_string_ext(
        req, JSON_C_TO_STRING_PLAIN);
    zmq_msg_t msg;
    int timeout = b->opt.timeout_ns / NS_PER_MS;

    if (zmq_send(b->ctl, text, strlen(text), 0) < 0) {
        cli_die("control socket: cannot send: %s", zmq_strerror(errno));
    }
    zmq_pollitem_t item = { .socket = b->ctl, .events = ZMQ_POLLIN };
    if (zmq_poll(&item, 1, timeout) <= 0) {
        cli_die("the TEM did not answer '%s' on %s within %d ms", text,
            b->opt.ctl, timeout);
    }
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, b->ctl, 0) < 0) {
        cli_die("control socket: cannot receive: %s", zmq_strerror(errno));
    }
    struct json_tokener *tok = json_tokener_new();
    struct json_object *r = json_tokener_parse_ex(tok, zmq_msg_data(&msg),
                                                  zmq_msg_size(&msg));
    json_tokener_free(tok);
    zmq_msg_close(&msg);

    struct json_object *ok, *err;
    if (!r || !json_object_object_get_ex(r, "ok", &ok)) {
        cli_die("the TEM's reply to '%s' is not a JSON object with \"ok\"",
            text);
    }
    if (!json_object_get_boolean(ok)) {
        json_object_object_get_ex(r, "error", &err);
        cli_die("the TEM refused '%s': %s", text, json_object_get_string(err));
    }
    json_object_put(req);
    return r;
}

static struct json_object *
ctl_command(struct bench *b, const char *command)
{
    struct json_object *req = json_object_new_object();
    json_object_object_add(req, "command", json_object_new_string(command));
    return ctl_call(b, req);
}

static int64_t
json_int(struct json_object *o, const char *key)
{
    struct json_object *v;
    if (!json_object_object_get_ex(o, key, &v)) {
        cli_die("the TEM's reply lacks \"%s\"", key);
    }
    return json_object_get_int64(v);
}

static const char *
json_str(struct json_object *o, const char *key)
{
    struct json_object *v;
    if (!json_object_object_get_ex(o, key, &v)
        || !json_object_is_type(v, json_type_string)) {
        cli_die("the TEM's reply lacks the string \"%s\"", key);
    }
    return json_object_get_string(v);
}

static void
tem_sample(struct bench *b, struct tem_sample *s)
{
    struct json_object *r = ctl_command(b, "status");
    struct json_object *c;

    s->mono_ns = mono_ns();
    machine_cpu(&s->busy_s, &s->steal_s);
    if (b->opt.tem_pid) {
        tem_cpu(b->opt.tem_pid, &s->cpu_ns, &s->main_cpu_ns);
    } else {
        s->cpu_ns = s->main_cpu_ns = 0;
    }
    if (!json_object_object_get_ex(r, "counters", &c)) {
        cli_die("the TEM's status has no \"counters\"");
    }
    s->counters = json_object_get(c);
    s->pub_drops = json_int(r, "pub_drops");
    s->ctl_requests = json_int(r, "ctl_requests");
    json_object_put(r);
}

static int64_t
counter_delta(const struct tem_sample *a, const struct tem_sample *z,
              const char *name)
{
    return json_int(z->counters, name) - json_int(a->counters, name);
}

/* ---------------------------------------------------------------------- */
/* Hosts. */

static void
host_send_batch(struct host *h, struct tproto_batch *batch)
{
    uint8_t *data;
    size_t len = tproto_batch_encode(batch, 0, &data);

    if (zmq_send(h->sock, data, len, 0) < 0) {
        cli_die("host %s: cannot send a frame of %zu bytes to the TEM: %s",
            h->id, len, zmq_strerror(errno));
    }
    free(data);
    tproto_batch_clear(batch);
    h->last_tx_ns = mono_ns();
}

static void
host_flush(struct host *h)
{
    if (tproto_batch_count(&h->out)) {
        host_send_batch(h, &h->out);
    }
}

static void
host_open(struct bench *b, struct host *h, uint32_t idx)
{
    int zero = 0, hwm = 1000000;
    int sndtimeo = b->opt.timeout_ns / NS_PER_MS;
    struct tpm_prefix prefix = { .ipver = 4 };
    uint32_t pmd = 0;

    memset(h, 0, sizeof *h);
    h->idx = idx;
    snprintf(h->id, sizeof h->id, "bh%"PRIu32, idx);
    tproto_batch_init(&h->out);
    h->sock = zmq_socket(b->zctx, ZMQ_DEALER);
    if (!h->sock
        || zmq_setsockopt(h->sock, ZMQ_LINGER, &zero, sizeof zero)
        || zmq_setsockopt(h->sock, ZMQ_SNDHWM, &hwm, sizeof hwm)
        || zmq_setsockopt(h->sock, ZMQ_RCVHWM, &hwm, sizeof hwm)
        || zmq_setsockopt(h->sock, ZMQ_SNDTIMEO, &sndtimeo, sizeof sndtimeo)
        || tpm_zmq_max_msg(h->sock, TPROTO_MAX_FRAME)
        || zmq_connect(h->sock, b->listen_ep)) {
        cli_die("host %s: cannot connect to %s: %s", h->id, b->listen_ep,
            zmq_strerror(errno));
    }

    memset(&prefix, 0, sizeof prefix);
    prefix.ipver = 4;
    prefix.len = 24;
    prefix.addr[0] = htonl(0x0a000000 | (idx & 0xffff) << 8);
    tproto_add_hello(&h->out, h->id, &prefix, 1, b->epoch_ns,
                     tpm_clock_real_ns(), &pmd, 1, "tem-bench");
    if (idx < b->opt.n_old_hosts) {
        /* Before PollBatch: the TEM must poll it one Poll at a time. */
        h->out.msgs[0]->hello->version_max = TPROTO_VERSION_POLL_BATCH - 1;
    }
    host_send_batch(h, &h->out);
}

static void
host_close(struct host *h)
{
    int linger = 100;

    tproto_add_bye(&h->out, "benchmark done");
    host_send_batch(h, &h->out);
    zmq_setsockopt(h->sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(h->sock);
    tproto_batch_destroy(&h->out);
}

/* Value a polled host answers. */
static double
poll_value(const struct bench *b)
{
    return b->opt.scenario == SC_ONE_QUIET ? 0 : b->opt.threshold;
}

/* Key index -> group (nw_dst 10.x.y.z, distinct for 2^24 keys). */
static void
key_group(uint64_t key, struct tpm_key *g)
{
    memset(g, 0, sizeof *g);
    g->ipver = 4;
    g->dst[0] = htonl(0x0a000000 | (key & 0xffffff));
}

/* A poll of the group with destination 'dst' (network order) reached a
 * host: in one-quiet, counts it against its round. */
static void
poll_credit(struct bench *b, uint32_t dst)
{
    if (b->opt.scenario != SC_ONE_QUIET || !b->round_left) {
        return;
    }
    /* Keys wrap at 2^24: take the round in flight that matches. */
    uint64_t k24 = ntohl(dst) & 0xffffff;
    uint64_t key = (b->keys_sent & ~0xffffffULL) | k24;
    if (key >= b->keys_sent) {
        key -= 1ULL << 24;
    }
    uint64_t round = key / b->opt.batch;
    if (round < b->next_round_done || round >= b->rounds_sent) {
        return;
    }
    uint32_t *left = &b->round_left[round % b->n_round_slots];
    if (*left && !--*left) {
        while (b->next_round_done < b->rounds_sent
               && !b->round_left[b->next_round_done % b->n_round_slots]) {
            uint64_t r = b->next_round_done++;
            uint64_t end = MIN((r + 1) * b->opt.batch, b->keys_sent);
            b->keys_done = MAX(b->keys_done, end);
            b->last_progress_ns = mono_ns();
        }
    }
}

/* Latency mode: a poll (or batch) arrived and was answered. */
static void
host_poll_seen(struct bench *b)
{
    if (b->collect) {
        uint64_t now = mono_ns();
        if (!b->first_poll_ns) {
            b->first_poll_ns = now;
        }
        b->last_poll_ns = now;
        b->replied = true;
    }
}

static void
host_message(struct bench *b, struct host *h, const Trumpet__Message *m)
{
    switch (m->body_case) {
    case TRUMPET__MESSAGE__BODY_WELCOME:
        h->welcomed = true;
        b->heartbeat_ms = m->welcome->heartbeat_ms;
        break;
    case TRUMPET__MESSAGE__BODY_REFUSE:
        cli_die("host %s: the TEM refused the session: %s", h->id,
            m->refuse->reason);
    case TRUMPET__MESSAGE__BODY_BYE:
        cli_die("host %s: the TEM said Bye: %s", h->id,
            m->bye->reason ? m->bye->reason : "(no reason)");
    case TRUMPET__MESSAGE__BODY_INSTALL:
        h->installs++;
        tproto_add_ack(&h->out, m->install->cookie, m->install->event_id);
        break;
    case TRUMPET__MESSAGE__BODY_REMOVE:
        h->removes++;
        tproto_add_ack(&h->out, m->remove->cookie, m->remove->event_id);
        break;
    case TRUMPET__MESSAGE__BODY_POLL: {
        const Trumpet__Poll *p = m->poll;
        h->polls++;
        b->polls_rx++;
        tproto_add_poll_reply(&h->out, p->cookie, p->event_id, p->epoch,
                              TRUMPET__POLL_STATUS__POLL_OK, poll_value(b));
        uint32_t dst;
        memcpy(&dst, p->group->dst.data, sizeof dst);
        poll_credit(b, dst);
        host_poll_seen(b);
        break;
    }
    case TRUMPET__MESSAGE__BODY_POLL_BATCH: {
        const Trumpet__PollBatch *p = m->poll_batch;
        size_t n = p->n_event_ids, off = 0;
        uint8_t *status = xzalloc(n);   /* POLL_OK is 0. */
        double *values = xmalloc(n * sizeof *values);
        for (size_t i = 0; i < n; i++) {
            struct tpm_key g;
            off += tproto_key_record_get(p->keys.data + off,
                                         p->keys.len - off, &g);
            values[i] = poll_value(b);
            poll_credit(b, g.dst[0]);
        }
        tproto_add_poll_batch_reply(&h->out, p->cookie, p->epoch, status,
                                    values, n);
        free(status);
        free(values);
        h->polls += n;
        b->polls_rx += n;
        b->poll_batches_rx++;
        host_poll_seen(b);
        break;
    }
    case TRUMPET__MESSAGE__BODY_HEARTBEAT:
        break;
    case TRUMPET__MESSAGE__BODY_CONFIGURE:
        /* A tem-ctl dos-threshold during the run: a host acks it. */
        tproto_add_ack(&h->out, m->configure->cookie, 0);
        break;
    case TRUMPET__MESSAGE__BODY_HELLO:
    case TRUMPET__MESSAGE__BODY_ACK:
    case TRUMPET__MESSAGE__BODY_NACK:
    case TRUMPET__MESSAGE__BODY_SATISFACTION:
    case TRUMPET__MESSAGE__BODY_POLL_REPLY:
    case TRUMPET__MESSAGE__BODY__NOT_SET:
    case _TRUMPET__MESSAGE__BODY__CASE_IS_INT_SIZE:
    default:
        cli_die("host %s: unexpected %s from the TEM", h->id,
            tproto_body_name(m->body_case));
    }
}

/* Reads up to HOST_RX_BURST frames of host 'h' and queues the answers. */
static void
host_receive(struct bench *b, struct host *h)
{
    for (int i = 0; i < HOST_RX_BURST; i++) {
        zmq_msg_t msg;
        const char *why;

        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, h->sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&msg);
            if (errno != EAGAIN) {
                cli_die("host %s: receive: %s", h->id, zmq_strerror(errno));
            }
            break;
        }
        Trumpet__Frame *f = tproto_decode(zmq_msg_data(&msg),
                                          zmq_msg_size(&msg), &why);
        if (!f) {
            cli_die("host %s: undecodable frame of %zu bytes from the TEM: %s",
                h->id, zmq_msg_size(&msg), why);
        }
        for (size_t j = 0; j < f->n_messages; j++) {
            const char *invalid = tproto_validate(f->messages[j]);
            if (invalid) {
                cli_die("host %s: invalid message from the TEM: %s", h->id,
                    invalid);
            }
            host_message(b, h, f->messages[j]);
            if (tproto_batch_count(&h->out) >= HOST_TX_BATCH) {
                host_flush(h);
            }
        }
        tproto_free(f);
        zmq_msg_close(&msg);
    }
}

/* ---------------------------------------------------------------------- */
/* Alerts. */

static void
lat_push(struct bench *b, double lat_us, double e2e_us)
{
    if (b->n_lat == b->cap_lat) {
        b->cap_lat = MAX(1024, 2 * b->cap_lat);
        b->lat = xrealloc(b->lat, b->cap_lat * sizeof *b->lat);
        b->e2e = xrealloc(b->e2e, b->cap_lat * sizeof *b->e2e);
    }
    b->lat[b->n_lat] = lat_us;
    b->e2e[b->n_lat] = e2e_us;
    b->n_lat++;
}

/* Returns the number after "KEY": in the alert 'text', or dies. */
static double
alert_number(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    char *end;
    double v = p ? strtod(p + strlen(key), &end) : 0;
    if (!p || end == p + strlen(key)) {
        cli_die("an alert lacks %s: %.200s", key, text);
    }
    return v;
}

/* Latency mode: takes the fields of one alert of the current round.  The
 * TEM writes alerts in a fixed form (docs/tem.md); looking the fields up
 * as text keeps the bench's own time per alert (which delays the next
 * alert's receive time) well below a microsecond. */
static void
alert_collect(struct bench *b, const char *data, size_t len, uint64_t now)
{
    char *text = xstrndup(data, len);

    if (alert_number(text, "\"epoch\":") != (double) b->round_epoch) {
        b->lat_other++;
    } else {
        b->lat_deadline += strstr(text, "\"deadline\":true") != NULL;
        b->lat_missing += strstr(text, "\"missing\":[]") == NULL;
        lat_push(b, alert_number(text, "\"latency_us\":"),
                 (now - b->sent_ns) / 1e3);
        if (!b->first_alert_ns) {
            b->first_alert_ns = now;
        }
        b->last_alert_ns = now;
    }
    free(text);
}

static void
sub_receive(struct bench *b)
{
    for (;;) {
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, b->sub, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&msg);
            break;
        }
        if (!zmq_msg_more(&msg)) {
            /* The JSON part (the topic came first). */
            b->alerts_rx++;
            if (b->collect) {
                alert_collect(b, zmq_msg_data(&msg), zmq_msg_size(&msg),
                              mono_ns());
            } else if (b->opt.scenario != SC_ONE_QUIET) {
                b->keys_done++;
                b->last_progress_ns = mono_ns();
            }
        }
        zmq_msg_close(&msg);
    }
}

/* ---------------------------------------------------------------------- */
/* The loop. */

/* Waits up to 'timeout_ms' for something to read, then reads and answers
 * everything, and sends heartbeats for idle hosts. */
static void
service(struct bench *b, long timeout_ms)
{
    uint32_t n = b->opt.n_hosts;

    if (zmq_poll(b->items, n + 1, timeout_ms) < 0) {
        if (errno == EINTR) {
            return;
        }
        cli_die("zmq_poll: %s", zmq_strerror(errno));
    }
    if (b->items[n].revents & ZMQ_POLLIN) {
        sub_receive(b);
    }
    for (uint32_t i = 0; i < n; i++) {
        if (b->items[i].revents & ZMQ_POLLIN) {
            host_receive(b, &b->hosts[i]);
        }
    }

    uint64_t now = mono_ns();
    uint64_t hb = (b->heartbeat_ms ? b->heartbeat_ms : 1000) * NS_PER_MS / 2;
    for (uint32_t i = 0; i < n; i++) {
        struct host *h = &b->hosts[i];
        if (h->welcomed && now - h->last_tx_ns >= hb) {
            tproto_add_heartbeat(&h->out, tpm_clock_real_ns(), ++h->hb_seq);
        }
        host_flush(h);
    }
    if (b->replied) {
        b->last_reply_ns = mono_ns();
        b->replied = false;
    }
}

/* Services the hosts until 'done' returns true; dies after the timeout
 * with 'what'. */
static void
service_until(struct bench *b, bool (*done)(struct bench *),
              const char *what)
{
    uint64_t end = mono_ns() + b->opt.timeout_ns;
    while (!done(b)) {
        if (mono_ns() > end) {
            cli_die("timeout (%"PRIu64" ms) waiting for %s (keys sent %"PRIu64
                ", decided %"PRIu64", alerts received %"PRIu64", polls "
                "%"PRIu64"; the TEM's counters: tem-ctl status)",
                (uint64_t) (b->opt.timeout_ns / NS_PER_MS), what,
                b->keys_sent, b->keys_done, b->alerts_rx, b->polls_rx);
        }
        service(b, 1);
    }
}

static bool
all_welcomed(struct bench *b)
{
    for (uint32_t i = 0; i < b->opt.n_hosts; i++) {
        if (!b->hosts[i].welcomed) {
            return false;
        }
    }
    return true;
}

/* True once every host received an Install of every event and the TEM
 * counts every install acked. */
static uint32_t event_group(const struct bench *, uint32_t i);
static uint32_t event_members(const struct bench *);

static bool
all_installed(struct bench *b)
{
    /* Each host gets the events of its group. */
    uint32_t per_host = (b->opt.n_events * (uint64_t) event_members(b)
                         / b->opt.n_hosts);
    for (uint32_t i = 0; i < b->opt.n_hosts; i++) {
        if (b->hosts[i].installs < per_host) {
            return false;
        }
    }
    struct json_object *r = ctl_command(b, "event-list");
    struct json_object *events;
    bool ok = json_object_object_get_ex(r, "events", &events);
    size_t n_ours = 0;
    for (size_t i = 0; ok && i < json_object_array_length(events); i++) {
        struct json_object *e = json_object_array_get_idx(events, i);
        if (!strncmp(json_str(e, "name"), "bench_", 6)) {
            n_ours++;
            ok = json_int(e, "acked") == event_members(b)
                 && json_int(e, "pending") == 0;
        }
    }
    json_object_put(r);
    return ok && n_ours == b->opt.n_events;
}


static void
setup(struct bench *b)
{
    struct json_object *r = ctl_command(b, "status");
    struct json_object *ep;
    int zero = 0;

    if (!json_object_object_get_ex(r, "endpoints", &ep)) {
        cli_die("the TEM's status has no \"endpoints\"");
    }
    snprintf(b->listen_ep, sizeof b->listen_ep, "%s",
             json_str(ep, "listen"));
    snprintf(b->pub_ep, sizeof b->pub_ep, "%s", json_str(ep, "pub"));
    b->epoch_ns = json_int(r, "epoch_ns");
    uint64_t deadline_ns = json_int(r, "poll_deadline_ns");
    int64_t n_events = json_int(r, "events");
    json_object_put(r);
    if (n_events) {
        cli_die("the TEM already has %"PRId64" events: the bench needs a TEM "
            "of its own (bench-tem.sh starts one)", n_events);
    }

    b->sub = zmq_socket(b->zctx, ZMQ_SUB);
    zmq_setsockopt(b->sub, ZMQ_LINGER, &zero, sizeof zero);
    tpm_zmq_max_msg(b->sub, TPROTO_MAX_FRAME);
    zmq_setsockopt(b->sub, ZMQ_RCVHWM, &zero, sizeof zero);
    zmq_setsockopt(b->sub, ZMQ_SUBSCRIBE, "", 0);
    if (zmq_connect(b->sub, b->pub_ep)) {
        cli_die("cannot connect to the alert socket %s: %s", b->pub_ep,
            zmq_strerror(errno));
    }

    uint32_t n = b->opt.n_hosts;
    b->hosts = xcalloc(n, sizeof *b->hosts);
    b->items = xcalloc(n + 1, sizeof *b->items);
    for (uint32_t i = 0; i < n; i++) {
        host_open(b, &b->hosts[i], i);
        b->items[i] = (zmq_pollitem_t) { .socket = b->hosts[i].sock,
                                         .events = ZMQ_POLLIN };
    }
    b->items[n] = (zmq_pollitem_t) { .socket = b->sub,
                                     .events = ZMQ_POLLIN };
    service_until(b, all_welcomed, "every host's Welcome");

    /* Hosts first, then events: each host gets one Install per event
     * with its final share. */
    char interval[32], thr[64];
    tpm_time_format(b->epoch_ns, interval, sizeof interval);
    snprintf(thr, sizeof thr, "%.17g", b->opt.threshold);
    b->event_ids = xcalloc(b->opt.n_events, sizeof *b->event_ids);
    b->event_names = xcalloc(b->opt.n_events, sizeof *b->event_names);
    for (uint32_t i = 0; i < b->opt.n_events; i++) {
        char *def;
        if (b->opt.event_hosts) {
            /* The hosts of group i % groups: their /24s make one
             * prefix. */
            uint32_t base = event_group(b, i) * b->opt.event_hosts;
            int plen = 24 - __builtin_ctz(b->opt.event_hosts);
            def = xasprintf("filter=ip,nw_dst=10.%"PRIu32".%"PRIu32".0/%d "
                            "predicate=sum(volume) > %s group=nw_dst "
                            "interval=%s across=sum", base >> 8,
                            base & 0xff, plen, thr, interval);
        } else {
            def = xasprintf("filter=ip predicate=sum(volume) > %s "
                            "group=nw_dst interval=%s across=sum", thr,
                            interval);
        }
        struct json_object *req = json_object_new_object();
        snprintf(b->event_names[i], sizeof b->event_names[i], "bench_%"
                 PRIu32, i);
        json_object_object_add(req, "command",
                               json_object_new_string("event-add"));
        json_object_object_add(req, "name",
                               json_object_new_string(b->event_names[i]));
        json_object_object_add(req, "definition",
                               json_object_new_string(def));
        r = ctl_call(b, req);
        b->event_ids[i] = json_int(r, "id");
        json_object_put(r);
        free(def);
        service(b, 0);
    }
    service_until(b, all_installed, "every event acked by every host");
    /* The TEM polls no member for an epoch that ended before its install
     * (it has no history of it), which would leave a round's keys
     * without their polls: the first keys are of an epoch that ends
     * after every install. */
    uint64_t until = tpm_clock_real_ns() + 2 * b->epoch_ns;
    while (tpm_clock_real_ns() < until) {
        service(b, 1);
    }

    if (b->opt.mode == MODE_THROUGHPUT && deadline_ns < 10 * NS_PER_MS) {
        fprintf(stderr, "tem-bench: warning: the TEM's poll deadline is "
                "%"PRIu64" us; decisions may time out under load\n",
                deadline_ns / 1000);
    }
}

static void
teardown(struct bench *b)
{
    for (uint32_t i = 0; i < b->opt.n_events; i++) {
        struct json_object *req = json_object_new_object();
        json_object_object_add(req, "command",
                               json_object_new_string("event-del"));
        json_object_object_add(req, "name",
                               json_object_new_string(b->event_names[i]));
        json_object_put(ctl_call(b, req));
        service(b, 0);
    }
    for (uint32_t i = 0; i < b->opt.n_hosts; i++) {
        host_close(&b->hosts[i]);
    }
    free(b->hosts);
    free(b->items);
    free(b->event_ids);
    free(b->event_names);
}

/* Hosts of an event ('event_hosts', or all). */
static uint32_t
event_members(const struct bench *b)
{
    return b->opt.event_hosts ? b->opt.event_hosts : b->opt.n_hosts;
}

/* With --event-hosts, event 'i' covers the hosts of group i % groups. */
static uint32_t
event_group(const struct bench *b, uint32_t i)
{
    return i % (b->opt.n_hosts / event_members(b));
}

static uint64_t
current_epoch(const struct bench *b)
{
    return tpm_clock_real_ns() / b->epoch_ns;
}

/* Sends one round: 'batch' keys from 'first' for 'epoch' with 'value',
 * from every host (all) or from one. */
static void
send_round(struct bench *b, uint64_t first, uint32_t count, uint64_t epoch,
           struct tproto_batch *batch)
{
    uint32_t n = event_members(b);
    uint32_t n_groups = b->opt.n_hosts / n;
    struct tpm_key g;
    /* Over the host's share (T/N).  A quiet host stays below T; otherwise
     * every satisfaction exceeds T on its own, so that every decision
     * alerts even if some host were missing (alerts are the credit). */
    double value = (b->opt.scenario == SC_ONE_QUIET
                    ? b->opt.threshold / n : b->opt.threshold) + 1;

    /* The keys of each host group's events, from its members. */
    for (uint32_t grp = 0; grp < n_groups; grp++) {
        for (uint32_t i = 0; i < count; i++) {
            uint64_t key = first + i;
            uint32_t e = key % b->opt.n_events;
            if (event_group(b, e) == grp) {
                key_group(key, &g);
                tproto_add_satisfaction(batch, b->event_ids[e], epoch, &g,
                                        value, 0, 1, 0);
            }
        }
        if (!tproto_batch_count(batch)) {
            continue;
        }

        uint8_t *data;
        size_t len = tproto_batch_encode(batch, 0, &data);
        tproto_batch_clear(batch);
        uint32_t from = b->rounds_sent % n;
        for (uint32_t i = 0; i < n; i++) {
            struct host *h = &b->hosts[grp * n + (from + i) % n];
            if (b->opt.scenario != SC_ALL && i) {
                break;
            }
            /* Answers queued for this host go first, as a real agent's
             * would. */
            host_flush(h);
            if (zmq_send(h->sock, data, len, 0) < 0) {
                cli_die("host %s: cannot send %zu bytes of satisfactions: "
                        "%s", h->id, len, zmq_strerror(errno));
            }
            h->last_tx_ns = mono_ns();
        }
        free(data);
    }
}

/* ---------------------------------------------------------------------- */
/* Throughput. */

struct tput_result {
    double wall_s, cpu_s, main_cpu_s, bench_cpu_s;
    double other_cpu_s, steal_s;        /* Other processes, hypervisor. */
    int64_t sat, decisions, alerts, msgs_in, msgs_out, polls, replies,
            stale, late;
    int64_t invalid, sat_unknown, full, deadline, send_drops, pub_drops,
            missing;
};

static void
throughput_round(struct bench *b, struct tproto_batch *batch)
{
    uint32_t count = b->opt.batch;
    if (b->opt.scenario == SC_ONE_QUIET) {
        b->round_left[b->rounds_sent % b->n_round_slots]
            = count * (event_members(b) - 1);
    }
    send_round(b, b->keys_sent, count, current_epoch(b) - 1, batch);
    b->keys_sent += count;
    b->rounds_sent++;
}

/* Runs the load until 'until' (monotonic ns). */
static void
throughput_run(struct bench *b, uint64_t until, struct tproto_batch *batch)
{
    while (mono_ns() < until) {
        bool room = b->keys_sent - b->keys_done + b->opt.batch
                    <= b->window_keys;
        service(b, room ? 0 : 1);
        for (int i = 0; i < 4 && b->keys_sent - b->keys_done + b->opt.batch
                                 <= b->window_keys; i++) {
            throughput_round(b, batch);
        }
        if (b->keys_sent != b->keys_done
            && mono_ns() - b->last_progress_ns > b->opt.timeout_ns) {
            cli_die("no decision for %"PRIu64" ms with %"PRIu64" keys in "
                "flight (alerts received %"PRIu64", polls %"PRIu64"); see "
                "the TEM's counters (tem-ctl status)",
                (uint64_t) (b->opt.timeout_ns / NS_PER_MS),
                b->keys_sent - b->keys_done,
                b->alerts_rx, b->polls_rx);
        }
    }
}

static bool
all_done(struct bench *b)
{
    return b->keys_done >= b->keys_sent;
}

static void
throughput(struct bench *b, struct tput_result *res)
{
    struct tproto_batch batch;
    struct tem_sample s0, s1;

    /* Messages per key: all: N satisfactions, N-1 polls and as many
     * (stale) replies at most; one: 1 satisfaction, N-1 polls and
     * replies. */
    uint32_t n = b->opt.n_hosts;
    uint32_t per_key = b->opt.scenario == SC_ALL ? 3 * n - 2 : 2 * n - 1;
    b->window_keys = MAX(2 * b->opt.batch, b->opt.window / per_key
                                           / b->opt.batch * b->opt.batch);
    if (b->opt.scenario == SC_ONE_QUIET) {
        b->n_round_slots = b->window_keys / b->opt.batch + 2;
        b->round_left = xcalloc(b->n_round_slots, sizeof *b->round_left);
    }
    tproto_batch_init(&batch);
    b->last_progress_ns = mono_ns();
    throughput_run(b, mono_ns() + b->opt.warmup_ns, &batch);

    double bench0 = self_cpu_s();
    tem_sample(b, &s0);
    throughput_run(b, s0.mono_ns + b->opt.seconds_ns, &batch);
    tem_sample(b, &s1);
    double bench1 = self_cpu_s();

    service_until(b, all_done, "the last decisions");
    tproto_batch_destroy(&batch);
    free(b->round_left);
    b->round_left = NULL;

    res->wall_s = (s1.mono_ns - s0.mono_ns) / 1e9;
    res->cpu_s = (s1.cpu_ns - s0.cpu_ns) / 1e9;
    res->main_cpu_s = (s1.main_cpu_ns - s0.main_cpu_ns) / 1e9;
    res->bench_cpu_s = bench1 - bench0;
    res->other_cpu_s = MAX(0, s1.busy_s - s0.busy_s - res->bench_cpu_s
                              - (b->opt.tem_pid ? res->cpu_s : 0));
    res->steal_s = s1.steal_s - s0.steal_s;
    res->sat = counter_delta(&s0, &s1, "satisfactions");
    res->decisions = counter_delta(&s0, &s1, "decisions");
    res->alerts = counter_delta(&s0, &s1, "alerts");
    res->msgs_in = counter_delta(&s0, &s1, "msgs_in");
    res->msgs_out = counter_delta(&s0, &s1, "msgs_out");
    res->polls = counter_delta(&s0, &s1, "polls_sent");
    res->replies = counter_delta(&s0, &s1, "poll_replies");
    res->stale = counter_delta(&s0, &s1, "replies_stale");
    res->late = counter_delta(&s0, &s1, "sat_late");
    res->invalid = counter_delta(&s0, &s1, "invalid_msgs")
                   + counter_delta(&s0, &s1, "invalid_frames");
    res->sat_unknown = counter_delta(&s0, &s1, "sat_unknown");
    res->full = counter_delta(&s0, &s1, "decisions_full");
    res->deadline = counter_delta(&s0, &s1, "decided_deadline");
    res->send_drops = counter_delta(&s0, &s1, "send_drops");
    res->missing = counter_delta(&s0, &s1, "missing_parts");
    res->pub_drops = s1.pub_drops - s0.pub_drops;
    json_object_put(s0.counters);
    json_object_put(s1.counters);
}

static double
rate(double n, double s)
{
    return s > 0 ? n / s : 0;
}

static void
throughput_report(const struct bench *b, const struct tput_result *r)
{
    const struct options *o = &b->opt;
    int64_t msgs = r->msgs_in + r->msgs_out;
    int64_t errors = r->invalid + r->sat_unknown + r->full + r->deadline
                     + r->send_drops + r->pub_drops + r->missing;

    if (o->json) {
        struct json_object *j = json_object_new_object();
#define ADD_INT(NAME, V) \
        json_object_object_add(j, NAME, json_object_new_int64(V))
#define ADD_DBL(NAME, V) \
        json_object_object_add(j, NAME, json_object_new_double(V))
        json_object_object_add(j, "mode", json_object_new_string(
                                   "throughput"));
        json_object_object_add(j, "scenario", json_object_new_string(
                                   scenario_names[o->scenario]));
        ADD_INT("hosts", o->n_hosts);
        ADD_INT("old_hosts", o->n_old_hosts);
        ADD_INT("event_hosts", event_members(b));
        ADD_INT("events", o->n_events);
        ADD_INT("batch", o->batch);
        ADD_INT("window", o->window);
        ADD_INT("window_keys", b->window_keys);
        ADD_DBL("wall_s", r->wall_s);
        ADD_DBL("tem_cpu_s", r->cpu_s);
        ADD_DBL("tem_main_cpu_s", r->main_cpu_s);
        ADD_DBL("bench_cpu_s", r->bench_cpu_s);
        ADD_DBL("other_cpu_s", r->other_cpu_s);
        ADD_DBL("steal_s", r->steal_s);
        ADD_INT("satisfactions", r->sat);
        ADD_INT("decisions", r->decisions);
        ADD_INT("alerts", r->alerts);
        ADD_INT("msgs_in", r->msgs_in);
        ADD_INT("msgs_out", r->msgs_out);
        ADD_INT("polls_sent", r->polls);
        ADD_INT("poll_replies", r->replies);
        ADD_INT("poll_batches_rx", b->poll_batches_rx);
        ADD_INT("replies_stale", r->stale);
        ADD_INT("sat_late", r->late);
        ADD_DBL("sat_per_cpu_s", rate(r->sat, r->cpu_s));
        ADD_DBL("sat_per_main_cpu_s", rate(r->sat, r->main_cpu_s));
        ADD_DBL("sat_per_s", rate(r->sat, r->wall_s));
        ADD_DBL("decisions_per_s", rate(r->decisions, r->wall_s));
        ADD_DBL("decisions_per_cpu_s", rate(r->decisions, r->cpu_s));
        ADD_DBL("msgs_per_cpu_s", rate(msgs, r->cpu_s));
        ADD_DBL("msgs_per_main_cpu_s", rate(msgs, r->main_cpu_s));
        ADD_DBL("msgs_per_s", rate(msgs, r->wall_s));
        ADD_DBL("tem_cpu_util", rate(r->cpu_s, r->wall_s));
        ADD_DBL("other_cpu_util", rate(r->other_cpu_s, r->wall_s));
        ADD_INT("errors", errors);
        ADD_INT("invalid", r->invalid);
        ADD_INT("sat_unknown", r->sat_unknown);
        ADD_INT("decisions_full", r->full);
        ADD_INT("decided_deadline", r->deadline);
        ADD_INT("send_drops", r->send_drops);
        ADD_INT("pub_drops", r->pub_drops);
        ADD_INT("missing_parts", r->missing);
#undef ADD_INT
#undef ADD_DBL
        puts(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
        json_object_put(j);
        return;
    }
    printf("throughput, scenario %s: %"PRIu32" hosts, %"PRIu32" events, "
           "batch %"PRIu32", window %"PRIu32" messages (%"PRIu32" keys), "
           "%.2f s\n", scenario_names[o->scenario], o->n_hosts, o->n_events,
           o->batch, o->window, b->window_keys, r->wall_s);
    printf("  TEM CPU %.2f s (main thread %.2f s), bench CPU %.2f s, other "
           "processes %.2f s, stolen %.2f s\n", r->cpu_s, r->main_cpu_s,
           r->bench_cpu_s, r->other_cpu_s, r->steal_s);
    printf("  satisfactions %"PRId64": %.3f M per TEM CPU-s, %.3f M per "
           "main-thread CPU-s, %.3f M/s wall\n", r->sat,
           rate(r->sat, r->cpu_s) / 1e6, rate(r->sat, r->main_cpu_s) / 1e6,
           rate(r->sat, r->wall_s) / 1e6);
    printf("  decisions %"PRId64" (%.3f M/s wall), alerts %"PRId64", polls "
           "%"PRId64", replies %"PRId64" (stale %"PRId64")\n",
           r->decisions, rate(r->decisions, r->wall_s) / 1e6, r->alerts,
           r->polls, r->replies, r->stale);
    printf("  messages in+out %"PRId64": %.3f M per TEM CPU-s, %.3f M/s "
           "wall\n", msgs, rate(msgs, r->cpu_s) / 1e6,
           rate(msgs, r->wall_s) / 1e6);
    printf("  errors %"PRId64" (invalid %"PRId64", unknown %"PRId64", "
           "full %"PRId64", deadline %"PRId64", send drops %"PRId64", pub "
           "drops %"PRId64", missing %"PRId64")\n", errors, r->invalid,
           r->sat_unknown, r->full, r->deadline, r->send_drops,
           r->pub_drops, r->missing);
}

/* ---------------------------------------------------------------------- */
/* Latency. */

static bool
round_complete(struct bench *b)
{
    return b->n_lat >= b->lat_expected;
}

static int
compare_double(const void *a_, const void *b_)
{
    double a = *(const double *) a_, b = *(const double *) b_;
    return a < b ? -1 : a > b;
}

/* Percentile 'p' (0..100) of sorted 'v' (nearest rank). */
static double
percentile(const double *v, size_t n, double p)
{
    if (!n) {
        return 0;
    }
    size_t rank = (size_t) ceil(p / 100.0 * n);
    return v[rank ? rank - 1 : 0];
}

static double
mean(const double *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        s += v[i];
    }
    return n ? s / n : 0;
}

static void
latency(struct bench *b)
{
    struct tproto_batch batch;
    uint32_t e = b->opt.n_events;
    uint32_t total = LATENCY_WARMUP_EPOCHS + b->opt.epochs;
    uint64_t warm_lat = 0;
    uint64_t last_epoch = 0;

    /* The load of other processes while the epochs run. */
    double busy0, busy1, steal, self0 = self_cpu_s();
    uint64_t t0 = mono_ns(), tem0 = 0, tem1 = 0, main_ns;
    machine_cpu(&busy0, &steal);
    if (b->opt.tem_pid) {
        tem_cpu(b->opt.tem_pid, &tem0, &main_ns);
    }

    tproto_batch_init(&batch);
    b->collect = true;
    for (uint32_t r = 0; r < total; r++) {
        /* Wait for a new epoch, then report the one that ended, as a
         * monitor does after its sweep. */
        uint64_t ep;
        while ((ep = current_epoch(b)) <= last_epoch + 1 && last_epoch) {
            service(b, 1);
        }
        last_epoch = ep;
        if (r == LATENCY_WARMUP_EPOCHS) {
            warm_lat = b->n_lat;
            b->n_lat = 0;
            b->lat_deadline = b->lat_missing = b->lat_other = 0;
        }
        b->round_epoch = ep - 1;
        b->lat_expected = b->n_lat + e;
        b->rounds_sent = 0;     /* Host bh0 sends. */
        b->first_poll_ns = b->last_poll_ns = b->last_reply_ns = 0;
        b->first_alert_ns = b->last_alert_ns = 0;
        b->sent_ns = mono_ns();
        send_round(b, (uint64_t) r * e, e, b->round_epoch, &batch);
        service_until(b, round_complete, "the alerts of an epoch");
        if (r >= LATENCY_WARMUP_EPOCHS && b->first_poll_ns) {
            b->ph_poll += b->first_poll_ns - b->sent_ns;
            b->ph_polls += b->last_poll_ns - b->first_poll_ns;
            b->ph_reply += b->last_reply_ns - b->last_poll_ns;
            b->ph_decide += b->last_alert_ns - b->last_reply_ns;
        }
        if (r >= LATENCY_WARMUP_EPOCHS) {
            b->ph_total += b->last_alert_ns - b->sent_ns;
            b->ph_rounds++;
        }
    }
    tproto_batch_destroy(&batch);
    machine_cpu(&busy1, &steal);
    if (b->opt.tem_pid) {
        tem_cpu(b->opt.tem_pid, &tem1, &main_ns);
    }
    double self_s = self_cpu_s() - self0;
    double other = MAX(0, busy1 - busy0 - self_s - (tem1 - tem0) / 1e9)
                   / ((mono_ns() - t0) / 1e9);
    /* CPU time per epoch: the TEM's (all threads) and the bench's. */
    double tem_round_us = (tem1 - tem0) / 1e3 / total;
    double bench_round_us = self_s * 1e6 / total;

    size_t n = b->n_lat;
    double avg = mean(b->lat, n), e2e_avg = mean(b->e2e, n);
    qsort(b->lat, n, sizeof *b->lat, compare_double);
    qsort(b->e2e, n, sizeof *b->e2e, compare_double);
    const struct options *o = &b->opt;
    double rounds = MAX(b->ph_rounds, 1) * 1e3;
    double ph_poll = b->ph_poll / rounds, ph_polls = b->ph_polls / rounds;
    double ph_reply = b->ph_reply / rounds;
    double ph_decide = b->ph_decide / rounds;
    double ph_total = b->ph_total / rounds;
    if (o->json) {
        printf("{\"mode\":\"latency\",\"hosts\":%"PRIu32",\"events\":%"PRIu32
               ",\"epochs\":%"PRIu32",\"alerts\":%zu,\"avg_us\":%.1f,"
               "\"p50_us\":%.0f,\"p99_us\":%.0f,\"max_us\":%.0f,"
               "\"e2e_avg_us\":%.1f,\"e2e_p50_us\":%.0f,\"e2e_p99_us\":%.0f,"
               "\"e2e_max_us\":%.0f,\"deadline\":%"PRIu64",\"missing\":%"
               PRIu64",\"other\":%"PRIu64",\"warmup_alerts\":%"PRIu64","
               "\"round_us\":%.1f,\"to_first_poll_us\":%.1f,"
               "\"polls_us\":%.1f,\"replies_us\":%.1f,"
               "\"to_last_alert_us\":%.1f,\"other_cpu_util\":%.2f,"
               "\"tem_cpu_per_epoch_us\":%.1f,"
               "\"bench_cpu_per_epoch_us\":%.1f}\n",
               o->n_hosts, e, o->epochs, n, avg, percentile(b->lat, n, 50),
               percentile(b->lat, n, 99), percentile(b->lat, n, 100),
               e2e_avg, percentile(b->e2e, n, 50),
               percentile(b->e2e, n, 99), percentile(b->e2e, n, 100),
               b->lat_deadline, b->lat_missing, b->lat_other, warm_lat,
               ph_total, ph_poll, ph_polls, ph_reply, ph_decide, other,
               tem_round_us, bench_round_us);
    } else {
        printf("latency: %"PRIu32" hosts, %"PRIu32" events satisfied in each "
               "of %"PRIu32" epochs: %zu alerts\n", o->n_hosts, e, o->epochs,
               n);
        printf("  TEM latency_us (first satisfaction to decision): avg %.1f, "
               "p50 %.0f, p99 %.0f, max %.0f\n", avg,
               percentile(b->lat, n, 50), percentile(b->lat, n, 99),
               percentile(b->lat, n, 100));
        printf("  bench send to alert received (us): avg %.1f, p50 %.0f, "
               "p99 %.0f, max %.0f\n", e2e_avg, percentile(b->e2e, n, 50),
               percentile(b->e2e, n, 99), percentile(b->e2e, n, 100));
        printf("  per epoch (avg us): send to last alert %.1f = to first "
               "poll %.1f + polls arriving %.1f + last replies out %.1f + "
               "to last alert %.1f\n", ph_total, ph_poll, ph_polls, ph_reply,
               ph_decide);
        printf("  decided at the deadline %"PRIu64", alerts with missing "
               "hosts %"PRIu64", alerts of other epochs %"PRIu64"\n",
               b->lat_deadline, b->lat_missing, b->lat_other);
        printf("  CPU time per epoch: TEM %.1f us, bench %.1f us; other "
               "processes used %.2f CPUs meanwhile\n", tem_round_us,
               bench_round_us, other);
    }
    free(b->lat);
    free(b->e2e);
}

/* ---------------------------------------------------------------------- */
/* Round trip without the TEM. */

struct echo {
    void *zctx, *router;
    char ep[256];
};

static void *
echo_main(void *e_)
{
    struct echo *e = e_;
    for (;;) {
        zmq_msg_t id, body;
        zmq_msg_init(&id);
        zmq_msg_init(&body);
        if (zmq_msg_recv(&id, e->router, 0) < 0
            || zmq_msg_recv(&body, e->router, 0) < 0) {
            /* The context was shut down: the socket is ours to close. */
            zmq_msg_close(&id);
            zmq_msg_close(&body);
            zmq_close(e->router);
            return NULL;
        }
        zmq_msg_send(&id, e->router, ZMQ_SNDMORE);
        zmq_msg_send(&body, e->router, 0);
    }
}

static void
rtt(const struct options *o)
{
    struct echo e;
    pthread_t thread;
    int zero = 0;
    size_t len = sizeof e.ep;
    char buf[64] = { 0 };

    e.zctx = zmq_ctx_new();
    e.router = zmq_socket(e.zctx, ZMQ_ROUTER);
    zmq_setsockopt(e.router, ZMQ_LINGER, &zero, sizeof zero);
    tpm_zmq_max_msg(e.router, TPROTO_MAX_FRAME);
    if (zmq_bind(e.router, "tcp://127.0.0.1:*")
        || zmq_getsockopt(e.router, ZMQ_LAST_ENDPOINT, e.ep, &len)) {
        cli_die("rtt: cannot bind a ROUTER on loopback: %s",
            zmq_strerror(errno));
    }
    pthread_create(&thread, NULL, echo_main, &e);

    void *ctx = zmq_ctx_new();
    void *dealer = zmq_socket(ctx, ZMQ_DEALER);
    zmq_setsockopt(dealer, ZMQ_LINGER, &zero, sizeof zero);
    tpm_zmq_max_msg(dealer, TPROTO_MAX_FRAME);
    if (zmq_connect(dealer, e.ep)) {
        cli_die("rtt: cannot connect to %s: %s", e.ep, zmq_strerror(errno));
    }
    uint32_t n = o->rtt_count, warm = MIN(n, 1000);
    double *v = xmalloc(n * sizeof *v);
    for (uint32_t i = 0; i < warm + n; i++) {
        uint64_t t0 = mono_ns();
        if (zmq_send(dealer, buf, sizeof buf, 0) < 0
            || zmq_recv(dealer, buf, sizeof buf, 0) < 0) {
            cli_die("rtt: %s", zmq_strerror(errno));
        }
        if (i >= warm) {
            v[i - warm] = (mono_ns() - t0) / 1e3;
        }
    }
    zmq_close(dealer);
    zmq_ctx_term(ctx);
    zmq_ctx_shutdown(e.zctx);
    pthread_join(thread, NULL);
    zmq_ctx_term(e.zctx);

    double avg = mean(v, n);
    qsort(v, n, sizeof *v, compare_double);
    if (o->json) {
        printf("{\"mode\":\"rtt\",\"count\":%"PRIu32",\"avg_us\":%.1f,"
               "\"p50_us\":%.1f,\"p99_us\":%.1f,\"max_us\":%.1f}\n", n, avg,
               percentile(v, n, 50), percentile(v, n, 99),
               percentile(v, n, 100));
    } else {
        printf("ZeroMQ DEALER/ROUTER round trip on loopback TCP, %"PRIu32
               " x 64 bytes: avg %.1f us, p50 %.1f, p99 %.1f, max %.1f\n",
               n, avg, percentile(v, n, 50), percentile(v, n, 99),
               percentile(v, n, 100));
    }
    free(v);
}

/* ---------------------------------------------------------------------- */
/* Options. */

enum {
    OPT_CTL = 256, OPT_TEM_PID, OPT_MODE, OPT_SCENARIO, OPT_HOSTS,
    OPT_EVENTS, OPT_BATCH, OPT_WINDOW, OPT_WARMUP, OPT_SECONDS, OPT_EPOCHS,
    OPT_RTT_COUNT, OPT_THRESHOLD, OPT_TIMEOUT, OPT_JSON, OPT_OLD_HOSTS,
    OPT_EVENT_HOSTS,
};

static void
usage(void)
{
    printf("\
tem-bench: throughput and latency of a running trumpet-tem\n\
usage: tem-bench --ctl=EP [OPTIONS]\n\
\n\
  --ctl=EP          the TEM's control socket (ipc:///run/trumpet/tem.ctl);\n\
                    its status gives the hosts' and alerts' endpoints\n\
  --tem-pid=PID     the TEM's process, for its CPU time (none: no CPU\n\
                    figures)\n\
  --mode=MODE       throughput, latency or rtt (throughput)\n\
  --scenario=S      throughput: all, one or one-quiet (one)\n\
  --hosts=N         simulated hosts (8)\n\
  --old-hosts=N     of those, N speak protocol version 2: polled one\n\
                    Poll at a time, not by PollBatch (0)\n\
  --events=E        events defined (throughput 16, latency 256)\n\
  --event-hosts=M   throughput: each event covers M hosts (a power of\n\
                    two dividing --hosts; event i the group i modulo\n\
                    hosts/M), as events scoped to a rack are (all)\n\
  --batch=B         throughput: keys per round, one frame (256)\n\
  --window=W        throughput: messages in flight at most, at least\n\
                    two rounds (16384)\n\
  --warmup=TIME     throughput: load before measuring (1s)\n\
  --seconds=TIME    throughput: measurement (3s)\n\
  --epochs=R        latency: epochs measured (20)\n\
  --rtt-count=N     rtt: round trips (20000)\n\
  --threshold=T     every event's sum threshold (1000000)\n\
  --timeout=TIME    longest wait for the TEM (10s)\n\
  --json            one JSON object instead of text\n\
\n\
The TEM must have no event: the bench defines bench_0... and deletes\n\
them at the end.  See docs/benchmarks.md, section TEM.\n");
}

/* Parses --mode's 'arg'. */
static enum bench_mode
tem_bench_parse_mode__(const char *arg)
{
    if (!strcmp(arg, "throughput")) {
        return MODE_THROUGHPUT;
    } else if (!strcmp(arg, "latency")) {
        return MODE_LATENCY;
    } else if (!strcmp(arg, "rtt")) {
        return MODE_RTT;
    }
    cli_usage_error("--mode: '%s' is not throughput, latency or rtt", arg);
}

/* Parses --scenario's 'arg'. */
static enum scenario
tem_bench_parse_scenario__(const char *arg)
{
    for (size_t i = 0; i < ARRAY_SIZE(scenario_names); i++) {
        if (!strcmp(arg, scenario_names[i])) {
            return i;
        }
    }
    cli_usage_error("--scenario: '%s' is not all, one or one-quiet", arg);
}

/* Checks the options 'o' against each other and applies the defaults that
 * depend on others. */
static void
tem_bench_check_options__(struct options *o)
{
    if (!o->n_events) {
        o->n_events = o->mode == MODE_LATENCY ? 256 : 16;
    }
    if (o->event_hosts
        && (o->event_hosts & (o->event_hosts - 1)
            || o->n_hosts % o->event_hosts || o->n_hosts > 65536
            || o->mode != MODE_THROUGHPUT)) {
        cli_usage_error("--event-hosts: %"PRIu32" is not a power of two "
                        "dividing --hosts (%"PRIu32", at most 65536), or "
                        "not in throughput mode", o->event_hosts,
                        o->n_hosts);
    }
    if (o->mode == MODE_THROUGHPUT && o->scenario == SC_ONE_QUIET
        && o->event_hosts == 1) {
        cli_usage_error("--scenario=one-quiet needs --event-hosts=2 or "
                        "more");
    }
    if (o->n_old_hosts > o->n_hosts) {
        cli_usage_error("--old-hosts: %"PRIu32" is more than --hosts "
                        "(%"PRIu32")", o->n_old_hosts, o->n_hosts);
    }
    if (o->mode == MODE_THROUGHPUT && o->scenario == SC_ONE_QUIET
        && o->n_hosts < 2) {
        cli_usage_error(
            "--scenario=one-quiet needs --hosts=2 or more (with one "
            "host every satisfaction is the whole sum)");
    }
    if (o->mode == MODE_LATENCY && o->n_events > TPROTO_MAX_BATCH) {
        cli_usage_error("--events: at most %d in latency mode (one frame)",
                  TPROTO_MAX_BATCH);
    }
}

static void
parse_options(int argc, char *argv[], struct options *o)
{
    static const struct option options[] = {
        { "ctl", required_argument, NULL, OPT_CTL },
        { "tem-pid", required_argument, NULL, OPT_TEM_PID },
        { "mode", required_argument, NULL, OPT_MODE },
        { "scenario", required_argument, NULL, OPT_SCENARIO },
        { "hosts", required_argument, NULL, OPT_HOSTS },
        { "old-hosts", required_argument, NULL, OPT_OLD_HOSTS },
        { "event-hosts", required_argument, NULL, OPT_EVENT_HOSTS },
        { "events", required_argument, NULL, OPT_EVENTS },
        { "batch", required_argument, NULL, OPT_BATCH },
        { "window", required_argument, NULL, OPT_WINDOW },
        { "warmup", required_argument, NULL, OPT_WARMUP },
        { "seconds", required_argument, NULL, OPT_SECONDS },
        { "epochs", required_argument, NULL, OPT_EPOCHS },
        { "rtt-count", required_argument, NULL, OPT_RTT_COUNT },
        { "threshold", required_argument, NULL, OPT_THRESHOLD },
        { "timeout", required_argument, NULL, OPT_TIMEOUT },
        { "json", no_argument, NULL, OPT_JSON },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };

    memset(o, 0, sizeof *o);
    o->ctl = "ipc:///run/trumpet/tem.ctl";
    o->mode = MODE_THROUGHPUT;
    o->scenario = SC_ONE;
    o->n_hosts = 8;
    o->batch = 256;
    o->window = 16384;
    o->warmup_ns = NS_PER_S;
    o->seconds_ns = 3 * NS_PER_S;
    o->epochs = 20;
    o->rtt_count = 20000;
    o->threshold = 1000000;
    o->timeout_ns = 10 * NS_PER_S;

    struct cli_parser parser;
    cli_parser_init(&parser, argc, argv, "h", options);
    for (;;) {
        int ch = cli_parser_next(&parser);
        if (ch == -1) {
            break;
        }
        const char *name = parser.name;
        switch (ch) {
        case OPT_CTL: o->ctl = optarg; break;
        case OPT_TEM_PID:
            o->tem_pid = cli_uint(name, optarg, 1, INT32_MAX);
            break;
        case OPT_MODE:
            o->mode = tem_bench_parse_mode__(optarg);
            break;
        case OPT_SCENARIO:
            o->scenario = tem_bench_parse_scenario__(optarg);
            break;
        case OPT_HOSTS:
            o->n_hosts = cli_uint(name, optarg, 1, 4096);
            break;
        case OPT_EVENT_HOSTS:
            o->event_hosts = cli_uint(name, optarg, 1, 65536);
            break;
        case OPT_OLD_HOSTS:
            o->n_old_hosts = cli_uint(name, optarg, 0, 4096);
            break;
        case OPT_EVENTS:
            o->n_events = cli_uint(name, optarg, 1, 1 << 20);
            break;
        case OPT_BATCH:
            o->batch = cli_uint(name, optarg, 1, TPROTO_MAX_BATCH);
            break;
        case OPT_WINDOW:
            o->window = cli_uint(name, optarg, 1, 1 << 24);
            break;
        case OPT_WARMUP: o->warmup_ns = cli_time(name, optarg, true); break;
        case OPT_SECONDS:
            o->seconds_ns = cli_time(name, optarg, false);
            break;
        case OPT_EPOCHS:
            o->epochs = cli_uint(name, optarg, 1, 1000000);
            break;
        case OPT_RTT_COUNT:
            o->rtt_count = cli_uint(name, optarg, 1, 100000000);
            break;
        case OPT_THRESHOLD: {
            char *end;
            o->threshold = strtod(optarg, &end);
            if (end == optarg || *end || !(o->threshold >= 1)
                || !isfinite(o->threshold)) {
                cli_usage_error(
                    "--threshold: '%s' is not a number >= 1", optarg);
            }
            break;
        }
        case OPT_TIMEOUT:
            o->timeout_ns = cli_time(name, optarg, false);
            break;
        case OPT_JSON: o->json = true; break;
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
    tem_bench_check_options__(o);
}

int
main(int argc, char *argv[])
{
    struct bench b;
    int zero = 0;

    memset(&b, 0, sizeof b);
    cli_init("tem-bench", 2);
    parse_options(argc, argv, &b.opt);
    if (b.opt.mode == MODE_RTT) {
        rtt(&b.opt);
        return EXIT_SUCCESS;
    }

    b.zctx = zmq_ctx_new();
    /* A socket per host, beyond ZeroMQ's default of 1023 sockets. */
    zmq_ctx_set(b.zctx, ZMQ_MAX_SOCKETS, b.opt.n_hosts + 16);
    b.ctl = zmq_socket(b.zctx, ZMQ_REQ);
    zmq_setsockopt(b.ctl, ZMQ_LINGER, &zero, sizeof zero);
    tpm_zmq_max_msg(b.ctl, 64 << 20);
    if (zmq_connect(b.ctl, b.opt.ctl)) {
        cli_die("cannot connect to the control socket %s: %s", b.opt.ctl,
            zmq_strerror(errno));
    }
    setup(&b);
    if (b.opt.mode == MODE_THROUGHPUT) {
        struct tput_result r;
        throughput(&b, &r);
        throughput_report(&b, &r);
    } else {
        latency(&b);
    }
    teardown(&b);
    zmq_close(b.sub);
    zmq_close(b.ctl);
    zmq_ctx_term(b.zctx);
    return EXIT_SUCCESS;
}
