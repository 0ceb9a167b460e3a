# A Python bot as a container image: the template for bot authors.
#
# From the repository root, on a machine without a registry (docs/containers.md, "Building an image"):
#
#   BASE=$(python -m referee.bots.baseimage --print-base python)
#   docker build -f docker/bot-python.Dockerfile --build-arg BASE=$BASE -t my-bot:1 .
#
# BASE is the base image this project makes from the machine's own Python
# (aiohttp and msgspec in it, no shell; its tag is referee-base:<instance>).
# On a machine with a registry, the default python:3.11-slim works too.
#
# Your own bot: change ONE line, the COPY of "your bot's files" below, to the
# folder holding your bot.py (e.g. COPY mybot/ bot/). The SDK lines stay, so
# `from sample_bots.sdk import run_bot` and `from protocol import ...` still
# work. --build-arg BOT=greedy (random, tactician, searcher) runs a sample bot
# instead.
#
# What the referee expects of the image:
# - it serves the bot protocol over HTTP on the unix socket named by the
#   environment variable BOT_UNIX (always /run/bot/bot.sock; the referee mounts
#   /run/bot from the host). The SDK listens there by itself when BOT_UNIX is
#   set;
# - it needs no network (it has none), no writable root filesystem (only /tmp,
#   a small tmpfs) and no capabilities;
# - the secret, when the league gives one, arrives as BOT_SECRET.
ARG BASE=python:3.11-slim
FROM ${BASE}

WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONPATH=/app \
    BOT_UNIX=/run/bot/bot.sock

# The SDK's two dependencies (already in the project's base image; exec form:
# that image has no /bin/sh).
RUN ["python", "-c", "import importlib.util as u, subprocess, sys; missing = [m for m in ('aiohttp', 'msgspec') if u.find_spec(m) is None]; missing and subprocess.check_call([sys.executable, '-m', 'pip', 'install', '--no-cache-dir', 'aiohttp>=3.9', 'msgspec>=0.18'])"]

# The SDK (protocol/ and sample_bots/sdk.py, with the sample bots) and the
# rules engine the searcher uses (referee/__init__.py imports _compiled.py,
# which says the engine runs from its source): keep these four lines.
COPY protocol/ protocol/
COPY sample_bots/ sample_bots/
COPY referee/__init__.py referee/_compiled.py referee/
COPY referee/game/ referee/game/

# Your bot's files: the folder with its bot.py (the one line to change).
COPY starter_kits/python/ bot/

# Compiled once here: the root filesystem is read-only when the referee runs it.
RUN ["python", "-m", "compileall", "-q", "protocol", "sample_bots", "referee", "bot"]

# Empty: your bot/bot.py; or a sample bot: greedy, random, tactician or searcher.
# (BOT_MODULE: that sample bot's module, for images built FROM this one.)
ARG BOT=
ENV BOT=${BOT} BOT_MODULE=sample_bots.${BOT}
LABEL org.opencontainers.image.title="3UP 3DOWN bot ${BOT}"

# Run as an unprivileged user on a normal base image; the referee may set its own.
USER 65534:65534
# No shell: bot/bot.py (its folder first on sys.path), or `python -m sample_bots.$BOT`.
CMD ["python", "-c", "import os, runpy, sys; bot = os.environ.get('BOT'); sys.path.insert(0, '/app/bot'); runpy.run_module('sample_bots.' + bot, run_name='__main__', alter_sys=True) if bot else runpy.run_path('/app/bot/bot.py', run_name='__main__')"]
