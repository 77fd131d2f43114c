#include "comm/rank_groups.h"

namespace anneal {

namespace {

Result<std::unique_ptr<Communicator>> Connect(const RankContract& re, Store* store, const Device& device,
                                              std::chrono::milliseconds timeout, const std::string& group,
                                              std::vector<int> members) {
  CommOptions co = re.Comm();
  // Several groups share a kind (dp groups {0,4} and {1,5}): the name tells them apart in the store
  // and in errors ("dp-1-5").
  co.group = group;
  if (!members.empty() && static_cast<int>(members.size()) < re.world) {
    for (int m : members) {
      co.group += '-';
      co.group += std::to_string(m);
    }
  }
  co.members = std::move(members);
  co.timeout = timeout;
  return group == "world" ? ConnectGloo(store, co) : ConnectCommunicator(device, store, co);
}

}  // namespace

Result<RankGroups> ConnectRankGroups(const RankContract& re, const ProcessGroups& pg, const Device& device, double timeout_s) {
  RankGroups g;
  if (re.world == 1) {
    g.dp = MakeSoloCommunicator("dp");
    return g;
  }
  if (re.store.empty()) {
    return InvalidInput("this rank is one of " + std::to_string(re.world) + " (" + re.launcher +
                        ") but ANNEAL_STORE, the rendezvous store, is not set: start the ranks with `anneal launch`, "
                        "or set ANNEAL_STORE=host:port of a running store or file:///shared/folder");
  }
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  ANNEAL_ASSIGN_OR_RETURN(g.store_base, OpenStore(re.store, timeout));
  g.store = std::make_unique<PrefixStore>(g.store_base.get(), re.StorePrefix());
  auto connect = [&](const std::string& group, std::vector<int> members) {
    return Connect(re, g.store.get(), device, timeout, group, std::move(members));
  };
  ANNEAL_ASSIGN_OR_RETURN(g.dp, connect("dp", pg.DpGroup()));
  if (pg.shard() < pg.dp()) {
    if (pg.shard() > 1) {
      ANNEAL_ASSIGN_OR_RETURN(g.shard, connect("shard", pg.ShardGroup()));
    } else {
      g.shard = MakeSoloCommunicator("shard");
    }
    ANNEAL_ASSIGN_OR_RETURN(g.replica, connect("replica", pg.ReplicaGroup()));
  }
  if (pg.tp() > 1) {
    ANNEAL_ASSIGN_OR_RETURN(g.tp, connect("tp", pg.TpGroup()));
  }
  if (pg.pp() > 1) {
    ANNEAL_ASSIGN_OR_RETURN(g.pp_fwd, connect("pp_fwd", pg.PpGroup()));
    ANNEAL_ASSIGN_OR_RETURN(g.pp_bwd, connect("pp_bwd", pg.PpGroup()));
    if (pg.pp_rank() == 0 || pg.pp_rank() == pg.pp() - 1) {
      ANNEAL_ASSIGN_OR_RETURN(g.embedding, connect("embedding", {pg.RankAt(pg.dp_rank(), 0, pg.tp_rank()),
                                                                 pg.RankAt(pg.dp_rank(), pg.pp() - 1, pg.tp_rank())}));
    }
  }
  if (pg.dp() < re.world) {
    ANNEAL_ASSIGN_OR_RETURN(g.world_owned, connect("world", {}));
  }
  return g;
}

}  // namespace anneal
