#pragma once
// Running another program (the C++ driver that links a cached kernel, the C compiler of an AOT
// entry point) and reading what it wrote.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace attn::detail {

// Runs `args` (a program, found on PATH, then its arguments) with its stdout and stderr into
// `log` (created 0600) and waits for it. Its exit status, -1 if it did not exit normally; nullopt,
// with `why` set, if it could not be started.
std::optional<int> run_program(const std::vector<std::string>& args, const std::filesystem::path& log, std::string& why);

// A text file's contents ("" if it cannot be read).
std::string read_text(const std::filesystem::path& file);

}  // namespace attn::detail
