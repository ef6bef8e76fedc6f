// Refusing an allocation the machine cannot hold, before making it. Linux overcommits: a huge
// malloc succeeds and the node is killed later, when the pages are touched, so the size is
// checked against MemAvailable first and the config key that asked for it is named.
#pragma once

#include <cstdint>
#include <string>

namespace ordo {

// MemAvailable of /proc/meminfo in bytes: what can be allocated without swapping. 0 when it
// cannot be read (no /proc, an old kernel).
uint64_t available_memory_bytes();

// MemAvailable in bytes from the text of /proc/meminfo ("MemAvailable:  21087364 kB"); 0 when
// the line is missing or malformed.
uint64_t parse_mem_available(const std::string& meminfo);

// Throws std::runtime_error when `bytes` exceed `available`, naming what asked for them, e.g.
// "cache.num_blocks = 10000000 needs 1.2 TiB of memory (1320000000000 bytes) but only 20.1 GiB
// are available". `key` is the config key and its value as the user wrote it. An `available`
// of 0 means unknown: nothing is checked.
void check_allocation(const std::string& key, uint64_t bytes, uint64_t available);

// A byte count for people: "512 bytes", "1.5 KiB", "20.1 GiB", "1.2 TiB" (one decimal, 1024-based).
std::string format_bytes(uint64_t bytes);

} // namespace ordo
