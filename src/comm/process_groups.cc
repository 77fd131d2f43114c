#include "comm/process_groups.h"

namespace anneal {

Result<ProcessGroups> ProcessGroups::Make(int world, int dp, int pp, int tp, int rank) {
  if (world < 1) return InvalidInput("world size " + std::to_string(world) + " must be at least 1");
  if (dp < 1 || pp < 1 || tp < 1) {
    return InvalidInput("parallel sizes must be at least 1: dp " + std::to_string(dp) + ", pp " + std::to_string(pp) +
                        ", tp " + std::to_string(tp));
  }
  if (static_cast<long long>(dp) * pp * tp != world) {
    return InvalidInput("dp (" + std::to_string(dp) + ") x pp (" + std::to_string(pp) + ") x tp (" +
                        std::to_string(tp) + ") = " + std::to_string(static_cast<long long>(dp) * pp * tp) +
                        " but the world size is " + std::to_string(world) +
                        ": choose dp, pp and tp whose product is the number of ranks");
  }
  if (rank < 0 || rank >= world) {
    return InvalidInput("rank " + std::to_string(rank) + " is outside the world of " + std::to_string(world) + " ranks");
  }
  ProcessGroups g;
  g.world_ = world;
  g.dp_ = dp;
  g.pp_ = pp;
  g.tp_ = tp;
  g.rank_ = rank;
  g.shard_ = dp;
  return g;
}

Result<ProcessGroups> ProcessGroups::Make(int world, int dp, int pp, int tp, int rank, int shard_group) {
  ANNEAL_ASSIGN_OR_RETURN(ProcessGroups g, Make(world, dp, pp, tp, rank));
  if (shard_group == 0) return g;
  if (shard_group < 1 || dp % shard_group != 0) {
    return InvalidInput("dist.shard_group = " + std::to_string(shard_group) + " does not divide dp = " +
                        std::to_string(dp) + ": choose a shard group size that divides the data-parallel ranks");
  }
  g.shard_ = shard_group;
  return g;
}

std::vector<int> ProcessGroups::ShardGroup() const {
  std::vector<int> g;
  const int first = replica_rank() * shard_;
  for (int d = first; d < first + shard_; ++d) g.push_back(RankAt(d, pp_rank(), tp_rank()));
  return g;
}

std::vector<int> ProcessGroups::ReplicaGroup() const {
  std::vector<int> g;
  for (int d = shard_rank(); d < dp_; d += shard_) g.push_back(RankAt(d, pp_rank(), tp_rank()));
  return g;
}

std::vector<int> ProcessGroups::TpGroup() const {
  std::vector<int> g;
  for (int t = 0; t < tp_; ++t) g.push_back(RankAt(dp_rank(), pp_rank(), t));
  return g;
}

std::vector<int> ProcessGroups::PpGroup() const {
  std::vector<int> g;
  for (int p = 0; p < pp_; ++p) g.push_back(RankAt(dp_rank(), p, tp_rank()));
  return g;
}

std::vector<int> ProcessGroups::DpGroup() const {
  std::vector<int> g;
  for (int d = 0; d < dp_; ++d) g.push_back(RankAt(d, pp_rank(), tp_rank()));
  return g;
}

std::string ProcessGroups::Describe() const {
  return "rank " + std::to_string(rank_) + " of " + std::to_string(world_) + ": dp " + std::to_string(dp_rank()) + "/" +
         std::to_string(dp_) + ", pp " + std::to_string(pp_rank()) + "/" + std::to_string(pp_) + ", tp " +
         std::to_string(tp_rank()) + "/" + std::to_string(tp_) +
         (shard_ < dp_ ? ", shard group " + std::to_string(replica_rank()) + "/" + std::to_string(dp_ / shard_) +
                             " (" + std::to_string(shard_rank()) + "/" + std::to_string(shard_) + " in it)"
                       : "");
}

}  // namespace anneal
