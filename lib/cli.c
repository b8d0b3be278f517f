/* SPDX-License-Identifier: Apache-2.0 */
#include "cli.h"

#include <getopt.h>
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

void
cli_parser_init(struct cli_parser *parser, int argc, char *argv[],
                const char *short_options, const struct option *options)
{
    parser->argc = argc;
    parser->argv = argv;
    parser->short_options = short_options;
    parser->options = options;
    parser->name[0] = '\0';
}

int
cli_parser_next(struct cli_parser *parser)
{
    int c = getopt_long(parser->argc, parser->argv, parser->short_options,
                        parser->options, NULL);

    parser->name[0] = '\0';
    if (c != -1) {
        for (const struct option *o = parser->options; o->name; o++) {
            if (o->val == c && !o->flag) {
                snprintf(parser->name, sizeof parser->name, "--%s",
                         o->name);
                break;
            }
        }
    }
    return c;
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

static const struct {
    const char *name;
    uint64_t bytes;
} byte_units[] = {
    { "KB", UINT64_C(1000) }, { "MB", UINT64_C(1000000) },
    { "GB", UINT64_C(1000000000) }, { "TB", UINT64_C(1000000000000) },
    { "KiB", UINT64_C(1) << 10 }, { "MiB", UINT64_C(1) << 20 },
    { "GiB", UINT64_C(1) << 30 }, { "TiB", UINT64_C(1) << 40 },
};

uint64_t
cli_bytes(const char *opt, const char *arg, uint64_t min)
{
    size_t digits = strspn(arg, "0123456789");
    const char *unit = arg + digits;
    uint64_t scale = 1, n;
    char *number = xstrndup(arg, digits);
    bool ok = digits && tpm_parse_uint(number, 0, UINT64_MAX, &n);

    free(number);
    if (ok && *unit) {
        ok = false;
        for (size_t i = 0; i < ARRAY_SIZE(byte_units); i++) {
            if (!strcmp(unit, byte_units[i].name)) {
                scale = byte_units[i].bytes;
                ok = true;
                break;
            }
        }
    }
    if (!ok || n > UINT64_MAX / scale || n * scale < min) {
        cli_usage_error("%s: '%s' is not a size of at least %"PRIu64" bytes "
                        "(a whole number, optionally with KB, MB, GB, TB, "
                        "KiB, MiB, GiB or TiB)", opt, arg, min);
    }
    return n * scale;
}

char *
cli_format_bytes(uint64_t bytes, char *buf, int size)
{
    static const char *const units[] = { "", "KiB", "MiB", "GiB", "TiB" };
    int u = 0;

    while (u + 1 < (int) ARRAY_SIZE(units) && bytes && !(bytes & 1023)) {
        bytes >>= 10;
        u++;
    }
    snprintf(buf, size, "%"PRIu64"%s", bytes, units[u]);
    return buf;
}
