#include "progress_line.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>

namespace kvtune::cli {
namespace {

// 4 redraws a second: the floor is one.
constexpr auto kRedraw = std::chrono::milliseconds(250);

std::string clock_text(double seconds) {
  const long s = std::lround(seconds);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  }
  return buf;
}

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v == std::floor(v) ? "%.0f" : "%.1f", v);
  return buf;
}

}  // namespace

ProgressLine::Mode ProgressLine::mode_for_stderr(bool log_without_terminal) {
  const char* ci = std::getenv("CI");
  if (ci != nullptr && *ci != '\0') return Mode::quiet;
  if (::isatty(STDERR_FILENO) == 1) return Mode::terminal;
  return log_without_terminal ? Mode::log_lines : Mode::quiet;
}

ProgressLine::ProgressLine(std::string prefix, Mode mode, std::chrono::seconds log_period)
    : prefix_(std::move(prefix)), mode_(mode), log_period_(log_period) {
  stage_start_ = last_log_ = std::chrono::steady_clock::now();
  if (mode_ != Mode::quiet) ticker_ = std::thread([this] { run(); });
}

ProgressLine::~ProgressLine() { stop(); }

void ProgressLine::stop() {
  if (!ticker_.joinable()) return;
  {
    const std::lock_guard<std::mutex> guard(lock_);
    stopping_ = true;
  }
  wake_.notify_all();
  ticker_.join();
}

void ProgressLine::update(std::string_view stage, double done, double total, std::string_view unit) {
  if (mode_ == Mode::quiet) return;
  const std::lock_guard<std::mutex> guard(lock_);
  if (stopping_) return;
  const bool new_stage = stage != stage_;
  if (new_stage) {
    stage_ = stage;
    stage_start_ = std::chrono::steady_clock::now();
    stage_start_done_ = done;
  }
  unit_ = unit;
  done_ = done;
  total_ = total;
  // A stage shows at once, where it starts: the ticker's first redraw comes a quarter second later,
  // when a fast stage may be well under way (or over).
  if (new_stage && mode_ == Mode::terminal) draw(false);
}

std::string ProgressLine::render(std::string_view prefix, std::string_view stage, double done, double total,
                                 std::string_view unit, double seconds_in_stage, double done_at_stage_start) {
  const std::string per = unit.empty() ? std::string() : " " + std::string(unit);
  std::string line = std::string(prefix) + ": " + std::string(stage) + " " + number_text(done) + "/" +
                     number_text(total) + per;
  if (total > 0) line += " (" + std::to_string(int(std::floor(100.0 * done / total))) + "%)";
  const double rate = seconds_in_stage > 0 ? (done - done_at_stage_start) / seconds_in_stage : 0.0;
  if (rate > 0) {
    char buf[48];
    std::snprintf(buf, sizeof buf, rate >= 10 ? "%.0f" : "%.2g", rate);
    line += ", " + std::string(buf) + per + "/s, ETA " + clock_text((total - done) / rate);
  } else if (done < total) {
    line += ", ETA --:--";  // nothing finished yet to time
  }
  return line;
}

void ProgressLine::draw(bool final) {
  if (stage_.empty()) return;
  const auto now = std::chrono::steady_clock::now();
  const std::string text = render(prefix_, stage_, done_, total_, unit_,
                                  std::chrono::duration<double>(now - stage_start_).count(), stage_start_done_);
  if (mode_ == Mode::terminal) {
    std::cerr << "\r" << text << "\x1b[K" << (final ? "\n" : "") << std::flush;  // \x1b[K: clear to the end
    drawn_ = !final;
  } else if (final || now - last_log_ >= log_period_) {
    std::cerr << text << "\n" << std::flush;
    last_log_ = now;
  }
}

void ProgressLine::run() {
  std::unique_lock<std::mutex> guard(lock_);
  while (!wake_.wait_for(guard, kRedraw, [this] { return stopping_; })) draw(false);
  if (drawn_ || mode_ == Mode::log_lines) draw(true);
}

}  // namespace kvtune::cli
