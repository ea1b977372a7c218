// SPDX-License-Identifier: Apache-2.0
// Internal: validating YAML against OptionSpecs, collecting every problem with its place.
#pragma once

#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <vector>

#include "commhost/sdk/option_schema.h"

namespace commhost::config {

// Collects problems as "where: message" lines; `where` is file:line:col, or the
// override (--set or COMMHOST_ variable) that put the value there.
class Problems {
 public:
  explicit Problems(std::string source) : source_(std::move(source)) {}
  // Records which override set `path` (dotted), so problems under it cite the override.
  void noteOverride(const std::string& path, const std::string& origin) { overrides_[path] = origin; }
  bool overridden(const std::string& path) const { return overrides_.count(path) != 0; }
  void add(const YAML::Node& node, const std::string& path, const std::string& message);
  void addAt(const std::string& where, const std::string& message);
  std::string where(const YAML::Node& node, const std::string& path) const;
  bool empty() const { return count_ == 0; }
  size_t count() const { return count_; }
  // Past kShown problems only the count grows: a file of a million bad keys must not
  // cost a million formatted lines. Callers with costly messages check this first.
  bool full() const { return lines_.size() >= kShown; }
  // Counts a problem without its message; for callers that saw full().
  void tally() { ++count_; }
  // Throws ConfigError listing every problem (the first kShown of them), if there are any.
  void throwIfAny() const;
  const std::string& source() const { return source_; }

  static constexpr size_t kShown = 50;

 private:
  std::string source_;
  std::map<std::string, std::string> overrides_;
  std::vector<std::string> lines_;
  size_t count_ = 0;
};

// A child of a map, or an Undefined node: yaml-cpp's missing-key nodes throw on most
// calls, so they never leave this function.
YAML::Node child(const YAML::Node& map, const std::string& key);

// "1472127" -> "1,472,127".
std::string withThousands(size_t n);
// `text` with every byte outside printable ASCII written \xNN, so a message never
// carries raw bytes (invalid UTF-8, control characters) into a terminal or log.
std::string escaped(const std::string& text);
// The offset of the first byte of `text` that is not valid UTF-8, or npos.
size_t invalidUtf8At(const std::string& text);
// Whether an option named `key` holds a secret (auth_token, ...): never printed.
bool isSecretKey(const std::string& key);
// `origin` (a --set or COMMHOST_ assignment) with the value hidden when its key is a secret.
std::string redactAssignment(const std::string& origin);

// Validates `node` (a map, or null for "all defaults") against `specs`. `path` is the
// dotted location of `node` for messages ("" for the root). Unknown keys, wrong types and
// out-of-range values go to `problems`; declared keys all get a value (default if absent).
OptionValues validateOptions(const YAML::Node& node, const std::string& path, const std::vector<OptionSpec>& specs,
                             Problems& problems);

// The value of one spec from a YAML scalar (or sequence for StringList); throws
// InvalidArgument with what was expected.
OptionValue parseOptionValue(const OptionSpec& spec, const YAML::Node& node);
// The text form of a value, as a user would write it.
std::string formatOptionValue(const OptionValue& value);
// The same values as YAML, nested by the dots in their keys.
YAML::Node toYaml(const OptionValues& values);

}  // namespace commhost::config
