// Causal depthwise conv with per-request state: one thread per (request, channel) walks the
// request's rows in order, exactly as the CPU reference does for that channel.
#include "kernels/hip/device_math.hpp"
#include "kernels/hip/launch.hpp"
#include "kernels/hip/paging.hpp"

namespace ordo::hip {
namespace {

constexpr int threads = 128;

__global__ void causal_conv_kernel(causal_conv_args a) {
  const int32_t r = blockIdx.y, ch = blockIdx.x * threads + threadIdx.x;
  const int32_t w = a.width, c = a.channels;
  if (ch >= c) return;
  float* st = reinterpret_cast<float*>(state_slot(a.batch, r, a.state_base, a.slot_bytes, a.num_slots) + a.state_offset);
  const float* wc = a.w + static_cast<int64_t>(ch) * w;
  for (int32_t row = a.batch.req_token_start[r]; row < a.batch.req_token_start[r + 1]; ++row) {
    const float xv = a.x[row * a.ldx + ch];
    float acc = 0.0f;
    for (int32_t j = 0; j < w - 1; ++j) acc += wc[j] * st[j * c + ch];
    acc += wc[w - 1] * xv;
    for (int32_t j = 0; j + 1 < w - 1; ++j) st[j * c + ch] = st[(j + 1) * c + ch];
    if (w > 1) st[(w - 2) * c + ch] = xv;
    a.y[row * a.ldy + ch] = a.silu ? gpu::silu(acc) : acc;
  }
}

} // namespace

void causal_conv(const causal_conv_args& a, hipStream_t stream) {
  if (a.batch.num_reqs <= 0 || a.channels <= 0) return;
  causal_conv_kernel<<<dim3(blocks_for(a.channels, threads), a.batch.num_reqs), threads, 0, stream>>>(a);
  ORDO_HIP_LAUNCHED();
}

} // namespace ordo::hip
