// The deployment secret (SPEC A7, docs/security.md): 32 random bytes in a file only its owner can
// read, shared by every ordo process one user starts on one host with no configuration. It keys
// the HMAC-SHA256 that signs a prefill node's kv_transfer_params and the proofs of a store
// session's hello, so a client or a stranger's process cannot choose a peer or pose as one.
//
// The file holds 64 hex digits and a newline. Default path: $XDG_RUNTIME_DIR/ordo/secret, else
// ~/.config/ordo/secret; security.secret_file overrides it (copy the file to another host to let
// its processes in). Created on first use: a temporary file (O_EXCL, 0600) linked to its name,
// so concurrent starts agree on one secret. Refused, naming the file and the fix: another owner,
// a mode that lets anybody else read it, a directory others may write, a symlink, bad contents.
// Pure POSIX and OpenSSL's libcrypto: no CAF.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace ordo {

using secret_key = std::array<uint8_t, 32>;

struct deployment_secret {
  secret_key key{};
  std::string path; // where it was read from
};

// $XDG_RUNTIME_DIR/ordo/secret when XDG_RUNTIME_DIR is set (and absolute), else
// $HOME/.config/ordo/secret. Throws std::runtime_error when neither variable is usable.
std::string default_secret_path();

// Reads the secret at `path` ("" = default_secret_path()), creating it (and, for the default
// path, its 0700 directory) when it does not exist. Throws std::runtime_error naming the file,
// what is wrong and what to do.
deployment_secret load_or_create_secret(const std::string& path);

// `n` bytes as 2n lowercase hex digits.
std::string to_hex(const uint8_t* p, size_t n);
// HMAC-SHA256 of `message` under `key`, as 64 lowercase hex digits.
std::string hmac_hex(const secret_key& key, const std::string& message);
// Whether `hex` is hmac_hex(key, message); constant time in the digest's bytes.
bool hmac_matches(const secret_key& key, const std::string& message, const std::string& hex);
// SHA-256 of `data`, as 64 lowercase hex digits.
std::string sha256_hex(const std::string& data);
// `num_bytes` bytes from the kernel's random source, as lowercase hex.
std::string random_hex(size_t num_bytes);

} // namespace ordo
