// SPDX-License-Identifier: Apache-2.0
// The JSON shapes of etcd v3's KV API as the gateway speaks them: keys and values in
// base64, 64-bit integers as decimal strings, fields at their default (0, "", false)
// left out of answers.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "commhost/store.h"

namespace commhost::etcdstore {

std::string base64(const std::string& bytes);
std::string base64(const Bytes& bytes);
// Throws std::invalid_argument on text that is not base64.
Bytes unbase64(const std::string& text);

// The range_end that selects every key starting with `prefix` (etcd's prefix rule:
// the prefix with its last byte below 0xff incremented). "\0" (every key) for "".
std::string prefixEnd(const std::string& prefix);

// A 64-bit field of an answer (sent as a string; absent means 0).
int64_t int64Field(const nlohmann::json& object, const char* field);

// One key as range returns it.
struct KeyValue {
  Bytes value;
  int64_t modRevision = 0;
};

// Request ops, for /v3/kv/txn's success and failure lists (and, unwrapped, the plain calls).
nlohmann::json rangeRequest(const std::string& key, bool keysOnly = false);
nlohmann::json putRequest(const std::string& key, const Bytes& value, int64_t lease);
// The txn compares: the key is absent; it was last written at `modRevision`; it holds `value`.
nlohmann::json absentCompare(const std::string& key);
nlohmann::json modRevisionCompare(const std::string& key, int64_t modRevision);
nlohmann::json valueCompare(const std::string& key, const Bytes& value);

// The one key of a range answer (a /v3/kv/range answer or a txn's response_range); none
// when the key is absent.
std::optional<KeyValue> singleKey(const nlohmann::json& rangeAnswer);
// The range answers of a txn, in order ("responses"[i].response_range).
const nlohmann::json& txnRange(const nlohmann::json& txnAnswer, size_t i);

}  // namespace commhost::etcdstore
