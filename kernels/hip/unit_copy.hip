// Page-unit gather / scatter between the arena and mapped pinned host memory (DESIGN §2.2):
// one launch moves every field block of every unit (unit_copy_batch: of every copy of a step's
// loads or saves), so small field blocks and small objects cost no per-copy overhead. A save's
// stores cross the link directly; a save beside a forward is staged instead: the kernel gathers
// into device memory and the copy engine moves the bytes to the host, so no CTA sits on stores
// crossing the link while the forward runs. A load is staged the other way: the copy engine moves
// each object into device memory and the kernel scatters from there, since a kernel's reads of
// host memory each wait a round trip over the link. Byte-exact, like cpu::unit_copy,
// in both host layouts (unit-major, segment-major) and skipping negative unit ids. A launch may
// also sum the object checksum's terms of the host buffer from the bytes it moves.
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "kernels/hip/launch.hpp"
#include "kernels/hip/paging.hpp" // ORDO_HIP_LAUNCHED
#include "kernels/object_checksum.hpp"

namespace ordo::hip {
namespace {

constexpr int threads = 256;
constexpr int vecs_per_thread = 4;                                  // 16-byte vectors in flight
constexpr uint64_t chunk_bytes = uint64_t{threads} * vecs_per_thread * 16; // 16 KiB per CTA

// The checksum terms of the 16-byte vector at host byte offset `at` (a multiple of 8).
__device__ inline uint64_t vec_terms(const uint4& v, uint64_t at) {
  const uint64_t w0 = v.x | static_cast<uint64_t>(v.y) << 32, w1 = v.z | static_cast<uint64_t>(v.w) << 32;
  return checksum_term(w0, at / 8) + checksum_term(w1, at / 8 + 1);
}

// The block's terms summed in shared memory and added to *total by thread 0 (every thread calls it).
__device__ void add_checksum(uint64_t* total, uint64_t sum) {
  __shared__ uint64_t red[threads];
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = threads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) red[threadIdx.x] += red[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(reinterpret_cast<unsigned long long*>(total), static_cast<unsigned long long>(red[0]));
}

// One task of copy `a`: (unit index i, field f) pair `pair`, the 16 KiB chunk `chunk` of its field
// block. Pairs are numbered in host order (unit-major: i then f; segment-major: f then i) and a
// pair's chunks are consecutive tasks, so neighbouring tasks touch neighbouring host bytes. A
// skipped (negative) id's tasks return before touching memory, or, when the copy sums the
// checksum, read their host bytes for it and write nothing. Every thread of the CTA calls it with
// the same arguments. `staged` is device memory laid out like the host buffer: a staged gather
// writes there instead of to `host`, and copies a skipped entry's host bytes there too, so that
// the copy engine's transfer of the whole staged buffer leaves them as they were; a staged
// scatter reads there (the copy engine filled it from `host` before the launch).
__device__ void copy_pair(const unit_copy_args& a, uint8_t* host, uint8_t* staged, int32_t pair, uint32_t chunk) {
  const int32_t i = a.segment_major ? pair % a.num_units : pair / a.num_fields;
  const int32_t f = a.segment_major ? pair / a.num_units : pair % a.num_fields;
  const uint64_t bb = a.block_bytes[f];
  const uint64_t begin = uint64_t{chunk} * chunk_bytes;
  if (begin >= bb) return;
  const int32_t u = a.unit_ids[i];
  const bool gather = a.direction == unit_copy_direction::gather;
  if (u < 0 && !a.checksum && !(staged && gather)) return; // skipped entry
  if (a.checksum && (bb & 7)) kernel_fail("unit_copy: a checksummed field block is not a multiple of 8 bytes", bb);
  const uint64_t end = begin + chunk_bytes < bb ? begin + chunk_bytes : bb;
  uint64_t unit_bytes = 0, before = 0; // before: sum of block_bytes of the fields before f
  for (int32_t g = 0; g < a.num_fields; ++g) {
    const uint64_t b = a.block_bytes[g];
    if (g < f) before += b;
    unit_bytes += b;
  }
  const uint64_t host_offset = a.segment_major
                                   ? static_cast<uint64_t>(a.num_units) * before + static_cast<uint64_t>(i) * bb
                                   : static_cast<uint64_t>(i) * unit_bytes + before;
  uint8_t* hbuf = host + host_offset;
  uint8_t* sbuf = staged ? staged + host_offset : hbuf; // where a gather writes and a scatter reads
  uint8_t* arena = u < 0 ? nullptr : a.regions[f] + static_cast<uint64_t>(u) * bb;
  const uint8_t* src = gather ? (arena ? arena : hbuf) : sbuf;
  uint8_t* dst = gather ? (arena || staged ? sbuf : nullptr) : arena; // null: read for the checksum only
  const bool aligned = ((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) & 15) == 0;
  const uint64_t at = host_offset + begin; // host offset of src[begin]
  uint64_t sum = 0;
  if (aligned && (end - begin) == chunk_bytes) {
    // Full aligned chunk: every thread issues its loads before its stores (latency over PCIe).
    const uint4* s = reinterpret_cast<const uint4*>(src + begin);
    uint4* d = dst ? reinterpret_cast<uint4*>(dst + begin) : nullptr;
    uint4 v[vecs_per_thread];
#pragma unroll
    for (int k = 0; k < vecs_per_thread; ++k) v[k] = s[k * threads + threadIdx.x];
    if (dst) {
#pragma unroll
      for (int k = 0; k < vecs_per_thread; ++k) d[k * threads + threadIdx.x] = v[k];
    }
    if (a.checksum) {
#pragma unroll
      for (int k = 0; k < vecs_per_thread; ++k) sum += vec_terms(v[k], at + 16 * (k * threads + threadIdx.x));
    }
  } else {
    uint64_t pos = begin;
    if (aligned) {
      const uint64_t nvec = (end - begin) / 16;
      const uint4* s = reinterpret_cast<const uint4*>(src + begin);
      uint4* d = dst ? reinterpret_cast<uint4*>(dst + begin) : nullptr;
      for (uint64_t k = threadIdx.x; k < nvec; k += threads) {
        const uint4 v = s[k];
        if (dst) d[k] = v;
        if (a.checksum) sum += vec_terms(v, at + 16 * k);
      }
      pos = begin + nvec * 16;
    }
    if (dst)
      for (uint64_t k = pos + threadIdx.x; k < end; k += threads) dst[k] = src[k];
    if (a.checksum) // whole words: bb and pos are multiples of 8
      for (uint64_t k = pos + 8 * threadIdx.x; k < end; k += 8 * threads) {
        uint64_t w = 0;
        for (int b = 0; b < 8; ++b) w |= static_cast<uint64_t>(src[k + b]) << (8 * b);
        sum += checksum_term(w, (host_offset + k) / 8);
      }
  }
  if (a.checksum) add_checksum(a.checksum, sum);
}

// A launch's tasks are pairs × chunks (task t: pair t / chunks, chunk t % chunks). A CTA takes
// tasks blockIdx.x, + gridDim.x, ...: the grid is capped (copy_ctas), and a copy beside a forward
// gets few CTAs, so its stores to host memory leave the forward's memory accesses room.
__global__ void unit_copy_kernel(unit_copy_args a, uint8_t* host, uint32_t chunks, uint64_t tasks) {
  for (uint64_t t = blockIdx.x; t < tasks; t += gridDim.x)
    copy_pair(a, host, nullptr, static_cast<int32_t>(t / chunks), static_cast<uint32_t>(t % chunks));
}

// Up to max_batch copies that share regions, fields, direction and pacing in one launch: the pairs
// run over those of copy 0, then of copy 1, ... (first_pair: each copy's first); every copy keeps
// its own unit ids, host buffer (through its device mapping), layout and checksum.
constexpr int max_batch = 32;
struct batch_entry {
  const int32_t* unit_ids;
  uint8_t* host;   // mapped
  uint8_t* staged; // a staged copy's device buffer, else null
  uint64_t* checksum;
  int32_t num_units, first_pair;
  bool segment_major;
};
struct batch_params {
  unit_copy_args common; // regions, block_bytes, num_fields, direction
  int32_t count;
  batch_entry e[max_batch];
};

__global__ void unit_copy_batch_kernel(batch_params p, uint32_t chunks, uint64_t tasks) {
  for (uint64_t t = blockIdx.x; t < tasks; t += gridDim.x) {
    const int32_t pair = static_cast<int32_t>(t / chunks);
    int32_t k = 0;
    while (k + 1 < p.count && pair >= p.e[k + 1].first_pair) ++k;
    const batch_entry& e = p.e[k];
    unit_copy_args a = p.common;
    a.unit_ids = e.unit_ids, a.num_units = e.num_units, a.checksum = e.checksum, a.segment_major = e.segment_major;
    copy_pair(a, e.host, e.staged, pair - e.first_pair, static_cast<uint32_t>(t % chunks));
  }
}

// The kernel addresses a host buffer through its device mapping (equal to the host pointer under
// unified addressing, which the NVIDIA runtime gives every 64-bit process).
uint8_t* mapped(uint8_t* host) {
  void* m = nullptr;
  if (hipHostGetDevicePointer(&m, host, 0) != hipSuccess) {
    (void)hipGetLastError();
    return host;
  }
  return static_cast<uint8_t*>(m);
}

uint64_t checked_chunks(uint64_t pairs, uint64_t max_block_bytes) {
  const uint64_t chunks = (max_block_bytes + chunk_bytes - 1) / chunk_bytes;
  if (pairs > 0x7fffffffu || chunks > 65535)
    throw std::invalid_argument("unit_copy: too many units × fields or too large a field block");
  return chunks;
}

// CTAs for `tasks` tasks: at most ctas_per_sm per multiprocessor, enough for the link's rate in
// either direction, or paced_ctas for an unstaged copy beside a forward (about 45 GB/s on the
// H200, where a decode step at batch 1 ran 1.18× its time alone beside a gather at the full
// 51 GB/s and 1.05× beside one of 8 CTAs; measured in BENCHMARKS.md).
// ORDO_PACED_CTAS=n overrides the 8 for a sweep on another card (tools/gpu_speed.sh).
constexpr unsigned ctas_per_sm = 2, default_paced_ctas = 8;
unsigned paced_ctas() {
  static const unsigned n = [] {
    const char* v = std::getenv("ORDO_PACED_CTAS");
    const long asked = v != nullptr ? std::strtol(v, nullptr, 10) : 0;
    return asked >= 1 && asked <= 1024 ? static_cast<unsigned>(asked) : default_paced_ctas;
  }();
  return n;
}
unsigned copy_ctas(uint64_t tasks, bool beside_forward) {
  static const uint64_t full = [] {
    int device = 0, sms = 0;
    ORDO_HIP_CHECK(hipGetDevice(&device));
    ORDO_HIP_CHECK(hipDeviceGetAttribute(&sms, hipDeviceAttributeMultiprocessorCount, device));
    return static_cast<uint64_t>(sms > 0 ? sms : 1) * ctas_per_sm;
  }();
  const uint64_t cap = beside_forward ? paced_ctas() : full;
  return static_cast<unsigned>(tasks < cap ? tasks : cap);
}

// A stream's staging buffer for staged gathers and scatters, grown to the largest launch. Only
// that stream's launches and copies use it, in stream order, so growing it waits for the stream
// alone.
constexpr uint64_t max_staged_bytes = uint64_t{1} << 30; // larger launches use the host buffer directly
struct staging_buffer {
  uint8_t* p = nullptr;
  uint64_t bytes = 0;
};
struct staging_table {
  std::mutex mu;
  std::unordered_map<hipStream_t, staging_buffer> buffers;
};
// Never destroyed: a device may be torn down during static destruction.
staging_table& staging() {
  static auto* t = new staging_table;
  return *t;
}

// Null where device memory cannot hold it (the arena may fill the card): the launch then stores to
// the host directly.
uint8_t* staging_for(hipStream_t stream, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(staging().mu);
  staging_buffer& b = staging().buffers[stream];
  if (b.bytes < bytes) {
    ORDO_HIP_CHECK(hipStreamSynchronize(stream));
    if (b.p != nullptr) ORDO_HIP_CHECK(hipFree(b.p));
    b = staging_buffer{};
    void* p = nullptr;
    if (hipMalloc(&p, bytes) != hipSuccess) {
      (void)hipGetLastError();
      return nullptr;
    }
    b.p = static_cast<uint8_t*>(p), b.bytes = bytes;
  }
  return b.p;
}

bool same_launch(const unit_copy_args& a, const unit_copy_args& b) {
  return a.regions == b.regions && a.block_bytes == b.block_bytes && a.num_fields == b.num_fields &&
         a.direction == b.direction && a.beside_forward == b.beside_forward && a.unit_bytes == b.unit_bytes &&
         a.direct_host == b.direct_host;
}

} // namespace

void unit_copy(const unit_copy_args& a, hipStream_t stream) {
  if (a.num_units <= 0 || a.num_fields <= 0 || a.max_block_bytes == 0) return;
  const uint64_t pairs = static_cast<uint64_t>(a.num_units) * static_cast<uint64_t>(a.num_fields);
  const uint64_t chunks = checked_chunks(pairs, a.max_block_bytes), tasks = pairs * chunks;
  unit_copy_kernel<<<copy_ctas(tasks, a.beside_forward), threads, 0, stream>>>(a, mapped(a.host), static_cast<uint32_t>(chunks), tasks);
  ORDO_HIP_LAUNCHED();
}

void unit_copy_batch(const unit_copy_args* a, size_t n, hipStream_t stream) {
  size_t i = 0;
  while (i < n) {
    batch_params p{};
    p.common = a[i];
    uint8_t* hosts[max_batch] = {}; // the copies' host pointers, for the copy engine
    uint64_t pairs = 0, max_block_bytes = 0;
    for (; i < n && p.count < max_batch && same_launch(a[i], p.common); ++i) {
      if (a[i].num_units <= 0 || a[i].num_fields <= 0 || a[i].max_block_bytes == 0) continue; // nothing to move
      hosts[p.count] = a[i].host;
      batch_entry& e = p.e[p.count++];
      e.unit_ids = a[i].unit_ids, e.host = mapped(a[i].host), e.checksum = a[i].checksum;
      e.num_units = a[i].num_units, e.first_pair = static_cast<int32_t>(pairs);
      e.segment_major = a[i].segment_major;
      pairs += static_cast<uint64_t>(a[i].num_units) * static_cast<uint64_t>(a[i].num_fields);
      max_block_bytes = a[i].max_block_bytes > max_block_bytes ? a[i].max_block_bytes : max_block_bytes;
    }
    if (p.count == 0) continue;
    const uint64_t chunks = checked_chunks(pairs, max_block_bytes), tasks = pairs * chunks;
    // A staged launch gives each copy's host bytes their offset in the stream's staging buffer.
    // A save beside a forward is gathered there by the whole capped grid, then moved by the copy
    // engine; a load's objects are moved there by the copy engine, then scattered.
    const bool gather = p.common.direction == unit_copy_direction::gather;
    const auto bytes_of = [&](int32_t k) { return static_cast<uint64_t>(p.e[k].num_units) * p.common.unit_bytes; };
    uint64_t staged_bytes = 0;
    for (int32_t k = 0; k < p.count; ++k) staged_bytes += bytes_of(k);
    uint8_t* const buf = (!gather || p.common.beside_forward) && !p.common.direct_host && p.common.unit_bytes > 0 &&
                                 staged_bytes <= max_staged_bytes
                             ? staging_for(stream, staged_bytes)
                             : nullptr;
    const bool staged = buf != nullptr;
    if (staged) {
      for (int32_t k = 0, at = 0; k < p.count; at += p.e[k].num_units, ++k) {
        p.e[k].staged = buf + static_cast<uint64_t>(at) * p.common.unit_bytes;
        if (!gather)
          ORDO_HIP_CHECK(hipMemcpyAsync(p.e[k].staged, hosts[k], bytes_of(k), hipMemcpyHostToDevice, stream));
      }
    }
    const unsigned ctas = copy_ctas(tasks, p.common.beside_forward && !staged);
    unit_copy_batch_kernel<<<ctas, threads, 0, stream>>>(p, static_cast<uint32_t>(chunks), tasks);
    ORDO_HIP_LAUNCHED();
    if (staged && gather)
      for (int32_t k = 0; k < p.count; ++k)
        ORDO_HIP_CHECK(hipMemcpyAsync(hosts[k], p.e[k].staged, bytes_of(k), hipMemcpyDeviceToHost, stream));
  }
}

void release_save_staging(hipStream_t stream) {
  std::lock_guard<std::mutex> lock(staging().mu);
  const auto it = staging().buffers.find(stream);
  if (it == staging().buffers.end()) return;
  if (it->second.p != nullptr) (void)hipFree(it->second.p);
  staging().buffers.erase(it);
}

} // namespace ordo::hip
