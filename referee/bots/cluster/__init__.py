"""Container bots on a Ray cluster: each node's bots, images by digest through a registry."""
