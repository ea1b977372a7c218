// SPDX-License-Identifier: Apache-2.0
// Writes flight-recorder dumps (rank<N>.json) into the dump dir, one file at a time.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "commhost/flight_dump.h"
#include "commhost/logging.h"
#include "commhost/mutex.h"

namespace commhost::supervisor {

class DumpWriter {
 public:
  DumpWriter(std::string dir, std::shared_ptr<Logger> logger) : dir_(std::move(dir)), logger_(std::move(logger)) {}
  const std::string& dir() const { return dir_; }
  // Writes what `make` returns (its rank names the file) and returns the path; on
  // failure logs why and returns "". Readers never see half a file.
  std::string write(const std::function<FlightDump()>& make, const std::string& reason) EXCLUDES(mu_);

 private:
  const std::string dir_;
  std::shared_ptr<Logger> logger_;
  Mutex mu_;  // one file write at a time: concurrent dumps of one rank share a file name
};

}  // namespace commhost::supervisor
