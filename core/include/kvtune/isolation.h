// Running untrusted code (a plugin's callbacks) in a forked child process, so that a segfault,
// abort(), exit() or endless loop in it becomes a structured failure instead of taking kvtune down
// (docs/plugin-guide.md "Crashing plugins"). The child runs a function, sends its bytes back
// through a pipe and leaves with _exit; the parent waits with a time limit and kills it after.
//
// POSIX only. The child is a copy of the parent at the fork: it sees every loaded plugin and every
// object, but only the forking thread, so the work must not rely on other threads (OpenMP pools
// included: evaluate_isolated runs the evaluator with one thread in the child).
#pragma once

#include <functional>
#include <string>

namespace kvtune {

struct IsolationOptions {
  double timeout_seconds = 0;  // wall-clock limit for the child; 0 or less: none
};

// How a child ended without reporting a result.
struct ChildFailure {
  enum class Kind {
    signal,       // killed by `code` (SIGSEGV, SIGABRT, ...)
    exit_status,  // called exit(`code`) (or _exit) before it could report
    timeout,      // ran past the limit and was killed with SIGKILL
    no_result,    // exited 0 but its report is missing or cut short, or fork/pipe failed
  };
  Kind kind = Kind::no_result;
  int code = 0;                // signal number or exit status
  double timeout_seconds = 0;  // timeout: the limit it ran past
  std::string detail;          // no_result: what went wrong

  // "crashed: SIGSEGV (Segmentation fault)", "exited with status 3", "timed out after 2 s", ...
  std::string describe() const;
};

// What a child's work returned.
struct IsolatedResult {
  enum class Status {
    ok,           // `payload` holds the bytes the work returned
    input_error,  // the work threw kvtune::InputError; `payload` holds its message
    exception,    // it threw something else (a bug); `payload` holds its what()
    failed,       // the child died or timed out: see `failure`
  };
  Status status = Status::failed;
  std::string payload;
  ChildFailure failure;
};

// "SIGSEGV (Segmentation fault)" for SIGSEGV, "signal 77" for a number without a name.
std::string signal_description(int signal);

// Runs `work` in a forked child and returns what happened. Safe to call from several threads at
// once (each child reports through its own pipe). stdout and stderr are flushed first, so
// the child (which may call exit() and flush its copy of the buffers) repeats nothing.
IsolatedResult run_isolated(const std::function<std::string()>& work, const IsolationOptions& options = {});

// run_isolated, with the outcome turned back into what `work` would have done in-process: the
// bytes, the same InputError, a std::runtime_error for any other exception, and a PluginFault
// (error.h) "WHAT FAILURE" when the child died, e.g. "plugin scheme 'x' (from --plugin /p.so)
// crashed: SIGSEGV (Segmentation fault)".
std::string run_isolated_or_throw(const std::function<std::string()>& work, const std::string& what,
                                  const IsolationOptions& options = {});

}  // namespace kvtune
