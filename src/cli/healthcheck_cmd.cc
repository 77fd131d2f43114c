// anneal healthcheck: one rank of the collective health check (docs/health-checks.md). Run under
// `anneal launch` (the rank contract: RANK, WORLD_SIZE, ANNEAL_STORE), as the agent does across a
// job's instances before the job starts. Each rank fills a float buffer of --collective-mb MiB with
// rank + 1 and allreduces it (Gloo over TCP): 1 warm-up and --iters timed rounds, each checked
// element by element against N(N+1)/2 (small integers: exact in float). Prints one JSON line:
//   {"healthcheck": "collective", "ok": true, "rank": r, "world": N, "mb": m, "seconds": s,
//    "algbw_gbps": x, "busbw_gbps": y}
// where seconds is the mean time of one timed allreduce, algbw = bytes / seconds and busbw =
// algbw * 2(N-1)/N (nccl-tests' definitions; GB = 1e9 bytes). A wrong sum exits 1 naming the element;
// a peer lost or too slow exits 3 (the communicator's timeout, --timeout-s).
#include <cstdio>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/progress.h"
#include "comm/communicator.h"
#include "comm/rank_contract.h"
#include "comm/store.h"

namespace anneal::cli {

namespace {

struct HealthcheckArgs {
  double collective_mb = 64;
  int iters = 3;
  double timeout_s = 60;
};

Status RunHealthcheck(const HealthcheckArgs& a) {
  if (a.collective_mb <= 0) return InvalidInput("--collective-mb must be positive (MiB per rank)");
  if (a.iters < 1) return InvalidInput("--iters must be at least 1");
  if (a.timeout_s <= 0) return InvalidInput("--timeout-s must be positive");
  ANNEAL_ASSIGN_OR_RETURN(RankContract re, RankContract::FromEnvironment());
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(a.timeout_s * 1000));
  std::unique_ptr<Store> store_base;
  std::unique_ptr<PrefixStore> store;
  std::unique_ptr<Communicator> comm;
  if (re.world > 1) {
    if (re.store.empty()) {
      return InvalidInput("this rank is one of " + std::to_string(re.world) + " (" + re.launcher +
                          ") but ANNEAL_STORE, the rendezvous store, is not set: run it under `anneal launch`");
    }
    ANNEAL_ASSIGN_OR_RETURN(store_base, OpenStore(re.store, timeout));
    store = std::make_unique<PrefixStore>(store_base.get(), re.StorePrefix());
    CommOptions co = re.Comm();
    co.group = "healthcheck";
    co.timeout = timeout;
    ANNEAL_ASSIGN_OR_RETURN(comm, ConnectGloo(store.get(), co));
  } else {
    comm = MakeSoloCommunicator("healthcheck");
  }
  const size_t n = static_cast<size_t>(a.collective_mb * 1024 * 1024 / sizeof(float));
  if (n == 0) return InvalidInput("--collective-mb is below one float");
  std::vector<float> buf(n);
  const int N = re.world;
  const float want = static_cast<float>(N) * static_cast<float>(N + 1) / 2;
  double total = 0;
  for (int round = 0; round <= a.iters; ++round) {  // round 0: the warm-up, not timed
    std::fill(buf.begin(), buf.end(), static_cast<float>(re.rank + 1));
    ANNEAL_RETURN_IF_ERROR(comm->Barrier());
    const double t0 = MonotonicSeconds();
    ANNEAL_RETURN_IF_ERROR(comm->AllReduceSum(buf.data(), n));
    const double dt = MonotonicSeconds() - t0;
    if (round > 0) total += dt;
    for (size_t i = 0; i < n; ++i) {
      if (buf[i] != want) {
        return Internal("collective health check: allreduce round " + std::to_string(round) + " of " +
                        std::to_string(N) + " rank(s) gave " + std::to_string(buf[i]) + " at element " +
                        std::to_string(i) + " of " + std::to_string(n) + ", expected " + std::to_string(want) +
                        " (each rank adds rank+1): memory or the transport between the instances corrupts data; "
                        "take this instance out of service");
      }
    }
  }
  const double seconds = total / a.iters;
  const double bytes = static_cast<double>(n) * sizeof(float);
  const double algbw = seconds > 0 ? bytes / seconds / 1e9 : 0;
  const double busbw = algbw * 2.0 * (N - 1) / N;
  const nlohmann::json line = {{"healthcheck", "collective"}, {"ok", true},           {"rank", re.rank},
                               {"world", N},                  {"mb", a.collective_mb}, {"seconds", seconds},
                               {"algbw_gbps", algbw},         {"busbw_gbps", busbw}};
  std::printf("%s\n", line.dump().c_str());
  std::fflush(stdout);
  return Status::Ok();
}

}  // namespace

void AddHealthcheckCommand(CLI::App& app, RunFn* run) {
  auto a = std::make_shared<HealthcheckArgs>();
  CLI::App* c = app.add_subcommand(
      "healthcheck",
      "One rank of the collective health check: allreduce a buffer across the ranks (1 warm-up + --iters timed "
      "rounds), check every element, print one JSON line with algbw/busbw (GB/s, nccl-tests' definitions). Run it "
      "under anneal launch; the agent does so across a job's instances before the job starts.\n"
      "Example: anneal launch --nproc-per-node 2 -- anneal healthcheck --collective-mb 4");
  c->add_option("--collective-mb", a->collective_mb, "MiB of floats each rank allreduces")->capture_default_str();
  c->add_option("--iters", a->iters, "Timed allreduce rounds (after one warm-up)")->capture_default_str();
  c->add_option("--timeout-s", a->timeout_s,
                "Seconds for connecting and for each operation; a peer slower than this fails the check (exit 3)")
      ->capture_default_str();
  c->callback([run, a] { *run = [a] { return RunHealthcheck(*a); }; });
}

}  // namespace anneal::cli
