// A folder's owner lock: a process holds an exclusive flock on DIR/.owner.lock for as long as it
// lives (the kernel drops it when the process ends, however it ends), so another process can tell a
// folder whose owner is gone. The agent holds its work folder's; the local backend reads a gone
// agent's spool only from a folder whose lock is free — also the folders of agents a previous server
// started, which this one never saw exit.
#pragma once

#include <string>

#include "core/status.h"

namespace anneal {

// Takes DIR's lock for the rest of this process (the descriptor is close-on-exec: children do not
// keep it). Fails (bad input) when another live process holds it: two agents on one --work-dir.
Status HoldDirLock(const std::string& dir);
// Whether DIR's lock is free now (no live process holds it). A folder without a lock file is free.
bool DirLockFree(const std::string& dir);

}  // namespace anneal
