/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tpm-replay's tables sized from the capture it reads.
 *
 * The monitor's tables never grow: they are sized when it is created, as
 * a switch's must be.  Offline, that would make a default run exact only
 * for captures that happen to fit the defaults.  So, reading a file,
 * tpm-replay first reads the capture once more (the same libpcap reading
 * and the same parser and hash, lib/packet.h, as the replay), counts what
 * the tables will have to hold at most (replay_census()), and sizes them
 * from that count (replay_flow_table_size() and the bounds below, applied
 * by tpm-replay.c).  Every count bounds what the monitor can need at
 * once (with the margins said below), so a run sized from it loses
 * nothing to a full table;
 * should one still fill, the monitor counts the loss and tpm-replay says
 * so and exits with its loss status, as with any other size.
 *
 * What is counted, per the monitor's own rules:
 *
 *   - flows: the distinct flow keys of the frames the parser accepts; the
 *     flow table holds at most these at once.  Their hashes are kept, in
 *     the order of their first packets, to place them as the flow table
 *     would and size it so that no flow can be pushed out of its probing
 *     window (replay_flow_table_size()).
 *
 *   - trigger instances: one per event and group key that a flow matching
 *     the event's filter falls into (tpm_match_key(), the filter test of
 *     the trigger index); the monitor keeps at most one instance per
 *     (event, group) at once.  For a 5-tuple event that is one per
 *     matching flow; for coarser groups the distinct masked keys; a
 *     catch-all group ("nw_src/0") has one per IP version.
 *
 *   - flow-list chunks: a coarse instance lists its flows in one inline
 *     item and then 64-item chunks.  A chunk is taken only when the one
 *     before it was filled by 64 appends, and a flow is appended when it
 *     is matched: at its first packet, and again after a pause of two
 *     epochs or more (its entry may have been retired, freed or reused
 *     meanwhile: an "activation").  So an instance never holds more than
 *     ceil((activations - 1) / 64) chunks, nor (once the lists have been
 *     swept) more than one per flow of the group.  5-tuple instances list
 *     their one flow inline.  A flow matched again before the sweep has
 *     dropped its previous item (within one epoch) is not counted:
 *     tpm-replay.c adds an eighth for it.
 *
 *   - connections with TCP state: one at most per flow matched by an
 *     event that needs per-flow state (both directions share one); those
 *     of flows gone wait for the scrubber to return them to the pool,
 *     for which tpm-replay.c adds an eighth.
 *
 * Thread-safety: none needed (tpm-replay's main thread).
 */
#ifndef TPM_REPLAY_SIZING_H
#define TPM_REPLAY_SIZING_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "event.h"

struct replay_census {
    uint64_t packets;           /* Frames read. */
    uint64_t flows;             /* Distinct flow keys of parsed frames. */
    uint64_t instances;         /* Trigger instances, all events. */
    uint64_t max_instances;     /* Trigger instances of the event with
                                 * the most. */
    uint64_t chunks;            /* Flow-list chunks, all instances. */
    uint64_t state_flows;       /* Flows matched by an event that needs
                                 * per-flow state. */
    bool truncated;             /* Stopped at 'max_flows' flows: the
                                 * counts are those of the capture's
                                 * beginning. */
    uint32_t *hashes;           /* The flows' hashes (tpm_key_hash()), in
                                 * the order of their first packets. */
};

/* Reads pcap or pcapng 'file' and counts in '*census' what the monitor's
 * tables must hold to replay it 'loops' times with the 'n_events' events
 * 'events' and epochs of 'epoch_ns'.  Stops once more than 'max_flows'
 * distinct flows are seen (sets 'truncated').  Returns NULL, or an error
 * message (caller frees) if the file cannot be read. */
char *replay_census(const char *file, struct tpm_event *const *events,
                    size_t n_events, uint64_t epoch_ns, uint64_t loops,
                    uint64_t max_flows, struct replay_census *census)
    __attribute__((warn_unused_result));

void replay_census_destroy(struct replay_census *);

/* Returns the flow-table size for 'census': the smallest power of two, at
 * least 'min_size' and twice the flows, in which the flows placed by
 * their hashes as the flow table places them (linear probing, every flow
 * present at once) form no cluster longer than 'probe_limit' slots.
 * Stores the longest cluster in '*longest'.  Returns 0 if no size up to
 * 'max_size' will do. */
uint32_t replay_flow_table_size(const struct replay_census *,
                                uint32_t probe_limit, uint32_t min_size,
                                uint32_t max_size, uint32_t *longest);

#endif /* replay-sizing.h */
