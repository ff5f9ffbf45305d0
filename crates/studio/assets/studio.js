// iterion studio: live updates. The server renders every fragment (escaped there); this script
// only fetches same-origin fragments and swaps them in, and never builds HTML from run data.
"use strict";
(function () {
  function debounce(fn, ms) {
    let t = null;
    return function () {
      if (t) clearTimeout(t);
      t = setTimeout(fn, ms);
    };
  }
  function swap(target, url) {
    return fetch(url, { credentials: "same-origin", headers: { "X-Studio-Fragment": "1" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null) return;
        const open = Array.from(target.querySelectorAll("details[open][id]")).map(function (d) { return d.id; });
        target.innerHTML = html;
        open.forEach(function (id) {
          const d = document.getElementById(id);
          if (d) d.open = true;
        });
        target.dispatchEvent(new CustomEvent("studio:updated", { bubbles: true }));
      });
  }
  function live(target) {
    const src = target.getAttribute("data-live");
    const fragment = target.getAttribute("data-fragment");
    if (!src || !fragment || !window.EventSource) return;
    const refresh = debounce(function () { swap(target, fragment); }, 150);
    const es = new EventSource(src);
    es.addEventListener("event", function (msg) {
      try {
        const ev = JSON.parse(msg.data);
        if (typeof ev.seq === "number") target.setAttribute("data-after", String(ev.seq));
      } catch (_) { /* ignore */ }
      refresh();
    });
    es.addEventListener("changed", refresh);
    // `end`: every event was sent and the run is over; the last `event` already refreshed.
    es.addEventListener("end", function () {
      es.close();
      document.body.setAttribute("data-live-state", "ended");
    });
    es.onopen = function () { document.body.setAttribute("data-live-state", "open"); };
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-live]").forEach(live);
  });
})();
