#include "graph_picture.hpp"
#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>
#include <memory>
#include <stdexcept>

namespace pictures {

void graph_picture(const std::filesystem::path& path, const std::string& dot) {
  const std::unique_ptr<GVC_t, decltype(&gvFreeContext)> gvc(gvContext(), &gvFreeContext);
  const std::unique_ptr<Agraph_t, decltype(&agclose)> graph(agmemread(dot.c_str()), &agclose);
  if (!graph) throw std::invalid_argument("graph_picture: Graphviz could not parse the graph for " + path.string());
  if (gvLayout(gvc.get(), graph.get(), "dot") != 0) throw std::runtime_error("graph_picture: Graphviz layout failed");
  const int rendered = gvRenderFilename(gvc.get(), graph.get(), "png", path.c_str());
  gvFreeLayout(gvc.get(), graph.get());
  if (rendered != 0) throw std::runtime_error("graph_picture: Graphviz could not write " + path.string());
}

}  // namespace pictures
