/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Command-line helpers shared by the tools (tpm-replay, tem-ctl and the
 * benchmarks): messages prefixed with the program's name, fatal errors
 * with an exit status, and option values checked the same way everywhere
 * (integers in a range, times and sizes with a unit).
 *
 * A tool calls cli_init() first with its name and the exit status of a
 * usage error (its documented one: 1 for tpm-replay, 2 for tem-ctl).
 *
 * Its options are read with cli_parser, getopt_long() that also says
 * which option it returned, as the user would write it ("--epoch"), for
 * the messages of cli_uint() and the others:
 *
 *     struct cli_parser p;
 *     int c;
 *
 *     cli_parser_init(&p, argc, argv, "h", options);
 *     while ((c = cli_parser_next(&p)) != -1) {
 *         switch (c) {
 *         case OPT_EPOCH:
 *             epoch_ns = cli_time(p.name, optarg, false);
 *             ...
 *     }
 *     ...the operands from argv[optind]...
 *
 * Thread-safety: none; getopt_long() itself keeps global state (optarg,
 * optind).  Options are read by the main thread before any other starts.
 */
#ifndef TPM_CLI_H
#define TPM_CLI_H 1

#include <stdbool.h>
#include <stdint.h>

void cli_init(const char *program, int usage_status);

struct option;

/* getopt_long() over 'argc' and 'argv' with 'short_options' and
 * 'options' (ended by a null name), and the name of the option it
 * returned. */
struct cli_parser {
    int argc;
    char **argv;
    const char *short_options;
    const struct option *options;

    /* The option that cli_parser_next() returned last, "--NAME" by the
     * long option in 'options' that has its value (so "--help" for "-h"
     * if the table has it); "" if none has. */
    char name[64];
};

void cli_parser_init(struct cli_parser *, int argc, char *argv[],
                     const char *short_options,
                     const struct option *options);

/* Returns the next option as getopt_long() does (its value; '?' for an
 * unknown option or a missing argument, on which getopt_long() has
 * already printed its message; -1 after the last option, with optind at
 * the first operand) and sets 'parser->name'. */
int cli_parser_next(struct cli_parser *parser);

/* "PROGRAM: MESSAGE" on stderr. */
void cli_warn(const char *format, ...)
    __attribute__((format(printf, 1, 2)));

/* cli_warn(), then exit with status 1 or 'status'. */
void cli_die(const char *format, ...)
    __attribute__((format(printf, 1, 2), noreturn));
void cli_die_status(int status, const char *format, ...)
    __attribute__((format(printf, 2, 3), noreturn));

/* "PROGRAM: MESSAGE (try --help)", exit with the usage status. */
void cli_usage_error(const char *format, ...)
    __attribute__((format(printf, 1, 2), noreturn));

/* The value 'arg' of option 'opt' (as written, "--name"): an integer in
 * ['min', 'max'], or a time with a unit (tpm_parse_time(); "0" needs no
 * unit; 0 only if 'zero_ok').  A bad value is a usage error. */
uint64_t cli_uint(const char *opt, const char *arg, uint64_t min,
                  uint64_t max);
uint64_t cli_time(const char *opt, const char *arg, bool zero_ok);

/* The value 'arg' of option 'opt': a number of bytes, a whole number with
 * an optional unit as in the event language (KB MB GB TB = 10^3.., KiB
 * MiB GiB TiB = 2^10..), at least 'min'.  A bad value is a usage error. */
uint64_t cli_bytes(const char *opt, const char *arg, uint64_t min);

/* Formats 'bytes' into 'buf' ('size' bytes) as a whole number of the
 * largest binary unit that divides it ("4GiB", "1536KiB", "100").
 * Returns 'buf'. */
char *cli_format_bytes(uint64_t bytes, char *buf, int size);

#endif /* cli.h */
