/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for tpm/flow-table.[ch].
 *
 * The randomized tests drive the table the way the monitor does (look up,
 * insert on a miss, stamp the epoch tag of the entry, advance epochs,
 * scrub) and check it after every operation against two independent
 * references:
 *
 *   - the set of resident keys, kept from what the table reports (insert's
 *     'replaced' and 'old_key', and the scrubber's decisions as predicted
 *     below): every key the set holds must be found with its exact key,
 *     no key the set lacks may be found, n_live equals the set's size and
 *     no key is resident twice (whole-table scan);
 *
 *   - a shadow of the slot array written from the specification in
 *     flow-table.h (first free, dead or stale slot of the window, else the
 *     least recently updated entry; scrubber frees entries idle for more
 *     than 'idle' epochs), which predicts where every insertion lands,
 *     what it replaces, the counters, the generations and the scrubber's
 *     callbacks.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "flow-table.h"
#include "test-util.h"
#include "util.h"

#define TAG0 2                  /* First epoch tag (see flow-table.h). */

/* Stamps 'f' as updated in the epoch with tag 'tag', like the monitor's
 * packet path does, counts set to values with every byte nonzero: an
 * IPv4 entry keeps them in its key's unused words, which lookups must
 * leave out. */
static void
touch(struct tpm_flow *f, uint32_t tag)
{
    struct tpm_flow_count *cnt = tpm_flow_count(f, tag & 1);

    f->tag[tag & 1] = tag;
    cnt->packets = 0x81818181u ^ tag;
    cnt->bytes = 0xf7f7f7f7u ^ tag;
}

/* Returns true if 'f''s key (tpm_flow_key()) is 'k'. */
static bool
flow_key_is(const struct tpm_flow *f, const struct tpm_key *k)
{
    struct tpm_key fk;

    tpm_flow_key(f, &fk);
    return tpm_key_equal(&fk, k);
}

static struct tpm_key
random_key(struct test_rng *rng)
{
    struct tpm_key k;

    memset(&k, 0, sizeof k);
    k.src[0] = test_rng_u32(rng);
    k.dst[0] = test_rng_u32(rng);
    k.sport = (uint16_t) test_rng_u32(rng);
    k.dport = (uint16_t) test_rng_u32(rng);
    k.proto = test_rng_range(rng, 2) ? 6 : 17;
    k.ipver = 4;
    return k;
}

/* Key number 'i' of a pool: unique by construction (dst[0] == i). */
static struct tpm_key
pool_key(struct test_rng *rng, uint32_t i)
{
    struct tpm_key k = random_key(rng);
    k.dst[0] = i;
    return k;
}

/* Fills 'keys' and 'hashes' with 'n' distinct keys whose hash lands in
 * bucket 'bucket' of a table with mask 'mask'. */
static void
colliding_keys(struct test_rng *rng, uint32_t mask, uint32_t bucket,
               struct tpm_key *keys, uint32_t *hashes, int n)
{
    for (int i = 0; i < n;) {
        struct tpm_key k = random_key(rng);
        uint32_t h = tpm_key_hash(&k);
        if ((h & mask) != bucket) {
            continue;
        }
        bool dup = false;
        for (int j = 0; j < i; j++) {
            dup |= tpm_key_equal(&keys[j], &k);
        }
        if (!dup) {
            keys[i] = k;
            hashes[i] = h;
            i++;
        }
    }
}

static bool
is_resident_state(uint8_t state)
{
    return state == TPM_FLOW_LIVE || state == TPM_FLOW_PENDING;
}

/* Inserts 'k' (which must be absent), stamps it with 'tag' and checks the
 * fields a fresh entry must have. */
static struct tpm_flow *
insert_touch(struct tpm_flow_table *ft, const struct tpm_key *k, uint32_t h,
             uint32_t tag, bool *replaced, struct tpm_key *old)
{
    ck_assert_ptr_null(tpm_flow_table_find(ft, k, h));
    struct tpm_flow *f = tpm_flow_table_insert(ft, k, h, tag, replaced, old);
    ck_assert_ptr_nonnull(f);
    ck_assert(flow_key_is(f, k));
    ck_assert_uint_eq(f->hash, h);
    ck_assert_int_eq(f->state, TPM_FLOW_PENDING);
    ck_assert_uint_eq(f->tag[0], 0);
    ck_assert_uint_eq(f->tag[1], 0);
    ck_assert_uint_eq(f->sum_mask, 0);
    ck_assert_uint_eq(f->n_matched, 0);
    touch(f, tag);
    ck_assert_ptr_eq(tpm_flow_table_find(ft, k, h), f);
    return f;
}

/* ---------------------------------------------------------------------- */
/* Layout and init. */

START_TEST(test_layout)
{
    struct tpm_flow_table ft;

    ck_assert_uint_eq(sizeof(struct tpm_flow), 192);
    ck_assert_uint_eq(sizeof(struct tpm_flow_stats), 64);
    ck_assert_uint_eq(offsetof(struct tpm_flow, stats), 64);
    ck_assert_int_eq(tpm_flow_table_init(&ft, 1024, 8), 0);
    ck_assert_ptr_nonnull(ft.flows);
    for (uint32_t i = 0; i < 1024; i++) {
        struct tpm_flow *f = &ft.flows[i];
        TCHECK(((uintptr_t) f & (CACHE_LINE_SIZE - 1)) == 0, "slot %u", i);
        TCHECK(((uintptr_t) &f->stats[1] & (CACHE_LINE_SIZE - 1)) == 0,
               "slot %u", i);
        TCHECK(f->state == TPM_FLOW_FREE, "slot %u", i);
        TCHECK(f->gen == 0 && f->tag[0] == 0 && f->tag[1] == 0, "slot %u",
               i);
        TCHECK(tpm_flow_index(&ft, f) == i, "slot %u", i);
    }
    ck_assert_uint_eq(ft.mask, 1023);
    ck_assert_uint_eq(ft.probe_limit, 8);
    ck_assert_uint_eq(ft.n_used, 0);
    ck_assert_uint_eq(ft.n_live, 0);
    ck_assert_uint_eq(ft.scrub_pos, 0);
    ck_assert_ptr_eq(tpm_flow_table_bucket(&ft, 0x12345678),
                     &ft.flows[0x678 & 1023]);
    tpm_flow_table_destroy(&ft);
    ck_assert_ptr_null(ft.flows);
    tpm_flow_table_destroy(NULL);
}
END_TEST

/* Where an entry keeps its counts: an IPv4 flow's in the unused words of
 * its line 0 (both parities, apart from the key's own words), an IPv6
 * flow's at the head of its statistics lines; lookups and the key's
 * readers see the key alone either way. */
START_TEST(test_counts_layout)
{
    struct tpm_flow_table ft;
    struct test_rng rng;

    test_rng_seed(&rng, 0xc0c0);
    ck_assert_int_eq(tpm_flow_table_init(&ft, 1024, 8), 0);

    struct tpm_key k4 = random_key(&rng), k6 = k4, k6b;
    k6.ipver = 6;
    for (int w = 1; w < 4; w++) {
        k6.src[w] = test_rng_u32(&rng);
        k6.dst[w] = test_rng_u32(&rng);
    }
    bool replaced;
    struct tpm_flow *f4 = insert_touch(&ft, &k4, tpm_key_hash(&k4), TAG0,
                                       &replaced, NULL);
    ck_assert(!ft.has_v6);
    struct tpm_flow *f6 = insert_touch(&ft, &k6, tpm_key_hash(&k6), TAG0,
                                       &replaced, NULL);
    ck_assert(ft.has_v6);
    for (int p = 0; p < 2; p++) {
        struct tpm_flow_count *c4 = tpm_flow_count(f4, p);
        struct tpm_flow_count *c6 = tpm_flow_count(f6, p);
        /* IPv4: inside line 0, clear of the key's words 0 and 2 (the
         * addresses) and 4 (ports, protocol, version, tenant). */
        uintptr_t off = (uintptr_t) c4 - (uintptr_t) f4;
        ck_assert(off + sizeof *c4 <= CACHE_LINE_SIZE);
        ck_assert(off % 16 >= 4 && off % 16 + sizeof *c4 <= 16);
        ck_assert(off + sizeof *c4 <= offsetof(struct tpm_key, sport));
        ck_assert_ptr_eq(c6, &f6->stats[p].count);
        c4->packets = c6->packets = UINT32_MAX - p;
        c4->bytes = c6->bytes = 0x7f7f7f7fu + p;
    }
    /* The counts of one parity do not touch the other's. */
    ck_assert_uint_eq(tpm_flow_count(f4, 0)->packets, UINT32_MAX);
    ck_assert_uint_eq(tpm_flow_count(f4, 1)->packets, UINT32_MAX - 1);
    ck_assert_uint_eq(tpm_flow_count(f4, 0)->bytes, 0x7f7f7f7fu);
    ck_assert_uint_eq(tpm_flow_count(f4, 1)->bytes, 0x7f7f7f80u);
    ck_assert(flow_key_is(f4, &k4) && flow_key_is(f6, &k6));
    ck_assert_ptr_eq(tpm_flow_table_find(&ft, &k4, tpm_key_hash(&k4)), f4);
    ck_assert_ptr_eq(tpm_flow_table_find(&ft, &k6, tpm_key_hash(&k6)), f6);
    ck_assert(tpm_flow_key_equal(f4, &k4) && tpm_flow_key_equal(f6, &k6));

    /* An IPv6 key equal to the IPv4 entry's line 0 word for word (the
     * counts as its address words) is not the IPv4 entry: the version
     * tells them apart; nor is an IPv6 key that differs from an IPv6
     * entry in one of the words an IPv4 key leaves out. */
    k6b = f4->key;
    k6b.ipver = 6;
    ck_assert(!tpm_flow_key_equal(f4, &k6b));
    k6b = k6;
    k6b.src[2] ^= 1;
    ck_assert(!tpm_flow_key_equal(f6, &k6b));
    k6b = k6;
    k6b.dst[3] ^= 0x80000000u;
    ck_assert(!tpm_flow_key_equal(f6, &k6b));
    /* Nor is an IPv4 key that differs in its own words. */
    struct tpm_key k4b = k4;
    k4b.dst[0] ^= 1;
    ck_assert(!tpm_flow_key_equal(f4, &k4b));
    k4b = k4;
    k4b.dport ^= 1;
    ck_assert(!tpm_flow_key_equal(f4, &k4b));

    /* A key that is not IP's (version 0, a frame not parsed) is no
     * entry's, not even an all-zero one's (a free slot). */
    const struct tpm_flow *free_slot
        = &ft.flows[(tpm_key_hash(&k4) + 512) & 1023];
    struct tpm_key k0;
    memset(&k0, 0, sizeof k0);
    ck_assert_int_eq(free_slot->state, TPM_FLOW_FREE);
    ck_assert(!tpm_flow_key_equal(free_slot, &k0));
    k0 = f4->key;
    k0.ipver = 0;
    ck_assert(!tpm_flow_key_equal(f4, &k0));

    /* The key's readers get it without the counts. */
    struct tpm_key got;
    tpm_flow_key(f4, &got);
    ck_assert_mem_eq(&got, &k4, sizeof got);
    tpm_flow_key(f6, &got);
    ck_assert_mem_eq(&got, &k6, sizeof got);

    /* Which flows the sweep reads in their statistics lines. */
    ck_assert(!tpm_flow_needs_stats(f4, 0));
    ck_assert(tpm_flow_needs_stats(f4, 0x4));
    ck_assert(tpm_flow_needs_stats(f6, 0));

    /* A reused entry starts with zero counts. */
    uint32_t tag = TAG0 + 8;
    uint32_t n = tpm_flow_table_scrub(&ft, 1024, tag, 2, NULL, NULL);
    ck_assert_uint_eq(n, 1024);
    ck_assert_uint_eq(ft.n_live, 0);
    struct tpm_flow *g = tpm_flow_table_insert(&ft, &k4, tpm_key_hash(&k4),
                                               tag, &replaced, NULL);
    ck_assert_ptr_eq(g, f4);
    for (int p = 0; p < 2; p++) {
        ck_assert_uint_eq(tpm_flow_count(g, p)->packets, 0);
        ck_assert_uint_eq(tpm_flow_count(g, p)->bytes, 0);
    }
    ck_assert(flow_key_is(g, &k4));
    tpm_flow_table_destroy(&ft);
}
END_TEST

START_TEST(test_init_rejects)
{
    static const struct {
        uint32_t n_slots, probe_limit;
        int error;
    } cases[] = {
        { 0, 1, EINVAL },
        { 3, 1, EINVAL },
        { 6, 2, EINVAL },
        { 100, 4, EINVAL },
        { 1000, 8, EINVAL },
        { 0x80000001u, 8, EINVAL },
        { 1024, 0, EINVAL },
        { 1024, 1025, EINVAL },
        { 16, 17, EINVAL },
        { 16, UINT32_MAX, EINVAL },
        { 1, 0, EINVAL },
        { 1, 2, EINVAL },
        { 1, 1, 0 },
        { 2, 2, 0 },
        { 16, 16, 0 },
        { 1024, 1, 0 },
        { 1024, 1024, 0 },
    };

    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct tpm_flow_table ft;
        int error = tpm_flow_table_init(&ft, cases[i].n_slots,
                                        cases[i].probe_limit);
        ck_assert_msg(error == cases[i].error,
                      "init(%u, %u) returned %d, expected %d",
                      cases[i].n_slots, cases[i].probe_limit, error,
                      cases[i].error);
        if (!error) {
            ck_assert_uint_eq(ft.mask, cases[i].n_slots - 1);
            ck_assert_uint_eq(ft.probe_limit, cases[i].probe_limit);
            tpm_flow_table_destroy(&ft);
        }
    }
}
END_TEST

/* A table with a single slot and probe limit 1 still never fails. */
START_TEST(test_single_slot)
{
    struct tpm_flow_table ft;
    struct test_rng rng;
    struct tpm_key k[3], old;
    bool replaced;

    test_rng_seed(&rng, 7);
    ck_assert_int_eq(tpm_flow_table_init(&ft, 1, 1), 0);
    for (int i = 0; i < 3; i++) {
        k[i] = random_key(&rng);
    }
    insert_touch(&ft, &k[0], tpm_key_hash(&k[0]), TAG0, &replaced, &old);
    ck_assert(!replaced);
    /* Recent: evicted. */
    insert_touch(&ft, &k[1], tpm_key_hash(&k[1]), TAG0, &replaced, &old);
    ck_assert(replaced);
    ck_assert(tpm_key_equal(&old, &k[0]));
    ck_assert_uint_eq(ft.stats.evictions, 1);
    ck_assert_ptr_null(tpm_flow_table_find(&ft, &k[0], tpm_key_hash(&k[0])));
    /* Stale: reused. */
    insert_touch(&ft, &k[2], tpm_key_hash(&k[2]), TAG0 + 2, &replaced, &old);
    ck_assert(replaced);
    ck_assert(tpm_key_equal(&old, &k[1]));
    ck_assert_uint_eq(ft.stats.evictions, 1);
    ck_assert_uint_eq(ft.stats.reuses, 1);
    ck_assert_uint_eq(ft.stats.inserts, 3);
    ck_assert_uint_eq(ft.n_live, 1);
    ck_assert_uint_eq(ft.n_used, 1);
    ck_assert_uint_eq(ft.flows[0].gen, 3);
    tpm_flow_table_destroy(&ft);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* (a) A sparse table never evicts and finds everything. */

START_TEST(test_sparse_no_evictions)
{
    enum { N_SLOTS = 1 << 16, N_KEYS = 4000, EPOCHS = 6 };
    struct tpm_flow_table ft;
    struct test_rng rng;
    struct tpm_key *keys = calloc(N_KEYS, sizeof *keys);
    uint32_t *hashes = calloc(N_KEYS, sizeof *hashes);
    struct tpm_flow **where = calloc(N_KEYS, sizeof *where);

    test_rng_seed(&rng, 0xa11ce);
    ck_assert_int_eq(tpm_flow_table_init(&ft, N_SLOTS, 16), 0);
    for (uint32_t i = 0; i < N_KEYS; i++) {
        keys[i] = pool_key(&rng, i);
        hashes[i] = tpm_key_hash(&keys[i]);
    }

    uint32_t tag = TAG0;
    for (int e = 0; e < EPOCHS; e++, tag++) {
        for (uint32_t i = 0; i < N_KEYS; i++) {
            struct tpm_flow *f = tpm_flow_table_find(&ft, &keys[i],
                                                     hashes[i]);
            if (e == 0) {
                TCHECK(f == NULL, "key %u found before insertion", i);
                bool replaced = true;
                f = tpm_flow_table_insert(&ft, &keys[i], hashes[i], tag,
                                          &replaced, NULL);
                TCHECK(!replaced, "key %u replaced something", i);
                where[i] = f;
            } else {
                TCHECK(f == where[i], "key %u moved or lost", i);
            }
            TCHECK(flow_key_is(f, &keys[i]), "key %u", i);
            touch(f, tag);
        }
        ck_assert_uint_eq(ft.stats.inserts, N_KEYS);
        ck_assert_uint_eq(ft.stats.evictions, 0);
        ck_assert_uint_eq(ft.stats.reuses, 0);
        ck_assert_uint_eq(ft.n_live, N_KEYS);
        ck_assert_uint_eq(ft.n_used, N_KEYS);
    }

    /* Stale entries are not removed by lookups or time alone. */
    tag += 10;
    for (uint32_t i = 0; i < N_KEYS; i++) {
        TCHECK(tpm_flow_table_find(&ft, &keys[i], hashes[i]) == where[i],
               "stale key %u lost", i);
    }

    /* Keys that were never inserted are not found. */
    for (uint32_t i = 0; i < N_KEYS; i++) {
        struct tpm_key k = pool_key(&rng, N_KEYS + i);
        TCHECK(!tpm_flow_table_find(&ft, &k, tpm_key_hash(&k)), "%u", i);
    }

    /* A resident key looked up with the wrong hash is not found. */
    ck_assert_ptr_null(tpm_flow_table_find(&ft, &keys[0], hashes[0] ^ 1));

    free(keys);
    free(hashes);
    free(where);
    tpm_flow_table_destroy(&ft);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* (b) Eviction of the least recently updated entry of a full window. */

START_TEST(test_eviction_lru)
{
    enum { LIMIT = 4, BUCKET = 10 };
    struct tpm_flow_table ft;
    struct test_rng rng;
    struct tpm_key k[8], old;
    uint32_t h[8];
    struct tpm_flow *f[8];
    bool replaced;

    test_rng_seed(&rng, 0xb0b);
    ck_assert_int_eq(tpm_flow_table_init(&ft, 64, LIMIT), 0);
    colliding_keys(&rng, ft.mask, BUCKET, k, h, 8);

    /* Fill the window in epoch T-1. */
    uint32_t tag = 100;
    for (int i = 0; i < LIMIT; i++) {
        f[i] = insert_touch(&ft, &k[i], h[i], tag - 1, &replaced, &old);
        ck_assert(!replaced);
        ck_assert_uint_eq(tpm_flow_index(&ft, f[i]), BUCKET + i);
    }
    ck_assert_uint_eq(ft.n_used, LIMIT);

    /* In epoch T, update all but k[2]: k[2] is the least recently
     * updated, yet still recent (previous epoch). */
    for (int i = 0; i < LIMIT; i++) {
        if (i != 2) {
            touch(tpm_flow_table_find(&ft, &k[i], h[i]), tag);
        }
    }
    f[4] = insert_touch(&ft, &k[4], h[4], tag, &replaced, &old);
    ck_assert(replaced);
    ck_assert(tpm_key_equal(&old, &k[2]));
    ck_assert_ptr_eq(f[4], f[2]);
    ck_assert_uint_eq(f[4]->gen, 2);
    ck_assert_uint_eq(ft.stats.evictions, 1);
    ck_assert_uint_eq(ft.stats.reuses, 0);
    ck_assert_uint_eq(ft.stats.inserts, LIMIT + 1);
    ck_assert_uint_eq(ft.n_live, LIMIT);
    ck_assert_uint_eq(ft.n_used, LIMIT);
    ck_assert_ptr_null(tpm_flow_table_find(&ft, &k[2], h[2]));
    for (int i = 0; i < LIMIT + 1; i++) {
        if (i != 2) {
            ck_assert_ptr_nonnull(tpm_flow_table_find(&ft, &k[i], h[i]));
        }
    }
    /* Nothing outside the window was touched. */
    ck_assert_int_eq(ft.flows[BUCKET + LIMIT].state, TPM_FLOW_FREE);
    ck_assert_int_eq(ft.flows[BUCKET - 1].state, TPM_FLOW_FREE);

    /* Next epoch: k[4] updated in T+1, the others only in T: the oldest
     * are k[0], k[1], k[3]; one of them goes. */
    tag++;
    touch(f[4], tag);
    f[5] = insert_touch(&ft, &k[5], h[5], tag, &replaced, &old);
    ck_assert(replaced);
    ck_assert_uint_eq(ft.stats.evictions, 2);
    ck_assert_ptr_ne(f[5], f[4]);
    ck_assert(tpm_key_equal(&old, &k[0]) || tpm_key_equal(&old, &k[1])
              || tpm_key_equal(&old, &k[3]));
    ck_assert_ptr_null(tpm_flow_table_find(&ft, &old, tpm_key_hash(&old)));

    /* Every entry updated in the current epoch: still an eviction (of some
     * window member), counted. */
    for (int i = 0; i < 6; i++) {
        struct tpm_flow *g = tpm_flow_table_find(&ft, &k[i], h[i]);
        if (g) {
            touch(g, tag);
        }
    }
    f[6] = insert_touch(&ft, &k[6], h[6], tag, &replaced, &old);
    ck_assert(replaced);
    ck_assert_uint_eq(ft.stats.evictions, 3);
    uint32_t idx = tpm_flow_index(&ft, f[6]);
    ck_assert(idx >= BUCKET && idx < BUCKET + LIMIT);
    ck_assert_uint_eq(ft.n_live, LIMIT);
    ck_assert_uint_eq(ft.n_used, LIMIT);
    ck_assert_uint_eq(ft.stats.reuses, 0);

    /* Resident keys: exactly 4, all distinct, all in the window. */
    int n = 0;
    for (int i = 0; i < 7; i++) {
        struct tpm_flow *g = tpm_flow_table_find(&ft, &k[i], h[i]);
        if (g) {
            n++;
            ck_assert_uint_ge(tpm_flow_index(&ft, g), BUCKET);
            ck_assert_uint_lt(tpm_flow_index(&ft, g), BUCKET + LIMIT);
        }
    }
    ck_assert_int_eq(n, LIMIT);
    tpm_flow_table_destroy(&ft);
}
END_TEST

/* The window wraps around the end of the table. */
START_TEST(test_window_wraps)
{
    enum { LIMIT = 4 };
    struct tpm_flow_table ft;
    struct test_rng rng;
    struct tpm_key k[6], old;
    uint32_t h[6];
    bool replaced;

    test_rng_seed(&rng, 0xe0d);
    ck_assert_int_eq(tpm_flow_table_init(&ft, 32, LIMIT), 0);
    colliding_keys(&rng, ft.mask, 30, k, h, 6);
    for (int i = 0; i < LIMIT; i++) {
        struct tpm_flow *f = insert_touch(&ft, &k[i], h[i], TAG0, &replaced,
                                          &old);
        ck_assert(!replaced);
        ck_assert_uint_eq(tpm_flow_index(&ft, f), (30u + i) & 31);
    }
    insert_touch(&ft, &k[4], h[4], TAG0, &replaced, &old);
    ck_assert(replaced);
    ck_assert_uint_eq(ft.stats.evictions, 1);
    ck_assert_int_eq(ft.flows[2].state, TPM_FLOW_FREE);
    ck_assert_int_eq(ft.flows[29].state, TPM_FLOW_FREE);
    tpm_flow_table_destroy(&ft);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* (c) Stale reuse. */

START_TEST(test_stale_reuse)
{
    enum { BUCKET = 5 };
    struct tpm_flow_table ft;
    struct test_rng rng;
    struct tpm_key k[6], old;
    uint32_t h[6];
    bool replaced;

    test_rng_seed(&rng, 0x57a1e);
    ck_assert_int_eq(tpm_flow_table_init(&ft, 64, 8), 0);
    colliding_keys(&rng, ft.mask, BUCKET, k, h, 6);

    /* k0 updated in epoch 2 only. */
    struct tpm_flow *f0 = insert_touch(&ft, &k[0], h[0], TAG0, &replaced,
                                       &old);
    ck_assert_uint_eq(tpm_flow_index(&ft, f0), BUCKET);

    /* Epoch 3: k0 is from the previous epoch, so still recent: k1 takes
     * the next free slot, nothing is reused. */
    struct tpm_flow *f1 = insert_touch(&ft, &k[1], h[1], TAG0 + 1,
                                       &replaced, &old);
    ck_assert(!replaced);
    ck_assert_uint_eq(tpm_flow_index(&ft, f1), BUCKET + 1);
    ck_assert_uint_eq(ft.stats.reuses, 0);
    ck_assert_uint_eq(ft.n_used, 2);

    /* Epoch 4: k0 (last updated in 2) is stale, k1 (3) is not.  k2 takes
     * k0's slot rather than the free slot after k1. */
    uint32_t tag = TAG0 + 2;
    ck_assert(!tpm_flow_is_recent(f0, tag));
    ck_assert(tpm_flow_is_recent(f1, tag));
    struct tpm_flow *f2 = insert_touch(&ft, &k[2], h[2], tag, &replaced,
                                       &old);
    ck_assert_ptr_eq(f2, f0);
    ck_assert(replaced);
    ck_assert(tpm_key_equal(&old, &k[0]));
    ck_assert_uint_eq(f2->gen, 2);
    ck_assert_uint_eq(ft.stats.reuses, 1);
    ck_assert_uint_eq(ft.stats.evictions, 0);
    ck_assert_uint_eq(ft.stats.inserts, 3);
    ck_assert_uint_eq(ft.n_used, 2);
    ck_assert_uint_eq(ft.n_live, 2);
    ck_assert_ptr_null(tpm_flow_table_find(&ft, &k[0], h[0]));
    ck_assert_ptr_eq(tpm_flow_table_find(&ft, &k[1], h[1]), f1);
    ck_assert_ptr_eq(tpm_flow_table_find(&ft, &k[2], h[2]), f2);
    /* The old statistics line of the reused slot is not mistaken for the
     * new entry's: only the new tag is present. */
    ck_assert_uint_eq(tpm_flow_last_tag(f2), tag);
    ck_assert_uint_eq(f2->tag[(tag - 1) & 1], 0);

    /* Epoch 6: k2 updated now (slot BUCKET), k1 stale (slot BUCKET+1,
     * after a recent entry): k3 takes k1's slot. */
    tag = TAG0 + 4;
    touch(f2, tag);
    struct tpm_flow *f3 = insert_touch(&ft, &k[3], h[3], tag, &replaced,
                                       &old);
    ck_assert_ptr_eq(f3, f1);
    ck_assert(replaced);
    ck_assert(tpm_key_equal(&old, &k[1]));
    ck_assert_uint_eq(ft.stats.reuses, 2);
    ck_assert_uint_eq(ft.n_used, 2);

    /* Epoch 7: both recent: the free slot is used. */
    tag++;
    struct tpm_flow *f4 = insert_touch(&ft, &k[4], h[4], tag, &replaced,
                                       &old);
    ck_assert(!replaced);
    ck_assert_uint_eq(tpm_flow_index(&ft, f4), BUCKET + 2);
    ck_assert_uint_eq(ft.stats.reuses, 2);
    ck_assert_uint_eq(ft.n_used, 3);
    ck_assert_uint_eq(ft.n_live, 3);
    ck_assert_uint_eq(ft.stats.evictions, 0);

    /* An entry updated in both parities but long ago is stale too. */
    touch(f4, tag + 1);
    tag += 10;
    touch(f2, tag);
    touch(f3, tag);
    ck_assert(!tpm_flow_is_recent(f4, tag));
    struct tpm_flow *f5 = insert_touch(&ft, &k[5], h[5], tag, &replaced,
                                       &old);
    ck_assert_ptr_eq(f5, f4);
    ck_assert(replaced);
    ck_assert(tpm_key_equal(&old, &k[4]));
    ck_assert_uint_eq(ft.stats.reuses, 3);
    tpm_flow_table_destroy(&ft);
}
END_TEST

/* A stale entry with per-flow state ('has_conn') is not reused: its
 * connection may be waiting for a retransmission timeout.  When the window
 * is full, it is the oldest and is evicted (counted). */
START_TEST(test_stale_with_state_kept)
{
    enum { BUCKET = 9 };
    struct tpm_flow_table ft;
    struct test_rng rng;
    struct tpm_key k[4], old;
    uint32_t h[4];
    bool replaced;

    test_rng_seed(&rng, 0x5a7e);
    ck_assert_int_eq(tpm_flow_table_init(&ft, 64, 2), 0);
    colliding_keys(&rng, ft.mask, BUCKET, k, h, 4);

    struct tpm_flow *f0 = insert_touch(&ft, &k[0], h[0], TAG0, &replaced,
                                       &old);
    f0->has_conn = 1;
    uint32_t tag = TAG0 + 5;
    ck_assert(!tpm_flow_is_recent(f0, tag));
    struct tpm_flow *f1 = insert_touch(&ft, &k[1], h[1], tag, &replaced,
                                       &old);
    ck_assert(!replaced);
    ck_assert_uint_eq(tpm_flow_index(&ft, f1), BUCKET + 1);
    ck_assert_ptr_eq(tpm_flow_table_find(&ft, &k[0], h[0]), f0);
    ck_assert_uint_eq(ft.stats.reuses, 0);

    /* Window of two, both taken: the stale entry with state is the least
     * recently updated and goes. */
    struct tpm_flow *f2 = insert_touch(&ft, &k[2], h[2], tag, &replaced,
                                       &old);
    ck_assert(replaced);
    ck_assert_ptr_eq(f2, f0);
    ck_assert(tpm_key_equal(&old, &k[0]));
    ck_assert_uint_eq(f2->has_conn, 0);
    ck_assert_uint_eq(ft.stats.evictions, 1);
    tpm_flow_table_destroy(&ft);
}
END_TEST

/* A stale entry whose flow still feeds trigger instances (a flow that
 * sends less often than every other epoch) keeps its slot while the
 * window has a free, dead or other stale one: a new flow does not take
 * it, or the displaced flow would be inserted and matched again when it
 * next sends, and displace another.  With no other room it is reused,
 * the first such. */
START_TEST(test_stale_matched_kept)
{
    enum { BUCKET = 17 };
    struct tpm_flow_table ft;
    struct test_rng rng;
    struct tpm_key k[7], old;
    uint32_t h[7];
    bool replaced;

    test_rng_seed(&rng, 0x5a7ed);
    ck_assert_int_eq(tpm_flow_table_init(&ft, 64, 4), 0);
    colliding_keys(&rng, ft.mask, BUCKET, k, h, 7);

    /* k0 and k1 matched (live, feeding an instance), last updated in
     * TAG0; k2 unmatched (pending), TAG0 too. */
    struct tpm_flow *f[7];
    for (int i = 0; i < 3; i++) {
        f[i] = insert_touch(&ft, &k[i], h[i], TAG0, &replaced, &old);
        ck_assert_uint_eq(tpm_flow_index(&ft, f[i]), BUCKET + i);
    }
    for (int i = 0; i < 2; i++) {
        f[i]->state = TPM_FLOW_LIVE;
        f[i]->n_matched = 1;
    }

    /* Three epochs later all three are stale: k3 passes the two matched
     * ones and takes the unmatched k2's slot. */
    uint32_t tag = TAG0 + 3;
    for (int i = 0; i < 3; i++) {
        ck_assert(!tpm_flow_is_recent(f[i], tag));
    }
    f[3] = insert_touch(&ft, &k[3], h[3], tag, &replaced, &old);
    ck_assert_ptr_eq(f[3], f[2]);
    ck_assert(replaced);
    ck_assert(tpm_key_equal(&old, &k[2]));
    ck_assert_uint_eq(ft.stats.reuses, 1);

    /* k4 passes them and the recent k3 and takes the free slot after. */
    f[4] = insert_touch(&ft, &k[4], h[4], tag, &replaced, &old);
    ck_assert(!replaced);
    ck_assert_uint_eq(tpm_flow_index(&ft, f[4]), BUCKET + 3);
    ck_assert_uint_eq(ft.stats.reuses, 1);
    ck_assert_ptr_eq(tpm_flow_table_find(&ft, &k[0], h[0]), f[0]);
    ck_assert_ptr_eq(tpm_flow_table_find(&ft, &k[1], h[1]), f[1]);
    ck_assert_uint_eq(f[0]->gen, 1);

    /* The window of four is full (k0, k1 stale and matched; k3, k4
     * recent): k5 takes the first matched one, k0's slot, not evicting a
     * recent flow. */
    f[5] = insert_touch(&ft, &k[5], h[5], tag, &replaced, &old);
    ck_assert_ptr_eq(f[5], f[0]);
    ck_assert(replaced);
    ck_assert(tpm_key_equal(&old, &k[0]));
    ck_assert_uint_eq(f[5]->gen, 2);
    ck_assert_uint_eq(ft.stats.reuses, 2);
    ck_assert_uint_eq(ft.stats.evictions, 0);
    ck_assert_ptr_null(tpm_flow_table_find(&ft, &k[0], h[0]));

    /* A retired flow (the sweep makes it pending, matched by nothing) is
     * reusable at once: k1 retired, k6 takes its slot. */
    f[1]->state = TPM_FLOW_PENDING;
    f[1]->n_matched = 0;
    f[6] = insert_touch(&ft, &k[6], h[6], tag, &replaced, &old);
    ck_assert_ptr_eq(f[6], f[1]);
    ck_assert(tpm_key_equal(&old, &k[1]));
    ck_assert_uint_eq(ft.stats.reuses, 3);
    ck_assert_uint_eq(ft.stats.evictions, 0);
    ck_assert_uint_eq(ft.n_live, 4);
    tpm_flow_table_destroy(&ft);
}
END_TEST

/* tpm_flow_is_recent() and tpm_flow_last_tag() by hand. */
START_TEST(test_recent_and_last_tag)
{
    struct tpm_flow f;

    memset(&f, 0, sizeof f);
    ck_assert(!tpm_flow_is_recent(&f, TAG0));
    ck_assert_uint_eq(tpm_flow_last_tag(&f), 0);

    f.tag[TAG0 & 1] = TAG0;
    ck_assert(tpm_flow_is_recent(&f, TAG0));
    ck_assert(tpm_flow_is_recent(&f, TAG0 + 1));
    ck_assert(!tpm_flow_is_recent(&f, TAG0 + 2));
    ck_assert(!tpm_flow_is_recent(&f, TAG0 + 3));
    ck_assert_uint_eq(tpm_flow_last_tag(&f), TAG0);

    f.tag[(TAG0 + 1) & 1] = TAG0 + 1;
    ck_assert_uint_eq(tpm_flow_last_tag(&f), TAG0 + 1);
    f.tag[(TAG0 + 4) & 1] = TAG0 + 4;
    ck_assert_uint_eq(tpm_flow_last_tag(&f), TAG0 + 4);
    ck_assert(tpm_flow_is_recent(&f, TAG0 + 5));
    ck_assert(!tpm_flow_is_recent(&f, TAG0 + 6));

    /* Wrap-around of the 32-bit tag. */
    f.tag[0] = 0xfffffffe;
    f.tag[1] = 0xffffffff;
    ck_assert_uint_eq(tpm_flow_last_tag(&f), 0xffffffff);
    ck_assert(tpm_flow_is_recent(&f, 0xffffffff));
    f.tag[0] = 0x10;            /* 17 epochs after 0xffffffff. */
    ck_assert_uint_eq(tpm_flow_last_tag(&f), 0x10);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* (d) Generations. */

struct scrub_log {
    uint32_t n;
    uint32_t idx[4096];
    const struct tpm_flow_table *ft;
};

static void
scrub_cb(struct tpm_flow *f, void *aux)
{
    struct scrub_log *log = aux;
    TCHECK(f->state == TPM_FLOW_LIVE, "callback on state %d", f->state);
    TCHECK(log->n < ARRAY_SIZE(log->idx), "too many callbacks");
    log->idx[log->n++] = tpm_flow_index(log->ft, f);
}

START_TEST(test_generations)
{
    enum { BUCKET = 3 };
    struct tpm_flow_table ft;
    struct test_rng rng;
    struct tpm_key k[8], old;
    uint32_t h[8];
    bool replaced;

    test_rng_seed(&rng, 0x6e7);
    ck_assert_int_eq(tpm_flow_table_init(&ft, 16, 1), 0);
    colliding_keys(&rng, ft.mask, BUCKET, k, h, 8);
    struct tpm_flow *slot = &ft.flows[BUCKET];

    uint32_t tag = TAG0;
    struct tpm_flow *f = insert_touch(&ft, &k[0], h[0], tag, &replaced,
                                      &old);
    ck_assert_ptr_eq(f, slot);
    ck_assert_uint_eq(f->gen, 1);
    uint32_t gen = f->gen;

    /* Eviction (recent). */
    f = insert_touch(&ft, &k[1], h[1], tag, &replaced, &old);
    ck_assert_ptr_eq(f, slot);
    ck_assert(replaced);
    ck_assert_uint_gt(f->gen, gen);
    ck_assert_uint_eq(f->gen, gen + 1);
    gen = f->gen;

    /* Stale reuse. */
    tag += 2;
    f = insert_touch(&ft, &k[2], h[2], tag, &replaced, &old);
    ck_assert_ptr_eq(f, slot);
    ck_assert(replaced);
    ck_assert_uint_eq(f->gen, gen + 1);
    gen = f->gen;

    /* Freed by the scrubber: the generation changes too, so that
     * (index, generation) references to the freed flow go stale. */
    tag += 5;
    struct scrub_log log = { .n = 0, .ft = &ft };
    tpm_flow_table_scrub(&ft, 16, tag, 2, scrub_cb, &log);
    ck_assert_int_eq(slot->state, TPM_FLOW_DEAD);
    ck_assert_uint_gt(slot->gen, gen);
    gen = slot->gen;

    /* Dead reuse. */
    f = insert_touch(&ft, &k[3], h[3], tag, &replaced, &old);
    ck_assert_ptr_eq(f, slot);
    ck_assert(!replaced);
    ck_assert_uint_eq(f->gen, gen + 1);
    ck_assert_uint_eq(ft.stats.inserts, 4);
    ck_assert_uint_eq(ft.stats.evictions, 1);
    ck_assert_uint_eq(ft.stats.reuses, 2);
    ck_assert_uint_eq(ft.stats.freed, 1);
    ck_assert_uint_eq(ft.n_used, 1);
    ck_assert_uint_eq(ft.n_live, 1);

    /* Many more reuses: strictly increasing. */
    for (int i = 0; i < 100; i++) {
        gen = f->gen;
        tag += 2;
        f = insert_touch(&ft, &k[4 + (i & 3)], h[4 + (i & 3)], tag,
                         &replaced, &old);
        ck_assert_uint_eq(f->gen, gen + 1);
        /* Remove it again so that the next key is absent. */
        ck_assert_uint_eq(tpm_flow_table_scrub(&ft, 16, tag + 5, 1, NULL,
                                               NULL), 16);
        ck_assert_uint_gt(f->gen, gen + 1);
    }
    tpm_flow_table_destroy(&ft);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* (e) Scrubber. */

START_TEST(test_scrub_basic)
{
    enum { N = 16 };
    struct tpm_flow_table ft;
    struct test_rng rng;
    struct tpm_key k[N], old;
    uint32_t h[N];
    struct tpm_flow *f[N];
    bool replaced;

    test_rng_seed(&rng, 0x5c7b);
    ck_assert_int_eq(tpm_flow_table_init(&ft, N, N), 0);
    /* One key per bucket: key i in slot i. */
    for (uint32_t i = 0; i < N; i++) {
        colliding_keys(&rng, ft.mask, i, &k[i], &h[i], 1);
    }

    /* Slot i (for i < 12) last updated in epoch 'T - i'; even slots are
     * LIVE, odd ones PENDING.  Slots 12-15 stay free. */
    const uint32_t T = 1000, IDLE = 5;
    for (uint32_t i = 0; i < 12; i++) {
        f[i] = insert_touch(&ft, &k[i], h[i], T - i, &replaced, &old);
        ck_assert_uint_eq(tpm_flow_index(&ft, f[i]), i);
        if (i % 2 == 0) {
            f[i]->state = TPM_FLOW_LIVE;
        }
        f[i]->sum_mask = 0x5;
    }
    ck_assert_uint_eq(ft.n_live, 12);

    /* Scrub 4 slots: 0-3 all within 'idle': only LIVE ones (0, 2) get a
     * callback. */
    struct scrub_log log = { .n = 0, .ft = &ft };
    ck_assert_uint_eq(tpm_flow_table_scrub(&ft, 4, T, IDLE, scrub_cb, &log),
                      4);
    ck_assert_uint_eq(ft.scrub_pos, 4);
    ck_assert_uint_eq(log.n, 2);
    ck_assert_uint_eq(log.idx[0], 0);
    ck_assert_uint_eq(log.idx[1], 2);
    ck_assert_uint_eq(ft.n_live, 12);
    ck_assert_uint_eq(ft.stats.freed, 0);

    /* Scrub 9 more (4-12): idle is 'i' epochs; freed iff i > IDLE, i.e.
     * slots 6-11.  Callbacks for LIVE survivors 4 only. */
    log.n = 0;
    ck_assert_uint_eq(tpm_flow_table_scrub(&ft, 9, T, IDLE, scrub_cb, &log),
                      9);
    ck_assert_uint_eq(ft.scrub_pos, 13);
    ck_assert_uint_eq(log.n, 1);
    ck_assert_uint_eq(log.idx[0], 4);
    for (uint32_t i = 0; i < 12; i++) {
        bool gone = i > IDLE;
        ck_assert_int_eq(ft.flows[i].state,
                         gone ? TPM_FLOW_DEAD
                         : i % 2 ? TPM_FLOW_PENDING : TPM_FLOW_LIVE);
        ck_assert_uint_eq(ft.flows[i].sum_mask, gone ? 0 : 0x5);
        /* A dead entry keeps its key's addresses and ports but not its
         * IP version, which no parsed packet's key has. */
        const struct tpm_key *fk = &ft.flows[i].key;
        if (gone) {
            ck_assert_uint_eq(fk->ipver, 0);
            ck_assert(fk->src[0] == k[i].src[0] && fk->dst[0] == k[i].dst[0]
                      && fk->sport == k[i].sport && fk->dport == k[i].dport
                      && fk->proto == k[i].proto);
        } else {
            ck_assert(flow_key_is(&ft.flows[i], &k[i]));
        }
        if (gone) {
            ck_assert_ptr_null(tpm_flow_table_find(&ft, &k[i], h[i]));
        } else {
            ck_assert_ptr_eq(tpm_flow_table_find(&ft, &k[i], h[i]), f[i]);
        }
    }
    ck_assert_uint_eq(ft.n_live, 6);
    ck_assert_uint_eq(ft.n_used, 12);
    ck_assert_uint_eq(ft.stats.freed, 6);

    /* Wrap: from 13, scrub 6 slots: 13, 14, 15, 0, 1, 2. */
    log.n = 0;
    ck_assert_uint_eq(tpm_flow_table_scrub(&ft, 6, T, IDLE, scrub_cb, &log),
                      6);
    ck_assert_uint_eq(ft.scrub_pos, 3);
    ck_assert_uint_eq(log.n, 2);
    ck_assert_uint_eq(log.idx[0], 0);
    ck_assert_uint_eq(log.idx[1], 2);

    /* n larger than the table: clamped to one full pass. */
    log.n = 0;
    ck_assert_uint_eq(tpm_flow_table_scrub(&ft, 1000, T, IDLE, scrub_cb,
                                           &log), N);
    ck_assert_uint_eq(ft.scrub_pos, 3);
    ck_assert_uint_eq(log.n, 3);
    ck_assert_uint_eq(log.idx[0], 4);
    ck_assert_uint_eq(log.idx[1], 0);
    ck_assert_uint_eq(log.idx[2], 2);

    /* n == 0: nothing. */
    ck_assert_uint_eq(tpm_flow_table_scrub(&ft, 0, T, IDLE, scrub_cb, &log),
                      0);
    ck_assert_uint_eq(ft.scrub_pos, 3);

    /* Time passes: dead entries are not freed twice; boundary: last update
     * T - 5 at T + 1 is 6 epochs idle: 'idle' = 6 keeps it, 5 frees it. */
    uint64_t freed = ft.stats.freed;
    ck_assert_uint_eq(tpm_flow_table_scrub(&ft, N, T + 1, 6, NULL, NULL), N);
    ck_assert_uint_eq(ft.stats.freed, freed);
    ck_assert_uint_eq(ft.n_live, 6);
    ck_assert_uint_eq(tpm_flow_table_scrub(&ft, N, T + 1, 5, NULL, NULL), N);
    ck_assert_uint_eq(ft.stats.freed, freed + 1);
    ck_assert_int_eq(ft.flows[5].state, TPM_FLOW_DEAD);
    ck_assert_uint_eq(ft.n_live, 5);

    /* idle 0: everything not updated in the current epoch goes.  Slot 0
     * was updated in T. */
    ck_assert_uint_eq(tpm_flow_table_scrub(&ft, N, T, 0, NULL, NULL), N);
    ck_assert_int_eq(ft.flows[0].state, TPM_FLOW_LIVE);
    for (uint32_t i = 1; i < 12; i++) {
        ck_assert_int_eq(ft.flows[i].state, TPM_FLOW_DEAD);
    }
    for (uint32_t i = 12; i < N; i++) {
        ck_assert_int_eq(ft.flows[i].state, TPM_FLOW_FREE);
    }
    ck_assert_uint_eq(ft.n_live, 1);
    ck_assert_uint_eq(ft.n_used, 12);
    tpm_flow_table_destroy(&ft);
}
END_TEST

/* Tombstones: lookups skip them but probe past them, insertions reuse
 * them before free slots further on. */
START_TEST(test_scrub_tombstones)
{
    enum { BUCKET = 20 };
    struct tpm_flow_table ft;
    struct test_rng rng;
    struct tpm_key k[6], old;
    uint32_t h[6];
    struct tpm_flow *f[6];
    bool replaced;

    test_rng_seed(&rng, 0x70b);
    ck_assert_int_eq(tpm_flow_table_init(&ft, 64, 8), 0);
    colliding_keys(&rng, ft.mask, BUCKET, k, h, 6);

    /* k0, k1 old; k2, k3 recent; slots 20-23. */
    const uint32_t T = 50;
    f[0] = insert_touch(&ft, &k[0], h[0], T - 10, &replaced, &old);
    f[1] = insert_touch(&ft, &k[1], h[1], T - 10, &replaced, &old);
    f[2] = insert_touch(&ft, &k[2], h[2], T - 10, &replaced, &old);
    f[3] = insert_touch(&ft, &k[3], h[3], T - 10, &replaced, &old);
    touch(f[2], T);
    touch(f[3], T);
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_eq(tpm_flow_index(&ft, f[i]), BUCKET + i);
        f[i]->state = TPM_FLOW_LIVE;
    }

    ft.scrub_pos = 16;
    struct scrub_log log = { .n = 0, .ft = &ft };
    ck_assert_uint_eq(tpm_flow_table_scrub(&ft, 16, T, 3, scrub_cb, &log),
                      16);
    ck_assert_uint_eq(ft.scrub_pos, 32);
    ck_assert_uint_eq(log.n, 2);
    ck_assert_uint_eq(log.idx[0], BUCKET + 2);
    ck_assert_uint_eq(log.idx[1], BUCKET + 3);
    ck_assert_int_eq(f[0]->state, TPM_FLOW_DEAD);
    ck_assert_int_eq(f[1]->state, TPM_FLOW_DEAD);
    ck_assert_uint_eq(ft.n_live, 2);
    ck_assert_uint_eq(ft.n_used, 4);

    /* Lookups skip the tombstones... */
    ck_assert_ptr_null(tpm_flow_table_find(&ft, &k[0], h[0]));
    ck_assert_ptr_null(tpm_flow_table_find(&ft, &k[1], h[1]));
    /* ...and probe past them. */
    ck_assert_ptr_eq(tpm_flow_table_find(&ft, &k[2], h[2]), f[2]);
    ck_assert_ptr_eq(tpm_flow_table_find(&ft, &k[3], h[3]), f[3]);

    /* A dead slot is reused before the free slot after k3, without
     * reporting a replacement. */
    struct tpm_flow *g = insert_touch(&ft, &k[4], h[4], T, &replaced, &old);
    ck_assert_ptr_eq(g, f[0]);
    ck_assert(!replaced);
    ck_assert_uint_eq(ft.stats.reuses, 1);
    ck_assert_uint_eq(ft.n_used, 4);
    ck_assert_uint_eq(ft.n_live, 3);
    g = insert_touch(&ft, &k[5], h[5], T, &replaced, &old);
    ck_assert_ptr_eq(g, f[1]);
    ck_assert(!replaced);
    ck_assert_uint_eq(ft.stats.reuses, 2);
    for (int i = 2; i < 6; i++) {
        ck_assert_ptr_nonnull(tpm_flow_table_find(&ft, &k[i], h[i]));
    }

    /* A key re-inserted after being freed is found again (in the dead
     * slot it left, which is first in its chain). */
    tpm_flow_table_scrub(&ft, 64, T + 10, 3, NULL, NULL);
    ck_assert_uint_eq(ft.n_live, 0);
    for (int i = 0; i < 6; i++) {
        ck_assert_ptr_null(tpm_flow_table_find(&ft, &k[i], h[i]));
    }
    g = insert_touch(&ft, &k[3], h[3], T + 10, &replaced, &old);
    ck_assert_uint_eq(tpm_flow_index(&ft, g), BUCKET);
    ck_assert(!replaced);
    tpm_flow_table_destroy(&ft);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Randomized operations against the references. */

struct shadow_slot {
    struct tpm_key key;         /* First: tpm_key_equal() reads 64-bit
                                 * words. */
    uint8_t state;
    uint32_t hash;
    uint32_t gen;
    uint32_t last;              /* Epoch tag of the last update. */
};

struct model {
    struct tpm_flow_table ft;
    uint32_t n_slots, limit;
    uint32_t tag;

    /* Shadow of the slot array. */
    struct shadow_slot *sh;
    uint32_t scrub_pos;
    uint32_t n_used;
    struct tpm_flow_table_stats st;

    /* Key pool and the resident-key reference: 'res' lists the pool
     * indexes of the resident keys, 'res_pos[i]' is the position of key i
     * in 'res' or UINT32_MAX. */
    struct tpm_key *pool;
    uint32_t *pool_hash;
    uint32_t n_pool;
    uint32_t *res;
    uint32_t n_res;
    uint32_t *res_pos;
    uint32_t *count;            /* Scratch for the duplicate scan. */
};

static void
model_init(struct model *m, struct test_rng *rng, uint32_t n_slots,
           uint32_t limit, uint32_t n_pool)
{
    memset(m, 0, sizeof *m);
    ck_assert_int_eq(tpm_flow_table_init(&m->ft, n_slots, limit), 0);
    m->n_slots = n_slots;
    m->limit = limit;
    m->tag = TAG0;
    m->sh = calloc(n_slots, sizeof *m->sh);
    m->n_pool = n_pool;
    m->pool = calloc(n_pool, sizeof *m->pool);
    m->pool_hash = calloc(n_pool, sizeof *m->pool_hash);
    m->res = calloc(n_pool, sizeof *m->res);
    m->res_pos = calloc(n_pool, sizeof *m->res_pos);
    m->count = calloc(n_pool, sizeof *m->count);
    for (uint32_t i = 0; i < n_pool; i++) {
        m->pool[i] = pool_key(rng, i);
        m->pool_hash[i] = tpm_key_hash(&m->pool[i]);
        m->res_pos[i] = UINT32_MAX;
    }
}

static void
model_destroy(struct model *m)
{
    tpm_flow_table_destroy(&m->ft);
    free(m->sh);
    free(m->pool);
    free(m->pool_hash);
    free(m->res);
    free(m->res_pos);
    free(m->count);
}

/* Pool index of key 'k' (which must be a pool key). */
static uint32_t
model_key_index(const struct model *m, const struct tpm_key *k)
{
    uint32_t i = k->dst[0];
    TCHECK(i < m->n_pool && tpm_key_equal(&m->pool[i], k),
           "key not from the pool");
    return i;
}

static void
ref_add(struct model *m, uint32_t i)
{
    TCHECK(m->res_pos[i] == UINT32_MAX, "key %u already resident", i);
    m->res_pos[i] = m->n_res;
    m->res[m->n_res++] = i;
}

static void
ref_del(struct model *m, uint32_t i)
{
    uint32_t p = m->res_pos[i];
    TCHECK(p != UINT32_MAX, "key %u not resident", i);
    uint32_t last = m->res[--m->n_res];
    m->res[p] = last;
    m->res_pos[last] = p;
    m->res_pos[i] = UINT32_MAX;
}

static void
check_key(const struct model *m, uint32_t i)
{
    struct tpm_flow *f = tpm_flow_table_find(&m->ft, &m->pool[i],
                                             m->pool_hash[i]);
    if (m->res_pos[i] != UINT32_MAX) {
        TCHECK(f != NULL, "resident key %u not found", i);
        TCHECK(flow_key_is(f, &m->pool[i]), "key %u: wrong entry",
               i);
        TCHECK(f->hash == m->pool_hash[i], "key %u", i);
        TCHECK(is_resident_state(f->state), "key %u", i);
    } else {
        TCHECK(f == NULL, "absent key %u found in slot %u", i,
               f ? tpm_flow_index(&m->ft, f) : 0);
    }
}

/* Checks the whole table against both references. */
static void
model_check(struct model *m, struct test_rng *rng)
{
    const struct tpm_flow_table *ft = &m->ft;

    TCHECK(ft->n_live == m->n_res, "n_live %u, reference %u", ft->n_live,
           m->n_res);
    TCHECK(ft->n_used == m->n_used, "n_used %u, shadow %u", ft->n_used,
           m->n_used);
    TCHECK(ft->scrub_pos == m->scrub_pos, "scrub_pos");
    TCHECK(ft->stats.inserts == m->st.inserts, "inserts");
    TCHECK(ft->stats.reuses == m->st.reuses, "reuses %llu, shadow %llu",
           (unsigned long long) ft->stats.reuses,
           (unsigned long long) m->st.reuses);
    TCHECK(ft->stats.evictions == m->st.evictions,
           "evictions %llu, shadow %llu",
           (unsigned long long) ft->stats.evictions,
           (unsigned long long) m->st.evictions);
    TCHECK(ft->stats.freed == m->st.freed, "freed");

    /* Whole-table scan: no key resident twice, every resident key present,
     * every slot as the shadow says. */
    memset(m->count, 0, m->n_pool * sizeof *m->count);
    uint32_t n_live = 0, n_used = 0;
    for (uint32_t s = 0; s < m->n_slots; s++) {
        const struct tpm_flow *f = &ft->flows[s];
        const struct shadow_slot *sh = &m->sh[s];
        TCHECK(f->state == sh->state, "slot %u: state %d, shadow %d", s,
               f->state, sh->state);
        if (f->state == TPM_FLOW_FREE) {
            continue;
        }
        n_used++;
        TCHECK(flow_key_is(f, &sh->key), "slot %u: key", s);
        TCHECK(f->hash == sh->hash, "slot %u: hash", s);
        TCHECK(f->gen == sh->gen, "slot %u: gen %u, shadow %u", s, f->gen,
               sh->gen);
        TCHECK(tpm_flow_last_tag(f) == sh->last, "slot %u: last tag", s);
        if (is_resident_state(f->state)) {
            n_live++;
            struct tpm_key fk;
            tpm_flow_key(f, &fk);
            uint32_t i = model_key_index(m, &fk);
            TCHECK(++m->count[i] == 1, "key %u resident twice", i);
            TCHECK(m->res_pos[i] != UINT32_MAX,
                   "slot %u holds non-resident key %u", s, i);
            TCHECK(f->hash == m->pool_hash[i], "slot %u", s);
        }
    }
    TCHECK(n_live == m->n_res, "scan: %u live, reference %u", n_live,
           m->n_res);
    TCHECK(n_used == m->n_used, "scan: %u used", n_used);

    /* Lookups for a sample of keys. */
    for (int j = 0; j < 8; j++) {
        check_key(m, test_rng_range(rng, m->n_pool));
    }
    if (m->n_res) {
        check_key(m, m->res[test_rng_range(rng, m->n_res)]);
    }
}

/* One packet of flow 'i' in the current epoch. */
static void
model_packet(struct model *m, struct test_rng *rng, uint32_t i)
{
    const struct tpm_key *k = &m->pool[i];
    uint32_t h = m->pool_hash[i];
    uint32_t tag = m->tag;
    struct tpm_flow *f = tpm_flow_table_find(&m->ft, k, h);

    if (m->res_pos[i] != UINT32_MAX) {
        TCHECK(f != NULL, "resident key %u not found", i);
        uint32_t s = tpm_flow_index(&m->ft, f);
        TCHECK(tpm_key_equal(&m->sh[s].key, k), "key %u in slot %u", i, s);
        touch(f, tag);
        m->sh[s].last = tag;
        return;
    }
    TCHECK(f == NULL, "absent key %u found", i);

    /* Predict from the specification: the first free, dead or stale
     * slot of the window, except that a stale matched flow (here every
     * live one) is taken only when the window has none of those, the
     * first such; else the least recently updated entry is evicted. */
    enum { P_FREE, P_REUSE, P_EVICT } kind = P_EVICT;
    uint32_t cand = UINT32_MAX, min_last = UINT32_MAX, spare = UINT32_MAX;
    for (uint32_t j = 0; j < m->limit; j++) {
        uint32_t s = (h + j) & (m->n_slots - 1);
        const struct shadow_slot *sh = &m->sh[s];
        if (sh->state == TPM_FLOW_FREE) {
            kind = P_FREE;
            cand = s;
            break;
        }
        if (sh->state == TPM_FLOW_LIVE && tag - sh->last > 1) {
            if (spare == UINT32_MAX) {
                spare = s;
            }
            continue;
        }
        if (sh->state == TPM_FLOW_DEAD || tag - sh->last > 1) {
            kind = P_REUSE;
            cand = s;
            break;
        }
        if (min_last == UINT32_MAX || (int32_t) (sh->last - min_last) < 0) {
            min_last = sh->last;
        }
    }
    if (kind == P_EVICT && spare != UINT32_MAX) {
        kind = P_REUSE;
        cand = spare;
    }

    bool replaced = false;
    struct tpm_key old;
    memset(&old, 0xa5, sizeof old);
    f = tpm_flow_table_insert(&m->ft, k, h, tag, &replaced, &old);
    TCHECK(f != NULL, "insert failed");
    uint32_t s = tpm_flow_index(&m->ft, f);
    struct shadow_slot *sh = &m->sh[s];
    if (kind == P_EVICT) {
        TCHECK(((s - h) & (m->n_slots - 1)) < m->limit,
               "evicted slot %u outside the window", s);
        TCHECK(is_resident_state(sh->state), "slot %u", s);
        TCHECK(sh->last == min_last,
               "evicted slot %u updated in %u, oldest in window %u", s,
               sh->last, min_last);
        TCHECK(replaced, "eviction not reported");
        m->st.evictions++;
    } else {
        TCHECK(s == cand, "key %u inserted in slot %u, expected %u (%s)", i,
               s, cand, kind == P_FREE ? "free" : "reuse");
        if (kind == P_FREE) {
            TCHECK(!replaced, "free slot: replaced");
            m->n_used++;
        } else {
            TCHECK(replaced == is_resident_state(sh->state),
                   "reuse of slot %u in state %d: replaced %d", s,
                   sh->state, replaced);
            m->st.reuses++;
        }
    }
    if (replaced) {
        TCHECK(tpm_key_equal(&old, &sh->key), "old_key is not the "
               "replaced entry's key");
        ref_del(m, model_key_index(m, &old));
    }
    m->st.inserts++;

    TCHECK(flow_key_is(f, k), "new entry's key");
    TCHECK(f->hash == h, "new entry's hash");
    TCHECK(f->state == TPM_FLOW_PENDING, "new entry's state");
    TCHECK(f->gen == sh->gen + 1, "slot %u: gen %u after %u", s, f->gen,
           sh->gen);
    TCHECK(f->tag[0] == 0 && f->tag[1] == 0, "new entry's tags");
    TCHECK(f->sum_mask == 0 && f->n_matched == 0 && f->birth == 0,
           "new entry's metadata");

    sh->state = TPM_FLOW_PENDING;
    sh->key = *k;
    sh->hash = h;
    sh->gen++;
    touch(f, tag);
    sh->last = tag;
    ref_add(m, i);

    /* As the monitor does for matched flows. */
    if (test_rng_range(rng, 2)) {
        f->state = sh->state = TPM_FLOW_LIVE;
        f->sum_mask = 1 + test_rng_range(rng, 100);
        f->n_matched = 1;
    }
}

static void
model_scrub(struct model *m, struct test_rng *rng)
{
    uint32_t n = test_rng_range(rng, m->n_slots + m->n_slots / 2 + 2);
    uint32_t idle = test_rng_range(rng, 5);
    uint32_t tag = m->tag;
    uint32_t n_visit = MIN(n, m->n_slots);

    /* Expected callbacks, in visiting order. */
    static uint32_t expect[4096];
    uint32_t n_expect = 0;
    TCHECK(m->n_slots <= ARRAY_SIZE(expect), "table too large");
    for (uint32_t j = 0; j < n_visit; j++) {
        uint32_t s = m->scrub_pos;
        struct shadow_slot *sh = &m->sh[s];
        m->scrub_pos = (s + 1) & (m->n_slots - 1);
        if (!is_resident_state(sh->state)) {
            continue;
        }
        if (tag - sh->last > idle) {
            ref_del(m, model_key_index(m, &sh->key));
            sh->state = TPM_FLOW_DEAD;
            sh->key.ipver = 0;      /* No lookup's key any more. */
            sh->gen++;
            m->st.freed++;
        } else if (sh->state == TPM_FLOW_LIVE) {
            expect[n_expect++] = s;
        }
    }

    static struct scrub_log log;
    log.n = 0;
    log.ft = &m->ft;
    uint32_t ret = tpm_flow_table_scrub(&m->ft, n, tag, idle, scrub_cb, &log);
    TCHECK(ret == n_visit, "scrub(%u) returned %u", n, ret);
    TCHECK(log.n == n_expect, "%u callbacks, expected %u", log.n, n_expect);
    for (uint32_t j = 0; j < n_expect; j++) {
        TCHECK(log.idx[j] == expect[j], "callback %u on slot %u, "
               "expected %u", j, log.idx[j], expect[j]);
    }
    for (uint32_t s = 0; s < m->n_slots; s++) {
        if (m->sh[s].state == TPM_FLOW_DEAD) {
            TCHECK(m->ft.flows[s].sum_mask == 0, "dead slot %u: sum_mask",
                   s);
        }
    }
}

/* Runs 'n_ops' random operations: an epoch advance with probability
 * 'p_epoch', a scrub with probability 'p_scrub' (both per mille), else a
 * packet. */
static void
run_random(uint64_t seed, uint32_t n_slots, uint32_t limit, uint32_t n_pool,
           int n_ops, uint32_t p_epoch, uint32_t p_scrub,
           bool expect_pressure)
{
    struct test_rng rng;
    struct model m;

    test_rng_seed(&rng, seed);
    model_init(&m, &rng, n_slots, limit, n_pool);
    model_check(&m, &rng);
    for (int op = 0; op < n_ops; op++) {
        uint32_t r = test_rng_range(&rng, 1000);
        if (r >= p_epoch + p_scrub) {
            /* Skewed popularity: a hot eighth of the pool. */
            uint32_t i = test_rng_range(&rng, 2)
                         ? test_rng_range(&rng, MAX(n_pool / 8, 1))
                         : test_rng_range(&rng, n_pool);
            model_packet(&m, &rng, i);
        } else if (r < p_epoch) {
            m.tag += 1 + (test_rng_range(&rng, 8) == 0);
        } else {
            model_scrub(&m, &rng);
        }
        model_check(&m, &rng);
    }

    /* Every pool key, at the end. */
    for (uint32_t i = 0; i < n_pool; i++) {
        check_key(&m, i);
    }
    ck_assert_uint_gt(m.ft.stats.inserts, 0);
    ck_assert_uint_gt(m.ft.stats.freed, 0);
    ck_assert_uint_gt(m.ft.stats.reuses, 0);
    if (expect_pressure) {
        ck_assert_uint_gt(m.ft.stats.evictions, 0);
    }
    model_destroy(&m);
}

START_TEST(test_random_small_window)
{
    run_random(0x1234, 64, 4, 200, 50000, 70, 70, true);
}
END_TEST

START_TEST(test_random_medium)
{
    run_random(0xfeed, 256, 8, 1500, 50000, 5, 5, true);
}
END_TEST

START_TEST(test_random_whole_table_window)
{
    run_random(0xc0ffee, 16, 16, 60, 50000, 50, 50, true);
}
END_TEST

START_TEST(test_random_direct_mapped)
{
    run_random(0xd1ec7, 1024, 1, 3000, 50000, 20, 20, true);
}
END_TEST

START_TEST(test_random_roomy)
{
    run_random(0x600d, 1024, 32, 400, 50000, 30, 30, false);
}
END_TEST

static Suite *
flow_table_suite(void)
{
    Suite *s = suite_create("flow-table");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_layout);
    tcase_add_test(tc, test_counts_layout);
    tcase_add_test(tc, test_init_rejects);
    tcase_add_test(tc, test_single_slot);
    tcase_add_test(tc, test_sparse_no_evictions);
    tcase_add_test(tc, test_eviction_lru);
    tcase_add_test(tc, test_window_wraps);
    tcase_add_test(tc, test_stale_reuse);
    tcase_add_test(tc, test_stale_matched_kept);
    tcase_add_test(tc, test_stale_with_state_kept);
    tcase_add_test(tc, test_recent_and_last_tag);
    tcase_add_test(tc, test_generations);
    tcase_add_test(tc, test_scrub_basic);
    tcase_add_test(tc, test_scrub_tombstones);
    suite_add_tcase(s, tc);

    TCase *tr = tcase_create("random");
    tcase_set_timeout(tr, 120);
    tcase_add_test(tr, test_random_small_window);
    tcase_add_test(tr, test_random_medium);
    tcase_add_test(tr, test_random_whole_table_window);
    tcase_add_test(tr, test_random_direct_mapped);
    tcase_add_test(tr, test_random_roomy);
    suite_add_tcase(s, tr);
    return s;
}

int
main(void)
{
    return test_run_suite(flow_table_suite());
}
