#!/usr/bin/python3
"""Hostile .pt2 archives: tdfx must refuse each one cleanly, quickly and in little memory.

usage: hostile_archives.py TDFX SCRATCH_DIR

Makes a real archive with `TDFX demo --out SCRATCH_DIR`, then generates (here, by code:
nothing binary is committed) a corpus of damaged and malicious variants of it in
SCRATCH_DIR/cases, and runs `TDFX show` on each (and, for some, `show --signature`,
`--graph`, `--code` and `render -o out.svg`). Each run must:

  - exit with status 2 exactly (not crash, not hang, not accept the file);
  - write nothing on stdout and exactly one line on stderr, `tdfx: FILE: problem`;
  - name the specific problem (a per-case substring of the message), so that a file
    refused for the wrong reason fails;
  - use under TDFX_HOSTILE_CPU_S seconds of CPU time (default 2) more than starting
    tdfx does (`tdfx --help`, the least of three runs: loading LibTorch alone takes
    most of a second), and under TDFX_HOSTILE_RSS_MB megabytes of peak resident
    memory in all (default 200; sanitizer builds need more), measured for that child
    alone (os.wait4 in a small wrapper process). CPU time, not wall time: this is a
    guard against a file that makes tdfx work (a decompression or allocation bomb),
    and it must not fail because CTest runs other tests beside it on a 2-core
    machine. A run still going after KILL_AFTER_S of wall time is killed: it hangs.

The unmodified archive must show, and a few legal-but-unusual programs (nodes called
like the diagram's notes, `key_0`) must show and render. Prints one line per case and
ends with `N passed, M failed`; exits 1 when any case failed.

The standard library makes every file but one: the version 1 archive as the old saver
laid it out is written with PyTorch's own stream writer (Debian's python3-torch,
imported for that case alone).
"""

import json
import math
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib

DEFAULT_CPU_S, DEFAULT_RSS_MB = 2.0, 200.0
CPU_LIMIT_S = float(os.environ.get("TDFX_HOSTILE_CPU_S", DEFAULT_CPU_S))
RSS_LIMIT_MB = float(os.environ.get("TDFX_HOSTILE_RSS_MB", DEFAULT_RSS_MB))
# A run that takes this long is killed: it hangs.
KILL_AFTER_S = max(30.0, 10 * CPU_LIMIT_S)
# The most wall time the Python loader may take over one file.
PYTHON_READ_S = 10 * CPU_LIMIT_S
MIB = 1 << 20
PWNED = '"); import os; os.system("echo pwned'

# --- zip files, written by hand so that every field can be damaged ----------------


def zip_bytes(records, entry_edit=None, end_edit=None):
    """A zip of stored records, laid out as tdfx's ZipWriter does. `entry_edit(index,
    entry)` may change an entry's header fields (or its payload) before it is written;
    `end_edit(end)` the end-of-directory fields."""
    out = bytearray()
    entries = []
    for index, (name, data) in enumerate(records):
        name_bytes = name.encode() if isinstance(name, str) else name
        entry = {
            "name": name_bytes, "local_name": name_bytes, "payload": data,
            "crc": zlib.crc32(data), "method": 0, "flags": 0,
            "packed": len(data), "size": len(data),
            "offset": None,
            "local_signature": 0x04034B50, "central_signature": 0x02014B50,
        }
        if entry_edit:
            entry_edit(index, entry)
        offset = len(out)
        out += struct.pack("<IHHHHHIIIHH", entry["local_signature"], 20, entry["flags"],
                           entry["method"], 0, (1 << 5) | 1, entry["crc"], entry["packed"],
                           entry["size"], len(entry["local_name"]), 0)
        out += entry["local_name"] + entry["payload"]
        if entry["offset"] is None:
            entry["offset"] = offset
        entries.append(entry)
    directory_offset = len(out)
    for entry in entries:
        out += struct.pack("<IHHHHHHIIIHHHHHII", entry["central_signature"], 20, 20,
                           entry["flags"], entry["method"], 0, (1 << 5) | 1, entry["crc"],
                           entry["packed"], entry["size"], len(entry["name"]), 0, 0, 0, 0, 0,
                           entry["offset"])
        out += entry["name"]
    end = {"disk": 0, "directory_disk": 0, "disk_entries": len(entries),
           "entries": len(entries), "directory_size": len(out) - directory_offset,
           "directory_offset": directory_offset, "comment": b""}
    if end_edit:
        end_edit(end)
    out += struct.pack("<IHHHHIIH", 0x06054B50, end["disk"], end["directory_disk"],
                       end["disk_entries"], end["entries"], end["directory_size"],
                       end["directory_offset"], len(end["comment"]))
    out += end["comment"]
    return bytes(out)


class Archive:
    """The demo archive's records: program.json as a document, then the weights."""

    def __init__(self, path):
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
            if not names or names[0] != "program.json" or "weights.pkl" in names:
                raise SystemExit(f"FAIL setup: {path} is not a version 3 archive (records: "
                                 f"{names}); rebuild tdfx")
            self.document = json.loads(z.read("program.json"))
            self.records = [(n, z.read(n)) for n in names[1:]]
        if self.document.get("version") != 3:
            raise SystemExit(f"FAIL setup: {path} has version {self.document.get('version')}")
        self.path = path

    def copy(self):
        other = Archive.__new__(Archive)
        other.document = json.loads(json.dumps(self.document))
        other.records = list(self.records)
        other.path = self.path
        return other

    def program_text(self):
        return json.dumps(self.document, indent=1).encode()

    def bytes(self, **kwargs):
        return zip_bytes([("program.json", self.program_text())] + self.records, **kwargs)

    # Handles on the demo program's parts, found by role rather than by name.
    def nodes(self):
        return self.document["nodes"]

    def node(self, name):
        return next(n for n in self.nodes() if n["name"] == name)

    def victim(self):
        """An aten call with a tensor input: relu if there is one."""
        calls = [n for n in self.nodes() if n["op"] == "call_function"
                 and n["target"].startswith("aten::")
                 and any("node" in a for a in n["args"])]
        return next((n for n in calls if n["target"] == "aten::relu"), calls[0])

    def placeholders(self):
        return [n for n in self.nodes() if n["op"] == "placeholder"]

    def user_placeholder(self):
        user = [i["name"] for i in self.document["signature"]["inputs"]
                if i["kind"] == "user_input"]
        return self.node(user[0])

    def output(self):
        return self.nodes()[-1]

    def set_record(self, name, data):
        self.records = [(n, data if n == name else d) for n, d in self.records]

    def drop_record(self, name):
        self.records = [(n, d) for n, d in self.records if n != name]


def rename_node(archive, old, new):
    """Renames a node and every reference to it, in the graph and the signature."""
    def visit(value):
        if isinstance(value, dict):
            if value.get("node") == old and len(value) == 1:
                value["node"] = new
            for v in value.values():
                visit(v)
        elif isinstance(value, list):
            for v in value:
                visit(v)
    archive.node(old)["name"] = new
    visit(archive.document["nodes"])
    for spec in archive.document["signature"]["inputs"] + archive.document["signature"]["outputs"]:
        if spec["name"] == old:
            spec["name"] = new
    for weight in archive.document["weights"]:
        if weight["name"] == old:
            weight["name"] = new


def nested_argument(depth):
    text = '{"list": [' * depth + '{"int": 1}' + "]}" * depth
    return text


def replace_first_arg_text(archive, depth):
    """program.json text with the victim's first argument nested `depth` lists deep
    (spliced as text: json.dumps itself would recurse too deeply)."""
    marker = "@@NESTED@@"
    archive.victim()["args"][0] = marker
    return archive.program_text().replace(json.dumps(marker).encode(),
                                          nested_argument(depth).encode())


# --- the corpus ------------------------------------------------------------------

class Case:
    def __init__(self, name, expect, make=None, path=None, commands=("show",), accept=False,
                 note="", status=2, names_file=True, rss_mb=None, cpu_s=None):
        # Limits of their own for the few files whose size is the point (a program.json of
        # tens of megabytes, which LoadOptions::max_program_bytes bounds): what reading them
        # costs is measured, and the note says why.
        # Given for a Release build; a sanitizer build's environment raises both limits, and
        # these by as much (CPU by the same factor, memory by the same megabytes).
        self.rss_mb = RSS_LIMIT_MB + (rss_mb - DEFAULT_RSS_MB if rss_mb else 0)
        self.cpu_s = CPU_LIMIT_S * (cpu_s / DEFAULT_CPU_S if cpu_s else 1)
        self.status = status          # the exit status of a refusal: 2 for a file refused,
        self.names_file = names_file  # 1 for a run or drawing refused (stderr: `tdfx: why`)
        self.name = name
        self.expect = expect          # a substring of the problem the message must name
        self.make = make              # make(path): writes the hostile file
        self.path = path              # a fixed path instead (e.g. /dev/zero)
        self.commands = commands
        self.accept = accept          # a legal program: must show (and render), exit 0
        self.note = note


def write_bytes(data):
    def make(path):
        with open(path, "wb") as f:
            f.write(data)
    return make


def edited(base, edit, **zip_kwargs):
    """A case file: the demo archive after `edit(archive)`; edit may return the
    program.json text to use instead of the document."""
    def make(path):
        archive = base.copy()
        text = edit(archive)
        if text is None:
            data = archive.bytes(**zip_kwargs)
        else:
            data = zip_bytes([("program.json", text)] + archive.records, **zip_kwargs)
        with open(path, "wb") as f:
            f.write(data)
    return make


def zip_edited(base, entry_edit=None, end_edit=None):
    return edited(base, lambda a: None, entry_edit=entry_edit, end_edit=end_edit)


def on_record(name, **fields):
    """An entry_edit setting header fields of one record."""
    def edit(index, entry):
        if entry["name"] == name.encode():
            entry.update(fields)
    return edit


# Pickles the version 1 format's weights.pkl was read with: tiny and malicious.
BAD_PICKLES = {
    "os_system": b"cos\nsystem\n(S'echo pwned'\ntR.",
    "dict_of_int": b"\x80\x02}q\x00X\x01\x00\x00\x00aK\x01s.",
    "huge_string": b"\x80\x02X\xff\xff\xff\x7fabc",
    "persid_empty_stack": b"\x80\x02Q.",
    "rebuild_truncated": b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n(",
    "marks": b"\x80\x02" + b"(" * 18 + b".",
}


def version1_document(base):
    document = json.loads(json.dumps(base.document))
    document["version"] = 1
    del document["weights"]
    return json.dumps(document, indent=1).encode()


def old_pytorch_writer_archive(base, pickle):
    """A version 1 archive as tdfx used to save it, written with the same writer
    (PyTorch's stream writer, through Python's torch): records under `<stem>/`, with
    data descriptors and alignment padding, a `version` record, program.json at
    version 1 and a pickled weights.pkl."""
    def make(path):
        import torch  # Debian's python3-torch, as for the other Python tests
        writer = torch._C.PyTorchFileWriter(path)
        for name, data in (("version", b"1\n"), ("program.json", version1_document(base)),
                           ("weights.pkl", pickle)):
            writer.write_record(name, data, len(data))
        writer.write_end_of_file()
        del writer
    return make


def sparse_oversized_program(path):
    """program.json declared (and truly) 65 MiB long, as a sparse file: the reader
    must refuse it by its declared size, without reading or allocating it."""
    size = 64 * MIB + 4096
    name = b"program.json"
    crc = 0
    header = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 33, crc, size, size,
                         len(name), 0) + name
    with open(path, "wb") as f:
        f.write(header + b"{")
        f.seek(len(header) + size)
        directory_offset = f.tell()
        central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 33, crc, size,
                              size, len(name), 0, 0, 0, 0, 0, 0) + name
        f.write(central)
        f.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central),
                            directory_offset, 0))


def deflated(base, compress_program=True, inflated_size=None):
    """The archive written by Python's zipfile with deflate; with `inflated_size`,
    program.json is replaced by a document that inflates to that many bytes (a zip
    bomb of ~80 KB, streamed: the payload is never held in memory)."""
    def make(path):
        program, weights = ((zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED) if compress_program
                            else (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED))
        with zipfile.ZipFile(path, "w", compresslevel=9) as z:
            info = zipfile.ZipInfo("program.json")
            info.compress_type = program
            with z.open(info, "w") as f:
                if inflated_size:
                    head = b'{"format": "tdfx.exported_program", "version": 3, "padding": "'
                    f.write(head)
                    left = inflated_size - len(head) - 2
                    while left > 0:
                        f.write(b"a" * min(left, MIB))
                        left -= MIB
                    f.write(b'"}')
                else:
                    f.write(base.program_text())
            for name, data in base.records:
                z.writestr(zipfile.ZipInfo(name), data, compress_type=weights)
    return make


def overlapping(base):
    """Record weights/1 lies inside the bytes of an extra record `hidden`, whose data
    is weights/1's local header and data; the directory points at both."""
    def make(path):
        archive = base.copy()
        (name0, data0), (name1, data1) = archive.records[0], archive.records[1]
        before = [("program.json", archive.program_text()), (name0, data0)]
        hidden_offset = sum(30 + len(n) + len(d) for n, d in before)
        inner = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 33, zlib.crc32(data1),
                            len(data1), len(data1), len(name1), 0) + name1.encode() + data1
        data = zip_bytes(before + [("hidden", inner)] + archive.records[2:])
        count, directory_size, directory_offset = struct.unpack("<HII", data[-12:-2])
        central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 0, 0, 33,
                              zlib.crc32(data1), len(data1), len(data1), len(name1), 0, 0, 0, 0,
                              0, hidden_offset + 30 + len("hidden")) + name1.encode()
        directory = data[directory_offset:directory_offset + directory_size] + central
        data = (data[:directory_offset] + directory +
                struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count + 1, count + 1, len(directory),
                            directory_offset, 0))
        with open(path, "wb") as f:
            f.write(data)
    return make


def cases(base):
    good = base.bytes()
    rng = random.Random(20261130)
    victim = base.victim()["name"]
    out = []
    add = out.append

    # Files that are not archives at all.
    add(Case("missing_file", "No such file", make=lambda p: None,
             commands=("show", "show --signature", "render")))
    add(Case("directory", "is a directory", make=lambda p: os.mkdir(p),
             commands=("show", "show --code", "render")))
    add(Case("fifo", "not a regular file", make=lambda p: os.mkfifo(p),
             commands=("show", "show --signature", "show --graph", "render")))
    add(Case("char_device", "not a regular file", path="/dev/zero"))
    add(Case("symlink_loop", "symbolic links",
             make=lambda p: os.symlink(os.path.basename(p), p)))
    add(Case("empty_file", "too small", make=write_bytes(b"")))
    add(Case("random_bytes", "end-of-directory",
             make=write_bytes(bytes(rng.getrandbits(8) for _ in range(4096)))))
    add(Case("text_file", "end-of-directory", make=write_bytes(b"print('hello')\n" * 10)))
    add(Case("truncated_half", "end-of-directory", make=write_bytes(good[:len(good) // 2])))
    add(Case("truncated_last_byte", "end-of-directory", make=write_bytes(good[:-1])))
    add(Case("truncated_body", "outside the file",
             make=write_bytes(good[:len(good) - 200] + good[-22:])))
    add(Case("end_record_only", "outside the file", make=write_bytes(good[-22:])))
    add(Case("empty_zip", "program.json", make=write_bytes(zip_bytes([]))))

    # The zip structure.
    add(Case("zip_bomb_deflated_program", "compressed",
             make=deflated(base, inflated_size=80 * MIB),
             commands=("show", "show --code", "render"),
             note="program.json deflated: ~80 KB that inflate to 80 MiB"))
    add(Case("zip_deflated_weights", "compressed", make=deflated(base, compress_program=False)))
    add(Case("zip_method_deflate_flag", "compressed",
             make=zip_edited(base, on_record("program.json", method=8))))
    add(Case("zip_declared_huge_size", "outside the file",
             make=zip_edited(base, on_record("program.json", size=0xFFFFFFF0, packed=0xFFFFFFF0)),
             note="program.json declares 4 GiB"))
    add(Case("zip_program_over_64mib", "over the limit", make=sparse_oversized_program,
             note="a sparse 64 MiB + 4 KiB program.json"))
    add(Case("zip_crc_program", "checksum",
             make=zip_edited(base, on_record("program.json", crc=0x12345678))))
    add(Case("zip_crc_weight", "checksum",
             make=zip_edited(base, on_record("weights/0", crc=0x12345678))))
    add(Case("zip_encrypted", "encrypted", make=zip_edited(base, on_record("weights/0", flags=1))))
    add(Case("zip_data_descriptor", "data descriptor",
             make=zip_edited(base, on_record("program.json", flags=8))))
    add(Case("zip64_offset", "zip64",
             make=zip_edited(base, end_edit=lambda e: e.update(directory_offset=0xFFFFFFFF))))
    add(Case("zip64_count", "zip64",
             make=zip_edited(base, end_edit=lambda e: e.update(entries=0xFFFF,
                                                                disk_entries=0xFFFF))))
    add(Case("zip_multi_disk", "multi-disk",
             make=zip_edited(base, end_edit=lambda e: e.update(disk=1))))
    add(Case("zip_directory_outside", "outside the file",
             make=zip_edited(base, end_edit=lambda e: e.update(
                 directory_offset=e["directory_offset"] + 4096))))
    add(Case("zip_directory_malformed", "malformed",
             make=zip_edited(base, on_record("weights/0", central_signature=0x02014B51))))
    add(Case("zip_local_header_outside", "outside the file",
             make=zip_edited(base, on_record("weights/0", offset=0x7FFFFFF0))))
    add(Case("zip_local_name_differs", "two different names",
             make=zip_edited(base, on_record("weights/0", local_name=b"weights/9"))))
    add(Case("zip_duplicate_record", "appears twice",
             make=edited(base, lambda a: a.records.append(a.records[0]) or None)))
    add(Case("zip_overlapping_records", "overlap", make=overlapping(base)))
    add(Case("zip_no_program_json", "program.json",
             make=write_bytes(zip_bytes(base.records))))

    # Version 1 (program.json + pickled weights.pkl) and its small bad pickles.
    for name, pickle in BAD_PICKLES.items():
        add(Case(f"v1_pickle_{name}", "version 1",
                 make=write_bytes(zip_bytes([("program.json", version1_document(base)),
                                             ("weights.pkl", pickle)])),
                 commands=("show", "show --signature", "show --graph", "show --code", "render")
                 if name == "os_system" else ("show",)))
    add(Case("v1_pytorch_stream_writer", "version 1",
             make=old_pytorch_writer_archive(base, BAD_PICKLES["os_system"]),
             note="laid out as the version 1 saver wrote it (PyTorch's stream writer)"))
    add(Case("v2_weights_pkl_instead_of_weights", "weights/0",
             make=edited(base, lambda a: setattr(a, "records",
                                                 [("weights.pkl", BAD_PICKLES["os_system"])]))))
    add(Case("v2_stray_weights_pkl_record", "weights.pkl",
             make=edited(base, lambda a: a.records.append(("weights.pkl",
                                                           BAD_PICKLES["os_system"])) or None),
             note="a record no entry of program.json refers to"))
    add(Case("version_1", "version 1",
             make=edited(base, lambda a: a.document.update(version=1)),
             commands=("show", "show --signature", "show --graph", "show --code", "render")))
    add(Case("version_6", "version 6", make=edited(base, lambda a: a.document.update(version=6))))
    # Version 4's example inputs: only in a version 4 archive, only of user inputs, checked
    # against their placeholders as weights are.
    def example_input(edit):
        def make(a):
            a.document["version"] = 4
            user = a.user_placeholder()
            meta = user["meta"]
            size = 4 * math.prod(meta["shape"])
            a.document["inputs"] = [{"name": user["name"], "record": "inputs/0",
                                     "dtype": meta["dtype"], "shape": list(meta["shape"])}]
            a.records.append(("inputs/0", bytes(size)))
            edit(a)
        return make
    add(Case("example_input_ok", None, make=edited(base, example_input(lambda a: None)),
             commands=("show", "run"), accept=True, note="legal: a snapshot's inputs"))
    add(Case("example_input_in_version_3", "an archive of version 3 has no example inputs",
             make=edited(base, example_input(lambda a: a.document.update(version=3)))))
    add(Case("example_input_of_a_weight", "not a user input of the signature",
             make=edited(base, example_input(lambda a: a.document["inputs"][0].update(
                 name=a.document["weights"][0]["name"])))))
    add(Case("example_input_short", "needs",
             make=edited(base, example_input(lambda a: a.records.__setitem__(
                 -1, ("inputs/0", bytes(3)))))))
    # Version 5's optimizer state: its type LibTorch's, its options its type's, its parameters
    # the program's, its tensors of its type's names, read as their parameters' weights are.
    def optimizer_state(edit):
        def make(a):
            a.document["version"] = 5
            params = [i for i in a.document["signature"]["inputs"] if i["kind"] == "parameter"]
            weight = next(w for w in a.document["weights"] if w["name"] == params[0]["name"])
            a.document["optimizer"] = {
                "type": "SGD",
                "groups": [{"options": {"lr": 0.1, "momentum": 0.9, "dampening": 0,
                                        "weight_decay": 0, "nesterov": 0},
                            "parameters": [p["target"] for p in params]}],
                "state": [{"parameter": params[0]["target"], "step": 0, "tensors": [
                    {"name": "momentum_buffer", "record": "optimizer/0",
                     "dtype": weight["dtype"], "shape": list(weight["shape"])}]}]}
            a.records.append(("optimizer/0", bytes(4 * math.prod(weight["shape"]))))
            edit(a)
        return make

    def optimizer_edit(f):
        return lambda a: f(a.document["optimizer"])
    add(Case("optimizer_state_ok", None, make=edited(base, optimizer_state(lambda a: None)),
             commands=("show", "run"), accept=True, note="legal: a snapshot's optimizer"))
    add(Case("optimizer_state_in_version_4", "an archive of version 4 has no optimizer state",
             make=edited(base, optimizer_state(lambda a: a.document.update(version=4)))))
    add(Case("optimizer_state_of_lbfgs", "is not one tdfx keeps",
             make=edited(base, optimizer_state(optimizer_edit(lambda o: o.update(type="LBFGS"))))))
    add(Case("optimizer_state_without_lr", "SGD's options are lr, momentum",
             make=edited(base, optimizer_state(optimizer_edit(
                 lambda o: o["groups"][0]["options"].pop("lr") and None)))))
    add(Case("optimizer_state_lr_text", "option 'lr' is not a number",
             make=edited(base, optimizer_state(optimizer_edit(
                 lambda o: o["groups"][0]["options"].update(lr="0.1"))))))
    add(Case("optimizer_state_negative_lr", "option lr is -5",
             make=edited(base, optimizer_state(optimizer_edit(
                 lambda o: o["groups"][0]["options"].update(lr=-5))))))
    add(Case("optimizer_state_half_a_flag", "option nesterov is 0.5",
             make=edited(base, optimizer_state(optimizer_edit(
                 lambda o: o["groups"][0]["options"].update(nesterov=0.5))))))
    add(Case("optimizer_state_stranger", "is not a parameter input of the program",
             make=edited(base, optimizer_state(optimizer_edit(
                 lambda o: o["groups"][0]["parameters"].append("os.system"))))))
    add(Case("optimizer_state_twice_grouped", "is not a parameter input of the program",
             make=edited(base, optimizer_state(optimizer_edit(
                 lambda o: o["groups"].append(dict(o["groups"][0])))))))
    add(Case("optimizer_state_of_ungrouped", "for no parameter of a group",
             make=edited(base, optimizer_state(optimizer_edit(
                 lambda o: o["groups"][0]["parameters"].pop(0) and None)))))
    add(Case("optimizer_state_tensor_name", "not a state tensor of SGD",
             make=edited(base, optimizer_state(optimizer_edit(
                 lambda o: o["state"][0]["tensors"][0].update(name="exp_avg"))))))
    add(Case("optimizer_state_tensor_shape", "differs from its placeholder",
             make=edited(base, optimizer_state(optimizer_edit(
                 lambda o: o["state"][0]["tensors"][0].update(shape=[100000, 100000])))),
             note="checked before the bytes are: 40 GB of state is refused by its shape"))
    add(Case("optimizer_state_tensor_short", "needs",
             make=edited(base, optimizer_state(lambda a: a.records.__setitem__(
                 -1, ("optimizer/0", bytes(3)))))))
    add(Case("optimizer_state_weight_record", "is not a state tensor record of its own",
             make=edited(base, optimizer_state(optimizer_edit(
                 lambda o: o["state"][0]["tensors"][0].update(record="weights/0"))))))
    add(Case("optimizer_state_sgd_step", "step 3 for SGD",
             make=edited(base, optimizer_state(optimizer_edit(
                 lambda o: o["state"][0].update(step=3))))))
    add(Case("optimizer_state_step_negative", "step",
             make=edited(base, optimizer_state(optimizer_edit(
                 lambda o: o["state"][0].update(step=-1))))))
    add(Case("version_string", "'3'", make=edited(base, lambda a: a.document.update(version="3"))))
    add(Case("version_float", "not supported",
             make=edited(base, lambda a: a.document.update(version=3.0))))
    # The modules table (version 3): what the diagrams draw, checked like the rest.
    def module(a, **fields):
        a.document["modules"][0].update(fields)
    add(Case("modules_missing", "missing field 'modules'",
             make=edited(base, lambda a: a.document.pop("modules") and None)))
    add(Case("modules_not_list", "'modules' is not a list",
             make=edited(base, lambda a: a.document.update(modules={"path": "x"}))))
    add(Case("module_path_injection", "is not a module path",
             make=edited(base, lambda a: module(a, path="0\"];evil[label=\"")),
             commands=("show", "render")))
    add(Case("module_path_keyword", "is not a module path",
             make=edited(base, lambda a: a.document["modules"].append(
                 dict(a.document["modules"][0], path="module.lambda")))))
    add(Case("module_path_twice", "given twice",
             make=edited(base, lambda a: a.document["modules"].append(
                 json.loads(json.dumps(a.document["modules"][0]))))))
    add(Case("module_label_escape", "control character",
             make=edited(base, lambda a: module(a, label="Linear\x1b]0;pwned\x07")),
             commands=("show", "render")))
    add(Case("module_key_not_list", "a key must be a non-empty list",
             make=edited(base, lambda a: module(a, in_keys=[{"key": "x", "is_tuple": False}]))))
    add(Case("module_parameters_negative", "not a non-negative int",
             make=edited(base, lambda a: module(a, parameters=-5))))
    add(Case("module_parameters_huge", "outside the 64-bit signed range",
             make=edited(base, lambda a: module(a, parameters=2**64 - 1))))
    add(Case("module_parameters_2_pow_63", "outside the 64-bit signed range",
             make=edited(base, lambda a: module(a, parameters=2**63))))
    add(Case("module_root_sequential", "root sequential",
             make=edited(base, lambda a: a.document["modules"].append(
                 dict(a.document["modules"][0], path="", sequential=True)))))
    add(Case("module_key_empty_part", "empty",
             make=edited(base, lambda a: module(a, in_keys=[{"key": [""], "is_tuple": False}]))))
    add(Case("module_key_part_not_string", "not a string",
             make=edited(base, lambda a: module(a, out_keys=[{"key": [1], "is_tuple": False}]))))
    add(Case("module_key_empty_list", "non-empty list",
             make=edited(base, lambda a: module(a, out_keys=[{"key": [], "is_tuple": True}]))))
    add(Case("module_is_tuple_not_bool", "is_tuple is not a bool",
             make=edited(base, lambda a: module(a, in_keys=[{"key": ["x"], "is_tuple": 1}]))))
    add(Case("module_sequential_not_bool", "sequential is not a bool",
             make=edited(base, lambda a: module(a, sequential="yes"))))
    add(Case("module_unlisted_td_module", "which 'modules' does not list",
             make=edited(base, lambda a: a.document["modules"].pop(0) and None)))
    add(Case("format_wrong", "not a tdfx exported program",
             make=edited(base, lambda a: a.document.update(format="torch.export"))))

    # JSON text.
    def text_of(text):
        return lambda a: text
    add(Case("json_invalid", "not valid JSON", make=edited(base, text_of(b'{"format": '))))
    add(Case("json_nan_literal", "not valid JSON",
             make=edited(base, lambda a: a.program_text().replace(b'"version": 3',
                                                                  b'"version": NaN'))))
    def int_argument(value):
        return lambda a: a.victim()["args"].append({"int": value})
    add(Case("json_int_2_pow_64_minus_1", "integer 18446744073709551615, outside",
             make=edited(base, int_argument(2**64 - 1)), commands=("show", "show --code")))
    add(Case("json_int_2_pow_63", "integer 9223372036854775808, outside",
             make=edited(base, int_argument(2**63))))
    add(Case("json_int_below_int64", "integer -9223372036854775809, outside",
             make=edited(base, int_argument(-2**63 - 1))))
    add(Case("json_int_5000_digits", "outside the 64-bit signed range",
             make=edited(base, lambda a: a.program_text().replace(
                 b'"version": 3', b'"version": 1' + b"0" * 4999))))
    add(Case("json_field_repeated", "repeats a field",
             make=edited(base, lambda a: a.program_text().replace(
                 b'"version": 3', b'"version": 3, "version": 2'))))
    add(Case("json_top_level_list", "not a tdfx exported program",
             make=edited(base, text_of(b"[]"))))
    add(Case("json_deep_version_40000", "nests deeper",
             make=edited(base, lambda a: a.program_text().replace(
                 b'"version": 3', b'"version": ' + b"[" * 40000 + b"]" * 40000)),
             commands=("show", "show --graph", "render")))
    add(Case("json_deep_version_unclosed", "nests deeper",
             make=edited(base, lambda a: a.program_text().replace(
                 b'"version": 3', b'"version": ' + b"[" * 40000))))
    add(Case("json_deep_65", "nests deeper",
             make=edited(base, lambda a: a.program_text().replace(
                 b'"version": 3', b'"version": ' + b"[" * 64 + b"]" * 64))))
    add(Case("arg_list_40000_deep", "nests deeper",
             make=edited(base, lambda a: replace_first_arg_text(a, 40000)),
             commands=("show", "show --code")))
    add(Case("arg_list_20_deep", "nested too deeply",
             make=edited(base, lambda a: replace_first_arg_text(a, 20))))

    def nest_bodies(a, depth=10):
        node = a.victim()
        for _ in range(depth):
            node["op"] = "call_module"
            node["target"] = "m"
            inner = {"name": "x", "op": "placeholder", "target": "x", "args": [], "kwargs": [],
                     "meta": {"module_path": "", "module_type": "", "td_module": ""}}
            call = {"name": "y", "op": "call_function", "target": "aten::relu",
                    "args": [{"node": "x"}], "kwargs": [], "meta": dict(inner["meta"])}
            result = {"name": "output", "op": "output", "target": "output",
                      "args": [{"tuple": [{"node": "y"}]}], "kwargs": [],
                      "meta": dict(inner["meta"])}
            node["body"] = [inner, call, result]
            node = call
    add(Case("bodies_10_deep", "nested too deeply", make=edited(base, nest_bodies)))
    add(Case("bodies_9_deep", "nested too deeply",
             make=edited(base, lambda a: nest_bodies(a, 9))))
    add(Case("bodies_8_deep", None, make=edited(base, lambda a: nest_bodies(a, 8)),
             accept=True, note="legal: bodies as deep as a program may nest them"))

    # Structure of the document.
    add(Case("nodes_missing", "'nodes'",
             make=edited(base, lambda a: a.document.pop("nodes") and None)))
    add(Case("nodes_not_a_list", "'nodes'",
             make=edited(base, lambda a: a.document.update(nodes={"a": 1}))))
    add(Case("node_meta_missing", "'meta'",
             make=edited(base, lambda a: a.victim().pop("meta") and None)))
    add(Case("arg_malformed", "malformed argument",
             make=edited(base, lambda a: a.victim()["args"].__setitem__(0, {"int": "1"}))))
    add(Case("arg_forward_reference", "not defined before",
             make=edited(base, lambda a: a.victim()["args"].__setitem__(
                 0, {"node": a.output()["args"][0]["tuple"][-1]["node"]}))))
    add(Case("arg_wrong_arity", "relu",
             make=edited(base, lambda a: a.victim()["args"].extend([{"int": 1}, {"int": 2}]))))

    # Names and text that reach printed code, diagrams and terminals.
    add(Case("node_name_newline", "identifier",
             make=edited(base, lambda a: rename_node(a, victim, victim + "\nimport os"))))
    add(Case("node_name_injection", "identifier",
             make=edited(base, lambda a: rename_node(a, victim, "x" + PWNED)),
             commands=("show", "show --code", "render")))
    add(Case("node_name_keyword", "identifier",
             make=edited(base, lambda a: rename_node(a, victim, "lambda"))))
    add(Case("node_name_reserved", "identifier",
             make=edited(base, lambda a: rename_node(a, victim, "torch"))))
    add(Case("node_name_twice", "used twice",
             make=edited(base, lambda a: a.victim().update(name=a.placeholders()[0]["name"]))))
    add(Case("placeholder_target_injection", "placeholder target",
             make=edited(base, lambda a: a.user_placeholder().update(target="x" + PWNED)),
             commands=("show", "show --code")))
    add(Case("placeholder_target_self", "is the module's own name",
             make=edited(base, lambda a: a.user_placeholder().update(target="self")),
             commands=("show", "show --code")))
    add(Case("placeholder_target_repeated", "repeats another input's",
             make=edited(base, lambda a: a.user_placeholder().update(
                 target=a.placeholders()[0]["target"])), commands=("show", "show --code")))
    add(Case("placeholder_target_keyword", "placeholder target",
             make=edited(base, lambda a: a.user_placeholder().update(target="lambda"))))
    add(Case("placeholder_target_newline", "control character",
             make=edited(base, lambda a: a.user_placeholder().update(target="x\nimport os"))))
    add(Case("call_target_newline", "control character",
             make=edited(base, lambda a: a.victim().update(target="aten::relu\nimport os"))))
    add(Case("call_target_injection", "unknown operator",
             make=edited(base, lambda a: a.victim().update(target="aten::relu" + PWNED))))
    add(Case("call_module_target_injection", "not a module path",
             make=edited(base, lambda a: a.victim().update(op="call_module", target="m" + PWNED))))
    add(Case("call_module_without_body", "no body",
             make=edited(base, lambda a: a.victim().update(op="call_module", target="fc1"))))
    add(Case("module_path_newline", "control character",
             make=edited(base, lambda a: a.victim()["meta"].update(
                 module_path="fc1\nimport os")), commands=("show", "render")))
    add(Case("module_path_nul", "control character",
             make=edited(base, lambda a: a.victim()["meta"].update(module_path="fc1\0"))))
    add(Case("module_type_escape_sequence", "control character",
             make=edited(base, lambda a: a.victim()["meta"].update(
                 module_type="Linear\x1b[2J\x1b[31m"))))
    add(Case("td_module_newline", "control character",
             make=edited(base, lambda a: a.victim()["meta"].update(td_module="0\n" + PWNED))))
    add(Case("signature_target_newline", "control character",
             make=edited(base, lambda a: a.document["signature"]["inputs"][-1].update(
                 target="x\ninput forged")), commands=("show", "show --signature")))
    add(Case("output_key_newline", "control character",
             make=edited(base, lambda a: a.document["signature"]["outputs"][0].update(
                 key=["output", "a\nb"])), commands=("show", "show --signature", "render")))
    add(Case("kwarg_not_identifier", "not an identifier",
             make=edited(base, lambda a: a.victim().update(
                 kwargs=[["a" + PWNED, {"int": 1}]]))))
    add(Case("kwarg_out", "out",
             make=edited(base, lambda a: a.victim().update(kwargs=[["out", victim_input(a)]]))))
    add(Case("kwargs_duplicate", "repeats",
             make=edited(base, lambda a: a.victim().update(
                 kwargs=[["inplace", {"bool": False}], ["inplace", {"bool": False}]]))))

    # Operators a loaded program may not run, and constants over the memory budget.
    def call(target, args, kwargs=()):
        def edit(a):
            a.victim().update(target=target, args=args, kwargs=[list(k) for k in kwargs])
        return edit
    def victim_input(a):
        return a.victim()["args"][0]
    add(Case("op_from_file", "from_file",
             make=edited(base, call("aten::from_file", [{"str": "/etc/passwd"}, {"none": None},
                                                        {"int": 100}])),
             commands=("show", "show --code", "render")))
    add(Case("op_as_strided", "as_strided",
             make=edited(base, lambda a: call("aten::as_strided", [
                 victim_input(a), {"list": [{"int": 1 << 20}]}, {"list": [{"int": 1}]},
                 {"int": 1 << 30}])(a))))
    add(Case("op_set", "set_",
             make=edited(base, lambda a: call("aten::set_.source_Tensor",
                                              [victim_input(a), victim_input(a)])(a))))
    add(Case("op_unknown", "aten::no_such_op",
             make=edited(base, call("aten::no_such_op", []))))
    add(Case("op_get_attr", "get_attr",
             make=edited(base, lambda a: a.victim().update(op="get_attr", target="fc1.weight"))))
    add(Case("op_call_method", "call_method",
             make=edited(base, lambda a: a.victim().update(op="call_method", target="relu"))))
    add(Case("zeros_2_pow_40", "memory budget",
             make=edited(base, call("aten::zeros", [{"list": [{"int": 1 << 40}]}])),
             commands=("show", "show --code", "render")))
    add(Case("zeros_size_overflow", "memory budget",
             make=edited(base, call("aten::zeros", [{"list": [{"int": 1 << 32}] * 3}]))))
    add(Case("zeros_size_in_kwargs", "memory budget",
             make=edited(base, call("aten::zeros", [], [("size", {"list": [{"int": 1 << 40}]})]))))
    add(Case("full_2_pow_40", "memory budget",
             make=edited(base, call("aten::full", [{"list": [{"int": 1 << 20}, {"int": 1 << 20}]},
                                                   {"float": 1.0}]))))
    add(Case("arange_2_pow_40", "memory budget",
             make=edited(base, call("aten::arange", [{"int": 1 << 40}]))))
    add(Case("repeat_2_pow_40", "memory budget",
             make=edited(base, lambda a: call("aten::repeat", [
                 victim_input(a), {"list": [{"int": 1 << 20}, {"int": 1 << 20}]}])(a))))

    # Memory formats and layouts: by the name torch has them under, of the kind the schema takes.
    def clone(memory_format):
        return lambda a: call("aten::clone", [victim_input(a), memory_format])(a)
    add(Case("arg_memory_format_unknown", "invalid memory format 'channels_first'",
             make=edited(base, clone({"memory_format": "channels_first"})),
             commands=("show", "show --code", "render")))
    add(Case("arg_memory_format_injection", "invalid memory format",
             make=edited(base, clone({"memory_format": "channels_last" + PWNED})),
             commands=("show", "show --code")))
    add(Case("arg_layout_not_a_string", "invalid layout 0",
             make=edited(base, lambda a: call("aten::zeros_like", [
                 victim_input(a), {"none": None}, {"layout": 0}])(a))))
    add(Case("arg_layout_for_memory_format", "where the schema takes MemoryFormat",
             make=edited(base, clone({"layout": "strided"}))))

    # The output node and the signature.
    def set_output(value):
        return lambda a: a.output().update(args=[value])
    add(Case("output_none", "non-empty tuple", make=edited(base, set_output({"none": None}))))
    add(Case("output_empty_tuple", "non-empty tuple", make=edited(base, set_output({"tuple": []}))))
    add(Case("output_missing", "output node",
             make=edited(base, lambda a: a.document["nodes"].pop() and None)))
    add(Case("output_twice", "output",
             make=edited(base, lambda a: a.document["nodes"].append(
                 dict(a.output(), name="output_1")))))
    add(Case("signature_outputs_fewer", "signature lists",
             make=edited(base, lambda a: a.document["signature"]["outputs"].pop() and None),
             commands=("show", "show --signature")))
    add(Case("signature_output_renamed", "output 0 of the signature",
             make=edited(base, lambda a: a.document["signature"]["outputs"][0].update(
                 name=a.placeholders()[0]["name"]))))
    add(Case("signature_inputs_swapped", "signature input 0",
             make=edited(base, lambda a: a.document["signature"]["inputs"].reverse())))
    add(Case("signature_inputs_extra", "signature lists",
             make=edited(base, lambda a: a.document["signature"]["inputs"].append(
                 {"kind": "user_input", "name": "extra", "target": "extra"}))))
    add(Case("signature_input_kind_unknown", "unknown input kind",
             make=edited(base, lambda a: a.document["signature"]["inputs"][0].update(
                 kind="custom_object"))))
    add(Case("signature_user_targets_twice", "two user inputs",
             make=edited(base, lambda a: [i.update(target="same")
                                          for i in a.document["signature"]["inputs"]
                                          if i["kind"] == "user_input"] and None)))

    # Weights.
    first = base.document["weights"][0]
    first_bytes = dict(base.records)[first["record"]]

    def weight(edit):
        return edited(base, lambda a: edit(a, a.document["weights"][0]))

    def placeholder_of(a, w):
        return a.node(w["name"])
    add(Case("weight_record_short", "needs",
             make=edited(base, lambda a: a.set_record(first["record"], first_bytes[:-1]))))
    add(Case("weight_record_long", "needs",
             make=edited(base, lambda a: a.set_record(first["record"], first_bytes + b"\0"))))
    add(Case("weight_record_missing", first["record"],
             make=edited(base, lambda a: a.drop_record(first["record"]))))
    add(Case("weight_entry_missing", "has no weight",
             make=edited(base, lambda a: a.document["weights"].pop(0) and None)))
    add(Case("weight_not_an_input", "not a parameter or buffer",
             make=weight(lambda a, w: w.update(name="bogus"))))
    add(Case("weight_record_is_program", "record of its own",
             make=weight(lambda a, w: w.update(record="program.json"))))
    add(Case("weight_record_shared", "record of its own",
             make=edited(base, lambda a: a.document["weights"][1].update(
                 record=a.document["weights"][0]["record"]))))
    add(Case("weight_dtype_mismatch", "differs from its placeholder",
             make=edited(base, lambda a: (
                 a.document["weights"][0].update(dtype="float64"),
                 a.set_record(first["record"], first_bytes * 2)) and None)))
    add(Case("weight_shape_mismatch", "differs from its placeholder",
             make=weight(lambda a, w: w.update(shape=list(reversed(w["shape"])) + [1]))))
    add(Case("weight_dtype_unknown", "invalid dtype",
             make=weight(lambda a, w: w.update(dtype="float128"))))

    def bool_weight(a, w):
        numel = 1
        for d in w["shape"]:
            numel *= d
        w["dtype"] = "bool"
        placeholder_of(a, w)["meta"]["dtype"] = "bool"
        a.set_record(w["record"], bytes([0, 1, 2]) + bytes(numel - 3))
    add(Case("weight_bool_byte_2", "other than 0 and 1", make=weight(bool_weight)))

    def huge_weight(shape):
        def edit(a, w):
            w["shape"] = shape
            placeholder_of(a, w)["meta"]["shape"] = shape
        return edit
    add(Case("weight_shape_2_pow_40", "memory budget",
             make=weight(huge_weight([1 << 40]))))
    add(Case("weight_shape_overflow", "memory budget",
             make=weight(huge_weight([1 << 32, 1 << 32, 1 << 32]))))
    add(Case("meta_shape_negative", "non-negative",
             make=weight(lambda a, w: w.update(shape=[-4, -3]))))
    add(Case("meta_shape_65_dims", "at most 64",
             make=edited(base, lambda a: a.victim()["meta"].update(shape=[1] * 65))))
    add(Case("meta_device_cuda", "invalid device",
             make=edited(base, lambda a: a.victim()["meta"].update(device="cuda:0"))))

    # Programs that load and then, run, ask for gigabytes (issue 24): `tdfx run` refuses
    # each at its node before the allocation, within the limits of every case here.
    def with_buffer(a, name, shape):
        """A float32 buffer `name` of `shape` (0 bytes: a size is 0), before the user inputs."""
        at = a.nodes().index(a.user_placeholder())
        meta = dict(a.user_placeholder()["meta"], shape=shape, td_module="")
        meta.pop("batch_dims", None)
        a.nodes().insert(at, {"name": name, "op": "placeholder", "target": name, "args": [],
                              "kwargs": [], "meta": meta})
        inputs = a.document["signature"]["inputs"]
        first_user = next(i for i, e in enumerate(inputs) if e["kind"] == "user_input")
        inputs.insert(first_user, {"kind": "buffer", "name": name, "target": "module.0." + name})
        record = f"weights/{len(a.records)}"
        a.document["weights"].append({"dtype": "float32", "name": name, "record": record,
                                      "shape": shape})
        a.records.append((record, b""))

    def before_victim(a, *calls):
        """Inserts calls ([name, target, args, kwargs]) before the victim, with its meta."""
        at = a.nodes().index(a.victim())
        for name, target, args, kwargs in calls:
            a.nodes().insert(at, {"name": name, "op": "call_function", "target": target,
                                  "args": args, "kwargs": [list(k) for k in kwargs],
                                  "meta": dict(a.victim()["meta"])})
            at += 1

    def ints(*values):
        return {"list": [v if isinstance(v, dict) else {"int": v} for v in values]}
    f64 = ("dtype", {"dtype": "float64"})

    def run_attack(name, edit, expect, spec="run", **options):
        add(Case("run_" + name, expect, make=edited(base, edit), commands=(spec,), status=1,
                 names_file=False, **options))
    budget = "allocation of"
    run_attack("arange_float_end",
               lambda a: call("aten::arange", [{"float": 9e8}], [f64])(a), budget)
    run_attack("eye", lambda a: call("aten::eye.m", [{"int": 40000}, {"int": 40000}])(a), budget)

    def zeros_of_a_size(a):
        with_buffer(a, "b_empty", [60000, 0])
        before_victim(a, ["n", "aten::size.int", [{"node": "b_empty"}, {"int": 0}], []])
        call("aten::zeros", [ints({"node": "n"}, {"node": "n"})],
             [("dtype", {"dtype": "float32"})])(a)
    run_attack("zeros_of_a_size", zeros_of_a_size, budget)

    def expand_contiguous(a):
        with_buffer(a, "b_empty", [60000, 0])
        before_victim(a, ["n", "aten::size.int", [{"node": "b_empty"}, {"int": 0}], []],
                      ["one", "aten::reshape", [victim_input(a), ints(-1)], []],
                      ["first", "aten::slice.Tensor", [{"node": "one"}, {"int": 0}, {"int": 0},
                                                       {"int": 1}], []],
                      ["square", "aten::reshape", [{"node": "first"}, ints(1, 1)], []],
                      ["wide", "aten::expand", [{"node": "square"},
                                                ints({"node": "n"}, {"node": "n"})], []])
        call("aten::contiguous", [{"node": "wide"}])(a)
    run_attack("expand_contiguous", expand_contiguous, budget)

    def upsample(a):
        before_victim(a, ["image", "aten::zeros", [ints(1, 1, 2, 2)], []])
        call("aten::upsample_nearest2d.vec",
             [{"node": "image"}, {"none": None}, {"list": [{"float": 20000.0}] * 2}])(a)
    run_attack("upsample", upsample, budget)
    # Exactly the budget (64 MiB) in one tensor, then one byte more.
    def linspace(a):
        before_victim(a, ["l", "aten::linspace",
                          [{"float": 0.0}, {"float": 1.0}, {"int": (64 << 20) // 8}], [f64]])
        call("aten::mul.Scalar", [{"node": "l"}, {"int": 2}])(a)
    run_attack("linspace_then_one_more", linspace, "torch.linspace(start=0.0, end=1.0, "
               "steps=8388608, dtype=torch.float64): an allocation of 67.1 MB",
               spec="run --memory-budget 64")

    def unbind(a):
        with_buffer(a, "b_tall", [30000000, 0])
        before_victim(a, ["parts", "aten::unbind.int", [{"node": "b_tall"}, {"int": 0}], []])
        a.victim().update(op="call_function", target="operator.getitem",
                          args=[{"node": "parts"}, {"int": 0}], kwargs=[])
    run_attack("unbind", unbind, "makes 30000000 tensors")
    run_attack("drawn_input_50000_squared",
               lambda a: a.user_placeholder()["meta"].update(shape=[50000, 50000]),
               "would be drawn as float32 [50000, 50000], which takes 10 GB")
    # A tensor file whose storage holds 3 floats and whose sizes are (1e8, 3), stride 0: it
    # passes the bounds check and is 1.2 GB once a program expands it; refused by its size.
    stride_0 = os.path.join(os.path.dirname(base.path), "stride_0.pt")

    def program_and_stride_0_file(path):
        edited(base, lambda a: a.user_placeholder()["meta"].update(shape=[100000000, 3]))(path)
        import torch  # Debian's python3-torch, as for the other Python tests
        torch.save({"input_x": torch.zeros(3).expand(100000000, 3)}, stride_0)
    add(Case("run_tensor_file_stride_0", "1.2 GB", make=program_and_stride_0_file,
             commands=(f"run --memory-budget 64 --input input_x={stride_0}",), status=2,
             names_file=False))
    # Size arithmetic (a dynamic batch's `2*s0`) is Python's int arithmetic, checked as it
    # runs: an overflow or a division by zero is a refusal, not a wrapped size.
    def size_arithmetic(target, operand):
        def edit(a):
            with_buffer(a, "b_sized", [3, 0])
            before_victim(a, ["n", "aten::size.int", [{"node": "b_sized"}, {"int": 0}], []],
                          ["m", target, [{"node": "n"}, {"int": operand}], []])
            call("aten::zeros", [ints({"node": "m"}, 0)], [("dtype", {"dtype": "float32"})])(a)
        return edit
    run_attack("size_mul_overflow", size_arithmetic("operator.mul", 1 << 62),
               "operator.mul of 3 and 4611686018427387904 overflows int64")
    add(Case("size_floordiv_zero", "operator.floordiv divides by zero",
             make=edited(base, size_arithmetic("operator.floordiv", 0))))
    # A value taken as a type it is not (graph/value_type.h): refused at load, naming both.
    def taken_as(target):
        def edit(a):
            a.victim().update(op="call_function", target=target,
                              args=[{"node": a.user_placeholder()["name"]}, {"int": 2}], kwargs=[])
        return edited(base, edit)
    add(Case("getitem_of_a_tensor", "a Tensor, where operator.getitem takes a list or a tuple",
             make=taken_as("operator.getitem")))
    add(Case("size_mul_of_a_tensor", "a Tensor, where operator.mul takes ints",
             make=taken_as("operator.mul")))
    # A tensor among view's sizes: the plan builds an int[] from the items' values.
    def tensor_in_sizes(a):
        a.victim().update(op="call_function", target="aten::view",
                          args=[{"node": a.user_placeholder()["name"]},
                                {"list": [{"node": a.user_placeholder()["name"]}]}], kwargs=[])
    add(Case("tensor_in_int_list", "of type Tensor, where the schema takes int[]",
             make=edited(base, tensor_in_sizes)))
    add(Case("derived_dims_not_a_list", "derived_dims must be",
             make=edited(base, lambda a: a.victim()["meta"].update(derived_dims=[[0, 0, 1, 0]]))))
    def one_hot(a):
        before_victim(a, ["classes", "aten::zeros", [ints(32)], [("dtype", {"dtype": "int64"})]])
        call("aten::one_hot", [{"node": "classes"}, {"int": 500000000}])(a)
    run_attack("one_hot_5e8", one_hot, "an allocation of 128 GB")

    # Programs that load and then, run, would take hours (issue 38): an op that could not
    # finish in the time budget even at the fastest a CPU goes is refused before it starts,
    # and past the deadline the next op is.
    time_budget = "more than is left of the program's time budget"

    def expanded(a, buffer, shape, *sizes):
        """Calls making `wide`: one element of the input, expanded to `sizes` (ints, or "n":
        the size of `buffer`, a float32 buffer of `shape`)."""
        with_buffer(a, buffer, shape)
        before_victim(a, ["n", "aten::size.int", [{"node": buffer}, {"int": 0}], []],
                      ["one", "aten::reshape", [victim_input(a), ints(-1)], []],
                      ["first", "aten::slice.Tensor", [{"node": "one"}, {"int": 0}, {"int": 0},
                                                       {"int": 1}], []],
                      ["point", "aten::reshape", [{"node": "first"}, ints(*[1] * len(sizes))],
                       []],
                      ["wide", "aten::expand", [{"node": "point"}, ints(
                          *[{"node": "n"} if s == "n" else s for s in sizes])], []])

    def reduce_cube(target, *extra):
        def edit(a):
            expanded(a, "b_empty", [60000, 0], "n", "n", "n")
            call(target, [{"node": "wide"}, *extra])(a)
        return edit
    run_attack("amax_of_an_expanded_view", reduce_cube("aten::amax", ints(0, 1, 2)),
               "aten::amax would take 2.2e+14 elements")
    run_attack("sum_of_an_expanded_view", reduce_cube("aten::sum"),
               "aten::sum would take 2.2e+14 elements")

    def wide_window(a):
        expanded(a, "b_tall", [30000000, 0], 1, 1, "n")
        call("aten::max_pool1d", [{"node": "wide"}, ints(2000000), ints(1)])(a)
    run_attack("max_pool1d_of_a_wide_window", wide_window, time_budget)

    def many_products(a):
        calls = [["m0", "aten::ones", [ints(1000, 1000)], []]]
        for i in range(1, 200):
            calls.append([f"m{i}", "aten::mm", [{"node": f"m{i - 1}"}, {"node": "m0"}], []])
        before_victim(a, *calls)
        call("aten::relu", [{"node": "m199"}])(a)
    run_attack("two_hundred_products", many_products,
               # Refused either as past the deadline or as unable to finish before it.
               "the program's time budget (LoadOptions::time_budget, tdfx run --time-budget) "
               "of 0.3 s",
               # Each product of two 1000x1000 matrices is a 4 MB tensor, and OpenBLAS keeps
               # work buffers of its own per thread: 208 MB at the peak measured on a 2-core
               # machine (a tdfx at rest takes 163 MB).
               spec="run --time-budget 0.3", rss_mb=260)

    # Memory no allocator sees (issue 38): work vectors, tensor lists and dimension counts,
    # each bounded by a cost rule before the op runs.
    def first_of(target, args, kwargs=()):
        def edit(a):
            before_victim(a, ["parts", target, args, list(kwargs)])
            a.victim().update(op="call_function", target="operator.getitem",
                              args=[{"node": "parts"}, {"int": 0}], kwargs=[])
        return edit

    def sorted_wide(target, *args, kwargs=()):
        def edit(a):
            expanded(a, "b_tall", [30000000, 0], "n")
            first_of(target, [{"node": "wide"}, *args], kwargs)(a)
        return edit
    sorts = "sorts 30000000 elements at a time in work memory of its own, which takes 480 MB"
    run_attack("topk_of_an_expanded_view", sorted_wide("aten::topk", {"int": 1}),
               "aten::topk " + sorts, spec="run --memory-budget 64")
    run_attack("sort_stable_of_an_expanded_view",
               sorted_wide("aten::sort.stable", kwargs=[("stable", {"bool": True})]),
               "aten::sort " + sorts, spec="run --memory-budget 64")

    def tall_list(target, *args):
        def edit(a):
            with_buffer(a, "b_tall", [30000000, 0])
            first_of(target, [{"node": "b_tall"}, *args])(a)
        return edit
    run_attack("unsafe_chunk", tall_list("aten::unsafe_chunk", {"int": 30000000}),
               "aten::unsafe_chunk makes 30000000 tensors")
    # (Its program.json takes about 60 MB to read, within the budget and freed before the run.)
    run_attack("split_with_sizes_of_150000",
               tall_list("aten::split_with_sizes", ints(*[1] * 150000)),
               "aten::split_with_sizes makes 150000 tensors, whose bookkeeping takes 76.8 MB",
               spec="run --memory-budget 72", rss_mb=300,
               note="program.json of 1.5 MB, 60 MB to read: the cost the budget allows")
    run_attack("hundred_dimensions",
               lambda a: (before_victim(a, ["many", "aten::reshape",
                                            [victim_input(a), ints(*[1] * 99, -1)], []]),
                          call("aten::relu", [{"node": "many"}])(a)) and None,
               "aten::relu takes a tensor of 100 dimensions; a program run under a budget may "
               "use at most 64")
    # A program.json that takes more memory to read than the budget: refused as it is read,
    # by every command.
    def long_list(a):
        first_of("aten::split_with_sizes",
                 [victim_input(a), ints(*[1] * 400000)])(a)
    for spec in ("show --memory-budget 16", "render --memory-budget 16",
                 "run --memory-budget 16", "onnx --memory-budget 16"):
        add(Case("program_json_over_the_budget_" + spec.split()[0], "reading program.json would "
                 "go past the memory budget (LoadOptions::memory_budget, --memory-budget) of "
                 "16.8 MB", make=edited(base, long_list), commands=(spec,), rss_mb=300, cpu_s=3,
                 note="program.json of 4 MB: reading it is the cost"))
    # A LayerNorm without weight over 3e8 elements, which the converter would write as 1.2 GB
    # of ones: its constant size is refused as the file loads.
    def wide_layer_norm(a):
        call("aten::layer_norm", [victim_input(a), ints(300000000), {"none": None},
                                  {"none": None}, {"float": 1e-5}, {"bool": False}])(a)
    add(Case("onnx_layer_norm_of_3e8", "asks for 300000000 elements, over the memory budget",
             make=edited(base, wide_layer_norm), commands=("onnx --memory-budget 64",)))
    # What the ONNX converter makes itself is held to the budget: the weight and bias of a
    # BatchNorm without them, filled for the billion channels the input's traced shape claims.
    def wide_batch_norm(a):
        a.node(victim_input(a)["node"])["meta"]["shape"] = [2, 1000000000]
        before_victim(a, ["stats", "aten::zeros", [ints(2)], []])
        call("aten::batch_norm", [victim_input(a), {"none": None}, {"none": None},
                                  {"node": "stats"}, {"node": "stats"}, {"bool": False},
                                  {"float": 0.1}, {"float": 1e-5}, {"bool": False}])(a)
    add(Case("onnx_batch_norm_of_1e9_channels", "the float32 tensor of 1000000000 elements it "
             "would write takes 4 GB", make=edited(base, wide_batch_norm),
             commands=("onnx --memory-budget 64",), status=1, names_file=False))
    # A BatchNorm whose running statistics are not of its channels makes a model ONNX's shape
    # inference refuses, with a failure a line: said on one line.
    def mismatched_batch_norm(a):
        before_victim(a, ["stats", "aten::zeros", [ints(2)], []])
        call("aten::batch_norm", [victim_input(a), {"none": None}, {"none": None},
                                  {"node": "stats"}, {"node": "stats"}, {"bool": False},
                                  {"float": 0.1}, {"float": 1e-5}, {"bool": False}])(a)
    add(Case("onnx_batch_norm_of_the_wrong_statistics", "fails ONNX's checks",
             make=edited(base, mismatched_batch_norm), commands=("onnx",), status=1,
             names_file=False))
    # One budget for both programs of a diff: a program of 14 MB of weights, compared with
    # itself within 16 MB, leaves its second reading 2 MB.
    def fourteen_megabytes(a):
        with_buffer(a, "b_wide", [3500000])
        a.set_record(a.document["weights"][-1]["record"], bytes(14000000))
    add(Case("diff_past_the_budget", "the weights need more than the memory budget",
             make=edited(base, fourteen_megabytes), commands=("diff_self --memory-budget 16",)))

    # Drawings that once ran past 60 s: refused in a moment (issue 24).
    def many_modules(a):
        first = a.document["modules"][0]
        a.document["modules"] += [dict(first, path=f"module.9.{i}", sequential=False)
                                  for i in range(20004)]
    def many_keys(a):
        module(a, in_keys=[{"key": [f"k{i}"], "is_tuple": False} for i in range(50000)])
    def deep_boxes(a):
        first = a.document["modules"][0]
        path = "module.9"
        for _ in range(7000):
            a.document["modules"].append(dict(first, path=path, sequential=True, in_keys=[],
                                              out_keys=[]))
            path += ".0"
    # (The op view of 50,000 in-keys fits its budget: one box, its keys in one label.)
    both = ("render --html", "render --html --view modules")
    for name, edit, expect, commands in (
            ("20004_modules", many_modules, "modules, more than the 10000", both),
            ("50000_in_keys", many_keys, "key cells", both[1:]),
            ("7000_deep_boxes", deep_boxes, "more than the 64 levels", both)):
        add(Case("render_" + name, expect, make=edited(base, edit), commands=commands, status=1,
                 names_file=False, rss_mb=400, cpu_s=3,
                 note="program.json of 4 to 50 MB (7,000 nested paths take 49 MB): reading "
                      "it is the cost, which LoadOptions::max_program_bytes bounds"))

    # Legal programs that once broke the diagram: they must show and render.
    def key_names(a):
        calls = [n["name"] for n in a.nodes() if n["op"] == "call_function"]
        rename_node(a, calls[0], "key_0")
        rename_node(a, calls[1], "key_1")
    add(Case("nodes_named_key_0_key_1", None, make=edited(base, key_names),
             commands=("show", "show --signature", "show --graph", "show --code", "render"),
             accept=True, note="legal: names the diagram once used for its notes"))
    # A user input whose key is a weight's placeholder name: one tensor each, in `run` (which
    # names inputs by key) as in ONNX (where the weight's initializer is renamed).
    def key_named_like_a_weight(a):
        inputs = a.document["signature"]["inputs"]
        weight = next(i["name"] for i in inputs if i["kind"] == "parameter")
        next(i for i in inputs if i["kind"] == "user_input")["target"] = weight
    add(Case("user_input_key_named_like_a_weight", None,
             make=edited(base, key_named_like_a_weight), commands=("run", "show --signature"),
             accept=True, note="legal: keys and placeholder names are apart"))
    add(Case("clone_contiguous_format", None,
             make=edited(base, clone({"memory_format": "contiguous_format"})),
             commands=("show", "show --graph", "show --code", "render"),
             accept=True, note="legal: a memory format argument"))
    return out


# --- running tdfx ----------------------------------------------------------------


# Runs argv[2:] and writes "status wall-seconds cpu-seconds max-RSS-KiB" to argv[1]. A fresh, small
# process: a child's ru_maxrss counts the memory of the process it was started from
# (the pages it held when it called exec), so the harness, which may be large, does
# not start tdfx itself.
MEASURE = """
import os, sys, time
start = time.monotonic()
pid = os.posix_spawn(sys.argv[2], sys.argv[2:], os.environ)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as report:
    seconds = time.monotonic() - start
    cpu = usage.ru_utime + usage.ru_stime
    report.write(f"{os.waitstatus_to_exitcode(status)} {seconds} {cpu} {usage.ru_maxrss}")
"""


def run(command, timeout):
    """Runs `command`; returns (status, stdout, stderr, wall seconds, peak RSS in MB,
    CPU seconds) of that child alone. status is negative for a signal and None when the run was
    killed for taking longer than `timeout`."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r") as report:
        process = subprocess.Popen([sys.executable, "-S", "-c", MEASURE, report.name] + command,
                                   stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
        try:
            process.wait(timeout)
            killed = False
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            killed = True
        out.seek(0)
        err.seek(0)
        fields = report.read().split()
        if killed:
            return (None, out.read(), err.read(), float(timeout), 0.0, 0.0)
        if len(fields) != 4:
            raise RuntimeError(f"cannot run {command}: {err.read().decode(errors='replace')}")
        return (int(fields[0]), out.read(), err.read(), float(fields[1]),
                int(fields[3]) / 1024.0, float(fields[2]))


def command_for(tdfx, spec, path, scratch):
    words = spec.split()
    if words[0] == "diff_self":  # the case file against itself
        return [tdfx, "diff", path, path] + words[1:]
    if words[0] == "onnx":
        return [tdfx, "onnx", path, "-o", os.path.join(scratch, "out.onnx")] + words[1:]
    if words[0] == "render":
        ext = ".html" if "--html" in words else ".svg"
        return [tdfx, "render", path, "-o", os.path.join(scratch, "out" + ext)] + \
            [w for w in words[1:] if w != "--html"]
    return [tdfx] + words[:1] + [path] + words[1:]


def describe_status(status):
    if status is None:
        return "killed after a timeout (it hangs)"
    if status < 0:
        return f"killed by signal {signal.Signals(-status).name}"
    return f"exit status {status}"


def check_refusal(case, spec, path, result, scratch):
    status, stdout, stderr, seconds, rss, cpu = result
    if status == 0:
        return [f"accepted (exit status 0, expected 2); stdout: {stdout[:120]!r}..."]
    problems = []
    if status != case.status:
        problems.append(f"{describe_status(status)}, expected {case.status}")
    if stdout and not spec.startswith("run"):  # run prints its inputs before it runs
        problems.append(f"stdout is not empty: {stdout[:200]!r}")
    text = stderr.decode("utf-8", "replace")
    prefix = f"tdfx: {path}: " if case.names_file else "tdfx: "
    if not text.endswith("\n") or text.count("\n") != 1:
        problems.append(f"stderr is not one line: {text[:600]!r}")
    if not text.startswith(prefix):
        problems.append(f"stderr does not start with {prefix!r}: {text[:300]!r}")
    problem = text[len(prefix):] if text.startswith(prefix) else text
    if case.expect and case.expect not in problem:
        problems.append(f"the message does not mention {case.expect!r}: {text.strip()[:600]!r}")
    if spec.startswith("render") and any(os.path.exists(os.path.join(scratch, "out" + ext))
                                          for ext in (".svg", ".html")):
        problems.append("render wrote a drawing for a refused archive")
    return problems


def check_acceptance(case, spec, result, scratch):
    status, stdout, stderr, seconds, rss, cpu = result
    problems = []
    if status != 0:
        problems.append(f"{describe_status(status)}, expected 0: "
                        f"{stderr.decode('utf-8', 'replace').strip()[:600]!r}")
    elif stderr:
        problems.append(f"stderr is not empty: {stderr[:300]!r}")
    if not stdout:
        problems.append("nothing on stdout")
    if spec.startswith("render") and status == 0:
        svg = os.path.join(scratch, "out.svg")
        if not os.path.exists(svg) or b"<svg" not in open(svg, "rb").read():
            problems.append("render did not write an SVG")
    return problems


class PythonLoader:
    """python/tdfx_fx.py, loaded in this process (`load`: read and made a GraphModule): the second loader, which must accept and
    refuse the same files as tdfx, and refuse only with its ArchiveError. A read that runs
    past PYTHON_READ_S is interrupted (SIGALRM) and fails the case: it hangs."""

    def __init__(self):
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                        "python"))
        import tdfx_fx  # imports Debian's python3-torch
        self.module = tdfx_fx
        signal.signal(signal.SIGALRM, self._timeout)

    class Timeout(Exception):
        pass

    def _timeout(self, signum, frame):
        raise PythonLoader.Timeout()

    def check(self, path, accept):
        """The problems of reading `path`, which tdfx accepted when `accept`, and the read's
        times as `run` reports them (its peak memory is not measured: 0)."""
        start, start_cpu = time.monotonic(), time.process_time()
        problems = self._problems(path, accept)
        return problems, (0, b"", b"", time.monotonic() - start, 0.0,
                          time.process_time() - start_cpu)

    def _problems(self, path, accept):
        signal.setitimer(signal.ITIMER_REAL, PYTHON_READ_S)
        try:
            self.module.load(path)
            error = None
        except self.module.ArchiveError as e:
            error = e
        except PythonLoader.Timeout:
            return [f"the Python loader took more than {PYTHON_READ_S:g} s"]
        except BaseException as e:  # anything but ArchiveError is a bug of the loader
            return [f"the Python loader raised {type(e).__name__}, not ArchiveError: "
                    f"{str(e)[:300]!r}"]
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        if accept and error is not None:
            return [f"the Python loader refuses what tdfx accepts: {str(error)[:300]!r}"]
        if not accept and error is None:
            return ["the Python loader accepts what tdfx refuses"]
        return []


def check_limits(result, startup, case=None):
    status, stdout, stderr, seconds, rss, cpu = result
    cpu_limit = case.cpu_s if case else CPU_LIMIT_S
    rss_limit = case.rss_mb if case else RSS_LIMIT_MB
    problems = []
    if cpu - startup >= cpu_limit:
        problems.append(f"used {cpu:.2f} s of CPU, {cpu - startup:.2f} s more than starting "
                        f"tdfx (limit {cpu_limit:g} s, TDFX_HOSTILE_CPU_S)")
    if rss >= rss_limit:
        problems.append(f"peak RSS {rss:.0f} MB (limit {rss_limit:g} MB, TDFX_HOSTILE_RSS_MB)")
    return problems


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    tdfx, scratch = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    if not os.access(tdfx, os.X_OK):
        print(f"FAIL setup: {tdfx} is not an executable")
        print("0 passed, 1 failed")
        return 1
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    demo = run([tdfx, "demo", "--out", scratch], 120)
    archive_path = os.path.join(scratch, "trace_sequential.pt2")
    if demo[0] != 0 or not os.path.exists(archive_path):
        print(f"FAIL setup: tdfx demo: {describe_status(demo[0])}: {demo[2].decode()[-2000:]}")
        print("0 passed, 1 failed")
        return 1
    base = Archive(archive_path)
    # Starting tdfx (loading LibTorch's and Graphviz's ~300 shared libraries) takes
    # most of a second of CPU: the CPU limit is on what a file costs beyond that. The
    # memory limit is on the whole process.
    startup_runs = [run([tdfx, "--help"], KILL_AFTER_S) for _ in range(3)]
    if any(r[0] != 0 for r in startup_runs):
        print(f"FAIL setup: tdfx --help: {describe_status(startup_runs[0][0])}")
        print("0 passed, 1 failed")
        return 1
    startup = min(r[5] for r in startup_runs)
    print(f"tdfx --help uses {startup:.2f} s of CPU and {max(r[4] for r in startup_runs):.0f} MB; "
          f"limits: {CPU_LIMIT_S:g} s of CPU more than that, {RSS_LIMIT_MB:g} MB", flush=True)
    cases_dir = os.path.join(scratch, "cases")
    os.makedirs(cases_dir)

    passed = failed = 0

    def report(name, problems, result):
        nonlocal passed, failed
        if problems:
            failed += 1
            print(f"FAIL {name}: " + "; ".join(problems), flush=True)
        else:
            passed += 1
            print(f"ok   {name}  ({result[3]:.2f} s, {result[5]:.2f} s CPU, {result[4]:.0f} MB)",
                  flush=True)

    # The unmodified archive shows and renders: refusals below are for their reasons.
    for spec in ("show", "show --signature", "show --graph", "show --code", "show --readable",
                 "render"):
        svg = os.path.join(scratch, "out.svg")
        if os.path.exists(svg):
            os.remove(svg)
        result = run(command_for(tdfx, spec, archive_path, scratch), KILL_AFTER_S)
        accept = Case("original", None, accept=True)
        problems = check_acceptance(accept, spec, result, scratch)
        report(f"original [{spec}]", problems + check_limits(result, startup), result)
    python = PythonLoader()
    report("original [python]", *python.check(archive_path, True))

    only = os.environ.get("TDFX_HOSTILE_ONLY", "")
    if only:
        print(f"only the cases whose name holds {only!r} (TDFX_HOSTILE_ONLY)", flush=True)
    for case in cases(base):
        if only not in case.name:
            continue
        path = case.path or os.path.join(cases_dir, case.name + ".pt2")
        try:
            if case.make:
                case.make(path)
        except Exception as error:  # a generator that breaks is a failure, never a skip
            failed += 1
            print(f"FAIL {case.name}: cannot generate the file: {error!r}", flush=True)
            continue
        for spec in case.commands:
            for ext in (".svg", ".html"):
                if os.path.exists(os.path.join(scratch, "out" + ext)):
                    os.remove(os.path.join(scratch, "out" + ext))
            label = case.name if spec == "show" else f"{case.name} [{spec}]"
            result = run(command_for(tdfx, spec, path, scratch), KILL_AFTER_S)
            if case.accept:
                problems = check_acceptance(case, spec, result, scratch)
            else:
                problems = check_refusal(case, spec, path, result, scratch)
            problems += check_limits(result, startup, case)
            if problems and case.note:
                problems.append(f"(the case: {case.note})")
            report(label, problems, result)
            first = spec == case.commands[0]
            if case.path is None and ((spec == "show" and case.status == 2) or
                                      (first and case.status == 1)):
                # The loaders agree: what `tdfx show` refuses, tdfx_fx refuses; a program
                # refused only when it runs or is drawn loads in both.
                problems, timing = python.check(path, result[0] == 0 or case.status == 1)
                if problems and case.note:
                    problems.append(f"(the case: {case.note})")
                report(f"{case.name} [python]", problems, timing)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
