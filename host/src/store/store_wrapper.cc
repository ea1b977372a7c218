// SPDX-License-Identifier: Apache-2.0
#include "commhost/errors.h"
#include "commhost/store.h"

namespace commhost {

StoreWrapper::StoreWrapper(StorePtr base)
    : StoreBase(base ? base->timeout() : std::chrono::milliseconds(0)), base_(std::move(base)) {
  if (!base_) throw InvalidArgument("a StoreWrapper needs a store to forward to");
}

void StoreWrapper::set(const std::string& key, const Bytes& value) { base_->set(key, value); }
Bytes StoreWrapper::get(const std::string& key) { return base_->get(key); }
int64_t StoreWrapper::add(const std::string& key, int64_t delta) { return base_->add(key, delta); }
Bytes StoreWrapper::compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  return base_->compareSet(key, expected, desired);
}
void StoreWrapper::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  base_->wait(keys, timeout);
}
bool StoreWrapper::check(const std::vector<std::string>& keys) { return base_->check(keys); }
bool StoreWrapper::deleteKey(const std::string& key) { return base_->deleteKey(key); }
int64_t StoreWrapper::numKeys() { return base_->numKeys(); }
std::vector<Bytes> StoreWrapper::multiGet(const std::vector<std::string>& keys) { return base_->multiGet(keys); }
void StoreWrapper::multiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  base_->multiSet(keys, values);
}
void StoreWrapper::append(const std::string& key, const Bytes& value) { base_->append(key, value); }

}  // namespace commhost
