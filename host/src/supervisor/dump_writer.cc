// SPDX-License-Identifier: Apache-2.0
#include "dump_writer.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace commhost::supervisor {

std::string DumpWriter::write(const std::function<FlightDump()>& make, const std::string& reason) {
  MutexLock lock(&mu_);
  try {
    const FlightDump dump = make();
    const std::string text = encodeFlightDump(dump);
    const int rank = dump.rank;
    std::filesystem::create_directories(dir_);
    std::string path = dir_ + "/rank" + std::to_string(rank) + ".json";
    const std::string tmp = path + ".tmp" + std::to_string(::getpid());
    {
      std::ofstream out(tmp);
      out << text << "\n";
      if (!out) throw std::runtime_error("write failed");
    }
    std::filesystem::rename(tmp, path);  // readers never see half a file
    logger_->warn("flight recorder dumped to " + path + " (" + reason + ")");
    return path;
  } catch (const std::exception& e) {
    logger_->error("could not write the flight recorder dump (" + reason + ") to " + dir_ + ": " + e.what() +
                   "; set supervisor.flight_recorder.dump_dir to a writable directory");
    return {};
  }
}

}  // namespace commhost::supervisor
