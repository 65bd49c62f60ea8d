"""The wrappers' command-line reading and toolchain flag parsing: pure functions, no compiler needed."""
from __future__ import annotations

import pytest

from scalgraph.errors import UserError
from scalgraph.static.args import parse_args
from scalgraph.static.driver import max_loop_depth, passthrough_command, show_command, static_archives
from scalgraph.static.toolchain import Compiler, MPIFlags, Toolchain, split_show_words


def test_compile_only_with_output_and_preprocessor_flags():
    inv = parse_args(["-c", "-O2", "-g", "-I", "inc", "-Iinc2", "-DN=4", "-D", "M", "a.c", "-o", "a.o"])
    assert inv.mode == "compile"
    assert inv.output == "a.o"
    assert [s.path for s in inv.sources] == ["a.c"] and inv.sources[0].lang == "c"
    assert inv.compile_flags == ["-O2", "-g", "-I", "inc", "-Iinc2", "-DN=4", "-D", "M"]
    assert inv.opt_level == 2 and inv.has_debug


def test_link_keeps_order_and_splits_link_only_flags():
    inv = parse_args(["main.c", "util.o", "-L", "lib", "-lfoo", "-Llib2", "-l", "bar", "libz.a",
                      "-Wl,-rpath,/x", "-pthread", "-o", "app", "-std=c99"])
    assert inv.mode == "link"
    assert inv.link_items == [0, "util.o", "-L", "lib", "-lfoo", "-Llib2", "-l", "bar", "libz.a",
                              "-Wl,-rpath,/x", "-pthread"]
    assert inv.link_inputs == ["util.o", "libz.a"]
    assert inv.libs == ["foo", "bar"] and inv.lib_dirs == ["lib", "lib2"]
    assert "-std=c99" in inv.compile_flags and "-std=c99" not in inv.link_items
    assert "-pthread" in inv.compile_flags          # both steps
    assert not any(isinstance(x, str) and x.startswith("-L") for x in inv.compile_flags)


@pytest.mark.parametrize("flag,level", [("-O0", 0), ("-O", 1), ("-O1", 1), ("-Og", 1), ("-O2", 2),
                                        ("-Os", 2), ("-Oz", 2), ("-O3", 3), ("-Ofast", 3)])
def test_optimisation_level_is_kept(flag, level):
    assert parse_args(["-O3", flag, "-c", "x.c"]).opt_level == level


def test_debug_flag_detection():
    assert not parse_args(["-c", "x.c"]).has_debug
    assert not parse_args(["-g", "-g0", "-c", "x.c"]).has_debug
    assert parse_args(["-gdwarf-4", "-c", "x.c"]).has_debug


@pytest.mark.parametrize("argv", [["-E", "x.c"], ["-M", "x.c"], ["-MM", "x.c"], ["-S", "x.c"],
                                  ["--version"], ["-v"], ["-dumpversion"], ["-print-search-dirs"],
                                  ["-fsyntax-only", "x.c"], [], ["-O2"]])
def test_calls_that_build_nothing_pass_through(argv):
    assert parse_args(argv).mode == "passthrough"


def test_dependency_generation_during_compile_is_a_compile():
    inv = parse_args(["-MMD", "-MF", "x.d", "-c", "x.c"])
    assert inv.mode == "compile" and inv.compile_flags == ["-MMD", "-MF", "x.d"]


@pytest.mark.parametrize("flag", ["-show", "-showme", "--showme", "-compile_info", "-link_info"])
def test_show_flags(flag):
    assert parse_args([flag, "x.c"]).mode == "show"


def test_languages_by_suffix_and_by_x():
    inv = parse_args(["a.c", "b.cpp", "c.f90", "d.F", "e.S", "f.o", "-x", "c", "g.inc", "-x", "none", "h.o"])
    assert [(s.path, s.lang, s.explicit_lang) for s in inv.sources] == [
        ("a.c", "c", ""), ("b.cpp", "c++", ""), ("c.f90", "fortran", ""), ("d.F", "fortran", ""),
        ("e.S", "asm", ""), ("g.inc", "c", "c")]
    assert inv.link_inputs == ["f.o", "h.o"]


def test_pip_mpich_show_line():
    words = ("-I/v/include -L/v/lib -Wl,-rpath -Wl,/v/lib -Wl,--enable-new-dtags -lmpi").split()
    f = split_show_words("mpicc", words)
    assert f.compile == ("-I/v/include",)
    assert f.link == ("-L/v/lib", "-Wl,-rpath", "-Wl,/v/lib", "-Wl,--enable-new-dtags", "-lmpi")


def test_debian_mpif90_show_line_drops_gfortran_only_flags():
    words = ("-O2 -ffile-prefix-map=/build/x=. -fstack-protector-strong -fallow-invalid-boz "
             "-fallow-argument-mismatch -Wl,-z,relro -I/usr/include/x86_64-linux-gnu/mpich "
             "-L/usr/lib/x86_64-linux-gnu -lmpichfort -lmpich").split()
    f = split_show_words("mpif90", words)
    assert f.compile == ("-I/usr/include/x86_64-linux-gnu/mpich",)
    assert f.link == ("-Wl,-z,relro", "-L/usr/lib/x86_64-linux-gnu", "-lmpichfort", "-lmpich")


def test_open_mpi_showme_line():
    words = ("-I/usr/lib/x86_64-linux-gnu/openmpi/include -I/usr/lib/x86_64-linux-gnu/openmpi/include/openmpi "
             "-pthread -L/usr/lib/x86_64-linux-gnu/openmpi/lib -lmpi").split()
    f = split_show_words("mpicc", words)
    assert f.compile[:2] == ("-I/usr/lib/x86_64-linux-gnu/openmpi/include",
                             "-I/usr/lib/x86_64-linux-gnu/openmpi/include/openmpi")
    assert "-pthread" in f.compile and f.link == ("-pthread", "-L/usr/lib/x86_64-linux-gnu/openmpi/lib", "-lmpi")


TC = Toolchain("c", Compiler(("clang",), ("-fno-sanitize=all",)),
               MPIFlags("mpicc", ("-I/m/include",), ("-L/m/lib", "-lmpi")), "mpicc")


def test_show_prints_the_plain_compile_and_link_command():
    assert show_command(TC, ["-show", "-O2", "a.c", "-o", "a"]) == [
        "clang", "-fno-sanitize=all", "-O2", "a.c", "-o", "a", "-I/m/include", "-L/m/lib", "-lmpi"]


def test_passthrough_keeps_the_users_arguments_unchanged():
    assert passthrough_command(TC, ["--version"]) == ["clang", "--version"]
    assert passthrough_command(TC, ["-E", "-DX", "a.c"]) == [
        "clang", "-fno-sanitize=all", "-E", "-DX", "a.c", "-I/m/include"]


def test_static_archives_follow_the_linkers_search(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "libone.a").write_bytes(b"!<arch>\n")
    (tmp_path / "b" / "libone.a").write_bytes(b"!<arch>\n")
    (tmp_path / "a" / "libtwo.so").write_bytes(b"")
    (tmp_path / "b" / "libtwo.a").write_bytes(b"!<arch>\n")
    inv = parse_args([f"-L{tmp_path / 'a'}", "-L", str(tmp_path / "b"), "m.o", "-lone", "-ltwo", "-lnone"])
    assert static_archives(inv) == [str(tmp_path / "a" / "libone.a")]    # libtwo: the .so wins


def test_max_loop_depth_from_environment(monkeypatch):
    monkeypatch.setenv("SCALGRAPH_MAX_LOOP_DEPTH", "1")
    assert max_loop_depth() == 1
    monkeypatch.setenv("SCALGRAPH_MAX_LOOP_DEPTH", "deep")
    with pytest.raises(UserError, match="SCALGRAPH_MAX_LOOP_DEPTH"):
        max_loop_depth()


def test_dependency_flags_get_their_own_step_named_after_the_object():
    from scalgraph.static.driver import dependency_command, split_dependency_flags
    rest, deps = split_dependency_flags(["-O2", "-MMD", "-MP", "-MF", "o/a.d", "-Iinc", "-MTx"])
    assert rest == ["-O2", "-Iinc"] and deps == ["-MMD", "-MP", "-MF", "o/a.d", "-MTx"]
    cmd = dependency_command(Compiler(("clang",)), rest, ["-MD"], "a.c", "o/a.o")
    assert cmd == ["clang", "-O2", "-Iinc", "-M", "-MT", "o/a.o", "-MF", "o/a.d", "a.c"]


def test_option_missing_its_value_goes_to_the_compiler_to_complain():
    assert parse_args(["a.c", "-o"]).mode == "passthrough"
    assert parse_args(["-c", "a.c", "-I"]).mode == "passthrough"


def test_response_files_are_expanded_like_gcc(tmp_path):
    from scalgraph.static.args import expand_response_files
    inner = tmp_path / "inner.rsp"
    inner.write_text("-lm\n")
    outer = tmp_path / "link.rsp"
    outer.write_text(f"a.o 'dir with space/b.o'\n-L lib @{inner}\n")
    assert expand_response_files(["-o", "app", f"@{outer}", "@missing"]) == [
        "-o", "app", "a.o", "dir with space/b.o", "-L", "lib", "-lm", "@missing"]
