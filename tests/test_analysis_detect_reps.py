"""detect fits each construct's model with the spread between repetitions (`scalgraph run --reps N`):
a rise within that spread stays a constant, a rise beyond it is growth."""
from __future__ import annotations

import numpy as np

from scalgraph.analysis import synthetic as syn
from scalgraph.analysis.detect import analyse
from scalgraph.io.experiment import median_of_repetitions

TREE = ("FUNCTION", "main", 1, [("COMP", "comp", 3), ("COMP", "comp", 4), ("LOOP", "loop", 5, [
    ("COMP", "comp", 6), ("MPI", "MPI_Allreduce", 7)])])
SCALES = (2, 4, 8, 16)
HZ = 1000.0      # many samples: the Poisson error (about 1 %) is far below the spread between repetitions


def experiment(flat_reps, growing_reps):
    """Repetitions per scale, merged the way Experiment.profile merges them.  flat_reps/growing_reps:
    {scale: seconds per rank in each repetition} of the vertices on lines 3 and 4."""
    psg = syn.psg_from_tree(TREE, "reps.c")
    flat, grow, work, allr = (syn.vertex_at(psg, n) for n in (3, 4, 6, 7))
    runs = {}
    for p in SCALES:
        reps = []
        for t_flat, t_grow in zip(flat_reps[p], growing_reps[p]):
            t = np.zeros((p, len(psg)))
            t[:, flat], t[:, grow], t[:, work], t[:, allr] = t_flat, t_grow, 40.0 / p, 1e-4
            prof = syn._profile(psg, p, t, np.zeros_like(t), [(r, allr, syn.DEP_COLL, -1, -1, 0, 1, 8, 0.0)
                                                              for r in range(p)])
            prof.samples[:] = np.rint(t * HZ).astype(np.int64)
            prof.meta["hz"] = HZ
            reps.append(prof)
        runs[p] = median_of_repetitions(reps)
    return psg, runs, flat, grow


def models(result) -> dict[int, str]:
    return {e["vertex"]: e["model"] for e in result["non_scalable"]}


def test_merged_profile_keeps_each_repetitions_mean_time():
    psg, runs, flat, _ = experiment({p: [3.0, 2.7, 3.3] for p in SCALES}, {p: [1.0, 1.0, 1.0] for p in SCALES})
    assert np.allclose(runs[4].rep_mean_time[:, flat], [3.0, 2.7, 3.3])
    assert np.isclose(runs[4].time[0, flat], 3.0)           # the median, as before


def test_rise_within_the_spread_of_repetitions_stays_constant_and_real_growth_is_found():
    # flat: medians rise 3.0 -> 3.3 (10 %), but the repetitions of every scale spread by +-10 %
    flat = {2: [3.0, 2.7, 3.3], 4: [3.1, 2.8, 3.4], 8: [3.2, 2.9, 3.5], 16: [3.3, 3.0, 3.6]}
    # growing: 1 + 0.1 p, repetitions within 1 %
    grow = {p: [(1 + 0.1 * p) * f for f in (1.0, 0.99, 1.01)] for p in SCALES}
    psg, runs, v_flat, v_grow = experiment(flat, grow)
    found = models(analyse(psg, runs))
    assert "*" not in found[v_flat] and np.isclose(float(found[v_flat]), 3.15, rtol=0.02)
    assert found[v_grow].endswith("* p") and "0.1 * p" in found[v_grow]


def test_without_repetitions_the_same_medians_are_growth():
    """The control: one run per scale with the flat vertex's medians; its Poisson error alone (about
    1 % here) cannot explain a 10 % rise, so the model grows.  The repetitions are what keep it flat."""
    flat = {2: [3.0], 4: [3.1], 8: [3.2], 16: [3.3]}
    grow = {p: [1 + 0.1 * p] for p in SCALES}
    psg, runs, v_flat, _ = experiment(flat, grow)
    assert runs[2].rep_mean_time is None
    assert "*" in models(analyse(psg, runs))[v_flat]


def test_slowest_rank_series_carries_its_own_sampling_error():
    from scalgraph.analysis.constructs import constructs
    from scalgraph.analysis.detect import summarise_scales
    psg, runs, flat, _ = experiment({p: [3.0] for p in SCALES}, {p: [1.0] for p in SCALES})
    runs[8].time[5, flat] = 4.0                 # rank 5 is the slowest at p=8: 4000 samples at 1000 Hz
    runs[8].samples[5, flat] = 4000
    cons = constructs(psg)
    sm = summarise_scales(psg, cons, runs, 2.0, 0.05, 0, None)
    c = cons.cid[flat]
    assert np.isclose(sm.y_max[c, 2], 4.0) and np.isclose(sm.y_max_se[c, 2], np.sqrt(4000) / HZ)
    assert np.isclose(sm.y_se[c, 2], np.sqrt(3000 * 7 + 4000) / HZ / 8)     # the mean's: all ranks' samples
    assert sm.y_reps is None


def test_scalgraph_detect_on_an_experiment_directory_with_repetitions(tmp_path, capsys):
    """The same through the files `scalgraph run --reps 3` writes and the `detect` command."""
    import json

    from scalgraph import cli
    from test_detect_cli import write_synthetic_experiment
    flat_reps = {2: [3.0, 2.7, 3.3], 4: [3.1, 2.8, 3.4], 8: [3.2, 2.9, 3.5], 16: [3.3, 3.0, 3.6]}
    psg, runs, v_flat, v_grow = experiment({p: [1.0] for p in SCALES}, {p: [1.0] for p in SCALES})

    def disturb(p, k, prof):
        prof.time[:, v_flat] = flat_reps[p][k]
        prof.time[:, v_grow] = (1 + 0.1 * p) * (1.0, 0.99, 1.01)[k]

    exp = write_synthetic_experiment(tmp_path / "exp", psg, runs, reps=3, disturb=disturb)
    assert cli.main(["detect", str(exp), "--json"]) == 0
    found = models(json.loads(capsys.readouterr().out))
    assert "*" not in found[v_flat] and found[v_grow].endswith("* p")
