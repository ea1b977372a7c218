// SPDX-License-Identifier: Apache-2.0
#include "dumps.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "commhost/errors.h"

namespace commhost::cli::trace {

std::vector<RankDump> loadDumps(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir))
    throw InvalidArgument("trace: " + dir + " is not a directory; pass supervisor.flight_recorder.dump_dir");
  std::vector<RankDump> out;
  for (const auto& file : fs::directory_iterator(dir)) {
    if (file.path().extension() != ".json") continue;
    std::ifstream in(file.path());
    std::ostringstream text;
    text << in.rdbuf();
    auto dump = decodeFlightDump(text.str(), file.path().string());
    if (!dump) continue;  // JSON, but not a dump
    RankDump d;
    static_cast<FlightDump&>(d) = std::move(*dump);
    d.path = file.path().string();
    out.push_back(std::move(d));
  }
  if (out.empty())
    throw InvalidArgument("trace: no flight recorder dumps (rank<N>.json) in " + dir +
                          "; dumps appear on a timeout or error, on SIGUSR1, or with `commhost trace dump`");
  std::sort(out.begin(), out.end(), [](const RankDump& a, const RankDump& b) { return a.rank < b.rank; });
  return out;
}

}  // namespace commhost::cli::trace
