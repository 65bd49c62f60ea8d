"""`scalgraph export EXP|TRACE --cube`: Cube4 files read back with the real PyPI pycubexr reader, their
metric trees (Scalasca's names), call trees, system trees and values checked against the inputs."""
from __future__ import annotations

import numpy as np
import pycubexr   # the real Cube reader (test extra)
import pytest

from scalgraph import cli
from scalgraph.analysis import synthetic as syn
from scalgraph.io.experiment import read_experiment
from scalgraph.io.trace_read import write_trace
from test_detect_cli import write_synthetic_experiment
from test_export_perfetto import late_sender_trace



def _read(path):
    """{metric uniq name: (metric, {(call path names): per-location stored values})}, call tree, locations."""
    out = {}
    with pycubexr.CubexParser(path) as c:
        def walk(cn, prefix=()):
            name = prefix + (c.get_region(cn).name,)
            yield cn, name
            for k in cn.get_children():
                yield from walk(k, name)
        nodes = list(walk(c.get_root_cnodes()[0]))
        for m in c.all_metrics():
            vals = c.get_metric_values(m)
            per_path: dict = {}
            for cn, name in nodes:          # one routine called from several sites: the sites summed
                per_path[name] = per_path.get(name, 0) + np.asarray(vals.cnode_values(cn), float)
            out[m.name] = (m, per_path)
        parent_of = {m.name: None for m in c.get_metrics()}
        stack = list(c.get_metrics())
        while stack:
            m = stack.pop()
            for k in m.childs:
                parent_of[k.name] = m.name
                stack.append(k)
        locs = [(loc.name, loc.type) for loc in c.get_locations()]
    return out, [n for _, n in nodes], parent_of, locs


def _total(metrics, parent_of, uniq):
    """What Cube shows for a collapsed metric: its stored values plus all its descendants'."""
    own = sum(v.sum() for v in metrics[uniq][1].values())
    return own + sum(_total(metrics, parent_of, k) for k, p in parent_of.items() if p == uniq)


def test_trace_cube_has_scalasca_wait_states_and_delay_costs(tmp_path, capsys):
    src = tmp_path / "t.sgtrace"
    write_trace(late_sender_trace(), src)
    out = tmp_path / "t.cubex"
    assert cli.main(["export", str(src), "--cube", str(out), "--no-clock-correction"]) == 0
    metrics, paths, parent_of, locs = _read(out)
    # Scalasca's metric tree
    for child, parent in [("execution", "time"), ("mpi", "execution"), ("mpi_communication", "mpi"),
                          ("mpi_point2point", "mpi_communication"), ("mpi_latesender", "mpi_point2point"),
                          ("mpi_latesender_wo", "mpi_latesender"), ("mpi_collective", "mpi_communication"),
                          ("mpi_wait_nxn", "mpi_collective"), ("mpi_barrier_wait", "mpi_sync_collective"),
                          ("delay_latesender", "delay_latesender_aggr"), ("delay_n2n_longterm", "delay_n2n_aggr")]:
        assert parent_of[child] == parent, child
    assert parent_of["visits"] is None and parent_of["time"] is None
    assert not any(name.startswith("mpi_rma") for name in metrics)          # no one-sided calls in this trace
    # call tree and system tree
    assert set(paths) == {("main",), ("main", "solve"), ("main", "MPI_Send"), ("main", "MPI_Recv"),
                          ("main", "MPI_Allreduce")}
    assert len(locs) == 3
    # values: 3 ranks x 7 units; rank 1 waits 4 in MPI_Recv for rank 0's send; rank 2 waits 4.5 in the Allreduce
    assert _total(metrics, parent_of, "time") == pytest.approx(21.0)
    ls = metrics["mpi_latesender"][1]
    assert ls["main", "MPI_Recv"] == pytest.approx([0, 4, 0])
    assert metrics["mpi_wait_nxn"][1]["main", "MPI_Allreduce"] == pytest.approx([0, 0, 4.5])
    assert metrics["mpi_latesender"][0].units == "sec"
    assert metrics["visits"][1]["main", "MPI_Recv"].tolist() == [0, 1, 0]
    assert metrics["visits"][0].data_type == "UINT64"
    # rank 0's extra 4 units of `solve` made rank 1 wait 4 in MPI_Recv
    assert metrics["delay_latesender"][1]["main", "solve"][0] == pytest.approx(4.0)
    # rank 2 waits 4.5 at the Allreduce: rank 0 spent 4 more in solve and 0.5 in MPI_Send before it
    assert metrics["delay_n2n"][1]["main", "solve"][0] == pytest.approx(4.0)
    assert metrics["delay_n2n"][1]["main", "MPI_Send"][0] == pytest.approx(0.5)
    assert _total(metrics, parent_of, "delay_mpi") == pytest.approx(8.5)
    # the critical path runs on rank 0 through solve (5), MPI_Send (0.5), the Allreduce (0.5) to the end (7)
    cp = metrics["critical_path"][1]
    assert parent_of["critical_path"] is None and sum(v.sum() for v in cp.values()) == pytest.approx(7.0)
    assert cp["main", "solve"].tolist() == pytest.approx([5.0, 0.0, 0.0])


def test_experiment_cube_has_profile_metrics_per_rank(tmp_path, capsys):
    psg, runs, cause = syn.cg_like(scales=(2, 4))
    exp = write_synthetic_experiment(tmp_path / "exp", psg, runs)
    out = tmp_path / "e.cubex"
    assert cli.main(["export", str(exp), "--cube", str(out)]) == 0
    metrics, paths, parent_of, locs = _read(out)
    prof = read_experiment(exp).profile(4)          # the default is the largest scale
    assert len(locs) == 4 and len(paths) == len(psg)
    assert parent_of["mpi"] == "execution" and parent_of["execution"] == "time"
    line12 = ("main", "loop cg.c:10", "comp cg.c:12")
    assert metrics["execution"][1][line12] == pytest.approx(prof.time[:, cause], abs=1e-6)
    assert _total(metrics, parent_of, "time") == pytest.approx(prof.time.sum(), rel=1e-9)
    assert _total(metrics, parent_of, "mpi") == pytest.approx(prof.time[:, prof.calls[0] > 0].sum(), rel=1e-9)
    assert metrics["visits"][1][("main", "loop cg.c:10", "MPI_Allreduce")].tolist() == [100] * 4
    out2 = tmp_path / "e2.cubex"
    assert cli.main(["export", str(exp), "--cube", str(out2), "--scale", "2"]) == 0
    assert len(_read(out2)[3]) == 2
    assert cli.main(["export", str(exp), "--cube", str(tmp_path / "e3.cubex"), "--scale", "3"]) == 2
    assert "no successful run at that scale" in capsys.readouterr().err


def test_hostile_names_stay_text(tmp_path, capsys):
    from tracebuild import Builder
    b = Builder(2)
    evil = "<script>alert(1)</script>\x1b[2J&\x00"
    for r in range(2):
        b.enter(r, 0, "main").work(r, 0, 1 + r, evil)
    b.send(0, 1, 1.5, dst=1).recv(1, 2, 2.5, src=0)
    for r in range(2):
        b.exit(r, 3, "main")
    src = tmp_path / "t.sgtrace"
    write_trace(b.build(), src)
    out = tmp_path / "t.cubex"
    assert cli.main(["export", str(src), "--cube", str(out)]) == 0
    _, paths, _, _ = _read(out)
    assert ("main", "<script>alert(1)</script>\ufffd[2J&\ufffd") in paths


def test_ranks_on_interleaved_hosts_keep_their_columns(tmp_path):
    from scalgraph.io.export_cube import CubeData, CubeMetric, cubex_bytes
    values = np.array([[1.0, 2.0, 3.0], [10.0, 20.0, 30.0]])       # [cnode, rank]
    data = CubeData([CubeMetric("time", "Time", values=values)],
                    [{"name": "main"}, {"name": "work"}], [0, 1], [-1, 0], ["a", "b", "a"])
    out = tmp_path / "h.cubex"
    out.write_bytes(cubex_bytes(data))
    with pycubexr.CubexParser(out) as c:
        machine = c._anchor_result.system_tree_nodes[0]
        nodes = machine._system_tree_node_children
        assert [n.name for n in nodes] == ["a", "b", "a"]          # rank order kept: 0 on a, 1 on b, 2 on a
        groups = machine.all_location_groups()
        assert [int(g.rank) for g in groups] == [0, 1, 2]
        vals = c.get_metric_values(c.get_metric_by_name("time"))
        root = c.get_root_cnodes()[0]
        assert vals.cnode_values(root).tolist() == [1.0, 2.0, 3.0]
        assert vals.cnode_values(root.get_children()[0]).tolist() == [10.0, 20.0, 30.0]
        assert vals.cnode_values(root, convert_to_inclusive=True).tolist() == [11.0, 22.0, 33.0]
