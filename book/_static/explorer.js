/* The book's explorer: a trained model of the book, run in the reader's browser.

A page places one with a raw HTML block (book/_ext/explorer_assets.py adds this script):

    <div class="aiayn-explorer" data-model="reverse" data-source="7 2 9 4 0">
      <p class="aiayn-explorer-note">Served over HTTP, ...</p>
    </div>

The reader types a source, presses Enter, and sees what the model writes, a step at a
time, with the attention maps of every layer and head. The arithmetic is ONNX Runtime
Web's, on the graphs that aiayn.book.explorer exported from the trained model
(_static/explorer/NAME/: encoder.onnx, decoder.onnx, model.json); the attention weights
are outputs of those graphs. This script only glues input, runtime and pictures: the
decoding loop (as aiayn.decoding.greedy_decode), the choice of a map, the drawing.
Where it cannot run (no JavaScript, a page opened as a file, a model that does not load)
the note stays in the page, beside the book's static figure; on paper too. */
(function () {
  "use strict";

  // _static/explorer/, beside this script: the runtime in ort/, each model in NAME/
  const EXPLORER = document.currentScript
    ? new URL("explorer/", document.currentScript.src)
    : null;
  const KINDS = {
    encoder_self: { title: "Encoder self-attention",
      rows: "source token (query)", cols: "source token (key)" },
    decoder_self: { title: "Decoder self-attention",
      rows: "token written (query)", cols: "decoder input (key)" },
    cross: { title: "Encoder–decoder attention",
      rows: "token written (query)", cols: "source token (key)" },
  };
  // matplotlib's viridis (the book's figures) at 0, 1/8, ..., 1
  const VIRIDIS = ["#440154", "#46327e", "#365c8d", "#277f8e", "#1fa187",
    "#4ac16d", "#a0da39", "#d2e21b", "#fde725"];

  // --- the runtime and the models ------------------------------------------------------

  let runtime = null; // one ONNX Runtime Web per page, loaded on first use
  function loadRuntime() {
    runtime = runtime || new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = new URL("ort/ort.wasm.min.js", EXPLORER).href;
      script.onload = () => {
        const ort = window.ort;
        // its .wasm and .mjs from this site, one thread (no cross-origin isolation)
        ort.env.wasm.wasmPaths = new URL("ort/", EXPLORER).href;
        ort.env.wasm.numThreads = 1;
        ort.env.logLevel = "error";
        resolve(ort);
      };
      script.onerror = () => reject(new Error("the runtime did not load"));
      document.head.append(script);
    });
    return runtime;
  }

  async function download(url, as) {
    const response = await fetch(url);
    if (!response.ok) throw new Error(`${url.pathname} answered ${response.status}`);
    return response[as]();
  }

  // A model's graphs, each checked against model.json's SHA-256 before it runs
  async function loadModel(name) {
    const folder = new URL(`${name}/`, EXPLORER);
    const [info, ort] = await Promise.all(
      [download(new URL("model.json", folder), "json"), loadRuntime()]);
    const session = async (file) => {
      const bytes = await download(new URL(file, folder), "arrayBuffer");
      const digest = await crypto.subtle.digest("SHA-256", bytes);
      const hex = Array.from(new Uint8Array(digest),
        (b) => b.toString(16).padStart(2, "0")).join("");
      if (hex !== info.sha256[file]) throw new Error(`${file} is not the exported one`);
      return ort.InferenceSession.create(new Uint8Array(bytes),
        { executionProviders: ["wasm"] });
    };
    const [encoder, decoder] = await Promise.all(
      [session("encoder.onnx"), session("decoder.onnx")]);
    return { info, ort, encoder, decoder };
  }

  // --- reading a source, decoding it -----------------------------------------------------

  // "3 1 4" or "314": every character but spaces is one token (the sources are digits)
  function readSource(text, info) {
    const symbols = Array.from(text.replace(/\s+/g, ""));
    const alphabet = info.source_alphabet;
    const unknown = symbols.find((s) => !alphabet.includes(s));
    const low = info.min_source_length, high = info.max_source_length;
    if (unknown !== undefined) {
      return { error: `“${unknown}” is not in this model's alphabet: type digits ` +
        `${alphabet[0]}–${alphabet[alphabet.length - 1]}, e.g. 3 1 4 1 5.` };
    }
    if (symbols.length < low || symbols.length > high) {
      return { error: `A source has ${low} to ${high} digits; ` +
        `this one has ${symbols.length}.` };
    }
    return { symbols };
  }

  function ids(ort, values) { // int64 (1, n)
    return new ort.Tensor("int64", BigInt64Array.from(values, BigInt), [1, values.length]);
  }

  // As aiayn.decoding.greedy_decode, for one source: the decoder reads <s> and all it
  // has written, and writes the likeliest next token, until </s> or the length limit.
  async function greedyDecode(model, symbols) {
    const { info, ort } = model;
    const source = [...symbols.map((s) => info.tokens.indexOf(s)), info.eos_id];
    const src = ids(ort, source); // ends with </s>, as the encoder was trained
    const { memory, encoder_self } = await model.encoder.run({ src });
    // an output, its </s> included, may be extra_length longer than the source
    const maxLength = Math.min(symbols.length + info.extra_length, info.max_positions);
    const written = [info.bos_id];
    const steps = []; // each step's decoder maps, (layers, heads, t, t) and (..., t, S)
    for (let t = 0; t < maxLength; t++) {
      const out = await model.decoder.run({ src, memory, tgt_in: ids(ort, written) });
      const next = argmax(lastRow(out.logits));
      written.push(next);
      steps.push({ decoder_self: out.decoder_self, cross: out.cross });
      if (next === info.eos_id) break;
    }
    return {
      source: source.map((id) => info.tokens[id]),
      written: written.slice(1).map((id) => info.tokens[id]),
      encoder_self, steps,
    };
  }

  function lastRow(logits) { // (1, T, V) -> the last position's V scores
    const vocab = logits.dims[2];
    return logits.data.subarray(logits.data.length - vocab);
  }

  function argmax(values) { // the first of equal maxima, as torch.argmax
    let best = 0;
    for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i;
    return best;
  }

  // One map (rows, cols) of a (layers, heads, rows, cols) output: a head's, or the mean
  function headMap(tensor, layer, head) {
    const [, heads, rows, cols] = tensor.dims;
    const size = rows * cols;
    const weights = (h) => tensor.data.subarray(
      (layer * heads + h) * size, (layer * heads + h + 1) * size);
    if (head !== "mean") return { rows, cols, weights: weights(head) };
    const mean = new Float32Array(size);
    for (let h = 0; h < heads; h++) weights(h).forEach((w, i) => { mean[i] += w / heads; });
    return { rows, cols, weights: mean };
  }

  // --- the widget ------------------------------------------------------------------------

  function element(tag, attributes = {}, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
    node.append(...children);
    return node;
  }

  function options(select, entries) { // [[value, label], ...], keeping the choice if it can
    const kept = select.value;
    select.replaceChildren(...entries.map(([value, label]) =>
      element("option", { value }, label)));
    if (entries.some(([value]) => value === kept)) select.value = kept;
  }

  function build(root, id) {
    const field = (label, control) => element("label", {}, label, control);
    const ui = {
      input: element("input", { type: "text", inputmode: "numeric",
        autocomplete: "off", spellcheck: "false", id: `${id}-source` }),
      message: element("p", { class: "aiayn-explorer-message", role: "status" }),
      output: element("p", { class: "aiayn-explorer-output", "aria-live": "polite" }),
      previous: element("button", { type: "button", "aria-label": "previous step" }, "◀"),
      slider: element("input", { type: "range", min: "1", "aria-label": "decoding step" }),
      next: element("button", { type: "button", "aria-label": "next step" }, "▶"),
      step: element("span", { class: "aiayn-explorer-step" }),
      kind: element("select", {}),
      layer: element("select", {}),
      head: element("select", {}),
      map: element("div", { class: "aiayn-explorer-map" }),
      readout: element("p", { class: "aiayn-explorer-readout", "aria-live": "polite" }),
    };
    options(ui.kind, Object.entries(KINDS).map(([kind, { title }]) => [kind, title]));
    ui.kind.value = "cross";
    const form = element("form", { class: "aiayn-explorer-form" },
      element("label", { for: ui.input.id }, "Source "), ui.input,
      element("button", { type: "submit" }, "Run"));
    root.append(form, ui.message, ui.output,
      element("div", { class: "aiayn-explorer-steps" },
        ui.previous, ui.slider, ui.next, ui.step),
      element("div", { class: "aiayn-explorer-choice" },
        field("Attention ", ui.kind), field("Layer ", ui.layer), field("Head ", ui.head)),
      ui.map, ui.readout);
    return { form, ...ui };
  }

  // An explorer in the page: its model, its controls, and what it shows now
  async function explorer(root, index) {
    if (location.protocol === "file:" || !EXPLORER || !window.crypto?.subtle) {
      root.dataset.state = "unavailable";
      return;
    }
    root.dataset.state = "loading";
    let model;
    try {
      model = await loadModel(root.dataset.model);
    } catch (error) { // the note stays
      root.dataset.state = "unavailable";
      console.warn(`explorer: ${root.dataset.model}: ${error.message}`);
      return;
    }
    const { info } = model;
    const ui = build(root, `aiayn-explorer-${index}`);
    root.classList.add("aiayn-explorer-live");
    const figure = root.dataset.figure && document.getElementById(root.dataset.figure);
    // on screen, the live explorer stands for the static figure (print keeps it)
    if (figure) figure.classList.add("aiayn-explorer-replaced");
    ui.input.value = root.dataset.source || "3 1 4 1 5";
    // the decoded source, the step shown, the cell pointed at, the map drawn
    // cursor null: point at the newest row's largest weight when the map is drawn
    const view = { result: null, step: 1, cursor: null, drawn: null };

    function show() {
      const { result } = view;
      if (!result) return;
      const steps = result.steps.length;
      view.step = Math.min(Math.max(view.step, 1), steps);
      ui.slider.max = String(steps);
      ui.slider.value = String(view.step);
      ui.previous.disabled = view.step === 1;
      ui.next.disabled = view.step === steps;
      ui.output.replaceChildren("Output:", ...result.written.flatMap((token, i) => [" ",
        element("span", { class: i < view.step - 1 ? "written"
          : i === view.step - 1 ? "current" : "later" }, token)]));
      ui.step.textContent = `step ${view.step} of ${steps}: ` +
        `writes “${result.written[view.step - 1]}”`;
      const kind = ui.kind.value;
      const layers = kind === "encoder_self" ? info.encoder_layers : info.decoder_layers;
      // layers and heads counted from 1, as in the book's figures
      const count = (n) => Array.from({ length: n }, (_, i) => [String(i + 1), String(i + 1)]);
      options(ui.layer, count(layers));
      options(ui.head, [["mean", "mean of the heads"], ...count(info.heads)]);
      const tensor = kind === "encoder_self" ? result.encoder_self
        : result.steps[view.step - 1][kind];
      const head = ui.head.value === "mean" ? "mean" : Number(ui.head.value) - 1;
      const map = headMap(tensor, Number(ui.layer.value) - 1, head);
      const rows = kind === "encoder_self" ? result.source
        : result.written.slice(0, view.step);
      const cols = kind === "decoder_self"
        ? ["<s>", ...result.written].slice(0, view.step) : result.source;
      if (view.cursor) {
        view.cursor = view.cursor.map((c, axis) =>
          Math.min(c, (axis ? map.cols : map.rows) - 1));
      } else { // a new answer or step: the newest row's largest weight
        const r = map.rows - 1;
        view.cursor = [r, argmax(Array.from(
          { length: map.cols }, (_, c) => map.weights[r * map.cols + c]))];
      }
      drawMap(ui, map, rows, cols, KINDS[kind], view);
    }

    async function run() {
      if (root.dataset.state === "running") return; // one decoding at a time
      const read = readSource(ui.input.value, info);
      ui.message.textContent = read.error || "";
      ui.input.setAttribute("aria-invalid", String(Boolean(read.error)));
      // an answer below a source that was refused is the previous source's: dimmed
      root.classList.toggle("aiayn-explorer-stale", Boolean(read.error) && Boolean(view.result));
      if (read.error) return;
      root.dataset.state = "running";
      try {
        view.result = await greedyDecode(model, read.symbols);
      } catch (error) {
        ui.message.textContent = "The model could not run here; the static figure shows it.";
        root.dataset.state = "error";
        throw error; // to the console
      }
      view.step = view.result.steps.length; // the whole answer first
      view.cursor = null;
      show();
      // for the book's test: answers so far, and the time from page load to the first
      root.dataset.answers = String(Number(root.dataset.answers || 0) + 1);
      root.dataset.firstAnswerMs ||= String(Math.round(performance.now()));
      root.dataset.state = "ready";
    }

    ui.form.addEventListener("submit", (event) => {
      event.preventDefault();
      run().catch((error) => console.error(`explorer: ${error.message}`));
    });
    const goTo = (step) => { view.step = step; view.cursor = null; show(); };
    ui.previous.addEventListener("click", () => goTo(view.step - 1));
    ui.next.addEventListener("click", () => goTo(view.step + 1));
    ui.slider.addEventListener("input", () => goTo(Number(ui.slider.value)));
    for (const select of [ui.kind, ui.layer, ui.head]) select.addEventListener("change", show);
    ui.map.addEventListener("keydown", (event) => moveCursor(event, ui, view));
    await run();
  }

  // --- the picture -----------------------------------------------------------------------

  function colour(weight) { // viridis, from 0 to 1
    const x = Math.min(Math.max(weight, 0), 1) * (VIRIDIS.length - 1);
    const i = Math.min(Math.floor(x), VIRIDIS.length - 2);
    const [a, b] = [VIRIDIS[i], VIRIDIS[i + 1]].map((hex) =>
      [1, 3, 5].map((k) => parseInt(hex.slice(k, k + 2), 16)));
    return `rgb(${a.map((c, k) => Math.round(c + (b[k] - c) * (x - i))).join(",")})`;
  }

  const SVG = "http://www.w3.org/2000/svg";
  function svg(tag, attributes, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // The map as an SVG heatmap: rows are queries, columns keys, labelled by their tokens.
  // Hovering a cell, or moving to it with the arrow keys, shows its weight below.
  function drawMap(ui, map, rows, cols, kind, view) {
    const cell = 28, left = 44, top = 40;
    const width = left + map.cols * cell, height = top + map.rows * cell;
    const picture = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img",
      style: `max-width: ${width * 1.25}px`,
      "aria-label": `${kind.title}: rows ${kind.rows}, columns ${kind.cols}` });
    cols.forEach((token, c) => picture.append(svg("text", { x: left + (c + 0.5) * cell,
      y: top - 8, "text-anchor": "middle", class: "label" }, token)));
    rows.forEach((token, r) => picture.append(svg("text", { x: left - 6,
      y: top + (r + 0.5) * cell, "text-anchor": "end", "dominant-baseline": "central",
      class: "label" }, token)));
    for (let r = 0; r < map.rows; r++) {
      for (let c = 0; c < map.cols; c++) {
        const weight = map.weights[r * map.cols + c];
        const rect = svg("rect", { x: left + c * cell, y: top + r * cell, width: cell,
          height: cell, fill: colour(weight), "data-row": r, "data-col": c,
          "data-weight": weight.toPrecision(7) });
        rect.addEventListener("mouseenter", () => {
          view.cursor = [r, c];
          point(ui, view);
        });
        picture.append(rect);
      }
    }
    picture.append(svg("rect", { class: "cursor", width: cell, height: cell }));
    ui.map.replaceChildren(element("p", { class: "aiayn-explorer-axes" },
      `Rows: ${kind.rows}. Columns: ${kind.cols}. ` +
      "Colour: the weight, from 0 (dark) to 1 (yellow)."), picture);
    ui.map.tabIndex = 0;
    ui.map.setAttribute("aria-label", `${kind.title}; arrow keys move between cells`);
    view.drawn = { map, rows, cols, kind };
    point(ui, view);
  }

  // Show the cell under the cursor: outlined, and its weight and tokens in words
  function point(ui, view) {
    const { rows, cols, kind } = view.drawn;
    const [r, c] = view.cursor;
    const rect = ui.map.querySelector(`rect[data-row="${r}"][data-col="${c}"]`);
    const cursor = ui.map.querySelector("rect.cursor");
    cursor.setAttribute("x", rect.getAttribute("x"));
    cursor.setAttribute("y", rect.getAttribute("y"));
    ui.readout.textContent = `${kind.rows.split(" (")[0]} “${rows[r]}” → ` +
      `${kind.cols.split(" (")[0]} “${cols[c]}”: weight ` +
      `${Number(rect.dataset.weight).toFixed(3)}`;
  }

  function moveCursor(event, ui, view) {
    const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1],
      ArrowRight: [0, 1] };
    if (!moves[event.key] || !view.drawn) return;
    event.preventDefault();
    const { map } = view.drawn;
    view.cursor = view.cursor.map((c, axis) => Math.min(
      Math.max(0, c + moves[event.key][axis]), (axis ? map.cols : map.rows) - 1));
    point(ui, view);
  }

  function start() {
    document.querySelectorAll(".aiayn-explorer").forEach((root, index) => {
      explorer(root, index).catch((error) => {
        root.dataset.state = "error";
        console.error(`explorer: ${error.message}`);
      });
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
