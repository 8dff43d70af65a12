"""The one stop-word list: words that say nothing about what a text is about.

Keyword search (:mod:`brain.text.keywords`, used by turn search and specialist routing) drops
:data:`STOP_WORDS`; in chat they are most of the words, and keeping them would let "what did you"
outweigh the one word that matters. The extractive summariser also drops :data:`CHAT_FILLERS`:
acknowledgements such as "okay, thanks" are frequent in chat but never what a summary must keep.
They are not stop words for search, where a user may well look for "thanks".
"""

from __future__ import annotations

#: English function words (lower case)
STOP_WORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had has
    have having he her here hers herself him himself his how i if in into is it its itself just let me
    more most my myself no nor not now of off on once only or other ought our ours ourselves out over own
    same she should so some such than that the their theirs them themselves then there these they this
    those through to too under until up very was we were what when where which while who whom why will
    with would you your yours yourself yourselves""".split()
)

#: conversational fillers, dropped on top of STOP_WORDS when picking a summary's sentences
CHAT_FILLERS = frozenset(
    """yes ok okay oh well really like get got im i'm it's that's dont don't thanks thank sure lets""".split()
)

__all__ = ["CHAT_FILLERS", "STOP_WORDS"]
