#include <catch.hpp>

#include <fstream>
#include <string>

#include "tools/proxy/proxy_config.hpp"

using namespace ordo;

namespace {

std::string error_of(const std::string& toml, const std::vector<std::string>& sets = {}) {
  try {
    parse_proxy_config(toml, sets);
  } catch (const config_error& e) {
    return e.what();
  }
  return "(no error)";
}

const std::string one_decode = "[proxy]\ndecode = \"127.0.0.1:8002\"\n";

} // namespace

TEST_CASE("proxy config defaults", "[proxy_config]") {
  const proxy_config c = parse_proxy_config(one_decode);
  CHECK(c.host == "127.0.0.1");
  CHECK(c.port == 0);
  CHECK(c.prefill.empty());
  REQUIRE(c.decode.size() == 1);
  CHECK(c.decode[0].host == "127.0.0.1");
  CHECK(c.decode[0].port == 8002);
  CHECK(c.decode[0].text == "127.0.0.1:8002");
  CHECK(c.timeout_s == 120);
  CHECK(c.api_key.empty());
  CHECK(c.log_level == "info");
}

TEST_CASE("configs/proxy.toml spells out the defaults", "[proxy_config]") {
  const proxy_config c = load_proxy_config_file("configs/proxy.toml", {"proxy.decode=127.0.0.1:8002"});
  const proxy_config d = parse_proxy_config(one_decode);
  CHECK(c.host == d.host);
  CHECK(c.port == d.port);
  CHECK(c.prefill.size() == d.prefill.size());
  CHECK(c.timeout_s == d.timeout_s);
  CHECK(c.api_key == d.api_key);
  CHECK(c.log_level == d.log_level);
  std::ifstream in("configs/proxy.toml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* key : {"host", "port", "prefill", "decode", "timeout_s", "api_key", "level"})
    CHECK(text.find(std::string(key) + " = ") != std::string::npos);
  // As shipped it names no decode node: it is refused until one is given.
  CHECK_THROWS_AS(load_proxy_config_file("configs/proxy.toml"), config_error);
}

TEST_CASE("proxy config values and overrides", "[proxy_config]") {
  const proxy_config c = parse_proxy_config(
      "[proxy]\nhost = \"localhost\"\nport = 8000\nprefill = \"127.0.0.1:8001, node-a:9001\"\n"
      "decode = \"127.0.0.1:8002,[::1]:8003\"\ntimeout_s = 30\napi_key = \"sk-abc\"\n[log]\nlevel = \"debug\"\n");
  CHECK(c.host == "localhost");
  CHECK(c.port == 8000);
  REQUIRE(c.prefill.size() == 2);
  CHECK(c.prefill[0].text == "127.0.0.1:8001");
  CHECK(c.prefill[1].host == "node-a");
  CHECK(c.prefill[1].port == 9001);
  REQUIRE(c.decode.size() == 2);
  CHECK(c.decode[1].host == "::1");
  CHECK(c.decode[1].port == 8003);
  CHECK(c.decode[1].text == "[::1]:8003");
  CHECK(c.timeout_s == 30);
  CHECK(c.api_key == "sk-abc");
  CHECK(c.log_level == "debug");

  const proxy_config o = parse_proxy_config(
      "[proxy]\nport = 8000\nprefill = \"127.0.0.1:8001\"\n",
      {"proxy.port=0", "proxy.prefill=", "proxy.decode=127.0.0.1:9002", "proxy.timeout_s=5", "proxy.api_key=k1",
       "proxy.host=0.0.0.0", "log.level=warn"});
  CHECK(o.port == 0);
  CHECK(o.prefill.empty());
  REQUIRE(o.decode.size() == 1);
  CHECK(o.decode[0].port == 9002);
  CHECK(o.timeout_s == 5);
  CHECK(o.api_key == "k1");
  CHECK(o.host == "0.0.0.0");
  CHECK(o.log_level == "warn");
}

TEST_CASE("proxy config errors name the key, the value and the rule", "[proxy_config]") {
  CHECK(error_of("") ==
        "proxy.decode = \"\": must name at least one decode node: a comma-separated list of HOST:PORT (e.g. "
        "\"127.0.0.1:8001,127.0.0.1:8002\"), PORT 1..65535");
  CHECK(error_of(one_decode, {"proxy.port=70000"}) ==
        "proxy.port = 70000: must be between 0 and 65535 (0 picks a free one)");
  CHECK(error_of(one_decode, {"proxy.timeout_s=0"}) == "proxy.timeout_s = 0: must be seconds between 1 and 86400");
  CHECK(error_of(one_decode, {"proxy.timeout_s=\"x\""}).rfind("proxy.timeout_s = \"x\": must be an integer", 0) == 0);
  CHECK(error_of(one_decode, {"proxy.host=bad host"}) == "proxy.host = \"bad host\": must be a host name or IP address");
  CHECK(error_of(one_decode, {"log.level=loud"}) == "log.level = \"loud\": must be one of trace, debug, info, warn, error");
  CHECK(error_of("", {"proxy.decode=127.0.0.1"}).rfind(
            "proxy.decode = \"127.0.0.1\": entry \"127.0.0.1\" has no :PORT; must be a comma-separated list", 0) == 0);
  CHECK(error_of("", {"proxy.decode=127.0.0.1:0"}).rfind(
            "proxy.decode = \"127.0.0.1:0\": entry \"127.0.0.1:0\" has port 0 out of range", 0) == 0);
  CHECK(error_of("", {"proxy.decode=127.0.0.1:99999"}).find("has port 99999 out of range") != std::string::npos);
  CHECK(error_of("", {"proxy.decode=127.0.0.1:x"}).find("entry \"127.0.0.1:x\" has no valid port") != std::string::npos);
  CHECK(error_of("", {"proxy.decode=http://127.0.0.1:8000"}).find("has no valid host") != std::string::npos);
  CHECK(error_of("", {"proxy.decode=a:1,,b:2"}).find("entry \"\" is empty") != std::string::npos);
  CHECK(error_of("", {"proxy.decode=::1:8000"}).find("write it as [ADDRESS]:PORT") != std::string::npos);
  CHECK(error_of(one_decode, {"proxy.prefill=a b:1"}).rfind("proxy.prefill = \"a b:1\": entry", 0) == 0);
  CHECK(error_of("[proxy]\ndecode = 5\n").rfind("proxy.decode = 5: must be a string", 0) == 0);
}

TEST_CASE("the proxy's API key is never shown", "[proxy_config]") {
  const std::string e = error_of(one_decode, {"proxy.api_key=\"s3cret key\""});
  CHECK(e.rfind("proxy.api_key (set, not shown): character 7 of 10 is not allowed", 0) == 0);
  CHECK(e.find("s3cret") == std::string::npos);
  CHECK(error_of("[proxy]\ndecode = \"a:1\"\napi_key = 12345\n").rfind("proxy.api_key (not shown): must be a string", 0) ==
        0);
  const std::string u = error_of(one_decode, {"proxy.apikey=s3cret"});
  CHECK(u.rfind("unknown key proxy.apikey = (not shown); allowed keys in [proxy]:", 0) == 0);
  CHECK(u.find("s3cret") == std::string::npos);
}

TEST_CASE("unknown proxy config keys are refused naming the allowed ones", "[proxy_config]") {
  CHECK(error_of("[proxy]\ndecode = \"a:1\"\ndecoder = \"b:2\"\n") ==
        "unknown key proxy.decoder = \"b:2\"; allowed keys in [proxy]: host, port, prefill, decode, timeout_s, api_key");
  CHECK(error_of("[server]\nport = 1\n") == "unknown section [server]; allowed sections: proxy, log");
  CHECK(error_of("x = 1\n").rfind("unknown key x = 1 at top level", 0) == 0);
  CHECK(error_of("", {"nodot=1"}).rfind("--set \"nodot=1\": key \"nodot\" must be section.key", 0) == 0);
  CHECK(error_of("[proxy\n").rfind("config: TOML syntax error at line 1", 0) == 0);
}

TEST_CASE("a missing proxy config file is named", "[proxy_config]") {
  try {
    load_proxy_config_file("configs/no-such-proxy.toml");
    FAIL("no error");
  } catch (const config_error& e) {
    CHECK(std::string(e.what()) == "config file \"configs/no-such-proxy.toml\": no such file");
  }
}

TEST_CASE("the proxy key table (docs/config.md) names every key the reader takes, with its default",
          "[proxy_config]") {
  const std::string table = proxy_config_keys_table();
  std::vector<std::string> keys;
  for (size_t at = table.find("\n| `"); at != std::string::npos; at = table.find("\n| `", at + 1))
    keys.push_back(table.substr(at + 4, table.find('`', at + 4) - at - 4));
  CHECK(keys == std::vector<std::string>{"proxy.host", "proxy.port", "proxy.prefill", "proxy.decode", "proxy.timeout_s",
                                         "proxy.api_key", "log.level"});
  for (const auto& key : keys) {
    INFO(key);
    CHECK(error_of(one_decode, {key + "=@"}).rfind("unknown", 0) == std::string::npos);
  }
  CHECK(table.find("| `proxy.timeout_s` | integer | `120` | seconds between 1 and 86400 |") != std::string::npos);
  CHECK(table.find("| `proxy.decode` | list | `\"\"` |") != std::string::npos);
  CHECK(table.find("| `proxy.api_key` | secret | `\"\"` |") != std::string::npos);
}
