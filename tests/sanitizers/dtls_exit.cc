// SPDX-License-Identifier: Apache-2.0
// The smallest program that crashed LeakSanitizer's tracer in commhost's ASan runs, with no
// commhost in it: threads that touched a dlopened library's thread_local are still alive at
// exit (as a gloo worker left inside its transport after an abort).
//   lsan_dtls_exit LIBRARY [leak]   "leak" also loses 10 bytes, which LSan must report
//
// GCC 12's libasan (Debian 12) guesses a dynamic TLS block's bounds from a "glibc 2.19
// header" whenever the block starts 16 bytes into a page, which ASan's own small heap
// chunks do: it reads ASan's chunk header as {start, size} (seen with verbosity=2:
// "glibc >=2.19 suspected; tls={0x100000017 0x800001102}") and the exit check's scan of
// that range faults: "Tracer caught signal 11", no leak report at all.
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {
long (*touch)() = nullptr;

void* body(void*) {
  touch();
  ::pause();  // alive at exit
  return nullptr;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s LIBRARY [leak]\n", argv[0]);
    return 2;
  }
  void* library = ::dlopen(argv[1], RTLD_NOW);
  if (!library) {
    std::fprintf(stderr, "dlopen: %s\n", ::dlerror());
    return 2;
  }
  touch = reinterpret_cast<long (*)()>(::dlsym(library, "dtlsTouch"));
  if (!touch) return 2;
  for (int i = 0; i < 4; ++i) {
    pthread_t t;
    if (::pthread_create(&t, nullptr, body, nullptr) != 0) return 2;
    ::pthread_detach(t);
  }
  ::usleep(100 * 1000);  // every thread has touched its block
  if (argc > 2 && std::strcmp(argv[2], "leak") == 0) {
    void* volatile lost = std::malloc(10);
    lost = nullptr;
  }
  return 0;
}
