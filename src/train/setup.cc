#include "train/setup.h"

#include "data/channel.h"
#include "kernels/registry.h"

namespace anneal {

namespace {

// The rank's place in the job (rt->re) and the parallel plan, validated before anything is allocated
// (exit 2 naming each factor).
Status PlanRank(const TrainConfig& c, Runtime* rt) {
  const DistSection& d = c.dist;
  rt->dp = d.dp > 0 ? d.dp : std::max(1, rt->re.world / (d.tp * d.pp));
  ANNEAL_ASSIGN_OR_RETURN(ProcessGroups pg,
                          ProcessGroups::Make(rt->re.world, rt->dp, d.pp, d.tp, rt->re.rank, d.zero > 0 ? d.shard_group : 0));
  rt->pg = std::make_unique<ProcessGroups>(std::move(pg));
  ANNEAL_ASSIGN_OR_RETURN(ParallelPlan plan, PlanLayout(c, rt->re.world));
  rt->plan = std::make_unique<ParallelPlan>(std::move(plan));
  rt->shard = rt->plan->ShardOf(rt->pg->pp_rank(), rt->pg->tp_rank());
  return Status::Ok();
}

// parallelize(): the model is built as this rank's shard of it (with its tensor-parallel split's
// layers, the whole width when tp = 1), then initialized (every rank draws the whole model's random
// stream and keeps its box: the same values as one process).
void BuildModel(const TrainConfig& c, Runtime* rt) {
  if (rt->groups.tp) rt->tp_group = std::make_unique<CommTensorParallelGroup>(rt->groups.tp.get());
  if (rt->tp_group) {
    rt->tp_layers = std::make_unique<TensorParallelLayers>(rt->plan->model(), rt->shard, rt->tp_group.get(), *rt->be,
                                                           c.train.dtype);
  }
  // ZeRO 2 allocates no whole gradient vector, ZeRO 3 no whole parameter vector either: BuildStep
  // initializes this rank's shard.
  const DecoderModel::FlatBuffers flat = c.dist.zero >= 3   ? DecoderModel::FlatBuffers::kNone
                                         : c.dist.zero == 2 ? DecoderModel::FlatBuffers::kParamsOnly
                                                            : DecoderModel::FlatBuffers::kBoth;
  rt->model = std::make_unique<DecoderModel>(rt->plan->model(), *rt->be, rt->shard, rt->tp_layers.get(), c.train.dtype,
                                             flat);
  rt->model->set_recompute(*ParseRecompute(c.train.recompute));  // validated by the config
  rt->model->set_offload(c.train.offload_activations);            // validated too (full recomputation, no pp)
  if (flat != DecoderModel::FlatBuffers::kNone) rt->model->InitWeights(c.train.seed);
}

// The tied wte when a pipeline's first and last stage both hold it (null otherwise).
const ParamInfo* TiedEmbedding(const Runtime& rt) {
  if (rt.pg->pp() == 1 || !rt.model->config().tie_embeddings) return nullptr;
  return rt.model->layout().Find("wte.weight");
}

// Data parallelism from outside the model (gradient buckets leave as backward produces them), the
// optimizer of this rank's shard, the pipeline engine and the step plan over them.
Status BuildStep(const TrainConfig& c, Runtime* rt) {
  DecoderModel& model = *rt->model;
  if (rt->dp > 1 || c.dist.zero > 0) {
    Communicator* shards = rt->groups.shard ? rt->groups.shard.get() : rt->groups.dp.get();
    rt->par = std::make_unique<DataParallel>(shards, rt->groups.replica.get(), *rt->be, model.stream(),
                                             model.num_floats(), c.dist.zero,
                                             static_cast<size_t>(c.dist.bucket_mb * (1 << 20) / sizeof(float)));
    rt->par->set_reduce_bf16(c.dist.reduce_dtype == DType::kBF16);
    rt->par->Attach(&model, TiedEmbedding(*rt) != nullptr);
    if (c.dist.zero >= 3) {  // the same values as one process's, this rank's shard only
      model.InitWeights(c.train.seed, rt->par->OptimizerParams({}), rt->par->shard_begin(), rt->par->shard_end());
    }
  }
  rt->opt = std::make_unique<AdamW>(model.layout(), *rt->be, c.optim, rt->par ? rt->par->shard_begin() : 0,
                                    rt->par ? rt->par->shard_end() : SIZE_MAX);
  ANNEAL_RETURN_IF_ERROR(rt->opt->status());
  // bf16: fp32 masters of the initial weights of the optimizer's shard.
  ANNEAL_RETURN_IF_ERROR(
      rt->opt->UseMasterWeights(rt->par ? rt->par->OptimizerParams(model.params_ptr()) : model.params_ptr()));
  StepParts sp;
  sp.scale = LossScale{c.data.batch_size, c.data.seq_len, c.train.grad_accum, rt->dp};
  PipelineEngine::Options po;
  po.schedule = c.dist.schedule;
  po.stage = rt->pg->pp_rank();
  po.stages = c.dist.pp;
  po.micro_batches = c.train.grad_accum;
  po.B = c.data.batch_size;
  po.T = c.data.seq_len;
  po.grad_scale = sp.scale.Gradient();
  rt->engine = std::make_unique<PipelineEngine>(&model, rt->groups.pp_fwd.get(), rt->groups.pp_bwd.get(), po);
  sp.model = &model;
  sp.pipeline = rt->engine.get();
  sp.loader = rt->data.train.get();
  sp.optimizer = rt->opt.get();
  sp.par = rt->par.get();
  sp.embedding = rt->groups.embedding.get();
  sp.world = rt->world();
  sp.tp = rt->tp_group.get();
  sp.tied = TiedEmbedding(*rt);
  sp.dp_rank = rt->pg->dp_rank();
  sp.loss_owner = rt->loss_owner();
  rt->step = std::make_unique<StepPlan>(sp);
  return Status::Ok();
}

}  // namespace

Result<TrainData> OpenTrainData(const DataSection& d, const RankContract& re, int dp_rank, int dp, uint32_t vocab) {
  TrainData td;
  // The data channel: read in place, or copied to local disk first (local rank 0 copies).
  ChannelOptions chan;
  chan.mode = d.mode;
  chan.local_dir = d.local_dir;
  chan.parallel = d.parallel;
  chan.local_rank = re.local_rank;
  chan.quiet = re.rank != 0;
  ANNEAL_ASSIGN_OR_RETURN(td.dir, PrepareDataChannel(d.dir, chan));
  LoaderOptions lo;
  lo.dir = td.dir;
  if (d.mode == "fastfile") {
    ANNEAL_ASSIGN_OR_RETURN(lo.remote, OpenRemoteDataset(d.dir));
    td.remote = true;
  }
  lo.batch = d.batch_size;
  lo.seq_len = d.seq_len;
  lo.seed = d.seed;
  lo.vocab_size = vocab;
  lo.verify_checksums = d.verify_checksums;
  lo.dp_rank = dp_rank;
  lo.dp_size = dp;
  ANNEAL_ASSIGN_OR_RETURN(td.train, DataLoader::Open(Env::Default(), lo));  // checks the vocabulary
  bool has_val = false;
  for (const auto& s : td.train->info().shards) has_val |= s.split == d.eval_split;
  if (has_val) {
    LoaderOptions vo = lo;
    vo.split = d.eval_split;
    vo.shuffle = false;
    vo.dp_rank = 0;  // every rank walks the same validation batches and evaluates its share of them
    vo.dp_size = 1;
    auto v = DataLoader::Open(Env::Default(), vo);
    if (v.ok()) td.val = std::move(v).value();  // a val split too short for one window: no validation
  }
  return td;
}

Result<ParallelPlan> PlanLayout(const TrainConfig& c, int world) {
  const DistSection& d = c.dist;
  ParallelDims dims;
  dims.dp = d.dp > 0 ? d.dp : std::max(1, world / (d.tp * d.pp));
  dims.tp = d.tp;
  dims.pp = d.pp;
  dims.zero = d.zero;
  dims.shard_group = d.shard_group;
  dims.micro_batches = c.train.grad_accum;
  dims.schedule = d.schedule;
  dims.seq_len = c.data.seq_len;
  dims.batch = c.data.batch_size;
  dims.sequence_parallel = d.sequence_parallel;
  return ParallelPlan::Make(c.model, dims);
}

MemoryInputs MemoryInputsOf(const TrainConfig& c) {
  MemoryInputs in;
  in.dtype = c.train.dtype;
  in.recompute = *ParseRecompute(c.train.recompute);  // validated by the config
  in.bucket_floats = static_cast<size_t>(c.dist.bucket_mb * (1 << 20) / sizeof(float));
  in.reduce_bf16 = c.dist.reduce_dtype == DType::kBF16;
  in.offload = c.train.offload_activations;
  return in;
}

Result<std::unique_ptr<Runtime>> SetUpDeviceModel(const TrainConfig& c, Backend* be) {
  if (c.dist.dp > 1 || c.dist.tp > 1 || c.dist.pp > 1) {
    return InvalidInput("one device's step only: dist.dp, dist.tp and dist.pp must be 1 (the collectives of a "
                        "parallel layout are not modelled)");
  }
  auto rt = std::make_unique<Runtime>();  // rt->re: rank 0 of 1
  ANNEAL_RETURN_IF_ERROR(PlanRank(c, rt.get()));
  rt->be = be;
  BuildModel(c, rt.get());
  ANNEAL_RETURN_IF_ERROR(BuildStep(c, rt.get()));
  return rt;
}

Result<std::unique_ptr<Runtime>> SetUpRuntime(const TrainConfig& c) {
  auto rt = std::make_unique<Runtime>();
  ANNEAL_ASSIGN_OR_RETURN(rt->re, RankContract::FromEnvironment());
  ANNEAL_RETURN_IF_ERROR(PlanRank(c, rt.get()));
  rt->be = BackendByName(c.train.kernels);  // checked by the config's validation
  rt->be->SetThreads(c.train.threads);
  ANNEAL_ASSIGN_OR_RETURN(rt->groups, ConnectRankGroups(rt->re, *rt->pg, rt->be->device(), c.dist.timeout_s));
  ANNEAL_ASSIGN_OR_RETURN(rt->data, OpenTrainData(c.data, rt->re, rt->pg->dp_rank(), rt->dp,
                                                  static_cast<uint32_t>(c.model.vocab_size)));
  BuildModel(c, rt.get());
  ANNEAL_RETURN_IF_ERROR(BuildStep(c, rt.get()));
  return rt;
}

}  // namespace anneal
