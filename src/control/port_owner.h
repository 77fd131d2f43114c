// Who listens on a TCP port of this machine, for a server that cannot bind it: the listening socket's
// inode from /proc/net/tcp and tcp6, then the process holding that socket among /proc/<pid>/fd (only
// this OS user's processes can be looked into).
#pragma once

#include <string>

namespace anneal {

// "pid 1234 (anneal)" for the process listening on `port`; "a process of another user" when the
// socket is found but not its process; "" when nothing listens there.
std::string PortOwner(int port);

}  // namespace anneal
