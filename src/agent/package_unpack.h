// A job's source package on its instance: checked, then unpacked, within limits (issue 38). The
// bytes downloaded must have the SHA-256 the job names (else a transfer fault: infrastructure,
// retried); the archive is listed before anything is written, and one that is not a gzip'd tar, or
// whose members would unpack to more than max_bytes or more than max_files, is the user's package
// at fault (InvalidInput naming the limit: a user error, never retried).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace anneal {

struct UnpackLimits {
  int64_t max_bytes = int64_t{4} << 30;  // the members' sizes, summed
  int64_t max_files = 200000;
};

// bytes: the package as downloaded; sha256: the hex digest the job's source names; tgz: where to
// keep it; dest: an existing, empty folder.
Status UnpackPackage(const std::string& bytes, const std::string& sha256, const std::string& tgz, const std::string& dest,
                     const UnpackLimits& limits = {});

}  // namespace anneal
