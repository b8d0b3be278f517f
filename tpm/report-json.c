/* SPDX-License-Identifier: Apache-2.0 */
#include "report-json.h"

#include <math.h>
#include <stdio.h>

#include "json-number.h"
#include "util.h"

struct json_object *
tpm_group_to_json(const struct tpm_key *mask, const struct tpm_key *gkey,
                  uint32_t tun_id)
{
    struct json_object *obj = json_object_new_object();
    struct tpm_key_field fields[TPM_KEY_FIELDS_MAX];
    int n = tpm_key_fields(mask, gkey, tun_id, fields);

    for (int i = 0; i < n; i++) {
        json_object_object_add(obj, fields[i].name,
                               fields[i].is_int
                               ? json_object_new_int(fields[i].int_value)
                               : json_object_new_string(fields[i].str_value));
    }
    return obj;
}

struct json_object *
tpm_number_to_json(double v)
{
    char buf[TPM_JSON_NUMBER_LEN];
    if (!isfinite(v)) {
        return NULL;            /* JSON null. */
    } else if (tpm_json_number_is_int(v)) {
        return json_object_new_int64((int64_t) v);
    }
    return json_object_new_double_s(v, tpm_json_number(v, buf));
}

struct json_object *
tpm_report_to_json(const struct tpm_event *event, const struct tpm_report *r)
{
    struct json_object *obj = json_object_new_object();

    json_object_object_add(obj, "event",
                           json_object_new_string(event->name));
    json_object_object_add(obj, "epoch", json_object_new_int64(r->epoch));
    json_object_object_add(obj, "group",
                           tpm_group_to_json(&event->group, &r->group,
                                             r->tun_id));
    json_object_object_add(obj, "value", tpm_number_to_json(r->value));
    if (r->flags & TPM_REPORT_PARTIAL) {
        json_object_object_add(obj, "partial",
                               json_object_new_boolean(true));
    }
    return obj;
}
