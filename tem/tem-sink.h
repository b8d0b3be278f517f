/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A line sink that never blocks: the TEM's alert output on standard
 * output and in --alert-file.
 *
 * Alerts must not wait for their reader: a pipe nobody reads, a stopped
 * pager or a slow journal would otherwise stop the whole TEM at its next
 * alert, hosts and tem-ctl included.  A sink owns a ring of bytes of
 * fixed capacity (--alert-buffer) in front of a descriptor made
 * non-blocking (O_NONBLOCK):
 *
 *   - tem_sink_put() appends one line whole, or drops it whole when the
 *     ring has no room for it (counted in 'dropped', and warned about at
 *     most once every 10 s), then writes what it can;
 *   - tem_sink_flush() writes what it can: a partial write keeps the
 *     rest for later, EAGAIN waits for the descriptor to be writable
 *     (tem_sink_pending() says when to poll it for POLLOUT); any other
 *     error (EPIPE: the reader is gone) drops what the ring holds
 *     (counted in 'dropped' as lines and in 'errors', warned about);
 *   - tem_sink_destroy() writes what it can without waiting and restores
 *     the descriptor's flags.
 *
 * O_NONBLOCK belongs to the open file description, which standard output
 * shares with whoever else has it open (standard error too, when both
 * are the same pipe or journal stream): their writes may then fail with
 * EAGAIN rather than wait.  The TEM's own log lines, on standard error,
 * are then lost rather than waited for.
 *
 * Thread-safety: a sink is used by one thread.
 */
#ifndef TEM_SINK_H
#define TEM_SINK_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tem_sink_stats {
    uint64_t lines;             /* Lines written whole. */
    uint64_t bytes;             /* Bytes written. */
    uint64_t dropped;           /* Lines dropped: no room, or an error. */
    uint64_t errors;            /* Write errors other than EAGAIN. */
    size_t pending;             /* Bytes waiting in the ring. */
    size_t capacity;            /* The ring's size. */
};

/* A sink of 'capacity' bytes on descriptor 'fd', named 'name' in its
 * warnings; 'owned' closes 'fd' when the sink is destroyed.  Makes 'fd'
 * non-blocking. */
struct tem_sink *tem_sink_create(int fd, bool owned, size_t capacity,
                                 const char *name);
void tem_sink_destroy(struct tem_sink *);

/* Appends 's' ('len' bytes, no newline) and a newline, whole or not at
 * all, then writes what it can.  Returns false if the line was
 * dropped. */
bool tem_sink_put(struct tem_sink *, const char *s, size_t len);

/* Writes what the descriptor takes without blocking. */
void tem_sink_flush(struct tem_sink *);

/* True if bytes wait for the descriptor to be writable. */
bool tem_sink_pending(const struct tem_sink *);
int tem_sink_fd(const struct tem_sink *);

void tem_sink_get_stats(const struct tem_sink *, struct tem_sink_stats *);

#endif /* tem-sink.h */
