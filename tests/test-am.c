/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TEM's alerts as Alertmanager alerts (tem/tem-am-json.h): labels
 * that name the alert and nothing of the TEM that sent it, annotations
 * with the TEM's own numbers, startsAt and endsAt from the interval,
 * groups with and without tenants, and escaping of any character an event
 * name or host id may hold (the output is parsed back with json-c).
 */
#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbuf.h"
#include "tem-am-json.h"
#include "test-util.h"
#include "util.h"

#define EPOCH_NS 10000000ULL

/* An alert as the TEM writes it (docs/tem.md, "Alerts"). */
static const char sum_alert[] =
    "{\"event\":\"net_sum\",\"id\":2,\"epoch\":179532487549,"
    "\"interval_ns\":100000000,\"group\":{\"nw_dst\":\"10.99.0.2\"},"
    "\"value\":130000,\"threshold\":120000,\"across\":\"sum\","
    "\"hosts\":{\"h1\":80000,\"h2\":50000},\"missing\":[],"
    "\"incomplete\":[],\"deadline\":false,\"late\":false,"
    "\"latency_us\":300,\"time\":\"2026-11-22T05:21:15.496845Z\","
    "\"time_ns\":1795324875496845876,\"seq\":42}";

static struct tem_am_format
test_am_format(void)
{
    return (struct tem_am_format) {
        .tem_id = "tem-a", .severity = "warning", .generator_url = NULL,
        .epoch_ns = EPOCH_NS, .resolve_ns = 300000000000ULL,
    };
}

/* Converts 'json' with 'f' and parses the result back (which must be one
 * JSON object and nothing else). */
static struct json_object *
test_am_convert(const struct tem_am_format *f, const char *json)
{
    struct sbuf b = SBUF_INITIALIZER;
    char *error = tem_am_json_alert(f, json, strlen(json), &b);
    ck_assert_msg(!error, "%s", error ? error : "");
    for (size_t i = 0; i < b.len; i++) {
        ck_assert_msg((unsigned char) b.s[i] >= 0x20,
                      "raw control character 0x%02x at %zu in %s",
                      (unsigned char) b.s[i], i, b.s);
    }
    struct json_tokener *tok = json_tokener_new();
    struct json_object *o = json_tokener_parse_ex(tok, b.s, b.len);
    ck_assert_msg(o && json_tokener_get_error(tok) == json_tokener_success
                  && json_object_is_type(o, json_type_object),
                  "not one JSON object: %s", b.s);
    ck_assert_int_eq(json_tokener_get_parse_end(tok), b.len);
    json_tokener_free(tok);
    sbuf_destroy(&b);
    return o;
}

static struct json_object *
test_am_get(struct json_object *o, const char *key)
{
    struct json_object *v = NULL;
    ck_assert_msg(json_object_object_get_ex(o, key, &v), "no \"%s\" in %s",
                  key, json_object_to_json_string(o));
    return v;
}

static const char *
test_am_str(struct json_object *o, const char *key)
{
    struct json_object *v = test_am_get(o, key);
    ck_assert_msg(json_object_is_type(v, json_type_string),
                  "\"%s\" is not a string", key);
    return json_object_get_string(v);
}

/* Checks that object 'o' has exactly the keys of the NULL-terminated
 * 'keys' (in any order). */
static void
test_am_keys(struct json_object *o, const char *const *keys)
{
    size_t n = 0;
    for (; keys[n]; n++) {
        test_am_get(o, keys[n]);
    }
    ck_assert_int_eq(json_object_object_length(o), n);
}

START_TEST(test_am_sum)
{
    struct tem_am_format f = test_am_format();
    struct json_object *a = test_am_convert(&f, sum_alert);
    static const char *const top[] = { "labels", "annotations", "startsAt",
                                       "endsAt", NULL };
    static const char *const label_keys[] = { "alertname", "event",
                                              "group", "severity", NULL };
    test_am_keys(a, top);

    struct json_object *l = test_am_get(a, "labels");
    test_am_keys(l, label_keys);
    ck_assert_str_eq(test_am_str(l, "alertname"), "trumpet");
    ck_assert_str_eq(test_am_str(l, "event"), "net_sum");
    ck_assert_str_eq(test_am_str(l, "group"), "nw_dst=10.99.0.2");
    ck_assert_str_eq(test_am_str(l, "severity"), "warning");

    struct json_object *n = test_am_get(a, "annotations");
    ck_assert_str_eq(test_am_str(n, "value"), "130000");
    ck_assert_str_eq(test_am_str(n, "threshold"), "120000");
    ck_assert_str_eq(test_am_str(n, "across"), "sum");
    ck_assert_str_eq(test_am_str(n, "hosts"), "{\"h1\":80000,\"h2\":50000}");
    ck_assert_str_eq(test_am_str(n, "epoch"), "179532487549");
    ck_assert_str_eq(test_am_str(n, "time"), "2026-11-22T05:21:15.496845Z");
    ck_assert_str_eq(test_am_str(n, "tem"), "tem-a");
    ck_assert_str_eq(test_am_str(n, "summary"), "Trumpet event net_sum on "
                     "group nw_dst=10.99.0.2: value 130000, threshold "
                     "120000");
    ck_assert(!json_object_object_get_ex(n, "missing", NULL));

    /* Epoch 179532487549 ends at 1795324875500000000 ns; the interval
     * (100 ms) started 100 ms before. */
    ck_assert_str_eq(test_am_str(a, "startsAt"),
                     "2026-11-22T05:21:15.400000Z");
    ck_assert_str_eq(test_am_str(a, "endsAt"),
                     "2026-11-22T05:26:15.400000Z");
    json_object_put(a);
}
END_TEST

/* Labels are the alert's name only: the same event and group from
 * another TEM, epoch or run give the same labels (Alertmanager merges
 * them), annotations tell them apart. */
START_TEST(test_am_dedup_labels)
{
    struct tem_am_format f1 = test_am_format(), f2 = test_am_format();
    f2.tem_id = "tem-b";
    static const char later[] =
        "{\"event\":\"net_sum\",\"id\":7,\"epoch\":179532487559,"
        "\"interval_ns\":100000000,\"group\":{\"nw_dst\":\"10.99.0.2\"},"
        "\"value\":131000,\"threshold\":120000,\"across\":\"sum\","
        "\"hosts\":{\"h1\":81000,\"h2\":50000},\"missing\":[],"
        "\"time\":\"2026-11-22T05:21:15.596845Z\",\"seq\":1}";
    struct json_object *a = test_am_convert(&f1, sum_alert);
    struct json_object *b = test_am_convert(&f2, later);

    ck_assert(json_object_equal(test_am_get(a, "labels"),
                                test_am_get(b, "labels")));
    ck_assert(!json_object_equal(test_am_get(a, "annotations"),
                                 test_am_get(b, "annotations")));
    ck_assert_str_eq(test_am_str(test_am_get(b, "annotations"), "tem"),
                     "tem-b");
    ck_assert_str_eq(test_am_str(b, "startsAt"),
                     "2026-11-22T05:21:15.500000Z");
    json_object_put(a);
    json_object_put(b);
}
END_TEST

START_TEST(test_am_tenant)
{
    struct tem_am_format f = test_am_format();
    static const char alert[] =
        "{\"event\":\"t\",\"epoch\":100,\"interval_ns\":10000000,"
        "\"group\":{\"nw_src\":\"192.168.0.1\",\"nw_dst\":\"192.168.0.2\","
        "\"tun_id\":5001},\"value\":3,\"threshold\":2,"
        "\"hosts\":{\"a\":1,\"b\":2},\"missing\":[\"c\",\"d\"]}";
    struct json_object *a = test_am_convert(&f, alert);
    struct json_object *l = test_am_get(a, "labels");
    static const char *const keys[] = { "alertname", "event", "group",
                                        "tun_id", "severity", NULL };

    test_am_keys(l, keys);
    ck_assert_str_eq(test_am_str(l, "group"), "nw_src=192.168.0.1,"
                     "nw_dst=192.168.0.2,tun_id=5001");
    ck_assert_str_eq(test_am_str(l, "tun_id"), "5001");
    ck_assert_str_eq(test_am_str(test_am_get(a, "annotations"), "missing"),
                     "c,d");
    /* Epoch 100 of 10 ms ends at 1.01 s; its interval is one epoch. */
    ck_assert_str_eq(test_am_str(a, "startsAt"),
                     "1970-01-01T00:00:01.000000Z");
    json_object_put(a);

    /* Tenant 0 is a tenant too. */
    static const char zero[] =
        "{\"event\":\"t\",\"epoch\":100,\"interval_ns\":10000000,"
        "\"group\":{\"tp_dst\":53,\"tun_id\":0},\"value\":3}";
    a = test_am_convert(&f, zero);
    l = test_am_get(a, "labels");
    ck_assert_str_eq(test_am_str(l, "group"), "tp_dst=53,tun_id=0");
    ck_assert_str_eq(test_am_str(l, "tun_id"), "0");
    json_object_put(a);
}
END_TEST

/* Groups as the TEM prints them: the fields in the alert's order,
 * integers as integers, prefixes and IPv6 kept; "-" without a group. */
START_TEST(test_am_groups)
{
    struct tem_am_format f = test_am_format();
    static const struct {
        const char *group, *label;
    } cases[] = {
        { "{}", "-" },
        { "{\"nw_proto\":17,\"nw_src\":\"10.0.0.1\",\"nw_dst\":\"10.0.0.2\","
          "\"tp_src\":1234,\"tp_dst\":80}",
          "nw_proto=17,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=1234,"
          "tp_dst=80" },
        { "{\"nw_dst\":\"10.1.0.0/16\"}", "nw_dst=10.1.0.0/16" },
        { "{\"ipv6_src\":\"fe80::1\",\"ipv6_dst\":\"2001:db8::/32\"}",
          "ipv6_src=fe80::1,ipv6_dst=2001:db8::/32" },
    };

    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char *alert = xasprintf("{\"event\":\"g\",\"epoch\":5,"
                                "\"interval_ns\":10000000,\"group\":%s,"
                                "\"value\":1}", cases[i].group);
        struct json_object *a = test_am_convert(&f, alert);
        struct json_object *l = test_am_get(a, "labels");
        ck_assert_str_eq(test_am_str(l, "group"), cases[i].label);
        ck_assert(!json_object_object_get_ex(l, "tun_id", NULL));
        json_object_put(a);
        free(alert);
    }
}
END_TEST

/* Whatever an event name, host id or group field holds comes back the
 * same from the JSON: quotes, backslashes, control characters, slashes,
 * UTF-8. */
START_TEST(test_am_escaping)
{
    struct tem_am_format f = test_am_format();
    f.severity = "page";
    f.generator_url = "http://tem.example:9464/alerts?a=1&b=\"2\"";
    static const char alert[] =
        "{\"event\":\"ev\\\"il\\\\\\n\\t\\u0001</x>\","
        "\"epoch\":5,\"interval_ns\":10000000,"
        "\"group\":{\"nw_dst\":\"a\\\"b\\\\c\\nd\"},"
        "\"value\":0.30000000000000004,"
        "\"threshold\":null,"
        "\"hosts\":{\"h\\\"1\\n\":1.5,\"caf\\u00e9\":2},"
        "\"missing\":[\"m\\\"\\u0002\"],\"time\":\"t\\\\\"}";
    struct json_object *a = test_am_convert(&f, alert);
    struct json_object *l = test_am_get(a, "labels");
    struct json_object *n = test_am_get(a, "annotations");

    ck_assert_str_eq(test_am_str(l, "event"), "ev\"il\\\n\t\001</x>");
    ck_assert_str_eq(test_am_str(l, "group"), "nw_dst=a\"b\\c\nd");
    ck_assert_str_eq(test_am_str(l, "severity"), "page");
    ck_assert_str_eq(test_am_str(n, "value"), "0.30000000000000004");
    ck_assert_str_eq(test_am_str(n, "threshold"), "null");
    ck_assert_str_eq(test_am_str(n, "missing"), "m\"\002");
    ck_assert_str_eq(test_am_str(n, "time"), "t\\");
    ck_assert_str_eq(test_am_str(n, "summary"), "Trumpet event "
                     "ev\"il\\\n\t\001</x> on group nw_dst=a\"b\\c\nd: "
                     "value 0.30000000000000004");
    ck_assert_str_eq(test_am_str(a, "generatorURL"), f.generator_url);

    /* "hosts" is JSON text of its own: parsed, the same ids and values. */
    struct json_object *h = json_tokener_parse(test_am_str(n, "hosts"));
    ck_assert(h);
    ck_assert_int_eq(json_object_object_length(h), 2);
    ck_assert(json_object_get_double(test_am_get(h, "h\"1\n")) == 1.5);
    ck_assert_int_eq(json_object_get_int(test_am_get(h, "caf\xc3\xa9")), 2);
    json_object_put(h);
    json_object_put(a);
}
END_TEST

START_TEST(test_am_errors)
{
    struct tem_am_format f = test_am_format();
    static const char *const bad[] = {
        "", "not json", "[1,2]", "{\"event\":\"e\"}",
        "{\"event\":1,\"epoch\":1,\"interval_ns\":1,\"group\":{},"
        "\"value\":1}",
        "{\"event\":\"e\",\"epoch\":1,\"interval_ns\":1,\"group\":[],"
        "\"value\":1}",
        "{\"event\":\"e\",\"epoch\":1,\"interval_ns\":1,\"group\":{}}",
        "{\"event\":\"e\",\"epoch\":-1,\"interval_ns\":1,\"group\":{},"
        "\"value\":1}",
        "{\"event\":\"e\",\"epoch\":1,\"interval_ns\":1,\"group\":{},"
        "\"value\":1",
    };
    struct sbuf b = SBUF_INITIALIZER;

    sbuf_str(&b, "[");
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        char *error = tem_am_json_alert(&f, bad[i], strlen(bad[i]), &b);
        ck_assert_msg(error, "no error for '%s'", bad[i]);
        free(error);
        ck_assert_int_eq(b.len, 1);
    }
    sbuf_destroy(&b);
}
END_TEST

START_TEST(test_am_time)
{
    char buf[TEM_AM_TIME_LEN];

    tem_am_json_time(0, buf);
    ck_assert_str_eq(buf, "1970-01-01T00:00:00.000000Z");
    tem_am_json_time(1795324875496845876ULL, buf);
    ck_assert_str_eq(buf, "2026-11-22T05:21:15.496845Z");
}
END_TEST

static Suite *
am_suite(void)
{
    Suite *s = suite_create("am");
    TCase *tc = tcase_create("json");
    tcase_add_test(tc, test_am_sum);
    tcase_add_test(tc, test_am_dedup_labels);
    tcase_add_test(tc, test_am_tenant);
    tcase_add_test(tc, test_am_groups);
    tcase_add_test(tc, test_am_escaping);
    tcase_add_test(tc, test_am_errors);
    tcase_add_test(tc, test_am_time);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return test_run_suite(am_suite());
}
