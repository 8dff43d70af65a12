"""Who said a turn: the display names :meth:`ChatMemory.record_exchange` stores as each turn's ``speaker``.

The user's name defaults to the entity's name (the conversation's owner), the assistant's to the
persona's (:func:`brain.features.persona.persona_name`). Names follow :func:`brain.model.schemas.check_speaker_name`;
:mod:`brain.rules.turn_search` uses them (a question that names a speaker favours that speaker's turns,
and a turn's lexical document holds its speaker's name). A turn written without a name has none.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from brain.features.persona import current_persona, persona_name
from brain.model.schemas import DocType, valid_speaker_name
from brain.store.events import WriteEvent, WriteSubscriber

if TYPE_CHECKING:
    from brain.store import Store


class PersonaName(WriteSubscriber):
    """The current persona's name, read once and again only after a write that may have changed it
    (a persona document written, or anything deleted: delete events carry no type), here or, through
    the change feed, in another process. Thread-safe."""

    cache = True

    def __init__(self, store: Store):
        self.store = store
        self._lock = threading.Lock()
        self._name: str | None = None
        self._known = False  # whether _name is the current persona's (a persona may have no name)
        self._generation = 0  # writes that may have changed the name
        store.subscribe(self)

    def get(self) -> str | None:
        # the store is read outside this lock: a write (or the change feed's follower) holds the store's
        # lock while it tells this subscriber, so holding both in the other order could deadlock
        with self._lock:
            if self._known:
                return self._name
            generation = self._generation
        name = persona_name(current_persona(self.store))
        with self._lock:
            if self._generation == generation:  # no write changed it meanwhile
                self._name, self._known = name, True
        return name

    def commit(self, event: WriteEvent) -> None:
        if event.op == "delete" or any(m.get("type") == DocType.PERSONA.value for m in event.metadatas or ()):
            with self._lock:
                self._name, self._known = None, False
                self._generation += 1


def exchange_speakers(
    user_name: object, assistant_name: object, entity: str | None, persona: PersonaName
) -> tuple[str | None, str | None]:
    """The (user, assistant) display names of an exchange: the names given, checked, else the defaults."""
    user = valid_speaker_name(user_name, "user_name") if user_name is not None else entity
    assistant = valid_speaker_name(assistant_name, "assistant_name") if assistant_name is not None else persona.get()
    return user, assistant


__all__ = ["PersonaName", "exchange_speakers"]
