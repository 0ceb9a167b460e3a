"""Hostile bots for the container tests: an SDK bot (it plays like greedy)
that misbehaves as $HOSTILE says. Runs only inside a sandboxed container.

- ``memhog``: at its first /act, allocates memory without end;
- ``forkbomb``: before serving, starts a process that forks without end
  (each process keeps forking); it prints how far it got;
- ``probe``: before serving, tries to escape (network, filesystem,
  privileges) and prints one ``PROBE {json}`` line with what happened;
- ``never_ready``: never listens (sleeps);
- ``crash``: prints a message and exits with code 3.
- ``swap``: not the SDK but a bare HTTP/1.0 server (one connection per
  request), which answers ``GET /`` and ``POST /start`` and, just before
  answering ``/start``, replaces its socket (``/run/bot/bot.sock``) by what
  ``$SWAP_TO`` says: ``symlink`` (to ``$SWAP_TARGET``, a path on the host),
  ``fifo`` or ``file``; it prints ``SWAPPED <what>``;
- ``fill``: once its socket is there, writes ``$FILL_MB`` MiB (100) into
  files in its socket folder, 1 MiB at a time, and prints ``FILL {json}``
  (bytes written, the error that stopped it).

No probe sends traffic anywhere real: with ``--network none`` the container
has no interface but loopback, so no packet can leave it.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import sys
import time

MODE = os.environ.get("HOSTILE", "probe")


def hog() -> None:
    chunks = []
    while True:
        chunks.append(b"\x01" * (4 << 20))  # written, so really resident


def bomb() -> None:
    first = os.getpid()
    made = 0
    reported = False
    while True:
        try:
            pid = os.fork()
        except OSError as e:
            if os.getpid() == first and not reported:
                print(
                    f"FORKBOMB fork failed ({errno.errorcode.get(e.errno or 0, e.errno)}) after {made} forks",
                    flush=True,
                )
                reported = True
            time.sleep(0.05)
            continue
        if pid == 0:
            made = 0
            first = -1
        else:
            made += 1


def attempt(what: str, fn: object) -> dict[str, object]:
    t0 = time.perf_counter()
    try:
        fn()  # type: ignore[operator]
        result: dict[str, object] = {"ok": True}
    except OSError as e:
        result = {"ok": False, "errno": errno.errorcode.get(e.errno or 0, str(e.errno)), "error": str(e)}
    result["ms"] = round((time.perf_counter() - t0) * 1000, 1)
    result["what"] = what
    return result


def connect(host: str, port: int) -> None:
    with socket.create_connection((host, port), timeout=2):
        pass


def connect_unix(path: str) -> None:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(2)
        s.connect(path)


def write(path: str) -> None:
    with open(path, "w") as f:
        f.write("x")


def _no_new_privs() -> str:
    """prctl(PR_GET_NO_NEW_PRIVS), where /proc/self/status does not say (gVisor)."""
    try:
        import ctypes

        return str(ctypes.CDLL(None, use_errno=True).prctl(39, 0, 0, 0, 0))
    except (OSError, AttributeError):
        return ""


def probe() -> None:
    port = int(os.environ.get("PROBE_PORT", "9"))
    out = {
        "interfaces": [name for _, name in socket.if_nameindex()],
        "internet": attempt("tcp 10.255.255.1:80", lambda: connect("10.255.255.1", 80)),
        "bridge": attempt("tcp 172.17.0.1:%d" % port, lambda: connect("172.17.0.1", port)),
        "other_bot_port": attempt("tcp 127.0.0.1:%d" % port, lambda: connect("127.0.0.1", port)),
        "other_bot_socket": attempt(
            "unix " + os.environ.get("PROBE_SOCKET", "/nonexistent"),
            lambda: connect_unix(os.environ.get("PROBE_SOCKET", "/nonexistent")),
        ),
        "write_root": attempt("write /app/x", lambda: write("/app/x")),
        "write_tmp": attempt("write /tmp/x", lambda: write("/tmp/x")),
        "uid": os.getuid(),
    }
    with open("/proc/self/status") as f:
        status = dict(line.split(":", 1) for line in f if ":" in line)
    out["cap_eff"] = status.get("CapEff", "").strip()
    out["no_new_privs"] = status.get("NoNewPrivs", "").strip() or _no_new_privs()
    print("PROBE " + json.dumps(out), flush=True)


def swap_socket() -> None:
    """Replace /run/bot/bot.sock by what $SWAP_TO says (atomically: rename)."""
    what = os.environ.get("SWAP_TO", "symlink")
    spare = "/run/bot/.swap"
    if what == "symlink":
        os.symlink(os.environ.get("SWAP_TARGET", "/var/run/docker.sock"), spare)
    elif what == "fifo":
        os.mkfifo(spare)
    else:
        with open(spare, "w") as f:
            f.write("not a socket")
    os.rename(spare, "/run/bot/bot.sock")
    print(f"SWAPPED {what}", flush=True)


def serve_then_swap() -> None:
    import http.server
    import socketserver

    from protocol import APIVERSION

    info = json.dumps(
        {"apiversion": APIVERSION, "name": "hostile-swap", "author": "tests", "version": "1"}
    ).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def reply(self, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self.reply(info)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            print(f"REQUEST {self.path}", flush=True)
            if self.path == "/start":
                swap_socket()  # before answering: the next request needs a new connection
            self.reply(b"{}")

        def address_string(self) -> str:
            return "referee"

    class Server(socketserver.UnixStreamServer):
        pass

    path = os.environ.get("BOT_UNIX", "/run/bot/bot.sock")
    with Server(path, Handler) as server:
        print("hostile bot: serving, HTTP/1.0", flush=True)
        server.serve_forever()


def fill() -> None:
    import threading

    def writer() -> None:
        # listdir, not exists: under gVisor a stat of the host's socket fails
        while "bot.sock" not in os.listdir("/run/bot"):
            time.sleep(0.02)
        total, error, chunk = 0, None, b"\x02" * (1 << 20)
        try:
            for i in range(int(os.environ.get("FILL_MB", "100"))):
                with open(f"/run/bot/junk-{i}", "wb") as f:
                    f.write(chunk)
                total += len(chunk)
        except OSError as e:
            error = errno.errorcode.get(e.errno or 0, str(e))
        print("FILL " + json.dumps({"bytes": total, "error": error}), flush=True)

    threading.Thread(target=writer, daemon=True).start()


def main() -> None:
    if MODE == "crash":
        print("hostile bot: crashing on purpose", file=sys.stderr, flush=True)
        sys.exit(3)
    if MODE == "never_ready":
        print("hostile bot: never listening", flush=True)
        time.sleep(10**6)
    if MODE == "probe":
        probe()
    if MODE == "swap":
        serve_then_swap()
        return
    if MODE == "fill":
        fill()
    if MODE == "forkbomb":
        if os.fork() == 0:
            bomb()
        time.sleep(0.5)  # let the bomb reach the limit before serving

    from protocol import APIVERSION, ActRequest, BotInfo
    from sample_bots.sdk import run_bot
    from sample_bots.strategy import lowest_play_index

    def decide(request: ActRequest) -> int:
        if MODE == "memhog":
            hog()
        return lowest_play_index(request.legal)

    run_bot(decide, BotInfo(apiversion=APIVERSION, name=f"hostile-{MODE}", author="tests", version="1"), [])


if __name__ == "__main__":
    main()
