#include "tools/topo.hpp"

#include <iostream>

namespace ordo {

int run_topo(const std::string& file) {
  std::cerr << "ordo topo run " << file << ": not built yet\n";
  return 2;
}

} // namespace ordo
