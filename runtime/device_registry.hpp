// Where a GPU build registers its device and kernel table (DESIGN §2.2), so runtime/ stays free of
// vendor code: the GPU library (kernels/hip/hip_device.hip) fills the registry at static-init
// time; a CPU-only build has none and make_gpu_device throws. The one seam between runtime/ and
// kernels/: the kernel table (kernels/kernel_table.hpp) is only named here, and make_kernel_table
// (kernels/kernel_table.cpp) asks find_gpu_backend for a non-host device's table.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "runtime/device.hpp"

namespace ordo {

class kernel_table;    // kernels/kernel_table.hpp
struct kernel_options; // kernels/kernel_table.hpp

struct gpu_backend {
  std::string name; // "hip-nvidia", "hip-amd"
  std::function<int()> device_count;
  std::function<std::unique_ptr<device>(int ordinal)> make_device;
  // The kernel table for `dev`, or nullptr when `dev` is not this backend's device; throws
  // std::invalid_argument when the backend cannot honour `options`.
  std::function<std::unique_ptr<kernel_table>(device& dev, const kernel_options& options)> make_kernel_table;
};

// Called once per backend from a static initialiser; returns true so it can initialise a bool.
bool register_gpu_backend(gpu_backend backend);
// The registered backend, or nullptr when the binary was built without a GPU.
const gpu_backend* find_gpu_backend();
// Device `ordinal` of the registered backend. Throws std::runtime_error when the binary has no
// GPU backend or the machine has no such device.
std::unique_ptr<device> make_gpu_device(int ordinal);

} // namespace ordo
