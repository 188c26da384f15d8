#pragma once
// attnforge's expression language: everything a researcher writes. Halide-free, header-only.
// expr.hpp and to_ir.hpp first: a shape error is reported in them (shape_of, to_ir), and the
// compiler's "In file included from" trace before it is then one step long.
#include "expr.hpp"
#include "to_ir.hpp"
#include "cost.hpp"
#include "elementwise.hpp"
#include "heads.hpp"
#include "linear.hpp"
#include "gather.hpp"
#include "gradient.hpp"
#include "attention_gym.hpp"
#include "masks.hpp"
#include "printer.hpp"
#include "score_mod.hpp"
#include "softmax.hpp"
#include "variants.hpp"
