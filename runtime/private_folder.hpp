#pragma once
// Folders this process loads code from (the disk kernel cache) must be writable by this user
// alone: anyone else who can write there could plant a kernel and run code inside the process.
//
// A folder is trusted when it and every folder above it (symbolic links resolved) is owned by
// this user or by root and writable by neither group nor others. A folder above it may also be
// a sticky root-owned one such as /tmp, where others can add names but not move or remove ours.
#include <filesystem>
#include <optional>
#include <string>

namespace attn::detail {

// nullopt when `dir` is trusted; otherwise why not, naming the folder ("/tmp/c is writable by
// others (mode 0777)", "... is owned by user 1001"). A missing folder is not trusted.
std::optional<std::string> untrusted_because(const std::filesystem::path& dir);

// Creates `dir` and its missing parents with mode 0700, whatever the umask, after checking that
// the existing part of the path is trusted. Returns why not when it cannot (nothing created
// under an untrusted folder); nullopt when `dir` now exists and is trusted.
std::optional<std::string> make_private_folder(const std::filesystem::path& dir);

// True for a file this process may load code from: a regular file (not a link), owned by this
// user or root, writable by neither group nor others. `why` says otherwise.
bool trusted_file(int fd, std::string& why);

}  // namespace attn::detail
