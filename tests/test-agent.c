/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the host agent (lib/agent.h) against a fake TEM written here: a
 * ZeroMQ ROUTER socket on "tcp://127.0.0.1:*" that the test drives by
 * hand, reading and writing frames with lib/tproto.h.  Knobs are short
 * (heartbeat 50 ms where it matters, backoff 20-200 ms) so that the
 * whole suite runs in a few seconds; every wait polls with a bound.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <sys/stat.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "agent.h"
#include "clock.h"
#include "curve.h"
#include "test-util.h"
#include "tproto.h"
#include "util.h"

#define MS UINT64_C(1000000)

/* Longest wait for anything the test expects (generous: the machine may
 * be busy); waits end as soon as the thing happens. */
#define WAIT_MS 3000

/* The fake TEM. */
struct tem {
    void *ctx;
    void *router;
    char endpoint[256];
    uint8_t peer[256];          /* Identity of the last peer heard. */
    size_t peer_len;
    uint32_t heartbeat_ms;      /* Sent in Welcome. */
    uint32_t version;           /* Chosen in Welcome (1). */
    uint64_t last_tx_ns;
    uint64_t hb_seq;
};

static void
tem_bind(struct tem *t, const char *endpoint)
{
    t->router = zmq_socket(t->ctx, ZMQ_ROUTER);
    ck_assert_ptr_nonnull(t->router);
    int linger = 0;
    ck_assert_int_eq(zmq_setsockopt(t->router, ZMQ_LINGER, &linger,
                                    sizeof linger), 0);
    ck_assert_msg(!zmq_bind(t->router, endpoint), "bind %s: %s", endpoint,
                  zmq_strerror(errno));
    size_t size = sizeof t->endpoint;
    ck_assert_int_eq(zmq_getsockopt(t->router, ZMQ_LAST_ENDPOINT,
                                    t->endpoint, &size), 0);
}

static void
tem_init(struct tem *t, uint32_t heartbeat_ms)
{
    memset(t, 0, sizeof *t);
    t->ctx = zmq_ctx_new();
    ck_assert_ptr_nonnull(t->ctx);
    t->heartbeat_ms = heartbeat_ms;
    t->version = 1;
    tem_bind(t, "tcp://127.0.0.1:*");
}

static void
tem_close(struct tem *t)
{
    if (t->router) {
        zmq_close(t->router);
        t->router = NULL;
    }
}

static void
tem_destroy(struct tem *t)
{
    tem_close(t);
    zmq_ctx_term(t->ctx);
}

static void
tem_send_raw(struct tem *t, const void *data, size_t len)
{
    ck_assert_msg(t->peer_len, "no peer to send to");
    ck_assert_int_ge(zmq_send(t->router, t->peer, t->peer_len, ZMQ_SNDMORE),
                     0);
    ck_assert_int_ge(zmq_send(t->router, data, len, 0), 0);
    t->last_tx_ns = tpm_clock_mono_ns();
}

/* Sends the messages of 'b' as one frame and empties 'b'. */
static void
tem_send(struct tem *t, struct tproto_batch *b)
{
    uint8_t *data;
    size_t len = tproto_batch_encode(b, 0, &data);
    tem_send_raw(t, data, len);
    free(data);
    tproto_batch_clear(b);
}

static void
tem_send_heartbeat(struct tem *t)
{
    struct tproto_batch b;
    tproto_batch_init(&b);
    tproto_add_heartbeat(&b, tpm_clock_real_ns(), t->hb_seq++);
    tem_send(t, &b);
    tproto_batch_destroy(&b);
}

/* Receives one frame within 'timeout_ms' (NULL if none), keeping the
 * session alive with heartbeats meanwhile.  The frame must decode. */
static Trumpet__Frame *
tem_recv(struct tem *t, int timeout_ms)
{
    uint64_t deadline = tpm_clock_mono_ns() + timeout_ms * MS;

    for (;;) {
        uint64_t now = tpm_clock_mono_ns();
        if (t->peer_len && t->heartbeat_ms
            && now - t->last_tx_ns >= t->heartbeat_ms * MS / 3) {
            tem_send_heartbeat(t);
        }
        if (now >= deadline) {
            return NULL;
        }
        zmq_pollitem_t item = { .socket = t->router, .events = ZMQ_POLLIN };
        int slice = t->heartbeat_ms ? MAX(1, t->heartbeat_ms / 5) : 20;
        ck_assert_int_ge(zmq_poll(&item, 1, slice), 0);
        if (!(item.revents & ZMQ_POLLIN)) {
            continue;
        }

        zmq_msg_t id, body;
        zmq_msg_init(&id);
        zmq_msg_init(&body);
        ck_assert_int_ge(zmq_msg_recv(&id, t->router, 0), 0);
        ck_assert(zmq_msg_more(&id));
        ck_assert_int_ge(zmq_msg_recv(&body, t->router, 0), 0);
        ck_assert(!zmq_msg_more(&body));
        ck_assert_int_le(zmq_msg_size(&id), sizeof t->peer);
        t->peer_len = zmq_msg_size(&id);
        memcpy(t->peer, zmq_msg_data(&id), t->peer_len);

        const char *why;
        Trumpet__Frame *f = tproto_decode(zmq_msg_data(&body),
                                          zmq_msg_size(&body), &why);
        ck_assert_msg(f, "agent sent an undecodable frame: %s", why);
        for (size_t i = 0; i < f->n_messages; i++) {
            const char *error = tproto_validate(f->messages[i]);
            ck_assert_msg(!error, "agent sent an invalid message: %s",
                          error);
        }
        zmq_msg_close(&id);
        zmq_msg_close(&body);
        return f;
    }
}

/* Receives frames until one holds a message that is not a heartbeat;
 * returns that frame with its heartbeats removed from the count check
 * left to the caller. */
static Trumpet__Frame *
tem_recv_data(struct tem *t, int timeout_ms)
{
    uint64_t deadline = tpm_clock_mono_ns() + timeout_ms * MS;
    for (;;) {
        uint64_t now = tpm_clock_mono_ns();
        if (now >= deadline) {
            return NULL;
        }
        Trumpet__Frame *f = tem_recv(t, (deadline - now) / MS + 1);
        if (!f) {
            return NULL;
        }
        for (size_t i = 0; i < f->n_messages; i++) {
            if (f->messages[i]->body_case
                != TRUMPET__MESSAGE__BODY_HEARTBEAT) {
                return f;
            }
        }
        tproto_free(f);
    }
}

/* Expects a frame holding exactly one message of kind 'type' (heartbeats
 * skipped) and returns it. */
static Trumpet__Frame *
tem_expect(struct tem *t, Trumpet__Message__BodyCase type)
{
    Trumpet__Frame *f = tem_recv_data(t, WAIT_MS);
    ck_assert_msg(f, "no %s from the agent", tproto_body_name(type));
    ck_assert_uint_eq(f->n_messages, 1);
    ck_assert_msg(f->messages[0]->body_case == type, "got %s, expected %s",
                  tproto_body_name(f->messages[0]->body_case),
                  tproto_body_name(type));
    return f;
}

static void
tem_welcome_version(struct tem *t, const char *tem_id, uint32_t version)
{
    struct tproto_batch b;
    tproto_batch_init(&b);
    tproto_add_welcome(&b, version, tem_id, tpm_clock_real_ns(),
                       t->heartbeat_ms);
    tem_send(t, &b);
    tproto_batch_destroy(&b);
}

static void
tem_welcome(struct tem *t, const char *tem_id)
{
    struct tproto_batch b;
    tproto_batch_init(&b);
    tproto_add_welcome(&b, t->version, tem_id, tpm_clock_real_ns(),
                       t->heartbeat_ms);
    tem_send(t, &b);
    tproto_batch_destroy(&b);
}

/* The agent under test. */

static const uint32_t pmds[] = { 3, 5, 7 };
static struct tpm_prefix prefixes[2];

static void
agent_config(struct tpm_agent_config *c, const char *endpoint)
{
    tpm_agent_config_init(c);
    char *error = tpm_prefix_parse("10.99.0.0/24", &prefixes[0]);
    ck_assert_ptr_null(error);
    error = tpm_prefix_parse("fd00::/8", &prefixes[1]);
    ck_assert_ptr_null(error);
    c->endpoint = endpoint;
    c->host_id = "host-1.a:b_c";
    c->prefixes = prefixes;
    c->n_prefixes = 2;
    c->epoch_ns = 10 * MS;
    c->pmd_ids = pmds;
    c->n_pmds = ARRAY_SIZE(pmds);
    c->software = "test-agent 1.0";
    c->backoff_min_ns = 20 * MS;
    c->backoff_max_ns = 200 * MS;
    c->hello_timeout_ns = 1000 * MS;
    /* The fake TEM is plaintext; test_curve has keys. */
    c->insecure_plaintext = true;
}

static struct tpm_agent *
agent_start(const struct tpm_agent_config *c)
{
    char *error;
    struct tpm_agent *a = tpm_agent_create(c, &error);
    ck_assert_msg(a, "tpm_agent_create: %s", error);
    return a;
}

static struct tpm_agent_status
status(struct tpm_agent *a)
{
    struct tpm_agent_status s;
    tpm_agent_get_status(a, &s);
    return s;
}

static void
sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* Waits until the agent's state is 'state'. */
static void
wait_state(struct tpm_agent *a, enum tpm_agent_state state)
{
    uint64_t deadline = tpm_clock_mono_ns() + WAIT_MS * MS;
    while (status(a).state != state) {
        ck_assert_msg(tpm_clock_mono_ns() < deadline, "state %s, expected "
                      "%s", tpm_agent_state_name(status(a).state),
                      tpm_agent_state_name(state));
        sleep_ms(2);
    }
}

/* Waits until the agent's status 's' satisfies 'cond' (an expression on
 * 's'), failing after WAIT_MS. */
#define WAIT_STATUS(a, s, cond)                                         \
    do {                                                                \
        uint64_t deadline_ = tpm_clock_mono_ns() + WAIT_MS * MS;        \
        for (;;) {                                                      \
            struct tpm_agent_status s = status(a);                      \
            if (cond) {                                                 \
                break;                                                  \
            }                                                           \
            ck_assert_msg(tpm_clock_mono_ns() < deadline_,              \
                          "still not %s: acked %"PRIu64", pending "     \
                          "%"PRIu64, #cond, s.acked, s.pending);        \
            sleep_ms(1);                                                \
        }                                                               \
    } while (0)

/* Takes the next command, waiting on tpm_agent_fd() for it. */
static void
wait_cmd(struct tpm_agent *a, struct tpm_agent_cmd *cmd)
{
    struct pollfd pfd = { .fd = tpm_agent_fd(a), .events = POLLIN };
    ck_assert_msg(poll(&pfd, 1, WAIT_MS) == 1, "no command from the agent");
    ck_assert(tpm_agent_recv(a, cmd));
}

/* Returns true if tpm_agent_fd() is readable now. */
static bool
fd_readable(struct tpm_agent *a)
{
    struct pollfd pfd = { .fd = tpm_agent_fd(a), .events = POLLIN };
    return poll(&pfd, 1, 0) == 1;
}

/* Checks the Hello in 'f' against agent_config(), but that it names the
 * monitors 'ids' ('n' of them). */
static void
check_hello_pmds(const Trumpet__Frame *f, const uint32_t *ids, size_t n)
{
    ck_assert_uint_eq(f->version, TPROTO_VERSION_MAX);
    const Trumpet__Hello *h = f->messages[0]->hello;
    ck_assert_uint_eq(h->version_min, TPROTO_VERSION_MIN);
    ck_assert_uint_eq(h->version_max, TPROTO_VERSION_MAX);
    ck_assert_str_eq(h->host_id, "host-1.a:b_c");
    ck_assert_uint_eq(h->epoch_ns, 10 * MS);
    uint64_t now = tpm_clock_real_ns();
    ck_assert_msg(h->clock_ns <= now && h->clock_ns + 5000 * MS > now,
                  "hello clock %"PRIu64", now %"PRIu64, h->clock_ns, now);
    ck_assert_str_eq(h->software, "test-agent 1.0");
    ck_assert_uint_eq(h->n_pmd_ids, n);
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_eq(h->pmd_ids[i], ids[i]);
    }
    ck_assert_uint_eq(h->n_prefixes, 2);
    char buf[64];
    struct tpm_prefix p;
    tproto_prefix_from_msg(h->prefixes[0], &p);
    ck_assert_str_eq(tpm_prefix_format(&p, buf, sizeof buf), "10.99.0.0/24");
    tproto_prefix_from_msg(h->prefixes[1], &p);
    ck_assert_str_eq(tpm_prefix_format(&p, buf, sizeof buf), "fd00::/8");
}

static void
check_hello(const Trumpet__Frame *f)
{
    check_hello_pmds(f, pmds, ARRAY_SIZE(pmds));
}

/* Opens a session: Hello checked (naming the monitors 'ids', 'n' of
 * them), Welcome sent (in the same frame as a Heartbeat saying reports up
 * to 'received' arrived, if not 0), RESYNC taken.  Returns the Hello's
 * agent instance. */
static uint64_t
open_session_pmds(struct tem *t, struct tpm_agent *a, uint64_t sessions,
                  uint64_t received, const uint32_t *ids, size_t n)
{
    Trumpet__Frame *f = tem_expect(t, TRUMPET__MESSAGE__BODY_HELLO);
    check_hello_pmds(f, ids, n);
    ck_assert(f->messages[0]->hello->has_instance);
    uint64_t instance = f->messages[0]->hello->instance;
    ck_assert_uint_ne(instance, 0);
    tproto_free(f);
    struct tproto_batch b;
    tproto_batch_init(&b);
    tproto_add_welcome(&b, t->version, "tem-test", tpm_clock_real_ns(),
                       t->heartbeat_ms);
    if (received) {
        tproto_add_heartbeat(&b, tpm_clock_real_ns(), t->hb_seq++);
        tproto_set_received(&b, received);
    }
    tem_send(t, &b);
    tproto_batch_destroy(&b);

    struct tpm_agent_cmd cmd;
    wait_cmd(a, &cmd);
    ck_assert_int_eq(cmd.type, TPM_AGENT_RESYNC);
    tpm_agent_cmd_free(&cmd);
    ck_assert(!fd_readable(a));

    struct tpm_agent_status s = status(a);
    ck_assert_int_eq(s.state, TPM_AGENT_CONNECTED);
    ck_assert_str_eq(s.tem_id, "tem-test");
    ck_assert_uint_eq(s.version, t->version);
    ck_assert_uint_eq(s.sessions, sessions);
    return instance;
}

static uint64_t
open_session_received(struct tem *t, struct tpm_agent *a, uint64_t sessions,
                      uint64_t received)
{
    return open_session_pmds(t, a, sessions, received, pmds,
                             ARRAY_SIZE(pmds));
}

static void
open_session(struct tem *t, struct tpm_agent *a, uint64_t sessions)
{
    open_session_received(t, a, sessions, 0);
}

static struct tpm_key
make_key(uint8_t last, uint16_t sport)
{
    struct tpm_key k;
    memset(&k, 0, sizeof k);
    k.ipver = 4;
    k.proto = 6;
    k.src[0] = htonl(0x0a630000 | last);
    k.dst[0] = htonl(0x0a630101);
    k.sport = sport;
    k.dport = 80;
    return k;
}

START_TEST(test_endpoint)
{
    static const struct {
        const char *in, *out, *error;
    } cases[] = {
        { "tcp:127.0.0.1:6653", "tcp://127.0.0.1:6653", NULL },
        { "tcp:[::1]:6653", "tcp://[::1]:6653", NULL },
        { "tcp:tem.example:1", "tcp://tem.example:1", NULL },
        { "tcp://10.0.0.1:7000", "tcp://10.0.0.1:7000", NULL },
        { "ipc:///run/tem.sock", "ipc:///run/tem.sock", NULL },
        { "unix:/run/tem.sock", "ipc:///run/tem.sock", NULL },
        { "tcp:127.0.0.1", NULL, "expected tcp:HOST:PORT" },
        { "tcp:127.0.0.1:0", NULL, "not a number in [1, 65535]" },
        { "tcp:127.0.0.1:70000", NULL, "not a number in [1, 65535]" },
        { "tcp:127.0.0.1:x", NULL, "'x'" },
        { "tcp:[::1:6653", NULL, "[ADDRESS]:PORT" },
        { "tcp://", NULL, "address missing" },
        { "unix:", NULL, "path missing" },
        { "ssl:1.2.3.4:5", NULL, "not understood" },
        { "", NULL, "no TEM endpoint" },
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char *zep;
        char *error = tpm_agent_parse_endpoint(cases[i].in, &zep);
        if (cases[i].out) {
            ck_assert_msg(!error, "%s: %s", cases[i].in, error);
            ck_assert_str_eq(zep, cases[i].out);
            free(zep);
        } else {
            ck_assert_msg(error, "%s accepted", cases[i].in);
            ck_assert_ptr_null(zep);
            ck_assert_msg(strstr(error, cases[i].error), "%s: %s",
                          cases[i].in, error);
            free(error);
        }
    }

    /* Creation checks the endpoint and the configuration. */
    struct tpm_agent_config c;
    char *error;
    agent_config(&c, "udp:1.2.3.4:5");
    ck_assert_ptr_null(tpm_agent_create(&c, &error));
    ck_assert_msg(strstr(error, "not understood"), "%s", error);
    free(error);

    agent_config(&c, "tcp:127.0.0.1:6653");
    c.host_id = "bad host";
    ck_assert_ptr_null(tpm_agent_create(&c, &error));
    ck_assert_msg(strstr(error, "host id 'bad host'"), "%s", error);
    free(error);

    agent_config(&c, "tcp:127.0.0.1:6653");
    c.epoch_ns = 0;
    ck_assert_ptr_null(tpm_agent_create(&c, &error));
    ck_assert_msg(strstr(error, "epoch_ns is 0"), "%s", error);
    free(error);

    agent_config(&c, "tcp:127.0.0.1:6653");
    c.backoff_min_ns = 300 * MS;
    ck_assert_ptr_null(tpm_agent_create(&c, &error));
    ck_assert_msg(strstr(error, "backoff"), "%s", error);
    free(error);

    agent_config(&c, "tcp:127.0.0.1:6653");
    c.queue_size = 0;
    ck_assert_ptr_null(tpm_agent_create(&c, &error));
    ck_assert_msg(strstr(error, "queue_size=0"), "%s", error);
    free(error);

    /* Destroying an agent that never reached its TEM is quick. */
    agent_config(&c, "tcp:127.0.0.1:9");
    struct tpm_agent *a = agent_start(&c);
    ck_assert_int_eq(status(a).state, TPM_AGENT_CONNECTING);
    ck_assert_str_eq(status(a).endpoint, "tcp://127.0.0.1:9");
    ck_assert_str_eq(status(a).host_id, "host-1.a:b_c");
    tpm_agent_destroy(a);
    tpm_agent_destroy(NULL);
}
END_TEST

/* Hello, Welcome, commands relayed both ways with exact fields, Bye at
 * destruction. */
START_TEST(test_session)
{
    struct tem t;
    tem_init(&t, 1000);
    struct tpm_agent_config c;
    agent_config(&c, t.endpoint);
    struct tpm_agent *a = agent_start(&c);

    /* Before Welcome: an ack has no session to go to; a satisfaction
     * waits for one. */
    Trumpet__Frame *f = tem_expect(&t, TRUMPET__MESSAGE__BODY_HELLO);
    check_hello(f);
    tproto_free(f);
    ck_assert_int_eq(status(a).state, TPM_AGENT_CONNECTING);
    struct tpm_key k1 = make_key(1, 1000);
    ck_assert(!tpm_agent_send_ack(a, 1, 1));
    ck_assert(tpm_agent_send_satisfaction(a, 1, 2, &k1, 0, 3, 0, 1, 0));
    ck_assert_uint_eq(status(a).drops_out, 1);
    ck_assert_uint_eq(status(a).reports, 1);
    ck_assert_uint_eq(status(a).pending, 1);
    ck_assert(!fd_readable(a));

    tem_welcome(&t, "tem-test");
    struct tpm_agent_cmd cmd;
    wait_cmd(a, &cmd);
    ck_assert_int_eq(cmd.type, TPM_AGENT_RESYNC);
    ck_assert(!fd_readable(a));
    struct tpm_agent_status s = status(a);
    ck_assert_int_eq(s.state, TPM_AGENT_CONNECTED);
    ck_assert_str_eq(s.tem_id, "tem-test");
    ck_assert_uint_eq(s.version, 1);
    ck_assert_uint_eq(s.sessions, 1);
    ck_assert_uint_eq(s.reconnects, 0);
    ck_assert_uint_eq(s.invalid_in, 0);
    ck_assert_str_eq(s.last_error, "");

    /* The satisfaction kept goes first; a TEM of version 1 gets no
     * sequence numbers and confirms nothing. */
    f = tem_expect(&t, TRUMPET__MESSAGE__BODY_SATISFACTION);
    ck_assert_uint_eq(f->messages[0]->satisfaction->epoch, 2);
    ck_assert(!f->messages[0]->satisfaction->has_seq);
    ck_assert(!f->messages[0]->satisfaction->has_late);
    tproto_free(f);

    /* TEM -> host, one frame of four commands. */
    struct tproto_batch b;
    tproto_batch_init(&b);
    struct tpm_key g = make_key(7, 4242);
    tproto_add_install(&b, 101, 11, "heavy",
                       "filter=tcp predicate=sum(volume) > 1000", true,
                       250.5);
    tproto_add_install(&b, 102, 12, "burst", "predicate=count() > 5", false,
                       0);
    tproto_add_remove(&b, 103, 11);
    tproto_add_poll(&b, 104, 12, 123456789, &g);
    tem_send(&t, &b);

    wait_cmd(a, &cmd);
    ck_assert_int_eq(cmd.type, TPM_AGENT_INSTALL);
    ck_assert_uint_eq(cmd.cookie, 101);
    ck_assert_uint_eq(cmd.event_id, 11);
    ck_assert_str_eq(cmd.name, "heavy");
    ck_assert_str_eq(cmd.definition,
                     "filter=tcp predicate=sum(volume) > 1000");
    ck_assert(cmd.has_threshold);
    ck_assert_double_eq(cmd.threshold, 250.5);
    tpm_agent_cmd_free(&cmd);
    ck_assert_ptr_null(cmd.name);

    wait_cmd(a, &cmd);
    ck_assert_int_eq(cmd.type, TPM_AGENT_INSTALL);
    ck_assert_uint_eq(cmd.cookie, 102);
    ck_assert_uint_eq(cmd.event_id, 12);
    ck_assert_str_eq(cmd.name, "burst");
    ck_assert_str_eq(cmd.definition, "predicate=count() > 5");
    ck_assert(!cmd.has_threshold);
    tpm_agent_cmd_free(&cmd);

    wait_cmd(a, &cmd);
    ck_assert_int_eq(cmd.type, TPM_AGENT_REMOVE);
    ck_assert_uint_eq(cmd.cookie, 103);
    ck_assert_uint_eq(cmd.event_id, 11);
    tpm_agent_cmd_free(&cmd);

    wait_cmd(a, &cmd);
    ck_assert_int_eq(cmd.type, TPM_AGENT_POLL);
    ck_assert_uint_eq(cmd.cookie, 104);
    ck_assert_uint_eq(cmd.event_id, 12);
    ck_assert_uint_eq(cmd.epoch, 123456789);
    ck_assert(!memcmp(&cmd.group, &g, sizeof g));
    tpm_agent_cmd_free(&cmd);
    ck_assert(!fd_readable(a));
    ck_assert(!tpm_agent_recv(a, &cmd));

    /* Host -> TEM. */
    ck_assert(tpm_agent_send_ack(a, 101, 11));
    ck_assert(tpm_agent_send_nack(a, 102, 12, "predicate: column 3: bad"));
    ck_assert(tpm_agent_send_satisfaction(a, 12, 99, &g, 0, 1234.5,
                                          1, 3, 1));
    ck_assert(tpm_agent_send_poll_reply(a, 104, 12, 123456789,
                                        TRUMPET__POLL_STATUS__POLL_NO_GROUP,
                                        0));
    ck_assert(tpm_agent_send_poll_reply(a, 105, 12, 123456790,
                                        TRUMPET__POLL_STATUS__POLL_OK, 77));
    size_t got = 0;
    while (got < 5) {
        f = tem_recv_data(&t, WAIT_MS);
        ck_assert_msg(f, "only %zu of 5 messages arrived", got);
        for (size_t i = 0; i < f->n_messages; i++) {
            const Trumpet__Message *m = f->messages[i];
            if (m->body_case == TRUMPET__MESSAGE__BODY_HEARTBEAT) {
                continue;
            }
            switch (got++) {
            case 0:
                ck_assert_int_eq(m->body_case, TRUMPET__MESSAGE__BODY_ACK);
                ck_assert_uint_eq(m->ack->cookie, 101);
                ck_assert_uint_eq(m->ack->event_id, 11);
                break;
            case 1:
                ck_assert_int_eq(m->body_case, TRUMPET__MESSAGE__BODY_NACK);
                ck_assert_uint_eq(m->nack->cookie, 102);
                ck_assert_uint_eq(m->nack->event_id, 12);
                ck_assert_str_eq(m->nack->reason,
                                 "predicate: column 3: bad");
                break;
            case 2: {
                const Trumpet__Satisfaction *sat = m->satisfaction;
                ck_assert_int_eq(m->body_case,
                                 TRUMPET__MESSAGE__BODY_SATISFACTION);
                ck_assert_uint_eq(sat->event_id, 12);
                ck_assert_uint_eq(sat->epoch, 99);
                ck_assert_double_eq(sat->value, 1234.5);
                ck_assert_uint_eq(sat->flags, 1);
                ck_assert_uint_eq(sat->n_parts, 3);
                ck_assert_uint_eq(sat->n_missing, 1);
                struct tpm_key k;
                tproto_key_from_msg(sat->group, &k, NULL);
                ck_assert(!memcmp(&k, &g, sizeof k));
                break;
            }
            case 3:
                ck_assert_int_eq(m->body_case,
                                 TRUMPET__MESSAGE__BODY_POLL_REPLY);
                ck_assert_uint_eq(m->poll_reply->cookie, 104);
                ck_assert_uint_eq(m->poll_reply->event_id, 12);
                ck_assert_uint_eq(m->poll_reply->epoch, 123456789);
                ck_assert_int_eq(m->poll_reply->status,
                                 TRUMPET__POLL_STATUS__POLL_NO_GROUP);
                break;
            case 4:
                ck_assert_int_eq(m->body_case,
                                 TRUMPET__MESSAGE__BODY_POLL_REPLY);
                ck_assert_uint_eq(m->poll_reply->cookie, 105);
                ck_assert_uint_eq(m->poll_reply->epoch, 123456790);
                ck_assert_int_eq(m->poll_reply->status,
                                 TRUMPET__POLL_STATUS__POLL_OK);
                ck_assert(m->poll_reply->has_value);
                ck_assert_double_eq(m->poll_reply->value, 77);
                break;
            default:
                ck_abort_msg("more messages than sent");
            }
        }
        tproto_free(f);
    }

    /* The agent counts a frame after ZeroMQ took it: the TEM may read it
     * first. */
    uint64_t deadline = tpm_clock_mono_ns() + WAIT_MS * MS;
    while (status(a).msgs_out < 7) {
        ck_assert(tpm_clock_mono_ns() < deadline);
        sleep_ms(1);
    }
    WAIT_STATUS(a, w, !w.pending);
    s = status(a);
    ck_assert_uint_eq(s.drops_out, 1);
    ck_assert_uint_eq(s.drops_in, 0);
    ck_assert_uint_ge(s.msgs_in, 5);    /* Welcome, 4 commands. */
    ck_assert_uint_ge(s.msgs_out, 7);   /* Hello and the 6 above. */
    ck_assert_uint_eq(s.reports, 4);
    ck_assert_uint_eq(s.unconfirmed, 4);
    ck_assert_uint_eq(s.acked + s.dropped_outage + s.pending + s.late_sent,
                      0);
    ck_assert_uint_ge(s.frames_in, 2);
    ck_assert_uint_ge(s.frames_out, 2);
    ck_assert_msg(s.last_rx_ns <= tpm_clock_real_ns()
                  && s.last_rx_ns + 5000 * MS > tpm_clock_real_ns(),
                  "last_rx_ns %"PRIu64, s.last_rx_ns);

    /* Destruction says Bye. */
    tpm_agent_destroy(a);
    f = tem_expect(&t, TRUMPET__MESSAGE__BODY_BYE);
    tproto_free(f);

    tproto_batch_destroy(&b);
    tem_destroy(&t);
}
END_TEST

/* 100 satisfactions arrive in order, in fewer frames. */
START_TEST(test_batching)
{
    struct tem t;
    tem_init(&t, 1000);
    struct tpm_agent_config c;
    agent_config(&c, t.endpoint);
    c.batch_ns = 20 * MS;
    struct tpm_agent *a = agent_start(&c);
    open_session(&t, a, 1);

    uint64_t before = status(a).frames_out;
    for (uint32_t i = 0; i < 100; i++) {
        struct tpm_key k = make_key(i, 2000 + i);
        ck_assert(tpm_agent_send_satisfaction(a, 1 + i % 3, 500 + i, &k, 0,
                                              i * 10.0, 0, 1, 0));
    }
    uint32_t got = 0;
    uint64_t frames = 0;
    while (got < 100) {
        Trumpet__Frame *f = tem_recv_data(&t, WAIT_MS);
        ck_assert_msg(f, "only %"PRIu32" of 100 satisfactions", got);
        frames++;
        for (size_t i = 0; i < f->n_messages; i++) {
            const Trumpet__Message *m = f->messages[i];
            if (m->body_case == TRUMPET__MESSAGE__BODY_HEARTBEAT) {
                continue;
            }
            ck_assert_int_eq(m->body_case,
                             TRUMPET__MESSAGE__BODY_SATISFACTION);
            const Trumpet__Satisfaction *sat = m->satisfaction;
            ck_assert_uint_eq(sat->event_id, 1 + got % 3);
            ck_assert_uint_eq(sat->epoch, 500 + got);
            ck_assert_double_eq(sat->value, got * 10.0);
            struct tpm_key k, e = make_key(got, 2000 + got);
            tproto_key_from_msg(sat->group, &k, NULL);
            ck_assert(!memcmp(&k, &e, sizeof k));
            got++;
        }
        tproto_free(f);
    }
    ck_assert_msg(frames <= 5, "100 satisfactions took %"PRIu64" frames",
                  frames);
    uint64_t deadline = tpm_clock_mono_ns() + WAIT_MS * MS;
    while (status(a).frames_out - before < frames) {
        ck_assert(tpm_clock_mono_ns() < deadline);
        sleep_ms(1);
    }
    struct tpm_agent_status s = status(a);
    ck_assert_uint_le(s.frames_out - before, 100 - 1);
    ck_assert_uint_eq(s.drops_out, 0);

    tpm_agent_destroy(a);
    tem_destroy(&t);
}
END_TEST

/* Garbage frames and invalid messages are dropped and counted; the
 * session survives and the valid messages around them are relayed. */
START_TEST(test_invalid)
{
    struct tem t;
    tem_init(&t, 1000);
    struct tpm_agent_config c;
    agent_config(&c, t.endpoint);
    struct tpm_agent *a = agent_start(&c);
    open_session(&t, a, 1);

    static const uint8_t garbage[] = { 0xff, 0xff, 0xff, 0x01, 0x42, 0x00 };
    tem_send_raw(&t, garbage, sizeof garbage);

    struct tproto_batch b;
    tproto_batch_init(&b);
    struct tpm_key g = make_key(9, 9);
    tproto_add_install(&b, 1, 0, "zero", "predicate=count() > 1", false, 0);
    tproto_add_poll(&b, 2, 5, 77, &g);
    tproto_add_ack(&b, 3, 5);           /* Host-bound: not from a TEM. */
    tem_send(&t, &b);

    struct tpm_agent_cmd cmd;
    wait_cmd(a, &cmd);
    ck_assert_int_eq(cmd.type, TPM_AGENT_POLL);
    ck_assert_uint_eq(cmd.cookie, 2);
    ck_assert_uint_eq(cmd.event_id, 5);
    tpm_agent_cmd_free(&cmd);

    uint64_t deadline = tpm_clock_mono_ns() + WAIT_MS * MS;
    while (status(a).invalid_in < 3 && tpm_clock_mono_ns() < deadline) {
        sleep_ms(2);
    }
    struct tpm_agent_status s = status(a);
    ck_assert_uint_eq(s.invalid_in, 3);
    ck_assert_msg(strstr(s.last_error, "unexpected ack"), "%s",
                  s.last_error);
    ck_assert_int_eq(s.state, TPM_AGENT_CONNECTED);
    ck_assert_uint_eq(s.sessions, 1);
    ck_assert(!fd_readable(a));

    /* The garbage frame and the bad install were reported too. */
    tem_send_raw(&t, garbage, sizeof garbage);
    deadline = tpm_clock_mono_ns() + WAIT_MS * MS;
    while (status(a).invalid_in < 4 && tpm_clock_mono_ns() < deadline) {
        sleep_ms(2);
    }
    s = status(a);
    ck_assert_uint_eq(s.invalid_in, 4);
    ck_assert_msg(strstr(s.last_error, "invalid frame from TEM (6 bytes)"),
                  "%s", s.last_error);
    tproto_add_install(&b, 1, 0, "zero", "predicate=count() > 1", false, 0);
    tem_send(&t, &b);
    deadline = tpm_clock_mono_ns() + WAIT_MS * MS;
    while (status(a).invalid_in < 5 && tpm_clock_mono_ns() < deadline) {
        sleep_ms(2);
    }
    s = status(a);
    ck_assert_uint_eq(s.invalid_in, 5);
    ck_assert_msg(strstr(s.last_error, "install: event_id is 0"), "%s",
                  s.last_error);

    /* Still relaying. */
    tproto_add_remove(&b, 8, 5);
    tem_send(&t, &b);
    wait_cmd(a, &cmd);
    ck_assert_int_eq(cmd.type, TPM_AGENT_REMOVE);
    ck_assert_uint_eq(cmd.cookie, 8);
    ck_assert(tpm_agent_send_ack(a, 8, 5));
    Trumpet__Frame *f = tem_expect(&t, TRUMPET__MESSAGE__BODY_ACK);
    ck_assert_uint_eq(f->messages[0]->ack->cookie, 8);
    tproto_free(f);
    ck_assert_uint_eq(status(a).sessions, 1);

    tproto_batch_destroy(&b);
    tpm_agent_destroy(a);
    tem_destroy(&t);
}
END_TEST

/* Configure in a version 2 session: relayed as TPM_AGENT_CONFIGURE with
 * its setting, in order with the other commands; one that sets nothing is
 * dropped and counted as invalid; the host's ack and nack go back with
 * event id 0. */
START_TEST(test_configure)
{
    struct tem t;
    tem_init(&t, 1000);
    struct tpm_agent_config c;
    agent_config(&c, t.endpoint);
    struct tpm_agent *a = agent_start(&c);

    Trumpet__Frame *f = tem_expect(&t, TRUMPET__MESSAGE__BODY_HELLO);
    ck_assert_uint_ge(f->messages[0]->hello->version_max,
                      TPROTO_VERSION_CONFIGURE);
    tproto_free(f);
    struct tproto_batch b;
    tproto_batch_init(&b);
    tproto_add_welcome(&b, TPROTO_VERSION_CONFIGURE, "tem-test",
                       tpm_clock_real_ns(), t.heartbeat_ms);
    tem_send(&t, &b);
    struct tpm_agent_cmd cmd;
    wait_cmd(a, &cmd);
    ck_assert_int_eq(cmd.type, TPM_AGENT_RESYNC);
    ck_assert_uint_eq(status(a).version, TPROTO_VERSION_CONFIGURE);

    tproto_add_configure(&b, 201, true, 4000);
    tproto_add_remove(&b, 202, 9);
    tproto_add_configure(&b, 203, false, 0);        /* Sets nothing. */
    tproto_add_configure(&b, 204, true, 0);
    tproto_add_configure(&b, 205, true, UINT32_MAX);
    tem_send(&t, &b);

    wait_cmd(a, &cmd);
    ck_assert_int_eq(cmd.type, TPM_AGENT_CONFIGURE);
    ck_assert_uint_eq(cmd.cookie, 201);
    ck_assert_uint_eq(cmd.event_id, 0);
    ck_assert(cmd.has_dos_threshold);
    ck_assert_uint_eq(cmd.dos_threshold, 4000);
    ck_assert_ptr_null(cmd.name);
    tpm_agent_cmd_free(&cmd);
    wait_cmd(a, &cmd);
    ck_assert_int_eq(cmd.type, TPM_AGENT_REMOVE);
    ck_assert_uint_eq(cmd.cookie, 202);
    ck_assert(!cmd.has_dos_threshold);
    tpm_agent_cmd_free(&cmd);
    wait_cmd(a, &cmd);
    ck_assert_int_eq(cmd.type, TPM_AGENT_CONFIGURE);
    ck_assert_uint_eq(cmd.cookie, 204);
    ck_assert(cmd.has_dos_threshold);
    ck_assert_uint_eq(cmd.dos_threshold, 0);
    tpm_agent_cmd_free(&cmd);
    wait_cmd(a, &cmd);
    ck_assert_int_eq(cmd.type, TPM_AGENT_CONFIGURE);
    ck_assert_uint_eq(cmd.cookie, 205);
    ck_assert_uint_eq(cmd.dos_threshold, UINT32_MAX);
    tpm_agent_cmd_free(&cmd);
    ck_assert(!tpm_agent_recv(a, &cmd));

    struct tpm_agent_status s = status(a);
    ck_assert_uint_eq(s.invalid_in, 1);
    ck_assert_msg(strstr(s.last_error, "invalid message from TEM: "
                         "configure: no setting given (dos_threshold "
                         "missing)"), "%s", s.last_error);
    ck_assert_int_eq(s.state, TPM_AGENT_CONNECTED);

    ck_assert(tpm_agent_send_ack(a, 201, 0));
    ck_assert(tpm_agent_send_nack(a, 204, 0, "DoS threshold locked"));
    size_t got = 0;
    while (got < 2) {
        f = tem_recv_data(&t, WAIT_MS);
        ck_assert_msg(f, "only %zu of 2 replies arrived", got);
        ck_assert_uint_eq(f->version, TPROTO_VERSION_CONFIGURE);
        for (size_t i = 0; i < f->n_messages; i++) {
            const Trumpet__Message *m = f->messages[i];
            if (m->body_case == TRUMPET__MESSAGE__BODY_HEARTBEAT) {
                continue;
            }
            ck_assert_ptr_null(tproto_validate(m));
            if (got++ == 0) {
                ck_assert_int_eq(m->body_case, TRUMPET__MESSAGE__BODY_ACK);
                ck_assert_uint_eq(m->ack->cookie, 201);
                ck_assert_uint_eq(m->ack->event_id, 0);
            } else {
                ck_assert_int_eq(m->body_case, TRUMPET__MESSAGE__BODY_NACK);
                ck_assert_uint_eq(m->nack->cookie, 204);
                ck_assert_uint_eq(m->nack->event_id, 0);
                ck_assert_str_eq(m->nack->reason, "DoS threshold locked");
            }
        }
        tproto_free(f);
    }

    tproto_batch_destroy(&b);
    tpm_agent_destroy(a);
    tem_destroy(&t);
}
END_TEST

/* Refuse, and a Welcome with a version we do not speak: REFUSED with a
 * clear last_error, then a new Hello after the backoff. */
START_TEST(test_refuse)
{
    struct tem t;
    tem_init(&t, 1000);
    struct tpm_agent_config c;
    agent_config(&c, t.endpoint);
    c.backoff_min_ns = 200 * MS;    /* Long enough to see REFUSED. */
    c.backoff_max_ns = 400 * MS;
    struct tpm_agent *a = agent_start(&c);

    Trumpet__Frame *f = tem_expect(&t, TRUMPET__MESSAGE__BODY_HELLO);
    tproto_free(f);
    struct tproto_batch b;
    tproto_batch_init(&b);
    tproto_add_refuse(&b, "protocol versions 1..4 not in 5..6");
    b.msgs[0]->refuse->has_version_min = true;
    b.msgs[0]->refuse->version_min = 5;
    b.msgs[0]->refuse->has_version_max = true;
    b.msgs[0]->refuse->version_max = 6;
    tem_send(&t, &b);

    wait_state(a, TPM_AGENT_REFUSED);
    struct tpm_agent_status s = status(a);
    ck_assert_msg(strstr(s.last_error, "TEM refused: protocol versions "
                         "1..4 not in 5..6 (TEM speaks protocol versions "
                         "5..6, this host 1..4)"), "%s", s.last_error);
    ck_assert_uint_eq(s.sessions, 0);
    ck_assert_uint_eq(s.version, 0);
    ck_assert(!tpm_agent_send_ack(a, 1, 1));
    ck_assert(!fd_readable(a));

    /* Retried after the backoff, on a new socket. */
    f = tem_expect(&t, TRUMPET__MESSAGE__BODY_HELLO);
    check_hello(f);
    tproto_free(f);
    ck_assert_uint_ge(status(a).reconnects, 1);

    /* A Welcome choosing a version we do not speak. */
    tproto_add_welcome(&b, 7, "tem-future", tpm_clock_real_ns(), 1000);
    tem_send(&t, &b);
    f = tem_expect(&t, TRUMPET__MESSAGE__BODY_BYE);
    ck_assert_msg(strstr(f->messages[0]->bye->reason,
                         "protocol version 7 not in 1..4"), "%s",
                  f->messages[0]->bye->reason);
    tproto_free(f);
    wait_state(a, TPM_AGENT_REFUSED);
    s = status(a);
    ck_assert_msg(strstr(s.last_error, "TEM tem-future chose protocol "
                         "version 7 not in 1..4"), "%s", s.last_error);
    ck_assert_uint_eq(s.sessions, 0);

    /* And then a proper session. */
    open_session(&t, a, 1);
    ck_assert_uint_ge(status(a).reconnects, 2);

    tproto_batch_destroy(&b);
    tpm_agent_destroy(a);
    tem_destroy(&t);
}
END_TEST

/* The TEM goes away and comes back on the same endpoint: the agent sees
 * the heartbeats stop, backs off, and says Hello to the new one. */
START_TEST(test_reconnect)
{
    struct tem t;
    tem_init(&t, 50);
    struct tpm_agent_config c;
    agent_config(&c, t.endpoint);
    struct tpm_agent *a = agent_start(&c);
    open_session(&t, a, 1);

    /* The agent heartbeats at 50 ms. */
    Trumpet__Frame *f = tem_recv(&t, WAIT_MS);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(f->messages[0]->body_case,
                     TRUMPET__MESSAGE__BODY_HEARTBEAT);
    tproto_free(f);

    char endpoint[256];
    snprintf(endpoint, sizeof endpoint, "%s", t.endpoint);
    tem_close(&t);
    uint64_t closed = tpm_clock_mono_ns();

    /* After 3 missed heartbeats the session ends; meanwhile acks are
     * dropped and counted, reports kept. */
    uint64_t deadline = closed + WAIT_MS * MS;
    while (status(a).state == TPM_AGENT_CONNECTED) {
        ck_assert(tpm_clock_mono_ns() < deadline);
        sleep_ms(2);
    }
    uint64_t lost = tpm_clock_mono_ns() - closed;
    ck_assert_msg(lost >= 100 * MS, "session ended after %"PRIu64" ms",
                  lost / MS);
    struct tpm_agent_status s = status(a);
    ck_assert_msg(strstr(s.last_error, "nothing from TEM"), "%s",
                  s.last_error);
    uint64_t drops = s.drops_out;
    struct tpm_key k = make_key(1, 1);
    ck_assert(tpm_agent_send_satisfaction(a, 1, 1, &k, 0, 1, 0, 1, 0));
    ck_assert(tpm_agent_send_poll_reply(a, 1, 1, 1,
                                        TRUMPET__POLL_STATUS__POLL_OK, 1));
    ck_assert(!tpm_agent_send_ack(a, 1, 1));
    ck_assert_uint_eq(status(a).drops_out, drops + 1);
    ck_assert_uint_eq(status(a).pending, 2);

    /* A TEM on the same endpoint: a new Hello, a second session, and a
     * RESYNC for the host. */
    t.peer_len = 0;
    tem_bind(&t, endpoint);
    ck_assert_str_eq(t.endpoint, endpoint);
    open_session(&t, a, 2);
    s = status(a);
    ck_assert_uint_ge(s.reconnects, 1);
    ck_assert_int_eq(s.state, TPM_AGENT_CONNECTED);
    /* The reports kept arrive first. */
    size_t got = 0;
    while (got < 2) {
        f = tem_recv_data(&t, WAIT_MS);
        ck_assert_msg(f, "%zu of 2 reports kept arrived", got);
        for (size_t i = 0; i < f->n_messages; i++) {
            Trumpet__Message__BodyCase bc = f->messages[i]->body_case;
            if (bc != TRUMPET__MESSAGE__BODY_HEARTBEAT) {
                ck_assert_int_eq(bc, got++
                                 ? TRUMPET__MESSAGE__BODY_POLL_REPLY
                                 : TRUMPET__MESSAGE__BODY_SATISFACTION);
            }
        }
        tproto_free(f);
    }
    ck_assert(tpm_agent_send_ack(a, 9, 9));
    f = tem_expect(&t, TRUMPET__MESSAGE__BODY_ACK);
    ck_assert_uint_eq(f->messages[0]->ack->cookie, 9);
    tproto_free(f);

    /* A Bye from the TEM ends the session too; the agent comes back. */
    struct tproto_batch b;
    tproto_batch_init(&b);
    tproto_add_bye(&b, "tem restarting");
    tem_send(&t, &b);
    f = tem_expect(&t, TRUMPET__MESSAGE__BODY_HELLO);
    tproto_free(f);
    s = status(a);
    ck_assert_msg(strstr(s.last_error, "TEM said bye: tem restarting"), "%s",
                  s.last_error);
    tem_welcome(&t, "tem-test");
    struct tpm_agent_cmd cmd;
    wait_cmd(a, &cmd);
    ck_assert_int_eq(cmd.type, TPM_AGENT_RESYNC);
    ck_assert_uint_eq(status(a).sessions, 3);

    tproto_batch_destroy(&b);
    tpm_agent_destroy(a);
    tem_destroy(&t);
}
END_TEST

/* A report as the fake TEM received it. */
struct report {
    Trumpet__Message__BodyCase type;
    uint64_t epoch;
    bool has_seq, late;
    uint64_t seq;
};

/* Receives the next 'n' reports (satisfactions and poll replies) into
 * 'r'; anything else but heartbeats fails. */
static void
tem_recv_reports(struct tem *t, struct report *r, size_t n)
{
    size_t got = 0;
    while (got < n) {
        Trumpet__Frame *f = tem_recv_data(t, WAIT_MS);
        ck_assert_msg(f, "%zu of %zu reports arrived", got, n);
        for (size_t i = 0; i < f->n_messages; i++) {
            const Trumpet__Message *m = f->messages[i];
            if (m->body_case == TRUMPET__MESSAGE__BODY_HEARTBEAT) {
                continue;
            }
            ck_assert_msg(got < n, "more than %zu reports", n);
            struct report *p = &r[got++];
            p->type = m->body_case;
            if (m->body_case == TRUMPET__MESSAGE__BODY_SATISFACTION) {
                p->epoch = m->satisfaction->epoch;
                p->has_seq = m->satisfaction->has_seq;
                p->seq = m->satisfaction->seq;
                p->late = m->satisfaction->late;
            } else {
                ck_assert_int_eq(m->body_case,
                                 TRUMPET__MESSAGE__BODY_POLL_REPLY);
                p->epoch = m->poll_reply->epoch;
                p->has_seq = m->poll_reply->has_seq;
                p->seq = m->poll_reply->seq;
                p->late = m->poll_reply->late;
            }
        }
        tproto_free(f);
    }
}

/* Sends a Heartbeat saying reports up to 'seq' arrived. */
static void
tem_send_received(struct tem *t, uint64_t seq)
{
    struct tproto_batch b;
    tproto_batch_init(&b);
    tproto_add_heartbeat(&b, tpm_clock_real_ns(), t->hb_seq++);
    tproto_set_received(&b, seq);
    tem_send(t, &b);
    tproto_batch_destroy(&b);
}

/* The host gives reports 'first'..'last': report i is for epoch 1000 + i,
 * a poll reply if i is a multiple of 10, else a satisfaction. */
static void
give_reports(struct tpm_agent *a, uint32_t first, uint32_t last)
{
    for (uint32_t i = first; i <= last; i++) {
        struct tpm_key k = make_key(i, i);
        ck_assert(i % 10
                  ? tpm_agent_send_satisfaction(a, 1, 1000 + i, &k, 0, i, 0,
                                                1, 0)
                  : tpm_agent_send_poll_reply(a, i, 1, 1000 + i,
                                              TRUMPET__POLL_STATUS__POLL_OK,
                                              i));
    }
}

/* Checks that reports 'r' are reports 'first'.. of give_reports(), with
 * sequence numbers 'seq'.. and late flags 'late'. */
static void
check_reports(const struct report *r, size_t n, uint32_t first,
              uint64_t seq, bool late)
{
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(r[i].has_seq && r[i].seq == seq + i,
                      "report %zu: seq %"PRIu64", expected %"PRIu64, i,
                      r[i].seq, seq + i);
        ck_assert_uint_eq(r[i].epoch, 1000 + first + i);
        ck_assert_int_eq(r[i].type, (first + i) % 10
                         ? TRUMPET__MESSAGE__BODY_SATISFACTION
                         : TRUMPET__MESSAGE__BODY_POLL_REPLY);
        ck_assert_msg(r[i].late == late, "report %zu (seq %"PRIu64"): "
                      "late %d", i, r[i].seq, r[i].late);
    }
}

/* Checks the report counters of 'a': 'reports' given, then acked,
 * unconfirmed, dropped_outage, pending, late_sent. */
static void
check_counters(struct tpm_agent *a, uint64_t reports, uint64_t acked,
               uint64_t unconfirmed, uint64_t dropped, uint64_t pending,
               uint64_t late)
{
    struct tpm_agent_status s = status(a);
    ck_assert_msg(s.reports == reports && s.acked == acked
                  && s.unconfirmed == unconfirmed
                  && s.dropped_outage == dropped && s.pending == pending
                  && s.late_sent == late,
                  "reports %"PRIu64" acked %"PRIu64" unconfirmed %"PRIu64
                  " dropped %"PRIu64" pending %"PRIu64" late %"PRIu64
                  ", expected %"PRIu64" %"PRIu64" %"PRIu64" %"PRIu64
                  " %"PRIu64" %"PRIu64, s.reports, s.acked, s.unconfirmed,
                  s.dropped_outage, s.pending, s.late_sent, reports, acked,
                  unconfirmed, dropped, pending, late);
    ck_assert_uint_eq(s.reports, s.acked + s.unconfirmed + s.dropped_outage
                                 + s.dropped_tenant + s.handed_over
                                 + s.pending);
}

/* The TEM dies in the middle of a stream of reports and comes back: the
 * agent keeps every report it did not confirm, and sends those the new
 * session does not have again, in order and flagged late; every report
 * ends acked, with exact counts all along. */
START_TEST(test_outage_resend)
{
    struct tem t;
    tem_init(&t, 200);
    t.version = TPROTO_VERSION_CONFIRM;
    struct tpm_agent_config c;
    agent_config(&c, t.endpoint);
    struct tpm_agent *a = agent_start(&c);
    uint64_t instance = open_session_received(&t, a, 1, 0);
    struct report r[64];

    /* 50 reports, numbered 1..50, none late. */
    give_reports(a, 1, 50);
    tem_recv_reports(&t, r, 50);
    check_reports(r, 50, 1, 1, false);
    WAIT_STATUS(a, w, w.pending == 50);
    check_counters(a, 50, 0, 0, 0, 50, 0);

    /* The TEM confirms the first 20. */
    tem_send_received(&t, 20);
    WAIT_STATUS(a, w, w.acked == 20);
    check_counters(a, 50, 20, 0, 0, 30, 0);

    /* It dies: 30 more reports, written into the dead connection or kept
     * while the agent notices.  Nothing is lost. */
    char endpoint[256];
    snprintf(endpoint, sizeof endpoint, "%s", t.endpoint);
    tem_close(&t);
    give_reports(a, 51, 80);
    wait_state(a, TPM_AGENT_BACKOFF);
    WAIT_STATUS(a, w, w.pending == 60);
    check_counters(a, 80, 20, 0, 0, 60, 0);

    /* Back: the TEM has up to 35 already (said with its Welcome); 36..80
     * come again, in order, flagged late, and nothing else. */
    t.peer_len = 0;
    tem_bind(&t, endpoint);
    ck_assert_uint_eq(open_session_received(&t, a, 2, 35), instance);
    tem_recv_reports(&t, r, 45);
    check_reports(r, 45, 36, 36, true);
    ck_assert_ptr_null(tem_recv_data(&t, 100));
    tem_send_received(&t, 80);
    WAIT_STATUS(a, w, w.acked == 80);
    check_counters(a, 80, 80, 0, 0, 0, 45);

    /* Reports of this session are not late. */
    give_reports(a, 81, 81);
    tem_recv_reports(&t, r, 1);
    check_reports(r, 1, 81, 81, false);
    tem_send_received(&t, 81);
    WAIT_STATUS(a, w, w.acked == 81);
    check_counters(a, 81, 81, 0, 0, 0, 45);

    tpm_agent_destroy(a);
    tem_destroy(&t);
}
END_TEST

/* A cluster's takeover: TEM t1 dies with satisfactions of events 1 and 2
 * unconfirmed; event 1 is taken over by TEM t2 (the host hands it over).
 * Once t1's session has ended, exactly the unconfirmed satisfactions of
 * event 1 leave a1's outage buffer, counted 'handed_over', and reach t2
 * through a2 flagged late; event 2's stay with a1 and go to t1 when it
 * comes back, with their own sequence numbers; every count stays exact. */
START_TEST(test_hand_over)
{
    struct tem t1, t2;
    tem_init(&t1, 200);
    tem_init(&t2, 5000);        /* Idle while t1 dies: no timeout. */
    t1.version = t2.version = TPROTO_VERSION_CONFIRM;
    struct tpm_agent_config c;
    agent_config(&c, t1.endpoint);
    struct tpm_agent *a1 = agent_start(&c);
    agent_config(&c, t2.endpoint);
    struct tpm_agent *a2 = agent_start(&c);
    open_session_received(&t1, a1, 1, 0);
    open_session_received(&t2, a2, 1, 0);
    struct report r[64];

    /* Satisfaction i (1..30) is of event 1 + i % 2, epoch 1000 + i. */
    for (uint32_t i = 1; i <= 30; i++) {
        struct tpm_key k = make_key(i, i);
        ck_assert(tpm_agent_send_satisfaction(a1, 1 + i % 2, 1000 + i, &k, 0,
                                              i, 0, 1, 0));
    }
    tem_recv_reports(&t1, r, 30);
    tem_send_received(&t1, 10);
    WAIT_STATUS(a1, w, w.acked == 10);

    /* Handed over while t1's session still awaits confirmation: nothing
     * moves until it ends. */
    tpm_agent_hand_over(a1, 1, true);
    struct tpm_agent_report h[32];
    sleep_ms(50);
    ck_assert_uint_eq(tpm_agent_take_handed(a1, h, 32), 0);
    ck_assert_uint_eq(status(a1).handed_over, 0);

    char endpoint[256];
    snprintf(endpoint, sizeof endpoint, "%s", t1.endpoint);
    tem_close(&t1);
    wait_state(a1, TPM_AGENT_BACKOFF);
    struct pollfd pfd = { .fd = tpm_agent_fd(a1), .events = POLLIN };
    ck_assert_msg(poll(&pfd, 1, WAIT_MS) == 1, "nothing handed over");
    size_t n = tpm_agent_take_handed(a1, h, 32);
    /* Unconfirmed: 11..30, of which event 1's are the even ones. */
    ck_assert_uint_eq(n, 10);
    ck_assert(!fd_readable(a1));
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_eq(h[i].event_id, 1);
        ck_assert_uint_eq(h[i].epoch, 1000 + 12 + 2 * i);
        ck_assert_uint_eq(h[i].value, 12 + 2 * i);
        ck_assert(tpm_agent_send_handed(a2, &h[i]));
    }
    struct tpm_agent_status s = status(a1);
    ck_assert_uint_eq(s.handed_over, 10);
    check_counters(a1, 30, 10, 0, 0, 10, 0);

    /* t2 gets them in order, flagged late, numbered in a2's session. */
    tem_recv_reports(&t2, r, 10);
    for (size_t i = 0; i < 10; i++) {
        ck_assert_uint_eq(r[i].epoch, 1000 + 12 + 2 * i);
        ck_assert(r[i].late);
        ck_assert_uint_eq(r[i].seq, 1 + i);
    }
    tem_send_received(&t2, 10);
    WAIT_STATUS(a2, w, w.acked == 10);
    check_counters(a2, 10, 10, 0, 0, 0, 10);

    /* t1 back: event 2's ten, with their numbers 11, 13, .. 29 (event 1's
     * left holes), late; confirmed, every count exact. */
    t1.peer_len = 0;
    tem_bind(&t1, endpoint);
    open_session_received(&t1, a1, 2, 10);
    tem_recv_reports(&t1, r, 10);
    for (size_t i = 0; i < 10; i++) {
        ck_assert_uint_eq(r[i].seq, 11 + 2 * i);
        ck_assert_uint_eq(r[i].epoch, 1000 + 11 + 2 * i);
        ck_assert(r[i].late);
    }
    ck_assert_ptr_null(tem_recv_data(&t1, 100));
    tem_send_received(&t1, 30);
    WAIT_STATUS(a1, w, w.acked == 20);
    check_counters(a1, 30, 20, 0, 0, 0, 10);
    ck_assert_uint_eq(tpm_agent_take_handed(a1, h, 32), 0);

    /* Called off before anything moved: event 2's next satisfaction
     * stays.  (Given and called off while the agent has a session that
     * sent nothing of it yet: nothing to move either way.) */
    tpm_agent_hand_over(a1, 2, true);
    tpm_agent_hand_over(a1, 2, false);
    struct tpm_key k = make_key(31, 31);
    ck_assert(tpm_agent_send_satisfaction(a1, 2, 1031, &k, 0, 31, 0, 1, 0));
    tem_recv_reports(&t1, r, 1);
    ck_assert_uint_eq(r[0].epoch, 1031);
    ck_assert_uint_eq(status(a1).handed_over, 10);

    tpm_agent_destroy(a1);
    tpm_agent_destroy(a2);
    tem_destroy(&t1);
    tem_destroy(&t2);
}
END_TEST

/* The host's monitors change (its PMD threads): the agent says Hello
 * again at once, naming the new ones, as the same run, and what the TEM
 * had not confirmed goes to the new session, flagged late: nothing
 * lost, where a new agent would start with an empty outage buffer. */
START_TEST(test_pmds_changed)
{
    struct tem t;
    tem_init(&t, 200);
    t.version = TPROTO_VERSION_CONFIRM;
    struct tpm_agent_config c;
    agent_config(&c, t.endpoint);
    struct tpm_agent *a = agent_start(&c);
    uint64_t instance = open_session_received(&t, a, 1, 0);
    struct report r[64];

    give_reports(a, 1, 30);
    tem_recv_reports(&t, r, 30);
    check_reports(r, 30, 1, 1, false);
    tem_send_received(&t, 10);
    WAIT_STATUS(a, w, w.acked == 10);

    static const uint32_t ids[] = { 5, 9 };
    tpm_agent_set_pmds(a, ids, ARRAY_SIZE(ids));
    t.peer_len = 0;
    ck_assert_uint_eq(open_session_pmds(&t, a, 2, 10, ids, ARRAY_SIZE(ids)),
                      instance);
    tem_recv_reports(&t, r, 20);
    check_reports(r, 20, 11, 11, true);
    ck_assert_ptr_null(tem_recv_data(&t, 100));
    tem_send_received(&t, 30);
    WAIT_STATUS(a, w, w.acked == 30);
    check_counters(a, 30, 30, 0, 0, 0, 20);

    tpm_agent_destroy(a);
    tem_destroy(&t);
}
END_TEST

/* A full outage buffer drops its oldest reports, each counted once:
 * dropped if it was never sent, unconfirmed if it was sent in a session
 * that ended before the TEM confirmed it, acked if the TEM confirms it
 * after it was dropped from the buffer (still in the same session). */
START_TEST(test_outage_buffer_full)
{
    struct tem t;
    tem_init(&t, 200);
    t.version = TPROTO_VERSION_CONFIRM;
    struct tpm_agent_config c;
    agent_config(&c, t.endpoint);
    c.outage_buffer = 10;
    struct tpm_agent *a = agent_start(&c);
    open_session(&t, a, 1);
    struct report r[16];

    /* 10 reports sent, then 5 more: the buffer drops 1..5, which the
     * TEM may still confirm. */
    give_reports(a, 1, 10);
    tem_recv_reports(&t, r, 10);
    check_reports(r, 10, 1, 1, false);
    give_reports(a, 11, 15);
    tem_recv_reports(&t, r, 5);
    check_reports(r, 5, 11, 11, false);
    WAIT_STATUS(a, w, w.pending == 15);
    check_counters(a, 15, 0, 0, 0, 15, 0);
    tem_send_received(&t, 3);
    WAIT_STATUS(a, w, w.acked == 3);
    check_counters(a, 15, 3, 0, 0, 12, 0);

    /* The TEM dies: 4 and 5 will never be confirmed. */
    char endpoint[256];
    snprintf(endpoint, sizeof endpoint, "%s", t.endpoint);
    tem_close(&t);
    wait_state(a, TPM_AGENT_BACKOFF);
    WAIT_STATUS(a, w, w.unconfirmed == 2);
    check_counters(a, 15, 3, 2, 0, 10, 0);

    /* 12 reports during the outage: 6..15 (sent before, unconfirmed) and
     * 16, 17 (never sent, dropped) make room for them. */
    give_reports(a, 16, 27);
    WAIT_STATUS(a, w, w.dropped_outage == 2);
    check_counters(a, 27, 3, 12, 2, 10, 0);

    /* Back: 18..27, late. */
    t.peer_len = 0;
    tem_bind(&t, endpoint);
    open_session(&t, a, 2);
    tem_recv_reports(&t, r, 10);
    check_reports(r, 10, 18, 18, true);
    tem_send_received(&t, 27);
    WAIT_STATUS(a, w, w.acked == 13);
    check_counters(a, 27, 13, 12, 2, 0, 10);

    tpm_agent_destroy(a);
    tem_destroy(&t);
}
END_TEST

/* PollBatchReplies (the poll replies of version 3) belong to their
 * session: sent once, never numbered nor kept; one given without a
 * session is refused and counted in drops_out, not in the report
 * counters, and no later session gets it.  The satisfactions around them
 * are numbered, kept and sent again as usual. */
START_TEST(test_outage_poll_batch_reply)
{
    struct tem t;
    tem_init(&t, 200);
    t.version = TPROTO_VERSION_CONFIRM;
    struct tpm_agent_config c;
    agent_config(&c, t.endpoint);
    struct tpm_agent *a = agent_start(&c);
    open_session(&t, a, 1);

    uint8_t st[2] = { TRUMPET__POLL_STATUS__POLL_OK,
                      TRUMPET__POLL_STATUS__POLL_NO_GROUP };
    double v[2] = { 5, 0 };
    struct tpm_key k = make_key(1, 1);
    ck_assert(tpm_agent_send_satisfaction(a, 1, 1001, &k, 0, 1, 0, 1, 0));
    ck_assert(tpm_agent_send_poll_batch_reply(a, 7, 1000, st, v, 2));
    ck_assert(tpm_agent_send_satisfaction(a, 1, 1002, &k, 0, 1, 0, 1, 0));
    size_t n_sat = 0, n_reply = 0;
    while (n_sat < 2 || !n_reply) {
        Trumpet__Frame *f = tem_recv_data(&t, WAIT_MS);
        ck_assert_msg(f, "%zu satisfactions, %zu replies arrived", n_sat,
                      n_reply);
        for (size_t i = 0; i < f->n_messages; i++) {
            const Trumpet__Message *m = f->messages[i];
            if (m->body_case == TRUMPET__MESSAGE__BODY_SATISFACTION) {
                const Trumpet__Satisfaction *sat = m->satisfaction;
                n_sat++;
                ck_assert(sat->has_seq && !sat->late);
                ck_assert_uint_eq(sat->seq, n_sat);
                ck_assert_uint_eq(sat->epoch, 1000 + n_sat);
            } else if (m->body_case
                       == TRUMPET__MESSAGE__BODY_POLL_BATCH_REPLY) {
                n_reply++;
                ck_assert_uint_eq(m->poll_batch_reply->cookie, 7);
                ck_assert_uint_eq(m->poll_batch_reply->n_values, 2);
            } else {
                ck_assert_int_eq(m->body_case,
                                 TRUMPET__MESSAGE__BODY_HEARTBEAT);
            }
        }
        tproto_free(f);
    }
    ck_assert_uint_eq(n_reply, 1);
    check_counters(a, 2, 0, 0, 0, 2, 0);
    ck_assert_uint_eq(status(a).drops_out, 0);

    /* The TEM dies: a reply now has no session to go to. */
    char endpoint[256];
    snprintf(endpoint, sizeof endpoint, "%s", t.endpoint);
    tem_close(&t);
    wait_state(a, TPM_AGENT_BACKOFF);
    ck_assert(!tpm_agent_send_poll_batch_reply(a, 8, 1001, st, v, 2));
    ck_assert_uint_eq(status(a).drops_out, 1);
    check_counters(a, 2, 0, 0, 0, 2, 0);

    /* Back, having confirmed nothing: the two satisfactions come again,
     * late, and nothing else (tem_recv_reports() fails on a
     * PollBatchReply). */
    t.peer_len = 0;
    tem_bind(&t, endpoint);
    open_session(&t, a, 2);
    struct report r[2];
    tem_recv_reports(&t, r, 2);
    for (size_t i = 0; i < 2; i++) {
        ck_assert_int_eq(r[i].type, TRUMPET__MESSAGE__BODY_SATISFACTION);
        ck_assert(r[i].has_seq && r[i].late);
        ck_assert_uint_eq(r[i].seq, i + 1);
        ck_assert_uint_eq(r[i].epoch, 1001 + i);
    }
    ck_assert_ptr_null(tem_recv_data(&t, 100));
    tem_send_received(&t, 2);
    WAIT_STATUS(a, w, w.acked == 2);
    check_counters(a, 2, 2, 0, 0, 0, 2);
    ck_assert_uint_eq(status(a).drops_out, 1);

    tpm_agent_destroy(a);
    tem_destroy(&t);
}
END_TEST

/* Full queues drop and count. */
START_TEST(test_queue_full)
{
    struct tem t;
    tem_init(&t, 1000);
    struct tpm_agent_config c;
    agent_config(&c, t.endpoint);
    c.queue_size = 8;
    c.batch_ns = 200 * MS;
    struct tpm_agent *a = agent_start(&c);

    /* Commands: the host does not take them; the RESYNC takes one slot,
     * 7 of 20 installs fit. */
    Trumpet__Frame *f = tem_expect(&t, TRUMPET__MESSAGE__BODY_HELLO);
    tproto_free(f);
    tem_welcome(&t, "tem-test");
    wait_state(a, TPM_AGENT_CONNECTED);
    struct tproto_batch b;
    tproto_batch_init(&b);
    for (uint32_t i = 1; i <= 20; i++) {
        tproto_add_install(&b, i, i, "e", "predicate=count() > 1", false, 0);
    }
    tem_send(&t, &b);
    uint64_t deadline = tpm_clock_mono_ns() + WAIT_MS * MS;
    while (status(a).drops_in < 13) {
        ck_assert(tpm_clock_mono_ns() < deadline);
        sleep_ms(2);
    }
    sleep_ms(20);
    ck_assert_uint_eq(status(a).drops_in, 13);
    ck_assert_msg(strstr(status(a).last_error, "command queue full"), "%s",
                  status(a).last_error);
    struct tpm_agent_cmd cmd;
    ck_assert(tpm_agent_recv(a, &cmd));
    ck_assert_int_eq(cmd.type, TPM_AGENT_RESYNC);
    for (uint32_t i = 1; i <= 7; i++) {
        ck_assert(tpm_agent_recv(a, &cmd));
        ck_assert_int_eq(cmd.type, TPM_AGENT_INSTALL);
        ck_assert_uint_eq(cmd.cookie, i);
        tpm_agent_cmd_free(&cmd);
    }
    ck_assert(!tpm_agent_recv(a, &cmd));
    ck_assert(!fd_readable(a));

    /* Outgoing: the host queues faster than the agent thread takes
     * them (into the outage buffer): refusals are counted as dropped. */
    uint32_t accepted = 0, refused = 0;
    for (uint32_t i = 0; i < 2000; i++) {
        struct tpm_key k = make_key(i, i);
        if (tpm_agent_send_satisfaction(a, 1, i, &k, 0, i, 0, 1, 0)) {
            accepted++;
        } else {
            refused++;
        }
    }
    ck_assert_uint_ge(accepted, 8);
    ck_assert_uint_eq(status(a).dropped_outage, refused);
    ck_assert_uint_eq(status(a).drops_out, 0);

    /* What was accepted arrives, in order, and nothing else. */
    uint32_t got = 0;
    uint64_t last_epoch = 0;
    while (got < accepted) {
        f = tem_recv_data(&t, WAIT_MS);
        ck_assert_msg(f, "%"PRIu32" of %"PRIu32" arrived", got, accepted);
        for (size_t i = 0; i < f->n_messages; i++) {
            const Trumpet__Message *m = f->messages[i];
            if (m->body_case == TRUMPET__MESSAGE__BODY_SATISFACTION) {
                ck_assert(!got || m->satisfaction->epoch > last_epoch);
                last_epoch = m->satisfaction->epoch;
                got++;
            }
        }
        tproto_free(f);
    }
    ck_assert_uint_eq(got, accepted);
    f = tem_recv_data(&t, 100);
    ck_assert_ptr_null(f);
    /* Version 1: sent is all the agent can say. */
    WAIT_STATUS(a, w, !w.pending);
    struct tpm_agent_status s = status(a);
    ck_assert_uint_eq(s.reports, 2000);
    ck_assert_uint_eq(s.unconfirmed, accepted);
    ck_assert_uint_eq(s.dropped_outage, refused);
    ck_assert_uint_eq(s.pending, 0);
    ck_assert_uint_eq(s.acked, 0);

    tproto_batch_destroy(&b);
    tpm_agent_destroy(a);
    tem_destroy(&t);
}
END_TEST

/* The TEM is not there at all: CONNECTING, last_error after the Hello
 * timeout, and everything for the TEM dropped. */
START_TEST(test_unreachable)
{
    struct tem t;
    tem_init(&t, 1000);
    char endpoint[256];
    snprintf(endpoint, sizeof endpoint, "%s", t.endpoint);
    /* zmq_close() returns before the listener is gone; terminating the
     * context waits for it. */
    tem_close(&t);
    zmq_ctx_term(t.ctx);
    t.ctx = zmq_ctx_new();

    struct tpm_agent_config c;
    agent_config(&c, endpoint);
    c.hello_timeout_ns = 100 * MS;
    struct tpm_agent *a = agent_start(&c);
    uint64_t deadline = tpm_clock_mono_ns() + WAIT_MS * MS;
    while (!status(a).last_error[0]) {
        ck_assert(tpm_clock_mono_ns() < deadline);
        sleep_ms(5);
    }
    struct tpm_agent_status s = status(a);
    ck_assert_msg(s.state == TPM_AGENT_CONNECTING, "state %s: %s",
                  tpm_agent_state_name(s.state), s.last_error);
    ck_assert_msg(strstr(s.last_error, "cannot reach TEM at tcp://"), "%s",
                  s.last_error);
    ck_assert_uint_eq(s.frames_out, 0);
    for (int i = 0; i < 10; i++) {
        ck_assert(!tpm_agent_send_nack(a, i, 1, "x"));
    }
    ck_assert_uint_eq(status(a).drops_out, 10);

    /* It connects once the TEM appears. */
    tem_bind(&t, endpoint);
    open_session(&t, a, 1);

    tpm_agent_destroy(a);
    tem_destroy(&t);
}
END_TEST

/* A new key pair DIR/NAME.key (and .pub) with its public key in 'pub';
 * returns the path of the pair (caller frees). */
static char *
make_keys(const char *dir, const char *name, char pub[TPM_CURVE_KEY_LEN + 1])
{
    char *file = xasprintf("%s/%s.key", dir, name);
    char *error = tpm_curve_keygen(file, false, pub);
    ck_assert_msg(!error, "%s", error);
    return file;
}

/* Removes key pair 'file', its .pub and frees 'file'. */
static void
remove_keys(char *file)
{
    char *pub_file = xasprintf("%s.pub", file);
    unlink(pub_file);
    unlink(file);
    free(pub_file);
    free(file);
}

/* Keys are required unless plaintext is asked for, and checked at
 * creation: missing, a public file for the key pair, a secret key open to
 * others, a bad TEM key. */
START_TEST(test_keys_required)
{
    char dir[] = "/tmp/test-agent-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char pub[TPM_CURVE_KEY_LEN + 1], tem_pub[TPM_CURVE_KEY_LEN + 1];
    char *file = make_keys(dir, "h", pub);
    char *pub_file = xasprintf("%s.pub", file);
    char *error = tpm_curve_keygen(file, false, pub);
    ck_assert_msg(error && strstr(error, "exists already"), "%s", error);
    free(error);
    strcpy(tem_pub, pub);
    struct stat st;
    ck_assert_int_eq(stat(file, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0600);

    static const struct {
        const char *tem_key;    /* NULL: none; "FILE": 'pub_file'. */
        int key_file;           /* 0 none, 1 'file', 2 'pub_file'. */
        mode_t mode;            /* Of 'file'. */
        const char *error;
    } cases[] = {
        { NULL, 1, 0600, "no CURVE keys" },
        { "TEM", 0, 0600, "no CURVE keys" },
        { "TEM", 2, 0600, "no secret-key" },
        { "TEM", 1, 0604, "chmod 600" },
        { "short", 1, 0600, "cannot open key file short" },
        { "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa~", 1, 0600,
          "neither 40 Z85 characters nor a key file" },
        { "FILE", 1, 0600, NULL },
        { "TEM", 1, 0600, NULL },
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct tpm_agent_config c;
        agent_config(&c, "tcp://127.0.0.1:1");
        c.insecure_plaintext = false;
        c.tem_public_key = !cases[i].tem_key ? NULL
                           : !strcmp(cases[i].tem_key, "TEM") ? tem_pub
                           : !strcmp(cases[i].tem_key, "FILE") ? pub_file
                           : cases[i].tem_key;
        c.key_file = (const char *[]) { NULL, file,
                                        pub_file }[cases[i].key_file];
        ck_assert_int_eq(chmod(file, cases[i].mode), 0);
        struct tpm_agent *a = tpm_agent_create(&c, &error);
        if (cases[i].error) {
            ck_assert_msg(!a && error && strstr(error, cases[i].error),
                          "case %zu: %s", i, error ? error : "created");
            free(error);
        } else {
            ck_assert_msg(a, "case %zu: %s", i, error);
            tpm_agent_destroy(a);
        }
    }
    remove_keys(file);
    free(pub_file);
    rmdir(dir);

    /* Group read only for a key owned by root (root:trumpet 0640). */
    ck_assert(tpm_curve_secret_mode_ok(0100600, 1000));
    ck_assert(tpm_curve_secret_mode_ok(0100400, 1000));
    ck_assert(tpm_curve_secret_mode_ok(0100640, 0));
    ck_assert(!tpm_curve_secret_mode_ok(0100640, 1000));
    ck_assert(!tpm_curve_secret_mode_ok(0100660, 0));
    ck_assert(!tpm_curve_secret_mode_ok(0100644, 0));
    ck_assert(!tpm_curve_secret_mode_ok(0100604, 1000));
    ck_assert(!tpm_curve_secret_mode_ok(0100650, 0));
}
END_TEST

/* Over CURVE: the agent reaches a TEM whose public key it pins, and not
 * one with another key (it says so in last_error). */
/* A public key argument that names a key file is the file's key, even when
 * the path itself is 40 Z85 characters. */
START_TEST(test_curve_public_arg)
{
    char dir[] = "/tmp/test-agent-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char pub[TPM_CURVE_KEY_LEN + 1], got[TPM_CURVE_KEY_LEN + 1];
    char *file = make_keys(dir, "k", pub);

    /* A relative path of exactly 40 Z85 characters. */
    char cwd[4096];
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    ck_assert_int_eq(chdir(dir), 0);
    const char *name = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ.pub";
    ck_assert_uint_eq(strlen(name), TPM_CURVE_KEY_LEN);
    ck_assert(tpm_curve_key_valid(name));
    char *pubfile = xasprintf("%s.pub", file);
    ck_assert_int_eq(symlink(pubfile, name), 0);
    char *error = tpm_curve_public_arg(name, got);
    ck_assert_msg(!error, "%s", error);
    ck_assert_str_eq(got, pub);
    /* Without the file, the same 40 characters are the key itself. */
    ck_assert_int_eq(unlink(name), 0);
    error = tpm_curve_public_arg(name, got);
    ck_assert_msg(!error, "%s", error);
    ck_assert_str_eq(got, name);
    ck_assert_int_eq(chdir(cwd), 0);

    char *cmd = xasprintf("rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
    free(cmd);
    free(pubfile);
    free(file);
}
END_TEST

START_TEST(test_curve)
{
    char dir[] = "/tmp/test-agent-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char host_pub[TPM_CURVE_KEY_LEN + 1], tem_pub[TPM_CURVE_KEY_LEN + 1];
    char tem_sec[TPM_CURVE_KEY_LEN + 1];
    char *host_file = make_keys(dir, "h", host_pub);
    char *tem_file = make_keys(dir, "t", tem_pub);
    char *error = tpm_curve_read_file(tem_file, tem_pub, tem_sec);
    ck_assert_msg(!error, "%s", error);

    for (int right = 0; right < 2; right++) {
        struct tem t;
        memset(&t, 0, sizeof t);
        t.ctx = zmq_ctx_new();
        t.heartbeat_ms = 1000;
        t.router = zmq_socket(t.ctx, ZMQ_ROUTER);
        int linger = 0;
        zmq_setsockopt(t.router, ZMQ_LINGER, &linger, sizeof linger);
        error = tpm_curve_setup(t.router, NULL, NULL, tem_sec, "test");
        ck_assert_msg(!error, "%s", error);
        ck_assert_int_eq(zmq_bind(t.router, "tcp://127.0.0.1:*"), 0);
        size_t size = sizeof t.endpoint;
        zmq_getsockopt(t.router, ZMQ_LAST_ENDPOINT, t.endpoint, &size);

        struct tpm_agent_config c;
        agent_config(&c, t.endpoint);
        c.insecure_plaintext = false;
        c.tem_public_key = right ? tem_pub : host_pub;
        c.key_file = host_file;
        c.hello_timeout_ns = 200 * MS;
        struct tpm_agent *a = agent_start(&c);
        if (right) {
            Trumpet__Frame *f = tem_expect(&t, TRUMPET__MESSAGE__BODY_HELLO);
            tproto_free(f);
        } else {
            ck_assert_ptr_null(tem_recv(&t, 500));
            uint64_t deadline = tpm_clock_mono_ns() + WAIT_MS * MS;
            while (!status(a).last_error[0]) {
                ck_assert(tpm_clock_mono_ns() < deadline);
                sleep_ms(5);
            }
            struct tpm_agent_status s = status(a);
            ck_assert_msg(strstr(s.last_error, "refuses this host's key"),
                          "%s", s.last_error);
            ck_assert_uint_eq(s.sessions, 0);
        }
        tpm_agent_destroy(a);
        tem_destroy(&t);
    }
    remove_keys(host_file);
    remove_keys(tem_file);
    rmdir(dir);
}
END_TEST

/* Protocol version 3: a PollBatch reaches the host as one command with
 * every entry (IPv4 and IPv6 keys, in order); the host's one answer
 * reaches the TEM as one PollBatchReply, entry for entry. */
START_TEST(test_poll_batch)
{
    struct tem t;
    tem_init(&t, 1000);
    struct tpm_agent_config c;
    agent_config(&c, t.endpoint);
    struct tpm_agent *a = agent_start(&c);

    Trumpet__Frame *f = tem_expect(&t, TRUMPET__MESSAGE__BODY_HELLO);
    ck_assert_uint_eq(f->messages[0]->hello->version_max,
                      TPROTO_VERSION_MAX);
    tproto_free(f);
    tem_welcome_version(&t, "tem-test", TPROTO_VERSION_POLL_BATCH);
    struct tpm_agent_cmd cmd;
    wait_cmd(a, &cmd);
    ck_assert_int_eq(cmd.type, TPM_AGENT_RESYNC);
    ck_assert_uint_eq(status(a).version, TPROTO_VERSION_POLL_BATCH);

    enum { N = 300 };
    uint32_t ids[N];
    struct tpm_key keys[N];
    uint8_t records[N * TPROTO_KEY_RECORD_V6];
    size_t len = 0;
    for (size_t i = 0; i < N; i++) {
        ids[i] = 1 + i % 7;
        keys[i] = make_key(i, 1000 + i);
        if (i % 3 == 2) {
            keys[i].ipver = 6;
            keys[i].src[3] = htonl(i);
            keys[i].dst[0] = htonl(0xfd000000);
        }
        len += tproto_key_record_put(records + len, &keys[i]);
    }
    struct tproto_batch b;
    tproto_batch_init(&b);
    tproto_add_poll_batch(&b, 777, 123456789, ids, N, records, len,
                          NULL);
    tem_send(&t, &b);

    wait_cmd(a, &cmd);
    ck_assert_int_eq(cmd.type, TPM_AGENT_POLL_BATCH);
    ck_assert_uint_eq(cmd.cookie, 777);
    ck_assert_uint_eq(cmd.epoch, 123456789);
    ck_assert_uint_eq(cmd.n_entries, N);
    for (size_t i = 0; i < N; i++) {
        ck_assert_uint_eq(cmd.event_ids[i], ids[i]);
        ck_assert_msg(tpm_key_equal(&cmd.groups[i], &keys[i]),
                      "entry %zu: key differs", i);
    }
    tpm_agent_cmd_free(&cmd);
    ck_assert_ptr_null(cmd.groups);

    uint8_t st[N];
    double values[N];
    for (size_t i = 0; i < N; i++) {
        st[i] = i % 6;
        values[i] = i * 1.5;
    }
    ck_assert(tpm_agent_send_poll_batch_reply(a, 777, 123456789, st, values,
                                              N));
    const Trumpet__PollBatchReply *r = NULL;
    while (!r) {
        f = tem_recv_data(&t, WAIT_MS);
        ck_assert_msg(f, "no poll batch reply");
        for (size_t i = 0; i < f->n_messages; i++) {
            const Trumpet__Message *m = f->messages[i];
            if (m->body_case == TRUMPET__MESSAGE__BODY_POLL_BATCH_REPLY) {
                ck_assert_ptr_null(tproto_validate(m));
                r = m->poll_batch_reply;
            }
        }
        if (!r) {
            tproto_free(f);
        }
    }
    ck_assert_uint_eq(f->version, TPROTO_VERSION_POLL_BATCH);
    ck_assert_uint_eq(r->cookie, 777);
    ck_assert_uint_eq(r->epoch, 123456789);
    ck_assert_uint_eq(r->n_values, N);
    ck_assert_mem_eq(r->status.data, st, N);
    ck_assert_mem_eq(r->values, values, sizeof values);
    tproto_free(f);
    ck_assert_uint_eq(status(a).drops_out, 0);
    ck_assert_uint_eq(status(a).invalid_in, 0);

    tproto_batch_destroy(&b);
    tpm_agent_destroy(a);
    tem_destroy(&t);
}
END_TEST

/* Tenants (version 4): a tenant's satisfaction carries its VNI, polls
 * give the host theirs; a TEM of version 3 gets none, neither those given
 * in its session nor those kept for it over an outage (counted
 * dropped_tenant, the sequence numbers they leave unused skipped). */
START_TEST(test_tenant)
{
    struct tem t;
    tem_init(&t, 200);
    t.version = TPROTO_VERSION_TENANT;
    struct tpm_agent_config c;
    agent_config(&c, t.endpoint);
    struct tpm_agent *a = agent_start(&c);
    ck_assert(!tpm_agent_sends_tenants(a));
    open_session(&t, a, 1);
    ck_assert(tpm_agent_sends_tenants(a));

    /* Satisfactions: a tenant's (its slot any value) and one of no
     * tenant. */
    struct tpm_key kt = make_key(1, 1), k = make_key(1, 1);
    kt.tun = 9;
    ck_assert(tpm_agent_send_satisfaction(a, 1, 1001, &kt, 0xabcdef, 5, 0, 1,
                                          0));
    ck_assert(tpm_agent_send_satisfaction(a, 1, 1002, &k, 0xabcdef, 6, 0, 1,
                                          0));
    size_t got = 0;
    while (got < 2) {
        Trumpet__Frame *f = tem_recv_data(&t, WAIT_MS);
        ck_assert_msg(f, "%zu of 2 satisfactions", got);
        ck_assert_uint_eq(f->version, TPROTO_VERSION_TENANT);
        for (size_t i = 0; i < f->n_messages; i++) {
            const Trumpet__Message *m = f->messages[i];
            if (m->body_case != TRUMPET__MESSAGE__BODY_SATISFACTION) {
                continue;
            }
            ck_assert_ptr_null(tproto_validate(m));
            const Trumpet__GroupKey *g = m->satisfaction->group;
            struct tpm_key back;
            uint32_t vni;
            tproto_key_from_msg(g, &back, &vni);
            ck_assert_uint_eq(m->satisfaction->epoch, 1001 + got);
            ck_assert_uint_eq(g->has_tun_id, got == 0);
            ck_assert_uint_eq(back.tun, got == 0);
            ck_assert_uint_eq(vni, got == 0 ? 0xabcdef : 0);
            back.tun = 0;
            ck_assert(tpm_key_equal(&back, &k));
            got++;
        }
        tproto_free(f);
    }
    tem_send_received(&t, 2);
    WAIT_STATUS(a, w, w.acked == 2);

    /* Polls: a Poll and a PollBatch, with and without a tenant. */
    struct tproto_batch b;
    tproto_batch_init(&b);
    tproto_add_poll(&b, 5, 1, 1000, &k);
    tproto_set_tun_id(&b, 4242);
    tproto_add_poll(&b, 6, 1, 1000, &k);
    uint8_t rec[2 * TPROTO_KEY_RECORD_V4];
    size_t len = tproto_key_record_put(rec, &k);
    len += tproto_key_record_put(rec + len, &k);
    uint32_t ids[2] = { 1, 1 }, tuns[2] = { 0, 4243 };
    tproto_add_poll_batch(&b, 7, 1000, ids, 2, rec, len, tuns);
    tem_send(&t, &b);
    struct tpm_agent_cmd cmd;
    wait_cmd(a, &cmd);
    ck_assert_int_eq(cmd.type, TPM_AGENT_POLL);
    ck_assert_uint_eq(cmd.group.tun, 1);
    ck_assert_uint_eq(cmd.tun_id, 4242);
    wait_cmd(a, &cmd);
    ck_assert_int_eq(cmd.type, TPM_AGENT_POLL);
    ck_assert_uint_eq(cmd.group.tun, 0);
    ck_assert_uint_eq(cmd.tun_id, 0);
    ck_assert(tpm_key_equal(&cmd.group, &k));
    wait_cmd(a, &cmd);
    ck_assert_int_eq(cmd.type, TPM_AGENT_POLL_BATCH);
    ck_assert_uint_eq(cmd.n_entries, 2);
    ck_assert_uint_eq(cmd.groups[0].tun, 0);
    ck_assert_uint_eq(cmd.tun_ids[0], 0);
    ck_assert_uint_eq(cmd.groups[1].tun, 1);
    ck_assert_uint_eq(cmd.tun_ids[1], 4242);
    cmd.groups[1].tun = 0;
    ck_assert(tpm_key_equal(&cmd.groups[1], &k));
    tpm_agent_cmd_free(&cmd);
    ck_assert_ptr_null(cmd.tun_ids);
    tproto_batch_destroy(&b);

    /* The TEM goes; over the outage tenants' reports (3, 5, 7) are kept
     * beside others (4, 6): the TEM that comes back is of version 3. */
    char endpoint[256];
    snprintf(endpoint, sizeof endpoint, "%s", t.endpoint);
    tem_close(&t);
    wait_state(a, TPM_AGENT_BACKOFF);
    for (int i = 0; i < 5; i++) {
        ck_assert(tpm_agent_send_satisfaction(a, 1, 1003 + i,
                                              i % 2 ? &k : &kt, 77, i, 0, 1,
                                              0));
    }
    WAIT_STATUS(a, w, w.pending == 5);
    t.peer_len = 0;
    t.version = TPROTO_VERSION_CONFIRM;
    tem_bind(&t, endpoint);
    open_session(&t, a, 2);
    ck_assert(!tpm_agent_sends_tenants(a));
    struct report r[2];
    tem_recv_reports(&t, r, 2);
    ck_assert(r[0].has_seq && r[0].late && r[1].late);
    ck_assert_uint_eq(r[0].seq, 4);
    ck_assert_uint_eq(r[0].epoch, 1004);
    ck_assert_uint_eq(r[1].seq, 6);
    ck_assert_uint_eq(r[1].epoch, 1006);
    ck_assert_ptr_null(tem_recv_data(&t, 100));
    check_counters(a, 7, 2, 0, 0, 2, 2);
    ck_assert_uint_eq(status(a).dropped_tenant, 3);

    /* A tenant's report given in this session: refused. */
    ck_assert(!tpm_agent_send_satisfaction(a, 1, 1010, &kt, 77, 1, 0, 1, 0));
    ck_assert(tpm_agent_send_satisfaction(a, 1, 1011, &k, 77, 1, 0, 1, 0));
    tem_recv_reports(&t, r, 1);
    ck_assert_uint_eq(r[0].seq, 8);
    ck_assert(!r[0].late);
    tem_send_received(&t, 8);
    WAIT_STATUS(a, w, w.acked == 5);
    check_counters(a, 9, 5, 0, 0, 0, 2);
    ck_assert_uint_eq(status(a).dropped_tenant, 4);

    tpm_agent_destroy(a);
    tem_destroy(&t);
}
END_TEST

/* Tenants' reports kept over an outage and removed at the Welcome of a
 * TEM of version 3 leave their sequence numbers unused: reports dropped
 * from the full buffer around them later in the session are counted
 * exactly (the range of those awaiting confirmation skips them). */
START_TEST(test_tenant_holes)
{
    struct tem t;
    tem_init(&t, 200);
    t.version = TPROTO_VERSION_TENANT;
    struct tpm_agent_config c;
    agent_config(&c, t.endpoint);
    c.outage_buffer = 4;
    struct tpm_agent *a = agent_start(&c);
    open_session(&t, a, 1);

    /* Over an outage: 1 and 3 a tenant's, 2 and 4 not. */
    char endpoint[256];
    snprintf(endpoint, sizeof endpoint, "%s", t.endpoint);
    tem_close(&t);
    wait_state(a, TPM_AGENT_BACKOFF);
    struct tpm_key k = make_key(1, 1), kt = k;
    kt.tun = 1;
    for (int i = 1; i <= 4; i++) {
        ck_assert(tpm_agent_send_satisfaction(a, 1, 1000 + i,
                                              i % 2 ? &kt : &k, 5, i, 0, 1,
                                              0));
    }
    WAIT_STATUS(a, w, w.pending == 4);

    /* Version 3: 2 and 4 go (late); 5..8 then push them out of the
     * buffer while they await confirmation. */
    t.peer_len = 0;
    t.version = TPROTO_VERSION_CONFIRM;
    tem_bind(&t, endpoint);
    open_session(&t, a, 2);
    struct report r[4];
    tem_recv_reports(&t, r, 2);
    ck_assert_uint_eq(r[0].seq, 2);
    ck_assert_uint_eq(r[1].seq, 4);
    for (int i = 5; i <= 8; i++) {
        ck_assert(tpm_agent_send_satisfaction(a, 1, 1000 + i, &k, 0, i, 0,
                                              1, 0));
    }
    tem_recv_reports(&t, r, 4);
    ck_assert_uint_eq(r[0].seq, 5);
    ck_assert_uint_eq(r[3].seq, 8);
    WAIT_STATUS(a, w, w.pending == 6);
    check_counters(a, 8, 0, 0, 0, 6, 2);

    /* All confirmed: 2 and 4 (out of the buffer), 5..8. */
    tem_send_received(&t, 8);
    WAIT_STATUS(a, w, w.acked == 6);
    check_counters(a, 8, 6, 0, 0, 0, 2);
    ck_assert_uint_eq(status(a).dropped_tenant, 2);

    tpm_agent_destroy(a);
    tem_destroy(&t);
}
END_TEST

static Suite *
agent_suite(void)
{
    Suite *s = suite_create("agent");
    TCase *tc = tcase_create("agent");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_endpoint);
    tcase_add_test(tc, test_session);
    tcase_add_test(tc, test_batching);
    tcase_add_test(tc, test_poll_batch);
    tcase_add_test(tc, test_invalid);
    tcase_add_test(tc, test_configure);
    tcase_add_test(tc, test_refuse);
    tcase_add_test(tc, test_reconnect);
    tcase_add_test(tc, test_queue_full);
    tcase_add_test(tc, test_outage_resend);
    tcase_add_test(tc, test_pmds_changed);
    tcase_add_test(tc, test_hand_over);
    tcase_add_test(tc, test_outage_buffer_full);
    tcase_add_test(tc, test_outage_poll_batch_reply);
    tcase_add_test(tc, test_tenant);
    tcase_add_test(tc, test_tenant_holes);
    tcase_add_test(tc, test_unreachable);
    tcase_add_test(tc, test_keys_required);
    tcase_add_test(tc, test_curve);
    tcase_add_test(tc, test_curve_public_arg);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return test_run_suite(agent_suite());
}
