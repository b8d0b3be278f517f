/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for tpm/trig-index.[ch].
 *
 * The reference is a linear scan over every (filter, id) pair currently
 * inserted: a key matches a pair iff (key & mask) == filter key, computed
 * field by field here without the library's key helpers.  The index must
 * return exactly the ids of the matching pairs (as a multiset, in any
 * order) for every key queried.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "trig-index.h"
#include "test-util.h"
#include "util.h"

#define MAX_IDS 16384

/* ---------------------------------------------------------------------- */
/* Reference. */

struct pair {
    struct tpm_match m;
    uint32_t id;
};

struct ref {
    struct pair *pairs;
    uint32_t n, cap;
};

static bool
ref_key_matches(const struct tpm_key *key, const struct tpm_match *m)
{
    for (int i = 0; i < 4; i++) {
        if ((key->src[i] & m->mask.src[i]) != m->key.src[i]
            || (key->dst[i] & m->mask.dst[i]) != m->key.dst[i]) {
            return false;
        }
    }
    return (key->sport & m->mask.sport) == m->key.sport
           && (key->dport & m->mask.dport) == m->key.dport
           && (key->proto & m->mask.proto) == m->key.proto
           && (key->ipver & m->mask.ipver) == m->key.ipver
           && (key->tun & m->mask.tun) == m->key.tun;
}

static bool
same_key(const struct tpm_key *a, const struct tpm_key *b)
{
    return !memcmp(a, b, sizeof *a);
}

static bool
same_match(const struct tpm_match *a, const struct tpm_match *b)
{
    return same_key(&a->key, &b->key) && same_key(&a->mask, &b->mask);
}

static void
ref_add(struct ref *r, const struct tpm_match *m, uint32_t id)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 64;
        r->pairs = realloc(r->pairs, r->cap * sizeof *r->pairs);
        ck_assert_ptr_nonnull(r->pairs);
    }
    r->pairs[r->n].m = *m;
    r->pairs[r->n].id = id;
    r->n++;
}

static void
ref_del(struct ref *r, uint32_t i)
{
    r->pairs[i] = r->pairs[--r->n];
}

static int
ref_find(const struct ref *r, const struct tpm_match *m, uint32_t id)
{
    for (uint32_t i = 0; i < r->n; i++) {
        if (r->pairs[i].id == id && same_match(&r->pairs[i].m, m)) {
            return (int) i;
        }
    }
    return -1;
}

/* Number of distinct masks. */
static uint32_t
ref_n_patterns(const struct ref *r)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < r->n; i++) {
        bool seen = false;
        for (uint32_t j = 0; j < i && !seen; j++) {
            seen = same_key(&r->pairs[j].m.mask, &r->pairs[i].m.mask);
        }
        n += !seen;
    }
    return n;
}

/* Stores the sorted ids of the pairs matching 'key' in 'ids' and returns
 * how many. */
static uint32_t
ref_match(const struct ref *r, const struct tpm_key *key, uint32_t *ids)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < r->n; i++) {
        if (ref_key_matches(key, &r->pairs[i].m)) {
            ids[n++] = r->pairs[i].id;
        }
    }
    qsort(ids, n, sizeof *ids, test_cmp_u32);
    return n;
}

/* Compares the index's answer for 'key' with the reference's.  Returns
 * the number of matches. */
static uint32_t
check_key(const struct trig_index *ti, const struct ref *r,
          const struct tpm_key *key)
{
    static uint32_t want[MAX_IDS], got[MAX_IDS + 4];

    TCHECK(r->n <= MAX_IDS, "too many pairs");
    uint32_t n_want = ref_match(r, key, want);
    for (int i = 0; i < 4; i++) {
        got[MAX_IDS + i] = 0xdeadbeef;
    }
    uint32_t n_got = trig_index_match(ti, key, got, MAX_IDS);
    TCHECK(n_got == n_want, "%u matches, reference %u", n_got, n_want);
    qsort(got, n_got, sizeof *got, test_cmp_u32);
    for (uint32_t i = 0; i < n_got; i++) {
        TCHECK(got[i] == want[i], "match %u: id %u, reference %u", i,
               got[i], want[i]);
    }
    for (int i = 0; i < 4; i++) {
        TCHECK(got[MAX_IDS + i] == 0xdeadbeef, "wrote beyond max");
    }
    return n_got;
}

/* Checks that with room for fewer ids than match, the return value still
 * counts all matches and exactly 'max' ids, all genuine, are stored. */
static void
check_key_truncated(const struct trig_index *ti, const struct ref *r,
                    const struct tpm_key *key, uint32_t max)
{
    static uint32_t want[MAX_IDS], got[MAX_IDS + 4];

    uint32_t n_want = ref_match(r, key, want);
    for (uint32_t i = 0; i < max + 4; i++) {
        got[i] = 0xdeadbeef;
    }
    uint32_t n_got = trig_index_match(ti, key, got, max);
    TCHECK(n_got == n_want, "%u matches with max %u, reference %u", n_got,
           max, n_want);
    uint32_t stored = MIN(max, n_want);
    qsort(got, stored, sizeof *got, test_cmp_u32);
    /* 'got' (sorted) must be a sub-multiset of 'want' (sorted). */
    uint32_t j = 0;
    for (uint32_t i = 0; i < stored; i++) {
        while (j < n_want && want[j] < got[i]) {
            j++;
        }
        TCHECK(j < n_want && want[j] == got[i], "stored id %u not a match",
               got[i]);
        j++;
    }
    for (uint32_t i = stored; i < max + 4; i++) {
        TCHECK(got[i] == 0xdeadbeef, "wrote %u ids with max %u", i + 1, max);
    }
}

static void
check_counts(const struct trig_index *ti, const struct ref *r)
{
    TCHECK(ti->n_ids == r->n, "n_ids %u, reference %u", ti->n_ids, r->n);
    uint32_t np = ref_n_patterns(r);
    TCHECK(ti->n_patterns == np, "n_patterns %u, reference %u",
           ti->n_patterns, np);
    uint32_t sum = 0;
    for (uint32_t p = 0; p < ti->n_patterns; p++) {
        const struct trig_pattern *pat = &ti->patterns[p];
        uint32_t used = 0;
        sum += pat->n_ids;
        for (uint32_t i = 0; i <= pat->table_mask; i++) {
            used += pat->rules[i].n_ids != 0;
        }
        TCHECK(used == pat->n_rules, "pattern %u: %u rules, %u slots used",
               p, pat->n_rules, used);
        TCHECK(pat->n_rules >= 1, "empty pattern %u kept", p);
        TCHECK(2 * pat->n_rules <= pat->table_mask + 1,
               "pattern %u: table more than half full", p);
    }
    TCHECK(sum == ti->n_ids, "sum of pattern ids %u, n_ids %u", sum,
           ti->n_ids);
}

/* ---------------------------------------------------------------------- */
/* Random keys and filters. */

static void
prefix_mask(uint32_t words[4], int len)
{
    for (int w = 0; w < 4; w++) {
        int bits = len - 32 * w;
        bits = bits < 0 ? 0 : bits > 32 ? 32 : bits;
        words[w] = bits ? htonl(0xffffffffu << (32 - bits)) : 0;
    }
}

static const uint16_t ports[] = { 80, 443, 53, 8080, 1024, 1025, 1030,
                                  0x1234 };
static const uint8_t protos[] = { 6, 17, 1, 132 };

/* A key drawn from small pools of values so that filters match often. */
static struct tpm_key
random_key(struct test_rng *rng)
{
    struct tpm_key k;

    memset(&k, 0, sizeof k);
    if (test_rng_range(rng, 3)) {
        k.ipver = 4;
        k.src[0] = htonl(0x0a000000 | test_rng_range(rng, 2) << 16
                         | test_rng_range(rng, 4) << 8
                         | test_rng_range(rng, 8));
        k.dst[0] = htonl(0xc0a80000 | test_rng_range(rng, 2) << 8
                         | test_rng_range(rng, 4));
    } else {
        k.ipver = 6;
        k.src[0] = htonl(0x20010db8);
        k.src[1] = htonl(test_rng_range(rng, 2) << 16
                         | test_rng_range(rng, 2));
        k.src[3] = htonl(test_rng_range(rng, 8));
        k.dst[0] = htonl(0xfd000000);
        k.dst[1] = htonl(test_rng_range(rng, 2));
        k.dst[3] = htonl(test_rng_range(rng, 4));
    }
    k.proto = protos[test_rng_range(rng, ARRAY_SIZE(protos))];
    k.sport = ports[test_rng_range(rng, ARRAY_SIZE(ports))];
    k.dport = ports[test_rng_range(rng, ARRAY_SIZE(ports))];
    if (test_rng_range(rng, 8) == 0) {
        k.sport = (uint16_t) test_rng_u32(rng);
    }
    return k;
}

static uint16_t
random_port_mask(struct test_rng *rng)
{
    static const uint16_t masks[] = { 0, 0xffff, 0xff00, 0xfff0, 0xfffc };
    return masks[test_rng_range(rng, ARRAY_SIZE(masks))];
}

/* A random mask from a small set of shapes. */
static struct tpm_key
random_mask(struct test_rng *rng)
{
    static const int v4_prefixes[] = { 0, 8, 16, 24, 30, 32 };
    static const int v6_prefixes[] = { 0, 32, 48, 64, 128 };
    static const int any_prefixes[] = { 0, 8, 16 };
    struct tpm_key m;

    memset(&m, 0, sizeof m);
    switch (test_rng_range(rng, 3)) {
    case 0:
        m.ipver = 0xff;         /* IPv4 (key decides). */
        prefix_mask(m.src, v4_prefixes[test_rng_range(rng, 6)]);
        prefix_mask(m.dst, v4_prefixes[test_rng_range(rng, 6)]);
        break;
    case 1:
        m.ipver = 0xff;
        prefix_mask(m.src, v6_prefixes[test_rng_range(rng, 5)]);
        prefix_mask(m.dst, v6_prefixes[test_rng_range(rng, 5)]);
        break;
    default:
        m.ipver = 0;            /* Either version. */
        prefix_mask(m.src, any_prefixes[test_rng_range(rng, 3)]);
        prefix_mask(m.dst, any_prefixes[test_rng_range(rng, 3)]);
        break;
    }
    m.proto = test_rng_range(rng, 2) ? 0xff : 0;
    m.sport = random_port_mask(rng);
    m.dport = random_port_mask(rng);
    return m;
}

static void
mask_key(struct tpm_key *dst, const struct tpm_key *k,
         const struct tpm_key *m)
{
    memset(dst, 0, sizeof *dst);
    for (int i = 0; i < 4; i++) {
        dst->src[i] = k->src[i] & m->src[i];
        dst->dst[i] = k->dst[i] & m->dst[i];
    }
    dst->sport = k->sport & m->sport;
    dst->dport = k->dport & m->dport;
    dst->proto = k->proto & m->proto;
    dst->ipver = k->ipver & m->ipver;
}

/* A filter with mask 'mask' whose key comes from a random key.  If the
 * mask matches the IP version, the key's version must agree with the
 * address shape, which random_key() guarantees. */
static struct tpm_match
random_match(struct test_rng *rng, const struct tpm_key *mask)
{
    struct tpm_match m;
    struct tpm_key k = random_key(rng);

    m.mask = *mask;
    mask_key(&m.key, &k, mask);
    return m;
}

/* A key that matches 'm' (random in the unmasked bits). */
static struct tpm_key
key_matching(struct test_rng *rng, const struct tpm_match *m)
{
    struct tpm_key k = random_key(rng), r;
    uint32_t w[sizeof k / 4];

    /* Randomize some bits outside the mask too. */
    memcpy(w, &k, sizeof k);
    for (size_t i = 0; i < ARRAY_SIZE(w); i++) {
        if (test_rng_range(rng, 4) == 0) {
            w[i] ^= test_rng_u32(rng);
        }
    }
    memcpy(&k, w, sizeof k);
    k.tun = 0;
    if (!k.ipver) {
        k.ipver = 4;
    }
    for (int i = 0; i < 4; i++) {
        k.src[i] = (k.src[i] & ~m->mask.src[i]) | m->key.src[i];
        k.dst[i] = (k.dst[i] & ~m->mask.dst[i]) | m->key.dst[i];
    }
    k.sport = (k.sport & ~m->mask.sport) | m->key.sport;
    k.dport = (k.dport & ~m->mask.dport) | m->key.dport;
    k.proto = (k.proto & ~m->mask.proto) | m->key.proto;
    k.ipver = (k.ipver & ~m->mask.ipver) | m->key.ipver;
    mask_key(&r, &k, &m->mask);
    TCHECK(same_key(&r, &m->key), "key_matching() is wrong");
    return k;
}

/* ---------------------------------------------------------------------- */
/* Tests. */

START_TEST(test_empty)
{
    struct trig_index ti;
    struct test_rng rng;
    uint32_t ids[4];

    test_rng_seed(&rng, 1);
    trig_index_init(&ti);
    ck_assert_uint_eq(ti.n_patterns, 0);
    ck_assert_uint_eq(ti.n_ids, 0);
    for (int i = 0; i < 100; i++) {
        struct tpm_key k = random_key(&rng);
        ck_assert_uint_eq(trig_index_match(&ti, &k, ids, 4), 0);
    }
    struct tpm_key mask = random_mask(&rng);
    struct tpm_match m = random_match(&rng, &mask);
    ck_assert_int_eq(trig_index_remove(&ti, &m, 1), ENOENT);
    trig_index_destroy(&ti);
    trig_index_destroy(NULL);
}
END_TEST

/* A few filters by hand. */
START_TEST(test_basic)
{
    struct trig_index ti;
    struct tpm_match tcp80, net24, any, v6only;
    uint32_t ids[8];

    trig_index_init(&ti);

    /* tcp, tp_dst=80 */
    memset(&tcp80, 0, sizeof tcp80);
    tcp80.mask.proto = 0xff;
    tcp80.mask.dport = 0xffff;
    tcp80.mask.ipver = 0xff;
    tcp80.key.proto = 6;
    tcp80.key.dport = 80;
    tcp80.key.ipver = 4;
    /* nw_dst=10.1.2.0/24 */
    memset(&net24, 0, sizeof net24);
    net24.mask.ipver = 0xff;
    net24.mask.dst[0] = htonl(0xffffff00);
    net24.key.ipver = 4;
    net24.key.dst[0] = htonl(0x0a010200);
    /* Everything. */
    memset(&any, 0, sizeof any);
    /* ipv6 */
    memset(&v6only, 0, sizeof v6only);
    v6only.mask.ipver = 0xff;
    v6only.key.ipver = 6;

    trig_index_insert(&ti, &tcp80, 1);
    trig_index_insert(&ti, &net24, 2);
    trig_index_insert(&ti, &any, 3);
    trig_index_insert(&ti, &v6only, 4);
    trig_index_insert(&ti, &tcp80, 5);
    ck_assert_uint_eq(ti.n_patterns, 4);
    ck_assert_uint_eq(ti.n_ids, 5);

    struct tpm_key k;
    memset(&k, 0, sizeof k);
    k.ipver = 4;
    k.proto = 6;
    k.src[0] = htonl(0xc0a80001);
    k.dst[0] = htonl(0x0a010203);
    k.sport = 40000;
    k.dport = 80;
    uint32_t n = trig_index_match(&ti, &k, ids, 8);
    ck_assert_uint_eq(n, 4);
    qsort(ids, n, sizeof *ids, test_cmp_u32);
    ck_assert_uint_eq(ids[0], 1);
    ck_assert_uint_eq(ids[1], 2);
    ck_assert_uint_eq(ids[2], 3);
    ck_assert_uint_eq(ids[3], 5);

    k.dport = 81;
    n = trig_index_match(&ti, &k, ids, 8);
    ck_assert_uint_eq(n, 2);
    qsort(ids, n, sizeof *ids, test_cmp_u32);
    ck_assert_uint_eq(ids[0], 2);
    ck_assert_uint_eq(ids[1], 3);

    k.dst[0] = htonl(0x0a010303);
    n = trig_index_match(&ti, &k, ids, 8);
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(ids[0], 3);

    k.ipver = 6;
    k.dport = 80;
    n = trig_index_match(&ti, &k, ids, 8);
    ck_assert_uint_eq(n, 2);
    qsort(ids, n, sizeof *ids, test_cmp_u32);
    ck_assert_uint_eq(ids[0], 3);
    ck_assert_uint_eq(ids[1], 4);

    /* Removal. */
    ck_assert_int_eq(trig_index_remove(&ti, &tcp80, 2), ENOENT);
    ck_assert_int_eq(trig_index_remove(&ti, &tcp80, 1), 0);
    ck_assert_int_eq(trig_index_remove(&ti, &tcp80, 1), ENOENT);
    ck_assert_uint_eq(ti.n_patterns, 4);
    ck_assert_uint_eq(ti.n_ids, 4);
    ck_assert_int_eq(trig_index_remove(&ti, &tcp80, 5), 0);
    ck_assert_uint_eq(ti.n_patterns, 3);
    ck_assert_uint_eq(ti.n_ids, 3);
    k.ipver = 4;
    k.dst[0] = htonl(0x0a010203);
    n = trig_index_match(&ti, &k, ids, 8);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(trig_index_remove(&ti, &any, 3), 0);
    ck_assert_int_eq(trig_index_remove(&ti, &net24, 2), 0);
    ck_assert_int_eq(trig_index_remove(&ti, &v6only, 4), 0);
    ck_assert_uint_eq(ti.n_patterns, 0);
    ck_assert_uint_eq(ti.n_ids, 0);
    ck_assert_uint_eq(trig_index_match(&ti, &k, ids, 8), 0);

    /* Usable again after becoming empty. */
    trig_index_insert(&ti, &net24, 9);
    ck_assert_uint_eq(trig_index_match(&ti, &k, ids, 8), 1);
    ck_assert_uint_eq(ids[0], 9);
    trig_index_destroy(&ti);
}
END_TEST

/* The same id under different filters is reported once per filter. */
START_TEST(test_same_id_several_filters)
{
    struct trig_index ti;
    struct tpm_match a, b;
    struct tpm_key k;
    uint32_t ids[8];

    trig_index_init(&ti);
    memset(&a, 0, sizeof a);
    a.mask.proto = 0xff;
    a.key.proto = 17;
    memset(&b, 0, sizeof b);
    b.mask.sport = 0xffff;
    b.key.sport = 53;
    trig_index_insert(&ti, &a, 7);
    trig_index_insert(&ti, &b, 7);
    memset(&k, 0, sizeof k);
    k.ipver = 4;
    k.proto = 17;
    k.sport = 53;
    ck_assert_uint_eq(trig_index_match(&ti, &k, ids, 8), 2);
    ck_assert_uint_eq(ids[0], 7);
    ck_assert_uint_eq(ids[1], 7);
    ck_assert_int_eq(trig_index_remove(&ti, &a, 7), 0);
    ck_assert_uint_eq(trig_index_match(&ti, &k, ids, 8), 1);
    ck_assert_uint_eq(ids[0], 7);
    ck_assert_uint_eq(ti.n_patterns, 1);
    trig_index_destroy(&ti);
}
END_TEST

/* Many ids on one filter; the count exceeds 'max'. */
START_TEST(test_many_ids_one_filter)
{
    enum { N = 1000 };
    struct trig_index ti;
    struct test_rng rng;
    struct ref r = { NULL, 0, 0 };
    uint32_t order[N];

    test_rng_seed(&rng, 0x1d5);
    trig_index_init(&ti);
    struct tpm_key mask = random_mask(&rng);
    mask.proto = 0xff;
    mask.dport = 0xffff;
    struct tpm_match m = random_match(&rng, &mask);
    struct tpm_key mask2 = mask;
    mask2.dport = 0;
    struct tpm_match other = random_match(&rng, &mask2);
    for (uint32_t i = 0; i < N; i++) {
        trig_index_insert(&ti, &m, 1000 + i);
        ref_add(&r, &m, 1000 + i);
        order[i] = 1000 + i;
        if (i % 10 == 0) {
            trig_index_insert(&ti, &other, 5000 + i);
            ref_add(&r, &other, 5000 + i);
        }
    }
    check_counts(&ti, &r);
    ck_assert_uint_eq(ti.n_patterns, 2);

    struct tpm_key k = key_matching(&rng, &m);
    ck_assert_uint_eq(check_key(&ti, &r, &k), N + (ref_key_matches(&k, &other)
                                                   ? N / 10 : 0));
    static const uint32_t maxes[] = { 0, 1, 3, 4, 5, 100, N - 1, N, N + 1 };
    for (size_t i = 0; i < ARRAY_SIZE(maxes); i++) {
        check_key_truncated(&ti, &r, &k, maxes[i]);
    }
    k = key_matching(&rng, &other);
    check_key(&ti, &r, &k);
    check_key_truncated(&ti, &r, &k, 7);

    /* Remove in random order. */
    test_shuffle_u32(&rng, order, N);
    for (uint32_t i = 0; i < N; i++) {
        ck_assert_int_eq(trig_index_remove(&ti, &m, order[i]), 0);
        ck_assert_int_eq(trig_index_remove(&ti, &m, order[i]), ENOENT);
        int p = ref_find(&r, &m, order[i]);
        ck_assert_int_ge(p, 0);
        ref_del(&r, (uint32_t) p);
        if (i % 50 == 0 || i > N - 5) {
            k = key_matching(&rng, &m);
            check_key(&ti, &r, &k);
            check_counts(&ti, &r);
        }
    }
    ck_assert_uint_eq(ti.n_patterns, 1);
    ck_assert_uint_eq(ti.n_ids, N / 10);
    free(r.pairs);
    trig_index_destroy(&ti);
}
END_TEST

/* Randomized insertions, removals and re-insertions against the linear
 * scan. */
static void
run_random(uint64_t seed, int n_masks, int n_ops, int check_every)
{
    struct trig_index ti;
    struct test_rng rng;
    struct ref r = { NULL, 0, 0 };
    struct ref removed = { NULL, 0, 0 };
    struct tpm_key masks[32];
    uint32_t next_id = 1;
    uint64_t total_matches = 0, queries = 0;

    ck_assert_int_le(n_masks, 32);
    test_rng_seed(&rng, seed);
    trig_index_init(&ti);
    for (int i = 0; i < n_masks; i++) {
        masks[i] = random_mask(&rng);
    }
    /* Always include the all-wildcard filter shape. */
    memset(&masks[0], 0, sizeof masks[0]);

    for (int op = 0; op < n_ops; op++) {
        uint32_t x = test_rng_range(&rng, 100);
        if (x < 45 || r.n == 0) {
            /* New pair: new filter, or a new id on an existing one. */
            struct tpm_match m;
            if (r.n && test_rng_range(&rng, 4) == 0) {
                m = r.pairs[test_rng_range(&rng, r.n)].m;
            } else {
                m = random_match(&rng,
                                 &masks[test_rng_range(&rng, n_masks)]);
            }
            trig_index_insert(&ti, &m, next_id);
            ref_add(&r, &m, next_id);
            next_id++;
        } else if (x < 75) {
            /* Remove a present pair. */
            uint32_t i = test_rng_range(&rng, r.n);
            struct pair p = r.pairs[i];
            TCHECK(trig_index_remove(&ti, &p.m, p.id) == 0,
                   "removing present id %u", p.id);
            ref_del(&r, i);
            ref_add(&removed, &p.m, p.id);
        } else if (x < 85) {
            /* Re-insert a removed pair. */
            if (removed.n) {
                uint32_t i = test_rng_range(&rng, removed.n);
                struct pair p = removed.pairs[i];
                ref_del(&removed, i);
                trig_index_insert(&ti, &p.m, p.id);
                ref_add(&r, &p.m, p.id);
            }
        } else {
            /* Remove something absent: an id on a present filter, a
             * removed pair, a random filter. */
            struct tpm_match m;
            uint32_t id;
            uint32_t y = test_rng_range(&rng, 3);
            if (y == 0) {
                m = r.pairs[test_rng_range(&rng, r.n)].m;
                id = next_id + 1000;
            } else if (y == 1 && removed.n) {
                struct pair p = removed.pairs[test_rng_range(&rng,
                                                             removed.n)];
                m = p.m;
                id = p.id;
            } else {
                struct tpm_key mask = test_rng_range(&rng, 2)
                                      ? random_mask(&rng)
                                      : masks[test_rng_range(&rng, n_masks)];
                m = random_match(&rng, &mask);
                id = test_rng_range(&rng, next_id + 10);
            }
            int expect = ref_find(&r, &m, id) >= 0 ? 0 : ENOENT;
            int ret = trig_index_remove(&ti, &m, id);
            TCHECK(ret == expect, "remove returned %d, expected %d", ret,
                   expect);
            if (!ret) {
                int i = ref_find(&r, &m, id);
                ref_del(&r, (uint32_t) i);
                ref_add(&removed, &m, id);
            }
        }
        check_counts(&ti, &r);

        if (op % check_every == 0) {
            for (int q = 0; q < 50; q++) {
                struct tpm_key k;
                if (r.n && q % 2) {
                    k = key_matching(&rng, &r.pairs[test_rng_range(&rng,
                                                                   r.n)].m);
                } else {
                    k = random_key(&rng);
                }
                total_matches += check_key(&ti, &r, &k);
                queries++;
            }
            if (r.n) {
                struct tpm_key k = key_matching(
                    &rng, &r.pairs[test_rng_range(&rng, r.n)].m);
                check_key_truncated(&ti, &r, &k,
                                    test_rng_range(&rng, 4));
            }
        }
    }

    /* Thousands of keys at the end. */
    for (int q = 0; q < 5000; q++) {
        struct tpm_key k = q % 3 || !r.n
                           ? random_key(&rng)
                           : key_matching(&rng, &r.pairs[test_rng_range(
                                                     &rng, r.n)].m);
        total_matches += check_key(&ti, &r, &k);
        queries++;
    }
    /* The test is meaningful only if keys match several filters. */
    ck_assert_uint_gt(total_matches, 2 * queries);

    /* Remove everything in random order. */
    while (r.n) {
        uint32_t i = test_rng_range(&rng, r.n);
        struct pair p = r.pairs[i];
        ck_assert_int_eq(trig_index_remove(&ti, &p.m, p.id), 0);
        ref_del(&r, i);
        if (r.n % 16 == 0) {
            check_counts(&ti, &r);
            for (int q = 0; q < 10; q++) {
                struct tpm_key k = random_key(&rng);
                check_key(&ti, &r, &k);
            }
        }
    }
    ck_assert_uint_eq(ti.n_patterns, 0);
    ck_assert_uint_eq(ti.n_ids, 0);

    free(r.pairs);
    free(removed.pairs);
    trig_index_destroy(&ti);
}

START_TEST(test_random_few_patterns)
{
    run_random(0x7a11, 4, 4000, 10);
}
END_TEST

START_TEST(test_random_many_patterns)
{
    run_random(0xbeef, 24, 4000, 10);
}
END_TEST

START_TEST(test_random_long)
{
    run_random(0x5eed, 12, 12000, 40);
}
END_TEST

/* Destroy with rules still inside (valgrind checks for leaks). */
START_TEST(test_destroy_nonempty)
{
    struct trig_index ti;
    struct test_rng rng;

    test_rng_seed(&rng, 0xde);
    trig_index_init(&ti);
    for (uint32_t i = 0; i < 500; i++) {
        struct tpm_key mask = random_mask(&rng);
        struct tpm_match m = random_match(&rng, &mask);
        trig_index_insert(&ti, &m, i);
    }
    ck_assert_uint_eq(ti.n_ids, 500);
    trig_index_destroy(&ti);
    ck_assert_uint_eq(ti.n_ids, 0);
    ck_assert_uint_eq(ti.n_patterns, 0);
}
END_TEST

/* One pattern with thousands of rules: the table grows many times; then
 * removal in random order, checking every remaining rule as we go. */
START_TEST(test_growth_and_removal)
{
    enum { N = 5000 };
    struct trig_index ti;
    struct test_rng rng;
    struct tpm_match *m = calloc(N, sizeof *m);
    uint32_t *order = calloc(N, sizeof *order);
    bool *present = calloc(N, sizeof *present);
    uint32_t ids[8];

    test_rng_seed(&rng, 0x96);
    trig_index_init(&ti);
    for (uint32_t i = 0; i < N; i++) {
        memset(&m[i], 0, sizeof m[i]);
        m[i].mask.ipver = 0xff;
        m[i].mask.proto = 0xff;
        m[i].mask.dst[0] = 0xffffffff;
        m[i].mask.dport = 0xffff;
        m[i].key.ipver = 4;
        m[i].key.proto = 6;
        m[i].key.dst[0] = htonl(0x0a000000 + i / 4);
        m[i].key.dport = (uint16_t) (80 + i % 4);
        trig_index_insert(&ti, &m[i], i);
        present[i] = true;
        order[i] = i;
        if ((i & (i - 1)) == 0 || i == N - 1) {
            ck_assert_uint_eq(ti.n_patterns, 1);
            ck_assert_uint_eq(ti.patterns[0].n_rules, i + 1);
            ck_assert_uint_ge(ti.patterns[0].table_mask + 1, 2 * (i + 1));
            for (uint32_t j = 0; j <= i; j++) {
                struct tpm_key k = key_matching(&rng, &m[j]);
                uint32_t n = trig_index_match(&ti, &k, ids, 8);
                TCHECK(n == 1 && ids[0] == j, "rule %u after %u inserts", j,
                       i + 1);
            }
        }
    }

    test_shuffle_u32(&rng, order, N);
    for (uint32_t r = 0; r < N; r++) {
        uint32_t victim = order[r];
        ck_assert_int_eq(trig_index_remove(&ti, &m[victim], victim), 0);
        present[victim] = false;
        struct tpm_key k = key_matching(&rng, &m[victim]);
        TCHECK(trig_index_match(&ti, &k, ids, 8) == 0,
               "removed rule %u still matches", victim);
        if (r % 97 == 0 || r > N - 20) {
            for (uint32_t j = 0; j < N; j++) {
                k = key_matching(&rng, &m[j]);
                uint32_t n = trig_index_match(&ti, &k, ids, 8);
                if (present[j]) {
                    TCHECK(n == 1 && ids[0] == j,
                           "rule %u lost after %u removals", j, r + 1);
                } else {
                    TCHECK(n == 0, "removed rule %u matches", j);
                }
            }
            if (r < N - 1) {
                ck_assert_uint_eq(ti.patterns[0].n_rules, N - r - 1);
            }
        }
    }
    ck_assert_uint_eq(ti.n_patterns, 0);
    ck_assert_uint_eq(ti.n_ids, 0);
    free(m);
    free(order);
    free(present);
    trig_index_destroy(&ti);
}
END_TEST

/* Backward-shift deletion in a table of 8 whose cluster wraps around the
 * end: rules with chosen home slots, removed in every order. */
static void
find_rule_with_home(struct test_rng *rng, uint32_t home, uint32_t size,
                    struct tpm_match *m, const struct tpm_match *avoid,
                    int n_avoid)
{
    for (;;) {
        memset(m, 0, sizeof *m);
        m->mask.ipver = 0xff;
        m->mask.dst[0] = 0xffffffff;
        m->key.ipver = 4;
        m->key.dst[0] = test_rng_u32(rng);
        if ((tpm_key_hash(&m->key) & (size - 1)) != home) {
            continue;
        }
        bool dup = false;
        for (int i = 0; i < n_avoid; i++) {
            dup |= same_match(m, &avoid[i]);
        }
        if (!dup) {
            return;
        }
    }
}

static bool
next_permutation(int *a, int n)
{
    int i = n - 2;
    while (i >= 0 && a[i] >= a[i + 1]) {
        i--;
    }
    if (i < 0) {
        return false;
    }
    int j = n - 1;
    while (a[j] <= a[i]) {
        j--;
    }
    int t = a[i];
    a[i] = a[j];
    a[j] = t;
    for (int l = i + 1, r = n - 1; l < r; l++, r--) {
        t = a[l];
        a[l] = a[r];
        a[r] = t;
    }
    return true;
}

START_TEST(test_backward_shift_wrap)
{
    enum { N = 4 };
    static const uint32_t home_sets[][N] = {
        { 7, 7, 7, 7 },
        { 6, 7, 6, 0 },
        { 7, 0, 7, 1 },
        { 5, 7, 6, 6 },
        { 7, 1, 0, 7 },
        { 6, 6, 0, 0 },
    };
    struct test_rng rng;
    uint32_t ids[8];

    test_rng_seed(&rng, 0xb5);
    for (size_t s = 0; s < ARRAY_SIZE(home_sets) + 20; s++) {
        struct tpm_match m[N];
        for (int i = 0; i < N; i++) {
            uint32_t home = s < ARRAY_SIZE(home_sets)
                            ? home_sets[s][i]
                            : (5 + test_rng_range(&rng, 5)) & 7;
            find_rule_with_home(&rng, home, 8, &m[i], m, i);
        }
        int perm[N] = { 0, 1, 2, 3 };
        do {
            struct trig_index ti;
            trig_index_init(&ti);
            for (int i = 0; i < N; i++) {
                trig_index_insert(&ti, &m[i], 100 + i);
            }
            /* Still the minimum table: the cluster really wraps. */
            ck_assert_uint_eq(ti.patterns[0].table_mask, 7);
            bool present[N] = { true, true, true, true };
            for (int r = 0; r < N; r++) {
                int v = perm[r];
                ck_assert_int_eq(trig_index_remove(&ti, &m[v], 100 + v), 0);
                present[v] = false;
                for (int j = 0; j < N; j++) {
                    uint32_t n = trig_index_match(&ti, &m[j].key, ids, 8);
                    if (present[j]) {
                        ck_assert_msg(n == 1 && ids[0] == (uint32_t) 100 + j,
                                      "set %zu: rule %d lost", s, j);
                    } else {
                        ck_assert_uint_eq(n, 0);
                    }
                    ck_assert_int_eq(trig_index_remove(&ti, &m[j], 99),
                                     ENOENT);
                }
            }
            ck_assert_uint_eq(ti.n_patterns, 0);
            trig_index_destroy(&ti);
        } while (next_permutation(perm, N));
    }
}
END_TEST

/* Random churn within one small pattern: the table stays small, so
 * clusters, wrap-around and backward shifts happen constantly. */
START_TEST(test_churn_one_pattern)
{
    enum { KEYS = 24 };
    struct trig_index ti;
    struct test_rng rng;
    struct tpm_match m[KEYS];
    uint32_t n_on[KEYS];
    uint32_t ids[64];

    test_rng_seed(&rng, 0xc4);
    trig_index_init(&ti);
    for (int i = 0; i < KEYS; i++) {
        memset(&m[i], 0, sizeof m[i]);
        m[i].mask.sport = 0xffff;
        m[i].key.sport = (uint16_t) (1000 + i);
        n_on[i] = 0;
    }
    /* Ids: key i holds ids i*100 .. i*100 + n_on[i] - 1 (removed from the
     * top, so the set stays contiguous). */
    for (int op = 0; op < 20000; op++) {
        int i = (int) test_rng_range(&rng, KEYS);
        if (test_rng_range(&rng, 2) && n_on[i] < 3) {
            trig_index_insert(&ti, &m[i], i * 100 + n_on[i]);
            n_on[i]++;
        } else if (n_on[i]) {
            n_on[i]--;
            ck_assert_int_eq(trig_index_remove(&ti, &m[i], i * 100 + n_on[i]),
                             0);
        } else {
            ck_assert_int_eq(trig_index_remove(&ti, &m[i], i * 100), ENOENT);
        }
        uint32_t total = 0;
        for (int j = 0; j < KEYS; j++) {
            total += n_on[j];
            struct tpm_key k;
            memset(&k, 0, sizeof k);
            k.ipver = 4;
            k.sport = (uint16_t) (1000 + j);
            uint32_t n = trig_index_match(&ti, &k, ids, 64);
            TCHECK(n == n_on[j], "op %d key %d: %u ids, expected %u", op, j,
                   n, n_on[j]);
            qsort(ids, n, sizeof *ids, test_cmp_u32);
            for (uint32_t l = 0; l < n; l++) {
                TCHECK(ids[l] == j * 100 + l, "op %d key %d", op, j);
            }
        }
        TCHECK(ti.n_ids == total, "n_ids");
        TCHECK(ti.n_patterns == (total ? 1 : 0), "n_patterns");
    }
    trig_index_destroy(&ti);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Prefix tries: every pattern count from 1 to 80 against the reference. */

/* Returns bit 'i' (0: first) of address 'w' (network byte order). */
static int
addr_bit(const uint32_t w[4], int i)
{
    return (ntohl(w[i / 32]) >> (31 - i % 32)) & 1;
}

/* Leading one bits of address mask 'w', computed bit by bit. */
static int
addr_plen(const uint32_t w[4])
{
    int n = 0;
    while (n < 128 && addr_bit(w, n)) {
        n++;
    }
    return n;
}

/* A rule prefix that the tries must hold: 'n' rules of pattern 'pattern'
 * whose address starts with the 'plen' bits 'bits'. */
struct want_prefix {
    uint32_t pattern;
    int plen;
    uint8_t bits[128];
    uint32_t n;
    bool seen;
};

struct trie_walk {
    const struct trig_trie *t;
    struct want_prefix *want;
    uint32_t n_want;
    uint32_t n_nodes;
    uint8_t path[128];
};

/* Checks node 'i' of 'w->t' and its subtree ('depth' bits down, under
 * ancestors with rules of the patterns in 'above'). */
static void
trie_walk_node(struct trie_walk *w, uint32_t i, int depth, bool root,
               uint64_t above)
{
    const struct trig_trie_node *node = &w->t->nodes[i];
    const struct trig_trie_refs *refs = &w->t->refs[i];
    uint64_t prefix = node->prefix & ~(uint64_t) (TRIG_TRIE_LEN_MASK
                                                  | TRIG_TRIE_STOP);
    int len = node->prefix & TRIG_TRIE_LEN_MASK;

    w->n_nodes++;
    TCHECK(len <= TRIG_TRIE_NODE_BITS && (root || len >= 1),
           "node %u: %d bits", i, len);
    TCHECK(depth + len <= 128, "node %u too deep", i);
    TCHECK(!(prefix << len), "node %u: bits beyond its prefix", i);
    for (int b = 0; b < len; b++) {
        w->path[depth + b] = (prefix >> (63 - b)) & 1;
    }
    depth += len;

    uint64_t bits = 0;
    for (uint32_t j = 0; j < refs->n; j++) {
        const struct trig_trie_ref *ref = &refs->refs[j];
        TCHECK(ref->n_rules > 0, "node %u: empty count kept", i);
        if (ref->pattern < TRIG_INDEX_TRIE_PATTERNS) {
            bits |= 1ull << ref->pattern;
        }
        bool found = false;
        for (uint32_t k = 0; k < w->n_want && !found; k++) {
            struct want_prefix *p = &w->want[k];
            if (p->pattern == ref->pattern && p->plen == depth
                && !memcmp(p->bits, w->path, depth)) {
                TCHECK(!p->seen, "prefix of pattern %u twice", p->pattern);
                TCHECK(p->n == ref->n_rules,
                       "pattern %u /%d: %u rules in the trie, reference %u",
                       p->pattern, depth, ref->n_rules, p->n);
                p->seen = found = true;
            }
        }
        TCHECK(found, "node %u: pattern %u /%d not in the reference", i,
               ref->pattern, depth);
    }
    TCHECK(node->patterns == bits, "node %u: bitmap %"PRIx64", counts say "
           "%"PRIx64, i, node->patterns, bits);

    int n_children = 0;
    uint64_t below = bits;
    uint32_t walk = 0;
    for (int b = 0; b < 2; b++) {
        uint32_t c = node->child[b];
        if (c) {
            n_children++;
            TCHECK(depth < 128, "node %u: child beyond 128 bits", i);
            TCHECK((int) (w->t->nodes[c].prefix >> 63) == b,
                   "node %u: child %d starts with the other bit", i, b);
            trie_walk_node(w, c, depth, false, above | bits);
            /* A walk that goes on visits 'c', and below it unless it
             * stops there. */
            uint32_t levels = 1 + (w->t->nodes[c].prefix & TRIG_TRIE_STOP
                                   ? 0 : w->t->refs[c].walk);
            walk = MAX(walk, levels);
            below |= w->t->nodes[c].below;
        }
    }
    TCHECK(node->below == below, "node %u: below %"PRIx64", subtree has "
           "%"PRIx64, i, node->below, below);
    TCHECK(refs->walk == walk, "node %u: walk %u, subtree says %u", i,
           refs->walk, walk);
    /* The walk stops here iff probing the patterns below that are not
     * above costs no more than walking on. */
    int more = __builtin_popcountll(below & ~(above | bits));
    bool stop = more * TRIG_TRIE_PROBE_COST
                <= (int) walk * TRIG_TRIE_LEVEL_COST;
    TCHECK(!(node->prefix & TRIG_TRIE_STOP) == !stop,
           "node %u: stop flag %d, expected %d", i,
           !!(node->prefix & TRIG_TRIE_STOP), stop);
    /* Pruned: no empty leaf, and a node with one child and no rule only
     * if the two do not fit in one node. */
    if (!refs->n) {
        uint32_t c = node->child[0] | node->child[1];
        TCHECK(n_children == 2
               || (n_children == 1
                   && len + (int) (w->t->nodes[c].prefix
                                   & TRIG_TRIE_LEN_MASK)
                      > TRIG_TRIE_NODE_BITS),
               "node %u: no rule and %d children", i, n_children);
    }
}

/* Checks trie 'src' ? nw_src : nw_dst of 'ti' against the rules of 'r'. */
static void
check_trie(const struct trig_index *ti, const struct ref *r, bool src)
{
    const struct trig_trie *t = src ? &ti->src_trie : &ti->dst_trie;
    struct want_prefix *want = calloc(r->n + 1, sizeof *want);
    uint32_t n_want = 0;
    uint64_t wild = 0;

    ck_assert_ptr_nonnull(want);
    for (uint32_t p = 0; p < ti->n_patterns; p++) {
        const struct tpm_key *mask = &ti->patterns[p].mask;
        int plen = addr_plen(src ? mask->src : mask->dst);
        TCHECK(plen == (src ? ti->patterns[p].src_plen
                            : ti->patterns[p].dst_plen),
               "pattern %u: prefix length %d", p, plen);
        if (!plen) {
            if (p < TRIG_INDEX_TRIE_PATTERNS) {
                wild |= 1ull << p;
            }
            continue;
        }
        /* One count per distinct filter (rule) of the pattern. */
        for (uint32_t i = 0; i < r->n; i++) {
            const struct tpm_match *m = &r->pairs[i].m;
            bool first = same_key(&m->mask, mask);
            for (uint32_t j = 0; j < i && first; j++) {
                first = !same_match(&r->pairs[j].m, m);
            }
            if (!first) {
                continue;
            }
            struct want_prefix w;
            memset(&w, 0, sizeof w);
            w.pattern = p;
            w.plen = plen;
            for (int b = 0; b < plen; b++) {
                w.bits[b] = addr_bit(src ? m->key.src : m->key.dst, b);
            }
            uint32_t k;
            for (k = 0; k < n_want; k++) {
                if (want[k].pattern == p
                    && !memcmp(want[k].bits, w.bits, plen)) {
                    break;
                }
            }
            if (k == n_want) {
                want[n_want++] = w;
            }
            want[k].n++;
        }
    }
    TCHECK(wild == (src ? ti->wild_src : ti->wild_dst),
           "wildcard bitmap %"PRIx64", reference %"PRIx64,
           src ? ti->wild_src : ti->wild_dst, wild);

    struct trie_walk w = { .t = t, .want = want, .n_want = n_want };
    if (t->root) {
        trie_walk_node(&w, t->root, 0, true, 0);
    }
    for (uint32_t k = 0; k < n_want; k++) {
        TCHECK(want[k].seen, "pattern %u /%d missing from the trie",
               want[k].pattern, want[k].plen);
    }
    TCHECK(w.n_nodes == t->n_live, "%u nodes reachable, %u live",
           w.n_nodes, t->n_live);
    /* Bounded: at most a split node and a chain per prefix. */
    TCHECK(t->n_live <= (2 + 128 / TRIG_TRIE_NODE_BITS) * n_want,
           "%u nodes for %u prefixes", t->n_live, n_want);
    if (!n_want) {
        TCHECK(!t->root && !t->nodes && !t->n_nodes,
               "empty trie keeps its memory");
    }
    free(want);
}

/* Checks 'key' in both modes and the pre-check.  Returns the number of
 * matches; counts in '*n_pruned' the keys trig_index_may_match() rejected. */
static uint32_t
check_key_all(struct trig_index *ti, const struct ref *r,
              const struct tpm_key *key, uint32_t *n_pruned)
{
    uint32_t n = check_key(ti, r, key);
    trig_index_set_linear(ti, true);
    TCHECK(check_key(ti, r, key) == n, "linear mode differs");
    trig_index_set_linear(ti, false);
    bool may = trig_index_may_match(ti, key);
    TCHECK(may || !n, "may_match false for a key with %u matches", n);
    if (ti->n_patterns > TRIG_INDEX_TRIE_PATTERNS) {
        TCHECK(may, "may_match false with %u patterns", ti->n_patterns);
    }
    *n_pruned += !may;
    return n;
}

/* A mask for the prefix-trie tests: independent prefix lengths on nw_src
 * and nw_dst of any length for the key's IP version (sometimes with
 * bits after a gap, so the leading run is shorter than the mask), proto
 * and port shapes, and some masks without addresses at all. */
static struct tpm_key
trie_mask(struct test_rng *rng)
{
    struct tpm_key m;

    memset(&m, 0, sizeof m);
    int max = 32;
    switch (test_rng_range(rng, 3)) {
    case 0:
        m.ipver = 0xff;
        break;
    case 1:
        m.ipver = 0xff;
        max = 128;
        break;
    default:
        max = 16;
        break;
    }
    for (int f = 0; f < 2; f++) {
        uint32_t *w = f ? m.src : m.dst;
        int plen = test_rng_range(rng, 4) == 0 ? 0
                   : (int) test_rng_range(rng, max + 1);
        prefix_mask(w, plen);
        if (plen + 2 < max && test_rng_range(rng, 8) == 0) {
            int gap = plen + 1 + test_rng_range(rng, max - plen - 1);
            w[gap / 32] |= htonl(1u << (31 - gap % 32));
        }
    }
    m.proto = test_rng_range(rng, 2) ? 0xff : 0;
    m.sport = random_port_mask(rng);
    m.dport = random_port_mask(rng);
    return m;
}

/* A key for the prefix-trie tests: like random_key(), but with random
 * bits far into the addresses, so that long prefixes split. */
static struct tpm_key
trie_key(struct test_rng *rng)
{
    struct tpm_key k = random_key(rng);
    int bits = k.ipver == 4 ? 32 : 128;

    for (int f = 0; f < 2; f++) {
        uint32_t *w = f ? k.src : k.dst;
        for (int n = test_rng_range(rng, 3); n > 0; n--) {
            int b = test_rng_range(rng, bits);
            w[b / 32] ^= htonl(1u << (31 - b % 32));
        }
    }
    return k;
}

/* 'key' with one random address bit flipped: a near miss. */
static struct tpm_key
flip_addr_bit(struct test_rng *rng, struct tpm_key key)
{
    uint32_t *w = test_rng_range(rng, 2) ? key.src : key.dst;
    int b = test_rng_range(rng, key.ipver == 6 ? 128 : 32);
    w[b / 32] ^= htonl(1u << (31 - b % 32));
    return key;
}

/* Queries 'n' keys, half of them built to match a present filter and a
 * third of those then pushed one address bit away. */
static void
trie_queries(struct trig_index *ti, const struct ref *r,
             struct test_rng *rng, int n, uint64_t *total,
             uint32_t *n_pruned)
{
    for (int q = 0; q < n; q++) {
        struct tpm_key k;
        if (r->n && q % 2) {
            k = key_matching(rng, &r->pairs[test_rng_range(rng, r->n)].m);
            if (test_rng_range(rng, 3) == 0) {
                k = flip_addr_bit(rng, k);
            }
        } else {
            k = trie_key(rng);
        }
        *total += check_key_all(ti, r, &k, n_pruned);
    }
}

/* Builds an index with exactly 'n_masks' patterns, checks it, churns it
 * with inserts and removes (patterns go away and come back, and the last
 * pattern moves into the hole), and drains it. */
static void
run_trie(uint64_t seed, int n_masks)
{
    struct trig_index ti;
    struct test_rng rng;
    struct ref r = { NULL, 0, 0 };
    struct tpm_key masks[96];
    uint32_t next_id = 1, n_pruned = 0;
    uint64_t total = 0;

    ck_assert_int_le(n_masks, (int) ARRAY_SIZE(masks));
    test_rng_seed(&rng, seed);
    trig_index_init(&ti);
    for (int i = 0; i < n_masks; i++) {
        bool dup;
        do {
            masks[i] = trie_mask(&rng);
            dup = false;
            for (int j = 0; j < i; j++) {
                dup |= same_key(&masks[i], &masks[j]);
            }
        } while (dup);
    }

    /* Every mask gets 1 to 6 filters, some with several ids. */
    for (int i = 0; i < n_masks; i++) {
        for (int n = 1 + test_rng_range(&rng, 6); n > 0; n--) {
            struct tpm_match m = random_match(&rng, &masks[i]);
            for (int ids = test_rng_range(&rng, 4) ? 1 : 3; ids > 0;
                 ids--) {
                if (ref_find(&r, &m, next_id) < 0) {
                    trig_index_insert(&ti, &m, next_id);
                    ref_add(&r, &m, next_id);
                }
                next_id++;
            }
        }
    }
    ck_assert_uint_eq(ti.n_patterns, n_masks);
    check_counts(&ti, &r);
    check_trie(&ti, &r, true);
    check_trie(&ti, &r, false);
    trie_queries(&ti, &r, &rng, 400, &total, &n_pruned);

    /* Churn: whole patterns disappear (their last rule removed) and
     * reappear. */
    for (int op = 0; op < 300; op++) {
        if (r.n && test_rng_range(&rng, 2)) {
            uint32_t i = test_rng_range(&rng, r.n);
            TCHECK(!trig_index_remove(&ti, &r.pairs[i].m, r.pairs[i].id),
                   "removing present id %u", r.pairs[i].id);
            ref_del(&r, i);
        } else {
            struct tpm_match m = random_match(
                &rng, &masks[test_rng_range(&rng, n_masks)]);
            trig_index_insert(&ti, &m, next_id);
            ref_add(&r, &m, next_id);
            next_id++;
        }
        if (op % 25 == 0) {
            check_counts(&ti, &r);
            check_trie(&ti, &r, true);
            check_trie(&ti, &r, false);
            trie_queries(&ti, &r, &rng, 40, &total, &n_pruned);
        }
    }

    /* Drain. */
    while (r.n) {
        uint32_t i = test_rng_range(&rng, r.n);
        ck_assert_int_eq(trig_index_remove(&ti, &r.pairs[i].m,
                                           r.pairs[i].id), 0);
        ref_del(&r, i);
        if (r.n % 8 == 0) {
            check_counts(&ti, &r);
            check_trie(&ti, &r, true);
            check_trie(&ti, &r, false);
            trie_queries(&ti, &r, &rng, 10, &total, &n_pruned);
        }
    }
    ck_assert_uint_eq(ti.n_patterns, 0);
    ck_assert_uint_eq(ti.src_trie.n_live + ti.dst_trie.n_live, 0);
    ck_assert_uint_eq(ti.wild_src | ti.wild_dst, 0);

    /* Meaningful only if keys match, and if the pre-check rejects some. */
    TCHECK(total > 100, "%d patterns: only %"PRIu64" matches", n_masks,
           total);
    TCHECK(n_pruned > 0, "%d patterns: may_match never false", n_masks);
    free(r.pairs);
    trig_index_destroy(&ti);
}

START_TEST(test_trie_random)
{
    run_trie(0x7e1e + _i, _i);
}
END_TEST

/* More patterns than the bitmaps have bits: patterns 64 and up are always
 * probed, trig_index_may_match() is always true, and a pattern moved from
 * beyond 64 into a hole below gains its bits. */
START_TEST(test_trie_overflow_patterns)
{
    enum { N = TRIG_INDEX_TRIE_PATTERNS + 6 };
    struct trig_index ti;
    struct ref r = { NULL, 0, 0 };
    struct tpm_match m[N];
    uint32_t n_pruned = 0;
    uint32_t ids[8];

    trig_index_init(&ti);
    /* Pattern i: nw_dst 10.0.0.0/8 + i, one rule each, so every rule is
     * 10.0.0.0 under its own prefix length: nested prefixes. */
    for (int i = 0; i < N; i++) {
        memset(&m[i], 0, sizeof m[i]);
        m[i].mask.ipver = 0xff;
        m[i].key.ipver = 4;
        if (i < 25) {
            prefix_mask(m[i].mask.dst, 8 + i);
            m[i].key.dst[0] = htonl(0x0a000000);
        } else {
            /* The rest differ in tp_dst masks over nw_dst /32. */
            prefix_mask(m[i].mask.dst, 32);
            m[i].key.dst[0] = htonl(0x0a000000);
            m[i].mask.proto = 0xff;
            m[i].key.proto = 17;
            m[i].mask.dport = (uint16_t) (0xffff << (i % 16));
            m[i].mask.sport = (uint16_t) (0xffff << (i / 16));
        }
        trig_index_insert(&ti, &m[i], i);
        ref_add(&r, &m[i], i);
    }
    ck_assert_uint_eq(ti.n_patterns, N);
    check_trie(&ti, &r, true);
    check_trie(&ti, &r, false);

    struct tpm_key k;
    memset(&k, 0, sizeof k);
    k.ipver = 4;
    k.proto = 17;
    k.dst[0] = htonl(0x0a000000);
    ck_assert_uint_eq(check_key_all(&ti, &r, &k, &n_pruned), N);
    k.dst[0] = htonl(0x0b000000);
    ck_assert_uint_eq(check_key_all(&ti, &r, &k, &n_pruned), 0);
    ck_assert(trig_index_may_match(&ti, &k));

    /* Removing pattern 0 moves pattern N - 1 into index 0. */
    ck_assert_int_eq(trig_index_remove(&ti, &m[0], 0), 0);
    ref_del(&r, 0);
    ck_assert(same_key(&ti.patterns[0].mask, &m[N - 1].mask));
    check_trie(&ti, &r, true);
    check_trie(&ti, &r, false);
    ck_assert(ti.dst_trie.nodes[ti.dst_trie.root].below & 1);
    k.dst[0] = htonl(0x0a000000);
    k.sport = k.dport = 0;
    ck_assert_uint_eq(trig_index_match(&ti, &k, ids, 8), N - 1);

    /* Down to 64 patterns: the pre-check rejects again. */
    for (int i = 1; ti.n_patterns > TRIG_INDEX_TRIE_PATTERNS; i++) {
        ck_assert_int_eq(trig_index_remove(&ti, &m[i], i), 0);
        ref_del(&r, (uint32_t) ref_find(&r, &m[i], i));
        check_trie(&ti, &r, true);
        check_trie(&ti, &r, false);
    }
    k.dst[0] = htonl(0x0b000000);
    ck_assert(!trig_index_may_match(&ti, &k));
    ck_assert_uint_eq(check_key_all(&ti, &r, &k, &n_pruned), 0);
    ck_assert_uint_eq(n_pruned, 1);
    free(r.pairs);
    trig_index_destroy(&ti);
}
END_TEST

static Suite *
trig_index_suite(void)
{
    Suite *s = suite_create("trig-index");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_empty);
    tcase_add_test(tc, test_basic);
    tcase_add_test(tc, test_same_id_several_filters);
    tcase_add_test(tc, test_many_ids_one_filter);
    tcase_add_test(tc, test_destroy_nonempty);
    tcase_add_test(tc, test_growth_and_removal);
    tcase_add_test(tc, test_backward_shift_wrap);
    tcase_add_test(tc, test_churn_one_pattern);
    suite_add_tcase(s, tc);

    TCase *tr = tcase_create("random");
    tcase_set_timeout(tr, 120);
    tcase_add_test(tr, test_random_few_patterns);
    tcase_add_test(tr, test_random_many_patterns);
    tcase_add_test(tr, test_random_long);
    tcase_add_loop_test(tr, test_trie_random, 1, 81);
    tcase_add_test(tr, test_trie_overflow_patterns);
    suite_add_tcase(s, tr);
    return s;
}

int
main(void)
{
    return test_run_suite(trig_index_suite());
}
