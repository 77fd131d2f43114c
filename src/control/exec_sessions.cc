#include "control/exec_sessions.h"

#include <chrono>

#include "core/crypto.h"

namespace anneal {

using nlohmann::json;

std::string ExecSessions::Create(const Request& r, double now) {
  std::lock_guard<std::mutex> l(mu_);
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    it = it->second.done && now - it->second.ended_at > 600 ? sessions_.erase(it) : std::next(it);
  }
  const std::string id = "exec-" + RandomHex(8);
  sessions_[id].r = r;
  return id;
}

ExecSessions::Session* ExecSessions::Get(const std::string& id) {
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : &it->second;
}

std::optional<ExecSessions::Request> ExecSessions::Find(const std::string& id) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return std::nullopt;
  return it->second.r;
}

json ExecSessions::TakeFor(const std::string& instance) {
  std::lock_guard<std::mutex> l(mu_);
  json out = json::array();
  for (auto& [id, s] : sessions_) {
    if (s.taken || s.done || s.r.instance != instance) continue;
    s.taken = true;
    out.push_back({{"id", id}, {"job", s.r.job}, {"argv", s.r.argv}, {"stdin", s.r.input}, {"tty", s.r.tty}});
  }
  return out;
}

void ExecSessions::AddOutput(const std::string& id, int stream, const std::string& bytes) {
  {
    std::lock_guard<std::mutex> l(mu_);
    Session* s = Get(id);
    if (!s || s->done || bytes.empty()) return;
    s->out.push_back({static_cast<int64_t>(s->out.size()) + 1, stream, bytes});
  }
  cv_.notify_all();
}

void ExecSessions::Finish(const std::string& id, int exit_code, const std::string& message, double now) {
  {
    std::lock_guard<std::mutex> l(mu_);
    Session* s = Get(id);
    if (!s || s->done) return;
    s->done = true;
    s->exit_code = exit_code;
    s->message = message;
    s->ended_at = now;
  }
  cv_.notify_all();
}

void ExecSessions::AddInput(const std::string& id, const std::string& bytes, bool eof) {
  {
    std::lock_guard<std::mutex> l(mu_);
    Session* s = Get(id);
    if (!s || s->done) return;
    if (!bytes.empty()) s->in.push_back({static_cast<int64_t>(s->in.size()) + 1, 0, bytes});
    s->input_eof = s->input_eof || eof;
  }
  cv_.notify_all();
}

json ExecSessions::Input(const std::string& id, int64_t after, double wait_s) {
  std::unique_lock<std::mutex> l(mu_);
  auto ready = [&] {
    Session* s = Get(id);
    return !s || s->done || s->input_eof || static_cast<int64_t>(s->in.size()) > after;
  };
  cv_.wait_for(l, std::chrono::duration<double>(wait_s), ready);
  Session* s = Get(id);
  if (!s) return {{"chunks", json::array()}, {"eof", true}};
  json chunks = json::array();
  for (const Chunk& c : s->in) {
    if (c.seq > after) chunks.push_back({{"seq", c.seq}, {"data", Base64Encode(c.bytes)}});
  }
  return {{"chunks", chunks}, {"eof", s->input_eof || s->done}};
}

json ExecSessions::Output(const std::string& id, int64_t after, double wait_s) {
  std::unique_lock<std::mutex> l(mu_);
  auto ready = [&] {
    Session* s = Get(id);
    return !s || s->done || static_cast<int64_t>(s->out.size()) > after;
  };
  cv_.wait_for(l, std::chrono::duration<double>(wait_s), ready);
  Session* s = Get(id);
  if (!s) return {{"chunks", json::array()}, {"done", true}, {"exit_code", 255}, {"message", "no such session"}};
  json chunks = json::array();
  for (const Chunk& c : s->out) {
    if (c.seq > after) chunks.push_back({{"seq", c.seq}, {"stream", c.stream}, {"data", Base64Encode(c.bytes)}});
  }
  // Every chunk is handed out in this answer, so done is final.
  return {{"chunks", chunks}, {"done", s->done}, {"exit_code", s->exit_code}, {"message", s->message}};
}

}  // namespace anneal
