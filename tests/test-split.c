/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of threshold splitting and poll bookkeeping (lib/split.h), checked
 * against values computed here by hand.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "event.h"
#include "split.h"
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

static void
count_cb(struct tpm_decision *d, void *n_)
{
    (void) d;
    (*(int *) n_)++;
}

static void
remove_odd_cb(struct tpm_decision *d, void *ds_)
{
    if (d->epoch % 2) {
        tpm_decision_remove(ds_, d);
    }
}

START_TEST(test_decisions)
{
    struct tpm_decisions *ds = tpm_decisions_create();
    struct tpm_key g = { .ipver = 4, .proto = 17 };

    /* Many decisions, with colliding buckets. */
    for (uint64_t e = 0; e < 5000; e++) {
        ck_assert_ptr_null(tpm_decision_find(ds, 1, e, &g));
        struct tpm_decision *d = tpm_decision_start(ds, 1, e, &g, 3, 100,
                                                    200);
        ck_assert_ptr_eq(tpm_decision_find(ds, 1, e, &g), d);
    }
    ck_assert_uint_eq(tpm_decisions_count(ds), 5000);
    ck_assert_ptr_null(tpm_decision_find(ds, 2, 7, &g));

    struct tpm_decision *d = tpm_decision_find(ds, 1, 42, &g);
    ck_assert(!tpm_decision_complete(d));
    tpm_decision_set(d, 0, 10);
    tpm_decision_set(d, 2, 5.5);
    tpm_decision_set(d, 9, 1000);           /* Out of range: ignored. */
    ck_assert(!tpm_decision_complete(d));
    size_t missing;
    ck_assert_double_eq(tpm_decision_total(d, &missing), 15.5);
    ck_assert_uint_eq(missing, 1);
    tpm_decision_missing(d, 1);
    ck_assert(tpm_decision_complete(d));
    tpm_decision_missing(d, 0);             /* A value is not lost. */
    ck_assert_double_eq(tpm_decision_total(d, &missing), 15.5);
    ck_assert_uint_eq(missing, 1);

    /* Removal while iterating. */
    tpm_decisions_for_each(ds, remove_odd_cb, ds);
    ck_assert_uint_eq(tpm_decisions_count(ds), 2500);
    int n = 0;
    tpm_decisions_for_each(ds, count_cb, &n);
    ck_assert_int_eq(n, 2500);
    ck_assert_ptr_null(tpm_decision_find(ds, 1, 43, &g));
    ck_assert_ptr_nonnull(tpm_decision_find(ds, 1, 42, &g));
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
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
