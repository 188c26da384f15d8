#pragma once
// attnforge's expression language: everything a researcher writes. Halide-free, header-only.
#include "cost.hpp"
#include "elementwise.hpp"
#include "expr.hpp"
#include "heads.hpp"
#include "linear.hpp"
#include "gather.hpp"
#include "masks.hpp"
#include "printer.hpp"
#include "score_mod.hpp"
#include "softmax.hpp"
#include "to_ir.hpp"
#include "variants.hpp"
