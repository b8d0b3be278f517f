/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TEM's alerts as Alertmanager alerts (tem-am-json.h).
 *
 * The TEM's alert is parsed with json-c (the sender's thread does this,
 * never the TEM's loop) and the Alertmanager alert built as a json-c
 * object, so that escaping is json-c's.  Numbers keep the text the TEM
 * wrote: json-c's parser keeps a double's text for printing it again.
 */
#include "tem-am-json.h"

#include <inttypes.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util.h"

#define NS_PER_S 1000000000ULL

void
tem_am_json_time(uint64_t ns, char buf[TEM_AM_TIME_LEN])
{
    time_t secs = ns / NS_PER_S;
    struct tm tm;
    char date[24];

    gmtime_r(&secs, &tm);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, TEM_AM_TIME_LEN, "%s.%06uZ", date,
             (unsigned int) (ns % NS_PER_S / 1000));
}

/* Returns member 'key' of 'o' if it is of 'type', else NULL. */
static struct json_object *
tem_am_json_get__(struct json_object *o, const char *key, json_type type)
{
    struct json_object *v;
    return (json_object_object_get_ex(o, key, &v)
            && json_object_is_type(v, type)) ? v : NULL;
}

/* The text of number (or null) 'v' as the TEM wrote it. */
static const char *
tem_am_json_number__(struct json_object *v)
{
    return json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN);
}

static void
tem_am_json_add_str__(struct json_object *o, const char *key,
                      const char *value)
{
    json_object_object_add(o, key, json_object_new_string(value));
}

/* Appends to 'b' the fields of 'group' as "name=value,...", or "-" if it
 * has none; stores its "tun_id" in '*tun_id' (-1: none). */
static void
tem_am_json_group__(struct json_object *group, struct sbuf *b,
                    int64_t *tun_id)
{
    *tun_id = -1;
    json_object_object_foreach(group, key, val) {
        if (b->len) {
            sbuf_put(b, ",", 1);
        }
        sbuf_str(b, key);
        sbuf_put(b, "=", 1);
        sbuf_str(b, json_object_get_string(val));
        if (!strcmp(key, "tun_id")
            && json_object_is_type(val, json_type_int)) {
            *tun_id = json_object_get_int64(val);
        }
    }
    if (!b->len) {
        sbuf_put(b, "-", 1);
    }
}

/* Appends the strings of array 'a' to 'b', separated by commas. */
static void
tem_am_json_list__(struct json_object *a, struct sbuf *b)
{
    size_t n = json_object_array_length(a);
    for (size_t i = 0; i < n; i++) {
        if (i) {
            sbuf_put(b, ",", 1);
        }
        sbuf_str(b, json_object_get_string(json_object_array_get_idx(a, i)));
    }
}

/* Builds the Alertmanager alert of TEM alert 'a' (checked). */
static struct json_object *
tem_am_json_build__(const struct tem_am_format *f, struct json_object *a,
                    const char *event, struct json_object *group,
                    uint64_t epoch, uint64_t interval_ns,
                    struct json_object *value)
{
    struct json_object *r = json_object_new_object();
    struct json_object *labels = json_object_new_object();
    struct json_object *ann = json_object_new_object();
    struct json_object *v;
    struct sbuf b = SBUF_INITIALIZER;
    char num[32], ts[TEM_AM_TIME_LEN];
    int64_t tun_id;

    tem_am_json_group__(group, &b, &tun_id);
    tem_am_json_add_str__(labels, "alertname", "trumpet");
    tem_am_json_add_str__(labels, "event", event);
    tem_am_json_add_str__(labels, "group", b.s);
    if (tun_id >= 0) {
        snprintf(num, sizeof num, "%"PRId64, tun_id);
        tem_am_json_add_str__(labels, "tun_id", num);
    }
    tem_am_json_add_str__(labels, "severity", f->severity);
    json_object_object_add(r, "labels", labels);

    /* "summary": one line for receivers that show only that. */
    struct sbuf s = SBUF_INITIALIZER;
    sbuf_str(&s, "Trumpet event ");
    sbuf_str(&s, event);
    sbuf_str(&s, " on group ");
    sbuf_str(&s, b.s);
    sbuf_str(&s, ": value ");
    sbuf_str(&s, tem_am_json_number__(value));
    v = tem_am_json_get__(a, "threshold", json_type_null)
        ? NULL : json_object_object_get(a, "threshold");
    if (v) {
        sbuf_str(&s, ", threshold ");
        sbuf_str(&s, tem_am_json_number__(v));
    }
    tem_am_json_add_str__(ann, "summary", s.s);
    sbuf_destroy(&s);

    tem_am_json_add_str__(ann, "value", tem_am_json_number__(value));
    if (json_object_object_get_ex(a, "threshold", &v)) {
        tem_am_json_add_str__(ann, "threshold", tem_am_json_number__(v));
    }
    if ((v = tem_am_json_get__(a, "across", json_type_string))) {
        tem_am_json_add_str__(ann, "across", json_object_get_string(v));
    }
    if ((v = tem_am_json_get__(a, "hosts", json_type_object))) {
        tem_am_json_add_str__(ann, "hosts", json_object_to_json_string_ext(
                                  v, JSON_C_TO_STRING_PLAIN
                                     | JSON_C_TO_STRING_NOSLASHESCAPE));
    }
    if ((v = tem_am_json_get__(a, "missing", json_type_array))
        && json_object_array_length(v)) {
        sbuf_clear(&b);
        tem_am_json_list__(v, &b);
        tem_am_json_add_str__(ann, "missing", b.s);
    }
    snprintf(num, sizeof num, "%"PRIu64, epoch);
    tem_am_json_add_str__(ann, "epoch", num);
    if ((v = tem_am_json_get__(a, "time", json_type_string))) {
        tem_am_json_add_str__(ann, "time", json_object_get_string(v));
    }
    tem_am_json_add_str__(ann, "tem", f->tem_id);
    json_object_object_add(r, "annotations", ann);
    sbuf_destroy(&b);

    /* The interval ends with its last epoch. */
    uint64_t end = (epoch + 1) * f->epoch_ns;
    uint64_t start = end > interval_ns ? end - interval_ns : 0;
    tem_am_json_time(start, ts);
    tem_am_json_add_str__(r, "startsAt", ts);
    tem_am_json_time(start + f->resolve_ns, ts);
    tem_am_json_add_str__(r, "endsAt", ts);
    if (f->generator_url) {
        tem_am_json_add_str__(r, "generatorURL", f->generator_url);
    }
    return r;
}

char *
tem_am_json_alert(const struct tem_am_format *f, const char *json,
                  size_t len, struct sbuf *out)
{
    struct json_tokener *tok = json_tokener_new();
    struct json_object *a = json_tokener_parse_ex(tok, json, len);
    char *error = NULL;

    if (!a || json_tokener_get_error(tok) != json_tokener_success
        || !json_object_is_type(a, json_type_object)) {
        error = xstrdup("not a JSON object");
        goto out;
    }
    struct json_object *event = tem_am_json_get__(a, "event",
                                                  json_type_string);
    struct json_object *epoch = tem_am_json_get__(a, "epoch", json_type_int);
    struct json_object *interval = tem_am_json_get__(a, "interval_ns",
                                                     json_type_int);
    struct json_object *group = tem_am_json_get__(a, "group",
                                                  json_type_object);
    struct json_object *value;
    if (!event || !epoch || !interval || !group
        || !json_object_object_get_ex(a, "value", &value)) {
        error = xstrdup("an alert needs \"event\", \"epoch\", "
                        "\"interval_ns\", \"group\" and \"value\"");
        goto out;
    }
    int64_t ep = json_object_get_int64(epoch);
    int64_t iv = json_object_get_int64(interval);
    if (ep < 0 || iv < 0 || (uint64_t) ep >= UINT64_MAX / f->epoch_ns - 1) {
        error = xstrdup("\"epoch\" or \"interval_ns\" out of range");
        goto out;
    }

    struct json_object *r = tem_am_json_build__(f, a,
                                                json_object_get_string(event),
                                                group, ep, iv, value);
    sbuf_str(out, json_object_to_json_string_ext(
                 r, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(r);
out:
    json_object_put(a);
    json_tokener_free(tok);
    return error;
}
