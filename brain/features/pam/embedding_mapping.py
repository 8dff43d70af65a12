"""Embeddings: the vectors the store holds for its memories <-> a PAM embeddings file.

An export writes one embedding per memory under the store's embedder name; an import reuses a vector
only when it is labelled with that name, and checks it first, because a foreign file's vectors are
data, not trusted: one of the store's model must have its dimension and a direction, and is stored at
unit length (the store compares by cosine). See docs/pam.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from brain.features.pam.problems import problem_at
from brain.features.pam.spec import EMBEDDINGS_FILE, SCHEMA_VERSION, embedding_id
from brain.model.errors import Problem
from brain.model.vectors import zero_rows
from brain.rules.ranking import to_unit_length

if TYPE_CHECKING:
    from brain.features.pam.read import PamFiles
    from brain.model.results import Document


def embeddings_document(docs: Sequence[Document], memories: list[dict[str, Any]], model: str) -> dict[str, Any]:
    """The embeddings file of ``docs`` (read with their vectors), beside their PAM ``memories``."""
    vectors = [np.ascontiguousarray(_vector_of(doc), dtype=np.float32) for doc in docs]
    return {
        "schema": "portable-ai-memory-embeddings",
        "schema_version": SCHEMA_VERSION,
        "embeddings": [
            {
                "id": embedding_id(doc.id),
                "memory_id": doc.id,
                "model": model,
                "dimensions": int(vector.shape[0]),
                # vectors are computed when a memory is written, so its time is theirs too
                "created_at": mem["temporal"].get("updated_at") or mem["temporal"]["created_at"],
                "vector": vector,
            }
            for doc, mem, vector in zip(docs, memories, vectors)
        ],
    }


def _vector_of(doc: Document) -> np.ndarray:
    if doc.embedding is None:
        raise ValueError(f"memory {doc.id} was read without its vector")  # a bug in the caller, not bad input
    return doc.embedding


def vector_problems(files: PamFiles, model: str, dimension: int) -> list[Problem]:
    """Embeddings labelled with the store's model that cannot be its vectors: another dimension, or no
    direction at all. (Values are finite and match ``dimensions`` already: :func:`read_pam` checks that.)"""
    problems = []
    efile = files.embeddings_path.name if files.embeddings_path else EMBEDDINGS_FILE
    fix = "correct it, or remove the embedding and set the memory's embedding_ref to null to embed it from content"
    for j, emb in enumerate(files.embeddings.values()):  # read_pam refused duplicate ids: j is the file's index
        if emb["model"] != model:
            continue
        who = f"embedding {emb['id']!r} of memory {emb['memory_id']!r}"
        if emb["dimensions"] != dimension:
            problems.append(
                problem_at(
                    efile,
                    f"embeddings[{j}].dimensions",
                    f"{who} is labelled {model}, whose vectors have {dimension} dimensions, but has "
                    f"{emb['dimensions']}; {fix}",
                    j,
                )
            )
        elif emb.get("vector") is not None and zero_rows(emb["vector"], np.float64):
            problems.append(
                problem_at(efile, f"embeddings[{j}].vector", f"{who} is all zeros (no direction); {fix}", j)
            )
    return problems


def usable_vector(emb: Mapping[str, object] | None, model: str) -> tuple[np.ndarray | None, bool]:
    """The embedding's vector, unit length, when it is of the store's model (its dimension checked by
    :func:`vector_problems`), and whether it had to be normalised; (None, False) otherwise."""
    if emb is None or emb["model"] != model or emb.get("vector") is None:
        return None, False
    return to_unit_length(emb["vector"])
