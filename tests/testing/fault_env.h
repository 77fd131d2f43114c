// FaultEnv: wraps a real Env and fails chosen operations, to test that no failure leaves a partial
// file that looks complete. Counts writes (Append) and renames; fails the Nth of each when asked.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "core/env.h"

namespace anneal::testing {

class FaultEnv final : public Env {
 public:
  explicit FaultEnv(Env& base) : base_(base) {}
  // Fail the n-th (1-based) Append / Rename from now on; 0 = never.
  void FailAppendNumber(int n) { fail_append_at_ = n; }
  void FailRenameNumber(int n) { fail_rename_at_ = n; }
  int appends() const { return appends_; }
  int renames() const { return renames_; }

  Result<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& p) override { return base_.OpenForRead(p); }
  Result<std::unique_ptr<MappedFile>> Map(const std::string& p, MapMode m) override { return base_.Map(p, m); }
  Result<std::unique_ptr<WritableFile>> OpenForWrite(const std::string& p) override {
    auto f = base_.OpenForWrite(p);
    if (!f.ok()) return f.status();
    return std::unique_ptr<WritableFile>(new File(this, std::move(f).value()));
  }
  Status Rename(const std::string& a, const std::string& b) override {
    if (++renames_ == fail_rename_at_) return IoError("injected rename failure for " + b);
    return base_.Rename(a, b);
  }
  Status Remove(const std::string& p) override { return base_.Remove(p); }
  Status CreateDirs(const std::string& p) override { return base_.CreateDirs(p); }
  bool Exists(const std::string& p) override { return base_.Exists(p); }
  bool IsDirectory(const std::string& p) override { return base_.IsDirectory(p); }
  Result<uint64_t> FileSize(const std::string& p) override { return base_.FileSize(p); }
  Result<std::vector<std::string>> ListDir(const std::string& p) override { return base_.ListDir(p); }

 private:
  class File final : public WritableFile {
   public:
    File(FaultEnv* env, std::unique_ptr<WritableFile> f) : env_(env), f_(std::move(f)) {}
    Status Append(std::string_view data) override {
      if (++env_->appends_ == env_->fail_append_at_) {
        // Write half, then fail: a torn write.
        (void)f_->Append(data.substr(0, data.size() / 2));
        return IoError("injected write failure");
      }
      return f_->Append(data);
    }
    Status Close() override { return f_->Close(); }

   private:
    FaultEnv* env_;
    std::unique_ptr<WritableFile> f_;
  };
  Env& base_;
  std::atomic<int> appends_{0}, renames_{0};
  int fail_append_at_ = 0, fail_rename_at_ = 0;
};

}  // namespace anneal::testing
