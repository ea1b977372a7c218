// SPDX-License-Identifier: Apache-2.0
// Launch reports (commhost/sdk/launch_report.h): the record's one writer and one reader, and
// this process's end of the channel to `commhost run`.
#include "commhost/sdk/launch_report.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "commhost/errors.h"
#include "commhost/process_group.h"

namespace commhost {

namespace {

struct EventName {
  LaunchEvent event;
  const char* name;
};
constexpr EventName kEventNames[] = {
    {LaunchEvent::StoreWaiting, "store_waiting"},
    {LaunchEvent::StoreReached, "store_reached"},
    {LaunchEvent::StoreGaveUp, "store_gave_up"},
    {LaunchEvent::Joined, "joined"},
    {LaunchEvent::Failed, "failed"},
};

// Cuts `text` to at most `max` bytes at a character boundary (an error message may be long).
std::string cut(const std::string& text, size_t max) {
  if (text.size() <= max) return text;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return text.substr(0, n) + "...";
}

}  // namespace

const char* launchEventName(LaunchEvent event) {
  for (const auto& e : kEventNames)
    if (e.event == event) return e.name;
  return "unknown";
}

std::string encodeLaunchReport(const LaunchReport& r) {
  // Cut so that the record stays under kMaxLaunchReportBytes even if JSON escapes every
  // byte of the texts (6 bytes each).
  nlohmann::json j = {{"version", kLaunchReportVersion},
                      {"event", launchEventName(r.event)},
                      {"rank", r.rank},
                      {"where", cut(r.where, 256)},
                      {"seconds", r.seconds},
                      {"code", cut(r.code, 32)},
                      {"text", cut(r.text, 2400)},
                      {"hint", cut(r.hint, 1000)}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<LaunchReport> decodeLaunchReport(const std::string& record, std::string* problem) {
  const auto j = nlohmann::json::parse(record, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("version")) {
    *problem = "not a launch report (" + cut(record, 80) + ")";
    return std::nullopt;
  }
  if (j["version"] != kLaunchReportVersion) {
    *problem = "a launch report of version " + j["version"].dump() + ", but this commhost reads version " +
               std::to_string(kLaunchReportVersion) + " (the rank runs another commhost build)";
    return std::nullopt;
  }
  try {
    LaunchReport r;
    const std::string event = j.at("event").get<std::string>();
    bool known = false;
    for (const auto& e : kEventNames)
      if (event == e.name) r.event = e.event, known = true;
    if (!known) throw std::invalid_argument("unknown event '" + event + "'");
    j.at("rank").get_to(r.rank);
    j.at("where").get_to(r.where);
    j.at("seconds").get_to(r.seconds);
    j.at("code").get_to(r.code);
    j.at("text").get_to(r.text);
    j.at("hint").get_to(r.hint);
    return r;
  } catch (const std::exception& e) {
    *problem = std::string("a malformed launch report: ") + e.what();
    return std::nullopt;
  }
}

const LaunchReportFn& launchReporter() {
  // Made once: the descriptor and rank come from the launch variables, which do not change.
  static const LaunchReportFn reporter = []() -> LaunchReportFn {
    LaunchInfo launch;
    try {
      launch = detectLaunch();
    } catch (const std::exception&) {
      return {};  // init() names the bad variables itself
    }
    struct stat st {};
    const int fd = launch.reportFd;
    if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return {};
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);  // not for the programs this rank runs
    const int rank = launch.rank;
    return [fd, rank](const LaunchReport& report) {
      try {
        LaunchReport r = report;
        if (r.rank < 0) r.rank = rank;
        const std::string record = encodeLaunchReport(r);
        // One datagram a record; never waits on the launcher, never SIGPIPE if it is gone.
        (void)!::send(fd, record.data(), record.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      } catch (const std::exception&) {
        // A report is best effort: the rank goes on without it.
      }
    };
  }();
  return reporter;
}

void reportLaunchFailure(const std::exception& e, const std::string& where) {
  const auto& report = launchReporter();
  if (!report) return;
  LaunchReport r;
  r.event = LaunchEvent::Failed;
  r.where = where;
  if (const auto* error = dynamic_cast<const Error*>(&e)) r.code = errorCodeName(error->code());
  r.text = e.what();
  report(r);
}

}  // namespace commhost
