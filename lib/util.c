#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
out_of_memory(void)
{
    fputs("virtual memory exhausted\n", stderr);
    abort();
}

void *
xmalloc(size_t size)
{
    void *p = malloc(size ? size : 1);
    if (!p) {
        out_of_memory();
    }
    return p;
}

void *
xzalloc(size_t size)
{
    return xcalloc(1, size);
}

void *
xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        out_of_memory();
    }
    return p;
}

void *
xrealloc(void *p, size_t size)
{
    p = realloc(p, size ? size : 1);
    if (!p) {
        out_of_memory();
    }
    return p;
}

/* Returns 'size' zeroed bytes aligned to 'alignment' (a power of two);
 * free() them. */
void *
xzalloc_aligned(size_t size, size_t alignment)
{
    void *p = aligned_alloc(alignment, ROUND_UP(size ? size : 1, alignment));
    if (!p) {
        out_of_memory();
    }
    memset(p, 0, size);
    return p;
}

char *
xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

char *
xstrndup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *
xvasprintf(const char *format, va_list args)
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
xasprintf(const char *format, ...)
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
