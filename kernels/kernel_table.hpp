// The model's ops as work on a device stream (DESIGN §2.2): one virtual per op. The CPU table
// (kernels/cpu/cpu_kernel_table.hpp) enqueues the reference kernels of kernels/cpu as host work; a
// GPU table (kernels/hip/hip_device.hip) launches kernels. Built in kernels/: runtime/ code uses
// this interface and make_kernel_table; of runtime/ it needs only the device (runtime/device.hpp).
// Runs on: the thread that enqueues the forward (the model runner's); the ops run on the stream.
#pragma once

#include <memory>

#include "kernels/kernel_args.hpp"
#include "runtime/device.hpp"

namespace ordo {

struct kernel_options {
  matmul_mode matmul = matmul_mode::exact;
  weight_dtype weights = weight_dtype::fp32; // bf16: matmuls take w_bf16 on the matrix units
};

class kernel_table {
public:
  virtual ~kernel_table() = default;

  virtual void matmul(stream_kind s, const matmul_args& a) = 0;
  virtual void rmsnorm(stream_kind s, const rmsnorm_args& a) = 0;
  virtual void output_gate(stream_kind s, const output_gate_args& a) = 0;
  virtual void embed(stream_kind s, const embed_args& a) = 0;
  virtual void rope(stream_kind s, const rope_args& a) = 0;
  virtual void swiglu(stream_kind s, const swiglu_args& a) = 0;
  // Fused: the gate/up matmul into mm.y, then swiglu of sw.gate_up (== mm.y) into sw.out. The
  // default enqueues both; a GPU table may instead write sw.out from the matmul's tiles, leaving
  // mm.y unwritten, with the same bits.
  virtual void matmul_swiglu(stream_kind s, const matmul_args& mm, const swiglu_args& sw) {
    matmul(s, mm);
    swiglu(s, sw);
  }
  virtual void kv_store(stream_kind s, const kv_store_args& a) = 0;
  // Fused: rope, then kv_store of k, then of v. The default enqueues the three ops.
  virtual void rope_kv_store(stream_kind s, const rope_kv_store_args& a) {
    rope(s, a.rope);
    kv_store(s, a.k);
    kv_store(s, a.v);
  }
  virtual void paged_attention(stream_kind s, const paged_attention_args& a) = 0;
  virtual void index_compress(stream_kind s, const index_compress_args& a) = 0;
  virtual void sparse_attention(stream_kind s, const sparse_attention_args& a) = 0;
  virtual void state_reset(stream_kind s, const state_reset_args& a) = 0;
  virtual void causal_conv(stream_kind s, const causal_conv_args& a) = 0;
  virtual void gdn(stream_kind s, const gdn_args& a) = 0;
  virtual void ple_ngram(stream_kind s, const ple_ngram_args& a) = 0;
  virtual void gather_rows(stream_kind s, const gather_rows_args& a) = 0;
  virtual void sample(stream_kind s, const sample_args& a) = 0;
  // Gather (arena → host) or scatter (host → arena) of page units, per a.direction.
  virtual void unit_copy(stream_kind s, const unit_copy_args& a) = 0;
  // The n copies a[0..n) in order, as one step enqueues its loads or its saves. A GPU table moves
  // them in as few launches as it can; the default enqueues one unit_copy each.
  virtual void unit_copy_batch(stream_kind s, const unit_copy_args* a, size_t n) {
    for (size_t i = 0; i < n; ++i)
      unit_copy(s, a[i]);
  }
};

// The table for `dev`: the CPU reference table when dev.runs_host_work(), else the one of the GPU
// backend registered through runtime/device_registry.hpp; throws std::invalid_argument for a
// device without a kernel table yet, or one that cannot honour `options` (tf32 needs a GPU with
// TF32 matrix units, bf16 weights one with bf16 matrix units).
std::unique_ptr<kernel_table> make_kernel_table(device& dev, const kernel_options& options = {});

} // namespace ordo
