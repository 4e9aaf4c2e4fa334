/* Backend buffers: zeroed, 64-byte aligned; a buffer of at least 2 MiB is
 * 2 MiB-aligned and advised MADV_HUGEPAGE, so where transparent huge pages
 * run in madvise mode (the usual default) the weights arena a decode step
 * streams sits on 2 MiB pages: one TLB entry per 2 MiB instead of per 4 KiB.
 * The advice is a hint: a kernel without THP keeps 4 KiB pages. */
#define _GNU_SOURCE
#include "ni_cpu.h"
#include <stdlib.h>
#include <sys/mman.h>

#define NI_HUGE (2 << 20)

void *ni_alloc(int64_t n) {
    void *p = NULL;
    if (n <= 0) return NULL;
    const char *e = getenv("NINFER_CPU_HUGEPAGES"); /* 0: 4 KiB pages (comparison switch) */
    int huge = n >= NI_HUGE && !(e && strcmp(e, "0") == 0);
    if (posix_memalign(&p, huge ? NI_HUGE : 64, (size_t)n) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    if (huge) madvise(p, ((size_t)n + 4095) & ~(size_t)4095, MADV_HUGEPAGE);
#endif
    memset(p, 0, (size_t)n); /* first touch after the advice: the faults take huge pages */
    return p;
}
