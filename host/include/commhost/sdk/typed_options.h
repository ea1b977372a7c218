// SPDX-License-Identifier: Apache-2.0
// Typed plugin options: declare an options struct once, receive it filled and validated.
//
// A plugin's options are a plain struct with one member per key, a static schema() that
// binds each key to its member (the option's type follows from the member's type; the
// schema adds the default, the description and the range or choices) and, optionally,
// a validate() for rules that span several keys. The descriptor takes the schema's
// OptionSpecs and a factory adapter in place of a hand-written factory, so plugin code
// never looks an option up by its string key (the model is Envoy's FactoryBase<Config>):
//
//   struct MyOptions {
//     int threads = 1;
//     int64_t chunk = 0;
//     std::chrono::milliseconds timeout{0};
//     static OptionSchema<MyOptions> schema() {
//       return OptionSchema<MyOptions>()
//           .option("threads", &MyOptions::threads, "1", "worker threads", {1, 64})
//           .size("chunk", &MyOptions::chunk, "64KiB", "pipeline buffer", {4096, 1 << 30})
//           .option("timeout", &MyOptions::timeout, "30s", "rendezvous timeout");
//     }
//     void validate() const {   // optional; or validate(const BackendContext&) const
//       if (chunk % (threads * 64)) refuseOption("chunk", "must be a multiple of 64 B x threads");
//     }
//   };
//   std::unique_ptr<Backend> create(const MyOptions& options, const BackendContext& ctx);
//
//   PluginDescriptor d = {COMMHOST_DESCRIPTOR_PREFIX, PluginKind::Backend, "mine", "1.0", "...",
//                         typedOptionSpecs<MyOptions>(), caps, nullptr, typedBackendFactory<MyOptions, &create>};
//
// The host has already checked the YAML against the specs (types, ranges, choices, with
// file:line:col) before the factory runs; the adapter converts the values into the struct
// once, checks them again (a value set by a program, not a config, gets the same
// checks), fills a default for a key the caller left out, then calls validate(). Every
// refusal is a ConfigError that names the key ("option 'chunk': ..."); the host adds the
// group, rank, plugin and where in the config the options are. validate() runs when the
// plugin's object is created (group or store creation), not during `config check`; a
// checkHere() (see typedOptionCheck) runs there too.
//
// Member types: bool (Bool), any integer (Int; or Size with size()), double (Double),
// std::string (String; or Enum with choice()), std::chrono::milliseconds (Duration),
// std::vector<std::string> (StringList), and any enum type through choice() with a
// name for each value. Everything here is header-only and instantiated in the plugin.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "commhost/errors.h"
#include "commhost/sdk/option_schema.h"
#include "commhost/sdk/plugin.h"

namespace commhost {

// Bounds of a numeric option in its unit (bytes for sizes, seconds for durations);
// none when min >= max.
struct OptionRange {
  double min = 0;
  double max = 0;
};

// Refuses an option: throws ConfigError "option 'KEY': WHAT. HINT". For validate().
[[noreturn]] inline void refuseOption(const std::string& key, const std::string& what, const std::string& hint = "") {
  throw ConfigError("option '" + key + "': " + what + (hint.empty() ? "" : ". " + hint));
}

namespace typed_options_detail {

inline const char* heldTypeName(const OptionValue& v) {
  static const char* const kNames[] = {"bool", "integer", "number", "string", "duration", "list of strings"};
  return kNames[v.index()];
}

// The default text of `spec` as a value, for a key the caller's OptionValues lacks.
inline OptionValue defaultValue(const OptionSpec& spec) {
  const std::string text = spec.defaultValue ? spec.defaultValue : "";
  try {
    switch (spec.type) {
      case OptionType::Bool: return text == "true" || text == "yes" || text == "on";
      case OptionType::Int: return static_cast<int64_t>(std::stoll(text));
      case OptionType::Double: return std::stod(text);
      case OptionType::Size: return parseSize(text);
      case OptionType::Duration: return parseDuration(text);
      case OptionType::String:
      case OptionType::Enum: return text;
      case OptionType::StringList: return text.empty() ? std::vector<std::string>{} : std::vector<std::string>{text};
    }
  } catch (const std::exception& e) {
    refuseOption(spec.key,
                 "the plugin's default '" + text + "' is not a valid " + optionTypeName(spec.type) + ": " + e.what(),
                 "report it to the plugin's author");
  }
  refuseOption(spec.key, "unknown option type");
}

template <class T> const T& held(const OptionSpec& spec, const OptionValue& value, const char* expected) {
  if (const T* v = std::get_if<T>(&value)) return *v;
  refuseOption(spec.key, std::string("expected type ") + expected + ", got " + heldTypeName(value));
}

inline void checkRange(const OptionSpec& spec, double v, const std::string& shown) {
  if (spec.minValue < spec.maxValue && (v < spec.minValue || v > spec.maxValue)) {
    auto bound = [&](double b) {
      switch (spec.type) {
        case OptionType::Duration: return formatDuration(std::chrono::milliseconds(std::llround(b * 1000)));
        case OptionType::Size: return formatSize(static_cast<int64_t>(b));
        case OptionType::Double: return std::to_string(b);
        default: return std::to_string(static_cast<int64_t>(b));
      }
    };
    refuseOption(spec.key,
                 "'" + shown + "' is out of range; allowed: " + bound(spec.minValue) + " to " + bound(spec.maxValue));
  }
}

template <class M> M integer(const OptionSpec& spec, const OptionValue& value) {
  const int64_t v = held<int64_t>(spec, value, optionTypeName(spec.type));
  checkRange(spec, static_cast<double>(v), spec.type == OptionType::Size ? formatSize(v) : std::to_string(v));
  // The member may be narrower or unsigned: a value it cannot hold is refused, never wrapped.
  const bool fits = std::is_signed<M>::value
                        ? v >= static_cast<int64_t>(std::numeric_limits<M>::min()) &&
                              (sizeof(M) >= sizeof(int64_t) || v <= static_cast<int64_t>(std::numeric_limits<M>::max()))
                        : v >= 0 && (sizeof(M) >= sizeof(int64_t) ||
                                     static_cast<uint64_t>(v) <= static_cast<uint64_t>(std::numeric_limits<M>::max()));
  if (!fits)
    refuseOption(spec.key, std::to_string(v) + " does not fit the plugin's " + std::to_string(8 * sizeof(M)) + "-bit " +
                               (std::is_signed<M>::value ? "signed" : "unsigned") + " field");
  return static_cast<M>(v);
}

template <class, class = void> struct HasValidate : std::false_type {};
template <class O>
struct HasValidate<O, std::void_t<decltype(std::declval<const O&>().validate())>> : std::true_type {};
template <class, class, class = void> struct HasValidateWith : std::false_type {};
template <class O, class C>
struct HasValidateWith<O, C, std::void_t<decltype(std::declval<const O&>().validate(std::declval<const C&>()))>>
    : std::true_type {};

}  // namespace typed_options_detail

// The options of one plugin: each key bound to a member of Options.
template <class Options> class OptionSchema {
 public:
  // bool, integer, double, std::string, milliseconds or list-of-strings member; the
  // option type follows from the member's type. `range` applies to numbers and durations.
  template <class M>
  OptionSchema& option(const char* key, M Options::*member, const char* defaultValue, const char* description,
                       OptionRange range = {}) {
    namespace d = typed_options_detail;
    OptionSpec spec{key, typeOf<M>(), defaultValue, description, {}, range.min, range.max};
    return add(std::move(spec), [member](Options& o, const OptionSpec& s, const OptionValue& v) {
      if constexpr (std::is_same_v<M, bool>) {
        o.*member = d::held<bool>(s, v, "bool");
      } else if constexpr (std::is_integral_v<M>) {
        o.*member = d::integer<M>(s, v);
      } else if constexpr (std::is_same_v<M, double>) {
        const double x = d::held<double>(s, v, "number");
        d::checkRange(s, x, std::to_string(x));
        o.*member = x;
      } else if constexpr (std::is_same_v<M, std::string>) {
        o.*member = d::held<std::string>(s, v, "string");
      } else if constexpr (std::is_same_v<M, std::chrono::milliseconds>) {
        const auto x = d::held<std::chrono::milliseconds>(s, v, "duration");
        d::checkRange(s, static_cast<double>(x.count()) / 1000.0, formatDuration(x));
        o.*member = x;
      } else {
        o.*member = d::held<std::vector<std::string>>(s, v, "list of strings");
      }
    });
  }

  // A byte count ("64MiB", "4096") into an integer member; `range` in bytes.
  template <class M>
  OptionSchema& size(const char* key, M Options::*member, const char* defaultValue, const char* description,
                     OptionRange range = {}) {
    static_assert(std::is_integral_v<M> && !std::is_same_v<M, bool>, "a size option needs an integer member");
    OptionSpec spec{key, OptionType::Size, defaultValue, description, {}, range.min, range.max};
    return add(std::move(spec), [member](Options& o, const OptionSpec& s, const OptionValue& v) {
      o.*member = typed_options_detail::integer<M>(s, v);
    });
  }

  // One of `choices`, kept as its name.
  OptionSchema& choice(const char* key, std::string Options::*member, const char* defaultValue, const char* description,
                       const std::vector<std::string>& choices) {
    OptionSpec spec{key, OptionType::Enum, defaultValue, description, choices};
    return add(std::move(spec), [member, choices](Options& o, const OptionSpec& s, const OptionValue& v) {
      const auto& name = typed_options_detail::held<std::string>(s, v, "choice");
      for (const auto& c : choices)
        if (c == name) {
          o.*member = name;
          return;
        }
      refuseOption(s.key, "'" + name + "' is not one of " + list(choices));
    });
  }

  // One of the names in `choices`, stored as the value paired with it (e.g. an enum).
  template <class E, std::enable_if_t<!std::is_same_v<E, std::string>, int> = 0>
  OptionSchema& choice(const char* key, E Options::*member, const char* defaultValue, const char* description,
                       std::vector<std::pair<std::string, E>> choices) {
    std::vector<std::string> names;
    for (const auto& c : choices) names.push_back(c.first);
    OptionSpec spec{key, OptionType::Enum, defaultValue, description, names};
    return add(std::move(spec), [member, choices, names](Options& o, const OptionSpec& s, const OptionValue& v) {
      const auto& name = typed_options_detail::held<std::string>(s, v, "choice");
      for (const auto& c : choices)
        if (c.first == name) {
          o.*member = c.second;
          return;
        }
      refuseOption(s.key, "'" + name + "' is not one of " + list(names));
    });
  }

  // For PluginDescriptor::options.
  const std::vector<OptionSpec>& specs() const { return specs_; }

  // The struct from validated values: every declared key converted into its member (the
  // default where `values` lacks the key). Throws ConfigError naming the key. Does not
  // run validate(): parseOptions() does.
  Options parse(const OptionValues& values) const {
    Options out{};
    for (size_t i = 0; i < specs_.size(); ++i) {
      const OptionSpec& spec = specs_[i];
      const auto& all = values.all();
      const auto it = all.find(spec.key);
      if (it != all.end()) assign_[i](out, spec, it->second);
      else assign_[i](out, spec, typed_options_detail::defaultValue(spec));
    }
    return out;
  }

 private:
  using Assign = std::function<void(Options&, const OptionSpec&, const OptionValue&)>;

  template <class M> static constexpr OptionType typeOf() {
    if constexpr (std::is_same_v<M, bool>) return OptionType::Bool;
    else if constexpr (std::is_integral_v<M>) return OptionType::Int;
    else if constexpr (std::is_same_v<M, double>) return OptionType::Double;
    else if constexpr (std::is_same_v<M, std::string>) return OptionType::String;
    else if constexpr (std::is_same_v<M, std::chrono::milliseconds>) return OptionType::Duration;
    else {
      static_assert(std::is_same_v<M, std::vector<std::string>>,
                    "option members are bool, an integer, double, std::string, std::chrono::milliseconds or "
                    "std::vector<std::string>; use size() for byte counts and choice() for enums");
      return OptionType::StringList;
    }
  }

  static std::string list(const std::vector<std::string>& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
  }

  OptionSchema& add(OptionSpec spec, Assign assign) {
    specs_.push_back(std::move(spec));
    assign_.push_back(std::move(assign));
    return *this;
  }

  std::vector<OptionSpec> specs_;
  std::vector<Assign> assign_;
};

// Options::schema(), built once per plugin.
template <class Options> const OptionSchema<Options>& optionSchema() {
  static const OptionSchema<Options> schema = Options::schema();
  return schema;
}

template <class Options> const std::vector<OptionSpec>& typedOptionSpecs() { return optionSchema<Options>().specs(); }

// parse(), then Options::validate(ctx) or Options::validate(), whichever it declares.
template <class Options, class Context> Options parseOptions(const OptionValues& values, const Context& ctx) {
  Options options = optionSchema<Options>().parse(values);
  if constexpr (typed_options_detail::HasValidateWith<Options, Context>::value) options.validate(ctx);
  else if constexpr (typed_options_detail::HasValidate<Options>::value) options.validate();
  return options;
}
template <class Options> Options parseOptions(const OptionValues& values) {
  Options options = optionSchema<Options>().parse(values);
  if constexpr (typed_options_detail::HasValidate<Options>::value) options.validate();
  return options;
}

// The descriptor's checkOptions for typed options that declare
// `std::string checkHere() const`: what only the host loading the config can check (an
// interface, a file, a device there), "" when fine. Parses the values first (validate()
// included): a refusal there comes back as its message.
template <class Options> std::string typedOptionCheck(const OptionValues& values) {
  try {
    return parseOptions<Options>(values).checkHere();
  } catch (const ConfigError& e) {
    return e.what();
  }
}

// Factory adapters with the descriptor's signatures: the typed factory receives the struct.
template <class Options, std::unique_ptr<Backend> (*Create)(const Options&, const BackendContext&)>
std::unique_ptr<Backend> typedBackendFactory(const OptionValues& values, const BackendContext& ctx) {
  return Create(parseOptions<Options>(values, ctx), ctx);
}
template <class Options, std::shared_ptr<Store> (*Create)(const Options&, const StoreContext&)>
std::shared_ptr<Store> typedStoreFactory(const OptionValues& values, const StoreContext& ctx) {
  return Create(parseOptions<Options>(values, ctx), ctx);
}
template <class Options, std::unique_ptr<CommHook> (*Create)(const Options&, const CommHookContext&)>
std::unique_ptr<CommHook> typedCommHookFactory(const OptionValues& values, const CommHookContext& ctx) {
  return Create(parseOptions<Options>(values, ctx), ctx);
}
template <class Options, std::unique_ptr<Tuner> (*Create)(const Options&, const TunerContext&)>
std::unique_ptr<Tuner> typedTunerFactory(const OptionValues& values, const TunerContext& ctx) {
  return Create(parseOptions<Options>(values, ctx), ctx);
}

}  // namespace commhost
