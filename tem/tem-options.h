/* SPDX-License-Identifier: Apache-2.0 */
/*
 * trumpet-tem's command line (trumpet-tem --help, docs/tem.md):
 * tem_options_parse() reads the options into struct tem_options, the
 * daemon's own (sockets, files, keys, batches) and the core's
 * configuration (struct tem_config, tem-core.h), with their defaults.
 * A bad option is a usage error (exit 2, cli.h); --help prints the usage
 * and exits 0.  tem.c runs the daemon from the result.
 *
 * Thread-safety: none (getopt_long()'s globals); main reads the options
 * once, at start.
 */
#ifndef TEM_OPTIONS_H
#define TEM_OPTIONS_H 1

#include <stdbool.h>
#include <stdint.h>

#include "tem-am.h"
#include "tem-cluster.h"
#include "tem-core.h"
#include "tem-http.h"

struct tem_options {
    const char *listen;
    const char *pub;
    const char *ctl;
    const char *state_file;
    const char *alert_file;
    const char *key_file;       /* The TEM's key pair. */
    const char *allow_file;     /* Keys allowed in. */
    const char *metrics;        /* --metrics (tem_http_parse()). */
    bool insecure;              /* --insecure-plaintext. */
    bool alerts_stdout;
    uint32_t batch;             /* Frames read from each socket per turn
                                 * of the loop, before its timers. */
    uint64_t overrun_min_ns;    /* The loop running its timers this much
                                 * later than planned overran (tem.c). */
    uint32_t max_frame;         /* ZMQ_MAXMSGSIZE of the hosts' socket. */
    uint32_t max_request;       /* ... of the control socket. */
    int sndhwm, rcvhwm;         /* Frames, each way, per connection... */
    uint64_t peer_memory;       /* ... from these bytes, if not given. */
    int pub_hwm;                /* Alerts queued per subscriber. */
    int handshake_ms;           /* ZMQ_HANDSHAKE_IVL of every socket. */
    uint32_t fd_reserve;        /* Descriptors kept (tem-fd.h). */
    size_t alert_buffer;        /* Bytes of each alert output's ring. */
    struct tem_http_limits http;    /* --metrics-* limits. */
    struct tem_am_config am;    /* --alertmanager*: n_urls 0 for none. */
    struct tem_cluster_options cluster;    /* --etcd, --etcd-ttl,
                                            * --standby. */
    struct tem_config cfg;
};

/* Default --peer-memory, and the least high-water mark it gives. */
#define TEM_PEER_MEMORY (8 * 1024 * 1024)
#define TEM_HWM_FLOOR 4

/* Alerts are counted at this size for the subscribers' queues. */
#define TEM_ALERT_BYTES 16384

void tem_options_parse(int argc, char *argv[], struct tem_options *);

#endif /* tem-options.h */
