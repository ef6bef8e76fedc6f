// Dense paged attention for prefill-sized batches: one block per (tile of up to 32 consecutive rows
// of one request, query head), or per (tile, head, chunk). The tile's queries share each K and V
// row staged in shared memory, where one block per (row, head) read them once per row. Each
// result is still the CPU's (kernels/cpu/attention.cpp), bit for bit:
// - a score is the dot's 8 lanes in ascending order, summed in dot8's tree, plus the tail, × scale;
// - per chunk of 64 positions: m_c, the weights e^{s − m_c}, l_c and a_c in list order, folded
//   as l += l_c·e^{m_c − M}, acc += a_c·e^{m_c − M} in ascending chunk order, M the max score.
// Entries past a query's own position are masked: they take no part in any max or sum.
// Split tiles (whenever the scratch holds every row's chunks: a model sizes it for positions below
// 512): one block per (tile, head, chunk) computes the chunk's m_c, l_c and a_c for its rows
// once and writes them to a.partials as the decode chunks do (kernels/hip/attention.hip); the
// tile's last chunk to finish takes M as the fmax of the m_c and folds them in ascending chunk
// order. The long tiles at a prompt's end no longer hold up the launch, and no score is computed
// twice (1.09x the exact prefill, 1.22x bf16 on the H100: BENCHMARKS.md). Otherwise one block
// walks the tile's chunks twice: pass 1 takes each query's M (fmax: order-free), pass 2 sums and
// folds.
// The split kernel asks __launch_bounds__ for 3 blocks per multiprocessor: with fp32 KV it then
// takes 80 registers without spilling, against 125 uncapped (2 blocks), and one launch of a
// 512-token step went from 255 to 202 µs on the H100 (warps active 24 % -> 34 %; BENCHMARKS.md).
// The unsplit kernel would spill about 220 bytes under that cap, so it keeps 2. Blocks whose chunk
// lies past the tile's last position return before staging anything.
#include "kernels/hip/attention_core.hpp"
#include "kernels/hip/launch.hpp"

namespace ordo::hip {
namespace {

constexpr int tile_queries = 32;   // rows per block
constexpr int tile_positions = 32; // K or V rows staged at once (half a chunk)
constexpr int tile_threads = 256;
static_assert(attention_chunk == 2 * tile_positions, "a chunk is two staged halves");

// Rows of head_dim + 4 floats: 16-byte reads, and 8 consecutive positions on distinct banks.
constexpr int tile_row = attention_tile_max_head_dim + 4;

// Block blockIdx.x's tile: the requests' rows cut into tiles of tile_queries, in order (req -1:
// past the last tile).
__device__ inline void find_tile(const paged_attention_args& a, int32_t& req, int32_t& row0, int32_t& rows) {
  int32_t b = blockIdx.x;
  req = -1;
  for (int32_t r = 0; r < a.batch.num_reqs; ++r) {
    const int32_t start = a.batch.req_token_start[r], end = a.batch.req_token_start[r + 1];
    const int32_t tiles = (end - start + tile_queries - 1) / tile_queries;
    if (b < tiles) {
      req = r;
      row0 = start + b * tile_queries;
      rows = end - row0 < tile_queries ? end - row0 : tile_queries;
      return;
    }
    b -= tiles;
  }
}

// The slots of positions [j0, j0 + n) of `req` (those below `limit`), by the first n threads.
__device__ void stage_slots(const paged_attention_args& a, int32_t req, int32_t j0, int32_t n, int32_t limit,
                            int64_t* slot) {
  const int32_t t = threadIdx.x;
  if (t < n) slot[t] = j0 + t < limit ? slot_of(a.batch, req, j0 + t, a.block_size) : -1;
}

// Element i of head kvh's K or V row at slot `sl`, as a float (zero where sl < 0).
template <elem_dtype dt>
__device__ inline float kv_element(const paged_attention_args& a, const void* region, const float* scales, int32_t kvh,
                                   int64_t sl, int32_t i) {
  if (sl < 0) return 0.0f;
  return load_kv<dt>(region, static_cast<size_t>(sl) * a.num_kv_heads * a.head_dim + kvh * a.head_dim + i,
                     kv_scale<dt>(scales, sl, a.num_kv_heads, kvh));
}

// Elements i..i+3 of that row, for the staging's `quads` path (fp32 KV, head_dim % 4 == 0, the
// region 16-byte aligned): one 16-byte load. Other dtypes never take that path; they read four.
template <elem_dtype dt>
__device__ inline float4 kv_quad(const paged_attention_args& a, const void* region, const float* scales, int32_t kvh,
                                 int64_t sl, int32_t i) {
  if (sl < 0) return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if constexpr (dt == elem_dtype::fp32) {
    const size_t at = static_cast<size_t>(sl) * a.num_kv_heads * a.head_dim + kvh * a.head_dim + i;
    return *reinterpret_cast<const float4*>(static_cast<const float*>(region) + at);
  } else {
    return make_float4(kv_element<dt>(a, region, scales, kvh, sl, i), kv_element<dt>(a, region, scales, kvh, sl, i + 1),
                       kv_element<dt>(a, region, scales, kvh, sl, i + 2),
                       kv_element<dt>(a, region, scales, kvh, sl, i + 3));
  }
}

// Stage the K or V rows of head kvh at slot[0, tile_positions) as floats (zeros where slot < 0).
template <elem_dtype dt>
__device__ void stage_rows(const paged_attention_args& a, const void* region, const float* scales, int32_t kvh,
                           const int64_t* slot, float (*dst)[tile_row], bool quads) {
  const int32_t hd = a.head_dim;
  if (quads) {
    const int32_t per_row = hd / 4;
#pragma unroll 4
    for (int32_t e = threadIdx.x; e < tile_positions * per_row; e += tile_threads) {
      const int32_t p = e / per_row, i = 4 * (e % per_row);
      *reinterpret_cast<float4*>(&dst[p][i]) = kv_quad<dt>(a, region, scales, kvh, slot[p], i);
    }
    return;
  }
#pragma unroll 8
  for (int32_t e = threadIdx.x; e < tile_positions * hd; e += tile_threads) {
    const int32_t p = e / hd, i = e % hd;
    dst[p][i] = kv_element<dt>(a, region, scales, kvh, slot[p], i);
  }
}

// Scores: the staged half's 32 queries × 32 positions as lane sums, as the matmul's lane tiles do:
// thread (cell, lane) keeps lane `lane` of dot8 for 4 queries × 8 positions, reading Q and K
// transposed in shared memory (one 16-byte load of 4 queries and two of 8 positions per 32
// products), and the 8 lanes of a cell meet in dot8's tree by shuffles. Sums: thread (vq, ve)
// keeps queries 4·vq + x and elements 4·ve + y (x, y < 4), reading 4 weights and 4 values per
// position as two 16-byte loads. (A thread of 2 queries × 2 positions with all 8 lanes, reading
// 8 loads per 32 products, was 4-9 % slower in bf16 prefill: BENCHMARKS.md, session 16.)
constexpr int lane_row = tile_queries + 4; // transposed rows: 8 consecutive ones start 4 banks apart
static_assert(tile_queries == tile_positions && tile_threads == 256, "32 × 32 halves in cells of 4 × 8");

struct alignas(16) lane_smem {
  float qt[attention_tile_max_head_dim][lane_row]; // Q transposed: qt[i][q]
  union {
    float kt[attention_tile_max_head_dim][lane_row]; // a staged half of K, transposed: kt[i][p]
    float v[tile_positions][tile_row];               // a staged half of V: v[p][i]
  } kv;
  float st[attention_chunk][lane_row]; // the chunk's scores, then its weights: st[t][q]
  int64_t slot[attention_chunk];
  int32_t count[tile_queries];
  float m[tile_queries];
  float mc[tile_queries];
};

// dst[i][p] = value(p, i) for p < 32, i < hd. A warp reads 4 consecutive elements of 8 rows (runs
// of 16 bytes) and its transposed stores fall at most two to a bank. With `quads` (hd % 4 == 0),
// quad(p, i) gives elements i..i+3 of row p at once.
template <class Value, class Quad>
__device__ void stage_transposed(int32_t hd, float (*dst)[lane_row], Value value, Quad quad, bool quads) {
  const int32_t tasks = 128 * ((hd + 15) / 16); // 32 rows × whole groups of 4 quads
  if (quads) {
#pragma unroll 4
    for (int32_t t = threadIdx.x; t < tasks; t += tile_threads) {
      const int32_t p = (t >> 2) & 31, i0 = 4 * ((t & 3) + 4 * (t >> 7));
      if (i0 >= hd) continue;
      const float4 v = quad(p, i0);
      dst[i0][p] = v.x, dst[i0 + 1][p] = v.y, dst[i0 + 2][p] = v.z, dst[i0 + 3][p] = v.w;
    }
    return;
  }
  for (int32_t t = threadIdx.x; t < tasks; t += tile_threads) {
    const int32_t p = (t >> 2) & 31, i0 = 4 * ((t & 3) + 4 * (t >> 7));
#pragma unroll
    for (int c = 0; c < 4; ++c)
      if (i0 + c < hd) dst[i0 + c][p] = value(p, i0 + c);
  }
}

// The scores of queries 4·cq + x (x < 4) against the staged positions 8·cp + lane, × scale, for
// thread (cell = 4·cq + cp, lane): the lanes of dot8 side by side, its tree by shuffles, the tail.
__device__ void lane_scores(const lane_smem& sm, int32_t hd, float scale, float (&out)[4]) {
  const int32_t lane = threadIdx.x & 7, cell = threadIdx.x >> 3, cq = cell >> 2, cp = cell & 3;
  float s[4][8];
#pragma unroll
  for (int x = 0; x < 4; ++x)
#pragma unroll
    for (int y = 0; y < 8; ++y) s[x][y] = 0.0f;
  const int32_t steps = hd / 8;
#pragma unroll 4
  for (int32_t st = 0; st < steps; ++st) {
    const int32_t i = 8 * st + lane;
    const float4 q = *reinterpret_cast<const float4*>(&sm.qt[i][4 * cq]);
    const float4 k0 = *reinterpret_cast<const float4*>(&sm.kv.kt[i][8 * cp]);
    const float4 k1 = *reinterpret_cast<const float4*>(&sm.kv.kt[i][8 * cp + 4]);
    const float qr[4] = {q.x, q.y, q.z, q.w};
    const float kr[8] = {k0.x, k0.y, k0.z, k0.w, k1.x, k1.y, k1.z, k1.w};
#pragma unroll
    for (int x = 0; x < 4; ++x)
#pragma unroll
      for (int y = 0; y < 8; ++y) s[x][y] += qr[x] * kr[y];
  }
  gpu::lane_tree8_scatter<4>(s, out); // out[x]: position 8·cp + lane's score
  const int32_t p = 8 * cp + lane;
#pragma unroll
  for (int x = 0; x < 4; ++x) {
    float t = out[x];
    for (int32_t i = hd / 8 * 8; i < hd; ++i) t += sm.qt[i][4 * cq + x] * sm.kv.kt[i][p];
    out[x] = t * scale;
  }
}

template <elem_dtype dt, bool split>
__global__ void __launch_bounds__(tile_threads, split ? 3 : 2)
    attention_tile_kernel(paged_attention_args a, int32_t chunks_cap) {
  __shared__ lane_smem sm;
  __shared__ int32_t tile_req, tile_row0, tile_rows, tile_limit;
  const int32_t tid = threadIdx.x, h = blockIdx.y, hd = a.head_dim;
  const int32_t kvh = h / (a.num_q_heads / a.num_kv_heads);
  const float scale = 1.0f / sqrtf(static_cast<float>(hd));
  if (tid < tile_queries) { // the tile, and the most positions any of its queries attends, in one warp
    int32_t req, row0, rows;
    find_tile(a, req, row0, rows);
    const int32_t count = req >= 0 && tid < rows ? a.batch.positions[row0 + tid] + 1 : 0;
    sm.count[tid] = count; // positions query tid attends (0 past the tile's rows)
    sm.m[tid] = -INFINITY;
    int32_t limit = count;
    for (int off = tile_queries / 2; off > 0; off /= 2) {
      const int32_t other = ORDO_SHFL_XOR(limit, off);
      limit = other > limit ? other : limit;
    }
    if (tid == 0) tile_req = req, tile_row0 = row0, tile_rows = rows, tile_limit = limit;
  }
  __syncthreads();
  const int32_t req = tile_req, row0 = tile_row0, nq = tile_rows, limit = tile_limit;
  const int32_t c_first = split ? static_cast<int32_t>(blockIdx.z) * attention_chunk : 0;
  const int32_t c_end = split ? c_first + 1 : limit;
  if (req < 0 || c_first >= limit) return; // the same for the whole block, before any staging
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool q_quads = hd % 4 == 0 && a.ldq % 4 == 0 && aligned(a.q);
  const bool kv_quads = dt == elem_dtype::fp32 && hd % 4 == 0 && aligned(a.k) && aligned(a.v);
  const float* q_rows = a.q + static_cast<int64_t>(row0) * a.ldq + h * hd;
  stage_transposed(
      hd, sm.qt, [&](int32_t q, int32_t i) { return q < nq ? q_rows[static_cast<int64_t>(q) * a.ldq + i] : 0.0f; },
      [&](int32_t q, int32_t i) {
        return q < nq ? *reinterpret_cast<const float4*>(q_rows + static_cast<int64_t>(q) * a.ldq + i)
                      : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      },
      q_quads);
  __syncthreads();
  const auto stage_k = [&](const int64_t* slot) {
    stage_transposed(
        hd, sm.kv.kt, [&](int32_t p, int32_t i) { return kv_element<dt>(a, a.k, a.k_scale, kvh, slot[p], i); },
        [&](int32_t p, int32_t i) { return kv_quad<dt>(a, a.k, a.k_scale, kvh, slot[p], i); }, kv_quads);
  };
  const int32_t lane = tid & 7, cq = tid >> 5, cp = (tid >> 3) & 3;

  // Pass 1 (one block per tile): each query's max score. Query 4·cq + x's 32 positions of a half
  // are the 32 threads of warp cq.
  if (!split) {
    float m[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    for (int32_t j0 = 0; j0 < limit; j0 += tile_positions) {
      stage_slots(a, req, j0, tile_positions, limit, sm.slot);
      __syncthreads();
      stage_k(sm.slot);
      __syncthreads();
      float s[4];
      lane_scores(sm, hd, scale, s);
#pragma unroll
      for (int x = 0; x < 4; ++x)
        if (j0 + 8 * cp + lane < sm.count[4 * cq + x]) m[x] = fmaxf(m[x], s[x]);
      __syncthreads();
    }
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      for (int off = 16; off > 0; off /= 2) m[x] = fmaxf(m[x], ORDO_SHFL_XOR(m[x], off));
      if ((tid & 31) == 0) sm.m[4 * cq + x] = m[x];
    }
  }
  __syncthreads();

  // Pass 2, per chunk.
  const int32_t vq = tid >> 5, ve = tid & 31;
  float l[4], acc[4][4];
#pragma unroll
  for (int x = 0; x < 4; ++x) {
    l[x] = 0.0f;
#pragma unroll
    for (int y = 0; y < 4; ++y) acc[x][y] = 0.0f;
  }
  for (int32_t c0 = c_first; c0 < c_end; c0 += attention_chunk) {
    stage_slots(a, req, c0, attention_chunk, limit, sm.slot);
    __syncthreads();
    for (int32_t half = 0; half < 2; ++half) {
      const int32_t j0 = c0 + half * tile_positions;
      if (j0 < limit) {
        stage_k(sm.slot + half * tile_positions);
        __syncthreads();
        float s[4];
        lane_scores(sm, hd, scale, s);
        const int32_t p = 8 * cp + lane;
        float4 w;
        w.x = j0 + p < sm.count[4 * cq + 0] ? s[0] : -INFINITY;
        w.y = j0 + p < sm.count[4 * cq + 1] ? s[1] : -INFINITY;
        w.z = j0 + p < sm.count[4 * cq + 2] ? s[2] : -INFINITY;
        w.w = j0 + p < sm.count[4 * cq + 3] ? s[3] : -INFINITY;
        *reinterpret_cast<float4*>(&sm.st[half * tile_positions + p][4 * cq]) = w;
      } else {
        for (int32_t e = tid; e < tile_positions * tile_queries; e += tile_threads)
          sm.st[half * tile_positions + e / tile_queries][e % tile_queries] = -INFINITY;
      }
      __syncthreads();
    }
    // m_c per query (8 threads each, fmax), then the weights e^{s − m_c} of its entries.
    {
      const int32_t q = tid / 8, part = tid % 8;
      float mc = -INFINITY;
      for (int32_t t = part; t < attention_chunk; t += 8) mc = fmaxf(mc, sm.st[t][q]);
      for (int off = 4; off > 0; off /= 2) mc = fmaxf(mc, ORDO_SHFL_XOR(mc, off));
      const int32_t n = sm.count[q] - c0; // entries of this chunk the query attends
      for (int32_t t = part; t < attention_chunk; t += 8)
        sm.st[t][q] = t < n ? gpu::expf_glibc(sm.st[t][q] - mc) : 0.0f;
      if (part == 0) sm.mc[q] = mc;
    }
    // l_c and a_c in list order, V half by half; then the fold.
    float lc[4], ac[4][4];
    int32_t n[4];
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      lc[x] = 0.0f;
      n[x] = sm.count[4 * vq + x] - c0;
#pragma unroll
      for (int y = 0; y < 4; ++y) ac[x][y] = 0.0f;
    }
    for (int32_t half = 0; half < 2; ++half) {
      const int32_t j0 = c0 + half * tile_positions;
      if (j0 >= limit) break; // the same for the whole block
      __syncthreads(); // the weights are written; the staged K is consumed
      stage_rows<dt>(a, a.v, a.v_scale, kvh, sm.slot + half * tile_positions, sm.kv.v, kv_quads);
      __syncthreads();
      for (int32_t p = 0; p < tile_positions; ++p) {
        const int32_t t = half * tile_positions + p;
        const float4 w4 = *reinterpret_cast<const float4*>(&sm.st[t][4 * vq]);
        const float4 v4 = *reinterpret_cast<const float4*>(&sm.kv.v[p][4 * ve]);
        const float w[4] = {w4.x, w4.y, w4.z, w4.w}, v[4] = {v4.x, v4.y, v4.z, v4.w};
#pragma unroll
        for (int x = 0; x < 4; ++x) {
          if (t >= n[x]) continue;
          lc[x] += w[x];
#pragma unroll
          for (int y = 0; y < 4; ++y) ac[x][y] += w[x] * v[y];
        }
      }
    }
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      if (n[x] <= 0) continue;
      const int32_t q = 4 * vq + x;
      if (split) { // the record of (row, head, chunk): [a_c (head_dim floats), m_c, l_c]
        const int64_t record = (static_cast<int64_t>(row0 + q) * a.num_q_heads + h) * chunks_cap + c0 / attention_chunk;
        float* rec = a.partials + record * (hd + 2);
#pragma unroll
        for (int y = 0; y < 4; ++y)
          if (4 * ve + y < hd) rec[4 * ve + y] = ac[x][y];
        if (ve == 0) {
          rec[hd] = sm.mc[q];
          rec[hd + 1] = lc[x];
        }
        continue;
      }
      const float w = gpu::expf_glibc(sm.mc[q] - sm.m[q]);
      l[x] += lc[x] * w;
#pragma unroll
      for (int y = 0; y < 4; ++y) acc[x][y] += ac[x][y] * w;
    }
    __syncthreads(); // sm.st and sm.kv are free for the next chunk
  }
  if (split) {
    // The tile's last chunk to finish folds every row (which block that is does not change the order).
    uint32_t* count_at = a.partial_counts + static_cast<int64_t>(row0) * a.num_q_heads + h;
    if (!last_to_finish(count_at, (limit + attention_chunk - 1) / attention_chunk)) return;
    const int32_t e[4] = {4 * ve, 4 * ve + 1, 4 * ve + 2, 4 * ve + 3};
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      const int32_t q = 4 * vq + x;
      if (q >= nq) continue;
      const volatile float* recs =
          a.partials + (static_cast<int64_t>(row0 + q) * a.num_q_heads + h) * chunks_cap * (hd + 2);
      fold_chunks<4>(recs, (sm.count[q] + attention_chunk - 1) / attention_chunk, hd, e, l[x], acc[x]);
    }
    if (tid == 0) *count_at = 0; // ready for the next launch (stream order)
  }
#pragma unroll
  for (int x = 0; x < 4; ++x) {
    const int32_t q = 4 * vq + x;
    if (q >= nq) continue;
#pragma unroll
    for (int y = 0; y < 4; ++y) {
      const int32_t e = 4 * ve + y;
      if (e < hd) a.out[static_cast<int64_t>(row0 + q) * a.ldo + h * hd + e] = acc[x][y] / l[x];
    }
  }
}

} // namespace

void attention_tiles(const paged_attention_args& a, hipStream_t stream) {
  // At most num_tokens / tile_queries + num_reqs tiles; blocks past the last tile return at once.
  const int32_t tiles = (a.batch.num_tokens + tile_queries - 1) / tile_queries + a.batch.num_reqs;
  const int64_t chunks = split_chunks(a);
  const bool split = partials_fit(a, chunks);
  const dim3 grid(tiles, a.num_q_heads, split ? chunks : 1);
  const int32_t cap = split ? static_cast<int32_t>(chunks) : 0;
  with_kv_dtype(a.dtype, [&](auto dt) {
    constexpr elem_dtype d = decltype(dt)::value;
    if (split)
      attention_tile_kernel<d, true><<<grid, tile_threads, 0, stream>>>(a, cap);
    else
      attention_tile_kernel<d, false><<<grid, tile_threads, 0, stream>>>(a, cap);
  });
  ORDO_HIP_LAUNCHED();
}

} // namespace ordo::hip
