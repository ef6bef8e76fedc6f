// `ordo config keys`: every key of the node's, the store's and the proxy's config as markdown
// tables, made from the one declaration of each key (runtime/config_keys.hpp). docs/config.md holds
// this output between its BEGIN / END markers; tests/cli_config_docs.sh fails when they differ.
#pragma once

#include <string>

namespace ordo {

// The generated part of docs/config.md: one heading and table per config.
std::string config_keys_markdown();
int run_config_keys(); // prints config_keys_markdown(); 0

} // namespace ordo
