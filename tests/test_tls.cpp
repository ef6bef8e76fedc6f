// runtime/tls: `ordo certs`' CA and certificates, what loading a TLS context refuses, the hello
// signatures a store checks, and the bind rule (issue 36 item 4, docs/security.md).
#include <catch.hpp>

#include <fstream>
#include <string>

#include <sys/stat.h>

#include "runtime/tls.hpp"
#include "tests/scratch_dir.hpp"

using namespace ordo;
using Catch::Matchers::Contains;

namespace {

tls_files files_of(const std::string& dir, const std::string& name, const std::string& ca_dir = "") {
  return {dir + "/" + name + ".crt", dir + "/" + name + ".key", (ca_dir.empty() ? dir : ca_dir) + "/ca.crt"};
}

std::string load_error(const tls_files& f) {
  try {
    tls_context::load(f);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST_CASE("ordo certs makes a CA once and certificates with their role", "[tls]") {
  const std::string dir = ordo::test::scratch_dir("tls") + "/pki";
  CHECK(ensure_certificate_authority(dir));
  CHECK_FALSE(ensure_certificate_authority(dir)); // kept
  issue_certificate(dir, "node-a", "node", 30);
  issue_certificate(dir, "ops", "admin", 30);
  struct stat st{};
  REQUIRE(::stat((dir + "/node-a.key").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(::stat((dir + "/ca.key").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK_THROWS_WITH(issue_certificate(dir, "node-a", "node", 30), Contains("node-a.key") &&
                                                                      Contains("exists"));
  CHECK_THROWS_WITH(issue_certificate(dir, "../x", "node", 30), Contains("name \"../x\""));
  CHECK_THROWS_WITH(issue_certificate(dir, "y", "root", 30), Contains("--role root"));
  CHECK_THROWS_WITH(issue_certificate(dir, "z", "node", 0), Contains("--days 0"));

  auto node = tls_context::load(files_of(dir, "node-a"));
  auto admin = tls_context::load(files_of(dir, "ops"));
  CHECK(node->role() == "node");
  CHECK(admin->role() == "admin");

  SECTION("a signature verifies under the CA and names the signer's role") {
    const std::string text = "ordo-store-hello-v1\nwire\nengine";
    std::string role, why;
    CHECK(node->verify_signed(admin->certificate_pem(), text, admin->sign_hex(text), role, why));
    CHECK(role == "admin");
    CHECK(admin->verify_signed(node->certificate_pem(), text, node->sign_hex(text), role, why));
    CHECK(role == "node");
    // Another text, another signer's signature, a forged role: refused.
    CHECK_FALSE(node->verify_signed(admin->certificate_pem(), text + "x", admin->sign_hex(text), role, why));
    CHECK_THAT(why, Contains("does not verify"));
    CHECK_FALSE(node->verify_signed(admin->certificate_pem(), text, node->sign_hex(text), role, why));
    CHECK_FALSE(node->verify_signed("", text, node->sign_hex(text), role, why));
    CHECK_FALSE(node->verify_signed("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", text,
                                    node->sign_hex(text), role, why));
    CHECK_FALSE(node->verify_signed(admin->certificate_pem(), text, "zz", role, why));
    CHECK_THAT(why, Contains("hex"));
  }

  SECTION("a certificate of another CA is refused by load and by verify") {
    const std::string other = ordo::test::scratch_dir("tls") + "/other";
    ensure_certificate_authority(other);
    issue_certificate(other, "stranger", "admin", 30);
    CHECK_THAT(load_error(files_of(other, "stranger", dir)), Contains("security.certificate = ") &&
                                                                 Contains("does not verify against"));
    auto stranger = tls_context::load(files_of(other, "stranger"));
    std::string role, why;
    CHECK_FALSE(node->verify_signed(stranger->certificate_pem(), "t", stranger->sign_hex("t"), role, why));
    CHECK_THAT(why, Contains("does not verify against the deployment's CA"));
  }

  SECTION("load names the file and the fault") {
    tls_files f = files_of(dir, "node-a");
    f.key = dir + "/ops.key";
    CHECK_THAT(load_error(f), Contains("security.key = ") && Contains("does not belong"));
    f = files_of(dir, "node-a");
    f.certificate = dir + "/missing.crt";
    CHECK_THAT(load_error(f), Contains("security.certificate = " + dir + "/missing.crt") &&
                                  Contains("ordo certs"));
    f = files_of(dir, "node-a");
    f.certificate = "";
    CHECK_THAT(load_error(f), Contains("security.certificate is not set"));
    ::chmod((dir + "/node-a.key").c_str(), 0644);
    CHECK_THAT(load_error(files_of(dir, "node-a")), Contains("chmod 600"));
    ::chmod((dir + "/node-a.key").c_str(), 0600);
    std::ofstream(dir + "/junk.crt") << "not a certificate\n";
    f = files_of(dir, "node-a");
    f.certificate = dir + "/junk.crt";
    CHECK_THAT(load_error(f), Contains("is not a PEM certificate"));
    CHECK(load_error(files_of(dir, "node-a")).empty());
  }
}

TEST_CASE("an actor port beyond loopback needs TLS; the settings are whole or off", "[tls]") {
  CHECK(is_loopback_host("127.0.0.1"));
  CHECK(is_loopback_host("127.0.0.2"));
  CHECK(is_loopback_host("localhost"));
  CHECK(is_loopback_host("::1"));
  CHECK_FALSE(is_loopback_host("0.0.0.0"));
  CHECK_FALSE(is_loopback_host("10.0.0.5"));
  CHECK_FALSE(is_loopback_host("127.0.0.1.evil"));
  CHECK_FALSE(is_loopback_host("node7"));
  tls_settings off;
  CHECK(check_caf_bind("store.host", "127.0.0.1", off).empty());
  CHECK_THAT(check_caf_bind("store.host", "0.0.0.0", off),
             Contains("store.host = \"0.0.0.0\"") && Contains("ordo certs"));
  tls_settings on{"on", "a.crt", "a.key", "ca.crt"};
  CHECK(check_caf_bind("store.host", "0.0.0.0", on).empty());
  CHECK(check_tls_settings(on).empty());
  CHECK(check_tls_settings(off).empty());
  on.key = "";
  CHECK_THAT(check_tls_settings(on), Contains("security.key is not set"));
  off.cafile = "ca.crt";
  CHECK_THAT(check_tls_settings(off), Contains("security.cafile = \"ca.crt\": set, but security.tls"));
  CHECK_THAT(check_tls_settings(tls_settings{"yes", "", "", ""}), Contains("one of off, on"));
}
