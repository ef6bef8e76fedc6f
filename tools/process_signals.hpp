// The signals a long-running ordo process (`ordo node`, `ordo store`) handles, shared by both:
// SIGINT/SIGTERM stop it; SIGHUP/SIGUSR1 (a reload or a log rotation elsewhere) are logged and
// ignored, since their default action would end it; SIGPIPE is ignored (a peer that closes its
// socket mid-write costs an EPIPE, never the process).
#pragma once

#include <pthread.h>

#include <csignal>
#include <string>

#include <spdlog/spdlog.h>

namespace ordo {

inline const char* signal_name(int sig) {
  switch (sig) {
  case SIGINT: return "SIGINT";
  case SIGTERM: return "SIGTERM";
  case SIGHUP: return "SIGHUP";
  case SIGUSR1: return "SIGUSR1";
  default: return "signal";
  }
}

// Call before any thread starts: every thread inherits the mask, so only main's sigwait sees them.
inline sigset_t block_process_signals() {
  std::signal(SIGPIPE, SIG_IGN);
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGUSR1})
    sigaddset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

// Waits for SIGINT or SIGTERM and returns it; logs each other signal as ignored, with `note`.
inline int wait_for_stop_signal(const sigset_t& set, const std::string& who, const std::string& note) {
  int sig = 0;
  for (;;) {
    sigwait(&set, &sig);
    if (sig == SIGINT || sig == SIGTERM)
      return sig;
    spdlog::warn("{}: {} ignored ({})", who, signal_name(sig), note);
  }
}

} // namespace ordo
