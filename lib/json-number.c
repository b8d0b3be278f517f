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

const char *
tpm_json_number(double v, char buf[TPM_JSON_NUMBER_LEN])
{
    if (tpm_json_number_is_int(v)) {
        /* By hand: the TEM writes one per host of every alert, and
         * snprintf() costs several times this. */
        char tmp[24], *p = tmp + sizeof tmp;
        int64_t i = v;
        uint64_t u = i < 0 ? -(uint64_t) i : (uint64_t) i;
        do {
            *--p = '0' + u % 10;
            u /= 10;
        } while (u);
        if (i < 0) {
            *--p = '-';
        }
        size_t n = tmp + sizeof tmp - p;
        memcpy(buf, p, n);
        buf[n] = '\0';
    } else if (isfinite(v)) {
        snprintf(buf, TPM_JSON_NUMBER_LEN, "%.17g", v);
    } else {
        snprintf(buf, TPM_JSON_NUMBER_LEN, "null");
    }
    return buf;
}
