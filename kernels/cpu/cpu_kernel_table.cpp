#include "kernels/cpu/cpu_kernel_table.hpp"

#include <stdexcept>
#include <string>

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/conv.hpp"
#include "kernels/cpu/embedding.hpp"
#include "kernels/cpu/gate.hpp"
#include "kernels/cpu/gdn.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/mlp.hpp"
#include "kernels/cpu/norm.hpp"
#include "kernels/cpu/ple.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cpu/sampling.hpp"
#include "kernels/cpu/sparse_attention.hpp"
#include "kernels/cpu/state.hpp"
#include "kernels/cpu/unit_copy.hpp"

namespace ordo {
namespace {

class cpu_kernel_table final : public kernel_table {
public:
  explicit cpu_kernel_table(device& dev) : dev_(dev) {}

#define ORDO_CPU_OP(op, args_t)                                          \
  void op(stream_kind s, const args_t& a) override {                     \
    dev_.enqueue_host_work(s, [a] { cpu::op(a); });                      \
  }
  ORDO_CPU_OP(matmul, matmul_args)
  ORDO_CPU_OP(rmsnorm, rmsnorm_args)
  ORDO_CPU_OP(output_gate, output_gate_args)
  ORDO_CPU_OP(embed, embed_args)
  ORDO_CPU_OP(rope, rope_args)
  ORDO_CPU_OP(swiglu, swiglu_args)
  ORDO_CPU_OP(kv_store, kv_store_args)
  ORDO_CPU_OP(paged_attention, paged_attention_args)
  ORDO_CPU_OP(index_compress, index_compress_args)
  ORDO_CPU_OP(sparse_attention, sparse_attention_args)
  ORDO_CPU_OP(state_reset, state_reset_args)
  ORDO_CPU_OP(causal_conv, causal_conv_args)
  ORDO_CPU_OP(gdn, gdn_args)
  ORDO_CPU_OP(ple_ngram, ple_ngram_args)
  ORDO_CPU_OP(gather_rows, gather_rows_args)
  ORDO_CPU_OP(sample, sample_args)
  ORDO_CPU_OP(unit_copy, unit_copy_args)
#undef ORDO_CPU_OP

private:
  device& dev_;
};

} // namespace

std::unique_ptr<kernel_table> make_cpu_kernel_table(device& dev) {
  if (!dev.runs_host_work())
    throw std::invalid_argument("cpu kernel table: device " + dev.name() + " does not run host work");
  return std::make_unique<cpu_kernel_table>(dev);
}

} // namespace ordo
