// Launch geometry of the CUDA kernels, as plain host code (tests/kernels/cuda_launch_test.cc checks
// on odd sizes that every output is visited exactly once): a kernel body calls the plan's Visit with
// its block and thread index, the host test calls the same Visit for every index of the grid.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cuda/math.cuh"

namespace anneal::cudalaunch {

// An elementwise pass over n elements: a grid-stride loop over whole vectors of `vec` elements
// (16 bytes: 4 f32 or 8 bf16, when every operand is 16-byte aligned; otherwise vec = 1), and the
// last n % vec elements visited once, by global thread 0, as one partial piece.
struct Elementwise {
  size_t n = 0;
  uint32_t vec = 1;
  uint32_t blocks = 1, threads = 256;

  // f(first element, count): count == vec for a whole vector, less for the tail.
  template <class F>
  ANNEAL_HD void Visit(uint32_t block, uint32_t thread, F&& f) const {
    const size_t stride = static_cast<size_t>(blocks) * threads;
    const size_t me = static_cast<size_t>(block) * threads + thread;
    const size_t nv = n / vec;
    for (size_t i = me; i < nv; i += stride) f(i * vec, static_cast<size_t>(vec));
    if (me == 0 && nv * vec < n) f(nv * vec, n - nv * vec);
  }
};

// elem_bytes: the widest operand's element size (4 for f32, 2 for bf16); aligned16: every operand's
// base address is a multiple of 16. sms: the device's multiprocessors (a few waves of blocks each).
inline Elementwise PlanElementwise(size_t n, size_t elem_bytes, bool aligned16, int sms) {
  Elementwise e;
  e.n = n;
  e.vec = aligned16 ? static_cast<uint32_t>(16 / elem_bytes) : 1u;
  e.threads = 256;
  const size_t pieces = std::max<size_t>(1, n / e.vec);
  const size_t want = (pieces + e.threads - 1) / e.threads;
  e.blocks = static_cast<uint32_t>(std::max<size_t>(1, std::min<size_t>(want, static_cast<size_t>(std::max(1, sms)) * 8)));
  return e;
}

inline bool Aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// One warp per row of a (rows, cols) matrix (LayerNorm, softmax, cross-entropy): warps_per_block
// rows per block; each lane visits columns lane, lane + 32, ... of its row.
struct Rows {
  int64_t rows = 0, cols = 0;
  uint32_t warps_per_block = 8;
  uint32_t blocks() const { return static_cast<uint32_t>((rows + warps_per_block - 1) / warps_per_block); }
  uint32_t threads() const { return 32 * warps_per_block; }
  // The row a warp owns, or -1 past the end.
  ANNEAL_HD int64_t RowOf(uint32_t block, uint32_t warp) const {
    const int64_t r = static_cast<int64_t>(block) * warps_per_block + warp;
    return r < rows ? r : -1;
  }
  // f(row, col) for every column this lane holds of its warp's row.
  template <class F>
  ANNEAL_HD void Visit(uint32_t block, uint32_t warp, uint32_t lane, F&& f) const {
    const int64_t r = RowOf(block, warp);
    if (r < 0) return;
    for (int64_t c = lane; c < cols; c += 32) f(r, c);
  }
};

// A deterministic sum over n values (the gradient norm): block b sums the fixed chunk
// [b * chunk, min(n, (b + 1) * chunk)) by its threads, thread t taking elements t, t + threads, ...
// of the chunk, the threads' partials combined in TreeOrder; the blocks' sums are then added in
// block order. The same n gives the same order, whatever the device.
struct ChunkedSum {
  size_t n = 0, chunk = 1;
  uint32_t threads = 256;
  uint32_t blocks() const { return static_cast<uint32_t>(std::max<size_t>(1, (n + chunk - 1) / chunk)); }
  template <class F>
  ANNEAL_HD void Visit(uint32_t block, uint32_t thread, F&& f) const {
    const size_t lo = static_cast<size_t>(block) * chunk;
    const size_t hi = lo + chunk < n ? lo + chunk : n;
    for (size_t i = lo + thread; i < hi; i += threads) f(i);
  }
};
inline ChunkedSum PlanChunkedSum(size_t n) {
  ChunkedSum s;
  s.n = n;
  s.chunk = 64 * 1024;
  return s;
}
// Pairwise combination of `count` (a power of two) partials in place, as the block does it in shared
// memory: at each step, element i += element i + half, for i < half. Returns element 0.
template <class T>
ANNEAL_HD T TreeOrder(T* v, uint32_t count) {
  for (uint32_t half = count / 2; half > 0; half /= 2) {
    for (uint32_t i = 0; i < half; ++i) v[i] += v[i + half];
  }
  return v[0];
}

// The host's reproduction of the device's sum of squares (rows.cu SumSquaresChunks, then the blocks
// in order): the same additions in the same order, so the two agree bit for bit. x(i) reads element i
// as fp32 (a bf16 value widened).
template <class Read>
double ChunkedSumSquaresOnHost(size_t n, Read x) {
  const ChunkedSum plan = PlanChunkedSum(n);
  double total = 0;
  std::vector<double> partial(plan.threads);
  for (uint32_t b = 0; b < plan.blocks(); ++b) {
    for (uint32_t t = 0; t < plan.threads; ++t) {
      double a = 0;
      plan.Visit(b, t, [&](size_t i) {
        const double v = x(i);
        a += v * v;
      });
      partial[t] = a;
    }
    total += TreeOrder(partial.data(), plan.threads);
  }
  return total;
}

}  // namespace anneal::cudalaunch
