// Documents from untrusted text (API bodies, job specs, configs), parsed under limits that hold
// DURING the parse, so a small text can never grow into a large document: YAML without aliases (a
// 433-byte spec of nested aliases expanded to ~1 GB), with a bound on depth and on node count; JSON
// with a bound on depth (its size is already its text's, but a deep one overflows the stack of every
// recursive reader after it, dump() included). The result is JSON either way (YAML is a superset).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace anneal {

struct ParseLimits {
  int max_depth = 64;        // nesting of mappings and sequences
  int64_t max_nodes = 200000;  // scalars, mappings and sequences in all
};

// YAML -> JSON. Plain (unquoted) scalars that read as numbers, booleans or null become those, quoted
// ones stay strings; with scalars_as_strings every scalar stays the string it was written as (the
// trainer's configs, which parse their values themselves) and null is "". An alias (*name, and so the
// merge key <<: *name), a mapping key that is not a scalar, or a limit passed: InvalidInput naming
// it, its line and the fix. (Not in the slim build, which has no YAML.)
Result<nlohmann::json> ParseYamlBounded(const std::string& text, const ParseLimits& limits = {},
                                        bool scalars_as_strings = false);

// Whether v is a whole number within [lo, hi] (unsigned ones above int64's range are not: a plain
// get<int>() would have wrapped 4294967297 to 1); *out gets it.
bool JsonIntIn(const nlohmann::json& v, int64_t lo, int64_t hi, int64_t* out);

// JSON under limits.max_depth: InvalidInput naming the byte and the limit, or the parser's error.
Result<nlohmann::json> ParseJsonBounded(const std::string& text, const ParseLimits& limits = {});

}  // namespace anneal
