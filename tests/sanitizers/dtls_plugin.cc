// SPDX-License-Identifier: Apache-2.0
// A dlopened library with a small thread_local, as every plugin with per-thread state:
// each thread's block of it is dynamic TLS, a small heap chunk (lsan_dtls_test.sh).
extern "C" __attribute__((visibility("default"))) long dtlsTouch() {
  static thread_local long counter;
  return ++counter;
}
