#include "hugealloc.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "util.h"

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

    int hugeerr = errno;
    size_t psize = ROUND_UP(size ? size : 1, 4096);
    p = mmap(NULL, psize, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) {
        int err = errno;
        tpm_log(TPM_LOG_ERR, "%s: cannot map %zu bytes: %s", what, psize,
                strerror(err));
        return err;
    }
    madvise(p, psize, MADV_HUGEPAGE);
    tpm_log(TPM_LOG_WARN, "%s: no 2 MB huge pages for %zu bytes (%s); "
            "using normal pages, expect more TLB misses "
            "(see docs/operations.md, 'Huge pages')",
            what, hsize, strerror(hugeerr));
    region->base = p;
    region->size = psize;
    region->huge = false;
    return 0;
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
