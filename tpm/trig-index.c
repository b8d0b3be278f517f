#include "trig-index.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define TRIG_INDEX_MIN_TABLE 8

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
            free(pat->rules[i].ids);
        }
        free(pat->rules);
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

static struct trig_index_rule *
rule_find__(const struct trig_pattern *pat, const struct tpm_key *key,
            uint32_t hash)
{
    for (uint32_t i = hash;; i++) {
        struct trig_index_rule *r = &pat->rules[i & pat->table_mask];
        if (!r->n_ids) {
            return NULL;
        }
        if (r->hash == hash && tpm_key_equal(&r->key, key)) {
            return r;
        }
    }
}

/* Places 'rule' (by value, taking its 'ids') into 'pat''s table, which has
 * room. */
static struct trig_index_rule *
rule_place__(struct trig_pattern *pat, const struct trig_index_rule *rule)
{
    for (uint32_t i = rule->hash;; i++) {
        struct trig_index_rule *r = &pat->rules[i & pat->table_mask];
        if (!r->n_ids) {
            *r = *rule;
            return r;
        }
    }
}

static void
pattern_resize__(struct trig_pattern *pat, uint32_t size)
{
    struct trig_index_rule *old = pat->rules;
    uint32_t old_size = old ? pat->table_mask + 1 : 0;

    pat->rules = xcalloc(size, sizeof *pat->rules);
    pat->table_mask = size - 1;
    for (uint32_t i = 0; i < old_size; i++) {
        if (old[i].n_ids) {
            rule_place__(pat, &old[i]);
        }
    }
    free(old);
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
    struct trig_index_rule *r = rule_find__(pat, &key, hash);
    if (!r) {
        if (2 * (pat->n_rules + 1) > pat->table_mask + 1) {
            pattern_resize__(pat, 2 * (pat->table_mask + 1));
        }
        struct trig_index_rule nr = {
            .key = key, .hash = hash, .n_ids = 0, .cap_ids = 4,
            .ids = xmalloc(4 * sizeof(uint32_t)),
        };
        /* n_ids becomes non-zero below, before anyone probes again. */
        r = rule_place__(pat, &nr);
        pat->n_rules++;
    }
    if (r->n_ids == r->cap_ids) {
        r->cap_ids *= 2;
        r->ids = xrealloc(r->ids, r->cap_ids * sizeof *r->ids);
    }
    r->ids[r->n_ids++] = id;
    pat->n_ids++;
    ti->n_ids++;
}

/* Deletes the rule in slot 'hole' of 'pat' by backward shifting the rest
 * of its cluster. */
static void
rule_delete__(struct trig_pattern *pat, uint32_t hole)
{
    free(pat->rules[hole].ids);
    memset(&pat->rules[hole], 0, sizeof pat->rules[hole]);
    for (uint32_t i = (hole + 1) & pat->table_mask;;
         i = (i + 1) & pat->table_mask) {
        struct trig_index_rule *r = &pat->rules[i];
        if (!r->n_ids) {
            break;
        }
        uint32_t home = r->hash & pat->table_mask;
        /* Move 'r' into the hole if its home is not in (hole, i]. */
        if (((i - home) & pat->table_mask) >= ((i - hole) & pat->table_mask)) {
            pat->rules[hole] = *r;
            memset(r, 0, sizeof *r);
            hole = i;
        }
    }
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
    struct trig_index_rule *r = rule_find__(pat, &key, tpm_key_hash(&key));
    if (!r) {
        return ENOENT;
    }
    for (uint32_t i = 0; i < r->n_ids; i++) {
        if (r->ids[i] == id) {
            r->ids[i] = r->ids[--r->n_ids];
            pat->n_ids--;
            ti->n_ids--;
            if (!r->n_ids) {
                rule_delete__(pat, (uint32_t) (r - pat->rules));
                if (!pat->n_rules) {
                    free(pat->rules);
                    *pat = ti->patterns[--ti->n_patterns];
                }
            }
            return 0;
        }
    }
    return ENOENT;
}

uint32_t
trig_index_match(const struct trig_index *ti, const struct tpm_key *key,
                 uint32_t *ids, uint32_t max)
{
    uint32_t n = 0;

    for (uint32_t p = 0; p < ti->n_patterns; p++) {
        const struct trig_pattern *pat = &ti->patterns[p];
        struct tpm_key masked;

        tpm_key_and(&masked, key, &pat->mask);
        const struct trig_index_rule *r
            = rule_find__(pat, &masked, tpm_key_hash(&masked));
        if (r) {
            for (uint32_t i = 0; i < r->n_ids; i++, n++) {
                if (n < max) {
                    ids[n] = r->ids[i];
                }
            }
        }
    }
    return n;
}
