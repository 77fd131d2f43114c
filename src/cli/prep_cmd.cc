// anneal prep: tokenizes text or JSON Lines into llm.c token shards plus dataset.json (data/prep.h).
#include <cstdio>
#include <thread>

#include "cli/commands.h"
#include "data/prep.h"

namespace anneal::cli {

namespace {

struct PrepArgs {
  PrepOptions opt;
  double unit_mb = 64;
  std::string invalid_utf8 = "reject";
};

Status RunPrepCommand(PrepArgs& a) {
  a.opt.unit_bytes = static_cast<uint64_t>(a.unit_mb * 1024 * 1024);
  a.opt.replace_invalid_utf8 = a.invalid_utf8 == "replace";
  ANNEAL_ASSIGN_OR_RETURN(PrepReport r, RunPrep(Env::Default(), a.opt));
  std::printf("prep: %zu units (%zu done now, %zu already done)", r.units_total, r.units_done, r.units_skipped);
  if (r.finalized) {
    std::printf("; dataset %s/dataset.json: %llu docs, %llu tokens", a.opt.output.c_str(),
                static_cast<unsigned long long>(r.docs), static_cast<unsigned long long>(r.tokens));
  }
  if (r.units_done > 0) {
    std::printf("; %.1f MB in %.2f s (%.1f MB/s)", static_cast<double>(r.bytes) / 1e6, r.seconds,
                static_cast<double>(r.bytes) / 1e6 / std::max(r.seconds, 1e-9));
  }
  std::printf("\n");
  if (!r.orphans.empty()) {
    std::string names;
    for (size_t i = 0; i < r.orphans.size() && i < 10; ++i) names += (i ? ", " : "") + r.orphans[i];
    if (r.orphans.size() > 10) names += " and " + std::to_string(r.orphans.size() - 10) + " more";
    std::fflush(stdout);
    std::fprintf(stderr,
                 "prep: warning: %s holds %zu shard file(s) that this prep's dataset.json does not list, left by an "
                 "earlier prep of other inputs or another --unit-mb: %s. Training reads only the listed shards, but "
                 "a data.mode=file channel copies every file: remove them, or prep into an empty folder.\n",
                 a.opt.output.c_str(), r.orphans.size(), names.c_str());
  }
  return Status::Ok();
}

}  // namespace

void AddPrepCommand(CLI::App& app, RunFn* run) {
  auto a = std::make_shared<PrepArgs>();
  a->opt.workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  CLI::App* c = app.add_subcommand(
      "prep",
      "Tokenize text or JSON Lines (optionally .gz; files or folders) into llm.c token shards and "
      "dataset.json. Shared-nothing: the same shards for any --workers; a re-run finishes only what is "
      "missing.");
  c->add_option("--input", a->opt.inputs, "Input files or folders (*.jsonl[.gz] is JSON Lines with a \"text\" "
                "field per line; anything else is plain text, one document per file)")
      ->required()
      ->expected(1, -1);
  c->add_option("--output", a->opt.output, "Output folder for the shards and dataset.json")->required();
  c->add_option("--tokenizer", a->opt.tokenizer, "gpt2, cl100k_base, o200k_base or llama3 (embedded), or a folder with encoder.json (GPT-2's rules)")
      ->capture_default_str();
  c->add_option("--workers", a->opt.workers, "Worker threads")->check(CLI::Range(1, 1024))->capture_default_str();
  c->add_option("--val-fraction", a->opt.val_fraction, "Fraction of documents (by hash) for the val split")
      ->check(CLI::Range(0.0, 0.999))
      ->capture_default_str();
  c->add_option("--unit-mb", a->unit_mb, "Input MiB per work unit (one train and one val shard each)")
      ->check(CLI::Range(0.001, 1e6))
      ->capture_default_str();
  c->add_option("--invalid-utf8", a->invalid_utf8,
                "reject: exit 2 naming file and offset; replace: each invalid sequence becomes U+FFFD")
      ->check(CLI::IsMember({"reject", "replace"}))
      ->capture_default_str();
  c->add_option("--worker-index", a->opt.worker_index, "Run only this worker's units (with --num-workers), "
                "for prep spread over machines; dataset.json is then written by --finalize");
  c->add_option("--num-workers", a->opt.num_workers, "Number of separate worker processes (with --worker-index)");
  c->add_flag("--finalize", a->opt.finalize_only, "Only write dataset.json from the recorded units");
  c->add_flag("--quiet", a->opt.quiet, "No progress output");
  c->callback([run, a] { *run = [a] { return RunPrepCommand(*a); }; });
}

}  // namespace anneal::cli
