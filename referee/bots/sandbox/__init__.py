"""The sandbox of a container bot: the container, its limits, its socket folder and guard,
the marks in its output, the install's instance, and the Docker daemon it runs on."""
