"""The composition root (:func:`brain.app.core.open`), start-up, and the operations over a whole store: re-index,
forget, restore, the operator's memory commands, the read-only browse views, a served store over HTTP."""
