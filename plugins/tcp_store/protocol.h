// SPDX-License-Identifier: Apache-2.0
// The tcp store's wire format, shared by server and client.
//
// Every message is one frame: a 4-byte magic that carries the protocol version
// ("CHS" + version byte), a 4-byte little-endian body length, then the body. A request
// body is an opcode byte and its fields; a response body is a status byte and its
// fields. Fields are u64 integers or length-prefixed byte strings (u32 length), so keys
// and values are binary-safe. Frames larger than the configured maximum are refused.
//
// FrameReader never reads past its buffer: any malformed body throws ProtocolError,
// and the server then closes only that connection.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "commhost/store.h"

namespace commhost::tcpstore {

constexpr uint32_t kMagic = 0x01534843;  // "CHS" + version 1, little-endian
constexpr size_t kHeaderSize = 8;
// The largest auth frame body (opcode, token length, token). When the server has a token,
// a connection's first frame must be auth, so this caps what an unauthenticated peer can
// make the server buffer.
constexpr uint32_t kMaxAuthBody = 4096;

enum class Op : uint8_t {
  Auth = 1,
  Set,
  Get,
  Add,
  CompareSet,
  Wait,
  Check,
  Delete,
  NumKeys,
  MultiGet,
  MultiSet,
  Append,
  Ping,
};
const char* opName(Op op);

enum class Status : uint8_t { Ok = 0, Timeout = 1, Error = 2 };

class ProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Validates a frame header; returns the body length. Throws ProtocolError for a wrong
// magic (naming what it saw, e.g. an HTTP request) or a body over `maxBody`.
uint32_t parseHeader(const uint8_t* header, uint32_t maxBody);

class FrameWriter {
 public:
  FrameWriter() {
    buffer_.reserve(64);
    buffer_.resize(kHeaderSize);
  }
  FrameWriter& u8(uint8_t v) {
    buffer_.push_back(v);
    return *this;
  }
  FrameWriter& u64(uint64_t v);
  FrameWriter& bytes(const uint8_t* data, size_t size);
  FrameWriter& bytes(const Bytes& b) { return bytes(b.data(), b.size()); }
  FrameWriter& str(const std::string& s) { return bytes(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }
  FrameWriter& strings(const std::vector<std::string>& list);
  // Fills in the header and returns the whole frame.
  const std::vector<uint8_t>& finish();

 private:
  std::vector<uint8_t> buffer_;
};

class FrameReader {
 public:
  FrameReader(const uint8_t* body, size_t size) : p_(body), end_(body + size) {}
  uint8_t u8();
  uint64_t u64();
  Bytes bytes();
  std::string str();
  std::vector<std::string> strings();
  // Throws ProtocolError unless the whole body was consumed.
  void end() const;

 private:
  void need(size_t n) const;
  const uint8_t* p_;
  const uint8_t* end_;
};

// One request, decoded. Which fields an op uses:
//   auth: token | set, append: key, value | get: key, timeout | add: key, delta
//   compare_set: key, expected, desired | wait, multi_get: keys, timeout | check: keys
//   delete: key | multi_set: keys, values | num_keys, ping: nothing
struct Request {
  Op op = Op::Ping;
  std::vector<std::string> keys;  // `key` is keys[0]
  std::vector<Bytes> values;      // `value` / `expected`, `desired` are values[0], values[1]
  int64_t delta = 0;
  uint64_t timeoutMs = 0;
  std::string token;
};

// The frame for a request. The client's only way to build one.
std::vector<uint8_t> encodeRequest(const Request& request);
// The request in a frame body; throws ProtocolError for anything malformed. The
// server's only way to read one (and the fuzzing target's entry point).
Request decodeRequest(const uint8_t* body, size_t size);

}  // namespace commhost::tcpstore
