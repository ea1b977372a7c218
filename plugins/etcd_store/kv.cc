// SPDX-License-Identifier: Apache-2.0
#include "kv.h"

#include <stdexcept>

namespace commhost::etcdstore {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

template <class Range> std::string encode(const Range& in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t n = static_cast<uint8_t>(in[i]) << 16 | static_cast<uint8_t>(in[i + 1]) << 8 |
                       static_cast<uint8_t>(in[i + 2]);
    out += {kAlphabet[n >> 18], kAlphabet[(n >> 12) & 63], kAlphabet[(n >> 6) & 63], kAlphabet[n & 63]};
  }
  if (i + 1 == in.size()) {
    const uint32_t n = static_cast<uint8_t>(in[i]) << 16;
    out += {kAlphabet[n >> 18], kAlphabet[(n >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    const uint32_t n = static_cast<uint8_t>(in[i]) << 16 | static_cast<uint8_t>(in[i + 1]) << 8;
    out += {kAlphabet[n >> 18], kAlphabet[(n >> 12) & 63], kAlphabet[(n >> 6) & 63], '='};
  }
  return out;
}

int sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

}  // namespace

std::string base64(const std::string& bytes) { return encode(bytes); }
std::string base64(const Bytes& bytes) { return encode(bytes); }

Bytes unbase64(const std::string& text) {
  Bytes out;
  out.reserve(text.size() / 4 * 3);
  uint32_t bits = 0;
  int count = 0;
  for (char c : text) {
    if (c == '=') break;
    const int v = sextet(c);
    if (v < 0) throw std::invalid_argument("not base64: '" + text.substr(0, 40) + "'");
    bits = bits << 6 | static_cast<uint32_t>(v);
    if (++count == 4) {
      out.push_back(static_cast<uint8_t>(bits >> 16));
      out.push_back(static_cast<uint8_t>(bits >> 8));
      out.push_back(static_cast<uint8_t>(bits));
      bits = 0;
      count = 0;
    }
  }
  if (count == 2) out.push_back(static_cast<uint8_t>(bits >> 4));
  if (count == 3) {
    out.push_back(static_cast<uint8_t>(bits >> 10));
    out.push_back(static_cast<uint8_t>(bits >> 2));
  }
  return out;
}

std::string prefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<uint8_t>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<uint8_t>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

int64_t int64Field(const nlohmann::json& object, const char* field) {
  const auto it = object.find(field);
  if (it == object.end()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  return std::stoll(it->get<std::string>());
}

nlohmann::json rangeRequest(const std::string& key, bool keysOnly) {
  nlohmann::json r = {{"key", base64(key)}};
  if (keysOnly) r["keys_only"] = true;
  return r;
}

nlohmann::json putRequest(const std::string& key, const Bytes& value, int64_t lease) {
  nlohmann::json r = {{"key", base64(key)}, {"value", base64(value)}};
  if (lease != 0) r["lease"] = std::to_string(lease);
  return r;
}

nlohmann::json absentCompare(const std::string& key) {
  return {{"key", base64(key)}, {"target", "VERSION"}, {"result", "EQUAL"}, {"version", "0"}};
}

nlohmann::json modRevisionCompare(const std::string& key, int64_t modRevision) {
  return {{"key", base64(key)}, {"target", "MOD"}, {"result", "EQUAL"}, {"mod_revision", std::to_string(modRevision)}};
}

nlohmann::json valueCompare(const std::string& key, const Bytes& value) {
  return {{"key", base64(key)}, {"target", "VALUE"}, {"result", "EQUAL"}, {"value", base64(value)}};
}

std::optional<KeyValue> singleKey(const nlohmann::json& rangeAnswer) {
  const auto kvs = rangeAnswer.find("kvs");
  if (kvs == rangeAnswer.end() || kvs->empty()) return std::nullopt;
  const nlohmann::json& kv = kvs->at(0);
  return KeyValue{unbase64(kv.value("value", std::string())), int64Field(kv, "mod_revision")};
}

const nlohmann::json& txnRange(const nlohmann::json& txnAnswer, size_t i) {
  return txnAnswer.at("responses").at(i).at("response_range");
}

}  // namespace commhost::etcdstore
