#pragma once
// The tuner's progress: candidates done and planned, the best time so far, time left. On a
// terminal one line redrawn in place with a bar; otherwise (a log, CI) one plain line per update.
#include <cstddef>
#include <cstdio>
#include <string>

namespace attn::tune {

class progress {
 public:
  // out == nullptr: silent. tty: redraw one line (default: whether `out` is a terminal).
  explicit progress(std::FILE* out);
  progress(std::FILE* out, bool tty) : out_(out), tty_(tty) {}
  void update(std::size_t done, std::size_t total, double best_ms, double seconds_left, const std::string& what);
  void note(const std::string& line);  // a line of its own (a failure, a phase)
  void finish();

 private:
  std::FILE* out_;
  bool tty_;
  bool open_line_ = false;  // a bar is drawn and has no newline yet
};

}  // namespace attn::tune
