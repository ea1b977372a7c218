// SPDX-License-Identifier: Apache-2.0
#include "wire.h"

#include <cstring>

#include "commhost/errors.h"

namespace commhost::torchtcp {

const char* protocolName(Protocol p) { return p == Protocol::Torch1 ? "torch 1.x" : "torch 2.x"; }

bool queryByte(Protocol p, Query q, uint8_t* out) {
  const auto n = static_cast<uint8_t>(q);
  if (p == Protocol::Torch2) {
    *out = n;
    return true;
  }
  // 1.x: SET .. GETNUMKEYS are 0 .. 6, WATCH_KEY 7 (not used here), DELETE_KEY 8.
  if (q == Query::DeleteKey) {
    *out = 8;
    return true;
  }
  if (q < Query::Set || q > Query::GetNumKeys) return false;
  *out = static_cast<uint8_t>(n - 1);
  return true;
}

Message::Message(Protocol p, Query q) {
  uint8_t byte = 0;
  if (!queryByte(p, q, &byte))
    throw InvalidArgument(std::string("torch_tcp store: a ") + protocolName(p) + " TCPStore has no query " +
                          std::to_string(static_cast<int>(q)) + " (2.x numbering)");
  data_.push_back(static_cast<char>(byte));
}

Message& Message::str(const std::string& s) {
  u64(s.size());
  data_ += s;
  return *this;
}

Message& Message::bytes(const Bytes& b) {
  u64(b.size());
  data_.append(reinterpret_cast<const char*>(b.data()), b.size());
  return *this;
}

Message& Message::i64(int64_t v) {
  char raw[sizeof v];
  std::memcpy(raw, &v, sizeof v);
  data_.append(raw, sizeof v);
  return *this;
}

Message& Message::u64(uint64_t v) { return i64(static_cast<int64_t>(v)); }

Message& Message::u32(uint32_t v) {
  char raw[sizeof v];
  std::memcpy(raw, &v, sizeof v);
  data_.append(raw, sizeof v);
  return *this;
}

}  // namespace commhost::torchtcp
