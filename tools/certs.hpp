// `ordo certs`: a deployment's CA and per-process certificates for security.tls (docs/security.md).
#pragma once

#include <string>
#include <vector>

namespace ordo {

struct certs_options {
  std::string dir;                // holds ca.crt / ca.key and NAME.crt / NAME.key
  std::vector<std::string> names; // one certificate each
  std::string role = "node";      // admin | node
  int days = 365;
};

// Makes the CA in `dir` when it has none, then one certificate per name; prints the config lines
// that use them. 0 on success, 2 on a refusal (printed, naming what is wrong).
int run_certs(const certs_options& opt);

} // namespace ordo
