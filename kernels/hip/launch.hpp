// Host launchers of the HIP kernels, one per model op (kernels/kernel_table.hpp), each enqueued
// on `stream`. Each computes what its kernels/cpu twin computes, in the same order per output
// element (kernels/hip/device_math.hpp), so results are bitwise equal to the CPU reference.
// Runs on: the enqueuing thread; throws std::invalid_argument for shapes the kernels do not cover.
#pragma once

#include "kernels/hip_compat.hpp"
#include "kernels/kernel_args.hpp"

namespace ordo::hip {

void matmul(const matmul_args& a, hipStream_t stream);
// The exact gate/up matmul with swiglu in its tiles' epilogue (sw.out written, mm.y not), where the
// call takes the 64 × 64 lane tiles and sw.group == 8; false, enqueuing nothing, elsewhere.
bool matmul_swiglu(const matmul_args& mm, const swiglu_args& sw, hipStream_t stream);
// device.matmul = "tf32" (kernels/hip/matmul_tf32.hip): matrix units, batch-invariant, not equal to
// the CPU. Only where ORDO_HAS_TF32_MMA; elsewhere it throws std::invalid_argument.
void matmul_tf32(const matmul_args& a, hipStream_t stream);
bool has_tf32_matmul();
// Device memory a kernel table keeps per stream for a launcher's intermediate values; the
// launcher grows it (after synchronizing that stream) and the table frees it.
struct device_scratch {
  void* ptr = nullptr;
  size_t bytes = 0;
  void* reserve(size_t need, hipStream_t stream);
  void release();
};
// model.weight_dtype = "bf16" (kernels/hip/matmul_bf16.hip): a.w_bf16 on the matrix units,
// batch-invariant, not equal to the CPU. Only where ORDO_HAS_BF16_MMA; elsewhere it throws.
// `x_bf16`: where a many-row call keeps x rounded to bf16 (the stream's own scratch).
void matmul_bf16(const matmul_args& a, hipStream_t stream, device_scratch& x_bf16);
bool has_bf16_matmul();
void rmsnorm(const rmsnorm_args& a, hipStream_t stream);
void output_gate(const output_gate_args& a, hipStream_t stream);
void embed(const embed_args& a, hipStream_t stream);
void rope(const rope_args& a, hipStream_t stream);
void swiglu(const swiglu_args& a, hipStream_t stream);
void kv_store(const kv_store_args& a, hipStream_t stream);
void rope_kv_store(const rope_kv_store_args& a, hipStream_t stream);
void paged_attention(const paged_attention_args& a, hipStream_t stream);
void index_compress(const index_compress_args& a, hipStream_t stream);
void sparse_attention(const sparse_attention_args& a, hipStream_t stream);
void state_reset(const state_reset_args& a, hipStream_t stream);
void causal_conv(const causal_conv_args& a, hipStream_t stream);
void gdn(const gdn_args& a, hipStream_t stream);
void ple_ngram(const ple_ngram_args& a, hipStream_t stream);
void gather_rows(const gather_rows_args& a, hipStream_t stream);
void sample(const sample_args& a, hipStream_t stream);
void unit_copy(const unit_copy_args& a, hipStream_t stream);
void unit_copy_batch(const unit_copy_args* a, size_t n, hipStream_t stream);
// Frees the staging buffer of `stream`'s saves (unit_copy.hip); call once the stream is idle.
void release_save_staging(hipStream_t stream);

} // namespace ordo::hip
