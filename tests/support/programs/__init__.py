"""Bot programs the tests run as processes or in containers (``python PATH``, or copied into an
image); some are imported as well, for what they define."""
