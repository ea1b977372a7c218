// SPDX-License-Identifier: Apache-2.0
#include "commhost/sdk/measured_table.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "commhost/errors.h"

namespace commhost {
namespace {

using json = nlohmann::json;
constexpr const char* kFormat = "commhost-measured-table";

// The rows of `op` that speak for [lo, hi]: those inside it; with none, the nearest below
// (a size above every measured one is like the largest); else the nearest above.
std::vector<const MeasuredTable::Row*> rowsFor(const MeasuredTable& t, OpType op, int64_t lo, int64_t hi) {
  std::vector<const MeasuredTable::Row*> in;
  const MeasuredTable::Row *below = nullptr, *above = nullptr;
  for (const auto& o : t.ops) {
    if (o.op != op) continue;
    for (const auto& r : o.rows) {
      if (r.bytes >= lo && r.bytes <= hi) in.push_back(&r);
      else if (r.bytes < lo) below = &r;
      else if (!above) above = &r;
    }
  }
  if (in.empty() && (below || above)) in.push_back(below ? below : above);
  return in;
}

const MeasuredTable::Cell* cellOf(const MeasuredTable::Row& row, const std::string& backend) {
  for (const auto& c : row.cells)
    if (c.backend == backend) return &c;
  return nullptr;
}

}  // namespace

double MeasuredTable::timeOf(OpType op, int64_t minBytes, int64_t maxBytes, const std::string& backend) const {
  const auto rows = rowsFor(*this, op, minBytes, maxBytes);
  if (rows.empty()) return -1;
  double sum = 0;
  for (const Row* r : rows) {
    const Cell* c = cellOf(*r, backend);
    if (!c || !c->right) return -1;
    sum += c->medianUs;
  }
  return sum;
}

std::string MeasuredTable::fastest(OpType op, int64_t minBytes, int64_t maxBytes,
                                   const std::vector<std::string>& candidates, double* timeUs) const {
  std::string best;
  double bestUs = 0;
  for (const auto& name : candidates) {
    const double us = timeOf(op, minBytes, maxBytes, name);
    if (us >= 0 && (best.empty() || us < bestUs)) {
      best = name;
      bestUs = us;
    }
  }
  if (timeUs) *timeUs = bestUs;
  return best;
}

std::string MeasuredTable::toJson() const {
  json ops = json::array();
  for (const auto& o : this->ops) {
    json rows = json::array();
    for (const auto& r : o.rows) {
      json cells = json::array();
      for (const auto& c : r.cells)
        cells.push_back({{"backend", c.backend}, {"median_us", c.medianUs}, {"right", c.right}});
      rows.push_back({{"bytes", r.bytes}, {"cells", cells}});
    }
    ops.push_back({{"op", opName(o.op)}, {"rows", rows}});
  }
  const json j = {{"format", kFormat},
                  {"version", kVersion},
                  {"world_size", worldSize},
                  {"device", deviceTypeName(device)},
                  {"dtype", dtypeName(dtype)},
                  {"reduce_op", reduceOpName(reduceOp)},
                  {"ops", ops}};
  return j.dump(1) + "\n";
}

MeasuredTable parseMeasuredTable(const std::string& text, const std::string& source) {
  const auto refuse = [&](const std::string& why) -> ConfigError {
    return ConfigError("measured table " + source + ": " + why +
                       "; write it again with `commhost tune --table FILE` (format " + kFormat + " version " +
                       std::to_string(MeasuredTable::kVersion) + ")");
  };
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw refuse(std::string("not JSON (") + e.what() + ")");
  }
  const auto format = j.is_object() ? j.find("format") : j.end();
  if (!j.is_object() || format == j.end() || *format != kFormat)
    throw refuse("not a measured table (no format \"" + std::string(kFormat) + "\")");
  const auto version = j.find("version");
  if (version == j.end() || !version->is_number_integer() || *version != MeasuredTable::kVersion)
    throw refuse("version " + (version == j.end() ? std::string("none") : version->dump()) +
                 ", but this commhost reads version " + std::to_string(MeasuredTable::kVersion) + " only");
  MeasuredTable t;
  try {
    t.worldSize = j.at("world_size").get<int>();
    const std::string device = j.at("device").get<std::string>();
    if (device != "cpu" && device != "cuda") throw InvalidArgument("device '" + device + "' is neither cpu nor cuda");
    t.device = device == "cuda" ? DeviceType::CUDA : DeviceType::CPU;
    t.dtype = parseDType(j.at("dtype").get<std::string>());
    t.reduceOp = parseReduceOp(j.at("reduce_op").get<std::string>());
    for (const auto& o : j.at("ops")) {
      MeasuredTable::Op op;
      op.op = parseOpType(o.at("op").get<std::string>());
      for (const auto& r : o.at("rows")) {
        MeasuredTable::Row row;
        row.bytes = r.at("bytes").get<int64_t>();
        for (const auto& c : r.at("cells"))
          row.cells.push_back(
              {c.at("backend").get<std::string>(), c.at("median_us").get<double>(), c.at("right").get<bool>()});
        op.rows.push_back(std::move(row));
      }
      std::sort(op.rows.begin(), op.rows.end(), [](const auto& a, const auto& b) { return a.bytes < b.bytes; });
      t.ops.push_back(std::move(op));
    }
  } catch (const json::exception& e) {
    throw refuse(std::string("a field is missing or of the wrong type (") + e.what() + ")");
  } catch (const Error& e) {
    throw refuse(e.what());
  }
  return t;
}

}  // namespace commhost
