// ExecSessions: the server's side of `anneal exec` (docs/exec.md), in memory. A user's request
// becomes a session for one instance of a running job; that instance's agent takes it with its next
// heartbeat, runs the command in the job's working directory and environment, and streams its
// output and exit code back; the user's client reads the output and sends its standard input.
// Bytes travel as base64 in JSON. A session is forgotten 10 minutes after it ended. Thread-safe; the
// waits are bounded long polls.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace anneal {

class ExecSessions {
 public:
  struct Request {
    std::string job, instance, user;
    int node = 0;
    std::vector<std::string> argv;
    bool input = false, tty = false;
  };
  std::string Create(const Request& r, double now);
  std::optional<Request> Find(const std::string& id) const;
  // The sessions waiting for `instance` ([{id, job, argv, stdin, tty}]); handed out once.
  nlohmann::json TakeFor(const std::string& instance);

  // The agent's side.
  void AddOutput(const std::string& id, int stream, const std::string& bytes);
  void Finish(const std::string& id, int exit_code, const std::string& message, double now);
  // {"chunks": [{"seq", "data"}], "eof"}: input after `after`, waiting up to wait_s for some.
  nlohmann::json Input(const std::string& id, int64_t after, double wait_s);

  // The user's side.
  void AddInput(const std::string& id, const std::string& bytes, bool eof);
  // {"chunks": [{"seq", "stream", "data"}], "done", "exit_code", "message"}: output after `after`,
  // waiting up to wait_s for some or for the end.
  nlohmann::json Output(const std::string& id, int64_t after, double wait_s);

 private:
  struct Chunk {
    int64_t seq;
    int stream;  // 1 stdout, 2 stderr; input: 0
    std::string bytes;
  };
  struct Session {
    Request r;
    bool taken = false, done = false, input_eof = false;
    int exit_code = -1;
    std::string message;
    double ended_at = 0;
    std::vector<Chunk> out, in;
  };
  Session* Get(const std::string& id);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Session> sessions_;
};

}  // namespace anneal
