#!/usr/bin/env node
// A 3UP 3DOWN bot in Node.js with no dependencies: the starter kit's (protocol v1 from scratch).
//
//   node bot.js --port 8001 [--host 127.0.0.1] [--secret S] [--unix PATH]
//   (defaults from the environment: BOT_SECRET, BOT_UNIX)
//
// It plays like the greedy Python bot: the lowest legal play (one card), a
// Clear only when nothing else may be played, its 3 highest cards as 3UP,
// never the optional draw, and it passes on every swap. It answers with an
// index into `legal`, so it never needs to build an action itself.
//
// Everything a bot must do is here, in ~150 lines: serve GET / (identity) and
// POST /start, /act, /end; check X-Referee-Signature (HMAC-SHA256 of the raw
// body, keyed by the secret) when a secret is given; answer 400 with a JSON
// error for a body it cannot read; echo request_id. When the referee sets
// BOT_OUTPUT_MARKS (a container referee does), it prints a mark line before and
// after each decision, so that what it prints meanwhile is shown next to that
// move in the team's replay (docs/protocol.md).
"use strict";

const http = require("http");
const crypto = require("crypto");

const INFO = { apiversion: "1", name: "my-node-bot", author: "my team", version: "1.0" };
const MAX_BODY = 8 * 1024 * 1024;

// Output marks: "--- <token> act <request_id> <turn>" and "--- <token> done <request_id>".
const TOKEN = process.env.BOT_OUTPUT_MARKS || "";
const MARKS = /^[A-Za-z0-9_-]{1,128}$/.test(TOKEN) ? `--- ${TOKEN} ` : null;
if (MARKS) process.stderr.write = process.stdout.write.bind(process.stdout); // one ordered stream of lines

function mark(line) {
  if (MARKS) process.stdout.write(MARKS + line + "\n"); // synchronous for a pipe or a file
}

function parseArgs(argv) {
  // BOT_SECRET and BOT_UNIX give defaults (a container referee sets BOT_UNIX); --port wins over BOT_UNIX.
  const args = { host: "127.0.0.1", port: null, unix: null, secret: process.env.BOT_SECRET || null };
  const unixEnv = process.env.BOT_UNIX || null;
  for (let i = 0; i < argv.length; i++) {
    const key = argv[i];
    const value = argv[i + 1];
    if (key === "--port") args.port = Number(value);
    else if (key === "--host") args.host = value;
    else if (key === "--secret") args.secret = value;
    else if (key === "--unix") args.unix = value;
    else if (key === "--help" || key === "-h") {
      console.log("usage: node bot.js (--port PORT | --unix PATH) [--host H] [--secret S]");
      process.exit(0);
    } else {
      console.error(`unknown argument ${key}`);
      process.exit(2);
    }
    i++;
  }
  if (args.port === null && !args.unix) args.unix = unixEnv;
  if ((args.port === null || !Number.isInteger(args.port)) && !args.unix) {
    console.error("give --port PORT or --unix PATH");
    process.exit(2);
  }
  return args;
}

// Cards: "7R", "10V", "C", "C+1", "C+2"; 1 < ... < 10 < every Clear.
function rank(card) {
  if (card === "C") return 11;
  if (card === "C+1") return 12;
  if (card === "C+2") return 13;
  return parseInt(card, 10);
}

// The lowest legal play: returns an index into `legal`.
function decide(request) {
  const legal = request.legal;
  if (legal[0].type === "choose_up") {
    let best = 0;
    let bestSum = -1;
    legal.forEach((a, i) => {
      const sum = a.cards.reduce((s, c) => s + rank(c), 0);
      if (sum > bestSum) { best = i; bestSum = sum; }
    });
    return best;
  }
  let best = -1;
  let bestKey = [99, 99];
  let fallback = -1;
  legal.forEach((a, i) => {
    if (a.type === "play") {
      const key = [rank(a.cards[0]), a.cards.length];
      if (key[0] < bestKey[0] || (key[0] === bestKey[0] && key[1] < bestKey[1])) {
        best = i; bestKey = key;
      }
    } else if ((a.type === "flip" || a.type === "pickup" || a.type === "pass") && fallback < 0) {
      fallback = i;
    }
  });
  if (best >= 0) return best;
  if (fallback >= 0) return fallback;
  return 0;
}

// What each POST body must hold (a light check; the referee sends valid messages).
const REQUIRED = {
  "/start": { game_id: "string", seat: "number", players: "array", rules: "object" },
  "/act": { game_id: "string", request_id: "string", seat: "number", state: "object", legal: "array" },
  "/end": { game_id: "string", places: "array" },
};

function problem(path, body) {
  if (body === null || typeof body !== "object" || Array.isArray(body)) return "body must be a JSON object";
  for (const [field, type] of Object.entries(REQUIRED[path])) {
    const value = body[field];
    const actual = Array.isArray(value) ? "array" : value === null ? "null" : typeof value;
    if (value === undefined) return `missing required field '${field}'`;
    if (actual !== type) return `field '${field}' must be ${type}, got ${actual}`;
  }
  if (path === "/act" && body.legal.length === 0) return "'legal' must not be empty";
  return null;
}

function send(res, status, payload) {
  const data = Buffer.from(JSON.stringify(payload));
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": data.length });
  res.end(data);
}

function signatureOk(secret, raw, header) {
  if (typeof header !== "string") return false;
  const expected = Buffer.from("sha256=" + crypto.createHmac("sha256", secret).update(raw).digest("hex"));
  const given = Buffer.from(header.trim().toLowerCase());
  return given.length === expected.length && crypto.timingSafeEqual(given, expected);
}

function handle(args, req, res, raw) {
  const path = req.url.split("?")[0];
  if (req.method === "GET" && path === "/") return send(res, 200, INFO);
  if (!(path in REQUIRED)) return send(res, 404, { error: `no such endpoint ${req.method} ${path}` });
  if (req.method !== "POST") return send(res, 405, { error: `${path} takes POST` });
  if (args.secret) {
    const header = req.headers["x-referee-signature"];
    if (header === undefined) return send(res, 401, { error: "missing X-Referee-Signature header" });
    if (!signatureOk(args.secret, raw, header)) {
      return send(res, 401, { error: "bad X-Referee-Signature: not the HMAC-SHA256 of the body" });
    }
  }
  let body;
  try {
    body = JSON.parse(raw.toString("utf8"));
  } catch (e) {
    return send(res, 400, { error: `body is not valid JSON: ${e.message}` });
  }
  const why = problem(path, body);
  if (why) return send(res, 400, { error: why });
  if (path === "/act") {
    let index = 0;
    mark(`act ${body.request_id} ${body.turn}`);
    try {
      index = decide(body);
    } catch (e) {
      console.error(`decide failed, answering index 0: ${e.stack}`);
    }
    mark(`done ${body.request_id}`);
    return send(res, 200, { request_id: body.request_id, index });
  }
  return send(res, 200, { ok: true });
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const server = http.createServer((req, res) => {
    const chunks = [];
    let size = 0;
    req.on("data", (chunk) => {
      size += chunk.length;
      if (size > MAX_BODY) {
        send(res, 413, { error: "body too large" });
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => {
      if (!res.writableEnded) handle(args, req, res, Buffer.concat(chunks));
    });
  });
  server.keepAliveTimeout = 65000;
  const done = () => console.error(`${INFO.name} listening on ${args.unix ? "unix:" + args.unix : `http://${args.host}:${args.port}`}`);
  if (args.unix) server.listen(args.unix, done);
  else server.listen(args.port, args.host, done);
  for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => process.exit(0));
}

main();
