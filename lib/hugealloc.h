/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Huge-page memory regions.
 *
 * The flow table, the trigger repository and the flow-list chunk pool live
 * in 2 MB huge pages to keep TLB misses off the packet path and the sweep
 * (paper section 5.4).  tpm_huge_alloc() asks for MAP_HUGETLB memory and,
 * when the system has no free huge pages, falls back to normal pages with
 * a warning (once per region) and advice MADV_HUGEPAGE, so transparent
 * huge pages can still back it.  Memory is zeroed and pre-faulted
 * (MAP_POPULATE) so that the packet path never takes a page fault.  The
 * smaller arrays that the packet path or the sweep write come from
 * tpm_calloc_resident(), faulted in at once for the same reason: a page
 * of fresh anonymous memory is mapped only when first touched, which in
 * a virtual machine costs microseconds (65536 new trigger instances'
 * history first written by one sweep once took 22 ms: lost sweeps).
 *
 * Thread-safety: thread-safe.
 */
#ifndef TPM_HUGEALLOC_H
#define TPM_HUGEALLOC_H 1

#include <stdbool.h>
#include <stddef.h>

#define TPM_HUGE_PAGE_SIZE (2u << 20)

struct tpm_huge_region {
    void *base;
    size_t size;                /* Rounded up to the page size used. */
    bool huge;                  /* Backed by MAP_HUGETLB pages. */
};

/* Maps at least 'size' zeroed bytes into 'region'.  'what' names the
 * region in the fallback warning.  Returns 0 or a positive errno. */
int tpm_huge_alloc(struct tpm_huge_region *region, size_t size,
                   const char *what);

/* While 'quiet' is true, the calling thread's fallbacks are logged at
 * debug level instead of as warnings (for short-lived monitors such as the
 * DoS model's calibration, which would otherwise warn on every run).
 * Returns the previous setting. */
bool tpm_huge_set_quiet(bool quiet);

/* Unmaps 'region' (NULL or never allocated: no-op). */
void tpm_huge_free(struct tpm_huge_region *region);

/* Faults in the pages of the 'size' bytes at 'p', for writing, leaving
 * their contents as they are. */
void tpm_prefault(void *p, size_t size);

/* xcalloc() whose pages are faulted in (tpm_prefault()); freed with
 * free(). */
void *tpm_calloc_resident(size_t n, size_t size);

#endif /* hugealloc.h */
