// Child processes of this binary for the tools that start real ones (`ordo topo run`, `ordo bench
// pd`, `ordo bench offload`'s store server).
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

} // namespace ordo
