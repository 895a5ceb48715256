"""English sentence splitting for ROUGE-Lsum, the way MLPerf's LLM accuracy scripts do it.

The reference scripts join ``nltk.sent_tokenize(text)`` with newlines before scoring, and
``nltk.sent_tokenize`` is NLTK's Punkt tokenizer with its pretrained English model. The
model (``punkt_tab``) is downloaded at run time by ``nltk.download``, which an offline
machine cannot do, and no package on the index ships it.

So :func:`split_sentences` uses the real model when NLTK finds it installed, and otherwise
runs NLTK's own Punkt algorithm (the same word tokenizer, decision procedure and boundary
realignment) with the compact English parameters below, written for this project: common
abbreviations the English model knows, the words it takes to start sentences, and the
orthographic context of common words. What the learned model
knows beyond that are rare abbreviations and the casing statistics of rare words; on English
news text the two agree on titles (``Mr.``), ``U.S.``-style abbreviations, decimals,
initials, numbers, quotes and brackets, as the tests show case by case.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from functools import lru_cache


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Orthographic-context flags, with the values of NLTK's Punkt (``_ORTHO_*``).
_BEG_UC = 1 << 1  # seen capitalised at the start of a sentence
_MID_UC = 1 << 2  # seen capitalised in the middle of a sentence (headlines, titles)
_MID_LC = 1 << 5  # seen lowercase in the middle of a sentence

# Lowercase abbreviation types (without their final period), as Punkt stores them.
ABBREVIATIONS = _words(
    """
    mr mrs ms messrs dr prof gen col lt maj adm sen rep reps jr sr st ft ave
    jan feb aug sep sept oct nov dec fri
    inc corp co ltd bros cos cie
    ala ariz calif colo conn fla ga ill kan ky mich minn nev okla ore pa va vt wash wis
    n.c n.d n.h n.j n.m n.v n.y w.va d.c l.a u.s u.k u.n u.s.s.r
    a.m p.m ph.d m.b.a a.d s.a l.p
    vs ok mg chg ct sw yr
    c d e f g h k l m n p r s t v w
    """
)

# Words that, capitalised after an abbreviation, start a new sentence (Punkt's
# ``sent_starters``).
SENTENCE_STARTERS = _words(
    """
    according although among both but despite even he however i if in indeed instead it
    many meanwhile moreover most nevertheless nonetheless nor separately similarly since so
    sales some the there these they this though thus under when while yet
    """
)

# Common words, seen both lowercase and capitalised mid-sentence (a news corpus has
# headlines): capitalised after a period they decide nothing by themselves, lowercase
# they continue the sentence, and after an initial they are not a name.
COMMON_WORDS = _words(
    """
    a about above after again against all also although always among an and another any
    are as at back be because been before being below between both but by can could did
    do does during each either even ever every few for from further had has have having he
    her here hers herself him himself his how however if in into is it its itself just last
    later many may meanwhile more moreover most much must my never next no nor not now of
    often on once one only or other others our ours out over perhaps rather several she
    should since so some still such than that the their theirs them then there these they
    this those though through thus to today tomorrow too under until up upon us very was we
    were what when where whether which while who whom whose why will with within without
    would yesterday yet you your yours
    according added also analysts asked officials police critics experts many meanwhile
    nevertheless nonetheless instead indeed despite earlier finally first second third
    here however last new now other people shares sales separately similarly some
    """
)

Splitter = Callable[[str], list[str]]


def split_sentences(text: str) -> list[str]:
    """``nltk.sent_tokenize(text)``: with NLTK's English model when installed, else this module's."""
    return _splitter()(text)


def builtin_split(text: str) -> list[str]:
    """Punkt with this module's English parameters, whether or not NLTK's model is installed."""
    return _builtin_tokenizer()(text)


def splitter_name() -> str:
    """Which splitter :func:`split_sentences` uses: ``nltk-punkt_tab`` or ``cmx-punkt``."""
    return "nltk-punkt_tab" if _nltk_model_installed() else "cmx-punkt"


@lru_cache(maxsize=1)
def _nltk_model_installed() -> bool:
    try:
        # deferred: optional nltk, only when this runs
        import nltk.data  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - nltk comes with rouge-score
        return False
    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
    except LookupError:
        return False
    return True


@lru_cache(maxsize=1)
def _splitter() -> Splitter:
    if _nltk_model_installed():
        import nltk  # deferred: nltk only when this runs (1868 modules)

        def nltk_split(text: str) -> list[str]:
            return list(nltk.sent_tokenize(text))

        return nltk_split
    return _builtin_tokenizer()


@lru_cache(maxsize=1)
def _builtin_tokenizer() -> Splitter:
    # deferred: nltk only when this runs (1868 modules)
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer  # type: ignore[import-untyped]

    params = PunktParameters()
    params.abbrev_types = set(ABBREVIATIONS)
    params.sent_starters = set(SENTENCE_STARTERS)
    params.collocations = set()
    ortho: defaultdict[str, int] = defaultdict(int)
    for word in (COMMON_WORDS | SENTENCE_STARTERS) - {"i"}:  # "I" is capitalised anywhere
        ortho[word] = _BEG_UC | _MID_UC | _MID_LC
    params.ortho_context = ortho
    tokenizer = PunktSentenceTokenizer(params)

    def split(text: str) -> list[str]:
        return list(tokenizer.tokenize(text))

    return split
