"""Just enough of PNG to tell a real screenshot from a blank one, standard library only: the size,
and how many distinct colours a sample of the rows holds (8-bit RGB or RGBA, not interlaced, as
Chromium writes them)."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass


@dataclass
class PngStats:
    width: int
    height: int
    colours: int  # distinct colours in the sampled rows
    non_white_share: float  # of the sampled pixels


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def png_stats(data: bytes, sample_every: int = 7) -> PngStats:
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + length
    width, height, depth, colour_type, _, _, interlace = header
    if depth != 8 or colour_type not in (2, 6) or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour_type}, interlace {interlace}")
    channels = 3 if colour_type == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    previous = bytearray(stride)
    colours: set[bytes] = set()
    sampled = non_white = 0
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        if kind == 1:
            for i in range(channels, stride):
                line[i] = (line[i] + line[i - channels]) & 0xFF
        elif kind == 2:
            for i in range(stride):
                line[i] = (line[i] + previous[i]) & 0xFF
        elif kind == 3:
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                line[i] = (line[i] + ((left + previous[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                up_left = previous[i - channels] if i >= channels else 0
                line[i] = (line[i] + _paeth(left, previous[i], up_left)) & 0xFF
        previous = line
        if y % sample_every == 0:
            for x in range(0, stride, channels * 3):
                pixel = bytes(line[x : x + 3])
                colours.add(pixel)
                sampled += 1
                non_white += pixel != b"\xff\xff\xff"
    return PngStats(width, height, len(colours), non_white / max(sampled, 1))
