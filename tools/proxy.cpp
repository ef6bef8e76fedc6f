#include "tools/proxy.hpp"

#include <iostream>

namespace ordo {

int run_proxy(const std::string& config_path, const std::vector<std::string>&, std::optional<int>) {
  std::cerr << "ordo proxy --config " << config_path << ": not built yet\n";
  return 2;
}

} // namespace ordo
