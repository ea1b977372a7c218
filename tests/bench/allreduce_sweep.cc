// SPDX-License-Identifier: Apache-2.0
// Allreduce sweep through the host, measured the way ../shared/peers/gloo_allreduce.cc
// measures raw Gloo (same sizes, iteration counts, warm-up; float32 sum, in place), so
// the two print comparable lines. Launch one process per rank with RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT and COMMHOST_CONFIG set; rank 0 prints
//   size_bytes time_us algbw_GBs busbw_GBs
// (`commhost bench` will supersede this with the full nccl-tests table.)
#include <chrono>
#include <cstdio>

#include "commhost/commhost.h"

int main() {
  try {
    auto pg = commhost::init();
    const int world = pg->size();
    const long sizes[] = {8, 1024, 65536, 1 << 20, 16 << 20, 64 << 20};
    for (long nb : sizes) {
      long n = nb / 4;
      if (n < 1) n = 1;
      commhost::Tensor t = commhost::Tensor::empty({n}, commhost::DType::Float32);
      for (long i = 0; i < n; ++i) t.data_as<float>()[i] = static_cast<float>(pg->rank() + 1);
      long iters = static_cast<long>(2e8 / nb);
      if (iters > 1000) iters = 1000;
      if (iters < 5) iters = 5;
      for (int i = 0; i < 3; ++i) pg->allreduce(t)->wait();
      const auto t0 = std::chrono::steady_clock::now();
      for (long i = 0; i < iters; ++i) pg->allreduce(t)->wait();
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
      if (pg->rank() == 0) {
        const double alg = n * 4 / dt / 1e9;
        std::printf("%10ld %12.1f %8.3f %8.3f\n", n * 4, dt * 1e6, alg, alg * 2 * (world - 1) / world);
        std::fflush(stdout);
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "allreduce_sweep: %s\n", e.what());
    return 2;
  }
}
