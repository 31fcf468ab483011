"""What `innet status --json` reports of each switch, read without ever taking it over: is it
reachable, which program runs, how many entries it holds, which controller is primary, and
(given an intent) how far it is from it.

Generic like the rest of the layer: the tables compared and how entries read come from the
`Pipeline` (its `managed` tables and its schema's `describe`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from innet.p4rt.client import SwitchAddress, SwitchClient, SwitchError, election_int
from innet.p4rt.deploy import diff
from innet.p4rt.entities import Entry
from innet.p4rt.schema import Pipeline


def probe(addresses: Mapping[str, SwitchAddress], pipeline: Pipeline,
          want: Mapping[str, Sequence[Entry]] | None) -> dict[str, dict[str, Any]]:
    """Per switch: reachable, pipeline cookie, entry count, primary's election id, and (with
    `want`) what differs from it. Read-only: a reader's election id never takes over."""
    def one(name: str) -> dict[str, Any]:
        rec: dict[str, Any] = {"reachable": False, "pipeline": None, "entries": 0,
                               "primary_election_id": None}
        try:
            with SwitchClient(addresses[name], pipeline.schema, writer=False) as c:
                rec["reachable"] = True
                arb = c.arbitration
                # our reader primary means no controller is connected: report none
                if arb is not None and not arb.primary and arb.primary_election_id is not None:
                    rec["primary_election_id"] = election_int(arb.primary_election_id)
                rec["pipeline"] = c.pipeline_cookie()
                rec["entries"] = c.count_entries()
                if want is not None and name in want:
                    rec["difference"] = difference(c, pipeline, want[name])
        except SwitchError as exc:
            rec["error"] = str(exc)
        return rec

    with ThreadPoolExecutor(max_workers=min(32, max(1, len(addresses)))) as pool:
        futures = {n: pool.submit(one, n) for n in addresses}
    return {n: f.result() for n, f in futures.items()}


def difference(client: SwitchClient, pipeline: Pipeline, want: Sequence[Entry]
               ) -> dict[str, Any]:
    """What a deploy would do to this switch, as lists of readable entries."""
    ours = client.pipeline_cookie() == pipeline.cookie
    managed = pipeline.managed
    have = client.read_entries(managed.tables, managed.default_tables) if ours else []
    d = diff(have, list(want))
    describe = pipeline.schema.describe
    return {"load_program": not ours,
            "missing": [describe(e) for e in d.insert],
            "wrong": [describe(new) for _, new in d.modify],
            "extra": [describe(e) for e in d.delete],
            "in_intent": ours and d.writes == 0}
