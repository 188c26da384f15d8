#pragma once
// Which views share memory. The rule (README, "Errors and limits"):
//   - an output (or the weights) must not overlap itself: no stride 0 on an axis of size > 1, and,
//     sorted by stride, each axis's stride exceeds the reach of the axes inside it;
//   - the output and the weights must not overlap each other;
//   - an output may overlap inputs: the kernel then computes into a temporary and copies.
// Overlap between two views is judged by address range (conservative: two views whose ranges
// interleave without sharing an element count as overlapping; that only costs a copy).
#include <string>
#include "tensor.hpp"

namespace attn::detail {

// Do the byte ranges [first element, last element] of a and b intersect?
bool may_overlap(const tensor_view& a, const tensor_view& b);

// argument_error naming `who` when two elements of v could share an address.
void check_no_self_overlap(const std::string& who, const tensor_view& v);

}  // namespace attn::detail
