/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The flow table: per-5-tuple statistics, the heart of phase 1 (match and
 * scatter).
 *
 * Design (Trumpet section 5.3; SOSR'18 sections 3-4)
 * ===================================================
 *
 * One hash per packet and open addressing with linear probing: a lookup
 * touches one cache line in the common case, and the probe sequence walks
 * neighbouring lines, which the hardware prefetcher likes.  The table never
 * grows (it lives in huge pages sized at creation) and never rejects a
 * packet: an insertion examines at most 'probe_limit' consecutive slots and
 * takes the first one that is free, dead (freed by the scrubber) or stale
 * (not updated in the current or the previous epoch: its statistics were
 * already swept, so reusing it loses nothing) and without per-flow state
 * (a connection waiting for a retransmission timeout keeps its sequence
 * space until the scrubber frees it).  A stale entry whose flow is live
 * and feeds trigger instances (one that sends less often than every other
 * epoch, not yet retired by the sweep) is passed over unless the window
 * has no other such slot, and then the first one is taken: a new flow
 * that displaced it would make it new again at its next packet, to be
 * inserted and matched again (microseconds) and to displace another in
 * turn, a chain that never ends with many such flows.  When every slot of
 * the window holds a recent entry or one with state, it evicts the least
 * recently updated one; its unswept statistics or its state are lost, and
 * counted ('evictions').
 *
 * Slots are never emptied once used (dead entries are tombstones), so
 * lookups stay correct without backward-shift deletion and entry indexes
 * are stable: trigger flow lists refer to entries by (index, generation),
 * and a reused entry gets a new generation, which lists notice lazily when
 * they next read the entry (the sweep drops such items).
 *
 * Each entry is three cache lines, aligned on one: line 0 holds the key
 * and metadata that lookups read (compared as vectors where the CPU has
 * SSE2); lines 1 and 2 hold the statistics of even and odd epochs
 * (double-buffering by epoch parity, paper section 5.5), so the packet path
 * writes one line while the sweep reads the other.  A statistics line is
 * reset lazily: the first update in a new epoch finds a stale epoch tag and
 * overwrites instead of accumulating.
 *
 * An IPv4 flow that keeps no summary (its events are count()s, the most
 * common event) keeps its packets and bytes of both parities in line 0,
 * in the address words its key leaves unused (the upper three words of
 * each address, zero in every parsed IPv4 key): it is then one line for
 * the packet path and for the sweep, which halves the random accesses
 * per packet once the table is larger than the caches.  Every other flow
 * keeps its counts at the head of its statistics lines, which it reads
 * for its summaries anyway (or, IPv6, has no room for them in line 0);
 * a flow's first summary moves its counts there, and its last one back
 * (tpm_flow_relayout__()).  tpm_flow_count() finds them; the key's
 * readers take it through tpm_flow_key(), which clears the counts from
 * the copy, and lookups compare only the words of an IPv4 key that are
 * its own (tpm_flow_key_equal()).
 *
 * Epoch tags are 32-bit epoch numbers relative to the monitor's first
 * epoch, plus two (0 = never written; a tag is never 0 or 1, so "tag - 1"
 * of the first epoch is not mistaken for "never written").  The scrubber
 * frees entries idle for longer than a configured number of epochs (far
 * below 2^31), so tag comparisons by wrap-around difference are always
 * unambiguous.
 *
 * Thread-safety: single-threaded; owned by one monitor (one PMD thread).
 */
#ifndef TPM_FLOW_TABLE_H
#define TPM_FLOW_TABLE_H 1

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "hugealloc.h"
#include "packet.h"
#include "util.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Summary slots per epoch buffer. */
#define TPM_FLOW_SLOTS 7

#define TPM_FLOW_MATCHED_MAX 127

enum tpm_flow_state {
    TPM_FLOW_FREE = 0,          /* Never used: ends probe sequences. */
    TPM_FLOW_LIVE,              /* Matched against triggers. */
    TPM_FLOW_PENDING,           /* Below the DoS threshold: not matched. */
    TPM_FLOW_DEAD,              /* Freed by the scrubber (tombstone). */
};

/* A summary slot: an integer ('u') for a kind whose term is a variable
 * (every variable is an integer) and whose operation is not a sum of
 * squares, which is then exact and costs the packet path no conversion;
 * a double ('d') for the others (tpm_kind_int(), tpm-private.h). */
union tpm_flow_slot {
    uint64_t u;
    double d;
};

/* One epoch's packets and bytes of a flow (tpm_flow_count()). */
struct tpm_flow_count {
    uint32_t packets;
    uint32_t bytes;
};

/* One epoch's statistics of a flow.  'count' holds its packets and bytes
 * unless the flow keeps them in line 0 (tpm_flow_count()); 'slot[i]'
 * holds the i-th summary of the flow's summary mask (see tpm-private.h),
 * in increasing order of summary id. */
struct tpm_flow_stats {
    struct tpm_flow_count count;
    union tpm_flow_slot slot[TPM_FLOW_SLOTS];
};
BUILD_ASSERT_DECL(sizeof(struct tpm_flow_stats) == CACHE_LINE_SIZE);

struct tpm_flow {
    /* Line 0: read by lookups. */
    union {
        struct tpm_key key;     /* Read through tpm_flow_key(). */
        struct {                /* An IPv4 flow's: the words of the key
                                 * that its addresses leave unused hold
                                 * its counts of each epoch parity if it
                                 * keeps no summary, else zero. */
            uint32_t src;
            struct tpm_flow_count count0;
            uint32_t zero0;
            uint32_t dst;
            struct tpm_flow_count count1;
            uint32_t zero1;
        } v4;
    };
    uint32_t hash;
    uint32_t gen;               /* Incremented on every reuse. */
    uint32_t tag[2];            /* Epoch tag (epoch + 1) of stats[p]. */
    uint32_t sum_mask;          /* Summaries kept, by summary id. */
    uint8_t state;              /* enum tpm_flow_state. */
    uint8_t n_matched : 7;      /* Trigger instances this flow feeds
                                 * (saturates at TPM_FLOW_MATCHED_MAX). */
    uint8_t has_conn : 1;       /* Keeps per-flow state: the monitor's
                                 * 'flow_conn' array names its connection
                                 * (tpm-private.h). */
    uint16_t birth;             /* Monitor's event-add sequence number
                                 * when the flow was matched: events added
                                 * later backfill it, earlier ones did
                                 * not need to. */

    /* Lines 1 and 2: statistics of even and odd epochs. */
    struct tpm_flow_stats stats[2];
} __attribute__((aligned(CACHE_LINE_SIZE)));
BUILD_ASSERT_DECL(sizeof(struct tpm_flow) == 3 * CACHE_LINE_SIZE);
BUILD_ASSERT_DECL(offsetof(struct tpm_flow, stats) == CACHE_LINE_SIZE);
BUILD_ASSERT_DECL(offsetof(struct tpm_flow, v4.count0)
                  == offsetof(struct tpm_flow, key.src[1]));
BUILD_ASSERT_DECL(offsetof(struct tpm_flow, v4.count1)
                  == offsetof(struct tpm_flow, key.dst[1]));
BUILD_ASSERT_DECL(offsetof(struct tpm_flow, v4.zero1) + sizeof(uint32_t)
                  == offsetof(struct tpm_flow, key.sport));

/* Returns true if flow 'f', with summary mask 'sum_mask', keeps its
 * counts in its statistics lines, so that reading its statistics needs
 * them: it keeps a summary, or it is not an IPv4 flow.  Else its counts
 * are in line 0, which is all of it that the packet path and the sweep
 * read. */
static inline bool
tpm_flow_needs_stats(const struct tpm_flow *f, uint32_t sum_mask)
{
    return (sum_mask | (f->key.ipver ^ 4)) != 0;  /* No branch. */
}

/* Returns the offset from a flow entry of its packets and bytes of epoch
 * parity 'p' (0 or 1): at the head of the statistics line of parity 'p'
 * if 'in_stats' (tpm_flow_needs_stats()), else in line 0.  A loop over
 * flows computes both once for its epoch's parity. */
static inline size_t
tpm_flow_count_off(int p, bool in_stats)
{
    return (in_stats
            ? (offsetof(struct tpm_flow, stats[0].count)
               + p * sizeof(struct tpm_flow_stats))
            : (offsetof(struct tpm_flow, v4.count0)
               + p * (offsetof(struct tpm_flow, v4.count1)
                      - offsetof(struct tpm_flow, v4.count0))));
}

/* Returns flow 'f''s packets and bytes of epoch parity 'p' (0 or 1): in
 * line 0 for an IPv4 flow without summaries, else at the head of the
 * statistics line of parity 'p'.  Both are reset with the epoch's tag
 * (lazy reset). */
static inline struct tpm_flow_count *
tpm_flow_count(struct tpm_flow *f, int p)
{
    /* Both offsets, and one conditional move between them. */
    size_t line0 = tpm_flow_count_off(p, false);
    size_t stats = tpm_flow_count_off(p, true);
    return (struct tpm_flow_count *)
        ((char *) f + (tpm_flow_needs_stats(f, f->sum_mask) ? stats : line0));
}

/* tpm_flow_count() for reading. */
static inline const struct tpm_flow_count *
tpm_flow_count_const(const struct tpm_flow *f, int p)
{
    return tpm_flow_count((struct tpm_flow *) f, p);
}

/* Stores flow 'f''s key in '*key': the entry's own, without the counts an
 * IPv4 flow keeps in its unused address words. */
static inline void
tpm_flow_key(const struct tpm_flow *f, struct tpm_key *key)
{
    memcpy(key, &f->key, sizeof *key);
    if (key->ipver == 4) {
        memset(&key->src[1], 0, 3 * sizeof key->src[1]);
        memset(&key->dst[1], 0, 3 * sizeof key->dst[1]);
    }
}

struct tpm_flow_table_stats {
    uint64_t inserts;           /* New entries. */
    uint64_t reuses;            /* Insertions into dead or stale slots. */
    uint64_t evictions;         /* Insertions that evicted a recent
                                 * entry, losing unswept statistics. */
    uint64_t freed;             /* Entries freed by the scrubber. */
    uint64_t pending_reused;    /* PENDING entries replaced by a colliding
                                 * new flow ('dos_mode'). */
    uint64_t pending_freed;     /* PENDING entries freed by the scrubber
                                 * for no packet this epoch ('dos_mode'). */
};

struct tpm_flow_table {
    struct tpm_flow *flows;
    uint32_t mask;              /* n_slots - 1. */
    uint32_t probe_limit;
    uint32_t n_used;            /* Slots ever used (not FREE). */
    uint32_t n_live;            /* LIVE or PENDING entries. */
    uint32_t scrub_pos;         /* Scrubber cursor. */
    bool has_v6;                /* An entry was ever inserted for a key
                                 * that is not IPv4, whose counts are in
                                 * its statistics lines (tpm_flow_count():
                                 * the sweep prefetches those then). */
    bool dos_mode;              /* PENDING entries are below the DoS
                                 * threshold and disposable: a new flow
                                 * probing past one takes its slot, and the
                                 * scrubber frees those without a packet
                                 * in the current epoch.  Their bytes live
                                 * on in the filter table
                                 * (match-scatter.c). */
    struct tpm_flow_table_stats stats;
    struct tpm_huge_region region;
    /* Touched entries, one bitmap per epoch parity: bit i of
     * 'touched[tag & 1]' is set when entry i gets its first packet of the
     * epoch of tag 'tag' (tpm_flow_touch()), and the bitmap is cleared
     * when the next epoch of that parity begins
     * (tpm_flow_table_untouch()), after the sweep of the one before it
     * finished or was abandoned.  A clear bit tells the sweep that the
     * entry had no packet in the swept epoch without reading the entry
     * (a random access); a set bit may be stale, and the sweep then reads
     * the entry's tag as it would without the bitmap.  One bit per entry
     * and parity: flow_table_size / 4 bytes. */
    uint64_t *touched[2];
};

/* Creates 'ft' with 'n_slots' entries (a power of two) and the given probe
 * limit (1 to n_slots).  Returns 0 or a positive errno. */
int tpm_flow_table_init(struct tpm_flow_table *ft, uint32_t n_slots,
                        uint32_t probe_limit);
void tpm_flow_table_destroy(struct tpm_flow_table *ft);

static inline struct tpm_flow *
tpm_flow_table_bucket(const struct tpm_flow_table *ft, uint32_t hash)
{
    return &ft->flows[hash & ft->mask];
}

static inline uint32_t
tpm_flow_index(const struct tpm_flow_table *ft, const struct tpm_flow *f)
{
    return (uint32_t) (f - ft->flows);
}

/* Returns true if 'f' holds statistics of epoch tag 'tag' or 'tag - 1'
 * (the current or the previous epoch). */
static inline bool
tpm_flow_is_recent(const struct tpm_flow *f, uint32_t tag)
{
    return f->tag[tag & 1] == tag || f->tag[(tag - 1) & 1] == tag - 1;
}

/* Returns the most recent epoch tag of 'f' (0 if never updated). */
static inline uint32_t
tpm_flow_last_tag(const struct tpm_flow *f)
{
    return (int32_t) (f->tag[0] - f->tag[1]) > 0 ? f->tag[0] : f->tag[1];
}

/* Marks entry 'idx' touched in the epoch whose bitmap is 'touched'
 * ('ft->touched[tag & 1]'). */
static inline void
tpm_flow_touch(uint64_t *touched, uint32_t idx)
{
    touched[idx / 64] |= UINT64_C(1) << (idx % 64);
}

/* Returns false if entry 'idx' had no packet in the epoch whose bitmap is
 * 'touched' ('ft->touched[tag & 1]'; true if it may have had). */
static inline bool
tpm_flow_touched(const uint64_t *touched, uint32_t idx)
{
    return touched[idx / 64] >> (idx % 64) & 1;
}

void tpm_flow_table_untouch(struct tpm_flow_table *, uint32_t tag);

/* By IP version, the bytes of each half of a key's addresses that an IPv4
 * key leaves to its entry's counts: one bit per byte, as
 * tpm_flow_key_equal() compares them (a table of every byte value: no
 * instruction to bound the index).  Version 0's (a frame not parsed) has
 * bit 16 set, which no comparison clears: such a key equals no entry. */
extern const uint32_t tpm_flow_key_unused[256];

/* Returns true if the key of entry 'f' is 'key', a packet's
 * (tpm_key_equal() of tpm_flow_key()): for an IPv4 'key' the address
 * words that hold an IPv4 entry's counts are left out, and the last word
 * (the version's) tells that the entry is IPv4 too; a key that is not
 * IP's (version 0) is no entry's.  Where the CPU has SSE2, the entry's
 * first four words as two vectors, aligned since entries are. */
static inline bool
tpm_flow_key_equal(const struct tpm_flow *f, const struct tpm_key *key)
{
    const tpm_key_word *x = (const tpm_key_word *) &f->key;
    const tpm_key_word *y = (const tpm_key_word *) key;
    uint32_t unused = tpm_flow_key_unused[key->ipver];
#if defined(__SSE2__)
    const __m128i *a = (const __m128i *) &f->key;
    const __m128i *b = (const __m128i *) key;
    __m128i eq = _mm_and_si128(_mm_cmpeq_epi8(_mm_load_si128(a),
                                              _mm_loadu_si128(b)),
                               _mm_cmpeq_epi8(_mm_load_si128(a + 1),
                                              _mm_loadu_si128(b + 1)));
    return !((((uint32_t) _mm_movemask_epi8(eq) | unused) ^ 0xffff)
             | (x[4] ^ y[4]));
#else
    if (unused) {
        return !((f->key.src[0] ^ key->src[0]) | (f->key.dst[0] ^ key->dst[0])
                 | (x[4] ^ y[4]) | (unused >> 16));
    }
    return tpm_key_equal(&f->key, key);
#endif
}

/* Returns true if entry 'f' holds 'key', whose hash is 'hash', in a live
 * or pending flow: the test tpm_flow_table_find() makes of each slot it
 * probes.  'key' is a parsed packet's (IP version 4 or 6): a free entry's
 * key (all zero) and a dead one's (version 0, tpm_flow_table_scrub()) are
 * never equal to it, so the entry's state needs no test. */
static inline bool
tpm_flow_holds(const struct tpm_flow *f, const struct tpm_key *key,
               uint32_t hash)
{
    return f->hash == hash && tpm_flow_key_equal(f, key);
}

/* tpm_flow_table_find() past the home slot: the whole probe sequence from
 * the home slot on, out of line. */
struct tpm_flow *tpm_flow_table_probe(const struct tpm_flow_table *ft,
                                      const struct tpm_key *key,
                                      uint32_t hash);

/* Looks up 'key' with hash 'hash'.  Returns the entry or NULL.  The home
 * slot (the first of the probe sequence) is tested inline: it holds the
 * flow in the common case. */
static inline struct tpm_flow *
tpm_flow_table_find(const struct tpm_flow_table *ft,
                    const struct tpm_key *key, uint32_t hash)
{
    struct tpm_flow *f = tpm_flow_table_bucket(ft, hash);
    if (OVS_LIKELY(tpm_flow_holds(f, key, hash))) {
        return f;
    }
    return tpm_flow_table_probe(ft, key, hash);
}

/* Inserts 'key', which must not be in the table, at the current epoch tag
 * 'tag'.  Never fails: it takes the first slot of the probe window that is
 * free, dead, stale (no update in this epoch or the last, and no
 * connection state) or, in 'dos_mode', PENDING without connection state;
 * failing those, it evicts the least recently updated entry.  The new entry is
 * in state PENDING with no summaries; the caller sets it up.  If a live
 * entry was evicted or reused, '*old_key' receives its key (for callers
 * that track keys, such as tests) and '*replaced' is set to true. */
struct tpm_flow *tpm_flow_table_insert(struct tpm_flow_table *ft,
                                       const struct tpm_key *key,
                                       uint32_t hash, uint32_t tag,
                                       bool *replaced,
                                       struct tpm_key *old_key);

/* Scrubs up to 'n' slots from the scrubber's cursor: frees LIVE and
 * PENDING entries whose last update is more than 'idle' epochs before
 * 'tag' (in 'dos_mode', PENDING entries without connection state as soon
 * as they missed epoch 'tag'), and calls 'cb' (if nonnull) on each LIVE
 * entry visited so the caller can drop retired summaries.  Returns the
 * number of slots visited; the cursor wraps around. */
uint32_t tpm_flow_table_scrub(struct tpm_flow_table *ft, uint32_t n,
                              uint32_t tag, uint32_t idle,
                              void (*cb)(struct tpm_flow *, void *aux),
                              void *aux);

#endif /* flow-table.h */
