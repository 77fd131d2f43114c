#include "control/api_client.h"

#include <httplib.h>

#include <cstdlib>

namespace anneal {

namespace {

std::string ErrorText(httplib::Error e) { return httplib::to_string(e); }

}  // namespace

Result<std::unique_ptr<ApiClient>> ApiClient::Make(const std::string& url, double timeout_s) {
  if (url.rfind("http://", 0) != 0) {
    return InvalidInput("server URL '" + url + "' must start with http:// (e.g. http://127.0.0.1:8470)");
  }
  std::unique_ptr<ApiClient> c(new ApiClient());
  c->url_ = url;
  while (!c->url_.empty() && c->url_.back() == '/') c->url_.pop_back();
  c->cli_ = std::make_unique<httplib::Client>(c->url_);
  const time_t sec = static_cast<time_t>(timeout_s);
  const time_t usec = static_cast<time_t>((timeout_s - static_cast<double>(sec)) * 1e6);
  c->cli_->set_connection_timeout(std::min<time_t>(sec, 5), std::min<time_t>(sec, 5) == sec ? usec : 0);
  c->cli_->set_read_timeout(sec, usec);
  c->cli_->set_write_timeout(sec, usec);
  // One connection per request: cpp-httplib's server watches an idle keep-alive connection by
  // polling it every 10 ms, and the agents' and CLI's few requests a second would keep that polling
  // going beside the ranks (bench/job_latency measured 5x the ranks' involuntary context switches).
  c->cli_->set_keep_alive(false);
  c->cli_->set_tcp_nodelay(true);
  return c;
}

ApiClient::~ApiClient() = default;

Result<nlohmann::json> ApiClient::Decode(const std::string& what, int status, const std::string& body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (status >= 200 && status < 300) {
    if (j.is_discarded()) return PeerError(what + ": the server's answer is not JSON");
    return j;
  }
  std::string msg = body;
  if (!j.is_discarded() && j.contains("error") && j["error"].is_object()) msg = j["error"].value("message", body);
  const std::string m = what + " (HTTP " + std::to_string(status) + "): " + msg;
  if (status == 404) return NotFound(m);
  if (status >= 400 && status < 500) return InvalidInput(m);
  return PeerError(m);
}

Result<nlohmann::json> ApiClient::Get(const std::string& path) {
  auto r = cli_->Get(path);
  if (!r) return PeerError("cannot reach the anneal server at " + url_ + " (GET " + path + ": " + ErrorText(r.error()) +
                           "); start one with 'anneal server --data-dir DIR' or point --server / ANNEAL_SERVER at it");
  return Decode("GET " + path, r->status, r->body);
}

Result<std::string> ApiClient::GetRaw(const std::string& path) {
  auto r = cli_->Get(path);
  if (!r) return PeerError("cannot reach the anneal server at " + url_ + " (GET " + path + ": " + ErrorText(r.error()) + ")");
  if (r->status != 200) {
    auto d = Decode("GET " + path, r->status, r->body);
    return d.ok() ? Result<std::string>(PeerError("GET " + path + ": HTTP " + std::to_string(r->status))) : d.status();
  }
  return std::move(r->body);
}

Result<nlohmann::json> ApiClient::Post(const std::string& path, const nlohmann::json& body) {
  return PostRaw(path, body.dump(), "application/json");
}

Result<nlohmann::json> ApiClient::Put(const std::string& path, const nlohmann::json& body) {
  auto r = cli_->Put(path, body.dump(), "application/json");
  if (!r) return PeerError("cannot reach the anneal server at " + url_ + " (PUT " + path + ": " + ErrorText(r.error()) + ")");
  return Decode("PUT " + path, r->status, r->body);
}

Result<nlohmann::json> ApiClient::PostRaw(const std::string& path, const std::string& body,
                                          const std::string& content_type,
                                          const std::map<std::string, std::string>& headers) {
  httplib::Headers h;
  for (const auto& [k, v] : headers) h.emplace(k, v);
  auto r = cli_->Post(path, h, body, content_type);
  if (!r) return PeerError("cannot reach the anneal server at " + url_ + " (POST " + path + ": " + ErrorText(r.error()) +
                           "); start one with 'anneal server --data-dir DIR' or point --server / ANNEAL_SERVER at it");
  return Decode("POST " + path, r->status, r->body);
}

std::string DefaultServerUrl(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* e = std::getenv("ANNEAL_SERVER"); e && *e) return e;
  return "http://127.0.0.1:8470";
}

}  // namespace anneal
