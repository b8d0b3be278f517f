/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Parsing a decimal integer in a range, on its own so that code that
 * cannot include lib/util.h can have it: the Open vSwitch glue
 * (ovs-patches/tpm-ovs*.c) is compiled inside OVS's lib/, where "util.h"
 * is OVS's own, and lib/util.h's allocation functions and macros clash
 * with OVS's.  lib/util.h includes this header, so its users need not.
 *
 * Thread-safety: thread-safe.
 */
#ifndef TPM_PARSE_H
#define TPM_PARSE_H 1

#include <stdbool.h>
#include <stdint.h>

/* Parses decimal 's' (the whole string, no sign) into '*v' if it lies in
 * [min, max].  Returns false otherwise, leaving '*v' alone.  For
 * command-line options, knobs and command arguments. */
bool tpm_parse_uint(const char *s, uint64_t min, uint64_t max,
                    uint64_t *v);

/* Parses 's' (the whole string), decimal or hexadecimal with "0x", into
 * '*v' if it is at most 'max'.  Returns false otherwise, leaving '*v'
 * alone.  For values written as OVS writes them (tun_id, ports). */
bool tpm_parse_uint_hex(const char *s, uint64_t max, uint64_t *v);

#endif /* tpm-parse.h */
