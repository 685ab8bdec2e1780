#!/usr/bin/env python3
"""The folders' layering, checked: every `#include "tdfx/<folder>/..."` (or "samples/...",
"bench/...", "tests/...") in a folder's sources and every `tdfx::<folder>` its CMakeLists.txt
links must be one the folder may depend on (ALLOWED below, DESIGN.md's picture: a folder
depends only on those above it). Prints each violation with its file and line; exit status 1
when there is one.

    check_layers.py [--root DIR]     # the tree at DIR (default: this repository)
    check_layers.py --self-test      # a planted wrong include and link must be found
"""
import os
import re
import sys
import tempfile

LIBRARY = ["core", "graph", "tensordict", "codegen", "tracer", "viz", "export", "onnx", "debug",
           "diagram"]

# What each folder may depend on. viz draws ModuleBox (tensordict/module_box.h) but knows no
# TensorDict; export and debug draw nothing (diagram/ is the only glue between programs, traces
# or debugging results and viz/); samples is a library that cli and bench link; nothing but
# tests/ includes tests/.
ALLOWED = {
    "core": [],
    "graph": ["core"],
    "tensordict": ["core"],
    "codegen": ["core", "graph"],
    "tracer": ["core", "graph", "tensordict", "codegen"],
    "viz": ["core", "graph", "tensordict", "codegen"],
    "export": ["core", "graph", "tensordict", "codegen", "tracer"],
    "onnx": ["core", "graph", "tensordict", "codegen", "tracer", "export"],
    "debug": ["core", "graph", "tensordict", "codegen", "tracer", "export"],
    "diagram": ["core", "graph", "tensordict", "codegen", "tracer", "export", "viz", "debug"],
    "samples": LIBRARY,
    "cli": LIBRARY + ["samples"],
    "bench": LIBRARY + ["samples"],
    "fuzz": LIBRARY + ["samples"],
}

# Single includes allowed against the rule above, each with its reason.
EXCEPTIONS = {
    ("bench/bench_onnx.cpp", "tests/onnx/ort_runner.h"):
        "ONNX Runtime runs in Node.js, through the tests' runner; the benchmark times the same runs",
}

INCLUDE = re.compile(r'^\s*#\s*include\s*["<](?:tdfx/([a-z_]+)/|(samples|bench|tests)/)')
LINK = re.compile(r"\btdfx::([a-z_]+)\b")


def declared_links(root):
    """Each folder's `tdfx::` links as its CMakeLists.txt declares them, made transitive."""
    direct = {}
    for folder in ALLOWED:
        cmake = os.path.join(root, folder, "CMakeLists.txt")
        if os.path.exists(cmake):
            with open(cmake, encoding="utf-8") as f:
                code = "\n".join(line.split("#", 1)[0] for line in f)
            direct[folder] = set(LINK.findall(code)) - {folder}
    closed = {}

    def close(folder, seen=()):
        if folder in closed:
            return closed[folder]
        out = set()
        for used in direct.get(folder, ()):
            if used not in seen:
                out |= {used} | close(used, seen + (folder,))
        closed[folder] = out
        return out

    for folder in direct:
        close(folder)
    return closed


def check(root):
    problems = []
    links = declared_links(root)
    for folder, allowed in ALLOWED.items():
        top = os.path.join(root, folder)
        if not os.path.isdir(top):
            continue
        for directory, _, files in os.walk(top):
            for name in sorted(files):
                path = os.path.join(directory, name)
                shown = os.path.relpath(path, root)
                if name.endswith((".h", ".cpp")):
                    with open(path, encoding="utf-8", errors="replace") as source:
                        for number, line in enumerate(source, 1):
                            match = INCLUDE.match(line)
                            if not match:
                                continue
                            used = match.group(1) or match.group(2)
                            header = line.split('"')[1] if '"' in line else ""
                            if (shown, header) in EXCEPTIONS:
                                continue
                            if used != folder and used not in allowed:
                                problems.append(
                                    f"{shown}:{number}: {folder}/ includes {used}/ "
                                    f"({line.strip()}); {folder}/ may use: "
                                    f"{', '.join(allowed) or 'nothing'}")
                            elif (folder in LIBRARY and used != folder and
                                  used not in links.get(folder, ())):
                                problems.append(
                                    f"{shown}:{number}: {folder}/ includes {used}/ "
                                    f"({line.strip()}) but its CMakeLists.txt links no "
                                    f"tdfx::{used}, directly or through another")
                elif name == "CMakeLists.txt":
                    with open(path, encoding="utf-8") as cmake:
                        for number, line in enumerate(cmake, 1):
                            code = line.split("#", 1)[0]
                            for used in LINK.findall(code):
                                if used != folder and used not in allowed:
                                    problems.append(
                                        f"{shown}:{number}: {folder}/ links tdfx::{used}; "
                                        f"{folder}/ may use: {', '.join(allowed) or 'nothing'}")
    return problems


def self_test():
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "tracer"))
        with open(os.path.join(root, "tracer", "planted.cpp"), "w") as f:
            f.write('#include "tdfx/tracer/symbolic_trace.h"\n#include "tdfx/viz/render.h"\n')
        with open(os.path.join(root, "tracer", "CMakeLists.txt"), "w") as f:
            f.write("tdfx_add_library(tracer SOURCES planted.cpp DEPS tdfx::graph tdfx::viz)\n")
        problems = check(root)
    expected = ["tracer/planted.cpp:2: tracer/ includes viz/", "tracer/CMakeLists.txt:1: tracer/ links tdfx::viz"]
    found = all(any(p.startswith(e) for p in problems) for e in expected)
    print("\n".join(problems))
    if not found or len(problems) != 2:
        print("self-test: the planted include and link were not both found, alone")
        return 1
    print("self-test: the planted include and link were found")
    return 0


def main():
    if "--self-test" in sys.argv:
        return self_test()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if "--root" in sys.argv:
        root = sys.argv[sys.argv.index("--root") + 1]
    problems = check(root)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} layering violations (tests/layering/check_layers.py says what "
              "each folder may use)")
        return 1
    print("every include and link is one its folder may use")
    return 0


if __name__ == "__main__":
    sys.exit(main())
