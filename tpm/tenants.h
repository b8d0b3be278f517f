/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tenant slots: the tunnel ids (VXLAN or Geneve VNIs) the monitors of a
 * host have seen, each named by a 16-bit slot that flow keys carry.
 *
 * A tenant's flow is its inner 5-tuple and its VNI; the key has room for
 * 16 bits beside the 5-tuple (lib/packet.h: 'tun'), the flow table's
 * first cache line none for more.  So the VNIs met are interned into
 * slots 1, 2, ... (0: not tunnelled) in the order they are met, and kept
 * for the table's life: a slot is never reused, so a key's slot names
 * one VNI for as long as any flow, trigger instance or report holds it,
 * and anyone reads the VNI back from the slot with no lock.
 *
 * One table may serve every monitor of a process (the PMD threads of a
 * switch), so that a group key means the same tenant in each of them and
 * in the main thread that combines their reports; a monitor created
 * alone has its own (tpm_set_tenants()).  Interning is lock-free: a new
 * VNI takes the next slot number with an atomic increment, writes its
 * VNI, and publishes the slot in the index with a compare-and-swap; a
 * thread that loses the race to insert the same VNI at the same place
 * uses the winner's slot (the slot it took is lost: counted in 'wasted').
 * The table has a fixed number of slots (tpm_params.tenant_slots); a
 * frame of a VNI met when every slot is taken is not counted
 * (tpm_stats.tun_slots_full): its tenant could not be told apart.
 *
 * The index is an open-addressing table of twice the slots (linear
 * probing, slot numbers as values, 0 empty).  Monitors keep a one-entry
 * cache in front of it (the last VNI), so a run of one tenant's frames
 * costs one compare.
 *
 * Thread-safety: every function is thread-safe.
 */
#ifndef TPM_TENANTS_H
#define TPM_TENANTS_H 1

#include <stdbool.h>
#include <stdint.h>

#define TPM_TENANT_SLOTS_MAX 65534    /* 0xffff is TPM_TUN_UNDERLAY. */

struct tpm_tenants {
    uint32_t *vni;              /* By slot, 1..cap; [0] unused. */
    uint16_t *index;            /* mask + 1 entries: slots, 0 = empty. */
    uint32_t mask;
    uint32_t cap;               /* Most slots. */
    uint32_t n;                 /* Slot numbers taken (atomic; may exceed
                                 * 'cap' when full). */
    uint32_t wasted;            /* Slots lost to a race (atomic). */
};

/* Returns a table of at most 'cap' slots (1 to TPM_TENANT_SLOTS_MAX). */
struct tpm_tenants *tpm_tenants_create(uint32_t cap);
void tpm_tenants_destroy(struct tpm_tenants *);

/* Returns the slot of 'vni', taking the next free slot for a VNI not seen
 * before; 0 if every slot is taken. */
uint16_t tpm_tenants_intern(struct tpm_tenants *, uint32_t vni);

/* Returns the slot of 'vni', 0 if it has none. */
uint16_t tpm_tenants_find(const struct tpm_tenants *, uint32_t vni);

/* Returns the VNI of slot 'slot' (a slot that intern() or find()
 * returned, or read from a key). */
static inline uint32_t
tpm_tenants_vni(const struct tpm_tenants *ts, uint16_t slot)
{
    return __atomic_load_n(&ts->vni[slot], __ATOMIC_ACQUIRE);
}

/* Returns the number of slots in use. */
uint32_t tpm_tenants_count(const struct tpm_tenants *);

#endif /* tenants.h */
