// anneal plan: what one rank of a training config would hold in device memory on N ranks, before
// anything runs — the trainer's own formula (parallel/memory_plan.h), which it prints again beside
// its allocator's measured peak after step 1. Per pipeline stage, the same layout at each ZeRO stage,
// and with --device-memory whether it fits and the largest preset of the model's family that fits
// at this layout (what one asks before booking a cluster).
#include <cstdio>

#include "cli/commands.h"
#include "core/memory.h"
#include "model/family.h"
#include "train/setup.h"
#include "train/step_cost.h"

namespace anneal::cli {

namespace {

struct PlanArgs {
  std::string config, device_memory, unit = "GB", device, attention = "gemm";
  int world = 1;
  std::vector<std::string> sets;
};

// The table's unit (--unit): GB, or MB for small models.
struct Unit {
  double bytes = 1e9;
  const char* name = "GB";
  double operator()(double b) const { return b / bytes; }
};

// The most any rank of `plan` holds (the largest stage's tp rank 0; data-parallel rank 0 has the
// largest shard).
double PeakOfPlan(const ParallelPlan& plan, const MemoryInputs& in) {
  double most = 0;
  for (int p = 0; p < plan.dims().pp; ++p) most = std::max(most, RankMemory(plan, in, p, 0).Training());
  return most;
}

void PrintStages(const ParallelPlan& plan, const MemoryInputs& in, const Unit& u) {
  std::printf("%-6s %9s %9s %9s %9s %10s %11s %9s %9s %11s %10s %12s\n", "stage", "params", "gathered", "masters", "grads",
              "grad shard", "grad ranges", "fp32 copy", "moments", "activations", "total", "+checkpoint");
  for (int p = 0; p < plan.dims().pp; ++p) {
    const MemoryTerms m = RankMemory(plan, in, p, 0);
    std::printf("%-6d %9.3f %9.3f %9.3f %9.3f %10.3f %11.3f %9.3f %9.3f %11.3f %10.3f %12.3f\n", p, u(m.params),
                u(m.gathered), u(m.masters), u(m.grads), u(m.accumulator), u(m.grad_ranges), u(m.fp32_copy),
                u(m.moments), u(m.activations), u(m.Training()), u(m.checkpoint));
  }
}

// The same layout at ZeRO 0..3 (those the layout allows).
void PrintZeroStages(const TrainConfig& c, int world, const MemoryInputs& in, const Unit& u) {
  std::string line = std::string("the same layout at each ZeRO stage (") + u.name + ", the largest rank):";
  for (int z = 0; z <= 3; ++z) {
    TrainConfig v = c;
    v.dist.zero = z;
    if (z == 0) v.dist.shard_group = 0;
    auto plan = PlanLayout(v, world);
    char b[64];
    if (plan.ok()) {
      std::snprintf(b, sizeof b, " ZeRO %d %.3f%s", z, u(PeakOfPlan(*plan, in)), z == c.dist.zero ? " (this run)" : "");
    } else {
      std::snprintf(b, sizeof b, " ZeRO %d refused", z);
    }
    line += (z ? "," : "") + std::string(b);
  }
  std::printf("%s\n", line.c_str());
}

// The family's presets at this layout, smallest first: the largest whose every rank fits.
void PrintLargestFitting(const TrainConfig& c, int world, const MemoryInputs& in, double device, const Unit& u) {
  const ModelFamily& family = FamilyOf(c.model);
  std::string fits, first_over;
  for (const std::string& name : family.PresetNames()) {
    auto preset = family.Preset(name);
    if (!preset.ok()) continue;
    TrainConfig v = c;
    v.model = *preset;
    auto plan = PlanLayout(v, world);
    if (!plan.ok()) {
      std::printf("  %-16s %8.2fB parameters: not at this layout (%s)\n", name.c_str(), preset->NumParams() / 1e9,
                  plan.status().message().c_str());
      continue;
    }
    const double peak = PeakOfPlan(*plan, in);
    const bool ok = peak <= device;
    std::printf("  %-16s %8.2fB parameters: %10.3f %s per rank %s\n", name.c_str(), preset->NumParams() / 1e9, u(peak),
                u.name, ok ? "fits" : "does not fit");
    if (ok) fits = name;
  }
  std::printf("the largest %s preset that fits %.3f GB at this layout: %s\n", family.name(), device / 1e9,
              fits.empty() ? "none (add ranks, shard more, recompute, or a smaller batch)" : fits.c_str());
}

// --device: one training step of one device, op by op, priced by the roofline (train/step_cost.h).
Status PrintStepCost(const TrainConfig& c, int world, const DeviceSpec& spec, bool flash) {
  if (world != 1) {
    std::printf("step cost: not modelled at --world %d (the model prices one device's step: --world 1)\n", world);
    return Status::Ok();
  }
  ANNEAL_ASSIGN_OR_RETURN(StepCost sc, PredictStep(c, spec, flash));
  std::printf("one training step on one %s, attention path %s (CUDA kernels' launches, FLOPs and bytes, op by op; "
              "kernels/cost/cost_backend.h), the longest op first:\n%s",
              spec.name.c_str(), flash ? "2 (flash)" : "1 (gemm)", sc.table.c_str());
  std::printf("device memory at the step's peak (the cost backend's allocator): %.3f GB\n", sc.peak_bytes / 1e9);
  return Status::Ok();
}

Status RunPlan(const PlanArgs& a) {
  if (a.config.empty()) return InvalidInput("anneal plan needs --config FILE.yaml (the training config)");
  if (a.world < 1) return InvalidInput("--world " + std::to_string(a.world) + " must be at least 1");
  std::vector<std::string> sets = a.sets;
  // A plan reads no data and runs no kernels: the formula is the same on every backend, so the device
  // named (a GPU this machine may not have) is not checked. A later --set may still name them.
  sets.insert(sets.begin(), {"data.dir=(not read by anneal plan)", "train.device=cpu", "train.kernels=ref"});
  ANNEAL_ASSIGN_OR_RETURN(TrainConfig c, TrainConfig::Load(a.config, sets));
  ANNEAL_ASSIGN_OR_RETURN(ParallelPlan plan, PlanLayout(c, a.world));
  const ParallelDims& d = plan.dims();
  if (d.dp * d.tp * d.pp != a.world) {
    return InvalidInput("dp (" + std::to_string(d.dp) + ") x pp (" + std::to_string(d.pp) + ") x tp (" +
                        std::to_string(d.tp) + ") = " + std::to_string(d.dp * d.pp * d.tp) + " but --world is " +
                        std::to_string(a.world) + ": choose dp, pp and tp whose product is the number of ranks");
  }
  const DeviceSpec* spec = nullptr;
  if (!a.device.empty() && !(spec = FindDeviceSpec(a.device))) {
    std::string names;
    for (const DeviceSpec& s : DeviceSpecs()) names += (names.empty() ? "" : ", ") + s.name;
    return InvalidInput("--device '" + a.device + "' is not in the table (kernels/cost/device_specs.cc): " + names);
  }
  if (a.attention != "gemm" && a.attention != "flash") {
    return InvalidInput("--attention '" + a.attention + "' must be gemm (path 1) or flash (path 2)");
  }
  uint64_t device = spec ? static_cast<uint64_t>(spec->memory_gb * 1e9) : 0;
  if (!a.device_memory.empty()) {
    ANNEAL_ASSIGN_OR_RETURN(device, ParseByteSize(a.device_memory, "--device-memory"));
  }
  if (a.unit != "GB" && a.unit != "MB") return InvalidInput("--unit '" + a.unit + "' must be GB or MB");
  const Unit unit = a.unit == "GB" ? Unit{1e9, "GB"} : Unit{1e6, "MB"};
  const MemoryInputs in = MemoryInputsOf(c);
  std::printf("plan: %s\n", c.model.ToString().c_str());
  std::printf("on %d ranks: dp %d x tp %d x pp %d, ZeRO %d%s, %s, B=%d T=%d, %d micro-batches (%s), recompute %s\n",
              a.world, d.dp, d.tp, d.pp, d.zero,
              plan.zero_shards() < d.dp ? (" in shard groups of " + std::to_string(plan.zero_shards())).c_str() : "",
              DTypeName(c.train.dtype), d.batch, d.seq_len, d.micro_batches, d.schedule.c_str(), c.train.recompute.c_str());
  std::printf("device memory of one rank, %s (parallel/memory_plan.h; the trainer prints its measured peak beside it):\n",
              a.unit.c_str());
  PrintStages(plan, in, unit);
  PrintZeroStages(c, a.world, in, unit);
  if (device > 0) {
    const double peak = PeakOfPlan(plan, in);
    std::printf("device memory %.3f GB: %s (the largest rank %.3f GB, %.0f%%)\n", device / 1e9,
                peak <= device ? "fits" : "does not fit", peak / 1e9, 100.0 * peak / device);
    PrintLargestFitting(c, a.world, in, static_cast<double>(device), unit);
  }
  if (spec) return PrintStepCost(c, a.world, *spec, a.attention == "flash");
  return Status::Ok();
}

}  // namespace

void AddPlanCommand(CLI::App& app, RunFn* run) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "Print what one rank of a training config holds in device memory on N ranks, term by term, before anything "
      "runs (the trainer's own formula), the same at each ZeRO stage, and with --device-memory whether it fits and "
      "the largest preset of the family that fits.\n"
      "Example: anneal plan --config llama.yaml --world 64 --set dist.zero=3 --set train.dtype=bf16 "
      "--device-memory 80GB\n"
      "         anneal plan --config gpt2.yaml --device h200 --set train.dtype=bf16");
  cmd->add_option("--config", a->config, "the training config (YAML or JSON; data.dir is not read)")->required();
  cmd->add_option("--world", a->world, "ranks in all (dp x tp x pp); dist.dp defaults to world / (tp x pp)")
      ->capture_default_str();
  cmd->add_option("--device-memory", a->device_memory,
                  "one device's memory, e.g. 80GB, 141GB, 24GiB: say whether the layout fits, and the largest preset "
                  "of the model's family that does");
  cmd->add_option("--unit", a->unit, "the table's unit: GB or MB")->capture_default_str();
  cmd->add_option("--device", a->device,
                  "a GPU of kernels/cost/device_specs.cc (h200, h100, a100): its memory for --device-memory, and with "
                  "--world 1 one training step priced op by op (FLOPs, bytes, launches, host synchronisations, "
                  "roofline time), the predicted step time, tokens/s and MFU");
  cmd->add_option("--attention", a->attention, "with --device: gemm (attention path 1, the default) or flash (path 2)")
      ->capture_default_str();
  cmd->add_option("--set", a->sets, "override a config key, KEY=VALUE (repeatable)");
  cmd->callback([a, run] { *run = [a] { return RunPlan(*a); }; });
}

}  // namespace anneal::cli
