/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bucketized cuckoo hash table for tpm-bench.  See cuckoo.h.
 */
#include "cuckoo.h"
#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static inline uint32_t
bucket1__(const struct cuckoo *c, struct cuckoo_hashes h)
{
    return h.h1 & c->bucket_mask;
}

static inline uint32_t
bucket2__(const struct cuckoo *c, struct cuckoo_hashes h)
{
    uint32_t b1 = h.h1 & c->bucket_mask;
    uint32_t b2 = h.h2 & c->bucket_mask;

    /* Two distinct buckets, so that a key always has two homes. */
    return b2 != b1 ? b2 : b1 ^ 1;
}

/* The signature of a key: the high halves of both hashes (the bucket
 * indexes use the low bits), never 0. */
static inline uint16_t
sig__(struct cuckoo_hashes h)
{
    uint16_t s = (uint16_t) ((h.h1 >> 16) ^ (h.h2 >> 16));
    return s ? s : 1;
}

/* Returns a bit mask of the slots of 'b' whose signature is 'sig'. */
static inline unsigned int
sig_match__(const struct cuckoo_bucket *b, uint16_t sig)
{
#if defined(__SSE2__)
    __m128i tags = _mm_loadl_epi64((const __m128i *) b->sig);
    __m128i eq = _mm_cmpeq_epi16(tags, _mm_set1_epi16((short) sig));
    unsigned int m = (unsigned int) _mm_movemask_epi8(eq) & 0xff;

    /* Keep one bit per 16-bit lane. */
    return (m & 1) | (m >> 1 & 2) | (m >> 2 & 4) | (m >> 3 & 8);
#else
    unsigned int m = 0;
    for (int i = 0; i < CUCKOO_BUCKET_ENTRIES; i++) {
        m |= (unsigned int) (b->sig[i] == sig) << i;
    }
    return m;
#endif
}

int
cuckoo_init(struct cuckoo *c, uint32_t capacity)
{
    memset(c, 0, sizeof *c);
    if (!is_pow2(capacity) || capacity < 2 * CUCKOO_BUCKET_ENTRIES) {
        return EINVAL;
    }

    uint32_t n_buckets = capacity / CUCKOO_BUCKET_ENTRIES;
    int error = tpm_huge_alloc(&c->bucket_region,
                               (size_t) n_buckets * sizeof *c->buckets,
                               "cuckoo buckets");
    if (error) {
        return error;
    }
    error = tpm_huge_alloc(&c->entry_region,
                           (size_t) capacity * sizeof *c->entries,
                           "cuckoo entries");
    if (error) {
        tpm_huge_free(&c->bucket_region);
        return error;
    }
    c->buckets = c->bucket_region.base;
    c->entries = c->entry_region.base;
    c->bucket_mask = n_buckets - 1;
    c->capacity = capacity;
    for (uint32_t i = 0; i < n_buckets; i++) {
        for (int j = 0; j < CUCKOO_BUCKET_ENTRIES; j++) {
            c->buckets[i].idx[j] = CUCKOO_EMPTY;
        }
    }
    c->free_list = xmalloc((size_t) capacity * sizeof *c->free_list);
    return 0;
}

void
cuckoo_destroy(struct cuckoo *c)
{
    if (c) {
        tpm_huge_free(&c->bucket_region);
        tpm_huge_free(&c->entry_region);
        free(c->free_list);
        memset(c, 0, sizeof *c);
    }
}

/* Looks for 'key' among the slots 'm' of bucket 'b'. */
static inline struct cuckoo_entry *
bucket_find__(const struct cuckoo *c, const struct cuckoo_bucket *b,
              unsigned int m, const struct tpm_key *key)
{
    for (; m; m &= m - 1) {
        struct cuckoo_entry *e = &c->entries[b->idx[__builtin_ctz(m)]];
        if (tpm_key_equal(&e->key, key)) {
            return e;
        }
    }
    return NULL;
}

struct cuckoo_entry *
cuckoo_find(const struct cuckoo *c, const struct tpm_key *key,
            struct cuckoo_hashes h)
{
    uint16_t sig = sig__(h);
    const struct cuckoo_bucket *b1 = &c->buckets[bucket1__(c, h)];
    struct cuckoo_entry *e = bucket_find__(c, b1, sig_match__(b1, sig), key);
    if (!e) {
        const struct cuckoo_bucket *b2 = &c->buckets[bucket2__(c, h)];
        e = bucket_find__(c, b2, sig_match__(b2, sig), key);
    }
    return e;
}

void
cuckoo_find_batch(const struct cuckoo *c, const struct tpm_key *const keys[],
                  int n, int stats_half, struct cuckoo_hashes h[],
                  struct cuckoo_entry *entries[])
{
    const struct cuckoo_bucket *b1[CUCKOO_BATCH_MAX];
    const struct cuckoo_bucket *b2[CUCKOO_BATCH_MAX];
    unsigned int m1[CUCKOO_BATCH_MAX], m2[CUCKOO_BATCH_MAX];

    n = MIN(n, CUCKOO_BATCH_MAX);

    /* Pass 1: both hashes, prefetch both candidate buckets. */
    for (int i = 0; i < n; i++) {
        h[i] = cuckoo_hash(keys[i]);
        b1[i] = &c->buckets[bucket1__(c, h[i])];
        b2[i] = &c->buckets[bucket2__(c, h[i])];
        tpm_prefetch(b1[i]);
        tpm_prefetch(b2[i]);
    }

    /* Pass 2: compare signatures, prefetch the first candidate entry. */
    for (int i = 0; i < n; i++) {
        uint16_t sig = sig__(h[i]);
        m1[i] = sig_match__(b1[i], sig);
        m2[i] = sig_match__(b2[i], sig);
        const struct cuckoo_bucket *b = m1[i] ? b1[i] : b2[i];
        unsigned int m = m1[i] ? m1[i] : m2[i];
        if (m) {
            const struct cuckoo_entry *e
                = &c->entries[b->idx[__builtin_ctz(m)]];
            tpm_prefetch(e);
            tpm_prefetch_write(&e->stats[stats_half]);
        }
    }

    /* Pass 3: compare keys. */
    for (int i = 0; i < n; i++) {
        struct cuckoo_entry *e = bucket_find__(c, b1[i], m1[i], keys[i]);
        entries[i] = e ? e : bucket_find__(c, b2[i], m2[i], keys[i]);
    }
}

/* Returns a free slot of bucket 'b', or -1. */
static inline int
bucket_free_slot__(const struct cuckoo_bucket *b)
{
    unsigned int m = sig_match__(b, 0);
    return m ? __builtin_ctz(m) : -1;
}

/* Returns the bucket of entry 'e' other than 'bucket'. */
static inline uint32_t
alt_bucket__(const struct cuckoo *c, const struct cuckoo_entry *e,
             uint32_t bucket)
{
    struct cuckoo_hashes h = { e->h1, e->h2 };
    uint32_t b1 = bucket1__(c, h);
    return bucket == b1 ? bucket2__(c, h) : b1;
}

struct bfs_node {
    uint32_t bucket;
    int16_t parent;             /* Node index, or -1 for a home bucket. */
    int8_t slot;                /* Slot of the parent bucket whose entry
                                 * moves into 'bucket'. */
};

/* Returns true if 'bucket' is on the path from node 'i' to a root. */
static bool
bfs_on_path__(const struct bfs_node *nodes, int i, uint32_t bucket)
{
    for (; i >= 0; i = nodes[i].parent) {
        if (nodes[i].bucket == bucket) {
            return true;
        }
    }
    return false;
}

/* Finds a bucket with a free slot reachable from the two homes by moving
 * entries to their alternative buckets, then moves them along that path,
 * from its free end.  Returns the bucket and slot freed in a home bucket
 * in '*bucketp' and '*slotp', or false if none was found. */
static bool
make_room__(struct cuckoo *c, struct cuckoo_hashes h, uint32_t *bucketp,
            int *slotp)
{
    struct bfs_node nodes[CUCKOO_BFS_MAX];
    int n = 0;

    nodes[n++] = (struct bfs_node) { bucket1__(c, h), -1, -1 };
    nodes[n++] = (struct bfs_node) { bucket2__(c, h), -1, -1 };
    for (int head = 0; head < n; head++) {
        struct cuckoo_bucket *b = &c->buckets[nodes[head].bucket];
        int slot = bucket_free_slot__(b);
        c->stats.bfs_buckets++;
        if (slot >= 0) {
            /* Move entries down the path, from the free end back to a
             * home bucket.  Each key stays in one of its two buckets. */
            int i = head;
            while (nodes[i].parent >= 0) {
                const struct bfs_node *node = &nodes[i];
                struct cuckoo_bucket *dst = &c->buckets[node->bucket];
                struct cuckoo_bucket *src
                    = &c->buckets[nodes[node->parent].bucket];
                dst->sig[slot] = src->sig[node->slot];
                dst->idx[slot] = src->idx[node->slot];
                src->sig[node->slot] = 0;
                src->idx[node->slot] = CUCKOO_EMPTY;
                c->stats.kicks++;
                slot = node->slot;
                i = node->parent;
            }
            *bucketp = nodes[i].bucket;
            *slotp = slot;
            return true;
        }
        for (int s = 0; s < CUCKOO_BUCKET_ENTRIES; s++) {
            if (n >= CUCKOO_BFS_MAX) {
                break;
            }
            uint32_t alt = alt_bucket__(c, &c->entries[b->idx[s]],
                                        nodes[head].bucket);
            if (!bfs_on_path__(nodes, head, alt)) {
                nodes[n++] = (struct bfs_node) { alt, (int16_t) head,
                                                 (int8_t) s };
            }
        }
    }
    return false;
}

struct cuckoo_entry *
cuckoo_insert(struct cuckoo *c, const struct tpm_key *key,
              struct cuckoo_hashes h)
{
    uint32_t bucket;
    int slot;

    if (c->n_live >= c->capacity || !make_room__(c, h, &bucket, &slot)) {
        c->stats.failures++;
        return NULL;
    }

    uint32_t idx = c->n_free ? c->free_list[--c->n_free] : c->n_used++;
    struct cuckoo_entry *e = &c->entries[idx];
    /* Like the flow table, reset only line 0: zero epoch tags mark both
     * statistics lines stale, and the first update of an epoch resets its
     * line. */
    memset(e, 0, CACHE_LINE_SIZE);
    e->key = *key;
    e->h1 = h.h1;
    e->h2 = h.h2;

    struct cuckoo_bucket *b = &c->buckets[bucket];
    b->sig[slot] = sig__(h);
    b->idx[slot] = idx;
    c->n_live++;
    c->stats.inserts++;
    return e;
}

bool
cuckoo_delete(struct cuckoo *c, const struct tpm_key *key,
              struct cuckoo_hashes h)
{
    uint16_t sig = sig__(h);
    uint32_t homes[2] = { bucket1__(c, h), bucket2__(c, h) };

    for (int i = 0; i < 2; i++) {
        struct cuckoo_bucket *b = &c->buckets[homes[i]];
        for (unsigned int m = sig_match__(b, sig); m; m &= m - 1) {
            int s = __builtin_ctz(m);
            uint32_t idx = b->idx[s];
            if (tpm_key_equal(&c->entries[idx].key, key)) {
                b->sig[s] = 0;
                b->idx[s] = CUCKOO_EMPTY;
                c->free_list[c->n_free++] = idx;
                c->n_live--;
                c->stats.deletes++;
                return true;
            }
        }
    }
    return false;
}
