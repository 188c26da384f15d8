#include "private_temp_dir.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <system_error>
#include <vector>
#include "errors.hpp"

namespace attn::detail {

private_temp_dir::private_temp_dir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "attnforge_XXXXXX").string();
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  if (::mkdtemp(name.data()) == nullptr)
    throw error("cannot create a private temporary directory from '" + pattern + "': " + std::strerror(errno));
  path_ = name.data();
}

private_temp_dir::~private_temp_dir() {
  std::error_code ignored;  // nothing useful to do if removal fails while unwinding
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace attn::detail
