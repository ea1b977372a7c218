// SPDX-License-Identifier: Apache-2.0
#include "commhost/store.h"

#include "commhost/errors.h"

namespace commhost {

Bytes toBytes(const std::string& text) { return Bytes(text.begin(), text.end()); }
std::string toString(const Bytes& bytes) { return std::string(bytes.begin(), bytes.end()); }

int64_t counterValue(const std::string& key, const Bytes& value) {
  const std::string text = toString(value);
  size_t used = 0;
  int64_t n = 0;
  try {
    n = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size())
    throw InvalidArgument("store add on key '" + key + "': the value '" + text.substr(0, 64) +
                          "' is not an integer; use a separate key for counters");
  return n;
}

std::vector<Bytes> Store::multiGet(const std::vector<std::string>& keys) {
  std::vector<Bytes> values;
  values.reserve(keys.size());
  for (const auto& key : keys) values.push_back(get(key));
  return values;
}

void Store::multiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  if (keys.size() != values.size())
    throw InvalidArgument("multiSet got " + std::to_string(keys.size()) + " keys but " + std::to_string(values.size()) +
                          " values");
  for (size_t i = 0; i < keys.size(); ++i) set(keys[i], values[i]);
}

}  // namespace commhost
