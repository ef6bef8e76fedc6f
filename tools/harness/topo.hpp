// `ordo topo run FILE.toml`: scripted multi-process topologies (issue 13, docs/topologies.md).
#pragma once

#include <string>

namespace ordo {

// Runs the topology in `file`: starts its processes, runs its steps, prints one line per step and
// `N passed, M failed`, stops every process it started. Returns 0 iff M is 0 (2: a bad file).
int run_topo(const std::string& file);

} // namespace ordo
