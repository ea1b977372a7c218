// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the tcp store's frame decoder: build with clang and
// -DCOMMHOST_FUZZ=ON, then run build/bin/commhost_fuzz_frame. Any input must either decode
// or throw ProtocolError; a crash, leak or sanitizer report is a bug.
#include <cstddef>
#include <cstdint>

#include "protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace commhost::tcpstore;
  try {
    if (size >= kHeaderSize) {
      const uint32_t length = parseHeader(data, 1u << 20);
      if (length <= size - kHeaderSize) decodeRequest(data + kHeaderSize, length);
    }
    decodeRequest(data, size);
  } catch (const ProtocolError&) {
  }
  return 0;
}
