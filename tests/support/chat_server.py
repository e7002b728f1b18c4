"""A small local HTTP server speaking the OpenAI chat-completions protocol, for tests that
need a model-backed extractor end to end (the hosted model is outside this machine).

It reads the transcript Quipu's prompt sends and keeps every user turn as a fact, quoted
whole, so what it answers is grounded in the turns by construction. It records each request
(path, headers, body) so a test can see the extractor really called it."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def keep_user_turns(request: dict[str, Any]) -> dict[str, Any]:
    """The chat completion whose content lists every user turn of the transcript as a fact."""
    prompt = request["messages"][-1]["content"]
    transcript = json.loads(prompt[prompt.index("[") :])
    memories = [
        {
            "text": turn["content"],
            "kind": "fact",
            "confidence": 0.9,
            "quote": turn["content"],
            "turn_seq": turn["seq"],
            "supersedes": None,
            "links": [],
        }
        for turn in transcript
        if turn["role"] == "user"
    ]
    message = {"role": "assistant", "content": json.dumps({"memories": memories})}
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": request.get("model"),
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }


class ChatServer:
    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body: dict[str, Any] = json.loads(self.rfile.read(length))
                server.requests.append((self.path, dict(self.headers.items()), body))
                payload = json.dumps(keep_user_turns(body)).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)
