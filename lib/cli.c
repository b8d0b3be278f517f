/* SPDX-License-Identifier: Apache-2.0 */
#include "cli.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event.h"
#include "util.h"

static const char *program = "trumpet";
static int usage_status = 2;

void
cli_init(const char *name, int status)
{
    program = name;
    usage_status = status;
}

static void
vwarn(const char *format, va_list args, const char *suffix)
{
    fprintf(stderr, "%s: ", program);
    vfprintf(stderr, format, args);
    fprintf(stderr, "%s\n", suffix);
}

void
cli_warn(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vwarn(format, args, "");
    va_end(args);
}

void
cli_die(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vwarn(format, args, "");
    va_end(args);
    exit(EXIT_FAILURE);
}

void
cli_die_status(int status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vwarn(format, args, "");
    va_end(args);
    exit(status);
}

void
cli_usage_error(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vwarn(format, args, " (try --help)");
    va_end(args);
    exit(usage_status);
}

uint64_t
cli_uint(const char *opt, const char *arg, uint64_t min, uint64_t max)
{
    uint64_t v;
    if (!tpm_parse_uint(arg, min, max, &v)) {
        cli_usage_error("%s: '%s' is not an integer from %"PRIu64" to "
                        "%"PRIu64, opt, arg, min, max);
    }
    return v;
}

uint64_t
cli_time(const char *opt, const char *arg, bool zero_ok)
{
    uint64_t ns;
    if (zero_ok && !strcmp(arg, "0")) {
        return 0;
    }
    char *error = tpm_parse_time(arg, &ns);
    if (error) {
        cli_usage_error("%s: %s", opt, error);
    }
    if (!ns && !zero_ok) {
        cli_usage_error("%s: '%s' is not a positive time such as 10ms", opt,
                        arg);
    }
    return ns;
}
