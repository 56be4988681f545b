// The progress line on stderr: what is being done, how far, how fast and how long is left, redrawn
// in place a few times a second by its own thread (so it moves while a long batch runs). Quiet when
// stderr is not a terminal or CI is set; a sharded run under a batch scheduler (no terminal) can
// ask for a whole line every `log_period` instead, for its log.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace kvtune::cli {

class ProgressLine {
 public:
  enum class Mode { quiet, terminal, log_lines };

  // terminal when stderr is one and CI is unset; else log_lines when `log_without_terminal` (and
  // CI is unset); else quiet.
  static Mode mode_for_stderr(bool log_without_terminal);

  ProgressLine(std::string prefix, Mode mode, std::chrono::seconds log_period = std::chrono::seconds(30));
  ~ProgressLine();  // stop()

  // Ends the line (a last redraw and a newline) and the redraws; later updates show nothing.
  void stop();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // Safe from any thread. A new `stage` restarts the rate; `unit` names what is counted.
  void update(std::string_view stage, double done, double total, std::string_view unit);

  // The text of one redraw: "PREFIX: STAGE 12/40 UNIT (30%), 2.5 UNIT/s, ETA 0:11".
  static std::string render(std::string_view prefix, std::string_view stage, double done, double total,
                            std::string_view unit, double seconds_in_stage, double done_at_stage_start);

 private:
  void run();
  void draw(bool final);

  const std::string prefix_;
  const Mode mode_;
  const std::chrono::seconds log_period_;
  std::mutex lock_;
  std::condition_variable wake_;
  bool stopping_ = false, drawn_ = false;
  std::string stage_, unit_;
  double done_ = 0.0, total_ = 0.0, stage_start_done_ = 0.0;
  std::chrono::steady_clock::time_point stage_start_, last_log_;
  std::thread ticker_;
};

}  // namespace kvtune::cli
