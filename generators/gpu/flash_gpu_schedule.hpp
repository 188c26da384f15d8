#pragma once
// The GPU schedule of the fused attention pipeline (the same Funcs as the CPU's,
// flash_algorithm.hpp): one GPU block per (batch item, lead dims such as heads, query tile);
// inside a block a serial loop over key tiles, each step's Funcs computed by the block's threads,
// Halide putting the barriers between them. Masks skip work exactly as on the CPU: skipped key
// tiles are never visited (the RDom's bounds). Three variants (flash_gpu_variant): a thread per
// query row (per_thread); each step's tiles in shared memory, an element per thread
// (shared_memory); and FlashAttention-2's register tiles (register_tiles, the default where V's
// width is known): each thread accumulates a few rows × columns of Q·Kᵀ and of P·V in registers,
// K's and V's tiles staged once per block in shared memory, the row reductions and the packed
// online-softmax state in shared memory between them.
//
// Partial key tiles (the last tile of a row when T is not a multiple of kv_tile; causal and
// banded masks) stage nothing in the shared_memory variant and compute whole multiples of its
// thread count (the .cpp says why: PoCL gave wrong results when a tile had fewer keys than
// threads). Every variant matches the reference on PoCL (test_opencl) and on NVIDIA GPUs
// (test_cuda).
//
// The parameters are plain data, printable and parseable through their table (parameter_table.hpp:
// the tuner searches them, the tuning database stores them), with a default per shape that fits
// CUDA's 48 KiB of static shared memory.
#include <cstdint>
#include <string>
#include <vector>
#include <Halide.h>
#include "generators/parameter_table.hpp"

namespace attn::gen {

struct flash_funcs;

// Registers a thread of attnforge's CUDA kernels may use. Halide's CUDA runtime loads a module with
// at most 64 unless the environment variable HL_CUDA_JIT_MAX_REGISTERS says otherwise; the register
// tiles need more (the loop bounds of masked tiles stay live beside them, and spill at 64), so
// attnforge's kernels set the variable to this, where the program has not, before their first
// call (runtime/compiled_kernel.cpp, generators/aot/checked_call.c). Blocks of up to 256 threads
// then still fit twice on an SM (65536 registers); test_ptx_spills checks both.
inline constexpr int cuda_registers_per_thread = 128;

// Where a block keeps a query tile's work (the text's shared=0, 1 or 2).
enum class flash_gpu_variant {
  // One thread per query row, q_tile threads per block, every per-tile Func in the thread's own
  // (private) memory: no shared memory and no barriers (threads, stage_k and stage_v then unused,
  // except that threads is still the lane count of the row reductions). Slower on a GPU, but
  // simple: OpenCL on a CPU (PoCL) compiles it quickly, where the shared variant takes minutes
  // per kernel.
  per_thread = 0,
  // The block's threads share each step's tiles in shared memory (the top of this file).
  shared_memory = 1,
  // As shared_memory, with FlashAttention-2's register tiles: a block of threads × (q_tile /
  // thread_rows) threads; each thread computes thread_rows rows × kv_tile / threads keys of a key
  // tile's scores and thread_rows rows × Dv / threads columns of its P·V in registers, the loop
  // over the contraction (Dk, the tile's keys) outside them, so that every value read from shared
  // memory feeds several FMAs. The state is packed (a row's max and sum once per thread, not per
  // column), its accumulators the thread's columns; the scores and probabilities stay per tile in
  // shared memory, where the row reductions read them.
  register_tiles = 2,
};

struct flash_gpu_schedule {
  int q_tile = 32;   // query rows per block: the block's threads in y (per_thread: its threads)
  int kv_tile = 32;  // keys per online-softmax step (a multiple of threads)
  int threads = 8;   // the block's threads in x: across a tile's keys and across V's width
  bool stage_k = true;  // copy each key tile of Kᵀ into shared memory before Q·Kᵀ reads it
  bool stage_v = true;  // copy each key tile of V into shared memory before P·V reads it
  flash_gpu_variant shared = flash_gpu_variant::per_thread;
  // per_thread with V's width known when compiling: unroll the loops over V's width (the row's
  // accumulator and each tile's P·V in registers rather than in local memory) and over a tile's keys.
  bool unroll = false;
  int thread_rows = 4;  // register_tiles: query rows per thread (q_tile a multiple of it)
  bool stage_q = true;  // register_tiles: copy the block's rows of Q into shared memory once, rows innermost

  // Each parameter's name, range and place in the text; kv_tile a multiple of threads, at most
  // 1024 threads per block (threads × q_tile).
  static const parameter_table<flash_gpu_schedule>& parameters();

  bool operator==(const flash_gpu_schedule&) const = default;
};

// "q_tile=32 kv_tile=32 threads=8 stage_k=1 stage_v=1 shared=0 unroll=0 thread_rows=4" (flags and the
// variant as numbers)
std::string to_string(const flash_gpu_schedule& s);

// Reads the text above; missing parameters keep the values of `base`. Throws std::invalid_argument
// naming the parameter, the value given and what is allowed (parameter_table.hpp).
flash_gpu_schedule parse_flash_gpu_schedule(const std::string& text, flash_gpu_schedule base);

// The default for a V of width dv (0: not known when compiling): register tiles (the .cpp gives
// their parameters) sized so that a block's shared memory fits; the per-thread variant, rolled,
// where the width is not known.
flash_gpu_schedule default_flash_gpu_schedule(std::int64_t dv);

// Shared memory one block uses, estimated in bytes for V's width dv and a contraction (Q·Kᵀ) of
// depth dk: state (max, sum, acc), the score, probability and P·V tiles, the lanes of the two
// row reductions and the staged tiles of Kᵀ and V (and, with register tiles, of Q), as the variant
// keeps them.
std::int64_t shared_bytes(const flash_gpu_schedule& s, std::int64_t dv, std::int64_t dk);

// As banded() for the CPU: key tiles about a quarter of a band of kept keys, so most visited tiles are full.
flash_gpu_schedule banded(flash_gpu_schedule s, std::int64_t band);

// Applies the schedule to the fused Funcs (lowered with q_tile, kv_tile and vector = threads).
// `params` are the pipeline's inputs (V may be one of them: its tile is staged through a wrapper).
void schedule_flash_gpu(flash_funcs& f, const std::vector<Halide::ImageParam>& params, const flash_gpu_schedule& s,
                        const Halide::Target& target);

}  // namespace attn::gen
