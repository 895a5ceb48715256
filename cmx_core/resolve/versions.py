"""A dep's ``version:`` constraint choosing among the recipes its tags match.

``version: ">=3.10,<3.13"`` is a ``packaging`` specifier set. Among the recipes the tags
accept, those whose ``version`` satisfies it remain and the highest version wins, as pip or
Spack pick within a range; each candidate's decision line says which version it has and
whether it satisfies, so ``cmx explain`` shows why. None satisfying is a one-line error
listing every candidate and its version. Two candidates with the same highest version are
ambiguous, as two recipes with the same tags are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cmx_core.errors import ResolveError, UsageError
from cmx_core.recipes.model import Recipe

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    from cmx_core.resolve.decision import Decision

Accepted = list[tuple[Recipe, dict[str, Any]]]


def specifiers(text: str, where: str) -> SpecifierSet:
    """The constraint as a specifier set; a one-line error naming the key otherwise."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet  # deferred: only a dep with a version: range

    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        raise UsageError(f"{where}.version: {text!r} is not a version constraint "
                         "(use packaging's specifiers, e.g. '>=3.10,<3.13')") from None


def parsed(recipe: Recipe) -> Version | None:
    """The recipe's version, or None when it is not a PEP 440 version."""
    from packaging.version import InvalidVersion, Version  # deferred: as in specifiers

    try:
        return Version(str(recipe.version))
    except InvalidVersion:
        return None


def choose(accepted: Accepted, constraint: str, where: str, decision: Decision) -> tuple[Recipe, dict[str, Any]]:
    """The accepted candidate with the highest version that satisfies ``constraint``; the
    reasons go into ``decision``'s candidates."""
    spec = specifiers(constraint, where)
    fitting: list[tuple[Version, Recipe, dict[str, Any]]] = []
    verdicts: dict[str, str] = {}
    for recipe, chosen in accepted:
        version = parsed(recipe)
        if version is None:
            verdicts[recipe.name] = f"version {recipe.version!r} is not a PEP 440 version, so not '{constraint}'"
        elif spec.contains(version, prereleases=True):
            fitting.append((version, recipe, chosen))
            verdicts[recipe.name] = f"version {recipe.version} satisfies '{constraint}'"
        else:
            verdicts[recipe.name] = f"version {recipe.version} does not satisfy '{constraint}'"
    fitting.sort(key=lambda item: item[0], reverse=True)
    winner = fitting[0] if fitting else None
    if winner is not None and len(fitting) > 1 and fitting[1][0] == winner[0]:
        names = ", ".join(f"{r.name} ({r.path})" for v, r, _ in fitting if v == winner[0])
        raise ResolveError(f"{where}.version: '{constraint}': {names} all have version {winner[0]}; "
                           "add a tag that tells them apart")
    for i, cand in enumerate(decision.candidates):
        verdict = verdicts.get(cand.name)
        if verdict is not None and cand.accepted:
            taken = winner is not None and cand.name == winner[1].name
            note = "; the highest that does: chosen" if taken else ("; a higher one is chosen" if
                                                                  cand.name in {r.name for _, r, _ in fitting} else "")
            decision.candidates[i] = cand._replace(accepted=taken, reason=f"all tags match; {verdict}{note}")
    if winner is None:
        shown = "; ".join(f"{r.name} {r.version} does not satisfy '{constraint}' ({r.path})" for r, _ in accepted)
        raise ResolveError(f"{where}.version: no candidate fits: {shown}; "
                           "relax the constraint or add a recipe with a fitting version")
    return winner[1], winner[2]
