"""Large documents over HTTP (issue 28, DOC-1): above ``document_job_chars`` ``POST
/v1/documents`` answers 202 with an ``ingest_document`` job; ``GET /v1/document-jobs/{id}``
follows it (its submitter or an admin; anyone else 404); the server's worker writes the
document; ``POST /v1/jobs/{id}/cancel`` cancels it like any job; a refusal is the same 4xx as a
short document's, with nothing queued."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from quipu.auth.access import Access
from quipu.composition import load_settings
from quipu.embeddings.local import LocalEmbedder
from quipu.runtime import Runtime
from quipu.surfaces.http.server import build_server
from tests.support.live_server import LiveServer

BODY = "".join(
    f"## Part {n}\n\nValve {n} is checked every {n} days and logged in the book.\n\n"
    for n in range(60)
)


@dataclass
class Served:
    url: str
    runtime: Runtime
    keys: dict[str, str]


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, local_embedder: LocalEmbedder
) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("doc-jobs")
    config = load_settings(
        {"database": str(folder / "srv.db"), "auth": True, "document_job_chars": 2_000},
        environ={},
    )
    app, runtime = build_server(config, local_embedder)
    access: Access = app.state.access
    access.create_tenant("t")
    keys = {
        "admin": access.create_key("t", "admin", agent_id="ops")[1],
        "a1": access.create_key("t", "agent", agent_id="a1", user_id="u1")[1],
        "a2": access.create_key("t", "agent", agent_id="a2", user_id="u2")[1],
    }
    server = LiveServer(app)
    yield Served(server.url, runtime, keys)
    server.close()
    runtime.close()


def _http(served: Served, who: str) -> httpx.Client:
    return httpx.Client(
        base_url=served.url, headers={"Authorization": f"Bearer {served.keys[who]}"}, timeout=30
    )


def test_doc_001_a_large_document_answers_202_and_a_job(served: Served) -> None:
    with _http(served, "a1") as a1, _http(served, "a2") as a2:
        short = a1.post("/v1/documents", json={"content": BODY[:1_500], "title": "Short"})
        assert short.status_code == 201
        sent = a1.post("/v1/documents", json={"content": BODY, "title": "Valve log"})
        assert sent.status_code == 202, sent.text
        queued = sent.json()
        job_id, document_id = queued["job"]["job_id"], queued["document_id"]
        assert queued["job"]["kind"] == "ingest_document" and queued["chunks"] == 60
        again = a1.post("/v1/documents", json={"content": BODY, "title": "Valve log"}).json()
        assert again["job"]["job_id"] == job_id and again["created"] is False
        follow = a1.get(f"/v1/document-jobs/{job_id}").json()
        assert (follow["status"], follow["embedded"], follow["total"]) == ("queued", 0, 60)
        assert a1.get(f"/v1/jobs/{job_id}").status_code == 200  # the generic job route too
        assert a2.get(f"/v1/document-jobs/{job_id}").status_code == 404
        assert a2.get(f"/v1/jobs/{job_id}").status_code == 404

        assert served.runtime.worker.drain() >= 1
        done = a1.get(f"/v1/document-jobs/{job_id}").json()
        assert (done["status"], done["embedded"], done["total"]) == ("succeeded", 60, 60)
        text = a1.get(f"/v1/documents/{document_id}/text", params={"end": len(BODY)}).json()
        assert text["text"] == BODY

        hostile = [
            ({"content": BODY, "title": ""}, 422),
            ({"content": BODY + "\x00", "title": "t"}, 422),
            ({"content": BODY, "title": "t", "media_type": "image/png"}, 422),
            ({"content": BODY, "title": "t", "scope": "tenant"}, 403),
        ]
        for body, status in hostile:
            refused = a1.post("/v1/documents", json=body)
            assert refused.status_code == status, (body, refused.text)
            assert refused.json()["error"]["code"]
        assert a1.get("/v1/document-jobs/not..an/id").status_code in (404, 422)


def test_job_001_a_large_document_job_is_cancelled_like_any_job(served: Served) -> None:
    with _http(served, "a1") as a1, _http(served, "admin") as admin:
        queued = a1.post("/v1/documents", json={"content": BODY, "title": "To cancel"}).json()
        job_id = queued["job"]["job_id"]
        assert admin.post(f"/v1/jobs/{job_id}/cancel").status_code == 200
        served.runtime.worker.drain()
        assert a1.get(f"/v1/document-jobs/{job_id}").json()["status"] == "cancelled"
        assert a1.get(f"/v1/documents/{queued['document_id']}").status_code == 404


def test_doc_001_a_pdf_travels_as_base64(served: Served) -> None:
    pytest.importorskip("pypdf")
    from tests.contract.test_documents_pdf import PAGES, make_pdf

    encoded = base64.b64encode(make_pdf(PAGES)).decode()
    with _http(served, "a1") as a1:
        sent = a1.post(
            "/v1/documents",
            json={"content": encoded, "title": "Pump PDF", "media_type": "application/pdf"},
        )
        assert sent.status_code == 201, sent.text
        assert sent.json()["document"]["media_type"] == "application/pdf"
        for content in ("%%% not base64", base64.b64encode(b"not a pdf").decode()):
            refused = a1.post(
                "/v1/documents", json={"content": content, "title": "x", "media_type": "pdf"}
            )
            assert refused.status_code == 422
            assert refused.json()["error"]["code"] == "invalid_pdf"
