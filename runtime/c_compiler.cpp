#include "c_compiler.hpp"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include "child_process.hpp"
#include "errors.hpp"

namespace attn::detail {

namespace {

namespace fs = std::filesystem;
using T = Halide::Target;

std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> w;
  std::istringstream in(text);
  for (std::string s; in >> s;) w.push_back(s);
  return w;
}

std::string joined(const std::vector<std::string>& w) {
  std::string s;
  for (const std::string& x : w) s += (s.empty() ? "" : " ") + x;
  return s;
}

// Runs `args` with stdout and stderr into `log`: its exit status, or -1 if it did not exit.
int run(const std::vector<std::string>& args, const fs::path& log) {
  std::string why;
  const std::optional<int> status = run_program(args, log, why);
  if (!status) throw compile_error("cannot run the C compiler '" + args[0] + "': " + why);
  return *status;
}

bool is_clang(const c_compiler& cc, const fs::path& scratch) {
  std::vector<std::string> version = cc.command;
  version.push_back("--version");
  const fs::path log = scratch / "cc-version.log";
  return run(version, log) == 0 && read_text(log).find("clang") != std::string::npos;
}

// clang's name for the target's machine; empty if there is none here.
std::string triple(const T& t) {
  std::string arch;
  switch (t.arch) {
    case T::X86: arch = t.bits == 64 ? "x86_64" : "i386"; break;
    case T::ARM: arch = t.bits == 64 ? (t.os == T::OSX || t.os == T::IOS ? "arm64" : "aarch64") : "armv7"; break;
    case T::POWERPC: arch = t.bits == 64 ? "powerpc64le" : "powerpc"; break;
    case T::WebAssembly: arch = t.bits == 64 ? "wasm64" : "wasm32"; break;
    case T::Hexagon: arch = "hexagon"; break;
    case T::RISCV: arch = t.bits == 64 ? "riscv64" : "riscv32"; break;
    default: return {};
  }
  switch (t.os) {
    case T::Linux: return arch + (t.arch == T::ARM && t.bits == 32 ? "-unknown-linux-gnueabihf" : "-unknown-linux-gnu");
    case T::Android: return arch + "-unknown-linux-android";
    case T::OSX: return arch + "-apple-macosx11.0";  // versions with thread-local storage
    case T::IOS: return arch + "-apple-ios13.0";
    case T::Windows: return arch + "-pc-windows-msvc";
    case T::Fuchsia: return arch + "-unknown-fuchsia";
    case T::NoOS:
    case T::QuRT: return arch + "-unknown-none-elf";
    case T::WebAssemblyRuntime: return arch + "-unknown-unknown";
    default: return {};
  }
}

bool same_machine(const T& a, const T& b) { return a.arch == b.arch && a.bits == b.bits && a.os == b.os; }

}  // namespace

c_compiler find_c_compiler(const std::string& spelled) {
  if (!words(spelled).empty()) return {words(spelled), true};
  if (const char* cc = std::getenv("CC"); cc != nullptr && !words(cc).empty()) return {words(cc), true};
  return {words(ATTN_DEFAULT_C_COMPILER), false};
}

std::vector<std::string> c_compile_command(const c_compiler& cc, const T& target, const fs::path& scratch) {
  const T host = Halide::get_host_target();
  const std::string machine = T(target.os, target.arch, target.bits).to_string();
  std::vector<std::string> args = cc.command;
  if (!same_machine(target, host)) {
    if (is_clang(cc, scratch)) {
      const std::string t = triple(target);
      if (t.empty()) throw compile_error("no clang target is known for " + machine + ": give a C compiler for it with --cc");
      args.push_back("--target=" + t);
    } else if (!cc.chosen) {
      throw compile_error("the kernel's entry point is C, compiled for " + machine + ", not this machine (" +
                          T(host.os, host.arch, host.bits).to_string() + "), and the default C compiler '" + joined(cc.command) +
                          "' is not clang (which attn-gen would give --target=" + triple(target) +
                          "): pass --cc clang, or --cc with a compiler for that machine (or set CC)");
    }
  }
  for (const char* flag : {"-x", "c", "-std=c11", "-O2", "-ffreestanding", "-fno-strict-aliasing", "-Wall", "-Wextra"}) args.push_back(flag);
  // Position-independent where programs and shared libraries expect it.
  if (target.os == T::Linux || target.os == T::Android || target.os == T::OSX || target.os == T::IOS || target.os == T::Fuchsia)
    args.push_back("-fPIC");
  return args;
}

void compile_c(const std::vector<std::string>& command, const fs::path& source, const fs::path& object, const fs::path& scratch) {
  std::vector<std::string> args = command;
  for (const std::string& a : {std::string("-c"), source.string(), std::string("-o"), object.string()}) args.push_back(a);
  const fs::path log = scratch / "cc.log";
  if (const int status = run(args, log); status != 0)
    throw compile_error("compiling the kernel's entry point failed (" + joined(args) + ", exit status " + std::to_string(status) +
                        "):\n" + read_text(log));
  if (const std::string warnings = read_text(log); !warnings.empty())
    std::fprintf(stderr, "attn-gen: the C compiler's warnings on the kernel's entry point (%s):\n%s", joined(args).c_str(), warnings.c_str());
}

}  // namespace attn::detail
