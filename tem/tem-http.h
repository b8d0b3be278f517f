/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TEM's metrics server: GET /metrics answers Prometheus text
 * (tem-metrics.h) over HTTP, served by libmicrohttpd without a thread of
 * its own.
 *
 * The daemon's loop owns it: tem_http_fd() is a file descriptor to add to
 * its poll set, and tem_http_run() does the server's pending work (accept,
 * read, answer, time out) without blocking, calling the 'fill' callback in
 * the loop's own thread, so that the callback reads the TEM's state
 * without locks; tem_http_next_run() says when it must run even without
 * input (libmicrohttpd's own timeout, MHD_get_timeout(), and the
 * deadlines below).
 *
 * Its work is bounded by 'struct tem_http_limits' (--metrics-* options):
 * at most 'max_connections' connections, at most 'per_ip' of them from
 * one address (below the total, so that one address cannot hold them
 * all), each with a request of at most TEM_HTTP_MEMORY bytes.  A
 * connection has 'timeout_ns' to complete a request, counted from its
 * accept or its previous answer, however slowly it trickles its headers:
 * past that, it is shut down (counted in 'timeouts'); the same time idle
 * closes it too.  A scrape less than 'cache_ns' after the last one gets
 * the same text, so that scrapes in a loop cost the TEM one exposition a
 * 'cache_ns'.
 *
 * A fault of the server (a response that cannot be built or queued, a
 * failing MHD_run(), any error libmicrohttpd reports, such as a client
 * that closed mid-request) is counted and logged at most once every 10
 * seconds; it never stops the TEM.
 */
#ifndef TEM_HTTP_H
#define TEM_HTTP_H 1

#include <stdbool.h>
#include <stdint.h>

struct tem_metrics;

#define TEM_HTTP_MEMORY (32 * 1024)

struct tem_http_limits {
    uint32_t max_connections;   /* --metrics-connections (16). */
    uint32_t per_ip;            /* --metrics-per-ip (4). */
    uint64_t timeout_ns;        /* --metrics-timeout (5 s). */
    uint64_t cache_ns;          /* --metrics-cache (1 s). */
};

#define TEM_HTTP_LIMITS_DEFAULT { 16, 4, 5000000000ULL, 1000000000ULL }

/* Parses 'spec': "off", "PORT" (on 127.0.0.1), "ADDRESS:PORT" with a
 * numeric IPv4 address or "[ADDRESS]:PORT" with an IPv6 one; PORT 0 picks
 * a free port.  Returns NULL, or an error (caller frees); sets '*off'. */
char *tem_http_parse(const char *spec, bool *off)
    __attribute__((warn_unused_result));

/* Fills 'm' with the metrics to serve. */
typedef void tem_http_fill_func(void *aux, struct tem_metrics *m);

struct tem_http_stats {
    uint64_t requests;          /* Every request answered. */
    uint64_t scrapes;           /* GET /metrics answered with metrics. */
    uint64_t errors;            /* Faults (above). */
    uint64_t cached;            /* Scrapes answered from the cache. */
    uint64_t timeouts;          /* Connections shut down at their
                                 * deadline. */
    uint32_t connections;       /* Open now. */
};

/* Starts a server on 'spec' (tem_http_parse()) within 'limits'.  Returns
 * NULL and an error in '*errp' (caller frees). */
struct tem_http *tem_http_start(const char *spec,
                                const struct tem_http_limits *limits,
                                tem_http_fill_func *, void *aux,
                                char **errp);
void tem_http_stop(struct tem_http *);

/* The descriptor to poll for input, and the address bound ("IP:PORT",
 * "[IP]:PORT"). */
int tem_http_fd(const struct tem_http *);
const char *tem_http_address(const struct tem_http *);

/* Does the server's pending work, without blocking, and shuts down the
 * connections past their deadline. */
void tem_http_run(struct tem_http *);

/* The monotonic time (ns) by which tem_http_run() must run even if its
 * descriptor has no input (UINT64_MAX: no such time). */
uint64_t tem_http_next_run(const struct tem_http *);

void tem_http_get_stats(const struct tem_http *, struct tem_http_stats *);

#endif /* tem-http.h */
