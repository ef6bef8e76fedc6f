// The one supervisor of child processes of this binary, for the tools that start real ones
// (`ordo topo run`, `ordo bench pd`, `ordo bench offload`'s store server): start, reap, pause
// bookkeeping and a bounded stop, always by pid. Runs on its owner's thread.
#pragma once

#include <string>
#include <vector>

#include <sys/types.h>

namespace ordo {

// Starts /proc/self/exe with `args` (argv[0] first). The child's stdin, stdout and stderr are
// `in_fd`, `out_fd` and `err_fd` (-1: this process's own); it dies with this process, even one
// killed by SIGKILL (PR_SET_PDEATHSIG), and starts with default signal dispositions and no
// blocked signal. `who` names the caller in the message the child prints if exec fails (exit 127).
// Returns the child's pid, or -1 with errno set when fork failed.
pid_t spawn_self(const std::vector<std::string>& args, int in_fd, int out_fd, int err_fd, const char* who);

// One child started by spawn_self. Move-only; the destructor leaves a running child to its owner
// (PR_SET_PDEATHSIG ends it with this process at the latest).
class child_supervisor {
public:
  enum class stop_result { already_gone, exited, killed };

  child_supervisor() = default;
  child_supervisor(child_supervisor&& o) noexcept : pid_(o.pid_), paused_(o.paused_) { o.pid_ = -1, o.paused_ = false; }
  child_supervisor& operator=(child_supervisor&& o) noexcept {
    pid_ = o.pid_, paused_ = o.paused_;
    o.pid_ = -1, o.paused_ = false;
    return *this;
  }
  child_supervisor(const child_supervisor&) = delete;
  child_supervisor& operator=(const child_supervisor&) = delete;

  // spawn_self; false (errno set) when fork failed.
  bool start(const std::vector<std::string>& args, int in_fd, int out_fd, int err_fd, const char* who);

  pid_t pid() const { return pid_; } // -1: never started, or reaped
  bool paused() const { return paused_; }
  void set_paused(bool paused) { paused_ = paused; } // the owner sent SIGSTOP / SIGCONT

  // Reaps the child if it exited (its wait status in *status); true while it runs.
  bool alive(int* status = nullptr);

  // Sends `sig` (SIGCONT first to a paused child, which would leave it pending), waits up to
  // `limit_s` for the exit, then sends SIGKILL and waits up to `kill_limit_s` more. *status: the
  // wait status of an exit reaped here. already_gone: it had exited (or was never started).
  stop_result stop(int sig, double limit_s, int* status = nullptr, double kill_limit_s = 10);

private:
  pid_t pid_ = -1;
  bool paused_ = false;
};

} // namespace ordo
