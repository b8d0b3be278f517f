/* SPDX-License-Identifier: Apache-2.0 */
#include "trig-index.h"

#include <arpa/inet.h>
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

/* ----------------------------------------------------------------------
 * Prefix tries (see "Prefix tries" in trig-index.h).
 *
 * An address is handled as an unsigned 128-bit integer whose most
 * significant bit is the address's first bit. */

typedef unsigned __int128 trig_addr;

/* Returns the address in 'words' (network byte order). */
static inline trig_addr
addr_get__(const uint32_t words[4])
{
    return ((trig_addr) ntohl(words[0]) << 96
            | (trig_addr) ntohl(words[1]) << 64
            | (trig_addr) ntohl(words[2]) << 32
            | ntohl(words[3]));
}

/* Returns the 64 bits of 'a' from bit 'ofs' (< 128) on, left-aligned. */
static inline uint64_t
addr_bits__(trig_addr a, unsigned int ofs)
{
    return (uint64_t) ((a << ofs) >> 64);
}

/* Returns bit 'ofs' (< 128) of 'a'. */
static inline unsigned int
addr_bit__(trig_addr a, unsigned int ofs)
{
    return (unsigned int) ((a << ofs) >> 127);
}

/* Returns the number of leading one bits of the address mask 'words'. */
static unsigned int
addr_plen__(const uint32_t words[4])
{
    trig_addr inv = ~addr_get__(words);
    uint64_t hi = (uint64_t) (inv >> 64), lo = (uint64_t) inv;

    return (hi ? __builtin_clzll(hi)
            : lo ? 64 + __builtin_clzll(lo)
            : 128);
}

/* Returns the first 'plen' bits of 'a', the rest cleared. */
static trig_addr
addr_prefix__(trig_addr a, unsigned int plen)
{
    return plen ? a & ~(trig_addr) 0 << (128 - plen) : 0;
}

/* Returns a 64-bit mask of the first 'n' (1 to 64) bits. */
static inline uint64_t
top_bits__(unsigned int n)
{
    return ~0ull << (64 - n);
}

static inline void
bit_assign__(uint64_t *map, uint32_t bit, bool value)
{
    if (bit < TRIG_INDEX_TRIE_PATTERNS) {
        if (value) {
            *map |= 1ull << bit;
        } else {
            *map &= ~(1ull << bit);
        }
    }
}

/* A node's prefix bits, left-aligned, and their number. */
static inline uint64_t
node_bits__(const struct trig_trie_node *node)
{
    return node->prefix & ~(uint64_t) (TRIG_TRIE_LEN_MASK | TRIG_TRIE_STOP);
}

static inline unsigned int
node_len__(const struct trig_trie_node *node)
{
    return node->prefix & TRIG_TRIE_LEN_MASK;
}

/* Sets the bits of 'node' to the first 'len' of 'bits' (keeps its stop
 * flag). */
static inline void
node_set__(struct trig_trie_node *node, uint64_t bits, unsigned int len)
{
    node->prefix = ((len ? bits & top_bits__(len) : 0) | len
                    | (node->prefix & TRIG_TRIE_STOP));
}

/* Returns the patterns with a rule whose prefix in trie 't' agrees with
 * address 'a'.  If 'exact' is false, perhaps also some patterns without:
 * the walk stops at a node with TRIG_TRIE_STOP and takes every pattern
 * below it (see trie_below__()). */
static inline uint64_t
trie_lookup__(const struct trig_trie *t, trig_addr a, bool exact)
{
    uint64_t patterns = 0;
    unsigned int ofs = 0;

    for (uint32_t i = t->root; i;) {
        const struct trig_trie_node *node = &t->nodes[i];
        uint64_t diff = addr_bits__(a, ofs) ^ node->prefix;
        unsigned int len = node_len__(node);
        if (len && diff >> (64 - len)) {
            break;
        }
        patterns |= node->patterns;
        if (exact ? !(node->below & ~patterns)
                  : node->prefix & TRIG_TRIE_STOP) {
            return patterns | node->below;
        }
        ofs += len;
        i = node->child[addr_bit__(a, ofs)];
    }
    return patterns;
}

/* Makes room in 't' for 'n' more nodes (allocated from the end). */
static void
trie_reserve__(struct trig_trie *t, uint32_t n)
{
    if (t->n_nodes + 1 + n <= t->cap_nodes) {
        return;
    }
    uint32_t cap = MAX(16, 2 * t->cap_nodes);
    while (cap < t->n_nodes + 1 + n) {
        cap *= 2;
    }
    struct trig_trie_node *nodes = xzalloc_aligned(cap * sizeof *nodes,
                                                   CACHE_LINE_SIZE);
    if (t->nodes) {
        memcpy(nodes, t->nodes, (t->n_nodes + 1) * sizeof *nodes);
        free(t->nodes);
    }
    t->nodes = nodes;
    t->refs = xrealloc(t->refs, cap * sizeof *t->refs);
    memset(&t->refs[t->cap_nodes], 0,
           (cap - t->cap_nodes) * sizeof *t->refs);
    t->cap_nodes = cap;
}

/* Returns a new node of 't' (room reserved) with the first 'len' bits of
 * 'bits'. */
static uint32_t
trie_node_new__(struct trig_trie *t, uint64_t bits, unsigned int len)
{
    uint32_t i = t->free_list;
    if (i) {
        t->free_list = t->nodes[i].child[0];
    } else {
        i = ++t->n_nodes;
    }
    struct trig_trie_node *node = &t->nodes[i];
    memset(node, 0, sizeof *node);
    node_set__(node, bits, len);
    t->n_live++;
    return i;
}

static void
trie_node_free__(struct trig_trie *t, uint32_t i)
{
    struct trig_trie_refs *r = &t->refs[i];
    free(r->refs);
    memset(r, 0, sizeof *r);
    memset(&t->nodes[i], 0, sizeof t->nodes[i]);
    t->nodes[i].child[0] = t->free_list;
    t->free_list = i;
    t->n_live--;
}

static void
trie_destroy__(struct trig_trie *t)
{
    if (t->refs) {
        for (uint32_t i = 0; i <= t->n_nodes; i++) {
            free(t->refs[i].refs);
        }
    }
    free(t->refs);
    free(t->nodes);
    memset(t, 0, sizeof *t);
}

/* Sets the 'below' bitmap, the walk length and the stop flag of node 'i'
 * of 't' from its own and its children's.
 *
 * A node's walk length is the most levels a walk that does not stop there
 * visits below it (down to the next nodes where walks stop).  The walk
 * stops at a node if probing the patterns with rules below it costs no
 * more than walking those levels (see TRIG_TRIE_PROBE_COST in
 * trig-index.h), so that the walk of a key that stays in one pattern's
 * rules, or in rules shared by a few patterns, ends high up in the trie.
 * All the rules of a pattern end at the same depth, so the patterns below
 * a node are never on the walk's way to it: the flag depends only on the
 * subtree. */
static void
trie_below__(struct trig_trie *t, uint32_t i)
{
    struct trig_trie_node *node = &t->nodes[i];
    uint64_t more = 0;
    uint32_t walk = 0;

    for (int b = 0; b < 2; b++) {
        uint32_t c = node->child[b];
        if (c) {
            const struct trig_trie_node *child = &t->nodes[c];
            more |= child->below;
            walk = MAX(walk, 1 + (child->prefix & TRIG_TRIE_STOP
                                  ? 0 : t->refs[c].walk));
        }
    }
    node->below = node->patterns | more;
    t->refs[i].walk = walk;
    if (__builtin_popcountll(more & ~node->patterns) * TRIG_TRIE_PROBE_COST
        <= walk * TRIG_TRIE_LEVEL_COST) {
        node->prefix |= TRIG_TRIE_STOP;
    } else {
        node->prefix &= ~(uint64_t) TRIG_TRIE_STOP;
    }
}

/* Recomputes trie_below__() in the subtree of node 'i' of 't'. */
static void
trie_below_all__(struct trig_trie *t, uint32_t i)
{
    if (i) {
        trie_below_all__(t, t->nodes[i].child[0]);
        trie_below_all__(t, t->nodes[i].child[1]);
        trie_below__(t, i);
    }
}

/* Adds 'delta' (1 or -1) to the rules of 'pattern' that end at node 'i'
 * of 't', and keeps the node's bitmap in step (not 'below'). */
static void
trie_ref__(struct trig_trie *t, uint32_t i, uint32_t pattern, int delta)
{
    struct trig_trie_refs *r = &t->refs[i];
    uint32_t j;

    for (j = 0; j < r->n && r->refs[j].pattern != pattern; j++) {
        continue;
    }
    if (j == r->n) {
        if (delta < 0) {
            return;
        }
        if (r->n == r->cap) {
            r->cap = r->cap ? 2 * r->cap : 2;
            r->refs = xrealloc(r->refs, r->cap * sizeof *r->refs);
        }
        r->refs[r->n].pattern = pattern;
        r->refs[r->n].n_rules = 0;
        r->n++;
    }
    r->refs[j].n_rules += delta;
    if (!r->refs[j].n_rules) {
        r->refs[j] = r->refs[--r->n];
        bit_assign__(&t->nodes[i].patterns, pattern, false);
    } else {
        bit_assign__(&t->nodes[i].patterns, pattern, true);
    }
}

/* Removes node '*slot' of 't' if no rule ends there and it has no child,
 * or merges it into its only child if their bits fit in one node.  Run
 * after every insertion and removal, along its path, so that every node
 * without a rule has two children or one it cannot merge with. */
static void
trie_prune__(struct trig_trie *t, uint32_t *slot)
{
    uint32_t i = *slot;
    struct trig_trie_node *node = &t->nodes[i];

    if (t->refs[i].n || (node->child[0] && node->child[1])) {
        return;
    }
    uint32_t c = node->child[0] | node->child[1];
    if (!c) {
        *slot = 0;
        trie_node_free__(t, i);
    } else if (node_len__(node) + node_len__(&t->nodes[c])
               <= TRIG_TRIE_NODE_BITS) {
        struct trig_trie_node *child = &t->nodes[c];
        unsigned int len = node_len__(node);
        node_set__(child, node_bits__(node) | node_bits__(child) >> len,
                   len + node_len__(child));
        *slot = c;
        trie_node_free__(t, i);
    }
}

/* Replaces node '*slot' of 't' by a new node holding its first 'len' bits
 * (fewer than it has), whose only child is the rest.  Returns the new
 * node. */
static uint32_t
trie_split__(struct trig_trie *t, uint32_t *slot, unsigned int len)
{
    uint32_t old = *slot;
    struct trig_trie_node *rest = &t->nodes[old];
    uint64_t bits = node_bits__(rest);
    unsigned int rest_len = node_len__(rest) - len;
    uint32_t up = trie_node_new__(t, bits, len);
    uint32_t *rest_slot = &t->nodes[up].child[bits << len >> 63];

    node_set__(rest, bits << len, rest_len);
    t->nodes[up].below = rest->below;
    *rest_slot = old;
    *slot = up;

    /* The rest, shorter now, may merge into its only child. */
    trie_prune__(t, rest_slot);
    return up;
}

/* Prunes the 'depth' nodes at 'path' (slots from the root down) and
 * recomputes their trie_below__(), bottom-up: a merge frees only the node
 * of the slot it prunes, so the slots above stay valid. */
static void
trie_fix_path__(struct trig_trie *t, uint32_t **path, unsigned int depth)
{
    while (depth) {
        uint32_t *slot = path[--depth];
        trie_prune__(t, slot);
        if (*slot) {
            trie_below__(t, *slot);
        }
    }
}

/* Most nodes on a path: every node but the root has at least one bit. */
#define TRIE_MAX_DEPTH (128 + 1)

/* Adds a rule of 'pattern' with the 'plen' (1 to 128) bit prefix 'a' to
 * 't'. */
static void
trie_insert__(struct trig_trie *t, trig_addr a, unsigned int plen,
              uint32_t pattern)
{
    uint32_t *path[TRIE_MAX_DEPTH];
    uint32_t *slot = &t->root;
    unsigned int ofs = 0, depth = 0;
    uint32_t i;

    /* A split and a chain of nodes for up to 128 new bits; then no
     * reallocation moves 'slot'. */
    trie_reserve__(t, 1 + (128 + TRIG_TRIE_NODE_BITS - 1)
                      / TRIG_TRIE_NODE_BITS);
    for (;;) {
        i = *slot;
        if (!i) {
            /* A chain of new nodes for the rest of the prefix. */
            for (;;) {
                unsigned int len = MIN(TRIG_TRIE_NODE_BITS, plen - ofs);
                i = trie_node_new__(t, addr_bits__(a, ofs), len);
                *slot = i;
                path[depth++] = slot;
                ofs += len;
                if (ofs == plen) {
                    break;
                }
                slot = &t->nodes[i].child[addr_bit__(a, ofs)];
            }
            break;
        }

        const struct trig_trie_node *node = &t->nodes[i];
        uint64_t diff = addr_bits__(a, ofs) ^ node_bits__(node);
        unsigned int same = diff ? __builtin_clzll(diff) : 64;
        unsigned int len = MIN(MIN(same, plen - ofs), node_len__(node));
        if (len < node_len__(node)) {
            i = trie_split__(t, slot, len);
        }
        path[depth++] = slot;
        ofs += len;
        if (ofs == plen) {
            break;
        }
        slot = &t->nodes[i].child[addr_bit__(a, ofs)];
    }
    trie_ref__(t, i, pattern, 1);

    /* A split shortened a node, whose parent may now merge into it. */
    trie_fix_path__(t, path, depth);
}

/* Removes a rule of 'pattern' with the 'plen' (1 to 128) bit prefix 'a'
 * from 't', which has it. */
static void
trie_remove__(struct trig_trie *t, trig_addr a, unsigned int plen,
              uint32_t pattern)
{
    uint32_t *path[TRIE_MAX_DEPTH];
    uint32_t *slot = &t->root;
    unsigned int ofs = 0, depth = 0;
    uint32_t i;

    for (;;) {
        i = *slot;
        if (!i || depth == ARRAY_SIZE(path)) {
            return;             /* Not there: cannot happen. */
        }
        path[depth++] = slot;
        ofs += node_len__(&t->nodes[i]);
        if (ofs >= plen) {
            break;
        }
        slot = &t->nodes[i].child[addr_bit__(a, ofs)];
    }
    if (ofs != plen) {
        return;                 /* Not there: cannot happen. */
    }
    trie_ref__(t, i, pattern, -1);
    trie_fix_path__(t, path, depth);
    if (!t->root) {
        trie_destroy__(t);
    }
}

/* Renames pattern 'from' to 'to' (which has no rule) in every node of
 * 't'. */
static void
trie_rename__(struct trig_trie *t, uint32_t from, uint32_t to)
{
    for (uint32_t i = 1; i <= t->n_nodes; i++) {
        struct trig_trie_refs *r = &t->refs[i];
        for (uint32_t j = 0; j < r->n; j++) {
            if (r->refs[j].pattern == from) {
                r->refs[j].pattern = to;
                bit_assign__(&t->nodes[i].patterns, from, false);
                bit_assign__(&t->nodes[i].patterns, to, true);
                break;
            }
        }
    }
    trie_below_all__(t, t->root);
}

/* Adds (delta 1) or removes (-1) masked key 'key' of pattern 'p' of 'ti'
 * to or from the tries. */
static void
tries_update__(struct trig_index *ti, uint32_t p, const struct tpm_key *key,
               int delta)
{
    const struct trig_pattern *pat = &ti->patterns[p];

    if (pat->src_plen) {
        trig_addr a = addr_prefix__(addr_get__(key->src), pat->src_plen);
        if (delta > 0) {
            trie_insert__(&ti->src_trie, a, pat->src_plen, p);
        } else {
            trie_remove__(&ti->src_trie, a, pat->src_plen, p);
        }
    }
    if (pat->dst_plen) {
        trig_addr a = addr_prefix__(addr_get__(key->dst), pat->dst_plen);
        if (delta > 0) {
            trie_insert__(&ti->dst_trie, a, pat->dst_plen, p);
        } else {
            trie_remove__(&ti->dst_trie, a, pat->dst_plen, p);
        }
    }
}

/* Returns the patterns below TRIG_INDEX_TRIE_PATTERNS that may match
 * 'key': those whose rules agree with its addresses, and with 'exact'
 * false perhaps more (see trie_lookup__()). */
static inline uint64_t
candidates__(const struct trig_index *ti, const struct tpm_key *key,
             bool exact)
{
    uint64_t dst = ti->wild_dst;
    if (ti->dst_trie.root) {
        dst |= trie_lookup__(&ti->dst_trie, addr_get__(key->dst), exact);
    }
    if (!dst) {
        return 0;
    }
    uint64_t src = ti->wild_src;
    if (ti->src_trie.root) {
        src |= trie_lookup__(&ti->src_trie, addr_get__(key->src), exact);
    }
    return dst & src;
}

/* ---------------------------------------------------------------------- */

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
    trie_destroy__(&ti->src_trie);
    trie_destroy__(&ti->dst_trie);
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
        uint32_t p = ti->n_patterns++;
        pat = &ti->patterns[p];
        memset(pat, 0, sizeof *pat);
        pat->mask = match->mask;
        pat->src_plen = addr_plen__(match->mask.src);
        pat->dst_plen = addr_plen__(match->mask.dst);
        bit_assign__(&ti->wild_src, p, !pat->src_plen);
        bit_assign__(&ti->wild_dst, p, !pat->dst_plen);
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
        tries_update__(ti, pat - ti->patterns, &key, 1);
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
        uint32_t p = pat - ti->patterns;
        free(r->more);
        rule_delete__(pat, slot);
        tries_update__(ti, p, &key, -1);
        if (!pat->n_rules) {
            uint32_t tail = --ti->n_patterns;
            table_free__(pat);
            bit_assign__(&ti->wild_src, p, false);
            bit_assign__(&ti->wild_dst, p, false);
            if (p != tail) {
                /* Move the last pattern into the hole, bits and all. */
                *pat = ti->patterns[tail];
                bit_assign__(&ti->wild_src, p, !pat->src_plen);
                bit_assign__(&ti->wild_dst, p, !pat->dst_plen);
                bit_assign__(&ti->wild_src, tail, false);
                bit_assign__(&ti->wild_dst, tail, false);
                trie_rename__(&ti->src_trie, tail, p);
                trie_rename__(&ti->dst_trie, tail, p);
            }
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
    const tpm_key_word *r = (const tpm_key_word *) rule;
    const tpm_key_word *k = (const tpm_key_word *) key;
    const tpm_key_word *m = (const tpm_key_word *) mask;

    BUILD_ASSERT_DECL(TPM_KEY_WORDS == 5);
    return !((r[0] ^ (k[0] & m[0])) | (r[1] ^ (k[1] & m[1]))
             | (r[2] ^ (k[2] & m[2])) | (r[3] ^ (k[3] & m[3]))
             | (r[4] ^ (k[4] & m[4])));
}

/* Returns the hash of 'key' masked with 'mask'. */
static inline uint32_t
masked_hash__(const struct tpm_key *key, const struct tpm_key *mask)
{
    const tpm_key_word *k = (const tpm_key_word *) key;
    const tpm_key_word *m = (const tpm_key_word *) mask;
    uint64_t masked[TPM_KEY_WORDS];

    masked[0] = k[0] & m[0];
    masked[1] = k[1] & m[1];
    masked[2] = k[2] & m[2];
    masked[3] = k[3] & m[3];
    masked[4] = k[4] & m[4];
    return tpm_key_hash((const struct tpm_key *) masked);
}

/* Probes pattern 'pat' for 'key', whose masked hash is 'hash', and
 * appends the ids found to 'ids' (room for 'max', 'n' used or counted).
 * Returns the new count. */
static inline uint32_t
pattern_probe__(const struct trig_pattern *pat, const struct tpm_key *key,
                uint32_t hash, uint32_t *ids, uint32_t n, uint32_t max)
{
    uint32_t tag = TRIG_INDEX_TAG(hash);

    for (uint32_t i = hash & pat->table_mask;;
         i = (i + 1) & pat->table_mask) {
        uint32_t t = pat->tags[i];
        if (t == tag) {
            const struct trig_index_rule *r = &pat->rules[i];
            if (OVS_LIKELY(rule_key_matches__(&r->key, key, &pat->mask))) {
                if (n < max) {
                    ids[n] = r->id;
                }
                n++;
                if (OVS_UNLIKELY(r->n_ids > 1)) {
                    n = rule_more_ids__(r, ids, n, max);
                }
                return n;
            }
        } else if (!t) {
            return n;
        }
    }
}

/* Probes patterns 'begin' to 'end' - 1 of 'ti' (at least one) for 'key';
 * otherwise as pattern_probe__().
 *
 * Software pipelined: pattern p + 1's key is hashed, and its home tags
 * prefetched, before pattern p is probed.  The probe's branches are
 * unpredictable (hit, miss, or one more slot), and this way the next hash
 * is older than them, so a misprediction does not discard it. */
static uint32_t
match_range__(const struct trig_index *ti, const struct tpm_key *key,
              uint32_t begin, uint32_t end, uint32_t *ids, uint32_t n,
              uint32_t max)
{
    const struct trig_pattern *pat = &ti->patterns[begin];
    uint32_t next = masked_hash__(key, &pat->mask);

    for (uint32_t p = begin; p < end; p++, pat++) {
        uint32_t hash = next;
        if (p + 1 < end) {
            next = masked_hash__(key, &pat[1].mask);
            tpm_prefetch(&pat[1].tags[next & pat[1].table_mask]);
        }
        n = pattern_probe__(pat, key, hash, ids, n, max);
    }
    return n;
}

/* Probes the patterns of 'ti' in bitmap 'patterns' (not empty) for 'key',
 * pipelined as match_range__(); otherwise as pattern_probe__(). */
static uint32_t
match_bitmap__(const struct trig_index *ti, const struct tpm_key *key,
               uint64_t patterns, uint32_t *ids, uint32_t n, uint32_t max)
{
    const struct trig_pattern *pat
        = &ti->patterns[__builtin_ctzll(patterns)];
    uint32_t next = masked_hash__(key, &pat->mask);

    for (patterns &= patterns - 1;; patterns &= patterns - 1) {
        uint32_t hash = next;
        const struct trig_pattern *cur = pat;
        if (patterns) {
            pat = &ti->patterns[__builtin_ctzll(patterns)];
            next = masked_hash__(key, &pat->mask);
            tpm_prefetch(&pat->tags[next & pat->table_mask]);
        }
        n = pattern_probe__(cur, key, hash, ids, n, max);
        if (!patterns) {
            return n;
        }
    }
}

uint32_t
trig_index_match(const struct trig_index *ti, const struct tpm_key *key,
                 uint32_t *ids, uint32_t max)
{
    uint32_t n = 0;

    if (!ti->n_patterns) {
        return 0;
    }
    if (ti->linear) {
        return match_range__(ti, key, 0, ti->n_patterns, ids, 0, max);
    }

    uint64_t patterns = candidates__(ti, key, false);
    if (patterns) {
        n = match_bitmap__(ti, key, patterns, ids, n, max);
    }
    if (OVS_UNLIKELY(ti->n_patterns > TRIG_INDEX_TRIE_PATTERNS)) {
        n = match_range__(ti, key, TRIG_INDEX_TRIE_PATTERNS, ti->n_patterns,
                          ids, n, max);
    }
    return n;
}

bool
trig_index_may_match(const struct trig_index *ti, const struct tpm_key *key)
{
    return (ti->n_patterns > TRIG_INDEX_TRIE_PATTERNS
            || (ti->n_patterns && candidates__(ti, key, true)));
}

void
trig_index_set_linear(struct trig_index *ti, bool linear)
{
    ti->linear = linear;
}
