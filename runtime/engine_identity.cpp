#include "runtime/engine_identity.hpp"

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include <xxhash.h>

namespace ordo {

std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  if (!in)
    return {};
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  const char* ws = " \t\r\n";
  auto b = s.find_first_not_of(ws);
  if (b == std::string::npos)
    return {};
  auto e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

uint64_t instance_nonce() {
  std::random_device rd;
  uint64_t n = 0;
  while (n == 0)
    n = (uint64_t{rd()} << 32) ^ uint64_t{rd()};
  return n;
}

std::string make_engine_id(const std::string& kind, uint16_t bound_port, uint64_t nonce,
                           const std::string& boot_id) {
  // Fields separated so ("a", 1) and ("a1", …) cannot collide by concatenation.
  std::string text = kind;
  text += '\0';
  text += std::to_string(bound_port);
  text += '\0';
  text += std::to_string(nonce);
  text += '\0';
  text += boot_id;
  const uint64_t h = XXH64(text.data(), text.size(), 0);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return kind + "-" + hex;
}

} // namespace ordo
