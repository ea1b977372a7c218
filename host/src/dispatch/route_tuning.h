// SPDX-License-Identifier: Apache-2.0
// The tuner's pass over a route table's cells (commhost/sdk/tuner.h): private to the
// dispatcher's build.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "commhost/dispatcher.h"
#include "commhost/sdk/tuner.h"

namespace commhost::dispatch {

// One build's tuner and what it is told of the group.
struct TuneStep {
  Tuner& tuner;
  std::string tunerName;              // the plugin, for notes and errors
  TuneQuery shape;                    // worldSize and localWorldSize filled; the rest per question
  std::vector<std::string> backends;  // each backend's name, by index
  std::vector<std::string> plugins;   // each backend's plugin, by index
};

// Where a cell's segments came from: for a segment's route, the backends (by index, in
// the route's order) that serve the cell and can run here.
using EligibleFn = std::function<std::vector<int>(int route)>;
// Interns a note's text, as the table's build does.
using NoteFn = std::function<int(const std::string&)>;

// `segments` with each one whose route has two or more eligible backends cut at the size
// classes (powers of two) and each class given the backend the tuner puts first; adjacent
// classes alike merged again. A class where the tuner changed the route's first choice is
// `tuned` and carries a note saying so. Throws PluginError when the tuner returns a list
// that is not a reordering of the one it was given, and passes on what the tuner throws.
std::vector<RouteTable::Segment> tuneSegments(const TuneStep& step, const std::vector<RouteTable::Segment>& segments,
                                              OpType op, DeviceType device, std::optional<DType> dtype,
                                              std::optional<ReduceOp::Kind> reduceOp, const EligibleFn& eligible,
                                              const NoteFn& note);

}  // namespace commhost::dispatch
