/* SPDX-License-Identifier: Apache-2.0 */
#include "spsc.h"

#include <stdlib.h>

struct spsc_ring *
spsc_create(uint32_t capacity, uint32_t elem_size)
{
    uint32_t cap = 2;
    while (cap < capacity) {
        cap <<= 1;
    }

    struct spsc_ring *r = aligned_alloc(CACHE_LINE_SIZE,
                                        ROUND_UP(sizeof *r, CACHE_LINE_SIZE));
    if (!r) {
        abort();
    }
    r->slots = xcalloc(cap, elem_size);
    r->mask = cap - 1;
    r->elem_size = elem_size;
    atomic_init(&r->head, 0);
    atomic_init(&r->tail, 0);
    r->tail_cache = 0;
    r->head_cache = 0;
    return r;
}

void
spsc_destroy(struct spsc_ring *r)
{
    if (r) {
        free(r->slots);
        free(r);
    }
}

uint32_t
spsc_count(const struct spsc_ring *r)
{
    return atomic_load_explicit(&((struct spsc_ring *) r)->head,
                                memory_order_acquire)
           - atomic_load_explicit(&((struct spsc_ring *) r)->tail,
                                  memory_order_acquire);
}

uint32_t
spsc_capacity(const struct spsc_ring *r)
{
    return r->mask + 1;
}
