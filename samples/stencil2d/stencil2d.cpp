// stencil2d: a 2-D halo-exchange stencil with load imbalance in one region of ranks.
//
// A fixed NxN grid is split over a 2-D process grid (MPI_Dims_create; strong scaling).  Each step
// exchanges halos with the four neighbours (MPI_Sendrecv) and relaxes the block.  The cells of a
// "hot spot" (the upper-left corner of the domain, rows and columns [0, N/4)) carry extra chemistry:
// CHEM_STEPS sub-steps per cell.  The hot spot lies in the block of the corner rank at any scale up to
// 16 ranks, so its cost does not shrink like the rest of the work; the neighbours wait for it in the
// halo exchange and everybody in the MPI_Allreduce of the residual.
// Root cause: the loop nest in Grid::react_hotspot.
//
// usage: stencil2d [steps]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr int N = 1024;
constexpr int CHEM_STEPS = 100;

class Grid {
public:
    Grid(MPI_Comm cart) : cart_(cart)
    {
        int dims[2], periods[2], coords[2];
        MPI_Cart_get(cart, 2, dims, periods, coords);
        rows_ = N / dims[0];
        cols_ = N / dims[1];
        row0_ = coords[0] * rows_;
        col0_ = coords[1] * cols_;
        MPI_Cart_shift(cart, 0, 1, &up_, &down_);
        MPI_Cart_shift(cart, 1, 1, &left_, &right_);
        u_.assign((rows_ + 2) * (cols_ + 2), 0.0);
        v_ = u_;
        for (int i = 1; i <= rows_; i++)
            for (int j = 1; j <= cols_; j++)
                at(u_, i, j) = static_cast<double>((row0_ + i + 3 * (col0_ + j)) % 19) / 19.0;
    }

    void exchange_halos()
    {
        std::vector<double> out(rows_), in(rows_);
        // rows are contiguous
        MPI_Sendrecv(&at(u_, 1, 1), cols_, MPI_DOUBLE, up_, 0, &at(u_, rows_ + 1, 1), cols_,
                     MPI_DOUBLE, down_, 0, cart_, MPI_STATUS_IGNORE);
        MPI_Sendrecv(&at(u_, rows_, 1), cols_, MPI_DOUBLE, down_, 1, &at(u_, 0, 1), cols_,
                     MPI_DOUBLE, up_, 1, cart_, MPI_STATUS_IGNORE);
        // columns are packed
        for (int i = 0; i < rows_; i++)
            out[i] = at(u_, i + 1, 1);
        MPI_Sendrecv(out.data(), rows_, MPI_DOUBLE, left_, 2, in.data(), rows_, MPI_DOUBLE, right_, 2,
                     cart_, MPI_STATUS_IGNORE);
        if (right_ != MPI_PROC_NULL)
            for (int i = 0; i < rows_; i++)
                at(u_, i + 1, cols_ + 1) = in[i];
        for (int i = 0; i < rows_; i++)
            out[i] = at(u_, i + 1, cols_);
        MPI_Sendrecv(out.data(), rows_, MPI_DOUBLE, right_, 3, in.data(), rows_, MPI_DOUBLE, left_, 3,
                     cart_, MPI_STATUS_IGNORE);
        if (left_ != MPI_PROC_NULL)
            for (int i = 0; i < rows_; i++)
                at(u_, i + 1, 0) = in[i];
    }

    double relax()
    {
        double change = 0.0;
        for (int i = 1; i <= rows_; i++)
            for (int j = 1; j <= cols_; j++) {
                double nv = 0.2 * (at(u_, i, j) + at(u_, i - 1, j) + at(u_, i + 1, j)
                                   + at(u_, i, j - 1) + at(u_, i, j + 1));
                change += (nv - at(u_, i, j)) * (nv - at(u_, i, j));
                at(v_, i, j) = nv;
            }
        u_.swap(v_);
        return change;
    }

    // Extra chemistry on the cells of this block that lie in the hot spot.
    void react_hotspot()
    {
        int i_end = std::min(rows_, N / 4 - row0_), j_end = std::min(cols_, N / 4 - col0_);
        for (int i = 1; i <= i_end; i++)
            for (int j = 1; j <= j_end; j++)
                for (int s = 0; s < CHEM_STEPS; s++)
                    at(u_, i, j) = at(u_, i, j) * (1.0 - 0.01 * at(u_, i, j)) + 0.001 * s;
    }

    double sum() const
    {
        double s = 0.0;
        for (int i = 1; i <= rows_; i++)
            for (int j = 1; j <= cols_; j++)
                s += at(u_, i, j);
        return s;
    }

private:
    double &at(std::vector<double> &a, int i, int j) { return a[i * (cols_ + 2) + j]; }
    double at(const std::vector<double> &a, int i, int j) const { return a[i * (cols_ + 2) + j]; }

    MPI_Comm cart_;
    int rows_, cols_, row0_, col0_, up_, down_, left_, right_;
    std::vector<double> u_, v_;
};

}  // namespace

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int steps = argc > 1 ? std::atoi(argv[1]) : 20;
    int dims[2] = {0, 0}, periods[2] = {0, 0};
    MPI_Dims_create(size, 2, dims);
    MPI_Comm cart;
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
    {
        Grid grid(cart);
        double residual = 0.0;
        for (int step = 0; step < steps; step++) {
            grid.exchange_halos();
            if (!std::getenv("SAMPLE_FIXED"))   // SAMPLE_FIXED=1: the fixed program
                grid.react_hotspot();
            double change = grid.relax();
            MPI_Allreduce(&change, &residual, 1, MPI_DOUBLE, MPI_SUM, cart);
        }
        double local = grid.sum(), total;
        MPI_Reduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, 0, cart);
        if (rank == 0)
            std::printf("stencil2d: ranks=%d grid=%dx%d steps=%d residual=%.6e sum=%.6e\n", size,
                        dims[0], dims[1], steps, residual, total);
    }
    MPI_Comm_free(&cart);
    MPI_Finalize();
    return 0;
}
