// KT_HOST_DEVICE marks element-wise and reduction kernels written as plain
// functions over index ranges, so that the same source compiles for the host
// (called from ParallelFor, runtime/tensor/parallel_for.h) and, under nvcc,
// for the device. It expands to __host__ __device__ under nvcc and to
// nothing otherwise.
#ifndef KUBETRAIN_RUNTIME_TENSOR_KERNELS_HOST_DEVICE_H_
#define KUBETRAIN_RUNTIME_TENSOR_KERNELS_HOST_DEVICE_H_

#if defined(__CUDACC__)
#define KT_HOST_DEVICE __host__ __device__
#else
#define KT_HOST_DEVICE
#endif

#endif  // KUBETRAIN_RUNTIME_TENSOR_KERNELS_HOST_DEVICE_H_
