/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TEM's Alertmanager sender (tem-am.h).
 *
 * Each URL is a 'struct tem_am_target': a ring of 'queue' pointers to
 * copies of the TEM's alerts, its mutex and condition, and a thread.  The
 * ring holds the alerts not yet taken; the thread's batch ('items') the
 * converted alerts of the request being tried, at most 'batch' of them,
 * taken from the ring's head (so they are the oldest).  'n' + 'n_flight'
 * is bounded by 'queue'.  The mutex guards the ring and the counters
 * only: the thread takes alerts, lets go of the mutex, converts, sends
 * and waits, and takes it again to count.  Stopping is an atomic flag
 * and deadline, so that libcurl's progress callback can end a request at
 * the deadline without the mutex.
 */
#include "tem-am.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "sbuf.h"
#include "tem-metrics.h"
#include "tem-warn.h"
#include "tpm-log.h"
#include "util.h"

/* The answer's first bytes are kept for the log. */
#define TEM_AM_ANSWER_MAX 256

/* Recoveries are logged at most this often. */
#define TEM_AM_RECOVERY_LOG_NS 10000000000ULL

struct tem_am_target {
    struct tem_am *am;
    char *url;                  /* As given, without trailing '/'s. */
    char *endpoint;             /* url + "/api/v2/alerts". */
    pthread_t thread;
    bool started;

    pthread_mutex_t mutex;
    pthread_cond_t cond;        /* Alerts queued, or stop. */
    /* Guarded by 'mutex'. */
    char **ring;                /* 'queue' slots of malloc'd alerts. */
    size_t head, n;             /* Oldest slot, alerts in the ring. */
    size_t n_flight;            /* Alerts taken by the thread. */
    struct tem_am_stats stats;

    atomic_bool stop;
    _Atomic uint64_t deadline;  /* Monotonic ns, once 'stop'. */

    /* The TEM's loop only. */
    struct tem_warn drop_warn;

    /* The thread only. */
    char **taken;               /* 'batch' slots: alerts just taken. */
    char **items;               /* 'batch' converted alerts... */
    size_t n_items;             /* ...of the request being tried. */
    struct sbuf body, answer;
    CURL *curl;
    struct curl_slist *headers;
    char curl_error[CURL_ERROR_SIZE];
    struct tem_warn fail_warn;
    uint64_t failures_run;      /* Failures since the last delivery. */
    uint64_t recovery_log_ns;
};

struct tem_am {
    struct tem_am_config cfg;
    char *severity, *tem_id, *generator_url;    /* cfg's, copied. */
    size_t n;
    struct tem_am_target *targets;
};

/* ---------------------------------------------------------------------- */
/* The sender thread. */

static size_t
tem_am_write_cb__(char *data, size_t size, size_t nmemb, void *t_)
{
    struct tem_am_target *t = t_;
    size_t n = size * nmemb;
    size_t keep = MIN(n, TEM_AM_ANSWER_MAX - t->answer.len);

    /* Kept for one log line: control characters become spaces. */
    for (size_t i = 0; i < keep; i++) {
        unsigned char c = data[i];
        char ch = c < 0x20 || c == 0x7f ? ' ' : c;
        sbuf_put(&t->answer, &ch, 1);
    }
    return n;
}

/* Ends a request once the sender is stopping and its deadline passed. */
static int
tem_am_progress_cb__(void *t_, curl_off_t dltotal, curl_off_t dlnow,
                     curl_off_t ultotal, curl_off_t ulnow)
{
    struct tem_am_target *t = t_;
    return (atomic_load(&t->stop)
            && tpm_clock_mono_ns() >= atomic_load(&t->deadline));
}

/* Sets up the easy handle of 't'.  Returns false if libcurl cannot. */
static bool
tem_am_curl_init__(struct tem_am_target *t)
{
    t->curl = curl_easy_init();
    if (!t->curl) {
        return false;
    }
    /* No "Expect: 100-continue" wait before larger bodies. */
    t->headers = curl_slist_append(NULL, "Content-Type: application/json");
    t->headers = curl_slist_append(t->headers, "Expect:");
    CURL *c = t->curl;
    curl_easy_setopt(c, CURLOPT_URL, t->endpoint);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, t->headers);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "trumpet-tem");
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, t->curl_error);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, tem_am_write_cb__);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, tem_am_progress_cb__);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, t);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    return t->headers != NULL;
}

/* POSTs the body of 't' within 'timeout_ns'.  Returns the HTTP status, or
 * 0 with 't->curl_error' set if no answer came. */
static long
tem_am_post__(struct tem_am_target *t, uint64_t timeout_ns)
{
    long ms = MAX(1, (long) (timeout_ns / 1000000));
    long status = 0;

    sbuf_clear(&t->answer);
    t->curl_error[0] = '\0';
    curl_easy_setopt(t->curl, CURLOPT_POSTFIELDS, t->body.s);
    curl_easy_setopt(t->curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     (curl_off_t) t->body.len);
    curl_easy_setopt(t->curl, CURLOPT_TIMEOUT_MS, ms);
    curl_easy_setopt(t->curl, CURLOPT_CONNECTTIMEOUT_MS, ms);
    CURLcode rc = curl_easy_perform(t->curl);
    if (rc != CURLE_OK) {
        if (!t->curl_error[0]) {
            snprintf(t->curl_error, sizeof t->curl_error, "%s",
                     curl_easy_strerror(rc));
        }
        return 0;
    }
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
    return status;
}

/* Converts the 'n' alerts of 't->taken' into 't->items'.  Returns how
 * many could not be (logged). */
static size_t
tem_am_convert__(struct tem_am_target *t, size_t n)
{
    struct sbuf b = SBUF_INITIALIZER;
    size_t bad = 0;

    for (size_t i = 0; i < n; i++) {
        char *error = tem_am_json_alert(&t->am->cfg.format, t->taken[i],
                                        strlen(t->taken[i]), &b);
        if (error) {
            bad++;
            tem_warn(&t->fail_warn, "alertmanager %s: an alert not sent: "
                     "%s", t->url, error);
            free(error);
        } else {
            t->items[t->n_items++] = xstrndup(b.s, b.len);
        }
        sbuf_clear(&b);
        free(t->taken[i]);
    }
    sbuf_destroy(&b);
    return bad;
}

/* The body of the request: the alerts of 't->items' as one array. */
static void
tem_am_body__(struct tem_am_target *t)
{
    sbuf_clear(&t->body);
    sbuf_put(&t->body, "[", 1);
    for (size_t i = 0; i < t->n_items; i++) {
        if (i) {
            sbuf_put(&t->body, ",", 1);
        }
        sbuf_str(&t->body, t->items[i]);
    }
    sbuf_put(&t->body, "]", 1);
}

static void
tem_am_free_items__(struct tem_am_target *t)
{
    for (size_t i = 0; i < t->n_items; i++) {
        free(t->items[i]);
    }
    t->n_items = 0;
}

/* Waits, with the mutex of 't' held, until 'until' (monotonic ns) or the
 * stop deadline, whichever is first. */
static void
tem_am_sleep__(struct tem_am_target *t, uint64_t until)
{
    for (;;) {
        uint64_t end = until;
        if (atomic_load(&t->stop)) {
            end = MIN(end, atomic_load(&t->deadline));
        }
        if (tpm_clock_mono_ns() >= end) {
            return;
        }
        struct timespec ts = { .tv_sec = end / 1000000000ULL,
                               .tv_nsec = end % 1000000000ULL };
        pthread_cond_timedwait(&t->cond, &t->mutex, &ts);
    }
}

/* Logs the outcome of one request of 't' that got 'status' (0: no
 * answer) for 'n' alerts.  Called without the mutex. */
static void
tem_am_log__(struct tem_am_target *t, long status, size_t n,
             uint64_t backoff)
{
    if (status >= 200 && status < 300) {
        uint64_t now = tpm_clock_mono_ns();
        if (t->failures_run && now >= t->recovery_log_ns) {
            tpm_log(TPM_LOG_INFO, "alertmanager %s: delivering again, after "
                    "%"PRIu64" failed requests", t->url, t->failures_run);
            t->recovery_log_ns = now + TEM_AM_RECOVERY_LOG_NS;
        }
        t->failures_run = 0;
        return;
    }
    t->failures_run++;
    if (status == 400) {
        tem_warn(&t->fail_warn, "alertmanager %s: status 400, %zu alerts "
                 "refused (not sent again): %s", t->endpoint, n,
                 t->answer.len ? t->answer.s : "");
    } else if (status) {
        tem_warn(&t->fail_warn, "alertmanager %s: status %ld: %s; %zu "
                 "alerts kept, next try in %"PRIu64" ms", t->endpoint,
                 status, t->answer.len ? t->answer.s : "", n,
                 backoff / 1000000);
    } else {
        tem_warn(&t->fail_warn, "alertmanager %s: %s; %zu alerts kept, "
                 "next try in %"PRIu64" ms", t->endpoint, t->curl_error, n,
                 backoff / 1000000);
    }
}

static void *
tem_am_main__(void *t_)
{
    struct tem_am_target *t = t_;
    const struct tem_am_config *cfg = &t->am->cfg;
    uint64_t backoff = 0;

    pthread_mutex_lock(&t->mutex);
    for (;;) {
        while (!atomic_load(&t->stop) && !t->n && !t->n_flight) {
            pthread_cond_wait(&t->cond, &t->mutex);
        }
        if (atomic_load(&t->stop)
            && ((!t->n && !t->n_flight)
                || tpm_clock_mono_ns() >= atomic_load(&t->deadline))) {
            break;
        }

        /* Take what the batch has room for, from the ring's head. */
        size_t k = MIN(cfg->batch - t->n_flight, t->n);
        for (size_t i = 0; i < k; i++) {
            t->taken[i] = t->ring[t->head];
            t->head = (t->head + 1) % cfg->queue;
        }
        t->n -= k;
        t->n_flight += k;
        pthread_mutex_unlock(&t->mutex);

        size_t bad = tem_am_convert__(t, k);
        long status = 0;
        size_t n = t->n_items;
        if (n) {
            uint64_t timeout = cfg->timeout_ns;
            if (atomic_load(&t->stop)) {
                uint64_t now = tpm_clock_mono_ns();
                uint64_t end = atomic_load(&t->deadline);
                timeout = MIN(timeout, end > now ? end - now : 1);
            }
            tem_am_body__(t);
            status = tem_am_post__(t, timeout);
        }
        bool done = n && ((status >= 200 && status < 300) || status == 400);
        if (n && !done) {
            backoff = MIN(backoff ? backoff * 2 : TEM_AM_BACKOFF_MIN_NS,
                          cfg->backoff_max_ns);
        } else if (done) {
            backoff = 0;
        }
        if (n) {
            tem_am_log__(t, status, n, backoff);
        }
        if (done) {
            tem_am_free_items__(t);
        }

        pthread_mutex_lock(&t->mutex);
        t->stats.rejected += bad;
        t->n_flight -= bad;
        if (n) {
            t->stats.last_status = status;
        }
        if (done) {
            t->n_flight -= n;
            if (status == 400) {
                t->stats.rejected += n;
                t->stats.failures++;
            } else {
                t->stats.sent += n;
                t->stats.requests++;
            }
        } else if (n) {
            t->stats.failures++;
            tem_am_sleep__(t, tpm_clock_mono_ns() + backoff);
        }
    }

    /* Stopped: what was not delivered by the deadline is dropped. */
    size_t left = t->n + t->n_flight;
    t->stats.dropped += left;
    for (; t->n; t->n--) {
        free(t->ring[t->head]);
        t->head = (t->head + 1) % cfg->queue;
    }
    t->n_flight = 0;
    pthread_mutex_unlock(&t->mutex);
    tem_am_free_items__(t);
    if (left) {
        tpm_log(TPM_LOG_WARN, "alertmanager %s: %zu alerts not delivered "
                "within --alertmanager-flush: dropped", t->url, left);
    }
    return NULL;
}

/* ---------------------------------------------------------------------- */
/* The TEM's side. */

static void
tem_am_target_free__(struct tem_am_target *t)
{
    curl_easy_cleanup(t->curl);
    curl_slist_free_all(t->headers);
    pthread_mutex_destroy(&t->mutex);
    pthread_cond_destroy(&t->cond);
    free(t->ring);
    free(t->taken);
    free(t->items);
    sbuf_destroy(&t->body);
    sbuf_destroy(&t->answer);
    free(t->url);
    free(t->endpoint);
}

struct tem_am *
tem_am_create(const struct tem_am_config *cfg, char **error)
{
    struct tem_am *am = xzalloc(sizeof *am);
    CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);

    if (rc != CURLE_OK) {
        *error = xasprintf("libcurl: %s", curl_easy_strerror(rc));
        free(am);
        return NULL;
    }
    am->cfg = *cfg;
    am->severity = xstrdup(cfg->format.severity);
    am->tem_id = xstrdup(cfg->format.tem_id);
    am->generator_url = cfg->format.generator_url
                        ? xstrdup(cfg->format.generator_url) : NULL;
    am->cfg.format.severity = am->severity;
    am->cfg.format.tem_id = am->tem_id;
    am->cfg.format.generator_url = am->generator_url;
    am->n = cfg->n_urls;
    am->targets = xcalloc(am->n, sizeof *am->targets);

    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    for (size_t i = 0; i < am->n; i++) {
        struct tem_am_target *t = &am->targets[i];
        t->am = am;
        size_t len = strlen(cfg->urls[i]);
        while (len && cfg->urls[i][len - 1] == '/') {
            len--;
        }
        t->url = xstrndup(cfg->urls[i], len);
        t->endpoint = xasprintf("%s/api/v2/alerts", t->url);
        am->cfg.urls[i] = t->url;
        pthread_mutex_init(&t->mutex, NULL);
        pthread_cond_init(&t->cond, &ca);
        t->ring = xcalloc(cfg->queue, sizeof *t->ring);
        t->taken = xcalloc(cfg->batch, sizeof *t->taken);
        t->items = xcalloc(cfg->batch, sizeof *t->items);
        t->drop_warn = (struct tem_warn) TEM_WARN_INITIALIZER;
        t->fail_warn = (struct tem_warn) TEM_WARN_INITIALIZER;
        atomic_init(&t->stop, false);
        atomic_init(&t->deadline, 0);
    }
    pthread_condattr_destroy(&ca);

    /* The threads take no signal: the TEM's loop does. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    for (size_t i = 0; i < am->n; i++) {
        struct tem_am_target *t = &am->targets[i];
        int err;
        if (!tem_am_curl_init__(t)) {
            *error = xasprintf("alertmanager %s: libcurl cannot make a "
                               "handle", t->url);
        } else if ((err = pthread_create(&t->thread, NULL, tem_am_main__,
                                         t))) {
            *error = xasprintf("alertmanager %s: cannot start its thread: "
                               "%s", t->url, strerror(err));
        } else {
            t->started = true;
            continue;
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        tem_am_destroy(am);
        return NULL;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return am;
}

void
tem_am_destroy(struct tem_am *am)
{
    if (!am) {
        return;
    }
    uint64_t deadline = tpm_clock_mono_ns() + am->cfg.flush_ns;
    for (size_t i = 0; i < am->n; i++) {
        struct tem_am_target *t = &am->targets[i];
        pthread_mutex_lock(&t->mutex);
        atomic_store(&t->deadline, deadline);
        atomic_store(&t->stop, true);
        pthread_cond_signal(&t->cond);
        pthread_mutex_unlock(&t->mutex);
    }
    for (size_t i = 0; i < am->n; i++) {
        struct tem_am_target *t = &am->targets[i];
        if (t->started) {
            pthread_join(t->thread, NULL);
        }
        for (; t->n; t->n--) {      /* A thread that never started. */
            free(t->ring[t->head]);
            t->head = (t->head + 1) % am->cfg.queue;
        }
        tem_am_target_free__(t);
    }
    free(am->targets);
    free(am->severity);
    free(am->tem_id);
    free(am->generator_url);
    free(am);
    curl_global_cleanup();
}

void
tem_am_put(struct tem_am *am, const char *json, size_t len)
{
    for (size_t i = 0; i < am->n; i++) {
        struct tem_am_target *t = &am->targets[i];
        char *copy = xstrndup(json, len);
        char *evicted = NULL;
        uint64_t dropped;

        pthread_mutex_lock(&t->mutex);
        t->stats.queued++;
        if (t->n + t->n_flight >= am->cfg.queue) {
            /* Full: the oldest not being sent makes room ('batch' <=
             * 'queue' / 2: there is one). */
            t->stats.dropped++;
            if (t->n) {
                evicted = t->ring[t->head];
                t->head = (t->head + 1) % am->cfg.queue;
                t->n--;
            } else {
                evicted = copy;
                copy = NULL;
            }
        }
        if (copy) {
            t->ring[(t->head + t->n) % am->cfg.queue] = copy;
            if (!t->n++ && !t->n_flight) {
                pthread_cond_signal(&t->cond);
            }
        }
        dropped = evicted ? t->stats.dropped : 0;
        pthread_mutex_unlock(&t->mutex);

        if (evicted) {
            free(evicted);
            tem_warn(&t->drop_warn, "alertmanager %s: %zu alerts queued "
                     "(--alertmanager-queue): the oldest dropped "
                     "(%"PRIu64" so far)", t->url, am->cfg.queue, dropped);
        }
    }
}

size_t
tem_am_n_urls(const struct tem_am *am)
{
    return am ? am->n : 0;
}

const char *
tem_am_url(const struct tem_am *am, size_t i)
{
    return am->targets[i].url;
}

void
tem_am_get_stats(struct tem_am *am, size_t i, struct tem_am_stats *st)
{
    struct tem_am_target *t = &am->targets[i];

    pthread_mutex_lock(&t->mutex);
    *st = t->stats;
    st->pending = t->n + t->n_flight;
    pthread_mutex_unlock(&t->mutex);
}

static void
tem_am_add_int__(struct json_object *o, const char *key, int64_t v)
{
    json_object_object_add(o, key, json_object_new_int64(v));
}

struct json_object *
tem_am_status_json(struct tem_am *am)
{
    struct json_object *o = json_object_new_object();
    struct json_object *urls = json_object_new_array();
    const struct tem_am_config *c = &am->cfg;

    tem_am_add_int__(o, "queue", c->queue);
    tem_am_add_int__(o, "batch", c->batch);
    tem_am_add_int__(o, "timeout_ms", c->timeout_ns / 1000000);
    tem_am_add_int__(o, "backoff_max_ms", c->backoff_max_ns / 1000000);
    tem_am_add_int__(o, "flush_ms", c->flush_ns / 1000000);
    tem_am_add_int__(o, "resolve_s", c->format.resolve_ns / 1000000000);
    json_object_object_add(o, "severity",
                           json_object_new_string(c->format.severity));
    for (size_t i = 0; i < am->n; i++) {
        struct json_object *u = json_object_new_object();
        struct tem_am_stats st;
        tem_am_get_stats(am, i, &st);
        json_object_object_add(u, "url",
                               json_object_new_string(am->targets[i].url));
        tem_am_add_int__(u, "queued", st.queued);
        tem_am_add_int__(u, "sent", st.sent);
        tem_am_add_int__(u, "failures", st.failures);
        tem_am_add_int__(u, "dropped", st.dropped);
        tem_am_add_int__(u, "rejected", st.rejected);
        tem_am_add_int__(u, "pending", st.pending);
        tem_am_add_int__(u, "requests", st.requests);
        tem_am_add_int__(u, "last_status", st.last_status);
        json_object_array_add(urls, u);
    }
    json_object_object_add(o, "urls", urls);
    return o;
}

void
tem_am_metrics(struct tem_am *am, struct tem_metrics *m)
{
    static const struct {
        const char *name, *type, *help;
        size_t offset;
    } fams[] = {
#define TEM_AM_FAM(NAME, TYPE, FIELD, HELP) \
        { "trumpet_tem_alertmanager_" NAME, TYPE, HELP, \
          offsetof(struct tem_am_stats, FIELD) }
        TEM_AM_FAM("queued_total", "counter", queued,
                   "Alerts queued for an Alertmanager."),
        TEM_AM_FAM("sent_total", "counter", sent,
                   "Alerts delivered to an Alertmanager (answered 2xx)."),
        TEM_AM_FAM("failures_total", "counter", failures,
                   "Requests to an Alertmanager that failed (no answer, "
                   "or not 2xx); their alerts are tried again."),
        TEM_AM_FAM("dropped_total", "counter", dropped,
                   "Alerts dropped: the queue was full "
                   "(--alertmanager-queue), or undelivered at shutdown."),
        TEM_AM_FAM("rejected_total", "counter", rejected,
                   "Alerts an Alertmanager refused as invalid (400)."),
#undef TEM_AM_FAM
    };
    size_t n = tem_am_n_urls(am);
    struct tem_am_stats *st = xcalloc(MAX(n, 1), sizeof *st);

    for (size_t i = 0; i < n; i++) {
        tem_am_get_stats(am, i, &st[i]);
    }
    for (size_t f = 0; f < ARRAY_SIZE(fams); f++) {
        tem_metrics_family(m, fams[f].name, fams[f].type, fams[f].help);
        for (size_t i = 0; i < n; i++) {
            const uint64_t *v = (const uint64_t *)
                                ((const char *) &st[i] + fams[f].offset);
            tem_metrics_sample(m, fams[f].name, "url", am->targets[i].url,
                               *v);
        }
    }
    const char *name = "trumpet_tem_alertmanager_pending";
    tem_metrics_family(m, name, "gauge", "Alerts waiting for an "
                       "Alertmanager (queued or being sent).");
    for (size_t i = 0; i < n; i++) {
        tem_metrics_sample(m, name, "url", am->targets[i].url,
                           st[i].pending);
    }
    free(st);
}
