// PSG test case (C++): virtual functions, templates and recursion around MPI.
#include <mpi.h>
#include <cstdio>
#include <vector>

template <typename T> MPI_Datatype mpi_type();
template <> MPI_Datatype mpi_type<double>() { return MPI_DOUBLE; }
template <> MPI_Datatype mpi_type<int>() { return MPI_INT; }

template <typename T>
T ring_sum(T value, int rank, int size) {           // a template with MPI inside
    T total = value;
    for (int hop = 1; hop < size; ++hop) {
        T got;
        MPI_Sendrecv(&value, 1, mpi_type<T>(), (rank + 1) % size, 0,
                     &got, 1, mpi_type<T>(), (rank + size - 1) % size, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        total += got;
        value = got;
    }
    return total;
}

struct Solver {
    virtual ~Solver() {}
    virtual double step(double x) = 0;
};

struct LocalSolver : Solver {
    double step(double x) override {
        for (int i = 0; i < 100; ++i)
            x = x * 0.99 + 1.0;
        return x;
    }
};

struct GlobalSolver : Solver {
    double step(double x) override {
        double y;
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        return y;
    }
};

static int depth_barrier(int n) {                  // recursion reaching MPI
    if (n == 0) {
        MPI_Barrier(MPI_COMM_WORLD);
        return 0;
    }
    return 1 + depth_barrier(n - 1);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    LocalSolver local;
    GlobalSolver global;
    Solver *solvers[2] = {&local, &global};
    double x = rank;
    for (int it = 0; it < 4; ++it)
        x = solvers[it % 2]->step(x);
    double d = ring_sum<double>(x, rank, size);
    int n = ring_sum<int>(rank, rank, size) + depth_barrier(2);
    if (rank == 0)
        std::printf("d=%g n=%d\n", d, n);
    MPI_Finalize();
    return 0;
}
