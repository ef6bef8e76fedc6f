#include "runtime/memory_check.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace ordo {

uint64_t parse_mem_available(const std::string& meminfo) {
  std::istringstream in(meminfo);
  std::string line;
  const std::string label = "MemAvailable:";
  while (std::getline(in, line)) {
    if (line.rfind(label, 0) != 0)
      continue;
    std::istringstream fields(line.substr(label.size()));
    uint64_t value = 0;
    std::string unit;
    if (!(fields >> value))
      return 0;
    fields >> unit;
    if (unit.empty())
      return value; // /proc/meminfo gives kB; a bare number is bytes
    if (unit == "kB")
      return value * 1024;
    return 0;
  }
  return 0;
}

uint64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  if (!in)
    return 0;
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_mem_available(ss.str());
}

std::string format_bytes(uint64_t bytes) {
  static const char* const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024)
    return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
  double v = static_cast<double>(bytes) / 1024.0;
  int u = 0;
  // Move up while the value, rounded to one decimal, would read 1024.0 or more.
  while (u + 1 < 6 && v >= 1023.95) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

void check_allocation(const std::string& key, uint64_t bytes, uint64_t available) {
  if (available == 0 || bytes <= available)
    return;
  throw std::runtime_error(key + " needs " + format_bytes(bytes) + " of memory (" + std::to_string(bytes) +
                           " bytes) but only " + format_bytes(available) + " are available");
}

} // namespace ordo
