"""Serves a Python environment (toy_env.py) over the environment HTTP protocol, so the trainer's
HTTP client is exercised against the real wire format in tests and in the GPU check."""
from __future__ import annotations

import itertools
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_EPISODE = re.compile(r"^/v1/episodes/([^/]+)(?:/(step|evaluate|fork))?$")


class ServedEnv:
    def __init__(self, env, host: str = "127.0.0.1", port: int = 0):
        self.env = env
        self.episodes: dict = {}
        self.requests: list = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self, method):
                n = int(self.headers.get("content-length") or 0)
                try:
                    body = json.loads(self.rfile.read(n)) if n else None
                except json.JSONDecodeError as e:
                    return self._send(400, {"error": {"type": "bad_request", "message": f"body is not JSON: {e}"}})
                with outer._lock:
                    outer.requests.append((method, self.path))
                    status, out = outer.route(method, self.path, body)
                self._send(status, out)

            def do_GET(self):
                self._handle("GET")

            def do_POST(self):
                self._handle("POST")

            def do_DELETE(self):
                self._handle("DELETE")

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.url = f"http://{host}:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def route(self, method, path, body):
        env = self.env
        if path == "/v1/info" and method == "GET":
            return 200, {"info": env.info(), "tools": env.tools(), "systemPrompt": env.system_prompt()}
        if path == "/v1/tasks" and method == "GET":
            return 200, {"tasks": []}
        if path == "/v1/episodes" and method == "POST":
            if not isinstance(body, dict) or not isinstance(body.get("seed"), int):
                return 400, {"error": {"type": "bad_request", "message": "create request: seed: expected an integer"}}
            eid = f"ep{next(self._ids)}"
            self.episodes[eid] = env.reset(body["seed"])
            return 200, {"episodeId": eid, "taskId": f"seed-{body['seed']}", "initialMessages": self.episodes[eid].initial_messages()}
        m = _EPISODE.match(path)
        if not m:
            return 404, {"error": {"type": "not_found", "message": f"no endpoint {path}"}}
        eid, op = m.groups()
        ep = self.episodes.get(eid)
        if ep is None:
            return 404, {"error": {"type": "unknown_episode", "message": f"no episode {eid}"}}
        if method == "DELETE" and op is None:
            del self.episodes[eid]
            return 200, {}
        if method == "POST" and op == "step":
            return 200, ep.step(body["action"])
        if method == "POST" and op == "evaluate":
            return 200, ep.evaluate(body["messages"], body["termination"])
        if method == "POST" and op == "fork":
            new = f"ep{next(self._ids)}"
            self.episodes[new] = ep.fork()
            return 200, {"episodeId": new}
        return 405, {"error": {"type": "method_not_allowed", "message": f"{method} {path}"}}

    def close(self):
        self.server.shutdown()
        self.server.server_close()
