// One generic converter: walks a message struct's ORDO_FIELDS declaration (for_each_field) and
// writes or reads each field through Cap'n Proto's dynamic API, matching it to the capnp field
// of the same name (never by ordinal). Per struct, the name → capnp field table is built and
// type-checked once, on first use.
#include "messages/capnp_convert.hpp"

#include <cctype>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include <capnp/dynamic.h>
#include <capnp/message.h>
#include <capnp/schema.h>
#include <capnp/serialize.h>
#include <kj/array.h>
#include <kj/exception.h>

namespace ordo {

namespace {

template <class T>
struct is_vector : std::false_type {};
template <class T, class A>
struct is_vector<std::vector<T, A>> : std::true_type {};

struct any_field {
  template <class V>
  void operator()(field_name, const V&) const {}
};

// A message struct: one that has an ORDO_FIELDS declaration.
template <class T, class = void>
struct is_message : std::false_type {};
template <class T>
struct is_message<T, std::void_t<decltype(for_each_field(std::declval<const T&>(), any_field{}))>>
    : std::true_type {};

template <class T>
using wire_of = typename wire_type<T>::type;

// `cache_salt` → `cacheSalt`.
std::string camel_case(const char* snake) {
  std::string out;
  bool upper = false;
  for (const char* p = snake; *p; ++p) {
    if (*p == '_') {
      upper = true;
    } else {
      out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(*p))) : *p;
      upper = false;
    }
  }
  return out;
}

std::string wire_name(field_name n) {
  return n.wire ? std::string(n.wire) : camel_case(n.cpp);
}

// The capnp type an integer or floating C++ type is stored as, exactly.
template <class V>
constexpr capnp::schema::Type::Which scalar_which() {
  using W = capnp::schema::Type::Which;
  if constexpr (std::is_same_v<V, bool>)
    return W::BOOL;
  else if constexpr (std::is_same_v<V, float>)
    return W::FLOAT32;
  else if constexpr (std::is_same_v<V, double>)
    return W::FLOAT64;
  else if constexpr (std::is_integral_v<V> && std::is_signed_v<V>)
    return sizeof(V) == 1   ? W::INT8
           : sizeof(V) == 2 ? W::INT16
           : sizeof(V) == 4 ? W::INT32
                            : W::INT64;
  else if constexpr (std::is_integral_v<V>)
    return sizeof(V) == 1   ? W::UINT8
           : sizeof(V) == 2 ? W::UINT16
           : sizeof(V) == 4 ? W::UINT32
                            : W::UINT64;
  else
    static_assert(sizeof(V) == 0, "capnp_convert: unsupported scalar type");
}

// Whether an integer capnp type holds every value of the C++ integer type U.
template <class U>
bool holds(capnp::schema::Type::Which w) {
  using W = capnp::schema::Type::Which;
  switch (w) {
  case W::INT8: return std::is_signed_v<U> && sizeof(U) <= 1;
  case W::INT16: return std::is_signed_v<U> ? sizeof(U) <= 2 : sizeof(U) <= 1;
  case W::INT32: return std::is_signed_v<U> ? sizeof(U) <= 4 : sizeof(U) <= 2;
  case W::INT64: return std::is_signed_v<U> ? sizeof(U) <= 8 : sizeof(U) <= 4;
  case W::UINT8: return !std::is_signed_v<U> && sizeof(U) <= 1;
  case W::UINT16: return !std::is_signed_v<U> && sizeof(U) <= 2;
  case W::UINT32: return !std::is_signed_v<U> && sizeof(U) <= 4;
  case W::UINT64: return !std::is_signed_v<U>;
  default: return false;
  }
}

// Whether a C++ field of type V converts to and from capnp type `t` without loss.
template <class V>
bool fits(capnp::Type t) {
  using W = capnp::schema::Type::Which;
  if constexpr (is_message<V>::value) {
    return t.isStruct() && t.asStruct() == capnp::Schema::from<wire_of<V>>();
  } else if constexpr (is_vector<V>::value) {
    return t.isList() && fits<typename V::value_type>(t.asList().getElementType());
  } else if constexpr (std::is_same_v<V, std::string>) {
    return t.which() == W::TEXT || t.which() == W::DATA;
  } else if constexpr (std::is_enum_v<V>) {
    using U = std::underlying_type_t<V>;
    return t.isEnum() ? sizeof(U) <= sizeof(uint16_t) : holds<U>(t.which());
  } else {
    return t.which() == scalar_which<V>();
  }
}

// The capnp field of each of T's fields, in declaration order.
template <class T>
std::vector<capnp::StructSchema::Field> build_table() {
  const capnp::StructSchema schema = capnp::Schema::from<wire_of<T>>();
  const std::string where = std::string("capnp_convert: ") + wire_type<T>::name + ".";
  const std::string wire_struct = std::string(schema.getUnqualifiedName().cStr());
  std::vector<capnp::StructSchema::Field> table;
  const T probe{};
  for_each_field(probe, [&](field_name n, const auto& member) {
    using V = std::decay_t<decltype(member)>;
    const std::string wire = wire_name(n);
    KJ_IF_MAYBE (f, schema.findFieldByName(wire)) {
      auto proto = f->getProto();
      if (proto.isGroup() || proto.getDiscriminantValue() != capnp::schema::Field::NO_DISCRIMINANT)
        throw std::logic_error(where + n.cpp + ": wire field " + wire_struct + "." + wire +
                               " is a group or union member, which the converter does not map");
      if (!fits<V>(f->getType()))
        throw std::logic_error(where + n.cpp + ": wire field " + wire_struct + "." + wire +
                               " has a type the C++ field does not convert to exactly");
      for (const auto& seen : table)
        if (seen == *f)
          throw std::logic_error(where + n.cpp + ": wire field " + wire_struct + "." + wire +
                                 " is already mapped by another C++ field");
      table.push_back(*f);
    } else {
      throw std::logic_error(where + n.cpp + ": no field `" + wire + "` in wire struct " +
                             wire_struct + " (append it to messages/ordo.capnp, or give the "
                             "wire name in the struct's ORDO_FIELDS line)");
    }
  });
  return table;
}

template <class T>
const std::vector<capnp::StructSchema::Field>& field_table() {
  static const std::vector<capnp::StructSchema::Field> table = build_table<T>();
  return table;
}

unsigned list_size(size_t n) {
  if (n > std::numeric_limits<uint32_t>::max() / 2)
    throw std::length_error("capnp_convert: list of " + std::to_string(n) + " elements");
  return static_cast<unsigned>(n);
}

// --- writing ----------------------------------------------------------------------------------

template <class T>
void write_struct(const T& x, capnp::DynamicStruct::Builder b);

// A scalar (number, bool, enum, string) as a value of capnp type `t`.
template <class V>
capnp::DynamicValue::Reader scalar(const V& v, capnp::Type t) {
  if constexpr (std::is_same_v<V, std::string>) {
    if (t.which() == capnp::schema::Type::DATA)
      return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(v.data()), v.size());
    // std::string keeps a NUL after its data, which Text::Reader requires.
    return capnp::Text::Reader(v.c_str(), v.size());
  } else if constexpr (std::is_enum_v<V>) {
    const auto raw = static_cast<std::underlying_type_t<V>>(v);
    if (t.isEnum())
      return capnp::DynamicEnum(t.asEnum(), static_cast<uint16_t>(raw));
    return raw;
  } else {
    return v;
  }
}

template <class V>
void write_list(capnp::DynamicList::Builder l, const std::vector<V>& v) {
  const capnp::Type element = l.getSchema().getElementType();
  for (unsigned i = 0; i < v.size(); ++i) {
    if constexpr (is_message<V>::value)
      write_struct(v[i], l[i].template as<capnp::DynamicStruct>());
    else if constexpr (is_vector<V>::value)
      write_list(l.init(i, list_size(v[i].size())).template as<capnp::DynamicList>(), v[i]);
    else
      l.set(i, scalar(static_cast<V>(v[i]), element)); // the cast reads std::vector<bool>
  }
}

template <class T>
void write_struct(const T& x, capnp::DynamicStruct::Builder b) {
  const auto& table = field_table<T>();
  size_t i = 0;
  for_each_field(x, [&](field_name, const auto& v) {
    using V = std::decay_t<decltype(v)>;
    const capnp::StructSchema::Field& f = table[i++];
    if constexpr (is_message<V>::value)
      write_struct(v, b.init(f).template as<capnp::DynamicStruct>());
    else if constexpr (is_vector<V>::value)
      write_list(b.init(f, list_size(v.size())).template as<capnp::DynamicList>(), v);
    else
      b.set(f, scalar(v, f.getType()));
  });
}

// --- reading ----------------------------------------------------------------------------------

template <class T>
T read_struct(capnp::DynamicStruct::Reader r);

template <class V>
void read_value(capnp::DynamicValue::Reader r, V& v) {
  if constexpr (is_message<V>::value) {
    v = read_struct<V>(r.as<capnp::DynamicStruct>());
  } else if constexpr (is_vector<V>::value) {
    auto l = r.as<capnp::DynamicList>();
    v.clear();
    v.reserve(l.size());
    for (auto e : l) {
      typename V::value_type x{};
      read_value(e, x);
      v.push_back(std::move(x));
    }
  } else if constexpr (std::is_same_v<V, std::string>) {
    if (r.getType() == capnp::DynamicValue::DATA) {
      auto d = r.as<capnp::Data>();
      v.assign(reinterpret_cast<const char*>(d.begin()), d.size());
    } else {
      auto t = r.as<capnp::Text>();
      v.assign(t.cStr(), t.size());
    }
  } else if constexpr (std::is_enum_v<V>) {
    using U = std::underlying_type_t<V>;
    if (r.getType() == capnp::DynamicValue::ENUM)
      v = static_cast<V>(r.as<capnp::DynamicEnum>().getRaw());
    else
      v = static_cast<V>(r.as<U>());
  } else {
    v = r.as<V>();
  }
}

template <class T>
T read_struct(capnp::DynamicStruct::Reader r) {
  const auto& table = field_table<T>();
  T x;
  size_t i = 0;
  for_each_field(x, [&](field_name, auto& v) { read_value(r.get(table[i++]), v); });
  return x;
}

} // namespace

#define ORDO_DEFINE_CONVERTERS(cpp_type, wire_struct)                                            \
  void to_capnp(const cpp_type& x, wire::wire_struct::Builder b) {                               \
    write_struct(x, capnp::toDynamic(b));                                                        \
  }                                                                                              \
  cpp_type from_capnp(wire::wire_struct::Reader r) {                                             \
    return read_struct<cpp_type>(capnp::toDynamic(r));                                           \
  }

ORDO_FOR_EACH_WIRE_TYPE(ORDO_DEFINE_CONVERTERS)

#undef ORDO_DEFINE_CONVERTERS

// --- whole messages ---------------------------------------------------------------------------

template <class T>
std::vector<uint8_t> encode_message(const T& x) {
  capnp::MallocMessageBuilder builder;
  to_capnp(x, builder.initRoot<typename wire_type<T>::type>());
  auto words = capnp::messageToFlatArray(builder);
  auto bytes = words.asBytes();
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

template <class T>
T decode_message(const std::vector<uint8_t>& bytes) {
  const std::string what = std::string("decode_message<") + wire_type<T>::name + ">: ";
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0)
    throw std::runtime_error(what + "length " + std::to_string(bytes.size()) +
                             " is not a positive multiple of 8 bytes");
  // Copy into word-aligned storage: a std::vector<uint8_t> buffer carries no alignment promise.
  auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  try {
    // A legitimate message reads each word once; the bound stops a few garbage bytes from
    // claiming a huge list of empty structs (capnp charges each element one word).
    capnp::ReaderOptions options;
    options.traversalLimitInWords = 2 * words.size() + 64;
    capnp::FlatArrayMessageReader reader(words, options);
    if (reader.getEnd() != words.end())
      throw std::runtime_error(what + "trailing bytes after the message (" +
                               std::to_string((words.end() - reader.getEnd()) * 8) + " bytes)");
    // Reading every field here makes out-of-bounds pointers throw inside this try block.
    return from_capnp(reader.getRoot<typename wire_type<T>::type>());
  } catch (const kj::Exception& e) {
    throw std::runtime_error(what + "malformed Cap'n Proto message: " +
                             std::string(e.getDescription().cStr()));
  }
}

#define ORDO_INSTANTIATE(cpp_type, wire_struct)                                                  \
  template std::vector<uint8_t> encode_message<cpp_type>(const cpp_type&);                       \
  template cpp_type decode_message<cpp_type>(const std::vector<uint8_t>&);

ORDO_FOR_EACH_WIRE_TYPE(ORDO_INSTANTIATE)

#undef ORDO_INSTANTIATE

} // namespace ordo
