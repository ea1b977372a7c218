#include "yaml_options.h"

#include <set>

#include "commhost/errors.h"

namespace commhost::config {

std::string Problems::where(const YAML::Node& node, const std::string& path) const {
  // The longest overridden prefix of `path` names the override responsible.
  for (std::string p = path;; ) {
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

void Problems::add(const YAML::Node& node, const std::string& path, const std::string& message) {
  lines_.push_back(where(node, path) + ": " + (path.empty() ? "" : "'" + path + "': ") + message);
}

void Problems::throwIfAny() const {
  if (lines_.empty()) return;
  std::string message = "config " + source_ + " has " + std::to_string(lines_.size()) +
                        (lines_.size() == 1 ? " error" : " errors") + ":";
  for (const auto& line : lines_) message += "\n  " + line;
  throw ConfigError(message);
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
    const std::string hint = closestMatch(relKey, known);
    std::string knownList;
    for (const auto& k : known) if (k.rfind(rel, 0) == 0) knownList += (knownList.empty() ? "" : ", ") + k;
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
  if (!node.IsScalar()) throw InvalidArgument(std::string("expected a ") + optionTypeName(spec.type) + ", got a " +
                                              (node.IsMap() ? "map" : node.IsSequence() ? "list" : "null"));
  const std::string text = node.Scalar();
  auto checkRange = [&](double v) {
    if (spec.minValue < spec.maxValue && (v < spec.minValue || v > spec.maxValue))
      throw InvalidArgument(text + " is out of range [" + std::to_string(static_cast<int64_t>(spec.minValue)) + ", " +
                            std::to_string(static_cast<int64_t>(spec.maxValue)) + "]");
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
        if (used == text.size()) { checkRange(static_cast<double>(v)); return v; }
      } catch (const std::logic_error&) {}
      throw InvalidArgument("'" + text + "' is not an integer");
    }
    case OptionType::Double: {
      try {
        size_t used = 0;
        const double v = std::stod(text, &used);
        if (used == text.size()) { checkRange(v); return v; }
      } catch (const std::logic_error&) {}
      throw InvalidArgument("'" + text + "' is not a number");
    }
    case OptionType::String: return text;
    case OptionType::Duration: {
      const auto d = parseDuration(text);
      checkRange(static_cast<double>(d.count()) / 1000.0);
      return d;
    }
    case OptionType::Size: {
      const int64_t v = parseSize(text);
      checkRange(static_cast<double>(v));
      return v;
    }
    case OptionType::Enum: {
      for (const auto& c : spec.choices)
        if (c == text) return text;
      std::string list;
      for (const auto& c : spec.choices) list += (list.empty() ? "" : ", ") + c;
      const std::string hint = closestMatch(text, spec.choices);
      throw InvalidArgument("'" + text + "' is not one of " + list + (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
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
    std::string operator()(double d) const { YAML::Emitter e; e << d; return e.c_str(); }
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

}  // namespace commhost::config
