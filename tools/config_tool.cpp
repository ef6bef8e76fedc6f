#include "tools/config_tool.hpp"

#include <iostream>

#include "runtime/config.hpp"
#include "runtime/store_config.hpp"
#include "tools/proxy/proxy_config.hpp"

namespace ordo {

std::string config_keys_markdown() {
  return "### `ordo node` (configs/default.toml)\n\n" + node_config_keys_table() +
         "\n### `ordo store` (configs/store.toml)\n\n" + store_config_keys_table() +
         "\n### `ordo proxy` (configs/proxy.toml)\n\n" + proxy_config_keys_table();
}

int run_config_keys() {
  std::cout << config_keys_markdown();
  return 0;
}

} // namespace ordo
