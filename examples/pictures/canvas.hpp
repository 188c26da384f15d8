#pragma once
// A white drawing surface with text, lines and boxes, saved as PNG; Cairo does the drawing
// and the PNG encoding. The pictures of the examples are drawn on it.
#include <filesystem>
#include <memory>
#include <string>

typedef struct _cairo cairo_t;
typedef struct _cairo_surface cairo_surface_t;

namespace pictures {

struct rgb {
  double r, g, b;
};

enum class align { left, center, right };

class canvas {
 public:
  canvas(int width, int height);
  ~canvas();
  canvas(const canvas&) = delete;
  canvas& operator=(const canvas&) = delete;

  int width() const { return width_; }
  int height() const { return height_; }

  void fill_rect(double x, double y, double w, double h, rgb color);
  void stroke_rect(double x, double y, double w, double h, rgb color, double line_width = 1.0);
  void line(double x0, double y0, double x1, double y1, rgb color, double line_width = 1.0, bool dashed = false);
  // Text whose baseline is vertically centred on y; rotated a quarter turn left when vertical.
  void text(const std::string& s, double x, double y, double size, align a = align::left, rgb color = {0, 0, 0},
            bool bold = false, bool vertical = false);
  double text_width(const std::string& s, double size, bool bold = false);

  // Writes the PNG; throws std::runtime_error naming the path if Cairo cannot.
  void save_png(const std::filesystem::path& path) const;

 private:
  int width_, height_;
  cairo_surface_t* surface_;
  cairo_t* cr_;
};

// Perceptually uniform colours for values in [0, 1] (the viridis map, sampled every 0.1).
rgb viridis(double t);

}  // namespace pictures
