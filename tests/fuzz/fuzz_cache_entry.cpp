// libFuzzer target: the input is the content of a disk kernel cache entry (runtime/disk_cache.hpp)
// for the key "fuzz kernel", written by "fuzz version". The promise checked:
//   - parse_entry never reads outside the bytes and says why when it refuses them;
//   - find() on the file never throws and returns the entry only when the bytes parse, hold this
//     key and this version; it never changes the file;
//   - entries() lists the file, with the key and version its trailer names when they are readable.
// Nothing is ever loaded. Anything else aborts: a finding. Corpus: tests/fuzz/corpus_cache_entry/
// (a good entry, and bad trailers: truncated, sizes that overflow, a wrong checksum, ...).
// Built with clang -fsanitize=fuzzer (scripts/fuzz.sh) and, as fuzz_cache_entry_replay, with any
// compiler to replay the corpus under ctest (label fuzz).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "runtime/disk_cache.hpp"
#include "runtime/private_temp_dir.hpp"

namespace {

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "FUZZ FINDING: %s\n", what.c_str());
  std::abort();
}

const std::string key = "fuzz kernel", version = "fuzz version";

struct fixture {
  attn::detail::private_temp_dir temp;
  std::filesystem::path dir = temp.path() / "cache";
  std::optional<attn::detail::disk_cache> cache = attn::detail::disk_cache::open(dir, version);
  fixture() {
    if (!cache) finding("a private folder is not trusted");
    attn::set_disk_cache_reporter([](const std::string&) {});
  }
};

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fixture f;
  const std::string bytes(reinterpret_cast<const char*>(data), size);

  std::string why;
  const auto parts = attn::detail::parse_entry(bytes, why);
  if (!parts && why.empty()) finding("parse_entry refused the bytes without saying why");
  const bool valid = parts && parts->key == key && parts->version == version;

  const std::filesystem::path path = f.cache->entry_path(key);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  std::optional<std::filesystem::path> found;
  try {
    found = f.cache->find(key);
  } catch (const std::exception& e) {
    finding(std::string("find threw: ") + e.what());
  }
  if (found.has_value() != valid) finding(valid ? "a good entry was not found" : "a bad entry was found");
  if (read_file(path) != bytes) finding("find changed the file");

  const auto listed = f.cache->entries();
  if (listed.size() != 1 || listed.front().path != path || listed.front().bytes != size) finding("entries() does not list the file as it is");
  if (parts && (listed.front().key != parts->key || listed.front().version != parts->version))
    finding("entries() names another key or version than the trailer");
  return 0;
}
