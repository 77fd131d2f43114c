// ParseJsonBounded (core/bounded_parse.h): nlohmann's parser with a callback that drops everything
// below the depth limit, so a deep text costs its length in time and nothing in recursion.
#include "core/bounded_parse.h"

#include <cstdint>

namespace anneal {

Result<nlohmann::json> ParseJsonBounded(const std::string& text, const ParseLimits& limits) {
  using nlohmann::json;
  bool too_deep = false;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= limits.max_depth) {
      too_deep = true;
    }
    return !too_deep;
  };
  json doc = json::parse(text, cb, /*allow_exceptions=*/false);
  if (too_deep) {
    return InvalidInput("the JSON nests objects and arrays more than " + std::to_string(limits.max_depth) +
                        " deep, this server's limit: flatten it");
  }
  if (doc.is_discarded()) return InvalidInput("the body is not valid JSON");
  return doc;
}

bool JsonIntIn(const nlohmann::json& v, int64_t lo, int64_t hi, int64_t* out) {
  if (!v.is_number_integer()) return false;
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return false;
  const int64_t i = v.get<int64_t>();
  if (i < lo || i > hi) return false;
  *out = i;
  return true;
}

}  // namespace anneal
