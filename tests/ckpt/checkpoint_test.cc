#include "kernels/registry.h"
#include "ckpt/checkpoint.h"
#include "train/checkpoint_tensors.h"

#include <gtest/gtest.h>

#include <thread>

#include "core/safetensors.h"
#include "testing/temp_dir.h"

namespace anneal {
namespace {

ModelConfig Tiny() { return ModelConfig::Make(200, 16, 2, 2, 16).value(); }
const CheckpointLineage kLineage{"{}", "d", "h"};

struct Fixture {
  testing::TempDir dir;
  std::unique_ptr<ObjectStore> store = std::move(OpenCheckpointStore(dir.path())).value();
  DecoderModel model{Tiny(), CpuBackend()};
  Fixture() { model.InitWeights(5); }
  Status Save(int step, ObjectStore* s = nullptr, CheckpointOptions o = {}) {
    TrainerState st;
    st.step = step;
    o.attempt = o.attempt < 0 ? 0 : o.attempt;
    return SaveCheckpoint(s ? *s : *store, TensorsOf(model, nullptr), st, kLineage, {}, o);
  }
  std::optional<std::string> Newest() { return FindNewestCheckpoint(*store).value(); }
};

TEST(CheckpointTest, RoundTripsWeightsMomentsAndState) {
  Fixture f;
  AdamW opt(f.model.layout(), CpuBackend(), AdamWOptions{});
  for (size_t i = 0; i < opt.m().size(); ++i) opt.m().data()[i] = 0.001f * static_cast<float>(i % 97);
  const ParamInfo* wte = f.model.layout().Find("wte.weight");  // padded vocabulary rows hold zeros
  std::fill(opt.m().data() + wte->offset + wte->size, opt.m().data() + wte->offset + wte->stored_size, 0.0f);
  opt.set_updates(7);
  TrainerState st;
  st.step = 7;
  st.updates = 7;
  st.loader = {3, 112};
  CheckpointOptions o;
  o.attempt = 2;
  ASSERT_TRUE(SaveCheckpoint(*f.store, TensorsOf(f.model, &opt), st, kLineage, {}, o).ok());
  ASSERT_EQ(f.Newest(), "step-00000007");
  DecoderModel b(Tiny(), CpuBackend());
  AdamW opt2(b.layout(), CpuBackend(), AdamWOptions{});
  TrainerState st2;
  ASSERT_TRUE(LoadCheckpoint(*f.store, "step-00000007", TensorsOf(b, &opt2), &st2).ok());
  EXPECT_TRUE(std::equal(f.model.params(), f.model.params() + f.model.num_floats(), b.params()));
  EXPECT_TRUE(std::equal(opt.m().data(), opt.m().data() + opt.m().size(), opt2.m().data()));
  EXPECT_EQ(st2.step, 7);
  EXPECT_EQ(opt2.updates(), 7);
  EXPECT_EQ(st2.loader.samples, 112u);
  // The files live under the attempt's folder; the stored wte is canonical: V rows, not Vp.
  auto r = SafeTensorsReader::Open(Env::Default(), f.dir.File("step-00000007/attempt-2/model.safetensors"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()->tensors().at("param.wte.weight").shape, (std::vector<int64_t>{200, 16}));
  EXPECT_TRUE(r.value()->Has("param.h.1.attn.k.weight"));
  EXPECT_TRUE(VerifyCheckpoint(*f.store, "step-00000007").ok());
}

// Interrupted at any point, a checkpoint is never taken for a whole one and the previous stays the
// newest: the store fails on a shard (a dropped connection), on the record, on the manifest (a full
// disk), and a writer dies before the manifest (nothing after the shards).
TEST(CheckpointTest, AnInterruptedCheckpointNeverCountsAndThePreviousStays) {
  Fixture f;
  ASSERT_TRUE(f.Save(3).ok());
  FaultObjectStore faulty(f.store.get());
  const std::vector<std::pair<int, Status>> faults = {
      {1, PeerError("connection reset by peer")},       // the shard
      {2, PeerError("connection reset by peer")},       // this rank's record
      {3, IoError("No space left on device")},          // the manifest
  };
  int step = 10;
  for (const auto& [nth, error] : faults) {
    faulty.FailNth(FaultObjectStore::Op::kPut, nth, error);
    Status s = f.Save(step, &faulty);
    EXPECT_FALSE(s.ok()) << "fault at put " << nth;
    EXPECT_EQ(s.code(), error.code());
    EXPECT_EQ(f.Newest(), "step-00000003") << "fault at put " << nth;
    ++step;
  }
  auto all = ListCheckpoints(*f.store);
  ASSERT_TRUE(all.ok());
  int incomplete = 0;
  for (const auto& c : *all) incomplete += !c.complete;
  EXPECT_GE(incomplete, 2);  // their shards are there, without manifests
  // The previous checkpoint still loads.
  DecoderModel b(Tiny(), CpuBackend());
  EXPECT_TRUE(LoadCheckpoint(*f.store, "step-00000003", TensorsOf(b, nullptr), nullptr).ok());
}

// A writer left over from an earlier attempt writes under its own attempt folder: it cannot touch
// the files a later attempt's manifest lists.
TEST(CheckpointTest, AWriterOfAnEarlierAttemptCannotSpoilALaterOne) {
  Fixture f;
  CheckpointOptions o;
  o.attempt = 1;
  ASSERT_TRUE(f.Save(5, nullptr, o).ok());
  // The stale attempt 0 writes garbage into its own folder for the same step (and no manifest).
  ASSERT_TRUE(f.store->Put("step-00000005/attempt-0/model.safetensors", "garbage from a stale writer").ok());
  EXPECT_TRUE(VerifyCheckpoint(*f.store, "step-00000005").ok());
  DecoderModel b(Tiny(), CpuBackend());
  EXPECT_TRUE(LoadCheckpoint(*f.store, "step-00000005", TensorsOf(b, nullptr), nullptr).ok());
  EXPECT_TRUE(std::equal(f.model.params(), f.model.params() + f.model.num_floats(), b.params()));
}

TEST(CheckpointTest, ARankThatNeverFinishesMeansNoManifest) {
  Fixture f;
  TrainerState st;
  st.step = 6;
  CheckpointWriters w;
  w.rank = 0;
  w.ranks = 2;  // rank 1 never writes
  CheckpointOptions o;
  o.attempt = 0;
  SimulatedClock clock;  // the default 600 s wait, in simulated time: no real waiting
  o.clock = &clock;
  const double t0 = MonotonicSeconds(), s0 = clock.Monotonic();
  Status s = SaveCheckpoint(*f.store, TensorsOf(f.model, nullptr), st, kLineage, w, o);
  EXPECT_EQ(s.code(), Code::kPeer);
  EXPECT_NE(s.message().find("rank 1 did not finish writing its files within 600 s"), std::string::npos) << s.message();
  EXPECT_FALSE(f.Newest().has_value());
  EXPECT_GE(clock.Monotonic() - s0, 600.0);  // it waited the whole 600 s ...
  EXPECT_LT(MonotonicSeconds() - t0, 60.0);  // ... of simulated time
}

// Two ranks writing in parallel (threads here): rank 0 commits once both records are there.
TEST(CheckpointTest, RanksWriteInParallelAndRankZeroCommits) {
  Fixture f;
  TrainerState st;
  st.step = 8;
  AdamW opt0(f.model.layout(), CpuBackend(), AdamWOptions{}, 0, f.model.num_floats() / 2);
  AdamW opt1(f.model.layout(), CpuBackend(), AdamWOptions{}, f.model.num_floats() / 2, f.model.num_floats());
  Status s0, s1;
  CheckpointOptions o;
  o.attempt = 0;
  std::thread t1([&] {
    CheckpointWriters w{1, 2, 1, nullptr};
    s1 = SaveCheckpoint(*f.store, TensorsOf(f.model, &opt1), st, kLineage, w, o);
  });
  CheckpointWriters w0{0, 2, 1, nullptr};
  s0 = SaveCheckpoint(*f.store, TensorsOf(f.model, &opt0), st, kLineage, w0, o);
  t1.join();
  ASSERT_TRUE(s0.ok()) << s0.message();
  ASSERT_TRUE(s1.ok()) << s1.message();
  EXPECT_EQ(f.Newest(), "step-00000008");
  EXPECT_TRUE(VerifyCheckpoint(*f.store, "step-00000008").ok());
}

// Hierarchical upload: rank 1 hands its files to the node leader (local rank 0) through a node-local
// staging store; only the leader writes to the checkpoint store; the staging ends empty.
TEST(CheckpointTest, HierarchicalUploadGoesThroughTheNodeLeader) {
  Fixture f;
  testing::TempDir staging_dir;
  auto staging = std::move(OpenObjectStore(staging_dir.path())).value();
  FaultObjectStore counting(f.store.get());  // counts the leader's puts
  TrainerState st;
  st.step = 9;
  AdamW opt0(f.model.layout(), CpuBackend(), AdamWOptions{}, 0, f.model.num_floats() / 2);
  AdamW opt1(f.model.layout(), CpuBackend(), AdamWOptions{}, f.model.num_floats() / 2, f.model.num_floats());
  CheckpointOptions o;
  o.attempt = 0;
  o.staging = staging.get();
  o.local_world = 2;
  Status s0, s1;
  std::thread t1([&] {
    CheckpointOptions o1 = o;
    o1.local_rank = 1;
    // Rank 1 is given a store that must never be written: everything goes through the leader.
    FaultObjectStore untouchable(f.store.get());
    untouchable.FailNth(FaultObjectStore::Op::kPut, 1, Internal("rank 1 wrote to the checkpoint store"));
    s1 = SaveCheckpoint(untouchable, TensorsOf(f.model, &opt1), st, kLineage, CheckpointWriters{1, 2, 1, nullptr}, o1);
  });
  s0 = SaveCheckpoint(counting, TensorsOf(f.model, &opt0), st, kLineage, CheckpointWriters{0, 2, 1, nullptr}, o);
  t1.join();
  ASSERT_TRUE(s1.ok()) << s1.message();
  ASSERT_TRUE(s0.ok()) << s0.message();
  EXPECT_EQ(f.Newest(), "step-00000009");
  EXPECT_TRUE(VerifyCheckpoint(*f.store, "step-00000009").ok());
  EXPECT_TRUE(f.store->Head("step-00000009/attempt-0/optim-00001-of-00002.safetensors")->has_value());
  EXPECT_EQ(counting.calls(FaultObjectStore::Op::kPut), 6);  // 2 own files + record, rank 1's file + record, manifest
  EXPECT_TRUE(staging->ListAll("")->empty());
}

TEST(CheckpointTest, RefusesAnotherShapeCorruptionAndAMissingShard) {
  Fixture f;
  ASSERT_TRUE(f.Save(1).ok());
  DecoderModel other(ModelConfig::Make(200, 16, 2, 2, 32).value(), CpuBackend());
  Status s = LoadCheckpoint(*f.store, "step-00000001", TensorsOf(other, nullptr), nullptr);
  EXPECT_EQ(s.ExitCode(), 2);
  EXPECT_NE(s.message().find("holds a model of shape"), std::string::npos);
  const std::string shard = "step-00000001/attempt-0/model.safetensors";
  std::string bytes = *f.store->Get(shard);
  bytes[bytes.size() / 2] ^= 0x40;
  ASSERT_TRUE(f.store->Put(shard, bytes).ok());
  DecoderModel b(Tiny(), CpuBackend());
  s = LoadCheckpoint(*f.store, "step-00000001", TensorsOf(b, nullptr), nullptr);
  EXPECT_EQ(s.ExitCode(), 2);
  EXPECT_NE(s.message().find("checksum"), std::string::npos);
  s = VerifyCheckpoint(*f.store, "step-00000001");
  EXPECT_EQ(s.ExitCode(), 2);
  EXPECT_NE(s.message().find("fails its checksum"), std::string::npos) << s.message();
  ASSERT_TRUE(f.store->Delete(shard).ok());  // a manifest naming a missing shard
  s = LoadCheckpoint(*f.store, "step-00000001", TensorsOf(b, nullptr), nullptr);
  EXPECT_EQ(s.ExitCode(), 2);
  EXPECT_NE(s.message().find("is missing"), std::string::npos) << s.message();
  EXPECT_NE(VerifyCheckpoint(*f.store, "step-00000001").message().find("no object"), std::string::npos);
}

TEST(CheckpointTest, NeverOverwritesACompleteCheckpoint) {
  Fixture f;
  ASSERT_TRUE(f.Save(4).ok());
  const std::string before = *f.store->Get("step-00000004/attempt-0/model.safetensors");
  f.model.InitWeights(2);
  ASSERT_TRUE(f.Save(4).ok());
  EXPECT_EQ(*f.store->Get("step-00000004/attempt-0/model.safetensors"), before);
}

TEST(CheckpointTest, RetentionKeepsTheLastKAndEveryMth) {
  Fixture f;
  CheckpointOptions o;
  o.keep_last = 2;
  o.keep_every = 4;
  for (int step = 1; step <= 9; ++step) ASSERT_TRUE(f.Save(step, nullptr, o).ok());
  auto all = ListCheckpoints(*f.store);
  ASSERT_TRUE(all.ok());
  std::vector<int> steps;
  for (const auto& c : *all) steps.push_back(c.step);
  EXPECT_EQ(steps, (std::vector<int>{4, 8, 9}));
  ASSERT_TRUE(DeleteCheckpoint(*f.store, "step-00000009").ok());
  EXPECT_EQ(f.Newest(), "step-00000008");
}

TEST(CheckpointTest, AsyncWriterCommitsInTheBackground) {
  Fixture f;
  AsyncCheckpointer w(f.store.get(), CheckpointOptions{0});
  TrainerState st;
  st.step = 12;
  auto snap = SnapshotCheckpoint(*f.store, TensorsOf(f.model, nullptr), st, kLineage, {}, CheckpointOptions{0});
  ASSERT_TRUE(snap.ok());
  EXPECT_GT(snap->bytes(), f.model.num_floats());
  f.model.InitWeights(9);  // training goes on and changes the weights: the snapshot is unaffected
  ASSERT_TRUE(w.Start(std::move(snap).value()).ok());
  ASSERT_TRUE(w.Wait().ok());
  DecoderModel b(Tiny(), CpuBackend());
  ASSERT_TRUE(LoadCheckpoint(*f.store, "step-00000012", TensorsOf(b, nullptr), nullptr).ok());
  DecoderModel a(Tiny(), CpuBackend());
  a.InitWeights(5);
  EXPECT_TRUE(std::equal(a.params(), a.params() + a.num_floats(), b.params()));
}

}  // namespace
}  // namespace anneal
