#include "tools/harness/child_supervisor.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace ordo {

pid_t spawn_self(const std::vector<std::string>& args, int in_fd, int out_fd, int err_fd, const char* who) {
  std::vector<char*> argv;
  for (const auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  std::cout.flush(); // nothing buffered is written twice
  std::cerr.flush();
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid != 0)
    return pid;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) // the parent died before prctl
    ::_exit(127);
  const int fds[] = {in_fd, out_fd, err_fd};
  for (int target = 0; target < 3; ++target)
    if (fds[target] >= 0)
      ::dup2(fds[target], target);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGHUP})
    ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execv("/proc/self/exe", argv.data());
  const std::string msg = std::string(who) + ": exec /proc/self/exe failed: " + std::strerror(errno) + "\n";
  (void)!::write(2, msg.data(), msg.size());
  ::_exit(127);
}

bool child_supervisor::start(const std::vector<std::string>& args, int in_fd, int out_fd, int err_fd,
                             const char* who) {
  pid_ = spawn_self(args, in_fd, out_fd, err_fd, who);
  paused_ = false;
  return pid_ > 0;
}

bool child_supervisor::alive(int* status) {
  if (pid_ <= 0)
    return false;
  int st = 0;
  const pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_ || (r < 0 && errno == ECHILD)) {
    if (status)
      *status = st;
    pid_ = -1;
    paused_ = false;
    return false;
  }
  return true;
}

child_supervisor::stop_result child_supervisor::stop(int sig, double limit_s, int* status, double kill_limit_s) {
  using clock_type = std::chrono::steady_clock;
  auto waited = [](clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); };
  if (!alive(status))
    return stop_result::already_gone;
  if (paused_)
    ::kill(pid_, SIGCONT);
  ::kill(pid_, sig);
  for (auto t0 = clock_type::now(); waited(t0) < limit_s; ::usleep(20000))
    if (!alive(status))
      return stop_result::exited;
  ::kill(pid_, SIGKILL);
  for (auto t0 = clock_type::now(); waited(t0) < kill_limit_s; ::usleep(20000))
    if (!alive(status))
      break;
  return stop_result::killed;
}

} // namespace ordo
