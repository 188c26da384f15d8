// A shared object posing as a disk cache entry: loading it runs its constructor, which creates
// the file named by $ATTN_TEST_FORGED_MARKER. test_disk_cache plants it in folders the cache
// must never load code from, and checks that the file never appears.
#include <cstdio>
#include <cstdlib>

namespace {

__attribute__((constructor)) void announce_loading() {
  if (const char* marker = std::getenv("ATTN_TEST_FORGED_MARKER"))
    if (std::FILE* f = std::fopen(marker, "w")) std::fclose(f);
}

}  // namespace
