// OpenS3ObjectStore in the slim build (ANNEAL_SLIM: no libcurl, no OpenSSL): s3:// is refused, naming the fix.
#include "storage/object_store.h"

namespace anneal {

Result<std::unique_ptr<ObjectStore>> OpenS3ObjectStore(const std::string& uri, const StorageVars&, Clock&) {
  return InvalidInput(uri + ": this anneal is the slim build, which has no S3 client (no libcurl): use a local "
                            "folder, or the full build (scripts/setup.sh, then cmake --preset release)");
}

}  // namespace anneal
