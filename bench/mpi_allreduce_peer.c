/* The OpenMPI side of kubetrain_allreduce_bench: MPI_Allreduce (sum, float)
 * of each size given in MiB, timed after a warm-up, bracketed by barriers.
 * Rank 0 prints "<bytes> <seconds per allreduce>" per size. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (int a = 1; a < argc; ++a) {
    const long bytes = (long)(atof(argv[a]) * 1048576.0);
    const long n = bytes / 4;
    float* buf = malloc((size_t)n * sizeof(float));
    for (long i = 0; i < n; ++i) buf[i] = 1.0f;
    /* About 1 s of work per size, at least 3 runs. */
    int iters = (int)(2e9 / (double)bytes);
    if (iters < 3) iters = 3;
    if (iters > 50) iters = 50;
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) {
      MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const double t = (MPI_Wtime() - t0) / iters;
    if (rank == 0) printf("%ld %.9f\n", n * 4, t);
    fflush(stdout);
    free(buf);
  }
  MPI_Finalize();
  return 0;
}
