#include "core/json_fields.h"

#include <climits>
#include <cmath>

#include "core/bounded_parse.h"

namespace anneal {

using nlohmann::json;

JsonFields::JsonFields(const json& j, std::string what) : j_(j), what_(std::move(what)) {
  if (!j_.is_object()) error_ = what_ + " is not a JSON object";
}

const json* JsonFields::At(const char* key) {
  if (!error_.empty()) return nullptr;
  const auto it = j_.find(key);
  return it == j_.end() || it->is_null() ? nullptr : &*it;
}

void JsonFields::Fail(const char* key, const std::string& want) {
  error_ = what_ + ": " + key + ": must be " + want + ", got " +
           j_.at(key).dump(-1, ' ', false, json::error_handler_t::replace).substr(0, 60);
}

JsonFields& JsonFields::Get(const char* key, int64_t* out) {
  if (const json* v = At(key)) {
    if (!JsonIntIn(*v, INT64_MIN, INT64_MAX, out)) Fail(key, "a whole number");
  }
  return *this;
}

JsonFields& JsonFields::Get(const char* key, int* out) {
  if (const json* v = At(key)) {
    int64_t x = 0;
    if (JsonIntIn(*v, INT32_MIN, INT32_MAX, &x)) *out = static_cast<int>(x);
    else Fail(key, "a whole number of 32 bits");
  }
  return *this;
}

JsonFields& JsonFields::Get(const char* key, double* out) {
  if (const json* v = At(key)) {
    if (v->is_number() && std::isfinite(v->get<double>())) *out = v->get<double>();
    else Fail(key, "a number");
  }
  return *this;
}

JsonFields& JsonFields::Get(const char* key, bool* out) {
  if (const json* v = At(key)) {
    if (v->is_boolean()) *out = v->get<bool>();
    else Fail(key, "true or false");
  }
  return *this;
}

JsonFields& JsonFields::Get(const char* key, std::string* out) {
  if (const json* v = At(key)) {
    if (v->is_string()) *out = v->get<std::string>();
    else Fail(key, "a string");
  }
  return *this;
}

JsonFields& JsonFields::Get(const char* key, std::vector<std::string>* out) {
  const json* v = At(key);
  if (!v) return *this;
  std::vector<std::string> x;
  for (const json& e : v->is_array() ? *v : json::array()) {
    if (!e.is_string()) return Fail(key, "a list of strings"), *this;
    x.push_back(e.get<std::string>());
  }
  if (!v->is_array()) return Fail(key, "a list of strings"), *this;
  *out = std::move(x);
  return *this;
}

JsonFields& JsonFields::Get(const char* key, std::map<std::string, std::string>* out) {
  const json* v = At(key);
  if (!v) return *this;
  if (!v->is_object()) return Fail(key, "a mapping of strings to strings"), *this;
  std::map<std::string, std::string> x;
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (!it->is_string()) return Fail(key, "a mapping of strings to strings"), *this;
    x[it.key()] = it->get<std::string>();
  }
  *out = std::move(x);
  return *this;
}

JsonFields& JsonFields::GetObject(const char* key, json* out) {
  if (const json* v = At(key)) {
    if (v->is_object()) *out = *v;
    else Fail(key, "an object");
  }
  return *this;
}

JsonFields& JsonFields::GetArray(const char* key, json* out) {
  if (const json* v = At(key)) {
    if (v->is_array()) *out = *v;
    else Fail(key, "a list");
  }
  return *this;
}

Status JsonFields::status() const { return error_.empty() ? Status::Ok() : InvalidInput(error_); }

}  // namespace anneal
