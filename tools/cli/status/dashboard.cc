// SPDX-License-Identifier: Apache-2.0
#include "dashboard.h"

#include <unistd.h>

#include <climits>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commhost/errors.h"
#include "status_view.h"

namespace commhost::cli {

std::string dashboardPage() {
  namespace fs = std::filesystem;
  char self[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  const fs::path installed = fs::path(n > 0 ? std::string(self, static_cast<size_t>(n)) : "").parent_path() /
                             COMMHOST_DASHBOARD_FROM_BINDIR / "index.html";
  const fs::path source = fs::path(COMMHOST_SOURCE_DASHBOARD) / "index.html";
  std::error_code ec;
  const fs::path page = fs::is_regular_file(installed, ec) ? installed : source;
  std::ifstream in(page);
  if (!in)
    throw InvalidArgument("--dashboard: the page is in neither " + installed.string() + " (installed) nor " +
                          source.string() + " (the source tree): reinstall commhost");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string dashboardJson(const std::vector<ProcessStatus>& ranks, int64_t nowUnixMs, int expectedRanks) {
  ViewOptions o;
  o.nowUnixMs = nowUnixMs;
  o.expectedRanks = expectedRanks;
  nlohmann::json found = nlohmann::json::array();
  for (const Problem& p : problems(ranks, o)) found.push_back({{"rank", p.rank}, {"kind", p.kind}, {"text", p.text}});
  nlohmann::json out = {{"summary", summaryLine(ranks, o)},
                        {"problems", std::move(found)},
                        {"now_unix_ms", nowUnixMs},
                        {"job", nlohmann::json::parse(jobStatusJson(ranks))}};
  return out.dump();
}

}  // namespace commhost::cli
