// KT_CPU_CLONES compiles a host function for AVX-512 and AVX2+FMA as well as
// the baseline x86-64; the loader picks the best the CPU has (GCC function
// multi-versioning). For the launch wrappers of host/device kernels
// (host_device.h): the kernel, inlined into each clone, is vectorised for
// each. Expands to nothing elsewhere.
#ifndef KUBETRAIN_RUNTIME_TENSOR_KERNELS_CPU_CLONES_H_
#define KUBETRAIN_RUNTIME_TENSOR_KERNELS_CPU_CLONES_H_

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define KT_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define KT_CPU_CLONES
#endif

#endif  // KUBETRAIN_RUNTIME_TENSOR_KERNELS_CPU_CLONES_H_
