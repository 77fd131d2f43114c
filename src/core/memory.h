// Memory helpers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace anneal {

// Asks the kernel to back the 2 MiB-aligned part of [p, p + bytes) with transparent huge pages
// (madvise MADV_HUGEPAGE) before it is first touched. On a VM a page fault is expensive and faults of
// threads in one process contend; one fault per 2 MiB instead of per 4 KiB lets large output buffers
// fill in parallel. Best effort: silently does nothing where THP is off or the range is too small.
void AdviseHugePages(void* p, size_t bytes);

// A size in bytes: a number with an optional unit — B, KB, MB, GB, TB (powers of 1000, as device
// makers and transformers' max_shard_size count) or KiB, MiB, GiB, TiB (powers of 1024). An error
// (exit 2) names `what` and shows the form.
Result<uint64_t> ParseByteSize(const std::string& text, const std::string& what);

}  // namespace anneal
