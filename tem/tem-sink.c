/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A line sink that never blocks (tem-sink.h).
 *
 * The ring holds bytes from 'head' ('len' of them, wrapping at
 * 'capacity'); a write takes the contiguous run at 'head'.  Lines are
 * counted when their newline is written: 'nl' counts the newlines in the
 * ring, and a write counts those of the bytes it took.
 */
#include "tem-sink.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tem-warn.h"
#include "util.h"

struct tem_sink {
    int fd;
    bool owned;
    int old_flags;              /* -1: unknown, not restored. */
    char *name;
    char *ring;
    size_t capacity, head, len;
    size_t nl;                  /* Lines (newlines) in the ring. */
    struct tem_sink_stats stats;
    struct tem_warn warn;
};

struct tem_sink *
tem_sink_create(int fd, bool owned, size_t capacity, const char *name)
{
    struct tem_sink *s = xzalloc(sizeof *s);

    s->fd = fd;
    s->owned = owned;
    s->name = xstrdup(name);
    s->capacity = capacity;
    s->ring = xmalloc(capacity);
    s->old_flags = fcntl(fd, F_GETFL);
    if (s->old_flags >= 0 && !(s->old_flags & O_NONBLOCK)
        && fcntl(fd, F_SETFL, s->old_flags | O_NONBLOCK)) {
        s->old_flags = -1;
    }
    s->warn = (struct tem_warn) TEM_WARN_INITIALIZER;
    return s;
}

void
tem_sink_destroy(struct tem_sink *s)
{
    if (!s) {
        return;
    }
    tem_sink_flush(s);
    if (s->owned) {
        close(s->fd);
    } else if (s->old_flags >= 0) {
        fcntl(s->fd, F_SETFL, s->old_flags);
    }
    free(s->ring);
    free(s->name);
    free(s);
}

/* Counts the newlines of 'n' bytes at 'p'. */
static size_t
tem_sink_count_nl__(const char *p, size_t n)
{
    size_t count = 0;
    for (const char *end = p + n; (p = memchr(p, '\n', end - p)); p++) {
        count++;
    }
    return count;
}

/* Copies 'n' bytes of 'p' to the ring's tail (room checked). */
static void
tem_sink_append__(struct tem_sink *s, const char *p, size_t n)
{
    size_t tail = (s->head + s->len) % s->capacity;
    size_t first = MIN(n, s->capacity - tail);

    memcpy(s->ring + tail, p, first);
    memcpy(s->ring, p + first, n - first);
    s->len += n;
}

bool
tem_sink_put(struct tem_sink *s, const char *line, size_t len)
{
    if (len + 1 > s->capacity - s->len) {
        s->stats.dropped++;
        tem_warn(&s->warn, "alerts to %s: %zu bytes wait, no room for an "
                 "alert of %zu bytes in --alert-buffer=%zu: dropped "
                 "(%"PRIu64" so far)", s->name, s->len, len + 1,
                 s->capacity, s->stats.dropped);
        tem_sink_flush(s);
        return false;
    }
    tem_sink_append__(s, line, len);
    tem_sink_append__(s, "\n", 1);
    s->nl++;
    tem_sink_flush(s);
    return true;
}

void
tem_sink_flush(struct tem_sink *s)
{
    while (s->len) {
        size_t run = MIN(s->len, s->capacity - s->head);
        ssize_t n = write(s->fd, s->ring + s->head, run);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                return;
            }
            s->stats.errors++;
            s->stats.dropped += s->nl;
            tem_warn(&s->warn, "alerts to %s: %s: %zu alerts dropped "
                     "(%"PRIu64" so far)", s->name, strerror(errno), s->nl,
                     s->stats.dropped);
            s->head = s->len = s->nl = 0;
            return;
        }
        size_t lines = tem_sink_count_nl__(s->ring + s->head, n);
        s->nl -= lines;
        s->stats.lines += lines;
        s->stats.bytes += n;
        s->head = (s->head + n) % s->capacity;
        s->len -= n;
        if (!s->len) {
            s->head = 0;
        }
    }
}

bool
tem_sink_pending(const struct tem_sink *s)
{
    return s->len > 0;
}

int
tem_sink_fd(const struct tem_sink *s)
{
    return s->fd;
}

void
tem_sink_get_stats(const struct tem_sink *s, struct tem_sink_stats *st)
{
    *st = s->stats;
    st->pending = s->len;
    st->capacity = s->capacity;
}
