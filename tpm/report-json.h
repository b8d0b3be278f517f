/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Satisfaction reports as JSON (json-c), one format for every front end:
 * tpm-replay's output lines, ovs-appctl tpm/reports, and the TEM's alerts.
 *
 *   {"event":"heavy","epoch":170000123,
 *    "group":{"nw_proto":6,"nw_src":"10.99.0.1","nw_dst":"10.99.1.0/24",
 *             "tp_src":40000,"tp_dst":80},
 *    "value":130000}
 *
 * "group" holds only the fields of the event's granularity, in the order
 * nw_proto, nw_src, nw_dst, tp_src, tp_dst (ipv6_src and ipv6_dst for
 * IPv6); an address masked shorter than its full length carries its
 * prefix.  "value" is an integer when it is one.  "partial":true is added
 * when the interval was not fully observed (TPM_REPORT_PARTIAL).
 *
 * Thread-safety: thread-safe.
 */
#ifndef TPM_REPORT_JSON_H
#define TPM_REPORT_JSON_H 1

#include <json-c/json.h>

#include "tpm.h"

/* Returns a new JSON object for the group key 'gkey' of an event whose
 * granularity mask is 'mask'; a tenant's group ('gkey->tun' not 0) has
 * "tun_id": 'tun_id'. */
struct json_object *tpm_group_to_json(const struct tpm_key *mask,
                                      const struct tpm_key *gkey,
                                      uint32_t tun_id);

/* Returns a new JSON number for 'v': an integer if 'v' is integral. */
struct json_object *tpm_number_to_json(double v);

/* Returns a new JSON object for satisfaction report 'r' of 'event'. */
struct json_object *tpm_report_to_json(const struct tpm_event *event,
                                       const struct tpm_report *r);

#endif /* report-json.h */
