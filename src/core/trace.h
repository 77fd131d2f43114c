// The step profiler's recorder (train.profile_steps): spans, counters and track names of one process,
// written as a Chrome Trace Event Format file (what PyTorch's profiler writes; Perfetto and
// chrome://tracing open it). docs/formats/trace.md is the grammar of what is written.
//
// One recorder per process (the profiled window is a property of the run, like PyTorch's profiler).
// Off, a Span costs one relaxed atomic load. On, every call is thread-safe (one mutex; the window is a
// few steps, a few hundred spans each). Times are wall-clock microseconds (the monotonic clock from a
// wall-clock origin taken at Start), so ranks of several hosts line up as far as their clocks agree.
//
// Tracks: a span goes on the calling thread's track (its tid) — RAII spans nest by construction — or
// on a named virtual track (`Track("comm dp-0-1")`), whose user must keep its spans from overlapping
// (a communicator runs one operation at a time).
//
// Categories the summary (`anneal profile`, train/trace_summary.h) knows: step (the root of a step),
// data, forward, backward, optimizer, comm, pipeline, checkpoint; any other is counted as other.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace anneal::trace {

// Whether recording is on.
bool Enabled();
// Starts recording (dropping anything recorded before); Stop ends it and keeps what was recorded.
void Start();
void Stop();
// Drops everything recorded (tests).
void Clear();

// Microseconds on the trace's clock.
double NowUs();

// A virtual track's id (stable per name, distinct from every thread id), named in the file.
int Track(const std::string& name);
// Names the calling thread's track ("main", "checkpoint writer").
void NameThisThread(const std::string& name);

// Numeric arguments of an event ({"bytes", 4096}); `detail` adds one string argument when not empty.
using Args = std::vector<std::pair<std::string, double>>;

// A complete event ("X") on a track (-1: the calling thread's).
void Complete(int track, const char* cat, std::string name, double start_us, double dur_us, Args args = {},
              std::string detail = "");
// A counter sample ("C"): one series per value.
void Counter(const std::string& name, const Args& values);

// A span [construction, destruction) on the calling thread. cat must be a string literal.
class Span {
 public:
  Span(const char* cat, const char* name) : cat_(cat), name_(name) {
    if (Enabled()) t0_ = NowUs();
  }
  Span(const char* cat, std::string name, Args args = {}) : cat_(cat), name_(nullptr) {
    if (Enabled()) {
      t0_ = NowUs();
      owned_ = std::move(name);
      args_ = std::move(args);
    }
  }
  // Named prefix + index ("h.3"), the name made only when recording.
  Span(const char* cat, const char* prefix, int index) : cat_(cat), name_(nullptr) {
    if (Enabled()) {
      t0_ = NowUs();
      owned_ = std::string(prefix) + std::to_string(index);
    }
  }
  ~Span() {
    if (t0_ >= 0) Complete(-1, cat_, name_ ? std::string(name_) : std::move(owned_), t0_, NowUs() - t0_, std::move(args_));
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  const char* cat_;
  const char* name_;
  std::string owned_;
  Args args_;
  double t0_ = -1;
};

// What a trace file says of its process.
struct ProcessInfo {
  int pid = 0;            // the global rank
  std::string name;       // "rank 3"
  std::vector<std::pair<std::string, std::string>> labels;  // shown as the process's labels and kept in otherData
};

// The recorded events as a Trace Event Format JSON object ({"traceEvents": [...], ...}).
std::string ToJson(const ProcessInfo& p);
// How many events are recorded (tests, the trainer's log line).
size_t EventCount();

}  // namespace anneal::trace
