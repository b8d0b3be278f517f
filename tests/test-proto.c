/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the TPM <-> TEM protocol layer (lib/tproto.h): every message
 * kind through batch encoding and decoding with all fields compared, one
 * test per validation rule (checked both on the message as built and
 * after a trip over the wire), garbage and truncated frames, the size,
 * batch and version limits of tproto_decode(), and address prefixes
 * checked against host-order arithmetic done here.
 */
#include <arpa/inet.h>
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packet.h"
#include "test-util.h"
#include "tproto.h"
#include "util.h"

static struct tpm_key
key4(const char *src, const char *dst, uint16_t sport, uint16_t dport,
     uint8_t proto)
{
    struct tpm_key k;
    memset(&k, 0, sizeof k);
    ck_assert_int_eq(inet_pton(AF_INET, src, k.src), 1);
    ck_assert_int_eq(inet_pton(AF_INET, dst, k.dst), 1);
    k.sport = sport;
    k.dport = dport;
    k.proto = proto;
    k.ipver = 4;
    return k;
}

static struct tpm_key
key6(const char *src, const char *dst, uint16_t sport, uint16_t dport,
     uint8_t proto)
{
    struct tpm_key k;
    memset(&k, 0, sizeof k);
    ck_assert_int_eq(inet_pton(AF_INET6, src, k.src), 1);
    ck_assert_int_eq(inet_pton(AF_INET6, dst, k.dst), 1);
    k.sport = sport;
    k.dport = dport;
    k.proto = proto;
    k.ipver = 6;
    return k;
}

static struct tpm_prefix
prefix(const char *s)
{
    struct tpm_prefix p;
    char *error = tpm_prefix_parse(s, &p);
    ck_assert_msg(!error, "%s: %s", s, error);
    return p;
}

/* Encodes 'b' as version 'version' (0: ours) and decodes it; the frame
 * must decode. */
static Trumpet__Frame *
round_trip(const struct tproto_batch *b, uint32_t version)
{
    uint8_t *data;
    size_t len = tproto_batch_encode(b, version, &data);
    const char *why = "unset";
    Trumpet__Frame *f = tproto_decode(data, len, &why);
    ck_assert_msg(f != NULL, "decode failed: %s", why);
    ck_assert_ptr_null(why);
    free(data);
    return f;
}

static void
check_key(const Trumpet__GroupKey *k, const struct tpm_key *expected)
{
    struct tpm_key got;
    ck_assert_ptr_nonnull(k);
    tproto_key_from_msg(k, &got, NULL);
    ck_assert_uint_eq(k->ipver, expected->ipver);
    ck_assert_uint_eq(k->src.len, expected->ipver == 4 ? 4 : 16);
    ck_assert_uint_eq(k->dst.len, expected->ipver == 4 ? 4 : 16);
    ck_assert_msg(tpm_key_equal(&got, expected), "group key differs");
    ck_assert_uint_eq(got.tun, 0);
}

START_TEST(test_round_trip_all)
{
    struct tproto_batch b;
    struct tpm_prefix prefixes[4] = {
        prefix("10.99.0.0/24"), prefix("10.98.1.7"), prefix("fd00:1::/32"),
        prefix("vni=5001:10.99.0.0/24"),
    };
    uint32_t pmds[3] = { 2, 3, 7 };
    struct tpm_key k4 = key4("10.99.0.1", "10.98.1.7", 40000, 80, 6);
    struct tpm_key k6 = key6("fd00:1::5", "fd00:2::1:9", 53, 65535, 17);

    tproto_batch_init(&b);
    tproto_add_hello(&b, "host-1.rack:2", prefixes, 4,
                     10 * 1000 * 1000, 1700000000123456789ULL, pmds, 3,
                     "trumpet 0.4");
    tproto_add_welcome(&b, 1, "tem_0", 1700000000999ULL, 250);
    tproto_add_refuse(&b, "host id host-1 in use");
    tproto_add_install(&b, 77, 5, "big-flow",
                       "filter=ip predicate=sum(volume) > 125KB", true,
                       62500.5);
    tproto_add_install(&b, 78, 6, "syn.count", "filter=tcp\npredicate="
                       "count() > 3", false, 0);
    tproto_add_remove(&b, 79, 5);
    tproto_add_ack(&b, 77, 5);
    tproto_add_nack(&b, 78, 6, "parse error: column 3");
    tproto_add_satisfaction(&b, 5, 170000000012ULL, &k4, 131072.25, 1, 4,
                            1);
    tproto_add_satisfaction(&b, 6, 170000000013ULL, &k6, 4, 0, 2, 0);
    tproto_add_poll(&b, 80, 5, 170000000011ULL, &k6);
    tproto_add_poll(&b, 81, 6, 170000000010ULL, &k4);
    tproto_add_poll_reply(&b, 80, 5, 170000000011ULL,
                          TRUMPET__POLL_STATUS__POLL_INCOMPLETE, 99.5);
    tproto_add_poll_reply(&b, 81, 6, 170000000010ULL,
                          TRUMPET__POLL_STATUS__POLL_EXPIRED, 0);
    tproto_add_heartbeat(&b, 1700000001000000000ULL, 12345678901ULL);
    tproto_add_bye(&b, "shutting down");
    tproto_add_bye(&b, NULL);
    tproto_add_configure(&b, 82, true, 4000);
    tproto_add_configure(&b, 83, true, UINT32_MAX);
    tproto_add_configure(&b, 84, true, 0);
    tproto_add_ack(&b, 82, 0);
    tproto_add_nack(&b, 83, 0, "DoS threshold not supported here");
    ck_assert_uint_eq(tproto_batch_count(&b), 22);
    for (size_t i = 0; i < b.n; i++) {
        const char *why = tproto_validate(b.msgs[i]);
        ck_assert_msg(!why, "message %zu as built: %s", i, why);
    }

    Trumpet__Frame *f = round_trip(&b, 0);
    ck_assert_uint_eq(f->version, TPROTO_VERSION_MAX);
    ck_assert_uint_eq(f->n_messages, 22);
    for (size_t i = 0; i < f->n_messages; i++) {
        const char *why = tproto_validate(f->messages[i]);
        ck_assert_msg(!why, "message %zu decoded: %s", i, why);
    }
    Trumpet__Message **m = f->messages;

    ck_assert_int_eq(m[0]->body_case, TRUMPET__MESSAGE__BODY_HELLO);
    const Trumpet__Hello *h = m[0]->hello;
    ck_assert_uint_eq(h->version_min, TPROTO_VERSION_MIN);
    ck_assert_uint_eq(h->version_max, TPROTO_VERSION_MAX);
    ck_assert_str_eq(h->host_id, "host-1.rack:2");
    ck_assert_uint_eq(h->n_prefixes, 4);
    for (size_t i = 0; i < 4; i++) {
        struct tpm_prefix p;
        tproto_prefix_from_msg(h->prefixes[i], &p);
        ck_assert_int_eq(memcmp(&p, &prefixes[i], sizeof p), 0);
    }
    ck_assert(!h->prefixes[0]->has_tun_id);
    ck_assert(h->prefixes[3]->has_tun_id);
    ck_assert_uint_eq(h->prefixes[3]->tun_id, 5001);
    ck_assert_uint_eq(h->prefixes[1]->len, 32);
    ck_assert_uint_eq(h->prefixes[2]->addr.len, 16);
    ck_assert_uint_eq(h->epoch_ns, 10 * 1000 * 1000);
    ck_assert_uint_eq(h->clock_ns, 1700000000123456789ULL);
    ck_assert_uint_eq(h->n_pmd_ids, 3);
    ck_assert_uint_eq(h->pmd_ids[0], 2);
    ck_assert_uint_eq(h->pmd_ids[2], 7);
    ck_assert_str_eq(h->software, "trumpet 0.4");

    ck_assert_int_eq(m[1]->body_case, TRUMPET__MESSAGE__BODY_WELCOME);
    ck_assert_uint_eq(m[1]->welcome->version, 1);
    ck_assert_str_eq(m[1]->welcome->tem_id, "tem_0");
    ck_assert_uint_eq(m[1]->welcome->clock_ns, 1700000000999ULL);
    ck_assert_uint_eq(m[1]->welcome->heartbeat_ms, 250);

    ck_assert_int_eq(m[2]->body_case, TRUMPET__MESSAGE__BODY_REFUSE);
    ck_assert_str_eq(m[2]->refuse->reason, "host id host-1 in use");
    ck_assert(m[2]->refuse->has_version_min);
    ck_assert(m[2]->refuse->has_version_max);
    ck_assert_uint_eq(m[2]->refuse->version_min, TPROTO_VERSION_MIN);
    ck_assert_uint_eq(m[2]->refuse->version_max, TPROTO_VERSION_MAX);

    ck_assert_int_eq(m[3]->body_case, TRUMPET__MESSAGE__BODY_INSTALL);
    ck_assert_uint_eq(m[3]->install->cookie, 77);
    ck_assert_uint_eq(m[3]->install->event_id, 5);
    ck_assert_str_eq(m[3]->install->name, "big-flow");
    ck_assert_str_eq(m[3]->install->definition,
                     "filter=ip predicate=sum(volume) > 125KB");
    ck_assert(m[3]->install->has_threshold);
    ck_assert_double_eq(m[3]->install->threshold, 62500.5);
    ck_assert_str_eq(m[4]->install->name, "syn.count");
    ck_assert_str_eq(m[4]->install->definition,
                     "filter=tcp\npredicate=count() > 3");
    ck_assert(!m[4]->install->has_threshold);

    ck_assert_int_eq(m[5]->body_case, TRUMPET__MESSAGE__BODY_REMOVE);
    ck_assert_uint_eq(m[5]->remove->cookie, 79);
    ck_assert_uint_eq(m[5]->remove->event_id, 5);
    ck_assert_int_eq(m[6]->body_case, TRUMPET__MESSAGE__BODY_ACK);
    ck_assert_uint_eq(m[6]->ack->cookie, 77);
    ck_assert_uint_eq(m[6]->ack->event_id, 5);
    ck_assert_int_eq(m[7]->body_case, TRUMPET__MESSAGE__BODY_NACK);
    ck_assert_uint_eq(m[7]->nack->cookie, 78);
    ck_assert_uint_eq(m[7]->nack->event_id, 6);
    ck_assert_str_eq(m[7]->nack->reason, "parse error: column 3");

    ck_assert_int_eq(m[8]->body_case, TRUMPET__MESSAGE__BODY_SATISFACTION);
    const Trumpet__Satisfaction *s = m[8]->satisfaction;
    ck_assert_uint_eq(s->event_id, 5);
    ck_assert_uint_eq(s->epoch, 170000000012ULL);
    check_key(s->group, &k4);
    ck_assert_double_eq(s->value, 131072.25);
    ck_assert(s->has_flags && s->has_n_parts && s->has_n_missing);
    ck_assert_uint_eq(s->flags, 1);
    ck_assert_uint_eq(s->n_parts, 4);
    ck_assert_uint_eq(s->n_missing, 1);
    s = m[9]->satisfaction;
    ck_assert_uint_eq(s->event_id, 6);
    ck_assert_uint_eq(s->epoch, 170000000013ULL);
    check_key(s->group, &k6);
    ck_assert_uint_eq(s->group->sport, 53);
    ck_assert_uint_eq(s->group->dport, 65535);
    ck_assert_double_eq(s->value, 4);
    ck_assert_uint_eq(s->flags, 0);
    ck_assert_uint_eq(s->n_parts, 2);

    ck_assert_int_eq(m[10]->body_case, TRUMPET__MESSAGE__BODY_POLL);
    ck_assert_uint_eq(m[10]->poll->cookie, 80);
    ck_assert_uint_eq(m[10]->poll->event_id, 5);
    ck_assert_uint_eq(m[10]->poll->epoch, 170000000011ULL);
    check_key(m[10]->poll->group, &k6);
    check_key(m[11]->poll->group, &k4);

    ck_assert_int_eq(m[12]->body_case, TRUMPET__MESSAGE__BODY_POLL_REPLY);
    ck_assert_uint_eq(m[12]->poll_reply->cookie, 80);
    ck_assert_uint_eq(m[12]->poll_reply->event_id, 5);
    ck_assert_uint_eq(m[12]->poll_reply->epoch, 170000000011ULL);
    ck_assert_int_eq(m[12]->poll_reply->status,
                     TRUMPET__POLL_STATUS__POLL_INCOMPLETE);
    ck_assert(m[12]->poll_reply->has_value);
    ck_assert_double_eq(m[12]->poll_reply->value, 99.5);
    ck_assert_int_eq(m[13]->poll_reply->status,
                     TRUMPET__POLL_STATUS__POLL_EXPIRED);

    ck_assert_int_eq(m[14]->body_case, TRUMPET__MESSAGE__BODY_HEARTBEAT);
    ck_assert_uint_eq(m[14]->heartbeat->clock_ns, 1700000001000000000ULL);
    ck_assert_uint_eq(m[14]->heartbeat->seq, 12345678901ULL);

    ck_assert_int_eq(m[15]->body_case, TRUMPET__MESSAGE__BODY_BYE);
    ck_assert_str_eq(m[15]->bye->reason, "shutting down");
    ck_assert_ptr_null(m[16]->bye->reason);

    ck_assert_int_eq(m[17]->body_case, TRUMPET__MESSAGE__BODY_CONFIGURE);
    ck_assert_uint_eq(m[17]->configure->cookie, 82);
    ck_assert(m[17]->configure->has_dos_threshold);
    ck_assert_uint_eq(m[17]->configure->dos_threshold, 4000);
    ck_assert_uint_eq(m[18]->configure->cookie, 83);
    ck_assert_uint_eq(m[18]->configure->dos_threshold, UINT32_MAX);
    ck_assert(m[19]->configure->has_dos_threshold);
    ck_assert_uint_eq(m[19]->configure->dos_threshold, 0);
    ck_assert_int_eq(m[20]->body_case, TRUMPET__MESSAGE__BODY_ACK);
    ck_assert_uint_eq(m[20]->ack->cookie, 82);
    ck_assert_uint_eq(m[20]->ack->event_id, 0);
    ck_assert_int_eq(m[21]->body_case, TRUMPET__MESSAGE__BODY_NACK);
    ck_assert_uint_eq(m[21]->nack->cookie, 83);
    ck_assert_uint_eq(m[21]->nack->event_id, 0);
    ck_assert_str_eq(m[21]->nack->reason,
                     "DoS threshold not supported here");

    tproto_free(f);
    tproto_batch_destroy(&b);
}
END_TEST

/* Thousands of satisfactions with random keys in one frame, twice through
 * the same batch (clear keeps working). */
START_TEST(test_round_trip_many)
{
    enum { N = 3000 };
    struct test_rng rng;
    struct tproto_batch b;
    struct tpm_key *keys = xcalloc(N, sizeof *keys);

    test_rng_seed(&rng, 42);
    tproto_batch_init(&b);
    for (int round = 0; round < 2; round++) {
        tproto_batch_clear(&b);
        ck_assert_uint_eq(tproto_batch_count(&b), 0);
        for (int i = 0; i < N; i++) {
            struct tpm_key *k = &keys[i];
            memset(k, 0, sizeof *k);
            k->ipver = test_rng_range(&rng, 2) ? 6 : 4;
            for (int w = 0; w < (k->ipver == 4 ? 1 : 4); w++) {
                k->src[w] = test_rng_u32(&rng);
                k->dst[w] = test_rng_u32(&rng);
            }
            k->sport = test_rng_u32(&rng);
            k->dport = test_rng_u32(&rng);
            k->proto = test_rng_u32(&rng);
            tproto_add_satisfaction(&b, i + 1, 1000000 + i, k, i * 0.5,
                                    i & 1, 1 + i % 8, 0);
        }
        ck_assert_uint_eq(tproto_batch_count(&b), N);

        Trumpet__Frame *f = round_trip(&b, 0);
        ck_assert_uint_eq(f->n_messages, N);
        for (int i = 0; i < N; i++) {
            const Trumpet__Message *m = f->messages[i];
            TCHECK(!tproto_validate(m), "%d: %s", i, tproto_validate(m));
            TCHECK(m->body_case == TRUMPET__MESSAGE__BODY_SATISFACTION);
            const Trumpet__Satisfaction *s = m->satisfaction;
            struct tpm_key got;
            tproto_key_from_msg(s->group, &got, NULL);
            TCHECK(tpm_key_equal(&got, &keys[i]), "key %d", i);
            TCHECK(s->event_id == (uint32_t) i + 1);
            TCHECK(s->epoch == 1000000ULL + i);
            TCHECK(s->value == i * 0.5);
            TCHECK(s->flags == (uint32_t) (i & 1));
            uint32_t parts = 1 + i % 8;
            TCHECK(s->n_parts == parts);
        }
        tproto_free(f);
    }
    tproto_batch_destroy(&b);
    free(keys);
}
END_TEST

/* Reasons are truncated to TPROTO_MAX_REASON bytes, so that a long error
 * still reaches the peer. */
START_TEST(test_reason_truncated)
{
    char *reason = xmalloc(TPROTO_MAX_REASON * 3);
    memset(reason, 'x', TPROTO_MAX_REASON * 3 - 1);
    reason[TPROTO_MAX_REASON * 3 - 1] = '\0';

    struct tproto_batch b;
    tproto_batch_init(&b);
    tproto_add_nack(&b, 1, 2, reason);
    tproto_add_refuse(&b, reason);
    tproto_add_bye(&b, reason);
    Trumpet__Frame *f = round_trip(&b, 0);
    ck_assert_uint_eq(strlen(f->messages[0]->nack->reason),
                      TPROTO_MAX_REASON);
    ck_assert_uint_eq(strlen(f->messages[1]->refuse->reason),
                      TPROTO_MAX_REASON);
    ck_assert_uint_eq(strlen(f->messages[2]->bye->reason),
                      TPROTO_MAX_REASON);
    for (size_t i = 0; i < 3; i++) {
        ck_assert_ptr_null(tproto_validate(f->messages[i]));
    }
    tproto_free(f);
    tproto_batch_destroy(&b);
    free(reason);
}
END_TEST

/* Validation: one case per rule.  Each case builds a valid message of one
 * kind, breaks one thing and expects a reason naming the field. */

static void
make_hello(struct tproto_batch *b)
{
    struct tpm_prefix p[2] = { prefix("10.1.0.0/16"), prefix("fd00::/8") };
    uint32_t pmds[2] = { 1, 3 };
    tproto_add_hello(b, "host-1", p, 2, 1000000, 5, pmds, 2, "sw 1.0");
}

static void
make_welcome(struct tproto_batch *b)
{
    tproto_add_welcome(b, 1, "tem", 5, 1000);
}

static void
make_refuse(struct tproto_batch *b)
{
    tproto_add_refuse(b, "no");
}

static void
make_install(struct tproto_batch *b)
{
    tproto_add_install(b, 1, 2, "e1", "filter=ip predicate=count() > 1",
                       true, 10);
}

static void
make_remove(struct tproto_batch *b)
{
    tproto_add_remove(b, 1, 2);
}

static void
make_configure(struct tproto_batch *b)
{
    tproto_add_configure(b, 1, true, 4000);
}

static void
make_nack(struct tproto_batch *b)
{
    tproto_add_nack(b, 1, 2, "bad");
}

static void
make_satisfaction(struct tproto_batch *b)
{
    struct tpm_key k = key4("10.0.0.1", "10.0.0.2", 1, 2, 6);
    tproto_add_satisfaction(b, 2, 100, &k, 5.5, 1, 3, 1);
}

static void
make_satisfaction6(struct tproto_batch *b)
{
    struct tpm_key k = key6("fd00::1", "fd00::2", 1, 2, 17);
    tproto_add_satisfaction(b, 2, 100, &k, 5.5, 0, 2, 0);
}

static void
make_satisfaction_ipver0(struct tproto_batch *b)
{
    struct tpm_key k;
    memset(&k, 0, sizeof k);
    tproto_add_satisfaction(b, 2, 100, &k, 5.5, 0, 2, 0);
}

static void
make_poll(struct tproto_batch *b)
{
    struct tpm_key k = key4("10.0.0.1", "10.0.0.2", 1, 2, 6);
    tproto_add_poll(b, 1, 2, 100, &k);
}

static void
make_poll_reply(struct tproto_batch *b)
{
    tproto_add_poll_reply(b, 1, 2, 100, TRUMPET__POLL_STATUS__POLL_OK, 3);
}

static void
make_heartbeat(struct tproto_batch *b)
{
    tproto_add_heartbeat(b, 1, 2);
}

static void
make_bye(struct tproto_batch *b)
{
    tproto_add_bye(b, "bye");
}

static char long_text[TPROTO_MAX_DEFINITION + 2];

/* Returns a static string of 'n' letters (n <= TPROTO_MAX_DEFINITION + 1). */
static char *
long_string(size_t n)
{
    memset(long_text, 'a', n);
    long_text[n] = '\0';
    return long_text;
}

#define MUTATOR(NAME, STMT)                             \
    static void                                         \
    NAME(Trumpet__Message *m)                           \
    {                                                   \
        STMT;                                           \
    }

MUTATOR(hello_vmin0, m->hello->version_min = 0)
MUTATOR(hello_vmin_above, (m->hello->version_min = 3,
                           m->hello->version_max = 2))
MUTATOR(hello_id_null, m->hello->host_id = NULL)
MUTATOR(hello_id_empty, m->hello->host_id[0] = '\0')
MUTATOR(hello_id_long, m->hello->host_id = long_string(TPROTO_MAX_ID + 1))
MUTATOR(hello_id_chars, m->hello->host_id[2] = '/')
MUTATOR(hello_nprefixes, m->hello->n_prefixes = TPROTO_MAX_PREFIXES + 1)
MUTATOR(hello_prefix_ipver, m->hello->prefixes[1]->ipver = 5)
MUTATOR(hello_prefix_len4, m->hello->prefixes[0]->addr.len = 5)
MUTATOR(hello_prefix_len6, m->hello->prefixes[1]->addr.len = 4)
MUTATOR(hello_prefix_plen4, m->hello->prefixes[0]->len = 33)
MUTATOR(hello_prefix_tun, (m->hello->prefixes[0]->has_tun_id = true,
                           m->hello->prefixes[0]->tun_id = 0x1000000))
MUTATOR(hello_prefix_plen6, m->hello->prefixes[1]->len = 129)
MUTATOR(hello_prefix_host, m->hello->prefixes[0]->addr.data[3] = 1)
MUTATOR(hello_epoch0, m->hello->epoch_ns = 0)
MUTATOR(hello_epoch_long, m->hello->epoch_ns = TPROTO_MAX_EPOCH_NS + 1)
MUTATOR(hello_npmds, m->hello->n_pmd_ids = TPROTO_MAX_PMDS + 1)
MUTATOR(hello_pmd_dup, m->hello->pmd_ids[1] = m->hello->pmd_ids[0])
MUTATOR(hello_software, m->hello->software[1] = '\x01')
MUTATOR(welcome_version0, m->welcome->version = 0)
MUTATOR(welcome_id_empty, m->welcome->tem_id[0] = '\0')
MUTATOR(welcome_id_chars, m->welcome->tem_id[1] = ' ')
MUTATOR(welcome_hb0, m->welcome->heartbeat_ms = 0)
MUTATOR(welcome_hb_long,
        m->welcome->heartbeat_ms = TPROTO_MAX_HEARTBEAT_MS + 1)
MUTATOR(refuse_empty, m->refuse->reason[0] = '\0')
MUTATOR(refuse_chars, m->refuse->reason[0] = '\x1b')
MUTATOR(refuse_versions, (m->refuse->version_min = 4,
                          m->refuse->version_max = 3))
MUTATOR(install_id0, m->install->event_id = 0)
MUTATOR(install_name_empty, m->install->name[0] = '\0')
MUTATOR(install_name_chars, m->install->name[1] = ':')
MUTATOR(install_name_long,
        m->install->name = long_string(TPROTO_MAX_ID + 1))
MUTATOR(install_def_null, m->install->definition = NULL)
MUTATOR(install_def_empty, m->install->definition[0] = '\0')
MUTATOR(install_def_long,
        m->install->definition = long_string(TPROTO_MAX_DEFINITION + 1))
MUTATOR(install_def_chars, m->install->definition[0] = '\r')
MUTATOR(install_nan, m->install->threshold = NAN)
MUTATOR(install_inf, m->install->threshold = INFINITY)
MUTATOR(install_negative, m->install->threshold = -1)
MUTATOR(remove_id0, m->remove->event_id = 0)
MUTATOR(configure_nothing, m->configure->has_dos_threshold = false)
MUTATOR(nack_null, m->nack->reason = NULL)
MUTATOR(nack_empty, m->nack->reason[0] = '\0')
MUTATOR(sat_id0, m->satisfaction->event_id = 0)
MUTATOR(sat_epoch, m->satisfaction->epoch = TPROTO_MAX_EPOCH)
MUTATOR(sat_group_null, m->satisfaction->group = NULL)
MUTATOR(sat_ipver, m->satisfaction->group->ipver = 5)
MUTATOR(sat_src4, m->satisfaction->group->src.len = 5)
MUTATOR(sat_dst4, m->satisfaction->group->dst.len = 16)
MUTATOR(sat_src6, m->satisfaction->group->src.len = 4)
MUTATOR(sat_dst6, m->satisfaction->group->dst.len = 15)
MUTATOR(sat_sport, m->satisfaction->group->sport = 65536)
MUTATOR(sat_dport, m->satisfaction->group->dport = 70000)
MUTATOR(sat_proto, m->satisfaction->group->proto = 256)
MUTATOR(sat_nan, m->satisfaction->value = NAN)
MUTATOR(sat_inf, m->satisfaction->value = -INFINITY)
MUTATOR(sat_flags, m->satisfaction->flags = 0x3)
MUTATOR(sat_parts, m->satisfaction->n_parts = TPROTO_MAX_PMDS + 1)
MUTATOR(sat_missing, m->satisfaction->n_missing = 4)
MUTATOR(sat_missing_alone, m->satisfaction->has_n_parts = false)
MUTATOR(poll_id0, m->poll->event_id = 0)
MUTATOR(poll_epoch, m->poll->epoch = UINT64_MAX)
MUTATOR(poll_sport, m->poll->group->sport = 65536)
MUTATOR(poll_ipver, m->poll->group->ipver = 0)
MUTATOR(sat_tun_id, (m->satisfaction->group->has_tun_id = true,
                     m->satisfaction->group->tun_id = 0x1000000))
MUTATOR(poll_tun_id, (m->poll->group->has_tun_id = true,
                      m->poll->group->tun_id = UINT32_MAX))
MUTATOR(reply_id0, m->poll_reply->event_id = 0)
MUTATOR(hello_instance0,
        (m->hello->has_instance = true, m->hello->instance = 0))
MUTATOR(sat_seq0, (m->satisfaction->has_seq = true,
                   m->satisfaction->seq = 0))
MUTATOR(sat_seq_big, (m->satisfaction->has_seq = true,
                      m->satisfaction->seq = TPROTO_MAX_SEQ))
MUTATOR(sat_late_alone, m->satisfaction->has_late = true)
MUTATOR(reply_seq0, (m->poll_reply->has_seq = true,
                     m->poll_reply->seq = 0))
MUTATOR(reply_late_alone, (m->poll_reply->has_late = true,
                           m->poll_reply->late = true))
MUTATOR(hb_received, (m->heartbeat->has_received = true,
                      m->heartbeat->received = TPROTO_MAX_SEQ))
MUTATOR(reply_epoch, m->poll_reply->epoch = TPROTO_MAX_EPOCH + 5)
MUTATOR(reply_status, m->poll_reply->status = 6)
MUTATOR(reply_inf, m->poll_reply->value = INFINITY)
MUTATOR(reply_no_value, m->poll_reply->has_value = false)
MUTATOR(reply_incomplete_no_value,
        (m->poll_reply->has_value = false,
         m->poll_reply->status = TRUMPET__POLL_STATUS__POLL_INCOMPLETE))
MUTATOR(bye_chars, m->bye->reason[0] = '\x07')
MUTATOR(no_body, m->body_case = TRUMPET__MESSAGE__BODY__NOT_SET)
MUTATOR(body_null, m->heartbeat = NULL)
MUTATOR(none, (void) m)

static const struct reject_case {
    void (*make)(struct tproto_batch *);
    void (*mutate)(Trumpet__Message *);
    bool wire;                  /* Encodable: check after decoding too. */
    const char *expect;         /* In the reason. */
} reject_cases[] = {
    { make_hello, hello_vmin0, true, "hello: version_min is 0" },
    { make_hello, hello_vmin_above, true, "hello: version_min above" },
    { make_hello, hello_id_null, false, "hello: host_id missing" },
    { make_hello, hello_id_empty, true, "hello: host_id empty" },
    { make_hello, hello_id_long, true, "hello: host_id longer than 63" },
    { make_hello, hello_id_chars, true, "hello: host_id has a character" },
    { make_hello, hello_nprefixes, false, "hello: prefixes: more than" },
    { make_hello, hello_prefix_ipver, true, "hello: prefix: ipver" },
    { make_hello, hello_prefix_len4, true,
      "hello: prefix: addr is not 4 bytes" },
    { make_hello, hello_prefix_len6, true,
      "hello: prefix: addr is not 16 bytes" },
    { make_hello, hello_prefix_plen4, true, "hello: prefix: len above 32" },
    { make_hello, hello_prefix_tun, true,
      "hello: prefix: tun_id above 0xffffff" },
    { make_hello, hello_prefix_plen6, true,
      "hello: prefix: len above 128" },
    { make_hello, hello_prefix_host, true,
      "hello: prefix: addr has bits set beyond len" },
    { make_hello, hello_epoch0, true, "hello: epoch_ns is 0" },
    { make_hello, hello_epoch_long, true, "hello: epoch_ns longer" },
    { make_hello, hello_npmds, false, "hello: pmd_ids: more than" },
    { make_hello, hello_pmd_dup, true, "hello: pmd_ids: duplicate" },
    { make_hello, hello_software, true, "hello: software has a character" },
    { make_hello, hello_instance0, true, "hello: instance is 0" },
    { make_satisfaction, sat_seq0, true, "satisfaction: seq 0 or not" },
    { make_satisfaction, sat_seq_big, true,
      "satisfaction: seq 0 or not below 2^62" },
    { make_satisfaction, sat_late_alone, true,
      "satisfaction: late without seq" },
    { make_poll_reply, reply_seq0, true, "poll_reply: seq 0 or not" },
    { make_poll_reply, reply_late_alone, true,
      "poll_reply: late without seq" },
    { make_heartbeat, hb_received, true,
      "heartbeat: received not below 2^62" },
    { make_welcome, welcome_version0, true, "welcome: version is 0" },
    { make_welcome, welcome_id_empty, true, "welcome: tem_id empty" },
    { make_welcome, welcome_id_chars, true, "welcome: tem_id has" },
    { make_welcome, welcome_hb0, true, "welcome: heartbeat_ms is 0" },
    { make_welcome, welcome_hb_long, true, "welcome: heartbeat_ms above" },
    { make_refuse, refuse_empty, true, "refuse: reason empty" },
    { make_refuse, refuse_chars, true, "refuse: reason has a character" },
    { make_refuse, refuse_versions, true, "refuse: version_min above" },
    { make_install, install_id0, true, "install: event_id is 0" },
    { make_install, install_name_empty, true, "install: name empty" },
    { make_install, install_name_chars, true, "install: name has" },
    { make_install, install_name_long, true, "install: name longer" },
    { make_install, install_def_null, false, "install: definition missing" },
    { make_install, install_def_empty, true, "install: definition empty" },
    { make_install, install_def_long, true,
      "install: definition longer than 4096" },
    { make_install, install_def_chars, true, "install: definition has" },
    { make_install, install_nan, true, "install: threshold not finite" },
    { make_install, install_inf, true, "install: threshold not finite" },
    { make_install, install_negative, true, "install: threshold negative" },
    { make_remove, remove_id0, true, "remove: event_id is 0" },
    { make_configure, configure_nothing, true,
      "configure: no setting given (dos_threshold missing)" },
    { make_nack, nack_null, false, "nack: reason missing" },
    { make_nack, nack_empty, true, "nack: reason empty" },
    { make_satisfaction, sat_id0, true, "satisfaction: event_id is 0" },
    { make_satisfaction, sat_epoch, true, "satisfaction: epoch not below" },
    { make_satisfaction, sat_group_null, false,
      "satisfaction: group missing" },
    { make_satisfaction, sat_ipver, true, "satisfaction: group: ipver" },
    { make_satisfaction_ipver0, none, true, "satisfaction: group: ipver" },
    { make_satisfaction, sat_src4, true,
      "satisfaction: group: src is not 4 bytes for IPv4" },
    { make_satisfaction, sat_dst4, true,
      "satisfaction: group: dst is not 4 bytes for IPv4" },
    { make_satisfaction6, sat_src6, true,
      "satisfaction: group: src is not 16 bytes for IPv6" },
    { make_satisfaction6, sat_dst6, true,
      "satisfaction: group: dst is not 16 bytes for IPv6" },
    { make_satisfaction, sat_sport, true, "satisfaction: group: sport" },
    { make_satisfaction, sat_dport, true, "satisfaction: group: dport" },
    { make_satisfaction, sat_proto, true, "satisfaction: group: proto" },
    { make_satisfaction, sat_nan, true, "satisfaction: value not finite" },
    { make_satisfaction, sat_inf, true, "satisfaction: value not finite" },
    { make_satisfaction, sat_flags, true, "satisfaction: flags" },
    { make_satisfaction, sat_parts, true, "satisfaction: n_parts above" },
    { make_satisfaction, sat_missing, true,
      "satisfaction: n_missing above n_parts" },
    { make_satisfaction, sat_missing_alone, true,
      "satisfaction: n_missing above n_parts" },
    { make_poll, poll_id0, true, "poll: event_id is 0" },
    { make_poll, poll_epoch, true, "poll: epoch not below" },
    { make_poll, poll_sport, true, "poll: group: sport" },
    { make_poll, poll_ipver, true, "poll: group: ipver" },
    { make_satisfaction, sat_tun_id, true,
      "satisfaction: group: tun_id above 0xffffff" },
    { make_poll, poll_tun_id, true, "poll: group: tun_id above 0xffffff" },
    { make_poll_reply, reply_id0, true, "poll_reply: event_id is 0" },
    { make_poll_reply, reply_epoch, true, "poll_reply: epoch not below" },
    { make_poll_reply, reply_status, true, "poll_reply: status unknown" },
    { make_poll_reply, reply_inf, true, "poll_reply: value not finite" },
    { make_poll_reply, reply_no_value, true, "poll_reply: value missing" },
    { make_poll_reply, reply_incomplete_no_value, true,
      "poll_reply: value missing" },
    { make_bye, bye_chars, true, "bye: reason has a character" },
    { make_heartbeat, no_body, true, "message has no body" },
    { make_heartbeat, body_null, false, "message body missing" },
};

/* Every base message is valid as built and over the wire. */
START_TEST(test_valid_base)
{
    const struct reject_case *c = &reject_cases[_i];
    struct tproto_batch b;

    if (c->make == make_satisfaction_ipver0) {
        return;
    }
    tproto_batch_init(&b);
    c->make(&b);
    ck_assert_uint_eq(b.n, 1);
    const char *why = tproto_validate(b.msgs[0]);
    ck_assert_msg(!why, "case %d: %s", _i, why);
    Trumpet__Frame *f = round_trip(&b, 0);
    why = tproto_validate(f->messages[0]);
    ck_assert_msg(!why, "case %d decoded: %s", _i, why);
    tproto_free(f);
    tproto_batch_destroy(&b);
}
END_TEST

START_TEST(test_reject)
{
    const struct reject_case *c = &reject_cases[_i];
    struct tproto_batch b;

    tproto_batch_init(&b);
    c->make(&b);
    c->mutate(b.msgs[0]);
    const char *why = tproto_validate(b.msgs[0]);
    ck_assert_msg(why && strstr(why, c->expect),
                  "case %d: expected \"%s\", got \"%s\"", _i, c->expect,
                  why ? why : "(valid)");

    if (c->wire) {
        /* Either the frame is not decodable or the same rule fires. */
        uint8_t *data;
        size_t len = tproto_batch_encode(&b, 0, &data);
        const char *error;
        Trumpet__Frame *f = tproto_decode(data, len, &error);
        if (f) {
            why = tproto_validate(f->messages[0]);
            ck_assert_msg(why && strstr(why, c->expect),
                          "case %d decoded: expected \"%s\", got \"%s\"",
                          _i, c->expect, why ? why : "(valid)");
        } else {
            ck_assert_ptr_nonnull(error);
        }
        tproto_free(f);
        free(data);
    }
    tproto_batch_destroy(&b);
}
END_TEST

START_TEST(test_validate_null)
{
    ck_assert_ptr_nonnull(tproto_validate(NULL));
}
END_TEST

/* A valid frame of several kinds, for the robustness tests. */
static size_t
sample_frame(uint8_t **data, size_t *n_msgs)
{
    struct tproto_batch b;
    struct tpm_key k4 = key4("10.0.0.1", "10.0.0.2", 1000, 80, 6);
    struct tpm_key k6 = key6("fd00::1", "fd00::2", 1, 2, 17);

    tproto_batch_init(&b);
    make_hello(&b);
    make_install(&b);
    tproto_add_satisfaction(&b, 3, 1234567, &k4, 1e9, 0, 4, 0);
    tproto_add_satisfaction(&b, 4, 1234568, &k6, 0.001, 1, 4, 2);
    make_poll(&b);
    make_poll_reply(&b);
    make_nack(&b);
    make_heartbeat(&b);
    make_bye(&b);
    *n_msgs = b.n;
    size_t len = tproto_batch_encode(&b, 0, data);
    tproto_batch_destroy(&b);
    return len;
}

/* Every prefix of a valid frame either is rejected or decodes into a
 * prefix of its messages, all valid. */
START_TEST(test_truncated)
{
    uint8_t *data;
    size_t n_msgs;
    size_t len = sample_frame(&data, &n_msgs);
    int decoded = 0;

    for (size_t cut = 0; cut < len; cut++) {
        /* A copy of exactly 'cut' bytes, so that valgrind sees any read
         * beyond. */
        uint8_t *copy = xmalloc(cut);
        memcpy(copy, data, cut);
        const char *why = NULL;
        Trumpet__Frame *f = tproto_decode(copy, cut, &why);
        if (f) {
            decoded++;
            TCHECK(!why);
            TCHECK(f->n_messages < n_msgs, "cut %zu", cut);
            for (size_t i = 0; i < f->n_messages; i++) {
                TCHECK(!tproto_validate(f->messages[i]), "cut %zu: %s", cut,
                       tproto_validate(f->messages[i]));
            }
        } else {
            TCHECK(why && *why, "cut %zu", cut);
        }
        tproto_free(f);
        free(copy);
    }
    /* Cuts between messages decode: at least one per message boundary
     * after the first message. */
    ck_assert_int_ge(decoded, (int) n_msgs - 1);
    free(data);
}
END_TEST

/* Random bytes and random corruptions of a valid frame never crash. */
START_TEST(test_garbage)
{
    struct test_rng rng;
    uint8_t *data;
    size_t n_msgs;
    size_t len = sample_frame(&data, &n_msgs);
    int rejected = 0;

    test_rng_seed(&rng, 7);
    for (int iter = 0; iter < 20000; iter++) {
        size_t n;
        uint8_t *buf;
        if (iter % 2) {
            n = test_rng_range(&rng, 200);
            buf = xmalloc(n);
            for (size_t i = 0; i < n; i++) {
                buf[i] = test_rng_u32(&rng);
            }
        } else {
            n = len;
            buf = xmalloc(n);
            memcpy(buf, data, n);
            int flips = 1 + test_rng_range(&rng, 4);
            for (int i = 0; i < flips; i++) {
                buf[test_rng_range(&rng, n)] ^= 1 << test_rng_range(&rng, 8);
            }
        }
        const char *why = NULL;
        Trumpet__Frame *f = tproto_decode(buf, n, &why);
        if (f) {
            for (size_t i = 0; i < f->n_messages; i++) {
                if (tproto_validate(f->messages[i])) {
                    rejected++;
                }
            }
        } else {
            TCHECK(why && *why);
            rejected++;
        }
        tproto_free(f);
        free(buf);
    }
    ck_assert_int_gt(rejected, 10000);
    free(data);
}
END_TEST

START_TEST(test_limits)
{
    const char *why;
    uint8_t *data;
    size_t len;
    struct tproto_batch b;

    /* Too large: rejected before unpacking. */
    uint8_t *big = xcalloc(TPROTO_MAX_FRAME + 1, 1);
    ck_assert_ptr_null(tproto_decode(big, TPROTO_MAX_FRAME + 1, &why));
    ck_assert_ptr_nonnull(strstr(why, "larger than"));
    free(big);

    /* Empty buffer: the version is required. */
    ck_assert_ptr_null(tproto_decode("", 0, &why));
    ck_assert_ptr_nonnull(strstr(why, "not decodable"));

    /* No messages. */
    tproto_batch_init(&b);
    len = tproto_batch_encode(&b, 0, &data);
    ck_assert_ptr_null(tproto_decode(data, len, &why));
    ck_assert_ptr_nonnull(strstr(why, "no messages"));
    free(data);

    /* TPROTO_MAX_BATCH messages pass, one more does not. */
    for (int i = 0; i < TPROTO_MAX_BATCH; i++) {
        tproto_add_heartbeat(&b, i, i);
    }
    Trumpet__Frame *f = round_trip(&b, 0);
    ck_assert_uint_eq(f->n_messages, TPROTO_MAX_BATCH);
    ck_assert_uint_eq(f->messages[TPROTO_MAX_BATCH - 1]->heartbeat->seq,
                      TPROTO_MAX_BATCH - 1);
    tproto_free(f);
    tproto_add_heartbeat(&b, 1, 1);
    len = tproto_batch_encode(&b, 0, &data);
    ck_assert_ptr_null(tproto_decode(data, len, &why));
    ck_assert_ptr_nonnull(strstr(why, "more than 4096 messages"));
    free(data);

    /* A NULL 'why' is fine. */
    ck_assert_ptr_null(tproto_decode("\xff", 1, NULL));
    tproto_batch_destroy(&b);
    tproto_batch_destroy(NULL);
    tproto_free(NULL);
}
END_TEST

/* Encodes 'b' as a frame of 'version', even 0 (which
 * tproto_batch_encode() takes as "ours"). */
static size_t
encode_version(const struct tproto_batch *b, uint32_t version,
               uint8_t **datap)
{
    Trumpet__Frame frame = TRUMPET__FRAME__INIT;
    frame.version = version;
    frame.n_messages = b->n;
    frame.messages = b->msgs;
    size_t len = trumpet__frame__get_packed_size(&frame);
    *datap = xmalloc(len);
    ck_assert_uint_eq(trumpet__frame__pack(&frame, *datap), len);
    return len;
}

/* Frames of a version we do not speak: only Hello, Refuse and Bye pass. */
START_TEST(test_version)
{
    static const uint32_t bad[] = { 0, TPROTO_VERSION_MAX + 1, UINT32_MAX };
    struct tproto_batch b;
    const char *why;

    tproto_batch_init(&b);
    for (size_t v = 0; v < ARRAY_SIZE(bad); v++) {
        uint32_t version = bad[v];
        uint8_t *data;
        size_t len;
        Trumpet__Frame *f;

        /* Hello, Refuse and Bye alone or together. */
        tproto_batch_clear(&b);
        make_hello(&b);
        b.msgs[0]->hello->version_min = 7;
        b.msgs[0]->hello->version_max = 9;
        make_refuse(&b);
        make_bye(&b);
        len = encode_version(&b, version, &data);
        f = tproto_decode(data, len, &why);
        ck_assert_msg(f != NULL, "version %u: %s", version, why);
        ck_assert_uint_eq(f->version, version);
        ck_assert_uint_eq(f->n_messages, 3);
        ck_assert_uint_eq(f->messages[0]->hello->version_min, 7);
        ck_assert_uint_eq(f->messages[0]->hello->version_max, 9);
        ck_assert(!tproto_version_supported(f->version));
        tproto_free(f);
        free(data);

        /* Any other message makes the frame unreadable. */
        make_heartbeat(&b);
        len = encode_version(&b, version, &data);
        ck_assert_ptr_null(tproto_decode(data, len, &why));
        ck_assert_ptr_nonnull(strstr(why, "unsupported protocol version"));
        free(data);

        tproto_batch_clear(&b);
        make_satisfaction(&b);
        len = encode_version(&b, version, &data);
        ck_assert_ptr_null(tproto_decode(data, len, &why));
        ck_assert_ptr_nonnull(strstr(why, "unsupported protocol version"));
        free(data);
    }

    /* Every version we speak reads everything. */
    for (uint32_t v = TPROTO_VERSION_MIN; v <= TPROTO_VERSION_MAX; v++) {
        ck_assert(tproto_version_supported(v));
        tproto_batch_clear(&b);
        make_satisfaction(&b);
        Trumpet__Frame *f = round_trip(&b, v);
        ck_assert_uint_eq(f->version, v);
        tproto_free(f);
    }
    ck_assert(!tproto_version_supported(0));
    ck_assert(!tproto_version_supported(TPROTO_VERSION_MAX + 1));

    /* Negotiation. */
    ck_assert_uint_eq(tproto_version_choose(1, 1), 1);
    ck_assert_uint_eq(tproto_version_choose(0, 100), TPROTO_VERSION_MAX);
    ck_assert_uint_eq(tproto_version_choose(TPROTO_VERSION_MIN,
                                            TPROTO_VERSION_MAX),
                      TPROTO_VERSION_MAX);
    ck_assert_uint_eq(tproto_version_choose(TPROTO_VERSION_MAX + 1, 50), 0);
    ck_assert_uint_eq(tproto_version_choose(0, 0), 0);
    ck_assert_uint_eq(tproto_version_choose(3, 2), 0);
    tproto_batch_destroy(&b);
}
END_TEST

/* Version 3's fields of confirmed delivery, set on the message last
 * added, and back. */
START_TEST(test_seq_fields)
{
    struct tproto_batch b;
    struct tpm_key k = key4("10.0.0.1", "10.0.0.2", 1, 2, 17);
    tproto_batch_init(&b);
    tproto_add_hello(&b, "h1", NULL, 0, 10000000, 1, NULL, 0, NULL);
    tproto_set_instance(&b, 0xfedcba9876543210ULL);
    tproto_add_satisfaction(&b, 7, 100, &k, 5, 0, 1, 0);
    tproto_set_seq(&b, 41, true);
    tproto_add_poll_reply(&b, 9, 7, 100, TRUMPET__POLL_STATUS__POLL_OK, 3);
    tproto_set_seq(&b, 42, false);
    tproto_add_satisfaction(&b, 7, 101, &k, 5, 0, 1, 0);
    tproto_add_heartbeat(&b, 1, 2);
    tproto_set_received(&b, TPROTO_MAX_SEQ - 1);
    tproto_add_heartbeat(&b, 1, 3);

    Trumpet__Frame *f = round_trip(&b, 0);
    ck_assert_uint_eq(f->n_messages, 6);
    for (size_t i = 0; i < f->n_messages; i++) {
        const char *why = tproto_validate(f->messages[i]);
        ck_assert_msg(!why, "message %zu: %s", i, why);
    }
    const Trumpet__Hello *h = f->messages[0]->hello;
    ck_assert(h->has_instance);
    ck_assert_uint_eq(h->instance, 0xfedcba9876543210ULL);
    const Trumpet__Satisfaction *s = f->messages[1]->satisfaction;
    ck_assert(s->has_seq && s->has_late && s->late);
    ck_assert_uint_eq(s->seq, 41);
    const Trumpet__PollReply *r = f->messages[2]->poll_reply;
    ck_assert(r->has_seq && r->has_late && !r->late);
    ck_assert_uint_eq(r->seq, 42);
    s = f->messages[3]->satisfaction;
    ck_assert(!s->has_seq && !s->has_late);
    ck_assert(f->messages[4]->heartbeat->has_received);
    ck_assert_uint_eq(f->messages[4]->heartbeat->received,
                      TPROTO_MAX_SEQ - 1);
    ck_assert(!f->messages[5]->heartbeat->has_received);
    tproto_free(f);
    tproto_batch_destroy(&b);
}
END_TEST

/* A Configure built by hand on the wire: without its required cookie the
 * frame is not decodable; without a setting it decodes and is rejected
 * saying so. */
START_TEST(test_configure_wire)
{
    /* Frame { version 2, messages { configure (13) { ... } } }. */
    static const uint8_t no_cookie[] = {
        0x08, 0x02, 0x12, 0x04, 0x6a, 0x02, 0x10, 0x05,
    };
    static const uint8_t no_setting[] = {
        0x08, 0x02, 0x12, 0x04, 0x6a, 0x02, 0x08, 0x07,
    };
    static const uint8_t ok[] = {
        0x08, 0x02, 0x12, 0x07, 0x6a, 0x05, 0x08, 0x07, 0x10, 0xa0, 0x1f,
    };
    const char *why;
    Trumpet__Frame *f;

    ck_assert_ptr_null(tproto_decode(no_cookie, sizeof no_cookie, &why));
    ck_assert_ptr_nonnull(strstr(why, "required field missing"));

    f = tproto_decode(no_setting, sizeof no_setting, &why);
    ck_assert_msg(f != NULL, "%s", why);
    ck_assert_int_eq(f->messages[0]->body_case,
                     TRUMPET__MESSAGE__BODY_CONFIGURE);
    ck_assert_uint_eq(f->messages[0]->configure->cookie, 7);
    ck_assert_str_eq(tproto_validate(f->messages[0]),
                     "configure: no setting given (dos_threshold missing)");
    tproto_free(f);

    f = tproto_decode(ok, sizeof ok, &why);
    ck_assert_msg(f != NULL, "%s", why);
    ck_assert_ptr_null(tproto_validate(f->messages[0]));
    ck_assert_uint_eq(f->messages[0]->configure->dos_threshold, 4000);
    tproto_free(f);
}
END_TEST

/* How a peer sees a message of a kind it does not know (what a version 1
 * host makes of a Configure): a message with no body, rejected on its own;
 * the other messages of the frame are read. */
START_TEST(test_unknown_kind)
{
    /* Frame { version 1, messages { field 99 { } },
     *         messages { heartbeat { clock_ns 1, seq 2 } } }. */
    static const uint8_t frame[] = {
        0x08, 0x01,
        0x12, 0x03, 0x9a, 0x06, 0x00,
        0x12, 0x06, 0x5a, 0x04, 0x08, 0x01, 0x10, 0x02,
    };
    const char *why;
    Trumpet__Frame *f = tproto_decode(frame, sizeof frame, &why);

    ck_assert_msg(f != NULL, "%s", why);
    ck_assert_uint_eq(f->n_messages, 2);
    ck_assert_int_eq(f->messages[0]->body_case,
                     TRUMPET__MESSAGE__BODY__NOT_SET);
    ck_assert_str_eq(tproto_validate(f->messages[0]), "message has no body");
    ck_assert_ptr_null(tproto_validate(f->messages[1]));
    ck_assert_uint_eq(f->messages[1]->heartbeat->seq, 2);
    tproto_free(f);
}
END_TEST

/* PollBatch and PollBatchReply (version 3): key records byte for byte as
 * proto/trumpet.proto lays them out, a round trip of a mixed IPv4/IPv6
 * batch, and every way a batch can be malformed. */
START_TEST(test_poll_batch)
{
    static const uint8_t rec4[TPROTO_KEY_RECORD_V4] = {
        4, 10, 0, 0, 1, 10, 0, 0, 2, 0x04, 0xd2, 0x00, 0x50, 6,
    };
    struct tpm_key k4 = key4("10.0.0.1", "10.0.0.2", 1234, 80, 6);
    struct tpm_key k6 = key6("fd00::1", "fd00::2:3", 65535, 0, 17);
    uint8_t buf[2 * TPROTO_KEY_RECORD_V6 + TPROTO_KEY_RECORD_V4];
    struct tpm_key got;
    size_t n;

    /* Key records. */
    ck_assert_uint_eq(tproto_key_record_put(buf, &k4), sizeof rec4);
    ck_assert_mem_eq(buf, rec4, sizeof rec4);
    ck_assert_uint_eq(tproto_key_record_get(rec4, sizeof rec4, &got),
                      sizeof rec4);
    ck_assert(tpm_key_equal(&got, &k4));
    ck_assert_uint_eq(got.tun, 0);
    ck_assert_uint_eq(tproto_key_record_get(rec4, sizeof rec4 - 1, &got), 0);
    ck_assert_uint_eq(tproto_key_record_get(rec4, 0, &got), 0);
    n = tproto_key_record_put(buf, &k6);
    ck_assert_uint_eq(n, TPROTO_KEY_RECORD_V6);
    ck_assert_uint_eq(buf[0], 6);
    ck_assert_uint_eq(buf[33], 0xff);       /* sport, high byte. */
    ck_assert_uint_eq(buf[37], 17);
    ck_assert_uint_eq(tproto_key_record_get(buf, n, &got), n);
    ck_assert(tpm_key_equal(&got, &k6));
    buf[0] = 5;
    ck_assert_uint_eq(tproto_key_record_get(buf, n, &got), 0);

    /* Round trip: entries k4, k6, k4. */
    uint32_t ids[3] = { 7, 4294967295u, 1 };
    n = tproto_key_record_put(buf, &k4);
    n += tproto_key_record_put(buf + n, &k6);
    n += tproto_key_record_put(buf + n, &k4);
    struct tproto_batch b;
    tproto_batch_init(&b);
    tproto_add_poll_batch(&b, 99, 123456, ids, 3, buf, n, NULL);
    uint8_t status[3] = { TRUMPET__POLL_STATUS__POLL_OK,
                          TRUMPET__POLL_STATUS__POLL_EXPIRED,
                          TRUMPET__POLL_STATUS__POLL_INCOMPLETE };
    double values[3] = { 1.5, 0, -2e300 };
    tproto_add_poll_batch_reply(&b, 99, 123456, status, values, 3);

    Trumpet__Frame *f = round_trip(&b, TPROTO_VERSION_POLL_BATCH);
    ck_assert_uint_eq(f->n_messages, 2);
    const Trumpet__PollBatch *pb = f->messages[0]->poll_batch;
    ck_assert_int_eq(f->messages[0]->body_case,
                     TRUMPET__MESSAGE__BODY_POLL_BATCH);
    ck_assert_ptr_null(tproto_validate(f->messages[0]));
    ck_assert_uint_eq(pb->cookie, 99);
    ck_assert_uint_eq(pb->epoch, 123456);
    ck_assert_uint_eq(pb->n_event_ids, 3);
    ck_assert_mem_eq(pb->event_ids, ids, sizeof ids);
    ck_assert_uint_eq(pb->keys.len, n);
    size_t off = 0;
    const struct tpm_key *want[3] = { &k4, &k6, &k4 };
    for (size_t i = 0; i < 3; i++) {
        size_t len = tproto_key_record_get(pb->keys.data + off,
                                           pb->keys.len - off, &got);
        ck_assert_uint_ne(len, 0);
        ck_assert(tpm_key_equal(&got, want[i]));
        off += len;
    }
    ck_assert_uint_eq(off, pb->keys.len);
    const Trumpet__PollBatchReply *pr = f->messages[1]->poll_batch_reply;
    ck_assert_ptr_null(tproto_validate(f->messages[1]));
    ck_assert_uint_eq(pr->cookie, 99);
    ck_assert_uint_eq(pr->n_values, 3);
    ck_assert_uint_eq(pr->status.len, 3);
    ck_assert_mem_eq(pr->status.data, status, 3);
    ck_assert_mem_eq(pr->values, values, sizeof values);
    ck_assert_str_eq(tproto_body_name(f->messages[1]->body_case),
                     "poll_batch_reply");

    /* Malformed, each on its own. */
    Trumpet__PollBatch *mpb = f->messages[0]->poll_batch;
    Trumpet__PollBatchReply *mpr = f->messages[1]->poll_batch_reply;
    mpb->keys.len = n - 1;
    ck_assert_str_eq(tproto_validate(f->messages[0]),
                     "poll_batch: keys: not one record (ipver 4 or 6, "
                     "whole) per entry");
    mpb->keys.len = n;
    mpb->n_event_ids = 2;
    ck_assert_str_eq(tproto_validate(f->messages[0]),
                     "poll_batch: keys: bytes beyond the last entry's");
    mpb->n_event_ids = 3;
    mpb->event_ids[1] = 0;
    ck_assert_str_eq(tproto_validate(f->messages[0]),
                     "poll_batch: event_id is 0");
    mpb->event_ids[1] = 5;
    mpb->keys.data[TPROTO_KEY_RECORD_V4] = 0;
    ck_assert_ptr_nonnull(tproto_validate(f->messages[0]));
    mpb->keys.data[TPROTO_KEY_RECORD_V4] = 6;
    mpb->epoch = TPROTO_MAX_EPOCH;
    ck_assert_str_eq(tproto_validate(f->messages[0]),
                     "poll_batch: epoch not below 2^62");
    mpb->epoch = 1;
    mpb->n_event_ids = 0;
    ck_assert_str_eq(tproto_validate(f->messages[0]),
                     "poll_batch: no entries");
    mpb->n_event_ids = 3;
    ck_assert_ptr_null(tproto_validate(f->messages[0]));

    mpr->status.len = 2;
    ck_assert_str_eq(tproto_validate(f->messages[1]),
                     "poll_batch_reply: not one status per value");
    mpr->status.len = 3;
    mpr->status.data[2] = 6;
    ck_assert_str_eq(tproto_validate(f->messages[1]),
                     "poll_batch_reply: status unknown");
    mpr->status.data[2] = 0;
    mpr->values[0] = NAN;
    ck_assert_str_eq(tproto_validate(f->messages[1]),
                     "poll_batch_reply: value not finite");
    mpr->values[0] = 0;
    mpr->n_values = 0;
    ck_assert_str_eq(tproto_validate(f->messages[1]),
                     "poll_batch_reply: no entries");
    tproto_free(f);

    /* The largest batch fits a frame with its largest keys and tenants. */
    uint32_t *many_ids = xmalloc(TPROTO_MAX_POLL_ENTRIES * sizeof *many_ids);
    uint32_t *many_tuns = xmalloc(TPROTO_MAX_POLL_ENTRIES
                                  * sizeof *many_tuns);
    uint8_t *many_keys = xmalloc(TPROTO_MAX_POLL_ENTRIES
                                 * TPROTO_KEY_RECORD_V6);
    n = 0;
    for (size_t i = 0; i < TPROTO_MAX_POLL_ENTRIES; i++) {
        many_ids[i] = UINT32_MAX - i;
        many_tuns[i] = TPROTO_MAX_TUN_ID + 1;
        n += tproto_key_record_put(many_keys + n, &k6);
    }
    tproto_batch_clear(&b);
    tproto_add_poll_batch(&b, UINT64_MAX, TPROTO_MAX_EPOCH - 1, many_ids,
                          TPROTO_MAX_POLL_ENTRIES, many_keys, n, many_tuns);
    f = round_trip(&b, 0);
    ck_assert_ptr_null(tproto_validate(f->messages[0]));
    ck_assert_uint_eq(f->messages[0]->poll_batch->n_event_ids,
                      TPROTO_MAX_POLL_ENTRIES);
    ck_assert_uint_eq(f->messages[0]->poll_batch->n_tun_ids,
                      TPROTO_MAX_POLL_ENTRIES);
    tproto_free(f);
    free(many_ids);
    free(many_tuns);
    free(many_keys);
    tproto_batch_destroy(&b);
}
END_TEST

/* Returns true if 'a' and 'b' pack into the same bytes. */
static bool
frames_equal(const Trumpet__Frame *a, const Trumpet__Frame *b)
{
    size_t na = trumpet__frame__get_packed_size(a);
    size_t nb = trumpet__frame__get_packed_size(b);
    uint8_t *pa = xmalloc(na), *pb = xmalloc(nb);
    trumpet__frame__pack(a, pa);
    trumpet__frame__pack(b, pb);
    bool eq = na == nb && !memcmp(pa, pb, na);
    free(pa);
    free(pb);
    return eq;
}

/* tproto_decode() reads frames of satisfactions with a decoder of its
 * own: on every frame it must read what protobuf-c reads, including the
 * odd ones it leaves to protobuf-c (a repeated field, an unknown one, a
 * uint32 above 2^32 - 1, an overlong varint, an empty address). */
START_TEST(test_decode_by_hand)
{
    struct tproto_batch b;
    tproto_batch_init(&b);
    for (int i = 0; i < 50; i++) {
        struct tpm_key k = (i % 3
                            ? key4("10.0.0.1", "10.9.8.7", i, 80, 6)
                            : key6("fd00::1", "fd00::2", 53, i, 17));
        tproto_add_satisfaction(&b, 1 + i, UINT64_C(1) << (i % 62), &k,
                                i * 1.5 - 20, i & 1, i % 4, i % 4 / 2);
        if (i % 5) {            /* Numbered, as hosts of version 3. */
            tproto_set_seq(&b, UINT64_C(1) << (i % 62), i % 3 == 1);
        }
    }
    uint8_t *data;
    size_t len = tproto_batch_encode(&b, 0, &data);
    const char *why;
    Trumpet__Frame *f = tproto_decode(data, len, &why);
    Trumpet__Frame *g = tproto_decode_generic(data, len);
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(g);
    ck_assert(frames_equal(f, g));
    ck_assert_uint_eq(f->n_messages, 50);
    ck_assert_uint_eq(f->messages[7]->satisfaction->event_id, 8);
    ck_assert_double_eq(f->messages[7]->satisfaction->value, 7 * 1.5 - 20);
    ck_assert(f->messages[7]->satisfaction->has_seq);
    ck_assert_uint_eq(f->messages[7]->satisfaction->seq, 1 << 7);
    ck_assert(f->messages[7]->satisfaction->late);
    ck_assert(!f->messages[10]->satisfaction->has_seq);
    tproto_free(f);
    tproto_free(g);
    free(data);

    /* Frame { version 3, messages { satisfaction { SAT } } } with SAT as
     * below; the group is { ipver 4, src 4 bytes, dst 4 bytes, sport 1,
     * dport 2, proto 6 }. */
#define GROUP 0x1a, 0x14, 0x08, 0x04, 0x12, 0x04, 10, 0, 0, 1, \
              0x1a, 0x04, 10, 0, 0, 2, 0x20, 0x01, 0x28, 0x02, 0x30, 0x06
#define VALUE 0x21, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f    /* 1.0 */
    static const uint8_t sat_ok[] = { 0x08, 0x07, 0x10, 0x05, GROUP, VALUE };
    static const uint8_t sat_twice[] = { 0x08, 0x07, 0x08, 0x09, 0x10, 0x05,
                                         GROUP, VALUE };
    static const uint8_t sat_unknown[] = { 0x08, 0x07, 0x10, 0x05, GROUP,
                                           VALUE, 0x58, 0x01 };
    static const uint8_t sat_big[] = { 0x08, 0x80, 0x80, 0x80, 0x80, 0x10,
                                       0x10, 0x05, GROUP, VALUE };
    static const uint8_t sat_long[] = { 0x08, 0x87, 0x80, 0x80, 0x80, 0x80,
                                        0x80, 0x00, 0x10, 0x05, GROUP,
                                        VALUE };
    static const uint8_t sat_no_value[] = { 0x08, 0x07, 0x10, 0x05, GROUP };
    /* A tag padded to 5 bytes (the most protobuf-c reads) and to 6, which
     * protobuf-c refuses: so must the decoder by hand. */
    static const uint8_t sat_tag5[] = { 0x88, 0x80, 0x80, 0x80, 0x00, 0x07,
                                        0x10, 0x05, GROUP, VALUE };
    static const uint8_t sat_tag6[] = { 0x88, 0x80, 0x80, 0x80, 0x80, 0x00,
                                        0x07, 0x10, 0x05, GROUP, VALUE };
    static const uint8_t sat_tag10[] = { 0x08, 0x07, 0x90, 0x80, 0x80, 0x80,
                                         0x80, 0x80, 0x80, 0x80, 0x80, 0x00,
                                         0x05, GROUP, VALUE };
    /* Version 3's seq (field 8) and late (9, a bool: any bit set). */
    static const uint8_t sat_seq[] = { 0x08, 0x07, 0x10, 0x05, GROUP, VALUE,
                                       0x40, 0xac, 0x02, 0x48, 0x01 };
    static const uint8_t sat_late2[] = { 0x08, 0x07, 0x10, 0x05, GROUP,
                                         VALUE, 0x40, 0x01, 0x48, 0x80,
                                         0x01 };
    static const uint8_t sat_late0[] = { 0x08, 0x07, 0x10, 0x05, GROUP,
                                         VALUE, 0x48, 0x80, 0x00 };
    /* Version 4's group tun_id (field 7 of the group): once, twice (the
     * last one counts), above 2^32 - 1, of the wrong wire type (which
     * protobuf-c refuses), and at the group's start (any order). */
#define GROUP_TUN(N, ...) 0x1a, 0x14 + N, 0x08, 0x04, \
              0x12, 0x04, 10, 0, 0, 1, 0x1a, 0x04, 10, 0, 0, 2, 0x20, 0x01, \
              0x28, 0x02, 0x30, 0x06, __VA_ARGS__
    static const uint8_t sat_tun[] = { 0x08, 0x07, 0x10, 0x05,
                                       GROUP_TUN(5, 0x38, 0xef, 0x9b, 0xaf,
                                                 0x05), VALUE };
    static const uint8_t sat_tun_twice[] = { 0x08, 0x07, 0x10, 0x05,
                                             GROUP_TUN(4, 0x38, 0x01, 0x38,
                                                       0x02), VALUE };
    static const uint8_t sat_tun_big[] = { 0x08, 0x07, 0x10, 0x05,
                                           GROUP_TUN(6, 0x38, 0x80, 0x80,
                                                     0x80, 0x80, 0x10),
                                           VALUE };
    static const uint8_t sat_tun_type[] = { 0x08, 0x07, 0x10, 0x05,
                                            GROUP_TUN(3, 0x3a, 0x01, 0x00),
                                            VALUE };
    static const uint8_t sat_tun_first[] = { 0x08, 0x07, 0x10, 0x05, 0x1a,
                                             0x16, 0x38, 0x00, 0x08, 0x04,
                                             0x12, 0x04, 10, 0, 0, 1, 0x1a,
                                             0x04, 10, 0, 0, 2, 0x20, 0x01,
                                             0x28, 0x02, 0x30, 0x06, VALUE };
#undef GROUP_TUN
#undef GROUP
#undef VALUE
    static const struct {
        const uint8_t *sat;
        size_t len;
        bool decodes;
    } cases[] = {
        { sat_ok, sizeof sat_ok, true },
        { sat_twice, sizeof sat_twice, true },
        { sat_unknown, sizeof sat_unknown, true },
        { sat_big, sizeof sat_big, true },
        { sat_long, sizeof sat_long, true },
        { sat_no_value, sizeof sat_no_value, false },
        { sat_tag5, sizeof sat_tag5, true },
        { sat_tag6, sizeof sat_tag6, false },
        { sat_tag10, sizeof sat_tag10, false },
        { sat_seq, sizeof sat_seq, true },
        { sat_late2, sizeof sat_late2, true },
        { sat_late0, sizeof sat_late0, true },
        { sat_tun, sizeof sat_tun, true },
        { sat_tun_twice, sizeof sat_tun_twice, true },
        { sat_tun_big, sizeof sat_tun_big, true },
        { sat_tun_type, sizeof sat_tun_type, false },
        { sat_tun_first, sizeof sat_tun_first, true },
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        uint8_t frame[128];
        size_t n = 0, sl = cases[i].len;
        frame[n++] = 0x08;              /* version 3 */
        frame[n++] = 0x03;
        frame[n++] = 0x12;              /* messages */
        frame[n++] = sl + 2;
        frame[n++] = 0x42;              /* satisfaction (field 8) */
        frame[n++] = sl;
        memcpy(frame + n, cases[i].sat, sl);
        n += sl;
        f = tproto_decode(frame, n, &why);
        g = tproto_decode_generic(frame, n);
        ck_assert_msg(!f == !cases[i].decodes, "case %zu: %s", i,
                      f ? "decoded" : why);
        ck_assert_msg(!g == !cases[i].decodes, "case %zu (protobuf-c)", i);
        if (f) {
            ck_assert_msg(frames_equal(f, g), "case %zu differs", i);
        }
        if (cases[i].sat == sat_seq) {
            const Trumpet__Satisfaction *sat = f->messages[0]->satisfaction;
            ck_assert(sat->has_seq && sat->has_late && sat->late);
            ck_assert_uint_eq(sat->seq, 300);
        } else if (cases[i].sat == sat_late0) {
            ck_assert(f->messages[0]->satisfaction->has_late);
            ck_assert(!f->messages[0]->satisfaction->late);
        } else if (cases[i].sat == sat_tun) {
            const Trumpet__GroupKey *k = f->messages[0]->satisfaction->group;
            ck_assert(k->has_tun_id);
            ck_assert_uint_eq(k->tun_id, 0xabcdef);
        } else if (cases[i].sat == sat_tun_twice) {
            ck_assert_uint_eq(f->messages[0]->satisfaction->group->tun_id,
                              2);
        } else if (cases[i].sat == sat_tun_first) {
            const Trumpet__GroupKey *k = f->messages[0]->satisfaction->group;
            ck_assert(k->has_tun_id);
            ck_assert_uint_eq(k->tun_id, 0);
        }
        tproto_free(f);
        tproto_free(g);
    }
    tproto_batch_destroy(&b);
}
END_TEST

/* Version 4: tenants' groups.  A Satisfaction's or Poll's group with and
 * without tun_id, a PollBatch with and without tun_ids, their bounds, and
 * the decoder by hand reading tun_id as protobuf-c does. */
START_TEST(test_tenant)
{
    struct tpm_key k4 = key4("10.0.0.1", "10.0.0.2", 1, 2, 17);
    struct tpm_key k6 = key6("fd00::1", "fd00::2", 3, 4, 6);
    struct tproto_batch b;
    struct tpm_key got;
    uint32_t vni;

    ck_assert_uint_eq(TPROTO_VERSION_TENANT, 4);
    ck_assert(tproto_version_supported(TPROTO_VERSION_TENANT));

    tproto_batch_init(&b);
    tproto_add_satisfaction(&b, 1, 10, &k4, 5, 0, 1, 0);
    tproto_set_tun_id(&b, 0);                   /* VNI 0 is a tenant. */
    tproto_add_satisfaction(&b, 1, 10, &k4, 6, 0, 1, 0);
    tproto_set_seq(&b, 9, false);
    tproto_set_tun_id(&b, TPROTO_MAX_TUN_ID);
    tproto_add_satisfaction(&b, 1, 10, &k6, 7, 0, 1, 0);
    tproto_add_poll(&b, 2, 1, 10, &k6);
    tproto_set_tun_id(&b, 4242);
    tproto_add_poll(&b, 3, 1, 10, &k4);

    uint8_t rec[2 * TPROTO_KEY_RECORD_V6];
    size_t n = tproto_key_record_put(rec, &k4);
    n += tproto_key_record_put(rec + n, &k6);
    uint32_t ids[2] = { 1, 1 };
    uint32_t tuns[2] = { 0, 4242 + 1 };
    tproto_add_poll_batch(&b, 4, 10, ids, 2, rec, n, tuns);
    tproto_add_poll_batch(&b, 5, 10, ids, 2, rec, n, NULL);

    Trumpet__Frame *f = round_trip(&b, TPROTO_VERSION_TENANT);
    Trumpet__Message **m = f->messages;
    ck_assert_uint_eq(f->n_messages, 7);
    for (size_t i = 0; i < f->n_messages; i++) {
        ck_assert_msg(!tproto_validate(m[i]), "message %zu: %s", i,
                      tproto_validate(m[i]));
    }
    static const struct {
        bool tenant;
        uint32_t vni;
    } want[5] = {
        { true, 0 }, { true, TPROTO_MAX_TUN_ID }, { false, 0 },
        { true, 4242 }, { false, 0 },
    };
    for (size_t i = 0; i < 5; i++) {
        const Trumpet__GroupKey *g = (i < 3 ? m[i]->satisfaction->group
                                      : m[i]->poll->group);
        ck_assert_uint_eq(g->has_tun_id, want[i].tenant);
        vni = 99;
        tproto_key_from_msg(g, &got, &vni);
        ck_assert_uint_eq(got.tun, want[i].tenant);
        ck_assert_uint_eq(vni, want[i].vni);
        got.tun = 0;
        ck_assert(tpm_key_equal(&got, i == 2 || i == 3 ? &k6 : &k4));
    }
    ck_assert_uint_eq(m[1]->satisfaction->seq, 9);
    ck_assert_uint_eq(m[5]->poll_batch->n_tun_ids, 2);
    ck_assert_uint_eq(m[5]->poll_batch->tun_ids[0], 0);
    ck_assert_uint_eq(m[5]->poll_batch->tun_ids[1], 4243);
    ck_assert_uint_eq(m[6]->poll_batch->n_tun_ids, 0);

    /* Bounds. */
    Trumpet__GroupKey *g = m[0]->satisfaction->group;
    g->tun_id = TPROTO_MAX_TUN_ID + 1;
    ck_assert_str_eq(tproto_validate(m[0]),
                     "satisfaction: group: tun_id above 0xffffff");
    g->tun_id = 0;
    Trumpet__PollBatch *pb = m[5]->poll_batch;
    pb->tun_ids[1] = TPROTO_MAX_TUN_ID + 2;
    ck_assert_str_eq(tproto_validate(m[5]),
                     "poll_batch: tun_ids: above 0xffffff + 1");
    pb->tun_ids[1] = TPROTO_MAX_TUN_ID + 1;
    ck_assert_ptr_null(tproto_validate(m[5]));
    pb->n_tun_ids = 1;
    ck_assert_str_eq(tproto_validate(m[5]),
                     "poll_batch: tun_ids: not one per entry");
    pb->n_tun_ids = 3;
    ck_assert_str_eq(tproto_validate(m[5]),
                     "poll_batch: tun_ids: not one per entry");
    tproto_free(f);

    /* A frame of satisfactions with tenants: the decoder by hand reads
     * what protobuf-c reads. */
    tproto_batch_clear(&b);
    for (int i = 0; i < 40; i++) {
        tproto_add_satisfaction(&b, 1 + i, 100 + i, i & 1 ? &k4 : &k6,
                                i, 0, 1, 0);
        if (i % 3) {
            tproto_set_tun_id(&b, i % 3 == 1 ? i : 0x800000 + i);
        }
    }
    uint8_t *data;
    size_t len = tproto_batch_encode(&b, 0, &data);
    const char *why;
    f = tproto_decode(data, len, &why);
    Trumpet__Frame *gf = tproto_decode_generic(data, len);
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(gf);
    ck_assert(frames_equal(f, gf));
    ck_assert(f->messages[4]->satisfaction->group->has_tun_id);
    ck_assert_uint_eq(f->messages[4]->satisfaction->group->tun_id, 4);
    ck_assert_uint_eq(f->messages[5]->satisfaction->group->tun_id,
                      0x800005);
    ck_assert(!f->messages[6]->satisfaction->group->has_tun_id);
    tproto_free(f);
    tproto_free(gf);
    free(data);
    tproto_batch_destroy(&b);
}
END_TEST

START_TEST(test_body_name)
{
    ck_assert_str_eq(tproto_body_name(TRUMPET__MESSAGE__BODY_HELLO),
                     "hello");
    ck_assert_str_eq(tproto_body_name(TRUMPET__MESSAGE__BODY_POLL_REPLY),
                     "poll_reply");
    ck_assert_str_eq(tproto_body_name(TRUMPET__MESSAGE__BODY_SATISFACTION),
                     "satisfaction");
    ck_assert_str_eq(tproto_body_name(TRUMPET__MESSAGE__BODY_BYE), "bye");
    ck_assert_str_eq(tproto_body_name(TRUMPET__MESSAGE__BODY_CONFIGURE),
                     "configure");
    ck_assert_str_eq(tproto_body_name(TRUMPET__MESSAGE__BODY__NOT_SET),
                     "none");
    ck_assert_str_eq(tproto_body_name(99), "unknown");
}
END_TEST

/* Keys survive the conversion both ways, and IPv4 keeps words 1-3 zero
 * after a decoded key of garbage length is converted. */
START_TEST(test_key_conversion)
{
    struct tpm_key k = key4("192.168.1.2", "10.255.0.1", 65535, 0, 255);
    struct tproto_batch b;

    tproto_batch_init(&b);
    tproto_add_poll(&b, 1, 1, 1, &k);
    const Trumpet__GroupKey *g = b.msgs[0]->poll->group;
    ck_assert_uint_eq(g->src.len, 4);
    ck_assert_uint_eq(g->src.data[0], 192);
    ck_assert_uint_eq(g->src.data[3], 2);
    ck_assert_uint_eq(g->dst.data[0], 10);
    ck_assert_uint_eq(g->sport, 65535);
    ck_assert_uint_eq(g->proto, 255);
    struct tpm_key back;
    memset(&back, 0xaa, sizeof back);
    tproto_key_from_msg(g, &back, NULL);
    ck_assert(tpm_key_equal(&back, &k));
    ck_assert_uint_eq(back.src[1] | back.src[2] | back.src[3], 0);

    ck_assert(!g->has_tun_id);
    uint32_t vni = 77;
    tproto_key_from_msg(g, &back, &vni);
    ck_assert_uint_eq(back.tun, 0);
    ck_assert_uint_eq(vni, 0);

    /* A tenant's key: 'tun' 1 and its VNI. */
    tproto_add_poll(&b, 1, 1, 1, &k);
    tproto_set_tun_id(&b, 0xffffff);
    g = b.msgs[1]->poll->group;
    ck_assert(g->has_tun_id);
    ck_assert_uint_eq(g->tun_id, 0xffffff);
    tproto_key_from_msg(g, &back, &vni);
    ck_assert_uint_eq(back.tun, 1);
    ck_assert_uint_eq(vni, 0xffffff);
    back.tun = 0;
    ck_assert(tpm_key_equal(&back, &k));
    tproto_key_from_msg(g, &back, NULL);
    ck_assert_uint_eq(back.tun, 1);
    tproto_batch_clear(&b);

    /* Non-IP key: sent as ipver 0 without addresses. */
    struct tpm_key zero;
    memset(&zero, 0, sizeof zero);
    tproto_add_poll(&b, 1, 1, 1, &zero);
    g = b.msgs[0]->poll->group;
    ck_assert_uint_eq(g->ipver, 0);
    ck_assert_uint_eq(g->src.len, 0);
    ck_assert_uint_eq(g->dst.len, 0);
    tproto_batch_destroy(&b);
}
END_TEST

/* Prefixes. */

START_TEST(test_prefix_parse)
{
    static const struct {
        const char *s;
        int ipver, len;
        const char *formatted;
    } good[] = {
        { "10.99.0.0/24", 4, 24, "10.99.0.0/24" },
        { "10.99.0.1", 4, 32, "10.99.0.1/32" },
        { "10.99.0.1/32", 4, 32, "10.99.0.1/32" },
        { "0.0.0.0/0", 4, 0, "0.0.0.0/0" },
        { "128.0.0.0/1", 4, 1, "128.0.0.0/1" },
        { "fd00::/8", 6, 8, "fd00::/8" },
        { "fd00:1:2::1", 6, 128, "fd00:1:2::1/128" },
        { "::/0", 6, 0, "::/0" },
        { "2001:db8::/32", 6, 32, "2001:db8::/32" },
        { "::ffff:10.0.0.0/120", 6, 120, "::ffff:10.0.0.0/120" },
        { "vni=5001:10.0.128.0/24", 4, 24, "vni=5001:10.0.128.0/24" },
        { "vni=0x1389:10.0.128.1", 4, 32, "vni=5001:10.0.128.1/32" },
        { "vni=0:0.0.0.0/0", 4, 0, "vni=0:0.0.0.0/0" },
        { "vni=16777215:fd00::/8", 6, 8, "vni=16777215:fd00::/8" },
        { "vni=0xFFFFFF:fd00:1::1", 6, 128, "vni=16777215:fd00:1::1/128" },
    };
    for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
        struct tpm_prefix p = prefix(good[i].s);
        char buf[64];
        ck_assert_int_eq(p.ipver, good[i].ipver);
        ck_assert_int_eq(p.len, good[i].len);
        ck_assert_str_eq(tpm_prefix_format(&p, buf, sizeof buf),
                         good[i].formatted);
        ck_assert_int_eq(p.has_tun, !strncmp(good[i].s, "vni=", 4));
        struct tpm_prefix q = prefix(buf);
        ck_assert_int_eq(memcmp(&p, &q, sizeof p), 0);
    }
    struct tpm_prefix t = prefix("vni=0x1389:10.0.128.0/24");
    ck_assert(t.has_tun);
    ck_assert_uint_eq(t.tun_id, 5001);
    ck_assert_uint_eq(t.addr[0], htonl(0x0a008000));
    t = prefix("10.0.128.0/24");
    ck_assert(!t.has_tun);
    ck_assert_uint_eq(t.tun_id, 0);

    struct tpm_prefix p = prefix("10.99.0.0/24");
    ck_assert_uint_eq(p.addr[0], htonl(0x0a630000));
    ck_assert_uint_eq(p.addr[1] | p.addr[2] | p.addr[3], 0);

    static const struct {
        const char *s;
        const char *expect;
    } bad[] = {
        { "", "empty" },
        { "10.99.0.1/24", "host bits set beyond /24 (did you mean "
          "10.99.0.0/24?)" },
        { "fd00::1/64", "host bits set beyond /64 (did you mean fd00::/64?)" },
        { "10.0.0.0/33", "prefix length 33 exceeds 32" },
        { "fd00::/129", "prefix length 129 exceeds 128" },
        { "10.0.0.0/99999999999", "exceeds 32" },
        { "10.0.0.0/", "prefix length missing" },
        { "10.0.0.0/2a", "\"2a\" is not a number" },
        { "10.0.0.0/-1", "is not a number" },
        { "/24", "address missing" },
        { "300.0.0.0/8", "\"300.0.0.0\" is not an IPv4 address" },
        { "10.0.0/8", "is not an IPv4 address" },
        { "fd00:::1", "is not an IPv6 address" },
        { "host.example", "is not an IPv4 address" },
        { "10.0.0.0 /8", "is not an IPv4 address" },
        { "vni=", "expected vni=VNI:PREFIX" },
        { "vni=5001", "expected vni=VNI:PREFIX" },
        { "vni=:10.0.0.0/8", "tenant \"\" is not a VNI" },
        { "vni=16777216:10.0.0.0/8", "tenant \"16777216\" is not a VNI" },
        { "vni=0x1000000:10.0.0.0/8", "\"0x1000000\" is not a VNI" },
        { "vni=-1:10.0.0.0/8", "\"-1\" is not a VNI" },
        { "vni=5x:10.0.0.0/8", "\"5x\" is not a VNI" },
        { "vni=5001:", "address prefix missing" },
        { "vni=5001:10.0.0.1/8", "host bits set beyond /8 (did you mean "
          "10.0.0.0/8?)" },
        { "vni=5001:300.0.0.0/8", "\"300.0.0.0\" is not an IPv4" },
        { "vni=5001:fd00:::1", "is not an IPv6 address" },
        { "vni=5001:vni=5002:10.0.0.0/8", "is not an IPv" },
        { "VNI=5001:10.0.0.0/8", "is not an IPv6 address" },
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        struct tpm_prefix q;
        char *error = tpm_prefix_parse(bad[i].s, &q);
        ck_assert_msg(error && strstr(error, bad[i].expect),
                      "\"%s\": expected \"%s\", got \"%s\"", bad[i].s,
                      bad[i].expect, error ? error : "(ok)");
        if (*bad[i].s) {
            ck_assert_msg(strstr(error, bad[i].s), "%s", error);
        }
        free(error);
    }

    /* Too long for any address. */
    char *error = tpm_prefix_parse(long_string(200), &p);
    ck_assert_ptr_nonnull(error);
    free(error);
}
END_TEST

START_TEST(test_prefix_list)
{
    struct tpm_prefix *ps;
    size_t n;
    char buf[64];

    ck_assert_ptr_null(tpm_prefix_parse_list(
                           "10.0.0.0/8, 192.168.1.0/24 fd00::/8,,\t1.2.3.4",
                           &ps, &n));
    ck_assert_uint_eq(n, 4);
    ck_assert_str_eq(tpm_prefix_format(&ps[0], buf, sizeof buf),
                     "10.0.0.0/8");
    ck_assert_str_eq(tpm_prefix_format(&ps[1], buf, sizeof buf),
                     "192.168.1.0/24");
    ck_assert_str_eq(tpm_prefix_format(&ps[2], buf, sizeof buf),
                     "fd00::/8");
    ck_assert_str_eq(tpm_prefix_format(&ps[3], buf, sizeof buf),
                     "1.2.3.4/32");
    free(ps);

    /* Tenants' prefixes and others in one list. */
    ck_assert_ptr_null(tpm_prefix_parse_list(
                           "10.1.0.0/16, vni=5001:10.0.128.0/24 "
                           "vni=0x7:10.0.128.0/24", &ps, &n));
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(tpm_prefix_format(&ps[0], buf, sizeof buf),
                     "10.1.0.0/16");
    ck_assert(!ps[0].has_tun);
    ck_assert_str_eq(tpm_prefix_format(&ps[1], buf, sizeof buf),
                     "vni=5001:10.0.128.0/24");
    ck_assert_str_eq(tpm_prefix_format(&ps[2], buf, sizeof buf),
                     "vni=7:10.0.128.0/24");
    ck_assert(tpm_prefix_overlap(&ps[1], &ps[2]));
    free(ps);
    char *terr = tpm_prefix_parse_list("10.1.0.0/16,vni=99999999:10.0.0.0/8",
                                       &ps, &n);
    ck_assert_ptr_nonnull(terr);
    ck_assert_ptr_nonnull(strstr(terr, "\"vni=99999999:10.0.0.0/8\": "
                                 "tenant \"99999999\" is not a VNI"));
    ck_assert_ptr_null(ps);
    free(terr);

    ck_assert_ptr_null(tpm_prefix_parse_list("", &ps, &n));
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(ps);
    ck_assert_ptr_null(tpm_prefix_parse_list(" , ,", &ps, &n));
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(ps);

    char *error = tpm_prefix_parse_list("10.0.0.0/8,10.0.0.1/8", &ps, &n);
    ck_assert_ptr_nonnull(error);
    ck_assert_ptr_nonnull(strstr(error, "\"10.0.0.1/8\": host bits"));
    ck_assert_ptr_null(ps);
    ck_assert_uint_eq(n, 0);
    free(error);

    /* At most TPROTO_MAX_PREFIXES. */
    size_t size = (TPROTO_MAX_PREFIXES + 1) * 16;
    char *list = xmalloc(size);
    size_t off = 0;
    for (int i = 0; i <= TPROTO_MAX_PREFIXES; i++) {
        off += snprintf(list + off, size - off, "10.%d.%d.0/24 ",
                        i / 256, i % 256);
    }
    error = tpm_prefix_parse_list(list, &ps, &n);
    ck_assert_ptr_nonnull(error);
    ck_assert_ptr_nonnull(strstr(error, "more than 1024 prefixes"));
    free(error);
    list[off - strlen("10.4.0.0/24 ") - 1] = '\0';
    ck_assert_ptr_null(tpm_prefix_parse_list(list, &ps, &n));
    ck_assert_uint_eq(n, TPROTO_MAX_PREFIXES);
    ck_assert_str_eq(tpm_prefix_format(&ps[1023], buf, sizeof buf),
                     "10.3.255.0/24");
    free(ps);
    free(list);
}
END_TEST

static uint32_t
mask32(int len)
{
    return len ? ~0u << (32 - len) : 0;
}

/* IPv4 overlap and containment against host-order arithmetic, on random
 * prefixes drawn from a small space so that they often nest. */
START_TEST(test_prefix_overlap_ref4)
{
    struct test_rng rng;
    int overlaps = 0, contained = 0;

    test_rng_seed(&rng, 99);
    for (int iter = 0; iter < 200000; iter++) {
        struct tpm_prefix a, b;
        uint32_t ha, hb;
        int la = test_rng_range(&rng, 33), lb = test_rng_range(&rng, 33);

        /* Addresses 10.0.0.0/28 and up to 3 random high bits. */
        ha = 0x0a000000 | test_rng_range(&rng, 16)
             | (test_rng_range(&rng, 8) << 29);
        hb = 0x0a000000 | test_rng_range(&rng, 16)
             | (test_rng_range(&rng, 8) << 29);
        ha &= mask32(la);
        hb &= mask32(lb);
        memset(&a, 0, sizeof a);
        memset(&b, 0, sizeof b);
        a.ipver = b.ipver = 4;
        a.len = la;
        b.len = lb;
        a.addr[0] = htonl(ha);
        b.addr[0] = htonl(hb);

        bool expect = !((ha ^ hb) & mask32(MIN(la, lb)));
        TCHECK(tpm_prefix_overlap(&a, &b) == expect, "%d %d", la, lb);
        TCHECK(tpm_prefix_overlap(&b, &a) == expect);
        overlaps += expect;

        uint32_t addr[4] = { htonl(hb | test_rng_range(&rng, 4)), 0, 0, 0 };
        bool in = !((ntohl(addr[0]) ^ ha) & mask32(la));
        TCHECK(tpm_prefix_contains(&a, 4, addr) == in);
        TCHECK(!tpm_prefix_contains(&a, 6, addr));
        contained += in;
    }
    ck_assert_int_gt(overlaps, 10000);
    ck_assert_int_gt(contained, 10000);
    ck_assert_int_lt(overlaps, 190000);
}
END_TEST

START_TEST(test_prefix_overlap)
{
    static const struct {
        const char *a, *b;
        bool overlap;
    } cases[] = {
        { "10.0.0.0/8", "10.99.0.0/24", true },
        { "10.99.0.0/24", "10.0.0.0/8", true },
        { "10.99.0.0/24", "10.99.1.0/24", false },
        { "10.99.0.0/23", "10.99.1.0/24", true },
        { "10.99.0.1", "10.99.0.1", true },
        { "10.99.0.1", "10.99.0.2", false },
        { "0.0.0.0/0", "1.2.3.4", true },
        { "0.0.0.0/0", "::/0", false },
        { "fd00::/8", "fd00:1::/32", true },
        { "fd00::/9", "fd80::/9", false },
        { "fd00::/8", "fe00::/8", false },
        { "fd00:1::/127", "fd00:1::1", true },
        { "fd00:1::/128", "fd00:1::1", false },
        { "::/0", "fd00:1::1", true },
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct tpm_prefix a = prefix(cases[i].a), b = prefix(cases[i].b);
        ck_assert_msg(tpm_prefix_overlap(&a, &b) == cases[i].overlap,
                      "%s %s", cases[i].a, cases[i].b);
        ck_assert_msg(tpm_prefix_overlap(&b, &a) == cases[i].overlap,
                      "%s %s", cases[i].b, cases[i].a);
    }

    struct tpm_prefix p6 = prefix("fd00:1::/120");
    struct tpm_key k = key6("fd00:1::ff", "fd00:1::100", 0, 0, 0);
    ck_assert(tpm_prefix_contains(&p6, 6, k.src));
    ck_assert(!tpm_prefix_contains(&p6, 6, k.dst));
    ck_assert(!tpm_prefix_contains(&p6, 4, k.src));
    struct tpm_prefix all6 = prefix("::/0");
    ck_assert(tpm_prefix_contains(&all6, 6, k.dst));
    struct tpm_prefix p4 = prefix("10.99.0.0/24");
    struct tpm_key k4 = key4("10.99.0.200", "10.99.1.0", 0, 0, 0);
    ck_assert(tpm_prefix_contains(&p4, 4, k4.src));
    ck_assert(!tpm_prefix_contains(&p4, 4, k4.dst));
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("proto");
    TCase *tc = tcase_create("proto");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_round_trip_all);
    tcase_add_test(tc, test_round_trip_many);
    tcase_add_test(tc, test_reason_truncated);
    tcase_add_loop_test(tc, test_valid_base, 0, ARRAY_SIZE(reject_cases));
    tcase_add_loop_test(tc, test_reject, 0, ARRAY_SIZE(reject_cases));
    tcase_add_test(tc, test_validate_null);
    tcase_add_test(tc, test_truncated);
    tcase_add_test(tc, test_garbage);
    tcase_add_test(tc, test_limits);
    tcase_add_test(tc, test_version);
    tcase_add_test(tc, test_configure_wire);
    tcase_add_test(tc, test_seq_fields);
    tcase_add_test(tc, test_unknown_kind);
    tcase_add_test(tc, test_poll_batch);
    tcase_add_test(tc, test_decode_by_hand);
    tcase_add_test(tc, test_tenant);
    tcase_add_test(tc, test_body_name);
    tcase_add_test(tc, test_key_conversion);
    tcase_add_test(tc, test_prefix_parse);
    tcase_add_test(tc, test_prefix_list);
    tcase_add_test(tc, test_prefix_overlap_ref4);
    tcase_add_test(tc, test_prefix_overlap);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
