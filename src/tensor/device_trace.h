// The step profiler's device side (train.profile_steps on a GPU). On a device the host's spans
// (core/trace.h) time kernel launches, not kernels. A device_trace::Span is a host span that, while a
// session is open on a backend with TimingMarks, also marks the stream where it starts and ends;
// Flush() waits for the stream and emits each such span again on the track named at Begin, with
// the device's times placed on the trace's clock by a reference mark taken when the session began
// (after the stream went idle, so the mark's device time is the host's then).
//
// One session per process, opened and flushed by the trainer's thread (train/profiler.h: once per
// traced step); Spans on other threads or on other streams than the session's are host spans only.
// Off (no recording, or no marks), a Span costs what a core/trace.h span costs.
#pragma once

#include <string>

#include "core/trace.h"
#include "tensor/backend.h"

namespace anneal::device_trace {

// Opens a session on `marks` (null: none) for spans on stream s, emitted on track `track`.
void Begin(TimingMarks* marks, const Stream& s, const std::string& track);
// Waits for the stream, emits the session's spans, releases their marks and closes the session.
void Flush();
// Device spans waiting for Flush (tests).
size_t Pending();

class Span {
 public:
  Span(TimingMarks* marks, const Stream& s, const char* cat, const char* prefix, int index);
  Span(TimingMarks* marks, const Stream& s, const char* cat, const char* name);
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  void Open(TimingMarks* marks, const Stream& s);
  trace::Span host_;
  const char* cat_;
  std::string name_;
  void* start_ = nullptr;
  TimingMarks* marks_ = nullptr;
  Stream stream_;
};

}  // namespace anneal::device_trace
