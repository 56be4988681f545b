#include "kvtune/isolation.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "kvtune/error.h"
#include "plugin_guard.h"

namespace kvtune {
namespace {

// The child's report: one tag byte, an 8-byte length, the payload. A report cut short (the child
// died while writing) is detected by its length.
enum Tag : char { kOk = 'O', kInputError = 'I', kException = 'E' };

bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool in_child = false;

[[noreturn]] void child_main(int fd, const std::function<std::string()>& work) {
  in_child = true;
  // A crashing plugin should not leave a core file per check behind.
  struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  // The parent learns of a crash from the signal that ended the child: sanitizers' handlers
  // would turn it into an exit status.
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, SIG_DFL);
  plugin_guard::disarm();  // and a plugin's exit() stays its exit status
  char tag = kOk;
  std::string payload;
  try {
    payload = work();
  } catch (const InputError& e) {
    tag = kInputError;
    payload = e.what();
  } catch (const std::exception& e) {
    tag = kException;
    payload = e.what();
  } catch (...) {
    tag = kException;
    payload = "unknown exception";
  }
  uint64_t size = payload.size();
  char header[9];
  header[0] = tag;
  std::memcpy(header + 1, &size, sizeof size);
  const bool sent = write_all(fd, header, sizeof header) && write_all(fd, payload.data(), payload.size());
  // _exit: no atexit handlers, static destructors or stdio flushes of the parent's state.
  ::_exit(sent ? 0 : 1);
}

std::string seconds(double s) {
  std::ostringstream out;
  out << s;
  return out.str();
}

}  // namespace
}  // namespace kvtune

// LeakSanitizer's hook: a child that a plugin ends with exit() has its leak check skipped, so its
// exit status stays the plugin's (an ordinary build never calls this).
extern "C" __attribute__((visibility("default"), used)) int __lsan_is_turned_off() { return kvtune::in_child ? 1 : 0; }

namespace kvtune {

std::string signal_description(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  const char* text = strsignal(signal);
  std::string out = abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(signal);
  if (abbrev != nullptr && text != nullptr) out += std::string(" (") + text + ")";
  return out;
}

std::string ChildFailure::describe() const {
  switch (kind) {
    case Kind::signal:
      return "crashed: " + signal_description(code);
    case Kind::exit_status:
      return "exited with status " + std::to_string(code) + " (it called exit() instead of returning)";
    case Kind::timeout:
      return "timed out after " + seconds(timeout_seconds) + " s (killed)";
    case Kind::no_result:
      break;
  }
  return "failed: " + (detail.empty() ? std::string("the child process ended without a result") : detail);
}

IsolatedResult run_isolated(const std::function<std::string()>& work, const IsolationOptions& options) {
  IsolatedResult result;
  std::fflush(nullptr);
  std::cout.flush();
  std::cerr.flush();
  // Pipe, fork and closing our write end happen under one lock: a child forked by another thread
  // meanwhile would inherit this write end and hold back our EOF until it exits.
  static std::mutex forking;
  std::unique_lock<std::mutex> lock(forking);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    result.failure.detail = std::string("cannot create a pipe: ") + std::strerror(errno);
    return result;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    result.failure.detail = std::string("cannot fork: ") + std::strerror(errno);
    ::close(fds[0]);
    ::close(fds[1]);
    return result;
  }
  if (pid == 0) {
    lock.unlock();  // this thread's copy: the work may isolate work of its own
    ::close(fds[0]);
    child_main(fds[1], work);
  }
  ::close(fds[1]);
  lock.unlock();

  using Clock = std::chrono::steady_clock;
  const bool limited = options.timeout_seconds > 0;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                         limited ? options.timeout_seconds : 0.0));
  auto remaining_ms = [&]() -> int {
    if (!limited) return -1;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
  };

  std::string report;
  bool timed_out = false;
  for (;;) {
    pollfd p = {fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, remaining_ms());
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      timed_out = true;
      break;
    }
    char buffer[65536];
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: the child is done (or dead)
    report.append(buffer, static_cast<size_t>(n));
  }
  ::close(fds[0]);

  int status = 0;
  if (timed_out) {
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    result.failure.kind = ChildFailure::Kind::timeout;
    result.failure.timeout_seconds = options.timeout_seconds;
    return result;
  }
  // The pipe closed; the child is exiting. Wait for it, still within the limit.
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, limited ? WNOHANG : 0);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      result.failure.detail = std::string("cannot wait for the child process: ") + std::strerror(errno);
      return result;
    }
    if (limited && remaining_ms() == 0) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      result.failure.kind = ChildFailure::Kind::timeout;
      result.failure.timeout_seconds = options.timeout_seconds;
      return result;
    }
    if (limited) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  uint64_t size = 0;
  if (report.size() >= 9) std::memcpy(&size, report.data() + 1, sizeof size);
  if (report.size() >= 9 && report.size() - 9 == size) {
    result.payload = report.substr(9);
    switch (report[0]) {
      case kOk:
        result.status = IsolatedResult::Status::ok;
        return result;
      case kInputError:
        result.status = IsolatedResult::Status::input_error;
        return result;
      case kException:
        result.status = IsolatedResult::Status::exception;
        return result;
      default:
        break;
    }
    result.payload.clear();
  }
  if (WIFSIGNALED(status)) {
    result.failure.kind = ChildFailure::Kind::signal;
    result.failure.code = WTERMSIG(status);
  } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    result.failure.kind = ChildFailure::Kind::exit_status;
    result.failure.code = WEXITSTATUS(status);
  } else {
    result.failure.kind = ChildFailure::Kind::no_result;
    result.failure.detail = "exited with status 0 without reporting a result (it called exit(0) instead of returning)";
  }
  return result;
}

std::string run_isolated_or_throw(const std::function<std::string()>& work, const std::string& what,
                                  const IsolationOptions& options) {
  IsolatedResult r = run_isolated(work, options);
  switch (r.status) {
    case IsolatedResult::Status::ok:
      return std::move(r.payload);
    case IsolatedResult::Status::input_error:
      throw InputError(r.payload);
    case IsolatedResult::Status::exception:
      throw std::runtime_error(r.payload);
    case IsolatedResult::Status::failed:
      break;
  }
  throw PluginFault(what + " " + r.failure.describe());
}

}  // namespace kvtune
