#include "runtime/tls.hpp"

#include "runtime/deployment_secret.hpp" // to_hex

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace ordo {

namespace {

constexpr size_t pem_max_bytes = 64 * 1024; // a certificate chain or key larger than this is refused

template <class T, void (*Free)(T*)>
struct freeing {
  void operator()(T* p) const { Free(p); }
};
using x509_ptr = std::unique_ptr<X509, freeing<X509, X509_free>>;
using pkey_ptr = std::unique_ptr<EVP_PKEY, freeing<EVP_PKEY, EVP_PKEY_free>>;
using bio_ptr = std::unique_ptr<BIO, freeing<BIO, BIO_free_all>>;
using store_ctx_ptr = std::unique_ptr<X509_STORE_CTX, freeing<X509_STORE_CTX, X509_STORE_CTX_free>>;
using md_ctx_ptr = std::unique_ptr<EVP_MD_CTX, freeing<EVP_MD_CTX, EVP_MD_CTX_free>>;

[[noreturn]] void refuse(const std::string& key, const std::string& path, const std::string& why) {
  throw std::runtime_error(key + " = " + path + ": " + why);
}

std::string read_pem(const std::string& key, const std::string& path) {
  if (path.empty())
    throw std::runtime_error(key + " is not set: security.tls = \"on\" needs security.certificate, security.key and "
                                   "security.cafile (make them with `ordo certs`)");
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0)
    refuse(key, path, std::string("cannot read it: ") + std::strerror(errno) + " (make it with `ordo certs`)");
  if (!S_ISREG(st.st_mode))
    refuse(key, path, "is not a regular file");
  if (st.st_size > static_cast<off_t>(pem_max_bytes))
    refuse(key, path, "is larger than " + std::to_string(pem_max_bytes) + " bytes; it is not a PEM certificate or key");
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in.good() && !in.eof())
    refuse(key, path, "cannot read it");
  return ss.str();
}

std::string subject_field(X509* cert, int nid) {
  char buf[256] = {0};
  const int n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), nid, buf, sizeof buf);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

std::string role_of(X509* cert) {
  const std::string ou = subject_field(cert, NID_organizationalUnitName);
  return ou == tls_role_admin || ou == tls_role_node ? ou : std::string();
}

x509_ptr parse_certificate(const std::string& pem) {
  bio_ptr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return x509_ptr(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

// Whether `cert` chains to the CA in `store` and is valid now; otherwise why not.
bool chains_to_ca(X509_STORE* store, X509* cert, std::string& why) {
  store_ctx_ptr sctx(X509_STORE_CTX_new());
  if (!sctx || X509_STORE_CTX_init(sctx.get(), store, cert, nullptr) != 1) {
    why = "cannot check the certificate: " + tls_error_text();
    return false;
  }
  if (X509_verify_cert(sctx.get()) == 1)
    return true;
  why = std::string("the certificate does not verify against the deployment's CA (security.cafile): ") +
        X509_verify_cert_error_string(X509_STORE_CTX_get_error(sctx.get()));
  return false;
}

void check_key_file_mode(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0)
    refuse("security.key", path, "other users may read it (mode " + [&] {
      char m[8];
      std::snprintf(m, sizeof m, "%03o", st.st_mode & 0777);
      return std::string(m);
    }() + "); chmod 600 it");
}

bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 64 || name == "ca" || name[0] == '.')
    return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'))
      return false;
  return true;
}

// Writes `text` to a new file `path` (never over an existing one) with `mode`.
void write_new_file(const std::string& path, const std::string& text, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0)
    throw std::runtime_error("ordo certs: cannot create " + path + ": " + std::strerror(errno) +
                             (errno == EEXIST ? " (it exists; remove it to make a new one)" : ""));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(path.c_str());
      throw std::runtime_error("ordo certs: cannot write " + path + ": " + std::strerror(err));
    }
    done += static_cast<size_t>(w);
  }
  ::fsync(fd);
  ::close(fd);
}

std::string pem_of(X509* cert) {
  bio_ptr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string pem_of(EVP_PKEY* key) {
  bio_ptr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

void add_extension(X509* issuer, X509* cert, int nid, const char* value) {
  X509V3_CTX v3{};
  X509V3_set_ctx(&v3, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &v3, nid, value);
  if (!ext || X509_add_ext(cert, ext, -1) != 1) {
    X509_EXTENSION_free(ext);
    throw std::runtime_error("ordo certs: cannot add a certificate extension: " + tls_error_text());
  }
  X509_EXTENSION_free(ext);
}

// A certificate for `key` with subject O=ordo[, OU=ou], CN=cn, valid `days` from five minutes ago,
// signed by `issuer_key` (self-signed when `issuer` is null).
x509_ptr make_certificate(EVP_PKEY* key, const std::string& ou, const std::string& cn, int days, X509* issuer,
                          EVP_PKEY* issuer_key, bool is_ca) {
  x509_ptr cert(X509_new());
  X509_set_version(cert.get(), 2);
  std::unique_ptr<BIGNUM, freeing<BIGNUM, BN_free>> serial(BN_new());
  BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY);
  BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get()));
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -300);
  X509_time_adj_ex(X509_getm_notAfter(cert.get()), days, 0, nullptr);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("ordo"), -1, -1, 0);
  if (!ou.empty())
    X509_NAME_add_entry_by_txt(name, "OU", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(ou.c_str()), -1,
                               -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                             0);
  X509* signer = issuer ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  add_extension(signer, cert.get(), NID_subject_key_identifier, "hash");
  if (is_ca) {
    add_extension(signer, cert.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
    add_extension(signer, cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    add_extension(signer, cert.get(), NID_authority_key_identifier, "keyid:always");
    add_extension(signer, cert.get(), NID_basic_constraints, "critical,CA:FALSE");
    add_extension(signer, cert.get(), NID_key_usage, "critical,digitalSignature");
    add_extension(signer, cert.get(), NID_ext_key_usage, "serverAuth,clientAuth");
  }
  if (X509_sign(cert.get(), issuer_key ? issuer_key : key, EVP_sha256()) <= 0)
    throw std::runtime_error("ordo certs: cannot sign the certificate: " + tls_error_text());
  return cert;
}

pkey_ptr new_key() {
  pkey_ptr key(EVP_EC_gen("P-256"));
  if (!key)
    throw std::runtime_error("ordo certs: cannot make a P-256 key: " + tls_error_text());
  return key;
}

} // namespace

std::string check_tls_settings(const tls_settings& s) {
  if (s.mode != "off" && s.mode != "on")
    return "security.tls = \"" + s.mode + "\": must be one of off, on";
  const std::pair<const char*, const std::string*> files[] = {
      {"security.certificate", &s.certificate}, {"security.key", &s.key}, {"security.cafile", &s.cafile}};
  for (const auto& [key, value] : files) {
    if (s.on() && value->empty())
      return std::string("security.tls = \"on\": ") + key +
             " is not set (TLS needs security.certificate, security.key and security.cafile; make them with "
             "`ordo certs --dir DIR NAME`)";
    if (!s.on() && !value->empty())
      return std::string(key) + " = \"" + *value +
             "\": set, but security.tls is \"off\", so it would not be used; set security.tls = \"on\" or remove it";
  }
  return "";
}

bool is_loopback_host(const std::string& host) {
  if (host == "localhost")
    return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1)
    return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1)
    return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

std::string check_caf_bind(const std::string& host_key, const std::string& host, const tls_settings& s) {
  if (s.on() || is_loopback_host(host))
    return "";
  return host_key + " = \"" + host +
         "\": an actor port beyond loopback needs TLS, or bytes and control messages between hosts travel in "
         "clear; make certificates with `ordo certs --dir DIR NAME` and set security.tls = \"on\", "
         "security.certificate, security.key and security.cafile (docs/security.md), or bind 127.0.0.1";
}

std::string tls_error_text() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty())
      out += "; ";
    out += buf;
  }
  return out;
}

std::shared_ptr<tls_context> tls_context::load(const tls_files& files) {
  std::shared_ptr<tls_context> out(new tls_context());
  out->files_ = files;
  out->cert_pem_ = read_pem("security.certificate", files.certificate);
  const std::string key_pem = read_pem("security.key", files.key);
  const std::string ca_pem = read_pem("security.cafile", files.cafile);
  check_key_file_mode(files.key);
  ERR_clear_error();
  out->ctx_ = SSL_CTX_new(TLS_method());
  SSL_CTX* ctx = out->ctx_;
  if (!ctx)
    throw std::runtime_error("cannot make a TLS context: " + tls_error_text());
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_num_tickets(ctx, 0); // no resumption: every connection presents its certificate
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  if (SSL_CTX_load_verify_locations(ctx, files.cafile.c_str(), nullptr) != 1)
    refuse("security.cafile", files.cafile, "is not a PEM CA certificate: " + tls_error_text());
  // The key first: a certificate set after it drops a key that does not match, which the check
  // below then names.
  if (SSL_CTX_use_PrivateKey_file(ctx, files.key.c_str(), SSL_FILETYPE_PEM) != 1)
    refuse("security.key", files.key, "is not a PEM private key: " + tls_error_text());
  if (SSL_CTX_use_certificate_chain_file(ctx, files.certificate.c_str()) != 1)
    refuse("security.certificate", files.certificate, "is not a PEM certificate: " + tls_error_text());
  if (SSL_CTX_check_private_key(ctx) != 1) {
    ERR_clear_error();
    refuse("security.key", files.key, "does not belong to security.certificate = " + files.certificate);
  }
  X509* own = SSL_CTX_get0_certificate(ctx);
  std::string why;
  if (!chains_to_ca(SSL_CTX_get_cert_store(ctx), own, why))
    refuse("security.certificate", files.certificate, why);
  out->role_ = role_of(own);
  if (out->role_.empty())
    refuse("security.certificate", files.certificate,
           "carries no ordo role (its subject's OU is \"" + subject_field(own, NID_organizationalUnitName) +
               "\", not admin or node); make it with `ordo certs --role node NAME`");
  return out;
}

tls_context::~tls_context() {
  if (ctx_)
    SSL_CTX_free(ctx_);
}

ssl_st* tls_context::new_session(int fd, bool accepting, std::string& why) const {
  ERR_clear_error();
  SSL* ssl = SSL_new(ctx_);
  if (!ssl || SSL_set_fd(ssl, fd) != 1) {
    why = "cannot start a TLS session: " + tls_error_text();
    if (ssl)
      SSL_free(ssl);
    return nullptr;
  }
  if (accepting)
    SSL_set_accept_state(ssl);
  else
    SSL_set_connect_state(ssl);
  return ssl;
}

std::string tls_context::sign_hex(const std::string& data) const {
  EVP_PKEY* key = SSL_CTX_get0_privatekey(ctx_);
  md_ctx_ptr md(EVP_MD_CTX_new());
  size_t len = 0;
  if (!md || EVP_DigestSignInit(md.get(), nullptr, EVP_sha256(), nullptr, key) != 1 ||
      EVP_DigestSign(md.get(), nullptr, &len, reinterpret_cast<const unsigned char*>(data.data()), data.size()) != 1)
    throw std::runtime_error("cannot sign with security.key: " + tls_error_text());
  std::vector<uint8_t> sig(len);
  if (EVP_DigestSign(md.get(), sig.data(), &len, reinterpret_cast<const unsigned char*>(data.data()), data.size()) !=
      1)
    throw std::runtime_error("cannot sign with security.key: " + tls_error_text());
  return to_hex(sig.data(), len);
}

bool tls_context::verify_signed(const std::string& cert_pem, const std::string& data,
                                const std::string& signature_hex, std::string& role, std::string& why) const {
  ERR_clear_error();
  std::vector<uint8_t> signature;
  if (signature_hex.size() > 1024 || signature_hex.size() % 2 != 0) {
    why = "a signature of " + std::to_string(signature_hex.size()) + " hex digits";
    return false;
  }
  for (size_t i = 0; i < signature_hex.size(); i += 2) {
    auto nibble = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
    const int hi = nibble(signature_hex[i]), lo = nibble(signature_hex[i + 1]);
    if (hi < 0 || lo < 0) {
      why = "a signature that is not lowercase hex";
      return false;
    }
    signature.push_back(static_cast<uint8_t>(hi << 4 | lo));
  }
  if (cert_pem.empty()) {
    why = "no certificate";
    return false;
  }
  if (cert_pem.size() > pem_max_bytes) {
    why = "a certificate of " + std::to_string(cert_pem.size()) + " bytes (at most " + std::to_string(pem_max_bytes) +
          ")";
    return false;
  }
  x509_ptr cert = parse_certificate(cert_pem);
  if (!cert) {
    why = "a certificate that is not PEM";
    tls_error_text();
    return false;
  }
  if (!chains_to_ca(SSL_CTX_get_cert_store(ctx_), cert.get(), why))
    return false;
  EVP_PKEY* pub = X509_get0_pubkey(cert.get());
  md_ctx_ptr md(EVP_MD_CTX_new());
  if (!pub || !md || EVP_DigestVerifyInit(md.get(), nullptr, EVP_sha256(), nullptr, pub) != 1 ||
      EVP_DigestVerify(md.get(), signature.data(), signature.size(),
                       reinterpret_cast<const unsigned char*>(data.data()), data.size()) != 1) {
    tls_error_text();
    why = "a signature that does not verify with its certificate's key";
    return false;
  }
  role = role_of(cert.get());
  if (role.empty()) {
    why = "a certificate without an ordo role";
    return false;
  }
  return true;
}

std::string tls_peer_role(ssl_st* ssl) {
  if (!ssl || SSL_get_verify_result(ssl) != X509_V_OK)
    return "";
  x509_ptr peer(SSL_get1_peer_certificate(ssl));
  return peer ? role_of(peer.get()) : std::string();
}

bool ensure_certificate_authority(const std::string& dir) {
  const std::string crt = dir + "/ca.crt", key_path = dir + "/ca.key";
  const bool has_crt = ::access(crt.c_str(), F_OK) == 0, has_key = ::access(key_path.c_str(), F_OK) == 0;
  if (has_crt && has_key)
    return false;
  if (has_crt != has_key)
    throw std::runtime_error("ordo certs: " + dir + " has " + (has_crt ? crt : key_path) + " but not " +
                             (has_crt ? key_path : crt) + "; restore it or empty the directory");
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    throw std::runtime_error("ordo certs: cannot make " + dir + ": " + std::strerror(errno));
  pkey_ptr key = new_key();
  x509_ptr cert = make_certificate(key.get(), "", "ordo deployment CA", 3650, nullptr, nullptr, true);
  write_new_file(key_path, pem_of(key.get()), 0600);
  write_new_file(crt, pem_of(cert.get()), 0644);
  return true;
}

issued_certificate issue_certificate(const std::string& dir, const std::string& name, const std::string& role,
                                     int days) {
  if (!valid_name(name))
    throw std::runtime_error("ordo certs: name \"" + name +
                             "\": use 1 to 64 of A-Z a-z 0-9 . _ - (not starting with '.', not \"ca\")");
  if (role != tls_role_admin && role != tls_role_node)
    throw std::runtime_error("ordo certs: --role " + role + ": use admin or node");
  if (days < 1 || days > 3650)
    throw std::runtime_error("ordo certs: --days " + std::to_string(days) + ": use 1 to 3650");
  const std::string ca_crt = dir + "/ca.crt", ca_key = dir + "/ca.key";
  x509_ptr ca;
  pkey_ptr ca_pkey;
  {
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(ca_crt.c_str(), "rb"), &std::fclose);
    if (f)
      ca.reset(PEM_read_X509(f.get(), nullptr, nullptr, nullptr));
    std::unique_ptr<FILE, int (*)(FILE*)> k(std::fopen(ca_key.c_str(), "rb"), &std::fclose);
    if (k)
      ca_pkey.reset(PEM_read_PrivateKey(k.get(), nullptr, nullptr, nullptr));
  }
  if (!ca || !ca_pkey)
    throw std::runtime_error("ordo certs: cannot read the CA (" + ca_crt + ", " + ca_key + "): " + tls_error_text());
  issued_certificate out{dir + "/" + name + ".crt", dir + "/" + name + ".key"};
  pkey_ptr key = new_key();
  x509_ptr cert = make_certificate(key.get(), role, name, days, ca.get(), ca_pkey.get(), false);
  write_new_file(out.key, pem_of(key.get()), 0600);
  write_new_file(out.certificate, pem_of(cert.get()), 0644);
  return out;
}

} // namespace ordo
