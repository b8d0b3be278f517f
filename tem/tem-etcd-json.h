/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd's v3 JSON gateway, as text: the request bodies the TEM's etcd
 * client (tem-etcd.h) sends and the parsers of etcd's answers, with no
 * I/O, so that tests/test-etcd.c checks them on any input.
 *
 * The gateway speaks protobuf's JSON mapping: keys and values are base64
 * (RFC 4648, padded), 64-bit integers are strings ("revision":"12"),
 * fields at their default value are left out (no "kvs" for an empty
 * range, no "succeeded" for a failed txn, no "TTL" for an expired lease),
 * and an error is {"error":"...","message":"...","code":N} (a streaming
 * one: {"error":{"grpc_code":N,"message":"..."}}).  The parsers accept
 * integers as strings or numbers and reject everything else: a field of
 * the wrong type, an integer out of range, bad base64, a key with a NUL,
 * anything that is not one JSON object.
 *
 * Every parser returns NULL, or an error message (caller frees) that says
 * what was wrong; on error the result may hold part of the answer, which
 * tem_etcd_result_free() frees.  An answer that is etcd's error object
 * sets 'etcd_code' and returns "etcd: MESSAGE".
 *
 * Thread-safety: every function is thread-safe.
 */
#ifndef TEM_ETCD_JSON_H
#define TEM_ETCD_JSON_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tem-etcd.h"

/* Base64 (standard alphabet, padded).  The encoder returns a malloc'd
 * string.  The decoder takes exactly 'len' characters and returns NULL
 * and in '*outp' 'out_len' bytes and a NUL (caller frees), or an error:
 * a character outside the alphabet, a length not a multiple of 4, padding
 * anywhere but at the end, non-zero bits under the padding. */
char *tem_etcd_b64_encode(const void *data, size_t len);
char *tem_etcd_b64_decode(const char *text, size_t len, char **outp,
                          size_t *out_lenp)
    __attribute__((warn_unused_result));

/* The range_end that makes a range of every key beginning with 'key'
 * ('len' bytes; the key with its last byte below 0xff incremented, the
 * trailing 0xff bytes dropped), in '*lenp' bytes, malloc'd.  A key of
 * only 0xff bytes (or empty) gives "\0", one byte: every key from 'key'
 * on. */
char *tem_etcd_prefix_end(const char *key, size_t len, size_t *lenp);

/* Request bodies (malloc'd JSON text).  'range_end' NULL: the key alone;
 * 'lease' 0: none; 'start_revision' 0: from now. */
char *tem_etcd_json_range(const char *key, const char *range_end,
                          size_t range_end_len);
char *tem_etcd_json_put(const char *key, const void *value, size_t len,
                        int64_t lease);
char *tem_etcd_json_delete(const char *key, const char *range_end,
                           size_t range_end_len);
/* A txn: if 'key' has create_revision 0 (absent), or mod_revision
 * 'mod_revision' (> 0), put 'value'; else read 'key'. */
char *tem_etcd_json_txn_put(const char *key, int64_t mod_revision,
                            const void *value, size_t len, int64_t lease);
char *tem_etcd_json_watch(const char *key, const char *range_end,
                          size_t range_end_len, int64_t start_revision);
char *tem_etcd_json_lease_grant(int64_t ttl);
char *tem_etcd_json_lease_id(int64_t lease);    /* keepalive, revoke. */

/* Parsers of unary answers ('text', 'len' bytes, need not end in NUL).
 * range: 'revision', 'kvs', 'count'.  put: 'revision'.  delete:
 * 'revision', 'deleted'.  txn: 'revision', 'succeeded', and on failure
 * 'kvs' of its range.  lease grant: 'lease', 'ttl'.  keepalive
 * ({"result":{...}}): 'lease', 'ttl' (0: the lease is gone).  revoke:
 * 'revision'. */
char *tem_etcd_parse_range(const char *text, size_t len,
                           struct tem_etcd_result *)
    __attribute__((warn_unused_result));
char *tem_etcd_parse_put(const char *text, size_t len,
                         struct tem_etcd_result *)
    __attribute__((warn_unused_result));
char *tem_etcd_parse_delete(const char *text, size_t len,
                            struct tem_etcd_result *)
    __attribute__((warn_unused_result));
char *tem_etcd_parse_txn(const char *text, size_t len,
                         struct tem_etcd_result *)
    __attribute__((warn_unused_result));
char *tem_etcd_parse_lease_grant(const char *text, size_t len,
                                 struct tem_etcd_result *)
    __attribute__((warn_unused_result));
char *tem_etcd_parse_keepalive(const char *text, size_t len,
                               struct tem_etcd_result *)
    __attribute__((warn_unused_result));

/* One message of a watch stream. */
enum tem_etcd_watch_msg {
    TEM_ETCD_WATCH_CREATED,     /* The watch is established. */
    TEM_ETCD_WATCH_MSG_EVENTS,  /* 'kvs' (maybe none: progress). */
    TEM_ETCD_WATCH_CANCELED,    /* 'compact_revision' > 0: compacted;
                                 * else 'message' says why. */
};
char *tem_etcd_parse_watch(const char *text, size_t len,
                           enum tem_etcd_watch_msg *,
                           struct tem_etcd_result *)
    __attribute__((warn_unused_result));

#endif /* tem-etcd-json.h */
