// anneal_fuzz_replay: every fuzz harness (tests/fuzz/*_fuzz.cc) built into one plain program, for
// the builds without libFuzzer (tests/fuzz/fuzz_target.h). It feeds each file of the folders given
// to the harness named, one call per file, as libFuzzer would replay them; a crash or a sanitizer
// report ends it (the unit tier's fuzz.<name> tests fail), with the file's name printed first.
//
// usage: anneal_fuzz_replay NAME DIR|FILE...   (exit 0: every input ran; 2: bad usage)
//        anneal_fuzz_replay --list             (the harnesses' names)
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz/fuzz_target.h"

namespace anneal::fuzz {
namespace {

std::map<std::string, Target>& Targets() {
  static std::map<std::string, Target> t;
  return t;
}

std::vector<std::string> Inputs(const std::vector<std::string>& args) {
  std::vector<std::string> files;
  for (const std::string& a : args) {
    if (!std::filesystem::is_directory(a)) {
      files.push_back(a);
      continue;
    }
    for (const auto& e : std::filesystem::directory_iterator(a)) {
      if (e.is_regular_file()) files.push_back(e.path().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

bool Register(const char* name, Target t) {
  Targets()[name] = t;
  return true;
}

}  // namespace anneal::fuzz

int main(int argc, char** argv) {
  using anneal::fuzz::Targets;
  if (argc == 2 && std::string(argv[1]) == "--list") {
    for (const auto& [name, t] : Targets()) std::printf("%s\n", name.c_str());
    return 0;
  }
  if (argc < 3) {
    std::fprintf(stderr, "usage: anneal_fuzz_replay NAME DIR|FILE... | --list\n");
    return 2;
  }
  const auto it = Targets().find(argv[1]);
  if (it == Targets().end()) {
    std::fprintf(stderr, "anneal_fuzz_replay: no harness named '%s' (--list names them)\n", argv[1]);
    return 2;
  }
  const auto files = anneal::fuzz::Inputs(std::vector<std::string>(argv + 2, argv + argc));
  if (files.empty()) {
    std::fprintf(stderr, "anneal_fuzz_replay: no input files under the paths given: a corpus is never empty\n");
    return 2;
  }
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string bytes = ss.str();
    std::fprintf(stderr, "%s\n", f.c_str());  // before the call: a crash's last line names its input
    it->second(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("%s: %zu inputs replayed, none crashed\n", argv[1], files.size());
  return 0;
}
