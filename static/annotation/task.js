// Task page: keyboard answering, autosave (server + this browser), per-item timers, inline
// validation, STARC step flows and the final submit. Plain JavaScript, no build step.
//
// The page never knows which answer is correct: it sends the labels it *shows* (A/B, a–d) and
// the server maps them back through the order it stored for this assignment.
(function () {
  "use strict";

  const cfg = JSON.parse(document.getElementById("task-config").textContent);
  const form = document.getElementById("task-form");
  const itemEls = Array.from(document.querySelectorAll("[data-item]"));
  const byId = {};
  itemEls.forEach((el) => { byId[el.dataset.item] = el; });
  const ids = itemEls.map((el) => el.dataset.item);
  const kind = cfg.kind;
  const mode = cfg.mode;
  const stepped = kind === "mc";
  // Whether each item is confirmed on its own: the server's rule (`confirms_per_item`), which
  // its confirm door keeps too; every other page submits its answers together.
  const confirmMode = !!cfg.confirm_per_item;
  const progressEl = document.getElementById("progress");
  const saveStatus = document.getElementById("save-status");
  const formErrors = document.getElementById("form-errors");
  const submitRow = document.getElementById("submit-row");
  const submitButton = document.getElementById("submit-button");

  // --- State ----------------------------------------------------------------------------------
  // answers: item id -> answer fields (shown labels); timers: item id -> {ms, started};
  // steps: pilot page per item ("guess" | "read" | "answer").
  let state = { answers: {}, timers: {}, steps: {}, current: 0, saved_at: "" };
  const confirmed = Object.assign({}, cfg.confirmed || {});
  const lockedGuesses = Object.assign({}, cfg.locked_guesses || {});

  function loadDraft() {
    let best = cfg.draft && cfg.draft.answers ? cfg.draft : null;
    // This assignment's copy in the browser, then (an MTurk HIT accepted again) the copy of the
    // assignment it replaced: the server does not hand those answers to a new assignment id,
    // so only the browser that typed them brings them back.
    for (const key of [cfg.storage_key, cfg.continues_storage_key]) {
      try {
        const local = key && JSON.parse(localStorage.getItem(key) || "null");
        if (local && local.answers && (!best || (local.saved_at || "") > (best.saved_at || ""))) {
          best = local;
        }
      } catch (e) { /* storage unavailable (third-party iframe): the server copy is enough */ }
    }
    if (best) {
      state.answers = best.answers || {};
      state.timers = best.timers || {};
      state.steps = best.steps || {};
      state.current = best.current || 0;
      state.saved_at = best.saved_at || "";
    }
  }

  // --- Timers ---------------------------------------------------------------------------------
  let activeId = null;
  let activeSince = null;

  function timer(id) {
    if (!state.timers[id]) state.timers[id] = { ms: 0, started: new Date().toISOString() };
    return state.timers[id];
  }
  function stopTimer() {
    if (activeId !== null && activeSince !== null) {
      timer(activeId).ms += Math.round(performance.now() - activeSince);
    }
    activeSince = null;
  }
  function setActive(id) {
    if (cfg.preview || id === activeId && activeSince !== null) return;
    stopTimer();
    activeId = id;
    timer(id);
    activeSince = document.hidden ? null : performance.now();
  }
  function spentMs(id) {
    const t = timer(id);
    let ms = t.ms;
    if (id === activeId && activeSince !== null) ms += performance.now() - activeSince;
    return Math.round(ms);
  }
  document.addEventListener("visibilitychange", () => {
    if (document.hidden) stopTimer();
    else if (activeId !== null) activeSince = performance.now();
  });

  // --- Reading and writing the form -----------------------------------------------------------
  function checkedValue(el, name) {
    const input = el.querySelector(`input[name="${name}"]:checked`);
    return input ? input.value : null;
  }

  function readItem(id) {
    const el = byId[id];
    const prev = state.answers[id] || {};
    if (kind === "likert") {
      const v = checkedValue(el, `score-${id}`);
      return { score: v === null ? null : parseInt(v, 10) };
    }
    if (kind === "ab") {
      const difficult = checkedValue(el, `difficult-${id}`);
      const prefs = {};
      el.querySelectorAll("input[data-aspect]:checked").forEach((i) => { prefs[i.dataset.aspect] = i.value; });
      return {
        shown_choice: checkedValue(el, `choice-${id}`),
        difficult: difficult === null ? null : difficult === "yes",
        justification: el.querySelector("textarea").value,
        aspects: Array.from(el.querySelectorAll(`input[name="aspects-${id}"]:checked`)).map((i) => i.value),
        aspect_preferences: prefs,
      };
    }
    // Multiple choice.
    if (mode === "validity") {
      return {
        validity: checkedValue(el, `validity-${id}`),
        shown_choices: Array.from(el.querySelectorAll(`input[name="opt-${id}"]:checked`)).map((i) => i.value),
      };
    }
    const chosen = checkedValue(el, `opt-${id}`);
    if (mode === "pilot") {
      const step = pilotStep(id);
      if (step === "guess") return Object.assign({}, prev, { shown_guess: chosen });
      if (step === "answer") return Object.assign({}, prev, { shown_choice: chosen });
      return prev;
    }
    return { shown_choice: chosen };
  }

  // Nothing chosen, ticked or written for an item (every field null, empty or absent).
  function unanswered(a) {
    return !a || Object.values(a).every((v) => v === null || v === undefined || v === "" ||
      (Array.isArray(v) ? v.length === 0 : typeof v === "object" && Object.keys(v).length === 0));
  }

  function setChecked(el, name, value) {
    el.querySelectorAll(`input[name="${name}"]`).forEach((i) => { i.checked = i.value === value; });
  }

  function applyItem(id, a) {
    const el = byId[id];
    if (!a) return;
    if (kind === "likert") {
      if (a.score) setChecked(el, `score-${id}`, String(a.score));
    } else if (kind === "ab") {
      if (a.shown_choice) setChecked(el, `choice-${id}`, a.shown_choice);
      if (a.difficult !== null && a.difficult !== undefined) setChecked(el, `difficult-${id}`, a.difficult ? "yes" : "no");
      el.querySelector("textarea").value = a.justification || "";
      el.querySelectorAll(`input[name="aspects-${id}"]`).forEach((i) => { i.checked = (a.aspects || []).includes(i.value); });
      Object.entries(a.aspect_preferences || {}).forEach(([aspect, v]) => {
        el.querySelectorAll("input[data-aspect]").forEach((i) => { if (i.dataset.aspect === aspect) i.checked = i.value === v; });
      });
      updateCount(el);
    } else if (mode === "validity") {
      if (a.validity) setChecked(el, `validity-${id}`, a.validity);
      el.querySelectorAll(`input[name="opt-${id}"]`).forEach((i) => { i.checked = (a.shown_choices || []).includes(i.value); });
      syncValidity(el);
    } else if (mode === "pilot") {
      const step = pilotStep(id);
      const v = step === "guess" ? a.shown_guess : step === "answer" ? a.shown_choice : null;
      if (v) setChecked(el, `opt-${id}`, v);
    } else if (a.shown_choice) {
      setChecked(el, `opt-${id}`, a.shown_choice);
    }
  }

  // --- Validation (the server checks the same rules again) ------------------------------------
  function problems(id) {
    const a = readItem(id);
    const out = [];
    if (kind === "likert") {
      if (!a.score) out.push(`Pick a score from 1 to ${cfg.scale_size}.`);
    } else if (kind === "ab") {
      if (!a.shown_choice) out.push("Choose the better answer (A or B).");
      if (a.difficult === null) out.push("Say whether the choice was difficult (yes or no).");
      const n = written(a.justification);
      if (n < cfg.justification_min_length) {
        const note = padded(a.justification) ? `; a character repeated ${cfg.justification_padding_run} or more times in a row counts once` : "";
        out.push(`Write a justification of at least ${cfg.justification_min_length} characters (${n} so far${note}).`);
      }
    } else if (mode === "validity") {
      if (!a.validity) out.push("Say whether the question has one correct answer, more than one, or none.");
      else if (a.validity === "one" && a.shown_choices.length !== 1) out.push("Pick the one correct answer.");
      else if (a.validity === "several" && a.shown_choices.length < 2) out.push("Mark all the correct answers (at least two).");
    } else if (mode === "pilot" && pilotStep(id) === "guess") {
      if (!a.shown_guess) out.push("Choose your best guess (a, b, c or d).");
    } else if (!a.shown_choice) {
      out.push("Choose an answer (a, b, c or d).");
    }
    return out;
  }

  function showError(id, messages) {
    const el = byId[id];
    const err = el.querySelector(".error");
    if (messages && messages.length) {
      err.textContent = messages.join(" ");
      err.hidden = false;
      el.classList.add("has-error");
    } else {
      err.textContent = "";
      err.hidden = true;
      el.classList.remove("has-error");
    }
  }

  function itemName(id) {
    const legend = byId[id].querySelector("legend, h2");
    return legend ? legend.firstChild.textContent.trim() : `Item ${id}`;
  }

  function showSummary(badIds, extra) {
    formErrors.textContent = "";
    if (!badIds.length && !extra) { formErrors.hidden = true; return; }
    const p = document.createElement("p");
    p.textContent = extra || (badIds.length === 1 ? "1 item needs attention:" : `${badIds.length} items need attention:`);
    formErrors.appendChild(p);
    if (badIds.length) {
      const ul = document.createElement("ul");
      badIds.forEach((id) => {
        const li = document.createElement("li");
        const link = document.createElement("a");
        link.href = `#item-${id}`;
        link.textContent = itemName(id);
        link.addEventListener("click", (ev) => { ev.preventDefault(); focusItem(id); });
        li.appendChild(link);
        ul.appendChild(li);
      });
      formErrors.appendChild(ul);
    }
    formErrors.hidden = false;
    formErrors.setAttribute("tabindex", "-1");
    formErrors.focus();
  }

  // --- Progress -------------------------------------------------------------------------------
  function isDone(id) {
    if (confirmed[id]) return true;
    return problems(id).length === 0;
  }
  const submitHint = document.querySelector("#submit-row .hint");
  function updateProgress() {
    const n = ids.filter(isDone).length;
    progressEl.textContent = `${n} of ${ids.length} answered`;
    // The hint under Submit follows the answers (it said "All items must be answered." after
    // everything was answered).
    if (submitHint) {
      const left = ids.length - n;
      submitHint.textContent = left > 0
        ? `${left} item${left === 1 ? "" : "s"} left to answer before you can submit.`
        : "Everything is answered: ready to submit.";
    }
  }

  // Comprehension checks whose "That answer was not right" this page has shown (the server's
  // list on loading, then each confirm or submit told so): an answer sent again before that is
  // the first attempt resent (its reply lost on the way back), one sent after is the second.
  const retrySeen = new Set(Object.keys(cfg.retry || {}));

  // --- Autosave -------------------------------------------------------------------------------
  let saveTimer = null;
  let retryTimer = null;
  // Each autosave carries its number in this page load's series, so one held up on the way
  // and arriving after a newer one is not stored over it (the server keeps the newest).
  const saveSeries = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
  let saveCount = 0;

  function snapshot() {
    ids.forEach((id) => {
      if (!confirmed[id]) state.answers[id] = Object.assign({}, state.answers[id] || {}, readItem(id));
      if (state.timers[id]) state.timers[id].ms_now = spentMs(id);
    });
    state.saved_at = new Date().toISOString();
    return state;
  }

  // Whether this browser holds a copy of the answers (storage can be refused, e.g. in a
  // third-party iframe): what the page says about where unsaved answers are kept follows it.
  let keptInBrowser = false;
  function saveLocal() {
    try {
      if (cfg.storage_key) localStorage.setItem(cfg.storage_key, JSON.stringify(state));
      keptInBrowser = Boolean(cfg.storage_key);
    } catch (e) { keptInBrowser = false; }
  }

  function forgetLocal() {
    for (const key of [cfg.storage_key, cfg.continues_storage_key]) {
      try { if (key) localStorage.removeItem(key); } catch (e) { /* ignore */ }
    }
  }

  // A request that did not get through: no answer (status 0), the server busy or down (5xx:
  // a busy database, a proxy's 502/503/504) or asking to slow down (429). Nothing the page
  // sent was refused for what it holds, so it is said to be kept, and where, and that sending
  // it again is safe (the server never stores an answer twice). The text of a 5xx is not shown:
  // the busy database's names the setup advice meant for the researcher, a proxy's is HTML.
  class Unreached extends Error {
    constructor(status, retryAfter) {
      super(`request not answered (${status})`);
      this.status = status;
      this.retryAfter = retryAfter;
    }
  }
  function unreachedReason(err) {
    const status = err instanceof Unreached ? err.status : 0;
    if (status === 429) return "The server asked for a pause (too many requests at once)";
    if (status >= 500) return `The server is busy or unavailable just now (error ${status})`;
    if (status) return `The server did not take the request (error ${status})`;
    if (err && err.name === "AbortError") return "Connection problem: the server did not answer in time";
    return "Connection problem: the server could not be reached";
  }
  function keptWhere() {
    return keptInBrowser ? "on this page and in this browser" : "on this page (keep it open)";
  }
  function retryDelayMs(err) {
    const seconds = err instanceof Unreached ? err.retryAfter : 0;
    return Math.min(Math.max(seconds || 5, 1), 60) * 1000;
  }

  // A request left unanswered this long is given up, as a lost connection (a stalled mobile
  // connection otherwise kept "Submitting…" on the button for good); sending it again is safe.
  const REQUEST_TIMEOUT_MS = 45 * 1000;
  function post(url, body) {
    const controller = typeof AbortController === "function" ? new AbortController() : null;
    const timeout = controller ? setTimeout(() => controller.abort(), REQUEST_TIMEOUT_MS) : null;
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-Assignment-Token": cfg.token },
      body: JSON.stringify(body),
      signal: controller ? controller.signal : undefined,
    }).finally(() => clearTimeout(timeout)).then((r) => {
      if (r.status === 429 || r.status >= 500) {
        throw new Unreached(r.status, parseInt(r.headers.get("Retry-After") || "", 10));
      }
      return r.json().catch(() => { throw new Unreached(r.status, 0); })
        .then((data) => ({ status: r.status, data }));
    });
  }

  function scheduleSave() {
    if (cfg.preview) return;
    snapshot();
    saveLocal();
    updateProgress();
    saveStatus.textContent = "Saving…";
    clearTimeout(saveTimer);
    saveTimer = setTimeout(saveNow, 600);
  }

  function saveNow() {
    clearTimeout(retryTimer);
    snapshot();
    saveLocal();
    saveCount += 1;
    const sequence = { series: saveSeries, n: saveCount };
    return post(cfg.endpoints.autosave, { draft: state, sequence }).then(({ status, data }) => {
      if (data.ok) {
        lastSaved = Date.now();
        saveStatus.classList.remove("offline");
        saveStatus.textContent = "All answers saved";
        saveStatus.classList.remove("offline");
      } else if (status === 409 || status === 403) {
        saveStatus.textContent = data.message;
        saveStatus.classList.add("offline");
      } else if (status === 400 || status === 413) {
        // Refused, not lost (e.g. a control character pasted into a text box, or a text too
        // large to send): say which field; retrying the same draft would only be refused again.
        const all = (data.errors && data.errors.__all__) || [];
        saveStatus.textContent = all.length ? all.join(" ") : data.message;
      } else {
        throw new Unreached(status, 0);
      }
    }).catch((err) => {
      const delay = retryDelayMs(err);
      saveStatus.textContent = `${unreachedReason(err)}. Nothing is lost: your answers are kept ` +
        `${keptWhere()}; saving again in ${Math.round(delay / 1000)} s.`;
      saveStatus.classList.add("offline");
      retryTimer = setTimeout(saveNow, delay);
    });
  }

  // --- Heartbeat ------------------------------------------------------------------------------
  // Reading a long passage changes no input, and an assignment idle for the project's timeout
  // loses its items to other workers. While the page is visible (and someone is at it) an
  // autosave every few minutes keeps it; a tab left open and untouched for long stops pinging.
  const HEARTBEAT_MS = 2 * 60 * 1000;
  const IDLE_LIMIT_MS = 30 * 60 * 1000;
  let lastSaved = Date.now();
  let lastActivity = Date.now();
  ["keydown", "pointerdown", "pointermove", "wheel", "scroll", "touchstart"].forEach((type) => {
    window.addEventListener(type, () => { lastActivity = Date.now(); }, { passive: true, capture: true });
  });
  function heartbeat() {
    if (cfg.preview || document.visibilityState !== "visible") return;
    if (Date.now() - lastActivity > IDLE_LIMIT_MS) return;
    if (Date.now() - lastSaved < HEARTBEAT_MS * 0.9) return; // an autosave just did it
    saveNow();
  }

  // --- A/B helpers ----------------------------------------------------------------------------
  // Characters as the server counts them (annotation/domain/answers.py justification_length):
  // code points, so an emoji is one (String.length says two), characters that draw nothing
  // (zero-width spaces, direction marks, variation selectors) not at all, every blank character (the server's
  // BLANK_CLASS, `justification_blank` in the config: white space, braille blank, Hangul
  // fillers) as a space, trimmed, and a run of one character repeated
  // `justification_padding_run` times or more ("aaaa…", padding) once.
  // Category Cf and the server's other characters that draw nothing (`IGNORABLE_CLASS`,
  // `justification_invisible` in the config: variation selectors and the like).
  const FORMAT = /\p{Cf}/u;
  const IGNORABLE = cfg.justification_invisible ? new RegExp(cfg.justification_invisible, "u") : null;
  const INVISIBLE = { test: (c) => FORMAT.test(c) || (IGNORABLE !== null && IGNORABLE.test(c)) };
  const BLANK = new RegExp(cfg.justification_blank || "\\s", "gu");
  function visibleRuns(text) {
    const kept = Array.from(text || "").filter((c) => !INVISIBLE.test(c)).join("").replace(BLANK, " ");
    const chars = Array.from(kept.replace(/^ +| +$/g, ""));
    const runs = [];
    for (let i = 0; i < chars.length;) {
      let j = i;
      while (j < chars.length && chars[j] === chars[i]) j++;
      runs.push(j - i);
      i = j;
    }
    return runs;
  }
  function written(text) {
    const run = cfg.justification_padding_run;
    return visibleRuns(text).reduce((n, len) => n + (len < run ? len : 1), 0);
  }
  function padded(text) {
    return visibleRuns(text).some((len) => len >= cfg.justification_padding_run);
  }

  function updateCount(el) {
    const ta = el.querySelector("textarea");
    const count = el.querySelector(".count");
    if (!ta || !count) return;
    const n = written(ta.value);
    const min = cfg.justification_min_length;
    count.textContent = min ? `${n} / ${min} characters${n < min ? ` — ${min - n} more needed` : " — enough"}` : `${n} characters`;
    count.classList.toggle("short", n < min);
  }

  // --- Multiple choice: steps, confirmation, feedback -----------------------------------------
  function syncValidity(el) {
    const id = el.dataset.item;
    const v = checkedValue(el, `validity-${id}`);
    const options = el.querySelector(".options");
    options.hidden = v === "none";
    if (v === "none") el.querySelectorAll(`input[name="opt-${id}"]`).forEach((i) => { i.checked = false; });
    el.querySelector(".options-legend").textContent =
      v === "several" ? "Mark every correct answer" : v === "one" ? "Select the correct answer" : "Mark the correct answer(s)";
  }

  function pilotStep(id) {
    if (confirmed[id]) return "done";
    if (!lockedGuesses[id]) return "guess";
    return state.steps[id] === "answer" ? "answer" : "read";
  }

  function setInputsDisabled(el, disabled) {
    el.querySelectorAll("input").forEach((i) => { i.disabled = disabled; });
  }

  function renderPilot(id) {
    const el = byId[id];
    const step = pilotStep(id);
    const label = el.querySelector("[data-step-label]");
    const paragraph = el.querySelector(".paragraph");
    const questionBlock = el.querySelector(".question-block");
    const read = el.querySelector(".pilot-read");
    const confirmBtn = el.querySelector(".confirm");
    const legend = el.querySelector(".options-legend");
    read.hidden = step !== "read";
    questionBlock.hidden = step === "read";
    paragraph.hidden = step !== "read";
    if (step === "guess") {
      label.textContent = "Page 1 of 3: guess the answer without the paragraph.";
      legend.textContent = "Your best guess";
      confirmBtn.textContent = "Confirm guess";
    } else if (step === "read") {
      label.textContent = "Page 2 of 3: read the paragraph.";
      if (!paragraph.textContent.trim()) fetchParagraph(id);
    } else if (step === "answer") {
      // Hidden means gone: page 3 holds no copy of the paragraph (as after a reload), so
      // neither find-in-page, reader modes nor assistive tools can bring it back.
      paragraph.textContent = "";
      label.textContent = "Page 3 of 3: answer the question (the paragraph is hidden).";
      legend.textContent = "Your answer";
      confirmBtn.textContent = "Confirm answer";
    } else {
      paragraph.textContent = "";
      label.textContent = "Answer saved.";
    }
  }

  // The reading page after a reload asks the server for the paragraph again; until it comes
  // the page says why it is not there and tries again (it said "Loading the paragraph…" for
  // good after one failed request).
  let paragraphTimer = null;
  function fetchParagraph(id) {
    const a = state.answers[id] || {};
    clearTimeout(paragraphTimer);
    setParagraph(byId[id], "Loading the paragraph…");
    post(cfg.endpoints.confirm, { item: Number(id), step: "guess", answer: { shown_guess: a.shown_guess || lockedGuesses[id] } })
      .then(({ status, data }) => {
        if (data.ok) setParagraph(byId[id], data.paragraph);
        else setParagraph(byId[id], data.message || `The paragraph could not be loaded (${status}). Reload the page.`);
      })
      .catch((err) => {
        const delay = retryDelayMs(err);
        setParagraph(byId[id], `${unreachedReason(err)}, so the paragraph could not be loaded. ` +
          `Your guess is saved. Trying again in ${Math.round(delay / 1000)} s…`);
        paragraphTimer = setTimeout(() => { if (ids[state.current] === id && pilotStep(id) === "read") fetchParagraph(id); }, delay);
      });
  }

  function setParagraph(el, text) {
    const paragraph = el.querySelector(".paragraph");
    paragraph.textContent = "";
    (text || "").split(/\n\s*\n/).forEach((chunk) => {
      const p = document.createElement("p");
      p.textContent = chunk;
      paragraph.appendChild(p);
    });
  }

  function renderFeedback(id) {
    const el = byId[id];
    const fb = confirmed[id];
    if (!fb) return;
    setInputsDisabled(el, true);
    const box = el.querySelector(".feedback");
    box.textContent = "";
    if (fb.chosen_shown && mode !== "validity") {
      // The answer the server kept: another tab or window confirmed this item first, so the
      // option this page had selected was not stored; show the kept one checked, and say so.
      const mine = checkedValue(el, `opt-${id}`);
      if (mine && mine !== fb.chosen_shown) fb.kept_earlier = true;
      setChecked(el, `opt-${id}`, fb.chosen_shown);
    }
    if (fb.kept_earlier) {
      const kept = document.createElement("p");
      kept.className = "kept-earlier";
      kept.textContent = `This item was already answered in another tab or window: that answer, (${fb.chosen_shown}), is the one kept.`;
      box.appendChild(kept);
    }
    const p = document.createElement("p");
    if (fb.refused) {
      // A late confirm refused because others filled the item: settled, nothing to answer.
      p.textContent = `No longer needed. ${fb.refused}`;
      box.className = "feedback settled";
    } else if (fb.is_correct === true) {
      p.textContent = "Correct!";
      box.className = "feedback right";
    } else if (fb.is_correct === false) {
      p.textContent = `Not quite. The correct answer is (${fb.correct_shown}).`;
      box.className = "feedback wrong";
    } else {
      p.textContent = "Your answer is saved.";
      box.className = "feedback";
    }
    box.appendChild(p);
    if (fb.correct_shown) {
      el.querySelectorAll(".option").forEach((o) => o.classList.toggle("correct", o.dataset.label === fb.correct_shown));
    }
    if (fb.paragraph && (mode === "guessing")) {
      setParagraph(el, fb.paragraph);
      el.querySelector(".paragraph").hidden = false;
    }
    box.hidden = false;
    const confirmBtn = el.querySelector(".confirm");
    if (confirmBtn) confirmBtn.hidden = true;
    const next = el.querySelector(".next");
    const last = ids.indexOf(id) === ids.length - 1;
    if (next) next.hidden = last;
  }

  function showStep(index, focus) {
    state.current = Math.max(0, Math.min(index, ids.length - 1));
    ids.forEach((id, i) => { byId[id].hidden = i !== state.current; });
    const id = ids[state.current];
    const el = byId[id];
    if (mode === "pilot") renderPilot(id);
    if (confirmed[id]) renderFeedback(id);
    const prev = el.querySelector(".prev");
    if (prev) prev.hidden = state.current === 0;
    const last = state.current === ids.length - 1;
    const next = el.querySelector(".next");
    if (mode === "validity" && next) next.hidden = last;
    if (submitRow) {
      const ready = mode === "validity" ? last : ids.every((x) => confirmed[x]);
      submitRow.hidden = !ready;
    }
    setActive(id);
    updateProgress();
    if (focus) {
      const heading = el.querySelector("h2");
      const target = confirmed[id] ? (el.querySelector(".next:not([hidden])") || submitButton) :
        (el.querySelector(".read-done:not([hidden])") || el.querySelector("input:checked") || el.querySelector("input"));
      (target && target.offsetParent !== null ? target : heading).focus();
    }
  }

  function confirmCurrent() {
    const id = ids[state.current];
    const el = byId[id];
    if (confirmed[id]) return;
    const msgs = problems(id);
    showError(id, msgs);
    if (msgs.length) { const first = el.querySelector("input:not([disabled])"); if (first) first.focus(); return; }
    const answer = Object.assign(readItem(id), {
      time_spent_ms: spentMs(id), client_started_at: timer(id).started, retry_seen: retrySeen.has(id),
    });
    const step = mode === "pilot" && pilotStep(id) === "guess" ? "guess" : "final";
    const button = el.querySelector(".confirm");
    button.disabled = true;
    post(cfg.endpoints.confirm, { item: Number(id), step, answer, client_meta: clientMeta() }).then(({ status, data }) => {
      button.disabled = false;
      if (!data.ok) {
        if (data.return_study) { askToReturn(data.return_study); return; }
        showError(id, (data.errors && data.errors[id]) || [data.message || `Not saved (${status}).`]);
        return;
      }
      const fb = data.feedback || {};
      if (fb.retry) {
        // Prolific comprehension check answered wrong once: one more attempt, no answer shown.
        retrySeen.add(id);
        showError(id, [fb.message]);
        el.querySelectorAll(`input[name="opt-${id}"]`).forEach((i) => { i.checked = false; });
        scheduleSave();
        return;
      }
      if (fb.return_study) { askToReturn(fb.return_study); return; }
      showError(id, []);
      if (step === "guess") {
        lockedGuesses[id] = data.guess_shown;
        state.answers[id] = Object.assign({}, state.answers[id] || {}, { shown_guess: data.guess_shown });
        state.steps[id] = "read";
        setParagraph(el, data.paragraph);
        el.querySelectorAll(`input[name="opt-${id}"]`).forEach((i) => { i.checked = false; });
        renderPilot(id);
        el.querySelector(".read-done").focus();
      } else {
        confirmed[id] = data.feedback || { confirmed: true };
        renderFeedback(id);
        if (mode === "pilot") renderPilot(id);
        showStep(state.current, true);
      }
      scheduleSave();
    }).catch((err) => {
      button.disabled = false;
      showError(id, [`${unreachedReason(err)}. Nothing is lost: your answer is kept ${keptWhere()}. ` +
        "Confirm again in a moment."]);
    });
  }

  // Prolific: a comprehension check failed twice. No completion code; nothing more to do here.
  function askToReturn(message) {
    forgetLocal();
    // Nothing more to save: the preview flag stops the autosave, the heartbeat and the keys.
    cfg.preview = true;
    clearTimeout(saveTimer);
    clearTimeout(retryTimer);
    saveStatus.textContent = "";
    form.hidden = true;
    const box = document.getElementById("return-notice");
    box.querySelector("p").textContent = message;
    box.hidden = false;
    box.focus();
  }

  // --- Submit ---------------------------------------------------------------------------------
  // One id per page load, stored with each judgment this page sends: when a submit's answer is
  // lost on the way back and the next press finds the assignment submitted, the server says
  // whether it was this page's own press (go on) or another tab's (these answers not stored).
  const pageId = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
  function clientMeta() {
    return { viewport: `${window.innerWidth}x${window.innerHeight}`, tz_offset_min: new Date().getTimezoneOffset(), page_id: pageId };
  }

  function submitAll() {
    if (cfg.preview) return;
    const pending = ids.filter((id) => !confirmed[id]);
    const bad = [];
    pending.forEach((id) => { const m = problems(id); showError(id, m); if (m.length) bad.push(id); });
    if (bad.length) {
      showSummary(bad);
      if (stepped) showStep(ids.indexOf(bad[0]), false);
      return;
    }
    showSummary([]);
    snapshot();
    saveLocal();
    const answers = pending.map((id) => Object.assign({ item: Number(id) }, readItem(id), {
      time_spent_ms: spentMs(id), client_started_at: timer(id).started, retry_seen: retrySeen.has(id),
    }));
    submitButton.disabled = true;
    submitButton.textContent = "Submitting…";
    post(cfg.endpoints.submit, { answers, client_meta: clientMeta() }).then(({ status, data }) => {
      if (data.ok) {
        forgetLocal();
        // The page's own URL carries turkSubmitTo for MTurk; the server's copy is the fallback.
        const done = cfg.complete_url || data.complete_url;
        // A late submit: items other workers filled after the timeout were not stored. Say
        // which before leaving the page.
        const refused = Object.keys(data.refused || {}).filter((k) => byId[k]);
        const stopHere = (message) => {
          showSummary(refused, message);
          const link = document.createElement("a");
          link.href = done;
          link.className = "continue";
          link.textContent = "Continue";
          formErrors.appendChild(link);
          if (submitRow) submitRow.hidden = true;
        };
        if (refused.length) {
          refused.forEach((k) => showError(k, data.refused[k]));
          stopHere(`${data.refused[refused[0]][0]} Your other answers are saved.`);
          return;
        }
        if (data.already_submitted && data.submitted_by_this_page) {
          // This page's earlier press was stored; only its answer was lost on the way back.
          window.location.assign(done);
          return;
        }
        if (data.already_submitted) {
          // Another tab or window submitted first: say so, never "saved", for these answers.
          stopHere("This assignment was already submitted (in another tab or window, or by " +
                   "an earlier press of Submit). The answers stored are those of that first " +
                   "submission; the answers on this page were not stored.");
          return;
        }
        window.location.assign(done);
        return;
      }
      if (data.return_study) { askToReturn(data.return_study); return; }
      if (data.retry) {
        // Prolific comprehension check answered wrong once: cleared, as the confirm clears it,
        // so the second attempt is a choice made again, not the same Submit pressed twice.
        Object.keys(data.errors || {}).filter((k) => byId[k]).forEach((k) => {
          retrySeen.add(k);
          // The graded answer only (a score, an A/B pick, a choice), not the item's other
          // questions (difficulty, validity).
          byId[k].querySelectorAll(`input[name="score-${k}"], input[name="choice-${k}"], input[name="opt-${k}"]`)
            .forEach((i) => { i.checked = false; });
        });
        scheduleSave();
      }
      submitButton.disabled = false;
      submitButton.textContent = "Submit";
      const errs = data.errors || {};
      const badIds = Object.keys(errs).filter((k) => byId[k]);
      badIds.forEach((k) => showError(k, errs[k]));
      showSummary(badIds, badIds.length ? null : (errs.__all__ || [data.message || `Not submitted (${status}).`]).join(" "));
    }).catch((err) => {
      submitButton.disabled = false;
      submitButton.textContent = "Submit";
      showSummary([], `${unreachedReason(err)}. Nothing is lost: your answers are kept ${keptWhere()}. ` +
        "Press Submit again in a moment; pressing it again never stores anything twice.");
    });
  }

  // --- Focus and keys -------------------------------------------------------------------------
  function itemOf(node) {
    const el = node && node.closest ? node.closest("[data-item]") : null;
    return el ? el.dataset.item : null;
  }

  function focusItem(id) {
    const el = byId[id];
    if (stepped) { showStep(ids.indexOf(id), true); return; }
    const target = el.querySelector("input:checked") || el.querySelector("input, textarea");
    el.scrollIntoView({ block: "center" });
    if (target) target.focus();
  }

  function isTyping(target) {
    return target && (target.tagName === "TEXTAREA" || (target.tagName === "INPUT" && /^(text|search|email|number)$/.test(target.type)));
  }

  document.addEventListener("keydown", (ev) => {
    if (cfg.preview || ev.altKey || ev.ctrlKey || ev.metaKey || isTyping(ev.target)) return;
    const key = ev.key.toLowerCase();
    if (kind === "likert") {
      const n = parseInt(key, 10);
      if (!(n >= 1 && n <= cfg.scale_size)) return;
      // A digit scores the item that has the focus; with the focus on the page itself, the
      // item last worked on (or the first one open). With the focus on a control outside the
      // items (the submit button after the last score) it scores nothing: a repeated key
      // there silently changed the last item's score.
      const focused = document.activeElement;
      const outside = focused && focused !== document.body && !itemOf(focused);
      if (outside) return;
      const id = itemOf(focused) || activeId || ids.find((x) => !isDone(x)) || ids[0];
      const el = byId[id];
      const radio = el.querySelector(`input[name="score-${id}"][value="${n}"]`);
      if (!radio) return;
      ev.preventDefault();
      radio.checked = true;
      radio.dispatchEvent(new Event("change", { bubbles: true }));
      const nextId = ids[ids.indexOf(id) + 1];
      if (nextId) focusItem(nextId); else submitButton.focus();
    } else if (kind === "ab") {
      if (key !== "a" && key !== "b") return;
      const id = itemOf(document.activeElement) || activeId || ids[0];
      const radio = byId[id].querySelector(`input[name="choice-${id}"][value="${key.toUpperCase()}"]`);
      if (!radio) return;
      ev.preventDefault();
      radio.checked = true;
      radio.focus();
      radio.dispatchEvent(new Event("change", { bubbles: true }));
    } else if (stepped) {
      const id = ids[state.current];
      const el = byId[id];
      if (confirmed[id] || (mode === "pilot" && pilotStep(id) === "read")) return;
      if (["a", "b", "c", "d"].includes(key)) {
        const input = el.querySelector(`input[name="opt-${id}"][value="${key}"]`);
        if (!input || input.disabled || input.closest("[hidden]")) return;
        ev.preventDefault();
        input.checked = input.type === "checkbox" ? !input.checked : true;
        input.focus();
        input.dispatchEvent(new Event("change", { bubbles: true }));
      } else if (mode === "validity" && ["1", "2", "3"].includes(key)) {
        const value = { 1: "one", 2: "several", 3: "none" }[key];
        const input = el.querySelector(`input[name="validity-${id}"][value="${value}"]`);
        ev.preventDefault();
        input.checked = true;
        input.focus();
        input.dispatchEvent(new Event("change", { bubbles: true }));
      }
    }
  });

  // Enter inside a step confirms it (or goes on) instead of submitting the whole form.
  form.addEventListener("keydown", (ev) => {
    if (!stepped || ev.key !== "Enter" || ev.target.tagName === "BUTTON" || ev.target.tagName === "TEXTAREA") return;
    ev.preventDefault();
    const el = byId[ids[state.current]];
    const action = el.querySelector(".confirm:not([hidden])") || el.querySelector(".read-done:not([hidden])") ||
      el.querySelector(".next:not([hidden])") || (submitRow && !submitRow.hidden ? submitButton : null);
    if (action && action.offsetParent !== null) action.click();
  });

  form.addEventListener("submit", (ev) => { ev.preventDefault(); submitAll(); });

  form.addEventListener("focusin", (ev) => { const id = itemOf(ev.target); if (id) setActive(id); });

  form.addEventListener("change", (ev) => {
    const id = itemOf(ev.target);
    if (!id) return;
    setActive(id);
    const el = byId[id];
    if (mode === "validity" && ev.target.name === `validity-${id}`) syncValidity(el);
    if (el.classList.contains("has-error")) showError(id, problems(id));
    scheduleSave();
  });

  form.addEventListener("input", (ev) => {
    const id = itemOf(ev.target);
    if (!id || ev.target.tagName !== "TEXTAREA") return;
    updateCount(byId[id]);
    if (byId[id].classList.contains("has-error")) showError(id, problems(id));
    scheduleSave();
  });

  form.addEventListener("click", (ev) => {
    const button = ev.target.closest("button");
    if (!button || !stepped) return;
    if (button.classList.contains("confirm")) confirmCurrent();
    else if (button.classList.contains("next")) {
      const id = ids[state.current];
      if (mode === "validity") {
        const msgs = problems(id);
        showError(id, msgs);
        if (msgs.length) return;
      }
      showStep(state.current + 1, true);
      scheduleSave();
    } else if (button.classList.contains("prev")) {
      showStep(state.current - 1, true);
    } else if (button.classList.contains("read-done")) {
      const id = ids[state.current];
      state.steps[id] = "answer";
      renderPilot(id);
      const first = byId[id].querySelector("input");
      if (first) first.focus();
      scheduleSave();
    }
  });

  // --- Start ----------------------------------------------------------------------------------
  if (cfg.preview) {
    form.querySelectorAll("input, textarea, button").forEach((i) => { i.disabled = true; });
    if (stepped) ids.forEach((id) => { byId[id].hidden = false; });
    return;
  }
  loadDraft();
  ids.forEach((id) => applyItem(id, confirmed[id] ? null : state.answers[id]));
  Object.entries(cfg.retry || {}).forEach(([id, message]) => { if (byId[id]) showError(id, [message]); });
  document.querySelectorAll(".ab-item").forEach(updateCount);
  if (stepped) {
    const firstOpen = confirmMode ? ids.findIndex((id) => !confirmed[id]) : -1;
    showStep(firstOpen >= 0 ? firstOpen : Math.min(state.current, ids.length - 1), false);
    ids.forEach((id) => { if (confirmed[id]) renderFeedback(id); });
  } else {
    updateProgress();
  }
  window.addEventListener("pagehide", () => { snapshot(); saveLocal(); });
  // Two tabs of one batch: each autosave sends the whole page, so a tab's save carried the
  // items answered only in the other tab as empty, and once both were closed those answers
  // were gone from the draft. The other tab's copy in this browser (a `storage` event) fills
  // the items still empty here; an item answered here is never overwritten. Pages that confirm
  // item by item store each answer on the server at once and are left alone.
  window.addEventListener("storage", (ev) => {
    if (cfg.preview || confirmMode || !cfg.storage_key || ev.key !== cfg.storage_key || !ev.newValue) return;
    let other = null;
    try { other = JSON.parse(ev.newValue); } catch (e) { return; }
    let filled = false;
    Object.entries((other && other.answers) || {}).forEach(([id, a]) => {
      if (!byId[id] || unanswered(a) || !unanswered(readItem(id))) return;
      applyItem(id, a);
      filled = true;
    });
    if (filled) scheduleSave();
  });
  setInterval(heartbeat, HEARTBEAT_MS);
  document.addEventListener("visibilitychange", heartbeat);
  window.addEventListener("online", () => { if (saveStatus.classList.contains("offline")) saveNow(); });
})();
