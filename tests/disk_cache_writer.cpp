// A second process for test_disk_cache: compiles (or loads) the test kernel through the disk
// cache named by ATTN_CACHE_DIR and writes its output's bytes to argv[1].
#include <cstdio>
#include <fstream>
#include "support/disk_cache_kernel.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: disk_cache_writer OUTPUT_FILE\n");
    return 2;
  }
  const std::vector<float> out = disk_cache_test::run();
  std::ofstream(argv[1], std::ios::binary).write(reinterpret_cast<const char*>(out.data()),
                                                 static_cast<std::streamsize>(out.size() * sizeof(float)));
  return 0;
}
