/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TEM's Alertmanager sender: every alert the TEM raises, POSTed to
 * Prometheus Alertmanager's API v2 (URL/api/v2/alerts) of each
 * --alertmanager=URL, where operators route, group, silence and
 * deduplicate alerts (docs/tem.md, "Alertmanager"; the alerts' JSON is
 * tem-am-json.h's).
 *
 * The TEM's loop must never wait for Alertmanager, and an alert must not
 * be lost to a short outage of it.  Each URL has:
 *
 *   - a queue of at most 'queue' alerts (--alertmanager-queue), filled
 *     by tem_am_put() from the TEM's loop: a copy of the alert's text and
 *     a few pointer moves under the URL's mutex, which the sender never
 *     holds across a request, a conversion or a wait;
 *   - a thread of its own (libcurl's easy interface) that takes up to
 *     'batch' alerts (--alertmanager-batch) from the queue's head, turns
 *     them into Alertmanager's JSON and POSTs them as one array, with a
 *     deadline per request (--alertmanager-timeout).  A request that
 *     fails (no connection, a timeout, an HTTP status other than 2xx) is
 *     counted in 'failures' and tried again with the same alerts (and
 *     more of the queue if the batch has room) after a backoff that
 *     starts at TEM_AM_BACKOFF_MIN_NS and doubles up to 'backoff_max'
 *     (--alertmanager-backoff); a 2xx answer delivers them ('sent').
 *     Status 400 (Alertmanager refused alerts as invalid; it keeps the
 *     valid ones of the array) is not tried again: its alerts are
 *     counted 'rejected'.
 *
 * An alert stays queued until it is delivered, rejected, or dropped by
 * the bound: when an alert finds the queue full, the oldest alert not in
 * the request being tried is dropped ('dropped'), so that the queue
 * holds the newest alerts of an outage (those that Alertmanager has not
 * yet resolved by their endsAt), and the request's alerts (the oldest,
 * at most 'batch') are kept for their retry; 'batch' is at most half of
 * 'queue', so there is always an older alert to drop.
 *
 * tem_am_destroy() tells every thread to stop: each goes on delivering
 * what is queued for at most 'flush' (--alertmanager-flush), requests
 * shortened to that deadline, then counts what is left as 'dropped' and
 * exits; the threads are joined.
 *
 * Counters per URL: queued = sent + rejected + dropped + pending at any
 * time (pending: queued or in the request being tried).
 *
 * Thread-safety: tem_am_create(), tem_am_put(), tem_am_destroy() from one
 * thread (the TEM's loop); tem_am_get_stats() from any thread.  The
 * sender threads are internal; they block every signal.
 */
#ifndef TEM_AM_H
#define TEM_AM_H 1

#include <stddef.h>
#include <stdint.h>

#include "tem-am-json.h"

struct json_object;
struct tem_metrics;

/* At most this many --alertmanager URLs. */
#define TEM_AM_MAX_URLS 16

/* The first retry's wait (or 'backoff_max' if that is shorter). */
#define TEM_AM_BACKOFF_MIN_NS 100000000ULL      /* 100 ms. */

struct tem_am_config {
    const char *urls[TEM_AM_MAX_URLS];  /* Trailing '/'s are dropped. */
    size_t n_urls;
    size_t queue;               /* Alerts queued per URL, at most. */
    size_t batch;               /* Alerts per request, at most. */
    uint64_t timeout_ns;        /* A request's deadline. */
    uint64_t backoff_max_ns;    /* Longest wait between two tries. */
    uint64_t flush_ns;          /* Delivery time left at shutdown. */
    struct tem_am_format format;
};

/* The defaults (docs/tem.md, "Alertmanager"); the batch is at most half
 * of the queue. */
#define TEM_AM_BATCH_DEFAULT 64
#define TEM_AM_CONFIG_DEFAULT {                                         \
    .queue = 10000, .batch = TEM_AM_BATCH_DEFAULT,                      \
    .timeout_ns = 5000000000ULL,                                        \
    .backoff_max_ns = 30000000000ULL, .flush_ns = 2000000000ULL,        \
    .format = { .severity = "warning",                                  \
                .resolve_ns = 300000000000ULL } }

struct tem_am_stats {
    uint64_t queued;            /* Alerts put in the queue. */
    uint64_t sent;              /* Delivered: answered 2xx. */
    uint64_t rejected;          /* Answered 400, not tried again. */
    uint64_t dropped;           /* Dropped by the bound or at shutdown. */
    uint64_t failures;          /* Requests that failed (then retried). */
    uint64_t requests;          /* Requests answered 2xx. */
    size_t pending;             /* Queued or being sent now. */
    long last_status;           /* HTTP status of the last answer, 0. */
};

/* Starts a sender for the URLs of 'cfg' (copied; n_urls > 0): libcurl's
 * global state and one thread per URL.  Returns NULL and sets '*error'
 * (malloc'd) if it cannot. */
struct tem_am *tem_am_create(const struct tem_am_config *cfg, char **error);

/* Stops the threads (see above), joins them and frees 'am'.  NULL is
 * fine. */
void tem_am_destroy(struct tem_am *am);

/* Queues TEM alert 'json' ('len' bytes) for every URL.  Never waits for
 * a request. */
void tem_am_put(struct tem_am *am, const char *json, size_t len);

size_t tem_am_n_urls(const struct tem_am *am);
const char *tem_am_url(const struct tem_am *am, size_t i);
void tem_am_get_stats(struct tem_am *am, size_t i, struct tem_am_stats *);

/* The knobs and every URL's counters as a JSON object (tem-ctl status's
 * "alertmanager"). */
struct json_object *tem_am_status_json(struct tem_am *am);

/* The counters as Prometheus families trumpet_tem_alertmanager_*
 * (label "url"). */
void tem_am_metrics(struct tem_am *am, struct tem_metrics *m);

#endif /* tem-am.h */
