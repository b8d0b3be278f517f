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
 * (MAP_POPULATE) so that the packet path never takes a page fault.
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

#endif /* hugealloc.h */
