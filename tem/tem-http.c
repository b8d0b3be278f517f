/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TEM's metrics server (tem-http.h), on libmicrohttpd.
 *
 * MHD runs without a thread of its own (no MHD_USE_INTERNAL_POLLING_THREAD)
 * and with epoll (MHD_USE_EPOLL): it then has one descriptor, readable
 * whenever it has work, which the TEM adds to its zmq_poll() set;
 * MHD_run() then does that work without waiting.  Every callback runs in
 * the TEM's thread, inside MHD_run().
 *
 * A request is answered from its first callback (a GET has no body): the
 * 'fill' callback writes the whole scrape into a buffer kept between
 * scrapes (and reused as is for 'cache_ns'), which MHD copies into the
 * response.  Anything but GET or HEAD is answered 405, any path but
 * /metrics 404 (/ names the path).  MHD's own error messages go through
 * tem_warn(), rate-limited like the faults.
 *
 * Deadlines: MHD's own timeout (MHD_OPTION_CONNECTION_TIMEOUT) only
 * counts idle time, and a client that sends a byte of headers now and
 * then would keep its connection for ever.  So every connection has a
 * slot (MHD_OPTION_NOTIFY_CONNECTION; its socket context points to it)
 * holding the time its current request started: its accept, then the
 * end of each answer (MHD_OPTION_NOTIFY_COMPLETED).  tem_http_run() shuts
 * down (shutdown(2), the descriptor stays MHD's) every connection whose
 * request started 'timeout_ns' ago; MHD then reads the end of the stream
 * and closes it.
 */
#include "tem-http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "clock.h"
#include "tem-metrics.h"
#include "tem-warn.h"
#include "tpm-log.h"
#include "util.h"

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* A connection (see the deadlines above). */
struct http_conn {
    bool used;
    bool cut;                   /* Shut down at its deadline. */
    int fd;
    uint64_t since_ns;          /* Monotonic: its request started. */
};

struct tem_http {
    struct MHD_Daemon *mhd;
    int fd;
    char address[64];
    struct tem_http_limits limits;
    tem_http_fill_func *fill;
    void *aux;
    struct tem_metrics buf;
    uint64_t filled_ns;         /* Monotonic: 'buf' made (0: never). */
    struct tem_http_stats stats;
    struct http_conn *conns;    /* 'limits.max_connections' slots. */
    struct tem_warn warn;       /* Faults. */
};

/* Parsed form of a spec. */
struct http_addr {
    bool off;
    bool v6;
    struct sockaddr_in in4;
    struct sockaddr_in6 in6;
};

static char *
parse_addr(const char *spec, struct http_addr *a)
{
    char host[64];
    const char *port;

    memset(a, 0, sizeof *a);
    if (!strcmp(spec, "off")) {
        a->off = true;
        return NULL;
    }
    if (spec[0] == '[') {
        const char *end = strchr(spec, ']');
        if (!end || end[1] != ':'
            || (size_t) (end - spec - 1) >= sizeof host) {
            goto bad;
        }
        memcpy(host, spec + 1, end - spec - 1);
        host[end - spec - 1] = '\0';
        port = end + 2;
        a->v6 = true;
    } else {
        const char *colon = strrchr(spec, ':');
        if (!colon) {
            snprintf(host, sizeof host, "127.0.0.1");
            port = spec;
        } else if ((size_t) (colon - spec) < sizeof host) {
            memcpy(host, spec, colon - spec);
            host[colon - spec] = '\0';
            port = colon + 1;
        } else {
            goto bad;
        }
    }

    uint64_t p;
    if (!tpm_parse_uint(port, 0, 65535, &p)) {
        goto bad;
    }
    if (a->v6) {
        a->in6.sin6_family = AF_INET6;
        a->in6.sin6_port = htons(p);
        if (inet_pton(AF_INET6, host, &a->in6.sin6_addr) != 1) {
            goto bad;
        }
    } else {
        a->in4.sin_family = AF_INET;
        a->in4.sin_port = htons(p);
        if (inet_pton(AF_INET, host, &a->in4.sin_addr) != 1) {
            goto bad;
        }
    }
    return NULL;

bad:
    return xasprintf("'%s' is not off, PORT, IPV4:PORT or [IPV6]:PORT "
                     "(numeric address, port 0 to 65535)", spec);
}

char *
tem_http_parse(const char *spec, bool *off)
{
    struct http_addr a;
    char *error = parse_addr(spec, &a);
    *off = !error && a.off;
    return error;
}

/* Counts a fault and logs it, at most once every 10 s. */
static void
http_fault(struct tem_http *h, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

static void
http_fault(struct tem_http *h, const char *format, ...)
{
    h->stats.errors++;
    va_list args;
    va_start(args, format);
    char *msg = xvasprintf(format, args);
    va_end(args);
    tem_warn(&h->warn, "metrics server: %s", msg);
    free(msg);
}

static void
mhd_logger(void *aux, const char *format, va_list args)
{
    struct tem_http *h = aux;
    char buf[256];

    vsnprintf(buf, sizeof buf, format, args);
    buf[strcspn(buf, "\n")] = '\0';
    if (h) {
        http_fault(h, "%s", buf);
    }
}

static enum MHD_Result
answer(struct tem_http *h, struct MHD_Connection *conn, unsigned int status,
       const char *body, size_t len, const char *type)
{
    struct MHD_Response *r
        = MHD_create_response_from_buffer(len, (void *) body,
                                          MHD_RESPMEM_MUST_COPY);
    if (!r) {
        http_fault(h, "cannot create a response of %zu bytes", len);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED) {
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    }
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    if (ret != MHD_YES) {
        http_fault(h, "cannot queue a response");
    }
    h->stats.requests++;
    return ret;
}

static enum MHD_Result
on_request(void *aux, struct MHD_Connection *conn, const char *url,
           const char *method, const char *version, const char *upload,
           size_t *upload_size, void **con_cls)
{
    struct tem_http *h = aux;
    static const char text[] = "text/plain; charset=utf-8";

    if (*upload_size) {
        /* A body: ignored (the answer is 405 anyway). */
        *upload_size = 0;
        return MHD_YES;
    }
    if (strcmp(method, MHD_HTTP_METHOD_GET)
        && strcmp(method, MHD_HTTP_METHOD_HEAD)) {
        static const char msg[] = "only GET and HEAD\n";
        return answer(h, conn, MHD_HTTP_METHOD_NOT_ALLOWED, msg,
                      sizeof msg - 1, text);
    }
    if (!strcmp(url, "/")) {
        static const char msg[] = "trumpet-tem: metrics at /metrics\n";
        return answer(h, conn, MHD_HTTP_OK, msg, sizeof msg - 1, text);
    }
    if (strcmp(url, "/metrics")) {
        static const char msg[] = "not found: metrics at /metrics\n";
        return answer(h, conn, MHD_HTTP_NOT_FOUND, msg, sizeof msg - 1,
                      text);
    }
    uint64_t now = tpm_clock_mono_ns();
    h->stats.scrapes++;
    if (h->filled_ns && now - h->filled_ns < h->limits.cache_ns) {
        h->stats.cached++;
    } else {
        tem_metrics_clear(&h->buf);
        h->fill(h->aux, &h->buf);
        h->filled_ns = now;
    }
    return answer(h, conn, MHD_HTTP_OK, h->buf.b.s ? h->buf.b.s : "",
                  h->buf.b.len, CONTENT_TYPE);
}

/* A connection opens or closes: takes or frees its slot. */
static void
on_connection(void *aux, struct MHD_Connection *conn, void **socket_context,
              enum MHD_ConnectionNotificationCode toe)
{
    struct tem_http *h = aux;
    struct http_conn *c = *socket_context;

    if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        if (c) {
            c->used = false;
            h->stats.connections--;
        }
        *socket_context = NULL;
        return;
    }
    const union MHD_ConnectionInfo *info
        = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    for (uint32_t i = 0; info && i < h->limits.max_connections; i++) {
        c = &h->conns[i];
        if (!c->used) {
            *c = (struct http_conn) {
                .used = true,
                .fd = info->connect_fd,
                .since_ns = tpm_clock_mono_ns(),
            };
            *socket_context = c;
            h->stats.connections++;
            return;
        }
    }
    /* MHD keeps within 'max_connections': not reached. */
    http_fault(h, "a connection past the limit of %"PRIu32" has no "
               "deadline", h->limits.max_connections);
}

/* A request was answered (or abandoned): the connection's next request
 * starts now. */
static void
on_completed(void *aux, struct MHD_Connection *conn, void **con_cls,
             enum MHD_RequestTerminationCode toe)
{
    const union MHD_ConnectionInfo *info
        = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct http_conn *c = info ? info->socket_context : NULL;

    if (c) {
        c->since_ns = tpm_clock_mono_ns();
    }
}

struct tem_http *
tem_http_start(const char *spec, const struct tem_http_limits *limits,
               tem_http_fill_func *fill, void *aux, char **errp)
{
    struct http_addr a;
    char *error = parse_addr(spec, &a);

    *errp = NULL;
    if (error || a.off) {
        *errp = error ? error : xstrdup("metrics server is off");
        return NULL;
    }

    struct tem_http *h = xzalloc(sizeof *h);
    h->limits = *limits;
    h->conns = xcalloc(limits->max_connections, sizeof *h->conns);
    h->fill = fill;
    h->aux = aux;
    h->warn = (struct tem_warn) TEM_WARN_INITIALIZER;
    tem_metrics_init(&h->buf);
    /* MHD's idle timeout, in whole seconds, is the deadline rounded up. */
    unsigned int idle_s = MAX(1, (limits->timeout_ns + 999999999)
                                 / 1000000000);
    const struct sockaddr *sa = a.v6 ? (const struct sockaddr *) &a.in6
                                     : (const struct sockaddr *) &a.in4;
    h->mhd = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_ERROR_LOG
                              | (a.v6 ? MHD_USE_IPv6 : 0),
                              0, NULL, NULL, on_request, h,
                              MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, h,
                              MHD_OPTION_SOCK_ADDR, sa,
                              MHD_OPTION_CONNECTION_LIMIT,
                              (unsigned int) limits->max_connections,
                              MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                              (unsigned int) limits->per_ip,
                              MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                              (size_t) TEM_HTTP_MEMORY,
                              MHD_OPTION_CONNECTION_TIMEOUT, idle_s,
                              MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                              MHD_OPTION_END);
    if (!h->mhd) {
        *errp = xasprintf("cannot serve metrics on %s (address in use or "
                          "not on this host?)", spec);
        tem_metrics_destroy(&h->buf);
        free(h->conns);
        free(h);
        return NULL;
    }
    const union MHD_DaemonInfo *info
        = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    h->fd = info ? info->epoll_fd : -1;
    info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_BIND_PORT);
    unsigned int port = info ? info->port : 0;
    char ip[INET6_ADDRSTRLEN];
    if (a.v6) {
        inet_ntop(AF_INET6, &a.in6.sin6_addr, ip, sizeof ip);
        snprintf(h->address, sizeof h->address, "[%s]:%u", ip, port);
    } else {
        inet_ntop(AF_INET, &a.in4.sin_addr, ip, sizeof ip);
        snprintf(h->address, sizeof h->address, "%s:%u", ip, port);
    }
    if (h->fd < 0) {
        *errp = xasprintf("metrics server on %s has no descriptor to poll",
                          h->address);
        tem_http_stop(h);
        return NULL;
    }
    return h;
}

void
tem_http_stop(struct tem_http *h)
{
    if (h) {
        MHD_stop_daemon(h->mhd);
        tem_metrics_destroy(&h->buf);
        free(h->conns);
        free(h);
    }
}

int
tem_http_fd(const struct tem_http *h)
{
    return h->fd;
}

const char *
tem_http_address(const struct tem_http *h)
{
    return h->address;
}

void
tem_http_run(struct tem_http *h)
{
    if (MHD_run(h->mhd) != MHD_YES) {
        http_fault(h, "MHD_run failed: %s", strerror(errno));
    }

    uint64_t now = tpm_clock_mono_ns();
    for (uint32_t i = 0; i < h->limits.max_connections; i++) {
        struct http_conn *c = &h->conns[i];
        if (c->used && !c->cut && now - c->since_ns >= h->limits.timeout_ns) {
            /* MHD reads the end of the stream and closes it. */
            shutdown(c->fd, SHUT_RDWR);
            c->cut = true;
            h->stats.timeouts++;
        }
    }
}

uint64_t
tem_http_next_run(const struct tem_http *h)
{
    MHD_UNSIGNED_LONG_LONG ms;
    uint64_t next = UINT64_MAX;

    if (MHD_get_timeout(h->mhd, &ms) == MHD_YES) {
        next = tpm_clock_mono_ns() + MIN(ms, 3600000ULL) * 1000000;
    }
    for (uint32_t i = 0; i < h->limits.max_connections; i++) {
        const struct http_conn *c = &h->conns[i];
        if (c->used && !c->cut) {
            next = MIN(next, c->since_ns + h->limits.timeout_ns);
        }
    }
    return next;
}

void
tem_http_get_stats(const struct tem_http *h, struct tem_http_stats *s)
{
    *s = h->stats;
}
