#include "train/step_cost.h"

#include "train/setup.h"

namespace anneal {

Result<StepCost> PredictStep(const TrainConfig& c, const DeviceSpec& device, bool flash) {
  CostBackend be(flash);
  ANNEAL_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt, SetUpDeviceModel(c, &be));
  ANNEAL_RETURN_IF_ERROR(rt->model->status());
  const StopSignals none;
  for (int step = 1; step <= 2; ++step) {
    if (step == 2) be.ResetRecords();
    ANNEAL_RETURN_IF_ERROR(rt->step->Run(step, none).status());
    ANNEAL_RETURN_IF_ERROR(rt->model->status());
  }
  StepCost sc;
  sc.tokens = static_cast<double>(c.data.batch_size) * c.data.seq_len * c.train.grad_accum;
  sc.model_flops = rt->plan->model().FlopsPerToken(c.data.seq_len) * sc.tokens;
  sc.peak_bytes = static_cast<double>(be.allocator().peak_bytes());
  sc.price = PriceStep(be.Records(), device, c.train.dtype == DType::kBF16);
  sc.table = FormatStepPrice(sc.price, device, sc.tokens, sc.model_flops);
  return sc;
}

}  // namespace anneal
