/* Loops of the trace analysis in C, each giving its numpy version's values bit for bit: every
 * floating-point operation is the one numpy does, in the same order (built without contraction into
 * fused multiply-adds, scalgraph/trace/native.py).
 *
 * sg_retime_rounds: the re-timing's anchor rounds (retime.py, `_rounds_numpy`), one anchor at a
 * time instead of one numpy round per anchor of every rank.
 *
 * An anchor's new time depends only on anchors solved before it (its rank's previous anchor, its
 * call's entry anchor, and its partner group's latest partner, final once the group has no partner
 * left to place), so any order that respects those dependences gives the same values bit for bit:
 *     new[k] = max(max(new[entpos[k]] + par[k][0] + par[k][1], gval[group[k]] + par[k][2]),
 *                  new[k - 1] + par[k][3])
 * with numpy's maximum (a NaN operand wins).
 *
 * sg_interval_profiles: the delay costs' processing-time profiles (delay.py, `_profiles_numpy`). */
#include <stdint.h>
#include <stdlib.h>

static inline double np_max(double a, double b)
{
    /* numpy's scalar maximum: the first operand when it is NaN or not below the second */
    return (a >= b || a != a) ? a : b;
}

static inline double np_min(double a, double b)
{
    return (a <= b || a != a) ? a : b;
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

/* First index of sorted a[0..m) whose value is above x (side "right") or not below x ("left"). */
static int64_t search_right(const double *a, int64_t m, double x)
{
    int64_t lo = 0, hi = m;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (x < a[mid]) hi = mid; else lo = mid + 1;
    }
    return lo;
}

static int64_t search_left(const double *a, int64_t m, double x)
{
    int64_t lo = 0, hi = m;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (a[mid] < x) lo = mid + 1; else hi = mid;
    }
    return lo;
}

/* The events whose following gap overlaps interval i ([t0[i], t1[i]] on rank[i]): lo[i]..hi[i]
 * (empty when hi < lo), as delay.exclusive_pieces finds them. */
void sg_interval_bounds(int64_t nint, const int64_t *rank, const double *t0, const double *t1,
                        const double *t, const int64_t *off, int64_t *lo, int64_t *hi)
{
    for (int64_t i = 0; i < nint; i++) {
        int64_t a = off[rank[i]], m = off[rank[i] + 1] - a;
        if (m < 2) {
            lo[i] = 0;
            hi[i] = -1;
            continue;
        }
        int64_t l = search_right(t + a, m, t0[i]) - 1, h = search_left(t + a, m, t1[i]) - 1;
        lo[i] = a + (l > 0 ? l : 0);
        hi[i] = a + (h < m - 2 ? h : m - 2);
    }
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* Processing time per (interval, call path): the exclusive time of each gap in the interval
 * (clipped at its two ends) booked to the call path after the event (ncp: outside every region),
 * then minus the interval's wait pieces (wi sorted, wc their call paths, wa their amounts); added
 * in that order from 0, as numpy's bincount adds them.  Writes the call paths below ncp that any
 * piece touched, in (interval, call path) order, and returns how many.  acc, stamp, touched: ncp + 1
 * entries each, stamp all -1 on entry. */
int64_t sg_interval_profiles(int64_t nint, const double *t0, const double *t1, const int64_t *lo,
                             const int64_t *hi, const double *t, const int32_t *cp_after, int64_t ncp,
                             const int64_t *wi, const int64_t *wc, const double *wa, int64_t nw,
                             double *acc, int64_t *stamp, int64_t *touched,
                             int64_t *out_id, int64_t *out_cp, double *out_val)
{
    int64_t n_out = 0, w = 0;
    for (int64_t i = 0; i < nint; i++) {
        int64_t k = 0;
        for (int64_t g = lo[i]; g <= hi[i]; g++) {
            double v;
            if (g == hi[i])
                v = np_max(np_min(t[g + 1], t1[i]) - np_max(t[g], t0[i]), 0.0);
            else if (g == lo[i])
                v = np_max(np_min(t[g + 1], t1[i]) - np_max(t[g], t0[i]), 0.0);
            else
                v = t[g + 1] - t[g];
            int64_t c = cp_after[g] >= 0 ? cp_after[g] : ncp;
            if (stamp[c] != i) {
                stamp[c] = i;
                acc[c] = 0.0;
                touched[k++] = c;
            }
            acc[c] += v;
        }
        for (; w < nw && wi[w] < i; w++)
            ;
        for (; w < nw && wi[w] == i; w++) {
            int64_t c = wc[w];
            if (stamp[c] != i) {
                stamp[c] = i;
                acc[c] = 0.0;
                touched[k++] = c;
            }
            acc[c] += -wa[w];
        }
        if (k > 1) {
            if (k <= 16) {
                for (int64_t a = 1; a < k; a++) {
                    int64_t x = touched[a], b = a - 1;
                    for (; b >= 0 && touched[b] > x; b--)
                        touched[b + 1] = touched[b];
                    touched[b + 1] = x;
                }
            } else {
                qsort(touched, (size_t)k, sizeof(int64_t), cmp_i64);
            }
        }
        for (int64_t a = 0; a < k; a++) {
            int64_t c = touched[a];
            if (c < ncp) {
                out_id[n_out] = i;
                out_cp[n_out] = c;
                out_val[n_out] = acc[c];
                n_out++;
            }
        }
    }
    return n_out;
}

/* One location's region nesting (matching._match_rank_numpy's pairs and owners) with a stack:
 * partner (ENTER <-> its EXIT, else -1), owner (ENTER: itself, EXIT: its ENTER, other events: the
 * innermost open ENTER, -1 outside all), parent (ENTER: the enclosing open ENTER or -1) and level
 * (ENTER: its nesting depth, from 1).  Returns the deepest level, or -1 - i when EXIT i closes
 * nothing. */
int64_t sg_match_regions(int64_t m, const uint8_t *kind, int64_t enter, int64_t exit_, int64_t *partner,
                         int64_t *owner, int64_t *parent, int64_t *level, int64_t *stack)
{
    int64_t top = 0, deepest = 0;
    for (int64_t i = 0; i < m; i++) {
        partner[i] = -1;
        parent[i] = -1;
        level[i] = 0;
        if (kind[i] == enter) {
            parent[i] = top > 0 ? stack[top - 1] : -1;
            stack[top++] = i;
            level[i] = top;
            if (top > deepest) deepest = top;
            owner[i] = i;
        } else if (kind[i] == exit_) {
            if (top == 0)
                return -1 - i;
            int64_t e = stack[--top];
            partner[i] = e;
            partner[e] = i;
            owner[i] = e;
        } else {
            owner[i] = top > 0 ? stack[top - 1] : -1;
        }
    }
    return deepest;
}

/* Packed records (n of itemsize bytes) into one column per field: field f's size[f] bytes at
 * off[f] of each record go to out[f] (matching.flatten, validate's columns): one pass over the
 * records instead of one strided pass per field.  Byte copies: the same values. */
#include <string.h>
void sg_split_records(int64_t n, const uint8_t *rec, int64_t itemsize, int64_t nf, const int64_t *off,
                      const int64_t *size, uint8_t *const *out)
{
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *r = rec + i * itemsize;
        for (int64_t f = 0; f < nf; f++) {
            switch (size[f]) {
            case 1: out[f][i] = r[off[f]]; break;
            case 2: memcpy(out[f] + 2 * i, r + off[f], 2); break;
            case 4: memcpy(out[f] + 4 * i, r + off[f], 4); break;
            case 8: memcpy(out[f] + 8 * i, r + off[f], 8); break;
            default: memcpy(out[f] + size[f] * i, r + off[f], (size_t)size[f]); break;
            }
        }
    }
}

/* The clock correction's forward amortisation (clock.py, `_forward_rounds`): the same fixed-point
 * rounds, each round recomputing every rank from its first receive whose need grew (start[r]) with
 * the closed form C_i = max(A_i + cummax_j(F_j - A_j), F_j), then every receive's need from its
 * sender sets.  The rounds and their restart points are numpy's, so the values are too (the
 * restart at event a continues from C_{a-1} - A_{a-1}, which is not always the running maximum's
 * bits).  need, floor_ (F) and c are updated in place; start and set_val are scratch.  Returns the
 * number of rounds, or -1 when the needs still grew after max_rounds + 1 of them. */
int64_t sg_clock_rounds(int64_t nranks, const int64_t *off, const double *t, const double *acc, double *floor_,
                        double *c, int64_t nsets, const int64_t *set_ptr, const int64_t *set_members,
                        const double *set_lmin, int64_t nuniq, const int64_t *uniq, const int64_t *first,
                        const int64_t *r_set, const int64_t *rank_of_uniq, double *need, int64_t max_rounds,
                        double *set_val, int64_t *start)
{
    for (int64_t r = 0; r < nranks; r++)
        start[r] = off[r];
    for (int64_t round = 0; round <= max_rounds; round++) {
        for (int64_t r = 0; r < nranks; r++) {
            int64_t a = start[r], b = off[r + 1];
            if (a >= b)
                continue;
            double m = floor_[a] - acc[a];
            if (a > off[r]) {             /* Python's max(seg[0], prev): prev only when above */
                double prev = c[a - 1] - acc[a - 1];
                if (prev > m) m = prev;
            }
            c[a] = np_max(m + acc[a], floor_[a]);
            for (int64_t i = a + 1; i < b; i++) {
                m = np_max(m, floor_[i] - acc[i]);
                c[i] = np_max(m + acc[i], floor_[i]);
            }
        }
        if (nuniq == 0)
            return round + 1;
        for (int64_t s = 0; s < nsets; s++) {
            double v = c[set_members[set_ptr[s]]];
            for (int64_t k = set_ptr[s] + 1; k < set_ptr[s + 1]; k++)
                v = np_max(v, c[set_members[k]]);
            set_val[s] = v + set_lmin[s];
        }
        for (int64_t r = 0; r < nranks; r++)
            start[r] = off[r + 1];
        int changed = 0;
        for (int64_t u = 0; u < nuniq; u++) {
            double v = set_val[r_set[first[u]]];
            for (int64_t k = first[u] + 1; k < first[u + 1]; k++)
                v = np_max(v, set_val[r_set[k]]);
            if (v > need[u]) {
                int64_t g = uniq[u], r = rank_of_uniq[u];
                need[u] = v;
                floor_[g] = np_max(t[g], v);
                if (g < start[r]) start[r] = g;
                changed = 1;
            }
        }
        if (!changed)
            return round + 1;
    }
    return -1;
}

/* The delay costs' interval starts (delay.py, `interval_starts`): for each query (group qg[i],
 * time qt[i]) the position of the last participation of that group strictly before qt[i] among
 * participations sorted by (group, time) -- stable, so the last of equal times is the latest in
 * input order, as the sort of queries and participations together gives -- or -1 when the group
 * has none before it. */
void sg_last_before(int64_t nq, const int64_t *qg, const double *qt, int64_t np_, const int64_t *pg,
                    const double *pt, int64_t *out)
{
    for (int64_t i = 0; i < nq; i++) {
        int64_t lo = 0, hi = np_;
        while (lo < hi) {                 /* first participation of a group >= qg[i] */
            int64_t mid = lo + (hi - lo) / 2;
            if (pg[mid] < qg[i]) lo = mid + 1; else hi = mid;
        }
        int64_t a = lo;
        hi = np_;
        while (lo < hi) {                 /* first of the group (or past it) not before qt[i] */
            int64_t mid = lo + (hi - lo) / 2;
            if (pg[mid] == qg[i] && pt[mid] < qt[i]) lo = mid + 1; else hi = mid;
        }
        out[i] = lo > a ? lo - 1 : -1;
    }
}
