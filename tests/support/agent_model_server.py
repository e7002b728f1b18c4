"""A small local HTTP server speaking the OpenAI chat-completions protocol as a tool-calling
model, for agent framework tests (the hosted model is outside this machine).

Its script, read from the last message of each request:

- a user message starting ``Remember that`` (or ``Remember as KIND:``) -> a call of the
  ``remember`` tool with the rest as ``text`` (kind ``preference`` when it says "prefer");
- any other user message -> a call of the ``recall`` tool with the message as ``query``;
- a tool result -> the final answer ``Done: <the tool's first line>``.

It records every request body, so a test can see which tools and history the agent sent."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def answer(request: dict[str, Any], number: int) -> dict[str, Any]:
    last = request["messages"][-1]
    message: dict[str, Any]
    if last["role"] == "tool":
        first_line = _text(last.get("content")).splitlines()[0]
        message = {"role": "assistant", "content": f"Done: {first_line}"}
        finish = "stop"
    else:
        said = _text(last.get("content")).strip()
        match = re.match(
            r"remember (?:that|as (\w+):)\s*(.+)", said, flags=re.IGNORECASE | re.DOTALL
        )
        if match:
            kind = match.group(1) or ("preference" if "prefer" in said else "fact")
            name, arguments = "remember", {"text": match.group(2), "kind": kind}
        else:
            name, arguments = "recall", {"query": said}
        call = {
            "id": f"call_{number}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    return {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": 0,
        "model": request.get("model", "scripted"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


class AgentModelServer:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body: dict[str, Any] = json.loads(self.rfile.read(length))
                server.requests.append(body)
                payload = json.dumps(answer(body, len(server.requests))).encode()
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
