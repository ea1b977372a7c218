// SPDX-License-Identifier: Apache-2.0
#include "commhost/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>

#include "commhost/errors.h"
#include "commhost/mutex.h"

namespace commhost {
namespace {

std::atomic<LogLevel> gLevel{LogLevel::Info};

spdlog::level::level_enum toSpd(LogLevel level) {
  return static_cast<spdlog::level::level_enum>(static_cast<int>(level) + (level == LogLevel::Off ? 1 : 0));
}

// All commhost loggers share one stderr sink so lines from threads never interleave.
std::shared_ptr<spdlog::logger> loggerNamed(const std::string& name) {
  static Mutex mutex;  // makes spdlog's get-then-register one step
  static auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  MutexLock lock(&mutex);
  if (auto existing = spdlog::get(name)) return existing;
  auto logger = std::make_shared<spdlog::logger>(name, sink);
  logger->set_pattern("[%H:%M:%S.%e] [%^%l%$] [%n] %v");
  logger->set_level(toSpd(gLevel.load()));
  spdlog::register_logger(logger);
  return logger;
}

}  // namespace

LogLevel parseLogLevel(const std::string& name) {
  if (name == "trace") return LogLevel::Trace;
  if (name == "debug") return LogLevel::Debug;
  if (name == "info") return LogLevel::Info;
  if (name == "warn" || name == "warning") return LogLevel::Warn;
  if (name == "error") return LogLevel::Error;
  if (name == "off") return LogLevel::Off;
  throw InvalidArgument("unknown log level '" + name + "'; use trace, debug, info, warn, error or off");
}

Logger::Logger(const std::string& name, const std::string& context)
    : logger_(loggerNamed(name)), context_("[" + context + "] ") {}

void Logger::debug(const std::string& m) const { logger_->debug("{}{}", context_, m); }
void Logger::info(const std::string& m) const { logger_->info("{}{}", context_, m); }
void Logger::warn(const std::string& m) const { logger_->warn("{}{}", context_, m); }
void Logger::error(const std::string& m) const { logger_->error("{}{}", context_, m); }
bool Logger::enabled(LogLevel level) const { return logger_->should_log(toSpd(level)); }

void Logger::setLevel(LogLevel level) {
  gLevel.store(level);
  spdlog::apply_all([&](const std::shared_ptr<spdlog::logger>& l) { l->set_level(toSpd(level)); });
}

void Logger::flushAll() {
  spdlog::apply_all([](const std::shared_ptr<spdlog::logger>& l) { l->flush(); });
}

}  // namespace commhost
