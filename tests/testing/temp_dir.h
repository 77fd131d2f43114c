// A fresh temporary folder per test, removed with everything in it when the object dies.
#pragma once

#include <string>

namespace anneal::testing {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  // path() + "/" + name
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  // Writes data to path()/name (creating folders) and returns the full path.
  std::string Write(const std::string& name, const std::string& data) const;

 private:
  std::string path_;
};

}  // namespace anneal::testing
