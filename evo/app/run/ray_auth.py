"""Token authentication for the Ray that `evo run` starts by itself.

Ray 2.60 turns token authentication on for every new local cluster, says so in a WARNING on each
run, and writes a token into ~/.ray/auth_token on the way (which then also turns it on for any head
later started on that machine with `ray start`). The embedded Ray is private to this process tree,
so it gets a fresh token of its own in the environment its processes inherit: authenticated,
silent, and nothing written to the home directory. A user who set RAY_AUTH_MODE keeps their choice.
The sandboxed evaluation workers never see the token (their environment is an allowlist).
"""

from __future__ import annotations

import os
import secrets

HOW = ("set RAY_AUTH_MODE=token, and RAY_AUTH_TOKEN to what `ray get-auth-token` prints on the head "
       "(on the head node itself ~/.ray/auth_token is read)")
_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")
_saved: dict[str, str | None] | None = None


def reload_ray_config() -> None:
    """Ray reads its mode and token once per process; one imported already must read them again."""
    try:
        from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]
    except ImportError:  # not installed, or another Ray layout: it reads the environment when imported
        return
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def use_private_token() -> None:
    """Before starting the embedded Ray: token mode with a token made for this run only."""
    global _saved
    if os.environ.get("RAY_AUTH_MODE") is not None or _saved is not None:
        return
    _saved = {k: os.environ.get(k) for k in _VARS}
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    reload_ray_config()


def restore() -> None:
    """After the embedded Ray stopped: the environment as it was before `use_private_token`."""
    global _saved
    if _saved is None:
        return
    for k, v in _saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    _saved = None
    reload_ray_config()
