"""The built-in detectors: pure, deterministic, linear-time scanners for the safety guard.

Contract: every member is a ``Detector`` (``app.core.guards.safety``) whose findings carry a
stable ``type`` in one of three families and propose a default action that the redaction
profile (``app.core.redaction``) may override:

    secret.*     proposes ``drop``        (``app.core.detectors.secrets``)
    pii.*        proposes ``mask``        (``app.core.detectors.pii``)
    injection.*  proposes ``quarantine``  (``app.core.detectors.injection``)

Nothing is compiled lazily or cached between calls; the patterns are module constants.
"""

from __future__ import annotations

from app.core.detectors.injection import INJECTION_DETECTORS
from app.core.detectors.pii import PII_DETECTORS
from app.core.detectors.secrets import SECRET_DETECTORS
from app.core.guards.safety import Detector

ALL_DETECTORS: tuple[Detector, ...] = (*SECRET_DETECTORS, *PII_DETECTORS, *INJECTION_DETECTORS)

__all__ = ["ALL_DETECTORS", "INJECTION_DETECTORS", "PII_DETECTORS", "SECRET_DETECTORS"]
