#!/usr/bin/python3
"""The interactive page (viz/page.h) in a real browser: headless Chromium.

usage: browser_page.py TDFX EXPORT_CHAIN SCRATCH_DIR

Writes pages with the tdfx command (`TDFX demo`: seed 002's traced sequential as
trace_sequential.html; `TDFX render` of its .pt2 with an output key rewritten to markup),
opens each in headless Chromium with a URL fragment that makes the page's own script type a
search, click, hover, turn the wheel and drag through the handlers a user triggers (page.js),
and checks what the browser then holds, not the HTML source:

  - the DOM Chromium dumps after running the page (--dump-dom), parsed with html.parser: the
    panel's text, whole; the search count; which elements are highlighted and selected; the
    tooltip; the drawing's transform after a wheel turn and a drag; that the page reported no
    error; that a key `</script><script>...` is text in the panel and ran nothing (the title
    is unchanged, the page holds its own two scripts only);
  - the module view's page (`TDFX render --view modules`): it opens on that view, a search finds
    modules and the pipeline's keys, and the panel shows the clicked module whole;
  - a screenshot (--screenshot, 1200x800): its size, that it is not blank, and that the current
    match's highlight is drawn at the middle of the drawing (the search centres it).

  - the page `TDFX run --stats --profile --backward -o run.html` writes: a switch for each
    report; statistics and gradients switched on add their rows to the panel, fill the nodes
    they colour and show their legends, whole;
  - the page of docs/training.md's gradient example (grad_debug, beside TDFX) in the module view with
    the gradients on: the module where the NaN starts is ringed around all its cells, as a
    module, and only its title cell takes the layer's fill (the browser's computed styles and
    boxes, read by a script added to a copy of the page);
  - the page of samples/watch_training.cpp (beside TDFX) with its training layer on: the loss's
    chart with nothing selected, a module's charts in its panel, the first bad step marked on
    every chart, what was not finite there drawn as red dots, the module where it turned ringed;
  - the op view of a 13-module chain (54 nodes; `EXPORT_CHAIN 13`) opens with its labels at
    least 8px high, from the drawing's top left; a 6-node op view and the demo's module view,
    which fit at that scale, open whole;
  - the page of a 1000-module chain (`EXPORT_CHAIN 1000`, then `TDFX render`): it opens on the
    pipeline view with every module one closed box, fitted to the width of its first rows from
    the top; expanding one module draws its nodes and no other module's; a search for a node
    inside a closed module opens that module and makes the node current; a screenshot shows
    the first rows of boxes at the top of the stage. Prints the page's size and the time
    Chromium takes to load it beside the demo's page (not asserted: the machine is shared).

Fails, not skips, when Chromium is missing: scripts/bootstrap.sh --test installs it (Debian's
`chromium`). Runs as root in CI, hence --no-sandbox. Prints one line per check and exits 1 when
any failed.
"""

import html.parser
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import time
import urllib.parse
import zipfile
import zlib

HOSTILE_KEY = "</script><script>document.title='pwned'</script>"
WIDTH, HEIGHT = 1200, 800
failures = []


def check(ok, what, detail=""):
    print(("ok    " if ok else "FAIL  ") + what + ("" if ok else "\n      " + detail))
    if not ok:
        failures.append(what)


def chromium_binary():
    path = os.environ.get("TDFX_CHROMIUM") or shutil.which("chromium")
    if not path:
        sys.exit("browser_page: chromium is not installed; the page's browser test needs it "
                 "(scripts/bootstrap.sh --test installs Debian's chromium)")
    return path


def chromium(args, scratch):
    """Runs headless Chromium with a throwaway profile; returns its stdout."""
    command = [chromium_binary(), "--headless", "--disable-gpu", "--no-sandbox",
               "--no-first-run", "--disable-extensions", "--hide-scrollbars",
               "--user-data-dir=" + os.path.join(scratch, "profile"),
               "--virtual-time-budget=5000"] + args
    run = subprocess.run(command, capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, HOME=scratch))
    if run.returncode != 0:
        sys.exit("browser_page: chromium failed ({}): {}".format(run.returncode, run.stderr[-2000:]))
    return run.stdout


def url(path, **fragment):
    return "file://" + urllib.parse.quote(os.path.abspath(path)) + "#" + \
        urllib.parse.urlencode(fragment, quote_via=urllib.parse.quote)


# --- The DOM Chromium dumps ------------------------------------------------------------------

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


class Element:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent, self.children = tag, dict(attrs), parent, []

    def text_runs(self):
        """Its text, one stripped run per text node, in document order."""
        runs = []
        for child in self.children:
            if isinstance(child, str):
                if child.strip():
                    runs.append(child.strip())
            else:
                runs.extend(child.text_runs())
        return runs

    def walk(self):
        yield self
        for child in self.children:
            if isinstance(child, Element):
                yield from child.walk()

    def classes(self):
        return set(self.attrs.get("class", "").split())


class TreeBuilder(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {}, None)
        self.current = self.root

    def handle_starttag(self, tag, attrs):
        element = Element(tag, attrs, self.current)
        self.current.children.append(element)
        if tag not in VOID:
            self.current = element

    def handle_startendtag(self, tag, attrs):
        self.current.children.append(Element(tag, attrs, self.current))

    def handle_endtag(self, tag):
        node = self.current
        while node is not self.root and node.tag != tag:
            node = node.parent
        if node is not self.root:
            self.current = node.parent

    def handle_data(self, data):
        self.current.children.append(data)


def dom(page, scratch, **fragment):
    builder = TreeBuilder()
    builder.feed(chromium(["--dump-dom", url(page, **fragment)], scratch))
    return builder.root


def by_id(root, element_id):
    for element in root.walk():
        if element.attrs.get("id") == element_id:
            return element
    return None


def ids_with_class(root, name):
    return sorted(e.attrs["data-id"] for e in root.walk()
                  if "data-id" in e.attrs and name in e.classes())


def probe(page, scratch, what, script, **fragment):
    """What `script`, the body of a JavaScript function, returns in the page at WIDTHxHEIGHT once
    page.js has run (and replayed `fragment`): run in a copy of the page with the script added
    after the page's own, its result read as JSON from the DOM Chromium dumps. For what the DOM
    does not hold: computed styles, where the browser draws an element."""
    with open(page, encoding="utf-8") as f:
        text = f.read()
    at = text.rindex("</body>")
    probed = os.path.join(scratch, "probe.html")
    with open(probed, "w", encoding="utf-8") as f:
        f.write(text[:at] + "<script>document.body.dataset.probe = JSON.stringify((function () {" +
                script + "})());</script>\n" + text[at:])
    builder = TreeBuilder()
    builder.feed(chromium(["--dump-dom", "--window-size={},{}".format(WIDTH, HEIGHT),
                           url(probed, **fragment)], scratch))
    check_ran(builder.root, what)
    body = next((e for e in builder.root.walk() if e.tag == "body"), None)
    result = json.loads(body.attrs.get("data-probe", "null")) if body is not None else None
    check(result is not None, what + ": the probe ran")
    return result


def check_ran(root, what):
    body = next((e for e in root.walk() if e.tag == "body"), None)
    check(body is not None and body.attrs.get("data-ready") == "1", what + ": the page's script ran")
    error = by_id(root, "error")
    check(error is not None and "hidden" in error.attrs and not error.text_runs(),
          what + ": the page reported no error", repr(error and error.text_runs()))


# --- PNG ---------------------------------------------------------------------------------------


def png_pixels(data):
    """(width, height, rows of RGB tuples) of an 8-bit RGB or RGBA PNG, non-interlaced."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        raise ValueError("unexpected PNG format {}".format(header))
    channels = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        rows.append([tuple(line[x * channels:x * channels + 3]) for x in range(width)])
        previous = line
    return width, height, rows


def near(pixel, colour, tolerance=40):
    return all(abs(a - b) <= tolerance for a, b in zip(pixel, colour))


# --- The cases ---------------------------------------------------------------------------------


def demo_page(tdfx, scratch):
    out = os.path.join(scratch, "demo")
    run = subprocess.run([tdfx, "demo", "--out", out], capture_output=True, text=True, timeout=300)
    if run.returncode != 0:
        sys.exit("browser_page: tdfx demo failed: " + run.stderr)
    return os.path.join(out, "trace_sequential.html"), os.path.join(out, "trace_sequential.pt2")


def hostile_archive(pt2, scratch):
    """The demo's archive with its last output written to a key that is markup."""
    path = os.path.join(scratch, "hostile.pt2")
    with zipfile.ZipFile(pt2) as source, zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as out:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename == "program.json":
                program = json.loads(data)
                program["signature"]["outputs"][-1]["key"] = ["output", HOSTILE_KEY]
                data = json.dumps(program).encode()
            out.writestr(info.filename, data)
    return path


def check_search(root, what, matches, described):
    """The search's count ("1 of N") and the elements it highlights, in order."""
    count = "1 of {}".format(len(matches))
    check(by_id(root, "count").text_runs() == [count], what + ": the search counts " + count,
          repr(by_id(root, "count").text_runs()))
    found = ids_with_class(root, "match")
    check(found == matches, what + ": the search highlights " + described, repr(found))


def check_traced_page(page, scratch):
    what = "traced page"
    # Enter pressed once, and 100,000,001 times (which once held the page for minutes): the
    # same match is current, the second of two.
    once = ids_with_class(dom(page, scratch, search="mask", next="1"), "current")
    check(once == ["cluster_1"], what + ": next=1 makes the second match current", repr(once))
    root = dom(page, scratch, search="mask", next="100000001")
    check_ran(root, what + " at next=100000001")
    check(ids_with_class(root, "current") == once,
          what + ": next=100000001 makes the same match current as next=1",
          repr(ids_with_class(root, "current")))
    root = dom(page, scratch, search="mask", click="mul", hover="relu")
    check_ran(root, what)
    check_search(root, what, ["cluster_1", "node:getitem_1"],
                 "the node reading ('input', 'mask') and the box reading it")
    check(ids_with_class(root, "current") == ["node:getitem_1"], what + ": the first match is current",
          repr(ids_with_class(root, "current")))
    check(ids_with_class(root, "selected") == ["node:mul"], what + ": the click selects %mul",
          repr(ids_with_class(root, "selected")))
    expected = [
        "%mul", "call_function",
        "op", "call_function",
        "target", "operator.mul",
        "args", "(%_0_fc2, %getitem_1)",
        "kwargs", "{}",
        "dtype", "torch.float32",
        "shape", "[s0, 10]",
        "users", "%softmax",
        "module", "1.module (tdfx::samples::MaskerImpl)",
        "TensorDictModule", "1",
        "code", "mul = _0_fc2 * getitem_1;  getitem_1 = None",
    ]
    panel = by_id(root, "panel").text_runs()
    check(panel == expected, what + ": the panel shows %mul whole", "\n      ".join(map(repr, panel)))
    tooltip = by_id(root, "tooltip")
    check("hidden" not in tooltip.attrs and tooltip.text_runs()[:3] == ["%relu", "op", "call_function"],
          what + ": hovering %relu shows its tooltip", repr(tooltip.text_runs()))


def transform(root):
    """(x, y, scale) of the drawing's pan and zoom."""
    style = by_id(root, "canvas").attrs.get("style", "")
    match = re.search(r"translate\(([-\d.e]+)px, ([-\d.e]+)px\) scale\(([-\d.e]+)\)", style)
    return tuple(float(v) for v in match.groups()) if match else None


def check_pan_and_zoom(page, scratch):
    what = "pan and zoom"
    fitted = transform(dom(page, scratch))
    zoomed = transform(dom(page, scratch, wheel="-200"))
    dragged = transform(dom(page, scratch, drag="40,-30"))
    check(fitted is not None and zoomed is not None and dragged is not None,
          what + ": the drawing has a transform", repr((fitted, zoomed, dragged)))
    if None in (fitted, zoomed, dragged):
        return
    # The style holds six significant digits.
    check(abs(zoomed[2] / fitted[2] - math.exp(0.3)) < 1e-4,
          what + ": the wheel zooms in by exp(0.3)", repr((fitted, zoomed)))
    check(abs(dragged[0] - fitted[0] - 40) < 1e-3 and abs(dragged[1] - fitted[1] + 30) < 1e-3 and
          dragged[2] == fitted[2], what + ": a drag pans by (40, -30)", repr((fitted, dragged)))


def check_hostile_page(tdfx, pt2, scratch):
    what = "hostile key"
    page = os.path.join(scratch, "hostile.html")
    run = subprocess.run([tdfx, "render", hostile_archive(pt2, scratch), "-o", page],
                         capture_output=True, text=True, timeout=120)
    check(run.returncode == 0, what + ": tdfx render writes the page", run.stderr)
    if run.returncode != 0:
        return
    root = dom(page, scratch, search="<script>", click="node:softmax")
    check_ran(root, what)
    key = "('output', \"{}\")".format(HOSTILE_KEY)
    panel = by_id(root, "panel").text_runs()
    check("[" + key + "]" in panel, what + ": the panel shows the key as text, whole",
          "\n      ".join(map(repr, panel)))
    check(ids_with_class(root, "match") == ["node:softmax"],
          what + ": searching '<script>' finds the node that writes it",
          repr(ids_with_class(root, "match")))
    title = [e for e in root.walk() if e.tag == "title" and e.parent.tag == "head"]
    check([t.text_runs() for t in title] == [["tdfx graph"]], what + ": no script of the key ran",
          repr([t.text_runs() for t in title]))
    scripts = [e for e in root.walk() if e.tag == "script"]
    check(len(scripts) == 2, what + ": the page holds its own two scripts only", str(len(scripts)))


def check_module_page(tdfx, pt2, scratch):
    """`tdfx render --view modules` of the demo's archive: the page opens on the module view,
    where a search finds the modules and the pipeline's keys that match, and a click shows the
    module in the panel."""
    what = "module page"
    page = os.path.join(scratch, "modules.html")
    run = subprocess.run([tdfx, "render", pt2, "--view", "modules", "-o", page],
                         capture_output=True, text=True)
    check(run.returncode == 0, what + ": tdfx render writes the page", run.stderr)
    root = dom(page, scratch, search="mask", click="module:module.1")
    check_ran(root, what)
    check_search(root, what, ["input:1", "module:module.1"],
                 "the module reading ('input', 'mask') and that input")
    check(ids_with_class(root, "selected") == ["module:module.1"],
          what + ": the click selects the module", repr(ids_with_class(root, "selected")))
    expected = [
        "module.1", "module",
        "module path", "module.1",
        "type", "Masker",
        "module", "tdfx::samples::MaskerImpl",
        "in keys", "[('intermediate', 'x'), ('input', 'mask')]",
        "out keys", "[('output', 'probabilities')]",
        "parameters", "0",
    ]
    panel = by_id(root, "panel").text_runs()
    check(panel == expected, what + ": the panel shows the module whole",
          "\n      ".join(map(repr, panel)))


def check_screenshot(page, scratch):
    what = "screenshot"
    png = os.path.join(scratch, "page.png")
    if os.path.exists(png):
        os.remove(png)
    chromium(["--screenshot=" + png, "--window-size={},{}".format(WIDTH, HEIGHT),
              url(page, search="softmax")], scratch)
    check(os.path.exists(png), what + ": chromium wrote it")
    if not os.path.exists(png):
        return
    width, height, rows = png_pixels(open(png, "rb").read())
    check((width, height) == (WIDTH, HEIGHT), what + ": {}x{}".format(WIDTH, HEIGHT),
          "{}x{}".format(width, height))
    colours = {pixel for row in rows[::8] for pixel in row[::8]}
    check(len(colours) > 20, what + ": not blank", "{} colours".format(len(colours)))
    # The stage is the window less the bar (top) and the panel (360px, right); the current
    # match's outline (#c2410c, page.css) must cross its middle third.
    stage_w = WIDTH - 360
    xs, ys = range(stage_w // 3, 2 * stage_w // 3), range(HEIGHT // 3, 2 * HEIGHT // 3)
    hits = sum(1 for y in ys for x in xs if near(rows[y][x], (0xc2, 0x41, 0x0c)))
    check(hits > 50, what + ": the current match is highlighted at the middle of the drawing",
          "{} pixels of its outline there".format(hits))


def first_shape_style(root, element_id):
    g = next((e for e in root.walk() if e.attrs.get("data-id") == element_id), None)
    shape = next((c for c in g.children if not isinstance(c, str)), None) if g else None
    return shape.attrs.get("style", "") if shape else None


def check_run_page(tdfx, pt2, scratch):
    """`tdfx run --stats --profile --backward -o run.html`: the page holds each report as a layer
    the user switches on; the one on fills what it colours, adds its rows to the panel and
    shows its legend."""
    what = "run page"
    page = os.path.join(scratch, "run.html")
    run = subprocess.run([tdfx, "run", pt2, "--stats", "--profile", "--backward", "-o", page],
                         capture_output=True, text=True, timeout=300)
    check(run.returncode == 0, what + ": tdfx run writes the page", run.stderr)
    if run.returncode != 0:
        return
    root = dom(page, scratch, click="mul")
    check_ran(root, what)
    layers = by_id(root, "layers")
    buttons = [e.text_runs() for e in layers.walk() if e.tag == "button"]
    check(buttons == [["no run data"], ["statistics"], ["time"], ["gradients"]],
          what + ": a switch for each report", repr(buttons))
    check("hidden" in by_id(root, "legend").attrs and first_shape_style(root, "node:mul") == "",
          what + ": no run data is on at first", repr(first_shape_style(root, "node:mul")))

    def check_layer(layer, row_start, legend):
        root = dom(page, scratch, layer=layer, click="mul")
        check_ran(root, what + " with " + layer)
        panel = by_id(root, "panel").text_runs()
        at = panel.index(layer) if layer in panel else -1
        check(at > 0 and at + 1 < len(panel) and panel[at + 1].startswith(row_start),
              what + ": " + layer + " add a row to %mul's panel", "\n      ".join(map(repr, panel)))
        check(by_id(root, "legend").text_runs() == [layer + ": " + legend],
              what + ": the legend of " + layer, repr(by_id(root, "legend").text_runs()))
        return root

    check_layer("statistics", "min ",
                "each node's min, max and mean in its panel; pink: it holds NaN or Inf; ringed "
                "red: where NaN or Inf starts")
    root = check_layer("gradients", "grad norm ",
                       "fill: the gradient norm over the outputs', log scale: blue as it shrinks "
                       "to 0.01, white at 1, red as it grows to 100; pink: NaN or Inf; ringed "
                       "red: where the first non-finite gradient starts")
    style = first_shape_style(root, "node:mul")
    check(style is not None and style.startswith("fill:"),
          what + ": the gradients fill %mul", repr(style))


# In the page at WIDTHxHEIGHT with the layer on: every shape of the drawing ringed as a layer
# marks (#d7191c, 5px: page.css), with its element's ID; and of module.1, the shapes filled with
# the layer's colour for it, its cells and texts. Rectangles as [left, top, right, bottom] in
# pixels.
MODULE_RINGS = """
  const box = (e) => {
    const r = e.getBoundingClientRect();
    return [r.left, r.top, r.right, r.bottom];
  };
  const data = JSON.parse(document.getElementById('tdfx-data').textContent);
  const colour = data.layers.find((l) => l.name === 'gradients').modules['module.1'].fill;
  const g = document.querySelector('g[data-id="module:module.1"]');
  const sample = document.createElementNS('http://www.w3.org/2000/svg', 'rect');
  sample.style.fill = colour;
  g.append(sample);
  const fill = getComputedStyle(sample).fill;
  sample.remove();
  const ringed = [];
  for (const e of document.querySelectorAll('#canvas svg *')) {
    const style = getComputedStyle(e);
    if (style.stroke === 'rgb(215, 25, 28)' && style.strokeWidth === '5px') {
      const item = e.closest('g.item');
      ringed.push([item ? item.dataset.id : null, box(e)]);
    }
  }
  return {
    ringed,
    filled: Array.from(g.querySelectorAll('*'))
      .filter((e) => getComputedStyle(e).fill === fill).map(box),
    cells: Array.from(g.querySelectorAll('polygon')).map(box),
    texts: Array.from(g.querySelectorAll('text')).map((t) => [t.textContent, box(t)]),
  };
"""


def inside(inner, outer, slack=1):
    return (inner[0] >= outer[0] - slack and inner[1] >= outer[1] - slack and
            inner[2] <= outer[2] + slack and inner[3] <= outer[3] + slack)


def check_module_layer(tdfx, scratch):
    """`tdfx run --backward -o grad.html` of docs/training.md's gradient example (grad_debug, beside
    TDFX: an RMS normaliser whose gradient turns NaN in module.1), in the module view with the
    gradients on: the module where the NaN starts is ringed as a module, around all its cells,
    not at a key cell on its border; its title cell takes the layer's fill, its key cells keep
    theirs."""
    what = "module view with gradients"
    made, page = os.path.join(scratch, "grad_debug"), os.path.join(scratch, "grad.html")
    grad_debug = os.path.join(os.path.dirname(os.path.abspath(tdfx)), "grad_debug")
    if not os.path.exists(grad_debug):
        check(False, what + ": grad_debug is built beside tdfx", grad_debug + " is missing")
        return
    for command in ([grad_debug, made],
                    [tdfx, "run", os.path.join(made, "rms_policy.pt2"),
                     "--input", "obs=" + os.path.join(made, "obs.pt"), "--backward", "-o", page]):
        run = subprocess.run(command, capture_output=True, text=True, timeout=300)
        check(run.returncode == 0, what + ": " + os.path.basename(command[0]) + " ran",
              run.stdout + run.stderr)
        if run.returncode != 0:
            return
    found = probe(page, scratch, what, MODULE_RINGS, view="modules", layer="gradients")
    if found is None:
        return
    cells = found["cells"]
    table = [min(c[0] for c in cells), min(c[1] for c in cells), max(c[2] for c in cells),
             max(c[3] for c in cells)] if cells else None
    ringed = found["ringed"]
    check(len(ringed) == 1 and ringed[0][0] == "module:module.1" and table is not None and
          all(abs(a - b) <= 1 for a, b in zip(ringed[0][1], table)),
          what + ": module.1, where the NaN starts, is ringed around all its cells, and nothing "
          "else is", "ringed {}; module.1's cells span {}".format(ringed, table))
    texts = dict(found["texts"])
    keys = [texts.get("'hidden'"), texts.get("'normed'")]
    filled = found["filled"]
    check(len(filled) == 1 and "module.1" in texts and inside(texts["module.1"], filled[0]) and
          None not in keys and not any(inside(key, filled[0]) for key in keys),
          what + ": the layer's fill is module.1's title cell, not a key cell",
          "filled {}; texts {}".format(filled, found["texts"]))


def check_training_page(tdfx, scratch):
    """The page samples/watch_training.cpp writes (beside TDFX): an actor-critic trained until a
    planted Inf in an observation of step 120 makes the loss infinite. Its `training` layer
    shows the loss's chart with nothing selected and each module's charts in its panel, every
    chart marking step 120; the loss and the critic's gradient norms are not finite there (red
    dots); the critic (module.3), the last module whose gradients are, is ringed."""
    what = "training page"
    page = os.path.join(scratch, "training.html")
    sample = os.path.join(os.path.dirname(os.path.abspath(tdfx)), "watch_training")
    run = subprocess.run([sample, "", "", page], capture_output=True, text=True, timeout=300)
    check(run.returncode == 1 and "step 120 is bad: the loss is Inf" in run.stdout and
          os.path.exists(page), what + ": watch_training stops at step 120 and writes the page",
          run.stdout + run.stderr)
    if not os.path.exists(page):
        return

    def charts(root):
        """Each chart of the panel: its caption's texts, its marked steps, its red dots."""
        out = []
        for figure in (e for e in by_id(root, "panel").walk() if e.tag == "figure"):
            svg = next(e for e in figure.walk() if e.tag == "svg")
            out.append((figure.children[0].text_runs(),
                        [e.attrs.get("data-step") for e in svg.walk()
                         if "marked-step" in e.classes()],
                        sum(1 for e in svg.walk() if "nonfinite" in e.classes())))
        return out

    root = dom(page, scratch, view="modules", layer="training")
    check_ran(root, what)
    buttons = [e.text_runs() for e in by_id(root, "layers").walk() if e.tag == "button"]
    check(buttons == [["no run data"], ["training"]], what + ": a switch for the run",
          repr(buttons))
    check(by_id(root, "legend").text_runs() == [
        "training: a chart per module of each key it writes (min, mean, max) and of its "
        "parameters' gradient norm, weight norm and update ratio, in its panel; the loss with "
        "nothing selected; red line: the first bad step, 120; pink: NaN or Inf there; ringed "
        "red: the first module whose outputs hold it, else the last whose gradients do"],
          what + ": the legend", repr(by_id(root, "legend").text_runs()))
    loss = charts(root)
    check(len(loss) == 1 and loss[0][0][:2] == ["loss", "loss NaN/Inf"] and
          loss[0][0][2].startswith("steps 0–120, ") and loss[0][1] == ["120"] and loss[0][2] == 1,
          what + ": with nothing selected, the loss's chart, step 120 marked, its Inf a red dot",
          repr(loss))
    check(ids_with_class(root, "marked") == ["module:3"],
          what + ": the critic, the last module whose gradients are not finite, is ringed",
          repr(ids_with_class(root, "marked")))

    root = dom(page, scratch, view="modules", layer="training", click="module:3")
    check_ran(root, what + " with module.3 selected")
    panel = by_id(root, "panel").text_runs()
    check("training — the red line is step 120" in panel,
          what + ": module.3's panel holds the run's charts", "\n      ".join(map(repr, panel)))
    found = charts(root)
    labels = [c[0][0] for c in found]
    check(labels == ["critic.value"] + ["{}: {}".format(p, s) for p in ("module.weight", "module.bias")
                                        for s in ("gradient norm", "weight norm", "update ratio")],
          what + ": a chart of the key module.3 writes and of each of its parameters",
          repr(labels))
    check(all(c[1] == ["120"] for c in found), what + ": every chart marks step 120",
          repr([c[1] for c in found]))
    dots = {c[0][0]: c[2] for c in found}
    check(dots.get("module.weight: gradient norm") == 1 and dots.get("critic.value") == 0,
          what + ": the critic's gradient norm at step 120 is a red dot, its output is finite",
          repr(dots))
    root = dom(page, scratch, view="modules", layer="training", click="module:1")
    check_ran(root, what + " with module.1 selected")
    hidden = [c for c in charts(root) if c[0][0] == "hidden"]
    check(len(hidden) == 1 and [t.split(" ")[0] for t in hidden[0][0][1:4]] == ["min", "mean", "max"]
          and hidden[0][0][3] == "max 1", what + ": the Tanh's chart of hidden: min, mean and max, "
          "saturated at 1 on the bad step", repr(hidden))


# At WIDTHxHEIGHT: the drawing's and the stage's rectangles, and the height on screen of the
# font of each node's first label (its font size times the scale it is drawn at).
LABEL_SIZES = """
  const box = (e) => {
    const r = e.getBoundingClientRect();
    return [r.left, r.top, r.right, r.bottom];
  };
  const labels = Array.from(document.querySelectorAll('#canvas g.item[data-id^="node:"]'))
    .map((g) => g.querySelector(':scope > text')).filter((t) => t && t.getBBox().height > 0)
    .map((t) => parseFloat(getComputedStyle(t).fontSize) *
                t.getBoundingClientRect().height / t.getBBox().height);
  return {drawing: box(document.querySelector('#canvas svg')),
          stage: box(document.getElementById('stage')), labels};
"""


def check_op_view_scale(tdfx, export_chain, demo, scratch):
    """The op view opens at a scale its labels read at: a chain of 13 modules (54 nodes, far
    larger than the window at that scale) with its labels at least 8px high, from the top left
    of the drawing; a chain of one module (6 nodes) and the demo's module view fit whole."""
    pages = {}
    for n in ("1", "13"):
        pt2, page = (os.path.join(scratch, "chain{}.{}".format(n, ext)) for ext in ("pt2", "html"))
        for command in ([export_chain, n, pt2], [tdfx, "render", pt2, "-o", page]):
            run = subprocess.run(command, capture_output=True, text=True, timeout=300)
            check(run.returncode == 0,
                  "chain of {}: {} ran".format(n, os.path.basename(command[0])), run.stderr)
            if run.returncode != 0:
                return
        pages[n] = page
    what = "54-node op view"
    found = probe(pages["13"], scratch, what, LABEL_SIZES)
    if found is None:
        return
    drawing, stage, labels = found["drawing"], found["stage"], found["labels"]
    check(len(labels) == 54 and min(labels) >= 8, what + ": opens with every label 8px or more",
          "{} labels, {:.2f} to {:.2f} px".format(len(labels), min(labels, default=0),
                                                  max(labels, default=0)))
    check(abs(drawing[0] - stage[0] - 8) < 1 and abs(drawing[1] - stage[1] - 8) < 1,
          what + ": from the drawing's top left", "drawing {}, stage {}".format(drawing, stage))
    for what, page, fragment in (("6-node op view", pages["1"], {}),
                                 ("demo's module view", demo, {"view": "modules"})):
        found = probe(page, scratch, what, LABEL_SIZES, **fragment)
        if found is None:
            continue
        check(inside(found["drawing"], found["stage"], 0), what + ": fits whole in the stage",
              "drawing {}, stage {}".format(found["drawing"], found["stage"]))


def drawn_ids(root):
    return [e.attrs["data-id"] for e in root.walk() if "data-id" in e.attrs]


def timed_load(page, scratch):
    start = time.monotonic()
    dom(page, scratch)
    return time.monotonic() - start


def check_large_page(tdfx, export_chain, small_page, scratch):
    what = "1000-module page"
    pt2, page = os.path.join(scratch, "chain1000.pt2"), os.path.join(scratch, "chain1000.html")
    for command in ([export_chain, "1000", pt2], [tdfx, "render", pt2, "-o", page]):
        run = subprocess.run(command, capture_output=True, text=True, timeout=600)
        check(run.returncode == 0, what + ": " + os.path.basename(command[0]) + " ran", run.stderr)
        if run.returncode != 0:
            return
    print("      page size {:.1f} MB; Chromium loads it in {:.2f} s, the demo's page in {:.2f} s"
          .format(os.path.getsize(page) / 2**20, timed_load(page, scratch),
                  timed_load(small_page, scratch)))

    root = dom(page, scratch)
    check_ran(root, what)
    pressed = [e.text_runs() for e in root.walk()
               if e.tag == "button" and e.attrs.get("aria-pressed") == "true"]
    check(pressed == [["Pipeline"]], what + ": it opens on the pipeline view", repr(pressed))
    ids = drawn_ids(root)
    boxes = [i for i in ids if i.startswith("box:")]
    check(len(boxes) == 1000 and boxes[0] == "box:module.0" and boxes[-1] == "box:module.999",
          what + ": every module is one box", "{} boxes: {}".format(len(boxes), boxes[:3]))
    check(not any(i.startswith("node:linear") or i.startswith("node:relu") for i in ids),
          what + ": no module is open", repr([i for i in ids if not i.startswith("box:")][:5]))
    fitted = transform(root)
    check(fitted is not None and abs(fitted[1] - 8) < 1e-6 and fitted[2] >= 0.6,
          what + ": fitted to the width of its first rows, from the top, at a readable scale",
          repr(fitted))

    root = dom(page, scratch, expand="module.500")
    check_ran(root, what + " with module.500 expanded")
    ids = drawn_ids(root)
    inside = sorted(i for i in ids if i.startswith("node:"))
    check(inside == ["node:linear_500", "node:output", "node:p_module_500_module_fc_bias",
                     "node:p_module_500_module_fc_weight", "node:relu_500"],
          what + ": expanding module.500 draws its nodes and no other module's", repr(inside))
    opened = [e.attrs["data-id"] for e in root.walk() if "open" in e.classes()]
    check(opened == ["box:module.500"], what + ": module.500 is the open box", repr(opened))
    toggle = by_id(root, "toggle")
    check(toggle is not None and toggle.text_runs() == ["Collapse"],
          what + ": the panel offers to collapse it", repr(toggle and toggle.text_runs()))

    root = dom(page, scratch, search="relu_700")
    check_ran(root, what + " searched")
    check(by_id(root, "count").text_runs() == ["1 of 1"], what + ": the search finds %relu_700",
          repr(by_id(root, "count").text_runs()))
    check(ids_with_class(root, "current") == ["node:relu_700"],
          what + ": the hit inside the closed module.700 is opened and current",
          repr(ids_with_class(root, "current")))
    opened = [e.attrs["data-id"] for e in root.walk() if "open" in e.classes()]
    check(opened == ["box:module.700"], what + ": the search opened module.700 only", repr(opened))

    png = os.path.join(scratch, "large.png")
    chromium(["--screenshot=" + png, "--window-size={},{}".format(WIDTH, HEIGHT), url(page)],
             scratch)
    width, height, rows = png_pixels(open(png, "rb").read())
    # The closed boxes' key strips (#fff3b0 at 70% over #eef0fa, page.css) in the stage's first
    # 160 rows below the bar (40 px), between the outline (190 px) and the panel (360 px).
    strip = (250, 242, 198)
    hits = sum(1 for y in range(44, 200) for x in range(190, WIDTH - 360)
               if near(rows[y][x], strip, 8))
    check(hits > 2000, what + ": the screenshot shows the first rows of boxes at the top",
          "{} pixels of key strips there".format(hits))


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    tdfx, export_chain, scratch = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
    chromium_binary()
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    page, pt2 = demo_page(tdfx, scratch)
    check_traced_page(page, scratch)
    check_pan_and_zoom(page, scratch)
    check_hostile_page(tdfx, pt2, scratch)
    check_module_page(tdfx, pt2, scratch)
    check_screenshot(page, scratch)
    check_run_page(tdfx, pt2, scratch)
    check_module_layer(tdfx, scratch)
    check_training_page(tdfx, scratch)
    check_op_view_scale(tdfx, export_chain, page, scratch)
    check_large_page(tdfx, export_chain, page, scratch)
    print("{} failed".format(len(failures)) if failures else "all passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
