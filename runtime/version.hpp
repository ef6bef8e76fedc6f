// ordo's version and the commit it was configured from ("unknown" outside a git checkout).
#pragma once

namespace ordo {

const char* ordo_version(); // "0.1.0 (abc1234)"

} // namespace ordo
