// The server's API as anyone on the network reaches it (issue 37): a real ControlServer (static
// backend, the scheduler off, so no job starts) on a loopback port, sent fuzzed requests through the
// real route table and HTTP parser. The input: byte 0 picks the method, byte 1 the credentials
// (the admin's token, none, a made-up one, the agents' join token), then the path and query up to the
// first newline (bytes the request line cannot hold are percent-encoded; a path not starting with '/'
// goes under /v1/), then the body (JSON). Properties: every request is answered; never with a 5xx
// but 503 (a server error is a bug: bad input is a 4xx naming the problem); an /v1 error is JSON
// {"error": {"message": ...}} with a message.
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "control/server.h"
#include "fuzz/fuzz_target.h"

namespace {

struct Server {
  std::string dir;
  std::unique_ptr<anneal::ControlServer> server;
  std::string admin, join;
  std::string host;
  int port = 0;

  Server() {
    char tmpl[] = "/tmp/anneal_fuzz_api.XXXXXX";
    dir = ::mkdtemp(tmpl);
    anneal::ServerOptions o;
    o.data_dir = dir;
    o.port = 0;
    o.backend = "static";
    o.schedule = false;
    o.max_connections_per_client = 1024;
    auto s = anneal::ControlServer::Start(o);
    if (!s.ok()) {
      std::fprintf(stderr, "api fuzz: the server did not start: %s\n", s.status().ToString().c_str());
      std::abort();
    }
    server = std::move(*s);
    admin = Read(dir + "/admin.token");
    join = Read(dir + "/join.token");
    const std::string url = server->url();  // http://127.0.0.1:PORT
    host = url.substr(7, url.rfind(':') - 7);
    port = std::stoi(url.substr(url.rfind(':') + 1));
  }

  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::string t;
    std::getline(in, t);
    return t;
  }
};

// Never destroyed: at exit its threads may still be logging the last answer, and no static they use
// may go before them (the server is left to the process's end, as `anneal server` is on SIGKILL).
Server& TheServer() {
  static Server* s = [] {
    auto* made = new Server;
    std::atexit([] {  // only its folder goes (the process ends with its threads)
      std::error_code ec;
      std::filesystem::remove_all(TheServer().dir, ec);
    });
    return made;
  }();
  return *s;
}

std::string RequestPath(const std::string& raw) {
  static const char* kHex = "0123456789ABCDEF";
  std::string p = raw.empty() || raw[0] != '/' ? "/v1/" : "";
  for (unsigned char c : raw) {
    if (c > 0x20 && c < 0x7F && c != '#') {
      p += static_cast<char>(c);
    } else {
      p += '%';
      p += kHex[c >> 4];
      p += kHex[c & 15];
    }
  }
  return p;
}

}  // namespace

ANNEAL_FUZZ_TARGET(api) {
  if (size < 2) return 0;
  Server& s = TheServer();
  static const char* kMethods[] = {"GET", "POST", "PUT", "DELETE", "PATCH"};
  const std::string rest = anneal::fuzz::Text(data + 2, size - 2);
  const size_t nl = rest.find('\n');
  httplib::Request req;
  req.method = kMethods[data[0] % 5];
  req.path = RequestPath(rest.substr(0, nl));
  req.body = nl == std::string::npos ? "" : rest.substr(nl + 1);
  req.set_header("Content-Type", "application/json");
  switch (data[1] % 4) {
    case 0: req.set_header("Authorization", "Bearer " + s.admin); break;
    case 1: break;
    case 2: req.set_header("Authorization", "Bearer ann_0123456789abcdef"); break;
    default: req.set_header("Authorization", "Bearer " + s.join); break;
  }
  httplib::Client c(s.host, s.port);
  c.set_read_timeout(10, 0);
  c.set_url_encode(false);  // the path is sent as built above
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = c.send(req, res, err);
  if (!sent) std::fprintf(stderr, "api fuzz: %s %s got no answer (%s)\n", req.method.c_str(), req.path.c_str(),
                          httplib::to_string(err).c_str());
  FUZZ_EXPECT(sent);
  if (res.status >= 500) std::fprintf(stderr, "api fuzz: %s %s -> %d %s\n", req.method.c_str(), req.path.c_str(),
                                       res.status, res.body.substr(0, 300).c_str());
  FUZZ_EXPECT(res.status < 500 || res.status == 503);
  if (res.status >= 400 && req.path.rfind("/v1/", 0) == 0) {
    const auto j = nlohmann::json::parse(res.body, nullptr, false);
    const bool named = j.is_object() && j.contains("error") && j["error"].is_object() &&
                       j["error"].contains("message") && j["error"]["message"].is_string() &&
                       !j["error"]["message"].get<std::string>().empty();
    if (!named) std::fprintf(stderr, "api fuzz: %s %s -> %d with the body %s\n", req.method.c_str(),
                             req.path.c_str(), res.status, res.body.substr(0, 300).c_str());
    FUZZ_EXPECT(named);
  }
  return 0;
}
