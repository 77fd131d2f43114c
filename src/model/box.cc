#include "model/box.h"

#include <algorithm>
#include <cstring>

namespace anneal {

BoxPart MakeBoxPart(const std::vector<int64_t>& offset, const std::vector<int64_t>& length, int64_t start,
                    int64_t count) {
  BoxPart b;
  if (length.size() == 1) {
    b = {0, 1, offset[0], length[0]};
  } else if (length.size() == 2) {
    b = {offset[0], length[0], offset[1], length[1]};
  }
  b.start = start;
  b.count = count;
  return b;
}

size_t CopyOverlap(const BoxPart& s, const float* src, const BoxPart& d, float* dst, bool count_only) {
  const int64_t s_end = s.start + s.elements(), d_end = d.start + d.elements();
  // Rows of each box that its flat range touches.
  auto row_lo = [](const BoxPart& b) { return b.nc ? b.r0 + b.start / b.nc : b.r0; };
  auto row_hi = [](const BoxPart& b, int64_t end) { return b.nc ? b.r0 + (end + b.nc - 1) / b.nc : b.r0; };
  const int64_t r_lo = std::max(row_lo(s), row_lo(d)), r_hi = std::min(row_hi(s, s_end), row_hi(d, d_end));
  const int64_t c_lo = std::max(s.c0, d.c0), c_hi = std::min(s.c0 + s.nc, d.c0 + d.nc);
  size_t copied = 0;
  if (c_lo >= c_hi) return 0;
  for (int64_t i = r_lo; i < r_hi; ++i) {
    // Flat index of column j in a box b: (i - b.r0) * b.nc + (j - b.c0); keep it inside [start, end).
    const int64_t s_row = (i - s.r0) * s.nc - s.c0, d_row = (i - d.r0) * d.nc - d.c0;
    int64_t j0 = std::max({c_lo, s.start - s_row, d.start - d_row});
    int64_t j1 = std::min({c_hi, s_end - s_row, d_end - d_row});
    if (j0 >= j1) continue;
    if (!count_only) std::memcpy(dst + (d_row + j0 - d.start), src + (s_row + j0 - s.start), (j1 - j0) * sizeof(float));
    copied += j1 - j0;
  }
  return copied;
}

}  // namespace anneal
