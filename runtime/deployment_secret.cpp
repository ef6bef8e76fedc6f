#include "runtime/deployment_secret.hpp"

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

namespace ordo {

namespace {

constexpr size_t secret_file_max_bytes = 4096;

int hex_value(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

[[noreturn]] void refuse(const std::string& path, const std::string& why) {
  throw std::runtime_error("security.secret_file = " + path + ": " + why);
}

std::string mode_text(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

std::string parent_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// The directory holding the secret: ours, and writable by nobody else (whoever may write it may
// replace the file). `create`: the default directory, made 0700 when missing.
void check_directory(const std::string& file, const std::string& dir, bool create) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT || !create)
      refuse(file, "cannot inspect its directory " + dir + ": " + std::strerror(errno));
    check_directory(file, parent_of(dir), false);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      refuse(file, "cannot create its directory " + dir + ": " + std::strerror(errno));
    if (::lstat(dir.c_str(), &st) != 0)
      refuse(file, "cannot inspect its directory " + dir + ": " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode))
    refuse(file, dir + " is not a directory");
  if (create) {
    if (st.st_uid != ::geteuid())
      refuse(file, "its directory " + dir + " belongs to uid " + std::to_string(st.st_uid) + ", not to this user (uid " +
                       std::to_string(::geteuid()) + "); remove it or set security.secret_file");
    if (st.st_mode & 077)
      refuse(file, "its directory " + dir + " has mode " + mode_text(st.st_mode) + "; run chmod 700 " + dir);
    return;
  }
  // A parent we did not create: others may read it, but not write it (sticky dirs like /tmp
  // still let anybody create a name in them).
  if ((st.st_mode & 022) != 0)
    refuse(file, "its directory " + dir + " (mode " + mode_text(st.st_mode) +
                     ") may be written by other users; keep the secret in a directory only you can write");
  if (st.st_uid != ::geteuid() && st.st_uid != 0)
    refuse(file, "its directory " + dir + " belongs to uid " + std::to_string(st.st_uid) +
                     "; keep the secret in a directory of your own");
}

// Writes a fresh secret next to `path` and links it there; another process that got there first
// wins (EEXIST), and everybody reads whatever the name holds afterwards.
void create_secret(const std::string& path) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + random_hex(6);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    refuse(path, "cannot create " + tmp + ": " + std::strerror(errno));
  const std::string text = random_hex(32) + "\n";
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  const int write_errno = errno;
  ::close(fd);
  if (!written) {
    ::unlink(tmp.c_str());
    refuse(path, "cannot write " + tmp + ": " + std::strerror(write_errno));
  }
  const int linked = ::link(tmp.c_str(), path.c_str());
  const int link_errno = errno;
  ::unlink(tmp.c_str());
  if (linked != 0 && link_errno != EEXIST)
    refuse(path, "cannot create it: " + std::string(std::strerror(link_errno)));
}

secret_key read_secret(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    refuse(path, errno == ELOOP ? std::string("is a symbolic link; point security.secret_file at the file itself")
                                : "cannot open it: " + std::string(std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    refuse(path, "cannot inspect it: " + std::string(std::strerror(errno)));
  }
  auto fail = [&](const std::string& why) {
    ::close(fd);
    refuse(path, why);
  };
  if (!S_ISREG(st.st_mode))
    fail("is not a regular file");
  if (st.st_uid != ::geteuid())
    fail("belongs to uid " + std::to_string(st.st_uid) + ", not to this user (uid " + std::to_string(::geteuid()) +
         "); use a secret file of your own");
  if (st.st_mode & 077)
    fail("has mode " + mode_text(st.st_mode) + ", readable or writable by others; run chmod 600 " + path +
         " (and replace the secret if others may have read it)");
  if (st.st_size > static_cast<off_t>(secret_file_max_bytes))
    fail("is " + std::to_string(st.st_size) + " bytes; a secret file holds 64 hex digits");
  std::string text(secret_file_max_bytes, '\0');
  const ssize_t n = ::read(fd, text.data(), text.size());
  ::close(fd);
  if (n < 0)
    refuse(path, "cannot read it: " + std::string(std::strerror(errno)));
  text.resize(static_cast<size_t>(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' '))
    text.pop_back();
  secret_key key{};
  if (text.size() != 2 * key.size())
    refuse(path, "holds " + std::to_string(text.size()) + " characters; a secret file holds 64 hex digits " +
                     "(delete it to have a new one made)");
  for (size_t i = 0; i < key.size(); ++i) {
    const int hi = hex_value(text[2 * i]), lo = hex_value(text[2 * i + 1]);
    if (hi < 0 || lo < 0)
      refuse(path, "character " + std::to_string(2 * i + (hi < 0 ? 1 : 2)) +
                       " is not a hex digit; a secret file holds 64 hex digits");
    key[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return key;
}

} // namespace

std::string to_hex(const uint8_t* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 15];
  }
  return out;
}

std::string default_secret_path() {
  if (const char* run = std::getenv("XDG_RUNTIME_DIR"); run && run[0] == '/')
    return std::string(run) + "/ordo/secret";
  if (const char* home = std::getenv("HOME"); home && home[0] == '/')
    return std::string(home) + "/.config/ordo/secret";
  throw std::runtime_error("security.secret_file is not set, and neither XDG_RUNTIME_DIR nor HOME names a "
                           "directory to keep the deployment secret in; set security.secret_file");
}

deployment_secret load_or_create_secret(const std::string& configured) {
  const bool by_default = configured.empty();
  deployment_secret out;
  out.path = by_default ? default_secret_path() : configured;
  if (out.path.empty() || out.path.back() == '/')
    refuse(out.path, "names a directory, not a file");
  const std::string dir = parent_of(out.path);
  if (by_default) {
    // ~/.config may not exist yet: made like any XDG directory, then ordo/ at 0700.
    const std::string above = parent_of(dir);
    struct stat st {};
    if (::stat(above.c_str(), &st) != 0 && errno == ENOENT && ::mkdir(above.c_str(), 0700) != 0 && errno != EEXIST)
      refuse(out.path, "cannot create " + above + ": " + std::strerror(errno));
  }
  check_directory(out.path, dir, by_default);
  struct stat st {};
  if (::lstat(out.path.c_str(), &st) != 0) {
    if (errno != ENOENT)
      refuse(out.path, "cannot inspect it: " + std::string(std::strerror(errno)));
    create_secret(out.path);
  }
  out.key = read_secret(out.path);
  return out;
}

std::string hmac_hex(const secret_key& key, const std::string& message) {
  uint8_t digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
            reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &len))
    throw std::runtime_error("HMAC-SHA256 failed (OpenSSL)");
  return to_hex(digest, len);
}

bool hmac_matches(const secret_key& key, const std::string& message, const std::string& hex) {
  const std::string want = hmac_hex(key, message);
  if (hex.size() != want.size())
    return false;
  std::string lower = hex;
  for (char& c : lower)
    if (c >= 'A' && c <= 'F')
      c = static_cast<char>(c - 'A' + 'a');
  return CRYPTO_memcmp(want.data(), lower.data(), want.size()) == 0;
}

std::string sha256_hex(const std::string& data) {
  uint8_t digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr))
    throw std::runtime_error("SHA-256 failed (OpenSSL)");
  return to_hex(digest, len);
}

std::string random_hex(size_t num_bytes) {
  std::string raw(num_bytes, '\0');
  size_t got = 0;
  while (got < num_bytes) {
    const ssize_t n = ::getrandom(raw.data() + got, num_bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      throw std::runtime_error("getrandom failed: " + std::string(std::strerror(errno)));
    }
    got += static_cast<size_t>(n);
  }
  return to_hex(reinterpret_cast<const uint8_t*>(raw.data()), raw.size());
}

} // namespace ordo
