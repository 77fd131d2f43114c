#include "protocol/job_definition.h"

#include <cctype>
#include <cmath>
#include <regex>
#include <set>

#include "core/bounded_parse.h"

namespace anneal {

namespace {

using nlohmann::json;

// Reads one document with precise, field-named errors.
class Reader {
 public:
  explicit Reader(std::string* field) : field_(field) {}

  Status Fail(const std::string& path, const std::string& msg) {
    if (field_) *field_ = path;
    return InvalidInput(path + ": " + msg);
  }

  static std::string TypeName(const json& v) {
    if (v.is_null()) return "null";
    if (v.is_boolean()) return "a boolean";
    if (v.is_number()) return "a number";
    if (v.is_string()) return "a string";
    if (v.is_array()) return "a list";
    return "a mapping";
  }

  // Refuses fields outside `known`, naming the nearest-looking list of allowed ones.
  Status OnlyKnown(const json& o, const std::string& path, const std::set<std::string>& known) {
    for (auto it = o.begin(); it != o.end(); ++it) {
      if (!known.count(it.key())) {
        std::string list;
        for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
        return Fail(path.empty() ? it.key() : path + "." + it.key(), "unknown field; the fields here are: " + list);
      }
    }
    return Status::Ok();
  }

  Status String(const json& o, const std::string& key, const std::string& path, std::string* out, bool required) {
    if (!o.contains(key) || o[key].is_null()) {
      return required ? Fail(Join(path, key), "is required") : Status::Ok();
    }
    const json& v = o[key];
    if (v.is_string()) {
      *out = v.get<std::string>();
    } else if (v.is_number() || v.is_boolean()) {
      *out = v.dump();
    } else {
      return Fail(Join(path, key), "must be a string, got " + TypeName(v));
    }
    if (required && out->empty()) return Fail(Join(path, key), "must not be empty");
    return Status::Ok();
  }

  Status Number(const json& o, const std::string& key, const std::string& path, double* out, double lo, double hi) {
    if (!o.contains(key) || o[key].is_null()) return Status::Ok();
    const json& v = o[key];
    if (!v.is_number()) return Fail(Join(path, key), "must be a number, got " + TypeName(v) + " " + v.dump());
    const double d = v.get<double>();
    if (!std::isfinite(d) || d < lo || d > hi) {
      return Fail(Join(path, key), "must be between " + Short(lo) + " and " + Short(hi) + ", got " + v.dump());
    }
    *out = d;
    return Status::Ok();
  }

  Status Int(const json& o, const std::string& key, const std::string& path, int* out, int lo, int hi) {
    if (!o.contains(key) || o[key].is_null()) return Status::Ok();
    const json& v = o[key];
    if (!v.is_number_integer()) return Fail(Join(path, key), "must be a whole number, got " + TypeName(v) + " " + v.dump());
    int64_t i = 0;
    if (!JsonIntIn(v, lo, hi, &i)) {
      return Fail(Join(path, key), "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + v.dump());
    }
    *out = static_cast<int>(i);
    return Status::Ok();
  }

  Status Object(const json& o, const std::string& key, const std::string& path, const json** out) {
    *out = nullptr;
    if (!o.contains(key) || o[key].is_null()) return Status::Ok();
    if (!o[key].is_object()) return Fail(Join(path, key), "must be a mapping, got " + TypeName(o[key]));
    *out = &o[key];
    return Status::Ok();
  }

  Status StringMap(const json& o, const std::string& key, const std::string& path, std::map<std::string, std::string>* out) {
    const json* m = nullptr;
    ANNEAL_RETURN_IF_ERROR(Object(o, key, path, &m));
    if (!m) return Status::Ok();
    for (auto it = m->begin(); it != m->end(); ++it) {
      std::string v;
      if (it.value().is_array() || it.value().is_object()) {
        return Fail(Join(Join(path, key), it.key()), "must be a single value, got " + TypeName(it.value()));
      }
      if (!it.value().is_null()) ANNEAL_RETURN_IF_ERROR(String(*m, it.key(), Join(path, key), &v, false));
      (*out)[it.key()] = v;
    }
    return Status::Ok();
  }

  static std::string Join(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }
  static std::string Short(double d) {
    std::string s = std::to_string(d);
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }

 private:
  std::string* field_;
};

bool IsBuiltinTrainer(const std::vector<std::string>& cmd) {
  if (cmd.size() < 2 || cmd[1] != "train") return false;
  const std::string& b = cmd[0];
  return b == "anneal" || (b.size() > 7 && b.compare(b.size() - 7, 7, "/anneal") == 0);
}

// entrypoint: command (a list, or one shell string) and hyperparameters.
Status ReadEntrypoint(Reader& r, const json& doc, JobSpec* s) {
  const json* ep = nullptr;
  ANNEAL_RETURN_IF_ERROR(r.Object(doc, "entrypoint", "", &ep));
  if (!ep) return r.Fail("entrypoint", "is required: give entrypoint.command, e.g. [anneal, train, --config, x.yaml]");
  ANNEAL_RETURN_IF_ERROR(r.OnlyKnown(*ep, "entrypoint", {"command", "hyperparameters", "launcher"}));
  if (!ep->contains("command") || (*ep)["command"].is_null()) return r.Fail("entrypoint.command", "is required");
  const json& cmd = (*ep)["command"];
  if (cmd.is_string()) {
    s->command = {cmd.get<std::string>()};
    s->shell = true;
    if (s->command[0].empty()) return r.Fail("entrypoint.command", "must not be empty");
  } else if (cmd.is_array()) {
    if (cmd.empty()) return r.Fail("entrypoint.command", "must not be an empty list");
    for (size_t i = 0; i < cmd.size(); ++i) {
      if (cmd[i].is_string()) {
        s->command.push_back(cmd[i].get<std::string>());
      } else if (cmd[i].is_number() || cmd[i].is_boolean()) {
        s->command.push_back(cmd[i].dump());
      } else {
        return r.Fail("entrypoint.command[" + std::to_string(i) + "]", "must be a string, got " + Reader::TypeName(cmd[i]));
      }
    }
  } else {
    return r.Fail("entrypoint.command", "must be a list of arguments or one shell command string, got " +
                                            Reader::TypeName(cmd));
  }
  ANNEAL_RETURN_IF_ERROR(r.StringMap(*ep, "hyperparameters", "entrypoint", &s->hyperparameters));
  ANNEAL_RETURN_IF_ERROR(r.String(*ep, "launcher", "entrypoint", &s->launcher, false));
  if (s->launcher != "anneal" && s->launcher != "mpirun" && s->launcher != "srun") {
    return r.Fail("entrypoint.launcher", "'" + s->launcher + "' must be anneal (each instance starts its ranks), mpirun "
                                         "(Open MPI starts every rank) or srun (Slurm starts every rank)");
  }
  return Status::Ok();
}

// channels: each {name, uri, mode}, names unique.
Status ReadChannels(Reader& r, const json& doc, JobSpec* s) {
  if (doc.contains("channels") && !doc["channels"].is_null()) {
    const json& ch = doc["channels"];
    if (!ch.is_array()) return r.Fail("channels", "must be a list of {name, uri, mode}, got " + Reader::TypeName(ch));
    std::set<std::string> seen;
    for (size_t i = 0; i < ch.size(); ++i) {
      const std::string p = "channels[" + std::to_string(i) + "]";
      if (!ch[i].is_object()) return r.Fail(p, "must be a mapping {name, uri, mode}");
      ANNEAL_RETURN_IF_ERROR(r.OnlyKnown(ch[i], p, {"name", "uri", "mode"}));
      ChannelSpec c;
      ANNEAL_RETURN_IF_ERROR(r.String(ch[i], "name", p, &c.name, true));
      ANNEAL_RETURN_IF_ERROR(r.String(ch[i], "uri", p, &c.uri, true));
      ANNEAL_RETURN_IF_ERROR(r.String(ch[i], "mode", p, &c.mode, false));
      static const std::regex kChan("^[A-Za-z0-9_]{1,32}$");
      if (!std::regex_match(c.name, kChan)) return r.Fail(p + ".name", "'" + c.name + "' must be 1-32 of A-Z, a-z, 0-9, _");
      if (c.mode != "file" && c.mode != "fastfile" && c.mode != "shared") {
        return r.Fail(p + ".mode", "'" + c.mode + "' must be file, fastfile or shared");
      }
      if (!seen.insert(c.name).second) return r.Fail(p + ".name", "channel '" + c.name + "' is given twice");
      s->channels.push_back(c);
    }
  }
  return Status::Ok();
}

// output and checkpoint.
Status ReadOutputAndCheckpoint(Reader& r, const json& doc, JobSpec* s) {
  const json* out = nullptr;
  ANNEAL_RETURN_IF_ERROR(r.Object(doc, "output", "", &out));
  if (out) {
    ANNEAL_RETURN_IF_ERROR(r.OnlyKnown(*out, "output", {"uri"}));
    ANNEAL_RETURN_IF_ERROR(r.String(*out, "uri", "output", &s->output_uri, false));
  }
  const json* ck = nullptr;
  ANNEAL_RETURN_IF_ERROR(r.Object(doc, "checkpoint", "", &ck));
  if (ck) {
    ANNEAL_RETURN_IF_ERROR(r.OnlyKnown(*ck, "checkpoint", {"uri", "local_path", "sync"}));
    ANNEAL_RETURN_IF_ERROR(r.String(*ck, "uri", "checkpoint", &s->checkpoint_uri, true));
    ANNEAL_RETURN_IF_ERROR(r.String(*ck, "local_path", "checkpoint", &s->checkpoint_local_path, false));
    if (ck->contains("sync") && !(*ck)["sync"].is_null()) {
      if (!(*ck)["sync"].is_boolean()) return r.Fail("checkpoint.sync", "must be true or false");
      s->checkpoint_sync = (*ck)["sync"].get<bool>();
    }
  }
  return Status::Ok();
}

// One of stopping.rules: the fields its `when` needs, and only those.
Status ReadStoppingRule(Reader& r, const json& o, const std::string& p, StoppingRule* x) {
  if (!o.is_object()) return r.Fail(p, "must be a mapping {when, ...}");
  ANNEAL_RETURN_IF_ERROR(r.String(o, "when", p, &x->when, true));
  ANNEAL_RETURN_IF_ERROR(r.String(o, "action", p, &x->action, false));
  if (x->action != "stop" && x->action != "retry") {
    return r.Fail(p + ".action", "'" + x->action + "' must be stop (the job fails) or retry (the attempt is retried)");
  }
  if (x->when == "non_finite") {
    ANNEAL_RETURN_IF_ERROR(r.OnlyKnown(o, p, {"when", "action", "metric"}));
    return r.String(o, "metric", p, &x->metric, true);
  }
  if (x->when == "no_improvement") {
    ANNEAL_RETURN_IF_ERROR(r.OnlyKnown(o, p, {"when", "action", "metric", "steps", "mode"}));
    ANNEAL_RETURN_IF_ERROR(r.String(o, "metric", p, &x->metric, true));
    if (!o.contains("steps")) return r.Fail(p + ".steps", "is required: how many values in a row without a new best");
    ANNEAL_RETURN_IF_ERROR(r.Int(o, "steps", p, &x->steps, 1, 100000000));
    ANNEAL_RETURN_IF_ERROR(r.String(o, "mode", p, &x->mode, false));
    if (x->mode != "min" && x->mode != "max") return r.Fail(p + ".mode", "'" + x->mode + "' must be min or max");
    return Status::Ok();
  }
  if (x->when == "gpu_utilization_below" || x->when == "no_output") {
    const bool gpu = x->when == "gpu_utilization_below";
    ANNEAL_RETURN_IF_ERROR(r.OnlyKnown(o, p, gpu ? std::set<std::string>{"when", "action", "percent", "for_s"}
                                                 : std::set<std::string>{"when", "action", "for_s"}));
    if (!o.contains("for_s")) return r.Fail(p + ".for_s", "is required: how long the condition must hold, in seconds");
    ANNEAL_RETURN_IF_ERROR(r.Number(o, "for_s", p, &x->for_s, 1, 86400.0 * 7));
    if (gpu && !o.contains("percent")) return r.Fail(p + ".percent", "is required: the utilisation floor, 0-100");
    return gpu ? r.Number(o, "percent", p, &x->percent, 0, 100) : Status::Ok();
  }
  return r.Fail(p + ".when", "'" + x->when + "' must be non_finite, no_improvement, gpu_utilization_below or no_output");
}

Status ReadStoppingRules(Reader& r, const json& stop, JobSpec* s) {
  if (!stop.contains("rules") || stop["rules"].is_null()) return Status::Ok();
  const json& rules = stop["rules"];
  if (!rules.is_array()) return r.Fail("stopping.rules", "must be a list of {when, ...}, got " + Reader::TypeName(rules));
  for (size_t i = 0; i < rules.size(); ++i) {
    StoppingRule x;
    ANNEAL_RETURN_IF_ERROR(ReadStoppingRule(r, rules[i], "stopping.rules[" + std::to_string(i) + "]", &x));
    s->stopping_rules.push_back(x);
  }
  return Status::Ok();
}

json StoppingRuleJson(const StoppingRule& x) {
  json j = {{"when", x.when}, {"action", x.action}};
  if (!x.metric.empty()) j["metric"] = x.metric;
  if (x.when == "no_improvement") j["steps"] = x.steps, j["mode"] = x.mode;
  if (x.when == "gpu_utilization_below") j["percent"] = x.percent;
  if (x.for_s > 0) j["for_s"] = x.for_s;
  return j;
}

// resources, stopping and retry.
Status ReadResourcesAndStopping(Reader& r, const json& doc, JobSpec* s) {
  const json* res = nullptr;
  ANNEAL_RETURN_IF_ERROR(r.Object(doc, "resources", "", &res));
  if (res) {
    ANNEAL_RETURN_IF_ERROR(r.OnlyKnown(*res, "resources", {"instance_type", "instance_count", "procs_per_instance", "keep_alive_s",
                                                          "memory_mb", "cpus"}));
    ANNEAL_RETURN_IF_ERROR(r.String(*res, "instance_type", "resources", &s->instance_type, false));
    if (s->instance_type.empty()) return r.Fail("resources.instance_type", "must not be empty");
    ANNEAL_RETURN_IF_ERROR(r.Int(*res, "instance_count", "resources", &s->instance_count, 1, 4096));
    ANNEAL_RETURN_IF_ERROR(r.Int(*res, "procs_per_instance", "resources", &s->procs_per_instance, 1, 1024));
    ANNEAL_RETURN_IF_ERROR(r.Number(*res, "keep_alive_s", "resources", &s->keep_alive_s, 0, 86400 * 7));
    double mb = 0;
    ANNEAL_RETURN_IF_ERROR(r.Number(*res, "memory_mb", "resources", &mb, 0, 1e9));
    if (mb > 0 && mb < 16) return r.Fail("resources.memory_mb", "must be at least 16 (MiB per instance), or 0 for no limit");
    s->memory_mb = static_cast<int64_t>(mb);
    ANNEAL_RETURN_IF_ERROR(r.Number(*res, "cpus", "resources", &s->cpus, 0, 100000));
    if (s->cpus > 0 && s->cpus < 0.01) return r.Fail("resources.cpus", "must be at least 0.01, or 0 for no limit");
  }
  const json* stop = nullptr;
  ANNEAL_RETURN_IF_ERROR(r.Object(doc, "stopping", "", &stop));
  if (stop) {
    ANNEAL_RETURN_IF_ERROR(r.OnlyKnown(*stop, "stopping", {"max_runtime_s", "max_pending_s", "grace_period_s",
                                                           "hang_timeout_s", "hang_startup_s", "rules"}));
    ANNEAL_RETURN_IF_ERROR(r.Number(*stop, "max_runtime_s", "stopping", &s->max_runtime_s, 0, 86400.0 * 365));
    ANNEAL_RETURN_IF_ERROR(r.Number(*stop, "max_pending_s", "stopping", &s->max_pending_s, 0, 86400.0 * 365));
    ANNEAL_RETURN_IF_ERROR(r.Number(*stop, "grace_period_s", "stopping", &s->grace_period_s, 0, 3600));
    ANNEAL_RETURN_IF_ERROR(r.Number(*stop, "hang_timeout_s", "stopping", &s->hang_timeout_s, 0, 86400.0 * 7));
    ANNEAL_RETURN_IF_ERROR(r.Number(*stop, "hang_startup_s", "stopping", &s->hang_startup_s, 0, 86400.0 * 7));
    ANNEAL_RETURN_IF_ERROR(ReadStoppingRules(r, *stop, s));
  }
  const json* retry = nullptr;
  ANNEAL_RETURN_IF_ERROR(r.Object(doc, "retry", "", &retry));
  if (retry) {
    ANNEAL_RETURN_IF_ERROR(r.OnlyKnown(*retry, "retry", {"max_attempts"}));
    ANNEAL_RETURN_IF_ERROR(r.Int(*retry, "max_attempts", "retry", &s->max_attempts, 1, 100));
  }
  return Status::Ok();
}

// metric_definitions: each {name, regex}, the regex with a capture group.
// compile: check each regex by compiling it (~30 us each): at submit, not for a spec read back.
// Why a metric's regex is refused before std::regex compiles it ("" when it is not): libstdc++ builds
// every repetition out ({100000} is 100000 copies of its atom, in memory and in time at every log
// line), and its number parser overflowed a signed integer on a backreference of 19 digits
// (fuzzing found it, UBSan).
std::string RegexTooBig(const std::string& re) {
  constexpr size_t kMaxLength = 1000, kMaxCount = 1000;
  if (re.size() > kMaxLength) return "is " + std::to_string(re.size()) + " characters long, more than " + std::to_string(kMaxLength);
  for (size_t i = 0; i < re.size(); ++i) {
    if (re[i] == '\\') {  // an escaped character ('{' included), or a backreference: at most 2 digits
      size_t digits = 0;
      while (i + 1 + digits < re.size() && std::isdigit(static_cast<unsigned char>(re[i + 1 + digits]))) ++digits;
      if (digits > 2) return "has a backreference above 99 (in '" + re.substr(i, 24) + "')";
      ++i;
      continue;
    }
    if (re[i] != '{') continue;
    for (size_t j = i + 1, digits = 0; j < re.size() && (std::isdigit(static_cast<unsigned char>(re[j])) || re[j] == ','); ++j) {
      digits = re[j] == ',' ? 0 : digits + 1;
      const size_t start = j + 1 - digits;
      if (digits > 4 || (digits > 0 && std::stoul(re.substr(start, digits)) > kMaxCount)) {
        return "has a repetition count above " + std::to_string(kMaxCount) + " (in '" + re.substr(i, 24) + "')";
      }
    }
  }
  return "";
}

Status ReadMetricDefinitions(Reader& r, const json& doc, JobSpec* s, bool compile) {
  if (doc.contains("metric_definitions") && !doc["metric_definitions"].is_null()) {
    const json& md = doc["metric_definitions"];
    if (!md.is_array()) return r.Fail("metric_definitions", "must be a list of {name, regex}");
    for (size_t i = 0; i < md.size(); ++i) {
      const std::string p = "metric_definitions[" + std::to_string(i) + "]";
      if (!md[i].is_object()) return r.Fail(p, "must be a mapping {name, regex}");
      ANNEAL_RETURN_IF_ERROR(r.OnlyKnown(md[i], p, {"name", "regex"}));
      MetricDefinition m;
      ANNEAL_RETURN_IF_ERROR(r.String(md[i], "name", p, &m.name, true));
      ANNEAL_RETURN_IF_ERROR(r.String(md[i], "regex", p, &m.regex, true));
      try {
        if (!compile) {
          s->metric_definitions.push_back(m);
          continue;
        }
        if (const std::string why = RegexTooBig(m.regex); !why.empty()) return r.Fail(p + ".regex", why);
        std::regex re(m.regex);
        if (re.mark_count() < 1) return r.Fail(p + ".regex", "needs a capture group around the value, e.g. 'loss ([0-9.]+)'");
      } catch (const std::regex_error& e) {
        return r.Fail(p + ".regex", std::string("is not a valid regular expression: ") + e.what());
      }
      s->metric_definitions.push_back(m);
    }
  }
  return Status::Ok();
}

// environment and secrets: variable names; a secret long enough to hide, given once.
Status ReadEnvironment(Reader& r, const json& doc, JobSpec* s) {
  ANNEAL_RETURN_IF_ERROR(r.StringMap(doc, "environment", "", &s->environment));
  static const std::regex kEnv("^[A-Za-z_][A-Za-z0-9_]*$");
  for (const auto& [k, v] : s->environment) {
    if (!std::regex_match(k, kEnv)) return r.Fail("environment." + k, "is not a valid environment variable name");
  }
  ANNEAL_RETURN_IF_ERROR(r.StringMap(doc, "secrets", "", &s->secrets));
  for (const auto& [k, v] : s->secrets) {
    if (!std::regex_match(k, kEnv)) return r.Fail("secrets." + k, "is not a valid environment variable name");
    if (v.size() < 4) return r.Fail("secrets." + k, "is shorter than 4 characters: too short to hide in logs");
    if (s->environment.count(k)) return r.Fail("secrets." + k, "is also in environment: give it in one place");
  }
  return Status::Ok();
}

Result<JobSpec> SpecFromJson(const json& doc, std::string* error_field, bool compile_regexes) {
  Reader r(error_field);
  JobSpec s;
  if (!doc.is_object()) return r.Fail("", "a job spec must be a mapping of fields (name, entrypoint, resources, ...)");
  ANNEAL_RETURN_IF_ERROR(r.OnlyKnown(doc, "", {"name", "role", "entrypoint", "source", "channels", "output",
                                               "checkpoint", "resources", "stopping", "retry", "metric_definitions",
                                               "environment", "secrets", "sandbox", "image"}));
  ANNEAL_RETURN_IF_ERROR(r.String(doc, "name", "", &s.name, true));
  if (doc.contains("sandbox") && !doc["sandbox"].is_null()) {
    if (!doc["sandbox"].is_boolean()) return r.Fail("sandbox", "must be true or false (false: an admin's job run unsandboxed)");
    s.sandbox = doc["sandbox"].get<bool>();
  }
  static const std::regex kName("^[a-z0-9][a-z0-9-]{0,47}$");
  if (!std::regex_match(s.name, kName)) {
    return r.Fail("name", "'" + s.name + "' must be 1-48 characters of a-z, 0-9 and '-', starting with a letter or digit");
  }
  ANNEAL_RETURN_IF_ERROR(r.String(doc, "role", "", &s.role, false));

  ANNEAL_RETURN_IF_ERROR(ReadEntrypoint(r, doc, &s));
  ANNEAL_RETURN_IF_ERROR(r.String(doc, "source", "", &s.source, false));

  ANNEAL_RETURN_IF_ERROR(ReadChannels(r, doc, &s));
  ANNEAL_RETURN_IF_ERROR(ReadOutputAndCheckpoint(r, doc, &s));
  ANNEAL_RETURN_IF_ERROR(ReadResourcesAndStopping(r, doc, &s));
  ANNEAL_RETURN_IF_ERROR(ReadMetricDefinitions(r, doc, &s, compile_regexes));
  ANNEAL_RETURN_IF_ERROR(ReadEnvironment(r, doc, &s));
  ANNEAL_RETURN_IF_ERROR(r.String(doc, "image", "", &s.image, false));
  if (!s.image.empty()) {
    static const std::regex kImage("^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$");
    if (!std::regex_match(s.image, kImage)) {
      return r.Fail("image", "'" + s.image + "' is not an image name (letters, digits and . _ / : @ -, at most 255)");
    }
    if (s.launcher != "anneal") {
      return r.Fail("image", "runs with entrypoint.launcher anneal only (each rank its own container), not " + s.launcher);
    }
    if (!s.sandbox) return r.Fail("image", "runs as the job's sandbox uid: it cannot be combined with sandbox: false");
  }
  return s;
}

}  // namespace

Result<JobSpec> JobSpecFromJson(const json& doc, std::string* error_field) { return SpecFromJson(doc, error_field, true); }

Result<JobSpec> JobSpecFromStored(const json& doc) { return SpecFromJson(doc, nullptr, false); }

Result<JobSpec> ParseJobSpec(const std::string& text, std::string* error_field) {
  // Under limits during the parse (core/bounded_parse.h): no aliases, bounded depth and size.
  auto doc = ParseYamlBounded(text);
  if (!doc.ok()) {
    if (error_field) *error_field = "";
    return InvalidInput("the job spec is not accepted as YAML or JSON: " + doc.status().message());
  }
  return JobSpecFromJson(*doc, error_field);
}

std::string StoppingRule::Describe() const {
  auto num = [](double v) {
    std::string t = std::to_string(v);
    t.erase(t.find_last_not_of('0') + 1);
    if (!t.empty() && t.back() == '.') t.pop_back();
    return t;
  };
  if (when == "non_finite") return "non_finite " + metric;
  if (when == "no_improvement") return "no_improvement of " + metric + " in " + std::to_string(steps) + " steps (" + mode + ")";
  if (when == "gpu_utilization_below") return "gpu_utilization_below " + num(percent) + " % for " + num(for_s) + " s";
  return "no_output for " + num(for_s) + " s";
}

nlohmann::json JobSpec::ToJson() const {
  json j;
  j["name"] = name;
  if (!role.empty()) j["role"] = role;
  j["entrypoint"]["command"] = shell ? json(command[0]) : json(command);
  j["entrypoint"]["hyperparameters"] = hyperparameters;
  j["entrypoint"]["launcher"] = launcher;
  if (!source.empty()) j["source"] = source;
  j["channels"] = json::array();
  for (const auto& c : channels) j["channels"].push_back({{"name", c.name}, {"uri", c.uri}, {"mode", c.mode}});
  if (!output_uri.empty()) j["output"]["uri"] = output_uri;
  if (!checkpoint_uri.empty()) {
    j["checkpoint"]["uri"] = checkpoint_uri;
    if (!checkpoint_local_path.empty()) j["checkpoint"]["local_path"] = checkpoint_local_path;
    j["checkpoint"]["sync"] = checkpoint_sync;
  }
  j["resources"] = {{"instance_type", instance_type},
                    {"instance_count", instance_count},
                    {"procs_per_instance", procs_per_instance},
                    {"keep_alive_s", keep_alive_s}};
  if (memory_mb > 0) j["resources"]["memory_mb"] = memory_mb;
  if (cpus > 0) j["resources"]["cpus"] = cpus;
  if (!sandbox) j["sandbox"] = false;
  if (!image.empty()) j["image"] = image;
  j["stopping"] = {{"max_runtime_s", max_runtime_s}, {"max_pending_s", max_pending_s}, {"grace_period_s", grace_period_s},
                   {"hang_timeout_s", hang_timeout_s}, {"hang_startup_s", hang_startup_s}, {"rules", json::array()}};
  for (const StoppingRule& x : stopping_rules) j["stopping"]["rules"].push_back(StoppingRuleJson(x));
  j["retry"] = {{"max_attempts", max_attempts}};
  j["metric_definitions"] = json::array();
  for (const auto& m : metric_definitions) j["metric_definitions"].push_back({{"name", m.name}, {"regex", m.regex}});
  j["environment"] = environment;
  if (!secrets.empty()) j["secrets"] = secrets;
  return j;
}

std::vector<std::string> JobSpec::RankArgv() const {
  std::vector<std::string> argv;
  if (shell) {
    std::string line = command[0];
    for (const auto& [k, v] : hyperparameters) {
      std::string q;  // single-quoted for the shell: ' becomes '\''
      for (char ch : v) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
      line += " --" + k + " '" + q + "'";
    }
    return {"/bin/sh", "-c", line};
  }
  argv = command;
  const bool builtin = IsBuiltinTrainer(command);
  for (const auto& [k, v] : hyperparameters) {
    if (builtin) {
      argv.push_back("--set");
      argv.push_back(k + "=" + v);
    } else {
      argv.push_back("--" + k);
      argv.push_back(v);
    }
  }
  return argv;
}

}  // namespace anneal
