/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by the Check unit tests: a deterministic PRNG, a cheap
 * assertion for hot loops, and the common main().
 *
 * Everything here is 'static inline' so that each test program can include
 * it without defining symbols that could clash with the library.
 */
#ifndef TPM_TEST_UTIL_H
#define TPM_TEST_UTIL_H 1

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* xorshift64* (Vigna): deterministic, fast, good enough for tests. */
struct test_rng {
    uint64_t s;
};

static inline void
test_rng_seed(struct test_rng *r, uint64_t seed)
{
    r->s = seed ? seed : 0x9e3779b97f4a7c15ULL;
}

static inline uint64_t
test_rng_u64(struct test_rng *r)
{
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545f4914f6cdd1dULL;
}

static inline uint32_t
test_rng_u32(struct test_rng *r)
{
    return (uint32_t) (test_rng_u64(r) >> 32);
}

/* Uniform in [0, n) (n > 0). */
static inline uint32_t
test_rng_range(struct test_rng *r, uint32_t n)
{
    return (uint32_t) (((uint64_t) test_rng_u32(r) * n) >> 32);
}

/* Shuffles 'n' 32-bit values in place (Fisher-Yates). */
static inline void
test_shuffle_u32(struct test_rng *r, uint32_t *a, uint32_t n)
{
    for (uint32_t i = n; i > 1; i--) {
        uint32_t j = test_rng_range(r, i);
        uint32_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

static inline int
test_cmp_u32(const void *a_, const void *b_)
{
    uint32_t a = *(const uint32_t *) a_, b = *(const uint32_t *) b_;
    return a < b ? -1 : a > b;
}

/* ck_assert_*() records the location of every passing assertion, which is
 * slow in loops that check millions of things; this only costs a branch
 * when the condition holds. */
#define TCHECK(COND, ...)                                       \
    do {                                                        \
        if (!(COND)) {                                          \
            ck_abort_msg("'" #COND "' failed: " __VA_ARGS__);   \
        }                                                       \
    } while (0)

/* Runs 'suite' and returns the process exit status. */
static inline int
test_run_suite(Suite *suite)
{
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

#endif /* test-util.h */
