// make_kernel_table: the CPU table for a host-work device, else the registered GPU backend's
// (runtime/device_registry.hpp, the one seam through which kernels/ reaches runtime/).
#include "kernels/kernel_table.hpp"

#include <stdexcept>
#include <string>

#include "kernels/cpu/cpu_kernel_table.hpp"
#include "runtime/device_registry.hpp"

namespace ordo {

const char* to_string(matmul_mode m) { return m == matmul_mode::tf32 ? "tf32" : "exact"; }
const char* to_string(weight_dtype d) { return d == weight_dtype::bf16 ? "bf16" : "fp32"; }

std::unique_ptr<kernel_table> make_kernel_table(device& dev, const kernel_options& options) {
  if (dev.runs_host_work()) {
    if (options.matmul != matmul_mode::exact)
      throw std::invalid_argument(std::string("device.matmul = \"") + to_string(options.matmul) +
                                  "\": the CPU device computes every matmul exactly; " +
                                  "tf32 needs device.kind = \"hip\" on a GPU with TF32 matrix units");
    if (options.weights != weight_dtype::fp32)
      throw std::invalid_argument(std::string("model.weight_dtype = \"") + to_string(options.weights) +
                                  "\": the CPU device computes every matmul exactly on fp32 weights; " +
                                  "bf16 weights need device.kind = \"hip\" on a GPU with bf16 matrix units");
    return make_cpu_kernel_table(dev);
  }
  if (const gpu_backend* gpu = find_gpu_backend())
    if (std::unique_ptr<kernel_table> table = gpu->make_kernel_table(dev, options)) return table;
  throw std::invalid_argument("no kernel table for device " + dev.name() + " yet");
}

} // namespace ordo
