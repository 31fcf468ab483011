"""The CASSINI traffic agent on loopback: pacing, acknowledgements, ECN counting."""

from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from innet.emulation.agent import Phase, SenderSettings, receive, send


def run_pair(tmp_path: Path, tos: int, shift_ms: float = 0.0, *, react: bool = True,
             iterations: int = 4, listen_s: float = 1.6) -> tuple[Any, Any]:
    rx_out = tmp_path / "rx.json"
    rx = threading.Thread(target=receive, args=(listen_s, rx_out))
    rx.start()
    time.sleep(0.2)
    epoch = time.time() + 0.1
    sent = send(SenderSettings("127.0.0.1", 7, 200.0, (Phase(0, 50, 400.0),), shift_ms, epoch,
                               iterations, tos, react=react), tmp_path / "tx.json")
    rx.join()
    return sent, json.loads(rx_out.read_text())


def test_paced_phases_are_counted_and_acknowledged(tmp_path: Path) -> None:
    sent, got = run_pair(tmp_path, tos=0x02)
    assert [r["sent"] for r in sent["iterations"]] == [20, 20, 20, 20]  # 400 pps x 50 ms
    assert all(r["acked"] for r in sent["iterations"])
    # no congestion on loopback: each iteration takes its nominal 200 ms (plus an RTT)
    for r in sent["iterations"]:
        assert 195 <= r["iteration_ms"] <= 320, r
    starts = [r["start"] for r in sent["iterations"]]
    assert all(abs((b - a) - 0.2) < 0.03 for a, b in itertools.pairwise(starts))
    assert got["packets"] == {"7": 80} and got["ce"] == {"7": 0}
    assert [p["packets"] for p in got["per_iteration"]] == [20, 20, 20, 20]


def test_ce_marks_are_counted(tmp_path: Path) -> None:
    _, got = run_pair(tmp_path, tos=0x03, react=False)
    assert got["ce"] == {"7": 80}


def test_echoed_ce_marks_cut_the_sending_rate(tmp_path: Path) -> None:
    """Every packet leaves CE-marked (the sender sets CE itself, as a congested switch
    would): the receiver echoes the marks and the sender cuts its rate DCTCP-style, so the
    20 packets of each Up phase take longer than the nominal 50 ms, and every one arrives."""
    sent, got = run_pair(tmp_path, tos=0x03, iterations=2, listen_s=3.0)
    assert got["packets"] == {"7": 40} and got["ce"] == {"7": 40}
    assert all(r["acked"] and r["sent"] == 20 for r in sent["iterations"])
    assert sum(r["rate_cuts"] for r in sent["iterations"]) >= 3
    assert min(r["lowest_rate"] for r in sent["iterations"]) < 0.5
    # at the full rate an iteration takes 200 ms: the marked ones stretch past it
    assert max(r["iteration_ms"] for r in sent["iterations"]) > 260
    calm, _ = run_pair(tmp_path, tos=0x02, iterations=2, listen_s=1.0)
    assert all(r["rate_cuts"] == 0 and r["lowest_rate"] == 1.0 for r in calm["iterations"])


def test_shift_delays_the_first_iteration(tmp_path: Path) -> None:
    rx_out = tmp_path / "rx.json"
    rx = threading.Thread(target=receive, args=(0.8, rx_out))
    rx.start()
    epoch = time.time() + 0.1
    sent = send(SenderSettings("127.0.0.1", 1, 100.0, (Phase(0, 20, 500.0),), 60.0, epoch, 2),
                tmp_path / "tx.json")
    rx.join()
    assert abs(sent["iterations"][0]["start"] - (epoch + 0.060)) < 1e-9


def test_a_late_sender_realigns_on_its_grid_within_the_budget(tmp_path: Path) -> None:
    """Slowed by CE echoes, a 200 ms job with a 50 ms grid starts each late iteration on a
    grid point (epoch + shift + m x 50 ms) when that costs at most the budget, never a
    whole period; without re-alignment it just starts when the last one ends."""
    rx_out = tmp_path / "rx.json"
    rx = threading.Thread(target=receive, args=(4.0, rx_out), kwargs={"idle_s": 1.0})
    rx.start()
    time.sleep(0.2)
    epoch = time.time() + 0.1
    sent = send(SenderSettings("127.0.0.1", 3, 200.0, (Phase(100, 100, 400.0),), 30.0, epoch,
                               5, 0x03, grid_ms=50.0, budget_pct=25.0), tmp_path / "tx.json")
    rx.join()
    origin = epoch + 0.030
    starts = [r["start"] for r in sent["iterations"]]
    assert sent["realigned"] >= 1
    for prev, (a, b) in zip(sent["iterations"], itertools.pairwise(starts), strict=False):
        gap = b - a
        assert gap < 0.200 + prev["iteration_ms"] / 1000  # never a whole extra period
        ended = a + prev["iteration_ms"] / 1000
        if b - ended > 0.002:  # it waited: for a grid point, at most 25% of T
            assert ((b - origin) * 1000) % 50 == pytest.approx(0, abs=0.5) or \
                ((b - origin) * 1000) % 50 == pytest.approx(50, abs=0.5)
            assert b - ended <= 0.050 + 1e-3


def test_the_acknowledgement_says_when_the_end_reached_the_receivers_kernel(
        tmp_path: Path) -> None:
    """The sender's iteration ends when its END arrived (kernel time, one clock for every
    namespace), not when the receiver got round to answering: a receiver kept busy does not
    make iterations late."""
    import socket

    from innet.emulation import agent

    rx = threading.Thread(target=receive, args=(1.5, tmp_path / "rx.json"))
    rx.start()
    time.sleep(0.2)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(1.0)
        before = time.time()
        end = agent.HEADER.pack(agent.MAGIC, agent.KIND_END, 0, 7, 3, 0, 0)
        s.sendto(end, ("127.0.0.1", agent.DATA_PORT))
        first = s.recv(64)
        time.sleep(0.1)
        s.sendto(end, ("127.0.0.1", agent.DATA_PORT))  # asked again: the first arrival stays
        again = s.recv(64)
        after = time.time()
    rx.join()
    head = agent.HEADER.unpack_from(first)
    assert (head[1], head[3], head[4]) == (agent.KIND_ACK, 7, 3)
    (arrived,) = agent.ARRIVED.unpack_from(first, agent.HEADER.size)
    assert before <= arrived <= before + 0.1 and arrived < after
    assert agent.ARRIVED.unpack_from(again, agent.HEADER.size)[0] == arrived
