// kvtune: KV-cache quantization simulator and autotuner. Exit status: 0 success, 2 bad input
// (the message names the file, key or value), 1 internal error.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <map>
#include <streambuf>

#include "commands.h"
#include "plugins.h"
#include "kvtune/error.h"
#include "kvtune/version.h"

namespace {

// std::cout through write(2), keeping the errno of the first failed write (stdio's buffer drops it,
// so a full disk could only be reported as "write failed"). Line-buffered on a terminal, so
// progress lines still show as they are printed.
class StdoutBuf final : public std::streambuf {
 public:
  StdoutBuf() : line_buffered_(::isatty(STDOUT_FILENO) == 1) { setp(buf_, buf_ + sizeof buf_); }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    drain();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return error_ == 0 ? traits_type::not_eof(c) : traits_type::eof();
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    const std::streamsize put = std::streambuf::xsputn(s, n);
    if (line_buffered_ && std::memchr(s, '\n', static_cast<size_t>(n)) != nullptr) drain();
    return error_ == 0 ? put : 0;
  }
  int sync() override {
    drain();
    return error_ == 0 ? 0 : -1;
  }

 private:
  void drain() {
    const char* p = pbase();
    while (p < pptr() && error_ == 0) {
      const ssize_t n = ::write(STDOUT_FILENO, p, static_cast<size_t>(pptr() - p));
      if (n < 0 && errno != EINTR) error_ = errno;
      if (n > 0) p += n;
    }
    setp(buf_, buf_ + sizeof buf_);  // after a failure the rest is dropped, as stdio would
  }

  char buf_[1 << 14];
  bool line_buffered_;
  int error_ = 0;
};

// Every option that takes a value refuses an empty one (it had silently meant "not given": `sweep ""`
// ran the default sweep), and a floating-point one refuses NaN and infinities.
void check_option_values(CLI::App& command) {
  const CLI::Validator non_empty([](std::string& v) { return v.empty() ? std::string("an empty value") : ""; }, "",
                                 "NONEMPTY");
  for (CLI::Option* option : command.get_options()) {
    if (option->get_type_size() == 0) continue;  // a flag
    option->check(non_empty);
    if (option->get_type_name().starts_with("FLOAT")) option->check(kvtune::cli::kFinite);  // also "FLOAT:POSITIVE"
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Never freed: std::cout may still flush it during static destruction.
  auto* out = new StdoutBuf;
  std::cout.rdbuf(out);
  CLI::App app{"kvtune " KVTUNE_VERSION " - KV-cache quantization simulator and autotuner"};
  app.require_subcommand(1);
  app.set_version_flag("--version", KVTUNE_VERSION);
  std::map<CLI::App*, kvtune::cli::Runner> runners;
  auto add = [&](kvtune::cli::Runner (*make)(CLI::App&), const char* name, const char* help) {
    CLI::App* sub = app.add_subcommand(name, help);
    runners[sub] = make(*sub);
    kvtune::cli::add_plugin_option(*sub);
    check_option_values(*sub);
  };
  add(kvtune::cli::add_sweep, "sweep", "search K/V schemes against a budget; the frontier, the best and each runtime's flags");
  add(kvtune::cli::add_recommend, "recommend", "the common question as a sweep: a model, a context, a budget, runtimes");
  add(kvtune::cli::add_merge, "merge", "combine the results of a sharded sweep and report on them");
  add(kvtune::cli::add_report, "report", "write report.html for a sweep's results: charts, every point, each runtime's flags");
  add(kvtune::cli::add_simulate, "simulate", "attention over quantized K/V caches, synthetic or from .npy tensors");
  add(kvtune::cli::add_quantize, "quantize", "round-trip a tensor through a scheme, optionally writing packed bytes");
  add(kvtune::cli::add_schemes, "schemes", "list every scheme family with its parameters and their domains");
  add(kvtune::cli::add_check_plugin, "check-plugin", "run the conformance checks on every scheme of a plugin");
  add(kvtune::cli::add_calibrate, "calibrate", "fit static K/V scales on a capture and write the files runtimes load");
  add(kvtune::cli::add_profile, "profile", "condense a capture into a model profile the synthetic workload draws from");
  add(kvtune::cli::add_memory, "memory", "KV-cache bytes per token and per sequence, and how many sequences fit a GPU");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::RequiredError& e) {
    // "kvtune bogus": CLI11 reports a missing subcommand; name the word it did not know instead.
    if (argc > 1 && argv[1][0] != '-' && app.get_subcommands().empty()) {
      std::cerr << "kvtune: unknown command '" << argv[1] << "'; the commands are listed by kvtune --help\n";
      return 2;
    }
    app.exit(e);
    return 2;
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  try {
    for (CLI::App* sub : app.get_subcommands()) {
      const int status = runners.at(sub)();
      // A table or JSON document that never reached a full disk is a failure too, with the reason.
      std::cout.flush();
      if (out->error() != 0) {
        throw kvtune::InputError("standard output: write failed (" + std::string(std::strerror(out->error())) + ")");
      }
      return status;
    }
  } catch (const kvtune::InputError& e) {
    std::cerr << "kvtune: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "kvtune: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
