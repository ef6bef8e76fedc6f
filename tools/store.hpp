// `ordo store`: the store server process of one host (docs/store.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ordo {

// Runs the store server until SIGINT or SIGTERM (then returns 0). Prints one stdout line,
// "listening on http://HOST:HTTPPORT tcp://HOST:PORT". Returns 2 for a bad config (the message
// names the key), 1 when the arena cannot be created or a port cannot be bound (named).
// `port` overrides store.port.
int run_store(const std::string& config_path, const std::vector<std::string>& sets, std::optional<int> port);

} // namespace ordo
