#include "runtime/version.hpp"

#ifndef ORDO_VERSION // set by CMake on this file only, so a new commit recompiles one file
#define ORDO_VERSION "unknown"
#endif
#ifndef ORDO_GIT_HASH
#define ORDO_GIT_HASH "unknown"
#endif

namespace ordo {

const char* ordo_version() { return ORDO_VERSION " (" ORDO_GIT_HASH ")"; }

} // namespace ordo
