#!/usr/bin/python3
"""Hostile tensor files (.pt): tdfx's load_tensor_file must refuse each one cleanly.

usage: hostile_tensor_files.py DIR

Generates, by code (nothing binary is committed), damaged and malicious variants of
files torch.save writes, into DIR, and lists them in DIR/manifest.json as
[{"name", "file", "expect"}]: `expect` is a phrase the ArchiveError must contain, so
that a file refused for the wrong reason fails; `expect` null marks the untouched
files, which must load. tests/export/test_tensor_file.cpp loads each one in process
(so that AddressSanitizer sees every byte the reader touches).

Pickles are assembled opcode by opcode; zips are written by hostile_archives.py's
zip_bytes, so that every header field can be damaged.
"""

import io
import json
import os
import struct
import sys
import zipfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hostile_archives import zip_bytes  # noqa: E402

MIB = 1 << 20
PROTO = b"\x80\x02"
REBUILD = b"ctorch._utils\n_rebuild_tensor_v2\n"
ORDERED_DICT = b"ccollections\nOrderedDict\n"


def uni(text):
    data = text.encode() if isinstance(text, str) else text
    return b"X" + struct.pack("<I", len(data)) + data


def integer(value):
    if 0 <= value < 256:
        return b"K" + bytes([value])
    if 0 <= value < 65536:
        return b"M" + struct.pack("<H", value)
    if -(2**31) <= value < 2**31:
        return b"J" + struct.pack("<i", value)
    return b"\x8a\x08" + struct.pack("<q", value)


def int_tuple(values):
    return b"(" + b"".join(integer(v) for v in values) + b"t"


def persistent_id(storage="FloatStorage", key="0", location="cpu", numel=12):
    return (b"((" + uni("storage") + f"ctorch\n{storage}\n".encode() + uni(key) + uni(location) +
            integer(numel) + b"tQ")


def tensor(storage="FloatStorage", key="0", location="cpu", numel=12, offset=0, size=(3, 4),
           stride=(4, 1), requires_grad=False, hooks=ORDERED_DICT + b")R", extra=b""):
    """The opcodes of one _rebuild_tensor_v2 call, as torch.save writes them."""
    return (REBUILD + b"(" + persistent_id(storage, key, location, numel)[1:] + integer(offset) +
            int_tuple(size) + int_tuple(stride) + (b"\x88" if requires_grad else b"\x89") +
            hooks + extra + b"tR")


FLOATS = struct.pack("<12f", *range(12))


def tensor_file(pickle, records=None, folder="archive", version=b"3\n", **zip_kwargs):
    """A tensor file: data.pkl, then the storage records (default: data/0 holding 12
    floats), then version."""
    records = [("data/0", FLOATS)] if records is None else records
    entries = [(f"{folder}/data.pkl", pickle)]
    entries += [(f"{folder}/{name}", data) for name, data in records]
    if version is not None:
        entries.append((f"{folder}/version", version))
    return zip_bytes(entries, **zip_kwargs)


def torch_saved(value, **kwargs):
    import torch  # Debian's python3-torch, as for the other Python tests
    buffer = io.BytesIO()
    torch.save(value, buffer, **kwargs)
    return buffer.getvalue()


def sparse_oversized_pickle(path):
    """data.pkl declared (and truly) 64 MiB + 4 KiB long, as a sparse file: refused by
    its declared size, never read."""
    size = 64 * MIB + 4096
    name = b"archive/data.pkl"
    header = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 33, 0, size, size,
                         len(name), 0) + name
    version = b"archive/version"
    with open(path, "wb") as f:
        f.write(header + PROTO)
        f.seek(len(header) + size)
        version_offset = f.tell()
        f.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 33, zlib.crc32(b"3\n"), 2, 2,
                            len(version), 0) + version + b"3\n")
        directory_offset = f.tell()
        central = b""
        for entry_name, crc, entry_size, offset in ((name, 0, size, 0),
                                                    (version, zlib.crc32(b"3\n"), 2, version_offset)):
            central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 33, crc,
                                   entry_size, entry_size, len(entry_name), 0, 0, 0, 0, 0,
                                   offset) + entry_name
        f.write(central)
        f.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 2, 2, len(central),
                            directory_offset, 0))


def deflate_bomb(path):
    """data.pkl deflated: ~80 KB that inflate to 80 MiB."""
    with zipfile.ZipFile(path, "w", compresslevel=9) as z:
        info = zipfile.ZipInfo("archive/data.pkl")
        info.compress_type = zipfile.ZIP_DEFLATED
        with z.open(info, "w") as f:
            f.write(PROTO + uni("x" * 16))
            for _ in range(80):
                f.write(b"\x00" * MIB)
        z.writestr("archive/version", "3\n")


def torchscript_module(path):
    import torch
    torch.jit.save(torch.jit.script(torch.nn.ReLU()), path)


def cases():
    good = PROTO + tensor() + b"."
    dict_of = lambda *items: PROTO + b"}(" + b"".join(items) + b"u."  # noqa: E731
    out = []

    def add(name, expect, data=None, make=None):
        out.append((name, expect, data, make))

    # Untouched files that must load: what torch.save writes, and the assembled base.
    add("good_assembled", None, tensor_file(good))
    add("good_torch_tensor", None, make="torch_tensor")
    add("good_torch_dict", None, make="torch_dict")

    # Not tensor files at all.
    add("empty_file", "too small", b"")
    add("random_bytes", "end-of-directory", bytes((i * 37 + 11) % 256 for i in range(4096)))
    add("directory", "is a directory", make=lambda p: os.mkdir(p))
    add("fifo", "not a regular file", make=lambda p: os.mkfifo(p))
    add("legacy_format", "legacy format", make="legacy")
    add("torchscript_module", "TorchScript", make=torchscript_module)
    add("tdfx_program_archive", "program archive", zip_bytes([("program.json", b"{}")]))
    add("zip_without_data_pkl", "no record FOLDER/data.pkl", zip_bytes([("a/b", b"x")]))
    add("two_data_pkl", "two data.pkl", zip_bytes([("a/data.pkl", good), ("b/data.pkl", good)]))

    # The zip.
    add("zip_deflate_bomb", "compressed", make=deflate_bomb)
    add("zip_pickle_over_64mib", "over the limit", make=sparse_oversized_pickle)
    add("zip_declared_4gib", "outside the file", tensor_file(good, entry_edit=lambda i, e: e.update(
        size=0xFFFFFFF0, packed=0xFFFFFFF0) if i == 0 else None))
    add("zip_crc", "checksum", tensor_file(good, entry_edit=lambda i, e: e.update(
        crc=e["crc"] ^ 1) if i == 1 else None))
    add("zip_encrypted", "encrypted", tensor_file(good, entry_edit=lambda i, e: e.update(
        flags=1) if i == 0 else None))
    add("zip_truncated", "end-of-directory", tensor_file(good)[:-30])
    add("no_version", "no record 'archive/version'", tensor_file(good, version=None))
    add("version_99", "format version", tensor_file(good, version=b"99\n"))
    add("big_endian", "big-endian",
        tensor_file(good, records=[("data/0", FLOATS), ("byteorder", b"big")]))
    add("stray_record", "is not part of the tensor file",
        tensor_file(good, records=[("data/0", FLOATS), ("data/1", FLOATS)]))
    add("path_in_storage_key", "short string of digits",
        tensor_file(PROTO + tensor(key="../../etc/passwd") + b"."))

    # Storage records against their declarations.
    add("record_truncated", "its record holds 44", tensor_file(good, records=[
        ("data/0", FLOATS[:-4])]))
    add("record_long", "its record holds 52", tensor_file(good, records=[
        ("data/0", FLOATS + b"\0" * 4)]))
    add("record_missing", "which has no record", tensor_file(good, records=[]))
    add("wrong_storage_type", "needs 96 bytes",
        tensor_file(PROTO + tensor(storage="DoubleStorage") + b"."))
    add("numel_2p40", "memory budget", tensor_file(PROTO + tensor(numel=2**40) + b"."))
    add("storage_redeclared", "declared twice",
        tensor_file(dict_of(uni("a") + tensor(), uni("b") + tensor(storage="IntStorage"))))
    add("bool_byte_2", "bytes other than 0 and 1", tensor_file(
        PROTO + tensor(storage="BoolStorage", numel=2, size=(2,), stride=(1,)) + b".",
        records=[("data/0", b"\x01\x02")]))
    add("quantized_storage", "QUInt8Storage is not allowed",
        tensor_file(PROTO + tensor(storage="QUInt8Storage") + b"."))
    add("location_forged", "storage location",
        tensor_file(PROTO + tensor(location="cpu'); import os; os.system('id") + b"."))

    # Sizes, strides and offsets against the storage.
    add("size_2p40", "reads past its storage",
        tensor_file(PROTO + tensor(size=(2**40,), stride=(1,)) + b"."))
    add("strides_past_storage", "reads past its storage",
        tensor_file(PROTO + tensor(size=(3, 4), stride=(4, 2)) + b"."))
    add("offset_past_storage", "reads past its storage",
        tensor_file(PROTO + tensor(offset=100) + b"."))
    add("offset_past_empty", "past its storage",
        tensor_file(PROTO + tensor(offset=100, size=(0,), stride=(1,)) + b"."))
    add("negative_size", "a negative int", tensor_file(PROTO + tensor(size=(-1, 4)) + b"."))
    add("negative_stride", "a negative int", tensor_file(PROTO + tensor(stride=(-4, 1)) + b"."))
    add("negative_offset", "offset -1 is negative", tensor_file(PROTO + tensor(offset=-1) + b"."))
    add("sizes_overflow", "overflow 64 bits",
        tensor_file(PROTO + tensor(size=(2**62, 2**62, 0), stride=(1, 1, 1)) + b"."))
    add("stride_overflow", "reads past its storage",
        tensor_file(PROTO + tensor(size=(3,), stride=(2**63 - 1,)) + b"."))
    add("sizes_strides_differ", "3 sizes but 2 strides",
        tensor_file(PROTO + tensor(size=(1, 3, 4)) + b"."))
    add("dims_65", "more than 64 dimensions",
        tensor_file(PROTO + tensor(size=(1,) * 65, stride=(1,) * 65) + b"."))
    add("int_requires_grad", "int64 tensor cannot require grad", tensor_file(
        PROTO + tensor(storage="LongStorage", numel=6, size=(6,), stride=(1,), requires_grad=True)
        + b".", records=[("data/0", b"\0" * 48)]))
    add("backward_hooks", "backward hooks", tensor_file(
        PROTO + tensor(hooks=ORDERED_DICT + b")R(" + uni("h") + tensor() + b"u") + b"."))
    add("rebuild_5_args", "got 5 arguments", tensor_file(
        PROTO + REBUILD + b"(" + persistent_id()[1:] + b"K\x00" + int_tuple((3, 4)) +
        int_tuple((4, 1)) + b"\x89tR."))

    # Globals and calls.
    add("os_system", "global os.system is not allowed",
        tensor_file(PROTO + b"cos\nsystem\n" + uni("echo pwned") + b"\x85R."))
    add("builtins_eval", "global builtins.eval is not allowed",
        tensor_file(PROTO + b"cbuiltins\neval\n" + uni("1") + b"\x85R."))
    add("torch_tensor_global", "global torch.Tensor is not allowed",
        tensor_file(PROTO + b"ctorch\nTensor\n."))
    add("control_character_in_global", "global torch\\x1b[2J.x is not allowed",
        tensor_file(PROTO + b"ctorch\x1b[2J\nx\n."))
    add("global_without_newline", "truncated", tensor_file(PROTO + b"cos"))
    add("global_long_line", "GLOBAL is not followed",
        tensor_file(PROTO + b"c" + b"a" * 200 + b"\nb\n."))
    add("reduce_storage_type", "REDUCE calls the global torch.FloatStorage",
        tensor_file(PROTO + b"ctorch\nFloatStorage\n)R."))
    add("ordered_dict_with_args", "OrderedDict is called with arguments",
        tensor_file(PROTO + ORDERED_DICT + b"K\x01\x85R."))
    add("reduce_args_not_tuple", "REDUCE's arguments are an int",
        tensor_file(PROTO + ORDERED_DICT + b"K\x01R."))

    # Opcodes.
    add("protocol_0", "does not start with a PROTO", tensor_file(b"cos\nsystem\n(S'id'\ntR."))
    add("protocol_4", "pickle protocol 4",
        tensor_file(b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00K\x01."))
    add("proto_twice", "PROTO appears again", tensor_file(PROTO + PROTO + tensor() + b"."))
    add("opcode_build", "opcode BUILD (0x62)", tensor_file(PROTO + tensor() + b"}b."))
    add("opcode_inst", "opcode INST", tensor_file(PROTO + b"ios\nsystem\n."))
    add("opcode_stack_global", "opcode STACK_GLOBAL",
        tensor_file(PROTO + uni("os") + uni("system") + b"\x93."))
    add("not_an_opcode", "0xff is not a pickle opcode", tensor_file(PROTO + b"\xff."))
    add("long1_9_bytes", "does not fit 64 bits", tensor_file(PROTO + b"\x8a\x09" + b"\0" * 9 + b"."))
    add("huge_string", "longer than", tensor_file(PROTO + b"X\xff\xff\xff\x7fabc"))
    add("string_past_end", "truncated", tensor_file(PROTO + b"X\x10\x00\x00\x00abc"))
    add("truncated_pickle", "truncated", tensor_file(good[:len(good) // 2]))
    add("no_stop", "truncated", tensor_file(good[:-1]))
    add("bytes_after_stop", "bytes follow STOP", tensor_file(good + b"junk"))

    # The stack, marks and memo.
    for op, name in ((b"\x85", "tuple1"), (b"\x86", "tuple2"), (b"\x87", "tuple3"), (b"R", "reduce"),
                     (b"Q", "binpersid"), (b"s", "setitem"), (b"q\x00", "binput")):
        add(f"underflow_{name}", "stack underflow", tensor_file(PROTO + op + b"."))
    add("underflow_below_mark", "stack underflow", tensor_file(PROTO + b"K\x01(\x85."))
    add("tuple_without_mark", "TUPLE without a MARK", tensor_file(PROTO + b"t."))
    add("setitems_without_mark", "SETITEMS without a MARK", tensor_file(PROTO + b"}u."))
    add("mark_open_at_stop", "MARK still open", tensor_file(PROTO + tensor() + b"(."))
    add("two_values_at_stop", "2 values on the stack", tensor_file(PROTO + tensor() + b"K\x01."))
    add("empty_stack_at_stop", "0 values on the stack", tensor_file(PROTO + b"."))
    add("memo_unset", "memo index 5 is read before it is written", tensor_file(PROTO + b"h\x05."))
    add("memo_long_unset", "memo index 4294967295",
        tensor_file(PROTO + b"j\xff\xff\xff\xff."))
    add("memo_flood", "memo holds more than",
        tensor_file(PROTO + b"K\x01" + b"".join(b"r" + struct.pack("<I", i)
                                                 for i in range(2**18 + 1)) + b"."))
    add("stack_flood", "stack holds more than", tensor_file(PROTO + b"\x88" * 70000 + b"."))
    add("marks_100000_deep", "MARKs nest deeper than 16", tensor_file(PROTO + b"(" * 100000))
    add("tuples_100000_deep", "tuples nest deeper than 8",
        tensor_file(PROTO + b")" + b"\x85" * 100000 + b"."))
    add("memo_tuple_fanout", "tuples nest deeper than 8",
        tensor_file(PROTO + b")q\x00" + b"h\x00h\x00\x86q\x00" * 40 + b"."))

    # The value the file holds.
    add("top_level_int", "the file holds an int", tensor_file(PROTO + b"K\x01."))
    add("top_level_tuple", "the file holds a tuple of 1", tensor_file(PROTO + tensor() + b"\x85."))
    add("dict_value_int", "the value of 'x' is an int",
        tensor_file(dict_of(uni("x") + b"K\x01")))
    add("dict_key_int", "a dict key is an int", tensor_file(dict_of(b"K\x01" + tensor())))
    add("dict_key_twice", "the key 'x' appears twice",
        tensor_file(dict_of(uni("x") + tensor(), uni("x") + tensor())))
    add("dict_key_newline", "control character", tensor_file(dict_of(uni("a\nb") + tensor())))
    add("dict_key_2000_bytes", "is longer than 1024 bytes",
        tensor_file(dict_of(uni("k" * 2000) + tensor())))
    add("dict_of_70000_keys", "the dict holds more than 65536 tensors", tensor_file(
        PROTO + b"}(" + uni("k") + tensor() + b"q\x00u" + b"".join(
            b"(" + b"".join(uni(f"k{i}_{j}") + b"h\x00" for j in range(1000)) + b"u"
            for i in range(70))))
    add("record_name_newline", "control character in its name", tensor_file(
        good, records=[("data/0", FLOATS), ("x\ntdfx: forged", b"")]))
    add("dict_key_odd_items", "a key without a value", tensor_file(dict_of(uni("x"))))
    add("setitems_on_tuple", "SETITEMS fills a tuple of 0", tensor_file(PROTO + b")(u."))
    add("persid_not_storage", "a persistent id must be", tensor_file(PROTO + uni("x") + b"Q."))
    add("persid_wrong_type", "a persistent id names the global collections.OrderedDict",
        tensor_file(PROTO + b"(" + uni("storage") + ORDERED_DICT + uni("0") + uni("cpu") +
                    b"K\x0ctQ."))
    return out


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    directory = os.path.abspath(argv[1])
    os.makedirs(directory, exist_ok=True)
    for entry in os.listdir(directory):
        path = os.path.join(directory, entry)
        if os.path.isdir(path) and not os.path.islink(path):
            os.rmdir(path)
        else:
            os.remove(path)
    import torch
    makers = {
        "torch_tensor": lambda p: torch.save(torch.arange(6.0).reshape(2, 3).t(), p),
        "torch_dict": lambda p: torch.save({"x": torch.ones(2), "m": torch.tensor([True])}, p),
        "legacy": lambda p: torch.save(torch.ones(2), p, _use_new_zipfile_serialization=False),
    }
    manifest = []
    for name, expect, data, make in cases():
        path = os.path.join(directory, name + ".pt")
        if data is not None:
            with open(path, "wb") as f:
                f.write(data)
        else:
            (makers[make] if isinstance(make, str) else make)(path)
        manifest.append({"name": name, "file": path, "expect": expect})
    with open(os.path.join(directory, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"wrote {len(manifest)} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
