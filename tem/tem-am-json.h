/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TEM's alerts as Prometheus Alertmanager alerts (its API v2, POST
 * /api/v2/alerts takes a JSON array of them): the pure part of the
 * Alertmanager sender (tem-am.h), without sockets or threads, so that
 * tests/test-am.c checks it alone.
 *
 * One TEM alert (one line of JSON, docs/tem.md "Alerts") becomes one
 * object:
 *
 *   {"labels":{"alertname":"trumpet","event":"net_sum",
 *              "group":"nw_dst=10.99.0.2","severity":"warning"},
 *    "annotations":{"summary":"...","value":"130000",
 *                   "threshold":"120000","across":"sum",
 *                   "hosts":"{\"h1\":80000,\"h2\":50000}",
 *                   "epoch":"179532487549",
 *                   "time":"2026-11-22T05:21:15.496845Z","tem":"tem"},
 *    "startsAt":"2026-11-22T05:21:15.400000Z",
 *    "endsAt":"2026-11-22T05:26:15.400000Z"}
 *
 * Labels name the alert, and Alertmanager identifies an alert by its
 * labels: alerts of the same event and group are one alert in
 * Alertmanager, whichever interval, TEM or run of a TEM raised them.  So
 * the labels hold nothing of one TEM: "alertname" (always "trumpet"),
 * "event", "group" (the group's fields "name=value" joined by commas, in
 * the alert's order, as the TEM logs a group; "-" for an event without
 * groups), "tun_id" (the tenant's VNI, only when the group is a
 * tenant's) and "severity" (--alertmanager-severity).  Everything else
 * is an annotation, taken from the newest alert Alertmanager received:
 * the value, threshold and across= as the TEM wrote them, the per-host
 * values ("hosts": the alert's object, as JSON text), the hosts missing
 * (only when some are), the epoch, the decision's time, and "tem" (the
 * --tem-id of the TEM that sent it).  startsAt is the start of the
 * alert's interval (the epoch's end minus the event's interval), the
 * same in every TEM that decides it; endsAt is startsAt plus the resolve
 * time (--alertmanager-resolve), after which Alertmanager resolves an
 * alert that no newer one has renewed.
 *
 * Every string goes through json-c, so any character an event name, host
 * id or group field may hold is escaped.
 *
 * Thread-safety: a 'struct tem_am_format' is read-only once made;
 * tem_am_json_alert() may run in any thread.
 */
#ifndef TEM_AM_JSON_H
#define TEM_AM_JSON_H 1

#include <stddef.h>
#include <stdint.h>

#include "sbuf.h"

struct tem_am_format {
    const char *tem_id;         /* --tem-id: the "tem" annotation. */
    const char *severity;       /* The "severity" label. */
    const char *generator_url;  /* "generatorURL", or NULL for none. */
    uint64_t epoch_ns;          /* --epoch: the unit of "epoch". */
    uint64_t resolve_ns;        /* endsAt - startsAt. */
};

/* Appends to 'out' the Alertmanager alert of TEM alert 'json' ('len'
 * bytes) as one JSON object.  Returns NULL, or a malloc'd message saying
 * what 'json' lacks (then 'out' is as it was). */
char *tem_am_json_alert(const struct tem_am_format *, const char *json,
                        size_t len, struct sbuf *out);

/* Writes time 'ns' (since the Unix epoch) as "2026-11-22T05:21:15.496845Z"
 * into 'buf'. */
#define TEM_AM_TIME_LEN 32
void tem_am_json_time(uint64_t ns, char buf[TEM_AM_TIME_LEN]);

#endif /* tem-am-json.h */
