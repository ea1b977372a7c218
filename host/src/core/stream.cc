// SPDX-License-Identifier: Apache-2.0
#include "commhost/stream.h"

namespace commhost {
namespace {
thread_local void* tlCurrentStream = nullptr;
}  // namespace

void* currentStream() { return tlCurrentStream; }
void setCurrentStream(void* stream) { tlCurrentStream = stream; }

}  // namespace commhost
