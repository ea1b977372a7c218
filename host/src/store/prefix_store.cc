// SPDX-License-Identifier: Apache-2.0
#include "commhost/errors.h"
#include "commhost/store.h"

namespace commhost {

PrefixStore::PrefixStore(std::string prefix, StorePtr base)
    : StoreBase(base ? base->timeout() : std::chrono::milliseconds(0)),
      prefix_(std::move(prefix)),
      base_(std::move(base)) {
  if (!base_) throw InvalidArgument("PrefixStore '" + prefix_ + "' needs an underlying store");
}

std::vector<std::string> PrefixStore::full(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(full(k));
  return out;
}

void PrefixStore::set(const std::string& key, const Bytes& value) { base_->set(full(key), value); }
Bytes PrefixStore::get(const std::string& key) { return base_->get(full(key)); }
int64_t PrefixStore::add(const std::string& key, int64_t delta) { return base_->add(full(key), delta); }
Bytes PrefixStore::compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  return base_->compareSet(full(key), expected, desired);
}
void PrefixStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  base_->wait(full(keys), timeout);
}
bool PrefixStore::check(const std::vector<std::string>& keys) { return base_->check(full(keys)); }
bool PrefixStore::deleteKey(const std::string& key) { return base_->deleteKey(full(key)); }
int64_t PrefixStore::numKeys() { return base_->numKeys(); }
std::vector<Bytes> PrefixStore::multiGet(const std::vector<std::string>& keys) { return base_->multiGet(full(keys)); }
void PrefixStore::multiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  base_->multiSet(full(keys), values);
}
void PrefixStore::append(const std::string& key, const Bytes& value) { base_->append(full(key), value); }

}  // namespace commhost
