/* SPDX-License-Identifier: Apache-2.0 */
#include "json-number.h"

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

bool
tpm_json_number_is_int(double v)
{
    return v == floor(v) && fabs(v) < 9007199254740992.0;
}

size_t
tpm_json_int(int64_t v, char buf[TPM_JSON_NUMBER_LEN])
{
    /* By hand: the TEM writes one per host of every alert, and snprintf()
     * costs several times this. */
    char tmp[24], *p = tmp + sizeof tmp;
    uint64_t u = v < 0 ? -(uint64_t) v : (uint64_t) v;
    do {
        *--p = '0' + u % 10;
        u /= 10;
    } while (u);
    if (v < 0) {
        *--p = '-';
    }
    size_t n = tmp + sizeof tmp - p;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return n;
}

const char *
tpm_json_number(double v, char buf[TPM_JSON_NUMBER_LEN])
{
    if (tpm_json_number_is_int(v)) {
        tpm_json_int(v, buf);
    } else if (isfinite(v)) {
        snprintf(buf, TPM_JSON_NUMBER_LEN, "%.17g", v);
    } else {
        snprintf(buf, TPM_JSON_NUMBER_LEN, "null");
    }
    return buf;
}
