#include "protocol/job_definition.h"

#include <gtest/gtest.h>

namespace anneal {
namespace {

// The error's field and message for a spec that must be refused.
std::pair<std::string, std::string> Refusal(const std::string& yaml) {
  std::string field = "(unset)";
  auto r = ParseJobSpec(yaml, &field);
  EXPECT_FALSE(r.ok()) << yaml;
  if (r.ok()) return {"", ""};
  EXPECT_EQ(r.status().code(), Code::kInvalidInput);
  return {field, r.status().message()};
}

TEST(JobSpec, FullSpecParsesWithDefaults) {
  auto s = ParseJobSpec(R"(
name: kjv-tiny
entrypoint:
  command: [anneal, train, --config, x.yaml]
  hyperparameters: {train.steps: 100, data.dir: "${ANNEAL_CHANNEL_TRAIN}"}
source: src
channels: [{name: train, uri: "s3://b/p", mode: fastfile}, {name: val, uri: /data/val}]
checkpoint: {uri: "s3://b/ck"}
resources: {instance_count: 2, procs_per_instance: 4}
metric_definitions: [{name: loss, regex: 'loss ([0-9.]+)'}]
environment: {FOO: bar}
)");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->name, "kjv-tiny");
  EXPECT_EQ(s->instance_count, 2);
  EXPECT_EQ(s->procs_per_instance, 4);
  EXPECT_EQ(s->instance_type, "local");
  EXPECT_EQ(s->channels[1].mode, "file");  // the default
  EXPECT_EQ(s->hyperparameters.at("train.steps"), "100");
  EXPECT_DOUBLE_EQ(s->grace_period_s, 30);
  EXPECT_DOUBLE_EQ(s->hang_timeout_s, 1800);
  EXPECT_DOUBLE_EQ(s->hang_startup_s, 3600);
  EXPECT_EQ(s->max_attempts, 1);
  // The built-in trainer takes hyperparameters as --set key=value.
  const auto argv = s->RankArgv();
  ASSERT_EQ(argv.size(), 8u);
  EXPECT_EQ(argv[4], "--set");
  EXPECT_EQ(argv[5], "data.dir=${ANNEAL_CHANNEL_TRAIN}");
  EXPECT_EQ(argv[7], "train.steps=100");
}

TEST(JobSpec, NormalizedFormRoundTrips) {
  auto s = ParseJobSpec("name: a\nentrypoint: {command: 'echo hi', hyperparameters: {lr: 0.1}}\n");
  ASSERT_TRUE(s.ok());
  auto again = JobSpecFromJson(s->ToJson());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->ToJson(), s->ToJson());
  EXPECT_TRUE(again->shell);
  // A shell command gets its hyperparameters as quoted flags.
  EXPECT_EQ(again->RankArgv(), (std::vector<std::string>{"/bin/sh", "-c", "echo hi --lr '0.1'"}));
}

// A stored spec reads back whole without compiling its regexes again; its structure is still checked.
TEST(JobSpec, AStoredSpecReadsBackWhole) {
  auto s = ParseJobSpec("name: a\nentrypoint: {command: [train]}\nmetric_definitions: [{name: loss, regex: 'loss ([0-9.]+)'}]\n");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto back = JobSpecFromStored(s->ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ToJson(), s->ToJson());
  nlohmann::json broken = s->ToJson();
  broken["resources"]["instance_count"] = 0;
  EXPECT_FALSE(JobSpecFromStored(broken).ok());
  // Only a submit compiles them: an unusable regex is refused there.
  nlohmann::json bad_regex = s->ToJson();
  bad_regex["metric_definitions"][0]["regex"] = "no group";
  EXPECT_FALSE(JobSpecFromJson(bad_regex).ok());
}

// What fuzzing job specs found: a metric regex's backreference of 19 digits overflowed a signed
// integer inside std::regex's compiler (UBSan); a large repetition count builds that many copies.
TEST(JobSpec, AMetricRegexWithAHugeRepetitionIsRefusedBeforeItIsCompiled) {
  auto with = [](const std::string& regex) {
    std::string field;
    auto s = JobSpecFromJson({{"name", "a"}, {"entrypoint", {{"command", {"train"}}}},
                              {"metric_definitions", {{{"name", "loss"}, {"regex", regex}}}}},
                             &field);
    return std::make_pair(s.ok() ? std::string() : s.status().message(), field);
  };
  const auto backref = with("([0-9]+) \\\\\\2222222222222222222");  // what fuzzing found: \\ then \2222...
  EXPECT_EQ(backref.second, "metric_definitions[0].regex");
  EXPECT_NE(backref.first.find("backreference above 99"), std::string::npos) << backref.first;
  EXPECT_EQ(with("(a)([0-9]+)\\1").first, "");
  const auto huge = with("x{2222222222222222222}([0-9]+)");
  EXPECT_EQ(huge.second, "metric_definitions[0].regex");
  EXPECT_NE(huge.first.find("repetition count above 1000"), std::string::npos) << huge.first;
  EXPECT_NE(with("a{2,1001}([0-9]+)").first.find("above 1000"), std::string::npos);
  EXPECT_NE(with(std::string(1001, 'a') + "([0-9]+)").first.find("more than 1000"), std::string::npos);
  EXPECT_EQ(with("loss ([0-9.]+) x{3,1000}").first, "");
  EXPECT_EQ(with("\\{99999} ([0-9]+)").first, "");  // an escaped brace is no repetition
}

TEST(JobSpec, JsonIsAccepted) {
  auto s = ParseJobSpec(R"({"name": "j", "entrypoint": {"command": ["python3", "train.py"], "hyperparameters": {"epochs": 3}}})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->RankArgv(), (std::vector<std::string>{"python3", "train.py", "--epochs", "3"}));
}

TEST(JobSpec, ErrorsNameTheField) {
  EXPECT_EQ(Refusal("entrypoint: {command: [x]}").first, "name");
  EXPECT_EQ(Refusal("name: Bad_Name\nentrypoint: {command: [x]}").first, "name");
  EXPECT_EQ(Refusal("name: a").first, "entrypoint");
  EXPECT_EQ(Refusal("name: a\nentrypoint: {command: []}").first, "entrypoint.command");
  EXPECT_EQ(Refusal("name: a\nentrypoint: {command: [x]}\nresources: {instance_count: 0}").first, "resources.instance_count");
  EXPECT_EQ(Refusal("name: a\nentrypoint: {command: [x]}\nresources: {instance_count: two}").first, "resources.instance_count");
  EXPECT_EQ(Refusal("name: a\nentrypoint: {command: [x]}\nresources: {procs_per_instance: 1.5}").first,
            "resources.procs_per_instance");
  EXPECT_EQ(Refusal("name: a\nentrypoint: {command: [x]}\nchannels: [{name: t, uri: x, mode: copy}]").first, "channels[0].mode");
  EXPECT_EQ(Refusal("name: a\nentrypoint: {command: [x]}\nchannels: [{name: t, uri: x}, {name: t, uri: y}]").first,
            "channels[1].name");
  EXPECT_EQ(Refusal("name: a\nentrypoint: {command: [x]}\nmetric_definitions: [{name: l, regex: 'loss [0-9]+'}]").first,
            "metric_definitions[0].regex");
  EXPECT_EQ(Refusal("name: a\nentrypoint: {command: [x]}\nmetric_definitions: [{name: l, regex: 'loss ([0-9]+'}]").first,
            "metric_definitions[0].regex");
  EXPECT_EQ(Refusal("name: a\nentrypoint: {command: [x]}\nstopping: {max_runtime_s: -1}").first, "stopping.max_runtime_s");
  EXPECT_EQ(Refusal("name: a\nentrypoint: {command: [x]}\nenvironment: {1BAD: x}").first, "environment.1BAD");
  EXPECT_EQ(Refusal("name: a\nentrypoint: {command: [x]}\ncheckpoint: {local_path: /x}").first, "checkpoint.uri");
  auto [field, msg] = Refusal("name: a\nentrypoint: {command: [x]}\nresourcez: {}");
  EXPECT_EQ(field, "resourcez");
  EXPECT_NE(msg.find("the fields here are"), std::string::npos) << msg;
  EXPECT_EQ(Refusal("name: a\nentrypoint: {command: [x], args: [y]}").first, "entrypoint.args");
  EXPECT_EQ(Refusal("name: [unclosed").first, "");  // not YAML at all
  EXPECT_EQ(Refusal("- a\n- b").first, "");          // not a mapping
}

TEST(JobSpec, StoppingRulesAreCheckedFieldByField) {
  auto s = ParseJobSpec(
      "name: a\nentrypoint: {command: [x]}\nstopping:\n  rules:\n"
      "    - {when: non_finite, metric: train_loss}\n"
      "    - {when: no_improvement, metric: val_loss, steps: 5, mode: min, action: retry}\n"
      "    - {when: gpu_utilization_below, percent: 10, for_s: 600}\n"
      "    - {when: no_output, for_s: 900}\n");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->stopping_rules.size(), 4u);
  EXPECT_EQ(s->stopping_rules[0].action, "stop");
  EXPECT_EQ(s->stopping_rules[1].Describe(), "no_improvement of val_loss in 5 steps (min)");
  EXPECT_EQ(s->stopping_rules[2].Describe(), "gpu_utilization_below 10 % for 600 s");
  auto back = JobSpecFromStored(s->ToJson());  // agents receive the stored form
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->ToJson(), s->ToJson());
  const std::string head = "name: a\nentrypoint: {command: [x]}\nstopping: {rules: [";
  EXPECT_EQ(Refusal(head + "{when: sometimes}]}").first, "stopping.rules[0].when");
  EXPECT_EQ(Refusal(head + "{metric: x}]}").first, "stopping.rules[0].when");
  EXPECT_EQ(Refusal(head + "{when: non_finite}]}").first, "stopping.rules[0].metric");
  EXPECT_EQ(Refusal(head + "{when: no_improvement, metric: x}]}").first, "stopping.rules[0].steps");
  EXPECT_EQ(Refusal(head + "{when: no_improvement, metric: x, steps: 3, mode: lower}]}").first, "stopping.rules[0].mode");
  EXPECT_EQ(Refusal(head + "{when: no_output, for_s: 0}]}").first, "stopping.rules[0].for_s");
  EXPECT_EQ(Refusal(head + "{when: no_output, for_s: 5, metric: x}]}").first, "stopping.rules[0].metric");
  EXPECT_EQ(Refusal(head + "{when: non_finite, metric: x, action: pause}]}").first, "stopping.rules[0].action");
  EXPECT_EQ(Refusal(head + "{when: gpu_utilization_below, for_s: 5}]}").first, "stopping.rules[0].percent");
}

TEST(JobSpec, LauncherIsOneOfThree) {
  auto s = ParseJobSpec("name: a\nentrypoint: {command: [x]}");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->launcher, "anneal");
  for (const char* l : {"mpirun", "srun"}) {
    auto t = ParseJobSpec(std::string("name: a\nentrypoint: {command: [x], launcher: ") + l + "}");
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->launcher, l);
    EXPECT_EQ(t->ToJson()["entrypoint"]["launcher"], l);  // kept in the stored form, which agents receive
    EXPECT_EQ(JobSpecFromStored(t->ToJson())->launcher, l);
  }
  auto [field, msg] = Refusal("name: a\nentrypoint: {command: [x], launcher: torchrun}");
  EXPECT_EQ(field, "entrypoint.launcher");
  EXPECT_NE(msg.find("must be anneal"), std::string::npos) << msg;
}

}  // namespace
}  // namespace anneal
