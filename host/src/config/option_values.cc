// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>

#include "commhost/errors.h"
#include "commhost/sdk/option_schema.h"

namespace commhost {

const char* optionTypeName(OptionType type) {
  switch (type) {
    case OptionType::Bool: return "bool";
    case OptionType::Int: return "int";
    case OptionType::Double: return "number";
    case OptionType::String: return "string";
    case OptionType::Duration: return "duration";
    case OptionType::Size: return "size";
    case OptionType::Enum: return "enum";
    case OptionType::StringList: return "list of strings";
  }
  return "?";
}

const OptionValue& OptionValues::at(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) throw InvalidArgument("option '" + key + "' was not declared");
  return it->second;
}

template <class T> static const T& as(const OptionValue& v, const std::string& key, const char* type) {
  if (auto* p = std::get_if<T>(&v)) return *p;
  throw InvalidArgument("option '" + key + "' is not a " + type);
}

bool OptionValues::getBool(const std::string& key) const { return as<bool>(at(key), key, "bool"); }
int64_t OptionValues::getInt(const std::string& key) const { return as<int64_t>(at(key), key, "int"); }
double OptionValues::getDouble(const std::string& key) const { return as<double>(at(key), key, "number"); }
const std::string& OptionValues::getString(const std::string& key) const {
  return as<std::string>(at(key), key, "string");
}
std::chrono::milliseconds OptionValues::getDuration(const std::string& key) const {
  return as<std::chrono::milliseconds>(at(key), key, "duration");
}
const std::vector<std::string>& OptionValues::getList(const std::string& key) const {
  return as<std::vector<std::string>>(at(key), key, "list");
}

namespace {

// Splits "64MiB" into 64 and "MiB"; the number may have a fraction.
bool splitNumber(const std::string& text, double& number, std::string& unit) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) return false;
  try {
    size_t used = 0;
    number = std::stod(text.substr(0, i), &used);
    if (used != i) return false;
  } catch (const std::exception&) {
    return false;
  }
  size_t j = i;
  while (j < text.size() && text[j] == ' ') ++j;
  unit = text.substr(j);
  return true;
}

}  // namespace

std::chrono::milliseconds parseDuration(const std::string& text) {
  double n = 0;
  std::string unit;
  if (!text.empty() && text[0] == '-' && splitNumber(text.substr(1), n, unit))
    throw InvalidArgument("'" + text + "' is a negative duration; durations are 0 or more, e.g. 30s");
  if (splitNumber(text, n, unit)) {
    double ms = -1;
    if (unit.empty() || unit == "s") ms = n * 1000;
    else if (unit == "ms") ms = n;
    else if (unit == "us") ms = n / 1000;
    else if (unit == "m" || unit == "min") ms = n * 60000;
    else if (unit == "h") ms = n * 3600000;
    if (ms >= 9.2e18) throw InvalidArgument("'" + text + "' is too long a duration (max about 292 million years)");
    if (ms >= 0) return std::chrono::milliseconds(static_cast<int64_t>(std::llround(ms)));
  }
  throw InvalidArgument("'" + text + "' is not a duration; write e.g. 30s, 100ms, 2m or 1h");
}

int64_t parseSize(const std::string& text) {
  double n = 0;
  std::string unit;
  if (splitNumber(text, n, unit)) {
    static const std::pair<const char*, double> kUnits[] = {
        {"", 1},         {"B", 1},         {"K", 1024},     {"KiB", 1024},   {"KB", 1e3},
        {"M", 1 << 20},  {"MiB", 1 << 20}, {"MB", 1e6},     {"G", 1 << 30},  {"GiB", 1 << 30},
        {"GB", 1e9},     {"T", 0x1p40},    {"TiB", 0x1p40}, {"TB", 1e12},    {"P", 0x1p50},
        {"PiB", 0x1p50}, {"PB", 1e15},     {"E", 0x1p60},   {"EiB", 0x1p60}, {"EB", 1e18},
    };
    for (const auto& [name, scale] : kUnits) {
      if (unit != name) continue;
      if (n * scale >= 0x1p63)
        throw InvalidArgument("'" + text + "' is too large a size (max " + std::to_string(INT64_MAX) +
                              " bytes, just under 8EiB)");
      return static_cast<int64_t>(std::llround(n * scale));
    }
  }
  throw InvalidArgument("'" + text + "' is not a size; write e.g. 4096, 64KiB, 1MB or 2GiB");
}

std::string formatDuration(std::chrono::milliseconds d) {
  const int64_t ms = d.count();
  if (ms % 3600000 == 0 && ms) return std::to_string(ms / 3600000) + "h";
  if (ms % 60000 == 0 && ms) return std::to_string(ms / 60000) + "m";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

std::string formatSize(int64_t bytes) {
  if (bytes && bytes % (1 << 30) == 0) return std::to_string(bytes >> 30) + "GiB";
  if (bytes && bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + "MiB";
  if (bytes && bytes % 1024 == 0) return std::to_string(bytes >> 10) + "KiB";
  return std::to_string(bytes);
}

std::string closestMatch(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t bestDistance = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    // Levenshtein distance, one row at a time.
    std::vector<size_t> row(c.size() + 1);
    for (size_t j = 0; j <= c.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= word.size(); ++i) {
      size_t diag = row[0];
      row[0] = i;
      for (size_t j = 1; j <= c.size(); ++j) {
        const size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (word[i - 1] == c[j - 1] ? 0 : 1)});
        diag = up;
      }
    }
    if (row[c.size()] < bestDistance) {
      bestDistance = row[c.size()];
      best = c;
    }
  }
  return best;
}

}  // namespace commhost
