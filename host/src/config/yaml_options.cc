// SPDX-License-Identifier: Apache-2.0
#include "yaml_options.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>

#include "commhost/errors.h"
#include "environment.h"

namespace commhost::config {

std::string Problems::where(const YAML::Node& node, const std::string& path) const {
  // The longest overridden prefix of `path` names the override responsible.
  for (std::string p = path;;) {
    auto it = overrides_.find(p);
    if (it != overrides_.end()) return it->second;
    const size_t dot = p.rfind('.');
    if (dot == std::string::npos) break;
    p.resize(dot);
  }
  if (node.IsDefined() && node.Mark().line >= 0)
    return source_ + ":" + std::to_string(node.Mark().line + 1) + ":" + std::to_string(node.Mark().column + 1);
  return source_;
}

namespace {

// \xNN for control characters, and for every byte past ASCII when `nonAscii`.
std::string escapeBytes(const std::string& text, bool nonAscii) {
  std::string out;
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f || (nonAscii && c >= 0x80)) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// Messages quote values from the file; control characters in them (an escape sequence
// in a name) are shown as \xNN rather than sent to the terminal or log. The text is
// UTF-8 by then (checked at load), so other bytes stay readable.
std::string withoutControls(const std::string& line) { return escapeBytes(line, false); }

}  // namespace

void Problems::add(const YAML::Node& node, const std::string& path, const std::string& message) {
  ++count_;
  if (lines_.size() < kShown)
    lines_.push_back(withoutControls(where(node, path) + ": " + (path.empty() ? "" : "'" + path + "': ") + message));
}

void Problems::addAt(const std::string& where, const std::string& message) {
  ++count_;
  if (lines_.size() < kShown) lines_.push_back(withoutControls(where + ": " + message));
}

void Problems::throwIfAny() const {
  if (count_ == 0) return;
  std::string message = "config " + source_ + " has " + withThousands(count_) + (count_ == 1 ? " error" : " errors") +
                        ":";
  for (const auto& line : lines_) message += "\n  " + line;
  if (count_ > lines_.size())
    message += "\n  ... and " + withThousands(count_ - lines_.size()) + " more (fix these first, then check again)";
  throw ConfigError(message);
}

std::string withThousands(size_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string escaped(const std::string& text) { return escapeBytes(text, true); }

size_t invalidUtf8At(const std::string& text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = s[i];
    size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else return i;
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (s[i + k] & 0x3f);
    }
    // Overlong forms, UTF-16 surrogates and values past U+10FFFF are invalid too.
    static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) return i;
    i += len;
  }
  return std::string::npos;
}

bool isSecretKey(const std::string& key) {
  std::string lower = key;
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // Whole words of a dotted or snake_case name ("auth_token", "store.options.secret"),
  // so that "auth_timeout" is not hidden while its bad value is reported.
  for (const char* secret : {"token", "secret", "password", "passwd", "credential", "credentials"}) {
    for (size_t at = lower.find(secret); at != std::string::npos; at = lower.find(secret, at + 1)) {
      const size_t end = at + std::strlen(secret);
      const bool startsWord = at == 0 || !std::isalnum(static_cast<unsigned char>(lower[at - 1]));
      const bool endsWord = end == lower.size() || !std::isalnum(static_cast<unsigned char>(lower[end]));
      if (startsWord && endsWord) return true;
    }
  }
  return false;
}

std::string redactAssignment(const std::string& origin) {
  const size_t eq = origin.find('=');
  if (eq == std::string::npos || !isSecretKey(origin.substr(0, eq))) return origin;
  return origin.substr(0, eq + 1) + "<redacted>";
}

namespace {

std::string joinPath(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }

bool isSectionOf(const std::string& prefix, const std::vector<OptionSpec>& specs) {
  for (const auto& s : specs)
    if (std::string(s.key).rfind(prefix + ".", 0) == 0) return true;
  return false;
}

const OptionSpec* findSpec(const std::string& key, const std::vector<OptionSpec>& specs) {
  for (const auto& s : specs)
    if (key == s.key) return &s;
  return nullptr;
}

// Reports every key under `node` (at relative `rel`) that no spec declares.
void checkUnknown(const YAML::Node& node, const std::string& rel, const std::string& base,
                  const std::vector<OptionSpec>& specs, Problems& problems) {
  std::vector<std::string> known;
  for (const auto& s : specs) known.push_back(s.key);
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) {
      problems.add(kv.first, base, "keys must be plain words");
      continue;
    }
    const std::string key = kv.first.Scalar();
    const std::string relKey = joinPath(rel, key);
    if (findSpec(relKey, specs)) continue;
    if (isSectionOf(relKey, specs)) {
      if (kv.second.IsMap()) checkUnknown(kv.second, relKey, base, specs, problems);
      else if (!kv.second.IsNull()) problems.add(kv.second, joinPath(base, relKey), "expected a map of settings");
      continue;
    }
    if (problems.full()) {  // past the shown problems only the count matters
      problems.tally();
      continue;
    }
    const std::string hint = closestMatch(relKey, known);
    std::string knownList;
    for (const auto& k : known)
      if (k.rfind(rel, 0) == 0) knownList += (knownList.empty() ? "" : ", ") + k;
    problems.add(kv.first, joinPath(base, relKey),
                 "unknown key" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)") +
                     (knownList.empty() ? "" : "; allowed here: " + knownList));
  }
}

YAML::Node lookup(const YAML::Node& node, const std::string& dotted) {
  YAML::Node cur = node;
  size_t start = 0;
  while (true) {
    if (!cur.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
    const size_t dot = dotted.find('.', start);
    const std::string part = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const YAML::Node& view = cur;  // const access never inserts
    YAML::Node next = view[part];
    if (!next.IsDefined()) return next;
    if (dot == std::string::npos) return next;
    cur.reset(next);
    start = dot + 1;
  }
}

}  // namespace

}  // namespace commhost::config

namespace commhost {

// Bounds in the key's own unit: a duration's range is declared in seconds but "0 to 60"
// for a minimum of 1 ms would be wrong twice.
std::string describeRange(const OptionSpec& spec) {
  if (!(spec.minValue < spec.maxValue)) return "";
  auto bound = [&](double v) -> std::string {
    switch (spec.type) {
      case OptionType::Duration: return formatDuration(std::chrono::milliseconds(std::llround(v * 1000)));
      case OptionType::Size: return formatSize(static_cast<int64_t>(v));
      case OptionType::Double: {
        YAML::Emitter e;
        e << v;
        return e.c_str();
      }
      default: return std::to_string(static_cast<int64_t>(v));
    }
  };
  return bound(spec.minValue) + " to " + bound(spec.maxValue);
}

std::string describeOptions(const std::vector<OptionSpec>& specs, const std::optional<std::string>& keyPrefix) {
  std::string out;
  for (const auto& spec : specs) {
    out += "  " + std::string(spec.key) + " (" + optionTypeName(spec.type);
    if (!spec.choices.empty()) {
      out += ":";
      for (const auto& c : spec.choices) out += " " + c;
    }
    const char* empty = spec.type == OptionType::StringList ? "[]" : "\"\"";
    out += std::string(", default: ") + (*spec.defaultValue ? spec.defaultValue : empty);
    if (const std::string range = describeRange(spec); !range.empty()) out += ", range: " + range;
    out += ")\n      " + std::string(spec.description) + "\n";
    if (keyPrefix) {
      const std::string variable = config::variableForKey(keyPrefix->empty() ? spec.key : *keyPrefix + "." + spec.key);
      if (!config::isReservedVariable(variable)) out += "      env: " + variable + "\n";
    }
  }
  return out;
}

}  // namespace commhost

namespace commhost::config {

OptionValue parseOptionValue(const OptionSpec& spec, const YAML::Node& node) {
  if (spec.type == OptionType::StringList) {
    std::vector<std::string> out;
    if (node.IsSequence()) {
      for (const auto& item : node) {
        if (!item.IsScalar()) throw InvalidArgument("expected a list of strings");
        out.push_back(item.Scalar());
      }
    } else if (node.IsScalar()) {
      out.push_back(node.Scalar());
    } else if (!node.IsNull()) {
      throw InvalidArgument("expected a list of strings");
    }
    return out;
  }
  if (!node.IsScalar())
    throw InvalidArgument(std::string("expected a ") + optionTypeName(spec.type) + ", got a " +
                          (node.IsMap()        ? "map"
                           : node.IsSequence() ? "list"
                                               : "null"));
  const std::string& text = node.Scalar();
  const bool ranged = spec.minValue < spec.maxValue;
  const std::string allowed = ranged ? "allowed: " + describeRange(spec) : "";
  auto checkRange = [&](double v) {
    if (ranged && (v < spec.minValue || v > spec.maxValue))
      throw InvalidArgument("'" + text + "' is out of range; " + allowed);
  };
  // A malformed duration or size also says what range the key takes.
  auto withRange = [&](const Error& e) {
    return InvalidArgument(std::string(e.what()) + (ranged ? " (" + allowed + ")" : ""));
  };
  switch (spec.type) {
    case OptionType::Bool:
      if (text == "true" || text == "yes" || text == "on") return true;
      if (text == "false" || text == "no" || text == "off") return false;
      throw InvalidArgument("'" + text + "' is not a bool; write true or false");
    case OptionType::Int: {
      try {
        size_t used = 0;
        const int64_t v = std::stoll(text, &used);
        if (used == text.size()) {
          checkRange(static_cast<double>(v));
          return v;
        }
      } catch (const std::logic_error&) {
      }
      throw InvalidArgument("'" + text + "' is not an integer");
    }
    case OptionType::Double: {
      try {
        size_t used = 0;
        const double v = std::stod(text, &used);
        if (used == text.size()) {
          checkRange(v);
          return v;
        }
      } catch (const std::logic_error&) {
      }
      throw InvalidArgument("'" + text + "' is not a number");
    }
    case OptionType::String: return text;
    case OptionType::Duration: {
      std::chrono::milliseconds d;
      try {
        d = parseDuration(text);
      } catch (const InvalidArgument& e) {
        throw withRange(e);
      }
      checkRange(static_cast<double>(d.count()) / 1000.0);
      return d;
    }
    case OptionType::Size: {
      int64_t v = 0;
      try {
        v = parseSize(text);
      } catch (const InvalidArgument& e) {
        throw withRange(e);
      }
      checkRange(static_cast<double>(v));
      return v;
    }
    case OptionType::Enum: {
      for (const auto& c : spec.choices)
        if (c == text) return text;
      std::string list;
      for (const auto& c : spec.choices) list += (list.empty() ? "" : ", ") + c;
      const std::string hint = closestMatch(text, spec.choices);
      throw InvalidArgument("'" + text + "' is not one of " + list +
                            (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
    }
    case OptionType::StringList: break;
  }
  throw InvalidArgument("unsupported option type");
}

OptionValues validateOptions(const YAML::Node& node, const std::string& path, const std::vector<OptionSpec>& specs,
                             Problems& problems) {
  OptionValues values;
  if (node.IsDefined() && !node.IsNull() && !node.IsMap()) {
    problems.add(node, path, "expected a map of settings");
  } else if (node.IsMap()) {
    checkUnknown(node, "", path, specs, problems);
  }
  for (const auto& spec : specs) {
    YAML::Node given = node.IsMap() ? lookup(node, spec.key) : YAML::Node(YAML::NodeType::Undefined);
    try {
      if (given.IsDefined()) {
        values.set(spec.key, parseOptionValue(spec, given));
        continue;
      }
    } catch (const Error& e) {
      problems.add(given, joinPath(path, spec.key), e.what());
    }
    try {
      values.set(spec.key, parseOptionValue(spec, spec.type == OptionType::StringList && !*spec.defaultValue
                                                      ? YAML::Node(YAML::NodeType::Null)
                                                      : YAML::Node(spec.defaultValue)));
    } catch (const Error& e) {
      throw InvalidArgument(std::string("the default of '") + spec.key + "' is invalid: " + e.what());
    }
  }
  return values;
}

std::string formatOptionValue(const OptionValue& value) {
  struct Visitor {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const {
      YAML::Emitter e;
      e << d;
      return e.c_str();
    }
    std::string operator()(const std::string& s) const { return s; }
    std::string operator()(std::chrono::milliseconds d) const { return formatDuration(d); }
    std::string operator()(const std::vector<std::string>& l) const {
      std::string out = "[";
      for (size_t i = 0; i < l.size(); ++i) out += (i ? ", " : "") + l[i];
      return out + "]";
    }
  };
  return std::visit(Visitor{}, value);
}

YAML::Node toYaml(const OptionValues& values) {
  YAML::Node root(YAML::NodeType::Map);
  for (const auto& [key, value] : values.all()) {
    YAML::Node cur = root;
    size_t start = 0;
    for (size_t dot; (dot = key.find('.', start)) != std::string::npos; start = dot + 1) {
      const std::string part = key.substr(start, dot - start);
      if (!cur[part].IsDefined()) cur[part] = YAML::Node(YAML::NodeType::Map);
      cur.reset(cur[part]);
    }
    const std::string leaf = key.substr(start);
    if (auto* list = std::get_if<std::vector<std::string>>(&value)) {
      YAML::Node seq(YAML::NodeType::Sequence);
      for (const auto& item : *list) seq.push_back(item);
      cur[leaf] = seq;
    } else {
      cur[leaf] = formatOptionValue(value);
    }
  }
  return root;
}

YAML::Node child(const YAML::Node& map, const std::string& key) {
  YAML::Node c = map[key];
  return c.IsDefined() ? c : YAML::Node(YAML::NodeType::Undefined);
}

}  // namespace commhost::config
