// anneal dataset: checks a prepared dataset (or a plain llm.c shard folder) the way a training run
// will read it — headers, sizes, checksums, vocabulary — and prints what it holds.
#include <cstdio>

#include "cli/commands.h"
#include "data/loader.h"
#include "data/tokenizer.h"

namespace anneal::cli {

namespace {

struct DatasetArgs {
  std::string dir;
  int seq_len = 1024;
  uint32_t vocab_size = 0;
  bool no_verify = false;
  int show = 0;
  uint64_t seed = 0;
};

Status RunDataset(const DatasetArgs& a) {
  ANNEAL_ASSIGN_OR_RETURN(DatasetInfo info, LoadDataset(Env::Default(), a.dir));
  std::printf("dataset %s: %s\n", a.dir.c_str(),
              info.has_manifest ? ("tokenizer " + info.tokenizer + ", vocabulary " + std::to_string(info.vocab_size) +
                                   ", inputs " + info.inputs_hash)
                                      .c_str()
                                : "plain llm.c folder (no dataset.json: checked by size only)");
  for (const char* split : {"train", "val"}) {
    size_t n = 0;
    for (const auto& s : info.shards) n += s.split == split;
    if (n == 0) {
      std::printf("  %-5s no shards\n", split);
      continue;
    }
    LoaderOptions o;
    o.dir = a.dir;
    o.split = split;
    o.seq_len = a.seq_len;
    o.vocab_size = a.vocab_size ? a.vocab_size : info.vocab_size;
    o.verify_checksums = !a.no_verify;
    o.seed = a.seed;
    ANNEAL_ASSIGN_OR_RETURN(auto loader, DataLoader::Open(Env::Default(), o));
    std::printf("  %-5s %zu shards, %llu tokens, %llu windows of T+1=%d tokens (%s)\n", split, n,
                static_cast<unsigned long long>(loader->num_tokens()),
                static_cast<unsigned long long>(loader->num_samples()), a.seq_len + 1,
                a.no_verify          ? "headers and sizes checked"
                : info.has_manifest ? "headers, sizes and checksums verified"
                                    : "headers, sizes and token ids checked");
    if (a.show > 0 && std::string(split) == "train") {
      std::vector<uint32_t> batch;
      loader->Next(&batch);
      batch.resize(std::min<size_t>(batch.size(), static_cast<size_t>(a.show)));
      std::string tok_name = info.tokenizer.empty() ? "gpt2" : info.tokenizer;
      ANNEAL_ASSIGN_OR_RETURN(auto tok, Tokenizer::Load(tok_name));
      std::printf("  first sample (seed %llu), %zu tokens: %s\n", static_cast<unsigned long long>(a.seed),
                  batch.size(), tok->Decode(batch).c_str());
    }
  }
  return Status::Ok();
}

}  // namespace

void AddDatasetCommand(CLI::App& app, RunFn* run) {
  auto a = std::make_shared<DatasetArgs>();
  CLI::App* c = app.add_subcommand(
      "dataset", "Check a prepared dataset or llm.c shard folder as training reads it, and summarize it.");
  c->add_option("dir", a->dir, "Dataset folder (anneal prep --output, or llm.c .bin shards)")->required();
  c->add_option("--seq-len", a->seq_len, "T: tokens per training window")->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  c->add_option("--vocab-size", a->vocab_size, "The model's vocabulary (default: the dataset's)");
  c->add_flag("--no-verify", a->no_verify, "Skip checksums (headers and sizes are always checked)");
  c->add_option("--show", a->show, "Decode and print this many tokens of the first training sample");
  c->add_option("--seed", a->seed, "Shuffle seed for --show")->capture_default_str();
  c->callback([run, a] { *run = [a] { return RunDataset(*a); }; });
}

}  // namespace anneal::cli
