// ParseYamlBounded (core/bounded_parse.h): yaml-cpp's event parser (YAML::Parser), not YAML::Load,
// building the JSON document as the events arrive, so each limit is checked before anything is built
// past it: an alias is refused where it appears (no expansion ever happens), and depth and node count
// are counted as mappings, sequences and scalars start.
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <regex>
#include <sstream>
#include <vector>

#include "core/bounded_parse.h"
#include "core/utf8.h"

namespace anneal {

namespace {

using nlohmann::json;

// Thrown from the handler to end the parse at the first limit passed (yaml-cpp propagates it).
struct Refused {
  std::string message;
};

class JsonBuilder : public YAML::EventHandler {
 public:
  JsonBuilder(const ParseLimits& l, bool as_strings) : limits_(l), as_strings_(as_strings) {}

  json Take() { return std::move(root_); }
  int documents() const { return documents_; }

  void OnDocumentStart(const YAML::Mark& m) override {
    if (++documents_ > 1) Refuse(m, "holds more than one YAML document (---): one job spec or config per text");
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t) override {
    if (AtKey()) Refuse(m, "has a mapping key that is not a plain name");
    Place(m, as_strings_ ? json("") : json(nullptr));
  }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override {
    Refuse(m, "uses a YAML alias (*name, or the merge key <<: *name), which is not accepted here (a few bytes of "
              "aliases can expand to gigabytes): write the value out in full");
  }
  void OnScalar(const YAML::Mark& m, const std::string& tag, YAML::anchor_t, const std::string& value) override {
    // An escape ("\ud800": a surrogate) can make a scalar that is no UTF-8 out of text that is.
    if (FindInvalidUtf8(value) != std::string::npos) Refuse(m, "has a scalar that is not UTF-8 (an escape of a surrogate?)");
    if (AtKey()) {  // a key stays the text it was written as
      Count(m);
      stack_.back().key = value;
      return;
    }
    Place(m, Scalar(tag, value));
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    Open(m, json::array());
  }
  void OnSequenceEnd() override { stack_.pop_back(); }
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    Open(m, json::object());
  }
  void OnMapEnd() override { stack_.pop_back(); }

 private:
  struct Frame {
    json* node;
    std::optional<std::string> key;  // a mapping's key waiting for its value
  };

  [[noreturn]] static void Refuse(const YAML::Mark& m, const std::string& what) {
    throw Refused{"line " + std::to_string(m.line + 1) + ": the text " + what};
  }

  void Count(const YAML::Mark& m) {
    if (++nodes_ > limits_.max_nodes) {
      Refuse(m, "has more than " + std::to_string(limits_.max_nodes) + " values, this server's limit: split it");
    }
  }

  json Scalar(const std::string& tag, const std::string& s) const {
    if (as_strings_ || tag != "?") return json(s);  // quoted (tag "!"), or every scalar a string
    if (s == "true" || s == "True") return json(true);
    if (s == "false" || s == "False") return json(false);
    if (s == "null" || s == "~") return json(nullptr);
    static const std::regex kInt("^[-+]?[0-9]+$"), kFloat("^[-+]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][-+]?[0-9]+)?$");
    if (std::regex_match(s, kInt)) {
      try {
        return json(std::stoll(s));
      } catch (...) {  // out of int64's range: the float below, or the string
      }
    }
    if (std::regex_match(s, kFloat)) {
      try {
        return json(std::stod(s));
      } catch (...) {  // out of double's range ("1e999"): the string, which a number's reader refuses by name
      }
    }
    return json(s);
  }

  // Whether the next event is a mapping's key.
  bool AtKey() const { return !stack_.empty() && stack_.back().node->is_object() && !stack_.back().key; }

  // Places a value: the root, a sequence's next item or the value of a mapping's waiting key. The
  // address it returns stays valid while the value is open (nothing is added beside it meanwhile).
  json* Place(const YAML::Mark& m, json v) {
    Count(m);
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& f = stack_.back();
    if (f.node->is_array()) {
      f.node->push_back(std::move(v));
      return &f.node->back();
    }
    json& slot = (*f.node)[*f.key];
    f.key.reset();
    slot = std::move(v);
    return &slot;
  }

  void Open(const YAML::Mark& m, json empty) {
    if (static_cast<int>(stack_.size()) >= limits_.max_depth) {
      Refuse(m, "nests mappings and sequences more than " + std::to_string(limits_.max_depth) +
                    " deep, this server's limit: flatten it");
    }
    if (AtKey()) Refuse(m, "has a mapping key that is not a plain name");
    json* at = Place(m, std::move(empty));
    stack_.push_back({at, std::nullopt});
  }

  const ParseLimits limits_;
  const bool as_strings_;
  json root_;  // null until the first value
  std::vector<Frame> stack_;
  int64_t nodes_ = 0;
  int documents_ = 0;
};

}  // namespace

Result<json> ParseYamlBounded(const std::string& text, const ParseLimits& limits, bool scalars_as_strings) {
  // UTF-8 only, as a JSON text must be: a string with an invalid byte could be stored, but never
  // written out again (the job store's JSON, a manifest) without failing there instead of here.
  if (const size_t bad = FindInvalidUtf8(text); bad != std::string::npos) {
    const size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + bad, '\n'));
    const size_t nl = bad == 0 ? std::string::npos : text.rfind('\n', bad - 1);
    const size_t column = bad - (nl == std::string::npos ? 0 : nl + 1) + 1;
    char hex[8];
    std::snprintf(hex, sizeof(hex), "0x%02X", static_cast<unsigned char>(text[bad]));
    return InvalidInput("not UTF-8 text: the byte " + std::string(hex) + " at line " + std::to_string(line) +
                        ", column " + std::to_string(column) + " is invalid; save the file as UTF-8");
  }
  std::istringstream in(text);
  JsonBuilder b(limits, scalars_as_strings);
  try {
    YAML::Parser p(in);
    while (p.HandleNextDocument(b)) {
    }
  } catch (const Refused& r) {
    return InvalidInput(r.message);
  } catch (const YAML::Exception& e) {
    return InvalidInput("YAML error at line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  return b.Take();
}

}  // namespace anneal
