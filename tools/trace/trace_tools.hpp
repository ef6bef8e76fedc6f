// `ordo trace show | timeline | check` and `ordo replay` (docs/traces.md). Each returns the
// process exit status and prints its own errors (naming the file) to stderr.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ordo {

struct trace_show_options {
  std::string path;
  std::string actor;   // "" = every actor
  int64_t step = -1;   // -1 = every step; else only records of the step with this seq
};
// One readable line per record.
int run_trace_show(const trace_show_options& options);

// Chrome trace event JSON (Perfetto) of one or more trace files, one process per file (node).
int run_trace_timeline(const std::vector<std::string>& paths, const std::string& out_path);

// The DESIGN §2.1 rules on the happens-before graph: exit 0 with a one-line summary, 1 naming
// the first violation, 2 when the file cannot be read.
int run_trace_check(const std::string& path);

struct replay_options {
  std::string path;
  std::string actor;             // scheduler | block_pool | connector | store ("" with node)
  bool node = false;             // re-drive the recorded requests into a fresh node
  std::vector<std::string> sets; // config overrides for the fresh core or node
};
int run_replay(const replay_options& options);

} // namespace ordo
