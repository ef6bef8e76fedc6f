#include "kernels/cpu/embedding.hpp"

#include <cstring>

#include "kernels/cpu/dtype.hpp"

namespace ordo::cpu {

void embed(const embed_args& a) {
  for (int32_t r = 0; r < a.rows; ++r) {
    const int32_t id = a.ids[r];
    if (id < 0 || id >= a.table_rows) kernel_fail("embedding id out of range", id);
    std::memcpy(a.out + static_cast<int64_t>(r) * a.dim, a.table + static_cast<int64_t>(id) * a.dim,
                a.dim * sizeof(float));
  }
}

} // namespace ordo::cpu
