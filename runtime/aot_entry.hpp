#pragma once
// The public entry point of a kernel built ahead of time, as C source: the kernel's C function
// NAME checks its halide_buffer_t arguments against the kernel's tensors, then calls the Halide
// pipeline, compiled under the name aot_pipeline_name(NAME) with a user_context; NAME_error gives
// the message of the calling thread's last failed call. The fixed part is
// generators/aot/checked_call.c (after halide_buffer_layout.h and call_context.h), embedded in
// this library when it is built; the table of tensors and the two functions are generated here.
#include <string>
#include <vector>
#include "aot_signature.hpp"

namespace attn::detail {

// The Halide pipeline's name in the library: NAME_unchecked.
std::string aot_pipeline_name(const std::string& name);

// large_buffers: the target has Halide's large_buffers feature (64-bit offsets); cuda_registers > 0:
// the first call sets Halide's CUDA register limit to it where the program has not. Throws
// argument_error for a kernel with more distinct dim names than the checks keep (64).
std::string aot_entry_source(const std::string& name, const std::vector<aot_tensor>& tensors, bool large_buffers, int cuda_registers = 0);

// The declarations the generated header adds for the entry point (after Halide's).
std::string aot_entry_declarations(const std::string& name);

}  // namespace attn::detail
