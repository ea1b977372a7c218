// SPDX-License-Identifier: Apache-2.0
#include "protocol.h"

#include <cstring>

namespace commhost::tcpstore {
namespace {

uint32_t loadU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

void storeU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// A list may not claim more entries than its bytes could hold (4 bytes each at least),
// so a hostile count cannot make the reader reserve memory.
constexpr uint64_t kMinEntryBytes = 4;

}  // namespace

const char* opName(Op op) {
  switch (op) {
    case Op::Auth: return "auth";
    case Op::Set: return "set";
    case Op::Get: return "get";
    case Op::Add: return "add";
    case Op::CompareSet: return "compare_set";
    case Op::Wait: return "wait";
    case Op::Check: return "check";
    case Op::Delete: return "delete";
    case Op::NumKeys: return "num_keys";
    case Op::MultiGet: return "multi_get";
    case Op::MultiSet: return "multi_set";
    case Op::Append: return "append";
    case Op::Ping: return "ping";
  }
  return "unknown";
}

uint32_t parseHeader(const uint8_t* header, uint32_t maxBody) {
  const uint32_t magic = loadU32(header);
  if (magic != kMagic) {
    std::string seen;
    for (int i = 0; i < 4; ++i) seen += (header[i] >= 32 && header[i] < 127) ? static_cast<char>(header[i]) : '.';
    if ((magic & 0x00ffffffu) == (kMagic & 0x00ffffffu))
      throw ProtocolError("protocol version " + std::to_string(header[3]) + " is not supported (this server speaks " +
                          std::to_string(kMagic >> 24) + "); use the same commhost version on every rank");
    throw ProtocolError("not a commhost store frame (starts with \"" + seen + "\")");
  }
  const uint32_t length = loadU32(header + 4);
  if (length > maxBody)
    throw ProtocolError("frame of " + std::to_string(length) + " bytes is over the limit of " +
                        std::to_string(maxBody) + " (store option max_frame)");
  if (length == 0) throw ProtocolError("empty frame");
  return length;
}

FrameWriter& FrameWriter::u64(uint64_t v) {
  for (int i = 0; i < 8; ++i) buffer_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  return *this;
}

FrameWriter& FrameWriter::bytes(const uint8_t* data, size_t size) {
  uint8_t len[4];
  storeU32(len, static_cast<uint32_t>(size));
  buffer_.insert(buffer_.end(), len, len + 4);
  buffer_.insert(buffer_.end(), data, data + size);
  return *this;
}

FrameWriter& FrameWriter::strings(const std::vector<std::string>& list) {
  u64(list.size());
  for (const auto& s : list) str(s);
  return *this;
}

const std::vector<uint8_t>& FrameWriter::finish() {
  storeU32(buffer_.data(), kMagic);
  storeU32(buffer_.data() + 4, static_cast<uint32_t>(buffer_.size() - kHeaderSize));
  return buffer_;
}

void FrameReader::need(size_t n) const {
  if (static_cast<size_t>(end_ - p_) < n)
    throw ProtocolError("truncated frame: needed " + std::to_string(n) + " more bytes, " + std::to_string(end_ - p_) +
                        " left");
}

uint8_t FrameReader::u8() {
  need(1);
  return *p_++;
}

uint64_t FrameReader::u64() {
  need(8);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p_[i]) << (8 * i);
  p_ += 8;
  return v;
}

Bytes FrameReader::bytes() {
  need(4);
  const uint32_t len = loadU32(p_);
  p_ += 4;
  need(len);
  Bytes out(p_, p_ + len);
  p_ += len;
  return out;
}

std::string FrameReader::str() {
  const Bytes b = bytes();
  return std::string(b.begin(), b.end());
}

std::vector<std::string> FrameReader::strings() {
  const uint64_t count = u64();
  if (count > static_cast<uint64_t>(end_ - p_) / kMinEntryBytes)
    throw ProtocolError("list claims " + std::to_string(count) + " entries but the frame is too short for them");
  std::vector<std::string> out;
  out.reserve(count);
  for (uint64_t i = 0; i < count; ++i) out.push_back(str());
  return out;
}

void FrameReader::end() const {
  if (p_ != end_) throw ProtocolError(std::to_string(end_ - p_) + " unexpected bytes at the end of a frame");
}

std::vector<uint8_t> encodeRequest(const Request& r) {
  FrameWriter f;
  f.u8(static_cast<uint8_t>(r.op));
  switch (r.op) {
    case Op::Auth: f.str(r.token); break;
    case Op::Set:
    case Op::Append: f.str(r.keys.at(0)).bytes(r.values.at(0)); break;
    case Op::Get: f.str(r.keys.at(0)).u64(r.timeoutMs); break;
    case Op::Add: f.str(r.keys.at(0)).u64(static_cast<uint64_t>(r.delta)); break;
    case Op::CompareSet: f.str(r.keys.at(0)).bytes(r.values.at(0)).bytes(r.values.at(1)); break;
    case Op::Wait:
    case Op::MultiGet: f.strings(r.keys).u64(r.timeoutMs); break;
    case Op::Check: f.strings(r.keys); break;
    case Op::Delete: f.str(r.keys.at(0)); break;
    case Op::MultiSet:
      f.strings(r.keys).u64(r.values.size());
      for (const auto& v : r.values) f.bytes(v);
      break;
    case Op::NumKeys:
    case Op::Ping: break;
  }
  return f.finish();
}

Request decodeRequest(const uint8_t* body, size_t size) {
  FrameReader in(body, size);
  Request r;
  const uint8_t op = in.u8();
  if (op < static_cast<uint8_t>(Op::Auth) || op > static_cast<uint8_t>(Op::Ping))
    throw ProtocolError("unknown request opcode " + std::to_string(op));
  r.op = static_cast<Op>(op);
  switch (r.op) {
    case Op::Auth: r.token = in.str(); break;
    case Op::Set:
    case Op::Append:
      r.keys.push_back(in.str());
      r.values.push_back(in.bytes());
      break;
    case Op::Get:
      r.keys.push_back(in.str());
      r.timeoutMs = in.u64();
      break;
    case Op::Add:
      r.keys.push_back(in.str());
      r.delta = static_cast<int64_t>(in.u64());
      break;
    case Op::CompareSet:
      r.keys.push_back(in.str());
      r.values.push_back(in.bytes());
      r.values.push_back(in.bytes());
      break;
    case Op::Wait:
    case Op::MultiGet:
      r.keys = in.strings();
      r.timeoutMs = in.u64();
      break;
    case Op::Check: r.keys = in.strings(); break;
    case Op::Delete: r.keys.push_back(in.str()); break;
    case Op::MultiSet: {
      r.keys = in.strings();
      const uint64_t count = in.u64();
      if (count != r.keys.size())
        throw ProtocolError("multi_set with " + std::to_string(r.keys.size()) + " keys but " + std::to_string(count) +
                            " values");
      for (uint64_t i = 0; i < count; ++i) r.values.push_back(in.bytes());
      break;
    }
    case Op::NumKeys:
    case Op::Ping: break;
  }
  in.end();
  return r;
}

}  // namespace commhost::tcpstore
