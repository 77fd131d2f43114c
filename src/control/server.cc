// `anneal server` wires its parts: the store, the backend, the scheduler loop (control/
// scheduler_loop.h), the agents' sessions, the job, user, agent and metrics routes, the webhook
// sender, the dashboard's files (/ui); and owns the HTTP listener (guarded: control/connection_guard.h),
// the request body limit and the API's latency statistics.
#include "control/server.h"

#include <fcntl.h>
#include <httplib.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <set>
#include <thread>

#include "control/agent_routes.h"
#include "control/auth.h"
#include "control/connection_guard.h"
#include "control/http_util.h"
#include "control/exec_routes.h"
#include "control/job_routes.h"
#include "control/metrics_routes.h"
#include "control/port_owner.h"
#include "control/server_backend.h"
#include "control/server_context.h"
#include "control/ui_routes.h"
#include "control/user_routes.h"
#include "control/webhooks.h"
#include "core/clock.h"
#include "core/env.h"
#include "protocol/api_client.h"

namespace anneal {

namespace {

using nlohmann::json;

thread_local double g_request_start = 0;  // when this thread's current request was routed

class Server : public ControlServer {
 public:
  explicit Server(const ServerOptions& o) : o_(o) {}
  ~Server() override {
    Stop();
    if (lock_fd_ >= 0) ::close(lock_fd_);  // the data folder's lock goes last
  }

  Status Init() {
    ANNEAL_RETURN_IF_ERROR(OpenStore());
    ANNEAL_RETURN_IF_ERROR(MakeHttp());
    ANNEAL_RETURN_IF_ERROR(MakeBackend());
    if (!o_.webhook_urls.empty()) {
      WebhookOptions wo;
      wo.urls = o_.webhook_urls;
      if (!o_.webhook_secret_file.empty()) {
        ANNEAL_ASSIGN_OR_RETURN(wo.secret, ReadSecretFile(o_.webhook_secret_file));
      }
      ANNEAL_ASSIGN_OR_RETURN(webhooks_, WebhookSender::Start(store_.get(), wo));
    }
    // Heartbeat deadlines restart now: agents get a full timeout to reach a restarted server.
    ctx_.start_wall = ctx_.clock->Wall();
    ANNEAL_RETURN_IF_ERROR(Listen());
    scheduler_ = std::make_unique<SchedulerLoop>(store_.get(), backend_.get(), SchedConfig(), ctx_.url, ctx_.start_wall,
                                                 o_.tick_s, SchedulerHooks(), *ctx_.clock);
    ctx_.scheduler = scheduler_.get();
    Routes();
    listener_ = std::thread([this] { http_->listen_after_bind(); });
    // cpp-httplib's stop() does nothing until the listener runs: a server stopped right after its start
    // (a CLI's read-only --local server) would otherwise leave it accepting, and Stop() waiting on it.
    for (int i = 0; i < 5000 && !http_->is_running(); ++i) Clock::Real().SleepFor(0.001);
    if (o_.schedule) scheduler_->Start();
    return Status::Ok();
  }

  std::string url() const override { return ctx_.url; }

  void Stop() override {
    if (stopped_.exchange(true)) return;
    agents_.Stop();
    if (scheduler_) scheduler_->Stop();
    if (http_) http_->stop();
    if (listener_.joinable()) listener_.join();
    if (guard_) guard_->Stop();  // after the listener: connections still served until then keep their deadlines
    if (webhooks_) webhooks_->Stop();
  }

  void Drain(double timeout_s) override;

 private:
  Status OpenStore() {
    Env& env = Env::Default();
    ANNEAL_RETURN_IF_ERROR(env.CreateDirs(o_.data_dir));
    // The store holds secrets and token hashes, the folder the token files: this OS user's only.
    if (::chmod(o_.data_dir.c_str(), 0700) != 0) return IoError("cannot make " + o_.data_dir + " private (chmod 700)");
    if (o_.schedule) ANNEAL_RETURN_IF_ERROR(LockDataDir());
    ANNEAL_RETURN_IF_ERROR(env.CreateDirs(JoinPath(o_.data_dir, "packages")));
    ANNEAL_ASSIGN_OR_RETURN(store_, JobStore::Open(JoinPath(o_.data_dir, "anneal.db")));
    ANNEAL_RETURN_IF_ERROR(BootstrapAuth(store_.get(), o_.data_dir, o_.join_token_file, ctx_.clock->Wall()));
    ctx_.o = o_;
    ctx_.store = store_.get();
    ctx_.agents = &agents_;
    if (!o_.execution_roles_file.empty()) {
      ANNEAL_ASSIGN_OR_RETURN(ctx_.roles, LoadExecutionRoles(o_.execution_roles_file));
    }
    return Status::Ok();
  }

  // One scheduling server per data folder: an flock on <data_dir>/server.lock, held for the server's
  // life (the kernel drops it however the process ends). Two schedulers on one store would both move
  // its jobs. A server that only serves the API (schedule=false: the CLI's read-only --local
  // commands) takes no lock and writes no server.json: it runs beside the folder's server.
  Status LockDataDir() {
    const std::string path = JoinPath(o_.data_dir, "server.lock");
    lock_fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock_fd_ < 0) return IoError("cannot open " + path + ": " + std::strerror(errno));
    if (::flock(lock_fd_, LOCK_EX | LOCK_NB) == 0) return Status::Ok();
    ::close(lock_fd_);
    lock_fd_ = -1;
    return InvalidInput(OtherServer() + " already serves the data folder " + o_.data_dir +
                        ": use it (--server URL), stop it first, or give this one another --data-dir");
  }

  // "another anneal server (pid 123, http://127.0.0.1:8470)", from that server's server.json.
  std::string OtherServer() const {
    std::string who = "another anneal server";
    auto text = Env::Default().ReadFile(JoinPath(o_.data_dir, "server.json"));
    const json other = text.ok() ? json::parse(*text, nullptr, false) : json();
    if (other.is_object()) {
      who += " (pid " + std::to_string(other.value("pid", 0)) + ", " + other.value("url", std::string("?")) + ")";
    }
    return who;
  }

  bool tls() const { return !o_.tls_cert.empty() || !o_.tls_key.empty(); }

  Status MakeHttp() {
    ConnectionGuard::Options go;
    go.header_timeout_s = o_.header_timeout_s;
    go.max_per_client = o_.max_connections_per_client;
    guard_ = std::make_unique<ConnectionGuard>(go);
    ctx_.guard = guard_.get();
    if (tls()) {
      if (o_.tls_cert.empty() || o_.tls_key.empty()) return InvalidInput("TLS needs both --tls-cert and --tls-key");
      http_ = std::make_unique<GuardedHttp<httplib::SSLServer>>(guard_.get(), o_.tls_cert.c_str(), o_.tls_key.c_str());
      if (!http_->is_valid()) {
        return InvalidInput("cannot load the TLS certificate " + o_.tls_cert + " or key " + o_.tls_key +
                            ": check they are PEM files that belong together");
      }
    } else {
      http_ = std::make_unique<GuardedHttp<httplib::Server>>(guard_.get());
    }
    // cpp-httplib's own cap, for every route: the largest body any route takes. The smaller limit of
    // every route but a package upload is RefuseBody's, before the body is read.
    http_->set_payload_max_length(static_cast<size_t>(std::max(o_.max_request_bytes, o_.max_package_bytes)));
    // Idle keep-alive connections are held this long (polled every 10 ms by cpp-httplib meanwhile:
    // anneal's own clients close theirs); Stop() waits for them. cpp-httplib also waits only this long
    // for a new connection's first request: at 1 s, a client that took longer from connect to send (a
    // starved thread on a loaded machine) was closed unanswered — a reset or broken pipe to it. 3 s:
    // that much slack, and a stop that waits at most 3 s for an idle browser or Prometheus connection.
    http_->set_keep_alive_timeout(3);
    // Small JSON answers: without TCP_NODELAY each waits for the peer's delayed ACK (40 ms).
    http_->set_tcp_nodelay(true);
    // A keep-alive connection holds a worker for its life: room for every agent and client at once.
    http_->new_task_queue = [] { return new httplib::ThreadPool(64); };
    return Status::Ok();
  }

  Status MakeBackend() {
    ANNEAL_ASSIGN_OR_RETURN(backend_, MakeServerBackend(o_));
    ctx_.backend = backend_.get();
    return Status::Ok();
  }

  // Binds (not yet serving) and writes <data_dir>/server.json.
  Status Listen() {
    // cpp-httplib listens with a backlog of 5 (compiled into Debian's library), small for bursts of
    // clients connecting at once (a dropped connection may be reset when its request arrives; one
    // of 20 concurrent submits was, once, under load, not reproduced since). The listening socket is
    // caught here and its backlog raised after the bind (a second listen() on Linux changes it).
    int listen_fd = -1;
    // cpp-httplib's default options add SO_REUSEPORT, with which a second server binds a busy address
    // too and the kernel splits the connections between them. SO_REUSEADDR alone still lets a
    // restarted server bind while the old one's connections linger in TIME_WAIT.
    http_->set_socket_options([&listen_fd](int sock) {
      int yes = 1;
      ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
      listen_fd = sock;
    });
    int port = o_.port;
    if (port == 0) {
      port = http_->bind_to_any_port(o_.host);
      if (port < 0) return InvalidInput("cannot listen on " + o_.host + ": no free port");
    } else if (!http_->bind_to_port(o_.host, port)) {
      const std::string owner = PortOwner(port);
      return InvalidInput("cannot listen on " + o_.host + ":" + std::to_string(port) +
                          (owner.empty() ? " (in use, or not an address of this machine)" : ": " + owner + " listens there") +
                          ": stop it or choose another --listen");
    }
    if (listen_fd >= 0 && ::listen(listen_fd, kListenBacklog) != 0) return IoError("cannot raise the listen backlog");
    ctx_.url = std::string(tls() ? "https://" : "http://") + o_.host + ":" + std::to_string(port);
    if (!o_.schedule) return Status::Ok();  // server.json names the folder's (scheduling) server
    return Env::Default().WriteFileAtomic(JoinPath(o_.data_dir, "server.json"),
                                          json({{"url", ctx_.url}, {"pid", ::getpid()}}).dump() + "\n");
  }

  void Routes() {
    // Each request's latency, by route (/metrics): a request is served on one thread from routing to
    // the logger, which runs once the answer is ready.
    ctx_.requests = &requests_;
    ctx_.latest = &latest_;
    ctx_.execs = &execs_;
    // Both run once the headers are parsed, before the body is read (cpp-httplib's Server::routing);
    // a request with `Expect: 100-continue` meets the second first, so a refused body is never sent.
    http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      g_request_start = MonotonicSeconds();
      ConnectionGuard::HeadersReceived();
      return RefuseBody(req, res) ? httplib::Server::HandlerResponse::Handled : httplib::Server::HandlerResponse::Unhandled;
    });
    http_->set_expect_100_continue_handler([this](const httplib::Request& req, httplib::Response& res) {
      g_request_start = MonotonicSeconds();
      ConnectionGuard::HeadersReceived();
      return RefuseBody(req, res) ? res.status : 100;
    });
    http_->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      requests_.Observe(req.method, req.path, res.status, MonotonicSeconds() - g_request_start);
      ConnectionGuard::Answered();
    });
    parts_.push_back(AddJobRoutes(*http_, ctx_));
    parts_.push_back(AddMetricsRoutes(*http_, ctx_));
    parts_.push_back(AddExecRoutes(*http_, ctx_));
    AddUserRoutes(*http_, store_.get(), *ctx_.clock, o_.user_token_ttl_s);
    AddUiRoutes(*http_);
    parts_.push_back(AddAgentRoutes(*http_, ctx_));
    http_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "internal error";
      try {
        if (ep) std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      ReplyError(res, 400, "bad request: " + what);
    });
    // An error no handler wrote (no route for the method and path, a request cpp-httplib could not
    // read) gets the API's JSON error body too, naming what was asked.
    http_->set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
      // cpp-httplib answers some requests before it has read them whole: a request line over its
      // limit (414) or one it cannot parse, a header line it cannot read (400) — the head's rest and
      // the body unread —, and a Range it cannot parse (416) or a multipart body without a boundary
      // (400) — the body unread. What is left would be read as the connection's next request (found
      // by schemathesis under load: a stop's body answered a later GET with 400), so the connection
      // ends after such an answer. cpp-httplib sets remote_addr only once the head was read whole; a
      // request whose body it read (a POST to no route: 404) keeps its connection.
      const bool head_unread = req.remote_addr.empty();
      const uint64_t declared = std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10);
      if (head_unread || req.has_header("Transfer-Encoding") || req.body.size() < declared) {
        ConnectionGuard::CloseAfterAnswer();
      }
      const std::string asked = req.method + " " + req.path.substr(0, 200);
      ReplyError(res, res.status,
                 res.status == 404 ? "no route for " + asked + ": the API's routes are listed in docs/api/openapi.yaml"
                                   : "HTTP " + std::to_string(res.status) + " for " + asked + " (the request could not be read)");
      return httplib::Server::HandlerResponse::Handled;
    }));
  }

  // Answers 413 (a Content-Length over --max-request-bytes) or 411 (a chunked body) before the body
  // is read, on every route but a package upload, which job_routes.cc streams to disk under its own
  // cap. The connection then ends: its unread body cannot be told from a next request.
  bool RefuseBody(const httplib::Request& req, httplib::Response& res) const {
    if (req.method == "POST" && req.path == "/v1/packages") return false;
    // cpp-httplib reads no body for GET, HEAD or OPTIONS: one sent anyway would be taken for the
    // connection's next request. The request is answered as if it had none; the connection then ends.
    const bool reads_body = req.method == "POST" || req.method == "PUT" || req.method == "PATCH" || req.method == "DELETE";
    if (!reads_body && (req.has_header("Transfer-Encoding") || std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10) != 0)) {
      ConnectionGuard::CloseAfterAnswer();
      return false;
    }
    const std::string limit = std::to_string(o_.max_request_bytes);
    if (req.has_header("Transfer-Encoding")) {
      ReplyError(res, 411, "a body of unknown length (Transfer-Encoding: " + req.get_header_value("Transfer-Encoding") +
                               ") is not accepted here: send a Content-Length (at most " + limit +
                               " bytes, --max-request-bytes)");
    } else {
      // As cpp-httplib reads it (strtoull); a length it cannot read is its own 400 later.
      const uint64_t n = std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10);
      if (n <= static_cast<uint64_t>(o_.max_request_bytes)) return false;
      ReplyError(res, 413, "the request body is " + std::to_string(n) + " bytes, more than this server's limit of " +
                               limit + " (--max-request-bytes)");
    }
    ConnectionGuard::CloseAfterAnswer();
    return true;
  }

  SchedulerConfig SchedConfig() const {
    SchedulerConfig c;
    c.quota = o_.quota;
    c.health = o_.health;
    c.backend_obtains = backend_->obtains();
    c.backend_capacity = backend_->capacity();
    c.backend_queues = backend_->queues();
    c.backend_name = backend_->name();
    c.heartbeat_s = o_.heartbeat_s;
    c.heartbeat_timeout_s = o_.heartbeat_timeout_s;
    c.joined_forget_s = o_.joined_forget_s;
    c.start_timeout_s = o_.start_timeout_s;
    c.instances_dir = WorkRoot(o_);
    return c;
  }

  SchedulerLoop::Hooks SchedulerHooks() {
    SchedulerLoop::Hooks h;
    h.busy = [this] { return agents_.Claims(); };
    h.wake_pool = [this](const std::vector<std::string>& ids) { agents_.Taken(ids); };
    h.after_pass = [this] {
      if (webhooks_) webhooks_->Notify();
    };
    return h;
  }

  static constexpr int kListenBacklog = 1024;  // connections the kernel queues before accept

  ServerOptions o_;
  ServerContext ctx_;
  AgentSessions agents_;
  RequestStats requests_;
  LatestPoints latest_;
  ExecSessions execs_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<InstanceProvider> backend_;
  std::unique_ptr<ConnectionGuard> guard_;  // outlives http_, whose worker threads use it
  std::unique_ptr<httplib::Server> http_;
  std::unique_ptr<SchedulerLoop> scheduler_;
  std::vector<std::unique_ptr<RoutePart>> parts_;
  std::thread listener_;
  int lock_fd_ = -1;  // <data_dir>/server.lock, flock'd (LockDataDir)
  std::atomic<bool> stopped_{false};
  std::unique_ptr<WebhookSender> webhooks_;  // null without --webhook
};

// Releases every instance (warm pools end) through the scheduler's actions, and waits for the
// obtained instances' agents to exit (the scheduler's passes forget each once it is gone).
void Server::Drain(double timeout_s) {
  Clock& clock = *ctx_.clock;
  const double deadline = clock.Monotonic() + timeout_s;
  Status st = scheduler_->Drain();
  if (!st.ok()) std::fprintf(stderr, "anneal server: releasing the instances: %s\n", st.ToString().c_str());
  while (clock.Monotonic() < deadline) {
    auto left = store_->Instances();
    if (!left.ok()) break;
    bool obtained = false;
    for (const InstanceRecord& r : *left) obtained |= r.backend != kJoinedBackend;
    if (!obtained) break;
    clock.SleepFor(0.05);
  }
}

}  // namespace

Result<std::unique_ptr<ControlServer>> ControlServer::Start(const ServerOptions& o) {
  if (o.data_dir.empty()) return InvalidInput("anneal server needs --data-dir DIR (where the job store lives)");
  auto s = std::make_unique<Server>(o);
  ANNEAL_RETURN_IF_ERROR(s->Init());
  return std::unique_ptr<ControlServer>(std::move(s));
}

}  // namespace anneal
