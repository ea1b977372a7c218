// SPDX-License-Identifier: Apache-2.0
// Device times in the flight recorder, without a GPU: the devtimed test plugin (a real
// shared object, tests/test_plugins/device_timed.cc) reports element 0 of its tensor as
// each work's device time, as a GPU backend reports its events' elapsed time. Checked
// through the returned work, the completion hooks, the dump, and `commhost trace analyze`
// and `trace export --chrome` over that dump; cpu backends' entries carry none.
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace commhost::test {
namespace {

// allreduce goes to devtimed (with `options`), everything else (barrier) to self. Dumps
// go to the test's own directory (testDumpDir()).
std::shared_ptr<ProcessGroup> group(const std::string& options) {
  auto registry = testRegistry();
  auto config = configFrom(
      "backends: { dev: { plugin: devtimed, options: { " + options +
          " } }, self: {} }\n"
          "routes: [{ device: cpu, backend: self }, { device: cpu, op: allreduce, backend: dev }]\n"
          "supervisor: { watchdog: { poll: 10ms } }\n",
      *registry);
  return ProcessGroup::create({config, registry, std::make_shared<HashStore>(), 0, 1});
}

// Collects completion events; waitFor(n) returns once n arrived (or 10 s passed).
class Events {
 public:
  explicit Events(ProcessGroup& pg) {
    pg.addCompletionHook([this](const CompletionEvent& ev) {
      std::lock_guard<std::mutex> lock(m_);
      events_.push_back(ev);
      cv_.notify_all();
    });
  }
  std::vector<CompletionEvent> waitFor(size_t n) {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return events_.size() >= n; });
    return events_;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<CompletionEvent> events_;
};

WorkPtr allreduceTimed(ProcessGroup& pg, float ms) {
  Tensor t = Tensor::empty({4}, DType::Float32);
  for (int i = 0; i < 4; ++i) t.data_as<float>()[i] = ms;
  return pg.allreduce(t);
}

nlohmann::json dumpNow() {
  std::ifstream in(dumpFlightRecorder("test"));
  return nlohmann::json::parse(in);
}

std::string run(const std::string& command) {
  std::string out;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return "popen failed";
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = ::pclose(p);
  if (status != 0) out += "\n[exit status " + std::to_string(status) + "]";
  return out;
}

TEST(DeviceTimes, ABlockingWaitRecordsTheWorksDeviceTimeAndCpuWorksHaveNone) {
  auto pg = group("delay_ms: 5");
  const std::string dir = testDumpDir();
  Events events(*pg);
  WorkPtr first = allreduceTimed(*pg, 1.5f);
  first->wait();
  EXPECT_EQ(first->deviceMs(), std::optional<double>(1.5)) << "the supervised work forwards the backend's time";
  allreduceTimed(*pg, 2.25f)->wait();
  pg->barrier()->wait();  // self: a cpu backend
  const auto seen = events.waitFor(3);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].deviceMs, std::optional<double>(1.5));
  EXPECT_EQ(seen[1].deviceMs, std::optional<double>(2.25));
  EXPECT_EQ(seen[2].op, OpType::Barrier);
  EXPECT_FALSE(seen[2].deviceMs.has_value());

  const auto dump = dumpNow();
  const auto& entries = dump["entries"];
  ASSERT_EQ(entries.size(), 3u) << dump.dump(2);
  EXPECT_EQ(entries[0]["backend"], "dev");
  EXPECT_EQ(entries[0]["state"], "completed");
  EXPECT_EQ(entries[0]["device_ms"], 1.5);
  EXPECT_EQ(entries[1]["device_ms"], 2.25);
  EXPECT_EQ(entries[2]["backend"], "self");
  EXPECT_FALSE(entries[2].contains("device_ms")) << entries[2].dump();

  // The CLI reads the same dump: analyze sums device times per op and backend, the
  // Chrome trace carries each slice's.
  const std::string analyzed = run(std::string(COMMHOST_CLI) + " trace analyze " + dir);
  EXPECT_NE(analyzed.find("Device times (device_ms"), std::string::npos) << analyzed;
  EXPECT_NE(analyzed.find("group main, allreduce on dev: 2 timed, median 1.500 ms, max 2.250 ms (rank 0 seq 2)"),
            std::string::npos)
      << analyzed;
  EXPECT_EQ(analyzed.find("barrier on self"), std::string::npos) << "a cpu op has no device time: " << analyzed;
  const std::string chrome = dir + "-chrome.json";  // not in the dump dir, which analyze reads
  const std::string exported = run(std::string(COMMHOST_CLI) + " trace export " + dir + " --chrome " + chrome);
  std::ifstream in(chrome);
  ASSERT_TRUE(in) << exported;
  const auto trace = nlohmann::json::parse(in);
  int withDeviceMs = 0;
  for (const auto& ev : trace["traceEvents"])
    if (ev["ph"] == "X" && ev["args"].contains("device_ms")) {
      ++withDeviceMs;
      EXPECT_EQ(ev["name"].get<std::string>().rfind("allreduce", 0), 0u) << ev.dump();
    }
  EXPECT_EQ(withDeviceMs, 2) << trace.dump();
}

// A stream-ordered wait (nccl's default) returns before the op ended: the entry stays
// "started" until the op ends, then the watchdog records its real end and device time.
TEST(DeviceTimes, AStreamOrderedWaitIsRecordedWhenTheOpEndsNotWhenWaitReturns) {
  auto pg = group("stream_wait: true, delay_ms: 1000");
  Events events(*pg);
  WorkPtr work = allreduceTimed(*pg, 3.0f);
  work->wait();
  ASSERT_FALSE(work->isCompleted()) << "the op ends 1 s after the call";
  EXPECT_FALSE(work->deviceMs().has_value()) << "not known before the op ended";
  {
    const auto entry = dumpNow()["entries"][0];
    EXPECT_EQ(entry["state"], "started") << entry.dump();
    EXPECT_FALSE(entry.contains("device_ms")) << entry.dump();
  }
  const auto seen = events.waitFor(1);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].deviceMs, std::optional<double>(3.0));
  EXPECT_GE(seen[0].duration, std::chrono::milliseconds(900)) << "the op's end, not wait()'s return";
  const auto entry = dumpNow()["entries"][0];
  EXPECT_EQ(entry["state"], "completed");
  EXPECT_EQ(entry["device_ms"], 3.0);
  EXPECT_GE(entry["ended_us"].get<int64_t>() - entry["scheduled_us"].get<int64_t>(), 900000) << entry.dump();
}

TEST(DeviceTimes, AFailedWorkHasNoDeviceTime) {
  auto pg = group("delay_ms: 1");
  Events events(*pg);
  WorkPtr work = allreduceTimed(*pg, -1.0f);  // devtimed fails ops whose element 0 is negative
  EXPECT_THROW_WITH(work->wait(), BackendError, "element 0 is negative");
  EXPECT_FALSE(work->deviceMs().has_value());
  const auto seen = events.waitFor(1);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_FALSE(seen[0].error.empty());
  EXPECT_FALSE(seen[0].deviceMs.has_value());
  const auto entry = dumpNow()["entries"][0];
  EXPECT_EQ(entry["state"], "failed");
  EXPECT_FALSE(entry.contains("device_ms")) << entry.dump();
}

}  // namespace
}  // namespace commhost::test
