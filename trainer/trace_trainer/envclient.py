"""Client of the environment HTTP protocol (envs/protocol/README.md), stdlib only."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

from .events import TrainerError


class EnvClient:
    def __init__(self, base_url: str, timeout: float = 120.0):
        self.base = base_url.rstrip("/")
        if self.base.startswith("http:http"):
            self.base = self.base[len("http:"):]
        self.timeout = timeout

    def _call(self, method: str, path: str, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"content-type": "application/json"} if data else {})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as res:
                return json.loads(res.read() or b"{}")
        except urllib.error.HTTPError as e:
            try:
                err = json.loads(e.read()).get("error", {})
            except (json.JSONDecodeError, AttributeError):
                err = {}
            kind, msg = err.get("type", "http_error"), err.get("message", str(e))
            # 4xx means this client sent something the env refuses: retrying the same request cannot help.
            raise TrainerError(f"Env_{kind}", f"env {method} {path}: HTTP {e.code} {kind}: {msg}", retryable=e.code >= 500) from e
        except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
            raise TrainerError("EnvUnavailable", f"env {method} {path}: {e}", retryable=True) from e

    def info(self) -> dict:
        return self._call("GET", "/v1/info")

    def tasks(self) -> list:
        return self._call("GET", "/v1/tasks")["tasks"]

    def create(self, *, task_id: str | None = None, seed: int | None = None) -> dict:
        return self._call("POST", "/v1/episodes", {"taskId": task_id} if task_id is not None else {"seed": seed})

    def step(self, episode_id: str, action: dict) -> dict:
        return self._call("POST", f"/v1/episodes/{episode_id}/step", {"action": action})

    def evaluate(self, episode_id: str, messages: list, termination: str) -> dict:
        return self._call("POST", f"/v1/episodes/{episode_id}/evaluate", {"messages": messages, "termination": termination})

    def fork(self, episode_id: str) -> str:
        return self._call("POST", f"/v1/episodes/{episode_id}/fork")["episodeId"]

    def delete(self, episode_id: str) -> None:
        self._call("DELETE", f"/v1/episodes/{episode_id}")
