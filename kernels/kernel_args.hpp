// Arguments of the model's ops, one plain struct per op. Every pointer is device memory; every
// op is batch-invariant: a row's result depends only on that row (and its request's earlier
// rows and state), never on the other rows of the batch.
// Part of the kernel ABI (with kernels/batch.hpp and kernels/kv_layout.hpp): plain structs that
// include nothing from runtime/, so runtime/ and the kernels can both use them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/batch.hpp"
#include "kernels/kv_layout.hpp"

// Helpers below are compiled for the host and the GPU alike.
#if defined(__CUDACC__) || defined(__HIP__)
#define ORDO_ARGS_HD __host__ __device__
#else
#define ORDO_ARGS_HD
#endif

namespace ordo {

// How the matmul op computes (device.matmul). `exact`: the CPU reference's per-lane order, bitwise
// equal on every device. `tf32`: matrix units with TF32 operands and fp32 accumulation, k in a
// fixed ascending order with no split-K, so still batch-invariant and deterministic on one kind of
// GPU, but not equal to the CPU (gpu_check reports its error against the CPU).
enum class matmul_mode : uint8_t { exact, tf32 };
const char* to_string(matmul_mode m);

// How the matmul weights are stored (model.weight_dtype). `bf16`: W held as bf16 (half the bytes
// a decode step streams), multiplied on the matrix units with x rounded to bf16 and fp32
// accumulation, k in a fixed ascending order with no split-K: batch-invariant and deterministic on
// one kind of GPU, not equal to the CPU; device.matmul then has no say.
enum class weight_dtype : uint8_t { fp32, bf16 };
const char* to_string(weight_dtype d);

// y[r, 0:out] (+)= x[r, 0:in] · W[out × in]ᵀ. W is `w` (fp32), or `w_bf16` (the bits of bf16
// values) when the model's weights are bf16; exactly one of them is set.
struct matmul_args {
  const float* x = nullptr;
  int64_t ldx = 0;
  const float* w = nullptr;
  float* y = nullptr;
  int64_t ldy = 0;
  int32_t rows = 0, in = 0, out = 0;
  bool accumulate = false;
  const uint16_t* w_bf16 = nullptr;
};

// y = x / rms(x) * w, for each of `heads` vectors of `dim` floats side by side in a row (head h at
// h·dim; the per-head q/k norms of Qwen attention, the GDN's per-value-head output norm). With a
// gate: y = (x / rms(x) * w) * silu(gate) elementwise (Qwen's gated RMSNorm; gate rows laid out as
// x's). y may be x.
struct rmsnorm_args {
  const float* x = nullptr;
  int64_t ldx = 0;
  const float* w = nullptr;
  float* y = nullptr;
  int64_t ldy = 0;
  int32_t rows = 0, dim = 0;
  float eps = 1e-6f;
  int32_t heads = 1;
  const float* gate = nullptr;
  int64_t ldg = 0;
};

// x = x * sigmoid(gate) elementwise, in place (the output gate of Qwen's gated attention).
struct output_gate_args {
  float* x = nullptr;
  int64_t ldx = 0;
  const float* gate = nullptr;
  int64_t ldg = 0;
  int32_t rows = 0, dim = 0;
};

// out[r] = table[ids[r]]
struct embed_args {
  const int32_t* ids = nullptr;
  const float* table = nullptr;
  float* out = nullptr;
  int32_t rows = 0, dim = 0, table_rows = 0;
};

// Rotates `heads` heads of head_dim starting at x in place: NeoX pairs (i, i + rot/2) for
// i < rot/2 over the first rot = rotary_dim dims of each head (0: the whole head), the rest left
// as is; with the cos/sin table [max_positions × rot/2 × 2] built once on the host.
struct rope_args {
  float* x = nullptr;
  int64_t ldx = 0;
  const int32_t* positions = nullptr;
  const float* cos_sin = nullptr;
  int32_t rows = 0, heads = 0, head_dim = 0, max_positions = 0;
  int32_t rotary_dim = 0;
};
// Half the rotated dims of a head (host and GPU code).
ORDO_ARGS_HD inline int32_t rotary_half(const rope_args& a) { return (a.rotary_dim > 0 ? a.rotary_dim : a.head_dim) / 2; }

// out[r, i] = silu(gate[i]) * up[i] of row r of gate_up (2·dim floats). group = 0: gate is the
// first dim floats and up the next dim; group = g > 0 (dim a multiple of g): runs of g gate then g
// up, so gate[i] is at 2g·(i / g) + i % g and up[i] g floats after it (the model stores its gate/up
// weight rows so, which lets a GPU matmul tile hold a gate and its up together).
struct swiglu_args {
  const float* gate_up = nullptr;
  float* out = nullptr;
  int32_t rows = 0, dim = 0, group = 0;
};

// Offsets of gate[i] and up[i] in a row of a swiglu_args layout (host and GPU code).
ORDO_ARGS_HD inline int64_t swiglu_gate_at(int32_t i, int32_t group) {
  return group > 0 ? int64_t{2} * group * (i / group) + i % group : i;
}
ORDO_ARGS_HD inline int64_t swiglu_up_at(int32_t i, int32_t dim, int32_t group) {
  return group > 0 ? swiglu_gate_at(i, group) + group : int64_t{dim} + i;
}

// Writes rows of `heads × head_dim` floats into KV slots (slot < 0: skipped), converted to dtype;
// fp8 also writes one fp32 scale per (row, head) into scale_region.
struct kv_store_args {
  const float* src = nullptr;
  int64_t ld = 0;
  const int32_t* slot_mapping = nullptr;
  void* region = nullptr;
  float* scale_region = nullptr;
  elem_dtype dtype = elem_dtype::fp32;
  int32_t rows = 0, heads = 0, head_dim = 0;
};

// rope over the q and k heads, then kv_store of k and v, as one op: a GPU runs them as one
// kernel (one launch instead of three); the result is theirs in that order.
struct rope_kv_store_args {
  rope_args rope;
  kv_store_args k, v;
};

// Attention's fixed split of a row's position list: entries [c·S, (c+1)·S) form chunk c. Each chunk
// takes its own max m_c, Σ e^{s−m_c} and Σ e^{s−m_c}·v in list order; the chunks are then folded
// in ascending c with weights e^{m_c − M} (M the row's max). The split depends on the list alone,
// never on the batch or on how a prefill was cut, so it is batch- and split-invariant; a GPU may
// run the chunks in parallel and fold them after (kernels/cpu/attention.cpp is the reference).
inline constexpr int32_t attention_chunk = 64;

// Causal attention of each row over its request's positions [0, position], read from the arena
// through the block table (the rows of this batch were stored first).
struct paged_attention_args {
  device_batch batch;
  const float* q = nullptr;
  int64_t ldq = 0;
  const void* k = nullptr;
  const void* v = nullptr;
  const float* k_scale = nullptr;
  const float* v_scale = nullptr;
  elem_dtype dtype = elem_dtype::fp32;
  float* out = nullptr;
  int64_t ldo = 0;
  int32_t num_q_heads = 0, num_kv_heads = 0, head_dim = 0, block_size = 0;
  // Scratch for a GPU that runs the chunks in parallel: (head_dim + 2) floats per (row, head,
  // chunk). Used only when the batch's chunks fit; null: one block folds each row. The CPU folds
  // in place and ignores it.
  float* partials = nullptr;
  int64_t partials_floats = 0;
  // One counter per (row, head) record of partials (partials_floats / (head_dim + 2) of them), zero
  // between launches: the chunk that finishes last folds them and sets its counter back to zero.
  uint32_t* partial_counts = nullptr;
};

// For each row at position p with p % group == group - 1: compressed[group of p] = mean of the
// raw index keys of the group (read from the arena, so earlier steps' rows count).
struct index_compress_args {
  device_batch batch;
  const float* raw = nullptr;   // [slots × dim]
  float* compressed = nullptr;  // [slots / group × dim]
  int32_t dim = 0, block_size = 0, group = 4;
};

// Paged attention over the local window [p - window + 1, p] plus the top_k groups (entirely
// before the window) by index score index_q · compressed; ties go to the earlier group.
struct sparse_attention_args {
  paged_attention_args attn;
  const float* index_q = nullptr;
  int64_t ld_index_q = 0;
  const float* compressed = nullptr;
  int32_t index_dim = 0, window = 64, top_k = 4, group = 4;
};

// Zeroes the state slot of every request with req_reset_state == 1.
struct state_reset_args {
  device_batch batch;
  uint8_t* state_base = nullptr;
  size_t slot_bytes = 0;
  int32_t num_slots = 0;
};

// Causal depthwise conv of width `width` along each request's rows, continuing from the
// request's conv state ((width-1) × channels fp32, oldest first) and leaving the last inputs there.
struct causal_conv_args {
  device_batch batch;
  const float* x = nullptr;
  int64_t ldx = 0;
  float* y = nullptr;
  int64_t ldy = 0;
  const float* w = nullptr; // [channels × width], tap width-1 multiplies the current input
  uint8_t* state_base = nullptr;
  size_t slot_bytes = 0, state_offset = 0;
  int32_t num_slots = 0, channels = 0, width = 4;
  bool silu = false;
};

// Gated delta rule per value head, token by token. qkv row = [q (Hk×dk) | k (Hk×dk) | v (H×dv)]
// after conv, value head h reading key head h / (H / Hk) (Hk = key_heads, 0: H); abg row =
// [a (H) | b (H) | gate (H×dv)] raw projections. b = sigmoid(b), q,k L2-normalised (q also scaled
// by 1/sqrt(dk)). The presets (neg_exp_a null): decay = sigmoid(a + a_bias), out = (S q) ·
// silu(gate). Qwen (neg_exp_a set): decay = exp(neg_exp_a · softplus(a + a_bias)) with a_bias the
// dt_bias, out = S q (the gated RMSNorm that follows reads the gate).
struct gdn_args {
  device_batch batch;
  const float* qkv = nullptr;
  int64_t ld_qkv = 0;
  const float* abg = nullptr;
  int64_t ld_abg = 0;
  const float* a_bias = nullptr; // [H]
  float* out = nullptr;          // [rows × H×dv]
  int64_t ldo = 0;
  uint8_t* state_base = nullptr;
  size_t slot_bytes = 0, state_offset = 0; // state: H × dv × dk fp32, S[h][i][j]
  int32_t num_slots = 0, heads = 0, dk = 0, dv = 0;
  int32_t key_heads = 0;
  const float* neg_exp_a = nullptr; // [H]: −exp(A_log)
};

// PLE n-gram ids: for each row, bucket = hash(last n token ids of its request) % num_buckets,
// using the request's window (n-1 ids stored as id+1, 0 = before the start) and updating it.
struct ple_ngram_args {
  device_batch batch;
  int32_t* buckets = nullptr; // [rows]
  uint8_t* state_base = nullptr;
  size_t slot_bytes = 0, state_offset = 0;
  int32_t num_slots = 0, n = 3, num_buckets = 0;
  uint64_t hash_seed = 0;
};

// out[i] = x[rows[i]]
struct gather_rows_args {
  const float* x = nullptr;
  int64_t ldx = 0;
  const int32_t* row_ids = nullptr;
  float* out = nullptr;
  int32_t count = 0, dim = 0;
};

// sampled[i] from logits[i]: argmax (lowest id on ties) when temperature is 0, else a draw from
// softmax(logits / T) with a uniform hashed from (sample_seed[i], position of sample_rows[i]).
struct sample_args {
  device_batch batch;
  const float* logits = nullptr;
  int32_t* sampled = nullptr;
  int32_t vocab = 0;
};

// Page units ↔ a contiguous pinned host buffer (DESIGN §2.2: one kernel instead of one copy per
// field block). Arena side: unit u of field f is regions[f] + u·block_bytes[f]. Host side, with
// unit_bytes = sum(block_bytes) and prefix(f) = sum(block_bytes[0..f)), the bytes of (field f,
// i-th entry of unit_ids) sit at
//   unit-major    (segment_major = false): host + i·unit_bytes + prefix(f)
//     (per unit all fields; state images are laid over units this way, runtime/page_units.hpp)
//   segment-major (segment_major = true):  host + num_units·prefix(f) + i·block_bytes[f]
//     (per field all blocks in unit_ids order: the host tier's KV chunk object, runtime/kv_codec.hpp)
// Either way the host buffer is num_units × unit_bytes. A NEGATIVE unit id means "skip this
// block": gather leaves its host bytes unchanged, scatter leaves the arena unchanged, and the host
// offsets of the other entries do not move. Non-negative ids must be < the arena's num_blocks.
// regions, block_bytes and unit_ids are device memory; host is mapped pinned memory
// (device::alloc_host_pinned), addressed by the kernel through its mapping.
enum class unit_copy_direction : uint8_t { gather = 0 /* arena → host */, scatter = 1 /* host → arena */ };
struct unit_copy_args {
  uint8_t* const* regions = nullptr;     // [num_fields]
  const uint64_t* block_bytes = nullptr; // [num_fields]
  const int32_t* unit_ids = nullptr;     // [num_units]; < 0 = skip that entry
  uint8_t* host = nullptr;               // [num_units × unit_bytes]
  int32_t num_fields = 0, num_units = 0;
  uint64_t max_block_bytes = 0;          // max of block_bytes (sizes the launch grid)
  uint64_t unit_bytes = 0;               // sum of block_bytes: the host buffer is num_units × this
  unit_copy_direction direction = unit_copy_direction::gather;
  bool segment_major = false;            // host layout: see above
  // Optional (device memory): the kernel adds to *checksum (mod 2^64) the word terms
  // (kernels/object_checksum.hpp) of the whole host buffer as the copy leaves it, at word index
  // byte offset / 8: the bytes it moves, and a skipped entry's host bytes as they are. Every field's
  // block_bytes must then be a multiple of 8.
  uint64_t* checksum = nullptr;
  // The copy runs beside a step's forward (a save of units the step leaves alone). A GPU then
  // gathers it into a device buffer and lets the copy engine move it to the host (with unit_bytes
  // set; otherwise it paces the kernel with a few CTAs): at the link's full rate the kernel's
  // stores to host memory stall the forward's own memory accesses (BENCHMARKS.md, "Decode while
  // saves run").
  bool beside_forward = false;
  // A GPU's scatter (with unit_bytes set) lets the copy engine move the host buffer into a device
  // buffer and scatters from there: a kernel's reads of mapped host memory wait a round trip over
  // the link each, and gave 0.56 to 0.90 of a plain copy on different machines with the same code
  // (BENCHMARKS.md, "Loads staged through device memory"). direct_host keeps the kernel on the
  // mapped host buffer either way (bench offload's kernel rows measure both).
  bool direct_host = false;
};

} // namespace ordo
