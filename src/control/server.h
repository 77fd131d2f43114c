// ControlServer: `anneal server` — the job API (HTTP/JSON under /v1, docs/api/openapi.yaml), the job
// store (SQLite under --data-dir) and the scheduler that moves jobs through their statuses.
//
// Scheduling: jobs are placed strictly first come, first served: the oldest Pending job gets
// instances before any later one (a job that does not fit yet holds the queue). With the local
// backend the server obtains `instance_count` fresh agents per job and releases them when it ends;
// with the static backend it assigns agents that joined by themselves (`anneal agent --server URL`)
// and have a matching instance type and enough slots.
// A job's progress comes from its agents: heartbeats (liveness; the answer carries run / stop / exit),
// node reports (downloading, training, uploading, finished with an exit code), logs and metrics.
// Restarting the server loses nothing: jobs, instances, logs and metrics are in the store, agents
// keep running and re-send what was not acknowledged, and the scheduler picks every job up again
// (heartbeat deadlines restart from the server's start).
//
// Thread-safety: Start/Stop from one thread; handlers run on the HTTP server's threads, the
// scheduler on its own; shared state is the store (thread-safe) and a mutex-guarded map.
#pragma once

#include <memory>
#include <cstdint>
#include <string>
#include <vector>

#include "control/server_options.h"
#include "core/status.h"

namespace anneal {

class ControlServer {
 public:
  // Opens the store, binds the listener and starts serving and scheduling. A port in use, an
  // unwritable data dir: errors naming them (exit 2 / 1).
  static Result<std::unique_ptr<ControlServer>> Start(const ServerOptions& o);
  virtual ~ControlServer() = default;
  // "http://127.0.0.1:8470"
  virtual std::string url() const = 0;
  // Stops scheduling and serving (agents keep running; a restarted server picks them up).
  virtual void Stop() = 0;
  // Releases every instance and waits (up to timeout_s) for local agents to exit: for the embedded
  // server of `anneal submit --local`, which leaves nothing behind.
  virtual void Drain(double timeout_s) = 0;
};

}  // namespace anneal
