#!/usr/bin/env python3
"""Every shell command the documentation shows, run: the commands of the ```sh fenced blocks of
README.md and docs/*.md, each page's in a scratch folder of its own, in the page's order, with
the build tree's programs first on PATH. A command that exits otherwise than the page says (0
unless it shows another status), or prints otherwise than the page shows, fails the test; the
commands a test cannot run are marked in the page, counted and listed. Exit status 1 when a
command failed.

    check_doc_commands.py BIN_DIR [--root DIR] [--work DIR]
        BIN_DIR: the build tree's bin/ (tdfx, the samples); --root: the repository (default:
        this one); --work: where the scratch folders go (default: a temporary folder)
    check_doc_commands.py --self-test    # planted broken commands must be found, alone

How the pages write commands (the conventions this script reads):

- A block opened with ```sh holds commands. A block opened with ```python is one script, run
  with python3 (PYTHONPATH holding the repository's python/) in the page's scratch folder: it
  must exit 0, and what it prints is not compared. Other blocks (```cpp, ```cmake, ```text for
  a synopsis, plain ```) are not run.
- A block in which some line starts with "$ " is a transcript: each "$ " line is a command
  (continued on the next line while it ends in a backslash), and the lines up to the next "$ "
  line are what it printed (stdout and stderr as a terminal shows them). That output is
  compared line by line, trailing spaces ignored; a line "..." (indented or not) stands for any
  number of lines.
  A command shown with no output is not compared. "$ echo $?" followed by a number says the
  exit status of the command before it; it is checked, not run.
- Any other ```sh block is a list of commands, one a line (continued while a line ends in a
  backslash); blank lines and lines that are only a comment are skipped. Their output is not
  compared.
- The line right before the opening fence may be one of two HTML comments (a reader of the
  rendered page does not see them):
      <!-- not run by test_doc_commands: REASON -->
  marks every command of the block as not run (it installs packages, builds a tree, is CI's
  own line, needs a file the page does not make): counted and listed with REASON, never run;
  and
      <!-- output not compared by test_doc_commands: REASON -->
  runs the block's commands and checks their exit status, but not what they print (times).
- Each command runs with `bash -c` in its page's scratch folder, which holds `build`, a link to
  the build tree (so `build/bin/tdfx` works as in a checkout), and an empty `docs/` (for the
  pages' commands that write pictures there). PATH starts with BIN_DIR, then /usr/bin (Debian's
  python3 with torch); COLUMNS and LINES are unset, so tables are 80 and 100 columns wide.
"""
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile

NOT_RUN = re.compile(r"^<!--\s*not run by test_doc_commands:\s*(.*?)\s*-->\s*$")
NO_OUTPUT = re.compile(r"^<!--\s*output not compared by test_doc_commands:\s*(.*?)\s*-->\s*$")
STATUS = "echo $?"
TIMEOUT_S = 600


class Command:
    def __init__(self, page, line, text):
        self.page = page
        self.line = line  # of the page, 1-based, where the command starts
        self.text = text  # as bash reads it: continuation lines kept
        self.output = None  # the lines shown, or None: not compared
        self.status = 0  # the exit status the page says
        self.not_run = None  # the reason, when the page marks it
        self.no_output = None  # the reason output is not compared, when marked
        self.python = False  # a ```python block: the text is a script for python3

    def where(self):
        return f"{self.page}:{self.line}"

    def shown(self):
        if self.python:
            lines = self.text.split("\n")
            return f"(python, {len(lines)} lines) {lines[0]}"
        return self.text.replace("\\\n", "\\\n    ")


def joined(lines, start):
    """The command starting at lines[start] (continued while a line ends in a backslash), and
    the index after it."""
    parts = [lines[start]]
    i = start + 1
    while parts[-1].rstrip().endswith("\\") and i < len(lines):
        parts.append(lines[i])
        i += 1
    return "\n".join(parts), i


def commands_of(page, text):
    """The commands of one page's ```sh blocks, with what the page says of each."""
    lines = text.split("\n")
    found = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            before = lines[i - 1].strip() if i > 0 else ""
            not_run = NOT_RUN.match(before)
            end = i + 1
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            command = Command(page, i + 2, "\n".join(lines[i + 1:end]))
            command.python = True
            command.not_run = not_run.group(1) if not_run else None
            found.append(command)
            i = end + 1
            continue
        if lines[i].strip() != "```sh":
            if lines[i].lstrip().startswith("```"):  # another block: skip to its end
                i += 1
                while i < len(lines) and not lines[i].lstrip().startswith("```"):
                    i += 1
            i += 1
            continue
        before = lines[i - 1].strip() if i > 0 else ""
        not_run, no_output = NOT_RUN.match(before), NO_OUTPUT.match(before)
        fence = i
        end = fence + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        body = lines[fence + 1:end]
        block = []
        if any(line.startswith("$ ") for line in body):
            j = 0
            while j < len(body):
                if not body[j].startswith("$ "):
                    j += 1  # text before the first command
                    continue
                start = j
                command_text, j = joined([body[j][2:]] + body[j + 1:], 0)
                j = start + command_text.count("\n") + 1
                output = []
                while j < len(body) and not body[j].startswith("$ "):
                    output.append(body[j])
                    j += 1
                while output and not output[-1].strip():
                    output.pop()
                if command_text.strip() == STATUS:
                    if not block:
                        raise SystemExit(f"{page}:{fence + 2 + start}: `$ echo $?` follows no command")
                    block[-1].status = int(output[0].strip()) if output else 0
                    continue
                command = Command(page, fence + 2 + start, command_text)
                command.output = output or None
                block.append(command)
        else:
            j = 0
            while j < len(body):
                stripped = body[j].strip()
                if not stripped or stripped.startswith("#"):
                    j += 1
                    continue
                start = j
                command_text, j = joined(body, j)
                block.append(Command(page, fence + 2 + start, command_text))
        for command in block:
            command.not_run = not_run.group(1) if not_run else None
            command.no_output = no_output.group(1) if no_output else None
        found += block
        i = end + 1
    return found


def matches(expected, actual):
    """Whether the lines printed are the lines shown, "..." standing for any lines."""
    expected = [line.rstrip() for line in expected]
    actual = [line.rstrip() for line in actual]
    while actual and not actual[-1]:
        actual.pop()
    memo = {}

    def match(e, a):
        if (e, a) in memo:
            return memo[(e, a)]
        if e == len(expected):
            result = a == len(actual)
        elif expected[e].strip() == "...":
            result = any(match(e + 1, k) for k in range(a, len(actual) + 1))
        else:
            result = a < len(actual) and expected[e] == actual[a] and match(e + 1, a + 1)
        memo[(e, a)] = result
        return result

    return match(0, 0)


def pages_of(root):
    pages = [os.path.join(root, "README.md")]
    docs = os.path.join(root, "docs")
    if os.path.isdir(docs):
        pages += sorted(os.path.join(docs, name) for name in os.listdir(docs)
                        if name.endswith(".md"))
    return [page for page in pages if os.path.exists(page)]


def scratch_for(work, page_name, bin_dir):
    folder = os.path.join(work, re.sub(r"[^A-Za-z0-9_.-]", "_", page_name))
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.join(folder, "docs"))
    if bin_dir:
        os.symlink(os.path.dirname(os.path.abspath(bin_dir)), os.path.join(folder, "build"))
    return folder


def environment(bin_dir):
    env = dict(os.environ)
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    path = [os.path.abspath(bin_dir)] if bin_dir else []
    env["PATH"] = os.pathsep.join(path + ["/usr/bin", env.get("PATH", "")])
    return env


def run_all(root, bin_dir, work):
    """Runs every page's commands; returns (ran, failures, not_run) and prints as it goes."""
    ran, failures, not_run = [], [], []
    env = environment(bin_dir)
    python_env = dict(env, PYTHONPATH=os.path.join(os.path.abspath(root), "python"))
    for page_path in pages_of(root):
        page = os.path.relpath(page_path, root)
        with open(page_path, encoding="utf-8") as f:
            commands = commands_of(page, f.read())
        if not commands:
            continue
        folder = scratch_for(work, page, bin_dir)
        for command in commands:
            if command.not_run is not None:
                not_run.append(command)
                continue
            try:
                if command.python:
                    done = subprocess.run(["python3", "-"], cwd=folder, env=python_env,
                                          input=command.text.encode("utf-8"),
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          timeout=TIMEOUT_S)
                else:
                    done = subprocess.run(["bash", "-c", command.text], cwd=folder, env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, timeout=TIMEOUT_S)
                status, printed = done.returncode, done.stdout.decode("utf-8", "replace")
            except subprocess.TimeoutExpired:
                status, printed = None, f"(still running after {TIMEOUT_S} s: stopped)\n"
            ran.append(command)
            problems = []
            if status != command.status:
                problems.append(f"exit status {status}; the page says {command.status}")
            compared = command.output is not None and command.no_output is None
            if compared and not matches(command.output, printed.split("\n")):
                diff = difflib.unified_diff([line.rstrip() for line in command.output],
                                            [line.rstrip() for line in printed.rstrip("\n").split("\n")],
                                            "shown in the page", "printed", lineterm="")
                problems.append("its output is not the one shown:\n      " +
                                "\n      ".join(diff))
            mark = "FAILED" if problems else "ok"
            extra = "" if compared or command.output is None else " (output not compared: " + \
                command.no_output + ")"
            print(f"{mark:6} {command.where()}: {command.shown()}{extra}")
            if problems:
                failures.append(command)
                for problem in problems:
                    print(f"    {problem}")
                if not any(p.startswith("its output") for p in problems):
                    tail = printed.rstrip("\n").split("\n")[-20:] if printed.strip() else ["(nothing)"]
                    print("    it printed (its last 20 lines at most):\n      " + "\n      ".join(tail))
    return ran, failures, not_run


def summary(ran, failures, not_run):
    if not_run:
        print(f"\nnot run by test_doc_commands, as the pages mark them ({len(not_run)}):")
        for command in not_run:
            print(f"  {command.where()}: {command.shown()}\n      because: {command.not_run}")
    print(f"\ndoc commands: {len(ran)} run, {len(ran) - len(failures)} as the pages say, "
          f"{len(failures)} not; {len(not_run)} marked not run")
    if failures:
        print("failed: " + ", ".join(command.where() for command in failures))


PLANTED = """# A planted page

<!-- not run by test_doc_commands: planted, a command that installs packages -->
```sh
apt-get install -y no-such-package
```

```sh
echo fine > made.txt
ls no-such-file-anywhere                     # the planted broken command
```

```sh
$ cat made.txt
fine
$ printf 'a\\nb\\nc\\n'
a
...
c
$ echo changed
as shown once
$ exit 3
$ echo $?
3
$ true
$ echo $?
2
```

<!-- output not compared by test_doc_commands: planted, output that changes -->
```sh
$ date +%N
123
```

```python
import json
print(json.dumps({"fine": True}))
```

```python
import this_module_does_not_exist             # the planted broken script
```
"""


def self_test():
    with tempfile.TemporaryDirectory() as root:
        with open(os.path.join(root, "README.md"), "w", encoding="utf-8") as f:
            f.write(PLANTED)
        ran, failures, not_run = run_all(root, None, os.path.join(root, "work"))
    summary(ran, failures, not_run)
    failed = sorted(command.line for command in failures)
    # ls of a missing file; echo's output; true's status; the broken script
    expected_failed = [10, 20, 25, 42]
    ok = (failed == expected_failed and len(ran) == 10 and len(not_run) == 1 and
          not_run[0].text.startswith("apt-get"))
    if not ok:
        print(f"self-test: expected lines {expected_failed} to fail among 10 run and 1 marked; "
              f"got {failed} among {len(ran)} run and {len(not_run)} marked")
        return 1
    print("self-test: the planted broken command, wrong output, wrong status and broken script "
          "were found, "
          "alone, and the marked command was not run")
    return 0


def main(argv):
    if "--self-test" in argv:
        return self_test()
    args = [a for a in argv]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    work = None
    for option in ("--root", "--work"):
        if option in args:
            at = args.index(option)
            value = args[at + 1]
            del args[at:at + 2]
            if option == "--root":
                root = value
            else:
                work = value
    if len(args) != 1:
        print(__doc__)
        return 2
    bin_dir = args[0]
    if not os.path.exists(os.path.join(bin_dir, "tdfx")):
        print(f"{bin_dir} has no tdfx: give the build tree's bin/")
        return 2
    temporary = None
    if work is None:
        temporary = tempfile.TemporaryDirectory()
        work = temporary.name
    try:
        ran, failures, not_run = run_all(root, bin_dir, work)
    finally:
        if temporary:
            temporary.cleanup()
    summary(ran, failures, not_run)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
