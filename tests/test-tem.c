/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the TEM's logic (tem/tem-core.h) without sockets: a fake clock,
 * hosts simulated by encoding the frames they would send, and every frame
 * the core sends captured and decoded, so that the tests check the exact
 * messages, shares, values and alerts.
 */
#include <check.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "tem-auth.h"
#include "tem-core.h"
#include "tem-metrics.h"
#include "tem-state.h"
#include "test-util.h"
#include "tproto.h"
#include "util.h"

#define MS 1000000ULL
#define EPOCH_NS (10 * MS)

/* A frame the core sent. */
struct sent {
    char peer[64];
    Trumpet__Frame *frame;
};

struct fixture {
    uint64_t now;               /* The monotonic clock... */
    int64_t real_offset;        /* ... and the wall clock's lead on it. */
    struct tem_core *core;
    struct sent *sent;
    size_t n_sent, allocated;
    char **alerts;
    size_t n_alerts;
};

static struct fixture fx;

/* Tests name epochs from the one the fake clock starts in: EP(n) is its
 * n-th successor.  fx_epoch() also moves the clock to the end of that
 * epoch if it is not there yet, as a host reports an epoch once it is
 * over (the TEM refuses epochs ahead of its clock). */
static uint64_t fx_epoch0;
#define EP(N) (fx_epoch0 + (N))

static uint64_t
fx_epoch(uint64_t n)
{
    uint64_t end = (EP(n) + 1) * EPOCH_NS;
    if (fx.now < end) {
        fx.now = end;
    }
    return EP(n);
}

/* The protocol version hello() offers: 2 (a Poll per entry) unless a test
 * of PollBatch asks for more. */
static uint32_t fx_hello_version;

static uint64_t
fake_mono(void *aux)
{
    return ((struct fixture *) aux)->now;
}

static uint64_t
fake_real(void *aux)
{
    const struct fixture *f = aux;
    return f->now + f->real_offset;
}

static bool
capture_send(void *aux, const void *peer, size_t peer_len, uint32_t version,
             const struct tproto_batch *batch)
{
    struct fixture *f = aux;
    uint8_t *data;
    size_t len = tproto_batch_encode(batch, version, &data);
    const char *why;

    if (f->n_sent == f->allocated) {
        f->allocated = MAX(16, 2 * f->allocated);
        f->sent = xrealloc(f->sent, f->allocated * sizeof *f->sent);
    }
    struct sent *s = &f->sent[f->n_sent++];
    snprintf(s->peer, sizeof s->peer, "%.*s", (int) peer_len,
             (const char *) peer);
    s->frame = tproto_decode(data, len, &why);
    ck_assert_msg(s->frame, "core sent an undecodable frame: %s", why);
    free(data);
    return true;
}

static void
capture_alert(void *aux, const char *event, const char *json)
{
    struct fixture *f = aux;
    f->alerts = xrealloc(f->alerts, (f->n_alerts + 1) * sizeof *f->alerts);
    f->alerts[f->n_alerts++] = xstrdup(json);
}

static void
fx_config(struct tem_config *cfg)
{
    tem_config_init(cfg);
    cfg->clock.mono = fake_mono;
    cfg->clock.real = fake_real;
    cfg->clock.aux = &fx;
    cfg->send = capture_send;
    cfg->alert = capture_alert;
    cfg->aux = &fx;
    cfg->epoch_ns = EPOCH_NS;
}

static void
fx_clear_sent(void)
{
    for (size_t i = 0; i < fx.n_sent; i++) {
        tproto_free(fx.sent[i].frame);
    }
    fx.n_sent = 0;
}

static void
fx_clear_alerts(void)
{
    for (size_t i = 0; i < fx.n_alerts; i++) {
        free(fx.alerts[i]);
    }
    fx.n_alerts = 0;
}

static void
setup(void)
{
    struct tem_config cfg;
    memset(&fx, 0, sizeof fx);
    fx.now = 1700000000ULL * 1000000000ULL;
    fx_epoch0 = fx.now / EPOCH_NS;
    fx_hello_version = 2;
    fx_config(&cfg);
    fx.core = tem_core_create(&cfg);
}

static void
teardown(void)
{
    tem_core_destroy(fx.core);
    fx_clear_sent();
    fx_clear_alerts();
    free(fx.sent);
    free(fx.alerts);
}

/* Encodes 'b' and feeds it to the core as coming from 'peer'. */
static void
input(const char *peer, struct tproto_batch *b)
{
    uint8_t *data;
    size_t len = tproto_batch_encode(b, 0, &data);
    tem_core_input(fx.core, peer, strlen(peer), data, len);
    free(data);
    tproto_batch_clear(b);
    tem_core_flush(fx.core);
}

/* One loop iteration of the daemon. */
static void
step(void)
{
    tem_core_run(fx.core);
    tem_core_flush(fx.core);
}

/* Calls 'cb' for every message of type 'type' sent to 'peer' (NULL: any
 * peer) since the last fx_clear_sent(); returns how many. */
static size_t
count_sent(const char *peer, Trumpet__Message__BodyCase type)
{
    size_t n = 0;
    for (size_t i = 0; i < fx.n_sent; i++) {
        if (peer && strcmp(fx.sent[i].peer, peer)) {
            continue;
        }
        for (size_t j = 0; j < fx.sent[i].frame->n_messages; j++) {
            n += fx.sent[i].frame->messages[j]->body_case == type;
        }
    }
    return n;
}

/* Returns the 'k'th message of 'type' sent to 'peer'. */
static const Trumpet__Message *
get_sent(const char *peer, Trumpet__Message__BodyCase type, size_t k)
{
    for (size_t i = 0; i < fx.n_sent; i++) {
        if (peer && strcmp(fx.sent[i].peer, peer)) {
            continue;
        }
        for (size_t j = 0; j < fx.sent[i].frame->n_messages; j++) {
            const Trumpet__Message *m = fx.sent[i].frame->messages[j];
            if (m->body_case == type && !k--) {
                return m;
            }
        }
    }
    ck_abort_msg("no message %s #%zu to %s", tproto_body_name(type), k,
                 peer ? peer : "any peer");
    return NULL;
}

/* A host whose peer identity is "p-ID", its agent's run 'instance' (0:
 * none, as a host of protocol version 2). */
static void
hello_run(const char *id, const char *prefixes, uint64_t instance)
{
    struct tproto_batch b;
    struct tpm_prefix *p = NULL;
    size_t n = 0;
    char peer[64];

    if (prefixes) {
        char *error = tpm_prefix_parse_list(prefixes, &p, &n);
        ck_assert_msg(!error, "%s", error);
    }
    snprintf(peer, sizeof peer, "p-%s", id);
    tproto_batch_init(&b);
    tproto_add_hello(&b, id, p, n, EPOCH_NS, fx.now, NULL, 0, "test");
    b.msgs[0]->hello->version_max = fx_hello_version;
    if (instance) {
        tproto_set_instance(&b, instance);
    }
    input(peer, &b);
    tproto_batch_destroy(&b);
    free(p);
    tem_core_flush(fx.core);
    ck_assert_uint_eq(count_sent(peer, TRUMPET__MESSAGE__BODY_WELCOME), 1);
}

static void
hello(const char *id, const char *prefixes)
{
    hello_run(id, prefixes, 0);
}

/* Acks every Install sent to host 'id' so far. */
static void
ack_installs(const char *id)
{
    char peer[64];
    struct tproto_batch b;
    snprintf(peer, sizeof peer, "p-%s", id);
    tproto_batch_init(&b);
    size_t n = count_sent(peer, TRUMPET__MESSAGE__BODY_INSTALL);
    for (size_t i = 0; i < n; i++) {
        const Trumpet__Install *in = get_sent(
            peer, TRUMPET__MESSAGE__BODY_INSTALL, i)->install;
        tproto_add_ack(&b, in->cookie, in->event_id);
    }
    if (n) {
        input(peer, &b);
    }
    tproto_batch_destroy(&b);
}

static uint32_t
add_event(const char *name, const char *def)
{
    char *error = tem_core_event_add(fx.core, name, def, 0);
    ck_assert_msg(!error, "%s: %s", def, error);
    tem_core_flush(fx.core);
    char *e2;
    struct json_object *o = tem_core_event_show_json(fx.core, name, &e2);
    struct json_object *id;
    ck_assert(json_object_object_get_ex(o, "id", &id));
    uint32_t v = json_object_get_int(id);
    json_object_put(o);
    return v;
}

static struct tpm_key
group_key(const char *dst)
{
    struct tpm_prefix p;
    char *error = tpm_prefix_parse(dst, &p);
    ck_assert_msg(!error, "%s", error);
    struct tpm_key k = { .ipver = 4 };
    k.dst[0] = p.addr[0];
    return k;
}

static void
satisfy(const char *id, uint32_t event, uint64_t epoch, const char *dst,
        double value)
{
    char peer[64];
    struct tproto_batch b;
    struct tpm_key k = group_key(dst);
    snprintf(peer, sizeof peer, "p-%s", id);
    tproto_batch_init(&b);
    tproto_add_satisfaction(&b, event, fx_epoch(epoch), &k, value, 0, 1, 0);
    input(peer, &b);
    tproto_batch_destroy(&b);
}

/* Answers the 'k'th Poll sent to host 'id'. */
static void
reply(const char *id, size_t k, Trumpet__PollStatus status, double value)
{
    char peer[64];
    struct tproto_batch b;
    snprintf(peer, sizeof peer, "p-%s", id);
    const Trumpet__Poll *p = get_sent(peer, TRUMPET__MESSAGE__BODY_POLL,
                                      k)->poll;
    tproto_batch_init(&b);
    tproto_add_poll_reply(&b, p->cookie, p->event_id, p->epoch, status,
                          value);
    input(peer, &b);
    tproto_batch_destroy(&b);
}

static struct json_object *
alert(size_t i)
{
    ck_assert_uint_gt(fx.n_alerts, i);
    struct json_object *o = json_tokener_parse(fx.alerts[i]);
    ck_assert_ptr_nonnull(o);
    return o;
}

static struct json_object *
field(struct json_object *o, const char *key)
{
    struct json_object *v = NULL;
    ck_assert_msg(json_object_object_get_ex(o, key, &v), "no '%s' in %s",
                  key, json_object_to_json_string(o));
    return v;
}

static double
host_value(struct json_object *a, const char *host)
{
    return json_object_get_double(field(field(a, "hosts"), host));
}

/* Returns the array 'key' of 'a' joined by commas. */
static char *
joined(struct json_object *a, const char *key)
{
    struct json_object *arr = field(a, key);
    char *s = xstrdup("");
    for (size_t i = 0; i < json_object_array_length(arr); i++) {
        char *t = xasprintf("%s%s%s", s, i ? "," : "",
                            json_object_get_string(
                                json_object_array_get_idx(arr, i)));
        free(s);
        s = t;
    }
    return s;
}

static void
three_hosts(void)
{
    hello("a", "10.1.0.0/24");
    hello("b", "10.1.1.0/24");
    hello("c", "10.1.2.0/24");
}

START_TEST(test_split_equal)
{
    three_hosts();
    hello("d", NULL);
    uint32_t id = add_event("vol", "filter=ip predicate=sum(volume) > 100");
    static const char *const peers[] = { "p-a", "p-b", "p-c", "p-d" };
    for (size_t i = 0; i < 4; i++) {
        const Trumpet__Install *in = get_sent(
            peers[i], TRUMPET__MESSAGE__BODY_INSTALL, 0)->install;
        ck_assert_uint_eq(in->event_id, id);
        ck_assert_str_eq(in->name, "vol");
        ck_assert_str_eq(in->definition,
                         "filter=ip predicate=sum(volume) > 100");
        ck_assert(in->has_threshold);
        ck_assert_double_eq(in->threshold, 25);
    }

    /* A fifth host joins: everyone is re-split to 20 (Remove+Install). */
    fx_clear_sent();
    hello("e", NULL);
    for (size_t i = 0; i < 4; i++) {
        ck_assert_uint_eq(count_sent(peers[i],
                                     TRUMPET__MESSAGE__BODY_REMOVE), 1);
        ck_assert_double_eq(get_sent(peers[i], TRUMPET__MESSAGE__BODY_INSTALL,
                                     0)->install->threshold, 20);
    }
    ck_assert_double_eq(get_sent("p-e", TRUMPET__MESSAGE__BODY_INSTALL,
                                 0)->install->threshold, 20);
    ck_assert_uint_eq(count_sent("p-e", TRUMPET__MESSAGE__BODY_REMOVE), 0);
}
END_TEST

START_TEST(test_split_weighted)
{
    struct tem_config cfg;
    tem_core_destroy(fx.core);
    fx_config(&cfg);
    cfg.rebalance_ns = 1000 * MS;
    fx.core = tem_core_create(&cfg);

    hello("a", NULL);
    hello("b", NULL);
    uint32_t id = add_event("w", "filter=ip predicate=sum(volume) > 100 "
                            "split=weighted");
    step();
    ck_assert_double_eq(get_sent("p-a", TRUMPET__MESSAGE__BODY_INSTALL,
                                 0)->install->threshold, 50);

    /* History: a carries 300, b 100. */
    satisfy("a", id, 7, "10.1.0.1", 300);
    tem_core_flush(fx.core);
    reply("b", 0, TRUMPET__POLL_STATUS__POLL_OK, 100);
    ck_assert_uint_eq(fx.n_alerts, 1);

    /* Before the rebalance interval: nothing moves. */
    fx_clear_sent();
    fx.now += 500 * MS;
    step();
    ck_assert_uint_eq(count_sent(NULL, TRUMPET__MESSAGE__BODY_INSTALL), 0);

    /* After: shares 75 / 25, by Remove + Install. */
    fx.now += 600 * MS;
    step();
    ck_assert_uint_eq(count_sent("p-a", TRUMPET__MESSAGE__BODY_REMOVE), 1);
    ck_assert_uint_eq(count_sent("p-b", TRUMPET__MESSAGE__BODY_REMOVE), 1);
    ck_assert_double_eq_tol(get_sent("p-a", TRUMPET__MESSAGE__BODY_INSTALL,
                                     0)->install->threshold, 75, 1e-9);
    ck_assert_double_eq_tol(get_sent("p-b", TRUMPET__MESSAGE__BODY_INSTALL,
                                     0)->install->threshold, 25, 1e-9);
    struct tem_stats st;
    tem_core_get_stats(fx.core, &st);
    ck_assert_uint_eq(st.rebalances, 1);

    /* A host with no history gets the floor, not zero: with a third host,
     * weights 300, 100 and 10% of the mean (400 / 3). */
    fx_clear_sent();
    hello("c", NULL);
    double floor = 0.1 * 400 / 3, sum = 400 + floor;
    ck_assert_double_eq_tol(get_sent("p-c", TRUMPET__MESSAGE__BODY_INSTALL,
                                     0)->install->threshold,
                            100 * floor / sum, 1e-9);
    ck_assert_double_eq_tol(get_sent("p-a", TRUMPET__MESSAGE__BODY_INSTALL,
                                     0)->install->threshold,
                            100 * 300 / sum, 1e-9);
}
END_TEST

START_TEST(test_install_prefixes)
{
    hello("a", "10.1.0.0/24");
    hello("b", "10.2.0.0/24,fd00::/64");
    hello("c", NULL);

    add_event("to-a", "filter=ip,nw_dst=10.1.0.0/16 predicate=count() > 1");
    add_event("from-b", "filter=ip,nw_src=10.2.0.128/25 "
              "predicate=count() > 1");
    add_event("any", "filter=ip predicate=count() > 1");
    add_event("scoped", "filter=ip predicate=count() > 1 scope=10.2.0.0/16");
    add_event("v6", "filter=ipv6,ipv6_dst=fd00::/16 predicate=count() > 1");
    add_event("none", "filter=ip,nw_dst=192.168.0.0/16 "
              "predicate=count() > 1");

    static const struct {
        const char *peer;
        const char *events;
    } expect[] = {
        { "p-a", "to-a,any," },
        { "p-b", "from-b,any,scoped,v6," },
        { "p-c", "any," },
    };
    for (size_t i = 0; i < ARRAY_SIZE(expect); i++) {
        char got[256] = "";
        size_t n = count_sent(expect[i].peer,
                              TRUMPET__MESSAGE__BODY_INSTALL);
        for (size_t k = 0; k < n; k++) {
            strcat(got, get_sent(expect[i].peer,
                                 TRUMPET__MESSAGE__BODY_INSTALL,
                                 k)->install->name);
            strcat(got, ",");
        }
        ck_assert_str_eq(got, expect[i].events);
    }

    /* Split over the hosts of the event only: to-a is on a alone. */
    ck_assert_double_eq(get_sent("p-a", TRUMPET__MESSAGE__BODY_INSTALL,
                                 0)->install->threshold, 1);
    ck_assert_double_eq(get_sent("p-a", TRUMPET__MESSAGE__BODY_INSTALL,
                                 1)->install->threshold, 1.0 / 3);
}
END_TEST

/* The names of the events installed on 'peer', then removed (by id), since
 * the last fx_clear_sent(): "name,name,...;id,id,...". */
static char *
placed(const char *peer)
{
    static char got[512];
    size_t n = count_sent(peer, TRUMPET__MESSAGE__BODY_INSTALL);

    got[0] = '\0';
    for (size_t k = 0; k < n; k++) {
        strcat(got, get_sent(peer, TRUMPET__MESSAGE__BODY_INSTALL,
                             k)->install->name);
        strcat(got, ",");
    }
    strcat(got, ";");
    n = count_sent(peer, TRUMPET__MESSAGE__BODY_REMOVE);
    for (size_t k = 0; k < n; k++) {
        char id[16];
        snprintf(id, sizeof id, "%"PRIu32",", get_sent(
                     peer, TRUMPET__MESSAGE__BODY_REMOVE,
                     k)->remove->event_id);
        strcat(got, id);
    }
    return got;
}

/* Events placed per tenant: hosts serving the same inner addresses in
 * different VNIs, one serving them untunnelled, one serving nothing. */
START_TEST(test_tenant_placement)
{
    hello("t1", "vni=5001:10.0.128.0/24, 10.1.0.0/24");
    hello("t2", "vni=5002:10.0.128.0/24");
    hello("t3", "vni=0x138b:10.0.128.0/24");    /* 5003. */
    hello("u", "10.0.128.0/24");
    hello("n", NULL);
    fx_clear_sent();

    /* A tenant's event goes only where that tenant's prefix is served. */
    add_event("t5001", "filter=udp,tun_id=5001,nw_dst=10.0.128.0/24 "
              "predicate=count() > 1");
    add_event("t5001-all", "filter=udp,tun_id=5001 predicate=count() > 1");
    /* t1 serves 10.1.0.0/24, but not in 5001: no host. */
    add_event("t5001-none", "filter=udp,tun_id=5001,nw_dst=10.1.0.0/16 "
              "predicate=count() > 1");
    /* Without tun_id=: every tenant's inner flows and the untunnelled. */
    add_event("inner", "filter=udp,nw_dst=10.0.128.0/24 "
              "predicate=count() > 1");
    add_event("any", "filter=ip predicate=count() > 1");
    /* 5001 and 5003, not 5002. */
    add_event("masked", "filter=udp,tun_id=0x1389/0xfffffd,"
              "nw_src=10.0.128.0/25 predicate=count() > 1");
    /* A tenant's scope: its prefixes only. */
    add_event("scoped", "filter=ip predicate=count() > 1 "
              "scope=vni=5002:10.0.0.0/8");
    add_event("scoped-plain", "filter=ip predicate=count() > 1 "
              "scope=10.0.128.0/24");
    /* tun_id=0/0: any tenant. */
    add_event("tenants", "filter=udp,tun_id=0/0 predicate=count() > 1");

    ck_assert_str_eq(placed("p-t1"), "t5001,t5001-all,inner,any,masked,"
                     "scoped-plain,tenants,;");
    ck_assert_str_eq(placed("p-t2"), "inner,any,scoped,scoped-plain,"
                     "tenants,;");
    ck_assert_str_eq(placed("p-t3"), "inner,any,masked,scoped-plain,"
                     "tenants,;");
    ck_assert_str_eq(placed("p-u"), "inner,any,scoped-plain,;");
    ck_assert_str_eq(placed("p-n"), "any,;");

    /* The event's tenant in event-show and event-list. */
    char *error;
    struct json_object *o = tem_core_event_show_json(fx.core, "masked",
                                                     &error);
    ck_assert_str_eq(json_object_get_string(field(o, "tun_id")),
                     "tun_id=0x1389/0xfffffd");
    ck_assert_int_eq(json_object_array_length(field(o, "hosts")), 2);
    json_object_put(o);
    o = tem_core_event_show_json(fx.core, "inner", &error);
    ck_assert_ptr_null(field(o, "tun_id"));
    json_object_put(o);

    /* t2 comes back serving 5001 instead of 5002: it gains 5001's events
     * and loses the scope of 5002 (and, its session new, everything is
     * installed again). */
    ack_installs("t2");
    fx_clear_sent();
    hello("t2", "vni=5001:10.0.128.0/24");
    ck_assert_str_eq(placed("p-t2"), "t5001,t5001-all,inner,any,masked,"
                     "scoped-plain,tenants,;");
    o = tem_core_event_show_json(fx.core, "t5001", &error);
    ck_assert_int_eq(json_object_array_length(field(o, "hosts")), 2);
    json_object_put(o);
    o = tem_core_event_show_json(fx.core, "scoped", &error);
    ck_assert_int_eq(json_object_array_length(field(o, "hosts")), 0);
    json_object_put(o);

    /* u starts serving tenant 5002 too, in the same session's place: the
     * new session takes the tenant's events, an old one's are removed. */
    fx_clear_sent();
    hello("u", "10.0.128.0/24,vni=5002:10.0.0.0/16");
    ck_assert_str_eq(placed("p-u"), "inner,any,scoped,scoped-plain,"
                     "tenants,;");

    /* A host of a tenant leaving and not coming back: t1's triggers of
     * its tenant are gone, t2's stay. */
    fx_clear_sent();
    hello("t1", "10.1.0.0/24");
    ck_assert_str_eq(placed("p-t1"), "any,;");
    o = tem_core_event_show_json(fx.core, "t5001", &error);
    ck_assert_int_eq(json_object_array_length(field(o, "hosts")), 1);
    json_object_put(o);

    /* Lists narrowed by a tenant (tem-ctl --tun-id). */
    static const struct {
        uint32_t vni;
        const char *hosts, *events;
    } lists[] = {
        { 5001, "t2,", "t5001,t5001-all,t5001-none,masked,tenants," },
        { 5002, "u,", "tenants," },
        { 5003, "t3,", "masked,tenants," },
        { 7, "", "tenants," },
    };
    for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
        char hosts[128] = "", events[256] = "";
        o = tem_core_hosts_json(fx.core, &lists[i].vni);
        struct json_object *list = field(o, "hosts");
        for (size_t k = 0; k < json_object_array_length(list); k++) {
            strcat(hosts, json_object_get_string(field(
                       json_object_array_get_idx(list, k), "host")));
            strcat(hosts, ",");
        }
        json_object_put(o);
        o = tem_core_event_list_json(fx.core, &lists[i].vni);
        list = field(o, "events");
        for (size_t k = 0; k < json_object_array_length(list); k++) {
            strcat(events, json_object_get_string(field(
                       json_object_array_get_idx(list, k), "name")));
            strcat(events, ",");
        }
        json_object_put(o);
        ck_assert_str_eq(hosts, lists[i].hosts);
        ck_assert_str_eq(events, lists[i].events);
    }
    o = tem_core_event_list_json(fx.core, NULL);
    ck_assert_int_eq(json_object_array_length(field(o, "events")), 9);
    json_object_put(o);

    /* An underlay event (outer addresses: the hosts' own) only where a
     * prefix of no tenant overlaps: t1's 10.1.0.0/24 and u's
     * 10.0.128.0/24, not the tenants' 10.0.128.0/24. */
    fx_clear_sent();
    add_event("outer", "filter=udp,underlay,nw_dst=10.0.0.0/8 "
              "predicate=count() > 1");
    ck_assert_str_eq(placed("p-t1"), "outer,;");
    ck_assert_str_eq(placed("p-u"), "outer,;");
    ck_assert_str_eq(placed("p-t2"), ";");
    ck_assert_str_eq(placed("p-t3"), ";");
    ck_assert_str_eq(placed("p-n"), ";");
}
END_TEST

/* Three hosts a, b, c on "sum(volume) > 90" (shares of 30). */
static uint32_t
sum_event(void)
{
    three_hosts();
    uint32_t id = add_event("svc", "filter=ip predicate=sum(volume) > 90 "
                            "group=nw_dst");
    ack_installs("a");
    ack_installs("b");
    ack_installs("c");
    fx_clear_sent();
    return id;
}

START_TEST(test_poll_all_reply)
{
    uint32_t id = sum_event();

    fx.now += 5 * MS;
    satisfy("a", id, 42, "10.1.0.7", 40);
    tem_core_flush(fx.core);
    ck_assert_uint_eq(count_sent("p-b", TRUMPET__MESSAGE__BODY_POLL), 1);
    ck_assert_uint_eq(count_sent("p-c", TRUMPET__MESSAGE__BODY_POLL), 1);
    ck_assert_uint_eq(count_sent("p-a", TRUMPET__MESSAGE__BODY_POLL), 0);
    const Trumpet__Poll *p = get_sent("p-b", TRUMPET__MESSAGE__BODY_POLL,
                                      0)->poll;
    ck_assert_uint_eq(p->event_id, id);
    ck_assert_uint_eq(p->epoch, EP(42));

    fx.now += 300 * 1000;
    reply("b", 0, TRUMPET__POLL_STATUS__POLL_OK, 35);
    ck_assert_uint_eq(fx.n_alerts, 0);
    reply("c", 0, TRUMPET__POLL_STATUS__POLL_OK, 20);
    ck_assert_uint_eq(fx.n_alerts, 1);

    struct json_object *a = alert(0);
    ck_assert_str_eq(json_object_get_string(field(a, "event")), "svc");
    ck_assert_int_eq(json_object_get_int64(field(a, "epoch")), EP(42));
    ck_assert_double_eq(json_object_get_double(field(a, "value")), 95);
    ck_assert_double_eq(json_object_get_double(field(a, "threshold")), 90);
    ck_assert_str_eq(json_object_get_string(field(a, "across")), "sum");
    ck_assert_double_eq(host_value(a, "a"), 40);
    ck_assert_double_eq(host_value(a, "b"), 35);
    ck_assert_double_eq(host_value(a, "c"), 20);
    ck_assert_uint_eq(json_object_array_length(field(a, "missing")), 0);
    ck_assert(!json_object_get_boolean(field(a, "deadline")));
    ck_assert_int_eq(json_object_get_int64(field(a, "latency_us")), 300);
    ck_assert_int_eq(json_object_get_int64(field(a, "seq")), 1);
    ck_assert_str_eq(json_object_get_string(field(field(a, "group"),
                                                  "nw_dst")), "10.1.0.7");
    json_object_put(a);

    /* A late satisfaction for the same key does not alert twice. */
    satisfy("c", id, 42, "10.1.0.7", 31);
    ck_assert_uint_eq(fx.n_alerts, 1);
    struct tem_stats st;
    tem_core_get_stats(fx.core, &st);
    ck_assert_uint_eq(st.sat_late, 1);
    ck_assert_uint_eq(st.decisions, 1);
    ck_assert_uint_eq(st.alerts, 1);

    /* Another host's satisfaction fills its value directly. */
    fx_clear_sent();
    satisfy("a", id, 43, "10.1.0.7", 50);
    satisfy("b", id, 43, "10.1.0.7", 45);
    reply("c", 0, TRUMPET__POLL_STATUS__POLL_NO_GROUP, 0);
    ck_assert_uint_eq(fx.n_alerts, 2);
    a = alert(1);
    ck_assert_double_eq(json_object_get_double(field(a, "value")), 95);
    ck_assert_double_eq(host_value(a, "c"), 0);
    json_object_put(a);
}
END_TEST

/* Answers the 'k'th PollBatch sent to host 'id': entry i with 'status[i]'
 * and 'values[i]' ('n' of them, which may differ from the batch's to
 * test a bad reply; 'cookie' 0: the batch's). */
static void
reply_batch(const char *id, size_t k, const uint8_t *status,
            const double *values, size_t n, uint64_t cookie)
{
    char peer[64];
    struct tproto_batch b;
    snprintf(peer, sizeof peer, "p-%s", id);
    const Trumpet__PollBatch *p = get_sent(
        peer, TRUMPET__MESSAGE__BODY_POLL_BATCH, k)->poll_batch;
    tproto_batch_init(&b);
    tproto_add_poll_batch_reply(&b, cookie ? cookie : p->cookie, p->epoch,
                                status, values, n);
    input(peer, &b);
    tproto_batch_destroy(&b);
}

/* The key of entry 'i' of 'p'. */
static struct tpm_key
batch_key(const Trumpet__PollBatch *p, size_t i)
{
    struct tpm_key key;
    size_t off = 0, len = 0;
    for (size_t j = 0; j <= i; j++) {
        off += len;
        len = tproto_key_record_get(p->keys.data + off, p->keys.len - off,
                                    &key);
        ck_assert_uint_ne(len, 0);
    }
    return key;
}

/* Protocol version 3: one PollBatch per host and epoch carries every
 * poll of a loop turn, in order; its reply's entry i answers entry i; a
 * reply with a stale cookie or the wrong number of entries changes
 * nothing; NOT_YET entries are asked again in a later batch. */
START_TEST(test_poll_batch)
{
    fx_hello_version = TPROTO_VERSION_POLL_BATCH;
    uint32_t id = sum_event();
    uint32_t id2 = add_event("svc2", "filter=ip predicate=sum(volume) > 60 "
                             "group=nw_dst");
    ack_installs("a");
    ack_installs("b");
    ack_installs("c");
    fx_clear_sent();

    /* One frame from a: three keys of epoch 42 (two events), one of 43. */
    struct tproto_batch b;
    tproto_batch_init(&b);
    struct tpm_key k1 = group_key("10.1.0.1"), k2 = group_key("10.1.0.2");
    tproto_add_satisfaction(&b, id, fx_epoch(42), &k1, 40, 0, 1, 0);
    tproto_add_satisfaction(&b, id2, fx_epoch(42), &k1, 30, 0, 1, 0);
    tproto_add_satisfaction(&b, id, fx_epoch(42), &k2, 40, 0, 1, 0);
    tproto_add_satisfaction(&b, id, fx_epoch(43), &k1, 40, 0, 1, 0);
    input("p-a", &b);
    ck_assert_uint_eq(count_sent("p-b", TRUMPET__MESSAGE__BODY_POLL), 0);
    ck_assert_uint_eq(count_sent("p-b", TRUMPET__MESSAGE__BODY_POLL_BATCH),
                      2);
    ck_assert_uint_eq(count_sent("p-c", TRUMPET__MESSAGE__BODY_POLL_BATCH),
                      2);
    ck_assert_uint_eq(count_sent("p-a", TRUMPET__MESSAGE__BODY_POLL_BATCH),
                      0);
    const Trumpet__PollBatch *pb = get_sent(
        "p-b", TRUMPET__MESSAGE__BODY_POLL_BATCH, 0)->poll_batch;
    ck_assert_uint_eq(pb->epoch, EP(42));
    ck_assert_uint_eq(pb->n_event_ids, 3);
    ck_assert_uint_eq(pb->event_ids[0], id);
    ck_assert_uint_eq(pb->event_ids[1], id2);
    ck_assert_uint_eq(pb->event_ids[2], id);
    struct tpm_key got = batch_key(pb, 2);
    ck_assert(tpm_key_equal(&got, &k2));
    const Trumpet__PollBatch *pb43 = get_sent(
        "p-b", TRUMPET__MESSAGE__BODY_POLL_BATCH, 1)->poll_batch;
    ck_assert_uint_eq(pb43->epoch, EP(43));
    ck_assert_uint_eq(pb43->n_event_ids, 1);
    ck_assert_uint_ne(pb43->cookie, pb->cookie);
    struct tem_stats st;
    tem_core_get_stats(fx.core, &st);
    ck_assert_uint_eq(st.polls_sent, 8);
    ck_assert_uint_eq(st.poll_batches, 4);

    /* Wrong number of entries, unknown cookie: stale, nothing decided. */
    uint8_t ok3[3] = { 0, 0, 0 };
    double v3[3] = { 35, 20, 10 };
    reply_batch("b", 0, ok3, v3, 2, 0);
    reply_batch("b", 0, ok3, v3, 3, 999);
    tem_core_get_stats(fx.core, &st);
    ck_assert_uint_eq(st.replies_stale, 5);
    ck_assert_uint_eq(fx.n_alerts, 0);

    /* b answers epoch 42: key 1 of svc OK 35, svc2 NOT_YET, key 2 NO_GROUP;
     * c answers 20, 25, 10. */
    uint8_t sb[3] = { TRUMPET__POLL_STATUS__POLL_OK,
                      TRUMPET__POLL_STATUS__POLL_NOT_YET,
                      TRUMPET__POLL_STATUS__POLL_NO_GROUP };
    reply_batch("b", 0, sb, v3, 3, 0);
    ck_assert_uint_eq(fx.n_alerts, 0);
    uint8_t sc[3] = { 0, 0, 0 };
    double vc[3] = { 20, 25, 10 };
    reply_batch("c", 0, sc, vc, 3, 0);
    /* svc key 1: 40 + 35 + 20 = 95 > 90; key 2: 40 + 0 + 10 = 50. */
    ck_assert_uint_eq(fx.n_alerts, 1);
    struct json_object *a = alert(0);
    ck_assert_str_eq(json_object_get_string(field(a, "event")), "svc");
    ck_assert_double_eq(json_object_get_double(field(a, "value")), 95);
    ck_assert_double_eq(host_value(a, "b"), 35);
    json_object_put(a);
    /* The same reply again: every entry stale. */
    reply_batch("c", 0, sc, vc, 3, 0);
    tem_core_get_stats(fx.core, &st);
    ck_assert_uint_eq(st.replies_stale, 8);

    /* svc2 on b is asked again, in a batch of its own. */
    fx_clear_sent();
    fx.now += MS;
    step();
    ck_assert_uint_eq(count_sent("p-b", TRUMPET__MESSAGE__BODY_POLL_BATCH),
                      1);
    pb = get_sent("p-b", TRUMPET__MESSAGE__BODY_POLL_BATCH, 0)->poll_batch;
    ck_assert_uint_eq(pb->n_event_ids, 1);
    ck_assert_uint_eq(pb->event_ids[0], id2);
    ck_assert_uint_eq(pb->epoch, EP(42));
    uint8_t s1[1] = { 0 };
    double v1[1] = { 6 };
    reply_batch("b", 0, s1, v1, 1, 0);
    /* svc2: 30 + 6 + 25 = 61 > 60. */
    ck_assert_uint_eq(fx.n_alerts, 2);
    a = alert(1);
    ck_assert_str_eq(json_object_get_string(field(a, "event")), "svc2");
    ck_assert_double_eq(json_object_get_double(field(a, "value")), 61);
    json_object_put(a);
    tproto_batch_destroy(&b);
}
END_TEST

/* Hosts of protocol versions 2 and 3 side by side: the old one gets a Poll
 * per entry, the new one a PollBatch; both answers count. */
START_TEST(test_poll_mixed_versions)
{
    hello("a", "10.1.0.0/24");
    hello("b", "10.1.1.0/24");
    fx_hello_version = TPROTO_VERSION_POLL_BATCH;
    hello("c", "10.1.2.0/24");
    ck_assert_uint_eq(get_sent("p-b", TRUMPET__MESSAGE__BODY_WELCOME,
                               0)->welcome->version, 2);
    ck_assert_uint_eq(get_sent("p-c", TRUMPET__MESSAGE__BODY_WELCOME,
                               0)->welcome->version,
                      TPROTO_VERSION_POLL_BATCH);
    uint32_t id = add_event("svc", "filter=ip predicate=sum(volume) > 90 "
                            "group=nw_dst");
    ack_installs("a");
    ack_installs("b");
    ack_installs("c");
    fx_clear_sent();

    satisfy("a", id, 7, "10.1.0.7", 40);
    ck_assert_uint_eq(count_sent("p-b", TRUMPET__MESSAGE__BODY_POLL), 1);
    ck_assert_uint_eq(count_sent("p-b", TRUMPET__MESSAGE__BODY_POLL_BATCH),
                      0);
    ck_assert_uint_eq(count_sent("p-c", TRUMPET__MESSAGE__BODY_POLL), 0);
    ck_assert_uint_eq(count_sent("p-c", TRUMPET__MESSAGE__BODY_POLL_BATCH),
                      1);
    reply("b", 0, TRUMPET__POLL_STATUS__POLL_OK, 30);
    uint8_t s1[1] = { 0 };
    double v1[1] = { 21 };
    reply_batch("c", 0, s1, v1, 1, 0);
    ck_assert_uint_eq(fx.n_alerts, 1);
    struct json_object *a = alert(0);
    ck_assert_double_eq(json_object_get_double(field(a, "value")), 91);
    ck_assert_double_eq(host_value(a, "b"), 30);
    ck_assert_double_eq(host_value(a, "c"), 21);
    json_object_put(a);

    /* c goes away with a batch out: its part is missing, the decision
     * made without waiting for the deadline. */
    fx_clear_sent();
    satisfy("a", id, 8, "10.1.0.7", 95);
    ck_assert_uint_eq(count_sent("p-c", TRUMPET__MESSAGE__BODY_POLL_BATCH),
                      1);
    reply("b", 0, TRUMPET__POLL_STATUS__POLL_OK, 1);
    struct tproto_batch b;
    tproto_batch_init(&b);
    tproto_add_bye(&b, "test");
    input("p-c", &b);
    tproto_batch_destroy(&b);
    ck_assert_uint_eq(fx.n_alerts, 2);
    a = alert(1);
    char *missing = joined(a, "missing");
    ck_assert_str_eq(missing, "c");
    free(missing);
    json_object_put(a);
}
END_TEST

static struct tem_stats stats(void);

/* Sends host 'id''s satisfaction of 'event' for the group 'dst' of
 * tenant 'vni'. */
static void
satisfy_tenant(const char *id, uint32_t event, uint64_t epoch,
               const char *dst, uint32_t vni, double value)
{
    char peer[64];
    struct tproto_batch b;
    struct tpm_key k = group_key(dst);
    k.tun = 1;
    snprintf(peer, sizeof peer, "p-%s", id);
    tproto_batch_init(&b);
    tproto_add_satisfaction(&b, event, fx_epoch(epoch), &k, value, 0, 1, 0);
    tproto_set_tun_id(&b, vni);
    input(peer, &b);
    tproto_batch_destroy(&b);
}

/* The alert of 'event' whose group is tenant 'vni''s (0: no tenant's). */
static struct json_object *
tenant_alert(const char *event, uint32_t vni)
{
    for (size_t i = 0; i < fx.n_alerts; i++) {
        struct json_object *a = alert(i), *t;
        bool has = json_object_object_get_ex(field(a, "group"), "tun_id",
                                             &t);
        if (!strcmp(json_object_get_string(field(a, "event")), event)
            && has == (vni != 0)
            && (!has || json_object_get_int64(t) == vni)) {
            return a;
        }
        json_object_put(a);
    }
    ck_abort_msg("no alert of %s for tenant %"PRIu32, event, vni);
    return NULL;
}

static size_t check_exposition(const char *text);
static double sample_value(const char *text, const char *sample);

/* Protocol version 4: a network-wide event over two hosts that see two
 * tenants with the same 5-tuple (and its untunnelled traffic): one
 * decision, poll and alert per tenant, each value exact; a host of an
 * older version is never asked for a tenant (missing), only for the
 * untunnelled group. */
START_TEST(test_tenants)
{
    fx_hello_version = TPROTO_VERSION_TENANT;
    hello("a", "10.1.0.0/24");
    hello("b", "10.1.1.0/24");
    fx_hello_version = TPROTO_VERSION_POLL_BATCH;
    hello("c", "10.1.2.0/24");
    ck_assert_uint_eq(get_sent("p-a", TRUMPET__MESSAGE__BODY_WELCOME,
                               0)->welcome->version, TPROTO_VERSION_TENANT);
    uint32_t id = add_event("ten", "filter=ip predicate=sum(volume) > 90 "
                            "group=tun_id,nw_dst");
    ack_installs("a");
    ack_installs("b");
    ack_installs("c");
    fx_clear_sent();

    /* a, in one frame: tenants 100 and 200 and the untunnelled traffic,
     * one 5-tuple. */
    struct tpm_key k = group_key("10.1.0.7"), kt = k, got;
    kt.tun = 1;
    struct tproto_batch b;
    tproto_batch_init(&b);
    tproto_add_satisfaction(&b, id, fx_epoch(42), &kt, 60, 0, 1, 0);
    tproto_set_tun_id(&b, 100);
    tproto_add_satisfaction(&b, id, fx_epoch(42), &kt, 80, 0, 1, 0);
    tproto_set_tun_id(&b, 200);
    tproto_add_satisfaction(&b, id, fx_epoch(42), &k, 50, 0, 1, 0);
    input("p-a", &b);
    tproto_batch_destroy(&b);
    ck_assert_uint_eq(count_sent("p-b", TRUMPET__MESSAGE__BODY_POLL_BATCH),
                      1);
    const Trumpet__PollBatch *pb = get_sent(
        "p-b", TRUMPET__MESSAGE__BODY_POLL_BATCH, 0)->poll_batch;
    ck_assert_uint_eq(pb->n_event_ids, 3);
    ck_assert_uint_eq(pb->n_tun_ids, 3);
    ck_assert_uint_eq(pb->tun_ids[0], 101);
    ck_assert_uint_eq(pb->tun_ids[1], 201);
    ck_assert_uint_eq(pb->tun_ids[2], 0);
    for (size_t i = 0; i < 3; i++) {
        got = batch_key(pb, i);
        ck_assert(tpm_key_equal(&got, &k));
    }
    /* c (version 3) only for the untunnelled group, in a batch without
     * tun_ids. */
    ck_assert_uint_eq(count_sent("p-c", TRUMPET__MESSAGE__BODY_POLL_BATCH),
                      1);
    pb = get_sent("p-c", TRUMPET__MESSAGE__BODY_POLL_BATCH, 0)->poll_batch;
    ck_assert_uint_eq(pb->n_event_ids, 1);
    ck_assert_uint_eq(pb->n_tun_ids, 0);
    ck_assert_uint_eq(stats().tenant_old_hosts, 2);

    uint8_t ok3[3] = { 0, 0, 0 };
    double vb[3] = { 35, 30, 10 };
    reply_batch("b", 0, ok3, vb, 3, 0);
    ck_assert_uint_eq(fx.n_alerts, 2);
    double vc[1] = { 45 };
    reply_batch("c", 0, ok3, vc, 1, 0);
    ck_assert_uint_eq(fx.n_alerts, 3);

    /* Tenant 100: 60 + 35; tenant 200: 80 + 30; c missing from both. */
    struct json_object *a = tenant_alert("ten", 100);
    ck_assert_double_eq(json_object_get_double(field(a, "value")), 95);
    ck_assert_double_eq(host_value(a, "a"), 60);
    ck_assert_double_eq(host_value(a, "b"), 35);
    ck_assert_str_eq(json_object_get_string(field(field(a, "group"),
                                                  "nw_dst")), "10.1.0.7");
    char *missing = joined(a, "missing");
    ck_assert_str_eq(missing, "c");
    free(missing);
    json_object_put(a);
    a = tenant_alert("ten", 200);
    ck_assert_double_eq(json_object_get_double(field(a, "value")), 110);
    ck_assert_double_eq(host_value(a, "a"), 80);
    ck_assert_double_eq(host_value(a, "b"), 30);
    json_object_put(a);
    /* The untunnelled group: 50 + 10 + 45, every host. */
    a = tenant_alert("ten", 0);
    ck_assert_double_eq(json_object_get_double(field(a, "value")), 105);
    ck_assert_double_eq(host_value(a, "c"), 45);
    missing = joined(a, "missing");
    ck_assert_str_eq(missing, "");
    free(missing);
    json_object_put(a);

    /* "alerts" narrowed by the group's tenant (tem-ctl alerts --tun-id). */
    static const struct {
        uint32_t vni;
        double value;
    } by_tenant[] = { { 100, 95 }, { 200, 110 } };
    for (size_t i = 0; i < ARRAY_SIZE(by_tenant); i++) {
        struct json_object *r = tem_core_alerts_json(fx.core, NULL,
                                                     &by_tenant[i].vni, 100);
        struct json_object *list = field(r, "alerts");
        ck_assert_uint_eq(json_object_array_length(list), 1);
        a = json_object_array_get_idx(list, 0);
        ck_assert_double_eq(json_object_get_double(field(a, "value")),
                            by_tenant[i].value);
        json_object_put(r);
    }
    uint32_t none = 300;
    struct json_object *r = tem_core_alerts_json(fx.core, "ten", &none, 100);
    ck_assert_uint_eq(json_object_array_length(field(r, "alerts")), 0);
    json_object_put(r);
    r = tem_core_alerts_json(fx.core, "ten", NULL, 100);
    ck_assert_uint_eq(json_object_array_length(field(r, "alerts")), 3);
    json_object_put(r);

    /* b satisfies tenant 200 itself in the next epoch; a is polled for
     * it, in a PollBatch naming the tenant again. */
    fx_clear_sent();
    fx_clear_alerts();
    satisfy_tenant("b", id, 43, "10.1.0.7", 200, 95);
    ck_assert_uint_eq(count_sent("p-c", TRUMPET__MESSAGE__BODY_POLL_BATCH),
                      0);
    pb = get_sent("p-a", TRUMPET__MESSAGE__BODY_POLL_BATCH, 0)->poll_batch;
    ck_assert_uint_eq(pb->n_tun_ids, 1);
    ck_assert_uint_eq(pb->tun_ids[0], 201);
    double va[1] = { 1 };
    reply_batch("a", 0, ok3, va, 1, 0);
    ck_assert_uint_eq(fx.n_alerts, 1);
    a = tenant_alert("ten", 200);
    ck_assert_double_eq(json_object_get_double(field(a, "value")), 96);
    json_object_put(a);
    ck_assert_uint_eq(stats().tenant_old_hosts, 3);
    ck_assert_uint_eq(stats().sat_unknown, 0);

    /* Both tenant counters in the metrics. */
    struct tem_metrics m;
    tem_metrics_init(&m);
    tem_core_metrics(fx.core, &m);
    ck_assert_uint_gt(check_exposition(m.b.s), 50);
    ck_assert_double_eq(sample_value(
        m.b.s, "trumpet_tem_tenant_old_hosts_total"), 3);
    ck_assert_double_eq(sample_value(
        m.b.s, "trumpet_tem_satisfactions_tenants_full_total"), 0);
    tem_metrics_destroy(&m);
}
END_TEST

static struct tem_stats
stats(void)
{
    struct tem_stats s;
    tem_core_get_stats(fx.core, &s);
    return s;
}

static size_t check_exposition(const char *text);
static double sample_value(const char *text, const char *sample);

/* Answers the one entry of the 'k'th PollBatch sent to host 'id'. */
static void
reply1(const char *id, size_t k, Trumpet__PollStatus status, double value)
{
    uint8_t s = status;
    reply_batch(id, k, &s, &value, 1, 0);
}

/* A satisfaction of host 'id' with sequence number 'seq', flagged
 * 'late', and, if late, the loop turn that decides it. */
static void
satisfy_seq(const char *id, uint32_t event, uint64_t epoch, const char *dst,
            double value, uint64_t seq, bool late)
{
    char peer[64];
    struct tproto_batch b;
    struct tpm_key k = group_key(dst);
    snprintf(peer, sizeof peer, "p-%s", id);
    tproto_batch_init(&b);
    tproto_add_satisfaction(&b, event, fx_epoch(epoch), &k, value, 0, 1, 0);
    tproto_set_seq(&b, seq, late);
    input(peer, &b);
    tproto_batch_destroy(&b);
    if (late) {
        step();                 /* Late ones wait for the timers' turn. */
    }
}

/* The last Heartbeat.received sent to 'peer' since fx_clear_sent() (0:
 * none). */
static uint64_t
last_received(const char *peer)
{
    uint64_t received = 0;
    size_t n = count_sent(peer, TRUMPET__MESSAGE__BODY_HEARTBEAT);
    for (size_t i = 0; i < n; i++) {
        const Trumpet__Heartbeat *h
            = get_sent(peer, TRUMPET__MESSAGE__BODY_HEARTBEAT, i)->heartbeat;
        if (h->has_received) {
            received = h->received;
        }
    }
    return received;
}

/* Satisfactions and poll replies numbered by their hosts' agents, some
 * sent late (after an outage of the TEM): duplicates dropped, gaps
 * counted, late ones decided where they can be ("late":true) and counted
 * undecidable where the other hosts' history expired; late poll replies
 * unused. */
START_TEST(test_late_reports)
{
    fx_hello_version = TPROTO_VERSION_CONFIRM;
    hello_run("a", "10.1.0.0/24", 7);
    hello_run("b", "10.1.1.0/24", 8);
    hello_run("c", "10.1.2.0/24", 9);
    uint32_t id = add_event("svc", "filter=ip predicate=sum(volume) > 90 "
                            "group=nw_dst");
    ack_installs("a");
    ack_installs("b");
    ack_installs("c");
    fx_clear_sent();

    /* A late satisfaction over the whole threshold: the other hosts'
     * history of the epoch expired, yet it holds.  Its host is told it
     * arrived once it is decided (a TEM that stopped before would not
     * have decided it: the host would send it again). */
    satisfy_seq("a", id, 42, "10.1.0.7", 95, 1, true);
    ck_assert_uint_eq(last_received("p-a"), 0);
    reply1("b", 0, TRUMPET__POLL_STATUS__POLL_EXPIRED, 0);
    ck_assert_uint_eq(last_received("p-a"), 0);
    reply1("c", 0, TRUMPET__POLL_STATUS__POLL_EXPIRED, 0);
    ck_assert_uint_eq(last_received("p-a"), 1);
    ck_assert_uint_eq(fx.n_alerts, 1);
    struct json_object *a = alert(0);
    ck_assert(json_object_get_boolean(field(a, "late")));
    ck_assert_double_eq(json_object_get_double(field(a, "value")), 95);
    char *missing = joined(a, "missing");
    ck_assert_str_eq(missing, "b,c");
    free(missing);
    json_object_put(a);
    struct tem_stats st = stats();
    ck_assert_uint_eq(st.reports_late, 1);
    ck_assert_uint_eq(st.alerts_late, 1);
    ck_assert_uint_eq(st.late_undecidable, 0);
    ck_assert_uint_eq(st.satisfactions, 1);

    /* The same again (its confirmation was lost): dropped, confirmed. */
    fx_clear_sent();
    satisfy_seq("a", id, 42, "10.1.0.7", 95, 1, true);
    st = stats();
    ck_assert_uint_eq(st.reports_dup, 1);
    ck_assert_uint_eq(st.satisfactions, 1);
    ck_assert_uint_eq(st.decisions, 1);
    ck_assert_uint_eq(count_sent(NULL, TRUMPET__MESSAGE__BODY_POLL_BATCH),
                      0);
    ck_assert_uint_eq(last_received("p-a"), 1);

    /* A late satisfaction of a split threshold, below the whole: the
     * others' history expired (or their trigger is gone), so the epoch
     * cannot be decided.  No alert; counted; logged. */
    satisfy_seq("a", id, 43, "10.1.0.7", 40, 2, true);
    reply1("b", 0, TRUMPET__POLL_STATUS__POLL_EXPIRED, 0);
    reply1("c", 0, TRUMPET__POLL_STATUS__POLL_NO_EVENT, 0);
    ck_assert_uint_eq(fx.n_alerts, 1);
    ck_assert_uint_eq(stats().late_undecidable, 1);
    char *e2 = NULL;
    struct json_object *o = tem_core_event_show_json(fx.core, "svc", &e2);
    ck_assert_int_eq(json_object_get_int64(field(field(o, "stats"),
                                                 "undecidable")), 1);
    json_object_put(o);

    /* The same, not late: missing hosts are nothing new. */
    fx_clear_sent();
    satisfy_seq("a", id, 44, "10.1.0.7", 40, 3, false);
    reply1("b", 0, TRUMPET__POLL_STATUS__POLL_EXPIRED, 0);
    reply1("c", 0, TRUMPET__POLL_STATUS__POLL_EXPIRED, 0);
    ck_assert_uint_eq(stats().late_undecidable, 1);
    ck_assert_uint_eq(fx.n_alerts, 1);

    /* Late, below the threshold with every host answering: still no
     * "no" (hosts of that epoch may be gone or not back yet). */
    fx_clear_sent();
    satisfy_seq("a", id, 44, "10.1.0.8", 40, 4, true);
    reply1("b", 0, TRUMPET__POLL_STATUS__POLL_OK, 10);
    reply1("c", 0, TRUMPET__POLL_STATUS__POLL_NO_GROUP, 0);
    ck_assert_uint_eq(stats().late_undecidable, 2);
    ck_assert_uint_eq(fx.n_alerts, 1);

    /* Late, and the others still have the epoch: decided as usual. */
    fx_clear_sent();
    satisfy_seq("a", id, 45, "10.1.0.7", 40, 5, true);
    reply1("b", 0, TRUMPET__POLL_STATUS__POLL_OK, 35);
    reply1("c", 0, TRUMPET__POLL_STATUS__POLL_OK, 20);
    ck_assert_uint_eq(fx.n_alerts, 2);
    a = alert(1);
    ck_assert(json_object_get_boolean(field(a, "late")));
    ck_assert_double_eq(json_object_get_double(field(a, "value")), 95);
    ck_assert_uint_eq(json_object_array_length(field(a, "missing")), 0);
    json_object_put(a);
    ck_assert_uint_eq(stats().alerts_late, 2);

    /* 6 and 7 never come: the host dropped them. */
    fx_clear_sent();
    satisfy_seq("a", id, 46, "10.1.0.7", 95, 8, false);
    ck_assert_uint_eq(stats().reports_skipped, 2);
    ck_assert_uint_eq(last_received("p-a"), 7);
    reply1("b", 0, TRUMPET__POLL_STATUS__POLL_OK, 0);
    reply1("c", 0, TRUMPET__POLL_STATUS__POLL_OK, 0);
    ck_assert_uint_eq(last_received("p-a"), 8);
    ck_assert_uint_eq(fx.n_alerts, 3);
    a = alert(2);
    ck_assert(!json_object_get_boolean(field(a, "late")));
    json_object_put(a);

    /* A late PollReply answers a Poll of a session that ended (one of
     * version 2: a session of version 3 polls by PollBatch): its decision
     * counted that host missing then.  Unused, counted. */
    fx_clear_sent();
    satisfy("b", id, 47, "10.1.0.7", 40);
    {
        struct tproto_batch b;
        const Trumpet__PollBatch *p = get_sent(
            "p-a", TRUMPET__MESSAGE__BODY_POLL_BATCH, 0)->poll_batch;
        tproto_batch_init(&b);
        tproto_add_poll_reply(&b, p->cookie, p->event_ids[0], p->epoch,
                              TRUMPET__POLL_STATUS__POLL_OK, 60);
        tproto_set_seq(&b, 9, true);
        input("p-a", &b);
        tproto_batch_destroy(&b);
    }
    st = stats();
    ck_assert_uint_eq(st.replies_stale, 1);
    ck_assert_uint_eq(st.reports_late, 5);
    ck_assert_uint_eq(last_received("p-a"), 9);
    reply1("c", 0, TRUMPET__POLL_STATUS__POLL_OK, 60);
    ck_assert_uint_eq(fx.n_alerts, 3);      /* a still waited for. */
    fx.now += 100 * MS;
    step();
    ck_assert_uint_eq(fx.n_alerts, 4);
    a = alert(3);
    missing = joined(a, "missing");
    ck_assert_str_eq(missing, "a");
    free(missing);
    ck_assert(!json_object_get_boolean(field(a, "late")));
    json_object_put(a);

    /* A new session of the same run: its Welcome says what arrived, and
     * what arrived before is dropped. */
    fx_clear_sent();
    hello_run("a", "10.1.0.0/24", 7);
    ck_assert_uint_eq(last_received("p-a"), 9);
    ack_installs("a");
    satisfy_seq("a", id, 48, "10.1.0.7", 95, 9, true);
    ck_assert_uint_eq(stats().reports_dup, 2);
    /* A new run of its agent counts from 1. */
    fx_clear_sent();
    hello_run("a", "10.1.0.0/24", 70);
    ck_assert_uint_eq(last_received("p-a"), 0);
    ack_installs("a");
    uint64_t n = stats().satisfactions;
    satisfy_seq("a", id, 49, "10.1.0.7", 95, 1, false);
    ck_assert_uint_eq(stats().satisfactions, n + 1);
    ck_assert_uint_eq(stats().reports_dup, 2);
    ck_assert_uint_eq(last_received("p-a"), 0);
    fx.now += 100 * MS;
    step();
    ck_assert_uint_eq(last_received("p-a"), 1);

    /* The TEM stops with a decision pending: its satisfaction is not
     * confirmed in the last word to the host. */
    fx_clear_sent();
    satisfy_seq("a", id, 50, "10.1.0.7", 95, 2, false);
    tem_core_bye_all(fx.core, "stopping");
    tem_core_flush(fx.core);
    ck_assert_uint_eq(count_sent("p-a", TRUMPET__MESSAGE__BODY_BYE), 1);
    ck_assert_uint_lt(last_received("p-a"), 2);   /* 1: it knows. */

    /* In the metrics. */
    struct tem_metrics m;
    tem_metrics_init(&m);
    tem_core_metrics(fx.core, &m);
    ck_assert_uint_gt(check_exposition(m.b.s), 50);
    ck_assert_double_eq(sample_value(
        m.b.s, "trumpet_tem_decisions_undecidable_total"), 2);
    ck_assert_double_eq(sample_value(m.b.s,
                                     "trumpet_tem_alerts_late_total"), 2);
    ck_assert_double_eq(sample_value(
        m.b.s, "trumpet_tem_reports_duplicate_total"), 2);
    ck_assert_double_eq(sample_value(m.b.s,
                                     "trumpet_tem_reports_skipped_total"), 2);
    ck_assert_double_eq(sample_value(m.b.s,
                                     "trumpet_tem_reports_late_total"), 5);
    ck_assert_double_eq(sample_value(
        m.b.s, "trumpet_tem_host_reports_late_total{host=\"a\"}"), 5);
    tem_metrics_destroy(&m);
}
END_TEST

/* The heartbeat telling a host what arrived goes at the end of its batch:
 * with the batch full (TPROTO_MAX_BATCH messages, here PollBatches of as
 * many epochs), the batch goes first and the heartbeat in a frame of its
 * own, never in a frame the host would refuse as too long (capture_send()
 * decodes every frame). */
START_TEST(test_received_full_batch)
{
    fx_hello_version = TPROTO_VERSION_CONFIRM;
    hello_run("a", "10.1.0.0/24", 7);
    hello_run("b", "10.1.1.0/24", 8);
    uint32_t id = add_event("svc", "filter=ip predicate=sum(volume) > 90 "
                            "group=nw_dst");
    ack_installs("a");
    ack_installs("b");
    fx_clear_sent();

    /* a's report 1 (an unknown event: taken, nothing to decide), then b's
     * satisfactions of TPROTO_MAX_BATCH epochs, each polling a, all before
     * one flush. */
    struct tproto_batch b;
    struct tpm_key k = group_key("10.1.1.7");
    uint8_t *data;
    size_t len;
    tproto_batch_init(&b);
    tproto_add_satisfaction(&b, 999, fx_epoch(1), &k, 1, 0, 1, 0);
    tproto_set_seq(&b, 1, false);
    len = tproto_batch_encode(&b, 0, &data);
    tem_core_input(fx.core, "p-a", 3, data, len);
    free(data);
    tproto_batch_clear(&b);
    for (uint64_t e = 1; e <= TPROTO_MAX_BATCH; e++) {
        tproto_add_satisfaction(&b, id, fx_epoch(e), &k, 50, 0, 1, 0);
    }
    len = tproto_batch_encode(&b, 0, &data);
    tem_core_input(fx.core, "p-b", 3, data, len);
    free(data);
    tproto_batch_destroy(&b);
    tem_core_flush(fx.core);

    ck_assert_uint_eq(count_sent("p-a", TRUMPET__MESSAGE__BODY_POLL_BATCH),
                      TPROTO_MAX_BATCH);
    ck_assert_uint_eq(last_received("p-a"), 1);
    size_t frames = 0;
    for (size_t i = 0; i < fx.n_sent; i++) {
        frames += !strcmp(fx.sent[i].peer, "p-a");
    }
    ck_assert_uint_eq(frames, 2);
}
END_TEST

START_TEST(test_poll_not_yet)
{
    uint32_t id = sum_event();

    satisfy("a", id, 9, "10.1.0.7", 40);
    tem_core_flush(fx.core);
    reply("b", 0, TRUMPET__POLL_STATUS__POLL_NOT_YET, 0);
    reply("c", 0, TRUMPET__POLL_STATUS__POLL_OK, 30);
    ck_assert_uint_eq(fx.n_alerts, 0);

    /* Re-polled after the re-poll delay with the same cookie. */
    fx.now += MS / 2;
    step();
    ck_assert_uint_eq(count_sent("p-b", TRUMPET__MESSAGE__BODY_POLL), 1);
    fx.now += MS / 2;
    step();
    ck_assert_uint_eq(count_sent("p-b", TRUMPET__MESSAGE__BODY_POLL), 2);
    ck_assert_uint_eq(get_sent("p-b", TRUMPET__MESSAGE__BODY_POLL,
                               1)->poll->cookie,
                      get_sent("p-b", TRUMPET__MESSAGE__BODY_POLL,
                               0)->poll->cookie);
    reply("b", 1, TRUMPET__POLL_STATUS__POLL_OK, 25);
    ck_assert_uint_eq(fx.n_alerts, 1);
    struct json_object *a = alert(0);
    ck_assert_double_eq(json_object_get_double(field(a, "value")), 95);
    ck_assert(!json_object_get_boolean(field(a, "deadline")));
    ck_assert_int_eq(json_object_get_int64(field(a, "latency_us")), 1000);
    json_object_put(a);
}
END_TEST

START_TEST(test_poll_deadline)
{
    uint32_t id = sum_event();

    satisfy("a", id, 9, "10.1.0.7", 70);
    tem_core_flush(fx.core);
    reply("b", 0, TRUMPET__POLL_STATUS__POLL_OK, 25);
    fx.now += 99 * MS;
    step();
    ck_assert_uint_eq(fx.n_alerts, 0);
    fx.now += MS;
    step();
    ck_assert_uint_eq(fx.n_alerts, 1);
    struct json_object *a = alert(0);
    ck_assert_double_eq(json_object_get_double(field(a, "value")), 95);
    ck_assert(json_object_get_boolean(field(a, "deadline")));
    char *missing = joined(a, "missing");
    ck_assert_str_eq(missing, "c");
    free(missing);
    ck_assert(!json_object_object_get_ex(field(a, "hosts"), "c", NULL));
    json_object_put(a);

    /* c's answer after the decision is stale. */
    reply("c", 0, TRUMPET__POLL_STATUS__POLL_OK, 1);
    struct tem_stats st;
    tem_core_get_stats(fx.core, &st);
    ck_assert_uint_eq(st.replies_stale, 1);
    ck_assert_uint_eq(st.decided_deadline, 1);
    ck_assert_uint_eq(st.missing_parts, 1);

    /* Expired and no-event answers count as missing at once. */
    satisfy("a", id, 10, "10.1.0.7", 100);
    tem_core_flush(fx.core);
    reply("b", 1, TRUMPET__POLL_STATUS__POLL_EXPIRED, 0);
    reply("c", 1, TRUMPET__POLL_STATUS__POLL_NO_EVENT, 0);
    ck_assert_uint_eq(fx.n_alerts, 2);
    a = alert(1);
    missing = joined(a, "missing");
    ck_assert_str_eq(missing, "b,c");
    free(missing);
    ck_assert(!json_object_get_boolean(field(a, "deadline")));
    json_object_put(a);
}
END_TEST

/* A heartbeat from host 'id'. */
static void
host_heartbeat(const char *id)
{
    char peer[64];
    struct tproto_batch b;
    snprintf(peer, sizeof peer, "p-%s", id);
    tproto_batch_init(&b);
    tproto_add_heartbeat(&b, fx.now, 1);
    input(peer, &b);
    tproto_batch_destroy(&b);
}

/* The wall clock steps an hour forward, then two back, while a decision
 * waits and the hosts are quiet: no timer moves.  The decision is made at
 * its deadline on the monotonic clock, neither before nor after, and the
 * hosts go at 3 heartbeat periods of silence on it; the moments told to
 * others (the alert's time, Welcome's and the heartbeats' clock) follow
 * the wall clock, the alert's latency the monotonic one. */
START_TEST(test_clock_real_step)
{
    uint32_t id = sum_event();
    uint64_t ts = fx.now;       /* The hosts' Hellos, c's last frame. */

    satisfy("a", id, 9, "10.1.0.7", 70);
    uint64_t t0 = fx.now;       /* The decision starts, a's last frame. */
    fx.real_offset = 3600 * 1000 * MS;
    step();
    fx.real_offset = -3600 * 1000 * (int64_t) MS;
    step();
    /* b answers while the wall clock is right (the TEM refuses reports of
     * epochs far from its wall clock: a step refuses the hosts' reports
     * until their clocks agree, but moves no timer). */
    fx.real_offset = 0;
    fx.now = t0 + 50 * MS;
    reply("b", 0, TRUMPET__POLL_STATUS__POLL_OK, 25);
    fx.real_offset = 3600 * 1000 * MS;
    fx.now = t0 + 99 * MS;
    step();
    ck_assert_uint_eq(fx.n_alerts, 0);

    fx.real_offset = -7200 * 1000 * (int64_t) MS;
    fx.now = t0 + 100 * MS;
    step();
    ck_assert_uint_eq(fx.n_alerts, 1);
    struct json_object *a = alert(0);
    ck_assert_double_eq(json_object_get_double(field(a, "value")), 95);
    ck_assert(json_object_get_boolean(field(a, "deadline")));
    ck_assert_int_eq(json_object_get_int64(field(a, "latency_us")), 100000);
    ck_assert_uint_eq(json_object_get_uint64(field(a, "time_ns")),
                      fx.now + fx.real_offset);
    json_object_put(a);

    /* The TEM's heartbeats carry the wall clock, and go on the monotonic
     * one's schedule: due 1 s after the Hellos. */
    fx_clear_sent();
    fx.now = ts + 999 * MS;
    step();
    ck_assert_uint_eq(count_sent("p-a", TRUMPET__MESSAGE__BODY_HEARTBEAT), 0);
    fx.now = ts + 1000 * MS;
    step();
    ck_assert_uint_eq(count_sent("p-a", TRUMPET__MESSAGE__BODY_HEARTBEAT), 1);
    ck_assert_uint_eq(get_sent("p-a", TRUMPET__MESSAGE__BODY_HEARTBEAT,
                               0)->heartbeat->clock_ns,
                      fx.now + fx.real_offset);

    /* Silence: c last spoke at ts, a at t0, b at t0 + 50 ms; each goes
     * 3 s later on the monotonic clock, a day's steps notwithstanding. */
    const struct {
        const uint64_t *base;
        uint64_t ms;
        uint64_t gone;
    } checks[] = {
        { &ts, 2999, 0 }, { &ts, 3000, 1 }, { &t0, 2999, 1 },
        { &t0, 3000, 2 }, { &t0, 3049, 2 }, { &t0, 3050, 3 },
    };
    for (size_t i = 0; i < ARRAY_SIZE(checks); i++) {
        struct tem_stats st;
        fx.now = *checks[i].base + checks[i].ms * MS;
        fx.real_offset = 24 * 3600 * 1000 * MS;
        step();
        fx.real_offset = -24 * 3600 * 1000 * (int64_t) MS;
        step();
        tem_core_get_stats(fx.core, &st);
        ck_assert_msg(st.hosts_gone == checks[i].gone, "check %zu: %"PRIu64
                      " hosts gone, expected %"PRIu64, i, st.hosts_gone,
                      checks[i].gone);
    }

    /* Welcome tells the wall clock. */
    fx_clear_sent();
    hello("d", NULL);
    ck_assert_uint_eq(get_sent("p-d", TRUMPET__MESSAGE__BODY_WELCOME,
                               0)->welcome->clock_ns,
                      fx.now + fx.real_offset);
}
END_TEST

/* The caller's loop overran by 3.5 s (the TEM was stopped) while c's
 * answer, sent in time, waited in its queue: the decision's deadline and
 * the hosts' silence were extended by the overrun and the grace, so the
 * timers that ran first decided nothing and dropped no host, and the
 * answer read after them completes the decision.  The extension is
 * exact: a deadline passes at its time plus the overrun plus the
 * grace. */
START_TEST(test_overrun)
{
    uint32_t id = sum_event();
    struct tem_stats st;

    satisfy("a", id, 9, "10.1.0.7", 70);
    uint64_t t0 = fx.now;       /* The decision starts. */
    reply("b", 0, TRUMPET__POLL_STATUS__POLL_OK, 25);
    fx.now = t0 + 3600 * MS;
    tem_core_overrun(fx.core, 3500 * MS, 20 * MS);
    step();
    ck_assert_uint_eq(fx.n_alerts, 0);
    tem_core_get_stats(fx.core, &st);
    ck_assert_uint_eq(st.decided_deadline, 0);
    ck_assert_uint_eq(st.hosts_gone, 0);
    ck_assert_uint_eq(st.overruns, 1);
    ck_assert_uint_eq(st.overrun_ns, 3500 * MS);
    ck_assert_uint_eq(st.overrun_max_ns, 3500 * MS);

    reply("c", 0, TRUMPET__POLL_STATUS__POLL_OK, 20);
    ck_assert_uint_eq(fx.n_alerts, 1);
    struct json_object *a = alert(0);
    ck_assert_double_eq(json_object_get_double(field(a, "value")), 115);
    ck_assert(!json_object_get_boolean(field(a, "deadline")));
    ck_assert_uint_eq(json_object_array_length(field(a, "missing")), 0);
    /* The latency is what it was, the overrun included. */
    ck_assert_int_eq(json_object_get_int64(field(a, "latency_us")), 3600000);
    json_object_put(a);

    /* A deadline at t1 + 100 ms, an overrun of 1 s at t1 + 50 ms: the
     * deadline passes at t1 + 1120 ms, no sooner. */
    uint64_t t1 = fx.now;
    satisfy("a", id, 10, "10.1.0.7", 100);
    fx.now = t1 + 1050 * MS;
    tem_core_overrun(fx.core, 1000 * MS, 20 * MS);
    fx.now = t1 + 1119 * MS;
    step();
    ck_assert_uint_eq(fx.n_alerts, 1);
    fx.now = t1 + 1120 * MS;
    step();
    ck_assert_uint_eq(fx.n_alerts, 2);
    a = alert(1);
    char *missing = joined(a, "missing");
    ck_assert_str_eq(missing, "b,c");
    free(missing);
    ck_assert(json_object_get_boolean(field(a, "deadline")));
    json_object_put(a);
    tem_core_get_stats(fx.core, &st);
    ck_assert_uint_eq(st.overruns, 2);
    ck_assert_uint_eq(st.overrun_ns, 4500 * MS);
    ck_assert_uint_eq(st.overrun_max_ns, 3500 * MS);
}
END_TEST

/* The hosts' silence after an overrun: extended by the overrun and the
 * grace, then counted again from each host's next frame. */
START_TEST(test_overrun_hosts)
{
    uint64_t t0 = fx.now;
    struct tem_stats st;

    three_hosts();
    fx.now = t0 + 2900 * MS;
    step();
    tem_core_overrun(fx.core, 2000 * MS, 20 * MS);
    fx.now = t0 + 5019 * MS;
    step();
    tem_core_get_stats(fx.core, &st);
    ck_assert_uint_eq(st.hosts_gone, 0);
    host_heartbeat("a");
    fx.now = t0 + 5020 * MS;
    step();
    tem_core_get_stats(fx.core, &st);
    ck_assert_uint_eq(st.hosts_gone, 2);
    fx.now = t0 + 8018 * MS;
    step();
    tem_core_get_stats(fx.core, &st);
    ck_assert_uint_eq(st.hosts_gone, 2);
    fx.now = t0 + 8019 * MS;
    step();
    tem_core_get_stats(fx.core, &st);
    ck_assert_uint_eq(st.hosts_gone, 3);

    /* In the views, the time since a host's last frame is not moved. */
    struct json_object *o = tem_core_hosts_json(fx.core, NULL);
    struct json_object *hosts = field(o, "hosts");
    for (size_t i = 0; i < json_object_array_length(hosts); i++) {
        struct json_object *h = json_object_array_get_idx(hosts, i);
        const char *name = json_object_get_string(field(h, "host"));
        ck_assert_int_eq(json_object_get_int64(field(h, "last_rx_ms")),
                         !strcmp(name, "a") ? 3000 : 8019);
    }
    json_object_put(o);
}
END_TEST

/* Checks every line of 'text' against the Prometheus text format: HELP
 * and TYPE once per family and before its samples, metric and label names
 * and values by the format's grammar, counters ending in _total.  Returns
 * the number of samples. */
static size_t
check_exposition(const char *text)
{
    static const char *const patterns[] = {
        "^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) [^\n]*$",
        "^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) "
        "(counter|gauge|histogram|summary|untyped)$",
        "^([a-zA-Z_:][a-zA-Z0-9_:]*)"
        "(\\{[a-zA-Z_][a-zA-Z0-9_]*=\"([^\"\\\\]|\\\\[\\\\\"n])*\"\\})? "
        "(-?[0-9]+(\\.[0-9]+)?([eE][-+]?[0-9]+)?|[-+]Inf|NaN)$",
    };
    regex_t re[3];
    char family[256] = "", type[32] = "";
    bool help_seen = false;
    size_t n_samples = 0;

    for (size_t i = 0; i < 3; i++) {
        ck_assert_int_eq(regcomp(&re[i], patterns[i], REG_EXTENDED), 0);
    }
    ck_assert_msg(*text && text[strlen(text) - 1] == '\n',
                  "exposition does not end in a newline");
    char *copy = xstrdup(text), *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        regmatch_t m[2];
        char name[256];
        size_t k;
        for (k = 0; k < 3; k++) {
            if (!regexec(&re[k], line, 2, m, 0)) {
                break;
            }
        }
        ck_assert_msg(k < 3, "not Prometheus text: '%s'", line);
        snprintf(name, sizeof name, "%.*s", (int) (m[1].rm_eo - m[1].rm_so),
                 line + m[1].rm_so);
        ck_assert_msg(!strncmp(name, "trumpet_tem_", 12),
                      "no trumpet_tem_ prefix: '%s'", line);
        if (k == 0) {
            ck_assert_msg(strcmp(name, family), "HELP twice: '%s'", line);
            snprintf(family, sizeof family, "%s", name);
            help_seen = true;
            type[0] = '\0';
        } else if (k == 1) {
            ck_assert_msg(help_seen && !strcmp(name, family),
                          "TYPE without its HELP: '%s'", line);
            snprintf(type, sizeof type, "%s", strrchr(line, ' ') + 1);
            help_seen = false;
            size_t len = strlen(name);
            if (!strcmp(type, "counter")) {
                ck_assert_msg(len > 6 && !strcmp(name + len - 6, "_total"),
                              "counter without _total: '%s'", line);
            }
        } else {
            size_t flen = strlen(family);
            ck_assert_msg(type[0], "sample before its TYPE: '%s'", line);
            bool ok = !strcmp(name, family);
            if (!strcmp(type, "histogram") && !strncmp(name, family, flen)) {
                ok = (!strcmp(name + flen, "_bucket")
                      && strstr(line, "{le=\""))
                     || !strcmp(name + flen, "_sum")
                     || !strcmp(name + flen, "_count");
            }
            ck_assert_msg(ok, "sample of another family than %s: '%s'",
                          family, line);
            n_samples++;
        }
    }
    free(copy);
    for (size_t i = 0; i < 3; i++) {
        regfree(&re[i]);
    }
    return n_samples;
}

/* The value of sample 'sample' (name and labels as written) in 'text'. */
static double
sample_value(const char *text, const char *sample)
{
    size_t len = strlen(sample);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1
                                                                 : NULL) {
        if (!strncmp(p, sample, len) && p[len] == ' ') {
            return strtod(p + len + 1, NULL);
        }
    }
    ck_abort_msg("no sample %s", sample);
    return 0;
}

START_TEST(test_metrics)
{
    struct tem_metrics m;
    uint32_t id = sum_event();

    /* Two alerts: one at the poll deadline (latency 100 ms), one at
     * once. */
    satisfy("a", id, 9, "10.1.0.7", 70);
    tem_core_flush(fx.core);
    reply("b", 0, TRUMPET__POLL_STATUS__POLL_OK, 25);
    fx.now += 100 * MS;
    step();
    satisfy("a", id, 10, "10.1.0.7", 100);
    tem_core_flush(fx.core);
    reply("b", 1, TRUMPET__POLL_STATUS__POLL_EXPIRED, 0);
    reply("c", 1, TRUMPET__POLL_STATUS__POLL_NO_EVENT, 0);
    ck_assert_uint_eq(fx.n_alerts, 2);

    tem_metrics_init(&m);
    tem_core_metrics(fx.core, &m);
    ck_assert_uint_gt(check_exposition(m.b.s), 50);

    struct tem_stats st;
    tem_core_get_stats(fx.core, &st);
    ck_assert_double_eq(sample_value(m.b.s, "trumpet_tem_alerts_total"), 2);
    ck_assert_double_eq(sample_value(m.b.s, "trumpet_tem_satisfactions_total"),
                        st.satisfactions);
    ck_assert_double_eq(sample_value(m.b.s, "trumpet_tem_polls_sent_total"),
                        st.polls_sent);
    ck_assert_double_eq(sample_value(m.b.s, "trumpet_tem_poll_timeouts_total"),
                        st.missing_parts);
    ck_assert_double_eq(sample_value(m.b.s,
                                     "trumpet_tem_hosts{state=\"connected\"}"),
                        3);
    ck_assert_double_eq(sample_value(m.b.s, "trumpet_tem_events"), 1);
    ck_assert_double_eq(sample_value(
        m.b.s, "trumpet_tem_host_satisfactions_total{host=\"a\"}"), 2);
    ck_assert_double_eq(sample_value(
        m.b.s, "trumpet_tem_host_poll_replies_total{host=\"b\"}"), 2);
    ck_assert_double_eq(sample_value(
        m.b.s, "trumpet_tem_event_alerts_total{event=\"svc\"}"), 2);

    /* A host's monitor counters, carried by its heartbeat. */
    struct tproto_batch hb;
    struct tproto_host_counters c = {
        .packets = 123456789012ULL, .bytes = 7, .sweeps = 42,
        .sweeps_unfinished = 3, .reports = 11, .reports_dropped = 2,
        .dos_skipped = 5, .dos_passed = 1,
    };
    tproto_batch_init(&hb);
    tproto_add_heartbeat_counters(&hb, fx.now, 1, &c);
    input("p-a", &hb);
    tproto_batch_destroy(&hb);
    tem_metrics_clear(&m);
    tem_core_metrics(fx.core, &m);
    ck_assert_uint_gt(check_exposition(m.b.s), 50);
    static const struct {
        const char *name;
        double value;
    } mon[] = {
        { "packets_total", 123456789012.0 },
        { "bytes_total", 7 },
        { "sweeps_total", 42 },
        { "sweeps_unfinished_total", 3 },
        { "reports_total", 11 },
        { "reports_dropped_total", 2 },
        { "dos_skipped_packets_total", 5 },
        { "dos_passed_flows_total", 1 },
    };
    for (size_t i = 0; i < ARRAY_SIZE(mon); i++) {
        char name[128];
        snprintf(name, sizeof name,
                 "trumpet_tem_host_monitor_%s{host=\"a\"}", mon[i].name);
        ck_assert_double_eq(sample_value(m.b.s, name), mon[i].value);
        snprintf(name, sizeof name,
                 "trumpet_tem_host_monitor_%s{host=\"b\"}", mon[i].name);
        ck_assert_double_eq(sample_value(m.b.s, name), 0);
    }

    /* The histogram: 0 s and 0.1 s. */
    static const char h[] = "trumpet_tem_detection_latency_seconds";
    char buf[128];
    snprintf(buf, sizeof buf, "%s_bucket{le=\"0.001\"}", h);
    ck_assert_double_eq(sample_value(m.b.s, buf), 1);
    snprintf(buf, sizeof buf, "%s_bucket{le=\"0.05\"}", h);
    ck_assert_double_eq(sample_value(m.b.s, buf), 1);
    snprintf(buf, sizeof buf, "%s_bucket{le=\"0.1\"}", h);
    ck_assert_double_eq(sample_value(m.b.s, buf), 2);
    snprintf(buf, sizeof buf, "%s_bucket{le=\"+Inf\"}", h);
    ck_assert_double_eq(sample_value(m.b.s, buf), 2);
    snprintf(buf, sizeof buf, "%s_count", h);
    ck_assert_double_eq(sample_value(m.b.s, buf), 2);
    snprintf(buf, sizeof buf, "%s_sum", h);
    ck_assert_double_eq_tol(sample_value(m.b.s, buf), 0.1, 1e-9);

    /* Label values escaped; values exact up to 2^53. */
    tem_metrics_clear(&m);
    tem_metrics_family(&m, "trumpet_tem_x_total", "counter", "a\\b\nc");
    tem_metrics_sample(&m, "trumpet_tem_x_total", "host", "q\"\\\n",
                       9007199254740992.0);
    ck_assert_str_eq(m.b.s, "# HELP trumpet_tem_x_total a\\\\b\\nc\n"
                     "# TYPE trumpet_tem_x_total counter\n"
                     "trumpet_tem_x_total{host=\"q\\\"\\\\\\n\"} "
                     "9007199254740992\n");
    ck_assert_uint_eq(check_exposition(m.b.s), 1);
    tem_metrics_destroy(&m);
}
END_TEST

START_TEST(test_host_gone)
{
    uint32_t id = sum_event();
    struct tproto_batch b;

    satisfy("a", id, 9, "10.1.0.7", 70);
    tem_core_flush(fx.core);
    reply("b", 0, TRUMPET__POLL_STATUS__POLL_INCOMPLETE, 25);
    tproto_batch_init(&b);
    tproto_add_bye(&b, "restarting");
    input("p-c", &b);
    tproto_batch_destroy(&b);
    ck_assert_uint_eq(fx.n_alerts, 1);
    struct json_object *a = alert(0);
    char *missing = joined(a, "missing");
    char *incomplete = joined(a, "incomplete");
    ck_assert_str_eq(missing, "c");
    ck_assert_str_eq(incomplete, "b");
    ck_assert(!json_object_get_boolean(field(a, "deadline")));
    free(missing);
    free(incomplete);
    json_object_put(a);

    /* Silence for 3 heartbeats: gone as well. */
    fx.now += 2999 * MS;
    step();
    struct tem_stats st;
    tem_core_get_stats(fx.core, &st);
    ck_assert_uint_eq(st.hosts_gone, 1);
    fx.now += MS;
    step();
    tem_core_get_stats(fx.core, &st);
    ck_assert_uint_eq(st.hosts_gone, 3);
}
END_TEST

START_TEST(test_below_threshold)
{
    uint32_t id = sum_event();

    /* a is over its share (30), the total is not over 90. */
    satisfy("a", id, 9, "10.1.0.7", 40);
    tem_core_flush(fx.core);
    reply("b", 0, TRUMPET__POLL_STATUS__POLL_OK, 25);
    reply("c", 0, TRUMPET__POLL_STATUS__POLL_OK, 25);
    ck_assert_uint_eq(fx.n_alerts, 0);
    struct tem_stats st;
    tem_core_get_stats(fx.core, &st);
    ck_assert_uint_eq(st.decisions, 1);
    ck_assert_uint_eq(st.decided_complete, 1);
    ck_assert_uint_eq(st.alerts, 0);

    /* ">=" compares with >=: exactly 90 with >= alerts. */
    uint32_t id2 = add_event("ge", "filter=ip predicate=sum(volume) >= 90 "
                             "group=nw_dst");
    ack_installs("a");
    fx_clear_sent();
    /* (Epoch 10: the event came during epoch 9, when its hosts saw
     * nothing.) */
    satisfy("a", id2, 10, "10.1.0.7", 40);
    tem_core_flush(fx.core);
    reply("b", 0, TRUMPET__POLL_STATUS__POLL_OK, 25);
    reply("c", 0, TRUMPET__POLL_STATUS__POLL_OK, 25);
    ck_assert_uint_eq(fx.n_alerts, 1);
}
END_TEST

START_TEST(test_atleast_and_max)
{
    three_hosts();
    uint32_t id = add_event("two", "filter=ip predicate=sum(volume) > 50 "
                            "group=nw_dst across=atleast:2");
    uint32_t pct = add_event("most", "filter=ip predicate=sum(volume) > 50 "
                             "group=nw_dst across=atleast:67%");
    uint32_t mx = add_event("max", "filter=ip predicate=sum(volume) > 50 "
                            "group=nw_dst across=max");

    /* Full threshold on every host: no threshold in the Install. */
    for (size_t k = 0; k < 3; k++) {
        ck_assert(!get_sent("p-a", TRUMPET__MESSAGE__BODY_INSTALL,
                            k)->install->has_threshold);
    }
    fx_clear_sent();

    /* atleast:2: a and b hold (b by its polled value), c does not. */
    satisfy("a", id, 5, "10.1.0.7", 60);
    tem_core_flush(fx.core);
    reply("b", 0, TRUMPET__POLL_STATUS__POLL_OK, 70);
    reply("c", 0, TRUMPET__POLL_STATUS__POLL_OK, 10);
    ck_assert_uint_eq(fx.n_alerts, 1);
    struct json_object *a = alert(0);
    ck_assert_str_eq(json_object_get_string(field(a, "across")), "atleast");
    ck_assert_int_eq(json_object_get_int(field(a, "value")), 2);
    ck_assert_int_eq(json_object_get_int(field(a, "threshold")), 2);
    ck_assert_int_eq(json_object_get_int(field(a, "host_threshold")), 50);
    char *holding = joined(a, "holding");
    ck_assert_str_eq(holding, "a,b");
    free(holding);
    json_object_put(a);

    /* Only one holds: no alert. */
    fx_clear_sent();
    satisfy("a", id, 6, "10.1.0.7", 60);
    tem_core_flush(fx.core);
    reply("b", 0, TRUMPET__POLL_STATUS__POLL_OK, 50);
    reply("c", 0, TRUMPET__POLL_STATUS__POLL_NO_GROUP, 0);
    ck_assert_uint_eq(fx.n_alerts, 1);

    /* 67% of 3 hosts is 3 (rounded up): two holding is not enough. */
    fx_clear_sent();
    satisfy("a", pct, 6, "10.1.0.7", 60);
    tem_core_flush(fx.core);
    reply("b", 0, TRUMPET__POLL_STATUS__POLL_OK, 51);
    reply("c", 0, TRUMPET__POLL_STATUS__POLL_OK, 0);
    ck_assert_uint_eq(fx.n_alerts, 1);

    /* max: the largest value. */
    fx_clear_sent();
    satisfy("a", mx, 6, "10.1.0.7", 60);
    tem_core_flush(fx.core);
    reply("b", 0, TRUMPET__POLL_STATUS__POLL_OK, 80);
    reply("c", 0, TRUMPET__POLL_STATUS__POLL_OK, 5);
    ck_assert_uint_eq(fx.n_alerts, 2);
    a = alert(1);
    ck_assert_str_eq(json_object_get_string(field(a, "event")), "max");
    ck_assert_double_eq(json_object_get_double(field(a, "value")), 80);
    ck_assert_double_eq(json_object_get_double(field(a, "threshold")), 50);
    holding = joined(a, "holding");
    ck_assert_str_eq(holding, "a,b");
    free(holding);
    json_object_put(a);
}
END_TEST

START_TEST(test_drilldown)
{
    uint32_t id = sum_event();
    char *error = tem_core_event_del(fx.core, "svc");
    ck_assert(!error);
    tem_core_flush(fx.core);
    fx_clear_sent();
    id = add_event("svc", "filter=ip predicate=sum(volume) > 90 group=nw_dst "
                   "then=hh:50ms");
    uint32_t hh = add_event("hh", "filter=ip predicate=sum(volume) > 10 "
                            "standby=yes");
    ck_assert_uint_eq(count_sent(NULL, TRUMPET__MESSAGE__BODY_REMOVE), 0);
    fx_clear_sent();

    /* Not installed before the alert. */
    satisfy("a", id, 5, "10.1.0.7", 60);
    tem_core_flush(fx.core);
    ck_assert_uint_eq(count_sent(NULL, TRUMPET__MESSAGE__BODY_INSTALL), 0);
    reply("b", 0, TRUMPET__POLL_STATUS__POLL_OK, 40);
    reply("c", 0, TRUMPET__POLL_STATUS__POLL_NO_GROUP, 0);
    tem_core_flush(fx.core);
    ck_assert_uint_eq(fx.n_alerts, 1);

    /* On the contributors only, split between them. */
    ck_assert_uint_eq(count_sent("p-a", TRUMPET__MESSAGE__BODY_INSTALL), 1);
    ck_assert_uint_eq(count_sent("p-b", TRUMPET__MESSAGE__BODY_INSTALL), 1);
    ck_assert_uint_eq(count_sent("p-c", TRUMPET__MESSAGE__BODY_INSTALL), 0);
    const Trumpet__Install *in = get_sent("p-a",
                                          TRUMPET__MESSAGE__BODY_INSTALL,
                                          0)->install;
    ck_assert_uint_eq(in->event_id, hh);
    ck_assert_str_eq(in->definition, "filter=ip predicate=sum(volume) > 10");
    ck_assert_double_eq(in->threshold, 5);

    char *err;
    struct json_object *show = tem_core_event_show_json(fx.core, "hh", &err);
    struct json_object *hosts = field(show, "hosts");
    ck_assert_uint_eq(json_object_array_length(hosts), 2);
    ck_assert_int_eq(json_object_get_int(
                         field(json_object_array_get_idx(hosts, 0),
                               "drilldown_remaining_ms")), 50);
    json_object_put(show);

    /* Fires again 30 ms later: extended to 80 ms from the start. */
    fx.now += 30 * MS;
    fx_clear_sent();
    satisfy("a", id, 8, "10.1.0.7", 60);
    tem_core_flush(fx.core);
    reply("b", 0, TRUMPET__POLL_STATUS__POLL_OK, 40);
    reply("c", 0, TRUMPET__POLL_STATUS__POLL_NO_GROUP, 0);
    ck_assert_uint_eq(fx.n_alerts, 2);
    ck_assert_uint_eq(count_sent(NULL, TRUMPET__MESSAGE__BODY_INSTALL), 0);

    fx.now += 49 * MS;
    step();
    ck_assert_uint_eq(count_sent(NULL, TRUMPET__MESSAGE__BODY_REMOVE), 0);
    fx.now += 2 * MS;
    step();
    ck_assert_uint_eq(count_sent("p-a", TRUMPET__MESSAGE__BODY_REMOVE), 1);
    ck_assert_uint_eq(count_sent("p-b", TRUMPET__MESSAGE__BODY_REMOVE), 1);
    ck_assert_uint_eq(get_sent("p-a", TRUMPET__MESSAGE__BODY_REMOVE,
                               0)->remove->event_id, hh);
    show = tem_core_event_show_json(fx.core, "hh", &err);
    ck_assert_uint_eq(json_object_array_length(field(show, "hosts")), 0);
    json_object_put(show);
}
END_TEST

START_TEST(test_persistence)
{
    char dir[] = "/tmp/test-tem-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char *path = xasprintf("%s/sub/dir/events.json", dir);

    add_event("heavy", "filter=ip,nw_dst=10.99.0.0/16   predicate=sum(volume)"
              " > 100KB group=nw_dst/24 split=weighted then=hh:500ms");
    add_event("hh", "filter=ip predicate=sum(volume) > 10KB standby=yes");
    add_event("quorum", "filter=udp predicate=count() > 5 "
              "across=atleast:50% scope=10.1.0.0/16");
    char *error = tem_core_event_del(fx.core, "quorum");
    ck_assert(!error);
    add_event("again", "filter=tcp predicate=max(ttl) > 5");
    /* DoS thresholds, for every host and for host a. */
    hello("a", "10.1.0.0/24");
    struct json_object *dos;
    error = tem_core_set_dos_threshold(fx.core, NULL, 4000, &dos);
    ck_assert(!error);
    json_object_put(dos);
    error = tem_core_set_dos_threshold(fx.core, "a", 5000, &dos);
    ck_assert(!error);
    json_object_put(dos);
    error = tem_state_save(fx.core, path);
    ck_assert_msg(!error, "%s", error);

    struct json_object *before = tem_core_events_to_json(fx.core);
    struct tem_config cfg;
    fx_config(&cfg);
    struct tem_core *core2 = tem_core_create(&cfg);
    error = tem_state_load(core2, path);
    ck_assert_msg(!error, "%s", error);
    struct json_object *after = tem_core_events_to_json(core2);
    ck_assert_str_eq(json_object_to_json_string(before),
                     json_object_to_json_string(after));
    ck_assert_int_eq(json_object_get_int(field(after, "next_id")), 5);
    struct json_object *events = field(after, "events");
    ck_assert_int_eq(json_object_get_int(
                         field(json_object_array_get_idx(events, 2), "id")),
                     4);
    ck_assert(json_object_get_boolean(
                  field(json_object_array_get_idx(events, 1), "standby")));
    ck_assert_str_eq(json_object_get_string(
                         field(json_object_array_get_idx(events, 0),
                               "definition")),
                     "filter=ip,nw_dst=10.99.0.0/16 predicate=sum(volume) > "
                     "100KB group=nw_dst/24 split=weighted then=hh:500ms");
    json_object_put(before);
    json_object_put(after);
    before = tem_core_dos_to_json(fx.core);
    after = tem_core_dos_to_json(core2);
    ck_assert_str_eq(json_object_to_json_string(after),
                     "{ \"all\": 4000, \"hosts\": { \"a\": 5000 } }");
    ck_assert_str_eq(json_object_to_json_string(before),
                     json_object_to_json_string(after));
    json_object_put(before);
    json_object_put(after);

    /* A new event gets a fresh id (ids are never reused). */
    char *e = tem_core_event_add(core2, "new", "filter=ip predicate=count() "
                                 "> 1", 0);
    ck_assert(!e);
    char *err;
    struct json_object *show = tem_core_event_show_json(core2, "new", &err);
    ck_assert_int_eq(json_object_get_int(field(show, "id")), 5);
    json_object_put(show);

    /* Broken files: a JSON error names the line, an event error the
     * event. */
    FILE *f = fopen(path, "w");
    fputs("{\n  \"events\": [\n    { \"id\": 1, \n  ]\n}\n", f);
    fclose(f);
    error = tem_state_load(core2, path);
    ck_assert_ptr_nonnull(error);
    ck_assert_msg(strstr(error, "line 4"), "%s", error);
    free(error);
    ck_assert_uint_eq(tem_core_n_events(core2), 0);

    f = fopen(path, "w");
    fputs("{\"format\":1,\"next_id\":3,\"events\":[{\"id\":1,\"name\":\"ok\","
          "\"definition\":\"filter=ip predicate=count() > 1\"},{\"id\":2,"
          "\"name\":\"bad\",\"definition\":\"filter=ip predicate=count() >"
          "\"}]}", f);
    fclose(f);
    error = tem_state_load(core2, path);
    ck_assert_ptr_nonnull(error);
    ck_assert_msg(strstr(error, "events[1] ('bad', id 2): predicate:"),
                  "%s", error);
    free(error);

    f = fopen(path, "w");
    fputs("{\"format\":1,\"events\":[],\"dos_threshold\":{\"all\":-1}}",
          f);
    fclose(f);
    error = tem_state_load(core2, path);
    ck_assert_msg(error && strstr(error, "dos_threshold: all"), "%s", error);
    free(error);

    /* No file: no events, no error. */
    unlink(path);
    error = tem_state_load(core2, path);
    ck_assert(!error);
    tem_core_destroy(core2);

    char *cmd = xasprintf("rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
    free(cmd);
    free(path);
}
END_TEST

START_TEST(test_event_errors)
{
    static const struct {
        const char *def;
        const char *error;
    } cases[] = {
        { "filter=ip predicate=sum(volume) > >> 125KB",
          "predicate: column 35: unexpected '>>': expected an operand" },
        { "scope=10.0.0.0/8 filter=ip predicate=sum(volume) > >> 125KB",
          "predicate: column 52: unexpected '>>'" },
        { "filter=ip predicate=avg(bytes) > 5 across=sum",
          "across: column 43: across=sum needs" },
        { "filter=ip predicate=count() > 5 across=atleast:0",
          "across: column 40: 'atleast:0' is not a host count" },
        { "filter=ip predicate=count() > 5 across=median",
          "across: column 40: unknown value 'median'" },
        { "filter=ip predicate=max(ttl) > 5 split=weighted",
          "split: column 40: split= applies only to across=sum" },
        { "filter=ip predicate=count() > 5 then=x", "then: column 38: 'x' "
          "is not NAME:DURATION" },
        { "filter=ip predicate=count() > 5 then=x:soon",
          "then: column 40: 'soon' is not a duration" },
        { "filter=ip predicate=count() > 5 scope=10.0.0.0/33",
          "scope: column 39:" },
        { "filter=ip predicate=count() > 5 standby=maybe",
          "standby: column 41: unknown value 'maybe'" },
        { "filter=ip predicate=count() > 5 scope=all scope=all",
          "scope: column 43: duplicate clause 'scope=': expected each "
          "clause at most once" },
        { "scope=all filter=ip scope=10.0.0.0/8 predicate=count() > 5",
          "scope: column 21: duplicate clause 'scope=': expected each "
          "clause at most once" },
        { "filter=ip predicate=count() > 5 across=max across=max",
          "across: column 44: duplicate clause 'across=': expected each "
          "clause at most once" },
        { "filter=ip predicate=sum(volume) > 5 across=sum split=equal "
          "split=weighted",
          "split: column 60: duplicate clause 'split=': expected each "
          "clause at most once" },
        { "filter=ip predicate=count() > 5 then=a:1s standby=yes then=b:1s",
          "then: column 55: duplicate clause 'then=': expected each clause "
          "at most once" },
        { "filter=ip predicate=count() > 5 standby=no standby=yes",
          "standby: column 44: duplicate clause 'standby=': expected each "
          "clause at most once" },
        /* The hosts' clauses, next to each other once the TEM's own are
         * taken out, or not. */
        { "filter=ip scope=all filter=ipv6 predicate=count() > 5",
          "filter: column 21: duplicate clause 'filter=': expected each "
          "clause at most once" },
        { "filter=ip predicate=count() > 1 predicate=count() > 2",
          "predicate: column 33: duplicate clause 'predicate=': expected "
          "each clause at most once" },
        { "filter=ip predicate=count() > 5 interval=10ms across=max "
          "interval=20ms",
          "interval: column 58: duplicate clause 'interval=': expected "
          "each clause at most once" },
        { "group=5tuple filter=ip group=nw_src predicate=count() > 1",
          "group: column 24: duplicate clause 'group=': expected each "
          "clause at most once" },
        { "filter=ip predicate=count() > 5 interval=15ms",
          "interval: 15ms is not a multiple of the epoch (10ms)" },
        /* An interface is one host's. */
        { "filter=ip,in_port=vhu1 predicate=count() > 5",
          "filter: in_port= names an interface, which only the switch "
          "that has it knows: a network-wide event cannot: install it on "
          "that host with ovs-appctl tpm/event-add" },
        { "filter=ip predicate=count() > 5 group=in_port,5tuple",
          "group: in_port names an interface" },
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char *error = tem_core_event_add(fx.core, "e", cases[i].def, 0);
        ck_assert_msg(error && strstr(error, cases[i].error),
                      "%s: got '%s', expected '%s'", cases[i].def,
                      error ? error : "(no error)", cases[i].error);
        free(error);
    }
    ck_assert_uint_eq(tem_core_n_events(fx.core), 0);

    /* Clauses anywhere; the hosts get the local part only. */
    hello("a", NULL);
    add_event("e", "across=max filter=ip, tp_dst=80,tcp  predicate=sum(volume)"
              " > 5 scope=all");
    ck_assert_str_eq(get_sent("p-a", TRUMPET__MESSAGE__BODY_INSTALL,
                              0)->install->definition,
                     "filter=ip, tp_dst=80,tcp predicate=sum(volume) > 5");
    char *error = tem_core_event_add(fx.core, "e", "filter=ip "
                                     "predicate=count() > 1", 0);
    ck_assert_msg(strstr(error, "already exists"), "%s", error);
    free(error);

    /* TCP-state variables: the hosts keep the state, the TEM splits the
     * threshold like any other sum (one host: all of it). */
    add_event("lossy", "filter=tcp predicate=sum(is_lost && is_burst) > 10 "
              "group=nw_src,nw_dst across=sum");
    ck_assert_str_eq(get_sent("p-a", TRUMPET__MESSAGE__BODY_INSTALL,
                              1)->install->definition,
                     "filter=tcp predicate=sum(is_lost && is_burst) > 10 "
                     "group=nw_src,nw_dst");
}
END_TEST

START_TEST(test_sessions)
{
    struct tproto_batch b;
    tproto_batch_init(&b);

    /* A peer that never said Hello is asked to. */
    struct tpm_key k = group_key("10.1.0.1");
    tproto_add_satisfaction(&b, 1, fx_epoch(1), &k, 5, 0, 1, 0);
    input("stranger", &b);
    const Trumpet__Message *m = get_sent("stranger",
                                         TRUMPET__MESSAGE__BODY_BYE, 0);
    ck_assert_str_eq(m->bye->reason, "unknown session");

    /* Wrong epoch, no common version: refused with reasons. */
    tproto_add_hello(&b, "h1", NULL, 0, 5 * MS, fx.now, NULL, 0, NULL);
    input("p-h1", &b);
    m = get_sent("p-h1", TRUMPET__MESSAGE__BODY_REFUSE, 0);
    ck_assert_msg(strstr(m->refuse->reason, "epoch mismatch: host h1 uses "
                         "epochs of 5ms, the TEM of 10ms"), "%s",
                  m->refuse->reason);
    tproto_add_hello(&b, "h2", NULL, 0, EPOCH_NS, fx.now, NULL, 0, NULL);
    b.msgs[0]->hello->version_min = 7;
    b.msgs[0]->hello->version_max = 9;
    input("p-h2", &b);
    m = get_sent("p-h2", TRUMPET__MESSAGE__BODY_REFUSE, 0);
    ck_assert_msg(strstr(m->refuse->reason, "host h2 speaks versions 7..9, "
                         "the TEM speaks 1..4"), "%s", m->refuse->reason);

    /* The same host id from another peer replaces the session. */
    hello("a", NULL);
    add_event("e", "filter=ip predicate=count() > 1");
    fx_clear_sent();
    tproto_add_hello(&b, "a", NULL, 0, EPOCH_NS, fx.now, NULL, 0, NULL);
    input("p-a2", &b);
    tem_core_flush(fx.core);
    m = get_sent("p-a", TRUMPET__MESSAGE__BODY_BYE, 0);
    ck_assert_msg(strstr(m->bye->reason, "replaced"), "%s", m->bye->reason);
    ck_assert_uint_eq(count_sent("p-a2", TRUMPET__MESSAGE__BODY_WELCOME), 1);
    ck_assert_uint_eq(count_sent("p-a2", TRUMPET__MESSAGE__BODY_INSTALL), 1);
    struct tem_stats st;
    tem_core_get_stats(fx.core, &st);
    ck_assert_uint_eq(st.replaced, 1);
    ck_assert_uint_eq(st.refused, 2);
    ck_assert_uint_eq(st.sessions, 2);

    /* A nack is kept with its reason. */
    const Trumpet__Install *in = get_sent("p-a2",
                                          TRUMPET__MESSAGE__BODY_INSTALL,
                                          0)->install;
    tproto_add_nack(&b, in->cookie, in->event_id, "no room for triggers");
    input("p-a2", &b);
    char *err;
    struct json_object *show = tem_core_event_show_json(fx.core, "e", &err);
    struct json_object *h = json_object_array_get_idx(field(show, "hosts"),
                                                      0);
    ck_assert_str_eq(json_object_get_string(field(h, "state")), "nacked");
    ck_assert_str_eq(json_object_get_string(field(h, "reason")),
                     "no room for triggers");
    json_object_put(show);

    /* Heartbeats go out every period. */
    fx_clear_sent();
    fx.now += 1000 * MS;
    step();
    ck_assert_uint_eq(count_sent("p-a2", TRUMPET__MESSAGE__BODY_HEARTBEAT),
                      1);
    tproto_batch_destroy(&b);
}
END_TEST

START_TEST(test_invalid_messages)
{
    struct tproto_batch b;
    tproto_batch_init(&b);
    hello("a", NULL);
    uint32_t id = add_event("e", "filter=ip predicate=count() > 1");
    struct tem_stats st;
    tem_core_get_stats(fx.core, &st);
    uint64_t base_msgs = st.invalid_msgs;

    /* Garbage frames. */
    static const char garbage[] = "\xff\xff\xff\xff garbage";
    tem_core_input(fx.core, "p-a", 3, garbage, sizeof garbage);
    tem_core_input(fx.core, "p-a", 3, "", 0);

    /* A frame with one bad message among good ones: only it is dropped. */
    struct tpm_key bad = { .ipver = 0 };
    struct tpm_key good = group_key("10.1.0.1");
    tproto_add_satisfaction(&b, id, fx_epoch(3), &bad, 5, 0, 1, 0);
    tproto_add_satisfaction(&b, id, fx_epoch(3), &good, 5, 0, 1, 0);
    tproto_add_satisfaction(&b, id, fx_epoch(4), &good, NAN, 0, 1, 0);
    tproto_add_poll(&b, 1, id, 3, &good);   /* Wrong direction. */
    tproto_add_satisfaction(&b, 999, fx_epoch(4), &good, 5, 0, 1, 0);
    input("p-a", &b);

    tem_core_get_stats(fx.core, &st);
    ck_assert_uint_eq(st.invalid_frames, 2);
    ck_assert_uint_eq(st.invalid_msgs - base_msgs, 3);
    ck_assert_uint_eq(st.sat_unknown, 1);
    ck_assert_uint_eq(st.alerts, 1);    /* The good one (single host). */

    struct json_object *hosts = tem_core_hosts_json(fx.core, NULL);
    struct json_object *h = json_object_array_get_idx(field(hosts, "hosts"),
                                                      0);
    ck_assert_int_eq(json_object_get_int(field(h, "invalid_frames")), 2);
    ck_assert_int_eq(json_object_get_int(field(h, "invalid_msgs")), 3);
    ck_assert_str_eq(json_object_get_string(field(h, "state")),
                     "connected");
    json_object_put(hosts);

    /* Random bytes never crash the core. */
    struct test_rng rng;
    test_rng_seed(&rng, 42);
    for (int i = 0; i < 20000; i++) {
        uint8_t buf[64];
        size_t len = test_rng_range(&rng, sizeof buf);
        for (size_t j = 0; j < len; j++) {
            buf[j] = test_rng_u32(&rng);
        }
        tem_core_input(fx.core, i % 2 ? "p-a" : "x", i % 2 ? 3 : 1, buf,
                       len);
    }
    step();
    tproto_batch_destroy(&b);
}
END_TEST

/* Host 'id''s entry of tem_core_hosts_json() as "THRESHOLD STATE SCOPE"
 * ("null" for what is null), and its nack reason in 'reason' if any. */
static char *
host_dos(const char *id, char *reason, size_t size)
{
    struct json_object *r = tem_core_hosts_json(fx.core, NULL);
    struct json_object *hosts = field(r, "hosts");
    char *s = NULL;

    for (size_t i = 0; i < json_object_array_length(hosts); i++) {
        struct json_object *h = json_object_array_get_idx(hosts, i);
        struct json_object *why;
        if (strcmp(json_object_get_string(field(h, "host")), id)) {
            continue;
        }
        struct json_object *t = field(h, "dos_threshold");
        struct json_object *scope = field(h, "dos_scope");
        s = xasprintf("%s %s %s",
                      t ? json_object_get_string(t) : "null",
                      json_object_get_string(field(h, "dos_state")),
                      scope ? json_object_get_string(scope) : "null");
        snprintf(reason, size, "%s",
                 json_object_object_get_ex(h, "dos_reason", &why)
                 ? json_object_get_string(why) : "");
    }
    ck_assert_msg(s, "no host %s", id);
    json_object_put(r);
    return s;
}

#define CHECK_DOS(ID, EXPECT, REASON)                                   \
    do {                                                                \
        char reason_[256];                                              \
        char *got_ = host_dos(ID, reason_, sizeof reason_);             \
        ck_assert_str_eq(got_, EXPECT);                                 \
        ck_assert_str_eq(reason_, REASON);                              \
        free(got_);                                                     \
    } while (0)

/* The 'k'th Configure sent to 'peer' sets 'bytes'; returns its cookie. */
static uint64_t
configure_sent(const char *peer, size_t k, uint32_t bytes)
{
    const Trumpet__Configure *c = get_sent(
        peer, TRUMPET__MESSAGE__BODY_CONFIGURE, k)->configure;
    ck_assert(c->has_dos_threshold);
    ck_assert_uint_eq(c->dos_threshold, bytes);
    return c->cookie;
}

static void
dos_answer(const char *peer, uint64_t cookie, const char *nack)
{
    struct tproto_batch b;
    tproto_batch_init(&b);
    if (nack) {
        tproto_add_nack(&b, cookie, 0, nack);
    } else {
        tproto_add_ack(&b, cookie, 0);
    }
    input(peer, &b);
    tproto_batch_destroy(&b);
}

static void
host_bye(const char *peer)
{
    struct tproto_batch b;
    tproto_batch_init(&b);
    tproto_add_bye(&b, "restarting");
    input(peer, &b);
    tproto_batch_destroy(&b);
}

/* Returns the result of tem_core_set_dos_threshold() as
 * "HOST:STATE,..." and frees it; checks its other fields. */
static char *
set_dos(const char *host, uint32_t bytes)
{
    struct json_object *r;
    char *error = tem_core_set_dos_threshold(fx.core, host, bytes, &r);
    ck_assert_msg(!error, "%s", error);
    tem_core_flush(fx.core);
    ck_assert_int_eq(json_object_get_int64(field(r, "dos_threshold")),
                     bytes);
    struct json_object *h = field(r, "host");
    if (host) {
        ck_assert_str_eq(json_object_get_string(h), host);
    } else {
        ck_assert_ptr_null(h);
    }
    struct json_object *hosts = field(r, "hosts");
    char *s = xstrdup("");
    for (size_t i = 0; i < json_object_array_length(hosts); i++) {
        struct json_object *o = json_object_array_get_idx(hosts, i);
        char *t = xasprintf("%s%s%s:%s", s, i ? "," : "",
                            json_object_get_string(field(o, "host")),
                            json_object_get_string(field(o, "state")));
        free(s);
        s = t;
    }
    json_object_put(r);
    return s;
}

#define CHECK_SET(HOST, BYTES, EXPECT)                                  \
    do {                                                                \
        char *got_ = set_dos(HOST, BYTES);                              \
        ck_assert_str_eq(got_, EXPECT);                                 \
        free(got_);                                                     \
    } while (0)

static uint64_t
stat_configures(void)
{
    struct tem_stats st;
    tem_core_get_stats(fx.core, &st);
    return st.configures;
}

/* The DoS threshold: refused for an unknown host or a host too old for
 * Configure, changing nothing; sent to every host that speaks it, acks and
 * nacks tracked per host, stale answers ignored; a host's own value over
 * the value for all hosts until the next value for all; sent again on
 * every new session, and to a host that was gone when it was set. */
START_TEST(test_dos_threshold)
{
    struct tproto_batch b;
    struct json_object *r = NULL;
    char *error;

    hello("a", "10.1.0.0/24");
    hello("b", "10.1.1.0/24");
    /* A host of protocol version 1. */
    tproto_batch_init(&b);
    tproto_add_hello(&b, "old", NULL, 0, EPOCH_NS, fx.now, NULL, 0, NULL);
    b.msgs[0]->hello->version_max = 1;
    input("p-old", &b);
    ck_assert_uint_eq(get_sent("p-old", TRUMPET__MESSAGE__BODY_WELCOME,
                               0)->welcome->version, 1);
    ck_assert_uint_eq(get_sent("p-a", TRUMPET__MESSAGE__BODY_WELCOME,
                               0)->welcome->version, 2);
    fx_clear_sent();
    CHECK_DOS("a", "null none null", "");

    /* Errors change nothing. */
    error = tem_core_set_dos_threshold(fx.core, "nohost", 4000, &r);
    ck_assert_str_eq(error, "no host 'nohost' (tem-ctl hosts lists them)");
    ck_assert_ptr_null(r);
    free(error);
    error = tem_core_set_dos_threshold(fx.core, "old", 4000, &r);
    ck_assert_str_eq(error, "host old speaks protocol version 1: it cannot "
                     "take a DoS threshold from the TEM (Configure needs "
                     "version 2); set it on the host");
    ck_assert_ptr_null(r);
    free(error);
    tem_core_flush(fx.core);
    ck_assert_uint_eq(fx.n_sent, 0);
    CHECK_DOS("old", "null none null", "");
    r = tem_core_status_json(fx.core);
    ck_assert_ptr_null(field(r, "dos_threshold_all"));
    json_object_put(r);

    /* Every host. */
    CHECK_SET(NULL, 4000, "a:pending,b:pending,old:unsupported");
    ck_assert_uint_eq(count_sent(NULL, TRUMPET__MESSAGE__BODY_CONFIGURE), 2);
    uint64_t ca = configure_sent("p-a", 0, 4000);
    uint64_t cb = configure_sent("p-b", 0, 4000);
    ck_assert_uint_ne(ca, cb);
    ck_assert_uint_eq(stat_configures(), 2);
    CHECK_DOS("a", "4000 pending all", "");
    CHECK_DOS("old", "4000 unsupported all", "");
    r = tem_core_status_json(fx.core);
    ck_assert_int_eq(json_object_get_int64(field(r, "dos_threshold_all")),
                     4000);
    ck_assert_int_eq(json_object_get_int64(
                         field(field(r, "counters"), "configures")), 2);
    json_object_put(r);

    /* Answers: a stale one (wrong cookie) changes nothing. */
    dos_answer("p-a", cb, NULL);
    CHECK_DOS("a", "4000 pending all", "");
    dos_answer("p-a", ca, NULL);
    dos_answer("p-b", cb, "DoS threshold locked by the operator");
    CHECK_DOS("a", "4000 acked all", "");
    CHECK_DOS("b", "4000 nacked all", "DoS threshold locked by the operator");
    struct tem_stats st;
    tem_core_get_stats(fx.core, &st);
    ck_assert_uint_eq(st.acks, 2);
    ck_assert_uint_eq(st.nacks, 1);
    ck_assert_uint_eq(st.invalid_msgs, 0);

    /* One host: its own value, the others untouched. */
    fx_clear_sent();
    CHECK_SET("a", 0, "a:pending");
    ck_assert_uint_eq(count_sent(NULL, TRUMPET__MESSAGE__BODY_CONFIGURE), 1);
    ca = configure_sent("p-a", 0, 0);
    dos_answer("p-a", ca, NULL);
    CHECK_DOS("a", "0 acked host", "");
    CHECK_DOS("b", "4000 nacked all", "DoS threshold locked by the operator");

    /* A new session gets the host's value again, before its triggers; a
     * new host gets the value for all. */
    add_event("e", "filter=ip predicate=count() > 1");
    fx_clear_sent();
    host_bye("p-a");
    CHECK_DOS("a", "0 waiting host", "");
    hello("a", "10.1.0.0/24");
    ck_assert_uint_eq(count_sent("p-a", TRUMPET__MESSAGE__BODY_CONFIGURE), 1);
    configure_sent("p-a", 0, 0);
    const Trumpet__Frame *f = fx.sent[fx.n_sent - 1].frame;
    ck_assert_uint_eq(f->n_messages, 3);
    ck_assert_int_eq(f->messages[0]->body_case,
                     TRUMPET__MESSAGE__BODY_WELCOME);
    ck_assert_int_eq(f->messages[1]->body_case,
                     TRUMPET__MESSAGE__BODY_CONFIGURE);
    ck_assert_int_eq(f->messages[2]->body_case,
                     TRUMPET__MESSAGE__BODY_INSTALL);
    CHECK_DOS("a", "0 pending host", "");
    hello("c", "10.1.2.0/24");
    configure_sent("p-c", 0, 4000);
    CHECK_DOS("c", "4000 pending all", "");

    /* A gone host gets the next value when it is back; the value for all
     * replaces a host's own. */
    host_bye("p-b");
    fx_clear_sent();
    CHECK_SET(NULL, 6000, "a:pending,b:waiting,old:unsupported,c:pending");
    ck_assert_uint_eq(count_sent("p-b", TRUMPET__MESSAGE__BODY_CONFIGURE), 0);
    configure_sent("p-a", 0, 6000);
    CHECK_DOS("a", "6000 pending all", "");
    CHECK_DOS("b", "6000 waiting all", "");
    CHECK_SET("b", 7000, "b:waiting");
    hello("b", "10.1.1.0/24");
    ck_assert_uint_eq(count_sent("p-b", TRUMPET__MESSAGE__BODY_CONFIGURE), 1);
    configure_sent("p-b", 0, 7000);
    CHECK_DOS("b", "7000 pending host", "");
    ck_assert_uint_eq(count_sent("p-old", TRUMPET__MESSAGE__BODY_CONFIGURE),
                      0);
    tproto_batch_destroy(&b);
}
END_TEST

START_TEST(test_many_decisions)
{
    struct tem_config cfg;
    tem_core_destroy(fx.core);
    fx_config(&cfg);
    cfg.max_decisions = 64;
    fx.core = tem_core_create(&cfg);

    uint32_t id = sum_event();
    /* 64 pending keys fill the table; the 65th is dropped and counted. */
    for (int i = 0; i < 65; i++) {
        char dst[32];
        snprintf(dst, sizeof dst, "10.1.0.%d", i);
        satisfy("a", id, 1, dst, 40);
    }
    struct tem_stats st;
    tem_core_get_stats(fx.core, &st);
    ck_assert_uint_eq(st.decisions, 64);
    ck_assert_uint_eq(st.decisions_full, 1);

    /* Decided keys make room again once they expire. */
    fx.now += 100 * MS;
    step();
    tem_core_get_stats(fx.core, &st);
    ck_assert_uint_eq(st.decided_deadline, 64);
    satisfy("a", id, 2, "10.1.0.1", 40);
    tem_core_get_stats(fx.core, &st);
    ck_assert_uint_eq(st.decisions, 65);
}
END_TEST

/* Frames of a connection whose key is bound to host id 'auth'. */
static void
input_auth(const char *peer, const char *auth, struct tproto_batch *b)
{
    uint8_t *data;
    size_t len = tproto_batch_encode(b, 0, &data);
    tem_core_input_auth(fx.core, peer, strlen(peer), auth, data, len);
    free(data);
    tproto_batch_clear(b);
    tem_core_flush(fx.core);
}

/* A host may only say Hello as its key's host id: another key's holder
 * claiming h1 is refused without touching h1's session, and cannot
 * satisfy anything; a session's frames under another key's id are
 * dropped; a revoked peer's session ends with Bye. */
START_TEST(test_auth)
{
    struct tproto_batch b;
    tproto_batch_init(&b);
    uint32_t ev = add_event("big", "filter=udp predicate=sum(volume) > 10 "
                            "group=nw_dst across=sum");

    tproto_add_hello(&b, "h1", NULL, 0, EPOCH_NS, fx.now, NULL, 0, "test");
    input_auth("p-h1", "h1", &b);
    ck_assert_uint_eq(count_sent("p-h1", TRUMPET__MESSAGE__BODY_WELCOME), 1);
    ack_installs("h1");

    /* h2's key claims h1, twice, then satisfies. */
    for (int i = 0; i < 2; i++) {
        tproto_add_hello(&b, "h1", NULL, 0, EPOCH_NS, fx.now, NULL, 0, "x");
        input_auth("p-rogue", "h2", &b);
    }
    ck_assert_uint_eq(count_sent("p-rogue", TRUMPET__MESSAGE__BODY_REFUSE),
                      2);
    const Trumpet__Message *m = get_sent("p-rogue",
                                         TRUMPET__MESSAGE__BODY_REFUSE, 0);
    ck_assert_msg(strstr(m->refuse->reason, "host id 'h1' is not the one "
                         "bound to this connection's key ('h2'"), "%s",
                  m->refuse->reason);
    struct tpm_key k = group_key("10.0.0.1");
    tproto_add_satisfaction(&b, ev, fx_epoch(5), &k, 9.99e12, 0, 1, 0);
    input_auth("p-rogue", "h2", &b);
    ck_assert_uint_eq(count_sent("p-h1", TRUMPET__MESSAGE__BODY_BYE), 0);
    struct tem_stats s = stats();
    ck_assert_uint_eq(s.auth_mismatch, 2);
    ck_assert_uint_eq(s.replaced, 0);
    ck_assert_uint_eq(s.hosts_gone, 0);
    ck_assert_uint_eq(s.satisfactions, 0);
    ck_assert_uint_eq(s.sessions, 1);

    /* A frame of h1's session under another id: dropped, unread. */
    tproto_add_satisfaction(&b, ev, fx_epoch(5), &k, 9.99e12, 0, 1, 0);
    input_auth("p-h1", "h3", &b);
    s = stats();
    ck_assert_uint_eq(s.auth_mismatch, 3);
    ck_assert_uint_eq(s.satisfactions, 0);
    /* Hello, ack; 2 Hellos and a Satisfaction from p-rogue; none of the
     * dropped frame. */
    ck_assert_uint_eq(s.msgs_in, 5);
    step();
    ck_assert_uint_eq(fx.n_alerts, 0);

    /* Revoked. */
    tem_core_peer_revoke(fx.core, "p-rogue", 7, "revoked");
    ck_assert_uint_eq(stats().revoked, 0);
    tem_core_peer_revoke(fx.core, "p-h1", 4, "key removed");
    tem_core_flush(fx.core);
    ck_assert_uint_eq(count_sent("p-h1", TRUMPET__MESSAGE__BODY_BYE), 1);
    s = stats();
    ck_assert_uint_eq(s.revoked, 1);
    ck_assert_uint_eq(s.hosts_gone, 1);
    tproto_batch_destroy(&b);
}
END_TEST

/* Ids never wrap: past 4294967295 event-add refuses, the state round-trips;
 * names and definitions are bounded before anything else. */
START_TEST(test_event_ids)
{
    const char *def = "filter=udp predicate=sum(volume) > 10";
    char *error = tem_core_event_add(fx.core, "top", def, UINT32_MAX);
    ck_assert_msg(!error, "%s", error);
    error = tem_core_event_add(fx.core, "next", def, 0);
    ck_assert_msg(error && strstr(error, "no event id left"), "%s", error);
    free(error);
    error = tem_core_event_add(fx.core, "seven", def, 7);
    ck_assert_msg(!error, "%s", error);

    struct json_object *o = tem_core_events_to_json(fx.core);
    struct json_object *next;
    ck_assert(json_object_object_get_ex(o, "next_id", &next));
    ck_assert_int_eq(json_object_get_int64(next), (int64_t) UINT32_MAX + 1);
    error = tem_core_events_from_json(fx.core, o);
    ck_assert_msg(!error, "%s", error);
    ck_assert_uint_eq(tem_core_n_events(fx.core), 2);
    error = tem_core_event_add(fx.core, "next", def, 0);
    ck_assert_msg(error && strstr(error, "no event id left"), "%s", error);
    free(error);
    json_object_put(o);

    char name[200], *big = xmalloc(TEM_MAX_DEFINITION + 100);
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    error = tem_core_event_add(fx.core, name, def, 0);
    ck_assert_msg(error && strstr(error, "not a valid event name")
                  && !strstr(error, "nnnnnnnn"), "%s", error);
    free(error);
    memset(big, ' ', TEM_MAX_DEFINITION + 99);
    memcpy(big, def, strlen(def));
    big[TEM_MAX_DEFINITION + 99] = '\0';
    error = tem_core_event_add(fx.core, "x", big, 0);
    ck_assert_msg(error && strstr(error, "longer than 8192"), "%s", error);
    free(error);
    free(big);
}
END_TEST

/* The allow-list: its format, its errors, and the ZAP decision. */
START_TEST(test_allow_list)
{
    char h1[41], h2[41], c1[41], sec[41];
    ck_assert_int_eq(zmq_curve_keypair(h1, sec), 0);
    ck_assert_int_eq(zmq_curve_keypair(h2, sec), 0);
    ck_assert_int_eq(zmq_curve_keypair(c1, sec), 0);
    char *text = xasprintf("# hosts\n  h1 %s\nh2\t%s   # second\n\n"
                           "client alice %s\n", h1, h2, c1);
    struct tem_allow *allow;
    char *error = tem_allow_parse(text, strlen(text), "list", &allow);
    ck_assert_msg(!error, "%s", error);
    ck_assert_uint_eq(allow->n_hosts, 2);
    ck_assert_uint_eq(allow->n_clients, 1);
    ck_assert_str_eq(tem_allow_find(allow, h2)->name, "h2");
    ck_assert_int_eq(tem_allow_find(allow, c1)->kind, TEM_ALLOW_CLIENT);

    uint8_t raw[32];
    char user[41];
    const char *why;
    zmq_z85_decode(raw, h1);
    ck_assert_int_eq(tem_zap_decide(allow, TEM_ZAP_HOSTS, "CURVE", raw, 32,
                                    user, &why), 200);
    ck_assert_str_eq(user, h1);
    ck_assert_int_eq(tem_zap_decide(allow, TEM_ZAP_CLIENTS, "CURVE", raw, 32,
                                    user, &why), 400);
    ck_assert_str_eq(why, "a host key on a client socket");
    ck_assert_str_eq(user, "");
    ck_assert_int_eq(tem_zap_decide(allow, TEM_ZAP_HOSTS, "NULL", raw, 32,
                                    user, &why), 400);
    ck_assert_int_eq(tem_zap_decide(allow, TEM_ZAP_HOSTS, "CURVE", raw, 31,
                                    user, &why), 400);
    zmq_z85_decode(raw, c1);
    ck_assert_int_eq(tem_zap_decide(allow, TEM_ZAP_CLIENTS, "CURVE", raw, 32,
                                    user, &why), 200);
    ck_assert_int_eq(tem_zap_decide(allow, TEM_ZAP_HOSTS, "CURVE", raw, 32,
                                    user, &why), 400);
    char other[41];
    ck_assert_int_eq(zmq_curve_keypair(other, sec), 0);
    zmq_z85_decode(raw, other);
    ck_assert_int_eq(tem_zap_decide(allow, TEM_ZAP_HOSTS, "CURVE", raw, 32,
                                    user, &why), 400);
    ck_assert_str_eq(why, "unknown key");
    ck_assert_int_eq(tem_zap_decide(NULL, TEM_ZAP_HOSTS, "CURVE", raw, 32,
                                    user, &why), 400);
    tem_allow_free(allow);
    free(text);

    /* A subscriber key opens the alerts socket only; a client key (an
     * administrator's) both client sockets. */
    char s1[41];
    ck_assert_int_eq(zmq_curve_keypair(s1, sec), 0);
    text = xasprintf("client alice %s\nsubscriber siem %s\n", c1, s1);
    error = tem_allow_parse(text, strlen(text), "list", &allow);
    ck_assert_msg(!error, "%s", error);
    ck_assert_uint_eq(allow->n_clients, 1);
    ck_assert_uint_eq(allow->n_subscribers, 1);
    zmq_z85_decode(raw, s1);
    ck_assert_int_eq(tem_zap_decide(allow, TEM_ZAP_SUBSCRIBERS, "CURVE", raw,
                                    32, user, &why), 200);
    ck_assert_int_eq(tem_zap_decide(allow, TEM_ZAP_CLIENTS, "CURVE", raw, 32,
                                    user, &why), 400);
    ck_assert_str_eq(why, "a subscriber key on the control socket");
    ck_assert_int_eq(tem_zap_decide(allow, TEM_ZAP_HOSTS, "CURVE", raw, 32,
                                    user, &why), 400);
    zmq_z85_decode(raw, c1);
    ck_assert_int_eq(tem_zap_decide(allow, TEM_ZAP_SUBSCRIBERS, "CURVE", raw,
                                    32, user, &why), 200);
    ck_assert_int_eq(tem_zap_decide(allow, TEM_ZAP_CLIENTS, "CURVE", raw, 32,
                                    user, &why), 200);
    zmq_z85_decode(raw, h1);
    tem_allow_free(allow);
    free(text);
    text = xasprintf("h1 %s\n", h1);
    error = tem_allow_parse(text, strlen(text), "list", &allow);
    ck_assert_msg(!error, "%s", error);
    ck_assert_int_eq(tem_zap_decide(allow, TEM_ZAP_SUBSCRIBERS, "CURVE", raw,
                                    32, user, &why), 400);
    tem_allow_free(allow);
    free(text);

    /* A key may hold '#': only a word after the fields is a comment. */
    const char *hash_key = "0#00000000000000000000000000000000000000";
    text = xasprintf("h1 %s #c #d\nclient a %s # x\n", hash_key, h1);
    error = tem_allow_parse(text, strlen(text), "list", &allow);
    ck_assert_msg(!error, "%s", error);
    ck_assert_str_eq(tem_allow_find(allow, hash_key)->name, "h1");
    ck_assert_str_eq(tem_allow_find(allow, h1)->name, "a");
    tem_allow_free(allow);
    free(text);

    static const struct {
        const char *line;
        const char *error;
    } bad[] = {
        { "h1", "expected \"HOST-ID KEY\"" },
        { "h1 KEY extra", "expected \"HOST-ID KEY\"" },
        { "h/1 KEY", "host id is not" },
        { "client a/b KEY", "client name is not" },
        { "h1 tooshort", "the key is not 40 Z85" },
        { "h1 KEY\nh2 KEY", "is listed twice (for h1 and h2)" },
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        /* Each "KEY" by h1, searching on after the key put in: a
         * random Z85 key may hold "KEY" itself. */
        char *t = xstrdup(bad[i].line);
        for (char *p = t; (p = strstr(p, "KEY")); ) {
            size_t off = p - t;
            char *u = xasprintf("%.*s%s%s", (int) off, t, h1, p + 3);
            free(t);
            t = u;
            p = t + off + strlen(h1);
        }
        char *full = xasprintf("# ok\n%s\n", t);
        error = tem_allow_parse(full, strlen(full), "list", &allow);
        ck_assert_msg(error && strstr(error, bad[i].error)
                      && strstr(error, "list"), "%s: %s", bad[i].line,
                      error ? error : "accepted");
        ck_assert_ptr_null(allow);
        free(error);
        free(full);
        free(t);
    }
}
END_TEST

/* Hostile hosts (docs/tem.md, "Hostile hosts"). */

/* A satisfaction of host 'id' for absolute epoch 'epoch' (no clock
 * move), numbered 'seq' (0: none) and flagged 'late'. */
static void
satisfy_abs(const char *id, uint32_t event, uint64_t epoch, const char *dst,
            double value, uint64_t seq, bool late)
{
    char peer[64];
    struct tproto_batch b;
    struct tpm_key k = group_key(dst);
    snprintf(peer, sizeof peer, "p-%s", id);
    tproto_batch_init(&b);
    tproto_add_satisfaction(&b, event, epoch, &k, value, 0, 1, 0);
    if (seq) {
        tproto_set_seq(&b, seq, late);
    }
    input(peer, &b);
    tproto_batch_destroy(&b);
}

/* Epochs far ahead of the clock (116 days) or behind --epoch-past are
 * refused and counted: no decision, no poll.  The window's edges are
 * taken. */
START_TEST(test_epoch_window)
{
    uint32_t id = sum_event();
    fx.now += 1000 * MS;
    uint64_t now = fx.now / EPOCH_NS;

    satisfy_abs("a", id, now + 116ULL * 86400 * 100, "10.1.0.7", 40, 0,
                false);
    satisfy_abs("a", id, now - 301 * 100, "10.1.0.7", 40, 0, false);
    step();
    struct tem_stats st = stats();
    ck_assert_uint_eq(st.satisfactions, 2);
    ck_assert_uint_eq(st.epoch_refused, 2);
    ck_assert_uint_eq(st.decisions, 0);
    ck_assert_uint_eq(st.polls_sent, 0);
    ck_assert_uint_eq(count_sent(NULL, TRUMPET__MESSAGE__BODY_POLL), 0);

    /* A poll reply of an epoch out of the window: refused too. */
    {
        struct tproto_batch b;
        tproto_batch_init(&b);
        tproto_add_poll_reply(&b, 1, id, now + 1000,
                              TRUMPET__POLL_STATUS__POLL_OK, 5);
        input("p-b", &b);
        tproto_batch_destroy(&b);
    }
    ck_assert_uint_eq(stats().epoch_refused, 3);
    ck_assert_uint_eq(stats().replies_stale, 0);

    /* The edges, taken: 2 epochs ahead (b and c polled), and 300 s back,
     * before b's and c's triggers were installed (expired, unpolled). */
    satisfy_abs("a", id, now + 2, "10.1.0.7", 40, 0, false);
    satisfy_abs("a", id, now - 300 * 100, "10.1.0.8", 40, 0, false);
    st = stats();
    ck_assert_uint_eq(st.epoch_refused, 3);
    ck_assert_uint_eq(st.decisions, 2);
    ck_assert_uint_eq(count_sent(NULL, TRUMPET__MESSAGE__BODY_POLL), 2);
    ck_assert_uint_eq(st.expired_unpolled, 2);

    /* Per host, and in the metrics. */
    struct tem_metrics m;
    tem_metrics_init(&m);
    tem_core_metrics(fx.core, &m);
    ck_assert_double_eq(sample_value(
        m.b.s, "trumpet_tem_reports_epoch_refused_total"), 3);
    ck_assert_double_eq(sample_value(
        m.b.s, "trumpet_tem_host_reports_epoch_refused_total{host=\"a\"}"),
        2);
    tem_metrics_destroy(&m);
}
END_TEST

/* A host whose trigger was installed after the epoch has no history of
 * it: counted expired at once, never polled. */
START_TEST(test_expired_unpolled)
{
    uint32_t id = sum_event();
    fx.now += 50 * MS;
    hello("d", "10.1.3.0/24");          /* Joins at epoch 5. */
    ack_installs("d");
    ack_installs("a");
    ack_installs("b");
    ack_installs("c");
    fx_clear_sent();

    /* Epoch 3: before d's trigger.  a, b, c polled (re-split: their
     * triggers are new too, but a member's install time is its first
     * Install's... all four were installed again: every part expired
     * but the reporter's). */
    satisfy("a", id, 3, "10.1.0.7", 100);
    struct tem_stats st = stats();
    ck_assert_uint_eq(st.decisions, 1);
    ck_assert_uint_eq(count_sent("p-d", TRUMPET__MESSAGE__BODY_POLL), 0);
    ck_assert_uint_ge(st.expired_unpolled, 1);
    ck_assert_uint_eq(st.polls_sent + st.expired_unpolled, 3);

    /* Epoch 7: after it, d is polled. */
    fx_clear_sent();
    satisfy("a", id, 7, "10.1.0.7", 100);
    ck_assert_uint_eq(count_sent("p-d", TRUMPET__MESSAGE__BODY_POLL), 1);
    ck_assert_uint_eq(stats().expired_unpolled, st.expired_unpolled);
}
END_TEST

/* A report number jumping by almost 2^62 (numbers are below it): a
 * protocol error, the session ends
 * with Bye; the jump is neither taken nor counted as skipped. */
START_TEST(test_seq_gap)
{
    fx_hello_version = TPROTO_VERSION_CONFIRM;
    hello_run("a", "10.1.0.0/24", 7);
    uint32_t id = add_event("svc", "filter=ip predicate=sum(volume) > 90 "
                            "group=nw_dst");
    ack_installs("a");
    fx_clear_sent();
    satisfy_seq("a", id, 1, "10.1.0.7", 10, 1, false);
    satisfy_seq("a", id, 2, "10.1.0.7", 10, (1ULL << 62) - 1, false);
    struct tem_stats st = stats();
    ck_assert_uint_eq(st.seq_errors, 1);
    ck_assert_uint_eq(st.reports_skipped, 0);
    ck_assert_uint_eq(st.hosts_gone, 1);
    ck_assert_uint_eq(st.satisfactions, 1);
    const Trumpet__Message *m = get_sent("p-a", TRUMPET__MESSAGE__BODY_BYE,
                                         0);
    ck_assert_msg(strstr(m->bye->reason, "protocol error"), "%s",
                  m->bye->reason);

    /* A gap within --max-seq-gap is the host's outage buffer dropping
     * reports: counted, taken. */
    hello_run("a", "10.1.0.0/24", 7);
    ack_installs("a");
    satisfy_seq("a", id, 3, "10.1.0.7", 10, 1000, false);
    st = stats();
    ck_assert_uint_eq(st.seq_errors, 1);
    ck_assert_uint_eq(st.reports_skipped, 998);
    ck_assert_uint_eq(st.satisfactions, 2);
}
END_TEST

/* A host's late satisfactions (its backlog after an outage) wait behind
 * the live ones: --late-per-turn a turn; the live one is polled in the
 * turn it came. */
START_TEST(test_late_paced)
{
    struct tem_config cfg;
    tem_core_destroy(fx.core);
    fx_config(&cfg);
    cfg.late_per_turn = 2;
    cfg.late_queue = 4;
    fx.core = tem_core_create(&cfg);
    fx_hello_version = TPROTO_VERSION_CONFIRM;
    hello_run("a", "10.1.0.0/24", 7);
    hello_run("b", "10.1.1.0/24", 8);
    uint32_t id = add_event("svc", "filter=ip predicate=sum(volume) > 90 "
                            "group=nw_dst");
    ack_installs("a");
    ack_installs("b");
    fx_clear_sent();

    /* One frame: 5 late reports of epochs 1..5, then a live one (6). */
    struct tproto_batch b;
    struct tpm_key k = group_key("10.1.0.7");
    tproto_batch_init(&b);
    for (uint64_t e = 1; e <= 6; e++) {
        tproto_add_satisfaction(&b, id, fx_epoch(e), &k, 10, 0, 1, 0);
        tproto_set_seq(&b, e, e < 6);
    }
    input("p-a", &b);
    tproto_batch_destroy(&b);

    /* The queue holds 4: the 5th late one was decided at once. */
    struct tem_stats st = stats();
    ck_assert_uint_eq(st.late_queued, 4);
    ck_assert_uint_eq(st.late_unpaced, 1);
    ck_assert_uint_eq(st.decisions, 2);
    const Trumpet__PollBatch *pb = get_sent(
        "p-b", TRUMPET__MESSAGE__BODY_POLL_BATCH, 0)->poll_batch;
    ck_assert_uint_eq(pb->epoch, EP(5));
    pb = get_sent("p-b", TRUMPET__MESSAGE__BODY_POLL_BATCH, 1)->poll_batch;
    ck_assert_uint_eq(pb->epoch, EP(6));
    /* Nothing confirmed past the ones waiting. */
    ck_assert_uint_eq(last_received("p-a"), 0);

    step();
    ck_assert_uint_eq(stats().decisions, 4);
    step();
    ck_assert_uint_eq(stats().decisions, 6);
    step();
    ck_assert_uint_eq(stats().decisions, 6);
    ck_assert_uint_eq(count_sent("p-b", TRUMPET__MESSAGE__BODY_POLL_BATCH),
                      6);
}
END_TEST

/* At most --host-decisions decisions a host starts per loop turn. */
START_TEST(test_host_decisions)
{
    struct tem_config cfg;
    tem_core_destroy(fx.core);
    fx_config(&cfg);
    cfg.host_decisions = 3;
    fx.core = tem_core_create(&cfg);
    uint32_t id = sum_event();

    struct tproto_batch b;
    tproto_batch_init(&b);
    for (int i = 0; i < 5; i++) {
        char dst[32];
        snprintf(dst, sizeof dst, "10.1.0.%d", i);
        struct tpm_key k = group_key(dst);
        tproto_add_satisfaction(&b, id, fx_epoch(1), &k, 10, 0, 1, 0);
    }
    input("p-a", &b);
    tproto_batch_destroy(&b);
    struct tem_stats st = stats();
    ck_assert_uint_eq(st.decisions, 3);
    ck_assert_uint_eq(st.host_decisions_full, 2);
    satisfy("a", id, 1, "10.1.0.9", 10);     /* Next turn. */
    ck_assert_uint_eq(stats().decisions, 4);
}
END_TEST

/* Log lines of the core. */
static char *fx_log[16];
static size_t fx_n_log;

static void
capture_log(enum tpm_log_level level, const char *msg)
{
    (void) level;
    if (fx_n_log < ARRAY_SIZE(fx_log)) {
        fx_log[fx_n_log++] = xstrdup(msg);
    }
}

/* A Bye reason with a newline (and other control characters) is one log
 * line, escaped: a host cannot forge lines of its own. */
START_TEST(test_log_escaped)
{
    hello("a", "10.1.0.0/24");
    tpm_log_set_hook(capture_log);
    struct tproto_batch b;
    tproto_batch_init(&b);
    tproto_add_bye(&b, "bye\n2026-01-01T00:00:00.000Z|tem|ERR|forged\tx\\");
    input("p-a", &b);
    tproto_batch_destroy(&b);
    tpm_log_set_hook(NULL);

    ck_assert_uint_eq(fx_n_log, 1);
    ck_assert_ptr_null(strchr(fx_log[0], '\n'));
    ck_assert_ptr_null(strchr(fx_log[0], '\t'));
    ck_assert_msg(strstr(fx_log[0], "said Bye (bye\\n2026-01-01T00:00:00.000Z"
                         "|tem|ERR|forged\\tx\\\\)"), "%s", fx_log[0]);
    for (size_t i = 0; i < fx_n_log; i++) {
        free(fx_log[i]);
    }
    fx_n_log = 0;
}
END_TEST

/* A host slot taken over by a new host frees the old one's poll queue
 * (the leak checks see it). */
START_TEST(test_slot_reuse)
{
    struct tem_config cfg;
    tem_core_destroy(fx.core);
    fx_config(&cfg);
    cfg.max_hosts = 2;
    fx.core = tem_core_create(&cfg);
    fx_hello_version = TPROTO_VERSION_CONFIRM;
    hello("a", "10.1.0.0/24");
    hello("b", "10.1.1.0/24");
    uint32_t id = add_event("svc", "filter=ip predicate=sum(volume) > 90 "
                            "group=nw_dst");
    ack_installs("a");
    ack_installs("b");
    satisfy("a", id, 1, "10.1.0.7", 40);     /* b gets a poll queue. */
    ck_assert_uint_eq(count_sent("p-b", TRUMPET__MESSAGE__BODY_POLL_BATCH),
                      1);
    struct tproto_batch b;
    tproto_batch_init(&b);
    tproto_add_bye(&b, "leaving");
    input("p-b", &b);
    tproto_batch_destroy(&b);
    hello("c", "10.1.1.0/24");              /* Takes b's slot. */
    ack_installs("c");
    fx_clear_sent();
    satisfy("a", id, 2, "10.1.0.7", 40);
    ck_assert_uint_eq(count_sent("p-c", TRUMPET__MESSAGE__BODY_POLL_BATCH),
                      1);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("tem");
    TCase *tc = tcase_create("tem");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_split_equal);
    tcase_add_test(tc, test_split_weighted);
    tcase_add_test(tc, test_install_prefixes);
    tcase_add_test(tc, test_tenant_placement);
    tcase_add_test(tc, test_poll_all_reply);
    tcase_add_test(tc, test_poll_not_yet);
    tcase_add_test(tc, test_late_reports);
    tcase_add_test(tc, test_received_full_batch);
    tcase_add_test(tc, test_poll_batch);
    tcase_add_test(tc, test_poll_mixed_versions);
    tcase_add_test(tc, test_tenants);
    tcase_add_test(tc, test_poll_deadline);
    tcase_add_test(tc, test_clock_real_step);
    tcase_add_test(tc, test_overrun);
    tcase_add_test(tc, test_overrun_hosts);
    tcase_add_test(tc, test_host_gone);
    tcase_add_test(tc, test_below_threshold);
    tcase_add_test(tc, test_atleast_and_max);
    tcase_add_test(tc, test_drilldown);
    tcase_add_test(tc, test_persistence);
    tcase_add_test(tc, test_event_errors);
    tcase_add_test(tc, test_sessions);
    tcase_add_test(tc, test_invalid_messages);
    tcase_add_test(tc, test_dos_threshold);
    tcase_add_test(tc, test_many_decisions);
    tcase_add_test(tc, test_auth);
    tcase_add_test(tc, test_event_ids);
    tcase_add_test(tc, test_allow_list);
    tcase_add_test(tc, test_metrics);
    tcase_add_test(tc, test_epoch_window);
    tcase_add_test(tc, test_expired_unpolled);
    tcase_add_test(tc, test_seq_gap);
    tcase_add_test(tc, test_late_paced);
    tcase_add_test(tc, test_host_decisions);
    tcase_add_test(tc, test_log_escaped);
    tcase_add_test(tc, test_slot_reuse);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
