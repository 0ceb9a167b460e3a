
(function () {
  "use strict";
  // ------------------------------------------------ deadlines: the countdown (server-rendered, ticking here)
  var clocks = document.querySelectorAll("[data-countdown]");
  if (clocks.length) {
    var left = function (s) {
      s = Math.max(0, Math.floor(s));
      var d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
      var two = function (n) { return (n < 10 ? "0" : "") + n; };
      if (d) { return d + " d " + h + " h"; }
      if (h) { return h + " h " + two(m) + " min"; }
      if (m) { return m + " min " + two(s % 60) + " s"; }
      return s + " s";
    };
    var tick = function () {
      Array.prototype.forEach.call(clocks, function (el) {
        var rest = Number(el.getAttribute("data-countdown")) - Date.now() / 1000;
        var text = el.querySelector(".countdown-text");
        if (text) {
          text.textContent = rest > 0 ? el.getAttribute("data-label") + " in " + left(rest) : el.getAttribute("data-done");
        }
        el.setAttribute("data-left", String(Math.max(0, Math.floor(rest))));
      });
    };
    tick();
    window.setInterval(tick, 1000);
  }
  // ------------------------------------------------ leaderboard: live updates (SSE)
  var live = document.querySelector("[data-live]");
  if (live && window.EventSource) {
    var show = function (html) {
      live.innerHTML = html;  // server-rendered, escaped
      // what only a competition in setup offers (the admin's start form) follows its phase
      var about = live.querySelector("[data-phase]");
      if (about) {
        var setup = about.getAttribute("data-phase") === "setup";
        Array.prototype.forEach.call(document.querySelectorAll("[data-setup-only]"),
                                     function (el) { el.hidden = !setup; });
      }
      live.setAttribute("data-updates", String(Number(live.getAttribute("data-updates") || 0) + 1));
    };
    // a stream of the data only: fetch the live part on each update, one fetch at a time
    var busy = false, again = false;
    var refresh = function () {
      if (busy) { again = true; return; }
      busy = true;
      fetch(live.getAttribute("data-fragment"), {cache: "no-store"})
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) { if (html !== null) { show(html); } })
        .catch(function () {})
        .then(function () { busy = false; if (again) { again = false; refresh(); } });
    };
    var connect = function () {
      var es = new EventSource(live.getAttribute("data-events"));
      es.addEventListener("update", refresh);
      // a stream of the live part itself (?view=live): nothing to fetch
      es.addEventListener("live", function (ev) { show(ev.data); });
      // A refused stream (429: this address has its share; 503: the server has its limit) is not
      // retried by the browser: try again later, spread out (the server's Retry-After, and a jitter).
      es.addEventListener("error", function () {
        if (es.readyState !== EventSource.CLOSED) { return; }  // the browser reconnects by itself
        var wait = Number(live.getAttribute("data-retry-s") || 10);
        live.setAttribute("data-retries", String(Number(live.getAttribute("data-retries") || 0) + 1));
        setTimeout(connect, 1000 * wait * (1 + Math.random() / 2));
      });
    };
    connect();
  }

  // ------------------------------------------------ admin: start a tournament
  var forms = document.querySelectorAll("form[data-admin-start]");
  Array.prototype.forEach.call(forms, function (form) {
    var tokenInput = form.querySelector("input[name=token]");
    try { tokenInput.value = sessionStorage.getItem("referee-admin") || ""; } catch (e) {}
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      var out = form.querySelector(".result");
      var token = tokenInput.value.trim();
      try { sessionStorage.setItem("referee-admin", token); } catch (e) {}
      var resume = form.querySelector("input[name=resume]");
      out.textContent = "starting…";
      fetch(form.getAttribute("data-url"), {
        method: "POST",
        headers: {"Authorization": "Bearer " + token, "Content-Type": "application/json"},
        body: JSON.stringify({resume: !!(resume && resume.checked)})
      }).then(function (r) {
        return r.json().then(function (body) { return {ok: r.ok, status: r.status, body: body}; });
      }).then(function (res) {
        out.textContent = res.ok
          ? "run " + res.body.id + " started: " + res.body.total_games + " games"
          : "error " + res.status + ": " + (res.body.error || "");
      }).catch(function (e) { out.textContent = "error: " + e; });
    });
  });

  // ------------------------------------------------ replay viewer
  var dataEl = document.getElementById("replay-data");
  if (!dataEl) { return; }
  var data = JSON.parse(dataEl.textContent);
  var frames = data.frames, names = data.names;
  var i = 0, mode = "full";
  var $ = function (id) { return document.getElementById(id); };
  var make = function (tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  };
  var colour = function (c) { return c.charAt(0) === "C" ? "X" : c.charAt(c.length - 1); };
  var face = function (c, extra) { return make("span", "card face c-" + colour(c) + (extra ? " " + extra : ""), c); };
  var back = function () { var e = make("span", "card back", "?"); e.title = "hidden"; return e; };
  var gone = function () { return make("span", "card gone", "·"); };
  var row = function (key, nodes, cls) {
    var r = make("div", "row " + (cls || ""));
    r.appendChild(make("span", "k", key));
    nodes.forEach(function (n) { r.appendChild(n); });
    if (!nodes.length) { r.appendChild(make("span", "muted", "—")); }
    return r;
  };

  var select = $("mode");
  names.forEach(function (n, s) {
    var o = make("option", null, "seat " + s + ": " + n + "'s view");
    o.value = String(s);
    select.appendChild(o);
  });
  var asked = new URLSearchParams(window.location.search).get("seat");
  if (asked !== null && names[Number(asked)] !== undefined) { select.value = String(Number(asked)); mode = select.value; }

  var describeEvent = function (e) {
    var who = (e.seat !== undefined && e.seat !== null && names[e.seat] !== undefined)
      ? names[e.seat] + " (" + e.seat + ")" : "";
    var parts = ["#" + e.seq, who, e.type];
    if (e.cards) { parts.push(e.cards.join(" ")); }
    ["slot", "count", "target", "place", "kind", "detail"].forEach(function (k) {
      if (e[k] !== undefined && e[k] !== null) { parts.push(k + "=" + e[k]); }
    });
    return parts.join(" ");
  };

  var render = function () {
    var f = frames[i];
    $("step").textContent = "step " + i + " / " + (frames.length - 1);
    $("slider").value = String(i);
    // the move's turn is the protocol's: the `turn` of the request it answered (the state after
    // it counts on to the next turn already, so f.full.turn is one ahead at a turn's last move)
    var hasTurn = f.turn !== undefined && f.turn !== null;
    $("turn").textContent = hasTurn ? "turn " + f.turn : "before turn 0";
    $("label").textContent = f.label + (f.fault ? "  — fault: " + f.fault : "");
    var said = $("bot-output-text");
    if (said) {
      var own = f.seat !== null && f.seat === data.output_seat && f.output !== undefined;
      said.textContent = own ? (f.output || "(nothing at turn " + f.turn + ")") : "(not your move)";
      said.setAttribute("data-turn", own ? String(f.turn) : "");
    }
    var viewer = mode === "full" ? null : Number(mode);
    var pv = viewer === null ? null : f.views[viewer];
    var seats = $("seats");
    seats.textContent = "";
    names.forEach(function (n, s) {
      var box = make("div", "seat");
      box.setAttribute("data-seat", String(s));
      if (f.full.current === s && f.full.phase !== "over") { box.className += " current"; }
      var h = make("h3", null, "seat " + s + ": " + n);
      var p = pv ? pv.players[s] : (pv === null && f.views[0] ? f.views[0].players[s] : null);
      if (p && p.place) { h.appendChild(make("span", "muted", "  place " + p.place)); }
      if (p && p.disqualified) { h.appendChild(make("span", "muted", "  disqualified")); }
      box.appendChild(h);
      var hand = [], up = [], down = [], known = [];
      if (pv === null) {
        hand = f.full.hands[s].map(function (c) { return face(c); });
        up = f.full.up[s].map(function (c) { return face(c); });
        down = f.full.down[s].map(function (c) { return c === null ? gone() : face(c, "down"); });
      } else if (s === viewer) {
        hand = pv.you.hand.map(function (c) { return face(c); });
        up = pv.you.up.map(function (c) { return face(c); });
        down = [0, 1, 2].map(function (slot) { return pv.you.down.indexOf(slot) >= 0 ? back() : gone(); });
      } else {
        var pl = pv.players[s];
        for (var k = 0; k < pl.hand_count; k++) { hand.push(back()); }
        up = pl.up.map(function (c) { return face(c); });
        down = [0, 1, 2].map(function (slot) { return pl.down.indexOf(slot) >= 0 ? back() : gone(); });
        known = pl.known.map(function (c) { return face(c, "known"); });
      }
      var handRow = row("hand", hand, "hand");
      handRow.setAttribute("data-count", String(hand.length));
      box.appendChild(handRow);
      if (known.length) { box.appendChild(row("known", known, "known-cards")); }
      box.appendChild(row("3UP", up, "up"));
      box.appendChild(row("3DOWN", down, "down"));
      seats.appendChild(box);
    });
    var pile = (pv ? pv.pile : f.full.pile);
    var shown = pile.slice(-14).map(function (c) { return face(c); });
    var centre = $("centre");
    centre.textContent = "";
    var pr = row("pile", shown, "pile");
    if (pile.length > 14) { pr.insertBefore(make("span", "muted", "(" + (pile.length - 14) + " more) "), pr.children[1]); }
    centre.appendChild(pr);
    var drawCount = pv ? pv.draw_count : f.full.draw.length;
    var cleared = pv ? pv.cleared.length : f.full.cleared_count;
    centre.appendChild(make("div", "row muted",
      "draw pile: " + drawCount + " · cleared: " + cleared + " · " + f.full.phase +
      (f.full.direction === -1 ? " · reversed" : "")));
    var log = $("events");
    log.textContent = "";
    var lines = [];
    for (var j = Math.max(0, i - 40); j <= i; j++) {
      frames[j].events.forEach(function (e) { lines.push({e: e, isNew: j === i}); });
    }
    lines.slice(-60).forEach(function (x) {
      log.appendChild(make("div", x.isNew ? "new" : "", describeEvent(x.e)));
    });
    log.scrollTop = log.scrollHeight;
  };
  var go = function (k) { i = Math.max(0, Math.min(frames.length - 1, k)); render(); };
  $("slider").max = String(frames.length - 1);
  $("first").addEventListener("click", function () { go(0); });
  $("prev").addEventListener("click", function () { go(i - 1); });
  $("next").addEventListener("click", function () { go(i + 1); });
  $("last").addEventListener("click", function () { go(frames.length - 1); });
  $("slider").addEventListener("input", function () { go(Number($("slider").value)); });
  select.addEventListener("change", function () { mode = select.value; render(); });
  document.addEventListener("keydown", function (e) {
    if (e.target && (e.target.tagName === "INPUT" || e.target.tagName === "SELECT")) { return; }
    if (e.key === "ArrowRight") { go(i + 1); } else if (e.key === "ArrowLeft") { go(i - 1); }
  });
  render();
})();
