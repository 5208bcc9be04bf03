"""One frozen config for every unlearning method in the harness (trl style: one dataclass).

The defaults are the papers' (RMU: the WMDP code; NPO/SimNPO: open-unlearning). Where the RA^2
abstract is silent the default is the most plausible reading, argued in the README ("Choices").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from ra2_unlearn.errors import UnlearnError

__all__ = ["LATENT_METHODS", "METHODS", "TRAINABLE", "UnlearnConfig", "parse_trainable"]

#: Every method the harness runs. ``ra2`` is the paper's; the rest are its baselines.
METHODS: tuple[str, ...] = ("ga", "graddiff", "npo", "simnpo", "rmu", "ra2")
#: Methods that act on layer-``layer`` hidden states (and by default train only MLP
#: down-projections of a few layers, as the WMDP RMU code does).
LATENT_METHODS: tuple[str, ...] = ("rmu", "ra2")

Method = Literal["ga", "graddiff", "npo", "simnpo", "rmu", "ra2"]
Trainable = Literal["auto", "mlp", "mlp_down", "layers", "all"]
#: What ``trainable`` may be (``mlp_down`` is 0.2's name of ``mlp``).
TRAINABLE: tuple[str, ...] = ("auto", "mlp", "mlp_down", "layers", "all")
Target = Literal["knn", "pca"]


@dataclass(frozen=True)
class UnlearnConfig:
    """What to unlearn with and how (optimiser settings live in ``TrainingArguments``).

    Layers are 0-based decoder-layer indices; ``layer`` is the hooked layer ``l`` whose output
    hidden state the latent methods steer (RMU: layer 7 of Zephyr's 32). ``None`` (the
    default) means the middle layer of whatever model it is used with
    (:func:`ra2_unlearn.modules.default_layer`); :meth:`for_model` resolves and checks it.
    """

    method: Method = "ra2"
    #: l: the layer whose output the forget loss acts on (RMU and RA^2); None = from depth.
    layer: int | None = None
    #: Layers whose parameters train; None = ``(l-2, l-1, l)`` clipped at 0, as in the WMDP code.
    trained_layers: tuple[int, ...] | None = None
    #: ``auto``: MLP output projections of ``trained_layers`` for rmu/ra2 (WMDP), the whole
    #: model for ga/graddiff/npo/simnpo (open-unlearning). ``mlp`` (0.2: ``mlp_down``), the MLP
    #: output projections of ``trained_layers``; ``layers``, every parameter of
    #: ``trained_layers``; ``all``, the whole model: force one choice for every method.
    trainable: Trainable = "auto"
    #: Retain weight: GradDiff/NPO/SimNPO's retain NLL, RMU's and RA^2's retain matching.
    alpha: float = 1.0
    #: RMU: scale c of the random control vector c*u (WMDP default 20; Zephyr used 6.5).
    steering_coeff: float = 20.0
    #: NPO's inverse temperature beta (NPO paper / open-unlearning default 0.1).
    npo_beta: float = 0.1
    #: SimNPO's beta and margin delta (open-unlearning defaults 4.5 and 0).
    simnpo_beta: float = 4.5
    simnpo_delta: float = 0.0
    #: RA^2: nearest retain anchors per forget token.
    k: int = 16
    #: RA^2: kernel temperature tau; None = per token, the mean of its k squared distances
    #: (scale-free: the same default works for any hidden size and activation norm).
    tau: float | None = None
    #: RA^2 target: ``knn`` kernel-weighted mean of the k nearest anchors (the paper's main
    #: form); ``pca`` projects h_f onto the top ``pca_rank`` retain principal directions and
    #: rescales it to the mean retain norm (the variant).
    target: Target = "knn"
    #: RA^2: keep a rank-r PCA basis of the anchors and search neighbours in it (None: full
    #: space). Required for ``target="pca"``.
    pca_rank: int | None = None
    #: RA^2: at most this many anchor vectors (a seeded subsample of retain tokens).
    max_anchors: int = 20000
    #: RA^2: weight of KL(p_ref || p_theta) on retain logits (0 = off, the abstract's "optional").
    retain_kl: float = 0.0
    #: Forget loss positions of RMU (and of RA^2 with ``attract="all"``): ``all`` non-pad
    #: tokens of a forget example (RMU's choice), or ``answer`` (the labelled tokens and the
    #: one position before them).
    forget_tokens: Literal["all", "answer"] = "all"
    #: RA^2: which forget positions are attracted. ``carrying``: those whose frozen-model
    #: prediction is the forgotten next token (the states that recall the answer), exact twins
    #: of a retain state left to the retain loss; ``value``: the carrying positions whose next
    #: token is part of the answer's value (the examples' ``meta["value"]``: the capital, not
    #: "The capital of France is", which a model's own sentence also carries); ``all``: every
    #: ``forget_tokens`` position, twins included (0.1's behaviour, kept as an ablation).
    attract: Literal["carrying", "value", "all"] = "carrying"
    #: RA^2: exclude anchors whose support (the frozen model's next token there) is the
    #: forgotten token of the position (False: 0.1's unfiltered kNN, an ablation).
    exclude_support: bool = True
    #: Extra keyword arguments kept in the manifest (free-form notes).
    notes: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise UnlearnError(f"method {self.method!r}: not one of {', '.join(METHODS)}")
        if self.layer is not None and self.layer < 0:
            raise UnlearnError(f"layer {self.layer}: must be >= 0")
        if self.trained_layers is not None:
            object.__setattr__(self, "trained_layers", tuple(int(i) for i in self.trained_layers))
            if not self.trained_layers or min(self.trained_layers) < 0:
                raise UnlearnError(f"trained_layers {self.trained_layers}: need indices >= 0")
        if self.trainable not in TRAINABLE:
            raise UnlearnError(f"trainable {self.trainable!r}: not one of {', '.join(TRAINABLE)}")
        if self.k < 1:
            raise UnlearnError(f"k {self.k}: need at least one anchor per forget token")
        if self.tau is not None and self.tau <= 0:
            raise UnlearnError(f"tau {self.tau}: must be > 0 (or None for the adaptive default)")
        if self.target not in ("knn", "pca"):
            raise UnlearnError(f"target {self.target!r}: not one of knn, pca")
        if self.target == "pca" and self.pca_rank is None:
            raise UnlearnError("target 'pca' needs pca_rank (the retain subspace's rank)")
        if self.pca_rank is not None and self.pca_rank < 1:
            raise UnlearnError(f"pca_rank {self.pca_rank}: must be >= 1")
        if self.max_anchors < 1:
            raise UnlearnError(f"max_anchors {self.max_anchors}: must be >= 1")
        for name in ("alpha", "steering_coeff", "npo_beta", "simnpo_beta", "retain_kl"):
            if getattr(self, name) < 0 or (name.endswith("beta") and getattr(self, name) == 0):
                raise UnlearnError(f"{name} {getattr(self, name)}: out of range")
        if self.attract not in ("carrying", "value", "all"):
            raise UnlearnError(f"attract {self.attract!r}: not one of carrying, value, all")
        if self.forget_tokens not in ("all", "answer"):
            raise UnlearnError(f"forget_tokens {self.forget_tokens!r}: not one of all, answer")

    @property
    def latent(self) -> bool:
        """Whether the method steers layer-``l`` hidden states (RMU, RA^2)."""
        return self.method in LATENT_METHODS

    @property
    def uses_layer(self) -> bool:
        """Whether ``layer`` means anything for this config: the latent methods hook it, and
        ``mlp``/``layers`` training without explicit ``trained_layers`` trains l-2..l. GA,
        GradDiff, NPO and SimNPO on the whole model use no layer (so none is checked)."""
        return self.latent or (self.resolved_trainable() != "all" and self.trained_layers is None)

    def for_model(self, model: Any) -> UnlearnConfig:
        """This config with ``layer`` resolved for ``model`` (None: the middle layer) and
        checked against its depth where it is used; ``trained_layers`` checked where they
        train (and, for ``mlp``, that each has an MLP output projection). One-line
        :class:`UnlearnError` for an index the model does not have, or a missing module."""
        from ra2_unlearn.modules import check_layer, default_layer, mlp_output_projection

        layer = self.layer
        if layer is None:
            layer = default_layer(model)
        elif self.uses_layer:
            check_layer(model, layer)
        out = replace(self, layer=layer)
        if out.resolved_trainable() != "all":
            for i in out.resolved_trained_layers():
                check_layer(model, i, "trained_layers")
                if out.resolved_trainable() == "mlp":  # refused now, naming what it lacks
                    mlp_output_projection(model, i)
        return out

    def resolved_trained_layers(self) -> tuple[int, ...]:
        """``trained_layers``, or the WMDP default ``(l-2, l-1, l)`` clipped at 0."""
        if self.trained_layers is not None:
            return self.trained_layers
        if self.layer is None:
            raise UnlearnError("layer is None: resolve it with config.for_model(model) first")
        return tuple(range(max(0, self.layer - 2), self.layer + 1))

    def resolved_trainable(self) -> Literal["mlp", "layers", "all"]:
        """The parameter set that trains once ``auto`` (and 0.2's ``mlp_down``) is resolved."""
        if self.trainable == "mlp_down":
            return "mlp"
        if self.trainable != "auto":
            return self.trainable
        return "mlp" if self.latent else "all"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_trainable(text: str) -> tuple[Trainable, tuple[int, ...] | None]:
    """``--trainable`` as ``(trainable, trained_layers)``: ``auto``, ``all``, ``mlp``,
    ``layers`` (of l-2..l), or ``mlp:A-B`` / ``layers:A-B`` / ``layers:A,B`` for explicit
    0-based decoder layers. One-line :class:`UnlearnError` naming the bad part."""
    kind, _, spec = text.strip().partition(":")
    if kind not in ("auto", "all", "mlp", "layers"):
        raise UnlearnError(
            f"--trainable {text!r}: expected auto, all, mlp, layers, mlp:A-B or layers:A-B"
        )
    if not spec:
        return kind, None  # type: ignore[return-value]
    if kind in ("auto", "all"):
        raise UnlearnError(f"--trainable {text!r}: a layer range goes with mlp or layers only")
    layers: list[int] = []
    for part in spec.split(","):
        lo, dash, hi = part.strip().partition("-")
        try:
            a = int(lo)
            b = int(hi) if dash else a
        except ValueError:
            raise UnlearnError(f"--trainable {text!r}: {part!r} is not a layer or A-B") from None
        if a < 0 or b < a:
            raise UnlearnError(f"--trainable {text!r}: {part!r} is not a range of layers >= 0")
        layers.extend(range(a, b + 1))
    return kind, tuple(dict.fromkeys(layers))  # type: ignore[return-value]
