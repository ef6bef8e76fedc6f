#include <catch.hpp>

#include <map>
#include <set>

#include "kernels/kernel_args.hpp"
#include "runtime/layouts.hpp"

using namespace ordo;

namespace {

struct built {
  std::unique_ptr<device> dev = make_cpu_device({});
  std::unique_ptr<model> m;
  explicit built(model_preset p, kv_dtype kv = kv_dtype::fp32, int32_t block = 64) {
    model_options o;
    o.preset = p;
    o.kv = kv;
    o.block_size = block;
    o.num_blocks = 32;
    o.max_batch_tokens = 64;
    o.max_state_slots = 2;
    m = std::make_unique<model>(o, *dev);
  }
};

const std::map<model_preset, std::string> golden_layout_ids = {
    {model_preset::dense, "none"},
    {model_preset::gdn_hybrid, 
     "state-v1;gdn_conv[0]:fp32:2304@0;gdn_ssm[0]:fp32:4096@2304;gdn_conv[1]:fp32:2304@6400;gdn_ssm[1]:fp32:4096@8704;gdn_conv[2]:fp32:2304@12800;gdn_ssm[2]:fp32:4096@15104"},
    {model_preset::qsa_gdn_ple, 
     "state-v1;gdn_conv[0]:fp32:2304@0;gdn_ssm[0]:fp32:4096@2304;gdn_conv[1]:fp32:2304@6400;gdn_ssm[1]:fp32:4096@8704;gdn_conv[2]:fp32:2304@12800;gdn_ssm[2]:fp32:4096@15104;ple_window[*]:i32:8@19200;ple_conv[0]:fp32:192@19216;ple_conv[1]:fp32:192@19408;ple_conv[2]:fp32:192@19600;ple_conv[3]:fp32:192@19792"},
};

const std::map<model_preset, uint64_t> golden_namespaces = {
    {model_preset::dense, 0x7767212bfc8c631fULL},
    {model_preset::gdn_hybrid, 0x6f871240802133b7ULL},
    {model_preset::qsa_gdn_ple, 0xeac217f6a3753facULL},
};

namespace_inputs inputs_for(model_preset p) {
  namespace_inputs in;
  in.preset = p;
  in.block_size = 64;
  in.chunk_size = 256;
  return in;
}

} // namespace

TEST_CASE("layouts: the state layout id of each preset is pinned") {
  for (auto& [preset, golden] : golden_layout_ids) {
    built b(preset);
    INFO(to_string(preset));
    CHECK(state_layout_id(b.m->state_slots()) == golden);
  }
}

TEST_CASE("layouts: the namespace of each preset is pinned, and only its own geometry moves it") {
  std::map<model_preset, uint64_t> ns;
  for (auto& [preset, golden] : golden_namespaces) {
    built b(preset);
    ns[preset] = namespace_digest(inputs_for(preset), dims_of(preset, model_size::tiny),
                                  state_layout_id(b.m->state_slots()));
    INFO(to_string(preset) << " " << std::hex << ns[preset]);
    CHECK(ns[preset] == golden);
  }
  // Attention's fixed split (kernel_args.hpp) is part of the numerics: pages computed under another
  // split are never shared.
  CHECK(canonical_namespace(inputs_for(model_preset::dense), dims_of(model_preset::dense, model_size::tiny), "none")
            .find("|attn_split=" + std::to_string(attention_chunk) + "|") != std::string::npos);
  // A geometry change to gdn_hybrid (wider GDN heads) moves its namespace and no other.
  auto changed = dims_of(model_preset::gdn_hybrid, model_size::tiny);
  changed.gdn_dv *= 2;
  built gdn(model_preset::gdn_hybrid);
  CHECK(namespace_digest(inputs_for(model_preset::gdn_hybrid), changed, state_layout_id(gdn.m->state_slots())) !=
        ns[model_preset::gdn_hybrid]);
  for (auto preset : {model_preset::dense, model_preset::qsa_gdn_ple}) {
    built b(preset);
    CHECK(namespace_digest(inputs_for(preset), dims_of(preset, model_size::tiny), state_layout_id(b.m->state_slots())) ==
          ns[preset]);
  }
  // Every byte-changing choice moves it: dtype, block, chunk, seed, tf32 matmuls (per GPU kind).
  built qsa(model_preset::qsa_gdn_ple);
  auto id = state_layout_id(qsa.m->state_slots());
  auto dims = dims_of(model_preset::qsa_gdn_ple, model_size::tiny);
  auto base = inputs_for(model_preset::qsa_gdn_ple);
  std::set<uint64_t> seen;
  for (auto tweak : {0, 1, 2, 3, 4, 5}) {
    auto in = base;
    if (tweak == 0) in.kv = kv_dtype::bf16;
    if (tweak == 1) in.block_size = 16;
    if (tweak == 2) in.chunk_size = 512;
    if (tweak == 3) in.seed = 1;
    if (tweak == 4) in.matmul_numerics = "tf32@NVIDIA H200";
    if (tweak == 5) in.matmul_numerics = "tf32@AMD Instinct MI250X";
    CHECK(namespace_digest(in, dims, id) != ns[model_preset::qsa_gdn_ple]);
    CHECK(seen.insert(namespace_digest(in, dims, id)).second);
  }
}

TEST_CASE("layouts: every preset and KV dtype publishes the regions its layout computes") {
  for (auto preset : {model_preset::dense, model_preset::gdn_hybrid, model_preset::qsa_gdn_ple})
    for (auto kv : {kv_dtype::fp32, kv_dtype::bf16, kv_dtype::fp8}) {
      built b(preset, kv);
      INFO(to_string(preset) << " " << to_string(kv));
      CHECK(check_regions(region_layout(b.m->dims(), kv, 64), b.m->kv_fields()) == "");
    }
}

TEST_CASE("layouts: a swapped field and a missing field are caught") {
  built b(model_preset::qsa_gdn_ple, kv_dtype::fp8);
  auto expected = region_layout(b.m->dims(), kv_dtype::fp8, 64);
  auto swapped = b.m->kv_fields();
  REQUIRE(swapped.size() >= 2);
  std::swap(swapped[0], swapped[1]); // v published where k belongs
  CHECK(check_regions(expected, swapped).find("published field 0 (v of layer") != std::string::npos);
  auto missing = b.m->kv_fields();
  auto lost = missing.back().name;
  missing.pop_back();
  CHECK(check_regions(expected, missing).find(lost + " of layer") != std::string::npos);
  CHECK(check_regions(expected, missing).find("is not published") != std::string::npos);
  auto resized = b.m->kv_fields();
  resized[2].row_bytes += 4; // a scale plane one float wider
  CHECK(check_regions(expected, resized).find("rows of") != std::string::npos);
}
