// TLS between hosts (issue 36, docs/security.md): the certificates of a deployment, the TLS
// context every CAF port and every outgoing actor connection of a process uses, and the role a
// certificate carries.
//
// A deployment has one CA (`ordo certs` makes it); each process has a certificate the CA signed,
// whose subject is O=ordo, OU=<role>, CN=<name>, with role "admin" or "node". Both ends of every
// connection present one and check the other's against the CA (mutual TLS 1.3); a name is not
// checked, the CA is the trust anchor. Pure OpenSSL (libssl/libcrypto), no CAF.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct ssl_st;     // SSL
struct ssl_ctx_st; // SSL_CTX

namespace ordo {

struct tls_files {
  std::string certificate; // PEM: this process's certificate (security.certificate)
  std::string key;         // PEM: its private key (security.key)
  std::string cafile;      // PEM: the deployment's CA certificate (security.cafile)
};

// [security] tls, certificate, key, cafile of a node's or `ordo store`'s config.
struct tls_settings {
  std::string mode = "off"; // "off" | "on"
  std::string certificate, key, cafile;
  bool on() const { return mode == "on"; }
  tls_files files() const { return {certificate, key, cafile}; }
};
// What is wrong with the settings as a config line ("security.tls = ...: ..."), or "".
std::string check_tls_settings(const tls_settings& s);
// Whether `host` is a loopback address or "localhost" (a CAF port bound there is not reachable
// from another host).
bool is_loopback_host(const std::string& host);
// The refusal of binding a CAF port on `host` (named by config key `host_key`) without TLS, or "".
std::string check_caf_bind(const std::string& host_key, const std::string& host, const tls_settings& s);

// Roles a certificate may carry (its subject's OU).
inline constexpr const char* tls_role_admin = "admin";
inline constexpr const char* tls_role_node = "node";

class tls_context {
public:
  // Loads and checks the three files: each readable PEM, the key matching the certificate, the
  // certificate signed by the CA and valid now, carrying a known role. Throws std::runtime_error
  // naming the file (and the security.* key that names it) and what is wrong.
  static std::shared_ptr<tls_context> load(const tls_files& files);
  ~tls_context();
  tls_context(const tls_context&) = delete;
  tls_context& operator=(const tls_context&) = delete;

  // A TLS session on connected socket `fd` (not owned), server side when `accepting`. Null (and
  // `why`) when OpenSSL cannot make one.
  ssl_st* new_session(int fd, bool accepting, std::string& why) const;
  const std::string& role() const { return role_; } // this process's certificate's role
  const std::string& certificate_pem() const { return cert_pem_; }
  const tls_files& files() const { return files_; }

  // Signs `data` with this process's key (ECDSA over SHA-256); the signature in lowercase hex.
  std::string sign_hex(const std::string& data) const;
  // Whether `cert_pem` was signed by this deployment's CA and is valid now, and `signature_hex` is
  // its key's over `data`. On success `role` is the certificate's role; otherwise `why` says what failed.
  bool verify_signed(const std::string& cert_pem, const std::string& data, const std::string& signature_hex,
                     std::string& role, std::string& why) const;

private:
  tls_context() = default;
  tls_files files_;
  ssl_ctx_st* ctx_ = nullptr;
  std::string role_;
  std::string cert_pem_;
};

// The role of the certificate the peer of an established session presented ("" if none).
std::string tls_peer_role(ssl_st* ssl);
// OpenSSL's error queue as one line, emptied ("" if empty).
std::string tls_error_text();

// What `ordo certs` makes (runtime/tls.cpp). `dir` holds ca.crt and ca.key (made when absent) and
// NAME.crt / NAME.key per name; keys are written 0600, never over an existing file.
struct issued_certificate {
  std::string certificate; // path
  std::string key;         // path
};
// Makes the CA in `dir` if it has none; returns whether it made one. Throws naming the file.
bool ensure_certificate_authority(const std::string& dir);
// Issues a certificate for `name` ([A-Za-z0-9._-], 1..64) with `role` ("admin" | "node"), valid
// `days` days, signed by the CA in `dir`. Throws naming what is wrong.
issued_certificate issue_certificate(const std::string& dir, const std::string& name, const std::string& role,
                                     int days);

} // namespace ordo
