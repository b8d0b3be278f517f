/* SPDX-License-Identifier: Apache-2.0 */
#include "json-number.h"

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

bool
tpm_json_number_is_int(double v)
{
    return v == floor(v) && fabs(v) < 9007199254740992.0;
}

const char *
tpm_json_number(double v, char buf[TPM_JSON_NUMBER_LEN])
{
    if (tpm_json_number_is_int(v)) {
        snprintf(buf, TPM_JSON_NUMBER_LEN, "%"PRId64, (int64_t) v);
    } else if (isfinite(v)) {
        snprintf(buf, TPM_JSON_NUMBER_LEN, "%.17g", v);
    } else {
        snprintf(buf, TPM_JSON_NUMBER_LEN, "null");
    }
    return buf;
}
