"""The chat-facing layer: what the model should see, what was said, and what to remember.

:class:`ChatMemory` (:mod:`brain.features.chat.chat_memory`) is the facade a chat backend holds. Its parts,
each with one job, data flowing one way (store -> candidates -> context; exchange -> store -> queue):

- :mod:`brain.features.chat.context` — pure: the sections' candidates -> budget -> prompt (no store access);
- :mod:`brain.features.chat.related_turns` — older turns that match the message (cached;
  :mod:`brain.rules.turn_search`);
- :mod:`brain.features.chat.speakers` — who said a turn: the user's and the assistant's display names;
- :mod:`brain.features.chat.summary_queue` — when a summary is due, and the worker thread that writes them;
- :mod:`brain.features.chat.summaries` — one summary: the model with retries in a deadline, the fallback, health;
- :mod:`brain.features.chat.formation` — memory formation: a summarised window's facts, asked of a model and applied;
- :mod:`brain.features.chat.last_used` — access tracking (``last_used``): where it is written and why.
"""

from brain.features.chat.chat_memory import PERSONA_MAX_SECTIONS, ChatMemory, Exchange, new_conversation_id
from brain.features.chat.context import DROP_PRIORITY, Context, ContextBudget, TokenCounter, assemble_context
from brain.features.chat.formation import Formation, FormationBatch, FormationReport
from brain.features.chat.last_used import AccessTracker
from brain.features.chat.prompt import HEADINGS, SECTIONS, ContextItem, render_prompt
from brain.features.chat.speakers import PersonaName, exchange_speakers
from brain.features.chat.summaries import SummaryJob, SummaryWriter, summary_id
from brain.features.chat.summary_queue import SummaryQueue, SummarySchedule

__all__ = [
    "DROP_PRIORITY",
    "HEADINGS",
    "PERSONA_MAX_SECTIONS",
    "SECTIONS",
    "AccessTracker",
    "ChatMemory",
    "Context",
    "ContextBudget",
    "ContextItem",
    "Exchange",
    "Formation",
    "FormationBatch",
    "FormationReport",
    "PersonaName",
    "SummaryJob",
    "SummaryQueue",
    "SummarySchedule",
    "SummaryWriter",
    "TokenCounter",
    "assemble_context",
    "exchange_speakers",
    "new_conversation_id",
    "render_prompt",
    "summary_id",
]
