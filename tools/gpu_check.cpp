// gpu_check: every HIP kernel against its CPU reference (kernels/cpu) on fresh random inputs (one
// case per op: kernel_cases, kv_cases), then the tiny model's forward on both devices (cold,
// chunked, prefix hit, batched, decode): prints a table and exits 1 unless every result is bitwise
// equal. device.matmul = "tf32" and model.weight_dtype = "bf16" are checked against a tolerance
// instead, and for batch invariance (bitwise) at the kernel and model level.
// Built only with -DORDO_GPU=hip-*.
// Usage: gpu_check [--seed N] [--skip-model]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <xxhash.h>

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/conv.hpp"
#include "kernels/cpu/dtype.hpp"
#include "kernels/cpu/embedding.hpp"
#include "kernels/cpu/gate.hpp"
#include "kernels/cpu/gdn.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/mlp.hpp"
#include "kernels/cpu/norm.hpp"
#include "kernels/cpu/ple.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cpu/sampling.hpp"
#include "kernels/cpu/sparse_attention.hpp"
#include "kernels/cpu/state.hpp"
#include "kernels/cpu/unit_copy.hpp"
#include "kernels/object_checksum.hpp"
#include "kernels/kernel_table.hpp"
#include "runtime/device_registry.hpp"
#include "runtime/model.hpp"
#include "runtime/models/hf_model.hpp"
#include "tools/batch_builder.hpp"

using namespace ordo;

namespace {

int failures = 0;

// Host buffers the CPU reference works on, each with a device twin holding the same initial bytes.
class mirror {
public:
  explicit mirror(device& gpu) : gpu_(gpu) {}
  ~mirror() {
    for (void* d : devs_) gpu_.free_device(d);
  }
  template <class T> struct pair {
    T* h;
    T* d;
    size_t n;
  };
  template <class T> pair<T> of(const std::vector<T>& init) {
    const size_t bytes = std::max<size_t>(init.size() * sizeof(T), 16);
    hosts_.push_back(std::make_unique<std::vector<unsigned char>>(bytes, 0));
    std::memcpy(hosts_.back()->data(), init.data(), init.size() * sizeof(T));
    void* d = gpu_.alloc_device(bytes);
    devs_.push_back(d);
    gpu_.copy_async(stream_kind::load, d, hosts_.back()->data(), bytes);
    gpu_.synchronize();
    return {reinterpret_cast<T*>(hosts_.back()->data()), static_cast<T*>(d), init.size()};
  }
  template <class T> std::vector<T> download(const pair<T>& p) {
    std::vector<T> out(p.n);
    gpu_.copy_async(stream_kind::compute, out.data(), p.d, p.n * sizeof(T));
    gpu_.synchronize();
    return out;
  }

private:
  device& gpu_;
  std::vector<std::unique_ptr<std::vector<unsigned char>>> hosts_;
  std::vector<void*> devs_;
};

// One row of the table: the worst buffer of a check. Floats: max |gpu − cpu| / max |cpu|;
// integers and bytes: the fraction of elements that differ.
struct verdict {
  double err = 0;
  bool bitwise = true;
  template <class T> void add(mirror& m, const mirror::pair<T>& p) {
    const std::vector<T> g = m.download(p);
    if (std::memcmp(g.data(), p.h, p.n * sizeof(T)) != 0) bitwise = false;
    if constexpr (std::is_same_v<T, float>) {
      double scale = 0, worst = 0;
      for (size_t i = 0; i < p.n; ++i) scale = std::max(scale, std::fabs(double(p.h[i])));
      for (size_t i = 0; i < p.n; ++i) {
        const double d = std::fabs(double(g[i]) - double(p.h[i]));
        worst = std::max(worst, std::isnan(d) ? INFINITY : d);
      }
      err = std::max(err, scale > 0 ? worst / scale : worst);
    } else {
      size_t diff = 0;
      for (size_t i = 0; i < p.n; ++i) diff += std::memcmp(&g[i], &p.h[i], sizeof(T)) != 0;
      err = std::max(err, p.n ? double(diff) / double(p.n) : 0.0);
    }
  }
};

void report(const std::string& name, const verdict& v) {
  std::printf("| %-40s | %11.3e | %-7s |\n", name.c_str(), v.err, v.bitwise ? "yes" : "NO");
  if (!v.bitwise) ++failures;
}

// A kernel that is not meant to be exact: within `tol` of the CPU, or a failure.
void report_within(const std::string& name, const verdict& v, double tol) {
  const bool ok = v.err <= tol && !std::isnan(v.err);
  char bound[32];
  std::snprintf(bound, sizeof bound, "%s%.0e", ok ? "<=" : "> ", tol);
  std::printf("| %-40s | %11.3e | %-7s |\n", name.c_str(), v.err, bound);
  if (!ok) ++failures;
}

struct rng {
  std::mt19937_64 gen;
  explicit rng(uint64_t seed) : gen(seed) {}
  std::vector<float> floats(size_t n, float lo = -1, float hi = 1) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = d(gen);
    return v;
  }
  std::vector<int32_t> ints(size_t n, int32_t lo, int32_t hi) {
    std::uniform_int_distribution<int32_t> d(lo, hi);
    std::vector<int32_t> v(n);
    for (int32_t& x : v) x = d(gen);
    return v;
  }
  int32_t below(int32_t n) { return std::uniform_int_distribution<int32_t>(0, n - 1)(gen); }
};

struct req_spec {
  int32_t num_tokens, first_position;
  bool reset = false;
  float temperature = 0;
};

// A batch of requests with disjoint random block tables and state slots, mirrored host/device.
struct batch_pair {
  device_batch h, d;
  int32_t num_blocks = 0, num_slots = 0;
};

batch_pair make_batch(mirror& m, rng& r, const std::vector<req_spec>& reqs, int32_t block_size) {
  std::vector<int32_t> token_ids, positions, token_req, slot_mapping, req_token_start{0}, first_pos,
      req_bt_start{0}, block_tables, state_slot, reset, sample_rows;
  std::vector<float> temps;
  std::vector<uint64_t> seeds;
  int32_t total_blocks = 0;
  for (const req_spec& q : reqs) total_blocks += (q.first_position + q.num_tokens + block_size - 1) / block_size;
  std::vector<int32_t> perm(total_blocks + 7);
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int32_t>(i);
  std::shuffle(perm.begin(), perm.end(), r.gen);
  int32_t next_block = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const req_spec& q = reqs[i];
    const int32_t nb = (q.first_position + q.num_tokens + block_size - 1) / block_size;
    std::vector<int32_t> blocks(perm.begin() + next_block, perm.begin() + next_block + nb);
    next_block += nb;
    for (int32_t t = 0; t < q.num_tokens; ++t) {
      const int32_t p = q.first_position + t;
      token_ids.push_back(r.below(258));
      positions.push_back(p);
      token_req.push_back(static_cast<int32_t>(i));
      slot_mapping.push_back(blocks[p / block_size] * block_size + p % block_size);
    }
    req_token_start.push_back(static_cast<int32_t>(token_ids.size()));
    first_pos.push_back(q.first_position);
    block_tables.insert(block_tables.end(), blocks.begin(), blocks.end());
    req_bt_start.push_back(static_cast<int32_t>(block_tables.size()));
    state_slot.push_back(static_cast<int32_t>(reqs.size() - 1 - i)); // not the request index
    reset.push_back(q.reset ? 1 : 0);
    sample_rows.push_back(static_cast<int32_t>(token_ids.size()) - 1);
    temps.push_back(q.temperature);
    seeds.push_back(0x1234567ULL * (i + 1));
  }
  batch_pair b;
  b.num_blocks = static_cast<int32_t>(perm.size());
  b.num_slots = static_cast<int32_t>(reqs.size());
  device_batch* both[2] = {&b.h, &b.d};
  const auto put = [&](auto& vec, auto field) {
    auto p = m.of(vec);
    b.h.*field = p.h;
    b.d.*field = p.d;
  };
  put(token_ids, &device_batch::token_ids);
  put(positions, &device_batch::positions);
  put(token_req, &device_batch::token_req);
  put(slot_mapping, &device_batch::slot_mapping);
  put(req_token_start, &device_batch::req_token_start);
  put(first_pos, &device_batch::req_first_position);
  put(req_bt_start, &device_batch::req_block_table_start);
  put(block_tables, &device_batch::block_tables);
  put(state_slot, &device_batch::req_state_slot);
  put(reset, &device_batch::req_reset_state);
  put(sample_rows, &device_batch::sample_rows);
  put(temps, &device_batch::sample_temperature);
  put(seeds, &device_batch::sample_seed);
  for (device_batch* x : both) {
    x->num_tokens = static_cast<int32_t>(token_ids.size());
    x->num_reqs = static_cast<int32_t>(reqs.size());
    x->num_samples = static_cast<int32_t>(sample_rows.size());
    x->block_table_len = static_cast<int32_t>(block_tables.size());
    x->max_position = *std::max_element(positions.begin(), positions.end());
  }
  return b;
}

// Random stored KV elements of `dtype` (fp8: no NaN codes) and positive per-(slot, head) scales.
std::vector<uint8_t> random_kv_bytes(rng& r, elem_dtype dt, size_t elems) {
  std::vector<uint8_t> bytes(elems * elem_bytes(dt));
  const std::vector<float> v = r.floats(elems, -2, 2);
  for (size_t i = 0; i < elems; ++i) {
    if (dt == elem_dtype::fp32) std::memcpy(&bytes[i * 4], &v[i], 4);
    else if (dt == elem_dtype::bf16) {
      const uint16_t b = cpu::float_to_bf16(v[i]);
      std::memcpy(&bytes[i * 2], &b, 2);
    } else {
      bytes[i] = cpu::float_to_fp8_e4m3(v[i] * 200.0f);
    }
  }
  return bytes;
}

struct shape {
  const char* tag;
  int32_t dim, heads, kv_heads, head_dim, gdn_dk, gdn_dv;
};

// A page-unit arena of one region per field (block bytes `bb`, `blocks` blocks each) of random
// bytes, and a zeroed twin to scatter back into, mirrored; rsrc / rdst: the device tables of
// region pointers a unit_copy launch reads.
struct arena_pair {
  std::vector<mirror::pair<uint8_t>> src, dst;
  std::vector<uint8_t*> src_h, src_d, dst_h, dst_d;
  uint64_t unit_bytes = 0;
  mirror::pair<uint8_t*> rsrc, rdst;
};

arena_pair random_arena(mirror& m, rng& r, const std::vector<uint64_t>& bb, int32_t blocks) {
  arena_pair a;
  for (uint64_t b : bb) {
    a.unit_bytes += b;
    std::vector<uint8_t> bytes(b * blocks);
    for (auto& x : bytes) x = static_cast<uint8_t>(r.below(256));
    a.src.push_back(m.of(bytes));
    a.dst.push_back(m.of(std::vector<uint8_t>(b * blocks, 0)));
    a.src_h.push_back(a.src.back().h), a.src_d.push_back(a.src.back().d);
    a.dst_h.push_back(a.dst.back().h), a.dst_d.push_back(a.dst.back().d);
  }
  a.rsrc = m.of(a.src_d), a.rdst = m.of(a.dst_d);
  return a;
}

// The kernel cases of one shape, in the style of ggml's test-backend-ops: one member per op (or
// per ops whose outputs feed each other), each running the CPU reference and the kernel on the
// same random inputs and reporting one row per variant (kernel_cases below lists them in order).
// Every case draws from one random stream and allocates from one mirror, in table order, so a
// seed fixes every input.
struct kernel_checks {
  kernel_checks(device& gpu, kernel_table& kt, const shape& sh, uint64_t seed)
      : gpu(gpu), kt(kt), sh(sh), seed(seed), m(gpu), r(seed), tag(std::string(" [") + sh.tag + "]") {}

  void check_matmul();
  void check_rmsnorm();
  void check_embed();
  void check_rope();
  void check_swiglu();
  void check_matmul_swiglu();
  void check_kv_dtypes(); // the kv_cases below, over one fixture per KV dtype
  void check_state_reset();
  void check_causal_conv();
  void check_gdn();
  void check_gdn_qwen();
  void check_head_ops();
  void check_ple_ngram();
  void check_gather_rows();
  void check_sample();
  void check_unit_copy();
  void check_unit_copy_batch();

  // kv_store then attention over a mixed batch (a prefill, a decode, a chunk in the middle): the
  // arena and queries of one KV dtype, which kv_store writes and the attention cases read.
  struct kv_fixture {
    elem_dtype dt;
    bool fp8;
    int32_t nq, nkv, hd;
    batch_pair b;
    size_t slots, row;
    mirror::pair<uint8_t> k, v;
    mirror::pair<float> ks, vs;
    int32_t T, ldqkv;
    mirror::pair<int32_t> sm; // the batch's slot mapping with one skipped row
    mirror::pair<float> src;  // q, k and v rows
  };
  kv_fixture make_kv_fixture(elem_dtype dt);
  void check_kv_store(kv_fixture& f);
  void check_rope_kv_store(kv_fixture& f);
  void check_paged_attention(kv_fixture& f);
  void check_paged_attention_split(kv_fixture& f);
  void check_paged_attention_tiles(kv_fixture& f);
  void check_paged_attention_tiles_split(kv_fixture& f);
  void check_paged_attention_tiles_unaligned(kv_fixture& f);
  void check_sparse_attention(kv_fixture& f);

  // A random arena (with fp8 scales) and queries for `reqs`: the CPU's and the GPU's args.
  struct attention_case {
    batch_pair b;
    mirror::pair<float> q, out;
    paged_attention_args h, d;
  };
  attention_case make_case(const kv_fixture& f, const std::vector<req_spec>& reqs, int32_t chd = 0, int32_t ldq = 0);
  void check_split(const kv_fixture& f, attention_case& c, int64_t chunks, const std::string& name);

  // The CPU reference, then the kernel, then the GPU waited for.
  template <class Cpu, class Gpu> void run(Cpu cpu_fn, Gpu gpu_fn) {
    cpu_fn();
    gpu_fn();
    gpu.synchronize();
  }

  device& gpu;
  kernel_table& kt;
  const shape& sh;
  const uint64_t seed;
  mirror m;
  rng r;
  const std::string tag;
  const stream_kind cs = stream_kind::compute;
  static constexpr int32_t bs = 16; // the block size of every batch
};

struct kernel_case {
  const char* op; // the kernel_table entries it checks
  void (kernel_checks::*check)();
};

const kernel_case kernel_cases[] = {
    {"matmul", &kernel_checks::check_matmul},
    {"rmsnorm", &kernel_checks::check_rmsnorm},
    {"embed", &kernel_checks::check_embed},
    {"rope", &kernel_checks::check_rope},
    {"swiglu", &kernel_checks::check_swiglu},
    {"matmul_swiglu", &kernel_checks::check_matmul_swiglu},
    {"kv_store, rope_kv_store, paged_attention, index_compress, sparse_attention", &kernel_checks::check_kv_dtypes},
    {"state_reset", &kernel_checks::check_state_reset},
    {"causal_conv", &kernel_checks::check_causal_conv},
    {"gdn", &kernel_checks::check_gdn},
    {"gdn (Qwen3.5 key heads and decay), rmsnorm gated", &kernel_checks::check_gdn_qwen},
    {"rmsnorm per head, rope partial, output_gate", &kernel_checks::check_head_ops},
    {"ple_ngram", &kernel_checks::check_ple_ngram},
    {"gather_rows", &kernel_checks::check_gather_rows},
    {"sample", &kernel_checks::check_sample},
    {"unit_copy", &kernel_checks::check_unit_copy},
    {"unit_copy_batch", &kernel_checks::check_unit_copy_batch},
};

// Per KV dtype, in this order over one fixture: kv_store writes the arena the attention cases read.
struct kv_case {
  const char* op;
  void (kernel_checks::*check)(kernel_checks::kv_fixture&);
};

const kv_case kv_cases[] = {
    {"kv_store", &kernel_checks::check_kv_store},
    {"rope_kv_store", &kernel_checks::check_rope_kv_store},
    {"paged_attention", &kernel_checks::check_paged_attention},
    {"paged_attention split", &kernel_checks::check_paged_attention_split},
    {"paged_attention tiles", &kernel_checks::check_paged_attention_tiles},
    {"paged_attention tiles split", &kernel_checks::check_paged_attention_tiles_split},
    {"paged_attention tiles unaligned", &kernel_checks::check_paged_attention_tiles_unaligned},
    {"index_compress, sparse_attention", &kernel_checks::check_sparse_attention},
};

void check_kernels(device& gpu, kernel_table& kt, const shape& sh, uint64_t seed) {
  kernel_checks checks(gpu, kt, sh, seed);
  for (const kernel_case& c : kernel_cases)
    (checks.*c.check)();
}

void kernel_checks::check_matmul() {
  // matmul: odd sizes exercise the dot's tail, partial row tiles (prefill tiles of 16 rows, decode
  // tiles of 8, 4 and 1 rows) and partial output blocks. Rows of a multiple of 4 floats take the
  // prefill lane tiles (32 rows × 64 outputs, k slices of 32; 64 × 64 of 16 outputs per cell
  // from 256 blocks on, as 200 rows × 4100 outputs): `in` = dim + 12 leaves a partial slice and
  // a tail of 4.
  for (const std::pair<int32_t, bool>& ra : {std::pair<int32_t, bool>{130, false}, {37, false}, {6, false},
                                              {1, false}, {130, true}, {77, true}, {200, true}})
  for (bool acc : {false, true}) {
    const int32_t rows = ra.first;
    const int32_t in = ra.second ? sh.dim + 12 : sh.dim + 3, out = rows == 200 ? 4100 : 301;
    const int32_t ldx = ra.second ? in + 8 : in + 5, ldy = out + 2;
    auto x = m.of(r.floats(size_t(rows) * ldx));
    auto w = m.of(r.floats(size_t(out) * in));
    auto y = m.of(r.floats(size_t(rows) * ldy));
    matmul_args h{x.h, ldx, w.h, y.h, ldy, rows, in, out, acc}, d{x.d, ldx, w.d, y.d, ldy, rows, in, out, acc};
    run([&] { cpu::matmul(h); }, [&] { kt.matmul(cs, d); });
    verdict v;
    v.add(m, y);
    report(std::string("matmul") + (acc ? " accumulate" : "") + " rows " + std::to_string(rows) +
               (ra.second ? " quads" : "") + tag, v);
  }
}

void kernel_checks::check_rmsnorm() {
  // A row of the model's width (b1: the register path's largest) and an odd one (b1: past it).
  for (const std::pair<int32_t, int32_t>& rd : {std::pair<int32_t, int32_t>{1, sh.dim}, {33, sh.dim + 5}}) {
    const int32_t rows = rd.first, dim = rd.second;
    auto x = m.of(r.floats(size_t(rows) * dim, -3, 3));
    auto w = m.of(r.floats(dim));
    auto y = m.of(std::vector<float>(size_t(rows) * dim));
    run([&] { cpu::rmsnorm({x.h, dim, w.h, y.h, dim, rows, dim, 1e-6f}); },
        [&] { kt.rmsnorm(cs, {x.d, dim, w.d, y.d, dim, rows, dim, 1e-6f}); });
    verdict v;
    v.add(m, y);
    report("rmsnorm rows " + std::to_string(rows) + " dim " + std::to_string(dim) + tag, v);
  }
}

void kernel_checks::check_embed() {
  const int32_t rows = 50, dim = sh.dim, table_rows = 300;
  auto ids = m.of(r.ints(rows, 0, table_rows - 1));
  auto table = m.of(r.floats(size_t(table_rows) * dim));
  auto out = m.of(std::vector<float>(size_t(rows) * dim));
  run([&] { cpu::embed({ids.h, table.h, out.h, rows, dim, table_rows}); },
      [&] { kt.embed(cs, {ids.d, table.d, out.d, rows, dim, table_rows}); });
  verdict v;
  v.add(m, out);
  report("embed" + tag, v);
}

void kernel_checks::check_rope() {
  const int32_t rows = 20, heads = sh.heads, hd = sh.head_dim, maxp = 256, ld = heads * hd + 8;
  std::vector<float> cs_table(size_t(maxp) * hd);
  for (int32_t p = 0; p < maxp; ++p)
    for (int32_t i = 0; i < hd / 2; ++i) {
      cs_table[(size_t(p) * hd / 2 + i) * 2] = float(std::cos(p * std::pow(10000.0, -2.0 * i / hd)));
      cs_table[(size_t(p) * hd / 2 + i) * 2 + 1] = float(std::sin(p * std::pow(10000.0, -2.0 * i / hd)));
    }
  auto x = m.of(r.floats(size_t(rows) * ld));
  auto pos = m.of(r.ints(rows, 0, maxp - 1));
  auto tab = m.of(cs_table);
  run([&] { cpu::rope({x.h, ld, pos.h, tab.h, rows, heads, hd, maxp}); },
      [&] { kt.rope(cs, {x.d, ld, pos.d, tab.d, rows, heads, hd, maxp}); });
  verdict v;
  v.add(m, x);
  report("rope" + tag, v);
}

void kernel_checks::check_swiglu() {
  for (int32_t group : {0, 8}) { // halves, and the model's runs of 8 gates and 8 ups
    const int32_t rows = 20, dim = group ? 8 * (sh.dim / 8 + 1) : sh.dim + 1;
    auto gu = m.of(r.floats(size_t(rows) * 2 * dim, -12, 12));
    auto out = m.of(std::vector<float>(size_t(rows) * dim));
    run([&] { cpu::swiglu({gu.h, out.h, rows, dim, group}); },
        [&] { kt.swiglu(cs, {gu.d, out.d, rows, dim, group}); });
    verdict v;
    v.add(m, out);
    report("swiglu" + std::string(group ? " runs of 8" : "") + tag, v);
  }
}

void kernel_checks::check_matmul_swiglu() {
  // The gate/up matmul with swiglu: 200 rows × 4096 outputs take the 64 × 64 lane tiles, which
  // apply swiglu in their epilogue (in = dim + 12: a partial k slice and a tail of 4); 130 rows
  // (2 × 64 row blocks: too few) and 6 rows run the matmul, then swiglu.
  for (int32_t rows : {200, 130, 6}) {
    const int32_t dim = 2048, in = sh.dim + 12;
    auto x = m.of(r.floats(size_t(rows) * in));
    auto w = m.of(r.floats(size_t(2) * dim * in));
    auto gu = m.of(std::vector<float>(size_t(rows) * 2 * dim));
    auto out = m.of(r.floats(size_t(rows) * dim));
    run([&] {
          cpu::matmul({x.h, in, w.h, gu.h, 2 * dim, rows, in, 2 * dim, false});
          cpu::swiglu({gu.h, out.h, rows, dim, 8});
        },
        [&] {
          kt.matmul_swiglu(cs, {x.d, in, w.d, gu.d, 2 * dim, rows, in, 2 * dim, false}, {gu.d, out.d, rows, dim, 8});
        });
    verdict v;
    v.add(m, out);
    report("matmul + swiglu rows " + std::to_string(rows) + tag, v);
  }
}

void kernel_checks::check_kv_dtypes() {
  for (elem_dtype dt : {elem_dtype::fp32, elem_dtype::bf16, elem_dtype::fp8_e4m3}) {
    kv_fixture f = make_kv_fixture(dt);
    for (const kv_case& c : kv_cases)
      (this->*c.check)(f);
  }
}

kernel_checks::kv_fixture kernel_checks::make_kv_fixture(elem_dtype dt) {
  kv_fixture f;
  f.dt = dt;
  f.fp8 = dt == elem_dtype::fp8_e4m3;
  f.nq = sh.heads, f.nkv = sh.kv_heads, f.hd = sh.head_dim;
  const int32_t nq = f.nq, nkv = f.nkv, hd = f.hd;
  f.b = make_batch(m, r, {{21, 0}, {1, 90}, {9, 33}}, bs);
  f.slots = size_t(f.b.num_blocks) * bs, f.row = size_t(nkv) * hd;
  f.k = m.of(random_kv_bytes(r, dt, f.slots * f.row));
  f.v = m.of(random_kv_bytes(r, dt, f.slots * f.row));
  f.ks = m.of(r.floats(f.fp8 ? f.slots * nkv : 1, 0.001f, 0.02f));
  f.vs = m.of(r.floats(f.fp8 ? f.slots * nkv : 1, 0.001f, 0.02f));
  f.T = f.b.h.num_tokens, f.ldqkv = (nq + 2 * nkv) * hd + 4;
  std::vector<int32_t> smap(f.T);
  gpu.copy_async(cs, smap.data(), f.b.d.slot_mapping, f.T * 4);
  gpu.synchronize();
  smap[f.T / 2] = -1; // a skipped row
  f.sm = m.of(smap);
  f.src = m.of(r.floats(size_t(f.T) * f.ldqkv, -3, 3));
  return f;
}

void kernel_checks::check_kv_store(kv_fixture& f) {
  const elem_dtype dt = f.dt;
  const bool fp8 = f.fp8;
  const int32_t nq = f.nq, nkv = f.nkv, hd = f.hd;
  batch_pair& b = f.b;
  auto &k = f.k, &v = f.v;
  auto &ks = f.ks, &vs = f.vs;
  const int32_t T = f.T, ldqkv = f.ldqkv;
  auto& sm = f.sm;
  auto& src = f.src;
  run([&] {
        cpu::kv_store({src.h + nq * hd, ldqkv, sm.h, k.h, fp8 ? ks.h : nullptr, dt, T, nkv, hd});
        cpu::kv_store({src.h + nq * hd + nkv * hd, ldqkv, b.h.slot_mapping, v.h, fp8 ? vs.h : nullptr, dt, T, nkv, hd});
      },
      [&] {
        kt.kv_store(cs, {src.d + nq * hd, ldqkv, sm.d, k.d, fp8 ? ks.d : nullptr, dt, T, nkv, hd});
        kt.kv_store(cs, {src.d + nq * hd + nkv * hd, ldqkv, b.d.slot_mapping, v.d, fp8 ? vs.d : nullptr, dt, T, nkv, hd});
      });
  verdict vk;
  vk.add(m, k);
  vk.add(m, v);
  if (fp8) {
    vk.add(m, ks);
    vk.add(m, vs);
  }
  report(std::string("kv_store ") + to_string(dt) + tag, vk);
}

void kernel_checks::check_rope_kv_store(kv_fixture& f) {
  const elem_dtype dt = f.dt;
  const bool fp8 = f.fp8;
  const int32_t nq = f.nq, nkv = f.nkv, hd = f.hd;
  batch_pair& b = f.b;
  const size_t slots = f.slots, row = f.row;
  const int32_t T = f.T, ldqkv = f.ldqkv;
  auto& sm = f.sm;
  // rope over the q and k heads, then K and V into their slots, as one launch against the three ops.
  const int32_t maxp = 256;
  std::vector<float> cs_table(size_t(maxp) * hd);
  for (int32_t p = 0; p < maxp; ++p)
    for (int32_t i = 0; i < hd / 2; ++i) {
      cs_table[(size_t(p) * hd / 2 + i) * 2] = float(std::cos(p * std::pow(10000.0, -2.0 * i / hd)));
      cs_table[(size_t(p) * hd / 2 + i) * 2 + 1] = float(std::sin(p * std::pow(10000.0, -2.0 * i / hd)));
    }
  auto tab = m.of(cs_table);
  auto qkv = m.of(r.floats(size_t(T) * ldqkv, -3, 3));
  auto fk = m.of(random_kv_bytes(r, dt, slots * row));
  auto fv = m.of(random_kv_bytes(r, dt, slots * row));
  auto fks = m.of(r.floats(fp8 ? slots * nkv : 1, 0.001f, 0.02f));
  auto fvs = m.of(r.floats(fp8 ? slots * nkv : 1, 0.001f, 0.02f));
  const auto args = [&](auto& x, auto& kr, auto& vr, auto& ksr, auto& vsr, const device_batch& bb, int32_t* smap_p) {
    return rope_kv_store_args{{x, ldqkv, bb.positions, nullptr, T, nq + nkv, hd, maxp},
                              {x + nq * hd, ldqkv, smap_p, kr, fp8 ? ksr : nullptr, dt, T, nkv, hd},
                              {x + nq * hd + nkv * hd, ldqkv, bb.slot_mapping, vr, fp8 ? vsr : nullptr, dt, T, nkv, hd}};
  };
  auto ha = args(qkv.h, fk.h, fv.h, fks.h, fvs.h, b.h, sm.h);
  ha.rope.cos_sin = tab.h;
  auto da = args(qkv.d, fk.d, fv.d, fks.d, fvs.d, b.d, sm.d);
  da.rope.cos_sin = tab.d;
  run([&] {
        cpu::rope(ha.rope);
        cpu::kv_store(ha.k);
        cpu::kv_store(ha.v);
      },
      [&] { kt.rope_kv_store(cs, da); });
  verdict vf;
  vf.add(m, qkv);
  vf.add(m, fk);
  vf.add(m, fv);
  if (fp8) {
    vf.add(m, fks);
    vf.add(m, fvs);
  }
  report(std::string("rope_kv_store ") + to_string(dt) + tag, vf);
}

void kernel_checks::check_paged_attention(kv_fixture& f) {
  const elem_dtype dt = f.dt;
  const bool fp8 = f.fp8;
  const int32_t nq = f.nq, nkv = f.nkv, hd = f.hd;
  batch_pair& b = f.b;
  auto &k = f.k, &v = f.v;
  auto &ks = f.ks, &vs = f.vs;
  const int32_t T = f.T, ldqkv = f.ldqkv;
  auto& src = f.src;
  auto out = m.of(std::vector<float>(size_t(T) * nq * hd));
  paged_attention_args h{b.h, src.h, ldqkv, k.h, v.h, fp8 ? ks.h : nullptr, fp8 ? vs.h : nullptr, dt, out.h, nq * hd,
                         nq, nkv, hd, bs};
  paged_attention_args d{b.d, src.d, ldqkv, k.d, v.d, fp8 ? ks.d : nullptr, fp8 ? vs.d : nullptr, dt, out.d, nq * hd,
                         nq, nkv, hd, bs};
  run([&] { cpu::paged_attention(h); }, [&] { kt.paged_attention(cs, d); });
  verdict va;
  va.add(m, out);
  report(std::string("paged_attention ") + to_string(dt) + tag, va);
}

// (The queries' row stride ldq and the head_dim default to the shape's: nq·hd and hd.)
kernel_checks::attention_case kernel_checks::make_case(const kv_fixture& f, const std::vector<req_spec>& reqs,
                                                     int32_t chd, int32_t ldq) {
  const elem_dtype dt = f.dt;
  const bool fp8 = f.fp8;
  const int32_t nq = f.nq, nkv = f.nkv, hd = f.hd;
  chd = chd ? chd : hd;
  ldq = ldq ? ldq : nq * chd;
  attention_case c{make_batch(m, r, reqs, bs), {}, {}, {}, {}};
  const size_t cslots = size_t(c.b.num_blocks) * bs, crow = size_t(nkv) * chd;
  auto ck = m.of(random_kv_bytes(r, dt, cslots * crow));
  auto cv = m.of(random_kv_bytes(r, dt, cslots * crow));
  auto cks = m.of(r.floats(fp8 ? cslots * nkv : 1, 0.001f, 0.02f));
  auto cvs = m.of(r.floats(fp8 ? cslots * nkv : 1, 0.001f, 0.02f));
  const int32_t rows = c.b.h.num_tokens;
  c.q = m.of(r.floats(size_t(rows) * ldq, -3, 3));
  c.out = m.of(std::vector<float>(size_t(rows) * nq * chd));
  c.h = {c.b.h, c.q.h, ldq, ck.h, cv.h, fp8 ? cks.h : nullptr, fp8 ? cvs.h : nullptr, dt, c.out.h, nq * chd,
         nq, nkv, chd, bs};
  c.d = {c.b.d, c.q.d, ldq, ck.d, cv.d, fp8 ? cks.d : nullptr, fp8 ? cvs.d : nullptr, dt, c.out.d, nq * chd,
         nq, nkv, chd, bs};
  return c;
}

// A case run with scratch for `chunks` chunks per row, twice (the second time into a cleared
// output: the fold's counters must have been set back to zero), against the CPU's fold.
void kernel_checks::check_split(const kv_fixture& f, attention_case& c, int64_t chunks, const std::string& name) {
  const elem_dtype dt = f.dt;
  const int32_t nq = f.nq;
  const int32_t chd = c.h.head_dim;
  const int64_t cap = int64_t(c.b.h.num_tokens) * nq * chunks * (chd + 2);
  auto scratch = m.of(std::vector<float>(size_t(cap)));
  auto counts = m.of(std::vector<uint32_t>(size_t(cap / (chd + 2))));
  c.d.partials = scratch.d;
  c.d.partials_floats = cap;
  c.d.partial_counts = counts.d;
  run([&] { cpu::paged_attention(c.h); }, [&] { kt.paged_attention(cs, c.d); });
  verdict v;
  v.add(m, c.out);
  const std::vector<float> zeros(c.out.n, 0.0f);
  gpu.copy_async(cs, c.out.d, zeros.data(), zeros.size() * sizeof(float));
  kt.paged_attention(cs, c.d);
  gpu.synchronize();
  v.add(m, c.out);
  report(name + to_string(dt) + tag, v);
}

void kernel_checks::check_paged_attention_split(kv_fixture& f) {
  // Decode rows with chunk-parallel attention (scratch given): one chunk, exactly two, a
  // partial last one, many; the fold must equal the CPU's in-place fold.
  attention_case c = make_case(f, {{1, 0}, {1, 63}, {1, 127}, {1, 200}, {2, 330}});
  check_split(f, c, 8, "paged_attention split ");
}

void kernel_checks::check_paged_attention_tiles(kv_fixture& f) {
  const elem_dtype dt = f.dt;
  // Prefill-sized rows in tiles of 32 of one request: a prompt over three tiles, a decode row, a
  // chunk starting mid-chunk at 150, one ending a tile early at 31. Without scratch one block
  // folds each tile (as for positions past the model's split scratch); with it, each (tile,
  // head, chunk) writes its records and the tile's last chunk folds.
  attention_case c = make_case(f, {{70, 0}, {1, 300}, {45, 150}, {33, 31}});
  run([&] { cpu::paged_attention(c.h); }, [&] { kt.paged_attention(cs, c.d); });
  verdict vt;
  vt.add(m, c.out);
  report(std::string("paged_attention tiles ") + to_string(dt) + tag, vt);
}

void kernel_checks::check_paged_attention_tiles_split(kv_fixture& f) {
  attention_case c = make_case(f, {{70, 0}, {1, 300}, {45, 150}, {33, 31}});
  check_split(f, c, 300 / attention_chunk + 1, "paged_attention tiles split ");
}

void kernel_checks::check_paged_attention_tiles_unaligned(kv_fixture& f) {
  const elem_dtype dt = f.dt;
  const int32_t nq = f.nq;
  // The tiles' staging without 16-byte loads: queries at a stride of nq·hd + 1 floats, and a
  // head_dim of 18 (K and V rows not a multiple of 4 elements, and a tail past the 8 lanes),
  // by one block per tile and by one per chunk.
  const int32_t hd2 = 18;
  attention_case c = make_case(f, {{70, 0}, {45, 150}}, hd2, nq * hd2 + 1);
  run([&] { cpu::paged_attention(c.h); }, [&] { kt.paged_attention(cs, c.d); });
  verdict vu;
  vu.add(m, c.out);
  report(std::string("paged_attention tiles unaligned ") + to_string(dt) + tag, vu);
  check_split(f, c, (150 + 45) / attention_chunk + 1, "paged_attention tiles unaligned split ");
}

void kernel_checks::check_sparse_attention(kv_fixture& f) {
  const elem_dtype dt = f.dt;
  const bool fp8 = f.fp8;
  const int32_t nq = f.nq, nkv = f.nkv, hd = f.hd;
  batch_pair& b = f.b;
  const size_t slots = f.slots;
  auto &k = f.k, &v = f.v;
  auto &ks = f.ks, &vs = f.vs;
  const int32_t T = f.T, ldqkv = f.ldqkv;
  auto& src = f.src;
  // Sparse: window 16, top 4 groups of 4; every other compressed row duplicated to force ties.
  const int32_t idim = 8, group = 4;
  auto raw = m.of(r.floats(slots * idim));
  std::vector<float> comp = r.floats(slots / group * idim);
  for (size_t g = 1; g < slots / group; g += 2)
    std::memcpy(&comp[g * idim], &comp[(g - 1) * idim], idim * sizeof(float));
  auto cmp = m.of(comp);
  run([&] { cpu::index_compress({b.h, raw.h, cmp.h, idim, bs, group}); },
      [&] { kt.index_compress(cs, {b.d, raw.d, cmp.d, idim, bs, group}); });
  verdict vc;
  vc.add(m, cmp);
  report(std::string("index_compress") + (dt == elem_dtype::fp32 ? "" : " (again)") + tag, vc);
  auto iq = m.of(r.floats(size_t(T) * idim));
  auto out2 = m.of(std::vector<float>(size_t(T) * nq * hd));
  paged_attention_args h{b.h, src.h, ldqkv, k.h, v.h, fp8 ? ks.h : nullptr, fp8 ? vs.h : nullptr, dt, out2.h, nq * hd,
                         nq, nkv, hd, bs};
  paged_attention_args d{b.d, src.d, ldqkv, k.d, v.d, fp8 ? ks.d : nullptr, fp8 ? vs.d : nullptr, dt, out2.d, nq * hd,
                         nq, nkv, hd, bs};
  run([&] { cpu::sparse_attention({h, iq.h, idim, cmp.h, idim, 16, 4, group}); },
      [&] { kt.sparse_attention(cs, {d, iq.d, idim, cmp.d, idim, 16, 4, group}); });
  verdict vsa;
  vsa.add(m, out2);
  report(std::string("sparse_attention ") + to_string(dt) + tag, vsa);
}

void kernel_checks::check_state_reset() {
  batch_pair b = make_batch(m, r, {{5, 0, true}, {3, 7, false}, {1, 2, true}, {4, 9, false}}, bs);
  const size_t slot_bytes = 512;
  auto st = m.of(r.floats(b.num_slots * slot_bytes / 4));
  run([&] { cpu::state_reset({b.h, reinterpret_cast<uint8_t*>(st.h), slot_bytes, b.num_slots}); },
      [&] { kt.state_reset(cs, {b.d, reinterpret_cast<uint8_t*>(st.d), slot_bytes, b.num_slots}); });
  verdict v;
  v.add(m, st);
  report("state_reset" + tag, v);
}

void kernel_checks::check_causal_conv() {
  for (bool silu : {false, true}) {
    batch_pair b = make_batch(m, r, {{7, 0}, {1, 40}, {12, 3}}, bs);
    const int32_t C = sh.dim + 3, W = 4, T = b.h.num_tokens, ldx = C + 2;
    const size_t slot_bytes = (size_t(W - 1) * C * 4 + 64 + 255) / 256 * 256;
    auto st = m.of(r.floats(b.num_slots * slot_bytes / 4, -2, 2));
    auto x = m.of(r.floats(size_t(T) * ldx, -3, 3));
    auto w = m.of(r.floats(size_t(C) * W));
    auto y = m.of(std::vector<float>(size_t(T) * C));
    causal_conv_args h{b.h, x.h, ldx, y.h, C, w.h, reinterpret_cast<uint8_t*>(st.h), slot_bytes, 64, b.num_slots, C, W, silu};
    causal_conv_args d{b.d, x.d, ldx, y.d, C, w.d, reinterpret_cast<uint8_t*>(st.d), slot_bytes, 64, b.num_slots, C, W, silu};
    run([&] { cpu::causal_conv(h); }, [&] { kt.causal_conv(cs, d); });
    verdict v;
    v.add(m, y);
    v.add(m, st);
    report(std::string("causal_conv") + (silu ? " silu" : "") + tag, v);
  }
}

void kernel_checks::check_gdn() {
  batch_pair b = make_batch(m, r, {{6, 0}, {1, 30}, {11, 4}}, bs);
  const int32_t H = sh.heads, dk = sh.gdn_dk, dv = sh.gdn_dv, T = b.h.num_tokens;
  const int32_t ldq = H * (2 * dk + dv) + 3, lda = H * (2 + dv) + 1;
  const size_t state_floats = size_t(H) * dv * dk, slot_bytes = (state_floats * 4 + 128 + 255) / 256 * 256;
  auto st = m.of(r.floats(b.num_slots * slot_bytes / 4, -0.5f, 0.5f));
  auto qkv = m.of(r.floats(size_t(T) * ldq, -2, 2));
  auto abg = m.of(r.floats(size_t(T) * lda, -4, 4));
  auto bias = m.of(r.floats(H, 1, 3));
  auto out = m.of(std::vector<float>(size_t(T) * H * dv));
  gdn_args h{b.h, qkv.h, ldq, abg.h, lda, bias.h, out.h, H * dv, reinterpret_cast<uint8_t*>(st.h), slot_bytes, 128,
             b.num_slots, H, dk, dv};
  gdn_args d{b.d, qkv.d, ldq, abg.d, lda, bias.d, out.d, H * dv, reinterpret_cast<uint8_t*>(st.d), slot_bytes, 128,
             b.num_slots, H, dk, dv};
  run([&] { cpu::gdn(h); }, [&] { kt.gdn(cs, d); });
  verdict v;
  v.add(m, out);
  v.add(m, st);
  report("gdn" + tag, v);
}

// The Qwen3.5 ops: GDN with half as many key heads as value heads and Qwen's decay (ungated
// output), the gated per-head RMSNorm after it, per-head q/k norms, partial RoPE, the output gate.
void kernel_checks::check_gdn_qwen() {
  batch_pair b = make_batch(m, r, {{6, 0}, {1, 30}, {11, 4}}, bs);
  const int32_t H = sh.heads, Hk = sh.heads / 2, dk = sh.gdn_dk, dv = sh.gdn_dv, T = b.h.num_tokens;
  const int32_t ldq = 2 * Hk * dk + H * dv + 3, lda = H * (2 + dv) + 1;
  const size_t state_floats = size_t(H) * dv * dk, slot_bytes = (state_floats * 4 + 128 + 255) / 256 * 256;
  auto st = m.of(r.floats(b.num_slots * slot_bytes / 4, -0.5f, 0.5f));
  auto qkv = m.of(r.floats(size_t(T) * ldq, -2, 2));
  auto abz = m.of(r.floats(size_t(T) * lda, -30, 30)); // a + dt_bias across softplus's thresholds
  auto dt_bias = m.of(r.floats(H, -1, 1));
  auto neg_exp_a = m.of(r.floats(H, -8, -0.01f));
  auto out = m.of(std::vector<float>(size_t(T) * H * dv));
  gdn_args h{b.h, qkv.h, ldq, abz.h, lda, dt_bias.h, out.h, H * dv, reinterpret_cast<uint8_t*>(st.h), slot_bytes, 128,
             b.num_slots, H, dk, dv, Hk, neg_exp_a.h};
  gdn_args d{b.d, qkv.d, ldq, abz.d, lda, dt_bias.d, out.d, H * dv, reinterpret_cast<uint8_t*>(st.d), slot_bytes, 128,
             b.num_slots, H, dk, dv, Hk, neg_exp_a.d};
  run([&] { cpu::gdn(h); }, [&] { kt.gdn(cs, d); });
  verdict v;
  v.add(m, out);
  v.add(m, st);
  report("gdn qwen (key heads " + std::to_string(Hk) + ")" + tag, v);
  auto w = m.of(r.floats(dv, 0.5f, 1.5f));
  rmsnorm_args hn{out.h, H * dv, w.h, out.h, H * dv, T, dv, 1e-6f, H, abz.h + 2 * H, lda};
  rmsnorm_args dn{out.d, H * dv, w.d, out.d, H * dv, T, dv, 1e-6f, H, abz.d + 2 * H, lda};
  run([&] { cpu::rmsnorm(hn); }, [&] { kt.rmsnorm(cs, dn); });
  verdict vn;
  vn.add(m, out);
  report("rmsnorm gated, per head, in place" + tag, vn);
}

void kernel_checks::check_head_ops() {
  for (int32_t hd : {sh.head_dim, 256}) {
    const int32_t rows = 20, heads = sh.heads, ld = 2 * heads * hd + 8, rot = hd / 4, maxp = 256;
    auto x = m.of(r.floats(size_t(rows) * ld, -3, 3));
    auto w = m.of(r.floats(hd, 0.5f, 1.5f));
    run([&] { cpu::rmsnorm({x.h, ld, w.h, x.h, ld, rows, hd, 1e-6f, heads}); },
        [&] { kt.rmsnorm(cs, {x.d, ld, w.d, x.d, ld, rows, hd, 1e-6f, heads}); });
    verdict vn;
    vn.add(m, x);
    report("rmsnorm per head, hd " + std::to_string(hd) + tag, vn);
    std::vector<float> cs_table(size_t(maxp) * rot);
    for (int32_t p = 0; p < maxp; ++p)
      for (int32_t i = 0; i < rot / 2; ++i) {
        cs_table[(size_t(p) * rot / 2 + i) * 2] = float(std::cos(p * std::pow(5e6, -2.0 * i / rot)));
        cs_table[(size_t(p) * rot / 2 + i) * 2 + 1] = float(std::sin(p * std::pow(5e6, -2.0 * i / rot)));
      }
    auto tab = m.of(cs_table);
    auto pos = m.of(r.ints(rows, 0, maxp - 1));
    run([&] { cpu::rope({x.h, ld, pos.h, tab.h, rows, heads, hd, maxp, rot}); },
        [&] { kt.rope(cs, {x.d, ld, pos.d, tab.d, rows, heads, hd, maxp, rot}); });
    verdict vr;
    vr.add(m, x);
    report("rope partial (" + std::to_string(rot) + " of " + std::to_string(hd) + ")" + tag, vr);
    auto gate = m.of(r.floats(size_t(rows) * ld, -12, 12));
    run([&] { cpu::output_gate({x.h, ld, gate.h + heads * hd, ld, rows, heads * hd}); },
        [&] { kt.output_gate(cs, {x.d, ld, gate.d + heads * hd, ld, rows, heads * hd}); });
    verdict vg;
    vg.add(m, x);
    report("output_gate, hd " + std::to_string(hd) + tag, vg);
  }
}

void kernel_checks::check_ple_ngram() {
  batch_pair b = make_batch(m, r, {{6, 0}, {1, 30}, {11, 4}}, bs);
  const size_t slot_bytes = 256;
  auto st = m.of(r.ints(b.num_slots * slot_bytes / 4, 0, 258));
  auto buckets = m.of(std::vector<int32_t>(b.h.num_tokens));
  const uint64_t hs = 0xfeedULL + seed;
  run([&] { cpu::ple_ngram({b.h, buckets.h, reinterpret_cast<uint8_t*>(st.h), slot_bytes, 16, b.num_slots, 3, 8192, hs}); },
      [&] { kt.ple_ngram(cs, {b.d, buckets.d, reinterpret_cast<uint8_t*>(st.d), slot_bytes, 16, b.num_slots, 3, 8192, hs}); });
  verdict v;
  v.add(m, buckets);
  v.add(m, st);
  report("ple_ngram" + tag, v);
}

void kernel_checks::check_gather_rows() {
  const int32_t rows = 30, dim = sh.dim, count = 7;
  auto x = m.of(r.floats(size_t(rows) * dim));
  auto ids = m.of(r.ints(count, 0, rows - 1));
  auto out = m.of(std::vector<float>(size_t(count) * dim));
  run([&] { cpu::gather_rows({x.h, dim, ids.h, out.h, count, dim}); },
      [&] { kt.gather_rows(cs, {x.d, dim, ids.d, out.d, count, dim}); });
  verdict v;
  v.add(m, out);
  report("gather_rows" + tag, v);
}

void kernel_checks::check_sample() {
  // Greedy (with a tie) and seeded temperature draws.
  batch_pair b = make_batch(m, r, {{3, 0, false, 0.0f}, {1, 20, false, 0.7f}, {2, 5, false, 1.3f}, {1, 9, false, 0.0f}}, bs);
  const int32_t vocab = 258;
  std::vector<float> logits = r.floats(size_t(b.h.num_samples) * vocab, -6, 6);
  logits[17] = logits[200] = 50.0f; // tie: the lowest id wins
  auto lg = m.of(logits);
  auto tok = m.of(std::vector<int32_t>(b.h.num_samples));
  run([&] { cpu::sample({b.h, lg.h, tok.h, vocab}); }, [&] { kt.sample(cs, {b.d, lg.d, tok.d, vocab}); });
  verdict v;
  v.add(m, tok);
  report("sample" + tag, v);
}

void kernel_checks::check_unit_copy() {
  // Page-unit gather into mapped pinned memory, then scatter back into a fresh arena, in both host
  // layouts (unit-major; segment-major = the KV chunk object), with and without skipped (negative)
  // ids: field blocks aligned and not, smaller than one 16 KiB chunk and spanning several.
  // `summed`: the launches also sum the object checksum's terms (field blocks then multiples of 8),
  // which must equal the CPU's and checksum_terms of the host buffer as the copy left it.
  for (bool segment_major : {false, true})
    for (bool skips : {false, true})
      for (bool summed : {false, true}) {
        const std::vector<uint64_t> bb = {24, 40, 4096, 20000, summed ? 16u : 13u, 65536};
        const int32_t blocks = 12;
        const std::vector<int32_t> ids_v =
            skips ? std::vector<int32_t>{7, -1, 11, 3, 3, -4, 1} : std::vector<int32_t>{7, 0, 11, 3, 3, 9, 1};
        auto arena = random_arena(m, r, bb, blocks);
        auto& dst = arena.dst;
        auto &rsrc = arena.rsrc, &rdst = arena.rdst;
        auto &src_h = arena.src_h, &dst_h = arena.dst_h;
        const uint64_t unit_bytes = arena.unit_bytes;
        auto bbd = m.of(bb);
        auto ids = m.of(ids_v);
        const size_t host_bytes = unit_bytes * ids_v.size();
        // Both host buffers start equal and non-zero, so bytes a skipped id must leave are compared too.
        std::vector<uint8_t> host_cpu(host_bytes, 0xa5);
        auto* pinned = static_cast<uint8_t*>(gpu.alloc_host_pinned(host_bytes));
        std::memset(pinned, 0xa5, host_bytes);
        const auto args = [&](uint8_t* const* regions, const uint64_t* block_bytes, const int32_t* unit_ids,
                              uint8_t* host, unit_copy_direction dir) {
          unit_copy_args a;
          a.regions = regions, a.block_bytes = block_bytes, a.unit_ids = unit_ids, a.host = host;
          a.num_fields = static_cast<int32_t>(bb.size()), a.num_units = static_cast<int32_t>(ids_v.size());
          a.max_block_bytes = 65536, a.direction = dir, a.segment_major = segment_major;
          return a;
        };
        auto sum_g = m.of(std::vector<uint64_t>(1, 0)), sum_s = m.of(std::vector<uint64_t>(1, 0));
        const auto with_sum = [&](unit_copy_args a, const mirror::pair<uint64_t>& sum, bool device) {
          a.checksum = summed ? (device ? sum.d : sum.h) : nullptr;
          return a;
        };
        // The sums both sides added, against the terms of the host buffer as the copy left it.
        const auto check_sum = [&](verdict& v, const mirror::pair<uint64_t>& sum, const uint8_t* host) {
          if (!summed) return;
          v.add(m, sum);
          if (sum.h[0] != checksum_terms(host, host_bytes, 0)) v.bitwise = false;
        };
        const std::string layout = std::string(segment_major ? " segment-major" : " unit-major") +
                                   (skips ? " skip" : "") + (summed ? " checksum" : "");
        const auto gather = unit_copy_direction::gather, scatter = unit_copy_direction::scatter;
        const unit_copy_args gather_h = with_sum(args(src_h.data(), bb.data(), ids_v.data(), host_cpu.data(), gather),
                                                 sum_g, false);
        const unit_copy_args gather_d = with_sum(args(rsrc.d, bbd.d, ids.d, pinned, gather), sum_g, true);
        run([&] { cpu::unit_copy(gather_h); }, [&] { kt.unit_copy(stream_kind::save, gather_d); });
        verdict g;
        size_t diff = 0;
        for (size_t i = 0; i < host_bytes; ++i) diff += pinned[i] != host_cpu[i];
        g.bitwise = diff == 0, g.err = double(diff) / double(host_bytes);
        check_sum(g, sum_g, pinned);
        report("unit_copy gather" + layout + tag, g);
        const unit_copy_args scatter_h = with_sum(args(dst_h.data(), bb.data(), ids_v.data(), host_cpu.data(), scatter),
                                                  sum_s, false);
        const unit_copy_args scatter_d = with_sum(args(rdst.d, bbd.d, ids.d, pinned, scatter), sum_s, true);
        run([&] { cpu::unit_copy(scatter_h); }, [&] { kt.unit_copy(stream_kind::load, scatter_d); });
        verdict sv;
        for (auto& p : dst) sv.add(m, p);
        check_sum(sv, sum_s, pinned);
        report("unit_copy scatter" + layout + tag, sv);
        gpu.free_host_pinned(pinned);
      }
}

void kernel_checks::check_unit_copy_batch() {
  // unit_copy_batch (one launch for a step's loads or saves): three copies of one arena, each
  // with its own ids, host bytes, layout and checksum (one skipped id, one copy unsummed),
  // gathered in one batch and scattered back into a fresh arena in another, against
  // cpu::unit_copy of each copy.
  const std::vector<uint64_t> bb = {24, 40, 4096, 20000, 16, 65536};
  const int32_t blocks = 12;
  auto arena = random_arena(m, r, bb, blocks);
  auto& dst = arena.dst;
  auto &rsrc = arena.rsrc, &rdst = arena.rdst;
  auto &src_h = arena.src_h, &dst_h = arena.dst_h;
  const uint64_t unit_bytes = arena.unit_bytes;
  auto bbd = m.of(bb);
  struct copy_spec {
    std::vector<int32_t> ids;
    bool segment_major, summed;
  };
  const std::vector<copy_spec> specs = {{{7, 0, 11}, false, true}, {{3, -1, 9, 1}, true, true}, {{5, -2, 2}, true, false}};
  std::vector<int32_t> all_ids;
  std::vector<size_t> first_id, host_at;
  size_t host_bytes = 0;
  for (const auto& c : specs) {
    first_id.push_back(all_ids.size()), host_at.push_back(host_bytes);
    all_ids.insert(all_ids.end(), c.ids.begin(), c.ids.end());
    host_bytes += unit_bytes * c.ids.size();
  }
  auto ids = m.of(all_ids);
  auto sums_g = m.of(std::vector<uint64_t>(specs.size(), 0)), sums_s = m.of(std::vector<uint64_t>(specs.size(), 0));
  std::vector<uint8_t> host_cpu(host_bytes, 0x5a);
  auto* pinned = static_cast<uint8_t*>(gpu.alloc_host_pinned(host_bytes));
  std::memset(pinned, 0x5a, host_bytes);
  const auto batch = [&](bool device, unit_copy_direction dir, const mirror::pair<uint64_t>& sums, bool staged) {
    std::vector<unit_copy_args> out;
    for (size_t k = 0; k < specs.size(); ++k) {
      unit_copy_args a;
      const bool gather = dir == unit_copy_direction::gather;
      a.regions = device ? (gather ? rsrc.d : rdst.d) : (gather ? src_h.data() : dst_h.data());
      a.block_bytes = device ? bbd.d : bb.data();
      a.unit_ids = (device ? ids.d : ids.h) + first_id[k];
      a.host = (device ? pinned : host_cpu.data()) + host_at[k];
      a.num_fields = static_cast<int32_t>(bb.size()), a.num_units = static_cast<int32_t>(specs[k].ids.size());
      a.max_block_bytes = 65536, a.unit_bytes = staged ? unit_bytes : 0, a.direction = dir;
      a.segment_major = specs[k].segment_major;
      a.checksum = specs[k].summed ? (device ? sums.d : sums.h) + k : nullptr;
      a.beside_forward = gather; // a save beside a forward: staged, or paced (few CTAs, each looping)
      out.push_back(a);
    }
    return out;
  };
  const auto gather = unit_copy_direction::gather, scatter = unit_copy_direction::scatter;
  // Zeroes a mirrored buffer on both sides (the upload on `s`; the caller synchronizes).
  const auto zero = [&](auto& pair, stream_kind s) {
    std::fill(pair.h, pair.h + pair.n, 0);
    gpu.copy_async(s, pair.d, pair.h, pair.n * sizeof(*pair.h));
  };
  // The gather beside a forward staged in device memory (unit_bytes set), and paced without
  // staging (unit_bytes unknown), each from fresh host bytes and sums (kernels/hip/unit_copy.hip).
  for (bool staged : {true, false}) {
    std::memset(pinned, 0x5a, host_bytes);
    std::fill(host_cpu.begin(), host_cpu.end(), uint8_t{0x5a});
    zero(sums_g, stream_kind::save);
    gpu.synchronize();
    const std::vector<unit_copy_args> gather_cpu = batch(false, gather, sums_g, staged),
                                      gather_gpu = batch(true, gather, sums_g, staged);
    run([&] { for (const auto& a : gather_cpu) cpu::unit_copy(a); },
        [&] { kt.unit_copy_batch(stream_kind::save, gather_gpu.data(), gather_gpu.size()); });
    verdict g;
    size_t diff = 0;
    for (size_t i = 0; i < host_bytes; ++i) diff += pinned[i] != host_cpu[i];
    g.bitwise = diff == 0, g.err = double(diff) / double(host_bytes);
    g.add(m, sums_g);
    report(std::string("unit_copy_batch gather, ") + (staged ? "staged" : "paced") + " (3 copies, mixed layouts)" + tag,
           g);
  }
  // The scatter staged in device memory by the copy engine (unit_bytes set), and with the kernel
  // reading the mapped host buffer (unit_bytes unknown), each into a zeroed arena with zeroed sums.
  for (bool staged : {true, false}) {
    for (auto& p : dst) zero(p, stream_kind::load);
    zero(sums_s, stream_kind::load);
    gpu.synchronize();
    const std::vector<unit_copy_args> scatter_cpu = batch(false, scatter, sums_s, staged),
                                      scatter_gpu = batch(true, scatter, sums_s, staged);
    run([&] { for (const auto& a : scatter_cpu) cpu::unit_copy(a); },
        [&] { kt.unit_copy_batch(stream_kind::load, scatter_gpu.data(), scatter_gpu.size()); });
    verdict sv;
    for (auto& p : dst) sv.add(m, p);
    sv.add(m, sums_s);
    report(std::string("unit_copy_batch scatter, ") + (staged ? "staged" : "direct") + " (3 copies, mixed layouts)" +
               tag,
           sv);
  }
  gpu.free_host_pinned(pinned);
}

// The matrix-unit matmuls (device.matmul = "tf32", model.weight_dtype = "bf16"): the error
// against the CPU matmul, then batch invariance, bitwise: rows computed alone, in small batches and
// at other places in a tile (every tile shape: 16, 32 and 64 rows per block) must equal the same
// rows of one large call. tf32 is compared with the exact matmul of the fp32 operands; bf16 with
// the exact matmul of the same bf16 operands (W's bf16 values, x rounded to bf16), so only the
// matrix units' summation differs.
// `aligned`: in a multiple of 16 and out of 16, so rows <= 16 take the strip kernel (W fragments
// straight from global memory) and more rows the pipelined kernel (cp.async), whose bits must
// agree; otherwise every row count takes the register-staged kernel.
void check_matrix_unit_matmul(device& gpu, kernel_table& kt, bool bf16, const shape& sh, bool aligned, uint64_t seed) {
  mirror m(gpu);
  rng r(seed);
  const std::string name = bf16 ? "matmul bf16 weights" : "matmul tf32";
  const std::string tag = std::string(aligned ? " aligned [" : " [") + sh.tag + "]";
  const stream_kind cs = stream_kind::compute;
  const int32_t in = aligned ? sh.dim : sh.dim + 3, out = aligned ? 304 : 301, ldx = in + 5, ldy = out + 2, rows = 150;
  std::vector<float> xv = r.floats(size_t(rows) * ldx), wv = r.floats(size_t(out) * in);
  std::vector<uint16_t> w16(bf16 ? wv.size() : 0);
  if (bf16) {
    for (size_t i = 0; i < wv.size(); ++i) w16[i] = cpu::float_to_bf16(wv[i]), wv[i] = cpu::bf16_to_float(w16[i]);
  }
  auto x = m.of(xv);
  auto w = m.of(wv);
  auto wb = m.of(w16);
  std::vector<float> x_ref = xv; // what the matrix units multiply
  if (bf16)
    for (float& v : x_ref) v = cpu::bf16_to_float(cpu::float_to_bf16(v));
  const auto gpu_args = [&](const float* xd, float* yd, int32_t n, bool acc) {
    matmul_args a{xd, ldx, bf16 ? nullptr : w.d, yd, ldy, n, in, out, acc};
    if (bf16) a.w_bf16 = wb.d;
    return a;
  };
  for (bool acc : {false, true}) {
    const std::vector<float> y0 = r.floats(size_t(rows) * ldy);
    auto y = m.of(y0);
    cpu::matmul({x_ref.data(), ldx, w.h, y.h, ldy, rows, in, out, acc});
    kt.matmul(cs, gpu_args(x.d, y.d, rows, acc));
    gpu.synchronize();
    verdict v;
    v.add(m, y);
    report_within(name + (acc ? " accumulate" : "") + " vs exact" + tag, v, bf16 ? 1e-4 : 4e-3);
  }
  // Reference: all 150 rows in one call (64-row tiles). Then the same rows in pieces.
  auto whole = m.of(std::vector<float>(size_t(rows) * ldy));
  kt.matmul(cs, gpu_args(x.d, whole.d, rows, false));
  const std::vector<float> ref = m.download(whole);
  verdict inv;
  const std::vector<std::pair<int32_t, int32_t>> pieces = {{0, 1}, {1, 16}, {17, 5}, {22, 40}, {62, 64}, {126, 24}, {149, 1}};
  auto part = m.of(std::vector<float>(size_t(rows) * ldy));
  for (auto [first, count] : pieces)
    kt.matmul(cs, gpu_args(x.d + size_t(first) * ldx, part.d + size_t(first) * ldy, count, false));
  // Row 77 alone as well, written over its own result.
  kt.matmul(cs, gpu_args(x.d + size_t(77) * ldx, part.d + size_t(77) * ldy, 1, false));
  const std::vector<float> got = m.download(part);
  size_t diff = 0;
  for (int32_t i = 0; i < rows; ++i)
    diff += std::memcmp(&got[size_t(i) * ldy], &ref[size_t(i) * ldy], size_t(out) * 4) != 0;
  inv.bitwise = diff == 0;
  inv.err = double(diff) / rows;
  report(name + " batch-invariant (rows differing)" + tag, inv);
}

// ---- the model on both devices ---------------------------------------------------------------

struct model_run {
  std::unique_ptr<device> dev;
  std::unique_ptr<model> m;
  std::unique_ptr<test::batch_builder> builder;

  model_run(std::unique_ptr<device> d, model_preset p, kv_dtype kv, matmul_mode mm = matmul_mode::exact,
            weight_dtype weights = weight_dtype::fp32, std::shared_ptr<const hf_checkpoint> checkpoint = nullptr)
      : dev(std::move(d)) {
    model_options o;
    o.checkpoint = std::move(checkpoint);
    o.preset = p;
    o.size = model_size::tiny;
    o.seed = 7;
    o.kv = kv;
    o.block_size = 16;
    o.num_blocks = 128;
    o.max_batch_tokens = 512;
    o.max_state_slots = 8;
    o.matmul = mm;
    o.weights = weights;
    m = std::make_unique<model>(o, *dev);
    builder = std::make_unique<test::batch_builder>(*dev, 16);
  }
  // Digest of each sample's logits, and the sampled tokens.
  std::vector<uint64_t> run(const std::vector<test::request_rows>& reqs, std::vector<int32_t>* tokens = nullptr) {
    const device_batch b = builder->build(reqs);
    m->enqueue_forward(stream_kind::compute, b);
    const int32_t vocab = m->geometry().vocab_size;
    std::vector<float> logits(size_t(b.num_samples) * vocab);
    std::vector<int32_t> toks(b.num_samples);
    dev->copy_async(stream_kind::compute, logits.data(), m->outputs().logits, logits.size() * 4);
    dev->copy_async(stream_kind::compute, toks.data(), m->outputs().sampled_tokens, toks.size() * 4);
    dev->synchronize();
    std::vector<uint64_t> out;
    for (int32_t i = 0; i < b.num_samples; ++i) out.push_back(XXH64(&logits[size_t(i) * vocab], vocab * 4, 0));
    if (tokens) *tokens = toks;
    return out;
  }
};

std::vector<int32_t> range_blocks(int32_t first, int32_t n) {
  std::vector<int32_t> v(n);
  for (int32_t i = 0; i < n; ++i) v[i] = first + i;
  return v;
}

test::request_rows rows_of(const std::vector<int32_t>& prompt, int32_t from, int32_t to, std::vector<int32_t> blocks,
                           int32_t slot, bool reset, bool sample = true) {
  test::request_rows q;
  q.tokens.assign(prompt.begin() + from, prompt.begin() + to);
  q.first_position = from;
  q.blocks = std::move(blocks);
  q.state_slot = slot;
  q.reset_state = reset;
  q.sample = sample;
  return q;
}

// Digests of one scenario: cold, chunked, prefix hit (models without recurrent state), batched,
// then greedy decode steps continuing the cold request.
struct scenario_result {
  uint64_t cold = 0, chunked = 0, hit = 0, batched = 0, decode = 0;
  std::vector<int32_t> decoded;
};

scenario_result scenario(model_run& mr) {
  const bool stateful = mr.m->geometry().has_recurrent_state;
  const int32_t slot_none = -1;
  const auto slot = [&](int32_t s) { return stateful ? s : slot_none; };
  std::vector<int32_t> prompt, other1, other2;
  for (int32_t i = 0; i < 150; ++i) prompt.push_back((i * 37 + 11) % 256);
  for (int32_t i = 0; i < 77; ++i) other1.push_back((i * 91 + 5) % 256);
  for (int32_t i = 0; i < 23; ++i) other2.push_back((i * 13 + 200) % 256);
  scenario_result r;
  r.cold = mr.run({rows_of(prompt, 0, 150, range_blocks(0, 16), slot(0), true)})[0];
  mr.run({rows_of(prompt, 0, 64, range_blocks(16, 16), slot(1), true, false)});
  mr.run({rows_of(prompt, 64, 114, range_blocks(16, 16), slot(1), false, false)});
  r.chunked = mr.run({rows_of(prompt, 114, 150, range_blocks(16, 16), slot(1), false)})[0];
  if (!stateful) { // the first 8 blocks (128 tokens) are the cold request's, already in the arena
    std::vector<int32_t> blocks = range_blocks(0, 8);
    for (int32_t b : range_blocks(32, 8)) blocks.push_back(b);
    r.hit = mr.run({rows_of(prompt, 128, 150, blocks, slot_none, false)})[0];
  }
  const std::vector<uint64_t> batched = mr.run({rows_of(other1, 0, 77, range_blocks(40, 8), slot(2), true),
                                                rows_of(prompt, 0, 150, range_blocks(48, 16), slot(3), true),
                                                rows_of(other2, 0, 23, range_blocks(64, 4), slot(4), true)});
  r.batched = batched[1];
  std::vector<int32_t> seq = prompt, tok;
  mr.run({rows_of(prompt, 0, 150, range_blocks(0, 16), slot(0), true)}, &tok);
  for (int step = 0; step < 6; ++step) {
    seq.push_back(tok[0]);
    r.decoded.push_back(tok[0]);
    const int32_t p = static_cast<int32_t>(seq.size()) - 1;
    r.decode = mr.run({rows_of(seq, p, p + 1, range_blocks(0, 16), slot(0), false)}, &tok)[0];
  }
  return r;
}

} // namespace

int main(int argc, char** argv) {
  uint64_t seed = 20261202;
  bool skip_model = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seed" && i + 1 < argc) seed = std::stoull(argv[++i]);
    else if (a == "--skip-model") skip_model = true;
    else {
      std::fprintf(stderr, "usage: gpu_check [--seed N] [--skip-model]\n");
      return 2;
    }
  }
  std::unique_ptr<device> gpu = make_gpu_device(0);
  std::unique_ptr<kernel_table> kt = make_kernel_table(*gpu);
  std::printf("gpu_check on %s, seed %llu\n\n", gpu->name().c_str(), static_cast<unsigned long long>(seed));
  std::printf("| %-40s | %-11s | %-7s |\n|%s|%s|%s|\n", "kernel vs CPU reference", "max rel err", "bitwise",
              std::string(42, '-').c_str(), std::string(13, '-').c_str(), std::string(9, '-').c_str());
  // Tiny shapes, then the b1 preset's (head_dim 128, GDN 128 × 128).
  check_kernels(*gpu, *kt, {"tiny", 64, 4, 2, 16, 16, 16}, seed);
  check_kernels(*gpu, *kt, {"b1", 2048, 16, 4, 128, 128, 128}, seed + 1);
  std::unique_ptr<kernel_table> kt_tf32 = make_kernel_table(*gpu, {matmul_mode::tf32});
  std::unique_ptr<kernel_table> kt_bf16 = make_kernel_table(*gpu, {matmul_mode::exact, weight_dtype::bf16});
  for (bool bf16 : {false, true})
    for (bool aligned : {false, true}) {
      kernel_table& table = bf16 ? *kt_bf16 : *kt_tf32;
      check_matrix_unit_matmul(*gpu, table, bf16, {"tiny", 64, 4, 2, 16, 16, 16}, aligned, seed + 2);
      check_matrix_unit_matmul(*gpu, table, bf16, {"b1", 2048, 16, 4, 128, 128, 128}, aligned, seed + 3);
    }

  if (!skip_model) {
    std::printf("\n| %-28s | %-16s | %-7s | %-7s | %-7s | %-7s | %-9s |\n", "model (tiny) on the GPU", "cold digest",
                "chunked", "hit", "batched", "decode", "GPU = CPU");
    std::printf("|%s|%s|%s|%s|%s|%s|%s|\n", std::string(30, '-').c_str(), std::string(18, '-').c_str(),
                std::string(9, '-').c_str(), std::string(9, '-').c_str(), std::string(9, '-').c_str(),
                std::string(9, '-').c_str(), std::string(11, '-').c_str());
    for (model_preset p : {model_preset::dense, model_preset::gdn_hybrid, model_preset::qsa_gdn_ple})
      for (kv_dtype kv : {kv_dtype::fp32, kv_dtype::bf16, kv_dtype::fp8}) {
        model_run g(make_gpu_device(0), p, kv);
        model_run c(make_cpu_device({}), p, kv);
        const scenario_result rg = scenario(g), rc = scenario(c);
        const bool stateful = g.m->geometry().has_recurrent_state;
        const bool same = rg.cold == rc.cold && rg.chunked == rc.chunked && rg.hit == rc.hit && rg.batched == rc.batched &&
                          rg.decode == rc.decode && rg.decoded == rc.decoded;
        const bool chunked = rg.chunked == rg.cold, hit = stateful || rg.hit == rg.cold, batched = rg.batched == rg.cold;
        char name[64], digest[32];
        std::snprintf(name, sizeof name, "%s / %s", to_string(p), to_string(kv));
        std::snprintf(digest, sizeof digest, "%016llx", static_cast<unsigned long long>(rg.cold));
        std::printf("| %-28s | %-16s | %-7s | %-7s | %-7s | %-7s | %-9s |\n", name, digest, chunked ? "same" : "DIFF",
                    stateful ? "n/a" : (hit ? "same" : "DIFF"), batched ? "same" : "DIFF",
                    rg.decoded == rc.decoded ? "same" : "DIFF", same ? "yes" : "NO");
        failures += !same + !chunked + !hit + !batched;
      }
    // Hugging Face checkpoints (tests/data/hf/, run from the repository root): the same table.
    for (const char* name : {"qwen3_5_text", "qwen3_5_vl_sharded", "qwen3_next_dense"}) {
      const auto ck = std::make_shared<const hf_checkpoint>(load_hf_checkpoint(std::string("tests/data/hf/") + name));
      for (kv_dtype kv : {kv_dtype::fp32, kv_dtype::bf16, kv_dtype::fp8}) {
        model_run g(make_gpu_device(0), model_preset::dense, kv, matmul_mode::exact, weight_dtype::fp32, ck);
        model_run c(make_cpu_device({}), model_preset::dense, kv, matmul_mode::exact, weight_dtype::fp32, ck);
        const scenario_result rg = scenario(g), rc = scenario(c);
        const bool same = rg.cold == rc.cold && rg.chunked == rc.chunked && rg.batched == rc.batched &&
                          rg.decode == rc.decode && rg.decoded == rc.decoded;
        const bool chunked = rg.chunked == rg.cold, batched = rg.batched == rg.cold;
        char label[64], digest[32];
        std::snprintf(label, sizeof label, "%s / %s", name, to_string(kv));
        std::snprintf(digest, sizeof digest, "%016llx", static_cast<unsigned long long>(rg.cold));
        std::printf("| %-28s | %-16s | %-7s | %-7s | %-7s | %-7s | %-9s |\n", label, digest, chunked ? "same" : "DIFF",
                    "n/a", batched ? "same" : "DIFF", rg.decoded == rc.decoded ? "same" : "DIFF", same ? "yes" : "NO");
        failures += !same + !chunked + !batched;
      }
    }
    // device.matmul = "tf32" and model.weight_dtype = "bf16": not equal to the CPU, but cold,
    // chunked, HBM hit and batched must still agree bitwise on the GPU; the greedy tokens against
    // the CPU's are shown, not required.
    for (bool bf16 : {false, true}) {
      std::printf("\n| %-28s | %-16s | %-7s | %-7s | %-7s | %-13s |\n",
                  bf16 ? "model (tiny), bf16 weights" : "model (tiny), matmul tf32", "cold digest", "chunked", "hit",
                  "batched", "tokens = CPU");
      std::printf("|%s|%s|%s|%s|%s|%s|\n", std::string(30, '-').c_str(), std::string(18, '-').c_str(),
                  std::string(9, '-').c_str(), std::string(9, '-').c_str(), std::string(9, '-').c_str(),
                  std::string(15, '-').c_str());
      for (model_preset p : {model_preset::dense, model_preset::gdn_hybrid, model_preset::qsa_gdn_ple})
        for (kv_dtype kv : {kv_dtype::fp32, kv_dtype::fp8}) {
          model_run g(make_gpu_device(0), p, kv, bf16 ? matmul_mode::exact : matmul_mode::tf32,
                      bf16 ? weight_dtype::bf16 : weight_dtype::fp32);
          model_run c(make_cpu_device({}), p, kv);
          const scenario_result rg = scenario(g), rc = scenario(c);
          const bool stateful = g.m->geometry().has_recurrent_state;
          const bool chunked = rg.chunked == rg.cold, hit = stateful || rg.hit == rg.cold, batched = rg.batched == rg.cold;
          int32_t agree = 0;
          for (size_t i = 0; i < rg.decoded.size(); ++i) agree += rg.decoded[i] == rc.decoded[i];
          char name[64], digest[32], tokens[32];
          std::snprintf(name, sizeof name, "%s / %s", to_string(p), to_string(kv));
          std::snprintf(digest, sizeof digest, "%016llx", static_cast<unsigned long long>(rg.cold));
          std::snprintf(tokens, sizeof tokens, "%d of %zu", agree, rg.decoded.size());
          std::printf("| %-28s | %-16s | %-7s | %-7s | %-7s | %-13s |\n", name, digest, chunked ? "same" : "DIFF",
                      stateful ? "n/a" : (hit ? "same" : "DIFF"), batched ? "same" : "DIFF", tokens);
          failures += !chunked + !hit + !batched;
        }
    }
  }
  std::printf("\n%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
