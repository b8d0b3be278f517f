/* SPDX-License-Identifier: Apache-2.0 */
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void
tpm_out_of_memory(void)
{
    fputs("virtual memory exhausted\n", stderr);
    abort();
}

uint64_t
tpm_l2_cache_bytes(void)
{
#ifdef _SC_LEVEL2_CACHE_SIZE
    long n = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (n > 0) {
        return (uint64_t) n;
    }
#endif
    return TPM_L2_CACHE_DEFAULT;
}

char *
tpm_xvasprintf(const char *format, va_list args)
{
    va_list args2;
    va_copy(args2, args);
    int needed = vsnprintf(NULL, 0, format, args);
    char *s = xmalloc(needed + 1);
    vsnprintf(s, needed + 1, format, args2);
    va_end(args2);
    return s;
}

char *
tpm_xasprintf(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *s = xvasprintf(format, args);
    va_end(args);
    return s;
}

static void
log_stderr__(enum tpm_log_level level, const char *message)
{
    static const char *const names[] = { "ERR", "WARN", "INFO", "DBG" };
    fprintf(stderr, "tpm|%s|%s\n", names[level], message);
}

static tpm_log_hook_func *log_hook = log_stderr__;

void
tpm_log_set_hook(tpm_log_hook_func *hook)
{
    log_hook = hook ? hook : log_stderr__;
}

void
tpm_log(enum tpm_log_level level, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    char *msg = xvasprintf(format, args);
    va_end(args);
    log_hook(level, msg);
    free(msg);
}

bool
tpm_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *v)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || x < min || x > max) {
        return false;
    }
    *v = x;
    return true;
}

bool
tpm_parse_uint_hex(const char *s, uint64_t max, uint64_t *v)
{
    int base = 10;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        s += 2;
        base = 16;
    }
    if (!isxdigit((unsigned char) *s)) {
        return false;
    }
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, base);
    if (*end || errno || x > max) {
        return false;
    }
    *v = x;
    return true;
}
