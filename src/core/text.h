// Whitespace trimming shared by the readers of text anneal gets from outside (HTTP headers, secret
// files, AWS config files, a tool's output): one definition instead of a copy per reader.
#pragma once

#include <string>

namespace anneal {

// s without the spaces, tabs, carriage returns and newlines at its end.
std::string TrimTrailing(std::string s);
// s without them at either end.
std::string Trim(std::string s);

}  // namespace anneal
