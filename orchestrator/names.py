"""When two method names are the same name to a reader: the one rule every comparison of names from strangers uses.

A submission named ``gсn`` (a Cyrillic ``с``) or ``ｇｃｎ`` (full-width letters) reads as ``gcn`` on a leaderboard.
So names are compared by their ``skeleton``: Unicode NFKC normalisation (compatibility forms: full-width letters,
ligatures, super- and subscripts), then the Cyrillic and Greek letters that look like Latin ones folded to those
(``CONFUSABLES``, a small table of the letters in common fonts, not Unicode's whole confusables list), then case
folding, with invisible format characters (zero-width spaces and joiners) dropped.
"""

from __future__ import annotations

import unicodedata

# Cyrillic and Greek letters drawn like a Latin letter in common fonts (upper and lower case), and that letter.
_CYRILLIC = ("аАвВсСԁеЕёһНіІјЈкКмМоОрРԛѕЅтТуУхХԝԜӏӀпг", "aabbccdeeehhiijjkkmmooppqssttyyxxwwllnr")
_GREEK = ("αΑβΒεΕΖηΗιΙκΚΜνΝοΟρΡτΤυΥχΧω", "aabbeeznhiikkmvnooppttuyxxw")
CONFUSABLES = str.maketrans(_CYRILLIC[0] + _GREEK[0], _CYRILLIC[1] + _GREEK[1])


def skeleton(name: str) -> str:
    """What ``name`` reads as: NFKC, invisible characters dropped, look-alike letters folded, case folded."""
    normal = unicodedata.normalize("NFKC", name)
    visible = "".join(ch for ch in normal if unicodedata.category(ch) != "Cf")
    return visible.translate(CONFUSABLES).casefold().strip()


def same_name(a: str, b: str) -> bool:
    """Whether two names read the same (``skeleton``): a submission may not take the one of another's results."""
    return skeleton(a) == skeleton(b)
