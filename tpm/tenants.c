/* SPDX-License-Identifier: Apache-2.0 */
/* Tenant slots (tenants.h). */
#include "tenants.h"

#include <stdlib.h>

#include "hugealloc.h"
#include "util.h"

static uint32_t
tpm_tenants_hash__(uint32_t vni)
{
    /* Murmur3's finalizer: VNIs are often consecutive. */
    vni ^= vni >> 16;
    vni *= 0x85ebca6bu;
    vni ^= vni >> 13;
    vni *= 0xc2b2ae35u;
    return vni ^ (vni >> 16);
}

struct tpm_tenants *
tpm_tenants_create(uint32_t cap)
{
    struct tpm_tenants *ts = xzalloc(sizeof *ts);
    uint32_t size = 2;

    cap = MAX(1, MIN(cap, TPM_TENANT_SLOTS_MAX));
    while (size < 2 * cap) {
        size *= 2;
    }
    ts->vni = tpm_calloc_resident(cap + 1, sizeof *ts->vni);
    ts->index = tpm_calloc_resident(size, sizeof *ts->index);
    ts->mask = size - 1;
    ts->cap = cap;
    return ts;
}

void
tpm_tenants_destroy(struct tpm_tenants *ts)
{
    if (ts) {
        free(ts->vni);
        free(ts->index);
        free(ts);
    }
}

/* Searches for 'vni' from its home position.  Returns its slot, or 0 with
 * '*pos' the first empty position (the index is at most half full: an
 * empty entry ends every probe). */
static uint16_t
tpm_tenants_probe__(const struct tpm_tenants *ts, uint32_t vni,
                    uint32_t *pos)
{
    uint32_t i = tpm_tenants_hash__(vni) & ts->mask;

    for (;;) {
        uint16_t s = __atomic_load_n(&ts->index[i], __ATOMIC_ACQUIRE);
        if (!s) {
            *pos = i;
            return 0;
        }
        if (tpm_tenants_vni(ts, s) == vni) {
            return s;
        }
        i = (i + 1) & ts->mask;
    }
}

uint16_t
tpm_tenants_intern(struct tpm_tenants *ts, uint32_t vni)
{
    uint32_t pos;
    uint16_t s = tpm_tenants_probe__(ts, vni, &pos);

    while (!s) {
        uint32_t n = __atomic_add_fetch(&ts->n, 1, __ATOMIC_RELAXED);
        if (n > ts->cap) {
            return 0;
        }
        __atomic_store_n(&ts->vni[n], vni, __ATOMIC_RELEASE);
        uint16_t expected = 0;
        for (;;) {
            if (__atomic_compare_exchange_n(&ts->index[pos], &expected,
                                            (uint16_t) n, false,
                                            __ATOMIC_RELEASE,
                                            __ATOMIC_ACQUIRE)) {
                return n;
            }
            /* Another thread published a slot here first. */
            if (tpm_tenants_vni(ts, expected) == vni) {
                __atomic_add_fetch(&ts->wasted, 1, __ATOMIC_RELAXED);
                return expected;
            }
            /* Another VNI: probe on, keeping slot 'n' for 'vni'. */
            s = tpm_tenants_probe__(ts, vni, &pos);
            if (s) {
                __atomic_add_fetch(&ts->wasted, 1, __ATOMIC_RELAXED);
                return s;
            }
            expected = 0;
        }
    }
    return s;
}

uint16_t
tpm_tenants_find(const struct tpm_tenants *ts, uint32_t vni)
{
    uint32_t pos;
    return tpm_tenants_probe__(ts, vni, &pos);
}

uint32_t
tpm_tenants_count(const struct tpm_tenants *ts)
{
    uint32_t n = __atomic_load_n(&ts->n, __ATOMIC_RELAXED);
    uint32_t w = __atomic_load_n(&ts->wasted, __ATOMIC_RELAXED);
    return MIN(n, ts->cap) - MIN(w, MIN(n, ts->cap));
}
