// Engine identity (DESIGN §6, SPEC D3): a short hex name unique per live server, derived from the
// process kind, the port it bound, a per-instance nonce and the host's boot id. A restarted
// process gets a new nonce and so a new identity; two processes on one host differ by port.
// Pure: no CAF; reads /proc only in boot_id().
#pragma once

#include <cstdint>
#include <string>

namespace ordo {

// /proc/sys/kernel/random/boot_id without surrounding whitespace ("" if it cannot be read).
// Equal on two processes iff they run on the same host since its last boot.
std::string boot_id();

// A fresh 64-bit nonce from std::random_device (never 0).
uint64_t instance_nonce();

// "<kind>-" followed by 16 lowercase hex digits: the xxh64 of (kind, bound_port, nonce, boot_id).
// Stable for the same inputs; `kind` is "store" or "node".
std::string make_engine_id(const std::string& kind, uint16_t bound_port, uint64_t nonce,
                           const std::string& boot_id);

} // namespace ordo
