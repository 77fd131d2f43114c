#include "protocol/api_client.h"

#include <httplib.h>

#include <cstdlib>
#include <fstream>
#include <mutex>

#include "core/env.h"
#include "core/text.h"

namespace anneal {

namespace {

std::string ErrorText(httplib::Error e) {
  std::string t = httplib::to_string(e);
  if (e == httplib::Error::SSLServerVerification) {
    t += "; the server's certificate is not trusted here: set ANNEAL_CA_CERT to the PEM file of the CA that signed it";
  }
  return t;
}

std::mutex g_token_mu;
bool g_token_set = false;
std::string g_token;

std::string TokenFromEnvironment() {
  if (const char* t = std::getenv("ANNEAL_TOKEN"); t && *t) return t;
  if (const char* f = std::getenv("ANNEAL_TOKEN_FILE"); f && *f) {
    std::ifstream in(f);
    std::string t;
    std::getline(in, t);
    return t;
  }
  return "";
}

}  // namespace

void ApiClient::SetProcessToken(const std::string& token) {
  std::lock_guard<std::mutex> l(g_token_mu);
  g_token = token;
  g_token_set = true;
}

std::string ApiClient::ProcessToken() {
  std::lock_guard<std::mutex> l(g_token_mu);
  if (!g_token_set) {
    g_token = TokenFromEnvironment();
    g_token_set = true;
  }
  return g_token;
}

Result<std::unique_ptr<ApiClient>> ApiClient::Make(const std::string& url, double timeout_s) {
  const bool tls = url.rfind("https://", 0) == 0;
  if (url.rfind("http://", 0) != 0 && !tls) {
    return InvalidInput("server URL '" + url + "' must start with http:// or https:// (e.g. http://127.0.0.1:8470)");
  }
  std::unique_ptr<ApiClient> c(new ApiClient());
  c->url_ = url;
  while (!c->url_.empty() && c->url_.back() == '/') c->url_.pop_back();
  c->cli_ = std::make_unique<httplib::Client>(c->url_);
  if (tls) {
    c->cli_->enable_server_certificate_verification(true);
    if (const char* ca = std::getenv("ANNEAL_CA_CERT"); ca && *ca) c->cli_->set_ca_cert_path(ca);
  }
  if (const std::string token = ProcessToken(); !token.empty()) c->cli_->set_bearer_token_auth(token);
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

void ApiClient::set_token(const std::string& token) { cli_->set_bearer_token_auth(token); }

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
  if (status == 401) {
    return InvalidInput(m + (ProcessToken().empty() ? " (no token: set ANNEAL_TOKEN or ANNEAL_TOKEN_FILE)" : ""));
  }
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

namespace {
// A body's JSON text; text that is not UTF-8 (a rank's output cut mid-character, raw bytes a job
// printed) goes as U+FFFD instead of throwing, which ended the agent's shipper thread and the agent.
std::string BodyText(const nlohmann::json& body) {
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}
}  // namespace

Result<nlohmann::json> ApiClient::Post(const std::string& path, const nlohmann::json& body) {
  return PostRaw(path, BodyText(body), "application/json");
}

Result<nlohmann::json> ApiClient::Put(const std::string& path, const nlohmann::json& body) {
  auto r = cli_->Put(path, BodyText(body), "application/json");
  if (!r) return PeerError("cannot reach the anneal server at " + url_ + " (PUT " + path + ": " + ErrorText(r.error()) + ")");
  return Decode("PUT " + path, r->status, r->body);
}

Result<nlohmann::json> ApiClient::Delete(const std::string& path) {
  auto r = cli_->Delete(path);
  if (!r) return PeerError("cannot reach the anneal server at " + url_ + " (DELETE " + path + ": " + ErrorText(r.error()) + ")");
  return Decode("DELETE " + path, r->status, r->body);
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

Result<std::string> ReadSecretFile(const std::string& path) {
  ANNEAL_ASSIGN_OR_RETURN(std::string text, Env::Default().ReadFile(path));
  text = TrimTrailing(std::move(text));
  return text;
}

}  // namespace anneal
