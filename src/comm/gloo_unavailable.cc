// ConnectGloo in the slim build (ANNEAL_SLIM: no Gloo): a group of more than one host rank is refused.
#include "comm/communicator.h"

namespace anneal {

Result<std::unique_ptr<Communicator>> ConnectGloo(Store*, const CommOptions&) {
  return InvalidInput("this anneal is the slim build, which has no Gloo: it trains one rank only (world size 1); "
                      "use the full build (scripts/setup.sh, then cmake --preset release) for several ranks");
}

}  // namespace anneal
