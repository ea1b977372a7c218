// SPDX-License-Identifier: Apache-2.0
#include "commhost/capabilities.h"

namespace commhost {

const char* featureName(Feature f) {
  switch (f) {
    case Feature::Split: return "split";
    case Feature::MultiProcess: return "multi_process";
    case Feature::MultiHost: return "multi_host";
  }
  return "?";
}

namespace {
template <class E, class NameFn> std::string list(EnumSet<E> set, int count, NameFn name) {
  std::string out;
  for (int i = 0; i < count; ++i)
    if (set.has(static_cast<E>(i))) out += (out.empty() ? "" : ", ") + std::string(name(static_cast<E>(i)));
  return out.empty() ? "none" : out;
}
}  // namespace

std::string describe(const Capabilities& c) {
  return "ops: " + list(c.ops, kNumOpTypes, opName) + "\ndtypes: " + list(c.dtypes, kNumDTypes, dtypeName) +
         "\nreduce ops: " + list(c.reduceOps, ReduceOp::kNumKinds, reduceOpName) +
         "\ndevices: " + list(c.devices, kNumDeviceTypes, deviceTypeName) +
         "\nfeatures: " + list(c.features, kNumFeatures, featureName);
}

}  // namespace commhost
