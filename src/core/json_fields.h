// JsonFields: the optional fields of a JSON object that came from outside (an agent's report, a
// server's answer), read each as the type of its destination: absent or null keeps the value there
// (the default); any other type, or a number out of the destination's range, is an error naming the
// field ("node: must be a whole number, got \"x\""). Never throws. Read every field, then status().
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace anneal {

class JsonFields {
 public:
  // what: the document, for errors ("the node report"); a j that is no object is an error at once.
  // j must outlive this reader (it is read in place).
  JsonFields(const nlohmann::json& j, std::string what);
  JsonFields& Get(const char* key, int* out);
  JsonFields& Get(const char* key, int64_t* out);
  JsonFields& Get(const char* key, double* out);  // finite
  JsonFields& Get(const char* key, bool* out);
  JsonFields& Get(const char* key, std::string* out);
  JsonFields& Get(const char* key, std::vector<std::string>* out);
  JsonFields& Get(const char* key, std::map<std::string, std::string>* out);
  // An object or an array, as it is.
  JsonFields& GetObject(const char* key, nlohmann::json* out);
  JsonFields& GetArray(const char* key, nlohmann::json* out);
  // The first error, or OK.
  Status status() const;

 private:
  const nlohmann::json* At(const char* key);  // null: absent, null, or an earlier error
  void Fail(const char* key, const std::string& want);
  const nlohmann::json& j_;
  std::string what_;
  std::string error_;
};

}  // namespace anneal
