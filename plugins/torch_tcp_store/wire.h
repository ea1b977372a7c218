// SPDX-License-Identifier: Apache-2.0
// torch's TCPStore wire protocol, as a client speaks it, for both generations a server
// may speak: torch 1.x (no handshake; SET is query 0) and torch 2.x (every connection
// opens with VALIDATE and a magic number; every query type one higher than 1.x's, and
// APPEND, MULTI_GET, MULTI_SET, CANCEL_WAIT, PING added).
//
// A message is a query byte, then its fields: a string or byte vector as a uint64 length
// and the bytes, an integer as 8 bytes, the magic as 4; all in host byte order, as torch
// writes them (torch runs client and server on little-endian hosts). Replies: a vector
// (GET, COMPARE_SET, MULTI_GET), an int64 (ADD, GETNUMKEYS, DELETE_KEY), one byte (CHECK:
// 0 ready, 1 not; WAIT: 0 when every key exists); SET, APPEND and MULTI_SET have none.
// torch's client puts "/" before every key; this client does the same, so keys set here
// are the keys a torch script sees.
#pragma once

#include <cstdint>
#include <string>

#include "commhost/store.h"

namespace commhost::torchtcp {

enum class Protocol { Torch1, Torch2 };
const char* protocolName(Protocol p);

// Queries in torch 2.x's numbering (TCPStoreBackend.hpp).
enum class Query : uint8_t {
  Validate,
  Set,
  CompareSet,
  Get,
  Add,
  Check,
  Wait,
  GetNumKeys,
  DeleteKey,
  Append,
  MultiGet,
  MultiSet,
  CancelWait,
  Ping,
};

constexpr uint32_t kValidateMagic = 0x3C85F7CE;
constexpr const char* kKeyPrefix = "/";

// The byte `q` is sent as under `p`; false when `p` has no such query (1.x: Validate,
// Append, MultiGet, MultiSet, CancelWait, Ping).
bool queryByte(Protocol p, Query q, uint8_t* out);

// Builds one message.
class Message {
 public:
  Message(Protocol p, Query q);  // throws InvalidArgument when `p` lacks `q`
  Message& key(const std::string& k) { return str(kKeyPrefix + k); }
  Message& str(const std::string& s);
  Message& bytes(const Bytes& b);
  Message& i64(int64_t v);
  Message& u64(uint64_t v);
  Message& u32(uint32_t v);
  const std::string& data() const { return data_; }

 private:
  std::string data_;
};

// The probe that tells the generations apart without side effects: 1.x reads byte 6 as
// GETNUMKEYS and answers an int64; 2.x closes a connection whose first message is not
// VALIDATE. (A 2.x VALIDATE sent to a 1.x server would be read as a SET whose key length
// is made of the magic's bytes: a multi-gigabyte allocation in the job's store.)
constexpr uint8_t kProbeByte = 6;

}  // namespace commhost::torchtcp
