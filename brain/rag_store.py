"""``from brain.rag_store import RagStore``: the reference's path to the store (it lives in
:mod:`brain.app.rag_store`)."""

from brain.app.rag_store import RagStore

__all__ = ["RagStore"]
