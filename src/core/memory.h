// Memory helpers.
#pragma once

#include <cstddef>

namespace anneal {

// Asks the kernel to back the 2 MiB-aligned part of [p, p + bytes) with transparent huge pages
// (madvise MADV_HUGEPAGE) before it is first touched. On a VM a page fault is expensive and faults of
// threads in one process contend; one fault per 2 MiB instead of per 4 KiB lets large output buffers
// fill in parallel. Best effort: silently does nothing where THP is off or the range is too small.
void AdviseHugePages(void* p, size_t bytes);

}  // namespace anneal
