"""A team's bot as an image: archive checks, the sandboxed source build, a `docker save`
upload's counted load, the base images."""
