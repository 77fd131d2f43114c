// anneal's allreduce (the Communicator of ConnectGloo, fp32 sum: ranks on one host reduce through
// ShmGroup's shared memory, comm/shm_group.h), one line per size on rank 0 (best of 3
// timed repetitions; rank 0's times):
//   SIZE_BYTES SECONDS_PER_OP BUS_GB_S
// Run under `anneal launch --nproc-per-node N` (bench/allreduce/run.sh runs it beside MPI_Allreduce).
//   allreduce_anneal [MAX_BYTES [REPS [MAX_ITERS]]]   defaults 268435456 (1 KB .. 256 MB), 3 timed
//   repetitions, at most 1000 operations each (bench/allreduce/run.sh passes 1048576 1 3 under
//   BENCH_SMOKE=1); allreduce_mpi takes the same arguments.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/progress.h"
#include "comm/communicator.h"
#include "comm/rank_contract.h"
#include "comm/store.h"

int main(int argc, char** argv) {
  using namespace anneal;
  const size_t max_bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (size_t{256} << 20);
  const int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  const int max_iters = argc > 3 ? std::max(1, std::atoi(argv[3])) : 1000;
  auto re = RankContract::FromEnvironment();
  if (!re.ok() || re->store.empty()) {
    std::fprintf(stderr, "run under anneal launch (needs RANK, WORLD_SIZE, ANNEAL_STORE)\n");
    return 2;
  }
  auto base = OpenStore(re->store, std::chrono::seconds(60));
  if (!base.ok()) return std::fprintf(stderr, "%s\n", base.status().message().c_str()), 3;
  PrefixStore store(base->get(), re->StorePrefix());
  CommOptions o = re->Comm();
  o.timeout = std::chrono::seconds(120);
  auto comm = ConnectGloo(&store, o);
  if (!comm.ok()) return std::fprintf(stderr, "%s\n", comm.status().message().c_str()), 3;
  const int n = re->world;
  for (size_t bytes = 1024; bytes <= max_bytes; bytes *= 4) {
    std::vector<float> x(bytes / 4, 1.0f);
    const int iters = std::min(
        max_iters, static_cast<int>(std::clamp<size_t>((size_t{512} << 20) / bytes, 3, 1000)));
    if (!(*comm)->AllReduceSum(x.data(), x.size()).ok()) return 3;  // warm-up
    double s = 1e30;
    for (int rep = 0; rep < reps; ++rep) {  // best of 3 (reps) timed repetitions
      if (!(*comm)->Barrier().ok()) return 3;
      const double t0 = MonotonicSeconds();
      for (int i = 0; i < iters; ++i) {
        if (!(*comm)->AllReduceSum(x.data(), x.size()).ok()) return 3;
      }
      s = std::min(s, (MonotonicSeconds() - t0) / iters);
    }
    if (re->rank == 0) std::printf("%zu %.9f %.4f\n", bytes, s, bytes / s * 2.0 * (n - 1) / n / 1e9);
    std::fflush(stdout);
  }
  return 0;
}
