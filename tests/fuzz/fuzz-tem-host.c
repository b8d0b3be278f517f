/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target: the TEM's input from hosts (tem_core_input() and the
 * timers of tem/tem-core.h), without sockets.
 *
 * Each input runs a fresh TEM core with a fixed set of network-wide
 * events (split and weighted thresholds, max and atleast across hosts,
 * scopes, a drill-down to a standby event, IPv6) and four peers.  The
 * input is a program: each step is an operation byte, then its
 * arguments:
 *
 *   raw frame      bytes as received from a peer (decoding and
 *                  validation of anything);
 *   hello          a host id (possibly another peer's), prefixes, a
 *                  version range, right or wrong epoch length;
 *   satisfaction   an event id, an epoch near now, a group key, a value,
 *                  flags and parts, maybe a sequence number and late flag;
 *   poll batch reply  to one of the last PollBatches (protocol version
 *                  3) the TEM sent that peer, entry for entry, any
 *                  statuses and values (or a wrong cookie or count);
 *   poll reply     to one of the last polls the TEM sent that peer (or
 *                  with a stale cookie), any status and value;
 *   ack, nack      of one of the last Installs, Removes or Configures;
 *   heartbeat, bye, TEM-to-host messages sent back;
 *   time           the clock moves on (1 ms to minutes) and the timers
 *                  run: deadlines, re-polls, timeouts, drill-down expiry;
 *   control        an event deleted or added back, a DoS threshold set.
 *
 * Structured messages of one peer gather into one frame until a step
 * with bit 0x80 sends it (as protocol version 1 with bit 0x40).  Every
 * frame the TEM sends must decode and validate, every alert be a JSON
 * object, and every JSON view render (tests/fuzz/fuzz-tem-util.h); ASan
 * and UBSan watch the rest, leaks included.
 */
#include <arpa/inet.h>
#include <json-c/json.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-tem-util.h"
#include "fuzz-util.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MS 1000000ULL

static const struct {
    const char *name, *definition;
} events[] = {
    { "heavy", "filter=ip,nw_dst=10.0.0.0/8 predicate=sum(volume) > 100KB "
      "group=nw_dst/24 then=hh:500ms" },
    { "hh", "filter=ip predicate=sum(volume) > 10KB standby=yes" },
    { "wsplit", "filter=udp predicate=count() > 100 split=weighted" },
    { "maxttl", "filter=tcp,nw_src=10.1.0.0/16 predicate=max(ttl) > 3 "
      "across=max interval=20ms" },
    { "quorum", "filter=ip predicate=avg(bytes) >= 1000 "
      "across=atleast:50% scope=10.1.0.0/16,fd00::/8 group=5tuple" },
    { "v6", "filter=ipv6 predicate=sum(packets) > 10 group=ipv6_dst/64" },
    { "tenant", "filter=udp,tun_id=5001,nw_dst=10.0.0.0/8 predicate=count() "
      "> 10 group=5tuple scope=vni=5001:10.0.0.0/8,10.1.0.0/16" },
};
#define N_EVENTS ARRAY_SIZE(events)

static const char *const prefix_sets[] = {
    NULL, "10.0.0.0/8", "10.1.0.0/16,fd00::/8", "192.168.0.0/16",
    "10.0.1.0/24", "::/0", "vni=5001:10.0.0.0/8,10.1.0.0/16",
    "vni=0x1389:10.0.1.0/24,vni=7:10.0.1.0/24",
};

static const char *const host_ids[] = { "h0", "h1", "h2", "h3", "h4" };

static const double values[] = {
    0, 1, 50, 150, 1e3, 5e4, 1.5e5, 1e6, 1e12, -1, 0.25, 1e300,
};

static void
make_key(struct fuzz_in *in, struct tpm_key *k)
{
    memset(k, 0, sizeof *k);
    switch (fuzz_u8(in) % 5) {
    case 0:                     /* A /24 of 10.0.0.0/8 (group of heavy). */
        k->ipver = 4;
        k->dst[0] = htonl(0x0a000000 | (fuzz_u8(in) % 4) << 8);
        break;
    case 1:                     /* A 5-tuple. */
        k->ipver = 4;
        k->src[0] = htonl(0x0a010000 | fuzz_u8(in));
        k->dst[0] = htonl(0x0a000100 | fuzz_u8(in));
        k->sport = 1000 + fuzz_u8(in) % 4;
        k->dport = 80;
        k->proto = 6;
        break;
    case 2:                     /* An IPv6 /64. */
        k->ipver = 6;
        k->dst[0] = htonl(0xfd000000);
        k->dst[1] = htonl(fuzz_u8(in) % 3);
        break;
    case 3:                     /* The empty group. */
        k->ipver = 4;
        break;
    default:                    /* Anything. */
        k->ipver = fuzz_u8(in) & 1 ? 6 : 4;
        for (int i = 0; i < 4; i++) {
            k->src[i] = k->ipver == 6 || !i ? fuzz_u32(in) : 0;
            k->dst[i] = k->ipver == 6 || !i ? fuzz_u32(in) : 0;
        }
        k->sport = fuzz_u16(in);
        k->dport = fuzz_u16(in);
        k->proto = fuzz_u8(in);
        break;
    }
}

static double
make_value(struct fuzz_in *in)
{
    uint8_t c = fuzz_u8(in);
    if (c < 0xf0) {
        return values[c % ARRAY_SIZE(values)];
    }
    uint64_t bits = fuzz_u64(in);
    double v;
    memcpy(&v, &bits, sizeof v);
    return isfinite(v) ? v : 0;
}

/* A recent command the TEM sent 'peer', of kind 'kind' (or any kind if
 * NOT_SET), chosen by 'pick'; NULL if none. */
static const struct fuzz_tem_cmd *
recent_cmd(const struct fuzz_tem *ft, int peer,
           Trumpet__Message__BodyCase kind, uint8_t pick)
{
    size_t n = MIN(ft->n_cmds[peer], (size_t) FUZZ_TEM_RECENT);
    for (size_t i = 0; i < n; i++) {
        const struct fuzz_tem_cmd *c
            = &ft->cmds[peer][(ft->n_cmds[peer] - 1 - (pick + i) % n)
                              % FUZZ_TEM_RECENT];
        if (kind == TRUMPET__MESSAGE__BODY__NOT_SET
            ? (c->kind != TRUMPET__MESSAGE__BODY_POLL
               && c->kind != TRUMPET__MESSAGE__BODY_POLL_BATCH)
            : c->kind == kind) {
            return c;
        }
    }
    return NULL;
}

static uint32_t
event_id(struct fuzz_in *in)
{
    uint8_t c = fuzz_u8(in);
    return c < 0xf0 ? 1 + c % N_EVENTS : fuzz_u32(in);
}

static void
step(struct fuzz_tem *ft, struct fuzz_in *in, struct tproto_batch *pending)
{
    uint8_t op = fuzz_u8(in);
    int peer = fuzz_u8(in) % FUZZ_TEM_PEERS;
    struct tproto_batch *b = &pending[peer];
    uint64_t epoch = ft->now / FUZZ_TEM_EPOCH_NS;
    struct tpm_key key;

    switch (op & 0x3f) {
    case 0: {                   /* Raw frame. */
        const uint8_t *p;
        size_t n = fuzz_bytes(in, 255, &p);
        char id[3] = { 'p', (char) ('0' + peer), '\0' };
        tem_core_input(ft->core, id, fuzz_u8(in) & 1 ? 2 : 1, p, n);
        tem_core_flush(ft->core);
        return;
    }
    case 1: {                   /* Hello. */
        uint8_t a = fuzz_u8(in), c = fuzz_u8(in);
        struct tpm_prefix *p = NULL;
        size_t n = 0;
        const char *text = prefix_sets[c % ARRAY_SIZE(prefix_sets)];
        if (text) {
            char *error = tpm_prefix_parse_list(text, &p, &n);
            FUZZ_CHECK(!error, "%s", error);
        }
        uint32_t pmds[3] = { 0, 1, 2 };
        tproto_add_hello(b, host_ids[a % ARRAY_SIZE(host_ids)], p, n,
                         a & 0x80 ? FUZZ_TEM_EPOCH_NS * 2 : FUZZ_TEM_EPOCH_NS,
                         ft->now, pmds, c >> 6, c & 0x20 ? NULL : "fuzz");
        Trumpet__Hello *h = b->msgs[b->n - 1]->hello;
        h->version_min = 1 + (a >> 5 & 3);
        h->version_max = h->version_min + (a >> 4 & 1);
        if (c & 0x10) {         /* An agent's run: 1 or 2. */
            tproto_set_instance(b, 1 + (c & 1));
        }
        free(p);
        break;
    }
    case 2: {                   /* Satisfaction. */
        uint32_t id = event_id(in);
        uint8_t back = fuzz_u8(in);
        make_key(in, &key);
        double v = make_value(in);
        uint8_t f = fuzz_u8(in);
        uint32_t parts = f >> 4 & 3;
        tproto_add_satisfaction(b, id, epoch - back % 16 + 1, &key, v,
                                f & 1, parts, MIN(parts, f >> 6));
        if (f & 2) {            /* Numbered (version 3), maybe late. */
            tproto_set_seq(b, 1 + fuzz_u8(in), f & 4);
        }
        break;
    }
    case 3: {                   /* Poll reply. */
        const struct fuzz_tem_cmd *c
            = recent_cmd(ft, peer, TRUMPET__MESSAGE__BODY_POLL, fuzz_u8(in));
        uint8_t s = fuzz_u8(in);
        double v = make_value(in);
        if (c) {
            tproto_add_poll_reply(b, c->cookie ^ (s & 0x80 ? 1 << 20 : 0),
                                  c->event_id, c->epoch, s % 6, v);
        } else {
            tproto_add_poll_reply(b, fuzz_u64(in), event_id(in), epoch,
                                  s % 6, v);
        }
        if (s & 0x40) {         /* Numbered (version 3), maybe late. */
            tproto_set_seq(b, 1 + fuzz_u8(in), s & 0x20);
        }
        break;
    }
    case 11: {                  /* PollBatchReply. */
        const struct fuzz_tem_cmd *c = recent_cmd(
            ft, peer, TRUMPET__MESSAGE__BODY_POLL_BATCH, fuzz_u8(in));
        uint8_t how = fuzz_u8(in);
        size_t n = c ? c->n_entries : 1 + how % 4;
        if (how & 0x40 && n > 1) {
            n--;                /* One entry short: stale. */
        }
        uint8_t *status = xmalloc(n);
        double *values = xmalloc(n * sizeof *values);
        for (size_t i = 0; i < n; i++) {
            status[i] = fuzz_u8(in) % 6;
            values[i] = status[i] % 2 ? 0 : make_value(in);
        }
        tproto_add_poll_batch_reply(b, (c ? c->cookie : fuzz_u64(in))
                                       ^ (how & 0x80 ? 1 : 0),
                                    c ? c->epoch : epoch, status, values, n);
        free(status);
        free(values);
        break;
    }
    case 4: {                   /* Ack or Nack. */
        const struct fuzz_tem_cmd *c
            = recent_cmd(ft, peer, TRUMPET__MESSAGE__BODY__NOT_SET,
                         fuzz_u8(in));
        uint8_t how = fuzz_u8(in);
        uint64_t cookie = c ? c->cookie : fuzz_u64(in);
        uint32_t id = c ? c->event_id : event_id(in);
        if (how & 1) {
            tproto_add_nack(b, cookie, id, "refused by the fuzzer");
        } else {
            tproto_add_ack(b, cookie, id);
        }
        break;
    }
    case 5:                     /* Heartbeat. */
        tproto_add_heartbeat(b, ft->now, fuzz_u8(in));
        break;
    case 6:                     /* Bye. */
        tproto_add_bye(b, fuzz_u8(in) & 1 ? "fuzz" : NULL);
        break;
    case 7: {                   /* A TEM-to-host message, sent back. */
        make_key(in, &key);
        uint8_t k = fuzz_u8(in) % 4;
        if (k == 0) {
            tproto_add_poll(b, 1, 1, epoch, &key);
        } else if (k == 1) {
            tproto_add_install(b, 1, 1, "x", "predicate=count() > 1", false,
                               0);
        } else if (k == 2) {
            tproto_add_welcome(b, 2, "tem", ft->now, 1000);
        } else {
            tproto_add_refuse(b, "no");
        }
        break;
    }
    case 8: {                   /* Time. */
        uint8_t t = fuzz_u8(in);
        uint64_t ns = (t & 0x80 ? (t & 0x7f) * 1000 * MS
                       : (t & 0x7f) * MS + 1);
        fuzz_tem_advance(ft, ns);
        return;
    }
    case 9: {                   /* Control: an event deleted or added. */
        uint8_t c = fuzz_u8(in);
        size_t e = c % N_EVENTS;
        char *error = (c & 0x80
                       ? tem_core_event_del(ft->core, events[e].name)
                       : tem_core_event_add(ft->core, events[e].name,
                                            events[e].definition, e + 1));
        free(error);
        tem_core_flush(ft->core);
        return;
    }
    case 10: {                  /* Control: a DoS threshold. */
        uint8_t c = fuzz_u8(in);
        struct json_object *result = NULL;
        char *error = tem_core_set_dos_threshold(
            ft->core, c & 0x80 ? NULL : host_ids[c % ARRAY_SIZE(host_ids)],
            c & 0x40 ? 0 : 4000 + c, &result);
        free(error);
        json_object_put(result);
        tem_core_flush(ft->core);
        return;
    }
    default:
        return;
    }
    if (op & 0x80) {
        fuzz_tem_input(ft, peer, op & 0x40 ? 1 : 0, b);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_tem ft;
    struct tproto_batch pending[FUZZ_TEM_PEERS];
    struct fuzz_in in = { data, size };

    fuzz_tem_init(&ft);
    for (size_t i = 0; i < N_EVENTS; i++) {
        char *error = tem_core_event_add(ft.core, events[i].name,
                                         events[i].definition, i + 1);
        FUZZ_CHECK(!error, "event %s: %s", events[i].name, error);
    }
    for (int i = 0; i < FUZZ_TEM_PEERS; i++) {
        tproto_batch_init(&pending[i]);
    }

    for (int n = 0; fuzz_left(&in) && n < 256; n++) {
        step(&ft, &in, pending);
    }
    for (int i = 0; i < FUZZ_TEM_PEERS; i++) {
        if (tproto_batch_count(&pending[i])) {
            fuzz_tem_input(&ft, i, 0, &pending[i]);
        }
        tproto_batch_destroy(&pending[i]);
    }

    /* Every pending decision ends by its deadline, those of the late
     * satisfactions still waiting too (they start a few a turn). */
    struct tem_stats st;
    for (int i = 0; i < 1024; i++) {
        fuzz_tem_advance(&ft, 200 * MS);
        tem_core_get_stats(ft.core, &st);
        if (st.decisions == st.decided_complete + st.decided_deadline) {
            break;
        }
    }
    FUZZ_CHECK(st.decisions == st.decided_complete + st.decided_deadline,
               "%llu decisions started, %llu decided",
               (unsigned long long) st.decisions,
               (unsigned long long) (st.decided_complete
                                     + st.decided_deadline));
    fuzz_tem_views(&ft);
    tem_core_bye_all(ft.core, "fuzz done");
    tem_core_flush(ft.core);
    fuzz_tem_destroy(&ft);
    return 0;
}
