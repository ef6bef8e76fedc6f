// Sampling: gather of the sample rows, then one thread per sample runs the CPU's sample_one
// (sequential argmax, softmax sum and cumulative walk: the vocabulary is small).
#include "kernels/hip/device_math.hpp"
#include "kernels/hip/launch.hpp"
#include "kernels/hip/paging.hpp"

namespace ordo::hip {
namespace {

__global__ void gather_rows_kernel(gather_rows_args a) {
  const int32_t i = blockIdx.x;
  const float* src = a.x + a.row_ids[i] * a.ldx;
  float* dst = a.out + static_cast<int64_t>(i) * a.dim;
  for (int32_t e = threadIdx.x; e < a.dim; e += blockDim.x) dst[e] = src[e];
}

__device__ uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

__device__ int32_t sample_one(const float* logits, int32_t vocab, float temperature, uint64_t seed, int32_t position) {
  int32_t best = 0;
  for (int32_t j = 1; j < vocab; ++j)
    if (logits[j] > logits[best]) best = j;
  if (!(temperature > 0.0f)) return best;
  const float m = logits[best];
  float total = 0.0f;
  for (int32_t j = 0; j < vocab; ++j) total += gpu::expf_glibc((logits[j] - m) / temperature);
  const uint64_t h = mix64(mix64(mix64(seed) ^ static_cast<uint64_t>(static_cast<uint32_t>(position))) ^ 0x73616d706c65ULL);
  const float u = static_cast<float>(static_cast<uint32_t>(h >> 40)) * (1.0f / 16777216.0f) * total;
  float cum = 0.0f;
  int32_t last_nonzero = best;
  for (int32_t j = 0; j < vocab; ++j) {
    const float p = gpu::expf_glibc((logits[j] - m) / temperature);
    if (p > 0.0f) last_nonzero = j;
    cum += p;
    if (cum > u) return j;
  }
  return last_nonzero;
}

__global__ void sample_kernel(sample_args a) {
  const int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= a.batch.num_samples) return;
  const int32_t row = a.batch.sample_rows[i];
  a.sampled[i] = sample_one(a.logits + static_cast<int64_t>(i) * a.vocab, a.vocab, a.batch.sample_temperature[i],
                            a.batch.sample_seed[i], a.batch.positions[row]);
}

} // namespace

void gather_rows(const gather_rows_args& a, hipStream_t stream) {
  if (a.count <= 0) return;
  gather_rows_kernel<<<a.count, 128, 0, stream>>>(a);
  ORDO_HIP_LAUNCHED();
}

void sample(const sample_args& a, hipStream_t stream) {
  if (a.batch.num_samples <= 0) return;
  sample_kernel<<<blocks_for(a.batch.num_samples, 32), 32, 0, stream>>>(a);
  ORDO_HIP_LAUNCHED();
}

} // namespace ordo::hip
