/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for lib/spsc.[ch].
 *
 * Single-threaded tests check FIFO order, capacity rounding, full and
 * empty behaviour, index wrap-around and elements built in place against
 * a plain array queue; the two-thread tests push sequence numbers (and
 * larger elements with a checksum) through small rings and check that the
 * consumer sees every element exactly once, in order, intact.
 *
 * TEST_SPSC_ITEMS in the environment overrides the number of elements of
 * the two-thread tests (for slow runs under valgrind).
 */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "spsc.h"
#include "test-util.h"
#include "util.h"

static uint64_t
n_items(uint64_t dflt)
{
    const char *s = getenv("TEST_SPSC_ITEMS");
    if (s && *s) {
        uint64_t n = strtoull(s, NULL, 10);
        return n ? n : dflt;
    }
    return dflt;
}

/* ---------------------------------------------------------------------- */
/* Single thread. */

START_TEST(test_capacity_rounding)
{
    static const struct {
        uint32_t asked, cap;
    } cases[] = {
        { 0, 2 }, { 1, 2 }, { 2, 2 }, { 3, 4 }, { 4, 4 }, { 5, 8 },
        { 8, 8 }, { 9, 16 }, { 63, 64 }, { 64, 64 }, { 65, 128 },
        { 1000, 1024 }, { 4096, 4096 },
    };

    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct spsc_ring *r = spsc_create(cases[i].asked, 4);
        ck_assert_ptr_nonnull(r);
        ck_assert_msg(spsc_capacity(r) == cases[i].cap,
                      "capacity(%u) = %u, expected %u", cases[i].asked,
                      spsc_capacity(r), cases[i].cap);
        ck_assert_uint_eq(spsc_count(r), 0);

        /* Exactly 'cap' elements fit. */
        for (uint32_t j = 0; j < cases[i].cap; j++) {
            ck_assert_msg(spsc_push(r, &j), "push %u of %u", j,
                          cases[i].cap);
            ck_assert_uint_eq(spsc_count(r), j + 1);
        }
        uint32_t x = 0xdead;
        ck_assert(!spsc_push(r, &x));
        ck_assert(!spsc_push(r, &x));
        ck_assert_uint_eq(spsc_count(r), cases[i].cap);
        for (uint32_t j = 0; j < cases[i].cap; j++) {
            uint32_t y = 0xffffffff;
            ck_assert(spsc_pop(r, &y));
            ck_assert_uint_eq(y, j);
        }
        ck_assert(!spsc_pop(r, &x));
        ck_assert_uint_eq(x, 0xdead);
        ck_assert_uint_eq(spsc_count(r), 0);
        spsc_destroy(r);
    }
    spsc_destroy(NULL);
}
END_TEST

START_TEST(test_empty_pop)
{
    struct spsc_ring *r = spsc_create(4, 16);
    uint8_t buf[16];

    memset(buf, 0x33, sizeof buf);
    for (int i = 0; i < 10; i++) {
        ck_assert(spsc_empty(r));
        ck_assert(!spsc_pop(r, buf));
    }
    for (int i = 0; i < 16; i++) {
        ck_assert_uint_eq(buf[i], 0x33);
    }
    uint8_t in[16];
    for (int i = 0; i < 16; i++) {
        in[i] = (uint8_t) (i * 7 + 1);
    }
    ck_assert(spsc_push(r, in));
    /* The consumer's copy of the head is stale: spsc_empty() re-reads. */
    ck_assert(!spsc_empty(r));
    ck_assert(!spsc_empty(r));
    ck_assert(spsc_pop(r, buf));
    ck_assert(!memcmp(in, buf, 16));
    ck_assert(spsc_empty(r));
    ck_assert(!spsc_pop(r, buf));
    spsc_destroy(r);
}
END_TEST

/* Random pushes and pops against an array queue, wrapping the ring many
 * times, with an odd element size. */
static void
random_fifo(uint32_t capacity, uint32_t elem_size, uint64_t seed, int n_ops)
{
    struct spsc_ring *r = spsc_create(capacity, elem_size);
    uint32_t cap = spsc_capacity(r);
    struct test_rng rng;
    uint64_t next_in = 0, next_out = 0;
    uint8_t *in = malloc(elem_size), *out = malloc(elem_size);

    test_rng_seed(&rng, seed);
    for (int op = 0; op < n_ops; op++) {
        /* Bias towards filling or draining, in phases, so that both full
         * and empty happen often. */
        bool fill = (op / 97) % 2 ? test_rng_range(&rng, 4) != 0
                                  : test_rng_range(&rng, 4) == 0;
        uint64_t count = next_in - next_out;
        TCHECK(spsc_count(r) == count, "count %u, expected %llu",
               spsc_count(r), (unsigned long long) count);
        if (fill) {
            for (uint32_t i = 0; i < elem_size; i++) {
                in[i] = (uint8_t) (next_in * 31 + i);
            }
            bool ok = spsc_push(r, in);
            TCHECK(ok == (count < cap), "push with %llu of %u: %d",
                   (unsigned long long) count, cap, ok);
            next_in += ok;
        } else {
            memset(out, 0xee, elem_size);
            bool ok = spsc_pop(r, out);
            TCHECK(ok == (count > 0), "pop with %llu: %d",
                   (unsigned long long) count, ok);
            if (ok) {
                for (uint32_t i = 0; i < elem_size; i++) {
                    TCHECK(out[i] == (uint8_t) (next_out * 31 + i),
                           "element %llu byte %u",
                           (unsigned long long) next_out, i);
                }
                next_out++;
            }
        }
    }
    /* Many laps around the ring. */
    ck_assert_uint_gt(next_out, 100 * (uint64_t) cap);
    free(in);
    free(out);
    spsc_destroy(r);
}

START_TEST(test_random_fifo)
{
    random_fifo(1, 1, 1, 100000);
    random_fifo(4, 8, 2, 100000);
    random_fifo(5, 13, 3, 100000);
    random_fifo(64, 72, 4, 200000);
    random_fifo(100, 3, 5, 200000);
}
END_TEST

/* Elements built in place (spsc_reserve(), spsc_publish()) arrive in
 * order with the pushed ones; a slot reserved but not published is not
 * seen by the consumer, and a full ring reserves nothing. */
START_TEST(test_reserve_publish)
{
    struct spsc_ring *r = spsc_create(8, sizeof(uint64_t));
    uint64_t next_in = 0, next_out = 0, x;

    for (int round = 0; round < 50; round++) {
        /* Alternately in place and copied, until full. */
        for (;;) {
            if (next_in % 2) {
                if (!spsc_push(r, &next_in)) {
                    break;
                }
            } else {
                uint64_t *slot = spsc_reserve(r);
                if (!slot) {
                    break;
                }
                *slot = next_in;
                /* Reserved, not published: not there yet. */
                ck_assert_uint_eq(spsc_count(r), next_in - next_out);
                spsc_publish(r);
            }
            next_in++;
        }
        ck_assert_uint_eq(next_in - next_out, 8);
        ck_assert_ptr_null(spsc_reserve(r));
        /* Drain a few each round so that the slots wrap. */
        for (int i = 0; i < 3 + round % 5 && spsc_pop(r, &x); i++) {
            ck_assert_uint_eq(x, next_out);
            next_out++;
        }
    }
    while (spsc_pop(r, &x)) {
        ck_assert_uint_eq(x, next_out);
        next_out++;
    }
    ck_assert_uint_eq(next_out, next_in);
    spsc_destroy(r);
}
END_TEST

/* The 32-bit head and tail indices wrap around. */
START_TEST(test_index_wrap)
{
    struct spsc_ring *r = spsc_create(8, 4);
    uint32_t start = UINT32_MAX - 20;

    /* Pretend 2^32 - 21 elements went through (white box: the indices
     * are free-running counters, only the slot is masked). */
    atomic_store(&r->head, start);
    atomic_store(&r->tail, start);
    r->tail_cache = start;
    r->head_cache = start;
    ck_assert_uint_eq(spsc_count(r), 0);

    uint32_t next_in = 0, next_out = 0;
    for (int round = 0; round < 20; round++) {
        /* Fill completely, then drain completely. */
        while (spsc_push(r, &next_in)) {
            next_in++;
        }
        ck_assert_uint_eq(next_in - next_out, 8);
        ck_assert_uint_eq(spsc_count(r), 8);
        ck_assert(!spsc_empty(r));
        uint32_t x;
        while (spsc_pop(r, &x)) {
            ck_assert_uint_eq(x, next_out);
            next_out++;
        }
        ck_assert_uint_eq(next_out, next_in);
        ck_assert_uint_eq(spsc_count(r), 0);
        ck_assert(spsc_empty(r));
    }
    /* Went past 2^32. */
    ck_assert_uint_lt(atomic_load(&r->head), 200);

    /* Half full across the wrap point too. */
    atomic_store(&r->head, UINT32_MAX - 2);
    atomic_store(&r->tail, UINT32_MAX - 2);
    r->tail_cache = r->head_cache = UINT32_MAX - 2;
    for (uint32_t i = 0; i < 1000; i++) {
        ck_assert(spsc_push(r, &i));
        if (i >= 4) {
            uint32_t x;
            ck_assert(spsc_pop(r, &x));
            ck_assert_uint_eq(x, i - 4);
            ck_assert_uint_eq(spsc_count(r), 4);
        }
    }
    spsc_destroy(r);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Two threads. */

struct big_elem {
    uint64_t seq;
    uint8_t data[56];
    uint64_t check;             /* Over 'seq' and 'data'. */
};
BUILD_ASSERT_DECL(sizeof(struct big_elem) == 72);

static uint64_t
big_checksum(const struct big_elem *e)
{
    uint64_t h = 0xcbf29ce484222325ULL ^ e->seq;
    for (size_t i = 0; i < sizeof e->data; i++) {
        h = (h ^ e->data[i]) * 0x100000001b3ULL;
    }
    return h;
}

static void
big_fill(struct big_elem *e, uint64_t seq)
{
    e->seq = seq;
    uint64_t x = seq * 0x9e3779b97f4a7c15ULL + 1;
    for (size_t i = 0; i < sizeof e->data; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        e->data[i] = (uint8_t) x;
    }
    e->check = big_checksum(e);
}

struct thread_arg {
    struct spsc_ring *ring;
    uint64_t n;
    bool big;
    uint64_t full, empty;       /* Times push/pop found the ring so. */
    uint64_t errors;            /* Consumer: bad elements. */
    uint64_t first_bad, first_bad_got;
};

static void
backoff(uint32_t *spins)
{
    if (++*spins > 64) {
        sched_yield();
        *spins = 0;
    } else {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
}

static void *
producer(void *arg_)
{
    struct thread_arg *a = arg_;
    uint32_t spins = 0;

    for (uint64_t i = 0; i < a->n; i++) {
        struct big_elem e;
        if (a->big) {
            big_fill(&e, i);
        }
        const void *p = a->big ? (const void *) &e : (const void *) &i;
        while (!spsc_push(a->ring, p)) {
            a->full++;
            backoff(&spins);
        }
    }
    return NULL;
}

static void *
consumer(void *arg_)
{
    struct thread_arg *a = arg_;
    uint32_t spins = 0;

    for (uint64_t i = 0; i < a->n; i++) {
        struct big_elem e;
        uint64_t got;
        void *out = a->big ? (void *) &e : (void *) &got;
        if (i & 1) {
            /* As a poller does: wait for spsc_empty() to say no, then the
             * pop must succeed (only this thread takes elements) and see
             * the element whole, with no further read of the head. */
            while (spsc_empty(a->ring)) {
                a->empty++;
                backoff(&spins);
            }
            if (!spsc_pop(a->ring, out)) {
                a->errors++;
                continue;
            }
        } else {
            while (!spsc_pop(a->ring, out)) {
                a->empty++;
                backoff(&spins);
            }
        }
        bool ok;
        if (a->big) {
            struct big_elem want;
            big_fill(&want, i);
            ok = e.seq == i && e.check == big_checksum(&e)
                 && !memcmp(&e, &want, sizeof e);
            got = e.seq;
        } else {
            ok = got == i;
        }
        if (!ok && !a->errors++) {
            a->first_bad = i;
            a->first_bad_got = got;
        }
    }
    return NULL;
}

static void
run_threads(uint32_t capacity, bool big, uint64_t n)
{
    struct spsc_ring *r = spsc_create(capacity, big
                                      ? sizeof(struct big_elem)
                                      : sizeof(uint64_t));
    struct thread_arg pa = { .ring = r, .n = n, .big = big };
    struct thread_arg ca = pa;
    pthread_t pt, ct;

    ck_assert_int_eq(pthread_create(&ct, NULL, consumer, &ca), 0);
    ck_assert_int_eq(pthread_create(&pt, NULL, producer, &pa), 0);
    ck_assert_int_eq(pthread_join(pt, NULL), 0);
    ck_assert_int_eq(pthread_join(ct, NULL), 0);

    ck_assert_msg(ca.errors == 0, "%llu bad elements, first: expected "
                  "sequence %llu, got %llu",
                  (unsigned long long) ca.errors,
                  (unsigned long long) ca.first_bad,
                  (unsigned long long) ca.first_bad_got);
    /* Nothing left over, nothing more to pop. */
    ck_assert_uint_eq(spsc_count(r), 0);
    uint8_t buf[sizeof(struct big_elem)];
    ck_assert(!spsc_pop(r, buf));
    spsc_destroy(r);
}

START_TEST(test_threads_seq)
{
    run_threads(64, false, n_items(10 * 1000 * 1000));
}
END_TEST

START_TEST(test_threads_tiny_ring)
{
    run_threads(2, false, n_items(200 * 1000));
}
END_TEST

START_TEST(test_threads_big_elements)
{
    run_threads(64, true, n_items(1000 * 1000));
}
END_TEST

START_TEST(test_threads_big_elements_odd_capacity)
{
    run_threads(5, true, n_items(300 * 1000));
}
END_TEST

static Suite *
spsc_suite(void)
{
    Suite *s = suite_create("spsc");
    TCase *tc = tcase_create("single-thread");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_capacity_rounding);
    tcase_add_test(tc, test_empty_pop);
    tcase_add_test(tc, test_random_fifo);
    tcase_add_test(tc, test_index_wrap);
    tcase_add_test(tc, test_reserve_publish);
    suite_add_tcase(s, tc);

    TCase *tt = tcase_create("two-threads");
    tcase_set_timeout(tt, 300);
    tcase_add_test(tt, test_threads_seq);
    tcase_add_test(tt, test_threads_tiny_ring);
    tcase_add_test(tt, test_threads_big_elements);
    tcase_add_test(tt, test_threads_big_elements_odd_capacity);
    suite_add_tcase(s, tt);
    return s;
}

int
main(void)
{
    return test_run_suite(spsc_suite());
}
