#pragma once
// A directory only this process can use (mkdtemp: a fresh unpredictable name, mode 0700),
// removed with everything in it when the object goes away. For Halide calls that can only
// write their results to files: no other thread or user can read, swap or plant a file there.
//
// Its name is "<prefix><pid>-XXXXXX", so that what a killed process left behind can be told
// from the folders of a live one and removed (remove_dead_temp_dirs).
#include <filesystem>
#include <string>
#include <string_view>

namespace attn::detail {

class private_temp_dir {
 public:
  // In the system's temporary folder ($TMPDIR if it names a folder, else /tmp), named
  // "attnforge_<pid>-XXXXXX"; the first one of a process removes those of dead processes.
  private_temp_dir();
  // In `parent`, named "<prefix><pid>-XXXXXX".
  private_temp_dir(const std::filesystem::path& parent, std::string_view prefix);
  // Both throw attn::error if the directory cannot be created.
  ~private_temp_dir();
  private_temp_dir(const private_temp_dir&) = delete;
  private_temp_dir& operator=(const private_temp_dir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Removes the folders in `parent` named "<prefix><pid>-XXXXXX" that belong to this user and
// whose process is gone (or that are more than a day old: a pid may be reused).
void remove_dead_temp_dirs(const std::filesystem::path& parent, std::string_view prefix);

// $TMPDIR if it names a folder, else /tmp.
std::filesystem::path temp_folder();

}  // namespace attn::detail
