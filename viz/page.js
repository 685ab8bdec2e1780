// The interactive page of a tdfx drawing (viz/page.h): views, pan and zoom, search, a panel
// and a tooltip. Everything from the data is put on screen as text (textContent), never as
// markup. No network: the page loads nothing.
//
// The URL fragment replays what a user does, through the same handlers and real events:
//   #view=ops&search=obs&next=1&click=relu&hover=mul&wheel=-200&drag=40,-30
// view clicks that view's switch, search types into the search box (an input event), next
// presses Enter that many times, click and hover dispatch a click / mouseover on the element
// (a node name, or a Graphviz ID such as key:0 or cluster_0), wheel turns the wheel by that
// deltaY at the middle of the stage, drag drags the drawing by dx,dy pixels. The
// headless-browser test (tests/viz/browser_page.py) drives the page this way.
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

  const data = JSON.parse($('tdfx-data').textContent);
  const views = new Map(data.views.map((view) => [view.name, view]));

  const state = {
    view: null,      // the view shown
    entries: null,   // Graphviz ID -> {item, g} in that view
    k: 1, tx: 0, ty: 0,
    matches: [], current: -1,
    selected: null,  // the selected element's ID, kept across views
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
      entries.set(item.id, {item, g});
    }
    const graphTitle = svg.querySelector(':scope > title');
    if (graphTitle) graphTitle.remove();
    return entries;
  }

  function showView(name) {
    const view = views.get(name);
    if (!view) return;
    if (!drawings.has(name)) {
      const svg = parseSvg(view);
      drawings.set(name, {svg, entries: mapElements(view, svg)});
    }
    const {svg, entries} = drawings.get(name);
    for (const entry of state.matches) entry.g.classList.remove('match', 'current');
    state.matches = [];
    state.view = view;
    state.entries = entries;
    canvas.replaceChildren(svg);
    for (const button of switcher.querySelectorAll('button')) {
      const base = view.base || view.name;
      button.setAttribute('aria-pressed', String(button.dataset.view === base));
    }
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

  // --- Pan and zoom ------------------------------------------------------------------------

  function apply() {
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

  function fit() {
    const svg = canvas.firstElementChild;
    if (!svg) return;
    const rect = stage.getBoundingClientRect();
    const w = svg.getBoundingClientRect().width / state.k;
    const h = svg.getBoundingClientRect().height / state.k;
    if (!w || !h) return;
    state.k = Math.min(1, (rect.width - 16) / w, (rect.height - 16) / h);
    state.tx = (rect.width - w * state.k) / 2;
    state.ty = Math.max(8, (rect.height - h * state.k) / 2);
    apply();
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

  // A resized window keeps what was at the middle of the stage at its middle.
  let stageSize = null;
  new ResizeObserver(() => {
    const rect = stage.getBoundingClientRect();
    if (stageSize) {
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

  // Highlights every element whose title, name or keys contain the query, and centres the
  // current one (the first, or the next on Enter).
  function runSearch(move) {
    for (const entry of state.matches) entry.g.classList.remove('match', 'current');
    state.matches = [];
    state.current = -1;
    const query = search.value.trim().toLowerCase();
    canvas.classList.toggle('searching', query !== '');
    if (!query) {
      count.textContent = '';
      return;
    }
    // In the view's order (graph order), not the drawing's, where boxes come first.
    for (const item of state.view.items) {
      const entry = state.entries.get(item.id);
      if (entry && haystack(item).includes(query)) state.matches.push(entry);
    }
    for (const entry of state.matches) entry.g.classList.add('match');
    if (!state.matches.length) {
      count.textContent = 'no match';
      return;
    }
    step(0, move);
  }

  function step(index, move) {
    const n = state.matches.length;
    if (!n) return;
    if (state.current >= 0) state.matches[state.current].g.classList.remove('current');
    state.current = ((index % n) + n) % n;
    const entry = state.matches[state.current];
    entry.g.classList.add('current');
    count.textContent = `${state.current + 1} of ${n}`;
    if (move) centre(entry.g);
  }

  search.addEventListener('input', () => runSearch(true));
  search.addEventListener('keydown', (event) => {
    if (event.key !== 'Enter') return;
    event.preventDefault();
    step(state.current + (event.shiftKey ? -1 : 1), true);
  });

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
    return list;
  }

  function showHint() {
    panel.replaceChildren(element('p', 'hint',
        'Click a node to see it here; drag to pan, wheel to zoom.'));
  }

  function select(id, move) {
    if (state.selected && state.entries.has(state.selected)) {
      state.entries.get(state.selected).g.classList.remove('selected');
    }
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
    const expand = item.module && expansionOf(state.view, item.module);
    const collapse = item.module && collapseOf(state.view, item.module);
    for (const [label, view] of [['Expand', expand], ['Collapse', collapse]]) {
      if (!view) continue;
      const button = element('button', null, label);
      button.type = 'button';
      button.addEventListener('click', () => showView(view.name));
      actions.append(button);
    }
    if (actions.childElementCount) parts.push(actions);
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
    if (data.views.length) showView(data.views[0].name);
    replayFragment();
    document.body.dataset.ready = '1';
  } catch (error) {
    fail(error);
  }
})();
