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
#include <stddef.h>
#include <stdint.h>

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

void *xmalloc(size_t);
void *xzalloc(size_t);
void *xcalloc(size_t, size_t);
void *xrealloc(void *, size_t);
void *xzalloc_aligned(size_t size, size_t alignment);
char *xstrdup(const char *);
char *xstrndup(const char *, size_t);
char *xasprintf(const char *format, ...)
    __attribute__((format(printf, 1, 2)));
char *xvasprintf(const char *format, va_list)
    __attribute__((format(printf, 1, 0)));

/* Logging for library code.  Embedders (ovs-vswitchd) route it to their
 * own logger with tpm_log_set_hook(); the default writes to stderr.  Used
 * only on control paths (creation, installation), never per packet. */
enum tpm_log_level { TPM_LOG_ERR, TPM_LOG_WARN, TPM_LOG_INFO, TPM_LOG_DBG };
typedef void tpm_log_hook_func(enum tpm_log_level, const char *message);
void tpm_log_set_hook(tpm_log_hook_func *);
void tpm_log(enum tpm_log_level, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

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

#endif /* util.h */
