"""`innet pcap summary`: per-flow packets, bytes and CE marks, and a timeline, from a capture.

Captures of a congested run are large, so the file is streamed (`innet.capture`, which
also refuses a damaged capture instead of reading part of it) and each frame's
Ethernet/IPv4/UDP/TCP headers are read with `struct` (no per-packet scapy objects): memory
stays constant whatever the capture's size.
"""

from __future__ import annotations

import argparse
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from innet.cli.argtypes import float_in, int_in
from innet.cli.options import add_json
from innet.cli.outpaths import image_file
from innet.errors import InputError
from innet.jsonout import print_json
from innet.table import format_table

MAX_BINS = 1_000_000  # timeline bins: three lists of Python ints, about 100 MB

ETH_IPV4 = 0x0800
ETH_VLAN = 0x8100
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LINUX_SLL = 113


@dataclass(frozen=True)
class Frame:
    """What the summary needs of one IPv4 packet."""

    time: float
    length: int  # bytes on the wire (the capture's original length)
    src: str
    dst: str
    proto: int
    sport: int
    dport: int
    ecn: int  # 0 not-ECT, 1 ECT(1), 2 ECT(0), 3 CE


@dataclass
class FlowStats:
    packets: int = 0
    bytes: int = 0
    ect: int = 0
    ce: int = 0
    first: float = float("inf")
    last: float = float("-inf")

    def add(self, f: Frame) -> None:
        self.packets += 1
        self.bytes += f.length
        self.ect += f.ecn in (1, 2)
        self.ce += f.ecn == 3
        self.first = min(self.first, f.time)
        self.last = max(self.last, f.time)


@dataclass
class Summary:
    flows: dict[tuple[str, str, int, int, int], FlowStats] = field(default_factory=dict)
    other_packets: int = 0  # not IPv4 (ARP, IPv6, ...)
    start: float = 0.0
    end: float = 0.0
    bin_s: float = 0.0
    timeline_bytes: list[int] = field(default_factory=list)
    timeline_ce: list[int] = field(default_factory=list)
    timeline_packets: list[int] = field(default_factory=list)

    @property
    def packets(self) -> int:
        return sum(f.packets for f in self.flows.values()) + self.other_packets

    def to_dict(self) -> dict[str, Any]:
        return {
            "packets": self.packets,
            "non_ipv4_packets": self.other_packets,
            "duration_s": self.end - self.start,
            "flows": [
                {"src": k[0], "dst": k[1], "proto": _proto_name(k[2]), "sport": k[3],
                 "dport": k[4], "packets": v.packets, "bytes": v.bytes, "ect": v.ect,
                 "ce": v.ce, "duration_s": max(0.0, v.last - v.first)}
                for k, v in sorted(self.flows.items(), key=lambda kv: -kv[1].bytes)
            ],
            "timeline": {"bin_s": self.bin_s, "bytes": self.timeline_bytes,
                         "packets": self.timeline_packets, "ce": self.timeline_ce},
        }


def _proto_name(proto: int) -> str:
    return {6: "tcp", 17: "udp", 1: "icmp"}.get(proto, str(proto))


def _ip(b: bytes) -> str:
    return f"{b[0]}.{b[1]}.{b[2]}.{b[3]}"


def parse_frame(data: bytes, linktype: int, t: float, wirelen: int) -> Frame | None:
    """IPv4 fields of one captured frame, or None if it is not IPv4."""
    if linktype == LINKTYPE_ETHERNET:
        if len(data) < 14:
            return None
        off = 14
        etype = struct.unpack_from("!H", data, 12)[0]
        while etype == ETH_VLAN and len(data) >= off + 4:
            etype = struct.unpack_from("!H", data, off + 2)[0]
            off += 4
        if etype != ETH_IPV4:
            return None
    elif linktype == LINKTYPE_LINUX_SLL:
        if len(data) < 16 or struct.unpack_from("!H", data, 14)[0] != ETH_IPV4:
            return None
        off = 16
    elif linktype == LINKTYPE_RAW:
        off = 0
    else:
        return None
    if len(data) < off + 20 or data[off] >> 4 != 4:
        return None
    ihl = (data[off] & 0x0F) * 4
    ecn = data[off + 1] & 0x03
    proto = data[off + 9]
    src = _ip(data[off + 12:off + 16])
    dst = _ip(data[off + 16:off + 20])
    sport = dport = 0
    l4 = off + ihl
    if proto in (6, 17) and len(data) >= l4 + 4:
        sport, dport = struct.unpack_from("!HH", data, l4)
    return Frame(t, wirelen, src, dst, proto, sport, dport, ecn)


def read_frames(path: str | Path) -> Iterator[Frame | None]:
    """Stream a pcap or pcapng; yields None for frames that are not IPv4. A damaged capture
    (a record length that is corrupt or cut short) is an InputError, never a partial read."""
    from innet.capture import read_records

    for rec in read_records(path):
        yield parse_frame(rec.data, rec.linktype, rec.time, rec.wirelen)


def summarise(path: str | Path, bins: int = 200, bin_s: float | None = None) -> Summary:
    """Two streaming passes: flows and time span first, then the timeline on fixed bins."""
    summary = Summary()
    start, end = float("inf"), float("-inf")
    for f in read_frames(path):
        if f is None:
            summary.other_packets += 1
            continue
        key = (f.src, f.dst, f.proto, f.sport, f.dport)
        stats = summary.flows.get(key)
        if stats is None:
            stats = summary.flows[key] = FlowStats()
        stats.add(f)
        start, end = min(start, f.time), max(end, f.time)
    if not summary.flows:
        return summary
    summary.start, summary.end = start, end
    span = max(end - start, 1e-6)
    if bin_s:
        # the bins start at the first packet and the last packet opens one more: count them
        # (as a float, before any list is made) against the same bound as --bins
        width = bin_s
        if span / width >= MAX_BINS:
            raise InputError(f"the capture spans {span:.6g} s: bins of {width * 1e3:g} ms would "
                             f"be {span / width + 1:.3g} bins, more than {MAX_BINS}; give a "
                             "larger --bin-ms", source=str(path))
        n_bins = int(span / width) + 1
    else:
        # exactly `bins` bins over the span (--bins is bounded by MAX_BINS where it is read);
        # the last packet, at the very end, counts in the last one
        width = span / bins
        n_bins = bins
    summary.bin_s = width
    summary.timeline_bytes = [0] * n_bins
    summary.timeline_packets = [0] * n_bins
    summary.timeline_ce = [0] * n_bins
    for f in read_frames(path):
        if f is None:
            continue
        i = min(n_bins - 1, int((f.time - start) / width))
        summary.timeline_bytes[i] += f.length
        summary.timeline_packets[i] += 1
        summary.timeline_ce[i] += f.ecn == 3
    return summary


def plot_summary(summary: Summary, out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [i * summary.bin_s for i in range(len(summary.timeline_bytes))]
    mbps = [b * 8 / summary.bin_s / 1e6 for b in summary.timeline_bytes]
    fig, ax = plt.subplots(figsize=(9, 3.8))
    ax.plot(t, mbps, color="tab:blue", lw=1, label="rate (Mbit/s)")
    ax.set_xlabel("seconds since the first packet")
    ax.set_ylabel("Mbit/s", color="tab:blue")
    ax2 = ax.twinx()
    ax2.bar(t, summary.timeline_ce, width=summary.bin_s, color="tab:red", alpha=0.5,
            label="CE-marked packets")
    ax2.set_ylabel("CE marks per bin", color="tab:red")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def register(sub: Any) -> None:
    pcap = sub.add_parser("pcap", help="summarise packet captures (flows, rates, CE marks)",
                          description="Read packet captures (pcap or pcapng, streamed) and "
                                      "summarise them; a damaged capture is refused, never "
                                      "read in part.")
    psub = pcap.add_subparsers(dest="pcap_command", metavar="SUBCOMMAND", required=True)
    s = psub.add_parser(
        "summary",
        help="per flow: packets, bytes, CE marks; a rate and marks timeline",
        description="Streams the capture (pcap or pcapng, any size): per IPv4 flow (src, dst, "
                    "protocol, ports) the packets, bytes, ECN-capable (ECT) and CE-marked "
                    "packets; with --plot, the rate and the CE marks over time.",
    )
    s.add_argument("capture", metavar="CAPTURE.pcap", help="the capture (pcap or pcapng)")
    s.add_argument("--plot", type=image_file, metavar="FILE.png",
                   help="draw the rate and CE-marks timeline into this image (.png, .pdf, .svg, "
                        ".jpg; default: no plot)")
    s.add_argument("--bins", type=int_in(1, MAX_BINS), default=200,
                   help="timeline bins over the capture's span")
    s.add_argument("--bin-ms", type=float_in(0.001, 3_600_000), default=None,
                   help="timeline bin width in ms (default: the span / --bins)")
    add_json(s, 'print {"packets", "non_ipv4_packets", "duration_s", "flows": [{"src", '
                        '"dst", "proto", "sport", "dport", "packets", "bytes", "ect", "ce", '
                        '"duration_s"}], "timeline": {"bin_s", "bytes", "packets", "ce"}}')
    s.set_defaults(func=cmd_summary)


def cmd_summary(args: argparse.Namespace) -> int:
    summary = summarise(args.capture, bins=args.bins,
                        bin_s=args.bin_ms / 1000 if args.bin_ms else None)
    if args.json:
        if args.plot:
            summary_plot(summary, args)
        print_json(summary.to_dict())
        return 0
    else:
        d = summary.to_dict()
        print(f"{args.capture}: {d['packets']} packets ({d['non_ipv4_packets']} not IPv4) "
              f"over {d['duration_s']:.3f} s, {len(d['flows'])} IPv4 flows")
        rows = [[f"{f['src']}:{f['sport']}", f"{f['dst']}:{f['dport']}", f["proto"],
                 f["packets"], f["bytes"], f["ect"], f["ce"],
                 f"{100 * f['ce'] / f['packets']:.1f}%"] for f in d["flows"]]
        if rows:
            print(format_table(["source", "destination", "proto", "packets", "bytes", "ECT",
                                "CE", "CE share"], rows))
    if args.plot:
        summary_plot(summary, args)
        print(f"wrote {args.plot}")
    return 0


def summary_plot(summary: Summary, args: argparse.Namespace) -> None:
    if not summary.flows:
        raise InputError("no IPv4 packets to plot", source=args.capture)
    plot_summary(summary, Path(args.plot), f"{Path(args.capture).name}: rate and CE marks")
