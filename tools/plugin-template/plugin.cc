// SPDX-License-Identifier: Apache-2.0
// Declares the `template` backend plugin: what commhost reads before it calls any code.
//
// A plugin exports exactly one PluginDescriptor with COMMHOST_PLUGIN(), in exactly one
// source file. The loader checks the ABI version, then reads the descriptor: the name
// configs refer to, the declared options (validated by the host, with file:line:col and
// "did you mean" hints, before the factory runs) and the capabilities (the config's
// routes are resolved against them when it loads: what the plugin does not list goes to
// another backend, and a route that names something it lacks is refused).
#include "template_backend.h"

namespace {

const commhost::PluginDescriptor kDescriptor = {
    COMMHOST_DESCRIPTOR_PREFIX,     // size, magic, ABI version: the layout this plugin was built with
    commhost::PluginKind::Backend,  // kind: Backend, Store or CommHook
    "template",                     // name: `plugin: template` in a config
    "0.1.0",                        // this plugin's own version, free form
    "A starting point for backend plugins: allreduce and broadcast on cpu f32/f64 over the store",
    // options: every key a user may set under `backends.<name>.options`, from the
    // schema of templ::Options (template_backend.h). Unknown keys and wrong types never
    // reach the factory.
    commhost::typedOptionSpecs<commhost::templ::Options>(),
    commhost::templ::kCapabilities,  // capabilities: see template_backend.h
    nullptr,                         // probe: return "" if usable here, else why not
    // createBackend: the factory for kind Backend; the adapter turns the validated
    // values into templ::Options once and calls templ::create with it.
    commhost::typedBackendFactory<commhost::templ::Options, &commhost::templ::create>,
};

}  // namespace

COMMHOST_PLUGIN(kDescriptor)
