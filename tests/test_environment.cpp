// Counts and sizes from environment variables (runtime/environment.hpp): the one parser behind
// ATTN_KERNEL_CACHE_LIMIT, ATTN_SCRATCH_CACHE, ATTN_MEMORY_BUDGET and ATTN_CACHE_SIZE_LIMIT.
// A value that is not a number >= 0 is reported and the default used: "-1" never means "no limit".
#define BOOST_TEST_MODULE environment
#include <boost/test/unit_test.hpp>

#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include "runtime/environment.hpp"
#include "runtime/limits.hpp"

using attn::detail::number_from_environment;
using attn::detail::parse_quantity;
using attn::detail::quantity;

BOOST_AUTO_TEST_CASE(whole_numbers_and_byte_suffixes) {
  BOOST_TEST(parse_quantity("0", quantity::count).value() == 0u);
  BOOST_TEST(parse_quantity("128", quantity::count).value() == 128u);
  BOOST_TEST(parse_quantity("9223372036854775807", quantity::count).value() == 9223372036854775807ull);
  BOOST_TEST(parse_quantity("512K", quantity::bytes).value() == 512u << 10);
  BOOST_TEST(parse_quantity("3M", quantity::bytes).value() == 3u << 20);
  BOOST_TEST(parse_quantity("2G", quantity::bytes).value() == std::uint64_t(2) << 30);
}

BOOST_AUTO_TEST_CASE(anything_else_is_not_a_quantity) {
  for (const char* bad : {"", "-1", "+1", " 1", "1 ", "1.5", "lots", "0x10", "1e3", "9223372036854775808",
                          "18446744073709551615", "18446744073709551616", "99999999999999999999"})
    BOOST_TEST(!parse_quantity(bad, quantity::bytes).has_value(), bad);
  BOOST_TEST(!parse_quantity("4K", quantity::count).has_value());  // counts take no unit
  BOOST_TEST(!parse_quantity("4k", quantity::bytes).has_value());
  BOOST_TEST(!parse_quantity("4KB", quantity::bytes).has_value());
  BOOST_TEST(!parse_quantity("9999999999G", quantity::bytes).has_value());  // past 2^63 bytes
}

// What number_from_environment writes to stderr while `f` runs.
template <class F>
std::string stderr_of(F f) {
  std::fflush(stderr);
  const int saved = dup(2);
  char name[] = "/tmp/attn_env_stderr_XXXXXX";
  const int fd = mkstemp(name);
  dup2(fd, 2);
  f();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(fd);
  std::ifstream in(name);
  std::ostringstream s;
  s << in.rdbuf();
  std::remove(name);
  return s.str();
}

BOOST_AUTO_TEST_CASE(a_bad_value_is_reported_once_and_the_default_used) {
  setenv("ATTN_TEST_LIMIT", "-1", 1);
  const std::string said = stderr_of([] {
    BOOST_TEST(!number_from_environment("ATTN_TEST_LIMIT", quantity::count).has_value());
    BOOST_TEST(!number_from_environment("ATTN_TEST_LIMIT", quantity::count).has_value());
  });
  BOOST_TEST(said == "attnforge: ATTN_TEST_LIMIT='-1' is not a count (a whole number >= 0); the default is used\n");
  setenv("ATTN_TEST_LIMIT", "64", 1);
  BOOST_TEST(number_from_environment("ATTN_TEST_LIMIT", quantity::count).value() == 64u);
  unsetenv("ATTN_TEST_LIMIT");
  BOOST_TEST(!number_from_environment("ATTN_TEST_LIMIT", quantity::count).has_value());
}

// The process's limits are read from these variables at first use: set before anything ran.
struct bad_limits {
  bad_limits() {
    setenv("ATTN_KERNEL_CACHE_LIMIT", "-1", 1);
    setenv("ATTN_SCRATCH_CACHE", "-1", 1);
  }
};
BOOST_TEST_GLOBAL_FIXTURE(bad_limits);

BOOST_AUTO_TEST_CASE(minus_one_is_not_unlimited) {
  BOOST_TEST(attn::kernel_cache_limit() == 128u);
  BOOST_TEST(attn::scratch_cache_limit() == std::size_t(512) << 20);
}
