// The host's own config keys, each declared once. Plugin options are declared by the
// plugins; the backends/routes/hooks/store tables are checked by the loader.
#include "commhost/config.h"

namespace commhost {

const std::vector<OptionSpec>& configSchema() {
  static const std::vector<OptionSpec> kSchema = {
      {"group.name", OptionType::String, "main", "Name of the world group; prefixes its store keys and log lines"},
      {"group.timeout", OptionType::Duration, "30s", "Default deadline of each collective (per-op options may override)",
       {}, 0.001, 86400 * 7},
      {"logging.level", OptionType::Enum, "info", "Log level of every commhost logger",
       {"trace", "debug", "info", "warn", "error", "off"}},
      {"plugin_path", OptionType::StringList, "", "Directories searched for plugins before COMMHOST_PLUGIN_PATH "
       "and the installed plugin directory"},
  };
  return kSchema;
}

}  // namespace commhost
