#include "progress.hpp"

#include <unistd.h>

#include <algorithm>

namespace attn::tune {

progress::progress(std::FILE* out) : out_(out), tty_(out != nullptr && ::isatty(::fileno(out))) {}

void progress::update(std::size_t done, std::size_t total, double best_ms, double seconds_left, const std::string& what) {
  if (!out_) return;
  const std::string shown = what.size() > 60 ? what.substr(0, 57) + "..." : what;
  if (tty_) {
    constexpr int width = 24;
    const int filled = total ? int(width * std::min(done, total) / total) : 0;
    std::fprintf(out_, "\r\033[K[%s%s] %zu/%zu best %.3f ms, %.0f s left  %s", std::string(std::size_t(filled), '#').c_str(),
                 std::string(std::size_t(width - filled), '.').c_str(), done, total, best_ms, seconds_left, shown.c_str());
    open_line_ = true;
  } else {
    std::fprintf(out_, "tune: %zu/%zu best %.3f ms, %.0f s left: %s\n", done, total, best_ms, seconds_left, shown.c_str());
  }
  std::fflush(out_);
}

void progress::note(const std::string& line) {
  if (!out_) return;
  if (open_line_) std::fputs("\r\033[K", out_);
  std::fprintf(out_, "tune: %s\n", line.c_str());
  open_line_ = false;
  std::fflush(out_);
}

void progress::finish() {
  if (out_ && open_line_) std::fputc('\n', out_);
  open_line_ = false;
}

}  // namespace attn::tune
