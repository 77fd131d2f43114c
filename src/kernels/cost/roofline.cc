#include "kernels/cost/roofline.h"

#include <algorithm>
#include <cstdio>

namespace anneal {

const char* PricedOp::bound() const {
  const double terms[4] = {compute_us, memory_us, launch_us, sync_us};
  static const char* const names[4] = {"compute", "memory", "launch", "sync"};
  return names[std::max_element(terms, terms + 4) - terms];
}

StepPrice PriceStep(const std::vector<OpRecord>& records, const DeviceSpec& d, bool bf16) {
  StepPrice p;
  const double gemm_rate = (bf16 ? d.bf16_tflops : d.f32_tflops) * 1e12 * d.gemm_efficiency;  // FLOP/s
  const double core_rate = d.f32_tflops * 1e12;
  const double flash_rate = d.bf16_tflops * 1e12 * d.flash_efficiency;
  const double bw = d.hbm_gbps * 1e9 * d.memory_efficiency;  // bytes/s
  for (const OpRecord& r : records) {
    PricedOp o;
    o.rec = r;
    o.overlapped = r.op.find("(copy stream)") != std::string::npos;
    const double rate = r.engine == OpRecord::Engine::kGemm    ? gemm_rate
                        : r.engine == OpRecord::Engine::kFlash ? flash_rate
                                                               : core_rate;
    o.compute_us = r.flops / rate * 1e6;
    o.memory_us = r.bytes / bw * 1e6;
    o.launch_us = static_cast<double>(r.launches) * d.launch_us;
    o.sync_us = static_cast<double>(r.syncs) * d.sync_us;
    if (!o.overlapped) {
      p.step_us += o.us();
      p.launches += r.launches;
      p.syncs += r.syncs;
      p.flops += r.flops;
      p.bytes += r.bytes;
    }
    p.ops.push_back(o);
  }
  std::stable_sort(p.ops.begin(), p.ops.end(), [](const PricedOp& a, const PricedOp& b) { return a.us() > b.us(); });
  return p;
}

std::string FormatStepPrice(const StepPrice& p, const DeviceSpec& d, double tokens, double model_flops) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%-34s %-30s %6s %9s %9s %7s %8s %6s %9s %6s %-7s\n", "op", "shape", "calls", "GFLOP",
                "MB", "launch", "syncs", "", "time us", "share", "bound");
  out += line;
  for (const PricedOp& o : p.ops) {
    std::snprintf(line, sizeof line, "%-34s %-30s %6ld %9.2f %9.2f %7ld %8ld %6s %9.1f %5.1f%% %-7s\n",
                  o.rec.op.c_str(), o.rec.shape.substr(0, 30).c_str(), o.rec.calls, o.rec.flops / 1e9,
                  o.rec.bytes / 1e6, o.rec.launches, o.rec.syncs, "", o.us(),
                  o.overlapped ? 0.0 : 100.0 * o.us() / p.step_us, o.overlapped ? "overlap" : o.bound());
    out += line;
  }
  const double s = p.step_us / 1e6;
  std::snprintf(line, sizeof line,
                "predicted on %s (%s): step %.2f ms, %ld launches, %ld host synchronisations, %.1f GFLOP, %.2f GB "
                "moved; %.0f tokens/s, MFU %.1f%% (of the %.0f TFLOP/s bf16 peak; the model's FLOPs %.1f GFLOP a "
                "step)\n",
                d.name.c_str(), d.description.c_str(), p.step_us / 1e3, p.launches, p.syncs, p.flops / 1e9,
                p.bytes / 1e9, tokens / s, 100.0 * model_flops / s / (d.bf16_tflops * 1e12), d.bf16_tflops,
                model_flops / 1e9);
  out += line;
  // CUDA graphs replay the step's launches without the host: at most the launch gaps are saved (a
  // graph's kernels still run back to back, each about a microsecond apart on the device).
  const double gaps_ms = static_cast<double>(p.launches) * d.launch_us / 1e3;
  const double graph_ms = gaps_ms - static_cast<double>(p.launches) * 1.0 / 1e3;
  std::snprintf(line, sizeof line,
                "launch gaps %.2f ms (%.1f%% of the step): CUDA graphs (about 1 us a kernel) would save at most "
                "%.2f ms (%.1f%%)%s\n",
                gaps_ms, 100 * gaps_ms * 1e3 / p.step_us, graph_ms, 100 * graph_ms * 1e3 / p.step_us,
                graph_ms * 1e3 / p.step_us < 0.05 ? ": not worth their constraints (fixed shapes, no host syncs inside)"
                                                   : ": worth trying");
  out += line;
  std::snprintf(line, sizeof line,
                "(assumed: GEMMs at %.0f%% of the peak, the flash kernels at %.0f%%, memory at %.0f%% of %.0f GB/s, "
                "%.1f us a launch, %.0f us of device idle a host synchronisation: kernels/cost/device_specs.cc)\n",
                100 * d.gemm_efficiency, 100 * d.flash_efficiency, 100 * d.memory_efficiency, d.hbm_gbps, d.launch_us, d.sync_us);
  out += line;
  return out;
}

}  // namespace anneal
