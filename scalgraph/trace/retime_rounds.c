/* The re-timing's anchor rounds (scalgraph/trace/retime.py, `_rounds_numpy`) in C: the same
 * arithmetic, one anchor at a time instead of one numpy round per anchor of every rank.
 *
 * An anchor's new time depends only on anchors solved before it (its rank's previous anchor, its
 * call's entry anchor, and its partner group's latest partner, final once the group has no partner
 * left to place), so any order that respects those dependences gives the same values bit for bit:
 *     new[k] = max(max(new[entpos[k]] + par[k][0] + par[k][1], gval[group[k]] + par[k][2]),
 *                  new[k - 1] + par[k][3])
 * with numpy's maximum (a NaN operand wins).  Built without floating-point contraction (no fused
 * multiply-add) so each sum rounds as numpy's does.  Built at first use by retime_native.py. */
#include <stdint.h>

static inline double np_max(double a, double b)
{
    /* numpy's scalar maximum: the first operand when it is NaN or not below the second */
    return (a >= b || a != a) ? a : b;
}

/* Anchors 0..na-1; rank r's anchors run from first[r] (solved already) to first[r + 1] - 1; a rank
 * stops at an anchor whose group has a partner left (group ng + 1 never empties: it marks each
 * rank's end).  Partners of anchor k are ps_group/ps_off[e_lo[k] .. e_lo[k] + e_len[k] - 1].
 * Returns the number of anchors left unsolved (0, or a cycle of dependences). */
int64_t sg_retime_rounds(int64_t nranks, const int64_t *first, int64_t todo, double *new_a,
                         const int64_t *group, const double *par, const int64_t *entpos,
                         const int64_t *e_lo, const int64_t *e_len, const double *ps_off,
                         const int64_t *ps_group, int64_t *remaining, double *gval, int64_t *ptr)
{
    for (int64_t r = 0; r < nranks; r++) {
        int64_t k = first[r];
        for (int64_t i = e_lo[k]; i < e_lo[k] + e_len[k]; i++) {
            remaining[ps_group[i]] -= 1;
            gval[ps_group[i]] = np_max(gval[ps_group[i]], new_a[k] + ps_off[i]);
        }
        ptr[r] = k + 1;
    }
    int progress = 1;
    while (todo > 0 && progress) {
        progress = 0;
        for (int64_t r = 0; r < nranks; r++) {
            int64_t k = ptr[r];
            while (remaining[group[k]] == 0) {
                const double *p = par + 4 * k;
                double value = np_max(new_a[entpos[k]] + p[0] + p[1], gval[group[k]] + p[2]);
                new_a[k] = np_max(value, new_a[k - 1] + p[3]);
                for (int64_t i = e_lo[k]; i < e_lo[k] + e_len[k]; i++) {
                    remaining[ps_group[i]] -= 1;
                    gval[ps_group[i]] = np_max(gval[ps_group[i]], new_a[k] + ps_off[i]);
                }
                k++;
                todo--;
                progress = 1;
            }
            ptr[r] = k;
        }
    }
    return todo;
}
