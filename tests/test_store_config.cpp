#include <catch.hpp>

#include <fstream>
#include <string>

#include "runtime/store_config.hpp"

using namespace ordo;

namespace {

std::string error_of(const std::string& toml, const std::vector<std::string>& sets = {}) {
  try {
    parse_store_config(toml, sets);
  } catch (const config_error& e) {
    return e.what();
  }
  return "(no error)";
}

} // namespace

TEST_CASE("store config defaults", "[store_config]") {
  const store_config c = parse_store_config("");
  CHECK(c.capacity_mb == 256);
  CHECK(c.capacity_bytes() == (uint64_t{256} << 20));
  CHECK(c.host == "127.0.0.1");
  CHECK(c.port == 0);
  CHECK(c.http_port == 0);
  CHECK(c.granularity == "block");
  CHECK(c.engine_id.empty());
  CHECK(c.log_level == "info");
}

TEST_CASE("configs/store.toml spells out the defaults", "[store_config]") {
  const store_config c = load_store_config_file("configs/store.toml");
  const store_config d = parse_store_config("");
  CHECK(c.capacity_mb == d.capacity_mb);
  CHECK(c.host == d.host);
  CHECK(c.port == d.port);
  CHECK(c.http_port == d.http_port);
  CHECK(c.granularity == d.granularity);
  CHECK(c.engine_id == d.engine_id);
  CHECK(c.log_level == d.log_level);
  // Every key the file should name is in it.
  std::ifstream in("configs/store.toml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* key : {"capacity_mb", "host", "port", "http_port", "granularity", "engine_id", "level"})
    CHECK(text.find(std::string(key) + " = ") != std::string::npos);
}

TEST_CASE("store config values and overrides", "[store_config]") {
  const store_config c = parse_store_config(
      "[store]\ncapacity_mb = 64\nhost = \"localhost\"\nport = 7001\nhttp_port = 7002\n"
      "granularity = \"chunk\"\nengine_id = \"store-a\"\n[log]\nlevel = \"debug\"\n");
  CHECK(c.capacity_mb == 64);
  CHECK(c.host == "localhost");
  CHECK(c.port == 7001);
  CHECK(c.http_port == 7002);
  CHECK(c.granularity == "chunk");
  CHECK(c.engine_id == "store-a");
  CHECK(c.log_level == "debug");

  const store_config o = parse_store_config("[store]\nport = 7001\n",
                                            {"store.port=0", "store.host=127.0.0.1", "store.capacity_mb=1",
                                             "store.granularity=chunk", "store.engine_id=s1", "log.level=warn"});
  CHECK(o.port == 0);
  CHECK(o.host == "127.0.0.1");
  CHECK(o.capacity_mb == 1);
  CHECK(o.granularity == "chunk");
  CHECK(o.engine_id == "s1");
  CHECK(o.log_level == "warn");
}

TEST_CASE("store config errors name the key, the value and the rule", "[store_config]") {
  CHECK(error_of("[store]\ncapacity_mb = 0\n") ==
        "store.capacity_mb = 0: must be a size in MiB between 1 and 1073741824 (2^30)");
  CHECK(error_of("", {"store.capacity_mb=1073741825"}).rfind("store.capacity_mb = 1073741825: must be", 0) == 0);
  CHECK(error_of("[store]\ncapacity_mb = \"big\"\n").rfind("store.capacity_mb = \"big\": must be an integer", 0) == 0);
  CHECK(error_of("", {"store.port=70000"}) == "store.port = 70000: must be between 0 and 65535 (0 picks a free one)");
  CHECK(error_of("", {"store.http_port=-1"}).rfind("store.http_port = -1: must be between 0 and 65535", 0) == 0);
  CHECK(error_of("", {"store.granularity=page"}) == "store.granularity = \"page\": must be one of block, chunk");
  CHECK(error_of("", {"store.host=bad host"}) == "store.host = \"bad host\": must be a host name or IP address");
  CHECK(error_of("", {"store.engine_id=a/b"}).rfind("store.engine_id = \"a/b\": must be", 0) == 0);
  CHECK(error_of("", {"log.level=loud"}) == "log.level = \"loud\": must be one of trace, debug, info, warn, error");
}

TEST_CASE("unknown store config keys are refused naming the allowed ones", "[store_config]") {
  CHECK(error_of("[store]\ncapacity = 5\n") ==
        "unknown key store.capacity = 5; allowed keys in [store]: capacity_mb, host, port, http_port, "
        "granularity, engine_id");
  CHECK(error_of("", {"store.bogus=1"}).rfind("unknown key store.bogus = 1; allowed keys in [store]:", 0) == 0);
  CHECK(error_of("[cache]\nblock_size = 16\n") == "unknown section [cache]; allowed sections: store, log, security");
  CHECK(error_of("x = 1\n").rfind("unknown key x = 1 at top level", 0) == 0);
  CHECK(error_of("", {"nodot=1"}).rfind("--set \"nodot=1\": key \"nodot\" must be section.key", 0) == 0);
  CHECK(error_of("[store\n").rfind("config: TOML syntax error at line 1", 0) == 0);
}

TEST_CASE("a missing store config file is named", "[store_config]") {
  try {
    load_store_config_file("configs/no-such-store.toml");
    FAIL("no error");
  } catch (const config_error& e) {
    CHECK(std::string(e.what()) == "config file \"configs/no-such-store.toml\": no such file");
  }
}

TEST_CASE("the store key table (docs/config.md) names every key the reader takes, with its default",
          "[store_config]") {
  const std::string table = store_config_keys_table();
  std::vector<std::string> keys;
  for (size_t at = table.find("\n| `"); at != std::string::npos; at = table.find("\n| `", at + 1))
    keys.push_back(table.substr(at + 4, table.find('`', at + 4) - at - 4));
  CHECK(keys == std::vector<std::string>{"store.capacity_mb", "store.host", "store.port", "store.http_port",
                                         "store.granularity", "store.engine_id", "log.level", "security.secret_file",
                                         "security.tls", "security.certificate", "security.key", "security.cafile"});
  for (const auto& key : keys) {
    INFO(key);
    CHECK(error_of("", {key + "=@"}).rfind("unknown", 0) == std::string::npos);
  }
  CHECK(table.find("| `store.capacity_mb` | integer | `256` | a size in MiB between 1 and 1073741824 (2^30) |") !=
        std::string::npos);
  CHECK(table.find("| `store.granularity` | choice | `\"block\"` | one of block, chunk |") != std::string::npos);
  CHECK(table.find("| `security.tls` | choice | `\"off\"` | one of off, on |") != std::string::npos);
}
