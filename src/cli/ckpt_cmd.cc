// anneal ckpt ls|verify|rm URI: list, verify and delete the checkpoints under a checkpoint_dir (a
// folder, file:// or s3:// URI; docs/formats/checkpoint.md).
//   ls URI                 every step-NNNNNNNN prefix: complete (has a manifest) or not, attempt,
//                          objects, size
//   verify URI [--step N]  the newest complete checkpoint (or step N, or --all): every file present
//                          with its size and XXH64, every tensor covered exactly once (exit 2 if not)
//   rm URI --step N | --incomplete
//                          delete checkpoint N (its manifest first), or every prefix without one
#include <cstdio>

#include "ckpt/checkpoint.h"
#include "cli/commands.h"

namespace anneal::cli {

namespace {

struct CkptArgs {
  std::string action, uri;
  int step = -1;
  bool all = false, incomplete = false;
};

Status RunCkpt(const CkptArgs& a) {
  // A local folder must exist (opening a store would create it, and a typo would list nothing).
  if (a.uri.find("://") == std::string::npos || a.uri.rfind("file://", 0) == 0) {
    const std::string path = a.uri.rfind("file://", 0) == 0 ? a.uri.substr(7) : a.uri;
    if (!Env::Default().IsDirectory(path)) {
      return InvalidInput("no checkpoint folder " + path + ": give a run's train.checkpoint_dir");
    }
  }
  ANNEAL_ASSIGN_OR_RETURN(auto store, OpenCheckpointStore(a.uri));
  ANNEAL_ASSIGN_OR_RETURN(auto list, ListCheckpoints(*store));
  if (a.action == "ls") {
    std::printf("%-15s %-10s %8s %8s %12s\n", "checkpoint", "state", "attempt", "objects", "MB");
    for (const auto& c : list) {
      std::printf("%-15s %-10s %8s %8d %12.2f\n", c.name.c_str(), c.complete ? "complete" : "incomplete",
                  c.attempt >= 0 ? std::to_string(c.attempt).c_str() : "-", c.objects, c.bytes / 1e6);
    }
    std::printf("%zu checkpoint prefix(es) in %s\n", list.size(), store->Describe().c_str());
    return Status::Ok();
  }
  if (a.action == "verify") {
    std::vector<std::string> names;
    for (const auto& c : list) {
      if (c.complete && (a.all || (a.step >= 0 && c.step == a.step))) names.push_back(c.name);
    }
    if (!a.all && a.step < 0) {
      ANNEAL_ASSIGN_OR_RETURN(auto newest, FindNewestCheckpoint(*store));
      if (newest) names.push_back(*newest);
    }
    if (names.empty()) {
      return InvalidInput("no complete checkpoint" + (a.step >= 0 ? " of step " + std::to_string(a.step) : std::string()) +
                          " in " + store->Describe() + " (anneal ckpt ls shows what is there)");
    }
    Status first;
    for (const auto& n : names) {
      Status s = VerifyCheckpoint(*store, n);
      std::printf("%s %s\n", n.c_str(), s.ok() ? "ok: every file and tensor checks out" : "DAMAGED");
      if (!s.ok()) {
        std::fprintf(stderr, "%s\n", s.message().c_str());
        if (first.ok()) first = s;
      }
    }
    return first;
  }
  // rm
  if (a.step < 0 && !a.incomplete) return InvalidInput("anneal ckpt rm needs --step N or --incomplete");
  int removed = 0;
  for (const auto& c : list) {
    if ((a.step >= 0 && c.step == a.step) || (a.incomplete && !c.complete)) {
      ANNEAL_RETURN_IF_ERROR(DeleteCheckpoint(*store, c.name));
      std::printf("removed %s (%d objects, %.2f MB)\n", c.name.c_str(), c.objects, c.bytes / 1e6);
      ++removed;
    }
  }
  if (a.step >= 0 && removed == 0) {
    return InvalidInput("no checkpoint of step " + std::to_string(a.step) + " in " + store->Describe());
  }
  return Status::Ok();
}

}  // namespace

void AddCkptCommand(CLI::App& app, RunFn* run) {
  auto a = std::make_shared<CkptArgs>();
  CLI::App* c = app.add_subcommand("ckpt", "List, verify and delete checkpoints (a folder, file:// or s3:// URI).");
  c->add_option("action", a->action, "ls | verify | rm")->required()->check(CLI::IsMember({"ls", "verify", "rm"}));
  c->add_option("uri", a->uri, "The run's train.checkpoint_dir")->required();
  c->add_option("--step", a->step, "The checkpoint of this step (verify, rm)");
  c->add_flag("--all", a->all, "verify: every complete checkpoint");
  c->add_flag("--incomplete", a->incomplete, "rm: every step prefix without a manifest (interrupted writes)");
  c->callback([run, a] { *run = [a] { return RunCkpt(*a); }; });
}

}  // namespace anneal::cli
