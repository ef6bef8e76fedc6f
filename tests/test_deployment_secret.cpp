#include <catch.hpp>

#include <cstdlib>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/deployment_secret.hpp"

using namespace ordo;

namespace {

// A fresh 0700 directory under /tmp, removed at the end of the test.
struct temp_dir {
  std::string path;
  temp_dir() {
    char pattern[] = "/tmp/ordo-secret-XXXXXX";
    path = ::mkdtemp(pattern);
  }
  ~temp_dir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

std::string refusal(const std::string& path) {
  try {
    load_or_create_secret(path);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

void write_file(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream(path) << text;
  ::chmod(path.c_str(), mode);
}

} // namespace

TEST_CASE("a missing secret is created 0600 with 64 hex digits, and read back the same") {
  temp_dir dir;
  const std::string path = dir.path + "/secret";
  const deployment_secret first = load_or_create_secret(path);
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(st.st_size == 65);
  const deployment_secret again = load_or_create_secret(path);
  CHECK(again.key == first.key);
  CHECK(again.path == path);
}

TEST_CASE("the default path lives under XDG_RUNTIME_DIR, else ~/.config, in a 0700 directory") {
  temp_dir dir;
  const char* old_run = std::getenv("XDG_RUNTIME_DIR");
  const std::string saved_run = old_run ? old_run : "";
  ::setenv("XDG_RUNTIME_DIR", dir.path.c_str(), 1);
  CHECK(default_secret_path() == dir.path + "/ordo/secret");
  const deployment_secret s = load_or_create_secret("");
  CHECK(s.path == dir.path + "/ordo/secret");
  struct stat st {};
  REQUIRE(::stat((dir.path + "/ordo").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  ::unsetenv("XDG_RUNTIME_DIR");
  const char* old_home = std::getenv("HOME");
  const std::string saved_home = old_home ? old_home : "";
  ::setenv("HOME", dir.path.c_str(), 1);
  CHECK(default_secret_path() == dir.path + "/.config/ordo/secret");
  CHECK(load_or_create_secret("").path == dir.path + "/.config/ordo/secret");
  ::setenv("HOME", saved_home.c_str(), 1);
  if (old_run)
    ::setenv("XDG_RUNTIME_DIR", saved_run.c_str(), 1);
}

TEST_CASE("concurrent first starts agree on one secret") {
  temp_dir dir;
  const std::string path = dir.path + "/secret";
  constexpr int n = 8;
  int fds[n][2];
  for (int i = 0; i < n; ++i) {
    REQUIRE(::pipe(fds[i]) == 0);
    if (::fork() == 0) {
      std::string hex;
      try {
        const auto key = load_or_create_secret(path).key;
        hex = hmac_hex(key, "who");
      } catch (...) {
        hex = "failed";
      }
      (void)!::write(fds[i][1], hex.data(), hex.size());
      ::_exit(0);
    }
  }
  std::string seen;
  for (int i = 0; i < n; ++i) {
    char buf[128] = {};
    const ssize_t got = ::read(fds[i][0], buf, sizeof buf - 1);
    const std::string hex(buf, got > 0 ? static_cast<size_t>(got) : 0);
    CHECK(hex.size() == 64);
    if (seen.empty())
      seen = hex;
    CHECK(hex == seen);
  }
  while (::wait(nullptr) > 0) {
  }
  CHECK(hmac_hex(load_or_create_secret(path).key, "who") == seen);
}

TEST_CASE("a secret others may read, a foreign directory, a symlink or bad contents are refused, naming the fix") {
  temp_dir dir;
  const std::string path = dir.path + "/secret";
  write_file(path, std::string(64, 'a') + "\n", 0644);
  std::string why = refusal(path);
  CHECK(why.find(path) != std::string::npos);
  CHECK(why.find("mode 0644") != std::string::npos);
  CHECK(why.find("chmod 600") != std::string::npos);

  write_file(path, "not hex at all\n", 0600);
  CHECK(refusal(path).find("64 hex digits") != std::string::npos);
  write_file(path, std::string(63, 'a') + "g\n", 0600);
  CHECK(refusal(path).find("character 64 is not a hex digit") != std::string::npos);

  write_file(path, std::string(64, 'b') + "\n", 0600);
  REQUIRE(::symlink(path.c_str(), (dir.path + "/link").c_str()) == 0);
  CHECK(refusal(dir.path + "/link").find("symbolic link") != std::string::npos);

  // A directory other users may write: they could swap the file.
  REQUIRE(::mkdir((dir.path + "/open").c_str(), 0777) == 0);
  ::chmod((dir.path + "/open").c_str(), 0777);
  CHECK(refusal(dir.path + "/open/secret").find("may be written by other users") != std::string::npos);
  CHECK(refusal("/tmp/ordo-secret-in-tmp").find("may be written by other users") != std::string::npos);

  // The default directory with a loose mode is refused, naming chmod 700.
  ::setenv("XDG_RUNTIME_DIR", dir.path.c_str(), 1);
  REQUIRE(::mkdir((dir.path + "/ordo").c_str(), 0755) == 0);
  ::chmod((dir.path + "/ordo").c_str(), 0755);
  CHECK(refusal("").find("chmod 700") != std::string::npos);
  ::unsetenv("XDG_RUNTIME_DIR");
}

TEST_CASE("HMAC-SHA256 and SHA-256 give known values; a changed message, key or digest does not match") {
  // SHA-256("abc") from FIPS 180-2.
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  secret_key k{};
  for (size_t i = 0; i < k.size(); ++i)
    k[i] = static_cast<uint8_t>(i);
  // HMAC-SHA256(key = 00..1f, "abc"), computed with Python's hmac module.
  CHECK(hmac_hex(k, "abc") == "f0133729c4163dede81e21cd47839256da58171238c8a0d874397c73b14e1e47");
  CHECK(hmac_matches(k, "abc", hmac_hex(k, "abc")));
  std::string upper = hmac_hex(k, "abc");
  for (char& c : upper)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  CHECK(hmac_matches(k, "abc", upper));
  CHECK_FALSE(hmac_matches(k, "abd", hmac_hex(k, "abc")));
  CHECK_FALSE(hmac_matches(k, "abc", hmac_hex(k, "abc").substr(1)));
  secret_key other = k;
  other[31] ^= 1;
  CHECK_FALSE(hmac_matches(other, "abc", hmac_hex(k, "abc")));
  CHECK(random_hex(16).size() == 32);
  CHECK(random_hex(16) != random_hex(16));
}
