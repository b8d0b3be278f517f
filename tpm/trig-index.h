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
 * A pattern's table is laid out for lookups that miss the cache: a probe
 * reads a compact array of 32-bit tags (16 slots per cache line; a 64 Ki
 * rule table's tags take 512 KB) and reads the slot's 64-byte rule only
 * when the tag matches, so a lookup touches one tag line and, on a hit,
 * one rule line.  The first trigger id lives in the rule (most filters
 * have exactly one trigger); only further ids are in a separate array.
 * Tables of 2 MB or more come from huge pages (lib/hugealloc.h).
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
#include "hugealloc.h"
#include "packet.h"

/* A slot's tag is TRIG_INDEX_TAG(hash) of its rule's masked key, or 0 if
 * the slot is empty.  The forced top bit makes it non-zero and keeps the
 * low bits, so that the tag alone gives the rule's home slot in tables of
 * up to 2^31 slots. */
#define TRIG_INDEX_TAG(HASH) ((uint32_t) (HASH) | 0x80000000u)

/* One cache line: a filter's masked key and its triggers. */
struct trig_index_rule {
    struct tpm_key key;         /* Masked key. */
    uint32_t id;                /* First trigger. */
    uint32_t n_ids;             /* Triggers, 'id' included; 0: empty. */
    uint32_t cap_more;          /* Room in 'more'. */
    uint32_t pad;
    uint32_t *more;             /* Triggers after the first (n_ids - 1). */
} __attribute__((aligned(64)));
_Static_assert(sizeof(struct trig_index_rule) == 64,
               "a trigger index rule is one cache line");

struct trig_pattern {
    /* Read by every match. */
    struct tpm_key mask;
    uint32_t table_mask;        /* Table size - 1. */
    uint32_t *tags;             /* Per slot: TRIG_INDEX_TAG or 0. */
    struct trig_index_rule *rules;

    /* Control path. */
    uint32_t n_rules;
    uint32_t n_ids;
    struct tpm_huge_region region;  /* 'tags' and 'rules' if huge, else
                                     * region.base is NULL and 'rules'
                                     * points to one malloc'd block. */
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
