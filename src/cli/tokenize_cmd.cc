// anneal tokenize: prints the ids of a text (the tokenizer's command-line face; tests compare it with
// tiktoken). Default: the whole input is one text, ids on one line. --json-lines: every input line is
// a JSON string, and every output line holds that string's ids.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "core/env.h"
#include "core/progress.h"
#include "data/text_input.h"
#include "data/tokenizer.h"
#include "data/utf8.h"

namespace anneal::cli {

namespace {

struct TokenizeOptions {
  std::string tokenizer = "gpt2";
  std::string input = "-";
  bool json_lines = false;
  std::string invalid_utf8 = "reject";
  int threads = 1;
  bool count_only = false;
  bool stats = false;
};

// The input's bytes: a file is memory-mapped (no copy), standard input is read into `storage`.
struct Input {
  std::unique_ptr<MappedFile> map;
  std::string storage;
  std::string_view text;
};

Status ReadInput(const std::string& path, Input* in) {
  if (path != "-") {
    ANNEAL_ASSIGN_OR_RETURN(in->map, Env::Default().Map(path, Env::MapMode::kPopulate));
    in->text = std::string_view(in->map->data(), in->map->size());
    return Status::Ok();
  }
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), stdin)) > 0) in->storage.append(buf, n);
  in->text = in->storage;
  return Status::Ok();
}

void AppendIds(const std::vector<uint32_t>& ids, std::string* out) {
  char buf[16];
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out->push_back(' ');
    int n = std::snprintf(buf, sizeof(buf), "%u", ids[i]);
    out->append(buf, static_cast<size_t>(n));
  }
  out->push_back('\n');
}

Status RunTokenize(const TokenizeOptions& o) {
  const double t_start = MonotonicSeconds();
  ANNEAL_ASSIGN_OR_RETURN(auto tok, Tokenizer::Load(o.tokenizer));
  const double t_loaded = MonotonicSeconds();
  Input in;
  ANNEAL_RETURN_IF_ERROR(ReadInput(o.input, &in));
  std::string_view text = in.text;
  const bool replace = o.invalid_utf8 == "replace";
  std::string out;
  if (o.json_lines) {
    auto enc = tok->NewEncoder();
    std::vector<uint32_t> ids;
    size_t line_no = 0;
    for (size_t pos = 0; pos < text.size();) {
      size_t nl = text.find('\n', pos);
      if (nl == std::string_view::npos) nl = text.size();
      std::string_view line(text.data() + pos, nl - pos);
      pos = nl + 1;
      ++line_no;
      if (line.empty()) continue;
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_string()) {
        return InvalidInput((o.input == "-" ? std::string("standard input") : o.input) + " line " + std::to_string(line_no) +
                            ": --json-lines expects one JSON string per line");
      }
      std::string s = j.get<std::string>();
      ANNEAL_RETURN_IF_ERROR(CheckUtf8(o.input + " line " + std::to_string(line_no), &s, replace));
      ids.clear();
      enc->Encode(s, &ids);
      AppendIds(ids, &out);
    }
  } else {
    if (FindInvalidUtf8(text) != std::string_view::npos) {  // rare: copy only to report or repair
      in.storage.assign(text);
      ANNEAL_RETURN_IF_ERROR(CheckUtf8(o.input == "-" ? "standard input" : o.input, &in.storage, replace));
      text = in.storage;
    }
    std::vector<uint32_t> ids;
    const double t0 = MonotonicSeconds();
    ANNEAL_RETURN_IF_ERROR(EncodeParallel(*tok, text, o.threads, &ids));
    const double t1 = MonotonicSeconds();
    if (o.stats) {
      std::fprintf(stderr, "tokenize: bytes=%zu tokens=%zu threads=%d load_s=%.4f encode_s=%.4f encode_mbps=%.2f\n",
                   text.size(), ids.size(), o.threads, t_loaded - t_start, t1 - t0,
                   static_cast<double>(text.size()) / 1e6 / std::max(t1 - t0, 1e-9));
    }
    if (o.count_only) {
      out = std::to_string(ids.size()) + "\n";
    } else {
      AppendIds(ids, &out);
    }
  }
  if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0) {
    return IoError("writing the ids to standard output failed");
  }
  return Status::Ok();
}

}  // namespace

void AddTokenizeCommand(CLI::App& app, RunFn* run) {
  auto o = std::make_shared<TokenizeOptions>();
  CLI::App* c = app.add_subcommand("tokenize", "Print the token ids of a text, space-separated, on one line.");
  c->add_option("--tokenizer", o->tokenizer, "gpt2, cl100k_base, o200k_base or llama3 (embedded), or a folder with encoder.json (GPT-2's rules)")
      ->capture_default_str();
  c->add_option("input", o->input, "UTF-8 text file, or - for standard input")->capture_default_str();
  c->add_flag("--json-lines", o->json_lines, "Each input line is a JSON string; print one line of ids per line");
  c->add_option("--invalid-utf8", o->invalid_utf8,
                "reject: exit 2 naming the byte offset; replace: each invalid sequence becomes U+FFFD")
      ->check(CLI::IsMember({"reject", "replace"}))
      ->capture_default_str();
  c->add_option("--threads", o->threads, "Threads that encode (the text is cut between words or lines)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  c->add_flag("--count", o->count_only, "Print only the number of tokens");
  c->add_flag("--stats", o->stats, "Print vocabulary-load and encode times (and MB/s) to stderr");
  c->callback([run, o] { *run = [o] { return RunTokenize(*o); }; });
}

}  // namespace anneal::cli
