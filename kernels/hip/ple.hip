// PLE n-gram buckets: one thread per request walks its rows, hashing with the CPU's mix64 and
// updating the request's id window (integer work: bitwise equal by construction).
#include "kernels/hip/device_math.hpp"
#include "kernels/hip/launch.hpp"
#include "kernels/hip/paging.hpp"

namespace ordo::hip {
namespace {

__device__ uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

__global__ void ple_ngram_kernel(ple_ngram_args a) {
  const int32_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= a.batch.num_reqs) return;
  const int32_t keep = a.n - 1;
  int32_t* window = reinterpret_cast<int32_t*>(state_slot(a.batch, r, a.state_base, a.slot_bytes, a.num_slots) + a.state_offset);
  for (int32_t row = a.batch.req_token_start[r]; row < a.batch.req_token_start[r + 1]; ++row) {
    const int32_t cur = a.batch.token_ids[row] + 1;
    uint64_t h = a.hash_seed;
    for (int32_t j = 0; j < keep; ++j) h = mix64(h ^ static_cast<uint32_t>(window[j]));
    h = mix64(h ^ static_cast<uint32_t>(cur));
    a.buckets[row] = static_cast<int32_t>(h % static_cast<uint64_t>(a.num_buckets));
    for (int32_t j = 0; j + 1 < keep; ++j) window[j] = window[j + 1];
    if (keep > 0) window[keep - 1] = cur;
  }
}

} // namespace

void ple_ngram(const ple_ngram_args& a, hipStream_t stream) {
  if (a.batch.num_reqs <= 0) return;
  ple_ngram_kernel<<<blocks_for(a.batch.num_reqs, 64), 64, 0, stream>>>(a);
  ORDO_HIP_LAUNCHED();
}

} // namespace ordo::hip
