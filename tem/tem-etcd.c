/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TEM's etcd client (tem-etcd.h): the queues shared with the caller,
 * and the worker thread that runs every HTTP transfer in one curl multi
 * handle.
 *
 * The worker's unit of work is an op: a request (get, put, delete,
 * put-if-absent, next-id, a lease revoke), a watch, or the lease.  An op
 * has at most one transfer under way; between transfers it waits until
 * its 'due' time (a retry's backoff, the lease's next renewal, a watch's
 * reconnection).  Each loop iteration admits new requests (while the
 * result queue has room for their answers), starts the transfers that are
 * due, lets curl move bytes for up to the next due time (woken early by
 * curl_multi_wakeup() when the caller submits), and finishes the
 * transfers that completed.
 *
 * Queues: two rings of pointers under one mutex.  The result ring's
 * eventfd is written when the ring becomes non-empty and read empty when
 * the caller takes its last result, both under the mutex, so the
 * descriptor is readable exactly while results are queued.
 */
#include <config.h>

#include "tem-etcd.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "clock.h"
#include "sbuf.h"
#include "tem-etcd-json.h"
#include "util.h"

enum tem_etcd_op_kind {
    TEM_ETCD_OP_GET,
    TEM_ETCD_OP_PUT,
    TEM_ETCD_OP_DELETE,
    TEM_ETCD_OP_PUT_IF_ABSENT,
    TEM_ETCD_OP_NEXT_ID,
    TEM_ETCD_OP_WATCH,
    TEM_ETCD_OP_WATCH_CANCEL,
    TEM_ETCD_OP_LEASE_START,
    TEM_ETCD_OP_LEASE_STOP,
    TEM_ETCD_OP_LEASE,          /* The lease itself (worker's own). */
};

struct tem_etcd_op {
    struct tem_etcd_op *next;   /* In the worker's list of ops. */
    struct tem_etcd *owner;
    enum tem_etcd_op_kind kind;
    uint64_t token;
    char *key;
    char *range_end;            /* A prefix's end, or NULL. */
    size_t range_end_len;
    char *value;
    size_t value_len;
    unsigned int flags;
    bool revoke;                /* LEASE_STOP. */

    /* Worker state. */
    CURL *easy;                 /* The transfer under way, or NULL. */
    struct curl_slist *headers;
    struct sbuf body;           /* What the transfer received. */
    bool too_big;               /* ... would exceed max_response_bytes. */
    uint64_t due_ms;            /* Next transfer not before this. */
    uint64_t sent_ms;           /* When the transfer started. */
    uint32_t attempts;          /* Transfers that failed. */
    uint32_t backoff_ms;        /* Next retry's delay. */
    bool reserved;              /* Holds a slot of the result ring. */
    bool done;                  /* Finished: to be freed. */

    /* NEXT_ID: the counter as last read. */
    int stage;                  /* 0: read it, 1: swap it. */
    int64_t cas_value;
    int64_t cas_mod_revision;
    uint32_t cas_attempts;

    /* WATCH. */
    int64_t next_rev;           /* First revision not delivered. */
    bool established;           /* DONE sent. */
    bool stalled;               /* Buffered lines wait for ring room. */
    bool lines_error;           /* The stream is to be dropped. */
    int64_t compacted;          /* > 0: ended by compaction. */
    char *stream_error;         /* Why the stream was dropped. */
};

struct tem_etcd_ring {
    void **slots;
    uint32_t cap, head, n;
};

struct tem_etcd {
    struct tem_etcd_config cfg;
    char **endpoints;
    size_t n_endpoints;

    pthread_mutex_t mutex;
    struct tem_etcd_ring requests;  /* struct tem_etcd_op *. */
    struct tem_etcd_ring results;   /* struct tem_etcd_result *. */
    int efd;
    bool stop;
    uint32_t n_watches;         /* Submitted, not canceled (caller's). */
    bool lease_started;         /* The caller's view. */

    /* Worker only. */
    pthread_t thread;
    CURLM *multi;
    size_t cur;                 /* Endpoint in use. */
    struct tem_etcd_op *ops;
    uint32_t reserved;          /* Result slots promised to ops. */
    struct tem_etcd_op *lease;  /* The lease op, or NULL. */
    int64_t lease_ttl;          /* Granted TTL (s). */
    uint64_t lease_deadline_ms; /* It expires at etcd by then. */

    unsigned int seed;          /* rand_r() of swap delays. */

    int64_t lease_id;           /* Atomic. */
    struct tem_etcd_stats stats;    /* Atomic fields. */
};

#define TEM_ETCD_STAT(E, FIELD) \
    __atomic_fetch_add(&(E)->stats.FIELD, 1, __ATOMIC_RELAXED)

static uint64_t
tem_etcd_now_ms__(void)
{
    return tpm_clock_mono_ns() / 1000000;
}

void
tem_etcd_config_init(struct tem_etcd_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->endpoints = "http://127.0.0.1:2379";
    cfg->connect_timeout_ms = 500;
    cfg->request_timeout_ms = 2000;
    cfg->lease_ttl_s = 3;
    cfg->keepalive_ms = 0;
    cfg->max_attempts = 3;
    cfg->backoff_min_ms = 100;
    cfg->backoff_max_ms = 2000;
    cfg->max_requests = 256;
    cfg->max_results = 1024;
    cfg->max_watches = 16;
    cfg->max_response_bytes = 4 << 20;
    cfg->max_cas_attempts = 64;
}

const char *
tem_etcd_result_type_name(enum tem_etcd_result_type type)
{
    switch (type) {
    case TEM_ETCD_DONE: return "done";
    case TEM_ETCD_ERROR: return "error";
    case TEM_ETCD_LEASE_GRANTED: return "lease-granted";
    case TEM_ETCD_LEASE_LOST: return "lease-lost";
    case TEM_ETCD_WATCH_EVENTS: return "watch-events";
    case TEM_ETCD_WATCH_DOWN: return "watch-down";
    case TEM_ETCD_WATCH_COMPACTED: return "watch-compacted";
    }
    return "unknown";
}

void
tem_etcd_result_free(struct tem_etcd_result *r)
{
    if (r) {
        for (size_t i = 0; i < r->n_kvs; i++) {
            free(r->kvs[i].key);
            free(r->kvs[i].value);
        }
        free(r->kvs);
        free(r->message);
        free(r);
    }
}

/* Rings (under the mutex). */

static void
tem_etcd_ring_init__(struct tem_etcd_ring *ring, uint32_t cap)
{
    ring->slots = xcalloc(cap, sizeof *ring->slots);
    ring->cap = cap;
    ring->head = ring->n = 0;
}

static bool
tem_etcd_ring_push__(struct tem_etcd_ring *ring, void *p)
{
    if (ring->n >= ring->cap) {
        return false;
    }
    ring->slots[(ring->head + ring->n++) % ring->cap] = p;
    return true;
}

static void *
tem_etcd_ring_pop__(struct tem_etcd_ring *ring)
{
    if (!ring->n) {
        return NULL;
    }
    void *p = ring->slots[ring->head];
    ring->head = (ring->head + 1) % ring->cap;
    ring->n--;
    return p;
}

static void
tem_etcd_op_free__(struct tem_etcd_op *op)
{
    if (op) {
        free(op->key);
        free(op->range_end);
        free(op->value);
        free(op->stream_error);
        sbuf_destroy(&op->body);
        free(op);
    }
}

/* Results (worker side). */

static struct tem_etcd_result *
tem_etcd_result_new__(enum tem_etcd_result_type type, uint64_t token)
{
    struct tem_etcd_result *r = xzalloc(sizeof *r);
    r->type = type;
    r->token = token;
    return r;
}

static uint32_t
tem_etcd_results_queued__(struct tem_etcd *e)
{
    pthread_mutex_lock(&e->mutex);
    uint32_t n = e->results.n;
    pthread_mutex_unlock(&e->mutex);
    return n;
}

/* True if a result that holds no reserved slot fits now. */
static bool
tem_etcd_room__(struct tem_etcd *e)
{
    return tem_etcd_results_queued__(e) + e->reserved < e->cfg.max_results;
}

static void
tem_etcd_push__(struct tem_etcd *e, struct tem_etcd_result *r)
{
    pthread_mutex_lock(&e->mutex);
    bool ok = tem_etcd_ring_push__(&e->results, r);
    if (ok && e->results.n == 1) {
        uint64_t one = 1;
        ssize_t n = write(e->efd, &one, sizeof one);
        (void) n;               /* Cannot fail: the counter stays small. */
    }
    pthread_mutex_unlock(&e->mutex);
    if (!ok) {
        TEM_ETCD_STAT(e, results_dropped);
        tem_etcd_result_free(r);
    }
}

/* The answer of op 'op', in the slot reserved for it. */
static void
tem_etcd_answer__(struct tem_etcd *e, struct tem_etcd_op *op,
                  struct tem_etcd_result *r)
{
    if (op->reserved) {
        op->reserved = false;
        e->reserved--;
    }
    r->token = op->token;
    tem_etcd_push__(e, r);
}

static void
tem_etcd_answer_error__(struct tem_etcd *e, struct tem_etcd_op *op,
                        int error, char *message)
{
    struct tem_etcd_result *r = tem_etcd_result_new__(TEM_ETCD_ERROR, 0);
    r->error = error;
    r->message = message;
    TEM_ETCD_STAT(e, failed);
    tem_etcd_answer__(e, op, r);
    op->done = true;
}

/* A status result (lease, watch): dropped, counted, if the ring is full. */
static void
tem_etcd_status__(struct tem_etcd *e, struct tem_etcd_result *r)
{
    if (tem_etcd_room__(e)) {
        tem_etcd_push__(e, r);
    } else {
        TEM_ETCD_STAT(e, results_dropped);
        tem_etcd_result_free(r);
    }
}

/* Transfers. */

static void
tem_etcd_next_endpoint__(struct tem_etcd *e, struct tem_etcd_op *op)
{
    if (e->n_endpoints > 1) {
        e->cur = (e->cur + 1) % e->n_endpoints;
        TEM_ETCD_STAT(e, endpoint_switches);
    }
}

static uint32_t
tem_etcd_backoff__(struct tem_etcd *e, struct tem_etcd_op *op)
{
    uint32_t b = op->backoff_ms ? op->backoff_ms : e->cfg.backoff_min_ms;
    op->backoff_ms = MIN((uint64_t) b * 2, e->cfg.backoff_max_ms);
    return b;
}

static size_t
tem_etcd_write_cb__(char *data, size_t size, size_t n, void *op_);

static void
tem_etcd_abort__(struct tem_etcd *e, struct tem_etcd_op *op)
{
    if (op->easy) {
        curl_multi_remove_handle(e->multi, op->easy);
        curl_easy_cleanup(op->easy);
        curl_slist_free_all(op->headers);
        op->easy = NULL;
        op->headers = NULL;
    }
    sbuf_clear(&op->body);
    op->too_big = false;
    op->stalled = false;
    op->lines_error = false;
}

/* Starts a POST of 'json' (freed) to 'path' for 'op'. */
static void
tem_etcd_start__(struct tem_etcd *e, struct tem_etcd_op *op,
                 const char *path, char *json)
{
    char *url = xasprintf("%s%s", e->endpoints[e->cur], path);
    CURL *easy = curl_easy_init();
    bool stream = op->kind == TEM_ETCD_OP_WATCH;

    if (!easy) {
        free(url);
        free(json);
        op->due_ms = tem_etcd_now_ms__() + tem_etcd_backoff__(e, op);
        return;
    }
    op->headers = curl_slist_append(NULL,
                                    "Content-Type: application/json");
    op->headers = curl_slist_append(op->headers, "Expect:");
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_COPYPOSTFIELDS, json);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, op->headers);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, tem_etcd_write_cb__);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, op);
    curl_easy_setopt(easy, CURLOPT_PRIVATE, op);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                     (long) e->cfg.connect_timeout_ms);
    if (stream) {
        curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
        curl_easy_setopt(easy, CURLOPT_TCP_KEEPIDLE, 1L);
        curl_easy_setopt(easy, CURLOPT_TCP_KEEPINTVL, 1L);
    } else {
        uint32_t t = e->cfg.request_timeout_ms;
        if (op->kind == TEM_ETCD_OP_LEASE && e->lease_id) {
            /* A renewal gives up after half the renewal period and the
             * next one goes to the next endpoint: an etcd member without
             * a leader holds a request until its election ends, and one
             * held for a whole period would leave the lease's last
             * period for a single attempt. */
            t = MIN(t, MAX(e->cfg.keepalive_ms / 2, 1));
        }
        curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, (long) t);
    }
    free(url);
    free(json);

    sbuf_clear(&op->body);
    op->too_big = false;
    op->easy = easy;
    op->sent_ms = tem_etcd_now_ms__();
    TEM_ETCD_STAT(e, requests);
    if (curl_multi_add_handle(e->multi, easy) != CURLM_OK) {
        curl_easy_cleanup(easy);
        curl_slist_free_all(op->headers);
        op->easy = NULL;
        op->headers = NULL;
        op->due_ms = tem_etcd_now_ms__() + tem_etcd_backoff__(e, op);
    }
}

/* Starts the next transfer of 'op', which is due. */
static void
tem_etcd_op_start__(struct tem_etcd *e, struct tem_etcd_op *op)
{
    int64_t lease = 0;

    if ((op->flags & TEM_ETCD_WITH_LEASE)
        && op->kind != TEM_ETCD_OP_LEASE) {
        lease = __atomic_load_n(&e->lease_id, __ATOMIC_RELAXED);
        if (!lease) {
            tem_etcd_answer_error__(e, op, ENOENT,
                                    xstrdup("no lease held"));
            return;
        }
    }
    switch (op->kind) {
    case TEM_ETCD_OP_GET:
        tem_etcd_start__(e, op, "/v3/kv/range",
                         tem_etcd_json_range(op->key, op->range_end,
                                             op->range_end_len));
        break;
    case TEM_ETCD_OP_PUT:
        tem_etcd_start__(e, op, "/v3/kv/put",
                         tem_etcd_json_put(op->key, op->value,
                                           op->value_len, lease));
        break;
    case TEM_ETCD_OP_DELETE:
        tem_etcd_start__(e, op, "/v3/kv/deleterange",
                         tem_etcd_json_delete(op->key, op->range_end,
                                              op->range_end_len));
        break;
    case TEM_ETCD_OP_PUT_IF_ABSENT:
        tem_etcd_start__(e, op, "/v3/kv/txn",
                         tem_etcd_json_txn_put(op->key, 0, op->value,
                                               op->value_len, lease));
        break;
    case TEM_ETCD_OP_NEXT_ID:
        if (op->stage == 0) {
            tem_etcd_start__(e, op, "/v3/kv/range",
                             tem_etcd_json_range(op->key, NULL, 0));
        } else {
            char *v = xasprintf("%"PRId64, op->cas_value + 1);
            tem_etcd_start__(e, op, "/v3/kv/txn",
                             tem_etcd_json_txn_put(op->key,
                                                   op->cas_mod_revision,
                                                   v, strlen(v), 0));
            free(v);
        }
        break;
    case TEM_ETCD_OP_WATCH:
        tem_etcd_start__(e, op, "/v3/watch",
                         tem_etcd_json_watch(op->key, op->range_end,
                                             op->range_end_len,
                                             op->next_rev));
        break;
    case TEM_ETCD_OP_LEASE_STOP:
        tem_etcd_start__(e, op, "/v3/lease/revoke",
                         tem_etcd_json_lease_id(op->cas_value));
        break;
    case TEM_ETCD_OP_LEASE:
        if (e->lease_id) {
            tem_etcd_start__(e, op, "/v3/lease/keepalive",
                             tem_etcd_json_lease_id(e->lease_id));
        } else {
            tem_etcd_start__(e, op, "/v3/lease/grant",
                             tem_etcd_json_lease_grant(e->cfg.lease_ttl_s));
        }
        break;
    case TEM_ETCD_OP_WATCH_CANCEL:
    case TEM_ETCD_OP_LEASE_START:
        break;
    }
}

/* Watch streams. */

/* Delivers the complete lines of 'op''s stream buffer while the result
 * ring has room; sets 'stalled' if some are left. */
static void
tem_etcd_watch_lines__(struct tem_etcd *e, struct tem_etcd_op *op)
{
    size_t start = 0;

    op->stalled = false;
    while (!op->lines_error && start < op->body.len) {
        char *nl = memchr(op->body.s + start, '\n', op->body.len - start);
        if (!nl) {
            break;
        }
        size_t len = nl - (op->body.s + start);
        if (!tem_etcd_room__(e)) {
            op->stalled = true;
            break;
        }

        struct tem_etcd_result *r =
            tem_etcd_result_new__(TEM_ETCD_WATCH_EVENTS, op->token);
        enum tem_etcd_watch_msg msg;
        char *error = tem_etcd_parse_watch(op->body.s + start, len, &msg,
                                           r);
        start += len + 1;
        if (error) {
            TEM_ETCD_STAT(e, bad_responses);
            op->lines_error = true;
            op->stream_error = error;
            tem_etcd_result_free(r);
            break;
        }
        if (msg == TEM_ETCD_WATCH_CANCELED) {
            op->lines_error = true;
            if (r->compact_revision > 0) {
                op->compacted = r->compact_revision;
            } else {
                op->stream_error = xasprintf("watch canceled: %s",
                                             r->message ? r->message
                                             : "(no reason)");
            }
            tem_etcd_result_free(r);
            break;
        }
        if (msg == TEM_ETCD_WATCH_CREATED) {
            if (!op->next_rev) {
                op->next_rev = r->revision + 1;
            }
            op->backoff_ms = 0;
            op->attempts = 0;
            if (!op->established) {
                op->established = true;
                r->type = TEM_ETCD_DONE;
                for (size_t i = 0; i < r->n_kvs; i++) {
                    free(r->kvs[i].key);
                    free(r->kvs[i].value);
                }
                r->n_kvs = 0;
                tem_etcd_answer__(e, op, r);
                continue;
            }
        }

        /* Drop what was delivered before a reconnection. */
        size_t n = 0;
        for (size_t i = 0; i < r->n_kvs; i++) {
            if (r->kvs[i].mod_revision < op->next_rev) {
                TEM_ETCD_STAT(e, watch_duplicates);
                free(r->kvs[i].key);
                free(r->kvs[i].value);
            } else {
                r->kvs[n++] = r->kvs[i];
            }
        }
        r->n_kvs = n;
        if (n) {
            op->next_rev = r->kvs[n - 1].mod_revision + 1;
            tem_etcd_push__(e, r);
        } else {
            if (msg == TEM_ETCD_WATCH_MSG_EVENTS && op->established
                && r->revision >= op->next_rev) {
                /* A progress notification: nothing up to its revision
                 * is left to come. */
                op->next_rev = r->revision + 1;
            }
            tem_etcd_result_free(r);
        }
    }
    if (start) {
        memmove(op->body.s, op->body.s + start, op->body.len - start);
        op->body.len -= start;
        op->body.s[op->body.len] = '\0';
    }
}

static size_t
tem_etcd_write_cb__(char *data, size_t size, size_t n, void *op_)
{
    struct tem_etcd_op *op = op_;
    struct tem_etcd *e = op->owner;
    size_t len = size * n;

    if (op->stalled) {
        return CURL_WRITEFUNC_PAUSE;
    }
    if (op->lines_error) {
        return 0;               /* Ends the transfer. */
    }
    if (op->body.len + len > e->cfg.max_response_bytes) {
        op->too_big = true;
        return 0;
    }
    sbuf_put(&op->body, data, len);
    if (op->kind == TEM_ETCD_OP_WATCH) {
        tem_etcd_watch_lines__(e, op);
        if (op->lines_error) {
            return 0;
        }
    }
    return len;
}

/* Completions. */

static int
tem_etcd_errno_of_curl__(CURLcode rc)
{
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
        return ECONNREFUSED;
    case CURLE_OPERATION_TIMEDOUT:
        return ETIMEDOUT;
    case CURLE_COULDNT_RESOLVE_HOST:
        return EHOSTUNREACH;
    default:
        return EIO;
    }
}

static int
tem_etcd_errno_of_etcd__(int code)
{
    switch (code) {
    case 3:                     /* INVALID_ARGUMENT */
    case 9:                     /* FAILED_PRECONDITION */
    case 11:                    /* OUT_OF_RANGE */
        return EINVAL;
    case 5:                     /* NOT_FOUND */
        return ENOENT;
    case 7:                     /* PERMISSION_DENIED */
    case 16:                    /* UNAUTHENTICATED */
        return EACCES;
    case 8:                     /* RESOURCE_EXHAUSTED */
        return ENOSPC;
    default:
        return EPROTO;
    }
}

/* etcd's codes that say "try again": UNAVAILABLE, DEADLINE_EXCEEDED,
 * ABORTED. */
static bool
tem_etcd_code_transient__(int code)
{
    return code == 14 || code == 4 || code == 10;
}

/* A failed transfer of request 'op': tried again on the next endpoint
 * after a backoff, or answered with 'error' and 'message' (taken). */
static void
tem_etcd_retry__(struct tem_etcd *e, struct tem_etcd_op *op, int error,
                 char *message)
{
    op->attempts++;
    tem_etcd_next_endpoint__(e, op);
    if (op->attempts >= e->cfg.max_attempts) {
        char *m = xasprintf("%s (after %"PRIu32" attempts)", message,
                            op->attempts);
        free(message);
        tem_etcd_answer_error__(e, op, error, m);
        return;
    }
    free(message);
    TEM_ETCD_STAT(e, retries);
    op->due_ms = tem_etcd_now_ms__() + tem_etcd_backoff__(e, op);
}

/* Classifies a completed unary transfer: returns the parsed result, or
 * NULL after counting the failure in '*errorp' and '*messagep' and
 * '*retryp' (worth trying again). */
static struct tem_etcd_result *
tem_etcd_check__(struct tem_etcd *e, struct tem_etcd_op *op, CURLcode rc,
                 long http,
                 char *(*parse)(const char *, size_t,
                                struct tem_etcd_result *),
                 int *errorp, char **messagep, bool *retryp)
{
    const char *ep = e->endpoints[e->cur];

    *retryp = false;
    if (op->too_big) {
        TEM_ETCD_STAT(e, bad_responses);
        *errorp = EMSGSIZE;
        *messagep = xasprintf("%s: answer larger than %zu bytes", ep,
                              e->cfg.max_response_bytes);
        return NULL;
    }
    if (rc != CURLE_OK) {
        TEM_ETCD_STAT(e, transport_errors);
        *errorp = tem_etcd_errno_of_curl__(rc);
        *messagep = xasprintf("%s: %s", ep, curl_easy_strerror(rc));
        *retryp = true;
        return NULL;
    }

    struct tem_etcd_result *r = tem_etcd_result_new__(TEM_ETCD_DONE, 0);
    char *error = parse(op->body.s ? op->body.s : "", op->body.len, r);
    if (!error && http != 200) {
        error = xasprintf("HTTP status %ld", http);
    }
    if (!error) {
        return r;
    }
    *messagep = xasprintf("%s: %s", ep, error);
    free(error);
    if (r->etcd_code && !tem_etcd_code_transient__(r->etcd_code)
        && http < 500) {
        TEM_ETCD_STAT(e, etcd_errors);
        *errorp = tem_etcd_errno_of_etcd__(r->etcd_code);
    } else if (r->etcd_code || http >= 500) {
        TEM_ETCD_STAT(e, transport_errors);
        *errorp = EAGAIN;
        *retryp = true;
    } else {
        TEM_ETCD_STAT(e, bad_responses);
        *errorp = EPROTO;
        *retryp = true;
    }
    tem_etcd_result_free(r);
    return NULL;
}

/* A counter's value: a decimal number from 1 to INT64_MAX - 1. */
static bool
tem_etcd_parse_counter__(const struct tem_etcd_kv *kv, int64_t *vp)
{
    if (kv->value_len == 0 || kv->value_len > 18
        || strspn(kv->value, "0123456789") != kv->value_len) {
        return false;
    }
    *vp = strtoll(kv->value, NULL, 10);
    return *vp > 0;
}

static void
tem_etcd_request_done__(struct tem_etcd *e, struct tem_etcd_op *op,
                        CURLcode rc, long http)
{
    char *(*parse)(const char *, size_t, struct tem_etcd_result *);
    char *message = NULL;
    bool retry;
    int error;

    switch (op->kind) {
    case TEM_ETCD_OP_GET:
        parse = tem_etcd_parse_range;
        break;
    case TEM_ETCD_OP_DELETE:
        parse = tem_etcd_parse_delete;
        break;
    case TEM_ETCD_OP_PUT_IF_ABSENT:
        parse = tem_etcd_parse_txn;
        break;
    case TEM_ETCD_OP_NEXT_ID:
        parse = op->stage ? tem_etcd_parse_txn : tem_etcd_parse_range;
        break;
    case TEM_ETCD_OP_PUT:
    case TEM_ETCD_OP_LEASE_STOP:
    default:
        parse = tem_etcd_parse_put;
        break;
    }
    struct tem_etcd_result *r = tem_etcd_check__(e, op, rc, http, parse,
                                                 &error, &message, &retry);
    sbuf_clear(&op->body);
    if (!r) {
        if (retry) {
            tem_etcd_retry__(e, op, error, message);
        } else {
            tem_etcd_answer_error__(e, op, error, message);
        }
        return;
    }

    if (op->kind == TEM_ETCD_OP_PUT_IF_ABSENT && !r->succeeded
        && r->n_kvs && r->kvs[0].lease
        && r->kvs[0].lease == __atomic_load_n(&e->lease_id,
                                              __ATOMIC_RELAXED)) {
        /* Ours: a retry after an answer that was lost. */
        r->succeeded = true;
    } else if (op->kind == TEM_ETCD_OP_NEXT_ID
               && (op->stage == 0 || !r->succeeded)) {
        /* The counter as read, or as it is after a lost swap. */
        op->cas_value = 1;
        op->cas_mod_revision = 0;
        if (r->n_kvs) {
            if (!tem_etcd_parse_counter__(&r->kvs[0], &op->cas_value)) {
                tem_etcd_result_free(r);
                tem_etcd_answer_error__(e, op, EINVAL,
                                        xasprintf("%s does not hold a "
                                                  "positive number",
                                                  op->key));
                return;
            }
            op->cas_mod_revision = r->kvs[0].mod_revision;
        }
        tem_etcd_result_free(r);
        if (op->stage && ++op->cas_attempts >= e->cfg.max_cas_attempts) {
            tem_etcd_answer_error__(e, op, EBUSY,
                                    xasprintf("%s: %"PRIu32" swaps lost "
                                              "to other clients",
                                              op->key, op->cas_attempts));
            return;
        }
        /* After a lost swap, a random delay that grows with the losses
         * spreads the clients that want the counter at once. */
        uint64_t jitter = 0;
        if (op->stage) {
            uint32_t span = MIN(op->cas_attempts * 5,
                                e->cfg.backoff_max_ms) + 1;
            jitter = rand_r(&e->seed) % span;
        }
        op->stage = 1;
        op->attempts = 0;
        op->due_ms = tem_etcd_now_ms__() + jitter;
        return;
    } else if (op->kind == TEM_ETCD_OP_NEXT_ID) {
        r->id = op->cas_value;
    }
    tem_etcd_answer__(e, op, r);
    op->done = true;
}

static void
tem_etcd_lease_lost__(struct tem_etcd *e, struct tem_etcd_op *op,
                      const char *why)
{
    struct tem_etcd_result *r = tem_etcd_result_new__(TEM_ETCD_LEASE_LOST,
                                                      0);
    r->lease = e->lease_id;
    r->message = xstrdup(why);
    __atomic_store_n(&e->lease_id, 0, __ATOMIC_RELAXED);
    TEM_ETCD_STAT(e, leases_lost);
    tem_etcd_status__(e, r);
    op->backoff_ms = 0;
    op->due_ms = tem_etcd_now_ms__() + tem_etcd_backoff__(e, op);
}

static void
tem_etcd_lease_done__(struct tem_etcd *e, struct tem_etcd_op *op,
                      CURLcode rc, long http)
{
    bool grant = !e->lease_id;
    uint64_t now = tem_etcd_now_ms__();
    char *message;
    bool retry;
    int error;

    struct tem_etcd_result *r =
        tem_etcd_check__(e, op, rc, http,
                         grant ? tem_etcd_parse_lease_grant
                         : tem_etcd_parse_keepalive,
                         &error, &message, &retry);
    sbuf_clear(&op->body);
    if (!r) {
        free(message);
        tem_etcd_next_endpoint__(e, op);
        if (grant) {
            op->due_ms = now + tem_etcd_backoff__(e, op);
        } else {
            /* Renew again soon: the deadline check ends the lease. */
            op->due_ms = now + e->cfg.backoff_min_ms;
        }
        return;
    }
    op->backoff_ms = 0;
    if (grant) {
        __atomic_store_n(&e->lease_id, r->lease, __ATOMIC_RELAXED);
        e->lease_ttl = r->ttl;
        e->lease_deadline_ms = op->sent_ms + r->ttl * 1000;
        TEM_ETCD_STAT(e, leases_granted);
        r->type = TEM_ETCD_LEASE_GRANTED;
        tem_etcd_status__(e, r);
    } else if (r->ttl <= 0 || r->lease != e->lease_id) {
        tem_etcd_result_free(r);
        tem_etcd_lease_lost__(e, op, "etcd: the lease expired");
        return;
    } else {
        e->lease_deadline_ms = op->sent_ms + r->ttl * 1000;
        TEM_ETCD_STAT(e, keepalives);
        tem_etcd_result_free(r);
    }
    op->due_ms = now + e->cfg.keepalive_ms;
}

static void
tem_etcd_watch_done__(struct tem_etcd *e, struct tem_etcd_op *op,
                      CURLcode rc, long http)
{
    if (op->compacted) {
        struct tem_etcd_result *r =
            tem_etcd_result_new__(TEM_ETCD_WATCH_COMPACTED, op->token);
        r->compact_revision = op->compacted;
        r->message = xasprintf("revision %"PRId64" was compacted away "
                               "(at %"PRId64")", op->next_rev,
                               op->compacted);
        TEM_ETCD_STAT(e, watch_compacted);
        if (op->reserved) {
            tem_etcd_answer__(e, op, r);
        } else {
            tem_etcd_status__(e, r);
        }
        pthread_mutex_lock(&e->mutex);
        e->n_watches--;
        pthread_mutex_unlock(&e->mutex);
        op->done = true;
        return;
    }

    char *message;
    const char *ep = e->endpoints[e->cur];
    if (op->stream_error) {
        message = xasprintf("%s: %s", ep, op->stream_error);
        free(op->stream_error);
        op->stream_error = NULL;
    } else if (op->too_big) {
        TEM_ETCD_STAT(e, bad_responses);
        message = xasprintf("%s: a watch message larger than %zu bytes",
                            ep, e->cfg.max_response_bytes);
    } else if (rc != CURLE_OK) {
        TEM_ETCD_STAT(e, transport_errors);
        message = xasprintf("%s: %s", ep, curl_easy_strerror(rc));
    } else if (http != 200) {
        TEM_ETCD_STAT(e, transport_errors);
        message = xasprintf("%s: HTTP status %ld", ep, http);
    } else {
        message = xasprintf("%s: the watch stream ended", ep);
    }
    TEM_ETCD_STAT(e, watch_reconnects);
    struct tem_etcd_result *r = tem_etcd_result_new__(TEM_ETCD_WATCH_DOWN,
                                                      op->token);
    r->message = message;
    r->revision = op->next_rev;
    tem_etcd_status__(e, r);
    tem_etcd_next_endpoint__(e, op);
    op->due_ms = tem_etcd_now_ms__() + tem_etcd_backoff__(e, op);
    op->attempts++;
}

/* Ends op 'op''s transfer, which completed with 'rc'. */
static void
tem_etcd_done__(struct tem_etcd *e, struct tem_etcd_op *op, CURLcode rc)
{
    long http = 0;

    curl_easy_getinfo(op->easy, CURLINFO_RESPONSE_CODE, &http);
    curl_multi_remove_handle(e->multi, op->easy);
    curl_easy_cleanup(op->easy);
    curl_slist_free_all(op->headers);
    op->easy = NULL;
    op->headers = NULL;

    switch (op->kind) {
    case TEM_ETCD_OP_WATCH:
        tem_etcd_watch_done__(e, op, rc, http);
        sbuf_clear(&op->body);
        op->stalled = op->lines_error = op->too_big = false;
        break;
    case TEM_ETCD_OP_LEASE:
        tem_etcd_lease_done__(e, op, rc, http);
        break;
    default:
        tem_etcd_request_done__(e, op, rc, http);
        break;
    }
}

/* The worker. */

static void
tem_etcd_add_op__(struct tem_etcd *e, struct tem_etcd_op *op)
{
    op->next = e->ops;
    e->ops = op;
}

static struct tem_etcd_op *
tem_etcd_find_watch__(struct tem_etcd *e, uint64_t token)
{
    for (struct tem_etcd_op *op = e->ops; op; op = op->next) {
        if (op->kind == TEM_ETCD_OP_WATCH && !op->done
            && op->token == token) {
            return op;
        }
    }
    return NULL;
}

/* Takes request 'op' from the caller. */
static void
tem_etcd_admit__(struct tem_etcd *e, struct tem_etcd_op *op)
{
    struct tem_etcd_op *w;

    op->owner = e;
    if (op->kind != TEM_ETCD_OP_WATCH_CANCEL) {
        op->reserved = true;
        e->reserved++;
    }
    op->due_ms = tem_etcd_now_ms__();
    switch (op->kind) {
    case TEM_ETCD_OP_WATCH_CANCEL:
        w = tem_etcd_find_watch__(e, op->token);
        if (w) {
            tem_etcd_abort__(e, w);
            if (w->reserved) {
                w->reserved = false;
                e->reserved--;
            }
            w->done = true;
        }
        tem_etcd_op_free__(op);
        return;
    case TEM_ETCD_OP_LEASE_START:
        if (!e->lease) {
            struct tem_etcd_op *l = xzalloc(sizeof *l);
            l->owner = e;
            l->kind = TEM_ETCD_OP_LEASE;
            l->due_ms = op->due_ms;
            e->lease = l;
            tem_etcd_add_op__(e, l);
        }
        tem_etcd_answer__(e, op, tem_etcd_result_new__(TEM_ETCD_DONE, 0));
        tem_etcd_op_free__(op);
        return;
    case TEM_ETCD_OP_LEASE_STOP:
        op->cas_value = e->lease_id;
        if (e->lease) {
            tem_etcd_abort__(e, e->lease);
            e->lease->done = true;
            e->lease = NULL;
            __atomic_store_n(&e->lease_id, 0, __ATOMIC_RELAXED);
        }
        if (!op->revoke || !op->cas_value) {
            tem_etcd_answer__(e, op,
                              tem_etcd_result_new__(TEM_ETCD_DONE, 0));
            tem_etcd_op_free__(op);
            return;
        }
        break;
    default:
        break;
    }
    tem_etcd_add_op__(e, op);
}

static void *
tem_etcd_worker__(void *e_)
{
    struct tem_etcd *e = e_;

    for (;;) {
        pthread_mutex_lock(&e->mutex);
        bool stop = e->stop;
        pthread_mutex_unlock(&e->mutex);
        if (stop) {
            break;
        }

        /* New requests, while their answers have room. */
        while (tem_etcd_room__(e)) {
            pthread_mutex_lock(&e->mutex);
            struct tem_etcd_op *op = tem_etcd_ring_pop__(&e->requests);
            pthread_mutex_unlock(&e->mutex);
            if (!op) {
                break;
            }
            tem_etcd_admit__(e, op);
        }

        uint64_t now = tem_etcd_now_ms__();
        if (e->lease && e->lease_id && now >= e->lease_deadline_ms) {
            tem_etcd_abort__(e, e->lease);
            tem_etcd_lease_lost__(e, e->lease,
                                  "no renewal for the lease's TTL");
        }

        bool stalled = false;
        for (struct tem_etcd_op *op = e->ops; op; op = op->next) {
            if (op->done) {
                continue;
            }
            if (!op->easy && op->due_ms <= now) {
                tem_etcd_op_start__(e, op);
            } else if (op->easy && op->stalled) {
                tem_etcd_watch_lines__(e, op);
                if (op->lines_error) {
                    curl_easy_pause(op->easy, CURLPAUSE_CONT);
                } else if (!op->stalled) {
                    curl_easy_pause(op->easy, CURLPAUSE_CONT);
                }
                stalled |= op->stalled;
            }
        }

        int running;
        curl_multi_perform(e->multi, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(e->multi, &left))) {
            if (msg->msg == CURLMSG_DONE) {
                struct tem_etcd_op *op;
                CURLcode rc = msg->data.result;
                curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &op);
                tem_etcd_done__(e, op, rc);
            }
        }

        /* Free the finished ops; find the next due time. */
        uint64_t next = now + 1000;
        for (struct tem_etcd_op **p = &e->ops; *p;) {
            struct tem_etcd_op *op = *p;
            if (op->done) {
                tem_etcd_abort__(e, op);
                *p = op->next;
                tem_etcd_op_free__(op);
                continue;
            }
            if (!op->easy) {
                next = MIN(next, op->due_ms);
            }
            stalled |= op->stalled;
            p = &op->next;
        }
        if (e->lease && e->lease_id) {
            next = MIN(next, e->lease_deadline_ms);
        }
        now = tem_etcd_now_ms__();
        int timeout = next > now ? (int) (next - now) : 0;
        if (stalled) {
            /* Nothing wakes the worker when the caller reads. */
            timeout = MIN(timeout, 10);
        }
        curl_multi_poll(e->multi, NULL, 0, timeout, NULL);
    }
    return NULL;
}

/* The caller's side. */

static char *
tem_etcd_parse_endpoints__(struct tem_etcd *e, const char *list)
{
    char *copy = xstrdup(list ? list : "");
    char *save = NULL;

    for (char *t = strtok_r(copy, ", ", &save); t;
         t = strtok_r(NULL, ", ", &save)) {
        size_t n = strlen(t);
        while (n && t[n - 1] == '/') {
            t[--n] = '\0';
        }
        if (strncmp(t, "http://", 7) && strncmp(t, "https://", 8)) {
            char *error = xasprintf("etcd endpoint '%s' is not an "
                                    "http:// or https:// URL", t);
            free(copy);
            return error;
        }
        e->endpoints = xrealloc(e->endpoints,
                                (e->n_endpoints + 1) * sizeof *e->endpoints);
        e->endpoints[e->n_endpoints++] = xstrdup(t);
    }
    free(copy);
    return e->n_endpoints ? NULL : xstrdup("no etcd endpoint");
}

static pthread_once_t tem_etcd_curl_once = PTHREAD_ONCE_INIT;
static CURLcode tem_etcd_curl_init;

static void
tem_etcd_curl_global__(void)
{
    tem_etcd_curl_init = curl_global_init(CURL_GLOBAL_DEFAULT);
}

struct tem_etcd *
tem_etcd_create(const struct tem_etcd_config *cfg, char **errp)
{
    struct tem_etcd *e = xzalloc(sizeof *e);
    char *error;

    *errp = NULL;
    e->cfg = *cfg;
    e->cfg.endpoints = NULL;
    e->efd = -1;
    e->seed = tpm_clock_mono_ns() ^ (uintptr_t) e;
    if (!e->cfg.keepalive_ms) {
        e->cfg.keepalive_ms = MAX(cfg->lease_ttl_s * 1000 / 3, 1);
    }
    error = tem_etcd_parse_endpoints__(e, cfg->endpoints);
    if (!error && (!cfg->connect_timeout_ms || !cfg->request_timeout_ms
                   || !cfg->lease_ttl_s || !cfg->max_attempts
                   || !cfg->backoff_min_ms
                   || cfg->backoff_max_ms < cfg->backoff_min_ms
                   || !cfg->max_requests || !cfg->max_results
                   || !cfg->max_watches || cfg->max_response_bytes < 1024
                   || !cfg->max_cas_attempts)) {
        error = xstrdup("etcd client: a timeout or bound is zero (or the "
                        "backoff's maximum is below its minimum)");
    }
    if (!error && cfg->max_results <= cfg->max_watches) {
        /* A watch holds a result slot until it is established. */
        error = xstrdup("etcd client: the result queue must be longer "
                        "than the number of watches");
    }
    if (!error && e->cfg.keepalive_ms >= cfg->lease_ttl_s * 1000) {
        error = xstrdup("etcd client: the keepalive period must be below "
                        "the lease's TTL");
    }
    if (!error) {
        pthread_once(&tem_etcd_curl_once, tem_etcd_curl_global__);
        if (tem_etcd_curl_init != CURLE_OK) {
            error = xasprintf("libcurl: %s",
                              curl_easy_strerror(tem_etcd_curl_init));
        }
    }
    if (!error) {
        e->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (e->efd < 0) {
            error = xasprintf("eventfd: %s", strerror(errno));
        }
    }
    if (!error) {
        e->multi = curl_multi_init();
        if (!e->multi) {
            error = xstrdup("libcurl: no multi handle");
        }
    }
    if (error) {
        *errp = error;
        tem_etcd_destroy(e);
        return NULL;
    }
    tem_etcd_ring_init__(&e->requests, cfg->max_requests);
    tem_etcd_ring_init__(&e->results, cfg->max_results);
    pthread_mutex_init(&e->mutex, NULL);
    int err = pthread_create(&e->thread, NULL, tem_etcd_worker__, e);
    if (err) {
        *errp = xasprintf("etcd client thread: %s", strerror(err));
        pthread_mutex_destroy(&e->mutex);
        free(e->requests.slots);
        free(e->results.slots);
        e->requests.slots = e->results.slots = NULL;
        tem_etcd_destroy(e);
        return NULL;
    }
    return e;
}

void
tem_etcd_destroy(struct tem_etcd *e)
{
    if (!e) {
        return;
    }
    if (e->requests.slots) {
        pthread_mutex_lock(&e->mutex);
        e->stop = true;
        pthread_mutex_unlock(&e->mutex);
        curl_multi_wakeup(e->multi);
        pthread_join(e->thread, NULL);
        pthread_mutex_destroy(&e->mutex);

        while (e->ops) {
            struct tem_etcd_op *op = e->ops;
            e->ops = op->next;
            tem_etcd_abort__(e, op);
            tem_etcd_op_free__(op);
        }
        void *p;
        while ((p = tem_etcd_ring_pop__(&e->requests))) {
            tem_etcd_op_free__(p);
        }
        while ((p = tem_etcd_ring_pop__(&e->results))) {
            tem_etcd_result_free(p);
        }
        free(e->requests.slots);
        free(e->results.slots);
    }
    if (e->multi) {
        curl_multi_cleanup(e->multi);
    }
    if (e->efd >= 0) {
        close(e->efd);
    }
    for (size_t i = 0; i < e->n_endpoints; i++) {
        free(e->endpoints[i]);
    }
    free(e->endpoints);
    free(e);
}

int
tem_etcd_fd(const struct tem_etcd *e)
{
    return e->efd;
}

struct tem_etcd_result *
tem_etcd_recv(struct tem_etcd *e)
{
    pthread_mutex_lock(&e->mutex);
    struct tem_etcd_result *r = tem_etcd_ring_pop__(&e->results);
    if (r && !e->results.n) {
        uint64_t v;
        ssize_t n = read(e->efd, &v, sizeof v);
        (void) n;               /* EAGAIN if already zero: fine. */
    }
    pthread_mutex_unlock(&e->mutex);
    return r;
}

static struct tem_etcd_op *
tem_etcd_op_new__(enum tem_etcd_op_kind kind, const char *key, bool prefix,
                  uint64_t token)
{
    struct tem_etcd_op *op = xzalloc(sizeof *op);
    op->kind = kind;
    op->token = token;
    if (key) {
        op->key = xstrdup(key);
        if (prefix) {
            op->range_end = tem_etcd_prefix_end(key, strlen(key),
                                                &op->range_end_len);
        }
    }
    return op;
}

static int
tem_etcd_submit__(struct tem_etcd *e, struct tem_etcd_op *op)
{
    int error = 0;

    pthread_mutex_lock(&e->mutex);
    if (op->kind == TEM_ETCD_OP_WATCH
        && e->n_watches >= e->cfg.max_watches) {
        error = EINVAL;
    } else if (!tem_etcd_ring_push__(&e->requests, op)) {
        error = EAGAIN;
    } else if (op->kind == TEM_ETCD_OP_WATCH) {
        e->n_watches++;
    } else if (op->kind == TEM_ETCD_OP_WATCH_CANCEL) {
        e->n_watches--;
    } else if (op->kind == TEM_ETCD_OP_LEASE_START) {
        e->lease_started = true;
    } else if (op->kind == TEM_ETCD_OP_LEASE_STOP) {
        e->lease_started = false;
    }
    pthread_mutex_unlock(&e->mutex);
    if (error) {
        if (error == EAGAIN) {
            TEM_ETCD_STAT(e, refused);
        }
        tem_etcd_op_free__(op);
        return error;
    }
    curl_multi_wakeup(e->multi);
    return 0;
}

static bool
tem_etcd_lease_ok__(struct tem_etcd *e, unsigned int flags)
{
    if (!(flags & TEM_ETCD_WITH_LEASE)) {
        return true;
    }
    pthread_mutex_lock(&e->mutex);
    bool ok = e->lease_started;
    pthread_mutex_unlock(&e->mutex);
    return ok;
}

int
tem_etcd_get(struct tem_etcd *e, const char *key, bool prefix,
             uint64_t token)
{
    if (!key || !*key) {
        return EINVAL;
    }
    return tem_etcd_submit__(e, tem_etcd_op_new__(TEM_ETCD_OP_GET, key,
                                                  prefix, token));
}

static int
tem_etcd_put__(struct tem_etcd *e, enum tem_etcd_op_kind kind,
               const char *key, const void *value, size_t len,
               unsigned int flags, uint64_t token)
{
    if (!key || !*key || !tem_etcd_lease_ok__(e, flags)) {
        return EINVAL;
    }
    struct tem_etcd_op *op = tem_etcd_op_new__(kind, key, false, token);
    op->value = xmalloc(len + 1);
    memcpy(op->value, value, len);
    op->value[len] = '\0';
    op->value_len = len;
    op->flags = flags;
    return tem_etcd_submit__(e, op);
}

int
tem_etcd_put(struct tem_etcd *e, const char *key, const void *value,
             size_t len, unsigned int flags, uint64_t token)
{
    return tem_etcd_put__(e, TEM_ETCD_OP_PUT, key, value, len, flags,
                          token);
}

int
tem_etcd_put_if_absent(struct tem_etcd *e, const char *key,
                       const void *value, size_t len, unsigned int flags,
                       uint64_t token)
{
    return tem_etcd_put__(e, TEM_ETCD_OP_PUT_IF_ABSENT, key, value, len,
                          flags, token);
}

int
tem_etcd_delete(struct tem_etcd *e, const char *key, bool prefix,
                uint64_t token)
{
    if (!key || !*key) {
        return EINVAL;
    }
    return tem_etcd_submit__(e, tem_etcd_op_new__(TEM_ETCD_OP_DELETE, key,
                                                  prefix, token));
}

int
tem_etcd_next_id(struct tem_etcd *e, const char *key, uint64_t token)
{
    if (!key || !*key) {
        return EINVAL;
    }
    return tem_etcd_submit__(e, tem_etcd_op_new__(TEM_ETCD_OP_NEXT_ID, key,
                                                  false, token));
}

int
tem_etcd_watch(struct tem_etcd *e, const char *key, bool prefix,
               int64_t start_revision, uint64_t token)
{
    if (!key || !*key || start_revision < 0) {
        return EINVAL;
    }
    struct tem_etcd_op *op = tem_etcd_op_new__(TEM_ETCD_OP_WATCH, key,
                                               prefix, token);
    op->next_rev = start_revision;
    return tem_etcd_submit__(e, op);
}

int
tem_etcd_watch_cancel(struct tem_etcd *e, uint64_t token)
{
    return tem_etcd_submit__(e, tem_etcd_op_new__(TEM_ETCD_OP_WATCH_CANCEL,
                                                  NULL, false, token));
}

int
tem_etcd_lease_start(struct tem_etcd *e)
{
    return tem_etcd_submit__(e, tem_etcd_op_new__(TEM_ETCD_OP_LEASE_START,
                                                  NULL, false, 0));
}

int
tem_etcd_lease_stop(struct tem_etcd *e, bool revoke, uint64_t token)
{
    struct tem_etcd_op *op = tem_etcd_op_new__(TEM_ETCD_OP_LEASE_STOP, NULL,
                                               false, token);
    op->revoke = revoke;
    return tem_etcd_submit__(e, op);
}

int64_t
tem_etcd_lease_id(const struct tem_etcd *e)
{
    return __atomic_load_n(&e->lease_id, __ATOMIC_RELAXED);
}

void
tem_etcd_stats(const struct tem_etcd *e, struct tem_etcd_stats *s)
{
    const uint64_t *from = (const uint64_t *) &e->stats;
    uint64_t *to = (uint64_t *) s;

    BUILD_ASSERT_DECL(sizeof *s % sizeof(uint64_t) == 0);
    for (size_t i = 0; i < sizeof *s / sizeof(uint64_t); i++) {
        to[i] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
    }
}
