/*
 * The trigger index: which triggers' filters match a flow, by tuple space
 * search (Srinivasan et al., SIGCOMM'99; also Open vSwitch's classifier;
 * Trumpet section 5.4).
 *
 * Filters are (key, mask) pairs over the 5-tuple.  Filters with the same
 * mask form a pattern ("tcp, nw_dst/24, tp_dst exact" is one pattern, no
 * matter how many /24s and ports the triggers name), and each pattern has
 * one hash table from masked key to the triggers with exactly that filter.
 * Matching a flow masks its key with each pattern's mask and does one hash
 * lookup per pattern: the cost grows with the number of distinct patterns
 * (a handful in practice: prefix lengths times protocol/port shapes), not
 * with the number of triggers.
 *
 * Tables use linear probing with backward-shift deletion and double when
 * half full; insertion and removal are control-path operations run by the
 * owning thread between batches.
 *
 * Thread-safety: single-threaded; owned by one monitor.
 */
#ifndef TPM_TRIG_INDEX_H
#define TPM_TRIG_INDEX_H 1

#include <stdint.h>

#include "event.h"
#include "packet.h"

struct trig_index_rule {
    struct tpm_key key;         /* Masked key. */
    uint32_t hash;
    uint32_t n_ids;             /* 0: empty slot. */
    uint32_t cap_ids;
    uint32_t *ids;
};

struct trig_pattern {
    struct tpm_key mask;
    uint32_t n_rules;
    uint32_t n_ids;
    uint32_t table_mask;        /* Table size - 1. */
    struct trig_index_rule *rules;
};

struct trig_index {
    struct trig_pattern *patterns;
    uint32_t n_patterns;
    uint32_t cap_patterns;
    uint32_t n_ids;
};

void trig_index_init(struct trig_index *);
void trig_index_destroy(struct trig_index *);

/* Adds trigger 'id' with filter 'match'.  The same id may not be added
 * twice with the same filter. */
void trig_index_insert(struct trig_index *, const struct tpm_match *match,
                       uint32_t id);

/* Removes trigger 'id' with filter 'match'.  Returns 0, or ENOENT if it
 * was not there. */
int trig_index_remove(struct trig_index *, const struct tpm_match *match,
                      uint32_t id);

/* Stores in 'ids' (room for 'max') the triggers whose filters match 'key'
 * and returns how many matched in all (which may exceed 'max': the excess
 * is not stored). */
uint32_t trig_index_match(const struct trig_index *,
                          const struct tpm_key *key, uint32_t *ids,
                          uint32_t max);

#endif /* trig-index.h */
