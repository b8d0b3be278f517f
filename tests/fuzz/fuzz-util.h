/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by the libFuzzer targets (tests/fuzz/, docs/fuzzing.md):
 * a failed-invariant abort that libFuzzer reports as a crash, a reader
 * that takes the bytes of an input as a little program of choices, and
 * a log hook that keeps the libraries quiet.
 *
 * Everything is 'static inline': each target includes it.
 */
#ifndef FUZZ_UTIL_H
#define FUZZ_UTIL_H 1

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpm-log.h"

/* Aborts with a message when 'cond' is false: an invariant of the code
 * under test that the input broke. */
#define FUZZ_CHECK(COND, ...)                                   \
    do {                                                        \
        if (!(COND)) {                                          \
            fuzz_fail__(__FILE__, __LINE__, #COND, __VA_ARGS__); \
        }                                                       \
    } while (0)

static inline void fuzz_fail__(const char *file, int line, const char *cond,
                               const char *format, ...)
    __attribute__((noreturn, format(printf, 4, 5)));

static inline void
fuzz_fail__(const char *file, int line, const char *cond,
            const char *format, ...)
{
    va_list args;

    fprintf(stderr, "%s:%d: invariant broken: %s: ", file, line, cond);
    va_start(args, format);
    vfprintf(stderr, format, args);
    va_end(args);
    fputc('\n', stderr);
    abort();
}

static inline void
fuzz_log_quiet(enum tpm_log_level level, const char *message)
{
    (void) level;
    (void) message;
}

/* The input as a sequence of choices: each read takes the next bytes, or
 * zeros once the input is used up. */
struct fuzz_in {
    const uint8_t *p;
    size_t n;
};

static inline size_t
fuzz_left(const struct fuzz_in *in)
{
    return in->n;
}

static inline uint8_t
fuzz_u8(struct fuzz_in *in)
{
    if (!in->n) {
        return 0;
    }
    in->n--;
    return *in->p++;
}

static inline uint16_t
fuzz_u16(struct fuzz_in *in)
{
    uint16_t x = fuzz_u8(in);
    return x | (uint16_t) fuzz_u8(in) << 8;
}

static inline uint32_t
fuzz_u32(struct fuzz_in *in)
{
    uint32_t x = fuzz_u16(in);
    return x | (uint32_t) fuzz_u16(in) << 16;
}

static inline uint64_t
fuzz_u64(struct fuzz_in *in)
{
    uint64_t x = fuzz_u32(in);
    return x | (uint64_t) fuzz_u32(in) << 32;
}

/* Takes up to 'max' bytes: stores their address in '*p' and returns how
 * many (a length byte first, then the bytes). */
static inline size_t
fuzz_bytes(struct fuzz_in *in, size_t max, const uint8_t **p)
{
    size_t len = fuzz_u8(in);
    if (len > max) {
        len = max;
    }
    if (len > in->n) {
        len = in->n;
    }
    *p = in->p;
    in->p += len;
    in->n -= len;
    return len;
}

/* A NUL-terminated copy of 'n' bytes at 'p' (embedded NULs end it);
 * caller frees. */
static inline char *
fuzz_strndup(const uint8_t *p, size_t n)
{
    char *s = malloc(n + 1);
    if (!s) {
        abort();
    }
    memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

#endif /* fuzz-util.h */
