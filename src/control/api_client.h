// ApiClient: HTTP/JSON calls to an anneal server (docs/api/openapi.yaml), for the CLI and the agents.
//
// Errors map to exit codes (DESIGN.md): the server unreachable or answering 5xx is PeerError (3);
// 400 is InvalidInput (2) carrying the server's message (which names the field); 404 is NotFound (2);
// other 4xx are InvalidInput. Thread-safety: one ApiClient per thread (each holds its own connection).
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
  // url: "http://host:port" (https:// with the policies issue). timeout_s bounds each request.
  static Result<std::unique_ptr<ApiClient>> Make(const std::string& url, double timeout_s = 30);
  ~ApiClient();

  Result<nlohmann::json> Get(const std::string& path);
  Result<nlohmann::json> Post(const std::string& path, const nlohmann::json& body);
  Result<nlohmann::json> Put(const std::string& path, const nlohmann::json& body);
  // A raw body (a package upload, a YAML spec) with its content type.
  Result<nlohmann::json> PostRaw(const std::string& path, const std::string& body, const std::string& content_type,
                                 const std::map<std::string, std::string>& headers = {});
  // A raw response body (a package download).
  Result<std::string> GetRaw(const std::string& path);
  const std::string& url() const { return url_; }

 private:
  ApiClient() = default;
  Result<nlohmann::json> Decode(const std::string& what, int status, const std::string& body);
  std::string url_;
  std::unique_ptr<httplib::Client> cli_;
};

// The server URL the CLI talks to: --server, else $ANNEAL_SERVER, else http://127.0.0.1:8470.
std::string DefaultServerUrl(const std::string& flag);

}  // namespace anneal
