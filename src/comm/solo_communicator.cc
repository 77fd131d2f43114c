// The one-rank communicator (comm/communicator.h MakeSoloCommunicator): every operation is a local
// copy, done when it returns. Single-process runs and one-rank groups use it; it needs no transport.
#include <cstring>

#include "comm/communicator.h"

namespace anneal {

namespace {

class SoloCommunicator : public Communicator {
 public:
  explicit SoloCommunicator(std::string g) : group_(std::move(g)) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::string& group() const override { return group_; }
  std::unique_ptr<Work> StartAllReduceSum(float*, size_t) override { return Ok(); }
  std::unique_ptr<Work> StartAllReduceSum(double*, size_t) override { return Ok(); }
  std::unique_ptr<Work> StartReduceScatterSum(const float* x, const std::vector<size_t>& c, float* y) override {
    if (x != y) std::memmove(y, x, c[0] * sizeof(float));
    return Ok();
  }
  std::unique_ptr<Work> StartReduceScatterSumBf16(const uint16_t* x, const std::vector<size_t>& c, uint16_t* y) override {
    if (x != y) std::memmove(y, x, c[0] * sizeof(uint16_t));
    return Ok();
  }
  std::unique_ptr<Work> StartAllGatherVBytes(void*, const std::vector<size_t>&) override { return Ok(); }
  std::unique_ptr<Work> StartBroadcast(void*, size_t, int) override { return Ok(); }
  std::unique_ptr<Work> StartAllGatherBytes(const void* in, size_t bytes, void* out) override {
    std::memmove(out, in, bytes);
    return Ok();
  }
  std::unique_ptr<Work> StartSend(const void*, size_t, int) override {
    return FailedWork(Internal("send to self in a one-rank group"));
  }
  std::unique_ptr<Work> StartRecv(void*, size_t, int) override {
    return FailedWork(Internal("receive from self in a one-rank group"));
  }
  std::unique_ptr<Work> StartBarrier() override { return Ok(); }

 private:
  static std::unique_ptr<Work> Ok() { return FailedWork(Status::Ok()); }  // done at once
  std::string group_;
};

}  // namespace

std::unique_ptr<Communicator> MakeSoloCommunicator(const std::string& group) {
  return std::make_unique<SoloCommunicator>(group);
}

}  // namespace anneal
