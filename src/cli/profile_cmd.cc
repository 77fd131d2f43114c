// anneal profile JOB | PATH...: merges a job's step traces (train.profile_steps; train/profiler.h)
// into one Chrome trace file and prints where the step time goes (train/trace_summary.h).
// A job's traces are read from its output (<output.uri>/<job>/output/profile/, where the agents
// upload $ANNEAL_OUTPUT_DIR); a local run's from the folders or files named.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>

#include "cli/commands.h"
#include "cli/target.h"
#include "core/env.h"
#include "storage/object_store.h"
#include "train/trace_summary.h"

namespace anneal::cli {

namespace {

struct ProfileOptions {
  Target target;
  std::vector<std::string> sources;
  std::string output;
};

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The *.trace.json files of a folder, or the file itself.
Status ReadLocal(const std::string& path, std::vector<TraceInput>* out) {
  Env& env = Env::Default();
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return NotFound(path + ": no such file or folder (give a job id alone, or trace files and folders)");
  }
  if (!S_ISDIR(st.st_mode)) {
    ANNEAL_ASSIGN_OR_RETURN(std::string text, env.ReadFile(path));
    out->push_back({path, std::move(text)});
    return Status::Ok();
  }
  ANNEAL_ASSIGN_OR_RETURN(auto names, env.ListDir(path));
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    if (!EndsWith(n, ".trace.json")) continue;
    ANNEAL_ASSIGN_OR_RETURN(std::string text, env.ReadFile(path + "/" + n));
    out->push_back({path + "/" + n, std::move(text)});
  }
  return Status::Ok();
}

// A job's traces from its output location.
Status ReadJob(const ProfileOptions& o, const std::string& job, std::vector<TraceInput>* out) {
  ANNEAL_ASSIGN_OR_RETURN(Connection conn, Connect(o.target, false));
  ANNEAL_ASSIGN_OR_RETURN(nlohmann::json j, conn.client->Get("/v1/jobs/" + job));
  const std::string uri = j.value("spec", nlohmann::json::object()).value("output", nlohmann::json::object()).value("uri", "");
  if (uri.empty()) {
    return InvalidInput("job " + job + " has no output.uri, so its traces stayed on its instances: give the job an "
                        "output.uri (or train.profile_dir a shared folder) and run anneal profile on that");
  }
  const std::string prefix = uri + "/" + job + "/output/profile";
  ANNEAL_ASSIGN_OR_RETURN(auto store, OpenObjectStore(prefix));
  ANNEAL_ASSIGN_OR_RETURN(auto objects, store->ListAll(""));
  for (const ObjectInfo& obj : objects) {
    if (!EndsWith(obj.key, ".trace.json")) continue;
    ANNEAL_ASSIGN_OR_RETURN(std::string text, store->Get(obj.key));
    out->push_back({prefix + "/" + obj.key, std::move(text)});
  }
  if (out->empty()) {
    return NotFound("no traces under " + prefix + ": run the job with train.profile_steps: [FROM, TO] (its ranks "
                    "write them when step TO ends; the agents upload them when the job ends)");
  }
  return Status::Ok();
}

Status RunProfile(const ProfileOptions& o) {
  std::vector<TraceInput> files;
  std::string stem;
  // One argument that names no file or folder and has no '/' is a job id; anything else is paths.
  struct stat st {};
  const std::string& first = o.sources.front();
  if (o.sources.size() == 1 && first.find('/') == std::string::npos && ::stat(first.c_str(), &st) != 0) {
    ANNEAL_RETURN_IF_ERROR(ReadJob(o, first, &files));
    stem = first;
  } else {
    for (const std::string& s : o.sources) ANNEAL_RETURN_IF_ERROR(ReadLocal(s, &files));
    stem = "profile";
  }
  TraceSummary summary;
  ANNEAL_ASSIGN_OR_RETURN(std::string merged, MergeTraces(files, &summary));
  const std::string out = o.output.empty() ? stem + ".trace.json" : o.output;
  ANNEAL_RETURN_IF_ERROR(Env::Default().WriteFileAtomic(out, merged));
  std::printf("merged %zu rank trace(s) into %s (open it in Perfetto or chrome://tracing)\n%s", files.size(), out.c_str(),
              summary.Table().c_str());
  return Status::Ok();
}

}  // namespace

void AddProfileCommand(CLI::App& app, RunFn* run) {
  auto o = std::make_shared<ProfileOptions>();
  CLI::App* c = app.add_subcommand(
      "profile",
      "Merge a job's step traces (train.profile_steps: [FROM, TO]) into one Chrome trace file, one process per rank, "
      "and print where the step time goes: compute, communication, pipeline idle, data, checkpoint.\n"
      "A job id reads the traces from the job's output.uri; paths read trace files or the folders holding them "
      "(a local run writes ./profile/rank-RRRRR.trace.json).\n"
      "Examples: anneal profile kjv-0007\n          anneal profile ./profile --output run.trace.json");
  c->add_option("source", o->sources, "A job id, or trace files and folders")->required();
  c->add_option("-o,--output", o->output, "The merged trace (default JOB.trace.json, or profile.trace.json for paths)");
  AddTargetOptions(c, &o->target, false);
  c->callback([run, o] { *run = [o] { return RunProfile(*o); }; });
}

}  // namespace anneal::cli
