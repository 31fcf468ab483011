"""Streaming reader of pcap and pcapng captures that says when a capture is damaged.

scapy's readers stop quietly at a record whose length field is corrupt or that the file cuts
short, so a summary would be computed on part of the capture without a word. This reader
checks every record's lengths against the format, the snapshot length and the bytes left in
the file, and raises an InputError naming the record and the byte offset instead. It keeps
one record in memory at a time, so a capture may be larger than memory.

Formats: classic pcap (microsecond and nanosecond magic, either byte order) and pcapng
(section header, interface description with if_tsresol, enhanced, simple and obsolete packet
blocks; other blocks are skipped by their length). `innet.cli.pcap` and
`innet.cassini.model.pcap_profile` both read through here.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from innet.errors import InputError, open_input

MAX_RECORD = 1 << 18  # 262,144 bytes: the largest snapshot length tcpdump and libpcap use
MAX_BLOCK = 1 << 24  # a pcapng block beyond 16 MiB is a corrupt length, not a packet
_PCAP_MAGIC = {b"\xd4\xc3\xb2\xa1": ("<", 1e-6), b"\xa1\xb2\xc3\xd4": (">", 1e-6),
               b"\x4d\x3c\xb2\xa1": ("<", 1e-9), b"\xa1\xb2\x3c\x4d": (">", 1e-9)}
_NG_SHB = 0x0A0D0D0A
_NG_BYTE_ORDER = 0x1A2B3C4D


@dataclass(frozen=True, slots=True)
class Record:
    """One captured frame: its bytes, time in seconds, length on the wire, link type."""

    data: bytes
    time: float
    wirelen: int
    linktype: int


class _Damaged(Exception):
    pass


def read_records(path: str | Path) -> Iterator[Record]:
    """Every record of the capture in file order; InputError if it is not one or is damaged."""
    p = Path(path)
    # a regular file only (a FIFO would block, /dev/zero never ends); no size bound: the
    # records are streamed one at a time, so memory does not grow with the capture
    with open_input(p, what="capture file") as f:
        size = os.fstat(f.fileno()).st_size
        yield from _records(f, p, size)


def _records(f: BinaryIO, p: Path, size: int) -> Iterator[Record]:
    head = f.read(4)
    try:
        if head in _PCAP_MAGIC:
            yield from _pcap(f, head, size)
        elif len(head) == 4 and struct.unpack("<I", head)[0] == _NG_SHB:
            f.seek(0)
            yield from _pcapng(f, size)
        else:
            start = head.hex() or "nothing: it is empty"
            raise InputError(f"not a pcap or pcapng capture (it starts with {start})",
                             source=str(p))
    except _Damaged as exc:
        raise InputError(f"damaged capture: {exc}; refusing to summarise part of it",
                         source=str(p)) from None
    except OSError as exc:  # a read error after a good open
        raise InputError(f"cannot read: {exc.strerror}", source=str(p)) from None


def _read_exact(f: BinaryIO, n: int, what: str, offset: int) -> bytes:
    data = f.read(n)
    if len(data) < n:
        raise _Damaged(f"{what} at byte {offset} is cut short ({len(data)} of {n} bytes)")
    return data


def _pcap(f: BinaryIO, magic: bytes, size: int) -> Iterator[Record]:
    order, unit = _PCAP_MAGIC[magic]
    rest = _read_exact(f, 20, "the file header", 4)
    network = struct.unpack(order + "HHiIII", rest)[5]
    linktype = network & 0xFFFF
    limit = MAX_RECORD  # writers' snapshot lengths vary (scapy: 65535); no frame is larger
    offset, index = 24, 0
    header = struct.Struct(order + "IIII")
    while True:
        raw = f.read(16)
        if not raw:
            return
        index += 1
        if len(raw) < 16:
            raise _Damaged(f"record {index} at byte {offset}: the file ends inside its header")
        sec, frac, caplen, wirelen = header.unpack(raw)
        if caplen > limit:
            raise _Damaged(f"record {index} at byte {offset}: captured length {caplen} is "
                           f"larger than any frame ({limit} bytes at most)")
        if wirelen and caplen > wirelen:
            raise _Damaged(f"record {index} at byte {offset}: captured length {caplen} is "
                           f"larger than its length on the wire ({wirelen})")
        if frac >= round(1 / unit):
            raise _Damaged(f"record {index} at byte {offset}: its timestamp's fraction "
                           f"{frac} is not below one second")
        if caplen > size - offset - 16:
            raise _Damaged(f"record {index} at byte {offset}: captured length {caplen} runs "
                           f"past the end of the file ({size - offset - 16} bytes left)")
        data = _read_exact(f, caplen, f"record {index}", offset)
        yield Record(data, sec + frac * unit, wirelen or caplen, linktype)
        offset += 16 + caplen


def _tsresol(options: bytes, order: str, where: str) -> float:
    """Seconds per timestamp unit from an interface's if_tsresol option (default 1 us)."""
    pos = 0
    while pos + 4 <= len(options):
        code, length = struct.unpack_from(order + "HH", options, pos)
        if code == 0:
            break
        if pos + 4 + length > len(options):
            raise _Damaged(f"{where}: option {code} ({length} bytes) runs past the block")
        if code == 9 and length >= 1:
            v = options[pos + 4]
            return float(2.0 ** -(v & 0x7F)) if v & 0x80 else float(10.0 ** -v)
        pos += 4 + (length + 3) // 4 * 4
    return 1e-6


def _pcapng(f: BinaryIO, size: int) -> Iterator[Record]:
    order = "<"
    interfaces: list[tuple[int, int, float]] = []  # linktype, snaplen, seconds per unit
    offset, index = 0, 0
    while True:
        raw = f.read(8)
        if not raw:
            return
        if len(raw) < 8:
            raise _Damaged(f"block at byte {offset}: the file ends inside its header")
        btype = struct.unpack("<I", raw[:4])[0]
        if btype == _NG_SHB:
            magic = _read_exact(f, 4, "section header", offset)
            if struct.unpack("<I", magic)[0] == _NG_BYTE_ORDER:
                order = "<"
            elif struct.unpack(">I", magic)[0] == _NG_BYTE_ORDER:
                order = ">"
            else:
                raise _Damaged(f"section header at byte {offset}: bad byte-order magic")
            interfaces = []
            consumed = 12
        else:
            btype = struct.unpack(order + "I", raw[:4])[0]
            consumed = 8
        total = struct.unpack(order + "I", raw[4:8])[0]
        if total < consumed + 4 or total % 4 or total > MAX_BLOCK:
            raise _Damaged(f"block at byte {offset}: length {total} is not a valid block length")
        if total > size - offset:
            raise _Damaged(f"block at byte {offset}: length {total} runs past the end of the "
                           f"file ({size - offset} bytes left)")
        body = _read_exact(f, total - consumed, f"block at byte {offset}", offset)
        trailer = struct.unpack(order + "I", body[-4:])[0]
        if trailer != total:
            raise _Damaged(f"block at byte {offset}: its two length fields differ ({total} "
                           f"and {trailer})")
        body = body[:-4]
        if btype == 1:  # interface description
            if len(body) < 8:
                raise _Damaged(f"interface block at byte {offset} is too short")
            linktype, _, snaplen = struct.unpack_from(order + "HHI", body)
            interfaces.append((linktype, snaplen,
                               _tsresol(body[8:], order, f"interface block at byte {offset}")))
        elif btype in (6, 2, 3):
            index += 1
            yield _ng_packet(btype, body, order, interfaces, index, offset)
        offset += total


def _ng_packet(btype: int, body: bytes, order: str, interfaces: list[tuple[int, int, float]],
               index: int, offset: int) -> Record:
    where = f"packet {index} (block at byte {offset})"
    if btype == 3:  # simple packet block: interface 0, no timestamp
        if len(body) < 4 or not interfaces:
            raise _Damaged(f"{where}: simple packet block without an interface or length")
        wirelen = struct.unpack_from(order + "I", body)[0]
        snaplen = interfaces[0][1] or wirelen
        caplen = min(wirelen, snaplen)
        if caplen > len(body) - 4:
            raise _Damaged(f"{where}: length {caplen} runs past its block")
        return Record(body[4:4 + caplen], 0.0, wirelen, interfaces[0][0])
    if btype == 6:
        if len(body) < 20:
            raise _Damaged(f"{where}: enhanced packet block too short")
        iface, high, low, caplen, wirelen = struct.unpack_from(order + "IIIII", body)
        start = 20
    else:  # 2: obsolete packet block
        if len(body) < 20:
            raise _Damaged(f"{where}: packet block too short")
        iface, _drops, high, low, caplen, wirelen = struct.unpack_from(order + "HHIIII", body)
        start = 20
    if iface >= len(interfaces):
        raise _Damaged(f"{where}: interface {iface} was never described")
    if caplen > len(body) - start or caplen > MAX_RECORD:
        raise _Damaged(f"{where}: captured length {caplen} runs past its block "
                       f"({len(body) - start} bytes)")
    linktype, _, unit = interfaces[iface]
    return Record(body[start:start + caplen], ((high << 32) | low) * unit, wirelen or caplen,
                  linktype)
