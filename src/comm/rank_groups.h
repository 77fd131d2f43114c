// The communicators of one rank of a (dp, tp, pp) job, connected through the job's rendezvous store
// (comm/store.h): one per group the rank belongs to, each with its own thread.
//   dp         its data-parallel replicas (a one-rank communicator when there are none)
//   shard      with shard groups (1 < K < dp): its K-rank ZeRO shard group
//   replica    then also: the dp/K ranks holding the same shard in the other groups
//   tp         its tensor-parallel slices (tp > 1)
//   pp_fwd/bwd its pipeline, once per direction, so a send waiting in one never blocks the other (pp > 1)
//   embedding  the first and last stage of its pipeline, which both hold the tied wte (pp > 1, on those)
//   world      every rank: the loss, the gradient norm, stop flags, checkpoint records (world > dp;
//              otherwise the dp communicator is the world)
// The groups that carry tensors use the communicator of the compute device (Gloo on the host, NCCL on
// CUDA); "world" carries host scalars and is always Gloo.
#pragma once

#include <memory>

#include "comm/communicator.h"
#include "comm/process_groups.h"
#include "comm/rank_contract.h"
#include "comm/store.h"
#include "core/status.h"
#include "tensor/device.h"

namespace anneal {

struct RankGroups {
  std::unique_ptr<Store> store_base;
  std::unique_ptr<PrefixStore> store;  // keys under RankContract::StorePrefix()
  std::unique_ptr<Communicator> dp, shard, replica, tp, pp_fwd, pp_bwd, embedding, world_owned;
  Communicator* world() const { return world_owned ? world_owned.get() : dp.get(); }
};

// Connects every group of `pg` this rank is in; timeout_s bounds connecting and every collective.
// A world of one gets only a one-rank dp communicator.
Result<RankGroups> ConnectRankGroups(const RankContract& re, const ProcessGroups& pg, const Device& device, double timeout_s);

}  // namespace anneal
