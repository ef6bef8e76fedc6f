// Embedding row gather (token embeddings, PLE n-gram tables): one block per row.
#include "kernels/hip/launch.hpp"
#include "kernels/hip/paging.hpp"

namespace ordo::hip {
namespace {

__global__ void embed_kernel(embed_args a) {
  const int32_t r = blockIdx.x;
  const int32_t id = a.ids[r];
  if (id < 0 || id >= a.table_rows) kernel_fail("embedding id out of range", id);
  const float* src = a.table + static_cast<int64_t>(id) * a.dim;
  float* dst = a.out + static_cast<int64_t>(r) * a.dim;
  for (int32_t i = threadIdx.x; i < a.dim; i += blockDim.x) dst[i] = src[i];
}

} // namespace

void embed(const embed_args& a, hipStream_t stream) {
  if (a.rows <= 0) return;
  embed_kernel<<<a.rows, 128, 0, stream>>>(a);
  ORDO_HIP_LAUNCHED();
}

} // namespace ordo::hip
