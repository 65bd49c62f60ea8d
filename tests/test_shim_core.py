"""The shim's MPI-free core through cffi (ABI mode, the same header as the C code): the probe ABI of
docs/runtime-abi.md, accumulators, dependence compression, communicators, the file it writes and
the reader's checks.  Each test dlopens its own copy of the library, so their states are separate."""
from __future__ import annotations

import shutil
import uuid

import numpy as np
import pytest

from conftest import require_tool
from scalgraph.errors import UserError
from scalgraph.io import profile_file as pf
from scalgraph.model.profile import DEP_COLL, DEP_DTYPE, DEP_RECV, DEP_SEND
from scalgraph.runtime.shim import header_cdef

cffi = pytest.importorskip("cffi")


@pytest.fixture(scope="module")
def core_path():
    require_tool(shutil.which("cc") is not None, "no C compiler (cc) to build the shim core")
    from scalgraph.runtime.shim import core_library
    return core_library()


@pytest.fixture
def core(core_path, tmp_path):
    """A private copy of the core library: (ffi, lib, keep-alive list)."""
    copy = tmp_path / f"core-{uuid.uuid4().hex}.so"
    shutil.copy(core_path, copy)
    ffi = cffi.FFI()
    ffi.cdef(header_cdef())
    lib = ffi.dlopen(str(copy))
    return ffi, lib, []


def make_tables(ffi, keep, *, nvertices, functions, inst_func, inst_vid, inst_callee, default_inst):
    """struct sg_psg_tables from Python lists (inst_vid/inst_callee: one list per instance)."""
    base, flat_vid, flat_callee = [], [], []
    for vids, callees in zip(inst_vid, inst_callee):
        base.append(len(flat_vid))
        flat_vid += vids
        flat_callee += callees
    slots = [ffi.new("uint32_t *", 0xFFFFFFFF) for _ in range(functions)]
    arrays = dict(
        psg_hash=ffi.new("char[]", b"feedc0ffee123456"),
        inst_base=ffi.new("uint32_t[]", base), inst_func=ffi.new("uint32_t[]", inst_func),
        inst_vid=ffi.new("uint32_t[]", flat_vid), inst_callee=ffi.new("int32_t[]", flat_callee),
        func_default_inst=ffi.new("uint32_t[]", default_inst),
        fid_slots=ffi.new("uint32_t *[]", slots), vertex_kind=ffi.new("uint8_t[]", nvertices))
    t = ffi.new("struct sg_psg_tables *")
    for k, v in arrays.items():
        setattr(t, k, v)
    t.nvertices, t.nfunctions, t.ninstances = nvertices, functions, len(inst_func)
    keep += [t, slots, arrays]
    return t, slots


# main (fid 0) calls f (fid 1) from two sites; f calls g (fid 2).  Pre-order vertices:
# 0 main, 1 CALL f@A, 2 f, 3 CALL g, 4 g, 5 CALL f@B, 6 f, 7 CALL g, 8 g, 9 an MPI vertex in main
TWO_SITES = dict(nvertices=10, functions=3, inst_func=[0, 1, 2, 1, 2],
                 inst_vid=[[0, 1, 5, 9], [2, 3], [4], [6, 7], [8]],
                 inst_callee=[[-1, 1, 3, -1], [-1, 2], [-1], [-1, 4], [-1]],
                 default_inst=[0, 1, 2])


def test_register_fills_function_ids(core):
    ffi, lib, keep = core
    t, slots = make_tables(ffi, keep, **TWO_SITES)
    lib.sg_register_psg(t)
    assert [s[0] for s in slots] == [0, 1, 2]


def test_same_function_resolves_to_the_vertex_of_its_calling_context(core):
    ffi, lib, keep = core
    t, _ = make_tables(ffi, keep, **TWO_SITES)
    lib.sg_register_psg(t)
    seen = []
    lib.sg_fn_enter(0)                       # main
    seen.append(lib.sg_current_vertex())
    for site, expect_f, expect_g in ((1, 2, 4), (2, 6, 8)):
        lib.sg_set_cur(site)                 # CALL f at site A or B
        lib.sg_fn_enter(1)
        seen.append(lib.sg_current_vertex())
        lib.sg_set_cur(1)                    # CALL g inside f
        lib.sg_fn_enter(2)
        seen.append(lib.sg_current_vertex())
        lib.sg_fn_exit()
        assert lib.sg_current_vertex() == (3 if site == 1 else 7)   # back on f's CALL g
        lib.sg_fn_exit()
        assert lib.sg_get_cur() == site      # the caller's local is restored
    lib.sg_set_cur(3)
    seen.append(lib.sg_current_vertex())
    assert seen == [0, 2, 4, 6, 8, 9]


def test_unexpected_callee_uses_its_default_instance_and_unknown_fid_the_root(core):
    ffi, lib, keep = core
    t, _ = make_tables(ffi, keep, **TWO_SITES)
    lib.sg_register_psg(t)
    lib.sg_fn_enter(0)
    lib.sg_set_cur(1)                        # the CALL f site, but g arrives (e.g. through a pointer)
    lib.sg_fn_enter(2)
    assert lib.sg_current_vertex() == 4      # g's default instance
    lib.sg_fn_exit()
    lib.sg_fn_enter(0xFFFFFFFF)              # tables not registered for this function
    assert lib.sg_current_vertex() == 0
    lib.sg_fn_exit()
    assert lib.sg_get_cur() == 1 and lib.sg_current_vertex() == 1


def test_deep_recursion_beyond_the_stack_stays_balanced(core):
    ffi, lib, keep = core
    t, _ = make_tables(ffi, keep, **TWO_SITES)
    lib.sg_register_psg(t)
    lib.sg_fn_enter(0)
    lib.sg_set_cur(2)
    depth = 1000                             # more than SG_STACK_MAX frames
    for _ in range(depth):
        lib.sg_fn_enter(1)
    for _ in range(depth):
        lib.sg_fn_exit()
    assert lib.sg_get_cur() == 2 and lib.sg_current_vertex() == 5


def write_and_read(lib, tmp_path, flags=1):
    out = tmp_path / "prof"
    assert lib.sg_write_profile(str(out).encode(), flags) == 0
    return out, pf.read_rank_file(out / "rank-0.sgp")


def test_samples_calls_and_waiting_land_on_the_current_vertex(core, tmp_path):
    ffi, lib, keep = core
    t, _ = make_tables(ffi, keep, **TWO_SITES)
    lib.sg_register_psg(t)
    lib.sg_core_init(0, 1)
    lib.sg_fn_enter(0)
    lib.sg_set_cur(2)
    lib.sg_fn_enter(1)                       # f via site B: vertex 6
    for _ in range(7):
        lib.sg_sample_now()
    lib.sg_fn_exit()
    lib.sg_set_cur(3)                        # the MPI vertex
    lib.sg_sample_now()
    lib.sg_record_mpi(9, 1500, 1)
    lib.sg_record_mpi(9, 500, 0)
    _, rec = write_and_read(lib, tmp_path)
    assert rec["nvertices"] == 10 and rec["psg_hash"] == "feedc0ffee123456"
    assert rec["samples"].tolist() == [0, 0, 0, 0, 0, 0, 7, 0, 0, 1]
    assert rec["calls"][9] == 2 and rec["time_ns"][9] == 2000 and rec["wait_ns"][9] == 1500
    assert rec["counter_names"] == [] and rec["counters"].shape == (0, 10)


def test_dependences_are_compressed_per_distinct_tuple(core, tmp_path):
    ffi, lib, keep = core
    lib.sg_core_init(3, 4)
    for i in range(1000):
        lib.sg_record_dep(0, DEP_SEND, 1, 7, 0, 64, 0)
        lib.sg_record_dep(0, DEP_RECV, 2, 7, 0, 32, 1000)
        if i % 10 == 0:
            lib.sg_record_dep(0, DEP_RECV, 2, 8, 0, 16, 0)   # another tag: another row
    out = tmp_path / "prof"
    assert lib.sg_write_profile(str(out).encode(), 1) == 0
    deps = np.sort(pf.read_rank_file(out / "rank-3.sgp")["deps"], order=["kind", "tag"])
    assert deps.dtype == DEP_DTYPE
    assert deps[["rank", "kind", "peer", "tag", "count", "bytes"]].tolist() == [
        (3, DEP_SEND, 1, 7, 1000, 64000), (3, DEP_RECV, 2, 7, 1000, 32000), (3, DEP_RECV, 2, 8, 100, 1600)]
    assert deps["wait"][1] == pytest.approx(1e-3)


def test_communicators_get_ids_that_every_member_computes_alike(core, core_path, tmp_path):
    ffi, lib, keep = core
    assert lib.sg_comm_add(ffi.new("int32_t[]", [0, 1, 2, 3]), 4) == 0        # world: id 0
    a = lib.sg_comm_add(ffi.new("int32_t[]", [0, 2]), 2)
    b = lib.sg_comm_add(ffi.new("int32_t[]", [1, 3]), 2)
    dup = lib.sg_comm_add(ffi.new("int32_t[]", [0, 2]), 2)                     # same group again
    ids = [lib.sg_comm_id(i) for i in (0, a, b, dup)]
    assert ids[0] == 0 and len(set(ids)) == 4
    assert lib.sg_comm_world_rank(b, 1) == 3 and lib.sg_comm_world_rank(b, 2) == -1
    # another rank (another copy of the library) registering the same groups agrees on the ids
    other = cffi.FFI()
    other.cdef(header_cdef())
    copy = tmp_path / "other.so"
    shutil.copy(core_path, copy)
    lib2 = other.dlopen(str(copy))
    lib2.sg_comm_add(other.new("int32_t[]", [0, 1, 2, 3]), 4)
    a2 = lib2.sg_comm_add(other.new("int32_t[]", [0, 2]), 2)
    dup2 = lib2.sg_comm_add(other.new("int32_t[]", [0, 2]), 2)
    assert [lib2.sg_comm_id(a2), lib2.sg_comm_id(dup2)] == [ids[1], ids[3]]
    lib.sg_record_dep(0, DEP_COLL, -1, -1, ids[2], 8, 0)
    lib.sg_core_init(1, 4)
    out = tmp_path / "prof"
    assert lib.sg_write_profile(str(out).encode(), 1) == 0
    rec = pf.read_rank_file(out / "rank-1.sgp")
    members = {int(c["id"]): rec["members"][c["offset"]:c["offset"] + c["size"]].tolist()
               for c in rec["comms"]}
    assert members == {0: [0, 1, 2, 3], ids[1]: [0, 2], ids[2]: [1, 3], ids[3]: [0, 2]}


def test_a_run_with_a_missing_rank_is_read_and_reported_incomplete(core, tmp_path):
    ffi, lib, keep = core
    lib.sg_core_init(1, 3)
    lib.sg_record_mpi(0, 10, 0)
    out = tmp_path / "prof"
    assert lib.sg_write_profile(str(out).encode(), 1) == 0
    run = pf.read_run(out)
    assert run.nranks == 3 and run.calls.shape == (3, 1)
    assert run.calls[:, 0].tolist() == [0, 1, 0]
    assert run.meta["incomplete"] and run.meta["missing_ranks"] == [0, 2]
    assert run.meta["written_by"] == [None, "finalize", None]


def test_file_size_does_not_depend_on_how_long_the_run_was(core, tmp_path):
    ffi, lib, keep = core
    lib.sg_core_init(0, 2)
    sizes = []
    for calls in (10, 10000):
        for _ in range(calls):
            lib.sg_record_mpi(0, 5, 1)
            lib.sg_record_dep(0, DEP_SEND, 1, 0, 0, 8, 0)
            lib.sg_sample_now()
        out = tmp_path / f"p{calls}"
        assert lib.sg_write_profile(str(out).encode(), 1) == 0
        sizes.append((out / "rank-0.sgp").stat().st_size)
    assert sizes[0] == sizes[1]


@pytest.fixture
def good_file(core, tmp_path):
    ffi, lib, keep = core
    lib.sg_core_init(0, 1)
    lib.sg_record_mpi(0, 5, 1)
    lib.sg_record_dep(0, DEP_SEND, 0, 1, 0, 8, 0)
    out = tmp_path / "prof"
    assert lib.sg_write_profile(str(out).encode(), 1) == 0
    return out / "rank-0.sgp"


@pytest.mark.parametrize("damage, message", [
    (lambda b: b[:-5], "truncated"),
    (lambda b: b[:100], "truncated"),
    (lambda b: b[:-1] + bytes([b[-1] ^ 0x40]), "corrupt"),
    (lambda b: b"XXPROF\0\0" + b[8:], "not a scalgraph profile"),
    (lambda b: b[:8] + (7).to_bytes(4, "little") + b[12:], "version 7"),
    (lambda b: b"", "not a scalgraph profile"),
])
def test_damaged_files_give_one_clear_user_error(good_file, damage, message):
    assert pf.read_run(good_file.parent).calls.sum() == 1
    good_file.write_bytes(damage(good_file.read_bytes()))
    with pytest.raises(UserError, match=message):
        pf.read_run(good_file.parent)


def test_reader_rejects_missing_directories_and_mixed_runs(good_file, tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        pf.read_run(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no rank-<r>.sgp"):
        pf.read_run(tmp_path / "empty")
    shutil.copy(good_file, good_file.parent / "rank-1.sgp")   # says rank 0 inside
    with pytest.raises(UserError, match="says it is rank 0"):
        pf.read_run(good_file.parent)
