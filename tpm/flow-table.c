/* SPDX-License-Identifier: Apache-2.0 */
#include "flow-table.h"

#include <errno.h>
#include <string.h>

const uint32_t tpm_flow_key_unused[256] = { [0] = 0x10000, [4] = 0xfff0 };

int
tpm_flow_table_init(struct tpm_flow_table *ft, uint32_t n_slots,
                    uint32_t probe_limit)
{
    memset(ft, 0, sizeof *ft);
    if (!is_pow2(n_slots) || !probe_limit || probe_limit > n_slots) {
        return EINVAL;
    }
    int error = tpm_huge_alloc(&ft->region,
                               (size_t) n_slots * sizeof(struct tpm_flow),
                               "flow table");
    if (error) {
        return error;
    }
    ft->flows = ft->region.base;
    ft->mask = n_slots - 1;
    ft->probe_limit = probe_limit;
    size_t words = ((size_t) n_slots + 63) / 64;
    ft->touched[0] = tpm_calloc_resident(2 * words,
                                         sizeof *ft->touched[0]);
    ft->touched[1] = ft->touched[0] + words;
    return 0;
}

void
tpm_flow_table_destroy(struct tpm_flow_table *ft)
{
    if (ft) {
        tpm_huge_free(&ft->region);
        ft->flows = NULL;
        free(ft->touched[0]);
        ft->touched[0] = ft->touched[1] = NULL;
    }
}

/* Clears the touched bitmap of the parity of 'tag', whose epoch begins. */
void
tpm_flow_table_untouch(struct tpm_flow_table *ft, uint32_t tag)
{
    memset(ft->touched[tag & 1], 0,
           ((size_t) ft->mask + 64) / 64 * sizeof *ft->touched[0]);
}

struct tpm_flow *
tpm_flow_table_insert(struct tpm_flow_table *ft, const struct tpm_key *key,
                      uint32_t hash, uint32_t tag, bool *replaced,
                      struct tpm_key *old_key)
{
    struct tpm_flow *reuse = NULL, *free_slot = NULL, *oldest = NULL;
    struct tpm_flow *spare = NULL;
    uint32_t oldest_age = 0;

    for (uint32_t i = 0; i < ft->probe_limit; i++) {
        struct tpm_flow *f = &ft->flows[(hash + i) & ft->mask];
        if (f->state == TPM_FLOW_FREE) {
            free_slot = f;
            break;
        }
        bool stale = !f->has_conn && !tpm_flow_is_recent(f, tag);
        if (stale && f->state == TPM_FLOW_LIVE && f->n_matched) {
            /* Quiet, but still in its trigger instances: taken only if
             * the window has no other room (the first such), see the
             * top of flow-table.h. */
            if (!spare) {
                spare = f;
            }
            continue;
        }
        if (f->state == TPM_FLOW_DEAD || stale
            || (!f->has_conn && ft->dos_mode
                && f->state == TPM_FLOW_PENDING)) {
            reuse = f;
            break;
        }
        uint32_t age = tag - tpm_flow_last_tag(f);
        if (!oldest || age > oldest_age) {
            oldest = f;
            oldest_age = age;
        }
    }
    if (!reuse && !free_slot) {
        reuse = spare;
    }

    struct tpm_flow *f;
    *replaced = false;
    if (reuse) {
        f = reuse;
        ft->stats.reuses++;
        if (f->state == TPM_FLOW_PENDING && tpm_flow_is_recent(f, tag)) {
            ft->stats.pending_reused++;
        }
        if (f->state != TPM_FLOW_DEAD) {
            *replaced = true;
            ft->n_live--;
        }
    } else if (free_slot) {
        f = free_slot;
        ft->n_used++;
    } else {
        /* Every entry of the window is recent: evict the least recently
         * updated one.  Its statistics of the current epoch (and maybe of
         * the previous one, if not yet swept) are lost, and counted. */
        f = oldest;
        *replaced = true;
        ft->n_live--;
        ft->stats.evictions++;
    }
    if (*replaced && old_key) {
        tpm_flow_key(f, old_key);
    }

    uint32_t gen = f->gen + 1;
    ft->has_v6 |= key->ipver != 4;
    memset(f, 0, CACHE_LINE_SIZE);
    f->key = *key;
    f->hash = hash;
    f->gen = gen;
    f->state = TPM_FLOW_PENDING;
    ft->n_live++;
    ft->stats.inserts++;
    return f;
}

struct tpm_flow *
tpm_flow_table_probe(const struct tpm_flow_table *ft,
                     const struct tpm_key *key, uint32_t hash)
{
    for (uint32_t i = 0; i < ft->probe_limit; i++) {
        struct tpm_flow *f = &ft->flows[(hash + i) & ft->mask];
        if (f->state == TPM_FLOW_FREE) {
            return NULL;
        }
        if (tpm_flow_holds(f, key, hash)) {
            return f;
        }
    }
    return NULL;
}

uint32_t
tpm_flow_table_scrub(struct tpm_flow_table *ft, uint32_t n, uint32_t tag,
                     uint32_t idle, void (*cb)(struct tpm_flow *, void *),
                     void *aux)
{
    n = MIN(n, ft->mask + 1);
    for (uint32_t i = 0; i < n; i++) {
        struct tpm_flow *f = &ft->flows[ft->scrub_pos];
        ft->scrub_pos = (ft->scrub_pos + 1) & ft->mask;
        if (f->state != TPM_FLOW_LIVE && f->state != TPM_FLOW_PENDING) {
            continue;
        }
        uint32_t age = tag - tpm_flow_last_tag(f);
        bool below = ft->dos_mode && f->state == TPM_FLOW_PENDING
                     && !f->has_conn && age;
        if (age > idle || below) {
            if (below && age <= idle) {
                ft->stats.pending_freed++;
            }
            f->state = TPM_FLOW_DEAD;
            if (f->key.ipver == 4) {
                /* The key alone stays, as tpm_flow_key() reads it. */
                memset(&f->v4.count0, 0, sizeof f->v4.count0);
                memset(&f->v4.count1, 0, sizeof f->v4.count1);
            }
            f->key.ipver = 0;   /* No lookup's key (tpm_flow_holds()). */
            f->gen++;
            f->sum_mask = 0;
            ft->n_live--;
            ft->stats.freed++;
        } else if (cb && f->state == TPM_FLOW_LIVE) {
            cb(f, aux);
        }
    }
    return n;
}
