"""A user's own P4 program on the switches of a topology, with tutorials-style runtime files.

`load_own_program` turns the options every command shares (`--program FILE.p4`, or
`--program X.json --p4info X.p4info.txtpb`, and `--runtime SWITCH=FILE` or the topology's
`runtime_json`) into an `OwnProgram`: the compiled pipeline, owning what the runtime files name
(innet.p4rt.runtime.managed_for), and each switch's entries, multicast groups and clone
sessions. `innet deploy`, `status` and `controller run` then treat it as they treat innet's
own intent: read, diff, write only the difference, keep reconciling.

Every switch of the topology runs the program. A switch without a runtime file holds nothing in
the tables the others' files name (the controller owns those tables network-wide).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from innet.bmv2.compile import Compiled, compile_program
from innet.errors import InputError
from innet.p4rt.controller import SwitchTarget
from innet.p4rt.deploy import Replication
from innet.p4rt.entities import Entry
from innet.p4rt.runtime import RuntimeFile, load_runtime, own_pipeline
from innet.p4rt.schema import Pipeline, load_pipeline
from innet.topology import Topology


@dataclass(frozen=True)
class OwnProgram:
    pipeline: Pipeline
    runtimes: dict[str, RuntimeFile]  # switch -> its runtime file (switches with one)
    switches: tuple[str, ...]  # every switch of the topology, in its order
    compiled: Compiled | None = None  # when the program was compiled from a .p4 file

    def entries(self) -> dict[str, tuple[Entry, ...]]:
        return {s: self.runtimes[s].entries if s in self.runtimes else ()
                for s in self.switches}

    def replication(self) -> dict[str, tuple[Replication, ...]]:
        return {s: self.runtimes[s].replication if s in self.runtimes else ()
                for s in self.switches}

    def targets(self, setup: Sequence[str] = ()) -> dict[str, SwitchTarget]:
        """What the long-running controller keeps on each switch."""
        pre = self.replication()
        return {s: SwitchTarget(es, tuple(setup), pre[s]) for s, es in self.entries().items()}


def compiled_program(program: str, p4info: str | None, cache_dir: str | Path | None = None
                     ) -> tuple[Pipeline, Compiled | None]:
    """A .p4 source compiled (cached by content), or a BMv2 JSON with its P4Info."""
    if program.endswith(".p4"):
        if p4info is not None:
            raise InputError("--p4info goes with a compiled --program X.json; a .p4 program "
                             "is compiled with its own")
        compiled = compile_program(program, cache_dir)
        return load_pipeline(str(compiled.p4info), str(compiled.bmv2_json)), compiled
    if p4info is None:
        raise InputError(f"--program {program}: a compiled program (BMv2 JSON) needs its "
                         "--p4info X.p4info.txtpb (or give the .p4 source to compile it)")
    return load_pipeline(p4info, program), None


def runtime_paths(topo: Topology, given: Sequence[str]) -> dict[str, Path]:
    """Each switch's runtime file: `--runtime SWITCH=FILE` first, else the topology's
    `runtime_json` (relative to the topology's folder or its parent)."""
    out = dict(topo.runtime_files())
    seen: set[str] = set()
    for item in given:
        switch, eq, path = item.partition("=")
        if not eq or not switch or not path:
            raise InputError(f"--runtime {item!r}: expected SWITCH=FILE, e.g. "
                             "s1=s1-runtime.json")
        if switch not in topo.switches:
            raise InputError(f"--runtime {item!r}: no switch {switch!r} in the topology",
                             source=topo.source)
        if switch in seen:
            raise InputError(f"--runtime: switch {switch!r} given twice")
        seen.add(switch)
        out[switch] = Path(path)
    return out


def load_own_program(topo: Topology, program: str, p4info: str | None = None,
                     runtime: Sequence[str] = (), cache_dir: str | Path | None = None
                     ) -> OwnProgram:
    """The program, every runtime file checked against its P4Info, and the pipeline owning
    what they name."""
    base, compiled = compiled_program(program, p4info, cache_dir)
    runtimes = {s: load_runtime(p, base.schema)
                for s, p in runtime_paths(topo, runtime).items()}
    return OwnProgram(own_pipeline(base, runtimes.values()), runtimes, tuple(topo.switches),
                      compiled)
