// ApiClient: HTTP/JSON calls to an anneal server (docs/api/openapi.yaml), for the CLI and the agents.
//
// Credentials: every request carries "Authorization: Bearer <token>" with the process's token
// (SetProcessToken, else $ANNEAL_TOKEN, else the file $ANNEAL_TOKEN_FILE). https:// URLs verify the
// server's certificate against $ANNEAL_CA_CERT (a PEM file) or the system's CA store.
//
// Errors map to exit codes (DESIGN.md): the server unreachable or answering 5xx is PeerError (3);
// 400 is InvalidInput (2) carrying the server's message (which names the field); 404 is NotFound (2);
// other 4xx (401 no or bad token, 403 not allowed) are InvalidInput. Thread-safety: one ApiClient per
// thread (each holds its own connection); SetProcessToken may be called from any thread.
#pragma once

#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace httplib {
class Client;
}

namespace anneal {

class ApiClient {
 public:
  // url: "http://host:port" or "https://host:port". timeout_s bounds each request.
  static Result<std::unique_ptr<ApiClient>> Make(const std::string& url, double timeout_s = 30);
  // The token of every client made after this call (an agent's, once it registered).
  static void SetProcessToken(const std::string& token);
  static std::string ProcessToken();
  ~ApiClient();

  Result<nlohmann::json> Get(const std::string& path);
  Result<nlohmann::json> Post(const std::string& path, const nlohmann::json& body);
  Result<nlohmann::json> Put(const std::string& path, const nlohmann::json& body);
  Result<nlohmann::json> Delete(const std::string& path);
  // A raw body (a package upload, a YAML spec) with its content type.
  Result<nlohmann::json> PostRaw(const std::string& path, const std::string& body, const std::string& content_type,
                                 const std::map<std::string, std::string>& headers = {});
  // A raw response body (a package download).
  Result<std::string> GetRaw(const std::string& path);
  const std::string& url() const { return url_; }
  // This client's token instead of the process's.
  void set_token(const std::string& token);

 private:
  ApiClient() = default;
  Result<nlohmann::json> Decode(const std::string& what, int status, const std::string& body);
  std::string url_;
  std::unique_ptr<httplib::Client> cli_;
};

// The server URL the CLI talks to: --server, else $ANNEAL_SERVER, else http://127.0.0.1:8470.
std::string DefaultServerUrl(const std::string& flag);

// A token or secret file's text without its trailing newline (and spaces).
Result<std::string> ReadSecretFile(const std::string& path);

}  // namespace anneal
