// launch-rsh requests (launch/remote_exec.h) as a launcher reads them from the rendezvous store,
// which any process reaching the store can write: the input is request 1's text. Properties: the
// launcher never crashes, runs nothing whose mac is not the attempt key's (a refused request is
// answered exit 255 and skipped), and runs a request signed with the key exactly as sent.
#include <map>
#include <mutex>

#include <nlohmann/json.hpp>

#include "fuzz/fuzz_target.h"
#include "core/utf8.h"
#include "launch/remote_exec.h"

namespace {

class MemoryStore : public anneal::Store {
 public:
  anneal::Status Set(const std::string& k, const std::string& v) override {
    kv_[k] = v;
    return anneal::Status::Ok();
  }
  anneal::Result<std::string> Get(const std::string& k, std::chrono::milliseconds) override {
    auto it = kv_.find(k);
    if (it == kv_.end()) return anneal::PeerError("no " + k);
    return it->second;
  }
  anneal::Result<std::optional<std::string>> TryGet(const std::string& k) override {
    auto it = kv_.find(k);
    return it == kv_.end() ? std::nullopt : std::optional<std::string>(it->second);
  }
  anneal::Result<int64_t> Add(const std::string&, int64_t d) override { return d; }
  std::string Describe() const override { return "a memory store"; }
  std::map<std::string, std::string> kv_;
};

}  // namespace

ANNEAL_FUZZ_TARGET(launch_rsh) {
  const std::string key = "attempt-key", host = "10.0.0.2", prefix = "job/attempt/0/rsh/10.0.0.2/";
  const std::string text = anneal::fuzz::Text(data, size);
  for (const bool signed_by_key : {false, true}) {
    MemoryStore s;
    std::string request = text;
    if (signed_by_key) {  // the input as a command, signed as launch-rsh signs it
      request = nlohmann::json{{"command", anneal::ReplaceInvalidUtf8(text)},
                               {"mac", anneal::RemoteExecMac(key, host, 1, anneal::ReplaceInvalidUtf8(text))}}
                    .dump();
    }
    s.kv_[prefix + "1"] = request;
    anneal::RemoteExecQueue q(&s, prefix, host, key);
    auto r = q.Poll();
    if (signed_by_key) {
      FUZZ_EXPECT(r.ok() && r->has_value() && (*r)->seq == 1 && (*r)->command == anneal::ReplaceInvalidUtf8(text));
    } else if (r.ok() && r->has_value()) {  // a forged request must carry the key's mac for it
      const auto j = nlohmann::json::parse(text, nullptr, false);
      FUZZ_EXPECT(j.is_object() && j.value("mac", "") == anneal::RemoteExecMac(key, host, 1, (*r)->command));
    } else if (!r.ok()) {
      FUZZ_EXPECT(s.kv_.count(prefix + "1/exit") && s.kv_[prefix + "1/exit"] == "255");
    }
  }
  return 0;
}
