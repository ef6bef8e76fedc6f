#include <catch.hpp>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "runtime/device.hpp"

using namespace ordo;

TEST_CASE("cpu device: work on one stream runs in enqueue order") {
  auto dev = make_cpu_device({/*chaos_seed=*/7, /*chaos_max_delay_us=*/200});
  std::vector<int> seen;
  for (int i = 0; i < 50; ++i)
    dev->enqueue_host_work(stream_kind::compute, [&seen, i] { seen.push_back(i); });
  dev->synchronize();
  REQUIRE(seen.size() == 50);
  for (int i = 0; i < 50; ++i)
    CHECK(seen[i] == i);
}

TEST_CASE("cpu device: allocations are zeroed, copies and fills move bytes") {
  auto dev = make_cpu_device({});
  auto* d = static_cast<uint8_t*>(dev->alloc_device(100));
  auto* h = static_cast<uint8_t*>(dev->alloc_host_pinned(100));
  for (int i = 0; i < 100; ++i)
    CHECK(d[i] == 0);
  dev->fill_async(stream_kind::load, h, 0xab, 100);
  dev->copy_async(stream_kind::load, d, h, 100);
  dev->synchronize();
  for (int i = 0; i < 100; ++i)
    CHECK(d[i] == 0xab);
  dev->free_device(d);
  dev->free_host_pinned(h);
}

// Copies a value on `load` and reads it on `compute`, with or without the wait edge.
static int read_after_upload(device& dev, bool with_edge) {
  std::vector<int> host(1, 42), dst(1, 0);
  int observed = -1;
  dev.copy_async(stream_kind::load, dst.data(), host.data(), sizeof(int));
  event_id uploaded = dev.record(stream_kind::load);
  if (with_edge)
    dev.wait(stream_kind::compute, uploaded);
  dev.enqueue_host_work(stream_kind::compute, [&] { observed = dst[0]; });
  dev.synchronize();
  CHECK(dev.query(uploaded));
  return observed;
}

TEST_CASE("cpu device: an event orders work across streams under chaos") {
  auto dev = make_cpu_device({/*chaos_seed=*/99, /*chaos_max_delay_us=*/500});
  for (int i = 0; i < 40; ++i)
    REQUIRE(read_after_upload(*dev, true) == 42);
}

TEST_CASE("cpu device: chaos exposes a missing wait edge") {
  // The chaos mode has teeth: without the edge, some run reads before the copy lands.
  auto dev = make_cpu_device({/*chaos_seed=*/99, /*chaos_max_delay_us=*/500});
  int stale = 0;
  for (int i = 0; i < 40; ++i)
    stale += read_after_upload(*dev, false) != 42;
  CHECK(stale > 0);
}

TEST_CASE("cpu device: query reports completion without blocking; host callbacks run in order") {
  auto dev = make_cpu_device({});
  std::atomic<bool> release{false};
  dev->enqueue_host_work(stream_kind::save, [&] {
    while (!release.load())
      std::this_thread::yield();
  });
  std::vector<int> order;
  dev->host_callback(stream_kind::save, [&] { order.push_back(1); });
  event_id e = dev->record(stream_kind::save);
  CHECK_FALSE(dev->query(e));
  dev->wait(stream_kind::compute, e);
  dev->host_callback(stream_kind::compute, [&] { order.push_back(2); });
  release = true;
  dev->synchronize();
  CHECK(dev->query(e));
  REQUIRE(order.size() == 2);
  CHECK(order[0] == 1);
}
