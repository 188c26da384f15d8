// Every code block of README.md marked <!-- snippet: FILE NAME --> must be, line for line, the
// region of FILE between "// [snippet: NAME]" and "// [end snippet]" (indentation removed), so
// the README only shows code that is built and tested.
#define BOOST_TEST_MODULE readme_snippets
#include <boost/test/unit_test.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using lines = std::vector<std::string>;

namespace {

lines read_lines(const fs::path& p) {
  std::ifstream in(p);
  BOOST_REQUIRE_MESSAGE(in, "cannot read " << p);
  lines out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

lines dedent(lines ls) {
  std::size_t common = std::string::npos;
  for (const auto& l : ls)
    if (l.find_first_not_of(' ') != std::string::npos) common = std::min(common, l.find_first_not_of(' '));
  for (auto& l : ls) l = l.size() >= common ? l.substr(common == std::string::npos ? 0 : common) : "";
  return ls;
}

lines region(const fs::path& file, const std::string& name) {
  const lines ls = read_lines(file);
  auto begin = std::find_if(ls.begin(), ls.end(), [&](const std::string& l) { return l.ends_with("// [snippet: " + name + "]"); });
  BOOST_REQUIRE_MESSAGE(begin != ls.end(), file << " has no snippet '" << name << "'");
  auto end = std::find_if(begin, ls.end(), [](const std::string& l) { return l.ends_with("// [end snippet]"); });
  BOOST_REQUIRE_MESSAGE(end != ls.end(), file << ": snippet '" << name << "' is not closed");
  return dedent(lines(begin + 1, end));
}

}  // namespace

BOOST_AUTO_TEST_CASE(readme_code_comes_from_built_files) {
  const fs::path root = ATTN_SOURCE_DIR;
  const lines readme = read_lines(root / "README.md");
  const std::regex marker(R"(<!-- snippet: (\S+) (\S+) -->)");
  int checked = 0;
  for (std::size_t i = 0; i < readme.size(); ++i) {
    std::smatch m;
    if (!std::regex_search(readme[i], m, marker)) continue;
    BOOST_REQUIRE_MESSAGE(i + 1 < readme.size() && readme[i + 1].starts_with("```"), "README line " << i + 1 << ": no code block after the marker");
    lines block;
    std::size_t j = i + 2;
    for (; j < readme.size() && !readme[j].starts_with("```"); ++j) block.push_back(readme[j]);
    BOOST_TEST_CONTEXT("README line " << i + 1 << ": " << m[1] << " " << m[2]) {
      BOOST_TEST(block == region(root / m[1].str(), m[2].str()), boost::test_tools::per_element());
    }
    ++checked;
    i = j;
  }
  BOOST_TEST(checked >= 5);  // the intro (2) and the guide (3)
}
