/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tpm-replay's command line (tpm-replay --help says what each option
 * does): replay_options_parse() reads the options into struct
 * replay_options, parses the local events (-e, -f) as it meets them,
 * checks the options against each other and applies the defaults that
 * depend on others (--sweep-budget, --linger, --epoch auto); tpm-replay.c
 * runs the replay from the result.  A bad option or event is a usage
 * error (exit 1, cli.h); --help prints the usage and exits 0.
 *
 * Thread-safety: none (getopt_long()'s globals); main reads the options
 * once, before any other thread starts.
 */
#ifndef REPLAY_OPTIONS_H
#define REPLAY_OPTIONS_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpm.h"

struct tpm_event;
struct tpm_prefix;

/* The table sizes given as options (the others are sized from the
 * capture when it is a file), and --max-table-memory. */
struct table_options {
    bool flow_table, triggers, chunks, tcp_state_pool;
    uint64_t memory_limit;
};

struct replay_options {
    const char *pcap;           /* The capture, the one operand. */

    /* Local events (-e, -f), by index, each name once.  Owned. */
    struct tpm_event **events;
    size_t n_events;

    /* The monitor's knobs, with the epoch ('auto' resolved), the sweep
     * budget and 'sweep_waits_for_reports' set; 'max_events' at least
     * 'n_events'. */
    struct tpm_params params;
    struct table_options tables;

    struct tpm_tunnel_ports tunnel_ports;   /* --tunnel-ports. */
    bool stats;                 /* --stats. */
    bool realtime;              /* --realtime. */
    uint64_t start_ns;          /* --start-at (0: none). */
    uint64_t loops;             /* --loop. */

    /* Controller mode: NULL without --controller, and then the options
     * below keep their defaults.  'controller' is the first --controller;
     * each one is a TEM of a cluster (docs/tem.md, "Past one TEM"), the
     * host's agent to each its own. */
    const char *controller;
    const char **controllers;   /* Every --controller, in order (owned
                                 * array). */
    size_t n_controllers;
    const char **tem_keys;      /* Every --tem-key, in order: one for all
                                 * the controllers, or one each (owned
                                 * array). */
    size_t n_tem_keys;
    char *host_id;              /* --host-id, owned; NULL: none given. */
    struct tpm_prefix *prefixes;        /* --prefix, owned. */
    size_t n_prefixes;
    const char *host_key_file;  /* --host-key-file (NULL: none). */
    bool insecure;              /* --insecure-plaintext. */
    uint64_t linger_ns;         /* 0 without --controller. */
    uint64_t connect_timeout_ns;
    uint64_t settle_ns;
    bool require;               /* --require-controller. */
    uint32_t outage_buffer;     /* 0: the agent's default. */
};

void replay_options_parse(int argc, char *argv[], struct replay_options *);
void replay_options_destroy(struct replay_options *);

#endif /* replay-options.h */
