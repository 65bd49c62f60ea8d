"""OTF2 through PyPI `otf2`: our archives round-trip and follow the rules scout needs
(shared/notes/otf2-for-scalasca.md); archives written the way Score-P writes them (no scalgraph
metadata, a global time offset, location order differing from rank order, sub-communicators in
comm ranks, MPI_COMM_SELF, an extra thread) read with world ranks; bad archives fail in one line."""
from __future__ import annotations

import importlib.util
import os
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import require_tool
from scalgraph.errors import UserError
from scalgraph.io.trace_read import read_trace, write_trace
from scalgraph.model import trace as tm
from test_trace_clock_props import simulate
from test_trace_formats import assert_same, one_line_error, rich_trace


@pytest.fixture(autouse=True)
def _need_otf2():
    require_tool(importlib.util.find_spec("otf2") is not None, "Python package otf2 not installed")


def test_otf2_round_trip_is_identical(tmp_path):
    trace = rich_trace()
    write_trace(trace, tmp_path / "traces.otf2", "otf2")
    assert_same(read_trace(tmp_path / "traces.otf2"), trace)
    # the archive directory is accepted in place of the anchor file (as a Score-P experiment directory)
    assert_same(read_trace(tmp_path), trace)


def test_negative_times_round_trip(tmp_path):
    trace = rich_trace()
    for ev in trace.events:
        ev["time"] -= 0.005
        ev["time"] = np.rint(ev["time"] * 1e9) / 1e9
    write_trace(trace, tmp_path / "traces.otf2", "otf2")
    assert_same(read_trace(tmp_path / "traces.otf2"), trace)


def test_written_archive_follows_the_scout_rules(tmp_path):
    import otf2
    from otf2.enums import GroupType, LocationGroupType, LocationType, Paradigm
    trace = rich_trace()
    # drop MPI_Init/Finalize from the trace: the writer must add them
    init = [i for i, r in enumerate(trace.regions) if r.name in ("MPI_Init", "MPI_Finalize")]
    for r, ev in enumerate(trace.events):
        trace.events[r] = ev[~np.isin(ev["region"], init)]
    write_trace(trace, tmp_path / "traces.otf2", "otf2")
    with otf2.reader.open(str(tmp_path / "traces.otf2")) as rd:
        d = rd.definitions
        groups = list(d.location_groups)
        assert [g._ref for g in groups] == [0, 1, 2, 3]
        assert all(g.location_group_type == LocationGroupType.PROCESS and g.system_tree_parent is not None
                   for g in groups)
        assert all(loc.type == LocationType.CPU_THREAD for loc in d.locations)
        comm_groups = [g for g in d.groups]
        kinds = [g.group_type for g in comm_groups]
        assert kinds.count(GroupType.COMM_LOCATIONS) == 1
        assert kinds.index(GroupType.COMM_LOCATIONS) < kinds.index(GroupType.COMM_GROUP)
        assert all(g.paradigm == Paradigm.MPI for g in comm_groups)
        sub = {c.name: [g._ref for g in [m.group for m in c.group.members]] for c in d.comms}
        assert sub["MPI_COMM_WORLD"] == [0, 1, 2, 3]
        assert sub["MPI comm 5"] == [3, 1]
        mpi = {r.name: r for r in d.regions if r.name.startswith("MPI_")}
        assert {"MPI_Init", "MPI_Finalize", "MPI_Send", "MPI_Allreduce"} <= set(mpi)
        assert all(r.source_file == "MPI" and r.canonical_name == r.name for r in mpi.values())
        assert rd.timer_resolution == 1_000_000_000
        per_loc: dict[int, list] = {}
        for loc, ev in rd.events:
            per_loc.setdefault(loc._ref, []).append(ev)
    for evs in per_loc.values():
        names = [e.region.name for e in evs if isinstance(e, otf2.events.Enter)]
        assert names[0] == "MPI_Init" and names[-1] == "MPI_Finalize"
        times = [e.time for e in evs]
        assert times == sorted(times)
        kinds = [type(e).__name__ for e in evs]
        for i, k in enumerate(kinds):      # COLLECTIVE_END always right after its BEGIN
            if k == "MpiCollectiveEnd":
                assert kinds[i - 1] == "MpiCollectiveBegin"
    # scout's system tree: a "machine" node above a "node" node holding the processes
    assert [(n.class_name, n.parent.class_name if n.parent else None) for n in d.system_tree_nodes] == \
        [("machine", None), ("node", "machine")]
    assert all(g.system_tree_parent.class_name == "node" for g in groups)
    # what was added for scout (zero-length MPI_Init/MPI_Finalize at each rank's own first and last
    # event) is gone when scalgraph reads the archive back
    for evs, ev in zip(per_loc.values(), trace.events):
        enters = [e for e in evs if isinstance(e, otf2.events.Enter)]
        assert enters[0].time == enters[1].time == int(round(ev["time"][0] * 1e9))
        assert evs[-1].time == int(round(ev["time"][-1] * 1e9))
    assert_same(read_trace(tmp_path / "traces.otf2"), trace)


def test_anchor_name_rules(tmp_path):
    with pytest.raises(UserError, match="longer than 5"):
        write_trace(rich_trace(), tmp_path / "a.otf2", "otf2")
    with pytest.raises(UserError, match="must end in .otf2"):
        write_trace(rich_trace(), tmp_path / "traces.trace", "otf2")
    write_trace(rich_trace(), tmp_path / "traces.otf2", "otf2")
    before = (tmp_path / "traces.otf2").read_bytes()
    with pytest.raises(UserError, match="already exists"):
        write_trace(rich_trace(), tmp_path / "traces.otf2", "otf2")
    assert (tmp_path / "traces.otf2").read_bytes() == before


def write_scorep_like(anchor_dir) -> None:
    """An archive as Score-P writes it: ticks at 1 MHz from a large offset, no scalgraph attribute,
    COMM_LOCATIONS in the order (loc 2, loc 0, loc 1) so world rank != location id, a sub-communicator
    [world 2, world 0] addressed in comm ranks, MPI_COMM_SELF, and an OpenMP worker thread."""
    import otf2
    from otf2.enums import CollectiveOp, GroupType, LocationType, Paradigm, RegionRole
    off = 1_700_000_000_000
    with otf2.writer.open(str(anchor_dir), archive_name="traces", timer_resolution=1_000_000) as w:
        d = w.definitions
        node = d.system_tree_node("node")
        lgs = [d.location_group(f"proc {i}", system_tree_parent=node) for i in range(3)]
        locs = [d.location("Master thread", type=LocationType.CPU_THREAD, group=g) for g in lgs]
        worker = d.location("OMP thread 1", type=LocationType.CPU_THREAD, group=lgs[0])
        world_locs = [locs[2], locs[0], locs[1]]            # world rank 0 is location 2, ...
        d.group("", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI, members=world_locs)
        world = d.comm("MPI_COMM_WORLD", group=d.group("", group_type=GroupType.COMM_GROUP,
                                                       paradigm=Paradigm.MPI, members=[0, 1, 2]))
        sub = d.comm("sub", group=d.group("sub", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                                          members=[2, 0]), parent=world)
        self_comm = d.comm("MPI_COMM_SELF", group=d.group("self", group_type=GroupType.COMM_SELF,
                                                           paradigm=Paradigm.MPI, members=[]))

        def reg(name, role=RegionRole.FUNCTION):
            return d.region(name, canonical_name=name, source_file="MPI", paradigm=Paradigm.MPI, region_role=role)
        main = d.region("main", source_file="/src/app.c", begin_line_number=3, paradigm=Paradigm.COMPILER)
        init, fin = reg("MPI_Init"), reg("MPI_Finalize")
        send, recv = reg("MPI_Send", RegionRole.POINT2POINT), reg("MPI_Recv", RegionRole.POINT2POINT)
        isend, irecv, wait = reg("MPI_Isend", RegionRole.POINT2POINT), reg("MPI_Irecv", RegionRole.POINT2POINT), reg("MPI_Wait")
        allreduce, bcast = reg("MPI_Allreduce", RegionRole.COLL_ALL2ALL), reg("MPI_Bcast", RegionRole.COLL_ONE2ALL)
        barrier = reg("MPI_Barrier", RegionRole.BARRIER)
        E = otf2.events
        ws = {world_rank: w.event_writer_from_location(loc) for world_rank, loc in enumerate(world_locs)}
        for r, out in ws.items():
            out(E.ProgramBegin(off + 0, "app", ["app", "-n", "3"]))
            out(E.Enter(off + 0, main))
            out(E.Enter(off + 1, init))
            out(E.Leave(off + 2, init))
        # world rank 2 sends to world rank 0 on `sub`, where rank 0 has comm rank 1
        ws[2](E.Enter(off + 10, send)); ws[2](E.MpiSend(off + 10, 1, sub, 42, 1000)); ws[2](E.Leave(off + 11, send))
        ws[0](E.Enter(off + 5, recv)); ws[0](E.MpiRecv(off + 12, 0, sub, 42, 1000)); ws[0](E.Leave(off + 12, recv))
        # non-blocking world 1 -> world 2 on MPI_COMM_WORLD
        ws[1](E.Enter(off + 13, isend)); ws[1](E.MpiIsend(off + 13, 2, world, 7, 8, 1001)); ws[1](E.Leave(off + 14, isend))
        ws[2](E.Enter(off + 13, irecv)); ws[2](E.MpiIrecvRequest(off + 13, 55)); ws[2](E.Leave(off + 14, irecv))
        ws[1](E.Enter(off + 15, wait)); ws[1](E.MpiIsendComplete(off + 16, 1001)); ws[1](E.Leave(off + 16, wait))
        ws[2](E.Enter(off + 15, wait)); ws[2](E.MpiIrecv(off + 17, 1, world, 7, 8, 55)); ws[2](E.Leave(off + 17, wait))
        for r, out in ws.items():
            out(E.Enter(off + 20 + r, allreduce)); out(E.MpiCollectiveBegin(off + 20 + r))
            out(E.MpiCollectiveEnd(off + 25, CollectiveOp.ALLREDUCE, world, 0xFFFFFFFF, 8, 8)); out(E.Leave(off + 25, allreduce))
        for r in (2, 0):                                      # bcast on sub, root = comm rank 0 = world 2
            ws[r](E.Enter(off + 30, bcast)); ws[r](E.MpiCollectiveBegin(off + 30))
            ws[r](E.MpiCollectiveEnd(off + 31, CollectiveOp.BCAST, sub, 0, 64 if r == 2 else 0, 0 if r == 2 else 64))
            ws[r](E.Leave(off + 31, bcast))
        ws[1](E.Enter(off + 32, barrier)); ws[1](E.MpiCollectiveBegin(off + 32))
        ws[1](E.MpiCollectiveEnd(off + 32, CollectiveOp.BARRIER, self_comm, 0xFFFFFFFF, 0, 0)); ws[1](E.Leave(off + 32, barrier))
        wk = w.event_writer_from_location(worker)
        wk(E.Enter(off + 3, main)); wk(E.Leave(off + 4, main))
        for r, out in ws.items():
            out(E.Enter(off + 40, fin)); out(E.Leave(off + 41, fin)); out(E.Leave(off + 42, main))
            out(E.ProgramEnd(off + 45 + r, 0))      # the program runs on after MPI_Finalize


def test_reads_what_scorep_writes(tmp_path):
    write_scorep_like(tmp_path)
    trace = read_trace(tmp_path / "traces.otf2")
    assert trace.nranks == 3
    assert trace.meta["otf2_skipped_events"] == 2           # the worker thread's ENTER/LEAVE
    by_name = {r.name: i for i, r in enumerate(trace.regions)}
    assert trace.regions[by_name["main"]] == tm.Region("main", "/src/app.c", 3, -1)
    assert trace.regions[by_name["MPI_Send"]].file == "MPI"
    sub = [c for c, m in trace.comms.items() if m == [2, 0]]
    assert len(sub) == 1 and trace.comms[0] == [0, 1, 2]
    r0, r1, r2 = trace.events
    send = r2[r2["kind"] == tm.SEND][0]
    assert (send["peer"], send["tag"], send["comm"], send["bytes"]) == (0, 42, sub[0], 1000)
    assert send["time"] == pytest.approx(10e-6)              # (ticks - global offset) / 1 MHz
    recv = r0[r0["kind"] == tm.RECV][0]
    assert (recv["peer"], recv["comm"]) == (2, sub[0])
    isend = r1[r1["kind"] == tm.ISEND][0]
    assert (isend["peer"], isend["request"]) == (2, 1001)
    irecv = r2[r2["kind"] == tm.IRECV][0]
    assert (irecv["peer"], irecv["request"]) == (1, 55)
    bcast = r0[(r0["kind"] == tm.COLL_END) & (r0["comm"] == sub[0])][0]
    assert (bcast["peer"], bcast["bytes_recv"]) == (2, 64)   # root comm rank 0 -> world rank 2
    allreduce = r1[(r1["kind"] == tm.COLL_END) & (r1["comm"] == 0)][0]
    assert allreduce["peer"] == -1
    self_end = r1[(r1["kind"] == tm.COLL_END)][-1]
    assert trace.comms[int(self_end["comm"])] == [1]         # MPI_COMM_SELF became rank 1's own comm
    assert r0["time"][0] == 0.0 and r0["time"][-1] == pytest.approx(42e-6)
    # ProgramBegin/End are not events: they give each rank's program span
    assert trace.program_begin == {0: 0.0, 1: 0.0, 2: 0.0}
    assert trace.program_end == pytest.approx({0: 45e-6, 1: 46e-6, 2: 47e-6})
    for fmt, name in (("binary", "t.sgt"), ("json", "t.json"), ("otf2", "again_traces.otf2")):
        write_trace(trace, tmp_path / name, fmt)
        assert_same(read_trace(tmp_path / name), trace)
    # only some ranks: the parallel replay's block, read from their own locations
    part = read_trace(tmp_path / "traces.otf2", ranks=range(1, 3))
    assert len(part.events[0]) == 0 and part.program_begin.keys() == {1, 2}
    for r in (1, 2):
        assert np.array_equal(part.events[r], trace.events[r])
    from scalgraph.io.trace_read import trace_event_counts
    assert trace_event_counts(tmp_path / "traces.otf2").tolist() == [len(e) + 2 for e in trace.events]


def test_python_callbacks_read_the_same_as_the_c_reader(tmp_path, monkeypatch):
    """Without a C compiler the events come through libotf2's Python callbacks: same trace."""
    from scalgraph.io import otf2_native
    write_scorep_like(tmp_path)
    native = read_trace(tmp_path / "traces.otf2")
    monkeypatch.setattr(otf2_native, "library", lambda: None)
    assert_same(read_trace(tmp_path / "traces.otf2"), native)
    trace = rich_trace()
    write_trace(trace, tmp_path / "rich_traces.otf2", "otf2")
    assert_same(read_trace(tmp_path / "rich_traces.otf2"), trace)


def _scenarios() -> list:
    """Every hand-built trace the trace tests define: their module-level functions without required
    parameters that return a Builder or a Trace, plus the parameterised builders at fixed sizes."""
    import importlib
    import inspect
    import pathlib
    found = []
    for path in sorted(pathlib.Path(__file__).parent.glob("test_trace_*.py")):
        mod = importlib.import_module(path.stem)
        for name, fn in inspect.getmembers(mod, inspect.isfunction):
            if fn.__module__ != mod.__name__ or name.startswith("test_"):
                continue
            sig = inspect.signature(fn)
            returns = str(sig.return_annotation)
            if ("Builder" in returns or "Trace" in returns) and \
                    all(p.default is not p.empty for p in sig.parameters.values()):
                found.append((f"{path.stem}.{name}", fn))
    rma = importlib.import_module("test_trace_rma_props")
    found += [("ring_trace", lambda: rma.ring_trace(4, 3))] + \
             [(f"random_rma_trace({s})", lambda s=s: rma.random_rma_trace(s)) for s in range(3)]
    return found


def test_every_scenario_round_trips_json_otf2_identically(tmp_path):
    """JSON -> OTF2 -> read gives the identical Trace (so the identical report) for every scenario the
    trace tests build: nothing added for scout survives, nothing recorded is lost."""
    done = []
    for i, (name, make) in enumerate(_scenarios()):
        built = make()
        trace = built.build() if hasattr(built, "build") else built
        for ev in trace.events:
            ev["time"] = np.rint(ev["time"] * 1e9) / 1e9        # OTF2 holds whole nanoseconds
        try:
            write_trace(trace, tmp_path / f"{i}.json", "json")
        except UserError:
            continue                                 # a scenario of a refused trace
        from_json = read_trace(tmp_path / f"{i}.json")
        write_trace(from_json, tmp_path / f"scenario{i}.otf2", "otf2")
        back = read_trace(tmp_path / f"scenario{i}.otf2")
        try:
            assert_same(back, from_json)
        except AssertionError as e:
            raise AssertionError(f"scenario {name}: {e}") from None
        done.append(name)
    assert len(done) >= 8, done


def test_a_user_function_named_mpi_is_not_mpi(tmp_path):
    """The APART suite's `mpi_commpattern_sendrecv` is computation (issue 11 item 7)."""
    import otf2
    from otf2.enums import Paradigm
    assert not tm.Region("mpi_commpattern_sendrecv", "apart.c", 12).is_mpi
    assert tm.Region("MPI_Send", "MPI").is_mpi and tm.Region("MPI_Send").is_mpi
    trace = rich_trace()
    trace.regions.append(tm.Region("mpi_commpattern_sendrecv", "apart.c", 12))
    write_trace(trace, tmp_path / "traces.otf2", "otf2")
    with otf2.reader.open(str(tmp_path / "traces.otf2")) as rd:
        user = [r for r in rd.definitions.regions if r.name == "mpi_commpattern_sendrecv"]
    assert len(user) == 1 and user[0].paradigm == Paradigm.USER and user[0].source_file == "apart.c"
    assert_same(read_trace(tmp_path / "traces.otf2"), trace)


def test_not_an_archive(tmp_path):
    (tmp_path / "traces.otf2").write_bytes(b"this is not an anchor file at all\n" * 3)
    one_line_error(tmp_path / "traces.otf2", contains="not a trace scalgraph can read")
    one_line_error(tmp_path, contains="not a trace scalgraph can read")


def test_damaged_archives(tmp_path, capfd):
    write_trace(rich_trace(), tmp_path / "traces.otf2", "otf2")
    anchor = (tmp_path / "traces.otf2").read_bytes()
    # anchor cut short
    (tmp_path / "traces.otf2").write_bytes(anchor[:len(anchor) // 2])
    one_line_error(tmp_path / "traces.otf2", contains="OTF2")
    # intact anchor, global definitions missing
    (tmp_path / "traces.otf2").write_bytes(anchor)
    os.rename(tmp_path / "traces.def", tmp_path / "traces.def.bak")
    one_line_error(tmp_path / "traces.otf2", contains="OTF2")
    os.rename(tmp_path / "traces.def.bak", tmp_path / "traces.def")
    # event files garbled
    for f in (tmp_path / "traces").glob("*.evt"):
        f.write_bytes(os.urandom(f.stat().st_size))
    one_line_error(tmp_path / "traces.otf2", contains="traces.otf2")
    shutil.rmtree(tmp_path / "traces")
    one_line_error(tmp_path / "traces.otf2", contains="traces.otf2")
    assert capfd.readouterr().err == ""          # libotf2's own error chatter is kept off the terminal


def test_an_independent_otf2_reader_accepts_our_archive(tmp_path):
    """Debian's otf2-print (libotf2 3.0, built separately from the PyPI wheel) reads what we write."""
    import subprocess
    exe = shutil.which("otf2-print")
    require_tool(exe is not None, "otf2-print (Debian package otf2-tools) not installed")
    write_trace(rich_trace(), tmp_path / "traces.otf2", "otf2")
    proc = subprocess.run([exe, str(tmp_path / "traces.otf2")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "error" not in proc.stderr.lower()
    for record in ("MPI_SEND", "MPI_RECV", "MPI_ISEND", "MPI_IRECV_REQUEST", "MPI_ISEND_COMPLETE", "MPI_IRECV",
                   "MPI_COLLECTIVE_BEGIN", "MPI_COLLECTIVE_END", "RMA_PUT", "RMA_GET", "RMA_ATOMIC",
                   "MPI_REQUEST_CANCELLED"):
        assert f"\n{record} " in proc.stdout, record
    # world ranks are translated to communicator ranks on the way out: rank 3 -> rank 1 is (0 -> 1) in comm 5
    assert 'Receiver: 1 ("Master thread" <1>), Communicator: "MPI comm 5"' in proc.stdout
    defs = subprocess.run([exe, "-G", str(tmp_path / "traces.otf2")], capture_output=True, text=True, timeout=60)
    assert defs.returncode == 0
    assert defs.stdout.count("Type: PROCESS") == 4 and "Type: COMM_LOCATIONS, Paradigm: MPI" in defs.stdout


def test_mpi_init_thread_counts_as_mpi_init(tmp_path):
    trace = rich_trace()
    for r in trace.regions:
        if r.name == "MPI_Init":
            r.name = "MPI_Init_thread"
    write_trace(trace, tmp_path / "traces.otf2", "otf2")
    assert_same(read_trace(tmp_path / "traces.otf2"), trace)      # nothing added


def test_scorep_clock_offsets_are_applied_when_reading(tmp_path):
    """Score-P stores per-location ClockOffset definitions (measured at init and finalize); libotf2
    applies them by linear interpolation while reading, which is the first step of seed 004's
    correction.  Offsets 100 ticks at 0 and 300 at 1000 (1 kHz ticks): t' = t + 100 + 0.2 t."""
    import _otf2
    import otf2
    from otf2.enums import LocationType
    with otf2.writer.open(str(tmp_path), archive_name="traces", timer_resolution=1000) as w:
        d = w.definitions
        loc = d.location("Master thread", type=LocationType.CPU_THREAD,
                         group=d.location_group("proc 0", system_tree_parent=d.system_tree_node("node")))
        main = d.region("main")
        out = w.event_writer_from_location(loc)
        _otf2.DefWriter_WriteClockOffset(out._def_handle, 0, 100, 0.0)
        _otf2.DefWriter_WriteClockOffset(out._def_handle, 1000, 300, 0.0)
        out(otf2.events.Enter(0, main))
        out(otf2.events.Enter(500, main))
        out(otf2.events.Leave(800, main))
        out(otf2.events.Leave(1000, main))
    trace = read_trace(tmp_path / "traces.otf2")
    # global offset = first written stamp (0); interpolated ticks 100, 700, 1060, 1300 -> seconds
    assert trace.events[0]["time"].tolist() == pytest.approx([0.1, 0.7, 1.06, 1.3])


@settings(max_examples=15, deadline=None)
@given(nranks=st.integers(1, 5), nops=st.integers(0, 25), seed=st.integers(0, 2**32 - 1))
def test_random_traces_round_trip_through_every_format(tmp_path_factory, nranks, nops, seed):
    trace = simulate(max(nranks, 2), nops, seed)
    for ev in trace.events:
        ev["time"] = np.rint(ev["time"] * 1e9) / 1e9        # OTF2 holds whole nanoseconds
    d = tmp_path_factory.mktemp("rt")
    for fmt, name in (("binary", "t.sgt"), ("json", "t.json"), ("otf2", "traces.otf2")):
        write_trace(trace, d / name, fmt)
        assert_same(read_trace(d / name), trace)


# ------------------------------------------------------------------ regions apart by vertex, lock types

def init_finalize(b, nranks, t_end):
    for r in range(nranks):
        b.work(r, 0.0, 0.5, "MPI_Init")
        b.work(r, t_end, t_end + 0.5, "MPI_Finalize")


def test_regions_differing_only_in_vertex_stay_apart(tmp_path):
    import otf2
    from tracebuild import Builder
    b = Builder(2)
    init_finalize(b, 2, 10.0)
    b.work(0, 1, 2, "compute_a").work(0, 2, 3, "compute_b").work(1, 1, 3, "compute_b")
    b.work(1, 3, 3.5, "idle_a").work(1, 3.5, 4, "idle_b")
    b.send(0, 4, 5, 1, name="MPI_Send").send(0, 5, 6, 1, name="MPI_Send_b")
    b.recv(1, 4, 5.5, 0).recv(1, 5.5, 6.5, 0)
    trace = b.build()
    idx = {r.name: i for i, r in enumerate(trace.regions)}
    # two COMPs of one line (vertex 3, 4), two MPI_Send calls of one line (vertex 10, 11), and two
    # regions equal in every field (no vertex): all must come back as distinct regions
    trace.regions[idx["compute_a"]] = tm.Region("compute", "app.c", 42, vertex=3)
    trace.regions[idx["compute_b"]] = tm.Region("compute", "app.c", 42, vertex=4)
    trace.regions[idx["MPI_Send"]] = tm.Region("MPI_Send", "MPI", 50, vertex=10)
    trace.regions[idx["MPI_Send_b"]] = tm.Region("MPI_Send", "MPI", 50, vertex=11)
    trace.regions[idx["idle_a"]] = tm.Region("idle", "app.c", 60)
    trace.regions[idx["idle_b"]] = tm.Region("idle", "app.c", 60)
    write_trace(trace, tmp_path / "traces.otf2", "otf2")
    back = read_trace(tmp_path / "traces.otf2")
    assert_same(back, trace)
    compute_enters = back.events[0]["region"][back.events[0]["kind"] == tm.ENTER]
    assert [back.regions[i].vertex for i in compute_enters if back.regions[i].name == "compute"] == [3, 4]
    # the vertex is in the definitions themselves, so it survives tools that drop our attribute
    with otf2.reader.open(str(tmp_path / "traces.otf2")) as rd:
        descriptions = {r.description for r in rd.definitions.regions if r.name in ("compute", "MPI_Send")}
    assert descriptions == {"PSG vertex 3", "PSG vertex 4", "PSG vertex 10", "PSG vertex 11"}


def lock_round_trip(tmp_path, trace) -> tm.Trace:
    """Write and read `trace` (lock traces lack MPI_Init/Finalize: the writer adds them for scout,
    the reader removes them again)."""
    write_trace(trace, tmp_path / "traces.otf2", "otf2")
    back = read_trace(tmp_path / "traces.otf2")
    assert back.regions == trace.regions
    return back


def test_lock_types_round_trip_as_otf2_lock_records(tmp_path):
    import otf2
    from test_trace_rma import lock_trace
    from scalgraph.trace import rma
    trace = lock_trace(rma.LOCK_SHARED)        # origin 0 locks exclusively, origin 1 shared
    assert_same(lock_round_trip(tmp_path, trace), trace)
    with otf2.reader.open(str(tmp_path / "traces.otf2")) as rd:
        locks = [(type(e).__name__, str(getattr(e, "lock_type", ""))) for _, e in rd.events
                 if "Lock" in type(e).__name__]
    assert sorted(locks) == [("RmaReleaseLock", ""), ("RmaReleaseLock", ""),
                             ("RmaRequestLock", "LockType.EXCLUSIVE"), ("RmaRequestLock", "LockType.SHARED")]


@pytest.mark.parametrize("first,second", [("LOCK_EXCLUSIVE", "LOCK_EXCLUSIVE"), ("LOCK_EXCLUSIVE", "LOCK_SHARED"),
                                          ("LOCK_SHARED", "LOCK_SHARED")])
def test_lock_contention_is_the_same_after_otf2(tmp_path, first, second):
    from test_trace_rma import lock_trace, replay
    from scalgraph.trace import patterns, rma
    trace = lock_trace(getattr(rma, second))
    ev = trace.events[0]
    ev["tag"][(ev["kind"] == tm.RMA_SYNC) & (ev["tag"] != 0)] = getattr(rma, first)
    before, after = replay(trace), replay(lock_round_trip(tmp_path, trace))
    for key in ("rma_lock_contention", "rma_comm_lock_contention"):
        k = patterns.PATTERN_INDEX[key]
        assert np.array_equal(before.cube[k], after.cube[k])
    # both shared: nobody contends (before the fix the round trip made every lock exclusive: 0.7 s)
    expected = 0.0 if first == second == "LOCK_SHARED" else 0.7
    assert float(after.cube[patterns.PATTERN_INDEX["rma_lock_contention"]].sum()) == pytest.approx(expected)


def test_scorep_request_and_acquire_of_one_lock_read_as_one_lock(tmp_path):
    """Score-P may record RmaRequestLock in MPI_Win_lock and RmaAcquireLock when the lock is
    granted: one MPI_Win_lock, so one RMA_SYNC with the lock type; a lone acquire counts too."""
    import otf2
    from otf2.enums import GroupType, LocationType, LockType, Paradigm, RegionRole
    with otf2.writer.open(str(tmp_path), archive_name="traces", timer_resolution=1_000_000) as w:
        d = w.definitions
        node = d.system_tree_node("node")
        locs = [d.location("Master thread", type=LocationType.CPU_THREAD,
                           group=d.location_group(f"proc {i}", system_tree_parent=node)) for i in range(2)]
        d.group("", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI, members=locs)
        world = d.comm("MPI_COMM_WORLD", group=d.group("", group_type=GroupType.COMM_GROUP,
                                                       paradigm=Paradigm.MPI, members=[0, 1]))
        win = d.rma_win("win", comm=world)
        reg = {name: d.region(name, source_file="MPI", paradigm=Paradigm.MPI, region_role=RegionRole.FUNCTION)
               for name in ("MPI_Win_lock", "MPI_Win_unlock")}
        E = otf2.events
        out = w.event_writer_from_location(locs[0])
        out(E.Enter(10, reg["MPI_Win_lock"])); out(E.RmaRequestLock(10, win, 1, 5, LockType.SHARED))
        out(E.RmaAcquireLock(11, win, 1, 5, LockType.SHARED)); out(E.Leave(12, reg["MPI_Win_lock"]))
        out(E.Enter(13, reg["MPI_Win_unlock"])); out(E.RmaReleaseLock(13, win, 1, 5)); out(E.Leave(14, reg["MPI_Win_unlock"]))
        out(E.Enter(20, reg["MPI_Win_lock"])); out(E.RmaAcquireLock(20, win, 1, 6, LockType.EXCLUSIVE))
        out(E.Leave(21, reg["MPI_Win_lock"]))
        out(E.Enter(22, reg["MPI_Win_unlock"])); out(E.RmaReleaseLock(22, win, 1, 6)); out(E.Leave(23, reg["MPI_Win_unlock"]))
        w.event_writer_from_location(locs[1])(E.Enter(10, reg["MPI_Win_lock"]))
        w.event_writer_from_location(locs[1])(E.Leave(30, reg["MPI_Win_lock"]))
    trace = read_trace(tmp_path / "traces.otf2")
    ev = trace.events[0]
    sync = ev[ev["kind"] == tm.RMA_SYNC]
    assert sync["tag"].tolist() == [2, 0, 1, 0] and sync["peer"].tolist() == [1] * 4
    assert (sync["request"] == -1).all() and (sync["comm"] == list(trace.windows)[0]).all()


LOCKS_PROGRAM = r"""
#include <mpi.h>
#include <stdio.h>
static double work(int n) { double s = 0; for (int i = 0; i < n; i++) s += i * 0.5; return s; }
int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long buf[2] = {0, 0}, x = rank + 1;
    MPI_Win win;
    MPI_Win_create(buf, sizeof buf, sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    int right = (rank + 1) % size;
    double s = work(100000 * (rank + 1));
    MPI_Barrier(MPI_COMM_WORLD); MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win);
    MPI_Accumulate(&x, 1, MPI_LONG, right, 0, 1, MPI_LONG, MPI_SUM, win);
    MPI_Win_unlock(right, win);
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
    MPI_Accumulate(&x, 1, MPI_LONG, 0, 1, 1, MPI_LONG, MPI_SUM, win);
    MPI_Win_unlock(0, win);
    MPI_Win_free(&win);
    printf("rank %d %ld %ld %.0f\n", rank, buf[0], buf[1], s);
    MPI_Finalize();
    return 0;
}
"""


def test_real_traced_run_with_locks_and_one_line_calls_round_trips(tmp_path):
    """A real run through the compile wrapper and the shim's trace mode: two MPI_Barrier calls on one
    line (same name, file and line, two PSG vertices), a shared and an exclusive MPI_Win_lock.  The
    OTF2 archive reads back identical, so lock types and vertices survive."""
    import subprocess
    from scalgraph.io.trace_shim import read_shim_trace
    from scalgraph.static import read_psg_from_executable
    from test_e2e_samples import WRAPPER, tool
    from test_trace_record import run_traced
    require_tool(importlib.util.find_spec("ziglang") is not None, "no ziglang (pip install ziglang)")
    require_tool(tool("mpicc") is not None and tool(WRAPPER[".c"]) is not None, "no MPI or no sgcc wrapper")
    src = tmp_path / "locks.c"
    src.write_text(LOCKS_PROGRAM)
    exe = tmp_path / "locks"
    res = subprocess.run([tool(WRAPPER[".c"]), "-O1", "-g", "-o", str(exe), str(src)], capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    run_traced(exe, tmp_path / "out")
    trace = read_shim_trace(tmp_path / "out", read_psg_from_executable(str(exe)))
    barriers = [r for r in trace.regions if r.name == "MPI_Barrier"]
    assert len(barriers) == 2 and barriers[0].line == barriers[1].line and barriers[0].vertex != barriers[1].vertex
    lock_ids = [i for i, r in enumerate(trace.regions) if r.name == "MPI_Win_lock"]
    tags = set()
    for ev in trace.events:
        inside = np.isin(ev["region"], lock_ids) & (ev["kind"] == tm.ENTER)
        tags |= set(ev["tag"][np.flatnonzero(inside) + 1].tolist())
    assert tags == {1, 2}                        # the RMA_SYNC right after each lock ENTER
    write_trace(trace, tmp_path / "traces.otf2", "otf2")
    assert_same(read_trace(tmp_path / "traces.otf2"), trace)


def test_lock_of_unknown_type_is_exclusive_in_otf2_and_reads_back_unknown(tmp_path):
    """OTF2 has no unknown lock type: the record says exclusive (what the analysis assumes), and
    scalgraph's attribute keeps the recorded 0, so the round trip stays identical."""
    import otf2
    from test_trace_rma import lock_trace, replay
    from scalgraph.trace import patterns
    trace = lock_trace()
    for ev in trace.events:
        ev["tag"][ev["kind"] == tm.RMA_SYNC] = 0          # 0 = unknown, counted as exclusive
    back = lock_round_trip(tmp_path, trace)
    assert_same(back, trace)
    with otf2.reader.open(str(tmp_path / "traces.otf2")) as rd:
        types = [str(e.lock_type) for _, e in rd.events if isinstance(e, otf2.events.RmaRequestLock)]
    assert len(types) == 2 and all("EXCLUSIVE" in t for t in types)
    k = patterns.PATTERN_INDEX["rma_lock_contention"]
    assert np.array_equal(replay(trace).cube[k], replay(back).cube[k])


def test_otf2_print_shows_the_lock_records_with_their_types(tmp_path):
    """Debian's otf2-print (a libotf2 built apart from the wheel) decodes our lock records."""
    import subprocess
    from test_trace_rma import lock_trace
    from scalgraph.trace import rma
    exe = shutil.which("otf2-print")
    require_tool(exe is not None, "otf2-print (Debian package otf2-tools) not installed")
    write_trace(lock_trace(rma.LOCK_SHARED), tmp_path / "traces.otf2", "otf2")
    proc = subprocess.run([exe, str(tmp_path / "traces.otf2")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "error" not in proc.stderr.lower(), proc.stderr
    lines = [" ".join(ln.split()) for ln in proc.stdout.splitlines() if "_LOCK " in ln]
    assert [ln.split()[0] for ln in lines].count("RMA_RELEASE_LOCK") == 2
    requests = sorted(ln.split("Type: ")[1] for ln in lines if ln.startswith("RMA_REQUEST_LOCK"))
    assert requests == ["EXCLUSIVE", "SHARED"] and all('Remote: 2 ("Master thread"' in ln for ln in lines)


def test_many_unrepresentable_fields_go_to_a_file_in_the_archive(tmp_path):
    """Times off the nanosecond grid on thousands of events: too much for an OTF2 string, so they go
    to a numpy file inside the archive directory, and the trace still reads back identical."""
    from scalgraph.io import trace_otf2
    trace = simulate(4, 600, 7)
    assert sum(len(e) for e in trace.events) * 20 > trace_otf2._INLINE_BYTES    # ~20 characters per time
    write_trace(trace, tmp_path / "traces.otf2", "otf2")
    assert (tmp_path / "traces" / trace_otf2.FIELDS_FILE).is_file()
    assert_same(read_trace(tmp_path / "traces.otf2"), trace)
    (tmp_path / "traces" / trace_otf2.FIELDS_FILE).write_bytes(b"garbage")
    one_line_error(tmp_path / "traces.otf2", contains="copy the whole archive directory")


def test_a_location_with_more_events_than_its_definition_says_is_read_whole(tmp_path, monkeypatch):
    from scalgraph.io import trace_otf2
    trace = rich_trace()
    write_trace(trace, tmp_path / "traces.otf2", "otf2")
    monkeypatch.setattr(trace_otf2, "_ROOM_DIVISOR", 2)
    assert_same(read_trace(tmp_path / "traces.otf2"), trace)
