// Scratch directories for a test executable: made under /tmp, removed with everything in them
// when the executable exits. Tests only (header-only).
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <stdlib.h>

namespace ordo::test {

// A fresh directory /tmp/PREFIX_XXXXXX.
inline std::string scratch_dir(const std::string& prefix) {
  struct made {
    std::vector<std::string> dirs;
    ~made() {
      for (const auto& d : dirs) {
        std::error_code ignored;
        std::filesystem::remove_all(d, ignored);
      }
    }
  };
  static made all;
  std::string path = "/tmp/" + prefix + "_XXXXXX";
  if (!::mkdtemp(path.data()))
    throw std::runtime_error("cannot make a scratch directory " + path);
  all.dirs.push_back(path);
  return path;
}

} // namespace ordo::test
