#include "runtime/model.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>

#include "kernels/cpu/hash.hpp"
#include "kernels/kernel_table.hpp"
#include "runtime/model_presets.hpp"
#include "runtime/models/hf_model.hpp"

namespace ordo {

const char* to_string(model_preset p) {
  switch (p) {
  case model_preset::dense: return "dense";
  case model_preset::gdn_hybrid: return "gdn_hybrid";
  case model_preset::qsa_gdn_ple: return "qsa_gdn_ple";
  }
  return "?";
}

const char* to_string(model_size s) {
  switch (s) {
  case model_size::tiny: return "tiny";
  case model_size::b1: return "b1";
  }
  return "?";
}

const char* to_string(kv_dtype d) {
  switch (d) {
  case kv_dtype::fp32: return "fp32";
  case kv_dtype::bf16: return "bf16";
  case kv_dtype::fp8: return "fp8";
  }
  return "?";
}

namespace {

// Tensor ids key the weight generator: global tensors 1..9, layer l's tensors 1000 + 64 l + kind.
enum tensor_kind : uint64_t {
  t_embed = 1, t_final_norm = 2, t_lm_head = 3,
  t_ln1 = 10, t_ln2, t_wqkv, t_wo, t_wgu, t_wdown,
  t_gdn_in, t_gdn_abg, t_gdn_conv, t_gdn_a_bias, t_gdn_out,
  t_ple_table, t_ple_conv, t_ple_up,
};
uint64_t tensor_id(int32_t layer, tensor_kind kind) { return layer < 0 ? kind : 1000 + 64 * uint64_t(layer) + kind; }

enum class init_kind { linear, norm, embed, conv, a_bias };

// value = f(uniform_pm1(hash(seed, tensor id, index))): integer hashing and exact float steps,
// so a GPU can generate the same weights in place.
float weight_value(uint64_t seed, uint64_t id, uint64_t index, init_kind how, int32_t fan_in) {
  const float u = cpu::uniform_pm1(cpu::hash3(seed, id, index));
  switch (how) {
  case init_kind::linear: return u * std::sqrt(3.0f / static_cast<float>(fan_in));
  case init_kind::norm: return 1.0f + 0.1f * u;
  case init_kind::embed: return u;
  case init_kind::conv: return u * std::sqrt(3.0f / static_cast<float>(fan_in));
  case init_kind::a_bias: return 2.0f + u;
  }
  return 0.0f;
}

constexpr size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// fp32 → bf16 bits, round to nearest even (the generated weights are finite).
uint16_t bf16_bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  b += 0x7fffu + ((b >> 16) & 1u);
  return static_cast<uint16_t>(b >> 16);
}

// A matmul's weight: fp32, or the bits of bf16 values when model.weight_dtype = bf16 (exactly
// one is set).
struct matrix {
  const float* f32 = nullptr;
  const uint16_t* bf16 = nullptr;
};

matmul_args mm(const float* x, int64_t ldx, const matrix& w, float* y, int64_t ldy, int32_t rows, int32_t in,
               int32_t out, bool accumulate) {
  return {x, ldx, w.f32, y, ldy, rows, in, out, accumulate, w.bf16};
}

struct layer_state {
  layer_kind kind;
  // weights
  float *ln1 = nullptr, *ln2 = nullptr;
  matrix wqkv, wo, wgu, wdown, gdn_in, gdn_abg, ple_up;
  float *gdn_conv = nullptr, *gdn_a_bias = nullptr, *ple_table = nullptr, *ple_conv = nullptr;
  float *gdn_neg_exp_a = nullptr, *gdn_norm = nullptr, *q_norm = nullptr, *k_norm = nullptr; // qwen3_5
  int32_t qkv_width = 0; // output width of wqkv (sparse layers add index q and k, qwen3_5 the output gate)
  // KV arena regions (attention layers)
  void *k = nullptr, *v = nullptr;
  float *k_scale = nullptr, *v_scale = nullptr, *index_raw = nullptr, *index_compressed = nullptr;
  // byte offsets inside a state slot
  size_t gdn_conv_offset = 0, gdn_ssm_offset = 0, ple_conv_offset = 0;
};

} // namespace

struct model::impl {
  model_options options;
  model_geometry geometry;
  model_dims dims;
  device& dev;
  std::unique_ptr<kernel_table> kernels;
  std::vector<void*> allocations;

  float *embed = nullptr, *final_norm = nullptr, *rope_table = nullptr;
  matrix lm_head;
  std::vector<layer_state> layers;
  std::vector<kv_field> kv_fields;
  state_layout state;
  size_t ple_window_offset = 0;
  uint64_t ple_hash_seed = 0;
  elem_dtype kv_elem = elem_dtype::fp32;
  // The gate/up weight rows in runs of 8 gates and their 8 ups (swiglu_args::group), so that a GPU
  // matmul tile holds both halves of its outputs and applies swiglu itself; 0 where mlp_dim is not
  // a multiple of 8.
  int32_t mlp_group = 0;

  // workspace, max_batch_tokens rows each
  float *h = nullptr, *xn = nullptr, *proj = nullptr, *abg = nullptr, *conv_out = nullptr, *mix = nullptr;
  float *ple_e = nullptr, *ple_c = nullptr, *sample_h = nullptr, *sample_xn = nullptr;
  float* attn_partials = nullptr; // a GPU's chunk-parallel attention scratch (kernel_args.hpp)
  int64_t attn_partials_floats = 0;
  uint32_t* attn_partial_counts = nullptr;
  int32_t* ple_buckets = nullptr;
  int64_t ld_proj = 0, ld_mix = 0;
  device_outputs outputs;
  weight_footprint footprint;

  impl(const model_options& o, device& d) : options(o), dev(d) {}
  ~impl() {
    for (void* p : allocations) dev.free_device(p);
  }
  void* alloc(size_t bytes) {
    void* p = dev.alloc_device(std::max<size_t>(bytes, 1));
    allocations.push_back(p);
    return p;
  }
  float* alloc_floats(size_t n) { return static_cast<float*>(alloc(n * sizeof(float))); }

  struct weight_spec;
  void validate() const;
  void upload_weights(std::vector<weight_spec>& specs);
  void build_weights();
  void build_checkpoint_weights();
  void build_rope();
  void build_kv_arena();
  void build_state();
  void build_workspace();
  // The mixer of a qwen3_5 layer: h += GDN or gated attention of xn.
  void enqueue_qwen_mixer(stream_kind s, const device_batch& b, const layer_state& L);
};

void model::impl::validate() const {
  const auto bad = [](const std::string& m) { throw std::invalid_argument("model: " + m); };
  if (options.block_size <= 0) bad("block_size must be > 0, got " + std::to_string(options.block_size));
  if (options.num_blocks <= 0) bad("num_blocks must be > 0, got " + std::to_string(options.num_blocks));
  if (options.max_batch_tokens <= 0) bad("max_batch_tokens must be > 0, got " + std::to_string(options.max_batch_tokens));
  if (geometry.has_recurrent_state && options.max_state_slots <= 0)
    bad("max_state_slots must be > 0 for a model with recurrent state, got " + std::to_string(options.max_state_slots));
  const bool sparse = std::count(dims.layers.begin(), dims.layers.end(), layer_kind::sparse_attention) > 0;
  if (sparse && options.block_size % dims.index_group != 0)
    bad("block_size must be a multiple of " + std::to_string(dims.index_group) + " for sparse attention, got " +
        std::to_string(options.block_size));
}

// One tensor to upload: where its pointer goes, its element count, and how to write its values in
// logical order (gate rows then up rows for a gate/up weight).
struct model::impl::weight_spec {
  float** dst; // or
  matrix* mdst;
  size_t count;
  std::function<void(float*)> fill;
  int32_t gate_up_group = 0; // > 0: gate/up rows stored in runs of this many (swiglu_args::group)
  weight_spec(float** d, size_t c, std::function<void(float*)> f) : dst(d), mdst(nullptr), count(c), fill(std::move(f)) {}
  weight_spec(matrix* d, size_t c, std::function<void(float*)> f) : dst(nullptr), mdst(d), count(c), fill(std::move(f)) {}
  // The logical element for storage element e: the same as e, except in an interleaved gate/up
  // weight, where storage row k of a run of 2·g holds gate row run·g + k (k < g) or up row
  // dim + run·g + k − g. Every output keeps its weights, so the results do not change.
  size_t source(size_t e, size_t cols, int32_t dim) const {
    if (gate_up_group == 0) return e;
    const size_t g = size_t(gate_up_group), row = e / cols, run = row / (2 * g), k = row % (2 * g);
    return ((k < g ? 0 : size_t(dim) - g) + run * g + k) * cols + e % cols;
  }
};

// Every tensor in one fp32 allocation, except the matmul weights (`matrix` targets) when
// model.weight_dtype = bf16: those go, rounded to nearest even, into one bf16 allocation. The
// values are made in fp32 either way, so a bf16 model is the fp32 model's weights rounded (exact
// for a checkpoint stored in bf16).
void model::impl::upload_weights(std::vector<weight_spec>& specs) {
  const size_t dm = dims.d_model;
  const bool bf16 = options.weights == weight_dtype::bf16;
  const auto in_bf16 = [&](const weight_spec& s) { return bf16 && s.mdst != nullptr; };
  size_t total = 0, total16 = 0;
  std::vector<size_t> offsets;
  for (const weight_spec& s : specs) {
    size_t& t = in_bf16(s) ? total16 : total;
    offsets.push_back(t);
    t += align_up(s.count, in_bf16(s) ? 128 : 64); // 256-byte aligned tensors
  }
  std::vector<float> host(total, 0.0f);
  std::vector<uint16_t> host16(total16, 0);
  std::vector<float> logical;
  for (size_t i = 0; i < specs.size(); ++i) {
    logical.assign(specs[i].count, 0.0f);
    specs[i].fill(logical.data());
    for (size_t e = 0; e < specs[i].count; ++e) {
      const float v = logical[specs[i].source(e, dm, dims.mlp_dim)];
      if (in_bf16(specs[i]))
        host16[offsets[i] + e] = bf16_bits(v);
      else
        host[offsets[i] + e] = v;
    }
  }
  footprint.bytes = total * sizeof(float) + total16 * sizeof(uint16_t);
  footprint.embedding_bytes = size_t(dims.vocab) * dm * sizeof(float);
  float* dev_weights = alloc_floats(total);
  uint16_t* dev_weights16 = static_cast<uint16_t*>(alloc(total16 * sizeof(uint16_t)));
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].dst != nullptr)
      *specs[i].dst = dev_weights + offsets[i];
    else if (in_bf16(specs[i]))
      specs[i].mdst->bf16 = dev_weights16 + offsets[i];
    else
      specs[i].mdst->f32 = dev_weights + offsets[i];
  }
  dev.copy_async(stream_kind::load, dev_weights, host.data(), total * sizeof(float));
  if (total16 > 0) dev.copy_async(stream_kind::load, dev_weights16, host16.data(), total16 * sizeof(uint16_t));
  dev.synchronize();
}

// The presets' weights: value = f(uniform_pm1(hash(seed, tensor id, index))).
void model::impl::build_weights() {
  std::vector<weight_spec> specs;
  const model_dims& d = dims;
  const size_t dm = d.d_model;
  const uint64_t seed = options.seed;
  const auto seeded = [&](auto* dst, uint64_t id, size_t count, init_kind how, int32_t fan_in) {
    specs.emplace_back(dst, count, [seed, id, count, how, fan_in](float* out) {
      for (size_t e = 0; e < count; ++e) out[e] = weight_value(seed, id, e, how, fan_in);
    });
  };
  seeded(&embed, tensor_id(-1, t_embed), size_t(d.vocab) * dm, init_kind::embed, 1);
  seeded(&final_norm, tensor_id(-1, t_final_norm), dm, init_kind::norm, 1);
  seeded(&lm_head, tensor_id(-1, t_lm_head), size_t(d.vocab) * dm, init_kind::linear, d.d_model);
  layers.resize(d.layers.size());
  for (size_t li = 0; li < d.layers.size(); ++li) {
    layer_state& L = layers[li];
    const int32_t l = static_cast<int32_t>(li);
    L.kind = d.layers[li];
    seeded(&L.ln1, tensor_id(l, t_ln1), dm, init_kind::norm, 1);
    seeded(&L.ln2, tensor_id(l, t_ln2), dm, init_kind::norm, 1);
    seeded(&L.wgu, tensor_id(l, t_wgu), 2 * size_t(d.mlp_dim) * dm, init_kind::linear, d.d_model);
    specs.back().gate_up_group = mlp_group;
    seeded(&L.wdown, tensor_id(l, t_wdown), dm * d.mlp_dim, init_kind::linear, d.mlp_dim);
    if (L.kind == layer_kind::gdn) {
      seeded(&L.gdn_in, tensor_id(l, t_gdn_in), size_t(d.gdn_conv_channels()) * dm, init_kind::linear, d.d_model);
      seeded(&L.gdn_abg, tensor_id(l, t_gdn_abg), size_t(d.gdn_abg_dim()) * dm, init_kind::linear, d.d_model);
      seeded(&L.gdn_conv, tensor_id(l, t_gdn_conv), size_t(d.gdn_conv_channels()) * d.conv_width, init_kind::conv,
             d.conv_width);
      seeded(&L.gdn_a_bias, tensor_id(l, t_gdn_a_bias), size_t(d.gdn_heads), init_kind::a_bias, 1);
      seeded(&L.wo, tensor_id(l, t_gdn_out), dm * d.gdn_out_dim(), init_kind::linear, d.gdn_out_dim());
    } else {
      L.qkv_width = d.q_dim() + 2 * d.kv_dim() + (L.kind == layer_kind::sparse_attention ? 2 * d.index_dim : 0);
      seeded(&L.wqkv, tensor_id(l, t_wqkv), size_t(L.qkv_width) * dm, init_kind::linear, d.d_model);
      seeded(&L.wo, tensor_id(l, t_wo), dm * d.q_dim(), init_kind::linear, d.q_dim());
    }
    if (d.ple) {
      seeded(&L.ple_table, tensor_id(l, t_ple_table), size_t(d.ple_buckets) * d.ple_dim, init_kind::embed, 1);
      seeded(&L.ple_conv, tensor_id(l, t_ple_conv), size_t(d.ple_dim) * d.conv_width, init_kind::conv, d.conv_width);
      seeded(&L.ple_up, tensor_id(l, t_ple_up), dm * d.ple_dim, init_kind::linear, 4 * d.ple_dim);
    }
  }
  upload_weights(specs);
}

// A checkpoint's weights: its slots (runtime/models/qwen3_5.hpp), stacked where one matmul serves
// several: attention [q | k | v | gate] rows (k after q, so one rope rotates both), GDN
// [a | b | z] rows (gdn_args' abg row), MLP gate then up (interleaved by upload_weights).
void model::impl::build_checkpoint_weights() {
  const hf_checkpoint& ck = *options.checkpoint;
  std::vector<weight_spec> specs;
  const model_dims& d = dims;
  const auto slot = [&](const std::string& name) -> const std::vector<float>& {
    const auto it = ck.slots.find(name);
    if (it == ck.slots.end()) throw std::invalid_argument("model: the checkpoint has no slot " + name);
    return it->second.data;
  };
  // The slots' values one after another; the sizes must add up to `count`.
  const auto stacked = [&](auto* dst, size_t count, std::vector<std::string> names) {
    size_t sum = 0;
    for (const auto& n : names) sum += slot(n).size();
    if (sum != count)
      throw std::invalid_argument("model: checkpoint slots " + names.front() + "... hold " + std::to_string(sum) +
                                  " values, the " + to_string(d.family) + " forward needs " + std::to_string(count));
    std::vector<const std::vector<float>*> parts;
    for (const auto& n : names) parts.push_back(&slot(n));
    specs.emplace_back(dst, count, [parts](float* out) {
      for (const auto* p : parts) out = std::copy(p->begin(), p->end(), out);
    });
  };
  const size_t dm = d.d_model;
  stacked(&embed, size_t(d.vocab) * dm, {"embed"});
  stacked(&final_norm, dm, {"final_norm"});
  stacked(&lm_head, size_t(d.vocab) * dm, {"lm_head"});
  layers.resize(d.layers.size());
  for (size_t li = 0; li < d.layers.size(); ++li) {
    layer_state& L = layers[li];
    L.kind = d.layers[li];
    const std::string p = "layers." + std::to_string(li) + ".";
    stacked(&L.ln1, dm, {p + "ln1"});
    stacked(&L.ln2, dm, {p + "ln2"});
    stacked(&L.wgu, 2 * size_t(d.mlp_dim) * dm, {p + "mlp.w_gate", p + "mlp.w_up"});
    specs.back().gate_up_group = mlp_group;
    stacked(&L.wdown, dm * d.mlp_dim, {p + "mlp.w_down"});
    if (L.kind == layer_kind::gdn) {
      stacked(&L.gdn_in, size_t(d.gdn_conv_channels()) * dm, {p + "gdn.w_qkv"});
      stacked(&L.gdn_abg, size_t(d.gdn_abg_dim()) * dm, {p + "gdn.w_a", p + "gdn.w_b", p + "gdn.w_z"});
      stacked(&L.gdn_conv, size_t(d.gdn_conv_channels()) * d.conv_width, {p + "gdn.conv"});
      stacked(&L.gdn_a_bias, size_t(d.gdn_heads), {p + "gdn.dt_bias"});
      stacked(&L.gdn_neg_exp_a, size_t(d.gdn_heads), {p + "gdn.neg_exp_a"});
      stacked(&L.gdn_norm, size_t(d.gdn_dv), {p + "gdn.norm"});
      stacked(&L.wo, dm * d.gdn_out_dim(), {p + "gdn.w_out"});
    } else {
      L.qkv_width = 2 * d.q_dim() + 2 * d.kv_dim();
      stacked(&L.wqkv, size_t(L.qkv_width) * dm, {p + "attn.w_q", p + "attn.w_k", p + "attn.w_v", p + "attn.w_gate"});
      stacked(&L.wo, dm * d.q_dim(), {p + "attn.w_o"});
      stacked(&L.q_norm, size_t(d.head_dim), {p + "attn.q_norm"});
      stacked(&L.k_norm, size_t(d.head_dim), {p + "attn.k_norm"});
    }
  }
  upload_weights(specs);
}

void model::impl::build_rope() {
  // cos/sin computed once on the host in double and uploaded, so every device rotates identically.
  const int32_t rot = dims.rotary_dim > 0 ? dims.rotary_dim : dims.head_dim, half = rot / 2;
  std::vector<float> table(size_t(dims.max_context) * half * 2);
  for (int32_t p = 0; p < dims.max_context; ++p)
    for (int32_t i = 0; i < half; ++i) {
      const double inv_freq = std::pow(double(dims.rope_base), -2.0 * i / rot);
      const double angle = p * inv_freq;
      table[(size_t(p) * half + i) * 2] = static_cast<float>(std::cos(angle));
      table[(size_t(p) * half + i) * 2 + 1] = static_cast<float>(std::sin(angle));
    }
  rope_table = alloc_floats(table.size());
  dev.copy_async(stream_kind::load, rope_table, table.data(), table.size() * sizeof(float));
  dev.synchronize();
}

void model::impl::build_kv_arena() {
  const int32_t bs = options.block_size;
  const auto add = [&](int32_t layer, const char* name, elem_dtype dt, size_t row_elems, int32_t rows_per_block) {
    kv_field f;
    f.layer = layer;
    f.name = name;
    f.dtype = dt;
    f.row_bytes = row_elems * elem_bytes(dt);
    f.rows_per_block = rows_per_block;
    f.fill_byte = 0;
    f.region = alloc(f.block_bytes() * size_t(options.num_blocks));
    kv_fields.push_back(f);
    return f.region;
  };
  for (size_t li = 0; li < layers.size(); ++li) {
    layer_state& L = layers[li];
    if (L.kind == layer_kind::gdn) continue;
    const int32_t l = static_cast<int32_t>(li);
    L.k = add(l, "k", kv_elem, dims.kv_dim(), bs);
    L.v = add(l, "v", kv_elem, dims.kv_dim(), bs);
    if (kv_elem == elem_dtype::fp8_e4m3) {
      L.k_scale = static_cast<float*>(add(l, "k_scale", elem_dtype::fp32, dims.num_kv_heads, bs));
      L.v_scale = static_cast<float*>(add(l, "v_scale", elem_dtype::fp32, dims.num_kv_heads, bs));
    }
    if (L.kind == layer_kind::sparse_attention) {
      L.index_raw = static_cast<float*>(add(l, "index_raw", elem_dtype::fp32, dims.index_dim, bs));
      L.index_compressed =
          static_cast<float*>(add(l, "index_compressed", elem_dtype::fp32, dims.index_dim, bs / dims.index_group));
    }
  }
}

void model::impl::build_state() {
  if (!geometry.has_recurrent_state) return;
  size_t off = 0;
  const auto seg = [&](const char* name, int32_t layer, elem_dtype dt, size_t bytes) {
    state.segments.push_back({name, layer, dt, off, bytes});
    const size_t at = off;
    off = align_up(off + bytes, 16);
    return at;
  };
  const size_t w = dims.conv_width - 1;
  for (size_t li = 0; li < layers.size(); ++li) {
    layer_state& L = layers[li];
    if (L.kind != layer_kind::gdn) continue;
    const int32_t l = static_cast<int32_t>(li);
    L.gdn_conv_offset = seg("gdn_conv", l, elem_dtype::fp32, w * dims.gdn_conv_channels() * sizeof(float));
    L.gdn_ssm_offset =
        seg("gdn_ssm", l, elem_dtype::fp32, size_t(dims.gdn_heads) * dims.gdn_dv * dims.gdn_dk * sizeof(float));
  }
  if (dims.ple) {
    ple_window_offset = seg("ple_window", -1, elem_dtype::i32, size_t(dims.ple_n - 1) * sizeof(int32_t));
    for (size_t li = 0; li < layers.size(); ++li)
      layers[li].ple_conv_offset =
          seg("ple_conv", static_cast<int32_t>(li), elem_dtype::fp32, w * dims.ple_dim * sizeof(float));
  }
  state.image_bytes = state.segments.back().offset + state.segments.back().bytes;
  state.slot_bytes = align_up(state.image_bytes, 256);
  state.num_slots = options.max_state_slots;
  state.base = alloc(state.slot_bytes * size_t(state.num_slots));
}

void model::impl::build_workspace() {
  const size_t T = options.max_batch_tokens;
  const model_dims& d = dims;
  int32_t proj_w = 2 * d.mlp_dim, mix_w = std::max(d.mlp_dim, d.q_dim());
  for (const layer_state& L : layers) {
    proj_w = std::max(proj_w, L.kind == layer_kind::gdn ? d.gdn_conv_channels() : L.qkv_width);
    if (L.kind == layer_kind::gdn) mix_w = std::max(mix_w, d.gdn_out_dim());
  }
  ld_proj = proj_w;
  ld_mix = mix_w;
  h = alloc_floats(T * d.d_model);
  xn = alloc_floats(T * d.d_model);
  proj = alloc_floats(T * proj_w);
  mix = alloc_floats(T * mix_w);
  if (std::count(d.layers.begin(), d.layers.end(), layer_kind::gdn) > 0) {
    abg = alloc_floats(T * d.gdn_abg_dim());
    conv_out = alloc_floats(T * d.gdn_conv_channels());
  }
  if (d.ple) {
    ple_buckets = static_cast<int32_t*>(alloc(T * sizeof(int32_t)));
    ple_e = alloc_floats(T * d.ple_dim);
    ple_c = alloc_floats(T * d.ple_dim);
  }
  // Chunk-parallel attention of up to 16 full-context rows (more rows at shorter contexts), and
  // of a full batch of rows whose positions stay below 512 (a prompt's first step: its tiles run
  // chunk by chunk; later tiles fold in one block each). The CPU folds in place and needs none.
  if (!dev.runs_host_work() &&
      std::any_of(d.layers.begin(), d.layers.end(), [](layer_kind k) { return k != layer_kind::gdn; })) {
    const int64_t chunks = (d.max_context + attention_chunk - 1) / attention_chunk;
    const int64_t tile_records = static_cast<int64_t>(T) * (512 / attention_chunk);
    const int64_t records = std::max<int64_t>(16 * chunks, tile_records);
    attn_partials_floats = records * d.num_q_heads * (d.head_dim + 2);
    attn_partials = alloc_floats(static_cast<size_t>(attn_partials_floats));
    attn_partial_counts = static_cast<uint32_t*>(
        alloc(static_cast<size_t>(attn_partials_floats / (d.head_dim + 2)) * sizeof(uint32_t))); // zeroed
  }
  sample_h = alloc_floats(T * d.d_model);
  sample_xn = alloc_floats(T * d.d_model);
  outputs.logits = alloc_floats(T * d.vocab);
  outputs.sampled_tokens = static_cast<int32_t*>(alloc(T * sizeof(int32_t)));
}

void model::impl::enqueue_qwen_mixer(stream_kind s, const device_batch& b, const layer_state& L) {
  const model_dims& d = dims;
  kernel_table& kt = *kernels;
  const int32_t T = b.num_tokens, dm = d.d_model;
  uint8_t* state_base = static_cast<uint8_t*>(state.base);
  if (L.kind == layer_kind::gdn) {
    // q|k|v = silu(conv(W_qkv x)); [a | b | z] = W_abz x; o = GDN; y = RMSNorm_dv(o)·w·silu(z); h += W_out y
    const int32_t C = d.gdn_conv_channels(), G = d.gdn_abg_dim(), H = d.gdn_heads;
    kt.matmul(s, mm(xn, dm, L.gdn_in, proj, ld_proj, T, dm, C, false));
    kt.matmul(s, mm(xn, dm, L.gdn_abg, abg, G, T, dm, G, false));
    kt.causal_conv(s, {b, proj, ld_proj, conv_out, C, L.gdn_conv, state_base, state.slot_bytes, L.gdn_conv_offset,
                       state.num_slots, C, d.conv_width, true});
    gdn_args g{b, conv_out, C, abg, G, L.gdn_a_bias, mix, ld_mix, state_base, state.slot_bytes, L.gdn_ssm_offset,
               state.num_slots, H, d.gdn_dk, d.gdn_dv};
    g.key_heads = d.gdn_k_heads();
    g.neg_exp_a = L.gdn_neg_exp_a;
    kt.gdn(s, g);
    rmsnorm_args n{mix, ld_mix, L.gdn_norm, mix, ld_mix, T, d.gdn_dv, d.norm_eps};
    n.heads = H;
    n.gate = abg + 2 * H;
    n.ldg = G;
    kt.rmsnorm(s, n);
    kt.matmul(s, mm(mix, ld_mix, L.wo, h, dm, T, d.gdn_out_dim(), dm, true));
    return;
  }
  // [q | k | v | gate] = W x; q, k RMS-normed per head; partial RoPE on q and k; K, V stored;
  // attention; h += W_o (attn · sigmoid(gate))
  const int32_t qd = d.q_dim(), kvd = d.kv_dim();
  float* q = proj;
  float* k = proj + qd;
  float* v = proj + qd + kvd;
  const float* gate = proj + qd + 2 * kvd;
  kt.matmul(s, mm(xn, dm, L.wqkv, proj, ld_proj, T, dm, L.qkv_width, false));
  rmsnorm_args qn{q, ld_proj, L.q_norm, q, ld_proj, T, d.head_dim, d.norm_eps};
  qn.heads = d.num_q_heads;
  kt.rmsnorm(s, qn);
  rmsnorm_args kn{k, ld_proj, L.k_norm, k, ld_proj, T, d.head_dim, d.norm_eps};
  kn.heads = d.num_kv_heads;
  kt.rmsnorm(s, kn);
  kt.rope_kv_store(s, {{q, ld_proj, b.positions, rope_table, T, d.num_q_heads + d.num_kv_heads, d.head_dim,
                        d.max_context, d.rotary_dim},
                       {k, ld_proj, b.slot_mapping, L.k, L.k_scale, kv_elem, T, d.num_kv_heads, d.head_dim},
                       {v, ld_proj, b.slot_mapping, L.v, L.v_scale, kv_elem, T, d.num_kv_heads, d.head_dim}});
  kt.paged_attention(s, {b, q, ld_proj, L.k, L.v, L.k_scale, L.v_scale, kv_elem, mix, ld_mix, d.num_q_heads,
                         d.num_kv_heads, d.head_dim, options.block_size, attn_partials, attn_partials_floats,
                         attn_partial_counts});
  kt.output_gate(s, {mix, ld_mix, gate, ld_proj, T, qd});
  kt.matmul(s, mm(mix, ld_mix, L.wo, h, dm, T, qd, dm, true));
}

model::model(const model_options& options, device& dev) : impl_(std::make_unique<impl>(options, dev)) {
  impl& I = *impl_;
  if (options.kv == kv_dtype::fp8) I.kv_elem = elem_dtype::fp8_e4m3;
  else if (options.kv == kv_dtype::bf16) I.kv_elem = elem_dtype::bf16;
  I.dims = dims_of(options);
  I.mlp_group = I.dims.mlp_dim % 8 == 0 ? 8 : 0;
  I.geometry.vocab_size = I.dims.vocab;
  if (options.checkpoint) { // no BOS; the config's stop ids (runtime/models/hf_model.hpp)
    I.geometry.bos_id = options.checkpoint->dims.bos_token_id;
    I.geometry.eos_ids = options.checkpoint->dims.eos_token_ids;
  }
  I.geometry.layers = I.dims.layers;
  I.geometry.max_context =
      static_cast<int32_t>(std::min<int64_t>(I.dims.max_context, int64_t(options.num_blocks) * options.block_size));
  I.geometry.has_recurrent_state =
      I.dims.ple || std::count(I.dims.layers.begin(), I.dims.layers.end(), layer_kind::gdn) > 0;
  I.validate();
  I.kernels = make_kernel_table(dev, {options.matmul, options.weights});
  I.ple_hash_seed = cpu::hash3(options.seed, 0x706c65ULL, 0);
  if (options.checkpoint) {
    I.build_checkpoint_weights();
    I.options.checkpoint.reset(); // its fp32 slots are on the device now; dims keep the digest
  } else
    I.build_weights();
  I.build_rope();
  I.build_kv_arena();
  I.build_state();
  I.build_workspace();
}

model::~model() = default;

const model_options& model::options() const { return impl_->options; }
const model_geometry& model::geometry() const { return impl_->geometry; }
device_outputs model::outputs() const { return impl_->outputs; }
const model_dims& model::dims() const { return impl_->dims; }
weight_footprint model::weights() const { return impl_->footprint; }
const std::vector<kv_field>& model::kv_fields() const { return impl_->kv_fields; }
const state_layout& model::state_slots() const { return impl_->state; }

void model::enqueue_forward(stream_kind s, const device_batch& b) {
  impl& I = *impl_;
  const model_dims& d = I.dims;
  kernel_table& kt = *I.kernels;
  if (b.num_tokens <= 0) return;
  if (b.num_tokens > I.options.max_batch_tokens)
    throw std::invalid_argument("enqueue_forward: " + std::to_string(b.num_tokens) + " tokens exceed max_batch_tokens " +
                                std::to_string(I.options.max_batch_tokens));
  if (b.num_samples < 0 || b.num_samples > b.num_tokens)
    throw std::invalid_argument("enqueue_forward: num_samples " + std::to_string(b.num_samples) + " not in [0, " +
                                std::to_string(b.num_tokens) + "]");
  const int32_t T = b.num_tokens, dm = d.d_model;
  uint8_t* state_base = static_cast<uint8_t*>(I.state.base);
  const size_t slot_bytes = I.state.slot_bytes;
  const int32_t num_slots = I.state.num_slots;

  if (I.geometry.has_recurrent_state) kt.state_reset(s, {b, state_base, slot_bytes, num_slots});
  kt.embed(s, {b.token_ids, I.embed, I.h, T, dm, d.vocab});
  if (d.ple)
    kt.ple_ngram(s, {b, I.ple_buckets, state_base, slot_bytes, I.ple_window_offset, num_slots, d.ple_n, d.ple_buckets,
                     I.ple_hash_seed});

  for (const layer_state& L : I.layers) {
    if (d.ple) {
      kt.embed(s, {I.ple_buckets, L.ple_table, I.ple_e, T, d.ple_dim, d.ple_buckets});
      kt.causal_conv(s, {b, I.ple_e, d.ple_dim, I.ple_c, d.ple_dim, L.ple_conv, state_base, slot_bytes, L.ple_conv_offset,
                         num_slots, d.ple_dim, d.conv_width, false});
      kt.matmul(s, mm(I.ple_c, d.ple_dim, L.ple_up, I.h, dm, T, d.ple_dim, dm, true));
    }
    kt.rmsnorm(s, {I.h, dm, L.ln1, I.xn, dm, T, dm, d.norm_eps});
    if (d.family == model_family::qwen3_5) {
      I.enqueue_qwen_mixer(s, b, L);
    } else if (L.kind == layer_kind::gdn) {
      const int32_t C = d.gdn_conv_channels(), G = d.gdn_abg_dim();
      kt.matmul(s, mm(I.xn, dm, L.gdn_in, I.proj, I.ld_proj, T, dm, C, false));
      kt.matmul(s, mm(I.xn, dm, L.gdn_abg, I.abg, G, T, dm, G, false));
      kt.causal_conv(s, {b, I.proj, I.ld_proj, I.conv_out, C, L.gdn_conv, state_base, slot_bytes, L.gdn_conv_offset,
                         num_slots, C, d.conv_width, true});
      kt.gdn(s, {b, I.conv_out, C, I.abg, G, L.gdn_a_bias, I.mix, I.ld_mix, state_base, slot_bytes, L.gdn_ssm_offset,
                 num_slots, d.gdn_heads, d.gdn_dk, d.gdn_dv});
      kt.matmul(s, mm(I.mix, I.ld_mix, L.wo, I.h, dm, T, d.gdn_out_dim(), dm, true));
    } else {
      const int32_t qd = d.q_dim(), kvd = d.kv_dim();
      float* q = I.proj;
      float* k = I.proj + qd;
      float* v = I.proj + qd + kvd;
      kt.matmul(s, mm(I.xn, dm, L.wqkv, I.proj, I.ld_proj, T, dm, L.qkv_width, false));
      // K follows Q in each row, so one rope over the q and k heads rotates both; then K and V go
      // to their slots (one launch on a GPU).
      kt.rope_kv_store(
          s, {{q, I.ld_proj, b.positions, I.rope_table, T, d.num_q_heads + d.num_kv_heads, d.head_dim, d.max_context,
               d.rotary_dim},
              {k, I.ld_proj, b.slot_mapping, L.k, L.k_scale, I.kv_elem, T, d.num_kv_heads, d.head_dim},
              {v, I.ld_proj, b.slot_mapping, L.v, L.v_scale, I.kv_elem, T, d.num_kv_heads, d.head_dim}});
      paged_attention_args at{b, q, I.ld_proj, L.k, L.v, L.k_scale, L.v_scale, I.kv_elem, I.mix, I.ld_mix,
                              d.num_q_heads, d.num_kv_heads, d.head_dim, I.options.block_size,
                              I.attn_partials, I.attn_partials_floats, I.attn_partial_counts};
      if (L.kind == layer_kind::attention) {
        kt.paged_attention(s, at);
      } else {
        float* index_q = I.proj + qd + 2 * kvd;
        float* index_k = index_q + d.index_dim;
        kt.kv_store(s, {index_k, I.ld_proj, b.slot_mapping, L.index_raw, nullptr, elem_dtype::fp32, T, 1, d.index_dim});
        kt.index_compress(s, {b, L.index_raw, L.index_compressed, d.index_dim, I.options.block_size, d.index_group});
        kt.sparse_attention(s, {at, index_q, I.ld_proj, L.index_compressed, d.index_dim, d.sparse_window,
                                d.sparse_top_k, d.index_group});
      }
      kt.matmul(s, mm(I.mix, I.ld_mix, L.wo, I.h, dm, T, qd, dm, true));
    }
    kt.rmsnorm(s, {I.h, dm, L.ln2, I.xn, dm, T, dm, d.norm_eps});
    kt.matmul_swiglu(s, mm(I.xn, dm, L.wgu, I.proj, 2 * d.mlp_dim, T, dm, 2 * d.mlp_dim, false),
                     {I.proj, I.mix, T, d.mlp_dim, I.mlp_group});
    kt.matmul(s, mm(I.mix, d.mlp_dim, L.wdown, I.h, dm, T, d.mlp_dim, dm, true));
  }

  if (b.num_samples == 0) return;
  const int32_t ns = b.num_samples;
  kt.gather_rows(s, {I.h, dm, b.sample_rows, I.sample_h, ns, dm});
  kt.rmsnorm(s, {I.sample_h, dm, I.final_norm, I.sample_xn, dm, ns, dm, d.norm_eps});
  kt.matmul(s, mm(I.sample_xn, dm, I.lm_head, I.outputs.logits, d.vocab, ns, dm, d.vocab, false));
  kt.sample(s, {b, I.outputs.logits, I.outputs.sampled_tokens, d.vocab});
}

} // namespace ordo
