#include "tools/spawn_self.hpp"

#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>

#include <sys/prctl.h>
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

} // namespace ordo
