#include "data/prep.h"

#include <algorithm>
#include <set>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "anneal_version.h"
#include "core/checksum.h"
#include "core/progress.h"
#include "data/dataset.h"
#include "data/shard.h"
#include "data/text_input.h"
#include "data/tokenizer.h"

namespace anneal {

using nlohmann::json;

namespace {

constexpr const char* kUnitsDir = ".units";
constexpr uint64_t kValSeed = 20240520;

std::string UnitName(uint32_t u) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%06u", u);
  return buf;
}

// End of the JSON Lines segment that starts at `begin` and should be about `target` bytes: just past
// the first '\n' at or after begin + target (or the file's end).
Result<uint64_t> CutAfterLine(Env& env, const std::string& path, uint64_t begin, uint64_t target, uint64_t size) {
  uint64_t pos = begin + target;
  if (pos >= size) return size;
  ANNEAL_ASSIGN_OR_RETURN(auto f, env.OpenForRead(path));
  std::string buf(1 << 16, '\0');
  while (pos < size) {
    ANNEAL_ASSIGN_OR_RETURN(size_t n, f->Read(pos, buf.size(), buf.data()));
    if (n == 0) break;
    size_t nl = std::string_view(buf.data(), n).find('\n');
    if (nl != std::string_view::npos) return pos + nl + 1;
    pos += n;
  }
  return size;
}

struct UnitOutput {
  std::vector<ShardInfo> shards;
  uint64_t input_hash = 0;
  uint64_t bytes = 0;
};

json UnitRecordJson(const WorkUnit& u, const UnitOutput& out) {
  json shards = json::array();
  for (const auto& s : out.shards) {
    shards.push_back({{"split", s.split}, {"file", s.file}, {"tokens", s.tokens}, {"docs", s.docs},
                      {"xxh64", HexU64(*s.xxh64)}});
  }
  return {{"unit", u.index}, {"plan_key", HexU64(u.plan_key)}, {"input_hash", HexU64(out.input_hash)},
          {"bytes", out.bytes}, {"shards", shards}};
}

// Reads a unit's record; returns nullopt when it is missing, from another plan, or its shards are
// missing or of the wrong size (then the unit is redone).
std::optional<UnitOutput> ReadUnitRecord(Env& env, const std::string& out_dir, const WorkUnit& u,
                                         uint32_t token_bytes) {
  std::string path = JoinPath(JoinPath(out_dir, kUnitsDir), UnitName(u.index) + ".json");
  if (!env.Exists(path)) return std::nullopt;
  auto text = env.ReadFile(path);
  if (!text.ok()) return std::nullopt;
  json j = json::parse(*text, nullptr, false);
  if (!j.is_object() || j.value("plan_key", "") != HexU64(u.plan_key)) return std::nullopt;
  UnitOutput out;
  try {
    out.input_hash = std::stoull(j.at("input_hash").get<std::string>(), nullptr, 16);
    out.bytes = j.at("bytes").get<uint64_t>();
    for (const auto& e : j.at("shards")) {
      ShardInfo s;
      s.split = e.at("split").get<std::string>();
      s.file = e.at("file").get<std::string>();
      s.tokens = e.at("tokens").get<uint64_t>();
      s.docs = e.at("docs").get<uint64_t>();
      s.xxh64 = std::stoull(e.at("xxh64").get<std::string>(), nullptr, 16);
      auto size = env.FileSize(JoinPath(out_dir, s.file));
      if (!size.ok() || *size != kShardHeaderBytes + s.tokens * token_bytes) return std::nullopt;
      out.shards.push_back(std::move(s));
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return out;
}

// The unit a temporary file left by a killed writer belongs to ("train_000005.bin.tmp.77.0",
// "000005.json.tmp.77.1" -> 5), or -1 for names that are not prep's temporaries.
int64_t UnitOfTemporary(const std::string& name) {
  size_t t = name.find(".tmp.");
  if (t == std::string::npos) return -1;
  std::string stem = name.substr(0, t);
  for (const char* prefix : {"train_", "val_", ""}) {
    std::string p = prefix;
    if (stem.rfind(p, 0) != 0) continue;
    std::string rest = stem.substr(p.size());
    for (const char* suffix : {".bin", ".json"}) {
      std::string x = suffix;
      if (rest.size() == 6 + x.size() && rest.compare(6, x.size(), x) == 0 &&
          rest.find_first_not_of("0123456789") == 6) {
        return std::stoll(rest.substr(0, 6));
      }
    }
  }
  return -1;
}

// Removes temporaries of the given units (which this process owns exclusively: unit u belongs to
// one worker) left behind by a killed earlier run. Others' temporaries are never touched.
void RemoveStaleTemporaries(Env& env, const std::string& out, const std::vector<bool>& mine) {
  for (const std::string& dir : {out, JoinPath(out, kUnitsDir)}) {
    auto names = env.ListDir(dir);
    if (!names.ok()) continue;
    for (const auto& n : *names) {
      int64_t u = UnitOfTemporary(n);
      if (u >= 0 && static_cast<size_t>(u) < mine.size() && mine[static_cast<size_t>(u)]) {
        (void)env.Remove(JoinPath(dir, n));
      }
    }
  }
}

Result<UnitOutput> ProcessUnit(Env& env, const PrepOptions& o, const Tokenizer& tok, Encoder& enc,
                               const WorkUnit& u, Progress& progress, const std::atomic<bool>& stop) {
  UnitOutput out;
  Xxh64Stream hash;
  std::vector<uint32_t> split_tokens[2];  // train, val
  uint64_t split_docs[2] = {0, 0};
  for (const Segment& seg : u.segments) {
    if (stop.load()) return Cancelled("stopped after another worker failed");
    ANNEAL_ASSIGN_OR_RETURN(std::string data, ReadInputBytes(env, seg.path, seg.begin, seg.end));
    hash.Update(data);
    const uint64_t raw = seg.end - seg.begin;
    out.bytes += raw;
    uint64_t docs_before = split_docs[0] + split_docs[1];
    size_t toks_before = split_tokens[0].size() + split_tokens[1].size();
    ANNEAL_RETURN_IF_ERROR(ForEachDocument(
        FormatOfPath(seg.path), seg.path, seg.begin, std::move(data), o.replace_invalid_utf8,
        [&](std::string_view doc) {
          bool val = o.val_fraction > 0 &&
                     static_cast<double>(Xxh64(doc, kValSeed) >> 11) * 0x1.0p-53 < o.val_fraction;
          auto& toks = split_tokens[val ? 1 : 0];
          toks.push_back(tok.bos());
          enc.Encode(doc, &toks);
          ++split_docs[val ? 1 : 0];
        }));
    progress.Add(raw, split_docs[0] + split_docs[1] - docs_before,
                 split_tokens[0].size() + split_tokens[1].size() - toks_before);
  }
  out.input_hash = hash.Digest();
  const uint32_t width = TokenBytesForVocab(tok.vocab_size());
  const char* names[2] = {"train", "val"};
  for (int s = 0; s < 2; ++s) {
    if (split_tokens[s].empty()) continue;
    ShardInfo info;
    info.split = names[s];
    info.file = std::string(names[s]) + "_" + UnitName(u.index) + ".bin";
    info.tokens = split_tokens[s].size();
    info.docs = split_docs[s];
    ANNEAL_ASSIGN_OR_RETURN(uint64_t sum, WriteShard(env, JoinPath(o.output, info.file), split_tokens[s], width));
    info.xxh64 = sum;
    out.shards.push_back(std::move(info));
  }
  // The record is written last: a unit without it is not done.
  std::string rec = JoinPath(JoinPath(o.output, kUnitsDir), UnitName(u.index) + ".json");
  ANNEAL_RETURN_IF_ERROR(env.WriteFileAtomic(rec, UnitRecordJson(u, out).dump(1) + "\n"));
  return out;
}

Status Finalize(Env& env, const PrepOptions& o, const Tokenizer& tok, const std::vector<WorkUnit>& units,
                PrepReport* report) {
  DatasetInfo d;
  d.tokenizer = o.tokenizer;
  d.vocab_size = tok.vocab_size();
  d.eot = tok.bos();
  d.token_bytes = TokenBytesForVocab(tok.vocab_size());
  d.val_fraction = o.val_fraction;
  d.unit_bytes = o.unit_bytes;
  d.created_by = std::string("anneal ") + ANNEAL_VERSION + " (commit " + ANNEAL_GIT_COMMIT + ")";
  Xxh64Stream all;
  std::vector<ShardInfo> val;
  uint64_t docs = 0;
  for (const auto& u : units) {
    auto rec = ReadUnitRecord(env, o.output, u, d.token_bytes);
    if (!rec) {
      return InvalidInput("unit " + UnitName(u.index) + " of " + std::to_string(units.size()) +
                          " has no complete output in " + o.output +
                          ": run its worker (anneal prep ... --worker-index " +
                          std::to_string(o.num_workers > 0 ? static_cast<int>(u.index) % o.num_workers : 0) +
                          "), or re-run anneal prep without --finalize");
    }
    all.Update(HexU64(rec->input_hash));
    for (auto& s : rec->shards) {
      docs += s.docs;
      (s.split == "val" ? val : d.shards).push_back(s);
    }
  }
  if (docs == 0) {
    return InvalidInput("the inputs hold no documents (every file or \"text\" field is empty): check --input");
  }
  d.shards.insert(d.shards.end(), val.begin(), val.end());
  d.inputs_hash = HexU64(all.Digest());
  ANNEAL_RETURN_IF_ERROR(env.WriteFileAtomic(JoinPath(o.output, kDatasetFile), d.ToJson()));
  report->finalized = true;
  std::set<std::string> listed;
  for (const ShardInfo& s : d.shards) listed.insert(s.file);
  if (auto names = env.ListDir(o.output); names.ok()) {
    for (const std::string& n : *names) {
      if (n.size() > 4 && n.compare(n.size() - 4, 4, ".bin") == 0 && !listed.count(n)) report->orphans.push_back(n);
    }
    std::sort(report->orphans.begin(), report->orphans.end());
  }
  report->docs = docs;
  report->tokens = d.Tokens("train") + d.Tokens("val");
  return Status::Ok();
}

}  // namespace

Result<std::vector<WorkUnit>> PlanUnits(Env& env, const PrepOptions& o) {
  if (o.inputs.empty()) return InvalidInput("no --input given: name one or more text or JSON Lines files or folders");
  std::vector<std::string> files;
  for (const auto& in : o.inputs) {
    ANNEAL_ASSIGN_OR_RETURN(auto listed, env.ListFilesRecursive(in));
    if (listed.empty()) return InvalidInput("input folder " + in + " holds no files: check --input");
    for (auto& f : listed) {
      if (!o.output.empty() && f.rfind(JoinPath(o.output, ""), 0) == 0) continue;  // our own output
      files.push_back(std::move(f));
    }
  }
  std::vector<Segment> segs;
  for (const auto& f : files) {
    ANNEAL_ASSIGN_OR_RETURN(uint64_t size, env.FileSize(f));
    if (size == 0) return InvalidInput("input " + f + " is empty: remove it from --input, or give it text");
    // Opening now reports an unreadable file before any work starts.
    ANNEAL_ASSIGN_OR_RETURN(auto probe, env.OpenForRead(f));
    (void)probe;
    if (IsGzipPath(f) || FormatOfPath(f) == InputFormat::kText) {
      segs.push_back({f, 0, size});
      continue;
    }
    for (uint64_t b = 0; b < size;) {
      ANNEAL_ASSIGN_OR_RETURN(uint64_t e, CutAfterLine(env, f, b, o.unit_bytes, size));
      segs.push_back({f, b, e});
      b = e;
    }
  }
  std::vector<WorkUnit> units;
  for (auto& s : segs) {
    uint64_t len = s.end - s.begin;
    if (units.empty() || units.back().bytes + len > o.unit_bytes) {
      units.emplace_back();
      units.back().index = static_cast<uint32_t>(units.size() - 1);
    }
    units.back().segments.push_back(s);
    units.back().bytes += len;
  }
  for (auto& u : units) {
    Xxh64Stream k;
    k.Update(o.tokenizer + "|" + std::to_string(o.val_fraction) + "|" + std::to_string(o.replace_invalid_utf8));
    for (const auto& s : u.segments) {
      k.Update("|" + s.path + ":" + std::to_string(s.begin) + "-" + std::to_string(s.end));
    }
    u.plan_key = k.Digest();
  }
  return units;
}

Result<PrepReport> RunPrep(Env& env, const PrepOptions& o) {
  if (o.output.empty()) return InvalidInput("no --output folder given");
  if (!(o.val_fraction >= 0 && o.val_fraction < 1)) return InvalidInput("--val-fraction must be in [0, 1)");
  if (o.unit_bytes < 1024) return InvalidInput("--unit-mb is too small (at least 1 KiB of input per unit)");
  if (o.worker_index >= 0 && (o.num_workers <= 0 || o.worker_index >= o.num_workers)) {
    return InvalidInput("--worker-index must be in [0, --num-workers)");
  }
  const double t0 = MonotonicSeconds();
  ANNEAL_ASSIGN_OR_RETURN(auto tok, Tokenizer::Load(o.tokenizer));
  ANNEAL_ASSIGN_OR_RETURN(std::vector<WorkUnit> units, PlanUnits(env, o));
  ANNEAL_RETURN_IF_ERROR(env.CreateDirs(JoinPath(o.output, kUnitsDir)));
  PrepReport report;
  report.units_total = units.size();
  const uint32_t width = TokenBytesForVocab(tok->vocab_size());

  if (!o.finalize_only) {
    // This process's units (all of them, or its share as one of num_workers) that are not done yet.
    std::vector<const WorkUnit*> todo;
    uint64_t todo_bytes = 0;
    for (const auto& u : units) {
      if (o.worker_index >= 0 && static_cast<int>(u.index % static_cast<uint32_t>(o.num_workers)) != o.worker_index) {
        continue;
      }
      if (ReadUnitRecord(env, o.output, u, width)) {
        ++report.units_skipped;
        continue;
      }
      todo.push_back(&u);
      todo_bytes += u.bytes;
    }
    std::vector<bool> mine(units.size(), false);
    for (const WorkUnit* u : todo) mine[u->index] = true;
    RemoveStaleTemporaries(env, o.output, mine);
    Progress progress("prep", todo_bytes);
    progress.set_quiet(o.quiet);
    progress.Start();
    std::atomic<bool> stop{false};
    std::mutex mu;
    Status first_error;
    const int threads = std::max(1, std::min<int>(o.workers, static_cast<int>(todo.size())));
    std::vector<std::thread> pool;
    std::atomic<uint64_t> bytes{0}, docs{0}, tokens{0};
    std::atomic<size_t> next{0};
    for (int w = 0; w < threads; ++w) {
      pool.emplace_back([&] {
        auto enc = tok->NewEncoder();
        // Threads take the next unit as they free up (balance); which thread writes a unit never
        // changes its bytes.
        for (size_t i = next.fetch_add(1); i < todo.size() && !stop.load(); i = next.fetch_add(1)) {
          auto r = ProcessUnit(env, o, *tok, *enc, *todo[i], progress, stop);
          if (!r.ok()) {
            std::lock_guard<std::mutex> lk(mu);
            if (first_error.ok() && r.status().code() != Code::kCancelled) first_error = r.status();
            stop = true;
            return;
          }
          bytes += r->bytes;
          for (const auto& s : r->shards) {
            docs += s.docs;
            tokens += s.tokens;
          }
        }
      });
    }
    for (auto& t : pool) t.join();
    progress.Stop();
    if (!first_error.ok()) return first_error;
    report.units_done = todo.size();
    report.bytes = bytes;
    report.docs = docs;
    report.tokens = tokens;
  }
  if (o.worker_index < 0 || o.finalize_only) {
    ANNEAL_RETURN_IF_ERROR(Finalize(env, o, *tok, units, &report));
  }
  report.seconds = MonotonicSeconds() - t0;
  return report;
}

}  // namespace anneal
