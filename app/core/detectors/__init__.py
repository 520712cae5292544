"""The built-in detectors: pure, deterministic, linear-time scanners for the safety guard.

Contract: every member is a ``Detector`` (``app.core.guards.safety``) whose findings carry a
stable ``type`` in one of three families and propose a default action that the redaction
profile (``app.core.redaction``) may override:

    secret.*     proposes ``drop``        (``app.core.detectors.secrets``)
    pii.*        proposes ``mask``        (``app.core.detectors.pii``)
    injection.*  proposes ``quarantine``  (``app.core.detectors.injection``; and
                                           ``injection.learned``, a linear model whose
                                           weights are a module constant,
                                           ``app.core.detectors.learned``)

Nothing is compiled lazily or cached between calls; the patterns and weights are module
constants. ``INJECTION_DETECTORS`` are the rules alone: rule files (bundles) and the memory
gate's rejection use them; the learned model judges third-party data only (the safety guard
applies its type to low-trust content, the write gate holds what it flags).
"""

from __future__ import annotations

from app.core.detectors.injection import INJECTION_DETECTORS
from app.core.detectors.injection_weights import MODEL
from app.core.detectors.learned import LearnedInjection
from app.core.detectors.pii import PII_DETECTORS
from app.core.detectors.secrets import SECRET_DETECTORS
from app.core.guards.safety import Detector

LEARNED_DETECTORS: tuple[Detector, ...] = (LearnedInjection(MODEL),)
ALL_DETECTORS: tuple[Detector, ...] = (*SECRET_DETECTORS, *PII_DETECTORS, *INJECTION_DETECTORS,
                                       *LEARNED_DETECTORS)

__all__ = ["ALL_DETECTORS", "INJECTION_DETECTORS", "LEARNED_DETECTORS", "PII_DETECTORS",
           "SECRET_DETECTORS"]
