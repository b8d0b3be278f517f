/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TEM's etcd client: what a cluster of TEMs (docs/tem.md, "Past one
 * TEM" and "etcd client") needs of etcd, through etcd's v3 JSON gateway
 * (HTTP POST of JSON on etcd's client port, keys and values in base64),
 * with libcurl, from a thread of its own.
 *
 * The caller is a single-threaded loop that must never wait on etcd.  It
 * submits requests (tem_etcd_get(), tem_etcd_put(), ...), each tagged
 * with a 'token' of its choosing, and reads results from a bounded queue
 * whose readiness is a file descriptor (tem_etcd_fd(): an eventfd, for
 * poll() or zmq_poll()).  A submission never blocks: when the request
 * queue is full it fails with EAGAIN at once.  Every request gets exactly
 * one result with its token (TEM_ETCD_DONE or TEM_ETCD_ERROR); the lease
 * and the watches also post results of their own (token 0 for the lease,
 * the watch's token for a watch).
 *
 * What the worker thread does:
 *
 *   - Requests: one HTTP transfer each, all concurrent (curl multi), with
 *     a connect and a request timeout.  A transfer that fails at the
 *     transport (refused, timed out, HTTP 5xx, garbage that is not the
 *     gateway's JSON, etcd "unavailable") is counted and retried on the
 *     next endpoint after a backoff, at most 'max_attempts' times, then
 *     answered with TEM_ETCD_ERROR.  An answer of etcd's that refuses the
 *     request (bad argument, lease not found) is answered at once.
 *
 *   - The lease (tem_etcd_lease_start()): granted with 'lease_ttl_s',
 *     renewed every 'keepalive_ms'.  TEM_ETCD_LEASE_GRANTED carries its
 *     id; TEM_ETCD_LEASE_LOST says that it expired (etcd answered that it
 *     is gone, or no renewal succeeded for a whole TTL since the last
 *     renewal was sent), after which a new lease is granted with backoff
 *     (a new TEM_ETCD_LEASE_GRANTED: the caller puts its keys again).
 *     tem_etcd_put() with TEM_ETCD_WITH_LEASE attaches the current lease.
 *
 *   - Watches (tem_etcd_watch()): a streaming /v3/watch each.  The worker
 *     remembers the next revision it has not delivered; when the stream
 *     breaks (etcd restarted, an endpoint down) it reconnects with
 *     start_revision at that revision, and drops anything older, so that
 *     the caller sees every change once, in revision order.  A watch
 *     whose revision was compacted away ends with TEM_ETCD_WATCH_COMPACTED:
 *     the caller reads the prefix again (tem_etcd_get()) and watches from
 *     the revision after the one the read saw.
 *
 *   - Compare-and-swap: tem_etcd_put_if_absent() (a txn on
 *     create_revision == 0: leader election on /trumpet/leader with the
 *     lease attached) and tem_etcd_next_id() (a counter key read and
 *     swapped on its mod_revision until the swap wins: ids never repeat,
 *     one may be skipped when a swap's answer is lost).
 *
 * Results are bounded: a request is taken from the request queue only
 * when the result queue has room for its answer, a watch's stream is read
 * only when there is room for its message, and a lease or watch status
 * result that finds the queue full is dropped and counted
 * (results_dropped; the lease's state is also in tem_etcd_lease_id()).
 *
 * Thread-safety: one caller thread uses a client (every function below);
 * the worker thread is internal.  tem_etcd_stats() and
 * tem_etcd_lease_id() may be called from any thread.
 */
#ifndef TEM_ETCD_H
#define TEM_ETCD_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The cluster's keys (docs/tem.md, "etcd client"). */
#define TEM_ETCD_MEMBERS "/trumpet/members/"    /* ID -> endpoints, key. */
#define TEM_ETCD_LEADER "/trumpet/leader"       /* The leader's ID. */
#define TEM_ETCD_EVENTS "/trumpet/events/"      /* ID -> definition. */
#define TEM_ETCD_ASSIGN "/trumpet/assign/"      /* Event ID -> member ID. */
#define TEM_ETCD_NEXT_ID "/trumpet/next-id"     /* The next event id. */
#define TEM_ETCD_HOSTS "/trumpet/hosts/"        /* Host ID -> its keys. */

struct tem_etcd_config {
    /* Client URLs, separated by commas ("http://127.0.0.1:2379"), tried
     * in turn: a transport failure moves to the next. */
    const char *endpoints;
    uint32_t connect_timeout_ms;  /* TCP connect (500). */
    uint32_t request_timeout_ms;  /* A whole unary request (2000). */
    uint32_t lease_ttl_s;         /* The lease's TTL (3). */
    uint32_t keepalive_ms;        /* Renewal period (0: TTL / 3). */
    uint32_t max_attempts;        /* Tries of a request (3). */
    uint32_t backoff_min_ms;      /* First retry delay (100)... */
    uint32_t backoff_max_ms;      /* ... doubling up to this (2000). */
    uint32_t max_requests;        /* Request queue (256). */
    uint32_t max_results;         /* Result queue (1024). */
    uint32_t max_watches;         /* Watches at once (16). */
    size_t max_response_bytes;    /* One response or watch message
                                   * (4 MiB). */
    uint32_t max_cas_attempts;    /* Swaps of tem_etcd_next_id() (64). */
};

/* Fills in the defaults above; 'endpoints' "http://127.0.0.1:2379". */
void tem_etcd_config_init(struct tem_etcd_config *);

enum tem_etcd_result_type {
    TEM_ETCD_DONE,              /* A request succeeded. */
    TEM_ETCD_ERROR,             /* A request failed: 'error', 'message'. */
    TEM_ETCD_LEASE_GRANTED,     /* 'lease' (token 0). */
    TEM_ETCD_LEASE_LOST,        /* 'lease' expired (token 0). */
    TEM_ETCD_WATCH_EVENTS,      /* 'kvs': changes in revision order. */
    TEM_ETCD_WATCH_DOWN,        /* The stream broke: 'message'; it
                                 * resumes by itself. */
    TEM_ETCD_WATCH_COMPACTED,   /* Ended: 'compact_revision'. */
};

const char *tem_etcd_result_type_name(enum tem_etcd_result_type);

struct tem_etcd_kv {
    char *key;                  /* NUL-terminated. */
    char *value;                /* 'value_len' bytes and a NUL. */
    size_t value_len;
    int64_t create_revision;
    int64_t mod_revision;
    int64_t version;
    int64_t lease;
    bool deleted;               /* A watch's DELETE event. */
};

struct tem_etcd_result {
    enum tem_etcd_result_type type;
    uint64_t token;             /* The request's or the watch's. */
    int error;                  /* TEM_ETCD_ERROR: a positive errno. */
    char *message;              /* What went wrong, or NULL. */
    int etcd_code;              /* etcd's (gRPC) code, 0 if none. */
    int64_t revision;           /* The store's revision of the answer. */
    struct tem_etcd_kv *kvs;    /* get, watch; a failed txn: the key. */
    size_t n_kvs;
    int64_t count;              /* get: keys in the range. */
    int64_t deleted;            /* delete: keys deleted. */
    bool succeeded;             /* put_if_absent: the key was created. */
    int64_t id;                 /* next_id: the id allocated. */
    int64_t lease;              /* Lease results. */
    int64_t ttl;                /* TEM_ETCD_LEASE_GRANTED: seconds. */
    int64_t compact_revision;   /* TEM_ETCD_WATCH_COMPACTED. */
};

void tem_etcd_result_free(struct tem_etcd_result *);

struct tem_etcd_stats {
    uint64_t requests;          /* HTTP transfers started. */
    uint64_t transport_errors;  /* Refused, timed out, reset, HTTP 5xx. */
    uint64_t bad_responses;     /* Not the gateway's JSON, bad base64. */
    uint64_t etcd_errors;       /* etcd refused a request. */
    uint64_t retries;           /* Requests tried again. */
    uint64_t failed;            /* Requests answered TEM_ETCD_ERROR. */
    uint64_t endpoint_switches; /* Moves to the next endpoint. */
    uint64_t refused;           /* Submissions refused: queue full. */
    uint64_t results_dropped;   /* Status results lost to a full queue. */
    uint64_t keepalives;        /* Lease renewals that succeeded. */
    uint64_t leases_granted;
    uint64_t leases_lost;
    uint64_t watch_reconnects;  /* Watch streams opened again. */
    uint64_t watch_duplicates;  /* Events dropped as already delivered. */
    uint64_t watch_compacted;
};

/* Creates a client and starts its thread.  Returns NULL and an error
 * message in '*errp' (caller frees) on a bad configuration (no endpoint,
 * a zero bound) or if libcurl or the thread cannot start. */
struct tem_etcd *tem_etcd_create(const struct tem_etcd_config *,
                                 char **errp);

/* Stops the thread (transfers under way are abandoned; the lease is not
 * revoked: call tem_etcd_lease_stop() first and wait for its result to
 * give it back at once) and frees 'etcd' with every result unread. */
void tem_etcd_destroy(struct tem_etcd *etcd);

/* Readable while results are queued. */
int tem_etcd_fd(const struct tem_etcd *);

/* The next result, or NULL; the caller frees it. */
struct tem_etcd_result *tem_etcd_recv(struct tem_etcd *);

/* Requests.  Each returns 0, or EAGAIN (request queue full, counted in
 * 'refused'), EINVAL (an empty key, TEM_ETCD_WITH_LEASE before
 * tem_etcd_lease_start(), no watch left) at once; on 0 exactly one
 * result with 'token' follows.  'prefix' true: every key that begins
 * with 'key'.  TEM_ETCD_WITH_LEASE attaches the lease held when the
 * request is sent; none held (not granted yet, or lost): ENOENT, so put
 * after TEM_ETCD_LEASE_GRANTED. */
#define TEM_ETCD_WITH_LEASE 1u
int tem_etcd_get(struct tem_etcd *, const char *key, bool prefix,
                 uint64_t token);
int tem_etcd_put(struct tem_etcd *, const char *key, const void *value,
                 size_t len, unsigned int flags, uint64_t token);
int tem_etcd_delete(struct tem_etcd *, const char *key, bool prefix,
                    uint64_t token);

/* Creates 'key' = 'value' only if it does not exist: 'succeeded'; if it
 * does, 'kvs[0]' is its current value.  A key that holds this client's
 * lease counts as created by it (a retry whose first answer was lost). */
int tem_etcd_put_if_absent(struct tem_etcd *, const char *key,
                           const void *value, size_t len,
                           unsigned int flags, uint64_t token);

/* Allocates the value of counter 'key' (absent: 1) and increments it:
 * the result's 'id'.  Two clients never get the same id.  A swap lost to
 * another client is tried again after a random delay of up to 5 ms per
 * loss; after 'max_cas_attempts' losses the answer is EBUSY.  A counter
 * that is not a positive decimal number is EINVAL. */
int tem_etcd_next_id(struct tem_etcd *, const char *key, uint64_t token);

/* Watches 'key' (or the prefix) from 'start_revision' (0: from now); its
 * results carry 'token'.  TEM_ETCD_DONE once it is established, then
 * TEM_ETCD_WATCH_EVENTS (and TEM_ETCD_WATCH_DOWN while etcd is away)
 * until tem_etcd_watch_cancel() or TEM_ETCD_WATCH_COMPACTED. */
int tem_etcd_watch(struct tem_etcd *, const char *key, bool prefix,
                   int64_t start_revision, uint64_t token);
/* Ends the watch of 'token': no result of it is queued after this one
 * is taken by the client's thread (those queued before may still be
 * read).  No result of its own. */
int tem_etcd_watch_cancel(struct tem_etcd *, uint64_t token);

/* Grants the lease and keeps it alive: TEM_ETCD_DONE, then
 * TEM_ETCD_LEASE_GRANTED and TEM_ETCD_LEASE_LOST as they happen, all
 * with token 0. */
int tem_etcd_lease_start(struct tem_etcd *);
/* Stops renewing it; 'revoke': gives it back now (its keys vanish at
 * once), with a result of 'token'; otherwise it expires after its TTL. */
int tem_etcd_lease_stop(struct tem_etcd *, bool revoke, uint64_t token);
/* The current lease's id, 0 if none. */
int64_t tem_etcd_lease_id(const struct tem_etcd *);

void tem_etcd_stats(const struct tem_etcd *, struct tem_etcd_stats *);

#endif /* tem-etcd.h */
