// The last word of a plugin that crashes inside kvtune's own process (private to core/src).
//
// Plugin code that runs in-process (create, spec, footprint, check_shape, calibrate, and quantize /
// dequantize wherever no child process isolates them: `kvtune quantize`, the GPU backends) can
// still segfault, abort() or exit(). kvtune cannot go on after that, but it must not die without a
// word either: while a thread is inside a plugin call (a PluginCall in scope), a fatal signal or an
// exit() prints which plugin, family and call it was and ends the process with status 2. Outside a
// plugin call the previous handler (the default, or a sanitizer's) runs as before, and in a child of
// run_isolated the guard is off, so the parent still sees the plugin's own signal or exit status.
#pragma once

#include <string>

namespace kvtune::plugin_guard {

// Marks the calling thread as inside `call` of the plugin `label` ("plugin family 'nf4' (from
// --plugin /x/libnf4.so)"). `label` must outlive the scope; `call` is a string literal.
class PluginCall {
 public:
  PluginCall(const std::string& label, const char* call);
  ~PluginCall();
  PluginCall(const PluginCall&) = delete;
  PluginCall& operator=(const PluginCall&) = delete;

 private:
  const std::string* outer_label_;
  const char* outer_call_;
};

// A copy of `label` that lives as long as the process: a plugin's exit() runs static destructors (of
// a registry that held the label, say) before the guard's atexit handler reads it.
const std::string& keep(std::string label);

// Installs the handlers (once per process; load_plugin calls it). Idempotent and thread-safe.
void arm();

// In a child of run_isolated: the parent reports the child's signal or exit status itself. For good:
// a later arm() in the same process does nothing.
void disarm();

}  // namespace kvtune::plugin_guard
