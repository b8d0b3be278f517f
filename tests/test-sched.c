/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the queue-adaptive scheduling of sweep steps (tpm/sweep-
 * sched.h, the paper's algorithm 2).  A loop here plays the PMD of
 * ovs-patches/tpm-ovs.c: each iteration, drained or saturated, at a time
 * the test chooses, asks tpm_sched_due() and, for a step, tpm_sched_step(),
 * and counts the steps by kind as the PMD does.  The sweep's pending flag
 * and lateness are the test's, and the lateness function counts its
 * calls.  Expected steps, budgets and counts are worked out by hand from
 * the algorithm's rules.
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "sweep-sched.h"

#define US 1000ULL
#define MS (1000 * US)
#define T0 (1000 * MS)

struct pmd {
    struct tpm_sched s;
    /* Knobs. */
    uint64_t fixed_ns;
    uint32_t every;
    uint64_t gap_ns;
    uint32_t catchup;
    uint32_t pace;
    uint64_t epoch_ns;
    /* The sweep, as the monitor would tell. */
    bool pending;
    double late;
    int lateness_calls;
    /* Results. */
    int steps;
    uint64_t budget;            /* Of the latest step. */
    enum tpm_sched_kind kind;   /* Of the latest step. */
    int idle, forced, catchup_steps;
};

static double
lateness(const struct tpm *tpm, uint64_t now_ns, uint32_t pace)
{
    struct pmd *p = (struct pmd *) tpm;
    ck_assert_uint_ne(now_ns, 0);
    ck_assert_uint_eq(pace, p->pace);
    p->lateness_calls++;
    return p->late;
}

/* The knobs' defaults in tpm-ovs.c, a 10 ms epoch, a sweep pending and on
 * pace; the last step at T0. */
static void
pmd_init(struct pmd *p)
{
    *p = (struct pmd) {
        .fixed_ns = 10 * US, .every = 64, .gap_ns = 500 * US,
        .catchup = 25, .pace = 50, .epoch_ns = 10 * MS, .pending = true,
    };
    p->s.last_step_ns = T0;
}

/* One iteration at 'now': returns whether it stepped. */
static bool
iterate(struct pmd *p, bool drained, uint64_t now)
{
    if (!tpm_sched_due(&p->s, drained, now, p->every, p->gap_ns)) {
        return false;
    }
    p->kind = tpm_sched_step(&p->s, drained, now, p->epoch_ns, p->fixed_ns,
                             p->catchup, p->pace, p->pending, lateness,
                             (const struct tpm *) p, &p->budget);
    p->steps++;
    switch (p->kind) {
    case TPM_SCHED_NO_SWEEP:
        break;
    case TPM_SCHED_IDLE:
        p->idle++;
        break;
    case TPM_SCHED_CATCHUP:
        p->catchup_steps++;
        p->forced++;
        break;
    case TPM_SCHED_FORCED:
        p->forced++;
        break;
    }
    ck_assert_uint_eq(p->s.last_step_ns, now);
    ck_assert_uint_eq(p->s.busy_iterations, 0);
    return true;
}

/* Drained iterations always step, with the fixed budget, however late
 * the sweep and long the time since the last step; the lateness is not
 * asked. */
START_TEST(test_drained)
{
    struct pmd p;
    pmd_init(&p);
    p.late = 0.5;
    uint64_t now = T0;
    for (int i = 0; i < 100; i++) {
        now += (i % 7) * MS + 1;
        ck_assert(iterate(&p, true, now));
        ck_assert_int_eq(p.kind, TPM_SCHED_IDLE);
        ck_assert_uint_eq(p.budget, 10 * US);
    }
    ck_assert_int_eq(p.idle, 100);
    ck_assert_int_eq(p.forced, 0);
    ck_assert_int_eq(p.catchup_steps, 0);
    ck_assert_int_eq(p.lateness_calls, 0);

    /* Without a sweep: still a step, not counted. */
    p.pending = false;
    ck_assert(iterate(&p, true, now + 1));
    ck_assert_int_eq(p.kind, TPM_SCHED_NO_SWEEP);
    ck_assert_uint_eq(p.budget, 10 * US);
    ck_assert_int_eq(p.idle, 100);

    /* An unbounded fixed budget stays unbounded. */
    p.pending = true;
    p.fixed_ns = 0;
    ck_assert(iterate(&p, true, now + 2));
    ck_assert_int_eq(p.kind, TPM_SCHED_IDLE);
    ck_assert_uint_eq(p.budget, 0);
}
END_TEST

/* Saturated iterations step every 'every' iterations; a drained one
 * restarts the count. */
START_TEST(test_saturated_every)
{
    struct pmd p;
    pmd_init(&p);
    p.every = 8;
    uint64_t now = T0;
    for (int i = 1; i <= 100; i++) {
        now += 1 * US;
        ck_assert_int_eq(iterate(&p, false, now), i % 8 == 0);
        if (i % 8 == 0) {
            /* 8 us since the last step: 25% is 2 us, below the fixed
             * budget, so no catch-up and no question of lateness. */
            ck_assert_int_eq(p.kind, TPM_SCHED_FORCED);
            ck_assert_uint_eq(p.budget, 10 * US);
        }
    }
    ck_assert_int_eq(p.forced, 12);
    ck_assert_int_eq(p.idle, 0);
    ck_assert_int_eq(p.lateness_calls, 0);
    ck_assert_uint_eq(p.s.busy_iterations, 4);

    /* 4 busy iterations so far; a drained one steps and restarts. */
    now += US;
    ck_assert(iterate(&p, true, now));
    for (int i = 1; i < 8; i++) {
        ck_assert(!iterate(&p, false, now + i * US));
    }
    ck_assert(iterate(&p, false, now + 8 * US));
    ck_assert_int_eq(p.idle, 1);
    ck_assert_int_eq(p.forced, 13);

    /* 'every' 1: every saturated iteration steps. */
    p.every = 1;
    for (int i = 1; i <= 5; i++) {
        ck_assert(iterate(&p, false, now + (8 + i) * US));
    }
    ck_assert_int_eq(p.forced, 18);
}
END_TEST

/* Saturated iterations step once the last step is 'gap_ns' old, however
 * few they are. */
START_TEST(test_saturated_gap)
{
    struct pmd p;
    pmd_init(&p);
    p.every = 1000;
    p.fixed_ns = 200 * US;      /* Above any catch-up here. */
    uint64_t now = T0;
    for (int i = 1; i <= 20; i++) {
        now += 100 * US;
        ck_assert_int_eq(iterate(&p, false, now), i % 5 == 0);
    }
    ck_assert_int_eq(p.forced, 4);
    /* 500 us * 25% = 125 us, not more than the fixed budget: not asked. */
    ck_assert_int_eq(p.lateness_calls, 0);

    /* Just short of the gap, then at it. */
    ck_assert(!iterate(&p, false, now + 500 * US - 1));
    ck_assert(iterate(&p, false, now + 500 * US));
    ck_assert_int_eq(p.kind, TPM_SCHED_FORCED);
    ck_assert_uint_eq(p.budget, 200 * US);

    /* A long iteration (transmit to a kernel device) steps at once. */
    now += 500 * US;
    ck_assert(iterate(&p, false, now + 3 * MS));
    ck_assert_int_eq(p.forced, 6);
}
END_TEST

/* A forced step whose sweep is late gets since * catchup / 100 when that
 * is more than the fixed budget. */
START_TEST(test_catchup)
{
    struct pmd p;
    pmd_init(&p);
    p.late = 0.25;

    /* 500 us since the last step: 125 us > 10 us, and late. */
    ck_assert(iterate(&p, false, T0 + 500 * US));
    ck_assert_int_eq(p.kind, TPM_SCHED_CATCHUP);
    ck_assert_uint_eq(p.budget, 125 * US);
    ck_assert_int_eq(p.lateness_calls, 1);
    ck_assert_int_eq(p.forced, 1);
    ck_assert_int_eq(p.catchup_steps, 1);

    /* Another 'catchup': 40% of 600 us. */
    uint64_t now = T0 + 500 * US;
    p.catchup = 40;
    ck_assert(iterate(&p, false, now + 600 * US));
    ck_assert_uint_eq(p.budget, 240 * US);
    now += 600 * US;

    /* The time since the last step counts up to one epoch. */
    p.gap_ns = 500 * US;
    p.catchup = 25;
    now += 50 * MS;
    ck_assert(iterate(&p, false, now));
    ck_assert_int_eq(p.kind, TPM_SCHED_CATCHUP);
    ck_assert_uint_eq(p.budget, 10 * MS / 4);

    /* On pace: the fixed budget, after asking. */
    p.late = 0;
    now += 1 * MS;
    ck_assert(iterate(&p, false, now));
    ck_assert_int_eq(p.kind, TPM_SCHED_FORCED);
    ck_assert_uint_eq(p.budget, 10 * US);
    ck_assert_int_eq(p.lateness_calls, 4);

    /* Late, but the catch-up share is not above the fixed budget: 25% of
     * 40 us is exactly 10 us. */
    p.late = 1;
    p.every = 40;
    for (int i = 1; i <= 40; i++) {
        iterate(&p, false, now + i * US);
    }
    ck_assert_int_eq(p.kind, TPM_SCHED_FORCED);
    ck_assert_uint_eq(p.budget, 10 * US);
    now += 40 * US;
    /* 41 us: 10.25 us, above it. */
    for (int i = 1; i <= 40; i++) {
        iterate(&p, false, now + i * US + (i == 40 ? 1 * US : 0));
    }
    ck_assert_int_eq(p.kind, TPM_SCHED_CATCHUP);
    ck_assert_uint_eq(p.budget, 41 * US / 4);
    ck_assert_int_eq(p.lateness_calls, 5);
    now += 41 * US;

    /* A 'catchup' of 0, or an unbounded fixed budget, disables it, and so
     * do a drained iteration and no sweep pending: none asks. */
    p.every = 1000;
    p.catchup = 0;
    now += 1 * MS;
    ck_assert(iterate(&p, false, now));
    ck_assert_int_eq(p.kind, TPM_SCHED_FORCED);
    ck_assert_uint_eq(p.budget, 10 * US);
    p.catchup = 25;
    p.fixed_ns = 0;
    now += 1 * MS;
    ck_assert(iterate(&p, false, now));
    ck_assert_int_eq(p.kind, TPM_SCHED_FORCED);
    ck_assert_uint_eq(p.budget, 0);
    p.fixed_ns = 10 * US;
    now += 1 * MS;
    ck_assert(iterate(&p, true, now));
    ck_assert_int_eq(p.kind, TPM_SCHED_IDLE);
    ck_assert_uint_eq(p.budget, 10 * US);
    p.pending = false;
    now += 1 * MS;
    ck_assert(iterate(&p, false, now));
    ck_assert_int_eq(p.kind, TPM_SCHED_NO_SWEEP);
    ck_assert_uint_eq(p.budget, 10 * US);
    ck_assert_int_eq(p.lateness_calls, 5);
    ck_assert_int_eq(p.catchup_steps, 4);
}
END_TEST

/* A run of every kind of iteration: the counts. */
START_TEST(test_counts)
{
    struct pmd p;
    pmd_init(&p);
    p.every = 16;
    p.late = 0.1;
    uint64_t now = T0;
    /* 30 drained iterations 1 us apart. */
    for (int i = 0; i < 30; i++) {
        now += US;
        iterate(&p, true, now);
    }
    /* 160 saturated ones 1 us apart: 10 forced steps, 4 us of catch-up,
     * below the fixed budget. */
    for (int i = 0; i < 160; i++) {
        now += US;
        iterate(&p, false, now);
    }
    /* 3 saturated ones 200 us apart: a step on the third (600 us: 150 us
     * of catch-up). */
    for (int i = 0; i < 3; i++) {
        now += 200 * US;
        iterate(&p, false, now);
    }
    ck_assert_uint_eq(p.budget, 150 * US);
    /* 5 drained and 5 saturated without a sweep: 5 steps, uncounted. */
    p.pending = false;
    for (int i = 0; i < 5; i++) {
        now += US;
        iterate(&p, true, now);
        iterate(&p, false, now);
    }
    ck_assert_int_eq(p.steps, 30 + 10 + 1 + 5);
    ck_assert_int_eq(p.idle, 30);
    ck_assert_int_eq(p.forced, 11);
    ck_assert_int_eq(p.catchup_steps, 1);
    ck_assert_int_eq(p.lateness_calls, 1);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("sched");
    TCase *tc = tcase_create("sched");
    tcase_add_test(tc, test_drained);
    tcase_add_test(tc, test_saturated_every);
    tcase_add_test(tc, test_saturated_gap);
    tcase_add_test(tc, test_catchup);
    tcase_add_test(tc, test_counts);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
