// WebhookSender: delivers the job store's status changes (JobStore::EventsAfter) to HTTP receivers
// as signed JSON POSTs (docs/events.md has the body, the headers and how a receiver verifies them).
//
// One background thread walks the events in id order. Each event is POSTed to every URL in turn;
// a 2xx answer delivers it, anything else (refused, timeout, 3xx/4xx/5xx) is retried after a backoff
// (backoff_initial_s, doubling, capped at backoff_max_s) up to max_tries per URL, after which the
// event is dropped for that URL with a line on stderr naming the URL, the event and the last error,
// so a dead receiver delays delivery but never stalls it. When an event is done for every URL, the
// cursor (the last event id done, a store value under cursor_key) is advanced.
//
// Guarantees: every event is delivered at least once to each URL that answers 2xx within max_tries;
// per URL, events arrive in id order (one event at a time, URLs in turn). A restarted sender resumes
// after the stored cursor: an event whose delivery was cut short by Stop() or a crash is sent again
// to every URL, so receivers deduplicate by X-Anneal-Event-Id. The first start on a store without
// a cursor begins after the newest event then present (history is not replayed) unless from_start.
// `attempt` and `owner` are the job's at sending time (the store keeps them per job, not per event).
// URLs: http:// and https:// (cpp-httplib is built with OpenSSL; the server certificate is verified
// against the system's CA store). A URL's path is kept (http://host:9000/hooks/anneal).
//
// Thread-safety: Notify() and stats() may be called from any thread; Start/Stop from one owner.
// Stop() wakes a backoff at once and aborts a request in flight (bounded by timeout_s otherwise);
// the destructor calls it. Failure: a bad URL is InvalidInput at Start; store errors while running
// are printed to stderr and retried on the next wake-up (the cursor never moves past an event that
// was not done).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "control/job_store.h"
#include "core/status.h"

namespace httplib {
class Client;
}

namespace anneal {

struct WebhookOptions {
  std::vector<std::string> urls;  // http(s)://host[:port][/path]
  std::string secret;             // "" = no X-Anneal-Signature header
  double timeout_s = 5;           // connect, read and write timeout of each request
  int max_tries = 8;              // per event and URL; then the event is dropped for that URL
  double backoff_initial_s = 0.5;
  double backoff_max_s = 30;
  std::string cursor_key = "webhooks.cursor";
  bool from_start = false;  // no stored cursor: deliver every event from the first (else from now)
  double poll_s = 2;        // also look for new events this often without Notify()
};

class WebhookSender {
 public:
  struct Stats {
    int64_t delivered = 0;     // (event, URL) pairs answered 2xx
    int64_t failed_tries = 0;  // tries that failed (each retry counts)
    int64_t dropped = 0;       // (event, URL) pairs given up after max_tries
  };

  // Checks the options, reads (or on first start sets) the cursor and starts the thread.
  static Result<std::unique_ptr<WebhookSender>> Start(JobStore* store, const WebhookOptions& o);
  ~WebhookSender();
  WebhookSender(const WebhookSender&) = delete;
  WebhookSender& operator=(const WebhookSender&) = delete;

  // New events may exist: look now (cheap; many calls while busy collapse into one look).
  void Notify();
  // Stops the thread and joins it; idempotent.
  void Stop();
  Stats stats() const;

 private:
  struct Target;
  WebhookSender(JobStore* store, WebhookOptions o, int64_t cursor);
  void Run();
  // Posts one event to one target with retries; false when stopped before it was done.
  bool DeliverTo(Target& t, const EventRecord& e, const std::string& body);
  // Waits up to seconds or until Stop(); false when stopping.
  bool SleepFor(double seconds);

  JobStore* store_;
  WebhookOptions o_;
  int64_t cursor_;
  std::vector<std::unique_ptr<Target>> targets_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool notified_ = false;
  Stats stats_;
  std::thread thread_;
};

// The body POSTed for an event (docs/events.md), exposed for tests and docs.
std::string WebhookBody(const EventRecord& e);
// "sha256=<lower-case hex HMAC-SHA256(secret, timestamp + "." + body)>"
std::string WebhookSignature(const std::string& secret, const std::string& timestamp, const std::string& body);

}  // namespace anneal
