// The tokenizer playground: reads the settings (from the form, first from the URL), asks the server's JSON API
// (tokenizer/serve.py) and draws what it answers. Nothing is tokenized here: every id, split and merge comes from
// the server, so the page shows exactly what the Python tokenizer does.
"use strict";

const $ = (id) => document.getElementById(id);
const MAX_LINK_BYTES = 65_536;  // serve.py's MAX_REQUEST_LINE: the longest request line it reads, CRLF too
const COLORS = 6;  // token background classes c0..c5 (playground.css)
const MERGES_HINT = '<p class="hint">Click a token to see the merges that built it, step by step.</p>';
const RULES = {
  allowed: 'allowed: text such as <|endoftext|> becomes its special id (encode(text, allowed_special="all"))',
  disallowed: "disallowed: text such as <|endoftext|> is an error, tiktoken's default (encode(text))",
  text: "plain text: <|endoftext|> is encoded as ordinary text, < | end ... (encode(text, disallowed_special=()))",
};
const state = { names: [], model: null, answer: null, selected: null, seq: 0, explained: 0, timer: null,
                specialDefault: null, linkMistakes: "", updating: null, explaining: null };

// ---- talking to the server ---------------------------------------------------------------------------------

// `signal`: an AbortController's, aborted when a newer request replaces this one, so that the browser stops
// waiting for it (and closes its connection: the server skips a request whose client has gone)
async function api(path, fields, signal) {
  let response;
  try {
    response = await fetch(path, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(fields || {}), signal,
    });
  } catch (e) {
    if (e.name === "AbortError") throw e;  // replaced: its caller drops it without a word
    // no answer at all (the browser says only "Failed to fetch"): the server was stopped
    throw new Error(`the playground server did not answer (${e.message}): start it again, then reload this page`);
  }
  let answer;
  try {
    answer = await response.json();
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new Error(`${path} answered HTTP ${response.status} without JSON`);
  }
  if (!response.ok) throw new Error(answer.error || `${path} answered HTTP ${response.status}`);
  return answer;
}

function settings() {
  return {
    text: $("text").value,
    encoding: $("encoding").value,
    special: $("special").value,
    view: document.querySelector('input[name="view"]:checked').value,
    compare: $("compare-on").checked ? [$("compare-1").value, $("compare-2").value].filter(Boolean) : [],
  };
}

function showError(message) {
  $("error").textContent = message || "";
  $("error").hidden = !message;
}

// ---- the URL: ?text=...&encoding=...&special=...&view=...&compare=a&compare=b ---------------------------

function readUrl() {
  const query = new URLSearchParams(location.search);
  if (query.has("text")) $("text").value = query.get("text");
  const mistakes = [];  // said on the page once the first update is drawn, which would otherwise clear them
  const pick = (select, value, name = select.id) => {
    if (value && [...select.options].some((o) => o.value === value)) select.value = value;
    else if (value) mistakes.push(`unknown ${name} ${JSON.stringify(value)} in the link; using ${select.value}`);
  };
  pick($("encoding"), query.get("encoding"));
  pick($("special"), query.get("special"));
  const view = document.querySelector(`input[name="view"][value="${CSS.escape(query.get("view") || "text")}"]`);
  if (view) view.checked = true;
  else mistakes.push(`unknown view ${JSON.stringify(query.get("view"))} in the link; using text`);
  const compared = linkedNames(query.getAll("compare"), mistakes);
  if (compared.length > 2) {  // the page's two selectors: the rest are not compared, and the page says which
    mistakes.push("the page compares with at most two encodings; left out of the link: "
      + compared.slice(2).map((name) => JSON.stringify(name)).join(", "));
  }
  if (compared.length) {
    const [first, second] = compared;
    $("compare-on").checked = true;
    pick($("compare-1"), first, "encoding to compare");
    if (second) pick($("compare-2"), second, "encoding to compare");
    else $("compare-2").value = "";  // a link naming one encoding to compare with compares one, not the default two
  }
  state.linkMistakes = mistakes.join("; ");
}

// The encodings a link compares with: one compare= per name, since a saved tokenizer's name is its folder's and
// may hold a comma. An older link joined them with commas in one compare=, which is read where it reads one way.
function linkedNames(values, mistakes) {
  if (values.length !== 1 || state.names.includes(values[0])) return values.filter(Boolean);
  const readings = commaReadings(values[0], state.names);
  if (readings.length > 1) {
    mistakes.push(`compare=${JSON.stringify(values[0])} in the link reads as `
      + `${readings.map((names) => names.join(" | ")).join(" or as ")} (a name holds a comma); comparing with `
      + "neither: give each encoding a compare= of its own");
    return [];
  }
  // no reading: an unknown name, which pick() names
  return readings.length ? readings[0] : values[0].split(",").map((name) => name.trim()).filter(Boolean);
}

// The ways, at most two, to read `joined` as `names` joined by commas when a name may hold commas itself
// (tokenizer/command_line.py's comma_readings, as serve.py reads the API's older encodings=a,b): with gpt2,
// o200k_base and "gpt2,o200k_base" on offer, "gpt2,o200k_base,gpt2" reads as gpt2 | o200k_base | gpt2 and as
// gpt2,o200k_base | gpt2. Spaces around an item and blank items are not names.
function commaReadings(joined, names) {
  const parts = joined.split(",");
  const known = new Set(names);
  const widest = 1 + Math.max(0, ...names.map((name) => name.split(",").length - 1));  // parts one name spans
  const items = (start) => {  // [end, item] of each item that can start at part `start`
    const found = [];
    for (let end = start + 1; end <= Math.min(start + widest, parts.length); end++) {
      const item = parts.slice(start, end).join(",").trim();
      if (known.has(item) || (!item && end === start + 1)) found.push([end, item]);
    }
    return found;
  };
  const ways = new Array(parts.length).fill(0).concat([1]);  // ways[i]: readings of parts[i:], counted up to 2
  for (let start = parts.length - 1; start >= 0; start--) {
    ways[start] = Math.min(2, items(start).reduce((sum, [end]) => sum + ways[end], 0));
  }
  const readings = [];
  for (let which = 0; which < ways[0]; which++) {  // walk the parts, choosing an item each step
    const reading = [];
    let start = 0;
    let skip = which;
    while (start < parts.length) {
      const choices = items(start);
      let choice = 0;
      while (skip >= ways[choices[choice][0]]) skip -= ways[choices[choice++][0]];
      const [end, item] = choices[choice];
      if (item) reading.push(item);
      start = end;
    }
    readings.push(reading);
  }
  return readings;
}

function writeUrl(s) {
  const query = new URLSearchParams({ text: s.text, encoding: s.encoding });
  if (s.special !== state.specialDefault) query.set("special", s.special);
  if (s.view !== "text") query.set("view", s.view);
  for (const name of s.compare) query.append("compare", name);  // one each: a name may hold a comma
  // the server reads a request line of up to 64 KB (tokenizer/serve.py): a link holding a longer text would
  // not open the page again, not even on reload, so such a link keeps the settings and leaves the text out
  const tooLong = `GET /?${query} HTTP/1.1\r\n`.length > MAX_LINK_BYTES;
  if (tooLong) query.delete("text");
  $("link-note").hidden = !tooLong;
  history.replaceState(null, "", `?${query}`);
}

// ---- drawing tokens ---------------------------------------------------------------------------------------

function tokenLabel(token, view) {
  if (view === "ids") return String(token.id);
  if (view === "bytes") return token.bytes;
  if (view === "gpt2") return token.gpt2;
  // a token holding the first bytes of a character that a later token completes adds no text of its own
  return token.text === "" ? token.shown : drawable(token.visible);
}

// A token's text as a span of its own can draw it. A combining mark (an accent, a vowel sign, an emoji's
// variation selector) that starts a token would be drawn onto the last letter of the token before, and an
// invisible format character (a zero-width joiner or space, a byte order mark) as nothing: a span of no width
// that no one can see or click. A direction override would also reverse the order of every token after it.
// So a leading mark is drawn on a dotted circle, as Unicode's charts draw marks alone, and each format character
// as Python's escape of it, as the token's bytes are shown.
function drawable(text) {
  const escaped = text.replace(/\p{Cf}/gu, (character) => {
    const code = character.codePointAt(0);
    const [prefix, digits] = code <= 0xff ? ["\\x", 2] : code <= 0xffff ? ["\\u", 4] : ["\\U", 8];
    return prefix + code.toString(16).padStart(digits, "0");
  });
  return /^\p{M}/u.test(escaped) ? `\u25cc${escaped}` : escaped;
}

function drawTokens(box, tokens, view, options = {}) {
  box.className = `tokens view-${view}`;
  box.replaceChildren(...tokens.map((token, n) => {
    const span = document.createElement("span");
    span.className = `token c${n % COLORS}`;
    if (token.special) span.classList.add("special");
    if (token.text === "" && view === "text") span.classList.add("partial");
    if (options.marks && token.differs) span.classList.add("differs");
    span.dataset.tokenId = token.id;
    span.dataset.index = n;
    // the text's tokens are one stop of the Tab key (the first token; arrow keys move on): a stop per token
    // would take a keyboard user through thousands of them to reach the panels
    if (options.keys) {
      span.setAttribute("role", "button");
      span.tabIndex = n === 0 ? 0 : -1;
    }
    span.textContent = tokenLabel(token, view);
    span.title = `token ${n + 1}: id ${token.id}, bytes ${token.bytes}, ${token.shown}`;  // from 1, as the trace
    return span;
  }));
}

// 1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, ..., 21st
function ordinal(n) {
  const suffix = n % 100 >= 11 && n % 100 <= 13 ? "th" : { 1: "st", 2: "nd", 3: "rd" }[n % 10] || "th";
  return `${n}${suffix}`;
}

// a count and its noun, singular where the count is 1 ("1 token", "0 tokens"), as teach.counted writes them
function counted(count, noun) {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

function drawCount(count, encoding) {
  const perToken = count.bytes_per_token === null ? "-" : count.bytes_per_token.toFixed(2);
  $("count").textContent = `${counted(count.tokens, "token")} · ${counted(count.characters, "character")} · `
    + `${counted(count.bytes, "byte")} · ${perToken} bytes/token (${encoding})`;
}

function drawCompare(results, view) {
  $("compare-rows").replaceChildren(...results.map((result) => {
    const row = document.createElement("div");
    row.className = "compare-row";
    row.dataset.encoding = result.encoding;
    const head = document.createElement("div");
    const differing = result.tokens.filter((t) => t.differs).length;
    head.innerHTML = "<b></b> ";
    head.firstChild.textContent = result.encoding;
    head.append(`${counted(result.count.tokens, "token")}, ${differing} split differently`);
    const tokens = document.createElement("div");
    drawTokens(tokens, result.tokens, view, { marks: true });
    row.append(head, tokens);
    return row;
  }));
}

function drawNext(answer, rule) {
  $("model-name").textContent = `(${answer.model}, ${answer.context} tokens of context)`;
  $("next-tokens").replaceChildren(...answer.next.map((guess) => {
    const item = document.createElement("li");
    const code = document.createElement("code");
    code.textContent = guess.shown;
    const bar = document.createElement("span");
    bar.className = "bar";
    bar.style.width = `${Math.max(1, Math.round(guess.probability * 120))}px`;
    const button = document.createElement("button");  // a button: reached and pressed from the keyboard too
    button.type = "button";
    button.append(code, bar, `${(guess.probability * 100).toFixed(1)}%  id ${guess.id}`);
    item.append(button);
    item.dataset.tokenId = guess.id;
    if (guess.partial) {  // its bytes begin or end a character: the text would get U+FFFD, not this token
      button.disabled = true;
      button.title = "part of a character: its bytes are not text, so it cannot be added to the text";
    } else if (guess.special && rule !== "allowed") {  // its text would be plain text (or an error), not it
      button.disabled = true;
      button.title = "a special token: its text becomes this token only with special tokens allowed";
    }
    button.addEventListener("click", () => {
      $("text").value += guess.text;
      update();
    });
    return item;
  }));
}

// ---- the merge trace of a clicked token -------------------------------------------------------------------

function cell(row, text, tag = "td") {
  const element = document.createElement(tag);
  element.textContent = text;
  row.append(element);
}

function drawMerges(story) {
  const box = $("merge-trace");
  const index = story.token - story.first;  // which of the pre-token's tokens was clicked
  const token = story.tokens[index];
  const lines = [
    `Token ${story.token + 1}: id ${token.id}, ${token.shown}`,  // counted from 1, as the steps below are
    `Pre-token ${JSON.stringify(story.pre_token)}: bytes ${story.bytes}; ` +
      `${story.tokens.length} token${story.tokens.length > 1 ? "s" : ""}: ` +
      story.tokens.map((t) => `${t.shown} = ${t.id}`).join(", "),
  ];
  // a pre-token that is a token: tiktoken's shortcut takes it whole, and OpenAI's bpe() merges reach it too
  const reached = story.steps.length && story.steps[story.steps.length - 1].result === token.shown;
  if (story.added) {
    lines.push("An added token (the tokenizer.json's, not special): no merges build it; its text is always "
      + "taken whole, whatever the special-token rule.");
  } else if (story.special) {
    lines.push("A special token: no merges build it; the special-token rule turned its text into its id.");
  } else if (story.whole && reached) {
    lines.push("It is itself a token, so encode takes it whole (tiktoken's shortcut); the merges OpenAI's bpe() "
      + "makes, below, lead there too: each token is made by one merge of two earlier ones.");
  } else if (story.whole && story.steps.length) {
    lines.push("It is itself a token, so encode takes it whole; the merges alone, below, do not build it: "
      + "no merge of this vocabulary makes this token.");
  } else if (!story.bytes.includes(" ")) lines.push("A single byte: no merges.");
  else if (story.whole) {
    lines.push("It is itself a token, so encode takes it whole; no merge of this vocabulary builds it from its bytes.");
  } else if (!story.steps.length) lines.push("No merge applies: each byte is a token of its own.");
  const notes = lines.map((line) => {
    const p = document.createElement("p");
    p.textContent = line;
    return p;
  });
  const table = document.createElement("table");
  table.id = "merge-steps";
  const head = document.createElement("tr");
  ["step", "pair", "result", "merge #", "token id"].forEach((name) => cell(head, name, "th"));
  table.append(head);
  story.steps.forEach((step, n) => {
    const row = document.createElement("tr");
    row.className = step.builds === index ? "builds" : "other";
    row.dataset.merge = step.merge;
    cell(row, String(n + 1));
    cell(row, `${step.left} + ${step.right}`);
    cell(row, step.result);
    cell(row, String(step.merge));
    cell(row, String(step.id));
    table.append(row);
  });
  const counting = document.createElement("p");
  counting.className = "hint";
  counting.textContent = `Tokens count from 1, as merge steps do: token ${story.token + 1} is the text's `
    + `${ordinal(story.token + 1)} token (ids[${story.token}] in Python, which counts from 0).`;
  notes.push(counting);
  const built = story.steps.filter((step) => step.builds === index).length;
  if (story.steps.length) {
    const p = document.createElement("p");
    p.className = "hint";
    p.textContent = `${built} of the pre-token's ${counted(story.steps.length, "merge")} built this token `
      + "(highlighted). "
      + "merge #: the merge's place among the encoding's merges, from 0 (gpt2: merge #r is line r + 2 of "
      + "vocab.bpe, after its header); "
      + "token id: the token it makes, which tiktoken's encodings also rank merges by.";
    notes.push(p);
  }
  box.replaceChildren(...notes, ...(story.steps.length ? [table] : []));
}

// what a token's merge trace is of: the text's tokens, which a change of view alone keeps
function tokensOf(s) {
  return JSON.stringify([s.text, s.encoding, s.special]);
}

function markSelected(index) {
  document.querySelectorAll("#tokens .selected").forEach((e) => e.classList.remove("selected"));
  const span = document.querySelector(`#tokens [data-index="${index}"]`);
  if (span) {
    span.classList.add("selected");
    moveTokenFocus(span, false);
  }
}

async function explainToken(index) {
  const s = settings();
  const asked = ++state.explained;
  // the answer is of this text and this token: drop it if the text changed or another token was asked since
  // (and abort its request: update() does when the text changes, this when another token is asked about)
  const current = () => asked === state.explained && tokensOf(settings()) === tokensOf(s);
  if (state.explaining) state.explaining.controller.abort();
  const controller = new AbortController();
  state.explaining = { controller, of: tokensOf(s) };
  state.selected = { index, of: tokensOf(s) };
  markSelected(index);
  try {
    const story = await api("/api/explain", { text: s.text, encoding: s.encoding, special: s.special, token: index },
                            controller.signal);
    if (current()) drawMerges(story);
  } catch (e) {
    if (current()) $("merge-trace").textContent = e.message;
  }
}

// the keyboard among the text's tokens: arrows move, Home and End go to the ends, Enter or Space explains
function tokenKeys(event) {
  const span = event.target.closest("[data-index]");
  if (!span) return;
  const spans = $("tokens").children;
  const index = Number(span.dataset.index);
  const to = { ArrowRight: index + 1, ArrowDown: index + 1, ArrowLeft: index - 1, ArrowUp: index - 1, Home: 0,
               End: spans.length - 1 }[event.key];
  if (event.key === "Enter" || event.key === " ") explainToken(index);
  else if (to === undefined) return;
  else if (spans[to]) moveTokenFocus(spans[to], true);
  event.preventDefault();
}

function moveTokenFocus(span, focus) {
  $("tokens").querySelectorAll('[tabindex="0"]').forEach((e) => { e.tabIndex = -1; });
  span.tabIndex = 0;
  if (focus) span.focus();
}

// ---- one update: encode, then compare and next token ------------------------------------------------------

async function update() {
  const s = settings();
  const seq = ++state.seq;
  const current = () => seq === state.seq;  // a newer update has started: drop this one's answers
  // and abort its requests, which no one waits for now; a merge trace's too, unless it is of the same tokens
  if (state.updating) state.updating.abort();
  const controller = new AbortController();
  state.updating = controller;
  if (state.explaining && state.explaining.of !== tokensOf(s)) state.explaining.controller.abort();
  writeUrl(s);
  $("rule").textContent = `Special tokens ${RULES[s.special]}`;
  $("compare").hidden = !s.compare.length;
  try {
    const answer = await api("/api/encode", { text: s.text, encoding: s.encoding, special: s.special },
                             controller.signal);
    if (!current()) return;
    state.answer = answer;
    showError(state.linkMistakes);  // the link's mistakes, the first time; else no error
    state.linkMistakes = "";
    drawCount(answer.count, answer.encoding);
    drawTokens($("tokens"), answer.tokens, s.view, { keys: true });
    $("tokens").dataset.encoding = answer.encoding;
    if (state.selected && state.selected.of === tokensOf(s)) {  // the view alone changed: the trace stays true
      markSelected(state.selected.index);
    } else {
      state.selected = null;
      $("merge-trace").innerHTML = MERGES_HINT;
    }
  } catch (e) {
    if (!current()) return;
    showError(e.message);
    // what the panels drew is of an earlier text: gone with its tokens, not left to be read as this one's
    $("tokens").replaceChildren();
    $("count").textContent = "";
    $("compare-rows").replaceChildren();
    state.selected = null;
    $("merge-trace").innerHTML = MERGES_HINT;
    $("next-tokens").replaceChildren();
    $("model-name").textContent = "";
    document.body.dataset.ready = String(seq);
    return;
  }
  // a panel's own refusal (compare takes a shorter text than encode does) is said in that panel: the text's
  // tokens, drawn above, stay
  if (s.compare.length) {
    try {
      const compared = await api("/api/compare", { text: s.text, special: s.special,
                                                   encodings: [s.encoding, ...s.compare] }, controller.signal);
      if (current()) drawCompare(compared.results, s.view);
    } catch (e) {
      if (current()) panelError($("compare-rows"), e.message);
    }
  }
  if (state.model) {
    try {
      const next = await api("/api/next", { text: s.text, special: s.special }, controller.signal);
      if (current()) drawNext(next, s.special);
    } catch (e) {
      if (current()) panelError($("next-tokens"), e.message);
    }
  }
  if (current()) document.body.dataset.ready = String(seq);
}

// a panel's error line, in place of what the panel drew for an earlier text
function panelError(box, message) {
  const line = document.createElement(box.tagName === "OL" ? "li" : "p");
  line.className = "panel-error";
  line.textContent = message;
  box.replaceChildren(line);
}

function later() {
  clearTimeout(state.timer);
  state.timer = setTimeout(update, 120);
}

async function start() {
  let info;
  try {
    info = await api("/api/encodings");
  } catch (e) {
    showError(`the page cannot start: ${e.message}`);
    return;
  }
  state.names = info.encodings;
  state.model = info.model;
  state.specialDefault = info.special_default;
  $("special").value = info.special_default;
  const fill = (select, names, blank) => {
    select.replaceChildren(...(blank ? [""] : []).concat(names).map((name) => new Option(name || "(none)", name)));
  };
  fill($("encoding"), info.encodings);
  fill($("compare-1"), info.encodings);
  fill($("compare-2"), info.encodings, true);
  $("encoding").value = info.default;
  const others = info.compare.filter((name) => name !== info.default);
  $("compare-1").value = others[0] || info.encodings[0];
  $("compare-2").value = others[1] || "";
  $("next").hidden = !info.model;
  readUrl();
  $("text").addEventListener("input", later);
  for (const id of ["encoding", "special", "compare-on", "compare-1", "compare-2"]) {
    $(id).addEventListener("change", update);
  }
  document.querySelectorAll('input[name="view"]').forEach((radio) => radio.addEventListener("change", update));
  $("tokens").addEventListener("click", (event) => {
    const span = event.target.closest("[data-index]");
    if (span) explainToken(Number(span.dataset.index));
  });
  $("tokens").addEventListener("keydown", tokenKeys);
  update();
}

start();
