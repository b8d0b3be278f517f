/* SPDX-License-Identifier: Apache-2.0 */
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
 * Prefix tries: skipping patterns that cannot match
 * -------------------------------------------------
 *
 * Probing every pattern makes a match cost linear in the number of
 * patterns (~32 cycles each, docs/benchmarks.md section 2).  As in Open
 * vSwitch's classifier (lib/classifier.c, "prefix tries"), the index also
 * keeps one path-compressed binary trie over nw_dst and one over nw_src,
 * each over the field's 128 bits (an IPv4 address is the first 32; IPv4
 * and IPv6 rules share the tries, and the probe tells them apart).  A
 * pattern's "prefix length"
 * for a field is the number of leading one bits of its mask there (the
 * whole mask for CIDR prefixes; for other masks the leading run, which is
 * still a necessary condition).  Every rule of a pattern with a non-zero
 * prefix length puts its masked prefix in the trie, and the node where the
 * prefix ends records, per pattern, how many of that pattern's rules end
 * there (control path) and a 64-bit bitmap of the patterns with at least
 * one (match path).  Walking a flow's address down a trie ORs the bitmaps
 * of the nodes on its path: the patterns with a rule whose prefix agrees
 * with the address.  Patterns with prefix length 0 for a field are always
 * candidates for it.  A flow's candidates are the intersection of the
 * nw_src and nw_dst candidates, and only they are probed, so a match
 * costs two trie walks (depth bounded by the distinct prefixes, not by
 * the patterns) plus one probe per candidate pattern.  The answer is the
 * same as probing every pattern.
 *
 * A match's walk stops early where it cannot gain much: each node also
 * has the bitmap of the patterns with rules in its subtree, and the
 * control path flags the nodes where probing the patterns below that the
 * walk has not found yet costs no more than walking on to the next such
 * node (~30 cycles a probe, ~20 a level: one dependent load each).  The
 * walk takes those patterns as candidates and stops.  With one pattern
 * the walk stops at the root (after checking the rules' common prefix);
 * with patterns in different address ranges it stops where the ranges
 * part; with a few patterns sharing their prefixes, near the top.  The
 * candidates are then a superset of the exact ones;
 * trig_index_may_match() walks to the end.
 *
 * Only patterns 0 to TRIG_INDEX_TRIE_PATTERNS - 1 have a bit: further
 * patterns are probed on every match, as before.  Removing a pattern's
 * last rule removes the pattern and moves the last pattern into its
 * place; the tries' counts are kept for every pattern, so the moved
 * pattern's bits follow it (and it gains bits if it moves below 64).
 *
 * The same candidate set is the paper's "cheap pre-check against a few
 * coarse filters before full matching" (section 7.2, DoS):
 * trig_index_may_match() returns false when no pattern is a candidate, so
 * that a flow that cannot match any trigger costs two trie walks.
 *
 * trig_index_set_linear() switches matching back to probing every pattern
 * (the tries are still maintained), so that both can be compared on the
 * same index.
 *
 * Memory: a trie has at most two nodes per distinct prefix plus one per
 * TRIG_TRIE_NODE_BITS bits of a long prefix (32 bytes each, plus a small
 * count array per node); its arrays grow to the peak and are freed when
 * it empties.
 * Nothing is allocated on the match path.
 *
 * Thread-safety: single-threaded; owned by one monitor.
 */
#ifndef TPM_TRIG_INDEX_H
#define TPM_TRIG_INDEX_H 1

#include <stdbool.h>
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
    uint8_t src_plen;           /* Leading one bits of mask.src (0-128). */
    uint8_t dst_plen;           /* Leading one bits of mask.dst. */
    struct tpm_huge_region region;  /* 'tags' and 'rules' if huge, else
                                     * region.base is NULL and 'rules'
                                     * points to one malloc'd block. */
};

/* Patterns with a bit in the tries' bitmaps; the rest are always probed. */
#define TRIG_INDEX_TRIE_PATTERNS 64

/* A trie node: 32 bytes, two per cache line. */
struct trig_trie_node {
    uint64_t prefix;            /* The node's bits, left-aligned (at most
                                 * TRIG_TRIE_NODE_BITS), then zeros; their
                                 * number in the TRIG_TRIE_LEN_MASK bits
                                 * and the TRIG_TRIE_STOP flag.  Only the
                                 * root may have no bits; any other node
                                 * starts with the bit that leads to it
                                 * from its parent. */
    uint64_t patterns;          /* Bit p: pattern p has a rule whose
                                 * prefix ends here. */
    uint64_t below;             /* 'patterns' of this node and all below. */
    uint32_t child[2];          /* By the bit after 'prefix'; 0: none. */
};
_Static_assert(sizeof(struct trig_trie_node) == 32,
               "two trie nodes per cache line");
#define TRIG_TRIE_NODE_BITS 56
#define TRIG_TRIE_LEN_MASK 0x7f
#define TRIG_TRIE_STOP 0x80     /* A match's walk ends here (with the
                                 * node's 'below'). */

/* Costs, in cycles, that decide where TRIG_TRIE_STOP goes: a probe of one
 * pattern, and one level of a trie walk (a dependent load that mostly
 * hits L1 or L2), as measured by tpm-bench match (docs/benchmarks.md
 * section 2). */
#define TRIG_TRIE_PROBE_COST 30
#define TRIG_TRIE_LEVEL_COST 20

/* Control path: per node, the number of rules of each pattern (any index,
 * also >= TRIG_INDEX_TRIE_PATTERNS) whose prefix ends there. */
struct trig_trie_ref {
    uint32_t pattern;
    uint32_t n_rules;
};

struct trig_trie_refs {
    struct trig_trie_ref *refs;
    uint32_t n, cap;
    uint32_t walk;              /* Most levels a walk visits below here
                                 * if it does not stop here. */
};

struct trig_trie {
    struct trig_trie_node *nodes;   /* nodes[0] unused: 0 means none. */
    struct trig_trie_refs *refs;    /* Parallel to 'nodes'. */
    uint32_t root;
    uint32_t n_nodes;           /* High water: nodes[1..n_nodes] used or
                                 * free. */
    uint32_t cap_nodes;         /* Room in 'nodes', nodes[0] included. */
    uint32_t n_live;            /* Nodes in the trie. */
    uint32_t free_list;         /* Free nodes, chained through child[0]. */
};

struct trig_index {
    struct trig_pattern *patterns;
    uint32_t n_patterns;
    uint32_t cap_patterns;
    uint32_t n_ids;
    bool linear;                /* Probe every pattern (for comparison). */

    /* Candidate patterns (see "Prefix tries" above). */
    uint64_t wild_src;          /* Patterns with nw_src prefix length 0. */
    uint64_t wild_dst;          /* Patterns with nw_dst prefix length 0. */
    struct trig_trie src_trie;
    struct trig_trie dst_trie;
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

/* Returns false if no trigger's filter can match 'key', true if some may:
 * the paper's cheap pre-check before full matching (section 7.2), two
 * trie walks and no hash probe.  False is exact (trig_index_match() would
 * return 0); true is not a promise (the probes may still miss).  Always
 * true while the index has more than TRIG_INDEX_TRIE_PATTERNS patterns. */
bool trig_index_may_match(const struct trig_index *,
                          const struct tpm_key *key);

/* With 'linear' true, trig_index_match() probes every pattern (the
 * search before the tries); with false (the default after
 * trig_index_init()), only the tries' candidates.  The answers are the
 * same; this exists to measure one against the other. */
void trig_index_set_linear(struct trig_index *, bool linear);

#endif /* trig-index.h */
