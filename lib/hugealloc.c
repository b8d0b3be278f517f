/* SPDX-License-Identifier: Apache-2.0 */
#include "hugealloc.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "util.h"

static __thread bool quiet__;

bool
tpm_huge_set_quiet(bool quiet)
{
    bool old = quiet__;
    quiet__ = quiet;
    return old;
}

int
tpm_huge_alloc(struct tpm_huge_region *region, size_t size, const char *what)
{
    size_t hsize = ROUND_UP(size ? size : 1, TPM_HUGE_PAGE_SIZE);
    void *p;

    memset(region, 0, sizeof *region);
    p = mmap(NULL, hsize, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE,
             -1, 0);
    if (p != MAP_FAILED) {
        region->base = p;
        region->size = hsize;
        region->huge = true;
        return 0;
    }

    /* No huge pages reserved: map normal pages aligned to 2 MB, ask for
     * transparent huge pages before touching them (THP in "madvise" mode
     * only backs regions advised before the first fault), then fault
     * them in. */
    int hugeerr = errno;
    size_t psize = ROUND_UP(size ? size : 1, TPM_HUGE_PAGE_SIZE);
    p = mmap(NULL, psize + TPM_HUGE_PAGE_SIZE, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        int err = errno;
        tpm_log(TPM_LOG_ERR, "%s: cannot map %zu bytes: %s", what, psize,
                strerror(err));
        return err;
    }
    uintptr_t base = ROUND_UP((uintptr_t) p, TPM_HUGE_PAGE_SIZE);
    size_t head = base - (uintptr_t) p;
    if (head) {
        munmap(p, head);
    }
    munmap((char *) base + psize, TPM_HUGE_PAGE_SIZE - head);
    p = (void *) base;

    bool thp = !madvise(p, psize, MADV_HUGEPAGE);
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
    if (madvise(p, psize, MADV_POPULATE_WRITE)) {
        tpm_prefault(p, psize);     /* Kernels before 5.14. */
    }
    tpm_log(quiet__ ? TPM_LOG_DBG : TPM_LOG_WARN, "%s: no 2 MB huge pages "
            "reserved for %zu bytes (%s); using %s (see "
            "docs/operations.md, 'Huge pages')",
            what, hsize, strerror(hugeerr),
            thp ? "transparent huge pages where the kernel grants them"
                : "normal pages, expect more TLB misses");
    region->base = p;
    region->size = psize;
    region->huge = false;
    return 0;
}

/* One write per 4 KB, the smallest page size: a larger page is faulted
 * in by the first write into it.  Each byte written is the one read, so
 * the memory of others that shares the first and last pages is left as it
 * was. */
void
tpm_prefault(void *p, size_t size)
{
    volatile char *b = p;
    for (size_t off = 0; off < size; off += 4096) {
        b[off] = b[off];
    }
    if (size) {
        b[size - 1] = b[size - 1];
    }
}

void *
tpm_calloc_resident(size_t n, size_t size)
{
    void *p = xcalloc(n, size);
    tpm_prefault(p, n * size);
    return p;
}

void
tpm_huge_free(struct tpm_huge_region *region)
{
    if (region && region->base) {
        munmap(region->base, region->size);
        region->base = NULL;
        region->size = 0;
    }
}
