// One declaration of a message struct's fields, by name: ORDO_FIELDS generates CAF 0.17's
// `inspect` (positional, as CAF needs it) and a named visitor `for_each_field`, which drives the
// Cap'n Proto converter (messages/capnp_convert.cpp), equality and printing (messages/compare.hpp
// through inspect) and the tests.
//
//   struct media_span { int32_t offset = 0; int32_t length = 0; uint64_t hash = 0; };
//   ORDO_FIELDS(media_span, offset, length, hash)
//
// expands, in the struct's namespace, to
//
//   template <class Inspector>
//   typename Inspector::result_type inspect(Inspector& f, media_span& x) {
//     return f(x.offset, x.length, x.hash);
//   }
//   template <class F> void for_each_field(media_span& x, F&& f);       // f(field_name, x.offset)…
//   template <class F> void for_each_field(const media_span& x, F&& f); // same, const members
//
// The wire (Cap'n Proto) name of a field is the camelCase of its C++ name (`cache_salt` →
// `cacheSalt`). A field whose capnp name differs is written `(cpp_name, wireName)`:
//
//   ORDO_FIELDS(some_struct, request_id, (reason_kind, kindOfReason))
//
// Adding a field to a message: the struct member, its name in the ORDO_FIELDS line (in order:
// CAF serializes by position), and a field appended to the struct in messages/ordo.capnp.
// Supports up to 32 fields per struct. No CAF include: the generated inspect is a template.
#pragma once

#include <cstddef>

namespace ordo {

// What for_each_field passes for each field: its C++ name, and its wire name when the
// declaration gave one (nullptr: the camelCase of `cpp`).
struct field_name {
  const char* cpp;
  const char* wire;
};

} // namespace ordo

// --- preprocessor machinery -------------------------------------------------------------------

#define ORDO_PP_CAT(a, b) ORDO_PP_CAT_I(a, b)
#define ORDO_PP_CAT_I(a, b) a##b

// 1 when the argument is parenthesized, else 0.
#define ORDO_PP_IS_PAREN(x) ORDO_PP_IS_PAREN_CHECK(ORDO_PP_IS_PAREN_PROBE x)
#define ORDO_PP_IS_PAREN_PROBE(...) ~, 1
#define ORDO_PP_IS_PAREN_CHECK(...) ORDO_PP_IS_PAREN_CHECK_N(__VA_ARGS__, 0, ~)
#define ORDO_PP_IS_PAREN_CHECK_N(x, n, ...) n

#define ORDO_PP_NARGS(...) ORDO_PP_NARGS_I(__VA_ARGS__, 32,31,30,29,28,27,26,25,24,23,22,21,20,19,18,17,16,15,14,13,12,11,10,9,8,7,6,5,4,3,2,1, ~)
#define ORDO_PP_NARGS_I(_1,_2,_3,_4,_5,_6,_7,_8,_9,_10,_11,_12,_13,_14,_15,_16,_17,_18,_19,_20,_21,_22,_23,_24,_25,_26,_27,_28,_29,_30,_31,_32, n, ...) n

// m(e) for each e, juxtaposed.
#define ORDO_PP_FOR_EACH(m, ...) ORDO_PP_CAT(ORDO_PP_FE_, ORDO_PP_NARGS(__VA_ARGS__))(m, __VA_ARGS__)
#define ORDO_PP_FE_1(m, e) m(e)
#define ORDO_PP_FE_2(m, e, ...) m(e) ORDO_PP_FE_1(m, __VA_ARGS__)
#define ORDO_PP_FE_3(m, e, ...) m(e) ORDO_PP_FE_2(m, __VA_ARGS__)
#define ORDO_PP_FE_4(m, e, ...) m(e) ORDO_PP_FE_3(m, __VA_ARGS__)
#define ORDO_PP_FE_5(m, e, ...) m(e) ORDO_PP_FE_4(m, __VA_ARGS__)
#define ORDO_PP_FE_6(m, e, ...) m(e) ORDO_PP_FE_5(m, __VA_ARGS__)
#define ORDO_PP_FE_7(m, e, ...) m(e) ORDO_PP_FE_6(m, __VA_ARGS__)
#define ORDO_PP_FE_8(m, e, ...) m(e) ORDO_PP_FE_7(m, __VA_ARGS__)
#define ORDO_PP_FE_9(m, e, ...) m(e) ORDO_PP_FE_8(m, __VA_ARGS__)
#define ORDO_PP_FE_10(m, e, ...) m(e) ORDO_PP_FE_9(m, __VA_ARGS__)
#define ORDO_PP_FE_11(m, e, ...) m(e) ORDO_PP_FE_10(m, __VA_ARGS__)
#define ORDO_PP_FE_12(m, e, ...) m(e) ORDO_PP_FE_11(m, __VA_ARGS__)
#define ORDO_PP_FE_13(m, e, ...) m(e) ORDO_PP_FE_12(m, __VA_ARGS__)
#define ORDO_PP_FE_14(m, e, ...) m(e) ORDO_PP_FE_13(m, __VA_ARGS__)
#define ORDO_PP_FE_15(m, e, ...) m(e) ORDO_PP_FE_14(m, __VA_ARGS__)
#define ORDO_PP_FE_16(m, e, ...) m(e) ORDO_PP_FE_15(m, __VA_ARGS__)
#define ORDO_PP_FE_17(m, e, ...) m(e) ORDO_PP_FE_16(m, __VA_ARGS__)
#define ORDO_PP_FE_18(m, e, ...) m(e) ORDO_PP_FE_17(m, __VA_ARGS__)
#define ORDO_PP_FE_19(m, e, ...) m(e) ORDO_PP_FE_18(m, __VA_ARGS__)
#define ORDO_PP_FE_20(m, e, ...) m(e) ORDO_PP_FE_19(m, __VA_ARGS__)
#define ORDO_PP_FE_21(m, e, ...) m(e) ORDO_PP_FE_20(m, __VA_ARGS__)
#define ORDO_PP_FE_22(m, e, ...) m(e) ORDO_PP_FE_21(m, __VA_ARGS__)
#define ORDO_PP_FE_23(m, e, ...) m(e) ORDO_PP_FE_22(m, __VA_ARGS__)
#define ORDO_PP_FE_24(m, e, ...) m(e) ORDO_PP_FE_23(m, __VA_ARGS__)
#define ORDO_PP_FE_25(m, e, ...) m(e) ORDO_PP_FE_24(m, __VA_ARGS__)
#define ORDO_PP_FE_26(m, e, ...) m(e) ORDO_PP_FE_25(m, __VA_ARGS__)
#define ORDO_PP_FE_27(m, e, ...) m(e) ORDO_PP_FE_26(m, __VA_ARGS__)
#define ORDO_PP_FE_28(m, e, ...) m(e) ORDO_PP_FE_27(m, __VA_ARGS__)
#define ORDO_PP_FE_29(m, e, ...) m(e) ORDO_PP_FE_28(m, __VA_ARGS__)
#define ORDO_PP_FE_30(m, e, ...) m(e) ORDO_PP_FE_29(m, __VA_ARGS__)
#define ORDO_PP_FE_31(m, e, ...) m(e) ORDO_PP_FE_30(m, __VA_ARGS__)
#define ORDO_PP_FE_32(m, e, ...) m(e) ORDO_PP_FE_31(m, __VA_ARGS__)

// m(e) for each e, separated by commas.
#define ORDO_PP_FOR_EACH_COMMA(m, ...) ORDO_PP_CAT(ORDO_PP_FEC_, ORDO_PP_NARGS(__VA_ARGS__))(m, __VA_ARGS__)
#define ORDO_PP_FEC_1(m, e) m(e)
#define ORDO_PP_FEC_2(m, e, ...) m(e), ORDO_PP_FEC_1(m, __VA_ARGS__)
#define ORDO_PP_FEC_3(m, e, ...) m(e), ORDO_PP_FEC_2(m, __VA_ARGS__)
#define ORDO_PP_FEC_4(m, e, ...) m(e), ORDO_PP_FEC_3(m, __VA_ARGS__)
#define ORDO_PP_FEC_5(m, e, ...) m(e), ORDO_PP_FEC_4(m, __VA_ARGS__)
#define ORDO_PP_FEC_6(m, e, ...) m(e), ORDO_PP_FEC_5(m, __VA_ARGS__)
#define ORDO_PP_FEC_7(m, e, ...) m(e), ORDO_PP_FEC_6(m, __VA_ARGS__)
#define ORDO_PP_FEC_8(m, e, ...) m(e), ORDO_PP_FEC_7(m, __VA_ARGS__)
#define ORDO_PP_FEC_9(m, e, ...) m(e), ORDO_PP_FEC_8(m, __VA_ARGS__)
#define ORDO_PP_FEC_10(m, e, ...) m(e), ORDO_PP_FEC_9(m, __VA_ARGS__)
#define ORDO_PP_FEC_11(m, e, ...) m(e), ORDO_PP_FEC_10(m, __VA_ARGS__)
#define ORDO_PP_FEC_12(m, e, ...) m(e), ORDO_PP_FEC_11(m, __VA_ARGS__)
#define ORDO_PP_FEC_13(m, e, ...) m(e), ORDO_PP_FEC_12(m, __VA_ARGS__)
#define ORDO_PP_FEC_14(m, e, ...) m(e), ORDO_PP_FEC_13(m, __VA_ARGS__)
#define ORDO_PP_FEC_15(m, e, ...) m(e), ORDO_PP_FEC_14(m, __VA_ARGS__)
#define ORDO_PP_FEC_16(m, e, ...) m(e), ORDO_PP_FEC_15(m, __VA_ARGS__)
#define ORDO_PP_FEC_17(m, e, ...) m(e), ORDO_PP_FEC_16(m, __VA_ARGS__)
#define ORDO_PP_FEC_18(m, e, ...) m(e), ORDO_PP_FEC_17(m, __VA_ARGS__)
#define ORDO_PP_FEC_19(m, e, ...) m(e), ORDO_PP_FEC_18(m, __VA_ARGS__)
#define ORDO_PP_FEC_20(m, e, ...) m(e), ORDO_PP_FEC_19(m, __VA_ARGS__)
#define ORDO_PP_FEC_21(m, e, ...) m(e), ORDO_PP_FEC_20(m, __VA_ARGS__)
#define ORDO_PP_FEC_22(m, e, ...) m(e), ORDO_PP_FEC_21(m, __VA_ARGS__)
#define ORDO_PP_FEC_23(m, e, ...) m(e), ORDO_PP_FEC_22(m, __VA_ARGS__)
#define ORDO_PP_FEC_24(m, e, ...) m(e), ORDO_PP_FEC_23(m, __VA_ARGS__)
#define ORDO_PP_FEC_25(m, e, ...) m(e), ORDO_PP_FEC_24(m, __VA_ARGS__)
#define ORDO_PP_FEC_26(m, e, ...) m(e), ORDO_PP_FEC_25(m, __VA_ARGS__)
#define ORDO_PP_FEC_27(m, e, ...) m(e), ORDO_PP_FEC_26(m, __VA_ARGS__)
#define ORDO_PP_FEC_28(m, e, ...) m(e), ORDO_PP_FEC_27(m, __VA_ARGS__)
#define ORDO_PP_FEC_29(m, e, ...) m(e), ORDO_PP_FEC_28(m, __VA_ARGS__)
#define ORDO_PP_FEC_30(m, e, ...) m(e), ORDO_PP_FEC_29(m, __VA_ARGS__)
#define ORDO_PP_FEC_31(m, e, ...) m(e), ORDO_PP_FEC_30(m, __VA_ARGS__)
#define ORDO_PP_FEC_32(m, e, ...) m(e), ORDO_PP_FEC_31(m, __VA_ARGS__)

// A field entry is `name` or `(name, wireName)`.
#define ORDO_FIELD_MEMBER(e) ORDO_PP_CAT(ORDO_FIELD_MEMBER_, ORDO_PP_IS_PAREN(e))(e)
#define ORDO_FIELD_MEMBER_0(e) e
#define ORDO_FIELD_MEMBER_1(e) ORDO_FIELD_MEMBER_PAIR e
#define ORDO_FIELD_MEMBER_PAIR(name, wire) name
#define ORDO_FIELD_NAME(e) ORDO_PP_CAT(ORDO_FIELD_NAME_, ORDO_PP_IS_PAREN(e))(e)
#define ORDO_FIELD_NAME_0(e) ::ordo::field_name{#e, nullptr}
#define ORDO_FIELD_NAME_1(e) ORDO_FIELD_NAME_PAIR e
#define ORDO_FIELD_NAME_PAIR(name, wire) ::ordo::field_name{#name, #wire}

#define ORDO_FIELD_ARG(e) x.ORDO_FIELD_MEMBER(e)
#define ORDO_FIELD_VISIT(e) f(ORDO_FIELD_NAME(e), x.ORDO_FIELD_MEMBER(e));

// Declares the fields of `type`, in order (see the top of this file).
#define ORDO_FIELDS(type, ...)                                                                   \
  template <class Inspector>                                                                     \
  typename Inspector::result_type inspect(Inspector& f, type& x) {                               \
    return f(ORDO_PP_FOR_EACH_COMMA(ORDO_FIELD_ARG, __VA_ARGS__));                               \
  }                                                                                              \
  template <class F>                                                                             \
  void for_each_field(type& x, F&& f) {                                                          \
    ORDO_PP_FOR_EACH(ORDO_FIELD_VISIT, __VA_ARGS__)                                              \
  }                                                                                              \
  template <class F>                                                                             \
  void for_each_field(const type& x, F&& f) {                                                    \
    ORDO_PP_FOR_EACH(ORDO_FIELD_VISIT, __VA_ARGS__)                                              \
  }
