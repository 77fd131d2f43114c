// StaticBackend: jobs run on agents that joined by themselves (`anneal agent --server URL`); the
// scheduler assigns them (control/scheduler.h), so there is nothing to obtain or free here.
#include "provision/instance_provider.h"

namespace anneal {

namespace {

class StaticBackend : public InstanceProvider {
 public:
  std::string name() const override { return kJoinedBackend; }
  bool obtains() const override { return false; }
  int capacity() const override { return -1; }
  Status Obtain(const GangRequest& g) override {
    return Internal("the static backend obtains nothing (jobs run on joined agents), asked for " + g.job);
  }
  void Release(const std::string&) override {}  // the agent stays, back in the pool
  ProvisionReport Poll() override { return {}; }   // joined agents are lost by their heartbeats
};

}  // namespace

std::unique_ptr<InstanceProvider> MakeStaticBackend() { return std::make_unique<StaticBackend>(); }

}  // namespace anneal
