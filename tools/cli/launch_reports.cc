// SPDX-License-Identifier: Apache-2.0
#include "launch_reports.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace commhost::cli {

ReportChannel ReportChannel::open() {
  int fds[2];
  // SEQPACKET: one record a message, so a record is never split or merged with the next;
  // CLOEXEC on both, the rank's end is let through exec by the child (launcher.cc).
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0)
    throw std::runtime_error(std::string("socketpair: ") + std::generic_category().message(errno));
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  return {fds[0], fds[1]};
}

bool RankReports::readFrom(int& fd) {
  if (fd < 0) return false;
  bool any = false;
  static thread_local std::vector<char> buf(kMaxLaunchReportBytes);
  while (true) {
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      // Every holder of the rank's end closed it (the rank exited, or a program that is
      // not commhost's closed it): nothing more can come, and a closed end would wake
      // poll() at once forever.
      ::close(fd);
      fd = -1;
    }
    if (n <= 0) return any;
    any = true;
    std::string problem;
    if (auto report = decodeLaunchReport(std::string(buf.data(), static_cast<size_t>(n)), &problem)) take(*report);
    else if (problem_.empty()) problem_ = problem;
  }
}

void RankReports::take(const LaunchReport& r) {
  switch (r.event) {
    case LaunchEvent::StoreWaiting:
      if (store_ != StoreReach::GaveUp) store_ = StoreReach::Waiting;
      break;
    case LaunchEvent::StoreReached: store_ = StoreReach::Reached; break;
    case LaunchEvent::StoreGaveUp: store_ = StoreReach::GaveUp; break;
    case LaunchEvent::Joined: joined_ = true; break;
    case LaunchEvent::Failed:
      if (!failure_) failure_ = r;
      break;
  }
}

namespace {

// The first sentence of `text` on one line (a ". " outside parentheses before a capital or
// a digit, "e.g. 30s" excepted), at most `max` bytes: the rank printed the whole message
// itself; the summary needs one line per rank.
std::string firstSentence(const std::string& raw, size_t max) {
  std::string text;
  for (char c : raw) {
    const char d = (c == '\n' || c == '\t') ? ' ' : c;
    if (!(d == ' ' && (text.empty() || text.back() == ' '))) text += d;
  }
  int depth = 0;
  size_t end = text.size();
  for (size_t i = 0; i + 2 < text.size(); ++i) {
    if (text[i] == '(') ++depth;
    if (text[i] == ')' && depth > 0) --depth;
    const unsigned char next = static_cast<unsigned char>(text[i + 2]);
    const bool abbreviation = i >= 2 && text[i - 2] == '.';  // "e.g." "i.e."
    if (depth == 0 && text[i] == '.' && text[i + 1] == ' ' && (std::isupper(next) || std::isdigit(next)) &&
        !abbreviation) {
      end = i + 1;
      break;
    }
  }
  if (end > max) {
    end = max;
    while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
    return text.substr(0, end) + "...";
  }
  return text.substr(0, end);
}

}  // namespace

std::string RankReports::failureLine() const {
  if (!failure_) return "";
  std::string line = failure_->code.empty() ? "" : "[" + failure_->code + "] ";
  line += firstSentence(failure_->text, 240);
  if (!failure_->hint.empty()) line += " " + firstSentence(failure_->hint, 160);
  return line;
}

}  // namespace commhost::cli
