// The GPU registration seam: a CPU-only binary has no backend and says so; a registered backend
// supplies devices and the kernel table that make_kernel_table returns for its devices.
#include <catch.hpp>

#include <stdexcept>

#include "kernels/kernel_table.hpp"
#include "runtime/device_registry.hpp"

using namespace ordo;

namespace {

// A device that is not the CPU device and runs no host work: only a backend can give it a table.
struct fake_gpu_device final : device {
  std::string name() const override { return "fake-gpu"; }
  void* alloc_device(size_t) override { return nullptr; }
  void free_device(void*) override {}
  void* alloc_host_pinned(size_t) override { return nullptr; }
  void free_host_pinned(void*) override {}
  void copy_async(stream_kind, void*, const void*, size_t) override {}
  void fill_async(stream_kind, void*, uint8_t, size_t) override {}
  event_id record(stream_kind) override { return 0; }
  void wait(stream_kind, event_id) override {}
  bool query(event_id) override { return true; }
  void host_callback(stream_kind, std::function<void()> fn) override { fn(); }
  void synchronize() override {}
};

} // namespace

TEST_CASE("without a GPU backend, make_gpu_device and make_kernel_table explain why") {
  REQUIRE(find_gpu_backend() == nullptr);
  REQUIRE_THROWS_WITH(make_gpu_device(0), Catch::Contains("built without a GPU backend"));
  fake_gpu_device dev;
  REQUIRE_THROWS_AS(make_kernel_table(dev), std::invalid_argument);
}

TEST_CASE("a registered backend supplies its devices and their kernel table") {
  int tables = 0;
  matmul_mode asked = matmul_mode::exact;
  register_gpu_backend({"fake", [] { return 1; }, [](int) -> std::unique_ptr<device> { return std::make_unique<fake_gpu_device>(); },
                        [&tables, &asked](device& d, const kernel_options& o) -> std::unique_ptr<kernel_table> {
                          ++tables;
                          asked = o.matmul;
                          if (d.name() != "fake-gpu") return nullptr;
                          return make_kernel_table(*make_cpu_device({})); // any table object will do
                        }});
  REQUIRE(find_gpu_backend() != nullptr);
  REQUIRE(find_gpu_backend()->name == "fake");
  REQUIRE_THROWS_WITH(make_gpu_device(1), Catch::Contains("no GPU 1 (1 found)"));
  std::unique_ptr<device> dev = make_gpu_device(0);
  REQUIRE(dev->name() == "fake-gpu");
  REQUIRE(make_kernel_table(*dev) != nullptr);
  REQUIRE(tables == 1);
  REQUIRE(asked == matmul_mode::exact);
  // The options reach the backend, which decides whether it can honour them.
  REQUIRE(make_kernel_table(*dev, {matmul_mode::tf32}) != nullptr);
  REQUIRE(asked == matmul_mode::tf32);
}

TEST_CASE("the CPU table refuses a tf32 matmul and bf16 weights, naming the setting") {
  auto cpu = make_cpu_device({});
  REQUIRE(make_kernel_table(*cpu, {matmul_mode::exact}) != nullptr);
  REQUIRE_THROWS_WITH(make_kernel_table(*cpu, {matmul_mode::tf32}),
                      Catch::Contains("device.matmul = \"tf32\"") && Catch::Contains("device.kind = \"hip\""));
  REQUIRE_THROWS_WITH(make_kernel_table(*cpu, {matmul_mode::exact, weight_dtype::bf16}),
                      Catch::Contains("model.weight_dtype = \"bf16\"") && Catch::Contains("device.kind = \"hip\""));
}
