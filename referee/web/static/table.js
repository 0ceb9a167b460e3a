/* The table of a 3UP 3DOWN game drawn from a state of the bot protocol (issue 36): what the seat's
   page (seat.js) and the watchers' pages (watch.js) share. Elements are built with textContent
   only: nothing received becomes HTML. window.Table: make, card, row, eventText, draw. */
(function () {
  "use strict";
  var make = function (tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined) { e.textContent = text; }
    return e;
  };
  var colour = function (c) { return c.charAt(0) === "C" ? "X" : c.charAt(c.length - 1); };
  var card = function (c, extra) { return make("span", "card face c-" + colour(c) + (extra ? " " + extra : ""), c); };
  var row = function (label, nodes) {
    var r = make("div", "row");
    r.appendChild(make("span", "key", label));
    nodes.forEach(function (n) { r.appendChild(n); });
    return r;
  };
  /* One event of the log as a line of text; who(seat) names a seat. */
  var eventText = function (e, who) {
    var cards = (e.cards || []).join(" ");
    if (e.type === "play") { return who(e.seat) + " played " + cards; }
    if (e.type === "pickup") { return who(e.seat) + " picked up the pile (" + e.count + ")"; }
    if (e.type === "draw") { return who(e.seat) + " drew " + e.count; }
    if (e.type === "flip") { return who(e.seat) + " turned over " + (cards || "a 3DOWN card") + (e.kind === "played" ? " and played it" : ""); }
    if (e.type === "clear") { return "the pile was cleared (" + e.kind + ")"; }
    if (e.type === "choose_up") { return who(e.seat) + " chose 3UP " + cards; }
    if (e.type === "out") { return who(e.seat) + " went out, place " + e.place; }
    if (e.type === "fault") { return who(e.seat) + ": " + e.kind + " fault"; }
    if (e.type === "disqualified") { return who(e.seat) + " disqualified"; }
    return null;
  };
  /* The pile, the draw pile and every player but `skip` (a seat's own, drawn by its page) into `el`. */
  var draw = function (el, s, skip) {
    el.textContent = "";
    var pile = s.pile.map(function (c) { return card(c); });
    el.appendChild(row("pile (" + s.pile.length + ")", pile.length ? pile : [make("span", "muted", "empty")]));
    el.appendChild(row("draw pile", [make("span", null, String(s.draw_count) + (s.removed_count ? ", removed " + s.removed_count : ""))]));
    s.players.forEach(function (p) {
      if (p.seat === skip) { return; }
      var box = make("div", "player");
      box.setAttribute("data-seat", String(p.seat));
      if (s.current === p.seat) { box.className += " current"; }
      var head = p.name + " (seat " + p.seat + ")";
      if (p.out) { head += p.disqualified ? ": disqualified" : ": out, place " + p.place; }
      box.appendChild(make("strong", null, head));
      box.appendChild(row("hand", [make("span", null, p.hand_count + " cards")].concat(
        (p.known || []).map(function (c) { return card(c, "known"); }))));
      box.appendChild(row("3UP", p.up.map(function (c) { return card(c); })));
      box.appendChild(row("3DOWN", [make("span", null, p.down_count + " face down")]));
      el.appendChild(box);
    });
  };
  window.Table = {make: make, card: card, row: row, eventText: eventText, draw: draw};
}());
