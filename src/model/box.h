// Parts of canonical tensors: which elements a rank holds, a checkpoint file stores, or a ZeRO shard
// owns. Every tensor here is 1-D or 2-D; a 1-D tensor is one row. A part is a box (rows r0.., columns
// c0..) of the canonical tensor and, optionally, a flat range of the box's own row-major elements
// (ZeRO shards cut a rank's flat buffer anywhere, so their piece of a box is such a range).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace anneal {

struct BoxPart {
  int64_t r0 = 0, nr = 0, c0 = 0, nc = 0;
  int64_t start = 0, count = -1;  // flat range of the box held; count -1: the whole box
  int64_t elements() const { return count < 0 ? nr * nc : count; }
};

// From a box in canonical coordinates (offset, length per dimension; 1 or 2 dimensions).
BoxPart MakeBoxPart(const std::vector<int64_t>& offset, const std::vector<int64_t>& length, int64_t start = 0,
                    int64_t count = -1);

// Copies every element present in both parts from src (the part's elements in order, the first being
// flat element s.start of its box) to dst (likewise for d). Returns how many were copied (with
// count_only, how many would be; src and dst may then be null).
size_t CopyOverlap(const BoxPart& s, const float* src, const BoxPart& d, float* dst, bool count_only = false);

}  // namespace anneal
