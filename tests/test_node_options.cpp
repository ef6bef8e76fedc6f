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

TEST_CASE("node_options: each connector kind is a route table", "[node_options]") {
  const auto facts = hybrid_facts();
  const auto none = derive_node_options(parse_config(""), facts).routes;
  CHECK(none.name == "none");
  REQUIRE(none.leaves.size() == 1);
  CHECK(none.leaves[0].kind == route_kind::none);
  CHECK(none.leaves[0].name == "none");
  CHECK_FALSE(none.multi());

  for (const char* kind : {"offload", "store"}) {
    const auto o = derive_node_options(
        parse_config("", {std::string("kv_transfer.connector=") + kind, "store.address=127.0.0.1:1"}), facts);
    CAPTURE(kind);
    REQUIRE(o.routes.leaves.size() == 1);
    const auto& leaf = o.routes.leaves[0];
    CHECK(leaf.kind == route_kind::offload);
    CHECK(leaf.name == kind);
    CHECK(leaf.policy.name == kind);
    CHECK(leaf.policy.namespace_id == o.namespace_id);
    CHECK_FALSE(o.routes.store_stamps); // its store steps carry the connector step's (epoch, seq)
  }

  const auto dense = [] {
    auto f = hybrid_facts();
    f.geometry.has_recurrent_state = false;
    return f;
  }();
  for (const char* kind : {"pd", "pd_kv"}) {
    const auto o = derive_node_options(
        parse_config("", {std::string("kv_transfer.connector=") + kind, "pd.lease_ms=1234"}), dense);
    CAPTURE(kind);
    REQUIRE(o.routes.leaves.size() == 1);
    const auto& leaf = o.routes.leaves[0];
    CHECK(leaf.kind == route_kind::pd);
    CHECK(leaf.name == kind);
    CHECK(leaf.takes_leases);
    CHECK(leaf.policy.lease_ms == 1234);
    CHECK(o.routes.store_stamps); // this node's store and each peer's, each its own sequence
  }
  // A decode-only P/D node holds no leases.
  CHECK(derive_node_options(parse_config("", {"kv_transfer.connector=pd", "kv_transfer.kv_role=kv_consumer"}), dense)
            .routes.leaves[0]
            .policy.lease_ms == 0);
}

TEST_CASE("node_options: multi is a route table of its leaves in lookup order", "[node_options]") {
  const auto facts = hybrid_facts();
  const auto o = derive_node_options(
      parse_config("", {"kv_transfer.connector=multi", "kv_transfer.connectors=pd,offload", "pd.lease_ms=900"}), facts);
  const auto& t = o.routes;
  CHECK(t.name == "multi");
  CHECK(t.multi());
  CHECK(t.store_stamps);
  REQUIRE(t.leaves.size() == 2);
  CHECK(t.leaves[0].name == "pd");
  CHECK(t.leaves[0].kind == route_kind::pd);
  CHECK(t.leaves[0].takes_leases);
  CHECK(t.leaves[0].policy.lease_ms == 900);
  CHECK(t.leaves[1].name == "offload");
  CHECK(t.leaves[1].kind == route_kind::offload);
  CHECK_FALSE(t.leaves[1].takes_leases);
  CHECK(t.leaves[1].policy.lease_ms == 0);
  CHECK(t.leaves[1].policy.name == "offload");
  CHECK(t.leaves[0].window_offset == 0);
  CHECK(t.leaves[1].window_offset == 0); // the node sets it where it maps the leaf's arena

  const auto reversed =
      derive_node_options(parse_config("", {"kv_transfer.connector=multi", "kv_transfer.connectors=offload,pd"}), facts);
  REQUIRE(reversed.routes.leaves.size() == 2);
  CHECK(reversed.routes.leaves[0].name == "offload");
  CHECK(reversed.routes.leaves[1].name == "pd");
}

TEST_CASE("node_options: compositions multi refuses, each naming the leaves", "[node_options]") {
  auto with = [](connector_kind kind, std::vector<connector_kind> leaves) {
    node_config cfg;
    cfg.connector = kind;
    cfg.leaves = std::move(leaves);
    return cfg;
  };
  using k = connector_kind;
  CHECK(composition_refusal(with(k::multi, {k::pd, k::offload})).empty());
  CHECK(composition_refusal(with(k::pd, {})).empty());
  CHECK(composition_refusal(with(k::multi, {k::offload, k::store})) ==
        "kv_transfer.connectors = \"offload,store\": two offload leaves (offload and store) would each keep every save "
        "of this node; compose at most one offload leaf with a P/D leaf");
  CHECK(composition_refusal(with(k::multi, {k::pd, k::pd_kv})) ==
        "kv_transfer.connectors = \"pd,pd_kv\": two P/D leaves (pd and pd_kv) would each serve this node's host tier "
        "to peers; use one");
  CHECK(composition_refusal(with(k::multi, {k::pd})) ==
        "kv_transfer.connector = \"multi\" needs at least two leaves in kv_transfer.connectors (e.g. \"pd,offload\"), "
        "got \"pd\"");
  CHECK(composition_refusal(with(k::multi, {k::pd, k::none})) ==
        "kv_transfer.connectors = \"pd,none\": \"none\" cannot be a leaf (leaves: offload, store, pd, pd_kv)");
  CHECK(composition_refusal(with(k::multi, {k::multi, k::pd})) ==
        "kv_transfer.connectors = \"multi,pd\": \"multi\" cannot be a leaf (leaves: offload, store, pd, pd_kv)");
  CHECK(composition_refusal(with(k::pd, {k::pd, k::offload})) ==
        "kv_transfer.connectors = \"pd,offload\": leaves are composed by kv_transfer.connector = \"multi\", not \"pd\"");
  CHECK(composition_refusal(with(k::multi, {k::store, k::pd})) ==
        "kv_transfer.connectors = \"store,pd\": a store leaf inside multi is not supported yet; compose the in-process "
        "offload leaf with the P/D leaf, or use kv_transfer.connector = \"store\" alone");

  // No route table is built for a refused composition, and the node refuses to start with it.
  const auto bad = with(k::multi, {k::offload, k::store});
  CHECK_THROWS_WITH(route_table_of(bad, offload_options{}), Catch::Matchers::Contains("two offload leaves"));
  CHECK(connector_refusal(bad, {}).find("two offload leaves") != std::string::npos);
}
