/* SPDX-License-Identifier: Apache-2.0 */
/*
 * JSON numbers: one rule for every output (tpm-replay's reports,
 * ovs-vswitchd's tpm/reports and log, the TEM's alerts and views).
 *
 * An integral value within +-2^53 (where a double is exact) is written as
 * an integer, any other finite value with 17 significant digits (it reads
 * back as the same double), a non-finite one as null (JSON has no
 * infinity or NaN).  A consumer that compares values sees exactly what the
 * monitor computed, and counts look like counts.
 *
 * Self-contained (no other header of ours), so that code built inside
 * Open vSwitch can include it next to OVS's own headers.
 */
#ifndef TPM_JSON_NUMBER_H
#define TPM_JSON_NUMBER_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TPM_JSON_NUMBER_LEN 32

/* True if 'v' is written as a JSON integer. */
bool tpm_json_number_is_int(double v);

/* Writes the integer 'v' into 'buf' and returns its length. */
size_t tpm_json_int(int64_t v, char buf[TPM_JSON_NUMBER_LEN]);

/* Writes 'v' into 'buf' and returns 'buf'. */
const char *tpm_json_number(double v, char buf[TPM_JSON_NUMBER_LEN]);

#endif /* json-number.h */
