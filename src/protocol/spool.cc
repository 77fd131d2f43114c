#include "protocol/spool.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/env.h"
#include "protocol/wire.h"

namespace anneal {

SpoolWriter::SpoolWriter(const std::string& path, std::string job) : path_(path), job_(std::move(job)) {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
}

SpoolWriter::~SpoolWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void SpoolWriter::Write(const std::string& text) {
  if (fd_ < 0) return;
  // One write per record: O_APPEND keeps records whole even if two threads wrote at once, and a
  // process killed between two writes leaves whole records only (its last may be cut by a full disk).
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

void SpoolWriter::Add(const LogLine& x) {
  if (fd_ >= 0) Write(nlohmann::json{{"job", job_}, {"line", ToJson(x)}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

void SpoolWriter::Add(const MetricPoint& p) {
  if (fd_ >= 0) Write(nlohmann::json{{"job", job_}, {"point", ToJson(p)}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

void SpoolWriter::Remove() {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  ::unlink(path_.c_str());
}

std::string SpoolPath(const std::string& work_dir, const std::string& job, int attempt, int node) {
  return JoinPath(JoinPath(work_dir, "spool"), job + "." + std::to_string(attempt) + "." + std::to_string(node) + ".jsonl");
}

std::map<std::string, SpoolRecords> ReadSpool(const std::string& work_dir, int* bad) {
  std::map<std::string, SpoolRecords> out;
  int skipped = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(JoinPath(work_dir, "spool"), ec)) {
    if (e.path().extension() != ".jsonl") continue;
    std::ifstream in(e.path());
    std::string text;
    while (std::getline(in, text)) {
      const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
      if (!j.is_object() || !j.contains("job") || !j["job"].is_string()) {
        ++skipped;
        continue;
      }
      SpoolRecords& r = out[j["job"].get<std::string>()];
      if (j.contains("line")) {
        Result<LogLine> x = LogLineFromJson(j["line"]);
        x.ok() ? r.lines.push_back(std::move(*x)) : void(++skipped);
      } else if (j.contains("point")) {
        Result<MetricPoint> p = MetricPointFromJson(j["point"]);
        p.ok() ? r.points.push_back(std::move(*p)) : void(++skipped);
      } else {
        ++skipped;
      }
    }
  }
  if (bad) *bad = skipped;
  return out;
}

}  // namespace anneal
