// The GPU time of each CUDA backend op, for finding where a step's time goes (ANNEAL_CUDA_OP_TIMES=1;
// off, a scope costs one branch). Each op's span is a pair of timing events recorded on its stream
// around the op's launches; pairs are read back in batches (one host synchronization per 2048 ops,
// so the numbers perturb the run a little: measure throughput without it). Table() sums per op:
// calls, total and mean milliseconds, share of all op time.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <string>
#include <vector>

namespace anneal::cuda {

class OpTimes {
 public:
  OpTimes();
  ~OpTimes();
  OpTimes(const OpTimes&) = delete;
  OpTimes& operator=(const OpTimes&) = delete;
  bool enabled() const { return enabled_; }

  class Scope {
   public:
    Scope(OpTimes* t, const char* op, cudaStream_t s);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    OpTimes* t_;
    const char* op_;
    cudaStream_t s_;
    cudaEvent_t start_ = nullptr;
  };
  // Reads back every pending pair (synchronizing), then the table ("" when disabled).
  std::string Table();

 private:
  struct Pending {
    const char* op;
    cudaEvent_t start, end;
  };
  struct Sum {
    long calls = 0;
    double ms = 0;
  };
  cudaEvent_t Take();
  void Harvest();
  bool enabled_ = false;
  std::vector<cudaEvent_t> free_;
  std::vector<Pending> pending_;
  std::map<std::string, Sum> sums_;
};

}  // namespace anneal::cuda
