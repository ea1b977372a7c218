// SPDX-License-Identifier: Apache-2.0
// routes: entries, parsed and checked against the configured backends (route_entries.h).
#include "route_entries.h"

#include "commhost/errors.h"

namespace commhost::config {
namespace {

// A shadow's sample rate (in (0, 1]) or a tolerance (>= 0, `zeroOk`).
double parseFraction(const std::string& key, const std::string& text, bool zeroOk) {
  size_t used = 0;
  double v = -1;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
  }
  if (used != text.size() || !(zeroOk ? v >= 0 : v > 0) || (key == "sample" && v > 1))
    throw InvalidArgument(
        "'" + text + "' is not a valid " + key + ": want " +
        (key == "sample" ? "a rate in (0, 1], e.g. sample: 0.01" : "a number >= 0, e.g. " + key + ": 1e-5"));
  return v;
}

// One key of a route into `route`; false for a key routes do not have. Throws Error for a
// value it cannot take.
bool parseRouteKey(const std::string& key, const YAML::Node& value, RouteSpec& route) {
  if (key == "backend" && value.IsSequence()) {
    // `backend: [mine, shm, gloo]`: tried in order for each cell (see dispatcher.h).
    std::vector<std::string> names;
    for (size_t j = 0; j < value.size(); ++j) {
      if (!value[j].IsScalar() || value[j].Scalar().empty())
        throw InvalidArgument("expected a backend name or a list of them, e.g. backend: [mine, gloo]");
      names.push_back(value[j].Scalar());
    }
    if (names.empty()) throw InvalidArgument("an empty list: name at least one backend");
    route.backend = names[0];
    route.fallback.assign(names.begin() + 1, names.end());
    return true;
  }
  if (!value.IsScalar()) throw InvalidArgument("expected a single value");
  const std::string& text = value.Scalar();
  if (key == "device") route.device = parseDevice(text).type;
  else if (key == "op") route.op = parseOpType(text);
  else if (key == "dtype") route.dtype = parseDType(text);
  else if (key == "reduce_op") route.reduceOp = parseReduceOp(text);
  else if (key == "min_bytes") route.minBytes = parseSize(text);
  else if (key == "max_bytes") route.maxBytes = parseSize(text);
  else if (key == "backend") route.backend = text;
  else if (key == "shadow") route.shadow = text;
  else if (key == "sample") route.sample = parseFraction(key, text, false);
  else if (key == "tune" && (text == "live" || text == "off")) route.live = text == "live";
  else if (key == "tune") throw InvalidArgument("'" + text + "' is not a tune mode: want live or off");
  else if (key == "rtol" || key == "atol") (key == "rtol" ? route.rtol : route.atol) = parseFraction(key, text, true);
  else return false;
  return true;
}

// Every key of one routes: entry; false when one was a problem (each added to `problems`).
bool parseRouteFields(const YAML::Node& item, const std::string& path, RouteSpec& route, Problems& problems) {
  static const std::vector<std::string> kKeys = {"device",  "op",     "dtype",  "reduce_op", "min_bytes", "max_bytes",
                                                 "backend", "shadow", "sample", "rtol",      "atol",      "tune"};
  bool ok = true;
  for (const auto& kv : item) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    try {
      if (parseRouteKey(key, kv.second, route)) continue;
      const std::string hint = closestMatch(key, kKeys);
      problems.add(kv.first, path + "." + key,
                   "unknown key" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)") +
                       "; allowed here: device, op, dtype, reduce_op, min_bytes, max_bytes, backend, shadow, "
                       "sample, rtol, atol, tune");
    } catch (const Error& e) {
      problems.add(kv.second, path + "." + key, e.what());
    }
    ok = false;
  }
  return ok;
}

// What a parsed route names against the configured backends: each backend of its list
// and its shadow configured, the shadow's settings only with a shadow, a byte range that
// is not empty. False when one was a problem.
bool checkRoute(const YAML::Node& item, const std::string& path, const RouteSpec& route, const Config& cfg,
                Problems& problems) {
  std::vector<std::string> backendNames;
  std::string list;
  for (const auto& [name, ref] : cfg.backends) {
    backendNames.push_back(name);
    list += (list.empty() ? "" : ", ") + name;
  }
  bool ok = true;
  const auto problem = [&](const YAML::Node& at, const std::string& where, const std::string& what) {
    problems.add(at, where, what);
    ok = false;
  };
  if (route.backend.empty()) problem(item, path, "a route needs a backend");
  for (const auto& name : route.backend.empty() ? std::vector<std::string>{} : route.backends()) {
    if (cfg.backends.count(name)) continue;
    const std::string hint = closestMatch(name, backendNames);
    problem(child(item, "backend"), path + ".backend",
            "route to unknown backend '" + name + "'" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)") +
                "; backends configured: " + (list.empty() ? "none" : list));
  }
  const bool tuned = item["sample"].IsDefined() || item["rtol"].IsDefined() || item["atol"].IsDefined();
  if (route.live && !route.shadow.empty()) {
    problem(child(item, "tune"), path + ".tune",
            "tune: live samples the route's other listed backends, and shadow: names one more; a route takes one "
            "of them: list '" +
                route.shadow + "' in backend: instead, or remove tune");
  } else if (route.live && route.fallback.empty()) {
    problem(child(item, "tune"), path + ".tune",
            "tune: live needs candidates to choose from: list two or more backends, e.g. backend: [" + route.backend +
                ", shm]");
  } else if (route.shadow.empty() && !route.live && tuned) {
    problem(item, path,
            "sample, rtol and atol apply to a shadow backend or to tune: live; add `shadow: NAME` or remove them");
  } else if (!route.shadow.empty() && !cfg.backends.count(route.shadow)) {
    const std::string hint = closestMatch(route.shadow, backendNames);
    problem(child(item, "shadow"), path + ".shadow",
            "shadow backend '" + route.shadow + "' is not configured" +
                (hint.empty() ? "" : " (did you mean '" + hint + "'?)") + "; add it under backends:");
  } else if (!route.shadow.empty() && route.shadow == route.backend && route.fallback.empty()) {
    problem(child(item, "shadow"), path + ".shadow",
            "the route's own backend '" + route.shadow + "' cannot shadow it; name another backend");
  }
  if (route.minBytes > route.maxBytes)
    problem(item, path,
            "min_bytes " + std::to_string(route.minBytes) + " is above max_bytes " + std::to_string(route.maxBytes));
  return ok;
}

}  // namespace

void parseRoutes(const YAML::Node& node, Config& cfg, Problems& problems) {
  if (!node.IsDefined() || node.IsNull()) return;
  if (!node.IsSequence()) {
    problems.add(node, "routes", "expected a list of { device, op, dtype, reduce_op, min_bytes, max_bytes, backend }");
    return;
  }
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node item = node[i];
    const std::string path = "routes[" + std::to_string(i) + "]";
    if (!item.IsMap()) {
      problems.add(item, path, "expected { device, op, dtype, reduce_op, min_bytes, max_bytes, backend }");
      continue;
    }
    RouteSpec route;
    route.where = problems.where(item, path);
    const bool fieldsOk = parseRouteFields(item, path, route, problems);
    if (checkRoute(item, path, route, cfg, problems) && fieldsOk) cfg.routes.push_back(route);
  }
}

YAML::Node routeYaml(const RouteSpec& r) {
  YAML::Node n(YAML::NodeType::Map);
  if (r.device) n["device"] = deviceTypeName(*r.device);
  if (r.op) n["op"] = opName(*r.op);
  if (r.minBytes) n["min_bytes"] = formatSize(r.minBytes);
  if (r.maxBytes != INT64_MAX) n["max_bytes"] = formatSize(r.maxBytes);
  if (r.dtype) n["dtype"] = dtypeName(*r.dtype);
  if (r.reduceOp) n["reduce_op"] = reduceOpName(*r.reduceOp);
  if (r.fallback.empty()) {
    n["backend"] = r.backend;
  } else {
    YAML::Node list(YAML::NodeType::Sequence);
    for (const auto& name : r.backends()) list.push_back(name);
    list.SetStyle(YAML::EmitterStyle::Flow);
    n["backend"] = list;
  }
  if (r.live) n["tune"] = "live";
  if (!r.shadow.empty() || r.live) {
    if (!r.shadow.empty()) n["shadow"] = r.shadow;
    n["sample"] = r.sample;
    n["rtol"] = r.rtol;
    n["atol"] = r.atol;
  }
  return n;
}

}  // namespace commhost::config
