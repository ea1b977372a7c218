// SPDX-License-Identifier: Apache-2.0
// commhost trace analyze DIR | export DIR --chrome OUT | dump --master HOST:PORT
#include <unistd.h>

#include <fstream>
#include <iostream>

#include "../commands.h"
#include "../job_store.h"
#include "commhost/config.h"
#include "commhost/errors.h"
#include "commhost/registry.h"
#include "commhost/supervisor.h"
#include "dumps.h"

namespace commhost::cli {
namespace {

struct TraceArgs {
  std::string dir;
  std::string chromeOut;
  JobStoreArgs job;
};

int requestDump(const TraceArgs& a) {
  const auto store = connectMaster(a.job, std::chrono::seconds(10), "commhost trace dump");
  // The ranks log "(commhost trace dump: REASON)": the reason says who asked.
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  requestTraceDump(*store, std::string("asked from ") + host + " pid " + std::to_string(::getpid()));
  std::cout << "asked every rank of the job at " << a.job.master
            << " to dump its flight recorder (to its supervisor.flight_recorder.dump_dir)\n";
  return 0;
}

}  // namespace

void addTraceCommand(CLI::App& app) {
  auto* trace = app.add_subcommand("trace", "Flight recorder dumps: request, analyze, export");
  trace->require_subcommand(1);
  trace->footer(
      "Examples:\n"
      "  commhost trace dump --master 127.0.0.1:29500       (the address commhost run printed)\n"
      "  commhost trace analyze /tmp/commhost-traces-$(id -u)");
  static TraceArgs a;
  auto* analyze = trace->add_subcommand("analyze",
                                        "Merge the ranks' dumps and name the first collective where they "
                                        "diverge");
  analyze->add_option("DIR", a.dir, "The dump directory (supervisor.flight_recorder.dump_dir)")->required();
  analyze->footer(
      "Examples:\n"
      "  commhost trace analyze /tmp/commhost-traces-$(id -u)   the default dump_dir when TMPDIR is unset");
  analyze->callback([] { std::cout << trace::analyze(trace::loadDumps(a.dir)); });

  auto* exportCmd = trace->add_subcommand("export", "Write the dumps as a timeline for Perfetto / chrome://tracing");
  exportCmd->add_option("DIR", a.dir, "The dump directory")->required();
  exportCmd->footer(
      "Examples:\n"
      "  commhost trace export /tmp/commhost-traces-$(id -u) --chrome trace.json   then open it in ui.perfetto.dev");
  exportCmd->add_option("--chrome", a.chromeOut, "Output file (Chrome Trace Event JSON)")->required();
  exportCmd->callback([] {
    const std::string text = trace::chromeTrace(trace::loadDumps(a.dir));
    std::ofstream out(a.chromeOut);
    out << text << "\n";
    if (!out) throw InvalidArgument("trace export: cannot write " + a.chromeOut);
    std::cout << "wrote " << a.chromeOut << " (open it in https://ui.perfetto.dev or chrome://tracing)\n";
  });

  auto* dump = trace->add_subcommand("dump", "Ask every rank of a running job to dump its flight recorder now");
  addJobStoreOptions(dump, a.job, /*masterRequired=*/true);
  dump->footer(
      "Examples:\n"
      "  commhost trace dump --master 127.0.0.1:29500   the address `commhost run` printed as \"store at\"\n"
      "A single process can also be asked with `kill -USR1 PID`.");
  dump->callback([] {
    const int rc = requestDump(a);
    if (rc) throw CLI::RuntimeError(rc);
  });
}

}  // namespace commhost::cli
