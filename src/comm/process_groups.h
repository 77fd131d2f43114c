// ProcessGroups: the rank layout of a job over data (dp), pipeline (pp) and tensor (tp) parallelism,
// created once from the world size and passed explicitly to whatever needs it (no global state).
//
// Ranks are numbered with tp fastest, then pp, then dp:
//     rank = (dp_rank * pp + pp_rank) * tp + tp_rank
// so the ranks of one tensor-parallel group are adjacent (same node, fastest links).
//
// Worked example: world 8 = dp 2 x pp 2 x tp 2
//     rank     0 1 2 3 4 5 6 7
//     dp_rank  0 0 0 0 1 1 1 1
//     pp_rank  0 0 1 1 0 0 1 1
//     tp_rank  0 1 0 1 0 1 0 1
//     tp groups {0,1} {2,3} {4,5} {6,7}     (same dp and pp)
//     pp groups {0,2} {1,3} {4,6} {5,7}     (same dp and tp: the stages of one pipeline)
//     dp groups {0,4} {1,5} {2,6} {3,7}     (same pp and tp: replicas that average gradients)
//
// Shard groups (MiCS / hybrid sharding, dist.shard_group = K, K divides dp): ZeRO shards within K
// consecutive data-parallel ranks and replicates across the dp/K groups. With world 8 = dp 4 x tp 2
// and K = 2 (dp groups {0,2,4,6} {1,3,5,7}):
//     dp_rank       0 0 1 1 2 2 3 3      (rank 0..7)
//     shard groups  {0,2} {4,6} {1,3} {5,7}   (same tp, dp_rank / K equal: gathers, reduce-scatters)
//     replica groups {0,4} {2,6} {1,5} {3,7}  (same tp, dp_rank % K equal: the shards' allreduce)
// Consecutive dp ranks are adjacent hosts' ranks under the usual placement, so a shard group's
// collectives stay inside a node when K divides the ranks per node (times tp x pp).
//
// Immutable after Make(); safe to share between threads.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace anneal {

class ProcessGroups {
 public:
  // Validates dp * pp * tp == world and 0 <= rank < world; the error names each factor (exit 2).
  static Result<ProcessGroups> Make(int world, int dp, int pp, int tp, int rank);
  // The same with ZeRO sharded within groups of shard_group data-parallel ranks (0 = all dp: no
  // replication); it must divide dp.
  static Result<ProcessGroups> Make(int world, int dp, int pp, int tp, int rank, int shard_group);

  int world() const { return world_; }
  int rank() const { return rank_; }
  int dp() const { return dp_; }
  int pp() const { return pp_; }
  int tp() const { return tp_; }
  int dp_rank() const { return rank_ / (pp_ * tp_); }
  int pp_rank() const { return (rank_ / tp_) % pp_; }
  int tp_rank() const { return rank_ % tp_; }
  // Data-parallel ranks per ZeRO shard group (dp without shard groups), this rank's place in its
  // shard group and in its replica group.
  int shard() const { return shard_; }
  int shard_rank() const { return dp_rank() % shard_; }
  int replica_rank() const { return dp_rank() / shard_; }

  // The global rank at coordinates (dp_rank, pp_rank, tp_rank).
  int RankAt(int dp_rank, int pp_rank, int tp_rank) const { return (dp_rank * pp_ + pp_rank) * tp_ + tp_rank; }
  // The members of this rank's groups, in increasing group-local rank.
  std::vector<int> TpGroup() const;
  std::vector<int> PpGroup() const;
  std::vector<int> DpGroup() const;
  // Its shard group (K consecutive dp ranks) and replica group (dp/K ranks, one per shard group).
  std::vector<int> ShardGroup() const;
  std::vector<int> ReplicaGroup() const;
  // "rank 5 of 8: dp 1/2, pp 0/2, tp 1/2"
  std::string Describe() const;

 private:
  int world_ = 1, dp_ = 1, pp_ = 1, tp_ = 1, rank_ = 0, shard_ = 1;
};

}  // namespace anneal
