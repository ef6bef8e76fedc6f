// `ordo proxy`: an OpenAI-compatible front over prefill and decode nodes (issue 13, docs/proxy.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ordo {

// Serves until SIGINT / SIGTERM; prints `listening on http://HOST:PORT` once bound. Returns the
// process exit code (2: invalid config, 1: cannot bind).
int run_proxy(const std::string& config_path, const std::vector<std::string>& sets, std::optional<int> port);

} // namespace ordo
