#include "private_folder.hpp"

#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace attn::detail {

namespace fs = std::filesystem;

namespace {

std::string mode_text(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

bool owner_trusted(uid_t owner) { return owner == ::geteuid() || owner == 0; }

// Why the one folder `dir` (already resolved) may not hold our code; `leaf`: the folder itself,
// not one above it.
std::optional<std::string> folder_problem(const fs::path& dir, bool leaf) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return dir.string() + " cannot be inspected (" + std::strerror(errno) + ")";
  if (!S_ISDIR(st.st_mode)) return dir.string() + " is not a folder";
  if (!owner_trusted(st.st_uid))
    return dir.string() + " is owned by user " + std::to_string(st.st_uid) + ", not by this user (" +
           std::to_string(::geteuid()) + ") or root";
  const bool shared_sticky = !leaf && st.st_uid == 0 && (st.st_mode & S_ISVTX) != 0;
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && !shared_sticky)
    return dir.string() + " is writable by " + ((st.st_mode & S_IWOTH) ? "others" : "its group") + " (mode " +
           mode_text(st.st_mode) + ")";
  return std::nullopt;
}

// `resolved` and every folder above it, checked from the top; `leaf`: `resolved` is the folder
// that holds the code (else one that new folders are made in).
std::optional<std::string> chain_problem(const fs::path& resolved, bool leaf) {
  std::vector<fs::path> chain;
  for (fs::path p = resolved; !p.empty(); p = p.parent_path()) {
    chain.push_back(p);
    if (p == p.root_path()) break;
  }
  for (auto it = chain.rbegin(); it != chain.rend(); ++it)
    if (auto why = folder_problem(*it, leaf && *it == resolved)) return why;
  return std::nullopt;
}

}  // namespace

std::optional<std::string> untrusted_because(const fs::path& dir) {
  std::error_code ec;
  const fs::path resolved = fs::canonical(dir, ec);
  if (ec) return dir.string() + " cannot be resolved (" + ec.message() + ")";
  return chain_problem(resolved, true);
}

std::optional<std::string> make_private_folder(const fs::path& dir) {
  std::error_code ec;
  const fs::path absolute = fs::absolute(dir, ec);
  if (ec) return dir.string() + " cannot be made absolute (" + ec.message() + ")";
  // The longest part of the path that exists, then the folders still to create below it.
  fs::path existing = absolute.lexically_normal();
  std::vector<fs::path> missing;
  while (!fs::exists(existing, ec) && existing.has_relative_path()) {
    missing.push_back(existing.filename());
    existing = existing.parent_path();
  }
  const fs::path base = fs::canonical(existing, ec);
  if (ec) return existing.string() + " cannot be resolved (" + ec.message() + ")";
  if (missing.empty()) return chain_problem(base, true);
  // New folders go below an existing one, trusted as a parent (it may be /tmp).
  if (auto why = chain_problem(base, false)) return why;
  fs::path made = base;
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    made /= *it;
    if (::mkdir(made.c_str(), 0700) != 0 && errno != EEXIST)
      return "cannot create " + made.string() + " (" + std::strerror(errno) + ")";
    // The umask may have taken bits away (or a racing process made it first): set exactly 0700
    // only on a folder we own; the final check below judges the rest.
    struct stat st {};
    if (::lstat(made.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid()) ::chmod(made.c_str(), 0700);
  }
  return untrusted_because(absolute);
}

bool trusted_file(int fd, std::string& why) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    why = std::string("cannot be inspected (") + std::strerror(errno) + ")";
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    why = "is not a regular file";
    return false;
  }
  if (!owner_trusted(st.st_uid)) {
    why = "is owned by user " + std::to_string(st.st_uid) + ", not by this user or root";
    return false;
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    why = "is writable by others (mode " + mode_text(st.st_mode) + ")";
    return false;
  }
  return true;
}

}  // namespace attn::detail
