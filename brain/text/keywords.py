"""Keyword tokens: what a text's words are, for matching by word rather than by meaning.

Lower-case words of any script (inner apostrophes cut: "caroline's" -> "caroline"), ordinals and
zero-padded numbers reduced to the number ("8th", "08" -> "8", so they meet a date's day), stop
words (:mod:`brain.text.stop_words`) dropped and Snowball-stemmed ("painting" -> "paint"). One
definition, so that a query and the documents it is matched against are always cut the same way.
"""

from __future__ import annotations

import re

import Stemmer

from brain.text.stop_words import STOP_WORDS

_WORD_RE = re.compile(r"[^\W_]+(?:'[^\W_]+)*")  # letters and digits of any script, inner apostrophes kept
_ORDINAL_RE = re.compile(r"^(\d+)(?:st|nd|rd|th)$")
_stemmer = Stemmer.Stemmer("english")


def _words(text: str) -> list[str]:
    out = []
    for word in _WORD_RE.findall(text.lower().replace("\u2019", "'")):
        word = word.split("'", 1)[0]
        ordinal = _ORDINAL_RE.match(word)
        if ordinal:  # "8th" matches the "8" of a date
            word = ordinal.group(1)
        if word.isdigit():
            word = word.lstrip("0") or "0"  # "05" and "5" are the same day
        out.append(word)
    return out


#: the words by which a message speaks of its sender, by language: pronouns, possessives and first-person
#: verbs that no other word of the language shares (a question in another language than its memory shares no
#: word with it, so only this rule's own floor lets the asker's memory through; bench/bench_multilingual.py).
#: Left out where English uses the same word for something else ("soy", "ben", "io", "yo", "ma", "mam", the
#: name "Mia", French "j'" as in "J. K. Rowling"), and Polish "ja", which is German and Dutch for "yes";
#: Portuguese "eu" counts unless written "EU". tests/text/test_bm25.py reads the English of the shipped sets
#: through the rule to show that none of it is newly taken for the first person
FIRST_PERSON_BY_LANGUAGE: dict[str, frozenset[str]] = {
    "en": frozenset({"i", "me", "my", "mine", "myself"}),
    "de": frozenset({"ich", "mich", "mir", "mein", "meine", "meinen", "meinem", "meiner", "meines"}),
    "nl": frozenset({"ik", "mij", "mijn", "mezelf"}),
    "fr": frozenset({"je", "moi", "mon", "mes", "suis", "peux", "dois", "veux"}),
    "es": frozenset(
        {
            "mi",
            "mis",
            "mí",
            "mío",
            "mía",
            "míos",
            "mías",
            "conmigo",
            "tengo",
            "puedo",
            "estoy",
            "necesito",
            "quiero",
            "debo",
        }
    ),
    "pt": frozenset(
        {"meu", "minha", "meus", "minhas", "comigo", "posso", "tenho", "estou", "preciso", "quero", "devo"}
    ),
    "it": frozenset({"mio", "miei", "mie", "posso", "devo", "voglio", "sono"}),
    "pl": frozenset(
        {
            "mnie",
            "mną",
            "mój",
            "moja",
            "moje",
            "moi",
            "mojego",
            "mojej",
            "moim",
            "moją",
            "moich",
            "mogę",
            "jestem",
            "muszę",
            "chcę",
        }
    ),
    "tr": frozenset(
        {"benim", "bana", "beni", "bende", "benden", "bence", "kendim", "miyim", "mıyım", "muyum", "müyüm"}
    ),
    "ru": frozenset(
        {
            "я",
            "меня",
            "мне",
            "мной",
            "мною",
            "мой",
            "моя",
            "моё",
            "мое",
            "мои",
            "моего",
            "моей",
            "моему",
            "моим",
            "моими",
            "моих",
            "мою",
        }
    ),
    "ko": frozenset(
        {
            "나",
            "내",
            "저",
            "제",
            "난",
            "날",
            "나는",
            "내가",
            "제가",
            "저는",
            "나의",
            "저의",
            "내게",
            "제게",
            "나를",
            "저를",
            "나도",
            "저도",
            "나한테",
            "저한테",
            "우리",
        }
    ),
    "ar": frozenset(
        {
            "أنا",
            "انا",
            "لي",
            "لدي",
            "لديّ",
            "عندي",
            "نفسي",
            "معي",
            "مني",
            "بي",
            "أنني",
            "إنني",
            "يمكنني",
            "أستطيع",
            "أريد",
            "أحتاج",
        }
    ),
}
FIRST_PERSON_WORDS = frozenset().union(*FIRST_PERSON_BY_LANGUAGE.values())
#: Japanese and Chinese write no spaces between words, so their first person is found inside the text
#: (Chinese 我们 is "we", as English "we" is not the first person here); Japanese mostly leaves the pronoun
#: out, and っけ asks to be reminded of what one said; and Portuguese "eu", by its case
_FIRST_PERSON_UNSPACED = re.compile(r"私|僕|俺|わたし|あたし|自分|っけ|我(?!们|們)|(?<!\w)[Ee]u(?!\w)")
#: Turkish says "my" and "I" in suffixes: a possessive followed by a case ending (köpeğimin, ilacımı), a
#: verb in the first person (çalışıyorum, almalıyım; gidebilir miyim is a word above); Arabic marks "I will"
#: with a prefix (سأسافر); Korean 우리 ("we") is also how one says "my" of one's family and pets
_FIRST_PERSON_TURKISH = re.compile(
    r"\w{2,}(?:[ıiuü]?m(?:[ıiuü]n|[ıiuü]|[ae]|d[ae]n|d[ae]|l[ae]))|\w+(?:[ıiuü]yorum|[ıiuü]yordum|m[ae]l[ıi]y[ıi]m)"
)


def in_first_person(text: str) -> bool:
    """Whether ``text`` speaks of its sender ("When is my kid's birthday?", "Was esse ich gern?",
    "私の犬の名前は？"): a question asked for an entity in the first person is about that entity."""
    words = _words(text)
    if any(w in FIRST_PERSON_WORDS for w in words) or _FIRST_PERSON_UNSPACED.search(text) is not None:
        return True
    return any(w.startswith("سأ") or _FIRST_PERSON_TURKISH.fullmatch(w) for w in words if not w.isascii())


def tokenize(text: str, *, stem: bool = True, stop_words: bool = True) -> list[str]:
    """The keyword tokens of ``text``: lower-case words, stop words dropped, Snowball-stemmed.
    ``stem=False, stop_words=False`` gives the plain words (e.g. to compare names)."""
    words = _words(text)
    if stop_words:
        words = [w for w in words if w not in STOP_WORDS]
    return _stemmer.stemWords(words) if stem else words


__all__ = ["FIRST_PERSON_BY_LANGUAGE", "FIRST_PERSON_WORDS", "in_first_person", "tokenize"]
