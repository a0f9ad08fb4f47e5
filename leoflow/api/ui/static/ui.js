// Leoflow web UI: live regions over server-sent events, actions with CSRF tokens,
// graph pan/zoom, log paging and following. No framework, no build step.
"use strict";

(function () {
  const $ = (sel, root) => (root || document).querySelector(sel);
  const $$ = (sel, root) => Array.from((root || document).querySelectorAll(sel));

  // ------------------------------------------------------------------ times
  // Every date is a <time datetime> in UTC; shown in the zone chosen in the header
  // (the browser's, UTC, or the DAG's), with the zone named.
  const prefs = window.leoflowPrefs;
  const formats = {};
  function formatIn(zone) {
    const key = zone || "";
    if (!formats[key]) {
      formats[key] = new Intl.DateTimeFormat(undefined, {
        year: "numeric", month: "short", day: "2-digit",
        hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short",
        timeZone: zone,
      });
    }
    return formats[key];
  }
  function localTimes(root) {
    $$("time[datetime]", root).forEach((el) => {
      const d = new Date(el.getAttribute("datetime"));
      if (isNaN(d)) return;
      const zone = prefs.timeZone(el);
      try {
        el.textContent = formatIn(zone).format(d);
      } catch (e) {
        el.textContent = formatIn(undefined).format(d);  // a zone this browser lacks
      }
      el.title = d.toISOString().replace(".000Z", "Z") + " (UTC)";
    });
    // A chart's axis: short labels, in the same zone.
    $$("text[data-at]", root).forEach((el) => {
      const d = new Date(el.dataset.at);
      if (isNaN(d)) return;
      const options = el.dataset.long === "1" ? { month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", hourCycle: "h23" }
        : { hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" };
      try {
        el.textContent = new Intl.DateTimeFormat(undefined, Object.assign({ timeZone: prefs.timeZone(el) }, options)).format(d);
      } catch (e) { /* keep the UTC label */ }
    });
  }
  // The UTC instant a wall-clock time in ``zone`` names (undefined: the browser's).
  function zonedToUtc(y, mo, d, h, mi, s, zone) {
    if (!zone) return new Date(y, mo - 1, d, h, mi, s);
    const wall = Date.UTC(y, mo - 1, d, h, mi, s);
    const offsetAt = (t) => {
      const parts = {};
      new Intl.DateTimeFormat("en-US", {
        timeZone: zone, hourCycle: "h23", year: "numeric", month: "2-digit", day: "2-digit",
        hour: "2-digit", minute: "2-digit", second: "2-digit",
      }).formatToParts(new Date(t)).forEach((p) => { parts[p.type] = Number(p.value); });
      return Date.UTC(parts.year, parts.month - 1, parts.day, parts.hour, parts.minute, parts.second) - t;
    };
    let t = wall - offsetAt(wall);
    t = wall - offsetAt(t);  // once more: the offset may differ on the other side of a DST change
    return new Date(t);
  }
  function zoneName(zone) {
    return zone || Intl.DateTimeFormat().resolvedOptions().timeZone || "browser time";
  }
  function showPrefs() {
    const zone = $("#pref-zone"), theme = $("#pref-theme");
    if (zone) zone.value = prefs.zone();
    if (theme) theme.value = prefs.theme();
    $$("[data-zone-label]").forEach((el) => { el.textContent = zoneName(prefs.timeZone(el)); });
  }
  document.addEventListener("change", (event) => {
    if (event.target.id === "pref-zone") {
      prefs.setZone(event.target.value);
      showPrefs();
      localTimes(document);
    } else if (event.target.id === "pref-theme") {
      prefs.setTheme(event.target.value);
    }
  });

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
    // The days are read in the zone the page shows dates in: from its first second
    // to its last.
    const zone = prefs.timeZone(form);
    const day = (value, end) => {
      if (!value) return null;
      const [y, mo, d] = value.split("-").map(Number);
      const t = end ? zonedToUtc(y, mo, d, 23, 59, 59, zone).getTime() + 999 : zonedToUtc(y, mo, d, 0, 0, 0, zone).getTime();
      return new Date(t).toISOString();
    };
    return {
      dag_id: form.dataset.dag, start: day(from, false), end: day(to, true),
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

  // -------------------------------------------------------------- filtering
  // A list filters as you type: its rows are fetched for the new query (debounced)
  // and the address follows, so a reload or a shared link shows the same list.
  let filterTimer = null, filterSeq = 0;
  async function refilter(form) {
    const params = new URLSearchParams(new FormData(form));
    Array.from(params.keys()).forEach((k) => { if (!params.get(k) || params.get(k) === "all") params.delete(k); });
    const url = form.getAttribute("action") + (params.toString() ? "?" + params : "");
    const seq = ++filterSeq;
    let response;
    try { response = await fetch(url, { credentials: "same-origin" }); } catch (e) { return; }
    if (seq !== filterSeq) return;  // a newer keystroke's answer wins
    const doc = new DOMParser().parseFromString(await response.text(), "text/html");
    if (!response.ok) {
      const detail = $(".error-detail", doc);
      flash(detail ? detail.textContent : "The filter could not be applied (" + response.status + ").", "error");
      return;
    }
    $$("[data-live]", form.closest("main") || document).forEach((here) => {
      const fresh = $('[data-live="' + here.dataset.live + '"]', doc);
      if (!fresh) return;
      here.innerHTML = fresh.innerHTML;
      localTimes(here);
    });
    history.replaceState(null, "", url);
    document.body.dataset.filtered = String(Number(document.body.dataset.filtered || 0) + 1);
    live.kick();
  }
  document.addEventListener("input", (event) => {
    const form = event.target.closest && event.target.closest("form[data-as-you-type]");
    if (!form) return;
    clearTimeout(filterTimer);
    filterTimer = setTimeout(() => refilter(form), event.target.matches("select") ? 0 : 250);
  });
  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (!form.matches("form[data-as-you-type]")) return;
    event.preventDefault();
    clearTimeout(filterTimer);
    refilter(form);
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
      // The graph takes the wheel and touch only once it is engaged (clicked, tapped or
      // tabbed into): before, they scroll the page as everywhere else.
      this.el.addEventListener("focus", () => this.el.classList.add("engaged"));
      this.el.addEventListener("focusout", (e) => {
        if (!this.el.contains(e.relatedTarget)) this.el.classList.remove("engaged");
      });
      this.el.addEventListener("pointerdown", (e) => {
        if (e.target.closest("a")) return;
        const engaged = this.engaged();
        if (!engaged) this.el.focus({ preventScroll: true });
        if (e.pointerType === "touch" && !engaged) return;  // the first tap engages only
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
      // The wheel pans an engaged graph; with Ctrl or ⌘ (or a pinch) it zooms around
      // the pointer, engaged or not; otherwise the page scrolls.
      this.el.addEventListener("wheel", (e) => {
        const zoom = e.ctrlKey || e.metaKey;
        if (!zoom && !this.engaged()) return;
        e.preventDefault();
        if (zoom) {
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
      // A node opens with Enter as with a click (an SVG link does not by itself).
      this.el.addEventListener("keydown", (e) => {
        const link = e.target.closest && e.target.closest("a.node-link");
        if (e.key !== "Enter" || !link) return;
        const href = link.getAttribute("href");
        if (!href) return;
        e.preventDefault();
        if (e.ctrlKey || e.metaKey) window.open(href, "_blank"); else location.href = href;
      });
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
    engaged() { return this.el.classList.contains("engaged"); },
    // Where the first and the last task are drawn (the layout's order): the first
    // view of any graph shows both.
    ends() {
      const nodes = $$("g.node", this.svg);
      const at = (g) => {
        const t = g && g.transform.baseVal.consolidate();
        return t ? { x: t.matrix.e, y: t.matrix.f } : null;
      };
      return { first: at(nodes[0]), last: at(nodes[nodes.length - 1]) };
    },
    fit() {
      const r = this.el.getBoundingClientRect();
      this.scale = Math.min(1, r.width / this.w, r.height / this.h);
      const { first, last } = this.ends();
      if (this.scale < 0.75 && first && last) {
        // Too big to show whole and readable: fit the width (every layer, so the
        // first and the last task) and the rows between the two, then centre them.
        const rows = Math.abs(last.y - first.y) + 60;
        this.scale = Math.max(0.1, Math.min(1, r.width / this.w, r.height / rows));
        this.x = Math.max(0, (r.width - this.w * this.scale) / 2);
        const mid = (Math.min(first.y, last.y) + Math.max(first.y, last.y) + 30) / 2;
        this.y = r.height / 2 - mid * this.scale;
      } else {
        this.x = Math.max(0, (r.width - this.w * this.scale) / 2);
        this.y = Math.max(0, (r.height - this.h * this.scale) / 2);
      }
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
        const words = task + ": " + (items[task] || state);
        $("title", g).textContent = words;
        link.setAttribute("aria-label", words);
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
  // The log is shown in numbered lines (#L120 links one), a page at a time: earlier
  // and later pages load on demand, a search runs on the server and lists lines.
  const logs = {
    el: null, start: 0, end: 0, nextLine: 1, size: 0, source: null, detached: false,
    params() {
      const d = this.el.dataset;
      return "dag=" + encodeURIComponent(d.dag) + "&run=" + encodeURIComponent(d.run) +
        "&task=" + encodeURIComponent(d.task) + "&try=" + encodeURIComponent(d.try);
    },
    async init() {
      this.el = $("#log");
      if (!this.el) return;
      $("#log-earlier").addEventListener("click", () => this.loadEarlier());
      $("#log-later").addEventListener("click", () => this.loadLater());
      $("#log-search").addEventListener("submit", (e) => { e.preventDefault(); this.search(); });
      $("#log-hits").addEventListener("click", (e) => {
        const link = e.target.closest("a[data-line]");
        if (!link) return;
        e.preventDefault();
        this.jump(Number(link.dataset.line));
      });
      const wrap = $("#log-wrap");
      wrap.checked = localStorage.getItem("leoflow.logWrap") !== "no";
      const wrapped = () => {
        $("#log-text").classList.toggle("wrap", wrap.checked);
        localStorage.setItem("leoflow.logWrap", wrap.checked ? "yes" : "no");
      };
      wrap.addEventListener("change", wrapped);
      wrapped();
      window.addEventListener("hashchange", () => { const n = this.hashLine(); if (n) this.jump(n); });
      // Try 0: no try yet; liveChanged loads the first one when it starts.
      if (this.el.dataset.try !== "0") {
        const n = this.hashLine();
        if (n) await this.jump(n); else await this.load();
      }
    },
    hashLine() {
      const m = /^#L(\d{1,15})$/.exec(location.hash);
      return m ? Number(m[1]) : 0;
    },
    async fetchPage(extra) {
      const response = await fetch("/ui/log?" + this.params() + extra, { credentials: "same-origin" });
      if (!response.ok) {
        let why = "";
        try { why = (await response.json()).detail || ""; } catch (e) { /* not JSON */ }
        $("#log-status").textContent = "Cannot read the log (" + response.status + ")" + (why ? ": " + why : ".");
        return null;
      }
      return response.json();
    },
    show(page) {
      const text = $("#log-text");
      text.innerHTML = page.html;
      this.start = page.start; this.end = page.end; this.nextLine = page.next_line; this.size = page.size;
      $("#log-download").href = "/ui/log/download?" + this.params();
      this.buttons();
    },
    async load() {
      const page = await this.fetchPage("");
      if (!page) return;
      this.detached = false;
      this.show(page);
      const text = $("#log-text");
      text.scrollTop = text.scrollHeight;
      this.describe();
      if (this.el.dataset.live === "yes") this.follow();
    },
    async jump(n) {
      const here = document.getElementById("L" + n);
      if (!here) {
        const page = await this.fetchPage("&line=" + n);
        if (!page) return;
        if (this.source) { this.source.close(); this.source = null; }
        this.detached = page.end < page.size || this.el.dataset.live === "yes";
        this.show(page);
        this.describe();
      }
      const line = document.getElementById("L" + n);
      if (!line) return;
      this.el.querySelectorAll(".ll.hit").forEach((el) => el.classList.remove("hit"));
      line.classList.add("hit");
      if (location.hash !== "#L" + n) history.replaceState(null, "", "#L" + n);
      const text = $("#log-text");
      text.scrollTop = line.offsetTop - text.offsetTop - text.clientHeight / 3;
    },
    describe() {
      const shown = this.end - this.start;
      $("#log-status").textContent = this.size === 0 ? "The log is empty." :
        (shown < this.size ? `Showing bytes ${this.start}–${this.end} of ${this.size}.` : `${this.size} bytes.`) +
        (this.source ? " Following live…" : "");
    },
    buttons() {
      $("#log-earlier").hidden = this.start === 0;
      $("#log-later").hidden = !this.detached;
    },
    async loadEarlier() {
      const page = await this.fetchPage("&before=" + this.start);
      if (!page) return;
      const text = $("#log-text");
      const height = text.scrollHeight;
      text.insertAdjacentHTML("afterbegin", page.html);
      text.scrollTop += text.scrollHeight - height;
      this.start = page.start; this.size = page.size;
      this.buttons();
      this.describe();
    },
    async loadLater() {
      const page = await this.fetchPage("&after=" + this.end);
      if (!page) return;
      $("#log-text").insertAdjacentHTML("beforeend", page.html);
      this.end = page.end; this.nextLine = page.next_line; this.size = page.size;
      if (this.end >= this.size) {
        this.detached = false;
        if (this.el.dataset.live === "yes") this.follow();
      }
      this.buttons();
      this.describe();
    },
    async search() {
      const q = $("#log-q").value;
      const words = $("#log-found-words");
      $("#log-found").hidden = false;
      $("#log-hits").innerHTML = "";
      if (!q.trim()) { words.textContent = "Type something to search for."; return; }
      words.textContent = "Searching…";
      const url = "/ui/log/search?" + this.params() + "&q=" + encodeURIComponent(q) +
        ($("#log-case").checked ? "&case=true" : "");
      const response = await fetch(url, { credentials: "same-origin" });
      let body = {};
      try { body = await response.json(); } catch (e) { /* not JSON */ }
      if (!response.ok) {
        const detail = Array.isArray(body.detail) ? body.detail.map((d) => d.msg).join("; ") : body.detail;
        words.textContent = "Cannot search: " + (detail || "the server answered " + response.status) + ".";
        return;
      }
      words.textContent = body.words;
      $("#log-hits").innerHTML = body.html;
    },
    follow() {
      if (this.source || this.detached) return;
      const text = $("#log-text");
      this.source = new EventSource("/ui/log/stream?" + this.params() + "&offset=" + this.end + "&line=" + this.nextLine);
      this.source.addEventListener("log", (e) => {
        const stick = text.scrollTop + text.clientHeight >= text.scrollHeight - 4;
        text.insertAdjacentHTML("beforeend", JSON.parse(e.data).html);
        const [end, line] = (e.lastEventId || "").split(":").map(Number);
        if (end) { this.end = end; this.nextLine = line; this.size = Math.max(this.size, end); }
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
        $(".log-tools", this.el).hidden = false;
        $("#log-found").hidden = true;
        $("#log-text").setAttribute("aria-label", "log of try " + latestTry);
        this.load();
        return;
      }
      this.el.dataset.live = isLive ? "yes" : "no";
      if (isLive && !this.source) this.follow();
    },
  };

  document.addEventListener("DOMContentLoaded", () => {
    showPrefs();
    localTimes(document);
    loadGraph();
    logs.init();
    live.start();
    window.addEventListener("resize", () => { if (graph.el) graph.fit(); });
  });
  window.leoflowUi = { live: live, graph: graph };
})();
