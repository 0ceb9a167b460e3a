/* A team member's seat at a practice game (issue 36): the page /team/practice/{pid}/play.
   The WebSocket carries the bot protocol: "KIND\n" + the body a bot would be POSTed
   (start, act, end); the page answers an act with a bot's reply body. Elements are
   built with textContent only: nothing received becomes HTML. */
(function () {
  "use strict";
  var root = document.getElementById("seat");
  if (!root) { return; }
  var $ = function (id) { return document.getElementById(id); };
  var T = window.Table;
  var make = T.make;
  var card = T.card;
  var row = T.row;
  var rank = function (c) { return c.slice(0, c.length - 1); };
  var status = function (text, state) { $("seat-status").textContent = text; root.setAttribute("data-state", state); };
  var log = function (text) {
    var li = make("li", null, text);
    $("seat-log").insertBefore(li, $("seat-log").firstChild);
  };
  var names = [];
  var me = -1;
  var request = null;
  var deadline = 0;
  var selected = [];
  var ws = null;

  var actionText = function (a) {
    if (a.type === "play") { return "play " + a.cards.join(" "); }
    if (a.type === "choose_up") { return "put " + a.cards.join(" ") + " as your 3UP"; }
    if (a.type === "pickup") { return "pick up the pile"; }
    if (a.type === "flip") { return "turn over your 3DOWN card in slot " + a.slot; }
    if (a.type === "draw") { return "draw a card"; }
    if (a.type === "swap") {
      return "swap " + a.give + " from your hand for " + a.take + " from " +
        (a.target === null || a.target === undefined ? "your" : "seat " + a.target + "'s") + " 3UP";
    }
    if (a.type === "pass") { return "pass (no swap)"; }
    return a.type;
  };
  var who = function (seat) { return seat === me ? "you" : (names[seat] || "seat " + seat); };
  var eventText = function (e) { return T.eventText(e, who); };

  var send = function (reply) {
    if (!ws || !request) { return; }
    ws.send(JSON.stringify(reply));
    log("you: " + (reply.index !== undefined ? actionText(request.legal[reply.index]) : actionText(reply.action)));
    request = null;
    $("seat-actions").textContent = "";
    status("waiting for the others…", "waiting");
  };
  var choose = function (i) { send({request_id: request.request_id, index: i}); };

  /* The selected cards make a legal play: the same rank and count as one the request lists. */
  var selectedPlay = function () {
    if (!request || selected.length === 0) { return -1; }
    var r = rank(selected[0]);
    if (!selected.every(function (c) { return rank(c) === r; })) { return -1; }
    for (var i = 0; i < request.legal.length; i++) {
      var a = request.legal[i];
      if (a.type === "play" && a.cards.length === selected.length && rank(a.cards[0]) === r) { return i; }
    }
    return -1;
  };

  var render = function () {
    var s = request.state;
    T.draw($("seat-table"), s, me);
    var you = $("seat-you");
    you.textContent = "";
    you.appendChild(make("h2", null, "You, seat " + me));
    var pick = function (c) {
      var e = card(c, "pick");
      e.setAttribute("role", "button");
      e.setAttribute("data-card", c);
      if (selected.indexOf(c) >= 0) { e.className += " selected"; }
      e.addEventListener("click", function () {
        var at = selected.indexOf(c);
        if (at >= 0) { selected.splice(at, 1); } else { selected.push(c); }
        render();
      });
      return e;
    };
    you.appendChild(row("hand", s.you.hand.map(pick)));
    you.appendChild(row("3UP", s.you.up.map(pick)));
    you.appendChild(row("3DOWN", [0, 1, 2].map(function (slot) {
      var known = s.you.down.indexOf(slot) >= 0;
      var e = make("span", "card " + (known ? "back" : "gone"), known ? "?" : "·");
      e.title = known ? "face down, slot " + slot : "played";
      return e;
    })));
    var acts = $("seat-actions");
    acts.textContent = "";
    var together = make("button", "together", "play the selected cards");
    together.id = "play-selected";
    var at = selectedPlay();
    together.disabled = at < 0;
    together.addEventListener("click", function () {
      var i = selectedPlay();
      if (i >= 0) { send({request_id: request.request_id, action: {type: "play", cards: selected.slice()}}); }
      selected = [];
    });
    acts.appendChild(together);
    request.legal.forEach(function (a, i) {
      var b = make("button", "action", actionText(a));
      b.setAttribute("data-index", String(i));
      b.setAttribute("data-type", a.type);
      b.addEventListener("click", function () { selected = []; choose(i); });
      acts.appendChild(b);
    });
  };

  var tick = function () {
    if (!request) { $("seat-clock").textContent = ""; return; }
    var left = Math.max(0, (deadline - Date.now()) / 1000);
    var bank = request.bank_ms === null || request.bank_ms === undefined ? "" : " (+ time bank " + (request.bank_ms / 1000).toFixed(1) + " s)";
    $("seat-clock").textContent = left.toFixed(0) + " s to answer" + bank;
  };
  setInterval(tick, 250);

  var handle = function (kind, body) {
    if (kind === "start") {
      var start = JSON.parse(body);
      names = start.players;
      me = start.seat;
      status("the game starts: you are seat " + me + " of " + names.length, "started");
      log("you are seat " + me + " against " + names.filter(function (n, i) { return i !== me; }).join(", "));
    } else if (kind === "act") {
      request = JSON.parse(body);
      root.setAttribute("data-request", request.request_id);
      selected = [];
      deadline = Date.now() + request.deadline_ms;
      (request.state.events || []).forEach(function (e) { var t = eventText(e); if (t) { log(t); } });
      status("your move (turn " + request.turn + ", " + request.state.phase + ")", "move");
      render();
      tick();
    } else if (kind === "closed") {
      if (request && request.request_id === body) {
        request = null;
        $("seat-actions").textContent = "";
        status("time is up: the referee played the safe default for you (a timeout fault)", "waiting");
      }
    } else if (kind === "late") {
      log("too late: the referee had played the safe default for you");
    } else if (kind === "end") {
      var end = JSON.parse(body);
      request = null;
      $("seat-actions").textContent = "";
      status("game over: you placed " + end.places[end.seat] + " of " + end.places.length, "over");
    } else if (kind === "replay") {
      var a = make("a", null, "open the replay");
      a.id = "seat-replay";
      a.href = body;
      $("seat-actions").textContent = "";
      $("seat-actions").appendChild(a);
      root.setAttribute("data-state", "recorded");
    }
  };

  var url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + root.getAttribute("data-socket");
  ws = new WebSocket(url);
  ws.addEventListener("open", function () { status("connected: waiting for the deal…", "connected"); });
  ws.addEventListener("message", function (ev) {
    var text = String(ev.data);
    var nl = text.indexOf("\n");
    handle(nl < 0 ? text : text.slice(0, nl), nl < 0 ? "" : text.slice(nl + 1));
  });
  ws.addEventListener("close", function () {
    if (root.getAttribute("data-state") !== "recorded" && root.getAttribute("data-state") !== "over") {
      status("disconnected: you left the game (the referee plays the safe default for your seat)", "closed");
    }
  });
}());
