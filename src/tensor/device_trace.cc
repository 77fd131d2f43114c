#include "tensor/device_trace.h"

#include <mutex>
#include <vector>

namespace anneal::device_trace {
namespace {

struct PendingSpan {
  const char* cat;
  std::string name;
  void* start;
  void* end;
};

struct Session {
  std::mutex mu;
  TimingMarks* marks = nullptr;  // null: no session
  Stream stream;
  int track = -1;
  void* ref = nullptr;
  double ref_us = 0;
  std::vector<PendingSpan> pending;
};

Session& S() {
  static Session* s = new Session;
  return *s;
}

}  // namespace

void Begin(TimingMarks* marks, const Stream& s, const std::string& track) {
  Session& z = S();
  std::lock_guard<std::mutex> l(z.mu);
  if (!marks || !trace::Enabled()) return;
  z.marks = marks;
  z.stream = s;
  z.track = trace::Track(track);
  marks->Wait(s);  // idle: the reference mark's device time is the host's now
  z.ref = marks->Mark(s);
  z.ref_us = trace::NowUs();
  z.pending.clear();
}

void Flush() {
  Session& z = S();
  std::lock_guard<std::mutex> l(z.mu);
  if (!z.marks) return;
  z.marks->Wait(z.stream);
  for (const PendingSpan& p : z.pending) {
    const double ts = z.ref_us + 1e3 * z.marks->ElapsedMs(z.ref, p.start);
    trace::Complete(z.track, p.cat, p.name, ts, 1e3 * z.marks->ElapsedMs(p.start, p.end), {}, "device");
  }
  z.pending.clear();
  z.marks->Release();
  z.marks = nullptr;
}

size_t Pending() {
  Session& z = S();
  std::lock_guard<std::mutex> l(z.mu);
  return z.pending.size();
}

Span::Span(TimingMarks* marks, const Stream& s, const char* cat, const char* prefix, int index)
    : host_(cat, prefix, index), cat_(cat) {
  if (marks && trace::Enabled()) {
    name_ = std::string(prefix) + std::to_string(index);
    Open(marks, s);
  }
}

Span::Span(TimingMarks* marks, const Stream& s, const char* cat, const char* name) : host_(cat, name), cat_(cat) {
  if (marks && trace::Enabled()) {
    name_ = name;
    Open(marks, s);
  }
}

void Span::Open(TimingMarks* marks, const Stream& s) {
  Session& z = S();
  std::lock_guard<std::mutex> l(z.mu);
  if (z.marks != marks || z.stream.handle != s.handle) return;  // not the session's stream
  marks_ = marks;
  stream_ = s;
  start_ = marks->Mark(s);
}

Span::~Span() {
  if (!marks_) return;
  Session& z = S();
  std::lock_guard<std::mutex> l(z.mu);
  if (z.marks != marks_) return;  // the session was flushed meanwhile: its marks are gone
  z.pending.push_back({cat_, std::move(name_), start_, marks_->Mark(stream_)});
}

}  // namespace anneal::device_trace
