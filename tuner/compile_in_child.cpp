#include "compile_in_child.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <thread>
#include "runtime/private_temp_dir.hpp"

namespace attn::tune {

namespace {

using clock = std::chrono::steady_clock;

double since(clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); }

[[noreturn]] void child(int to_parent, const std::filesystem::path& temp, const std::function<void()>& compile) {
  setenv("TMPDIR", temp.c_str(), 1);  // this process has one thread: safe
  int code = 0;
  std::string message;
  try {
    compile();
  } catch (const std::exception& e) {
    message = e.what();
    code = 1;
  } catch (...) {
    message = "unknown exception";
    code = 1;
  }
  message.resize(std::min<std::size_t>(message.size(), 4000));  // below the pipe's buffer: never blocks
  if (!message.empty() && write(to_parent, message.data(), message.size()) < 0) code = 2;
  _exit(code);
}

std::string read_message(int from_child) {
  std::string out;
  char buf[1024];
  for (ssize_t n; (n = read(from_child, buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    out.append(buf, std::size_t(n));
  }
  return out;
}

}  // namespace

child_compile compile_in_child(const std::function<void()>& compile, double limit_seconds) {
  child_compile r;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    r.message = std::string("pipe: ") + std::strerror(errno);
    return r;
  }
  const detail::private_temp_dir temp;  // the child's temporary files: removed even if it is killed
  std::fflush(nullptr);  // buffered output would be written twice
  const auto t0 = clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    r.message = std::string("fork: ") + std::strerror(errno);
    close(fds[0]);
    close(fds[1]);
    return r;
  }
  if (pid == 0) {
    close(fds[0]);
    child(fds[1], temp.path(), compile);
  }
  close(fds[1]);
  int status = 0;
  bool exited = false;
  while (!exited) {
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) exited = true;
    else if (w < 0 && errno != EINTR) break;
    else if (since(t0) > limit_seconds) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      r.result = child_compile::status::timed_out;
      r.message = "stopped after " + std::to_string(int(limit_seconds + 0.5)) + " s (its share of the time budget)";
      break;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  r.seconds = since(t0);
  if (exited) {
    const std::string said = read_message(fds[0]);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      r.result = child_compile::status::done;
    } else {
      r.message = !said.empty()         ? said
                  : WIFSIGNALED(status) ? std::string("the compile died: ") + strsignal(WTERMSIG(status))
                                        : "the compile failed (exit " + std::to_string(WEXITSTATUS(status)) + ")";
    }
  } else if (r.result != child_compile::status::timed_out) {
    r.message = std::string("waitpid: ") + std::strerror(errno);
  }
  close(fds[0]);
  return r;
}

}  // namespace attn::tune
