// The byte plane of the store server (runtime/shared_arena): a sealed memfd handed over an
// abstract Unix socket, mapped into a node's reserved window; writes on either side are seen by
// the other, a forked child (another process) gets the same memory, failures name what failed.
#include <catch.hpp>

#include <cstring>
#include <stdexcept>
#include <string>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/shared_arena.hpp"

using namespace ordo;
using Catch::Matchers::Contains;

namespace {

// A sealed memfd like the store's (actors/store_server.cpp's store_arena, without CAF).
struct memfd_arena {
  int fd = -1;
  uint8_t* data = nullptr;
  uint64_t bytes = 0;
  explicit memfd_arena(uint64_t n) : bytes(n) {
    fd = memfd_create("ordo-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    REQUIRE(fd >= 0);
    REQUIRE(ftruncate(fd, static_cast<off_t>(n)) == 0);
    data = static_cast<uint8_t*>(mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    REQUIRE(data != MAP_FAILED);
  }
  ~memfd_arena() {
    munmap(data, bytes);
    close(fd);
  }
};

std::string unique_name(const char* what) { return std::string("ordo-test-") + what + "-" + std::to_string(getpid()); }

} // namespace

TEST_CASE("an arena served over an abstract socket is the same memory in the node's window", "[shared_arena]") {
  memfd_arena arena(3 << 20);
  arena_fd_server server(unique_name("same"), arena.fd, arena.bytes);
  host_window window(uint64_t{1} << 34);

  received_arena got = receive_arena_fd(server.name(), 2000);
  CHECK(got.bytes == arena.bytes);
  const uint64_t at = window.attach(got.fd, got.bytes);
  close(got.fd);
  CHECK(at == 0);
  CHECK(window.mapped_bytes() == arena.bytes);
  uint8_t* view = window.base() + at;
  arena.data[12345] = 0x5a;              // the store writes, the node reads
  CHECK(view[12345] == 0x5a);
  view[arena.bytes - 1] = 0xa5;          // the node writes (a save), the store reads
  CHECK(arena.data[arena.bytes - 1] == 0xa5);
  for (int i = 0; i < 200 && server.served() < 1; ++i) // the server counts after its sendmsg returned
    usleep(10000);
  CHECK(server.served() == 1);

  // A second arena goes to its own 2 MiB-aligned range; a detached range is reused first.
  received_arena again = receive_arena_fd(server.name(), 2000);
  const uint64_t at2 = window.attach(again.fd, again.bytes);
  close(again.fd);
  CHECK(at2 == 4 << 20);
  window.detach(at);
  CHECK(window.mapped_bytes() == arena.bytes);
  received_arena third = receive_arena_fd(server.name(), 2000);
  CHECK(window.attach(third.fd, third.bytes) == 0);
  close(third.fd);
  CHECK(window.base()[0 + 12345] == 0x5a);
}

TEST_CASE("another process maps the arena and writes into the store's memory", "[shared_arena]") {
  memfd_arena arena(1 << 20);
  arena_fd_server server(unique_name("fork"), arena.fd, arena.bytes);
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    try {
      host_window window(uint64_t{1} << 30);
      received_arena got = receive_arena_fd(server.name(), 2000);
      uint8_t* view = window.base() + window.attach(got.fd, got.bytes);
      for (uint64_t i = 0; i < got.bytes; i += 4096)
        view[i] = static_cast<uint8_t>(i / 4096 + 1);
      _exit(0);
    } catch (...) {
      _exit(3);
    }
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  bool all = true;
  for (uint64_t i = 0; i < arena.bytes; i += 4096)
    all = all && arena.data[i] == static_cast<uint8_t>(i / 4096 + 1);
  CHECK(all);
}

TEST_CASE("arena failures name the socket and what failed", "[shared_arena]") {
  memfd_arena arena(1 << 20);
  const std::string name = unique_name("taken");
  arena_fd_server first(name, arena.fd, arena.bytes);
  CHECK_THROWS_WITH(arena_fd_server(name, arena.fd, arena.bytes),
                    Contains("arena socket @" + name + ": bind: Address already in use"));
  CHECK_THROWS_WITH(receive_arena_fd(unique_name("absent"), 500),
                    Contains("the store's arena socket @" + unique_name("absent") + ": connect: Connection refused") &&
                        Contains("on another host, or gone"));
  host_window small(8 << 20);
  received_arena got = receive_arena_fd(name, 2000);
  small.attach(got.fd, got.bytes);
  small.attach(got.fd, got.bytes);
  small.attach(got.fd, got.bytes);
  small.attach(got.fd, got.bytes);
  CHECK_THROWS_WITH(small.attach(got.fd, got.bytes), Contains("no room for an arena of 1048576 bytes"));
  close(got.fd);
}
