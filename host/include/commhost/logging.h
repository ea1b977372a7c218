// SPDX-License-Identifier: Apache-2.0
// Logger: a named logger (one per plugin, one for the host) whose lines carry the group
// and rank. Thread-safe. The level comes from the config's logging.level.
#pragma once

#include <memory>
#include <string>

#include "commhost/export.h"

namespace spdlog {
class logger;
}

namespace commhost {

enum class LogLevel { Trace, Debug, Info, Warn, Error, Off };
COMMHOST_API LogLevel parseLogLevel(const std::string& name);

class COMMHOST_API Logger {
 public:
  // name: "commhost" or "commhost.<plugin>"; context: e.g. "group main rank 1".
  Logger(const std::string& name, const std::string& context);
  void debug(const std::string& message) const;
  void info(const std::string& message) const;
  void warn(const std::string& message) const;
  void error(const std::string& message) const;
  bool enabled(LogLevel level) const;
  const std::string& context() const { return context_; }

  // Applies to every commhost logger created before and after the call.
  static void setLevel(LogLevel level);
  static void flushAll();  // before the process ends abruptly

 private:
  std::shared_ptr<spdlog::logger> logger_;
  std::string context_;
};

}  // namespace commhost
