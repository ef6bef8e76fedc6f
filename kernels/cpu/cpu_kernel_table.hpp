// Kernel table of the CPU device: each op is one host function enqueued on the stream, calling
// the reference kernel of kernels/cpu with the arguments captured by value.
#pragma once

#include <memory>

#include "kernels/kernel_table.hpp"

namespace ordo {

// `dev` must run host work (dev.runs_host_work()) and outlive the table.
std::unique_ptr<kernel_table> make_cpu_kernel_table(device& dev);

} // namespace ordo
