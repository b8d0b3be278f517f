/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rate-limited warnings of the TEM daemon's own machinery: the metrics
 * server's faults (tem-http.h), alert output that cannot keep up
 * (tem-sink.h), connections refused for want of descriptors (tem-fd.h).
 * Each kind of warning has its own 'struct tem_warn': at most one line
 * every TEM_WARN_INTERVAL_NS, which tells how many were suppressed since
 * the last one, so that a peer that provokes a fault in a loop cannot
 * flood the log.  (The core's own lines go through tem-log.c's limiters,
 * on the core's clock.)
 *
 * Thread-safety: a 'struct tem_warn' is used by one thread.
 */
#ifndef TEM_WARN_H
#define TEM_WARN_H 1

#include <stdint.h>

#define TEM_WARN_INTERVAL_NS 10000000000ULL     /* 10 s. */

struct tem_warn {
    uint64_t next_ns;           /* Monotonic: no line before. */
    uint64_t suppressed;        /* Lines not written since the last. */
};

#define TEM_WARN_INITIALIZER { 0, 0 }

/* Logs 'format' as a warning unless 'w' logged one less than
 * TEM_WARN_INTERVAL_NS ago. */
void tem_warn(struct tem_warn *w, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

#endif /* tem-warn.h */
