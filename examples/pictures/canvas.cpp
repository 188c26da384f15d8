#include "canvas.hpp"
#include <cairo.h>
#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>

namespace pictures {

canvas::canvas(int width, int height)
    : width_(width), height_(height),
      surface_(cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height)),
      cr_(cairo_create(surface_)) {
  if (cairo_status(cr_) != CAIRO_STATUS_SUCCESS) throw std::runtime_error("canvas: Cairo could not create a surface");
  fill_rect(0, 0, width, height, {1, 1, 1});
}

canvas::~canvas() {
  cairo_destroy(cr_);
  cairo_surface_destroy(surface_);
}

void canvas::fill_rect(double x, double y, double w, double h, rgb c) {
  cairo_set_source_rgb(cr_, c.r, c.g, c.b);
  cairo_rectangle(cr_, x, y, w, h);
  cairo_fill(cr_);
}

void canvas::stroke_rect(double x, double y, double w, double h, rgb c, double line_width) {
  cairo_set_source_rgb(cr_, c.r, c.g, c.b);
  cairo_set_line_width(cr_, line_width);
  cairo_rectangle(cr_, x, y, w, h);
  cairo_stroke(cr_);
}

void canvas::line(double x0, double y0, double x1, double y1, rgb c, double line_width, bool dashed) {
  const double dash[] = {6.0, 4.0};
  cairo_set_dash(cr_, dash, dashed ? 2 : 0, 0);
  cairo_set_source_rgb(cr_, c.r, c.g, c.b);
  cairo_set_line_width(cr_, line_width);
  cairo_move_to(cr_, x0, y0);
  cairo_line_to(cr_, x1, y1);
  cairo_stroke(cr_);
  cairo_set_dash(cr_, nullptr, 0, 0);
}

static void select_font(cairo_t* cr, double size, bool bold) {
  cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
}

double canvas::text_width(const std::string& s, double size, bool bold) {
  select_font(cr_, size, bold);
  cairo_text_extents_t e;
  cairo_text_extents(cr_, s.c_str(), &e);
  return e.x_advance;
}

void canvas::text(const std::string& s, double x, double y, double size, align a, rgb c, bool bold, bool vertical) {
  const double w = text_width(s, size, bold);
  const double shift = a == align::left ? 0 : a == align::center ? -w / 2 : -w;
  cairo_save(cr_);
  cairo_translate(cr_, x, y);
  if (vertical) cairo_rotate(cr_, -M_PI / 2);
  cairo_set_source_rgb(cr_, c.r, c.g, c.b);
  cairo_move_to(cr_, shift, 0.35 * size);
  cairo_show_text(cr_, s.c_str());
  cairo_restore(cr_);
}

void canvas::save_png(const std::filesystem::path& path) const {
  cairo_surface_flush(surface_);
  if (cairo_surface_write_to_png(surface_, path.c_str()) != CAIRO_STATUS_SUCCESS)
    throw std::runtime_error("could not write the picture " + path.string());
}

rgb viridis(double t) {
  static constexpr std::array<rgb, 11> stops{{{0.267, 0.004, 0.329},
                                               {0.282, 0.141, 0.459},
                                               {0.255, 0.267, 0.529},
                                               {0.208, 0.373, 0.553},
                                               {0.165, 0.471, 0.557},
                                               {0.129, 0.569, 0.549},
                                               {0.133, 0.659, 0.518},
                                               {0.267, 0.749, 0.439},
                                               {0.478, 0.820, 0.318},
                                               {0.741, 0.875, 0.149},
                                               {0.992, 0.906, 0.145}}};
  t = std::clamp(std::isfinite(t) ? t : 0.0, 0.0, 1.0) * (stops.size() - 1);
  const std::size_t i = std::min<std::size_t>(static_cast<std::size_t>(t), stops.size() - 2);
  const double f = t - static_cast<double>(i);
  const rgb a = stops[i], b = stops[i + 1];
  return {a.r + f * (b.r - a.r), a.g + f * (b.g - a.g), a.b + f * (b.b - a.b)};
}

}  // namespace pictures
