// SPDX-License-Identifier: Apache-2.0
// PowerSGD's state across iterations, and its saved form (CommHook::saveState).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace commhost::powersgd {

// Per bucket index, as c10d keys error_dict, p_memory_dict and q_memory_dict.
struct BucketState {
  std::vector<float> error;  // local error feedback: input + error - output, per element
  std::vector<float> p;      // the last orthogonalized P of every compressed gradient, concatenated
  std::vector<float> q;      // the last Q (averaged), reused as the next warm start
};

struct State {
  int64_t iter = 0;    // iterations finished (advanced by the last bucket of each)
  uint64_t draws = 0;  // random Q initialisations so far (the seed of the next one)
  std::map<size_t, BucketState> buckets;
};

// Bytes: "PSGD", format version, the rank option the state was computed with, then the
// state. decode() throws InvalidArgument for bytes that are not such a state or were
// saved by a hook of another rank.
std::vector<uint8_t> encode(const State& state, int64_t rank);
State decode(const std::vector<uint8_t>& bytes, int64_t rank);

}  // namespace commhost::powersgd
