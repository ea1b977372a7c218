// SPDX-License-Identifier: Apache-2.0
// Internal: the field walkers of the JSON schemas the supervisor writes and tools read
// (dump_schema.cc: flight-recorder dumps; status_schema.cc: job status records).
//
// A schema type lists its JSON names once, in an overload of fields(f, x) in namespace
// commhost (so nlohmann's hooks find it by argument-dependent lookup), which both
// directions walk: the writer with a FieldWriter, the reader with a FieldReader.
//   f("name", x.member)                 every record has it
//   f.optional("name", x.member, none)  written only when it is not `none`
//   f.added("name", x.member)           written always; absent in older records of the
//                                       same version (the reader keeps the default)
// A field present with the wrong type throws (nlohmann::json::exception); a FieldReader
// made `strict` also throws for an absent field that is neither optional nor added.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include <nlohmann/json.hpp>

namespace commhost::schema {

using Json = nlohmann::json;

struct FieldWriter {
  Json& j;
  template <class V> void operator()(const char* key, const V& v) { j[key] = v; }
  template <class V> void optional(const char* key, const V& v, const V& absent) {
    if (!(v == absent)) j[key] = v;
  }
  template <class V> void added(const char* key, const V& v) { j[key] = v; }
  // JSON object keys are strings: peers as decimal text.
  template <class V> void operator()(const char* key, const std::map<int, V>& m) {
    Json o = Json::object();
    for (const auto& [peer, value] : m) o[std::to_string(peer)] = value;
    j[key] = std::move(o);
  }
  template <class V> void operator()(const char* key, const std::optional<V>& v) { j[key] = v ? Json(*v) : Json(); }
};

struct FieldReader {
  const Json& j;
  bool strict = false;
  template <class V> void operator()(const char* key, V& v) {
    if (present(key)) j.at(key).get_to(v);
  }
  template <class V> void optional(const char* key, V& v, const V&) {
    if (j.contains(key)) j.at(key).get_to(v);
  }
  template <class V> void added(const char* key, V& v) {
    if (j.contains(key)) j.at(key).get_to(v);
  }
  template <class V> void operator()(const char* key, std::map<int, V>& m) {
    if (!present(key)) return;
    for (const auto& [peer, value] : j.at(key).items()) m[std::stoi(peer)] = value.template get<V>();
  }
  template <class V> void operator()(const char* key, std::optional<V>& v) {
    if (!present(key)) return;
    if (j.at(key).is_null()) v.reset();
    else v = j.at(key).template get<V>();
  }

 private:
  // Whether to read `key`: absent is fine unless strict (then at() throws, naming it).
  bool present(const char* key) const {
    if (strict) (void)j.at(key);
    return j.contains(key);
  }
};

// fields() overloads take T = the type or const the type (the writer walks a const one,
// the reader a mutable one): `template <class F, class T> Of<T, DumpOp> fields(F&, T&)`.
template <class T, class Type> using Of = std::enable_if_t<std::is_same_v<std::remove_const_t<T>, Type>>;

}  // namespace commhost::schema
