"""A small local HTTP server speaking the OpenAI embeddings protocol, for tests that need an
embedder that can go down on command or count calls. Vectors are deterministic hashed
bags of words, so similar texts are near each other."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

DIM = 64


def bag_vector(text: str, dim: int = DIM) -> list[float]:
    vec = np.zeros(dim, dtype=np.float64)
    for word in re.findall(r"\w+", text.lower()):
        h = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big")
        vec[h % dim] += 1.0
    if not vec.any():
        vec[0] = 1.0
    return (vec / np.linalg.norm(vec)).tolist()


class EmbeddingServer:
    def __init__(self) -> None:
        self.down = False
        self.calls = 0
        self.texts: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body: dict[str, Any] = json.loads(self.rfile.read(length))
                server.calls += 1
                if server.down:
                    self.send_response(503)
                    self.end_headers()
                    self.wfile.write(b'{"error": "down"}')
                    return
                inputs = body["input"]
                server.texts.extend(inputs)
                data = [
                    {"object": "embedding", "index": i, "embedding": bag_vector(t)}
                    for i, t in enumerate(inputs)
                ]
                payload = json.dumps({"object": "list", "data": data, "model": body["model"]})
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(payload.encode())

            def log_message(self, *args: object) -> None:
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
