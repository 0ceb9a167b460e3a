/* Games watched live (issue 36): a game's page (/c/{cid}/runs/{rid}/live/{idx}, #watch), the TV
   page (/c/{cid}/tv, #tv: the games in play one after another) and the "playing now" lists of the
   leaderboard and a bot's page ([data-playing]). A game's stream sends "frame" (the public state and
   the public log since the last frame) and "over" (the same, with the places). Drawn by table.js;
   elements built with textContent only. */
(function () {
  "use strict";
  var T = window.Table;
  var make = T.make;

  /* Follow one game's stream into `el`; done(frame) once it is over, or done(null) when it cannot be followed. */
  var follow = function (el, events, done) {
    var board = make("div", "watch-table");
    var status = make("p", "watch-status", "connecting…");
    status.setAttribute("role", "status");
    var log = make("ol", "log");
    el.textContent = "";
    el.appendChild(status);
    el.appendChild(board);
    el.appendChild(log);
    var names = [];
    var seen = false;
    var who = function (seat) { return names[seat] || "seat " + seat; };
    var show = function (f) {
      names = f.names;
      T.draw(board, f.state, -1);
      f.state.events.forEach(function (e) {
        var t = T.eventText(e, who);
        if (t) { log.insertBefore(make("li", null, t), log.firstChild); }
      });
      var s = f.state;
      status.textContent = "turn " + s.turn + ", " + s.phase +
        (s.current === null || s.current === undefined ? "" : ": " + who(s.current) + " to move");
      el.setAttribute("data-state", "playing");
    };
    var source = new EventSource(events);
    source.addEventListener("frame", function (ev) { seen = true; show(JSON.parse(ev.data)); });
    source.addEventListener("over", function (ev) {
      seen = true;
      source.close();
      var f = JSON.parse(ev.data);
      show(f);
      status.textContent = "game over: " + f.places.map(function (p, seat) { return who(seat) + " place " + p; }).join(", ");
      el.setAttribute("data-state", "over");
      done(f);
    });
    source.addEventListener("error", function () {
      if (source.readyState === EventSource.CLOSED || !seen) {
        source.close();
        if (el.getAttribute("data-state") !== "over") {
          status.textContent = seen ? "the stream ended" : "this game is not being played now (over, or not watchable here)";
          el.setAttribute("data-state", "gone");
          done(null);
        }
      }
    });
    return source;
  };

  var game = document.getElementById("watch");
  if (game) {
    follow(document.getElementById("watch-game"), game.getAttribute("data-events"), function () {
      var a = document.getElementById("watch-replay");
      a.hidden = false;
    });
  }

  var tv = document.getElementById("tv");
  if (tv) {
    var list = tv.getAttribute("data-list");
    var pause = Number(tv.getAttribute("data-pause-ms") || "4000");
    var last = null;
    var title = document.getElementById("tv-title");
    var next = function () {
      fetch(list, {cache: "no-store"}).then(function (r) { return r.json(); }).then(function (data) {
        var games = data.games.filter(function (g) { return g.run + "-" + g.game !== last; });
        if (!games.length) {
          tv.setAttribute("data-state", "idle");
          title.textContent = data.note || "no game in play now: the next one appears here";
          setTimeout(next, pause);
          return;
        }
        var g = games[0];
        last = g.run + "-" + g.game;
        tv.setAttribute("data-game", last);
        tv.setAttribute("data-state", "watching");
        title.textContent = (g.kind === "ladder" ? "ladder" : "run " + g.run) + ", game " + g.game + ": " + g.names.join(" vs ");
        follow(document.getElementById("tv-game"), g.events, function () { setTimeout(next, pause); });
      }, function () { setTimeout(next, pause); });
    };
    next();
  }

  /* "Playing now": the games in play with a link to watch each (of one bot, with data-bot). */
  Array.prototype.forEach.call(document.querySelectorAll("[data-playing]"), function (box) {
    var bot = box.getAttribute("data-bot");
    var refresh = function () {
      fetch(box.getAttribute("data-playing"), {cache: "no-store"}).then(function (r) { return r.json(); }).then(function (data) {
        var games = data.games.filter(function (g) { return !bot || g.names.indexOf(bot) >= 0; });
        var ul = box.querySelector("ul");
        ul.textContent = "";
        games.forEach(function (g) {
          var li = make("li", null, g.names.join(" vs ") + " (" + (g.kind === "ladder" ? "ladder" : "run " + g.run) + ", game " + g.game + ") ");
          var a = make("a", "watch-link", "watch");
          a.href = g.page;
          li.appendChild(a);
          ul.appendChild(li);
        });
        box.hidden = !games.length && !data.note;
        box.querySelector(".note").textContent = data.note || "";
      }).catch(function () { return null; }).then(function () {
        if (!document.hidden) { setTimeout(refresh, 5000); } else { setTimeout(refresh, 15000); }
      });
    };
    refresh();
  });
}());
