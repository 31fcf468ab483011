"""Topology files load, the shipped ones are sound, and each bad element is named."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from innet.cli import main
from innet.errors import InputError
from innet.topogen import binary_tree_topology, fat_tree_topology, leaf_spine_topology
from innet.topology import load_topology, topology_from_dict

SHIPPED = Path(__file__).resolve().parent.parent / "topologies"


def test_shipped_topologies_load_and_match_their_generators() -> None:
    expected = {"bt15.json": binary_tree_topology(), "fattree4.json": fat_tree_topology(4),
                "leafspine24.json": leaf_spine_topology()}
    for name, data in expected.items():
        topo = load_topology(SHIPPED / name)
        assert json.loads((SHIPPED / name).read_text()) == data, f"{name} is stale"
        g = topo.graph()
        import networkx as nx

        assert nx.is_connected(g)
    bt = load_topology(SHIPPED / "bt15.json")
    assert len(bt.switches) == 15 and bt.destination == "h0"
    assert bt.host_switch("h1") == ("s8", 2)
    ft = load_topology(SHIPPED / "fattree4.json")
    assert (len(ft.switches), len(ft.hosts)) == (20, 16)
    ls = load_topology(SHIPPED / "leafspine24.json")
    assert len(ls.hosts) == 24
    # 2:1: each leaf has 4 host links down and 2 spine links up, all of one speed
    ups = [far.node for _, far in ls.neighbours("l1") if far.node.startswith("sp")]
    downs = [far.node for _, far in ls.neighbours("l1") if far.node.startswith("h")]
    assert (len(downs), len(ups)) == (4, 2)


def small() -> dict[str, Any]:
    return {
        "hosts": {"h1": {"ip": "10.0.0.1", "mac": "08:00:00:00:00:01"},
                  "h2": {"ip": "10.0.0.2", "mac": "08:00:00:00:00:02"}},
        "switches": {"s1": {}, "s2": {"grpc": "127.0.0.1:9559", "device_id": 1}},
        "links": [["h1", "s1-p1"], ["s1-p2", "s2-p1", "1ms", 10],
                  {"a": "s2-p2", "b": "h2", "rate": 2}],
        "aggregation": {"destination": "h2"},
    }


def test_small_topology_round_trip() -> None:
    topo = topology_from_dict(small())
    assert topo.switches["s2"].remote and not topo.switches["s1"].remote
    assert topo.links[1].delay_ms == 1.0 and topo.links[1].mbps == 10
    assert topo.links[2].rate == 2.0
    again = topology_from_dict(topo.to_dict())
    assert again.links == topo.links and again.hosts == topo.hosts


def mutate(path: str, value: Any) -> dict[str, Any]:
    data = copy.deepcopy(small())
    target: Any = data
    keys = path.split(".")
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    last = keys[-1]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return data


BAD = [
    ("bad ip", mutate("hosts.h1.ip", "10.0.0.300"), "host 'h1': ip must be"),
    ("bad mac", mutate("hosts.h1.mac", "zz"), "host 'h1': mac must"),
    ("dup ip", mutate("hosts.h2.ip", "10.0.0.1"), "host 'h2': ip 10.0.0.1 is also"),
    ("unknown node", mutate("links.0", ["h1", "s9-p1"]), r"links\[0\]: unknown node 's9-p1'"),
    ("port reuse", mutate("links.1", ["s1-p1", "s2-p1"]), "port s1-p1 is already used"),
    ("no port", mutate("links.1", ["s1", "s2-p1"]), "needs its port"),
    ("bad delay", mutate("links.1", ["s1-p2", "s2-p1", "fast"]), "delay must look like"),
    ("bad mbps", mutate("links.1", ["s1-p2", "s2-p1", "1ms", 0]), "Mbps must be"),
    ("bad grpc", mutate("switches.s2", {"grpc": "nowhere"}), "switch 's2': grpc must be"),
    ("bad dest", mutate("aggregation", {"destination": "h9"}), "unknown host 'h9'"),
    ("orphan host", mutate("hosts.h3", {"ip": "10.0.0.3", "mac": "08:00:00:00:00:03"}),
     "host 'h3' is not linked"),
]


@pytest.mark.parametrize(("label", "data", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_topologies_name_the_element(label: str, data: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        topology_from_dict(data)


def test_topo_check_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topo", "check", str(SHIPPED / "bt15.json")]) == 0
    assert "15 switches" in capsys.readouterr().out
    bad = tmp_path / "t.json"
    bad.write_text(json.dumps(BAD[0][1]))
    assert main(["topo", "check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "host 'h1'" in err


ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = ROOT / "examples" / "tutorial-basic" / "line-topo" / "topology.json"


def test_a_tutorials_topology_loads_in_full() -> None:
    topo = load_topology(TUTORIAL)
    assert topo.name == "line-topo"
    h1 = topo.hosts["h1"]
    assert (h1.ip, h1.prefix_len, h1.mac) == ("10.0.1.1", 24, "08:00:00:00:01:11")
    assert h1.commands == ("route add default gw 10.0.1.10 dev eth0",
                           "arp -i eth0 -s 10.0.1.10 08:00:00:00:01:00")
    assert topo.switches["s1"].runtime_json == "line-topo/s1-runtime.json"
    # paths in the tutorials are relative to the exercise folder, the topology's parent
    assert topo.runtime_files() == {s: TUTORIAL.parent / f"{s}-runtime.json"
                                    for s in ("s1", "s2")}
    assert [(link.delay_ms, link.mbps) for link in topo.links] == [
        (0.0, None), (0.0, None), (0.0, 0.5), (5.0, None)]
    assert topo.ignored() == (
        "ignored: link delays (1 of 4 links): this kernel has no netem, so they cannot be "
        "emulated; host commands (h1, h3, h2): not run; innet gives hosts their address, "
        "routes and ARP entries itself")
    again = topology_from_dict(topo.to_dict(), source=str(TUTORIAL))
    assert again == topo and again.hosts["h1"].commands == h1.commands


def test_what_is_ignored_is_said_for_each_kind_and_nothing_for_innets_own() -> None:
    assert load_topology(ROOT / "topologies" / "bt15.json").ignored() is None
    data = json.loads(TUTORIAL.read_text())
    data["switches"]["s1"] |= {"cli_input": "s1-commands.txt", "program": "other.json"}
    note = topology_from_dict(data).ignored()
    assert note is not None and "cli_input (s1): not sent" in note
    assert "per-switch program (s1): every switch runs the one --program" in note


@pytest.mark.parametrize(("delay", "ms"), [("0", 0.0), ("5", 5.0), ("0.5", 0.5), ("5ms", 5.0),
                                           ("250us", 0.25), ("1s", 1000.0), (0, 0.0)])
def test_delays_without_a_unit_are_milliseconds(delay: object, ms: float) -> None:
    data = json.loads(TUTORIAL.read_text())
    data["links"][2][2] = delay
    assert topology_from_dict(data).links[2].delay_ms == ms


@pytest.mark.parametrize(("path", "value", "message"), [
    (("hosts", "h1", "ip"), "10.0.1.1/33", "ip must be an IPv4 address like 10.0.1.1"),
    (("hosts", "h1", "ip"), "10.0.1.1/x", "ip must be an IPv4 address like 10.0.1.1"),
    (("hosts", "h1", "ip"), "10.0.1.1/0", "ip's prefix length must be 1..32"),
    (("hosts", "h1", "commands"), "ls", "commands must be a list of strings"),
    (("hosts", "h1", "commands"), [1], "commands must be a list of strings"),
    (("switches", "s1", "runtime_json"), 3, "runtime_json must be a file name"),
    (("switches", "s1", "cli_input"), "", "cli_input must be a file name"),
])
def test_tutorial_fields_are_checked(path: tuple[str, ...], value: object, message: str
                                     ) -> None:
    data = json.loads(TUTORIAL.read_text())
    data[path[0]][path[1]][path[2]] = value
    with pytest.raises(InputError, match=message):
        topology_from_dict(data)


def test_topo_check_shows_runtime_files_and_what_it_ignores(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["topo", "check", str(TUTORIAL)]) == 0
    out = capsys.readouterr().out
    assert "line-topo: 3 hosts, 2 switches (0 remote), 4 links" in out
    assert str(TUTORIAL.parent / "s1-runtime.json") in out
    assert out.rstrip().splitlines()[-1].startswith("ignored: link delays (1 of 4 links): "
                                                    "this kernel has no netem")
    assert main(["topo", "check", "--json", str(TUTORIAL)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["runtime_json"]["s2"] == str(TUTORIAL.parent / "s2-runtime.json")
    assert doc["ignored"].startswith("ignored: ")
    data = json.loads(TUTORIAL.read_text())
    data["switches"]["s1"]["runtime_json"] = str(TUTORIAL.parent / "s1-runtime.json")
    data["switches"]["s2"]["runtime_json"] = "nowhere.json"
    (tmp_path / "topology.json").write_text(json.dumps(data))
    assert main(["topo", "check", str(tmp_path / "topology.json")]) == 2
    assert "switch 's2': runtime_json nowhere.json is not a file" in capsys.readouterr().err
