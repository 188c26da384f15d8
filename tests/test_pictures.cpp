// The pictures: a heatmap's cells carry the colour of their value, plots and graphs are real
// PNG files, bad input gives a clear error. PNGs are decoded with Cairo to look at pixels.
#define BOOST_TEST_MODULE pictures
#include <boost/test/unit_test.hpp>
#include <cairo.h>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <unistd.h>
#include "pictures/canvas.hpp"
#include "pictures/graph_picture.hpp"
#include "pictures/heatmap.hpp"
#include "pictures/line_plot.hpp"

namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("attn_pictures_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

struct decoded {
  cairo_surface_t* s;
  explicit decoded(const fs::path& p) : s(cairo_image_surface_create_from_png(p.c_str())) {}
  ~decoded() { cairo_surface_destroy(s); }
  bool ok() const { return cairo_surface_status(s) == CAIRO_STATUS_SUCCESS; }
  int width() const { return cairo_image_surface_get_width(s); }
  int height() const { return cairo_image_surface_get_height(s); }
  pictures::rgb at(int x, int y) const {
    const unsigned char* row = cairo_image_surface_get_data(s) + y * cairo_image_surface_get_stride(s);
    std::uint32_t px;
    std::memcpy(&px, row + 4 * x, 4);
    return {((px >> 16) & 255) / 255.0, ((px >> 8) & 255) / 255.0, (px & 255) / 255.0};
  }
};

bool close(pictures::rgb a, pictures::rgb b) {
  return std::abs(a.r - b.r) < 0.02 && std::abs(a.g - b.g) < 0.02 && std::abs(a.b - b.b) < 0.02;
}

}  // namespace

BOOST_AUTO_TEST_CASE(heatmap_cells_have_their_values_colour) {
  const pictures::heatmap_spec spec{.title = "t", .row_labels = {"a", "b"}, .col_labels = {"x", "y", "z"}, .lo = 0.0, .hi = 1.0};
  const std::vector<float> values = {0.0f, 0.5f, 1.0f, 0.25f, 0.75f, 0.1f};
  const fs::path p = scratch("heatmap.png");
  pictures::heatmap(p, values, spec);
  const decoded img(p);
  BOOST_REQUIRE(img.ok());
  const pictures::heatmap_layout l = pictures::layout(spec, 2, 3);
  BOOST_TEST(img.width() == l.width);
  BOOST_TEST(img.height() == l.height);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {  // a point inside the cell, away from its printed value
      const pictures::rgb got = img.at(static_cast<int>(l.left + j * l.cell + 4), static_cast<int>(l.top + i * l.cell + 4));
      BOOST_TEST(close(got, pictures::viridis(values[static_cast<std::size_t>(i * 3 + j)])), "cell " << i << "," << j);
    }
}

BOOST_AUTO_TEST_CASE(heatmap_rejects_labels_that_do_not_fit) {
  const std::vector<float> values(6, 0.5f);
  BOOST_CHECK_EXCEPTION(pictures::heatmap(scratch("bad.png"), values, {.title = "t", .row_labels = {"a"}, .col_labels = {"x"}}),
                        std::invalid_argument, [](const std::invalid_argument& e) {
                          return std::string(e.what()).find("6 values for 1 row labels × 1 column labels") != std::string::npos;
                        });
}

BOOST_AUTO_TEST_CASE(line_plot_writes_a_png_and_checks_log_axes) {
  const fs::path p = scratch("plot.png");
  pictures::line_plot(p, {.title = "t", .x_label = "x", .y_label = "y", .log_x = true, .log_y = true},
                      {{"a", {1, 2, 4}, {1, 2, 4}}, {"b", {1, 2, 4}, {1, 1, 1}, true}});
  const decoded img(p);
  BOOST_REQUIRE(img.ok());
  BOOST_TEST(img.width() == 760);
  BOOST_CHECK_THROW(pictures::line_plot(scratch("bad.png"), {.log_y = true}, {{"a", {1, 2}, {0, 1}}}), std::invalid_argument);
  BOOST_CHECK_THROW(pictures::line_plot(scratch("bad.png"), {}, {{"a", {1, 2}, {1}}}), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(unwritable_path_is_an_error) {
  const std::vector<float> values = {1.0f};
  BOOST_CHECK_THROW(pictures::heatmap("/nonexistent/dir/x.png", values, {.title = "t", .row_labels = {"a"}, .col_labels = {"b"}}),
                    std::runtime_error);
}

BOOST_AUTO_TEST_CASE(graphviz_graph_to_png) {
  const fs::path p = scratch("graph.png");
  pictures::graph_picture(p, "digraph g { a -> b; }");
  const decoded img(p);
  BOOST_REQUIRE(img.ok());
  BOOST_TEST(img.width() > 20);
  BOOST_CHECK_THROW(pictures::graph_picture(scratch("bad.png"), "this is not dot {"), std::invalid_argument);
}
