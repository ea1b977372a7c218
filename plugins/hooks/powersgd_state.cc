// SPDX-License-Identifier: Apache-2.0
#include "powersgd_state.h"

#include <cstring>
#include <string>

#include "commhost/errors.h"

namespace commhost::powersgd {
namespace {

constexpr uint32_t kMagic = 0x44475350;  // "PSGD"
constexpr uint32_t kFormat = 1;

class Writer {
 public:
  template <class T> void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out.insert(out.end(), p, p + sizeof(T));
  }
  void floats(const std::vector<float>& v) {
    put<uint64_t>(v.size());
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    out.insert(out.end(), p, p + v.size() * sizeof(float));
  }
  std::vector<uint8_t> out;
};

class Reader {
 public:
  explicit Reader(const std::vector<uint8_t>& in) : in_(in) {}
  template <class T> T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, in_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  std::vector<float> floats() {
    const auto n = get<uint64_t>();
    if (n > (in_.size() - at_) / sizeof(float)) truncated();
    std::vector<float> v(n);
    std::memcpy(v.data(), in_.data() + at_, n * sizeof(float));
    at_ += n * sizeof(float);
    return v;
  }
  bool done() const { return at_ == in_.size(); }

 private:
  void need(size_t n) const {
    if (in_.size() - at_ < n) truncated();
  }
  [[noreturn]] void truncated() const {
    throw InvalidArgument("powersgd loadState: the state is truncated at byte " + std::to_string(at_) + " of " +
                          std::to_string(in_.size()) + "; pass the bytes saveState() returned, whole");
  }
  const std::vector<uint8_t>& in_;
  size_t at_ = 0;
};

}  // namespace

std::vector<uint8_t> encode(const State& state, int64_t rank) {
  Writer w;
  w.put(kMagic);
  w.put(kFormat);
  w.put(rank);
  w.put(state.iter);
  w.put(state.draws);
  w.put<uint64_t>(state.buckets.size());
  for (const auto& [index, b] : state.buckets) {
    w.put<uint64_t>(index);
    w.floats(b.error);
    w.floats(b.p);
    w.floats(b.q);
  }
  return std::move(w.out);
}

State decode(const std::vector<uint8_t>& bytes, int64_t rank) {
  Reader r(bytes);
  if (bytes.size() < 8 || r.get<uint32_t>() != kMagic)
    throw InvalidArgument(
        "powersgd loadState: these bytes are not a powersgd state (no PSGD header); pass what "
        "a powersgd hook's saveState() returned");
  const auto format = r.get<uint32_t>();
  if (format != kFormat)
    throw InvalidArgument("powersgd loadState: state format " + std::to_string(format) + ", this plugin reads " +
                          std::to_string(kFormat) + "; resume with the plugin version that saved it");
  const auto savedRank = r.get<int64_t>();
  if (savedRank != rank)
    throw InvalidArgument("powersgd loadState: the state was saved by a hook with rank " + std::to_string(savedRank) +
                          ", this hook has rank " + std::to_string(rank) +
                          "; create the hook with the options the saved job used");
  State s;
  s.iter = r.get<int64_t>();
  s.draws = r.get<uint64_t>();
  const auto count = r.get<uint64_t>();
  for (uint64_t i = 0; i < count; ++i) {
    const auto index = r.get<uint64_t>();
    BucketState b;
    b.error = r.floats();
    b.p = r.floats();
    b.q = r.floats();
    s.buckets[index] = std::move(b);
  }
  if (!r.done())
    throw InvalidArgument("powersgd loadState: bytes left after the state; pass the bytes saveState() returned");
  return s;
}

}  // namespace commhost::powersgd
