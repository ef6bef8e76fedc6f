// One row's rotary embedding from the host-built cos/sin table, one thread per rotated pair (the
// twin of kernels/cpu/rope.cpp); shared by the rope kernel and the fused rope + kv_store kernel.
#pragma once

#include "kernels/hip/paging.hpp"
#include "kernels/kernel_args.hpp"

namespace ordo::hip {

__device__ inline void rope_row(const rope_args& a, int32_t r) {
  const int32_t half = rotary_half(a);
  const int32_t p = a.positions[r];
  if (p < 0 || p >= a.max_positions) kernel_fail("rope: position beyond max_context", p);
  const float* cs = a.cos_sin + static_cast<int64_t>(p) * half * 2;
  for (int32_t t = threadIdx.x; t < a.heads * half; t += blockDim.x) {
    const int32_t h = t / half, i = t % half;
    float* x = a.x + r * a.ldx + h * a.head_dim;
    const float c = cs[2 * i], s = cs[2 * i + 1];
    const float x0 = x[i], x1 = x[i + half];
    x[i] = x0 * c - x1 * s;
    x[i + half] = x0 * s + x1 * c;
  }
}

} // namespace ordo::hip
