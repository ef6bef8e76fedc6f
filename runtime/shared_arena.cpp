#include "runtime/shared_arena.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

namespace ordo {

namespace {

[[noreturn]] void sys_fail(const std::string& what, int err) {
  throw std::runtime_error(what + ": " + std::strerror(err));
}

// sockaddr for the abstract name "\0<name>".
socklen_t abstract_address(const std::string& name, sockaddr_un& addr) {
  if (name.empty() || name.size() + 1 > sizeof(addr.sun_path))
    throw std::runtime_error("abstract socket name \"" + name + "\" must be 1 to " +
                             std::to_string(sizeof(addr.sun_path) - 1) + " bytes");
  std::memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

// The one message a peer receives: the arena's size, with its fd attached.
struct arena_message {
  uint64_t magic = 0x6f72646f61726e31ull; // "ordoarn1"
  uint64_t bytes = 0;
};

// The message with its fd slot, for sendmsg and recvmsg alike.
struct fd_message {
  arena_message m;
  iovec iov{};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msghdr& header() {
    iov = {&m, sizeof m};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    return msg;
  }
};

constexpr uint64_t window_align = uint64_t{2} << 20;

} // namespace

// --- store side -------------------------------------------------------------------------------

arena_fd_server::arena_fd_server(std::string name, int arena_fd, uint64_t arena_bytes)
    : name_(std::move(name)), arena_fd_(arena_fd), arena_bytes_(arena_bytes) {
  sockaddr_un addr;
  const socklen_t len = abstract_address(name_, addr);
  listen_fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0)
    sys_fail("arena socket: socket", errno);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(listen_fd_, 16) != 0) {
    int err = errno;
    ::close(listen_fd_);
    sys_fail("arena socket @" + name_ + ": bind", err);
  }
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (stop_fd_ < 0) {
    int err = errno;
    ::close(listen_fd_);
    sys_fail("arena socket: eventfd", err);
  }
  thread_ = std::thread([this] { run(); });
}

arena_fd_server::~arena_fd_server() {
  uint64_t one = 1;
  if (::write(stop_fd_, &one, sizeof one) < 0)
    spdlog::warn("arena socket: cannot wake its thread: {}", std::strerror(errno));
  if (thread_.joinable())
    thread_.join();
  ::close(stop_fd_);
  ::close(listen_fd_);
}

void arena_fd_server::run() {
  const uid_t own_uid = ::getuid();
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      spdlog::error("arena socket @{}: poll: {}", name_, std::strerror(errno));
      return;
    }
    if (fds[1].revents)
      return;
    int conn = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0)
      continue;
    ucred peer{};
    socklen_t plen = sizeof peer;
    if (::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &peer, &plen) != 0 || peer.uid != own_uid) {
      spdlog::warn("arena socket @{}: refused a peer (pid {}, uid {}): only processes of uid {} get the arena", name_,
                   peer.pid, peer.uid, own_uid);
      ++refused_;
      ::close(conn);
      continue;
    }
    fd_message out;
    out.m.bytes = arena_bytes_;
    msghdr& msg = out.header();
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &arena_fd_, sizeof(int));
    if (::sendmsg(conn, &msg, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof out.m)) {
      spdlog::warn("arena socket @{}: sending the arena to pid {} failed: {}", name_, peer.pid, std::strerror(errno));
    } else {
      spdlog::debug("arena socket @{}: arena sent to pid {}", name_, peer.pid);
      ++served_;
    }
    ::close(conn);
  }
}

// --- node side --------------------------------------------------------------------------------

received_arena receive_arena_fd(const std::string& name, int timeout_ms) {
  const std::string where = "the store's arena socket @" + name;
  sockaddr_un addr;
  const socklen_t len = abstract_address(name, addr);
  int s = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (s < 0)
    sys_fail(where + ": socket", errno);
  auto fail_closing = [&](const std::string& what) {
    ::close(s);
    throw std::runtime_error(where + ": " + what);
  };
  if (::connect(s, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    int err = errno;
    fail_closing(std::string("connect: ") + std::strerror(err) +
                 (err == ECONNREFUSED || err == ENOENT ? " (the store is on another host, or gone)" : ""));
  }
  pollfd p{s, POLLIN, 0};
  int ready = ::poll(&p, 1, timeout_ms);
  if (ready <= 0)
    fail_closing(ready == 0 ? "no answer within " + std::to_string(timeout_ms) + " ms"
                            : std::string("poll: ") + std::strerror(errno));
  fd_message in;
  in.m.magic = 0;
  arena_message& m = in.m;
  msghdr& msg = in.header();
  ssize_t n = ::recvmsg(s, &msg, MSG_CMSG_CLOEXEC);
  if (n < 0)
    fail_closing(std::string("recvmsg: ") + std::strerror(errno));
  int fd = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
      std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
  ::close(s);
  if (n != static_cast<ssize_t>(sizeof m) || m.magic != arena_message{}.magic || fd < 0) {
    if (fd >= 0)
      ::close(fd);
    throw std::runtime_error(where + ": the answer is not an arena (" + std::to_string(n) + " bytes, " +
                             (fd < 0 ? "no fd" : "an fd") + ")");
  }
  off_t size = ::lseek(fd, 0, SEEK_END);
  if (size < 0 || static_cast<uint64_t>(size) < m.bytes) {
    ::close(fd);
    throw std::runtime_error(where + ": the arena is " + std::to_string(size) + " bytes, announced as " +
                             std::to_string(m.bytes));
  }
  return {fd, m.bytes};
}

std::optional<uint64_t> range_allocator::take(uint64_t bytes) {
  const uint64_t need = (bytes + align_ - 1) / align_ * align_;
  uint64_t at = 0;
  for (const auto& r : used_) {
    if (r.offset >= at + need)
      break;
    at = std::max(at, (r.offset + r.bytes + align_ - 1) / align_ * align_);
  }
  if (need == 0 || at + need > size_)
    return std::nullopt;
  used_.push_back({at, bytes});
  std::sort(used_.begin(), used_.end(), [](const range& a, const range& b) { return a.offset < b.offset; });
  return at;
}

uint64_t range_allocator::give(uint64_t offset) {
  auto it = std::find_if(used_.begin(), used_.end(), [&](const range& r) { return r.offset == offset; });
  if (it == used_.end())
    return 0;
  const uint64_t bytes = it->bytes;
  used_.erase(it);
  return bytes;
}

uint64_t range_allocator::used_bytes() const {
  uint64_t n = 0;
  for (const auto& r : used_)
    n += r.bytes;
  return n;
}

host_window::host_window(uint64_t bytes) : size_(bytes), ranges_(bytes, window_align) {
  void* p = ::mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    sys_fail("cannot reserve " + std::to_string(bytes >> 30) + " GiB of address space for store arenas", errno);
  base_ = static_cast<uint8_t*>(p);
}

host_window::~host_window() {
  if (base_)
    ::munmap(base_, size_);
}

uint64_t host_window::attach(int fd, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto at = ranges_.take(bytes);
  if (!at)
    throw std::runtime_error("no room for an arena of " + std::to_string(bytes) + " bytes in the " +
                             std::to_string(size_ >> 30) + " GiB window (" + std::to_string(ranges_.used_bytes()) +
                             " bytes mapped)");
  void* p = ::mmap(base_ + *at, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    ranges_.give(*at);
    sys_fail("cannot map the store arena of " + std::to_string(bytes) + " bytes", err);
  }
  return *at;
}

void host_window::detach(uint64_t offset) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t bytes = ranges_.give(offset);
  if (bytes == 0)
    return;
  void* p = ::mmap(base_ + offset, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  if (p == MAP_FAILED)
    spdlog::error("store arena at window offset {}: cannot unmap it: {}", offset, std::strerror(errno));
}

uint64_t host_window::mapped_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ranges_.used_bytes();
}

} // namespace ordo
