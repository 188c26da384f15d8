// The documents a user reads (README.md and docs/*.md) show only what exists:
// - every code block marked <!-- snippet: FILE NAME --> is, line for line, the region of FILE
//   between "// [snippet: NAME]" and "// [end snippet]" (indentation removed), so the documents
//   only show code that is built and tested;
// - every relative link leads to a file of the repository (and its #anchor to a heading there),
//   and every repository path or source file name they mention exists.
#define BOOST_TEST_MODULE readme_snippets
#include <boost/test/unit_test.hpp>
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using lines = std::vector<std::string>;

namespace {

const fs::path root = ATTN_SOURCE_DIR;

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

// README.md, then docs/*.md in name order.
std::vector<fs::path> documents() {
  std::vector<fs::path> docs;
  for (const auto& e : fs::directory_iterator(root / "docs"))
    if (e.path().extension() == ".md") docs.push_back(e.path());
  std::sort(docs.begin(), docs.end());
  docs.insert(docs.begin(), root / "README.md");
  return docs;
}

std::string shown(const fs::path& doc) { return fs::relative(doc, root).string(); }

// The lines of a document outside its fenced code blocks (blanked, so line numbers stay).
lines prose(const lines& doc) {
  lines out;
  bool in_code = false;
  for (const auto& l : doc) {
    const bool fence = l.find_first_not_of(' ') != std::string::npos && l.substr(l.find_first_not_of(' ')).starts_with("```");
    if (fence) in_code = !in_code;
    out.push_back(fence || in_code ? "" : l);
  }
  return out;
}

// A heading's anchor as GitHub makes it: lower case, spaces to '-', other ASCII punctuation
// (but '-' and '_') dropped, other characters kept.
std::string anchor_of(const std::string& heading) {
  std::string a;
  for (unsigned char c : heading) {
    if (c == ' ') a += '-';
    else if (c >= 0x80 || std::isalnum(c) || c == '-' || c == '_') a += static_cast<char>(std::tolower(c));
  }
  return a;
}

std::set<std::string> anchors(const fs::path& doc) {
  std::set<std::string> out;
  for (const auto& l : prose(read_lines(doc)))
    if (l.starts_with("#")) out.insert(anchor_of(l.substr(l.find_first_not_of('#') == std::string::npos ? l.size() : l.find_first_not_of('#') + 1)));
  return out;
}

// The repository's folders that documents name paths in (a path starting elsewhere, such as
// build/ or attnforge_output/, names something a build or a run makes).
const std::set<std::string> repository_folders = {"dsl", "generators", "runtime", "tuner", "tests", "bench",
                                                  "examples", "scripts", "cmake", "docs", ".ci"};

// Names of the repository's files, outside build folders and hidden folders (.ci excepted).
std::set<std::string> file_names() {
  std::set<std::string> names;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    const std::string name = it->path().filename().string();
    if (it->is_directory() && it.depth() == 0 && (name.starts_with("build") || (name.starts_with(".") && name != ".ci")))
      it.disable_recursion_pending();
    else if (it->is_regular_file())
      names.insert(name);
  }
  return names;
}

// A source file's name a document may mention without its folder.
bool source_file_name(const std::string& s) {
  static const std::regex name(R"([A-Za-z0-9_.-]+\.(hpp|cpp|py|sh|cmake|md|cu|in))");
  return std::regex_match(s, name);
}

}  // namespace

BOOST_AUTO_TEST_CASE(code_comes_from_built_files) {
  const std::regex marker(R"(<!-- snippet: (\S+) (\S+) -->)");
  int checked = 0;
  for (const fs::path& doc : documents()) {
    const lines text = read_lines(doc);
    for (std::size_t i = 0; i < text.size(); ++i) {
      std::smatch m;
      if (!std::regex_search(text[i], m, marker)) continue;
      BOOST_REQUIRE_MESSAGE(i + 1 < text.size() && text[i + 1].starts_with("```"),
                            shown(doc) << " line " << i + 1 << ": no code block after the marker");
      lines block;
      std::size_t j = i + 2;
      for (; j < text.size() && !text[j].starts_with("```"); ++j) block.push_back(text[j]);
      BOOST_TEST_CONTEXT(shown(doc) << " line " << i + 1 << ": " << m[1] << " " << m[2]) {
        BOOST_TEST(block == region(root / m[1].str(), m[2].str()), boost::test_tools::per_element());
      }
      ++checked;
      i = j;
    }
  }
  BOOST_TEST(checked >= 10);  // the README's intro (2), guide (3), paths and consumer (3), and the docs'
}

BOOST_AUTO_TEST_CASE(links_and_file_names_exist) {
  const std::set<std::string> names = file_names();
  const std::regex link(R"(\]\(([^)\s]+)\))");
  const std::regex code_span("`([^`]+)`");
  const std::regex path_in_text(R"((^|[^A-Za-z0-9_/.$~-])((?:dsl|generators|runtime|tuner|tests|bench|examples|scripts|cmake|docs|\.ci)/[A-Za-z0-9_./-]*[A-Za-z0-9_]))");
  const std::regex path_like(R"([A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*/?)");
  int links = 0, paths = 0;
  for (const fs::path& doc : documents()) {
    const lines text = prose(read_lines(doc));
    for (std::size_t i = 0; i < text.size(); ++i) {
      const std::string& l = text[i];
      BOOST_TEST_CONTEXT(shown(doc) << " line " << i + 1) {
        for (auto m = std::sregex_iterator(l.begin(), l.end(), link); m != std::sregex_iterator(); ++m) {
          const std::string target = (*m)[1];
          if (target.starts_with("http://") || target.starts_with("https://") || target.starts_with("mailto:")) continue;
          const std::string file = target.substr(0, target.find('#'));
          const fs::path linked = file.empty() ? doc : doc.parent_path() / file;
          BOOST_TEST(fs::exists(linked), "link to " << target << ": no such file");
          if (const auto hash = target.find('#'); hash != std::string::npos && fs::exists(linked) && linked.extension() == ".md")
            BOOST_TEST(anchors(linked).contains(target.substr(hash + 1)), "link to " << target << ": no such heading");
          ++links;
        }
        std::set<std::string> mentioned;
        for (auto m = std::sregex_iterator(l.begin(), l.end(), path_in_text); m != std::sregex_iterator(); ++m)
          mentioned.insert((*m)[2]);
        for (auto m = std::sregex_iterator(l.begin(), l.end(), code_span); m != std::sregex_iterator(); ++m) {
          std::string s = (*m)[1];
          if (!std::regex_match(s, path_like)) continue;
          if (s.ends_with("/")) s.pop_back();
          if (s.find('/') != std::string::npos) {
            if (repository_folders.contains(s.substr(0, s.find('/')))) mentioned.insert(s);
          } else if (source_file_name(s)) {
            BOOST_TEST(names.contains(s), "`" << s << "`: no file of that name in the repository");
            ++paths;
          }
        }
        for (const std::string& p : mentioned) {
          BOOST_TEST(fs::exists(root / p), p << ": no such file or folder in the repository");
          ++paths;
        }
      }
    }
  }
  BOOST_TEST(links >= 10);
  BOOST_TEST(paths >= 50);
}
