"""Who may read and change what: the caller rules behind entity-bound tokens (:mod:`brain.access.policy`). The
operation layer (:mod:`brain.ops`) applies them to every call; nothing beneath it imports this package."""
