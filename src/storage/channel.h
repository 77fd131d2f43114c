// Data channels (the job spec's `mode`, DESIGN.md): how a training run gets its dataset when it does
// not live on a local disk.
//   shared    data.dir is a mounted path every instance sees (a local folder, NFS, a FUSE mount):
//             read in place. A URI with a remote scheme is refused with the fix.
//   file      data.dir is a URI (s3://bucket/prefix, file:///dir, or a folder): every object under it
//             is copied to a local folder before training — a bounded number at once, each checked
//             against dataset.json's XXH64 (when the dataset has one) and written atomically, with a
//             progress bar; files already there with the right size and checksum are kept, so a
//             restarted job copies only what is missing. The loader then reads the local copy.
// On one instance only local rank 0 copies; the others wait for its completion marker.
// Not built: `fastfile` (streaming shards through range reads during training).
#pragma once

#include <string>

#include "core/status.h"

namespace anneal {

struct ChannelOptions {
  std::string mode = "shared";  // shared | file
  std::string local_dir;        // file: where the copy goes ("" = /tmp/anneal-channels/<hash of the URI>)
  int parallel = 4;             // file: objects copied at once
  int local_rank = 0;           // only local rank 0 copies
  double wait_s = 3600;         // the other local ranks wait this long for the copy
  bool quiet = false;           // no progress output
};

// The local folder the loader should read.
Result<std::string> PrepareDataChannel(const std::string& uri, const ChannelOptions& o);

}  // namespace anneal
