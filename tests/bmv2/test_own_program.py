"""A program that is not innet's (examples/tutorial-basic/basic.p4) on real BMv2 switches:
compiled by innet, its tutorials-style runtime files deployed (LPM, ternary and range entries
with priorities, a default action, multicast groups, a clone session) and read back equal,
then `innet controller run --program` restoring a switch killed with -9 and started blank.

No Mininet and no namespaces: the switches run without ports, which is all the control plane
needs.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from p4rt_helpers import eventually

from innet.bmv2.compile import compile_program
from innet.bmv2.own_program import OwnProgram, load_own_program
from innet.cli import main
from innet.errors import InputError
from innet.p4rt.client import SwitchClient, SwitchError
from innet.testing.bmv2 import BMv2Switch, missing_tools, start_switch
from innet.topology import load_topology

_missing = missing_tools("simple_switch_grpc", "p4c-bm2-ss")
pytestmark = [
    pytest.mark.dataplane,
    pytest.mark.skipif(bool(_missing), reason=f"not on PATH: {', '.join(_missing)} (BMv2, p4c)"),
    pytest.mark.usefixtures("no_p4runtime_threads_left"),
]

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples" / "tutorial-basic"
NAMES = ("s1", "s2")
SLOW = 30.0  # what a busy machine may take: these tests check that it happens, not speed


def test_innet_compiles_the_program_into_the_committed_files_and_caches_it(tmp_path: Path
                                                                          ) -> None:
    first = compile_program(EX / "basic.p4", tmp_path / "cache")
    assert not first.cached
    assert first.bmv2_json.read_bytes() == (EX / "basic.json").read_bytes(), \
        "examples/tutorial-basic/basic.json is stale: recompile with the command in basic.p4"
    assert first.p4info.read_bytes() == (EX / "basic.p4info.txtpb").read_bytes()
    assert compile_program(EX / "basic.p4", tmp_path / "cache").cached
    # an included file is part of the key: changing it recompiles
    src = tmp_path / "src"
    src.mkdir()
    (src / "consts.p4").write_text("const bit<16> TYPE_IPV4 = 0x800;\n")
    text = (EX / "basic.p4").read_text().replace("const bit<16> TYPE_IPV4 = 0x800;",
                                                 '#include "consts.p4"')
    (src / "basic.p4").write_text(text)
    a = compile_program(src / "basic.p4", tmp_path / "cache")
    (src / "consts.p4").write_text("const bit<16> TYPE_IPV4 = 0x0800; // same value\n")
    b = compile_program(src / "basic.p4", tmp_path / "cache")
    assert not b.cached and a.bmv2_json.parent != b.bmv2_json.parent


def test_a_program_p4c_refuses_is_one_line_naming_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.p4"
    bad.write_text((EX / "basic.p4").read_text().replace("hdr.ipv4.ttl - 1", "hdr.ipv4.tll - 1"))
    with pytest.raises(InputError) as info:
        compile_program(bad, tmp_path / "cache")
    text = str(info.value)
    line = next(i for i, t in enumerate(bad.read_text().splitlines(), 1) if "tll" in t)
    assert text.startswith(f"{bad}:{line}: ") and "tll" in text and "\n" not in text
    log = Path(text.rsplit("p4c's full output: ", 1)[1].rstrip(")"))
    assert "error" in log.read_text()


@pytest.fixture
def network(tmp_path: Path) -> Iterator[tuple[Path, dict[str, BMv2Switch]]]:
    """Two blank switches and the tutorials' topology pointing at them."""
    switches: dict[str, BMv2Switch] = {}
    try:
        for n in NAMES:
            switches[n] = start_switch(n, tmp_path)
        data = json.loads((EX / "line-topo" / "topology.json").read_text())
        for n, sw in switches.items():
            data["switches"][n] = {"grpc": sw.address.grpc, "thrift_port": sw.address.thrift_port,
                                   "runtime_json": str(EX / "line-topo" / f"{n}-runtime.json")}
        topo = tmp_path / "topology.json"
        topo.write_text(json.dumps(data))
        yield topo, switches
    finally:
        for sw in switches.values():
            sw.stop()


def held(own: OwnProgram, sw: BMv2Switch) -> tuple[set[object], set[object]] | None:
    """The switch's entries and replication engine, or None when it is down or runs
    something else."""
    pipe = own.pipeline
    try:
        with SwitchClient(sw.address, pipe.schema, writer=False) as c:
            if c.pipeline_cookie() != pipe.cookie:
                return None
            return (set(c.read_entries(pipe.managed.tables, pipe.managed.default_tables)),
                    set(c.read_replication()))
    except SwitchError:
        return None


def wanted(own: OwnProgram, name: str) -> tuple[set[object], set[object]]:
    return set(own.entries()[name]), set(own.replication()[name])


def test_runtime_files_are_deployed_read_back_and_restored_by_the_controller(
        network: tuple[Path, dict[str, BMv2Switch]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    topo, switches = network
    cache = tmp_path / "cache"
    monkeypatch.setenv("INNET_CACHE_DIR", str(cache))
    program = str(EX / "basic.p4")
    assert main(["deploy", "--topology", str(topo), "--program", program]) == 0
    out = capsys.readouterr().out
    assert "s1 (" in out and "load program; +6 ~0 -0" in out
    assert "2 switches (2 changed, 0 unchanged, 0 failed), 2 program loads, wrote 12" in out
    own = load_own_program(load_topology(topo), program, cache_dir=cache / "p4c")
    assert own.compiled is not None and own.compiled.cached  # the deploy compiled it
    for n in NAMES:  # what BMv2 reports is what the files say, ternary and range included
        assert held(own, switches[n]) == wanted(own, n)
    assert main(["deploy", "--topology", str(topo), "--program", program]) == 0
    assert capsys.readouterr().out.count(": unchanged") == 2

    log = tmp_path / "controller.log"
    with log.open("wb") as f:
        ctl = subprocess.Popen([sys.executable, "-m", "innet.cli", "controller", "run",
                                "--topology", str(topo), "--program", program,
                                "--interval", "0.5"], stdout=f, stderr=subprocess.STDOUT,
                               cwd=ROOT)
    try:
        assert eventually(lambda: "s1: in the intended state" in log.read_text()
                          and "s2: in the intended state" in log.read_text(), SLOW), \
            log.read_text()
        old = switches["s1"]
        old.proc.send_signal(signal.SIGKILL)
        old.proc.wait(5)
        port = int(old.address.grpc.rsplit(":", 1)[1])
        switches["s1"] = start_switch("s1", tmp_path, grpc_port=port,
                                      thrift_port=old.address.thrift_port)
        assert eventually(lambda: held(own, switches["s1"]) == wanted(own, "s1"), SLOW), \
            log.read_text()
        assert held(own, switches["s2"]) == wanted(own, "s2")
    finally:
        if ctl.poll() is None:
            ctl.send_signal(signal.SIGTERM)
        code = ctl.wait(20)
    text = log.read_text()
    assert code == 0, text
    assert "s1: stream lost" in text and "s1: program loaded again" in text
    assert "controller: stopped on SIGTERM" in text


def test_status_reads_the_program_s_tables_and_says_they_match(
        network: tuple[Path, dict[str, BMv2Switch]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    topo, _ = network
    args = ["--topology", str(topo), "--program", str(EX / "basic.json"), "--p4info",
            str(EX / "basic.p4info.txtpb")]
    assert main(["deploy", *args]) == 0
    capsys.readouterr()
    assert main(["status", *args]) == 0
    out = capsys.readouterr().out
    assert "7 entries, as its runtime file says" in out
    assert "  acl [ttl=0x0..0x1] priority 20 -> drop()" in out
    assert "  clone session 100 -> port 1 (instance 0)" in out
