#pragma once
// An environment variable set (or, with nullptr, unset) for a scope; the value it had comes back
// when the scope ends, whatever happens in it. ctest runs every test with ATTN_CACHE_DIR=off and
// ATTN_TUNING_DB=off (tests/CMakeLists.txt): a test that points one at files of its own restores it.
#include <cstdlib>
#include <optional>
#include <string>

namespace attn::ref {

class scoped_env {
 public:
  scoped_env(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~scoped_env() {
    if (old_) ::setenv(name_.c_str(), old_->c_str(), 1);
    else ::unsetenv(name_.c_str());
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace attn::ref
