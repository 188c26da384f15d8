// The GPU's fp32 FMA peak, measured (not the data sheet's): every thread runs 8 independent chains
// of dependent FMAs, enough blocks to fill every SM several times over; CUDA events time the
// kernel; 2 FLOPs per FMA. Prints "fma_peak_tflops,<best of 5>". Built and run by
// scripts/gpu_bench.sh with the CUDA toolkit's nvcc on the machine with the GPU.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void fmas(float* out, int iterations, float a, float b) {
  float x[8];
  for (int c = 0; c < 8; ++c) x[c] = threadIdx.x * 1e-7f + c;
  for (int i = 0; i < iterations; ++i)
#pragma unroll
    for (int c = 0; c < 8; ++c) x[c] = fmaf(x[c], a, b);
  float s = 0;
  for (int c = 0; c < 8; ++c) s += x[c];
  if (s == 12345.0f) out[0] = s;  // keeps the chains alive; never true in practice
}

int main() {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) {
    std::fprintf(stderr, "no CUDA device\n");
    return 1;
  }
  float* out = nullptr;
  cudaMalloc(&out, sizeof(float));
  const int threads = 256, blocks = p.multiProcessorCount * 16, iterations = 1 << 16;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  fmas<<<blocks, threads>>>(out, 1024, 0.999f, 1e-3f);  // warm-up, clocks up
  double best = 0;
  for (int r = 0; r < 5; ++r) {
    cudaEventRecord(start);
    fmas<<<blocks, threads>>>(out, iterations, 0.999f, 1e-3f);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    const double flops = 2.0 * 8 * double(iterations) * threads * blocks;
    if (flops / (ms * 1e9) > best) best = flops / (ms * 1e9);
  }
  std::printf("device,%s,%d SMs\nfma_peak_tflops,%.2f\n", p.name, p.multiProcessorCount, best);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
