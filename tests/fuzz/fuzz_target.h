// ANNEAL_FUZZ_TARGET(name): one fuzz harness over input anneal does not control (issue 37). The same
// source builds two ways:
//   - under the fuzz preset (clang, ANNEAL_LIBFUZZER): the body is LLVMFuzzerTestOneInput, one
//     libFuzzer executable per harness (fuzz_<name>), run by bench/fuzz.sh NAME SECONDS;
//   - everywhere else (gcc, the release and asan builds): the body is registered under its name in
//     one plain replay program (anneal_fuzz_replay, tests/fuzz/replay_main.cc), which the unit tier
//     runs over the harness's committed corpus (tests/fuzz/corpus/<name>/), so CI needs no clang.
// A harness returns 0 and must never crash, hang, leak or trip a sanitizer, whatever the bytes: a
// malformed input is an error Status. FUZZ_EXPECT(cond) states a property the harness checks beyond
// not crashing (a round trip, an error that names its field); it aborts with the condition when false.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace anneal::fuzz {

using Target = int (*)(const uint8_t* data, size_t size);
// Registers a harness for the replay program; returns true.
bool Register(const char* name, Target t);

inline std::string Text(const uint8_t* data, size_t size) { return std::string(reinterpret_cast<const char*>(data), size); }

[[noreturn]] inline void ExpectFailed(const char* file, int line, const char* cond) {
  std::fprintf(stderr, "fuzz property failed at %s:%d: %s\n", file, line, cond);
  std::abort();  // what libFuzzer reports as a crash, with the input saved
}

}  // namespace anneal::fuzz

#define FUZZ_EXPECT(cond) ((cond) ? static_cast<void>(0) : ::anneal::fuzz::ExpectFailed(__FILE__, __LINE__, #cond))

#ifdef ANNEAL_LIBFUZZER
#define ANNEAL_FUZZ_TARGET(name) extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
#else
#define ANNEAL_FUZZ_TARGET(name)                                                              \
  static int FuzzTarget_##name(const uint8_t* data, size_t size);                             \
  [[maybe_unused]] static const bool kRegistered_##name =                                     \
      ::anneal::fuzz::Register(#name, FuzzTarget_##name);                                     \
  static int FuzzTarget_##name(const uint8_t* data, size_t size)
#endif
