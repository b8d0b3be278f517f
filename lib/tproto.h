/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TPM <-> TEM protocol (proto/trumpet.proto) on top of the code that
 * protoc-c generates from it at build time: version constants, decoding
 * with validation, encoding of batches, and conversions between the wire
 * types and lib/'s types.  The host agent (lib/agent.h), the TEM (tem/)
 * and the tests use only this to read and write frames.
 *
 * Validation: tproto_decode() rejects a frame that protobuf-c cannot
 * unpack (truncated, garbage, a required field missing), that is too
 * large, empty or has too many messages, or whose version is not one we
 * speak (see "Versions" below); tproto_validate() then checks each message
 * on its own (string lengths and characters, enum values, ids, key and
 * prefix shapes, epoch bounds, finite values) so that a caller drops just
 * the bad message and counts it.
 *
 * Versions: every frame carries its sender's version.  A frame of a
 * version outside [TPROTO_VERSION_MIN, TPROTO_VERSION_MAX] is rejected by
 * tproto_decode() unless every message in it is a Hello, a Refuse or a
 * Bye: these session messages keep their format in every version, so
 * that a TEM can read the version range of any host's Hello and answer
 * Refuse with a clear reason, and a host can read that Refuse (or a Bye)
 * and log it.  A caller that receives such a frame (frame->version not
 * tproto_version_supported()) must only negotiate or log, never act on
 * it otherwise.  Hello carries the sender's range; the TEM picks the
 * version with tproto_version_choose() and answers Welcome, or Refuse
 * (tproto_add_refuse() always states our own range).
 *
 * Thread-safety: none needed (no global state).
 */
#ifndef TPM_TPROTO_H
#define TPM_TPROTO_H 1

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "packet.h"
#include "prefix.h"
#include "trumpet.pb-c.h"

/* Versions this build speaks.  Frames carry the sender's version; Hello
 * carries a range and Welcome the version chosen.  Version 2 added
 * Configure (and Ack/Nack with event_id 0 answering it): only send it in
 * a session of version TPROTO_VERSION_CONFIGURE or later, since an older
 * peer drops a message of a kind it does not know without answering (it
 * decodes as a message with no body, see proto/trumpet.proto). */
#define TPROTO_VERSION_MIN 1
#define TPROTO_VERSION_MAX 4
#define TPROTO_VERSION_CONFIGURE 2

/* Version 3 added two things, one version for both (a peer of version 3
 * speaks both):
 *
 *   - PollBatch and PollBatchReply: in a session of version
 *     TPROTO_VERSION_POLL_BATCH or later the TEM sends a host one
 *     PollBatch per epoch instead of a Poll per (event, group), and the
 *     host answers with one PollBatchReply; older sessions keep Poll and
 *     PollReply.
 *
 *   - Confirmed delivery: satisfactions (and PollReplies) carry a
 *     sequence number per run of the host's agent (Hello.instance) and the
 *     TEM confirms what it took (Heartbeat.received).  A host relies on
 *     confirmations only in sessions of version TPROTO_VERSION_CONFIRM or
 *     later (an older TEM ignores the fields and confirms nothing). */
#define TPROTO_VERSION_POLL_BATCH 3
#define TPROTO_VERSION_CONFIRM 3

/* Version 4 added tenants: a group key may name a tenant, the VXLAN or
 * Geneve VNI of its traffic (GroupKey.tun_id, PollBatch.tun_ids).  An
 * older peer ignores the fields and would take a tenant's group for the
 * untunnelled group of the same 5-tuple, merging tenants: so a tenant's
 * group is sent (satisfaction, poll, poll batch) only in a session of
 * version TPROTO_VERSION_TENANT or later; an older session drops it and
 * counts. */
#define TPROTO_VERSION_TENANT 4

/* Tunnel ids (VNIs) are 24 bits. */
#define TPROTO_MAX_TUN_ID 0xffffffu

/* Entries of one PollBatch (and its reply).  An IPv6 entry takes at most
 * 47 bytes (a 5-byte event id, a 38-byte key record and, version 4, a
 * 4-byte tun_id), so a full batch
 * fits a frame (TPROTO_MAX_FRAME) with room to spare; a TEM with more to
 * ask one host for one epoch sends several. */
#define TPROTO_MAX_POLL_ENTRIES 16384

/* Bytes of a key record in PollBatch.keys (proto/trumpet.proto). */
#define TPROTO_KEY_RECORD_V4 14
#define TPROTO_KEY_RECORD_V6 38

/* Largest frame accepted (bytes) and messages per frame.  Larger frames
 * are dropped unread. */
#define TPROTO_MAX_FRAME (1024 * 1024)
#define TPROTO_MAX_BATCH 4096

/* Longest host or TEM id, event name (lib/event.h: 63), definition and
 * reason strings. */
#define TPROTO_MAX_ID 63
#define TPROTO_MAX_DEFINITION 4096
#define TPROTO_MAX_REASON 1024

/* True if 'id' is a valid host or TEM id: 1 to TPROTO_MAX_ID characters
 * from [A-Za-z0-9_.:-]. */
bool tproto_id_valid(const char *id);
#define TPROTO_MAX_PREFIXES TPM_PREFIX_LIST_MAX
#define TPROTO_MAX_PMDS 1024

/* Bounds checked by tproto_validate(): the epoch length in Hello (1 ns to
 * one hour), an epoch number (below 2^62; epochs are wall-clock ns
 * divided by the epoch length), the Welcome heartbeat period (1 ms to one
 * minute), the Satisfaction.flags bits defined so far (0x1: partial,
 * TPM_REPORT_PARTIAL in tpm/tpm.h), and sequence numbers (below; 'late'
 * only with 'seq', Hello.instance not 0). */
#define TPROTO_MAX_EPOCH_NS (3600ULL * 1000 * 1000 * 1000)
#define TPROTO_MAX_EPOCH (1ULL << 62)
#define TPROTO_MAX_HEARTBEAT_MS 60000
#define TPROTO_SAT_FLAGS 0x1u

/* Sequence numbers of satisfactions and poll replies (and the TEM's
 * Heartbeat.received) are below this; a 'seq' is at least 1. */
#define TPROTO_MAX_SEQ (1ULL << 62)

/* Returns true if this build speaks protocol version 'v'. */
bool tproto_version_supported(uint32_t v);

/* Returns the highest version in both [min, max] and the versions this
 * build speaks, or 0 if there is none. */
uint32_t tproto_version_choose(uint32_t min, uint32_t max);

/* Decodes the ZeroMQ message 'data'/'len'.  Returns the frame (free with
 * tproto_free()) or NULL and stores a static message in '*why': too
 * large, not decodable, no messages, too many messages, unsupported
 * version (frames of Hello/Refuse/Bye only are returned whatever their
 * version: see "Versions" above).  The messages still need
 * tproto_validate().  The frame and everything in it live in one arena:
 * free it with tproto_free() only, never with protobuf-c's
 * free_unpacked(); tproto_free() accepts NULL. */
Trumpet__Frame *tproto_decode(const void *data, size_t len,
                              const char **why);
void tproto_free(Trumpet__Frame *);

/* tproto_decode() reads frames of satisfactions only with a decoder of
 * its own (much faster than protobuf-c's generic one) and everything else
 * with protobuf-c; this decodes with protobuf-c alone, with no other check
 * (free the frame with tproto_free()), so that tests can compare the
 * two. */
Trumpet__Frame *tproto_decode_generic(const void *data, size_t len);

/* Checks one decoded message.  Returns NULL if it is valid, otherwise a
 * static string saying what is wrong ("hello: host_id empty", "poll: bad
 * group key length"...).  A message with no body is invalid: that is
 * also how a message of a kind newer than this build decodes. */
const char *tproto_validate(const Trumpet__Message *);

/* Short name of a message's body case ("hello", "poll_reply"...). */
const char *tproto_body_name(Trumpet__Message__BodyCase);

/* Encoding.  A batch collects messages (deep-copied in) and serializes
 * them as one frame. */
struct tproto_batch {
    Trumpet__Frame frame;
    Trumpet__Message **msgs;    /* Owned. */
    size_t n, allocated;
};

void tproto_batch_init(struct tproto_batch *);
void tproto_batch_destroy(struct tproto_batch *);
/* Empties the batch (keeps its memory). */
void tproto_batch_clear(struct tproto_batch *);
size_t tproto_batch_count(const struct tproto_batch *);

/* Appends one message; the 'tproto_add_*' helpers fill in every field.
 * Strings and keys are copied, each message in one allocation.  Reasons
 * (Refuse, Nack, Bye) longer than TPROTO_MAX_REASON are truncated; other
 * strings are sent as given (the receiver validates them).  Refuse states
 * this build's version range.  A group key of ipver 0 (a non-IP frame,
 * never a group) is sent as ipver 0 with empty addresses, which the
 * receiver rejects: callers must not send one. */
void tproto_add_hello(struct tproto_batch *, const char *host_id,
                      const struct tpm_prefix *, size_t n_prefixes,
                      uint64_t epoch_ns, uint64_t clock_ns,
                      const uint32_t *pmd_ids, size_t n_pmds,
                      const char *software);
void tproto_add_welcome(struct tproto_batch *, uint32_t version,
                        const char *tem_id, uint64_t clock_ns,
                        uint32_t heartbeat_ms);
void tproto_add_refuse(struct tproto_batch *, const char *reason);
void tproto_add_install(struct tproto_batch *, uint64_t cookie,
                        uint32_t event_id, const char *name,
                        const char *definition, bool has_threshold,
                        double threshold);
void tproto_add_remove(struct tproto_batch *, uint64_t cookie,
                       uint32_t event_id);
/* A Configure: 'has_dos_threshold' says whether it sets the DoS
 * threshold to 'dos_threshold' bytes (a Configure that sets nothing is
 * invalid: the receiver drops it). */
void tproto_add_configure(struct tproto_batch *, uint64_t cookie,
                          bool has_dos_threshold, uint32_t dos_threshold);
/* Ack and Nack of an Install or Remove carry its event id; those of a
 * Configure event id 0. */
void tproto_add_ack(struct tproto_batch *, uint64_t cookie,
                    uint32_t event_id);
void tproto_add_nack(struct tproto_batch *, uint64_t cookie,
                     uint32_t event_id, const char *reason);
void tproto_add_satisfaction(struct tproto_batch *, uint32_t event_id,
                             uint64_t epoch, const struct tpm_key *group,
                             double value, uint32_t flags, uint32_t n_parts,
                             uint32_t n_missing);
void tproto_add_poll(struct tproto_batch *, uint64_t cookie,
                     uint32_t event_id, uint64_t epoch,
                     const struct tpm_key *group);
void tproto_add_poll_reply(struct tproto_batch *, uint64_t cookie,
                           uint32_t event_id, uint64_t epoch,
                           Trumpet__PollStatus status, double value);
void tproto_add_heartbeat(struct tproto_batch *, uint64_t clock_ns,
                          uint64_t seq);

/* Version 3.  A PollBatch of 'n' entries (1..TPROTO_MAX_POLL_ENTRIES):
 * 'event_ids[i]' and the i-th key record of 'keys' ('keys_len' bytes,
 * written with tproto_key_record_put()).  Version 4: 'tun_ids' NULL if no
 * entry is a tenant's, else 'tun_ids[i]' is 0 for an entry of no tenant
 * and its VNI + 1 for a tenant's.  Copied, in one allocation. */
void tproto_add_poll_batch(struct tproto_batch *, uint64_t cookie,
                           uint64_t epoch, const uint32_t *event_ids,
                           size_t n, const uint8_t *keys, size_t keys_len,
                           const uint32_t *tun_ids);
/* Its reply: 'status[i]' (a Trumpet__PollStatus) and 'values[i]' answer
 * entry i. */
void tproto_add_poll_batch_reply(struct tproto_batch *, uint64_t cookie,
                                 uint64_t epoch, const uint8_t *status,
                                 const double *values, size_t n);

/* Version 3's fields of confirmed delivery, set on the message last
 * appended to 'b' (which must be of the kind named; anything else is a bug
 * and aborts):
 *
 *   tproto_set_seq(): a Satisfaction's or PollReply's sequence number
 *   'seq' (1 to TPROTO_MAX_SEQ - 1) and its late flag (always written);
 *   tproto_set_instance(): a Hello's agent instance (not 0);
 *   tproto_set_received(): a Heartbeat's 'received' (TEM -> host). */
void tproto_set_seq(struct tproto_batch *, uint64_t seq, bool late);
void tproto_set_instance(struct tproto_batch *, uint64_t instance);
void tproto_set_received(struct tproto_batch *, uint64_t received);

/* Version 4: the group of the Satisfaction or Poll last appended to 'b'
 * (anything else is a bug and aborts) is tenant 'tun_id''s (a VNI, at most
 * TPROTO_MAX_TUN_ID).  A group of no tenant has no tun_id: do not call
 * this for it. */
void tproto_set_tun_id(struct tproto_batch *, uint32_t tun_id);

/* A host's counters for its heartbeats (proto HostCounters). */
struct tproto_host_counters {
    uint64_t packets, bytes;
    uint64_t sweeps, sweeps_unfinished;
    uint64_t reports, reports_dropped;
    uint64_t dos_skipped, dos_passed;
};

/* A heartbeat carrying 'c' (NULL: none). */
void tproto_add_heartbeat_counters(struct tproto_batch *, uint64_t clock_ns,
                                   uint64_t seq,
                                   const struct tproto_host_counters *c);
void tproto_add_bye(struct tproto_batch *, const char *reason);

/* Serializes the batch as one frame of version TPROTO_VERSION_MAX (or
 * 'version' if nonzero) into a new buffer '*datap' (caller frees).
 * Returns its length. */
size_t tproto_batch_encode(const struct tproto_batch *, uint32_t version,
                           uint8_t **datap);

/* Key records (PollBatch.keys).  tproto_key_record_put() writes 'key'
 * (ipver 4 or 6) at 'p', which has room for TPROTO_KEY_RECORD_V6 bytes,
 * and returns the bytes written.  tproto_key_record_get() reads the record
 * at the start of the 'n' bytes at 'p' into '*key' and returns its length,
 * or 0 if they do not start with a whole record. */
size_t tproto_key_record_put(uint8_t *p, const struct tpm_key *key);
size_t tproto_key_record_get(const uint8_t *p, size_t n,
                             struct tpm_key *key);

/* Conversions.  tproto_key_from_msg() expects a validated key.  A
 * tenant's key (tun_id present) gets 'tun' 1 (not a tenant slot of the
 * receiver's: callers that keep keys map the VNI to a slot of their own)
 * and its VNI in '*tun_id'; a key of no tenant gets 'tun' 0 and
 * '*tun_id' 0.  'tun_id' may be NULL. */
void tproto_key_from_msg(const Trumpet__GroupKey *, struct tpm_key *,
                         uint32_t *tun_id);
/* Converts a validated prefix, its tenant (Prefix.tun_id) included. */
void tproto_prefix_from_msg(const Trumpet__Prefix *, struct tpm_prefix *);

#endif /* tproto.h */
