// SPDX-License-Identifier: Apache-2.0
// commhost bench: nccl-tests for every backend. Joins the job from the environment
// (commhost run sets it), sweeps message sizes for each op and prints, from rank 0, the
// nccl-tests table (or JSON lines). Exits 1 when any result was wrong.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "../commands.h"
#include "bench_ops.h"
#include "commhost/errors.h"
#include "inject.h"

namespace commhost::cli {
namespace {

struct BenchArgs {
  std::string op = "allreduce";
  std::string sizes = "8:64M";
  double factor = 2;
  std::string step;
  std::string dtype = "f32";
  std::string redop = "sum";
  int root = 0;
  int iters = 20;
  int warmup = 5;
  bool outOfPlace = false;
  bool check = false;
  bool json = false;
  std::string backend;
  std::vector<std::string> sets;
  std::vector<std::string> injections;
};

// A size the user wrote must be a whole number of elements: `--sizes 6` with f32 would
// otherwise run 4 bytes and print 4 in a table the user reads as 6. Sizes the sweep
// computes (--factor 1.5) are rounded down to whole elements instead.
int64_t wholeElements(const BenchArgs& a, const std::string& text, int64_t elem) {
  const int64_t s = parseSize(text);
  if (s > 0 && s % elem != 0) {
    const int64_t below = std::max(elem, s / elem * elem), above = (s / elem + 1) * elem;
    throw InvalidArgument("--sizes " + a.sizes + ": " + text + " is not a whole number of " + a.dtype + " elements (" +
                          std::to_string(elem) + " bytes each); use " + std::to_string(below) +
                          (below == above ? "" : " or " + std::to_string(above)));
  }
  return s;
}

std::vector<int64_t> sweep(const BenchArgs& a, int64_t elem) {
  if (a.sizes.find(',') != std::string::npos) {  // an explicit list: 8,64K,1M
    std::vector<int64_t> out;
    for (size_t at = 0; at <= a.sizes.size();) {
      const size_t comma = std::min(a.sizes.find(',', at), a.sizes.size());
      const int64_t s = wholeElements(a, a.sizes.substr(at, comma - at), elem);
      if (s <= 0) throw InvalidArgument("--sizes " + a.sizes + ": every size must be above 0");
      out.push_back(s);
      at = comma + 1;
    }
    return out;
  }
  const size_t colon = a.sizes.find(':');
  const int64_t lo = wholeElements(a, a.sizes.substr(0, colon), elem);
  const int64_t hi = colon == std::string::npos ? lo : wholeElements(a, a.sizes.substr(colon + 1), elem);
  if (lo <= 0 || hi < lo)
    throw InvalidArgument("--sizes " + a.sizes + ": want MIN:MAX with 0 < MIN <= MAX, e.g. 8:64M");
  const int64_t step = a.step.empty() ? 0 : parseSize(a.step);
  if (step <= 0 && a.factor <= 1) throw InvalidArgument("--factor must be above 1 (or give --step)");
  std::vector<int64_t> out;
  for (int64_t s = lo; s <= hi;) {
    out.push_back(s);
    int64_t next = step > 0 ? s + step : static_cast<int64_t>(static_cast<double>(s) * a.factor);
    next = next / elem * elem;
    s = next > s ? next : s + elem;
  }
  return out;
}

struct Row {
  std::string op;
  int64_t size, count;
  std::string dtype, redop;
  int root;
  bool inPlace;
  double timeUs, algbw, busbw;
  int64_t wrong;
};

void printHeader() {
  std::printf("#%11s %12s %8s %8s %6s %6s %11s %8s %8s %7s\n", "size", "count", "type", "redop", "root", "inplc",
              "time(us)", "algbw", "busbw", "#wrong");
  std::printf("#%11s %12s %8s %8s %6s %6s %11s %8s %8s %7s\n", "(B)", "(elements)", "", "", "", "", "", "(GB/s)",
              "(GB/s)", "");
}

void printRow(const Row& r, bool json) {
  if (json) {
    std::printf(
        "{\"op\": \"%s\", \"size\": %lld, \"count\": %lld, \"dtype\": \"%s\", \"redop\": \"%s\", \"root\": %d, "
        "\"inplace\": %s, \"time_us\": %.2f, \"algbw\": %.4f, \"busbw\": %.4f, \"wrong\": %lld}\n",
        r.op.c_str(), static_cast<long long>(r.size), static_cast<long long>(r.count), r.dtype.c_str(), r.redop.c_str(),
        r.root, r.inPlace ? "true" : "false", r.timeUs, r.algbw, r.busbw, static_cast<long long>(r.wrong));
  } else {
    std::printf(" %11lld %12lld %8s %8s %6s %6d %11.2f %8.3f %8.3f %7s\n", static_cast<long long>(r.size),
                static_cast<long long>(r.count), r.dtype.c_str(), r.redop.c_str(),
                r.root >= 0 ? std::to_string(r.root).c_str() : "-", r.inPlace ? 1 : 0, r.timeUs, r.algbw, r.busbw,
                r.wrong >= 0 ? std::to_string(r.wrong).c_str() : "N/A");
  }
  std::fflush(stdout);
}

// The largest value over ranks (times) or the sum (wrong counts), through the group.
double across(ProcessGroup& pg, Injector& inject, double value, ReduceOp op) {
  Tensor t = Tensor::empty({1}, DType::Float64);
  t.data_as<double>()[0] = value;
  if (auto injected = inject.before(pg)) injected->wait();
  pg.allreduce(t, {op})->wait();
  return t.data_as<double>()[0];
}

int measure(const BenchArgs& a, const std::shared_ptr<ProcessGroup>& pg, Injector& inject) {
  BenchParams params;
  params.dtype = parseDType(a.dtype);
  if (params.dtype == DType::Bool) throw InvalidArgument("--dtype bool is not measured; use u8 or an integer type");
  params.reduceOp = ReduceOp(parseReduceOp(a.redop));
  params.root = a.root;
  params.inPlace = !a.outOfPlace;
  if (a.iters < 1 || a.warmup < 0) throw InvalidArgument("--iters must be >= 1 and --warmup >= 0");

  const std::vector<std::string> ops = a.op == "all" ? benchOpNames() : std::vector<std::string>{a.op};
  const auto sizes = sweep(a, static_cast<int64_t>(elementSize(params.dtype)));
  const bool leader = pg->rank() == 0;
  // Progress only to a terminal: under `commhost run` stderr is the rank's log.
  const bool progress = leader && sizes.size() > 8 && ::isatty(STDERR_FILENO);
  if (leader && !a.json)
    std::printf("# commhost bench: %d ranks, config %s, dtype %s, iters %d, warmup %d%s\n", pg->size(),
                pg->config().source.c_str(), a.dtype.c_str(), a.iters, a.warmup, a.check ? ", checked" : "");
  int64_t wrongTotal = 0;
  for (const auto& name : ops) {
    auto op = makeBenchOp(name, *pg, params);
    const auto run = [&] {
      if (auto injected = inject.before(*pg)) return injected;
      return op->run();
    };
    double busSum = 0;
    int rows = 0;
    if (leader && !a.json) {
      std::printf("#\n# %s\n", name.c_str());
      printHeader();
    }
    for (int64_t bytes : (name == "barrier" ? std::vector<int64_t>{0} : sizes)) {
      if (progress) std::fprintf(stderr, "[bench] %s %lld bytes\r", name.c_str(), static_cast<long long>(bytes));
      op->prepare(bytes);
      op->fill();
      for (int i = 0; i < a.warmup; ++i) run()->wait();
      if (auto injected = inject.before(*pg)) injected->wait();
      pg->barrier()->wait();
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < a.iters; ++i) run()->wait();
      const double mine = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
                          a.iters;
      const double us = across(*pg, inject, mine, ReduceOp::Max);
      int64_t wrong = -1;
      if (a.check) {
        op->fill();
        run()->wait();
        wrong = static_cast<int64_t>(across(*pg, inject, static_cast<double>(op->check()), ReduceOp::Sum));
        wrongTotal += wrong;
      }
      const double algbw = us > 0 ? static_cast<double>(op->size()) / (us * 1e-6) / 1e9 : 0;
      const double busbw = algbw * op->busFactor();
      busSum += busbw;
      ++rows;
      if (leader)
        printRow({name, op->size(), op->count(), dtypeName(params.dtype),
                  op->usesReduceOp() ? reduceOpName(params.reduceOp.kind) : "none", op->usesRoot() ? params.root : -1,
                  params.inPlace, us, algbw, busbw, wrong},
                 a.json);
    }
    if (leader && !a.json) std::printf("# %s avg bus bandwidth: %.3f GB/s\n", name.c_str(), rows ? busSum / rows : 0);
  }
  if (progress) std::fprintf(stderr, "%60s\r", "");
  if (wrongTotal > 0) {
    if (leader)
      std::fprintf(stderr, "commhost bench: %lld wrong elements; see the #wrong column\n",
                   static_cast<long long>(wrongTotal));
    return 1;
  }
  return 0;
}

int bench(const BenchArgs& a) {
  // Bad --sizes fail before the job is joined, not after every rank started.
  if (parseDType(a.dtype) != DType::Bool) sweep(a, static_cast<int64_t>(elementSize(parseDType(a.dtype))));
  InitOptions init;
  init.overrides.set = a.sets;
  if (!a.backend.empty()) init.overrides.set.push_back("routes=[{ device: cpu, backend: " + a.backend + " }]");
  std::vector<Injection> injections;
  for (const auto& spec : a.injections) injections.push_back(parseInjection(spec));
  Injector inject(std::move(injections));
  auto pg = commhost::init(init);
  try {
    return measure(a, pg, inject);
  } catch (const Error& e) {
    // Report before the group is torn down: a store-serving rank keeps serving its peers
    // for a while on the way out, and the launcher may stop it before that ends.
    std::fprintf(stderr, "commhost: %s\n", e.what());
    std::fflush(stderr);
    return 1;
  }
}

}  // namespace

void addBenchCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "nccl-tests style sweep of one op (or all) through the configured routes");
  static BenchArgs a;
  std::string opList;
  for (const auto& n : benchOpNames()) opList += n + "|";
  cmd->add_option("--op", a.op, opList + "all")->capture_default_str();
  cmd->add_option("--sizes", a.sizes, "MIN:MAX message sizes (8, 64K, 1M, 64MiB ...), or a list: 8,64K,1M")
      ->capture_default_str();
  cmd->add_option("--factor", a.factor, "Multiply the size by this between rows")->capture_default_str();
  cmd->add_option("--step", a.step, "Add this size between rows instead of multiplying");
  cmd->add_option("--dtype", a.dtype, "f32 f64 f16 bf16 i8 u8 i32 i64")->capture_default_str();
  cmd->add_option("--redop", a.redop, "sum product min max avg band bor bxor")->capture_default_str();
  cmd->add_option("--root", a.root, "Root of rooted ops")->capture_default_str();
  cmd->add_option("--iters", a.iters, "Timed iterations per size")->capture_default_str();
  cmd->add_option("--warmup", a.warmup, "Untimed iterations per size")->capture_default_str();
  cmd->add_flag("--out-of-place", a.outOfPlace, "Separate input and output buffers where the op allows it");
  cmd->add_flag(
      "--inplace", [](int64_t) { a.outOfPlace = false; }, "In-place buffers (the default)");
  cmd->add_flag("--check", a.check, "Verify every result (per-rank verifiable data); fills #wrong");
  cmd->add_flag("--json", a.json, "One JSON object per row instead of the table");
  cmd->add_option("--backend", a.backend, "Route every cpu op to this configured backend");
  cmd->add_option("--set", a.sets, "Override a config key: --set backends.gloo.options.threads=2 (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--inject", a.injections,
                  "Fault injection (repeatable): hang:RANK@SEQ | exit:RANK@SEQ | slow:RANK@SEQ:MS | mismatch:RANK@SEQ")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->footer("Run it under the launcher: commhost run -n 4 -c configs/gloo.yaml -- commhost bench --op all --check");
  cmd->callback([] {
    const int rc = bench(a);
    if (rc) throw CLI::RuntimeError(rc);
  });
}

}  // namespace commhost::cli
