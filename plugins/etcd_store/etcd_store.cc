// SPDX-License-Identifier: Apache-2.0
// The Store calls as etcd requests; options and creation are in options.cc.
#include "etcd_store.h"

#include <algorithm>
#include <set>
#include <thread>

#include "commhost/errors.h"

namespace commhost::etcdstore {
namespace {

constexpr size_t kMaxTxnOps = 128;  // etcd's default --max-txn-ops
// Every attempt gets at least this long, so a call made at its deadline still asks etcd once.
constexpr auto kMinAttempt = std::chrono::milliseconds(250);

std::string printable(const std::string& key) {
  std::string out;
  for (unsigned char c : key) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      static const char kHex[] = "0123456789abcdef";
      out += std::string("\\x") + kHex[c >> 4] + kHex[c & 15];
    }
  }
  return out;
}

std::string keyText(const std::string& key) { return "key '" + printable(key) + "'"; }

std::string keysText(const std::vector<std::string>& keys) {
  std::string out;
  for (size_t i = 0; i < keys.size() && i < 8; ++i) out += (i ? ", '" : "'") + printable(keys[i]) + "'";
  if (keys.size() > 8) out += " and " + std::to_string(keys.size() - 8) + " more";
  return (keys.size() == 1 ? "key " : "keys ") + out;
}

nlohmann::json txn(nlohmann::json compare, nlohmann::json success, nlohmann::json failure) {
  nlohmann::json body = nlohmann::json::object();
  if (!compare.is_null()) body["compare"] = nlohmann::json::array({std::move(compare)});
  body["success"] = std::move(success);
  if (!failure.is_null()) body["failure"] = std::move(failure);
  return body;
}

nlohmann::json op(const char* kind, nlohmann::json request) {
  nlohmann::json out = nlohmann::json::object();
  out[kind] = std::move(request);
  return out;
}

}  // namespace

EtcdStore::EtcdStore(Settings settings)
    : StoreBase(settings.timeout), s_(std::move(settings)), lease_(s_.endpoint, s_.leaseTtlSeconds, s_.logger) {
  // Fail here, naming the endpoint, rather than at the first rendezvous call.
  numKeys();
}

EtcdStore::~EtcdStore() = default;

std::string EtcdStore::where(const char* what, const std::string& subject) const {
  return (s_.rank >= 0 ? "[rank " + std::to_string(s_.rank) + "] " : std::string()) + "etcd store: etcd at " +
         s_.endpoint.text() + " " + what + " " + subject;
}

void EtcdStore::refused(const char* doing, const std::string& subject, const EtcdError& e) const {
  std::string hint;
  const std::string m = e.what();
  if (m.find("too large") != std::string::npos || m.find("larger than max") != std::string::npos)
    hint =
        ". etcd bounds one request by its --max-request-bytes (1.5 MiB by default; values travel in base64, 4/3 "
        "larger): store less under one key, or raise the flag on every etcd member";
  else if (m.find("no leader") != std::string::npos || e.code() == 14)
    hint = ". etcd has no leader or is unavailable: check that most members are up (etcdctl endpoint health)";
  else if (m.find("too many operations") != std::string::npos)
    hint = ". etcd bounds a txn by its --max-txn-ops (128 by default): raise it on every member";
  throw StoreError(where("refused", doing) + " " + subject + ": " + m + hint);
}

template <class Attempt>
auto EtcdStore::retrying(const char* doing, const std::string& subject, Clock::time_point deadline, bool idempotent,
                         const Attempt& attempt) -> decltype(attempt(deadline)) {
  const auto start = Clock::now();
  auto pause = std::chrono::milliseconds(10);
  while (true) {
    std::string reason;
    try {
      return attempt(std::max(deadline, Clock::now() + kMinAttempt));
    } catch (const ConnectFailed& e) {
      reason = e.what();
    } catch (const CallFailed& e) {
      if (!idempotent)
        throw StoreError(where("stopped answering while", doing) + " " + subject + " (" + e.what() +
                         "); whether the call took effect is unknown. Check etcd (etcdctl --endpoints " +
                         s_.endpoint.text() + " endpoint health), then restart the job");
      reason = e.what();
    }
    {
      // Nothing reached etcd, or asking again is harmless: wait for it (a restart, a
      // leader election) until the deadline.
      const auto now = Clock::now();
      if (now + pause >= deadline) {
        const std::string waited = formatDuration(std::chrono::duration_cast<std::chrono::milliseconds>(now - start));
        if (reason.find("refused") != std::string::npos)
          throw StoreError(where("refused the connection while", doing) + " " + subject + " (retried for " + waited +
                           "): is etcd running? Start it, or fix store.options.endpoint");
        throw StoreError(where("could not be reached while", doing) + " " + subject + " (retried for " + waited + ": " +
                         reason + "): is etcd running and reachable from this host? Start it, or fix " +
                         "store.options.endpoint");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(500));
    }
  }
}

nlohmann::json EtcdStore::call(const char* doing, const std::string& subject, const std::string& path,
                               const nlohmann::json& body, Clock::time_point deadline, bool idempotent) {
  try {
    return retrying(doing, subject, deadline, idempotent,
                    [&](Clock::time_point d) { return post(s_.endpoint, path, body, d); });
  } catch (const EtcdError& e) {
    refused(doing, subject, e);
  }
}

template <class Build>
nlohmann::json EtcdStore::withLease(const char* doing, const std::string& subject, const std::string& path,
                                    bool needsLease, Clock::time_point deadline, bool idempotent, const Build& build) {
  for (int attempt = 0;; ++attempt) {
    int64_t lease = 0;
    try {
      if (needsLease)
        lease = retrying("granting a lease for", subject, deadline, true,
                         [&](Clock::time_point d) { return lease_.current(d); });
      return retrying(doing, subject, deadline, idempotent,
                      [&](Clock::time_point d) { return post(s_.endpoint, path, build(lease), d); });
    } catch (const EtcdError& e) {
      // etcd dropped the lease (it was unreachable for a TTL, or lost its data): a new one.
      if (lease != 0 && attempt == 0 && std::string(e.what()).find("lease not found") != std::string::npos) {
        lease_.forget(lease);
        continue;
      }
      refused(doing, subject, e);
    }
  }
}

bool EtcdStore::isLeaseKey(const std::string& key) const {
  return std::any_of(s_.leaseKeys.begin(), s_.leaseKeys.end(),
                     [&](const std::string& p) { return !p.empty() && key.find(p) != std::string::npos; });
}

void EtcdStore::put(const char* doing, const std::string& key, const Bytes& value) {
  withLease(doing, keyText(key), "/v3/kv/put", isLeaseKey(key), Clock::now() + timeout_, true,
            [&](int64_t lease) { return putRequest(full(key), value, lease); });
}

std::optional<std::optional<KeyValue>> EtcdStore::putIf(const char* doing, const std::string& key,
                                                        const nlohmann::json& compare, const Bytes& value) {
  const nlohmann::json answer = withLease(
      doing, keyText(key), "/v3/kv/txn", isLeaseKey(key), Clock::now() + timeout_, false, [&](int64_t lease) {
        return txn(compare, nlohmann::json::array({op("request_put", putRequest(full(key), value, lease))}),
                   nlohmann::json::array({op("request_range", rangeRequest(full(key)))}));
      });
  if (answer.value("succeeded", false)) return std::nullopt;
  return singleKey(txnRange(answer, 0));
}

std::optional<KeyValue> EtcdStore::read(const char* doing, const std::string& key) {
  return singleKey(call(doing, keyText(key), "/v3/kv/range", rangeRequest(full(key)), Clock::now() + timeout_));
}

std::vector<std::optional<KeyValue>> EtcdStore::readMany(const char* doing, const std::vector<std::string>& keys,
                                                         bool keysOnly, Clock::time_point deadline, int64_t* revision) {
  std::vector<std::optional<KeyValue>> out;
  *revision = 0;
  for (size_t at = 0; at < keys.size(); at += kMaxTxnOps) {
    const size_t n = std::min(kMaxTxnOps, keys.size() - at);
    nlohmann::json ranges = nlohmann::json::array();
    for (size_t i = 0; i < n; ++i) ranges.push_back(op("request_range", rangeRequest(full(keys[at + i]), keysOnly)));
    const std::vector<std::string> chunk(keys.begin() + at, keys.begin() + at + n);
    const nlohmann::json answer = call(doing, keysText(chunk), "/v3/kv/txn", txn(nullptr, ranges, nullptr), deadline);
    const int64_t r = int64Field(answer.value("header", nlohmann::json::object()), "revision");
    if (*revision == 0 || r < *revision) *revision = r;
    for (size_t i = 0; i < n; ++i) out.push_back(singleKey(txnRange(answer, i)));
  }
  return out;
}

void EtcdStore::set(const std::string& key, const Bytes& value) { put("setting", key, value); }

Bytes EtcdStore::get(const std::string& key) {
  const auto deadline = Clock::now() + timeout_;
  while (true) {
    if (auto kv = read("getting", key)) return kv->value;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    wait({key}, std::max(left, std::chrono::milliseconds(0)));  // throws TimeoutError naming the key
  }
}

int64_t EtcdStore::add(const std::string& key, int64_t delta) {
  std::optional<KeyValue> now = read("adding to", key);
  // A rank reading a peer's heartbeat must not re-create it on its own lease.
  if (delta == 0 && isLeaseKey(key)) return now ? counterValue(key, now->value) : 0;
  while (true) {
    const int64_t sum = (now ? counterValue(key, now->value) : 0) + delta;
    const auto compare = now ? modRevisionCompare(full(key), now->modRevision) : absentCompare(full(key));
    const auto conflict = putIf("adding to", key, compare, toBytes(std::to_string(sum)));
    if (!conflict) return sum;
    now = *conflict;  // another rank wrote it first: add to what it wrote
  }
}

Bytes EtcdStore::compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  const auto compare = expected.empty() ? absentCompare(full(key)) : valueCompare(full(key), expected);
  auto conflict = putIf("compare-setting", key, compare, desired);
  if (!conflict) return desired;
  if (!*conflict) return expected;  // absent, and `expected` was not empty: c10d returns it
  // An empty value equals an empty `expected`, but etcd's "absent" compare fails on it.
  if (expected.empty() && (*conflict)->value.empty()) {
    conflict = putIf("compare-setting", key, modRevisionCompare(full(key), (*conflict)->modRevision), desired);
    if (!conflict) return desired;
    if (!*conflict) return expected;
  }
  return (*conflict)->value;
}

void EtcdStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  const std::set<std::string> wanted = [&] {
    std::set<std::string> out;
    for (const auto& k : keys) out.insert(full(k));
    return out;
  }();
  while (true) {
    int64_t revision = 0;
    const auto present = readMany("waiting for", keys, true, deadline, &revision);
    std::set<std::string> missing;
    for (size_t i = 0; i < keys.size(); ++i)
      if (!present[i]) missing.insert(full(keys[i]));
    if (missing.empty()) return;
    if (Clock::now() >= deadline) {
      std::vector<std::string> names;
      for (const auto& m : missing) names.push_back(m.substr(s_.prefix.size()));
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "'" : ", '") + printable(n) + "'";
      throw TimeoutError(where("(prefix", "'" + printable(s_.prefix) + "')") + ": wait timed out after " +
                         formatDuration(timeout) + "; keys not set: " + list +
                         ". The rank that sets them may have failed or not reached this point");
    }
    // Watch every key between the first and last missing one, from just after the read:
    // a set in between arrives as the watch's first event.
    nlohmann::json create = {{"key", base64(*missing.begin())},
                             {"range_end", base64(*missing.rbegin() + std::string(1, '\0'))},
                             {"start_revision", std::to_string(revision + 1)}};
    try {
      stream(s_.endpoint, "/v3/watch", {{"create_request", create}}, deadline, [&](const nlohmann::json& message) {
        const nlohmann::json result = message.value("result", nlohmann::json::object());
        if (result.value("canceled", false)) return false;  // e.g. compacted: read again
        for (const auto& event : result.value("events", nlohmann::json::array())) {
          const std::string k = toString(unbase64(event.at("kv").value("key", std::string())));
          if (event.value("type", std::string("PUT")) == "DELETE") {
            if (wanted.count(k)) missing.insert(k);
          } else {
            missing.erase(k);
          }
        }
        return !missing.empty();
      });
    } catch (const ConnectFailed&) {
      // etcd went away: the next read retries until the deadline, then names the endpoint.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    } catch (const CallFailed&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    } catch (const EtcdError& e) {
      refused("watching", keysText(keys), e);
    }
    // Whatever ended the watch, the next read says which keys are still missing.
  }
}

bool EtcdStore::check(const std::vector<std::string>& keys) {
  int64_t revision = 0;
  const auto present = readMany("checking", keys, true, Clock::now() + timeout_, &revision);
  return std::all_of(present.begin(), present.end(), [](const auto& kv) { return kv.has_value(); });
}

bool EtcdStore::deleteKey(const std::string& key) {
  const nlohmann::json answer = call("deleting", keyText(key), "/v3/kv/deleterange", {{"key", base64(full(key))}},
                                     Clock::now() + timeout_, false);
  return int64Field(answer, "deleted") > 0;
}

int64_t EtcdStore::numKeys() {
  const std::string from = s_.prefix.empty() ? std::string(1, '\0') : s_.prefix;
  const nlohmann::json body = {
      {"key", base64(from)}, {"range_end", base64(prefixEnd(s_.prefix))}, {"count_only", true}};
  return int64Field(call("counting the keys under", "prefix '" + printable(s_.prefix) + "'", "/v3/kv/range", body,
                         Clock::now() + timeout_),
                    "count");
}

std::vector<Bytes> EtcdStore::multiGet(const std::vector<std::string>& keys) {
  const auto deadline = Clock::now() + timeout_;
  while (true) {
    int64_t revision = 0;
    const auto kvs = readMany("getting", keys, false, deadline, &revision);
    std::vector<std::string> missing;
    for (size_t i = 0; i < keys.size(); ++i)
      if (!kvs[i]) missing.push_back(keys[i]);
    if (missing.empty()) {
      std::vector<Bytes> out;
      for (const auto& kv : kvs) out.push_back(kv->value);
      return out;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    wait(missing, std::max(left, std::chrono::milliseconds(0)));
  }
}

void EtcdStore::multiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  if (keys.size() != values.size())
    throw InvalidArgument("etcd store: multiSet got " + std::to_string(keys.size()) + " keys and " +
                          std::to_string(values.size()) + " values; pass one value per key");
  // One txn per kMaxTxnOps keys: all of a txn's keys appear at once.
  for (size_t at = 0; at < keys.size(); at += kMaxTxnOps) {
    const size_t n = std::min(kMaxTxnOps, keys.size() - at);
    const std::vector<std::string> chunk(keys.begin() + at, keys.begin() + at + n);
    const bool needsLease = std::any_of(chunk.begin(), chunk.end(), [&](const auto& k) { return isLeaseKey(k); });
    withLease("setting", keysText(chunk), "/v3/kv/txn", needsLease, Clock::now() + timeout_, true, [&](int64_t lease) {
      nlohmann::json puts = nlohmann::json::array();
      for (size_t i = 0; i < n; ++i)
        puts.push_back(
            op("request_put", putRequest(full(keys[at + i]), values[at + i], isLeaseKey(keys[at + i]) ? lease : 0)));
      return txn(nullptr, puts, nullptr);
    });
  }
}

void EtcdStore::append(const std::string& key, const Bytes& value) {
  std::optional<KeyValue> now = read("appending to", key);
  while (true) {
    Bytes joined = now ? now->value : Bytes{};
    joined.insert(joined.end(), value.begin(), value.end());
    const auto compare = now ? modRevisionCompare(full(key), now->modRevision) : absentCompare(full(key));
    const auto conflict = putIf("appending to", key, compare, joined);
    if (!conflict) return;
    now = *conflict;
  }
}

}  // namespace commhost::etcdstore
