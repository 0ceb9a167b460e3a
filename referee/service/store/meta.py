"""The service's own settings (``service_meta``): the admin token's hash, this install's id."""

from __future__ import annotations

import hmac

from .base import Tables, hash_token, new_token


class Meta(Tables):
    """``service_meta``: the admin token's hash and this install's id."""

    def ensure_admin_token(self, reset: bool = False) -> str | None:
        """Create the admin token if there is none (or ``reset``): the new
        token, to be shown once; None when one exists already."""
        with self.transaction() as db:
            row = db.execute("SELECT value FROM service_meta WHERE key = 'admin_token_sha256'").fetchone()
            if row is not None and not reset:
                return None
            token = new_token()
            db.execute(
                "INSERT OR REPLACE INTO service_meta (key, value) VALUES ('admin_token_sha256', ?)",
                (hash_token(token),),
            )
            return token

    def instance_id(self) -> str:
        """This install's id on the Docker daemon, made at the first start and
        kept: in every image tag, container name and label the service gives
        (:mod:`referee.bots.sandbox.instance`), so two installs never take each other's."""
        from ...bots.sandbox.instance import new_instance_id

        with self.transaction() as db:
            row = db.execute("SELECT value FROM service_meta WHERE key = 'instance_id'").fetchone()
            if row is not None:
                return str(row[0])
            made = new_instance_id()
            db.execute("INSERT INTO service_meta (key, value) VALUES ('instance_id', ?)", (made,))
            return made

    def is_admin(self, token: str) -> bool:
        row = self.db.execute("SELECT value FROM service_meta WHERE key = 'admin_token_sha256'").fetchone()
        return row is not None and hmac.compare_digest(hash_token(token), str(row[0]))
