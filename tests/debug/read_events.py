"""Reads TensorBoard event files as TensorBoard does, apart from tdfx: checks each record's
framing and both masked CRC-32Cs (computed here, bit by bit), decodes each Event with the
schema tests/debug/tensorboard_event.proto compiled by protoc (Debian's protobuf-compiler)
for python3-protobuf, and prints one line per event, without its wall time.

usage: read_events.py FILE...   (exit status 1 on any problem, said on stderr)"""

import importlib
import os
import struct
import subprocess
import sys
import tempfile


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def compiled_schema(scratch):
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run(["protoc", f"--proto_path={here}", f"--python_out={scratch}",
                    "tensorboard_event.proto"], check=True)
    sys.path.insert(0, scratch)
    return importlib.import_module("tensorboard_event_pb2")


def records(path):
    data = open(path, "rb").read()
    at = 0
    while at < len(data):
        if len(data) - at < 12:
            raise ValueError(f"{path}: {len(data) - at} bytes after the last record")
        header = data[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        if header_crc != masked(crc32c(header)):
            raise ValueError(f"{path}: the length's CRC at byte {at} is wrong")
        body = data[at + 12:at + 12 + length]
        if len(body) != length or len(data) < at + 16 + length:
            raise ValueError(f"{path}: a record at byte {at} is cut short")
        (body_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        if body_crc != masked(crc32c(body)):
            raise ValueError(f"{path}: the data's CRC at byte {at} is wrong")
        yield body
        at += 16 + length


def describe(event):
    kind = event.WhichOneof("what")
    if kind == "file_version":
        return f"file_version {event.file_version!r}; wall time set: {event.wall_time > 1e9}"
    parts = []
    for value in event.summary.value:
        kind = value.WhichOneof("value")
        if kind is None:
            raise ValueError(f"step {event.step}: the value of {value.tag!r} holds nothing")
        if kind == "simple_value":
            parts.append(f"{value.tag} = {value.simple_value!r}")
        else:
            h = value.histo
            parts.append(f"{value.tag}: histogram num {h.num:g} min {h.min:g} max {h.max:g} "
                         f"sum {h.sum:g} sum_squares {h.sum_squares:g} limits "
                         f"{[round(x, 6) for x in h.bucket_limit]} counts "
                         f"{[int(x) for x in h.bucket]}")
    return f"step {event.step}: " + "; ".join(parts)


def main(paths):
    with tempfile.TemporaryDirectory() as scratch:
        schema = compiled_schema(scratch)
        for path in paths:
            for body in records(path):
                event = schema.Event()
                event.ParseFromString(body)
                print(describe(event))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (ValueError, OSError, subprocess.CalledProcessError) as error:
        print(f"read_events.py: {error}", file=sys.stderr)
        sys.exit(1)
