// Equality and printing for every message struct, derived from its `inspect` function: a field
// appended to a struct and its inspect (which CAF needs anyway) is compared and printed without
// touching this file. Floats compare bitwise (messages carry digests and determinism is a feature).
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "messages/common.hpp"
#include "messages/connector.hpp"
#include "messages/pool.hpp"
#include "messages/request.hpp"
#include "messages/step.hpp"
#include "messages/store.hpp"

namespace ordo {
namespace detail {

template <class T>
struct is_std_vector : std::false_type {};
template <class T, class A>
struct is_std_vector<std::vector<T, A>> : std::true_type {};

// Appends an unambiguous byte encoding of every inspected field (lengths before contents).
class field_bytes {
public:
  using result_type = void;

  template <class... Ts>
  void operator()(Ts&... xs) {
    (put(xs), ...);
  }

  std::string out;

private:
  template <class T>
  void put(const T& x) {
    if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T>) {
      char raw[sizeof(T)];
      std::memcpy(raw, &x, sizeof(T));
      out.append(raw, sizeof(T));
    } else if constexpr (std::is_same_v<T, std::string>) {
      put(static_cast<uint64_t>(x.size()));
      out += x;
    } else if constexpr (is_std_vector<T>::value) {
      put(static_cast<uint64_t>(x.size()));
      for (const auto& e : x)
        put(e);
    } else {
      inspect(*this, const_cast<T&>(x)); // read only: inspect wants a mutable reference
    }
  }
};

// Writes `{f1, f2, [e1, e2], "text", {nested}}` in inspect order.
class field_text {
public:
  using result_type = void;

  explicit field_text(std::ostream& os) : os_(os) {}

  template <class... Ts>
  void operator()(Ts&... xs) {
    os_ << '{';
    bool first = true;
    ((os_ << (first ? "" : ", "), put(xs), first = false), ...);
    os_ << '}';
  }

private:
  template <class T>
  void put(const T& x) {
    if constexpr (std::is_same_v<T, bool>) {
      os_ << (x ? "true" : "false");
    } else if constexpr (std::is_floating_point_v<T>) {
      auto old = os_.precision(std::numeric_limits<T>::max_digits10);
      os_ << x;
      os_.precision(old);
    } else if constexpr (std::is_integral_v<T>) {
      os_ << static_cast<std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>(x);
    } else if constexpr (std::is_enum_v<T>) {
      os_ << static_cast<uint64_t>(x);
    } else if constexpr (std::is_same_v<T, std::string>) {
      os_ << '"' << x << '"';
    } else if constexpr (is_std_vector<T>::value) {
      os_ << '[';
      for (size_t i = 0; i < x.size(); ++i) {
        if (i > 0)
          os_ << ", ";
        put(x[i]);
      }
      os_ << ']';
    } else {
      inspect(*this, const_cast<T&>(x)); // read only
    }
  }

  std::ostream& os_;
};

template <class T>
std::string field_bytes_of(const T& x) {
  field_bytes f;
  inspect(f, const_cast<T&>(x));
  return std::move(f.out);
}

} // namespace detail

// Text form of any message struct, e.g. for logs and test failure output.
template <class T>
std::string to_debug_string(const T& x) {
  std::ostringstream os;
  detail::field_text f(os);
  inspect(f, const_cast<T&>(x));
  return os.str();
}

#define ORDO_MESSAGE_NE_PRINT(T)                                                                 \
  inline bool operator!=(const T& a, const T& b) { return !(a == b); }                           \
  inline std::ostream& operator<<(std::ostream& os, const T& x) { return os << to_debug_string(x); }

#define ORDO_MESSAGE_COMPARE(T)                                                                  \
  inline bool operator==(const T& a, const T& b) {                                               \
    return detail::field_bytes_of(a) == detail::field_bytes_of(b);                               \
  }                                                                                              \
  ORDO_MESSAGE_NE_PRINT(T)

// common.hpp defines operator== for command_header itself.
ORDO_MESSAGE_NE_PRINT(command_header)
// request.hpp
ORDO_MESSAGE_COMPARE(completion_request)
ORDO_MESSAGE_COMPARE(completion_chunk)
ORDO_MESSAGE_COMPARE(completion_result)
ORDO_MESSAGE_COMPARE(completion_failed)
ORDO_MESSAGE_COMPARE(cancel_request)
ORDO_MESSAGE_COMPARE(stop_sequence)
ORDO_MESSAGE_COMPARE(evict_request)
ORDO_MESSAGE_COMPARE(evict_result)
ORDO_MESSAGE_COMPARE(media_span)
// step.hpp
ORDO_MESSAGE_COMPARE(scheduled_request)
ORDO_MESSAGE_COMPARE(step_plan)
ORDO_MESSAGE_COMPARE(sampled_token)
ORDO_MESSAGE_COMPARE(step_done)
ORDO_MESSAGE_COMPARE(state_image_copy)
ORDO_MESSAGE_COMPARE(unit_transfer)
// pool.hpp
ORDO_MESSAGE_COMPARE(block_commit)
ORDO_MESSAGE_COMPARE(block_grow)
ORDO_MESSAGE_COMPARE(pool_step)
ORDO_MESSAGE_COMPARE(grow_result)
ORDO_MESSAGE_COMPARE(pool_step_done)
ORDO_MESSAGE_COMPARE(checkpoint_position)
ORDO_MESSAGE_COMPARE(reserved_image)
ORDO_MESSAGE_COMPARE(image_unpin)
// connector.hpp
ORDO_MESSAGE_COMPARE(connector_lookup)
ORDO_MESSAGE_COMPARE(connector_lookup_done)
ORDO_MESSAGE_COMPARE(kv_object)
ORDO_MESSAGE_COMPARE(transfer_order)
ORDO_MESSAGE_COMPARE(transfer_result)
ORDO_MESSAGE_COMPARE(connector_step)
ORDO_MESSAGE_COMPARE(transfer_grant)
ORDO_MESSAGE_COMPARE(connector_step_done)
ORDO_MESSAGE_COMPARE(lease_order)
ORDO_MESSAGE_COMPARE(lease_grant)
// store.hpp
ORDO_MESSAGE_COMPARE(object_key)
ORDO_MESSAGE_COMPARE(store_contains)
ORDO_MESSAGE_COMPARE(store_contains_done)
ORDO_MESSAGE_COMPARE(store_stats)
ORDO_MESSAGE_COMPARE(object_ref)
ORDO_MESSAGE_COMPARE(store_grant)
ORDO_MESSAGE_COMPARE(store_step)
ORDO_MESSAGE_COMPARE(store_step_done)
ORDO_MESSAGE_COMPARE(store_corrupt)
ORDO_MESSAGE_COMPARE(store_hello)
ORDO_MESSAGE_COMPARE(store_welcome)
ORDO_MESSAGE_COMPARE(store_read)
ORDO_MESSAGE_COMPARE(store_read_done)
ORDO_MESSAGE_COMPARE(store_write)
ORDO_MESSAGE_COMPARE(store_write_done)
ORDO_MESSAGE_COMPARE(store_lease)

#undef ORDO_MESSAGE_COMPARE
#undef ORDO_MESSAGE_NE_PRINT

} // namespace ordo
