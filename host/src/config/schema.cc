// SPDX-License-Identifier: Apache-2.0
// The host's own config keys, each declared once. Plugin options are declared by the
// plugins; the backends/routes/hooks/store tables are checked by the loader.
#include "commhost/config.h"

namespace commhost {

// One table, one entry per key, in the order `commhost config keys` lists them: longer than
// 80 lines because it is data, not steps; splitting it by section would scatter the keys'
// single declaration that the loader, the docs and the CLI all read.
const std::vector<OptionSpec>& configSchema() {
  static const std::vector<OptionSpec> kSchema = {
      {"group.name", OptionType::String, "main", "Name of the world group; prefixes its store keys and log lines"},
      {"group.timeout",
       OptionType::Duration,
       "30s",
       "Default deadline of each collective (per-op options may override)",
       {},
       0.001,
       86400 * 7},
      {"group.join", OptionType::Bool, "false",
       "This process joins a running job instead of starting it: init() asks the world group's members, which "
       "admit it at their next syncPoint() (they need group.sync_poll > 0) and broadcast nothing else; the workload "
       "takes its state from a member. `commhost run --max-restarts` sets it for a restarted rank. Left out of the "
       "config hash"},
      {"group.sync_poll",
       OptionType::Duration,
       "0s",
       "How often each rank reads the store for a config published to the world group (commhost run --watch "
       "sets it); ProcessGroup::syncPoint() applies it at the same step on every rank. 0s: off (no thread)",
       {},
       0,
       3600},
      {"logging.level",
       OptionType::Enum,
       "info",
       "Log level of every commhost logger",
       {"trace", "debug", "info", "warn", "error", "off"}},
      {"supervisor.enabled", OptionType::Bool, "true", "Track every collective: watchdog, heartbeat, flight recorder"},
      {"supervisor.on_error",
       OptionType::Enum,
       "abort",
       "What a timeout or lost peer does: abort (fail every work "
       "of the group), teardown (dump, then exit the process with status 86), report (fail that work only)",
       {"abort", "teardown", "report"}},
      {"supervisor.on_peer_loss",
       OptionType::Enum,
       "abort",
       "What a lost peer does: abort (as supervisor.on_error says), or shrink (fail the group's works with "
       "PeerLostError and abort its backends, but never end the process, so the survivors can call "
       "ProcessGroup::shrink() and go on without it; `commhost run` keeps them running)",
       {"abort", "shrink"}},
      {"supervisor.on_sigterm",
       OptionType::Enum,
       "report",
       "report: a SIGTERM (a launcher ending the job after another rank failed: srun --kill-on-bad-exit, "
       "torchrun, mpirun, commhost run) makes the watchdog log what each group was doing and which peers were "
       "lost, dump the flight recorder, then end the process as SIGTERM does; a second SIGTERM ends it at once. "
       "Only when SIGTERM has its default action (an application's own handler is left alone). off: not "
       "handled",
       {"report", "off"}},
      {"supervisor.min_ranks",
       OptionType::Int,
       "1",
       "ProcessGroup::shrink() refuses, on every survivor, to go on with fewer ranks than this: the job ends "
       "with an error naming the ranks lost",
       {},
       1,
       1 << 20},
      {"supervisor.watchdog.poll",
       OptionType::Duration,
       "100ms",
       "How often the watchdog checks works in flight",
       {},
       0.001,
       60},
      {"supervisor.heartbeat.interval",
       OptionType::Duration,
       "1s",
       "How often each rank publishes its heartbeat "
       "and progress to the store",
       {},
       0.01,
       3600},
      {"supervisor.heartbeat.timeout",
       OptionType::Duration,
       "10s",
       "A peer whose heartbeat is older than this is "
       "lost: works in flight fail with \"peer N lost\"",
       {},
       0.05,
       86400},
      {"supervisor.flight_recorder.entries",
       OptionType::Int,
       "2048",
       "Collectives kept per process for dumps "
       "(416 bytes each for the shared ring, allocated up front, and 64 bytes each per issuing thread that has an "
       "op complete inline); 0: none (the watchdog and heartbeat still run, dumps list no ops and the op "
       "statistics are empty: ~10 ns less per op)",
       {},
       0,
       1 << 20},
      {"supervisor.flight_recorder.time_every",
       OptionType::Enum,
       "64",
       "Of the ops under 64 KiB, only every Nth (by seq: the same ops on every rank), and a group's first op "
       "since the heartbeat thread's last tick (so ops issued a few times a second are all timed), read the "
       "clock at issue and at return (two reads, 20-50 ns on a VM) for their flight-recorder times and the "
       "latency statistics (at 64, a loop of 8 B ops still times thousands a second); an "
       "untimed op that a backend completes inline reads no clock (its record carries its thread's last timed op's "
       "time or the heartbeat thread's last clock reading, whichever is later, normally under 100 ms old; the "
       "coarse clock's for a thread without a flight-recorder lane) and is counted "
       "without a latency, one that completes later is timed from the call's return (its latency then leaves "
       "out the call itself). 1: time every op. Larger ops are always timed. Completion hooks time every op",
       {"1", "2", "4", "8", "16", "32", "64", "128", "256", "512", "1024"}},
      {"supervisor.flight_recorder.dump_dir", OptionType::String, "",
       "Where rank<N>.json dumps are written "
       "on timeout, error, SIGUSR1 or `commhost trace dump`; empty (the default): $TMPDIR/commhost-traces-<uid>, "
       "/tmp/commhost-traces-<uid> when TMPDIR is unset (never the working directory)"},
      {"tune.live_every",
       OptionType::Int,
       "50",
       "Routes with tune: live: every this many syncPoint() calls, the ranks pool what their live candidates "
       "measured (one store exchange) and switch size classes alike; while no class is still gathering its window, "
       "each round that changes nothing doubles the wait (up to 64x)",
       {},
       1,
       1e6},
      {"tune.live_window",
       OptionType::Int,
       "16",
       "Routes with tune: live: the sampled calls of one size class a candidate needs, on every rank, before it may "
       "take the class over (twice as many after each switch of that class, so routes do not flap)",
       {},
       2,
       1 << 16},
      {"tune.live_margin",
       OptionType::Double,
       "0.1",
       "Routes with tune: live: how much faster a candidate must be (its median time on the rank that waited least, "
       "below "
       "(1 - margin) x the routed backend's) to take a size class over",
       {},
       0,
       0.9},
      {"debug.check_collectives", OptionType::Bool, "false",
       "Before each collective, ranks compare op, dtype, "
       "shapes, root and reduce op through the store; a mismatch fails with a diff; a call made while another "
       "thread's call on the group is in progress is refused (slow: debugging only)"},
      {"plugin_path", OptionType::StringList, "",
       "Directories searched for plugins before COMMHOST_PLUGIN_PATH "
       "and the installed plugin directory"},
  };
  return kSchema;
}

}  // namespace commhost
