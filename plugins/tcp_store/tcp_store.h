// Creating a tcp store from its options: decides whether this process hosts the server
// (serve: auto|always|never), starts it, and connects a client to it.
#pragma once

#include "commhost/plugin.h"

namespace commhost::tcpstore {

// A function, not a global: the descriptor in another file copies it during static init.
const std::vector<OptionSpec>& optionSpecs();
std::shared_ptr<Store> create(const OptionValues& options, const StoreContext& ctx);

}  // namespace commhost::tcpstore
