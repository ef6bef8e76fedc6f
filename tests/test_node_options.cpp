#include <catch.hpp>

#include "runtime/config.hpp"
#include "runtime/model_presets.hpp"
#include "runtime/node_options.hpp"

using namespace ordo;

namespace {

// What a hybrid model would report, without building one.
node_model_facts hybrid_facts() {
  node_model_facts f;
  f.geometry.max_context = 4096;
  f.geometry.vocab_size = 258;
  f.geometry.eos_ids = {257};
  f.geometry.has_recurrent_state = true;
  f.dims = dims_of(model_preset::qsa_gdn_ple, model_size::tiny);
  f.state_layout_id = "test-layout";
  f.units_per_image = 3;
  f.unit_bytes = 4096;
  f.device_name = "test device";
  return f;
}

} // namespace

TEST_CASE("node_options: without a connector there is no host tier", "[node_options]") {
  const auto o = derive_node_options(parse_config(""), hybrid_facts());
  CHECK_FALSE(o.offload);
  CHECK(o.host_arena_bytes == 0);
  CHECK(o.executor.host_arena_bytes == 0);
  CHECK_FALSE(o.scheduler.offload);
  CHECK(o.scheduler.units_per_image == 3);
  CHECK(o.scheduler.unit_bytes == 4096);
  CHECK(o.scheduler.eos_ids == std::vector<int32_t>{257});
  CHECK(o.scheduler.namespace_id == o.namespace_id);
  CHECK(o.model_name == "ordo-qsa_gdn_ple-tiny");
  CHECK(o.limits.max_context == 4096);
  CHECK(o.warnings.empty());
}

TEST_CASE("node_options: offload and kv_role map to the host tier and the scheduler", "[node_options]") {
  const auto facts = hybrid_facts();
  const auto both = derive_node_options(
      parse_config("", {"kv_transfer.connector=offload", "store.capacity_mb=8", "cache.chunk_size=128"}), facts);
  REQUIRE(both.offload);
  CHECK(both.offload->loads);
  CHECK(both.offload->saves);
  CHECK(both.offload->chunk_size == 128);
  CHECK(both.offload->namespace_id == both.namespace_id);
  CHECK(both.host_arena_bytes == size_t{8} << 20);
  CHECK(both.executor.host_arena_bytes == size_t{8} << 20);
  CHECK(both.scheduler.offload);
  CHECK(both.scheduler.offload_loads);
  CHECK(both.scheduler.offload_saves);
  CHECK(both.scheduler.chunk_size == 128);

  const auto producer =
      derive_node_options(parse_config("", {"kv_transfer.connector=offload", "kv_transfer.kv_role=kv_producer"}), facts);
  REQUIRE(producer.offload);
  CHECK_FALSE(producer.offload->loads);
  CHECK(producer.offload->saves);
  CHECK_FALSE(producer.scheduler.offload_loads);
  CHECK(producer.scheduler.offload_saves);

  const auto consumer =
      derive_node_options(parse_config("", {"kv_transfer.connector=offload", "kv_transfer.kv_role=kv_consumer"}), facts);
  REQUIRE(consumer.offload);
  CHECK(consumer.offload->loads);
  CHECK_FALSE(consumer.offload->saves);
  CHECK(consumer.scheduler.offload_loads);
  CHECK_FALSE(consumer.scheduler.offload_saves);
}

TEST_CASE("node_options: the body limit comes from the context length unless set", "[node_options]") {
  auto facts = hybrid_facts();
  CHECK(derive_node_options(parse_config(""), facts).http.max_body_bytes == (64u << 10) + 8u * 4096);
  facts.geometry.max_context = 100;
  CHECK(derive_node_options(parse_config(""), facts).http.max_body_bytes == (64u << 10) + 800);
  CHECK(derive_node_options(parse_config("", {"server.max_body_bytes=5000"}), facts).http.max_body_bytes == 5000);
}

TEST_CASE("node_options: server numbers and scheduler limits pass through", "[node_options]") {
  const auto o = derive_node_options(
      parse_config("", {"scheduler.max_waiting=7", "server.header_timeout_s=2", "server.body_timeout_s=3",
                        "server.idle_timeout_s=4", "server.max_connections=9", "server.port=0"}),
      hybrid_facts());
  CHECK(o.scheduler.max_waiting == 7);
  CHECK(o.http.header_timeout_ms == 2000);
  CHECK(o.http.body_timeout_ms == 3000);
  CHECK(o.http.idle_timeout_ms == 4000);
  CHECK(o.http.max_connections == 9);
  CHECK(o.http.port == 0);
  CHECK(o.http.host == "127.0.0.1");
}

TEST_CASE("node_options: a checkpoint interval off the block grid is snapped and reported", "[node_options]") {
  const auto o = derive_node_options(parse_config("", {"cache.block_size=64", "cache.checkpoint_interval=200"}),
                                     hybrid_facts());
  CHECK(o.scheduler.checkpoint_interval == 192);
  REQUIRE(o.warnings.size() == 1);
  CHECK(o.warnings[0] == "cache.checkpoint_interval = 200 is not a multiple of cache.block_size = 64: snapped down to 192");
  CHECK(derive_node_options(parse_config("", {"cache.checkpoint_interval=256"}), hybrid_facts()).warnings.empty());
}

TEST_CASE("node_options: a non-exact matmul names its device in the namespace", "[node_options]") {
  const auto facts = hybrid_facts();
  const auto exact = derive_node_options(parse_config(""), facts);
  CHECK(exact.namespace_in.matmul_numerics.empty());
  const auto tf32 = derive_node_options(parse_config("", {"device.kind=hip", "device.matmul=tf32"}), facts);
  CHECK(tf32.namespace_in.matmul_numerics == "tf32@test device");
  CHECK(tf32.namespace_id != exact.namespace_id);
  const auto bf16 = derive_node_options(parse_config("", {"device.kind=hip", "model.weight_dtype=bf16"}), facts);
  CHECK(bf16.namespace_in.matmul_numerics == "bf16@test device");
  CHECK(bf16.namespace_id != exact.namespace_id);
  CHECK(bf16.namespace_id != tf32.namespace_id);
}

TEST_CASE("pd_kv is refused for a model with recurrent state, naming its state groups", "[node_options]") {
  node_config cfg;
  cfg.connector = connector_kind::pd_kv;
  cfg.preset = model_preset::qsa_gdn_ple;
  const std::string why =
      connector_refusal(cfg, {"gdn_conv", "gdn_ssm", "gdn_conv", "gdn_ssm", "ple_window", "ple_conv"});
  CHECK(why == "kv_transfer.connector = \"pd_kv\" moves KV pages only, and model.preset = qsa_gdn_ple keeps "
               "recurrent state a decode node would lose (gdn_conv, gdn_ssm, ple_window, ple_conv); use \"pd\", "
               "which moves the state images with the KV");
  CHECK(connector_refusal(cfg, {}).empty()); // a dense model has no state to lose
  for (auto kind : {connector_kind::pd, connector_kind::offload, connector_kind::store, connector_kind::none}) {
    cfg.connector = kind;
    CHECK(connector_refusal(cfg, {"gdn_conv"}).empty());
  }
}

TEST_CASE("node_options: /v1/models shows model.served_model_name, else the checkpoint's directory or the preset",
          "[node_options]") {
  const auto facts = hybrid_facts();
  CHECK(derive_node_options(parse_config(""), facts).model_name == "ordo-qsa_gdn_ple-tiny");
  CHECK(derive_node_options(parse_config("", {"model.served_model_name=toy"}), facts).model_name == "toy");
  node_config ck = parse_config("");
  ck.model_path = "tests/data/hf/qwen3_5_text/";
  const auto served = derive_node_options(ck, facts);
  CHECK(served.model_name == "qwen3_5_text");
  CHECK_FALSE(served.limits.text_prompts);
  CHECK(derive_node_options(parse_config(""), facts).limits.text_prompts);
  ck.served_model_name = "tiny-qwen";
  CHECK(derive_node_options(ck, facts).model_name == "tiny-qwen");
}
