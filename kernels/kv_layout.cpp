#include "kernels/kv_layout.hpp"

namespace ordo {

const char* to_string(elem_dtype d) {
  switch (d) {
  case elem_dtype::fp32: return "fp32";
  case elem_dtype::bf16: return "bf16";
  case elem_dtype::fp8_e4m3: return "fp8_e4m3";
  case elem_dtype::i32: return "i32";
  }
  return "?";
}

size_t elem_bytes(elem_dtype d) {
  switch (d) {
  case elem_dtype::fp32: return 4;
  case elem_dtype::bf16: return 2;
  case elem_dtype::fp8_e4m3: return 1;
  case elem_dtype::i32: return 4;
  }
  return 0;
}

} // namespace ordo
