"""Specialists (the assistant's tools) registered from YAML and found by meaning.

A specialist is described in ``config/specialists.yaml`` (see that file for the format). The
package has one module per job:

* :mod:`~brain.features.specialists.model` -- the YAML model, reading and validating a file whole;
* :mod:`~brain.features.specialists.scoring` -- the score of a specialist for a request and its band
  (pure numpy; the formula is in its docstring);
* :mod:`~brain.features.specialists.classifier` -- the confidence learnt from labelled requests
  (``config/specialists_examples.jsonl``), when there are enough of them;
* :mod:`~brain.features.specialists.registry` -- :class:`SpecialistRegistry`: registration into the
  ``specialists`` Chroma collection, loading from it, the request cache;
* :mod:`~brain.features.specialists.markers` -- the ``SPECIALIST_REQUEST[name:{json}]`` markers in model
  output, checked against the registered params.
"""

from brain.features.specialists.classifier import (
    MIN_EXAMPLES,
    SpecialistClassifier,
    SpecialistExample,
    examples_path,
    load_examples,
)
from brain.features.specialists.markers import MARKER, SpecialistRequest, parse_specialist_requests
from brain.features.specialists.model import (
    DEFAULT_PATH,
    PARAM_TYPES,
    Specialist,
    SpecialistParam,
    SpecialistSemantics,
    load_specialists,
    specialists_from_yaml,
    validate_specialists,
)
from brain.features.specialists.registry import (
    DEFAULT_COLLECTION,
    SETTINGS_FIELDS,
    RegistrationReport,
    SpecialistRegistry,
    normalise_request,
)
from brain.features.specialists.scoring import (
    BANDS,
    CONFIDENCE_MAX_WORDS,
    DEFAULT_LEXICAL_WEIGHT,
    LEXICAL_FLOOR,
    ScoringParams,
    ScoringTable,
    SpecialistBands,
    SpecialistConfidence,
    SpecialistMatch,
    SpecialistVectors,
    SpecialistWeights,
    request_words,
)

__all__ = [
    "MIN_EXAMPLES",
    "SpecialistClassifier",
    "SpecialistExample",
    "examples_path",
    "load_examples",
    "BANDS",
    "CONFIDENCE_MAX_WORDS",
    "DEFAULT_COLLECTION",
    "DEFAULT_LEXICAL_WEIGHT",
    "DEFAULT_PATH",
    "LEXICAL_FLOOR",
    "MARKER",
    "PARAM_TYPES",
    "SETTINGS_FIELDS",
    "RegistrationReport",
    "ScoringParams",
    "ScoringTable",
    "Specialist",
    "SpecialistBands",
    "SpecialistConfidence",
    "SpecialistMatch",
    "SpecialistParam",
    "SpecialistRegistry",
    "SpecialistRequest",
    "SpecialistSemantics",
    "SpecialistVectors",
    "SpecialistWeights",
    "load_specialists",
    "normalise_request",
    "parse_specialist_requests",
    "request_words",
    "specialists_from_yaml",
    "validate_specialists",
]
