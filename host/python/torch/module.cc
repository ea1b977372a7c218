// SPDX-License-Identifier: Apache-2.0
// commhost._torch: the c10d::Store adapter, group creation and the Python bindings that
// commhost/torch.py registers as torch.distributed backend "commhost".
#include <torch/csrc/utils/pybind.h>

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <thread>
#include <utility>

#include "backend.h"
#include "commhost/config.h"
#include "commhost/errors.h"
#include "commhost/logging.h"
#include "commhost/registry.h"

namespace commhost_torch {
namespace {

// c10d's store errors are c10::Errors (DistStoreError for timeouts); commhost callers
// catch commhost::Error, so every call translates, naming the key.
template <class F> auto translate(const char* what, const std::string& key, F&& call) -> decltype(call()) {
  try {
    return call();
  } catch (const commhost::Error&) {
    throw;
  } catch (const c10::Error& e) {
    const std::string text = e.what_without_backtrace();
    const std::string message = std::string("torch store ") + what + " of key '" + key + "' failed: " + text;
    if (text.find("imeout") != std::string::npos || text.find("timed out") != std::string::npos)
      throw commhost::TimeoutError(message +
                                   ". A rank did not reach this point in time; check the other ranks' "
                                   "logs, or raise the timeout passed to init_process_group");
    throw commhost::StoreError(message + ". Check that the torch store (MASTER_ADDR:MASTER_PORT) is still up");
  } catch (const std::exception& e) {
    throw commhost::StoreError(std::string("torch store ") + what + " of key '" + key + "' failed: " + e.what());
  }
}

std::string firstKey(const std::vector<std::string>& keys) { return keys.empty() ? std::string() : keys[0]; }

}  // namespace

C10dStore::C10dStore(c10::intrusive_ptr<c10d::Store> store)
    : commhost::StoreBase(store->getTimeout()), store_(std::move(store)) {}

void C10dStore::set(const std::string& key, const commhost::Bytes& value) {
  translate("set", key, [&] { store_->set(key, value); });
}

commhost::Bytes C10dStore::get(const std::string& key) {
  return translate("get", key, [&] { return store_->get(key); });
}

int64_t C10dStore::add(const std::string& key, int64_t delta) {
  return translate("add", key, [&] { return store_->add(key, delta); });
}

commhost::Bytes C10dStore::compareSet(const std::string& key, const commhost::Bytes& expected,
                                      const commhost::Bytes& desired) {
  return translate("compare_set", key, [&] { return store_->compareSet(key, expected, desired); });
}

// torch 1.13's TCPStore cannot take back a wait that timed out: the server's answer, sent
// once the keys exist, is read by the client's next call (a wait then fails with
// "Stop_waiting response is expected", a get takes it for data), and the socket keeps the
// short timeout. commhost waits in slices (exchangeAll: 100 ms, then a look for a peer's
// failure), which broke 2 starts in 20. So a wait here polls check(): one request, one
// answer, nothing left pending on the server.
void C10dStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  translate("wait", firstKey(keys), [&] {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    const auto limit = std::min<std::chrono::milliseconds>(timeout, std::chrono::hours(24 * 365));
    auto pause = std::chrono::milliseconds(1);
    while (!store_->check(keys)) {
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
      if (waited >= limit)
        throw commhost::TimeoutError("torch store wait of key '" + firstKey(keys) + "'" +
                                     (keys.size() > 1 ? " (and " + std::to_string(keys.size() - 1) + " more)" : "") +
                                     " timed out after " + std::to_string(limit.count()) +
                                     " ms. A rank did not reach this point in time; check the other ranks' logs, or "
                                     "raise the timeout passed to init_process_group");
      std::this_thread::sleep_for(std::min(pause, limit - waited));
      // At most 50 ms: a rendezvous waits that much longer at worst, and a thousand
      // waiting ranks send torch's one-threaded store 20k checks a second, not 50k.
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
  });
}

bool C10dStore::check(const std::vector<std::string>& keys) {
  return translate("check", firstKey(keys), [&] { return store_->check(keys); });
}

bool C10dStore::deleteKey(const std::string& key) {
  return translate("delete", key, [&] { return store_->deleteKey(key); });
}

int64_t C10dStore::numKeys() {
  return translate("num_keys", "", [&] { return store_->getNumKeys(); });
}

void C10dStore::append(const std::string& key, const commhost::Bytes& value) {
  translate("append", key, [&] {
    // compareSet returns the value stored after the call: ours when it matched.
    for (;;) {
      if (!store_->check({key})) {
        if (store_->compareSet(key, {}, value) == value) return;
        continue;  // another rank created it first
      }
      commhost::Bytes current = store_->get(key);
      commhost::Bytes desired = current;
      desired.insert(desired.end(), value.begin(), value.end());
      if (store_->compareSet(key, current, desired) == desired) return;
    }
  });
}

// torch hands each group its store under prefixes ("default_pg/0/...", a device's):
// the status records go below them all, at the keys `commhost status --store torch_tcp`
// reads on torch's TCPStore.
c10::intrusive_ptr<c10d::Store> rootStore(c10::intrusive_ptr<c10d::Store> store) {
  while (auto* prefixed = dynamic_cast<c10d::PrefixStore*>(store.get())) store = prefixed->getUnderlyingStore();
  return store;
}

// The launcher's ranks on this host (torchrun's LOCAL_WORLD_SIZE), for a tuner; 0 (unknown)
// when the script was started without a launcher that says.
int localWorldSize() {
  try {
    return commhost::detectLaunch().localWorldSize;
  } catch (const std::exception&) {
    return 0;
  }
}

c10::intrusive_ptr<TorchBackend> createGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                             const std::string& configPath, const std::vector<std::string>& overrides,
                                             const std::string& subgroupSuffix) {
  try {
    commhost::ConfigOverrides ov;
    ov.set = overrides;
    // A registry per group: loading a config scans into it, and a group's registry must
    // not change under its backends (see registry.h).
    auto registry = std::make_shared<commhost::PluginRegistry>();
    auto config = std::make_shared<commhost::Config>(commhost::loadConfigOrDefault(configPath, *registry, ov));
    if (!subgroupSuffix.empty()) {
      // Subgroups get their own name ("main.torch1"), so their log lines and any
      // host-wide resources a backend names after the group stay apart from the world's.
      ov.set.push_back("group.name=" + config->groupName() + "." + subgroupSuffix);
      config = std::make_shared<commhost::Config>(commhost::loadConfigOrDefault(configPath, *registry, ov));
    }
    commhost::Logger::setLevel(commhost::parseLogLevel(config->host.getString("logging.level")));
    commhost::Logger logger("commhost.torch", "rank " + std::to_string(rank));
    for (const auto& w : config->warnings) logger.warn(w);

    commhost::ProcessGroup::Setup setup;
    setup.config = config;
    setup.registry = registry;
    setup.store = std::make_shared<C10dStore>(store);
    setup.jobStore = std::make_shared<C10dStore>(rootStore(store));
    setup.rank = rank;
    setup.worldSize = size;
    setup.localWorldSize = localWorldSize();
    setup.overrides = ov;
    return c10::make_intrusive<TorchBackend>(commhost::ProcessGroup::create(std::move(setup)));
  } catch (const c10::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw compat::error(std::string("commhost backend: creating the group of rank ") + std::to_string(rank) + " of " +
                        std::to_string(size) + " (config " + (configPath.empty() ? "<embedded default>" : configPath) +
                        ") failed: " + e.what());
  }
}

}  // namespace commhost_torch

namespace py = pybind11;
using commhost_torch::TorchBackend;

namespace {
// The Python object's holder: drops the group without the GIL, as torch's own backends do
// (IntrusivePtrNoGilDestructor in torch's c10d bindings). Destroying a group waits for its
// works in flight, whose completion may need the GIL (a tensor's Python object, a Python
// future callback); holding it here would deadlock.
template <class T> class NoGilHolder {
 public:
  NoGilHolder() = default;
  // pybind11 builds a holder from a raw pointer only for an object it just allocated.
  explicit NoGilHolder(T* p) : impl_(c10::intrusive_ptr<T>::unsafe_steal_from_new(p)) {}
  explicit NoGilHolder(c10::intrusive_ptr<T> p) : impl_(std::move(p)) {}
  NoGilHolder(const NoGilHolder&) = default;
  NoGilHolder& operator=(const NoGilHolder&) = default;
  ~NoGilHolder() {
    if (impl_ && PyGILState_Check()) {
      py::gil_scoped_release release;
      impl_.reset();
    }
  }
  T* get() const noexcept { return impl_.get(); }
  T& operator*() const noexcept { return *impl_; }
  T* operator->() const noexcept { return impl_.get(); }

 private:
  c10::intrusive_ptr<T> impl_;
};
}  // namespace
PYBIND11_DECLARE_HOLDER_TYPE(T, NoGilHolder<T>, true);

PYBIND11_MODULE(_torch, m) {
  m.doc() = "commhost torch.distributed backend (native part); `import commhost.torch` registers it";
  // Registers c10d's Python types (ProcessGroup, Store) that the bindings below derive from
  // and take.
  py::module::import("torch.distributed");

  py::class_<TorchBackend, commhost_torch::compat::BackendBase, NoGilHolder<TorchBackend>>(m, "ProcessGroupCommhost")
      .def_property_readonly("group_name", [](const TorchBackend& pg) { return pg.group()->name(); })
      .def_property_readonly("config_source", [](const TorchBackend& pg) { return pg.group()->config().source; })
      .def_property_readonly("config_yaml", [](const TorchBackend& pg) { return pg.group()->config().effectiveYaml; })
      .def_property_readonly("backends",
                             [](const TorchBackend& pg) {
                               std::vector<std::string> names;
                               for (const auto& kv : pg.group()->config().backends) names.push_back(kv.first);
                               return names;
                             })
      .def_property_readonly("seq", [](const TorchBackend& pg) { return pg.group()->seq(); });

  // For tests/python/torch/test_store_waits.py: one timed wait as commhost's groups make
  // them on torch's store (through C10dStore).
  m.def(
      "_store_wait",
      [](const c10::intrusive_ptr<c10d::Store>& store, const std::vector<std::string>& keys, int64_t timeoutMs) {
        commhost_torch::C10dStore(store).wait(keys, std::chrono::milliseconds(timeoutMs));
      },
      py::arg("store"), py::arg("keys"), py::arg("timeout_ms"), py::call_guard<py::gil_scoped_release>(),
      "Waits for keys on a torch store as commhost does; raises on timeout (tests).");
  m.def(
      "routed_devices",
      [](const std::string& configPath) {
        // What torch 2.x registers the backend for: cpu always, cuda when a route names it.
        commhost::PluginRegistry registry;
        const commhost::Config config = commhost::loadConfigOrDefault(configPath, registry, {});
        std::vector<std::string> devices{"cpu"};
        for (const auto& route : config.routes)
          if (route.device == commhost::DeviceType::CUDA) {
            devices.push_back("cuda");
            break;
          }
        return devices;
      },
      py::arg("config_path"), py::call_guard<py::gil_scoped_release>(),
      "The device types the config at config_path routes (the embedded default when empty).");
  m.def(
      "create_group",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, const std::string& configPath,
         const std::vector<std::string>& overrides, const std::string& subgroupSuffix) {
        return NoGilHolder<TorchBackend>(
            commhost_torch::createGroup(store, rank, size, configPath, overrides, subgroupSuffix));
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("config_path") = "",
      py::arg("overrides") = std::vector<std::string>{}, py::arg("subgroup_suffix") = "",
      py::call_guard<py::gil_scoped_release>(),
      "Creates the commhost group of one torch process group over torch's store (blocks on the rendezvous).");
}
