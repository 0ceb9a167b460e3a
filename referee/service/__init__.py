"""The classroom competition without HTTP (issue 33): its store, its rules and its errors.

``referee/web/`` serves it; nothing here imports aiohttp.
"""
