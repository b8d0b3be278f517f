/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TEM fixture shared by the fuzz targets of the TEM's host input and
 * control commands (tests/fuzz/fuzz-tem-host.c, fuzz-tem-ctl.c): a core
 * (tem/tem-core.h) with small limits and a fake clock whose every sent
 * frame and alert is checked (the TEM never sends a frame that does not
 * decode or a message that does not validate; every alert is a JSON
 * object), and simulated hosts.
 */
#ifndef FUZZ_TEM_UTIL_H
#define FUZZ_TEM_UTIL_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tem-core.h"
#include "tproto.h"

#define FUZZ_TEM_EPOCH_NS (10 * 1000 * 1000ULL)
#define FUZZ_TEM_PEERS 4        /* Peer identities "p0".."p3". */
#define FUZZ_TEM_RECENT 32      /* Commands remembered per peer. */

/* A command the core sent to a peer: what a host needs to answer it. */
struct fuzz_tem_cmd {
    Trumpet__Message__BodyCase kind;    /* Install, Remove, Configure,
                                         * Poll or PollBatch. */
    uint64_t cookie;
    uint32_t event_id;
    uint64_t epoch;                     /* Poll. */
    struct tpm_key group;               /* Poll. */
    uint32_t n_entries;                 /* PollBatch. */
};

struct fuzz_tem {
    uint64_t now;
    struct tem_core *core;
    struct fuzz_tem_cmd cmds[FUZZ_TEM_PEERS][FUZZ_TEM_RECENT];
    size_t n_cmds[FUZZ_TEM_PEERS];      /* Ever sent (ring). */
    uint64_t frames_out, alerts;
};

/* Creates the core of 'ft' (memset to zero first). */
void fuzz_tem_init(struct fuzz_tem *ft);
void fuzz_tem_destroy(struct fuzz_tem *ft);

/* Feeds 'b' (emptied) to the core as a frame of protocol 'version' (0:
 * the highest) from peer 'peer' (0 to FUZZ_TEM_PEERS - 1), then flushes
 * the core's output. */
void fuzz_tem_input(struct fuzz_tem *ft, int peer, uint32_t version,
                    struct tproto_batch *b);

/* Says Hello from host id 'id' on peer 'peer' with prefixes 'prefixes'
 * (text, NULL: none), protocol 'version' at most. */
void fuzz_tem_hello(struct fuzz_tem *ft, int peer, const char *id,
                    const char *prefixes, uint32_t version);

/* Moves the clock on by 'ns', runs the timers and flushes. */
void fuzz_tem_advance(struct fuzz_tem *ft, uint64_t ns);

/* Renders every JSON view of the core (hosts, status, events, each
 * event, alerts), as tem-ctl would ask for them. */
void fuzz_tem_views(struct fuzz_tem *ft);

#endif /* fuzz-tem-util.h */
