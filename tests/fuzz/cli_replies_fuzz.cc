// The server's replies as the CLI prints them (cli/job_text.h): `anneal describe`, `jobs`, `logs`
// and `metrics` over any JSON a server (an older one, a broken proxy, a hostile one) could answer.
// The first byte picks the view; the rest is the reply. Beyond not crashing (a field of another type
// used to throw out of main: the CLI ended with std::terminate), each view starts with its header.
#include "cli/job_text.h"
#include "core/bounded_parse.h"
#include "fuzz/fuzz_target.h"

ANNEAL_FUZZ_TARGET(cli_replies) {
  if (size == 0) return 0;
  auto j = anneal::ParseJsonBounded(anneal::fuzz::Text(data + 1, size - 1));
  if (!j.ok()) return 0;
  using namespace anneal::cli;
  switch (data[0] % 4) {
    case 0: FUZZ_EXPECT(DescribeText(*j).rfind("Job:", 0) == 0); break;
    case 1: FUZZ_EXPECT(JobsText(*j, 1.8e9).rfind("ID", 0) == 0); break;
    case 2: (void)LogLinesText(*j); break;
    default: FUZZ_EXPECT(MetricsText(*j).rfind("NAME", 0) == 0); break;
  }
  return 0;
}
