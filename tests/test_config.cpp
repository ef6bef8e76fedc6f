#include <catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "runtime/config.hpp"

using namespace ordo;

namespace {

// The error message parse_config gives, or "" when the config is accepted.
std::string error_of(const std::string& toml, const std::vector<std::string>& overrides = {}) {
  try {
    parse_config(toml, overrides);
  } catch (const config_error& e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST_CASE("a full valid file is read into every field", "[config]") {
  const node_config cfg = parse_config(R"(
[model]
preset = "gdn_hybrid"
size = "1b"
seed = 42
kv_dtype = "fp8"
weight_dtype = "fp32"
[device]
kind = "hip"
chaos_seed = 7
matmul = "tf32"
[cache]
block_size = 16
chunk_size = 128
num_blocks = 1024
checkpoint_interval = -1
[scheduler]
max_batch_tokens = 2048
max_num_seqs = 256
max_waiting = 4
[kv_transfer]
connector = "none"
[server]
host = "0.0.0.0"
port = 0
header_timeout_s = 5
body_timeout_s = 7
idle_timeout_s = 120
max_connections = 64
max_body_bytes = 65536
api_key = "sk-client-1"
admin_key = "sk-admin-2"
[log]
level = "debug"
)");
  CHECK(cfg.preset == model_preset::gdn_hybrid);
  CHECK(cfg.size == model_size::b1);
  CHECK(cfg.model_seed == 42);
  CHECK(cfg.kv == kv_dtype::fp8);
  CHECK(cfg.device_kind == device_kind::hip);
  CHECK(cfg.chaos_seed == 7);
  CHECK(cfg.matmul == matmul_mode::tf32);
  CHECK(cfg.block_size == 16);
  CHECK(cfg.chunk_size == 128);
  CHECK(cfg.num_blocks == 1024);
  CHECK(cfg.checkpoint_interval == -1);
  CHECK(cfg.max_batch_tokens == 2048);
  CHECK(cfg.max_num_seqs == 256);
  CHECK(cfg.max_waiting == 4);
  CHECK(cfg.connector == connector_kind::none);
  CHECK(cfg.host == "0.0.0.0");
  CHECK(cfg.port == 0);
  CHECK(cfg.header_timeout_s == 5);
  CHECK(cfg.body_timeout_s == 7);
  CHECK(cfg.idle_timeout_s == 120);
  CHECK(cfg.max_connections == 64);
  CHECK(cfg.max_body_bytes == 65536);
  CHECK(cfg.api_key == "sk-client-1");
  CHECK(cfg.admin_key == "sk-admin-2");
  CHECK(cfg.log_level == "debug");

  const model_options mo = to_model_options(cfg);
  CHECK(mo.preset == model_preset::gdn_hybrid);
  CHECK(mo.size == model_size::b1);
  CHECK(mo.seed == 42);
  CHECK(mo.kv == kv_dtype::fp8);
  CHECK(mo.block_size == 16);
  CHECK(mo.num_blocks == 1024);
  CHECK(mo.max_batch_tokens == 2048);
  CHECK(mo.max_state_slots == 256);
  CHECK(mo.matmul == matmul_mode::tf32);
  CHECK(mo.weights == weight_dtype::fp32);
  CHECK(to_model_options(parse_config("")).matmul == matmul_mode::exact);
}

TEST_CASE("model.weight_dtype = bf16 reaches the model options; refused off the GPU and beside tf32", "[config]") {
  const node_config cfg = parse_config("[model]\nweight_dtype = \"bf16\"\n[device]\nkind = \"hip\"\n");
  CHECK(cfg.weights == weight_dtype::bf16);
  CHECK(to_model_options(cfg).weights == weight_dtype::bf16);
  CHECK(to_model_options(parse_config("")).weights == weight_dtype::fp32);
  CHECK_THAT(describe(cfg), Catch::Matchers::Contains(" model.weight_dtype=bf16 "));
  CHECK_THAT(error_of("[model]\nweight_dtype = \"fp8\""),
             Catch::Matchers::Equals("model.weight_dtype = \"fp8\": must be one of fp32, bf16"));
  CHECK_THAT(error_of("[model]\nweight_dtype = \"bf16\""),
             Catch::Matchers::Equals("model.weight_dtype = \"bf16\": needs device.kind = \"hip\" (bf16 weights are multiplied on the "
                    "GPU's matrix units; device.kind = \"cpu\" computes on fp32 weights)"));
  CHECK_THAT(error_of("[model]\nweight_dtype = \"bf16\"\n[device]\nkind = \"hip\"\nmatmul = \"tf32\""),
             Catch::Matchers::Equals("model.weight_dtype = \"bf16\" with device.matmul = \"tf32\": bf16 weights always take the bf16 "
                    "matrix units; device.matmul chooses for fp32 weights, leave it \"exact\""));
}

TEST_CASE("an empty file gives the defaults, and describe() is canonical", "[config]") {
  const node_config cfg = parse_config("");
  CHECK(describe(cfg) ==
        "model.preset=qsa_gdn_ple model.size=tiny model.seed=0 model.kv_dtype=fp32 model.weight_dtype=fp32 "
        "device.kind=cpu device.chaos_seed=0 device.matmul=exact cache.block_size=64 cache.chunk_size=256 "
        "cache.num_blocks=512 cache.checkpoint_interval=256 scheduler.max_batch_tokens=512 "
        "scheduler.max_num_seqs=16 scheduler.max_waiting=256 kv_transfer.connector=none "
        "kv_transfer.kv_role=kv_both store.capacity_mb=256 server.host=127.0.0.1 server.port=8000 "
        "server.header_timeout_s=10 server.body_timeout_s=30 server.idle_timeout_s=60 "
        "server.max_connections=1024 server.max_body_bytes=0 server.api_key=unset "
        "server.admin_key=unset log.level=info");
}

TEST_CASE("describe() says whether a secret is set, never what it is", "[config]") {
  const node_config cfg =
      parse_config("[server]\napi_key = \"sk-live-0123456789\"\n", {"server.admin_key=adm1n-s3cret"});
  CHECK(cfg.api_key == "sk-live-0123456789");
  CHECK(cfg.admin_key == "adm1n-s3cret");
  const std::string d = describe(cfg);
  CHECK(d.find("server.api_key=set server.admin_key=set") != std::string::npos);
  CHECK(d.find("sk-live") == std::string::npos);
  CHECK(d.find("s3cret") == std::string::npos);
}

TEST_CASE("describe() output fed back as overrides gives the same config", "[config]") {
  const node_config a = parse_config("[model]\npreset = \"dense\"\nseed = 9\n[cache]\nblock_size = 16\n");
  std::vector<std::string> items;
  std::string d = describe(a);
  for (size_t start = 0, end; start < d.size(); start = end + 1) {
    end = d.find(' ', start);
    if (end == std::string::npos)
      end = d.size();
    items.push_back(d.substr(start, end - start));
  }
  CHECK(items.size() == 28);
  // Secrets are described as set/unset, which is not their value: they do not round-trip.
  items.erase(std::remove_if(items.begin(), items.end(),
                             [](const std::string& item) {
                               return item.rfind("server.api_key=", 0) == 0 ||
                                      item.rfind("server.admin_key=", 0) == 0;
                             }),
              items.end());
  CHECK(items.size() == 26);
  CHECK(describe(parse_config("", items)) == d);
}

TEST_CASE("the shipped configs load and say what they promise", "[config]") {
  const node_config def = load_config_file("configs/default.toml");
  CHECK(describe(def) == describe(node_config{})); // the file spells out the defaults
  CHECK(def.preset == model_preset::qsa_gdn_ple);
  CHECK(def.block_size == 64);
  CHECK(def.chunk_size == 256);
  CHECK(def.num_blocks == 512);
  CHECK(def.checkpoint_interval == 256);
  CHECK(def.max_batch_tokens == 512);
  CHECK(def.port == 8000);

  const node_config dense = load_config_file("configs/dense.toml");
  CHECK(dense.preset == model_preset::dense);
  CHECK(dense.block_size == 16);

  const node_config gdn = load_config_file("configs/gdn_hybrid.toml");
  CHECK(gdn.preset == model_preset::gdn_hybrid);
  CHECK(gdn.block_size == 16);

  const node_config off = load_config_file("configs/offload.toml");
  CHECK(off.connector == connector_kind::offload);
  CHECK(off.kv_role == kv_role::kv_both);
  CHECK(off.store_capacity_mb == 256);
}

TEST_CASE("each invalid value gets one message with key, value and what is allowed", "[config]") {
  using Catch::Matchers::Equals;
  CHECK_THAT(error_of("[cache]\nblock_size = 48"),
             Equals("cache.block_size = 48: must be a power of two between 4 and 256"));
  CHECK_THAT(error_of("[cache]\nblock_size = 512"),
             Equals("cache.block_size = 512: must be a power of two between 4 and 256"));
  CHECK_THAT(error_of("[cache]\nblock_size = 2"),
             Equals("cache.block_size = 2: must be a power of two between 4 and 256"));
  CHECK_THAT(error_of("[cache]\nblock_size = \"64\""),
             Equals("cache.block_size = \"64\": must be an integer, a power of two between 4 "
                    "and 256"));
  CHECK_THAT(error_of("[cache]\nblock_size = 99999999999"),
             Equals("cache.block_size = 99999999999: must be a power of two between 4 and 256"));
  CHECK_THAT(error_of("[cache]\nchunk_size = 100"),
             Equals("cache.chunk_size = 100: must be a positive multiple of cache.block_size (64)"));
  CHECK_THAT(error_of("[cache]\nchunk_size = 0"),
             Equals("cache.chunk_size = 0: must be a positive multiple of cache.block_size (64)"));
  CHECK_THAT(error_of("[cache]\nnum_blocks = 15"),
             Equals("cache.num_blocks = 15: must be at least 16"));
  CHECK_THAT(error_of("[cache]\ncheckpoint_interval = -2"),
             Equals("cache.checkpoint_interval = -2: must be -1 (prompt-end anchor only), 0 (no "
                    "checkpoints) or a positive interval in tokens"));
  CHECK_THAT(error_of("[scheduler]\nmax_batch_tokens = 32"),
             Equals("scheduler.max_batch_tokens = 32: must be at least cache.block_size (64)"));
  CHECK_THAT(error_of("[scheduler]\nmax_num_seqs = 0"),
             Equals("scheduler.max_num_seqs = 0: must be between 1 and 256"));
  CHECK_THAT(error_of("[scheduler]\nmax_num_seqs = 257"),
             Equals("scheduler.max_num_seqs = 257: must be between 1 and 256"));
  CHECK_THAT(error_of("[server]\nport = 65536"),
             Equals("server.port = 65536: must be between 0 and 65535"));
  CHECK_THAT(error_of("[server]\nport = -1"), Equals("server.port = -1: must be between 0 and 65535"));
  CHECK_THAT(error_of("[server]\nhost = \"\""),
             Equals("server.host = \"\": must be a host name or IP address"));
  CHECK_THAT(error_of("[server]\nhost = \"local host\""),
             Equals("server.host = \"local host\": must be a host name or IP address"));
  CHECK_THAT(error_of("[server]\nhost = \"http://127.0.0.1\""),
             Equals("server.host = \"http://127.0.0.1\": must be a host name or IP address"));
  CHECK_THAT(error_of("[scheduler]\nmax_waiting = 0"),
             Equals("scheduler.max_waiting = 0: must be between 1 and 1048576"));
  CHECK_THAT(error_of("[scheduler]\nmax_waiting = 1048577"),
             Equals("scheduler.max_waiting = 1048577: must be between 1 and 1048576"));
  CHECK_THAT(error_of("[server]\nheader_timeout_s = 0"),
             Equals("server.header_timeout_s = 0: must be between 1 and 3600 (seconds)"));
  CHECK_THAT(error_of("[server]\nbody_timeout_s = 3601"),
             Equals("server.body_timeout_s = 3601: must be between 1 and 3600 (seconds)"));
  CHECK_THAT(error_of("[server]\nidle_timeout_s = -1"),
             Equals("server.idle_timeout_s = -1: must be between 1 and 3600 (seconds)"));
  CHECK_THAT(error_of("[server]\nidle_timeout_s = 1.5"),
             Equals("server.idle_timeout_s = 1.5: must be an integer, between 1 and 3600 (seconds)"));
  CHECK_THAT(error_of("[server]\nmax_connections = 0"),
             Equals("server.max_connections = 0: must be between 1 and 65536"));
  CHECK_THAT(error_of("[server]\nmax_connections = 65537"),
             Equals("server.max_connections = 65537: must be between 1 and 65536"));
  CHECK_THAT(error_of("[server]\nmax_body_bytes = -1"),
             Equals("server.max_body_bytes = -1: must be 0 (derived from the model's context length) or a "
                    "size in bytes between 1 and 1073741824"));
  CHECK_THAT(error_of("[server]\nmax_body_bytes = 1073741825"),
             Equals("server.max_body_bytes = 1073741825: must be 0 (derived from the model's context "
                    "length) or a size in bytes between 1 and 1073741824"));
  CHECK_THAT(error_of("[model]\npreset = \"llama\""),
             Equals("model.preset = \"llama\": must be one of dense, gdn_hybrid, qsa_gdn_ple"));
  CHECK_THAT(error_of("[model]\npreset = 3"),
             Equals("model.preset = 3: must be a string, one of dense, gdn_hybrid, qsa_gdn_ple"));
  CHECK_THAT(error_of("[model]\nsize = \"7b\""), Equals("model.size = \"7b\": must be one of tiny, 1b"));
  CHECK_THAT(error_of("[model]\nkv_dtype = \"fp16\""),
             Equals("model.kv_dtype = \"fp16\": must be one of fp32, bf16, fp8"));
  CHECK_THAT(error_of("[model]\nseed = -1"),
             Equals("model.seed = -1: must be a non-negative integer"));
  CHECK_THAT(error_of("[device]\nkind = \"tpu\""), Equals("device.kind = \"tpu\": must be one of cpu, hip"));
  CHECK_THAT(error_of("[device]\nchaos_seed = 1.5"),
             Equals("device.chaos_seed = 1.5: must be an integer, a non-negative integer (0 = off)"));
  CHECK_THAT(error_of("[device]\nmatmul = \"fp16\""),
             Equals("device.matmul = \"fp16\": must be one of exact, tf32"));
  CHECK_THAT(error_of("[device]\nmatmul = \"tf32\""),
             Equals("device.matmul = \"tf32\": needs device.kind = \"hip\" (device.kind = \"cpu\" computes "
                    "every matmul exactly)"));
  CHECK_THAT(error_of("[log]\nlevel = \"verbose\""),
             Equals("log.level = \"verbose\": must be one of trace, debug, info, warn, error"));
}

TEST_CASE("connector offload with a store capacity and every kv_role", "[config]") {
  using Catch::Matchers::Equals;
  auto cfg = parse_config("[kv_transfer]\nconnector = \"offload\"\nkv_role = \"kv_consumer\"\n[store]\ncapacity_mb = 8");
  CHECK(cfg.connector == connector_kind::offload);
  CHECK(cfg.kv_role == kv_role::kv_consumer);
  CHECK(cfg.store_capacity_mb == 8);
  CHECK(parse_config("", {"kv_transfer.kv_role=kv_producer"}).kv_role == kv_role::kv_producer);
  CHECK_THAT(error_of("[kv_transfer]\nconnector = \"lmcache\""),
             Equals("kv_transfer.connector = \"lmcache\": must be one of none, offload, store, pd, pd_kv, multi"));
  CHECK_THAT(error_of("[kv_transfer]\nkv_role = \"kv_both_ways\""),
             Equals("kv_transfer.kv_role = \"kv_both_ways\": must be one of kv_both, kv_producer, kv_consumer"));
  CHECK_THAT(error_of("[kv_transfer]\nconnector = \"offload\"\n[store]\ncapacity_mb = 0"),
             Equals("store.capacity_mb = 0: must be at least 1 with kv_transfer.connector = \"offload\""));
  CHECK_THAT(error_of("[store]\ncapacity_mb = -5"),
             Equals("store.capacity_mb = -5: must be a size in MiB between 0 and 2^30"));
}

TEST_CASE("the new server and scheduler keys are accepted at their bounds and through --set", "[config]") {
  const node_config lo = parse_config("", {"server.header_timeout_s=1", "server.body_timeout_s=1",
                                           "server.idle_timeout_s=1", "server.max_connections=1",
                                           "server.max_body_bytes=1", "scheduler.max_waiting=1"});
  CHECK(lo.header_timeout_s == 1);
  CHECK(lo.body_timeout_s == 1);
  CHECK(lo.idle_timeout_s == 1);
  CHECK(lo.max_connections == 1);
  CHECK(lo.max_body_bytes == 1);
  CHECK(lo.max_waiting == 1);
  const node_config hi = parse_config("", {"server.header_timeout_s=3600", "server.max_connections=65536",
                                           "server.max_body_bytes=1073741824", "scheduler.max_waiting=1048576"});
  CHECK(hi.header_timeout_s == 3600);
  CHECK(hi.max_connections == 65536);
  CHECK(hi.max_body_bytes == 1073741824);
  CHECK(hi.max_waiting == 1048576);
  // A numeric-looking key stays text; an empty one means none.
  CHECK(parse_config("", {"server.api_key=12345"}).api_key == "12345");
  CHECK(parse_config("[server]\napi_key = \"x\"", {"server.api_key="}).api_key.empty());
}

TEST_CASE("server.host takes IP addresses and host names", "[config]") {
  for (const char* host : {"localhost", "127.0.0.1", "0.0.0.0", "::1", "::", "node-1.example.internal",
                           "my_host"}) {
    INFO(host);
    CHECK(parse_config("", {std::string("server.host=") + host}).host == host);
  }
}

TEST_CASE("errors about a secret never print it", "[config]") {
  using Catch::Matchers::Equals;
  CHECK_THAT(error_of("[server]\napi_key = \"sk live\""),
             Equals("server.api_key (set, not shown): character 3 of 7 is not allowed; must be printable "
                    "ASCII without spaces, or \"\" for none"));
  CHECK_THAT(error_of("", {"server.admin_key=tab\there"}),
             Equals("server.admin_key (set, not shown): character 4 of 8 is not allowed; must be printable "
                    "ASCII without spaces, or \"\" for none"));
  CHECK_THAT(error_of("[server]\napi_key = 1234567"),
             Equals("server.api_key (not shown): must be a string, printable ASCII without spaces, or \"\" "
                    "for none"));
  // A misspelt secret key is unknown, and its value is still not shown.
  const std::string typo = error_of("", {"server.apikey=sk-live-0123456789"});
  CHECK(typo.rfind("unknown key server.apikey = (not shown); allowed keys in [server]: host, port,", 0) == 0);
  CHECK(typo.find("sk-live") == std::string::npos);
}

TEST_CASE("pd.peers lists HOST:PORT endpoints; security.secret_file is a path, shown in messages", "[config]") {
  auto cfg = parse_config("[pd]\npeers = \"127.0.0.1:7001, node-b:7002\"\n[security]\nsecret_file = \"/s/f\"\n");
  REQUIRE(cfg.pd_peers.size() == 2);
  CHECK(cfg.pd_peers[0] == "127.0.0.1:7001");
  CHECK(cfg.pd_peers[1] == "node-b:7002");
  CHECK(cfg.secret_file == "/s/f");
  CHECK(parse_config("").pd_peers.empty());
  CHECK(error_of("[pd]\npeers = \"127.0.0.1\"").find("\"127.0.0.1\" is not HOST:PORT") != std::string::npos);
  CHECK(error_of("[pd]\npeers = \"h:70000\"").find("is not HOST:PORT") != std::string::npos);
  CHECK(error_of("[pd]\npeers = \"h:1,,h:2\"").find("is not HOST:PORT") != std::string::npos);
  std::string many;
  for (int i = 1; i <= 65; ++i)
    many += (i > 1 ? "," : "") + std::string("h:") + std::to_string(i);
  CHECK(error_of("[pd]\npeers = \"" + many + "\"").find("lists 65 peers") != std::string::npos);
  CHECK(error_of("[security]\nsecret_file = 3").find("= 3") != std::string::npos); // a path is not hidden
}

TEST_CASE("unknown keys and sections are errors naming what is allowed", "[config]") {
  using Catch::Matchers::Equals;
  CHECK_THAT(error_of("[cache]\nblock_sise = 16"),
             Equals("unknown key cache.block_sise = 16; allowed keys in [cache]: block_size, "
                    "chunk_size, num_blocks, checkpoint_interval"));
  CHECK_THAT(error_of("[caches]\nblock_size = 16"),
             Equals("unknown section [caches]; allowed sections: model, device, cache, "
                    "scheduler, kv_transfer, store, pd, security, node, server, log, trace, faults"));
  CHECK_THAT(error_of("port = 1"),
             Equals("unknown key port = 1 at top level; keys belong in a section: model, device, "
                    "cache, scheduler, kv_transfer, store, pd, security, node, server, log, trace, faults"));
  CHECK_THAT(error_of("[model.extra]\nx = 1"),
             Equals("unknown key model.extra = { x = 1 }; allowed keys in [model]: preset, size, "
                    "seed, kv_dtype, weight_dtype, path, served_model_name"));
}

TEST_CASE("syntax errors give the position", "[config]") {
  CHECK(error_of("[cache\nblock_size = 16").rfind("config: TOML syntax error at line 1", 0) == 0);
  CHECK_THROWS_WITH(load_config_file("configs/no_such_file.toml"),
                    "config file \"configs/no_such_file.toml\": no such file");
  // A directory opens as a stream that reads nothing; it must not give the defaults.
  CHECK_THROWS_WITH(load_config_file("configs"),
                    "config file \"configs\": is a directory; expected a TOML file");
  CHECK_THROWS_WITH(load_config_file("configs/"),
                    "config file \"configs/\": is a directory; expected a TOML file");
}

TEST_CASE("--set overrides apply after the file, bare words become text", "[config]") {
  const std::string file = "[model]\npreset = \"qsa_gdn_ple\"\n[cache]\nblock_size = 64\n";
  const node_config cfg =
      parse_config(file, {"model.preset=dense", "cache.block_size=16", "server.host=10.1.2.3",
                          "server.port=0", "log.level=\"warn\"", "device.chaos_seed=123"});
  CHECK(cfg.preset == model_preset::dense);
  CHECK(cfg.block_size == 16);
  CHECK(cfg.host == "10.1.2.3");
  CHECK(cfg.port == 0);
  CHECK(cfg.log_level == "warn");
  CHECK(cfg.chaos_seed == 123);

  // The last override of a key wins.
  CHECK(parse_config("", {"cache.num_blocks=32", "cache.num_blocks=64"}).num_blocks == 64);

  using Catch::Matchers::Equals;
  CHECK_THAT(error_of(file, {"cache.block_size=48"}),
             Equals("cache.block_size = 48: must be a power of two between 4 and 256"));
  CHECK_THAT(error_of(file, {"cache.block_size=big"}),
             Equals("cache.block_size = \"big\": must be an integer, a power of two between 4 "
                    "and 256"));
  CHECK_THAT(error_of(file, {"cache.bogus=1"}),
             Equals("unknown key cache.bogus = 1; allowed keys in [cache]: block_size, "
                    "chunk_size, num_blocks, checkpoint_interval"));
  CHECK_THAT(error_of(file, {"nosection=1"}),
             Equals("--set \"nosection=1\": key \"nosection\" must be section.key, e.g. server.port"));
  CHECK_THAT(error_of(file, {"cache.block_size"}),
             Equals("--set \"cache.block_size\": expected section.key=value, e.g. "
                    "cache.block_size=16"));
}

TEST_CASE("kv_transfer.config accepts vLLM-shaped JSON", "[config]") {
  using Catch::Matchers::Equals;
  const node_config cfg =
      parse_config("[kv_transfer]\nconfig = '{\"kv_connector\":\"none\",\"kv_role\":\"kv_both\"}'");
  CHECK(cfg.connector == connector_kind::none);
  CHECK(cfg.kv_role == kv_role::kv_both);

  // Through --set, unquoted, as it would be typed in a shell.
  CHECK(parse_config("", {R"(kv_transfer.config={"kv_connector":"none"})"}).connector == connector_kind::none);

  // vLLM's shape, as a user of an offload connector writes it.
  auto offload = parse_config(R"([kv_transfer]
config = '{"kv_connector":"offload","kv_role":"kv_both"}')");
  CHECK(offload.connector == connector_kind::offload);
  CHECK(offload.kv_role == kv_role::kv_both);
  CHECK_THAT(error_of(R"([kv_transfer]
config = '{"kv_connector":"none","kv_rank":0}')"),
             Equals(R"(kv_transfer.config = '{"kv_connector":"none","kv_rank":0}': unknown key "kv_rank"; allowed keys: kv_connector, kv_role, kv_connector_extra_config, connectors)"));
  CHECK_THAT(error_of(R"([kv_transfer]
config = '["none"]')"),
             Equals(R"(kv_transfer.config = '["none"]': must be a JSON object like '{"kv_connector":"none","kv_role":"kv_both"}')"));
  CHECK_THAT(error_of(R"([kv_transfer]
config = '{"kv_connector":1}')"),
             Equals(R"(kv_transfer.config = '{"kv_connector":1}': kv_connector = 1: must be a string)"));
  CHECK_THAT(error_of(R"([kv_transfer]
connector = "none"
config = '{"kv_connector":"offload"}')"),
             Equals(R"(kv_transfer.config = '{"kv_connector":"offload"}': kv_connector = "offload" disagrees with kv_transfer.connector = "none"; set one of them)"));
  // A --set overrides the file's form, whichever form each is; two --set forms that disagree are
  // refused as two file forms are.
  const std::string shipped = "[kv_transfer]\nconnector = \"none\"\nkv_role = \"kv_both\"\n";
  const node_config over = parse_config(shipped, {R"(kv_transfer.config={"kv_connector":"offload","kv_role":"kv_both"})"});
  CHECK(over.connector == connector_kind::offload);
  CHECK(parse_config("[kv_transfer]\nconfig = '{\"kv_connector\":\"offload\"}'\n", {"kv_transfer.connector=none"})
            .connector == connector_kind::none);
  CHECK_THAT(error_of("", {"kv_transfer.connector=none", R"(kv_transfer.config={"kv_connector":"offload"})"}),
             Catch::Matchers::Contains(R"(kv_connector = "offload" disagrees with kv_transfer.connector = "none"; set one of them)"));
  const std::string bad_json = error_of("[kv_transfer]\nconfig = '{\"kv_connector\":'");
  CHECK(bad_json.rfind(R"(kv_transfer.config = '{"kv_connector":': invalid JSON ()", 0) == 0);
}

TEST_CASE("validate() refuses a hand-built config too", "[config]") {
  node_config cfg;
  CHECK_NOTHROW(validate(cfg));
  cfg.block_size = 16;
  cfg.chunk_size = 24;
  CHECK_THROWS_WITH(validate(cfg),
                    "cache.chunk_size = 24: must be a positive multiple of cache.block_size (16)");
  // Each key's range and choices, from its declaration, as the reader refuses them.
  node_config seqs;
  seqs.max_num_seqs = 0;
  CHECK_THROWS_WITH(validate(seqs), "scheduler.max_num_seqs = 0: must be between 1 and 256");
  node_config level;
  level.log_level = "loud";
  CHECK_THROWS_WITH(validate(level), "log.level = \"loud\": must be one of trace, debug, info, warn, error");
}

TEST_CASE("trace and fault keys: values, refusals, and the config a trace header carries", "[config]") {
  auto cfg = parse_config("", {"trace.path=/tmp/x.trace", "trace.node=prefill-0", "faults.drop_edge=clear_load"});
  CHECK(cfg.trace_path == "/tmp/x.trace");
  CHECK(cfg.trace_node == "prefill-0");
  CHECK(cfg.drop_edge == fault_edge::clear_load);
  CHECK(parse_config("").drop_edge == fault_edge::none);
  CHECK_THROWS_WITH(parse_config("", {"faults.drop_edge=clear_save"}),
                    "faults.drop_edge = \"clear_save\": must be one of \"\" (none), clear_load, load_forward, "
                    "forward_save, upload_compute");
  CHECK_THROWS_WITH(parse_config("", {"trace.node=a b"}),
                    "trace.node = \"a b\": must be 1 to 64 letters, digits, '_', '-' or '.'");

  // The header's config text reads back to the same config, without secrets or trace.path.
  auto full = parse_config("", {"scheduler.max_batch_tokens=128", "server.api_key=sk-secret", "trace.path=/tmp/t",
                                "faults.drop_edge=forward_save", "trace.node=n1", "kv_transfer.connector=offload"});
  auto text = render_config_toml(full);
  CHECK(text.find("sk-secret") == std::string::npos);
  CHECK(text.find("/tmp/t") == std::string::npos);
  CHECK(text.find("max_batch_tokens = 128") != std::string::npos);
  auto back = parse_config(text);
  full.api_key.clear();
  full.trace_path.clear();
  CHECK(describe(back) == describe(full));
}

TEST_CASE("connector store: store.address, the vLLM extra config, identities, refusals", "[config][store]") {
  using Catch::Matchers::Contains;
  using Catch::Matchers::Equals;
  const node_config cfg = parse_config("", {"kv_transfer.connector=store", "store.address=127.0.0.1:7000"});
  CHECK(cfg.connector == connector_kind::store);
  CHECK(cfg.store_address == "127.0.0.1:7000");
  CHECK(cfg.store_transport == "shm");
  CHECK(cfg.store_deadline_ms == 5000);
  // vLLM's shape, with the address in kv_connector_extra_config.
  const node_config v = parse_config(
      R"([kv_transfer]
config = '{"kv_connector":"store","kv_role":"kv_both","kv_connector_extra_config":{"address":"localhost:7001"}}')");
  CHECK(v.connector == connector_kind::store);
  CHECK(v.store_address == "localhost:7001");
  CHECK_THAT(error_of(R"([kv_transfer]
config = '{"kv_connector":"store","kv_connector_extra_config":{"address":"127.0.0.1:7001"}}'
[store]
address = "127.0.0.1:7000")"),
             Contains(R"(kv_connector_extra_config.address = "127.0.0.1:7001" disagrees with store.address = "127.0.0.1:7000")"));
  CHECK_THAT(error_of(R"([kv_transfer]
config = '{"kv_connector":"store","kv_connector_extra_config":{"host":"x"}}')"),
             Contains(R"(kv_connector_extra_config has unknown key "host"; allowed keys: address)"));
  CHECK_THAT(error_of("", {"kv_transfer.connector=store"}),
             Contains(R"(store.address = "": kv_transfer.connector = "store" needs the store server's actor endpoint)"));
  for (const char* bad : {"127.0.0.1", "127.0.0.1:0", "127.0.0.1:70000", ":7000", "bad host:7000", "h:7x"})
    CHECK_THAT(error_of("", {"kv_transfer.connector=store", std::string("store.address=") + bad}),
               Contains(std::string("store.address = \"") + bad + "\": must be \"HOST:PORT\""));
  CHECK(parse_config("", {"kv_transfer.connector=store", "store.address=127.0.0.1:7000", "store.transport=tcp"})
            .store_transport == "tcp");
  CHECK_THAT(error_of("", {"kv_transfer.connector=store", "store.address=127.0.0.1:7000", "store.transport=tcp",
                           "store.capacity_mb=0"}),
             Contains(R"(store.capacity_mb = 0: must be at least 1 with store.transport = "tcp")"));
  CHECK_THAT(error_of("", {"store.transport=udp"}), Contains(R"(store.transport = "udp": must be one of shm, tcp)"));
  CHECK_THAT(error_of("", {"store.deadline_ms=5"}), Contains("store.deadline_ms = 5: must be between 100 and 600000"));
  CHECK_THAT(error_of("", {"node.engine_id=a b"}), Contains(R"(node.engine_id = "a b": must be "")"));
  CHECK_THAT(error_of("", {"store.expect_identity=x/y"}), Contains(R"(store.expect_identity = "x/y": must be "")"));
  // The canonical description carries the store keys, so a trace header's config reads back.
  node_config full = parse_config("", {"kv_transfer.connector=store", "store.address=[::1]:7000",
                                       "store.expect_identity=store-a", "node.engine_id=node-1"});
  CHECK_THAT(describe(full), Contains("store.address=[::1]:7000 store.transport=shm store.deadline_ms=5000 "
                                      "store.expect_identity=store-a node.engine_id=node-1"));
  const node_config back = parse_config(render_config_toml(full));
  CHECK(back.store_address == "[::1]:7000");
  CHECK(back.store_expect_identity == "store-a");
  CHECK(back.engine_id == "node-1");
}

TEST_CASE("parse_host_port", "[config][store]") {
  auto a = parse_host_port("127.0.0.1:7000");
  REQUIRE(a);
  CHECK(a->host == "127.0.0.1");
  CHECK(a->port == 7000);
  auto b = parse_host_port("[::1]:65535");
  REQUIRE(b);
  CHECK(b->host == "::1");
  CHECK(b->port == 65535);
  CHECK(parse_host_port("localhost:1"));
  for (const char* bad : {"", "7000", "host:", "host:0", "host:65536", "host:123456", "host:-1", "ho st:1"})
    CHECK_FALSE(parse_host_port(bad));
}

TEST_CASE("[pd] lease_ms and transport, faults.corrupt_commits", "[config]") {
  using Catch::Matchers::Equals;
  auto cfg = parse_config("[kv_transfer]\nconnector = \"pd\"\n[pd]\nlease_ms = 1500\ntransport = \"tcp\"");
  CHECK(cfg.pd_lease_ms == 1500);
  CHECK(cfg.pd_transport == "tcp");
  CHECK(parse_config("").pd_lease_ms == 30000);
  CHECK(parse_config("").pd_transport == "shm");
  CHECK_THAT(error_of("[pd]\nlease_ms = -1"),
             Equals("pd.lease_ms = -1: must be between 0 (no lease) and 3600000 milliseconds"));
  CHECK_THAT(error_of("[pd]\ntransport = \"rdma\""), Equals("pd.transport = \"rdma\": must be one of shm, tcp"));
  CHECK(parse_config("", {"kv_transfer.connector=pd", "faults.corrupt_commits=kv_chunk"}).corrupt_commits == "kv_chunk");
  CHECK_THAT(error_of("[faults]\ncorrupt_commits = \"kv_chunk\""),
             Equals("faults.corrupt_commits = \"kv_chunk\": corrupts what a P/D node's host tier commits; it needs "
                    "kv_transfer.connector = \"pd\""));
  CHECK_THAT(error_of("[kv_transfer]\nconnector = \"pd\"\n[faults]\ncorrupt_commits = \"all\""),
             Equals("faults.corrupt_commits = \"all\": must be one of none, kv_chunk, state_image"));
  // A pd node's config round-trips with its [pd] keys (a trace header carries it).
  auto back = parse_config(render_config_toml(cfg));
  CHECK(back.pd_lease_ms == 1500);
  CHECK(back.pd_transport == "tcp");
}

TEST_CASE("multi: leaves from kv_transfer.connectors or vLLM's MultiConnector JSON; refusals name the leaves",
          "[config]") {
  using Catch::Matchers::Equals;
  auto cfg = parse_config("", {"kv_transfer.connector=multi", "kv_transfer.connectors=pd, offload"});
  REQUIRE(cfg.leaves == std::vector<connector_kind>{connector_kind::pd, connector_kind::offload});
  CHECK(cfg.uses_pd());
  auto vllm = parse_config(
      R"([kv_transfer]
config = '{"kv_connector":"MultiConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"connectors":[{"kv_connector":"offload"},{"kv_connector":"pd"}]}}')");
  CHECK(vllm.connector == connector_kind::multi);
  CHECK(vllm.kv_role == kv_role::kv_consumer);
  CHECK(vllm.leaves == std::vector<connector_kind>{connector_kind::offload, connector_kind::pd});
  auto plain = parse_config(R"([kv_transfer]
config = '{"kv_connector":"multi","connectors":["pd_kv","offload"]}')");
  CHECK(plain.leaves == std::vector<connector_kind>{connector_kind::pd_kv, connector_kind::offload});
  // The rendered config reads back to the same leaves (a trace header carries it).
  CHECK(parse_config(render_config_toml(cfg)).leaves == cfg.leaves);

  CHECK_THAT(error_of("", {"kv_transfer.connector=multi", "kv_transfer.connectors=offload,store",
                           "store.address=127.0.0.1:1"}),
             Equals("kv_transfer.connectors = \"offload,store\": two offload leaves (offload and store) would each keep "
                    "every save of this node; compose at most one offload leaf with a P/D leaf"));
  CHECK_THAT(error_of("", {"kv_transfer.connector=multi", "kv_transfer.connectors=pd,pd_kv"}),
             Equals("kv_transfer.connectors = \"pd,pd_kv\": two P/D leaves (pd and pd_kv) would each serve this "
                    "node's host tier to peers; use one"));
  CHECK_THAT(error_of("", {"kv_transfer.connector=multi", "kv_transfer.connectors=pd"}),
             Equals("kv_transfer.connector = \"multi\" needs at least two leaves in kv_transfer.connectors (e.g. "
                    "\"pd,offload\"), got \"pd\""));
  CHECK_THAT(error_of("", {"kv_transfer.connector=multi", "kv_transfer.connectors=pd,none"}),
             Equals("kv_transfer.connectors = \"pd,none\": \"none\" cannot be a leaf (leaves: offload, store, pd, pd_kv)"));
  CHECK_THAT(error_of("", {"kv_transfer.connector=pd", "kv_transfer.connectors=pd,offload"}),
             Equals("kv_transfer.connectors = \"pd,offload\": leaves are composed by kv_transfer.connector = \"multi\", "
                    "not \"pd\""));
  CHECK_THAT(error_of("", {"kv_transfer.connector=multi", "kv_transfer.connectors=pd,lmcache"}),
             Equals("kv_transfer.connectors = \"lmcache\": must be one of none, offload, store, pd, pd_kv, multi"));
}

TEST_CASE("the key table (docs/config.md) names every key the reader takes, once, with its default", "[config]") {
  const std::string table = node_config_keys_table();
  std::vector<std::string> keys;
  for (size_t at = table.find("\n| `"); at != std::string::npos; at = table.find("\n| `", at + 1))
    keys.push_back(table.substr(at + 4, table.find('`', at + 4) - at - 4));
  CHECK(keys.size() == 50);
  for (size_t i = 0; i < keys.size(); ++i) {
    INFO(keys[i]);
    CHECK(std::count(keys.begin(), keys.end(), keys[i]) == 1);
    // Known to the reader: whatever it says about the value, it is not "unknown key".
    CHECK(error_of("", {keys[i] + "=@"}).rfind("unknown", 0) == std::string::npos);
  }
  CHECK(error_of("", {"cache.block_sizes=16"}).rfind("unknown key cache.block_sizes", 0) == 0);
  // Each row's default is what an empty file gives (describe() writes it so).
  const std::string d = describe(parse_config(""));
  for (size_t start = 0, end; start < d.size(); start = end + 1) {
    end = std::min(d.find(' ', start), d.size());
    const std::string item = d.substr(start, end - start), key = item.substr(0, item.find('='));
    const std::string value = item.substr(item.find('=') + 1);
    INFO(item);
    if (value == "unset") // a secret: its default is ""
      CHECK_THAT(table, Catch::Matchers::Contains("| `" + key + "` | secret | `\"\"` |"));
    else
      CHECK_THAT(table, Catch::Matchers::Contains("| `" + key + "` | integer | `" + value + "` |") ||
                            Catch::Matchers::Contains("| `" + key + "` | choice | `\"" + value + "\"` |") ||
                            Catch::Matchers::Contains("| `" + key + "` | string | `\"" + value + "\"` |"));
  }
  CHECK_THAT(table, Catch::Matchers::Contains(
                        "| `cache.block_size` | integer | `64` | a power of two between 4 and 256 | tokens per block"));
  CHECK_THAT(table, Catch::Matchers::Contains("| `model.preset` | choice | `\"qsa_gdn_ple\"` | one of dense, gdn_hybrid, "
                                              "qsa_gdn_ple |"));
}

TEST_CASE("describe() writes model.path where the preset's keys stand", "[config]") {
  node_config cfg; // describe() takes the config as it is: no checkpoint is opened here
  cfg.model_path = "ck";
  cfg.served_model_name = "tiny";
  CHECK(describe(cfg).rfind("model.path=ck model.served_model_name=tiny model.kv_dtype=fp32 ", 0) == 0);
  cfg.served_model_name.clear();
  CHECK(describe(cfg).rfind("model.path=ck model.kv_dtype=fp32 ", 0) == 0);
}
