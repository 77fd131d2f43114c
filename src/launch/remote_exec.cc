#include "launch/remote_exec.h"

#include <chrono>
#include <cstdlib>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "core/crypto.h"

namespace anneal {

using nlohmann::json;

std::string RemoteExecMac(const std::string& key, const std::string& host, int64_t seq, const std::string& command) {
  return HexLower(HmacSha256(key, host + "\n" + std::to_string(seq) + "\n" + command));
}

Result<int> RemoteExec(Store* store, const std::string& prefix, const std::string& host, const std::string& key,
                       const std::string& command) {
  ANNEAL_ASSIGN_OR_RETURN(int64_t seq, store->Add(prefix + "count", 1));
  const std::string req = json{{"command", command}, {"mac", RemoteExecMac(key, host, seq, command)}}.dump();
  ANNEAL_RETURN_IF_ERROR(store->Set(prefix + std::to_string(seq), req));
  for (;;) {
    ANNEAL_ASSIGN_OR_RETURN(std::optional<std::string> code, store->TryGet(prefix + std::to_string(seq) + "/exit"));
    if (code) return std::atoi(code->c_str());
    Clock::Real().SleepFor(0.05);
  }
}

Result<std::optional<RemoteExecQueue::Request>> RemoteExecQueue::Poll() {
  ANNEAL_ASSIGN_OR_RETURN(std::optional<std::string> text, store_->TryGet(prefix_ + std::to_string(next_)));
  if (!text) return std::optional<Request>();
  const int64_t seq = next_++;
  std::string command, mac;
  try {
    const json j = json::parse(*text);
    command = j.at("command").get<std::string>();
    mac = j.at("mac").get<std::string>();
  } catch (const std::exception&) {
  }
  if (mac.empty() || !EqualInConstantTime(mac, RemoteExecMac(key_, host_, seq, command))) {
    ANNEAL_RETURN_IF_ERROR(Finish(seq, 255));
    return InvalidInput("refused remote command " + std::to_string(seq) + " for " + host_ +
                            ": its mac does not match this job attempt's key");
  }
  return std::optional<Request>(Request{seq, command});
}

Status RemoteExecQueue::Finish(int64_t seq, int exit_code) {
  return store_->Set(prefix_ + std::to_string(seq) + "/exit", std::to_string(exit_code));
}

}  // namespace anneal
