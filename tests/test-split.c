/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of threshold splitting and of the decision engine (lib/decision.h),
 * checked against values computed here by hand and, for the engine's
 * table, against a plain array of what it should hold.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "event.h"
#include "decision.h"
#include "util.h"

static struct tpm_event *
parse(const char *def)
{
    struct tpm_event *ev;
    char *error = tpm_event_parse("e", def, &ev);
    ck_assert_msg(!error, "%s: %s", def, error);
    return ev;
}

START_TEST(test_supported)
{
    static const struct {
        const char *def;
        bool ok;
        const char *why;
    } cases[] = {
        { "filter=ip predicate=sum(volume) > 125KB", true, NULL },
        { "filter=ip predicate=count() >= 10", true, NULL },
        { "filter=ip predicate=count(ttl < 5) > 3", true, NULL },
        { "filter=ip predicate=avg(bytes) > 100", false, "not a sum" },
        { "filter=ip predicate=max(ttl) > 100", false, "not a sum" },
        { "filter=ip predicate=sum(volume) < 100", false, "single '>'" },
        { "filter=ip predicate=sum(volume) > 1 && count() > 2", false,
          "single '>'" },
        { "filter=ip predicate=sum(volume) > count()", false,
          "non-negative constant" },
        { "filter=ip predicate=sum(volume) > -5", false,
          "non-negative constant" },
        { "filter=ip predicate=prev(sum(volume)) > 5", false, "not a sum" },
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct tpm_event *ev = parse(cases[i].def);
        const char *why = "unset";
        ck_assert_msg(tpm_split_supported(ev, &why) == cases[i].ok, "%s",
                      cases[i].def);
        if (cases[i].ok) {
            ck_assert_ptr_null(why);
        } else {
            ck_assert_msg(why && strstr(why, cases[i].why), "%s: %s",
                          cases[i].def, why);
        }
        tpm_event_destroy(ev);
    }
}
END_TEST

START_TEST(test_shares)
{
    double s[4];
    tpm_split_threshold(100, 4, NULL, s);
    for (int i = 0; i < 4; i++) {
        ck_assert_double_eq(s[i], 25);
    }
    const double w[4] = { 1, 3, 0, -2 };
    tpm_split_threshold(100, 4, w, s);
    ck_assert_double_eq(s[0], 25);
    ck_assert_double_eq(s[1], 75);
    ck_assert_double_eq(s[2], 0);
    ck_assert_double_eq(s[3], 0);
    const double z[2] = { 0, 0 };
    tpm_split_threshold(10, 2, z, s);
    ck_assert_double_eq(s[0], 5);
    ck_assert_double_eq(s[1], 5);

    /* The pigeonhole argument: totals above T always have a part above
     * its share, whatever the split of the total. */
    struct tpm_event *ev = parse("filter=ip predicate=sum(volume) > 90");
    srand(7);
    tpm_split_threshold(90, 3, NULL, s);
    for (int k = 0; k < 10000; k++) {
        double v[3], total = 0;
        bool any = false;
        for (int i = 0; i < 3; i++) {
            v[i] = rand() % 60;
            total += v[i];
            any |= v[i] > s[i];
        }
        if (tpm_split_holds(ev, total, 90)) {
            ck_assert(any);
        }
    }
    ck_assert(tpm_split_holds(ev, 91, 90));
    ck_assert(!tpm_split_holds(ev, 90, 90));
    tpm_event_destroy(ev);
    ev = parse("filter=ip predicate=count() >= 90");
    ck_assert(tpm_split_holds(ev, 90, 90));
    tpm_event_destroy(ev);
}
END_TEST

/* Decisions. */

static struct tpm_decision_key
key(uint32_t event, uint64_t epoch, uint32_t dst)
{
    struct tpm_key g = { .ipver = 4, .proto = 17 };
    struct tpm_decision_key k;
    g.dst[0] = dst;
    tpm_decision_key_init(&k, event, epoch, &g);
    return k;
}

static struct tpm_decisions *
engine(size_t capacity, size_t max, size_t part_size, size_t inline_parts)
{
    struct tpm_decisions_config cfg;
    tpm_decisions_config_init(&cfg);
    cfg.capacity = capacity;
    cfg.max = max;
    if (part_size) {
        cfg.part_size = part_size;
    }
    cfg.inline_parts = inline_parts;
    return tpm_decisions_create(&cfg);
}

static void
count_cb(struct tpm_decision *d, void *n_)
{
    (void) d;
    (*(int *) n_)++;
}

static void
remove_odd_cb(struct tpm_decision *d, void *ds_)
{
    if (d->key.epoch % 2) {
        tpm_decision_remove(ds_, d);
    }
}

START_TEST(test_decisions)
{
    /* A small capacity: the index grows many times over. */
    struct tpm_decisions *ds = engine(4, 0, 0, 2);
    struct tpm_decision_key k;

    for (uint64_t e = 0; e < 5000; e++) {
        k = key(1, e, 0);
        ck_assert_ptr_null(tpm_decision_find(ds, &k));
        struct tpm_decision *d = tpm_decision_start(ds, &k, 3, 100, 200);
        ck_assert_ptr_eq(tpm_decision_find(ds, &k), d);
        ck_assert_uint_eq(d->n_waiting, 3);
    }
    ck_assert_uint_eq(tpm_decisions_count(ds), 5000);
    k = key(2, 7, 0);
    ck_assert_ptr_null(tpm_decision_find(ds, &k));
    k = key(1, 7, 1);                       /* Another group. */
    ck_assert_ptr_null(tpm_decision_find(ds, &k));
    for (uint64_t e = 0; e < 5000; e++) {
        k = key(1, e, 0);
        struct tpm_decision *d = tpm_decision_find(ds, &k);
        ck_assert_ptr_nonnull(d);
        ck_assert_uint_eq(d->key.epoch, e);
    }

    k = key(1, 42, 0);
    struct tpm_decision *d = tpm_decision_find(ds, &k);
    ck_assert(!tpm_decision_complete(d));
    tpm_decision_set(d, 0, 10);
    tpm_decision_set(d, 2, 5.5);
    tpm_decision_set(d, 9, 1000);           /* Out of range: ignored. */
    tpm_decision_missing(d, 9);
    ck_assert(!tpm_decision_complete(d));
    ck_assert_uint_eq(d->n_waiting, 1);
    size_t missing;
    ck_assert_double_eq(tpm_decision_total(d, &missing), 15.5);
    ck_assert_uint_eq(missing, 1);
    tpm_decision_missing(d, 1);
    ck_assert(tpm_decision_complete(d));
    tpm_decision_missing(d, 0);             /* A value is not lost. */
    ck_assert_double_eq(tpm_decision_total(d, &missing), 15.5);
    ck_assert_uint_eq(missing, 1);
    tpm_decision_set(d, 1, 1);              /* A missing part answers. */
    ck_assert_double_eq(tpm_decision_total(d, &missing), 16.5);
    ck_assert_uint_eq(missing, 0);
    ck_assert_uint_eq(d->n_waiting, 0);

    /* Removal while iterating. */
    tpm_decisions_for_each(ds, remove_odd_cb, ds);
    ck_assert_uint_eq(tpm_decisions_count(ds), 2500);
    int n = 0;
    tpm_decisions_for_each(ds, count_cb, &n);
    ck_assert_int_eq(n, 2500);
    for (uint64_t e = 0; e < 5000; e++) {
        k = key(1, e, 0);
        ck_assert((tpm_decision_find(ds, &k) == NULL) == (e % 2 == 1));
    }
    tpm_decisions_destroy(ds);
}
END_TEST

/* Keys of one hash, and keys of one home entry: every lookup compares
 * keys, and deletion inside clusters (wrapping around the table's end)
 * keeps every other key reachable. */
START_TEST(test_collisions)
{
    struct tpm_decisions *ds = engine(8, 0, 0, 8);
    enum { N = 300 };
    struct tpm_decision_key keys[N];

    for (int i = 0; i < N; i++) {
        keys[i] = key(i % 3, i, i);
        if (i < N / 2) {
            keys[i].hash = 0x5a5a5a5a;      /* One hash for half. */
        } else {
            /* Others: one home entry at the end of any table up to 2^16,
             * so that their cluster wraps around. */
            keys[i].hash = (uint32_t) (i << 16) | 0xffff;
        }
        ck_assert_ptr_nonnull(tpm_decision_start(ds, &keys[i], 1, 0, 1));
    }
    for (int round = 0; round < 3; round++) {
        for (int i = round; i < N; i += 3) {
            struct tpm_decision *d = tpm_decision_find(ds, &keys[i]);
            ck_assert_ptr_nonnull(d);
            ck_assert_uint_eq(d->key.epoch, i);
            tpm_decision_remove(ds, d);
            ck_assert_ptr_null(tpm_decision_find(ds, &keys[i]));
        }
        for (int i = 0; i < N; i++) {
            bool gone = i % 3 <= round;
            struct tpm_decision *d = tpm_decision_find(ds, &keys[i]);
            ck_assert_msg(!d == gone, "round %d, key %d", round, i);
            if (d) {
                ck_assert_uint_eq(d->key.epoch, i);
            }
        }
    }
    ck_assert_uint_eq(tpm_decisions_count(ds), 0);
    tpm_decisions_destroy(ds);
}
END_TEST

/* A caller's parts: struct tpm_part first, its own fields after; inline
 * or in the slot's buffer; zeroed for each new decision. */
struct my_part {
    struct tpm_part up;
    uint32_t host;
    uint32_t session;
};

START_TEST(test_parts)
{
    struct tpm_decisions *ds = engine(16, 0, sizeof(struct my_part), 4);

    for (size_t n_parts = 1; n_parts <= 40; n_parts += 3) {
        struct tpm_decision_key k = key(5, n_parts, 9);
        struct tpm_decision *d = tpm_decision_start(ds, &k, n_parts, 0, 1);
        struct my_part *parts = d->parts;
        for (size_t i = 0; i < n_parts; i++) {
            ck_assert_ptr_eq(tpm_decision_part(d, i), &parts[i].up);
            ck_assert_int_eq(parts[i].up.state, TPM_PART_WAITING);
            ck_assert_uint_eq(parts[i].host, 0);
            ck_assert_uint_eq(parts[i].up.flags, 0);
            parts[i].host = 1000 + i;
            parts[i].session = 7;
            parts[i].up.flags = 3;
            tpm_decision_set(d, i, i);
        }
        ck_assert(tpm_decision_complete(d));
        ck_assert_double_eq(tpm_decision_total(d, NULL),
                            n_parts * (n_parts - 1) / 2.0);
        for (size_t i = 0; i < n_parts; i++) {
            ck_assert_uint_eq(parts[i].host, 1000 + i);
            ck_assert_uint_eq(parts[i].session, 7);
        }
        /* The slot is reused next time round, with parts zeroed. */
        tpm_decision_remove(ds, d);
    }
    tpm_decisions_destroy(ds);
}
END_TEST

static void
decide_cb(struct tpm_decision *d, void *ds_)
{
    if (d->key.event == 1) {
        tpm_decision_decided(ds_, d, d->deadline_ns + 10);
    } else {
        tpm_decision_remove(ds_, d);
    }
}

/* Deadlines, keeping decided keys, room at the maximum, slots and their
 * generations. */
START_TEST(test_timers)
{
    struct tpm_decisions *ds = engine(2, 4, 0, 8);
    struct tpm_decision *d[6];
    struct tpm_decision_key k[6];

    ck_assert_uint_eq(tpm_decisions_next_ns(ds), UINT64_MAX);
    ck_assert_ptr_null(tpm_decisions_due(ds, UINT64_MAX));
    for (int i = 0; i < 4; i++) {
        k[i] = key(1, i, 0);
        d[i] = tpm_decision_start(ds, &k[i], 2, i, 100 + i);
        ck_assert_uint_eq(d[i]->slot, i);
        ck_assert_ptr_eq(tpm_decision_by_slot(ds, i), d[i]);
    }
    ck_assert_ptr_null(tpm_decision_by_slot(ds, 4));
    ck_assert_uint_eq(tpm_decisions_next_ns(ds), 100);
    ck_assert_ptr_null(tpm_decisions_due(ds, 99));
    ck_assert_ptr_eq(tpm_decisions_due(ds, 100), d[0]);

    /* Every slot pending: no room. */
    k[4] = key(1, 4, 0);
    ck_assert_ptr_null(tpm_decision_start(ds, &k[4], 1, 5, 105));

    /* Decide the first two at their deadlines. */
    for (uint64_t now = 100; now <= 101; now++) {
        struct tpm_decision *due = tpm_decisions_due(ds, now);
        ck_assert_ptr_eq(due, d[now - 100]);
        tpm_decision_missing_all(due);
        ck_assert(tpm_decision_complete(due));
        tpm_decision_decided(ds, due, now + 50);
        ck_assert(due->decided);
        ck_assert_ptr_null(tpm_decisions_due(ds, now));
    }
    ck_assert_uint_eq(tpm_decisions_count_decided(ds), 2);
    ck_assert_uint_eq(tpm_decisions_next_ns(ds), 102);
    ck_assert_ptr_eq(tpm_decision_find(ds, &k[0]), d[0]);

    /* At the maximum, the decided key kept the longest makes room. */
    uint32_t gen0 = d[0]->gen;
    d[4] = tpm_decision_start(ds, &k[4], 1, 6, 106);
    ck_assert_ptr_nonnull(d[4]);
    ck_assert_uint_eq(d[4]->slot, 0);
    ck_assert_uint_ne(d[4]->gen, gen0);
    ck_assert_ptr_null(tpm_decision_find(ds, &k[0]));
    ck_assert_ptr_eq(tpm_decision_find(ds, &k[1]), d[1]);
    ck_assert_uint_eq(tpm_decisions_count(ds), 4);
    ck_assert_uint_eq(tpm_decisions_count_decided(ds), 1);

    /* Expiry: d[1] is kept until 151. */
    tpm_decisions_expire(ds, 150);
    ck_assert_ptr_eq(tpm_decision_find(ds, &k[1]), d[1]);
    tpm_decisions_expire(ds, 151);
    ck_assert_ptr_null(tpm_decision_find(ds, &k[1]));
    ck_assert_ptr_null(tpm_decision_by_slot(ds, 1));
    ck_assert_uint_eq(tpm_decisions_count(ds), 3);
    ck_assert_uint_eq(tpm_decisions_count_decided(ds), 0);

    /* Deciding and removing from inside the pending walk: d[2], d[3]
     * decided, d[4] (another event) removed. */
    d[4]->key.event = 2;    /* The walk's callback reads it; the index
                             * does not. */
    tpm_decisions_for_each_pending(ds, decide_cb, ds);
    ck_assert_ptr_null(tpm_decisions_due(ds, UINT64_MAX));
    ck_assert_uint_eq(tpm_decisions_count(ds), 2);
    ck_assert_uint_eq(tpm_decisions_count_decided(ds), 2);
    ck_assert_uint_eq(tpm_decisions_next_ns(ds), 112);
    tpm_decisions_expire(ds, UINT64_MAX);
    ck_assert_uint_eq(tpm_decisions_count(ds), 0);
    ck_assert_uint_eq(tpm_decisions_next_ns(ds), UINT64_MAX);
    tpm_decisions_destroy(ds);
}
END_TEST

/* Random starts, answers, decisions and removals against a plain array
 * of what should be there, with an index that grows and keys that often
 * share a hash. */
START_TEST(test_model)
{
    enum { N_KEYS = 2000, MAX = 1500 };
    struct tpm_decisions *ds = engine(1, MAX, 0, 2);
    static struct tpm_decision_key keys[N_KEYS];
    static bool present[N_KEYS];
    static uint32_t slot_of[N_KEYS], gen_of[N_KEYS];
    size_t n = 0;

    srand(11);
    for (int i = 0; i < N_KEYS; i++) {
        keys[i] = key(i % 7, i / 7, i % 13);
        keys[i].hash %= 97;     /* Few hashes: long clusters. */
    }
    for (int step = 0; step < 200000; step++) {
        int i = rand() % N_KEYS;
        struct tpm_decision *d = tpm_decision_find(ds, &keys[i]);
        ck_assert(!d == !present[i]);
        if (d) {
            ck_assert_uint_eq(d->slot, slot_of[i]);
            ck_assert_uint_eq(d->gen, gen_of[i]);
            ck_assert_ptr_eq(tpm_decision_by_slot(ds, d->slot), d);
            if (rand() % 2) {
                tpm_decision_remove(ds, d);
                ck_assert_ptr_null(tpm_decision_by_slot(ds, slot_of[i]));
                present[i] = false;
                n--;
            } else if (!d->decided) {
                tpm_decision_set(d, rand() % d->n_parts, 1);
                if (tpm_decision_complete(d)) {
                    tpm_decision_decided(ds, d, UINT64_MAX);
                }
            }
        } else if (n < MAX) {
            size_t n_parts = 1 + rand() % 5;
            d = tpm_decision_start(ds, &keys[i], n_parts, 0, UINT64_MAX);
            ck_assert_ptr_nonnull(d);
            present[i] = true;
            slot_of[i] = d->slot;
            gen_of[i] = d->gen;
            n++;
        }
        ck_assert_uint_eq(tpm_decisions_count(ds), n);
    }
    int visited = 0;
    tpm_decisions_for_each(ds, count_cb, &visited);
    ck_assert_int_eq(visited, n);
    tpm_decisions_destroy(ds);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("split");
    TCase *tc = tcase_create("split");
    tcase_add_test(tc, test_supported);
    tcase_add_test(tc, test_shares);
    tcase_add_test(tc, test_decisions);
    tcase_add_test(tc, test_collisions);
    tcase_add_test(tc, test_parts);
    tcase_add_test(tc, test_timers);
    tcase_add_test(tc, test_model);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
