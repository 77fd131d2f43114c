// Data channels (the job spec's `mode`, DESIGN.md): how a training run gets its dataset when it does
// not live on a local disk.
//   shared    data.dir is a mounted path every instance sees (a local folder, NFS, a FUSE mount):
//             read in place. A URI with a remote scheme is refused with the fix.
//   file      data.dir is a URI (s3://bucket/prefix, file:///dir, or a folder): every object under it
//             is copied to a local folder before training — a bounded number at once, each checked
//             against dataset.json's XXH64 (when the dataset has one) and written atomically, with a
//             progress bar; files already there with the right size and checksum are kept, so a
//             restarted job copies only what is missing. The loader then reads the local copy.
//   fastfile  data.dir is a URI read during training, no copy: shards are fetched on demand by range
//             reads of 4 MB blocks, the next block read ahead, 16 blocks cached per shard, at most 8
//             fetches in flight (data/shard.h); every read pins the object's ETag from the listing,
//             so an object rewritten under training is an error (exit 3), never a mix. Shards are
//             checked by size and ETag, not by reading them whole.
// On one instance only local rank 0 copies; the others wait for its completion marker.
#pragma once

#include <string>

#include "core/status.h"
#include "data/loader.h"
#include "storage/object_store.h"

namespace anneal {

struct ChannelOptions {
  std::string mode = "shared";  // shared | file | fastfile
  std::string local_dir;        // file: where the copy goes ("" = /tmp/anneal-channels/<hash of the URI>)
  int parallel = 4;             // file: objects copied at once
  int local_rank = 0;           // only local rank 0 copies
  double wait_s = 3600;         // the other local ranks wait this long for the copy
  bool quiet = false;           // no progress output
  StorageVars storage;          // explicit storage settings (an execution role's credentials)
  Clock* clock = &Clock::Real();  // the wait for local rank 0's copy
};

// The local folder the loader should read (fastfile: the URI itself, read through OpenRemoteDataset).
Result<std::string> PrepareDataChannel(const std::string& uri, const ChannelOptions& o);

// fastfile: the dataset under uri as objects for the loader (data/loader.h RemoteDataset).
Result<std::shared_ptr<RemoteDataset>> OpenRemoteDataset(const std::string& uri);

}  // namespace anneal
