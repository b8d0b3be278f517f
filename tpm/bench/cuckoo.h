/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A bucketized cuckoo hash table of flow entries, used only by tpm-bench's
 * "table" benchmark to check, on the machine at hand, the flow table's
 * choice of one hash and linear probing (tpm/flow-table.h) against the
 * alternative the SOSR'18 measurement study compares it with (Alipourfard
 * et al., "Re-evaluating Measurement Algorithms in Software", sections
 * 3.2 and 4).  libtpm itself does not use it.
 *
 * Design
 * ======
 *
 * The table follows DPDK's rte_hash, minus what the benchmark does not
 * need (multi-writer locking, extendable buckets):
 *
 *   - Two independent hash functions per key: h1 = tpm_key_hash() (CRC32-C
 *     over the key's five 64-bit words) and h2 = cuckoo_hash2(), a
 *     multiply-fold hash that shares nothing with CRC32-C.  A key lives in
 *     bucket h1 & mask or in bucket h2 & mask.
 *
 *   - Buckets of CUCKOO_BUCKET_ENTRIES (4) slots on one 64-byte cache line:
 *     a 16-bit signature ("tag") per slot, derived from both hashes and
 *     never 0 (0 marks an empty slot), and a 32-bit entry index.  A lookup
 *     compares the four tags of a bucket at once (SSE2) and reads the full
 *     key of an entry only on a tag match.
 *
 *   - Entries in a separate array, laid out like 'struct tpm_flow' (one
 *     line of key and metadata, two 64-byte lines of statistics for even
 *     and odd epochs), so that the benchmark's per-packet update is the
 *     same code for both tables.  Entries never move: an insertion that
 *     displaces ("kicks") keys moves only their bucket slots.
 *
 *   - Insertion by breadth-first search for a cuckoo path (as rte_hash):
 *     the search visits at most CUCKOO_BFS_MAX buckets, never revisits a
 *     bucket on the same path, and only then moves the slots along the
 *     path from its free end, so that every key stays findable at every
 *     step and a failed search changes nothing.
 *
 *   - Batched lookups in three passes, as rte_hash_lookup_bulk(): hash all
 *     keys and prefetch both candidate buckets; compare tags and prefetch
 *     the first candidate entry (its key line and the statistics line of
 *     the current epoch); compare full keys.
 *
 * Both hash arrays live in huge pages (lib/hugealloc.h), like the flow
 * table, so that the comparison is not skewed by page size.
 *
 * Thread-safety: single-threaded; a table is owned by one thread.
 */
#ifndef TPM_CUCKOO_H
#define TPM_CUCKOO_H 1

#include <stdbool.h>
#include <stdint.h>

#include "flow-table.h"
#include "hugealloc.h"
#include "packet.h"
#include "util.h"

#define CUCKOO_BUCKET_ENTRIES 4
#define CUCKOO_BATCH_MAX 64
#define CUCKOO_BFS_MAX 512      /* Buckets visited by one insertion. */
#define CUCKOO_EMPTY UINT32_MAX /* Entry index of an empty slot. */

/* An entry: the same three-line layout as 'struct tpm_flow'. */
struct cuckoo_entry {
    /* Line 0: key and metadata. */
    struct tpm_key key;
    uint32_t h1, h2;            /* Both hashes, to find the alternative
                                 * bucket when the entry's slot is kicked
                                 * without rehashing the key. */
    uint32_t tag[2];            /* Epoch tags of stats[0] and stats[1]. */
    uint32_t pad[2];

    /* Lines 1 and 2: statistics of even and odd epochs. */
    struct tpm_flow_stats stats[2];
};
BUILD_ASSERT_DECL(sizeof(struct cuckoo_entry) == 3 * CACHE_LINE_SIZE);

struct cuckoo_bucket {
    uint16_t sig[CUCKOO_BUCKET_ENTRIES];        /* 0: empty slot. */
    uint32_t idx[CUCKOO_BUCKET_ENTRIES];        /* Into 'entries'. */
    uint8_t pad[CACHE_LINE_SIZE - 6 * CUCKOO_BUCKET_ENTRIES];
};
BUILD_ASSERT_DECL(sizeof(struct cuckoo_bucket) == CACHE_LINE_SIZE);

struct cuckoo_stats {
    uint64_t inserts;
    uint64_t kicks;             /* Slots moved to make room. */
    uint64_t bfs_buckets;       /* Buckets visited by insertions. */
    uint64_t failures;          /* Insertions with no cuckoo path. */
    uint64_t deletes;
};

struct cuckoo {
    struct cuckoo_bucket *buckets;
    struct cuckoo_entry *entries;
    uint32_t bucket_mask;       /* Number of buckets - 1. */
    uint32_t capacity;          /* Entries. */
    uint32_t n_used;            /* Entries ever handed out. */
    uint32_t n_live;
    uint32_t *free_list;        /* Deleted entry indexes. */
    uint32_t n_free;
    struct cuckoo_stats stats;
    struct tpm_huge_region bucket_region;
    struct tpm_huge_region entry_region;
};

/* The two hashes of a key. */
struct cuckoo_hashes {
    uint32_t h1;
    uint32_t h2;
};

/* Creates 'c' with room for 'capacity' entries (a power of two, at least
 * 2 * CUCKOO_BUCKET_ENTRIES) in capacity / CUCKOO_BUCKET_ENTRIES buckets.
 * Returns 0 or a positive errno. */
int cuckoo_init(struct cuckoo *c, uint32_t capacity);
void cuckoo_destroy(struct cuckoo *c);

/* Returns the high 64 bits of the 128-bit product of 'a' and 'b' folded
 * with the low 64 bits. */
static inline uint64_t
cuckoo_mulfold__(uint64_t a, uint64_t b)
{
    unsigned __int128 p = (unsigned __int128) a * b;
    return (uint64_t) p ^ (uint64_t) (p >> 64);
}

/* The second hash function: multiply-fold over the key's five 64-bit
 * words (three 64x64->128 multiplications), independent of the CRC32-C of
 * tpm_key_hash(). */
static inline uint32_t
cuckoo_hash2(const struct tpm_key *key)
{
    const tpm_key_word *w = (const tpm_key_word *) key;
    uint64_t h = cuckoo_mulfold__(w[0] ^ 0xa0761d6478bd642fULL,
                                  w[1] ^ 0xe7037ed1a0b428dbULL)
                 ^ cuckoo_mulfold__(w[2] ^ 0x8ebc6af09c88c6e3ULL,
                                    w[3] ^ 0x589965cc75374cc3ULL);
    h = cuckoo_mulfold__(h ^ 0x1d8e4e27c47d124fULL,
                         w[4] ^ 0xeb44accab455d165ULL);
    return (uint32_t) (h ^ (h >> 32));
}

static inline struct cuckoo_hashes
cuckoo_hash(const struct tpm_key *key)
{
    struct cuckoo_hashes h = { tpm_key_hash(key), cuckoo_hash2(key) };
    return h;
}

/* Looks up 'key' with hashes 'h'.  Returns its entry or NULL. */
struct cuckoo_entry *cuckoo_find(const struct cuckoo *c,
                                 const struct tpm_key *key,
                                 struct cuckoo_hashes h);

/* Looks up 'n' keys (at most CUCKOO_BATCH_MAX): stores each key's hashes
 * in 'h[i]' (for a following cuckoo_insert() on a miss) and its entry or
 * NULL in 'entries[i]'.  Prefetches the statistics line 'stats_half' (0 or
 * 1) of every entry found, for the caller's update. */
void cuckoo_find_batch(const struct cuckoo *c,
                       const struct tpm_key *const keys[], int n,
                       int stats_half, struct cuckoo_hashes h[],
                       struct cuckoo_entry *entries[]);

/* Inserts 'key', which must not be in the table, with hashes 'h'.  The new
 * entry's line 0 holds the key and hashes and zero epoch tags (its
 * statistics lines are stale, as in the flow table).
 * Returns the entry, or NULL if the table is full or no cuckoo path was
 * found within CUCKOO_BFS_MAX buckets (counted in 'stats.failures'). */
struct cuckoo_entry *cuckoo_insert(struct cuckoo *c,
                                   const struct tpm_key *key,
                                   struct cuckoo_hashes h);

/* Removes 'key'.  Returns true if it was there. */
bool cuckoo_delete(struct cuckoo *c, const struct tpm_key *key,
                   struct cuckoo_hashes h);

#endif /* cuckoo.h */
