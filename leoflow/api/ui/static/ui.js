// Leoflow web UI: live regions over server-sent events, actions with CSRF tokens,
// graph pan/zoom, log paging and following. No framework, no build step.
"use strict";

(function () {
  const $ = (sel, root) => (root || document).querySelector(sel);
  const $$ = (sel, root) => Array.from((root || document).querySelectorAll(sel));

  // ------------------------------------------------------------------ times
  const fmt = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "short", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short",
  });
  function localTimes(root) {
    $$("time[datetime]", root).forEach((el) => {
      const d = new Date(el.getAttribute("datetime"));
      if (!isNaN(d)) el.textContent = fmt.format(d);
    });
  }

  // ------------------------------------------------------------------ flash
  let flashTimer = null;
  function flash(text, kind) {
    const el = $("#flash");
    if (!el) return;
    el.textContent = text;
    el.className = "flash " + (kind || "ok");
    el.hidden = false;
    clearTimeout(flashTimer);
    flashTimer = setTimeout(() => { el.hidden = true; }, kind === "error" ? 12000 : 5000);
  }

  // ------------------------------------------------------------------ calls
  function csrf() {
    const m = $('meta[name="csrf-token"]');
    return m ? m.getAttribute("content") : "";
  }
  async function post(url, body) {
    const response = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf() },
      body: JSON.stringify(body || {}),
    });
    let data = null;
    try { data = await response.json(); } catch (e) { data = null; }
    if (!response.ok) {
      const detail = data && data.detail ? (typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail)) : response.statusText;
      const error = new Error(detail);
      error.status = response.status;
      throw error;
    }
    return data;
  }

  const ACTION_DONE = {
    pause: () => "Paused.",
    unpause: () => "Unpaused.",
    cancel: () => "Run cancelled.",
    clear: (d) => d.pending
      ? "Clear of " + d.cleared.join(", ") + " requested: the scheduler stops a running try and runs it again."
      : "Cleared " + d.cleared.join(", ") + ": it runs again.",
    backfill_cancel: (d) => "Backfill #" + d.pk + " cancelled.",
    mark: (d) => (d.pending ? "Requested: the scheduler marks " : "Marked ") + d.state + ": "
      + d.marked.join(", ") + (d.reopened.length ? "; decided again by their trigger rules: " + d.reopened.join(", ") : "") + ".",
    clear_failed: (d) => (d.pending ? "Clear requested of " : "Cleared ") + d.cleared.join(", ") + ": they run again.",
  };

  document.addEventListener("click", async (event) => {
    const button = event.target.closest("[data-action]");
    if (!button) return;
    const action = button.dataset.action;
    if (action === "logout") {
      try { await post("/ui/logout", {}); } catch (e) { /* the cookie is cleared anyway */ }
      location.href = "/login";
      return;
    }
    if (button.dataset.confirm && !window.confirm(button.dataset.confirm)) return;
    const downstream = $("#clear-downstream");
    const body = {
      dag_id: button.dataset.dag || null,
      run_id: button.dataset.run || null,
      task_id: button.dataset.task || null,
    };
    if (action === "clear") body.downstream = !!(downstream && downstream.checked);
    if (action === "mark") {
      body.state = button.dataset.state;
      body.downstream = !!($("#mark-downstream") || {}).checked;
      body.upstream = !!($("#mark-upstream") || {}).checked;
    }
    // What the page showed: the server says so if the run or task changed since.
    if (button.dataset.seenRun) body.seen_run = button.dataset.seenRun;
    if (button.dataset.seenTask) body.seen_task = button.dataset.seenTask;
    if (button.dataset.backfill) body.backfill = Number(button.dataset.backfill);
    button.disabled = true;
    try {
      const data = await post("/ui/actions/" + action, body);
      flash((ACTION_DONE[action] || (() => "Done."))(data), "ok");
      live.kick();
    } catch (e) {
      flash(e.message, "error");
    } finally {
      button.disabled = false;
    }
  });

  // --------------------------------------------------------- dialogs, trigger
  document.addEventListener("click", (event) => {
    const opener = event.target.closest("[data-open]");
    if (opener) {
      const dialog = document.getElementById(opener.dataset.open);
      if (dialog) {
        dialog.showModal();
        validateConf();
        const first = $("textarea, input", dialog);
        if (first) first.focus();
      }
    }
    const closer = event.target.closest("[data-close]");
    if (closer) document.getElementById(closer.dataset.close).close();
  });

  function parseConf() {
    const area = $("#conf");
    const text = area.value.trim() || "{}";
    let value;
    try {
      value = JSON.parse(text);
    } catch (e) {
      return { error: "Not valid JSON: " + e.message };
    }
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
      return { error: "The conf must be a JSON object, such as {\"date\": \"2024-01-31\"}." };
    }
    return { value: value };
  }
  function validateConf() {
    const area = $("#conf");
    if (!area) return true;
    const result = parseConf();
    const error = $("#conf-error");
    error.textContent = result.error || "";
    area.setAttribute("aria-invalid", result.error ? "true" : "false");
    $("#trigger-submit").disabled = !!result.error;
    return !result.error;
  }
  document.addEventListener("input", (event) => {
    if (event.target.id === "conf") validateConf();
    if (event.target.dataset.param !== undefined) paramsToConf();
  });
  document.addEventListener("change", (event) => {
    if (event.target.dataset.param !== undefined) paramsToConf();
  });
  // The params form writes each field, typed, into the conf the JSON editor holds; a
  // field that does not parse is named (the server checks again: conf.<name>).
  function paramValue(field) {
    const type = field.dataset.type, raw = field.value.trim();
    if (field.type === "checkbox") return { value: field.checked };
    if (field.tagName === "SELECT") return raw === "" ? {} : { value: JSON.parse(raw) };
    if (raw === "") return {};
    if (type === "integer" || type === "number") {
      const n = Number(raw);
      if (raw === "" || !Number.isFinite(n) || (type === "integer" && !Number.isInteger(n))) {
        return { error: "expected " + (type === "integer" ? "an integer" : "a number") + ", got “" + raw + "”" };
      }
      if (field.dataset.min !== undefined && n < Number(field.dataset.min)) return { error: "expected at least " + field.dataset.min };
      if (field.dataset.max !== undefined && n > Number(field.dataset.max)) return { error: "expected at most " + field.dataset.max };
      return { value: n };
    }
    if (type === "array" || type === "object") {
      let v;
      try { v = JSON.parse(raw); } catch (e) { return { error: "not valid JSON: " + e.message }; }
      const ok = type === "array" ? Array.isArray(v) : v !== null && typeof v === "object" && !Array.isArray(v);
      return ok ? { value: v } : { error: "expected " + (type === "array" ? "a JSON list" : "a JSON object") };
    }
    return { value: raw };
  }
  function paramsToConf() {
    const current = parseConf();
    const conf = current.value || {};
    const problems = [];
    $$("[data-param]").forEach((field) => {
      const got = paramValue(field);
      field.setAttribute("aria-invalid", got.error ? "true" : "false");
      if (got.error) problems.push(field.dataset.param + ": " + got.error);
      else if ("value" in got) conf[field.dataset.param] = got.value;
      else delete conf[field.dataset.param];
    });
    $("#conf").value = JSON.stringify(conf, null, 2);
    validateConf();
    if (problems.length) {
      $("#conf-error").textContent = problems.join("; ");
      $("#trigger-submit").disabled = true;
    }
  }
  // ---------------------------------------------------------------- backfill
  function backfillBody(form, dryRun) {
    const from = $("#bf-from").value, to = $("#bf-to").value, max = $("#bf-max").value.trim();
    return {
      dag_id: form.dataset.dag, start: from || null, end: to || null,  // a day: the API reads it as all of that day
      reprocess_failed: $("#bf-reprocess").checked, max_active_runs: max ? Number(max) : null,
      dry_run: dryRun,
    };
  }
  function showPreview(plan) {
    const box = $("#bf-preview");
    const dates = plan.logical_dates || [];
    box.textContent = "";
    const head = document.createElement("p");
    head.id = "bf-preview-count";
    head.textContent = dates.length + " run(s) would be created, at most " + plan.max_active_runs +
      " active at a time" + (plan.skipped.length ? "; " + plan.skipped.length + " point(s) skipped (they have a run)." : ".");
    box.appendChild(head);
    const list = document.createElement("ol");
    dates.slice(0, 500).forEach((d) => {
      const li = document.createElement("li");
      const t = document.createElement("time");
      t.setAttribute("datetime", d); t.title = d + " (UTC)"; t.textContent = d;
      li.appendChild(t); list.appendChild(li);
    });
    box.appendChild(list);
    if (dates.length > 500) box.appendChild(document.createTextNode("… and " + (dates.length - 500) + " more"));
    localTimes(box);
    box.hidden = false;
  }
  document.addEventListener("click", async (event) => {
    if (!event.target.closest("#bf-dry-run")) return;
    const form = $("#backfill-form");
    $("#bf-error").textContent = "";
    try {
      showPreview(await post("/ui/actions/backfill_create", backfillBody(form, true)));
    } catch (e) {
      $("#bf-preview").hidden = true;
      $("#bf-error").textContent = e.message;
    }
  });

  document.addEventListener("submit", async (event) => {
    const form = event.target;
    if (form.id === "backfill-form") {
      event.preventDefault();
      $("#bf-error").textContent = "";
      try {
        const data = await post("/ui/actions/backfill_create", backfillBody(form, false));
        location.href = "/dags/" + encodeURIComponent(form.dataset.dag) + "/backfills/" + data.pk;
      } catch (e) {
        $("#bf-error").textContent = e.message;
      }
    } else if (form.id === "trigger-form") {
      event.preventDefault();
      if (!validateConf()) return;
      const runId = $("#new-run-id").value.trim();
      try {
        const data = await post("/ui/actions/trigger", {
          dag_id: form.dataset.dag, conf: parseConf().value, new_run_id: runId || null,
        });
        form.closest("dialog").close();
        flash("Triggered run " + data.run_id + ".", "ok");
        live.kick();
      } catch (e) {
        $("#conf-error").textContent = e.message;
        // The server names the param (conf.<name>: ...): point at its field.
        const named = /^conf\.([A-Za-z0-9_]+):/.exec(e.message);
        const field = named && $(`[data-param="${named[1]}"]`);
        if (field) { field.setAttribute("aria-invalid", "true"); field.focus(); }
      }
    } else if (form.id === "login-form") {
      event.preventDefault();
      try {
        await post("/ui/login", { token: $("#token").value });
        location.href = form.dataset.next || "/";
      } catch (e) {
        $("#login-error").textContent = e.status === 401 ? "That token is not valid." : e.message;
      }
    } else if (form.classList.contains("resize")) {
      event.preventDefault();
      const input = $("input", form);
      try {
        await post("/ui/actions/pool_resize", { name: form.dataset.pool, slots: Number(input.value) });
        input.blur();
        flash("Pool " + form.dataset.pool + " now has " + input.value + " slots.", "ok");
        live.kick();
      } catch (e) { flash(e.message, "error"); }
    } else if (form.id === "pool-add") {
      event.preventDefault();
      try {
        const data = await post("/ui/actions/pool_create", {
          name: $("#pool-name").value, slots: Number($("#pool-slots").value), description: $("#pool-desc").value,
        });
        flash("Pool " + data.name + " added.", "ok");
        form.reset();
        live.kick();
      } catch (e) { flash(e.message, "error"); }
    }
  });

  // ------------------------------------------------------------------ graph
  const graph = {
    el: null, svg: null, vp: null, scale: 1, x: 0, y: 0, icons: {},
    init() {
      this.el = $("#graph");
      if (!this.el) return;
      this.svg = $("svg", this.el);
      this.vp = $("g.viewport", this.svg);
      this.icons = JSON.parse(this.el.dataset.icons || "{}");
      this.w = Number(this.el.dataset.width);
      this.h = Number(this.el.dataset.height);
      this.svg.removeAttribute("viewBox");
      this.svg.setAttribute("width", "100%");
      this.svg.setAttribute("height", "100%");
      // A small graph gets a small frame; a big one the frame's CSS maximum, and pan/zoom.
      const max = this.el.getBoundingClientRect().height;
      this.el.style.height = Math.min(max, Math.max(160, this.h + 24)) + "px";
      this.fit();
      let drag = null;
      this.el.addEventListener("pointerdown", (e) => {
        if (e.target.closest("a")) return;
        drag = { x: e.clientX - this.x, y: e.clientY - this.y };
        this.el.setPointerCapture(e.pointerId);
        this.el.classList.add("dragging");
      });
      this.el.addEventListener("pointermove", (e) => {
        if (!drag) return;
        this.x = e.clientX - drag.x; this.y = e.clientY - drag.y; this.apply();
      });
      const end = () => { drag = null; this.el.classList.remove("dragging"); };
      this.el.addEventListener("pointerup", end);
      this.el.addEventListener("pointercancel", end);
      // The wheel scrolls the graph; with Ctrl (or a pinch) it zooms around the pointer.
      this.el.addEventListener("wheel", (e) => {
        e.preventDefault();
        if (e.ctrlKey || e.metaKey) {
          const r = this.el.getBoundingClientRect();
          this.zoom(e.deltaY < 0 ? 1.15 : 1 / 1.15, e.clientX - r.left, e.clientY - r.top);
        } else {
          this.x -= e.deltaX; this.y -= e.deltaY; this.apply();
        }
      }, { passive: false });
      $$("[data-zoom]").forEach((b) => b.addEventListener("click", () => {
        const r = this.el.getBoundingClientRect();
        if (b.dataset.zoom === "fit") this.fit();
        else this.zoom(b.dataset.zoom === "in" ? 1.25 : 0.8, r.width / 2, r.height / 2);
      }));
      // Keep a focused node in view when tabbing through the graph.
      this.el.addEventListener("focusin", (e) => {
        const g = e.target.closest("a.node-link");
        if (!g) return;
        const node = $("g.node", g);
        const t = node.transform.baseVal.consolidate();
        if (!t) return;
        const nx = t.matrix.e * this.scale + this.x, ny = t.matrix.f * this.scale + this.y;
        const r = this.el.getBoundingClientRect();
        if (nx < 0 || ny < 0 || nx > r.width - 100 || ny > r.height - 30) {
          this.x = r.width / 3 - t.matrix.e * this.scale;
          this.y = r.height / 2 - t.matrix.f * this.scale;
          this.apply();
        }
      });
    },
    fit() {
      const r = this.el.getBoundingClientRect();
      this.scale = Math.min(1, r.width / this.w, r.height / this.h);
      // Below this the labels are unreadable: fit the width instead and scroll.
      if (this.scale < 0.75) this.scale = Math.max(0.6, Math.min(1, r.width / this.w));
      this.x = Math.max(0, (r.width - this.w * this.scale) / 2);
      this.y = Math.max(0, (r.height - this.h * this.scale) / 2);
      this.apply();
    },
    zoom(f, cx, cy) {
      const s = Math.max(0.1, Math.min(3, this.scale * f));
      this.x = cx - (cx - this.x) * (s / this.scale);
      this.y = cy - (cy - this.y) * (s / this.scale);
      this.scale = s;
      this.apply();
    },
    apply() {
      this.vp.setAttribute("transform", `translate(${this.x},${this.y}) scale(${this.scale})`);
    },
    pending: null,
    // nodes: the nodes whose state changed ({task: state}); mapped: their item counts.
    update(nodes, runId, mapped) {
      if (!this.el) this.el = $("#graph");
      if (!this.el) return;
      if (!this.svg) {  // a big DAG's graph still loading: applied once it is drawn
        const p = this.pending || (this.pending = { nodes: {}, mapped: {}, run: null });
        Object.assign(p.nodes, nodes); Object.assign(p.mapped, mapped || {});
        p.run = runId || p.run;
        return;
      }
      if (!this.links) {
        this.links = {};
        $$("a.node-link", this.svg).forEach((link) => { this.links[link.dataset.task] = link; });
      }
      const dag = this.el.dataset.dag;
      const items = mapped || {};
      Object.keys(nodes).forEach((task) => {
        const link = this.links[task];
        if (!link) return;
        const state = nodes[task] || "none";
        const g = $("g.node", link);
        if (g.dataset.state !== state) {
          g.setAttribute("class", "node s-" + state);
          g.dataset.state = state;
          $("text.ic", g).textContent = this.icons[state] || "?";
        }
        // A mapped task's node counts its items and opens their list.
        $("title", g).textContent = task + ": " + (items[task] || state);
        if (runId) {
          const run = "/dags/" + encodeURIComponent(dag) + "/runs/" + encodeURIComponent(runId);
          link.setAttribute("href", items[task] ? run + "?mapped=" + encodeURIComponent(task)
            : run + "/tasks/" + encodeURIComponent(task));
        }
      });
      if (runId) this.el.dataset.run = runId;
    },
  };

  // ------------------------------------------------------------------- live
  const live = {
    source: null, delay: 1000, timer: null, last: {}, known: null,
    status(text, ok) {
      const el = $("#live");
      if (!el) return;
      $(".live-text", el).textContent = text;
      el.classList.toggle("down", !ok);
    },
    start() {
      if (!$("[data-live]") && !$("#graph")) return;
      const path = location.pathname + location.search;
      // What this page holds (digests): the server sends only what differs from it.
      if (this.known === null) {
        const meta = $('meta[name="live-known"]');
        try { this.known = meta ? JSON.parse(meta.getAttribute("content")) : {}; } catch (e) { this.known = {}; }
      }
      const source = new EventSource("/ui/events?path=" + encodeURIComponent(path) +
        "&known=" + encodeURIComponent(JSON.stringify(this.known)));
      this.source = source;
      source.addEventListener("open", () => { this.delay = 1000; this.status("live", true); });
      source.addEventListener("hello", (e) => {
        const data = JSON.parse(e.data);
        const meta = $('meta[name="csrf-token"]');
        if (meta && data.csrf) meta.setAttribute("content", data.csrf);
      });
      source.addEventListener("login", () => { location.href = "/login?next=" + encodeURIComponent(path); });
      source.addEventListener("gone", (e) => {
        flash(JSON.parse(e.data).detail, "error");
        source.close();
      });
      source.addEventListener("update", (e) => this.apply(JSON.parse(e.data)));
      // A newer stream of this session (another tab) took this one's place: stay still.
      source.addEventListener("superseded", () => {
        source.close();
        this.status("paused (live in a newer tab; reload to resume)", false);
      });
      source.addEventListener("error", () => {
        this.status("reconnecting…", false);
        // The browser retries by itself unless the server answered an error: then we do.
        if (source.readyState === EventSource.CLOSED) this.retry();
      });
    },
    retry() {
      if (this.source) this.source.close();
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.start(), this.delay);
      this.delay = Math.min(this.delay * 2, 15000);
    },
    kick() {
      // After an action: reconnect at once so the change shows without waiting a tick.
      if (this.source) { this.source.close(); this.source = null; }
      this.delay = 1000;
      this.start();
    },
    apply(data) {
      const active = document.activeElement;
      const focusId = active && active.id;
      Object.entries(data.regions || {}).forEach(([name, html]) => {
        const region = $(`[data-live="${name}"]`);
        if (!region) return;
        if (region.contains(active) && active.matches("input, textarea, select")) return;
        if (this.last[name] === html) return;
        this.last[name] = html;
        region.innerHTML = html;
        localTimes(region);
      });
      if (focusId && document.activeElement !== active) {
        const again = document.getElementById(focusId);
        if (again) again.focus();
      }
      if (data.cells) this.patchCells(data.cells);
      if (data.digests) this.known = data.digests;
      if (data.nodes) graph.update(data.nodes, data.run, data.mapped);
      if (data.log_live !== undefined) logs.liveChanged(data.log_live, data.latest_try);
      document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
    },
  };

  // The grid's squares that changed: [run, task, <td>…</td>], in place.
  live.patchCells = function (cells) {
    const table = $('[data-live="grid"] table.grid');
    if (!table) return;
    const cols = {}, rows = {};
    $$("thead th.run-col", table).forEach((th, i) => { cols[th.dataset.run] = i + 1; });
    $$("tbody tr", table).forEach((tr) => { rows[tr.cells[0].textContent] = tr; });
    cells.forEach(([run, task, html]) => {
      const tr = rows[task], i = cols[run];
      if (tr && i !== undefined && tr.cells[i]) tr.cells[i].outerHTML = html;
    });
  };
  // A big DAG's graph comes after the page has painted.
  async function loadGraph() {
    const el = $("#graph");
    if (!el || !el.dataset.lazy) { graph.init(); return; }
    try {
      const response = await fetch(el.dataset.lazy, { credentials: "same-origin" });
      if (!response.ok) throw new Error(response.status + " " + response.statusText);
      el.innerHTML = await response.text();
      delete el.dataset.lazy;
      graph.init();
      const p = graph.pending;
      graph.pending = null;
      if (p) graph.update(p.nodes, p.run, p.mapped);
    } catch (e) {
      const note = $(".graph-loading", el);
      if (note) note.textContent = "The graph could not be loaded (" + e.message + "); reload to try again.";
    }
  }

  // -------------------------------------------------------------------- logs
  const logs = {
    el: null, start: 0, end: 0, source: null,
    params() {
      const d = this.el.dataset;
      return "dag=" + encodeURIComponent(d.dag) + "&run=" + encodeURIComponent(d.run) +
        "&task=" + encodeURIComponent(d.task) + "&try=" + encodeURIComponent(d.try);
    },
    async init() {
      this.el = $("#log");
      if (!this.el) return;
      $("#log-earlier").addEventListener("click", () => this.loadEarlier());
      // Try 0: no try yet; liveChanged loads the first one when it starts.
      if (this.el.dataset.try !== "0") await this.load();
    },
    async load() {
      const text = $("#log-text");
      const response = await fetch("/ui/log?" + this.params(), { credentials: "same-origin" });
      if (!response.ok) { $("#log-status").textContent = "Cannot read the log (" + response.status + ")."; return; }
      const page = await response.json();
      text.innerHTML = page.html;
      this.start = page.start; this.end = page.end;
      this.earlier();
      text.scrollTop = text.scrollHeight;
      this.describe(page.size);
      if (this.el.dataset.live === "yes") this.follow();
    },
    describe(size) {
      const shown = this.end - this.start;
      $("#log-status").textContent = size === 0 ? "The log is empty." :
        (this.start > 0 ? `Showing the last ${shown} of ${size} bytes.` : `${size} bytes.`) +
        (this.source ? " Following live…" : "");
    },
    earlier() { $("#log-earlier").hidden = this.start === 0; },
    async loadEarlier() {
      const response = await fetch("/ui/log?" + this.params() + "&before=" + this.start, { credentials: "same-origin" });
      if (!response.ok) return;
      const page = await response.json();
      const text = $("#log-text");
      const height = text.scrollHeight;
      text.insertAdjacentHTML("afterbegin", page.html);
      text.scrollTop += text.scrollHeight - height;
      this.start = page.start;
      this.earlier();
      this.describe(page.size);
    },
    follow() {
      if (this.source) return;
      const text = $("#log-text");
      this.source = new EventSource("/ui/log/stream?" + this.params() + "&offset=" + this.end);
      this.source.addEventListener("log", (e) => {
        const stick = text.scrollTop + text.clientHeight >= text.scrollHeight - 4;
        text.insertAdjacentHTML("beforeend", JSON.parse(e.data).html);
        this.end = Number(e.lastEventId || this.end);
        if (stick) text.scrollTop = text.scrollHeight;
        $("#log-status").textContent = `${this.end} bytes. Following live…`;
      });
      this.source.addEventListener("superseded", () => {
        this.source.close(); this.source = null;
        $("#log-status").textContent = `${this.end} bytes. Paused: followed in a newer tab.`;
      });
      this.source.addEventListener("end", () => {
        this.source.close(); this.source = null;
        $("#log-status").textContent = `${this.end} bytes. The try is over.`;
      });
      this.source.addEventListener("error", () => {
        if (this.source && this.source.readyState === EventSource.CLOSED) {
          this.source = null;
          setTimeout(() => this.follow(), 2000);
        }
      });
    },
    liveChanged(isLive, latestTry) {
      if (!this.el) return;
      const current = Number(this.el.dataset.try);
      if (this.el.dataset.pinned !== "yes" && latestTry > current) {
        // A new try started (a retry, or the task was cleared): show and follow it.
        if (this.source) { this.source.close(); this.source = null; }
        this.el.dataset.try = String(latestTry);
        this.el.dataset.live = isLive ? "yes" : "no";
        $("#log-text").innerHTML = "";
        $("#log-text").hidden = false;
        $("#log-text").setAttribute("aria-label", "log of try " + latestTry);
        this.load();
        return;
      }
      if (isLive && !this.source) this.follow();
    },
  };

  document.addEventListener("DOMContentLoaded", () => {
    localTimes(document);
    loadGraph();
    logs.init();
    live.start();
    window.addEventListener("resize", () => { if (graph.el) graph.fit(); });
  });
  window.leoflowUi = { live: live, graph: graph };
})();
