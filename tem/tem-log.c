/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TEM core's log: every line the core writes goes through a rate
 * limiter (struct tem_rl, one per kind of line in struct tem_core), at
 * most TEM_LOG_BURST lines a second each, the number suppressed told with
 * the next line, so that no host, however it misbehaves, floods the log.
 *
 * A line is one line whatever a peer put in it: the strings hosts send
 * (Bye and Nack reasons, host ids in errors, software names) may hold
 * newlines and other control characters, which would forge log lines of
 * their own; every line is written with them escaped (tem_log_escape__():
 * "\n", "\r", "\t", "\\" and "\xHH").
 *
 * This file is the bottom of the core (tem-core-private.h): every other
 * file of the core logs through it, and it calls none of them.
 */
#include "tem-core-private.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Log lines per rate limiter and second. */
#define TEM_LOG_BURST 10

/* Returns 'msg' with its control characters and backslashes escaped, in
 * a new string. */
static char *
tem_log_escape__(const char *msg)
{
    size_t n = 0;
    for (const char *p = msg; *p; p++) {
        unsigned char c = *p;
        n += c == '\\' || c == '\n' || c == '\r' || c == '\t' ? 2
             : c < 0x20 || c == 0x7f ? 4 : 1;
    }

    char *out = xmalloc(n + 1), *o = out;
    for (const char *p = msg; *p; p++) {
        unsigned char c = *p;
        const char *esc = (c == '\\' ? "\\\\" : c == '\n' ? "\\n"
                           : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL);
        if (esc) {
            memcpy(o, esc, 2);
            o += 2;
        } else if (c < 0x20 || c == 0x7f) {
            o += sprintf(o, "\\x%02x", c);
        } else {
            *o++ = c;
        }
    }
    *o = '\0';
    return out;
}

static void tem_log_rlv(struct tem_core *, struct tem_rl *,
                        enum tpm_log_level, const char *format, va_list)
    __attribute__((format(printf, 4, 0)));

static void
tem_log_rlv(struct tem_core *core, struct tem_rl *rl,
            enum tpm_log_level level, const char *format, va_list args)
{
    uint64_t window = tem_core_now(core) / NS_PER_S;
    if (window != rl->window) {
        rl->window = window;
        rl->n = 0;
    }
    if (rl->n >= TEM_LOG_BURST) {
        rl->suppressed++;
        return;
    }
    rl->n++;

    char *raw = xvasprintf(format, args);
    char *msg = tem_log_escape__(raw);
    free(raw);
    if (rl->suppressed) {
        tpm_log(level, "%s (%"PRIu64" similar messages suppressed)", msg,
                rl->suppressed);
        rl->suppressed = 0;
    } else {
        tpm_log(level, "%s", msg);
    }
    free(msg);
}

void
tem_log_rl(struct tem_core *core, struct tem_rl *rl, enum tpm_log_level level,
           const char *format, ...)
{
    va_list args;
    va_start(args, format);
    tem_log_rlv(core, rl, level, format, args);
    va_end(args);
}

void
tem_core_log_security(struct tem_core *core, enum tpm_log_level level,
                      const char *format, ...)
{
    va_list args;
    va_start(args, format);
    tem_log_rlv(core, &core->rl_security, level, format, args);
    va_end(args);
}
