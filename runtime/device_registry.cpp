#include "runtime/device_registry.hpp"

#include <stdexcept>

namespace ordo {
namespace {

// A function-local static: registration runs during static init of other objects.
std::unique_ptr<gpu_backend>& registered() {
  static std::unique_ptr<gpu_backend> backend;
  return backend;
}

} // namespace

bool register_gpu_backend(gpu_backend backend) {
  registered() = std::make_unique<gpu_backend>(std::move(backend));
  return true;
}

const gpu_backend* find_gpu_backend() { return registered().get(); }

std::unique_ptr<device> make_gpu_device(int ordinal) {
  const gpu_backend* b = find_gpu_backend();
  if (!b) throw std::runtime_error("this ordo binary was built without a GPU backend (configure with -DORDO_GPU=hip-nvidia)");
  const int count = b->device_count();
  if (ordinal < 0 || ordinal >= count)
    throw std::runtime_error(b->name + ": no GPU " + std::to_string(ordinal) + " (" + std::to_string(count) + " found)");
  return b->make_device(ordinal);
}

} // namespace ordo
