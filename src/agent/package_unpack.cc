// UnpackPackage (agent/package_unpack.h): the digest, a listing by GNU tar (`tar -tvzf`, which
// decompresses without writing), the limits summed from the listing, then `tar -xzf`.
#include "agent/package_unpack.h"

#include <sstream>

#include "provision/command.h"
#include "core/crypto.h"
#include "core/env.h"

namespace anneal {

namespace {

// The member sizes a `tar -tv` listing gives (its third field), summed, and the member count.
Status SumListing(const std::string& listing, int64_t* bytes, int64_t* files) {
  std::istringstream in(listing);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::istringstream f(line);
    std::string mode, owner;
    int64_t size = -1;
    f >> mode >> owner >> size;
    if (size < 0) return InvalidInput("the source package's listing has a line tar did not size: " + line);
    *bytes += size;
    ++*files;
  }
  return Status::Ok();
}

}  // namespace

Status UnpackPackage(const std::string& bytes, const std::string& sha256, const std::string& tgz, const std::string& dest,
                     const UnpackLimits& limits) {
  if (const std::string got = Sha256Hex(bytes); got != sha256) {
    return PeerError("the source package arrived damaged (its SHA-256 is " + got + ", not " + sha256 + ")");
  }
  if (bytes.size() < 2 || static_cast<unsigned char>(bytes[0]) != 0x1f || static_cast<unsigned char>(bytes[1]) != 0x8b) {
    return InvalidInput("the source package is not gzip'd (a .tar.gz is expected; anneal submit packs one)");
  }
  if (Status st = Env::Default().WriteFileAtomic(tgz, bytes); !st.ok()) {
    return PeerError("keeping the source package on this instance failed (its disk?): " + st.message());
  }
  CommandOptions o;
  o.timeout_s = 600;
  ANNEAL_ASSIGN_OR_RETURN(CommandResult list, RunCommand({"tar", "-tvzf", tgz}, o));
  if (list.exit_code != 0 || list.timed_out) {
    return InvalidInput("the source package is not a readable .tar.gz: tar says " + list.err.substr(0, 400));
  }
  int64_t total = 0, files = 0;
  ANNEAL_RETURN_IF_ERROR(SumListing(list.out, &total, &files));
  if (total > limits.max_bytes) {
    return InvalidInput("the source package unpacks to " + std::to_string(total) + " bytes, more than this instance's limit of " +
                        std::to_string(limits.max_bytes) + " (anneal agent --max-unpacked-bytes): ship data through a channel, not the source");
  }
  if (files > limits.max_files) {
    return InvalidInput("the source package holds " + std::to_string(files) + " files, more than this instance's limit of " +
                        std::to_string(limits.max_files) + " (anneal agent --max-unpacked-files)");
  }
  ANNEAL_ASSIGN_OR_RETURN(CommandResult x, RunCommand({"tar", "-xzf", tgz, "-C", dest, "--no-same-owner"}, o));
  // The package listed whole and within the limits: a failure to write it out is this instance's
  // (a full disk: the chaos soak's), an infrastructure failure retried elsewhere, not the user's.
  if (x.exit_code != 0 || x.timed_out) {
    return PeerError("unpacking the source package on this instance failed (its disk?): tar says " + x.err.substr(0, 400));
  }
  return Status::Ok();
}

}  // namespace anneal
