#include <catch.hpp>

#include <stdexcept>
#include <string>

#include "runtime/memory_check.hpp"

using namespace ordo;

TEST_CASE("an allocation larger than the available memory is refused, naming its key", "[memory_check]") {
  const uint64_t available = 21582457651; // 20.1 GiB
  CHECK_THROWS_WITH(check_allocation("cache.num_blocks = 10000000", 1320000000000, available),
                    "cache.num_blocks = 10000000 needs 1.2 TiB of memory (1320000000000 bytes) but only "
                    "20.1 GiB are available");
  CHECK_THROWS_AS(check_allocation("store.capacity_mb = 1048576", uint64_t{1} << 40, available), std::runtime_error);
  CHECK_THROWS_WITH(check_allocation("store.capacity_mb = 2048", (uint64_t{2048} << 20) + 1, uint64_t{2048} << 20),
                    "store.capacity_mb = 2048 needs 2.0 GiB of memory (2147483649 bytes) but only 2.0 GiB are "
                    "available");
}

TEST_CASE("an allocation that fits, or an unknown amount available, passes", "[memory_check]") {
  CHECK_NOTHROW(check_allocation("cache.num_blocks = 512", 1000, 1000)); // exactly fits
  CHECK_NOTHROW(check_allocation("cache.num_blocks = 512", 0, 1000));
  CHECK_NOTHROW(check_allocation("cache.num_blocks = 512", uint64_t{1} << 50, 0)); // 0 = not known
}

TEST_CASE("byte counts read as people write them", "[memory_check]") {
  CHECK(format_bytes(0) == "0 bytes");
  CHECK(format_bytes(1) == "1 byte");
  CHECK(format_bytes(1023) == "1023 bytes");
  CHECK(format_bytes(1024) == "1.0 KiB");
  CHECK(format_bytes(1536) == "1.5 KiB");
  CHECK(format_bytes(uint64_t{256} << 20) == "256.0 MiB");
  CHECK(format_bytes((uint64_t{1} << 30) - 1) == "1.0 GiB"); // not "1024.0 MiB"
  CHECK(format_bytes(1320000000000) == "1.2 TiB");
  CHECK(format_bytes(UINT64_MAX) == "16.0 EiB");
}

TEST_CASE("MemAvailable is read from /proc/meminfo text", "[memory_check]") {
  const std::string meminfo = "MemTotal:       32768000 kB\n"
                              "MemFree:         1000000 kB\n"
                              "MemAvailable:   21087364 kB\n"
                              "Buffers:          123456 kB\n";
  CHECK(parse_mem_available(meminfo) == uint64_t{21087364} * 1024);
  CHECK(parse_mem_available("MemTotal: 1 kB\n") == 0);           // an old kernel: no line
  CHECK(parse_mem_available("MemAvailable: lots kB\n") == 0);   // malformed
  CHECK(parse_mem_available("MemAvailable: 5 MB\n") == 0);      // a unit it does not know
  CHECK(parse_mem_available("") == 0);
}

TEST_CASE("this machine reports some available memory, below its total", "[memory_check]") {
  const uint64_t available = available_memory_bytes();
  CHECK(available > (uint64_t{16} << 20)); // the test itself runs in more than 16 MiB
  CHECK(available < (uint64_t{1} << 50));
}
