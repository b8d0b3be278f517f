/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd's v3 JSON gateway, as text (tem-etcd-json.h): base64, request
 * bodies built with json-c (which escapes), and strict parsers of the
 * answers.
 */
#include <config.h>

#include "tem-etcd-json.h"

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static const char tem_etcd_b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *
tem_etcd_b64_encode(const void *data_, size_t len)
{
    const uint8_t *data = data_;
    char *out = xmalloc((len + 2) / 3 * 4 + 1);
    char *p = out;
    size_t i;

    for (i = 0; i + 2 < len; i += 3) {
        uint32_t v = (data[i] << 16) | (data[i + 1] << 8) | data[i + 2];
        *p++ = tem_etcd_b64_alphabet[(v >> 18) & 63];
        *p++ = tem_etcd_b64_alphabet[(v >> 12) & 63];
        *p++ = tem_etcd_b64_alphabet[(v >> 6) & 63];
        *p++ = tem_etcd_b64_alphabet[v & 63];
    }
    if (i < len) {
        uint32_t v = data[i] << 16;
        if (i + 1 < len) {
            v |= data[i + 1] << 8;
        }
        *p++ = tem_etcd_b64_alphabet[(v >> 18) & 63];
        *p++ = tem_etcd_b64_alphabet[(v >> 12) & 63];
        *p++ = i + 1 < len ? tem_etcd_b64_alphabet[(v >> 6) & 63] : '=';
        *p++ = '=';
    }
    *p = '\0';
    return out;
}

static int
tem_etcd_b64_value__(char c)
{
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    } else if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    } else if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    } else if (c == '+') {
        return 62;
    } else if (c == '/') {
        return 63;
    }
    return -1;
}

char *
tem_etcd_b64_decode(const char *text, size_t len, char **outp,
                    size_t *out_lenp)
{
    *outp = NULL;
    *out_lenp = 0;
    if (len % 4) {
        return xasprintf("base64: length %zu is not a multiple of 4", len);
    }

    size_t pad = 0;
    if (len && text[len - 1] == '=') {
        pad = len >= 2 && text[len - 2] == '=' ? 2 : 1;
    }
    uint8_t *out = xmalloc(len / 4 * 3 + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i += 4) {
        uint32_t v = 0;
        for (size_t j = 0; j < 4; j++) {
            size_t at = i + j;
            int d;
            if (at >= len - pad) {
                d = 0;
            } else if ((d = tem_etcd_b64_value__(text[at])) < 0) {
                free(out);
                return xasprintf("base64: bad character at offset %zu", at);
            }
            v = (v << 6) | d;
        }
        out[n++] = v >> 16;
        out[n++] = v >> 8;
        out[n++] = v;
    }
    if (pad) {
        /* The bits under the padding must be zero (canonical form). */
        uint32_t last = tem_etcd_b64_value__(text[len - pad - 1]);
        if ((pad == 1 && (last & 3)) || (pad == 2 && (last & 15))) {
            free(out);
            return xasprintf("base64: non-zero bits before the padding");
        }
        n -= pad;
    }
    out[n] = '\0';
    *outp = (char *) out;
    *out_lenp = n;
    return NULL;
}

char *
tem_etcd_prefix_end(const char *key, size_t len, size_t *lenp)
{
    char *end = xmalloc(len + 1);
    memcpy(end, key, len);
    while (len > 0) {
        uint8_t c = end[len - 1];
        if (c < 0xff) {
            end[len - 1] = c + 1;
            *lenp = len;
            return end;
        }
        len--;
    }
    end[0] = '\0';
    *lenp = 1;
    return end;
}

/* Request bodies. */

static void
tem_etcd_add_b64__(struct json_object *o, const char *name,
                   const void *data, size_t len)
{
    char *s = tem_etcd_b64_encode(data, len);
    json_object_object_add(o, name, json_object_new_string(s));
    free(s);
}

static void
tem_etcd_add_int__(struct json_object *o, const char *name, int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%"PRId64, v);
    json_object_object_add(o, name, json_object_new_string(buf));
}

static char *
tem_etcd_finish__(struct json_object *o)
{
    char *s = xstrdup(json_object_to_json_string_ext(o,
                                                     JSON_C_TO_STRING_PLAIN));
    json_object_put(o);
    return s;
}

static struct json_object *
tem_etcd_range_obj__(const char *key, const char *range_end,
                     size_t range_end_len)
{
    struct json_object *o = json_object_new_object();
    tem_etcd_add_b64__(o, "key", key, strlen(key));
    if (range_end) {
        tem_etcd_add_b64__(o, "range_end", range_end, range_end_len);
    }
    return o;
}

char *
tem_etcd_json_range(const char *key, const char *range_end,
                    size_t range_end_len)
{
    return tem_etcd_finish__(tem_etcd_range_obj__(key, range_end,
                                                  range_end_len));
}

static struct json_object *
tem_etcd_put_obj__(const char *key, const void *value, size_t len,
                   int64_t lease)
{
    struct json_object *o = json_object_new_object();
    tem_etcd_add_b64__(o, "key", key, strlen(key));
    tem_etcd_add_b64__(o, "value", value, len);
    if (lease) {
        tem_etcd_add_int__(o, "lease", lease);
    }
    return o;
}

char *
tem_etcd_json_put(const char *key, const void *value, size_t len,
                  int64_t lease)
{
    return tem_etcd_finish__(tem_etcd_put_obj__(key, value, len, lease));
}

char *
tem_etcd_json_delete(const char *key, const char *range_end,
                     size_t range_end_len)
{
    return tem_etcd_json_range(key, range_end, range_end_len);
}

char *
tem_etcd_json_txn_put(const char *key, int64_t mod_revision,
                      const void *value, size_t len, int64_t lease)
{
    struct json_object *cmp = json_object_new_object();
    tem_etcd_add_b64__(cmp, "key", key, strlen(key));
    json_object_object_add(cmp, "result", json_object_new_string("EQUAL"));
    if (mod_revision > 0) {
        json_object_object_add(cmp, "target", json_object_new_string("MOD"));
        tem_etcd_add_int__(cmp, "mod_revision", mod_revision);
    } else {
        json_object_object_add(cmp, "target",
                               json_object_new_string("CREATE"));
        tem_etcd_add_int__(cmp, "create_revision", 0);
    }
    struct json_object *compare = json_object_new_array();
    json_object_array_add(compare, cmp);

    struct json_object *put = json_object_new_object();
    json_object_object_add(put, "request_put",
                           tem_etcd_put_obj__(key, value, len, lease));
    struct json_object *success = json_object_new_array();
    json_object_array_add(success, put);

    struct json_object *range = json_object_new_object();
    json_object_object_add(range, "request_range",
                           tem_etcd_range_obj__(key, NULL, 0));
    struct json_object *failure = json_object_new_array();
    json_object_array_add(failure, range);

    struct json_object *o = json_object_new_object();
    json_object_object_add(o, "compare", compare);
    json_object_object_add(o, "success", success);
    json_object_object_add(o, "failure", failure);
    return tem_etcd_finish__(o);
}

char *
tem_etcd_json_watch(const char *key, const char *range_end,
                    size_t range_end_len, int64_t start_revision)
{
    struct json_object *c = tem_etcd_range_obj__(key, range_end,
                                                 range_end_len);
    if (start_revision > 0) {
        tem_etcd_add_int__(c, "start_revision", start_revision);
    }
    struct json_object *o = json_object_new_object();
    json_object_object_add(o, "create_request", c);
    return tem_etcd_finish__(o);
}

char *
tem_etcd_json_lease_grant(int64_t ttl)
{
    struct json_object *o = json_object_new_object();
    tem_etcd_add_int__(o, "TTL", ttl);
    return tem_etcd_finish__(o);
}

char *
tem_etcd_json_lease_id(int64_t lease)
{
    struct json_object *o = json_object_new_object();
    tem_etcd_add_int__(o, "ID", lease);
    return tem_etcd_finish__(o);
}

/* Parsing. */

/* Parses 'text' as exactly one JSON object (whitespace around it
 * allowed) into '*objp'. */
static char *
tem_etcd_parse_object__(const char *text, size_t len,
                        struct json_object **objp)
{
    *objp = NULL;
    if (len > INT32_MAX) {
        return xasprintf("answer of %zu bytes is too long", len);
    }
    struct json_tokener *tok = json_tokener_new();
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    struct json_object *obj = json_tokener_parse_ex(tok, text, (int) len);
    enum json_tokener_error err = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);

    if (!obj) {
        if (err == json_tokener_continue || err == json_tokener_success) {
            return xasprintf("truncated JSON (%zu bytes)", len);
        }
        return xasprintf("not JSON: %s at offset %zu",
                         json_tokener_error_desc(err), end);
    }
    for (size_t i = end; i < len; i++) {
        if (!strchr(" \t\r\n", text[i])) {
            json_object_put(obj);
            return xasprintf("trailing data after the JSON object at "
                             "offset %zu", i);
        }
    }
    if (!json_object_is_type(obj, json_type_object)) {
        json_object_put(obj);
        return xasprintf("the answer is not a JSON object");
    }
    *objp = obj;
    return NULL;
}

/* An int64 field 'name' of 'o' (string or number, at least 0) into
 * '*vp'; absent: 0. */
static char *
tem_etcd_get_int__(const struct json_object *o, const char *name,
                   int64_t *vp)
{
    struct json_object *f;

    *vp = 0;
    if (!json_object_object_get_ex(o, name, &f) || !f) {
        return NULL;
    }
    if (json_object_is_type(f, json_type_int)) {
        int64_t v = json_object_get_int64(f);
        if (v < 0 || v == INT64_MAX) {
            return xasprintf("\"%s\" out of range", name);
        }
        *vp = v;
        return NULL;
    }
    if (!json_object_is_type(f, json_type_string)) {
        return xasprintf("\"%s\" is not an integer", name);
    }
    const char *s = json_object_get_string(f);
    size_t n = json_object_get_string_len(f);
    if (n == 0 || n > 19 || strspn(s, "0123456789") != n) {
        return xasprintf("\"%s\" is not an integer", name);
    }
    errno = 0;
    long long v = strtoll(s, NULL, 10);
    if (errno) {
        return xasprintf("\"%s\" out of range", name);
    }
    *vp = v;
    return NULL;
}

/* Member 'name' of 'o' if it has type 'type'; absent or null: NULL and no
 * error. */
static char *
tem_etcd_get_typed__(const struct json_object *o, const char *name,
                     enum json_type type, struct json_object **fp)
{
    struct json_object *f;

    *fp = NULL;
    if (!json_object_object_get_ex(o, name, &f) || !f) {
        return NULL;
    }
    if (!json_object_is_type(f, type)) {
        return xasprintf("\"%s\" is not a%s %s", name,
                         type == json_type_object
                         || type == json_type_array ? "n" : "",
                         json_type_to_name(type));
    }
    *fp = f;
    return NULL;
}

static char *
tem_etcd_get_bool__(const struct json_object *o, const char *name,
                    bool *vp)
{
    struct json_object *f;
    char *error = tem_etcd_get_typed__(o, name, json_type_boolean, &f);
    *vp = f && json_object_get_boolean(f);
    return error;
}

/* An error answer of etcd: {"error":"...","code":N} or, in a stream,
 * {"error":{"grpc_code":N,"message":"..."}}.  Returns NULL if 'o' is not
 * one. */
static char *
tem_etcd_parse_error__(const struct json_object *o,
                       struct tem_etcd_result *r)
{
    struct json_object *e;
    int64_t code = 0;
    const char *msg = "(no message)";

    if (!json_object_object_get_ex(o, "error", &e) || !e) {
        return NULL;
    }
    if (json_object_is_type(e, json_type_object)) {
        struct json_object *m;
        char *error = tem_etcd_get_int__(e, "grpc_code", &code);
        if (error) {
            free(error);
            code = 0;
        }
        if (json_object_object_get_ex(e, "message", &m)
            && json_object_is_type(m, json_type_string)) {
            msg = json_object_get_string(m);
        }
    } else {
        char *error = tem_etcd_get_int__(o, "code", &code);
        if (error) {
            free(error);
            code = 0;
        }
        if (json_object_is_type(e, json_type_string)) {
            msg = json_object_get_string(e);
        }
    }
    r->etcd_code = code > 0 && code < 100 ? (int) code : 0;
    return xasprintf("etcd: %s (code %"PRId64")", msg, code);
}

static char *
tem_etcd_parse_header__(const struct json_object *o,
                        struct tem_etcd_result *r)
{
    struct json_object *h;
    char *error = tem_etcd_get_typed__(o, "header", json_type_object, &h);
    if (error) {
        return error;
    }
    if (!h) {
        return xasprintf("no \"header\"");
    }
    return tem_etcd_get_int__(h, "revision", &r->revision);
}

/* A base64 field 'name' of 'o' into '*outp' / '*lenp' (absent: empty). */
static char *
tem_etcd_get_b64__(const struct json_object *o, const char *name,
                   char **outp, size_t *lenp)
{
    struct json_object *f;
    char *error = tem_etcd_get_typed__(o, name, json_type_string, &f);
    if (error) {
        return error;
    }
    if (!f) {
        *outp = xstrdup("");
        *lenp = 0;
        return NULL;
    }
    error = tem_etcd_b64_decode(json_object_get_string(f),
                                json_object_get_string_len(f), outp, lenp);
    if (error) {
        char *e = xasprintf("\"%s\": %s", name, error);
        free(error);
        return e;
    }
    return NULL;
}

static char *
tem_etcd_parse_kv__(const struct json_object *o, struct tem_etcd_kv *kv)
{
    size_t key_len;
    char *error;

    if (!json_object_is_type(o, json_type_object)) {
        return xasprintf("a key-value is not an object");
    }
    error = tem_etcd_get_b64__(o, "key", &kv->key, &key_len);
    if (error) {
        return error;
    }
    if (key_len == 0 || strlen(kv->key) != key_len) {
        return xasprintf("a key is empty or holds a NUL byte");
    }
    error = tem_etcd_get_b64__(o, "value", &kv->value, &kv->value_len);
    if (!error) {
        error = tem_etcd_get_int__(o, "create_revision",
                                   &kv->create_revision);
    }
    if (!error) {
        error = tem_etcd_get_int__(o, "mod_revision", &kv->mod_revision);
    }
    if (!error) {
        error = tem_etcd_get_int__(o, "version", &kv->version);
    }
    if (!error) {
        error = tem_etcd_get_int__(o, "lease", &kv->lease);
    }
    return error;
}

/* Appends the key-values of array 'name' of 'o' to 'r->kvs'. */
static char *
tem_etcd_parse_kvs__(const struct json_object *o, const char *name,
                     struct tem_etcd_result *r)
{
    struct json_object *a;
    char *error = tem_etcd_get_typed__(o, name, json_type_array, &a);
    if (error || !a) {
        return error;
    }
    size_t n = json_object_array_length(a);
    r->kvs = xrealloc(r->kvs, (r->n_kvs + n) * sizeof *r->kvs);
    for (size_t i = 0; i < n; i++) {
        struct tem_etcd_kv *kv = &r->kvs[r->n_kvs++];
        memset(kv, 0, sizeof *kv);
        error = tem_etcd_parse_kv__(json_object_array_get_idx(a, i), kv);
        if (error) {
            char *e = xasprintf("%s[%zu]: %s", name, i, error);
            free(error);
            return e;
        }
    }
    return NULL;
}

/* Parses 'text' into '*objp', checks it is not an error answer, and
 * parses its header (unless 'body' names the member that holds it). */
static char *
tem_etcd_parse_start__(const char *text, size_t len, const char *body,
                       struct tem_etcd_result *r, struct json_object **objp,
                       struct json_object **bodyp)
{
    struct json_object *obj;
    char *error = tem_etcd_parse_object__(text, len, &obj);
    *objp = obj;
    *bodyp = obj;
    if (error) {
        return error;
    }
    error = tem_etcd_parse_error__(obj, r);
    if (error) {
        return error;
    }
    if (body) {
        error = tem_etcd_get_typed__(obj, body, json_type_object, bodyp);
        if (error) {
            return error;
        }
        if (!*bodyp) {
            return xasprintf("no \"%s\"", body);
        }
        error = tem_etcd_parse_error__(*bodyp, r);
        if (error) {
            return error;
        }
    }
    return tem_etcd_parse_header__(*bodyp, r);
}

char *
tem_etcd_parse_range(const char *text, size_t len,
                     struct tem_etcd_result *r)
{
    struct json_object *obj, *body;
    char *error = tem_etcd_parse_start__(text, len, NULL, r, &obj, &body);
    if (!error) {
        error = tem_etcd_parse_kvs__(body, "kvs", r);
    }
    if (!error) {
        error = tem_etcd_get_int__(body, "count", &r->count);
    }
    if (!error && r->count < (int64_t) r->n_kvs) {
        error = xasprintf("\"count\" %"PRId64" is below the %zu keys "
                          "returned", r->count, r->n_kvs);
    }
    json_object_put(obj);
    return error;
}

char *
tem_etcd_parse_put(const char *text, size_t len, struct tem_etcd_result *r)
{
    struct json_object *obj, *body;
    char *error = tem_etcd_parse_start__(text, len, NULL, r, &obj, &body);
    json_object_put(obj);
    return error;
}

char *
tem_etcd_parse_delete(const char *text, size_t len,
                      struct tem_etcd_result *r)
{
    struct json_object *obj, *body;
    char *error = tem_etcd_parse_start__(text, len, NULL, r, &obj, &body);
    if (!error) {
        error = tem_etcd_get_int__(body, "deleted", &r->deleted);
    }
    json_object_put(obj);
    return error;
}

char *
tem_etcd_parse_txn(const char *text, size_t len, struct tem_etcd_result *r)
{
    struct json_object *obj, *body, *a;
    char *error = tem_etcd_parse_start__(text, len, NULL, r, &obj, &body);
    if (!error) {
        error = tem_etcd_get_bool__(body, "succeeded", &r->succeeded);
    }
    if (!error) {
        error = tem_etcd_get_typed__(body, "responses", json_type_array, &a);
    }
    if (!error && !r->succeeded) {
        /* The failure branch is one range: its key-values. */
        if (!a || json_object_array_length(a) != 1) {
            error = xasprintf("a failed txn without its one range");
        } else {
            struct json_object *resp = json_object_array_get_idx(a, 0);
            struct json_object *range = NULL;
            if (!json_object_is_type(resp, json_type_object)) {
                error = xasprintf("\"responses\"[0] is not an object");
            } else {
                error = tem_etcd_get_typed__(resp, "response_range",
                                             json_type_object, &range);
            }
            if (!error && !range) {
                error = xasprintf("\"responses\"[0] is not a range");
            }
            if (!error) {
                error = tem_etcd_parse_kvs__(range, "kvs", r);
            }
        }
    }
    json_object_put(obj);
    return error;
}

char *
tem_etcd_parse_lease_grant(const char *text, size_t len,
                           struct tem_etcd_result *r)
{
    struct json_object *obj, *body;
    char *error = tem_etcd_parse_start__(text, len, NULL, r, &obj, &body);
    if (!error) {
        error = tem_etcd_get_int__(body, "ID", &r->lease);
    }
    if (!error) {
        error = tem_etcd_get_int__(body, "TTL", &r->ttl);
    }
    if (!error && (r->lease == 0 || r->ttl == 0)) {
        error = xasprintf("a lease grant without ID or TTL");
    }
    json_object_put(obj);
    return error;
}

char *
tem_etcd_parse_keepalive(const char *text, size_t len,
                         struct tem_etcd_result *r)
{
    struct json_object *obj, *body;
    char *error = tem_etcd_parse_start__(text, len, "result", r, &obj,
                                         &body);
    if (!error) {
        error = tem_etcd_get_int__(body, "ID", &r->lease);
    }
    if (!error) {
        error = tem_etcd_get_int__(body, "TTL", &r->ttl);
    }
    json_object_put(obj);
    return error;
}

char *
tem_etcd_parse_watch(const char *text, size_t len,
                     enum tem_etcd_watch_msg *msgp,
                     struct tem_etcd_result *r)
{
    struct json_object *obj, *body, *events;
    bool created = false, canceled = false;

    *msgp = TEM_ETCD_WATCH_MSG_EVENTS;
    char *error = tem_etcd_parse_start__(text, len, "result", r, &obj,
                                         &body);
    if (!error) {
        error = tem_etcd_get_bool__(body, "created", &created);
    }
    if (!error) {
        error = tem_etcd_get_bool__(body, "canceled", &canceled);
    }
    if (!error && canceled) {
        struct json_object *reason;
        *msgp = TEM_ETCD_WATCH_CANCELED;
        error = tem_etcd_get_int__(body, "compact_revision",
                                   &r->compact_revision);
        if (!error && json_object_object_get_ex(body, "cancel_reason",
                                                &reason)
            && json_object_is_type(reason, json_type_string)) {
            r->message = xstrdup(json_object_get_string(reason));
        }
    } else if (!error && created) {
        *msgp = TEM_ETCD_WATCH_CREATED;
    }
    if (!error) {
        error = tem_etcd_get_typed__(body, "events", json_type_array,
                                     &events);
    }
    if (!error && events) {
        size_t n = json_object_array_length(events);
        r->kvs = xrealloc(r->kvs, (r->n_kvs + n) * sizeof *r->kvs);
        for (size_t i = 0; i < n && !error; i++) {
            struct json_object *ev = json_object_array_get_idx(events, i);
            struct json_object *kv, *type;
            struct tem_etcd_kv *x = &r->kvs[r->n_kvs++];

            memset(x, 0, sizeof *x);
            if (!json_object_is_type(ev, json_type_object)) {
                error = xasprintf("events[%zu] is not an object", i);
                break;
            }
            error = tem_etcd_get_typed__(ev, "type", json_type_string,
                                         &type);
            if (!error && type) {
                const char *t = json_object_get_string(type);
                if (!strcmp(t, "DELETE")) {
                    x->deleted = true;
                } else if (strcmp(t, "PUT")) {
                    error = xasprintf("events[%zu]: type \"%s\"", i, t);
                }
            }
            if (!error) {
                error = tem_etcd_get_typed__(ev, "kv", json_type_object,
                                             &kv);
            }
            if (!error && !kv) {
                error = xasprintf("events[%zu] without \"kv\"", i);
            }
            if (!error) {
                error = tem_etcd_parse_kv__(kv, x);
            }
            if (!error && x->mod_revision == 0) {
                error = xasprintf("events[%zu] without mod_revision", i);
            }
            if (!error && i && x->mod_revision < x[-1].mod_revision) {
                error = xasprintf("events[%zu] out of revision order", i);
            }
        }
    }
    json_object_put(obj);
    return error;
}
