# A Python bot as a container image: the template for bot authors.
#
#   docker build -f docker/bot-python.Dockerfile --build-arg BOT=greedy -t my-bot:1 .
#
# (run from the repository root). For your own bot, replace the COPY of the
# sample bots by your code and the CMD by your program, for example
#   COPY mybot.py ./
#   CMD ["python", "mybot.py"]
#
# What the referee expects of the image (see docker/README-section.md):
# - it serves the bot protocol over HTTP on the unix socket named by the
#   environment variable BOT_UNIX (always /run/bot/bot.sock; the referee mounts
#   /run/bot from the host). The SDK (sample_bots/sdk.py) listens there by itself
#   when BOT_UNIX is set; otherwise pass --unix /run/bot/bot.sock;
# - it needs no network (it has none), no writable root filesystem (only /tmp,
#   a small tmpfs) and no capabilities;
# - the secret, when the league gives one, arrives as BOT_SECRET.
#
# BASE is a public image on a normal machine; on a machine without a registry,
# `python -m referee.bots.baseimage` makes referee-base:<instance> (the machine's own
# Python with aiohttp and msgspec, no shell; <instance> is u0 for root, or
# $REFEREE_INSTANCE) and builds with BASE=<its id>.
ARG BASE=python:3.11-slim
FROM ${BASE}

WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    BOT_UNIX=/run/bot/bot.sock

# The SDK's two dependencies (already in referee-base:<instance>; exec form: that
# image has no /bin/sh).
RUN ["python", "-c", "import importlib.util as u, subprocess, sys; missing = [m for m in ('aiohttp', 'msgspec') if u.find_spec(m) is None]; missing and subprocess.check_call([sys.executable, '-m', 'pip', 'install', '--no-cache-dir', 'aiohttp>=3.9', 'msgspec>=0.18'])"]

# The SDK and the sample bots; referee/game is the rules engine the searcher uses.
COPY protocol/ protocol/
COPY sample_bots/ sample_bots/
COPY referee/__init__.py referee/
COPY referee/game/ referee/game/

# Compiled once here: the root filesystem is read-only when the referee runs it.
RUN ["python", "-m", "compileall", "-q", "protocol", "sample_bots", "referee"]

# Which sample bot this image runs: greedy, random, tactician or searcher.
ARG BOT=greedy
ENV BOT_MODULE=sample_bots.${BOT}
LABEL org.opencontainers.image.title="3UP 3DOWN bot: sample_bots.${BOT}"

# Run as an unprivileged user on a normal base image; the referee may set its own.
USER 65534:65534
# `python -m $BOT_MODULE` without a shell; it listens on $BOT_UNIX.
CMD ["python", "-c", "import os, runpy; runpy.run_module(os.environ['BOT_MODULE'], run_name='__main__', alter_sys=True)"]
