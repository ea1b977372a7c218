// SPDX-License-Identifier: Apache-2.0
#include "commhost/sdk/capabilities.h"

namespace commhost {

const char* featureName(Feature f) {
  switch (f) {
    case Feature::Split: return "split";
    case Feature::MultiProcess: return "multi_process";
    case Feature::MultiHost: return "multi_host";
  }
  return "?";
}

std::string describe(const Capabilities& c) {
  return "ops: " + listNames(c.ops, kNumOpTypes, opName) + "\ndtypes: " + listNames(c.dtypes, kNumDTypes, dtypeName) +
         "\nreduce ops: " + listNames(c.reduceOps, ReduceOp::kNumKinds, reduceOpName) +
         "\ndevices: " + listNames(c.devices, kNumDeviceTypes, deviceTypeName) +
         "\nfeatures: " + listNames(c.features, kNumFeatures, featureName);
}

}  // namespace commhost
