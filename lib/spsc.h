/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Lock-free single-producer/single-consumer ring of fixed-size elements.
 *
 * One thread (the producer) calls spsc_push(); one other thread (the
 * consumer) calls spsc_pop().  The producer's and the consumer's indices
 * sit on separate cache lines, each side keeps a private copy of the other
 * side's index and re-reads the shared one only when its copy says the
 * ring is full (or empty), so an uncontended push or pop touches one
 * shared cache line.  Capacity is a power of two.
 *
 * This is how the control plane talks to a TPM without locks: commands in,
 * reports out (docs/architecture.md, "Threads and ownership").
 *
 * Thread-safety: exactly one producer thread and one consumer thread; a
 * ring may be created and destroyed only while neither is using it.
 */
#ifndef TPM_SPSC_H
#define TPM_SPSC_H 1

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

struct spsc_ring {
    /* Read-only after creation. */
    uint8_t *slots;
    uint32_t mask;
    uint32_t elem_size;

    /* Producer's line. */
    _Alignas(CACHE_LINE_SIZE) _Atomic uint32_t head;
    uint32_t tail_cache;

    /* Consumer's line. */
    _Alignas(CACHE_LINE_SIZE) _Atomic uint32_t tail;
    uint32_t head_cache;
};

/* Creates a ring of 'capacity' (rounded up to a power of two, at least 2)
 * elements of 'elem_size' bytes. */
struct spsc_ring *spsc_create(uint32_t capacity, uint32_t elem_size);
void spsc_destroy(struct spsc_ring *);

/* Producer: returns the next free slot ('elem_size' bytes), which the
 * consumer sees once spsc_publish() is called, or NULL if the ring is
 * full.  Lets the producer build an element in place, without a copy. */
static inline void *
spsc_reserve(struct spsc_ring *r)
{
    uint32_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (head - r->tail_cache > r->mask) {
        r->tail_cache = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (head - r->tail_cache > r->mask) {
            return NULL;
        }
    }
    return r->slots + (size_t) (head & r->mask) * r->elem_size;
}

/* Producer: hands the slot of the last spsc_reserve() to the consumer. */
static inline void
spsc_publish(struct spsc_ring *r)
{
    uint32_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    atomic_store_explicit(&r->head, head + 1, memory_order_release);
}

/* Producer: copies 'elem' into the ring.  Returns false if full. */
static inline bool
spsc_push(struct spsc_ring *r, const void *elem)
{
    void *slot = spsc_reserve(r);
    if (!slot) {
        return false;
    }
    __builtin_memcpy(slot, elem, r->elem_size);
    spsc_publish(r);
    return true;
}

/* Consumer: true if the ring holds no element (the producer may push
 * one meanwhile).  Reads the shared index only when the consumer's copy
 * says empty: a cheap test before a consumer's heavier call. */
static inline bool
spsc_empty(struct spsc_ring *r)
{
    uint32_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    if (tail == r->head_cache) {
        r->head_cache = atomic_load_explicit(&r->head, memory_order_acquire);
    }
    return tail == r->head_cache;
}

/* Consumer: copies the oldest element into 'elem'.  Returns false if
 * empty. */
static inline bool
spsc_pop(struct spsc_ring *r, void *elem)
{
    if (spsc_empty(r)) {
        return false;
    }
    uint32_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    __builtin_memcpy(elem,
                     r->slots + (size_t) (tail & r->mask) * r->elem_size,
                     r->elem_size);
    atomic_store_explicit(&r->tail, tail + 1, memory_order_release);
    return true;
}

/* Producer: returns the number of elements that can be pushed now (at
 * least; the consumer may free more meanwhile). */
static inline uint32_t
spsc_free_space(struct spsc_ring *r)
{
    uint32_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    r->tail_cache = atomic_load_explicit(&r->tail, memory_order_acquire);
    return r->mask + 1 - (head - r->tail_cache);
}

/* Number of elements in the ring (exact only when called by one side
 * while the other is idle; otherwise a snapshot). */
uint32_t spsc_count(const struct spsc_ring *);
uint32_t spsc_capacity(const struct spsc_ring *);

#endif /* spsc.h */
