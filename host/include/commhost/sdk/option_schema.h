// SPDX-License-Identifier: Apache-2.0
// Declared settings and their validated values.
//
// The host's own config keys and every plugin's options are declared the same way: one
// OptionSpec per key with its type, default and description. The host validates YAML
// against the specs (unknown keys, wrong types, out-of-range values all fail with
// file:line:col and a "did you mean" hint) and hands plugins an OptionValues with every
// declared key present, defaults filled in.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "commhost/export.h"

namespace commhost {

enum class OptionType : uint8_t {
  Bool,
  Int,
  Double,
  String,
  Duration,    // "30s", "100ms", "2m", "1h"; a bare number means seconds
  Size,        // "64MiB", "1KB", "4096"; stored as bytes
  Enum,        // one of OptionSpec::choices
  StringList,  // a YAML sequence of strings (or one string)
};
COMMHOST_API const char* optionTypeName(OptionType type);

struct OptionSpec {
  const char* key;  // may contain dots for nested keys, e.g. "watchdog.poll"
  OptionType type;
  const char* defaultValue;  // in the same text form a user writes in YAML; "" = empty
  const char* description;
  std::vector<std::string> choices = {};  // for Enum
  double minValue = 0, maxValue = 0;      // for Int/Double/Size/Duration when min < max
};

using OptionValue =
    std::variant<bool, int64_t, double, std::string, std::chrono::milliseconds, std::vector<std::string>>;

// Validated values of one set of OptionSpecs. Getters throw InvalidArgument for a key
// that was not declared or was declared with another type.
class COMMHOST_API OptionValues {
 public:
  bool getBool(const std::string& key) const;
  int64_t getInt(const std::string& key) const;  // Int and Size
  double getDouble(const std::string& key) const;
  const std::string& getString(const std::string& key) const;  // String and Enum
  std::chrono::milliseconds getDuration(const std::string& key) const;
  const std::vector<std::string>& getList(const std::string& key) const;
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  const std::map<std::string, OptionValue>& all() const { return values_; }

  void set(const std::string& key, OptionValue value) { values_[key] = std::move(value); }

 private:
  const OptionValue& at(const std::string& key) const;
  std::map<std::string, OptionValue> values_;
};

// The range of a ranged Int/Double/Size/Duration spec in the key's own unit ("1ms to
// 168h", "1 to 64"); "" when it has none. Range errors say it the same way.
COMMHOST_API std::string describeRange(const OptionSpec& spec);
// Every spec as `commhost config keys` and `commhost plugins inspect` print it, so both
// come from the schema itself:
//   KEY (TYPE[: CHOICES], default: D[, range: R])
//       DESCRIPTION
//       env: VARIABLE
// The env line, given `keyPrefix` (the specs' place in a config: "" for host keys,
// "store.options", "backends.NAME.options"), names the COMMHOST_ variable that sets the key.
COMMHOST_API std::string describeOptions(const std::vector<OptionSpec>& specs,
                                         const std::optional<std::string>& keyPrefix = std::nullopt);

// Parsers for the text forms above; throw InvalidArgument with the accepted forms.
COMMHOST_API std::chrono::milliseconds parseDuration(const std::string& text);
COMMHOST_API int64_t parseSize(const std::string& text);
COMMHOST_API std::string formatDuration(std::chrono::milliseconds d);  // "1500ms", "30s"
COMMHOST_API std::string formatSize(int64_t bytes);                    // "64MiB", "1000"
// The closest candidate within a small edit distance, or "" if none is close.
COMMHOST_API std::string closestMatch(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace commhost
