#include "model/family.h"

#include <algorithm>
#include <cstdlib>

#include "core/check.h"
#include "model/gpt2/gpt2.h"
#include "model/llama/llama.h"

namespace anneal {

const std::vector<const ModelFamily*>& Families() {
  static const std::vector<const ModelFamily*> all = {&Gpt2Family(), &LlamaFamily()};
  return all;
}

Result<const ModelFamily*> FindFamily(const std::string& name) {
  std::string known;
  for (const ModelFamily* f : Families()) {
    if (name == f->name()) return f;
    known += (known.empty() ? "" : " | ") + std::string(f->name());
  }
  return InvalidInput("model.family '" + name + "' is not a known family: use " + known);
}

Result<const ModelFamily*> FindHfFamily(const std::string& architecture) {
  std::string known;
  for (const ModelFamily* f : Families()) {
    if (architecture == f->HfArchitecture()) return f;
    known += (known.empty() ? "" : ", ") + std::string(f->HfArchitecture());
  }
  return InvalidInput("architecture '" + architecture + "' is not one anneal takes: it takes " + known);
}

const ModelFamily& FamilyOf(const ModelConfig& c) {
  auto f = FindFamily(c.family);
  ANNEAL_CHECK(f.ok(), "a ModelConfig used before Finish() named its family");
  return **f;
}

std::string PresetList() {
  std::string out;
  for (const ModelFamily* f : Families()) {
    for (const std::string& p : f->PresetNames()) out += (out.empty() ? "" : ", ") + p;
  }
  return out;
}

std::vector<Op> OpsFor(const ModelConfig& c) {
  const std::vector<Op> mine = FamilyOf(c).Ops();
  std::vector<Op> out;
  for (Op op : AllOps()) {
    bool other = false;  // an op only other families use
    for (const ModelFamily* f : Families()) {
      for (Op o : f->Ops()) other = other || o == op;
    }
    if (!other || std::find(mine.begin(), mine.end(), op) != mine.end()) out.push_back(op);
  }
  return out;
}

std::optional<Op> MissingOp(const ModelConfig& c, const Backend& b, DType t) {
  for (Op op : OpsFor(c)) {
    if (!b.Supports(op, t)) return op;
  }
  return std::nullopt;
}

}  // namespace anneal
