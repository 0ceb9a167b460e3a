# The Node.js sample bot as a container image (a template for Node bots).
#
#   docker build -f docker/bot-node.Dockerfile -t node-bot:1 .
#
# (run from the repository root). The bot has no dependencies; it listens on
# the unix socket the referee mounts (/run/bot/bot.sock) and needs no network.
# On a machine without a registry, `python -m referee.bots.baseimage --bot node`
# builds it FROM referee-node-base:<instance> (the machine's own node binary).
ARG BASE=node:20-slim
FROM ${BASE}

WORKDIR /app
ENV BOT_UNIX=/run/bot/bot.sock NODE_ENV=production
COPY sample_bots/node/bot.js ./bot.js

USER 65534:65534
# BOT_SECRET, when the league gives a secret, is read by bot.js itself.
CMD ["node", "bot.js", "--unix", "/run/bot/bot.sock"]
