#include "kernels/cuda/op_times.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace anneal::cuda {

OpTimes::OpTimes() {
  const char* v = std::getenv("ANNEAL_CUDA_OP_TIMES");
  enabled_ = v && std::strcmp(v, "0") != 0 && *v;
}

OpTimes::~OpTimes() {
  for (const Pending& p : pending_) cudaEventDestroy(p.start), cudaEventDestroy(p.end);
  for (cudaEvent_t e : free_) cudaEventDestroy(e);
}

cudaEvent_t OpTimes::Take() {
  if (free_.empty()) {
    cudaEvent_t e = nullptr;
    if (cudaEventCreate(&e) != cudaSuccess) return nullptr;
    return e;
  }
  cudaEvent_t e = free_.back();
  free_.pop_back();
  return e;
}

void OpTimes::Harvest() {
  for (const Pending& p : pending_) {
    float ms = 0;
    if (cudaEventSynchronize(p.end) == cudaSuccess && cudaEventElapsedTime(&ms, p.start, p.end) == cudaSuccess) {
      Sum& s = sums_[p.op];
      ++s.calls;
      s.ms += ms;
    }
    free_.push_back(p.start);
    free_.push_back(p.end);
  }
  pending_.clear();
}

OpTimes::Scope::Scope(OpTimes* t, const char* op, cudaStream_t s) : t_(t), op_(op), s_(s) {
  if (!t_->enabled_) return;
  start_ = t_->Take();
  if (start_) cudaEventRecord(start_, s_);
}

OpTimes::Scope::~Scope() {
  if (!start_) return;
  cudaEvent_t end = t_->Take();
  if (!end) return;
  cudaEventRecord(end, s_);
  t_->pending_.push_back({op_, start_, end});
  if (t_->pending_.size() >= 2048) t_->Harvest();
}

std::string OpTimes::Table() {
  if (!enabled_) return "";
  Harvest();
  std::vector<std::pair<std::string, Sum>> rows(sums_.begin(), sums_.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  double all = 0;
  for (const auto& r : rows) all += r.second.ms;
  std::string out = "CUDA op times (ANNEAL_CUDA_OP_TIMES; GPU time between each op's events, all steps):\n";
  char line[160];
  std::snprintf(line, sizeof(line), "  %-26s %8s %12s %10s %7s\n", "op", "calls", "total ms", "mean ms", "share");
  out += line;
  for (const auto& [op, s] : rows) {
    std::snprintf(line, sizeof(line), "  %-26s %8ld %12.2f %10.4f %6.1f%%\n", op.c_str(), s.calls, s.ms,
                  s.ms / static_cast<double>(s.calls), all > 0 ? 100.0 * s.ms / all : 0.0);
    out += line;
  }
  std::snprintf(line, sizeof(line), "  %-26s %8s %12.2f\n", "all ops", "", all);
  return out + line;
}

}  // namespace anneal::cuda
