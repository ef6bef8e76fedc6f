// Page-unit gather / scatter between the arena and mapped pinned host memory (DESIGN §2.2):
// one launch moves every field block of every unit, the kernel's loads or stores crossing the
// link directly, so small field blocks cost no per-copy overhead. Byte-exact, like cpu::unit_copy,
// in both host layouts (unit-major, segment-major) and skipping negative unit ids.
#include <stdexcept>

#include "kernels/hip/launch.hpp"
#include "kernels/hip/paging.hpp" // ORDO_HIP_LAUNCHED

namespace ordo::hip {
namespace {

constexpr int threads = 256;
constexpr int vecs_per_thread = 4;                                  // 16-byte vectors in flight
constexpr uint64_t chunk_bytes = uint64_t{threads} * vecs_per_thread * 16; // 16 KiB per CTA

// Grid: x = (unit index i, field f) pair, y = 16 KiB chunk of the field block. Pairs are numbered
// in host order (unit-major: i then f; segment-major: f then i), so neighbouring CTAs touch
// neighbouring host bytes. A skipped (negative) id's CTAs return before touching memory.
__global__ void unit_copy_kernel(unit_copy_args a, uint8_t* host) {
  const int32_t pair = blockIdx.x;
  const int32_t i = a.segment_major ? pair % a.num_units : pair / a.num_fields;
  const int32_t f = a.segment_major ? pair / a.num_units : pair % a.num_fields;
  const uint64_t bb = a.block_bytes[f];
  const uint64_t begin = uint64_t{blockIdx.y} * chunk_bytes;
  if (begin >= bb) return;
  const int32_t u = a.unit_ids[i];
  if (u < 0) return; // skipped entry
  const uint64_t end = begin + chunk_bytes < bb ? begin + chunk_bytes : bb;
  uint64_t unit_bytes = 0, before = 0; // before: sum of block_bytes of the fields before f
  for (int32_t g = 0; g < a.num_fields; ++g) {
    const uint64_t b = a.block_bytes[g];
    if (g < f) before += b;
    unit_bytes += b;
  }
  uint8_t* arena = a.regions[f] + static_cast<uint64_t>(u) * bb;
  const uint64_t host_offset = a.segment_major
                                   ? static_cast<uint64_t>(a.num_units) * before + static_cast<uint64_t>(i) * bb
                                   : static_cast<uint64_t>(i) * unit_bytes + before;
  uint8_t* hbuf = host + host_offset;
  const bool gather = a.direction == unit_copy_direction::gather;
  const uint8_t* src = gather ? arena : hbuf;
  uint8_t* dst = gather ? hbuf : arena;
  const bool aligned = ((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) & 15) == 0;
  uint64_t pos = begin;
  if (aligned && (end - begin) == chunk_bytes) {
    // Full aligned chunk: every thread issues its loads before its stores (latency over PCIe).
    const uint4* s = reinterpret_cast<const uint4*>(src + begin);
    uint4* d = reinterpret_cast<uint4*>(dst + begin);
    uint4 v[vecs_per_thread];
#pragma unroll
    for (int k = 0; k < vecs_per_thread; ++k) v[k] = s[k * threads + threadIdx.x];
#pragma unroll
    for (int k = 0; k < vecs_per_thread; ++k) d[k * threads + threadIdx.x] = v[k];
    return;
  }
  if (aligned) {
    const uint64_t nvec = (end - begin) / 16;
    const uint4* s = reinterpret_cast<const uint4*>(src + begin);
    uint4* d = reinterpret_cast<uint4*>(dst + begin);
    for (uint64_t k = threadIdx.x; k < nvec; k += threads) d[k] = s[k];
    pos = begin + nvec * 16;
  }
  for (uint64_t k = pos + threadIdx.x; k < end; k += threads) dst[k] = src[k];
}

} // namespace

void unit_copy(const unit_copy_args& a, hipStream_t stream) {
  if (a.num_units <= 0 || a.num_fields <= 0 || a.max_block_bytes == 0) return;
  const uint64_t pairs = static_cast<uint64_t>(a.num_units) * static_cast<uint64_t>(a.num_fields);
  const uint64_t chunks = (a.max_block_bytes + chunk_bytes - 1) / chunk_bytes;
  if (pairs > 0x7fffffffu || chunks > 65535)
    throw std::invalid_argument("unit_copy: too many units × fields or too large a field block");
  // The kernel addresses the host buffer through its device mapping (equal to the host pointer
  // under unified addressing, which the NVIDIA runtime gives every 64-bit process).
  void* mapped = nullptr;
  if (hipHostGetDevicePointer(&mapped, a.host, 0) != hipSuccess) {
    (void)hipGetLastError();
    mapped = a.host;
  }
  dim3 grid(static_cast<unsigned>(pairs), static_cast<unsigned>(chunks));
  unit_copy_kernel<<<grid, threads, 0, stream>>>(a, static_cast<uint8_t*>(mapped));
  ORDO_HIP_LAUNCHED();
}

} // namespace ordo::hip
