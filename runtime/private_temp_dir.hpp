#pragma once
// A directory only this process can use (mkdtemp: a fresh unpredictable name, mode 0700),
// removed with everything in it when the object goes away. For Halide calls that can only
// write their results to files: no other thread or user can read, swap or plant a file there.
#include <filesystem>

namespace attn::detail {

class private_temp_dir {
 public:
  private_temp_dir();  // throws attn::error if the directory cannot be created
  ~private_temp_dir();
  private_temp_dir(const private_temp_dir&) = delete;
  private_temp_dir& operator=(const private_temp_dir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace attn::detail
