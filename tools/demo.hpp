// `ordo demo`: a node in-process, a multi-turn workload sent twice over HTTP with an HBM
// eviction between the passes, and a table comparing each request with its cold run.
#pragma once

#include <string>
#include <vector>

namespace ordo {

int run_demo(const std::string& config_path, const std::vector<std::string>& overrides);

} // namespace ordo
