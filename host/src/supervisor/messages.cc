// SPDX-License-Identifier: Apache-2.0
#include "messages.h"

#include <cstring>
#include <limits>

namespace commhost::supervisor::wire {
namespace {

std::string text(std::string s) {
  if (s.size() > kMaxText) s.resize(kMaxText);
  for (char& c : s)
    if (c == '|' || c == '\n' || c == '\r') c = ' ';
  return s;
}

// Splits at '|' into exactly `n` fields (encode blanks '|' and line ends in text fields).
bool splitFields(const std::string& line, size_t n, std::vector<std::string>& out) {
  out.clear();
  size_t start = 0;
  for (size_t i = 0; i + 1 < n; ++i) {
    const size_t bar = line.find('|', start);
    if (bar == std::string::npos) return false;
    out.push_back(line.substr(start, bar - start));
    start = bar + 1;
  }
  out.push_back(line.substr(start));
  return out.back().find_first_of("|\n\r") == std::string::npos;
}

// Decimal digits only (no sign, spaces or leading zeros), at most `max`.
bool parseUnsigned(const std::string& s, uint64_t max, uint64_t& out) {
  if (s.empty() || s.size() > 20 || (s.size() > 1 && s[0] == '0')) return false;  // one spelling per number
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (v > (std::numeric_limits<uint64_t>::max() - digit) / 10) return false;
    v = v * 10 + digit;
  }
  if (v > max) return false;
  out = v;
  return true;
}

template <class T> Decoded<T> fail(const std::string& what, const std::string& input) {
  Decoded<T> d;
  std::string shown = input.substr(0, 80);
  for (char& c : shown)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  d.error = what + " in supervisor message '" + shown + (input.size() > 80 ? "...'" : "'");
  return d;
}

bool isOpName(const std::string& s) {
  if (s.empty() || s.size() > 32) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || c == '_')) return false;
  return true;
}

// "s1|TYPE|": the version and type every message starts with.
bool header(const std::string& line, const char* type, std::string& error) {
  const std::string version = std::string(kVersion) + "|";
  if (line.compare(0, version.size(), version) != 0) {
    error = "not version " + std::string(kVersion);
    return false;
  }
  const std::string tag = version + type + "|";
  if (line.compare(0, tag.size(), tag) != 0) {
    error = "not a " + std::string(type) + " message";
    return false;
  }
  return true;
}

}  // namespace

std::string encode(const Incident& m) {
  return std::string(kVersion) + "|incident|" + std::to_string(m.rank) + "|" + std::to_string(m.number) + "|" +
         std::to_string(m.raisedAtMs) + "|" + text(m.what) + "\n";
}

std::string encode(const PeerLost& m) {
  return std::string(kVersion) + "|peer|" + std::to_string(m.rank) + "|" + std::to_string(m.peer) + "|" + text(m.why) +
         "\n";
}

std::string encodeAck(int rank) { return std::string(kVersion) + "|ack|" + std::to_string(rank) + "\n"; }

std::string encode(const Progress& m) {
  return std::string(kVersion) + "|progress|" + std::to_string(m.issued) + "|" + text(m.issuedOp) + "|" +
         std::to_string(m.completed);
}

Decoded<LogLine> decodeLogLine(const std::string& line) {
  std::vector<std::string> f;
  std::string error;
  uint64_t a = 0, b = 0, c = 0;
  if (header(line, "incident", error)) {
    if (!splitFields(line, 6, f)) return fail<LogLine>("an incident has 6 fields", line);
    if (!parseUnsigned(f[2], kMaxRank, a)) return fail<LogLine>("bad rank", line);
    if (!parseUnsigned(f[3], std::numeric_limits<int64_t>::max(), b) || b == 0)
      return fail<LogLine>("bad incident number", line);
    if (!parseUnsigned(f[4], std::numeric_limits<int64_t>::max(), c)) return fail<LogLine>("bad time", line);
    if (f[5].size() > kMaxText) return fail<LogLine>("text too long", line);
    Decoded<LogLine> d;
    d.value.kind = LogLine::Kind::Incident;
    d.value.incident = {static_cast<int>(a), static_cast<int64_t>(b), static_cast<int64_t>(c), f[5]};
    return d;
  }
  if (error.rfind("not version", 0) == 0) return fail<LogLine>(error, line);
  if (header(line, "peer", error)) {
    if (!splitFields(line, 5, f)) return fail<LogLine>("a peer-lost line has 5 fields", line);
    if (!parseUnsigned(f[2], kMaxRank, a)) return fail<LogLine>("bad rank", line);
    if (!parseUnsigned(f[3], kMaxRank, b)) return fail<LogLine>("bad peer", line);
    if (f[4].size() > kMaxText) return fail<LogLine>("text too long", line);
    Decoded<LogLine> d;
    d.value.kind = LogLine::Kind::PeerLost;
    d.value.peerLost = {static_cast<int>(a), static_cast<int>(b), f[4]};
    return d;
  }
  return fail<LogLine>("unknown message type", line);
}

Decoded<int> decodeAck(const std::string& line) {
  std::string error;
  if (!header(line, "ack", error)) return fail<int>(error, line);
  std::vector<std::string> f;
  uint64_t rank = 0;
  if (!splitFields(line, 3, f) || !parseUnsigned(f[2], kMaxRank, rank)) return fail<int>("bad rank", line);
  Decoded<int> d;
  d.value = static_cast<int>(rank);
  return d;
}

Decoded<Progress> decodeProgress(const std::string& value) {
  std::string error;
  if (!header(value, "progress", error)) return fail<Progress>(error, value);
  std::vector<std::string> f;
  if (!splitFields(value, 5, f)) return fail<Progress>("progress has 5 fields", value);
  Decoded<Progress> d;
  if (!parseUnsigned(f[2], std::numeric_limits<uint64_t>::max(), d.value.issued) ||
      !parseUnsigned(f[4], std::numeric_limits<uint64_t>::max(), d.value.completed))
    return fail<Progress>("bad seq", value);
  if (!isOpName(f[3]) || (d.value.issued == 0) != (f[3] == "none")) return fail<Progress>("bad op", value);
  d.value.issuedOp = f[3];
  return d;
}

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    out.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

}  // namespace commhost::supervisor::wire
