#include "control/webhooks.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>

#include <nlohmann/json.hpp>

#include "protocol/wire.h"
#include "core/crypto.h"

namespace anneal {

namespace {

std::string Hex(const std::string& raw) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(raw.size() * 2);
  for (unsigned char c : raw) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

// "https://host:8443/a/b?c" -> {"https://host:8443", "/a/b?c"}; false when it is not http(s).
bool SplitUrl(const std::string& url, std::string* base, std::string* path) {
  const bool http = url.rfind("http://", 0) == 0, https = url.rfind("https://", 0) == 0;
  if (!http && !https) return false;
  const size_t host_at = http ? 7 : 8;
  const size_t slash = url.find_first_of("/?#", host_at);
  *base = url.substr(0, slash);
  if (base->size() <= host_at) return false;  // no host
  *path = slash == std::string::npos ? std::string("/") : url.substr(slash);
  if (!path->empty() && path->front() != '/') path->insert(0, "/");
  const size_t hash = path->find('#');
  if (hash != std::string::npos) path->resize(hash);
  return true;
}

// What went wrong with a request that got no answer, in words.
std::string Describe(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection: return "cannot connect (refused, unreachable or unknown host)";
    case httplib::Error::ConnectionTimeout: return "connect timed out";
    case httplib::Error::Read: return "no answer (read failed or timed out)";
    case httplib::Error::Write: return "sending the request failed";
    case httplib::Error::SSLConnection: return "TLS handshake failed";
    case httplib::Error::SSLLoadingCerts: return "cannot load the system's CA certificates";
    case httplib::Error::SSLServerVerification: return "the server's TLS certificate does not verify";
    default: return httplib::to_string(e);
  }
}

void SetTimeouts(httplib::Client* c, double timeout_s) {
  const time_t sec = static_cast<time_t>(timeout_s);
  const time_t usec = static_cast<time_t>((timeout_s - static_cast<double>(sec)) * 1e6);
  c->set_connection_timeout(sec, usec);
  c->set_read_timeout(sec, usec);
  c->set_write_timeout(sec, usec);
}

}  // namespace

struct WebhookSender::Target {
  std::string url;   // as configured, for messages
  std::string path;  // sent in the request line
  std::unique_ptr<httplib::Client> client;
};

std::string WebhookBody(const EventRecord& e) {
  nlohmann::ordered_json j;
  j["id"] = std::to_string(e.id);
  j["type"] = "job.status";
  j["job"] = e.job_id;
  j["owner"] = e.owner;
  j["attempt"] = e.attempt;
  j["status"] = PrimaryStatus(e.phase);
  j["secondary_status"] = PhaseName(e.phase);
  j["message"] = e.message;
  j["at"] = e.at;
  // A message cut inside a UTF-8 sequence must not stop delivery: invalid bytes become U+FFFD.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string WebhookSignature(const std::string& secret, const std::string& timestamp, const std::string& body) {
  std::string signed_text;
  signed_text.reserve(timestamp.size() + 1 + body.size());
  signed_text.append(timestamp).append(".").append(body);
  std::string out("sha256=");
  out.append(Hex(HmacSha256(secret, signed_text)));
  return out;
}

Result<std::unique_ptr<WebhookSender>> WebhookSender::Start(JobStore* store, const WebhookOptions& o) {
  if (store == nullptr) return Internal("webhooks: no job store");
  if (o.urls.empty()) return InvalidInput("webhooks: no receiver URL given");
  if (o.max_tries < 1) return InvalidInput("webhooks: max_tries must be at least 1, got " + std::to_string(o.max_tries));
  if (!(o.timeout_s > 0)) return InvalidInput("webhooks: timeout_s must be positive");
  if (!(o.backoff_initial_s >= 0) || !(o.backoff_max_s >= 0)) return InvalidInput("webhooks: backoff must not be negative");
  if (!(o.poll_s > 0)) return InvalidInput("webhooks: poll_s must be positive");
  if (o.cursor_key.empty()) return InvalidInput("webhooks: cursor_key is empty");

  std::vector<std::unique_ptr<Target>> targets;
  for (const std::string& url : o.urls) {
    auto t = std::make_unique<Target>();
    t->url = url;
    std::string base;
    if (!SplitUrl(url, &base, &t->path)) {
      std::string m("webhook URL '");
      m.append(url).append("' must be http://HOST[:PORT][/PATH] or https://HOST[:PORT][/PATH]");
      return InvalidInput(m);
    }
    t->client = std::make_unique<httplib::Client>(base);
    if (!t->client->is_valid()) {
      std::string m("webhook URL '");
      m.append(url).append("': cannot make an HTTP client for '").append(base).append("'");
      return InvalidInput(m);
    }
    SetTimeouts(t->client.get(), o.timeout_s);
    t->client->set_keep_alive(false);
    t->client->set_tcp_nodelay(true);
    t->client->set_follow_location(false);  // a redirect is an answer that is not 2xx
    targets.push_back(std::move(t));
  }

  ANNEAL_ASSIGN_OR_RETURN(std::optional<std::string> stored, store->GetValue(o.cursor_key));
  int64_t cursor = 0;
  if (stored) {
    size_t used = 0;
    try {
      cursor = std::stoll(*stored, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != stored->size() || cursor < 0) {
      std::string m("webhooks: the stored cursor '");
      m.append(o.cursor_key).append("' is '").append(*stored).append("', not an event id; delete or fix it");
      return InvalidInput(m);
    }
  } else if (!o.from_start) {
    // First start: begin after the newest event now (history is not replayed), and pin it so a
    // restart before the first delivery does not skip what happened in between.
    for (;;) {
      ANNEAL_ASSIGN_OR_RETURN(std::vector<EventRecord> page, store->EventsAfter(cursor, 1000));
      if (page.empty()) break;
      cursor = page.back().id;
    }
    ANNEAL_RETURN_IF_ERROR(store->SetValue(o.cursor_key, std::to_string(cursor)));
  }

  std::unique_ptr<WebhookSender> s(new WebhookSender(store, o, cursor));
  s->targets_ = std::move(targets);
  s->thread_ = std::thread([p = s.get()] { p->Run(); });
  return s;
}

WebhookSender::WebhookSender(JobStore* store, WebhookOptions o, int64_t cursor)
    : store_(store), o_(std::move(o)), cursor_(cursor) {}

WebhookSender::~WebhookSender() { Stop(); }

void WebhookSender::Notify() {
  {
    std::lock_guard<std::mutex> l(mu_);
    notified_ = true;
  }
  cv_.notify_one();
}

void WebhookSender::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  // Aborts a request in flight (Client::stop is safe from another thread); the sender sees the
  // failure, finds stopping_ set and leaves without counting it.
  if (thread_.joinable()) {
    for (auto& t : targets_) t->client->stop();
    thread_.join();
  }
}

WebhookSender::Stats WebhookSender::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return stats_;
}

bool WebhookSender::SleepFor(double seconds) {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait_for(l, std::chrono::duration<double>(seconds), [this] { return stopping_; });
  return !stopping_;
}

void WebhookSender::Run() {
  for (;;) {
    // Deliver everything after the cursor, a page at a time.
    for (;;) {
      {
        std::lock_guard<std::mutex> l(mu_);
        if (stopping_) return;
        notified_ = false;
      }
      auto page = store_->EventsAfter(cursor_, 100);
      if (!page.ok()) {
        std::fprintf(stderr, "anneal webhooks: reading events after %lld: %s (retrying)\n",
                     static_cast<long long>(cursor_), page.status().ToString().c_str());
        break;
      }
      if (page->empty()) break;
      for (const EventRecord& e : *page) {
        const std::string body = WebhookBody(e);
        for (auto& t : targets_) {
          if (!DeliverTo(*t, e, body)) return;  // stopping: the event is sent again after a restart
        }
        cursor_ = e.id;
        Status st = store_->SetValue(o_.cursor_key, std::to_string(cursor_));
        if (!st.ok()) {
          // Delivery goes on; the next event's SetValue stores a later cursor. A restart before
          // then sends these events again (at least once).
          std::fprintf(stderr, "anneal webhooks: saving the cursor (event %lld): %s\n",
                       static_cast<long long>(cursor_), st.ToString().c_str());
        }
      }
    }
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, std::chrono::duration<double>(o_.poll_s), [this] { return stopping_ || notified_; });
    if (stopping_) return;
  }
}

bool WebhookSender::DeliverTo(Target& t, const EventRecord& e, const std::string& body) {
  const std::string id = std::to_string(e.id);
  double backoff = o_.backoff_initial_s;
  std::string last_error;
  for (int attempt = 1;; ++attempt) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stopping_) return false;
    }
    const std::string ts = std::to_string(static_cast<int64_t>(WallSeconds()));
    httplib::Headers h{{"X-Anneal-Event-Id", id}, {"X-Anneal-Timestamp", ts}, {"User-Agent", "anneal-webhooks"}};
    if (!o_.secret.empty()) h.emplace("X-Anneal-Signature", WebhookSignature(o_.secret, ts, body));
    auto r = t.client->Post(t.path, h, body, "application/json");
    const bool ok = r && r->status >= 200 && r->status < 300;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (ok) {
        ++stats_.delivered;
        return true;
      }
      if (stopping_) return false;  // aborted by Stop(), not the receiver's fault
      ++stats_.failed_tries;
    }
    if (r) {
      last_error = "HTTP ";
      last_error.append(std::to_string(r->status));
    } else {
      last_error = Describe(r.error());
    }
    if (attempt >= o_.max_tries) break;
    if (!SleepFor(backoff)) return false;
    backoff = std::min(backoff * 2, o_.backoff_max_s);
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    ++stats_.dropped;
  }
  std::fprintf(stderr, "anneal webhooks: dropped event %lld (job %s, %s) for %s after %d tries; last error: %s\n",
               static_cast<long long>(e.id), e.job_id.c_str(), PhaseName(e.phase), t.url.c_str(), o_.max_tries,
               last_error.c_str());
  return true;
}

}  // namespace anneal
