"""Answering a new question: which paradigm to run on it, and its answer.

* :mod:`~ragrouter.answering.ask` — ``ask``'s library part: the question's type, the router's
  choice, the answer, and the stored record of the question;
* :mod:`~ragrouter.answering.question_type` — a question's type without a model call (wording
  cues, then type centroids blended with :mod:`~ragrouter.answering.type_reference`'s);
* :mod:`~ragrouter.answering.lookup` — what answering reads from the store;
* :mod:`~ragrouter.answering.routing` — routers trained on the store's router dataset, their
  predictions stored, a trained router loaded;
* :mod:`~ragrouter.answering.promotion` — a trained router packed as a self-contained MLflow
  model (``routers promote``), the champion ``ask`` and ``serve`` use.
"""
