#include "tools/certs.hpp"

#include <iostream>

#include "runtime/tls.hpp"

namespace ordo {

int run_certs(const certs_options& opt) {
  try {
    if (ensure_certificate_authority(opt.dir))
      std::cout << "made the deployment's CA: " << opt.dir << "/ca.crt (its key " << opt.dir
                << "/ca.key stays here, 0600)\n";
    for (const std::string& name : opt.names) {
      const issued_certificate c = issue_certificate(opt.dir, name, opt.role, opt.days);
      std::cout << name << " (role " << opt.role << ", " << opt.days << " days):\n"
                << "  security.tls = \"on\"\n"
                << "  security.certificate = \"" << c.certificate << "\"\n"
                << "  security.key = \"" << c.key << "\"\n"
                << "  security.cafile = \"" << opt.dir << "/ca.crt\"\n";
    }
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
  return 0;
}

} // namespace ordo
