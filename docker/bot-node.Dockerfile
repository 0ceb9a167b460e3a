# The Node.js sample bot as a container image (a template for Node bots).
#
# From the repository root, on a machine without a registry (docs/containers.md, "Building an image"):
#
#   NODE_BASE=$(python -m referee.bots.baseimage --print-base node)
#   docker build -f docker/bot-node.Dockerfile --build-arg BASE=$NODE_BASE -t my-node-bot:1 .
#
# BASE is the image this project makes from the machine's own node binary
# (referee-node-base:<instance>); with a registry, the default node:20-slim
# works too. The bot has no dependencies; it listens on the unix socket the
# referee mounts (/run/bot/bot.sock) and needs no network. Your own bot:
# change the COPY line below to your files (e.g. COPY starter_kits/node/ ./);
# there is no SDK to keep, and no npm: bring node_modules along if you need any.
ARG BASE=node:20-slim
FROM ${BASE}

WORKDIR /app
ENV BOT_UNIX=/run/bot/bot.sock NODE_ENV=production
# The bot's files (the one line to change).
COPY sample_bots/node/bot.js ./bot.js

USER 65534:65534
# BOT_SECRET, when the league gives a secret, is read by bot.js itself.
CMD ["node", "bot.js", "--unix", "/run/bot/bot.sock"]
