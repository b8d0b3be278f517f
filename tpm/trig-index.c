#include "trig-index.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define TRIG_INDEX_MIN_TABLE 8

/* Tables of at least this many bytes come from tpm_huge_alloc(). */
#define TRIG_INDEX_HUGE_MIN TPM_HUGE_PAGE_SIZE

/* Bytes of a table of 'size' slots: the rules, then the tags. */
static size_t
table_bytes__(uint32_t size)
{
    return (size_t) size * (sizeof(struct trig_index_rule)
                            + sizeof(uint32_t));
}

/* Points 'pat' at a new zeroed table of 'size' slots (a power of two). */
static void
table_alloc__(struct trig_pattern *pat, uint32_t size)
{
    size_t bytes = table_bytes__(size);
    void *base;

    if (bytes >= TRIG_INDEX_HUGE_MIN
        && !tpm_huge_alloc(&pat->region, bytes, "trigger index")) {
        base = pat->region.base;
    } else {
        memset(&pat->region, 0, sizeof pat->region);
        base = xzalloc_aligned(bytes, CACHE_LINE_SIZE);
    }
    pat->rules = base;
    pat->tags = (uint32_t *) (pat->rules + size);
    pat->table_mask = size - 1;
}

/* Frees the table of 'pat', but not the rules' 'more' arrays. */
static void
table_free__(struct trig_pattern *pat)
{
    if (pat->region.base) {
        tpm_huge_free(&pat->region);
    } else {
        free(pat->rules);
    }
    pat->rules = NULL;
    pat->tags = NULL;
}

void
trig_index_init(struct trig_index *ti)
{
    memset(ti, 0, sizeof *ti);
}

void
trig_index_destroy(struct trig_index *ti)
{
    if (!ti) {
        return;
    }
    for (uint32_t p = 0; p < ti->n_patterns; p++) {
        struct trig_pattern *pat = &ti->patterns[p];
        for (uint32_t i = 0; i <= pat->table_mask; i++) {
            if (pat->tags[i]) {
                free(pat->rules[i].more);
            }
        }
        table_free__(pat);
    }
    free(ti->patterns);
    memset(ti, 0, sizeof *ti);
}

static struct trig_pattern *
pattern_find__(const struct trig_index *ti, const struct tpm_key *mask)
{
    for (uint32_t p = 0; p < ti->n_patterns; p++) {
        if (tpm_key_equal(&ti->patterns[p].mask, mask)) {
            return &ti->patterns[p];
        }
    }
    return NULL;
}

/* Returns the slot of 'pat' that holds masked key 'key' with hash 'hash',
 * or UINT32_MAX.  Reads tags, and a rule only where its tag matches. */
static inline uint32_t
rule_find__(const struct trig_pattern *pat, const struct tpm_key *key,
            uint32_t hash)
{
    uint32_t tag = TRIG_INDEX_TAG(hash);

    for (uint32_t i = hash & pat->table_mask;;
         i = (i + 1) & pat->table_mask) {
        uint32_t t = pat->tags[i];
        if (t == tag) {
            if (OVS_LIKELY(tpm_key_equal(&pat->rules[i].key, key))) {
                return i;
            }
        } else if (!t) {
            return UINT32_MAX;
        }
    }
}

/* Returns the first empty slot of 'pat' (which has one) for 'tag'. */
static uint32_t
slot_free__(const struct trig_pattern *pat, uint32_t tag)
{
    uint32_t i = tag & pat->table_mask;
    while (pat->tags[i]) {
        i = (i + 1) & pat->table_mask;
    }
    return i;
}

/* Moves every rule of 'pat' into a new table of 'size' slots. */
static void
pattern_resize__(struct trig_pattern *pat, uint32_t size)
{
    struct trig_pattern old = *pat;
    uint32_t old_size = old.rules ? old.table_mask + 1 : 0;

    table_alloc__(pat, size);
    for (uint32_t i = 0; i < old_size; i++) {
        uint32_t tag = old.tags[i];
        if (tag) {
            uint32_t j = slot_free__(pat, tag);
            pat->tags[j] = tag;
            pat->rules[j] = old.rules[i];
        }
    }
    if (old.rules) {
        table_free__(&old);
    }
}

void
trig_index_insert(struct trig_index *ti, const struct tpm_match *match,
                  uint32_t id)
{
    struct trig_pattern *pat = pattern_find__(ti, &match->mask);
    if (!pat) {
        if (ti->n_patterns == ti->cap_patterns) {
            ti->cap_patterns = ti->cap_patterns ? 2 * ti->cap_patterns : 4;
            ti->patterns = xrealloc(ti->patterns,
                                    ti->cap_patterns * sizeof *pat);
        }
        pat = &ti->patterns[ti->n_patterns++];
        memset(pat, 0, sizeof *pat);
        pat->mask = match->mask;
        pattern_resize__(pat, TRIG_INDEX_MIN_TABLE);
    }

    struct tpm_key key;
    tpm_key_and(&key, &match->key, &match->mask);
    uint32_t hash = tpm_key_hash(&key);
    uint32_t slot = rule_find__(pat, &key, hash);
    if (slot == UINT32_MAX) {
        if (2 * (pat->n_rules + 1) > pat->table_mask + 1) {
            pattern_resize__(pat, 2 * (pat->table_mask + 1));
        }
        slot = slot_free__(pat, TRIG_INDEX_TAG(hash));
        struct trig_index_rule *r = &pat->rules[slot];
        memset(r, 0, sizeof *r);
        r->key = key;
        r->id = id;
        r->n_ids = 1;
        pat->tags[slot] = TRIG_INDEX_TAG(hash);
        pat->n_rules++;
    } else {
        struct trig_index_rule *r = &pat->rules[slot];
        if (r->n_ids - 1 == r->cap_more) {
            r->cap_more = r->cap_more ? 2 * r->cap_more : 3;
            r->more = xrealloc(r->more, r->cap_more * sizeof *r->more);
        }
        r->more[r->n_ids++ - 1] = id;
    }
    pat->n_ids++;
    ti->n_ids++;
}

/* Empties slot 'hole' of 'pat' (whose rule's arrays are already freed) by
 * backward shifting the rest of its cluster.  Reads only tags to decide,
 * since a tag gives its rule's home slot. */
static void
rule_delete__(struct trig_pattern *pat, uint32_t hole)
{
    uint32_t mask = pat->table_mask;

    for (uint32_t i = (hole + 1) & mask;; i = (i + 1) & mask) {
        uint32_t tag = pat->tags[i];
        if (!tag) {
            break;
        }
        uint32_t home = tag & mask;
        /* Move slot 'i' into the hole if its home is not in (hole, i]. */
        if (((i - home) & mask) >= ((i - hole) & mask)) {
            pat->tags[hole] = tag;
            pat->rules[hole] = pat->rules[i];
            hole = i;
        }
    }
    pat->tags[hole] = 0;
    memset(&pat->rules[hole], 0, sizeof pat->rules[hole]);
    pat->n_rules--;
}

int
trig_index_remove(struct trig_index *ti, const struct tpm_match *match,
                  uint32_t id)
{
    struct trig_pattern *pat = pattern_find__(ti, &match->mask);
    if (!pat) {
        return ENOENT;
    }

    struct tpm_key key;
    tpm_key_and(&key, &match->key, &match->mask);
    uint32_t slot = rule_find__(pat, &key, tpm_key_hash(&key));
    if (slot == UINT32_MAX) {
        return ENOENT;
    }

    struct trig_index_rule *r = &pat->rules[slot];
    uint32_t i;
    if (r->id == id) {
        i = 0;
    } else {
        for (i = 1; i < r->n_ids && r->more[i - 1] != id; i++) {
            continue;
        }
        if (i == r->n_ids) {
            return ENOENT;
        }
    }

    /* Fill position 'i' with the last id. */
    uint32_t last = --r->n_ids;
    if (last) {
        uint32_t moved = r->more[last - 1];
        if (i) {
            r->more[i - 1] = moved;
        } else {
            r->id = moved;
        }
    }
    pat->n_ids--;
    ti->n_ids--;
    if (!r->n_ids) {
        free(r->more);
        rule_delete__(pat, slot);
        if (!pat->n_rules) {
            table_free__(pat);
            *pat = ti->patterns[--ti->n_patterns];
        }
    } else if (r->n_ids == 1 && r->more) {
        free(r->more);
        r->more = NULL;
        r->cap_more = 0;
    }
    return 0;
}

/* Appends the ids of 'r' after its first to 'ids' (room for 'max', 'n'
 * used or counted).  Returns the new count. */
static uint32_t
rule_more_ids__(const struct trig_index_rule *r, uint32_t *ids, uint32_t n,
                uint32_t max)
{
    for (uint32_t i = 0; i < r->n_ids - 1; i++, n++) {
        if (n < max) {
            ids[n] = r->more[i];
        }
    }
    return n;
}

/* Returns true if 'rule' (a masked key) equals 'key' masked with 'mask'. */
static inline bool
rule_key_matches__(const struct tpm_key *rule, const struct tpm_key *key,
                   const struct tpm_key *mask)
{
    const uint64_t *r = (const uint64_t *) rule;
    const uint64_t *k = (const uint64_t *) key;
    const uint64_t *m = (const uint64_t *) mask;

    BUILD_ASSERT_DECL(TPM_KEY_WORDS == 5);
    return !((r[0] ^ (k[0] & m[0])) | (r[1] ^ (k[1] & m[1]))
             | (r[2] ^ (k[2] & m[2])) | (r[3] ^ (k[3] & m[3]))
             | (r[4] ^ (k[4] & m[4])));
}

/* Returns the hash of 'key' masked with 'mask'. */
static inline uint32_t
masked_hash__(const struct tpm_key *key, const struct tpm_key *mask)
{
    const uint64_t *k = (const uint64_t *) key;
    const uint64_t *m = (const uint64_t *) mask;
    uint64_t masked[TPM_KEY_WORDS];

    masked[0] = k[0] & m[0];
    masked[1] = k[1] & m[1];
    masked[2] = k[2] & m[2];
    masked[3] = k[3] & m[3];
    masked[4] = k[4] & m[4];
    return tpm_key_hash((const struct tpm_key *) masked);
}

uint32_t
trig_index_match(const struct trig_index *ti, const struct tpm_key *key,
                 uint32_t *ids, uint32_t max)
{
    uint32_t n = 0;

    if (!ti->n_patterns) {
        return 0;
    }

    /* Software pipelined: pattern p + 1's key is hashed, and its home tags
     * prefetched, before pattern p is probed.  The probe's branches are
     * unpredictable (hit, miss, or one more slot), and this way the next
     * hash is older than them, so a misprediction does not discard it. */
    const struct trig_pattern *pat = ti->patterns;
    uint32_t next = masked_hash__(key, &pat->mask);
    for (uint32_t p = 0; p < ti->n_patterns; p++, pat++) {
        uint32_t hash = next;
        if (p + 1 < ti->n_patterns) {
            next = masked_hash__(key, &pat[1].mask);
            tpm_prefetch(&pat[1].tags[next & pat[1].table_mask]);
        }

        uint32_t tag = TRIG_INDEX_TAG(hash);
        for (uint32_t i = hash & pat->table_mask;;
             i = (i + 1) & pat->table_mask) {
            uint32_t t = pat->tags[i];
            if (t == tag) {
                const struct trig_index_rule *r = &pat->rules[i];
                if (OVS_LIKELY(rule_key_matches__(&r->key, key,
                                                  &pat->mask))) {
                    if (n < max) {
                        ids[n] = r->id;
                    }
                    n++;
                    if (OVS_UNLIKELY(r->n_ids > 1)) {
                        n = rule_more_ids__(r, ids, n, max);
                    }
                    break;
                }
            } else if (!t) {
                break;
            }
        }
    }
    return n;
}
