/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Small utilities shared by every module: compile-time checks, branch
 * hints, allocation that aborts on exhaustion (control path only; the
 * packet path never allocates), and formatted allocation for error
 * messages.
 *
 * Thread-safety: all functions are thread-safe.
 */
#ifndef TPM_UTIL_H
#define TPM_UTIL_H 1

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tpm-log.h"
#include "tpm-parse.h"

#define CACHE_LINE_SIZE 64

#define BUILD_ASSERT_DECL(EXPR) _Static_assert(EXPR, #EXPR)

#define ARRAY_SIZE(ARR) (sizeof (ARR) / sizeof (ARR)[0])

#define OVS_LIKELY(X) __builtin_expect(!!(X), 1)
#define OVS_UNLIKELY(X) __builtin_expect(!!(X), 0)

#define MIN(A, B) ((A) < (B) ? (A) : (B))
#define MAX(A, B) ((A) > (B) ? (A) : (B))

#define ROUND_UP(X, Y) (((X) + ((Y) - 1)) / (Y) * (Y))

#define CONTAINER_OF(POINTER, STRUCT, MEMBER) \
    ((STRUCT *) (void *) ((char *) (POINTER) - offsetof(STRUCT, MEMBER)))

/* Allocation that aborts on exhaustion.  Static inline, so that libtpm
 * links into programs that have their own xmalloc() family (ovs-vswitchd)
 * without clashing symbols. */
void tpm_out_of_memory(void) __attribute__((noreturn));

static inline void *
xmalloc(size_t size)
{
    void *p = malloc(size ? size : 1);
    if (!p) {
        tpm_out_of_memory();
    }
    return p;
}

static inline void *
xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        tpm_out_of_memory();
    }
    return p;
}

static inline void *
xzalloc(size_t size)
{
    return xcalloc(1, size);
}

static inline void *
xrealloc(void *p, size_t size)
{
    p = realloc(p, size ? size : 1);
    if (!p) {
        tpm_out_of_memory();
    }
    return p;
}

static inline char *
xstrndup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static inline char *
xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

/* Returns 'size' zeroed bytes aligned to 'alignment' (a power of two);
 * free() them. */
static inline void *
xzalloc_aligned(size_t size, size_t alignment)
{
    void *p = aligned_alloc(alignment, ROUND_UP(size ? size : 1, alignment));
    if (!p) {
        tpm_out_of_memory();
    }
    memset(p, 0, size);
    return p;
}

/* Formatted allocation (tpm_xasprintf() in util.c does the work). */
char *tpm_xvasprintf(const char *format, va_list)
    __attribute__((format(printf, 1, 0)));
#define xvasprintf tpm_xvasprintf
char *tpm_xasprintf(const char *format, ...)
    __attribute__((format(printf, 1, 2)));
#define xasprintf tpm_xasprintf

/* The size in bytes of the calling core's L2 cache, as the C library
 * reads it from the CPU (sysconf(_SC_LEVEL2_CACHE_SIZE)), or
 * TPM_L2_CACHE_DEFAULT if it does not say. */
#define TPM_L2_CACHE_DEFAULT (1024 * 1024)
uint64_t tpm_l2_cache_bytes(void);

static inline void
tpm_prefetch(const void *p)
{
    __builtin_prefetch(p, 0, 3);
}

static inline void
tpm_prefetch_write(const void *p)
{
    __builtin_prefetch(p, 1, 3);
}

static inline uint64_t
gcd_u64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static inline int
is_pow2(uint64_t x)
{
    return x && !(x & (x - 1));
}

/* Returns the least power of 2 that is at least 'n' (1 for 0; the
 * largest power of 2 of a size_t if none is). */
static inline size_t
pow2_ceil(size_t n)
{
    size_t p = 1;
    while (p < n && p <= SIZE_MAX / 2) {
        p *= 2;
    }
    return p;
}

/* Returns the least power of 2 that is at least 'n' and at least 16: the
 * size of a hash table for 'n' entries and more. */
static inline size_t
pow2_at_least(size_t n)
{
    return MAX(pow2_ceil(n), 16);
}

#endif /* util.h */
