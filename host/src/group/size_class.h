// SPDX-License-Identifier: Apache-2.0
// The power-of-two size class that shadow reports and live routing group samples by.
#pragma once

#include <cstdint>

namespace commhost {

// The smallest power of two at least `bytes` (1 for 0 or 1 byte): a class holds the sizes
// (class/2, class], so a route's cells and both reports bucket alike.
inline int64_t powerOfTwoClass(int64_t bytes) {
  int64_t c = 1;
  while (c < bytes && c < (int64_t{1} << 62)) c <<= 1;
  return c;
}

}  // namespace commhost
