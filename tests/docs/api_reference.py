#!/usr/bin/env python3
"""The API reference, built: Doxygen runs docs/Doxyfile over the public headers into OUT_DIR,
from INCLUDE_DIR (a build tree's include folder, where tdfx/<component> links to each source
folder, so that the reference names headers as <tdfx/graph/graph.h>),
and any warning fails (a public declaration without a `///` comment, a comment Doxygen cannot
read; the Doxyfile makes warnings errors). First it checks that the Doxyfile reads exactly the
headers `cmake --install` installs (cmake/install.cmake's TDFX_INTERNAL_* lists left out), less
onnx/'s own files: of onnx/, only onnx_export.h is public. Exit status 1 on a warning or a
header read or left out wrongly.

    api_reference.py DOXYGEN SOURCE_DIR INCLUDE_DIR OUT_DIR
"""
import os
import re
import subprocess
import sys


def doxyfile_values(path):
    """The Doxyfile's settings: name -> list of words, continuation lines joined."""
    values = {}
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"\\\n", " ", f.read())
    for line in text.split("\n"):
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, value = line.split("=", 1)
        values[name.strip()] = value.split()
    return values


def internal_headers(source):
    """cmake/install.cmake's TDFX_INTERNAL_<component> lists, as component/header paths."""
    with open(os.path.join(source, "cmake", "install.cmake"), encoding="utf-8") as f:
        code = "\n".join(line.split("#", 1)[0] for line in f)
    headers = set()
    for component, names in re.findall(r"set\(\s*TDFX_INTERNAL_(\w+)\s+([^)]*)\)", code):
        headers |= {f"{component}/{name}" for name in names.split()}
    return headers


def components(source):
    with open(os.path.join(source, "cmake", "tdfx.cmake"), encoding="utf-8") as f:
        match = re.search(r"set\(\s*TDFX_COMPONENTS\s+([^)]*)\)", f.read())
    return match.group(1).split()


def check_inputs(source, values):
    """What the Doxyfile reads against what is installed; the problems found."""
    def in_source(entry):
        """An entry's path in the source tree: tdfx/X is the source folder's X."""
        return entry[len("tdfx/"):] if entry.startswith("tdfx/") else None

    read = set()
    for entry in filter(None, map(in_source, values.get("INPUT", []))):
        path = os.path.join(source, entry)
        if os.path.isdir(path):
            read |= {f"{entry}/{name}" for name in os.listdir(path) if name.endswith(".h")}
        elif os.path.exists(path) and entry.endswith(".h"):
            read.add(entry)
    read -= set(filter(None, map(in_source, values.get("EXCLUDE", []))))
    internal = internal_headers(source)
    public = {"tdfx.h"}
    for component in components(source):
        folder = os.path.join(source, component)
        public |= {f"{component}/{name}" for name in os.listdir(folder)
                   if name.endswith(".h") and f"{component}/{name}" not in internal}
    public = {h for h in public if not h.startswith("onnx/") or h == "onnx/onnx_export.h"}
    problems = [f"docs/Doxyfile reads {h}, which is not installed or is onnx/'s own"
                for h in sorted(read - public)]
    problems += [f"docs/Doxyfile leaves out {h}, a public header" for h in sorted(public - read)]
    return problems, len(read)


def main(argv):
    if len(argv) != 4:
        print(__doc__)
        return 2
    doxygen, source, include, out = argv
    values = doxyfile_values(os.path.join(source, "docs", "Doxyfile"))
    problems, count = check_inputs(source, values)
    for problem in problems:
        print(problem)
    if problems:
        return 1
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ, TDFX_API_OUT=os.path.abspath(out),
               TDFX_SOURCE_DIR=os.path.abspath(source))
    try:
        done = subprocess.run([doxygen, os.path.join(os.path.abspath(source), "docs", "Doxyfile")],
                              cwd=include, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError:
        print(f"doxygen not found ({doxygen}): scripts/bootstrap.sh --test installs it")
        return 1
    messages = done.stderr.decode("utf-8", "replace").strip().split("\n")
    messages = [m for m in messages if m.strip()]
    for message in messages:
        print(message)
    index = os.path.join(out, "html", "index.html")
    if done.returncode != 0 or messages or not os.path.exists(index):
        print(f"the API reference has {len(messages)} warnings (doxygen exit status "
              f"{done.returncode}); document each declaration named with a `///` comment")
        return 1
    print(f"the API reference of {count} public headers, without a warning: {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
