// The interactive page of a tdfx drawing (viz/page.h): views, pan and zoom, search, a panel
// and a tooltip. Everything from the data is put on screen as text (textContent), never as
// markup. No network: the page loads nothing.
//
// The URL fragment replays what a user does, through the same handlers and real events:
//   #view=ops&layer=time&search=obs&next=1&expand=0&click=relu&hover=mul&wheel=-200&drag=40,-30
// view clicks that view's switch, layer the switch of that run data, search types into the
// search box (an input event), next presses Enter that many times, expand selects a module of
// the pipeline view and presses its Expand button (repeatable), click and hover dispatch a
// click / mouseover on the element (a node name, or an ID such as key:0, cluster_0 or
// box:module.3), wheel turns the wheel by that deltaY at the middle of the stage, drag drags
// the drawing by dx,dy pixels. The headless-browser test (tests/viz/browser_page.py) drives
// the page this way.
(function () {
  'use strict';

  const $ = (id) => document.getElementById(id);
  const stage = $('stage');
  const canvas = $('canvas');
  const panel = $('panel');
  const tooltip = $('tooltip');
  const search = $('search');
  const count = $('count');
  const switcher = $('views');
  const layerSwitch = $('layers');
  const legend = $('legend');

  const data = JSON.parse($('tdfx-data').textContent);
  const views = new Map(data.views.map((view) => [view.name, view]));

  const state = {
    view: null,      // the view shown
    entries: null,   // Graphviz ID -> {item, g} in that view
    k: 1, tx: 0, ty: 0,
    matches: [], current: -1,
    selected: null,  // the selected element's ID, kept across views
    layer: null,     // the run data shown (one of data.layers), kept across views
    drag: null, dragged: false,
  };
  const drawings = new Map();  // view name -> {svg, entries}, each parsed once

  function element(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // --- Views -------------------------------------------------------------------------------

  // The SVG of a view, parsed as XML (strict: no markup can hide in it) and stripped of
  // anything active; Graphviz writes none of it, but the page does not rely on that.
  function parseSvg(view) {
    const doc = new DOMParser().parseFromString(view.svg, 'image/svg+xml');
    const root = doc.documentElement;
    if (root.localName !== 'svg' || doc.getElementsByTagName('parsererror').length) {
      throw new Error('the drawing of view ' + view.name + ' is not valid SVG');
    }
    for (const bad of root.querySelectorAll('script, foreignObject, iframe')) bad.remove();
    for (const node of [root, ...root.querySelectorAll('*')]) {
      for (const attr of Array.from(node.attributes)) {
        const name = attr.name.toLowerCase();
        if (name.startsWith('on') || (name.endsWith('href') && !attr.value.startsWith('#'))) {
          node.removeAttribute(attr.name);
        }
      }
    }
    return document.importNode(root, true);
  }

  // Maps each g element to its item by the Graphviz ID in its title element, which then goes:
  // the panel and the tooltip say more than the browser's native tooltip would.
  function mapElements(view, svg) {
    const items = new Map(view.items.map((item) => [item.id, item]));
    const entries = new Map();
    for (const g of svg.querySelectorAll('g')) {
      const title = g.querySelector(':scope > title');
      if (!title) continue;
      const item = items.get(title.textContent);
      title.remove();
      if (!item) continue;
      g.classList.add('item', 'kind-' + item.kind.replace(/[^A-Za-z0-9_-]/g, '_'));
      g.dataset.id = item.id;
      const {outline, body} = shapesOf(item, g);
      if (outline) outline.classList.add('outline');
      entries.set(item.id, {item, g, body});
    }
    const graphTitle = svg.querySelector(':scope > title');
    if (graphTitle) graphTitle.remove();
    return entries;
  }

  // The shapes of a drawn element that the page rings (its outline: hover, search, selection,
  // a layer's mark) and fills (its body: a layer's colour). A node's or a box's first shape,
  // once its title is out, is both. A module of the module view is a table of cells (its in
  // keys, its title, its out keys: viz/module_view.cpp) with no outline of its own: the page
  // adds one around its cells, and its body is the title cell, the one that holds its path in
  // bold, which the drawing's own overlay fills too.
  function shapesOf(item, g) {
    const first = g.firstElementChild;
    if (item.kind !== 'module' || !g.classList.contains('node')) {
      return {outline: first, body: first};
    }
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (const cell of g.querySelectorAll(':scope > polygon')) {
      const xy = cell.getAttribute('points').trim().split(/[\s,]+/).map(Number);
      for (let i = 0; i + 1 < xy.length; i += 2) {
        x0 = Math.min(x0, xy[i]);
        x1 = Math.max(x1, xy[i]);
        y0 = Math.min(y0, xy[i + 1]);
        y1 = Math.max(y1, xy[i + 1]);
      }
    }
    if (!(x0 < x1 && y0 < y1)) return {outline: first, body: first};
    const outline = svgElement('rect', {x: x0, y: y0, width: x1 - x0, height: y1 - y0,
                                        fill: 'none', stroke: 'none'});
    g.append(outline);
    // The filled shape of the cell the bold path is in: a cell draws its fill, its border,
    // then its text.
    let body = g.querySelector(':scope > text[font-weight="bold"]');
    while (body && !(body.localName === 'polygon' && body.getAttribute('fill') !== 'none')) {
      body = body.previousElementSibling;
    }
    return {outline, body};
  }

  function showView(name) {
    const view = views.get(name);
    if (!view) return;
    clearMatches();
    state.view = view;
    if (view.tree) {
      drawTree(treeOf(view));
    } else {
      if (!drawings.has(name)) {
        const svg = parseSvg(view);
        drawings.set(name, {svg, entries: mapElements(view, svg)});
      }
      const {svg, entries} = drawings.get(name);
      state.entries = entries;
      canvas.replaceChildren(svg);
    }
    for (const button of switcher.querySelectorAll('button')) {
      const base = view.base || view.name;
      button.setAttribute('aria-pressed', String(button.dataset.view === base));
    }
    applyLayer();
    showOutline(view);
    fit();
    runSearch(false);
    const selected = state.selected;
    state.selected = null;
    if (selected && state.entries.has(selected)) select(selected, false);
    else showHint();
  }

  function buildSwitcher() {
    const bases = data.views.filter((view) => !view.base);
    if (bases.length < 2) return;
    for (const view of bases) {
      const button = element('button', null, view.label || view.name);
      button.type = 'button';
      button.dataset.view = view.name;
      button.addEventListener('click', () => showView(view.name));
      switcher.append(button);
    }
  }

  // The view that draws `view` with module `path` expanded as well, if the page has it: same
  // base, expanded set one larger. This is how expanding in place plugs in (viz/page.h).
  function expansionOf(view, path) {
    const base = view.base || view.name;
    const want = new Set([...view.expanded, path]);
    return data.views.find((v) => (v.base || v.name) === base && sameSet(v.expanded, want));
  }
  function collapseOf(view, path) {
    if (!view.expanded.includes(path)) return undefined;
    const base = view.base || view.name;
    const want = new Set(view.expanded.filter((p) => p !== path));
    return data.views.find((v) => (v.base || v.name) === base && sameSet(v.expanded, want));
  }
  function sameSet(list, set) {
    return list.length === set.size && list.every((x) => set.has(x));
  }

  // --- The pipeline view: laid out here, one level of the module tree at a time ------------
  //
  // Each module is one box, its in keys along its top border and its out keys along its
  // bottom, until it is opened: a TensorDictModule then shows its nodes in layers, a
  // sequential its children. A level's children sit in rows of at most ROW in graph order.
  // Only what is shown is laid out and drawn; edges join what is shown: a node inside a
  // closed module is drawn as that module.

  const SVG = 'http://www.w3.org/2000/svg';
  const ROW = 4, GAP_X = 28, GAP_Y = 30, PAD = 10, HEAD = 20, KEY_LINE = 14, NODE_H = 36;
  const trees = new Map();  // view name -> its tree, built once

  function treeOf(view) {
    if (trees.has(view.name)) return trees.get(view.name);
    const tree = {
      modules: new Map(), children: new Map([['', []]]), nodes: new Map(),
      open: new Set(view.tree.open), items: new Map(view.items.map((item) => [item.id, item])),
    };
    for (const m of view.tree.modules) {
      tree.modules.set(m.path, Object.assign({nodes: []}, m));
      tree.children.set(m.path, []);
    }
    // A module enters its parent's children where its first node is (its parent first).
    const entered = new Set();
    const enter = (path) => {
      if (entered.has(path)) return;
      entered.add(path);
      const m = tree.modules.get(path);
      if (m.parent && tree.modules.has(m.parent)) enter(m.parent);
      tree.children.get(tree.modules.has(m.parent) ? m.parent : '').push({module: path});
    };
    for (const n of view.tree.nodes) {
      tree.nodes.set(n.id, n);
      if (n.module && tree.modules.has(n.module)) {
        enter(n.module);
        tree.modules.get(n.module).nodes.push(n.id);
      } else {
        tree.children.get('').push({node: n.id});
      }
    }
    for (const path of tree.modules.keys()) enter(path);
    trees.set(view.name, tree);
    return tree;
  }

  // The modules that hold `path`, outermost first, `path` included.
  function lineage(tree, path) {
    const chain = [];
    for (let p = path; p && tree.modules.has(p); p = tree.modules.get(p).parent) chain.unshift(p);
    return chain;
  }

  // The path of the module that holds `id`: a node's module, a box's enclosing sequential.
  function holderPath(tree, id) {
    const node = tree.nodes.get(id);
    if (node) return node.module || '';
    const box = id.startsWith('box:') ? tree.modules.get(id.slice(4)) : undefined;
    return (box && box.parent) || '';
  }

  // What stands for element `id` in the drawing: itself, or its outermost closed module.
  function shownAs(tree, id) {
    for (const p of lineage(tree, holderPath(tree, id))) if (!tree.open.has(p)) return 'box:' + p;
    return id;
  }

  // Opens the modules that hide `id`, and draws again.
  function reveal(tree, id) {
    let changed = false;
    for (const p of lineage(tree, holderPath(tree, id))) {
      if (!tree.open.has(p)) {
        tree.open.add(p);
        changed = true;
      }
    }
    if (changed) redraw(tree);
  }

  function toggle(tree, path) {
    if (tree.open.has(path)) tree.open.delete(path);
    else tree.open.add(path);
    redraw(tree);
    select('box:' + path, true);
  }

  // Draws again keeping the pan and zoom, the selection and the search's marks.
  function redraw(tree) {
    const selected = state.selected;
    drawTree(tree);
    applyLayer();
    markMatches();
    if (selected && state.entries.has(selected)) {
      state.entries.get(selected).g.classList.add('selected');
    }
  }

  function svgElement(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // Text width at the drawing's 11px font, near enough to size boxes.
  const textWidth = (text, bold) => text.length * (bold ? 7 : 6.4);

  // A block: its size, and draw(g, x, y) placing it; `boxes` collects each drawn element's
  // rectangle by ID, for the edges.
  function nodeBlock(tree, id) {
    const n = tree.nodes.get(id);
    const w = Math.min(300, Math.max(110, textWidth(n.title, true), textWidth(n.detail)) + 2 * PAD);
    return {w, h: NODE_H, draw(parent, x, y, boxes) {
      const g = svgElement('g', {'data-id': id, class: n.marked ? 'marked' : ''});
      g.append(svgElement('rect', {x, y, width: w, height: NODE_H, rx: 5, class: 'shape',
                                   style: n.fill ? 'fill: ' + n.fill : ''}));
      g.append(svgElement('text', {x: x + PAD, y: y + 15, class: 'title'}, n.title));
      g.append(svgElement('text', {x: x + PAD, y: y + 29, class: 'detail'}, n.detail));
      parent.append(g);
      boxes.set(id, {x, y, w, h: NODE_H, g});
    }};
  }

  function keyText(keys) { return keys.length ? keys.join(', ') : '-'; }

  function moduleBlock(tree, path) {
    const m = tree.modules.get(path);
    const id = 'box:' + path;
    const inKeys = 'in: ' + keyText(m.in_keys), outKeys = 'out: ' + keyText(m.out_keys);
    const open = tree.open.has(path);
    const inner = open ? (m.sequential ? rowsBlock(tree, tree.children.get(path) || []) :
                                         layersBlock(tree, m.nodes)) : null;
    const head = Math.max(textWidth(path, true) + textWidth(m.type) + 16,
                          textWidth(inKeys), textWidth(outKeys)) + 2 * PAD;
    const w = Math.max(160, Math.min(open ? Infinity : 320, head), inner ? inner.w + 2 * PAD : 0);
    const h = HEAD + 2 * KEY_LINE + 8 + (inner ? inner.h + PAD : 0);
    return {w, h, draw(parent, x, y, boxes) {
      const g = svgElement('g', {'data-id': id,
                                 class: (open ? 'open' : 'closed') + (m.marked ? ' marked' : '')});
      g.append(svgElement('rect', {x, y, width: w, height: h, rx: 7, class: 'shape',
                                   style: m.fill ? 'fill: ' + m.fill : ''}));
      g.append(svgElement('rect', {x, y: y + HEAD, width: w, height: KEY_LINE + 2, class: 'keys'}));
      g.append(svgElement('rect', {x, y: y + h - KEY_LINE - 4, width: w, height: KEY_LINE + 2,
                                   class: 'keys'}));
      const title = svgElement('text', {x: x + PAD, y: y + 14, class: 'title'}, path);
      title.append(svgElement('tspan', {class: 'detail', dx: 8}, m.type));
      g.append(title);
      g.append(svgElement('text', {x: x + PAD, y: y + HEAD + 12, class: 'key'}, inKeys));
      g.append(svgElement('text', {x: x + PAD, y: y + h - 7, class: 'key'}, outKeys));
      parent.append(g);
      boxes.set(id, {x, y, w, h, g});
      if (inner) inner.draw(parent, x + PAD, y + HEAD + KEY_LINE + 8, boxes);
    }};
  }

  // The nodes of a TensorDictModule in layers: a node one layer below the lowest input it
  // reads from the same module.
  function layersBlock(tree, ids) {
    const layer = new Map();
    const layers = [];
    for (const id of ids) {
      let l = 0;
      for (const input of tree.nodes.get(id).inputs) {
        if (layer.has(input)) l = Math.max(l, layer.get(input) + 1);
      }
      layer.set(id, l);
      (layers[l] = layers[l] || []).push(nodeBlock(tree, id));
    }
    const widths = layers.map((row) => row.reduce((s, b) => s + b.w, 0) + GAP_X * (row.length - 1));
    const w = Math.max(0, ...widths);
    const h = layers.length * NODE_H + Math.max(0, layers.length - 1) * (GAP_Y / 1.5);
    return {w, h, draw(parent, x, y, boxes) {
      layers.forEach((row, l) => {
        let cx = x + (w - widths[l]) / 2;
        for (const block of row) {
          block.draw(parent, cx, y + l * (NODE_H + GAP_Y / 1.5), boxes);
          cx += block.w + GAP_X;
        }
      });
    }};
  }

  // Children in rows of at most ROW, in order.
  function rowsBlock(tree, children) {
    const blocks = children.map((c) => (c.module ? moduleBlock(tree, c.module) : nodeBlock(tree, c.node)));
    const rows = [];
    for (let i = 0; i < blocks.length; i += ROW) rows.push(blocks.slice(i, i + ROW));
    const widths = rows.map((row) => row.reduce((s, b) => s + b.w, 0) + GAP_X * (row.length - 1));
    const heights = rows.map((row) => Math.max(...row.map((b) => b.h)));
    const w = Math.max(0, ...widths);
    const h = heights.reduce((s, v) => s + v, 0) + GAP_Y * Math.max(0, rows.length - 1);
    return {w, h, draw(parent, x, y, boxes) {
      let cy = y;
      rows.forEach((row, r) => {
        let cx = x;
        for (const block of row) {
          block.draw(parent, cx, cy, boxes);
          cx += block.w + GAP_X;
        }
        cy += heights[r] + GAP_Y;
      });
    }};
  }

  // Edges between what is shown: each graph edge from the element that shows its input to the
  // one that shows its node, once; none into the output node, whose box lists its keys.
  function drawEdges(tree, layer, boxes) {
    const seen = new Set();
    for (const n of tree.nodes.values()) {
      if (n.detail.startsWith('output')) continue;
      const to = shownAs(tree, n.id);
      for (const input of n.inputs) {
        const from = shownAs(tree, input);
        const key = from + '\n' + to;
        if (from === to || seen.has(key) || !boxes.has(from) || !boxes.has(to)) continue;
        seen.add(key);
        const a = boxes.get(from), b = boxes.get(to);
        // Down into the top of what it reaches, or across into its left side; the arrowhead
        // is a triangle of its own: the page refers to nothing, not even to a marker by ID.
        let d, head;
        if (b.y >= a.y + a.h - 1 || b.x < a.x + a.w) {
          const x1 = a.x + a.w / 2, y1 = a.y + a.h, x2 = b.x + b.w / 2, y2 = b.y - 6;
          const bend = Math.max(12, Math.abs(y2 - y1) / 2);
          d = `M${x1},${y1} C${x1},${y1 + bend} ${x2},${y2 - bend} ${x2},${y2}`;
          head = `${x2 - 4},${y2} ${x2 + 4},${y2} ${x2},${y2 + 6}`;
        } else {
          const y1 = a.y + a.h / 2, y2 = b.y + b.h / 2, x2 = b.x - 6;
          d = `M${a.x + a.w},${y1} C${a.x + a.w + 14},${y1} ${x2 - 14},${y2} ${x2},${y2}`;
          head = `${x2},${y2 - 4} ${x2},${y2 + 4} ${x2 + 6},${y2}`;
        }
        layer.append(svgElement('path', {d, class: 'edge'}));
        layer.append(svgElement('polygon', {points: head, class: 'arrowhead'}));
      }
    }
  }

  function drawTree(tree) {
    const boxes = new Map();
    const block = rowsBlock(tree, tree.children.get(''));
    const margin = 12;
    const svg = svgElement('svg', {
      width: block.w + 2 * margin, height: block.h + 2 * margin, class: 'tree',
      viewBox: `0 0 ${block.w + 2 * margin} ${block.h + 2 * margin}`,
    });
    const elements = svgElement('g'), edges = svgElement('g');
    svg.append(elements, edges);
    block.draw(elements, margin, margin, boxes);
    drawEdges(tree, edges, boxes);
    const entries = new Map();
    for (const [id, {g}] of boxes) {
      const item = tree.items.get(id);
      if (!item) continue;
      g.classList.add('item', 'kind-' + item.kind.replace(/[^A-Za-z0-9_-]/g, '_'));
      entries.set(id, {item, g, body: g.firstElementChild});
    }
    state.entries = entries;
    canvas.replaceChildren(svg);
  }

  // The outline of a tree view's modules, to jump with.
  function showOutline(view) {
    const outline = $('outline');
    outline.hidden = !view.tree;
    if (!view.tree) return;
    const tree = treeOf(view);
    const list = element('ul');
    for (const m of view.tree.modules) {
      const entry = element('li');
      entry.style.paddingLeft = (lineage(tree, m.path).length - 1) * 12 + 'px';
      const button = element('button', 'ref', m.path);
      button.type = 'button';
      button.title = m.type;
      button.addEventListener('click', () => select('box:' + m.path, true));
      entry.append(button);
      list.append(entry);
    }
    outline.replaceChildren(element('h2', null, `Modules (${view.tree.modules.length})`), list);
  }

  // --- Pan and zoom ------------------------------------------------------------------------

  function apply() {
    state.moved = true;
    canvas.style.transform = `translate(${state.tx}px, ${state.ty}px) scale(${state.k})`;
  }

  function zoomAt(clientX, clientY, factor) {
    const rect = stage.getBoundingClientRect();
    const k = Math.min(8, Math.max(0.02, state.k * factor));
    const x = clientX - rect.left, y = clientY - rect.top;
    state.tx = x - (x - state.tx) * (k / state.k);
    state.ty = y - (y - state.ty) * (k / state.k);
    state.k = k;
    apply();
  }

  // The smallest scale fit() opens a Graphviz drawing at: its 10pt labels are then 8px high.
  const READABLE = 0.6;

  function fit() {
    const svg = canvas.firstElementChild;
    if (!svg) return;
    const rect = stage.getBoundingClientRect();
    const w = svg.getBoundingClientRect().width / state.k;
    const h = svg.getBoundingClientRect().height / state.k;
    if (!w || !h) return;
    if (state.view && state.view.tree) {
      // The width of the first rows, from the top: a long pipeline reads down like a page.
      state.k = Math.min(1, (rect.width - 16) / w);
      state.tx = Math.max(8, (rect.width - w * state.k) / 2);
      state.ty = 8;
    } else {
      // The whole drawing, centred, when it fits at READABLE or larger; otherwise at READABLE
      // from the top, and from the left when wider than the stage: a large graph reads down
      // from its inputs, as the pipeline view does.
      state.k = Math.max(READABLE, Math.min(1, (rect.width - 16) / w, (rect.height - 16) / h));
      state.tx = Math.max(8, (rect.width - w * state.k) / 2);
      state.ty = Math.max(8, (rect.height - h * state.k) / 2);
    }
    apply();
    state.moved = false;
  }

  // Brings `g` to the middle of the stage, zoomed in far enough to read.
  function centre(g) {
    let r = g.getBoundingClientRect();
    if (state.k < 0.75) zoomAt(r.left + r.width / 2, r.top + r.height / 2, 0.75 / state.k);
    r = g.getBoundingClientRect();
    const s = stage.getBoundingClientRect();
    state.tx += s.left + s.width / 2 - (r.left + r.width / 2);
    state.ty += s.top + s.height / 2 - (r.top + r.height / 2);
    apply();
  }

  stage.addEventListener('wheel', (event) => {
    event.preventDefault();
    zoomAt(event.clientX, event.clientY, Math.exp(-event.deltaY * 0.0015));
  }, {passive: false});

  stage.addEventListener('pointerdown', (event) => {
    if (event.button !== 0) return;
    state.drag = {x: event.clientX, y: event.clientY, id: event.pointerId};
    state.dragged = false;
  });
  stage.addEventListener('pointermove', (event) => {
    const drag = state.drag;
    if (!drag) return;
    const dx = event.clientX - drag.x, dy = event.clientY - drag.y;
    // Captured only once it is a drag, so that a click still reaches the node under it.
    if (!state.dragged && Math.hypot(dx, dy) < 4) return;
    if (!state.dragged) {
      state.dragged = true;
      // Fails for a pointer the browser does not know (a replayed drag), which then pans only
      // while it stays over the stage.
      try {
        stage.setPointerCapture(drag.id);
      } catch (error) {}
      stage.classList.add('dragging');
    }
    state.tx += dx;
    state.ty += dy;
    drag.x = event.clientX;
    drag.y = event.clientY;
    apply();
  });
  const endDrag = () => {
    state.drag = null;
    stage.classList.remove('dragging');
  };
  stage.addEventListener('pointerup', endDrag);
  stage.addEventListener('pointercancel', endDrag);

  stage.addEventListener('keydown', (event) => {
    const rect = stage.getBoundingClientRect();
    const cx = rect.left + rect.width / 2, cy = rect.top + rect.height / 2;
    if (event.key === '+' || event.key === '=') zoomAt(cx, cy, 1.25);
    else if (event.key === '-') zoomAt(cx, cy, 0.8);
    else if (event.key === '0') fit();
    else return;
    event.preventDefault();
  });
  $('fit').addEventListener('click', fit);

  // A resized window keeps what was at the middle of the stage at its middle; a view the
  // user has not moved yet is fitted again, so that a drawing that opened at its start (its
  // first rows at the top) stays there.
  let stageSize = null;
  new ResizeObserver(() => {
    const rect = stage.getBoundingClientRect();
    if (stageSize && state.view && !state.moved) {
      fit();
    } else if (stageSize) {
      state.tx += (rect.width - stageSize.width) / 2;
      state.ty += (rect.height - stageSize.height) / 2;
      apply();
    }
    stageSize = {width: rect.width, height: rect.height};
  }).observe(stage);

  // --- Search ------------------------------------------------------------------------------

  function haystack(item) {
    return [item.title, ...item.search].join('\n').toLowerCase();
  }

  function clearMatches() {
    for (const id of state.matches) {
      const entry = state.entries && state.entries.get(id);
      if (entry) entry.g.classList.remove('match', 'current');
    }
    if (state.entries) {
      for (const {g} of state.entries.values()) g.classList.remove('holds-match');
    }
    state.matches = [];
    state.current = -1;
  }

  // Marks the drawn matches, and in a tree view the collapsed boxes that hold hidden ones.
  function markMatches() {
    for (const [i, id] of state.matches.entries()) {
      const entry = state.entries.get(id);
      if (entry) {
        entry.g.classList.add('match');
        if (i === state.current) entry.g.classList.add('current');
      } else if (state.view.tree) {
        const holder = state.entries.get(shownAs(treeOf(state.view), id));
        if (holder) holder.g.classList.add('holds-match');
      }
    }
  }

  // Highlights every element whose title, name or keys contain the query, and centres the
  // current one (the first, or the next on Enter). A tree view finds what its collapsed
  // modules hold too, and opens the module of the current match.
  function runSearch(move) {
    clearMatches();
    const query = search.value.trim().toLowerCase();
    canvas.classList.toggle('searching', query !== '');
    if (!query) {
      count.textContent = '';
      return;
    }
    // In the view's order (graph order), not the drawing's, where boxes come first.
    for (const item of state.view.items) {
      if ((state.view.tree || state.entries.has(item.id)) && haystack(item).includes(query)) {
        state.matches.push(item.id);
      }
    }
    if (!state.matches.length) {
      count.textContent = 'no match';
      return;
    }
    step(0, move);
  }

  function step(index, move) {
    const n = state.matches.length;
    if (!n) return;
    if (state.current >= 0) {
      const previous = state.entries.get(state.matches[state.current]);
      if (previous) previous.g.classList.remove('current');
    }
    state.current = ((index % n) + n) % n;
    const id = state.matches[state.current];
    if (state.view.tree && !state.entries.has(id)) reveal(treeOf(state.view), id);
    markMatches();
    count.textContent = `${state.current + 1} of ${n}`;
    const entry = state.entries.get(id);
    if (move && entry) centre(entry.g);
  }

  search.addEventListener('input', () => runSearch(true));
  search.addEventListener('keydown', (event) => {
    if (event.key !== 'Enter') return;
    event.preventDefault();
    step(state.current + (event.shiftKey ? -1 : 1), true);
  });

  // --- Run data: the layers of a debugging run (tdfx run ... -o x.html) -------------------

  const layers = data.layers || [];

  function buildLayers() {
    if (!layers.length) return;
    for (const layer of [null, ...layers]) {
      const button = element('button', null, layer ? layer.name : 'no run data');
      button.type = 'button';
      button.dataset.layer = layer ? layer.name : '';
      button.addEventListener('click', () => setLayer(layer));
      layerSwitch.append(button);
    }
    setLayer(null);
  }

  function setLayer(layer) {
    state.layer = layer;
    for (const button of layerSwitch.querySelectorAll('button')) {
      button.setAttribute('aria-pressed', String(button.dataset.layer === (layer ? layer.name : '')));
    }
    applyLayer();
    if (state.selected && state.entries.has(state.selected)) select(state.selected, false);
    else showHint();
  }

  // What the layer on adds to an element: by node name, or by module path.
  function layerOverlay(item) {
    const layer = state.layer;
    if (!layer || !item) return null;
    if (item.id.startsWith('node:')) return layer.nodes[item.id.slice(5)] || null;
    if (item.kind === 'module' && item.module) return layer.modules[item.module] || null;
    return null;
  }

  // Fills the elements the layer on colours, rings its marked ones, and shows its legend.
  function applyLayer() {
    if (!state.entries || !layers.length) return;  // without layers, the drawings' own fills
    for (const {item, g, body} of state.entries.values()) {
      const overlay = layerOverlay(item);
      if (body) body.style.fill = overlay && overlay.fill ? overlay.fill : '';
      g.classList.toggle('marked', Boolean(overlay && overlay.marked));
    }
    legend.hidden = !state.layer;
    legend.textContent = state.layer ? state.layer.name + ': ' + state.layer.legend : '';
  }

  // --- Panel and tooltip -------------------------------------------------------------------

  function fieldList(item, links) {
    const list = element('dl', 'fields');
    for (const field of item.fields) {
      list.append(element('dt', null, field.label));
      const value = element('dd');
      if (field.refs.length) {
        for (const ref of field.refs) {
          const target = state.entries.get(ref);
          const name = target ? target.item.title : ref;
          if (links && target) {
            const button = element('button', 'ref', name);
            button.type = 'button';
            button.addEventListener('click', () => select(ref, true));
            value.append(button);
          } else {
            value.append(element('span', 'ref', name + ' '));
          }
        }
      } else {
        value.textContent = field.text;
      }
      list.append(value);
    }
    const overlay = layerOverlay(item);
    for (const line of overlay ? overlay.lines : []) {
      list.append(element('dt', 'run', state.layer.name), element('dd', 'run', line));
    }
    return list;
  }

  // --- Timelines: a training run's charts (OverlayLayer::timelines) in the panel -----------

  const CHART_W = 320, CHART_H = 64, CHART_PAD = 5;

  // A number as the panel shows it: four significant digits; null (NaN or Inf) as such.
  const shortNumber = (v) => (v === null ? 'NaN/Inf' : String(Number(v.toPrecision(4))));

  // The steps every chart of a layer spans, so that charts of one run line up: from its first
  // recorded step to its last or its marked step, whichever is later.
  function stepRange(layer) {
    let first = Infinity, last = -Infinity;
    for (const charts of [layer.timelines, ...Object.values(layer.module_timelines)]) {
      for (const chart of charts) {
        if (!chart.steps.length) continue;
        first = Math.min(first, chart.steps[0]);
        last = Math.max(last, chart.steps[chart.steps.length - 1]);
      }
    }
    if (layer.marked_step !== undefined) last = Math.max(last, layer.marked_step);
    return first <= last ? [first, last] : [0, 0];
  }

  // One chart over the layer's steps (stepRange): each series a line, a value that is not
  // finite (null in the data) a red dot at the top, the layer's marked step a dashed red line;
  // captioned with its label, each series' last value, and the range drawn.
  function timelineChart(timeline, [first, last], markedStep) {
    const steps = timeline.steps;
    const finite = [];
    for (const s of timeline.series) for (const v of s.values) if (v !== null) finite.push(v);
    let lo = finite.length ? Math.min(...finite) : 0;
    let hi = finite.length ? Math.max(...finite) : 1;
    if (lo === hi) {
      const pad = Math.abs(lo) / 2 || 1;
      lo -= pad;
      hi += pad;
    }
    const x = (step) => CHART_PAD + (last > first ? (step - first) / (last - first) : 0.5) *
        (CHART_W - 2 * CHART_PAD);
    const y = (v) => CHART_H - CHART_PAD - (v - lo) / (hi - lo) * (CHART_H - 2 * CHART_PAD);
    const svg = svgElement('svg', {width: CHART_W, height: CHART_H, class: 'chart',
                                   viewBox: `0 0 ${CHART_W} ${CHART_H}`});
    if (markedStep !== undefined) {
      const line = svgElement('line', {x1: x(markedStep), x2: x(markedStep), y1: 0, y2: CHART_H,
                                       class: 'marked-step', 'data-step': markedStep});
      line.append(svgElement('title', {}, 'step ' + markedStep));
      svg.append(line);
    }
    timeline.series.forEach((series, i) => {
      let points = [];
      const flush = () => {
        if (points.length === 1) {
          svg.append(svgElement('circle', {cx: points[0][0], cy: points[0][1], r: 1.5,
                                           class: 'point s' + i}));
        } else if (points.length) {
          svg.append(svgElement('polyline', {points: points.map((p) => p.join(',')).join(' '),
                                             class: 'series s' + i}));
        }
        points = [];
      };
      series.values.forEach((v, j) => {
        if (v !== null) {
          points.push([x(steps[j]).toFixed(1), y(v).toFixed(1)]);
          return;
        }
        flush();
        svg.append(svgElement('circle', {cx: x(steps[j]), cy: CHART_PAD, r: 3, class: 'nonfinite'}));
      });
      flush();
    });
    const caption = element('figcaption');
    caption.append(element('span', 'label', timeline.label));
    timeline.series.forEach((series, i) => {
      const lastValue = series.values.length ? series.values[series.values.length - 1] : null;
      caption.append(element('span', 'key s' + i, series.name + ' ' + shortNumber(lastValue)));
    });
    caption.append(element('span', 'range',
                           `steps ${first}–${last}, ${shortNumber(lo)} to ${shortNumber(hi)}`));
    const figure = element('figure', 'timeline');
    figure.append(caption, svg);
    return figure;
  }

  // The layer's charts of a module (by its path), or of the whole run (path null).
  function timelineBlock(path) {
    const layer = state.layer;
    if (!layer || !layer.timelines) return null;
    const charts = path === null ? layer.timelines : layer.module_timelines[path];
    if (!charts || !charts.length) return null;
    const block = element('section', 'timelines');
    const marked = layer.marked_step;
    block.append(element('h3', null, layer.name + (marked === undefined ? '' :
        ' — the red line is step ' + marked)));
    const range = stepRange(layer);
    for (const chart of charts) block.append(timelineChart(chart, range, marked));
    return block;
  }

  function showHint() {
    panel.replaceChildren(element('p', 'hint',
        'Click a node to see it here; drag to pan, wheel to zoom.'));
    const run = timelineBlock(null);
    if (run) panel.append(run);
  }

  function select(id, move) {
    if (state.selected && state.entries.has(state.selected)) {
      state.entries.get(state.selected).g.classList.remove('selected');
    }
    if (id && state.view.tree && !state.entries.has(id)) reveal(treeOf(state.view), id);
    const entry = state.entries.get(id);
    state.selected = entry ? id : null;
    if (!entry) {
      showHint();
      return;
    }
    entry.g.classList.add('selected');
    const item = entry.item;
    const parts = [element('h2', null, item.title), element('p', 'kind', item.kind), fieldList(item, true)];
    const actions = element('p', 'actions');
    if (state.view.tree && item.module) {
      const tree = treeOf(state.view);
      const open = tree.open.has(item.module);
      const button = element('button', null, open ? 'Collapse' : 'Expand');
      button.type = 'button';
      button.id = 'toggle';
      button.addEventListener('click', () => toggle(tree, item.module));
      actions.append(button);
    }
    const expand = item.module && !state.view.tree && expansionOf(state.view, item.module);
    const collapse = item.module && !state.view.tree && collapseOf(state.view, item.module);
    for (const [label, view] of [['Expand', expand], ['Collapse', collapse]]) {
      if (!view) continue;
      const button = element('button', null, label);
      button.type = 'button';
      button.addEventListener('click', () => showView(view.name));
      actions.append(button);
    }
    if (actions.childElementCount) parts.push(actions);
    const charts = item.kind === 'module' && item.module ? timelineBlock(item.module) : null;
    if (charts) parts.push(charts);
    panel.replaceChildren(...parts);
    if (move) centre(entry.g);
  }

  canvas.addEventListener('click', (event) => {
    if (state.dragged) {
      state.dragged = false;
      return;
    }
    const g = event.target.closest('g.item');
    select(g ? g.dataset.id : null, false);
  });

  canvas.addEventListener('dblclick', (event) => {
    const g = event.target.closest('g.item');
    const item = g && state.entries.get(g.dataset.id).item;
    if (item && item.module && state.view.tree) toggle(treeOf(state.view), item.module);
  });

  let hovered = null;
  canvas.addEventListener('mouseover', (event) => {
    const g = event.target.closest('g.item');
    if (!g || g === hovered) return;
    hovered = g;
    const item = state.entries.get(g.dataset.id).item;
    tooltip.replaceChildren(element('strong', null, item.title), fieldList(item, false));
    tooltip.hidden = false;
    place(event);
  });
  canvas.addEventListener('mousemove', place);
  canvas.addEventListener('mouseout', (event) => {
    if (hovered && !hovered.contains(event.relatedTarget)) {
      hovered = null;
      tooltip.hidden = true;
    }
  });
  function place(event) {
    if (tooltip.hidden) return;
    const margin = 14;
    let x = event.clientX + margin, y = event.clientY + margin;
    const w = tooltip.offsetWidth, h = tooltip.offsetHeight;
    if (x + w > window.innerWidth) x = Math.max(0, event.clientX - w - margin);
    if (y + h > window.innerHeight) y = Math.max(0, event.clientY - h - margin);
    tooltip.style.left = x + 'px';
    tooltip.style.top = y + 'px';
  }

  // --- Start, and the fragment -------------------------------------------------------------

  // Dispatches a real mouse event at the middle of the element's shape, as a pointer would.
  function dispatchAt(g, type) {
    const shape = g.querySelector('polygon, path, ellipse, text') || g;
    const r = shape.getBoundingClientRect();
    shape.dispatchEvent(new MouseEvent(type, {
      bubbles: true, cancelable: true, view: window,
      clientX: r.left + r.width / 2, clientY: r.top + r.height / 2,
    }));
  }

  function entryNamed(name) {
    return state.entries.get(name) || state.entries.get('node:' + name);
  }

  function replayFragment() {
    const params = new URLSearchParams(location.hash.slice(1));
    const view = params.get('view');
    if (view) {
      const button = switcher.querySelector(`button[data-view="${CSS.escape(view)}"]`);
      if (button) button.click();
      else if (views.has(view)) showView(view);
    }
    if (params.has('layer')) {
      const button = layerSwitch.querySelector(`button[data-layer="${CSS.escape(params.get('layer'))}"]`);
      if (!button) throw new Error(`#layer: no run data ${params.get('layer')} in this page`);
      button.click();
    }
    if (params.has('search')) {
      search.value = params.get('search');
      search.dispatchEvent(new Event('input', {bubbles: true}));
    }
    // Enter pressed `next` times; the matches repeat after their count, so at most that many
    // presses, whatever the fragment asks (`next=100000000` would hold the page for minutes).
    const presses = Number(params.get('next') || 0);
    const matches = state.matches.length;
    const needed = Number.isFinite(presses) && presses > 0 && matches > 0 ? presses % matches : 0;
    for (let i = needed; i > 0; --i) {
      search.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', bubbles: true, cancelable: true}));
    }
    const rect = stage.getBoundingClientRect();
    const x = rect.left + rect.width / 2, y = rect.top + rect.height / 2;
    if (params.has('wheel')) {
      stage.dispatchEvent(new WheelEvent('wheel', {
        deltaY: Number(params.get('wheel')), clientX: x, clientY: y, bubbles: true, cancelable: true,
      }));
    }
    if (params.has('drag')) {
      const [dx, dy] = params.get('drag').split(',').map(Number);
      const pointer = (type, px, py) => stage.dispatchEvent(new PointerEvent(type, {
        pointerId: 1, isPrimary: true, button: 0, clientX: px, clientY: py, bubbles: true,
      }));
      pointer('pointerdown', x, y);
      pointer('pointermove', x + dx, y + dy);
      pointer('pointerup', x + dx, y + dy);
    }
    // expand=PATH: the module selected and its Expand button pressed, as a user does.
    for (const path of params.getAll('expand')) {
      select('box:' + path, false);
      const button = $('toggle');
      if (!button) throw new Error(`#expand: no module ${path} in this view`);
      button.click();
    }
    for (const [param, type] of [['click', 'click'], ['hover', 'mouseover']]) {
      if (!params.has(param)) continue;
      const entry = entryNamed(params.get(param));
      if (!entry) throw new Error(`#${param}: no element ${params.get(param)} in this view`);
      dispatchAt(entry.g, type);
    }
  }

  function fail(error) {
    const box = $('error');
    box.textContent = 'tdfx page: ' + (error && error.message ? error.message : String(error));
    box.hidden = false;
  }
  window.addEventListener('error', (event) => fail(event.error || event.message));

  try {
    $('heading').textContent = data.title || 'tdfx graph';
    buildSwitcher();
    buildLayers();
    if (data.views.length) showView(data.views[0].name);
    replayFragment();
    document.body.dataset.ready = '1';
  } catch (error) {
    fail(error);
  }
})();
