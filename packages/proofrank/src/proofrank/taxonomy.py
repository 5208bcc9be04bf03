"""The technique-difficulty taxonomy behind cognitive simplicity (and the technique labels that
diversity and adaptivity use).

A proof is as accessible as the hardest technique a reader must know to follow it. Techniques
are grouped into four tiers by the background they assume:

1. school mathematics: expansion, factoring, casework, induction, contradiction, residues;
2. standard olympiad tools: AM-GM, Cauchy-Schwarz, pigeonhole, double counting, bijections,
   invariants, Fermat's little theorem, Vieta's formulas, recursions;
3. advanced olympiad tools: Jensen, Muirhead, Holder, lifting the exponent, generating
   functions, the Chinese remainder theorem, quadratic residues, multiplicative order;
4. university mathematics: calculus, linear algebra, group theory, analytic number theory.

Each technique carries *cues*: regular expressions a deterministic detector looks for in a
proof's text. Proofs written by people (and by LLMs) name their tools ("by AM-GM", "by the
pigeonhole principle"), which is what the cues catch; a proof that uses a tool without naming
it is missed, which is why an LLM judge that reads the argument can replace the detector
(:class:`proofrank.judges.LLMJudge`). The cue lists were written together with the shipped
problem set, so the detector's agreement with the shipped labels is an optimistic estimate of
its agreement on other text; the README says so.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping

from proofrank.errors import ProofRankError

__all__ = ["DEFAULT_TAXONOMY", "TIER_NAMES", "Taxonomy", "Technique"]

#: What each tier means, for the judge prompt and the README.
TIER_NAMES: dict[int, str] = {
    1: "school mathematics",
    2: "standard olympiad tools",
    3: "advanced olympiad tools",
    4: "university mathematics",
}


@dataclasses.dataclass(frozen=True)
class Technique:
    """One proof technique: a stable ``label``, a readable ``name``, its ``tier`` (1-4) and the
    regular expressions (case-insensitive) that reveal it in a proof's text."""

    label: str
    name: str
    tier: int
    cues: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.tier not in TIER_NAMES:
            raise ProofRankError(f"technique {self.label!r}: tier must be 1-4, got {self.tier}")
        if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", self.label):
            raise ProofRankError(f"technique label {self.label!r}: use lowercase-with-dashes")


def _t(label: str, name: str, tier: int, *cues: str) -> Technique:
    return Technique(label, name, tier, cues)


_TECHNIQUES = (
    # tier 1: school mathematics
    _t("expansion", "expanding and clearing denominators", 1,
       r"\bexpand(ing|ed|s)?\b", r"multiplying out", r"clearing denominators"),
    _t("factorization", "factoring", 1, r"(?<!prime )\bfactor(ing|ed|s|ization|isation)?\b"),
    _t("substitution", "substitution", 1, r"\bsubstitut", r"\bsetting \$", r"\bplugging in\b"),
    _t("casework", "casework", 1, r"\bcases?\b", r"\bcasework\b",
       r"(?<!quadratic )\bresidues?\b", r"(?<!chinese )\bremainders?\b", r"\bcheck(ing)?\b"),
    _t("sum-of-squares", "writing as a sum of squares", 1, r"\bsums? of squares\b",
       r"\bsquares? (is|are) (always )?non-?negative\b", r"\b(is|are) a square\b",
       r", a square\b", r"\btimes a square\b", r"\bsquare over\b"),
    _t("induction", "mathematical induction", 1, r"\binduct(ion|ive)\b"),
    _t("contradiction", "proof by contradiction", 1, r"\bcontradict"),
    _t("parity", "parity", 1, r"\bparity\b", r"\b(is|are|be) (even|odd)\b"),
    _t("telescoping", "telescoping", 1, r"\btelescop"),
    _t("modular-arithmetic", "modular arithmetic", 1, r"\\pmod", r"\\equiv", r"\bmodulo\b"),
    _t("bounding", "bounding between known quantities", 1, r"\bbounding\b",
       r"\bstrictly between\b"),
    _t("euclidean-algorithm", "the Euclidean algorithm", 1, r"\beuclid"),
    _t("quadratic-formula", "the quadratic formula", 1, r"\bquadratic formula\b"),
    # tier 2: standard olympiad tools
    _t("am-gm", "the AM-GM inequality", 2, r"\bAM-GM\b", r"arithmetic mean.{0,30}geometric mean"),
    _t("cauchy-schwarz", "the Cauchy-Schwarz inequality", 2, r"\bcauchy"),
    _t("pigeonhole", "the pigeonhole principle", 2, r"\bpigeonhole"),
    _t("double-counting", "double counting", 2, r"\bdouble count", r"\bin two ways\b"),
    _t("bijection", "a bijection", 2, r"\bbijecti"),
    _t("extremal-principle", "the extremal principle", 2, r"\bextremal\b"),
    _t("invariant", "an invariant or colouring", 2, r"\binvariant", r"\bcolou?r(ing|ed|s)?\b"),
    _t("fermat-little", "Fermat's little theorem", 2, r"\bfermat"),
    _t("vieta", "Vieta's formulas", 2, r"\bvieta"),
    _t("recursion", "a recursion", 2, r"\brecurs", r"\brecurrence\b"),
    _t("stars-and-bars", "stars and bars", 2, r"\bstars and bars\b"),
    _t("trigonometric-identities", "trigonometric identities", 2, r"product-to-sum",
       r"sum-to-product", r"trigonometric identit"),
    # tier 3: advanced olympiad tools
    _t("jensen", "Jensen's inequality (convexity)", 3, r"\bjensen", r"\bconvex\b", r"\bconcave\b"),
    _t("muirhead", "Muirhead's inequality", 3, r"\bmuirhead", r"\bmajoriz"),
    _t("holder", "Holder's inequality", 3, r"\bh(o|ö)lder"),
    _t("lte", "the lifting-the-exponent lemma", 3, r"lifting[- ]the[- ]exponent", r"\bLTE\b"),
    _t("generating-functions", "generating functions", 3, r"\bgenerating functions?\b"),
    _t("chinese-remainder", "the Chinese remainder theorem", 3, r"\bchinese remainder"),
    _t("quadratic-residues", "quadratic residues", 3, r"\bquadratic residue",
       r"\beuler's criterion\b", r"\blegendre\b"),
    _t("multiplicative-order", "the multiplicative order", 3, r"\bmultiplicative order\b"),
    _t("newton-identities", "Newton's identities (power sums)", 3, r"\bnewton", r"\bpower sums\b"),
    _t("p-adic-valuation", "p-adic valuations", 3, r"\badic valuation\b", r"\bvaluation\b"),
    _t("roots-of-unity", "roots of unity", 3, r"\broots? of unity\b"),
    _t("characteristic-polynomial", "characteristic polynomials of recurrences", 3,
       r"\bcharacteristic (polynomial|roots?|equation)\b"),
    # tier 4: university mathematics
    _t("calculus", "calculus (derivatives, integrals)", 4, r"\bderivative", r"\\int\b",
       r"\bintegral\b", r"\bdifferentiat"),
    _t("linear-algebra", "linear algebra", 4, r"\beigen(value|vector)", r"\bsemidefinite\b",
       r"\bmatri(x|ces)\b"),
    _t("group-theory", "group theory", 4, r"\bgroup\b", r"\bcarmichael"),
    _t("analytic-number-theory", "analytic number theory", 4, r"\bdirichlet's theorem\b",
       r"\bprime number theorem\b"),
    _t("lagrange-multipliers", "Lagrange multipliers", 4, r"\blagrange multiplier"),
)  # fmt: skip


class Taxonomy:
    """A set of :class:`Technique` objects with tier lookup and cue-based detection.

    ``Taxonomy(techniques)`` builds one of your own (labels must be unique); the shipped one is
    :data:`DEFAULT_TAXONOMY`.
    """

    def __init__(self, techniques: Iterable[Technique]) -> None:
        self.techniques: dict[str, Technique] = {}
        for tech in techniques:
            if tech.label in self.techniques:
                raise ProofRankError(f"taxonomy: technique {tech.label!r} listed twice")
            self.techniques[tech.label] = tech
        if not self.techniques:
            raise ProofRankError("taxonomy: no techniques")
        self._cues = {
            label: [re.compile(c, re.IGNORECASE) for c in tech.cues]
            for label, tech in self.techniques.items()
        }
        self.max_tier = max(t.tier for t in self.techniques.values())

    def __contains__(self, label: object) -> bool:
        return label in self.techniques

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.techniques.values())

    def __len__(self) -> int:
        return len(self.techniques)

    @property
    def labels(self) -> list[str]:
        return list(self.techniques)

    def tier(self, label: str) -> int:
        try:
            return self.techniques[label].tier
        except KeyError:
            raise ProofRankError(f"unknown technique {label!r}") from None

    def name(self, label: str) -> str:
        return self.techniques[label].name if label in self.techniques else label

    def check(self, labels: Iterable[str], where: str) -> list[str]:
        """``labels`` if every one is in the taxonomy, else one line naming the first unknown."""
        out = list(labels)
        for label in out:
            if label not in self.techniques:
                known = ", ".join(sorted(self.techniques))
                raise ProofRankError(f"{where}: unknown technique {label!r} (known: {known})")
        return out

    def detect(self, text: str) -> frozenset[str]:
        """The techniques whose cues occur in ``text`` (the deterministic technique judge)."""
        return frozenset(
            label for label, cues in self._cues.items() if any(c.search(text) for c in cues)
        )

    def uses(self, text: str, label: str) -> bool:
        """True when a cue of technique ``label`` occurs in ``text``."""
        if label not in self._cues:
            raise ProofRankError(f"unknown technique {label!r}")
        return any(c.search(text) for c in self._cues[label])

    def describe(self) -> str:
        """The taxonomy as the text block the judge prompts show (one technique a line)."""
        lines = []
        for tier, tier_name in TIER_NAMES.items():
            names = [f"{t.label} ({t.name})" for t in self.techniques.values() if t.tier == tier]
            if names:
                lines.append(f"tier {tier}, {tier_name}: " + "; ".join(names))
        return "\n".join(lines)

    def tiers(self) -> Mapping[str, int]:
        return {label: t.tier for label, t in self.techniques.items()}


#: The shipped taxonomy (41 techniques in 4 tiers).
DEFAULT_TAXONOMY = Taxonomy(_TECHNIQUES)
