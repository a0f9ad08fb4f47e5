// The viewer's display choices, kept in this browser: the theme and the time zone
// every date is shown in. Loaded in <head>, before the page paints, so a dark page
// never flashes light first.
"use strict";

(function () {
  const KEYS = { theme: "leoflow.theme", zone: "leoflow.zone" };
  const THEMES = ["auto", "light", "dark"];
  const ZONES = ["browser", "utc", "dag"];

  function read(key, allowed) {
    let value = null;
    try { value = window.localStorage.getItem(key); } catch (e) { value = null; }
    return allowed.indexOf(value) >= 0 ? value : allowed[0];
  }
  function write(key, value) {
    try { window.localStorage.setItem(key, value); } catch (e) { /* private mode: this page only */ }
  }

  const darkQuery = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;
  function applyTheme() {
    const chosen = read(KEYS.theme, THEMES);
    const dark = chosen === "dark" || (chosen === "auto" && !!darkQuery && darkQuery.matches);
    document.documentElement.dataset.theme = dark ? "dark" : "light";
  }
  applyTheme();
  if (darkQuery && darkQuery.addEventListener) darkQuery.addEventListener("change", applyTheme);

  window.leoflowPrefs = {
    theme: () => read(KEYS.theme, THEMES),
    zone: () => read(KEYS.zone, ZONES),
    setTheme(value) { write(KEYS.theme, value); applyTheme(); },
    setZone(value) { write(KEYS.zone, value); },
    // The IANA zone a date is shown in (undefined: the browser's own). The DAG's
    // zone comes from the element (a list of DAGs) or the page (one DAG's pages).
    timeZone(el) {
      const zone = read(KEYS.zone, ZONES);
      if (zone === "utc") return "UTC";
      if (zone === "dag") {
        const own = el && el.closest ? el.closest("[data-tz]") : null;
        const tz = (own && own.dataset.tz) || (document.body && document.body.dataset.dagTz);
        return tz || undefined;
      }
      return undefined;
    },
  };
})();
