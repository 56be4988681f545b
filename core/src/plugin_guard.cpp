#include "plugin_guard.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>

namespace kvtune::plugin_guard {
namespace {

// Which plugin call this thread is in; null outside one. Read by the handlers, so plain pointers.
thread_local const std::string* current_label = nullptr;
thread_local const char* current_call = nullptr;

std::atomic<bool> armed{false};
std::atomic<bool> disarmed{false};  // for good: a child of run_isolated

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
struct sigaction previous[sizeof kSignals / sizeof kSignals[0]];

// Room for the handler when the plugin overflowed the main thread's stack.
alignas(16) char alternate_stack[64 * 1024];

void say(const char* text) {
  const size_t n = std::strlen(text);
  for (size_t done = 0; done < n;) {
    const ssize_t w = ::write(STDERR_FILENO, text + done, n - done);
    if (w <= 0) return;
    done += static_cast<size_t>(w);
  }
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "SIGSEGV (Segmentation fault)";
    case SIGBUS:
      return "SIGBUS (Bus error)";
    case SIGILL:
      return "SIGILL (Illegal instruction)";
    case SIGFPE:
      return "SIGFPE (Floating-point exception)";
    case SIGABRT:
      return "SIGABRT (Aborted)";
    default:
      return "a fatal signal";
  }
}

// "kvtune: plugin family 'x' (from --plugin /p.so) crashed: SIGSEGV (...) in quantize; ...", then
// exit status 2. Async-signal-safe: write(2) and _exit(2) only.
[[noreturn]] void last_word(const char* what, const char* detail) {
  say("kvtune: ");
  say(current_label->c_str());
  say(" ");
  say(what);
  say(detail);
  say(" in ");
  say(current_call);
  say("; plugin code runs inside kvtune for this command, which cannot go on (docs/plugin-guide.md, "
      "\"Crashing plugins\")\n");
  ::_exit(2);
}

bool in_plugin_call() { return armed.load(std::memory_order_relaxed) && current_label != nullptr; }

void on_signal(int sig, siginfo_t* info, void* context) {
  if (in_plugin_call()) last_word("crashed: ", signal_name(sig));
  // Not a plugin's fault: hand the signal to whoever had it before (the default, or a sanitizer).
  for (size_t i = 0; i < sizeof kSignals / sizeof kSignals[0]; ++i) {
    if (kSignals[i] != sig) continue;
    const struct sigaction& old = previous[i];
    if ((old.sa_flags & SA_SIGINFO) != 0 && old.sa_sigaction != nullptr) {
      old.sa_sigaction(sig, info, context);
      return;
    }
    if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN && old.sa_handler != nullptr) {
      old.sa_handler(sig);
      return;
    }
  }
  // The default action: reinstate it; the faulting instruction (or abort's raise) repeats it.
  std::signal(sig, SIG_DFL);
  if (sig != SIGSEGV && sig != SIGBUS && sig != SIGILL && sig != SIGFPE) std::raise(sig);
}

void on_exit() {
  if (in_plugin_call()) last_word("called exit()", "");
}

}  // namespace

PluginCall::PluginCall(const std::string& label, const char* call)
    : outer_label_(current_label), outer_call_(current_call) {
  current_label = &label;
  current_call = call;
}

PluginCall::~PluginCall() {
  current_label = outer_label_;
  current_call = outer_call_;
}

const std::string& keep(std::string label) {
  static std::mutex lock;
  static auto* kept = new std::deque<std::string>;  // never freed, reachable from this static
  const std::lock_guard<std::mutex> hold(lock);
  return kept->emplace_back(std::move(label));
}

void arm() {
  if (disarmed.load()) return;
  static std::once_flag once;
  std::call_once(once, [] {
    stack_t stack{};
    stack.ss_sp = alternate_stack;
    stack.ss_size = sizeof alternate_stack;
    sigaltstack(&stack, nullptr);
    for (size_t i = 0; i < sizeof kSignals / sizeof kSignals[0]; ++i) {
      struct sigaction action{};
      action.sa_sigaction = on_signal;
      action.sa_flags = SA_SIGINFO | SA_ONSTACK;
      sigemptyset(&action.sa_mask);
      sigaction(kSignals[i], &action, &previous[i]);
    }
    std::atexit(on_exit);
    armed.store(true);
  });
}

void disarm() {
  disarmed.store(true);
  armed.store(false);
}

}  // namespace kvtune::plugin_guard
