"""The SOAR model: phi on hand-worked trees, and loud validation of instance files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from innet.cli import main
from innet.errors import InputError
from innet.soar.model import (
    Tree,
    load_tree,
    messages,
    phi,
    resolve_blue,
    tree_from_dict,
    tree_to_dict,
)

SPEC_EXAMPLE = {
    "root": "d",
    "nodes": [{"id": "d"},
              {"id": "s1", "parent": "d", "rate": 4.0, "load": 0},
              {"id": "s2", "parent": "s1", "rate": 1.0, "load": 3}],
    "available": ["s1", "s2"],
}


def hand_tree() -> Tree:
    # d <- s1 (rate 2) <- {s2 (load 3), s3 (load 2) <- s4 (rate 0.5, load 1)}
    return Tree.build(["d", "s1", "s2", "s3", "s4"], [-1, 0, 1, 1, 3],
                      [1, 2, 1, 1, 0.5], [0, 0, 3, 2, 1])


def test_phi_of_the_spec_example() -> None:
    tree = tree_from_dict(SPEC_EXAMPLE)
    # all red: s2 sends 3 at rate 1, s1 forwards 3 at rate 4
    assert phi(tree, []) == 3 + 3 / 4
    assert phi(tree, ["s2"]) == 1 + 1 / 4
    assert phi(tree, ["s1"]) == 3 + 1 / 4
    assert phi(tree, ["s1", "s2"]) == 1 + 1 / 4


def test_phi_hand_worked() -> None:
    tree = hand_tree()
    assert phi(tree, []) == 2 + 3 + 3 + 6 / 2
    assert phi(tree, ["s3"]) == 2 + 1 + 3 + 4 / 2
    assert phi(tree, ["s1"]) == 2 + 3 + 3 + 1 / 2
    assert phi(tree, ["s1", "s3"]) == 2 + 1 + 3 + 1 / 2
    assert phi(tree, ["s4"]) == phi(tree, [])  # one message in, one message out
    msgs = messages(tree, resolve_blue(tree, ["s3"]))
    assert dict(zip(tree.ids, msgs.tolist(), strict=True)) == \
        {"d": 0, "s1": 4, "s2": 3, "s3": 1, "s4": 1}


def test_blue_switch_without_load_sends_nothing() -> None:
    tree = Tree.build(["d", "a", "b", "c"], [-1, 0, 1, 1], [1, 1, 1, 1], [0, 0, 0, 2])
    assert phi(tree, ["b"]) == phi(tree, [])
    assert messages(tree, resolve_blue(tree, ["b"]))[tree.index["b"]] == 0


def test_load_on_inner_nodes_and_root() -> None:
    tree = Tree.build(["d", "a", "b"], [-1, 0, 1], [1, 1, 1], [5, 2, 1])
    assert phi(tree, []) == 1 + 3  # d's own load never travels
    assert phi(tree, ["a"]) == 1 + 1


def test_round_trip_of_the_file_format(tmp_path: Path) -> None:
    tree = tree_from_dict(SPEC_EXAMPLE)
    data = tree_to_dict(tree)
    again = tree_from_dict(json.loads(json.dumps(data)))
    assert again.ids == tree.ids and phi(again, []) == phi(tree, [])
    path = tmp_path / "i.json"
    path.write_text(json.dumps({**SPEC_EXAMPLE, "available": ["s2"]}))
    assert load_tree(path).available_ids() == ["s2"]


def test_defaults_rate_one_load_zero_all_available() -> None:
    tree = tree_from_dict({"root": "d", "nodes": [{"id": "d"}, {"id": "a", "parent": "d"}]})
    assert tree.rate[1] == 1.0 and tree.load[1] == 0 and tree.available_ids() == ["a"]


def _nodes(*extra: dict[str, object]) -> dict[str, object]:
    return {"root": "d", "nodes": [{"id": "d"}, {"id": "a", "parent": "d", "load": 1},
                                   *extra]}


BAD = [
    ("cycle", {"root": "d", "nodes": [{"id": "d"}, {"id": "a", "parent": "b"},
                                      {"id": "b", "parent": "a"}]}, "'a': cycle"),
    ("self loop", _nodes({"id": "b", "parent": "b"}), "'b': cycle"),
    ("two roots", _nodes({"id": "e"}), "several roots: node 'e'"),
    ("unknown parent", _nodes({"id": "b", "parent": "zz"}), "'b': unknown parent 'zz'"),
    ("zero rate", _nodes({"id": "b", "parent": "a", "rate": 0}), "'b': rate must be"),
    ("negative rate", _nodes({"id": "b", "parent": "a", "rate": -2}), "'b': rate must be"),
    ("negative load", _nodes({"id": "b", "parent": "a", "load": -1}), "'b': load must be"),
    ("fractional load", _nodes({"id": "b", "parent": "a", "load": 1.5}), "'b': load must be"),
    ("boolean load", _nodes({"id": "b", "parent": "a", "load": True}), "'b': load must be"),
    ("unknown available", {**_nodes(), "available": ["a", "q"]}, "available: unknown node 'q'"),
    ("root available", {**_nodes(), "available": ["d"]}, "'d' is the root"),
    ("duplicate id", _nodes({"id": "a", "parent": "d"}), "'a': defined twice"),
    ("root missing", {"root": "x", "nodes": [{"id": "d"}]}, "root 'x' is not among"),
    ("root with parent", {"root": "d", "nodes": [{"id": "d", "parent": "a"},
                                                 {"id": "a", "parent": "d"}]}, "must not have"),
    ("missing nodes", {"root": "d"}, "missing field 'nodes'"),
    ("unknown field", _nodes({"id": "b", "parent": "a", "weight": 3}), "'b': unknown field"),
]


@pytest.mark.parametrize(("label", "data", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_instances_are_refused(label: str, data: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        tree_from_dict(data)


@pytest.mark.parametrize(("label", "data", "message"), BAD, ids=[b[0] for b in BAD])
def test_cli_refuses_bad_instances_in_one_line(
    label: str, data: dict[str, object], message: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    assert main(["soar", "solve", str(path), "-k", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert str(path) in err and message.replace("\\", "") in err


def test_cli_refuses_negative_k(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(SPEC_EXAMPLE))
    with pytest.raises(SystemExit) as exc:
        main(["soar", "solve", str(path), "-k", "-3"])
    assert exc.value.code == 2
    assert "argument -k: expected an integer in 0..2147483647, got -3" in capsys.readouterr().err


def test_cli_refuses_unreadable_and_broken_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["soar", "solve", str(tmp_path / "none.json"), "-k", "1"]) == 2
    assert "none.json: cannot read" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text("{\"root\": ")
    assert main(["soar", "solve", str(broken), "-k", "1"]) == 2
    assert "broken.json: not valid JSON" in capsys.readouterr().err
