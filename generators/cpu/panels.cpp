#include "generators/cpu/panels.hpp"

namespace attn::gen {

using namespace Halide;

namespace {

// Reads of b(n, k, ...) become reads of panels(n % W, k, n / W, ...).
class read_panels : public Internal::IRMutator {
 public:
  read_panels(const Internal::Call* b, const Func& panels, int width) : b_(b), panels_(panels), width_(width) {}

 private:
  using Internal::IRMutator::visit;
  Expr visit(const Internal::Call* c) override {
    if (c->call_type != b_->call_type || c->name != b_->name) return Internal::IRMutator::visit(c);
    std::vector<Expr> args;
    for (const Expr& a : c->args) args.push_back(mutate(a));
    const Expr n = args.front();
    args.front() = n % width_;
    args.insert(args.begin() + 2, n / width_);
    return Internal::Call::make(panels_.function(), args, c->value_index);
  }
  const Internal::Call* b_;
  Func panels_;
  int width_;
};

}  // namespace

Func read_in_panels(Func consumer, const Internal::Call* read, int width, const Expr& last_column) {
  const Expr held = read;  // keeps the node alive while consumer's definition is rewritten
  Var lane("panel_lane"), depth("panel_depth"), tile("panel");
  std::vector<Var> at{lane, depth, tile};
  Expr column = tile * width + lane;
  if (last_column.defined()) column = min(column, last_column);
  std::vector<Expr> source{column, depth};
  for (std::size_t i = 2; i < read->args.size(); ++i) {
    at.emplace_back("panel_" + std::to_string(i));
    source.push_back(at.back());
  }
  // Unique, "$n" suffixes of the read Func's name dropped (as Halide names its own Funcs).
  Func panels(Internal::unique_name(read->name.substr(0, read->name.find('$')) + "_panels"));
  panels(at) = Internal::Call::make(read->type, read->name, source, read->call_type, read->func, read->value_index,
                                    read->image, read->param);
  read_panels reads(read, panels, width);
  consumer.function().mutate(&reads);
  return panels;
}

}  // namespace attn::gen
