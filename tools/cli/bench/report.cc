// SPDX-License-Identifier: Apache-2.0
#include "report.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "commhost/errors.h"
#include "commhost/process_group.h"

namespace commhost::cli {

Report::Report(bool leader, bool sideBySide, const std::string& jsonPath)
    : leader_(leader), sideBySide_(sideBySide), jsonPath_(jsonPath) {
  if (!leader_ || jsonPath.empty()) return;
  json_ = jsonPath == "-" ? stdout : std::fopen(jsonPath.c_str(), "w");
  if (!json_)
    throw InvalidArgument("--json " + jsonPath + ": cannot write it (" + std::strerror(errno) +
                          "); give a writable file, or - for standard output");
}

Report::~Report() {
  if (json_ && json_ != stdout) std::fclose(json_);
}

void Report::beginOp(const std::string& op, const std::string& route) {
  if (!leader_ || json_ == stdout) return;
  std::printf("#\n# %s (route: %s)\n", op.c_str(), route.c_str());
  if (sideBySide_) {
    std::printf("#%11s %12s %8s %8s %6s   %-36s   %-36s\n", "", "", "", "", "", "out-of-place", "in-place");
    std::printf("#%11s %12s %8s %8s %6s %11s %8s %8s %7s %11s %8s %8s %7s\n", "size", "count", "type", "redop", "root",
                "time(us)", "algbw", "busbw", "#wrong", "time(us)", "algbw", "busbw", "#wrong");
    std::printf("#%11s %12s %8s %8s %6s %11s %8s %8s %7s %11s %8s %8s %7s\n", "(B)", "(elements)", "", "", "", "",
                "(GB/s)", "(GB/s)", "", "", "(GB/s)", "(GB/s)", "");
  } else {
    std::printf("#%11s %12s %8s %8s %6s %6s %11s %10s %10s %8s %8s %7s\n", "size", "count", "type", "redop", "root",
                "inplc", "time(us)", "p50(us)", "p99(us)", "algbw", "busbw", "#wrong");
    std::printf("#%11s %12s %8s %8s %6s %6s %11s %10s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "", "", "",
                "(mean)", "", "", "(GB/s)", "(GB/s)", "");
  }
  std::fflush(stdout);
}

void Report::line(const ResultLine& l) {
  if (!leader_) return;
  if (json_) {
    for (const auto& m : l.results) {
      nlohmann::ordered_json j;
      j["op"] = l.op;
      j["size"] = l.size;
      j["count"] = l.count;
      j["dtype"] = l.dtype;
      j["device"] = l.device;
      j["redop"] = l.redop;
      j["root"] = l.root >= 0 ? nlohmann::ordered_json(l.root) : nlohmann::ordered_json();
      j["inplace"] = m.inPlace;
      j["time_us"] = m.timeUs;
      j["algbw"] = m.algbw;
      j["busbw"] = m.busbw;
      j["wrong"] = m.wrong >= 0 ? nlohmann::ordered_json(m.wrong) : nlohmann::ordered_json();
      j["iters"] = m.iters;
      const auto stat = [&](double us) {
        return m.percentiles ? nlohmann::ordered_json(us) : nlohmann::ordered_json();
      };
      j["min_us"] = stat(m.stats.minUs);  // null with --timing loop: no iteration was clocked alone
      j["p50_us"] = stat(m.stats.p50Us);
      j["p99_us"] = stat(m.stats.p99Us);
      j["max_us"] = stat(m.stats.maxUs);
      if (!m.roundMeansUs.empty()) j["round_means_us"] = m.roundMeansUs;
      j["unstable"] = m.unstable.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(m.unstable);
      std::fprintf(json_, "%s\n", j.dump().c_str());
    }
    std::fflush(json_);
    if (json_ == stdout) return;
  }
  std::printf(" %11lld %12lld %8s %8s %6s", static_cast<long long>(l.size), static_cast<long long>(l.count),
              l.dtype.c_str(), l.redop.c_str(), l.root >= 0 ? std::to_string(l.root).c_str() : "-");
  for (const auto& m : l.results) {
    if (sideBySide_) std::printf(" %11.2f", m.timeUs);
    else if (m.percentiles)
      std::printf(" %6d %11.2f %10.2f %10.2f", m.inPlace ? 1 : 0, m.timeUs, m.stats.p50Us, m.stats.p99Us);
    else std::printf(" %6d %11.2f %10s %10s", m.inPlace ? 1 : 0, m.timeUs, "-", "-");
    std::printf(" %8.3f %8.3f %7s", m.algbw, m.busbw, m.wrong >= 0 ? std::to_string(m.wrong).c_str() : "N/A");
  }
  std::printf("\n");
  for (const auto& m : l.results) {
    if (m.unstable.empty()) continue;
    unstableInOp_ = true;
    const std::string rounds = m.roundMeansUs.size() > 1 ? " x " + std::to_string(m.roundMeansUs.size()) + " rounds"
                                                         : std::string();
    std::printf("# ! %lld bytes%s: %s over %d iterations%s\n", static_cast<long long>(l.size),
                sideBySide_ ? (m.inPlace ? " in-place" : " out-of-place") : "", m.unstable.c_str(), m.iters,
                rounds.c_str());
  }
  std::fflush(stdout);
}

void Report::endOp(const std::string& op, double avgBusbw) {
  if (!leader_ || json_ == stdout) return;
  std::printf("# %s avg bus bandwidth: %.3f GB/s\n", op.c_str(), avgBusbw);
  if (unstableInOp_)
    std::printf(
        "# ! rows above spread widely across iterations: their mean is not a stable figure (other load on the "
        "machine, or more ranks than cores); rerun with --repeat 5 for the median of 5 rounds, or a longer "
        "--min-time\n");
  unstableInOp_ = false;
  std::fflush(stdout);
}

void printShadows(std::FILE* out, const std::vector<ShadowRecord>& records) {
  for (const auto& r : records) {
    std::fprintf(out, "# shadow: %s on %s, shadow %s, up to %lld bytes: %llu/%llu agree", r.op.c_str(),
                 r.backend.c_str(), r.shadow.c_str(), static_cast<long long>(r.bytes),
                 static_cast<unsigned long long>(r.agreed), static_cast<unsigned long long>(r.samples));
    if (r.disagreed) std::fprintf(out, ", %llu disagree", static_cast<unsigned long long>(r.disagreed));
    if (r.failed) std::fprintf(out, ", %llu failed", static_cast<unsigned long long>(r.failed));
    if (r.backendUs > 0) std::fprintf(out, "; the shadow took %.2fx the time", r.shadowUs / r.backendUs);
    std::fprintf(out, "\n");
    if (!r.firstDisagreement.empty()) std::fprintf(out, "#   first disagreement: %s\n", r.firstDisagreement.c_str());
    if (!r.firstFailure.empty()) std::fprintf(out, "#   first failure: %s\n", r.firstFailure.c_str());
  }
  std::fflush(out);
}

void printLive(std::FILE* out, const ProcessGroup& pg) {
  const std::string rows = pg.routes().describeLive();
  if (rows.empty()) return;
  std::fprintf(out, "# live routing moved these during the run (generation %llu now):\n",
               static_cast<unsigned long long>(pg.generation()));
  for (size_t at = 0; at < rows.size();) {
    const size_t end = std::min(rows.find('\n', at), rows.size());
    std::fprintf(out, "# live: %s\n", rows.substr(at, end - at).c_str());
    at = end + 1;
  }
  std::fflush(out);
}

}  // namespace commhost::cli
